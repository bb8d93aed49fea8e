//! `toolhost mcp` as a client sees it, side by side with the reference server in one run:
//! - calls per second and median latency of a trivial tool through the official TypeScript SDK's
//!   client over stdio (tests/fixtures/mcp/bench-client.mjs): a Scheme `echo` served by `toolhost
//!   mcp` (its tools in a worker process, as by default, and with `--no-isolate`) against
//!   `server-everything`'s `echo` (target: toolhost at least as fast);
//! - the memory of `toolhost mcp` under a client that writes requests and never reads a reply: how
//!   many requests it read before it stopped reading, and the peak resident memory of the server and
//!   of its worker.
//!
//! Run with `cargo bench --bench mcp_server` (release build). Needs `node` and `npm`; the pinned
//! peers of tests/fixtures/mcp are installed with `npm ci` when missing.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

const ROUNDS: usize = 5;
const SEQUENTIAL: usize = 2_000;
const PIPELINED: usize = 5_000;
const WINDOW: usize = 32;

const ECHO_TOOL: &str = r#"(define-tool (echo (message string "The message to echo"))
  "Echo the message back."
  (string-append "Echo: " message))
"#;

fn peers() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp");
    if !dir.join("node_modules/@modelcontextprotocol/server-everything").is_dir() {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .stdout(Stdio::null())
            .status()
            .expect("npm runs (node and npm are needed for this bench)");
        assert!(status.success(), "npm ci in {} failed", dir.display());
    }
    dir
}

/// A home of its own, so nothing reads the user's config or trust store.
fn home_env(command: &mut Command, home: &Path) {
    command.env("HOME", home).env("XDG_CONFIG_HOME", home.join("xdg-config")).env_remove("STEEL_HOME");
}

struct Figures {
    median_ms: f64,
    p90_ms: f64,
    sequential_per_s: f64,
    pipelined_per_s: f64,
}

/// One bench-client session against `server` (a command and its arguments).
fn session(peers: &Path, dir: &Path, home: &Path, server: &[String]) -> (Figures, common::Run) {
    let out = dir.join("figures.json");
    let _ = std::fs::remove_file(&out);
    let mut command = Command::new("node");
    command
        .arg(peers.join("bench-client.mjs"))
        .arg(&out)
        .args([SEQUENTIAL.to_string(), PIPELINED.to_string(), WINDOW.to_string()])
        .args(["echo", r#"{"message": "hello"}"#])
        .args(server)
        .current_dir(dir);
    home_env(&mut command, home);
    let run = common::measure(&mut command);
    let figures: Value = serde_json::from_str(&std::fs::read_to_string(&out).expect("the client wrote its figures"))
        .expect("the figures are JSON");
    let get = |key: &str| figures[key].as_f64().expect("a number");
    let figures = Figures {
        median_ms: get("median_ms"),
        p90_ms: get("p90_ms"),
        sequential_per_s: get("sequential_per_s"),
        pipelined_per_s: get("pipelined_per_s"),
    };
    (figures, run)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

fn throughput(peers: &Path, dir: &Path, home: &Path) {
    let toolhost = env!("CARGO_BIN_EXE_toolhost").to_string();
    let tools = dir.join("tools").display().to_string();
    let everything = peers.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let servers: Vec<(&str, Vec<String>)> = vec![
        ("server-everything echo", vec!["node".into(), everything.display().to_string(), "stdio".into()]),
        ("toolhost mcp, Scheme echo (worker)", vec![toolhost.clone(), "--tools".into(), tools.clone(), "mcp".into()]),
        (
            "toolhost mcp, Scheme echo (--no-isolate)",
            vec![toolhost, "--no-isolate".into(), "--tools".into(), tools, "mcp".into()],
        ),
    ];
    let mut rounds: Vec<Vec<Figures>> = servers.iter().map(|_| Vec::new()).collect();
    for round in 0..ROUNDS {
        // Alternate the order, so neither side always runs on a warmer machine.
        let order: Vec<usize> =
            if round % 2 == 0 { (0..servers.len()).collect() } else { (0..servers.len()).rev().collect() };
        for at in order {
            let (figures, _) = session(peers, dir, home, &servers[at].1);
            rounds[at].push(figures);
        }
    }
    println!(
        "MCP over stdio, the SDK client, medians of {ROUNDS} rounds ({SEQUENTIAL} calls one at a time, \
         {PIPELINED} with {WINDOW} in flight):"
    );
    println!("{:<42} {:>10} {:>10} {:>14} {:>14}", "server", "median", "p90", "sequential/s", "pipelined/s");
    let mut summary = Vec::new();
    for ((name, _), figures) in servers.iter().zip(&rounds) {
        let pick = |f: fn(&Figures) -> f64| median(figures.iter().map(f).collect());
        let row =
            (pick(|f| f.median_ms), pick(|f| f.p90_ms), pick(|f| f.sequential_per_s), pick(|f| f.pipelined_per_s));
        println!("{name:<42} {:>8.3}ms {:>8.3}ms {:>14.0} {:>14.0}", row.0, row.1, row.2, row.3);
        summary.push(row);
    }
    let (anchor, worker) = (summary[0], summary[1]);
    println!(
        "target: toolhost at least as fast as server-everything. Worker: median latency {:.2}x, pipelined calls/s \
         {:.2}x of server-everything's",
        worker.0 / anchor.0,
        worker.3 / anchor.3
    );
}

/// The peak and current resident memory of `pid` in bytes (`VmHWM`, `VmRSS`).
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |kib| kib * 1024)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    tasks
        .filter_map(|t| t.ok())
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|text| text.split_whitespace().filter_map(|p| p.parse().ok()).collect::<Vec<u32>>())
        .collect()
}

