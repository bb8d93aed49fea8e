//! Stopping a session from outside (Ctrl-C, an embedder's cancel button): the [`Stop`] flag, and
//! waiting for blocking work (a model request, a tool call) in a way that gives up when the flag is
//! set instead of waiting for the work to end.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A flag that asks a session to stop. Clones share it; setting it is all a signal handler does.
///
/// ```
/// let stop = toolhost::agent::Stop::new();
/// let handler_copy = stop.clone();
/// handler_copy.stop();
/// assert!(stop.is_stopped());
/// ```
#[derive(Debug, Clone, Default)]
pub struct Stop(Arc<AtomicBool>);

impl Stop {
    /// A flag that is not set.
    pub fn new() -> Self {
        Stop::default()
    }

    /// Asks the session to stop: the running call is interrupted and no more requests are sent.
    pub fn stop(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether [`Stop::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// How often a wait looks at the flag: short enough that Ctrl-C feels immediate.
const POLL: Duration = Duration::from_millis(50);

/// Runs `work` on a thread of its own and waits for its result. Once `stop` is set, `on_stop` is
/// called (once; it may interrupt the work) and the wait goes on for at most `grace` more: work
/// that has not finished by then is left to finish on its own, unobserved, and `None` is returned.
pub(crate) fn wait_or_stop<T: Send + 'static>(
    stop: &Stop,
    grace: Duration,
    on_stop: impl FnOnce(),
    work: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new().name("toolhost-agent-wait".into()).spawn(move || {
        let _ = tx.send(work());
    });
    if spawned.is_err() {
        // No thread to spare: the work cannot run, and the caller reports it as stopped.
        return None;
    }
    let mut on_stop = Some(on_stop);
    let mut stopped_at: Option<Instant> = None;
    loop {
        match rx.recv_timeout(POLL) {
            Ok(value) => return Some(value),
            Err(mpsc::RecvTimeoutError::Disconnected) => return None,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if stop.is_stopped() {
            let since = *stopped_at.get_or_insert_with(Instant::now);
            if let Some(f) = on_stop.take() {
                f();
            }
            if since.elapsed() >= grace {
                return None;
            }
        }
    }
}

/// Sleeps for `duration` unless `stop` is set first; false when it was.
pub(crate) fn pause(duration: Duration, stop: Option<&Stop>) -> bool {
    let Some(stop) = stop else {
        std::thread::sleep(duration);
        return true;
    };
    let until = Instant::now() + duration;
    loop {
        if stop.is_stopped() {
            return false;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(POLL));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_that_ends_is_waited_for() {
        let stop = Stop::new();
        assert_eq!(wait_or_stop(&stop, Duration::ZERO, || {}, || 7), Some(7));
    }

    #[test]
    fn a_stop_calls_on_stop_and_gives_up_after_the_grace() {
        let stop = Stop::new();
        stop.stop();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let mut interrupted = false;
        // The work waits until it is released, which only happens after the wait gave up.
        let got = wait_or_stop(&stop, Duration::ZERO, || interrupted = true, move || release_rx.recv().is_ok());
        assert_eq!(got, None);
        assert!(interrupted);
        drop(release_tx);
    }

    #[test]
    fn a_pause_ends_early_when_stopped() {
        let stop = Stop::new();
        stop.stop();
        assert!(!pause(Duration::from_secs(3600), Some(&stop)));
        assert!(pause(Duration::ZERO, None));
    }
}
