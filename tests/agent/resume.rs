//! `toolhost agent --resume LOG TASK` (issue 21, item 10): a logged conversation goes on with a new
//! task, its new lines go to the same log, and that log still replays and counts.

use crate::common;

use std::path::Path;
use std::process::Output;

use common::model_server::{ModelServer, Scripted};
use common::*;
use serde_json::{json, Value};
use toolhost::agent::{read_log, Entry};

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn run(home: &Home, dir: &Path, args: &[&str]) -> Output {
    let mut command = home.command(dir, args);
    for proxy in ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"] {
        command.env_remove(proxy);
    }
    command.stdin(std::process::Stdio::null()).output().expect("toolhost runs")
}

fn roles(request: &Value) -> Vec<String> {
    request["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap_or("?").to_string()).collect()
}

#[test]
fn a_resumed_session_carries_the_whole_conversation_adds_to_the_log_and_the_log_replays() {
    let dir = workspace(&[]);
    let home = Home::new();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("s.jsonl");
    let log_arg = log.display().to_string();
    let first = ModelServer::start(vec![
        Scripted::calls(&[("w1", "fs-write", r#"{"path":"notes.txt","content":"apple pie\n"}"#)]),
        Scripted::text("I wrote notes.txt."),
    ]);
    let url = first.base_url();
    let args = ["--yes", "agent", "--base-url", &url, "--model", "m", "--log", &log_arg, "Write notes."];
    let out = run(&home, dir.path(), &args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let second = ModelServer::start(vec![
        Scripted::calls(&[("e1", "fs-edit", r#"{"path":"notes.txt","old":"apple","new":"pear"}"#)]),
        Scripted::text("Now it is pear pie."),
    ]);
    let url = second.base_url();
    let args = ["--yes", "agent", "--base-url", &url, "--model", "m", "--resume", &log_arg, "Make it pear."];
    let out = run(&home, dir.path(), &args);
    assert_eq!((out.status.code(), stdout(&out)), (Some(0), "Now it is pear pie.\n".to_string()), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(), "pear pie\n");

    // The first request of the resumed session carries the whole conversation, then the new task.
    let request = second.requests()[0].json();
    assert_eq!(roles(&request), ["system", "user", "assistant", "tool", "assistant", "user"]);
    let messages = &request["messages"];
    assert_eq!(messages[1]["content"], "Write notes.");
    assert_eq!(messages[2]["tool_calls"][0]["id"], "w1");
    assert_eq!(messages[3]["tool_call_id"], "w1");
    assert_eq!(messages[4]["content"], "I wrote notes.txt.");
    assert_eq!(messages[5], json!({"role": "user", "content": "Make it pear."}));
    assert_eq!(messages[0], first.requests()[0].json()["messages"][0], "the system prompt is the logged one");

    // One log, two sessions; turns go on counting, and each request's messages follow the ones
    // before them.
    let entries = read_log(&log).unwrap();
    let sessions: Vec<Option<String>> = entries
        .iter()
        .filter_map(|e| match e {
            Entry::Session { resumes, .. } => Some(resumes.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(sessions, [None, Some(log_arg.clone())]);
    let requests: Vec<(usize, usize, usize)> = entries
        .iter()
        .filter_map(|e| match e {
            Entry::Request { turn, messages_before, messages, .. } => Some((*turn, *messages_before, messages.len())),
            _ => None,
        })
        .collect();
    assert_eq!(requests, [(1, 0, 2), (2, 2, 2), (3, 4, 2), (4, 6, 2)]);
    let ends: Vec<usize> = entries
        .iter()
        .filter_map(|e| match e {
            Entry::End { turns, .. } => Some(*turns),
            _ => None,
        })
        .collect();
    assert_eq!(ends, [2, 2], "each session's end counts its own requests");

    // The log replays as one, from the state the first session started from.
    let fresh = workspace(&[]);
    let out = run(&home, fresh.path(), &["replay", &log_arg]);
    assert_eq!(stdout(&out), "replayed 2 calls: every result is as logged\n", "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(fresh.path().join("notes.txt")).unwrap(), "pear pie\n");
    // And it counts as two sessions.
    let out = run(&home, fresh.path(), &["stats", "--format", "json", &log_arg]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["sessions"]["count"], 2, "{stats}");
}

#[test]
fn a_session_cut_at_the_turn_limit_goes_on_with_its_last_calls_answered() {
    let dir = workspace(&[]);
    let home = Home::new();
    let logs = tempfile::tempdir().unwrap();
    let log_arg = logs.path().join("s.jsonl").display().to_string();
    let first = ModelServer::start(vec![Scripted::calls(&[
        ("r1", "fs-read", r#"{"path":"a.txt","start":3,"count":1}"#),
        ("r2", "fs-read", r#"{"path":"a.txt","start":4,"count":1}"#),
    ])]);
    let url = first.base_url();
    let args = ["agent", "--base-url", &url, "--model", "m", "--max-turns", "1", "--log", &log_arg, "Read."];
    let out = run(&home, dir.path(), &args);
    assert_eq!(out.status.code(), Some(1), "the turn limit: {}", stderr(&out));

    let second = ModelServer::start(vec![Scripted::text("lines 3 and 4")]);
    let url = second.base_url();
    // Into a log of its own: its first request holds the whole conversation.
    let other = logs.path().join("other.jsonl");
    let other_arg = other.display().to_string();
    let args = ["agent", "--base-url", &url, "--model", "m", "--resume", &log_arg, "--log", &other_arg, "Which lines?"];
    let out = run(&home, dir.path(), &args);
    assert_eq!((out.status.code(), stdout(&out)), (Some(0), "lines 3 and 4\n".to_string()), "{}", stderr(&out));
    let request = second.requests()[0].json();
    assert_eq!(roles(&request), ["system", "user", "assistant", "tool", "tool", "user"]);
    let messages = &request["messages"];
    assert_eq!((messages[3]["tool_call_id"].clone(), messages[4]["tool_call_id"].clone()), (json!("r1"), json!("r2")));
    assert!(messages[3]["content"].as_str().unwrap().starts_with("3\tline 3\n"), "{}", messages[3]);
    let entries = read_log(&other).unwrap();
    let Some(Entry::Request { turn, messages_before, messages, .. }) =
        entries.iter().find(|e| matches!(e, Entry::Request { .. }))
    else {
        panic!("{entries:?}")
    };
    assert_eq!((*turn, *messages_before, messages.len()), (2, 0, 6), "the new log stands alone");
    assert_eq!(std::fs::read_to_string(&log_arg).unwrap().lines().count(), 6, "the old log is left as it was");

    // A dialect other than the log's is refused: a conversation cannot change how tools are spoken.
    let args = ["agent", "--base-url", &url, "--model", "m", "--dialect", "pformat", "--resume", &log_arg, "Go on."];
    let out = run(&home, dir.path(), &args);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("was a native session"), "{}", stderr(&out));
}
