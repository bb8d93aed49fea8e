//! The agent loop (design sections 6, 7, 10, 12 and 18), starting with its model side: a [`Model`]
//! is sent the conversation and the host's tools and answers with text and tool calls.
//!
//! # Modules
//!
//! | module | owns |
//! |---|---|
//! | [`model`] | the `Model` trait, messages, requests, replies and tool calls |
//! | [`client`] | the OpenAI-compatible chat-completions client: body, HTTP, retries, reading replies |
//! | `stop` | stopping a session from outside (Ctrl-C) |

pub mod client;
pub mod model;
mod stop;

pub use crate::config::Dialect;
pub use client::{parse_reply, request_body, ChatClient, ClientSettings, RetryPolicy};
pub use model::{Message, Model, ModelReply, ModelRequest, ToolCall};
pub use stop::Stop;
