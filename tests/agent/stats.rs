//! `toolhost stats` over session logs the agent loop really wrote: sessions run here against a model
//! server on 127.0.0.1 whose scripted replies make every shape a model sends (unknown argument
//! names, missing arguments, wrong types, duplicate keys, unparsable JSON, unknown tools, P-format
//! refusals, each tidy repair, strict-mode nulls, guard denials, confirmations answered yes and
//! no, shell reads), then the command run as a real process over them, every count checked. Then
//! the same logs damaged (cut short, corrupt lines, written by log format 1), and with the usage
//! and code-mode lines later versions write, in the shape `toolhost stats` documents.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use common::model_server::{ModelServer, Scripted};
use common::*;
use serde_json::{json, Value};
use toolhost::agent::{ChatClient, ClientSettings, RetryPolicy, Session, SessionLog, Stop};
use toolhost::guard::{Action, Answer, Confirmer, Guard, Rule};
use toolhost::{HostBuilder, HostHandle};

fn client(server: &ModelServer) -> ChatClient {
    let mut settings = ClientSettings::new(server.base_url(), "test-model");
    settings.retry =
        RetryPolicy { attempts: 1, base_delay: Duration::from_millis(1), max_delay: Duration::from_millis(1) };
    ChatClient::new(settings)
}

fn run(home: &Home, dir: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    home.run(dir, args, stdin)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `toolhost stats --format json ARGS`, which must exit with `code`.
fn stats_json(args: &[&str], code: i32) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let mut all = vec!["stats", "--format", "json"];
    all.extend_from_slice(args);
    let out = run(&Home::new(), dir.path(), &all, None);
    assert_eq!(out.status.code(), Some(code), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&out)))
}

/// The workspace every session works in.
fn workspace_for_sessions() -> tempfile::TempDir {
    workspace(&[
        ("secret/key.txt", "hunter2\n"),
        ("src/main.rs", "fn main() { println!(\"hello\"); }\n"),
        ("deny.toml", "[[guard.rule]]\ntool = \"fs-read\"\npath = \"secret/**\"\naction = \"deny\"\n"),
    ])
}

/// A Scheme tool with a list parameter, for the list-sent-as-JSON-text repair.
fn tally_tools() -> tempfile::TempDir {
    let tools = tempfile::tempdir().unwrap();
    write(
        tools.path(),
        "tally.scm",
        "(define-tool (tally (words list \"Words\") (word string \"The word\"))\n  \"Count a word.\"\n  \
         (length (filter (lambda (w) (equal? w word)) words)))\n",
    );
    tools
}

