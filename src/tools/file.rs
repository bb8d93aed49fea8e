//! Reading and writing workspace files for the file tools, and the diffs their previews show. Only
//! regular files are opened, so a named pipe, socket or device in the workspace is refused with a
//! clear error instead of blocking the call (opening a FIFO for reading waits for a writer); writes
//! are atomic.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use crate::error::{Error, Result};

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

/// Checks that `real` (resolved from `path`), if it exists, is a regular file. `Ok(None)` when it
/// does not exist.
///
/// # Errors
/// A folder, a FIFO, a socket or a device; or when its metadata cannot be read.
pub fn existing_regular(real: &Path, path: &str) -> Result<Option<Metadata>> {
    match std::fs::metadata(real) {
        Ok(meta) if meta.is_file() => Ok(Some(meta)),
        Ok(meta) => Err(not_regular(path, &meta)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::tool_failed(format!("cannot read {path}: {e}"))),
    }
}

/// Opens the regular file `real` (resolved from `path`) for reading, with its metadata.
///
/// The type is checked before opening, and the file is opened without blocking and checked again,
/// so a FIFO swapped in between the two cannot hold the call either.
///
/// # Errors
/// A missing file (`missing` is the message), a file that is not regular, or an I/O error.
pub fn open_regular(real: &Path, path: &str, missing: impl FnOnce() -> String) -> Result<(File, Metadata)> {
    if existing_regular(real, path)?.is_none() {
        return Err(Error::tool_failed(missing()));
    }
    let file = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(real).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::tool_failed(missing()),
        _ => Error::tool_failed(format!("cannot open {path}: {e}")),
    })?;
    let meta = file.metadata().map_err(|e| Error::tool_failed(format!("cannot read {path}: {e}")))?;
    if !meta.is_file() {
        return Err(not_regular(path, &meta));
    }
    Ok((file, meta))
}

/// Reads the whole regular file `real` (resolved from `path`).
///
/// # Errors
/// As [`open_regular`].
pub fn read_bytes(real: &Path, path: &str, missing: impl FnOnce() -> String) -> Result<Vec<u8>> {
    let (mut file, meta) = open_regular(real, path, missing)?;
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(&mut bytes).map_err(|e| Error::tool_failed(format!("cannot read {path}: {e}")))?;
    Ok(bytes)
}

/// Reads the whole regular file `real` (resolved from `path`) as UTF-8 text.
///
/// # Errors
/// As [`open_regular`], and when the file is not UTF-8.
pub fn read_text(real: &Path, path: &str, missing: impl FnOnce() -> String) -> Result<String> {
    String::from_utf8(read_bytes(real, path, missing)?)
        .map_err(|_| Error::tool_failed(format!("{path} is not UTF-8 text")))
}

/// Writes `bytes` to `target` so that a crash leaves either the old file or the new one: the data
/// goes to a temporary file in the same folder, is synced, and is renamed over the target. An
/// existing file's permissions are kept.
pub fn write_atomically(target: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let parent = target.parent().ok_or_else(|| std::io::Error::other("the path has no parent folder"))?;
    std::fs::create_dir_all(parent)?;
    let mut temp = tempfile::Builder::new().prefix(".toolhost-").suffix(".tmp").tempfile_in(parent)?;
    temp.write_all(bytes)?;
    temp.as_file().sync_all()?;
    if let Ok(meta) = std::fs::metadata(target) {
        temp.as_file().set_permissions(meta.permissions())?;
    }
    temp.persist(target).map_err(|e| e.error)?;
    Ok(())
}

/// A unified diff of `old` to `new` for the file `path`, as confirmation previews show it.
pub fn unified_diff(path: &str, old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}
