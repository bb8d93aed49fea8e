//! The inotify watches that keep a live index exact: every folder of the tree, the git folders and
//! the folders above the root whose ignore files the walker reads, the global git excludes; reading
//! their events into the changes a catch-up must look at; and the walks that find the tree again.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs::Metadata;
use std::ops::Bound;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;

use super::files::GiveUp;
use super::walker;

/// More events about the tree than this in one catch-up are handled as one walk of the whole
/// tree, reusing what the stamps say is unchanged.
const MAX_EVENTS: usize = 4096;
/// Files whose change changes which files the walker yields.
const IGNORE_FILES: &[&str] = &[".gitignore", ".ignore", ".rgignore", ".git"];

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
pub(super) struct Watches {
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
pub(super) struct Changes {
    pub(super) touched: BTreeSet<PathBuf>,
    pub(super) everything: bool,
    /// Events about the tree's own folders.
    pub(super) events: usize,
    /// More events than are worth following one by one, or more than inotify kept.
    pub(super) flood: bool,
    /// The global git config or excludes file changed: the walker may ignore other files now.
    pub(super) excludes: bool,
}

/// A tree walk's findings: files (with their lstat when it worked) and directories, relative.
type Found = (BTreeMap<PathBuf, Option<Metadata>>, BTreeSet<PathBuf>);

impl Watches {
    pub(super) fn new(root: &Path) -> Result<Watches, GiveUp> {
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
    pub(super) fn watch_git_global(&mut self) -> Result<(), GiveUp> {
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

    /// How many watches there are.
    pub(super) fn len(&self) -> usize {
        self.kinds.len()
    }

    /// About how much memory the watched folders' paths take.
    pub(super) fn heap_bytes(&self) -> usize {
        self.tree.keys().map(|p| p.as_os_str().len() + 80).sum()
    }

    /// Takes the watches off folders beneath `roots` that the walk that found `dirs` no longer met.
    pub(super) fn unwatch_missing(&mut self, roots: &[PathBuf], dirs: &BTreeSet<PathBuf>) {
        let stale: Vec<i32> = self
            .tree
            .iter()
            .filter(|(dir, _)| roots.iter().any(|r| dir.starts_with(r)) && !dirs.contains(*dir))
            .map(|(_, wd)| *wd)
            .collect();
        for wd in stale {
            let _ = inotify::remove_watch(&self.fd, wd);
            self.forget(wd);
        }
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
    pub(super) fn drain(&mut self) -> Result<Changes, GiveUp> {
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
    pub(super) fn walk(&mut self, roots: &[PathBuf]) -> Result<Found, GiveUp> {
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
pub(super) fn outermost(set: BTreeSet<PathBuf>) -> Vec<PathBuf> {
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
