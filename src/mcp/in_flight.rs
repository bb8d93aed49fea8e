//! The calls of one server run on the host's worker process ([`WorkerPipe`]): sent in the order
//! they came, several at once, and their replies awaited on the server's event loop, where the
//! worker's socket and pidfd are waited on like the client's input.
//!
//! Why: a worker that sleeps between two calls, and a server that waits for each reply before it
//! sends the next call, cost a hop each way a call; with the next calls already in its socket the
//! worker goes from one call to the next at once, and one wake-up of the server reads every reply
//! that came. The worker still runs one call at a time, in order, and a cancellation names the call
//! it stops by its number, so it cannot reach the next one. No thread sits blocked on the worker:
//! what could mean waiting (a worker to start, a reply larger than a glance, a worker that died or
//! overran) is done on a blocking thread.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::{oneshot, Notify};
use tokio::time::Sleep;

use crate::call::{CallRecord, CallRequest};
use crate::error::{Error, ErrorKind};
use crate::handle::{Behind, HostHandle, WorkerCalls};
use crate::worker::Canceller;

/// At most this many calls are out with the worker at once (and handed to the SDK, whichever the
/// host: see the `stdio` module).
pub(super) const DEPTH: usize = 8;

/// A call is sent behind others only if its request is at most this long, and the requests out
/// add up to at most [`MOST_BYTES_OUT`]: the worker's socket holds them all, so sending never
/// waits for the worker to read (a larger call waits until the worker is idle, and reading).
const SMALL_CALL: usize = 16 * 1024;
const MOST_BYTES_OUT: usize = 64 * 1024;

/// How long the server looks for the reply of a call out alone before its event loop sleeps, when
/// the last such calls were answered within that time: waking the loop costs more than a quick call
/// where an idle core takes tens of microseconds to wake (a virtual machine's). Looking costs at most
/// this long a call, only while calls are answered this fast, and yields the core between looks.
const LOOK_FOR_REPLY: Duration = Duration::from_micros(150);

/// Whether the whole of `calls`' next reply comes within `limit`, looking (at least once) until then.
fn reply_within(calls: &mut WorkerCalls, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    loop {
        if calls.reply_whole() {
            return true;
        }
        if Instant::now() >= until || calls.reply_ready() {
            return false;
        }
        std::thread::yield_now();
    }
}

/// The calls of one server run, in the order submitted; a task on the run's event loop sends them
/// to the worker and reads the replies. Cloned, it is the same pipe.
#[derive(Clone, Default)]
pub(super) struct WorkerPipe(Arc<Shared>);

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// A call was submitted, or the pipe closed: the task has something to do.
    wake: Notify,
}

#[derive(Default)]
struct State {
    /// Calls submitted and not sent yet, in order.
    queued: VecDeque<Waiting>,
    /// Calls sent, in the order sent: the lent worker's calls out.
    sent: VecDeque<Waiting>,
    /// Cancels the calls out with the current worker.
    canceller: Option<Canceller>,
    /// The task runs.
    driving: bool,
    /// The server is ending: nothing more is sent, and no worker started.
    closed: bool,
    next_id: u64,
}

/// One call's place in the pipe.
struct Waiting {
    id: u64,
    /// The call, until it is sent.
    call: Option<CallRequest>,
    /// About how long its request is.
    bytes: usize,
    /// Once sent: which worker (by [`WorkerCalls::worker_started`]) and its number there.
    sent_as: Option<(u64, u64)>,
    /// It was given to a fresh worker after one that could not take it.
    sent_again: bool,
    done: oneshot::Sender<CallRecord>,
}

impl Waiting {
    /// Ends the call with `error` as its record.
    fn fail(mut self, error: Error) {
        let (tool, arguments) = self.call.take().map(|call| (call.tool, call.arguments)).unwrap_or_default();
        let error = if tool.is_empty() { error } else { error.with_tool(&tool) };
        let _ = self.done.send(CallRecord::failed(tool, arguments, error));
    }
}

/// A submitted call: its id in the pipe (for [`WorkerPipe::cancel`]) and its record to come.
pub(super) struct Submitted {
    pub(super) id: u64,
    pub(super) record: oneshot::Receiver<CallRecord>,
}

