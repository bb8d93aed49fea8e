//! The JSON call path every caller that is not Scheme code uses (`toolhost call`, the REPL's
//! `:call`, the agent loop, the MCP server), and the record each call leaves. The path owns its
//! steps: parse, look up, tidy, convert, guard, run (the host runs the tool), cap the result, and
//! record it all in one [`CallRecord`]. Every failure comes back as a record with a stable error
//! kind, never as a panic or a transport error.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use steel::rvals::SteelVal;

use crate::args;
use crate::bridge::{ProgramCall, Shared};
use crate::error::{Error, ErrorKind, Reason, Result};
use crate::gemini;
use crate::guard::Decision;
use crate::registry::{Primitive, ToolOutput};
use crate::tidy::{self, Repair};
use crate::value;

/// How a call arrives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CallOptions {
    /// The call came from a strict-mode provider: top-level nulls are dropped before tidying.
    #[serde(default)]
    pub strict: bool,
    /// The provider was sent the tool in Gemini's dialect, whose parameter names have `_` for `-`
    /// ([`crate::gemini::gemini_name`]): argument keys are mapped back before tidying.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gemini_names: bool,
}

impl CallOptions {
    /// The options for a call from a provider that was sent the catalogue in `format`.
    pub fn sent(format: crate::schema::Format) -> CallOptions {
        use crate::schema::Format;
        CallOptions { strict: format == Format::OpenAiStrict, gemini_names: format == Format::Gemini }
    }
}

/// One call as a model sent it. It is plain data, so it can cross threads (see
/// [`crate::HostHandle`]) and processes.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CallRequest {
    /// The tool's name, real or as providers were sent it (`server__tool`).
    pub tool: String,
    /// The arguments as the model sent them: JSON text, an object or a string holding one. Empty
    /// text means no arguments.
    pub arguments: String,
    /// How the call arrived.
    #[serde(default)]
    pub options: CallOptions,
}

impl CallRequest {
    /// A call of `tool` with `arguments` as JSON text.
    pub fn new(tool: impl Into<String>, arguments: impl Into<String>) -> Self {
        CallRequest { tool: tool.into(), arguments: arguments.into(), options: CallOptions::default() }
    }
}

/// Everything one call did: what came in, what tidying made of it, what the guard decided, and the
/// result or the error, with the time it took. Serializable (see [`CallRecord::to_record_json`]):
/// the session log and `toolhost call --record` write it, replay reads it back.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    /// The tool's name as the call gave it.
    pub tool: String,
    /// The arguments as received: the parsed JSON, or the text itself (a JSON string) when it did
    /// not parse.
    pub arguments: Value,
    /// The arguments after tidying, when tidying (or a strict provider's null drop) changed them;
    /// the tool was given `arguments` as received otherwise.
    pub tidied: Option<Value>,
    /// One note for each change tidying made to the arguments.
    pub notes: Vec<String>,
    /// Each change made to the arguments, with its stable kind: the changes `notes` tell in words,
    /// and the nulls a strict provider's model sent (dropped without a note). Records written
    /// before repairs were kept have none.
    pub repairs: Vec<Repair>,
    /// The guard's decision, when the call got that far.
    pub decision: Option<Decision>,
    /// The result as JSON, or the error.
    pub result: Result<Value>,
    /// The text a model is shown instead of the result's JSON, when the tool gave one beside its
    /// value (an MCP tool's text content beside its structured content).
    pub text: Option<String>,
    /// How long the call took, from receipt to result.
    pub elapsed: Duration,
    /// A program's calls ([`crate::code_mode`]): one record for each tool call the program made, in
    /// order, each with its own decision and result. Present, perhaps empty, on the record of a
    /// call of the program tool, and on no other.
    pub nested: Option<Vec<CallRecord>>,
}

/// The record as it is written: `result` or `error`, times in milliseconds.
#[derive(serde::Serialize, serde::Deserialize)]
struct RecordWire {
    tool: String,
    arguments: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tidied: Option<Value>,
    #[serde(default)]
    notes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    repairs: Vec<Repair>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    decision: Option<Decision>,
    ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<Error>,
    elapsed_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    nested: Option<Vec<CallRecord>>,
}

