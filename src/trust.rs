//! Workspace trust (design section 17): which of a workspace's files are its own config and tool code,
//! read once ([`ProjectFiles`]), a digest of them, the user's record of trusted workspaces, and the
//! rule that decides whether they load ([`TrustRule`]), which start-up and every reload apply alike.
//! It does not cover what a person names on the command line (`--config`, `--tools`), which is trusted
//! as named.
//!
//! # What trust covers
//!
//! Exactly what would load, enumerated by one function ([`ProjectFiles::read`]): `ROOT/toolhost.toml`,
//! then the Scheme files directly in `ROOT/.toolhost/tools/` and in each folder `toolhost.toml` names
//! in `tools` (tool files, which load, and `*_test.scm` files, which `toolhost test` runs; see
//! [`crate::source::folder_files`]). Files in subfolders, and files that are not `.scm`, never load,
//! so they are not covered. Symlinks are followed wherever they lead (the tool folder itself, or a
//! file in it): what is behind them is read, so its content is in the digest, and `toolhost trust`
//! says where such a file really is when that is outside the workspace. A change there makes the
//! workspace untrusted like any other.
//!
//! What is digested is what loads: the files are read once, with the reader of [`crate::source`]
//! (regular files only, capped, never blocking), the digest is made of those bytes, and a host
//! loads those same bytes ([`Admission::loads`]), so a file changed between the check and the load
//! is not loaded in its changed form. A file that cannot be read (a FIFO, a link to `/dev/zero`, one
//! too large) makes trust impossible to check: `toolhost trust` refuses, naming it, and the workspace's
//! own files do not load.
//!
//! # The store
//!
//! One TOML file, `trusted.toml` in the user's toolhost config folder, a table from the canonical
//! workspace path to its digest and the time it was trusted:
//!
//! ```toml
//! ["/home/me/src/project"]
//! digest = "9f86d081884c7d65..."
//! trusted_at = 1767225600
//! ```
//!
//! It is replaced atomically (a temporary file beside it, then a rename) with mode 0600, its folder
//! created when missing. A missing store trusts nothing; one that cannot be read or parsed is an error
//! for [`trust`] and [`untrust`] (they would otherwise overwrite it), while [`state`] reports the
//! workspace as not trusted and says why. Two `toolhost trust` runs at the same moment may lose one
//! record (the last rename wins); trusting again fixes it.
//!
//! Tests use [`TrustStore::at`] with a temporary folder; the free functions use [`TrustStore::user`],
//! which reads `XDG_CONFIG_HOME` and `HOME`.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::source::{self, ReadError};

/// The project's config file, in the workspace root.
pub const PROJECT_CONFIG: &str = "toolhost.toml";
/// The project's own tool folder, in the workspace root.
pub const PROJECT_TOOLS: &str = ".toolhost/tools";
/// The store's file name in the user's toolhost config folder.
pub const STORE_FILE: &str = "trusted.toml";
/// The most the store may hold: some hundred thousand workspaces.
const STORE_CAP: u64 = 16 << 20;

/// Whether a workspace's own files may load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustState {
    /// The workspace has no `toolhost.toml` and no `.toolhost/tools` files.
    NothingToTrust,
    /// Trusted, and its files are as they were when trusted.
    Trusted,
    /// Never trusted (or untrusted since). `problem` says why trust could not be checked, when that is
    /// the reason: an unreadable store, no config folder, an unreadable project file.
    NotTrusted {
        /// What went wrong while checking, in one line; `None` when the workspace is simply not in the store.
        problem: Option<String>,
    },
    /// Trusted once, but its files changed since.
    Changed,
}

impl TrustState {
    /// Whether the project's files may load: trusted, or there is nothing to load.
    pub fn allows_loading(&self) -> bool {
        matches!(self, TrustState::NothingToTrust | TrustState::Trusted)
    }
}

/// What [`trust`] recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustRecord {
    /// The workspace, canonical (the store's key).
    pub root: PathBuf,
    /// The digest of its files ([`digest`]).
    pub digest: String,
    /// The files the digest covers ([`project_files`]), as loaders name them.
    pub files: Vec<PathBuf>,
    /// When it was trusted, in seconds since the Unix epoch.
    pub trusted_at: u64,
    /// The root as it was given, which [`TrustRecord::files`] start with.
    given_root: PathBuf,
}

impl TrustRecord {
    /// The files, for a person: each relative to the workspace, and where it really is when that is
    /// outside the workspace (a link out of it): trusting it trusts whatever is there.
    pub fn shown_files(&self) -> Vec<String> {
        let root = absolute(&self.given_root);
        self.files
            .iter()
            .map(|file| {
                let shown = relative_to(&root, &absolute(file)).display().to_string();
                match fs::canonicalize(file) {
                    Ok(real) if !real.starts_with(&self.root) => {
                        format!("{shown} (outside the workspace: {})", real.display())
                    }
                    _ => shown,
                }
            })
            .collect()
    }
}

/// One workspace in the store.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredTrust {
    digest: String,
    trusted_at: u64,
}

/// A trust store file: the user's ([`TrustStore::user`]) or one in a given folder ([`TrustStore::at`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustStore {
    path: PathBuf,
}

impl TrustStore {
    /// The store `dir/trusted.toml`.
    pub fn at(dir: &Path) -> TrustStore {
        TrustStore { path: dir.join(STORE_FILE) }
    }

    /// The user's store, in the folder [`crate::config::user_config_dir`] finds.
    ///
    /// # Errors
    /// When neither `XDG_CONFIG_HOME` nor `HOME` gives a folder.
    pub fn user() -> Result<TrustStore> {
        crate::config::user_config_dir().map(|dir| TrustStore::at(&dir)).ok_or_else(|| {
            Error::config(
                "cannot find the user's config folder to keep workspace trust in: set HOME or XDG_CONFIG_HOME",
            )
        })
    }

