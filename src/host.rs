//! The host: one steel engine, the registry and the guard tied together. It builds the engine with
//! the tools bound as Scheme procedures (through `crate::bridge`), loads the prelude and the tool
//! folders, evaluates Scheme, and runs JSON calls through `crate::call`, running the tool itself
//! when the call path asks. REPL, CLI, agent loop and MCP server see only this type, or the
//! [`crate::HostHandle`] that carries it to its own thread.
//!
//! The engine is not `Send` (steel uses `Rc`), so a `Host` lives on one thread; a [`HostBuilder`]
//! is `Send`, so a host can be built on the thread that will own it.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Once};
use std::time::Duration;

use serde_json::Value;
use steel::rvals::SteelVal;
use steel::steel_vm::engine::Engine;

use crate::bridge::{self, steel_message, Shared};
use crate::call::{self, CallOptions, CallRecord, CallRequest};
use crate::config::{Config, McpServerConfig};
use crate::context::{Cancel, Limits, ToolCtx};
use crate::engine;
use crate::error::{Error, ErrorKind, Result};
use crate::guard::{Confirmer, Guard};
use crate::mcp::McpClients;
use crate::registry::{Handler, Primitive, Registry};
use crate::spec::SpecSet;
use crate::tools;
use crate::value::write_scheme;
use crate::watchdog::Watchdog;
use crate::workspace::Workspace;

/// The prelude every host loads before any tool file: `register-tool`'s Scheme half, `define-tool`
/// and helpers for tool authors.
pub const PRELUDE: &str = include_str!("../prelude.scm");

/// The Scheme tools that ship with toolhost (`scheme/*.scm`), compiled into the binary so it runs
/// from anywhere. They are built on the built-in tools.
pub const SHIPPED_TOOLS: &[(&str, &str)] =
    &[("scheme/code.scm", include_str!("../scheme/code.scm")), ("scheme/git.scm", include_str!("../scheme/git.scm"))];

/// The folder under the workspace that holds a project's own tool files.
pub const PROJECT_TOOLS_DIR: &str = ".toolhost/tools";

/// Stops what a [`Host`] is running; see [`Host::interrupter`].
#[derive(Clone)]
pub struct Interrupter(steel::steel_vm::ThreadStateController, Cancel);

impl Interrupter {
    /// Interrupts the running evaluation at its next instruction, and the tool it waits on (a
    /// `shell-exec` command and its whole process group are killed).
    pub fn interrupt(&self) {
        // The engine first: whoever sees the flag clears both.
        self.0.interrupt();
        self.1.cancel();
    }
}

/// What an interrupted run reports.
const INTERRUPTED: &str = "interrupted";

/// steel decides its home folder once per process, the first time it compiles anything: from
/// `STEEL_HOME`, or else by creating a folder in the user's data directory and printing "Unable to
/// create steel home directory" to standard error when it cannot. toolhost reads nothing from there,
/// so when the variable is unset it points steel at a folder name in the temporary directory
/// (steel does not create it), before the first engine is built.
fn settle_steel_home() {
    static SETTLED: Once = Once::new();
    SETTLED.call_once(|| {
        if std::env::var_os("STEEL_HOME").is_none() {
            std::env::set_var("STEEL_HOME", std::env::temp_dir().join("toolhost-steel-home"));
        }
    });
}

/// Settings for a [`Host`]. `Send`, so a host can be built on the thread that will own it.
///
/// ```no_run
/// let host = toolhost::HostBuilder::new(".").tool_dir("my-tools").build().unwrap();
/// for problem in host.load_errors() {
///     eprintln!("{problem}");
/// }
/// ```
pub struct HostBuilder {
    root: PathBuf,
    tool_dirs: Vec<PathBuf>,
    builtin_tools: bool,
    shipped_tools: bool,
    project_tools: bool,
    limits: Limits,
    guard: Guard,
    confirmer: Option<Confirmer>,
    extra: Vec<Primitive>,
    trusted_scripts: bool,
    display_to_stderr: bool,
    mcp_servers: Vec<McpServerConfig>,
}

