//! A tool's spec: everything a model or a catalogue sees of a tool (name, description, parameters,
//! annotations, an MCP tool's own `inputSchema` kept as given, the shape of its output when it
//! declares one), apart from the handler that
//! runs it; and [`SpecSet`], the specs of a host's tools with lookup by real and provider name.
//! Schema, strict and P-format code read specs only, so a catalogue can be built and sent across
//! threads or processes without the handlers.

use std::collections::HashMap;
use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::Value;

use crate::error::{Error, ErrorKind, Result};
use crate::param::{provider_name, Signature};

/// Hints about a tool's effects, shown to MCP clients.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Annotations {
    /// The tool does not change anything.
    pub read_only: bool,
    /// The tool may destroy or overwrite data.
    pub destructive: bool,
}

/// What a tool is, as models see it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolSpec {
    /// Name, ordered parameters, variadic tail, skipping convention.
    pub signature: Signature,
    /// One paragraph for the model: what the tool does and its defaults, in prose.
    pub description: String,
    /// Effect hints.
    pub annotations: Annotations,
    /// The JSON Schema of the arguments exactly as the tool's source gave it (an MCP server's
    /// `inputSchema`, with its nested objects, enums and descriptions). When present, providers see
    /// it instead of the schema projected from [`ToolSpec::signature`]; the signature still decides
    /// how calls are converted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    /// The JSON Schema of the tool's result, when it declares one (see [`output_schema`]): MCP
    /// clients are shown it as `outputSchema`, and the call path refuses a result whose root type
    /// is not the declared one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

impl ToolSpec {
    /// A spec with no annotations and no raw schema.
    pub fn new(signature: Signature, description: impl Into<String>) -> Self {
        ToolSpec {
            signature,
            description: description.into(),
            annotations: Annotations::default(),
            input_schema: None,
            output_schema: None,
        }
    }

    /// Whether `result` has the root type of the declared output schema (true when none is
    /// declared). Only the root is checked: nested constraints are the tool's own promise.
    pub fn output_conforms(&self, result: &Value) -> bool {
        let Some(declared) = self.output_schema.as_ref().and_then(|s| s.get("type")).and_then(Value::as_str) else {
            return true;
        };
        match declared {
            "object" => result.is_object(),
            "array" => result.is_array(),
            "integer" => result.is_i64() || result.is_u64(),
            "number" => result.is_number(),
            "boolean" => result.is_boolean(),
            _ => true,
        }
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.signature.name
    }
}

/// The root types a declared output may have, as a tool declares them (`list` is JSON's `array`).
/// A string result is text, which needs no shape, so `string` is not one of them.
pub const OUTPUT_TYPES: [&str; 5] = ["integer", "number", "boolean", "list", "object"];

/// The output schema a tool declares with `shape`: one of [`OUTPUT_TYPES`] (a root type and
/// nothing more), or a JSON Schema object whose root `type` is one of them (`array` for `list`).
///
/// ```
/// use serde_json::json;
/// use toolhost::spec::output_schema;
/// assert_eq!(output_schema("t", &json!("list")).unwrap(), json!({"type": "array"}));
/// let point = json!({"type": "object", "properties": {"x": {"type": "number"}}});
/// assert_eq!(output_schema("t", &point).unwrap(), point);
/// assert!(output_schema("t", &json!("string")).is_err());
/// ```
///
/// # Errors
/// [`ErrorKind::InvalidDefinition`] naming the tool, for any other shape.
pub fn output_schema(tool: &str, shape: &Value) -> Result<Value> {
    let json_type = |name: &str| match name {
        "list" | "array" => Some("array"),
        "integer" | "number" | "boolean" | "object" => OUTPUT_TYPES.iter().copied().find(|t| *t == name),
        _ => None,
    };
    let schema = match shape {
        Value::String(name) => json_type(name).map(|t| serde_json::json!({ "type": t })),
        Value::Object(schema) => schema
            .get("type")
            .and_then(Value::as_str)
            .filter(|t| json_type(t).is_some_and(|mapped| mapped == *t))
            .map(|_| shape.clone()),
        _ => None,
    };
    schema.ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidDefinition,
            format!(
                "tool \"{tool}\": the output shape must be one of {} or a JSON Schema whose root \"type\" is one \
                 of integer, number, boolean, array, object, got {}; a tool that returns text declares no shape",
                OUTPUT_TYPES.join(", "),
                crate::value::describe_json(shape)
            ),
        )
        .with_tool(tool)
    })
}

/// The specs of a set of tools, in registration order, with lookup by real name and by the name
/// providers were sent (`server.tool` goes out as `server__tool`). It enforces the naming rules
/// of registration: valid signatures, no duplicates, no two names that map to the same provider
/// name.
#[derive(Debug, Clone, Default)]
pub struct SpecSet {
    specs: IndexMap<String, Arc<ToolSpec>>,
    /// Provider-facing name -> real name, for names that map.
    by_provider_name: HashMap<String, String>,
}

impl SpecSet {
    /// An empty set.
    pub fn new() -> Self {
        SpecSet::default()
    }

