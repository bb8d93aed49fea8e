//! `toolhost stats`: what session logs say, counted. It reads the logs `toolhost agent --log`
//! writes (`agent::log`, feature `agent`) as streams, folds every line into counts, and reports them as
//! text tables or as one JSON object of a stable shape. It owns reading logs for counting and the
//! report; the log's writer and its types stay in `agent`.
//!
//! ```
//! use toolhost::stats;
//! let dir = tempfile::tempdir().unwrap();
//! let log = dir.path().join("s.jsonl");
//! std::fs::write(&log, concat!(
//!     r#"{"type":"session","version":2,"toolhost":"0.1.0","dialect":"native","strict":false,"max_turns":20,"task":"t"}"#, "\n",
//!     r#"{"type":"call","turn":1,"index":1,"id":"c","request":{"tool":"fs-read","arguments":"{}"},"#,
//!     r#""record":{"tool":"fs-read","arguments":{"path":"a","limit":5},"notes":[],"ok":false,"#,
//!     r#""error":{"kind":"unknown_argument","message":"...","tool":"fs-read","parameter":"limit"},"elapsed_ms":0.2}}"#, "\n",
//!     r#"{"type":"end","reason":"answ"#,
//! )).unwrap();
//! let report = stats::stats(&[dir.path()]);
//! assert_eq!(report.sessions.count, 1);
//! assert_eq!(report.refused.unknown_argument.names[0].name, "limit");
//! assert_eq!(report.inputs.skipped["truncated"], 1, "the last line was cut short");
//! ```
//!
//! # What is counted
//!
//! - **Sessions**: a `session` line starts one (lines before any start one too); its turns are
//!   the `end` line's, else the highest turn seen; its calls are its `call` lines. It ended as its
//!   `end` line says (`answered`, `max_turns`, `interrupted`, `error`), or `unfinished` without one.
//! - **Calls by tool**: every `call` line, by the tool its record names, with errors by kind and
//!   the median and 95th percentile of `elapsed_ms` (to three significant digits).
//! - **Refused shapes**, each refused call once: `unknown_argument`, `missing_argument` and
//!   `wrong_type` errors by the parameter they name; `unknown_tool` errors by the tool name
//!   (P-format tags naming a tool that does not exist included); `bad_arguments` by the error's
//!   `reason` ([`crate::error::Reason::CALL_PATH`]); and in P-format sessions, tags refused before
//!   the host saw them (the call line has no `request`) by their `reason`
//!   ([`crate::error::Reason::PFORMAT`]). Errors without a reason (log format 1) count as
//!   `unclassified`; a reason this toolhost does not know (a newer log's) is counted by its name.
//! - **Tidy repairs** by kind, from the record's `repairs`. A format-1 record has none: its
//!   repairs are read from what its arguments' strings became in `tidied` (a string holding an
//!   object, a number, a boolean, a list or an object; a null gone), and a note whose change
//!   cannot be seen counts as `unclassified`. Nothing is read from a note's words.
//! - **Guard**: `deny` decisions by the rule that decided (or the default action), and `denied`
//!   errors the guard allowed (the workspace boundary); `confirm` decisions by who answered and
//!   how (`nobody` answers no).
//! - **Shell reads**: every `shell-exec` call's command (its tidied arguments' `cmd`) matched
//!   against the patterns of [`shell_reads::PATTERNS`], each command line at most once per
//!   pattern, beside the `fs-read`, `index-grep` and `fs-list` calls of the same logs. Calls are
//!   counted whatever their outcome: they show what the model reached for.
//! - **Code mode**: a record with `nested` is a program (see below).
//!
//! Lines that do not read are skipped and counted by [`line::Skip`]: a last line without its
//! newline that does not read is `truncated` (the common case: a session killed while writing);
//! `not_utf8`, `not_json`, `unknown_type` (an entry of another format) and `malformed` (an entry
//! without what its type must have). An input that cannot be opened is listed; the rest is read.
//! Memory stays flat however many logs are read: each is streamed a line at a time, and the
//! counts are bounded (histograms, names counted once, three examples per pattern).
//!
//! # What the log must hold for usage and code mode
//!
//! Token usage and code mode are counted where the log has them, in these shapes (the agent loop
//! writes them when it has them; older logs simply have none):
//!
//! - **Usage**: a `reply` line has `"usage": {"input_tokens": N, "output_tokens": N,
//!   "cached_tokens": N}`: the turn's input tokens (those read from a cache included), output
//!   tokens, and of the input those read from the provider's cache (left out when the API does
//!   not say). Absent when the API gave no usage. A session's tokens are the sum over its replies.
//!
//!   ```json
//!   {"type":"reply","turn":3,"text":null,"tool_calls":[],"usage":{"input_tokens":5120,"output_tokens":212,"cached_tokens":4096}}
//!   ```
//! - **Code mode**: the record of a call of the program tool has `"nested": [RECORD, ...]`: one call
//!   record for each tool call the program made, in order, in the shape of every call record
//!   (`tool`, `arguments` as an object by parameter name, `decision`, `ok`, `result` or `error`
//!   with its kind, `elapsed_ms`; a nested program's record has its own `nested`). It is present,
//!   perhaps empty, on a program's record, and on no other. The program's own error (a syntax
//!   error, `timeout`, `crashed`) is the record's `error`.
//!
//!   ```json
//!   {"type":"call","turn":2,"index":1,"id":"c1","request":{"tool":"scheme","arguments":"{\"code\":\"(fs-read \\\"a.txt\\\")\"}"},
//!    "record":{"tool":"scheme","arguments":{"code":"(fs-read \"a.txt\")"},"notes":[],"decision":{"action":"allow"},
//!     "ok":true,"result":"...","elapsed_ms":3.1,
//!     "nested":[{"tool":"fs-read","arguments":{"path":"a.txt"},"notes":[],"decision":{"action":"allow"},"ok":true,"result":"...","elapsed_ms":0.4}]}}
//!   ```
//!
//!   Programs count as calls of their tool; their nested calls count in the code-mode section and,
//!   as calls the guard judged and commands the shell ran, in the guard and shell-read sections,
//!   but not as calls the model made (calls by tool, refused shapes, tidy repairs).
//!
//! # The JSON report (`--format json`)
//!
//! One object, `version` 1 ([`report::REPORT_VERSION`]); keys are only ever added. Counts of a
//! fixed set of names list every name (0 when not seen); open sets (tools, argument names, rules)
//! are lists or objects ordered by count, most frequent first.
//!
//! ```text
//! {"version": 1,
//!  "inputs": {"logs", "lines", "skipped": {"total", "truncated", "not_utf8", "not_json", "unknown_type", "malformed"},
//!             "unreadable": [{"path", "error"}], "log_versions": {"1": N, "2": N, "unknown": N}},
//!  "sessions": {"count", "turns": {"median", "max"}, "calls": {"median", "max"},
//!               "ended": {"answered", "max_turns", "interrupted", "error", "unfinished", ...}, "errors": {KIND: N},
//!               "tokens": {"sessions", "turns", "input", "output", "cached",
//!                          "input_per_session": {"median", "max"}, "output_per_session": {"median", "max"}}},
//!  "calls": {"total", "errors", "tools": [{"tool", "calls", "errors": {"total", KIND: N}, "time_ms": {"median", "p95"}}]},
//!  "refused": {"total",
//!              "unknown_argument" | "missing_argument" | "wrong_type" | "unknown_tool":
//!                  {"count", "names": [{"name", "count", "tools": {TOOL: N}}]},
//!              "bad_arguments" | "pformat": {"count", "reasons": {REASON: N, ..., "unclassified": N}}},
//!  "tidy": {"total", "kinds": {"arguments_json_string", "json_text_parameter", "numeric_string",
//!                              "boolean_string", "strict_null_dropped", "unclassified"?}},
//!  "guard": {"denied": {"total", "rules": [{"rule", "count"}]},
//!            "confirmations": {"asked", "yes", "no", "by": [{"by", "yes", "no"}]}},
//!  "shell_reads": {"shell_exec_calls", "commands", "unsplittable", "reading",
//!                  "tools": [{"tool": "fs-read" | "index-grep" | "fs-list", "calls", "shell_reads",
//!                             "patterns": [{"pattern", "count", "examples": [...]}]}]},
//!  "code_mode": {"programs", "failed": {"total", KIND: N},
//!                "nested_calls": {"total", "per_program": {"median", "max"}, "tools": {TOOL: N}},
//!                "nested_errors": {"total", KIND: N}}}
//! ```
//!
//! # Modules
//!
//! | module | owns |
//! |---|---|
//! | [`input`] | files, folders and standard input, streamed a line at a time |
//! | [`line`](mod@line) | one line as counted, and why a line is skipped |
//! | [`tally`] | the counts, and what counts as what |
//! | [`shell`] | a shell command line as its simple commands |
//! | [`shell_reads`] | the shell-read patterns (data) and matching them |
//! | [`report`] | the report: its JSON shape and its text tables |
//! | `command` | `toolhost stats` (feature `cli`) |

/// The `toolhost stats` command (feature `cli`).
#[cfg(feature = "cli")]
pub(crate) mod command;
pub mod input;
pub mod line;
pub mod report;
pub mod shell;
pub mod shell_reads;
pub mod tally;

use std::path::Path;

#[cfg(feature = "cli")]
pub(crate) use command::StatsArgs;

/// The newest session log format these counts know (the agent loop's `LOG_VERSION`; stats reads
/// logs in builds without the agent too).
pub const NEWEST_LOG_FORMAT: u32 = 2;

#[cfg(all(test, feature = "agent"))]
mod tests {
    #[test]
    fn stats_knows_the_log_format_the_agent_writes() {
        assert_eq!(super::NEWEST_LOG_FORMAT, crate::agent::log::LOG_VERSION);
    }
}
pub use report::Report;
pub use tally::Tally;

/// Reads every log `paths` name (files, folders searched for `.jsonl` files, `-` for standard
/// input) and reports what they say.
pub fn stats<P: AsRef<Path>>(paths: &[P]) -> Report {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_THREADS));
    Report::new(&input::read_all(&input::sources(paths), threads))
}

/// The most threads logs are read on (reading is bound by parsing, one core per thread).
const MAX_THREADS: usize = 8;
