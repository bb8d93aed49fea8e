//! The workspace boundary (design section 10): every path a tool touches is resolved here, and
//! `..`, absolute paths outside the root and symlinks that lead outside are refused, for reads and
//! writes alike. Tools never join paths themselves.
//!
//! Checking a path is not enough: another process can swap a folder for a symlink between the
//! check and the open. So tools also *open* through here: [`Workspace::open_beneath`] and
//! [`Workspace::dir_beneath`] start from a handle on the root folder, held since the workspace was
//! made, and open the checked (symlink-free) location with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS)`, or, where the kernel lacks it, one component at a time with `O_NOFOLLOW`.
//! A symlink found on the way, whenever it was put there, is refused rather than followed.

use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use crate::error::{Error, Result};

/// The root folder tools work in.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// Canonical (symlink-free, absolute) root.
    root: PathBuf,
    /// The root folder, opened once: everything tools open is opened beneath it.
    handle: Arc<OwnedFd>,
}

impl Workspace {
    /// A workspace rooted at `root`, which must exist.
    ///
    /// # Errors
    /// When the root does not exist or is not a folder.
    pub fn new(root: impl AsRef<Path>) -> Result<Self> {
        let root = root.as_ref();
        let canonical =
            root.canonicalize().map_err(|e| Error::tool_failed(format!("workspace root {}: {e}", root.display())))?;
        if !canonical.is_dir() {
            return Err(Error::tool_failed(format!("workspace root {} is not a folder", root.display())));
        }
        let handle = rustix::fs::open(&canonical, dir_flags(), Mode::empty())
            .map_err(|e| Error::tool_failed(format!("workspace root {}: {e}", root.display())))?;
        Ok(Workspace { root: canonical, handle: Arc::new(handle) })
    }