impl WorkerPipe {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues `call` behind the ones submitted before it; the pipe's task (started now if it does
    /// not run) sends it to `handle`'s worker in its turn. Must be called on the server's event
    /// loop.
    pub(super) fn submit(&self, handle: &HostHandle, call: CallRequest) -> Submitted {
        let (done, record) = oneshot::channel();
        let mut state = self.lock();
        let id = state.next_id;
        state.next_id += 1;
        let bytes = call.tool.len() + call.arguments.len() + 64;
        state.queued.push_back(Waiting { id, call: Some(call), bytes, sent_as: None, sent_again: false, done });
        if !state.driving {
            state.driving = true;
            tokio::spawn(drive(self.clone(), handle.clone()));
        }
        drop(state);
        self.0.wake.notify_one();
        Submitted { id, record }
    }

    /// Cancels call `id`: one not sent yet is dropped (true: it never runs, and has no record);
    /// one sent is stopped in the worker if it runs, or answered without running if it has not
    /// begun (false: its record still comes; ask again until it has, since a stop that reaches the
    /// worker just before the call begins is forgotten).
    pub(super) fn cancel(&self, id: u64) -> bool {
        let mut state = self.lock();
        if let Some(at) = state.queued.iter().position(|waiting| waiting.id == id) {
            state.queued.remove(at);
            return true;
        }
        let sent_as = state.sent.iter().find(|waiting| waiting.id == id).and_then(|waiting| waiting.sent_as);
        if let (Some((worker, number)), Some(canceller)) = (sent_as, &state.canceller) {
            if canceller.worker() == worker {
                canceller.cancel(number);
            }
        }
        false
    }

    /// The server is ending: calls not sent yet never will be, and no worker is started for them.
    pub(super) fn close(&self) {
        self.lock().closed = true;
        self.0.wake.notify_one();
    }
}

/// What may happen next, as the state says.
enum Next {
    /// Nothing submitted, nothing out: give the worker back, and wait.
    Idle,
    /// Nothing out, and other requests wait for the worker: give it back, and ask for it again
    /// behind them.
    GiveWay,
    /// The pipe closed with nothing out: the task ends.
    End,
    /// Calls wait to be sent, and the task has no worker to send them to.
    NeedWorker,
    /// Wait for a reply, or a submission.
    Wait,
}

/// The pipe's task: sends what may be sent, waits for replies (or submissions, or the deadline
/// of the call the worker runs), reads them and hands each record to its call.
async fn drive(pipe: WorkerPipe, handle: HostHandle) {
    let mut calls: Option<WorkerCalls> = None;
    let mut watched: Option<(u64, Registered)> = None;
    let mut timer: Option<Pin<Box<Sleep>>> = None;
    // How many calls in a row were out alone and answered within `LOOK_FOR_REPLY`: calls one at a
    // time in a tight loop. (With calls sent ahead, the loop has other work, and a look would
    // take a core from the worker.)
    let mut quick_in_a_row = 0;
    loop {
        let next = pipe.send_what_may_go(calls.as_mut(), quick_in_a_row >= 2);
        match next {
            Next::End => {
                pipe.lock().driving = false;
                return;
            }
            Next::Idle => {
                // Given back, so the handle's other requests (a tool list, a reload) can run.
                calls = None;
                pipe.0.wake.notified().await;
                continue;
            }
            Next::GiveWay => {
                drop(calls.take());
                calls = pipe.lend(&handle, None, false).await;
                continue;
            }
            Next::NeedWorker => {
                calls = pipe.lend(&handle, calls.take(), true).await;
                continue;
            }
            Next::Wait => {}
        }
        let Some(lent) = calls.as_mut() else { continue };
        let worker = lent.worker_started();
        if watched.as_ref().is_none_or(|(of, _)| *of != worker) {
            watched = register(lent).map(|fds| (worker, fds));
        }
        let deadline = lent.deadline().unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        let timer = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline.into())));
        if timer.deadline() != deadline.into() {
            timer.as_mut().reset(deadline.into());
        }
        // A quick call's reply is looked for before the loop sleeps, as the worker looks for the
        // next call (see `LOOK_FOR_REPLY`).
        let waiting_since = Instant::now();
        let alone = lent.len() == 1 && pipe.lock().queued.is_empty();
        if !alone {
            quick_in_a_row = 0;
        } else if quick_in_a_row >= 2 && reply_within(lent, LOOK_FOR_REPLY) {
            quick_in_a_row += 1;
            pipe.read_replies(lent);
            continue;
        }
        let readable = async {
            match &watched {
                None => tokio::time::sleep(Duration::from_millis(10)).await,
                Some((_, Registered { socket, exit: None })) => clear(socket).await,
                Some((_, Registered { socket, exit: Some(exit) })) => tokio::select! {
                    () = clear(socket) => {},
                    () = clear(exit) => {},
                },
            }
        };
        tokio::select! {
            () = readable => {}
            () = timer.as_mut() => {}
            // Another call to send (a reply that came meanwhile keeps its readiness).
            () = pipe.0.wake.notified() => continue,
        }
        if alone {
            quick_in_a_row = if waiting_since.elapsed() <= LOOK_FOR_REPLY { quick_in_a_row + 1 } else { 0 };
        }
        // Every whole reply is read here; anything that may mean waiting on a blocking thread. A
        // read there may take in more than its reply (the next one, whole or in part), whose
        // arrival the wait above has seen already: what it took in is read before the loop waits
        // again, or that reply would wait for the deadline.
        pipe.read_replies(lent);
        while let Some(lent) = calls.as_mut() {
            let overdue = lent.deadline().is_some_and(|deadline| Instant::now() >= deadline);
            if lent.is_empty() || !(overdue || lent.reply_ready()) {
                break;
            }
            calls = pipe.finish_waiting(calls.take()).await;
            if let Some(lent) = calls.as_mut() {
                pipe.read_replies(lent);
            }
        }
    }
}

