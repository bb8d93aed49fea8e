//! `fs-list [path] [depth]`: the tree below a folder, leaving out what `.gitignore` (and `.ignore`)
//! files exclude and hidden entries. The walk opens every folder beneath the workspace root's
//! handle without following symlinks, so a folder swapped for a symlink during the walk is not
//! listed through it; ignore rules are read with ripgrep's gitignore matcher from the folders
//! between the workspace root and each listed folder. What the guard's path rules hide (see
//! [`crate::guard::Hidden`]) is left out, and a hidden folder is not gone into.

use std::ffi::OsString;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use steel::rvals::SteelVal;

use crate::context::ToolCtx;
use crate::error::{Error, Result};
use crate::guard::HiddenFrom;
use crate::registry::Primitive;
use crate::typed::Tool;
use crate::workspace::{is_swapped, open_child_dir};

const DEFAULT_DEPTH: usize = 3;
/// The deepest the walk goes whatever depth is asked: each level holds an open folder and a frame.
const MAX_DEPTH: usize = 128;
/// The most of an ignore file that is read.
const IGNORE_FILE_BYTES: u64 = 1 << 20;

pub fn tool() -> Result<Primitive> {
    Tool::new(
        "fs-list",
        "List the files and folders below a folder as an indented tree (folders end in '/'), \
         leaving out what .gitignore excludes and hidden entries.",
    )
    .param("path", "Folder to list, relative to the workspace root; the root when left out or empty")
    .param("depth", "How many levels below the folder to show; 3 when left out or 0")
    .read_only()
    .build(fs_list)
}

/// What the walk has produced so far.
struct Listing<'a> {
    ctx: &'a ToolCtx,
    out: String,
    /// The entries as data (`dir-entries`): paths from the workspace root, instead of `out`.
    entries: Option<Vec<SteelVal>>,
    shown: usize,
    more: usize,
    max_depth: usize,
    hidden: Option<HiddenFrom>,
}

/// The most entries `dir-entries` gives: a program's data need not fit a model's result, but a
/// whole disk must not become one list.
const MAX_ENTRY_VALUES: usize = 100_000;

/// `(dir-entries [path] [depth])`: the paths below a folder, from the workspace root, folders
/// ending in `/`, as `fs-list` walks them (what ignore files, hidden names and the guard's rules
/// leave out is left out).
pub(crate) fn entries_value(ctx: &ToolCtx, args: &[SteelVal]) -> Result<SteelVal> {
    let path = match args.first() {
        Some(SteelVal::StringV(p)) if !p.is_empty() => Some(p.as_str().to_string()),
        _ => None,
    };
    let depth = match args.get(1) {
        Some(SteelVal::IntV(n)) => Some(*n as i64),
        _ => None,
    };
    let (listing_path, depth) = list_arguments(path, depth)?;
    let mut listing = walk_from(ctx, &listing_path, depth, Some(Vec::new()))?;
    if listing.more > 0 {
        return Err(Error::tool_failed(format!(
            "dir-entries: more than {MAX_ENTRY_VALUES} entries below {listing_path}; list a subfolder or a lower depth"
        )));
    }
    Ok(SteelVal::ListV(listing.entries.take().unwrap_or_default().into_iter().collect()))
}

/// The folder and depth a listing reads: the root and 3 levels when left out.
fn list_arguments(path: Option<String>, depth: Option<i64>) -> Result<(String, usize)> {
    let path = path.filter(|p| !p.is_empty()).unwrap_or_else(|| ".".to_string());
    let depth = match depth.unwrap_or(0) {
        0 => DEFAULT_DEPTH,
        n if n < 0 => return Err(Error::tool_failed(format!("depth must be 1 or more, got {n}"))),
        n => (n as usize).min(MAX_DEPTH),
    };
    Ok((path, depth))
}

fn fs_list(ctx: &ToolCtx, path: Option<String>, depth: Option<i64>) -> Result<String> {
    let (path, depth) = list_arguments(path, depth)?;
    let listing = walk_from(ctx, &path, depth, None)?;
    let real = ctx.workspace.resolve(&path)?;
    let Listing { mut out, shown, more, .. } = listing;
    if shown == 0 {
        out.push_str(&format!("({} is empty)\n", ctx.workspace.display(&real)));
    }
    if more > 0 {
        out.push_str(&format!("... {more} more entries; list a subfolder or lower depth\n"));
    }
    Ok(out)
}

/// Walks the folder `path` down to `depth` levels: as text, or as data when `entries` is given.
fn walk_from<'a>(ctx: &'a ToolCtx, path: &str, depth: usize, entries: Option<Vec<SteelVal>>) -> Result<Listing<'a>> {
    let real = ctx.workspace.resolve(path)?;
    let dir = ctx.workspace.dir_beneath(&real, false).map_err(|e| not_a_folder(ctx, &real, path, &e))?;
    // The ignore files of the folders above the listed one, from the workspace root down.
    let mut rules = Vec::new();
    let root = ctx.workspace.root();
    let below: Vec<_> = real.strip_prefix(root).map(|r| r.components().collect()).unwrap_or_default();
    for k in 0..below.len() {
        let folder: PathBuf = below[..k].iter().fold(root.to_path_buf(), |p, c| p.join(c));
        if let Ok(fd) = ctx.workspace.dir_beneath(&folder, false) {
            rules.push(ignore_rules(&fd, &folder));
        }
    }
    let hidden = ctx.hidden.for_tool("fs-list", Some(&ctx.workspace.display(&real)));
    let mut listing = Listing { ctx, out: String::new(), entries, shown: 0, more: 0, max_depth: depth, hidden };
    walk(&mut listing, &dir, &real, 1, &mut rules);
    Ok(listing)
}

