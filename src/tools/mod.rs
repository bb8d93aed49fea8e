//! The built-in tools (design section 9). Each file holds one tool's whole story: its parameters
//! and description, its handler, and its confirmation preview.
//!
//! | tool | file |
//! |---|---|
//! | `fs-read path [start] [count]` | `fs_read.rs` |
//! | `fs-write path content` | `fs_write.rs` |
//! | `fs-edit path old new [replace-all]` | `fs_edit.rs` |
//! | `fs-list [path] [depth]` | `fs_list.rs` |
//! | `index-grep pattern [glob]` | `index_grep.rs` |
//! | `shell-exec cmd [timeout-s]` | `shell_exec.rs` |
//!
//! Shared by them: `file.rs` (opening only regular files) and `text.rs` (numbers, long lines).

mod file;
mod fs_edit;
mod fs_list;
mod fs_read;
mod fs_write;
mod index_grep;
mod shell_exec;
mod text;

use crate::error::Result;
use crate::registry::{Primitive, Registry};

/// Every built-in tool, in catalogue order.
pub fn builtin_tools() -> Result<Vec<Primitive>> {
    Ok(vec![
        fs_read::tool()?,
        fs_write::tool()?,
        fs_edit::tool()?,
        fs_list::tool()?,
        index_grep::tool()?,
        shell_exec::tool()?,
    ])
}

/// Registers every built-in tool.
pub fn register_builtin_tools(registry: &mut Registry) -> Result<()> {
    for tool in builtin_tools()? {
        registry.register(tool)?;
    }
    Ok(())
}
