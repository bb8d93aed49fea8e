//! Warm search (design section 14): a host whose index-grep answers from its trigram index gives
//! exactly what a cold search gives, on a real tree, after every kind of change, made through the
//! tools or behind the host's back.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use serde_json::{json, Value};
use toolhost::Host;

const PATTERNS: &[&str] = &[
    "fn ",
    "fn [a-z_]+_unchecked",
    "impl.*Iterator for",
    "TODO|FIXME",
    "(?i)unsafe fn",
    "(?i)NEEDLE",
    "needle",
    "^use std",
    r"\}$",
    r"\bSearch\b",
    "[Ss]earch(er|ing)",
    r"\w+",
    "a.b",
    "x",
    "pub (crate|super)",
    r"\d{3,}",
    "héllo",
    "(?-u:\\xff)",
    "after_nul",
    "before_nul",
    "(",
    "[z-a]",
    r"[^\s\S]",
];

const GLOBS: &[Option<&str>] = &[None, Some("*.rs"), Some("src/"), Some("!*.md")];

/// One call's result as a model or a script sees it.
fn answer(host: &mut Host, pattern: &str, glob: Option<&str>) -> String {
    let arguments = match glob {
        Some(glob) => json!({"pattern": pattern, "glob": glob}),
        None => json!({"pattern": pattern}),
    };
    match host.call("index-grep", arguments).result {
        Ok(Value::String(text)) => text,
        Ok(other) => other.to_string(),
        Err(e) => format!("error {}: {}", e.kind(), e.message()),
    }
}

/// The patterns that see what each change between two full comparisons changes: the needles the
/// changes write and remove, names, NUL bytes, Latin-1 and the capped answer. (Every pattern with
/// every glob is a cold search of the whole tree each: the full set is compared after the build
/// and after the last change, where the index holds every kind of entry.)
const QUICK_PATTERNS: &[&str] = &["needle", "(?i)NEEDLE", "fn ", "TODO|FIXME", r"\w+", "after_nul", "(?-u:\\xff)", "x"];

/// The quick patterns with every glob, warm against cold, and the Scheme value procedure once.
fn same_answers(warm: &mut Host, cold: &mut Host, step: &str) {
    compare(warm, cold, step, QUICK_PATTERNS);
}

/// Every pattern with every glob, warm against cold, and the Scheme value procedure once.
fn same_answers_fully(warm: &mut Host, cold: &mut Host, step: &str) {
    compare(warm, cold, step, PATTERNS);
}

fn compare(warm: &mut Host, cold: &mut Host, step: &str, patterns: &[&str]) {
    for pattern in patterns {
        for glob in GLOBS {
            let (w, c) = (answer(warm, pattern, *glob), answer(cold, pattern, *glob));
            assert!(w == c, "after {step}: {pattern:?} with glob {glob:?}\n--- warm:\n{w}\n--- cold:\n{c}");
        }
    }
    let script = r#"(grep-matches "needle|fn main")"#;
    assert_eq!(warm.eval_to_string(script).ok(), cold.eval_to_string(script).ok(), "after {step}: grep-matches");
    let state = warm.search_index().stats().state;
    assert_eq!(state, "ready", "after {step}: the warm host fell back to cold search");
}

/// Up to `limit` real source files from the cargo registry's unpacked crates (when there is one)
/// and this repository, under `src/`, `docs/` and `vendor/` of `root`.
fn copy_real_files(root: &Path, limit: usize) -> usize {
    let mut sources: Vec<(PathBuf, PathBuf)> = Vec::new();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (from, to) in [("src", "src"), ("tests", "src/tests"), ("benches", "docs/benches")] {
        collect(&repo.join(from), &root.join(to), &mut sources);
    }
    let registry = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .map(|home| home.join("registry/src"));
    if let Some(Ok(indexes)) = registry.map(std::fs::read_dir) {
        for index in indexes.flatten() {
            for krate in ["regex-syntax-", "grep-searcher-", "ignore-", "memchr-"] {
                let Ok(crates) = std::fs::read_dir(index.path()) else { continue };
                if let Some(dir) = crates.flatten().find(|c| c.file_name().to_string_lossy().starts_with(krate)) {
                    collect(&dir.path(), &root.join("vendor").join(dir.file_name()), &mut sources);
                }
            }
        }
    }
    sources.sort();
    sources.truncate(limit);
    for (from, to) in &sources {
        std::fs::create_dir_all(to.parent().expect("a parent")).expect("mkdir");
        std::fs::copy(from, to).expect("copy");
    }
    sources.len()
}

