//! Every workspace escape is refused, for every path-taking tool, reads and writes alike
//! (design section 10).

use crate::common;

use std::path::Path;

use common::*;
use serde_json::{json, Value};

fn calls_for(path: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("fs-read", json!({"path": path})),
        ("fs-write", json!({"path": path, "content": "pwned"})),
        ("fs-edit", json!({"path": path, "old": "s", "new": "pwned"})),
        ("fs-list", json!({"path": path})),
        ("read-around", json!({"path": path, "line": 1})),
    ]
}

#[cfg(unix)]
#[test]
fn every_escape_form_is_refused_for_every_path_tool() {
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "secret", "s\n");
    let dir = workspace(&[]);
    std::os::unix::fs::symlink(outside.path(), dir.path().join("out-dir")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("out-file")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("not-yet"), dir.path().join("dangling")).unwrap();
    let mut host = host(&dir);
    let secret_abs = outside.path().join("secret").display().to_string();
    let escapes = [
        "../secret".to_string(),
        "../../etc/passwd".to_string(),
        "sub/../../secret".to_string(),
        "/etc/passwd".to_string(),
        secret_abs.clone(),
        "out-dir/secret".to_string(),
        "out-dir/new-file".to_string(),
        "out-file".to_string(),
        "dangling".to_string(),
    ];
    for escape in &escapes {
        for (tool, args) in calls_for(escape) {
            let outcome = host.call(tool, args);
            let (kind, message) = err_of(&outcome);
            assert_eq!(kind, "denied", "{tool} {escape}: {message}");
        }
        // From Scheme as well.
        assert!(host.eval(&format!("(fs-read {escape:?})")).is_err(), "{escape}");
    }
    assert_eq!(std::fs::read_to_string(outside.path().join("secret")).unwrap(), "s\n");
    let mut names: Vec<_> = std::fs::read_dir(outside.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    assert_eq!(names, ["secret"], "nothing was created outside");
}

#[test]
fn paths_inside_the_workspace_work_relative_or_absolute() {
    let dir = workspace(&[("sub/b.txt", "b\n")]);
    let mut host = host(&dir);
    let absolute = dir.path().join("sub/b.txt").display().to_string();
    assert_eq!(ok_text(&host.call("fs-read", json!({"path": absolute}))), "1\tb\n");
    assert_eq!(ok_text(&host.call("fs-read", json!({"path": "./sub/b.txt"}))), "1\tb\n");
}

#[cfg(unix)]
#[test]
fn absolute_paths_to_new_files_work_when_the_root_is_given_through_a_symlink() {
    let base = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(base.path().join("real/sub")).unwrap();
    std::fs::create_dir(base.path().join("beside")).unwrap();
    write(&base.path().join("real"), "sub/old.txt", "old\n");
    let link = base.path().join("link");
    std::os::unix::fs::symlink(base.path().join("real"), &link).unwrap();
    let mut host = toolhost::HostBuilder::new(&link).build().unwrap();
    let abs = |p: &Path| p.display().to_string();

    let created = ok_text(&host.call("fs-write", json!({"path": abs(&link.join("new.txt")), "content": "n\n"})));
    assert!(created.starts_with("created"), "{created}");
    assert_eq!(std::fs::read_to_string(base.path().join("real/new.txt")).unwrap(), "n\n");
    ok_text(&host.call("fs-write", json!({"path": abs(&link.join("sub/deeper/x.txt")), "content": "x\n"})));
    assert!(base.path().join("real/sub/deeper/x.txt").is_file());
    assert_eq!(ok_text(&host.call("fs-read", json!({"path": abs(&link.join("sub/old.txt"))}))), "1\told\n");

    for outside in [
        abs(&base.path().join("beside/new.txt")),
        abs(&base.path().join("new.txt")),
        format!("{}/../beside/new.txt", abs(&link)),
        "/etc/toolhost-new.txt".to_string(),
    ] {
        let (kind, message) = err_of(&host.call("fs-write", json!({"path": outside, "content": "pwned"})));
        assert_eq!(kind, "denied", "{outside}: {message}");
    }
    assert_eq!(std::fs::read_dir(base.path().join("beside")).unwrap().count(), 0, "nothing was written outside");
    assert!(!base.path().join("new.txt").exists());
}

/// Swaps `a` and `b` (a folder and a symlink) atomically, as fast as it can, until `stop` is set.
#[cfg(target_os = "linux")]
fn swap_until(a: std::path::PathBuf, b: std::path::PathBuf, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let a = CString::new(a.as_os_str().as_bytes()).unwrap();
    let b = CString::new(b.as_os_str().as_bytes()).unwrap();
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        // SAFETY: two valid NUL-terminated paths; renameat2 only reads them.
        let rc =
            unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_EXCHANGE) };
        assert_eq!(rc, 0, "renameat2: {}", std::io::Error::last_os_error());
    }
}

