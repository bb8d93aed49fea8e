//! `fs-edit path old new [replace-all]`: exact text replacement with errors a model can act on
//! (the closest lines when nothing matches, the count and line numbers when several do), an atomic
//! write, and a unified diff as its confirmation preview.

use std::path::PathBuf;

use super::file::{read_text, refuse_folder_syntax, unified_diff, write_atomically, MAX_FILE_BYTES};
use crate::context::ToolCtx;
use crate::error::{Error, Result};
use crate::registry::Primitive;
use crate::typed::Tool;

/// How many candidate lines a no-match error shows.
const CLOSEST_SHOWN: usize = 3;
/// How many line numbers a several-matches error lists.
const LINES_SHOWN: usize = 20;

pub fn tool() -> Result<Primitive> {
    Tool::new(
        "fs-edit",
        "Replace exact text in a file. `old` must match the file's text exactly, whitespace \
         included, and only once unless replace-all is true; include surrounding lines to make it \
         unique. The file is written atomically.",
    )
    .param("path", "File to edit, relative to the workspace root")
    .param("old", "The exact text to replace")
    .param("new", "The text to put in its place")
    .param("replace-all", "Replace every occurrence; when left out or false, old must occur exactly once")
    .destructive()
    .preview(preview)
    .build(fs_edit)
}

fn fs_edit(ctx: &ToolCtx, path: String, old: String, new: String, replace_all: Option<bool>) -> Result<String> {
    let (real, text) = read_for_edit(ctx, &path)?;
    let updated = replace(&path, &text, &old, &new, replace_all.unwrap_or(false))?;
    write_atomically(&ctx.workspace, &real, &path, updated.text.as_bytes())?;
    Ok(match updated.count {
        1 => format!("replaced 1 occurrence in {path}"),
        n => format!("replaced {n} occurrences in {path}"),
    })
}

struct Replaced {
    text: String,
    count: usize,
}

fn replace(path: &str, text: &str, old: &str, new: &str, all: bool) -> Result<Replaced> {
    if old.is_empty() {
        return Err(Error::tool_failed("old must not be empty; to write a whole file use fs-write"));
    }
    let starts: Vec<usize> = text.match_indices(old).map(|(i, _)| i).collect();
    // The new size is known before the new text is built: a replacement that would pass the cap is
    // refused without allocating it.
    let count = if all { starts.len() } else { starts.len().min(1) };
    let new_len = (text.len() - count * old.len()).checked_add(count.saturating_mul(new.len()));
    if count > 0 && new_len.is_none_or(|len| len > MAX_FILE_BYTES) && (all || starts.len() == 1) {
        return Err(Error::tool_failed(format!(
            "replacing {count} occurrence{} would make {path} {} bytes, more than the {MAX_FILE_BYTES} bytes a \
             file tool writes; nothing was changed",
            if count == 1 { "" } else { "s" },
            new_len.map_or_else(|| "too many".to_string(), |l| l.to_string())
        )));
    }
    match starts.len() {
        0 => Err(Error::tool_failed(no_match_message(path, text, old))),
        1 => Ok(Replaced { text: text.replacen(old, new, 1), count: 1 }),
        n if all => Ok(Replaced { text: text.replace(old, new), count: n }),
        n => {
            // Line numbers counted in one pass, and only the first few listed.
            let mut lines = Vec::new();
            let (mut line, mut from) = (1usize, 0usize);
            for &i in starts.iter().take(LINES_SHOWN) {
                line += text[from..i].matches('\n').count();
                from = i;
                lines.push(line.to_string());
            }
            if n > LINES_SHOWN {
                lines.push("...".to_string());
            }
            Err(Error::tool_failed(format!(
                "old occurs {n} times in {path} (at lines {}); include more surrounding text to \
                 pick one, or set replace-all to true to replace them all",
                lines.join(", ")
            )))
        }
    }
}

fn no_match_message(path: &str, text: &str, old: &str) -> String {
    let probe = old.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or(old.trim());
    let mut scored: Vec<(f32, usize, &str)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| (similar::TextDiff::from_chars(probe, l.trim()).ratio(), i + 1, l))
        .filter(|(score, _, _)| *score > 0.3)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut message = format!("old was not found in {path}");
    if scored.is_empty() {
        message.push_str("; no line resembles it. Read the file with fs-read and copy the text exactly.");
    } else {
        message.push_str(". The closest lines are:\n");
        for (_, number, line) in scored.iter().take(CLOSEST_SHOWN) {
            message.push_str(&format!("{number}\t{}\n", super::text::cut_line(line, 200)));
        }
        message.push_str("Copy the text exactly, whitespace included.");
    }
    message
}

/// The confirmation preview: the unified diff the edit would make. An edit that would fail shows
/// the same error the call would give.
fn preview(ctx: &ToolCtx, path: String, old: String, new: String, replace_all: Option<bool>) -> Result<String> {
    let (_, text) = read_for_edit(ctx, &path)?;
    let updated = replace(&path, &text, &old, &new, replace_all.unwrap_or(false))?;
    Ok(unified_diff(&path, &text, &updated.text))
}

/// Resolves `path` and reads the regular text file it names.
fn read_for_edit(ctx: &ToolCtx, path: &str) -> Result<(PathBuf, String)> {
    refuse_folder_syntax(path, "fs-edit")?;
    let real = ctx.workspace.resolve(path)?;
    let text = read_text(&ctx.workspace, &real, path, || format!("no such file: {path}; use fs-write to create it"))?;
    Ok((real, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_matches_name_count_and_lines() {
        let err = replace("f", "a\nx\nb\nx\n", "x", "y", false).err().unwrap();
        assert!(err.message().contains("occurs 2 times in f (at lines 2, 4)"), "{err}");
        let done = replace("f", "a\nx\nb\nx\n", "x", "y", true).ok().unwrap();
        assert_eq!((done.text.as_str(), done.count), ("a\ny\nb\ny\n", 2));
    }

    #[test]
    fn a_replace_all_that_would_pass_the_file_cap_is_refused_before_it_is_built() {
        let text = "x".repeat(1 << 20);
        let huge = "y".repeat(1 << 20);
        let err = replace("f", &text, "x", &huge, true).err().unwrap();
        assert!(
            err.message().contains("more than the 67108864 bytes") && err.message().contains("nothing was changed"),
            "{err}"
        );
        let err = replace("f", &text, "x", "y", false).err().unwrap();
        assert!(err.message().contains("occurs 1048576 times") && err.message().ends_with("replace them all"), "{err}");
        assert!(err.message().len() < 400, "the error lists a few lines only: {}", err.message().len());
    }

    #[test]
    fn no_match_shows_the_closest_lines() {
        let err =
            replace("f", "fn main() {\n    println!(\"hi\");\n}\n", "println!(\"hello\");", "", false).err().unwrap();
        assert!(err.message().contains("2\t    println!(\"hi\");"), "{err}");
    }

    #[test]
    fn diff_preview_shows_the_change() {
        let diff = unified_diff("f.txt", "a\nb\n", "a\nc\n");
        assert!(diff.contains("-b\n+c\n") && diff.contains("a/f.txt"), "{diff}");
    }
}
