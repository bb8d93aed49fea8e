//! The built-in tools (design section 9) on real files and real processes.

use crate::common;

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
    let limits = toolhost::Limits::default();
    let cut = 100_000 - limits.shell_stream_bytes();
    let cut = format!("{},{:03}", cut / 1000, cut % 1000);
    assert!(text.contains(&format!("[... {cut} more bytes of stdout cut]")), "{}", &text[text.len() - 200..]);
    // Both streams and the headers fit in one result as a model is shown it.
    assert!(text.len() <= limits.output_chars, "{} bytes", text.len());
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
        move |request: &toolhost::guard::ConfirmRequest<'_>| {
            *record.lock().unwrap() = request.preview.to_string();
            toolhost::guard::Answer { yes: true, by: "test".into() }
        },
    ));
    let mut host = toolhost::HostBuilder::new(dir.path()).guard(guard).build().unwrap();
    ok_text(&host.call("fs-edit", json!({"path": "a.txt", "old": "line 7\n", "new": "line seven\n"})));
    let preview = seen.lock().unwrap().clone();
    assert!(preview.contains("-line 7\n+line seven\n") && preview.contains("a/a.txt"), "{preview}");
}

/// Runs `f` on a thread of its own and returns what it returns, failing the test if it has not
/// finished within `limit` (a guard against a call that blocks for ever, not a timing assertion).
fn finishes_within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).unwrap_or_else(|_| panic!("the call was still blocked after {limit:?}"))
}

/// The kind and message of a call's error, or the text of its result, as plain strings a thread
/// can hand back.
fn outcome_strings(outcome: &toolhost::CallRecord) -> Result<String, (String, String)> {
    match &outcome.result {
        Ok(serde_json::Value::String(s)) => Ok(s.clone()),
        Ok(other) => Ok(other.to_string()),
        Err(e) => Err((e.kind().as_str().to_string(), e.message().to_string())),
    }
}

#[cfg(unix)]
fn make_fifo(path: &Path) {
    let status = std::process::Command::new("mkfifo").arg(path).status().expect("run mkfifo");
    assert!(status.success(), "mkfifo {}", path.display());
}

#[cfg(unix)]
#[test]
fn fs_read_and_fs_edit_refuse_a_fifo_instead_of_blocking() {
    use std::os::unix::fs::FileTypeExt;
    let dir = workspace(&[]);
    make_fifo(&dir.path().join("pipe"));
    std::os::unix::fs::symlink(dir.path().join("pipe"), dir.path().join("to-pipe")).unwrap();
    let root = dir.path().to_path_buf();
    let results = finishes_within(Duration::from_secs(20), move || {
        let mut host = toolhost::HostBuilder::new(&root).build().expect("host");
        [
            host.call("fs-read", json!({"path": "pipe"})),
            host.call("fs-read", json!({"path": "to-pipe", "start": 2, "count": 1})),
            host.call("fs-edit", json!({"path": "pipe", "old": "a", "new": "b"})),
            host.call("fs-write", json!({"path": "pipe", "content": "x"})),
            host.call("fs-list", json!({"path": "pipe"})),
        ]
        .iter()
        .map(outcome_strings)
        .collect::<Vec<_>>()
    });
    for result in &results[..4] {
        let (kind, message) = result.clone().unwrap_err();
        assert_eq!(kind, "tool_failed");
        assert!(message.contains("not a regular file but a named pipe (FIFO)"), "{message}");
    }
    let (_, message) = results[4].clone().unwrap_err();
    assert!(message.contains("pipe is not a folder"), "{message}");
    assert!(std::fs::symlink_metadata(dir.path().join("pipe")).unwrap().file_type().is_fifo(), "the FIFO was kept");
    let (_, message) = err_of(&host(&dir).call("fs-read", json!({"path": "."})));
    assert!(message.contains("is a folder; use fs-list"), "{message}");
}