fn collect(from: &Path, to: &Path, out: &mut Vec<(PathBuf, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(from) else { return };
    for entry in entries.flatten() {
        let (path, name) = (entry.path(), entry.file_name());
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_dir() && !name.to_string_lossy().starts_with('.') && name != "target" {
            collect(&path, &to.join(&name), out);
        } else if kind.is_file()
            && path.extension().is_some_and(|e| ["rs", "md", "toml", "txt"].iter().any(|x| e == *x))
        {
            out.push((path, to.join(&name)));
        }
    }
}

fn tool(host: &mut Host, name: &str, arguments: Value) {
    let outcome = host.call(name, arguments);
    assert!(outcome.result.is_ok(), "{name}: {:?}", outcome.result);
}

#[test]
fn warm_answers_equal_cold_answers_through_every_kind_of_change() {
    let dir = workspace(&[
        ("src/fixture.rs", "pub fn needle() {}\n// TODO: more\n"),
        ("docs/guide.md", "A NEEDLE in the docs, héllo\n"),
        ("binary.bin", "before_nul needle\n\0after_nul needle\n"),
        ("bom.txt", "\u{feff}needle behind a byte-order mark\n"),
        ("empty.txt", ""),
        (".hidden.rs", "fn needle_hidden() {}\n"),
        ("target/out.rs", "fn needle_ignored() {}\n"),
        ("sub/.gitignore", "*.log\n"),
        ("sub/kept.rs", "fn needle_kept() {}\n"),
        ("sub/dropped.log", "needle in a log\n"),
        (".gitignore", "target/\n"),
    ]);
    let root = dir.path().to_path_buf();
    std::fs::write(root.join("latin1.txt"), b"needle caf\xe9 \xff\n").expect("write");
    let copied = copy_real_files(&root, 400);
    assert!(copied > 50, "only {copied} real files to search");
    // Behind the index's back from before it is built: a file with a second name outside the tree,
    // and a file another process keeps mapped for writing.
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::write(outside.path().join("linked-early.txt"), "a file with two names\n").expect("write");
    std::fs::hard_link(outside.path().join("linked-early.txt"), root.join("linked-early.txt")).expect("link");
    std::fs::write(root.join("mapped-early.txt"), "x".repeat(64)).expect("write");
    let mut early_map = Mapping::new(&root.join("mapped-early.txt"), false);
    let mut warm = host(&dir);
    let mut cold = host(&dir);
    cold.search_index().disable();

    // The first search is cold and starts the build; the rest answer from the index.
    let first = answer(&mut warm, "needle", None);
    assert_eq!(first, answer(&mut cold, "needle", None));
    assert!(warm.search_index().wait_ready(Duration::from_secs(120)), "{:?}", warm.search_index().stats());
    same_answers_fully(&mut warm, &mut cold, "the build");

    // Through the tools.
    tool(
        &mut warm,
        "fs-write",
        json!({"path": "src/new_module.rs", "content": "fn needle_new() { unsafe fn x() {} }\n"}),
    );
    tool(&mut warm, "fs-write", json!({"path": "src/deep/er/still.rs", "content": "// FIXME needle deep\n"}));
    tool(&mut warm, "fs-edit", json!({"path": "src/fixture.rs", "old": "pub fn needle()", "new": "pub fn renamed()"}));
    same_answers(&mut warm, &mut cold, "writes and edits through the tools");

    // Behind the host's back: edits, the same size twice in a row, deletions, renames of files
    // and folders, new folders, a file moved in from outside.
    std::fs::write(root.join("docs/guide.md"), "no longer\n").expect("write");
    std::fs::write(root.join("empty.txt"), "aaaa needle\n").expect("write");
    std::fs::write(root.join("empty.txt"), "bbbb NEEDL\n").expect("write");
    std::fs::remove_file(root.join("src/new_module.rs")).expect("remove");
    std::fs::rename(root.join("src/deep"), root.join("src/moved")).expect("rename dir");
    std::fs::rename(root.join("sub/kept.rs"), root.join("src/kept_moved.rs")).expect("rename file");
    std::fs::create_dir_all(root.join("fresh/a/b/c")).expect("mkdir");
    std::fs::write(root.join("fresh/a/b/c/leaf.rs"), "fn needle_leaf() {}\n").expect("write");
    std::fs::write(root.join("fresh/a/top.md"), "needle top\n").expect("write");
    std::fs::create_dir_all(outside.path().join("pkg/src")).expect("mkdir");
    std::fs::write(outside.path().join("pkg/src/lib.rs"), "fn needle_from_outside() {}\n").expect("write");
    std::fs::rename(outside.path().join("pkg"), root.join("pkg")).expect("move in");
    same_answers(&mut warm, &mut cold, "changes behind the host's back");

    // A folder of files indexed at the build, renamed: they keep their trigrams under new names.
    std::fs::rename(root.join("src/tools"), root.join("src/tools_moved")).expect("rename dir");
    std::fs::write(root.join("src/tools_moved/fs_read.rs"), "fn needle_in_a_moved_folder() {}\n").expect("write");
    same_answers(&mut warm, &mut cold, "a folder of indexed files renamed");

    // Changes inside folders that arrived after the build, and folders moved out and deleted.
    std::fs::write(root.join("src/moved/er/still.rs"), "// needle changed in a moved folder\n").expect("write");
    std::fs::write(root.join("pkg/src/lib.rs"), "fn renamed_from_outside() {}\n").expect("write");
    std::fs::rename(root.join("fresh"), outside.path().join("fresh")).expect("move out");
    std::fs::write(outside.path().join("fresh/a/top.md"), "needle outside now\n").expect("write");
    std::fs::remove_dir_all(root.join("vendor")).ok();
    same_answers(&mut warm, &mut cold, "changes in new, moved and removed folders");

    // Ignore rules: a .gitignore that ignores more, then less; a nested one; .git/info/exclude.
    std::fs::write(root.join(".gitignore"), "target/\nsrc/moved/\n*.md\n").expect("write");
    same_answers(&mut warm, &mut cold, "a .gitignore that ignores more");
    std::fs::write(root.join(".gitignore"), "").expect("write");
    same_answers(&mut warm, &mut cold, "a .gitignore that ignores nothing");
    std::fs::write(root.join("target/out.rs"), "fn needle_no_longer_ignored() {}\n").expect("write");
    std::fs::write(root.join("sub/.gitignore"), "").expect("write");
    same_answers(&mut warm, &mut cold, "a file in a folder no longer ignored");
    std::fs::create_dir_all(root.join(".git/info")).expect("mkdir");
    std::fs::write(root.join(".git/info/exclude"), "pkg/\n").expect("write");
    same_answers(&mut warm, &mut cold, ".git/info/exclude");
    std::fs::write(root.join(".git/info/exclude"), "").expect("write");
    std::fs::write(root.join("pkg/.ignore"), "*.rs\n").expect("write");
    same_answers(&mut warm, &mut cold, "a new .ignore file");

    // Hidden files, symlinks, binary files, a file with more matches than the cap.
    std::fs::rename(root.join("src/fixture.rs"), root.join("src/.fixture.rs")).expect("rename");
    std::os::unix::fs::symlink(root.join("src/kept_moved.rs"), root.join("src/link.rs")).expect("symlink");
    std::fs::write(root.join("src/nul.rs"), "fn needle_before() {}\n\0 fn needle_after_nul() {}\n").expect("write");
    let many: String = (0..500).map(|i| format!("x needle {i}\n")).collect();
    std::fs::write(root.join("many.txt"), many).expect("write");
    same_answers(&mut warm, &mut cold, "hidden files, symlinks, NUL bytes and a capped answer");

    // Through a hard link outside the tree, made before the build and after it: no event names a
    // path of the tree.
    append(&outside.path().join("linked-early.txt"), "needle appended through the other name\n");
    same_answers(&mut warm, &mut cold, "a file appended through its name outside the tree");
    std::fs::write(root.join("src/linked-late.rs"), "// a file that gets a second name\n").expect("write");
    same_answers(&mut warm, &mut cold, "a new file");
    std::fs::hard_link(root.join("src/linked-late.rs"), outside.path().join("late.rs")).expect("link");
    append(&outside.path().join("late.rs"), "fn needle_through_a_late_link() {}\n");
    same_answers(&mut warm, &mut cold, "a file linked from outside after the build, appended there");
    std::fs::write(outside.path().join("late.rs"), "// rewritten in place outside: no needle\n").expect("write");
    same_answers(&mut warm, &mut cold, "a file rewritten through its name outside the tree");

    // Through a shared memory map, which makes no event at all: mapped before the build (the
    // descriptor kept) and after it (the descriptor closed, the mapping alone holding the file),
    // written, written again in a page already dirty, then unmapped.
    early_map.write(0, b"needle written through an early map");
    same_answers(&mut warm, &mut cold, "a write through a map made before the build");
    std::fs::write(root.join("mapped-late.txt"), "y".repeat(8192)).expect("write");
    same_answers(&mut warm, &mut cold, "a file to map");
    let mut late_map = Mapping::new(&root.join("mapped-late.txt"), true);
    same_answers(&mut warm, &mut cold, "a file mapped for writing, not written yet");
    late_map.write(100, b"NEEDLE in the map");
    same_answers(&mut warm, &mut cold, "a write through a map made after the build");
    late_map.write(100, b"needle! in the map");
    same_answers(&mut warm, &mut cold, "a second write to the same page of the map");
    drop(late_map);
    drop(early_map);
    same_answers_fully(&mut warm, &mut cold, "the maps unmapped");
    let stats = warm.search_index().stats();
    assert!(stats.files > 50 && stats.text_bytes > 0, "{stats:?}");
    assert!(stats.index_bytes <= stats.text_bytes.max(16 << 20), "{stats:?}");
}

fn append(path: &Path, text: &str) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().append(true).open(path).expect("open to append");
    file.write_all(text.as_bytes()).expect("append");
}

