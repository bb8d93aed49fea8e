//! toolhost: an embedded Scheme interpreter (steel) with a registry of tool primitives for LLM
//! agents.
//!
//! # Brief overview
//!
//! A [`Host`] owns one steel engine, a [`Registry`] of tools and a [`Guard`]. Tools are written in
//! Rust (a plain function and a [`Tool`] description) or in Scheme (`register-tool` /
//! `define-tool` in a `.scm` file). Every tool has one [`Signature`]: ordered, typed parameters,
//! the optional ones last. The same tool is then called
//! - from Scheme, as an ordinary procedure: `(fs-read "src/main.rs" 120 50)`;
//! - with JSON arguments by name, as a model sends them: [`Host::call_json`], which tidies,
//!   converts, guards, runs and returns a [`CallRecord`] with the result or an error of a stable
//!   kind.
//!
//! From other threads (an agent loop, an MCP server), a [`HostHandle`] carries calls to the host on
//! its own thread as plain data.
//!
//! ```
//! use toolhost::{HostBuilder, Tool, ToolCtx};
//!
//! fn shout(_ctx: &ToolCtx, text: String, times: Option<i64>) -> String {
//!     let times = times.filter(|t| *t > 0).unwrap_or(1) as usize;
//!     text.to_uppercase().repeat(times)
//! }
//!
//! let dir = tempfile::tempdir().unwrap();
//! let tool = Tool::new("shout", "Upper-case a text.")
//!     .param("text", "What to shout")
//!     .param("times", "How often; once when left out")
//!     .build(shout)
//!     .unwrap();
//! let mut host = HostBuilder::new(dir.path()).tool(tool).build().unwrap();
//!
//! // From Scheme, optional arguments may be left off:
//! assert_eq!(host.eval_to_string(r#"(shout "hi" 2)"#).unwrap(), "HIHI");
//! // From JSON, by name, as a model sends them:
//! let outcome = host.call_json("shout", r#"{"text": "hey"}"#);
//! assert_eq!(outcome.model_text(), "HEY");
//! let outcome = host.call_json("shout", r#"{"text": "hey", "loud": true}"#);
//! assert_eq!(outcome.result.unwrap_err().kind().as_str(), "unknown_argument");
//! ```
//!
//! # Modules
//!
//! | module | owns |
//! |---|---|
//! | [`error`] | the error type, its stable kinds and refusal reasons |
//! | [`param`] | parameter types, parameters, signatures and their rules |
//! | [`value`] | JSON <-> Scheme values, typed empty values |
//! | [`args`] | JSON arguments and Scheme calls to the positional values handlers see |
//! | [`tidy`] | repairing what models send (JSON in strings, strict-mode nulls) |
//! | [`spec`] | what models see of a tool, apart from what runs it; sets of specs |
//! | [`registry`] | primitives (spec + handler) and the registry |
//! | [`typed`] | registering plain Rust functions as tools |
//! | [`schema`] | provider tool schemas |
//! | [`strict`] | the strict-mode schema rewrite |
//! | [`gemini`] | Gemini's schema dialect: the rewrite, its refusals, parameter names and back |
//! | [`pformat`] | the P-format text dialect for models without native tool calls |
//! | [`workspace`] | the workspace boundary |
//! | [`search_index`] | warm search: the trigram index index-grep keeps in a long-lived host |
//! | [`guard`] | allow / deny / confirm before a call runs, and the decision it records |
//! | [`context`] | what handlers receive: workspace, limits and the shell sandbox |
//! | [`sandbox`] | the shell sandbox: what a `shell-exec` command may write, reach and leave behind |
//! | [`config`] | config files: reading, checking and merging them |
//! | [`source`] | reading the files toolhost obeys or runs: regular files only, capped, never blocking |
//! | [`tool_source`] | sources of tools a host starts with itself: the `[[mcp]]` servers, an embedder's own |
//! | [`trust`] | workspace trust: which workspaces' own config and tools may load |
//! | [`setup`] | what the command line builds a host from: config, trust and flags |
//! | `tools` | the built-in tools |
//! | `engine`, `watchdog` | the steel engine's module set, its time limit |
//! | `bridge` | Scheme <-> registry: tools as procedures, `register-tool`, tool errors through Scheme |
//! | `check_call` | the procedures `check-tool` calls through: a call reported as `toolhost call` does |
//! | [`code_mode`] | code mode: the `scheme` program tool, the catalogue of tools as procedures, what a model is offered |
//! | `bindings` | which global names a program may define or `set!`: none another program defined |
//! | [`host`] | the host: engine + registry + guard |
//! | [`call`] | the JSON call path and the call record |
//! | `host_request` | what a handle asks of its host and the answers, as plain data (re-exported by [`handle`]) |
//! | [`handle`] | the host on its own thread, reached through a `Send + Sync` handle |
//! | [`worker`] | the host in a worker process under limits, restarted when it dies or overruns |
//! | `relay` | a worker's standard error relayed to ours, its last lines kept to say why it died |
//! | `agent` | the agent loop: the model client, the loop, the session log and replay (feature `agent`) |
//! | `mcp` | MCP both ways: `[[mcp]]` servers' tools as primitives, and `toolhost mcp` (feature `mcp`) |
//! | [`check`], [`scheme_test`] | the tool author's `toolhost check` and `toolhost test` |
//! | `stats` | `toolhost stats`: what session logs say, counted (feature `stats`, part of `cli`) |
//! | `launch` | how each command of the executable starts its host: settings, asker, worker or thread (feature `cli`) |
//! | `repl`, `cli` | the REPL and the command line (feature `cli`) |
//!
//! # Features
//!
//! `cli` (the `toolhost` executable), `mcp` (`[[mcp]]` servers and `McpServer`) and `agent`
//! (the agent loop), all on by default, and `stats` (`toolhost stats`, part of `cli`); without
//! them the crate is the core above. The library never changes the process environment: steel
//! picks its home folder once per process from `STEEL_HOME` (else it creates
//! `$XDG_DATA_HOME/steel`), so set that in `main` before the first host if you want neither.