    /// The store's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether `root`'s own files may load (see [`TrustState`]).
    pub fn state(&self, root: &Path) -> TrustState {
        state_in(Ok(self), root)
    }

    /// Records `root` as trusted with the digest of its files as they are now, replacing an earlier
    /// record. A workspace with no files to trust is recorded too, so files that appear later make it
    /// [`TrustState::Changed`].
    ///
    /// # Errors
    /// When the root does not exist, a project file or the store cannot be read, or the store cannot
    /// be written.
    pub fn trust(&self, root: &Path) -> Result<TrustRecord> {
        self.trust_files(&ProjectFiles::read(root))
    }

    /// Records the workspace of `files` as trusted with the digest of `files` as they were read
    /// (not as they are by now: what is trusted is what loads).
    ///
    /// # Errors
    /// As [`TrustStore::trust`].
    pub fn trust_files(&self, files: &ProjectFiles) -> Result<TrustRecord> {
        let key = workspace_key(&files.root, false)?;
        let digest = files.digest()?;
        let mut entries = self.load()?;
        let trusted_at = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        entries.insert(key.clone(), StoredTrust { digest: digest.clone(), trusted_at });
        self.save(&entries)?;
        Ok(TrustRecord {
            root: PathBuf::from(key),
            given_root: files.root.clone(),
            digest,
            files: files.paths(),
            trusted_at,
        })
    }

    /// Forgets `root`; `true` when it was in the store. A workspace folder that no longer exists can
    /// still be forgotten by the path it had.
    ///
    /// # Errors
    /// When the store cannot be read or written.
    pub fn untrust(&self, root: &Path) -> Result<bool> {
        let key = workspace_key(root, true)?;
        let mut entries = self.load()?;
        if entries.remove(&key).is_none() {
            return Ok(false);
        }
        self.save(&entries)?;
        Ok(true)
    }

    /// The store's records; empty when the file does not exist.
    fn load(&self) -> Result<BTreeMap<String, StoredTrust>> {
        let shown = self.path.display().to_string();
        let text = match source::read_text(&self.path, STORE_CAP) {
            Ok(text) => text,
            Err(ReadError::NotFound) => return Ok(BTreeMap::new()),
            Err(e) => {
                return Err(Error::config(format!("cannot read the workspace trust store: it {e}")).at(shown, None))
            }
        };
        toml::from_str(&text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text.as_bytes()[..s.start.min(text.len())].iter().filter(|&&b| b == b'\n').count() + 1);
            let what = e.message().trim().replace('\n', "; ");
            Error::config(format!("the workspace trust store is damaged ({what}); fix or delete it, then trust again"))
                .at(shown, line)
        })
    }

    /// Replaces the store file atomically, readable by its owner only.
    fn save(&self, entries: &BTreeMap<String, StoredTrust>) -> Result<()> {
        let shown = self.path.display().to_string();
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            Error::config(format!("cannot write the workspace trust store ({what}): {e}")).at(shown.clone(), None)
        };
        let body = toml::to_string(entries).map_err(|e| fail("encoding", &e))?;
        let text = format!("# Workspaces trusted with `toolhost trust`: path -> digest of its toolhost files.\n{body}");

        let dir = self.path.parent().unwrap_or(Path::new("."));
        create_private_dir(dir).map_err(|e| fail("creating its folder", &e))?;
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let temp = dir.join(format!(".{STORE_FILE}.{}.{nanos}.tmp", std::process::id()));
        let written = write_private(&temp, text.as_bytes()).and_then(|()| fs::rename(&temp, &self.path));
        if let Err(e) = written {
            let _ = fs::remove_file(&temp);
            return Err(fail("replacing it", &e));
        }
        Ok(())
    }
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir)
}

/// Writes a new file (never an existing one) with mode 0600 and syncs it, so the rename that follows
/// publishes complete contents.
fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// The store's key for `root`: its canonical path. With `allow_missing`, a folder that no longer
/// exists is keyed by its absolute path, as it was when trusted.
fn workspace_key(root: &Path, allow_missing: bool) -> Result<String> {
    let shown = root.display().to_string();
    let canonical = match fs::canonicalize(root) {
        Ok(path) => path,
        Err(e) if allow_missing && e.kind() == io::ErrorKind::NotFound => std::path::absolute(root)
            .map_err(|e| Error::config(format!("cannot resolve the workspace folder: {e}")).at(shown.clone(), None))?,
        Err(e) => return Err(Error::config(format!("cannot open the workspace folder: {e}")).at(shown, None)),
    };
    // The store is TOML, whose keys are UTF-8; a lossy key could let two folders share one record.
    canonical.into_os_string().into_string().map_err(|_| {
        Error::config("the workspace path is not UTF-8, and only UTF-8 paths can be trusted").at(shown, None)
    })
}

/// Whether `root`'s own files may load, according to the user's store (see [`TrustState`]).
pub fn state(root: &Path) -> TrustState {
    state_in(TrustStore::user().as_ref(), root)
}

/// Trusts `root` in the user's store (see [`TrustStore::trust`]).
///
/// # Errors
/// See [`TrustStore::trust`]; also when there is no user config folder.
pub fn trust(root: &Path) -> Result<TrustRecord> {
    TrustStore::user()?.trust(root)
}

/// Forgets `root` in the user's store (see [`TrustStore::untrust`]).
///
/// # Errors
/// See [`TrustStore::untrust`]; also when there is no user config folder.
pub fn untrust(root: &Path) -> Result<bool> {
    TrustStore::user()?.untrust(root)
}

