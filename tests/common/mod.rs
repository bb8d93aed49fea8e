//! Shared set-up for the integration tests: a real temporary workspace with real files, and a host
//! on it.
#![allow(dead_code)]

pub mod model_server;

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

/// A home folder of a test's own: the `toolhost` processes a test runs get it as `HOME` and
/// `XDG_CONFIG_HOME`, so no test reads or writes the real user's config or trust store. steel's
/// own `STEEL_HOME` is left unset, as a newcomer's shell has it.
pub struct Home(tempfile::TempDir);

impl Home {
    pub fn new() -> Home {
        Home(tempfile::tempdir().expect("tempdir"))
    }

    /// `$XDG_CONFIG_HOME/toolhost`: where the user's `config.toml` and the trust store live.
    pub fn toolhost_config_dir(&self) -> std::path::PathBuf {
        self.0.path().join("xdg-config/toolhost")
    }

    /// The REPL's history file.
    pub fn history_file(&self) -> std::path::PathBuf {
        self.0.path().join(".history")
    }

    /// `toolhost ARGS` in `dir`, with this home.
    pub fn command(&self, dir: &Path, args: &[&str]) -> std::process::Command {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"));
        command
            .args(args)
            .current_dir(dir)
            .env("HOME", self.0.path())
            .env("XDG_CONFIG_HOME", self.0.path().join("xdg-config"))
            .env_remove("XDG_DATA_HOME")
            .env_remove("STEEL_HOME")
            .env("TOOLHOST_HISTORY", self.history_file());
        command
    }

    /// Runs `toolhost ARGS` in `dir` with `stdin` as its input (none: closed).
    pub fn run(&self, dir: &Path, args: &[&str], stdin: Option<&str>) -> std::process::Output {
        use std::io::Write;
        let mut child = self
            .command(dir, args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("toolhost starts");
        let mut input = child.stdin.take().expect("stdin");
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).expect("write stdin");
        }
        drop(input);
        child.wait_with_output().expect("toolhost runs")
    }
}
