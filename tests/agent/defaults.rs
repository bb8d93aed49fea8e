//! `toolhost agent`'s safe defaults (issue 21, item 8): with no guard rule of the user's deciding
//! them, `shell-exec`, `fs-write` and `fs-edit` calls are confirmed first, on a terminal and without
//! one; `--yes` and the user's own rules decide instead; `toolhost call` keeps its defaults.

use crate::common;

use std::path::Path;
use std::process::Output;

use common::model_server::{ModelServer, Scripted};
use common::*;
use serde_json::Value;
use toolhost::agent::{read_log, Entry};
use toolhost::Decision;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `toolhost ARGS` in `dir` with `home`, no terminal, no proxies.
fn run(home: &Home, dir: &Path, args: &[&str]) -> Output {
    let mut command = home.command(dir, args);
    for proxy in ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"] {
        command.env_remove(proxy);
    }
    command.stdin(std::process::Stdio::null()).output().expect("toolhost runs")
}

/// One reply that writes, edits and runs a command, and reads a file; then an answer.
fn changing_script() -> Vec<Scripted> {
    vec![
        Scripted::calls(&[
            ("w", "fs-write", r#"{"path":"new.txt","content":"made\n"}"#),
            ("e", "fs-edit", r#"{"path":"a.txt","old":"line 1\n","new":"first\n"}"#),
            ("s", "shell-exec", r#"{"cmd":"touch ran"}"#),
            ("r", "fs-read", r#"{"path":"a.txt","start":2,"count":1}"#),
        ]),
        Scripted::text("finished"),
    ]
}

/// The tool results the second request carried, in order.
fn results(server: &ModelServer) -> Vec<String> {
    let body = server.requests()[1].json();
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn agent_args<'a>(url: &'a str, log: &'a str, before: &[&'a str]) -> Vec<&'a str> {
    let mut args = before.to_vec();
    args.extend(["agent", "--base-url", url, "--model", "m", "--log", log, "Change things."]);
    args
}

#[test]
fn without_a_terminal_the_agent_denies_writes_edits_and_commands_and_tells_the_model_why() {
    let dir = workspace(&[]);
    let server = ModelServer::start(changing_script());
    let home = Home::new();
    let (url, logs) = (server.base_url(), tempfile::tempdir().unwrap());
    let log = logs.path().join("s.jsonl").display().to_string();
    let out = run(&home, dir.path(), &agent_args(&url, &log, &[]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!dir.path().join("new.txt").exists() && !dir.path().join("ran").exists());
    assert!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap().starts_with("line 1\n"));
    let told = results(&server);
    for (result, tool) in told.iter().zip(["fs-write", "fs-edit", "shell-exec"]) {
        assert!(result.starts_with(&format!("error (denied): {tool}: denied: ")), "{result}");
        assert!(result.contains("confirmation") && result.contains("no terminal"), "{result}");
    }
    assert!(told[3].starts_with("2\tline 2\n"), "reading is not asked about: {}", told[3]);
    // The log says which rule asked: the agent's defaults.
    let decisions: Vec<Option<Decision>> = read_log(Path::new(&log))
        .unwrap()
        .into_iter()
        .filter_map(|e| match e {
            Entry::Call { record, .. } => Some(record.decision),
            _ => None,
        })
        .collect();
    for decision in &decisions[..3] {
        let Some(Decision::Confirm { rule: Some(rule), answer: false, by }) = decision else { panic!("{decision:?}") };
        assert_eq!((rule.origin.as_deref(), by.as_str()), (Some("toolhost agent's defaults"), "nobody"));
    }
    assert!(matches!(decisions[3], Some(Decision::Allow { rule: None })), "{:?}", decisions[3]);
}

#[test]
fn yes_allows_what_the_defaults_ask_about() {
    let dir = workspace(&[]);
    let server = ModelServer::start(changing_script());
    let (url, logs) = (server.base_url(), tempfile::tempdir().unwrap());
    let log = logs.path().join("s.jsonl").display().to_string();
    let out = run(&Home::new(), dir.path(), &agent_args(&url, &log, &["--yes"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(dir.path().join("new.txt").exists() && dir.path().join("ran").exists());
    assert!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap().starts_with("first\n"));
    assert!(results(&server).iter().all(|r| !r.starts_with("error")), "{:?}", results(&server));
}

#[test]
fn a_rule_of_the_users_decides_the_calls_it_matches_and_the_defaults_ask_about_the_rest() {
    let rules = "[[guard.rule]]\ntool = \"fs-*\"\naction = \"allow\"\n\n\
                 [[guard.rule]]\ntool = \"fs-edit\"\naction = \"deny\"\nreason = \"no edits today\"\n";
    let dir = workspace(&[("rules.toml", rules)]);
    let server = ModelServer::start(changing_script());
    let (url, logs) = (server.base_url(), tempfile::tempdir().unwrap());
    let log = logs.path().join("s.jsonl").display().to_string();
    let out = run(&Home::new(), dir.path(), &agent_args(&url, &log, &["--config", "rules.toml"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let told = results(&server);
    assert!(!told[0].starts_with("error"), "the user's fs-* rule allows fs-write: {}", told[0]);
    assert!(dir.path().join("new.txt").exists());
    // The first rule that matches decides: fs-* allows fs-edit before the deny rule is reached.
    assert!(!told[1].starts_with("error"), "{}", told[1]);
    assert!(told[2].contains("no terminal"), "no rule of the user's decides shell-exec: {}", told[2]);
    assert!(!dir.path().join("ran").exists());

    // A [guard] default of the user's decides every call no rule matches: the defaults step aside.
    let dir = workspace(&[("open.toml", "[guard]\ndefault = \"allow\"\n")]);
    let server = ModelServer::start(changing_script());
    let url = server.base_url();
    let out = run(&Home::new(), dir.path(), &agent_args(&url, &log, &["--config", "open.toml"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(dir.path().join("ran").exists(), "{:?}", results(&server));
}

#[test]
fn on_a_terminal_the_agent_asks_before_a_write_showing_the_diff() {
    let home = Home::new();
    for (typed, written) in [("y\n", true), ("n\n", false)] {
        let dir = workspace(&[]);
        let server = ModelServer::start(vec![
            Scripted::calls(&[("e", "fs-edit", r#"{"path":"a.txt","old":"line 7\n","new":"seventh\n"}"#)]),
            Scripted::text("over"),
        ]);
        let url = server.base_url();
        let screen = on_terminal(&home, dir.path(), &["agent", "--base-url", &url, "--model", "m", "Edit."], typed);
        assert!(screen.contains("fs-edit needs your confirmation"), "{screen}");
        assert!(screen.contains("-line 7") && screen.contains("+seventh"), "the diff is shown: {screen}");
        let text = std::fs::read_to_string(dir.path().join("a.txt")).unwrap();
        assert_eq!(text.contains("seventh\n"), written, "{screen}");
        let result = results(&server)[0].clone();
        assert_eq!(result.contains("the person declined"), !written, "{result}");
    }
}

#[test]
fn call_keeps_its_defaults_and_agent_help_tells_of_the_agents() {
    let dir = workspace(&[]);
    let home = Home::new();
    let out = run(&home, dir.path(), &["call", "fs-write", r#"{"path":"c.txt","content":"x"}"#]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["ok"], true, "{answer}");
    let out = run(&home, dir.path(), &["agent", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("asks before every shell-exec, fs-write and fs-edit call"), "{help}");
    assert!(help.contains("--yes answers yes"), "{help}");
}
