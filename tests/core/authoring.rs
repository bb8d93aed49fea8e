//! The tool author's loop: edit a tool file, `:reload` (or `Host::reload`), errors that point at
//! the file and line, `toolhost check` and `toolhost test`.

use crate::common;

use common::*;
use toolhost::HostBuilder;

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

const GREET: &str =
    "(define-tool (greet (who string \"Who to greet\"))\n  \"Greets someone.\"\n  (string-append \"hello \" who))\n";
const SHOUT: &str = "(define-tool (shout (text string \"What to shout\"))\n  \"Shouts.\"\n  (string-upcase text))\n";

#[test]
fn reload_replaces_changed_tools_drops_removed_ones_and_reports_a_broken_file_by_line() {
    let dir = workspace(&[("tools/greet.scm", GREET), ("tools/shout.scm", SHOUT)]);
    let tools = dir.path().join("tools");
    let mut host = HostBuilder::new(dir.path()).tool_dir(&tools).build().unwrap();
    host.load_source("embedded", "(define-tool (twice (n integer \"N\")) \"Doubles.\" (* 2 n))").unwrap();
    assert_eq!(host.eval_to_string("(greet \"ann\")").unwrap(), "hello ann");
    assert_eq!(host.origin("greet").map(|o| o.line), Some(Some(1)));

    write(dir.path(), "tools/greet.scm", &GREET.replace("hello ", "hi "));
    write(dir.path(), "tools/count.scm", "(define-tool (count-a (text string \"Text\"))\n  \"Counts.\"\n  1)\n");
    std::fs::remove_file(tools.join("shout.scm")).unwrap();
    let report = host.reload();
    assert_eq!(report.changed, ["greet"]);
    assert_eq!(report.added, ["count-a"]);
    assert_eq!(report.removed, ["shout"]);
    assert!(report.errors.is_empty(), "{report}");
    // A tool the embedding program loaded from text is not a file's to reload.
    assert_eq!(host.eval_to_string("(twice 4)").unwrap(), "8");
    assert_eq!(host.eval_to_string("(greet \"ann\")").unwrap(), "hi ann");
    assert_eq!(host.call_json("greet", r#"{"who": "bob"}"#).model_text(), "hi bob");
    assert!(host.tool("shout").is_none());
    let gone = host.eval("(shout \"x\")").unwrap_err();
    assert!(gone.message().contains("shout was removed"), "{gone}");
    assert!(host.call_json("shout", r#"{"text": "x"}"#).result.is_err());

    // A file that fails is reported by file and line; the other files' tools stay.
    write(
        dir.path(),
        "tools/broken.scm",
        "(define (helper x)\n  x)\n(define-tool (oops (n integr \"N\")) \"Breaks.\" n)\n",
    );
    let report = host.reload();
    assert_eq!(report.errors.len(), 1, "{report}");
    let error = &report.errors[0];
    assert!(error.file().is_some_and(|f| f.ends_with("broken.scm")) && error.line() == Some(3), "{error}");
    assert!(report.to_string().contains("broken.scm:3:"), "{report}");
    assert!(report.changed.is_empty() && report.removed.is_empty(), "{report}");
    assert_eq!(report.unchanged, 2);
    assert_eq!(host.eval_to_string("(greet \"cy\")").unwrap(), "hi cy");
    assert_eq!(host.load_errors().len(), 1);

    // Fixed, it loads; the error is gone from the host's list.
    write(dir.path(), "tools/broken.scm", "(define-tool (oops (n integer \"N\")) \"Fixed.\" n)\n");
    let report = host.reload();
    assert_eq!(report.added, ["oops"]);
    assert!(host.load_errors().is_empty());
    assert_eq!(host.eval_to_string("(oops 4)").unwrap(), "4");
}

#[test]
fn load_adds_a_file_and_reload_loads_it_again() {
    let dir = workspace(&[("more/shout.scm", SHOUT)]);
    let mut host = host(&dir);
    let report = host.load_tool_file(&dir.path().join("more/shout.scm"));
    assert_eq!(report.added, ["shout"]);
    assert_eq!(host.eval_to_string("(shout \"a\")").unwrap(), "A");
    write(
        dir.path(),
        "more/shout.scm",
        &SHOUT.replace("(string-upcase text)", "(string-append (string-upcase text) \"!\")"),
    );
    assert_eq!(host.reload().changed, ["shout"]);
    assert_eq!(host.eval_to_string("(shout \"a\")").unwrap(), "A!");
    // Loading the same file again replaces its tools instead of refusing a duplicate.
    assert_eq!(host.load_tool_file(&dir.path().join("more/shout.scm")).unchanged, 1);
}

#[test]
fn an_error_inside_a_tool_names_its_file_and_line_in_eval_call_and_the_repl() {
    let dir = workspace(&[(
        "tools/add.scm",
        "; Adds one.\n(define-tool (add-one (n integer \"A number\"))\n  \"Adds one.\"\n  (+ n \"one\"))\n\
         (define-tool (refuse (who string \"Who\")) \"Refuses.\" (tool-error \"no such user: \" who))\n",
    )]);
    let home = Home::new();
    let out = home.run(dir.path(), &["--tools", "tools", "eval", "(add-one 1)"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("tools/add.scm:4:"), "{}", stderr(&out));

    let out = home.run(dir.path(), &["--tools", "tools", "call", "add-one", r#"{"n": 1}"#], None);
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["error"]["kind"], "tool_failed", "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    // Short for the model: the file relative to the workspace, no absolute path.
    assert!(message.starts_with("add-one: tools/add.scm:4: "), "{message}");
    assert!(!message.contains(&dir.path().display().to_string()), "{message}");
    // A message the tool wrote for the model stays as written.
    let out = home.run(dir.path(), &["--tools", "tools", "call", "refuse", r#"{"who": "x"}"#], None);
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["error"]["message"], "refuse: no such user: x", "{answer}");

    let out = home.run(dir.path(), &["--tools", "tools", "repl"], Some("(add-one 2)\n:quit\n"));
    let text = stdout(&out);
    assert!(text.contains("error: tools/add.scm:4:"), "{text}");
    assert!(text.contains("4 |   (+ n \"one\")"), "the failing line is shown: {text}");
}

#[test]
fn the_repl_reloads_a_tool_edited_on_disk_and_keeps_the_others_when_a_file_breaks() {
    let dir = workspace(&[("tools/greet.scm", GREET), ("tools/shout.scm", SHOUT)]);
    let home = Home::new();
    let mut term = Terminal::start(&home, dir.path(), &["--tools", "tools", "repl"]);
    term.wait_for("toolhost> ", 0);
    let mark = term.screen().len();
    term.send("(greet \"ann\")\n");
    term.wait_for("\"hello ann\"", mark);

    write(dir.path(), "tools/greet.scm", &GREET.replace("hello ", "hi "));
    write(dir.path(), "tools/broken.scm", "(define x 1)\n(define-tool (oops (n integr \"N\")) \"Breaks.\" n)\n");
    let mark = term.screen().len();
    term.send(":reload\n");
    let screen = term.wait_for("broken.scm:2", mark);
    assert!(screen[mark..].contains("changed: greet"), "{screen}");
    let mark = term.screen().len();
    term.send("(greet \"ann\")\n");
    term.wait_for("\"hi ann\"", mark);
    let mark = term.screen().len();
    term.send("(shout \"still here\")\n");
    term.wait_for("\"STILL HERE\"", mark);
    term.send(":quit\n");
    term.finish();
}

#[test]
fn reload_and_load_work_with_piped_input() {
    let dir = workspace(&[("extra/shout.scm", SHOUT)]);
    let out = Home::new().run(dir.path(), &["repl"], Some(":load extra/shout.scm\n(shout \"x\")\n:reload\n:quit\n"));
    let text = stdout(&out);
    assert!(text.contains("added: shout"), "{text}");
    assert!(text.contains("\"X\""), "{text}");
    assert!(text.contains("no tool changed; 1 unchanged"), "{text}");
}

const STRICT_REFUSED: &str =
    "(define-tool (configure (settings object \"Settings to apply\"))\n  \"Applies settings.\"\n  settings)\n";
const UNDOCUMENTED: &str =
    "(define-tool (wc (path string \"\") (min integer \"Shortest word\" optional))\n  \"Counts words.\"\n  0)\n";

#[test]
fn check_reports_signatures_load_errors_missing_docs_and_strict_refusals() {
    let dir = workspace(&[
        ("tools/good.scm", GREET),
        ("tools/broken.scm", "(define x 1)\n(define-tool (bad (n numbr \"N\")) \"Bad.\" n)\n"),
        ("tools/undocumented.scm", UNDOCUMENTED),
        ("tools/strict.scm", STRICT_REFUSED),
        ("tools/greet_test.scm", "(this is not a tool file"),
    ]);
    let home = Home::new();
    let out = home.run(dir.path(), &["check", "tools"], None);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    assert!(text.contains("tools/good.scm:1: (greet who)"), "{text}");
    assert!(text.contains("tools/undocumented.scm:1: (wc path [min])"), "{text}");
    assert!(text.contains("warning: parameter path has no description"), "{text}");
    assert!(text.contains("warning: strict mode sends it as strict:false: /properties/settings"), "{text}");
    assert!(text.contains("error: tools/broken.scm:2:") && text.contains("numbr"), "{text}");
    assert!(text.contains("3 tools, 1 error, 2 warnings"), "{text}");
    assert!(!text.contains("greet_test"), "test files are not tool files: {text}");

    let out = home.run(dir.path(), &["check", "--format", "json", "tools"], None);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ok"], false);
    assert_eq!(report["errors"][0]["line"], 2);
    let wc = report["tools"].as_array().unwrap().iter().find(|t| t["name"] == "wc").unwrap();
    assert_eq!(wc["file"], "tools/undocumented.scm");
    assert_eq!(wc["warnings"].as_array().unwrap().len(), 1);

    // A clean file: exit 0, and no warnings.
    let out = home.run(dir.path(), &["check", "tools/good.scm"], None);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains("1 tool, 0 errors, 0 warnings"), "{}", stdout(&out));
    // A name providers cannot take is an error.
    write(dir.path(), "names/bad.scm", "(register-tool \"has space\" \"Bad name.\" '() (lambda () 1))\n");
    let out = home.run(dir.path(), &["check", "names"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("names/bad.scm:1:") && stdout(&out).contains("cannot be sent"), "{}", stdout(&out));
    // So is a name that collides with another once mapped for providers (`.` is sent as `__`).
    write(
        dir.path(),
        "collide/both.scm",
        "(define-tool (srv.read (p string \"P\")) \"Reads.\" p)\n(define-tool (srv__read (p string \"P\")) \"Reads too.\" p)\n",
    );
    let out = home.run(dir.path(), &["check", "collide"], None);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("collide/both.scm:1: (srv.read p)"), "{text}");
    assert!(text.contains("error: collide/both.scm:2:") && text.contains("which \"srv.read\" already uses"), "{text}");

    // With no paths, the folders the host loads.
    let out = home.run(dir.path(), &["--tools", "collide", "check"], None);
    assert!(stdout(&out).contains("collide/both.scm:1: (srv.read p)"), "{}", stdout(&out));
}

const ADD: &str =
    "(define-tool (add (a integer \"First\") (b integer \"Second\"))\n  \"Adds two integers.\"\n  (+ a b))\n";

#[test]
fn test_runs_test_files_counts_and_names_failures_by_line() {
    let dir = workspace(&[
        ("tools/add.scm", ADD),
        ("tools/broken_body.scm", "(define-tool (half (n integer \"N\"))\n  \"Halves.\"\n  (/ n \"two\"))\n"),
        (
            "tools/add_test.scm",
            "(check-equal? (add 1 2) 3)\n\
             ; a number sent as a string is tidied, as a model's call is\n\
             (check-tool \"add\" \"{\\\"a\\\": \\\"2\\\", \\\"b\\\": 3}\" 5)\n\
             (check-tool \"fs-read\" (hash \"path\" \"a.txt\" \"count\" 1) \"1\\tline 1\\n... 299 more lines; next start 2\\n\")\n\
             (check-error? (lambda () (add 1 \"x\")))\n\
             (fs-write \"a.txt\" \"changed\")\n\
             (check-equal? (fs-read \"a.txt\") \"1\\tchanged\\n\")\n",
        ),
        (
            "tools/fail_test.scm",
            "(check-equal? (add 2 2) 4)\n\n(check-equal? (add 2 2) 5)\n(check-tool \"add\" \"{\\\"a\\\": 1}\" 1)\n(car '())\n(check-error? (lambda () 1))\n(check-equal? (add 1 (half 2)) 2)\n",
        ),
    ]);
    let home = Home::new();
    let out = home.run(dir.path(), &["test", "tools/add_test.scm"], None);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert_eq!(text.lines().last(), Some("5 passed, 0 failed"), "{text}");
    // The test wrote to a copy of the workspace.
    assert!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap().starts_with("line 1\n"));

    let out = home.run(dir.path(), &["test", "tools"], None);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    assert_eq!(text.lines().last(), Some("6 passed, 5 failed"), "{text}");
    assert!(text.contains("FAIL tools/fail_test.scm:3: check-equal?\n  expected: 5\n  actual:   4"), "{text}");
    assert!(text.contains("FAIL tools/fail_test.scm:4: check-tool"), "{text}");
    assert!(text.contains("error (missing_argument)"), "{text}");
    assert!(text.contains("FAIL tools/fail_test.scm:5: error"), "{text}");
    // An error inside a tool: the test's line, and the tool file's line in the message.
    assert!(text.contains("FAIL tools/fail_test.scm:7: error\n  tools/broken_body.scm:3: "), "{text}");
    assert!(text.contains("FAIL tools/fail_test.scm:6: check-error?\n  expected: an error\n  actual:   1"), "{text}");

    // --in-place writes to the real workspace.
    let out = home.run(dir.path(), &["test", "--in-place", "tools/add_test.scm"], None);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "changed");
}

#[test]
fn check_and_test_in_an_untrusted_workspace_say_what_they_skipped_and_fail() {
    let dir = workspace(&[
        (".toolhost/tools/add.scm", ADD),
        (".toolhost/tools/add_test.scm", "(check-equal? (add 1 2) 3)\n"),
    ]);
    let home = Home::new();
    let out = home.run(dir.path(), &["check"], None);
    assert_eq!(out.status.code(), Some(2), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("not checked: .toolhost/tools"), "{}", stdout(&out));
    assert!(stdout(&out).contains("not trusted"), "{}", stdout(&out));
    let out = home.run(dir.path(), &["check", "--format", "json"], None);
    assert_eq!(out.status.code(), Some(2));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ok"], false, "{report}");
    assert_eq!(report["skipped"][0], ".toolhost/tools", "{report}");

    let out = home.run(dir.path(), &["test"], None);
    assert_eq!(out.status.code(), Some(2), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("not tested: .toolhost/tools"), "{}", stdout(&out));

    // Naming the folder checks and tests it as it is.
    let out = home.run(dir.path(), &["check", ".toolhost/tools"], None);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("1 tool, 0 errors"), "{}", stdout(&out));
    let out = home.run(dir.path(), &["test", ".toolhost/tools"], None);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(stdout(&out).lines().last(), Some("1 passed, 0 failed"), "{}", stdout(&out));

    // Trusted, the defaults check and test it.
    assert_eq!(home.run(dir.path(), &["trust"], None).status.code(), Some(0));
    let out = home.run(dir.path(), &["check"], None);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("1 tool, 0 errors"), "{}", stdout(&out));
    let out = home.run(dir.path(), &["test"], None);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(stdout(&out).lines().last(), Some("1 passed, 0 failed"), "{}", stdout(&out));
}

#[test]
fn tool_and_test_files_that_are_not_regular_files_are_refused_without_blocking() {
    let dir = workspace(&[("tools/add.scm", ADD)]);
    make_fifo(&dir.path().join("tools/pipe.scm"));
    make_fifo(&dir.path().join("tools/pipe_test.scm"));
    let home = Home::new();
    let out = home.run_bounded(dir.path(), &["run", "tools/pipe.scm"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("tools/pipe.scm: is a FIFO, not a regular file"), "{}", stderr(&out));

    let out = home.run_bounded(dir.path(), &["check", "tools"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("error: tools/pipe.scm: is a FIFO, not a regular file"), "{}", stdout(&out));
    assert!(stdout(&out).contains("tools/add.scm:1: (add a b)"), "{}", stdout(&out));

    let out = home.run_bounded(dir.path(), &["--tools", "tools", "eval", "(add 1 2)"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "3\n", "{}", stderr(&out));
    assert!(stderr(&out).contains("tools/pipe.scm: is a FIFO, not a regular file"), "{}", stderr(&out));

    let out = home.run_bounded(dir.path(), &["test", "tools"]);
    assert_ne!(out.status.code(), Some(0), "{}", stdout(&out));
    let shown = format!("{}{}", stdout(&out), stderr(&out));
    assert!(shown.contains("FAIL tools/pipe_test.scm: read\n  is a FIFO, not a regular file"), "{shown}");
    assert!(shown.contains("FAIL tools/pipe.scm: is a FIFO, not a regular file"), "{shown}");
}

#[test]
fn a_tool_file_past_the_size_cap_is_refused() {
    let dir = workspace(&[("tools/add.scm", ADD)]);
    // Sparse: sixteen mebibytes of nothing on disk.
    std::fs::File::create(dir.path().join("tools/big.scm")).unwrap().set_len(16 << 20).unwrap();
    let out = Home::new().run_bounded(dir.path(), &["check", "tools"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("error: tools/big.scm: is larger than 8 MiB"), "{}", stdout(&out));
}
