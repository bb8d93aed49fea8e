//! `toolhost mcp`: the command that serves the command line's host over standard input and
//! output with [`McpServer`].
//!
//! Standard output is the protocol channel and nothing else: before the host is built, the
//! process's standard output is moved aside for the protocol and descriptor 1 is pointed at
//! standard error, so whatever a script, steel or a child process prints lands there instead.

use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};

use crate::error::{Error, ErrorKind};
use crate::handle::HostHandle;
use crate::mcp::McpServer;
use crate::setup::{Flags, Setup};

/// Moves the process's standard output aside for the protocol and points descriptor 1 at standard
/// error, so nothing but the protocol reaches the client. The protocol's descriptor is not inherited
/// by child processes.
fn take_stdout_for_protocol() -> std::io::Result<std::fs::File> {
    std::io::stdout().flush()?;
    // SAFETY: plain descriptor calls on the process's own standard descriptors; the new descriptor
    // is owned by the returned file alone.
    unsafe {
        let protocol = libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3);
        if protocol < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let owned = OwnedFd::from_raw_fd(protocol);
        if libc::dup2(2, 1) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(std::fs::File::from(owned))
    }
}

/// `toolhost mcp`: builds the host as the command line does (config, trust, flags; no terminal
/// confirmer, since standard input is the protocol: a confirm rule denies unless `--yes`), then
/// serves it on standard input and output until the client leaves. Returns the exit code.
pub fn serve(flags: &Flags) -> i32 {
    let protocol = match take_stdout_for_protocol() {
        Ok(file) => file,
        Err(e) => {
            eprintln!("toolhost: cannot set standard output aside for the MCP protocol: {e}");
            return 1;
        }
    };
    let settings_error = |e: &Error| {
        eprintln!("toolhost: {e}");
        2
    };
    let setup = match Setup::discover(flags, None) {
        Ok(setup) => setup,
        Err(e) => return settings_error(&e),
    };
    if let Some(notice) = &setup.notice {
        eprintln!("{notice}");
    }
    // The tools run in a worker process (design section 18), as `toolhost call`'s do, unless the
    // config or --no-isolate says otherwise.
    let spawned = if setup.config.limits.isolate.unwrap_or(true) && !flags.no_isolate {
        match crate::cli::worker_spec(flags, &setup) {
            Some(spec) => HostHandle::spawn_worker(spec),
            None => {
                eprintln!("toolhost: cannot tell how to start the worker process (use --no-isolate)");
                return 1;
            }
        }
    } else {
        match setup.builder(flags, None) {
            Ok(builder) => HostHandle::spawn(builder.display_to_stderr(true)),
            Err(e) => return settings_error(&e),
        }
    };
    let handle = match spawned {
        Ok(handle) => handle,
        Err(e) if e.kind() == ErrorKind::Config => return settings_error(&e),
        Err(e) => {
            eprintln!("toolhost: {e}");
            return 1;
        }
    };
    for problem in handle.load_errors().unwrap_or_default() {
        eprintln!("toolhost: warning: {problem}");
    }
    let writer = tokio::fs::File::from_std(protocol);
    match McpServer::new(handle).watching_tools().run(tokio::io::stdin(), writer) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("toolhost: {e}");
            1
        }
    }
}
