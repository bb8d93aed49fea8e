//! The worker process's side (`toolhost worker`, feature `cli`): the host built in the child,
//! answering the parent's requests over [`WORKER_FD`].

use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;

use super::WORKER_FD;
use crate::error::Error;
use crate::host::HostBuilder;
use crate::host_request::{answer, Reply, Request};

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
    let _ = rustix::stdio::dup2_stdout(rustix::stdio::stderr());
    let socket = UnixStream::from(socket);
    let Ok(writer) = socket.try_clone() else { return 1 };
    if rust_tools {
        return serve_rust_tools(builder, socket, writer);
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
    let _ = ctrlc::set_handler(move || interrupter.interrupt());
    let load_errors = host.load_errors().to_vec();
    answer_requests(socket, writer, load_errors, |request| Some(answer(&mut host, request)))
}

/// Says the worker is ready (with its load errors), then answers each request read from `socket`
/// until the other end closes or `reply` has no answer for one. Returns the exit code.
fn answer_requests(
    socket: UnixStream,
    mut writer: UnixStream,
    load_errors: Vec<Error>,
    mut reply: impl FnMut(Request) -> Option<Reply>,
) -> i32 {
    if !send(&mut writer, &Reply::LoadErrors(load_errors)) {
        return 1;
    }
    for line in BufReader::new(socket).lines() {
        let Ok(line) = line else { break };
        let Some(answer) = serde_json::from_str::<Request>(&line).ok().and_then(&mut reply) else { break };
        if !send(&mut writer, &answer) {
            break;
        }
    }
    0
}

/// Sends one reply as a JSON line; false when the parent is gone.
fn send(writer: &mut UnixStream, reply: &Reply) -> bool {
    let Ok(mut line) = serde_json::to_string(reply) else { return false };
    line.push('\n');
    writer.write_all(line.as_bytes()).and_then(|()| writer.flush()).is_ok()
}

/// [`serve`] with the Rust tools alone (see [`HostBuilder::build_rust_tools`]): calls are
/// answered; anything else needs the interpreter, and ends the worker.
fn serve_rust_tools(builder: HostBuilder, socket: UnixStream, writer: UnixStream) -> i32 {
    let host = match builder.build_rust_tools() {
        Ok(host) => host,
        Err(e) => {
            eprintln!("toolhost worker: {e}");
            return 1;
        }
    };
    let cancel = host.cancel();
    let _ = ctrlc::set_handler(move || cancel.cancel());
    answer_requests(socket, writer, Vec::new(), |request| match request {
        Request::Call(call) => Some(Reply::Call(Box::new(host.run_call(&call)))),
        Request::LoadErrors => Some(Reply::LoadErrors(Vec::new())),
        // The Rust tools alone never change.
        Request::ToolChanges => Some(Reply::Count(0)),
        _ => None,
    })
}
