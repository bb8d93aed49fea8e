//! Config files (design section 17): reading one TOML file into a checked [`ConfigLayer`], and merging
//! the user's and the project's layers into the one [`Config`] the host uses. It does not decide which
//! files may load (that is `crate::trust`), apply defaults (the core does, so every default has one
//! home), or apply flags (flags override the merged config in the command line code).
//!
//! # The format
//!
//! `toolhost.example.toml` at the repository root shows every key. Every table refuses keys it does
//! not know, and every value is checked when the file is read, so nothing runs with a half-read or
//! half-understood config: limits must be positive, globs must compile, URLs must be `http(s)://`,
//! `provider.api_key_env` must be the *name* of a variable (never the key), `provider.extra_body` may
//! not set `tools`, `messages` or `model`, an `[[mcp]]` server has a unique name of
//! `[A-Za-z0-9_-]` and exactly one of `command` (stdio) or `url` (streamable HTTP), and `[shell]`'s
//! `env_keep`/`env_drop` are variable names (`*` may stand for any characters).
//!
//! # Errors
//!
//! Every error has kind config and points at the file and the 1-based line; its message starts with
//! the key path, so it reads `toolhost.toml:7: limits.output_chars: must be a positive integer, got 0`.
//! Entries of `[[guard.rule]]` and `[[mcp]]` are counted from 1 in key paths (`guard.rule[2].path` is
//! the second rule), as a person counts the headers in the file. A TOML syntax error has no key; it
//! reads `toolhost.toml:3: invalid TOML at column 8: ...`.
//!
//! # Merging
//!
//! [`merge`] takes layers in order, earliest first (the user's file, then the project's). Each file
//! sets only what it names, so a later file overrides an earlier one key by key:
//! - scalars (each limit, `guard.default`, `scripts.trusted`, each `provider` field, `shell.sandbox`,
//!   `shell.network`, `shell.background`) take the last file's value that sets them;
//! - `provider.extra_body` merges key by key (top-level keys only: a later `{ a = { x = 1 } }`
//!   replaces the earlier `a` whole, since a request field is one value);
//! - `tools` folders accumulate, the earlier file's first, each folder once; so do `shell.writable`
//!   folders and `shell.env_keep` / `shell.env_drop` names;
//! - `guard.rule` lists concatenate with the later file's rules *first*: the first matching rule
//!   decides, so the project's rules decide where they match and the user's still apply elsewhere;
//! - `[[mcp]]` servers merge by name: a later server with a known name replaces the earlier one in its
//!   place (so the catalogue order stays stable), new names are appended.
//!
//! Relative `tools` and `shell.writable` entries are resolved against the folder of the file that names them when the file
//! is read, so after merging every folder is a full path and it no longer matters which file named it.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::de;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use toml::Spanned;

use crate::context::Limits;
use crate::error::{Error, Result};
use crate::guard::{Guard, Rule};
pub use crate::guard_rules::Action;
pub use crate::sandbox::SandboxMode;
use crate::sandbox::{Sandbox, Settings};
use crate::source::ReadError;

/// How the agent loop talks tools with its model: `native`, `pformat` or `auto` in a config file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dialect {
    /// The provider's own tool-calling API.
    Native,
    /// Tool calls written as text tags (design section 7), for models without native tool calls.
    Pformat,
    /// Native, unless the server says its model cannot take tools (llama-server's `/props`): then
    /// P-format. `toolhost agent` decides before the session starts; a session given `Auto`
    /// speaks native.
    Auto,
}

/// Which provider `[provider] preset` (or `--provider`) names: it sets the base URL, the API shape
/// and the variable the API key is read from (see `agent::provider` for the table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// OpenAI's own API.
    #[serde(rename = "openai")]
    OpenAi,
    /// Anthropic's own API.
    Anthropic,
    /// OpenRouter.
    #[serde(rename = "openrouter")]
    OpenRouter,
    /// Google's Gemini, through its OpenAI-compatible endpoint.
    Gemini,
    /// A local Ollama.
    Ollama,
    /// A local llama.cpp server.
    LlamaServer,
    /// A local vLLM server.
    #[serde(rename = "vllm")]
    Vllm,
}

/// Which wire format requests go in: `chat` (OpenAI-compatible chat completions), `anthropic`
/// (Anthropic's Messages API) or `responses` (OpenAI's Responses API).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// `POST {base_url}/chat/completions`.
    Chat,
    /// `POST {base_url}/messages`.
    Anthropic,
    /// `POST {base_url}/responses`.
    Responses,
}

/// `[shell]`: the `shell-exec` sandbox. Scalars `None` and lists empty unless a file sets them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShellConfig {
    /// `required` (the default), `best-effort` or `off`.
    pub sandbox: Option<SandboxMode>,
    /// Whether commands may use the network; false when unset.
    pub network: Option<bool>,
    /// Whether processes a command starts may outlive its call; false when unset.
    pub background: Option<bool>,
    /// Folders commands may write beneath besides the workspace root and their temporary folder,
    /// joined to the folder of the file that names them.
    pub writable: Vec<PathBuf>,
    /// Environment variables passed to commands although their names look like secrets.
    pub env_keep: Vec<String>,
    /// More environment variables not passed to commands.
    pub env_drop: Vec<String>,
}

/// `[limits]`: each `None` when no file sets it, so the core applies its own default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LimitsConfig {
    /// Seconds one Scheme tool call may run, nested tool calls included.
    pub scheme_call_s: Option<f64>,
    /// Seconds one code-mode program may run, its tool calls included.
    pub program_s: Option<f64>,
    /// `shell-exec`'s default and maximum timeout, in seconds.
    pub shell_timeout_s: Option<u64>,
    /// Characters of any one tool result shown to a model.
    pub output_chars: Option<usize>,
    /// Lines `fs-read` returns when no count is given.
    pub read_lines: Option<usize>,
    /// Whether `toolhost call` runs the host in a worker process (design section 18); true when no
    /// file sets it. `--no-isolate` turns it off for one command.
    pub isolate: Option<bool>,
    /// The most memory (address space) the worker process may map, in MiB; 4096 when unset.
    pub worker_memory_mb: Option<u64>,
}

/// One `[[guard.rule]]`, globs checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleConfig {
    /// Glob over tool names (`fs-*`, `github.*`).
    pub tool: String,
    /// Glob over the tool's path argument, relative to the workspace root; `None` matches any call.
    pub path: Option<String>,
    /// What the rule decides when it matches.
    pub action: Action,
    /// What the model is told on a denial.
    pub reason: Option<String>,
    /// Where the rule was written, as `file:line`, for messages that explain a decision.
    pub origin: String,
}

/// `[provider]`: the agent loop's model. Every field `None` (and `extra_body` empty) unless set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProviderConfig {
    /// The provider whose base URL, API shape and key variable apply unless set here.
    pub preset: Option<Preset>,
    /// The API's wire format (else the preset's, else chat completions).
    pub api: Option<Api>,
    /// The API's base URL (`http://` or `https://`).
    pub base_url: Option<String>,
    /// The model name sent with each request.
    pub model: Option<String>,
    /// The name of the environment variable that holds the API key.
    pub api_key_env: Option<String>,
    /// Native tool calls or P-format text.
    pub dialect: Option<Dialect>,
    /// Which tools the model is offered: each as a JSON tool, the program tool alone (code mode),
    /// or both.
    pub tools: Option<crate::code_mode::ToolsAs>,
    /// Whether tool schemas are sent in the provider's strict form.
    pub strict_tools: Option<bool>,
    /// Seconds one model request may take.
    pub timeout_s: Option<f64>,
    /// How many tool calls of one reply run; the rest are answered with an error saying so.
    pub max_calls_per_reply: Option<u64>,
    /// The most tokens one reply may have (`max_tokens`, which the Anthropic API requires).
    pub max_tokens: Option<u64>,
    /// Whether replies are streamed (server-sent events) as they are generated; on unless false.
    pub stream: Option<bool>,
    /// Fields merged into each request body; never `tools`, `messages` or `model`.
    pub extra_body: Map<String, Value>,
    /// The file that set `base_url` and the one that set `api_key_env`, by key: an API key goes to
    /// a host only when the user's own config (or a flag) chose it, never a project's file alone.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set_in: BTreeMap<String, PathBuf>,
}

