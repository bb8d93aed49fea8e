//! toolhost as an MCP client: [`McpClients`] starts the `[[mcp]]` servers of a config (a child
//! process over stdio, or a streamable HTTP endpoint), or takes their tool lists from the cache and
//! starts each at its first call; lists their tools at every start and after every
//! `notifications/tools/list_changed`, keeping the host's registry in line ([`LiveTools`]); and
//! turns each tool into a [`Primitive`] whose Rust handler sends `tools/call` to its server. It owns the tokio runtime the
//! SDK (`rmcp`) needs; the host stays synchronous and blocks on a call with the server's time limit.
//! How schemas, arguments and results are converted lives in `convert.rs`.
//!
//! Failure is the server's, never the host's:
//! - a server that does not start (its command is missing, it exits, it does not answer in time, it
//!   answers something that is not MCP) is one of the problems [`McpClients`] gives as a
//!   [`ToolSource`] when it starts, which the host adds to its load errors (the command line prints
//!   them once on standard error); its tools are not registered, and a call naming one is an `unknown_tool` error that says the server did not start.
//!   It is not retried: its tool list was never known.
//! - a server that stops while the host runs (it exits, it is killed, its connection drops) is
//!   reported once on standard error, and the next call of one of its tools starts it again (and
//!   lists its tools again). A call that was waiting for its answer fails with
//!   `tool_failed`: the server may or may not have done the work, so it is not sent again. A call
//!   that could not even be written to a stdio server's input never reached it, so it goes to the
//!   server started in its place.
//! - a call that outlasts the server's `timeout_s` (60 s when not set) fails with `timeout`; the
//!   server is asked to cancel it and stays connected. Starting a server may take `timeout_s`, and
//!   at least [`MIN_START_TIME`].

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex as StdMutex, OnceLock};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion, Tool,
};
use rmcp::service::{NotificationContext, Peer, RoleClient, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{Map, Value};
use steel::rvals::SteelVal;
use tokio::io::AsyncBufReadExt;
use tokio::sync::Mutex;

use crate::config::{McpServerConfig, McpTransport};
use crate::error::{Error, ErrorKind, Result};
use crate::mcp::cache::CachedList;
use crate::mcp::convert;
use crate::registry::{Handler, OutputHandler, Primitive, ToolOutput};
use crate::tool_source::{LiveTools, SourceTools, ToolSource};
use crate::workspace::Workspace;

/// How long one call (and starting a server) may take when the config sets no `timeout_s`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The least time a server gets to start and list its tools, whatever its `timeout_s`: a server
/// run through `npx` may spend seconds installing itself, which says nothing about its calls.
pub const MIN_START_TIME: Duration = Duration::from_secs(10);

/// How many of a server's last standard-error lines are kept, to explain why it failed.
const STDERR_TAIL_LINES: usize = 12;

/// How long dropping the clients waits for each server to shut down before it is killed.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How long a server's process gets to exit after its input is closed, and again after SIGTERM.
const CHILD_EXIT_GRACE: Duration = Duration::from_secs(2);

/// How long a server that stopped gets for its last lines on standard error to arrive.
const STDERR_GRACE: Duration = Duration::from_secs(2);

/// How long the client waits after a `notifications/tools/list_changed` for more before it lists
/// again: a server that changes several tools at once is listed once.
const LIST_CHANGED_SETTLE: Duration = Duration::from_millis(50);

type Service = RunningService<RoleClient, ServerEvents>;

/// The client side of one connection: says who toolhost is, and passes the server's
/// `notifications/tools/list_changed` on to the task that lists its tools again.
struct ServerEvents {
    info: ClientConfig,
    list_changed: tokio::sync::mpsc::UnboundedSender<()>,
}

impl rmcp::ClientHandler for ServerEvents {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.list_changed.send(());
    }
}

