//! Gemini's schema dialect (design section 5; issue 21): Gemini's function declarations take a
//! `Schema` object, a small subset of JSON Schema, and refuse a whole request over one keyword they
//! do not know. This module rewrites a tool's parameters into that subset, or refuses the tool with
//! a [`Refusal`] saying where and why, and maps the parameter names Gemini cannot take (`timeout-s`)
//! to names it can (`timeout_s`) and back. It owns no provider shape but the OpenAI-shaped tool
//! Gemini's OpenAI-compatible endpoint reads; projecting tools is `schema`'s job.
//!
//! The rewrite keeps only `Schema`'s keywords ([`SCHEMA_KEYWORDS`]):
//! - dropped, which only loosens the schema (the host still checks every call's arguments):
//!   `$schema`, `$id`, `$comment`, `additionalProperties`, `default`, `examples`,
//!   `exclusiveMinimum`, `exclusiveMaximum`, `multipleOf`, `uniqueItems`, a `format` other than
//!   `date-time`/`enum` on strings or `float`/`double`/`int32`/`int64` on numbers, `items` on a
//!   non-array, object keywords on a non-object, and any keyword `Schema` does not have;
//! - rewritten: a local `$ref` is inlined (`$defs` and `definitions` go); `["T","null"]` becomes
//!   `"T"` with `nullable: true`, a list of several types an `anyOf` of them; a null branch of
//!   `anyOf` becomes `nullable: true`, and an `anyOf` left with one branch is that branch; `oneOf`
//!   becomes `anyOf`; a string `const` becomes a one-member `enum`; `null` in an `enum` becomes
//!   `nullable: true`; an `enum` of numbers or booleans is dropped and its values named in the
//!   description (Gemini's `enum` holds strings; a stringified one would make the model send
//!   strings); `properties` without a `type` get `"type": "object"`;
//! - refused: a recursive `$ref`, a `$ref` that does not resolve inside the schema, `type: "null"`
//!   alone, `type` beside `anyOf`, `allOf`, `not`, `if`/`then`/`else`, `dependentRequired`,
//!   `dependentSchemas`, `patternProperties`, `propertyNames`, `unevaluatedProperties`,
//!   `unevaluatedItems`, `contains`, tuple items, an array without `items`, a nested object that
//!   declares no properties (a free-form map), a `const` that is not a string, a property name
//!   Gemini cannot take (below), nesting deeper than [`MAX_DEPTH`].
//!
//! Names: a property name must start with a letter or `_` and hold only letters, digits and `_`.
//! A top-level name with `-` (`replace-all`, `timeout-s`) is sent with `_` instead, and a call's
//! argument keys are mapped back ([`restore_argument_names`]) before the call is tidied; a name
//! that two parameters would share, or any other name that does not fit, is refused. A tool with
//! no parameters is sent without `parameters`.
//!
//! ```
//! use serde_json::json;
//! use toolhost::gemini::gemini_schema;
//!
//! let schema = json!({
//!     "$schema": "http://json-schema.org/draft-07/schema#",
//!     "type": "object",
//!     "properties": {
//!         "timeout-s": {"type": ["integer", "null"], "default": 30},
//!         "mode": {"const": "fast"},
//!     },
//!     "additionalProperties": false,
//! });
//! assert_eq!(gemini_schema(&schema).unwrap(), json!({
//!     "type": "object",
//!     "properties": {
//!         "timeout_s": {"type": "integer", "nullable": true},
//!         "mode": {"enum": ["fast"], "type": "string"},
//!     },
//! }));
//! ```

use serde_json::{json, Map, Value};

pub use crate::strict::{Refusal, RefusalKind, MAX_DEPTH};

/// Every keyword of Gemini's `Schema` object; the rewrite's output holds no other.
pub const SCHEMA_KEYWORDS: [&str; 22] = [
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "items",
    "minItems",
    "maxItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "propertyOrdering",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "anyOf",
    "default",
    "example",
];

/// Keywords with no `Schema` equivalent whose loss would let through values the tool refuses in
/// ways a model cannot guess, or whose meaning a rewrite cannot keep: the tool is refused.
const REFUSED: [&str; 13] = [
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "patternProperties",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contains",
    "prefixItems",
];

