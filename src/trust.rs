//! Workspace trust (design section 17): which of a workspace's files are its own config and tool code,
//! a digest of them, and the user's record of trusted workspaces. It decides nothing about loading
//! (the host reads [`TrustState`] and skips the project's files when they are not trusted) and does
//! not cover what a person names on the command line (`--config`, `--tools`), which is trusted as named.
//!
//! # What trust covers
//!
//! [`project_files`]: `ROOT/toolhost.toml`, every regular file under `ROOT/.toolhost/tools/`, and every
//! regular file under each folder that `toolhost.toml` names in `tools` (wherever it is: it loads once
//! trusted). A symlinked file counts with its target's content; a symlinked folder is followed only when
//! it leads to a folder inside the root, so a checkout cannot pull in (and hash) the rest of the disk.
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
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// The project's config file, in the workspace root.
pub const PROJECT_CONFIG: &str = "toolhost.toml";
/// The project's own tool folder, in the workspace root.
pub const PROJECT_TOOLS: &str = ".toolhost/tools";
/// The store's file name in the user's toolhost config folder.
pub const STORE_FILE: &str = "trusted.toml";

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
    /// The files the digest covers ([`project_files`]).
    pub files: Vec<PathBuf>,
    /// When it was trusted, in seconds since the Unix epoch.
    pub trusted_at: u64,
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
        let key = workspace_key(root, false)?;
        let files = project_files(root);
        let digest = digest_of(root, &files)?;
        let mut entries = self.load()?;
        let trusted_at = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        entries.insert(key.clone(), StoredTrust { digest: digest.clone(), trusted_at });
        self.save(&entries)?;
        Ok(TrustRecord { root: PathBuf::from(key), digest, files, trusted_at })
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
        let text = match fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(e) => return Err(Error::config(format!("cannot read the workspace trust store: {e}")).at(shown, None)),
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
    let problem = |e: &Error| TrustState::NotTrusted { problem: Some(e.to_string().replace('\n', "; ")) };
    let files = project_files(root);
    if files.is_empty() {
        return TrustState::NothingToTrust;
    }
    let store = match store {
        Ok(store) => store,
        Err(e) => return problem(e),
    };
    let key = match workspace_key(root, false) {
        Ok(key) => key,
        Err(e) => return problem(&e),
    };
    let trusted = match store.load() {
        Ok(mut entries) => entries.remove(&key),
        Err(e) => return problem(&e),
    };
    let Some(trusted) = trusted else {
        return TrustState::NotTrusted { problem: None };
    };
    match digest_of(root, &files) {
        Ok(digest) if digest == trusted.digest => TrustState::Trusted,
        Ok(_) => TrustState::Changed,
        Err(e) => problem(&e),
    }
}

/// The files trust covers in the workspace `root` (see the module docs), sorted by their path
/// relative to the root, each once. Empty when the workspace has none.
pub fn project_files(root: &Path) -> Vec<PathBuf> {
    let canonical_root = fs::canonicalize(root).ok();
    let inside_root = |dir: &Path| match (&canonical_root, fs::canonicalize(dir)) {
        (Some(root), Ok(dir)) => dir.starts_with(root),
        _ => false,
    };
    let mut files = Vec::new();
    let mut seen = HashSet::new();

    let config = root.join(PROJECT_CONFIG);
    if fs::metadata(&config).is_ok_and(|m| m.is_file()) {
        files.push(config.clone());
        // Lenient: a file that does not parse is covered alone (it will not load either).
        let named = fs::read_to_string(&config).ok().and_then(|text| text.parse::<toml::Table>().ok());
        let named = named.as_ref().and_then(|t| t.get("tools")).and_then(|t| t.as_array());
        for folder in named.into_iter().flatten().filter_map(|f| f.as_str()) {
            // Named by the project's config, so followed wherever it leads: it is what loads.
            walk(&root.join(folder), &inside_root, &mut seen, &mut files);
        }
    }

    let tools = root.join(PROJECT_TOOLS);
    let is_link = fs::symlink_metadata(&tools).is_ok_and(|m| m.file_type().is_symlink());
    if !is_link || inside_root(&tools) {
        walk(&tools, &inside_root, &mut seen, &mut files);
    }

    let mut keyed: Vec<(PathBuf, PathBuf)> = files.into_iter().map(|f| (relative_to(root, &f), f)).collect();
    keyed.sort();
    keyed.dedup_by(|a, b| a.0 == b.0);
    keyed.into_iter().map(|(_, file)| file).collect()
}

/// Adds the regular files under `dir` to `out`, following symlinked folders only into the root.
fn walk(dir: &Path, inside_root: &dyn Fn(&Path) -> bool, seen: &mut HashSet<PathBuf>, out: &mut Vec<PathBuf>) {
    // Each real folder once: a symlink loop inside the root ends here.
    let Ok(real) = fs::canonicalize(dir) else { return };
    if !seen.insert(real) {
        return;
    }
    // A folder that cannot be listed cannot be loaded from either.
    let Ok(entries) = fs::read_dir(dir) else { return };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        let Ok(meta) = fs::symlink_metadata(&path) else { continue };
        if meta.file_type().is_symlink() {
            // A broken link has no content to load or hash.
            match fs::metadata(&path) {
                Ok(target) if target.is_file() => out.push(path),
                Ok(target) if target.is_dir() && inside_root(&path) => walk(&path, inside_root, seen, out),
                _ => {}
            }
        } else if meta.is_dir() {
            walk(&path, inside_root, seen, out);
        } else if meta.is_file() {
            out.push(path);
        }
    }
}

