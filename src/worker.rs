//! Isolation (design section 18): the host in a worker process. Some failures cannot be caught in
//! process: a deep value printed or hashed overflows the stack, a huge allocation aborts, a
//! builtin runs past any interrupt. So `toolhost call` runs the host in a child `toolhost worker`
//! and speaks [`Request`]/[`Reply`] to it as JSON lines over a socket pair (descriptor 3 in the
//! child; never its standard output). The child runs under `setrlimit` limits on its address space
//! and (per request, as a backstop) its CPU time; each request has one deadline covering everything it does, nested tools
//! included. When the worker dies the request ends with `crashed`; when it overruns its deadline
//! plus a short grace it is killed and the request ends with `timeout`. Either way the next request
//! starts a fresh worker (tools loaded again) and works.
//!
//! Several calls may be out with a worker at once ([`WorkerHandle::send_call`]): it runs them one at
//! a time in the order sent, and a cancellation names the call it stops by its number, on a second
//! socket ([`WORKER_CONTROL_FD`]), so it cannot reach the call after it the way a signal could.
//!
//! The socket is the worker's alone: the worker marks it close-on-exec before anything else, so no
//! command or MCP server it starts inherits it (one that did could forge replies, or keep the socket
//! open after the worker died). And the parent watches the worker process itself (a pidfd) beside the
//! socket, so a worker's death ends the call at once even if some other process held the socket.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::process::{kill_process, prlimit, Pid, Resource, Rlimit, Signal};

use crate::call::{CallRecord, CallRequest};
use crate::error::{Error, ErrorKind, Result};
use crate::host_request::{Reply, Request};
use crate::relay::StderrRelay;

/// The worker process's side; only the `toolhost` executable runs it.
#[cfg(feature = "cli")]
mod serve;
#[cfg(feature = "cli")]
pub(crate) use serve::serve;

/// How long a worker that overran is given to stop what it runs after an interrupt, before it is
/// killed.
const INTERRUPT_GRACE: Duration = Duration::from_millis(500);

/// How long [`WorkerInterrupter::kill`] waits for the worker and its children to end.
const KILL_WAIT: Duration = Duration::from_secs(1);

/// The processes `pid` started that still run, from /proc (none where the kernel does not list
/// them).
fn children_of(pid: Pid) -> Vec<Pid> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", pid.as_raw_nonzero())) else { return Vec::new() };
    tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace().filter_map(|p| p.parse().ok().and_then(Pid::from_raw)).collect::<Vec<_>>()
        })
        .collect()
}

/// The descriptor the worker reads requests from and writes replies to.
pub const WORKER_FD: i32 = 3;

/// The descriptor the worker reads cancellations from: the number of a request (the first sent
/// is 1) as a line, which stops that request if it runs and skips it if it has not begun. Several
/// calls may be out with a worker at once ([`WorkerHandle::send_call`]); a number, unlike a
/// signal, cannot stop the wrong one.
pub const WORKER_CONTROL_FD: i32 = 4;

/// Sent before a request's JSON when the sender expects the next request right after its reply
/// (calls one at a time in a tight loop): the worker then looks for it for a moment before it
/// sleeps, since waking it would cost more than the call.
pub const LOOK_FOR_NEXT_MARK: char = '+';

/// How a worker is started and what bounds it.
#[derive(Debug, Clone)]
pub struct WorkerSpec {
    /// The `toolhost` executable.
    pub program: PathBuf,
    /// Its arguments, ending with the hidden `worker` subcommand.
    pub args: Vec<String>,
    /// The most address space the worker may map (`RLIMIT_AS`), in bytes.
    pub memory_bytes: u64,
    /// The deadline of one call of a tool other than `shell-exec` (the config's `scheme_call_s`).
    pub call_deadline: Duration,
    /// The deadline of one `shell-exec` call (the config's `shell_timeout_s`, its longest).
    pub shell_deadline: Duration,
    /// The deadline of one code-mode program, its tool calls included (the config's `program_s`).
    pub program_deadline: Duration,
    /// How long past a deadline the worker has to answer before it is killed.
    pub grace: Duration,
    /// How long a worker may take to start (build its host, load its tools).
    pub start_deadline: Duration,
    /// Environment variables set for the worker on top of this process's.
    pub env: Vec<(String, String)>,
    /// Whether the worker leads a process group of its own, so that ending it
    /// ([`WorkerInterrupter::kill`]) ends the processes it started with it. Only for a worker that
    /// never reads the terminal: a process outside the terminal's foreground group that does is
    /// stopped.
    pub own_process_group: bool,
}

impl WorkerSpec {
    /// A worker of `program` with `args` (ending with `worker`) and default bounds: 4 GiB of
    /// address space, 30 s per call, 120 s per shell-exec call or program, 2 s grace, 60 s to
    /// start.
    pub fn new(program: impl Into<PathBuf>, args: Vec<String>) -> Self {
        WorkerSpec {
            program: program.into(),
            args,
            memory_bytes: 4 << 30,
            call_deadline: Duration::from_secs(30),
            shell_deadline: Duration::from_secs(120),
            program_deadline: Duration::from_secs(120),
            grace: Duration::from_secs(2),
            start_deadline: Duration::from_secs(60),
            env: Vec::new(),
            own_process_group: false,
        }
    }

