//! Standard input and output as `toolhost mcp` serves on them: a pipe or a Unix socket is read and
//! written by the runtime's own event loop; anything else (a file, a terminal) through tokio's
//! blocking threads, as `tokio::io::stdin` does.
//!
//! Why: tokio's standard input and files hand every read and write to a thread of its blocking
//! pool, so each message crossed two more threads on its way in and out. MCP clients talk to their
//! servers over pipes (or, from Node.js, a socket pair), which the event loop can wait on directly
//! once they do not block.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{FileType, OFlags};
use rustix::net::AddressFamily;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::unix::pipe;

/// What reads one descriptor.
pub(crate) type Reader = Box<dyn AsyncRead + Send + Unpin>;
/// What writes one descriptor.
pub(crate) type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// Which way a descriptor is waited on.
enum Kind {
    Pipe,
    UnixSocket,
    /// A file, a terminal, a socket of another family: read and written on blocking threads.
    Blocking,
}

fn kind(fd: &OwnedFd) -> Kind {
    match rustix::fs::fstat(fd).map(|stat| FileType::from_raw_mode(stat.st_mode)) {
        Ok(FileType::Fifo) => Kind::Pipe,
        Ok(FileType::Socket)
            if rustix::net::getsockname(fd).is_ok_and(|addr| addr.address_family() == AddressFamily::UNIX) =>
        {
            Kind::UnixSocket
        }
        _ => Kind::Blocking,
    }
}

/// A copy of `fd` that no program this process starts inherits (a shell command holding the
/// client's output open would keep the client waiting for its end after the server is gone).
pub(crate) fn cloexec_copy(fd: impl AsFd) -> io::Result<OwnedFd> {
    Ok(rustix::io::fcntl_dupfd_cloexec(fd, 0)?)
}

/// `fd` made non-blocking as a Unix socket on the runtime's event loop.
fn socket(fd: OwnedFd) -> io::Result<tokio::net::UnixStream> {
    let stream = std::os::unix::net::UnixStream::from(fd);
    stream.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(stream)
}

/// `fd` as a reader. Must be called on the runtime that will read it.
///
/// # Errors
/// When a pipe or socket cannot be registered with the event loop.
pub(crate) fn reader(fd: OwnedFd) -> io::Result<Reader> {
    Ok(match kind(&fd) {
        Kind::Pipe => Box::new(pipe::Receiver::from_owned_fd(fd)?),
        Kind::UnixSocket => Box::new(socket(fd)?),
        Kind::Blocking => Box::new(tokio::fs::File::from_std(std::fs::File::from(fd))),
    })
}

/// `fd` as a writer. Must be called on the runtime that will write it.
///
/// # Errors
/// When a pipe or socket cannot be registered with the event loop.
pub(crate) fn writer(fd: OwnedFd) -> io::Result<Writer> {
    Ok(match kind(&fd) {
        Kind::Pipe => Box::new(pipe::Sender::from_owned_fd(fd)?),
        Kind::UnixSocket => Box::new(socket(fd)?),
        Kind::Blocking => Box::new(tokio::fs::File::from_std(std::fs::File::from(fd))),
    })
}

/// The status flags of descriptors' file descriptions, put back when it is dropped: a pipe or
/// socket made non-blocking here is shared with whoever gave it to us, and may be used after.
pub(crate) struct FlagsKept(Vec<(OwnedFd, OFlags)>);

impl FlagsKept {
    /// Keeps the flags of each of `fds` as they are now.
    pub(crate) fn of(fds: &[&OwnedFd]) -> FlagsKept {
        FlagsKept(
            fds.iter().filter_map(|fd| Some((cloexec_copy(fd).ok()?, rustix::fs::fcntl_getfl(fd).ok()?))).collect(),
        )
    }
}

impl Drop for FlagsKept {
    fn drop(&mut self) {
        for (fd, flags) in &self.0 {
            let _ = rustix::fs::fcntl_setfl(fd, *flags);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    #[test]
    fn pipes_and_sockets_are_read_and_written_on_the_event_loop_and_their_flags_put_back() {
        let (read_end, write_end) = rustix::pipe::pipe().unwrap();
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let (ours, theirs) = (OwnedFd::from(ours), OwnedFd::from(theirs));
        assert!(matches!(kind(&read_end), Kind::Pipe) && matches!(kind(&ours), Kind::UnixSocket));
        let before = rustix::fs::fcntl_getfl(&read_end).unwrap();
        let kept = FlagsKept::of(&[&read_end]);
        runtime().block_on(async {
            let mut to_pipe = writer(write_end).unwrap();
            let mut from_pipe = reader(rustix::io::dup(&read_end).unwrap()).unwrap();
            let mut to_socket = writer(ours).unwrap();
            let mut from_socket = reader(theirs).unwrap();
            to_pipe.write_all(b"through a pipe\n").await.unwrap();
            to_socket.write_all(b"through a socket\n").await.unwrap();
            drop((to_pipe, to_socket));
            let (mut piped, mut sent) = (String::new(), String::new());
            from_pipe.read_to_string(&mut piped).await.unwrap();
            from_socket.read_to_string(&mut sent).await.unwrap();
            assert_eq!((piped.as_str(), sent.as_str()), ("through a pipe\n", "through a socket\n"));
        });
        assert!(rustix::fs::fcntl_getfl(&read_end).unwrap().contains(OFlags::NONBLOCK));
        drop(kept);
        assert_eq!(rustix::fs::fcntl_getfl(&read_end).unwrap(), before, "the pipe's flags are put back");
    }

    #[test]
    fn a_regular_file_is_read_on_blocking_threads() {
        let file = OwnedFd::from(tempfile::tempfile().unwrap());
        assert!(matches!(kind(&file), Kind::Blocking));
        let flags = rustix::fs::fcntl_getfl(&file).unwrap();
        runtime().block_on(async {
            let mut text = String::new();
            reader(rustix::io::dup(&file).unwrap()).unwrap().read_to_string(&mut text).await.unwrap();
            assert!(text.is_empty());
        });
        assert_eq!(rustix::fs::fcntl_getfl(&file).unwrap(), flags);
    }
}