/// `toolhost mcp` under a client that sends `sent` calls with 4 KB replies and never reads.
fn never_reading(dir: &Path, home: &Path, sent: usize) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolhost"));
    command.arg("mcp").current_dir(dir).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
    home_env(&mut command, home);
    let mut child = command.spawn().expect("toolhost starts");
    let mut input = child.stdin.take().expect("stdin");
    let mut output = BufReader::new(child.stdout.take().expect("stdout"));
    let line = |v: Value| format!("{v}\n");
    input
        .write_all(
            line(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
            "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}))
            .as_bytes(),
        )
        .expect("write");
    let mut answer = String::new();
    output.read_line(&mut answer).expect("the initialize answer");
    input.write_all(line(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).as_bytes()).expect("write");
    let (base_peak, _) = memory(child.id());
    let written = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&written);
    let writer = std::thread::spawn(move || {
        for n in 1..=sent {
            let call = line(json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                "params": {"name": "fs-read", "arguments": {"path": "4k.txt"}}}));
            if input.write_all(call.as_bytes()).is_err() {
                return;
            }
            count.store(n, Ordering::SeqCst);
        }
    });
    // Until the writes stall for 2 s (the server stopped reading), or all went through.
    let (mut last, mut still) = (0, 0);
    while last < sent && still < 10 {
        std::thread::sleep(Duration::from_millis(200));
        let now = written.load(Ordering::SeqCst);
        still = if now == last { still + 1 } else { 0 };
        last = now;
    }
    let (server_peak, server_now) = memory(child.id());
    let worker: (u64, u64) =
        children_of(child.id()).into_iter().map(memory).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    println!(
        "never-reading client, {sent} calls with 4 KB replies sent: {last} read before the server stopped reading; \
         server peak RSS {:.1} MB (at start {:.1} MB, now {:.1} MB), worker peak {:.1} MB",
        server_peak as f64 / 1e6,
        base_peak as f64 / 1e6,
        server_now as f64 / 1e6,
        worker.0 as f64 / 1e6
    );
    let _ = child.kill();
    let _ = child.wait();
    drop(output);
    let _ = writer.join();
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let peers = peers();
    let dir = tempfile::tempdir().expect("a temporary folder");
    let home = tempfile::tempdir().expect("a temporary home");
    std::fs::create_dir_all(dir.path().join("tools")).expect("tools folder");
    std::fs::write(dir.path().join("tools/echo.scm"), ECHO_TOOL).expect("echo tool");
    std::fs::write(dir.path().join("4k.txt"), "z".repeat(4000)).expect("4k file");
    throughput(&peers, dir.path(), home.path());
    for sent in [1_000, 16_000, 100_000] {
        never_reading(dir.path(), home.path(), sent);
    }
}