impl WorkerPipe {
    /// Sends the queued calls that may go now to `calls`' worker, and says what is next. `in_a_row`:
    /// calls come one at a time in a tight loop, so the worker is told to look for the next one
    /// after a call sent alone.
    fn send_what_may_go(&self, calls: Option<&mut WorkerCalls>, in_a_row: bool) -> Next {
        let mut state = self.lock();
        let out = calls.as_ref().map_or(0, |calls| calls.len());
        if state.closed && out == 0 {
            // Their handlers were cancelled as the input closed, and wait for no record.
            state.queued.clear();
            return Next::End;
        }
        let Some(calls) = calls else {
            return if state.queued.is_empty() { Next::Idle } else { Next::NeedWorker };
        };
        if calls.is_empty() && state.queued.is_empty() {
            return Next::Idle;
        }
        if calls.is_empty() && calls.others_waiting() {
            return Next::GiveWay;
        }
        while !state.closed && calls.worker_runs() {
            let bytes_out: usize = state.sent.iter().map(|waiting| waiting.bytes).sum();
            let Some(front) = state.queued.front() else { break };
            let behind = !calls.is_empty();
            let fits = front.bytes <= SMALL_CALL && bytes_out + front.bytes <= MOST_BYTES_OUT;
            if behind && (calls.len() >= DEPTH || !fits || calls.others_waiting()) {
                break;
            }
            let Some(mut waiting) = state.queued.pop_front() else { break };
            let Some(call) = waiting.call.take() else { continue };
            let alone = in_a_row && !behind && state.queued.is_empty();
            match if alone { calls.send_expecting_more(call) } else { calls.send(call) } {
                Ok(number) => {
                    waiting.sent_as = Some((calls.worker_started(), number));
                    state.sent.push_back(waiting);
                }
                // The worker could not take it (it died), so it never ran: it goes back to the front.
                // With calls out, their replies (and the worker's end) are read first; with none,
                // a fresh worker takes it, once (a call no worker can take fails).
                Err(call) => {
                    if calls.is_empty() {
                        if waiting.sent_again {
                            waiting.call = Some(call);
                            waiting.fail(Error::new(ErrorKind::Crashed, "no worker could take the call"));
                            break;
                        }
                        waiting.sent_again = true;
                        calls.end_worker();
                    }
                    waiting.call = Some(call);
                    state.queued.push_front(waiting);
                    break;
                }
            }
        }
        match (calls.is_empty(), state.queued.is_empty()) {
            (false, _) => Next::Wait,
            (true, true) => Next::Idle,
            // None runs: one is started for them.
            (true, false) => Next::NeedWorker,
        }
    }

    /// Reads every whole reply that came, and hands each record to its call.
    fn read_replies(&self, calls: &mut WorkerCalls) {
        while calls.reply_whole() {
            if let Some(record) = calls.finish_next() {
                self.deliver(record);
            }
        }
        self.settle_behind(calls);
    }

    /// Once the worker has ended without answering a call, settles the calls sent behind it: one
    /// that began gets its record (it must not run twice), the ones that never began go back to the
    /// front of the queue, in order, for a fresh worker.
    fn settle_behind(&self, calls: &mut WorkerCalls) {
        let behind = calls.take_behind();
        if behind.is_empty() {
            return;
        }
        let mut state = self.lock();
        let sent: Vec<Waiting> = state.sent.drain(..).collect();
        let mut again = Vec::new();
        for (mut waiting, became) in sent.into_iter().zip(behind) {
            match became {
                Behind::Unrun(call) => {
                    waiting.call = Some(call);
                    waiting.sent_as = None;
                    again.push(waiting);
                }
                Behind::Ran(record) => {
                    let _ = waiting.done.send(*record);
                }
            }
        }
        for waiting in again.into_iter().rev() {
            state.queued.push_front(waiting);
        }
    }

