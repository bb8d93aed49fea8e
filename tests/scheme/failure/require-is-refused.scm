;; error: `require` is not available to tool scripts
(require "/etc/passwd")