/// The error for a listed path that could not be opened as a folder.
fn not_a_folder(ctx: &ToolCtx, real: &Path, path: &str, e: &std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::NotFound {
        return Error::tool_failed(format!("no such folder: {path}"));
    }
    if e.raw_os_error() == Some(libc::ENOTDIR) {
        if let Ok(fd) = ctx.workspace.open_beneath(real, OFlags::PATH, Mode::empty()) {
            if let Ok(stat) = rustix::fs::fstat(&fd) {
                return Error::tool_failed(match FileType::from_raw_mode(stat.st_mode) {
                    FileType::RegularFile => format!("{path} is a file; use fs-read to read it"),
                    _ => format!("{path} is not a folder"),
                });
            }
        }
    }
    if is_swapped(e) {
        return Error::denied(format!(
            "path \"{path}\" goes through a symlink or a file where a folder should be (it may have changed \
             during the call); symlinks are not followed there"
        ));
    }
    Error::tool_failed(format!("cannot list {path}: {e}"))
}

/// The `.gitignore` and `.ignore` rules of the folder `dir` (at `at`).
fn ignore_rules(dir: &OwnedFd, at: &Path) -> Gitignore {
    let mut builder = GitignoreBuilder::new(at);
    for name in [".gitignore", ".ignore"] {
        let Ok(fd) = rustix::fs::openat(dir, name, OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK, Mode::empty())
        else {
            continue;
        };
        let file = std::fs::File::from(fd);
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            continue;
        }
        let mut text = String::new();
        if file.take(IGNORE_FILE_BYTES).read_to_string(&mut text).is_err() {
            continue;
        }
        for line in text.lines() {
            let _ = builder.add_line(None, line);
        }
    }
    builder.build().unwrap_or_else(|_| Gitignore::empty())
}

/// Whether the rules (innermost last) exclude `path`.
fn ignored(rules: &[Gitignore], path: &Path, is_dir: bool) -> bool {
    for rule in rules.iter().rev() {
        let matched = rule.matched(path, is_dir);
        if matched.is_ignore() {
            return true;
        }
        if matched.is_whitelist() {
            return false;
        }
    }
    false
}

/// Lists the folder `dir` (at `at`, `level` levels below the listed folder) into `listing`.
fn walk(listing: &mut Listing, dir: &OwnedFd, at: &Path, level: usize, rules: &mut Vec<Gitignore>) {
    rules.push(ignore_rules(dir, at));
    let mut entries: Vec<(OsString, bool)> = Vec::new();
    if let Ok(reader) = rustix::fs::Dir::read_from(dir) {
        for entry in reader.flatten() {
            let name = entry.file_name().to_bytes();
            // Hidden entries (and `.`, `..`) are left out, as ripgrep's walker leaves them out.
            if name.starts_with(b".") {
                continue;
            }
            let kind = match entry.file_type() {
                FileType::Unknown => rustix::fs::statat(dir, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                    .map(|s| FileType::from_raw_mode(s.st_mode))
                    .unwrap_or(FileType::Unknown),
                kind => kind,
            };
            entries.push((OsString::from(std::ffi::OsStr::from_bytes(name)), kind == FileType::Directory));
        }
    }
    entries.sort();
    for (name, is_dir) in entries {
        let path: PathBuf = at.join(&name);
        if ignored(rules, &path, is_dir) {
            continue;
        }
        if listing.hidden.as_ref().is_some_and(|h| h.hides_entry(&listing.ctx.workspace.display(&path))) {
            continue;
        }
        match listing.entries.as_mut() {
            Some(entries) if entries.len() >= MAX_ENTRY_VALUES => {
                listing.more += 1;
                return;
            }
            Some(entries) => {
                let shown = listing.ctx.workspace.display(&path);
                entries.push(SteelVal::StringV(if is_dir { format!("{shown}/") } else { shown }.into()));
            }
            None => {
                let indent = "  ".repeat(level - 1);
                let line = format!("{indent}{}{}\n", name.to_string_lossy(), if is_dir { "/" } else { "" });
                if listing.shown >= listing.ctx.limits.list_entries
                    || listing.out.len() + line.len() > listing.ctx.limits.output_budget()
                {
                    listing.more += 1;
                } else {
                    listing.out.push_str(&line);
                    listing.shown += 1;
                }
            }
        }
        if is_dir && level < listing.max_depth {
            // Not followed if it is no longer a folder (a symlink swapped in): O_NOFOLLOW.
            if let Ok(child) = open_child_dir(dir, &name, false) {
                walk(listing, &child, &path, level + 1, rules);
            }
        }
    }
    rules.pop();
}
