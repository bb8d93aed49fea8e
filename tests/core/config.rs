//! Config files, workspace trust and the flags on top, through the real `toolhost` binary with a
//! home folder of the test's own (never the real user's).

use crate::common;

use std::path::Path;

use common::*;
use serde_json::{json, Value};

fn stdout_json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", String::from_utf8_lossy(&out.stdout), stderr(out)))
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn trusted(home: &Home, dir: &Path) {
    let out = home.run(dir, &["trust"], None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

fn description_of(catalogue: &Value, tool: &str) -> String {
    let tool = catalogue.as_array().unwrap().iter().find(|t| t["function"]["name"] == tool).unwrap();
    let mut text = tool["function"]["description"].as_str().unwrap().to_string();
    for (_, param) in tool["function"]["parameters"]["properties"].as_object().unwrap() {
        text.push('\n');
        text.push_str(param["description"].as_str().unwrap());
    }
    text
}

const PROJECT: &str = r#"
tools = ["more-tools"]

[limits]
shell_timeout_s = 7
output_chars = 5000
read_lines = 3

[guard]
default = "allow"

[[guard.rule]]
tool = "fs-*"
path = "secrets/**"
action = "deny"
reason = "secrets stay private"

[[guard.rule]]
tool = "shell-exec"
action = "confirm"

[provider]
base_url = "http://127.0.0.1:8080/v1"
model = "some-model"
api_key_env = "OPENAI_API_KEY"
dialect = "native"

# A command that does not exist: the server does not start, and everything else works.
[[mcp]]
name = "files"
command = "toolhost-test-no-such-command"
args = ["-y", "some-server"]
"#;

fn project_workspace() -> tempfile::TempDir {
    workspace(&[
        ("toolhost.toml", PROJECT),
        ("secrets/key.pem", "KEY\n"),
        (
            "more-tools/hello.scm",
            "(define-tool (hello (who string \"Who\")) \"Greet.\" (string-append \"hello \" who))\n",
        ),
    ])
}

#[test]
fn every_section_of_a_trusted_project_config_is_applied() {
    let dir = project_workspace();
    let home = Home::new();
    trusted(&home, dir.path());
    // [limits]: read_lines bounds fs-read, and the descriptions models see state the values.
    let out = home.run(dir.path(), &["call", "fs-read", r#"{"path": "a.txt"}"#], None);
    let result = stdout_json(&out)["result"].as_str().unwrap().to_string();
    assert!(result.starts_with("1\tline 1\n2\tline 2\n3\tline 3\n... 297 more lines"), "{result}");
    let catalogue = stdout_json(&home.run(dir.path(), &["tools"], None));
    let shell = description_of(&catalogue, "shell-exec");
    assert!(shell.contains("at most 7;") && shell.contains("7 when left out"), "{shell}");
    assert!(!shell.contains("120"), "no limit but the configured one is stated: {shell}");
    assert!(description_of(&catalogue, "fs-read").contains("up to 3 when left out"));
    assert!(description_of(&catalogue, "fs-read").contains("4,800 characters"));
    // [[guard.rule]] with a path: denied with the reason, as the model sees it.
    let out = home.run(dir.path(), &["call", "fs-read", r#"{"path": "secrets/key.pem"}"#], None);
    assert_eq!(out.status.code(), Some(1));
    let answer = stdout_json(&out);
    assert_eq!(answer["error"]["kind"], "denied");
    assert!(answer["error"]["message"].as_str().unwrap().contains("secrets stay private"), "{answer}");
    // tools = [...]: the folder the config names is loaded, relative to the config file.
    let out = home.run(dir.path(), &["call", "hello", r#"{"who": "you"}"#], None);
    assert_eq!(stdout_json(&out)["result"], "hello you", "{}", stderr(&out));
}

#[test]
fn a_confirm_rule_denies_without_a_terminal_and_yes_allows() {
    let dir = project_workspace();
    let home = Home::new();
    trusted(&home, dir.path());
    let out = home.run(dir.path(), &["call", "shell-exec", r#"{"cmd": "touch ran"}"#], None);
    let answer = stdout_json(&out);
    assert_eq!(answer["error"]["kind"], "denied", "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("confirmation"), "{answer}");
    assert!(!dir.path().join("ran").exists());
    let out = home.run(dir.path(), &["--yes", "call", "shell-exec", r#"{"cmd": "touch ran"}"#, "--record"], None);
    let record = stdout_json(&out);
    assert_eq!(record["ok"], true, "{record}");
    assert_eq!(record["decision"]["action"], "confirm");
    assert_eq!(record["decision"]["answer"], true);
    assert_eq!(record["decision"]["by"], "--yes");
    assert_eq!(record["decision"]["rule"]["tool"], "shell-exec");
    assert!(record["decision"]["rule"]["origin"].as_str().unwrap().contains("toolhost.toml:"), "{record}");
    assert!(dir.path().join("ran").exists());
}

#[test]
fn call_record_prints_the_whole_record() {
    let dir = workspace(&[]);
    let home = Home::new();
    let out =
        home.run(dir.path(), &["call", "fs-read", r#""{\"path\": \"a.txt\", \"count\": \"1\"}""#, "--record"], None);
    let record = stdout_json(&out);
    assert_eq!(record["tool"], "fs-read");
    assert_eq!(record["arguments"], json!("{\"path\": \"a.txt\", \"count\": \"1\"}"), "as received");
    assert_eq!(record["tidied"], json!({"path": "a.txt", "count": 1}), "after tidy");
    assert_eq!(record["notes"].as_array().unwrap().len(), 2);
    assert_eq!(record["decision"], json!({"action": "allow"}));
    assert_eq!(record["result"], "1\tline 1\n... 299 more lines; next start 2\n");
    assert!(record["elapsed_ms"].as_f64().unwrap() >= 0.0);
    let failed = stdout_json(&home.run(dir.path(), &["call", "fs-read", r#"{"limit": 1}"#, "--record"], None));
    assert_eq!(failed["ok"], false);
    assert_eq!(failed["error"]["kind"], "unknown_argument");
    assert_eq!(failed.get("decision"), None, "the call never reached the guard");
}

#[test]
fn bad_config_files_are_errors_naming_the_file_line_and_key_and_nothing_runs() {
    let dir = workspace(&[]);
    let home = Home::new();
    let cases = [
        ("unknown.toml", "[limits]\nscheme_call_s = 5\nshell_timout_s = 3\n", "unknown.toml:3:", "shell_timout_s"),
        ("wrong.toml", "[limits]\noutput_chars = \"big\"\n", "wrong.toml:2:", "limits.output_chars"),
        ("glob.toml", "[[guard.rule]]\ntool = \"fs-[\"\naction = \"deny\"\n", "glob.toml:2:", "guard.rule[1].tool"),
        ("url.toml", "[[mcp]]\nname = \"x\"\nurl = \"ftp://host\"\n", "url.toml:3:", "mcp[1].url"),
    ];
    for (file, text, place, key) in cases {
        write(dir.path(), file, text);
        let out = home.run(dir.path(), &["--config", file, "call", "shell-exec", r#"{"cmd": "touch ran"}"#], None);
        assert_eq!(out.status.code(), Some(2), "{file}: {}", stderr(&out));
        let message = stderr(&out);
        assert!(message.contains(place) && message.contains(key), "{file}: {message}");
        assert!(out.stdout.is_empty(), "{file}: nothing runs on a half-read config");
    }
    assert!(!dir.path().join("ran").exists());
    let out = home.run(dir.path(), &["--config", "missing.toml", "eval", "1"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("missing.toml"), "{}", stderr(&out));
    let out = home.run(dir.path(), &["--tools", "no-such-folder", "eval", "1"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no-such-folder"), "{}", stderr(&out));
}

#[test]
fn the_user_file_and_the_project_file_merge_and_flags_go_on_top() {
    let dir = workspace(&[
        ("toolhost.toml", "[limits]\nread_lines = 2\n\n[[guard.rule]]\ntool = \"fs-write\"\naction = \"allow\"\n"),
        ("other.toml", "[limits]\nread_lines = 4\n"),
    ]);
    let home = Home::new();
    let user = home.toolhost_config_dir().join("config.toml");
    std::fs::create_dir_all(user.parent().unwrap()).unwrap();
    std::fs::write(
        &user,
        "[limits]\nread_lines = 1\nshell_timeout_s = 9\n\n[[guard.rule]]\ntool = \"fs-*\"\naction = \"deny\"\n",
    )
    .unwrap();
    let lines = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["call", "fs-read", r#"{"path": "a.txt"}"#]);
        let out = home.run(dir.path(), &all, None);
        stdout_json(&out)
    };
    // Untrusted: only the user's file applies, and its rule denies fs-read.
    assert_eq!(lines(&[])["error"]["kind"], "denied");
    trusted(&home, dir.path());
    // Trusted: the project's read_lines overrides the user's, the project's rule comes first (so
    // fs-write is allowed) and the user's rule still applies to fs-read.
    assert_eq!(lines(&[])["error"]["kind"], "denied");
    let write = home.run(dir.path(), &["call", "fs-write", r#"{"path": "w.txt", "content": "x"}"#], None);
    assert_eq!(stdout_json(&write)["ok"], true);
    let catalogue = stdout_json(&home.run(dir.path(), &["tools"], None));
    assert!(description_of(&catalogue, "fs-read").contains("up to 2 when left out"));
    assert!(description_of(&catalogue, "shell-exec").contains("at most 9;"), "the user's key the project left alone");
    // --config replaces the project's file: read_lines 4 over the user's 1.
    let catalogue = stdout_json(&home.run(dir.path(), &["--config", "other.toml", "tools"], None));
    assert!(description_of(&catalogue, "fs-read").contains("up to 4 when left out"));
}

#[test]
fn an_untrusted_workspace_skips_its_own_files_until_trusted_and_again_after_a_change() {
    let dir = workspace(&[(".toolhost/tools/hi.scm", "(define-tool (hi) \"Say hi.\" \"hi\")\n")]);
    let home = Home::new();
    let call_hi = || home.run(dir.path(), &["call", "hi"], None);
    let out = call_hi();
    assert_eq!(stdout_json(&out)["error"]["kind"], "unknown_tool");
    let notice = stderr(&out);
    assert_eq!(notice.lines().count(), 1, "one line: {notice}");
    assert!(notice.contains("not trusted") && notice.contains("toolhost trust"), "{notice}");
    trusted(&home, dir.path());
    let out = call_hi();
    assert_eq!(stdout_json(&out)["result"], "hi");
    assert_eq!(stderr(&out), "", "a trusted workspace says nothing");
    // A changed tool file makes it untrusted again.
    write(dir.path(), ".toolhost/tools/hi.scm", "(define-tool (hi) \"Say hi.\" \"changed\")\n");
    let out = call_hi();
    assert_eq!(stdout_json(&out)["error"]["kind"], "unknown_tool");
    assert!(stderr(&out).contains("changed"), "{}", stderr(&out));
    trusted(&home, dir.path());
    assert_eq!(stdout_json(&call_hi())["result"], "changed");
    // untrust forgets it.
    let out = home.run(dir.path(), &["untrust"], None);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout_json(&call_hi())["error"]["kind"], "unknown_tool");
    // Nothing was written outside the test's home.
    assert!(home.toolhost_config_dir().join("trusted.toml").exists());
}

#[test]
fn tools_named_with_the_flag_are_trusted() {
    let dir = workspace(&[(".toolhost/tools/hi.scm", "(define-tool (hi) \"Say hi.\" \"hi\")\n")]);
    let home = Home::new();
    let out = home.run(dir.path(), &["--tools", ".toolhost/tools", "call", "hi"], None);
    assert_eq!(stdout_json(&out)["result"], "hi", "{}", stderr(&out));
}

#[test]
fn the_library_needs_no_steel_home_and_prints_nothing_of_steel_s() {
    // A fresh home has no ~/.local/share, where steel would try to make its folder and complain.
    let dir = workspace(&[]);
    let out = Home::new().run(dir.path(), &["eval", "(+ 1 2)"], None);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "3\n");
    assert_eq!(stderr(&out), "");
}

#[test]
fn the_example_config_in_the_repository_is_valid_and_applies() {
    // Its MCP servers are illustrations: starting them would fetch a package, or reach whatever
    // listens on the port. Pointed at a missing command and a closed port, they fail to start,
    // which shows that the `[[mcp]]` entries applied.
    let example = include_str!("../../toolhost.example.toml")
        .replace("command = \"npx\"", "command = \"toolhost-test-no-such-command\"")
        .replace("http://127.0.0.1:3001/mcp", "http://127.0.0.1:9/mcp");
    let dir = workspace(&[("example.toml", &example)]);
    let home = Home::new();
    // It names a tool folder, which must exist.
    let out = home.run(dir.path(), &["--config", "example.toml", "tools"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("example.toml"), "{}", stderr(&out));
    std::fs::create_dir(dir.path().join("tools")).unwrap();
    // And a folder commands may write to.
    let out = home.run(dir.path(), &["--config", "example.toml", "tools"], None);
    assert_eq!(out.status.code(), Some(2));
    let says = stderr(&out);
    assert!(says.contains("shell.writable:") && says.contains("build-cache does not exist"), "{says}");
    std::fs::create_dir(dir.path().join("build-cache")).unwrap();
    let out = home.run(dir.path(), &["--config", "example.toml", "tools"], None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let catalogue: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let shell = description_of(&catalogue, "shell-exec");
    assert!(shell.contains(&format!("and {}", dir.path().join("build-cache").display())), "{shell}");
    for server in ["github", "docs"] {
        let said = if cfg!(feature = "mcp") {
            format!("mcp server \"{server}\" did not start")
        } else {
            format!("mcp server \"{server}\" is not started: toolhost was built without the `mcp` feature")
        };
        assert!(stderr(&out).contains(&said), "{}", stderr(&out));
    }
}

#[test]
fn on_a_terminal_a_confirmation_shows_the_preview_and_takes_the_answer() {
    let dir = workspace(&[("confirm.toml", "[[guard.rule]]\ntool = \"shell-exec\"\naction = \"confirm\"\n")]);
    let home = Home::new();
    let args = ["--config", "confirm.toml", "call", "shell-exec", r#"{"cmd": "touch yes-file"}"#];
    let screen = on_terminal(&home, dir.path(), &args, "y\n");
    assert!(screen.contains("shell-exec needs your confirmation") && screen.contains("$ touch yes-file"), "{screen}");
    assert!(screen.contains(r#""ok":true"#), "{screen}");
    assert!(dir.path().join("yes-file").exists());
    let args = ["--config", "confirm.toml", "call", "shell-exec", r#"{"cmd": "touch no-file"}"#];
    let screen = on_terminal(&home, dir.path(), &args, "n\n");
    assert!(screen.contains("the person declined"), "{screen}");
    assert!(!dir.path().join("no-file").exists());
}

#[test]
fn the_repl_on_a_terminal_asks_to_trust_the_workspace() {
    let dir = workspace(&[(".toolhost/tools/hi.scm", "(define-tool (hi) \"Say hi.\" \"hi there\")\n")]);
    let home = Home::new();
    let mut terminal = Terminal::start(&home, dir.path(), &["repl"]);
    terminal.wait_for("Trust this workspace now?", 0);
    terminal.send("y\n");
    let mark = terminal.wait_for("toolhost> ", 0).len();
    terminal.send("(hi)\n");
    terminal.wait_for("hi there", mark);
    terminal.send(":quit\n");
    terminal.finish();
    // It was recorded: the next run loads the tool without asking.
    let out = home.run(dir.path(), &["call", "hi"], None);
    assert_eq!(stdout_json(&out)["result"], "hi there");
}

#[test]
fn a_project_config_that_is_not_a_regular_file_is_refused_without_being_read() {
    let home = Home::new();
    let fifo = |dir: &Path| make_fifo(&dir.join("toolhost.toml"));
    let zero = |dir: &Path| std::os::unix::fs::symlink("/dev/zero", dir.join("toolhost.toml")).unwrap();
    let folder = |dir: &Path| std::fs::create_dir(dir.join("toolhost.toml")).unwrap();
    type Maker<'a> = &'a dyn Fn(&Path);
    let makers: [(&str, Maker); 3] = [("a FIFO", &fifo), ("/dev/zero", &zero), ("a folder", &folder)];
    for (what, make) in makers {
        let dir = workspace(&[]);
        make(dir.path());
        // Trusting it is refused, saying why.
        let out = home.run_bounded(dir.path(), &["trust"]);
        assert_eq!(out.status.code(), Some(2), "{what}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("toolhost.toml") && stderr(&out).contains("not a regular file"),
            "{what}: {}",
            stderr(&out)
        );
        // Any other command runs without it and says why it was skipped.
        let out = home.run_bounded(dir.path(), &["eval", "(+ 1 2)"]);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "3\n", "{what}: {}", stderr(&out));
        assert!(stderr(&out).contains("not a regular file"), "{what}: {}", stderr(&out));
        // Named with --config, it is an error.
        let out = home.run_bounded(dir.path(), &["--config", "toolhost.toml", "eval", "1"]);
        assert_eq!(out.status.code(), Some(2), "{what}: {}", stderr(&out));
        assert!(stderr(&out).contains("not a regular file"), "{what}: {}", stderr(&out));
    }
}

#[test]
fn the_user_config_must_be_a_regular_file_or_a_link_to_one() {
    let dir = workspace(&[]);
    let home = Home::new();
    let config_dir = home.toolhost_config_dir();
    std::fs::create_dir_all(&config_dir).unwrap();
    make_fifo(&config_dir.join("config.toml"));
    let out = home.run_bounded(dir.path(), &["eval", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("config.toml: is a FIFO, not a regular file"), "{}", stderr(&out));

    // A link to a regular file (a dotfiles manager's) is read as that file.
    std::fs::remove_file(config_dir.join("config.toml")).unwrap();
    let dotfiles = tempfile::tempdir().unwrap();
    write(dotfiles.path(), "toolhost.toml", "[limits]\nread_lines = 2\n");
    std::os::unix::fs::symlink(dotfiles.path().join("toolhost.toml"), config_dir.join("config.toml")).unwrap();
    let out = home.run_bounded(dir.path(), &["eval", "(fs-read \"a.txt\")"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout_text(&out).contains("next start 3"), "{}", stdout_text(&out));
}

#[test]
fn a_config_file_past_the_size_cap_is_refused() {
    let dir = workspace(&[]);
    // Sparse: two mebibytes of nothing on disk.
    std::fs::File::create(dir.path().join("big.toml")).unwrap().set_len(2 << 20).unwrap();
    let out = Home::new().run_bounded(dir.path(), &["--config", "big.toml", "eval", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("big.toml: is larger than 1 MiB"), "{}", stderr(&out));
}

fn stdout_text(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}
