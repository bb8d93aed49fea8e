//! `fs-write path content`: creates or replaces a file atomically (a temporary file beside it,
//! renamed over it), creating parent folders.

use super::file::{check_new_size, existing_regular, read_bytes, refuse_folder_syntax, unified_diff, write_atomically};
use crate::context::ToolCtx;
use crate::error::Result;
use crate::registry::Primitive;
use crate::typed::Tool;

pub fn tool() -> Result<Primitive> {
    Tool::new(
        "fs-write",
        "Create a file, or replace its whole content, atomically; parent folders are created. \
         Use fs-edit to change part of an existing file.",
    )
    .param("path", "File to write, relative to the workspace root")
    .param("content", "The complete new content of the file")
    .destructive()
    .preview(preview)
    .build(fs_write)
}

fn fs_write(ctx: &ToolCtx, path: String, content: String) -> Result<String> {
    refuse_folder_syntax(&path, "fs-write")?;
    check_new_size(&path, content.len())?;
    let real = ctx.workspace.resolve(&path)?;
    // A folder, FIFO, socket or device is refused rather than replaced.
    let existed = existing_regular(&ctx.workspace, &real, &path)?.is_some();
    write_atomically(&ctx.workspace, &real, &path, content.as_bytes())?;
    let verb = if existed { "replaced" } else { "created" };
    Ok(format!("{verb} {path} ({} bytes)", content.len()))
}

/// The confirmation preview: the unified diff from the current content (none, for a new file; a
/// current content that is not text is named and diffed as empty).
fn preview(ctx: &ToolCtx, path: String, content: String) -> Result<String> {
    refuse_folder_syntax(&path, "fs-write")?;
    check_new_size(&path, content.len())?;
    let real = ctx.workspace.resolve(&path)?;
    let old = match existing_regular(&ctx.workspace, &real, &path)? {
        Some(_) => read_bytes(&ctx.workspace, &real, &path, || format!("no such file: {path}"))?,
        None => Vec::new(),
    };
    Ok(match String::from_utf8(old) {
        Ok(old) => unified_diff(&path, &old, &content),
        Err(e) => format!(
            "(replaces {path}, {} bytes that are not UTF-8 text, shown here as empty)\n{}",
            e.as_bytes().len(),
            unified_diff(&path, "", &content)
        ),
    })
}
