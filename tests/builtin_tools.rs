//! The built-in tools (design section 9) on real files and real processes.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

#[test]
fn index_grep_with_empty_glob_searches_every_file_and_a_glob_narrows_it() {
    let dir = workspace(&[
        ("src/main.rs", "fn main() { needle(); }\n"),
        ("src/util.rs", "// needle here too\n"),
        ("docs/guide.md", "a needle in the docs\n"),
        ("target/out.rs", "needle in ignored output\n"),
        (".gitignore", "target/\n"),
    ]);
    let mut host = host(&dir);
    let every = ok_text(&host.call("index-grep", json!({"pattern": "needle", "glob": ""})));
    assert_eq!(
        every.lines().collect::<Vec<_>>(),
        [
            "docs/guide.md:1:a needle in the docs",
            "src/main.rs:1:fn main() { needle(); }",
            "src/util.rs:1:// needle here too"
        ]
    );
    let rust = ok_text(&host.call("index-grep", json!({"pattern": "needle", "glob": "*.rs"})));
    assert_eq!(
        rust.lines().collect::<Vec<_>>(),
        ["src/main.rs:1:fn main() { needle(); }", "src/util.rs:1:// needle here too"]
    );
    let none = ok_text(&host.call("index-grep", json!({"pattern": "haystack"})));
    assert_eq!(none, "no matches\n");
    let (kind, message) = err_of(&host.call("index-grep", json!({"pattern": "("})));
    assert_eq!(kind, "tool_failed");
    assert!(message.contains("invalid pattern"), "{message}");
}

#[test]
fn index_grep_caps_its_output_with_a_note() {
    let many: String = (0..500).map(|i| format!("match {i}\n")).collect();
    let dir = workspace(&[("many.txt", &many)]);
    let mut host = host(&dir);
    let text = ok_text(&host.call("index-grep", json!({"pattern": "^match", "glob": "many.txt"})));
    assert_eq!(text.lines().filter(|l| l.starts_with("many.txt:")).count(), 200);
    assert!(
        text.ends_with("... 500 matching lines in 1 files, first 200 shown; narrow the pattern or the glob\n"),
        "{text}"
    );
}

#[test]
fn fs_edit_with_two_matches_needs_replace_all_and_names_the_lines() {
    let dir = workspace(&[("f.txt", "alpha\nbeta\nalpha\n")]);
    let mut host = host(&dir);
    let (kind, message) = err_of(&host.call("fs-edit", json!({"path": "f.txt", "old": "alpha", "new": "gamma"})));
    assert_eq!(kind, "tool_failed");
    assert!(message.contains("2 times") && message.contains("lines 1, 3"), "{message}");
    assert_eq!(std::fs::read_to_string(dir.path().join("f.txt")).unwrap(), "alpha\nbeta\nalpha\n");
    let done =
        ok_text(&host.call("fs-edit", json!({"path": "f.txt", "old": "alpha", "new": "gamma", "replace-all": true})));
    assert_eq!(done, "replaced 2 occurrences in f.txt");
    assert_eq!(std::fs::read_to_string(dir.path().join("f.txt")).unwrap(), "gamma\nbeta\ngamma\n");
}

#[test]
fn fs_edit_without_a_match_shows_the_closest_lines() {
    let dir = workspace(&[("f.rs", "fn main() {\n    let total = count(items);\n}\n")]);
    let mut host = host(&dir);
    let (_, message) =
        err_of(&host.call("fs-edit", json!({"path": "f.rs", "old": "let total = count(item);", "new": "x"})));
    assert!(message.contains("not found") && message.contains("2\t    let total = count(items);"), "{message}");
    let once = ok_text(&host.call("fs-edit", json!({"path": "f.rs", "old": "count(items)", "new": "items.len()"})));
    assert_eq!(once, "replaced 1 occurrence in f.rs");
}

#[test]
fn fs_write_creates_parents_replaces_atomically_and_leaves_no_temporary_files() {
    let dir = workspace(&[]);
    let mut host = host(&dir);
    let created = ok_text(&host.call("fs-write", json!({"path": "deep/er/new.txt", "content": "hello\n"})));
    assert!(created.starts_with("created deep/er/new.txt"), "{created}");
    let replaced = ok_text(&host.call("fs-write", json!({"path": "deep/er/new.txt", "content": "bye\n"})));
    assert!(replaced.starts_with("replaced"), "{replaced}");
    assert_eq!(std::fs::read_to_string(dir.path().join("deep/er/new.txt")).unwrap(), "bye\n");
    let leftovers: Vec<_> =
        std::fs::read_dir(dir.path().join("deep/er")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers, ["new.txt"]);
}

#[cfg(unix)]
#[test]
fn fs_write_keeps_an_existing_files_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let dir = workspace(&[("run.sh", "#!/bin/sh\n")]);
    std::fs::set_permissions(dir.path().join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut host = host(&dir);
    ok_text(&host.call("fs-write", json!({"path": "run.sh", "content": "#!/bin/sh\necho hi\n"})));
    let mode = std::fs::metadata(dir.path().join("run.sh")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o755);
}

#[test]
fn fs_list_shows_a_tree_without_ignored_entries() {
    let dir =
        workspace(&[("src/main.rs", ""), ("src/deep/er/x.rs", ""), ("target/junk", ""), (".gitignore", "target/\n")]);
    let mut host = host(&dir);
    let tree = ok_text(&host.call("fs-list", json!({})));
    assert_eq!(tree, "a.txt\nsrc/\n  deep/\n    er/\n  main.rs\n");
    let shallow = ok_text(&host.call("fs-list", json!({"path": "src", "depth": 1})));
    assert_eq!(shallow, "deep/\nmain.rs\n");
    assert_eq!(err_of(&host.call("fs-list", json!({"path": "nope"}))).0, "tool_failed");
}

