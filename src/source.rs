//! Reading the files toolhost obeys or runs (config files, tool, test and script files, the trust
//! store): regular files only, up to a size cap, never blocking. It owns that one rule and the
//! wording of its refusals; what a file means is its reader's business (`crate::config`,
//! `crate::trust`, `crate::host`).
//!
//! A checkout can make `toolhost.toml` a FIFO (every command would hang opening it), a link to
//! `/dev/zero` (memory grows until the process dies) or a folder. So a file is looked at before it is
//! opened, opened without blocking and without becoming a controlling terminal, looked at again
//! through the opened descriptor (it may have been swapped since), and read to at most the cap and
//! one byte. A symlink to a regular file is that file (a dotfiles manager links the user's
//! `config.toml`).

use std::fs::{self, File, FileType};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The most a config file (or the trust store) may hold.
pub const CONFIG_CAP: u64 = 1 << 20;
/// The most a Scheme file (a tool, test or script file) may hold.
pub const SCHEME_CAP: u64 = 8 << 20;
/// The most of a workspace's own files (its `toolhost.toml` and tool folders) read together: they
/// are all read at start-up, before trust is decided, so any number of files at [`SCHEME_CAP`]
/// each must not add up to whatever a checkout likes.
pub const PROJECT_CAP: u64 = 64 << 20;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// Nothing is there (or a symlink leads nowhere).
    #[error("not found")]
    NotFound,
    /// Something other than a regular file is there: `what` names it ("a FIFO", "a folder", ...).
    #[error("is {what}, not a regular file")]
    NotRegular {
        /// What is there instead.
        what: &'static str,
    },
    /// The file holds more than the cap allows.
    #[error("is larger than {}, the most toolhost reads of such a file", mebibytes(*cap))]
    TooLarge {
        /// The cap, in bytes.
        cap: u64,
    },
    /// Read with others, the file would take their bytes past what toolhost reads of them
    /// together (a workspace's own files: [`PROJECT_CAP`]).
    #[error("is not read: the workspace's own files together pass {}, the most toolhost reads of them", mebibytes(*total))]
    PastTotal {
        /// The cap on them together, in bytes.
        total: u64,
    },
    /// The bytes are not UTF-8 text ([`read_text`] only).
    #[error("is not UTF-8 text")]
    NotUtf8,
    /// The system refused (permissions, an I/O error).
    #[error("cannot be read: {0}")]
    Io(#[source] io::Error),
}

fn mebibytes(bytes: u64) -> String {
    if bytes % (1 << 20) == 0 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

/// What a file type is, said for a person.
fn kind_of(file_type: FileType) -> &'static str {
    if file_type.is_dir() {
        "a folder"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else {
        "something else"
    }
}

/// How long [`past_leases`] keeps trying an open that a file lease refuses: ours last
/// microseconds (a busy machine may stretch that to a few milliseconds), and a search that meets a
/// file another program keeps under a lease loses no more than this on it.
const LEASE_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

/// Runs `open`, a non-blocking open, again while a file lease refuses it. Such an open of a file
/// under a write lease fails with EAGAIN until the lease is let go; the warm search index takes
/// one for an instant (to count who has a file open) and lets it go at once. A lease held longer
/// (another program's) is the open's error after [`LEASE_WAIT`].
pub(crate) fn past_leases<T>(mut open: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    let mut pause = std::time::Duration::from_micros(100);
    let mut waited = std::time::Duration::ZERO;
    loop {
        match open() {
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) && waited < LEASE_WAIT => {
                std::thread::sleep(pause);
                waited += pause;
                pause = (pause * 2).min(std::time::Duration::from_millis(10));
            }
            opened => return opened,
        }
    }
}

/// The bytes of the regular file at `path` (following symlinks), when it holds at most `cap`.
///
/// # Errors
/// [`ReadError`]: nothing there, not a regular file (nothing is read from it, and a FIFO does not
/// block), larger than `cap`, or the system refused.
///
/// ```
/// use toolhost::source::{read_bytes, ReadError};
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("a.toml"), "x = 1\n").unwrap();
/// assert_eq!(read_bytes(&dir.path().join("a.toml"), 100).unwrap(), b"x = 1\n");
/// assert!(matches!(read_bytes(&dir.path().join("a.toml"), 3), Err(ReadError::TooLarge { cap: 3 })));
/// assert!(matches!(read_bytes(dir.path(), 100), Err(ReadError::NotRegular { what: "a folder" })));
/// ```
pub fn read_bytes(path: &Path, cap: u64) -> Result<Vec<u8>, ReadError> {
    let io_error = |e: io::Error| match e.kind() {
        io::ErrorKind::NotFound => ReadError::NotFound,
        _ => ReadError::Io(e),
    };
    // Before opening: opening some devices does something, and a FIFO would wait for a writer.
    let before = fs::metadata(path).map_err(io_error)?;
    if !before.is_file() {
        return Err(ReadError::NotRegular { what: kind_of(before.file_type()) });
    }
    let file = past_leases(|| File::options().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY).open(path))
        .map_err(io_error)?;
    // The opened file itself: the path may name something else by now.
    let opened = file.metadata().map_err(ReadError::Io)?;
    if !opened.is_file() {
        return Err(ReadError::NotRegular { what: kind_of(opened.file_type()) });
    }
    if opened.len() > cap {
        return Err(ReadError::TooLarge { cap });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(opened.len()).unwrap_or(0));
    // One byte past the cap tells a file that grew since it was looked at.
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes).map_err(ReadError::Io)?;
    if bytes.len() as u64 > cap {
        return Err(ReadError::TooLarge { cap });
    }
    Ok(bytes)
}