#[cfg(unix)]
#[test]
fn confirmation_previews_of_a_fifo_are_an_error_instead_of_blocking() {
    use toolhost::guard::{Action, Guard, Rule};
    let dir = workspace(&[]);
    make_fifo(&dir.path().join("pipe"));
    let root = dir.path().to_path_buf();
    let (results, asked) = finishes_within(Duration::from_secs(20), move || {
        let asked = std::sync::Arc::new(std::sync::Mutex::new(0));
        let count = asked.clone();
        let guard = Guard::default().rule(Rule::new("fs-*", Action::Confirm).unwrap()).confirmer(std::sync::Arc::new(
            move |_request: &toolhost::guard::ConfirmRequest<'_>| {
                *count.lock().unwrap() += 1;
                toolhost::guard::Answer { yes: true, by: "test".into() }
            },
        ));
        let mut host = toolhost::HostBuilder::new(&root).guard(guard).build().expect("host");
        let results: Vec<_> = [
            host.call("fs-write", json!({"path": "pipe", "content": "x"})),
            host.call("fs-edit", json!({"path": "pipe", "old": "a", "new": "b"})),
        ]
        .iter()
        .map(outcome_strings)
        .collect();
        let asked = *asked.lock().unwrap();
        (results, asked)
    });
    for result in results {
        let (_, message) = result.unwrap_err();
        assert!(message.contains("not a regular file"), "{message}");
    }
    assert_eq!(asked, 0, "nobody is asked to confirm a call whose preview failed");
}

#[test]
fn fs_read_with_a_huge_count_stops_at_the_byte_cap_with_a_next_start() {
    let lines: String = (1..=5000).map(|n| format!("{n:>5} {}\n", "y".repeat(94))).collect();
    let dir = workspace(&[("big.txt", &lines)]);
    let mut host = host(&dir);
    let text = ok_text(&host.call("fs-read", json!({"path": "big.txt", "count": i64::MAX})));
    let (body, note) = text.trim_end_matches('\n').rsplit_once('\n').unwrap();
    let body = format!("{body}\n");
    let cap = toolhost::Limits::default().output_budget();
    assert!(body.len() <= cap && body.len() > cap - 200, "{} bytes of lines for a cap of {cap}", body.len());
    let shown = numbered_lines(&body);
    let last = *shown.last().unwrap();
    assert_eq!(shown, (1..=last).collect::<Vec<_>>());
    // The held-back line counts among the remaining ones: shown + remaining = every line.
    let remaining: u64 = note
        .strip_prefix("... ")
        .and_then(|rest| rest.split(' ').next())
        .map(|n| n.replace(',', ""))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{note}"));
    assert_eq!(last + remaining, 5000, "{note}");
    assert!(note.ends_with(&format!("more lines; next start {}", last + 1)), "{note}");
    // The note's start continues exactly where the cut fell.
    let next = ok_text(&host.call("fs-read", json!({"path": "big.txt", "start": last + 1, "count": 1})));
    assert!(next.starts_with(&format!("{}\t{:>5} y", last + 1, last + 1)), "{next}");
}

#[test]
fn index_grep_glob_leaves_ignored_and_hidden_files_unsearched() {
    let dir = workspace(&[
        (".gitignore", ".env\ntarget/\n"),
        (".env", "API_KEY=secret\n"),
        ("target/build.rs", "API_KEY in build output\n"),
        (".hidden/keys.txt", "API_KEY=hidden\n"),
        ("deploy/prod.env", "API_KEY=${FROM_VAULT}\n"),
        ("src/config.rs", "const API_KEY: &str = \"\";\n"),
    ]);
    let mut host = host(&dir);
    let files_for = |host: &mut toolhost::Host, glob: &str| -> Vec<String> {
        let text = ok_text(&host.call("index-grep", json!({"pattern": "API_KEY", "glob": glob})));
        text.lines().filter_map(|l| l.split_once(':')).map(|(path, _)| path.to_string()).collect()
    };
    for glob in ["", "*", "**", "**/*"] {
        assert_eq!(files_for(&mut host, glob), ["deploy/prod.env", "src/config.rs"], "glob {glob:?}");
    }
    assert_eq!(files_for(&mut host, "*.env"), ["deploy/prod.env"]);
    assert_eq!(files_for(&mut host, "!*.rs"), ["deploy/prod.env"]);
    for glob in [".env", "/.env", ".env*", "target/", "target/*", "*.txt", ".hidden/*", "build.rs"] {
        assert!(files_for(&mut host, glob).is_empty(), "glob {glob:?} reached an ignored or hidden file");
    }
}

