//! Code mode in the agent loop (issue 20): `--tools-as code` offers the model only the `scheme`
//! program tool with every tool as a procedure in its description; the model's program runs, its
//! nested calls go to the log with their decisions; replay and stats read the log; P-format and
//! strict mode work with it; a confirm rule inside a program asks on a terminal.

use crate::common;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use common::model_server::{ModelServer, Scripted};
use common::*;
use serde_json::{json, Value};
use toolhost::agent::{read_log, ChatClient, ClientSettings, Dialect, Entry, RetryPolicy, Session};
use toolhost::code_mode::ToolsAs;
use toolhost::{HostBuilder, HostHandle};

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `toolhost ARGS` in `dir` with `home`, its input closed: no terminal.
fn run(home: &Home, dir: &Path, args: &[&str]) -> Output {
    home.run(dir, args, None)
}

/// The tool results the second request carries back, in order.
fn results(server: &ModelServer) -> Vec<String> {
    let body = server.requests()[1].json();
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    messages.iter().filter(|m| m["role"] == "tool").map(|m| m["content"].as_str().unwrap_or("").to_string()).collect()
}

/// A call's arguments that run `code` as a program.
fn program(code: &str) -> String {
    json!({ "code": code }).to_string()
}

const PROGRAM: &str = r#"(define found (hash-ref (grep-matches "TODO") "matches"))
(displayln "found" (length found))
(map (lambda (m) (hash-ref m "path")) found)"#;

