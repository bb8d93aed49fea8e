//! The host: one steel engine, the registry and the guard tied together. It builds the engine with
//! the tools bound as Scheme procedures, loads the prelude and the tool folders, evaluates Scheme,
//! and runs JSON calls (the call path itself is in `crate::call`). REPL, CLI, agent loop and MCP
//! server see only this type.
//!
//! The engine is not `Send` (steel uses `Rc`), so a `Host` lives on one thread; what the engine's
//! Rust procedures share with it ([`Shared`]) is `Send + Sync`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use steel::rerrs::{ErrorKind as SteelErrorKind, SteelErr};
use steel::rvals::SteelVal;
use steel::steel_vm::engine::Engine;

use crate::args;
use crate::context::{Limits, ToolCtx};
use crate::engine;
use crate::error::{Error, ErrorKind, Result};
use crate::guard::Guard;
use crate::registry::{Handler, Primitive, Registry};
use crate::script;
use crate::tools;
use crate::watchdog::Watchdog;
use crate::workspace::Workspace;

/// The prelude every host loads before any tool file: `register-tool`'s Scheme half, `define-tool`
/// and helpers for tool authors.
pub const PRELUDE: &str = include_str!("../prelude.scm");

/// The Scheme tools that ship with toolhost (`scheme/*.scm`), compiled into the binary so it runs
/// from anywhere.
pub const SHIPPED_TOOLS: &[(&str, &str)] =
    &[("scheme/code.scm", include_str!("../scheme/code.scm")), ("scheme/git.scm", include_str!("../scheme/git.scm"))];

/// The folder under the workspace that holds a project's own tool files.
pub const PROJECT_TOOLS_DIR: &str = ".toolhost/tools";

/// What the engine's Rust procedures share with the host.
pub(crate) struct Shared {
    pub registry: RwLock<Registry>,
    pub ctx: ToolCtx,
    pub guard: Guard,
    /// Scheme tools registered while a program ran, bound as globals once it ends.
    pub pending: Mutex<Vec<String>>,
    /// The last error a tool raised inside Scheme code. When a Scheme tool fails with exactly
    /// that error, the call reports its kind (a `denied` path stays `denied`).
    pub last_tool_error: Mutex<Option<Error>>,
    /// Names Scheme code already uses (steel's library and the prelude): a tool bound under one of
    /// them would replace `map` or `define-tool` for every script.
    pub scheme_names: HashSet<String>,
}

impl Shared {
    pub fn tool(&self, name: &str) -> Option<Arc<Primitive>> {
        self.registry.read().ok()?.get(name).cloned()
    }

    /// Records the error a tool raised inside Scheme code, and hands it to Scheme.
    pub fn raise(&self, error: Error) -> SteelErr {
        let steel_error = to_steel_error(&error);
        if let Ok(mut last) = self.last_tool_error.lock() {
            *last = Some(error);
        }
        steel_error
    }

    /// Refuses a tool name that would replace a procedure Scheme code relies on.
    pub fn check_free(&self, name: &str) -> Result<()> {
        if self.scheme_names.contains(name) {
            return Err(Error::new(
                ErrorKind::InvalidDefinition,
                format!("tool \"{name}\": the name is already a Scheme procedure or form; choose another"),
            )
            .with_tool(name));
        }
        Ok(())
    }

    fn take_tool_error(&self) -> Option<Error> {
        self.last_tool_error.lock().ok()?.take()
    }
}

/// A tool file or script that failed: which file, where, and why. (A failed tool file does not
/// stop the others from loading.)
#[derive(Debug, Clone, PartialEq)]
pub struct LoadError {
    /// The file's path as given.
    pub file: String,
    /// The 1-based line the error points at, when it can be told.
    pub line: Option<usize>,
    /// What went wrong.
    pub message: String,
    /// The run was stopped by its time limit.
    pub timed_out: bool,
}

impl LoadError {
    fn new(file: &str, line: Option<usize>, message: String) -> Self {
        LoadError { file: file.to_string(), line, message, timed_out: false }
    }
}

/// Stops the Scheme code a [`Host`] is running; see [`Host::interrupter`].
#[derive(Clone)]
pub struct Interrupter(steel::steel_vm::ThreadStateController);

