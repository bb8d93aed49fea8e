//! The procedures the prelude's `check-tool` calls through, in every host: a call by name with JSON
//! arguments through the JSON call path, reported as `toolhost call` reports it, so a `.test.scm`
//! file asserts what a model would receive.

use std::sync::Arc;

use serde_json::{json, Value};
use steel::rerrs::SteelErr;
use steel::rvals::SteelVal;
use steel::steel_vm::engine::Engine;

use crate::bridge::{self, steel_message, Shared};
use crate::call::{self, CallRequest};
use crate::error::{Error, ErrorKind, Result};
use crate::param::ParamType;
use crate::registry::Handler;
use crate::value::{self, write_scheme};

/// Registers the procedures the prelude's `check-tool` calls through.
pub(crate) fn install(engine: &mut Engine, shared: &Arc<Shared>) {
    type Procedure = fn(&Shared, &[SteelVal]) -> Result<SteelVal>;
    let procedures: [(&str, Procedure); 3] = [
        ("%check-call", check_call),
        ("%check-call-finish", check_call_finish),
        ("%check-call-failed", check_call_failed),
    ];
    for (name, procedure) in procedures {
        let shared = Arc::clone(shared);
        let function = move |a: &[SteelVal]| procedure(&shared, a).map_err(|e| shared.raise(e));
        engine.register_value(name, SteelVal::anonymous_boxed_function(Arc::new(function)));
    }
}

/// What `check-tool` compares: the outcome `toolhost call` prints, `{"ok", "result"}` or
/// `{"ok", "error": {"kind", "message"}}`, as a Scheme hash.
fn outcome(json: &Value) -> Result<SteelVal> {
    value::json_to_scheme(json, ParamType::Any)
        .map_err(|_| Error::tool_failed("check-tool: the result cannot be turned back into a Scheme value"))
}

fn failed(kind: ErrorKind, message: String) -> Value {
    json!({"ok": false, "error": {"kind": kind.as_str(), "message": message}})
}

/// `(%check-call name json)`: a call through the JSON call path (parse, look up, tidy, convert,
/// guard). A Rust tool runs there: `("done" outcome)`. A Scheme tool's procedure lives in the
/// engine, which a Rust procedure cannot call back into, so the prelude runs it:
/// `("run" real-name arguments)`, then `%check-call-finish` or `%check-call-failed`.
fn check_call(shared: &Shared, a: &[SteelVal]) -> Result<SteelVal> {
    let [SteelVal::StringV(name), SteelVal::StringV(json)] = a else {
        return Err(Error::new(ErrorKind::BadArguments, "check-tool: expected a tool name and JSON arguments"));
    };
    if shared.in_program() {
        return Err(Error::new(
            ErrorKind::ToolFailed,
            "check-tool: it is for tool tests; a program calls a tool as a procedure, (tool-name arg ...)",
        ));
    }
    let mut deferred: Option<(String, Vec<SteelVal>)> = None;
    let request = CallRequest::new(name.as_str(), json.as_str());
    let record = call::run(shared, &request, &mut |tool, values| match &tool.handler {
        Handler::Rust(_) | Handler::RustOutput(_) => bridge::invoke_rust(shared, tool, &values),
        Handler::Scheme => {
            deferred = Some((tool.name().to_string(), values));
            Ok(SteelVal::Void.into())
        }
        Handler::Program => Err(crate::code_mode::not_from_scheme()),
    });
    match deferred {
        // The call got through every step up to running the tool.
        Some((real, values)) => Ok(SteelVal::ListV(
            vec![SteelVal::StringV("run".into()), SteelVal::StringV(real.into()), SteelVal::ListV(values.into())]
                .into(),
        )),
        None => Ok(SteelVal::ListV(vec![SteelVal::StringV("done".into()), outcome(&record.to_json())?].into())),
    }
}

/// `(%check-call-finish name value)`: a Scheme tool's result as the model receives it.
fn check_call_finish(shared: &Shared, a: &[SteelVal]) -> Result<SteelVal> {
    let [SteelVal::StringV(name), result] = a else {
        return Err(Error::new(ErrorKind::BadArguments, "check-tool: expected a tool name and a result"));
    };
    let json = match value::scheme_to_json(result) {
        Ok(json) => json!({"ok": true, "result": crate::value::cap_result(json, shared.ctx.limits.output_chars)}),
        Err(e) => failed(ErrorKind::ToolFailed, format!("{name}: its result cannot be sent back: {}", e.0)),
    };
    outcome(&json)
}

/// `(%check-call-failed name error)`: a Scheme tool's error as the model receives it, its kind
/// kept when a tool it called raised it.
fn check_call_failed(shared: &Shared, a: &[SteelVal]) -> Result<SteelVal> {
    let [SteelVal::StringV(name), error] = a else {
        return Err(Error::new(ErrorKind::BadArguments, "check-tool: expected a tool name and an error"));
    };
    let err: Option<SteelErr> = match error {
        SteelVal::Custom(custom) => {
            let custom = custom.borrow();
            steel::rvals::as_underlying_type::<SteelErr>(custom.as_ref()).cloned()
        }
        _ => None,
    };
    let (kind, message) = match &err {
        Some(err) => (shared.raised(err).map_or(ErrorKind::ToolFailed, |raised| raised.kind()), steel_message(err)),
        None => (ErrorKind::ToolFailed, write_scheme(error)),
    };
    let message = Error::new(kind, message).in_tool(name.as_str()).message().to_string();
    outcome(&failed(kind, message))
}
