//! `index-grep pattern [glob]`: a regex search of the workspace with ripgrep's own crates (the
//! `.gitignore`-aware parallel walker, the regex matcher and searcher), printed as sorted
//! `path:line:text` lines with a cap. The glob only narrows what the walker yields: ignored and
//! hidden files stay unsearched whatever the glob says, and so do the files the guard's path rules
//! hide from `index-grep` (see [`crate::guard::Hidden`]).

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use globset::{GlobBuilder, GlobMatcher};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{sinks::Bytes, BinaryDetection, Searcher, SearcherBuilder};
use ignore::WalkState;
use rustix::fs::{Mode, OFlags};

use serde_json::json;
use steel::rvals::SteelVal;

use super::text::{cut_line, thousands};
use crate::context::{Limits, ToolCtx};
use crate::error::{Error, Result};
use crate::guard::HiddenFrom;
use crate::registry::Primitive;
use crate::search_index;
use crate::typed::Tool;

pub fn tool(limits: &Limits) -> Result<Primitive> {
    Tool::new(
        "index-grep",
        format!(
            "Search the workspace's files for a regular expression (Rust regex syntax), leaving out \
             what .gitignore excludes, hidden files and binary files, whatever the glob. Prints \
             path:line:text for each matching line, sorted by path, capped at {} lines (and {} \
             characters) with a note giving the total.",
            limits.grep_matches,
            thousands(limits.output_budget() as u64)
        ),
    )
    .param("pattern", "Regular expression to search for, e.g. fn\\s+main")
    .param(
        "glob",
        "Only search files matching this glob; every file when left out or empty. Without a '/' it \
         matches file names at any depth (*.rs, main.rs); with a '/' it matches the whole path from \
         the workspace root (src/**/*.ts; /main.rs is only the root's main.rs); a trailing '/' means \
         everything below a folder (tests/); a leading '!' searches the files it does not match",
    )
    .read_only()
    .build(index_grep)
}

/// Which files a glob selects: by file name at any depth, or by path from the root.
struct FileFilter {
    matcher: GlobMatcher,
    by_name: bool,
    negated: bool,
}

impl FileFilter {
    /// Reads a glob as the `glob` parameter describes it.
    fn new(glob: &str) -> Result<Self> {
        let invalid = |e: globset::Error| Error::tool_failed(format!("invalid glob {glob:?}: {e}"));
        let (negated, body) = match glob.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, glob),
        };
        let by_name = !body.contains('/');
        let mut pattern = body.strip_prefix('/').unwrap_or(body).to_string();
        if pattern.ends_with('/') {
            pattern.push_str("**");
        }
        if pattern.is_empty() {
            return Err(Error::tool_failed(format!("invalid glob {glob:?}: it matches no file")));
        }
        // `*` and `?` stay within one path component, as in .gitignore and ripgrep's -g.
        let matcher = GlobBuilder::new(&pattern).literal_separator(true).build().map_err(invalid)?.compile_matcher();
        Ok(FileFilter { matcher, by_name, negated })
    }

    /// Whether the file at `relative` (to the workspace root) is searched.
    fn selects(&self, relative: &Path) -> bool {
        let matched = if self.by_name {
            relative.file_name().is_some_and(|name| self.matcher.is_match(name))
        } else {
            self.matcher.is_match(relative)
        };
        matched != self.negated
    }
}

/// One file's matching lines (at most the cap) and how many there were in all.
struct FileMatches {
    path: String,
    lines: Vec<(u64, String)>,
    total: u64,
    /// How many of the kept lines held bytes that are not UTF-8 (shown as U+FFFD).
    lossy: usize,
}

/// Why `pattern` is not a regular expression, shown on the pattern as written: grep-regex reports
/// its errors on its own wrapped form of the pattern (`(?:...)`), which would point at the wrong
/// column.
fn pattern_error(pattern: &str, wrapped: &grep_regex::Error) -> String {
    match regex_syntax::Parser::new().parse(pattern) {
        Err(e) => format!("invalid pattern {pattern:?}:\n{e}"),
        Ok(_) => format!("invalid pattern {pattern:?}: {wrapped}"),
    }
}

