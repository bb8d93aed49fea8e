//! toolhost as an MCP server ([`McpServer`], behind `toolhost mcp`): every tool of a host, built-in, shipped, Scheme
//! and the MCP tools it is itself a client of, served over standard input and output with the SDK's
//! server side. `tools/list` shows each tool as the one projection point makes it
//! ([`schema::tool_schema`] in the MCP shape, annotations included); `tools/call` goes through the
//! host's call path by its [`HostHandle`] (tidy, convert, guard, run, record), and every error there
//! comes back as an `isError` result whose text names the error's kind, so a model can act on it.
//!
//! Over standard input and output (the `stdio` module) or streamable HTTP ([`super::http`]) a call's
//! arguments reach the call path as the text the client sent; a cancelled call (or one running
//! when the input closes) is interrupted in the host, its command's processes with it; a call whose
//! request carries a `progressToken` gets a progress notification each second it runs past the
//! first. The protocol revision is 2025-11-25.

use std::borrow::Cow;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ProtocolVersion, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::Value;

use super::in_flight::{self, WorkerPipe};
use super::pipes;
use super::stdio::{self, CallTurn};
use super::watch::{Listeners, ToolWatch};
use super::wire::RawArguments;

use crate::call::{CallRecord, CallRequest};
use crate::code_mode::{self, ToolsAs};
use crate::error::{Error, ErrorKind, Result};
use crate::handle::HostHandle;
use crate::schema::{self, Format};
use crate::spec::ToolSpec;

/// The MCP face of a host: answers `tools/list` and `tools/call` through a [`HostHandle`].
#[derive(Clone)]
pub struct McpServer {
    pub(super) handle: HostHandle,
    /// Whether the host's tool folders are watched while it serves.
    pub(super) watch_tools: bool,
    /// Which tools clients are offered (`--code`: the program tool alone).
    tools_as: ToolsAs,
    /// Over HTTP: every session that has initialized, to be told when the tools change.
    pub(super) sessions: Option<Listeners>,
    /// Over HTTP: the host's one turn, taken by each call in the order they come, from whichever
    /// session (over standard input and output the transport keeps the order itself).
    pub(super) turns: Option<Arc<tokio::sync::Semaphore>>,
    /// The calls out with the worker, on the event loop of the run that serves.
    pub(super) pipe: WorkerPipe,
}

impl McpServer {
    /// A server for the host behind `handle`.
    pub fn new(handle: HostHandle) -> Self {
        McpServer {
            handle,
            watch_tools: false,
            tools_as: ToolsAs::Json,
            sessions: None,
            turns: None,
            pipe: WorkerPipe::default(),
        }
    }

    /// Offers clients the tools as `tools_as` says: each tool (the default), the `scheme` program
    /// tool alone with the catalogue of every tool as a procedure in its description (code mode),
    /// or both. A call of a tool not offered is answered as a call of an unknown tool.
    pub fn offering(mut self, tools_as: ToolsAs) -> Self {
        self.tools_as = tools_as;
        self
    }

    /// Watches the host's tool folders while it serves: a `.scm` file added, changed or removed
    /// loads the tools again, and the client is told its tool list changed (see `watch.rs`).
    pub fn watching_tools(mut self) -> Self {
        self.watch_tools = true;
        self
    }

