//! The host: one steel engine, the registry and the guard tied together. It builds the engine with
//! the tools bound as Scheme procedures (through `crate::bridge`), loads the prelude and the tool
//! folders, evaluates Scheme, and runs JSON calls through `crate::call`, running the tool itself
//! when the call path asks. REPL, CLI, agent loop and MCP server see only this type, or the
//! [`crate::HostHandle`] that carries it to its own thread.
//!
//! The engine is not `Send` (steel uses `Rc`), so a `Host` lives on one thread; a [`HostBuilder`]
//! is `Send`, so a host can be built on the thread that will own it.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use steel::rvals::SteelVal;
use steel::steel_vm::engine::Engine;

use crate::args;
use crate::bindings::{Bindings, Failure};
use crate::bridge::{self, steel_message, Shared};
use crate::call::{self, CallOptions, CallRecord, CallRequest};
use crate::config::Config;
use crate::context::{Cancel, Limits, ToolCtx};
use crate::engine;
use crate::error::{Error, ErrorKind, Result};
use crate::guard::{Confirmer, Guard};
use crate::registry::{Handler, Primitive, Registry};
use crate::sandbox::Sandbox;
use crate::spec::SpecSet;
use crate::tool_source::ToolSource;
use crate::tools;
use crate::trust::{Admission, TrustRule};
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
    project: ProjectTools,
    limits: Limits,
    sandbox: Sandbox,
    guard: Guard,
    confirmer: Option<Confirmer>,
    extra: Vec<Primitive>,
    trusted_scripts: bool,
    display_to_stderr: bool,
    tool_sources: Vec<Box<dyn ToolSource>>,
}

/// How a host treats the workspace's own tool files.
#[derive(Clone)]
enum ProjectTools {
    /// Not loaded.
    Off,
    /// `.toolhost/tools/` loaded from disk as it is.
    Unchecked,
    /// Loaded as the trust rule admits them; `admission`: what start-up decided, until the build
    /// takes it.
    Trusted { rule: TrustRule, admission: Option<Admission> },
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
            project: ProjectTools::Unchecked,
            limits: Limits::default(),
            sandbox: Sandbox::default(),
            guard: Guard::default(),
            confirmer: None,
            extra: Vec::new(),
            trusted_scripts: false,
            display_to_stderr: false,
            tool_sources: Vec::new(),
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

    /// Whether to load the workspace's `.toolhost/tools/` as it is, unchecked (on by default: the
    /// embedding program vouches for its workspace). The command line applies the trust rule
    /// instead ([`HostBuilder::trusted_project`]).
    pub fn project_tools(mut self, on: bool) -> Self {
        self.project = if on { ProjectTools::Unchecked } else { ProjectTools::Off };
        self
    }

    /// Loads the workspace's own tool files (`.toolhost/tools/` and the folders its `toolhost.toml`
    /// names) only as `rule` admits them (design section 17): at build, and again at every
    /// [`Host::reload`], which asks when the rule may ask, as start-up does. `admission` is what
    /// start-up already decided ([`crate::setup::Setup::discover`]): its files load as they were read
    /// for the trust check, so nothing changed in between loads; `None` applies the rule at build.
    pub fn trusted_project(mut self, rule: TrustRule, admission: Option<Admission>) -> Self {
        self.project = ProjectTools::Trusted { rule, admission };
        self
    }

