//! The host on its own thread (design section 18): a [`HostHandle`] is `Send + Sync + Clone`, and
//! carries calls, catalogues and evaluations to the one thread that owns the `!Send` engine, where
//! the host was built. Calls run one at a time, in the order they arrive; one interpreter cannot run
//! two. Calls that may run at once ([`HostHandle::run_calls`]) go to more hosts built like the first
//! ([`HostHandle::with_lanes`]), one call per host at a time. What crosses is plain data
//! ([`Request`] and [`Reply`], serializable), so the same conversation can later run over a pipe to
//! a worker process.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

use serde_json::Value;

use crate::call::{CallRecord, CallRequest};
use crate::error::{Error, ErrorKind, Result};
use crate::host::{HostBuilder, Interrupter};
use crate::host_request::Cancels;
pub use crate::host_request::{answer, Reply, Request};
use crate::schema::Format;
use crate::spec::SpecSet;
use crate::worker::{Canceller, SentCall, WorkerHandle};

/// A request for the host's thread, its number among the calls handed over without waiting (0
/// for a request that is not numbered), and what to do with its reply there.
type Envelope = (u64, Request, Box<dyn FnOnce(Reply) + Send>);

/// A `Send + Sync + Clone` way to a host that lives on its own thread.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("a.txt"), "one\ntwo\n").unwrap();
/// let handle = toolhost::HostHandle::spawn(toolhost::HostBuilder::new(dir.path())).unwrap();
/// let worker = handle.clone();
/// let record = std::thread::spawn(move || worker.call("fs-read", r#"{"path": "a.txt"}"#)).join().unwrap();
/// assert_eq!(record.model_text(), "1\tone\n2\ttwo\n");
/// ```
#[derive(Clone)]
pub struct HostHandle {
    host: Backend,
    /// Stops what the host runs: in this process, or in a worker process.
    interrupter: Interrupt,
    /// More hosts like this one, for calls that run at the same time ([`HostHandle::run_calls`]).
    lanes: Option<Arc<Lanes>>,
}

/// Hosts built like the first, started when calls first run side by side and kept.
struct Lanes {
    make: Box<dyn Fn() -> Result<HostHandle> + Send + Sync>,
    /// At most this many hosts in all, the first one included.
    most: usize,
    started: Mutex<Vec<HostHandle>>,
}

/// Where requests go.
#[derive(Clone)]
enum Backend {
    /// The host's own thread (the engine is not `Send`).
    Thread(Arc<HostThread>),
    /// A worker process, spoken to from the requesting thread, one request at a time.
    Worker(Arc<WorkerSlot>),
}

/// The way to a host on a thread of its own.
struct HostThread {
    /// The channel to the thread, and the number of the last call sent numbered: behind one lock,
    /// so the numbers follow the channel's order.
    sender: Mutex<(mpsc::Sender<Envelope>, u64)>,
    /// Which numbered call runs, and which ones not yet begun were cancelled.
    cancels: Cancels,
}

impl HostThread {
    /// Sends `request` to the thread, numbered if `numbered`: its number (0 when not numbered).
    fn send(&self, request: Request, numbered: bool, reply: Box<dyn FnOnce(Reply) + Send>) -> Result<u64> {
        let mut sender = self.sender.lock().map_err(|_| stopped())?;
        let number = if numbered { sender.1 + 1 } else { 0 };
        sender.0.send((number, request, reply)).map_err(|mpsc::SendError((_, request, reply))| {
            // Answered here, as the thread would have: it has stopped.
            let (tool, arguments) = match request {
                Request::Call(call) => (call.tool, call.arguments),
                _ => (String::new(), String::new()),
            };
            reply(Reply::Call(Box::new(CallRecord::failed(tool, arguments, stopped()))));
            stopped()
        })?;
        if numbered {
            sender.1 = number;
        }
        Ok(number)
    }
}

