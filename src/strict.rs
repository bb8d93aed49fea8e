//! The strict-mode schema rewrite for OpenAI-compatible providers (design section 6): every object
//! schema closed, every property required (the optional ones widened to admit null), only the
//! keywords strict mode understands kept, and a [`Refusal`] with its reason for what cannot be
//! expressed. It owns no provider shape except the `strict` flag on an OpenAI tool; projecting tools
//! into provider shapes is `schema`'s job.
//!
//! ```
//! use serde_json::json;
//! use toolhost::strict::strict_schema;
//!
//! let schema = json!({
//!     "type": "object",
//!     "properties": {
//!         "path": {"type": "string", "description": "File"},
//!         "count": {"type": "integer", "minimum": 1, "default": 10},
//!     },
//!     "required": ["path"],
//! });
//! let strict = strict_schema(&schema).unwrap();
//! assert_eq!(strict, json!({
//!     "type": "object",
//!     "properties": {
//!         "path": {"type": "string", "description": "File"},
//!         "count": {"type": ["integer", "null"]},
//!     },
//!     "required": ["path", "count"],
//!     "additionalProperties": false,
//! }));
//!
//! // A free-form map cannot be closed without deleting its keys: refused, with the reason.
//! let map = json!({"type": "object", "properties": {"headers": {"type": "object", "additionalProperties": {"type": "string"}}}});
//! let refusal = strict_schema(&map).unwrap_err();
//! assert_eq!(refusal.pointer(), "/properties/headers");
//! ```

use serde_json::{json, Map, Value};

/// How deep the rewrite follows nested schemas before refusing. Schemas may come from MCP servers,
/// so nesting is bounded rather than trusted; real tool schemas stay far below this.
pub const MAX_DEPTH: usize = 64;

/// The JSON Schema type names; anything else in `type` is a schema strict mode would reject.
const TYPE_NAMES: [&str; 7] = ["string", "number", "integer", "boolean", "object", "array", "null"];

/// Why a schema cannot be sent strict: where in the schema, and what was found there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pointer: String,
    kind: RefusalKind,
}

