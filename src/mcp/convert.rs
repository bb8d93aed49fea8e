//! MCP's shapes to toolhost's and back, with no I/O: an MCP tool's description becomes a
//! [`ToolSpec`] (a [`Signature`] read from its `inputSchema`, the schema itself kept for providers,
//! its hints as [`Annotations`]); the positional values a handler receives become the `arguments`
//! object of a `tools/call`, void left out; and a `tools/call` result becomes the text a model reads
//! and, when it carries structured content, the value Scheme code receives.
//! The connections themselves live in `client.rs`.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents, Tool, ToolAnnotations};
use serde_json::{Map, Value};
use steel::rvals::SteelVal;

use crate::error::{Error, Result};
use crate::param::{Param, ParamType, Signature, Skipped};
use crate::spec::{Annotations, ToolSpec};
use crate::tools::text::thousands;
use crate::value;

/// The name toolhost registers a server's tool under: `server.tool`.
pub fn tool_name(server: &str, tool: &str) -> String {
    format!("{server}.{tool}")
}

/// The spec of tool `tool` of server `server`: named `server.tool`, parameters read from its
/// `inputSchema` (see [`signature`]), skipped parameters as void, the server's description, its
/// hints, and the `inputSchema` itself, which is what providers are shown.
pub fn spec(server: &str, tool: &Tool) -> ToolSpec {
    let schema = tool.input_schema.as_ref();
    let mut spec = ToolSpec::new(signature(&tool_name(server, &tool.name), schema), describe(tool));
    spec.annotations = annotations(tool.annotations.as_ref());
    spec.input_schema = Some(Value::Object(schema.clone()));
    // A server's own output schema is kept when its root type is one toolhost checks results
    // against; any other is still a promise of the server's, shown to no one.
    spec.output_schema = tool
        .output_schema
        .as_ref()
        .and_then(|schema| crate::spec::output_schema(&tool.name, &Value::Object(schema.as_ref().clone())).ok());
    spec
}

/// The description a model reads: the server's, else its title, else a line naming the tool.
fn describe(tool: &Tool) -> String {
    let given = tool.description.as_deref().map(str::trim).filter(|d| !d.is_empty());
    let title = || tool.title.as_deref().or(tool.annotations.as_ref()?.title.as_deref()).map(str::to_string);
    given.map(str::to_string).or_else(title).unwrap_or_else(|| format!("The MCP tool {}.", tool.name))
}

/// The hints toolhost keeps, with MCP's own defaults where the server is silent: a tool is not
/// read-only unless it says so, and a tool that is not read-only may be destructive unless it says
/// it is not (the protocol's `destructiveHint` defaults to true).
pub fn annotations(hints: Option<&ToolAnnotations>) -> Annotations {
    let read_only = hints.and_then(|h| h.read_only_hint).unwrap_or(false);
    let destructive = !read_only && hints.and_then(|h| h.destructive_hint).unwrap_or(true);
    Annotations { read_only, destructive }
}

/// A signature read from an `inputSchema`: the required properties first, in the order of
/// `required`, then the optional ones in property order, each typed by [`param_type`]. Skipped
/// parameters arrive as void, so a handler can tell "left out" from `false`, `0` and `""`. A name in
/// `required` that has no property still becomes a required parameter of type `any`.
///
/// ```
/// use serde_json::json;
/// use toolhost::mcp::convert::signature;
/// let schema = json!({"type": "object",
///     "properties": {"b": {"type": "integer"}, "a": {"type": "string"}, "c": {"type": "boolean"}},
///     "required": ["a"]});
/// let sig = signature("srv.t", schema.as_object().unwrap());
/// assert_eq!(sig.render(), "(srv.t a [b] [c])");
/// ```
pub fn signature(name: &str, schema: &Map<String, Value>) -> Signature {
    let empty = Map::new();
    let properties = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    let mut required: Vec<&str> = Vec::new();
    for name in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        if !required.contains(&name) {
            required.push(name);
        }
    }
    let param = |name: &str, optional: bool| {
        let property = properties.get(name).unwrap_or(&Value::Null);
        Param {
            name: name.to_string(),
            ty: param_type(property),
            description: property_description(property),
            optional,
        }
    };
    let mut params: Vec<Param> = required.iter().map(|name| param(name, false)).collect();
    params.extend(properties.keys().filter(|name| !required.contains(&name.as_str())).map(|name| param(name, true)));
    Signature { name: name.to_string(), params, rest: None, skipped: Skipped::Void }
}