/// The race between check and use: another process swaps a folder of the workspace for a symlink
/// leading outside while tools run. Whatever moment the swap lands, no read shows the outside file
/// and no write (nor a stray temporary file) lands outside.
#[cfg(target_os = "linux")]
#[test]
fn a_symlink_swapped_in_during_the_call_is_not_followed_outside() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "f.txt", "SECRET\n");
    write(outside.path(), "outside-only.txt", "SECRET\n");
    let dir = workspace(&[("sub/f.txt", "inside\n")]);
    std::os::unix::fs::symlink(outside.path(), dir.path().join("alt")).unwrap();
    let mut host = host(&dir);
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (a, b, stop) = (dir.path().join("sub"), dir.path().join("alt"), stop.clone());
        std::thread::spawn(move || swap_until(a, b, stop))
    };
    let mut seen_inside = 0;
    for i in 0..3000 {
        let read = host.call("fs-read", json!({"path": "sub/f.txt"}));
        if let Ok(v) = &read.result {
            assert!(!v.to_string().contains("SECRET"), "fs-read followed the swapped symlink: {v}");
            seen_inside += 1;
        }
        let lines = host.eval("(file-lines \"sub/f.txt\")");
        if let Ok(v) = &lines {
            assert!(!format!("{v:?}").contains("SECRET"), "file-lines followed the swapped symlink");
        }
        let grep = host.call("index-grep", json!({"pattern": "SECRET|inside"}));
        if let Ok(v) = &grep.result {
            assert!(!v.to_string().contains("SECRET"), "index-grep followed the swapped symlink: {v}");
        }
        let list = host.call("fs-list", json!({"path": "sub"}));
        if let Ok(v) = &list.result {
            assert!(!v.to_string().contains("outside-only"), "fs-list followed the swapped symlink: {v}");
        }
        // A few names in turn: new files and replaced ones, in a folder that stays small (each
        // iteration's index-grep walks it).
        let _ = host.call("fs-write", json!({"path": format!("sub/w{}.txt", i % 8), "content": "w\n"}));
        let _ = host.call("fs-edit", json!({"path": "sub/f.txt", "old": "SECRET", "new": "pwned"}));
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(seen_inside > 0, "some reads ran between swaps");
    let names: Vec<_> = std::fs::read_dir(outside.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    let mut names = names;
    names.sort();
    assert_eq!(names, ["f.txt", "outside-only.txt"], "nothing was written outside, not even a temporary file");
    assert_eq!(std::fs::read_to_string(outside.path().join("f.txt")).unwrap(), "SECRET\n");
}

/// The rest of the boundary table: NUL bytes, very long paths, `..` chains and trailing slashes,
/// for every path-taking tool, reads and writes: each is an error result (no panic, nothing made
/// outside or beside).
#[test]
fn nul_bytes_long_paths_dot_dot_chains_and_trailing_slashes_are_errors_for_every_path_tool() {
    let dir = workspace(&[("sub/f.txt", "s\n")]);
    let mut host = host(&dir);
    let long_name = "x".repeat(5000);
    let long_chain = "d/".repeat(3000) + "f.txt";
    let dots = "../".repeat(64) + "etc/passwd";
    let cases: [(&str, &str); 7] = [
        ("a\0b", "denied"),
        ("sub/f.txt\0", "denied"),
        (&dots, "denied"),
        ("sub/./../../x", "denied"),
        (&long_name, ""),
        ("a.txt/", ""),
        ("sub/f.txt/x", ""),
    ];
    for (path, kind) in cases {
        for (tool, args) in calls_for(path) {
            let outcome = host.call(tool, args);
            let (got, message) = err_of(&outcome);
            if !kind.is_empty() {
                assert_eq!(got, kind, "{tool} {:.60}: {message}", path);
            }
            assert_ne!(got, "crashed", "{tool} {:.60}: {message}", path);
        }
    }
    // index-grep takes a glob, not a path: escapes select nothing, and nothing outside is searched.
    for glob in ["../*", "/etc/*", "a\0b", &long_chain] {
        let outcome = host.call("index-grep", json!({"pattern": "root", "glob": glob}));
        if let Ok(v) = &outcome.result {
            assert_eq!(v, &json!("no matches\n"), "{glob:.60}");
        }
    }
    let mut names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    assert_eq!(names, ["a.txt", "sub"], "nothing was created");
}

#[test]
fn a_trailing_slash_names_a_folder_and_file_tools_refuse_it() {
    let dir = workspace(&[]);
    let mut host = host(&dir);
    let (kind, message) = err_of(&host.call("fs-write", json!({"path": "newdir/", "content": "x"})));
    assert_eq!(kind, "tool_failed");
    assert!(message.contains("ends with '/', which names a folder"), "{message}");
    assert!(!dir.path().join("newdir").exists(), "no file named newdir was made");
    let (_, message) = err_of(&host.call("fs-read", json!({"path": "a.txt/"})));
    assert!(message.contains("names a folder"), "{message}");
    let (_, message) = err_of(&host.call("fs-edit", json!({"path": "a.txt/", "old": "line 1", "new": "x"})));
    assert!(message.contains("names a folder"), "{message}");
    assert!(ok_text(&host.call("fs-list", json!({"path": "./"}))).contains("a.txt"));
}
