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
//!   changed behind the index's back only while some process holds it open, which its `IN_OPEN`
//!   said. A file with opens not yet closed is searched whatever the index says, and read again
//!   when a close after writing arrives.
//! - Counting opens from events is exact only from a moment when the file had no open but ours.
//!   A write lease (`F_SETLEASE`, `F_WRLCK`) is granted only on a file nobody else has open, and
//!   while it is held nobody else's open completes: a file watched while its lease is held starts
//!   with exactly one open, ours. A file whose lease is refused (open elsewhere, or not ours to
//!   lease) is searched whatever the index says until a later try, made after handling every
//!   event so far while holding the lease, finds it alone.
//! - A lease break is signalled to the holder, SIGIO by default, whose default action ends the
//!   process: the lease is asked for with SIGURG instead (ignored by default), and held for the one
//!   system call that adds the watch.
//!
//! Every read of a file makes two events (an open and a close), whoever reads it: a search's own,
//! `rg` or a compiler reading the whole tree. They change no count, but the kernel queue holds
//! 16,384 events, so a thread of the index reads them as they come. If the queue overflows anyway,
//! events were lost and the index is built again.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use crate::workspace::Workspace;

/// Why the index gave up: the search goes on cold.
pub(crate) type GiveUp = String;

const FILE_EVENTS: WatchFlags = WatchFlags::MODIFY
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::CLOSE_WRITE)
    .union(WatchFlags::CLOSE_NOWRITE)
    .union(WatchFlags::OPEN);

/// How long the reading thread waits for events before it checks whether the index is gone.
const FOLLOW_POLL: Timespec = Timespec { tv_sec: 0, tv_nsec: 100_000_000 };

/// The inotify instance of the file watches, and what its events said, shared by the index and
/// the thread that reads the events as they come.
pub(crate) struct Watcher {
    fd: OwnedFd,
    files: Mutex<Files>,
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
    /// The file is not ours to lease (another user's): its count can never be made known, so it
    /// stays doubtful (searched every time) and is not tried again.
    unleasable: bool,
}

/// The file watches of one tree, behind the watcher's lock.
pub(crate) struct Files {
    by_wd: HashMap<i32, State>,
    /// The watches of files open now or whose count is not known (so a query need not look at
    /// every file).
    doubtful: HashSet<i32>,
    /// Paths of files written (through whatever path) since the index last caught up.
    touched: BTreeSet<PathBuf>,
    /// Events were lost (the kernel's queue overflowed).
    lost: bool,
}