/// The parameter type of one property schema. A `type` toolhost has maps to it (a list of types
/// with null maps to the one other type); an `enum` of strings is a string; a schema with
/// `properties` is an object; everything else (unions, `$ref`, no constraint at all) is `any`, so
/// the value goes to the server as it came and the server judges it.
pub fn param_type(property: &Value) -> ParamType {
    let named = |t: &str| match t {
        "string" => Some(ParamType::String),
        "integer" => Some(ParamType::Integer),
        "number" => Some(ParamType::Number),
        "boolean" => Some(ParamType::Boolean),
        "array" => Some(ParamType::List),
        "object" => Some(ParamType::Object),
        _ => None,
    };
    match property.get("type") {
        Some(Value::String(t)) => named(t).unwrap_or(ParamType::Any),
        Some(Value::Array(types)) => {
            let mut others = types.iter().filter(|t| t.as_str() != Some("null"));
            match (others.next().and_then(Value::as_str).and_then(named), others.next()) {
                (Some(ty), None) => ty,
                _ => ParamType::Any,
            }
        }
        _ => {
            let strings_only = |values: &Vec<Value>| !values.is_empty() && values.iter().all(Value::is_string);
            if property.get("enum").and_then(Value::as_array).is_some_and(strings_only) {
                ParamType::String
            } else if property.get("properties").is_some_and(Value::is_object) {
                ParamType::Object
            } else {
                ParamType::Any
            }
        }
    }
}

/// A property's description for signatures and `:help`: its `description` (else its `title`), and
/// the values it may take when it is an enum.
fn property_description(property: &Value) -> String {
    let text = |key: &str| property.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
    let mut out = text("description").or_else(|| text("title")).unwrap_or_default().to_string();
    if let Some(values) = property.get("enum").and_then(Value::as_array) {
        let shown: Vec<String> = values.iter().map(Value::to_string).collect();
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&format!("(one of {})", shown.join(", ")));
    }
    out
}

/// The `arguments` object of a `tools/call`: each given value under its parameter's name, in
/// parameter order. Void is a parameter that was left out, so its key is left out too; `false`, `0`
/// and `""` are values and go as given. (A required `any` parameter given void is sent as null: it
/// was given.)
///
/// # Errors
/// A value that has no JSON form (a procedure, NaN), naming the parameter.
pub fn arguments(signature: &Signature, values: &[SteelVal]) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    for (index, given) in values.iter().enumerate() {
        let Some(param) = signature.param_at(index) else { break };
        if param.optional && matches!(given, SteelVal::Void) {
            continue;
        }
        let json = value::scheme_to_json(given).map_err(|e| {
            Error::tool_failed(format!("argument \"{}\" cannot be sent to the MCP server: {}", param.name, e.0))
                .with_parameter(&param.name)
        })?;
        out.insert(param.name.clone(), json);
    }
    Ok(out)
}

/// What a model reads of a `tools/call` result: every content block in order, text as itself and
/// every other kind described in a bracketed line (`[image: image/png, 1,234 bytes]`), so nothing
/// is dropped silently; with no content, the structured content as JSON text.
///
/// ```
/// use rmcp::model::{CallToolResult, ContentBlock};
/// use toolhost::mcp::convert::result_text;
/// let result = CallToolResult::success(vec![ContentBlock::text("hi"), ContentBlock::image("AAAA", "image/png")]);
/// assert_eq!(result_text(&result), "hi\n[image: image/png, 3 bytes]");
/// ```
pub fn result_text(result: &CallToolResult) -> String {
    if result.content.is_empty() {
        return match &result.structured_content {
            Some(structured) => structured.to_string(),
            None => String::new(),
        };
    }
    let parts: Vec<String> = result.content.iter().map(content_text).collect();
    parts.join("\n")
}

