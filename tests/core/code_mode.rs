//! Code mode (design section 20): the `scheme` program tool runs a model's program in the host's
//! sandboxed engine, every call it makes guarded and kept in its record, under one deadline, its
//! definitions its own; errors name the program's lines; the catalogue shows every tool as a
//! procedure, and its worked examples run.

use crate::common::*;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolhost::code_mode::{self, ToolsAs, PROGRAM_TOOL};
use toolhost::guard::{Action, Answer, ConfirmRequest, Guard, Rule};
use toolhost::{CallRecord, Host, HostBuilder, Limits};

fn run(host: &mut Host, code: &str) -> CallRecord {
    host.call_json(PROGRAM_TOOL, &json!({ "code": code }).to_string())
}

fn nested(record: &CallRecord) -> &[CallRecord] {
    record.nested.as_deref().expect("a program's record lists its calls")
}

fn limited(dir: &tempfile::TempDir, program: Duration) -> Host {
    let mut limits = Limits::default();
    limits.program = program;
    HostBuilder::new(dir.path()).limits(limits).build().unwrap()
}

#[test]
fn a_program_calls_tools_as_procedures_and_gets_what_it_displayed_then_its_last_value() {
    let dir = workspace(&[("src/one.rs", "// TODO a\nfn a() {}\n// TODO b\n"), ("src/two.rs", "// TODO c\n")]);
    let mut host = host(&dir);
    let program = r#"(define lines (file-lines "src/one.rs"))
(displayln "one.rs has" (length lines) "lines")
(define found (hash-ref (grep-matches "TODO" "*.rs") "matches"))
(list (length found) (filter (lambda (p) (ends-with? p ".rs")) (dir-entries "src")))"#;
    let record = run(&mut host, program);
    assert_eq!(ok_text(&record), "one.rs has 3 lines\n(3 (\"src/one.rs\" \"src/two.rs\"))");
    let calls = nested(&record);
    let tools: Vec<&str> = calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(tools, ["file-lines", "grep-matches", "dir-entries"]);
    assert_eq!(calls[0].arguments, json!({"path": "src/one.rs"}));
    assert_eq!(calls[1].arguments, json!({"pattern": "TODO", "glob": "*.rs"}));
    assert!(calls.iter().all(|c| c.decision.as_ref().is_some_and(|d| d.allows()) && c.result.is_ok()));
    // The record reads back as it was written, nested calls included (the session log keeps it).
    let written = record.to_record_json();
    let read: CallRecord = serde_json::from_value(written.clone()).unwrap();
    assert_eq!(read.nested.as_ref().map(Vec::len), Some(3));
    assert_eq!(written["nested"][2]["tool"], "dir-entries");
    // A call of another tool has no `nested`.
    assert!(host.call_json("fs-read", r#"{"path": "a.txt", "count": 1}"#).nested.is_none());
}

#[test]
fn the_result_is_capped_to_output_chars_and_a_program_printing_a_gigabyte_stays_bounded() {
    let dir = workspace(&[]);
    let mut limits = Limits::default();
    limits.output_chars = 2_000;
    let mut host = HostBuilder::new(dir.path()).limits(limits).build().unwrap();
    // 100,000 times 10,000 characters: a gigabyte displayed.
    let program = r#"(define chunk (make-string 10000 #\x))
(let loop ([i 0]) (if (< i 100000) (begin (display chunk) (loop (+ i 1))) "done"))"#;
    let record = run(&mut host, program);
    let text = ok_text(&record);
    assert!(text.chars().count() <= 2_000, "{} characters", text.chars().count());
    assert!(text.starts_with("xxxx") && text.contains("more characters"), "{}", &text[text.len() - 200..]);
}

#[test]
fn each_call_passes_the_guard_and_a_program_can_catch_a_denial_and_go_on() {
    let dir = workspace(&[("secrets/key.txt", "hunter2\n"), ("notes.txt", "fine\n")]);
    let guard = Guard::default()
        .rule(Rule::new("fs-*", Action::Deny).unwrap().path("secrets/**").unwrap().reason("secrets stay private"));
    let mut host = HostBuilder::new(dir.path()).guard(guard).build().unwrap();
    let program = r#"(define secret
  (with-handler (lambda (e) (string-append "refused: " (error-object-message e)))
                (file-lines "secrets/key.txt")))
(list secret (file-lines "notes.txt"))"#;
    let record = run(&mut host, program);
    let text = ok_text(&record);
    assert!(text.contains("refused: file-lines: denied: secrets stay private"), "{text}");
    assert!(text.contains("(\"fine\")") && !text.contains("hunter2"), "{text}");
    let calls = nested(&record);
    assert!(matches!(calls[0].decision, Some(toolhost::Decision::Deny { .. })), "{:?}", calls[0].decision);
    assert_eq!(calls[0].result.as_ref().unwrap_err().kind().as_str(), "denied");
    assert!(calls[1].result.is_ok());
    // Not caught, the denial ends the program with its kind, naming the line and the tool.
    let record = run(&mut host, "(define x 1)\n(fs-read \"secrets/key.txt\")");
    let (kind, message) = err_of(&record);
    assert_eq!(kind, "denied");
    assert!(message.starts_with("line 2: fs-read: denied: secrets stay private"), "{message}");
    assert!(message.contains("  2 | (fs-read \"secrets/key.txt\")"), "{message}");
}

#[test]
fn a_confirm_rule_inside_a_program_asks_with_that_call_s_preview_and_a_no_is_a_catchable_denial() {
    let dir = workspace(&[("notes.txt", "old\n")]);
    let asked: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let seen = Arc::clone(&asked);
    let confirmer = Arc::new(move |request: &ConfirmRequest<'_>| {
        seen.lock().unwrap().push((request.tool.to_string(), request.preview.to_string()));
        Answer { yes: false, by: "test-person".into() }
    });
    let guard = Guard::default().rule(Rule::new("fs-write", Action::Confirm).unwrap());
    let mut host = HostBuilder::new(dir.path()).guard(guard.clone()).confirmer(confirmer).build().unwrap();
    let program = r#"(with-handler (lambda (e) (error-object-message e)) (fs-write "notes.txt" "new\n"))"#;
    let text = ok_text(&run(&mut host, program));
    assert!(text.contains("fs-write: denied: the person declined this call"), "{text}");
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].0, "fs-write");
    assert!(asked[0].1.contains("-old") && asked[0].1.contains("+new"), "the preview is the diff: {}", asked[0].1);
    assert_eq!(std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(), "old\n");
    // With nobody to ask, confirm means deny.
    let mut host = HostBuilder::new(dir.path()).guard(guard).build().unwrap();
    let record = run(&mut host, r#"(fs-write "notes.txt" "new\n")"#);
    let (kind, message) = err_of(&record);
    assert_eq!(kind, "denied");
    assert!(message.contains("there is no one to ask"), "{message}");
    assert!(matches!(nested(&record)[0].decision, Some(toolhost::Decision::Confirm { answer: false, .. })));
}