/// Bounds kept as they are when they are numbers, each on the type it applies to.
const BOUNDS: [(&str, &[&str]); 8] = [
    ("minItems", &["array"]),
    ("maxItems", &["array"]),
    ("minProperties", &["object"]),
    ("maxProperties", &["object"]),
    ("minLength", &["string"]),
    ("maxLength", &["string"]),
    ("minimum", &["number", "integer"]),
    ("maximum", &["number", "integer"]),
];

/// The JSON Schema type names.
const TYPE_NAMES: [&str; 7] = ["string", "number", "integer", "boolean", "object", "array", "null"];

/// How many schema positions one rewrite may produce: inlining references that are used many
/// times multiplies a schema, and schemas may come from MCP servers.
const MAX_NODES: usize = 10_000;

/// The name Gemini is sent for a top-level parameter: `-` becomes `_`.
pub fn gemini_name(name: &str) -> String {
    name.replace('-', "_")
}

/// Whether Gemini takes `name` as a property name: a letter or `_` first, then letters, digits and
/// `_`, at most 64 in all.
fn fits_property(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 64
}

/// Whether Gemini takes `name` as a function name: a letter or `_` first, then letters, digits,
/// `_`, `.`, `:` and `-`, at most 128 in all.
fn fits_function(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
        && name.len() <= 128
}

/// Rewrites one tool's parameters schema into Gemini's `Schema` subset, or says why it cannot be
/// (see the module docs for each rule). The result is its own rewrite and the input is never
/// changed.
///
/// # Errors
/// A [`Refusal`] naming the place (a JSON Pointer into the input) and the reason. Gemini has no
/// way to take such a tool, so it is left out of a Gemini catalogue.
pub fn gemini_schema(schema: &Value) -> Result<Value, Refusal> {
    let root_is_object = schema.as_object().is_some_and(|map| {
        map.get("type").is_none_or(|t| t == "object") && !map.contains_key("anyOf") && !map.contains_key("oneOf")
    });
    if !root_is_object {
        return Err(Refusal::new("", RefusalKind::NonObjectRoot));
    }
    let mut rewrite = Rewrite { root: schema, expanding: Vec::new(), nodes: 0 };
    let mut out = rewrite.schema(schema, "", 0, true)?;
    rename_top_level(&mut out)?;
    Ok(out)
}

/// An OpenAI chat-completions tool (`{"type":"function","function":{..}}`) as Gemini's
/// OpenAI-compatible endpoint takes it: its parameters rewritten by [`gemini_schema`], left out
/// when the tool has none.
///
/// # Errors
/// The parameters' [`Refusal`], or one for a function name Gemini does not take (kind
/// [`RefusalKind::Name`], pointer `""`), or a value that is not such a tool.
pub fn gemini_openai_tool(tool: &Value) -> Result<Value, Refusal> {
    let mut out = tool.clone();
    let Some(function) = out.get_mut("function").and_then(Value::as_object_mut) else {
        return Err(Refusal::new("", RefusalKind::Malformed("not an OpenAI function tool".into())));
    };
    let name = function.get("name").and_then(Value::as_str).unwrap_or_default();
    if !fits_function(name) {
        return Err(Refusal::new("", RefusalKind::Name(format!("the tool name {name:?}"))));
    }
    let parameters = function.get("parameters").cloned().unwrap_or_else(|| json!({"type": "object"}));
    let parameters = gemini_schema(&parameters)?;
    if parameters.get("properties").and_then(Value::as_object).is_none_or(Map::is_empty) {
        function.shift_remove("parameters");
    } else {
        function.insert("parameters".into(), parameters);
    }
    Ok(out)
}

