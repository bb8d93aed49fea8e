//! The watches on the indexed files themselves, beside the tree's folder watches: one per file, on
//! its inode, so it reports what happens to the file through any path (a hard link outside the
//! workspace included), and the opens and closes that tell when some process may be writing it
//! through a shared memory map, which makes no event at all.
//!
//! What the kernel guarantees, and what this rests on:
//! - A write through a shared mapping makes no inotify event, and moves the file's times only at
//!   the first write to each clean page (ext4, at `page_mkwrite`) or not at all (tmpfs): no stat can
//!   tell it happened. But such a mapping holds the file open for writing until it is unmapped, and
//!   the last release of an open file makes `IN_CLOSE_WRITE` (or `IN_CLOSE_NOWRITE`), so a file is
//!   unchanged behind the index's back only while some process holds it open, which its `IN_OPEN`
//!   said. A file with opens not yet closed is searched whatever the index says, and read again
//!   when a close for writing arrives.
//! - Counting opens from events is exact only from a moment when the file had no open but ours.
//!   A write lease (`F_SETLEASE`, `F_WRLCK`) is granted only to a file nobody else has open, and
//!   while it is held nobody else's open completes: a file watched while its lease is held starts
//!   with exactly one open, ours. A file whose lease is refused (open elsewhere, or not ours to
//!   lease) is searched whatever the index says until a later try, made after reading every event
//!   so far while holding the lease, finds it alone.
//! - A lease break is signalled to the holder, SIGIO by default, whose default action ends the
//!   process: the lease is asked for with SIGURG instead (ignored by default), and held for the one
//!   system call that adds the watch.
//!
//! Reading files makes events too (an open and a close each), a search's own included: they pair up
//! and change no count, but a broad search reads thousands of files, and the kernel queue holds
//! 16,384 events. So searches move the queued events into a [`Spill`] as they go, to be handled in
//! order with the rest. If the queue overflows anyway, events were lost: the index is built again.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use super::warm::GiveUp;
use crate::workspace::Workspace;

const FILE_EVENTS: WatchFlags = WatchFlags::MODIFY
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::CLOSE_WRITE)
    .union(WatchFlags::CLOSE_NOWRITE)
    .union(WatchFlags::OPEN);

/// The inotify instance of the file watches, and the events searches moved out of its queue.
pub(crate) struct Spill {
    fd: OwnedFd,
    events: Mutex<Vec<u8>>,
}

impl Spill {
    pub fn new() -> Result<Spill, GiveUp> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).map_err(|e| format!("inotify: {e}"))?;
        Ok(Spill { fd, events: Mutex::new(Vec::new()) })
    }

    /// Moves the events queued now into the spill, so that a search reading many files does not
    /// overflow the kernel's queue.
    pub fn absorb(&self) {
        if let Ok(mut events) = self.events.lock() {
            read_queued(&self.fd, &mut events);
        }
    }

    /// Every event so far, in order: the spilled ones, then those still queued.
    fn take(&self) -> Vec<u8> {
        let Ok(mut events) = self.events.lock() else { return Vec::new() };
        read_queued(&self.fd, &mut events);
        std::mem::take(&mut *events)
    }
}

/// Appends the events queued when it is called (and no more: a writer faster than this loop must
/// not hold it) to `out`.
fn read_queued(fd: &OwnedFd, out: &mut Vec<u8>) {
    let Ok(queued) = rustix::io::ioctl_fionread(fd) else { return };
    let mut consumed = 0u64;
    let mut buf = vec![0u8; 64 << 10];
    while consumed < queued {
        match rustix::io::read(fd, &mut buf[..]) {
            Ok(0) | Err(Errno::AGAIN) => break,
            Ok(n) => {
                consumed += n as u64;
                out.extend_from_slice(&buf[..n]);
            }
            Err(Errno::INTR) => continue,
            Err(_) => break,
        }
    }
}

/// What watching a file gave: its watch, and whether its count of opens is known (it was alone).
#[derive(Debug, Clone, Copy)]
pub(super) struct Watch {
    pub wd: i32,
    known: bool,
}