#[test]
fn errors_name_the_program_s_own_line_and_what_failed() {
    let dir = workspace(&[]);
    let mut host = host(&dir);
    for empty in ["", "  \n; only a comment\n"] {
        let (kind, message) = err_of(&run(&mut host, empty));
        assert_eq!(kind, "bad_arguments");
        assert!(message.contains("holds no expression"), "{message}");
    }
    let (kind, message) = err_of(&run(&mut host, "(define x 1)\n(display (+ x 2)"));
    assert_eq!(kind, "script_error");
    assert!(message.starts_with("cannot read the program: line 2, column 1: `(` is never closed"), "{message}");
    let (_, message) = err_of(&run(&mut host, "(define (half n) (/ n 2))\n(displayln \"so far\")\n(car (half 4))"));
    assert!(message.starts_with("line 3: "), "{message}");
    assert!(message.contains("  3 | (car (half 4))"), "{message}");
    assert!(message.contains("what the program displayed before it:\nso far"), "{message}");
    // An error raised inside a Scheme tool the program called names the program's line and the
    // tool's kind.
    let (kind, message) = err_of(&run(&mut host, "(define n 1)\n\n(read-around \"missing.rs\" n)"));
    assert_eq!(kind, "tool_failed");
    assert!(message.starts_with("line 3: fs-read: no such file: missing.rs"), "{message}");
    assert!(message.contains("tool_failed"), "{message}");
}

