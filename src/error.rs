//! The crate's one error type: a stable [`ErrorKind`] plus the structured context a model or a person
//! needs to act on it (tool, parameter, position). Conversion to a Scheme error lives in
//! `crate::host`; conversion to the model-facing tool result lives in `crate::call`.

use std::fmt;

/// What went wrong, as a stable name a model (and a log reader) can branch on.
///
/// The tool-call kinds of the design (section 3) are the first eight and `crashed`; their
/// [`as_str`](ErrorKind::as_str) names are part of the wire format of `toolhost call`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The call names a tool the registry does not have.
    UnknownTool,
    /// The arguments carry a name that is not a parameter of the tool.
    UnknownArgument,
    /// A required argument is absent or null.
    MissingArgument,
    /// A value does not have its parameter's type.
    WrongType,
    /// The arguments are not an object, are not JSON at all, or (from Scheme) are the wrong count.
    BadArguments,
    /// The guard or the workspace boundary refused the call.
    Denied,
    /// The tool ran and failed.
    ToolFailed,
    /// The tool ran past its time limit and was stopped.
    Timeout,
    /// `register` refused a primitive definition.
    InvalidDefinition,
    /// A Scheme program or tool file failed to compile or run.
    Script,
    /// A config file is unreadable or invalid, or a flag names something that does not exist.
    Config,
    /// The isolated worker running the call died during it.
    Crashed,
    /// The agent loop could not go on: the model server could not be reached, answered with an
    /// error or with a reply that cannot be read, or the session log could not be written.
    Agent,
}

impl ErrorKind {
    /// The stable snake_case name of the kind, as sent to models and printed by `toolhost call`.
    ///
    /// ```
    /// assert_eq!(toolhost::ErrorKind::UnknownArgument.as_str(), "unknown_argument");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::UnknownTool => "unknown_tool",
            ErrorKind::UnknownArgument => "unknown_argument",
            ErrorKind::MissingArgument => "missing_argument",
            ErrorKind::WrongType => "wrong_type",
            ErrorKind::BadArguments => "bad_arguments",
            ErrorKind::Denied => "denied",
            ErrorKind::ToolFailed => "tool_failed",
            ErrorKind::Timeout => "timeout",
            ErrorKind::InvalidDefinition => "invalid_definition",
            ErrorKind::Script => "script_error",
            ErrorKind::Config => "config_error",
            ErrorKind::Crashed => "crashed",
            ErrorKind::Agent => "agent_error",
        }
    }

    /// Every kind, for reading a kind back from its name.
    pub const ALL: [ErrorKind; 13] = [
        ErrorKind::UnknownTool,
        ErrorKind::UnknownArgument,
        ErrorKind::MissingArgument,
        ErrorKind::WrongType,
        ErrorKind::BadArguments,
        ErrorKind::Denied,
        ErrorKind::ToolFailed,
        ErrorKind::Timeout,
        ErrorKind::InvalidDefinition,
        ErrorKind::Script,
        ErrorKind::Config,
        ErrorKind::Crashed,
        ErrorKind::Agent,
    ];

    /// The kind called `name` (see [`ErrorKind::as_str`]).
    ///
    /// ```
    /// use toolhost::ErrorKind;
    /// assert_eq!(ErrorKind::from_name("denied"), Some(ErrorKind::Denied));
    /// assert_eq!(ErrorKind::from_name("nope"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl serde::Serialize for ErrorKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for ErrorKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        ErrorKind::from_name(&name).ok_or_else(|| serde::de::Error::custom(format!("unknown error kind {name:?}")))
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a call was refused, finer than its [`ErrorKind`], for refusals that share a kind: a stable
/// name (its [`as_str`](Reason::as_str)) that call records keep, so a log reader counts refusals by
/// cause without reading their messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// The arguments' object gives a key more than once (JSON call path, `bad_arguments`).
    DuplicateKey,
    /// The arguments are not JSON (JSON call path, `bad_arguments`).
    NotJson,
    /// The arguments are JSON, but not an object nor a string holding one (JSON call path,
    /// `bad_arguments`).
    NotAnObject,
    /// P-format: values written by position without slot numbers (the old bare form).
    Positional,
    /// P-format: an odd number of tokens that is not the bare form (most often a `|` in a value,
    /// unescaped).
    OddTokens,
    /// P-format: a slot number the tool has no parameter for.
    NoSuchSlot,
    /// P-format: a backslash that is not one of the three escapes.
    BadEscape,
    /// P-format: the arguments have no closing `]`.
    NoClosingBracket,
    /// P-format: text after the closing `]`.
    TextAfterBracket,
    /// P-format: the tool's name without `[ ]`.
    NoBrackets,
    /// P-format: a value for an `any` slot that is not JSON.
    AnyNotJson,
    /// P-format: a tag not closed before the next tag or the end of the reply.
    UnclosedTag,
    /// P-format: a tag with nothing in it.
    EmptyTag,
    /// P-format: a tag with arguments but no tool name.
    NoToolName,
    /// P-format: a JSON tag that is not `{"name": ..., "arguments": {...}}`.
    JsonForm,
    /// P-format: more tags in one reply than are read.
    TooManyTags,
}

