//! The agent loop (design sections 6, 7, 10, 12 and 18): a [`Model`] is sent the conversation and
//! the host's tools, the tool calls it makes run through a [`crate::HostHandle`] (tidy, convert,
//! guard, run, record), their results go back, until it answers without calls. Every request,
//! reply and call record goes to a JSON-lines session log, which [`replay()`] runs again without a
//! model.
//!
//! The loop sees the host only through its handle and its catalogue, so every tool the host has
//! (built-in, Scheme and MCP tools) is offered and called the same way.
//!
//! # MCP tools
//!
//! MCP tools (`server.tool`) reach the loop as more entries of the catalogue, under their provider
//! names (`server__tool`), and their calls come back through the same call path, which maps the
//! names back; the loop has no MCP code of its own (`tests/agent/agent.rs` has a session in which the
//! model calls a Scheme tool and an MCP tool in one reply).
//!
//! # Stopping
//!
//! A [`Stop`] (Ctrl-C under `toolhost agent`) interrupts the running call and ends the session
//! after logging it. Scheme code stops at once, and so does a `shell-exec` command with its whole
//! process group; another Rust tool runs to its end, and the session waits two seconds for such a
//! call and then goes without its result.
//!
//! # Parallel calls
//!
//! Consecutive calls of read-only tools that no guard rule could make ask run side by side on the
//! handle's lanes ([`crate::HostHandle::with_lanes`]: more hosts, since one interpreter runs one
//! call at a time); their results go back in the calls' order, and the calls that write or may ask
//! run alone, in order.
//!
//! # Modules
//!
//! | module | owns |
//! |---|---|
//! | [`model`] | the `Model` trait, messages, requests, replies and tool calls |
//! | [`settings`] | where the model is and how to talk to it: URL, API, key, timeout, retries |
//! | [`client`] | the model's HTTP client: HTTP, retries, the chat-completions body and replies |
//! | [`anthropic`] | Anthropic's Messages API: its request body and replies, whole and streamed |
//! | [`responses`] | OpenAI's Responses API: its request body and replies, whole and streamed |
//! | [`provider`] | provider presets, the API key's scope, llama-server's `/props` check |
//! | `stream` | server-sent events, and assembling a reply from a stream |
//! | `dialect` | native tool calls and P-format: what a request carries, which calls a reply makes, how results go back |
//! | [`session`] | the loop itself |
//! | [`mod@log`] | the session log: its format, writing and reading |
//! | [`mod@replay`] | replaying a session log through a fresh host |
//! | [`resume`] | reading a logged conversation back, to go on from it (`--resume`) |
//! | `stop` | stopping a session from outside (Ctrl-C) |
//! | `command` | `toolhost agent` and `toolhost replay` (feature `cli`) |

pub mod anthropic;
pub mod client;
#[cfg(feature = "cli")]
pub(crate) mod command;
mod dialect;
pub mod instructions;
pub mod log;
pub mod model;
pub mod provider;
pub mod replay;
pub mod responses;
pub mod resume;
pub mod session;
pub mod settings;
mod stop;
mod stream;

pub use crate::config::Dialect;
pub use client::{parse_reply, request_body, ChatClient, ClientSettings, RetryPolicy, Totals};
pub use dialect::DEFAULT_SYSTEM_PROMPT;
pub use log::{read_log, Entry, SessionLog};
pub use model::{Message, Model, ModelReply, ModelRequest, ToolCall, Usage};
pub use replay::{replay, Difference, ReplayAnswers, Report};
pub use resume::Resumed;
pub use session::{
    CallEvent, End, Outcome, Session, DEFAULT_MAX_CALLS_PER_REPLY, DEFAULT_MAX_TURNS, DEFAULT_MAX_TURN_RESULT_CHARS,
};
pub use stop::Stop;
