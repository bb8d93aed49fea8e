//! What a script may bind (design sections 10 and 20): no route from Scheme reaches a tool
//! without the guard, and no program rebinds what tools, the host and other scripts rely on (the
//! tools, the prelude's procedures, toolhost's internals, another file's names), whether it writes
//! `define`, `set!` or `define-syntax`, inside a `begin` or through a macro. Shadowing a name
//! locally stays allowed. Each refused program does not run at all.

use crate::common;

use common::*;
use serde_json::json;
use toolhost::guard::{Action, Guard, Rule};
use toolhost::{Host, HostBuilder};

/// A host in which the shipped Scheme tool `read-around` is denied by name, and everything under
/// `secrets/` by path.
fn guarded_host(dir: &tempfile::TempDir, trusted: bool) -> Host {
    let guard = Guard::default()
        .rule(Rule::new("read-around", Action::Deny).unwrap().reason("read-around is off"))
        .rule(Rule::new("*", Action::Deny).unwrap().path("secrets/**").unwrap());
    let host = HostBuilder::new(dir.path()).guard(guard).trusted_scripts(trusted).build().unwrap();
    assert!(host.load_errors().is_empty(), "{:?}", host.load_errors());
    host
}

fn secret_workspace() -> tempfile::TempDir {
    workspace(&[("secrets/key.pem", "KEY-MATERIAL\n"), ("notes.txt", "plain notes\n")])
}

/// The attacks: each tries to reach a denied tool around the guard, or to rebind something other
/// scripts rely on. Each begins by writing a marker file, to show that a refused program does not
/// run at all.
const ATTACKS: &[&str] = &[
    // The raw procedure tables the host once kept in globals.
    r#"((hash-ref %toolhost-procs "read-around") "notes.txt" 1)"#,
    r#"((hash-ref %toolhost-bodies "read-around") "notes.txt" 1 0)"#,
    // The guard's entry, rebound.
    r#"(set! %tool-enter (lambda (name args) args))"#,
    r#"(define %tool-enter (lambda (name args) args))"#,
    r#"(begin (define ok 1) (define %tool-enter (lambda (name args) args)))"#,
    r#"(define-syntax sneak (syntax-rules () [(_ n v) (set! n v)])) (sneak %tool-enter (lambda (name args) args))"#,
    r#"(define (later) (set! %tool-enter (lambda (name args) args))) (later)"#,
    // The wrapper maker and the registration, rebound for the tools defined later.
    r#"(set! %tool-wrapper (lambda (name) (lambda args "forged")))"#,
    r#"(define (%register-scheme-tool . args) void)"#,
    r#"(set! register-tool (lambda args void))"#,
    // Tools, rebound for the next program.
    r#"(define (fs-read . args) "forged")"#,
    r#"(set! fs-read (lambda args "forged"))"#,
    r#"(define-syntax fs-read (syntax-rules () [(_ x ...) "forged"]))"#,
    r#"(define read-around (lambda args "forged"))"#,
    r#"(define (file-lines . args) (list "forged"))"#,
    // The prelude's procedures and macros, and steel's own.
    r#"(define (string-lines text) (list "forged"))"#,
    r#"(set! tool-error (lambda parts "forged"))"#,
    r#"(set! %check-results (list "forged"))"#,
    r#"(define-syntax define-tool (syntax-rules () [(_ x ...) "forged"]))"#,
    r#"(define (map f xs) (list "forged"))"#,
    r#"(set! car cdr)"#,
    r#"(require-builtin steel/lists)"#,
];