/// The MCP servers of a host: a [`ToolSource`] that starts them together, gives their tools as
/// primitives and their failures as load errors. Dropping it shuts the servers down.
///
/// ```no_run
/// use toolhost::config::{McpServerConfig, McpTransport};
/// use toolhost::mcp::McpClients;
/// let server = McpServerConfig {
///     name: "everything".into(),
///     transport: McpTransport::Stdio { command: "npx".into(), args: vec!["-y".into(),
///         "@modelcontextprotocol/server-everything".into()], env: Default::default() },
///     timeout_s: None,
///     origin: "example".into(),
/// };
/// // A host starts its servers itself (`[[mcp]]` in a config does this through `Setup::builder`):
/// let host = toolhost::HostBuilder::new(".").tool_source(McpClients::configured(vec![server])).build().unwrap();
/// for problem in host.load_errors() {
///     eprintln!("{problem}");
/// }
/// ```
pub struct McpClients {
    configs: Vec<McpServerConfig>,
    /// Where tool lists are kept between runs, when they are.
    cache_dir: Option<PathBuf>,
    runtime: Option<tokio::runtime::Runtime>,
    /// Set once the servers are started; shared with [`McpStatus`].
    servers: Arc<OnceLock<Vec<Arc<Server>>>>,
}

impl McpClients {
    /// The clients of these servers, none started yet: a host starts them when it is built (see
    /// [`crate::HostBuilder::tool_source`]).
    pub fn configured(configs: Vec<McpServerConfig>) -> McpClients {
        McpClients { configs, cache_dir: None, runtime: None, servers: Arc::new(OnceLock::new()) }
    }

    /// Keeps each server's tool list in `dir` (see [`crate::mcp::cache`]): a host whose servers'
    /// lists are kept starts none of them until one of their tools is called, and every start
    /// lists the tools again. `None` keeps nothing (the default): every server starts with the
    /// host.
    pub fn cache_in(mut self, dir: Option<PathBuf>) -> McpClients {
        self.cache_dir = dir;
        self
    }

    /// What can be asked of the servers once the host holds the clients.
    pub fn status(&self) -> McpStatus {
        McpStatus(Arc::clone(&self.servers))
    }
}

impl ToolSource for McpClients {
    /// Starts every server at once (each within its own time limit), lists their tools and makes
    /// them primitives named `server.tool`, in server and then tool order. Each server that did not
    /// start is one problem naming it, where it was configured and why. The servers start once: a
    /// second call gives nothing.
    fn start(&mut self, workspace: &Workspace) -> SourceTools {
        let mut given = SourceTools::new();
        if self.configs.is_empty() || self.runtime.is_some() || self.servers.get().is_some() {
            return given;
        }
        // Two workers: one can block in a child's shutdown while the other serves the rest.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("toolhost-mcp")
            .enable_all()
            .build();
        let runtime = match runtime {
            Ok(runtime) => runtime,
            Err(e) => {
                for config in &self.configs {
                    fail(&mut given, config, format!("cannot start the MCP client runtime: {e}"));
                }
                return given;
            }
        };
        let root = workspace.root();
        let servers: Vec<Arc<Server>> = self
            .configs
            .iter()
            .map(|c| {
                let cache = self.cache_dir.as_deref().map(|dir| CachedList::new(dir, c, root));
                Arc::new(Server::new(c.clone(), root, runtime.handle().clone(), cache))
            })
            .collect();
        // A server whose tool list is kept is not started: its first call starts it. The others
        // start all at once, and the host waits for each: a slow server delays start-up by its own
        // time only.
        let (tx, rx) = mpsc::channel();
        for (index, server) in servers.iter().enumerate() {
            if let Some(tools) = server.cache.as_ref().and_then(CachedList::read) {
                let _ = tx.send((index, Ok(tools)));
                continue;
            }
            let (server, tx) = (Arc::clone(server), tx.clone());
            runtime.spawn(async move {
                let _ = tx.send((index, server.start().await));
            });
        }
        drop(tx);
        let mut outcomes: Vec<Option<std::result::Result<Vec<rmcp::model::Tool>, String>>> =
            servers.iter().map(|_| None).collect();
        for (index, outcome) in rx {
            if let Some(slot) = outcomes.get_mut(index) {
                *slot = Some(outcome);
            }
        }
        let mut started = Vec::new();
        for (server, outcome) in servers.into_iter().zip(outcomes) {
            match outcome.unwrap_or_else(|| Err("its start-up task ended without an answer".into())) {
                Ok(tools) => {
                    for tool in &tools {
                        given.tools.push(primitive(&server, tool));
                    }
                    server.listed_at_start(tools);
                    started.push(server);
                }
                Err(why) => fail(&mut given, &server.config, why),
            }
        }
        let _ = self.servers.set(started);
        self.runtime = Some(runtime);
        given
    }