#[test]
fn index_grep_glob_without_a_slash_matches_names_at_any_depth_and_a_leading_slash_anchors() {
    let dir = workspace(&[
        ("main.rs", "fn main() {}\n"),
        ("src/main.rs", "fn main() {}\n"),
        ("src/bin/tool/main.rs", "fn main() {}\n"),
        ("src/lib.rs", "fn main() {}\n"),
        ("crates/x/src/lib.rs", "fn main() {}\n"),
        ("web/src/app/main.ts", "function main() {}\n"),
    ]);
    let mut host = host(&dir);
    let files_for = |host: &mut toolhost::Host, glob: &str| -> Vec<String> {
        let text = ok_text(&host.call("index-grep", json!({"pattern": "main", "glob": glob})));
        text.lines().filter_map(|l| l.split_once(':')).map(|(path, _)| path.to_string()).collect()
    };
    assert_eq!(files_for(&mut host, "main.rs"), ["main.rs", "src/bin/tool/main.rs", "src/main.rs"]);
    assert_eq!(files_for(&mut host, "/main.rs"), ["main.rs"]);
    assert_eq!(files_for(&mut host, "/src/lib.rs"), ["src/lib.rs"]);
    assert_eq!(files_for(&mut host, "src/lib.rs"), ["src/lib.rs"]);
    assert_eq!(files_for(&mut host, "**/src/lib.rs"), ["crates/x/src/lib.rs", "src/lib.rs"]);
    assert_eq!(files_for(&mut host, "src/*.rs"), ["src/lib.rs", "src/main.rs"]);
    assert_eq!(files_for(&mut host, "web/**/*.ts"), ["web/src/app/main.ts"]);
    assert_eq!(files_for(&mut host, "crates/"), ["crates/x/src/lib.rs"]);
    let (_, message) = err_of(&host.call("index-grep", json!({"pattern": "main", "glob": "src/[lib.rs"})));
    assert!(message.contains("invalid glob"), "{message}");
}

