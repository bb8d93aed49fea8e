;; error: module not found: steel/process
(require-builtin steel/process)
