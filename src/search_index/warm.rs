//! The live index of one workspace tree: which files the cold walker would search, the trigrams
//! of each, and the inotify watches that keep both exact. It owns building, catching up with
//! changes and answering "which files may match this query"; the search itself is index-grep's.
//!
//! Exactness rests on three rules:
//! - Every directory is watched before its listing is trusted: a walk adds watches for the
//!   directories it meets, and walks again below those it had not watched, since the walker lists
//!   a directory before showing it (until no new watch was needed).
//! - Before each answer the inotify descriptor is read until it is empty. An event is queued when
//!   its system call completes, so every change made before the query is seen.
//! - The files a change may concern are found again by the same walker from the root, limited to
//!   the changed paths and their ancestors, so `.gitignore`, `.ignore`, hidden files and
//!   `.git/info/exclude` apply exactly as in a cold search. A change to an ignore file (or a `.git`
//!   appearing, or lost events) walks the whole tree again, reusing files whose stat is unchanged.
//!
//! - Each indexed file is watched too, by inode (`files`): a write through a hard link outside the
//!   tree is seen, and so are the opens that may hide writes through a shared memory map, which
//!   make no event; a file some process has open is searched whatever the index says.
//! - The global git excludes file (`core.excludesFile`, `$XDG_CONFIG_HOME/git/ignore`) and the git
//!   config files that name it are watched where they are (or where they would appear): a change
//!   walks the whole tree again.
//!
//! Whatever cannot be indexed exactly is searched anyway: files whose text the searcher would
//! transcode (a byte-order mark), files too large, files that could not be read are "always"
//! candidates.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs::Metadata;
use std::io::Read;
use std::ops::Bound;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use super::files::Watcher;
use super::plan::{trigrams_of, Query, Trigram};
use super::postings::{decode, Builder, Postings};
use super::{walker, IndexStats};
use crate::workspace::Workspace;

/// Beyond this much text the tree is searched cold: the index would cost more than it saves.
pub(crate) const MAX_TEXT_BYTES: u64 = 1 << 30;
/// A file larger than this is not indexed but always searched.
const MAX_FILE_BYTES: u64 = 64 << 20;
/// More events about the tree than this in one catch-up are handled as one walk of the whole
/// tree, reusing what the stamps say is unchanged.
const MAX_EVENTS: usize = 4096;
/// Files whose change changes which files the walker yields.
const IGNORE_FILES: &[&str] = &[".gitignore", ".ignore", ".rgignore", ".git"];
/// After this many catch-ups in a row that met a flood of events, the tree changes faster than an
/// index pays off: searches go cold.
const MAX_FLOODS: u32 = 3;
/// A file changed this close to when it was read may have changed again within the same
/// timestamp tick; it is never reused on the strength of its stat alone (git's "racily clean").
/// Timestamps come from the kernel's coarse clock, a tick (at most 10 ms) behind; the status
/// change time (`ctime`) cannot be set by anyone, so a later change always moves it past this.
const RACY: Duration = Duration::from_millis(100);

pub(crate) use super::files::GiveUp;

/// What a file looked like when it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(meta: &Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

#[derive(Debug)]
struct Entry {
    path: Arc<Path>,
    /// `None` when the file could not be stat'ed: it is read again on any reconciliation.
    stamp: Option<Stamp>,
    /// Modified within [`RACY`] of being read.
    racy: bool,
    /// Bytes of text indexed (up to the first NUL, where the searcher stops).
    text: u64,
    /// Searched whatever the query: not indexed.
    always: bool,
    /// The watch on the file itself (none for an "always" file, which is searched anyway).
    watch: Option<i32>,
}

/// What reading a file for the index gave.
struct Indexed {
    entry: Entry,
    /// Its distinct trigrams, sorted; empty for an "always" file.
    trigrams: Vec<Trigram>,
    /// Why the file could not be watched, when it could not.
    unwatched: Option<GiveUp>,
}

/// A set of trigrams seen in the current file, cleared file by file.
struct Seen {
    bits: Vec<u64>,
    list: Vec<Trigram>,
}

impl Seen {
    fn new() -> Seen {
        Seen { bits: vec![0; 1 << 18], list: Vec::new() }
    }

    /// The distinct trigrams of `text`, sorted.
    fn distinct(&mut self, text: &[u8]) -> Vec<Trigram> {
        self.list.clear();
        for t in trigrams_of(text) {
            let (word, bit) = ((t >> 6) as usize, 1u64 << (t & 63));
            if self.bits[word] & bit == 0 {
                self.bits[word] |= bit;
                self.list.push(t);
            }
        }
        for &t in &self.list {
            self.bits[(t >> 6) as usize] = 0;
        }
        let mut out = self.list.clone();
        out.sort_unstable();
        out
    }
}

