//! MCP both ways, against the official SDK and the reference servers: `[[mcp]]` servers' tools as
//! primitives, and `toolhost mcp`.
//!
//! One test binary per area (each links the whole dependency graph once); one module per subsystem.

#[path = "../common/mod.rs"]
mod common;

mod mcp_client;
mod mcp_http;
mod mcp_server;