impl HostBuilder {
    /// A host working in the folder `root`, with the built-in tools, the shipped Scheme tools and
    /// the project's `.toolhost/tools/`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        HostBuilder {
            root: root.into(),
            tool_dirs: Vec::new(),
            builtin_tools: true,
            shipped_tools: true,
            project_tools: true,
            limits: Limits::default(),
            guard: Guard::default(),
            confirmer: None,
            extra: Vec::new(),
            trusted_scripts: false,
            display_to_stderr: false,
            mcp_servers: Vec::new(),
        }
    }

    /// Loads every `.scm` file of `dir` too (after the shipped tools and the project's own). The
    /// folder must exist.
    pub fn tool_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.tool_dirs.push(dir.into());
        self
    }

    /// Whether to register the built-in Rust tools (`fs-read`, ...). On by default. The shipped
    /// Scheme tools are built on them, so without them those are not loaded either.
    pub fn builtin_tools(mut self, on: bool) -> Self {
        self.builtin_tools = on;
        self
    }

    /// Whether to load the Scheme tools shipped in `scheme/`. On by default.
    pub fn shipped_tools(mut self, on: bool) -> Self {
        self.shipped_tools = on;
        self
    }

    /// Whether to load the workspace's `.toolhost/tools/`. On by default; the command line turns it
    /// off in a workspace that is not trusted.
    pub fn project_tools(mut self, on: bool) -> Self {
        self.project_tools = on;
        self
    }

    /// Output caps and time limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The guard's rules, default and confirmer.
    pub fn guard(mut self, guard: Guard) -> Self {
        self.guard = guard;
        self
    }

    /// Who answers the guard's confirmations, whatever guard is set.
    pub fn confirmer(mut self, confirmer: Confirmer) -> Self {
        self.confirmer = Some(confirmer);
        self
    }

    /// Applies a config (design section 17): its limits, its guard rules and default, its tool
    /// folders, whether scripts are trusted, and its `[[mcp]]` servers. A confirmer set with
    /// [`HostBuilder::confirmer`] is kept.
    ///
    /// # Errors
    /// A rule whose glob does not compile (the config reader checks them first).
    pub fn config(self, config: &Config) -> Result<Self> {
        let mut builder = self
            .limits(Limits::from_config(config))
            .guard(Guard::from_config(config)?)
            .trusted_scripts(config.scripts_trusted.unwrap_or(false))
            .mcp_servers(config.mcp.clone());
        for dir in &config.tools {
            if !dir.is_dir() {
                let files: Vec<String> = config.files.iter().map(|f| f.display().to_string()).collect();
                return Err(Error::config(format!(
                    "the tool folder {} named in `tools` does not exist (config read from {})",
                    dir.display(),
                    files.join(", ")
                )));
            }
            builder = builder.tool_dir(dir);
        }
        Ok(builder)
    }

    /// Registers a Rust tool of the embedding program (see [`crate::Tool`]).
    pub fn tool(mut self, primitive: Primitive) -> Self {
        self.extra.push(primitive);
        self
    }

    /// Gives scripts steel's own file, process and network procedures. Off by default: scripts
    /// reach files and processes only through the guarded tools.
    pub fn trusted_scripts(mut self, trusted: bool) -> Self {
        self.trusted_scripts = trusted;
        self
    }

    /// MCP servers to start when the host is built; each of their tools becomes a primitive named
    /// `server.tool` (see [`crate::mcp`]). A server that does not start is one of
    /// [`Host::load_errors`], and the rest of the host works without it.
    pub fn mcp_servers(mut self, servers: Vec<McpServerConfig>) -> Self {
        self.mcp_servers = servers;
        self
    }

    /// Sends what scripts print with `display`/`displayln` to standard error instead of standard
    /// output, for programs whose standard output carries an answer (`toolhost call`, an MCP server).
    pub fn display_to_stderr(mut self, on: bool) -> Self {
        self.display_to_stderr = on;
        self
    }

    /// Builds the engine, registers and binds the tools, and loads the prelude and tool files.
    /// Tool files that fail are reported by [`Host::load_errors`], not here.
    ///
    /// # Errors
    /// When the workspace root does not exist, a tool folder given with [`HostBuilder::tool_dir`]
    /// does not exist, a Rust tool is refused by the registry, or the prelude fails to load (a bug).
    pub fn build(self) -> Result<Host> {
        settle_steel_home();
        let workspace = Workspace::new(&self.root)?;
        if let Some(missing) = self.tool_dirs.iter().find(|d| !d.is_dir()) {
            return Err(Error::config(format!("the tool folder {} does not exist", missing.display())));
        }
        let mut registry = Registry::new();
        if self.builtin_tools {
            for tool in tools::builtin_tools(&self.limits)? {
                registry.register(tool)?;
            }
        }
        for tool in self.extra {
            registry.register(tool)?;
        }
        let mut engine = engine::new_engine(self.trusted_scripts, self.display_to_stderr)
            .map_err(|message| Error::new(ErrorKind::Script, message))?;
        let mut scheme_names: HashSet<String> =
            engine.globals().iter().map(|name| name.resolve().to_string()).collect();
        scheme_names.extend(prelude_names());
        let (mcp, load_errors) = start_mcp(&self.mcp_servers, workspace.root(), &mut registry, &scheme_names);
        let ctx = ToolCtx { workspace, limits: self.limits, cancel: Cancel::default() };
        let guard = match self.confirmer {
            Some(confirmer) => self.guard.confirmer(confirmer),
            None => self.guard,
        };
        let shared = Arc::new(Shared::new(registry.clone(), ctx, guard, scheme_names));
        bridge::install(&mut engine, &shared);
        for tool in registry.iter() {
            shared.check_free(tool.name())?;
            bridge::bind_rust_tool(&mut engine, &shared, tool.clone());
        }
        let watchdog = Watchdog::new(engine.get_thread_state_controller());
        let mut host = Host { engine, shared, watchdog, load_errors, trusted_scripts: self.trusted_scripts, mcp };
        host.load_text("prelude.scm", PRELUDE, true)?;
        if self.shipped_tools && self.builtin_tools {
            for (name, text) in SHIPPED_TOOLS {
                if let Err(e) = host.load_text(name, text, true) {
                    host.load_errors.push(e);
                }
            }
        }
        let mut dirs = Vec::new();
        if self.project_tools {
            dirs.push(host.shared.ctx.workspace.root().join(PROJECT_TOOLS_DIR));
        }
        dirs.extend(self.tool_dirs);
        for dir in dirs {
            host.load_dir(&dir);
        }
        Ok(host)
    }
}