    /// Keeps the registry of the host, so a server's changed tool list changes it.
    fn attach(&mut self, live: LiveTools) {
        for server in self.servers.get().into_iter().flatten() {
            server.attach(live.clone());
        }
    }
}

/// Records a server that did not start: a problem located at its config, and its prefix unavailable.
fn fail(given: &mut SourceTools, config: &McpServerConfig, why: String) {
    let message = format!("mcp server \"{}\" did not start: {why}; its tools are not available", config.name);
    given.problems.push(config.locate(Error::tool_failed(message)));
    let unavailable = format!("the MCP server \"{}\" did not start: {why}", config.name);
    given.unavailable.push((format!("{}.", config.name), unavailable));
}

/// A view of the servers of an [`McpClients`] that stays with the caller after the host took the
/// clients.
#[derive(Clone)]
pub struct McpStatus(Arc<OnceLock<Vec<Arc<Server>>>>);

impl McpStatus {
    /// Whether the server called `name` started and is connected now (a server that stopped is
    /// started again by the next call of one of its tools).
    pub fn is_connected(&self, name: &str) -> bool {
        self.0.get().into_iter().flatten().find(|s| s.config.name == name).is_some_and(|s| s.is_connected())
    }
}

impl Drop for McpClients {
    /// Closes every connection (a child gets its standard input closed, then a signal), then stops
    /// the runtime.
    fn drop(&mut self) {
        let Some(runtime) = self.runtime.take() else { return };
        let (tx, rx) = mpsc::channel();
        for server in self.servers.get().into_iter().flatten() {
            let (server, tx) = (Arc::clone(server), tx.clone());
            runtime.spawn(async move {
                server.shut_down().await;
                let _ = tx.send(());
            });
        }
        drop(tx);
        for _ in rx {}
        // Inside another runtime's task a runtime may not block on its own shutdown.
        if tokio::runtime::Handle::try_current().is_ok() {
            runtime.shutdown_background();
        } else {
            runtime.shutdown_timeout(SHUTDOWN_GRACE);
        }
    }
}

/// The primitive for one tool of a started server.
fn primitive(server: &Arc<Server>, tool: &rmcp::model::Tool) -> Primitive {
    let spec = Arc::new(convert::spec(&server.config.name, tool));
    let (server, remote) = (Arc::clone(server), tool.name.to_string());
    let signature = spec.signature.clone();
    let handler: OutputHandler = Arc::new(move |_ctx, values: &[SteelVal]| {
        let arguments = convert::arguments(&signature, values)?;
        server.call_blocking(&remote, arguments)
    });
    Primitive { spec, handler: Handler::RustOutput(handler), preview: None }
}

/// One configured server and its connection, which it restarts after the server stopped.
struct Server {
    config: McpServerConfig,
    root: PathBuf,
    /// How long one call may take.
    timeout: Duration,
    /// How long starting the server and listing its tools may take.
    start_time: Duration,
    runtime: tokio::runtime::Handle,
    connection: Mutex<Connection>,
    /// The server's last lines on standard error.
    stderr_tail: Arc<StdMutex<VecDeque<String>>>,
    /// The host's registry, once the host is built.
    live: OnceLock<LiveTools>,
    /// The server's tools: those the registry has and the server's latest list.
    tools: StdMutex<Listed>,
    /// Where its tool list is kept between runs.
    cache: Option<CachedList>,
}

