;;; Tools for reading code, built on fs-read and index-grep.

(define-tool (read-around (path string "File to read, relative to the workspace root")
                          (line integer "The line to centre on, 1-based (as index-grep prints it)")
                          (context integer "Lines to show before and after it; 10 when left out or 0" optional))
  "Show the lines around one line of a file, numbered: the usual next step after index-grep finds a match."
  (when (< line 1)
    (tool-error "line must be 1 or more, got " line))
  (when (< context 0)
    (tool-error "context must be 0 or more, got " context))
  (let* ([context (if (> context 0) context 10)]
         [start (max 1 (- line context))]
         [count (+ (- line start) context 1)])
    (fs-read path start count)))

;; A glob that matches exactly one relative path: metacharacters escaped, anchored at the root.
(define (exact-path-glob path)
  (string-append "/"
                 (foldl (lambda (c text) (string-replace text c (string-append "\\" c)))
                        path
                        '("[" "]" "*" "?" "{" "}"))))

(define-tool (file-outline (path string "File to outline, relative to the workspace root"))
  "List a source file's definitions (functions, types, classes, modules, impls) with their line numbers, as path:line:text lines. Works for Rust, Python, JavaScript/TypeScript, Go, Scheme and similar languages."
  ;; Reading one line first gives the model fs-read's own answer for a missing, binary or
  ;; outside path, instead of an empty outline.
  (fs-read path 1 1)
  (when (starts-with? path "/")
    (tool-error "give the path relative to the workspace root, e.g. src/main.rs"))
  (let* ([relative (if (starts-with? path "./") (substring path 2 (string-length path)) path)]
         [found (grep-matches
                  "^\\s*(pub(\\([^)]*\\))?\\s+)?(async\\s+)?(export\\s+)?(default\\s+)?(fn|struct|enum|trait|impl|mod|type|const|static|def|class|function|interface|func|\\(define(-tool|-syntax)?)\\b"
                  (exact-path-glob relative))]
         [matches (hash-ref found "matches")]
         [more (- (hash-ref found "total") (length matches))])
    (if (null? matches)
        (string-append "no definitions found in " relative "\n")
        (string-append
          (apply string-append
                 (map (lambda (m)
                        (string-append (hash-ref m "path") ":" (number->string (hash-ref m "line")) ":"
                                       (hash-ref m "text") "\n"))
                      matches))
          (if (> more 0) (string-append "... " (number->string more) " more definitions not shown\n") "")))))

(define-tool (find-todos (glob string "Only search files matching this glob (e.g. *.rs); every file when left out or empty" optional))
  "Find TODO, FIXME, XXX and HACK comments in the workspace, as path:line:text lines."
  (index-grep "\\b(TODO|FIXME|XXX|HACK)\\b" glob))