/// Reads the file at `relative` as the searcher will: beneath the root handle, up to its first
/// NUL byte, and watches it while it is open.
fn read_file(ws: &Workspace, relative: &Path, seen: &mut Seen, buf: &mut Vec<u8>, watcher: &Watcher) -> Indexed {
    let path: Arc<Path> = Arc::from(relative);
    let always_watched = |stamp: Option<Stamp>, watch: &Result<i32, GiveUp>| Indexed {
        entry: Entry {
            path: path.clone(),
            stamp,
            racy: true,
            text: 0,
            always: true,
            watch: watch.as_ref().ok().copied(),
        },
        trigrams: Vec::new(),
        unwatched: watch.as_ref().err().cloned(),
    };
    // Not watched: a file that could not be read as text is searched every time anyway.
    let always = |stamp: Option<Stamp>| Indexed {
        entry: Entry { path: path.clone(), stamp, racy: true, text: 0, always: true, watch: None },
        trigrams: Vec::new(),
        unwatched: None,
    };
    let opened = ws.open_beneath(&ws.root().join(relative), OFlags::RDONLY | OFlags::NONBLOCK, Mode::empty());
    let Ok(file) = opened else { return always(None) };
    let mut file = std::fs::File::from(file);
    let Ok(meta) = file.metadata() else { return always(None) };
    let stamp = Stamp::of(&meta);
    if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
        return always(Some(stamp));
    }
    // Watched before it is read: nothing that happens to it from now on goes unseen.
    let watch = watcher.watch(&file, &path, (stamp.dev, stamp.ino));
    let read_at = SystemTime::now();
    buf.clear();
    // In chunks, to stop at the first NUL as the searcher does without reading a binary file whole.
    loop {
        let start = buf.len();
        match (&mut file).take(64 << 10).read_to_end(buf) {
            Ok(0) => break,
            Ok(_) => {
                if let Some(nul) = memchr::memchr(0, &buf[start..]) {
                    buf.truncate(start + nul);
                    break;
                }
                if buf.len() as u64 > MAX_FILE_BYTES {
                    return always_watched(Some(stamp), &watch);
                }
            }
            Err(_) => return always_watched(Some(stamp), &watch),
        }
    }
    // The searcher transcodes text that starts with a byte-order mark: its bytes are not these.
    if buf.starts_with(&[0xef, 0xbb, 0xbf]) || buf.starts_with(&[0xff, 0xfe]) || buf.starts_with(&[0xfe, 0xff]) {
        return always_watched(Some(stamp), &watch);
    }
    let changed = std::time::UNIX_EPOCH
        + Duration::new(u64::try_from(stamp.ctime.0).unwrap_or(0), u32::try_from(stamp.ctime.1).unwrap_or(0));
    let racy = read_at.duration_since(changed).map_or(true, |age| age < RACY);
    Indexed {
        entry: Entry {
            path,
            stamp: Some(stamp),
            racy,
            text: buf.len() as u64,
            always: false,
            watch: watch.as_ref().ok().copied(),
        },
        trigrams: seen.distinct(buf),
        unwatched: watch.err(),
    }
}

/// What a watch descriptor watches.
#[derive(Debug, Clone)]
enum Watched {
    /// A directory of the tree, relative to the root.
    Tree(PathBuf),
    /// A git directory or its `info` folder, where `info/exclude` lives.
    GitMeta,
    /// An ancestor of the root, whose ignore files the walker also reads.
    Outside,
}

const TREE_EVENTS: WatchFlags = WatchFlags::CREATE
    .union(WatchFlags::DELETE)
    .union(WatchFlags::MODIFY)
    .union(WatchFlags::CLOSE_WRITE)
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF)
    .union(WatchFlags::DONT_FOLLOW)
    .union(WatchFlags::ONLYDIR);

/// The inotify instance and what each of its watches is for.
struct Watches {
    fd: OwnedFd,
    root: PathBuf,
    kinds: HashMap<i32, Watched>,
    tree: HashMap<PathBuf, i32>,
    /// Folders holding (or that would hold) the global git config and excludes files, which the
    /// walker reads: the names in each that matter. A folder may also be watched for another
    /// reason (the home folder above the root, say), under the same watch.
    git_global: HashMap<i32, Vec<std::ffi::OsString>>,
}

/// What the events read since the last answer ask for.
#[derive(Default)]
struct Changes {
    touched: BTreeSet<PathBuf>,
    everything: bool,
    /// Events about the tree's own folders.
    events: usize,
    /// More events than are worth following one by one, or more than inotify kept.
    flood: bool,
    /// The global git config or excludes file changed: the walker may ignore other files now.
    excludes: bool,
}

