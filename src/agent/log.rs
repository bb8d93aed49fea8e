//! The session log (design section 12): JSON lines, one [`Entry`] each, written as the session goes
//! and each handed to the operating system before the session moves on, so a crash loses nothing
//! that happened before it. It owns the format, writing and reading; `replay` reads it back.
//!
//! # The format
//!
//! Every line is an object whose `type` says what it is:
//! - `session`: the first line: toolhost's version, the dialect, strict mode, the turn limit, the
//!   model (as [`crate::agent::Model::describe`] gives it) and the task; a session that goes on
//!   from a log (`--resume`) starts with one too, naming that log in `resumes`, and adds its lines
//!   to that log's file (its turns go on counting from that log's last);
//! - `request`: what turn N sent: the `tools` it carried (the schemas as sent; `null` in P-format)
//!   and the messages added since the previous request (`messages_before` says how many came
//!   before them, so the whole conversation is the concatenation of every request's messages);
//! - `reply`: the model's text, its tool calls as it sent them, and why it stopped;
//! - `call`: one call the reply made: the turn, its place in the reply, its id, the
//!   [`CallRequest`] the host ran (absent for a P-format tag refused before the host saw it), and
//!   its [`CallRecord`] (arguments as received, and as tidied when tidying changed them, tidy
//!   notes and `repairs` with their kinds, the guard's decision, the result or the error with its
//!   kind and, for refusals that share a kind, its `reason`, the time taken); `interrupted` when
//!   the session was stopped during it;
//! - `end`: why the session ended (`answered`, `max_turns`, `interrupted`, `error`), with the
//!   answer or the error.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::agent::model::Usage;
use crate::call::{CallRecord, CallRequest};
use crate::config::Dialect;
use crate::error::{Error, ErrorKind, Result};

/// The log format's version, in the `session` line. 2: call records carry `repairs` and
/// refusals their `reason` (version 1 had neither); readers of version 1 logs still read them.
pub const LOG_VERSION: u32 = 2;

/// One line of a session log.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Entry {
    /// The session's start.
    Session {
        /// The log format's version.
        version: u32,
        /// The toolhost that wrote it.
        toolhost: String,
        /// How tools were spoken.
        dialect: Dialect,
        /// Whether tools were sent in strict form.
        strict: bool,
        /// Which tools the model was offered (code mode); `json` when absent.
        #[serde(default, skip_serializing_if = "is_json")]
        tools: crate::code_mode::ToolsAs,
        /// The turn limit.
        max_turns: usize,
        /// The model, as it describes itself.
        #[serde(default)]
        model: Value,
        /// The task.
        task: String,
        /// The instructions files whose text followed the system prompt (`AGENTS.md`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        instructions: Vec<crate::agent::instructions::Included>,
        /// The log whose conversation this session goes on from (`--resume`), as it was named.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resumes: Option<String>,
    },
    /// One request to the model.
    Request {
        /// 1 for the first request.
        turn: usize,
        /// The tool schemas the request carried, as sent.
        #[serde(default)]
        tools: Option<Value>,
        /// How many messages the conversation had before these.
        messages_before: usize,
        /// The messages added since the previous request, in the request's shape.
        messages: Vec<Value>,
    },
    /// The model's reply.
    Reply {
        /// The turn it answers.
        turn: usize,
        /// Its text.
        #[serde(default)]
        text: Option<String>,
        /// Its native tool calls, in the request shape.
        #[serde(default)]
        tool_calls: Vec<Value>,
        /// Why the model stopped, when the server said.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        finish_reason: Option<String>,
        /// The turn's tokens, when the API said (the shape `toolhost stats` reads).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
    /// One call a reply made.
    Call {
        /// The turn whose reply made it.
        turn: usize,
        /// 1 for the reply's first call.
        index: usize,
        /// The id its result answered.
        id: String,
        /// What the host was asked to run; absent when the call was refused before the host.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request: Option<CallRequest>,
        /// What happened (boxed: a record is much larger than the other entries).
        record: Box<CallRecord>,
        /// The session was stopped while the call ran (replay skips it).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        interrupted: bool,
    },
    /// The session's end.
    End {
        /// `answered`, `max_turns`, `interrupted` or `error`.
        reason: String,
        /// Requests sent.
        turns: usize,
        /// The final answer, when there was one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answer: Option<String>,
        /// What ended the session, when it was an error.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<Error>,
    },
}