#[test]
fn nothing_a_program_defines_outlasts_it_and_no_program_rebinds_what_others_rely_on() {
    let dir = workspace(&[]);
    let mut host = host(&dir);
    assert_eq!(ok_text(&run(&mut host, "(define (helper) 41)\n(+ (helper) 1)")), "42");
    let (_, message) = err_of(&run(&mut host, "(helper)"));
    assert!(message.contains("helper"), "{message}");
    // A program's own `fs-read` is local to it; the next program gets the tool.
    assert_eq!(ok_text(&run(&mut host, "(define (fs-read p) \"mine\")\n(fs-read \"a.txt\")")), "\"mine\"");
    assert!(ok_text(&run(&mut host, "(fs-read \"a.txt\" 1 1)")).contains("line 1"));
    for (program, refusal) in [
        ("(set! fs-read (lambda (p) \"x\"))", "set! fs-read"),
        ("(set! sort 1)", "set! sort"),
        ("(register-tool \"t\" \"d\" '() (lambda () 1))", "cannot register tools"),
        ("(%register-scheme-tool \"t\" \"d\" '() (lambda () 1) #f #f)", "cannot register tools"),
        ("(require \"other.scm\")", "`require` is not available"),
        ("(eval '(+ 1 2))", "eval"),
        ("(scheme \"(+ 1 2)\")", "Scheme code cannot call the program tool"),
        ("(check-tool \"fs-read\" \"{}\" 1)", "check-tool: it is for tool tests"),
        ("(define-syntax m (syntax-rules () [(_) 1]))", "cannot define macros"),
        ("(open-input-file \"a.txt\")", "cannot open the file system"),
        ("(spawn-native-thread (lambda () 1))", "threads are not available"),
        // steel's process and network modules are not in the engine at all.
        ("(spawn-process (process-builder \"sh\" (list \"-c\" \"touch x\")))", "spawn-process"),
        ("(tcp-connect \"127.0.0.1:80\")", "tcp-connect"),
    ] {
        let (_, message) = err_of(&run(&mut host, program));
        assert!(message.contains(refusal), "{program}: {message}");
    }
    assert!(host.tool("t").is_none());
    assert!(ok_text(&run(&mut host, "(length (sort (list 3 1 2) <))")).contains('3'));
}

#[test]
fn only_the_program_s_own_calls_are_recorded_and_a_failed_scheme_tool_leaves_the_record_straight() {
    let dir = workspace(&[("b.rs", "fn b() {}\n")]);
    let mut host = host(&dir);
    let program = r#"(define around (read-around "b.rs" 1))
(define missing (with-handler (lambda (e) "caught") (read-around "nope.rs" 1)))
(list (string-length around) missing (length (file-lines "b.rs")))"#;
    let record = run(&mut host, program);
    assert!(ok_text(&record).ends_with("\"caught\" 1)"), "{}", ok_text(&record));
    let calls = nested(&record);
    let tools: Vec<&str> = calls.iter().map(|c| c.tool.as_str()).collect();
    // read-around reads through fs-read: that call is read-around's work, not the program's.
    assert_eq!(tools, ["read-around", "read-around", "file-lines"]);
    assert!(calls[0].result.as_ref().is_ok_and(|r| r.as_str().is_some_and(|t| t.contains("fn b"))));
    assert_eq!(calls[1].result.as_ref().unwrap_err().kind().as_str(), "tool_failed");
    assert!(calls[2].result.is_ok());
}

#[test]
fn a_record_keeps_a_program_s_first_thousand_calls_and_counts_the_rest() {
    let dir = workspace(&[]);
    let mut host = host(&dir);
    let program = "(let loop ([i 0]) (if (< i 1500) (begin (file-lines \"a.txt\" 1 1) (loop (+ i 1))) i))";
    let record = run(&mut host, program);
    assert_eq!(ok_text(&record), "1500");
    assert_eq!(nested(&record).len(), 1000);
    assert!(
        record.notes.iter().any(|n| n.contains("made 1500 tool calls") && n.contains("first 1000")),
        "{:?}",
        record.notes
    );
}