impl Interrupter {
    /// Interrupts the running evaluation at its next instruction.
    pub fn interrupt(&self) {
        self.0.interrupt();
    }
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

/// Settings for a [`Host`].
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
    extra: Vec<Primitive>,
    trusted_scripts: bool,
    display_to_stderr: bool,
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
            extra: Vec::new(),
            trusted_scripts: false,
            display_to_stderr: false,
        }
    }

    /// Loads every `.scm` file of `dir` too (after the shipped tools and the project's own).
    pub fn tool_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.tool_dirs.push(dir.into());
        self
    }

    /// Whether to register the built-in Rust tools (`fs-read`, ...). On by default.
    pub fn builtin_tools(mut self, on: bool) -> Self {
        self.builtin_tools = on;
        self
    }

    /// Whether to load the Scheme tools shipped in `scheme/`. On by default.
    pub fn shipped_tools(mut self, on: bool) -> Self {
        self.shipped_tools = on;
        self
    }

    /// Whether to load the workspace's `.toolhost/tools/`. On by default.
    pub fn project_tools(mut self, on: bool) -> Self {
        self.project_tools = on;
        self
    }

    /// Output caps and time limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The guard's rules.
    pub fn guard(mut self, guard: Guard) -> Self {
        self.guard = guard;
        self
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
    /// When the workspace root does not exist, a Rust tool is refused by the registry, or the
    /// prelude fails to load (a bug).
    pub fn build(self) -> Result<Host> {
        let workspace = Workspace::new(&self.root)?;
        let mut registry = Registry::new();
        if self.builtin_tools {
            tools::register_builtin_tools(&mut registry)?;
        }
        for tool in self.extra {
            registry.register(tool)?;
        }
        let mut engine = engine::new_engine(self.trusted_scripts, self.display_to_stderr)
            .map_err(|message| Error::new(ErrorKind::Script, message))?;
        let mut scheme_names: HashSet<String> =
            engine.globals().iter().map(|name| name.resolve().to_string()).collect();
        scheme_names.extend(prelude_names());
        let shared = Arc::new(Shared {
            registry: RwLock::new(registry.clone()),
            ctx: ToolCtx { workspace, limits: self.limits },
            guard: self.guard,
            pending: Mutex::new(Vec::new()),
            last_tool_error: Mutex::new(None),
            scheme_names,
        });
        script::install(&mut engine, &shared);
        for tool in registry.iter() {
            shared.check_free(tool.name())?;
            bind_rust_tool(&mut engine, &shared, tool.clone());
        }
        let watchdog = Watchdog::new(engine.get_thread_state_controller());
        let mut host =
            Host { engine, shared, watchdog, load_errors: Vec::new(), trusted_scripts: self.trusted_scripts };
        host.load_text("prelude.scm", PRELUDE, true).map_err(|e| Error::new(ErrorKind::Script, e.to_string()))?;
        if self.shipped_tools {
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
    pub(crate) engine: Engine,
    pub(crate) shared: Arc<Shared>,
    pub(crate) watchdog: Watchdog,
    load_errors: Vec<LoadError>,
    trusted_scripts: bool,
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

    /// The tool files that failed to load, in load order.
    pub fn load_errors(&self) -> &[LoadError] {
        &self.load_errors
    }

    /// The workspace.
    pub fn workspace(&self) -> &Workspace {
        &self.shared.ctx.workspace
    }

    /// A snapshot of the registry, in registration order.
    pub fn registry(&self) -> Registry {
        self.shared.registry.read().map(|r| r.clone()).unwrap_or_default()
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
            bind_rust_tool(&mut self.engine, &self.shared, tool);
        }
        Ok(())
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
        self.run_file_text("<eval>", source, limit).map_err(|e| {
            let kind = if e.timed_out { ErrorKind::Timeout } else { ErrorKind::Script };
            Error::new(kind, e.message)
        })
    }

    /// Runs a script file in the host (`toolhost run`), stopped after `limit` when one is given.
    ///
    /// # Errors
    /// A [`LoadError`] with the file, line and message.
    pub fn run_file(&mut self, path: &Path, limit: Option<Duration>) -> std::result::Result<SteelVal, LoadError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| LoadError::new(&name, None, e.to_string()))?;
        self.run_file_text(&name, &text, limit)
    }

    fn run_file_text(
        &mut self,
        name: &str,
        text: &str,
        limit: Option<Duration>,
    ) -> std::result::Result<SteelVal, LoadError> {
        let values = self.run_source(text, name, limit, false);
        self.bind_pending();
        Ok(values?.into_iter().last().unwrap_or(SteelVal::Void))
    }

    /// A handle that stops whatever Scheme code this host is running, from another thread (the
    /// REPL's Ctrl-C). The interrupted evaluation fails; the next one runs normally.
    pub fn interrupter(&self) -> Interrupter {
        Interrupter(self.engine.get_thread_state_controller())
    }

    /// Evaluates Scheme source and renders the result as the REPL and `toolhost eval` print it:
    /// strings as their text, void as nothing, other values as JSON when they convert, else in
    /// steel's own notation.
    ///
    /// # Errors
    /// As [`Host::eval`].
    pub fn eval_to_string(&mut self, source: &str) -> Result<String> {
        let value = self.eval(source)?;
        Ok(render_result(&value))
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
    /// A [`LoadError`] with the file, line and message.
    pub fn load_file(&mut self, path: &Path) -> std::result::Result<(), LoadError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| LoadError::new(&name, None, e.to_string()))?;
        self.load_source(&name, &text)
    }

    /// Loads Scheme source as a tool file called `name`, with the per-call time limit so a file
    /// that loops forever cannot hang start-up.
    ///
    /// # Errors
    /// A [`LoadError`] with the file, line and message.
    pub fn load_source(&mut self, name: &str, text: &str) -> std::result::Result<(), LoadError> {
        self.load_text(name, text, false)
    }

    fn load_text(&mut self, name: &str, text: &str, ours: bool) -> std::result::Result<(), LoadError> {
        let limit = self.shared.ctx.limits.scheme_call;
        let result = self.run_source(text, name, Some(limit), ours);
        self.bind_pending();
        result.map(|_| ())
    }

    /// Runs a program under an optional time limit, reporting failures with the line they point at.
    /// `ours` marks toolhost's own source (the prelude, the shipped tools), which may use what
    /// untrusted scripts may not.
    fn run_source(
        &mut self,
        source: &str,
        name: &str,
        limit: Option<Duration>,
        ours: bool,
    ) -> std::result::Result<Vec<SteelVal>, LoadError> {
        let failure = |line: Option<usize>, message: String| LoadError::new(name, line, message);
        let scan = engine::scan(source);
        if let (false, false, Some(offset)) = (ours, self.trusted_scripts, scan.require_at) {
            return Err(failure(line_of(source, offset), engine::REQUIRE_REFUSED.to_string()));
        }
        if let Some(offset) = scan.too_deep_at {
            let message = format!("brackets nest deeper than {} levels", engine::MAX_SOURCE_DEPTH);
            return Err(failure(line_of(source, offset), message));
        }
        self.prebind(&scan.tool_names);
        self.shared.take_tool_error();
        // Clears an interrupt that arrived while nothing ran (a late Ctrl-C).
        self.engine.get_thread_state_controller().resume();
        let armed = limit.map(|l| self.watchdog.arm(l));
        let result = engine::run(&mut self.engine, source.to_string());
        let fired = armed.is_some_and(|a| self.watchdog.disarm(a));
        let tool_error = self.shared.take_tool_error();
        result.map_err(|e| {
            if fired {
                let secs = limit.unwrap_or_default().as_secs_f64();
                let mut stopped = failure(None, format!("stopped after {secs} s: the time limit passed"));
                stopped.timed_out = true;
                return stopped;
            }
            let line = self.error_line(&e, source).or_else(|| {
                // An error raised by a tool (register-tool's checks among them) has no span: point
                // at the first mention of the tool it names.
                let tool = tool_error.as_ref()?.tool()?;
                let at = source.find(&format!("\"{tool}\"")).or_else(|| source.find(&format!("({tool}")))?;
                line_of(source, at)
            });
            failure(line, steel_message(&e))
        })
    }

    /// The line of `source` an error points at: its own span, or else the innermost call in its
    /// stack trace that lies in `source`. A span counts only when steel stored this very text under
    /// its source id.
    fn error_line(&self, e: &SteelErr, source: &str) -> Option<usize> {
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
    pub(crate) fn call_scheme_tool(&mut self, name: &str, args: Vec<SteelVal>) -> Result<SteelVal> {
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
        self.shared.take_tool_error();
        let armed = self.watchdog.arm(limit);
        let result = engine::call(&mut self.engine, proc, args);
        let fired = self.watchdog.disarm(armed);
        self.bind_pending();
        let inner = self.shared.take_tool_error();
        match result {
            Ok(v) => Ok(v),
            Err(_) if fired => Err(Error::new(
                ErrorKind::Timeout,
                format!("{name}: stopped after {} s, the time limit for one call", limit.as_secs_f64()),
            )
            .with_tool(name)),
            Err(e) => {
                let message = steel_message(&e);
                let kind = match inner {
                    Some(inner) if inner.message() == message => inner.kind(),
                    _ => ErrorKind::ToolFailed,
                };
                Err(Error::new(kind, message).in_tool(name))
            }
        }
    }
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

/// steel's message without its `Error: Generic: ` decoration (kept for other kinds, which say
/// something: `FreeIdentifier`, `ArityMismatch`, ...).
pub(crate) fn steel_message(e: &SteelErr) -> String {
    let text = e.to_string();
    let generic = format!("Error: {:?}: ", SteelErrorKind::Generic);
    // steel's `error` puts a space before its message.
    match text.strip_prefix(&generic) {
        Some(rest) => rest.trim_start().to_string(),
        None => text.strip_prefix("Error: ").unwrap_or(&text).to_string(),
    }
}

/// Our error as a Scheme error, carrying the complete message.
pub(crate) fn to_steel_error(e: &Error) -> SteelErr {
    SteelErr::new(SteelErrorKind::Generic, e.message().to_string())
}

/// How the REPL and `toolhost eval` print a value.
pub fn render_result(value: &SteelVal) -> String {
    match value {
        SteelVal::Void => String::new(),
        SteelVal::StringV(s) => s.as_str().to_string(),
        other => match crate::value::scheme_to_json(other) {
            Ok(json) => json.to_string(),
            Err(_) => other.to_string(),
        },
    }
}

/// Binds a Rust tool as a global Scheme procedure: checks the arguments against the signature,
/// passes the guard, runs the handler.
fn bind_rust_tool(engine: &mut Engine, shared: &Arc<Shared>, tool: Arc<Primitive>) {
    if !matches!(tool.handler, Handler::Rust(_)) {
        return;
    }
    let shared = Arc::clone(shared);
    let name = tool.name().to_string();
    let function = move |given: &[SteelVal]| -> steel::rvals::Result<SteelVal> {
        let run = || -> Result<SteelVal> {
            let values = args::args_from_scheme(&tool.signature, given)?;
            shared.guard.check(&shared.ctx, &tool, &values)?;
            invoke_rust(&shared, &tool, &values)
        };
        run().map_err(|e| shared.raise(e))
    };
    engine.register_value(&name, SteelVal::anonymous_boxed_function(Arc::new(function)));
}

/// Runs a Rust tool's handler on checked, guarded arguments. A panic in a handler becomes a
/// `tool_failed` error: no input may take the host down.
pub(crate) fn invoke_rust(shared: &Shared, tool: &Primitive, values: &[SteelVal]) -> Result<SteelVal> {
    let Handler::Rust(handler) = &tool.handler else {
        return Err(Error::tool_failed(format!("{} is not a Rust tool", tool.name())));
    };
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(&shared.ctx, values)));
    match outcome {
        Ok(result) => result.map_err(|e| e.in_tool(tool.name())),
        Err(_) => Err(Error::tool_failed(format!("{}: the tool failed unexpectedly (a bug in toolhost)", tool.name()))
            .with_tool(tool.name())),
    }
}
