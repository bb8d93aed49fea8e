//! One session-log line as `toolhost stats` reads it: only the fields it counts, borrowed from the
//! line where they can be, everything else skipped unread (a request's tools and messages, a
//! result's text). It owns telling a line that reads from one that does not, and why not; the
//! writer's own types are in `agent::log` (feature `agent`).

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;

/// Why a line was skipped. The names are stable: `toolhost stats --format json` reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Skip {
    /// The file's last line, cut short: the session was killed while writing it.
    Truncated,
    /// Not valid UTF-8.
    NotUtf8,
    /// Not JSON.
    NotJson,
    /// JSON of a `type` this toolhost does not know (a newer or older log format).
    UnknownType,
    /// JSON that is not a log entry, or lacks what its type must have.
    Malformed,
    /// Longer than any log entry (64 MiB): not read, so that memory stays bounded.
    TooLong,
}

impl Skip {
    /// Every reason, in the order reports list them.
    pub const ALL: [Skip; 6] =
        [Skip::Truncated, Skip::NotUtf8, Skip::NotJson, Skip::UnknownType, Skip::Malformed, Skip::TooLong];

    /// The stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            Skip::Truncated => "truncated",
            Skip::NotUtf8 => "not_utf8",
            Skip::NotJson => "not_json",
            Skip::UnknownType => "unknown_type",
            Skip::Malformed => "malformed",
            Skip::TooLong => "too_long",
        }
    }
}

/// A line that read: what kind of entry it is, with the fields counted.
// One line lives at a time, on the stack: boxing the record would only add an allocation per call.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Line<'a> {
    /// A session's first line.
    Session {
        /// The log format's version (none before versions were written).
        version: Option<u64>,
        /// Whether tools were spoken in P-format.
        pformat: bool,
    },
    /// A request to the model.
    Request {
        /// 1 for the first.
        turn: u64,
    },
    /// The model's reply, with its token usage when the log has it.
    Reply {
        /// The turn it answers.
        turn: u64,
        /// Its token usage, when the log has it.
        usage: Option<Usage>,
    },
    /// One call a reply made.
    Call {
        /// The turn of the reply.
        turn: u64,
        /// Refused before it reached the host (a P-format tag that did not parse).
        before_host: bool,
        /// The call record.
        record: Record<'a>,
    },
    /// The session's end.
    End {
        /// How it ended (`answered`, `max_turns`, `interrupted`, `error`).
        reason: Cow<'a, str>,
        /// The turns it took, when the log says.
        turns: Option<u64>,
        /// The error's kind, when it ended in one.
        error_kind: Option<Cow<'a, str>>,
    },
}

/// A reply's token usage (see the module docs of [`crate::stats`] for the shape).
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct Usage {
    /// Input tokens of the turn, those read from a cache included.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens of the turn.
    #[serde(default)]
    pub output_tokens: u64,
    /// Input tokens read from the provider's cache, when the API says.
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}

/// A call record, as far as it is counted.
#[derive(Debug, Deserialize)]
pub struct Record<'a> {
    /// The tool's name as the call gave it.
    #[serde(borrow)]
    pub tool: Cow<'a, str>,
    /// The arguments as received.
    #[serde(default, borrow)]
    pub arguments: Option<&'a RawValue>,
    /// The arguments as tidied.
    #[serde(default, borrow)]
    pub tidied: Option<&'a RawValue>,
    /// The tidy notes (only counted).
    #[serde(default)]
    pub notes: Vec<IgnoredAny>,
    /// The changes made to the arguments, by kind.
    #[serde(default, borrow)]
    pub repairs: Vec<RepairLine<'a>>,
    /// The guard's decision.
    #[serde(default, borrow)]
    pub decision: Option<DecisionLine<'a>>,
    /// Whether the call succeeded.
    pub ok: bool,
    /// Its error.
    #[serde(default, borrow)]
    pub error: Option<ErrorLine<'a>>,
    /// The time it took.
    #[serde(default)]
    pub elapsed_ms: f64,
    /// A code-mode program's calls, in order (present, perhaps empty, on a program's record only).
    #[serde(default, borrow)]
    pub nested: Option<Vec<Record<'a>>>,
}

/// A repair of a record.
#[derive(Debug, Deserialize)]
pub struct RepairLine<'a> {
    /// Its kind.
    #[serde(borrow)]
    pub kind: Cow<'a, str>,
}

/// A guard decision.
#[derive(Debug, Deserialize)]
pub struct DecisionLine<'a> {
    /// `allow`, `deny` or `confirm`.
    #[serde(borrow)]
    pub action: Cow<'a, str>,
    /// The rule that decided, absent for the default.
    #[serde(default, borrow)]
    pub rule: Option<RuleLine<'a>>,
    /// A confirmation's answer.
    #[serde(default)]
    pub answer: Option<bool>,
    /// Who answered a confirmation.
    #[serde(default, borrow)]
    pub by: Option<Cow<'a, str>>,
}

/// The rule of a decision.
#[derive(Debug, Deserialize)]
pub struct RuleLine<'a> {
    /// Its position among the rules.
    #[serde(default)]
    pub index: u64,
    /// Its tool glob.
    #[serde(default, borrow)]
    pub tool: Cow<'a, str>,
    /// Its path glob.
    #[serde(default, borrow)]
    pub path: Option<Cow<'a, str>>,
    /// Where it was written.
    #[serde(default, borrow)]
    pub origin: Option<Cow<'a, str>>,
}

