;; Absent trailing optionals are absent; a skipped one is its type's empty value.
(register-tool "arity-probe" "Report what arrived."
  '((a string "A") (b integer "B" optional) (c boolean "C" optional))
  (lambda args args))

(check-equal (arity-probe "x") '("x"))
(check-equal (arity-probe "x" 2) '("x" 2))
(check-equal (arity-probe "x" 2 #t) '("x" 2 #t))
;; An integral float is an integer.
(check-equal (arity-probe "x" 2.0) '("x" 2))

;; define-tool fills every absent optional with its empty value.
(define-tool (filled (a string "A") (n integer "N" optional) (s string "S" optional) (l list "L" optional))
  "Report the bound values."
  (list a n s l))
(check-equal (filled "x") '("x" 0 "" ()))
(check-equal (filled "x" 5 "y" '(1)) '("x" 5 "y" (1)))
(check-equal (given? 0) #f)
(check-equal (given? "") #f)
(check-equal (given? "x") #t)
