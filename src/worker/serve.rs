//! The worker process's side (`toolhost worker`, feature `cli`): the host built in the child,
//! answering the parent's requests over [`WORKER_FD`] in the order they come, and stopping the
//! one a cancellation on [`WORKER_CONTROL_FD`] names.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use super::{LOOK_FOR_NEXT_MARK, WORKER_CONTROL_FD, WORKER_FD};
use crate::error::Error;
use crate::host::HostBuilder;
use crate::host_request::{answer, Cancels, Reply, Request};

/// The worker's side: builds the host from `builder`, says it is ready (its load errors), then
/// answers requests read from [`WORKER_FD`] until the other end closes. The socket is made
/// close-on-exec first, so no process the worker starts inherits it, and standard output is pointed
/// at standard error, so nothing the host prints can reach whoever reads the parent's. Returns the
/// exit code.
pub fn serve(builder: HostBuilder, rust_tools: bool) -> i32 {
    use std::os::fd::FromRawFd;
    // SAFETY: descriptor 3 was set up by the parent (see `WorkerHandle::start`) and is owned here
    // alone.
    let socket = unsafe { OwnedFd::from_raw_fd(WORKER_FD) };
    // Its copy (`try_clone` below) and every other descriptor this process makes are close-on-exec
    // already: Rust opens them so.
    if rustix::io::fcntl_setfd(&socket, rustix::io::FdFlags::CLOEXEC).is_err() {
        return 1;
    }
    // SAFETY: as descriptor 3, descriptor 4 is the parent's (see `WorkerHandle::start`), owned
    // here alone; it is looked at before it is taken, and a worker started without it ends.
    let control = rustix::io::fcntl_getfd(unsafe { std::os::fd::BorrowedFd::borrow_raw(WORKER_CONTROL_FD) })
        .is_ok()
        .then(|| unsafe { OwnedFd::from_raw_fd(WORKER_CONTROL_FD) });
    let Some(control) = control.filter(|fd| rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::CLOEXEC).is_ok()) else {
        return 1;
    };
    let _ = rustix::stdio::dup2_stdout(rustix::stdio::stderr());
    let socket = UnixStream::from(socket);
    let Ok(writer) = socket.try_clone() else { return 1 };
    if rust_tools {
        return serve_rust_tools(builder, socket, writer, control);
    }
    let mut host = match builder.display_to_stderr(true).build() {
        Ok(host) => host,
        Err(e) => {
            eprintln!("toolhost worker: {e}");
            return 1;
        }
    };
    // Ctrl-C at a terminal reaches the worker too (and the parent passes its interrupts on as
    // SIGINT): each one interrupts the running call instead of killing the worker.
    let interrupter = host.interrupter();
    let on_signal = interrupter.clone();
    let _ = ctrlc::set_handler(move || on_signal.interrupt());
    let cancels = watch_cancellations(control, move || interrupter.interrupt());
    let load_errors = host.load_errors().to_vec();
    answer_requests(socket, writer, load_errors, &cancels, |request| Some(answer(&mut host, request)))
}

/// Reads request numbers from `control`, a line each, on a thread of its own, and cancels each
/// in `cancels` (`interrupt` stops the running request). The thread sleeps in its read between
/// cancellations: a call costs it nothing.
fn watch_cancellations(control: OwnedFd, interrupt: impl Fn() + Send + 'static) -> Cancels {
    let cancels = Cancels::default();
    let shared = cancels.clone();
    let reader = BufReader::new(UnixStream::from(control));
    let started = std::thread::Builder::new().name("toolhost-worker-cancel".into()).spawn(move || {
        for line in reader.lines() {
            let Ok(line) = line else { break };
            if let Ok(number) = line.trim().parse::<u64>() {
                shared.cancel(number, &interrupt);
            }
        }
    });
    if started.is_err() {
        eprintln!("toolhost worker: cancellations cannot be read; a cancelled call runs to its end");
    }
    cancels
}

/// Says the worker is ready (with its load errors), then answers each request read from `socket`
/// until the other end closes or `reply` has no answer for one; a call cancelled before it began
/// is answered as such without running. Returns the exit code.
fn answer_requests(
    socket: UnixStream,
    mut writer: UnixStream,
    load_errors: Vec<Error>,
    cancels: &Cancels,
    mut reply: impl FnMut(Request) -> Option<Reply>,
) -> i32 {
    if !send(&mut writer, &Reply::LoadErrors(load_errors)) {
        return 1;
    }
    let mut reader = BufReader::new(socket);
    let mut look_for_next = false;
    for number in 1.. {
        if look_for_next && reader.buffer().is_empty() {
            request_waiting(reader.get_ref(), Instant::now() + LOOK_FOR_NEXT);
        }
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let json = line.strip_prefix(LOOK_FOR_NEXT_MARK);
        look_for_next = json.is_some();
        let Ok(request) = serde_json::from_str::<Request>(json.unwrap_or(&line)) else { break };
        let answer = if cancels.begin(number) {
            let answer = reply(request);
            cancels.end();
            answer
        } else {
            Some(Reply::NotRun)
        };
        let Some(answer) = answer else { break };
        if !send(&mut writer, &answer) {
            break;
        }
    }
    0
}

/// How long the worker looks for the next request before it sleeps, after answering one marked
/// [`LOOK_FOR_NEXT_MARK`] (the server sends calls one at a time in a tight loop). A worker asleep
/// must be woken for each request, which costs more than a quick call where an idle core takes tens
/// of microseconds to wake (a virtual machine's); looking costs at most this long a call, and only
/// while calls come this fast. The looking yields its core to whatever else would run there.
const LOOK_FOR_NEXT: Duration = Duration::from_micros(200);

/// Whether a request has come on `socket`, looking until `until` (at least once).
fn request_waiting(socket: &UnixStream, until: Instant) -> bool {
    let flags = rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT;
    let mut byte = [0u8; 1];
    loop {
        if rustix::net::recv(socket, &mut byte, flags).is_ok() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::yield_now();
    }
}

/// Sends one reply as a JSON line; false when the parent is gone.
fn send(writer: &mut UnixStream, reply: &Reply) -> bool {
    let Ok(mut line) = serde_json::to_string(reply) else { return false };
    line.push('\n');
    writer.write_all(line.as_bytes()).and_then(|()| writer.flush()).is_ok()
}

/// [`serve`] with the Rust tools alone (see [`HostBuilder::build_rust_tools`]): calls are
/// answered; anything else needs the interpreter, and ends the worker.
fn serve_rust_tools(builder: HostBuilder, socket: UnixStream, writer: UnixStream, control: OwnedFd) -> i32 {
    let host = match builder.build_rust_tools() {
        Ok(host) => host,
        Err(e) => {
            eprintln!("toolhost worker: {e}");
            return 1;
        }
    };
    let cancel = host.cancel();
    let on_signal = cancel.clone();
    let _ = ctrlc::set_handler(move || on_signal.cancel());
    let cancels = watch_cancellations(control, move || cancel.cancel());
    answer_requests(socket, writer, Vec::new(), &cancels, |request| match request {
        Request::Call(call) => Some(Reply::Call(Box::new(host.run_call(&call)))),
        Request::LoadErrors => Some(Reply::LoadErrors(Vec::new())),
        // The Rust tools alone never change.
        Request::ToolChanges => Some(Reply::Count(0)),
        _ => None,
    })
}
