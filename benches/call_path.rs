//! The in-process call path (design section 14), each figure measured side by side with its anchor
//! in one run, as the median of alternating rounds:
//! - a JSON call of a trivial Rust tool through the whole path (tidy, convert, guard, call, result
//!   to JSON) against a direct `serde_json` decode into a struct plus the same call plus encoding
//!   the result (target: at most 3x);
//! - a JSON call of a trivial Scheme `define-tool` that adds two integers (target: at most 1.5 µs);
//! - the same Scheme tool called from a Scheme loop, against `+` in the same loop;
//! - isolation (design section 18): a JSON call of `fs-read` through a worker process, as the
//!   agent loop and the MCP server make it, against the same call in process (target: at most
//!   50 µs more).
//!
//! Run with `cargo bench --bench call_path` (release build). For a profile of one path alone,
//! `cargo bench --bench call_path -- --only rust` (or `scheme`, `loop`) runs just that path for a
//! few seconds, e.g. under `perf record -g`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use toolhost::{HostBuilder, Tool, ToolCtx};

const ROUNDS: usize = 11;
const CALLS: usize = 20_000;

#[derive(serde::Deserialize)]
struct AddArgs {
    a: i64,
    b: i64,
}

fn add(_ctx: &ToolCtx, a: i64, b: i64) -> i64 {
    a + b
}