fn state_in(store: std::result::Result<&TrustStore, &Error>, root: &Path) -> TrustState {
    state_of(store, root, &ProjectFiles::read(root))
}

fn state_of(store: std::result::Result<&TrustStore, &Error>, root: &Path, files: &ProjectFiles) -> TrustState {
    let problem = |e: &Error| TrustState::NotTrusted { problem: Some(e.to_string().replace('\n', "; ")) };
    if files.is_empty() {
        return TrustState::NothingToTrust;
    }
    // First: a file that cannot be read is worth saying whether or not the workspace was trusted.
    let digest = match files.digest() {
        Ok(digest) => digest,
        Err(e) => return problem(&e),
    };
    let store = match store {
        Ok(store) => store,
        Err(e) => return problem(e),
    };
    let key = match workspace_key(root, false) {
        Ok(key) => key,
        Err(e) => return problem(&e),
    };
    match store.load() {
        Ok(mut entries) => match entries.remove(&key) {
            None => TrustState::NotTrusted { problem: None },
            Some(trusted) if trusted.digest == digest => TrustState::Trusted,
            Some(_) => TrustState::Changed,
        },
        Err(e) => problem(&e),
    }
}

/// The files trust covers in the workspace `root` (see the module docs), in load order: its
/// `toolhost.toml`, then each tool folder's tool files and test files. Empty when it has none.
pub fn project_files(root: &Path) -> Vec<PathBuf> {
    ProjectFiles::read(root).paths()
}

/// One file of the workspace's own, read once: the bytes the digest covers are the bytes that load.
#[derive(Debug, Clone)]
pub struct ProjectFile {
    /// The file, named as loaders name it: the root as given joined with its place, or the folder
    /// `toolhost.toml` names joined with its name.
    pub path: PathBuf,
    content: std::result::Result<Arc<[u8]>, Arc<ReadError>>,
}

impl ProjectFile {
    /// Reads `path`, at most `cap` bytes and at most what is `left` of the project's total, which
    /// it then takes its bytes from.
    fn read(path: PathBuf, cap: u64, left: &mut u64) -> Option<ProjectFile> {
        let content = match source::read_bytes(&path, cap.min(*left)) {
            Ok(bytes) => {
                *left = left.saturating_sub(bytes.len() as u64);
                Ok(Arc::from(bytes))
            }
            // Gone since it was listed: it is not there to load.
            Err(ReadError::NotFound) => return None,
            // Within its own cap, past the total's.
            Err(ReadError::TooLarge { .. }) if *left < cap && fs::metadata(&path).is_ok_and(|m| m.len() <= cap) => {
                Err(Arc::new(ReadError::PastTotal { total: source::PROJECT_CAP }))
            }
            Err(e) => Err(Arc::new(e)),
        };
        Some(ProjectFile { path, content })
    }

    /// Its bytes as they were read.
    ///
    /// # Errors
    /// When it could not be read (not a regular file, too large, ...): a `config_error` naming it.
    pub fn bytes(&self) -> Result<&[u8]> {
        match &self.content {
            Ok(bytes) => Ok(bytes),
            Err(e) => Err(Error::config(e.to_string()).at(self.path.display().to_string(), None)),
        }
    }

    /// Its text as it was read.
    ///
    /// # Errors
    /// As [`ProjectFile::bytes`], and when it is not UTF-8 text.
    pub fn text(&self) -> Result<&str> {
        std::str::from_utf8(self.bytes()?)
            .map_err(|_| Error::config(ReadError::NotUtf8.to_string()).at(self.path.display().to_string(), None))
    }
}

/// A tool folder of the workspace's own and its Scheme files, read once.
#[derive(Debug, Clone)]
pub struct ProjectFolder {
    /// The folder, named as loaders name it.
    pub dir: PathBuf,
    /// Whether the project's `toolhost.toml` names it (else it is [`PROJECT_TOOLS`]).
    pub named: bool,
    /// Its tool files, in load order.
    pub tools: Vec<ProjectFile>,
    /// Its test files, which `toolhost test` runs.
    pub tests: Vec<ProjectFile>,
}

/// Everything of the workspace's own that toolhost would load (see the module docs), read once: what
/// the trust digest covers, and, once admitted, what a host loads, byte for byte.
#[derive(Debug, Clone)]
pub struct ProjectFiles {
    root: PathBuf,
    /// `toolhost.toml`, when something is there.
    pub config: Option<ProjectFile>,
    /// The tool folders, [`PROJECT_TOOLS`] first, then those `toolhost.toml` names, each once; only
    /// those that exist.
    pub folders: Vec<ProjectFolder>,
}

impl ProjectFiles {
    /// Reads the workspace's own files as they are now. A file that cannot be read is kept with its
    /// reason: the digest then cannot be made, and loading it says why.
    pub fn read(root: &Path) -> ProjectFiles {
        let mut left = source::PROJECT_CAP;
        let config = ProjectFile::read(root.join(PROJECT_CONFIG), source::CONFIG_CAP, &mut left);
        let mut dirs = vec![(root.join(PROJECT_TOOLS), false)];
        // Named by the project's config, so followed wherever it leads: it is what loads. A config
        // that does not parse is covered alone (it will not load either).
        let text = config.as_ref().and_then(|c| c.text().ok());
        if let Some(layer) = text.and_then(|text| crate::config::parse(text, &root.join(PROJECT_CONFIG)).ok()) {
            dirs.extend(layer.tools.into_iter().map(|dir| (dir, true)));
        }
        let mut seen = HashSet::new();
        let mut folders = Vec::new();
        for (dir, named) in dirs {
            // Each real folder once: one named twice, or the project's own folder named again.
            let Ok(real) = fs::canonicalize(&dir) else { continue };
            if !real.is_dir() || !seen.insert(real) {
                continue;
            }
            let files = source::folder_files(&dir);
            let mut read = |paths: Vec<PathBuf>| -> Vec<ProjectFile> {
                paths.into_iter().filter_map(|p| ProjectFile::read(p, source::SCHEME_CAP, &mut left)).collect()
            };
            let tools = read(files.tools);
            let tests = read(files.tests);
            folders.push(ProjectFolder { dir, named, tools, tests });
        }
        ProjectFiles { root: root.to_path_buf(), config, folders }
    }

