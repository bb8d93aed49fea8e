//! A call out with the worker process ([`CallInFlight`]), awaited on the server's event loop:
//! the worker's socket and pidfd are waited on like the client's input, so a reply wakes the one
//! thread that writes it to the client, and no thread sits blocked on the worker meanwhile.
//!
//! Why: handing each call to a blocking thread cost two thread wake-ups a call (there and back),
//! a third of what a quick call costs end to end. The worker's descriptors stay registered from
//! call to call while the worker is the same (registering them anew cost eight system calls a
//! call).

use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::time::Sleep;

use crate::call::CallRecord;
use crate::error::Error;
use crate::handle::CallInFlight;

/// The current worker's descriptors, registered with the event loop of one server run (a
/// registration belongs to its runtime, as a timer does: each run starts with a fresh one).
#[derive(Clone, Default)]
pub(super) struct Watches(Arc<Mutex<Kept>>);

#[derive(Default)]
struct Kept {
    watched: Option<Watched>,
    /// The timer of a call's deadline, set again for each call. A timer made anew for each call
    /// woke the event loop each time it was set (the loop had no timer to sleep until), one system
    /// call and one more turn of the loop a call; set again, it is later than the one the loop last
    /// slept until, and the loop is left alone.
    deadline: Option<Pin<Box<Sleep>>>,
}

/// One worker's descriptors, by which of the handle's workers it is.
struct Watched {
    worker: u64,
    fds: Arc<Registered>,
}

/// A worker's descriptors, registered with the event loop.
struct Registered {
    /// The socket its replies come on.
    socket: AsyncFd<OwnedFd>,
    /// Its pidfd, readable once it has exited (where the kernel has pidfds).
    exit: Option<AsyncFd<OwnedFd>>,
}

impl Watches {
    /// Waits for `flight`'s reply and reads it. A reply that has come whole is read here; anything
    /// that could mean waiting (a reply larger than a glance, a worker that died, the deadline
    /// passed: then the worker is interrupted, given its grace and killed) is finished on a
    /// blocking thread, as a call without an event loop is, so the loop never stalls.
    pub(super) async fn finish(&self, mut flight: CallInFlight) -> CallRecord {
        let Some(watched) = self.of(&flight) else {
            // Nothing to wait on here: wait on a blocking thread.
            return finish_blocking(flight).await;
        };
        let mut timer = None;
        let whole = self.wait(&mut flight, &watched, &mut timer).await;
        if let Some(timer) = timer {
            self.lock().deadline = Some(timer);
        }
        if whole {
            return flight.finish();
        }
        finish_blocking(flight).await
    }

    /// Waits for `flight`'s reply until its deadline: whether it has come whole. `timer` is the
    /// deadline's timer once one was needed.
    async fn wait(&self, flight: &mut CallInFlight, watched: &Registered, timer: &mut Option<Pin<Box<Sleep>>>) -> bool {
        // Not looked for before the first wait: a reply is never back that soon, and a reply
        // that came already has made the socket ready.
        let mut woken = false;
        while let Some(deadline) = flight.deadline().filter(|&deadline| Instant::now() < deadline) {
            // Each wake-up's readiness is cleared before the reply is looked for, so a reply that
            // comes after the look wakes the next wait. A whole reply (the usual wake-up) is read
            // here; anything else that came (a part of a long reply, the worker's end) on a
            // blocking thread.
            if woken {
                if flight.reply_whole() {
                    return true;
                }
                if flight.reply_ready() {
                    return false;
                }
            }
            woken = true;
            let readable = async {
                match &watched.exit {
                    None => clear(&watched.socket).await,
                    Some(exit) => tokio::select! {
                        () = clear(&watched.socket) => {},
                        () = clear(exit) => {},
                    },
                }
            };
            let timer = timer.get_or_insert_with(|| {
                let kept = self.lock().deadline.take();
                kept.unwrap_or_else(|| Box::pin(tokio::time::sleep_until(deadline.into())))
            });
            if timer.deadline() != deadline.into() {
                timer.as_mut().reset(deadline.into());
            }
            tokio::select! {
                () = readable => {}
                () = timer.as_mut() => {}
            }
        }
        false
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The registered descriptors of `flight`'s worker, registered now if it is a new one;
    /// `None` when its socket cannot be.
    fn of(&self, flight: &CallInFlight) -> Option<Arc<Registered>> {
        let worker = flight.worker_started();
        let mut kept = self.lock();
        match kept.watched.as_ref() {
            Some(watched) if watched.worker == worker => Some(Arc::clone(&watched.fds)),
            _ => {
                let fds = Arc::new(register(flight)?);
                kept.watched = Some(Watched { worker, fds: Arc::clone(&fds) });
                Some(fds)
            }
        }
    }
}

/// Finishes `flight` on a blocking thread: waits for its reply, or past its deadline interrupts,
/// then kills, its worker.
async fn finish_blocking(flight: CallInFlight) -> CallRecord {
    tokio::task::spawn_blocking(move || flight.finish()).await.unwrap_or_else(|e| {
        CallRecord::failed(String::new(), String::new(), Error::tool_failed(format!("the call was lost: {e}")))
    })
}

/// Copies of `flight`'s descriptors (its worker's socket, then its pidfd), registered with the
/// event loop: `None` unless the socket is.
fn register(flight: &CallInFlight) -> Option<Registered> {
    let registered = |fd| {
        let copy = super::pipes::cloexec_copy(fd).ok()?;
        // SAFETY: the `OwnedFd` is this registration's own copy of the descriptor: it stays open,
        // and is the same descriptor, until the `AsyncFd` that owns it is dropped.
        unsafe { AsyncFd::register_with_interest(copy, Interest::READABLE) }.ok()
    };
    let mut fds = flight.wake_fds().into_iter();
    let socket = registered(fds.next()?)?;
    Some(Registered { socket, exit: fds.next().and_then(registered) })
}

/// Waits until `fd` is readable, and clears the readiness seen.
async fn clear(fd: &AsyncFd<OwnedFd>) {
    match fd.readable().await {
        Ok(mut ready) => ready.clear_ready(),
        // Not waitable after all: look again shortly, rather than wait for the deadline.
        Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
    }
}