/// A server's tools as the registry has them and as the server last listed them; they differ
/// only until the registry is attached.
#[derive(Default)]
struct Listed {
    registered: Vec<Tool>,
    latest: Vec<Tool>,
}

#[derive(Default)]
struct Connection {
    live: Option<Live>,
    /// Counts connections, so a failure seen on an old one does not close a newer one.
    generation: u64,
}

/// An open connection, and the task copying its child's standard error.
struct Live {
    service: Service,
    stderr: Option<tokio::task::JoinHandle<()>>,
    /// The server's process, for a stdio server.
    child: Option<tokio::process::Child>,
}

impl Live {
    fn is_open(&self) -> bool {
        !self.service.is_transport_closed()
    }

    /// Closes the connection as MCP's stdio shutdown says: the child's standard input is closed,
    /// then it gets time to exit, then SIGTERM, then it is killed. Then its last lines on standard
    /// error arrive.
    async fn close(self) {
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, self.service.cancel()).await;
        if let Some(mut child) = self.child {
            if tokio::time::timeout(CHILD_EXIT_GRACE, child.wait()).await.is_err() {
                if let Some(pid) = child.id().and_then(|pid| rustix::process::Pid::from_raw(pid as i32)) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
                }
                if tokio::time::timeout(CHILD_EXIT_GRACE, child.wait()).await.is_err() {
                    let _ = child.kill().await;
                }
            }
        }
        if let Some(task) = self.stderr {
            let _ = tokio::time::timeout(STDERR_GRACE, task).await;
        }
    }
}

/// A child's standard output as the SDK reads it, checked line by line until its first JSON
/// message. The SDK skips lines that are not JSON, so a server that writes anything else first (a
/// banner, a log line: it is not speaking MCP there) would be noticed only when the start time ran
/// out; here reading stops at once, and what it wrote explains the failure.
struct FirstLinesChecked<R> {
    inner: R,
    /// The line read so far, while checking.
    line: Vec<u8>,
    checking: bool,
    /// The first line that was not JSON, shortened.
    not_json: Arc<StdMutex<Option<String>>>,
}

/// The longest first line checked; a longer one is let through for the SDK to judge.
const CHECKED_LINE_BYTES: usize = 1 << 20;

impl<R> FirstLinesChecked<R> {
    fn new(inner: R, not_json: Arc<StdMutex<Option<String>>>) -> Self {
        FirstLinesChecked { inner, line: Vec::new(), checking: true, not_json }
    }

    /// Looks at newly read bytes; false when they complete a line that is not JSON.
    fn check(&mut self, fresh: &[u8]) -> bool {
        for &byte in fresh {
            if !self.checking {
                break;
            }
            if byte != b'\n' {
                self.line.push(byte);
                self.checking = self.line.len() <= CHECKED_LINE_BYTES;
                continue;
            }
            let line = std::mem::take(&mut self.line);
            let text = line.trim_ascii();
            if text.is_empty() {
                continue;
            }
            if serde_json::from_slice::<serde::de::IgnoredAny>(text).is_ok() {
                self.checking = false;
            } else {
                let shown: String = String::from_utf8_lossy(text).chars().take(200).collect();
                if let Ok(mut slot) = self.not_json.lock() {
                    *slot = Some(shown);
                }
                return false;
            }
        }
        true
    }
}

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for FirstLinesChecked<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::task::Poll;
        let before = buf.filled().len();
        let this = &mut *self;
        match std::pin::Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) if this.checking => {
                let fresh = buf.filled()[before..].to_vec();
                if this.check(&fresh) {
                    Poll::Ready(Ok(()))
                } else {
                    buf.set_filled(before);
                    Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "the server wrote a line that is not an MCP message",
                    )))
                }
            }
            other => other,
        }
    }
}