/// Kills the process whose pid is in `pid_file` (one this test's command started), if it still runs.
fn kill_escaped(pid_file: &Path) {
    if let Some(pid) = std::fs::read_to_string(pid_file).ok().and_then(|s| s.trim().parse::<i32>().ok()) {
        // SAFETY: kill only sends a signal, to a process this test started.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// Starts `sleep 30` in a session of its own (out of the command's process group, so a group kill
/// cannot reach it), holding the command's stdout and stderr, and waits until it has left the group.
const ESCAPE: &str =
    "setsid sh -c 'echo $$ > escaped.pid; exec sleep 30' & while [ ! -s escaped.pid ]; do sleep 0.05; done";

/// A host whose sandbox leaves processes alone: off, or with background processes allowed.
fn unsupervised_host(dir: &tempfile::TempDir, background: bool) -> toolhost::Host {
    let settings = toolhost::sandbox::Sandbox::builder();
    let settings =
        if background { settings.background(true) } else { settings.mode(toolhost::sandbox::SandboxMode::Off) };
    toolhost::HostBuilder::new(dir.path()).sandbox(settings.build().unwrap()).build().unwrap()
}

#[cfg(unix)]
#[test]
fn shell_exec_ends_a_setsid_child_that_holds_its_output_when_the_command_exits() {
    let dir = workspace(&[]);
    let mut host = host(&dir);
    let outcome = host.call("shell-exec", json!({"cmd": format!("{ESCAPE}; echo done")}));
    let pid = pid_in(&dir.path().join("escaped.pid"));
    let gone = is_gone(pid);
    kill_escaped(&dir.path().join("escaped.pid"));
    assert_eq!(ok_text(&outcome), "exit code: 0\n--- stdout ---\ndone\n--- stderr ---\n");
    assert!(gone, "the setsid child {pid} outlived the call");
}

#[cfg(unix)]
#[test]
fn shell_exec_returns_after_the_command_exits_even_if_a_process_it_may_leave_holds_its_output() {
    for background in [false, true] {
        let dir = workspace(&[]);
        let mut host = unsupervised_host(&dir, background);
        let started = Instant::now();
        let outcome = host.call("shell-exec", json!({"cmd": format!("{ESCAPE}; echo done")}));
        let elapsed = started.elapsed();
        kill_escaped(&dir.path().join("escaped.pid"));
        let text = ok_text(&outcome);
        assert!(elapsed < Duration::from_secs(20), "the call waited {elapsed:?} for the escaped child");
        assert!(text.starts_with("exit code: 0\n--- stdout ---\ndone\n"), "{text}");
        let note = if background { "so it keeps running" } else { "the sandbox is off, so it was not waited for" };
        assert!(text.contains(note), "{text}");
    }
}

#[cfg(unix)]
#[test]
fn shell_exec_timeout_holds_even_if_a_setsid_child_holds_its_output() {
    for background in [false, true] {
        let dir = workspace(&[]);
        let mut host = unsupervised_host(&dir, background);
        let started = Instant::now();
        let outcome =
            host.call("shell-exec", json!({"cmd": format!("{ESCAPE}; echo started; sleep 30"), "timeout-s": 1}));
        let elapsed = started.elapsed();
        kill_escaped(&dir.path().join("escaped.pid"));
        let (kind, message) = err_of(&outcome);
        assert!(elapsed < Duration::from_secs(20), "the call waited {elapsed:?} for the escaped child");
        assert_eq!(kind, "timeout");
        assert!(message.contains("started") && message.contains("still holds its output open"), "{message}");
    }
}

#[test]
fn confirmation_previews_show_the_diff_for_file_tools_and_the_command_for_shell_exec() {
    use toolhost::guard::{Action, Guard, Rule};
    let dir = workspace(&[("notes.txt", "keep\nold\n")]);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(String, String)>::new()));
    let record = seen.clone();
    let guard = Guard::default().rule(Rule::new("*", Action::Confirm).unwrap()).confirmer(std::sync::Arc::new(
        move |request: &toolhost::guard::ConfirmRequest<'_>| {
            record.lock().unwrap().push((request.tool.to_string(), request.preview.to_string()));
            toolhost::guard::Answer { yes: true, by: "test".into() }
        },
    ));
    let mut host = toolhost::HostBuilder::new(dir.path()).guard(guard).build().unwrap();
    ok_text(&host.call("fs-write", json!({"path": "new.txt", "content": "fresh\n"})));
    ok_text(&host.call("fs-write", json!({"path": "notes.txt", "content": "keep\nnew\n"})));
    ok_text(&host.call("fs-edit", json!({"path": "a.txt", "old": "line 7\n", "new": "line seven\n"})));
    ok_text(&host.call("shell-exec", json!({"cmd": "echo hi", "timeout-s": 5})));
    let seen = seen.lock().unwrap().clone();
    let tools: Vec<&str> = seen.iter().map(|(tool, _)| tool.as_str()).collect();
    assert_eq!(tools, ["fs-write", "fs-write", "fs-edit", "shell-exec"]);
    assert!(seen[0].1.contains("b/new.txt") && seen[0].1.contains("+fresh\n"), "{}", seen[0].1);
    assert!(seen[1].1.contains(" keep\n-old\n+new\n"), "{}", seen[1].1);
    assert!(seen[2].1.contains("-line 7\n+line seven\n") && seen[2].1.contains("a/a.txt"), "{}", seen[2].1);
    assert_eq!(seen[3].1, "$ echo hi");
    // An edit that would fail shows its error instead of an empty preview, and nothing is asked.
    let (_, message) = err_of(&host.call("fs-edit", json!({"path": "a.txt", "old": "no such text", "new": "x"})));
    assert!(message.contains("not found"), "{message}");
    assert_eq!(seen.len(), 4);
}

#[cfg(unix)]
#[test]
fn new_files_get_the_umasks_permissions_like_any_other_program_makes() {
    use std::os::unix::fs::PermissionsExt;
    let dir = workspace(&[]);
    let mut host = host(&dir);
    ok_text(&host.call("fs-write", json!({"path": "new/made.txt", "content": "x\n"})));
    std::fs::write(dir.path().join("by-std.txt"), "x\n").unwrap();
    let mode = |p: &str| std::fs::metadata(dir.path().join(p)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode("new/made.txt"), mode("by-std.txt"), "a new file is made as std::fs::write makes one");
    assert_ne!(mode("new/made.txt"), 0o600, "not the temporary file's private mode");
}

#[test]
fn a_write_removes_stale_temporary_files_of_ours_from_its_folder() {
    let dir = workspace(&[("sub/keep.txt", "k\n"), ("sub/.toolhost-old.tmp", "half"), ("sub/.toolhost-fresh.tmp", "")]);
    let old = std::fs::File::options().write(true).open(dir.path().join("sub/.toolhost-old.tmp")).unwrap();
    old.set_modified(std::time::SystemTime::now() - Duration::from_secs(600)).unwrap();
    let mut host = host(&dir);
    ok_text(&host.call("fs-write", json!({"path": "sub/new.txt", "content": "n\n"})));
    assert!(!dir.path().join("sub/.toolhost-old.tmp").exists(), "a killed write's leftover is removed");
    assert!(dir.path().join("sub/.toolhost-fresh.tmp").exists(), "a write that may be in progress is left alone");
    let names: Vec<_> = std::fs::read_dir(dir.path().join("sub")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 3, "{names:?}");
}