impl Reason {
    /// The reasons of the JSON call path's `bad_arguments` refusals, in the order reports list them.
    pub const CALL_PATH: [Reason; 3] = [Reason::DuplicateKey, Reason::NotJson, Reason::NotAnObject];

    /// The reasons of P-format's refusals, in the order reports list them.
    pub const PFORMAT: [Reason; 13] = [
        Reason::Positional,
        Reason::OddTokens,
        Reason::NoSuchSlot,
        Reason::BadEscape,
        Reason::NoClosingBracket,
        Reason::TextAfterBracket,
        Reason::NoBrackets,
        Reason::AnyNotJson,
        Reason::UnclosedTag,
        Reason::EmptyTag,
        Reason::NoToolName,
        Reason::JsonForm,
        Reason::TooManyTags,
    ];

    /// The stable snake_case name.
    ///
    /// ```
    /// assert_eq!(toolhost::error::Reason::DuplicateKey.as_str(), "duplicate_key");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::DuplicateKey => "duplicate_key",
            Reason::NotJson => "not_json",
            Reason::NotAnObject => "not_an_object",
            Reason::Positional => "positional",
            Reason::OddTokens => "odd_tokens",
            Reason::NoSuchSlot => "no_such_slot",
            Reason::BadEscape => "bad_escape",
            Reason::NoClosingBracket => "no_closing_bracket",
            Reason::TextAfterBracket => "text_after_bracket",
            Reason::NoBrackets => "no_brackets",
            Reason::AnyNotJson => "any_not_json",
            Reason::UnclosedTag => "unclosed_tag",
            Reason::EmptyTag => "empty_tag",
            Reason::NoToolName => "no_tool_name",
            Reason::JsonForm => "json_form",
            Reason::TooManyTags => "too_many_tags",
        }
    }

    /// The reason called `name`.
    pub fn from_name(name: &str) -> Option<Reason> {
        Reason::CALL_PATH.into_iter().chain(Reason::PFORMAT).find(|r| r.as_str() == name)
    }

    /// Reads a reason, leaving out one this toolhost does not know (a newer log's): the error is
    /// read all the same.
    fn known<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<Reason>, D::Error> {
        let name: Option<String> = serde::Deserialize::deserialize(d)?;
        Ok(name.as_deref().and_then(Reason::from_name))
    }
}

