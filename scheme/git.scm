;;; Tools for looking at the workspace's git state, built on shell-exec.

;; Runs a git command line; a failing git is an error the model sees, with git's own words.
(define (run-git command)
  (let ([out (shell-exec command 60)])
    (if (starts-with? out "exit code: 0\n")
        out
        (tool-error "git failed:\n" out))))

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