/// How toolhost reaches an MCP server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum McpTransport {
    /// A child process spoken to over its standard input and output.
    Stdio {
        /// The program to start.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables added to its environment.
        env: BTreeMap<String, String>,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// The endpoint (`http://` or `https://`).
        url: String,
    },
}

/// One `[[mcp]]` server, checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpServerConfig {
    /// The server's name; its tools are registered as `name.tool`.
    pub name: String,
    /// How to reach it.
    pub transport: McpTransport,
    /// Seconds one call may take; `None` leaves it to the core's default.
    pub timeout_s: Option<f64>,
    /// Where the server was written, as `file:line`, for messages about starting it.
    pub origin: String,
}

impl McpServerConfig {
    /// `error` located where the server was written (its `origin`, `file:line`).
    pub fn locate(&self, error: Error) -> Error {
        match self.origin.rsplit_once(':') {
            Some((file, line)) if line.parse::<usize>().is_ok() => error.at(file, line.parse().ok()),
            _ if self.origin.is_empty() => error,
            _ => error.at(self.origin.as_str(), None),
        }
    }
}

/// What one config file sets, checked, with relative tool folders resolved. Merge layers with
/// [`merge`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigLayer {
    /// The file it was read from.
    pub file: PathBuf,
    /// Tool folders it names, joined to the file's folder.
    pub tools: Vec<PathBuf>,
    /// `[limits]`.
    pub limits: LimitsConfig,
    /// `guard.default`.
    pub guard_default: Option<Action>,
    /// `[[guard.rule]]`, in file order.
    pub rules: Vec<RuleConfig>,
    /// `scripts.trusted`.
    pub scripts_trusted: Option<bool>,
    /// `[provider]`.
    pub provider: ProviderConfig,
    /// `[[mcp]]`, in file order.
    pub mcp: Vec<McpServerConfig>,
    /// `[shell]`.
    pub shell: ShellConfig,
}

/// The merged config the host uses (see the module docs for how layers combine).
/// `Config::default()` is the empty config: nothing set, so the core's defaults apply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// More tool folders, in load order.
    pub tools: Vec<PathBuf>,
    /// `[limits]`.
    pub limits: LimitsConfig,
    /// `guard.default`.
    pub guard_default: Option<Action>,
    /// Guard rules in the order they are tried: the later file's first.
    pub rules: Vec<RuleConfig>,
    /// `scripts.trusted`.
    pub scripts_trusted: Option<bool>,
    /// `[provider]`.
    pub provider: ProviderConfig,
    /// MCP servers, by unique name.
    pub mcp: Vec<McpServerConfig>,
    /// `[shell]`.
    pub shell: ShellConfig,
    /// The files that were read, in order.
    pub files: Vec<PathBuf>,
}

impl Config {
    /// Reads the user's config file when it exists (a missing one is fine), then the project's when
    /// given and it exists, and merges them. A `--config FILE` that must exist is read with
    /// [`read_file`] instead.
    ///
    /// # Errors
    /// When a file that exists cannot be read or is invalid.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let project = dir.path().join("toolhost.toml");
    /// std::fs::write(&project, "[limits]\nread_lines = 50\n").unwrap();
    /// let config = toolhost::config::Config::load(Some(&dir.path().join("missing.toml")), Some(&project)).unwrap();
    /// assert_eq!(config.limits.read_lines, Some(50));
    /// assert_eq!(config.files, vec![project]);
    /// ```
    pub fn load(user: Option<&Path>, project: Option<&Path>) -> Result<Config> {
        let mut layers = Vec::new();
        for path in [user, project].into_iter().flatten() {
            layers.extend(read_if_exists(path)?);
        }
        Ok(merge(layers))
    }

    /// The limits its `[limits]` sets, the defaults for the rest.
    pub fn tool_limits(&self) -> Limits {
        let mut limits = Limits::default();
        let set = &self.limits;
        if let Some(seconds) = set.scheme_call_s.and_then(|s| std::time::Duration::try_from_secs_f64(s).ok()) {
            limits.scheme_call = seconds;
        }
        if let Some(seconds) = set.program_s.and_then(|s| std::time::Duration::try_from_secs_f64(s).ok()) {
            limits.program = seconds;
        }
        if let Some(seconds) = set.shell_timeout_s {
            limits.shell_timeout_s = seconds;
        }
        if let Some(chars) = set.output_chars {
            limits.output_chars = chars;
        }
        if let Some(lines) = set.read_lines {
            limits.read_lines = lines;
        }
        limits
    }

    /// The guard its `[guard]` describes: its rules in order, then its default (allow when
    /// unset). No confirmer: the caller decides who answers.
    ///
    /// # Errors
    /// A glob that does not compile (the config reader checks them first).
    pub fn guard(&self) -> Result<Guard> {
        let mut guard = Guard::default().default_action(self.guard_default.unwrap_or(Action::Allow));
        for rule in &self.rules {
            let mut made = Rule::new(&rule.tool, rule.action)?.origin(rule.origin.clone());
            if let Some(path) = &rule.path {
                made = made.path(path)?;
            }
            if let Some(reason) = &rule.reason {
                made = made.reason(reason.clone());
            }
            guard = guard.rule(made);
        }
        Ok(guard)
    }

    /// The sandbox its `[shell]` (and `[provider] api_key_env`) asks for.
    ///
    /// # Errors
    /// A config error when a `writable` folder does not exist or a pattern does not compile.
    pub fn sandbox(&self) -> Result<Sandbox> {
        let shell = &self.shell;
        for folder in &shell.writable {
            if !folder.is_dir() {
                let files: Vec<String> = self.files.iter().map(|f| f.display().to_string()).collect();
                let what = if folder.exists() { "is not a folder" } else { "does not exist" };
                return Err(Error::config(format!(
                    "shell.writable: {} {what}; create the folder or take it out of [shell] writable (config read \
                     from {})",
                    folder.display(),
                    files.join(", ")
                )));
            }
        }
        Settings {
            mode: shell.sandbox.unwrap_or_default(),
            network: shell.network.unwrap_or(false),
            background: shell.background.unwrap_or(false),
            writable: shell.writable.clone(),
            env_keep: shell.env_keep.clone(),
            env_drop: shell.env_drop.clone(),
            api_key_env: self.provider.api_key_env.clone(),
        }
        .build()
    }
}