/// A file mapped shared and writable, as a database or an editor might map it.
struct Mapping {
    file: Option<std::fs::File>,
    at: *mut u8,
    len: usize,
}

impl Mapping {
    /// Maps `path` whole; with `close`, its descriptor is closed at once and the mapping alone
    /// holds the file.
    fn new(path: &Path, close: bool) -> Mapping {
        use std::os::fd::AsRawFd;
        let file = std::fs::OpenOptions::new().read(true).write(true).open(path).expect("open to map");
        let len = file.metadata().expect("stat").len() as usize;
        // SAFETY: a fresh shared mapping of a file this test owns, of its whole length.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(at, libc::MAP_FAILED, "mmap");
        Mapping { file: (!close).then_some(file), at: at.cast(), len }
    }

    fn write(&mut self, offset: usize, bytes: &[u8]) {
        assert!(offset + bytes.len() <= self.len);
        // SAFETY: within the mapping, which lives until drop.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.at.add(offset), bytes.len()) };
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `new` made.
        unsafe { libc::munmap(self.at.cast(), self.len) };
        self.file.take();
    }
}

/// Runs in a child process of the test binary, with its own HOME and XDG_CONFIG_HOME: git's
/// global files are the process's environment, and the real ones must not be touched.
#[test]
fn warm_answers_follow_the_global_git_excludes_file() {
    const CHILD: &str = "TOOLHOST_TEST_GIT_GLOBAL_CHILD";
    let Some(home) = std::env::var_os(CHILD) else {
        let home = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(home.path().join("xdg")).expect("mkdir");
        let out = std::process::Command::new(std::env::current_exe().expect("the test binary"))
            .args(["--exact", "warm_search::warm_answers_follow_the_global_git_excludes_file", "--test-threads=1"])
            .env(CHILD, home.path())
            .env("HOME", home.path())
            .env("XDG_CONFIG_HOME", home.path().join("xdg"))
            .env("GIT_CONFIG_SYSTEM", home.path().join("no-system-config"))
            .env_remove("GIT_CONFIG_GLOBAL")
            .output()
            .expect("the test binary runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains("1 passed"), "the child ran nothing: {stdout}");
        return;
    };
    let home = PathBuf::from(home);
    let dir = workspace(&[
        ("src/lib.rs", "fn needle() {}\n"),
        ("notes.log", "needle in a log\n"),
        ("docs/readme.md", "needle in the docs\n"),
    ]);
    let mut warm = host(&dir);
    let mut cold = host(&dir);
    cold.search_index().disable();
    answer(&mut warm, "needle", None);
    assert!(warm.search_index().wait_ready(Duration::from_secs(60)), "{:?}", warm.search_index().stats());
    same_answers_fully(&mut warm, &mut cold, "the build, without global excludes");
    // $XDG_CONFIG_HOME/git/ignore, in a folder that did not exist.
    write(&home.join("xdg"), "git/ignore", "*.log\n");
    assert!(!answer(&mut cold, "needle", None).contains("notes.log"), "the walker reads the global excludes");
    same_answers(&mut warm, &mut cold, "a new global excludes file");
    write(&home.join("xdg"), "git/ignore", "");
    same_answers(&mut warm, &mut cold, "the global excludes file emptied");
    // core.excludesFile in ~/.gitconfig names another file.
    write(&home, "custom-ignore", "docs/\n");
    write(&home, ".gitconfig", "[core]\n\texcludesFile = ~/custom-ignore\n");
    same_answers(&mut warm, &mut cold, "core.excludesFile set");
    write(&home, "custom-ignore", "*.rs\n");
    same_answers(&mut warm, &mut cold, "the file core.excludesFile names changed");
    std::fs::remove_file(home.join(".gitconfig")).expect("remove");
    same_answers_fully(&mut warm, &mut cold, "core.excludesFile gone");
}

#[test]
fn the_index_is_built_only_after_a_first_search_and_can_be_turned_off() {
    let dir = workspace(&[("src/lib.rs", "fn needle() {}\n")]);
    let mut host = host(&dir);
    assert_eq!(host.search_index().stats().state, "idle");
    assert!(!host.search_index().wait_ready(Duration::ZERO), "nothing to wait for before a search");
    let cold = answer(&mut host, "needle", None);
    assert!(host.search_index().wait_ready(Duration::from_secs(60)), "{:?}", host.search_index().stats());
    assert_eq!(answer(&mut host, "needle", None), cold);
    let stats = host.search_index().stats();
    assert_eq!((stats.state.as_str(), stats.files), ("ready", 2), "{stats:?}");
    host.search_index().disable();
    assert_eq!(host.search_index().stats().state, "off");
    write(dir.path(), "src/more.rs", "fn needle_more() {}\n");
    assert!(answer(&mut host, "needle", None).contains("src/more.rs:1:"));
}

#[test]
fn a_flood_of_changes_is_followed_by_one_walk_and_a_tree_that_keeps_flooding_is_searched_cold() {
    let dir = workspace(&[("src/lib.rs", "fn needle() {}\n")]);
    let root = dir.path().to_path_buf();
    let mut warm = host(&dir);
    let mut cold = host(&dir);
    cold.search_index().disable();
    answer(&mut warm, "needle", None);
    assert!(warm.search_index().wait_ready(Duration::from_secs(60)), "{:?}", warm.search_index().stats());
    // Floods in a row turn the index cold; a search without one in between resets the count, so
    // the first round checks several patterns and each later round one.
    for round in 0..4 {
        // More events between two searches than are worth following one by one (in a watched folder).
        for i in 0..1500 {
            write(&root, &format!("src/f{round}_{i}.txt"), &format!("needle {round} {i}\n"));
        }
        std::fs::remove_file(root.join(format!("src/f{round}_7.txt"))).expect("remove");
        let patterns: &[&str] = if round == 0 { &["needle", "needle 0 14", "(?i)NEEDLE 0 1"] } else { &["needle"] };
        for pattern in patterns {
            assert_eq!(answer(&mut warm, pattern, None), answer(&mut cold, pattern, None), "round {round}: {pattern}");
        }
        let state = warm.search_index().stats().state;
        if round < 3 {
            assert_eq!(state, "ready", "round {round}");
        } else {
            assert!(state.starts_with("cold: the tree changes faster"), "round {round}: {state}");
        }
    }
}