/// A worker process, lent out while calls sent with [`WorkerCalls`] wait for their replies:
/// every other request waits until it is back.
struct WorkerSlot {
    worker: Mutex<Option<WorkerHandle>>,
    returned: Condvar,
    /// Requests waiting for the worker: giving it back wakes them only when there are some (a
    /// wake-up is a system call, and there is almost never anyone to wake).
    waiting: AtomicUsize,
}

impl WorkerSlot {
    fn new(worker: WorkerHandle) -> Self {
        WorkerSlot { worker: Mutex::new(Some(worker)), returned: Condvar::new(), waiting: AtomicUsize::new(0) }
    }

    /// The worker, once no call is out with it.
    fn lock(&self) -> Result<MutexGuard<'_, Option<WorkerHandle>>> {
        let guard = self.worker.lock().map_err(|_| stopped())?;
        if guard.is_some() {
            return Ok(guard);
        }
        // Counted while the lock is held, so a worker given back after this looks sees the count.
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let waited = self.returned.wait_while(guard, |worker| worker.is_none());
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        waited.map_err(|_| stopped())
    }

    fn give_back(&self, worker: WorkerHandle) {
        if let Ok(mut slot) = self.worker.lock() {
            *slot = Some(worker);
        }
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.returned.notify_all();
        }
    }
}

/// The host's worker process, lent to one user that sends it calls without waiting for their
/// replies ([`HostHandle::try_lend_worker`]), so an event loop can wait for them beside other things
/// (its input, a cancellation) with no thread blocked on the worker. Several calls may be out at
/// once: the worker runs them in the order sent, one at a time, and their replies are read in that
/// order ([`WorkerCalls::finish_next`]). The handle's other requests wait until it is given back
/// (dropped).
pub struct WorkerCalls {
    slot: Arc<WorkerSlot>,
    worker: Option<WorkerHandle>,
    /// The calls sent whose replies are not read yet, in the order sent.
    out: VecDeque<SentCall>,
}

impl WorkerCalls {
    /// Sends `call` to the running worker: its number among the requests this worker was sent, for
    /// [`Canceller::cancel`]. It never waits on the worker's work (the request's line goes into the
    /// socket's buffer, or is written while the worker reads) and judges no failure.
    ///
    /// # Errors
    /// The call, unsent, when no worker runs ([`WorkerCalls::start_worker`] starts one) or it
    /// could not take the call: it died, and the replies of the calls out tell what became of
    /// them; with none out, [`WorkerCalls::end_worker`] lets a fresh one take the call.
    pub fn send(&mut self, call: CallRequest) -> std::result::Result<u64, CallRequest> {
        self.send_marked(call, false)
    }

    /// [`WorkerCalls::send`] for a call the sender expects the next one to follow at once (calls
    /// one at a time in a tight loop): the worker looks for it a moment before it sleeps.
    ///
    /// # Errors
    /// As [`WorkerCalls::send`].
    pub fn send_expecting_more(&mut self, call: CallRequest) -> std::result::Result<u64, CallRequest> {
        self.send_marked(call, true)
    }

    fn send_marked(&mut self, call: CallRequest, expecting_more: bool) -> std::result::Result<u64, CallRequest> {
        let runs_now = self.out.is_empty();
        let Some(worker) = self.worker.as_mut() else { return Err(call) };
        let sent = worker.send_call_as_is(call, expecting_more, runs_now)?;
        let number = sent.number();
        self.out.push_back(sent);
        Ok(number)
    }

    /// Ends the worker (with no call out: one that could not take a call), so the next
    /// [`WorkerCalls::start_worker`] starts a fresh one.
    pub fn end_worker(&mut self) {
        if let Some(worker) = self.worker.as_mut() {
            worker.end_worker();
        }
    }

    /// How many calls are out, their replies not read yet.
    pub fn len(&self) -> usize {
        self.out.len()
    }