/// A running tool host. See the crate docs for an example.
pub struct Host {
    engine: Engine,
    shared: Arc<Shared>,
    watchdog: Watchdog,
    load_errors: Vec<Error>,
    trusted_scripts: bool,
    /// The MCP servers whose tools are registered; dropped after the registry that calls them.
    mcp: Option<McpClients>,
}

impl Host {
    /// A host on `root` with every default: built-in tools, shipped Scheme tools, the project's
    /// tool folder.
    ///
    /// # Errors
    /// See [`HostBuilder::build`].
    pub fn new(root: impl Into<PathBuf>) -> Result<Host> {
        HostBuilder::new(root).build()
    }

    /// The tool files that failed to load, in load order; each error names its file and, when it
    /// can be told, the line.
    pub fn load_errors(&self) -> &[Error] {
        &self.load_errors
    }

    /// The MCP servers this host is a client of, when it has any.
    pub fn mcp_clients(&self) -> Option<&McpClients> {
        self.mcp.as_ref()
    }

    /// The workspace.
    pub fn workspace(&self) -> &Workspace {
        &self.shared.ctx.workspace
    }

    /// The limits tools run under.
    pub fn limits(&self) -> &Limits {
        &self.shared.ctx.limits
    }

    /// A snapshot of the registry, in registration order.
    pub fn registry(&self) -> Registry {
        self.shared.registry.read().map(|r| r.clone()).unwrap_or_default()
    }

    /// The specs of every tool, in registration order: what catalogues are made from.
    pub fn specs(&self) -> SpecSet {
        self.shared.registry.read().map(|r| r.specs().clone()).unwrap_or_default()
    }

    /// The names Scheme code can use besides the tools: steel's library, the prelude's helpers and
    /// the value procedures.
    pub fn scheme_names(&self) -> Vec<String> {
        self.shared.scheme_names.iter().cloned().collect()
    }

    /// The tool called `name`.
    pub fn tool(&self, name: &str) -> Option<Arc<Primitive>> {
        self.shared.tool(name)
    }

