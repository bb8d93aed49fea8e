//! One parameter model projected, at this one place, into each provider's tool shape (design
//! section 5): OpenAI chat-completions tools, Anthropic tools and MCP `tools/list` entries. Each is a
//! JSON Schema object with properties in declared order, `required` listing only the required
//! parameters, and no `default` anywhere. The strict variant of the OpenAI shape is made here too,
//! by handing the OpenAI shape to `strict` (section 6).

use serde_json::{json, Map, Value};

use crate::param::{provider_name, Param, Signature};
use crate::spec::ToolSpec;
use crate::strict::{strict_openai_tool, Refusal};

/// The catalogue shapes toolhost can print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// `{"type":"function","function":{"name","description","parameters"}}`.
    OpenAi,
    /// The OpenAI shape for a provider marked `strict_tools`: each tool rewritten by
    /// [`crate::strict::strict_openai_tool`] and sent with `"strict": true`, or untouched with
    /// `"strict": false` when its schema cannot be expressed.
    OpenAiStrict,
    /// `{"name","description","input_schema"}`.
    Anthropic,
    /// `{"name","description","inputSchema","annotations"}`.
    Mcp,
    /// The OpenAI shape for Gemini's OpenAI-compatible endpoint: each tool's parameters rewritten
    /// into Gemini's schema dialect by [`crate::gemini::gemini_openai_tool`]; a tool it refuses is
    /// left out (see [`left_out`]), since one schema Gemini cannot read fails every request.
    Gemini,
}

/// The JSON Schema of a tool's arguments.
///
/// ```
/// use toolhost::{schema::parameters_schema, Param, ParamType, Signature};
/// let sig = Signature::new("fs-read", vec![
///     Param::required("path", ParamType::String, "File"),
///     Param::optional("count", ParamType::Integer, "Lines; all when left out"),
/// ]);
/// let schema = parameters_schema(&sig);
/// assert_eq!(schema["required"], serde_json::json!(["path"]));
/// assert_eq!(schema["properties"]["count"]["type"], "integer");
/// ```
pub fn parameters_schema(signature: &Signature) -> Value {
    let mut properties = Map::new();
    for param in &signature.params {
        properties.insert(param.name.clone(), property(param));
    }
    if let Some(rest) = &signature.rest {
        let mut items = Map::new();
        if let Some(ty) = rest.ty.json_schema_type() {
            items.insert("type".into(), json!(ty));
        }
        properties.insert(rest.name.clone(), json!({"type": "array", "items": items, "description": rest.description}));
    }
    let required: Vec<&str> = signature.params.iter().filter(|p| !p.optional).map(|p| p.name.as_str()).collect();
    json!({"type": "object", "properties": properties, "required": required})
}

fn property(param: &Param) -> Value {
    let mut out = Map::new();
    if let Some(ty) = param.ty.json_schema_type() {
        out.insert("type".into(), json!(ty));
    }
    out.insert("description".into(), json!(param.description));
    Value::Object(out)
}

/// The JSON Schema providers are shown for a tool's arguments: the tool's own raw schema when it
/// came with one (an MCP tool's `inputSchema`), else the one projected from its signature.
pub fn arguments_schema(spec: &ToolSpec) -> Value {
    match &spec.input_schema {
        Some(raw) => raw.clone(),
        None => parameters_schema(&spec.signature),
    }
}

