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

;; Scheme tools' procedures, by name. The host calls them from here for JSON calls.
(define %toolhost-procs (hash))

;; Registers a tool written in Scheme. The procedure receives only the arguments that were given
;; (an optional parameter skipped before a later given one arrives as its type's empty value:
;; "" 0 #f '() or an empty hash map), so it branches on how many it got.
(define (register-tool name description params proc)
  (let ([key (%register-tool name description params proc)])
    (set! %toolhost-procs (hash-insert %toolhost-procs key proc))
    void))

;; The procedure a Scheme tool is bound to: checks the call against the tool's signature and the
;; guard, exactly as a call of a Rust tool is checked, then runs the tool's procedure.
(define (%tool-wrapper name)
  (lambda args
    (apply (hash-ref %toolhost-procs name) (%tool-enter name args))))

;; (define-tool (name (param type "description" [optional]) ...)
;;   "description"
;;   body ...)
;;
;; Every parameter is bound in the body: an optional one that was left out holds its type's empty
;; value ("" 0 #f '() or an empty hash map), the same value a skipped one arrives as, so the body
;; treats the empty value as "not given".
(define-syntax define-tool
  (syntax-rules ()
    [(_ (name (param type description flag ...) ...) tool-description body ...)
     (begin
       (register-tool (symbol->string 'name)
                      tool-description
                      '((param type description flag ...) ...)
                      (lambda args
                        (apply (lambda (param ...) body ...)
                               (%fill-optionals (symbol->string 'name) args))))
       (define name (%tool-wrapper (symbol->string 'name))))]))

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

;; Quotes a string for `sh`, so it reaches a command as one word whatever it holds.
(define (shell-quote text)
  (string-append "'" (string-replace text "'" "'\\''") "'"))
