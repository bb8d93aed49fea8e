//! The shell sandbox (design section 19), tried for real on this kernel: what a `shell-exec`
//! command (and Scheme's `shell-run`) may write, whether it reaches the host's loopback, whether
//! the processes it starts outlive the call, and `sandbox = "off"`.

use crate::common;

use std::path::Path;

use common::*;
use serde_json::json;
use toolhost::sandbox::Sandbox;
use toolhost::sandbox::SandboxMode;
use toolhost::{Host, HostBuilder};

fn host_with(dir: &Path, sandbox: Sandbox) -> Host {
    let host = HostBuilder::new(dir).sandbox(sandbox).build().expect("host");
    assert!(host.load_errors().is_empty(), "load errors: {:?}", host.load_errors());
    host
}

/// Runs `cmd` with shell-exec and returns its result text.
fn shell(host: &mut Host, cmd: &str) -> String {
    ok_text(&host.call("shell-exec", json!({ "cmd": cmd })))
}

/// The stdout part of a shell-exec result.
fn stdout_of(text: &str) -> &str {
    let start = text.find("--- stdout ---\n").map_or(0, |i| i + "--- stdout ---\n".len());
    let end = text.find("--- stderr ---\n").unwrap_or(text.len());
    &text[start..end]
}

#[test]
fn writes_outside_the_workspace_fail_and_writes_inside_and_to_the_private_temporary_folder_work() {
    let dir = workspace(&[]);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("keep.txt"), "precious\n").unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
    let name = dir.path().file_name().unwrap().to_str().unwrap().to_string();
    let beside = dir.path().parent().unwrap().join(format!("{name}-beside"));
    let mut host = host_with(dir.path(), Sandbox::default());
    let attempts = [
        format!("echo x > {}/new.txt", outside.path().display()),
        format!("echo x > ../{name}-beside"),
        "echo x > out/through-link.txt".to_string(),
        "echo x >> out/keep.txt".to_string(),
        "rm out/keep.txt".to_string(),
        "truncate -s 0 out/keep.txt".to_string(),
        "mkdir out/folder".to_string(),
        "ln -s /etc out/link".to_string(),
    ];
    for attempt in &attempts {
        let text = shell(&mut host, attempt);
        assert!(!text.starts_with("exit code: 0\n"), "{attempt}: {text}");
        assert!(text.contains("Permission denied") || text.contains("Operation not permitted"), "{attempt}: {text}");
    }
    assert_eq!(std::fs::read_to_string(outside.path().join("keep.txt")).unwrap(), "precious\n");
    assert_eq!(files_in(outside.path()), ["keep.txt"]);
    assert!(!beside.exists());

    // Inside the workspace, in a new folder, and through the shell's own temporary folder.
    let text = shell(
        &mut host,
        "mkdir -p made/deep && echo in > made/deep/f.txt && mv made/deep/f.txt made/g.txt && cat made/g.txt",
    );
    assert!(text.starts_with("exit code: 0\n--- stdout ---\nin\n"), "{text}");
    let text = shell(&mut host, "echo t > \"$TMPDIR/scratch\" && cat \"$TMPDIR/scratch\" && echo \"$TMPDIR\"");
    let out = stdout_of(&text);
    assert!(out.starts_with("t\n"), "{text}");
    let temp = Path::new(out.lines().nth(1).expect("the folder's name"));
    assert!(!temp.starts_with(dir.path()), "the temporary folder is the command's own: {}", temp.display());
    assert!(!temp.exists(), "the temporary folder is removed after the call: {}", temp.display());
    // Output to the usual devices still works.
    let text = shell(&mut host, "echo gone > /dev/null && echo to-stderr >/dev/stderr && echo to-stdout > /dev/stdout");
    assert_eq!(text, "exit code: 0\n--- stdout ---\nto-stdout\n--- stderr ---\nto-stderr\n");
}