    /// Whether no call is out.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// Whether a worker runs (else the next call sent starts one, which waits for it).
    pub fn worker_runs(&self) -> bool {
        self.worker.as_ref().is_some_and(|worker| worker.worker_pid().is_some())
    }

    /// Starts a worker if none runs, waiting until it is ready.
    ///
    /// # Errors
    /// When it does not start.
    pub fn start_worker(&mut self) -> Result<()> {
        match self.worker.as_mut() {
            Some(worker) => worker.ensure_started(),
            None => Err(stopped()),
        }
    }

    /// Whether other requests wait for the worker: a user that keeps sending calls should let
    /// the ones out finish and give it back.
    pub fn others_waiting(&self) -> bool {
        self.slot.waiting.load(Ordering::SeqCst) > 0
    }

    /// One of these becomes readable once a reply (or the worker's end) is there: the socket the
    /// replies come on, which only [`WorkerCalls::finish_next`] reads, and the worker's pidfd.
    pub fn wake_fds(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        self.worker.as_ref().map(WorkerHandle::wake_fds).unwrap_or_default()
    }

    /// Whether [`WorkerCalls::finish_next`] would return without waiting on the worker: the next
    /// reply came (or began to), or the worker ended.
    pub fn reply_ready(&mut self) -> bool {
        self.worker.as_mut().is_none_or(WorkerHandle::reply_ready)
    }

    /// Whether the whole of the next reply has come, so [`WorkerCalls::finish_next`] returns at
    /// once, with no wait of any kind (a worker that died takes a moment to be looked at): what an
    /// event loop may finish on its own thread.
    pub fn reply_whole(&mut self) -> bool {
        !self.out.is_empty() && self.worker.as_mut().is_some_and(WorkerHandle::reply_whole)
    }

    /// How many workers the handle had started so far: another number, another worker (and other
    /// descriptors to wait on, another [`Canceller`]).
    pub fn worker_started(&self) -> u64 {
        self.worker.as_ref().map_or(0, WorkerHandle::workers_started)
    }

    /// What cancels the calls out with the current worker, from any thread.
    pub fn canceller(&self) -> Option<Canceller> {
        self.worker.as_ref().and_then(WorkerHandle::canceller)
    }

    /// When the next reply is due (the grace included): from then on [`WorkerCalls::finish_next`]
    /// ends its call as a timeout, the worker interrupted and then killed.
    pub fn deadline(&self) -> Option<std::time::Instant> {
        self.out.front().map(SentCall::deadline)
    }

    /// Reads the next reply, waiting for it until its deadline: the record of the first call out
    /// (`None` when none is). When the worker died or overran, that call fails (`crashed`,
    /// `timeout`), and [`WorkerCalls::take_behind`] tells what became of the calls sent after it.
    pub fn finish_next(&mut self) -> Option<CallRecord> {
        let sent = self.out.pop_front()?;
        let Some(worker) = self.worker.as_mut() else {
            return Some(CallRecord::failed(sent.into_call().tool, String::new(), stopped()));
        };
        let record = worker.finish_call(sent);
        if let Some(next) = self.out.front_mut() {
            worker.begin_next(next);
        }
        Some(record)
    }