    /// No config and no Scheme file: nothing to trust.
    pub fn is_empty(&self) -> bool {
        self.config.is_none() && self.folders.iter().all(|f| f.tools.is_empty() && f.tests.is_empty())
    }

    /// Every file, in load order: the config, then each folder's tool files and test files.
    pub fn files(&self) -> impl Iterator<Item = &ProjectFile> {
        self.config.iter().chain(self.folders.iter().flat_map(|f| f.tools.iter().chain(&f.tests)))
    }

    /// The paths of [`ProjectFiles::files`].
    pub fn paths(&self) -> Vec<PathBuf> {
        self.files().map(|f| f.path.clone()).collect()
    }

    /// What loads when `--config` replaced the project's `toolhost.toml`: its own folder alone (the
    /// folders that file names are its to load, and it does not load).
    pub fn own_folder(&self) -> ProjectFiles {
        let folders = self.folders.iter().filter(|f| !f.named).cloned().collect();
        ProjectFiles { root: self.root.clone(), config: None, folders }
    }

    /// The sha256 (lowercase hex) of the files: their count, then for each its path relative to the
    /// root and its content, each prefixed with its length, so no two different sets of files
    /// (bytes moved from one file to the next, a file renamed) give the same stream.
    ///
    /// # Errors
    /// When a file could not be read.
    pub fn digest(&self) -> Result<String> {
        let mut hash = Sha256::new();
        hash.update(b"toolhost-trust-v2\n");
        hash.update((self.files().count() as u64).to_be_bytes());
        let root = absolute(&self.root);
        for file in self.files() {
            let content = file.bytes().map_err(|e| {
                Error::config(format!("cannot read it to check workspace trust: {}", e.message()))
                    .at(file.path.display().to_string(), None)
            })?;
            let name = path_bytes(&relative_to(&root, &absolute(&file.path)));
            hash.update((name.len() as u64).to_be_bytes());
            hash.update(&name);
            hash.update((content.len() as u64).to_be_bytes());
            hash.update(content);
        }
        Ok(hash.finalize().iter().map(|b| format!("{b:02x}")).collect())
    }
}

/// `path` absolute, `.` components left out, so one file named from `.` or from its full path
/// compares equal.
fn absolute(path: &Path) -> PathBuf {
    let full = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    full.components().filter(|c| !matches!(c, std::path::Component::CurDir)).collect()
}

/// `file` relative to `root` when it is under it, else as it is (a tool folder named outside the root).
fn relative_to(root: &Path, file: &Path) -> PathBuf {
    file.strip_prefix(root).map_or_else(|_| file.to_path_buf(), Path::to_path_buf)
}

/// The sha256 (lowercase hex) of the workspace's own files as they are now (see
/// [`ProjectFiles::digest`]).
///
/// # Errors
/// When a covered file cannot be read.
pub fn digest(root: &Path) -> Result<String> {
    ProjectFiles::read(root).digest()
}

/// A path's bytes as the system holds them, so two names that differ only in non-UTF-8 bytes differ.
#[cfg(unix)]
fn path_bytes(path: &Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    path.as_os_str().as_bytes().to_vec()
}

#[cfg(not(unix))]
fn path_bytes(path: &Path) -> Vec<u8> {
    path.to_string_lossy().replace('\\', "/").into_bytes()
}

/// Who may trust a workspace on the spot, shown what was skipped (the REPL asks the person at the
/// terminal); a yes trusts the files as they were read.
pub type Ask = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// The trust rule (design section 17) as a host applies it: at start-up and again at every reload,
/// so the REPL, `toolhost call` and a long-lived host cannot disagree about what loads.
///
/// ```
/// use toolhost::trust::{TrustRule, TrustStore, TrustState};
///
/// let root = tempfile::tempdir().unwrap();
/// let store_dir = tempfile::tempdir().unwrap();
/// std::fs::create_dir_all(root.path().join(".toolhost/tools")).unwrap();
/// std::fs::write(root.path().join(".toolhost/tools/hi.scm"), "(define-tool (hi) \"Hi.\" \"hi\")").unwrap();
/// let rule = TrustRule::in_store(TrustStore::at(store_dir.path()));
/// let admission = rule.admit(root.path()).unwrap();
/// assert_eq!(admission.state, TrustState::NotTrusted { problem: None });
/// assert!(admission.loads().is_none());
/// TrustStore::at(store_dir.path()).trust(root.path()).unwrap();
/// assert_eq!(rule.admit(root.path()).unwrap().loads().map(|files| files.paths().len()), Some(1));
/// ```
#[derive(Clone, Default)]
pub struct TrustRule {
    /// `None`: the user's store, found when the rule is applied.
    store: Option<TrustStore>,
    ask: Option<Ask>,
    config_replaced: bool,
}

impl std::fmt::Debug for TrustRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrustRule")
            .field("store", &self.store)
            .field("asks", &self.ask.is_some())
            .field("config_replaced", &self.config_replaced)
            .finish()
    }
}