impl Server {
    fn new(config: McpServerConfig, root: &Path, runtime: tokio::runtime::Handle, cache: Option<CachedList>) -> Server {
        let timeout = config.timeout_s.and_then(|s| Duration::try_from_secs_f64(s).ok()).unwrap_or(DEFAULT_TIMEOUT);
        Server {
            config,
            root: root.to_path_buf(),
            timeout,
            start_time: timeout.max(MIN_START_TIME),
            runtime,
            connection: Mutex::new(Connection::default()),
            stderr_tail: Arc::new(StdMutex::new(VecDeque::new())),
            live: OnceLock::new(),
            tools: StdMutex::new(Listed::default()),
            cache,
        }
    }

    /// Whether the server's latest list has the tool called `tool`.
    fn lists(&self, tool: &str) -> bool {
        self.tools.lock().is_ok_and(|listed| listed.latest.iter().any(|t| t.name == tool))
    }

    /// Records the tools given to the host at start-up as registered.
    fn listed_at_start(&self, tools: Vec<Tool>) {
        if let Ok(mut listed) = self.tools.lock() {
            listed.registered = tools.clone();
            listed.latest = tools;
        }
    }

    fn attach(self: &Arc<Self>, live: LiveTools) {
        let _ = self.live.set(live);
        if let Ok(mut listed) = self.tools.lock() {
            self.reconcile(&mut listed);
        }
    }

    /// Takes `tools` as the server's list now, keeps it for the next run, and brings the registry
    /// in line with it.
    fn relisted(self: &Arc<Self>, tools: Vec<Tool>) {
        if let Some(cache) = &self.cache {
            cache.write(&tools);
        }
        if let Ok(mut listed) = self.tools.lock() {
            listed.latest = tools;
            self.reconcile(&mut listed);
        }
    }

    /// Makes the registry hold the server's latest tools: new ones are added, changed ones
    /// replaced, and those the server no longer lists removed (a call of one is told the server
    /// removed it). Nothing happens before the registry is attached.
    fn reconcile(self: &Arc<Self>, listed: &mut Listed) {
        let Some(live) = self.live.get() else { return };
        let name = self.name().to_string();
        let mut registered = Vec::new();
        for old in &listed.registered {
            if !listed.latest.iter().any(|tool| tool.name == old.name) {
                live.remove(&convert::tool_name(&name, &old.name), &format!("removed by the MCP server \"{name}\""));
            }
        }
        for tool in &listed.latest {
            let before = listed.registered.iter().find(|old| old.name == tool.name);
            if before == Some(tool) {
                registered.push(tool.clone());
                continue;
            }
            match live.add(primitive(self, tool), before.is_some()) {
                Ok(()) => registered.push(tool.clone()),
                Err(e) => eprintln!(
                    "toolhost: the tool {} of mcp server \"{name}\" is not registered: {}",
                    convert::tool_name(&name, &tool.name),
                    e.message()
                ),
            }
        }
        listed.registered = registered;
    }

    fn name(&self) -> &str {
        &self.config.name
    }

    /// Connects and lists the tools, within the time limit.
    async fn start(self: &Arc<Self>) -> std::result::Result<Vec<rmcp::model::Tool>, String> {
        let started = tokio::time::timeout(self.start_time, async {
            let live = self.connect().await?;
            let tools = live.service.peer().list_all_tools().await;
            Ok::<_, String>((live, tools))
        })
        .await;
        let (live, tools) = match started {
            Ok(Ok(started)) => started,
            Ok(Err(why)) => return Err(why),
            Err(_) => return Err(self.explain(&self.no_answer())),
        };
        let tools = match tools {
            Ok(tools) => tools,
            Err(e) => {
                live.close().await;
                return Err(self.explain(&format!("tools/list failed: {e}")));
            }
        };
        if let Some(cache) = &self.cache {
            cache.write(&tools);
        }
        let mut connection = self.connection.lock().await;
        connection.live = Some(live);
        connection.generation += 1;
        Ok(tools)
    }

    fn no_answer(&self) -> String {
        format!(
            "no MCP answer within {} s (its `timeout_s`, at least {} s to start); a server that writes \
             anything but MCP messages to its standard output is not understood",
            self.start_time.as_secs_f64(),
            MIN_START_TIME.as_secs()
        )
    }

