//! Every workspace escape is refused, for every path-taking tool, reads and writes alike
//! (design section 10).

mod common;

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