impl serde::Serialize for CallRecord {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        RecordWire {
            tool: self.tool.clone(),
            arguments: self.arguments.clone(),
            tidied: self.tidied.clone(),
            notes: self.notes.clone(),
            repairs: self.repairs.clone(),
            decision: self.decision.clone(),
            ok: self.result.is_ok(),
            result: self.result.as_ref().ok().cloned(),
            text: self.text.clone(),
            error: self.result.as_ref().err().cloned(),
            elapsed_ms: self.elapsed.as_secs_f64() * 1000.0,
            nested: self.nested.clone(),
        }
        .serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for CallRecord {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let wire = RecordWire::deserialize(d)?;
        let result = match (wire.ok, wire.error) {
            (true, _) => Ok(wire.result.unwrap_or(Value::Null)),
            (false, Some(error)) => Err(error),
            (false, None) => return Err(serde::de::Error::custom("a failed call record has no \"error\"")),
        };
        Ok(CallRecord {
            tool: wire.tool,
            arguments: wire.arguments,
            tidied: wire.tidied,
            notes: wire.notes,
            repairs: wire.repairs,
            decision: wire.decision,
            result,
            text: wire.text,
            elapsed: Duration::try_from_secs_f64(wire.elapsed_ms / 1000.0).unwrap_or_default(),
            nested: wire.nested,
        })
    }
}

impl CallRecord {
    fn new(tool: &str, arguments: Value) -> Self {
        CallRecord {
            tool: tool.to_string(),
            arguments,
            tidied: None,
            notes: Vec::new(),
            repairs: Vec::new(),
            decision: None,
            result: Ok(Value::Null),
            text: None,
            elapsed: Duration::ZERO,
            nested: None,
        }
    }

    /// The record of a call that never reached a host (its thread or worker had stopped): the
    /// request as it came, and the error.
    pub fn failed(tool: String, arguments: String, error: Error) -> Self {
        let arguments = serde_json::from_str(&arguments).unwrap_or(Value::String(arguments));
        CallRecord { result: Err(error), ..CallRecord::new(&tool, arguments) }
    }

    /// The JSON object `toolhost call` prints:
    /// `{"ok":true,"result":R,"notes":[...]}` or
    /// `{"ok":false,"error":{"kind":K,"message":M},"notes":[...]}`.
    pub fn to_json(&self) -> Value {
        match &self.result {
            Ok(result) => json!({"ok": true, "result": result, "notes": self.notes}),
            Err(e) => json!({
                "ok": false,
                "error": {"kind": e.kind().as_str(), "message": e.message()},
                "notes": self.notes,
            }),
        }
    }

    /// The whole record as JSON, as `toolhost call --record` prints it and session logs keep it.
    pub fn to_record_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The text a model is given: the tool's own text when it gave one beside its value, else a
    /// string result as its text and any other result as its JSON text; an error as
    /// `error (kind): message`.
    pub fn model_text(&self) -> String {
        match &self.result {
            Ok(_) if self.text.is_some() => self.text.clone().unwrap_or_default(),
            Ok(Value::String(s)) => s.clone(),
            Ok(other) => other.to_string(),
            Err(e) => format!("error ({}): {}", e.kind(), e.message()),
        }
    }
}

impl From<ProgramCall> for CallRecord {
    fn from(call: ProgramCall) -> Self {
        CallRecord {
            decision: call.decision,
            result: call.result,
            elapsed: call.elapsed,
            ..CallRecord::new(&call.tool, call.arguments)
        }
    }
}

/// Runs the host's work for a call whose arguments are checked and guarded.
pub(crate) type Runner<'a> = dyn FnMut(&Arc<Primitive>, Vec<SteelVal>) -> Result<ToolOutput> + 'a;

/// Runs one call through every step, the tool itself by `runner`.
pub(crate) fn run(shared: &Shared, request: &CallRequest, runner: &mut Runner<'_>) -> CallRecord {
    run_parts(shared, &request.tool, &request.arguments, request.options, runner)
}

/// [`run`] on a request's parts, borrowed: an in-process call copies neither name nor text.
pub(crate) fn run_parts(
    shared: &Shared,
    tool: &str,
    arguments: &str,
    options: CallOptions,
    runner: &mut Runner<'_>,
) -> CallRecord {
    let started = Instant::now();
    let text = arguments.trim();
    let parsed = if text.is_empty() { Ok((Value::Object(Default::default()), None)) } else { parse_arguments(text) };
    let mut record = match parsed {
        Ok((arguments, repeated)) => {
            let mut record = CallRecord::new(tool, Value::Null);
            record.result = match repeated {
                Some(key) => {
                    Err(Error::new(ErrorKind::BadArguments, format!("{tool}: {}", args::repeated_key_message(&key)))
                        .with_tool(tool)
                        .with_reason(Reason::DuplicateKey))
                }
                None => steps(shared, tool, &arguments, options, &mut record, runner),
            };
            record.arguments = arguments;
            record
        }
        Err(e) => {
            let mut record = CallRecord::new(tool, Value::String(arguments.to_string()));
            record.result = Err(Error::new(
                ErrorKind::BadArguments,
                format!("{tool}: the arguments are not valid JSON ({e}); send an object of parameter names to values"),
            )
            .with_tool(tool)
            .with_reason(Reason::NotJson));
            record
        }
    };
    record.elapsed = started.elapsed();
    record
}

