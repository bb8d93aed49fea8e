//! The REPL and `eval` as a Scheme programmer meets them: values in Scheme notation, every
//! expression of a line, `display` output kept, Ctrl-C, errors a person can act on, completion.
//! The interactive parts run on a real pseudo-terminal.

use crate::common;

use common::*;

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Each expression and the text it prints as.
const PRINTED: &[(&str, &str)] = &[
    (r#""sym""#, r#""sym""#),
    ("'sym", "sym"),
    ("#t", "#t"),
    ("#f", "#f"),
    (r"#\a", r"#\a"),
    (r"#\space", r"#\space"),
    ("'()", "'()"),
    (r#""""#, r#""""#),
    (r#"(list 1 "two" 'three)"#, r#"(1 "two" three)"#),
    ("(list 1 (list 2 '()) (vector 3 4))", "(1 (2 ()) #(3 4))"),
    (r#"(hash "b" 2 "a" (list 1))"#, r#"#hash(("a" . (1)) ("b" . 2))"#),
    ("1.5", "1.5"),
    ("(/ 1.0 0.0)", "+inf.0"),
    ("42", "42"),
    (r#""say \"hi\"""#, r#""say \"hi\"""#),
    (r#"(fs-read "a.txt" 1 2)"#, "\"1\tline 1\n2\tline 2\n... 298 more lines; next start 3\n\""),
    ("(define x 1)", ""),
];

#[test]
fn values_print_in_scheme_notation_through_eval_and_the_repl() {
    let dir = workspace(&[]);
    let home = Home::new();
    for (expr, printed) in PRINTED {
        let out = home.run(dir.path(), &["eval", expr], None);
        assert_eq!(out.status.code(), Some(0), "{expr}: {}", stderr(&out));
        let expected = if printed.is_empty() { String::new() } else { format!("{printed}\n") };
        assert_eq!(stdout(&out), expected, "eval {expr}");
    }
    let input: String = PRINTED.iter().map(|(expr, _)| format!("{expr}\n")).collect();
    let out = home.run(dir.path(), &["repl"], Some(&input));
    let text = stdout(&out);
    for (expr, printed) in PRINTED.iter().filter(|(_, p)| !p.is_empty()) {
        assert!(text.contains(&format!("{printed}\n")), "the REPL prints {expr} as {printed}: {text}");
    }
}

#[test]
fn every_expression_on_a_line_is_evaluated_and_printed_in_order() {
    let dir = workspace(&[]);
    let home = Home::new();
    let out = home.run(dir.path(), &["eval", "(+ 1 2) (define y 5) (+ 3 y) \"done\""], None);
    assert_eq!(stdout(&out), "3\n8\n\"done\"\n");
    let out = home.run(dir.path(), &["repl"], Some("(+ 1 2) (+ 3 4)\n:quit\n"));
    assert!(stdout(&out).contains("3\n7\n"), "{}", stdout(&out));
}

#[test]
fn errors_say_where_and_what_a_person_can_do() {
    let dir = workspace(&[("tools/wc.scm", "(define-tool (wc (path strin \"File\")) \"Count.\" 1)\n")]);
    let home = Home::new();
    // A parse error says where, and what was left open.
    let out = home.run(dir.path(), &["eval", "(define (f x)\n  (+ x 1)"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("<eval>:1:") && stderr(&out).contains("column 1, `(` is never closed"),
        "{}",
        stderr(&out)
    );
    let out = home.run(dir.path(), &["eval", "(+ 1 2))"], None);
    assert!(stderr(&out).contains("column 8, `)` closes nothing"), "{}", stderr(&out));
    // A tool whose file failed to load says so, and why, when used.
    let out = home.run(dir.path(), &["--tools", "tools", "eval", "(wc \"a.txt\")"], None);
    let message = stderr(&out);
    assert!(message.contains("wc is not defined: the file that defines it failed to load"), "{message}");
    assert!(message.contains("wc.scm:1:") && message.contains("unknown type \"strin\""), "{message}");
    assert!(!message.contains("#<void>"), "{message}");
    // An invalid regex is shown as the user wrote it.
    let out = home.run(dir.path(), &["call", "index-grep", r#"{"pattern": "foo("}"#], None);
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("foo(\n") && message.contains("unclosed group") && !message.contains("(?:"), "{message}");
}

#[test]
fn call_without_arguments_means_an_empty_object() {
    let dir = workspace(&[("src/lib.rs", "")]);
    let out = Home::new().run(dir.path(), &["call", "fs-list"], None);
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["ok"], true, "{answer}");
    assert!(answer["result"].as_str().unwrap().contains("src/"), "{answer}");
}

#[test]
fn timeouts_on_the_command_line_must_be_positive_numbers() {
    let dir = workspace(&[]);
    let home = Home::new();
    for bad in ["0", "-1", "NaN", "inf", "soon"] {
        let out = home.run(dir.path(), &["eval", "--timeout-s", bad, "(+ 1 2)"], None);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(stderr(&out).contains("--timeout-s"), "{bad}: {}", stderr(&out));
    }
    let out = home.run(dir.path(), &["eval", "--timeout-s", "0.5", "(define (spin) (spin)) (spin)"], None);
    assert!(stderr(&out).contains("time limit"), "{}", stderr(&out));
}

#[test]
fn sigint_stops_eval_and_call_and_kills_the_command_s_processes() {
    let dir = workspace(&[]);
    let home = Home::new();
    for (args, marker) in [
        (vec!["eval", "(shell-exec \"sleep 41.5\")"], "41.5"),
        (vec!["call", "shell-exec", r#"{"cmd": "sleep 42.5"}"#], "42.5"),
    ] {
        let child = home.spawn(dir.path(), &args);
        eventually("the command to start", || !processes_with_arg(marker).is_empty());
        // SAFETY: kill only sends a signal to the child this test started.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let out = child.wait_with_output().unwrap();
        let said = format!("{}{}", stdout(&out), stderr(&out));
        assert!(said.contains("interrupted"), "{args:?}: {said}");
        eventually("the command's processes to be gone", || processes_with_arg(marker).is_empty());
    }
}

#[test]
fn on_a_terminal_ctrl_c_stops_a_running_command_and_the_prompt_comes_back() {
    let dir = workspace(&[]);
    let home = Home::new();
    let mut term = Terminal::start(&home, dir.path(), &["repl"]);
    term.wait_for("toolhost> ", 0);
    let mark = term.screen().len();
    term.send("(shell-exec \"sleep 33.5\")\n");
    eventually("sleep to start", || !processes_with_arg("33.5").is_empty());
    term.send("\x03");
    term.wait_for("interrupted", mark);
    eventually("sleep to be killed", || processes_with_arg("33.5").is_empty());
    // A Scheme loop stops the same way.
    let mark = term.screen().len();
    term.send("(define (spin n) (spin (+ n 1))) (begin (fs-write \"spinning\" \"\") (spin 0))\n");
    eventually("the loop to start", || dir.path().join("spinning").exists());
    term.send("\x03");
    term.wait_for("interrupted", mark);
    let mark = term.screen().len();
    term.send("(+ 40 2)\n");
    let screen = term.wait_for("42", mark);
    assert!(!screen.contains("thread") && !screen.contains("ThreadId"), "no internals: {screen}");
    term.send(":quit\n");
    term.finish();
}

#[test]
fn on_a_terminal_display_output_stays_and_input_spans_lines_and_tab_lists_candidates() {
    let dir = workspace(&[("src/lib.rs", "")]);
    let home = Home::new();
    let mut term = Terminal::start(&home, dir.path(), &["repl"]);
    term.wait_for("toolhost> ", 0);
    let mark = term.screen().len();
    term.send("(display \"no newline here\")\n");
    term.wait_for("no newline here\n", mark);
    let mark = term.screen().len();
    // Typed as a person types: the second line once the continuation prompt shows.
    term.send("(fs-read \"a.txt\"\n");
    term.wait_for("...> ", mark);
    term.send("  2 1)\n");
    term.wait_for("2\tline 2", mark);
    let mark = term.screen().len();
    term.send("(fs-\t\t");
    let screen = term.wait_for("fs-write", mark);
    for tool in ["fs-read", "fs-edit", "fs-list"] {
        assert!(screen[mark..].contains(tool), "{tool} listed: {screen}");
    }
    let mark = term.screen().len();
    term.send("list \".\" 1)\n");
    term.wait_for("src/", mark);
    let mark = term.screen().len();
    term.send("(string-up\t");
    term.wait_for("string-upcase", mark);
    term.send(" \"ok\")\n");
    term.wait_for("\"OK\"", mark);
    term.send(":quit\n");
    term.finish();
}
