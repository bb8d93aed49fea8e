//! Start-up: `toolhost eval "(+ 1 2)"` (every built-in tool, the prelude and the shipped Scheme
//! tools loaded) against a bare steel program that builds `Engine::new()` and evaluates the same
//! expression (design section 14: at most 0.5x). Both are whole processes, run alternately in one
//! session so machine noise hits both alike.
//!
//! Run with `cargo bench --bench startup` (release build).

use std::process::Command;
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

fn median(mut samples: Vec<Duration>) -> Duration {
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
    let (bare, host) = (median(bare), median(host));
    println!("start-up, median of {RUNS} whole-process runs each:");
    println!("  bare steel Engine::new() + (+ 1 2): {:>8.1} ms", bare.as_secs_f64() * 1e3);
    println!("  toolhost eval \"(+ 1 2)\":            {:>8.1} ms", host.as_secs_f64() * 1e3);
    println!("  ratio toolhost / bare: {:.2} (target: at most 0.50)", host.as_secs_f64() / bare.as_secs_f64());
}
