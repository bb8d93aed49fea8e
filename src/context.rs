//! What a tool handler is given besides its arguments: the workspace it works in and the limits
//! that bound its output.

use crate::workspace::Workspace;

/// The context every handler receives. Cheap to share: the host keeps one per engine.
#[derive(Debug, Clone)]
pub struct ToolCtx {
    /// The folder tools work in; every path goes through its boundary checks.
    pub workspace: Workspace,
    /// Output caps and time limits.
    pub limits: Limits,
}

/// Caps on what tools read and return, and how long they may run.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Lines `fs-read` returns when no count is given.
    pub read_lines: usize,
    /// Bytes `fs-read` returns at most, whatever `count` asks for: it stops at the last whole line
    /// that fits (always showing at least one line) and ends with its note giving the next start.
    pub read_bytes: usize,
    /// Characters of one line `fs-read` shows before cutting it with a marker.
    pub line_chars: usize,
    /// Result lines `index-grep` returns before a closing note.
    pub grep_matches: usize,
    /// Entries `fs-list` returns before a closing note.
    pub list_entries: usize,
    /// Bytes of stdout and of stderr `shell-exec` keeps, each.
    pub shell_output_bytes: usize,
    /// `shell-exec`'s timeout when none is given, in seconds.
    pub shell_timeout_s: u64,
    /// How long one call of a Scheme tool may run before it is stopped.
    pub scheme_call: std::time::Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            read_lines: 2000,
            read_bytes: 256 * 1024,
            line_chars: 2000,
            grep_matches: 200,
            list_entries: 1000,
            shell_output_bytes: 30_000,
            shell_timeout_s: 120,
            scheme_call: std::time::Duration::from_secs(30),
        }
    }
}
