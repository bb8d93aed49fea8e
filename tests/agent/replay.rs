//! `toolhost replay` (design section 12), run as a real process on logs that `toolhost agent` wrote
//! against a model server on 127.0.0.1: a session replays clean on the state it started from, and
//! the same log reports each result that differs after a file or a tool's behaviour changed.

use crate::common;

use std::path::Path;
use std::process::Output;

use common::model_server::{ModelServer, Scripted};
use common::*;

fn run(home: &Home, dir: &Path, args: &[&str]) -> Output {
    let mut command = home.command(dir, args);
    for proxy in ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"] {
        command.env_remove(proxy);
    }
    command.stdin(std::process::Stdio::null()).output().expect("toolhost runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The state every session here starts from.
fn start_state() -> tempfile::TempDir {
    workspace(&[
        ("notes.txt", "apple pie\n"),
        ("confirm.toml", "[[guard.rule]]\ntool = \"fs-edit\"\naction = \"confirm\"\n"),
    ])
}

fn shout_tools(body: &str) -> tempfile::TempDir {
    let tools = tempfile::tempdir().unwrap();
    write(tools.path(), "shout.scm", &format!("(define-tool (shout (text string \"Text\")) \"Shout.\" {body})\n"));
    tools
}

/// Records a session that edits notes.txt (confirmed with --yes), reads a.txt and calls a Scheme
/// tool; returns the log's path (in `logs`).
fn record_session(home: &Home, tools: &Path, logs: &Path) -> String {
    let dir = start_state();
    let server = ModelServer::start(vec![
        Scripted::calls(&[
            ("e", "fs-edit", r#"{"path":"notes.txt","old":"apple","new":"pear"}"#),
            ("r", "fs-read", r#"{"path":"a.txt","count":2}"#),
            ("s", "shout", r#"{"text":"hi"}"#),
        ]),
        Scripted::text("done"),
    ]);
    let (url, folder) = (server.base_url(), tools.display().to_string());
    let log = logs.join("session.jsonl").display().to_string();
    let args = [
        "--config",
        "confirm.toml",
        "--yes",
        "--tools",
        &folder,
        "agent",
        "--base-url",
        &url,
        "--model",
        "m",
        "--log",
        &log,
        "Edit, read, shout.",
    ];
    let out = run(home, dir.path(), &args);
    assert_eq!((out.status.code(), stdout(&out)), (Some(0), "done\n".to_string()), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(), "pear pie\n");
    log
}

#[test]
fn a_recorded_session_replays_clean_on_the_state_it_started_from() {
    let (home, tools, logs) = (Home::new(), shout_tools("(string-upcase text)"), tempfile::tempdir().unwrap());
    let log = record_session(&home, tools.path(), logs.path());
    let fresh = start_state();
    let folder = tools.path().display().to_string();
    // No --yes: the confirmation is answered as the log says it was.
    let out = run(&home, fresh.path(), &["--config", "confirm.toml", "--tools", &folder, "replay", &log]);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(stdout(&out), "replayed 3 calls: every result is as logged\n");
    assert_eq!(std::fs::read_to_string(fresh.path().join("notes.txt")).unwrap(), "pear pie\n", "the calls ran again");
}

#[test]
fn the_same_log_reports_a_changed_file_naming_the_call_and_showing_both_results() {
    let (home, tools, logs) = (Home::new(), shout_tools("(string-upcase text)"), tempfile::tempdir().unwrap());
    let log = record_session(&home, tools.path(), logs.path());
    let changed = start_state();
    write(changed.path(), "a.txt", "first line changed\nline 2\n");
    let folder = tools.path().display().to_string();
    let out = run(&home, changed.path(), &["--config", "confirm.toml", "--tools", &folder, "replay", &log]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report = stdout(&out);
    let lines: Vec<&str> = report.lines().collect();
    assert_eq!(lines.len(), 4, "{report}");
    assert_eq!(lines[0], r#"turn 1, call 2: fs-read {"path":"a.txt","count":2}"#);
    assert!(lines[1].starts_with("  logged: ") && lines[1].contains(r"1\tline 1\n2\tline 2"), "{report}");
    assert!(lines[2].starts_with("  now:    ") && lines[2].contains(r"1\tfirst line changed\n2\tline 2"), "{report}");
    assert_eq!(lines[3], "replayed 3 calls: 1 differ");
}

#[test]
fn the_same_log_reports_a_tool_whose_behaviour_changed() {
    let (home, tools, logs) = (Home::new(), shout_tools("(string-upcase text)"), tempfile::tempdir().unwrap());
    let log = record_session(&home, tools.path(), logs.path());
    let whisper = shout_tools("(string-downcase text)");
    let fresh = start_state();
    let folder = whisper.path().display().to_string();
    let out = run(&home, fresh.path(), &["--config", "confirm.toml", "--tools", &folder, "replay", &log]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report = stdout(&out);
    assert!(report.starts_with("turn 1, call 3: shout {\"text\":\"hi\"}\n"), "{report}");
    assert!(report.contains(r#"  logged: {"ok":true,"result":"HI"}"#), "{report}");
    assert!(report.contains(r#"  now:    {"ok":true,"result":"hi"}"#), "{report}");
    // Replayed on the workspace the session left behind, the edit no longer applies either.
    let out = run(&home, fresh.path(), &["--config", "confirm.toml", "--tools", &folder, "replay", &log]);
    assert!(stdout(&out).contains("turn 1, call 1: fs-edit"), "{}", stdout(&out));
    assert!(stdout(&out).contains(r#""kind":"tool_failed""#), "{}", stdout(&out));
}

#[test]
fn refused_pformat_tags_are_skipped_and_counted() {
    let dir = workspace(&[]);
    let server = ModelServer::start(vec![
        Scripted::text("<tool_call>fs-read[0|a.txt|2|1]</tool_call><tool_call>fs-read[a.txt]</tool_call>"),
        Scripted::text("done"),
    ]);
    let home = Home::new();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("p.jsonl").display().to_string();
    let url = server.base_url();
    let out = run(
        &home,
        dir.path(),
        &["agent", "--dialect", "pformat", "--base-url", &url, "--model", "m", "--log", &log, "Read."],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run(&home, dir.path(), &["replay", &log]);
    assert_eq!(
        (out.status.code(), stdout(&out)),
        (Some(0), "replayed 1 calls (1 skipped): every result is as logged\n".into())
    );
}

#[test]
fn a_log_that_does_not_read_is_a_settings_error_naming_the_line() {
    let dir = workspace(&[("bad.jsonl", "{\"type\":\"end\",\"reason\":\"answered\",\"turns\":1}\nnot json\n")]);
    let out = run(&Home::new(), dir.path(), &["replay", "bad.jsonl"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("bad.jsonl:2:"), "{}", stderr(&out));
    let out = run(&Home::new(), dir.path(), &["replay", "missing.jsonl"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("missing.jsonl"), "{}", stderr(&out));
}