/// [`read_bytes`] as UTF-8 text.
///
/// # Errors
/// As [`read_bytes`], and [`ReadError::NotUtf8`].
pub fn read_text(path: &Path, cap: u64) -> Result<String, ReadError> {
    String::from_utf8(read_bytes(path, cap)?).map_err(|_| ReadError::NotUtf8)
}

/// The Scheme files of one tool folder, as every loader sees them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FolderFiles {
    /// Tool files: `*.scm` but not `*_test.scm`, in name order. A tool folder loads these.
    pub tools: Vec<PathBuf>,
    /// Test files (`*_test.scm`), in name order. `toolhost test` runs these.
    pub tests: Vec<PathBuf>,
}

/// The Scheme files directly in `dir` (not in its subfolders), symlinks followed: every entry
/// named `*.scm` that is not a folder or a dangling link (an editor's lock file). Anything else
/// there (a FIFO) is listed too, so reading it says why it does not load instead of passing over it
/// in silence. A folder that cannot be listed has none.
pub fn folder_files(dir: &Path) -> FolderFiles {
    let Ok(entries) = fs::read_dir(dir) else { return FolderFiles::default() };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "scm"))
        .filter(|p| fs::metadata(p).is_ok_and(|m| !m.is_dir()))
        .collect();
    paths.sort();
    let (tests, tools) = paths.into_iter().partition(|p| is_test_file(p));
    FolderFiles { tools, tests }
}

/// Whether `path` is a Scheme test file (`*_test.scm`), which `toolhost test` runs and tool
/// folders do not load.
pub fn is_test_file(path: &Path) -> bool {
    path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with("_test.scm"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// Runs `read` on another thread, failing (not hanging) when it takes more than 10 s.
    fn within_seconds<T: Send + 'static>(read: impl FnOnce() -> T + Send + 'static) -> T {
        let (sent, got) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = sent.send(read());
        });
        got.recv_timeout(Duration::from_secs(10)).expect("the read blocked")
    }

    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("toolhost.toml");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads the NUL-terminated name only.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let result = within_seconds(move || read_bytes(&fifo, CONFIG_CAP));
        assert!(matches!(result, Err(ReadError::NotRegular { what: "a FIFO" })), "{result:?}");
        assert_eq!(result.unwrap_err().to_string(), "is a FIFO, not a regular file");
    }

    #[test]
    fn devices_and_folders_are_refused_and_links_to_files_are_followed() {
        let zero = within_seconds(|| read_bytes(Path::new("/dev/zero"), CONFIG_CAP));
        assert!(matches!(zero, Err(ReadError::NotRegular { what: "a character device" })), "{zero:?}");
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_bytes(dir.path(), 10).unwrap_err().to_string(), "is a folder, not a regular file");
        std::fs::write(dir.path().join("real.toml"), "a = 1\n").unwrap();
        std::os::unix::fs::symlink(dir.path().join("real.toml"), dir.path().join("link.toml")).unwrap();
        assert_eq!(read_text(&dir.path().join("link.toml"), 10).unwrap(), "a = 1\n");
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.toml")).unwrap();
        assert!(matches!(read_bytes(&dir.path().join("zero.toml"), 10), Err(ReadError::NotRegular { .. })));
        std::os::unix::fs::symlink(dir.path().join("gone"), dir.path().join("broken.toml")).unwrap();
        assert!(matches!(read_bytes(&dir.path().join("broken.toml"), 10), Err(ReadError::NotFound)));
    }

    #[test]
    fn the_cap_is_exact_and_text_must_be_utf8() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, [b'a'; 10]).unwrap();
        assert_eq!(read_bytes(&file, 10).unwrap().len(), 10);
        let err = read_bytes(&file, 9).unwrap_err();
        assert_eq!(err.to_string(), "is larger than 9 bytes, the most toolhost reads of such a file");
        assert_eq!(ReadError::TooLarge { cap: CONFIG_CAP }.to_string().split(',').next(), Some("is larger than 1 MiB"));
        std::fs::write(&file, [0xff, 0xfe]).unwrap();
        assert!(matches!(read_text(&file, 10), Err(ReadError::NotUtf8)));
    }
}
