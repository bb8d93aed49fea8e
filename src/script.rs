//! The Rust half of Scheme tools: the procedures `prelude.scm` builds `register-tool` and
//! `define-tool` on. `%register-tool` reads a tool's parameter list into a [`Signature`] and
//! registers it; `%tool-enter` checks a Scheme call of a Scheme tool (arity, types, guard) exactly
//! as Rust tools are checked; `%fill-optionals` gives `define-tool` bodies every parameter.

use std::sync::Arc;

use steel::rvals::SteelVal;
use steel::steel_vm::engine::Engine;

use crate::args;
use crate::error::{Error, ErrorKind, Result};
use crate::host::Shared;
use crate::param::{Param, ParamType, Signature, Skipped};
use crate::registry::{Handler, Primitive};
use crate::value;

/// Registers the procedures `prelude.scm` relies on.
pub(crate) fn install(engine: &mut Engine, shared: &Arc<Shared>) {
    bind(engine, shared, "%register-tool", register_tool);
    bind(engine, shared, "%tool-enter", tool_enter);
    bind(engine, shared, "%fill-optionals", fill_optionals);
}

fn bind(engine: &mut Engine, shared: &Arc<Shared>, name: &str, f: fn(&Shared, &[SteelVal]) -> Result<SteelVal>) {
    let shared = Arc::clone(shared);
    let function = move |a: &[SteelVal]| f(&shared, a).map_err(|e| shared.raise(e));
    engine.register_value(name, SteelVal::anonymous_boxed_function(Arc::new(function)));
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

/// `(%register-tool name description params proc)`: registers a Scheme tool and returns its name.
fn register_tool(shared: &Shared, a: &[SteelVal]) -> Result<SteelVal> {
    let invalid = |m: String| Error::new(ErrorKind::InvalidDefinition, format!("register-tool: {m}"));
    let [name, description, params, proc] = a else {
        return Err(invalid(format!(
            "expected 4 arguments (register-tool name description params procedure), got {}",
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
    shared
        .check_free(name)
        .map_err(|e| Error::new(ErrorKind::InvalidDefinition, format!("register-tool: {}", e.message())))?;
    let signature = parse_params(name, params)?;
    let primitive = Primitive::new(signature, description.as_str(), Handler::Scheme);
    shared
        .registry
        .write()
        .map_err(|_| Error::tool_failed("the registry lock is poisoned"))?
        .register(primitive)
        .map_err(|e| Error::new(ErrorKind::InvalidDefinition, format!("register-tool: {}", e.message())))?;
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
/// the checked arguments.
fn tool_enter(shared: &Shared, a: &[SteelVal]) -> Result<SteelVal> {
    let (tool, given) = tool_and_args(shared, a)?;
    let values = args::args_from_scheme(&tool.signature, &given)?;
    shared.guard.check(&shared.ctx, &tool, &values)?;
    Ok(SteelVal::ListV(values.into_iter().collect()))
}

/// `(%fill-optionals name args)`: the arguments as a `define-tool` body binds them: every absent
/// trailing optional parameter given its type's empty value, and a rest parameter's arguments
/// gathered into one list.
fn fill_optionals(shared: &Shared, a: &[SteelVal]) -> Result<SteelVal> {
    let (tool, mut given) = tool_and_args(shared, a)?;
    let sig = &tool.signature;
    if sig.rest.is_some() {
        let rest = given.split_off(sig.params.len().min(given.len()));
        given.push(SteelVal::ListV(rest.into_iter().collect()));
        return Ok(SteelVal::ListV(given.into_iter().collect()));
    }
    for param in sig.params.iter().skip(given.len()) {
        given.push(args::skipped_value(sig, param));
    }
    Ok(SteelVal::ListV(given.into_iter().collect()))
}