    /// The deadline of `request`, grace not included.
    fn deadline(&self, request: &Request) -> Duration {
        match request {
            Request::Call(call) if call.tool == "shell-exec" => self.shell_deadline.max(self.call_deadline),
            Request::Call(call) if call.tool == crate::code_mode::PROGRAM_TOOL => self.program_deadline,
            Request::Call(_) => self.call_deadline,
            Request::Eval { limit_ms: Some(ms), .. } => Duration::from_millis(*ms),
            _ => self.start_deadline,
        }
    }
}

/// A running worker.
struct Live {
    child: Child,
    to_worker: UnixStream,
    /// Where cancellations go ([`WORKER_CONTROL_FD`] in the worker).
    control: Arc<UnixStream>,
    /// How many requests were sent to this worker: the number of the last one.
    sent: u64,
    /// The replies, a JSON line each, read on the requesting thread: a reader thread in between
    /// would add two thread wake-ups to every call.
    from_worker: BufReader<UnixStream>,
    /// Readable once the worker has exited (`None` where the kernel has no pidfds: then the
    /// worker's exit status is polled).
    pidfd: Option<OwnedFd>,
    /// When the CPU backstop was last set, and for what deadline (see [`bound_cpu`]).
    cpu_bounded: Option<(Instant, Duration)>,
    /// The worker's standard error, relayed to ours; its last lines say why it died.
    stderr: StderrRelay,
    /// The time limit of the request sent last, grace included (what a timeout names).
    limit: Duration,
    /// The socket's read timeout as last set.
    read_timeout: Option<Duration>,
    /// The socket was seen readable since it was last read (by [`WorkerHandle::reply_ready`]).
    readable: bool,
    /// Once it has ended without answering a request: what became of the requests sent after it.
    after_end: Option<AfterEnd>,
}

/// What is known of the requests sent after the one a worker did not answer (it died, overran or
/// answered with something that is not a reply), once it has ended: which of them began.
#[derive(Debug, Default)]
pub(crate) struct AfterEnd {
    /// The worker answered that request (late, or garbled) and went on to the ones after it.
    pub(crate) went_on: bool,
    /// Its replies to the requests after it, in order, as many as it gave before it ended.
    pub(crate) replies: VecDeque<Reply>,
}

/// What reading a reply came to.
enum Heard {
    Reply(Reply),
    /// The worker closed its end (it died).
    Gone,
    /// The worker wrote a line that is not a reply (it is not sane, and is treated as dead).
    Garbled,
    TimedOut,
}

/// What waiting on the worker came to.
enum Woke {
    /// The socket has something to read (or was closed).
    Readable,
    /// The worker exited and the socket has nothing for us.
    Exited,
    /// Neither, within the wait.
    Nothing,
}

/// How long one wait may last where the worker's exit is polled rather than watched.
const EXIT_POLL: Duration = Duration::from_millis(100);

/// How long one read waits for the rest of a line before the worker is looked at again.
const READ_SLICE: Duration = Duration::from_millis(50);

/// How far ahead [`WorkerHandle::reply_whole`] looks for the end of a reply: most replies are a
/// few hundred bytes, and a longer one is read on a thread that may wait.
const GLANCE_BYTES: usize = 16 * 1024;

impl Live {
    /// Reads the next reply, waiting at most `limit`. The worker's death ends the wait at once,
    /// whoever else may hold the socket open.
    fn hear(&mut self, limit: Duration) -> Heard {
        let deadline = Instant::now() + limit;
        // Bytes, not a String: a line cut between two reads may end inside a UTF-8 character.
        let mut line = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            // Past the deadline what has come is still read, without waiting for more: a reply
            // that came in time is not thrown away because it was looked for late.
            if left.is_zero() && self.from_worker.buffer().is_empty() && !self.readable {
                match self.wait(Duration::ZERO) {
                    Woke::Readable => self.readable = true,
                    Woke::Exited | Woke::Nothing => return Heard::TimedOut,
                }
            }
            // Bytes already buffered, or seen waiting by `reply_ready`, need no wait.
            if self.from_worker.buffer().is_empty() && !std::mem::take(&mut self.readable) {
                match self.wait(left) {
                    Woke::Readable => {}
                    Woke::Exited => return Heard::Gone,
                    Woke::Nothing => continue,
                }
            }
            // A zero timeout would mean none; a millisecond is the least wait worth asking for.
            // (Set only when it changes: the same slice serves call after call.)
            let slice = left.min(READ_SLICE).max(Duration::from_millis(1));
            if self.read_timeout != Some(slice) {
                if self.from_worker.get_ref().set_read_timeout(Some(slice)).is_err() {
                    return Heard::Gone;
                }
                self.read_timeout = Some(slice);
            }
            match self.from_worker.read_until(b'\n', &mut line) {
                Ok(0) => return Heard::Gone,
                // A line is complete: a reply, or a sign the worker is not sane (treated as dead).
                Ok(_) if line.ends_with(b"\n") => {
                    return parse_reply(&line).map_or(Heard::Garbled, Heard::Reply);
                }
                Ok(_) => {}
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Heard::Gone,
            }
        }
    }

    /// Waits at most `limit` for the socket to become readable or the worker to exit.
    fn wait(&mut self, limit: Duration) -> Woke {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        let limit = if self.pidfd.is_some() { limit } else { limit.min(EXIT_POLL) };
        let timeout = Timespec::try_from(limit).ok();
        let socket = self.from_worker.get_ref().as_fd();
        let mut fds =
            [PollFd::from_borrowed_fd(socket, PollFlags::IN), PollFd::from_borrowed_fd(socket, PollFlags::IN)];
        let watched = match &self.pidfd {
            Some(pidfd) => {
                fds[1] = PollFd::new(pidfd, PollFlags::IN);
                2
            }
            None => 1,
        };
        if poll(&mut fds[..watched], timeout.as_ref()).is_err() {
            return Woke::Nothing;
        }
        if !fds[0].revents().is_empty() {
            return Woke::Readable;
        }
        let exited =
            if watched == 2 { !fds[1].revents().is_empty() } else { matches!(self.child.try_wait(), Ok(Some(_))) };
        if exited {
            Woke::Exited
        } else {
            Woke::Nothing
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // What it printed is relayed before this process goes on (and perhaps exits).
        let _ = self.stderr.last_lines(Duration::from_secs(1));
    }
}

