//! The in-process call path (design section 14), each figure measured side by side with its anchor
//! in one run, as the median of alternating rounds:
//! - a JSON call of a trivial Rust tool through the whole path (tidy, convert, guard, call, result
//!   to JSON) against a direct `serde_json` decode into a struct plus the same call plus encoding
//!   the result (target: at most 3x);
//! - a JSON call of a trivial Scheme `define-tool` that adds two integers (target: at most 1.5 µs);
//! - the same Scheme tool called from a Scheme loop, against `+` in the same loop.
//!
//! Run with `cargo bench --bench call_path` (release build).

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

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn per_call(total: Duration, calls: usize) -> f64 {
    total.as_secs_f64() * 1e6 / calls as f64
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
    let ctx = ToolCtx {
        workspace: host.workspace().clone(),
        limits: host.limits().clone(),
        cancel: Default::default(),
        search: Default::default(),
    };
    let arguments = r#"{"a": 40, "b": 2}"#;
    assert_eq!(host.call_json("add", arguments).result.expect("add works"), serde_json::json!(42));
    assert_eq!(host.call_json("sadd", arguments).result.expect("sadd works"), serde_json::json!(42));

    let (mut direct, mut rust, mut scheme) = (Vec::new(), Vec::new(), Vec::new());
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
            black_box(host.call_json("add", black_box(arguments)).to_json());
        }
        rust.push(start.elapsed());

        let start = Instant::now();
        for _ in 0..CALLS {
            black_box(host.call_json("sadd", black_box(arguments)).to_json());
        }
        scheme.push(start.elapsed());

        let start = Instant::now();
        black_box(host.eval(&tool_loop).expect("loop"));
        loop_tool.push(start.elapsed());
        let start = Instant::now();
        black_box(host.eval(&plus_loop).expect("loop"));
        loop_plus.push(start.elapsed());
    }
    let (direct, rust, scheme) = (median(direct), median(rust), median(scheme));
    let (loop_tool, loop_plus) = (median(loop_tool), median(loop_plus));
    println!("call path, median of {ROUNDS} alternating rounds of {CALLS} calls:");
    println!("  direct serde decode + call + encode:  {:>8.3} µs/call", per_call(direct, CALLS));
    println!("  JSON call of a Rust tool:              {:>8.3} µs/call", per_call(rust, CALLS));
    println!(
        "  ratio Rust tool / direct:              {:>8.2}   (target: at most 3)",
        rust.as_secs_f64() / direct.as_secs_f64()
    );
    println!("  JSON call of a Scheme define-tool:     {:>8.3} µs/call (target: at most 1.5)", per_call(scheme, CALLS));
    println!("  Scheme loop calling the Scheme tool:   {:>8.3} µs/call", per_call(loop_tool, CALLS));
    println!("  Scheme loop calling +:                 {:>8.3} µs/call", per_call(loop_plus, CALLS));
    println!("  ratio tool / + in a Scheme loop:       {:>8.2}", loop_tool.as_secs_f64() / loop_plus.as_secs_f64());
}