#[test]
fn fs_read_reports_binary_files_long_lines_and_ranges_past_the_end() {
    let long = format!("{}\nshort\n", "x".repeat(10_000));
    let dir = workspace(&[("long.txt", &long), ("empty.txt", "")]);
    std::fs::write(dir.path().join("bin.dat"), [0u8, 1, 2, 3, 0, 255]).unwrap();
    let mut host = host(&dir);
    let (_, message) = err_of(&host.call("fs-read", json!({"path": "bin.dat"})));
    assert!(message.contains("binary"), "{message}");
    let text = ok_text(&host.call("fs-read", json!({"path": "long.txt"})));
    assert!(text.contains("[... 8,000 more bytes]") && text.contains("2\tshort"), "{text}");
    let (_, message) = err_of(&host.call("fs-read", json!({"path": "a.txt", "start": 400})));
    assert!(message.contains("past the end") && message.contains("300 lines"), "{message}");
    assert_eq!(ok_text(&host.call("fs-read", json!({"path": "empty.txt"}))), "(empty.txt is empty)\n");
    let (_, message) = err_of(&host.call("fs-read", json!({"path": "missing.txt"})));
    assert!(message.contains("no such file"), "{message}");
}

#[test]
fn fs_read_near_the_top_of_a_huge_file_says_more_follows() {
    let dir = workspace(&[]);
    let path = dir.path().join("huge.log");
    // More text than the binary sniff reads (8 KiB), then a sparse gigabyte of zeros.
    let head: String = (1..=2000).map(|n| format!("entry {n}\n")).collect();
    std::fs::write(&path, &head).unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(1 << 30).unwrap();
    let mut host = host(&dir);
    let text = ok_text(&host.call("fs-read", json!({"path": "huge.log", "start": 10, "count": 50})));
    assert_eq!(numbered_lines(&text), (10..=59).collect::<Vec<_>>());
    assert!(text.ends_with("... more lines follow (the file has 1,073,741,824 bytes); next start 60\n"), "{text}");
}

#[test]
fn shell_exec_returns_exit_code_stdout_and_stderr() {
    let dir = workspace(&[]);
    let mut host = host(&dir);
    let text = ok_text(&host.call("shell-exec", json!({"cmd": "echo out; echo err >&2; head -n 1 a.txt; exit 3"})));
    assert_eq!(text, "exit code: 3\n--- stdout ---\nout\nline 1\n--- stderr ---\nerr\n");
}

fn is_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // A zombie waiting for a reaper is dead too.
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

#[test]
fn shell_exec_timeout_kills_the_whole_process_group() {
    let dir = workspace(&[]);
    let mut host = host(&dir);
    let outcome =
        host.call("shell-exec", json!({"cmd": "sleep 60 & echo $! > bg.pid; echo started; sleep 60", "timeout-s": 1}));
    let (kind, message) = err_of(&outcome);
    assert_eq!(kind, "timeout");
    assert!(message.contains("started"), "the output so far is kept: {message}");
    let pid: u32 = std::fs::read_to_string(dir.path().join("bg.pid")).unwrap().trim().parse().unwrap();
    // The kill is sent before the call returns; give the kernel a moment to finish it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !is_gone(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(is_gone(pid), "the background child {pid} survived the timeout");
}

#[test]
fn shell_exec_caps_its_output() {
    let dir = workspace(&[]);
    let mut host = host(&dir);
    let text = ok_text(&host.call("shell-exec", json!({"cmd": "yes abcdefghi | head -c 100000"})));
    assert!(text.contains("[... 70,000 more bytes of stdout cut]"), "{}", &text[text.len() - 200..]);
    assert!(text.len() < 31_000);
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[test]
fn guard_rules_deny_and_confirm_before_anything_runs() {
    use toolhost::guard::{Action, Guard, Rule};
    let dir = workspace(&[]);
    let guard = Guard::default()
        .rule(Rule::new("shell-*", Action::Deny).unwrap())
        .rule(Rule::new("fs-write", Action::Confirm).unwrap());
    let mut host = toolhost::HostBuilder::new(dir.path()).guard(guard).build().unwrap();
    let (kind, _) = err_of(&host.call("shell-exec", json!({"cmd": "touch ran"})));
    assert_eq!(kind, "denied");
    let (kind, message) = err_of(&host.call("fs-write", json!({"path": "new.txt", "content": "x"})));
    assert_eq!(kind, "denied");
    assert!(message.contains("confirmation"), "{message}");
    // From Scheme too.
    assert!(host.eval("(shell-exec \"touch ran\")").is_err());
    assert_eq!(files_in(dir.path()), ["a.txt"]);

    let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let record = seen.clone();
    let guard = Guard::default().rule(Rule::new("fs-*", Action::Confirm).unwrap()).confirmer(std::sync::Arc::new(
        move |_tool, preview: &str| {
            *record.lock().unwrap() = preview.to_string();
            true
        },
    ));
    let mut host = toolhost::HostBuilder::new(dir.path()).guard(guard).build().unwrap();
    ok_text(&host.call("fs-edit", json!({"path": "a.txt", "old": "line 7\n", "new": "line seven\n"})));
    let preview = seen.lock().unwrap().clone();
    assert!(preview.contains("-line 7\n+line seven\n") && preview.contains("a/a.txt"), "{preview}");
}
