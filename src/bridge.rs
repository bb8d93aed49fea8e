//! The bridge between Scheme and the registry: what the engine's Rust procedures share with the
//! host ([`Shared`]); Rust tools bound as Scheme procedures (checked, guarded, run); the procedures
//! `prelude.scm` builds `register-tool` and `define-tool` on (`%register-tool` reads a tool's
//! parameter list into a [`Signature`], `%tool-enter` checks a Scheme call of a Scheme tool exactly
//! as Rust tools are checked, `%fill-optionals` gives `define-tool` bodies every parameter); the
//! value procedures that give scripts tools' data (`file-lines`, `shell-run`, `grep-matches`); and
//! errors raised by tools, carried through Scheme code with their kind.
//!
//! A tool error crosses Scheme code as a steel error, which has no room for our kind. So each one
//! is recorded under a token, and the steel error carries the token in its span (a span with no
//! source, which nothing else produces); when a Scheme program or tool fails with that very error,
//! the token gives its kind back. An error the script raised itself, even one with the same text,
//! has no token and stays a `tool_failed` or `script_error`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use steel::parser::span::Span;
use steel::rerrs::{ErrorKind as SteelErrorKind, SteelErr};
use steel::rvals::SteelVal;
use steel::steel_vm::engine::Engine;

use crate::args;
use crate::context::ToolCtx;
use crate::error::{Error, ErrorKind, Result};
use crate::guard::Guard;
use crate::param::{Param, ParamType, Signature, Skipped};
use crate::registry::{Handler, Primitive, Registry, ToolOutput};
use crate::tools::VALUE_PROCEDURES;
use crate::value;

/// What the engine's Rust procedures share with the host. `Send + Sync`: the engine itself is not.
pub(crate) struct Shared {
    pub registry: RwLock<Registry>,
    pub ctx: ToolCtx,
    pub guard: Guard,
    /// Scheme tools registered while a program ran, bound as globals once it ends.
    pub pending: Mutex<Vec<String>>,
    /// Rust tools a source added while the host ran, bound as procedures before the next program.
    pub added: Mutex<Vec<String>>,
    /// Names Scheme code already uses (steel's library, the prelude, the value procedures): a tool
    /// bound under one of them would replace `map` or `define-tool` for every script.
    pub scheme_names: HashSet<String>,
    raised: Mutex<Raised>,
    /// The calls of the program that runs (code mode); `None` when none runs.
    program: Mutex<Option<ProgramCalls>>,
}

/// One call a program made, as its record keeps it (see [`crate::CallRecord::nested`]).
pub(crate) struct ProgramCall {
    /// The procedure the program called.
    pub tool: String,
    /// The arguments by parameter name once they converted, else as given, in order.
    pub arguments: serde_json::Value,
    /// The guard's decision, when the call got that far.
    pub decision: Option<crate::guard::Decision>,
    /// The result, capped as a model's is, or the error.
    pub result: Result<serde_json::Value>,
    /// How long it took.
    pub elapsed: std::time::Duration,
}

/// How many of a program's calls its record keeps: a program that loops over a tool a million
/// times must not keep a million results (each up to `output_chars`) in memory and in the log.
pub(crate) const MAX_RECORDED_CALLS: usize = 1000;

/// The calls a running program made, for its record.
#[derive(Default)]
struct ProgramCalls {
    /// The first [`MAX_RECORDED_CALLS`] calls.
    records: Vec<ProgramCall>,
    /// How many more it made.
    unrecorded: usize,
    /// The Scheme tools entered and not yet left, innermost last: the record each keeps open (its
    /// index) and when it began, or `None` for one a Scheme tool called. The calls a Scheme tool
    /// makes are its own work, not the program's.
    open: Vec<Option<(usize, Instant)>>,
}

/// Errors tools raised during the current run, by token.
#[derive(Default)]
struct Raised {
    last: u32,
    errors: HashMap<u32, Error>,
}

impl Shared {
    pub fn new(registry: Registry, ctx: ToolCtx, guard: Guard, mut scheme_names: HashSet<String>) -> Self {
        scheme_names.extend(VALUE_PROCEDURES.iter().map(|p| p.name.to_string()));
        Shared {
            registry: RwLock::new(registry),
            ctx,
            guard,
            pending: Mutex::new(Vec::new()),
            added: Mutex::new(Vec::new()),
            scheme_names,
            raised: Mutex::new(Raised::default()),
            program: Mutex::new(None),
        }
    }