/// Merges layers, earliest first; later layers override earlier ones as the module docs describe.
///
/// ```
/// use toolhost::config::{merge, parse};
/// use std::path::Path;
///
/// let user = parse("[limits]\nread_lines = 100\noutput_chars = 9000\n", Path::new("/u/config.toml")).unwrap();
/// let project = parse("[limits]\nread_lines = 50\n", Path::new("/p/toolhost.toml")).unwrap();
/// let config = merge([user, project]);
/// assert_eq!(config.limits.read_lines, Some(50));
/// assert_eq!(config.limits.output_chars, Some(9000));
/// ```
pub fn merge(layers: impl IntoIterator<Item = ConfigLayer>) -> Config {
    let mut config = Config::default();
    for layer in layers {
        for folder in layer.tools {
            if !config.tools.contains(&folder) {
                config.tools.push(folder);
            }
        }

        let limits = &mut config.limits;
        limits.scheme_call_s = layer.limits.scheme_call_s.or(limits.scheme_call_s);
        limits.program_s = layer.limits.program_s.or(limits.program_s);
        limits.shell_timeout_s = layer.limits.shell_timeout_s.or(limits.shell_timeout_s);
        limits.output_chars = layer.limits.output_chars.or(limits.output_chars);
        limits.read_lines = layer.limits.read_lines.or(limits.read_lines);
        limits.isolate = layer.limits.isolate.or(limits.isolate);
        limits.worker_memory_mb = layer.limits.worker_memory_mb.or(limits.worker_memory_mb);

        config.guard_default = layer.guard_default.or(config.guard_default);
        // The later file's rules go first: the first match decides.
        let mut rules = layer.rules;
        rules.append(&mut config.rules);
        config.rules = rules;

        config.scripts_trusted = layer.scripts_trusted.or(config.scripts_trusted);

        let (provider, later) = (&mut config.provider, layer.provider);
        for key in ["base_url", "api_key_env"] {
            if let Some(file) = later.set_in.get(key) {
                provider.set_in.insert(key.to_string(), file.clone());
            }
        }
        provider.preset = later.preset.or(provider.preset);
        provider.api = later.api.or(provider.api);
        provider.base_url = later.base_url.or(provider.base_url.take());
        provider.model = later.model.or(provider.model.take());
        provider.api_key_env = later.api_key_env.or(provider.api_key_env.take());
        provider.max_tokens = later.max_tokens.or(provider.max_tokens);
        provider.stream = later.stream.or(provider.stream);
        provider.dialect = later.dialect.or(provider.dialect);
        provider.tools = later.tools.or(provider.tools);
        provider.strict_tools = later.strict_tools.or(provider.strict_tools);
        provider.timeout_s = later.timeout_s.or(provider.timeout_s);
        provider.max_calls_per_reply = later.max_calls_per_reply.or(provider.max_calls_per_reply);
        // serde_json's map keeps a replaced key in its place, so the body's field order is stable.
        provider.extra_body.extend(later.extra_body);

        for server in layer.mcp {
            match config.mcp.iter_mut().find(|s| s.name == server.name) {
                Some(earlier) => *earlier = server,
                None => config.mcp.push(server),
            }
        }

        let (shell, later) = (&mut config.shell, layer.shell);
        shell.sandbox = later.sandbox.or(shell.sandbox);
        shell.network = later.network.or(shell.network);
        shell.background = later.background.or(shell.background);
        add_new(&mut shell.writable, later.writable);
        add_new(&mut shell.env_keep, later.env_keep);
        add_new(&mut shell.env_drop, later.env_drop);

        config.files.push(layer.file);
    }
    config
}

/// Appends the items of `later` that `list` does not hold yet.
fn add_new<T: PartialEq>(list: &mut Vec<T>, later: Vec<T>) {
    for item in later {
        if !list.contains(&item) {
            list.push(item);
        }
    }
}

/// Reads and checks a config file that must exist: a regular file (or a link to one) of at most
/// [`crate::source::CONFIG_CAP`] bytes.
///
/// # Errors
/// When the file is missing, not a regular file, too large, unreadable, not UTF-8, or invalid (see
/// [`parse`]).
pub fn read_file(path: &Path) -> Result<ConfigLayer> {
    read_if_exists(path)?.ok_or_else(|| Error::config("config file not found").at(path.display().to_string(), None))
}

/// Reads and checks a config file when it exists; `Ok(None)` when nothing is there (a dangling
/// link included, as for the user's other dotfiles).
///
/// # Errors
/// When something is there but is not a readable, valid config file (see [`read_file`]).
pub fn read_if_exists(path: &Path) -> Result<Option<ConfigLayer>> {
    let text = match crate::source::read_text(path, crate::source::CONFIG_CAP) {
        Ok(text) => text,
        Err(ReadError::NotFound) => return Ok(None),
        Err(ReadError::NotUtf8) => {
            return Err(Error::config("config file is not UTF-8 text").at(path.display().to_string(), None))
        }
        Err(e) => return Err(Error::config(e.to_string()).at(path.display().to_string(), None)),
    };
    parse(&text, path).map(Some)
}

/// The user's config file: `$XDG_CONFIG_HOME/toolhost/config.toml`, else
/// `$HOME/.config/toolhost/config.toml`; `None` when neither variable gives a folder.
pub fn user_config_path() -> Option<PathBuf> {
    user_config_path_from(std::env::var_os("XDG_CONFIG_HOME").as_deref(), std::env::var_os("HOME").as_deref())
}

/// The user's toolhost config folder (where `config.toml` and the trust store live), from the
/// environment as [`user_config_path`] finds it.
pub fn user_config_dir() -> Option<PathBuf> {
    user_config_dir_from(std::env::var_os("XDG_CONFIG_HOME").as_deref(), std::env::var_os("HOME").as_deref())
}

/// [`user_config_path`] from given values of `XDG_CONFIG_HOME` and `HOME`.
///
/// ```
/// use std::ffi::OsStr;
/// use std::path::PathBuf;
/// use toolhost::config::user_config_path_from;
///
/// let home = Some(OsStr::new("/home/me"));
/// let default = Some(PathBuf::from("/home/me/.config/toolhost/config.toml"));
/// assert_eq!(user_config_path_from(None, home), default);
/// // The XDG base directory spec ignores a relative XDG_CONFIG_HOME.
/// assert_eq!(user_config_path_from(Some(OsStr::new("rel")), home), default);
/// let xdg = Some(OsStr::new("/xdg"));
/// assert_eq!(user_config_path_from(xdg, home), Some(PathBuf::from("/xdg/toolhost/config.toml")));
/// ```
pub fn user_config_path_from(xdg_config_home: Option<&OsStr>, home: Option<&OsStr>) -> Option<PathBuf> {
    user_config_dir_from(xdg_config_home, home).map(|dir| dir.join("config.toml"))
}

/// [`user_config_dir`] from given values of `XDG_CONFIG_HOME` and `HOME`.
pub fn user_config_dir_from(xdg_config_home: Option<&OsStr>, home: Option<&OsStr>) -> Option<PathBuf> {
    // Both must be absolute: a relative one would make the config depend on the current folder.
    fn usable(v: Option<&OsStr>) -> Option<&Path> {
        v.map(Path::new).filter(|p| p.is_absolute())
    }
    if let Some(xdg) = usable(xdg_config_home) {
        return Some(xdg.join("toolhost"));
    }
    usable(home).map(|home| home.join(".config").join("toolhost"))
}

