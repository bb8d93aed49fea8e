//! The per-call time limit for Scheme code: one background thread per host that interrupts the
//! engine (steel's thread-state controller) when an armed deadline passes, and sets the host's
//! cancel flag, so a tool the code waits on that watches it (a `shell-exec` command) stops too.
//! Rust tools that block without watching it are not stopped; they carry their own timeouts.
//!
//! Arming and disarming sit on every Scheme tool call, so they do not wake the thread unless they
//! must: a thread asleep until an earlier moment wakes then anyway and sees the new deadline (or
//! none), so only a deadline earlier than the one it sleeps toward, or a thread asleep with none,
//! is worth a wake-up. With one limit for every call, that is about one wake-up per limit's length.

use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use steel::steel_vm::ThreadStateController;

use crate::context::Cancel;

#[derive(Default)]
struct State {
    deadline: Option<Instant>,
    /// Bumped by every arm, so a late firing is never charged to the next call.
    generation: u64,
    fired: Option<u64>,
    shutdown: bool,
    /// When the thread will wake by itself; `None` while it waits with no deadline.
    sleeping_until: Option<Instant>,
}

/// Interrupts the engine when an armed deadline passes.
pub(crate) struct Watchdog {
    state: Arc<(Mutex<State>, Condvar)>,
    controller: ThreadStateController,
}

/// A ticket for one armed deadline.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Armed(u64);

impl Watchdog {
    pub fn new(controller: ThreadStateController, cancel: Cancel) -> Self {
        let state: Arc<(Mutex<State>, Condvar)> = Arc::default();
        let worker_state = Arc::clone(&state);
        let worker_controller = controller.clone();
        // If the thread cannot start, deadlines are simply not enforced.
        let _ = thread::Builder::new().name("toolhost-watchdog".into()).spawn(move || {
            let (lock, wake) = &*worker_state;
            let Ok(mut state) = lock.lock() else { return };
            loop {
                if state.shutdown {
                    return;
                }
                match state.deadline {
                    None => {
                        state.sleeping_until = None;
                        match wake.wait(state) {
                            Ok(s) => state = s,
                            Err(_) => return,
                        }
                    }
                    Some(deadline) => {
                        let now = Instant::now();
                        if now >= deadline {
                            worker_controller.interrupt();
                            cancel.cancel();
                            state.fired = Some(state.generation);
                            state.deadline = None;
                        } else {
                            state.sleeping_until = Some(deadline);
                            match wake.wait_timeout(state, deadline - now) {
                                Ok((s, _)) => state = s,
                                Err(_) => return,
                            }
                        }
                    }
                }
            }
        });
        Watchdog { state, controller }
    }

    /// Starts the clock for a run of at most `limit`.
    pub fn arm(&self, limit: Duration) -> Armed {
        let (lock, wake) = &*self.state;
        let Ok(mut state) = lock.lock() else { return Armed(u64::MAX) };
        state.generation += 1;
        let deadline = Instant::now() + limit;
        state.deadline = Some(deadline);
        if state.sleeping_until.is_none_or(|until| deadline < until) {
            wake.notify_all();
        }
        Armed(state.generation)
    }

    /// Stops the clock; true when the deadline passed and the engine was interrupted. The engine is
    /// resumed either way, so the next run starts clean.
    pub fn disarm(&self, armed: Armed) -> bool {
        let (lock, _) = &*self.state;
        let fired = match lock.lock() {
            Ok(mut state) => {
                // No wake-up: the thread finds no deadline when it next wakes.
                state.deadline = None;
                state.fired.take() == Some(armed.0)
            }
            Err(_) => false,
        };
        self.controller.resume();
        fired
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let (lock, wake) = &*self.state;
        if let Ok(mut state) = lock.lock() {
            state.shutdown = true;
        }
        wake.notify_all();
    }
}