    /// Starts keeping the calls of a program about to run.
    pub fn start_program(&self) {
        if let Ok(mut program) = self.program.lock() {
            *program = Some(ProgramCalls::default());
        }
    }

    /// Stops keeping calls; the calls of the program that ran (the first [`MAX_RECORDED_CALLS`]),
    /// and how many more it made.
    pub fn end_program(&self) -> (Vec<ProgramCall>, usize) {
        self.program.lock().ok().and_then(|mut p| p.take()).map(|p| (p.records, p.unrecorded)).unwrap_or_default()
    }

    /// Whether a program runs.
    pub fn in_program(&self) -> bool {
        self.program.lock().is_ok_and(|p| p.is_some())
    }

    /// Whether a call made now is the program's own: a program runs, inside no Scheme tool.
    fn program_calls(&self) -> bool {
        self.program.lock().is_ok_and(|p| p.as_ref().is_some_and(|p| p.open.is_empty()))
    }

    /// Keeps a call of the program's; where its record is, unless it is past the first
    /// [`MAX_RECORDED_CALLS`] (then only counted).
    fn keep(&self, record: ProgramCall) -> Option<usize> {
        let mut program = self.program.lock().ok()?;
        let calls = program.as_mut()?;
        if calls.records.len() >= MAX_RECORDED_CALLS {
            calls.unrecorded += 1;
            return None;
        }
        calls.records.push(record);
        Some(calls.records.len() - 1)
    }

    /// How many calls the running program's record holds.
    fn recorded(&self) -> usize {
        self.program.lock().ok().and_then(|p| p.as_ref().map(|c| c.records.len())).unwrap_or(0)
    }

    /// A call's result as its record keeps it: JSON, capped as a model's result is.
    fn recorded_result(&self, result: &Result<SteelVal>) -> Result<serde_json::Value> {
        let cap = self.ctx.limits.output_chars;
        match result {
            Ok(value) => Ok(value::cap_result(
                value::scheme_to_json(value).unwrap_or_else(|_| serde_json::Value::String(value::write_scheme(value))),
                cap,
            )),
            Err(e) => Err(e.clone()),
        }
    }

    pub fn tool(&self, name: &str) -> Option<Arc<Primitive>> {
        self.registry.read().ok()?.get(name).cloned()
    }

    /// The Rust tools added since the last look (see [`Shared::added`]) that are still there.
    pub fn take_added(&self) -> Vec<Arc<Primitive>> {
        let names: Vec<String> = match self.added.lock() {
            Ok(mut added) => added.drain(..).collect(),
            Err(_) => return Vec::new(),
        };
        names.iter().filter_map(|name| self.tool(name)).filter(|tool| tool.is_rust()).collect()
    }

    /// Hands an error a tool raised inside Scheme code to Scheme, keeping its kind for the caller.
    pub fn raise(&self, error: Error) -> SteelErr {
        let steel_error = to_steel_error(&error);
        let Ok(mut raised) = self.raised.lock() else { return steel_error };
        raised.last = raised.last.checked_add(1).unwrap_or(1);
        let token = raised.last;
        raised.errors.insert(token, error);
        steel_error.with_span(Span::new(token, token, None))
    }

    /// The error a tool raised, when `e` is that very error on its way out of Scheme code.
    pub fn raised(&self, e: &SteelErr) -> Option<Error> {
        let span = e.span()?;
        if span.source_id().is_some() || span.start() == 0 {
            return None;
        }
        self.raised.lock().ok()?.errors.get(&span.start()).cloned()
    }

