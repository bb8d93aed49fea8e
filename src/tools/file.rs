//! Reading and writing workspace files for the file tools, and the diffs their previews show. Only
//! regular files are opened, so a named pipe, socket or device in the workspace is refused with a
//! clear error instead of blocking the call (opening a FIFO for reading waits for a writer); writes
//! are atomic. Everything is opened beneath the workspace root's handle
//! ([`Workspace::open_beneath`]), so a symlink swapped in after the path was checked is refused.

use std::fs::{File, Metadata};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::error::{Error, Result};
use crate::workspace::{is_swapped, Workspace};

/// The largest file the file tools read whole (fs-edit, file-lines, previews) or write (fs-write,
/// fs-edit's result): 64 MiB. Far above any source file a model should handle whole, and low enough
/// that building a result cannot exhaust memory. fs-read streams ranges and has no such cap.
pub const MAX_FILE_BYTES: usize = 64 << 20;

/// What a non-regular file is, for error messages: "a named pipe (FIFO)".
fn kind_of(meta: &Metadata) -> &'static str {
    let ty = meta.file_type();
    if ty.is_fifo() {
        "a named pipe (FIFO)"
    } else if ty.is_socket() {
        "a socket"
    } else if ty.is_block_device() {
        "a block device"
    } else if ty.is_char_device() {
        "a character device"
    } else {
        "a special file"
    }
}

/// The error for `path` (as the caller wrote it) when `meta` is not a regular file.
fn not_regular(path: &str, meta: &Metadata) -> Error {
    if meta.is_dir() {
        Error::tool_failed(format!("{path} is a folder; use fs-list to see what it holds"))
    } else {
        Error::tool_failed(format!(
            "{path} is not a regular file but {}; only regular files can be used",
            kind_of(meta)
        ))
    }
}

/// The error for an open beneath the root that failed with `e`.
fn open_error(path: &str, e: &std::io::Error, missing: impl FnOnce() -> String) -> Error {
    if e.kind() == std::io::ErrorKind::NotFound {
        Error::tool_failed(missing())
    } else if is_swapped(e) {
        Error::denied(format!(
            "path \"{path}\" goes through a symlink or a file where a folder should be (it may have \
             changed during the call); symlinks are not followed there"
        ))
    } else {
        Error::tool_failed(format!("cannot open {path}: {e}"))
    }
}

/// A path that ends in `/` names a folder; the file tools refuse it rather than drop the slash.
///
/// # Errors
/// When `path` ends in `/` (or `/.`).
pub fn refuse_folder_syntax(path: &str, tool: &str) -> Result<()> {
    if path.ends_with('/') || path.ends_with("/.") {
        return Err(Error::tool_failed(format!(
            "{path} ends with '/', which names a folder; {tool} works on files (fs-list shows a folder)"
        )));
    }
    Ok(())
}