    /// Hands the record of the first call out to it.
    fn deliver(&self, record: CallRecord) {
        let waiting = self.lock().sent.pop_front();
        if let Some(waiting) = waiting {
            let _ = waiting.done.send(record);
        }
    }

    /// The worker lent to the task, with a worker running in it; `None` when the host has stopped
    /// or the worker did not start, and then the first queued call fails with the reason. A free
    /// worker that runs is taken on the event loop; waiting for one (another request has it, or it
    /// must start) is done on a blocking thread. `at_once`: a free worker may be taken without
    /// waiting (not so after giving way to the requests that wait for it).
    async fn lend(&self, handle: &HostHandle, calls: Option<WorkerCalls>, at_once: bool) -> Option<WorkerCalls> {
        let calls = calls.or_else(|| at_once.then(|| handle.try_lend_worker()).flatten());
        let lent = match calls {
            Some(calls) if calls.worker_runs() => Ok(calls),
            calls => {
                let (handle, pipe) = (handle.clone(), self.clone());
                tokio::task::spawn_blocking(move || {
                    let mut calls = match calls {
                        Some(calls) => calls,
                        None => handle.lend_worker()?,
                    };
                    if !pipe.lock().closed {
                        calls.start_worker()?;
                    }
                    Ok(calls)
                })
                .await
                .unwrap_or_else(|e| Err(Error::new(ErrorKind::Crashed, format!("the worker could not be lent: {e}"))))
            }
        };
        match lent {
            Ok(calls) => {
                self.lock().canceller = calls.canceller();
                Some(calls)
            }
            Err(error) => {
                let first = self.lock().queued.pop_front();
                if let Some(waiting) = first {
                    waiting.fail(error);
                }
                None
            }
        }
    }

    /// Reads the next reply on a blocking thread (it may wait: a long reply, a worker that died,
    /// one that overran and is interrupted, then killed), and settles the calls sent after one its
    /// worker did not answer.
    async fn finish_waiting(&self, calls: Option<WorkerCalls>) -> Option<WorkerCalls> {
        let mut calls = calls?;
        let done = tokio::task::spawn_blocking(move || {
            let record = calls.finish_next();
            (calls, record)
        })
        .await;
        let Ok((mut calls, record)) = done else {
            // The thread panicked with the worker: it was given back ended.
            let lost = std::mem::take(&mut self.lock().sent);
            for waiting in lost {
                waiting.fail(Error::new(ErrorKind::Crashed, "the call was lost with its worker"));
            }
            return None;
        };
        if let Some(record) = record {
            self.deliver(record);
        }
        self.settle_behind(&mut calls);
        Some(calls)
    }
}

/// A worker's descriptors, registered with the event loop.
struct Registered {
    /// The socket its replies come on.
    socket: AsyncFd<OwnedFd>,
    /// Its pidfd, readable once it has exited (where the kernel has pidfds).
    exit: Option<AsyncFd<OwnedFd>>,
}

/// Copies of `calls`' worker's descriptors (its socket, then its pidfd), registered with the event
/// loop: `None` unless the socket is.
fn register(calls: &WorkerCalls) -> Option<Registered> {
    let registered = |fd| {
        let copy = super::pipes::cloexec_copy(fd).ok()?;
        // SAFETY: the `OwnedFd` is this registration's own copy of the descriptor: it stays open,
        // and is the same descriptor, until the `AsyncFd` that owns it is dropped.
        unsafe { AsyncFd::register_with_interest(copy, Interest::READABLE) }.ok()
    };
    let mut fds = calls.wake_fds().into_iter();
    let socket = registered(fds.next()?)?;
    Some(Registered { socket, exit: fds.next().and_then(registered) })
}

/// Waits until `fd` is readable, and clears the readiness seen: a reply that comes after the
/// replies are next looked for wakes the next wait.
async fn clear(fd: &AsyncFd<OwnedFd>) {
    match fd.readable().await {
        Ok(mut ready) => ready.clear_ready(),
        // Not waitable after all: look again shortly, rather than wait for the deadline.
        Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
    }
}
