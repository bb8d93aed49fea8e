//! Loading tool files into a host, and reloading them: what each file defined, where, and what a
//! reload changed.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use steel::rvals::SteelVal;

use super::scheme::line_of;
use super::{Host, ProjectTools, SHIPPED_TOOLS};
use crate::bridge;
use crate::engine;
use crate::error::{Error, ErrorKind, Result};
use crate::registry::{Handler, Primitive};
use crate::trust::Admission;

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
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
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

    pub(super) fn load_text(&mut self, name: &str, text: &str, ours: bool) -> Result<Vec<SteelVal>> {
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
    pub(super) fn load_admitted(&mut self, admission: &Admission) {
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
                    Handler::Rust(_) | Handler::RustOutput(_) => {
                        bridge::bind_rust_tool(&mut self.engine, &self.shared, tool)
                    }
                    Handler::Scheme => self.bind_tool_name(name),
                    Handler::Program => {}
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

/// Reads a Scheme file (a regular file of at most [`crate::source::SCHEME_CAP`] bytes, never
/// blocking); an error names it.
pub(crate) fn read_source(path: &Path) -> Result<String> {
    crate::source::read_text(path, crate::source::SCHEME_CAP)
        .map_err(|e| Error::new(ErrorKind::Script, e.to_string()).at(path.display().to_string(), None))
}