/// Parses the arguments' JSON text once, noting the first key its top-level object gives twice
/// (or the object a JSON string there holds: tidying unwraps it). A JSON parser keeps the last of
/// two equal keys; which one the model meant is unknown, so such a call is refused.
fn parse_arguments(text: &str) -> serde_json::Result<(Value, Option<String>)> {
    let (value, repeated) = args::parse_noting_repeats(text, &[""])?;
    let repeated = match (&value, repeated) {
        (_, Some(key)) => Some(key),
        (Value::String(inner), None) => match args::parse_noting_repeats(inner, &[""]) {
            Ok((Value::Object(_), repeated)) => repeated,
            _ => None,
        },
        _ => None,
    };
    Ok((value, repeated))
}

/// Every parameter's name, the variadic tail's included.
fn parameter_names(signature: &crate::param::Signature) -> Vec<&str> {
    signature.params.iter().map(|p| p.name.as_str()).chain(signature.rest.iter().map(|r| r.name.as_str())).collect()
}

fn steps(
    shared: &Shared,
    tool: &str,
    received: &Value,
    options: CallOptions,
    record: &mut CallRecord,
    runner: &mut Runner<'_>,
) -> Result<Value> {
    let primitive = {
        let registry = shared.registry.read().map_err(|_| Error::tool_failed("the registry lock is poisoned"))?;
        registry.get_by_provider_name(tool).cloned().ok_or_else(|| registry.unknown_tool_error(tool))?
    };
    let name = primitive.name();
    // Most calls need no tidying: the arguments are then used as received, not copied.
    let names: Vec<&str> = if options.gemini_names { parameter_names(primitive.signature()) } else { Vec::new() };
    let renamed = options.gemini_names && gemini::names_to_restore(&names, received);
    let changes = renamed
        || received.is_null()
        || tidy::needs_tidy(primitive.signature(), received)
        || (options.strict && tidy::has_top_level_nulls(received));
    if changes {
        let mut arguments = received.clone();
        if let (true, Value::Object(map)) = (renamed, &mut arguments) {
            gemini::restore_argument_names(&names, map);
        }
        if options.strict {
            record.repairs.extend(tidy::drop_top_level_nulls(&mut arguments));
        }
        if arguments.is_null() {
            arguments = Value::Object(Default::default());
        }
        let changes = tidy::tidy(primitive.signature(), &mut arguments);
        record.notes.extend(changes.notes);
        record.repairs.extend(changes.repairs);
        if options.strict {
            // Arguments that arrived wrapped in a JSON string are only an object now.
            record.repairs.extend(tidy::drop_top_level_nulls(&mut arguments));
        }
        record.tidied = Some(arguments);
    }
    let arguments = record.tidied.as_ref().unwrap_or(received);
    let Value::Object(map) = arguments else {
        return Err(Error::new(
            ErrorKind::BadArguments,
            format!(
                "{name}: the arguments must be a JSON object of parameter names to values, got {}; call it as {}",
                value::describe_json(arguments),
                primitive.signature().render()
            ),
        )
        .with_tool(name)
        .with_reason(Reason::NotAnObject));
    };
    let values = args::args_from_json(primitive.signature(), map)?;
    let decision = shared.guard.judge(&shared.ctx, &primitive, &values)?;
    let verdict = decision.verdict(name);
    record.decision = Some(decision);
    verdict?;
    let output = runner(&primitive, values)?;
    let json = value::scheme_to_json(&output.value)
        .map_err(|e| Error::tool_failed(format!("{name}: its result cannot be sent back: {}", e.0)).with_tool(name))?;
    if !primitive.spec.output_conforms(&json) {
        let declared = primitive.spec.output_schema.as_ref().and_then(|s| s.get("type")).and_then(Value::as_str);
        let got = match &json {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Array(_) => "a list",
            Value::Object(_) => "an object",
        };
        return Err(Error::tool_failed(format!(
            "{name}: its result is {got}, not the {} its declared output shape promises",
            declared.unwrap_or_default()
        ))
        .with_tool(name));
    }
    let cap = shared.ctx.limits.output_chars;
    record.text = output.text.map(|text| match value::cap_result(Value::String(text), cap) {
        Value::String(text) => text,
        other => other.to_string(),
    });
    Ok(value::cap_result(json, cap))
}
