;; A tool's refusal is an ordinary Scheme error a script can catch.
(define (error-text thunk)
  (with-handler (lambda (e) (error-object-message e)) (thunk)))

(check-equal (string-contains? (error-text (lambda () (fs-read "../secret"))) "leaves the workspace") #t)
(check-equal (string-contains? (error-text (lambda () (fs-read "a.txt" "x"))) "argument 2 (start) must be an integer") #t)
(check-equal (string-contains? (error-text (lambda () (tool-error "bad input: " 7))) "bad input: 7") #t)