    /// The components of `real` (a location [`Workspace::resolve`] returned) below the root.
    fn below_root<'a>(&self, real: &'a Path) -> std::io::Result<Vec<&'a OsStr>> {
        let rest = real.strip_prefix(&self.root).map_err(|_| outside())?;
        rest.components()
            .map(|c| match c {
                Component::Normal(part) => Ok(part),
                _ => Err(outside()),
            })
            .collect()
    }

    /// Opens the folder `real` (a location [`Workspace::resolve`] returned) beneath the root handle,
    /// following no symlink. With `create`, missing folders on the way are made (with the umask's
    /// permissions).
    ///
    /// # Errors
    /// `NotFound` for a missing folder (without `create`); [`is_swapped`] errors when a component is
    /// now a symlink or not a folder; other I/O errors.
    pub fn dir_beneath(&self, real: &Path, create: bool) -> std::io::Result<OwnedFd> {
        let parts = self.below_root(real)?;
        let mut dir = rustix::fs::openat(self.handle.as_fd(), ".", dir_flags(), Mode::empty())?;
        for part in parts {
            dir = open_child_dir(&dir, part, create)?;
        }
        Ok(dir)
    }

    /// Opens `real` (a location [`Workspace::resolve`] returned) beneath the root handle with
    /// `flags`, following no symlink on the way or at the end. `mode` applies when `flags` create
    /// the file. The root itself is opened as `.`.
    ///
    /// # Errors
    /// As [`Workspace::dir_beneath`] for the folders on the way; the open's own error for the last
    /// component (`ELOOP` when it is a symlink).
    pub fn open_beneath(&self, real: &Path, flags: OFlags, mode: Mode) -> std::io::Result<OwnedFd> {
        crate::source::past_leases(|| self.open_beneath_once(real, flags, mode))
    }

    /// [`Workspace::open_beneath`], once.
    fn open_beneath_once(&self, real: &Path, flags: OFlags, mode: Mode) -> std::io::Result<OwnedFd> {
        let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        // One system call instead of one per folder: a search opens every file of the tree. The
        // kernel refuses `..` out of the root and symlinks anywhere on the way.
        let relative = real.strip_prefix(&self.root).map_err(|_| outside())?;
        if !relative.as_os_str().is_empty() && !OPENAT2_MISSING.load(Ordering::Relaxed) {
            let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS;
            match rustix::fs::openat2(self.handle.as_fd(), relative, flags, mode, resolve) {
                // Not in this kernel: the walk below does the same.
                Err(Errno::NOSYS | Errno::TOOBIG) => OPENAT2_MISSING.store(true, Ordering::Relaxed),
                // Perhaps a seccomp filter's refusal (an immutable file's too), flags this kernel's
                // openat2 refuses, or a rename elsewhere racing the lookup: the walk below answers
                // either way.
                Err(Errno::PERM | Errno::INVAL | Errno::AGAIN) => {}
                other => return Ok(other?),
            }
        }
        let parts = self.below_root(real)?;
        let Some((last, folders)) = parts.split_last() else {
            return Ok(rustix::fs::openat(self.handle.as_fd(), ".", flags, mode)?);
        };
        let mut dir = rustix::fs::openat(self.handle.as_fd(), ".", dir_flags(), Mode::empty())?;
        for part in folders {
            dir = open_child_dir(&dir, part, false)?;
        }
        Ok(rustix::fs::openat(&dir, *last, flags, mode)?)
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves `path` (relative to the root, or absolute inside it) to a real location inside the
    /// workspace. The location need not exist yet (writes create it), but whatever part of it
    /// exists is followed through symlinks and must stay inside.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Denied`] for a path with a `..` component, an absolute path outside the
    /// root, a symlink leading outside or dangling, or an empty path.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let ws = toolhost::Workspace::new(dir.path()).unwrap();
    /// assert!(ws.resolve("src/new.rs").is_ok());
    /// assert!(ws.resolve("../etc/passwd").is_err());
    /// assert!(ws.resolve("/etc/passwd").is_err());
    /// ```
    pub fn resolve(&self, path: &str) -> Result<PathBuf> {
        let denied = |why: &str| Err(Error::denied(format!("path \"{path}\" {why}")));
        if path.is_empty() {
            return denied("is empty");
        }
        if path.contains('\0') {
            return denied("contains a NUL character");
        }
        let given = Path::new(path);
        if given.components().any(|c| c == Component::ParentDir) {
            return denied("leaves the workspace with '..'; paths are relative to the workspace root");
        }
        let relative: PathBuf = if given.is_absolute() {
            // An absolute path is accepted when it lies inside the root, as written or once the
            // symlinks in its existing part (the root's own, say) are resolved.
            match given.strip_prefix(&self.root) {
                Ok(rest) => rest.to_path_buf(),
                Err(_) => match real_location(given)
                    .and_then(|real| real.strip_prefix(&self.root).ok().map(Path::to_path_buf))
                {
                    Some(rest) => rest,
                    None => return denied("is outside the workspace"),
                },
            }
        } else {
            given.to_path_buf()
        };
        let mut parts = Vec::new();
        for component in relative.components() {
            match component {
                Component::Normal(part) => parts.push(part),
                Component::CurDir => {}
                Component::ParentDir => {
                    return denied("leaves the workspace with '..'; paths are relative to the workspace root")
                }
                Component::RootDir | Component::Prefix(_) => return denied("is outside the workspace"),
            }
        }
        // Follow the longest existing prefix through its symlinks; the rest does not exist yet.
        let mut real = self.root.clone();
        let mut rest = parts.iter();
        for part in rest.by_ref() {
            let next = real.join(part);
            match next.symlink_metadata() {
                Ok(meta) => {
                    real = if meta.file_type().is_symlink() {
                        match next.canonicalize() {
                            Ok(target) => target,
                            Err(_) => return denied("goes through a symlink whose target does not exist"),
                        }
                    } else {
                        next
                    };
                    if !real.starts_with(&self.root) {
                        return denied("leads outside the workspace through a symlink");
                    }
                }
                Err(_) => {
                    real = next;
                    break;
                }
            }
        }
        for part in rest {
            real.push(part);
        }
        Ok(real)
    }

    /// The path of `real` (a location inside the root) as tools show it: relative, `/`-separated.
    pub fn display(&self, real: &Path) -> String {
        match real.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => rel.to_string_lossy().replace('\\', "/"),
            Err(_) => real.to_string_lossy().into_owned(),
        }
    }
}

/// Set once `openat2` turned out to be unavailable, so it is not tried for every open.
static OPENAT2_MISSING: AtomicBool = AtomicBool::new(false);

/// Flags for a folder opened only to open what is beneath it.
fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

fn outside() -> std::io::Error {
    std::io::Error::other("the location is outside the workspace")
}

/// Opens the folder `name` in `dir` without following a symlink, making it first with `create`.
pub(crate) fn open_child_dir(dir: &OwnedFd, name: &OsStr, create: bool) -> std::io::Result<OwnedFd> {
    let name = name.as_bytes();
    match rustix::fs::openat(dir, name, dir_flags(), Mode::empty()) {
        Err(Errno::NOENT) if create => {
            match rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o777)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
            Ok(rustix::fs::openat(dir, name, dir_flags(), Mode::empty())?)
        }
        other => Ok(other?),
    }
}