/// A tree walk's findings: files (with their lstat when it worked) and directories, relative.
type Found = (BTreeMap<PathBuf, Option<Metadata>>, BTreeSet<PathBuf>);

impl Watches {
    fn new(root: &Path) -> Result<Watches, GiveUp> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).map_err(|e| format!("inotify: {e}"))?;
        let mut watches = Watches {
            fd,
            root: root.to_path_buf(),
            kinds: HashMap::new(),
            tree: HashMap::new(),
            git_global: HashMap::new(),
        };
        watches.watch_git_global()?;
        for ancestor in root.ancestors().skip(1) {
            match inotify::add_watch(&watches.fd, ancestor, TREE_EVENTS) {
                Ok(wd) => {
                    watches.kinds.insert(wd, Watched::Outside);
                }
                // Unwatchable (no read access): changes to its ignore files go unseen, as the
                // module docs say.
                Err(Errno::ACCESS) => {}
                Err(e) => return Err(format!("inotify watch on {}: {e}", ancestor.display())),
            }
            watches.watch_git_meta(ancestor)?;
        }
        watches.watch_dir(Path::new(""))?;
        Ok(watches)
    }

    /// Watches the tree directory `relative`. `true` when the watch is new: a folder that moved
    /// within the tree keeps its watch (it follows the inode), so nothing in it went unseen.
    fn watch_dir(&mut self, relative: &Path) -> Result<bool, GiveUp> {
        let absolute = self.root.join(relative);
        let wd = match inotify::add_watch(&self.fd, &absolute, TREE_EVENTS) {
            Ok(wd) => wd,
            // Gone already: its parent's event says so.
            Err(Errno::NOENT) | Err(Errno::NOTDIR) => return Ok(false),
            Err(e) => return Err(format!("inotify watch on {}: {e}", absolute.display())),
        };
        let moved = match self.kinds.get(&wd) {
            Some(Watched::Tree(before)) => {
                if self.tree.get(before) == Some(&wd) {
                    self.tree.remove(&before.clone());
                }
                true
            }
            _ => false,
        };
        self.kinds.insert(wd, Watched::Tree(relative.to_path_buf()));
        self.tree.insert(relative.to_path_buf(), wd);
        self.watch_git_meta(&absolute)?;
        Ok(!moved)
    }

    /// Watches the folders where the walker finds `dir`'s `.git/info/exclude` (through a
    /// worktree's `.git` file when it is one), as the ignore crate resolves them.
    fn watch_git_meta(&mut self, dir: &Path) -> Result<(), GiveUp> {
        let dot_git = dir.join(".git");
        let Ok(meta) = dot_git.symlink_metadata() else { return Ok(()) };
        let common = if meta.is_file() {
            let Some(common) = worktree_common_dir(&dot_git) else { return Ok(()) };
            common
        } else {
            dot_git
        };
        for folder in [common.join("info"), common] {
            match inotify::add_watch(&self.fd, &folder, TREE_EVENTS) {
                Ok(wd) => {
                    self.kinds.entry(wd).or_insert(Watched::GitMeta);
                }
                Err(Errno::NOENT) | Err(Errno::NOTDIR) | Err(Errno::ACCESS) => {}
                Err(e) => return Err(format!("inotify watch on {}: {e}", folder.display())),
            }
        }
        Ok(())
    }

    /// Watches the folders where the global git config files and the global excludes file are, or
    /// the nearest folder above one that does not exist yet, for the name that leads to it.
    fn watch_git_global(&mut self) -> Result<(), GiveUp> {
        for file in git_global_files() {
            let mut targets = vec![file.clone()];
            // Through a symlink, the file read is its target's.
            if let Ok(real) = std::fs::canonicalize(&file) {
                if real != file {
                    targets.push(real);
                }
            }
            for target in targets {
                let mut below = target.as_path();
                while let Some(folder) = below.parent() {
                    let Some(name) = below.file_name() else { break };
                    match inotify::add_watch(&self.fd, folder, TREE_EVENTS) {
                        Ok(wd) => {
                            let names = self.git_global.entry(wd).or_default();
                            if !names.iter().any(|n| n == name) {
                                names.push(name.to_os_string());
                            }
                            break;
                        }
                        Err(Errno::NOENT) | Err(Errno::NOTDIR) => below = folder,
                        // Unreadable: a change there goes unseen, as the module docs say of such folders.
                        Err(Errno::ACCESS) => break,
                        Err(e) => return Err(format!("inotify watch on {}: {e}", folder.display())),
                    }
                }
            }
        }
        Ok(())
    }

    fn forget(&mut self, wd: i32) {
        if let Some(Watched::Tree(dir)) = self.kinds.remove(&wd) {
            if self.tree.get(&dir) == Some(&wd) {
                self.tree.remove(&dir);
            }
        }
    }

    /// Reads the events queued when it is called. Events queued meanwhile are changes made during
    /// this query, which a cold search does not promise to see either; not waiting for them keeps
    /// a writer faster than this loop from holding the query here.
    fn drain(&mut self) -> Result<Changes, GiveUp> {
        let mut changes = Changes::default();
        let queued = rustix::io::ioctl_fionread(&self.fd).map_err(|e| format!("inotify: {e}"))?;
        let mut buf = vec![0u8; 64 << 10];
        let mut forgotten = Vec::new();
        let mut consumed = 0u64;
        while consumed < queued {
            let n = match rustix::io::read(&self.fd, &mut buf[..]) {
                Ok(0) | Err(Errno::AGAIN) => break,
                Ok(n) => n,
                Err(Errno::INTR) => continue,
                Err(e) => return Err(format!("inotify read: {e}")),
            };
            consumed += n as u64;
            // struct inotify_event: wd, mask, cookie, len, then len bytes of NUL-padded name.
            let mut pos = 0;
            while let Some(header) = buf[..n].get(pos..pos + 16) {
                let field = |i: usize| [header[i], header[i + 1], header[i + 2], header[i + 3]];
                let (wd, mask, len) = (
                    i32::from_ne_bytes(field(0)),
                    u32::from_ne_bytes(field(4)),
                    u32::from_ne_bytes(field(12)) as usize,
                );
                let name = buf[..n].get(pos + 16..pos + 16 + len).unwrap_or(&[]);
                let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
                pos += 16 + len;
                let name = (!name.is_empty()).then(|| std::ffi::OsStr::from_bytes(name));
                self.note(wd, ReadFlags::from_bits_retain(mask), name, &mut changes, &mut forgotten)?;
            }
        }
        for wd in forgotten {
            self.forget(wd);
        }
        Ok(changes)
    }

    /// What one event asks for.
    fn note(
        &self,
        wd: i32,
        flags: ReadFlags,
        name: Option<&std::ffi::OsStr>,
        changes: &mut Changes,
        forgotten: &mut Vec<i32>,
    ) -> Result<(), GiveUp> {
        if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
            changes.everything = true;
            changes.flood = true;
            return Ok(());
        }
        if flags.contains(ReadFlags::UNMOUNT) {
            return Err("a file system of the tree was unmounted".to_string());
        }
        let ignore_file = name.is_some_and(|n| IGNORE_FILES.iter().any(|f| n == *f));
        let gone = flags.intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF);
        if flags.contains(ReadFlags::IGNORED) {
            forgotten.push(wd);
        }
        if let Some(names) = self.git_global.get(&wd) {
            let ignored = flags.contains(ReadFlags::IGNORED);
            if gone || ignored || name.is_some_and(|n| names.iter().any(|m| m == n)) {
                changes.everything = true;
                changes.excludes = true;
            }
        }
        match self.kinds.get(&wd) {
            None => {}
            Some(Watched::Tree(dir)) => {
                if dir.as_os_str().is_empty() && (gone || flags.contains(ReadFlags::IGNORED)) {
                    return Err("the workspace root moved or was deleted".to_string());
                }
                changes.everything |= ignore_file;
                changes.events += 1;
                if changes.events > MAX_EVENTS {
                    // A flood: one walk of the tree, trusting stamps, costs less than following it.
                    changes.everything = true;
                    changes.flood = true;
                } else {
                    changes.touched.insert(match name {
                        Some(name) => dir.join(name),
                        None => dir.clone(),
                    });
                }
            }
            Some(Watched::GitMeta) => {
                changes.everything |= gone || name.is_some_and(|n| n == "info" || n == "exclude");
            }
            Some(Watched::Outside) => {
                if gone || flags.contains(ReadFlags::IGNORED) {
                    return Err("a folder above the workspace root moved or was deleted".to_string());
                }
                changes.everything |= ignore_file;
                let root_gone = flags.intersects(ReadFlags::MOVED_FROM | ReadFlags::DELETE);
                if root_gone && name.is_some() && name == self.root.file_name() {
                    return Err("the workspace root moved or was deleted".to_string());
                }
            }
        }
        Ok(())
    }

    /// Walks the tree below `roots` (relative; the empty path is the whole tree) with the cold
    /// search's walker, watching every directory it meets, and again below those it had not
    /// watched yet, until a walk needs no new watch.
    fn walk(&mut self, roots: &[PathBuf]) -> Result<Found, GiveUp> {
        let mut files: BTreeMap<PathBuf, Option<Metadata>> = BTreeMap::new();
        let mut dirs = BTreeSet::new();
        let mut pending = roots.to_vec();
        while !pending.is_empty() {
            let (found_files, found_dirs) = walk_once(&self.root, &pending);
            for p in &pending {
                let under: Vec<PathBuf> = files
                    .range::<Path, _>((Bound::Included(p.as_path()), Bound::Unbounded))
                    .map(|(k, _)| k)
                    .take_while(|k| k.starts_with(p))
                    .cloned()
                    .collect();
                for k in under {
                    files.remove(&k);
                }
            }
            files.extend(found_files);
            let mut fresh = Vec::new();
            for dir in found_dirs {
                if !self.tree.contains_key(&dir) && self.watch_dir(&dir)? {
                    fresh.push(dir.clone());
                }
                dirs.insert(dir);
            }
            pending = outermost(fresh.into_iter().collect());
        }
        Ok((files, dirs))
    }
}