/// `file` relative to `root` when it is under it, else as it is (a tool folder named outside the root).
fn relative_to(root: &Path, file: &Path) -> PathBuf {
    file.strip_prefix(root).map_or_else(|_| file.to_path_buf(), Path::to_path_buf)
}

/// The sha256 (lowercase hex) of the workspace's [`project_files`]: their count, then for each its
/// path relative to the root and its content, each prefixed with its length, so no two different sets
/// of files (bytes moved from one file to the next, a file renamed) give the same stream.
///
/// # Errors
/// When a covered file cannot be read.
pub fn digest(root: &Path) -> Result<String> {
    digest_of(root, &project_files(root))
}

fn digest_of(root: &Path, files: &[PathBuf]) -> Result<String> {
    let mut hash = Sha256::new();
    hash.update(b"toolhost-trust-v1\n");
    hash.update((files.len() as u64).to_be_bytes());
    for file in files {
        let content = fs::read(file).map_err(|e| {
            Error::config(format!("cannot read it to check workspace trust: {e}")).at(file.display().to_string(), None)
        })?;
        let name = path_bytes(&relative_to(root, file));
        hash.update((name.len() as u64).to_be_bytes());
        hash.update(&name);
        hash.update((content.len() as u64).to_be_bytes());
        hash.update(&content);
    }
    Ok(hash.finalize().iter().map(|b| format!("{b:02x}")).collect())
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
    let (mut tools, mut named) = (0, 0);
    for file in files {
        let relative = relative_to(root, file);
        if relative == Path::new(PROJECT_CONFIG) {
            config = true;
        } else if relative.starts_with(PROJECT_TOOLS) {
            tools += 1;
        } else {
            named += 1;
        }
    }
    let count = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    let mut parts = Vec::new();
    if config {
        parts.push("its toolhost.toml".to_string());
    }
    if tools > 0 {
        parts.push(format!("{} in {PROJECT_TOOLS}", count(tools, "tool file")));
    }
    if named > 0 {
        parts.push(format!("{} in the tool folders toolhost.toml names", count(named, "file")));
    }
    let what = match parts.len() {
        0 => "its toolhost files".to_string(),
        1 => parts.remove(0),
        _ => {
            let last = parts.pop().unwrap_or_default();
            format!("{} and {last}", parts.join(", "))
        }
    };
    let several = usize::from(config) + tools + named != 1;
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
        f.write(".toolhost/tools/sub/a.scm", "(a)");
        assert_eq!(f.state(), NOT_TRUSTED);
        assert!(!f.state().allows_loading());

        let record = f.store().trust(f.root()).unwrap();
        assert_eq!(record.root, fs::canonicalize(f.root()).unwrap());
        assert_eq!(record.digest, digest(f.root()).unwrap());
        assert_eq!(record.digest.len(), 64);
        let relative: Vec<PathBuf> = record.files.iter().map(|p| relative_to(f.root(), p)).collect();
        assert_eq!(
            relative,
            [".toolhost/tools/b.scm", ".toolhost/tools/sub/a.scm", "toolhost.toml"].map(PathBuf::from).to_vec()
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
        assert_eq!(relative, ["mytools/x.scm", "toolhost.toml"].map(PathBuf::from).to_vec());
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
    fn symlinked_files_count_with_their_content_and_folders_outside_are_not_followed() {
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
        symlink(outside.path().join("lib"), tools.join("outside-lib")).unwrap();
        symlink(f.root().join("shared"), tools.join("inside-lib")).unwrap();
        symlink(f.root().join("nowhere"), tools.join("broken.scm")).unwrap();
        // A loop inside the root ends.
        symlink(&tools, tools.join("loop")).unwrap();

        let relative: Vec<PathBuf> = project_files(f.root()).iter().map(|p| relative_to(f.root(), p)).collect();
        assert_eq!(
            relative,
            [".toolhost/tools/inside-lib/inside.scm", ".toolhost/tools/linked.scm", ".toolhost/tools/own.scm"]
                .map(PathBuf::from)
                .to_vec()
        );
        f.store().trust(f.root()).unwrap();
        fs::write(outside.path().join("target.scm"), "(two)").unwrap();
        assert_eq!(f.state(), TrustState::Changed);
    }

    #[cfg(unix)]
    #[test]
    fn a_tools_folder_that_is_a_link_out_of_the_root_is_not_followed() {
        use std::os::unix::fs::symlink;
        let f = Fixture::new();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("x.scm"), "(x)").unwrap();
        fs::create_dir_all(f.root().join(".toolhost")).unwrap();
        symlink(outside.path(), f.root().join(".toolhost/tools")).unwrap();
        assert_eq!(project_files(f.root()), Vec::<PathBuf>::new());
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
            ["toolhost.toml", ".toolhost/tools/a.scm", "lib/x.scm", "lib/y.scm"].iter().map(|f| root.join(f)).collect();
        assert_eq!(
            skipped_message(root, &TrustState::Changed, &files),
            "toolhost: this workspace's toolhost files changed since it was trusted, so its toolhost.toml, \
             1 tool file in .toolhost/tools and 2 files in the tool folders toolhost.toml names were not loaded; \
             check them, then run `toolhost trust --root '/nonexistent/my work'` to load them"
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
