//! `fs-read path [start] [count]`: numbered lines of a text file, streamed, so a range near the
//! top of a huge file costs what it costs on a small one.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};

use steel::rvals::SteelVal;

use super::file::{open_regular, read_text, refuse_folder_syntax};
use super::text::{count_lines_within, cut_line_beyond, read_line_capped, skip_lines, thousands};
use crate::context::{Limits, ToolCtx};
use crate::error::{Error, Result};
use crate::registry::Primitive;
use crate::typed::Tool;

/// How far past the range fs-read counts lines for its closing note; beyond this it reports bytes.
const COUNT_BUDGET: u64 = 1 << 20;

pub fn tool(limits: &Limits) -> Result<Primitive> {
    Tool::new(
        "fs-read",
        format!(
            "Read a text file's lines, each prefixed with its line number. Reads `count` lines from \
             line `start`, stopping early at a line boundary once the output would pass {} \
             characters; ends with a note when more lines remain, giving the next start.",
            thousands(limits.output_budget() as u64)
        ),
    )
    .param("path", "File to read, relative to the workspace root")
    .param("start", "First line to read, 1-based; line 1 when left out or 0")
    .param(
        "count",
        format!("How many lines to read; all remaining lines up to {} when left out or 0", limits.read_lines),
    )
    .read_only()
    .build(fs_read)
}

/// `(file-lines path [start] [count])` for Scheme code: the file's lines as a list of strings,
/// without numbers or newlines (all of them when start and count are left out or 0). Guarded as
/// `fs-read`.
pub(crate) fn lines_value(ctx: &ToolCtx, args: &[SteelVal]) -> Result<SteelVal> {
    let (path, start, count) = match args {
        [SteelVal::StringV(path), rest @ ..] => {
            let int = |i: usize| match rest.get(i) {
                Some(SteelVal::IntV(n)) => *n as i64,
                _ => 0,
            };
            (path.as_str().to_string(), int(0), int(1))
        }
        _ => return Err(Error::tool_failed("file-lines: expected a path string")),
    };
    if start < 0 || count < 0 {
        return Err(Error::tool_failed(format!(
            "file-lines: start and count must be 0 or more, got {start} and {count}"
        )));
    }
    refuse_folder_syntax(&path, "file-lines")?;
    let real = ctx.workspace.resolve(&path)?;
    let text = read_text(&ctx.workspace, &real, &path, || format!("no such file: {path}"))?;
    let skip = (start.max(1) - 1) as usize;
    let take = if count == 0 { usize::MAX } else { count as usize };
    Ok(SteelVal::ListV(text.lines().skip(skip).take(take).map(|l| SteelVal::StringV(l.into())).collect()))
}

fn fs_read(ctx: &ToolCtx, path: String, start: Option<i64>, count: Option<i64>) -> Result<String> {
    let start = match start.unwrap_or(0) {
        0 => 1,
        n if n < 0 => {
            return Err(Error::tool_failed(format!("start must be 1 or more (0 or left out: line 1), got {n}")))
        }
        n => n as u64,
    };
    let count = match count.unwrap_or(0) {
        0 => ctx.limits.read_lines as u64,
        n if n < 0 => {
            return Err(Error::tool_failed(format!(
                "count must be 1 or more (0 or left out: up to {} lines), got {n}",
                ctx.limits.read_lines
            )))
        }
        n => n as u64,
    };
    refuse_folder_syntax(&path, "fs-read")?;
    let real = ctx.workspace.resolve(&path)?;
    let (mut file, meta) = open_regular(&ctx.workspace, &real, &path, || format!("no such file: {path}"))?;
    let mut head = [0u8; 8192];
    let n = file.read(&mut head).map_err(|e| Error::tool_failed(format!("cannot read {path}: {e}")))?;
    if head[..n].contains(&0) {
        return Err(Error::tool_failed(format!(
            "{path} is a binary file ({} bytes); fs-read shows text files only",
            thousands(meta.len())
        )));
    }
    file.seek(SeekFrom::Start(0)).map_err(|e| Error::tool_failed(format!("cannot read {path}: {e}")))?;
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    let io_err = |e: std::io::Error| Error::tool_failed(format!("cannot read {path}: {e}"));

    let mut line = Vec::new();
    // Skip to the start without keeping the skipped lines.
    let mut number = skip_lines(&mut reader, start - 1).map_err(io_err)?;
    if number + 1 < start {
        return Err(Error::tool_failed(format!(
            "start {start} is past the end of {path}, which has {} line{}",
            thousands(number),
            if number == 1 { "" } else { "s" }
        )));
    }
    let end = start.saturating_add(count - 1);
    let mut shown_lines = Vec::new();
    // Bytes of the shown lines' text, their tabs and newlines; the numbers are added below.
    let mut text_bytes = 0usize;
    // A line that was read but left out because it would have passed the byte cap.
    let mut held_back = false;
    // The first shown line holding bytes that are not UTF-8 (shown as U+FFFD, with a note).
    let mut not_utf8: Option<u64> = None;
    while number < end {
        let (more, skipped) = read_line_capped(&mut reader, ctx.limits.line_chars * 4, &mut line).map_err(io_err)?;
        if !more {
            break;
        }
        let decoded = String::from_utf8_lossy(&line);
        if matches!(decoded, std::borrow::Cow::Owned(_)) && not_utf8.is_none() {
            not_utf8 = Some(number + 1);
        }
        let text = cut_line_beyond(&decoded, ctx.limits.line_chars, skipped);
        // Every number is padded to the width of the last one, so this is the output's exact size.
        let width = (number + 1).to_string().len();
        let size = text_bytes + text.len() + 2 + (shown_lines.len() + 1) * width;
        if size > ctx.limits.output_budget() && !shown_lines.is_empty() {
            held_back = true;
            break;
        }
        number += 1;
        text_bytes += text.len() + 2;
        shown_lines.push((number, text));
    }
    // Numbers are right-aligned to the widest one shown, so the text column lines up.
    let width = number.to_string().len();
    let mut out = String::new();
    for (n, text) in &shown_lines {
        out.push_str(&format!("{n:>width$}\t{text}\n"));
    }
    if number < start {
        return Ok(format!("({path} is empty)\n"));
    }
    if let Some(line) = not_utf8 {
        out.push_str(&format!(
            "(line {line} and maybe others hold bytes that are not UTF-8, shown as \u{fffd}; fs-edit cannot \
             match them)\n"
        ));
    }
    if !held_back && reader.fill_buf().map_err(io_err)?.is_empty() {
        return Ok(out);
    }
    let next = number + 1;
    match count_lines_within(&mut reader, COUNT_BUDGET).map_err(io_err)? {
        Some((remaining, _)) => {
            let remaining = remaining + u64::from(held_back);
            out.push_str(&format!(
                "... {} more line{}; next start {next}\n",
                thousands(remaining),
                if remaining == 1 { "" } else { "s" }
            ));
        }
        None => out.push_str(&format!(
            "... more lines follow (the file has {} bytes); next start {next}\n",
            thousands(meta.len())
        )),
    }
    Ok(out)
}