impl Watcher {
    /// A new instance, and the thread that follows its events for as long as the watcher lives.
    pub fn start() -> Result<Arc<Watcher>, GiveUp> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).map_err(|e| format!("inotify: {e}"))?;
        let files = Files { by_wd: HashMap::new(), doubtful: HashSet::new(), touched: BTreeSet::new(), lost: false };
        let watcher = Arc::new(Watcher { fd, files: Mutex::new(files) });
        let followed = Arc::downgrade(&watcher);
        std::thread::Builder::new()
            .name("search-index-events".to_string())
            .spawn(move || follow(followed))
            .map_err(|e| format!("cannot start the thread that reads file events: {e}"))?;
        Ok(watcher)
    }

    fn lock(&self) -> MutexGuard<'_, Files> {
        match self.files.lock() {
            Ok(files) => files,
            Err(poisoned) => {
                // A panic while counting: the counts cannot be trusted.
                let mut files = poisoned.into_inner();
                files.lost = true;
                self.files.clear_poison();
                files
            }
        }
    }

    /// Handles every event queued now, in order.
    fn read_now(&self, files: &mut Files) {
        let Ok(queued) = rustix::io::ioctl_fionread(&self.fd) else { return };
        let mut consumed = 0u64;
        let mut buf = vec![0u8; 64 << 10];
        while consumed < queued {
            match rustix::io::read(&self.fd, &mut buf[..]) {
                Ok(0) | Err(Errno::AGAIN) => break,
                Ok(n) => {
                    consumed += n as u64;
                    files.apply(&buf[..n]);
                }
                Err(Errno::INTR) => continue,
                Err(_) => {
                    files.lost = true;
                    break;
                }
            }
        }
    }

    /// Watches the file at `path` (of `inode`), open as `file` (just opened by the index: its one
    /// open of ours), under its write lease when it is alone. Returns the watch.
    pub fn watch(&self, file: &File, path: &Arc<Path>, inode: (u64, u64)) -> Result<i32, GiveUp> {
        let mut files = self.lock();
        let lease = lease(file);
        if lease == Lease::Unavailable {
            return Err("file leases are not available here (fs.leases-enable, or the file system), so the \
                        opens of files cannot be counted"
                .into());
        }
        let added = inotify::add_watch(&self.fd, format!("/proc/self/fd/{}", file.as_raw_fd()), FILE_EVENTS);
        if lease == Lease::Alone {
            unlease(file);
        }
        let wd = match added {
            Ok(wd) => wd,
            Err(Errno::NOSPC) => {
                return Err("out of inotify watches (fs.inotify.max_user_watches): one per folder and file".into())
            }
            Err(e) => return Err(format!("inotify watch on an indexed file: {e}")),
        };
        files.adopt(wd, path, inode, &lease);
        Ok(wd)
    }

    /// Brings the counts up to date with every event so far, tries again the files whose count is
    /// not known, and moves the paths of files written since the last time into `touched`.
    ///
    /// # Errors
    /// Events were lost: the index must be built again.
    pub fn catch_up(&self, ws: &Workspace, touched: &mut BTreeSet<PathBuf>) -> Result<(), GiveUp> {
        let mut files = self.lock();
        self.read_now(&mut files);
        self.settle(&mut files, ws);
        touched.append(&mut files.touched);
        if files.lost {
            return Err("inotify lost events of the indexed files (its queue overflowed)".into());
        }
        Ok(())
    }

    /// Tries again to count the opens of each file whose count is not known: under its write lease
    /// (nobody else has it open, and nobody's open completes meanwhile) every event so far is
    /// handled, and then its count is ours alone. Those still open elsewhere stay unknown.
    fn settle(&self, files: &mut Files, ws: &Workspace) {
        let unknown: Vec<i32> = files
            .doubtful
            .iter()
            .copied()
            .filter(|wd| files.by_wd.get(wd).is_some_and(|s| !s.known && !s.unleasable))
            .collect();
        for (tried, wd) in unknown.into_iter().enumerate() {
            // Each try is an open and a close in the queue, which the following thread cannot
            // drain while this holds the lock.
            if tried % 1024 == 1023 {
                self.read_now(files);
            }
            let Some(state) = files.by_wd.get(&wd) else { continue };
            let Some(path) = state.paths.first().cloned() else { continue };
            let inode = state.inode;
            let opened = ws.open_beneath(&ws.root().join(&path), OFlags::RDONLY | OFlags::NONBLOCK, Mode::empty());
            let Ok(fd) = opened else { continue };
            let file = File::from(fd);
            // Another file at its path now: the tree's events say so, and it is read again.
            if !file.metadata().is_ok_and(|m| (m.dev(), m.ino()) == inode) {
                continue;
            }
            match lease(&file) {
                Lease::Alone => {}
                Lease::NotOurs => {
                    if let Some(state) = files.by_wd.get_mut(&wd) {
                        state.unleasable = true;
                    }
                    continue;
                }
                Lease::Refused | Lease::Unavailable => continue,
            }
            self.read_now(files);
            if let Some(state) = files.by_wd.get_mut(&wd) {
                state.known = true;
                state.opens = 1;
            }
            files.review(wd);
            unlease(&file);
        }
    }

    /// `path` is no longer indexed as the file `wd`. Its watch stays until [`Watcher::prune`], so
    /// a file read again under the same inode keeps its count.
    pub fn forget(&self, path: &Path, wd: i32) {
        if let Some(state) = self.lock().by_wd.get_mut(&wd) {
            state.paths.retain(|p| p.as_ref() != path);
        }
    }

    /// The indexed file `wd` moved from `old` to `new` within the tree.
    pub fn rename(&self, old: &Path, new: &Arc<Path>, wd: i32) {
        if let Some(state) = self.lock().by_wd.get_mut(&wd) {
            state.paths.retain(|p| p.as_ref() != old);
            state.paths.push(new.clone());
        }
    }

    /// Removes the watches of files no indexed path is any more.
    pub fn prune(&self) {
        let mut files = self.lock();
        let gone: Vec<i32> = files.by_wd.iter().filter(|(_, s)| s.paths.is_empty()).map(|(wd, _)| *wd).collect();
        for wd in gone {
            files.by_wd.remove(&wd);
            files.doubtful.remove(&wd);
            let _ = inotify::remove_watch(&self.fd, wd);
        }
    }

    /// The indexed paths of files some process has open now, or may have (their count unknown):
    /// searched whatever the index says.
    pub fn open_now(&self) -> Vec<Arc<Path>> {
        let files = self.lock();
        files.doubtful.iter().filter_map(|wd| files.by_wd.get(wd)).flat_map(|s| s.paths.iter().cloned()).collect()
    }

    /// Watches held.
    pub fn len(&self) -> usize {
        self.lock().by_wd.len()
    }
}