/// Watches the file open as `file` (just opened by the index: the one open it has of ours), under
/// its write lease when it is alone.
pub(super) fn watch(spill: &Spill, file: &File) -> Result<Watch, GiveUp> {
    let lease = lease(file);
    if lease == Lease::Unavailable {
        return Err(
            "file leases are not available here (fs.leases-enable, or the file system): opens cannot be counted".into(),
        );
    }
    let known = lease == Lease::Alone;
    let added = inotify::add_watch(&spill.fd, format!("/proc/self/fd/{}", file.as_raw_fd()), FILE_EVENTS);
    if known {
        unlease(file);
    }
    match added {
        Ok(wd) => Ok(Watch { wd, known }),
        Err(Errno::NOSPC) => {
            Err("out of inotify watches (fs.inotify.max_user_watches): one per folder and file".into())
        }
        Err(e) => Err(format!("inotify watch on an indexed file: {e}")),
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Lease {
    /// Granted: nobody else has the file open.
    Alone,
    /// Refused: someone else has it open, or it is not ours to lease.
    Refused,
    /// The system grants no leases here.
    Unavailable,
}

/// `fcntl`'s F_SETSIG (Linux's `fcntl.h`; the libc crate does not name it).
const F_SETSIG: libc::c_int = 10;

/// Takes a write lease on `file`, signalled with SIGURG if broken.
fn lease(file: &File) -> Lease {
    let fd = file.as_raw_fd();
    // SAFETY: fcntl with integer arguments on a descriptor this process owns; F_SETSIG sets which
    // signal tells the holder a lease is broken, for this open file only.
    let set = unsafe {
        libc::fcntl(fd, F_SETSIG, libc::SIGURG) == 0 && libc::fcntl(fd, libc::F_SETLEASE, libc::F_WRLCK) == 0
    };
    if set {
        return Lease::Alone;
    }
    match Errno::from_raw_os_error(std::io::Error::last_os_error().raw_os_error().unwrap_or(0)) {
        Errno::AGAIN | Errno::ACCESS | Errno::PERM => Lease::Refused,
        _ => Lease::Unavailable,
    }
}

fn unlease(file: &File) {
    // SAFETY: as in `lease`; releasing a lease this descriptor holds.
    unsafe {
        libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK);
    }
}

/// What the events say of one watched file.
#[derive(Debug)]
struct State {
    /// The indexed paths that are this file (more than one: hard links inside the tree).
    paths: Vec<Arc<Path>>,
    /// Its opens, by any process, not yet closed, when `known`.
    opens: u32,
    /// Whether `opens` is known: not while the file may have had opens no event showed.
    known: bool,
    /// Its device and inode, to tell it from another file put at its path.
    inode: (u64, u64),
}

/// The file watches of one tree.
pub(super) struct Files {
    spill: Arc<Spill>,
    by_wd: HashMap<i32, State>,
    /// The watches of files open now or whose count is not known (so a query need not look at
    /// every file).
    doubtful: HashSet<i32>,
}

impl Files {
    pub fn new(spill: Arc<Spill>) -> Files {
        Files { spill, by_wd: HashMap::new(), doubtful: HashSet::new() }
    }

    /// Files `wd` among the doubtful ones, or not, as its state says now.
    fn review(&mut self, wd: i32) {
        match self.by_wd.get(&wd) {
            Some(state) if !state.known || state.opens > 0 => self.doubtful.insert(wd),
            _ => self.doubtful.remove(&wd),
        };
    }

    /// Records that the indexed file at `path` (of `inode`) is watched as `watch`: a new watch
    /// starts with one open, ours, when it was made alone; a file already watched under another
    /// path (a hard link in the tree) keeps what its events said.
    pub fn adopt(&mut self, path: &Arc<Path>, inode: (u64, u64), watch: Watch) {
        match self.by_wd.get_mut(&watch.wd) {
            Some(state) => {
                if !state.paths.contains(path) {
                    state.paths.push(path.clone());
                }
                state.inode = inode;
            }
            None => {
                let (opens, known) = (u32::from(watch.known), watch.known);
                self.by_wd.insert(watch.wd, State { paths: vec![path.clone()], opens, known, inode });
            }
        }
        self.review(watch.wd);
    }

    /// Two reads of one file raced (hard links read at once): its count is not known.
    pub fn doubt(&mut self, wd: i32) {
        if let Some(state) = self.by_wd.get_mut(&wd) {
            state.known = false;
        }
        self.review(wd);
    }

    /// `path` is no longer indexed as the file `wd`. Its watch stays until [`Files::prune`], so a
    /// file read again under the same inode keeps its count.
    pub fn forget(&mut self, path: &Path, wd: i32) {
        if let Some(state) = self.by_wd.get_mut(&wd) {
            state.paths.retain(|p| p.as_ref() != path);
        }
    }

    /// The indexed file `wd` moved from `old` to `new` within the tree.
    pub fn rename(&mut self, old: &Path, new: &Arc<Path>, wd: i32) {
        if let Some(state) = self.by_wd.get_mut(&wd) {
            state.paths.retain(|p| p.as_ref() != old);
            state.paths.push(new.clone());
        }
    }

    /// Removes the watches of files no indexed path is any more.
    pub fn prune(&mut self) {
        let gone: Vec<i32> = self.by_wd.iter().filter(|(_, s)| s.paths.is_empty()).map(|(wd, _)| *wd).collect();
        for wd in gone {
            self.by_wd.remove(&wd);
            self.doubtful.remove(&wd);
            let _ = inotify::remove_watch(&self.spill.fd, wd);
        }
    }

    /// The instance the watches belong to, for reading files into the index.
    pub fn spill(&self) -> &Spill {
        &self.spill
    }

    /// Handles every event so far: the paths of files written (through whatever path) or closed
    /// after writing go into `touched`; opens and closes are counted.
    ///
    /// # Errors
    /// The kernel's queue overflowed: events were lost, and the index must be built again.
    pub fn drain(&mut self, touched: &mut BTreeSet<PathBuf>) -> Result<(), GiveUp> {
        let events = self.spill.take();
        let mut pos = 0;
        while let Some(header) = events.get(pos..pos + 16) {
            let field = |i: usize| [header[i], header[i + 1], header[i + 2], header[i + 3]];
            let (wd, mask, len) =
                (i32::from_ne_bytes(field(0)), u32::from_ne_bytes(field(4)), u32::from_ne_bytes(field(12)) as usize);
            pos += 16 + len;
            let flags = ReadFlags::from_bits_retain(mask);
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                return Err("inotify lost events of the indexed files (its queue overflowed)".into());
            }
            if flags.contains(ReadFlags::IGNORED) {
                self.by_wd.remove(&wd);
                self.doubtful.remove(&wd);
                continue;
            }
            let Some(state) = self.by_wd.get_mut(&wd) else { continue };
            let counted = state.opens;
            if flags.contains(ReadFlags::OPEN) && state.known {
                state.opens += 1;
            }
            if flags.intersects(ReadFlags::CLOSE_WRITE | ReadFlags::CLOSE_NOWRITE) && state.known {
                state.opens = state.opens.saturating_sub(1);
            }
            if flags.intersects(ReadFlags::MODIFY | ReadFlags::ATTRIB | ReadFlags::CLOSE_WRITE) {
                touched.extend(state.paths.iter().map(|p| p.to_path_buf()));
            }
            if (counted == 0) != (state.opens == 0) {
                self.review(wd);
            }
        }
        Ok(())
    }

    /// Tries again to count the opens of each file whose count is not known: under its write lease
    /// (nobody else has it open, and nobody's open completes meanwhile) every event so far is
    /// handled, and then its count is ours alone. Those still open elsewhere stay unknown.
    ///
    /// # Errors
    /// As [`Files::drain`].
    pub fn settle(&mut self, ws: &Workspace, touched: &mut BTreeSet<PathBuf>) -> Result<(), GiveUp> {
        let unknown: Vec<i32> =
            self.doubtful.iter().copied().filter(|wd| self.by_wd.get(wd).is_some_and(|s| !s.known)).collect();
        for wd in unknown {
            let Some(state) = self.by_wd.get(&wd) else { continue };
            let (path, inode) = (state.paths[0].clone(), state.inode);
            let Ok(fd) = ws.open_beneath(&ws.root().join(&path), OFlags::RDONLY | OFlags::NONBLOCK, Mode::empty())
            else {
                continue;
            };
            let file = File::from(fd);
            // Another file at its path now: what it says is not about this one.
            if !file.metadata().is_ok_and(|m| (m.dev(), m.ino()) == inode) {
                continue;
            }
            if lease(&file) != Lease::Alone {
                continue;
            }
            let drained = self.drain(touched);
            if let (Ok(()), Some(state)) = (&drained, self.by_wd.get_mut(&wd)) {
                state.known = true;
                state.opens = 1;
            }
            self.review(wd);
            unlease(&file);
            drained?;
        }
        Ok(())
    }

    /// The indexed paths of files some process has open now, or may have (their count unknown):
    /// searched whatever the index says.
    pub fn open_now(&self) -> impl Iterator<Item = &Arc<Path>> {
        self.doubtful.iter().filter_map(|wd| self.by_wd.get(wd)).flat_map(|s| s.paths.iter())
    }

    /// Watches held.
    pub fn len(&self) -> usize {
        self.by_wd.len()
    }
}
