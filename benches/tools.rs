//! Whole-process figures of the built-in tools (design section 14), each against its anchor's own
//! command, run alternately in one session, medians of several runs:
//! - fs-read of 50 lines near the top of a 1 GiB file against the same read of a 1 MiB file
//!   (target: at most 1.2x), and 50 lines at line 10,000,000 against `tail -n +N | head -n 50`
//!   (target: at most 1.0x);
//! - index-grep over a large real tree against `rg` doing the same work (sorted `path:line:text`
//!   lines), time (target: at most 1.0x) and peak memory (target: at most 1.5x).
//!
//! Both go through `toolhost call` as users run it. The tree is the cargo registry's unpacked
//! sources (`~/.cargo/registry/src`), or the folder in `TOOLHOST_BENCH_TREE`. The big file is made
//! once in the temporary folder (`TOOLHOST_BENCH_DIR` to keep it elsewhere).
//!
//! Run with `cargo bench --bench tools` (release build; needs `rg` on the PATH for the search).

mod common;

use common::measure;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const RUNS: usize = 7;

fn median<T: Ord + Copy>(mut samples: Vec<T>) -> T {
    samples.sort();
    samples[samples.len() / 2]
}

fn shell(script: &str) -> Command {
    let mut command = Command::new("sh");
    command.args(["-c", script]);
    command
}

fn toolhost(root: &Path, tool: &str, arguments: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolhost"));
    command.args(["--root", &root.display().to_string(), "call", tool, arguments]);
    command
}

/// A file of `lines` numbered lines of about 100 bytes each.
fn big_file(path: &Path, lines: u64) {
    if path.metadata().is_ok_and(|m| m.len() > 0) {
        return;
    }
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    for n in 1..=lines {
        writeln!(out, "{n:>10} the quick brown fox jumps over the lazy dog, again and again and again").expect("write");
    }
    out.flush().expect("flush");
}

fn fs_read_figures(dir: &Path) {
    let (huge, small) = (dir.join("huge.txt"), dir.join("small.txt"));
    big_file(&huge, 12_000_000);
    big_file(&small, 10_000);
    let mut top_huge = Vec::new();
    let mut top_small = Vec::new();
    let mut deep = Vec::new();
    let mut tail = Vec::new();
    let quoted = huge.display().to_string().replace('\'', r"'\''");
    for _ in 0..RUNS {
        top_huge
            .push(measure(&mut toolhost(dir, "fs-read", r#"{"path": "huge.txt", "start": 100, "count": 50}"#)).wall);
        top_small
            .push(measure(&mut toolhost(dir, "fs-read", r#"{"path": "small.txt", "start": 100, "count": 50}"#)).wall);
        deep.push(
            measure(&mut toolhost(dir, "fs-read", r#"{"path": "huge.txt", "start": 10000000, "count": 50}"#)).wall,
        );
        tail.push(measure(&mut shell(&format!("tail -n +10000000 '{quoted}' | head -n 50"))).wall);
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (top_huge, top_small, deep, tail) = (median(top_huge), median(top_small), median(deep), median(tail));
    println!(
        "fs-read, median of {RUNS} whole-process runs each ({} MB file):",
        huge.metadata().map_or(0, |m| m.len()) / 1_000_000
    );
    println!("  50 lines near the top, big file:     {:>8.1} ms", ms(top_huge));
    println!("  50 lines near the top, 1 MiB file:   {:>8.1} ms", ms(top_small));
    println!("  ratio big / small:                   {:>8.2}   (target: at most 1.2)", ms(top_huge) / ms(top_small));
    println!("  50 lines at line 10,000,000:         {:>8.1} ms", ms(deep));
    println!("  tail -n +N | head -n 50:             {:>8.1} ms", ms(tail));
    println!("  ratio fs-read / tail|head:           {:>8.2}   (target: at most 1.0)", ms(deep) / ms(tail));
}

fn index_grep_figures(tree: &Path) {
    let pattern = "fn [a-z_]+_unchecked";
    let arguments = serde_json::json!({"pattern": pattern}).to_string();
    let quoted = tree.display().to_string().replace('\'', r"'\''");
    // rg doing the same work: line numbers, sorted by path, no hidden or ignored files.
    let rg = format!("cd '{quoted}' && rg -n --no-require-git --sort path --no-heading '{pattern}' > /dev/null");
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        ours.push(measure(&mut toolhost(tree, "index-grep", &arguments)));
        theirs.push(measure(&mut shell(&rg)));
    }
    let time = |v: &[common::Run]| median(v.iter().map(|m| m.wall).collect());
    let memory = |v: &[common::Run]| median(v.iter().map(|m| m.peak).collect());
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("index-grep {pattern:?} over {}, median of {RUNS} whole-process runs each:", tree.display());
    println!("  toolhost call index-grep:  {:>8.1} ms  {:>6.1} MB peak", ms(time(&ours)), memory(&ours) as f64 / 1e6);
    println!(
        "  rg -n --sort path:         {:>8.1} ms  {:>6.1} MB peak",
        ms(time(&theirs)),
        memory(&theirs) as f64 / 1e6
    );
    println!("  ratio time:   {:>6.2} (target: at most 1.0)", ms(time(&ours)) / ms(time(&theirs)));
    println!("  ratio memory: {:>6.2} (target: at most 1.5)", memory(&ours) as f64 / memory(&theirs) as f64);
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("tools: bench");
        return;
    }
    let dir = std::env::var_os("TOOLHOST_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("toolhost-bench"));
    std::fs::create_dir_all(&dir).expect("bench folder");
    fs_read_figures(&dir);
    common::with_tree_and_rg("index-grep", index_grep_figures);
}