/// The thread that reads the file watches' events as they come, until the watcher is dropped.
fn follow(watcher: Weak<Watcher>) {
    loop {
        let Some(watcher) = watcher.upgrade() else { return };
        let mut wait = [PollFd::new(&watcher.fd, PollFlags::IN)];
        let ready = rustix::event::poll(&mut wait, Some(&FOLLOW_POLL)).unwrap_or(0);
        if ready > 0 {
            let mut files = watcher.lock();
            watcher.read_now(&mut files);
        }
    }
}

impl Files {
    /// Records that `path` (of `inode`) is the file watched as `wd`: a new watch made alone starts
    /// with one open, ours; a file already watched under another path (a hard link in the tree),
    /// or read again, keeps what its events said.
    fn adopt(&mut self, wd: i32, path: &Arc<Path>, inode: (u64, u64), lease: &Lease) {
        let alone = *lease == Lease::Alone;
        match self.by_wd.get_mut(&wd) {
            Some(state) => {
                if !state.paths.contains(path) {
                    state.paths.push(path.clone());
                }
                state.inode = inode;
            }
            None => {
                let state = State {
                    paths: vec![path.clone()],
                    opens: u32::from(alone),
                    known: alone,
                    inode,
                    unleasable: *lease == Lease::NotOurs,
                };
                self.by_wd.insert(wd, state);
            }
        }
        self.review(wd);
    }

    /// Files `wd` among the doubtful ones, or not, as its state says now.
    fn review(&mut self, wd: i32) {
        match self.by_wd.get(&wd) {
            Some(state) if !state.known || state.opens > 0 => self.doubtful.insert(wd),
            _ => self.doubtful.remove(&wd),
        };
    }

    /// Handles a buffer of events, in order.
    fn apply(&mut self, events: &[u8]) {
        let mut pos = 0;
        while let Some(header) = events.get(pos..pos + 16) {
            let field = |i: usize| [header[i], header[i + 1], header[i + 2], header[i + 3]];
            let (wd, mask, len) =
                (i32::from_ne_bytes(field(0)), u32::from_ne_bytes(field(4)), u32::from_ne_bytes(field(12)) as usize);
            pos += 16 + len;
            let flags = ReadFlags::from_bits_retain(mask);
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                self.lost = true;
                continue;
            }
            if flags.contains(ReadFlags::IGNORED) {
                self.by_wd.remove(&wd);
                self.doubtful.remove(&wd);
                continue;
            }
            let Some(state) = self.by_wd.get_mut(&wd) else { continue };
            let was_open = state.opens > 0;
            if flags.contains(ReadFlags::OPEN) && state.known {
                state.opens += 1;
            }
            if flags.intersects(ReadFlags::CLOSE_WRITE | ReadFlags::CLOSE_NOWRITE) && state.known {
                state.opens = state.opens.saturating_sub(1);
            }
            if flags.intersects(ReadFlags::MODIFY | ReadFlags::ATTRIB | ReadFlags::CLOSE_WRITE) {
                let paths: Vec<PathBuf> = state.paths.iter().map(|p| p.to_path_buf()).collect();
                self.touched.extend(paths);
            }
            if was_open != (self.by_wd.get(&wd).is_some_and(|s| s.opens > 0)) {
                self.review(wd);
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Lease {
    /// Granted: nobody else has the file open.
    Alone,
    /// Refused: someone else has it open now.
    Refused,
    /// Refused for good: the file is not ours to lease (another user's, without CAP_LEASE).
    NotOurs,
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
        Errno::AGAIN => Lease::Refused,
        Errno::ACCESS | Errno::PERM => Lease::NotOurs,
        _ => Lease::Unavailable,
    }
}

fn unlease(file: &File) {
    // SAFETY: as in `lease`; releasing a lease this descriptor holds.
    unsafe {
        libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK);
    }
}