    /// What became of the calls out with a worker that has ended, sent after one it did not answer
    /// (it died, overran or answered with something that is not a reply), in the order sent: each
    /// either never began ([`Behind::Unrun`], to be sent again) or began ([`Behind::Ran`]: its
    /// record, whether it ran to its end or was cut off when the worker was killed, and it must not
    /// run again). Empty while the worker runs.
    pub fn take_behind(&mut self) -> Vec<Behind> {
        if self.worker_runs() || self.out.is_empty() {
            return Vec::new();
        }
        let after_end = self.worker.as_mut().and_then(WorkerHandle::take_after_end).unwrap_or_default();
        let mut replies = after_end.replies;
        // Whether the worker went on to the next call: the one before it was answered. The worker
        // runs one call at a time, so of the calls it gave no reply, only the first after one it
        // answered can have begun (and be cut off); the ones after it never began.
        let mut went_on = after_end.went_on;
        self.out
            .drain(..)
            .map(|sent| match replies.pop_front() {
                Some(Reply::NotRun) => {
                    went_on = true;
                    Behind::Unrun(sent.into_call())
                }
                Some(reply) => {
                    went_on = true;
                    let call = sent.into_call();
                    Behind::Ran(Box::new(call_record(Ok(reply), call.tool, call.arguments)))
                }
                None if went_on => {
                    went_on = false;
                    let error = Error::new(
                        ErrorKind::Crashed,
                        "the call began just before its worker was ended for the call before it, and was cut \
                         off; it was not run again",
                    );
                    let call = sent.into_call();
                    Behind::Ran(Box::new(CallRecord::failed(
                        call.tool.clone(),
                        call.arguments,
                        error.with_tool(&call.tool),
                    )))
                }
                None => Behind::Unrun(sent.into_call()),
            })
            .collect()
    }
}

/// What became of a call sent to a worker behind one it did not answer
/// ([`WorkerCalls::take_behind`]).
#[derive(Debug)]
pub enum Behind {
    /// It never began: send it again.
    Unrun(CallRequest),
    /// It began: its record.
    Ran(Box<CallRecord>),
}

impl Drop for WorkerCalls {
    /// Given back with calls out, the worker's next replies would be theirs: it is ended instead,
    /// and the next request starts a fresh one.
    fn drop(&mut self) {
        let Some(mut worker) = self.worker.take() else { return };
        // Reading a reply panicked: some of it may still be unread.
        if !self.out.is_empty() || std::thread::panicking() {
            worker.end_worker();
        }
        self.slot.give_back(worker);
    }
}

#[derive(Clone)]
enum Interrupt {
    Here(Interrupter),
    Worker(crate::worker::WorkerInterrupter),
}

/// The host thread's stack: as large as a main thread's, for the interpreter's recursion.
const HOST_STACK_BYTES: usize = 8 * 1024 * 1024;