/// The result as JSON text, as the anchor encodes its result.
fn result_text(record: toolhost::CallRecord) -> String {
    serde_json::to_string(&record.result.expect("the call works")).expect("encode")
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn per_call(total: Duration, calls: usize) -> f64 {
    total.as_secs_f64() * 1e6 / calls as f64
}

/// A call through a `toolhost worker` process against the same call in process.
fn isolation_figures(dir: &std::path::Path) {
    const ISOLATED_CALLS: usize = 2_000;
    std::fs::write(dir.join("a.txt"), "one\ntwo\nthree\n").expect("file");
    let root = dir.display().to_string();
    let spec =
        toolhost::worker::WorkerSpec::new(env!("CARGO_BIN_EXE_toolhost"), vec!["--root".into(), root, "worker".into()]);
    let worker = toolhost::HostHandle::spawn_worker(spec).expect("worker");
    let mut host = HostBuilder::new(dir).build().expect("host");
    let arguments = r#"{"path": "a.txt", "count": 2}"#;
    assert_eq!(worker.call("fs-read", arguments).result, host.call_json("fs-read", arguments).result);
    let (mut isolated, mut here) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let start = Instant::now();
        for _ in 0..ISOLATED_CALLS {
            black_box(result_text(worker.call("fs-read", black_box(arguments))));
        }
        isolated.push(start.elapsed());
        let start = Instant::now();
        for _ in 0..ISOLATED_CALLS {
            black_box(result_text(host.call_json("fs-read", black_box(arguments))));
        }
        here.push(start.elapsed());
    }
    let (isolated, here) = (per_call(median(isolated), ISOLATED_CALLS), per_call(median(here), ISOLATED_CALLS));
    println!("isolation, median of {ROUNDS} alternating rounds of {ISOLATED_CALLS} fs-read calls:");
    println!("  in process:                            {here:>8.2} µs/call");
    println!("  through a worker process:              {isolated:>8.2} µs/call");
    println!("  overhead:                              {:>8.2} µs/call (target: at most 50)", isolated - here);
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("call_path: bench");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let tools = dir.path().join("tools");
    std::fs::create_dir(&tools).expect("tools folder");
    std::fs::write(
        tools.join("add.scm"),
        "(define-tool (sadd (a integer \"A\") (b integer \"B\")) \"Add.\" (+ a b))\n",
    )
    .expect("tool file");
    let tool = Tool::new("add", "Add two integers.").param("a", "A").param("b", "B").build(add).expect("tool");
    let mut host = HostBuilder::new(dir.path()).tool(tool).tool_dir(&tools).build().expect("host");
    let ctx = ToolCtx::new(host.workspace().clone(), host.limits().clone());
    let arguments = r#"{"a": 40, "b": 2}"#;
    assert_eq!(host.call_json("add", arguments).result.expect("add works"), serde_json::json!(42));
    assert_eq!(host.call_json("sadd", arguments).result.expect("sadd works"), serde_json::json!(42));

    let args: Vec<String> = std::env::args().collect();
    if let Some(only) = args.iter().position(|a| a == "--only").and_then(|i| args.get(i + 1)) {
        let tool_loop = format!("(let loop ([i 0] [s 0]) (if (< i {CALLS}) (loop (+ i 1) (sadd s 1)) s))");
        for _ in 0..100 {
            for _ in 0..CALLS {
                match only.as_str() {
                    "rust" => drop(black_box(result_text(host.call_json("add", black_box(arguments))))),
                    "scheme" => drop(black_box(result_text(host.call_json("sadd", black_box(arguments))))),
                    _ => break,
                }
            }
            if only == "loop" {
                black_box(host.eval(&tool_loop).expect("loop"));
            }
        }
        return;
    }
    let (mut direct, mut rust, mut scheme, mut parse) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut loop_tool, mut loop_plus) = (Vec::new(), Vec::new());
    let loop_of = |call: &str| format!("(let loop ([i 0] [s 0]) (if (< i {CALLS}) (loop (+ i 1) ({call} s 1)) s))");
    let (tool_loop, plus_loop) = (loop_of("sadd"), loop_of("+"));
    for _ in 0..ROUNDS {
        let start = Instant::now();
        for _ in 0..CALLS {
            let parsed: AddArgs = serde_json::from_str(black_box(arguments)).expect("decode");
            let result = add(&ctx, parsed.a, parsed.b);
            black_box(serde_json::to_string(&result).expect("encode"));
        }
        direct.push(start.elapsed());

        let start = Instant::now();
        for _ in 0..CALLS {
            black_box(serde_json::from_str::<serde_json::Value>(black_box(arguments)).expect("decode"));
        }
        parse.push(start.elapsed());

        let start = Instant::now();
        for _ in 0..CALLS {
            black_box(result_text(host.call_json("add", black_box(arguments))));
        }
        rust.push(start.elapsed());

        let start = Instant::now();
        for _ in 0..CALLS {
            black_box(result_text(host.call_json("sadd", black_box(arguments))));
        }
        scheme.push(start.elapsed());

        let start = Instant::now();
        black_box(host.eval(&tool_loop).expect("loop"));
        loop_tool.push(start.elapsed());
        let start = Instant::now();
        black_box(host.eval(&plus_loop).expect("loop"));
        loop_plus.push(start.elapsed());
    }
    let (direct, rust, scheme, parse) = (median(direct), median(rust), median(scheme), median(parse));
    let (loop_tool, loop_plus) = (median(loop_tool), median(loop_plus));
    println!("call path, median of {ROUNDS} alternating rounds of {CALLS} calls:");
    println!("  direct serde decode + call + encode:  {:>8.3} µs/call", per_call(direct, CALLS));
    println!(
        "  decode into serde_json::Value alone:   {:>8.3} µs/call (the record keeps the arguments so)",
        per_call(parse, CALLS)
    );
    println!("  JSON call of a Rust tool:              {:>8.3} µs/call", per_call(rust, CALLS));
    println!(
        "  ratio Rust tool / direct:              {:>8.2}   (target: at most 3)",
        rust.as_secs_f64() / direct.as_secs_f64()
    );
    println!("  JSON call of a Scheme define-tool:     {:>8.3} µs/call (target: at most 1.5)", per_call(scheme, CALLS));
    println!("  Scheme loop calling the Scheme tool:   {:>8.3} µs/call", per_call(loop_tool, CALLS));
    println!("  Scheme loop calling +:                 {:>8.3} µs/call", per_call(loop_plus, CALLS));
    println!("  ratio tool / + in a Scheme loop:       {:>8.2}", loop_tool.as_secs_f64() / loop_plus.as_secs_f64());
    isolation_figures(dir.path());
}
