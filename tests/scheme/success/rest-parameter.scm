;; A last parameter marked rest takes any number of arguments, each checked against its type.
(register-tool "join-words" "Join words with spaces."
  '((first string "The first word") (more string "More words" rest))
  (lambda (first . more) (string-join (cons first more) " ")))

(check-equal (join-words "a") "a")
(check-equal (join-words "a" "b" "c") "a b c")
(check-equal
  (with-handler (lambda (e) "refused") (join-words "a" 5))
  "refused")