impl HostHandle {
    /// Builds the host on a new thread and returns a handle to it. The thread ends when the last
    /// handle is dropped.
    ///
    /// # Errors
    /// The host failed to build (see [`HostBuilder::build`]), or the thread could not start.
    pub fn spawn(builder: HostBuilder) -> Result<HostHandle> {
        let (ready_tx, ready_rx) = mpsc::channel::<Result<Interrupter>>();
        let (sender, receiver) = mpsc::channel::<Envelope>();
        let cancels = Cancels::default();
        let shared = cancels.clone();
        thread::Builder::new()
            .name("toolhost-host".into())
            .stack_size(HOST_STACK_BYTES)
            .spawn(move || {
                let mut host = match builder.build() {
                    Ok(host) => host,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                if ready_tx.send(Ok(host.interrupter())).is_err() {
                    return;
                }
                for (number, request, reply) in receiver {
                    if number == 0 {
                        reply(answer(&mut host, request));
                    } else if cancels.begin(number) {
                        let answered = answer(&mut host, request);
                        cancels.end();
                        reply(answered);
                    } else {
                        reply(Reply::NotRun);
                    }
                }
            })
            .map_err(|e| Error::tool_failed(format!("cannot start the host thread: {e}")))?;
        let interrupter = ready_rx.recv().map_err(|_| stopped())??;
        let thread = HostThread { sender: Mutex::new((sender, 0)), cancels: shared };
        Ok(HostHandle {
            host: Backend::Thread(Arc::new(thread)),
            interrupter: Interrupt::Here(interrupter),
            lanes: None,
        })
    }

    /// Lets [`HostHandle::run_calls`] run calls on up to `most` hosts at once (this one
    /// included): each other one is made by `make` (a host built as this one was: the same
    /// workspace, tools and guard) when calls first run side by side, and kept. A host that fails
    /// to start leaves fewer lanes, not an error. Each host is its own interpreter (its own worker
    /// process, its own MCP servers).
    pub fn with_lanes(mut self, most: usize, make: impl Fn() -> Result<HostHandle> + Send + Sync + 'static) -> Self {
        self.lanes = Some(Arc::new(Lanes { make: Box::new(make), most: most.max(1), started: Mutex::new(Vec::new()) }));
        self
    }

    /// Runs `calls` side by side, one host per lane (see [`HostHandle::with_lanes`]; without
    /// lanes, one after another), and returns their records in the calls' order. Only for calls
    /// that may run in any order at the same time: read-only ones that cannot ask a person
    /// ([`HostHandle::concurrent_tools`]).
    pub fn run_calls(&self, calls: Vec<CallRequest>) -> Vec<CallRecord> {
        let mut hosts = vec![self.clone()];
        if let (Some(lanes), true) = (&self.lanes, calls.len() > 1) {
            let wanted = calls.len().min(lanes.most) - 1;
            if let Ok(mut started) = lanes.started.lock() {
                while started.len() < wanted {
                    match (lanes.make)() {
                        Ok(handle) => started.push(handle),
                        Err(_) => break,
                    }
                }
                hosts.extend(started.iter().take(wanted).cloned());
            }
        }
        if hosts.len() < 2 {
            return calls.into_iter().map(|call| self.run_call(call)).collect();
        }
        let count = calls.len();
        let named: Vec<(String, String)> = calls.iter().map(|c| (c.tool.clone(), c.arguments.clone())).collect();
        let mut by_lane: Vec<Vec<(usize, CallRequest)>> = vec![Vec::new(); hosts.len()];
        for (i, call) in calls.into_iter().enumerate() {
            by_lane[i % hosts.len()].push((i, call));
        }
        let mut records: Vec<Option<CallRecord>> = (0..count).map(|_| None).collect();
        thread::scope(|scope| {
            let running: Vec<_> = hosts
                .iter()
                .zip(by_lane)
                .map(|(host, calls)| {
                    scope.spawn(move || calls.into_iter().map(|(i, call)| (i, host.run_call(call))).collect::<Vec<_>>())
                })
                .collect();
            for lane in running {
                if let Ok(done) = lane.join() {
                    for (i, record) in done {
                        records[i] = Some(record);
                    }
                }
            }
        });
        records
            .into_iter()
            .zip(named)
            .map(|(record, (tool, arguments))| record.unwrap_or_else(|| CallRecord::failed(tool, arguments, stopped())))
            .collect()
    }

    /// The tools whose calls may run side by side: annotated read-only, and no guard rule could
    /// make one ask.
    ///
    /// # Errors
    /// When the host thread has stopped.
    pub fn concurrent_tools(&self) -> Result<Vec<String>> {
        match self.request(Request::ConcurrentTools)? {
            Reply::Names(names) => Ok(names),
            other => Err(unexpected(&other)),
        }
    }

    /// The same handle over a worker process ([`crate::worker`]): requests go to a `toolhost
    /// worker` started by `spec`, under its limits; a worker that dies or overruns ends that call
    /// with `crashed` or `timeout` and a fresh one takes the next. [`HostHandle::interrupt`] sends
    /// the worker SIGINT, which interrupts its running call.
    ///
    /// # Errors
    /// When the first worker cannot be started.
    pub fn spawn_worker(spec: crate::worker::WorkerSpec) -> Result<HostHandle> {
        let worker = WorkerHandle::spawn(spec)?;
        let interrupter = Interrupt::Worker(worker.interrupter());
        let slot = WorkerSlot::new(worker);
        Ok(HostHandle { host: Backend::Worker(Arc::new(slot)), interrupter, lanes: None })
    }

    /// Sends a request and waits for its reply.
    ///
    /// # Errors
    /// [`ErrorKind::Crashed`] when the host thread has stopped; over a worker, `crashed` or
    /// `timeout` when the worker died or overran (an evaluation's reply carries these instead).
    pub fn request(&self, request: Request) -> Result<Reply> {
        match &self.host {
            Backend::Thread(thread) => {
                let (reply_tx, reply_rx) = mpsc::channel();
                let reply = Box::new(move |reply| {
                    let _ = reply_tx.send(reply);
                });
                thread.send(request, false, reply)?;
                reply_rx.recv().map_err(|_| stopped())
            }
            Backend::Worker(slot) => {
                let mut worker = slot.lock()?;
                let worker = worker.as_mut().ok_or_else(stopped)?;
                match request {
                    Request::Call(call) => Ok(Reply::Call(Box::new(worker.run_call(call)))),
                    Request::LoadErrors => Ok(Reply::LoadErrors(worker.load_errors().to_vec())),
                    Request::Eval { .. } => {
                        // An evaluation's failure is its reply: the worker crashing or overrunning too.
                        Ok(worker.request(&request).unwrap_or_else(|e| Reply::Eval(Err(e))))
                    }
                    other => worker.request(&other),
                }
            }
        }
    }

    /// Runs one call; a host that has stopped answers with a `crashed` record.
    pub fn run_call(&self, call: CallRequest) -> CallRecord {
        let (tool, arguments) = (call.tool.clone(), call.arguments.clone());
        call_record(self.request(Request::Call(call)), tool, arguments)
    }

    /// Lends the host's worker process out for calls sent without waiting ([`WorkerCalls`]), when
    /// that costs no wait: `None` when another request has the worker, or when the host runs in
    /// this process (see [`HostHandle::send_call_then`]).
    pub fn try_lend_worker(&self) -> Option<WorkerCalls> {
        let Backend::Worker(slot) = &self.host else { return None };
        let worker = slot.worker.try_lock().ok()?.take()?;
        Some(WorkerCalls { slot: Arc::clone(slot), worker: Some(worker), out: VecDeque::new() })
    }

    /// [`HostHandle::try_lend_worker`], waiting until no other request has the worker.
    ///
    /// # Errors
    /// When the host runs in this process, or has stopped.
    pub fn lend_worker(&self) -> Result<WorkerCalls> {
        let Backend::Worker(slot) = &self.host else {
            return Err(Error::tool_failed("the host runs in this process, not in a worker"));
        };
        let worker = slot.lock()?.take().ok_or_else(stopped)?;
        Ok(WorkerCalls { slot: Arc::clone(slot), worker: Some(worker), out: VecDeque::new() })
    }

    /// Hands one call to the host's own thread, which runs it in its turn and gives its record to
    /// `then` there; nothing waits meanwhile, so an event loop can await the record as it awaits
    /// its input (a channel's sender in `then`: it runs on the host's thread, which does nothing
    /// else until it returns). A host that has stopped gives `then` a `crashed` record at once.
    /// The call comes back when the host is not on a thread of this process (see
    /// [`HostHandle::try_lend_worker`] for a worker's). Several calls may be handed over before the
    /// first one's record comes: the host runs them in the order handed over, and
    /// [`HostHandle::cancel_handed_over`] cancels one by the number returned here.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// std::fs::write(dir.path().join("a.txt"), "one\n").unwrap();
    /// let handle = toolhost::HostHandle::spawn(toolhost::HostBuilder::new(dir.path())).unwrap();
    /// let (sender, records) = std::sync::mpsc::channel();
    /// let call = toolhost::CallRequest::new("fs-read", r#"{"path": "a.txt"}"#);
    /// assert!(handle.send_call_then(call, move |record| sender.send(record).unwrap()).is_ok());
    /// assert!(records.recv().unwrap().model_text().contains("one"));
    /// ```
    ///
    /// # Errors
    /// The call, unsent, when the host runs in a worker process.
    pub fn send_call_then(
        &self,
        call: CallRequest,
        then: impl FnOnce(CallRecord) + Send + 'static,
    ) -> std::result::Result<u64, CallRequest> {
        let Backend::Thread(thread) = &self.host else { return Err(call) };
        let (tool, arguments) = (call.tool.clone(), call.arguments.clone());
        let reply: Box<dyn FnOnce(Reply) + Send> = Box::new(move |reply| then(call_record(Ok(reply), tool, arguments)));
        // A thread that stopped has given `then` its record already.
        Ok(thread.send(Request::Call(call), true, reply).unwrap_or(0))
    }

    /// Cancels call `number` handed to the host's thread with [`HostHandle::send_call_then`]: it
    /// is interrupted if it runs, answered without running if it has not begun, and left alone if
    /// it was answered. The interrupt may come before the call's code began, and be forgotten: ask
    /// again until its record has come. (Calls out with a worker process are cancelled by their
    /// [`Canceller`].)
    pub fn cancel_handed_over(&self, number: u64) {
        if let (Backend::Thread(thread), Interrupt::Here(interrupter)) = (&self.host, &self.interrupter) {
            thread.cancels.cancel(number, || interrupter.interrupt());
        }
    }

    /// Calls `tool` with arguments as a model sent them, as JSON text.
    pub fn call(&self, tool: &str, arguments: &str) -> CallRecord {
        self.run_call(CallRequest::new(tool, arguments))
    }

    /// The catalogue in a provider's shape.
    ///
    /// # Errors
    /// When the host thread has stopped.
    pub fn catalogue(&self, format: Format) -> Result<Value> {
        match self.request(Request::Catalogue { format })? {
            Reply::Catalogue(value) => Ok(value),
            other => Err(unexpected(&other)),
        }
    }

    /// The P-format catalogue text.
    ///
    /// # Errors
    /// When the host thread has stopped.
    pub fn pformat_catalogue(&self) -> Result<String> {
        match self.request(Request::PformatCatalogue)? {
            Reply::Text(text) => Ok(text),
            other => Err(unexpected(&other)),
        }
    }

    /// Every tool's spec.
    ///
    /// # Errors
    /// When the host thread has stopped.
    pub fn specs(&self) -> Result<SpecSet> {
        match self.request(Request::Specs)? {
            Reply::Specs(specs) => Ok(specs),
            other => Err(unexpected(&other)),
        }
    }

    /// Evaluates Scheme source and renders its value as `toolhost eval` prints it.
    ///
    /// # Errors
    /// The evaluation's error, or the host thread has stopped.
    pub fn eval(&self, source: &str, limit: Option<Duration>) -> Result<String> {
        let limit_ms = limit.map(|l| u64::try_from(l.as_millis()).unwrap_or(u64::MAX));
        match self.request(Request::Eval { source: source.to_string(), limit_ms })? {
            Reply::Eval(result) => result,
            other => Err(unexpected(&other)),
        }
    }

    /// The tool files that failed to load.
    ///
    /// # Errors
    /// When the host thread has stopped.
    pub fn load_errors(&self) -> Result<Vec<Error>> {
        match self.request(Request::LoadErrors)? {
            Reply::LoadErrors(errors) => Ok(errors),
            other => Err(unexpected(&other)),
        }
    }

    /// Loads the tool folders and files again (see [`crate::Host::reload`]).
    ///
    /// # Errors
    /// When the host thread has stopped.
    pub fn reload(&self) -> Result<crate::host::ReloadReport> {
        match self.request(Request::Reload)? {
            Reply::Reload(report) => Ok(report),
            other => Err(unexpected(&other)),
        }
    }

    /// How many times a tool was registered or removed (see [`crate::Host::tool_changes`]): cheap to
    /// ask often, to learn that the tools changed (an MCP server's list did).
    ///
    /// # Errors
    /// When the host thread has stopped.
    pub fn tool_changes(&self) -> Result<u64> {
        match self.request(Request::ToolChanges)? {
            Reply::Count(count) => Ok(count),
            other => Err(unexpected(&other)),
        }
    }

    /// The folders and files tools are loaded from (see [`crate::Host::tool_paths`]).
    ///
    /// # Errors
    /// When the host thread has stopped.
    pub fn tool_paths(&self) -> Result<Vec<std::path::PathBuf>> {
        match self.request(Request::ToolPaths)? {
            Reply::Paths(paths) => Ok(paths),
            other => Err(unexpected(&other)),
        }
    }

    /// Ends the host's worker process at once, and what it runs with it (see
    /// [`crate::worker::WorkerInterrupter::kill`]); the call it ran fails with `crashed`, and the
    /// next request starts a fresh worker. For a server that is going away and must not leave its
    /// tools' processes behind. A host in this process cannot be ended so: it is only interrupted.
    pub fn kill_worker(&self) {
        match &self.interrupter {
            Interrupt::Here(interrupter) => interrupter.interrupt(),
            Interrupt::Worker(interrupter) => interrupter.kill(),
        }
        if let Some(started) = self.lanes.as_ref().and_then(|lanes| lanes.started.lock().ok()) {
            for lane in started.iter() {
                lane.kill_worker();
            }
        }
    }

    /// The worker process's id, while the host runs in one.
    pub fn worker_pid(&self) -> Option<u32> {
        match &self.interrupter {
            Interrupt::Here(_) => None,
            Interrupt::Worker(interrupter) => interrupter.worker_pid(),
        }
    }

    /// Whether the host runs in a worker process (which [`HostHandle::kill_worker`] can end).
    pub fn in_worker(&self) -> bool {
        matches!(self.host, Backend::Worker(_))
    }

    /// Stops the Scheme code the host is running now (the call it is in fails); later requests run
    /// normally.
    pub fn interrupt(&self) {
        match &self.interrupter {
            Interrupt::Here(interrupter) => interrupter.interrupt(),
            Interrupt::Worker(interrupter) => interrupter.interrupt(),
        }
        if let Some(started) = self.lanes.as_ref().and_then(|lanes| lanes.started.lock().ok()) {
            for lane in started.iter() {
                lane.interrupt();
            }
        }
    }
}

fn stopped() -> Error {
    Error::new(ErrorKind::Crashed, "the host thread has stopped")
}

/// The record a call's reply makes: a host that stopped or answered out of turn makes a failed one.
fn call_record(reply: Result<Reply>, tool: String, arguments: String) -> CallRecord {
    match reply {
        Ok(Reply::Call(record)) => *record,
        Ok(Reply::NotRun) => CallRecord::failed(tool, arguments, crate::host_request::not_run_error()),
        Ok(other) => CallRecord::failed(tool, arguments, unexpected(&other)),
        Err(e) => CallRecord::failed(tool, arguments, e),
    }
}

fn unexpected(reply: &Reply) -> Error {
    Error::tool_failed(format!("the host answered with an unexpected reply: {reply:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync + Clone>() {}

    #[test]
    fn the_handle_is_send_sync_and_clone_and_the_builder_is_send() {
        assert_send_sync::<HostHandle>();
        fn assert_send<T: Send>() {}
        assert_send::<HostBuilder>();
    }

    #[test]
    fn requests_and_replies_survive_a_trip_through_json() {
        let request = Request::Call(CallRequest::new("fs-read", r#"{"path":"a"}"#));
        let text = serde_json::to_string(&request).unwrap();
        assert_eq!(serde_json::from_str::<Request>(&text).unwrap(), request);
        let reply = Reply::Eval(Err(Error::new(ErrorKind::Script, "boom").at("x.scm", Some(3))));
        let text = serde_json::to_string(&reply).unwrap();
        assert_eq!(serde_json::from_str::<Reply>(&text).unwrap(), reply);
    }
}