    /// Forgets the errors of earlier runs; called as each top-level run starts.
    pub fn reset_raised(&self) {
        if let Ok(mut raised) = self.raised.lock() {
            raised.errors.clear();
        }
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

    fn registry_mut(&self) -> Result<std::sync::RwLockWriteGuard<'_, Registry>> {
        self.registry.write().map_err(|_| Error::tool_failed("the registry lock is poisoned"))
    }
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
fn to_steel_error(e: &Error) -> SteelErr {
    SteelErr::new(SteelErrorKind::Generic, e.message().to_string())
}

/// Registers the procedures `prelude.scm` relies on and the value procedures.
pub(crate) fn install(engine: &mut Engine, shared: &Arc<Shared>) {
    bind(engine, shared, "%register-tool", register_tool);
    bind(engine, shared, "%tool-enter", tool_enter);
    bind(engine, shared, "%tool-leave", tool_leave);
    bind(engine, shared, "%in-program?", in_program);
    let failing = Arc::clone(shared);
    engine.register_value(
        "%tool-failed",
        SteelVal::anonymous_boxed_function(Arc::new(move |a: &[SteelVal]| tool_failed(&failing, a))),
    );
    bind(engine, shared, "%fill-optionals", fill_optionals);
    for procedure in VALUE_PROCEDURES {
        let shared_here = Arc::clone(shared);
        let function = move |given: &[SteelVal]| {
            value_procedure(&shared_here, procedure.name, procedure.guarded_as, procedure.run, given)
                .map_err(|e| shared_here.raise(e))
        };
        engine.register_value(procedure.name, SteelVal::anonymous_boxed_function(Arc::new(function)));
    }
}

fn bind(engine: &mut Engine, shared: &Arc<Shared>, name: &str, f: fn(&Shared, &[SteelVal]) -> Result<SteelVal>) {
    let shared = Arc::clone(shared);
    let function = move |a: &[SteelVal]| f(&shared, a).map_err(|e| shared.raise(e));
    engine.register_value(name, SteelVal::anonymous_boxed_function(Arc::new(function)));
}

/// Runs a value procedure: its arguments are checked against the signature of the tool it is
/// guarded as, the guard judges them as a call of that tool, then it runs.
fn value_procedure(
    shared: &Shared,
    name: &str,
    guarded_as: &str,
    run: fn(&ToolCtx, &[SteelVal]) -> Result<SteelVal>,
    given: &[SteelVal],
) -> Result<SteelVal> {
    let tool = shared.tool(guarded_as).ok_or_else(|| {
        Error::tool_failed(format!("{name}: it reads through {guarded_as}, which this host does not have"))
    })?;
    let mut signature = tool.signature().clone();
    signature.name = name.to_string();
    guarded_call(shared, &tool, &signature, given, |values| run(&shared.ctx, values).map_err(|e| e.in_tool(name)))
}

/// A call from Scheme code: the arguments checked against `signature`, the guard's judgement of
/// them as a call of `tool`, then `run`. A call a program makes itself is kept for its record.
fn guarded_call(
    shared: &Shared,
    tool: &Primitive,
    signature: &Signature,
    given: &[SteelVal],
    run: impl FnOnce(&[SteelVal]) -> Result<SteelVal>,
) -> Result<SteelVal> {
    if !shared.program_calls() {
        let values = args::args_from_scheme(signature, given)?;
        shared.guard.check(&shared.ctx, tool, &values)?;
        return run(&values);
    }
    let started = Instant::now();
    let mut record = ProgramCall {
        tool: signature.name.clone(),
        arguments: positional(given),
        decision: None,
        result: Ok(serde_json::Value::Null),
        elapsed: std::time::Duration::ZERO,
    };
    let result = (|| {
        let values = args::args_from_scheme(signature, given)?;
        record.arguments = by_name(signature, &values);
        let decision = shared.guard.judge(&shared.ctx, tool, &values)?;
        let verdict = decision.verdict(&signature.name);
        record.decision = Some(decision);
        verdict?;
        run(&values)
    })();
    record.result = shared.recorded_result(&result);
    record.elapsed = started.elapsed();
    shared.keep(record);
    result
}

/// Arguments as a program gave them, in order, as JSON.
fn positional(given: &[SteelVal]) -> serde_json::Value {
    serde_json::Value::Array(
        given
            .iter()
            .map(|v| value::scheme_to_json(v).unwrap_or_else(|_| serde_json::Value::String(value::describe_scheme(v))))
            .collect(),
    )
}

/// Checked arguments by parameter name, as a model's call gives them: void ones (left out) left
/// out, a variadic tail's as one list.
fn by_name(signature: &Signature, values: &[SteelVal]) -> serde_json::Value {
    let mut map = serde_json::Map::new();
    for (i, v) in values.iter().enumerate() {
        if matches!(v, SteelVal::Void) {
            continue;
        }
        let Some(param) = signature.param_at(i) else { continue };
        let json = value::scheme_to_json(v).unwrap_or_else(|_| serde_json::Value::String(value::describe_scheme(v)));
        if i >= signature.params.len() {
            let tail = map.entry(param.name.clone()).or_insert_with(|| serde_json::Value::Array(Vec::new()));
            if let serde_json::Value::Array(items) = tail {
                items.push(json);
            }
        } else {
            map.insert(param.name.clone(), json);
        }
    }
    serde_json::Value::Object(map)
}

/// Binds a Rust tool as a global Scheme procedure: checks the arguments against the signature,
/// passes the guard, runs the handler. The tool is looked up by name at each call, so a tool a
/// source replaced or removed while the host ran (an MCP server's) is called as it is now, or
/// answers why it is gone.
pub(crate) fn bind_rust_tool(engine: &mut Engine, shared: &Arc<Shared>, tool: Arc<Primitive>) {
    if !tool.is_rust() {
        return;
    }
    let shared = Arc::clone(shared);
    let name = tool.name().to_string();
    let bound = name.clone();
    let function = move |given: &[SteelVal]| -> steel::rvals::Result<SteelVal> {
        let run = || -> Result<SteelVal> {
            let tool = current_tool(&shared, &bound)?;
            guarded_call(&shared, &tool, tool.signature(), given, |values| {
                invoke_rust(&shared, &tool, values).map(|output| output.value)
            })
        };
        run().map_err(|e| shared.raise(e))
    };
    engine.register_value(&name, SteelVal::anonymous_boxed_function(Arc::new(function)));
}

/// Binds the program tool's name to a procedure that says a program cannot run another: the
/// engine runs one program at a time.
pub(crate) fn bind_program_tool(engine: &mut Engine, shared: &Arc<Shared>) {
    let shared = Arc::clone(shared);
    let function = move |_: &[SteelVal]| -> steel::rvals::Result<SteelVal> {
        Err(shared.raise(crate::code_mode::not_from_scheme()))
    };
    engine.register_value(crate::code_mode::PROGRAM_TOOL, SteelVal::anonymous_boxed_function(Arc::new(function)));
}

/// The tool called `name` as the registry has it now, or why it is not there.
fn current_tool(shared: &Shared, name: &str) -> Result<Arc<Primitive>> {
    let registry = shared.registry.read().map_err(|_| Error::tool_failed("the registry lock is poisoned"))?;
    registry.get(name).cloned().ok_or_else(|| registry.unknown_tool_error(name))
}

/// Runs a Rust tool's handler on checked, guarded arguments. A panic in a handler becomes a
/// `tool_failed` error: no input may take the host down.
pub(crate) fn invoke_rust(shared: &Shared, tool: &Primitive, values: &[SteelVal]) -> Result<ToolOutput> {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match &tool.handler {
        Handler::Rust(handler) => handler(&shared.ctx, values).map(ToolOutput::from),
        Handler::RustOutput(handler) => handler(&shared.ctx, values),
        Handler::Scheme | Handler::Program => Err(Error::tool_failed(format!("{} is not a Rust tool", tool.name()))),
    }));
    match outcome {
        Ok(result) => result.map_err(|e| e.in_tool(tool.name())),
        Err(_) => Err(Error::tool_failed(format!("{}: the tool failed unexpectedly (a bug in toolhost)", tool.name()))
            .with_tool(tool.name())),
    }
}

