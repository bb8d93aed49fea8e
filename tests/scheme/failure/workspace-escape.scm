;; error: leaves the workspace
(fs-read "../a.txt")