/// What made a rewrite (strict, or [Gemini's](crate::gemini)) refuse a schema. Each variant says
/// when it happens.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefusalKind {
    /// The root is not a plain object schema: not a JSON object, a `type` other than `"object"`,
    /// or an `anyOf`/`oneOf` at the root, which strict mode does not take there.
    NonObjectRoot,
    /// A free-form map: `additionalProperties` that is a schema, `additionalProperties: true` with
    /// no declared properties, or `patternProperties`. Closing it would delete the keys it carries.
    FreeFormMap(&'static str),
    /// `{"type": "object"}` that declares no properties and does not say it is closed.
    BareObject,
    /// `allOf`, `not`, `if`, `then` or `else` (the keyword is given).
    Combinator(&'static str),
    /// `items` given as a list of schemas, or `prefixItems`.
    TupleItems,
    /// An array schema without `items`.
    ArrayWithoutItems,
    /// Nothing constrains the values (no `type`, `enum`, `$ref`, `anyOf` or `oneOf` once the
    /// unsupported keywords are gone), or the schema is `true`.
    Unconstrained,
    /// A `$ref` that does not point at a schema inside the rewritten schema.
    UnresolvedRef(String),
    /// A keyword whose value is not what JSON Schema allows there (the text says which).
    Malformed(String),
    /// Nesting deeper than [`MAX_DEPTH`] (for the Gemini rewrite, also a schema that inlining its
    /// references makes too large).
    TooDeep,
    /// A keyword or shape the provider's dialect has no equivalent for (the Gemini rewrite: see
    /// [`crate::gemini`]); the text names it.
    Unsupported(&'static str),
    /// A `$ref` met again while it is being inlined (the Gemini rewrite inlines references).
    RecursiveRef(String),
    /// A tool or property name the provider does not take (the text names it).
    Name(String),
}

impl Refusal {
    pub(crate) fn new(pointer: &str, kind: RefusalKind) -> Self {
        Refusal { pointer: pointer.to_string(), kind }
    }

    /// Where the refused part is, as a JSON Pointer into the schema (`""` for the root,
    /// `/properties/headers`).
    pub fn pointer(&self) -> &str {
        &self.pointer
    }

    /// What was refused.
    pub fn kind(&self) -> &RefusalKind {
        &self.kind
    }

    /// The reason in words, without the place: `a free-form map (additionalProperties is a schema)`.
    pub fn reason(&self) -> String {
        match &self.kind {
            RefusalKind::NonObjectRoot => {
                "the root is not a plain object schema (\"type\": \"object\", no anyOf)".into()
            }
            RefusalKind::FreeFormMap(why) => format!("a free-form map ({why})"),
            RefusalKind::BareObject => "an object with no declared properties".into(),
            RefusalKind::Combinator(keyword) => format!("\"{keyword}\" cannot be expressed in strict mode"),
            RefusalKind::TupleItems => "tuple items (a list of item schemas)".into(),
            RefusalKind::ArrayWithoutItems => "an array without \"items\"".into(),
            RefusalKind::Unconstrained => "nothing constrains the value (no type, enum, $ref or anyOf)".into(),
            RefusalKind::UnresolvedRef(target) => {
                format!("\"$ref\": \"{target}\" does not point at a schema inside this one")
            }
            RefusalKind::Malformed(what) => what.clone(),
            RefusalKind::TooDeep => format!("nested deeper than {MAX_DEPTH} levels, or too large once inlined"),
            RefusalKind::Unsupported(what) => format!("{what} has no equivalent in Gemini's schema dialect"),
            RefusalKind::RecursiveRef(target) => {
                format!("\"$ref\": \"{target}\" refers to itself, and Gemini takes no references")
            }
            RefusalKind::Name(what) => format!("{what} is not a name Gemini takes"),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.pointer.is_empty() {
            write!(f, "the schema: {}", self.reason())
        } else {
            write!(f, "{}: {}", self.pointer, self.reason())
        }
    }
}

impl std::error::Error for Refusal {}

/// Rewrites one tool's parameters schema for strict mode, or says why it cannot be.
///
/// Every object schema is closed (`additionalProperties: false`) and lists all its properties in
/// `required`; a property that was optional is widened to admit null (`["T","null"]`, null in its
/// `enum`, a `{"type":"null"}` branch in its `anyOf`, or `{"anyOf":[{"$ref":..},{"type":"null"}]}`).
/// Only `type`, `enum`, `description`, `title`, `$ref` and `$defs` are kept; `properties`, `items`,
/// `anyOf` and `$defs` are followed; `oneOf` becomes `anyOf`; every other keyword is dropped, which
/// only loosens the schema. The result is its own rewrite (`strict_schema(&out) == Ok(out)`), and
/// the input is never changed.
///
/// # Errors
/// A [`Refusal`] naming the place and the reason for each shape strict mode cannot express (see
/// [`RefusalKind`]). Such a tool is sent with `"strict": false` and its schema untouched.
///
/// ```
/// use serde_json::json;
/// use toolhost::strict::{strict_schema, RefusalKind};
/// let optional_enum = json!({"type": "object", "properties": {
///     "sort": {"type": "string", "enum": ["name", "size"]},
/// }});
/// let out = strict_schema(&optional_enum).unwrap();
/// assert_eq!(out["properties"]["sort"], json!({"type": ["string", "null"], "enum": ["name", "size", null]}));
///
/// let refusal = strict_schema(&json!({"type": "object"})).unwrap_err();
/// assert_eq!(refusal.kind(), &RefusalKind::BareObject);
/// ```
pub fn strict_schema(schema: &Value) -> Result<Value, Refusal> {
    let root_is_object = schema.as_object().is_some_and(|map| {
        map.get("type").and_then(Value::as_str) == Some("object")
            && !map.contains_key("anyOf")
            && !map.contains_key("oneOf")
    });
    if !root_is_object {
        return Err(Refusal::new("", RefusalKind::NonObjectRoot));
    }
    let out = rewrite(schema, "", 0)?;
    check_refs(&out, &out, "", 0)?;
    Ok(out)
}

/// Marks an OpenAI chat-completions tool (`{"type":"function","function":{..}}`) for strict mode:
/// `"strict": true` with its parameters rewritten by [`strict_schema`], or `"strict": false` with
/// its parameters untouched when they cannot be expressed (or are missing). A value without a
/// `function` object is returned as it is.
///
/// ```
/// use serde_json::json;
/// use toolhost::strict::strict_openai_tool;
/// let tool = json!({"type": "function", "function": {
///     "name": "fs-read", "description": "Read a file.",
///     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
/// }});
/// let out = strict_openai_tool(&tool);
/// assert_eq!(out["function"]["strict"], true);
/// assert_eq!(out["function"]["parameters"]["additionalProperties"], false);
///
/// let map = json!({"type": "function", "function": {"name": "put", "parameters": {"type": "object"}}});
/// let out = strict_openai_tool(&map);
/// assert_eq!(out["function"]["strict"], false);
/// assert_eq!(out["function"]["parameters"], json!({"type": "object"}));
/// ```
pub fn strict_openai_tool(tool: &Value) -> Value {
    let mut out = tool.clone();
    let Some(function) = out.get_mut("function").and_then(Value::as_object_mut) else {
        return out;
    };
    match function.get("parameters").map(strict_schema) {
        Some(Ok(parameters)) => {
            function.insert("parameters".into(), parameters);
            function.insert("strict".into(), Value::Bool(true));
        }
        Some(Err(_)) | None => {
            function.insert("strict".into(), Value::Bool(false));
        }
    }
    out
}

/// The names in a schema's `type`, in order; `None` when there is no `type`.
fn type_names(ty: Option<&Value>, at: &str) -> Result<Option<Vec<String>>, Refusal> {
    let malformed = || {
        Refusal::new(
            at,
            RefusalKind::Malformed("\"type\" must be a type name or a non-empty list of distinct type names".into()),
        )
    };
    let names: Vec<String> = match ty {
        None => return Ok(None),
        Some(Value::String(name)) => vec![name.clone()],
        Some(Value::Array(items)) if !items.is_empty() => items
            .iter()
            .map(|item| item.as_str().map(str::to_string).ok_or_else(malformed))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(malformed()),
    };
    let known = names.iter().all(|n| TYPE_NAMES.contains(&n.as_str()));
    let distinct = names.iter().enumerate().all(|(i, n)| !names[..i].contains(n));
    if known && distinct {
        Ok(Some(names))
    } else {
        Err(malformed())
    }
}

/// A JSON Pointer segment for a property or `$defs` name (RFC 6901 escaping).
fn segment(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// Rewrites one schema position. `at` is its JSON Pointer in the input, for refusals.
fn rewrite(schema: &Value, at: &str, depth: usize) -> Result<Value, Refusal> {
    let refuse = |kind| Err(Refusal::new(at, kind));
    if depth > MAX_DEPTH {
        return refuse(RefusalKind::TooDeep);
    }
    let map = match schema {
        Value::Object(map) => map,
        Value::Bool(true) => return refuse(RefusalKind::Unconstrained),
        Value::Bool(false) => return refuse(RefusalKind::Malformed("the schema false admits no value".into())),
        _ => return refuse(RefusalKind::Malformed("a schema must be an object".into())),
    };
    for keyword in ["allOf", "not", "if", "then", "else"] {
        if map.contains_key(keyword) {
            return refuse(RefusalKind::Combinator(keyword));
        }
    }
    if map.contains_key("prefixItems") || map.get("items").is_some_and(Value::is_array) {
        return refuse(RefusalKind::TupleItems);
    }
    if map.contains_key("anyOf") && map.contains_key("oneOf") {
        return refuse(RefusalKind::Malformed(
            "both \"anyOf\" and \"oneOf\": they cannot be merged into one \"anyOf\"".into(),
        ));
    }
    let types = type_names(map.get("type"), at)?;
    let has_type = |name: &str| types.as_ref().is_some_and(|t| t.iter().any(|n| n == name));
    let is_object = has_type("object");
    let is_array = has_type("array");
    if types.is_none() && ["properties", "required", "additionalProperties"].iter().any(|k| map.contains_key(*k)) {
        return refuse(RefusalKind::Malformed(
            "object keywords (properties, required, additionalProperties) without \"type\": \"object\"".into(),
        ));
    }
    if is_array && !map.contains_key("items") {
        return refuse(RefusalKind::ArrayWithoutItems);
    }

    let mut out = Map::new();
    for (key, value) in map {
        match key.as_str() {
            "type" => {
                out.insert(key.clone(), value.clone());
            }
            "enum" => match value {
                Value::Array(items) if !items.is_empty() => {
                    out.insert(key.clone(), value.clone());
                }
                _ => return refuse(RefusalKind::Malformed("\"enum\" must be a non-empty list".into())),
            },
            // Strict mode documents these as strings; anything else is dropped, which loses no
            // constraint.
            "description" | "title" if value.is_string() => {
                out.insert(key.clone(), value.clone());
            }
            "$ref" => match value {
                Value::String(_) => {
                    out.insert(key.clone(), value.clone());
                }
                _ => return refuse(RefusalKind::Malformed("\"$ref\" must be a string".into())),
            },
            "$defs" => {
                let Value::Object(defs) = value else {
                    return refuse(RefusalKind::Malformed("\"$defs\" must be an object of schemas".into()));
                };
                let mut rewritten = Map::new();
                for (name, def) in defs {
                    let def_at = format!("{at}/$defs/{}", segment(name));
                    rewritten.insert(name.clone(), rewrite(def, &def_at, depth + 1)?);
                }
                out.insert(key.clone(), Value::Object(rewritten));
            }
            "items" if is_array => {
                out.insert(key.clone(), rewrite(value, &format!("{at}/items"), depth + 1)?);
            }
            "anyOf" | "oneOf" => {
                let branches = match value {
                    Value::Array(branches) if !branches.is_empty() => branches,
                    _ => {
                        return refuse(RefusalKind::Malformed(format!("\"{key}\" must be a non-empty list of schemas")))
                    }
                };
                let rewritten = branches
                    .iter()
                    .enumerate()
                    .map(|(i, branch)| rewrite(branch, &format!("{at}/{key}/{i}"), depth + 1))
                    .collect::<Result<Vec<_>, _>>()?;
                // A constrained decoder treats the two alike, and anyOf is the spelling strict
                // mode documents.
                out.insert("anyOf".into(), Value::Array(rewritten));
            }
            // Placeholder, so the rewritten properties keep the place they had.
            "properties" if is_object => {
                out.insert(key.clone(), Value::Null);
            }
            _ => {}
        }
    }
    if is_object {
        close_object(map, &mut out, at, depth)?;
    }
    if !["type", "enum", "$ref", "anyOf"].iter().any(|k| out.contains_key(*k)) {
        return refuse(RefusalKind::Unconstrained);
    }
    Ok(Value::Object(out))
}

/// The object part of the rewrite: refuse free-form maps, rewrite each property (widening the
/// optional ones), then list every property as required and close the object.
fn close_object(map: &Map<String, Value>, out: &mut Map<String, Value>, at: &str, depth: usize) -> Result<(), Refusal> {
    let refuse = |kind| Err(Refusal::new(at, kind));
    let declared = match map.get("properties") {
        None => None,
        Some(Value::Object(props)) => Some(props),
        Some(_) => return refuse(RefusalKind::Malformed("\"properties\" must be an object of schemas".into())),
    };
    let has_properties = declared.is_some_and(|p| !p.is_empty());
    match map.get("additionalProperties") {
        None | Some(Value::Bool(false)) => {}
        // Closing a declared set of properties loses nothing a caller was entitled to send.
        Some(Value::Bool(true)) if has_properties => {}
        Some(Value::Bool(true)) => {
            return refuse(RefusalKind::FreeFormMap("additionalProperties is true and no properties are declared"))
        }
        Some(Value::Object(_)) => return refuse(RefusalKind::FreeFormMap("additionalProperties is a schema")),
        Some(_) => {
            return refuse(RefusalKind::Malformed("\"additionalProperties\" must be a boolean or a schema".into()))
        }
    }
    if map.get("patternProperties").is_some_and(|p| p.as_object().is_none_or(|p| !p.is_empty())) {
        return refuse(RefusalKind::FreeFormMap("patternProperties admits keys by pattern"));
    }
    // `{"type":"object","additionalProperties":false}` says "no arguments" on purpose; only an
    // object that says nothing about its keys is bare.
    if declared.is_none() && map.get("additionalProperties") != Some(&Value::Bool(false)) {
        return refuse(RefusalKind::BareObject);
    }
    let required: Vec<&str> = match map.get("required") {
        None => Vec::new(),
        Some(Value::Array(names)) => names.iter().map(|n| n.as_str()).collect::<Option<_>>().ok_or_else(|| {
            Refusal::new(at, RefusalKind::Malformed("\"required\" must be a list of property names".into()))
        })?,
        Some(_) => return refuse(RefusalKind::Malformed("\"required\" must be a list of property names".into())),
    };
    let mut properties = Map::new();
    for (name, schema) in declared.into_iter().flatten() {
        let property = rewrite(schema, &format!("{at}/properties/{}", segment(name)), depth + 1)?;
        let property = if required.contains(&name.as_str()) { property } else { widen(property, 0) };
        properties.insert(name.clone(), property);
    }
    // Required names without a property are dropped: strict mode wants required to be exactly
    // the property names.
    let names: Vec<Value> = properties.keys().map(|k| Value::String(k.clone())).collect();
    out.insert("properties".into(), Value::Object(properties));
    out.insert("required".into(), Value::Array(names));
    out.insert("additionalProperties".into(), Value::Bool(false));
    Ok(())
}

/// Whether an already rewritten schema admits null: every constraint it carries must.
fn admits_null(schema: &Value, depth: usize) -> bool {
    let Value::Object(map) = schema else { return false };
    if depth > MAX_DEPTH || map.contains_key("$ref") {
        // What a reference admits is not looked up; wrapping it once more is harmless.
        return false;
    }
    let by_type = match map.get("type") {
        None => true,
        Some(Value::String(name)) => name == "null",
        Some(Value::Array(names)) => names.iter().any(|n| n == "null"),
        Some(_) => false,
    };
    let by_enum = map.get("enum").is_none_or(|e| e.as_array().is_some_and(|e| e.contains(&Value::Null)));
    let by_any_of = map
        .get("anyOf")
        .is_none_or(|b| b.as_array().is_some_and(|b| b.iter().any(|branch| admits_null(branch, depth + 1))));
    by_type && by_enum && by_any_of
}

/// Widens an optional property's rewritten schema to admit null as well, changing as little as
/// possible: null joins the type, the enum and the anyOf it already has; a `$ref` (which cannot be
/// widened in place) is wrapped in an anyOf with a null branch.
fn widen(schema: Value, depth: usize) -> Value {
    if admits_null(&schema, depth) {
        return schema;
    }
    let Value::Object(mut map) = schema else { return schema };
    if map.contains_key("$ref") {
        let mut outer = Map::new();
        for key in ["description", "title"] {
            if let Some(value) = map.remove(key) {
                outer.insert(key.into(), value);
            }
        }
        outer.insert("anyOf".into(), json!([Value::Object(map), {"type": "null"}]));
        return Value::Object(outer);
    }
    if let Some(ty) = map.get_mut("type") {
        match ty {
            Value::String(name) if name != "null" => *ty = json!([name.clone(), "null"]),
            Value::Array(names) if !names.iter().any(|n| n == "null") => names.push(json!("null")),
            _ => {}
        }
    }
    if let Some(Value::Array(members)) = map.get_mut("enum") {
        if !members.contains(&Value::Null) {
            members.push(Value::Null);
        }
    }
    if let Some(Value::Array(branches)) = map.get_mut("anyOf") {
        if !branches.iter().any(|b| admits_null(b, depth + 1)) {
            branches.push(json!({"type": "null"}));
        }
    }
    Value::Object(map)
}

/// Refuses a `$ref` in the rewritten schema that does not resolve to a schema inside it, so a
/// dropped `definitions` or a remote reference never reaches a provider.
fn check_refs(root: &Value, schema: &Value, at: &str, depth: usize) -> Result<(), Refusal> {
    let Value::Object(map) = schema else { return Ok(()) };
    if depth > 2 * MAX_DEPTH + 2 {
        // Widening adds at most one level per property level, so a rewritten schema never gets
        // here; the bound only keeps this walk finite on its own terms.
        return Err(Refusal::new(at, RefusalKind::TooDeep));
    }
    if let Some(Value::String(target)) = map.get("$ref") {
        let resolves = match target.strip_prefix('#') {
            Some("") => true,
            Some(pointer) if pointer.starts_with('/') => root.pointer(pointer).is_some_and(Value::is_object),
            _ => false,
        };
        if !resolves {
            return Err(Refusal::new(at, RefusalKind::UnresolvedRef(target.clone())));
        }
    }
    for key in ["properties", "$defs"] {
        if let Some(Value::Object(children)) = map.get(key) {
            for (name, child) in children {
                check_refs(root, child, &format!("{at}/{key}/{}", segment(name)), depth + 1)?;
            }
        }
    }
    if let Some(items) = map.get("items") {
        check_refs(root, items, &format!("{at}/items"), depth + 1)?;
    }
    if let Some(Value::Array(branches)) = map.get("anyOf") {
        for (i, branch) in branches.iter().enumerate() {
            check_refs(root, branch, &format!("{at}/anyOf/{i}"), depth + 1)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rewrites `input`, checking the two promises every case shares: the input is left as it was,
    /// and rewriting the output again gives the output.
    fn strict(input: &Value) -> Result<Value, Refusal> {
        let before = input.clone();
        let result = strict_schema(input);
        assert_eq!(input, &before, "the rewrite changed its input");
        if let Ok(out) = &result {
            let again = strict_schema(out).unwrap_or_else(|r| panic!("its own output was refused: {r}"));
            assert_eq!(again.to_string(), out.to_string(), "not idempotent");
        }
        result
    }

    fn object(properties: Value, required: &[&str]) -> Value {
        json!({"type": "object", "properties": properties, "required": required})
    }

    #[test]
    fn each_rewrite_rule() {
        let cases: Vec<(&str, Value, Value)> = vec![
            (
                "a required property keeps its type and the object is closed",
                object(json!({"a": {"type": "string", "description": "A"}}), &["a"]),
                json!({"type": "object", "properties": {"a": {"type": "string", "description": "A"}},
                       "required": ["a"], "additionalProperties": false}),
            ),
            (
                "an optional property becomes required and admits null",
                object(json!({"a": {"type": "string"}, "b": {"type": "integer"}}), &["a"]),
                json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": ["integer", "null"]}},
                       "required": ["a", "b"], "additionalProperties": false}),
            ),
            (
                "an optional enum gets null in its type and its members",
                object(json!({"s": {"type": "string", "enum": ["a", "b"]}}), &[]),
                json!({"type": "object", "properties": {"s": {"type": ["string", "null"], "enum": ["a", "b", null]}},
                       "required": ["s"], "additionalProperties": false}),
            ),
            (
                "an optional enum without a type gets null in its members",
                object(json!({"s": {"enum": ["a", 1]}}), &[]),
                json!({"type": "object", "properties": {"s": {"enum": ["a", 1, null]}},
                       "required": ["s"], "additionalProperties": false}),
            ),
            (
                "an optional anyOf gains a null branch",
                object(json!({"v": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}), &[]),
                json!({"type": "object",
                       "properties": {"v": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}},
                       "required": ["v"], "additionalProperties": false}),
            ),
            (
                "an optional anyOf that admits null already is left as it is",
                object(json!({"v": {"anyOf": [{"type": "string"}, {"type": "null"}]}}), &[]),
                json!({"type": "object", "properties": {"v": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
                       "required": ["v"], "additionalProperties": false}),
            ),
            (
                "an optional type that admits null already is left as it is",
                object(json!({"v": {"type": ["string", "null"]}, "w": {"type": "null"}}), &[]),
                json!({"type": "object", "properties": {"v": {"type": ["string", "null"]}, "w": {"type": "null"}},
                       "required": ["v", "w"], "additionalProperties": false}),
            ),
            (
                "a type list gains null at its end",
                object(json!({"v": {"type": ["string", "integer"]}}), &[]),
                json!({"type": "object", "properties": {"v": {"type": ["string", "integer", "null"]}},
                       "required": ["v"], "additionalProperties": false}),
            ),
            (
                "a nullable type with an enum lacking null gets null in the enum only",
                object(json!({"v": {"type": ["string", "null"], "enum": ["a"]}}), &[]),
                json!({"type": "object", "properties": {"v": {"type": ["string", "null"], "enum": ["a", null]}},
                       "required": ["v"], "additionalProperties": false}),
            ),
            (
                "an optional $ref is wrapped in an anyOf with a null branch, its description outside",
                json!({"type": "object",
                       "properties": {"p": {"$ref": "#/$defs/point", "description": "Where"}},
                       "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}}}),
                json!({"type": "object",
                       "properties": {"p": {"description": "Where", "anyOf": [{"$ref": "#/$defs/point"}, {"type": "null"}]}},
                       "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}},
                                           "required": ["x"], "additionalProperties": false}},
                       "required": ["p"], "additionalProperties": false}),
            ),
            (
                "a required $ref is left as it is; $defs are rewritten, their optionals widened",
                json!({"type": "object", "properties": {"p": {"$ref": "#/$defs/point"}}, "required": ["p"],
                       "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}, "label": {"type": "string"}},
                                           "required": ["x"], "minProperties": 1}}}),
                json!({"type": "object", "properties": {"p": {"$ref": "#/$defs/point"}},
                       "$defs": {"point": {"type": "object",
                                           "properties": {"x": {"type": "number"}, "label": {"type": ["string", "null"]}},
                                           "required": ["x", "label"], "additionalProperties": false}},
                       "required": ["p"], "additionalProperties": false}),
            ),
            (
                "a reference to the root is kept",
                json!({"type": "object", "properties": {"child": {"$ref": "#"}}, "required": ["child"]}),
                json!({"type": "object", "properties": {"child": {"$ref": "#"}},
                       "required": ["child"], "additionalProperties": false}),
            ),
            (
                "nested objects: each object's own optional properties are widened",
                object(
                    json!({
                        "outer": {"type": "object", "required": ["inner"], "properties": {
                            "inner": {"type": "object", "properties": {
                                "deep": {"type": "string"}, "kept": {"type": "boolean"}}, "required": ["kept"]},
                            "note": {"type": "string"}}},
                        "maybe": {"type": "object", "properties": {"n": {"type": "integer"}}}}),
                    &["outer"],
                ),
                json!({"type": "object", "properties": {
                    "outer": {"type": "object", "properties": {
                        "inner": {"type": "object", "properties": {
                            "deep": {"type": ["string", "null"]}, "kept": {"type": "boolean"}},
                            "required": ["deep", "kept"], "additionalProperties": false},
                        "note": {"type": ["string", "null"]}},
                        "required": ["inner", "note"], "additionalProperties": false},
                    "maybe": {"type": ["object", "null"], "properties": {"n": {"type": ["integer", "null"]}},
                              "required": ["n"], "additionalProperties": false}},
                    "required": ["outer", "maybe"], "additionalProperties": false}),
            ),
            (
                "arrays of objects: the item object is closed and its optionals widened",
                object(
                    json!({"edits": {"type": "array", "minItems": 1, "items": {"type": "object",
                        "properties": {"old": {"type": "string"}, "all": {"type": "boolean", "default": false}},
                        "required": ["old"]}}}),
                    &["edits"],
                ),
                json!({"type": "object", "properties": {"edits": {"type": "array", "items": {"type": "object",
                        "properties": {"old": {"type": "string"}, "all": {"type": ["boolean", "null"]}},
                        "required": ["old", "all"], "additionalProperties": false}}},
                       "required": ["edits"], "additionalProperties": false}),
            ),
            (
                "every keyword outside the allowlist is dropped",
                json!({"$schema": "http://json-schema.org/draft-07/schema#", "$id": "x", "type": "object",
                       "title": "Args", "description": "All of them", "minProperties": 1, "examples": [{}],
                       "properties": {
                    "s": {"type": "string", "minLength": 1, "maxLength": 9, "pattern": "^a", "format": "uri",
                          "default": "a", "examples": ["a"], "const": "a", "contentEncoding": "base64",
                          "deprecated": true, "readOnly": true, "x-custom": 1},
                    "n": {"type": "number", "minimum": 1, "maximum": 9, "exclusiveMinimum": 0,
                          "exclusiveMaximum": 10, "multipleOf": 1},
                    "l": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3,
                          "uniqueItems": true, "contains": {"type": "string"}}},
                       "required": ["s", "n", "l"], "dependentRequired": {"s": ["n"]}}),
                json!({"type": "object", "title": "Args", "description": "All of them", "properties": {
                    "s": {"type": "string"},
                    "n": {"type": "number"},
                    "l": {"type": "array", "items": {"type": "string"}}},
                       "required": ["s", "n", "l"], "additionalProperties": false}),
            ),
            (
                "oneOf is renamed anyOf, in its place",
                object(
                    json!({"v": {"description": "V", "oneOf": [{"type": "string"}, {"type": "integer"}], "title": "T"}}),
                    &["v"],
                ),
                json!({"type": "object",
                       "properties": {"v": {"description": "V", "anyOf": [{"type": "string"}, {"type": "integer"}], "title": "T"}},
                       "required": ["v"], "additionalProperties": false}),
            ),
            (
                "a zero-argument tool is a closed empty object",
                json!({"type": "object", "properties": {}}),
                json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false}),
            ),
            (
                "an object that says it is closed and has no properties stays closed",
                json!({"type": "object", "additionalProperties": false}),
                json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false}),
            ),
            (
                "declared properties with additionalProperties true are closed",
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
                       "additionalProperties": true}),
                json!({"type": "object", "properties": {"a": {"type": "string"}},
                       "required": ["a"], "additionalProperties": false}),
            ),
            (
                "required names without a property are dropped",
                object(json!({"a": {"type": "string"}}), &["ghost", "a"]),
                json!({"type": "object", "properties": {"a": {"type": "string"}},
                       "required": ["a"], "additionalProperties": false}),
            ),
            (
                "properties stay in declared order, not alphabetical",
                object(
                    json!({"zeta": {"type": "string"}, "alpha": {"type": "string"}, "mid": {"type": "string"}}),
                    &["mid"],
                ),
                json!({"type": "object",
                       "properties": {"zeta": {"type": ["string", "null"]}, "alpha": {"type": ["string", "null"]}, "mid": {"type": "string"}},
                       "required": ["zeta", "alpha", "mid"], "additionalProperties": false}),
            ),
            (
                "properties named like keywords are arguments, not keywords, and are kept",
                object(
                    json!({"default": {"type": "string"}, "type": {"type": "string"}, "format": {"enum": ["a"]}}),
                    &["type"],
                ),
                json!({"type": "object", "properties": {
                    "default": {"type": ["string", "null"]}, "type": {"type": "string"}, "format": {"enum": ["a", null]}},
                       "required": ["default", "type", "format"], "additionalProperties": false}),
            ),
            (
                "a description that is not a string is dropped",
                object(json!({"a": {"type": "string", "description": 3, "title": ["x"]}}), &["a"]),
                json!({"type": "object", "properties": {"a": {"type": "string"}},
                       "required": ["a"], "additionalProperties": false}),
            ),
            (
                "items are dropped from a schema that is not an array",
                object(json!({"a": {"type": "string", "items": {"type": "string"}}}), &["a"]),
                json!({"type": "object", "properties": {"a": {"type": "string"}},
                       "required": ["a"], "additionalProperties": false}),
            ),
        ];
        for (name, input, expected) in cases {
            let out = strict(&input).unwrap_or_else(|r| panic!("{name}: refused: {r}"));
            assert_eq!(out.to_string(), expected.to_string(), "{name}");
        }
    }

    #[test]
    fn each_refusal_shape() {
        use RefusalKind::*;
        let free_schema = FreeFormMap("additionalProperties is a schema");
        let free_true = FreeFormMap("additionalProperties is true and no properties are declared");
        let cases: Vec<(&str, Value, &str, RefusalKind)> = vec![
            (
                "a map of strings",
                object(json!({"headers": {"type": "object", "additionalProperties": {"type": "string"}}}), &[]),
                "/properties/headers",
                free_schema.clone(),
            ),
            (
                "an empty-schema map",
                object(json!({"m": {"type": "object", "additionalProperties": {}}}), &[]),
                "/properties/m",
                free_schema.clone(),
            ),
            (
                "a map at the root",
                json!({"type": "object", "additionalProperties": {"type": "string"}}),
                "",
                free_schema,
            ),
            (
                "an open root without properties",
                json!({"type": "object", "properties": {}, "additionalProperties": true}),
                "",
                free_true.clone(),
            ),
            (
                "an open object without properties",
                object(json!({"m": {"type": "object", "additionalProperties": true}}), &["m"]),
                "/properties/m",
                free_true,
            ),
            (
                "keys by pattern",
                object(
                    json!({"m": {"type": "object", "properties": {"a": {"type": "string"}}, "patternProperties": {"^x": {"type": "string"}}}}),
                    &[],
                ),
                "/properties/m",
                FreeFormMap("patternProperties admits keys by pattern"),
            ),
            (
                "a bare object",
                object(json!({"body": {"type": "object", "description": "Anything"}}), &[]),
                "/properties/body",
                BareObject,
            ),
            ("a bare object root", json!({"type": "object"}), "", BareObject),
            (
                "a bare object in an anyOf",
                object(json!({"body": {"anyOf": [{"type": "string"}, {"type": "object"}]}}), &[]),
                "/properties/body/anyOf/1",
                BareObject,
            ),
            ("allOf", object(json!({"a": {"allOf": [{"type": "string"}]}}), &[]), "/properties/a", Combinator("allOf")),
            (
                "not",
                object(json!({"a": {"type": "string", "not": {"enum": ["x"]}}}), &[]),
                "/properties/a",
                Combinator("not"),
            ),
            ("if", json!({"type": "object", "properties": {}, "if": {"required": ["a"]}}), "", Combinator("if")),
            ("then", object(json!({"a": {"type": "string", "then": {}}}), &[]), "/properties/a", Combinator("then")),
            ("else", object(json!({"a": {"type": "string", "else": {}}}), &[]), "/properties/a", Combinator("else")),
            (
                "tuple items",
                object(json!({"pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}}), &[]),
                "/properties/pair",
                TupleItems,
            ),
            (
                "prefixItems",
                object(
                    json!({"pair": {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "string"}}}),
                    &[],
                ),
                "/properties/pair",
                TupleItems,
            ),
            (
                "an array without items",
                object(json!({"tags": {"type": "array"}}), &["tags"]),
                "/properties/tags",
                ArrayWithoutItems,
            ),
            (
                "an array of anything",
                object(json!({"tags": {"type": "array", "items": {}}}), &["tags"]),
                "/properties/tags/items",
                Unconstrained,
            ),
            (
                "an array of true",
                object(json!({"tags": {"type": "array", "items": true}}), &["tags"]),
                "/properties/tags/items",
                Unconstrained,
            ),
            ("an array root", json!({"type": "array", "items": {"type": "string"}}), "", NonObjectRoot),
            ("a nullable root", json!({"type": ["object", "null"], "properties": {}}), "", NonObjectRoot),
            ("a root typed as a one-name list", json!({"type": ["object"], "properties": {}}), "", NonObjectRoot),
            ("a root without a type", json!({"properties": {"a": {"type": "string"}}}), "", NonObjectRoot),
            ("a root that is not an object", json!("object"), "", NonObjectRoot),
            ("a root that is true", json!(true), "", NonObjectRoot),
            (
                "an anyOf at the root",
                json!({"type": "object", "properties": {}, "anyOf": [{"type": "object", "properties": {}}]}),
                "",
                NonObjectRoot,
            ),
            (
                "a oneOf at the root",
                json!({"type": "object", "properties": {}, "oneOf": [{"type": "object", "properties": {}}]}),
                "",
                NonObjectRoot,
            ),
            (
                "a property with only a description",
                object(json!({"x": {"description": "Anything"}}), &["x"]),
                "/properties/x",
                Unconstrained,
            ),
            ("an empty property schema", object(json!({"x": {}}), &[]), "/properties/x", Unconstrained),
            (
                "a property that is only a const",
                object(json!({"x": {"const": "a", "default": "a"}}), &[]),
                "/properties/x",
                Unconstrained,
            ),
            (
                "a $ref into draft-07 definitions, which are dropped",
                json!({"type": "object", "properties": {"p": {"$ref": "#/definitions/p"}}, "required": ["p"], "definitions": {"p": {"type": "string"}}}),
                "/properties/p",
                UnresolvedRef("#/definitions/p".into()),
            ),
            (
                "a remote $ref",
                object(json!({"p": {"$ref": "https://example.com/p.json"}}), &["p"]),
                "/properties/p",
                UnresolvedRef("https://example.com/p.json".into()),
            ),
            (
                "a $ref to a missing $defs entry",
                object(json!({"p": {"$ref": "#/$defs/q"}}), &["p"]),
                "/properties/p",
                UnresolvedRef("#/$defs/q".into()),
            ),
            (
                "a free-form map inside $defs",
                json!({"type": "object", "properties": {}, "$defs": {"m": {"type": "object", "additionalProperties": {"type": "string"}}}}),
                "/$defs/m",
                FreeFormMap("additionalProperties is a schema"),
            ),
            (
                "both anyOf and oneOf",
                object(json!({"v": {"anyOf": [{"type": "string"}], "oneOf": [{"type": "integer"}]}}), &[]),
                "/properties/v",
                Malformed("both \"anyOf\" and \"oneOf\": they cannot be merged into one \"anyOf\"".into()),
            ),
            (
                "an unknown type name",
                object(json!({"v": {"type": "str"}}), &[]),
                "/properties/v",
                Malformed("\"type\" must be a type name or a non-empty list of distinct type names".into()),
            ),
            (
                "an empty enum",
                object(json!({"v": {"type": "string", "enum": []}}), &[]),
                "/properties/v",
                Malformed("\"enum\" must be a non-empty list".into()),
            ),
            (
                "required that is not a list",
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": "a"}),
                "",
                Malformed("\"required\" must be a list of property names".into()),
            ),
            (
                "the false schema",
                object(json!({"never": false}), &[]),
                "/properties/never",
                Malformed("the schema false admits no value".into()),
            ),
            (
                "object keywords without an object type",
                object(json!({"v": {"properties": {"a": {"type": "string"}}}}), &[]),
                "/properties/v",
                Malformed(
                    "object keywords (properties, required, additionalProperties) without \"type\": \"object\"".into(),
                ),
            ),
            (
                "a property name needing pointer escapes",
                object(json!({"a/b~c": {"type": "array"}}), &[]),
                "/properties/a~1b~0c",
                ArrayWithoutItems,
            ),
        ];
        for (name, input, pointer, kind) in cases {
            let refusal = strict(&input).err().unwrap_or_else(|| panic!("{name}: not refused"));
            assert_eq!((refusal.pointer(), refusal.kind()), (pointer, &kind), "{name}: {refusal}");
            assert!(!refusal.to_string().is_empty());
        }
    }

    #[test]
    fn deep_nesting_is_refused_not_followed() {
        // Deep enough to overflow the stack were it followed without a bound.
        let mut schema = json!({"type": "string"});
        for _ in 0..100 {
            schema = json!({"type": "object", "properties": {"n": schema}, "required": ["n"]});
        }
        let refusal = strict(&schema).unwrap_err();
        assert_eq!(refusal.kind(), &RefusalKind::TooDeep);
        assert!(refusal.pointer().starts_with("/properties/n/properties/n"), "{refusal}");

        let mut items = json!({"type": "string"});
        for _ in 0..(MAX_DEPTH + 1) {
            items = json!({"anyOf": [{"type": "array", "items": items}]});
        }
        let refusal = strict(&object(json!({"x": items}), &[])).unwrap_err();
        assert_eq!(refusal.kind(), &RefusalKind::TooDeep);
    }

    #[test]
    fn nesting_up_to_the_bound_is_rewritten() {
        let mut schema = json!({"type": "string"});
        // The root is level 0 and each object adds one level for its property.
        for _ in 0..MAX_DEPTH {
            schema = json!({"type": "object", "properties": {"n": schema}});
        }
        let out = strict(&schema).unwrap();
        let mut leaf = &out;
        for _ in 0..MAX_DEPTH {
            leaf = &leaf["properties"]["n"];
        }
        assert_eq!(leaf, &json!({"type": ["string", "null"]}));
    }

    #[test]
    fn openai_tool_is_marked_strict_or_sent_untouched() {
        let tool = |parameters: Value| json!({"type": "function", "function": {"name": "t", "description": "T", "parameters": parameters}});
        let ok = tool(object(json!({"a": {"type": "string", "default": "x"}}), &[]));
        let out = strict_openai_tool(&ok);
        assert_eq!(out["function"]["strict"], true);
        assert_eq!(out["function"]["parameters"], strict_schema(&ok["function"]["parameters"]).unwrap());
        assert_eq!(strict_openai_tool(&out), out, "marking twice changes nothing");

        let map = tool(object(json!({"headers": {"type": "object", "additionalProperties": {"type": "string"}}}), &[]));
        let out = strict_openai_tool(&map);
        assert_eq!(out["function"]["strict"], false);
        assert_eq!(out["function"]["parameters"], map["function"]["parameters"], "a refused schema is sent untouched");

        let no_parameters = json!({"type": "function", "function": {"name": "t"}});
        assert_eq!(strict_openai_tool(&no_parameters)["function"]["strict"], false);
        let not_a_tool = json!({"name": "t"});
        assert_eq!(strict_openai_tool(&not_a_tool), not_a_tool);
    }

    mod generated {
        use super::*;
        use proptest::prelude::*;

        fn leaf() -> impl Strategy<Value = Value> {
            let expressible = prop_oneof![
                prop::sample::select(vec!["string", "integer", "number", "boolean", "null"])
                    .prop_map(|t| json!({"type": t})),
                Just(json!({"type": ["string", "null"]})),
                Just(json!({"type": ["integer", "string"], "minimum": 0})),
                Just(json!({"type": "string", "enum": ["a", "b"], "default": "a"})),
                Just(json!({"enum": [1, null]})),
                Just(json!({"$ref": "#/$defs/d"})),
                Just(json!({"$ref": "#"})),
                Just(json!({"type": "object", "additionalProperties": false})),
            ];
            // Each of these is refused; rarer, so that most generated schemas are rewritten.
            let refused = prop_oneof![
                Just(json!({"$ref": "#/definitions/gone"})),
                Just(json!({"description": "only words"})),
                Just(json!({"const": 3})),
                Just(json!({"type": "array"})),
                Just(json!({"type": "object"})),
                Just(json!(true)),
                Just(json!(false)),
                Just(json!({"type": "nonsense"})),
            ];
            prop_oneof![30 => expressible, 1 => refused]
        }

        fn schema() -> impl Strategy<Value = Value> {
            leaf().prop_recursive(6, 48, 4, |inner| {
                let names = prop::sample::select(vec!["a", "b", "c", "type", "default"]);
                prop_oneof![
                    6 => (
                        prop::collection::vec((names.clone(), inner.clone()), 0..4),
                        prop::collection::vec(prop::sample::select(vec!["a", "b", "ghost"]), 0..3),
                        prop::sample::select(vec![0u8, 0, 0, 1, 2, 2, 3]),
                        inner.clone(),
                    )
                        .prop_map(|(props, required, extra, extra_schema)| {
                            let mut map = Map::new();
                            map.insert("type".into(), json!("object"));
                            map.insert(
                                "properties".into(),
                                Value::Object(props.into_iter().map(|(k, v)| (k.to_string(), v)).collect()),
                            );
                            map.insert("required".into(), json!(required));
                            match extra {
                                1 => drop(map.insert("additionalProperties".into(), json!(true))),
                                2 => drop(map.insert("additionalProperties".into(), json!(false))),
                                3 => drop(map.insert("additionalProperties".into(), extra_schema)),
                                _ => {}
                            }
                            Value::Object(map)
                        }),
                    3 => inner.clone().prop_map(|items| json!({"type": "array", "items": items, "minItems": 1})),
                    3 => (prop::collection::vec(inner.clone(), 1..3), any::<bool>()).prop_map(|(branches, one)| {
                        if one {
                            json!({"oneOf": branches})
                        } else {
                            json!({"anyOf": branches, "description": "either"})
                        }
                    }),
                    1 => inner.clone().prop_map(|s| json!({"allOf": [s]})),
                    3 => inner.prop_map(|s| json!({"type": ["object", "null"], "properties": {"x": s}})),
                ]
            })
        }

        fn root() -> impl Strategy<Value = Value> {
            (prop::collection::vec(schema(), 0..4), prop::collection::vec(any::<bool>(), 0..4), schema()).prop_map(
                |(props, required, def)| {
                    let names = ["p0", "p1", "p2", "p3"];
                    let properties: Map<String, Value> =
                        props.into_iter().enumerate().map(|(i, s)| (names[i].to_string(), s)).collect();
                    let required: Vec<&str> = names.iter().zip(required).filter(|(_, r)| *r).map(|(n, _)| *n).collect();
                    json!({"type": "object", "properties": properties, "required": required, "$defs": {"d": def}})
                },
            )
        }

        /// Whether `keyword` is used as a keyword anywhere in the schema (a property of that name
        /// is an argument, not the keyword).
        fn has_keyword(schema: &Value, keyword: &str) -> bool {
            let Value::Object(map) = schema else { return false };
            let children = |key: &str| -> Vec<&Value> {
                match map.get(key) {
                    Some(Value::Object(m)) if key != "items" => m.values().collect(),
                    Some(Value::Array(a)) => a.iter().collect(),
                    Some(v) if key == "items" => vec![v],
                    _ => Vec::new(),
                }
            };
            map.contains_key(keyword)
                || ["properties", "$defs", "anyOf", "items"]
                    .iter()
                    .flat_map(|k| children(k))
                    .any(|c| has_keyword(c, keyword))
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(400))]

            /// Whatever a server sends: no panic, the input left alone, and an output that is its
            /// own rewrite, closed and fully required at the root.
            #[test]
            fn rewrite_is_total_idempotent_and_pure(input in root()) {
                let before = input.clone();
                let result = strict_schema(&input);
                prop_assert_eq!(&input, &before);
                if let Ok(out) = result {
                    let again = strict_schema(&out);
                    prop_assert_eq!(again.as_ref().map(Value::to_string).ok(), Some(out.to_string()));
                    let keys: Vec<Value> = out["properties"].as_object().map(|p| p.keys().map(|k| json!(k)).collect()).unwrap_or_default();
                    prop_assert_eq!(&out["required"], &Value::Array(keys));
                    prop_assert_eq!(&out["additionalProperties"], &json!(false));
                    prop_assert!(!has_keyword(&out, "default"), "{}", out);
                }
            }
        }
    }
}
