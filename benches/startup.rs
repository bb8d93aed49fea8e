//! Start-up: `toolhost eval "(+ 1 2)"` (every built-in tool, the prelude and the shipped Scheme
//! tools loaded) against a bare steel program that builds `Engine::new()` and evaluates the same
//! expression (design section 14: at most 0.2x); and the peak memory of the REPL answering that
//! expression against the same bare program's (at most 1.5x). Both are whole processes, run
//! alternately in one session so machine noise hits both alike. Also `toolhost eval "(+ 1 2)"` with
//! one `[[mcp]]` server configured whose tool list is kept, against none (issue 19: at most 1.2x:
//! a command that calls no MCP tool starts no server).
//!
//! Run with `cargo bench --bench startup` (release build).

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 21;

fn bare_engine() {
    let mut engine = steel::steel_vm::engine::Engine::new();
    match engine.run("(+ 1 2)") {
        Ok(values) => println!("{}", values.last().map(|v| v.to_string()).unwrap_or_default()),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}

fn time(command: &mut Command) -> Duration {
    let start = Instant::now();
    let output = command.output().expect("the program starts");
    let elapsed = start.elapsed();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "3");
    elapsed
}

/// Peak resident memory of a whole process (from wait4, which also reaps the child: clippy cannot
/// see that), given `input` on its standard input.
#[allow(clippy::zombie_processes)]
fn peak_memory(command: &mut Command, input: &str) -> u64 {
    let mut child =
        command.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("the program starts");
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.as_bytes()).expect("input");
    }
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 waits for the child this function started and fills `usage`.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32, "wait4");
    assert_eq!(status, 0, "{command:?} failed");
    usage.ru_maxrss as u64 * 1024
}

fn median<T: Ord + Copy>(mut samples: Vec<T>) -> T {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--bare-engine") {
        return bare_engine();
    }
    if std::env::args().any(|a| a == "--list") {
        println!("startup: bench");
        return;
    }
    let workspace = tempfile::tempdir().expect("tempdir");
    let steel_home = workspace.path().join(".steel");
    let me = std::env::current_exe().expect("own path");
    let toolhost = env!("CARGO_BIN_EXE_toolhost");
    let (mut bare, mut host) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        bare.push(time(Command::new(&me).arg("--bare-engine").env("STEEL_HOME", &steel_home)));
        host.push(time(
            Command::new(toolhost)
                .args(["eval", "(+ 1 2)"])
                .current_dir(workspace.path())
                .env("STEEL_HOME", &steel_home),
        ));
    }
    let (mut bare_memory, mut repl_memory) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        bare_memory.push(peak_memory(Command::new(&me).arg("--bare-engine").env("STEEL_HOME", &steel_home), ""));
        repl_memory.push(peak_memory(
            Command::new(toolhost).arg("repl").current_dir(workspace.path()).env("STEEL_HOME", &steel_home),
            "(+ 1 2)\n",
        ));
    }
    let (bare, host) = (median(bare), median(host));
    let (bare_memory, repl_memory) = (median(bare_memory) as f64 / 1e6, median(repl_memory) as f64 / 1e6);
    println!("start-up, median of {RUNS} whole-process runs each:");
    println!("  bare steel Engine::new() + (+ 1 2): {:>8.1} ms", bare.as_secs_f64() * 1e3);
    println!("  toolhost eval \"(+ 1 2)\":            {:>8.1} ms", host.as_secs_f64() * 1e3);
    println!("  ratio toolhost / bare: {:.2} (target: at most 0.2)", host.as_secs_f64() / bare.as_secs_f64());
    println!("peak memory, median of 5 whole-process runs each:");
    println!("  bare steel program:                 {bare_memory:>8.1} MB");
    println!("  toolhost repl answering (+ 1 2):    {repl_memory:>8.1} MB");
    println!("  ratio REPL / bare: {:.2} (target: at most 1.5)", repl_memory / bare_memory);
    mcp_server_configured(toolhost, workspace.path(), &steel_home);
}

/// `toolhost eval "(+ 1 2)"` with one `[[mcp]]` server (the tests' fixture server) configured and
/// its tool list kept from a first run, against the same with none. Needs node and the test peers
/// (`npm ci` in tests/fixtures/mcp, which the MCP tests run); skipped without them.
fn mcp_server_configured(toolhost: &str, workspace: &std::path::Path, steel_home: &std::path::Path) {
    let peers = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp");
    if !peers.join("node_modules").is_dir() {
        println!("mcp start-up: skipped (run the MCP tests once to install tests/fixtures/mcp)");
        return;
    }
    let script = serde_json::Value::String(peers.join("fixture-server.mjs").display().to_string());
    let with = workspace.join("with-mcp.toml");
    let without = workspace.join("without-mcp.toml");
    std::fs::write(&with, format!("[[mcp]]\nname = \"fixture\"\ncommand = \"node\"\nargs = [{script}]\n"))
        .expect("config");
    std::fs::write(&without, "").expect("config");
    // A home of its own: the kept tool list goes there, not into the user's cache.
    let home = tempfile::tempdir().expect("tempdir");
    let eval = |config: &std::path::Path| {
        time(
            Command::new(toolhost)
                .arg("--config")
                .arg(config)
                .args(["eval", "(+ 1 2)"])
                .current_dir(workspace)
                .env("STEEL_HOME", steel_home)
                .env("HOME", home.path())
                .env("XDG_CONFIG_HOME", home.path().join("config"))
                .env("XDG_CACHE_HOME", home.path().join("cache")),
        )
    };
    let first = eval(&with);
    let (mut none, mut one) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        none.push(eval(&without));
        one.push(eval(&with));
    }
    let (none, one) = (median(none), median(one));
    println!("toolhost eval \"(+ 1 2)\" and [[mcp]] servers, median of {RUNS} runs each:");
    println!("  no server configured:               {:>8.1} ms", none.as_secs_f64() * 1e3);
    println!("  one server, its tool list kept:     {:>8.1} ms", one.as_secs_f64() * 1e3);
    println!("  (the first run, which starts it:    {:>8.1} ms)", first.as_secs_f64() * 1e3);
    println!("  ratio one / none: {:.2} (target: at most 1.2)", one.as_secs_f64() / none.as_secs_f64());
}
