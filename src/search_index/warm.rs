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
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rustix::fs::{Mode, OFlags};

use super::files::Watcher;
use super::plan::{trigrams_of, Query, Trigram};
use super::postings::{decode, Builder, Postings};
use super::tree_watch::{outermost, Watches};
use super::IndexStats;
use crate::workspace::Workspace;

/// Beyond this much text the tree is searched cold: the index would cost more than it saves.
pub(crate) const MAX_TEXT_BYTES: u64 = 1 << 30;
/// A file larger than this is not indexed but always searched.
const MAX_FILE_BYTES: u64 = 64 << 20;
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

/// What one thread of the index's build made of its share of the files: the index part and each
/// file's entry (with why the file was given up, if it was).
type Part = (Builder, Vec<(Entry, Option<GiveUp>)>);

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
        let parts: Vec<Option<Part>> = std::thread::scope(|scope| {
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
        let watches: usize = self.watches.heap_bytes() + self.watched.len() * 64;
        IndexStats {
            state: String::new(),
            files: self.by_path.len(),
            text_bytes: self.text_bytes,
            postings_bytes: self.base.heap_bytes() as u64,
            index_bytes: (self.base.heap_bytes() + paths + entries + map + overlay + watches + self.always.len() * 16)
                as u64,
            watches: self.watches.len() + self.watched.len(),
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
        self.watches.unwatch_missing(&roots, &dirs);
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
