;;; Tools for reading code, built on fs-read and index-grep.

(define-tool (read-around (path string "File to read, relative to the workspace root")
                          (line integer "The line to centre on, 1-based (as index-grep prints it)")
                          (context integer "Lines to show before and after it; 10 when left out or 0" optional))
  "Show the lines around one line of a file, numbered: the usual next step after index-grep finds a match."
  (let* ([context (if (> context 0) context 10)]
         [start (max 1 (- line context))]
         [count (+ (- line start) context 1)])
    (when (< line 1)
      (tool-error "line must be 1 or more, got " line))
    (fs-read path start count)))

(define-tool (file-outline (path string "File to outline, relative to the workspace root"))
  "List a source file's definitions (functions, types, classes, modules, impls) with their line numbers, as path:line:text lines. Works for Rust, Python, JavaScript/TypeScript, Go, Scheme and similar languages."
  (index-grep
    "^\\s*(pub(\\([^)]*\\))?\\s+)?(async\\s+)?(export\\s+)?(default\\s+)?(fn|struct|enum|trait|impl|mod|type|const|static|def|class|function|interface|func|\\(define(-tool|-syntax)?)\\b"
    path))

(define-tool (find-todos (glob string "Only search files matching this glob (e.g. *.rs); every file when left out or empty" optional))
  "Find TODO, FIXME, XXX and HACK comments in the workspace, as path:line:text lines."
  (index-grep "\\b(TODO|FIXME|XXX|HACK)\\b" glob))