/// One tool in a provider's shape, under the name the provider can take; `null` for a tool the
/// shape cannot carry (only [`Format::Gemini`] has such tools: see [`left_out`]).
///
/// ```
/// use toolhost::schema::{tool_schema, Format};
/// let dir = tempfile::tempdir().unwrap();
/// let host = toolhost::Host::new(dir.path()).unwrap();
/// let fs_read = host.tool("fs-read").unwrap();
/// let strict = tool_schema(&fs_read.spec, Format::OpenAiStrict);
/// assert_eq!(strict["function"]["strict"], true);
/// // The optional start is required and admits null in strict mode.
/// assert_eq!(strict["function"]["parameters"]["properties"]["start"]["type"], serde_json::json!(["integer", "null"]));
/// ```
pub fn tool_schema(tool: &ToolSpec, format: Format) -> Value {
    let name = provider_name(tool.name()).unwrap_or_else(|| tool.name().to_string());
    let parameters = arguments_schema(tool);
    match format {
        Format::OpenAiStrict => strict_openai_tool(&tool_schema(tool, Format::OpenAi)),
        Format::Gemini => crate::gemini::gemini_openai_tool(&tool_schema(tool, Format::OpenAi)).unwrap_or(Value::Null),
        Format::OpenAi => json!({
            "type": "function",
            "function": {"name": name, "description": tool.description, "parameters": parameters},
        }),
        Format::Anthropic => json!({"name": name, "description": tool.description, "input_schema": parameters}),
        Format::Mcp => {
            let mut shown = json!({
                "name": name,
                "description": tool.description,
                "inputSchema": parameters,
                "annotations": {
                    "readOnlyHint": tool.annotations.read_only,
                    "destructiveHint": tool.annotations.destructive,
                },
            });
            if let (Some(schema), Some(fields)) = (&tool.output_schema, shown.as_object_mut()) {
                fields.insert("outputSchema".into(), mcp_output_schema(schema));
            }
            shown
        }
    }
}

/// The `outputSchema` MCP clients are shown for a declared output schema. MCP (2025-11-25) wants
/// structured content to be an object: a schema whose root is one is shown as it is, any other is
/// shown as an object holding the result under `"result"`, which is how such results are sent.
///
/// ```
/// use serde_json::json;
/// use toolhost::schema::mcp_output_schema;
/// assert_eq!(
///     mcp_output_schema(&json!({"type": "array"})),
///     json!({"type": "object", "properties": {"result": {"type": "array"}}, "required": ["result"]})
/// );
/// ```
pub fn mcp_output_schema(schema: &Value) -> Value {
    if schema.get("type").and_then(Value::as_str) == Some("object") {
        return schema.clone();
    }
    json!({"type": "object", "properties": {"result": schema}, "required": ["result"]})
}

/// The `structuredContent` an MCP client is sent for a result that is a value rather than text:
/// an object as it is, a list, number or boolean under `"result"` (see [`mcp_output_schema`]).
/// A string is text and null is nothing, so neither has one.
pub fn mcp_structured_content(result: &Value) -> Option<Value> {
    match result {
        Value::String(_) | Value::Null => None,
        Value::Object(_) => Some(result.clone()),
        other => Some(json!({ "result": other })),
    }
}

/// Every tool in a provider's shape, as a JSON array, leaving out the tools the shape cannot carry.
pub fn catalogue<'a>(tools: impl IntoIterator<Item = &'a ToolSpec>, format: Format) -> Value {
    Value::Array(tools.into_iter().map(|t| tool_schema(t, format)).filter(|t| !t.is_null()).collect())
}

/// The tools [`catalogue`] leaves out in `format`, each with its name and why: Gemini's refusals.
///
/// ```
/// use toolhost::{schema::{left_out, Format}, Param, ParamType, Signature, ToolSpec};
/// let mut spec = ToolSpec::new(Signature::new("put", vec![Param::required("map", ParamType::Object, "Keys")]), "Put.");
/// spec.input_schema = Some(serde_json::json!({"type": "object", "properties": {"map": {"type": "object"}}}));
/// let out = left_out([&spec], Format::Gemini);
/// assert_eq!(out[0].0, "put");
/// assert_eq!(out[0].1.pointer(), "/properties/map");
/// assert!(left_out([&spec], Format::OpenAi).is_empty());
/// ```
pub fn left_out<'a>(tools: impl IntoIterator<Item = &'a ToolSpec>, format: Format) -> Vec<(String, Refusal)> {
    if format != Format::Gemini {
        return Vec::new();
    }
    tools
        .into_iter()
        .filter_map(|t| {
            crate::gemini::gemini_openai_tool(&tool_schema(t, Format::OpenAi)).err().map(|r| (t.name().to_string(), r))
        })
        .collect()
}
