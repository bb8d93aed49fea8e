//! What the whole-process benches share: the large real tree they search, and whether `rg` (the
//! anchor) is there to compare with, and how one whole-process run is measured.

// Each bench uses the part it needs.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The tree to search: `TOOLHOST_BENCH_TREE`, else the cargo registry's unpacked sources.
pub fn search_tree() -> Option<PathBuf> {
    std::env::var_os("TOOLHOST_BENCH_TREE").map(PathBuf::from).or_else(|| {
        let home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
        let src = home.join("registry/src");
        src.is_dir().then_some(src)
    })
}

/// Runs `figures` on the search tree when there is one and `rg` is on the PATH; else says why
/// `what` was skipped.
pub fn with_tree_and_rg(what: &str, figures: impl FnOnce(&std::path::Path)) {
    match search_tree() {
        Some(tree) if Command::new("rg").arg("--version").output().is_ok() => figures(&tree),
        Some(_) => println!("{what}: skipped, `rg` is not on the PATH (apt-get install ripgrep)"),
        None => println!("{what}: skipped; set TOOLHOST_BENCH_TREE to a large source tree"),
    }
}

/// What one whole-process run took.
pub struct Run {
    /// Wall time.
    pub wall: Duration,
    /// User and system CPU time.
    pub cpu: Duration,
    /// Peak resident memory, in bytes.
    pub peak: u64,
}

/// Runs a command to its end and measures it (from wait4, which also reaps the child: clippy
/// cannot see that).
#[allow(clippy::zombie_processes)]
pub fn measure(command: &mut Command) -> Run {
    let start = Instant::now();
    let child = command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("the command starts");
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 waits for the child this function started and fills `usage`.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    let elapsed = start.elapsed();
    assert_eq!(pid, child.id() as i32, "wait4");
    assert_eq!(status, 0, "{command:?} failed");
    let time = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    Run { wall: elapsed, cpu: time(usage.ru_utime) + time(usage.ru_stime), peak: usage.ru_maxrss as u64 * 1024 }
}
