//! toolhost as an MCP server ([`McpServer`], behind `toolhost mcp`): every tool of a host, built-in, shipped, Scheme
//! and the MCP tools it is itself a client of, served over standard input and output with the SDK's
//! server side. `tools/list` shows each tool as the one projection point makes it
//! ([`schema::tool_schema`] in the MCP shape, annotations included); `tools/call` goes through the
//! host's call path by its [`HostHandle`] (tidy, convert, guard, run, record), and every error there
//! comes back as an `isError` result whose text names the error's kind, so a model can act on it.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::Value;

use crate::call::CallRequest;
use crate::error::{Error, Result};
use crate::handle::HostHandle;
use crate::schema::{self, Format};
use crate::spec::ToolSpec;

/// The MCP face of a host: answers `tools/list` and `tools/call` through a [`HostHandle`].
#[derive(Clone)]
pub struct McpServer {
    handle: HostHandle,
    /// Whether the host's tool folders are watched while it serves.
    watch_tools: bool,
}

impl McpServer {
    /// A server for the host behind `handle`.
    pub fn new(handle: HostHandle) -> Self {
        McpServer { handle, watch_tools: false }
    }

    /// Watches the host's tool folders while it serves: a `.scm` file added, changed or removed
    /// loads the tools again, and the client is told its tool list changed (see `watch.rs`).
    pub fn watching_tools(mut self) -> Self {
        self.watch_tools = true;
        self
    }

    /// Serves MCP on `reader` and `writer` until the client closes the connection.
    ///
    /// # Errors
    /// When the runtime cannot start or initialization with the client fails.
    pub fn run<R, W>(self, reader: R, writer: W) -> Result<()>
    where
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("toolhost-mcp-server")
            .enable_all()
            .build()
            .map_err(|e| Error::tool_failed(format!("cannot start the MCP server runtime: {e}")))?;
        let (handle, watch_tools, spawner) = (self.handle.clone(), self.watch_tools, runtime.handle().clone());
        let outcome = runtime.block_on(async move {
            let service = self
                .serve((reader, writer))
                .await
                .map_err(|e| Error::tool_failed(format!("MCP initialization with the client failed: {e}")))?;
            let _watch = watch_tools.then(|| super::watch::ToolWatch::start(handle, service.peer().clone(), spawner));
            service.waiting().await.map_err(|e| Error::tool_failed(format!("the MCP server stopped: {e}")))?;
            Ok(())
        });
        // A read of standard input cannot be cancelled; do not wait for one that never ends.
        runtime.shutdown_background();
        outcome
    }
}

/// One tool as `tools/list` shows it, from the MCP projection of its spec.
fn mcp_tool(spec: &ToolSpec) -> std::result::Result<Tool, ErrorData> {
    serde_json::from_value(schema::tool_schema(spec, Format::Mcp))
        .map_err(|e| ErrorData::internal_error(format!("tool {} cannot be listed: {e}", spec.name()), None))
}

/// A blocking request to the host, off the runtime's worker threads.
async fn ask_host<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> std::result::Result<T, ErrorData> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ErrorData::internal_error(format!("the host request failed: {e}"), None))
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build())
            .with_server_info(Implementation::new("toolhost", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "toolhost's tools: the workspace's files, search and shell, and the Scheme and MCP tools \
                 configured for it. A failed call is an error result whose text starts with \
                 `error (KIND):`; fix the call as the message says.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, ErrorData> {
        let handle = self.handle.clone();
        let specs = ask_host(move || handle.specs())
            .await?
            .map_err(|e| ErrorData::internal_error(format!("the host cannot list its tools: {e}"), None))?;
        let tools = specs.iter().map(|spec| mcp_tool(spec)).collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.map(|map| Value::Object(map).to_string()).unwrap_or_default();
        let call = CallRequest::new(request.name.to_string(), arguments);
        let handle = self.handle.clone();
        let record = ask_host(move || handle.run_call(call)).await?;
        let content = vec![ContentBlock::text(record.model_text())];
        Ok(match &record.result {
            // A value rather than text goes as structured content too, the text beside it.
            Ok(result) => {
                let mut answer = CallToolResult::success(content);
                answer.structured_content = schema::mcp_structured_content(result);
                answer
            }
            Err(_) => CallToolResult::error(content),
        }
        .into())
    }
}