#[test]
fn one_deadline_covers_the_program_and_its_calls_and_the_next_program_works() {
    let dir = workspace(&[]);
    let mut host = limited(&dir, Duration::from_secs(1));
    for program in ["(let loop () (loop))", "(shell-run \"sleep 30\")", "(shell-exec \"sleep 30\")"] {
        let started = Instant::now();
        let record = run(&mut host, program);
        let (kind, message) = err_of(&record);
        assert_eq!(kind, "timeout", "{program}");
        assert!(message.contains("[limits] program_s"), "{message}");
        assert!(started.elapsed() < Duration::from_secs(20), "{program} took {:?}", started.elapsed());
        assert_eq!(ok_text(&run(&mut host, "(+ 1 2)")), "3", "after {program}");
    }
    // A million deep is fine; without end, the stack's bound ends it with an error.
    let mut host = limited(&dir, Duration::from_secs(60));
    let deep = "(define (depth n) (if (= n 0) 0 (+ 1 (depth (- n 1)))))\n(depth 1000000)";
    assert_eq!(ok_text(&run(&mut host, deep)), "1000000");
    let record = run(&mut host, "(define (forever n) (+ 1 (forever n)))\n(forever 1)");
    assert!(err_of(&record).1.contains("stack overflowed"), "{:?}", record.result);
    assert_eq!(ok_text(&run(&mut host, "(+ 1 2)")), "3");
}

#[test]
fn the_catalogue_shows_every_tool_as_a_procedure_and_its_worked_examples_run() {
    let dir = workspace(&[
        ("README.md", "# hi\nTODO one\n"),
        ("docs/b.md", "TODO two\nTODO three\n"),
        ("c.rs", "// TODO\n// TODO\n// TODO\n"),
    ]);
    let tools = tempfile::tempdir().unwrap();
    write(
        tools.path(),
        "count.scm",
        "(define-tool (count-lines (path string \"File to count\")) \"Count a file's lines.\" (returns \"integer\") (length (file-lines path)))",
    );
    let mut host = HostBuilder::new(dir.path()).tool_dir(tools.path()).build().unwrap();
    let specs = host.specs();
    let catalogue = code_mode::catalogue(&specs);
    for line in [
        "(fs-read path [start] [count]) ; Read a text file's lines",
        "(shell-exec cmd [timeout-s])",
        "(count-lines path) -> integer ; Count a file's lines",
        "(dir-entries [path] [depth]) -> list of paths",
    ] {
        assert!(catalogue.contains(line), "{line} in:\n{catalogue}");
    }
    assert!(!catalogue.contains("(scheme code)"));
    let examples = code_mode::EXAMPLES.trim_start_matches("Examples:\n");
    let first = examples.split("; lines per").next().unwrap();
    assert_eq!(ok_text(&run(&mut host, first)), r#"(("c.rs" . 3) ("docs/b.md" . 2) ("README.md" . 1))"#);
    let record = run(&mut host, examples);
    assert_eq!(ok_text(&record), r#"(("README.md" 2) ("docs/b.md" 2))"#);
    // The program tool is offered with the catalogue as its description, alone or beside the
    // tools; by default each tool is offered and the program tool is not.
    let code = code_mode::offered(&specs, ToolsAs::Code);
    assert_eq!(code.iter().map(|s| s.name().to_string()).collect::<Vec<_>>(), [PROGRAM_TOOL]);
    assert_eq!(code.get(PROGRAM_TOOL).unwrap().description, catalogue);
    let json = code_mode::offered(&specs, ToolsAs::Json);
    assert!(json.get(PROGRAM_TOOL).is_none() && json.get("fs-read").is_some());
    let both = code_mode::offered(&specs, ToolsAs::Both);
    assert_eq!(both.len(), specs.len());
}

#[test]
fn a_host_whose_scripts_are_trusted_offers_no_programs() {
    let dir = workspace(&[]);
    let mut host = HostBuilder::new(dir.path()).trusted_scripts(true).build().unwrap();
    assert!(host.tool(PROGRAM_TOOL).is_none());
    assert_eq!(err_of(&run(&mut host, "(+ 1 2)")).0, "unknown_tool");
    let value: Value =
        serde_json::to_value(host.call_json("fs-read", r#"{"path":"a.txt","count":1}"#).to_json()).unwrap();
    assert_eq!(value["ok"], true);
}