/// Runs an in-process session with `builder`'s host against `script`, logging to `log`.
fn session(builder: HostBuilder, script: Vec<Scripted>, log: &Path, edit: impl FnOnce(Session<'_>) -> Session<'_>) {
    let server = ModelServer::start(script);
    let mut model = client(&server);
    let handle = HostHandle::spawn(builder).unwrap();
    let session = Session::new(handle, &mut model).log(SessionLog::create(log).unwrap());
    // A session that fails (the model's 400) has logged why; the count is what is checked.
    let _ = edit(session).run("Work on the workspace.");
}

/// Session A: every refused shape, every tidy repair but strict nulls, a denial by rule, one by the
/// workspace boundary, confirmations answered yes and no, and shell reads; 28 calls, 5 turns.
fn session_every_shape(dir: &Path, tools: &Path, log: &Path) {
    let guard = Guard::default()
        .rule(Rule::new("fs-read", Action::Deny).unwrap().path("secret/**").unwrap().reason("secrets stay private"))
        .rule(Rule::new("fs-write", Action::Confirm).unwrap());
    let confirmer: Confirmer =
        Arc::new(|request| Answer { yes: request.preview.contains("yes.txt"), by: "the test".into() });
    let builder = HostBuilder::new(dir).tool_dir(tools).guard(guard).confirmer(confirmer);
    let wrapped = json!(json!({"path": "a.txt", "count": 2}).to_string()).to_string();
    let script = vec![
        Scripted::calls(&[
            ("c1", "fs-read", r#"{"path":"a.txt","limit":3}"#),
            ("c2", "fs-read", r#"{"path":"a.txt","offset":10}"#),
            ("c3", "fs-read", "{}"),
            ("c4", "shell-exec", "{}"),
            ("c5", "fs-read", r#"{"path":"a.txt","count":"many"}"#),
            ("c6", "fs-read", r#"{"path":"a.txt","path":"b.txt"}"#),
            ("c7", "fs-read", r#"{"path": "a.txt""#),
            ("c8", "fs-read", r#"["a.txt"]"#),
            ("c9", "apply_patch", r#"{"patch":"..."}"#),
            ("c10", "read_file", r#"{"path":"a.txt"}"#),
        ]),
        Scripted::calls(&[
            ("d1", "fs-read", &wrapped),
            ("d2", "tally", r#"{"words":"[\"a\",\"b\",\"a\"]","word":"a"}"#),
            ("d3", "fs-read", r#"{"path":"a.txt","start":"3","count":"1"}"#),
            ("d4", "fs-edit", r#"{"path":"src/main.rs","old":"hello","new":"hi","replace-all":"true"}"#),
        ]),
        Scripted::calls(&[
            ("e1", "fs-read", r#"{"path":"secret/key.txt"}"#),
            ("e2", "fs-read", r#"{"path":"../outside.txt"}"#),
            ("e3", "fs-write", r#"{"path":"yes.txt","content":"y\n"}"#),
            ("e4", "fs-write", r#"{"path":"no.txt","content":"n\n"}"#),
        ]),
        Scripted::calls(&[
            ("f1", "shell-exec", r#"{"cmd":"cat a.txt | head -n 2"}"#),
            ("f2", "shell-exec", r#"{"cmd":"sed -n '1,3p' a.txt"}"#),
            ("f3", "shell-exec", r#"{"cmd":"cd src && grep -n main main.rs | grep -v test"}"#),
            ("f4", "shell-exec", r#"{"cmd":"sed -i 's/line/LINE/' a.txt"}"#),
            ("f5", "shell-exec", r#"{"cmd":"ls && find . -name '*.txt'"}"#),
            ("f6", "shell-exec", r#"{"cmd":"python3 -c \"print(open('a.txt').read()[:10])\""}"#),
            ("f7", "shell-exec", r#"{"cmd":"wc -l a.txt"}"#),
            ("f8", "shell-exec", r#"{"cmd":"echo done | grep done"}"#),
            ("f9", "fs-list", "{}"),
            ("f10", "index-grep", r#"{"pattern":"line 1"}"#),
        ]),
        Scripted::text("done"),
    ];
    session(builder, script, log, |s| s);
    assert!(dir.join("yes.txt").exists() && !dir.join("no.txt").exists(), "the confirmer was asked and answered");
}

/// Session B, strict: three nulls dropped; 2 calls, 2 turns.
fn session_strict(dir: &Path, log: &Path) {
    let script = vec![
        Scripted::calls(&[
            ("g1", "fs-read", r#"{"path":"a.txt","start":2,"count":null}"#),
            ("g2", "fs-read", r#"{"path":"a.txt","start":null,"count":null}"#),
        ]),
        Scripted::text("read"),
    ];
    session(HostBuilder::new(dir), script, log, |s| s.strict(true));
}

/// Session E: the model fails after one call (the log ends in an error); 1 call, 2 turns.
fn session_model_error(dir: &Path, log: &Path) {
    let script = vec![
        Scripted::calls(&[("h1", "fs-read", r#"{"path":"a.txt","count":1}"#)]),
        Scripted::raw(400, r#"{"error":{"message":"context length exceeded"}}"#),
    ];
    session(HostBuilder::new(dir), script, log, |s| s);
}

/// Session F: stopped after its first call; 1 call, 1 turn.
fn session_interrupted(dir: &Path, log: &Path) {
    let script = vec![
        Scripted::calls(&[("i1", "fs-read", r#"{"path":"a.txt","count":1}"#), ("i2", "fs-list", "{}")]),
        Scripted::text("unreached"),
    ];
    let stop = Stop::new();
    let on_call = stop.clone();
    session(HostBuilder::new(dir), script, log, move |s| s.stop_on(stop).on_call(move |_| on_call.stop()));
}

/// Session C, P-format, through `toolhost agent` as a person runs it: four tags refused before the
/// host, a tag naming a tool that does not exist, one that runs; 6 calls, 2 turns.
fn session_pformat(home: &Home, dir: &Path, log: &Path) {
    let server = ModelServer::start(vec![
        Scripted::text(
            "Reading.\n<tool_call>fs-read[a.txt]</tool_call>\n<tool_call>fs-read[0|a.txt|1]</tool_call>\n\
             <tool_call>fs-read[0|a.txt|7|2]</tool_call>\n<tool_call>nope[0|x]</tool_call>\n\
             <tool_call>fs-read[0|a.txt|1|2|2|1]</tool_call>\n<tool_call>fs-read[0|a.txt",
        ),
        Scripted::text("line 2 it is"),
    ]);
    let (url, log) = (server.base_url(), log.display().to_string());
    let args = ["agent", "--dialect", "pformat", "--base-url", &url, "--model", "m", "--log", &log, "Read line 2."];
    let out = run(home, dir, &args, None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// Session D, through `toolhost agent` with a config's deny rule, at its turn limit: 2 calls, 2
/// turns, both denied.
fn session_max_turns(home: &Home, dir: &Path, log: &Path) {
    let call = Scripted::calls(&[("j", "fs-read", r#"{"path":"secret/key.txt"}"#)]);
    let server = ModelServer::start(vec![call.clone(), call]);
    let (url, log) = (server.base_url(), log.display().to_string());
    let args = [
        "--config",
        "deny.toml",
        "agent",
        "--base-url",
        &url,
        "--model",
        "m",
        "--max-turns",
        "2",
        "--log",
        &log,
        "Read.",
    ];
    let out = run(home, dir, &args, None);
    assert_eq!(out.status.code(), Some(1), "the turn limit: {}", stderr(&out));
}

/// Runs the six sessions, each into its own log in `logs`.
fn record_sessions(logs: &Path) -> Vec<PathBuf> {
    let (home, tools) = (Home::new(), tally_tools());
    let names = ["a-every-shape", "b-strict", "c-pformat", "d-max-turns", "e-model-error", "f-interrupted"];
    let paths: Vec<PathBuf> = names.iter().map(|n| logs.join(format!("{n}.jsonl"))).collect();
    let fresh = || workspace_for_sessions();
    let dir = fresh();
    session_every_shape(dir.path(), tools.path(), &paths[0]);
    session_strict(fresh().path(), &paths[1]);
    session_pformat(&home, fresh().path(), &paths[2]);
    let dir_d = fresh();
    session_max_turns(&home, dir_d.path(), &paths[3]);
    session_model_error(fresh().path(), &paths[4]);
    session_interrupted(fresh().path(), &paths[5]);
    paths
}

fn names(counts: &Value) -> Vec<(String, u64)> {
    counts["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| (row["name"].as_str().unwrap().to_string(), row["count"].as_u64().unwrap()))
        .collect()
}

fn owned(rows: &[(&str, u64)]) -> Vec<(String, u64)> {
    rows.iter().map(|(n, c)| (n.to_string(), *c)).collect()
}

/// The `elapsed_ms` of every call of `tool` in the logs at `paths`, in microseconds, sorted.
fn logged_times_us(paths: &[PathBuf], tool: &str) -> Vec<u64> {
    let mut times: Vec<u64> = paths
        .iter()
        .flat_map(|path| entries(path))
        .filter(|entry| entry["type"] == "call" && entry["record"]["tool"] == tool)
        .map(|entry| (entry["record"]["elapsed_ms"].as_f64().unwrap() * 1000.0).round() as u64)
        .collect();
    times.sort_unstable();
    times
}

fn tool_row<'r>(report: &'r Value, tool: &str) -> &'r Value {
    let tools = report["calls"]["tools"].as_array().unwrap();
    tools.iter().find(|t| t["tool"] == tool).unwrap_or_else(|| panic!("no row for {tool}: {tools:?}"))
}

fn file_tool<'r>(report: &'r Value, tool: &str) -> &'r Value {
    report["shell_reads"]["tools"].as_array().unwrap().iter().find(|t| t["tool"] == tool).unwrap()
}

fn pattern<'r>(report: &'r Value, name: &str) -> &'r Value {
    let tools = report["shell_reads"]["tools"].as_array().unwrap();
    tools.iter().flat_map(|t| t["patterns"].as_array().unwrap()).find(|p| p["pattern"] == name).unwrap()
}

#[test]
fn stats_counts_every_shape_of_sessions_the_agent_loop_logged() {
    let logs = tempfile::tempdir().unwrap();
    let paths = record_sessions(logs.path());
    let report = stats_json(&[&logs.path().display().to_string()], 0);

    let inputs = &report["inputs"];
    assert_eq!((inputs["logs"].clone(), inputs["skipped"]["total"].clone()), (json!(6), json!(0)), "{inputs}");
    assert_eq!(inputs["log_versions"], json!({"2": 6}));

    let sessions = &report["sessions"];
    assert_eq!(sessions["count"], 6);
    // Turns 5, 2, 2, 2, 2, 1 and calls 28, 2, 6, 2, 1, 1.
    assert_eq!(sessions["turns"], json!({"median": 2, "max": 5}));
    assert_eq!(sessions["calls"], json!({"median": 2, "max": 28}));
    assert_eq!(
        sessions["ended"],
        json!({"answered": 3, "max_turns": 1, "interrupted": 1, "error": 1, "unfinished": 0}),
        "{sessions}"
    );
    assert_eq!(sessions["errors"], json!({"agent_error": 1}));
    assert_eq!(sessions["tokens"]["sessions"], 0, "these logs have no usage");

    let calls = &report["calls"];
    assert_eq!(calls["total"], 40);
    // fs-read: 11 in A, 2 in B, 5 in C (4 refused tags and 1 that ran), 2 in D, 1 in E and F each.
    let fs_read = tool_row(&report, "fs-read");
    assert_eq!(fs_read["calls"], 22);
    assert_eq!(
        fs_read["errors"],
        json!({"total": 15, "bad_arguments": 7, "denied": 4, "missing_argument": 1, "unknown_argument": 2, "wrong_type": 1}),
    );
    // Times as the records logged them, to three significant digits (the report gives the lowest
    // value of the histogram bucket the quantile falls in).
    for tool in ["fs-read", "shell-exec"] {
        let logged = logged_times_us(&paths, tool);
        for (quantile, key) in [(0.5, "median"), (0.95, "p95")] {
            let expected = logged[(quantile * logged.len() as f64).ceil() as usize - 1];
            let reported = (tool_row(&report, tool)["time_ms"][key].as_f64().unwrap() * 1000.0).round() as u64;
            assert!(
                reported <= expected && expected - reported <= expected / 1000,
                "{tool} {key}: reported {reported} us, logged {expected} us of {logged:?}"
            );
        }
    }
    assert_eq!(calls["tools"][0]["tool"], "fs-read", "the most called first");
    assert_eq!(tool_row(&report, "shell-exec")["calls"], 9);
    assert_eq!(tool_row(&report, "shell-exec")["errors"]["missing_argument"], 1);
    assert_eq!(tool_row(&report, "apply_patch")["errors"], json!({"total": 1, "unknown_tool": 1}));

    let refused = &report["refused"];
    assert_eq!(refused["total"], 15, "{refused}");
    assert_eq!(names(&refused["unknown_argument"]), owned(&[("limit", 1), ("offset", 1)]));
    assert_eq!(refused["unknown_argument"]["names"][0]["tools"], json!({"fs-read": 1}));
    assert_eq!(names(&refused["missing_argument"]), owned(&[("cmd", 1), ("path", 1)]));
    assert_eq!(names(&refused["wrong_type"]), owned(&[("count", 1)]));
    assert_eq!(
        refused["bad_arguments"],
        json!({"count": 3, "reasons": {"duplicate_key": 1, "not_json": 1, "not_an_object": 1}})
    );
    assert_eq!(names(&refused["unknown_tool"]), owned(&[("apply_patch", 1), ("nope", 1), ("read_file", 1)]));
    let pformat = &refused["pformat"];
    assert_eq!(pformat["count"], 4);
    for (reason, count) in pformat["reasons"].as_object().unwrap() {
        let expected =
            u64::from(["positional", "odd_tokens", "no_such_slot", "unclosed_tag"].contains(&reason.as_str()));
        assert_eq!(count.as_u64(), Some(expected), "{reason}: {pformat}");
    }

    // Numbers as strings: start and count in A, and the two slots of C's tag that ran.
    assert_eq!(
        report["tidy"],
        json!({"total": 10, "kinds": {"arguments_json_string": 1, "json_text_parameter": 1, "numeric_string": 4,
            "boolean_string": 1, "strict_null_dropped": 3}})
    );

    let guard = &report["guard"];
    let rules = guard["denied"]["rules"].as_array().unwrap();
    let rule_counts: Vec<(String, u64)> =
        rules.iter().map(|r| (r["rule"].as_str().unwrap().to_string(), r["count"].as_u64().unwrap())).collect();
    assert_eq!(rule_counts.len(), 3, "{rule_counts:?}");
    assert_eq!(guard["denied"]["total"], 4);
    // D's rule from its config file, named by where it was written; A's built in code; the boundary.
    assert!(
        rule_counts[0].0.starts_with("rule 1 (fs-read, path secret/**) at ")
            && rule_counts[0].0.ends_with("deny.toml:1")
    );
    assert_eq!(rule_counts[0].1, 2);
    assert!(rule_counts.contains(&("rule 1 (fs-read, path secret/**)".to_string(), 1)), "{rule_counts:?}");
    assert!(rule_counts.contains(&("workspace boundary".to_string(), 1)), "{rule_counts:?}");
    assert_eq!(
        guard["confirmations"],
        json!({"asked": 2, "yes": 1, "no": 1, "by": [{"by": "the test", "yes": 1, "no": 1}]})
    );

    let shell = &report["shell_reads"];
    assert_eq!((shell["shell_exec_calls"].clone(), shell["commands"].clone()), (json!(9), json!(8)), "{shell}");
    assert_eq!((shell["reading"].clone(), shell["unsplittable"].clone()), (json!(6), json!(0)));
    for (name, example) in [
        ("cat", "cat a.txt | head -n 2"),
        ("sed -n", "sed -n '1,3p' a.txt"),
        ("grep", "cd src && grep -n main main.rs | grep -v test"),
        ("ls", "ls && find . -name '*.txt'"),
        ("find", "ls && find . -name '*.txt'"),
        ("python -c with open", "python3 -c \"print(open('a.txt').read()[:10])\""),
        ("wc", "wc -l a.txt"),
    ] {
        assert_eq!(pattern(&report, name)["count"], 1, "{name}");
        assert_eq!(pattern(&report, name)["examples"], json!([example]), "{name}");
    }
    for name in ["head", "tail", "rg", "nl", "awk", "rg --files", "tree"] {
        assert_eq!(pattern(&report, name)["count"], 0, "{name}: the piped head and grep filter, sed -i edits");
    }
    // Beside each file tool's own calls: fs-read 22, index-grep 1, fs-list 1 (F's second call never ran).
    let row = |tool: &str| (file_tool(&report, tool)["calls"].clone(), file_tool(&report, tool)["shell_reads"].clone());
    assert_eq!(row("fs-read"), (json!(22), json!(4)));
    assert_eq!(row("index-grep"), (json!(1), json!(1)));
    assert_eq!(row("fs-list"), (json!(1), json!(1)), "ls and find in one command line count once");

    assert_eq!(report["code_mode"]["programs"], 0);
}

#[test]
fn stats_prints_tables_and_reads_standard_input() {
    let logs = tempfile::tempdir().unwrap();
    let paths = record_sessions(logs.path());
    let home = Home::new();
    let out = run(&home, logs.path(), &["stats", "."], None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for expected in [
        "Read 6 logs,",
        "Sessions: 6",
        "ended: answered 3, max_turns 1, interrupted 1, error 1",
        "Calls by tool: 40 calls, 20 errors",
        "Refused shapes: 15 of 40 calls",
        "Tidy repairs: 10",
        "numeric_string 4",
        "Guard: 4 denied, 2 confirmations asked (1 yes, 1 no)",
        "Shell reads the file tools would have served: 6 of 9 shell-exec calls",
        "sed -n '1,3p' a.txt",
        "Code mode: no programs in these logs",
    ] {
        assert!(text.contains(expected), "{expected:?} in:\n{text}");
    }
    let table = text.lines().find(|l| l.trim_start().starts_with("unknown argument names")).unwrap();
    assert!(table.contains("limit 1, offset 1"), "{table}");

    // The help says what is counted; a missing LOG is a usage error.
    let help = run(&home, logs.path(), &["stats", "--help"], None);
    assert!(stdout(&help).contains("Shell reads") && stdout(&help).contains("--format"), "{}", stdout(&help));
    assert_eq!(run(&home, logs.path(), &["stats"], None).status.code(), Some(2));

    // `-` reads one log from standard input.
    let one = std::fs::read_to_string(&paths[1]).unwrap();
    let out = run(&home, logs.path(), &["stats", "--format", "json", "-"], Some(&one));
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!((report["sessions"]["count"].clone(), report["calls"]["total"].clone()), (json!(1), json!(2)));
    assert_eq!(report["tidy"]["kinds"]["strict_null_dropped"], 3);
}

/// Every line of a log, as JSON values.
fn entries(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    std::fs::write(path, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
}

/// Removes the key `key` from every object inside `value`.
fn strip(value: &mut Value, key: &str) {
    match value {
        Value::Object(map) => {
            map.remove(key);
            map.values_mut().for_each(|v| strip(v, key));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| strip(v, key)),
        _ => {}
    }
}

#[test]
fn cut_corrupt_and_old_logs_are_counted_as_such_and_never_stop_the_report() {
    let sessions = tempfile::tempdir().unwrap();
    let paths = record_sessions(sessions.path());
    let every_shape = std::fs::read_to_string(&paths[0]).unwrap();
    let lines: Vec<&str> = every_shape.lines().collect();
    let logs = tempfile::tempdir().unwrap();

    // Killed while writing: the end line never came, the last call line is half written.
    let last_call = lines.iter().rposition(|l| l.starts_with(r#"{"type":"call""#)).unwrap();
    let mut cut: String = lines[..last_call].iter().map(|l| format!("{l}\n")).collect();
    cut.push_str(&lines[last_call][..lines[last_call].len() / 2]);
    std::fs::write(logs.path().join("cut.jsonl"), cut).unwrap();

    // Damaged in the middle: not JSON, not UTF-8, another format's entry, an entry missing its
    // record, and blank lines (not counted at all).
    let mut damaged: Vec<u8> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        damaged.extend_from_slice(line.as_bytes());
        damaged.push(b'\n');
        if i == 2 {
            damaged.extend_from_slice(b"garbage {\n\n\xff\xfe not text\n{\"type\":\"plan\",\"steps\":[]}\n");
            damaged.extend_from_slice(b"{\"type\":\"call\",\"turn\":1}\n   \n");
        }
    }
    std::fs::create_dir(logs.path().join("nested")).unwrap();
    std::fs::write(logs.path().join("nested/damaged.jsonl"), damaged).unwrap();

    // The same session as log format 1 wrote it: no repairs, no reasons.
    let mut old: Vec<Value> = entries(&paths[0]);
    for entry in &mut old {
        if entry["type"] == "session" {
            entry["version"] = json!(1);
        }
        strip(entry, "repairs");
        if let Some(record) = entry.get_mut("record") {
            if let Some(error) = record.get_mut("error") {
                strip(error, "reason");
            }
        }
    }
    write_lines(&logs.path().join("old.jsonl"), &old.iter().map(Value::to_string).collect::<Vec<_>>());

    // A log from a newer format: what this toolhost knows of it is counted, an entry type it does
    // not know is skipped as such.
    let mut newer: Vec<String> = entries(&paths[1])
        .into_iter()
        .map(|mut e| {
            if e["type"] == "session" {
                e["version"] = json!(3);
            }
            e.to_string()
        })
        .collect();
    newer.insert(1, json!({"type": "checkpoint", "turn": 0, "state": {}}).to_string());
    write_lines(&logs.path().join("newer.jsonl"), &newer);

    // Files that are not logs, and an empty log.
    write(logs.path(), "notes.txt", "not a log\n");
    write(logs.path(), "empty.jsonl", "");

    let missing = logs.path().join("no-such-log.jsonl").display().to_string();
    let report = stats_json(&[&logs.path().display().to_string(), &missing], 1);

    let inputs = &report["inputs"];
    assert_eq!(inputs["logs"], 5, "cut, damaged, old, newer and empty; notes.txt is not a .jsonl: {inputs}");
    assert_eq!(
        inputs["skipped"],
        json!({"total": 6, "truncated": 1, "not_utf8": 1, "not_json": 1, "unknown_type": 2, "malformed": 1, "too_long": 0})
    );
    assert_eq!(inputs["unreadable"], json!([{"path": missing, "error": "no such file or folder"}]));
    assert_eq!(inputs["log_versions"], json!({"1": 1, "2": 2, "3": 1}));

    let sessions = &report["sessions"];
    assert_eq!(sessions["count"], 4);
    assert_eq!(
        sessions["ended"],
        json!({"answered": 3, "max_turns": 0, "interrupted": 0, "error": 0, "unfinished": 1})
    );
    // The cut log lost its last call (f10, index-grep) and its end: its turns are the highest seen.
    // Calls 27, 28, 28 and the newer log's 2; turns 4, 5, 5 and 2.
    assert_eq!(sessions["calls"], json!({"median": 27, "max": 28}));
    assert_eq!(report["calls"]["total"], 28 * 3 - 1 + 2);
    assert_eq!(sessions["turns"], json!({"median": 4, "max": 5}));

    // The old log's repairs are read from what its strings became; its reasons are unclassified.
    let tidy = &report["tidy"]["kinds"];
    assert_eq!(
        tidy,
        &json!({"arguments_json_string": 3, "json_text_parameter": 3, "numeric_string": 6, "boolean_string": 3,
            "strict_null_dropped": 3})
    );
    assert_eq!(
        report["refused"]["bad_arguments"]["reasons"],
        json!({"duplicate_key": 2, "not_json": 2, "not_an_object": 2, "unclassified": 3})
    );
    assert_eq!(report["refused"]["total"], 10 * 3);

    // The text says the same, and that one session came from the old format.
    let out = run(&Home::new(), logs.path(), &["stats", ".", &missing], None);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("6 skipped (truncated 1, not_utf8 1, not_json 1, unknown_type 2, malformed 1)"), "{text}");
    assert!(text.contains("1 session is from log format 1"), "{text}");
    assert!(text.contains("1 session is from log format 3, newer than this toolhost's (2)"), "{text}");
    assert!(stderr(&out).contains("could not read") && stderr(&out).contains("no-such-log.jsonl"), "{}", stderr(&out));
}

#[test]
fn usage_and_code_mode_are_counted_where_the_log_has_them_in_the_documented_shape() {
    let sessions = tempfile::tempdir().unwrap();
    let paths = record_sessions(sessions.path());
    let mut lines: Vec<String> = Vec::new();
    let mut replies = 0;
    for mut entry in entries(&paths[1]) {
        if entry["type"] == "reply" {
            // What a provider that reports usage adds to each reply (cached only on the second).
            replies += 1;
            entry["usage"] = if replies == 1 {
                json!({"input_tokens": 1000, "output_tokens": 50})
            } else {
                json!({"input_tokens": 1200, "output_tokens": 30, "cached_tokens": 900})
            };
        }
        let is_end = entry["type"] == "end";
        if is_end {
            // A code-mode program: three nested calls, one denied, one a shell read, one failing;
            // and a program that failed on its own, calling nothing.
            lines.push(
                json!({"type": "call", "turn": 2, "index": 1, "id": "p1",
                    "request": {"tool": "scheme", "arguments": "{\"code\":\"...\"}"},
                    "record": {"tool": "scheme", "arguments": {"code": "(list (fs-read \"a.txt\") ...)"}, "notes": [],
                        "decision": {"action": "allow"}, "ok": true, "result": "...", "elapsed_ms": 4.0,
                        "nested": [
                            {"tool": "fs-read", "arguments": {"path": "a.txt"}, "notes": [], "decision": {"action": "allow"},
                             "ok": true, "result": "1\tline 1\n", "elapsed_ms": 0.3},
                            {"tool": "fs-read", "arguments": {"path": "secret/key.txt"}, "notes": [],
                             "decision": {"action": "deny", "rule": {"index": 1, "tool": "fs-read", "path": "secret/**"}, "reason": "no"},
                             "ok": false, "error": {"kind": "denied", "message": "..."}, "elapsed_ms": 0.1},
                            {"tool": "shell-exec", "arguments": {"cmd": "head -n 3 a.txt"}, "notes": [],
                             "decision": {"action": "allow"}, "ok": false, "error": {"kind": "timeout", "message": "..."},
                             "elapsed_ms": 2.0}
                        ]}})
                .to_string(),
            );
            lines.push(
                json!({"type": "call", "turn": 2, "index": 2, "id": "p2",
                    "request": {"tool": "scheme", "arguments": "{\"code\":\"(\"}"},
                    "record": {"tool": "scheme", "arguments": {"code": "("}, "notes": [], "decision": {"action": "allow"},
                        "ok": false, "error": {"kind": "script_error", "message": "..."}, "elapsed_ms": 0.2, "nested": []}})
                .to_string(),
            );
        }
        lines.push(entry.to_string());
    }
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("later.jsonl");
    write_lines(&log, &lines);
    // The session as logged today, beside it: no usage there.
    std::fs::copy(&paths[2], logs.path().join("today.jsonl")).unwrap();

    let report = stats_json(&[&logs.path().display().to_string()], 0);
    assert_eq!(
        report["sessions"]["tokens"],
        json!({"sessions": 1, "turns": 2, "input": 2200, "output": 80, "cached": 900,
            "input_per_session": {"median": 2200, "max": 2200}, "output_per_session": {"median": 80, "max": 80}})
    );
    assert_eq!(
        report["code_mode"],
        json!({"programs": 2, "failed": {"total": 1, "script_error": 1},
            "nested_calls": {"total": 3, "per_program": {"median": 0, "max": 3}, "tools": {"fs-read": 2, "shell-exec": 1}},
            "nested_errors": {"total": 2, "denied": 1, "timeout": 1}})
    );
    // Programs are calls of their tool; their nested calls are not calls the model made...
    assert_eq!(tool_row(&report, "scheme")["calls"], 2);
    assert_eq!(report["calls"]["total"], 2 + 2 + 6);
    // ...but the guard judged them and the shell ran them.
    assert_eq!(report["guard"]["denied"]["rules"], json!([{"rule": "rule 1 (fs-read, path secret/**)", "count": 1}]));
    assert_eq!(pattern(&report, "head")["examples"], json!(["head -n 3 a.txt"]));

    let out = run(&Home::new(), logs.path(), &["stats", "."], None);
    let text = stdout(&out);
    assert!(text.contains("tokens (1 session with usage, 2 turns): input 2200 (cached 900), output 80"), "{text}");
    assert!(text.contains("Code mode: 2 programs, 1 failed (script_error 1); 3 nested calls"), "{text}");
}

#[test]
fn reading_on_several_threads_reports_what_one_thread_does() {
    let logs = tempfile::tempdir().unwrap();
    let paths = record_sessions(logs.path());
    // Each log twice, and a path that does not exist between them: the order must hold too.
    let mut named: Vec<PathBuf> = paths.clone();
    named.push(logs.path().join("missing.jsonl"));
    named.extend(paths.iter().rev().cloned());
    let sources = toolhost::stats::input::sources(&named);
    let one = toolhost::stats::Report::new(&toolhost::stats::input::read_all(&sources, 1)).to_json();
    assert_eq!(one["sessions"]["count"], 12);
    for threads in [2, 3, 5, 13] {
        let many = toolhost::stats::Report::new(&toolhost::stats::input::read_all(&sources, threads)).to_json();
        assert_eq!(many, one, "{threads} threads");
    }
}