    /// Output caps and time limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// What bounds `shell-exec` commands (design section 19). The default sandbox confines them:
    /// see [`crate::sandbox`].
    pub fn sandbox(mut self, sandbox: Sandbox) -> Self {
        self.sandbox = sandbox;
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

    /// Applies a config (design section 17): its limits, its shell sandbox, its guard rules and
    /// default, its tool folders and whether scripts are trusted. A confirmer set with
    /// [`HostBuilder::confirmer`] is kept. Its `[[mcp]]` servers are a tool source of their own:
    /// [`crate::setup::Setup::builder`] adds them as the command line does, or add
    /// `toolhost::mcp::McpClients::configured(config.mcp.clone())` with
    /// [`HostBuilder::tool_source`].
    ///
    /// # Errors
    /// A rule whose glob does not compile (the config reader checks them first), or a folder the
    /// config names that does not exist.
    pub fn config(self, config: &Config) -> Result<Self> {
        let mut builder = self
            .limits(Limits::from_config(config))
            .sandbox(Sandbox::from_config(config)?)
            .guard(Guard::from_config(config)?)
            .trusted_scripts(config.scripts_trusted.unwrap_or(false));
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

    /// A source of tools to start when the host is built (the `[[mcp]]` servers of a config, say):
    /// its tools are registered after the Rust tools, what goes wrong is one of
    /// [`Host::load_errors`], and the rest of the host works without it. The host keeps the source
    /// until it is dropped.
    pub fn tool_source(mut self, source: impl ToolSource) -> Self {
        self.tool_sources.push(Box::new(source));
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
    pub fn build(mut self) -> Result<Host> {
        let workspace = Workspace::new(&self.root)?;
        if let Some(missing) = self.tool_dirs.iter().find(|d| !d.is_dir()) {
            return Err(Error::config(format!("the tool folder {} does not exist", missing.display())));
        }
        let mut registry = self.rust_registry()?;
        let mut engine = engine::new_engine(self.trusted_scripts, self.display_to_stderr)
            .map_err(|message| Error::new(ErrorKind::Script, message))?;
        let mut scheme_names: HashSet<String> =
            engine.globals().iter().map(|name| name.resolve().to_string()).collect();
        scheme_names.extend(prelude_names());
        let load_errors = start_sources(&mut self.tool_sources, &workspace, &mut registry, &scheme_names);
        let guard = self.guard_with_confirmer();
        let hidden = guard.hidden();
        let ctx = ToolCtx {
            workspace,
            limits: self.limits,
            cancel: Cancel::default(),
            search: Default::default(),
            sandbox: self.sandbox,
            hidden,
        };
        let shared = Arc::new(Shared::new(registry.clone(), ctx, guard, scheme_names));
        bridge::install(&mut engine, &shared);
        crate::scheme_test::install(&mut engine, &shared);
        for tool in registry.iter() {
            shared.check_free(tool.name())?;
            bridge::bind_rust_tool(&mut engine, &shared, tool.clone());
        }
        let watchdog = Watchdog::new(engine.get_thread_state_controller());
        let mut host = Host {
            engine,
            shared,
            watchdog,
            bindings: Bindings::new(),
            scheme_tools: None,
            scheme_procs: HashMap::new(),
            load_errors,
            trusted_scripts: self.trusted_scripts,
            tool_dirs: Vec::new(),
            project: ProjectTools::Off,
            given_root: self.root.clone(),
            project_dirs: Vec::new(),
            skipped_notice: None,
            loaded_files: Vec::new(),
            origins: HashMap::new(),
            sources: Vec::new(),
            tool_sources: std::mem::take(&mut self.tool_sources),
        };
        let prelude = host.load_text("prelude.scm", PRELUDE, true)?;
        host.scheme_tools = prelude.last().and_then(SchemeTools::from_prelude);
        if host.scheme_tools.is_none() {
            return Err(Error::new(ErrorKind::Script, "prelude.scm did not give the host its tool table (a bug)"));
        }
        if self.shipped_tools && self.builtin_tools {
            for (name, text) in SHIPPED_TOOLS {
                if let Err(e) = host.load_text(name, text, true) {
                    host.load_errors.push(e);
                }
            }
        }
        // From here on, no program may rebind what is defined now (crate::bindings).
        host.bindings.protect(&host.engine);
        let mut dirs = Vec::new();
        match self.project {
            ProjectTools::Off => {}
            ProjectTools::Unchecked => dirs.push(host.shared.ctx.workspace.root().join(PROJECT_TOOLS_DIR)),
            ProjectTools::Trusted { rule, admission } => {
                let admission = match admission {
                    Some(admission) => admission,
                    None => rule.admit(&self.root)?,
                };
                host.load_admitted(&admission);
                host.project = ProjectTools::Trusted { rule, admission: None };
            }
        }
        // A folder loaded from the project's files is not loaded again from disk.
        let project: Vec<PathBuf> = host.project_dirs.iter().filter_map(|d| std::fs::canonicalize(d).ok()).collect();
        dirs.extend(
            self.tool_dirs.into_iter().filter(|d| std::fs::canonicalize(d).map_or(true, |d| !project.contains(&d))),
        );
        for dir in &dirs {
            host.load_dir(dir);
        }
        host.tool_dirs = dirs;
        Ok(host)
    }
}

impl HostBuilder {
    /// The registry of the Rust tools: the built-in ones (unless left out) and those given with
    /// [`HostBuilder::tool`], which it takes.
    fn rust_registry(&mut self) -> Result<Registry> {
        let mut registry = Registry::new();
        if self.builtin_tools {
            for tool in tools::builtin_tools(&self.limits, &self.sandbox)? {
                registry.register(tool)?;
            }
        }
        for tool in std::mem::take(&mut self.extra) {
            registry.register(tool)?;
        }
        Ok(registry)
    }

    /// The guard, asking the confirmer given with [`HostBuilder::confirmer`] if any.
    fn guard_with_confirmer(&mut self) -> Guard {
        let guard = std::mem::take(&mut self.guard);
        match self.confirmer.take() {
            Some(confirmer) => guard.confirmer(confirmer),
            None => guard,
        }
    }

    /// Builds a host of the Rust tools alone (the built-in ones and those given with
    /// [`HostBuilder::tool`]): no interpreter, no tool files, no MCP servers, and no warm search
    /// index (index-grep searches cold). It is what a one-shot call of a built-in tool needs; the
    /// same config, limits and guard apply.
    ///
    /// # Errors
    /// When the workspace root does not exist, a tool folder given with [`HostBuilder::tool_dir`]
    /// does not exist (as for [`HostBuilder::build`]: the same settings are wrong whichever host
    /// they build), or a Rust tool is refused by the registry.
    pub fn build_rust_tools(mut self) -> Result<RustToolHost> {
        let workspace = Workspace::new(&self.root)?;
        if let Some(missing) = self.tool_dirs.iter().find(|d| !d.is_dir()) {
            return Err(Error::config(format!("the tool folder {} does not exist", missing.display())));
        }
        let registry = self.rust_registry()?;
        // One call and done: an index would never be asked twice.
        let search = crate::search_index::SearchIndex::default();
        search.disable();
        let guard = self.guard_with_confirmer();
        let hidden = guard.hidden();
        let ctx = ToolCtx {
            workspace,
            limits: self.limits,
            cancel: Cancel::default(),
            search,
            sandbox: self.sandbox,
            hidden,
        };
        Ok(RustToolHost { shared: Arc::new(Shared::new(registry, ctx, guard, HashSet::new())) })
    }
}

/// A host of Rust tools alone (see [`HostBuilder::build_rust_tools`]).
pub struct RustToolHost {
    shared: Arc<Shared>,
}

impl RustToolHost {
    /// Whether `tool` (by its name or a provider's form of it) is one of this host's tools.
    pub fn has_tool(&self, tool: &str) -> bool {
        self.shared.registry.read().is_ok_and(|registry| registry.get_by_provider_name(tool).is_some())
    }

    /// Runs one call request through the call path, as [`Host::run_call`] does.
    pub fn run_call(&self, request: &CallRequest) -> CallRecord {
        self.shared.ctx.cancel.reset();
        call::run(&self.shared, request, &mut |tool, values| bridge::invoke_rust(&self.shared, tool, &values))
    }

    /// The flag that stops a running tool (a `shell-exec` command and its process group).
    pub fn cancel(&self) -> Cancel {
        self.shared.ctx.cancel.clone()
    }
}

/// A running tool host. See the crate docs for an example.
pub struct Host {
    engine: Engine,
    shared: Arc<Shared>,
    watchdog: Watchdog,
    /// Who defined each global name: what programs may rebind.
    bindings: Bindings,
    /// What the prelude gives the host of the Scheme tools' table, which no script can reach.
    scheme_tools: Option<SchemeTools>,
    /// Each Scheme tool's procedure and define-tool body, taken from the table as it registers.
    scheme_procs: HashMap<String, (SteelVal, Option<SteelVal>)>,
    load_errors: Vec<Error>,
    trusted_scripts: bool,
    /// The tool folders loaded from disk at start-up, in order: [`Host::reload`] loads them again.
    tool_dirs: Vec<PathBuf>,
    /// How the workspace's own tool files load: a reload applies the trust rule again.
    project: ProjectTools,
    /// The workspace root as the builder was given it: the project's files are named from it, at a
    /// reload as at start-up.
    given_root: PathBuf,
    /// The workspace's own tool folders whose files the last load (start-up or reload) admitted.
    project_dirs: Vec<PathBuf>,
    /// What the trust rule skipped at the last load, in one line.
    skipped_notice: Option<String>,
    /// Tool files loaded one by one after start-up ([`Host::load_tool_file`]): reloaded too.
    loaded_files: Vec<PathBuf>,
    /// Where each Scheme tool defined by a loaded file was defined.
    origins: HashMap<String, Origin>,
    /// The text of every file loaded, by the name errors give it, so the span of an error raised
    /// inside a tool (which steel keeps with the text, not the file name) maps to a file and line.
    sources: Vec<(String, Arc<str>)>,
    /// Where tools beyond the Rust and Scheme ones came from (the MCP servers); last, so they are
    /// dropped after the registry whose handlers call them. Held, never read.
    #[allow(dead_code)]
    tool_sources: Vec<Box<dyn ToolSource>>,
}

/// The prelude's hold on the Scheme tools' table (the value of its last form): a procedure that
/// gives a tool's procedure and define-tool body, and the one that makes a tool's guarded
/// procedure. Only the host holds them: no name is bound to either.
struct SchemeTools {
    lookup: SteelVal,
    wrapper: SteelVal,
}

impl SchemeTools {
    fn from_prelude(value: &SteelVal) -> Option<SchemeTools> {
        let SteelVal::ListV(parts) = value else { return None };
        let mut parts = parts.iter();
        let (Some(lookup), Some(wrapper), None) = (parts.next(), parts.next(), parts.next()) else { return None };
        (crate::value::is_procedure(lookup) && crate::value::is_procedure(wrapper))
            .then(|| SchemeTools { lookup: lookup.clone(), wrapper: wrapper.clone() })
    }
}

/// The tools `reload` took out before loading their files again, and the names of those it left.
struct Forgotten {
    tools: Vec<(Arc<Primitive>, Origin)>,
    kept: HashSet<String>,
}

/// Where a Scheme tool was defined: the file, the line of its `define-tool` or `register-tool`
/// form when it can be told, and that form's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The file, as it was named when loaded.
    pub file: String,
    /// The 1-based line of the form that defines the tool, when it can be told.
    pub line: Option<usize>,
    /// The text of that top-level form (the whole rest of the file when it cannot be told).
    form: String,
    /// toolhost's own file (a shipped tool), which `reload` leaves alone.
    ours: bool,
}

impl Origin {
    /// Whether the tool is one of toolhost's own (a shipped tool), not an author's.
    pub fn is_ours(&self) -> bool {
        self.ours
    }
}

/// What [`Host::reload`] or [`Host::load_tool_file`] changed, by tool name, and the files that
/// failed. A tool is `changed` when its signature, its description or the text of the form that
/// defines it changed (not when only a helper it calls did).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReloadReport {
    /// Tools that were not there before.
    pub added: Vec<String>,
    /// Tools whose definition changed.
    pub changed: Vec<String>,
    /// Tools no file defines any more.
    pub removed: Vec<String>,
    /// How many tools were loaded again unchanged.
    pub unchanged: usize,
    /// The files that failed to load, each naming its file and line.
    pub errors: Vec<Error>,
    /// What the trust rule skipped, in one line: the workspace's own files changed since it was
    /// trusted, and were not loaded (nor kept as they were).
    pub skipped: Option<String>,
}

impl std::fmt::Display for ReloadReport {
    /// `added: a, b; changed: c; removed: d` (or `no tool changed`), then one line per load error.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        for (label, names) in [("added", &self.added), ("changed", &self.changed), ("removed", &self.removed)] {
            if !names.is_empty() {
                parts.push(format!("{label}: {}", names.join(", ")));
            }
        }
        if parts.is_empty() {
            parts.push("no tool changed".to_string());
        }
        if self.unchanged > 0 {
            parts.push(format!("{} unchanged", self.unchanged));
        }
        write!(f, "{}", parts.join("; "))?;
        if let Some(skipped) = &self.skipped {
            write!(f, "\n{skipped}")?;
        }
        for error in &self.errors {
            write!(f, "\nerror: {error}")?;
        }
        Ok(())
    }
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

    /// What the trust rule skipped when the tools were last loaded (see
    /// [`HostBuilder::trusted_project`]), in one line to show; `None` when nothing was.
    pub fn skipped_notice(&self) -> Option<&str> {
        self.skipped_notice.as_deref()
    }

    /// The workspace.
    pub fn workspace(&self) -> &Workspace {
        &self.shared.ctx.workspace
    }

    /// The limits tools run under.
    pub fn limits(&self) -> &Limits {
        &self.shared.ctx.limits
    }

    /// The workspace's search index (warm index-grep): to wait for it, read its size, or turn it off.
    pub fn search_index(&self) -> &crate::search_index::SearchIndex {
        &self.shared.ctx.search
    }

    /// A snapshot of the registry, in registration order.
    pub fn registry(&self) -> Registry {
        self.shared.registry.read().map(|r| r.clone()).unwrap_or_default()
    }

    /// The specs of every tool, in registration order: what catalogues are made from.
    pub fn specs(&self) -> SpecSet {
        self.shared.registry.read().map(|r| r.specs().clone()).unwrap_or_default()
    }

    /// The tools whose calls may run at the same time as others: annotated read-only, and no
    /// guard rule (or default) could make a call of them ask a person. Each by its name and, when
    /// providers are sent another, that one too (`server__tool`).
    pub fn concurrent_tools(&self) -> Vec<String> {
        let specs = self.specs();
        let mut names = Vec::new();
        for spec in specs.iter().filter(|s| s.annotations.read_only && !self.shared.guard.may_ask(s.name())) {
            names.push(spec.name().to_string());
            if let Some(sent) = crate::param::provider_name(spec.name()).filter(|n| n != spec.name()) {
                names.push(sent);
            }
        }
        names
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
        self.run_call_parts(tool, arguments, options)
    }

    /// Calls `tool` with arguments already parsed from JSON.
    pub fn call(&mut self, tool: &str, arguments: Value) -> CallRecord {
        self.call_json(tool, &arguments.to_string())
    }

    /// Runs one call request through the call path.
    pub fn run_call(&mut self, request: &CallRequest) -> CallRecord {
        self.run_call_parts(&request.tool, &request.arguments, request.options)
    }

    fn run_call_parts(&mut self, tool: &str, arguments: &str, options: CallOptions) -> CallRecord {
        let shared = Arc::clone(&self.shared);
        let record = call::run_parts(&shared, tool, arguments, options, &mut |tool, values| match &tool.handler {
            Handler::Rust(_) => bridge::invoke_rust(&shared, tool, &values),
            Handler::Scheme => self.call_scheme_tool(tool, values),
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
    /// [`Host::load_errors`]. A missing folder is not an error. Test files (`*_test.scm`, which
    /// `toolhost test` runs) are not tool files and are left out.
    pub fn load_dir(&mut self, dir: &Path) {
        for file in tool_files(dir) {
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
        self.load_text(name, text, false).map(|_| ())
    }

    fn load_text(&mut self, name: &str, text: &str, ours: bool) -> Result<Vec<SteelVal>> {
        let limit = self.shared.ctx.limits.scheme_call;
        let before: HashSet<String> = self.registry().iter().map(|t| t.name().to_string()).collect();
        self.sources.retain(|(file, _)| file != name);
        self.sources.push((name.to_string(), Arc::from(text)));
        let result = self.run_source(text, name, Some(limit), ours);
        self.bind_pending();
        for tool in self.registry().iter().filter(|t| !before.contains(t.name())) {
            let (line, form) = match engine::definition(text, tool.name()) {
                Some((offset, form)) => (line_of(text, offset), form),
                None => (None, text.to_string()),
            };
            let origin = Origin { file: name.to_string(), line, form, ours };
            self.origins.insert(tool.name().to_string(), origin);
        }
        if let Err(e) = &result {
            self.leave_unavailable(text, e);
        }
        result
    }

    /// Where the Scheme tool called `name` was defined, when a file defined it (not for Rust tools
    /// nor tools defined by evaluated input).
    pub fn origin(&self, name: &str) -> Option<&Origin> {
        self.origins.get(name)
    }

    /// The text of `line` (1-based) of a file this host loaded, by the name errors give it: what
    /// the REPL shows under an error that points there.
    pub fn source_line(&self, file: &str, line: usize) -> Option<String> {
        let (_, text) = self.sources.iter().rev().find(|(name, _)| name == file)?;
        text.lines().nth(line.checked_sub(1)?).map(str::to_string)
    }

    /// Loads the tool folders and files again, as a fresh start would find them now: a tool whose
    /// file changed is replaced, a tool no file defines any more is removed (its name then says so
    /// when called: steel cannot unbind a global), a file that fails is reported and its tools are
    /// unavailable, as at start-up. toolhost's shipped tools, Rust tools and tools defined by
    /// evaluated input or [`Host::load_source`] are left alone.
    pub fn reload(&mut self) -> ReloadReport {
        // The trust rule first, as start-up applies it (it may ask): a file changed since it was
        // trusted does not load, here any more than in a fresh `toolhost call`.
        let admission = match &self.project {
            ProjectTools::Trusted { rule, .. } => Some(rule.admit(&self.given_root)),
            ProjectTools::Off | ProjectTools::Unchecked => None,
        };
        // Only the tools of files it loads again: a tool [`Host::load_source`] defined stays.
        let dirs: Vec<PathBuf> = self.tool_dirs.iter().chain(&self.project_dirs).cloned().collect();
        let files: Vec<String> = self.loaded_files.iter().map(|f| f.display().to_string()).collect();
        let before = self.forget_file_tools(|origin| {
            files.contains(&origin.file)
                || Path::new(&origin.file).parent().is_some_and(|parent| dirs.iter().any(|d| d.as_path() == parent))
        });
        self.load_errors.retain(|e| !is_reloadable_error(e));
        let errors_before = self.load_errors.len();
        self.project_dirs.clear();
        self.skipped_notice = None;
        match admission {
            Some(Ok(admission)) => self.load_admitted(&admission),
            Some(Err(e)) => self.load_errors.push(e),
            None => {}
        }
        for dir in self.tool_dirs.clone() {
            self.load_dir(&dir);
        }
        for file in self.loaded_files.clone() {
            if let Err(e) = self.load_file(&file) {
                self.load_errors.push(e);
            }
        }
        let errors = self.load_errors[errors_before..].to_vec();
        let mut report = self.report_changes(before, errors, true);
        report.skipped = self.skipped_notice.clone();
        report
    }

    /// Loads the workspace's own tool files the trust rule admitted, as they were read for the trust
    /// check; records what it skipped otherwise.
    fn load_admitted(&mut self, admission: &Admission) {
        self.skipped_notice = admission.notice.clone();
        let Some(files) = admission.loads() else { return };
        for folder in &files.folders {
            for file in &folder.tools {
                let name = file.path.display().to_string();
                let loaded = match file.text() {
                    Ok(text) => self.load_text(&name, text, false),
                    Err(e) => Err(Error::new(ErrorKind::Script, e.message()).at(name, None)),
                };
                if let Err(e) = loaded {
                    self.load_errors.push(e);
                }
            }
            self.project_dirs.push(folder.dir.clone());
        }
    }

    /// Loads one more tool file, and loads it again on every [`Host::reload`]. Tools the same file
    /// defined before are replaced.
    pub fn load_tool_file(&mut self, path: &Path) -> ReloadReport {
        let name = path.display().to_string();
        if !self.loaded_files.iter().any(|f| f == path) {
            self.loaded_files.push(path.to_path_buf());
        }
        let before = self.forget_file_tools(|origin| origin.file == name);
        let errors = match self.load_file(path) {
            Ok(()) => Vec::new(),
            Err(e) => {
                self.load_errors.push(e.clone());
                vec![e]
            }
        };
        self.report_changes(before, errors, false)
    }

    /// Unregisters the Scheme tools that files outside toolhost defined and `which` selects, and
    /// returns them as they were. Their names stay bound to the wrapper that finds a tool by name,
    /// so code that runs while files load again sees the tools being defined.
    fn forget_file_tools(&mut self, which: impl Fn(&Origin) -> bool) -> Forgotten {
        let names: Vec<String> =
            self.origins.iter().filter(|(_, o)| !o.ours && which(o)).map(|(n, _)| n.clone()).collect();
        let mut before = Vec::new();
        for name in names {
            let Some(origin) = self.origins.remove(&name) else { continue };
            if let Some(tool) = self.shared.tool(&name) {
                if let Ok(mut registry) = self.shared.registry.write() {
                    registry.unregister(&name);
                }
                before.push((tool, origin));
            }
            self.bind_tool_name(&name);
        }
        Forgotten { tools: before, kept: self.origins.keys().cloned().collect() }
    }

    /// Compares the tools files define now with `before`; binds each tool that is gone to a
    /// procedure that says so when `removals` (a reload; loading one file removes nothing).
    fn report_changes(&mut self, before: Forgotten, errors: Vec<Error>, removals: bool) -> ReloadReport {
        let mut report = ReloadReport { errors, ..ReloadReport::default() };
        let old: HashMap<String, (Arc<Primitive>, Origin)> =
            before.tools.into_iter().map(|(tool, origin)| (tool.name().to_string(), (tool, origin))).collect();
        let mut now: Vec<(&String, &Origin)> =
            self.origins.iter().filter(|(name, o)| !o.ours && !before.kept.contains(*name)).collect();
        now.sort_by_key(|(name, o)| (o.file.clone(), o.line, (*name).clone()));
        for (name, origin) in now {
            match old.get(name) {
                None => report.added.push(name.clone()),
                Some((tool, was)) => {
                    let same = self.shared.tool(name).is_some_and(|t| t.spec == tool.spec) && was.form == origin.form;
                    if same {
                        report.unchanged += 1;
                    } else {
                        report.changed.push(name.clone());
                    }
                }
            }
        }
        let mut gone: Vec<String> = old.keys().filter(|n| !self.origins.contains_key(*n)).cloned().collect();
        gone.sort();
        for name in &gone {
            // A tool of a file that failed is bound by `leave_unavailable`, which says why.
            let failed = report.errors.iter().any(|e| e.file() == old.get(name).map(|(_, o)| o.file.as_str()));
            if removals && !failed && self.shared.tool(name).is_none() {
                let message = format!("{name} was removed: no tool file defines it since the last :reload");
                let function = move |_: &[SteelVal]| -> steel::rvals::Result<SteelVal> {
                    Err(steel::rerrs::SteelErr::new(steel::rerrs::ErrorKind::Generic, message.clone()))
                };
                self.engine.register_value(name, SteelVal::anonymous_boxed_function(Arc::new(function)));
            }
        }
        report.removed = gone;
        report
    }

    /// After a tool file failed, binds each tool it meant to define but did not to a procedure
    /// that says so and why, instead of leaving the name unbound or bound to nothing. A name that is
    /// another file's tool (or a Rust tool) keeps that tool: the failed file's `define` of the name
    /// bound it to nothing, while a JSON call would still run the tool, and Scheme must agree.
    fn leave_unavailable(&mut self, text: &str, error: &Error) {
        let scan = engine::scan(text);
        for name in scan.tool_names.iter().chain(&scan.defined_tools) {
            if self.shared.scheme_names.contains(name) {
                continue;
            }
            if let Some(tool) = self.shared.tool(name) {
                match tool.handler {
                    Handler::Rust(_) => bridge::bind_rust_tool(&mut self.engine, &self.shared, tool),
                    Handler::Scheme => self.bind_tool_name(name),
                }
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
        let shared = Arc::clone(&self.shared);
        let is_tool = |tool: &str| shared.tool(tool).is_some();
        let result = self.bindings.run(&mut self.engine, source, name, &is_tool);
        let fired = armed.is_some_and(|a| self.watchdog.disarm(a));
        let interrupted = self.consume_interrupt();
        let result = match result {
            Err(Failure::Refused { offset, message }) => {
                return Err(failure(ErrorKind::Script, offset.and_then(|o| line_of(source, o)), message));
            }
            Err(Failure::Steel(e)) => Err(e),
            Ok(values) => Ok(values),
        };
        result.map_err(|e| {
            if fired {
                let secs = limit.unwrap_or_default().as_secs_f64();
                return failure(ErrorKind::Timeout, None, format!("stopped after {secs} s: the time limit passed"));
            }
            if interrupted {
                return failure(ErrorKind::Script, None, INTERRUPTED.to_string());
            }
            let raised = self.shared.raised(&e);
            if let Some((file, line)) = self.error_place(&e, Some((name, source))) {
                return Error::new(ErrorKind::Script, steel_message(&e)).at(file, Some(line));
            }
            // An error raised by a tool (register-tool's checks among them) has no span in the
            // source: point at the first mention of the tool it names.
            let line = raised.as_ref().and_then(|raised| {
                let tool = raised.tool()?;
                let at = source.find(&format!("\"{tool}\"")).or_else(|| source.find(&format!("({tool}")))?;
                line_of(source, at)
            });
            failure(ErrorKind::Script, line, steel_message(&e))
        })
    }

    /// The file and line an error points at: its own span, or else the innermost call in its stack
    /// trace, that lies in the program that ran (`running`: its name and text) or in a file this
    /// host loaded (an error inside a tool points into the tool's file). A span counts only when
    /// steel stored that very text under its source id. The prelude is passed over: a line of
    /// `tool-error` tells the author nothing, the line that called it does.
    fn error_place(&self, e: &steel::rerrs::SteelErr, running: Option<(&str, &str)>) -> Option<(String, usize)> {
        let place = |span: &steel::parser::span::Span| -> Option<(String, usize)> {
            let id = span.source_id()?;
            let stored = self.engine.get_source(&id)?;
            let stored: &str = stored.as_ref().as_ref();
            let file = match running {
                Some((name, source)) if source == stored => name.to_string(),
                _ => self.sources.iter().rev().find(|(_, text)| text.as_ref() == stored)?.0.clone(),
            };
            if file == "prelude.scm" {
                return None;
            }
            Some((file, line_of(stored, span.start() as usize)?))
        };
        e.span().and_then(|span| place(&span)).or_else(|| {
            e.stack_trace().as_ref()?.trace().iter().rev().find_map(|frame| frame.span().as_ref().and_then(place))
        })
    }

    /// The name a model is shown for a tool file: relative to the workspace when inside it, else
    /// the file name alone (short, and no home folder layout in a model's context).
    fn short_file_name(&self, file: &str) -> String {
        let path = Path::new(file);
        let root = self.shared.ctx.workspace.root();
        let absolute = std::fs::canonicalize(path).ok();
        match absolute.as_deref().and_then(|p| p.strip_prefix(root).ok()) {
            Some(inside) => inside.display().to_string(),
            None => path.file_name().map_or_else(|| file.to_string(), |n| n.to_string_lossy().into_owned()),
        }
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
        let Some(tools) = &self.scheme_tools else { return };
        let wrapper = tools.wrapper.clone();
        if let Ok(wrapper) = engine::call(&mut self.engine, wrapper, vec![SteelVal::StringV(name.into())]) {
            self.engine.register_value(name, wrapper);
        }
    }

    /// Binds the Scheme tools registered by the program that just ran as global procedures, and
    /// takes their procedures from the table for JSON calls.
    fn bind_pending(&mut self) {
        let names: Vec<String> = match self.shared.pending.lock() {
            Ok(mut pending) => pending.drain(..).collect(),
            Err(_) => return,
        };
        for name in names {
            self.bind_tool_name(&name);
            let Some(tools) = &self.scheme_tools else { continue };
            let lookup = tools.lookup.clone();
            match engine::call(&mut self.engine, lookup, vec![SteelVal::StringV(name.as_str().into())]) {
                Ok(SteelVal::Pair(pair)) => {
                    let body = match pair.cdr() {
                        SteelVal::BoolV(false) => None,
                        body => Some(body),
                    };
                    self.scheme_procs.insert(name, (pair.car(), body));
                }
                _ => {
                    self.scheme_procs.remove(&name);
                }
            }
        }
    }

    /// Calls a Scheme tool's procedure with converted arguments, under the per-call time limit.
    /// A failure keeps the kind of the tool error that caused it (a `denied` path stays `denied`).
    fn call_scheme_tool(&mut self, tool: &Primitive, args: Vec<SteelVal>) -> Result<SteelVal> {
        let name = tool.name();
        // A `define-tool` body takes every parameter, filled in here; a `register-tool` procedure
        // takes the arguments as given.
        let (proc, args) = match self.scheme_procs.get(name) {
            Some((_, Some(body))) => (body.clone(), args::fill_for_body(tool.signature(), args)),
            Some((proc, None)) => (proc.clone(), args),
            None => return Err(Error::tool_failed(format!("{name}: its Scheme procedure is missing"))),
        };
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
                let raised = self.shared.raised(&e);
                let kind = raised.as_ref().map_or(ErrorKind::ToolFailed, |raised| raised.kind());
                // A failure of the tool's own code (a type mismatch, an unbound name: not a message
                // it wrote with `error` or `tool-error`, nor an error a tool it called raised) says
                // where in its file, briefly: the model may pass it on to the author.
                let written = e.kind() == steel::rerrs::ErrorKind::Generic;
                match self.error_place(&e, None).filter(|_| raised.is_none() && !written) {
                    Some((file, line)) => {
                        let message = format!("{}:{line}: {}", self.short_file_name(&file), steel_message(&e));
                        Err(Error::new(kind, message).in_tool(name))
                    }
                    None => Err(Error::new(kind, steel_message(&e)).in_tool(name)),
                }
            }
        }
    }
}

/// The tool files of `dir`: its `.scm` files in name order, test files (`*_test.scm`) left out
/// (see [`crate::source::folder_files`]). A missing folder has none.
pub fn tool_files(dir: &Path) -> Vec<PathBuf> {
    crate::source::folder_files(dir).tools
}

pub use crate::source::is_test_file;

/// Whether a load error is one `reload` makes again: an error of a file outside toolhost's own.
fn is_reloadable_error(e: &Error) -> bool {
    e.file().is_some_and(|f| f != "prelude.scm" && !SHIPPED_TOOLS.iter().any(|(name, _)| *name == f))
}

/// Starts the tool sources and registers their tools. What fails (a source's own problems, a tool
/// whose name cannot be registered) becomes a load error; a call naming a tool a source reported
/// unavailable is told why.
fn start_sources(
    sources: &mut [Box<dyn ToolSource>],
    workspace: &Workspace,
    registry: &mut Registry,
    scheme_names: &HashSet<String>,
) -> Vec<Error> {
    let mut errors = Vec::new();
    for source in sources {
        let given = source.start(workspace);
        errors.extend(given.problems);
        for tool in given.tools {
            let name = tool.name().to_string();
            let registered = if scheme_names.contains(&name) {
                Err(Error::new(ErrorKind::InvalidDefinition, format!("\"{name}\" is already a Scheme name")))
            } else {
                registry.register(tool)
            };
            if let Err(e) = registered {
                errors.push(Error::new(
                    e.kind(),
                    format!("tool {name} of a tool source is not registered: {}", e.message()),
                ));
            }
        }
        for (prefix, why) in given.unavailable {
            registry.note_unavailable(prefix, why);
        }
    }
    errors
}

/// Reads a Scheme file (a regular file of at most [`crate::source::SCHEME_CAP`] bytes, never
/// blocking); an error names it.
pub(crate) fn read_source(path: &Path) -> Result<String> {
    crate::source::read_text(path, crate::source::SCHEME_CAP)
        .map_err(|e| Error::new(ErrorKind::Script, e.to_string()).at(path.display().to_string(), None))
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