/// The files the walker reads git's global excludes from, as the ignore crate finds them: the
/// global and system config files (`core.excludesFile`) and the excludes file itself, named
/// by the environment as it is now.
fn git_global_files() -> Vec<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let home = var("HOME");
    let config = var("XDG_CONFIG_HOME").or_else(|| home.as_ref().map(|h| h.join(".config")));
    let mut files = Vec::new();
    files.extend(var("GIT_CONFIG_GLOBAL"));
    files.extend(home.map(|h| h.join(".gitconfig")));
    if let Some(config) = &config {
        files.push(config.join("git/config"));
        files.push(config.join("git/ignore"));
    }
    files.push(var("GIT_CONFIG_SYSTEM").unwrap_or_else(|| PathBuf::from("/etc/gitconfig")));
    if let Some(excludes) = ignore::gitignore::gitconfig_excludes_path() {
        // A relative path is read from the process's current folder.
        files.push(std::env::current_dir().map_or(excludes.clone(), |cwd| cwd.join(&excludes)));
    }
    files.retain(|f| f.is_absolute());
    files
}

/// The common git directory of the worktree whose `.git` file is `dot_git`, as the ignore crate
/// finds it (`gitdir: ...` then that folder's `commondir`).
fn worktree_common_dir(dot_git: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(dot_git).ok()?;
    let git_dir = PathBuf::from(text.lines().next()?.strip_prefix("gitdir: ")?);
    let git_dir = dot_git.parent()?.join(git_dir);
    let common = std::fs::read_to_string(git_dir.join("commondir")).ok()?;
    let common = common.lines().next()?;
    Some(if common.starts_with('.') { git_dir.join(common) } else { PathBuf::from(common) })
}

