//! Warm search: a trigram index of the workspace kept by a long-lived host, so that repeated
//! `index-grep` queries read only the files that can match. It owns choosing those candidate
//! files; index-grep still runs the real regex on them with the cold search's own code, so the
//! answer is the cold search's.
//!
//! # Brief overview
//!
//! - `plan`: a pattern becomes a boolean query over trigrams that any file holding a
//!   match satisfies (Russ Cox's analysis for Google Code Search). Patterns with no trigram to
//!   require (`\w+`, `a.b`) make every file a candidate.
//! - `postings`: for each trigram, the sorted ids of the files holding it, as
//!   varint deltas in one byte arena.
//! - `warm`: the index of one tree, built with the cold search's walker, and kept
//!   exact by inotify: before each answer the events queued so far are read and the paths they
//!   name are walked again (see there for the rules).
//!
//! # Life cycle
//!
//! The first `index-grep` in a host searches cold, then starts building the index on a background
//! thread at low priority; queries stay cold until it is ready. A one-shot `toolhost call`
//! answers before the build could matter and exits. Whenever the index cannot answer exactly
//! (inotify unavailable or out of watches, the root moved, more than 1 GiB of text, the index
//! larger than the text it indexes, any error), the host searches cold from then on: slower, never
//! wrong.
//!
//! # Memory
//!
//! [`SearchIndex::stats`] reports the files and bytes of text indexed and the index's own bytes
//! (posting lists, paths, stamps, watches): 0.14x the text for the cargo registry's sources, the
//! posting lists most of it (BENCHMARKS.md). Text past a file's first NUL (where the searcher
//! stops) is not indexed.
//!
//! # Limits
//!
//! Writes through a hard link outside the tree are seen (each file is watched by inode), writes
//! through a shared memory map are searched for (a file some process has open is searched
//! whatever the index says: see `files` for why that is exact), and the global git
//! config and excludes files are watched. Not seen: changes on network file systems made by other
//! machines, and ignore or config files in folders the process may not read. The index needs one
//! inotify watch per folder and per file and file leases; without them it stays cold.

mod files;
mod plan;
mod postings;
mod tree_watch;
mod warm;

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ignore::WalkBuilder;

use crate::workspace::Workspace;
use files::Watcher;
use warm::Warm;

/// The walker both the cold search and the index use: `.gitignore`-aware without needing a git
/// repository, no hidden files, symlinks not followed. The index is exact only as long as the two
/// agree, so there is one.
pub(crate) fn walker(root: &Path) -> WalkBuilder {
    let mut walk = WalkBuilder::new(root);
    walk.require_git(false).follow_links(false);
    walk
}

/// A workspace's search index, shared by every clone (a host's contexts, its handle's threads).
///
/// ```
/// let index = toolhost::search_index::SearchIndex::default();
/// assert!(!index.wait_ready(std::time::Duration::ZERO)); // nothing is built before a search asks
/// assert_eq!(index.stats().state, "idle");
/// ```
#[derive(Clone, Default)]
pub struct SearchIndex(Arc<Shared>);

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
enum State {
    /// No search yet.
    #[default]
    Idle,
    Building,
    Ready(Box<Warm>),
    /// Given up; searches stay cold.
    Cold(String),
    /// Turned off by [`SearchIndex::disable`].
    Off,
}

/// What the index holds and costs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexStats {
    /// `idle`, `building`, `ready`, `off`, or `cold: <why>`.
    pub state: String,
    /// Files indexed (those a cold search would read).
    pub files: usize,
    /// Bytes of their text indexed.
    pub text_bytes: u64,
    /// Bytes of the index in memory, posting lists included.
    pub index_bytes: u64,
    /// Bytes of the posting lists alone.
    pub postings_bytes: u64,
    /// inotify watches held.
    pub watches: usize,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the state: formatting must not wait for the lock a catch-up holds.
        f.write_str("SearchIndex")
    }
}

