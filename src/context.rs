//! What a tool handler is given besides its arguments: the workspace it works in, the limits that
//! bound its output and its time, the shell sandbox, the flag that says the person wants it
//! stopped, and what the guard's path rules hide from listings and searches.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::sandbox::Sandbox;
use crate::search_index::SearchIndex;
use crate::workspace::Workspace;

/// The context every handler receives. Cheap to share: the host keeps one per engine. More fields
/// may come: build one with [`ToolCtx::new`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ToolCtx {
    /// The folder tools work in; every path goes through its boundary checks.
    pub workspace: Workspace,
    /// Output caps and time limits.
    pub limits: Limits,
    /// Set when the person interrupts (Ctrl-C): a tool that waits (shell-exec) stops at once.
    pub cancel: Cancel,
    /// The workspace's search index, which index-grep keeps warm; clones share it.
    pub search: SearchIndex,
    /// What bounds a `shell-exec` command (`[shell]`).
    pub sandbox: Sandbox,
    /// What the guard's path rules hide from tools that show many paths (`fs-list`, `index-grep`).
    pub hidden: crate::guard_rules::Hidden,
}

impl ToolCtx {
    /// A context on `workspace` under `limits`, with the rest as a host without settings has them:
    /// no interrupt, a search index of its own, the default sandbox, nothing hidden. For calling a
    /// handler outside a host (a test, a bench).
    pub fn new(workspace: Workspace, limits: Limits) -> ToolCtx {
        ToolCtx {
            workspace,
            limits,
            cancel: Cancel::default(),
            search: SearchIndex::default(),
            sandbox: Sandbox::default(),
            hidden: crate::guard_rules::Hidden::default(),
        }
    }
}

/// A flag an interrupt sets and long-running tools watch. Cheap to clone; clones share the flag.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// Asks whatever runs to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether a stop was asked for since the current run began.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Clears the flag as a new run begins, so a late interrupt does not stop the next one.
    pub(crate) fn reset(&self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// Caps on what tools read and return, and how long they may run. The first four are the config's
/// `[limits]` (design section 17); tool descriptions shown to models are rendered from these
/// values, so what a model reads is what applies.
///
/// More limits may come: start from [`Limits::default`] and set the fields you want.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Limits {
    /// How long one call of a Scheme tool may run, nested tool calls included (`scheme_call_s`).
    pub scheme_call: std::time::Duration,
    /// How long one code-mode program may run, every tool call it makes included (`program_s`).
    pub program: std::time::Duration,
    /// `shell-exec`'s timeout when none is given, and the most a call may ask for
    /// (`shell_timeout_s`).
    pub shell_timeout_s: u64,
    /// The most characters of one tool result a model is shown (`output_chars`). Tools that can
    /// stop at a whole line (`fs-read`, `index-grep`, `fs-list`) stop within it and say how to
    /// go on; any longer result is cut by the call path with a note.
    pub output_chars: usize,
    /// Lines `fs-read` returns when no count is given (`read_lines`).
    pub read_lines: usize,
    /// Characters of one line `fs-read` shows before cutting it with a marker.
    pub line_chars: usize,
    /// Result lines `index-grep` returns before a closing note.
    pub grep_matches: usize,
    /// Entries `fs-list` returns before a closing note.
    pub list_entries: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            scheme_call: std::time::Duration::from_secs(30),
            program: std::time::Duration::from_secs(120),
            shell_timeout_s: 120,
            output_chars: 30_000,
            read_lines: 2000,
            line_chars: 2000,
            grep_matches: 200,
            list_entries: 1000,
        }
    }
}

impl Limits {
    /// Bytes of stdout and of stderr `shell-exec` keeps, each: both fit in one result, with room
    /// for the exit code and the headers.
    pub fn shell_stream_bytes(&self) -> usize {
        self.output_chars.saturating_sub(RESULT_HEADROOM) / 2
    }

    /// What a tool that stops at whole lines may put in one result: the cap, less room for its
    /// closing note.
    pub fn output_budget(&self) -> usize {
        self.output_chars.saturating_sub(RESULT_HEADROOM).max(1)
    }
}

/// Room left in a result for a tool's own closing note or headers.
const RESULT_HEADROOM: usize = 200;
