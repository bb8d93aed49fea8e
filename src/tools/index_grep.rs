//! `index-grep pattern [glob]`: a regex search of the workspace with ripgrep's own crates (the
//! `.gitignore`-aware parallel walker, glob overrides with ripgrep's `-g` meaning, the regex matcher
//! and searcher), printed as sorted `path:line:text` lines with a cap.

use std::sync::Mutex;

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{sinks::Lossy, BinaryDetection, SearcherBuilder};
use ignore::{overrides::OverrideBuilder, WalkBuilder, WalkState};

use super::text::{cut_line, thousands};
use crate::context::ToolCtx;
use crate::error::{Error, Result};
use crate::registry::Primitive;
use crate::typed::Tool;

pub fn tool() -> Result<Primitive> {
    Tool::new(
        "index-grep",
        "Search the workspace's files for a regular expression (Rust regex syntax), leaving out \
         what .gitignore excludes, hidden files and binary files. Prints path:line:text for each \
         matching line, sorted by path, capped at 200 lines with a note giving the total.",
    )
    .param("pattern", "Regular expression to search for, e.g. fn\\s+main")
    .param("glob", "Only search files matching this glob, as ripgrep's -g (e.g. *.rs or src/**/*.ts); every file when left out or empty")
    .read_only()
    .build(index_grep)
}

/// One file's matching lines (at most the cap) and how many there were in all.
struct FileMatches {
    path: String,
    lines: Vec<(u64, String)>,
    total: u64,
}

fn index_grep(ctx: &ToolCtx, pattern: String, glob: Option<String>) -> Result<String> {
    let matcher = RegexMatcherBuilder::new()
        .line_terminator(Some(b'\n'))
        .build(&pattern)
        .map_err(|e| Error::tool_failed(format!("invalid pattern {pattern:?}: {e}")))?;
    let root = ctx.workspace.root();
    let mut walk = WalkBuilder::new(root);
    walk.require_git(false).follow_links(false);
    if let Some(glob) = glob.filter(|g| !g.is_empty()) {
        let mut overrides = OverrideBuilder::new(root);
        overrides.add(&glob).map_err(|e| Error::tool_failed(format!("invalid glob {glob:?}: {e}")))?;
        walk.overrides(overrides.build().map_err(|e| Error::tool_failed(format!("invalid glob {glob:?}: {e}")))?);
    }
    let cap = ctx.limits.grep_matches;
    let line_chars = ctx.limits.line_chars.min(500);
    // Each file keeps at most `cap` lines: no more can ever be shown.
    let found: Mutex<Vec<FileMatches>> = Mutex::new(Vec::new());
    walk.build_parallel().run(|| {
        let matcher = matcher.clone();
        let found = &found;
        let mut searcher = SearcherBuilder::new().binary_detection(BinaryDetection::quit(0)).line_number(true).build();
        Box::new(move |entry| {
            let Ok(entry) = entry else { return WalkState::Continue };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return WalkState::Continue;
            }
            let mut lines = Vec::new();
            let mut total = 0u64;
            let sink = Lossy(|number, text| {
                total += 1;
                if lines.len() < cap {
                    lines.push((number, cut_line(text.trim_end_matches(['\n', '\r']), line_chars)));
                }
                Ok(true)
            });
            if searcher.search_path(&matcher, entry.path(), sink).is_ok() && total > 0 {
                let rel = entry.path().strip_prefix(root).unwrap_or(entry.path()).to_string_lossy().into_owned();
                if let Ok(mut found) = found.lock() {
                    found.push(FileMatches { path: rel, lines, total });
                }
            }
            WalkState::Continue
        })
    });
    let mut found = found.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
    found.sort_by(|a, b| a.path.cmp(&b.path));
    let total: u64 = found.iter().map(|f| f.total).sum();
    let mut out = String::new();
    let mut shown = 0usize;
    'files: for FileMatches { path, lines, .. } in &found {
        for (number, text) in lines {
            if shown == cap {
                break 'files;
            }
            out.push_str(&format!("{path}:{number}:{text}\n"));
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
    Ok(out)
}