/// The paths of `set` that are not below another one of it.
fn outermost(set: BTreeSet<PathBuf>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for path in set {
        // Sorted by component, so an ancestor comes before everything below it.
        if !out.last().is_some_and(|last| path.starts_with(last)) {
            out.push(path);
        }
    }
    out
}

/// One walk of the tree limited to `roots` and their ancestors.
fn walk_once(root: &Path, roots: &[PathBuf]) -> (Vec<(PathBuf, Option<Metadata>)>, Vec<PathBuf>) {
    let mut walk = walker(root);
    if !roots.iter().any(|r| r.as_os_str().is_empty()) {
        let within: Arc<HashSet<PathBuf>> = Arc::new(roots.iter().map(|r| root.join(r)).collect());
        let above: Arc<HashSet<PathBuf>> =
            Arc::new(within.iter().flat_map(|r| r.ancestors().skip(1).map(Path::to_path_buf)).collect());
        walk.filter_entry(move |entry| {
            let path = entry.path();
            above.contains(path) || path.ancestors().any(|a| within.contains(a))
        });
    }
    let files = Mutex::new(Vec::new());
    let dirs = Mutex::new(Vec::new());
    walk.build_parallel().run(|| {
        let (files, dirs) = (&files, &dirs);
        Box::new(move |entry| {
            let Ok(entry) = entry else { return ignore::WalkState::Continue };
            let relative = entry.path().strip_prefix(root).unwrap_or(entry.path()).to_path_buf();
            match entry.file_type() {
                Some(t) if t.is_file() => {
                    let meta = entry.metadata().ok();
                    if let Ok(mut files) = files.lock() {
                        files.push((relative, meta));
                    }
                }
                Some(t) if t.is_dir() => {
                    if let Ok(mut dirs) = dirs.lock() {
                        dirs.push(relative);
                    }
                }
                _ => {}
            }
            ignore::WalkState::Continue
        })
    });
    let files = files.into_inner().unwrap_or_else(|p| p.into_inner());
    let dirs = dirs.into_inner().unwrap_or_else(|p| p.into_inner());
    (files, dirs)
}