    /// Registers a Rust tool after start-up and binds it in the engine.
    ///
    /// # Errors
    /// When the registry refuses it (see [`Registry::register`]).
    pub fn register(&mut self, primitive: Primitive) -> Result<()> {
        let name = primitive.name().to_string();
        self.shared.check_free(&name)?;
        self.shared
            .registry
            .write()
            .map_err(|_| Error::tool_failed("the registry lock is poisoned"))?
            .register(primitive)?;
        if let Some(tool) = self.shared.tool(&name) {
            bridge::bind_rust_tool(&mut self.engine, &self.shared, tool);
        }
        Ok(())
    }

    /// Calls `tool` with arguments as a model sent them, as JSON text (empty text means no
    /// arguments), through the whole call path; returns the call's record.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\n").unwrap();
    /// let mut host = toolhost::Host::new(dir.path()).unwrap();
    /// let record = host.call_json("fs-read", r#"{"path": "a.txt", "count": 2}"#);
    /// assert_eq!(record.model_text(), "1\tone\n2\ttwo\n... 1 more line; next start 3\n");
    /// ```
    pub fn call_json(&mut self, tool: &str, arguments: &str) -> CallRecord {
        self.call_json_with(tool, arguments, CallOptions::default())
    }

    /// [`Host::call_json`] with options.
    pub fn call_json_with(&mut self, tool: &str, arguments: &str, options: CallOptions) -> CallRecord {
        self.run_call(&CallRequest { tool: tool.to_string(), arguments: arguments.to_string(), options })
    }

    /// Calls `tool` with arguments already parsed from JSON.
    pub fn call(&mut self, tool: &str, arguments: Value) -> CallRecord {
        self.call_json(tool, &arguments.to_string())
    }

    /// Runs one call request through the call path.
    pub fn run_call(&mut self, request: &CallRequest) -> CallRecord {
        let shared = Arc::clone(&self.shared);
        let record = call::run(&shared, request, &mut |tool, values| match &tool.handler {
            Handler::Rust(_) => bridge::invoke_rust(&shared, tool, &values),
            Handler::Scheme => self.call_scheme_tool(tool.name(), values),
        });
        self.consume_interrupt();
        record
    }

    /// Evaluates Scheme source and returns the value of its last expression (void when empty).
    ///
    /// # Errors
    /// [`ErrorKind::Script`] with steel's message when it does not compile or fails.
    pub fn eval(&mut self, source: &str) -> Result<SteelVal> {
        self.eval_within(source, None)
    }

    /// [`Host::eval`] stopped after `limit` (a `timeout` error), when one is given.
    ///
    /// # Errors
    /// As [`Host::eval`], and [`ErrorKind::Timeout`].
    pub fn eval_within(&mut self, source: &str, limit: Option<Duration>) -> Result<SteelVal> {
        Ok(self.eval_all(source, limit)?.pop().unwrap_or(SteelVal::Void))
    }

    /// Evaluates every expression of Scheme source, in order, and returns each one's value (void
    /// for definitions), stopped after `limit` when one is given.
    ///
    /// # Errors
    /// As [`Host::eval_within`].
    pub fn eval_all(&mut self, source: &str, limit: Option<Duration>) -> Result<Vec<SteelVal>> {
        let values = self.run_source(source, "<eval>", limit, false);
        self.bind_pending();
        values
    }

    /// Runs a script file in the host (`toolhost run`), stopped after `limit` when one is given.
    ///
    /// # Errors
    /// An error naming the file and, when it can be told, the line.
    pub fn run_file(&mut self, path: &Path, limit: Option<Duration>) -> Result<SteelVal> {
        let name = path.display().to_string();
        let text = read_source(path)?;
        self.run_file_text(&name, &text, limit)
    }

    fn run_file_text(&mut self, name: &str, text: &str, limit: Option<Duration>) -> Result<SteelVal> {
        let values = self.run_source(text, name, limit, false);
        self.bind_pending();
        Ok(values?.into_iter().last().unwrap_or(SteelVal::Void))
    }

    /// A handle that stops whatever Scheme code this host is running, from another thread (the
    /// REPL's Ctrl-C). The interrupted evaluation fails; the next one runs normally.
    pub fn interrupter(&self) -> Interrupter {
        Interrupter(self.engine.get_thread_state_controller(), self.shared.ctx.cancel.clone())
    }