/// A session log being written.
#[derive(Debug)]
pub struct SessionLog {
    file: File,
    path: PathBuf,
    /// Opened to add to a log that was there ([`SessionLog::append`]).
    appends: bool,
}

impl SessionLog {
    /// Creates (or empties) the log file at `path`.
    ///
    /// # Errors
    /// Kind config when the file cannot be created (the message names it).
    pub fn create(path: impl Into<PathBuf>) -> Result<SessionLog> {
        let path = path.into();
        let file = File::create(&path)
            .map_err(|e| Error::config(format!("cannot create the session log {}: {e}", path.display())))?;
        Ok(SessionLog { file, path, appends: false })
    }

    /// Opens the log at `path` to add lines after the ones it has: a resumed session's log
    /// (`--resume`) goes on in the file it came from, so the file replays as one.
    ///
    /// # Errors
    /// Kind config when the file cannot be opened for writing (the message names it).
    pub fn append(path: impl Into<PathBuf>) -> Result<SessionLog> {
        let path = path.into();
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|e| Error::config(format!("cannot add to the session log {}: {e}", path.display())))?;
        Ok(SessionLog { file, path, appends: true })
    }

    /// Whether it adds to a log that was there.
    pub fn appends(&self) -> bool {
        self.appends
    }

    /// Where the log is written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes one entry as one line. The line goes to the file in one write, unbuffered, so it is
    /// the operating system's as soon as this returns.
    ///
    /// # Errors
    /// Kind `agent_error` when the file cannot be written.
    pub fn write(&mut self, entry: &Entry) -> Result<()> {
        let mut line = serde_json::to_string(entry)
            .map_err(|e| Error::new(ErrorKind::Agent, format!("cannot write a session log entry: {e}")))?;
        line.push('\n');
        self.file.write_all(line.as_bytes()).and_then(|()| self.file.flush()).map_err(|e| {
            Error::new(ErrorKind::Agent, format!("cannot write the session log {}: {e}", self.path.display()))
        })
    }
}

/// Reads a session log. A last line cut short (the writer died while writing it) is left out;
/// any other line that does not read is an error naming the file and the line.
///
/// # Errors
/// Kind config: the file cannot be read, or a line is not an entry.
pub fn read_log(path: &Path) -> Result<Vec<Entry>> {
    let file = File::open(path).map_err(|e| Error::config(format!("cannot read {}: {e}", path.display())))?;
    let mut entries = Vec::new();
    let mut reader = BufReader::new(file);
    let mut line = String::new();
    let mut number = 0;
    loop {
        line.clear();
        let read =
            reader.read_line(&mut line).map_err(|e| Error::config(format!("cannot read {}: {e}", path.display())))?;
        if read == 0 {
            break;
        }
        number += 1;
        let complete = line.ends_with('\n');
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Entry>(line.trim_end()) {
            Ok(entry) => entries.push(entry),
            Err(_) if !complete => break,
            Err(e) => {
                return Err(
                    Error::config(format!("not a session log entry: {e}")).at(path.display().to_string(), Some(number))
                )
            }
        }
    }
    Ok(entries)
}

/// Whether tools were offered as JSON tools, as every log before code mode did.
fn is_json(tools: &crate::code_mode::ToolsAs) -> bool {
    *tools == crate::code_mode::ToolsAs::Json
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_written_one_per_line_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut log = SessionLog::create(&path).unwrap();
        let entries = [
            Entry::Reply { turn: 1, text: Some("hi".into()), tool_calls: vec![], finish_reason: None, usage: None },
            Entry::End { reason: "answered".into(), turns: 1, answer: Some("hi".into()), error: None },
        ];
        for entry in &entries {
            log.write(entry).unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2);
        assert!(text.starts_with(r#"{"type":"reply","turn":1,"text":"hi","tool_calls":[]}"#), "{text}");
        assert_eq!(read_log(&path).unwrap(), entries);
    }

    #[test]
    fn a_cut_last_line_is_left_out_and_a_bad_line_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let whole = r#"{"type":"end","reason":"answered","turns":1}"#;
        std::fs::write(&path, format!("{whole}\n{{\"type\":\"rep")).unwrap();
        assert_eq!(read_log(&path).unwrap().len(), 1);
        std::fs::write(&path, format!("{whole}\nnonsense\n{whole}\n")).unwrap();
        let e = read_log(&path).unwrap_err();
        assert_eq!((e.kind(), e.line()), (ErrorKind::Config, Some(2)));
    }
}