/// The index of one tree.
pub(crate) struct Warm {
    watches: Watches,
    /// By file id; `None` once the file is gone or was read again under a new id.
    files: Vec<Option<Entry>>,
    by_path: BTreeMap<Arc<Path>, u32>,
    /// Lists of the ids below `base_end`.
    base: Postings,
    base_end: u32,
    /// Files (re)indexed since `base` was made: their sorted trigrams.
    overlay: HashMap<u32, Box<[Trigram]>>,
    overlay_trigrams: usize,
    always: BTreeSet<u32>,
    text_bytes: u64,
    /// Catch-ups in a row that met a flood.
    floods: u32,
    /// The watches on the files themselves.
    watched: Arc<Watcher>,
    /// Events of the files were lost: the index must be built again, not given up.
    pub(crate) lost: bool,
}

impl Warm {
    /// Indexes the tree of `ws`; gives up (stays cold) past [`MAX_TEXT_BYTES`], when the index
    /// would outgrow the text, when inotify is unavailable, or when `abandoned` says so.
    pub(crate) fn build(
        ws: &Workspace,
        watcher: &Arc<Watcher>,
        abandoned: &(dyn Fn() -> bool + Sync),
    ) -> Result<Warm, GiveUp> {
        let mut watches = Watches::new(ws.root())?;
        let (found, _dirs) = watches.walk(&[PathBuf::new()])?;
        let total: u64 = found.values().map(|m| m.as_ref().map_or(0, Metadata::len)).sum();
        if total > MAX_TEXT_BYTES {
            return Err(format!("{total} bytes of files, more than the index takes ({MAX_TEXT_BYTES})"));
        }
        let paths: Vec<(PathBuf, u64)> =
            found.into_iter().map(|(p, m)| (p, m.as_ref().map_or(0, Metadata::len))).collect();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
        // Contiguous runs of ids, about equal in bytes, one per thread: each builds lists of its own
        // increasing ids, and the lists join end to end.
        let mut bounds = vec![0];
        let share = total / threads as u64 + 1;
        let mut acc = 0;
        for (i, (_, size)) in paths.iter().enumerate() {
            acc += size;
            if acc >= share * bounds.len() as u64 && bounds.len() < threads {
                bounds.push(i + 1);
            }
        }
        bounds.push(paths.len());
        bounds.dedup();
        let parts: Vec<Option<(Builder, Vec<(Entry, Option<GiveUp>)>)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = bounds
                .windows(2)
                .map(|w| {
                    let (start, end) = (w[0], w[1]);
                    let paths = &paths[start..end];
                    scope.spawn(move || {
                        let mut builder = Builder::default();
                        let mut entries = Vec::with_capacity(paths.len());
                        let (mut seen, mut buf) = (Seen::new(), Vec::new());
                        for (i, (path, _)) in paths.iter().enumerate() {
                            if i % 256 == 0 && abandoned() {
                                return None;
                            }
                            let indexed = read_file(ws, path, &mut seen, &mut buf, watcher);
                            let id = (start + i) as u32;
                            for &t in &indexed.trigrams {
                                builder.add(id, t);
                            }
                            entries.push((indexed.entry, indexed.unwatched));
                        }
                        Some((builder, entries))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().ok().flatten()).collect()
        });
        let mut builders = Vec::new();
        let mut files = Vec::with_capacity(paths.len());
        for part in parts {
            let Some((builder, entries)) = part else { return Err("the index build was abandoned".to_string()) };
            builders.push(builder);
            for (entry, unwatched) in entries {
                if let Some(why) = unwatched {
                    return Err(why);
                }
                files.push(Some(entry));
            }
        }
        let base = Builder::merge(builders).ok_or("the index outgrew its offsets")?;
        let base_end = u32::try_from(files.len()).map_err(|_| "too many files")?;
        let mut warm = Warm {
            watches,
            by_path: BTreeMap::new(),
            always: BTreeSet::new(),
            text_bytes: 0,
            files: Vec::new(),
            base,
            base_end,
            overlay: HashMap::new(),
            overlay_trigrams: 0,
            floods: 0,
            watched: Arc::clone(watcher),
            lost: false,
        };
        for (id, entry) in files.iter().enumerate() {
            let Some(entry) = entry else { continue };
            warm.by_path.insert(entry.path.clone(), id as u32);
            warm.text_bytes += entry.text;
            if entry.always {
                warm.always.insert(id as u32);
            }
        }
        warm.files = files;
        warm.check_bounds()?;
        Ok(warm)
    }

    fn check_bounds(&self) -> Result<(), GiveUp> {
        let stats = self.stats();
        if stats.text_bytes > MAX_TEXT_BYTES {
            return Err(format!("{} bytes of text, more than the index takes", stats.text_bytes));
        }
        // Tiny trees have more bookkeeping than text; the bound is for the trees that matter.
        if stats.index_bytes > stats.text_bytes.max(16 << 20) {
            return Err(format!(
                "the index ({} bytes) outgrew the text ({} bytes)",
                stats.index_bytes, stats.text_bytes
            ));
        }
        Ok(())
    }

    /// Files, text and memory.
    pub(crate) fn stats(&self) -> IndexStats {
        let paths: usize = self.by_path.keys().map(|p| p.as_os_str().len() + 16).sum();
        let entries = self.files.capacity() * std::mem::size_of::<Option<Entry>>();
        let map = self.by_path.len() * 48;
        let overlay = self.overlay_trigrams * 4 + self.overlay.len() * 40;
        let watches: usize =
            self.watches.tree.keys().map(|p| p.as_os_str().len() + 80).sum::<usize>() + self.watched.len() * 64;
        IndexStats {
            state: String::new(),
            files: self.by_path.len(),
            text_bytes: self.text_bytes,
            postings_bytes: self.base.heap_bytes() as u64,
            index_bytes: (self.base.heap_bytes() + paths + entries + map + overlay + watches + self.always.len() * 16)
                as u64,
            watches: self.watches.kinds.len() + self.watched.len(),
        }
    }

    /// Brings the index up to date with every change made so far.
    pub(crate) fn catch_up(&mut self, ws: &Workspace) -> Result<(), GiveUp> {
        let mut changes = self.watches.drain()?;
        self.floods = if changes.flood { self.floods + 1 } else { 0 };
        if self.floods >= MAX_FLOODS {
            return Err("the tree changes faster than the index can follow".to_string());
        }
        if let Err(why) = self.watched.catch_up(ws, &mut changes.touched) {
            self.lost = true;
            return Err(why);
        }
        if changes.excludes {
            // The global excludes file may be another now: watch where it is.
            self.watches.watch_git_global()?;
        }
        if !changes.everything && changes.touched.is_empty() {
            return Ok(());
        }
        let roots = if changes.everything { vec![PathBuf::new()] } else { outermost(changes.touched.clone()) };
        let mut before: HashMap<Arc<Path>, u32> = HashMap::new();
        for root in &roots {
            for (path, id) in self.by_path.range::<Path, _>((Bound::Included(root.as_path()), Bound::Unbounded)) {
                if !path.starts_with(root) {
                    break;
                }
                before.insert(path.clone(), *id);
            }
        }
        let (found, dirs) = self.watches.walk(&roots)?;
        let mut unknown = Vec::new();
        for (path, meta) in found {
            match before.remove(path.as_path()) {
                Some(id) if !changes.touched.contains(&path) && self.unchanged(id, meta.as_ref()) => {}
                Some(id) => {
                    self.remove(id);
                    unknown.push((path, meta));
                }
                None => unknown.push((path, meta)),
            }
        }
        // A file met under a new name with the stamp of one no longer under its old name was
        // moved (its folder renamed, say): it keeps its id and trigrams.
        let mut moved: HashMap<(u64, u64), u32> = HashMap::new();
        for id in before.values() {
            if let Some(Some(Entry { stamp: Some(stamp), racy: false, .. })) = self.files.get(*id as usize) {
                moved.insert((stamp.dev, stamp.ino), *id);
            }
        }
        let (mut seen, mut buf) = (None, Vec::new());
        for (path, meta) in unknown {
            let inode = meta.as_ref().map(|m| (m.dev(), m.ino()));
            let from = inode.and_then(|inode| moved.get(&inode).copied());
            if let Some(id) = from.filter(|id| !changes.touched.contains(&path) && self.unchanged(*id, meta.as_ref())) {
                moved.retain(|_, other| *other != id);
                before.retain(|_, other| *other != id);
                self.rename(id, path);
                continue;
            }
            let indexed = read_file(ws, &path, seen.get_or_insert_with(Seen::new), &mut buf, &self.watched);
            self.add(indexed)?;
        }
        for id in before.into_values() {
            self.remove(id);
        }
        self.watched.prune();
        let stale: Vec<i32> = self
            .watches
            .tree
            .iter()
            .filter(|(dir, _)| roots.iter().any(|r| dir.starts_with(r)) && !dirs.contains(*dir))
            .map(|(_, wd)| *wd)
            .collect();
        for wd in stale {
            let _ = inotify::remove_watch(&self.watches.fd, wd);
            self.watches.forget(wd);
        }
        if self.overlay_trigrams * 4 > (self.base.heap_bytes() / 8).max(4 << 20) {
            self.compact()?;
        }
        self.check_bounds()
    }

    /// Whether file `id` is as it was read, by a stat that cannot hide a later change.
    fn unchanged(&self, id: u32, meta: Option<&Metadata>) -> bool {
        let Some(Some(entry)) = self.files.get(id as usize) else { return false };
        !entry.racy && meta.is_some_and(|m| entry.stamp == Some(Stamp::of(m)))
    }

    fn remove(&mut self, id: u32) {
        let Some(entry) = self.files.get_mut(id as usize).and_then(Option::take) else { return };
        if let Some(wd) = entry.watch {
            self.watched.forget(&entry.path, wd);
        }
        self.by_path.remove(&entry.path);
        self.text_bytes -= entry.text;
        self.always.remove(&id);
        if let Some(trigrams) = self.overlay.remove(&id) {
            self.overlay_trigrams -= trigrams.len();
        }
    }

    fn rename(&mut self, id: u32, path: PathBuf) {
        let Some(Some(entry)) = self.files.get_mut(id as usize) else { return };
        if self.by_path.get(&entry.path) == Some(&id) {
            self.by_path.remove(&entry.path);
        }
        let old = std::mem::replace(&mut entry.path, Arc::from(path));
        if let Some(wd) = entry.watch {
            self.watched.rename(&old, &entry.path, wd);
        }
        self.by_path.insert(entry.path.clone(), id);
    }

    fn add(&mut self, indexed: Indexed) -> Result<(), GiveUp> {
        let id = u32::try_from(self.files.len()).map_err(|_| "too many file versions")?;
        let Indexed { entry, trigrams, unwatched } = indexed;
        if let Some(why) = unwatched {
            return Err(why);
        }
        self.by_path.insert(entry.path.clone(), id);
        self.text_bytes += entry.text;
        if entry.always {
            self.always.insert(id);
        } else {
            self.overlay_trigrams += trigrams.len();
            self.overlay.insert(id, trigrams.into_boxed_slice());
        }
        self.files.push(Some(entry));
        Ok(())
    }

    /// Folds the overlay into the posting lists and drops the lists' dead ids.
    fn compact(&mut self) -> Result<(), GiveUp> {
        let mut added: Vec<(Trigram, u32)> =
            self.overlay.iter().flat_map(|(id, trigrams)| trigrams.iter().map(move |t| (*t, *id))).collect();
        added.sort_unstable();
        let (files, base_end) = (&self.files, self.base_end);
        let alive = |id: u32| id < base_end && files.get(id as usize).is_some_and(Option::is_some);
        self.base = self.base.rebuilt(alive, &added).ok_or("the index outgrew its offsets")?;
        self.base_end = u32::try_from(self.files.len()).map_err(|_| "too many file versions")?;
        self.overlay.clear();
        self.overlay_trigrams = 0;
        Ok(())
    }

    /// The files that may hold a match of `query` (in no order), relative to the root.
    pub(crate) fn candidates(&self, query: &Query) -> Vec<Arc<Path>> {
        let alive = |id: &u32| matches!(self.files.get(*id as usize), Some(Some(_)));
        let mut ids: Vec<u32> = match self.base_ids(query) {
            Some(ids) => ids.into_iter().filter(alive).collect(),
            None => (0..self.base_end).filter(alive).collect(),
        };
        ids.retain(|id| !self.overlay.contains_key(id) && !self.always.contains(id));
        ids.extend(
            self.overlay
                .iter()
                .filter(|(_, trigrams)| query.matches(&|t| trigrams.binary_search(&t).is_ok()))
                .map(|(id, _)| *id),
        );
        ids.extend(self.always.iter().copied());
        // Files some process has open may have been written through a shared map, which no event
        // tells: searched whatever their trigrams say.
        let open = self.watched.open_now();
        let open: Vec<u32> = open.iter().filter_map(|path| self.by_path.get(path).copied()).collect();
        let already: HashSet<u32> = ids.iter().copied().collect();
        let open: Vec<u32> = open.into_iter().filter(|id| !already.contains(id)).collect();
        ids.extend(open);
        ids.into_iter().filter_map(|id| self.files.get(id as usize)?.as_ref().map(|e| e.path.clone())).collect()
    }

    /// The base ids satisfying `query`, sorted; `None` for all of them.
    fn base_ids(&self, query: &Query) -> Option<Vec<u32>> {
        match query {
            Query::All => None,
            Query::Nothing => Some(Vec::new()),
            Query::Trigram(t) => Some(decode(self.base.list(*t)).collect()),
            Query::And(parts) => {
                let mut lists: Vec<Vec<u32>> = parts.iter().filter_map(|q| self.base_ids(q)).collect();
                lists.sort_by_key(Vec::len);
                let mut lists = lists.into_iter();
                let first = lists.next()?;
                Some(lists.fold(first, |acc, list| intersect(&acc, &list)))
            }
            Query::Or(parts) => {
                let mut out: Vec<u32> = Vec::new();
                for q in parts {
                    out.extend(self.base_ids(q)?);
                }
                out.sort_unstable();
                out.dedup();
                Some(out)
            }
        }
    }
}

fn intersect(a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(a.len().min(b.len()));
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}