impl SearchIndex {
    fn lock(&self) -> MutexGuard<'_, State> {
        match self.0.state.lock() {
            Ok(state) => state,
            Err(poisoned) => {
                // A panic while the index was changing: it may be half-updated, so it is not used.
                let mut state = poisoned.into_inner();
                *state = State::Cold("a panic while updating the index".to_string());
                self.0.state.clear_poison();
                state
            }
        }
    }

    /// The files (relative to the root) that may hold a match of `pattern`, with the index brought
    /// up to date first; `None` when the search must go cold (no index yet, or it gave up).
    pub(crate) fn candidates(&self, ws: &Workspace, pattern: &str) -> Option<Vec<Arc<Path>>> {
        let query = plan::query(pattern);
        let mut state = self.lock();
        let State::Ready(warm) = &mut *state else { return None };
        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            warm.catch_up(ws)?;
            Ok(warm.candidates(&query))
        }));
        match answer {
            Ok(Ok(candidates)) => Some(candidates),
            // Events were lost: the next search is cold and builds the index again.
            Ok(Err(_)) if warm.lost => {
                *state = State::Idle;
                None
            }
            Ok(Err(why)) => {
                *state = State::Cold(why);
                None
            }
            Err(_) => {
                *state = State::Cold("a panic while updating the index".to_string());
                None
            }
        }
    }

    /// Starts building the index of `ws` in the background, unless it is built, being built, given
    /// up or off.
    pub(crate) fn start(&self, ws: &Workspace) {
        let mut state = self.lock();
        if !matches!(*state, State::Idle) {
            return;
        }
        let watcher = match Watcher::start() {
            Ok(watcher) => watcher,
            Err(why) => {
                *state = State::Cold(why);
                return;
            }
        };
        *state = State::Building;
        let shared = Arc::downgrade(&self.0);
        let ws = ws.clone();
        let spawned = std::thread::Builder::new().name("search-index".to_string()).spawn(move || {
            lower_priority();
            // Everyone who could ask has gone: stop reading the tree.
            let abandoned = || shared.strong_count() == 0;
            let built =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Warm::build(&ws, &watcher, &abandoned)));
            let Some(shared) = shared.upgrade() else { return };
            let index = SearchIndex(shared);
            let mut state = index.lock();
            if matches!(*state, State::Building) {
                *state = match built {
                    Ok(Ok(warm)) => State::Ready(Box::new(warm)),
                    Ok(Err(why)) => State::Cold(why),
                    Err(_) => State::Cold("a panic while building the index".to_string()),
                };
            }
            index.0.changed.notify_all();
        });
        if let Err(e) = spawned {
            *state = State::Cold(format!("cannot start the index thread: {e}"));
        }
    }

    /// Waits until the index is ready (`true`) or has given up, is off or was never started
    /// (`false`), at most `timeout`.
    pub fn wait_ready(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.lock();
        loop {
            match *state {
                State::Ready(_) => return true,
                State::Building => {}
                _ => return false,
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = match self.0.changed.wait_timeout(state, left) {
                Ok((state, _)) => state,
                Err(_) => return false,
            };
        }
    }

    /// Turns the index off for good: every search is cold (what tests compare against).
    pub fn disable(&self) {
        *self.lock() = State::Off;
        self.0.changed.notify_all();
    }

    /// What the index holds and costs now.
    pub fn stats(&self) -> IndexStats {
        let state = self.lock();
        let named = |name: &str| IndexStats { state: name.to_string(), ..IndexStats::default() };
        match &*state {
            State::Idle => named("idle"),
            State::Building => named("building"),
            State::Off => named("off"),
            State::Cold(why) => named(&format!("cold: {why}")),
            State::Ready(warm) => IndexStats { state: "ready".to_string(), ..warm.stats() },
        }
    }
}

/// Builds at a low priority, so that a search or anything else the host does comes first. The
/// walker's threads inherit it.
fn lower_priority() {
    // On Linux a process id given to setpriority may name one thread: this one.
    let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 10);
}