#[test]
fn an_agent_in_code_mode_offers_only_the_program_tool_and_logs_each_call_its_program_made() {
    let dir = workspace(&[("src/a.rs", "// TODO one\n"), ("src/b.rs", "fn b() {}\n// TODO two\n")]);
    let args = program(PROGRAM);
    let server = ModelServer::start(vec![
        Scripted::calls(&[("p1", "scheme", &args), ("r", "fs-read", r#"{"path":"a.txt"}"#)]),
        Scripted::text("two TODOs"),
    ]);
    let (home, logs) = (Home::new(), tempfile::tempdir().unwrap());
    let log = logs.path().join("s.jsonl").display().to_string();
    let url = server.base_url();
    let out = run(
        &home,
        dir.path(),
        &["agent", "--tools-as", "code", "--base-url", &url, "--model", "m", "--log", &log, "Find TODOs."],
    );
    assert_eq!((out.status.code(), stdout(&out)), (Some(0), "two TODOs\n".to_string()), "{}", stderr(&out));
    let first = server.requests()[0].json();
    let tools = first["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1, "{tools:?}");
    assert_eq!(tools[0]["function"]["name"], "scheme");
    let description = tools[0]["function"]["description"].as_str().unwrap();
    assert!(
        description.contains("(fs-read path [start] [count])") && description.contains("(grep-matches pattern [glob])")
    );
    let told = results(&server);
    assert_eq!(told[0], "found 2\n(\"src/a.rs\" \"src/b.rs\")");
    assert!(told[1].starts_with("error (unknown_tool)"), "a tool not offered is refused: {}", told[1]);
    assert!(!told[1].contains("line 1"), "{}", told[1]);

    // The log keeps the program, its nested calls with their decisions, and the result.
    let entries = read_log(Path::new(&log)).unwrap();
    let record = entries
        .iter()
        .find_map(|e| match e {
            Entry::Call { record, .. } if record.tool == "scheme" => Some(record.clone()),
            _ => None,
        })
        .unwrap();
    let nested = record.nested.as_ref().unwrap();
    assert_eq!(nested.len(), 1);
    assert_eq!(nested[0].tool, "grep-matches");
    assert!(nested[0].decision.as_ref().is_some_and(|d| d.allows()));
    assert!(entries.iter().any(|e| matches!(e, Entry::Session { .. })));
    let session_line = std::fs::read_to_string(&log).unwrap().lines().next().unwrap().to_string();
    assert!(session_line.contains(r#""tools":"code""#), "{session_line}");

    // Replay runs the program again; stats counts it as a program with one nested call.
    let out = run(&home, dir.path(), &["replay", &log]);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    // The call of a tool that was not offered never reached the host: nothing to replay.
    assert_eq!(stdout(&out), "replayed 1 calls (1 skipped): every result is as logged\n");
    write(dir.path(), "src/c.rs", "// TODO three\n");
    let out = run(&home, dir.path(), &["replay", &log]);
    assert_eq!(out.status.code(), Some(1), "a changed tree changes the program's result: {}", stdout(&out));
    let out = run(&home, dir.path(), &["stats", "--format", "json", &log]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["code_mode"]["programs"], 1, "{report}");
    assert_eq!(report["code_mode"]["nested_calls"]["total"], 1, "{report}");
    assert_eq!(report["code_mode"]["nested_calls"]["tools"]["grep-matches"], 1, "{report}");
}

fn client(server: &ModelServer) -> ChatClient {
    let mut settings = ClientSettings::new(server.base_url(), "test-model");
    settings.retry =
        RetryPolicy { attempts: 2, base_delay: Duration::from_millis(1), max_delay: Duration::from_millis(5) };
    settings.stream = false;
    ChatClient::new(settings)
}

fn handle(dir: &Path) -> HostHandle {
    HostHandle::spawn(HostBuilder::new(dir).project_tools(false)).unwrap()
}

#[test]
fn code_mode_works_in_p_format_and_in_strict_mode_and_both_offers_the_program_beside_the_tools() {
    let dir = workspace(&[]);
    // P-format: the program tool is in the system prompt's catalogue, with the procedures.
    let server = ModelServer::start(vec![
        Scripted::text("<tool_call>scheme[0|(length (file-lines \"a.txt\"))]</tool_call>"),
        Scripted::text("300 lines"),
    ]);
    let mut model = client(&server);
    let outcome = Session::new(handle(dir.path()), &mut model)
        .dialect(Dialect::Pformat)
        .tools_as(ToolsAs::Code)
        .run("Count.")
        .unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("300 lines"));
    let requests = server.requests();
    let system = requests[0].json()["messages"][0]["content"].as_str().unwrap().to_string();
    assert!(system.contains("scheme[0|<code>]") && system.contains("(file-lines path [start] [count])"), "{system}");
    assert!(!system.contains("\nfs-read["), "only the program tool is offered: {system}");
    let back =
        requests[1].json()["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_string();
    assert!(back.contains("<tool_result call=\"1\" tool=\"scheme\">\n300\n"), "{back}");

    // Strict: the program tool's schema is strict, and its calls run.
    let args = program("(+ 40 2)");
    let server = ModelServer::start(vec![Scripted::calls(&[("s1", "scheme", &args)]), Scripted::text("42")]);
    let mut model = client(&server);
    Session::new(handle(dir.path()), &mut model).strict(true).tools_as(ToolsAs::Code).run("Add.").unwrap();
    let tools = server.requests()[0].json()["tools"].clone();
    assert_eq!(tools[0]["function"]["strict"], true, "{tools}");
    assert_eq!(results(&server), ["42"]);

    // Both: the tools and the program tool.
    let server = ModelServer::start(vec![Scripted::text("nothing to do")]);
    let mut model = client(&server);
    Session::new(handle(dir.path()), &mut model).tools_as(ToolsAs::Both).run("Look.").unwrap();
    let names: Vec<String> = server.requests()[0].json()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(names.contains(&"scheme".to_string()) && names.contains(&"fs-read".to_string()), "{names:?}");
}

#[test]
fn a_program_s_write_is_confirmed_on_a_terminal_and_denied_without_one() {
    let home = Home::new();
    let edit = program("(fs-edit \"a.txt\" \"line 7\\n\" \"seventh\\n\")\n\"edited\"");
    for (typed, written) in [("y\n", true), ("n\n", false)] {
        let dir = workspace(&[]);
        let server = ModelServer::start(vec![Scripted::calls(&[("p", "scheme", &edit)]), Scripted::text("over")]);
        let (url, logs) = (server.base_url(), tempfile::tempdir().unwrap());
        let log = logs.path().join("s.jsonl").display().to_string();
        let args = ["agent", "--tools-as", "code", "--base-url", &url, "--model", "m", "--log", &log, "Edit."];
        let screen = on_terminal(&home, dir.path(), &args, typed);
        assert!(screen.contains("fs-edit needs your confirmation"), "{screen}");
        assert!(screen.contains("-line 7") && screen.contains("+seventh"), "the diff is shown: {screen}");
        let text = std::fs::read_to_string(dir.path().join("a.txt")).unwrap();
        assert_eq!(text.contains("seventh\n"), written, "{screen}");
        let result = results(&server)[0].clone();
        assert_eq!(result == "\"edited\"", written, "{result}");
        assert_eq!(result.contains("the person declined"), !written, "{result}");
        // Replay gives the program's call the answer the log has for it, with nobody to ask.
        let fresh = workspace(&[]);
        let out = run(&home, fresh.path(), &["replay", &log]);
        assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
        assert_eq!(std::fs::read_to_string(fresh.path().join("a.txt")).unwrap().contains("seventh\n"), written);
    }
    // No terminal: the program's edit is denied and the model told why.
    let dir = workspace(&[]);
    let server = ModelServer::start(vec![Scripted::calls(&[("p", "scheme", &edit)]), Scripted::text("over")]);
    let url = server.base_url();
    let out = run(&home, dir.path(), &["agent", "--tools-as", "code", "--base-url", &url, "--model", "m", "Edit."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let result = results(&server)[0].clone();
    assert!(result.starts_with("error (denied)") && result.contains("no one to ask"), "{result}");
    assert!(!std::fs::read_to_string(dir.path().join("a.txt")).unwrap().contains("seventh"));
}