/// What a tool handler gives back for a `tools/call` result: Scheme code receives its structured
/// content as a value (a hash map, a list), while a model reads [`result_text`]; a result without
/// structured content is that text for both.
///
/// ```
/// use rmcp::model::CallToolResult;
/// use toolhost::mcp::convert::result_output;
/// let output = result_output(&CallToolResult::structured(serde_json::json!({"sum": 3})));
/// assert_eq!(toolhost::value::write_scheme(&output.value), "#hash((\"sum\" . 3))");
/// assert_eq!(output.text.as_deref(), Some("{\"sum\":3}"));
/// ```
pub fn result_output(result: &CallToolResult) -> crate::registry::ToolOutput {
    let text = result_text(result);
    let value = result.structured_content.as_ref().and_then(|v| value::json_to_scheme(v, ParamType::Any).ok());
    match value {
        Some(value) => crate::registry::ToolOutput { value, text: Some(text) },
        None => crate::registry::ToolOutput { value: SteelVal::StringV(text.into()), text: None },
    }
}

/// One content block as text.
pub fn content_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => {
            format!("[image: {}, {} bytes]", image.mime_type, thousands(base64_len(&image.data)))
        }
        ContentBlock::Audio(audio) => {
            format!("[audio: {}, {} bytes]", audio.mime_type, thousands(base64_len(&audio.data)))
        }
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => format!("[resource: {uri}]\n{text}"),
            ResourceContents::BlobResourceContents { uri, mime_type, blob, .. } => {
                let mime = mime_type.as_deref().map(|m| format!("{m}, ")).unwrap_or_default();
                format!("[resource: {uri}, {mime}{} bytes]", thousands(base64_len(blob)))
            }
            other => format!("[resource: {}]", serde_json::to_string(other).unwrap_or_default()),
        },
        ContentBlock::ResourceLink(link) => {
            let mut out = format!("[resource link: {}", link.uri);
            if link.name != link.uri && !link.name.is_empty() {
                out.push_str(&format!(" ({})", link.name));
            }
            if let Some(mime) = &link.mime_type {
                out.push_str(&format!(", {mime}"));
            }
            if let Some(description) = link.description.as_deref().filter(|d| !d.is_empty()) {
                out.push_str(&format!(": {description}"));
            }
            out.push(']');
            out
        }
        // Kinds added to the protocol later: described by their JSON, not dropped.
        other => format!("[content: {}]", serde_json::to_string(other).unwrap_or_default()),
    }
}