fn attack(host: &mut Host, dir: &tempfile::TempDir, i: usize, attack: &str) {
    let marker = format!("marker-{i}.txt");
    let program = format!("(fs-write \"{marker}\" \"ran\")\n{attack}\n(read-around \"notes.txt\" 1)");
    let outcome = host.eval_to_string(&program);
    let error = outcome.as_ref().err().map(|e| e.message().to_string());
    assert!(!dir.path().join(&marker).exists(), "attack {i} ran: {attack}\n{outcome:?}");
    let error = error.unwrap_or_else(|| panic!("attack {i} was not refused: {attack}\n{outcome:?}"));
    assert!(
        // toolhost's refusal; steel's own for a module's names; or no such table to reach.
        error.contains("may not")
            || error.contains("cannot mutate module-required identifier")
            || error.contains("%toolhost-procs")
            || error.contains("%toolhost-bodies"),
        "attack {i}: {attack}\n{error}"
    );
    // The host is as it was: the guard holds, the tools are the real ones.
    let denied = host.eval(r#"(read-around "notes.txt" 1)"#).unwrap_err();
    assert!(denied.message().contains("read-around is off"), "after attack {i}: {denied}");
    assert_eq!(err_of(&host.call("read-around", json!({"path": "notes.txt", "line": 1}))).0, "denied");
    assert_eq!(host.eval_to_string(r#"(car (file-lines "notes.txt"))"#).unwrap(), "plain notes", "after attack {i}");
    assert!(host.eval_to_string(r#"(fs-read "notes.txt")"#).unwrap().contains("plain notes"), "after attack {i}");
    assert!(host.eval(r#"(fs-read "secrets/key.pem")"#).is_err(), "after attack {i}");
    assert_eq!(host.eval_to_string("(map (lambda (x) (+ x 1)) (list 1 2))").unwrap(), "[2,3]", "after attack {i}");
    assert_eq!(host.eval_to_string(r#"(string-lines "a\nb")"#).unwrap(), r#"["a","b"]"#, "after attack {i}");
}

#[test]
fn no_program_reaches_a_tool_around_the_guard_or_rebinds_what_others_rely_on() {
    let dir = secret_workspace();
    let mut host = guarded_host(&dir, false);
    for (i, text) in ATTACKS.iter().enumerate() {
        attack(&mut host, &dir, i, text);
    }
    // A tool file is held to the same rule, and names the line.
    let tools = tempfile::tempdir().unwrap();
    write(tools.path(), "evil.scm", "(define x 1)\n(set! %tool-enter (lambda (name args) args))\n");
    let mut host = HostBuilder::new(dir.path()).tool_dir(tools.path()).build().unwrap();
    let errors: Vec<String> = host.load_errors().iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("evil.scm:2:") && errors[0].contains("set! %tool-enter"), "{errors:?}");
    assert!(host.eval("x").is_err(), "the refused file ran");
}

#[test]
fn trusted_scripts_are_held_to_the_same_rule_and_their_eval_cannot_unguard_a_tool() {
    let dir = secret_workspace();
    let mut host = guarded_host(&dir, true);
    for (i, text) in ATTACKS.iter().enumerate() {
        attack(&mut host, &dir, i, text);
    }
    // steel's `eval` compiles at run time, out of the check's sight: what it rebinds, the tools'
    // guard does not look up.
    host.eval(r#"(eval '(set! %tool-enter (lambda (name args) args)))"#).unwrap();
    assert_eq!(host.eval_to_string(r#"(%tool-enter "read-around" (list 7))"#).unwrap(), "[7]", "eval rebound it");
    let denied = host.eval(r#"(read-around "notes.txt" 1)"#).unwrap_err();
    assert!(denied.message().contains("read-around is off"), "{denied}");
    assert_eq!(err_of(&host.call("read-around", json!({"path": "notes.txt", "line": 1}))).0, "denied");
}

#[test]
fn shadowing_a_name_locally_stays_allowed() {
    let dir = secret_workspace();
    let mut host = guarded_host(&dir, false);
    let programs = [
        (r#"(let ([fs-read (lambda (p) "mine")]) (fs-read "x"))"#, "mine"),
        ("(define (f fs-read) (set! fs-read 2) fs-read) (f 1)", "2"),
        ("(define (g) (define map 5) (set! map (+ map 1)) map) (g)", "6"),
        ("(let loop ([car 0]) (if (< car 3) (loop (+ car 1)) car))", "3"),
        ("((lambda (%tool-enter) %tool-enter) 7)", "7"),
    ];
    for (program, expected) in programs {
        assert_eq!(host.eval_to_string(program).unwrap(), expected, "{program}");
    }
    // The tools are untouched by the shadows.
    assert!(host.eval_to_string(r#"(fs-read "notes.txt")"#).unwrap().contains("plain notes"));
}

#[test]
fn a_program_redefines_its_own_names_but_not_another_program_s() {
    let dir = secret_workspace();
    let tools = tempfile::tempdir().unwrap();
    write(
        tools.path(),
        "a.scm",
        "(define (helper) \"a\")\n(define-tool (use-helper) \"Calls the helper.\" (helper))\n",
    );
    write(tools.path(), "b.scm", "(define (other) 1)\n(define (helper) \"b\")\n");
    let mut host = HostBuilder::new(dir.path()).tool_dir(tools.path()).build().unwrap();
    let errors: Vec<String> = host.load_errors().iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("b.scm:2:") && errors[0].contains("helper") && errors[0].contains("a.scm"),
        "{errors:?}"
    );
    assert_eq!(ok_text(&host.call("use-helper", json!({}))), "a");
    // Input at the prompt is one program: it may define and redefine its own names.
    host.eval("(define x 1)").unwrap();
    host.eval("(define x 2) (set! x (+ x 1))").unwrap();
    assert_eq!(host.eval_to_string("x").unwrap(), "3");
    let refused = host.eval(r#"(set! helper (lambda () "eval"))"#).unwrap_err();
    assert!(refused.message().contains("a.scm"), "{refused}");
    assert_eq!(ok_text(&host.call("use-helper", json!({}))), "a");
    // The file that defined them defines them again when it is loaded again.
    write(
        tools.path(),
        "a.scm",
        "(define (helper) \"a2\")\n(define-tool (use-helper) \"Calls the helper.\" (helper))\n",
    );
    write(tools.path(), "b.scm", "(define (other) 1)\n");
    let report = host.reload();
    assert!(report.errors.is_empty(), "{report}");
    assert_eq!(ok_text(&host.call("use-helper", json!({}))), "a2");
}
