//! The host: one steel engine, the registry and the guard tied together. It builds the engine with
//! the tools bound as Scheme procedures (through `crate::bridge`), loads the prelude and the tool
//! folders, evaluates Scheme, and runs JSON calls through `crate::call`, running the tool itself
//! when the call path asks. REPL, CLI, agent loop and MCP server see only this type, or the
//! [`crate::HostHandle`] that carries it to its own thread.
//!
//! The engine is not `Send` (steel uses `Rc`), so a `Host` lives on one thread; a [`HostBuilder`]
//! is `Send`, so a host can be built on the thread that will own it.
//!
//! Building one is in `builder`, loading and reloading tool files in `load`, running Scheme (time
//! limits, error places, global names, Scheme tools called from the call path) in `scheme`; this
//! file holds the host itself: what it knows, its calls and evaluations.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use steel::rvals::SteelVal;
use steel::steel_vm::engine::Engine;

use crate::bindings::Bindings;
use crate::bridge::{self, Shared};
use crate::call::{self, CallOptions, CallRecord, CallRequest};
use crate::context::{Cancel, Limits};
use crate::error::{Error, Result};
use crate::registry::{Handler, Primitive, Registry};
use crate::spec::SpecSet;
use crate::tool_source::ToolSource;
use crate::value::write_scheme;
use crate::watchdog::Watchdog;
use crate::workspace::Workspace;

mod builder;
mod load;
mod program;
mod scheme;

use builder::ProjectTools;
pub use builder::{HostBuilder, RustToolHost};
pub(crate) use load::read_source;
pub use load::{is_test_file, tool_files, Origin, ReloadReport};
pub use scheme::render_values;
use scheme::SchemeTools;

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

/// The name a code-mode program's errors give it.
const PROGRAM_NAME: &str = "program";

/// What an interrupted run reports.
const INTERRUPTED: &str = "interrupted";

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
    /// What a running program displays (code mode), kept for its result.
    displayed: crate::engine::Captured,
    /// The calls of the program that ran last, until its call record takes them.
    program_calls: Option<(Vec<CallRecord>, usize)>,
    /// The error a tool raised that ended the last run that failed, when one did.
    last_raised: Option<Error>,
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

    /// The folders and files [`Host::reload`] loads tools from again: the tool folders, the
    /// workspace's own tool folders the last load admitted, and files loaded one by one. A
    /// watcher (`toolhost mcp`) reloads when a `.scm` file in them changes.
    pub fn tool_paths(&self) -> Vec<PathBuf> {
        self.tool_dirs.iter().chain(&self.project_dirs).chain(&self.loaded_files).cloned().collect()
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

    /// How many times a tool was registered or removed ([`Registry::changes`]): it moves when an
    /// MCP server's tool list changes, as when a reload changes a tool.
    pub fn tool_changes(&self) -> u64 {
        self.shared.registry.read().map(|r| r.changes()).unwrap_or_default()
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
        let mut record = call::run_parts(&shared, tool, arguments, options, &mut |tool, values| match &tool.handler {
            Handler::Rust(_) | Handler::RustOutput(_) => bridge::invoke_rust(&shared, tool, &values),
            Handler::Scheme => self.call_scheme_tool(tool, values).map(Into::into),
            Handler::Program => self.run_program(&values),
        });
        if record.tool == crate::code_mode::PROGRAM_TOOL {
            let (calls, unrecorded) = self.program_calls.take().unwrap_or_default();
            if unrecorded > 0 {
                record.notes.push(format!(
                    "the program made {} tool calls; its record keeps the first {}",
                    calls.len() + unrecorded,
                    crate::bridge::MAX_RECORDED_CALLS
                ));
            }
            record.nested = Some(calls);
        }
        self.consume_interrupt();
        record
    }

    /// Evaluates Scheme source and returns the value of its last expression (void when empty).
    ///
    /// # Errors
    /// [`crate::ErrorKind::Script`] with steel's message when it does not compile or fails.
    pub fn eval(&mut self, source: &str) -> Result<SteelVal> {
        self.eval_within(source, None)
    }

    /// [`Host::eval`] stopped after `limit` (a `timeout` error), when one is given.
    ///
    /// # Errors
    /// As [`Host::eval`], and [`crate::ErrorKind::Timeout`].
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
}
