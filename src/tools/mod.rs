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
//! Shared by them: `file.rs` (opening only regular files, atomic writes, diffs) and `text.rs`
//! (numbers, long lines). Descriptions are rendered from the host's [`Limits`], so a model reads the
//! limits that apply.
//!
//! Scheme code also gets some tools' data as values rather than as the text a model reads
//! ([`value_procedures`]): `file-lines`, `shell-run`, `grep-matches` and `dir-entries`, each guarded
//! as the tool it reads through.

pub(crate) mod file;
mod fs_edit;
mod fs_list;
mod fs_read;
mod fs_write;
mod index_grep;
mod shell_exec;
pub(crate) mod text;

use steel::rvals::SteelVal;

use crate::context::{Limits, ToolCtx};
use crate::error::Result;
use crate::registry::Primitive;
use crate::sandbox::Sandbox;

/// Every built-in tool, in catalogue order, described with `limits` and `sandbox`.
pub fn builtin_tools(limits: &Limits, sandbox: &Sandbox) -> Result<Vec<Primitive>> {
    Ok(vec![
        fs_read::tool(limits)?,
        fs_write::tool()?,
        fs_edit::tool()?,
        fs_list::tool()?,
        index_grep::tool(limits)?,
        shell_exec::tool(limits, sandbox)?,
    ])
}

/// A Scheme procedure that gives a tool's data as a value. It takes the same arguments as the tool
/// it is guarded as, and is checked and guarded exactly like a call of that tool.
pub(crate) struct ValueProcedure {
    /// The procedure's Scheme name.
    pub name: &'static str,
    /// The tool whose signature and guard rules apply.
    pub guarded_as: &'static str,
    /// The work, on checked arguments.
    pub run: fn(&ToolCtx, &[SteelVal]) -> Result<SteelVal>,
}

/// The value procedures scripts get (see the module docs).
pub(crate) const VALUE_PROCEDURES: &[ValueProcedure] = &[
    ValueProcedure { name: "file-lines", guarded_as: "fs-read", run: fs_read::lines_value },
    ValueProcedure { name: "shell-run", guarded_as: "shell-exec", run: shell_exec::run_value },
    ValueProcedure { name: "grep-matches", guarded_as: "index-grep", run: index_grep::matches_value },
    ValueProcedure { name: "dir-entries", guarded_as: "fs-list", run: fs_list::entries_value },
];
