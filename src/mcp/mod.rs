//! MCP both ways (design section 11), with the official SDK (`rmcp`).
//!
//! # Brief overview
//!
//! As a **client**, toolhost starts the `[[mcp]]` servers of its config when a host is built, or at
//! the first call of one of their tools when their tool lists are kept ([`cache`]); they are a
//! [`crate::ToolSource`]. It registers each of their tools as a primitive named
//! `server.tool` (providers see `server__tool`). The parameters come from the tool's `inputSchema`
//! (required ones first, in the order of `required`, then the optional ones in property order); the
//! `inputSchema` itself is what providers are shown. MCP tools take skipped parameters as void: a parameter the caller left out
//! is left out of the request, while `false`, `0` and `""` are sent as given. Text content comes
//! back as the result (structured content is the value Scheme code gets, beside the text a model
//! reads); other content is described in a bracketed line; an `isError` result is a `tool_failed`
//! error with the server's text. A server's `notifications/tools/list_changed` updates the host's
//! registry ([`crate::LiveTools`]).
//!
//! As a **server** (`toolhost mcp`), toolhost serves every tool of a host over standard input and
//! output, or over streamable HTTP (`--http`), each call through the same call path as any other
//! caller's; values go out as
//! `structuredContent`, declared shapes as `outputSchema`, and a change in its tool folders reloads
//! them and tells the client.
//!
//! | file | owns |
//! |---|---|
//! | [`convert`] | `inputSchema` to a signature, hints to annotations, handler values to `arguments`, results to text |
//! | [`cache`] | the servers' tool lists kept between runs, so a host starts a server only when one of its tools is called |
//! | [`client`] | [`McpClients`]: the connections to the configured servers, their tools as primitives, failure and restart |
//! | [`server`] | [`McpServer`]: a host's tools served over MCP |
//! | `stdio` | the server's standard input and output in front of the SDK: order, bounds, cancellation |
//! | `in_flight` | a call out with the worker, its reply awaited on the server's event loop |
//! | `pipes` | standard input and output read and written by the server's event loop when they are pipes or sockets |
//! | [`http`] | `toolhost mcp --http`: streamable HTTP, with Origin and bearer-token checks in front of the SDK |
//! | [`wire`] | JSON-RPC lines: the size limit, the envelope check, raw `tools/call` arguments |
//! | `watch` | `toolhost mcp`'s watch on its tools (its folders, an `[[mcp]]` server's list): `notifications/tools/list_changed` |
//! | `command` | `serve`: the `toolhost mcp` command (feature `cli`) |

pub mod cache;
pub mod client;
#[cfg(feature = "cli")]
mod command;
pub mod convert;
pub mod http;
mod in_flight;
mod pipes;
pub mod server;
mod stdio;
mod watch;
pub mod wire;

pub use client::{McpClients, McpStatus};
#[cfg(feature = "cli")]
pub(crate) use command::{serve, McpArgs};
pub use http::HttpOptions;
pub use server::McpServer;
