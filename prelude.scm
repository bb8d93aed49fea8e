;;; toolhost prelude: loaded into every host before any tool file.
;;;
;;; `register-tool` is the stable interface tool files depend on:
;;;   (register-tool "name" "description" '((param type "description" [optional]) ...) procedure)
;;; `define-tool` is the same with less ceremony, and binds the tool as a procedure at once.
;;;
;;; Besides the tools, scripts get some tools' data as values (defined in Rust, each checked and
;;; guarded as the tool it reads through):
;;;   (file-lines path [start] [count])  the file's lines, a list of strings (as fs-read)
;;;   (shell-run cmd [timeout-s])        a hash: "exit-code" (#f if a signal ended it), "stdout", "stderr"
;;;                                      (as shell-exec)
;;;   (grep-matches pattern [glob])      a hash: "matches", a list of hashes with "path" "line" "text",
;;;                                      and "total" (as index-grep)
;;;   (dir-entries [path] [depth])       the paths below a folder, from the workspace root, folders
;;;                                      ending in "/" (as fs-list)

;; Scheme tools' procedures by name, and `define-tool` bodies by name (each taking every
;; parameter: a JSON call fills in the optional ones in Rust and calls the body at once, without
;; building an argument list to take apart). Both tables live in the variables of the closures
;; below, which no script can name: a script reaches a tool only through its guarded procedure. The
;; host takes what it needs from the value of the `let` form at the end of this file, which no
;; name is bound to.
(define %register-scheme-tool #f)
(define %tool-wrapper #f)
(define %check-tool #f)

;; Registers a tool written in Scheme. The procedure receives only the arguments that were given
;; (an optional parameter skipped before a later given one arrives as its type's empty value:
;; "" 0 #f '() or an empty hash map), so it branches on how many it got.
(define (register-tool name description params proc . output)
  (%register-scheme-tool name description params proc #f (if (null? output) #f (car output))))

;; (define-tool (name (param type "description" [optional]) ...)
;;   "description"
;;   [(returns shape)]
;;   body ...)
;;
;; Every parameter is bound in the body: an optional one that was left out holds its type's empty
;; value ("" 0 #f '() or an empty hash map), the same value a skipped one arrives as, so the body
;; treats the empty value as "not given". `(returns shape)` declares the shape of the result (MCP
;; clients see it as `outputSchema`): "integer", "number", "boolean", "list" or "object", or a
;; JSON Schema as a hash map whose "type" is one of them. `register-tool` takes the shape as an
;; optional fifth argument.
(define-syntax define-tool
  (syntax-rules (returns)
    [(_ (name (param type description flag ...) ...) tool-description (returns shape) body ...)
     (begin
       (let ([%tool-body (lambda (param ...) body ...)])
         (%register-scheme-tool (symbol->string 'name)
                                tool-description
                                '((param type description flag ...) ...)
                                (lambda args
                                  (apply %tool-body (%fill-optionals (symbol->string 'name) args)))
                                %tool-body
                                shape))
       (define name (%tool-wrapper (symbol->string 'name))))]
    ;; Without a declared shape: the form above with none (#f).
    [(_ (name (param type description flag ...) ...) tool-description body ...)
     (define-tool (name (param type description flag ...) ...) tool-description (returns #f) body ...)]))

;; Helpers for tool authors.

;; Stops the tool with a message the model sees.
(define (tool-error . parts)
  (error (apply string-append (map (lambda (p) (if (string? p) p (to-string p))) parts))))

;; #t when an optional argument was given: not void and not its type's empty value.
(define (given? value)
  (not (or (void? value)
           (equal? value "")
           (equal? value 0)
           (equal? value #f)
           (null? value)
           (and (hash? value) (hash-empty? value)))))

;; The lines of a string, without their newlines.
(define (string-lines text)
  (if (equal? text "")
      '()
      (split-many (trim-end-matches text "\n") "\n")))

;; (sort items less?): the items in the order `less?` gives, equal ones as they came (a merge sort).
(define (sort items less?)
  (define (merge a b kept)
    (cond [(null? a) (append (reverse kept) b)]
          [(null? b) (append (reverse kept) a)]
          [(less? (car b) (car a)) (merge a (cdr b) (cons (car b) kept))]
          [else (merge (cdr a) b (cons (car a) kept))]))
  (let split ([items items] [n (length items)])
    (if (< n 2)
        items
        (let ([half (quotient n 2)])
          (merge (split (take items half) half) (split (list-tail items half) (- n half)) '())))))

;; Quotes a string for `sh`, so it reaches a command as one word whatever it holds.
(define (shell-quote text)
  (string-append "'" (string-replace text "'" "'\\''") "'"))

;; Checks for tool tests. `toolhost test` runs `*_test.scm` files beside the tools and rewrites
;; `(check-equal? ...)` to `(%check-equal? LINE ...)` so a failure names its line. Each check
;; records its outcome (line, check, passed, expected, actual) and returns #t when it passed.
(define %check-results '())

(define (%check-record line check passed expected actual)
  (set! %check-results (cons (list line check passed expected actual) %check-results))
  passed)

;; The checks recorded so far, newest first, and forgets them (for `toolhost test`).
(define (%take-check-results)
  (let ([results %check-results])
    (set! %check-results '())
    results))

;; (check-equal? actual expected): passes when they are `equal?`.
(define (check-equal? actual expected) (%check-equal? #f actual expected))
(define (%check-equal? line actual expected)
  (%check-record line "check-equal?" (equal? actual expected) expected actual))

;; (check-error? thunk): passes when calling the thunk raises an error.
(define (check-error? thunk) (%check-error? #f thunk))
(define (%check-error? line thunk)
  (let ([outcome (with-handler (lambda (e) (list '%raised e)) (list '%returned (thunk)))])
    (%check-record line "check-error?" (equal? (car outcome) '%raised)
                   (list '%describe "an error") (car (cdr outcome)))))

;; (check-tool "name" json expected): calls the tool with JSON arguments (text, or a hash sent as
;; JSON) through the path a model's call takes (tidy, conversion, guard), and passes when the
;; result, as the model receives it, is `equal?` to expected.
(define (check-tool name arguments expected) (%check-tool #f name arguments expected))

;; The tables of Scheme tools, last: the host takes this form's value (see the top of the file).
(let ([procs (hash)]
      [bodies (hash)]
      ;; Taken now: the guard's entry and registration are the host's, whatever a name is later
      ;; bound to.
      [enter %tool-enter]
      [leave %tool-leave]
      [failed %tool-failed]
      [in-program? %in-program?]
      [register %register-tool])
  (set! %register-scheme-tool
        (lambda (name description params proc body output)
          (let ([key (register name description params proc output)])
            (set! procs (hash-insert procs key proc))
            (set! bodies (if body (hash-insert bodies key body) (hash-remove bodies key)))
            void)))
  ;; The procedure a Scheme tool is bound to: checks the call against the tool's signature and the
  ;; guard, exactly as a call of a Rust tool is checked, then runs the tool's procedure.
  (set! %tool-wrapper
        (lambda (name)
          (lambda args
            (let ([checked (enter name args)])
              ;; A program keeps a record of each call it makes, the result included.
              (if (in-program?)
                  (leave (call-with-exception-handler
                          (lambda (e) (failed e))
                          (lambda () (apply (hash-ref procs name) checked))))
                  (apply (hash-ref procs name) checked))))))
  ;; `check-tool` (below): a call through the JSON call path (tidy, conversion, guard), the
  ;; tool's procedure run on the arguments that path checked.
  (set! %check-tool
        (lambda (line name arguments expected)
          (let* ([text (if (string? arguments) arguments (value->jsexpr-string arguments))]
                 [step (%check-call name text)]
                 [outcome (if (equal? (car step) "run")
                              (let ([real (list-ref step 1)])
                                (with-handler (lambda (e) (%check-call-failed real e))
                                              (%check-call-finish real (apply (hash-ref procs real)
                                                                              (list-ref step 2)))))
                              (list-ref step 1))])
            (if (hash-ref outcome "ok")
                (%check-record line "check-tool" (equal? (hash-ref outcome "result") expected)
                               expected (hash-ref outcome "result"))
                (let ([error (hash-ref outcome "error")])
                  (%check-record line "check-tool" #f expected
                                 (list '%describe (string-append "error (" (hash-ref error "kind") "): "
                                                                 (hash-ref error "message")))))))))
  ;; For the host: a tool's procedure and its define-tool body (#f for register-tool), and the
  ;; wrapper maker.
  (list (lambda (name)
          (cons (hash-ref procs name) (if (hash-contains? bodies name) (hash-ref bodies name) #f)))
        %tool-wrapper))
