//! The shell sandbox (design section 19) as the `toolhost` command applies it: the environment a
//! command sees, writes to the home folder, processes in a long-lived worker, a user without
//! privileges, and what `--help` says about turning parts of it off.

use crate::common;

use std::path::Path;

use common::*;
use serde_json::Value;
use toolhost::worker::{WorkerHandle, WorkerSpec};

/// The result text of `toolhost call`'s answer.
fn result_of(out: &std::process::Output) -> String {
    let answer: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("one JSON answer, got {:?}", String::from_utf8_lossy(&out.stderr)));
    match answer["result"].as_str() {
        Some(text) => text.to_string(),
        None => panic!("the call failed: {answer}"),
    }
}

fn shell_json(cmd: &str) -> String {
    serde_json::json!({ "cmd": cmd }).to_string()
}

#[test]
fn commands_see_no_secret_from_the_environment_in_a_worker_or_in_process() {
    let config = "[provider]\napi_key_env = \"MODEL_CRED\"\n\
                  [shell]\nenv_keep = [\"GITHUB_TOKEN\"]\nenv_drop = [\"PLAIN_DROPPED\", \"EXTRA_*\"]\n";
    let dir = workspace(&[("settings.toml", config)]);
    let home = Home::new();
    let json = shell_json("env");
    for flags in [&[][..], &["--no-isolate"][..]] {
        let mut args = vec!["--config", "settings.toml"];
        args.extend(flags);
        args.extend(["call", "shell-exec", &json]);
        let mut command = home.command(dir.path(), &args);
        for (name, value) in [
            ("MY_API_KEY", "secret-1"),
            ("db_password", "secret-2"),
            ("AWS_SECRET_ACCESS_KEY", "secret-3"),
            ("NPM_TOKEN", "secret-4"),
            ("MODEL_CRED", "secret-5"),
            ("PLAIN_DROPPED", "secret-6"),
            ("EXTRA_THING", "secret-7"),
            ("GITHUB_TOKEN", "kept-1"),
            ("PLAIN_VALUE", "kept-2"),
        ] {
            command.env(name, value);
        }
        let out = command.stdin(std::process::Stdio::null()).output().unwrap();
        let env = result_of(&out);
        assert!(!env.contains("secret-"), "{flags:?}: {env}");
        assert!(env.contains("\nGITHUB_TOKEN=kept-1\n") && env.contains("\nPLAIN_VALUE=kept-2\n"), "{flags:?}: {env}");
        assert!(env.contains("\nTMPDIR=") && env.contains("\nPATH="), "{flags:?}: {env}");
    }
}

#[test]
fn a_command_cannot_write_to_the_home_folder() {
    let dir = workspace(&[]);
    let home = Home::new();
    let json = shell_json("echo x > ~/planted.txt; echo rc=$?; echo y > made-here.txt");
    let out = home.run(dir.path(), &["call", "shell-exec", &json], None);
    let text = result_of(&out);
    assert!(!text.contains("rc=0") && text.contains("planted.txt: Permission denied"), "{text}");
    assert!(!home.path().join("planted.txt").exists());
    assert!(dir.path().join("made-here.txt").exists());
}

#[test]
fn in_a_long_lived_worker_every_process_a_call_started_ends_with_it_and_the_worker_goes_on() {
    let dir = workspace(&[]);
    let home = tempfile::tempdir().unwrap();
    let args = ["--root", &dir.path().display().to_string(), "worker"];
    let mut spec = WorkerSpec::new(env!("CARGO_BIN_EXE_toolhost"), args.iter().map(|s| s.to_string()).collect());
    spec.env = vec![
        ("HOME".into(), home.path().display().to_string()),
        ("XDG_CONFIG_HOME".into(), home.path().join("xdg-config").display().to_string()),
    ];
    let mut worker = WorkerHandle::spawn(spec).expect("worker starts");
    let pid = worker.worker_pid();
    let cmd = "setsid sh -c 'echo $$ > setsid.pid; exec sleep 1010' & sh -c 'sleep 1011 & echo $! > double.pid'; \
               while [ ! -s setsid.pid ] || [ ! -s double.pid ]; do sleep 0.02; done; echo started";
    let record = worker.call("shell-exec", &shell_json(cmd));
    let text = record.result.as_ref().ok().and_then(Value::as_str).unwrap_or_default();
    assert!(text.starts_with("exit code: 0\n--- stdout ---\nstarted\n"), "{:?}", record.result);
    for file in ["setsid.pid", "double.pid"] {
        let left = pid_in(&dir.path().join(file));
        assert!(is_gone(left), "{file}: process {left} outlived the call");
    }
    let again = worker.call("shell-exec", &shell_json("echo again"));
    assert!(again.model_text().contains("again"), "{}", again.model_text());
    assert_eq!(worker.worker_pid(), pid, "the same worker took both calls");
}

