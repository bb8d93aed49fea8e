//! Running Scheme in a host: a program under its time limit with errors pointing at file and line,
//! the global names programs bind, and Scheme tools called from the JSON call path.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use steel::rvals::SteelVal;

use super::{Host, INTERRUPTED, PRELUDE};
use crate::args;
use crate::bindings::Failure;
use crate::bridge::{self, steel_message};
use crate::engine;
use crate::error::{Error, ErrorKind, Result};
use crate::registry::Primitive;
use crate::value::write_scheme;

/// The prelude's hold on the Scheme tools' table (the value of its last form): a procedure that
/// gives a tool's procedure and define-tool body, and the one that makes a tool's guarded
/// procedure. Only the host holds them: no name is bound to either.
pub(super) struct SchemeTools {
    lookup: SteelVal,
    wrapper: SteelVal,
}

impl SchemeTools {
    pub(super) fn from_prelude(value: &SteelVal) -> Option<SchemeTools> {
        let SteelVal::ListV(parts) = value else { return None };
        let mut parts = parts.iter();
        let (Some(lookup), Some(wrapper), None) = (parts.next(), parts.next(), parts.next()) else { return None };
        (crate::value::is_procedure(lookup) && crate::value::is_procedure(wrapper))
            .then(|| SchemeTools { lookup: lookup.clone(), wrapper: wrapper.clone() })
    }
}

impl Host {
    /// Runs a program under an optional time limit, reporting failures with the file and the line
    /// they point at. `ours` marks toolhost's own source (the prelude, the shipped tools), which may
    /// use what untrusted scripts may not.
    pub(super) fn run_source(
        &mut self,
        source: &str,
        name: &str,
        limit: Option<Duration>,
        ours: bool,
    ) -> Result<Vec<SteelVal>> {
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
        // Tools a source added while the host ran (an MCP server's new tools), bound before the
        // program that may name them is compiled.
        for tool in self.shared.take_added() {
            bridge::bind_rust_tool(&mut self.engine, &self.shared, tool);
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
            self.last_raised = raised.clone();
            let place = match name {
                // A program's error points at the program's own line, however deep in a tool it
                // was raised.
                super::PROGRAM_NAME => self.place_in(&e, source).map(|line| (name.to_string(), line)),
                _ => None,
            };
            if let Some((file, line)) = place.or_else(|| self.error_place(&e, Some((name, source)))) {
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

    /// The line of `source` (the program that ran) an error points at: its own span, or else the
    /// innermost call in its stack trace that lies in `source`.
    fn place_in(&self, e: &steel::rerrs::SteelErr, source: &str) -> Option<usize> {
        let line = |span: &steel::parser::span::Span| -> Option<usize> {
            let stored = self.engine.get_source(&span.source_id()?)?;
            let stored: &str = stored.as_ref().as_ref();
            (stored == source).then(|| line_of(source, span.start() as usize)).flatten()
        };
        e.span().and_then(|span| line(&span)).or_else(|| {
            e.stack_trace().as_ref()?.trace().iter().rev().find_map(|frame| frame.span().as_ref().and_then(line))
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

    pub(super) fn bind_tool_name(&mut self, name: &str) {
        let Some(tools) = &self.scheme_tools else { return };
        let wrapper = tools.wrapper.clone();
        if let Ok(wrapper) = engine::call(&mut self.engine, wrapper, vec![SteelVal::StringV(name.into())]) {
            self.engine.register_value(name, wrapper);
        }
    }

    /// Binds the Scheme tools registered by the program that just ran as global procedures, and
    /// takes their procedures from the table for JSON calls.
    pub(super) fn bind_pending(&mut self) {
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
    pub(super) fn call_scheme_tool(&mut self, tool: &Primitive, args: Vec<SteelVal>) -> Result<SteelVal> {
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

/// The names `prelude.scm` defines at top level.
pub(super) fn prelude_names() -> impl Iterator<Item = String> {
    PRELUDE.lines().filter_map(|line| {
        let rest = line.strip_prefix("(define-syntax ").or_else(|| line.strip_prefix("(define "))?;
        let name = rest.trim_start_matches('(').split([' ', ')']).next()?;
        (!name.is_empty()).then(|| name.to_string())
    })
}

/// The line of byte `offset` in `text`, 1-based.
pub(super) fn line_of(text: &str, offset: usize) -> Option<usize> {
    (offset <= text.len()).then(|| text.as_bytes()[..offset].iter().filter(|&&b| b == b'\n').count() + 1)
}

/// How the REPL and `toolhost eval` print the values of a program's expressions: one line each
/// in Scheme notation, void ones left out.
pub fn render_values(values: &[SteelVal]) -> String {
    let lines: Vec<String> = values.iter().map(write_scheme).filter(|line| !line.is_empty()).collect();
    lines.join("\n")
}