/// The host in a worker process, restarted whenever it dies or overruns. Requests run one at a
/// time, in order.
pub struct WorkerHandle {
    spec: WorkerSpec,
    live: Option<Live>,
    /// What the last worker said when it started: its load errors.
    load_errors: Vec<Error>,
    /// How many workers were started, the first included.
    started: u64,
    /// The current worker's process id (0: none), shared with [`WorkerHandle::interrupter`]s.
    pid: Arc<AtomicU32>,
    /// What became of the requests sent after the last one a worker did not answer.
    after_end: Option<AfterEnd>,
}

/// Interrupts what the worker is running (SIGINT, which the worker turns into an interrupt of
/// its host), or ends the worker, from any thread.
#[derive(Clone, Debug)]
pub struct WorkerInterrupter {
    pid: Arc<AtomicU32>,
    own_process_group: bool,
}

impl WorkerInterrupter {
    /// Interrupts the running call, if a worker runs.
    pub fn interrupt(&self) {
        // At worst the worker is gone already.
        if let Some(pid) = self.worker() {
            let _ = kill_process(pid, Signal::INT);
        }
    }

    /// Ends the worker at once (SIGKILL) and what it started, and waits (at most a second)
    /// until they have ended. A supervised command's supervisor sees the worker's end of its stop
    /// pipe close and kills everything the command started; an unsupervised command's process
    /// group is killed here; when the worker leads a process group of its own, what is left in
    /// it (an MCP server that did not end with its input) is killed last. The call it ran ends
    /// with `crashed`; the next request starts a fresh worker.
    pub fn kill(&self) {
        use rustix::process::{kill_process_group, pidfd_open, PidfdFlags};
        let Some(pid) = self.worker() else { return };
        let children = children_of(pid);
        let mut ends: Vec<OwnedFd> =
            children.iter().filter_map(|&child| pidfd_open(child, PidfdFlags::empty()).ok()).collect();
        ends.extend(pidfd_open(pid, PidfdFlags::empty()).ok());
        let _ = kill_process(pid, Signal::KILL);
        for &child in &children {
            // A command without a supervisor leads its own process group (the worker kills it so).
            if rustix::process::getpgid(Some(child)).is_ok_and(|group| group == child) {
                let _ = kill_process_group(child, Signal::KILL);
            }
        }
        let deadline = Instant::now() + KILL_WAIT;
        for end in &ends {
            let left = deadline.saturating_duration_since(Instant::now());
            let timeout = rustix::event::Timespec::try_from(left).ok();
            let mut fds = [rustix::event::PollFd::new(end, rustix::event::PollFlags::IN)];
            let _ = rustix::event::poll(&mut fds, timeout.as_ref());
        }
        if self.own_process_group {
            let _ = kill_process_group(pid, Signal::KILL);
        }
    }

    fn worker(&self) -> Option<Pid> {
        i32::try_from(self.pid.load(Ordering::SeqCst)).ok().and_then(Pid::from_raw)
    }

    /// The running worker's process id.
    pub fn worker_pid(&self) -> Option<u32> {
        Some(self.pid.load(Ordering::SeqCst)).filter(|&pid| pid != 0)
    }
}

impl WorkerHandle {
    /// Starts a worker by `spec` and waits until its host is built.
    ///
    /// # Errors
    /// When the worker cannot be started or does not come up within the start deadline.
    pub fn spawn(spec: WorkerSpec) -> Result<WorkerHandle> {
        let mut handle = WorkerHandle {
            spec,
            live: None,
            load_errors: Vec::new(),
            started: 0,
            pid: Arc::new(AtomicU32::new(0)),
            after_end: None,
        };
        handle.start()?;
        Ok(handle)
    }

