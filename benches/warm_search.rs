//! Warm search (design section 14, "the moonshot"): the tenth index-grep of a pattern in one host,
//! answered from the trigram index, against `rg` doing the same work as a whole process, run
//! alternately in one session (target: at least 5x faster). Also the index's build time and its
//! memory against the text it indexes.
//!
//! The host is built in process on the cargo registry's unpacked sources (`~/.cargo/registry/src`),
//! or the folder in `TOOLHOST_BENCH_TREE`. Run with `cargo bench --bench warm_search` (release
//! build; needs `rg` on the PATH).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolhost::{Host, HostBuilder};

const PATTERNS: &[&str] = &["fn [a-z_]+_unchecked", "impl.*Iterator for", "TODO", "(?i)unsafe fn", "std::sync::Arc"];
/// Rounds of (ten queries in the host, one rg run) per pattern; medians are shown.
const ROUNDS: usize = 5;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

fn grep(host: &mut Host, pattern: &str) -> String {
    match host.call("index-grep", json!({"pattern": pattern})).result {
        Ok(Value::String(text)) => text,
        other => panic!("index-grep {pattern:?} failed: {other:?}"),
    }
}

fn rg(tree: &Path, pattern: &str) -> Duration {
    let start = Instant::now();
    let status = Command::new("rg")
        .args(["-n", "--no-require-git", "--sort", "path", "--no-heading", pattern])
        .current_dir(tree)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("rg starts");
    let elapsed = start.elapsed();
    assert!(status.code().is_some_and(|c| c <= 1), "rg {pattern:?} failed: {status}");
    elapsed
}

fn figures(tree: &Path) {
    let mut host = HostBuilder::new(tree).build().expect("a host on the tree");
    let start = Instant::now();
    grep(&mut host, PATTERNS[0]);
    let cold = start.elapsed();
    let start = Instant::now();
    assert!(host.search_index().wait_ready(Duration::from_secs(600)), "{:?}", host.search_index().stats());
    let build = start.elapsed();
    let stats = host.search_index().stats();
    println!("warm index-grep over {}:", tree.display());
    println!("  first (cold) query in process:  {:>8.1} ms", ms(cold));
    println!("  index build after it:           {:>8.1} ms (background, low priority)", ms(build));
    println!(
        "  index: {} files, {:.1} MB of text; {:.1} MB in memory ({:.1} MB posting lists), {:.2}x the text; {} watches",
        stats.files,
        mb(stats.text_bytes),
        mb(stats.index_bytes),
        mb(stats.postings_bytes),
        stats.index_bytes as f64 / stats.text_bytes.max(1) as f64,
        stats.watches
    );
    println!(
        "  {:<24} {:>12} {:>12} {:>8}   (medians of {ROUNDS}; target: at least 5x)",
        "pattern", "10th query", "rg", "ratio"
    );
    for pattern in PATTERNS {
        let (mut tenth, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let mut last = Duration::ZERO;
            for _ in 0..10 {
                let start = Instant::now();
                grep(&mut host, pattern);
                last = start.elapsed();
            }
            tenth.push(last);
            theirs.push(rg(tree, pattern));
        }
        let (ours, theirs) = (median(tenth), median(theirs));
        println!(
            "  {:<24} {:>9.2} ms {:>9.1} ms {:>7.1}x",
            format!("{pattern:?}"),
            ms(ours),
            ms(theirs),
            theirs.as_secs_f64() / ours.as_secs_f64()
        );
    }
    assert_eq!(host.search_index().stats().state, "ready", "the index gave up during the run");
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("warm_search: bench");
        return;
    }
    common::with_tree_and_rg("warm search", figures);
}