/// The number of bytes base64 text decodes to, without decoding it.
fn base64_len(data: &str) -> u64 {
    let digits = data.bytes().filter(|b| !b.is_ascii_whitespace()).count() as u64;
    let padding = data.bytes().rev().filter(|b| !b.is_ascii_whitespace()).take_while(|&b| b == b'=').count() as u64;
    (digits * 3 / 4).saturating_sub(padding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sig(schema: Value) -> Signature {
        signature("s.t", schema.as_object().unwrap())
    }

    #[test]
    fn required_come_first_in_required_order_then_optionals_in_property_order() {
        let s = sig(json!({"type": "object",
            "properties": {"o1": {"type": "string"}, "r2": {"type": "integer"}, "o2": {}, "r1": {"type": "boolean"}},
            "required": ["r1", "r2", "r1"]}));
        let names: Vec<(&str, bool)> = s.params.iter().map(|p| (p.name.as_str(), p.optional)).collect();
        assert_eq!(names, [("r1", false), ("r2", false), ("o1", true), ("o2", true)]);
        assert_eq!(s.skipped, Skipped::Void);
        s.validate().unwrap();
    }

    #[test]
    fn types_map_and_what_does_not_map_is_any_or_object() {
        let cases = [
            (json!({"type": "string"}), ParamType::String),
            (json!({"type": "integer", "minimum": 0}), ParamType::Integer),
            (json!({"type": "number"}), ParamType::Number),
            (json!({"type": "boolean"}), ParamType::Boolean),
            (json!({"type": "array", "items": {"type": "string"}}), ParamType::List),
            (json!({"type": "object", "properties": {"x": {}}}), ParamType::Object),
            (json!({"type": ["string", "null"]}), ParamType::String),
            (json!({"type": ["string", "integer"]}), ParamType::Any),
            (json!({"type": "tuple"}), ParamType::Any),
            (json!({"enum": ["a", "b"]}), ParamType::String),
            (json!({"enum": ["a", 1]}), ParamType::Any),
            (json!({"properties": {"x": {}}}), ParamType::Object),
            (json!({"anyOf": [{"type": "string"}, {"type": "integer"}]}), ParamType::Any),
            (json!({"$ref": "#/$defs/x"}), ParamType::Any),
            (json!({}), ParamType::Any),
        ];
        for (schema, want) in cases {
            assert_eq!(param_type(&schema), want, "{schema}");
        }
    }

    #[test]
    fn a_required_name_without_a_property_is_an_any_parameter_and_no_schema_means_no_parameters() {
        let s = sig(json!({"type": "object", "required": ["x"]}));
        assert_eq!(s.params, vec![Param::required("x", ParamType::Any, "")]);
        assert!(sig(json!({"type": "object"})).params.is_empty());
    }

    #[test]
    fn enum_values_are_named_in_the_description() {
        let s = sig(json!({"properties": {"mode": {"type": "string", "enum": ["a", "b"], "description": "How"}}}));
        assert_eq!(s.params[0].description, "How (one of \"a\", \"b\")");
    }

    #[test]
    fn void_is_left_out_and_false_zero_and_empty_are_sent() {
        let s = sig(
            json!({"properties": {"a": {"type": "boolean"}, "b": {"type": "integer"}, "c": {"type": "string"}, "d": {}}}),
        );
        let values = [SteelVal::BoolV(false), SteelVal::Void, SteelVal::StringV("".into()), SteelVal::IntV(0)];
        let args = arguments(&s, &values).unwrap();
        assert_eq!(Value::Object(args), json!({"a": false, "c": "", "d": 0}));
    }

    #[test]
    fn hints_keep_mcp_defaults() {
        assert_eq!(annotations(None), Annotations { read_only: false, destructive: true });
        let read_only = ToolAnnotations::new().read_only(true);
        assert_eq!(annotations(Some(&read_only)), Annotations { read_only: true, destructive: false });
        let additive = ToolAnnotations::new().destructive(false);
        assert_eq!(annotations(Some(&additive)), Annotations { read_only: false, destructive: false });
    }

    #[test]
    fn other_content_kinds_are_described_not_dropped() {
        let result = CallToolResult::success(vec![
            ContentBlock::text("one"),
            ContentBlock::audio("AAAAAA==", "audio/wav"),
            ContentBlock::embedded_text("file:///a.txt", "inside"),
            ContentBlock::resource(ResourceContents::BlobResourceContents {
                uri: "file:///b.bin".into(),
                mime_type: Some("application/octet-stream".into()),
                blob: "A".repeat(4000),
                meta: None,
            }),
        ]);
        assert_eq!(
            result_text(&result),
            "one\n[audio: audio/wav, 4 bytes]\n[resource: file:///a.txt]\ninside\n\
             [resource: file:///b.bin, application/octet-stream, 3,000 bytes]"
        );
        let mut structured = CallToolResult::structured(json!({"sum": 3}));
        structured.content.clear();
        assert_eq!(result_text(&structured), "{\"sum\":3}");
    }
}
