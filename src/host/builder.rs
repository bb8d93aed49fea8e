//! Building a host: the [`HostBuilder`] settings, starting the engine, the registry, the guard and
//! the tool sources, and the host of the Rust tools alone.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use super::scheme::{prelude_names, SchemeTools};
use super::{Host, PRELUDE, PROJECT_TOOLS_DIR, SHIPPED_TOOLS};
use crate::bindings::Bindings;
use crate::bridge::{self, Shared};
use crate::call::{self, CallRecord, CallRequest};
use crate::config::Config;
use crate::context::{Cancel, Limits, ToolCtx};
use crate::engine;
use crate::error::{Error, ErrorKind, Result};
use crate::guard::{Confirmer, Guard};
use crate::registry::{Primitive, Registry};
use crate::sandbox::Sandbox;
use crate::tool_source::ToolSource;
use crate::tools;
use crate::trust::{Admission, TrustRule};
use crate::watchdog::Watchdog;
use crate::workspace::Workspace;

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
pub(super) enum ProjectTools {
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
            .limits(config.tool_limits())
            .sandbox(config.sandbox()?)
            .guard(config.guard()?)
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
        // A program gets the engine scripts get; trusted scripts get steel's whole engine, which
        // reaches files and processes around the guard, so a host running them offers no programs.
        if self.builtin_tools && !self.trusted_scripts {
            registry.register(crate::code_mode::program_tool())?;
        }
        let displayed = engine::Captured::default();
        let mut engine = engine::new_engine(self.trusted_scripts, self.display_to_stderr, &displayed)
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
        for source in &mut self.tool_sources {
            source.attach(crate::tool_source::LiveTools::new(&shared));
        }
        crate::check_call::install(&mut engine, &shared);
        for tool in registry.iter() {
            shared.check_free(tool.name())?;
            bridge::bind_rust_tool(&mut engine, &shared, tool.clone());
        }
        if registry.get(crate::code_mode::PROGRAM_TOOL).is_some() {
            bridge::bind_program_tool(&mut engine, &shared);
        }
        let watchdog = Watchdog::new(engine.get_thread_state_controller(), shared.ctx.cancel.clone());
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
            displayed,
            program_calls: None,
            last_raised: None,
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