fn text(v: &SteelVal) -> Option<&str> {
    match v {
        SteelVal::StringV(s) | SteelVal::SymbolV(s) => Some(s.as_str()),
        _ => None,
    }
}

fn list(v: &SteelVal) -> Option<Vec<SteelVal>> {
    match v {
        SteelVal::ListV(l) => Some(l.iter().cloned().collect()),
        SteelVal::VectorV(v) => Some(v.iter().cloned().collect()),
        _ => None,
    }
}

/// `(%register-tool name description params proc output)`: registers a Scheme tool and returns its
/// name. `output` is the declared shape of its result, `#f` for none.
fn register_tool(shared: &Shared, a: &[SteelVal]) -> Result<SteelVal> {
    let invalid = |m: String| Error::new(ErrorKind::InvalidDefinition, format!("register-tool: {m}"));
    if shared.in_program() {
        return Err(invalid(
            "a program cannot register tools; define a procedure instead, or put the tool in a tool file".into(),
        ));
    }
    let [name, description, params, proc, output] = a else {
        return Err(invalid(format!(
            "expected 4 or 5 arguments (register-tool name description params procedure [output-shape]), got {}",
            a.len()
        )));
    };
    let name = text(name)
        .ok_or_else(|| invalid(format!("the name must be a string, got {}", value::describe_scheme(name))))?;
    let SteelVal::StringV(description) = description else {
        return Err(invalid(format!(
            "\"{name}\": the description must be a string, got {}",
            value::describe_scheme(description)
        )));
    };
    if !value::is_procedure(proc) {
        return Err(invalid(format!(
            "\"{name}\": the last argument must be a procedure, got {}",
            value::describe_scheme(proc)
        )));
    }
    shared.check_free(name).map_err(|e| invalid(e.message().to_string()).with_tool(name))?;
    let signature = parse_params(name, params)?;
    let mut primitive = Primitive::new(signature, description.as_str(), Handler::Scheme);
    if !matches!(output, SteelVal::BoolV(false)) {
        let shape = value::scheme_to_json(output).map_err(|e| {
            invalid(format!("\"{name}\": the output shape cannot be read as JSON: {}", e.0)).with_tool(name)
        })?;
        let mut spec = (*primitive.spec).clone();
        spec.output_schema = Some(crate::spec::output_schema(name, &shape)?);
        primitive.spec = Arc::new(spec);
    }
    shared.registry_mut()?.register(primitive).map_err(|e| invalid(e.message().to_string()).with_tool(name))?;
    if let Ok(mut pending) = shared.pending.lock() {
        pending.push(name.to_string());
    }
    Ok(SteelVal::StringV(name.into()))
}

