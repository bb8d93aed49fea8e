//! `toolhost stats` over many session logs (issue 22's target): 1,000 generated logs of 100 calls
//! each read by the whole process in at most 2 s, and memory flat in the number of logs: the peak
//! resident memory for 100 logs against 1,000.
//!
//! The logs are written with the session log's own writer and types: per log a `session` line,
//! 50 turns of two calls each (every request carries the real tool catalogue, as the agent loop
//! sends it, and the messages added since the turn before), a call line per call with its full
//! record, and an `end` line. The calls mix what sessions hold: fs-read results of 60 lines,
//! shell-exec commands (reads through the shell among them) with their output, index-grep matches,
//! edits, tidied arguments and refusals. They are written once into a temporary folder
//! (`TOOLHOST_BENCH_DIR` to keep them elsewhere).
//!
//! Run with `cargo bench --bench stats` (release build).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{measure, Run};
use serde_json::{json, Value};
use toolhost::agent::{Entry, Message, SessionLog, ToolCall};
use toolhost::tidy::{Repair, RepairKind};
use toolhost::{CallRecord, CallRequest, Decision, Error, ErrorKind};

const LOGS: usize = 1_000;
const FEW_LOGS: usize = 100;
const TURNS: usize = 50;
const CALLS_PER_TURN: usize = 2;
const RUNS: usize = 5;

/// The machine's load average over the last minute (others' work shares the cores).
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_default()
}

fn median<T: Ord + Copy>(mut samples: Vec<T>) -> T {
    samples.sort();
    samples[samples.len() / 2]
}

fn stats(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolhost"));
    command.args(["stats", "--format", "json"]).arg(dir);
    command
}

fn fs_read_result(start: usize) -> String {
    let lines: String =
        (start..start + 60).map(|n| format!("{n}\t    let value = compute(input, {n}); // line {n}\n")).collect();
    format!("{lines}... 2,340 more lines; next start {}\n", start + 60)
}

const SHELL_COMMANDS: [&str; 8] = [
    "sed -n '120,180p' src/query.py",
    "cd src && grep -rn 'def get_queryset' . | head -20",
    "cargo test 2>&1 | tail -30",
    "cat setup.cfg",
    "python3 -c \"print(open('package.json').read()[:400])\"",
    "git status && git diff --stat",
    "ls -la src/ && find . -name '*.py' | wc -l",
    "pytest -x tests/test_query.py 2>&1 | tail -20",
];

/// The `i`-th call of a log: its request as the model sent it and the record the host made.
fn call(i: usize) -> (CallRequest, CallRecord) {
    let ok = |tool: &str, arguments: Value, result: Value, ms: u64| CallRecord {
        tool: tool.to_string(),
        arguments,
        tidied: None,
        notes: Vec::new(),
        repairs: Vec::new(),
        decision: Some(Decision::Allow { rule: None }),
        result: Ok(result),
        text: None,
        nested: None,
        elapsed: Duration::from_micros(ms * 100 + (i as u64 * 37) % 900),
    };
    let (tool, arguments, record) = match i % 10 {
        0..=3 => {
            let arguments = json!({"path": format!("src/file_{}.py", i % 17), "start": i * 3, "count": 60});
            ("fs-read", arguments.clone(), ok("fs-read", arguments, json!(fs_read_result(i * 3)), 3))
        }
        4..=6 => {
            let arguments = json!({"cmd": SHELL_COMMANDS[i % SHELL_COMMANDS.len()]});
            let output: String = (0..25).map(|n| format!("output line {n} of the command, with some text\n")).collect();
            (
                "shell-exec",
                arguments.clone(),
                ok("shell-exec", arguments, json!(format!("exit code: 0\n{output}")), 400),
            )
        }
        7 => {
            let arguments = json!({"pattern": "get_queryset", "glob": "*.py"});
            let matches: String =
                (0..20).map(|n| format!("src/models/m{n}.py:{}:    def get_queryset(self):\n", n * 7)).collect();
            ("index-grep", arguments.clone(), ok("index-grep", arguments, json!(matches), 20))
        }
        8 => {
            let received = json!({"path": "src/query.py", "start": "120", "count": "40"});
            let mut record = ok("fs-read", received.clone(), json!(fs_read_result(120)), 3);
            record.tidied = Some(json!({"path": "src/query.py", "start": 120, "count": 40}));
            record.notes = vec![
                "fs-read: argument \"start\" was a number written as a string; read as 120".into(),
                "fs-read: argument \"count\" was a number written as a string; read as 40".into(),
            ];
            record.repairs = ["start", "count"]
                .iter()
                .map(|p| Repair { kind: RepairKind::NumericString, parameter: Some(p.to_string()) })
                .collect();
            ("fs-read", received, record)
        }
        _ => {
            let arguments = json!({"path": "src/query.py", "limit": 50});
            let error = Error::new(
                ErrorKind::UnknownArgument,
                "fs-read has no parameter \"limit\"; its parameters are path, start, count",
            )
            .with_tool("fs-read")
            .with_parameter("limit");
            let mut record = ok("fs-read", arguments.clone(), Value::Null, 0);
            record.decision = None;
            record.result = Err(error);
            ("fs-read", arguments, record)
        }
    };
    (CallRequest::new(tool, arguments.to_string()), record)
}

