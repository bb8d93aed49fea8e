//! Tools written in Scheme (design section 8): register-tool and define-tool, optional parameters,
//! loading tool folders, reporting broken files, the script sandbox and the per-call time limit.

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::json;
use toolhost::{HostBuilder, Limits};

const WORD_COUNT: &str = r#"
;; The register-tool form, exactly as tool files in the wild write it.
(register-tool "word-count"
  "Count the words of a file."
  '((path string "File to count, relative to the workspace")
    (min-length integer "Ignore shorter words; all words when left out" optional))
  (lambda (path . rest)
    (let* ([min (if (null? rest) 0 (car rest))]
           [words (split-whitespace (string-join (file-lines path) " "))])
      (length (filter (lambda (w) (>= (string-length w) min)) words)))))
"#;

fn word_count_workspace() -> tempfile::TempDir {
    workspace(&[("words.txt", "a bb ccc dddd\neeeee ff\n"), (".toolhost/tools/word-count.scm", WORD_COUNT)])
}

#[test]
fn a_scheme_tool_with_an_optional_parameter_works_from_scheme_and_json() {
    let dir = word_count_workspace();
    let mut host = host(&dir);
    assert_eq!(host.eval_to_string(r#"(word-count "words.txt")"#).unwrap(), "6");
    assert_eq!(host.eval_to_string(r#"(word-count "words.txt" 3)"#).unwrap(), "3");
    assert_eq!(host.call("word-count", json!({"path": "words.txt"})).result.unwrap(), json!(6));
    assert_eq!(host.call("word-count", json!({"path": "words.txt", "min-length": 4})).result.unwrap(), json!(2));
    // Scheme tools follow the same argument rules as Rust tools.
    let err = host.eval(r#"(word-count "words.txt" "x")"#).unwrap_err();
    assert!(err.message().contains("word-count: argument 2 (min-length) must be an integer, got \"x\""), "{err}");
    let err = host.eval("(word-count)").unwrap_err();
    assert!(err.message().contains("(word-count path [min-length]), got 0"), "{err}");
    let (kind, message) = err_of(&host.call("word-count", json!({"path": "words.txt", "min": 4})));
    assert_eq!(kind, "unknown_argument");
    assert!(message.contains("path, min-length"), "{message}");
}

#[test]
fn define_tool_binds_every_parameter_with_empty_values_for_absent_ones() {
    let dir = workspace(&[(
        ".toolhost/tools/greet.scm",
        r#"
(define-tool (greet (name string "Who to greet")
                    (times integer "How often; once when left out" optional)
                    (shout boolean "Upper-case it; no when left out" optional))
  "Greet someone."
  (let* ([n (if (> times 0) times 1)]
         [text (string-append "hello " name)])
    (string-join (map (lambda (_) (if shout (string-upcase text) text)) (range 0 n)) " ")))
;; define-tool binds the tool at once, so the same file can use it.
(define greeting (greet "file"))
"#,
    )]);
    let mut host = host(&dir);
    assert_eq!(host.eval_to_string("greeting").unwrap(), "hello file");
    assert_eq!(host.eval_to_string(r#"(greet "a" 2)"#).unwrap(), "hello a hello a");
    assert_eq!(host.call("greet", json!({"name": "b", "shout": true})).result.unwrap(), json!("HELLO B"));
    let help = toolhost::repl::tool_help(&host, "greet");
    assert!(help.starts_with("(greet name [times] [shout])"), "{help}");
}

#[test]
fn a_broken_file_is_reported_with_file_line_and_message_and_the_rest_still_load() {
    let dir = workspace(&[
        (".toolhost/tools/a-good.scm", "(define-tool (one) \"One.\" 1)\n"),
        (".toolhost/tools/b-broken.scm", "(define x 1)\n\n(car '())\n"),
        (".toolhost/tools/c-unbalanced.scm", "(define-tool (two) \"Two.\"\n  2\n"),
        (".toolhost/tools/d-good.scm", "(define-tool (three) \"Three.\" 3)\n"),
    ]);
    let mut host = HostBuilder::new(dir.path()).build().unwrap();
    let errors: Vec<String> = host.load_errors().iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].contains("b-broken.scm:3: ") && errors[0].contains("car"), "{errors:?}");
    assert!(errors[1].contains("c-unbalanced.scm:1: cannot read it: at column 1, `(` is never closed"), "{errors:?}");
    assert_eq!(host.call("one", json!({})).result.unwrap(), json!(1));
    assert_eq!(host.call("three", json!({})).result.unwrap(), json!(3));
    // The tool the unbalanced file meant to define says why it is missing.
    let err = host.eval("(two)").unwrap_err();
    assert!(err.message().contains("two is not defined: the file that defines it failed to load"), "{err}");
}

#[test]
fn register_tool_refuses_bad_definitions_naming_tool_and_parameter() {
    let dir = workspace(&[]);
    let mut host = host(&dir);
    let err = host
        .eval(r#"(register-tool "bad" "Bad." '((a string "A" optional) (b string "B")) (lambda args 1))"#)
        .unwrap_err();
    assert!(
        err.message().contains("\"bad\"") && err.message().contains("\"b\" comes after optional parameter \"a\""),
        "{err}"
    );
    let err = host.eval(r#"(register-tool "fs-read" "Again." '() (lambda () 1))"#).unwrap_err();
    assert!(err.message().contains("already registered"), "{err}");
    let err = host.eval(r#"(register-tool "odd" "Odd." '((a text "A")) (lambda (a) a))"#).unwrap_err();
    assert!(err.message().contains("unknown type \"text\""), "{err}");
    for taken in ["map", "define-tool", "file-lines"] {
        let err = host.eval(&format!(r#"(register-tool "{taken}" "x" '() (lambda () 1))"#)).unwrap_err();
        assert!(err.message().contains("already a Scheme procedure"), "{err}");
    }
    assert_eq!(host.eval_to_string("(map (lambda (x) (+ x 1)) (list 1))").unwrap(), "[2]");
    let err = host.eval(r#"(register-tool "has space" "x" '() (lambda () 1))"#).unwrap_err();
    assert!(err.message().contains("cannot be sent"), "{err}");
}

#[test]
fn scripts_cannot_reach_files_processes_or_the_network_except_through_tools() {
    let dir = workspace(&[]);
    let secret = dir.path().join("a.txt").display().to_string();
    let mut host = host(&dir);
    for attempt in [
        "(require-builtin steel/process)".to_string(),
        "(require-builtin steel/filesystem)".to_string(),
        "(require-builtin steel/tcp)".to_string(),
        "(command \"ls\" '())".to_string(),
        "(#%prim.command \"ls\" '())".to_string(),
        format!("(open-input-file \"{secret}\")"),
        "(delete-file! \"a.txt\")".to_string(),
        "(read-dir \".\")".to_string(),
        "(env-var \"HOME\")".to_string(),
        "(eval '(+ 1 2))".to_string(),
        "(spawn-native-thread (lambda () 1))".to_string(),
        "(Engine::new)".to_string(),
        "(read-to-string)".to_string(),
        // The compiler's expander would run the module loader on a require built at run time.
        format!("(#%expand (list (string->symbol \"require\") \"{secret}\"))"),
        "(eval-string \"(+ 1 2)\")".to_string(),
        "(channels/new)".to_string(),
        "(mutex)".to_string(),
        "(read-line-from-port (stdin))".to_string(),
        format!("(require \"{secret}\")"),
    ] {
        assert!(host.eval(&attempt).is_err(), "{attempt} should fail");
    }
    // A tool file that tries is refused as a whole, and says why.
    let dir = workspace(&[(".toolhost/tools/sneaky.scm", "(require \"/etc/hostname.scm\")\n")]);
    let host = HostBuilder::new(dir.path()).build().unwrap();
    let errors = host.load_errors();
    assert_eq!(errors.len(), 1);
    assert!(errors[0].message().contains("`require` is not available"), "{}", errors[0]);
    // Trusted scripts get steel's own procedures back.
    let dir = workspace(&[]);
    let mut trusted = HostBuilder::new(dir.path()).trusted_scripts(true).build().unwrap();
    assert!(trusted.eval("(procedure? command)").is_ok());
}

#[test]
fn a_runaway_scheme_tool_times_out_and_the_host_keeps_working() {
    let dir = workspace(&[(
        ".toolhost/tools/spin.scm",
        "(define (spin) (spin))\n(define-tool (spinner) \"Never returns.\" (spin))\n(define-tool (fine) \"Returns.\" 42)\n",
    )]);
    let mut limits = Limits::default();
    limits.scheme_call = Duration::from_millis(300);
    let mut host = HostBuilder::new(dir.path()).limits(limits).build().unwrap();
    let (kind, message) = err_of(&host.call("spinner", json!({})));
    assert_eq!(kind, "timeout");
    assert!(message.contains("spinner"), "{message}");
    assert_eq!(host.call("fine", json!({})).result.unwrap(), json!(42));
    assert_eq!(host.eval_to_string("(+ 1 2)").unwrap(), "3");
    // Again, to be sure the first interrupt left nothing behind.
    assert_eq!(err_of(&host.call("spinner", json!({}))).0, "timeout");
    assert_eq!(host.call("fine", json!({})).result.unwrap(), json!(42));
}

#[test]
fn a_tool_file_that_never_finishes_loading_is_stopped_and_reported() {
    let dir = workspace(&[
        (".toolhost/tools/a-loop.scm", "(define (spin) (spin))\n(spin)\n"),
        (".toolhost/tools/b-fine.scm", "(define-tool (fine) \"Returns.\" 42)\n"),
    ]);
    let mut limits = Limits::default();
    limits.scheme_call = Duration::from_millis(300);
    let mut host = HostBuilder::new(dir.path()).limits(limits).build().unwrap();
    assert_eq!(host.load_errors().len(), 1);
    assert!(host.load_errors()[0].message().contains("time limit"), "{}", host.load_errors()[0]);
    assert_eq!(host.call("fine", json!({})).result.unwrap(), json!(42));
}

#[test]
fn extra_tool_folders_load_after_the_project_folder() {
    let dir = workspace(&[]);
    let extra = tempfile::tempdir().unwrap();
    write(extra.path(), "shout.scm", "(define-tool (shout (text string \"Text\")) \"Shout.\" (string-upcase text))\n");
    let mut host = HostBuilder::new(dir.path()).tool_dir(extra.path()).build().unwrap();
    assert_eq!(host.call("shout", json!({"text": "hi"})).result.unwrap(), json!("HI"));
}

#[test]
fn file_lines_reads_a_whole_file_page_by_page_without_numbers() {
    let long: String = (1..=4500).map(|n| format!("row {n}\n")).collect();
    let dir = workspace(&[("long.txt", &long), ("empty.txt", "")]);
    let mut host = host(&dir);
    assert_eq!(host.eval_to_string(r#"(length (file-lines "long.txt"))"#).unwrap(), "4500");
    assert_eq!(host.eval_to_string(r#"(list-ref (file-lines "long.txt") 4499)"#).unwrap(), "row 4500");
    assert_eq!(host.eval_to_string(r#"(length (file-lines "empty.txt"))"#).unwrap(), "0");
    assert!(host.eval(r#"(file-lines "../outside")"#).is_err());
}

#[test]
fn scripts_that_would_crash_the_interpreter_get_errors_and_the_host_survives() {
    let dir = workspace(&[]);
    let mut host = host(&dir);
    // steel's own JSON module panics on NaN; toolhost's replacement answers with an error.
    let err = host.eval("(value->jsexpr-string (/ 0.0 0.0))").unwrap_err();
    assert!(err.message().contains("NaN"), "{err}");
    assert_eq!(host.eval_to_string(r#"(hash-ref (string->jsexpr "{\"a\": [1, 2]}") "a")"#).unwrap(), "[1,2]");
    // Overflow panics inside steel in debug builds; either way the host answers.
    let _ = host.eval("(abs -9223372036854775808)");
    let deep = format!("(define x {}1{})", "(list ".repeat(5000), ")".repeat(5000));
    let err = host.eval(&deep).unwrap_err();
    assert!(err.message().contains("nest deeper than 256"), "{err}");
    assert_eq!(host.eval_to_string("(+ 1 2)").unwrap(), "3");
}

#[test]
fn a_deeply_nested_tool_file_is_refused_without_taking_the_other_tools_down() {
    let deep = format!("(define x {}1{})\n", "(list ".repeat(10_000), ")".repeat(10_000));
    let dir = workspace(&[
        (".toolhost/tools/deep.scm", &deep),
        (".toolhost/tools/fine.scm", "(define-tool (fine) \"F.\" 1)"),
    ]);
    let mut host = HostBuilder::new(dir.path()).build().unwrap();
    assert_eq!(host.load_errors().len(), 1);
    assert!(
        host.load_errors()[0].to_string().contains("deep.scm:1: brackets nest deeper"),
        "{}",
        host.load_errors()[0]
    );
    assert_eq!(host.call("fine", json!({})).result.unwrap(), json!(1));
}

#[test]
fn an_evaluation_with_a_limit_stops_a_runaway_tool_called_from_scheme() {
    let dir = workspace(&[(
        ".toolhost/tools/spin.scm",
        "(define (spin) (spin))\n(define-tool (spinner) \"Spins.\" (spin))\n",
    )]);
    let mut host = host(&dir);
    let err = host.eval_within("(spinner)", Some(Duration::from_millis(300))).unwrap_err();
    assert_eq!(err.kind(), toolhost::ErrorKind::Timeout);
    assert_eq!(host.eval_to_string("(+ 1 2)").unwrap(), "3");
    // An interrupt that arrives while nothing runs stops the next run (a Ctrl-C typed just after
    // Enter is meant for what Enter started), unless it is cleared first (the REPL clears it as it
    // shows its prompt, the handle before each request).
    host.interrupter().interrupt();
    assert_eq!(host.eval_to_string("(+ 2 2)").unwrap_err().message(), "interrupted");
    assert_eq!(host.eval_to_string("(+ 2 2)").unwrap(), "4");
    host.interrupter().interrupt();
    host.clear_interrupt();
    assert_eq!(host.eval_to_string("(+ 3 3)").unwrap(), "6");
}

#[test]
fn define_tool_binds_a_rest_parameter_as_a_list() {
    let dir = workspace(&[(
        ".toolhost/tools/cat.scm",
        "(define-tool (cat (first string \"First\") (more string \"More\" rest)) \"Join.\" (string-join (cons first more) \"+\"))\n",
    )]);
    let mut host = host(&dir);
    assert_eq!(host.eval_to_string(r#"(cat "a" "b" "c")"#).unwrap(), "a+b+c");
    assert_eq!(host.eval_to_string(r#"(cat "a")"#).unwrap(), "a");
    assert_eq!(host.call("cat", json!({"first": "x", "more": ["y", "z"]})).result.unwrap(), json!("x+y+z"));
    assert_eq!(host.call("cat", json!({"first": "x"})).result.unwrap(), json!("x"));
}

#[test]
fn errors_without_a_position_still_name_their_line() {
    let dir = workspace(&[
        (
            ".toolhost/tools/a.scm",
            "(define ok 1)\n\n(register-tool \"bad-type\" \"x\" '((x int \"x\")) (lambda (x) x))\n",
        ),
        (".toolhost/tools/b.scm", "(define ok2 1)\n(error \"boom\")\n"),
    ]);
    let host = HostBuilder::new(dir.path()).build().unwrap();
    let errors: Vec<String> = host.load_errors().iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].contains("a.scm:3: ") && errors[0].contains("unknown type \"int\""), "{errors:?}");
    assert!(errors[1].ends_with("b.scm:2: boom"), "{errors:?}");
}

#[test]
fn a_host_without_the_builtin_tools_builds_and_its_value_procedures_say_what_is_missing() {
    let dir =
        workspace(&[(".toolhost/tools/double.scm", "(define-tool (double (n integer \"N\")) \"Double.\" (* 2 n))\n")]);
    let mut host = HostBuilder::new(dir.path()).builtin_tools(false).build().unwrap();
    assert!(host.load_errors().is_empty(), "{:?}", host.load_errors());
    let names: Vec<String> = host.specs().iter().map(|s| s.name().to_string()).collect();
    assert_eq!(names, ["double"], "no built-in tools, and no shipped tools built on them");
    assert_eq!(host.call("double", serde_json::json!({"n": 21})).result.unwrap(), serde_json::json!(42));
    let err = host.eval(r#"(file-lines "a.txt")"#).unwrap_err();
    assert!(err.message().contains("reads through fs-read, which this host does not have"), "{err}");
}

#[test]
fn a_tool_error_caught_and_replaced_by_the_script_keeps_the_script_s_kind() {
    // The first tool error is denied; the script catches it and fails on its own with the same
    // text. Only the error a tool raised carries its kind, so this one is tool_failed.
    let script = r#"(define-tool (sneaky (path string "P"))
  "Reads, and fails its own way."
  (with-handler (lambda (e) (error (error-object-message e))) (fs-read path)))
"#;
    let dir = workspace(&[(".toolhost/tools/sneaky.scm", script)]);
    let mut host = common::host(&dir);
    let record = host.call("sneaky", serde_json::json!({"path": "../outside"}));
    let (kind, message) = err_of(&record);
    assert_eq!(kind, "tool_failed", "{message}");
    assert!(message.contains("leaves the workspace"), "{message}");
    // Uncaught, the same denial keeps its kind through the Scheme tool.
    let dir = workspace(&[(
        ".toolhost/tools/plain.scm",
        "(define-tool (plain (path string \"P\")) \"Reads.\" (fs-read path))\n",
    )]);
    let mut host = common::host(&dir);
    assert_eq!(err_of(&host.call("plain", serde_json::json!({"path": "../outside"}))).0, "denied");
}

#[test]
fn a_define_tool_rewritten_as_register_tool_runs_the_new_procedure_after_reload() {
    let define =
        r#"(define-tool (greet (who string "Who") (times integer "How often" optional)) "Greet." (list who times))"#;
    let dir = workspace(&[(".toolhost/tools/greet.scm", define)]);
    let mut host = HostBuilder::new(dir.path()).tool_dir(dir.path().join(".toolhost/tools")).build().expect("host");
    assert_eq!(
        host.call_json("greet", r#"{"who": "ann"}"#).result.expect("greet"),
        json!(["ann", 0]),
        "every parameter bound"
    );
    let register = r#"(register-tool "greet" "Greet." '((who string "Who") (times integer "How often" optional)) (lambda args (length args)))"#;
    write(dir.path(), ".toolhost/tools/greet.scm", register);
    host.reload();
    assert_eq!(host.call_json("greet", r#"{"who": "ann"}"#).result.expect("greet"), json!(1), "only what was given");
    write(
        dir.path(),
        ".toolhost/tools/greet.scm",
        r#"(define-tool (greet (who string "Who")) "Greet." (string-append "hi " who))"#,
    );
    host.reload();
    assert_eq!(host.call_json("greet", r#"{"who": "ann"}"#).result.expect("greet"), json!("hi ann"));
}

#[test]
fn a_tool_defined_by_two_files_keeps_the_first_definition_in_scheme_and_json() {
    let dir = workspace(&[
        ("tools/a.scm", "(define-tool (dup) \"First.\" \"first\")\n"),
        ("tools/b.scm", "(define-tool (dup) \"Second.\" \"second\")\n(define-tool (other) \"Other.\" \"other\")\n"),
    ]);
    let mut host = HostBuilder::new(dir.path()).tool_dir(dir.path().join("tools")).build().unwrap();
    let errors: Vec<String> = host.load_errors().iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("b.scm:1:") && errors[0].contains("`dup` is a tool"), "{errors:?}");
    assert_eq!(host.eval_to_string("(dup)").unwrap(), "first");
    assert_eq!(ok_text(&host.call_json("dup", "{}")), "first");
    // After a reload, the same.
    let report = host.reload();
    assert_eq!(report.errors.len(), 1, "{report}");
    assert_eq!(host.eval_to_string("(dup)").unwrap(), "first");
    assert_eq!(ok_text(&host.call_json("dup", "{}")), "first");
}

/// The README's block that declares output shapes (`word-stats`, `answer`).
fn readme_output_shapes() -> String {
    let readme = include_str!("../../README.md");
    let at = readme.find("(define-tool (word-stats").expect("the README declares word-stats");
    let len = readme[at..].find("```").expect("the block ends");
    readme[at..at + len].to_string()
}

#[test]
fn a_declared_output_shape_is_the_tools_output_schema_and_a_result_that_breaks_it_fails() {
    let dir = workspace(&[
        ("words.txt", "a bb ccc\n"),
        (".toolhost/tools/shapes.scm", &readme_output_shapes()),
        (
            ".toolhost/tools/wrong.scm",
            r#"(register-tool "liar" "Says a list, gives a number." '() (lambda () 3) "list")"#,
        ),
    ]);
    let mut host = host(&dir);
    let stats = host.tool("word-stats").unwrap();
    assert_eq!(stats.spec.output_schema.as_ref().unwrap()["properties"]["words"], json!({"type": "integer"}));
    assert_eq!(host.call("word-stats", json!({"path": "words.txt"})).result.unwrap(), json!({"words": 3}));
    assert_eq!(host.tool("answer").unwrap().spec.output_schema, Some(json!({"type": "integer"})));
    let (kind, message) = err_of(&host.call("liar", json!({})));
    assert_eq!(kind, "tool_failed");
    assert_eq!(message, "liar: its result is a number, not the array its declared output shape promises");
    // Text needs no shape, and a shape must be one toolhost knows.
    for shape in ["\"string\"", "\"tuple\"", "(hash \"type\" \"string\")", "(hash \"properties\" (hash))"] {
        let source = format!("(define-tool (shaped) \"Shaped.\" (returns {shape}) \"text\")");
        let err = host.load_source("shaped.scm", &source).unwrap_err();
        assert!(
            err.message().contains("the output shape must be one of integer, number, boolean, list, object"),
            "{shape}: {err}"
        );
    }
}
