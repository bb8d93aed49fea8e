//! The JSON call path every caller that is not Scheme code uses (`toolhost call`, the REPL's
//! `:call`, the agent loop, the MCP server): parse, tidy, look up, convert, guard, run, and turn the
//! result into JSON. Every failure comes back as a [`CallOutcome`] with a stable error kind, never
//! as a panic or a transport error.

use serde_json::{json, Value};
use steel::rvals::SteelVal;

use crate::args;
use crate::error::{Error, ErrorKind, Result};
use crate::host::{invoke_rust, Host};
use crate::registry::Handler;
use crate::tidy;
use crate::value;

/// How a call arrives.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallOptions {
    /// The call came from a strict-mode provider: top-level nulls are dropped before tidying.
    pub strict: bool,
}

/// What a call produced, and the tidy notes made on the way.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    /// The result as JSON, or the error.
    pub result: Result<Value>,
    /// One note for each change tidying made to the arguments.
    pub notes: Vec<String>,
}

impl CallOutcome {
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

    /// The text a model is given: a string result as its text, any other result as its JSON
    /// text, an error as `error (kind): message`.
    pub fn model_text(&self) -> String {
        match &self.result {
            Ok(Value::String(s)) => s.clone(),
            Ok(other) => other.to_string(),
            Err(e) => format!("error ({}): {}", e.kind(), e.message()),
        }
    }
}

impl Host {
    /// Calls `tool` with arguments as a model sent them, as JSON text. Empty text means no
    /// arguments.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\n").unwrap();
    /// let mut host = toolhost::Host::new(dir.path()).unwrap();
    /// let outcome = host.call_json("fs-read", r#"{"path": "a.txt", "count": 2}"#);
    /// assert_eq!(outcome.model_text(), "1\tone\n2\ttwo\n... 1 more line; next start 3\n");
    /// ```
    pub fn call_json(&mut self, tool: &str, arguments: &str) -> CallOutcome {
        self.call_json_with(tool, arguments, CallOptions::default())
    }

    /// [`Host::call_json`] with options.
    pub fn call_json_with(&mut self, tool: &str, arguments: &str, options: CallOptions) -> CallOutcome {
        if arguments.trim().is_empty() {
            return self.call_with(tool, Value::Object(Default::default()), options);
        }
        match serde_json::from_str::<Value>(arguments) {
            Ok(value) => self.call_with(tool, value, options),
            Err(e) => CallOutcome {
                result: Err(Error::new(
                    ErrorKind::BadArguments,
                    format!(
                        "{tool}: the arguments are not valid JSON ({e}); send an object of parameter names to values"
                    ),
                )
                .with_tool(tool)),
                notes: Vec::new(),
            },
        }
    }

    /// Calls `tool` with arguments already parsed from JSON.
    pub fn call(&mut self, tool: &str, arguments: Value) -> CallOutcome {
        self.call_with(tool, arguments, CallOptions::default())
    }

    /// [`Host::call`] with options.
    pub fn call_with(&mut self, tool: &str, mut arguments: Value, options: CallOptions) -> CallOutcome {
        let mut notes = Vec::new();
        let result = self.call_inner(tool, &mut arguments, options, &mut notes);
        CallOutcome { result, notes }
    }

    fn call_inner(
        &mut self,
        tool: &str,
        arguments: &mut Value,
        options: CallOptions,
        notes: &mut Vec<String>,
    ) -> Result<Value> {
        let primitive = {
            let registry =
                self.shared.registry.read().map_err(|_| Error::tool_failed("the registry lock is poisoned"))?;
            registry.get_by_provider_name(tool).cloned().ok_or_else(|| registry.unknown_tool_error(tool))?
        };
        let name = primitive.name().to_string();
        if options.strict {
            tidy::drop_top_level_nulls(arguments);
        }
        if arguments.is_null() {
            *arguments = Value::Object(Default::default());
        }
        notes.extend(tidy::tidy(&primitive.signature, arguments));
        if options.strict {
            // Arguments that arrived wrapped in a JSON string are only an object now.
            tidy::drop_top_level_nulls(arguments);
        }
        let Value::Object(map) = &*arguments else {
            return Err(Error::new(
                ErrorKind::BadArguments,
                format!(
                    "{name}: the arguments must be a JSON object of parameter names to values, got {}; call it as {}",
                    value::describe_json(arguments),
                    primitive.signature.render()
                ),
            )
            .with_tool(&name));
        };
        let values = args::args_from_json(&primitive.signature, map)?;
        self.shared.guard.check(&self.shared.ctx, &primitive, &values)?;
        let result: SteelVal = match &primitive.handler {
            Handler::Rust(_) => invoke_rust(&self.shared, &primitive, &values)?,
            Handler::Scheme => self.call_scheme_tool(&name, values)?,
        };
        value::scheme_to_json(&result).map_err(|e| {
            Error::tool_failed(format!("{name}: its result cannot be sent back: {}", e.0)).with_tool(&name)
        })
    }
}