    /// Forgets an interrupt that arrived while nothing ran, so it does not stop the next run: the
    /// REPL calls it as it shows its prompt, the handle before each request.
    pub fn clear_interrupt(&mut self) {
        self.consume_interrupt();
    }

    /// Clears a pending interrupt (the engine needs that before it runs again); true when there
    /// was one.
    fn consume_interrupt(&mut self) -> bool {
        let pending = self.shared.ctx.cancel.is_cancelled();
        if pending {
            self.engine.get_thread_state_controller().resume();
            self.shared.ctx.cancel.reset();
        }
        pending
    }

    /// Evaluates Scheme source and gives the value of its last expression as text, for programs:
    /// a string as its text, void as nothing, any other value as JSON when it converts, else in
    /// Scheme notation.
    ///
    /// # Errors
    /// As [`Host::eval`].
    pub fn eval_to_string(&mut self, source: &str) -> Result<String> {
        let value = self.eval(source)?;
        Ok(match &value {
            SteelVal::Void => String::new(),
            SteelVal::StringV(s) => s.as_str().to_string(),
            other => crate::value::scheme_to_json(other).map_or_else(|_| write_scheme(other), |json| json.to_string()),
        })
    }

    /// Evaluates every expression of Scheme source and renders their values as the REPL and
    /// `toolhost eval` print them: one line each in Scheme notation ([`write_scheme`]), void ones
    /// (definitions, `display`) left out.
    ///
    /// # Errors
    /// As [`Host::eval`].
    pub fn eval_printed(&mut self, source: &str) -> Result<String> {
        Ok(render_values(&self.eval_all(source, None)?))
    }