/// Maps the names [`gemini_name`] made for `parameters` (the tool's top-level parameter names)
/// back in a call's arguments: a key that is no parameter's name but is one's Gemini name is
/// renamed, unless the arguments carry the real name too. True when a key was renamed.
///
/// ```
/// use serde_json::json;
/// use toolhost::gemini::restore_argument_names;
/// let mut arguments = json!({"cmd": "ls", "timeout_s": 5});
/// assert!(restore_argument_names(&["cmd", "timeout-s"], arguments.as_object_mut().unwrap()));
/// assert_eq!(arguments, json!({"cmd": "ls", "timeout-s": 5}));
/// ```
pub fn restore_argument_names(parameters: &[&str], arguments: &mut Map<String, Value>) -> bool {
    let real = |key: &str, arguments: &Map<String, Value>| -> Option<String> {
        if parameters.contains(&key) {
            return None;
        }
        parameters.iter().find(|p| gemini_name(p) == key && !arguments.contains_key(**p)).map(|p| (*p).to_string())
    };
    if !arguments.keys().any(|k| real(k, arguments).is_some()) {
        return false;
    }
    let renamed: Map<String, Value> =
        arguments.iter().map(|(k, v)| (real(k, arguments).unwrap_or_else(|| k.clone()), v.clone())).collect();
    *arguments = renamed;
    true
}

/// Whether [`restore_argument_names`] would rename a key of `arguments`.
pub fn names_to_restore(parameters: &[&str], arguments: &Value) -> bool {
    let Value::Object(map) = arguments else { return false };
    map.keys().any(|k| {
        !parameters.contains(&k.as_str()) && parameters.iter().any(|p| gemini_name(p) == *k && !map.contains_key(*p))
    })
}

/// Sends the top-level `-` names as `_` names, refusing a name two would share.
fn rename_top_level(out: &mut Value) -> Result<(), Refusal> {
    let Some(map) = out.as_object_mut() else { return Ok(()) };
    let Some(Value::Object(properties)) = map.get("properties") else { return Ok(()) };
    if !properties.keys().any(|k| k.contains('-')) {
        return check_names(properties, "");
    }
    let mut renamed = Map::new();
    for (name, schema) in properties {
        let sent = gemini_name(name);
        if renamed.contains_key(&sent) || (sent != *name && properties.contains_key(&sent)) {
            return Err(Refusal::new(
                &format!("/properties/{}", segment(name)),
                RefusalKind::Name(format!("the parameter name {name:?}, which would be sent as {sent:?} like another")),
            ));
        }
        renamed.insert(sent, schema.clone());
    }
    check_names(&renamed, "")?;
    let required: Option<Vec<Value>> = map
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().map(|n| n.as_str().map_or_else(|| n.clone(), |n| json!(gemini_name(n)))).collect());
    map.insert("properties".into(), Value::Object(renamed));
    if let Some(required) = required {
        map.insert("required".into(), Value::Array(required));
    }
    Ok(())
}

fn check_names(properties: &Map<String, Value>, at: &str) -> Result<(), Refusal> {
    match properties.keys().find(|k| !fits_property(k)) {
        Some(name) => Err(Refusal::new(
            &format!("{at}/properties/{}", segment(name)),
            RefusalKind::Name(format!("the property name {name:?}")),
        )),
        None => Ok(()),
    }
}

/// A JSON Pointer segment (RFC 6901 escaping).
fn segment(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

struct Rewrite<'a> {
    root: &'a Value,
    /// The references being inlined, outermost first: one met again is recursion.
    expanding: Vec<String>,
    nodes: usize,
}