    /// The load errors the current worker reported as it started.
    pub fn load_errors(&self) -> &[Error] {
        &self.load_errors
    }

    /// How many workers were started so far (1 until one died or was killed).
    pub fn workers_started(&self) -> u64 {
        self.started
    }

    /// The current worker's process id.
    pub fn worker_pid(&self) -> Option<u32> {
        self.live.as_ref().map(|l| l.child.id())
    }

    /// Starts a worker if none runs, waiting until it is ready.
    ///
    /// # Errors
    /// When it does not start (see [`WorkerHandle::spawn`]).
    pub fn ensure_started(&mut self) -> Result<()> {
        if self.live.is_some() {
            return Ok(());
        }
        self.start()
    }

    /// What interrupts this handle's running call from another thread.
    pub fn interrupter(&self) -> WorkerInterrupter {
        WorkerInterrupter { pid: Arc::clone(&self.pid), own_process_group: self.spec.own_process_group }
    }

    fn start(&mut self) -> Result<()> {
        self.pid.store(0, Ordering::SeqCst);
        self.live = None;
        self.after_end = None;
        let (mine, theirs) =
            UnixStream::pair().map_err(|e| crashed(format!("cannot make the worker's socket: {e}")))?;
        let (control, control_theirs) =
            UnixStream::pair().map_err(|e| crashed(format!("cannot make the worker's socket: {e}")))?;
        let theirs_fd = std::os::fd::AsRawFd::as_raw_fd(&theirs);
        let control_fd = std::os::fd::AsRawFd::as_raw_fd(&control_theirs);
        let memory = self.spec.memory_bytes;
        let mut command = Command::new(&self.spec.program);
        command
            .args(&self.spec.args)
            .envs(self.spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if self.spec.own_process_group {
            command.process_group(0);
        }
        // SAFETY: only async-signal-safe calls (fcntl, dup2, setrlimit) between fork and exec.
        unsafe {
            command.pre_exec(move || {
                // The control socket moves out of the way first if it sits where the requests'
                // must go.
                let control_fd = if control_fd == WORKER_FD {
                    libc::fcntl(control_fd, libc::F_DUPFD_CLOEXEC, 5)
                } else {
                    control_fd
                };
                for (fd, target) in [(theirs_fd, WORKER_FD), (control_fd, WORKER_CONTROL_FD)] {
                    if fd < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    if fd == target {
                        // dup2 onto itself would keep close-on-exec set.
                        if libc::fcntl(target, libc::F_SETFD, 0) < 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    } else if libc::dup2(fd, target) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                let limit = libc::rlimit { rlim_cur: memory as libc::rlim_t, rlim_max: memory as libc::rlim_t };
                if libc::setrlimit(libc::RLIMIT_AS, &limit) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command.spawn().map_err(|e| crashed(format!("cannot start the worker: {e}")))?;
        drop(theirs);
        drop(control_theirs);
        let stderr = match child.stderr.take() {
            Some(piped) => StderrRelay::start(piped),
            None => StderrRelay::start(std::io::empty()),
        };
        self.started += 1;
        self.pid.store(child.id(), Ordering::SeqCst);
        let reader = mine.try_clone().map_err(|e| crashed(format!("cannot read the worker's socket: {e}")))?;
        let pidfd = rustix::process::Pid::from_raw(child.id() as i32)
            .and_then(|pid| rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok());
        let mut live = Live {
            child,
            to_worker: mine,
            control: Arc::new(control),
            sent: 0,
            from_worker: BufReader::new(reader),
            pidfd,
            cpu_bounded: None,
            stderr,
            limit: self.spec.start_deadline,
            read_timeout: None,
            readable: false,
            after_end: None,
        };
        match live.hear(self.spec.start_deadline) {
            Heard::Reply(Reply::LoadErrors(errors)) => self.load_errors = errors,
            Heard::Reply(_) | Heard::Gone | Heard::Garbled => {
                let said = last_words(&live);
                return Err(crashed(format!("the worker stopped before its host was built{said}")));
            }
            Heard::TimedOut => return Err(Error::new(ErrorKind::Timeout, "the worker did not start in time")),
        }
        self.live = Some(live);
        Ok(())
    }

    /// Sends `request` to the worker (starting one if none runs) and waits for the reply within
    /// the request's deadline plus the grace.
    ///
    /// # Errors
    /// `crashed` when the worker died, `timeout` when it overran (it is then killed); the next
    /// request starts a fresh worker.
    pub fn request(&mut self, request: &Request) -> Result<Reply> {
        if self.live.is_none() {
            self.start()?;
        }
        let deadline = Instant::now() + self.spec.deadline(request) + self.spec.grace;
        let outcome = self.send(request, deadline).and_then(|number| self.receive(deadline, number));
        self.forget_if_failed(&outcome);
        outcome
    }

    /// Sends `request` to the live worker, its CPU backstop set for a reply by `deadline`: the
    /// request's number.
    fn send(&mut self, request: &Request, deadline: Instant) -> Result<u64> {
        let Some(live) = self.live.as_mut() else { return Err(crashed("no worker runs".into())) };
        let limit = deadline.saturating_duration_since(Instant::now());
        live.send(request, limit, false, true).map_err(|_| crashed(died(live)))
    }

    /// Reads the reply to request `number`, the next one due, by `deadline`.
    fn receive(&mut self, deadline: Instant, number: u64) -> Result<Reply> {
        match self.live.as_mut() {
            Some(live) => live.receive(deadline, number),
            None => Err(crashed("no worker runs".into())),
        }
    }

    /// After a failed request the worker is killed (dropped) now; the next request starts a
    /// fresh one.
    fn forget_if_failed<T>(&mut self, outcome: &Result<T>) {
        if outcome.is_err() {
            self.end_worker();
        }
    }

    /// Kills the worker (dropping it does); the next request starts a fresh one.
    pub(crate) fn end_worker(&mut self) {
        self.pid.store(0, Ordering::SeqCst);
        self.after_end = self.live.take().and_then(|mut live| live.after_end.take());
    }

    /// What became of the requests sent after the last one a worker did not answer, once taken.
    pub(crate) fn take_after_end(&mut self) -> Option<AfterEnd> {
        self.after_end.take()
    }

    /// Runs one JSON call in the worker. A worker that dies or overruns ends it with `crashed` or
    /// `timeout`.
    pub fn run_call(&mut self, call: CallRequest) -> CallRecord {
        match self.send_call(call) {
            Ok(sent) => self.finish_call(sent),
            Err(record) => *record,
        }
    }

    /// Sends one JSON call to the worker (starting one if none runs) and returns without waiting
    /// for its reply: [`WorkerHandle::finish_call`] reads it. More calls may be sent before it is
    /// read; the worker runs them in the order sent, and their replies are read in that order, each
    /// once [`WorkerHandle::begin_next`] has been told the one before was read. Meanwhile one of
    /// [`WorkerHandle::wake_fds`] becomes readable once a reply (or the worker's end) is there, and
    /// [`WorkerHandle::reply_ready`] says so without waiting.
    ///
    /// # Errors
    /// The call's record, when it could not be sent (no worker starts, or it died).
    pub fn send_call(&mut self, call: CallRequest) -> std::result::Result<SentCall, Box<CallRecord>> {
        let started = Instant::now();
        let request = Request::Call(call);
        let sent = if self.live.is_none() { self.start() } else { Ok(()) };
        // The deadline counts from the call's sending, not from a worker's start before it.
        let allowed = self.spec.deadline(&request) + self.spec.grace;
        let deadline = Instant::now() + allowed;
        let sent = sent.and_then(|()| self.send(&request, deadline));
        self.forget_if_failed(&sent);
        let Request::Call(call) = request else { unreachable!("the request was made a call above") };
        match sent {
            Ok(number) => Ok(SentCall { call, started, deadline, allowed, number }),
            Err(e) => Err(Box::new(failed_call(call, started, e))),
        }
    }

    /// Sends `call` to the running worker as [`WorkerHandle::send_call`] does, without starting one
    /// and without judging a failure: the call comes back unsent when no worker runs or it could
    /// not take the call (it died; the replies of the calls out before it, read next, tell what
    /// became of them). `runs_now`: no call is out before it, so the CPU backstop is set for it
    /// (a call sent behind others gets it when it begins, see [`WorkerHandle::begin_next`]).
    ///
    /// # Errors
    /// The call, unsent.
    pub fn send_call_as_is(
        &mut self,
        call: CallRequest,
        look_for_next: bool,
        runs_now: bool,
    ) -> std::result::Result<SentCall, CallRequest> {
        let Some(live) = self.live.as_mut() else { return Err(call) };
        let started = Instant::now();
        let request = Request::Call(call);
        let allowed = self.spec.deadline(&request) + self.spec.grace;
        let sent = live.send(&request, allowed, look_for_next, runs_now);
        let Request::Call(call) = request else { unreachable!("the request was made a call above") };
        match sent {
            Ok(number) => Ok(SentCall { call, started, deadline: started + allowed, allowed, number }),
            Err(_) => Err(call),
        }
    }

    /// The call sent after one whose reply was just read begins now in the worker: its deadline
    /// counts from now if that is later than from its sending (it waited its turn behind the
    /// others), and the worker's CPU backstop is set for it.
    pub fn begin_next(&mut self, sent: &mut SentCall) {
        sent.deadline = sent.deadline.max(Instant::now() + sent.allowed);
        if let Some(live) = self.live.as_mut() {
            live.bound(sent.allowed);
            live.stderr.forget();
        }
    }

    /// Reads the reply to `sent`, waiting until its deadline (then the worker is interrupted and
    /// killed, and the record says `timeout`); a worker that died gives a `crashed` record.
    pub fn finish_call(&mut self, sent: SentCall) -> CallRecord {
        let outcome = self.receive(sent.deadline, sent.number);
        self.forget_if_failed(&outcome);
        match outcome {
            Ok(Reply::Call(record)) => *record,
            Ok(Reply::NotRun) => failed_call(sent.call, sent.started, crate::host_request::not_run_error()),
            Ok(_) => failed_call(sent.call, sent.started, crashed("the worker answered out of turn".into())),
            Err(e) => failed_call(sent.call, sent.started, e),
        }
    }

    /// What cancels calls sent to the current worker, by their number, from any thread (none
    /// while no worker runs).
    pub fn canceller(&self) -> Option<Canceller> {
        let live = self.live.as_ref()?;
        Some(Canceller { worker: self.started, control: Arc::clone(&live.control) })
    }

    /// Gives up on the reply to `sent`: the worker, whose next reply would be that one, is ended,
    /// and the next request starts a fresh one.
    pub fn abandon(&mut self, sent: SentCall) {
        drop(sent);
        self.end_worker();
    }

    /// What to wait on, beside other things, for the reply to a call sent with
    /// [`WorkerHandle::send_call`]: the socket the replies come on, and the worker's pidfd (where the
    /// kernel has them), which becomes readable when it exits. Only [`WorkerHandle::finish_call`]
    /// reads the socket.
    pub fn wake_fds(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        let Some(live) = &self.live else { return Vec::new() };
        std::iter::once(live.from_worker.get_ref().as_fd()).chain(live.pidfd.as_ref().map(AsFd::as_fd)).collect()
    }

    /// Whether [`WorkerHandle::finish_call`] would return without waiting for the worker: a reply
    /// has come (in whole or in part), the worker has ended, or none runs.
    pub fn reply_ready(&mut self) -> bool {
        let Some(live) = self.live.as_mut() else { return true };
        if !live.from_worker.buffer().is_empty() || live.readable {
            return true;
        }
        match live.wait(Duration::ZERO) {
            Woke::Readable => live.readable = true,
            Woke::Exited => return true,
            Woke::Nothing => {}
        }
        live.readable
    }

    /// Whether the whole of the next reply has come, so [`WorkerHandle::finish_call`] reads it
    /// without waiting at all (and without the waits a dead worker's end takes). Looks at most
    /// 16 KiB ahead: a longer reply counts as not whole. The look is the only system call it
    /// takes, and it serves as [`WorkerHandle::reply_ready`]'s too.
    pub fn reply_whole(&mut self) -> bool {
        let Some(live) = self.live.as_mut() else { return false };
        if live.from_worker.buffer().contains(&b'\n') {
            return true;
        }
        let mut ahead = [0u8; GLANCE_BYTES];
        let flags = rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT;
        let whole = match rustix::net::recv(live.from_worker.get_ref(), &mut ahead, flags) {
            Ok((seen, _)) => ahead[..seen.min(GLANCE_BYTES)].contains(&b'\n'),
            Err(_) => false,
        };
        live.readable |= whole;
        whole
    }

    /// [`WorkerHandle::run_call`] with JSON arguments as text.
    pub fn call(&mut self, tool: &str, arguments: &str) -> CallRecord {
        self.run_call(CallRequest::new(tool, arguments))
    }
}

/// How deeply a reply may nest: a call's result as deeply as any value may ([`MAX_DEPTH`]), inside
/// the reply's own few levels.
///
/// [`MAX_DEPTH`]: crate::value::MAX_DEPTH
const MOST_REPLY_DEPTH: usize = crate::value::MAX_DEPTH + 16;

/// A reply line as a [`Reply`]; `None` when it is not one. serde_json's own limit (128 levels)
/// would refuse a result nested close to the values' limit once inside the reply, so the nesting is
/// measured first and the parser's limit lifted: a worker gone wrong still cannot make this
/// process's stack overflow with a reply nested a million deep.
fn parse_reply(line: &[u8]) -> Option<Reply> {
    use serde::Deserialize;
    if nesting(line) > MOST_REPLY_DEPTH {
        return None;
    }
    let mut parser = serde_json::Deserializer::from_slice(line);
    parser.disable_recursion_limit();
    let reply = Reply::deserialize(&mut parser).ok()?;
    parser.end().ok()?;
    Some(reply)
}

/// How deeply the arrays and objects of JSON text nest (brackets in strings not counted).
fn nesting(json: &[u8]) -> usize {
    let (mut depth, mut most, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &byte in json {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                most = most.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    most
}

/// The CPU seconds `pid` has used so far (user and system), from /proc; `None` when unreadable.
fn cpu_seconds(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; the fields after its closing parenthesis are
    // state (3), ... utime (14), stime (15).
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    let per_second = Some(rustix::param::clock_ticks_per_second()).filter(|&t| t > 0)?;
    Some(ticks / per_second)
}

/// Bounds the CPU time the worker may use for the next request (`RLIMIT_CPU`, set from here with
/// prlimit): what it used so far plus the request's limit for each core, and some slack. A backstop
/// behind the wall-clock deadline, which is what normally ends a call: the kernel stops a worker
/// that burns CPU past it (SIGXCPU) even if this process could not.
fn bound_cpu(pid: u32, limit: Duration) {
    let Some(used) = cpu_seconds(pid) else { return };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    let soft = used + limit.as_secs().saturating_add(1).saturating_mul(cores) + 5;
    // Only the soft limit moves (SIGXCPU ends the worker there): lowering the hard limit could not
    // be undone for the next request without privileges.
    let bound = Rlimit { current: Some(soft), maximum: None };
    if let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        let _ = prlimit(Some(pid), Resource::Cpu, bound);
    }
}

impl Live {
    /// Kills the worker, which did not answer the request due in time (`answered`: it did, too late
    /// or garbled, and then its replies to the requests after it were `replies`), and keeps what it
    /// answered of the requests after it ([`AfterEnd`]), with what more it wrote before it died.
    fn end_keeping_replies(&mut self, answered: bool, mut replies: VecDeque<Reply>) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The worker is gone: what it wrote is read without waiting, up to its end.
        while let Heard::Reply(reply) = self.hear(Duration::ZERO) {
            replies.push_back(reply);
        }
        // Not answered in time, the request due may have been answered before the kill: then the
        // first reply read now is its.
        let went_on = answered || replies.pop_front().is_some();
        self.after_end = Some(AfterEnd { went_on, replies });
    }

    /// Writes `request` to the worker, whose reply is due within `limit`: its number. `runs_now`:
    /// nothing is out before it, so the CPU backstop is set for it (set for a call sent behind a
    /// longer one, it could cut the one that runs short).
    fn send(
        &mut self,
        request: &Request,
        limit: Duration,
        look_for_next: bool,
        runs_now: bool,
    ) -> std::io::Result<u64> {
        if runs_now {
            self.bound(limit);
            self.stderr.forget();
        }
        let mut line = Vec::with_capacity(256);
        if look_for_next {
            line.push(LOOK_FOR_NEXT_MARK as u8);
        }
        serde_json::to_writer(&mut line, request)?;
        line.push(b'\n');
        self.to_worker.write_all(&line).and_then(|()| self.to_worker.flush())?;
        self.sent += 1;
        Ok(self.sent)
    }

    /// Sets the CPU backstop for a request due within `limit`, the limit a timeout names.
    fn bound(&mut self, limit: Duration) {
        // The backstop need not move for every call: CPU time grows at most as fast as the wall
        // clock times the cores, so a bound set less than a second ago for a deadline at least as
        // long still leaves this call its deadline's worth on every core and the 5 s of slack.
        // Reading /proc and calling prlimit for each call would be a third of a quick call's cost.
        let fresh =
            self.cpu_bounded.is_some_and(|(at, bounded)| at.elapsed() < Duration::from_secs(1) && limit <= bounded);
        if !fresh {
            bound_cpu(self.child.id(), limit);
            self.cpu_bounded = Some((Instant::now(), limit));
        }
        self.limit = limit;
    }

    /// Reads the reply to request `number`, the next one due, waiting until `deadline`; past it
    /// the worker is interrupted, then killed.
    fn receive(&mut self, deadline: Instant, number: u64) -> Result<Reply> {
        match self.hear(deadline.saturating_duration_since(Instant::now())) {
            Heard::Reply(reply) => Ok(reply),
            // It died in this request: none after it began.
            Heard::Gone => {
                self.after_end = Some(AfterEnd::default());
                Err(crashed(died(self)))
            }
            Heard::Garbled => {
                self.end_keeping_replies(true, VecDeque::new());
                Err(crashed(
                    "the worker answered with something that is not a reply; it was ended, and a fresh \
                     worker takes the next call"
                        .into(),
                ))
            }
            Heard::TimedOut => {
                // An interrupt first, so a running shell-exec kills its command's process group
                // (which SIGKILL of the worker alone would leave running); then the kill. The
                // requests sent after this one are cancelled before it is stopped (the worker reads
                // its cancellations in order), so none of them begins in the grace: they never ran,
                // and are sent again to a fresh worker. Only where the cancellations cannot be
                // written is the worker sent SIGINT (our own child, not yet waited for: the pid is
                // still its).
                let cancels: String = (number + 1..=self.sent).chain([number]).map(|n| format!("{n}\n")).collect();
                let flags = rustix::net::SendFlags::DONTWAIT | rustix::net::SendFlags::NOSIGNAL;
                let told = rustix::net::send(&*self.control, cancels.as_bytes(), flags)
                    .is_ok_and(|written| written == cancels.len());
                if !told {
                    if let Some(pid) = i32::try_from(self.child.id()).ok().and_then(Pid::from_raw) {
                        let _ = kill_process(pid, Signal::INT);
                    }
                }
                // Once it has answered, the calls behind it answer at once (cancelled, they do not
                // run) within what is left of the grace; one that began is stopped the same way.
                let grace_ends = Instant::now() + INTERRUPT_GRACE;
                let answered = matches!(self.hear(INTERRUPT_GRACE), Heard::Reply(_));
                let mut replies = VecDeque::new();
                while answered && (replies.len() as u64) < self.sent - number {
                    match self.hear(grace_ends.saturating_duration_since(Instant::now())) {
                        Heard::Reply(reply) => replies.push_back(reply),
                        _ => break,
                    }
                }
                self.end_keeping_replies(answered, replies);
                Err(Error::new(
                    ErrorKind::Timeout,
                    format!(
                        "the call ran past its time limit of {:.1} s and was stopped (its worker process was \
                         killed and a fresh one takes the next call)",
                        self.limit.as_secs_f64()
                    ),
                ))
            }
        }
    }
}

/// A call sent to a worker whose reply is still to be read ([`WorkerHandle::send_call`]).
#[derive(Debug)]
#[must_use = "the reply must be read with finish_call before the worker's next reply is"]
pub struct SentCall {
    call: CallRequest,
    started: Instant,
    /// Its deadline, the grace included.
    deadline: Instant,
    /// How long it may run, the grace included.
    allowed: Duration,
    /// Its number among the requests its worker was sent.
    number: u64,
}

impl SentCall {
    /// When the reply is due, the grace included: [`WorkerHandle::finish_call`] waits until then,
    /// and then ends the call as a timeout.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Its number among the requests its worker was sent, which [`Canceller::cancel`] takes.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The call, to be sent again when its worker ended before it began.
    pub fn into_call(self) -> CallRequest {
        self.call
    }
}

/// Cancels calls sent to one worker by their number ([`WorkerHandle::canceller`]).
#[derive(Clone, Debug)]
pub struct Canceller {
    worker: u64,
    control: Arc<UnixStream>,
}

impl Canceller {
    /// Stops call `number` of this worker if it runs, or has it answered without running if it
    /// has not begun; a call already answered is left alone. The stop of a running call may come
    /// before its Scheme code began, and be forgotten: ask again until its reply has come. Never
    /// waits (a worker too far behind to read its cancellations misses this one).
    pub fn cancel(&self, number: u64) {
        let line = format!("{number}\n");
        let flags = rustix::net::SendFlags::DONTWAIT | rustix::net::SendFlags::NOSIGNAL;
        let _ = rustix::net::send(&*self.control, line.as_bytes(), flags);
    }

    /// Which of the handle's workers it cancels calls of (see [`WorkerHandle::workers_started`]).
    pub fn worker(&self) -> u64 {
        self.worker
    }
}

/// The record of a call the worker gave no reply to.
fn failed_call(call: CallRequest, started: Instant, error: Error) -> CallRecord {
    let error = error.with_tool(&call.tool);
    let mut record = CallRecord::failed(call.tool, call.arguments, error);
    record.elapsed = started.elapsed();
    record
}

/// Why the worker died, as far as its exit status and its last words tell.
fn died(live: &mut Live) -> String {
    use std::os::unix::process::ExitStatusExt;
    let child = &mut live.child;
    let status = (0..200).find_map(|_| match child.try_wait() {
        Ok(Some(status)) => Some(status),
        Ok(None) => {
            std::thread::sleep(Duration::from_millis(10));
            None
        }
        Err(_) => None,
    });
    let how = match status.and_then(|s| s.signal()) {
        Some(libc::SIGSEGV) | Some(libc::SIGBUS) => " (it overflowed its stack or touched bad memory)".to_string(),
        Some(libc::SIGABRT) => " (it aborted, most often out of memory: a value too large was built)".to_string(),
        Some(libc::SIGXCPU) => " (it used up its CPU time)".to_string(),
        Some(libc::SIGKILL) => " (it was killed)".to_string(),
        Some(n) => format!(" (signal {n})"),
        None => status.and_then(|s| s.code()).map(|c| format!(" (exit status {c})")).unwrap_or_default(),
    };
    let said = last_words(live);
    format!("the tool crashed its worker process{how}{said}; the call was lost, and a fresh worker takes the next call")
}

/// What the worker last printed on standard error, as `: "line"; "line"`, or nothing.
fn last_words(live: &Live) -> String {
    // Its standard error ends as it dies, unless a process it started holds it open.
    let lines = live.stderr.last_lines(Duration::from_secs(1));
    if lines.is_empty() {
        return String::new();
    }
    let quoted: Vec<String> = lines.iter().map(|l| format!("{l:?}")).collect();
    format!(": it printed {}", quoted.join(", "))
}

fn crashed(message: String) -> Error {
    Error::new(ErrorKind::Crashed, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_counts_brackets_outside_strings_only() {
        assert_eq!(nesting(br#"{"a": "[[[[{{", "b": [1, [2]]}"#), 3);
        assert_eq!(nesting(br#"["\"[[[", [1], "\\"]"#), 2);
        assert_eq!(nesting(b"1"), 0);
        let deep = format!("{}{}", "[".repeat(MOST_REPLY_DEPTH + 1), "]".repeat(MOST_REPLY_DEPTH + 1));
        assert!(parse_reply(deep.as_bytes()).is_none(), "a reply nested past the bound is refused unparsed");
    }
}