impl TrustRule {
    /// The rule with the user's store ([`TrustStore::user`]).
    pub fn user() -> TrustRule {
        TrustRule::default()
    }

    /// The rule with the store `store`.
    pub fn in_store(store: TrustStore) -> TrustRule {
        TrustRule { store: Some(store), ..TrustRule::default() }
    }

    /// Asks `ask` (when given) before skipping files that are not trusted; a yes trusts them.
    pub fn ask(mut self, ask: Option<Ask>) -> Self {
        self.ask = ask;
        self
    }

    /// A config named with `--config` replaced the project's `toolhost.toml`: then only the
    /// project's own tool folder is the workspace's to load (or to skip).
    pub fn config_replaced(mut self, replaced: bool) -> Self {
        self.config_replaced = replaced;
        self
    }

    /// Reads the workspace's own files and decides whether they load: they do when the workspace
    /// is trusted as they are (or has none), or when the rule may ask and the answer is yes.
    ///
    /// # Errors
    /// Only when a yes could not be recorded.
    pub fn admit(&self, root: &Path) -> Result<Admission> {
        let all = ProjectFiles::read(root);
        let store = match &self.store {
            Some(store) => Ok(store.clone()),
            None => TrustStore::user(),
        };
        let state = state_of(store.as_ref(), root, &all);
        let files = if self.config_replaced { all.own_folder() } else { all.clone() };
        let skipped = match &state {
            TrustState::NothingToTrust | TrustState::Trusted => false,
            TrustState::NotTrusted { .. } | TrustState::Changed => !files.is_empty(),
        };
        if !skipped {
            return Ok(Admission { state, files, admitted: true, notice: None });
        }
        let message = skipped_message(root, &state, &files.paths());
        if let Some(ask) = &self.ask {
            if ask(&message) {
                store?.trust_files(&all)?;
                return Ok(Admission { state, files, admitted: true, notice: None });
            }
        }
        Ok(Admission { state, files, admitted: false, notice: Some(message) })
    }
}

/// What [`TrustRule::admit`] decided for a workspace's own files.
#[derive(Debug, Clone)]
pub struct Admission {
    /// The workspace's trust as it was found (before any yes).
    pub state: TrustState,
    /// The files the decision is about (with `--config`, the project's own tool folder alone).
    pub files: ProjectFiles,
    /// Whether they load.
    pub admitted: bool,
    /// The one line to show when they were skipped ([`skipped_message`]).
    pub notice: Option<String>,
}

impl Admission {
    /// The files to load, when admitted.
    pub fn loads(&self) -> Option<&ProjectFiles> {
        self.admitted.then_some(&self.files)
    }

    /// The tool folders that were skipped, relative to the workspace when inside it; empty when
    /// admitted. `toolhost check` and `toolhost test` name them and fail rather than pass having
    /// looked at nothing.
    pub fn skipped_folders(&self) -> Vec<PathBuf> {
        if self.admitted {
            return Vec::new();
        }
        let root = absolute(&self.files.root);
        let folders = self.files.folders.iter().filter(|f| !f.tools.is_empty() || !f.tests.is_empty());
        folders.map(|f| relative_to(&root, &absolute(&f.dir))).collect()
    }

    /// Why they were skipped, in a few words: "the workspace is not trusted", ...
    pub fn skipped_because(&self) -> String {
        match &self.state {
            TrustState::Changed => "its files changed since the workspace was trusted".to_string(),
            TrustState::NotTrusted { problem: Some(problem) } => format!("trust could not be checked: {problem}"),
            _ => "the workspace is not trusted".to_string(),
        }
    }
}

/// The one line shown on standard error when the project's files are skipped (`state` is
/// [`TrustState::NotTrusted`] or [`TrustState::Changed`]): what was skipped, counted from `files`
/// ([`project_files`]), and the command that trusts the workspace. For the other states it says that
/// nothing was skipped.
///
/// ```
/// use std::path::{Path, PathBuf};
/// use toolhost::trust::{skipped_message, TrustState};
///
/// let root = Path::new("/nonexistent/w");
/// let files: Vec<PathBuf> = ["toolhost.toml", ".toolhost/tools/a.scm", ".toolhost/tools/b.scm"]
///     .iter()
///     .map(|f| root.join(f))
///     .collect();
/// assert_eq!(
///     skipped_message(root, &TrustState::NotTrusted { problem: None }, &files),
///     "toolhost: this workspace is not trusted, so its toolhost.toml and 2 tool files in .toolhost/tools \
///      were not loaded; run `toolhost trust --root /nonexistent/w` to load them"
/// );
/// ```
pub fn skipped_message(root: &Path, state: &TrustState, files: &[PathBuf]) -> String {
    let problem = match state {
        TrustState::NothingToTrust => {
            return "toolhost: this workspace has no toolhost.toml or .toolhost/tools files, so nothing was skipped"
                .to_string();
        }
        TrustState::Trusted => return "toolhost: this workspace is trusted, so nothing was skipped".to_string(),
        TrustState::NotTrusted { problem } => problem.as_deref(),
        TrustState::Changed => None,
    };

    let mut config = false;
    // Tool files and test files, of the project's own folder and of the folders its config names.
    let (mut own, mut named) = ((0, 0), (0, 0));
    for file in files {
        let relative = relative_to(root, file);
        let counts = if relative == Path::new(PROJECT_CONFIG) {
            config = true;
            continue;
        } else if relative.starts_with(PROJECT_TOOLS) {
            &mut own
        } else {
            &mut named
        };
        if source::is_test_file(file) {
            counts.1 += 1;
        } else {
            counts.0 += 1;
        }
    }
    let count = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    let files_of = |(tools, tests): (usize, usize)| match (tools, tests) {
        (0, 0) => None,
        (tools, 0) => Some(count(tools, "tool file")),
        (0, tests) => Some(count(tests, "test file")),
        (tools, tests) => Some(format!("{} and {}", count(tools, "tool file"), count(tests, "test file"))),
    };
    let mut parts = Vec::new();
    if config {
        parts.push("its toolhost.toml".to_string());
    }
    if let Some(some) = files_of(own) {
        parts.push(format!("{some} in {PROJECT_TOOLS}"));
    }
    if let Some(some) = files_of(named) {
        parts.push(format!("{some} in the tool folders toolhost.toml names"));
    }
    let what = match parts.len() {
        0 => "its toolhost files".to_string(),
        1 => parts.remove(0),
        2 => parts.join(" and "),
        _ => {
            // A part may hold an "and" of its own ("1 tool file and 1 test file"): the comma keeps
            // the parts apart.
            let last = parts.pop().unwrap_or_default();
            format!("{}, and {last}", parts.join(", "))
        }
    };
    let several = usize::from(config) + own.0 + own.1 + named.0 + named.1 != 1;
    let (were, them) = if several { ("were", "them") } else { ("was", "it") };

    let shown_root = fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let command = format!("toolhost trust --root {}", shell_word(&shown_root.to_string_lossy()));
    let mut line = match state {
        TrustState::Changed => format!(
            "toolhost: this workspace's toolhost files changed since it was trusted, so {what} {were} not loaded; \
             check {them}, then run `{command}` to load {them}"
        ),
        _ => format!(
            "toolhost: this workspace is not trusted, so {what} {were} not loaded; run `{command}` to load {them}"
        ),
    };
    if let Some(problem) = problem {
        line.push_str(&format!(" (trust could not be checked: {})", problem.replace('\n', "; ")));
    }
    line
}