/// Reads `'((path string "File") (min-length integer "Shorter words are ignored" optional))`.
/// A parameter marked `rest` is the variadic tail.
fn parse_params(tool: &str, params: &SteelVal) -> Result<Signature> {
    let invalid = |m: String| {
        Err(Error::new(ErrorKind::InvalidDefinition, format!("register-tool \"{tool}\": {m}")).with_tool(tool))
    };
    let Some(items) = list(params) else {
        return invalid(format!(
            "the parameters must be a list of (name type description [optional]), got {}",
            value::describe_scheme(params)
        ));
    };
    let mut signature = Signature::new(tool, Vec::new());
    for (i, item) in items.iter().enumerate() {
        let n = i + 1;
        let Some(parts) = list(item) else {
            return invalid(format!(
                "parameter {n} must be a list (name type description [optional]), got {}",
                value::describe_scheme(item)
            ));
        };
        let (Some(pname), Some(ty), Some(SteelVal::StringV(description))) =
            (parts.first().and_then(text), parts.get(1).and_then(text), parts.get(2))
        else {
            return invalid(format!(
                "parameter {n} must be (name type \"description\" [optional]), got {}",
                value::describe_scheme(item)
            ));
        };
        let Some(ty) = ParamType::from_name(ty) else {
            return invalid(format!(
                "parameter \"{pname}\" has unknown type \"{ty}\"; the types are string, integer, number, boolean, list, object, any"
            ));
        };
        let flags: Vec<&str> = parts[3..].iter().filter_map(text).collect();
        if flags.len() != parts.len() - 3 || flags.iter().any(|f| *f != "optional" && *f != "rest") {
            return invalid(format!(
                "parameter \"{pname}\": after the description only `optional` or `rest` may follow"
            ));
        }
        let param = Param {
            name: pname.to_string(),
            ty,
            description: description.as_str().to_string(),
            optional: flags.contains(&"optional"),
        };
        if flags.contains(&"rest") {
            if n != items.len() {
                return invalid(format!("parameter \"{pname}\" is marked rest but is not the last one"));
            }
            signature.rest = Some(Param { optional: false, ..param });
        } else {
            signature.params.push(param);
        }
    }
    signature.skipped = Skipped::TypedEmpty;
    Ok(signature)
}

fn tool_and_args(shared: &Shared, a: &[SteelVal]) -> Result<(Arc<Primitive>, Vec<SteelVal>)> {
    let (Some(name), Some(given)) = (a.first().and_then(text), a.get(1).and_then(list)) else {
        return Err(Error::new(ErrorKind::BadArguments, "internal: expected a tool name and an argument list"));
    };
    let tool =
        shared.tool(name).ok_or_else(|| Error::new(ErrorKind::UnknownTool, format!("no tool called \"{name}\"")))?;
    Ok((tool, given))
}