    /// Serves MCP on `reader` and `writer` until the client closes the connection. Then the call
    /// that runs is stopped, and a worker process behind the handle is ended with what it started
    /// (the handle's next request starts a fresh one), so nothing of the server's outlives it.
    ///
    /// # Errors
    /// When the runtime cannot start or initialization with the client fails.
    pub fn run<R, W>(self, reader: R, writer: W) -> Result<()>
    where
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        self.serve_on(move || Ok((reader, writer)))
    }

    /// [`McpServer::run`] on two descriptors, as `toolhost mcp` serves on its standard input and
    /// output: a pipe or a socket (what MCP clients give their servers) is read and written by the
    /// server's event loop itself, not by a thread per read and write; anything else as
    /// `tokio::io::stdin` reads it. A pipe's or socket's flags are put back when the server ends.
    ///
    /// # Errors
    /// As [`McpServer::run`].
    pub fn run_on(self, input: OwnedFd, output: OwnedFd) -> Result<()> {
        let _kept = pipes::FlagsKept::of(&[&input, &output]);
        self.serve_on(move || {
            let reader = pipes::reader(input).map_err(|e| Error::tool_failed(format!("cannot read the input: {e}")))?;
            let writer =
                pipes::writer(output).map_err(|e| Error::tool_failed(format!("cannot write the output: {e}")))?;
            Ok((reader, writer))
        })
    }

    /// Serves on the reader and writer `streams` makes, on the server's runtime.
    fn serve_on<R, W>(mut self, streams: impl FnOnce() -> Result<(R, W)>) -> Result<()>
    where
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        self.pipe = WorkerPipe::default();
        // One thread for the exchange with the one client: a message passes from the input to the
        // SDK, the host (its worker, or its thread in this process) and back to the output without
        // waking another; nothing on it waits for the host.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .thread_name("toolhost-mcp-server")
            .enable_all()
            .build()
            .map_err(|e| Error::tool_failed(format!("cannot start the MCP server runtime: {e}")))?;
        let (handle, watch_tools, spawner) = (self.handle.clone(), self.watch_tools, runtime.handle().clone());
        let (ending, pipe) = (self.handle.clone(), self.pipe.clone());
        let started = move |peer| {
            let listeners = Listeners::default();
            listeners.add(peer);
            watch_tools.then(|| ToolWatch::start(handle, listeners, spawner))
        };
        let outcome = runtime.block_on(async move {
            // Made on the runtime: a descriptor is registered with its event loop.
            let (reader, writer) = streams()?;
            let end_host = move || {
                pipe.close();
                ending.kill_worker();
            };
            stdio::serve(self, in_flight::DEPTH, reader, writer, started, end_host).await
        });
        // A read of standard input cannot be cancelled; do not wait for one that never ends.
        runtime.shutdown_background();
        outcome
    }
}

/// A call's record to come.
type Work = std::pin::Pin<Box<dyn std::future::Future<Output = CallRecord> + Send>>;

/// How a call handed to the host is cancelled.
#[derive(Clone, Copy)]
enum Stop {
    /// By its id in the run's [`WorkerPipe`].
    InPipe(u64),
    /// By its number on the host's thread ([`HostHandle::cancel_handed_over`]).
    OnThread(u64),
}