/// `s` as one shell word: as it is when it has no characters the shell treats specially, else in
/// single quotes.
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A workspace and a store folder, both temporary.
    struct Fixture {
        root: tempfile::TempDir,
        config: tempfile::TempDir,
    }

    impl Fixture {
        fn new() -> Fixture {
            Fixture { root: tempfile::tempdir().unwrap(), config: tempfile::tempdir().unwrap() }
        }

        fn root(&self) -> &Path {
            self.root.path()
        }

        fn store(&self) -> TrustStore {
            TrustStore::at(&self.config.path().join("toolhost"))
        }

        fn write(&self, relative: &str, text: &str) {
            let path = self.root().join(relative);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }

        fn state(&self) -> TrustState {
            self.store().state(self.root())
        }
    }

    const NOT_TRUSTED: TrustState = TrustState::NotTrusted { problem: None };

    #[test]
    fn a_workspace_without_project_files_has_nothing_to_trust() {
        let f = Fixture::new();
        f.write("src/main.rs", "fn main() {}");
        fs::create_dir_all(f.root().join(".toolhost/tools")).unwrap();
        assert_eq!(project_files(f.root()), Vec::<PathBuf>::new());
        assert_eq!(f.state(), TrustState::NothingToTrust);
        assert!(f.state().allows_loading());
    }

    #[test]
    fn trusting_records_the_digest_and_untrusting_forgets_it() {
        let f = Fixture::new();
        f.write("toolhost.toml", "[limits]\nread_lines = 5\n");
        f.write(".toolhost/tools/b.scm", "(b)");
        f.write(".toolhost/tools/a_test.scm", "(a)");
        // Nothing loads from a subfolder or a file that is not Scheme: they are not covered.
        f.write(".toolhost/tools/sub/a.scm", "(a)");
        f.write(".toolhost/tools/README.md", "notes");
        assert_eq!(f.state(), NOT_TRUSTED);
        assert!(!f.state().allows_loading());

        let record = f.store().trust(f.root()).unwrap();
        assert_eq!(record.root, fs::canonicalize(f.root()).unwrap());
        assert_eq!(record.digest, digest(f.root()).unwrap());
        assert_eq!(record.digest.len(), 64);
        let relative: Vec<PathBuf> = record.files.iter().map(|p| relative_to(f.root(), p)).collect();
        assert_eq!(
            relative,
            ["toolhost.toml", ".toolhost/tools/b.scm", ".toolhost/tools/a_test.scm"].map(PathBuf::from).to_vec()
        );
        assert_eq!(f.state(), TrustState::Trusted);
        assert!(f.state().allows_loading());

        assert!(f.store().untrust(f.root()).unwrap());
        assert_eq!(f.state(), NOT_TRUSTED);
        assert!(!f.store().untrust(f.root()).unwrap());
    }

    #[test]
    fn a_changed_tool_file_makes_it_changed_until_trusted_again() {
        let f = Fixture::new();
        f.write(".toolhost/tools/a.scm", "(define x 1)");
        f.store().trust(f.root()).unwrap();
        f.write(".toolhost/tools/a.scm", "(define x 2)");
        assert_eq!(f.state(), TrustState::Changed);
        assert!(!f.state().allows_loading());
        f.store().trust(f.root()).unwrap();
        assert_eq!(f.state(), TrustState::Trusted);
    }

    #[test]
    fn a_new_tool_file_makes_it_changed() {
        let f = Fixture::new();
        f.write("toolhost.toml", "");
        f.store().trust(f.root()).unwrap();
        f.write(".toolhost/tools/new.scm", "(new)");
        assert_eq!(f.state(), TrustState::Changed);
    }

    #[test]
    fn a_changed_config_file_makes_it_changed() {
        let f = Fixture::new();
        f.write("toolhost.toml", "[scripts]\ntrusted = false\n");
        f.store().trust(f.root()).unwrap();
        f.write("toolhost.toml", "[scripts]\ntrusted = true\n");
        assert_eq!(f.state(), TrustState::Changed);
    }

    #[test]
    fn folders_the_project_config_names_are_covered() {
        let f = Fixture::new();
        f.write("toolhost.toml", "tools = [\"mytools\", \"./mytools\", \"missing\"]\n");
        f.write("mytools/x.scm", "(x)");
        f.write("other/y.scm", "(y)");
        let relative: Vec<PathBuf> = project_files(f.root()).iter().map(|p| relative_to(f.root(), p)).collect();
        assert_eq!(relative, ["toolhost.toml", "mytools/x.scm"].map(PathBuf::from).to_vec());
        f.store().trust(f.root()).unwrap();
        f.write("mytools/x.scm", "(x 2)");
        assert_eq!(f.state(), TrustState::Changed);
    }

    #[test]
    fn a_config_that_does_not_parse_is_covered_alone() {
        let f = Fixture::new();
        f.write("toolhost.toml", "tools = [\"mytools\"\n");
        f.write("mytools/x.scm", "(x)");
        let relative: Vec<PathBuf> = project_files(f.root()).iter().map(|p| relative_to(f.root(), p)).collect();
        assert_eq!(relative, vec![PathBuf::from("toolhost.toml")]);
    }

    #[test]
    fn moving_bytes_between_files_changes_the_digest() {
        let f = Fixture::new();
        f.write(".toolhost/tools/a.scm", "ab");
        f.write(".toolhost/tools/b.scm", "c");
        let before = digest(f.root()).unwrap();
        f.write(".toolhost/tools/a.scm", "a");
        f.write(".toolhost/tools/b.scm", "bc");
        assert_ne!(digest(f.root()).unwrap(), before);
        // And the same files give the same digest.
        assert_eq!(digest(f.root()).unwrap(), digest(f.root()).unwrap());
    }

    #[cfg(unix)]
    #[test]
    fn symlinked_files_count_with_their_content_and_subfolders_do_not_count() {
        use std::os::unix::fs::symlink;
        let f = Fixture::new();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("target.scm"), "(one)").unwrap();
        fs::create_dir_all(outside.path().join("lib")).unwrap();
        fs::write(outside.path().join("lib/big.scm"), "(big)").unwrap();
        f.write(".toolhost/tools/own.scm", "(own)");
        f.write("shared/inside.scm", "(inside)");
        let tools = f.root().join(".toolhost/tools");
        symlink(outside.path().join("target.scm"), tools.join("linked.scm")).unwrap();
        // Folders within a tool folder do not load, wherever they lead.
        symlink(outside.path().join("lib"), tools.join("outside-lib")).unwrap();
        symlink(f.root().join("shared"), tools.join("inside-lib")).unwrap();
        // A dangling link (an editor's lock file) has no content to load or hash.
        symlink(f.root().join("nowhere"), tools.join(".#own.scm")).unwrap();
        symlink(&tools, tools.join("loop")).unwrap();

        let relative: Vec<PathBuf> = project_files(f.root()).iter().map(|p| relative_to(f.root(), p)).collect();
        assert_eq!(relative, [".toolhost/tools/linked.scm", ".toolhost/tools/own.scm"].map(PathBuf::from).to_vec());
        f.store().trust(f.root()).unwrap();
        fs::write(outside.path().join("lib/big.scm"), "(bigger)").unwrap();
        f.write(".toolhost/tools/README.md", "what does not load does not count");
        assert_eq!(f.state(), TrustState::Trusted);
        fs::write(outside.path().join("target.scm"), "(two)").unwrap();
        assert_eq!(f.state(), TrustState::Changed);
    }

    #[cfg(unix)]
    #[test]
    fn a_tools_folder_that_is_a_link_out_of_the_root_is_covered_with_its_content() {
        use std::os::unix::fs::symlink;
        let f = Fixture::new();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("x.scm"), "(x)").unwrap();
        fs::create_dir_all(f.root().join(".toolhost")).unwrap();
        symlink(outside.path(), f.root().join(".toolhost/tools")).unwrap();
        let relative: Vec<PathBuf> = project_files(f.root()).iter().map(|p| relative_to(f.root(), p)).collect();
        assert_eq!(relative, vec![PathBuf::from(".toolhost/tools/x.scm")]);
        assert_eq!(f.state(), NOT_TRUSTED);
        let record = f.store().trust(f.root()).unwrap();
        let real = fs::canonicalize(outside.path().join("x.scm")).unwrap();
        assert_eq!(
            record.shown_files(),
            [format!(".toolhost/tools/x.scm (outside the workspace: {})", real.display())]
        );
        assert_eq!(f.state(), TrustState::Trusted);
        fs::write(outside.path().join("x.scm"), "(changed)").unwrap();
        assert_eq!(f.state(), TrustState::Changed);
    }

    #[test]
    fn the_digest_is_the_same_however_the_root_is_named() {
        let f = Fixture::new();
        f.write("toolhost.toml", "tools = [\"mytools\"]\n");
        f.write("mytools/x.scm", "(x)");
        f.write(".toolhost/tools/y.scm", "(y)");
        let dotted = f.root().join(".");
        assert_eq!(digest(&dotted).unwrap(), digest(f.root()).unwrap());
    }

    #[test]
    fn a_file_that_cannot_be_read_is_a_problem_trust_reports() {
        let f = Fixture::new();
        fs::create_dir_all(f.root().join("toolhost.toml")).unwrap();
        let err = f.store().trust(f.root()).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("toolhost.toml: cannot read it to check workspace trust: is a folder, not a regular file"),
            "{err}"
        );
        match f.state() {
            TrustState::NotTrusted { problem: Some(problem) } => {
                assert!(problem.contains("not a regular file"), "{problem}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_rule_admits_trusted_files_and_with_config_replaced_only_the_own_folder() {
        let f = Fixture::new();
        f.write("toolhost.toml", "tools = [\"mytools\"]\n");
        f.write("mytools/x.scm", "(x)");
        let rule = TrustRule::in_store(f.store());
        let admission = rule.admit(f.root()).unwrap();
        assert!(!admission.admitted);
        assert_eq!(admission.skipped_folders(), [PathBuf::from("mytools")]);
        assert!(admission.notice.as_deref().is_some_and(|n| n.contains("its toolhost.toml and 1 tool file")));
        // --config: the project's config and the folders it names are not the project's to load.
        let replaced = rule.clone().config_replaced(true).admit(f.root()).unwrap();
        assert!(replaced.admitted && replaced.notice.is_none() && replaced.loads().is_some_and(ProjectFiles::is_empty));
        // A yes trusts the files as they were read.
        let yes: Ask = Arc::new(|_| true);
        let asked = rule.clone().ask(Some(yes)).admit(f.root()).unwrap();
        assert!(asked.admitted && asked.notice.is_none());
        assert_eq!(f.state(), TrustState::Trusted);
        let admission = rule.admit(f.root()).unwrap();
        assert_eq!(admission.loads().map(ProjectFiles::paths).map(|p| p.len()), Some(2));
    }

    #[cfg(unix)]
    #[test]
    fn the_store_is_private_toml_and_replaced_whole() {
        use std::os::unix::fs::PermissionsExt;
        let f = Fixture::new();
        f.write("toolhost.toml", "");
        let store = f.store();
        let record = store.trust(f.root()).unwrap();
        let mode = fs::metadata(store.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let text = fs::read_to_string(store.path()).unwrap();
        let table: toml::Table = text.parse().unwrap();
        let entry = table[record.root.to_str().unwrap()].as_table().unwrap();
        assert_eq!(entry["digest"].as_str(), Some(record.digest.as_str()));
        assert_eq!(entry["trusted_at"].as_integer(), Some(record.trusted_at as i64));
        // No temporary files left beside it.
        let names: Vec<_> =
            fs::read_dir(store.path().parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from(STORE_FILE)]);

        // A second workspace keeps the first.
        let other = tempfile::tempdir().unwrap();
        fs::create_dir_all(other.path().join(".toolhost/tools")).unwrap();
        fs::write(other.path().join(".toolhost/tools/t.scm"), "(t)").unwrap();
        store.trust(other.path()).unwrap();
        assert_eq!(store.state(f.root()), TrustState::Trusted);
        assert_eq!(store.state(other.path()), TrustState::Trusted);
    }

    #[test]
    fn a_damaged_store_is_an_error_for_trust_and_untrusted_for_state() {
        let f = Fixture::new();
        f.write("toolhost.toml", "");
        let store = f.store();
        fs::create_dir_all(store.path().parent().unwrap()).unwrap();
        fs::write(store.path(), "[\"/x\"]\ndigest = \n").unwrap();
        let err = store.trust(f.root()).unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::Config);
        assert_eq!(err.line(), Some(2));
        assert!(err.to_string().contains("trust store is damaged"), "{err}");
        assert!(store.untrust(f.root()).is_err());
        match f.state() {
            TrustState::NotTrusted { problem: Some(problem) } => assert!(problem.contains("damaged"), "{problem}"),
            other => panic!("{other:?}"),
        }
        // The damaged store was not overwritten.
        assert_eq!(fs::read_to_string(store.path()).unwrap(), "[\"/x\"]\ndigest = \n");
    }

    #[test]
    fn a_missing_workspace_cannot_be_trusted_but_can_be_forgotten() {
        let f = Fixture::new();
        f.write("toolhost.toml", "");
        let store = f.store();
        store.trust(f.root()).unwrap();
        let gone = f.root().join("gone");
        assert!(store.trust(&gone).is_err());
        assert!(!store.untrust(&gone).unwrap());
        assert!(store.untrust(f.root()).unwrap());
    }

    #[test]
    fn the_skipped_message_is_one_line_with_counts_and_the_command() {
        let root = Path::new("/nonexistent/my work");
        let files: Vec<PathBuf> =
            ["toolhost.toml", ".toolhost/tools/a.scm", ".toolhost/tools/a_test.scm", "lib/x.scm", "lib/y.scm"]
                .iter()
                .map(|f| root.join(f))
                .collect();
        assert_eq!(
            skipped_message(root, &TrustState::Changed, &files),
            "toolhost: this workspace's toolhost files changed since it was trusted, so its toolhost.toml, \
             1 tool file and 1 test file in .toolhost/tools, and 2 tool files in the tool folders toolhost.toml \
             names were not loaded; check them, then run `toolhost trust --root '/nonexistent/my work'` to load them"
        );
        let one = [root.join("toolhost.toml")];
        let problem = TrustState::NotTrusted { problem: Some("bad\nstore".into()) };
        let msg = skipped_message(root, &problem, &one);
        assert_eq!(
            msg,
            "toolhost: this workspace is not trusted, so its toolhost.toml was not loaded; run \
             `toolhost trust --root '/nonexistent/my work'` to load it (trust could not be checked: bad; store)"
        );
        assert_eq!(shell_word("it's"), r"'it'\''s'");
    }

    #[test]
    fn the_user_store_lives_in_the_user_config_folder() {
        // Reads the environment without changing it: tests run in parallel threads.
        if let Some(dir) = crate::config::user_config_dir() {
            assert_eq!(TrustStore::user().unwrap().path(), dir.join(STORE_FILE));
        }
    }
}