/// Parses and checks the text of the config file `file` (named in errors; relative `tools` entries
/// are joined to its folder).
///
/// # Errors
/// A config error naming the file, the line and the key: a TOML syntax error, an unknown key, a
/// value of the wrong type, or a value the checks in the module docs refuse.
///
/// ```
/// use std::path::Path;
///
/// let err = toolhost::config::parse("[limits]\noutput_chars = 0\n", Path::new("toolhost.toml")).unwrap_err();
/// assert_eq!(err.to_string(), "toolhost.toml:2: limits.output_chars: must be a positive integer, got 0");
/// ```
pub fn parse(text: &str, file: &Path) -> Result<ConfigLayer> {
    let shown = file.display().to_string();
    let fail = |offset: Option<usize>, message: String| {
        Error::config(message).at(shown.clone(), offset.map(|offset| line_of(text, offset)))
    };

    let de = toml::de::Deserializer::parse(text).map_err(|e| {
        let start = e.span().map(|s| s.start);
        let column = start.map(|o| format!(" at column {}", column_of(text, o))).unwrap_or_default();
        fail(start, format!("invalid TOML{column}: {}", one_line(e.message())))
    })?;
    let raw: RawFile = serde_path_to_error::deserialize(de).map_err(|e| {
        let key = key_path(e.path());
        let what = toml_words(e.inner().message());
        let message = if key.is_empty() { what } else { format!("{key}: {what}") };
        fail(e.inner().span().map(|s| s.start), message)
    })?;

    // Relative tool folders belong to the file's folder, wherever toolhost was started.
    let folder = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    let folder = folder.parent().unwrap_or(Path::new(""));
    let tools = raw.tools.unwrap_or_default().iter().map(|t| normalize(&folder.join(t))).collect();

    let limits = raw.limits.unwrap_or_default();
    let limits = LimitsConfig {
        scheme_call_s: limits.scheme_call_s.map(|s| s.0),
        program_s: limits.program_s.map(|s| s.0),
        shell_timeout_s: limits.shell_timeout_s.map(|n| n.0),
        output_chars: limits.output_chars.map(|n| usize::try_from(n.0).unwrap_or(usize::MAX)),
        read_lines: limits.read_lines.map(|n| usize::try_from(n.0).unwrap_or(usize::MAX)),
        isolate: limits.isolate,
        worker_memory_mb: limits.worker_memory_mb.map(|n| n.0),
    };

    let guard = raw.guard.unwrap_or_default();
    let rules = guard
        .rule
        .map(|r| r.0)
        .unwrap_or_default()
        .into_iter()
        .map(|rule| {
            let origin = format!("{shown}:{}", line_of(text, rule.span().start));
            let rule = rule.into_inner();
            RuleConfig {
                tool: rule.tool.0,
                path: rule.path.map(|p| p.0),
                action: rule.action,
                reason: rule.reason,
                origin,
            }
        })
        .collect();

    let provider = raw.provider.unwrap_or_default();
    let mut set_in = BTreeMap::new();
    for (key, set) in [("base_url", provider.base_url.is_some()), ("api_key_env", provider.api_key_env.is_some())] {
        if set {
            set_in.insert(key.to_string(), file.to_path_buf());
        }
    }
    let provider = ProviderConfig {
        preset: provider.preset,
        api: provider.api,
        max_tokens: provider.max_tokens.map(|n| n.0),
        stream: provider.stream,
        set_in,
        base_url: provider.base_url.map(|u| u.0),
        model: provider.model.map(|m| m.0),
        api_key_env: provider.api_key_env.map(|n| n.0),
        dialect: provider.dialect,
        tools: provider.tools,
        strict_tools: provider.strict_tools,
        timeout_s: provider.timeout_s.map(|s| s.0),
        max_calls_per_reply: provider.max_calls_per_reply.map(|n| n.0),
        extra_body: provider.extra_body.map(|b| b.0).unwrap_or_default(),
    };

    let mcp = mcp_servers(raw.mcp.map(|m| m.0).unwrap_or_default(), text, &shown)?;

    let raw_shell = raw.shell.unwrap_or_default();
    let shell = ShellConfig {
        sandbox: raw_shell.sandbox,
        network: raw_shell.network,
        background: raw_shell.background,
        writable: raw_shell.writable.unwrap_or_default().iter().map(|w| normalize(&folder.join(&w.0))).collect(),
        env_keep: raw_shell.env_keep.unwrap_or_default().into_iter().map(|n| n.0).collect(),
        env_drop: raw_shell.env_drop.unwrap_or_default().into_iter().map(|n| n.0).collect(),
    };

    Ok(ConfigLayer {
        file: file.to_path_buf(),
        tools,
        limits,
        guard_default: guard.default,
        rules,
        scripts_trusted: raw.scripts.and_then(|s| s.trusted),
        provider,
        mcp,
        shell,
    })
}

/// Checks what one entry cannot check alone: one transport per server, names unique in the file.
fn mcp_servers(entries: Vec<Spanned<RawMcp>>, text: &str, shown: &str) -> Result<Vec<McpServerConfig>> {
    let mut servers: Vec<McpServerConfig> = Vec::new();
    // Each accepted server's name line, for the duplicate-name message.
    let mut name_lines: Vec<usize> = Vec::new();
    for (i, entry) in entries.into_iter().enumerate() {
        let key = format!("mcp[{}]", i + 1);
        let line = line_of(text, entry.span().start);
        let fail = |what: String| Error::config(format!("{key}{what}")).at(shown, Some(line));
        let server = entry.into_inner();
        let name_line = line_of(text, server.name.span().start);
        let name = server.name.into_inner().0;
        let earlier = servers.iter().zip(&name_lines).enumerate().find(|(_, (s, _))| s.name == name);
        if let Some((j, (_, first_line))) = earlier {
            let what = format!(
                "{key}.name: {name:?} is already the name of mcp[{}] (line {first_line}); \
                 each server needs its own name",
                j + 1
            );
            return Err(Error::config(what).at(shown, Some(name_line)));
        }
        let transport = match (server.command, server.url) {
            (Some(command), None) => McpTransport::Stdio {
                command: command.0,
                args: server.args.unwrap_or_default(),
                env: server.env.unwrap_or_default(),
            },
            (None, Some(url)) => {
                let stdio_only = if server.args.is_some() {
                    Some("args")
                } else if server.env.is_some() {
                    Some("env")
                } else {
                    None
                };
                if let Some(extra) = stdio_only {
                    return Err(fail(format!(
                        ".{extra}: only goes with `command`; a server reached by `url` takes no {extra}"
                    )));
                }
                McpTransport::Http { url: url.0 }
            }
            (Some(_), Some(_)) => {
                return Err(fail(
                    ": has both `command` and `url`; give `command` for a local server over stdio or `url` for \
                     streamable HTTP, not both"
                        .to_string(),
                ));
            }
            (None, None) => {
                return Err(fail(
                    ": needs `command` (a local server over stdio) or `url` (a streamable HTTP server)".to_string(),
                ));
            }
        };
        name_lines.push(name_line);
        servers.push(McpServerConfig {
            name,
            transport,
            timeout_s: server.timeout_s.map(|s| s.0),
            origin: format!("{shown}:{line}"),
        });
    }
    Ok(servers)
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end].iter().filter(|&&b| b == b'\n').count() + 1
}

/// The 1-based column (in characters) of byte `offset` in `text`.
fn column_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    let line_start = text.as_bytes()[..end].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    // `offset` comes from the parser and should sit on a char boundary; count bytes if it does not.
    text.get(line_start..end).map_or(end - line_start, |s| s.chars().count()) + 1
}

fn one_line(message: &str) -> String {
    message.trim().replace('\n', "; ")
}

/// serde's words for a type error, in TOML's terms (tables and arrays, keys not fields).
fn toml_words(message: &str) -> String {
    one_line(message)
        .replacen("unknown field", "unknown key", 1)
        .replacen("missing field", "missing required key", 1)
        .replacen("unknown variant", "unknown value", 1)
        .replace("invalid type: map", "invalid type: table")
        .replace("invalid type: sequence", "invalid type: array")
        .replace("expected a sequence", "expected an array")
        .replace("expected a map", "expected a table")
}

/// Renders a serde path as a TOML key path: `guard.rule[2].path`, entries counted from 1.
fn key_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => {
                let _ = write!(out, "[{}]", index + 1);
            }
            // `toml::Spanned` is deserialized as a struct with private field names; they are not keys.
            Segment::Map { key } if key.starts_with("$__") => {}
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                let bare = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if bare {
                    out.push_str(key);
                } else {
                    let _ = write!(out, "{key:?}");
                }
            }
            Segment::Unknown => out.push_str(".?"),
        }
    }
    out
}

/// Joins without `.` components or a trailing slash, so the same folder named twice compares equal.
fn normalize(path: &Path) -> PathBuf {
    path.components().filter(|c| !matches!(c, Component::CurDir)).collect()
}

