//! The Scheme tools that ship in `scheme/`, each called through the JSON path as a model calls them.

use crate::common;

use std::process::Command;

use common::*;
use serde_json::json;

const SOURCE: &str = "use std::io;\n\npub struct Config {\n    name: String,\n}\n\n// TODO: validate names\nfn main() {\n    let x = 1; // FIXME later\n}\n\nimpl Config {\n    pub fn new() -> Self { todo!() }\n}\n";

#[test]
fn read_around_centres_on_a_line() {
    let dir = workspace(&[]);
    let mut host = host(&dir);
    let text = ok_text(&host.call("read-around", json!({"path": "a.txt", "line": 100, "context": 2})));
    assert_eq!(numbered_lines(&text), vec![98, 99, 100, 101, 102]);
    let text = ok_text(&host.call("read-around", json!({"path": "a.txt", "line": 3})));
    assert_eq!(numbered_lines(&text), (1..=13).collect::<Vec<_>>());
    assert_eq!(err_of(&host.call("read-around", json!({"path": "a.txt", "line": 0}))).0, "tool_failed");
}

#[test]
fn file_outline_lists_definitions_with_line_numbers() {
    let dir = workspace(&[("src/lib.rs", SOURCE)]);
    let mut host = host(&dir);
    let text = ok_text(&host.call("file-outline", json!({"path": "src/lib.rs"})));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "src/lib.rs:3:pub struct Config {",
            "src/lib.rs:8:fn main() {",
            "src/lib.rs:12:impl Config {",
            "src/lib.rs:13:    pub fn new() -> Self { todo!() }",
        ]
    );
}

#[test]
fn find_todos_finds_markers_and_honours_the_glob() {
    let dir = workspace(&[("src/lib.rs", SOURCE), ("notes.md", "- TODO write docs\n")]);
    let mut host = host(&dir);
    let all = ok_text(&host.call("find-todos", json!({})));
    assert_eq!(all.lines().count(), 3, "{all}");
    let rust = ok_text(&host.call("find-todos", json!({"glob": "*.rs"})));
    assert_eq!(
        rust.lines().collect::<Vec<_>>(),
        ["src/lib.rs:7:// TODO: validate names", "src/lib.rs:9:    let x = 1; // FIXME later"]
    );
}

fn git(dir: &std::path::Path, args: &[&str]) {
    let status = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?}");
}

#[test]
fn git_diff_and_git_log_show_the_repository_state() {
    let dir = workspace(&[("src/lib.rs", SOURCE), ("it's.txt", "one\n")]);
    git(dir.path(), &["init", "-q"]);
    git(dir.path(), &["add", "."]);
    git(dir.path(), &["commit", "-qm", "first commit"]);
    write(dir.path(), "src/lib.rs", &SOURCE.replace("validate names", "check names"));
    write(dir.path(), "it's.txt", "two\n");
    let mut host = host(&dir);
    let diff = ok_text(&host.call("git-diff", json!({})));
    assert!(diff.contains("-// TODO: validate names") && diff.contains("+// TODO: check names"), "{diff}");
    let only = ok_text(&host.call("git-diff", json!({"path": "it's.txt"})));
    assert!(only.contains("+two") && !only.contains("check names"), "{only}");
    let staged = ok_text(&host.call("git-diff", json!({"staged": true})));
    assert!(!staged.contains("+two"), "nothing is staged: {staged}");
    let log = ok_text(&host.call("git-log", json!({"count": 1})));
    assert!(log.contains("t: first commit"), "{log}");
}

#[test]
fn shipped_tools_refuse_wrong_calls_instead_of_answering_nothing() {
    let dir =
        workspace(&[("src/lib.rs", SOURCE), ("src/we[ir]d.rs", "fn odd() {}\n"), ("other/lib.rs", "fn other() {}\n")]);
    let mut host = host(&dir);
    assert_eq!(err_of(&host.call("file-outline", json!({"path": "../../etc/passwd"}))).0, "denied");
    assert_eq!(err_of(&host.call("file-outline", json!({"path": "missing.rs"}))).0, "tool_failed");
    let odd = ok_text(&host.call("file-outline", json!({"path": "src/we[ir]d.rs"})));
    assert_eq!(odd, "src/we[ir]d.rs:1:fn odd() {}\n");
    let only = ok_text(&host.call("file-outline", json!({"path": "./src/lib.rs"})));
    assert!(only.lines().all(|l| l.starts_with("src/lib.rs:")), "{only}");
    assert_eq!(err_of(&host.call("read-around", json!({"path": "a.txt", "line": 5, "context": -3}))).0, "tool_failed");
    // Not a git repository: git's failure is the model's answer, not a success.
    let (kind, message) = err_of(&host.call("git-log", json!({})));
    assert_eq!(kind, "tool_failed");
    assert!(message.contains("git failed") && message.to_lowercase().contains("not a git repository"), "{message}");
    assert_eq!(err_of(&host.call("git-log", json!({"count": -1}))).0, "tool_failed");
}
