//! Shared set-up for the integration tests: a real temporary workspace with real files, and a host
//! on it.
#![allow(dead_code)]

use std::path::Path;

use serde_json::Value;
use toolhost::{CallRecord, Host, HostBuilder};

/// A temporary workspace holding `a.txt` (300 lines, "line N") and whatever `files` add.
pub fn workspace(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let lines: String = (1..=300).map(|n| format!("line {n}\n")).collect();
    std::fs::write(dir.path().join("a.txt"), lines).expect("write a.txt");
    for (path, content) in files {
        write(dir.path(), path, content);
    }
    dir
}

pub fn write(root: &Path, path: &str, content: &str) {
    let full = root.join(path);
    if let Some(parent) = full.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(full, content).expect("write");
}

pub fn host(dir: &tempfile::TempDir) -> Host {
    let host = HostBuilder::new(dir.path()).build().expect("host");
    assert!(host.load_errors().is_empty(), "load errors: {:?}", host.load_errors());
    host
}

/// The result text of a call that must succeed.
pub fn ok_text(outcome: &CallRecord) -> String {
    match &outcome.result {
        Ok(Value::String(s)) => s.clone(),
        Ok(other) => other.to_string(),
        Err(e) => panic!("call failed: {} ({})", e.message(), e.kind()),
    }
}

/// The error kind and message of a call that must fail.
pub fn err_of(outcome: &CallRecord) -> (String, String) {
    match &outcome.result {
        Ok(v) => panic!("call succeeded with {v}"),
        Err(e) => (e.kind().as_str().to_string(), e.message().to_string()),
    }
}

/// The line numbers an fs-read result shows.
pub fn numbered_lines(text: &str) -> Vec<u64> {
    text.lines().filter_map(|l| l.split('\t').next()?.trim().parse().ok()).collect()
}