    /// Adds a spec.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidDefinition`], naming the tool and the parameter: a signature that breaks
    /// the rules of [`Signature::validate`], a name already taken, or a name whose provider form
    /// collides with another tool's.
    pub fn insert(&mut self, spec: Arc<ToolSpec>) -> Result<()> {
        let sig = &spec.signature;
        sig.validate()?;
        let name = sig.name.clone();
        if self.specs.contains_key(&name) {
            return Err(Error::new(ErrorKind::InvalidDefinition, format!("tool \"{name}\" is already registered"))
                .with_tool(name));
        }
        // validate() guarantees the name maps.
        let mapped = provider_name(&name).unwrap_or_else(|| name.clone());
        if let Some(other) = self.by_provider_name.get(&mapped).or(self.specs.get(&mapped).map(|s| &s.signature.name)) {
            return Err(Error::new(
                ErrorKind::InvalidDefinition,
                format!("tool \"{name}\" would be sent to providers as \"{mapped}\", which \"{other}\" already uses"),
            )
            .with_tool(name));
        }
        if mapped != name {
            self.by_provider_name.insert(mapped, name.clone());
        }
        self.specs.insert(name, spec);
        Ok(())
    }

    /// Removes the tool called `name`; true when there was one.
    pub fn remove(&mut self, name: &str) -> bool {
        self.by_provider_name.retain(|_, real| real != name);
        self.specs.shift_remove(name).is_some()
    }

    /// The spec of the tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<ToolSpec>> {
        self.specs.get(name)
    }

    /// The real name a provider-facing name refers to (the name itself, or its unmapped form).
    pub fn resolve(&self, name: &str) -> Option<&str> {
        match self.by_provider_name.get(name) {
            Some(real) => Some(real.as_str()),
            None => self.specs.get_key_value(name).map(|(k, _)| k.as_str()),
        }
    }

    /// The spec a provider-facing name refers to.
    pub fn get_by_provider_name(&self, name: &str) -> Option<&Arc<ToolSpec>> {
        self.resolve(name).and_then(|real| self.specs.get(real))
    }

    /// The `unknown_tool` error for `name`, listing the tools there are so the model can pick one.
    pub fn unknown_tool_error(&self, name: &str) -> Error {
        const SHOWN: usize = 60;
        let mut names: Vec<&str> = self.specs.keys().map(String::as_str).collect();
        names.sort_unstable();
        let listing = if names.len() > SHOWN {
            format!("{} and {} more", names[..SHOWN].join(", "), names.len() - SHOWN)
        } else {
            names.join(", ")
        };
        let name = crate::value::clip(name.to_string());
        Error::new(ErrorKind::UnknownTool, format!("there is no tool called \"{name}\"; the tools are {listing}"))
            .with_tool(name)
    }

    /// Every spec, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<ToolSpec>> {
        self.specs.values()
    }

    /// How many tools there are.
    pub fn len(&self) -> usize {
        self.specs.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }
}

/// Two sets are equal when they hold equal specs in the same order.
impl PartialEq for SpecSet {
    fn eq(&self, other: &Self) -> bool {
        self.specs.len() == other.specs.len() && self.specs.values().eq(other.specs.values())
    }
}

/// A set of specs is written as the list of its specs, in order.
impl serde::Serialize for SpecSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_seq(self.specs.values().map(|spec| spec.as_ref()))
    }
}

/// A set of specs is read back from its list, under the same naming rules as registration.
impl<'de> serde::Deserialize<'de> for SpecSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let mut set = SpecSet::new();
        for spec in Vec::<ToolSpec>::deserialize(d)? {
            set.insert(Arc::new(spec)).map_err(serde::de::Error::custom)?;
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::param::{Param, ParamType};

    fn spec(name: &str) -> Arc<ToolSpec> {
        Arc::new(ToolSpec::new(Signature::new(name, vec![Param::required("x", ParamType::Any, "")]), ""))
    }

    #[test]
    fn duplicate_names_are_refused() {
        let mut set = SpecSet::new();
        set.insert(spec("a")).unwrap();
        let err = set.insert(spec("a")).unwrap_err();
        assert!(err.message().contains("already registered"), "{err}");
    }

    #[test]
    fn provider_names_map_back_and_cannot_collide() {
        let mut set = SpecSet::new();
        set.insert(spec("srv.read")).unwrap();
        assert_eq!(set.get_by_provider_name("srv__read").unwrap().name(), "srv.read");
        assert_eq!(set.get_by_provider_name("srv.read").unwrap().name(), "srv.read");
        let err = set.insert(spec("srv__read")).unwrap_err();
        assert!(err.message().contains("already uses"), "{err}");
    }

    #[test]
    fn a_removed_tool_frees_its_names() {
        let mut set = SpecSet::new();
        set.insert(spec("srv.read")).unwrap();
        assert!(set.remove("srv.read"));
        assert!(set.get_by_provider_name("srv__read").is_none());
        set.insert(spec("srv__read")).unwrap();
    }
}