impl Rewrite<'_> {
    /// Rewrites one schema position; `at` is its pointer in the input, `top` whether it is the
    /// root (whose property names may still be mapped, and whose empty object is no map).
    fn schema(&mut self, schema: &Value, at: &str, depth: usize, top: bool) -> Result<Value, Refusal> {
        let refuse = |kind| Err(Refusal::new(at, kind));
        self.nodes += 1;
        if depth > MAX_DEPTH || self.nodes > MAX_NODES {
            return refuse(RefusalKind::TooDeep);
        }
        let map = match schema {
            Value::Object(map) => map,
            Value::Bool(true) => return refuse(RefusalKind::Unconstrained),
            _ => return refuse(RefusalKind::Malformed("a schema must be an object".into())),
        };
        if let Some(target) = map.get("$ref") {
            return self.inline(map, target, at, depth);
        }
        if let Some(keyword) = REFUSED.iter().find(|k| map.contains_key(**k)) {
            return refuse(RefusalKind::Unsupported(keyword));
        }
        if map.get("items").is_some_and(Value::is_array) {
            return refuse(RefusalKind::TupleItems);
        }
        if map.contains_key("anyOf") && map.contains_key("oneOf") {
            return refuse(RefusalKind::Malformed("both \"anyOf\" and \"oneOf\"".into()));
        }
        let mut types = type_names(map.get("type"), at)?;
        let mut nullable = map.get("nullable") == Some(&Value::Bool(true));
        if let Some(names) = &mut types {
            if names.len() > 1 && names.iter().any(|n| n == "null") {
                names.retain(|n| n != "null");
                nullable = true;
            }
            if names.len() == 1 && names[0] == "null" {
                return refuse(RefusalKind::Unsupported("\"type\": \"null\""));
            }
        }
        if types.is_none() && (top || ["properties", "required"].iter().any(|k| map.contains_key(*k))) {
            types = Some(vec!["object".into()]);
        }
        let branches = map.get("anyOf").or_else(|| map.get("oneOf"));
        if branches.is_some() && types.is_some() {
            return refuse(RefusalKind::Unsupported("\"type\" beside \"anyOf\""));
        }
        if let Some(branches) = branches {
            return self.any_of(map, branches, nullable, at, depth);
        }
        match types.as_deref() {
            Some([one]) => self.typed(map, Some(one), nullable, at, depth, top),
            Some(several) => {
                // One branch per type, each with the keywords that apply to it.
                let mut out = Map::new();
                copy_text(map, &mut out);
                let mut rewritten = Vec::new();
                for name in several {
                    let mut branch = self.typed(map, Some(name), false, at, depth, false)?;
                    if let Some(b) = branch.as_object_mut() {
                        b.shift_remove("description");
                        b.shift_remove("title");
                    }
                    rewritten.push(branch);
                }
                out.insert("anyOf".into(), Value::Array(rewritten));
                if nullable {
                    out.insert("nullable".into(), Value::Bool(true));
                }
                Ok(canonical(out))
            }
            None => self.typed(map, None, nullable, at, depth, top),
        }
    }

    /// A `$ref` inlined: the schema it points at, rewritten, with the referring schema's
    /// description and title on top.
    fn inline(&mut self, map: &Map<String, Value>, target: &Value, at: &str, depth: usize) -> Result<Value, Refusal> {
        let Value::String(target) = target else {
            return Err(Refusal::new(at, RefusalKind::Malformed("\"$ref\" must be a string".into())));
        };
        let found = match target.strip_prefix('#') {
            Some("") => Some(self.root),
            Some(pointer) if pointer.starts_with('/') => self.root.pointer(pointer).filter(|v| v.is_object()),
            _ => None,
        };
        let Some(found) = found else { return Err(Refusal::new(at, RefusalKind::UnresolvedRef(target.clone()))) };
        if self.expanding.contains(target) {
            return Err(Refusal::new(at, RefusalKind::RecursiveRef(target.clone())));
        }
        self.expanding.push(target.clone());
        let inlined = self.schema(found, &format!("{at}/$ref"), depth + 1, false);
        self.expanding.pop();
        let Value::Object(mut out) = inlined? else {
            return Err(Refusal::new(at, RefusalKind::Malformed("\"$ref\" must point at a schema".into())));
        };
        copy_text(map, &mut out);
        Ok(canonical(out))
    }

    /// `anyOf` (or `oneOf`, which loosens to it): null branches become `nullable`, one branch left
    /// is inlined.
    fn any_of(
        &mut self,
        map: &Map<String, Value>,
        branches: &Value,
        mut nullable: bool,
        at: &str,
        depth: usize,
    ) -> Result<Value, Refusal> {
        let key = if map.contains_key("anyOf") { "anyOf" } else { "oneOf" };
        let Some(branches) = branches.as_array().filter(|b| !b.is_empty()) else {
            return Err(Refusal::new(
                at,
                RefusalKind::Malformed(format!("\"{key}\" must be a non-empty list of schemas")),
            ));
        };
        let mut kept = Vec::new();
        for (i, branch) in branches.iter().enumerate() {
            if branch.get("type").is_some_and(|t| t == "null") && branch.as_object().is_some_and(|b| b.len() == 1) {
                nullable = true;
                continue;
            }
            kept.push(self.schema(branch, &format!("{at}/{key}/{i}"), depth + 1, false)?);
        }
        let mut out = Map::new();
        copy_text(map, &mut out);
        match kept.len() {
            0 => return Err(Refusal::new(at, RefusalKind::Unsupported("\"type\": \"null\""))),
            1 => {
                if let Some(Value::Object(only)) = kept.pop() {
                    for (k, v) in only {
                        out.entry(k).or_insert(v);
                    }
                }
            }
            _ => {
                out.insert("anyOf".into(), Value::Array(kept));
            }
        }
        if nullable {
            out.insert("nullable".into(), Value::Bool(true));
        }
        Ok(canonical(out))
    }

    /// A schema of one type (or none): the keywords that apply to it.
    fn typed(
        &mut self,
        map: &Map<String, Value>,
        ty: Option<&str>,
        nullable: bool,
        at: &str,
        depth: usize,
        top: bool,
    ) -> Result<Value, Refusal> {
        let refuse = |kind| Err(Refusal::new(at, kind));
        let mut out = Map::new();
        copy_text(map, &mut out);
        let mut ty = ty.map(str::to_string);
        let mut numbers_named = None;
        if let Some(value) = map.get("const") {
            match value {
                Value::String(s) => {
                    out.insert("enum".into(), json!([s]));
                    ty.get_or_insert_with(|| "string".into());
                }
                _ => return refuse(RefusalKind::Unsupported("a \"const\" that is not a string")),
            }
        } else if let Some(members) = map.get("enum") {
            let Some(members) = members.as_array().filter(|m| !m.is_empty()) else {
                return refuse(RefusalKind::Malformed("\"enum\" must be a non-empty list".into()));
            };
            let nulls = members.iter().any(Value::is_null);
            let others: Vec<&Value> = members.iter().filter(|m| !m.is_null()).collect();
            if others.is_empty() {
                return refuse(RefusalKind::Unsupported("\"type\": \"null\""));
            }
            if others.iter().all(|m| m.is_string()) {
                out.insert("enum".into(), Value::Array(others.into_iter().cloned().collect()));
                ty.get_or_insert_with(|| "string".into());
            } else {
                numbers_named = Some(others.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(", "));
            }
            if nulls && !out.contains_key("nullable") {
                out.insert("nullable".into(), Value::Bool(true));
            }
        }
        if let Some(named) = numbers_named {
            let text = match out.get("description").and_then(Value::as_str) {
                Some(d) if !d.trim().is_empty() => format!("{} One of: {named}.", d.trim_end()),
                _ => format!("One of: {named}."),
            };
            out.insert("description".into(), json!(text));
        }
        if let Some(ty) = &ty {
            out.insert("type".into(), json!(ty));
        }
        if nullable {
            out.insert("nullable".into(), Value::Bool(true));
        }
        for (key, applies) in BOUNDS {
            if let Some(value) =
                map.get(key).filter(|v| v.is_number() && ty.as_deref().is_some_and(|t| applies.contains(&t)))
            {
                out.insert(key.into(), value.clone());
            }
        }
        if let Some(example) = map.get("example") {
            out.insert("example".into(), example.clone());
        }
        if let (Some("string"), Some(Value::String(pattern))) = (ty.as_deref(), map.get("pattern")) {
            out.insert("pattern".into(), json!(pattern));
        }
        if let Some(Value::String(format)) = map.get("format") {
            let kept = match ty.as_deref() {
                Some("string") => ["date-time", "enum"].contains(&format.as_str()),
                Some("number" | "integer") => ["float", "double", "int32", "int64"].contains(&format.as_str()),
                _ => false,
            };
            if kept {
                out.insert("format".into(), json!(format));
            }
        }
        match ty.as_deref() {
            Some("array") => {
                let Some(items) = map.get("items") else { return refuse(RefusalKind::ArrayWithoutItems) };
                out.insert("items".into(), self.schema(items, &format!("{at}/items"), depth + 1, false)?);
            }
            Some("object") => self.object(map, &mut out, at, depth, top)?,
            _ => {}
        }
        if !["type", "enum", "anyOf"].iter().any(|k| out.contains_key(*k)) {
            return refuse(RefusalKind::Unconstrained);
        }
        Ok(canonical(out))
    }

    /// An object's properties (each rewritten) and the required names among them; a nested object
    /// that declares none is a free-form map Gemini cannot take.
    fn object(
        &mut self,
        map: &Map<String, Value>,
        out: &mut Map<String, Value>,
        at: &str,
        depth: usize,
        top: bool,
    ) -> Result<(), Refusal> {
        let declared = match map.get("properties") {
            None => Map::new(),
            Some(Value::Object(props)) => props.clone(),
            Some(_) => {
                return Err(Refusal::new(
                    at,
                    RefusalKind::Malformed("\"properties\" must be an object of schemas".into()),
                ))
            }
        };
        if declared.is_empty() && !top {
            return Err(Refusal::new(at, RefusalKind::BareObject));
        }
        let mut properties = Map::new();
        for (name, schema) in &declared {
            properties.insert(
                name.clone(),
                self.schema(schema, &format!("{at}/properties/{}", segment(name)), depth + 1, false)?,
            );
        }
        if !top {
            check_names(&properties, at)?;
        }
        let required: Vec<Value> = match map.get("required") {
            None => Vec::new(),
            Some(Value::Array(names)) => {
                names.iter().filter(|n| n.as_str().is_some_and(|n| properties.contains_key(n))).cloned().collect()
            }
            Some(_) => {
                return Err(Refusal::new(
                    at,
                    RefusalKind::Malformed("\"required\" must be a list of property names".into()),
                ))
            }
        };
        out.insert("properties".into(), Value::Object(properties));
        if !required.is_empty() {
            out.insert("required".into(), Value::Array(required));
        }
        if let Some(Value::Array(order)) = map.get("propertyOrdering") {
            if order.iter().all(Value::is_string) {
                out.insert("propertyOrdering".into(), Value::Array(order.clone()));
            }
        }
        Ok(())
    }
}