/// Whether `e` (from [`Workspace::open_beneath`] or [`Workspace::dir_beneath`]) means a location
/// that was checked changed under the call: a component is now a symlink (`ELOOP`) or no longer a
/// folder (`ENOTDIR`).
pub fn is_swapped(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR))
}

/// Where the absolute, `..`-free path `given` really is: its longest existing ancestor with the
/// symlinks resolved, and the part that does not exist yet appended as written. `None` when not even
/// the filesystem root resolves.
fn real_location(given: &Path) -> Option<PathBuf> {
    given.ancestors().find_map(|ancestor| {
        let real = ancestor.canonicalize().ok()?;
        let rest = given.strip_prefix(ancestor).ok()?;
        Some(if rest.as_os_str().is_empty() { real } else { real.join(rest) })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Opens `path` beneath `ws` for reading: "opened", "refused" (an [`is_swapped`] error: a
    /// symlink on the way, `ELOOP` or `ENOTDIR` as the kernel words it) or another error.
    fn open_for_reading(ws: &Workspace, path: &str) -> String {
        match ws.open_beneath(&ws.root().join(path), OFlags::RDONLY, Mode::empty()) {
            Ok(_) => "opened".to_string(),
            Err(e) if is_swapped(&e) => "refused".to_string(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn opening_beneath_refuses_symlinks_with_openat2_and_with_the_walk_for_older_kernels() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/a.rs"), "x").unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("src/a.rs"), dir.path().join("link.rs")).unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let answers = |ws: &Workspace| {
            (open_for_reading(ws, "src/a.rs"), open_for_reading(ws, "out/secret"), open_for_reading(ws, "link.rs"))
        };
        let with_openat2 = answers(&ws);
        assert_eq!(with_openat2, ("opened".to_string(), "refused".to_string(), "refused".to_string()));
        // Other tests running meanwhile take the walk too, which answers the same.
        OPENAT2_MISSING.store(true, Ordering::Relaxed);
        let with_the_walk = answers(&ws);
        OPENAT2_MISSING.store(false, Ordering::Relaxed);
        assert_eq!(with_the_walk, with_openat2);
    }

    #[test]
    fn escapes_are_denied_and_inside_paths_resolve() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        assert_eq!(ws.resolve("src/a.rs").unwrap(), ws.root().join("src/a.rs"));
        assert_eq!(ws.resolve("./src").unwrap(), ws.root().join("src"));
        let inside_abs = ws.root().join("src/x").to_string_lossy().into_owned();
        assert!(ws.resolve(&inside_abs).is_ok());
        for bad in ["..", "../x", "src/../../x", "src/../x", "/etc/passwd", ""] {
            let err = ws.resolve(bad).unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::Denied, "{bad}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_leading_outside_are_denied() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("s")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("nothing"), dir.path().join("dangling")).unwrap();
        std::fs::write(dir.path().join("real"), "r").unwrap();
        std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("inner")).unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        for bad in ["out/secret", "out/new-file", "s", "dangling"] {
            assert!(ws.resolve(bad).is_err(), "{bad}");
        }
        assert_eq!(ws.resolve("inner").unwrap(), ws.root().join("real"));
    }

    #[cfg(unix)]
    #[test]
    fn absolute_paths_to_new_files_resolve_through_a_symlinked_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("real/sub")).unwrap();
        std::fs::create_dir(dir.path().join("beside")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("link")).unwrap();
        let ws = Workspace::new(dir.path().join("link")).unwrap();
        let through_link = |rest: &str| dir.path().join("link").join(rest).to_string_lossy().into_owned();
        assert_eq!(ws.resolve(&through_link("new.txt")).unwrap(), ws.root().join("new.txt"));
        assert_eq!(ws.resolve(&through_link("sub/new/deep.txt")).unwrap(), ws.root().join("sub/new/deep.txt"));
        assert_eq!(ws.resolve(&through_link("")).unwrap(), ws.root());
        let outside = [
            dir.path().join("beside/new.txt").to_string_lossy().into_owned(),
            dir.path().join("new.txt").to_string_lossy().into_owned(),
            through_link("../beside/new.txt"),
            through_link("sub/../../beside/x"),
        ];
        for bad in &outside {
            assert_eq!(ws.resolve(bad).unwrap_err().kind(), crate::ErrorKind::Denied, "{bad}");
        }
    }
}