#[test]
fn a_replace_all_that_would_grow_past_the_file_cap_is_refused_and_the_file_kept() {
    let big = "ab\n".repeat(350_000);
    let dir = workspace(&[("big.txt", &big)]);
    let mut host = host(&dir);
    let huge = "y".repeat(1 << 10);
    let (kind, message) =
        err_of(&host.call("fs-edit", json!({"path": "big.txt", "old": "ab", "new": huge, "replace-all": true})));
    assert_eq!(kind, "tool_failed");
    assert!(message.contains("more than the 67108864 bytes"), "{message}");
    assert_eq!(std::fs::read_to_string(dir.path().join("big.txt")).unwrap(), big);
}

#[test]
fn fs_read_notes_bytes_that_are_not_utf8() {
    let dir = workspace(&[]);
    std::fs::write(dir.path().join("latin1.txt"), b"ok\ncaf\xe9\n").unwrap();
    let mut host = host(&dir);
    let text = ok_text(&host.call("fs-read", json!({"path": "latin1.txt"})));
    assert!(text.contains("2\tcaf\u{fffd}"), "{text}");
    assert!(text.contains("line 2 and maybe others hold bytes that are not UTF-8"), "{text}");
    let (_, message) = err_of(&host.call("fs-edit", json!({"path": "latin1.txt", "old": "ok", "new": "k"})));
    assert!(message.contains("is not UTF-8 text"), "{message}");
}

#[test]
fn shell_exec_notes_output_that_is_not_utf8() {
    let dir = workspace(&[]);
    let mut host = host(&dir);
    let text = ok_text(&host.call("shell-exec", json!({"cmd": "printf 'caf\\351\\n'"})));
    assert!(text.contains("caf\u{fffd}") && text.contains("[stdout held bytes that are not UTF-8"), "{text}");
    let clean = ok_text(&host.call("shell-exec", json!({"cmd": "echo café"})));
    assert!(!clean.contains("not UTF-8"), "{clean}");
}

#[test]
fn index_grep_notes_match_lines_that_are_not_utf8() {
    let dir = workspace(&[]);
    std::fs::write(dir.path().join("latin1.txt"), b"needle caf\xe9 here\nother\n").unwrap();
    let mut host = host(&dir);
    let text = ok_text(&host.call("index-grep", json!({"pattern": "needle"})));
    assert!(text.starts_with("latin1.txt:1:needle caf\u{fffd} here\n"), "{text}");
    assert!(text.contains("[note: 1 matching line held bytes that are not UTF-8"), "{text}");
}

/// The warm search index takes a write lease on a file for an instant (to count who has it
/// open), and while it holds one a non-blocking open of the file fails with EAGAIN. A read that
/// meets it waits it out instead of failing (it failed 1 time in 30 in CI's ten-thousand-call run).
#[test]
fn a_read_that_meets_a_passing_file_lease_waits_it_out() {
    use std::os::fd::AsRawFd;
    let dir = workspace(&[]);
    let mut host = host(&dir);
    let leased = std::fs::File::open(dir.path().join("a.txt")).unwrap();
    let fd = leased.as_raw_fd();
    // SAFETY: fcntl with integer arguments on a descriptor this test owns. The lease's break is
    // signalled with SIGURG (ignored), as the index does (F_SETSIG is 10), not SIGIO (fatal).
    let taken = unsafe { libc::fcntl(fd, 10, libc::SIGURG) + libc::fcntl(fd, libc::F_SETLEASE, libc::F_WRLCK) };
    assert_eq!(taken, 0, "a write lease on a file nobody else has open: {}", std::io::Error::last_os_error());
    // The lease is let go once a reader has run into it: its holder is then asked to give it up.
    let holder = std::thread::spawn(move || {
        // SAFETY: as above.
        while unsafe { libc::fcntl(fd, libc::F_GETLEASE) } == libc::F_WRLCK {
            std::thread::sleep(Duration::from_millis(1));
        }
        // SAFETY: as above; releasing the lease this descriptor holds.
        unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK) };
        leased
    });
    let outcome = host.call_json("fs-read", r#"{"path": "a.txt", "start": 5, "count": 1}"#);
    drop(holder.join().unwrap());
    assert_eq!(ok_text(&outcome), "5\tline 5\n... 295 more lines; next start 6\n");
}