impl serde::Serialize for Reason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error with its kind, a complete human- and model-readable message, the tool and parameter it
/// concerns when there is one, and the file and line it points at (a tool file that failed to load,
/// a bad config key).
///
/// The message is complete on its own (it already names the tool where that helps), so it can be
/// shown to a model as is; `Display` puts `file:line: ` in front when there is a location. The
/// structured fields are for code that wants to branch or log; [`Error::reason`] tells apart, by a
/// stable name, refusals that share a kind (a log reader counts them without reading messages).
#[derive(Debug, Clone, PartialEq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parameter: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    line: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "Reason::known")]
    reason: Option<Reason>,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(f, "{file}:{line}: {}", self.message),
            (Some(file), None) => write!(f, "{file}: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

impl Error {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into(), tool: None, parameter: None, file: None, line: None, reason: None }
    }

    /// A bad config file or flag.
    pub fn config(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Config, message)
    }

    /// Records the file (and the 1-based line, when known) the error points at.
    pub fn at(mut self, file: impl Into<String>, line: Option<usize>) -> Self {
        self.file = Some(file.into());
        self.line = line;
        self
    }

    /// A failure inside a tool's own work (a missing file, a command that could not start, ...).
    pub fn tool_failed(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::ToolFailed, message)
    }

    /// A refusal by the guard or the workspace boundary.
    pub fn denied(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Denied, message)
    }

    /// Records the tool this error concerns.
    pub fn with_tool(mut self, tool: impl Into<String>) -> Self {
        self.tool = Some(tool.into());
        self
    }

    /// Records the parameter this error concerns.
    pub fn with_parameter(mut self, parameter: impl Into<String>) -> Self {
        self.parameter = Some(parameter.into());
        self
    }

    /// Records why, finer than the kind: the call path's `bad_arguments` refusals and P-format's
    /// refusals carry a [`Reason`].
    pub fn with_reason(mut self, reason: Reason) -> Self {
        self.reason = Some(reason);
        self
    }

    /// The stable kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The full message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The tool the error concerns, if any.
    pub fn tool(&self) -> Option<&str> {
        self.tool.as_deref()
    }

    /// The parameter the error concerns, if any.
    pub fn parameter(&self) -> Option<&str> {
        self.parameter.as_deref()
    }

    /// The file the error points at, if any.
    pub fn file(&self) -> Option<&str> {
        self.file.as_deref()
    }

    /// Why, finer than the kind, when the place that refused says (see [`Error::with_reason`]).
    ///
    /// ```
    /// use toolhost::HostBuilder;
    /// let dir = tempfile::tempdir().unwrap();
    /// let mut host = HostBuilder::new(dir.path()).build().unwrap();
    /// let record = host.call_json("fs-read", r#"{"path": "a.txt", "path": "b.txt"}"#);
    /// assert_eq!(record.result.unwrap_err().reason(), Some(toolhost::error::Reason::DuplicateKey));
    /// ```
    pub fn reason(&self) -> Option<Reason> {
        self.reason
    }

    /// The 1-based line of [`Error::file`] the error points at, when it can be told.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// Prefixes the message with `tool: ` unless it already starts that way, and records the tool.
    /// Tool handlers write plain messages; the call path names the tool once.
    pub(crate) fn in_tool(mut self, tool: &str) -> Self {
        let prefix = format!("{tool}: ");
        if !self.message.starts_with(&prefix) {
            self.message.insert_str(0, &prefix);
        }
        self.tool = Some(tool.to_string());
        self
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_one_snake_case_name_that_reads_back() {
        let all: Vec<Reason> = Reason::CALL_PATH.into_iter().chain(Reason::PFORMAT).collect();
        let mut names: Vec<&str> = all.iter().map(|r| r.as_str()).collect();
        for (reason, name) in all.iter().zip(&names) {
            assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'), "{name}");
            assert_eq!(Reason::from_name(name), Some(*reason));
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len(), "names are unique");
        assert_eq!(Reason::from_name("no_such_reason"), None);
    }

    #[test]
    fn an_error_keeps_its_reason_through_json() {
        let error = Error::new(ErrorKind::BadArguments, "m").with_reason(Reason::OddTokens);
        let json = serde_json::to_value(&error).unwrap();
        assert_eq!(json["reason"], "odd_tokens");
        let read: Error = serde_json::from_value(json).unwrap();
        assert_eq!(read, error);
        let without: Error =
            serde_json::from_value(serde_json::json!({"kind": "bad_arguments", "message": "m"})).unwrap();
        assert_eq!(without.reason(), None);
    }
}