/// An error of a record.
#[derive(Debug, Deserialize)]
pub struct ErrorLine<'a> {
    /// Its kind.
    #[serde(borrow)]
    pub kind: Cow<'a, str>,
    /// The tool it names.
    #[serde(default, borrow)]
    pub tool: Option<Cow<'a, str>>,
    /// The parameter it names.
    #[serde(default, borrow)]
    pub parameter: Option<Cow<'a, str>>,
    /// Why, finer than the kind.
    #[serde(default, borrow)]
    pub reason: Option<Cow<'a, str>>,
}

/// Every field of every entry type, read at once; which must be there is checked by type after.
#[derive(Deserialize)]
struct Wire<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    version: Option<u64>,
    #[serde(default, borrow)]
    dialect: Option<Cow<'a, str>>,
    #[serde(default)]
    turn: Option<u64>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    request: Option<IgnoredAny>,
    #[serde(default, borrow)]
    record: Option<Record<'a>>,
    #[serde(default, borrow)]
    reason: Option<Cow<'a, str>>,
    #[serde(default)]
    turns: Option<u64>,
    #[serde(default, borrow)]
    error: Option<ErrorLine<'a>>,
}

/// Reads one line (without its newline). `last_and_cut` says that it is the file's last line and
/// has no newline: if it does not read, the writer died while writing it.
///
/// ```
/// use toolhost::stats::line::{read, Line, Skip};
/// assert!(matches!(read(br#"{"type":"request","turn":1,"messages":[]}"#, false), Ok(Line::Request { turn: 1 })));
/// assert_eq!(read(br#"{"type":"call","turn":1,"rec"#, true).unwrap_err(), Skip::Truncated);
/// assert_eq!(read(br#"{"type":"call","turn":1,"rec"#, false).unwrap_err(), Skip::NotJson);
/// assert_eq!(read(br#"{"type":"plan","steps":[]}"#, false).unwrap_err(), Skip::UnknownType);
/// ```
///
/// # Errors
/// Why the line does not read.
pub fn read(bytes: &[u8], last_and_cut: bool) -> Result<Line<'_>, Skip> {
    let wire: Wire<'_> = match serde_json::from_slice(bytes) {
        Ok(wire) => wire,
        Err(_) if last_and_cut => return Err(Skip::Truncated),
        Err(_) if std::str::from_utf8(bytes).is_err() => return Err(Skip::NotUtf8),
        Err(e) if e.is_syntax() || e.is_eof() => return Err(Skip::NotJson),
        Err(_) => return Err(Skip::Malformed),
    };
    let turn = wire.turn.ok_or(Skip::Malformed);
    Ok(match wire.kind.as_ref() {
        "session" => Line::Session { version: wire.version, pformat: wire.dialect.as_deref() == Some("pformat") },
        "request" => Line::Request { turn: turn? },
        "reply" => Line::Reply { turn: turn?, usage: wire.usage },
        "call" => {
            Line::Call { turn: turn?, before_host: wire.request.is_none(), record: wire.record.ok_or(Skip::Malformed)? }
        }
        "end" => Line::End {
            reason: wire.reason.ok_or(Skip::Malformed)?,
            turns: wire.turns,
            error_kind: wire.error.map(|e| e.kind),
        },
        _ => return Err(Skip::UnknownType),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_read_or_skipped_for_a_reason() {
        assert_eq!(read(b"not json at all", false).unwrap_err(), Skip::NotJson);
        assert_eq!(read(b"[1, 2]", false).unwrap_err(), Skip::Malformed);
        assert_eq!(read(br#"{"turn": 1}"#, false).unwrap_err(), Skip::Malformed);
        assert_eq!(read(br#"{"type": "call", "turn": 1}"#, false).unwrap_err(), Skip::Malformed);
        assert_eq!(read(br#"{"type": "reply", "turn": "one"}"#, false).unwrap_err(), Skip::Malformed);
        assert_eq!(read(b"{\"type\": \"end\", \"reason\": \"\xff\"}", false).unwrap_err(), Skip::NotUtf8);
        // A whole last line without its newline is not cut: it reads.
        assert!(matches!(read(br#"{"type":"end","reason":"answered","turns":2}"#, true), Ok(Line::End { .. })));
    }

    #[test]
    fn a_call_line_borrows_what_it_counts() {
        let line = br#"{"type":"call","turn":2,"index":1,"id":"c","request":{"tool":"fs-read","arguments":"{}"},
            "record":{"tool":"fs-read","arguments":{"path":"a"},"notes":["n"],"repairs":[{"kind":"numeric_string","parameter":"count"}],
            "decision":{"action":"deny","rule":{"index":2,"tool":"fs-*","path":"secret/**"},"reason":"no"},
            "ok":false,"error":{"kind":"denied","message":"m","tool":"fs-read"},"elapsed_ms":1.5}}"#;
        let Ok(Line::Call { turn: 2, before_host: false, record }) = read(line, false) else { panic!() };
        assert_eq!(
            (record.tool.as_ref(), record.notes.len(), record.repairs[0].kind.as_ref()),
            ("fs-read", 1, "numeric_string")
        );
        assert!(matches!(record.tool, Cow::Borrowed(_)));
        let decision = record.decision.unwrap();
        assert_eq!((decision.action.as_ref(), decision.rule.unwrap().index), ("deny", 2));
        assert_eq!(record.error.unwrap().kind, "denied");
        assert!(record.nested.is_none());
    }
}