#![deny(missing_docs)]

#[cfg(not(target_os = "linux"))]
compile_error!(
    "toolhost runs on Linux only: it relies on inotify, openat/O_NOFOLLOW path walking, Landlock, \
     namespaces, pidfds, process groups and prlimit (see the README, \"Platform\")."
);

#[cfg(feature = "agent")]
pub mod agent;
pub mod args;
mod bindings;
mod bridge;
pub mod call;
pub mod check;
mod check_call;
/// The `toolhost` executable's command line; `src/main.rs` is its only caller.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;
pub mod code_mode;
pub mod config;
pub mod context;
mod engine;
pub mod error;
pub mod gemini;
pub mod guard;
mod guard_rules;
pub mod handle;
pub mod host;
mod host_request;
#[cfg(feature = "cli")]
mod launch;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod param;
pub mod pformat;
pub mod registry;
mod relay;
/// The REPL of `toolhost repl`; public for its tests and the executable, not an embedding API.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod repl;
pub mod sandbox;
pub mod schema;
pub mod scheme_test;
pub mod search_index;
pub mod setup;
pub mod source;
pub mod spec;
#[cfg(feature = "stats")]
pub mod stats;
pub mod strict;
pub mod tidy;
pub mod tool_source;
mod tools;
pub mod trust;
pub mod typed;
pub mod value;
mod watchdog;
pub mod worker;
pub mod workspace;

pub use call::{CallOptions, CallRecord, CallRequest};
pub use config::Config;
pub use context::{Limits, ToolCtx};
pub use error::{Error, ErrorKind, Result};
pub use guard::{Decision, Guard};
pub use handle::HostHandle;
pub use host::{Host, HostBuilder, Interrupter, Origin, ReloadReport, RustToolHost};
#[cfg(feature = "mcp")]
pub use mcp::{McpClients, McpServer};
pub use param::{Param, ParamType, Signature, Skipped};
pub use registry::{Handler, Primitive, Registry, ToolOutput};
pub use sandbox::{Sandbox, SandboxMode};
pub use setup::{Flags, Setup};
pub use spec::{Annotations, SpecSet, ToolSpec};
pub use tool_source::{LiveTools, SourceTools, ToolSource};
pub use trust::TrustRule;
pub use typed::Tool;
pub use worker::WorkerSpec;
pub use workspace::Workspace;

/// The steel interpreter toolhost embeds, re-exported so an embedder that handles Scheme values
/// ([`Host::eval`] returns a `steel::rvals::SteelVal`) uses the very version toolhost does.
pub use steel;

/// The README's Rust examples, compiled and run as doctests so they cannot rot.
// Its agent example needs the `agent` feature.
#[cfg(all(doctest, feature = "agent"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