/// Copies the toolhost executable where any user may run it.
fn runnable_copy(folder: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let copy = folder.join("toolhost");
    std::fs::copy(env!("CARGO_BIN_EXE_toolhost"), &copy).unwrap();
    for path in [folder, copy.as_path()] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    copy
}

/// A user with no privileges gets the same sandbox: the network namespace inside a user namespace
/// that maps the user to itself, Landlock with no-new-privs, the supervisor. As root (CI) the test
/// runs toolhost as an unprivileged uid with setpriv; as anyone else, as that user.
#[test]
fn a_user_without_privileges_gets_the_same_sandbox() {
    const UID: u32 = 4242;
    let root = rustix::process::geteuid().is_root();
    let bin = tempfile::tempdir().unwrap();
    let toolhost = runnable_copy(bin.path());
    let dir = workspace(&[]);
    let outside = tempfile::tempdir().unwrap();
    let home = Home::new();
    if root {
        for path in [dir.path(), outside.path(), home.path()] {
            std::os::unix::fs::chown(path, Some(UID), Some(UID)).unwrap();
        }
        std::os::unix::fs::chown(dir.path().join("a.txt"), Some(UID), Some(UID)).unwrap();
    }
    let server = LocalServer::start();
    let cmd = format!(
        "id -u; echo x > {outside}/f; echo write=$?; curl -sS -m 5 http://127.0.0.1:{port}/; echo \" curl=$?\"; \
         setsid sh -c 'echo $$ > s.pid; exec sleep 1012' & while [ ! -s s.pid ]; do sleep 0.02; done; \
         echo in > inside.txt",
        outside = outside.path().display(),
        port = server.port
    );
    let json = shell_json(&cmd);
    let mut command = if root {
        let mut command = std::process::Command::new("setpriv");
        command.args([format!("--reuid={UID}"), format!("--regid={UID}"), "--clear-groups".into()]).arg(&toolhost);
        command
    } else {
        std::process::Command::new(&toolhost)
    };
    command.args(["call", "shell-exec", &json]).current_dir(dir.path());
    home.environment(&mut command);
    let out = command.stdin(std::process::Stdio::null()).output().expect("toolhost runs");
    let text = result_of(&out);
    let me = if root { UID } else { rustix::process::geteuid().as_raw() };
    assert!(text.starts_with(&format!("exit code: 0\n--- stdout ---\n{me}\nwrite=")), "{text}");
    assert!(!text.contains("write=0") && text.contains("/f: Permission denied"), "{text}");
    assert!(text.contains(" curl=7") && !text.contains("hello"), "{text}");
    assert_eq!(server.accepted(), 0);
    assert!(!outside.path().join("f").exists());
    assert!(dir.path().join("inside.txt").exists());
    let pid = pid_in(&dir.path().join("s.pid"));
    assert!(is_gone(pid), "process {pid} outlived the call");
}

#[test]
fn help_says_how_to_turn_parts_of_the_sandbox_off() {
    let dir = workspace(&[]);
    let out = Home::new().run(dir.path(), &["--help"], None);
    let help = String::from_utf8_lossy(&out.stdout);
    for key in ["[shell]", "network = true", "background = true", "writable", "sandbox = \"best-effort\"", "\"off\""] {
        assert!(help.contains(key), "{key} missing from --help:\n{help}");
    }
}
