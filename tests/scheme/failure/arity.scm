;; error: fs-read: expected 1 to 3 arguments (fs-read path [start] [count]), got 4
(fs-read "a.txt" 1 2 3)