    /// Loads every `.scm` file of `dir`, in name order, recording failures in
    /// [`Host::load_errors`]. A missing folder is not an error.
    pub fn load_dir(&mut self, dir: &Path) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "scm") && p.is_file())
            .collect();
        files.sort();
        for file in files {
            if let Err(e) = self.load_file(&file) {
                self.load_errors.push(e);
            }
        }
    }

    /// Loads one tool file.
    ///
    /// # Errors
    /// An error naming the file and, when it can be told, the line.
    pub fn load_file(&mut self, path: &Path) -> Result<()> {
        let name = path.display().to_string();
        let text = read_source(path)?;
        self.load_source(&name, &text)
    }

    /// Loads Scheme source as a tool file called `name`, with the per-call time limit so a file
    /// that loops forever cannot hang start-up.
    ///
    /// # Errors
    /// An error naming the file and, when it can be told, the line.
    pub fn load_source(&mut self, name: &str, text: &str) -> Result<()> {
        self.load_text(name, text, false)
    }

    fn load_text(&mut self, name: &str, text: &str, ours: bool) -> Result<()> {
        let limit = self.shared.ctx.limits.scheme_call;
        let result = self.run_source(text, name, Some(limit), ours);
        self.bind_pending();
        if let Err(e) = &result {
            self.leave_unavailable(text, e);
        }
        result.map(|_| ())
    }

    /// After a tool file failed, binds each tool it meant to define but did not to a procedure
    /// that says so and why, instead of leaving the name unbound or bound to nothing.
    fn leave_unavailable(&mut self, text: &str, error: &Error) {
        let scan = engine::scan(text);
        for name in scan.tool_names.iter().chain(&scan.defined_tools) {
            if self.shared.tool(name).is_some() || self.shared.scheme_names.contains(name) {
                continue;
            }
            let message = format!("{name} is not defined: the file that defines it failed to load: {error}");
            let function = move |_: &[SteelVal]| -> steel::rvals::Result<SteelVal> {
                Err(steel::rerrs::SteelErr::new(steel::rerrs::ErrorKind::Generic, message.clone()))
            };
            self.engine.register_value(name, SteelVal::anonymous_boxed_function(Arc::new(function)));
        }
    }

    /// Runs a program under an optional time limit, reporting failures with the file and the line
    /// they point at. `ours` marks toolhost's own source (the prelude, the shipped tools), which may
    /// use what untrusted scripts may not.
    fn run_source(&mut self, source: &str, name: &str, limit: Option<Duration>, ours: bool) -> Result<Vec<SteelVal>> {
        let failure = |kind: ErrorKind, line: Option<usize>, message: String| Error::new(kind, message).at(name, line);
        if let Some((offset, problem)) = engine::unbalanced(source) {
            let column = source[..offset].rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            let message = format!("cannot read it: at column {column}, {problem}");
            return Err(failure(ErrorKind::Script, line_of(source, offset), message));
        }
        let scan = engine::scan(source);
        if let (false, false, Some(offset)) = (ours, self.trusted_scripts, scan.require_at) {
            return Err(failure(ErrorKind::Script, line_of(source, offset), engine::REQUIRE_REFUSED.to_string()));
        }
        if let Some(offset) = scan.too_deep_at {
            let message = format!("brackets nest deeper than {} levels", engine::MAX_SOURCE_DEPTH);
            return Err(failure(ErrorKind::Script, line_of(source, offset), message));
        }
        self.prebind(&scan.tool_names);
        self.shared.reset_raised();
        // An interrupt that came after the input was read and before the run began is for this run.
        if self.consume_interrupt() {
            return Err(failure(ErrorKind::Script, None, INTERRUPTED.to_string()));
        }
        let armed = limit.map(|l| self.watchdog.arm(l));
        let result = engine::run(&mut self.engine, source.to_string());
        let fired = armed.is_some_and(|a| self.watchdog.disarm(a));
        let interrupted = self.consume_interrupt();
        result.map_err(|e| {
            if fired {
                let secs = limit.unwrap_or_default().as_secs_f64();
                return failure(ErrorKind::Timeout, None, format!("stopped after {secs} s: the time limit passed"));
            }
            if interrupted {
                return failure(ErrorKind::Script, None, INTERRUPTED.to_string());
            }
            let raised = self.shared.raised(&e);
            let line = self.error_line(&e, source).or_else(|| {
                // An error raised by a tool (register-tool's checks among them) has no span in the
                // source: point at the first mention of the tool it names.
                let tool = raised.as_ref()?.tool()?;
                let at = source.find(&format!("\"{tool}\"")).or_else(|| source.find(&format!("({tool}")))?;
                line_of(source, at)
            });
            failure(ErrorKind::Script, line, steel_message(&e))
        })
    }

    /// The line of `source` an error points at: its own span, or else the innermost call in its
    /// stack trace that lies in `source`. A span counts only when steel stored this very text under
    /// its source id.
    fn error_line(&self, e: &steel::rerrs::SteelErr, source: &str) -> Option<usize> {
        let in_source = |span: &steel::parser::span::Span| {
            let id = span.source_id()?;
            let stored = self.engine.get_source(&id)?;
            if stored.as_ref().as_ref() == source {
                line_of(source, span.start() as usize)
            } else {
                None
            }
        };
        e.span().and_then(|span| in_source(&span)).or_else(|| {
            e.stack_trace().as_ref()?.trace().iter().rev().find_map(|frame| frame.span().as_ref().and_then(in_source))
        })
    }

    /// Binds the names of tools a program is about to register with `register-tool`, so the
    /// program itself can call them (steel refuses a reference to an unknown global at compile
    /// time). The binding looks the tool up when called, so a tool that never gets registered
    /// answers "no tool called ...". Names in use are left alone.
    fn prebind(&mut self, names: &[String]) {
        for name in names {
            let taken = self.shared.scheme_names.contains(name)
                || self.shared.tool(name).is_some()
                || self.engine.extract_value(name).is_ok();
            if !taken && crate::param::provider_name(name).is_some() {
                self.bind_tool_name(name);
            }
        }
    }

    fn bind_tool_name(&mut self, name: &str) {
        let wrapper =
            self.engine.call_function_by_name_with_args("%tool-wrapper", vec![SteelVal::StringV(name.into())]);
        if let Ok(wrapper) = wrapper {
            self.engine.register_value(name, wrapper);
        }
    }

    /// Binds the Scheme tools registered by the program that just ran as global procedures.
    fn bind_pending(&mut self) {
        let names: Vec<String> = match self.shared.pending.lock() {
            Ok(mut pending) => pending.drain(..).collect(),
            Err(_) => return,
        };
        for name in names {
            self.bind_tool_name(&name);
        }
    }

    /// Calls a Scheme tool's procedure with converted arguments, under the per-call time limit.
    /// A failure keeps the kind of the tool error that caused it (a `denied` path stays `denied`).
    fn call_scheme_tool(&mut self, name: &str, args: Vec<SteelVal>) -> Result<SteelVal> {
        let procs = self
            .engine
            .extract_value("%toolhost-procs")
            .map_err(|e| Error::tool_failed(format!("the Scheme tool table is missing: {}", steel_message(&e))))?;
        let proc = match &procs {
            SteelVal::HashMapV(map) => map.get(&SteelVal::StringV(name.into())).cloned(),
            _ => None,
        }
        .ok_or_else(|| Error::tool_failed(format!("{name}: its Scheme procedure is missing")))?;
        let limit = self.shared.ctx.limits.scheme_call;
        self.shared.reset_raised();
        let armed = self.watchdog.arm(limit);
        let result = engine::call(&mut self.engine, proc, args);
        let fired = self.watchdog.disarm(armed);
        self.bind_pending();
        match result {
            Ok(v) => Ok(v),
            Err(_) if fired => Err(Error::new(
                ErrorKind::Timeout,
                format!("{name}: stopped after {} s, the time limit for one call", limit.as_secs_f64()),
            )
            .with_tool(name)),
            Err(_) if self.shared.ctx.cancel.is_cancelled() => {
                Err(Error::tool_failed(format!("{name}: {INTERRUPTED}")).with_tool(name))
            }
            Err(e) => {
                let kind = self.shared.raised(&e).map_or(ErrorKind::ToolFailed, |raised| raised.kind());
                Err(Error::new(kind, steel_message(&e)).in_tool(name))
            }
        }
    }
}

