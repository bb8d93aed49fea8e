;; error: is outside the workspace
(fs-write "/tmp/../tmp/toolhost-escape.txt" "x")
