//! A child process's standard error, relayed line by line to ours, with its last lines kept to say
//! why the child died. It owns that relay; starting the child and reading its exit status are the
//! worker's (`crate::worker`).
//!
//! The relay writes with `eprint!`, not to descriptor 2 directly: a person still sees what a crashing
//! worker printed (`thread 'main' has overflowed its stack`), and a test harness that captures output
//! captures this too (a thread inherits the capture of the thread that started it), so `cargo test`
//! stays quiet while tests crash workers on purpose.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How many of the last lines are kept.
const KEPT_LINES: usize = 3;
/// The longest line relayed whole; a longer one is relayed in pieces of this size.
const LONGEST_LINE: u64 = 64 * 1024;
/// The most of a line kept for a crash message, in characters.
const KEPT_CHARS: usize = 300;

#[derive(Default)]
struct Seen {
    last: VecDeque<String>,
    ended: bool,
}

/// The relay of one child's standard error; see the module docs.
pub(crate) struct StderrRelay {
    seen: Arc<(Mutex<Seen>, Condvar)>,
}

impl StderrRelay {
    /// Starts relaying what `stderr` (the child's standard error, piped) carries, until it ends.
    pub(crate) fn start(stderr: impl Read + Send + 'static) -> StderrRelay {
        let seen = Arc::new((Mutex::new(Seen::default()), Condvar::new()));
        let theirs = Arc::clone(&seen);
        let relay = std::thread::Builder::new().name("worker-stderr".into()).spawn(move || {
            let mut reader = BufReader::new(stderr);
            let mut line = Vec::new();
            let mut stderr_gone = false;
            loop {
                line.clear();
                match reader.by_ref().take(LONGEST_LINE).read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let text = String::from_utf8_lossy(&line);
                // `eprint!`, not a write to `io::stderr()`, so that a test harness captures it. It
                // panics when our own standard error is gone (a closed pipe); the relay must still
                // go on reading, or the child blocks on a full pipe, so it stops printing instead.
                if !stderr_gone {
                    let newline = if text.ends_with('\n') { "" } else { "\n" };
                    stderr_gone = std::panic::catch_unwind(|| eprint!("{text}{newline}")).is_err();
                }
                if let Ok(mut seen) = theirs.0.lock() {
                    if let Some(kept) = worth_keeping(&text) {
                        if seen.last.len() == KEPT_LINES {
                            seen.last.pop_front();
                        }
                        seen.last.push_back(kept);
                    }
                }
            }
            if let Ok(mut seen) = theirs.0.lock() {
                seen.ended = true;
            }
            theirs.1.notify_all();
        });
        if relay.is_err() {
            // No thread, no relay: nobody reads the pipe, so a child that writes much would block on
            // it; marking it ended at least keeps `last_lines` from waiting.
            if let Ok(mut state) = seen.0.lock() {
                state.ended = true;
            }
        }
        StderrRelay { seen }
    }

    /// Forgets the lines kept so far: what comes next is about the next request.
    pub(crate) fn forget(&self) {
        if let Ok(mut seen) = self.seen.0.lock() {
            seen.last.clear();
        }
    }

    /// The last lines the child printed (a backtrace's frames left out), oldest first, once its
    /// standard error has ended or `wait` has passed (a process it started may hold it open).
    pub(crate) fn last_lines(&self, wait: Duration) -> Vec<String> {
        let deadline = Instant::now() + wait;
        let (lock, ended) = &*self.seen;
        let Ok(mut seen) = lock.lock() else { return Vec::new() };
        while !seen.ended {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            seen = match ended.wait_timeout(seen, left) {
                Ok((seen, _)) => seen,
                Err(_) => return Vec::new(),
            };
        }
        seen.last.iter().cloned().collect()
    }
}

/// The line as kept for a crash message, or `None` for a line that tells nothing of why: blank, or
/// part of a backtrace (`RUST_BACKTRACE` set).
fn worth_keeping(line: &str) -> Option<String> {
    let line = line.trim();
    let frame = line.split_once(':').is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    let backtrace = frame
        || line.starts_with("at ")
        || line == "stack backtrace:"
        || line.starts_with("note: Some details are omitted")
        || line.starts_with("note: run with `RUST_BACKTRACE=1`");
    if line.is_empty() || backtrace {
        return None;
    }
    Some(line.chars().take(KEPT_CHARS).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_lines_are_kept_without_the_backtrace() {
        let printed = "starting\nthread 'main' (9859) has overflowed its stack\nfatal runtime error: stack \
                       overflow, aborting\nstack backtrace:\n   0: std::rt::lang_start\n             at ./src/main.rs:4:24\n\
                       note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.\n";
        let relay = StderrRelay::start(std::io::Cursor::new(printed.as_bytes().to_vec()));
        assert_eq!(
            relay.last_lines(Duration::from_secs(10)),
            [
                "starting",
                "thread 'main' (9859) has overflowed its stack",
                "fatal runtime error: stack overflow, aborting"
            ]
        );
    }

    #[test]
    fn only_the_last_few_lines_are_kept_and_long_ones_are_cut() {
        let long = "x".repeat(1000);
        let printed = format!("one\ntwo\nthree\nfour\n{long}");
        let relay = StderrRelay::start(std::io::Cursor::new(printed.into_bytes()));
        let last = relay.last_lines(Duration::from_secs(10));
        assert_eq!(last[..2], ["three", "four"]);
        assert_eq!(last[2].len(), KEPT_CHARS);
    }
}
