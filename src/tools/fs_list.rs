//! `fs-list [path] [depth]`: the tree below a folder, respecting `.gitignore` (ripgrep's walker).

use crate::context::ToolCtx;
use crate::error::{Error, Result};
use crate::registry::Primitive;
use crate::typed::Tool;

const DEFAULT_DEPTH: usize = 3;

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

fn fs_list(ctx: &ToolCtx, path: Option<String>, depth: Option<i64>) -> Result<String> {
    let path = path.filter(|p| !p.is_empty()).unwrap_or_else(|| ".".to_string());
    let depth = match depth.unwrap_or(0) {
        0 => DEFAULT_DEPTH,
        n if n < 0 => return Err(Error::tool_failed(format!("depth must be 1 or more, got {n}"))),
        n => n as usize,
    };
    let real = ctx.workspace.resolve(&path)?;
    if !real.is_dir() {
        return Err(Error::tool_failed(match std::fs::metadata(&real) {
            Ok(meta) if meta.is_file() => format!("{path} is a file; use fs-read to read it"),
            Ok(_) => format!("{path} is not a folder"),
            Err(_) => format!("no such folder: {path}"),
        }));
    }
    let walker = ignore::WalkBuilder::new(&real)
        .max_depth(Some(depth))
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    let mut out = String::new();
    let mut shown = 0usize;
    let mut more = 0usize;
    for entry in walker {
        let Ok(entry) = entry else { continue };
        if entry.depth() == 0 {
            continue;
        }
        let name = entry.file_name().to_string_lossy();
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        let line = format!("{}{name}{}\n", "  ".repeat(entry.depth() - 1), if is_dir { "/" } else { "" });
        if shown >= ctx.limits.list_entries || out.len() + line.len() > ctx.limits.output_budget() {
            more += 1;
            continue;
        }
        out.push_str(&line);
        shown += 1;
    }
    if shown == 0 {
        out.push_str(&format!("({} is empty)\n", ctx.workspace.display(&real)));
    }
    if more > 0 {
        out.push_str(&format!("... {more} more entries; list a subfolder or lower depth\n"));
    }
    Ok(out)
}