#[test]
fn shell_run_from_scheme_is_confined_the_same_way() {
    let dir = workspace(&[]);
    let outside = tempfile::tempdir().unwrap();
    let mut host = host_with(dir.path(), Sandbox::default());
    let target = outside.path().join("from-scheme.txt");
    let program = format!(
        r#"(let ([run (shell-run "echo x > {}")]) (list (hash-ref run "exit-code") (hash-ref run "stderr")))"#,
        target.display()
    );
    let value = host.eval_to_string(&program).unwrap();
    assert!(!value.starts_with("[0,"), "{value}");
    assert!(value.contains("Permission denied"), "{value}");
    assert!(!target.exists());
    let inside = host.eval_to_string(r#"(hash-ref (shell-run "echo y > inside.txt") "exit-code")"#).unwrap();
    assert_eq!(inside, "0");
    assert!(dir.path().join("inside.txt").exists());
}

#[test]
fn a_folder_the_settings_name_is_writable() {
    let dir = workspace(&[]);
    let extra = tempfile::tempdir().unwrap();
    let mut host = host_with(dir.path(), Sandbox::builder().writable(extra.path()).build().unwrap());
    let text = shell(&mut host, &format!("echo ok > {}/cache.txt", extra.path().display()));
    assert!(text.starts_with("exit code: 0\n"), "{text}");
    assert_eq!(std::fs::read_to_string(extra.path().join("cache.txt")).unwrap(), "ok\n");
}

/// The commands that try to reach `port` on 127.0.0.1: curl, and a Python socket.
fn reach(port: u16) -> String {
    format!(
        "curl -sS -m 5 http://127.0.0.1:{port}/; echo \" curl=$?\"; \
         python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 5); print(\"python connected\")'; \
         echo \"python=$?\""
    )
}

#[test]
fn the_hosts_loopback_is_out_of_reach_without_the_network_setting_and_in_reach_with_it() {
    let dir = workspace(&[]);
    let server = LocalServer::start();
    let mut host = host_with(dir.path(), Sandbox::default());
    let text = shell(&mut host, &reach(server.port));
    let out = stdout_of(&text);
    assert!(!out.contains("hello") && !out.contains("curl=0") && !out.contains("python connected"), "{text}");
    assert!(out.contains("python=1"), "{text}");
    assert_eq!(server.accepted(), 0, "no connection reached the server");
    // The command has a loopback of its own: a server it starts itself answers it.
    let own = shell(
        &mut host,
        "python3 -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen(); \
         socket.create_connection(s.getsockname(), 5); print(\"own loopback\")'",
    );
    assert!(stdout_of(&own).contains("own loopback"), "{own}");

    let mut host = host_with(dir.path(), Sandbox::builder().network(true).build().unwrap());
    let text = shell(&mut host, &reach(server.port));
    let out = stdout_of(&text);
    assert!(out.contains("hello curl=0") && out.contains("python connected\npython=0"), "{text}");
    // Python's connection, which sends nothing, may still wait in the backlog for the server's
    // next look: counted once the server takes it.
    common::eventually("both connections to be accepted", || server.accepted() >= 2);
    assert_eq!(server.accepted(), 2);
}

/// Starts a `setsid` process and a double-forked one, writes their pids, checks they run, and ends.
const LEAVE_PROCESSES_BEHIND: &str = "setsid sh -c 'echo $$ > setsid.pid; exec sleep 1000' & \
     sh -c 'sleep 1001 & echo $! > double.pid' ; \
     while [ ! -s setsid.pid ] || [ ! -s double.pid ]; do sleep 0.02; done; \
     kill -0 $(cat setsid.pid) $(cat double.pid) && echo both running";

#[test]
fn no_process_a_call_started_outlives_the_call_setsid_and_double_forks_included() {
    let dir = workspace(&[]);
    let mut host = host_with(dir.path(), Sandbox::default());
    let text = shell(&mut host, LEAVE_PROCESSES_BEHIND);
    assert!(text.starts_with("exit code: 0\n--- stdout ---\nboth running\n"), "{text}");
    assert!(!text.contains("[note:"), "nothing holds the output once they are ended: {text}");
    for file in ["setsid.pid", "double.pid"] {
        let pid = pid_in(&dir.path().join(file));
        // Ended and reaped before the call returned.
        assert!(is_gone(pid), "{file}: process {pid} outlived the call");
    }

    // After a timeout too.
    let outcome = host.call(
        "shell-exec",
        json!({"cmd": "setsid sh -c 'echo $$ > late.pid; exec sleep 1002' & sleep 30", "timeout-s": 1}),
    );
    let (kind, _) = err_of(&outcome);
    assert_eq!(kind, "timeout");
    let pid = pid_in(&dir.path().join("late.pid"));
    assert!(is_gone(pid), "process {pid} outlived the timed-out call");
}

#[test]
fn background_processes_may_outlive_the_call_when_the_settings_allow_them() {
    let dir = workspace(&[]);
    let mut host = host_with(dir.path(), Sandbox::builder().background(true).build().unwrap());
    let text = shell(&mut host, "sleep 1003 > /dev/null 2>&1 & echo $! > bg.pid");
    assert!(text.starts_with("exit code: 0\n"), "{text}");
    let pid = pid_in(&dir.path().join("bg.pid"));
    let alive = !is_gone(pid);
    // SAFETY: a signal to the sleep this test's command started.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    assert!(alive, "the background process was ended");

    // One that keeps the output open: the call does not wait for it, and says so.
    let text = shell(&mut host, "sleep 1004 & echo $! > held.pid; echo done");
    let pid = pid_in(&dir.path().join("held.pid"));
    // SAFETY: as above.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    assert!(text.starts_with("exit code: 0\n--- stdout ---\ndone\n"), "{text}");
    assert!(text.contains("background processes are allowed ([shell] background), so it keeps running"), "{text}");
}

#[test]
fn sandbox_off_really_runs_unconfined() {
    let dir = workspace(&[]);
    let outside = tempfile::tempdir().unwrap();
    let server = LocalServer::start();
    // HOME is in every test's environment: dropped by name, it shows the policy applies when off.
    let off = Sandbox::builder().mode(SandboxMode::Off).env_drop("HOME").build().unwrap();
    let mut host = host_with(dir.path(), off);
    let text = shell(&mut host, &format!("echo x > {}/written.txt && echo wrote", outside.path().display()));
    assert!(text.starts_with("exit code: 0\n--- stdout ---\nwrote\n"), "{text}");
    assert!(outside.path().join("written.txt").exists());
    let text = shell(&mut host, &reach(server.port));
    assert!(stdout_of(&text).contains("hello curl=0"), "{text}");
    let text = shell(
        &mut host,
        "setsid sh -c 'echo $$ > escaped.pid; exec sleep 1005' > /dev/null 2>&1 & \
         while [ ! -s escaped.pid ]; do sleep 0.02; done",
    );
    assert!(text.starts_with("exit code: 0\n"), "{text}");
    let pid = pid_in(&dir.path().join("escaped.pid"));
    let alive = !is_gone(pid);
    // SAFETY: a signal to the sleep this test's command started.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    assert!(alive, "with the sandbox off, a setsid process is not ended");
    // The environment policy still applies.
    let env = shell(&mut host, "env");
    assert!(env.contains("PATH=") && !env.contains("\nHOME="), "{env}");
}

#[test]
fn the_tool_description_says_what_the_sandbox_allows() {
    let dir = workspace(&[]);
    let describe = |sandbox: Sandbox| {
        let host = host_with(dir.path(), sandbox);
        host.tool("shell-exec").unwrap().spec.description.clone()
    };
    let confined = describe(Sandbox::default());
    assert!(
        confined.contains("it may write only beneath the workspace and its own temporary folder ($TMPDIR)"),
        "{confined}"
    );
    assert!(confined.contains("It has no network") && confined.contains("Every process it starts ends"), "{confined}");
    let extra = tempfile::tempdir().unwrap();
    let open = describe(Sandbox::builder().network(true).background(true).writable(extra.path()).build().unwrap());
    assert!(open.contains(&format!("($TMPDIR) and {}", extra.path().display())), "{open}");
    assert!(open.contains("It may use the network") && open.contains("may keep running after the call"), "{open}");
    let off = describe(Sandbox::builder().mode(SandboxMode::Off).build().unwrap());
    assert!(off.contains("runs unconfined, with the user's rights"), "{off}");
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}