    /// Opens a connection: starts the child or reaches the URL, and runs MCP's initialization.
    /// While it is open, the server's `notifications/tools/list_changed` make the client list its
    /// tools again.
    async fn connect(self: &Arc<Self>) -> std::result::Result<Live, String> {
        // Lines a previous process wrote explain nothing about this one.
        if let Ok(mut tail) = self.stderr_tail.lock() {
            tail.clear();
        }
        let (list_changed, changes) = tokio::sync::mpsc::unbounded_channel();
        let info = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("toolhost", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25);
        let client = ServerEvents { info, list_changed };
        let live = self.open(client).await?;
        self.follow_list_changes(live.service.peer().clone(), changes);
        Ok(live)
    }

    /// Lists the tools again after each `notifications/tools/list_changed` the connection brings,
    /// until it closes.
    fn follow_list_changes(
        self: &Arc<Self>,
        peer: Peer<RoleClient>,
        mut changes: tokio::sync::mpsc::UnboundedReceiver<()>,
    ) {
        let server = Arc::downgrade(self);
        tokio::spawn(async move {
            while changes.recv().await.is_some() {
                tokio::time::sleep(LIST_CHANGED_SETTLE).await;
                while changes.try_recv().is_ok() {}
                let Some(server) = server.upgrade() else { break };
                match tokio::time::timeout(server.timeout, peer.list_all_tools()).await {
                    Ok(Ok(tools)) => server.relisted(tools),
                    Ok(Err(e)) => eprintln!(
                        "toolhost: mcp server \"{}\" said its tools changed, but listing them failed: {e}",
                        server.name()
                    ),
                    Err(_) => eprintln!(
                        "toolhost: mcp server \"{}\" said its tools changed, but did not list them within {} s",
                        server.name(),
                        server.timeout.as_secs_f64()
                    ),
                }
            }
        });
    }