/// Writes one log of `TURNS * CALLS_PER_TURN` calls.
fn write_log(path: &Path, catalogue: &Value, n: usize) {
    let mut log = SessionLog::create(path).expect("create the log");
    let mut write = |entry: Entry| log.write(&entry).expect("write the log");
    write(Entry::Session {
        version: toolhost::agent::log::LOG_VERSION,
        toolhost: "0.1.0".into(),
        dialect: toolhost::agent::Dialect::Native,
        strict: false,
        tools: toolhost::code_mode::ToolsAs::Json,
        max_turns: 100,
        model: json!({"model": "bench-model", "base_url": "http://127.0.0.1:8080/v1"}),
        task: format!("Fix issue {n} in the query module."),
        instructions: Vec::new(),
        resumes: None,
    });
    let mut messages = vec![
        Message::System(toolhost::agent::DEFAULT_SYSTEM_PROMPT.into()).to_json(),
        Message::User(format!("Fix issue {n} in the query module.")).to_json(),
    ];
    let mut before = 0;
    for turn in 1..=TURNS {
        write(Entry::Request {
            turn,
            tools: Some(catalogue.clone()),
            messages_before: before,
            messages: messages.clone(),
        });
        before += messages.len();
        let calls: Vec<(String, CallRequest, CallRecord)> = (0..CALLS_PER_TURN)
            .map(|k| {
                let (request, record) = call(turn * CALLS_PER_TURN + k + n);
                (format!("call_{turn}_{k}"), request, record)
            })
            .collect();
        let tool_calls: Vec<ToolCall> = calls
            .iter()
            .map(|(id, request, _)| ToolCall {
                id: id.clone(),
                name: request.tool.clone(),
                arguments: request.arguments.clone(),
            })
            .collect();
        write(Entry::Reply {
            turn,
            text: None,
            tool_calls: tool_calls.iter().map(ToolCall::to_json).collect(),
            finish_reason: Some("tool_calls".into()),
            usage: Some(toolhost::agent::Usage { input_tokens: 4000, output_tokens: 120, cached_tokens: Some(3000) }),
        });
        messages = vec![Message::Assistant { content: None, tool_calls }.to_json()];
        for (index, (id, request, record)) in calls.into_iter().enumerate() {
            messages.push(Message::Tool { tool_call_id: id.clone(), content: record.model_text() }.to_json());
            write(Entry::Call {
                turn,
                index: index + 1,
                id,
                request: Some(request),
                record: Box::new(record),
                interrupted: false,
            });
        }
    }
    write(Entry::End { reason: "answered".into(), turns: TURNS, answer: Some("Fixed.".into()), error: None });
}

/// The folder of `count` logs under `base`, written unless already there.
fn logs(base: &Path, catalogue: &Value, count: usize) -> PathBuf {
    let dir = base.join(format!("stats-{count}-logs-{TURNS}x{CALLS_PER_TURN}"));
    let done = dir.join(".complete");
    if !done.exists() {
        std::fs::create_dir_all(&dir).expect("the logs folder");
        for n in 0..count {
            write_log(&dir.join(format!("session-{n:04}.jsonl")), catalogue, n);
        }
        std::fs::write(&done, "").expect("mark the logs complete");
    }
    dir
}

fn folder_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir).expect("read the folder").filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum()
}

fn main() {
    let base = std::env::var_os("TOOLHOST_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    // The catalogue as `toolhost tools` prints it, from a process of its own: a host built here
    // would stay in this process's memory, which the children measured below start from.
    let scratch = tempfile::tempdir().expect("a workspace");
    let tools = Command::new(env!("CARGO_BIN_EXE_toolhost")).arg("tools").current_dir(scratch.path()).output();
    let catalogue: Value = serde_json::from_slice(&tools.expect("toolhost tools runs").stdout).expect("the catalogue");

    let started = Instant::now();
    let many = logs(&base, &catalogue, LOGS);
    let few = logs(&base, &catalogue, FEW_LOGS);
    println!(
        "logs: {LOGS} and {FEW_LOGS} logs of {} calls ({TURNS} turns), {:.0} MB and {:.0} MB (ready in {:.1} s)",
        TURNS * CALLS_PER_TURN,
        folder_bytes(&many) as f64 / 1e6,
        folder_bytes(&few) as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );

    // The report is right before it is timed.
    let out = stats(&many).output().expect("toolhost stats runs");
    let report: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    assert_eq!(report["calls"]["total"], (LOGS * TURNS * CALLS_PER_TURN) as u64, "every call counted");
    assert_eq!(report["sessions"]["count"], LOGS as u64);
    assert_eq!(report["inputs"]["skipped"]["total"], 0);

    let (mut many_runs, mut few_runs) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        many_runs.push(measure(&mut stats(&many)));
        few_runs.push(measure(&mut stats(&few)));
    }
    let of = |runs: &[Run], f: fn(&Run) -> Duration| median(runs.iter().map(f).collect());
    let (wall, cpu) = (of(&many_runs, |r| r.wall), of(&many_runs, |r| r.cpu));
    let peak = |runs: &[Run]| median(runs.iter().map(|r| r.peak).collect());
    let (peak_many, peak_few) = (peak(&many_runs), peak(&few_runs));
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "toolhost stats, {LOGS} logs: {:.2} s wall (target: at most 2 s), {:.2} s CPU on {threads} threads \
         ({:.0} MB/s of CPU; load average {}); {FEW_LOGS} logs: {:.2} s wall, {:.2} s CPU",
        wall.as_secs_f64(),
        cpu.as_secs_f64(),
        folder_bytes(&many) as f64 / 1e6 / cpu.as_secs_f64(),
        load(),
        of(&few_runs, |r| r.wall).as_secs_f64(),
        of(&few_runs, |r| r.cpu).as_secs_f64(),
    );
    println!(
        "peak memory: {FEW_LOGS} logs {:.1} MB, {LOGS} logs {:.1} MB: {:.2}x for 10x the logs (target: flat)",
        peak_few as f64 / 1e6,
        peak_many as f64 / 1e6,
        peak_many as f64 / peak_few as f64
    );
}