/// `out` with only `Schema`'s own keywords, whatever came in, in the order [`SCHEMA_KEYWORDS`]
/// lists them: the same schema is written the same way however it was reached, so the rewrite of
/// a rewrite is byte for byte the same.
fn canonical(out: Map<String, Value>) -> Value {
    let mut sorted: Vec<(usize, String, Value)> = out
        .into_iter()
        .filter_map(|(k, v)| SCHEMA_KEYWORDS.iter().position(|known| *known == k).map(|i| (i, k, v)))
        .collect();
    sorted.sort_by_key(|(i, _, _)| *i);
    Value::Object(sorted.into_iter().map(|(_, k, v)| (k, v)).collect())
}

/// The description and title, when they are text.
fn copy_text(map: &Map<String, Value>, out: &mut Map<String, Value>) {
    for key in ["description", "title"] {
        if let Some(Value::String(text)) = map.get(key) {
            out.insert(key.into(), json!(text));
        }
    }
}

/// The names in a schema's `type`, in order; `None` when there is none.
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
        Some(Value::Array(items)) if !items.is_empty() => {
            items.iter().map(|i| i.as_str().map(str::to_string).ok_or_else(malformed)).collect::<Result<_, _>>()?
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Rewrites `input`, checking the promises every case shares: the input is left as it was,
    /// and rewriting the output again gives the output.
    fn gemini(input: &Value) -> Result<Value, Refusal> {
        let before = input.clone();
        let result = gemini_schema(input);
        assert_eq!(input, &before, "the rewrite changed its input");
        if let Ok(out) = &result {
            let again = gemini_schema(out).unwrap_or_else(|r| panic!("its own output was refused: {r}"));
            assert_eq!(again.to_string(), out.to_string(), "not idempotent");
        }
        result
    }

    fn one(property: Value) -> Value {
        json!({"type": "object", "properties": {"p": property}})
    }

    #[test]
    fn each_rewrite_rule() {
        let cases: Vec<(&str, Value, Value)> = vec![
            (
                "$schema, additionalProperties, default, examples and unknown keywords go",
                json!({"$schema": "x", "$id": "y", "type": "object", "additionalProperties": false,
                       "properties": {"p": {"type": "string", "default": "a", "examples": ["a"], "x-vendor": 1,
                                            "minLength": 1, "pattern": "^a"}},
                       "required": ["p", "gone"]}),
                json!({"type": "object", "properties": {"p": {"type": "string", "minLength": 1, "pattern": "^a"}},
                       "required": ["p"]}),
            ),
            (
                "a type with null becomes nullable",
                one(json!({"type": ["integer", "null"], "minimum": 0, "exclusiveMaximum": 9})),
                one(json!({"type": "integer", "nullable": true, "minimum": 0})),
            ),
            (
                "several types become an anyOf, each with its own keywords",
                one(
                    json!({"type": ["string", "array"], "description": "Paths", "items": {"type": "string"}, "maxLength": 9}),
                ),
                one(json!({"description": "Paths",
                           "anyOf": [{"type": "string", "maxLength": 9}, {"type": "array", "items": {"type": "string"}}]})),
            ),
            (
                "a null branch of anyOf becomes nullable, one branch left is inlined",
                one(json!({"description": "N", "anyOf": [{"type": "number"}, {"type": "null"}]})),
                one(json!({"description": "N", "type": "number", "nullable": true})),
            ),
            (
                "oneOf becomes anyOf",
                one(json!({"oneOf": [{"type": "number"}, {"type": "boolean"}]})),
                one(json!({"anyOf": [{"type": "number"}, {"type": "boolean"}]})),
            ),
            (
                "null in an enum becomes nullable; an enum implies a string",
                one(json!({"enum": ["a", "b", null]})),
                one(json!({"enum": ["a", "b"], "nullable": true, "type": "string"})),
            ),
            (
                "an enum of numbers is dropped and named in the description",
                one(json!({"type": "integer", "description": "Level.", "enum": [1, 2, 3]})),
                one(json!({"description": "Level. One of: 1, 2, 3.", "type": "integer"})),
            ),
            (
                "a local $ref is inlined, its referrer's description on top",
                json!({"type": "object", "properties": {"at": {"$ref": "#/$defs/point", "description": "Where"}},
                       "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}}}),
                json!({"type": "object", "properties": {"at": {"type": "object", "properties": {"x": {"type": "number"}},
                                                               "required": ["x"], "description": "Where"}}}),
            ),
            (
                "format: date-time stays, uri goes",
                json!({"type": "object", "properties": {"when": {"type": "string", "format": "date-time"},
                                                        "url": {"type": "string", "format": "uri"}}}),
                json!({"type": "object", "properties": {"when": {"type": "string", "format": "date-time"},
                                                        "url": {"type": "string"}}}),
            ),
            (
                "properties without a type are an object; items on a non-array go",
                json!({"properties": {"s": {"type": "string", "items": {"type": "string"}, "minItems": 1}}}),
                json!({"type": "object", "properties": {"s": {"type": "string"}}}),
            ),
            (
                "top-level names with - are sent with _, required too",
                json!({"type": "object", "properties": {"timeout-s": {"type": "integer"}}, "required": ["timeout-s"]}),
                json!({"type": "object", "properties": {"timeout_s": {"type": "integer"}}, "required": ["timeout_s"]}),
            ),
            (
                "an object with no parameters stays at the root",
                json!({"type": "object", "properties": {}, "additionalProperties": false}),
                json!({"type": "object", "properties": {}}),
            ),
        ];
        for (what, input, expected) in cases {
            assert_eq!(gemini(&input).unwrap_or_else(|r| panic!("{what}: {r}")), expected, "{what}");
        }
    }

    #[test]
    fn each_refusal_names_its_place() {
        let cases: Vec<(Value, &str, &str)> = vec![
            (json!({"type": "array", "items": {"type": "string"}}), "", "not a plain object"),
            (
                json!({"type": "object", "properties": {"n": {"$ref": "#/$defs/n"}},
                       "$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}}}}),
                "/properties/n/$ref/properties/next",
                "refers to itself",
            ),
            (one(json!({"$ref": "https://example.com/s.json"})), "/properties/p", "does not point"),
            (one(json!({"type": "null"})), "/properties/p", "\"type\": \"null\""),
            (one(json!({"type": "string", "anyOf": [{"minLength": 1}]})), "/properties/p", "beside"),
            (one(json!({"allOf": [{"type": "string"}]})), "/properties/p", "allOf"),
            (one(json!({"type": "array", "items": [{"type": "string"}]})), "/properties/p", "tuple"),
            (one(json!({"type": "array"})), "/properties/p", "without \"items\""),
            (
                one(json!({"type": "object", "additionalProperties": {"type": "string"}})),
                "/properties/p",
                "no declared",
            ),
            (one(json!({"const": 3})), "/properties/p", "const"),
            (
                json!({"type": "object", "properties": {"a-b": {"type": "string"}, "a_b": {"type": "string"}}}),
                "/properties/a-b",
                "like another",
            ),
            (
                one(json!({"type": "object", "properties": {"x-y": {"type": "string"}}})),
                "/properties/p/properties/x-y",
                "name",
            ),
            (json!({"type": "object", "properties": {"a.b": {"type": "string"}}}), "/properties/a.b", "name"),
        ];
        for (input, pointer, reason) in cases {
            let refusal = gemini(&input).expect_err(&input.to_string());
            assert_eq!(refusal.pointer(), pointer, "{input}: {refusal}");
            assert!(refusal.to_string().contains(reason), "{input}: {refusal}");
        }
    }

    #[test]
    fn a_tool_without_parameters_is_sent_without_them_and_a_bad_function_name_is_refused() {
        let tool = json!({"type": "function", "function": {"name": "now", "description": "Time.",
                          "parameters": {"type": "object", "properties": {}, "required": []}}});
        assert_eq!(
            gemini_openai_tool(&tool).unwrap(),
            json!({"type": "function", "function": {"name": "now", "description": "Time."}})
        );
        let tool = json!({"type": "function", "function": {"name": "9lives", "parameters": {"type": "object"}}});
        assert!(matches!(gemini_openai_tool(&tool).unwrap_err().kind(), RefusalKind::Name(_)));
    }

    #[test]
    fn argument_names_map_back_unless_the_real_name_is_there_too() {
        let params = ["cmd", "timeout-s"];
        let mut both = json!({"timeout_s": 1, "timeout-s": 2});
        assert!(!names_to_restore(&params, &both));
        assert!(!restore_argument_names(&params, both.as_object_mut().unwrap()));
        let mut sent = json!({"timeout_s": 1});
        assert!(names_to_restore(&params, &sent));
        assert!(restore_argument_names(&params, sent.as_object_mut().unwrap()));
        assert_eq!(sent, json!({"timeout-s": 1}));
    }

    #[test]
    fn a_call_from_gemini_reaches_the_tool_under_its_real_parameter_names() {
        use crate::call::CallOptions;
        use crate::schema::Format;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "x x\n").unwrap();
        let mut host = crate::HostBuilder::new(dir.path()).shipped_tools(false).project_tools(false).build().unwrap();
        let arguments = r#"{"path":"a.txt","old":"x","new":"y","replace_all":true}"#;
        let record = host.call_json_with("fs-edit", arguments, CallOptions::sent(Format::Gemini));
        assert!(record.result.is_ok(), "{:?}", record.result);
        assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "y y\n");
        assert_eq!(record.tidied.unwrap()["replace-all"], true);
        // From any other provider the Gemini name is an unknown argument, as before.
        let record = host.call_json_with("fs-edit", arguments, CallOptions::sent(Format::OpenAi));
        assert_eq!(record.result.unwrap_err().kind(), crate::ErrorKind::UnknownArgument);
    }
}
