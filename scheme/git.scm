;;; Tools for looking at the workspace's git state, built on shell-run (shell-exec's value form).

;; Runs a git command line and returns its output; a failing git is an error the model sees, with
;; git's own words.
(define (run-git command)
  (let* ([run (shell-run command 60)]
         [out (hash-ref run "stdout")])
    (if (equal? (hash-ref run "exit-code") 0)
        (if (equal? out "") "(no output)\n" out)
        (tool-error "git failed (exit code " (hash-ref run "exit-code") "):\n" (hash-ref run "stderr") out))))

(define-tool (git-diff (path string "Only this file or folder, relative to the workspace root; the whole work tree when left out or empty" optional)
                       (staged boolean "Show what is staged for the next commit instead of unstaged changes; unstaged when left out or false" optional))
  "Show uncommitted changes as a unified diff (git diff), with a summary of changed files first."
  (let* ([scope (if (given? path) (string-append " -- " (shell-quote path)) "")]
         [flags (if staged " --cached" "")])
    (run-git (string-append "git diff --stat" flags scope " && git diff" flags scope))))

(define-tool (git-log (count integer "How many commits to list, newest first; 20 when left out or 0" optional)
                      (path string "Only commits touching this file or folder; all commits when left out or empty" optional))
  "List recent commits as one line each: short hash, date, author, subject."
  (when (< count 0)
    (tool-error "count must be 1 or more, got " count))
  (let* ([n (if (> count 0) count 20)]
         [scope (if (given? path) (string-append " -- " (shell-quote path)) "")])
    (run-git (string-append "git log --date=short --format='%h %ad %an: %s' -n " (number->string n) scope))))
