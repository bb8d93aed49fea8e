//! Workspace trust (design section 17) as an attacker would try it: what loads is exactly what was
//! trusted, however the workspace's files are linked, whenever they change, and whichever command
//! (or `:reload`) loads them. Through the real `toolhost` binary with a home of the test's own.

use crate::common;

use std::path::Path;

use common::*;
use serde_json::Value;

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn answer(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(out), stderr(out)))
}

fn trusted(home: &Home, dir: &Path) {
    let out = home.run(dir, &["trust"], None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

fn hi_tool(says: &str) -> String {
    format!("(define-tool (hi) \"Say hi.\" \"{says}\")\n")
}

#[cfg(unix)]
#[test]
fn a_tools_folder_linked_out_of_the_workspace_loads_only_while_trusted_as_it_is() {
    use std::os::unix::fs::symlink;
    let home = Home::new();
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "hi.scm", &hi_tool("from outside"));
    for config in [None, Some("[limits]\nread_lines = 50\n")] {
        let dir = workspace(&[]);
        if let Some(config) = config {
            write(dir.path(), "toolhost.toml", config);
        }
        std::fs::create_dir(dir.path().join(".toolhost")).unwrap();
        symlink(outside.path(), dir.path().join(".toolhost/tools")).unwrap();
        let call_hi = || home.run(dir.path(), &["call", "hi"], None);

        // Untrusted: the linked folder's code does not run, and the notice says what was skipped.
        let out = call_hi();
        assert_eq!(answer(&out)["error"]["kind"], "unknown_tool", "with {config:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("1 tool file in .toolhost/tools"), "{}", stderr(&out));

        // Trusted: it loads, its content being what was trusted.
        trusted(&home, dir.path());
        let out = call_hi();
        assert_eq!(answer(&out)["result"], "from outside", "{}", stderr(&out));

        // The file outside changes: the workspace is untrusted again, whatever else stayed.
        write(outside.path(), "hi.scm", &hi_tool("changed outside"));
        let out = call_hi();
        assert_eq!(answer(&out)["error"]["kind"], "unknown_tool", "with {config:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("changed since it was trusted"), "{}", stderr(&out));
        write(outside.path(), "hi.scm", &hi_tool("from outside"));
    }
}

#[cfg(unix)]
#[test]
fn trust_lists_where_files_linked_from_outside_the_workspace_really_are() {
    use std::os::unix::fs::symlink;
    let home = Home::new();
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "hi.scm", &hi_tool("hi"));
    let dir = workspace(&[]);
    std::fs::create_dir(dir.path().join(".toolhost")).unwrap();
    symlink(outside.path(), dir.path().join(".toolhost/tools")).unwrap();
    let out = home.run(dir.path(), &["trust"], None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let real = std::fs::canonicalize(outside.path().join("hi.scm")).unwrap();
    assert!(
        stdout(&out).contains(&format!(".toolhost/tools/hi.scm (outside the workspace: {})", real.display())),
        "{}",
        stdout(&out)
    );
}

#[test]
fn the_bytes_that_load_are_the_bytes_trust_checked() {
    // The first tool file, trusted, rewrites the second as it loads: the second must load as it was
    // trusted, not as it is on disk by the time the loader reaches it.
    let rewrite = format!(
        "(define-tool (a) \"A.\" \"a\")\n(fs-write \".toolhost/tools/b.scm\" {:?})\n",
        hi_tool("rewritten after the check")
    );
    let dir = workspace(&[(".toolhost/tools/a.scm", &rewrite), (".toolhost/tools/b.scm", &hi_tool("as trusted"))]);
    let home = Home::new();
    trusted(&home, dir.path());
    let out = home.run(dir.path(), &["--no-isolate", "call", "hi"], None);
    assert_eq!(answer(&out)["result"], "as trusted", "{}", stderr(&out));
}

#[test]
fn with_config_the_notice_names_only_what_trust_skipped() {
    let dir = workspace(&[
        ("toolhost.toml", "[limits]\nread_lines = 5\n"),
        ("other.toml", "[limits]\nread_lines = 7\n"),
        (".toolhost/tools/hi.scm", &hi_tool("hi")),
    ]);
    let home = Home::new();
    let out = home.run(dir.path(), &["--config", "other.toml", "eval", "1"], None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let notice = stderr(&out);
    assert!(notice.contains("1 tool file in .toolhost/tools was not loaded"), "{notice}");
    assert!(!notice.contains("toolhost.toml"), "--config replaced it, trust did not skip it: {notice}");

    // With nothing of the workspace's own that would load, there is nothing to say.
    std::fs::remove_dir_all(dir.path().join(".toolhost")).unwrap();
    let out = home.run(dir.path(), &["--config", "other.toml", "eval", "1"], None);
    assert_eq!(stderr(&out), "");
}

#[test]
fn the_notice_counts_tool_files_apart_from_test_files() {
    let dir = workspace(&[
        (".toolhost/tools/hi.scm", &hi_tool("hi")),
        (".toolhost/tools/hi_test.scm", "(check-equal? (hi) \"hi\")\n"),
        (".toolhost/tools/ho_test.scm", "(check-equal? 1 1)\n"),
    ]);
    let out = Home::new().run(dir.path(), &["eval", "1"], None);
    let notice = stderr(&out);
    assert!(notice.contains("so 1 tool file and 2 test files in .toolhost/tools were not loaded"), "{notice}");
}

#[test]
fn reload_applies_the_trust_rule_of_start_up() {
    let dir = workspace(&[(".toolhost/tools/hi.scm", &hi_tool("as trusted"))]);
    let home = Home::new();
    trusted(&home, dir.path());
    let edit = format!("(fs-write \".toolhost/tools/hi.scm\" {:?})", hi_tool("edited"));
    let input = format!("(hi)\n{edit}\n:reload\n(hi)\n:quit\n");
    let out = home.run(dir.path(), &["repl"], Some(&input));
    let text = stdout(&out);
    assert!(text.contains("\"as trusted\""), "{text}");
    assert!(!text.contains("\"edited\""), "the edited file ran without trust: {text}");
    assert!(text.contains("changed since it was trusted"), "{text}");
    assert!(text.contains("removed: hi"), "{text}");
    // `toolhost call` agrees.
    assert_eq!(answer(&home.run(dir.path(), &["call", "hi"], None))["error"]["kind"], "unknown_tool");
}

#[test]
fn on_a_terminal_reload_asks_to_trust_the_changed_files() {
    let dir = workspace(&[(".toolhost/tools/hi.scm", &hi_tool("as trusted"))]);
    let home = Home::new();
    trusted(&home, dir.path());
    let mut terminal = Terminal::start(&home, dir.path(), &["repl"]);
    let mark = terminal.wait_for("toolhost> ", 0).len();
    write(dir.path(), ".toolhost/tools/hi.scm", &hi_tool("edited"));
    terminal.send(":reload\n");
    terminal.wait_for("Trust this workspace now?", mark);
    let mark = terminal.screen().len();
    terminal.send("y\n");
    terminal.wait_for("changed: hi", mark);
    let mark = terminal.screen().len();
    terminal.send("(hi)\n");
    terminal.wait_for("\"edited\"", mark);
    terminal.send(":quit\n");
    terminal.finish();
    // The answer was recorded: `toolhost call` loads the edited file too.
    assert_eq!(answer(&home.run(dir.path(), &["call", "hi"], None))["result"], "edited");
}

#[test]
fn the_workspaces_own_files_are_read_only_up_to_a_total() {
    let dir = workspace(&[(".toolhost/tools/a_hi.scm", &hi_tool("hi"))]);
    // Nine sparse files, each under the 8 MiB a tool file may have, together past 64 MiB: all are
    // read at start-up, before trust is decided, so their sum is capped too.
    for i in 0..9 {
        let file = std::fs::File::create(dir.path().join(format!(".toolhost/tools/b{i}.scm"))).unwrap();
        file.set_len(15 << 19).unwrap();
    }
    let home = Home::new();
    let out = home.run(dir.path(), &["trust"], None);
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("b8.scm") && stderr(&out).contains("together pass 64 MiB"), "{}", stderr(&out));
}