    /// Starts the child or reaches the URL, and runs MCP's initialization with `client`.
    async fn open(&self, client: ServerEvents) -> std::result::Result<Live, String> {
        match &self.config.transport {
            McpTransport::Stdio { command, args, env } => {
                use std::process::Stdio;
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args).envs(env).current_dir(&self.root).kill_on_drop(true);
                cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
                let mut child = cmd.spawn().map_err(|e| format!("cannot run `{command}`: {e}"))?;
                let forwarding = child.stderr.take().map(|stderr| self.forward_stderr(stderr));
                let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                    return Err(format!("`{command}` started without its standard input and output"));
                };
                let not_json = Arc::new(StdMutex::new(None));
                let reader = FirstLinesChecked::new(stdout, Arc::clone(&not_json));
                match client.serve((reader, stdin)).await {
                    Ok(service) => Ok(Live { service, stderr: forwarding, child: Some(child) }),
                    Err(e) => {
                        // The child is ended (it may have exited already): let its last words
                        // arrive.
                        let _ = child.start_kill();
                        if let Some(task) = forwarding {
                            let _ = tokio::time::timeout(STDERR_GRACE, task).await;
                        }
                        let wrote = not_json.lock().ok().and_then(|mut seen| seen.take());
                        let why = match wrote {
                            Some(line) => {
                                format!("it wrote something that is not MCP on its standard output: `{line}`")
                            }
                            None => initialize_failure(&e),
                        };
                        Err(self.explain(&why))
                    }
                }
            }
            McpTransport::Http { url } => {
                install_crypto_provider();
                let transport = StreamableHttpClientTransport::from_uri(url.as_str());
                match client.serve(transport).await {
                    Ok(service) => Ok(Live { service, stderr: None, child: None }),
                    Err(e) => Err(format!("cannot reach {url}: {}", initialize_failure(&e))),
                }
            }
        }
    }

    /// Copies the child's standard error to ours, each line marked with the server's name, and keeps
    /// the last lines for messages.
    fn forward_stderr(&self, stderr: tokio::process::ChildStderr) -> tokio::task::JoinHandle<()> {
        let (name, tail) = (self.config.name.clone(), Arc::clone(&self.stderr_tail));
        tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::new(stderr);
            let mut line = Vec::new();
            loop {
                line.clear();
                match reader.read_until(b'\n', &mut line).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let text = String::from_utf8_lossy(&line).trim_end().to_string();
                        eprintln!("[{name}] {text}");
                        if let Ok(mut tail) = tail.lock() {
                            if tail.len() == STDERR_TAIL_LINES {
                                tail.pop_front();
                            }
                            tail.push_back(text);
                        }
                    }
                }
            }
        })
    }

    /// `why`, followed by the server's last lines on standard error when it wrote any.
    fn explain(&self, why: &str) -> String {
        let tail: Vec<String> = self.stderr_tail.lock().map(|t| t.iter().cloned().collect()).unwrap_or_default();
        if tail.is_empty() {
            why.to_string()
        } else {
            format!("{why} (its standard error ended with: {})", tail.join(" | "))
        }
    }

    fn is_connected(self: &Arc<Self>) -> bool {
        let (tx, rx) = mpsc::channel();
        let server = Arc::clone(self);
        self.runtime.spawn(async move {
            let connection = server.connection.lock().await;
            let _ = tx.send(connection.live.as_ref().is_some_and(Live::is_open));
        });
        rx.recv().unwrap_or(false)
    }

    /// The peer of a live connection, starting the server again when it has stopped.
    async fn peer(self: &Arc<Self>) -> Result<(Peer<RoleClient>, u64)> {
        let mut connection = self.connection.lock().await;
        if let Some(live) = connection.live.take() {
            if live.is_open() {
                let peer = live.service.peer().clone();
                connection.live = Some(live);
                return Ok((peer, connection.generation));
            }
            // It stopped between calls: say so once, then start it again.
            live.close().await;
            eprintln!(
                "toolhost: {}",
                self.explain(&format!("mcp server \"{}\" stopped; starting it again", self.name()))
            );
        }
        // Every start lists the tools again: they may have changed while it was not running.
        let restarted = tokio::time::timeout(self.start_time, async {
            let live = self.connect().await?;
            match live.service.peer().list_all_tools().await {
                Ok(tools) => Ok((live, tools)),
                Err(e) => {
                    live.close().await;
                    Err(self.explain(&format!("tools/list failed: {e}")))
                }
            }
        })
        .await;
        match restarted {
            Ok(Ok((live, tools))) => {
                self.relisted(tools);
                connection.generation += 1;
                let peer = live.service.peer().clone();
                connection.live = Some(live);
                Ok((peer, connection.generation))
            }
            Ok(Err(why)) => Err(self.not_started(connection.generation, &why)),
            Err(_) => Err(self.not_started(connection.generation, &self.explain(&self.no_answer()))),
        }
    }

    /// The error of a call whose server did not start: for the first time (its tool list was
    /// kept from an earlier run), or again after it stopped.
    fn not_started(&self, generation: u64, why: &str) -> Error {
        let state = if generation == 0 { "did not start" } else { "is not running and did not start again" };
        Error::tool_failed(format!("the MCP server \"{}\" {state}: {why}", self.name()))
    }

    /// Forgets connection `generation` after it failed, and reports the stop once, saying `next`.
    async fn forget(&self, generation: u64, next: &str) {
        let mut connection = self.connection.lock().await;
        if connection.generation == generation {
            if let Some(live) = connection.live.take() {
                live.close().await;
                eprintln!("toolhost: {}", self.explain(&format!("mcp server \"{}\" stopped; {next}", self.name())));
            }
        }
    }

    /// Sends `tools/call` and waits for the answer, within the time limit.
    async fn call(self: &Arc<Self>, tool: &str, arguments: Map<String, Value>) -> Result<CallToolResult> {
        let (mut peer, mut generation) = self.peer().await?;
        if !self.lists(tool) {
            // Starting the server listed its tools again, and this one was gone.
            let name = convert::tool_name(self.name(), tool);
            return Err(Error::new(
                ErrorKind::UnknownTool,
                format!(
                    "there is no tool called \"{name}\" any more: {name} was removed by the MCP server \"{}\"",
                    self.name()
                ),
            )
            .with_tool(name));
        }
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        let mut answer = tokio::time::timeout(self.timeout, peer.call_tool(params.clone())).await;
        if let Ok(Err(ServiceError::TransportSend(_))) = &answer {
            if matches!(self.config.transport, McpTransport::Stdio { .. }) {
                // Writing the request to the child's input failed, so the server never read it:
                // it has stopped. Sending it to a fresh server cannot run it twice. (Over HTTP a
                // failed request may still have arrived, so it is not sent again.)
                self.forget(generation, "starting it again for the call it did not receive").await;
                (peer, generation) = self.peer().await?;
                answer = tokio::time::timeout(self.timeout, peer.call_tool(params)).await;
            }
        }
        match answer {
            Err(_) => Err(Error::new(
                ErrorKind::Timeout,
                format!(
                    "the MCP server \"{}\" did not answer within {} s (its `timeout_s`); it was asked to cancel the call",
                    self.name(),
                    self.timeout.as_secs_f64()
                ),
            )),
            Ok(Ok(result)) => {
                if result.is_error == Some(true) {
                    let text = convert::result_text(&result);
                    let text = if text.trim().is_empty() { "the server reported an error and said nothing more" } else { &text };
                    return Err(Error::tool_failed(text.to_string()));
                }
                Ok(result)
            }
            Ok(Err(ServiceError::McpError(e))) => {
                Err(Error::tool_failed(format!("the MCP server \"{}\" refused the call: {}", self.name(), e.message)))
            }
            Ok(Err(e @ (ServiceError::TransportClosed | ServiceError::TransportSend(_)))) => {
                self.forget(generation, "it is started again on the next call of one of its tools").await;
                let how = match &e {
                    ServiceError::TransportSend(send) => causes(send.error.as_ref()),
                    other => other.to_string().to_lowercase(),
                };
                Err(Error::tool_failed(self.explain(&format!(
                    "the MCP server \"{}\" stopped during the call ({how}), so it may or may not have done it; \
                     it is started again on the next call",
                    self.name()
                ))))
            }
            Ok(Err(e)) => Err(Error::tool_failed(format!("the MCP server \"{}\": {e}", self.name()))),
        }
    }

    /// [`Server::call`] from synchronous code: the call runs on the runtime and this thread waits
    /// for it, so it works from any thread, inside another runtime's task or not.
    fn call_blocking(self: &Arc<Self>, tool: &str, arguments: Map<String, Value>) -> Result<ToolOutput> {
        let (tx, rx) = mpsc::channel();
        let (server, tool) = (Arc::clone(self), tool.to_string());
        self.runtime.spawn(async move {
            let _ = tx.send(server.call(&tool, arguments).await);
        });
        let answer = rx.recv().unwrap_or_else(|_| {
            Err(Error::tool_failed(format!("the MCP client of \"{}\" has shut down", self.name())))
        });
        // Scheme values stay on this thread: the result becomes one here.
        answer.map(|result| convert::result_output(&result))
    }

    async fn shut_down(&self) {
        let live = self.connection.lock().await.live.take();
        if let Some(live) = live {
            live.close().await;
        }
    }
}

/// Why initialization failed, in words: a closed connection usually means the server exited.
fn initialize_failure(e: &rmcp::service::ClientInitializeError) -> String {
    use rmcp::service::ClientInitializeError as E;
    match e {
        E::ConnectionClosed(_) => "it closed the connection before answering `initialize` (did it exit?)".to_string(),
        E::TransportError { error, context } => format!("cannot {context}: {}", causes(error.error.as_ref())),
        other => format!("`initialize` failed: {other}"),
    }
}

/// An error and its sources, each once: `error sending request: Connection refused (os error 111)`.
fn causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

/// Installs ring as the process's TLS crypto provider, once, before the first HTTP client is built
/// (reqwest is built without a provider of its own). Another provider already installed is kept.
fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
