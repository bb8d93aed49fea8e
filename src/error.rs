//! The crate's one error type: a stable [`ErrorKind`] plus the structured context a model or a person
//! needs to act on it (tool, parameter, position). Conversion to a Scheme error lives in
//! `crate::host`; conversion to the model-facing tool result lives in `crate::call`.

use std::borrow::Cow;
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<Cow<'static, str>>,
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

    /// Records why, finer than the kind, as a stable snake_case name: the call path's
    /// `bad_arguments` refusals ([`crate::call::reason`]) and P-format's refusals
    /// ([`crate::pformat::reason`]) carry one.
    pub fn with_reason(mut self, reason: &'static str) -> Self {
        self.reason = Some(Cow::Borrowed(reason));
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
    /// assert_eq!(record.result.unwrap_err().reason(), Some("duplicate_key"));
    /// ```
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
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
