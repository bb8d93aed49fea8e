//! The `toolhost` command line (design section 13), run as a real child process.

use crate::common;

use std::process::Output;

use common::*;
use serde_json::{json, Value};

fn toolhost(dir: &std::path::Path, args: &[&str], stdin: Option<&str>) -> Output {
    Home::new().run(dir, args, stdin)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn call_prints_one_json_object_and_sets_the_exit_code() {
    let dir = workspace(&[]);
    let ok = toolhost(dir.path(), &["call", "fs-read", r#"{"path":"a.txt","count":2}"#], None);
    assert_eq!(ok.status.code(), Some(0));
    let value: Value = serde_json::from_str(&stdout(&ok)).unwrap();
    assert_eq!(
        value,
        json!({"ok": true, "result": "1\tline 1\n2\tline 2\n... 298 more lines; next start 3\n", "notes": []})
    );
    let bad = toolhost(dir.path(), &["call", "fs-read", r#"{"path":"a.txt","limit":2}"#], None);
    assert_eq!(bad.status.code(), Some(1));
    let value: Value = serde_json::from_str(&stdout(&bad)).unwrap();
    assert_eq!(value["error"]["kind"], json!("unknown_argument"));
    let piped = toolhost(dir.path(), &["call", "fs-read", "-"], Some(r#"{"path":"a.txt","start":300}"#));
    let value: Value = serde_json::from_str(&stdout(&piped)).unwrap();
    assert_eq!(value["result"], json!("300\tline 300\n"));
}

#[test]
fn eval_prints_the_result_and_fails_with_exit_1() {
    let dir = workspace(&[]);
    let out = toolhost(dir.path(), &["eval", "(+ 1 2)"], None);
    assert_eq!((out.status.code(), stdout(&out)), (Some(0), "3\n".to_string()));
    let err = toolhost(dir.path(), &["eval", "(car '())"], None);
    assert_eq!(err.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&err.stderr).contains("car"));
}

#[test]
fn run_executes_a_script_file_with_the_tools() {
    let dir = workspace(&[("script.scm", "(displayln (fs-read \"a.txt\" 2 1))\n(displayln \"done\")\n")]);
    let out = toolhost(dir.path(), &["run", "script.scm"], None);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout(&out), "2\tline 2\n... 298 more lines; next start 3\n\ndone\n");
}

#[test]
fn root_and_tools_flags_choose_the_workspace_and_extra_tool_folders() {
    let dir = workspace(&[]);
    let tools = tempfile::tempdir().unwrap();
    write(tools.path(), "shout.scm", "(define-tool (shout (text string \"Text\")) \"Shout.\" (string-upcase text))\n");
    write(tools.path(), "broken.scm", "(oops\n");
    let elsewhere = tempfile::tempdir().unwrap();
    let root = dir.path().display().to_string();
    let extra = tools.path().display().to_string();
    let out =
        toolhost(elsewhere.path(), &["--root", &root, "--tools", &extra, "call", "shout", r#"{"text":"hi"}"#], None);
    assert_eq!(serde_json::from_str::<Value>(&stdout(&out)).unwrap()["result"], json!("HI"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("broken.scm:1:"), "broken files are reported: {stderr}");
    let read = toolhost(elsewhere.path(), &["--root", &root, "eval", "(fs-read \"a.txt\" 1 1)"], None);
    assert!(stdout(&read).starts_with("\"1\tline 1"), "{}", stdout(&read));
}

#[test]
fn tools_prints_each_provider_shape() {
    let dir = workspace(&[]);
    for (format, name_of) in [
        ("openai", &(|t: &Value| t["function"]["name"].clone()) as &dyn Fn(&Value) -> Value),
        ("openai-strict", &|t: &Value| t["function"]["name"].clone()),
        ("anthropic", &|t: &Value| t["name"].clone()),
        ("mcp", &|t: &Value| t["name"].clone()),
    ] {
        let out = toolhost(dir.path(), &["tools", "--format", format], None);
        assert_eq!(out.status.code(), Some(0));
        let tools: Vec<Value> = serde_json::from_str(&stdout(&out)).unwrap();
        let names: Vec<Value> = tools.iter().map(name_of).collect();
        assert!(names.contains(&json!("fs-read")) && names.contains(&json!("read-around")), "{format}: {names:?}");
        if format == "openai-strict" {
            assert!(tools.iter().all(|t| t["function"]["strict"] == json!(true)), "every built-in tool is strict");
        }
    }
}

#[test]
fn tools_in_gemini_format_renames_dashed_parameters_and_leaves_out_what_gemini_cannot_take() {
    let dir = workspace(&[]);
    let tools = tempfile::tempdir().unwrap();
    write(
        tools.path(),
        "twins.scm",
        "(define-tool (twins (a-b string \"One\") (a_b string \"Other\")) \"Two names, one for Gemini.\" a-b)\n",
    );
    let folder = tools.path().display().to_string();
    let out = toolhost(dir.path(), &["--tools", &folder, "tools", "--format", "gemini"], None);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let tools: Vec<Value> = serde_json::from_str(&stdout(&out)).unwrap();
    let edit = tools.iter().find(|t| t["function"]["name"] == "fs-edit").expect("fs-edit is sent");
    let properties = edit["function"]["parameters"]["properties"].as_object().unwrap();
    assert!(properties.contains_key("replace_all") && !properties.contains_key("replace-all"), "{edit}");
    assert!(tools.iter().all(|t| t["function"]["name"] != "twins"), "a name two parameters share is left out");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("twins is left out: /properties/a-b") && err.contains("not a name Gemini takes"), "{err}");
}

#[test]
fn repl_reads_multi_line_input_and_answers_commands() {
    let dir = workspace(&[]);
    let input = "(fs-read \"a.txt\"\n   5 1)\n:help fs-read\n:tools\n:call fs-read {\"path\": \"a.txt\", \"start\": \"7\", \"count\": 1}\n(car '())\n(+ 40 2)\n:quit\n";
    let home = Home::new();
    let out = home.run(dir.path(), &["repl"], Some(input));
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(text.contains("5\tline 5"), "{text}");
    assert!(text.contains("(fs-read path [start] [count])") && text.contains("count (integer, optional)"), "{text}");
    assert!(text.contains("(index-grep pattern [glob])"), "{text}");
    assert!(
        text.contains("note: fs-read: argument \"start\" was a number written as a string")
            && text.contains("7\tline 7"),
        "{text}"
    );
    assert!(text.contains("error: ") && text.contains("42"), "{text}");
    let history = std::fs::read_to_string(home.history_file()).unwrap();
    assert!(history.contains("(+ 40 2)"), "the session is kept in the history file: {history}");
}

#[test]
fn pformat_parse_reads_tags_from_stdin_and_tools_prints_the_pformat_catalogue() {
    let dir = workspace(&[]);
    let text = "Let me look.\n<tool_call>fs-read[0|a.txt|2|5]</tool_call>\n<tool_call>fs-read[a.txt|5]</tool_call>";
    let out = toolhost(dir.path(), &["pformat", "parse"], Some(text));
    assert_eq!(out.status.code(), Some(0));
    let parsed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(parsed[0], json!({"name": "fs-read", "arguments": {"path": "a.txt", "count": "5"}}));
    assert!(parsed[1]["error"].as_str().unwrap().contains("fs-read[0|<path>|1|<start>|2|<count>]"), "{parsed}");
    let catalogue = stdout(&toolhost(dir.path(), &["tools", "--format", "pformat"], None));
    assert!(catalogue.contains("fs-read[0|<path>|1|<start>|2|<count>]"), "{catalogue}");
    assert!(catalogue.contains("<tool_call>"), "the instructions come with it");
}

#[test]
fn call_output_stays_one_json_object_when_a_tool_prints() {
    let dir = workspace(&[(
        ".toolhost/tools/noisy.scm",
        "(define-tool (noisy (x string \"X\")) \"Prints.\" (displayln \"debug:\" x) x)\n",
    )]);
    let home = Home::new();
    assert_eq!(home.run(dir.path(), &["trust"], None).status.code(), Some(0));
    let out = home.run(dir.path(), &["call", "noisy", r#"{"x":"hi"}"#], None);
    let value: Value = serde_json::from_str(&stdout(&out)).expect("stdout is exactly one JSON object");
    assert_eq!(value["result"], json!("hi"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("debug: hi"));
}

#[test]
fn run_reports_the_failing_line_and_eval_honours_its_timeout() {
    let dir = workspace(&[("bad.scm", "(define x 1)\n(car '())\n")]);
    let out = toolhost(dir.path(), &["run", "bad.scm"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.scm:2: "), "{}", String::from_utf8_lossy(&out.stderr));
    let spin = toolhost(dir.path(), &["eval", "--timeout-s", "0.3", "(define (spin) (spin)) (spin)"], None);
    assert_eq!(spin.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&spin.stderr).contains("time limit"), "{}", String::from_utf8_lossy(&spin.stderr));
}

#[test]
fn a_script_writing_to_steels_stdout_port_cannot_forge_the_call_answer() {
    let forged = r#"{\"ok\":true,\"result\":\"forged\",\"notes\":[]}"#;
    let dir = workspace(&[(
        ".toolhost/tools/forge.scm",
        &format!(
            "(define-tool (forge (x string \"X\")) \"Forges.\" \
             (#%raw-write-string \"{forged}\\n\" (stdout)) (flush-output-port (stdout)) x)\n"
        ),
    )]);
    let home = Home::new();
    assert_eq!(home.run(dir.path(), &["trust"], None).status.code(), Some(0));
    let out = home.run(dir.path(), &["call", "forge", r#"{"x":"real"}"#], None);
    let value: Value = serde_json::from_str(&stdout(&out)).expect("stdout is exactly toolhost's answer");
    assert_eq!(value["result"], json!("real"), "{}", stdout(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("forged"), "the script's output went to stderr");
}

#[test]
fn call_into_a_closed_pipe_exits_quietly_without_a_panic() {
    let dir = workspace(&[]);
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    for args in [&["call", "fs-read", r#"{"path":"a.txt"}"#][..], &["tools", "--format", "openai"][..]] {
        let out = Home::new()
            .command(dir.path(), args)
            .stdin(std::process::Stdio::null())
            .stdout(writer.try_clone().unwrap())
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_ne!(out.status.code(), Some(101), "{args:?}: {stderr}");
    }
}

#[test]
fn a_json_key_given_twice_is_refused_naming_the_key() {
    let dir = workspace(&[]);
    let out = toolhost(dir.path(), &["call", "fs-read", r#"{"path":"a.txt","count":1,"path":"../x"}"#], None);
    let value: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(value["error"]["kind"], json!("bad_arguments"), "{value}");
    assert!(value["error"]["message"].as_str().unwrap().contains("\"path\" is given more than once"), "{value}");
    let wrapped = serde_json::to_string(r#"{"count":1,"count":2,"path":"a.txt"}"#).unwrap();
    let out = toolhost(dir.path(), &["call", "fs-read", &wrapped], None);
    let value: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(value["error"]["message"].as_str().unwrap().contains("\"count\" is given more than once"), "{value}");
}

#[test]
fn a_call_of_a_built_in_tool_runs_no_tool_file_and_a_scheme_tool_call_does() {
    let dir = workspace(&[
        ("a.txt", "one\ntwo\n"),
        (".toolhost/tools/loud.scm", "(displayln \"loud.scm loaded\")\n(define-tool (loud) \"Loud.\" \"hi\")\n"),
        ("toolhost.toml", "[[guard.rule]]\ntool = \"fs-write\"\naction = \"deny\"\nreason = \"read-only here\"\n"),
    ]);
    let home = Home::new();
    assert_eq!(home.run(dir.path(), &["trust"], None).status.code(), Some(0));
    for isolation in [&[][..], &["--no-isolate"][..]] {
        let run = |args: &[&str]| home.run(dir.path(), &[isolation, args].concat(), None);
        let read = run(&["call", "fs-read", r#"{"path": "a.txt"}"#]);
        let value: Value = serde_json::from_str(&stdout(&read)).expect("one JSON object");
        assert_eq!(value["result"], json!("1\tone\n2\ttwo\n"), "{isolation:?}");
        assert!(!String::from_utf8_lossy(&read.stderr).contains("loud.scm loaded"), "{isolation:?}: no Scheme was run");
        let write = run(&["call", "fs-write", r#"{"path": "b.txt", "content": "x"}"#]);
        let value: Value = serde_json::from_str(&stdout(&write)).expect("one JSON object");
        assert_eq!(value["error"]["kind"], json!("denied"), "{isolation:?}: the config's guard rules still apply");
        assert!(!dir.path().join("b.txt").exists());
        let loud = run(&["call", "loud"]);
        assert_eq!(serde_json::from_str::<Value>(&stdout(&loud)).expect("one JSON object")["result"], json!("hi"));
        assert!(String::from_utf8_lossy(&loud.stderr).contains("loud.scm loaded"), "{isolation:?}");
    }
}

#[test]
fn a_tools_folder_that_does_not_exist_is_a_settings_error_for_every_command() {
    let dir = workspace(&[("tools/hi.scm", "(define-tool (hi) \"Say hi.\" \"hi\")\n")]);
    let read = r#"{"path":"a.txt"}"#;
    let commands: [&[&str]; 5] = [
        &["--tools", "nope", "call", "fs-read", read],
        &["--tools", "nope", "--no-isolate", "call", "fs-read", read],
        &["--tools", "tools", "--tools", "nope", "call", "hi"],
        &["--tools", "nope", "eval", "1"],
        &["--tools", "nope", "tools"],
    ];
    for args in commands {
        let out = toolhost(dir.path(), args, None);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}{err}", stdout(&out));
        assert!(err.contains("nope") && err.contains("does not exist"), "{args:?}: {err}");
        assert_eq!(stdout(&out), "", "{args:?}: nothing ran");
    }
}