/// One search's pattern, file filter and caps, applied file by file by both the cold walk and the
/// warm candidates, so the two give the same lines.
struct Search<'a> {
    ctx: &'a ToolCtx,
    matcher: RegexMatcher,
    filter: Option<FileFilter>,
    /// What the guard's path rules hide from index-grep.
    hidden: Option<HiddenFrom>,
    /// Each file keeps at most this many lines: no more can ever be shown.
    cap: usize,
    line_chars: usize,
}

impl Search<'_> {
    fn searcher() -> Searcher {
        SearcherBuilder::new().binary_detection(BinaryDetection::quit(0)).line_number(true).build()
    }

    /// The matches of the file at `relative` (to the root), if the glob selects it, it is still a
    /// regular file and it has any.
    fn file(&self, searcher: &mut Searcher, relative: &Path) -> Option<FileMatches> {
        if self.filter.as_ref().is_some_and(|f| !f.selects(relative)) {
            return None;
        }
        if self.hidden.as_ref().is_some_and(|h| h.hides(&relative.to_string_lossy())) {
            return None;
        }
        let mut lines = Vec::new();
        let mut total = 0u64;
        let mut lossy = 0usize;
        let sink = Bytes(|number, bytes| {
            total += 1;
            if lines.len() < self.cap {
                let text = String::from_utf8_lossy(bytes);
                lossy += usize::from(matches!(text, std::borrow::Cow::Owned(_)));
                lines.push((number, cut_line(text.trim_end_matches(['\n', '\r']), self.line_chars)));
            }
            Ok(true)
        });
        // Opened beneath the root handle: a folder swapped for a symlink during the walk is not
        // followed outside (the walker lists by path; the content is read only here).
        let root = self.ctx.workspace.root();
        let file = self
            .ctx
            .workspace
            .open_beneath(&root.join(relative), OFlags::RDONLY | OFlags::NONBLOCK, Mode::empty())
            .ok()?;
        let file = std::fs::File::from(file);
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            return None;
        }
        (searcher.search_file(&self.matcher, &file, sink).is_ok() && total > 0).then(|| FileMatches {
            path: relative.to_string_lossy().into_owned(),
            lines,
            total,
            lossy,
        })
    }

    /// Every file the walker yields: the cold search.
    fn walk(&self) -> Vec<FileMatches> {
        let root = self.ctx.workspace.root();
        let found: Mutex<Vec<FileMatches>> = Mutex::new(Vec::new());
        let mut walker = search_index::walker(root);
        if let Some(hidden) = self.hidden.clone() {
            // Not into a hidden folder: nothing below it is searched.
            let root = root.to_path_buf();
            walker.filter_entry(move |entry| {
                let relative = entry.path().strip_prefix(&root).unwrap_or(entry.path());
                relative.as_os_str().is_empty() || !hidden.hides_entry(&relative.to_string_lossy())
            });
        }
        walker.build_parallel().run(|| {
            let found = &found;
            let mut searcher = Self::searcher();
            Box::new(move |entry| {
                let Ok(entry) = entry else { return WalkState::Continue };
                if !entry.file_type().is_some_and(|t| t.is_file()) {
                    return WalkState::Continue;
                }
                let relative = entry.path().strip_prefix(root).unwrap_or(entry.path());
                if let Some(matches) = self.file(&mut searcher, relative) {
                    if let Ok(mut found) = found.lock() {
                        found.push(matches);
                    }
                }
                WalkState::Continue
            })
        });
        found.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The index's candidate files only: the warm search, on as many threads as the walker uses.
    fn candidates(&self, candidates: &[Arc<Path>]) -> Vec<FileMatches> {
        let next = AtomicUsize::new(0);
        let work = || {
            let mut searcher = Self::searcher();
            let mut found = Vec::new();
            while let Some(relative) = candidates.get(next.fetch_add(1, Ordering::Relaxed)) {
                found.extend(self.file(&mut searcher, relative));
            }
            found
        };
        // A thread is worth starting for a few dozen files, not for a handful.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(candidates.len() / 32 + 1);
        std::thread::scope(|scope| {
            let helpers: Vec<_> = (1..threads).map(|_| scope.spawn(work)).collect();
            let mut found = work();
            for helper in helpers {
                // A helper's panic is the call's, as in the cold walk: never an answer missing
                // the files it held.
                found.extend(helper.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
            }
            found
        })
    }
}

/// The most matches `grep-matches` gives: a program's data need not fit a model's result (its
/// `total` counts them all).
const MAX_MATCH_VALUES: usize = 10_000;

/// Every file with matches, sorted by path, each holding at most `cap` lines. From the host's
/// index when it is ready (the same files, read the same way); otherwise from a walk of the tree,
/// after which the index starts building.
fn search(ctx: &ToolCtx, pattern: &str, glob: Option<&str>, cap: usize) -> Result<Vec<FileMatches>> {
    let matcher = RegexMatcherBuilder::new()
        .line_terminator(Some(b'\n'))
        .build(pattern)
        .map_err(|e| Error::tool_failed(pattern_error(pattern, &e)))?;
    // Not ripgrep's overrides: an override whitelist beats .gitignore and the hidden-file rule.
    let filter = glob.filter(|g| !g.is_empty()).map(FileFilter::new).transpose()?;
    let hidden = ctx.hidden.for_tool("index-grep", None);
    let search = Search { ctx, matcher, filter, hidden, cap, line_chars: ctx.limits.line_chars.min(500) };
    let mut found = match ctx.search.candidates(&ctx.workspace, pattern) {
        Some(candidates) => search.candidates(&candidates),
        None => {
            let found = search.walk();
            ctx.search.start(&ctx.workspace);
            found
        }
    };
    found.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(found)
}

fn index_grep(ctx: &ToolCtx, pattern: String, glob: Option<String>) -> Result<String> {
    let cap = ctx.limits.grep_matches;
    let found = search(ctx, &pattern, glob.as_deref(), cap)?;
    let budget = ctx.limits.output_budget();
    let total: u64 = found.iter().map(|f| f.total).sum();
    let mut out = String::new();
    let mut shown = 0usize;
    'files: for FileMatches { path, lines, .. } in &found {
        for (number, text) in lines {
            let line = format!("{path}:{number}:{text}\n");
            if shown == cap || out.len() + line.len() > budget {
                break 'files;
            }
            out.push_str(&line);
            shown += 1;
        }
    }
    if total == 0 {
        return Ok("no matches\n".to_string());
    }
    if total > shown as u64 {
        out.push_str(&format!(
            "... {} matching lines in {} files, first {shown} shown; narrow the pattern or the glob\n",
            thousands(total),
            thousands(found.len() as u64)
        ));
    }
    let lossy: usize = found.iter().map(|f| f.lossy).sum();
    if lossy > 0 {
        out.push_str(&format!(
            "[note: {lossy} matching line{} held bytes that are not UTF-8, shown as \u{fffd}]\n",
            if lossy == 1 { "" } else { "s" }
        ));
    }
    Ok(out)
}