/// `(%tool-enter name args)`: checks a Scheme call of a Scheme tool and passes the guard; returns
/// the checked arguments. While a program runs, the prelude's wrapper then calls `%tool-leave` with
/// the tool's value or `%tool-failed` with its error, so the program's record of the call is
/// complete.
fn tool_enter(shared: &Shared, a: &[SteelVal]) -> Result<SteelVal> {
    let (tool, given) = tool_and_args(shared, a)?;
    if !shared.in_program() {
        let values = args::args_from_scheme(tool.signature(), &given)?;
        shared.guard.check(&shared.ctx, &tool, &values)?;
        return Ok(SteelVal::ListV(values.into_iter().collect()));
    }
    let opened = |entry: Option<(usize, Instant)>| {
        if let Ok(mut program) = shared.program.lock() {
            if let Some(calls) = program.as_mut() {
                calls.open.push(entry);
            }
        }
    };
    if !shared.program_calls() {
        let values = args::args_from_scheme(tool.signature(), &given)?;
        shared.guard.check(&shared.ctx, &tool, &values)?;
        opened(None);
        return Ok(SteelVal::ListV(values.into_iter().collect()));
    }
    // The record is kept whatever happens; the checked arguments go on to the tool's procedure.
    let started = Instant::now();
    let before = shared.recorded();
    let mut checked = None;
    let outcome = guarded_call(shared, &tool, tool.signature(), &given, |values| {
        checked = Some(values.to_vec());
        Ok(SteelVal::Void)
    });
    let values = match (outcome, checked) {
        (Ok(_), Some(values)) => values,
        (Err(e), _) => return Err(e),
        (Ok(_), None) => return Err(Error::tool_failed("internal: a checked call gave no arguments")),
    };
    let kept = shared.recorded() > before;
    opened(kept.then_some((before, started)));
    Ok(SteelVal::ListV(values.into_iter().collect()))
}

/// Closes the record of the Scheme tool left last, with its result.
fn close_call(shared: &Shared, result: &Result<SteelVal>) {
    let Ok(mut program) = shared.program.lock() else { return };
    let Some(calls) = program.as_mut() else { return };
    let Some(Some((index, started))) = calls.open.pop() else { return };
    let recorded = shared.recorded_result(result);
    if let Some(record) = calls.records.get_mut(index) {
        record.result = recorded;
        record.elapsed = started.elapsed();
    }
}

/// `(%tool-leave value)`: a Scheme tool a program called returned `value`.
fn tool_leave(shared: &Shared, a: &[SteelVal]) -> Result<SteelVal> {
    let value = a.first().cloned().unwrap_or(SteelVal::Void);
    close_call(shared, &Ok(value.clone()));
    Ok(value)
}

/// `(%tool-failed error)`: a Scheme tool a program called raised `error`, which goes on up.
fn tool_failed(shared: &Shared, a: &[SteelVal]) -> steel::rvals::Result<SteelVal> {
    use steel::rvals::FromSteelVal;
    let error = a
        .first()
        .and_then(|e| SteelErr::from_steelval(e).ok())
        .unwrap_or_else(|| SteelErr::new(SteelErrorKind::Generic, "a tool failed".to_string()));
    let ours = shared.raised(&error).unwrap_or_else(|| Error::tool_failed(steel_message(&error)));
    close_call(shared, &Err(ours));
    Err(error)
}

/// `(%in-program?)`: whether a program runs, so Scheme tools' calls are recorded.
fn in_program(shared: &Shared, _: &[SteelVal]) -> Result<SteelVal> {
    Ok(SteelVal::BoolV(shared.in_program()))
}

/// `(%fill-optionals name args)`: the arguments as a `define-tool` body binds them: every absent
/// trailing optional parameter given its type's empty value, and a rest parameter's arguments
/// gathered into one list.
fn fill_optionals(shared: &Shared, a: &[SteelVal]) -> Result<SteelVal> {
    let (tool, given) = tool_and_args(shared, a)?;
    Ok(SteelVal::ListV(args::fill_for_body(tool.signature(), given).into_iter().collect()))
}