/// Starts the MCP servers and registers their tools. What fails (a server that does not start, a
/// tool whose name cannot be registered) becomes a load error; a call naming a tool of a server that
/// did not start is told so.
fn start_mcp(
    servers: &[McpServerConfig],
    root: &Path,
    registry: &mut Registry,
    scheme_names: &HashSet<String>,
) -> (Option<McpClients>, Vec<Error>) {
    if servers.is_empty() {
        return (None, Vec::new());
    }
    let clients = McpClients::start(servers, root);
    let mut errors = clients.problems().to_vec();
    for tool in clients.primitives() {
        let name = tool.name();
        let registered = if scheme_names.contains(name) {
            Err(Error::new(ErrorKind::InvalidDefinition, format!("\"{name}\" is already a Scheme name")))
        } else {
            registry.register(tool.clone())
        };
        if let Err(e) = registered {
            errors.push(Error::new(e.kind(), format!("MCP tool {name} is not registered: {}", e.message())));
        }
    }
    for (server, why) in clients.failed() {
        registry.note_unavailable(format!("{server}."), format!("the MCP server \"{server}\" did not start: {why}"));
    }
    (Some(clients), errors)
}

/// Reads a Scheme file; an error names it.
fn read_source(path: &Path) -> Result<String> {
    let name = path.display().to_string();
    std::fs::read_to_string(path).map_err(|e| Error::new(ErrorKind::Script, e.to_string()).at(name, None))
}

/// The names `prelude.scm` defines at top level.
fn prelude_names() -> impl Iterator<Item = String> {
    PRELUDE.lines().filter_map(|line| {
        let rest = line.strip_prefix("(define-syntax ").or_else(|| line.strip_prefix("(define "))?;
        let name = rest.trim_start_matches('(').split([' ', ')']).next()?;
        (!name.is_empty()).then(|| name.to_string())
    })
}

/// The line of byte `offset` in `text`, 1-based.
fn line_of(text: &str, offset: usize) -> Option<usize> {
    (offset <= text.len()).then(|| text.as_bytes()[..offset].iter().filter(|&&b| b == b'\n').count() + 1)
}

/// How the REPL and `toolhost eval` print the values of a program's expressions: one line each
/// in Scheme notation, void ones left out.
pub fn render_values(values: &[SteelVal]) -> String {
    let lines: Vec<String> = values.iter().map(write_scheme).filter(|line| !line.is_empty()).collect();
    lines.join("\n")
}