/// `(grep-matches pattern [glob])` for Scheme code: a hash map with `"matches"`, a list of hash
/// maps with `"path"`, `"line"` and `"text"` (at most [`MAX_MATCH_VALUES`], sorted by path), and
/// `"total"`, the number of matching lines there were. Guarded as `index-grep`.
pub(crate) fn matches_value(ctx: &ToolCtx, args: &[SteelVal]) -> Result<SteelVal> {
    let (pattern, glob) = match args {
        [SteelVal::StringV(p)] => (p.as_str(), None),
        [SteelVal::StringV(p), SteelVal::StringV(g)] => (p.as_str(), Some(g.as_str())),
        _ => return Err(Error::tool_failed("grep-matches: expected a pattern string and an optional glob string")),
    };
    let found = search(ctx, pattern, glob, MAX_MATCH_VALUES)?;
    let total: u64 = found.iter().map(|f| f.total).sum();
    let matches: Vec<serde_json::Value> = found
        .iter()
        .flat_map(|f| f.lines.iter().map(|(line, text)| json!({"path": f.path, "line": line, "text": text})))
        .take(MAX_MATCH_VALUES)
        .collect();
    crate::value::json_to_scheme(&json!({"matches": matches, "total": total}), crate::param::ParamType::Any)
        .map_err(|_| Error::tool_failed("grep-matches: the result could not be built"))
}