/// The metadata of `real` (resolved from `path`) if it exists, refusing anything but a regular
/// file. `Ok(None)` when it does not exist. Looked at beneath the root handle, not following a
/// symlink.
///
/// # Errors
/// A folder, a FIFO, a socket or a device; a symlink swapped in; or an I/O error.
pub fn existing_regular(ws: &Workspace, real: &Path, path: &str) -> Result<Option<Metadata>> {
    match ws.open_beneath(real, OFlags::PATH | OFlags::NOFOLLOW, Mode::empty()) {
        Ok(fd) => {
            let meta = File::from(fd).metadata().map_err(|e| Error::tool_failed(format!("cannot read {path}: {e}")))?;
            if meta.file_type().is_symlink() {
                // O_PATH with O_NOFOLLOW opens a symlink itself: one was swapped in after the check.
                Err(open_error(path, &std::io::Error::from_raw_os_error(libc::ELOOP), String::new))
            } else if meta.is_file() {
                Ok(Some(meta))
            } else {
                Err(not_regular(path, &meta))
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(open_error(path, &e, String::new)),
    }
}

/// Opens the regular file `real` (resolved from `path`) for reading, with its metadata: beneath
/// the root handle, following no symlink, without blocking (a FIFO would otherwise wait for a
/// writer), and checked to be a regular file once open.
///
/// # Errors
/// A missing file (`missing` is the message), a file that is not regular, a symlink swapped in, or
/// an I/O error.
pub fn open_regular(
    ws: &Workspace,
    real: &Path,
    path: &str,
    missing: impl FnOnce() -> String,
) -> Result<(File, Metadata)> {
    let fd = ws
        .open_beneath(real, OFlags::RDONLY | OFlags::NONBLOCK, Mode::empty())
        .map_err(|e| open_error(path, &e, missing))?;
    let file = File::from(fd);
    let meta = file.metadata().map_err(|e| Error::tool_failed(format!("cannot read {path}: {e}")))?;
    if !meta.is_file() {
        return Err(not_regular(path, &meta));
    }
    Ok((file, meta))
}

/// Reads the whole regular file `real` (resolved from `path`), refusing one larger than
/// [`MAX_FILE_BYTES`].
///
/// # Errors
/// As [`open_regular`], and for a file over the cap.
pub fn read_bytes(ws: &Workspace, real: &Path, path: &str, missing: impl FnOnce() -> String) -> Result<Vec<u8>> {
    let (file, meta) = open_regular(ws, real, path, missing)?;
    if meta.len() > MAX_FILE_BYTES as u64 {
        return Err(too_big(path, meta.len()));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // The file may grow after the check: never read past the cap.
    file.take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::tool_failed(format!("cannot read {path}: {e}")))?;
    if bytes.len() > MAX_FILE_BYTES {
        return Err(too_big(path, bytes.len() as u64));
    }
    Ok(bytes)
}

fn too_big(path: &str, len: u64) -> Error {
    Error::tool_failed(format!(
        "{path} has {len} bytes, more than the {MAX_FILE_BYTES} bytes the file tools read or write whole; \
         read it in ranges with fs-read"
    ))
}

/// Reads the whole regular file `real` (resolved from `path`) as UTF-8 text.
///
/// # Errors
/// As [`read_bytes`], and when the file is not UTF-8.
pub fn read_text(ws: &Workspace, real: &Path, path: &str, missing: impl FnOnce() -> String) -> Result<String> {
    String::from_utf8(read_bytes(ws, real, path, missing)?).map_err(|e| {
        Error::tool_failed(format!(
            "{path} is not UTF-8 text (invalid byte at offset {}); it is left as it is",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Refuses a new file content over [`MAX_FILE_BYTES`] before anything is written.
///
/// # Errors
/// When `len` passes the cap.
pub fn check_new_size(path: &str, len: usize) -> Result<()> {
    if len > MAX_FILE_BYTES {
        return Err(Error::tool_failed(format!(
            "the new content of {path} would have {len} bytes, more than the {MAX_FILE_BYTES} bytes \
             a file tool writes; nothing was written"
        )));
    }
    Ok(())
}

/// How old a temporary file of ours must be before a write in its folder removes it: older than
/// any write in progress could be.
const STALE_TEMP: Duration = Duration::from_secs(60);

/// Writes `bytes` to `real` (resolved from `path`) so that a crash leaves either the old file or
/// the new one: the data goes to a temporary file in the same folder, is synced, and is renamed
/// over the target. Everything happens beneath the root handle, following no symlink (missing
/// folders are made on the way). A new file gets the umask's permissions (as an editor or `touch`
/// would give it); an existing file's permissions are kept. Temporary files of ours left in that
/// folder by a write that was killed, older than [`STALE_TEMP`], are removed first.
///
/// # Errors
/// A target that is not a regular file, a symlink swapped in, or an I/O error.
pub fn write_atomically(ws: &Workspace, real: &Path, path: &str, bytes: &[u8]) -> Result<()> {
    check_new_size(path, bytes.len())?;
    let io = |e: std::io::Error| {
        if is_swapped(&e) {
            open_error(path, &e, String::new)
        } else {
            Error::tool_failed(format!("cannot write {path}: {e}"))
        }
    };
    let (Some(parent), Some(name)) = (real.parent(), real.file_name()) else {
        return Err(Error::tool_failed(format!("cannot write {path}: it names the workspace root")));
    };
    let dir = ws.dir_beneath(parent, true).map_err(io)?;
    let mode = match rustix::fs::statat(&dir, name.as_bytes(), AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => {
            let kind = FileType::from_raw_mode(stat.st_mode);
            if kind != FileType::RegularFile {
                let meta = existing_regular(ws, real, path);
                return Err(match meta {
                    Err(e) => e,
                    Ok(_) => open_error(path, &std::io::Error::from_raw_os_error(libc::ELOOP), String::new),
                });
            }
            Some(Mode::from_raw_mode(stat.st_mode & 0o7777))
        }
        Err(Errno::NOENT) => None,
        Err(e) => return Err(io(e.into())),
    };
    remove_stale_temps(&dir);
    let temp = temp_name();
    let fd = rustix::fs::openat(
        &dir,
        temp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o666),
    )
    .map_err(|e| io(e.into()))?;
    let written = (|| -> std::io::Result<()> {
        let mut file = File::from(fd);
        if let Some(mode) = mode {
            rustix::fs::fchmod(&file, mode)?;
        }
        file.write_all(bytes)?;
        file.sync_all()?;
        rustix::fs::renameat(&dir, temp.as_str(), &dir, name.as_bytes())?;
        Ok(())
    })();
    if let Err(e) = written {
        let _ = rustix::fs::unlinkat(&dir, temp.as_str(), AtFlags::empty());
        return Err(io(e));
    }
    Ok(())
}

/// A fresh temporary file name: `.toolhost-<pid>-<nanoseconds>-<counter>.tmp`.
fn temp_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!(".toolhost-{}-{nanos}-{}.tmp", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// Removes our temporary files (`.toolhost-*.tmp`, regular files) older than [`STALE_TEMP`] from
/// `dir`. Best effort: a write goes on whatever happens here.
fn remove_stale_temps(dir: &OwnedFd) {
    let Ok(entries) = rustix::fs::Dir::read_from(dir) else { return };
    let now = SystemTime::now();
    for entry in entries.flatten() {
        let name = entry.file_name().to_bytes();
        if !(name.starts_with(b".toolhost-") && name.ends_with(b".tmp")) {
            continue;
        }
        let Ok(stat) = rustix::fs::statat(dir, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW) else { continue };
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            continue;
        }
        let modified = UNIX_EPOCH + Duration::from_secs(u64::try_from(stat.st_mtime).unwrap_or(0));
        if now.duration_since(modified).is_ok_and(|age| age > STALE_TEMP) {
            let _ = rustix::fs::unlinkat(dir, entry.file_name(), AtFlags::empty());
        }
    }
}

/// A unified diff of `old` to `new` for the file `path`, as confirmation previews show it.
pub fn unified_diff(path: &str, old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}