// ---- The file as serde reads it: every key optional, every value checked as it is read. ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    tools: Option<Vec<String>>,
    limits: Option<RawLimits>,
    guard: Option<RawGuard>,
    scripts: Option<RawScripts>,
    provider: Option<RawProvider>,
    mcp: Option<TableArray<RawMcp>>,
    shell: Option<RawShell>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShell {
    sandbox: Option<SandboxMode>,
    network: Option<bool>,
    background: Option<bool>,
    writable: Option<Vec<FolderName>>,
    env_keep: Option<Vec<EnvPattern>>,
    env_drop: Option<Vec<EnvPattern>>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    scheme_call_s: Option<Seconds>,
    program_s: Option<Seconds>,
    shell_timeout_s: Option<PositiveInt>,
    output_chars: Option<PositiveInt>,
    read_lines: Option<PositiveInt>,
    isolate: Option<bool>,
    worker_memory_mb: Option<PositiveInt>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGuard {
    default: Option<Action>,
    rule: Option<TableArray<RawRule>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    tool: ToolGlob,
    path: Option<PathGlob>,
    action: Action,
    reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScripts {
    trusted: Option<bool>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProvider {
    preset: Option<Preset>,
    api: Option<Api>,
    max_tokens: Option<PositiveInt>,
    stream: Option<bool>,
    base_url: Option<HttpUrl>,
    model: Option<NonEmpty>,
    api_key_env: Option<EnvName>,
    dialect: Option<Dialect>,
    tools: Option<crate::code_mode::ToolsAs>,
    strict_tools: Option<bool>,
    timeout_s: Option<Seconds>,
    max_calls_per_reply: Option<PositiveInt>,
    extra_body: Option<ExtraBody>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMcp {
    name: Spanned<McpName>,
    command: Option<NonEmpty>,
    args: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
    url: Option<HttpUrl>,
    timeout_s: Option<Seconds>,
}

/// An array of tables (`[[guard.rule]]`, `[[mcp]]`), each entry with its span for its line.
struct TableArray<T>(Vec<Spanned<T>>);

/// The header an array-of-tables entry is written under, for the error when it is written as one table.
trait Header {
    const HEADER: &'static str;
}

impl Header for RawRule {
    const HEADER: &'static str = "[[guard.rule]]";
}

impl Header for RawMcp {
    const HEADER: &'static str = "[[mcp]]";
}

impl<'de, T: Deserialize<'de> + Header> Deserialize<'de> for TableArray<T> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Entries<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de> + Header> de::Visitor<'de> for Entries<T> {
            type Value = TableArray<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(f, "an array of tables, each under its own {} header", T::HEADER)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Self::Value, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = seq.next_element()? {
                    entries.push(entry);
                }
                Ok(TableArray(entries))
            }
        }
        d.deserialize_seq(Entries(std::marker::PhantomData))
    }
}

/// Reads a value as TOML sees it, then checks it, so a refusal can say what was there.
fn checked<'de, D, T>(
    d: D,
    check: impl FnOnce(toml::Value) -> std::result::Result<T, String>,
) -> std::result::Result<T, D::Error>
where
    D: de::Deserializer<'de>,
{
    let value = toml::Value::deserialize(d)?;
    check(value).map_err(de::Error::custom)
}

/// A TOML value as a person would recognise it in a message.
fn describe(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => format!("{s:?}"),
        toml::Value::Integer(i) => i.to_string(),
        // `{:?}` keeps the `.0` of a whole float, so `30.0` does not read as the integer 30.
        toml::Value::Float(f) => format!("{f:?}"),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Datetime(d) => format!("the date-time {d}"),
        toml::Value::Array(_) => "an array".to_string(),
        toml::Value::Table(_) => "a table".to_string(),
    }
}

/// A count: a TOML integer above zero.
struct PositiveInt(u64);

impl<'de> Deserialize<'de> for PositiveInt {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        checked(d, |v| match v {
            toml::Value::Integer(n) if n > 0 => Ok(PositiveInt(n.unsigned_abs())),
            other => Err(format!("must be a positive integer, got {}", describe(&other))),
        })
    }
}

/// A time limit: a positive, finite number of seconds (integer or float) that fits a `Duration`.
struct Seconds(f64);

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        checked(d, |v| {
            let seconds = match v {
                toml::Value::Integer(n) => n as f64,
                toml::Value::Float(f) => f,
                ref other => return Err(format!("must be a positive number of seconds, got {}", describe(other))),
            };
            // The core turns it into a `Duration`, whose constructor panics on what this refuses.
            if seconds > 0.0 && Duration::try_from_secs_f64(seconds).is_ok() {
                Ok(Seconds(seconds))
            } else {
                Err(format!("must be a positive number of seconds, got {}", describe(&v)))
            }
        })
    }
}

/// A string that must not be empty.
struct NonEmpty(String);

impl<'de> Deserialize<'de> for NonEmpty {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.trim().is_empty() {
            return Err(de::Error::custom("must not be empty"));
        }
        Ok(NonEmpty(s))
    }
}

fn check_glob(pattern: &str) -> std::result::Result<(), String> {
    globset::Glob::new(pattern).map(|_| ()).map_err(|e| format!("{pattern:?} is not a valid glob: {}", e.kind()))
}

/// A glob over tool names.
struct ToolGlob(String);

impl<'de> Deserialize<'de> for ToolGlob {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.is_empty() {
            return Err(de::Error::custom("must not be empty; `*` matches every tool"));
        }
        check_glob(&s).map_err(de::Error::custom)?;
        Ok(ToolGlob(s))
    }
}

/// A glob over a path argument, relative to the workspace root.
struct PathGlob(String);

impl<'de> Deserialize<'de> for PathGlob {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.is_empty() {
            return Err(de::Error::custom("must not be empty; leave `path` out to match every call"));
        }
        // The guard matches paths relative to the root, so an absolute glob would never match.
        if s.starts_with('/') || s.starts_with('\\') {
            return Err(de::Error::custom(format!(
                "{s:?} is absolute; path globs are relative to the workspace root (e.g. \"secrets/**\")"
            )));
        }
        check_glob(&s).map_err(de::Error::custom)?;
        Ok(PathGlob(s))
    }
}

/// A URL that starts with `http://` or `https://`.
struct HttpUrl(String);

impl<'de> Deserialize<'de> for HttpUrl {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let lower = s.to_ascii_lowercase();
        let rest = lower.strip_prefix("http://").or_else(|| lower.strip_prefix("https://"));
        match rest {
            Some(host) if !host.is_empty() => Ok(HttpUrl(s)),
            Some(_) => Err(de::Error::custom(format!("{s:?} has no host after the scheme"))),
            None => Err(de::Error::custom(format!("must start with http:// or https://, got {s:?}"))),
        }
    }
}

/// The name of an environment variable.
struct EnvName(String);

impl<'de> Deserialize<'de> for EnvName {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let mut chars = s.chars();
        let ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok {
            // The value is not echoed: when this fails it may well be the key itself.
            return Err(de::Error::custom(
                "must be the name of an environment variable that holds the API key (like OPENAI_API_KEY), \
                 never the key itself",
            ));
        }
        Ok(EnvName(s))
    }
}

/// A folder named in the config: not empty, and not starting with `~` (which no shell expands here).
struct FolderName(String);

impl<'de> Deserialize<'de> for FolderName {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.trim().is_empty() {
            return Err(de::Error::custom("must not be empty"));
        }
        if s.starts_with('~') {
            return Err(de::Error::custom(format!(
                "{s:?}: `~` is not expanded; give the full path (or one relative to this file's folder)"
            )));
        }
        Ok(FolderName(s))
    }
}

/// An environment variable's name, where `*` may stand for any characters (`AWS_*`).
struct EnvPattern(String);

impl<'de> Deserialize<'de> for EnvPattern {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.is_empty() || !s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '*') {
            return Err(de::Error::custom(format!(
                "must be a variable name of letters, digits and `_`, where `*` stands for any characters, got {s:?}"
            )));
        }
        Ok(EnvPattern(s))
    }
}

/// An MCP server's name: it prefixes the server's tool names.
struct McpName(String);

impl<'de> Deserialize<'de> for McpName {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.is_empty() || !s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(de::Error::custom(format!(
                "must be letters, digits, `_` or `-` (its tools are named NAME.tool), got {s:?}"
            )));
        }
        Ok(McpName(s))
    }
}

/// `provider.extra_body` as JSON: integers stay integers, floats stay floats, date-times become
/// RFC 3339 strings (JSON has no date-time). Keys come out sorted, as the TOML table holds them.
struct ExtraBody(Map<String, Value>);

/// Request fields toolhost sends itself; `extra_body` may not replace them.
const RESERVED_BODY_KEYS: [&str; 3] = ["tools", "messages", "model"];

impl<'de> Deserialize<'de> for ExtraBody {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let table = toml::Table::deserialize(d)?;
        if let Some(key) = RESERVED_BODY_KEYS.into_iter().find(|k| table.contains_key(*k)) {
            return Err(de::Error::custom(format!(
                "may not set `{key}`: toolhost sends tools, messages and model itself \
                 (use provider.model for the model)"
            )));
        }
        let mut body = Map::new();
        for (key, value) in table {
            let value = to_json(value).map_err(|what| de::Error::custom(format!("{key}: {what}")))?;
            body.insert(key, value);
        }
        Ok(ExtraBody(body))
    }
}