impl McpServer {
    /// Hands `call` to the host: to the run's [`WorkerPipe`] when the host is in a worker process,
    /// else to the host's thread. Nothing waits on the host meanwhile; either runs the calls handed
    /// over in that order, and cancels one by what is returned beside its record.
    fn start_call(&self, call: CallRequest) -> (Work, Stop) {
        let lost = |what: &str| CallRecord::failed(String::new(), String::new(), Error::new(ErrorKind::Crashed, what));
        if self.handle.in_worker() {
            let submitted = self.pipe.submit(&self.handle, call);
            let record = submitted.record;
            let work = async move { record.await.unwrap_or_else(|_| lost("the call was lost with its worker")) };
            return (Box::pin(work), Stop::InPipe(submitted.id));
        }
        // A host in this process: its thread hands the record back to this one.
        let (sender, record) = tokio::sync::oneshot::channel();
        // Only a worker's host gives a call back, and that one went to the pipe above; were it given
        // back, the sender dropped with it would end the call as lost.
        let number = self.handle.send_call_then(call, move |done| drop(sender.send(done))).unwrap_or(0);
        let work = async move { record.await.unwrap_or_else(|_| lost("the host stopped during the call")) };
        (Box::pin(work), Stop::OnThread(number))
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

/// The protocol revision served: the newest one with a handshake, which the official SDKs speak.
/// (A later, stateless revision is refused rather than served untested.)
const PROTOCOL: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// How long a call runs before its first progress notification, and between two.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// How often a cancelled call is interrupted again until it has stopped.
const STOP_RETRY: Duration = Duration::from_millis(100);

/// Tells the client a call is still running, each [`PROGRESS_EVERY`], one notification at a time.
async fn report_progress(peer: Peer<RoleServer>, token: ProgressToken, tool: String) {
    let started = Instant::now();
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
    loop {
        ticks.tick().await;
        let seconds = started.elapsed().as_secs_f64().floor();
        let note = ProgressNotificationParam::new(token.clone(), seconds)
            .with_message(format!("{tool}: running for {seconds:.0} s"));
        if peer.notify_progress(note).await.is_err() {
            return;
        }
    }
}

impl ServerHandler for McpServer {
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&PROTOCOL))
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build())
            .with_protocol_version(PROTOCOL)
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
        let offered = code_mode::offered(&specs, self.tools_as);
        let tools = offered.iter().map(|spec| mcp_tool(spec)).collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        if let Some(sessions) = &self.sessions {
            sessions.add(context.peer);
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        // The text the client sent, when the transport kept it (over HTTP, in the request's parts):
        // the call path then sees a key given twice, a nesting too deep and arguments that are not
        // an object, as `toolhost call` does.
        let raw = context.extensions.get::<RawArguments>().cloned().or_else(|| {
            let parts = context.extensions.get::<hyper::http::request::Parts>()?;
            parts.extensions.get::<RawArguments>().cloned()
        });
        let arguments = match raw {
            Some(raw) => raw.0.to_string(),
            None => request.arguments.map(|map| Value::Object(map).to_string()).unwrap_or_default(),
        };
        let tool = request.name.to_string();
        let program = tool == code_mode::PROGRAM_TOOL;
        if matches!((self.tools_as, program), (ToolsAs::Code, false) | (ToolsAs::Json, true)) {
            let offered = if program { "the tools themselves" } else { "only the scheme program tool" };
            let text = format!(
                "error ({}): no tool called \"{tool}\" is offered: this server offers {offered}",
                crate::error::ErrorKind::UnknownTool
            );
            return Ok(CallToolResult::error(vec![ContentBlock::text(text)]).into());
        }
        let call = CallRequest::new(tool.clone(), arguments);
        let cancelled = || ErrorData::internal_error("the call was cancelled", None);
        // Over standard input and output the call's turn, held until the host has finished the
        // call (then the next call starts); over HTTP the host's one turn.
        let turn = context.extensions.remove::<Arc<CallTurn>>();
        let permit = match (&turn, &self.turns) {
            (None, Some(turns)) => tokio::select! {
                taken = Arc::clone(turns).acquire_owned() => taken.ok(),
                // Cancelled while it waited: it never ran, and gets no reply.
                () = context.ct.cancelled() => return Err(cancelled()),
            },
            _ => None,
        };
        if let Some(turn) = &turn {
            tokio::select! {
                () = turn.wait_to_submit() => {},
                () = context.ct.cancelled() => return Err(cancelled()),
            }
        }
        let (mut work, stop) = self.start_call(call);
        if let Some(turn) = &turn {
            turn.submitted();
        }
        let progress = context
            .meta
            .get_progress_token()
            .map(|token| tokio::spawn(report_progress(context.peer.clone(), token, tool)));
        let outcome = tokio::select! {
            record = &mut work => Some(record),
            () = context.ct.cancelled() => None,
        };
        // No progress after the result: the last one, if any is being sent, is written before it.
        if let Some(progress) = progress {
            progress.abort();
            let _ = progress.await;
        }
        let Some(record) = outcome else {
            // Cancelled (by the client, or its input closed): no reply is sent. The host is told
            // which call (others may have been handed over behind it), and told again until the
            // call has ended, since a stop that comes just before the host begins the call is
            // forgotten.
            let (handle, pipe) = (self.handle.clone(), self.pipe.clone());
            tokio::spawn(async move {
                loop {
                    match stop {
                        Stop::InPipe(id) if pipe.cancel(id) => break,
                        Stop::InPipe(_) => {}
                        Stop::OnThread(number) => handle.cancel_handed_over(number),
                    }
                    if tokio::time::timeout(STOP_RETRY, &mut work).await.is_ok() {
                        break;
                    }
                }
                drop((turn, permit));
            });
            return Err(cancelled());
        };
        drop((turn, permit));
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