fn to_json(value: toml::Value) -> std::result::Result<Value, String> {
    Ok(match value {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::from(i),
        toml::Value::Float(f) => Value::Number(
            serde_json::Number::from_f64(f).ok_or_else(|| format!("{f:?} is not a number JSON can carry"))?,
        ),
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(items) => {
            Value::Array(items.into_iter().map(to_json).collect::<std::result::Result<_, _>>()?)
        }
        toml::Value::Table(table) => {
            let mut map = Map::new();
            for (k, v) in table {
                map.insert(k, to_json(v)?);
            }
            Value::Object(map)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_ok(text: &str) -> ConfigLayer {
        match parse(text, Path::new("/w/toolhost.toml")) {
            Ok(layer) => layer,
            Err(e) => panic!("{e}"),
        }
    }

    /// The error's Display for `text` read as `/w/toolhost.toml`.
    fn parse_err(text: &str) -> String {
        let err = parse(text, Path::new("/w/toolhost.toml")).unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::Config);
        assert_eq!(err.file(), Some("/w/toolhost.toml"));
        err.to_string()
    }

    const FULL: &str = r#"
tools = ["tools", "../shared/./tools/", "/abs/tools"]

[limits]
scheme_call_s = 2.5
shell_timeout_s = 60
output_chars = 1000
read_lines = 20

[guard]
default = "confirm"

[[guard.rule]]
tool = "shell-exec"
action = "confirm"

[[guard.rule]]
tool = "fs-*"
path = "secrets/**"
action = "deny"
reason = "secrets stay private"

[scripts]
trusted = true

[provider]
base_url = "https://api.example.com/v1"
model = "m"
api_key_env = "MY_KEY"
dialect = "pformat"
strict_tools = true
timeout_s = 90
extra_body = { temperature = 0.2, max_tokens = 512, stop = ["x"], opts = { a = 1.0, when = 1979-05-27T07:32:00Z } }

[[mcp]]
name = "github"
command = "npx"
args = ["-y", "some-mcp-server"]
env = { TOKEN = "t" }
timeout_s = 60

[[mcp]]
name = "web_2"
url = "http://127.0.0.1:3001/mcp"

[shell]
sandbox = "best-effort"
network = true
background = false
writable = ["cache", "/abs/out/"]
env_keep = ["GITHUB_TOKEN"]
env_drop = ["AWS_*", "SSH_AUTH_SOCK"]
"#;

    #[test]
    fn every_section_is_read_from_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("toolhost.toml");
        std::fs::write(&file, FULL).unwrap();
        let layer = read_file(&file).unwrap();
        let at = |line: usize| format!("{}:{line}", file.display());
        assert_eq!(layer.file, file);
        assert_eq!(
            layer.tools,
            vec![dir.path().join("tools"), dir.path().join("../shared/tools"), PathBuf::from("/abs/tools")]
        );
        assert_eq!(
            layer.limits,
            LimitsConfig {
                scheme_call_s: Some(2.5),
                program_s: None,
                shell_timeout_s: Some(60),
                output_chars: Some(1000),
                read_lines: Some(20),
                isolate: None,
                worker_memory_mb: None,
            }
        );
        assert_eq!(layer.guard_default, Some(Action::Confirm));
        assert_eq!(layer.rules.len(), 2);
        assert_eq!(layer.rules[0].tool, "shell-exec");
        assert_eq!(layer.rules[0].path, None);
        assert_eq!(layer.rules[0].action, Action::Confirm);
        assert_eq!(layer.rules[0].origin, at(13));
        assert_eq!(layer.rules[1].path.as_deref(), Some("secrets/**"));
        assert_eq!(layer.rules[1].action, Action::Deny);
        assert_eq!(layer.rules[1].reason.as_deref(), Some("secrets stay private"));
        assert_eq!(layer.rules[1].origin, at(17));
        assert_eq!(layer.scripts_trusted, Some(true));

        let p = &layer.provider;
        assert_eq!(p.base_url.as_deref(), Some("https://api.example.com/v1"));
        assert_eq!(p.model.as_deref(), Some("m"));
        assert_eq!(p.api_key_env.as_deref(), Some("MY_KEY"));
        assert_eq!(p.dialect, Some(Dialect::Pformat));
        assert_eq!(p.strict_tools, Some(true));
        assert_eq!(p.timeout_s, Some(90.0));
        let body = serde_json::to_string(&p.extra_body).unwrap();
        // Integers stay integers, floats stay floats (1.0 too), date-times become strings.
        assert_eq!(
            body,
            r#"{"max_tokens":512,"opts":{"a":1.0,"when":"1979-05-27T07:32:00Z"},"stop":["x"],"temperature":0.2}"#
        );
        assert!(p.extra_body["max_tokens"].is_i64());
        assert!(p.extra_body["opts"]["a"].is_f64());

        assert_eq!(layer.mcp.len(), 2);
        let github = &layer.mcp[0];
        assert_eq!(github.name, "github");
        assert_eq!(github.timeout_s, Some(60.0));
        assert_eq!(github.origin, at(35));
        assert_eq!(
            github.transport,
            McpTransport::Stdio {
                command: "npx".into(),
                args: vec!["-y".into(), "some-mcp-server".into()],
                env: BTreeMap::from([("TOKEN".to_string(), "t".to_string())]),
            }
        );
        assert_eq!(layer.mcp[1].transport, McpTransport::Http { url: "http://127.0.0.1:3001/mcp".into() });
        assert_eq!(layer.mcp[1].timeout_s, None);

        assert_eq!(
            layer.shell,
            ShellConfig {
                sandbox: Some(SandboxMode::BestEffort),
                network: Some(true),
                background: Some(false),
                writable: vec![dir.path().join("cache"), PathBuf::from("/abs/out")],
                env_keep: vec!["GITHUB_TOKEN".into()],
                env_drop: vec!["AWS_*".into(), "SSH_AUTH_SOCK".into()],
            }
        );
    }

    #[test]
    fn an_empty_file_sets_nothing() {
        let layer = parse_ok("# nothing here\n");
        assert_eq!(layer, ConfigLayer { file: PathBuf::from("/w/toolhost.toml"), ..ConfigLayer::default() });
        assert_eq!(merge([layer]), Config { files: vec![PathBuf::from("/w/toolhost.toml")], ..Config::default() });
    }

    #[test]
    fn the_shipped_example_parses_and_sets_every_key() {
        let layer = parse(include_str!("../toolhost.example.toml"), Path::new("/repo/toolhost.example.toml"))
            .unwrap_or_else(|e| panic!("{e}"));
        let l = &layer.limits;
        assert!(l.scheme_call_s.is_some() && l.shell_timeout_s.is_some());
        assert!(l.output_chars.is_some() && l.read_lines.is_some());
        assert!(!layer.tools.is_empty() && layer.guard_default.is_some() && layer.scripts_trusted.is_some());
        assert!(layer.rules.iter().any(|r| r.path.is_some() && r.reason.is_some()));
        let p = &layer.provider;
        assert!(p.base_url.is_some() && p.model.is_some() && p.api_key_env.is_some() && p.dialect.is_some());
        assert!(p.strict_tools.is_some() && p.timeout_s.is_some() && !p.extra_body.is_empty());
        assert_eq!(p.max_calls_per_reply, Some(32));
        assert!(layer.mcp.iter().any(
            |s| matches!(&s.transport, McpTransport::Stdio { args, env, .. } if !args.is_empty() && !env.is_empty())
        ));
        assert!(layer.mcp.iter().any(|s| matches!(s.transport, McpTransport::Http { .. }) && s.timeout_s.is_some()));
        let shell = &layer.shell;
        assert!(shell.sandbox.is_some() && shell.network.is_some() && shell.background.is_some());
        assert!(!shell.writable.is_empty() && !shell.env_keep.is_empty() && !shell.env_drop.is_empty());
    }

    #[test]
    fn shell_settings_merge_key_by_key_and_lists_accumulate() {
        let user = parse(
            "[shell]\nsandbox = \"best-effort\"\nnetwork = true\nwritable = [\"/c\"]\nenv_keep = [\"A\"]\n",
            Path::new("/u/config.toml"),
        )
        .unwrap();
        let project = parse(
            "[shell]\nnetwork = false\nwritable = [\"out\", \"/c\"]\nenv_drop = [\"B_*\"]\n",
            Path::new("/w/toolhost.toml"),
        )
        .unwrap();
        let shell = merge([user, project]).shell;
        assert_eq!(shell.sandbox, Some(SandboxMode::BestEffort));
        assert_eq!(shell.network, Some(false));
        assert_eq!(shell.background, None);
        assert_eq!(shell.writable, vec![PathBuf::from("/c"), PathBuf::from("/w/out")]);
        assert_eq!((shell.env_keep, shell.env_drop), (vec!["A".to_string()], vec!["B_*".to_string()]));
    }

    #[test]
    fn shell_values_are_checked() {
        let msg = parse_err("[shell]\nsandbox = \"loose\"\n");
        assert!(msg.starts_with("/w/toolhost.toml:2: shell.sandbox: unknown value `loose`, expected one of"), "{msg}");
        assert!(msg.contains("`best-effort`"), "{msg}");
        let msg = parse_err("[shell]\nwritable = [\"~/.cargo\"]\n");
        assert!(msg.contains("shell.writable[1]: \"~/.cargo\": `~` is not expanded"), "{msg}");
        let msg = parse_err("[shell]\nenv_keep = [\"MY KEY\"]\n");
        assert!(msg.contains("shell.env_keep[1]: must be a variable name"), "{msg}");
        let msg = parse_err("[shell]\nnetworks = true\n");
        assert!(msg.starts_with("/w/toolhost.toml:2: shell.networks: unknown key `networks`"), "{msg}");
    }

    #[test]
    fn merge_overrides_key_by_key_and_orders_rules_and_servers() {
        let user = parse(
            r#"
tools = ["tools", "common"]
[limits]
read_lines = 100
output_chars = 9000
[guard]
default = "deny"
[[guard.rule]]
tool = "user-*"
action = "allow"
[provider]
model = "user-model"
extra_body = { temperature = 0.5, top_p = 0.9 }
[[mcp]]
name = "a"
command = "a-old"
[[mcp]]
name = "b"
command = "b"
"#,
            Path::new("/home/u/.config/toolhost/config.toml"),
        )
        .unwrap();
        let project = parse(
            r#"
tools = ["tools", "/home/u/.config/toolhost/common"]
[limits]
read_lines = 50
[[guard.rule]]
tool = "proj-*"
action = "deny"
[provider]
base_url = "http://localhost:1/v1"
extra_body = { temperature = 0.1, seed = 7 }
[[mcp]]
name = "c"
url = "http://localhost:2/mcp"
[[mcp]]
name = "a"
url = "http://localhost:3/mcp"
"#,
            Path::new("/w/toolhost.toml"),
        )
        .unwrap();
        let config = merge([user, project]);

        // Tools accumulate, the user's first, each folder once.
        assert_eq!(
            config.tools,
            vec![
                PathBuf::from("/home/u/.config/toolhost/tools"),
                PathBuf::from("/home/u/.config/toolhost/common"),
                PathBuf::from("/w/tools"),
            ]
        );
        // Limits key by key.
        assert_eq!(config.limits.read_lines, Some(50));
        assert_eq!(config.limits.output_chars, Some(9000));
        assert_eq!(config.limits.scheme_call_s, None);
        assert_eq!(config.guard_default, Some(Action::Deny));
        // The project's rules first.
        let tools: Vec<&str> = config.rules.iter().map(|r| r.tool.as_str()).collect();
        assert_eq!(tools, ["proj-*", "user-*"]);
        assert_eq!(config.rules[1].origin, "/home/u/.config/toolhost/config.toml:8");
        // Provider fields and extra_body key by key.
        assert_eq!(config.provider.model.as_deref(), Some("user-model"));
        assert_eq!(config.provider.base_url.as_deref(), Some("http://localhost:1/v1"));
        assert_eq!(
            serde_json::to_string(&config.provider.extra_body).unwrap(),
            r#"{"temperature":0.1,"top_p":0.9,"seed":7}"#
        );
        // Servers by name: `a` replaced in its place, `c` appended.
        let names: Vec<&str> = config.mcp.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(config.mcp[0].transport, McpTransport::Http { url: "http://localhost:3/mcp".into() });
        assert_eq!(
            config.files,
            vec![PathBuf::from("/home/u/.config/toolhost/config.toml"), PathBuf::from("/w/toolhost.toml")]
        );
    }

    #[test]
    fn an_unknown_key_names_the_allowed_keys() {
        let msg = parse_err("[limits]\nread_lines = 5\noutput_char = 9\n");
        assert!(
            msg.starts_with("/w/toolhost.toml:3: limits.output_char: unknown key `output_char`, expected one of"),
            "{msg}"
        );
        assert!(msg.contains("`output_chars`"), "{msg}");

        let msg = parse_err("toolz = []\n");
        assert!(msg.starts_with("/w/toolhost.toml:1: toolz: unknown key `toolz`"), "{msg}");
        assert!(msg.contains("`tools`") && msg.contains("`mcp`"), "{msg}");

        let rules = "[[guard.rule]]\ntool = \"a\"\naction = \"deny\"\n";
        let msg = parse_err(&format!("{rules}[[guard.rule]]\ntool = \"b\"\naction = \"deny\"\npaths = \"x\"\n"));
        assert!(msg.starts_with("/w/toolhost.toml:7: guard.rule[2].paths: unknown key `paths`"), "{msg}");
    }

    #[test]
    fn a_wrong_type_names_file_line_and_key() {
        let msg = parse_err("[limits]\n\noutput_chars = \"big\"\n");
        assert_eq!(msg, "/w/toolhost.toml:3: limits.output_chars: must be a positive integer, got \"big\"");
        let msg = parse_err("[limits]\nread_lines = 2.0\n");
        assert_eq!(msg, "/w/toolhost.toml:2: limits.read_lines: must be a positive integer, got 2.0");
        let msg = parse_err("[scripts]\ntrusted = \"yes\"\n");
        assert_eq!(msg, "/w/toolhost.toml:2: scripts.trusted: invalid type: string \"yes\", expected a boolean");
        let msg = parse_err("[guard]\ndefault = \"maybe\"\n");
        assert!(msg.starts_with("/w/toolhost.toml:2: guard.default: unknown value `maybe`"), "{msg}");
        let msg = parse_err("[guard.rule]\ntool = \"x\"\naction = \"deny\"\n");
        let expected =
            "guard.rule: invalid type: table, expected an array of tables, each under its own [[guard.rule]] header";
        assert!(msg.contains(expected), "{msg}");
        let msg = parse_err("[[guard.rule]]\naction = \"deny\"\n");
        assert_eq!(msg, "/w/toolhost.toml:1: guard.rule[1]: missing required key `tool`");
    }

    #[test]
    fn a_zero_or_negative_limit_is_refused() {
        let msg = parse_err("[limits]\noutput_chars = 0\n");
        assert_eq!(msg, "/w/toolhost.toml:2: limits.output_chars: must be a positive integer, got 0");
        let msg = parse_err("[limits]\nshell_timeout_s = -5\n");
        assert_eq!(msg, "/w/toolhost.toml:2: limits.shell_timeout_s: must be a positive integer, got -5");
        let msg = parse_err("[limits]\nscheme_call_s = 0.0\n");
        assert_eq!(msg, "/w/toolhost.toml:2: limits.scheme_call_s: must be a positive number of seconds, got 0.0");
        let msg = parse_err("[limits]\nscheme_call_s = inf\n");
        assert_eq!(msg, "/w/toolhost.toml:2: limits.scheme_call_s: must be a positive number of seconds, got inf");
        let msg = parse_err("[[mcp]]\nname = \"x\"\ncommand = \"x\"\ntimeout_s = nan\n");
        assert!(msg.starts_with("/w/toolhost.toml:4: mcp[1].timeout_s: must be a positive number of seconds"), "{msg}");
        assert_eq!(parse_ok("[limits]\nscheme_call_s = 1\n").limits.scheme_call_s, Some(1.0));
    }

    #[test]
    fn a_bad_glob_gives_globsets_reason() {
        let msg = parse_err("[[guard.rule]]\ntool = \"fs-*\"\npath = \"secrets/[a\"\naction = \"deny\"\n");
        assert!(
            msg.starts_with("/w/toolhost.toml:3: guard.rule[1].path: \"secrets/[a\" is not a valid glob: unclosed"),
            "{msg}"
        );
        let msg = parse_err("[[guard.rule]]\ntool = \"{a\"\naction = \"deny\"\n");
        assert!(
            msg.starts_with("/w/toolhost.toml:2: guard.rule[1].tool: \"{a\" is not a valid glob: unclosed"),
            "{msg}"
        );
        let msg = parse_err("[[guard.rule]]\ntool = \"*\"\npath = \"/etc/**\"\naction = \"deny\"\n");
        assert!(msg.starts_with("/w/toolhost.toml:3: guard.rule[1].path: \"/etc/**\" is absolute"), "{msg}");
    }

    #[test]
    fn mcp_entries_are_checked() {
        let first = "[[mcp]]\nname = \"a\"\ncommand = \"x\"\n\n";
        let msg = parse_err(&format!("{first}[[mcp]]\nname = \"b\"\ncommand = \"x\"\nurl = \"http://h/mcp\"\n"));
        assert!(msg.starts_with("/w/toolhost.toml:5: mcp[2]: has both `command` and `url`"), "{msg}");
        let msg = parse_err("[[mcp]]\nname = \"a\"\n");
        assert!(msg.starts_with("/w/toolhost.toml:1: mcp[1]: needs `command`"), "{msg}");
        let msg = parse_err("[[mcp]]\nname = \"a\"\nurl = \"ftp://h\"\n");
        assert_eq!(msg, "/w/toolhost.toml:3: mcp[1].url: must start with http:// or https://, got \"ftp://h\"");
        let msg = parse_err("[[mcp]]\nname = \"a.b\"\ncommand = \"x\"\n");
        assert!(msg.starts_with("/w/toolhost.toml:2: mcp[1].name: must be letters, digits"), "{msg}");
        let msg = parse_err("[[mcp]]\nname = \"a\"\nurl = \"http://h\"\nargs = [\"x\"]\n");
        assert!(msg.starts_with("/w/toolhost.toml:1: mcp[1].args: only goes with `command`"), "{msg}");
        let msg = parse_err("[[mcp]]\nname = \"a\"\ncommand = \"x\"\nenv = { K = 1 }\n");
        assert!(
            msg.starts_with("/w/toolhost.toml:4: mcp[1].env.K: invalid type: integer `1`, expected a string"),
            "{msg}"
        );
        let msg = parse_err("[[mcp]]\nname = \"a\"\ncommand = \"x\"\n[[mcp]]\nname = \"a\"\nurl = \"http://h\"\n");
        assert_eq!(
            msg,
            "/w/toolhost.toml:5: mcp[2].name: \"a\" is already the name of mcp[1] (line 2); \
             each server needs its own name"
        );
    }

    #[test]
    fn provider_values_are_checked() {
        let msg = parse_err("[provider]\nmodel = \"m\"\nextra_body = { temperature = 0.1, tools = [] }\n");
        assert!(msg.starts_with("/w/toolhost.toml:3: provider.extra_body: may not set `tools`"), "{msg}");
        let msg = parse_err("[provider]\n[provider.extra_body]\nmessages = []\n");
        assert!(msg.starts_with("/w/toolhost.toml:2: provider.extra_body: may not set `messages`"), "{msg}");
        let msg = parse_err("[provider]\nbase_url = \"localhost:8080\"\n");
        assert_eq!(
            msg,
            "/w/toolhost.toml:2: provider.base_url: must start with http:// or https://, got \"localhost:8080\""
        );
        let msg = parse_err("[provider]\napi_key_env = \"sk-secret123\"\n");
        assert!(
            msg.starts_with("/w/toolhost.toml:2: provider.api_key_env: must be the name of an environment variable")
        );
        assert!(!msg.contains("secret123"), "the key itself must not be echoed: {msg}");
        let msg = parse_err("[provider]\ndialect = \"xml\"\n");
        assert!(msg.starts_with("/w/toolhost.toml:2: provider.dialect: unknown value `xml`"), "{msg}");
        let msg = parse_err("[provider]\nextra_body = { \"top p\" = nan }\n");
        assert!(msg.contains("provider.extra_body: top p: NaN is not a number JSON can carry"), "{msg}");
    }

    #[test]
    fn a_toml_syntax_error_gives_its_line() {
        let msg = parse_err("[limits]\nread_lines = 5\nread_lines = 6\n");
        assert!(msg.starts_with("/w/toolhost.toml:3: invalid TOML at column 1: "), "{msg}");
        let msg = parse_err("# a comment\n\n[limits\n");
        assert!(msg.starts_with("/w/toolhost.toml:3: invalid TOML at column 8: "), "{msg}");
        assert!(!msg.contains('\n'), "{msg}");
    }

    #[test]
    fn lines_are_counted_from_byte_offsets() {
        let text = "a\nbé\nc";
        assert_eq!(line_of(text, 0), 1);
        assert_eq!(line_of(text, 2), 2);
        assert_eq!(line_of(text, 6), 3);
        assert_eq!(line_of(text, 99), 3);
        assert_eq!(column_of(text, 5), 3);
    }

    #[test]
    fn files_are_read_from_disk() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.toml");
        let err = read_file(&missing).unwrap_err();
        assert_eq!(err.to_string(), format!("{}: config file not found", missing.display()));
        assert_eq!(read_if_exists(&missing).unwrap(), None);

        let file = dir.path().join("toolhost.toml");
        std::fs::write(&file, "tools = [\"t\"]\n[limits]\noutput_chars = 0\n").unwrap();
        let err = read_if_exists(&file).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{}:3: limits.output_chars: must be a positive integer, got 0", file.display())
        );
        assert_eq!(err.line(), Some(3));

        std::fs::write(&file, "tools = [\"t\"]\n").unwrap();
        let layer = read_file(&file).unwrap();
        assert_eq!(layer.tools, vec![dir.path().join("t")]);

        let user = dir.path().join("user.toml");
        std::fs::write(&user, "[limits]\nread_lines = 7\n").unwrap();
        let config = Config::load(Some(&user), Some(&file)).unwrap();
        assert_eq!(config.files, vec![user.clone(), file.clone()]);
        assert_eq!(config.limits.read_lines, Some(7));
        assert_eq!(Config::load(None, Some(&missing)).unwrap(), Config::default());
    }

    #[test]
    fn the_user_config_path_follows_xdg() {
        let os = |s: &'static str| Some(OsStr::new(s));
        assert_eq!(user_config_path_from(os("/x"), os("/h")), Some(PathBuf::from("/x/toolhost/config.toml")));
        assert_eq!(user_config_path_from(os(""), os("/h")), Some(PathBuf::from("/h/.config/toolhost/config.toml")));
        assert_eq!(user_config_path_from(os("x"), os("/h")), Some(PathBuf::from("/h/.config/toolhost/config.toml")));
        assert_eq!(user_config_path_from(None, os("/h")), Some(PathBuf::from("/h/.config/toolhost/config.toml")));
        assert_eq!(user_config_path_from(None, os("")), None);
        assert_eq!(user_config_path_from(None, None), None);
        assert_eq!(user_config_dir_from(os("/x"), None), Some(PathBuf::from("/x/toolhost")));
    }
}
