//! The strict-mode conformance sweep (design section 6), one generated test per tool so a failure
//! names the tool: every tool of a default host (built-in and shipped Scheme tools, projected by
//! `toolhost::schema`) and every tool captured from the MCP reference servers
//! (tests/fixtures/mcp/) goes through the strict rewrite, and the result is checked against every
//! strict rule by a validator written here, apart from src/strict.rs, so the two cannot share a
//! mistake. Also pinned here: which tools are refused, and why.
//!
//! The same corpus goes through Gemini's schema dialect (`toolhost::gemini`), checked by a second
//! validator written from Gemini's `Schema` keyword list: `gemini::NAME`, `gemini_idempotent::NAME`.
//!
//! Run one tool's tests with a filter: `cargo test --test strict -- filesystem.edit_file`.

use std::collections::BTreeMap;
use std::path::Path;

use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::{json, Value};
use toolhost::gemini::gemini_openai_tool;
use toolhost::schema::{tool_schema, Format};
use toolhost::strict::{strict_openai_tool, strict_schema};

/// The tools the rewrite refuses, with the reason, as `tool -> "pointer: reason"`. None of today's
/// host tools or captured MCP tools is refused: a tool that joins this list is a decision to make
/// here, not a surprise in a provider's 400.
const PINNED_REFUSALS: &[(&str, &str)] = &[];

/// The tools Gemini's dialect refuses (left out of a Gemini catalogue), as `tool -> refusal`.
const GEMINI_PINNED_REFUSALS: &[(&str, &str)] = &[];

/// One tool of the sweep: its name (`fs-read`, `filesystem.edit_file`) and its OpenAI tool shape.
#[derive(Clone)]
struct Case {
    name: String,
    openai: Value,
    /// For host tools, what `schema::tool_schema` gives for `Format::OpenAiStrict`: the projection
    /// point itself must agree with the rewrite.
    projected_strict: Option<Value>,
    /// For host tools, what `schema::tool_schema` gives for `Format::Gemini`.
    projected_gemini: Option<Value>,
}

impl Case {
    fn parameters(&self) -> &Value {
        &self.openai["function"]["parameters"]
    }
}

const SERVERS: [&str; 2] = ["everything", "filesystem"];

fn fixture(server: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/mcp/server-{server}.json"));
    let text = std::fs::read_to_string(&path).unwrap();
    match serde_json::from_str(&text).unwrap() {
        Value::Array(tools) => tools,
        _ => panic!("{} is not a list of tools", path.display()),
    }
}

fn corpus() -> Vec<Case> {
    let mut cases = Vec::new();
    let dir = tempfile::tempdir().unwrap();
    let host = toolhost::Host::new(dir.path()).unwrap();
    assert!(host.load_errors().is_empty(), "{:?}", host.load_errors());
    for tool in host.registry().iter() {
        cases.push(Case {
            name: tool.name().to_string(),
            openai: tool_schema(&tool.spec, Format::OpenAi),
            projected_strict: Some(tool_schema(&tool.spec, Format::OpenAiStrict)),
            projected_gemini: Some(tool_schema(&tool.spec, Format::Gemini)),
        });
    }
    for server in SERVERS {
        for tool in fixture(server) {
            let name = format!("{server}.{}", tool["name"].as_str().unwrap());
            let openai = json!({"type": "function", "function": {
                "name": name.replace('.', "__"),
                "description": tool["description"],
                "parameters": tool["inputSchema"],
            }});
            cases.push(Case { name, openai, projected_strict: None, projected_gemini: None });
        }
    }
    cases
}

fn main() {
    let args = Arguments::from_args();
    let cases = corpus();
    let mut trials = Vec::new();
    for case in &cases {
        let c = case.clone();
        trials.push(Trial::test(format!("conformance::{}", case.name), move || conformance(&c)));
        let c = case.clone();
        trials.push(Trial::test(format!("idempotent::{}", case.name), move || idempotent(&c)));
        let c = case.clone();
        trials.push(Trial::test(format!("input_unchanged::{}", case.name), move || input_unchanged(&c)));
        let c = case.clone();
        trials.push(Trial::test(format!("gemini::{}", case.name), move || gemini_conformance(&c)));
        let c = case.clone();
        trials.push(Trial::test(format!("gemini_idempotent::{}", case.name), move || gemini_idempotent(&c)));
    }
    let all = cases.clone();
    trials.push(Trial::test("refusals_are_pinned", move || refusals_are_pinned(&all)));
    let all = cases.clone();
    trials.push(Trial::test("gemini_refusals_are_pinned", move || gemini_refusals_are_pinned(&all)));
    let all = cases;
    trials.push(Trial::test("sweep_covers_host_and_both_servers", move || sweep_covers(&all)));
    trials.push(Trial::test("validator_finds_each_broken_rule", validator_finds_each_broken_rule));
    trials.push(Trial::test("gemini_validator_finds_each_broken_rule", gemini_validator_finds_each_broken_rule));
    libtest_mimic::run(&args, trials).exit();
}

fn pinned(name: &str) -> Option<&'static str> {
    PINNED_REFUSALS.iter().find(|(tool, _)| *tool == name).map(|(_, reason)| *reason)
}

fn fail(message: impl Into<String>) -> Result<(), Failed> {
    Err(Failed::from(message.into()))
}

/// The rewrite's result obeys every strict rule, keeps every argument, widens exactly the optional
/// ones, and the OpenAI tool is marked to match; or the tool is refused as pinned.
fn conformance(case: &Case) -> Result<(), Failed> {
    let input = case.parameters();
    let marked = strict_openai_tool(&case.openai);
    if let Some(projected) = &case.projected_strict {
        if projected != &marked {
            return fail(format!(
                "schema::tool_schema(OpenAiStrict) differs from strict_openai_tool:\n{projected}\n{marked}"
            ));
        }
    }
    let out = match (strict_schema(input), pinned(&case.name)) {
        (Err(refusal), Some(reason)) if refusal.to_string() == reason => {
            if marked["function"]["strict"] != json!(false) || &marked["function"]["parameters"] != input {
                return fail("a refused tool must be sent with \"strict\": false and its schema untouched");
            }
            return Ok(());
        }
        (Err(refusal), _) => return fail(format!("refused: {refusal}")),
        (Ok(_), Some(reason)) => return fail(format!("pinned as refused ({reason}) but rewritten")),
        (Ok(out), None) => out,
    };
    let mut problems = violations(&out);
    same_arguments(input, &out, "#", &mut problems);
    if marked["function"]["strict"] != json!(true) || marked["function"]["parameters"] != out {
        problems.push("the OpenAI tool is not marked \"strict\": true with the rewritten parameters".into());
    }
    if problems.is_empty() {
        Ok(())
    } else {
        fail(format!("{}\nrewritten: {out:#}", problems.join("\n")))
    }
}

/// The exact bytes, key order included: "unchanged" and "idempotent" mean byte-identical here.
fn text(value: &Value) -> String {
    value.to_string()
}

fn idempotent(case: &Case) -> Result<(), Failed> {
    let once = match strict_schema(case.parameters()) {
        Ok(once) => once,
        // A refusal is a refusal every time, for the same reason.
        Err(refusal) => {
            let again = strict_schema(case.parameters()).err().map(|r| r.to_string());
            return if again == Some(refusal.to_string()) { Ok(()) } else { fail(format!("{refusal} then {again:?}")) };
        }
    };
    let twice = strict_schema(&once).map_err(|r| Failed::from(format!("its own output was refused: {r}")))?;
    if text(&twice) != text(&once) {
        return fail(format!("f(f(x)) != f(x):\n{once}\n{twice}"));
    }
    let marked = strict_openai_tool(&case.openai);
    if strict_openai_tool(&marked) != marked {
        return fail("marking the OpenAI tool twice changes it");
    }
    Ok(())
}

fn input_unchanged(case: &Case) -> Result<(), Failed> {
    let before = case.openai.to_string();
    let parameters = case.parameters().clone();
    let _ = strict_schema(&parameters);
    let _ = strict_openai_tool(&case.openai);
    if text(&parameters) != text(case.parameters()) || text(&case.openai) != before {
        return fail("the rewrite changed its input");
    }
    Ok(())
}

fn refusals_are_pinned(cases: &[Case]) -> Result<(), Failed> {
    let refused: BTreeMap<&str, String> = cases
        .iter()
        .filter_map(|c| strict_schema(c.parameters()).err().map(|r| (c.name.as_str(), r.to_string())))
        .collect();
    let expected: BTreeMap<&str, String> = PINNED_REFUSALS.iter().map(|(t, r)| (*t, r.to_string())).collect();
    if refused == expected {
        Ok(())
    } else {
        fail(format!("refused {refused:#?}\npinned {expected:#?}"))
    }
}

/// Guards the sweep itself: a corpus that silently lost a source would pass every other test.
fn sweep_covers(cases: &[Case]) -> Result<(), Failed> {
    let count = |prefix: &str| cases.iter().filter(|c| c.name.starts_with(prefix)).count();
    let (everything, filesystem) = (count("everything."), count("filesystem."));
    let host = cases.iter().filter(|c| c.projected_strict.is_some()).count();
    let has = |name: &str| cases.iter().any(|c| c.name == name);
    if everything < 10 || filesystem < 10 || host < 6 || !has("fs-read") || !has("git-log") {
        return fail(format!("host {host}, everything {everything}, filesystem {filesystem}"));
    }
    Ok(())
}

// ---- The validator: strict mode's rules, written from the design, sharing nothing with the
// ---- rewrite.

/// Every keyword a strict schema may carry: the kept ones, the followed ones, and the two the
/// rewrite computes.
const ALLOWED: [&str; 11] = [
    "type",
    "enum",
    "description",
    "title",
    "$ref",
    "$defs",
    "properties",
    "items",
    "anyOf",
    "required",
    "additionalProperties",
];

const TYPES: [&str; 7] = ["string", "number", "integer", "boolean", "object", "array", "null"];

/// Every way `schema` breaks a strict rule, each with where.
fn violations(schema: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    if schema.get("type") != Some(&json!("object")) {
        problems.push("#: the root is not \"type\": \"object\"".into());
    }
    check(schema, schema, "#", 0, &mut problems);
    problems
}

fn check(root: &Value, schema: &Value, at: &str, depth: usize, problems: &mut Vec<String>) {
    let mut problem = |text: String| problems.push(format!("{at}: {text}"));
    if depth > 300 {
        problem("nested absurdly deep".into());
        return;
    }
    let Some(map) = schema.as_object() else {
        problem(format!("a schema that is not an object: {schema}"));
        return;
    };
    for key in map.keys() {
        if !ALLOWED.contains(&key.as_str()) {
            problem(format!("keyword {key:?} is not allowed"));
        }
    }
    let types: Vec<&str> = match map.get("type") {
        None => Vec::new(),
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) if !ts.is_empty() => ts.iter().filter_map(Value::as_str).collect(),
        Some(other) => {
            problem(format!("type {other} is not a name or a list of names"));
            Vec::new()
        }
    };
    for t in &types {
        if !TYPES.contains(t) {
            problem(format!("unknown type {t:?}"));
        }
    }
    if !["type", "enum", "$ref", "anyOf"].iter().any(|k| map.contains_key(*k)) {
        problem("nothing constrains the value".into());
    }
    if let Some(e) = map.get("enum") {
        if e.as_array().is_none_or(Vec::is_empty) {
            problem("enum is not a non-empty list".into());
        }
    }
    for key in ["description", "title"] {
        if map.get(key).is_some_and(|v| !v.is_string()) {
            problem(format!("{key} is not a string"));
        }
    }
    if types.contains(&"object") {
        if map.get("additionalProperties") != Some(&json!(false)) {
            problem("an object that is not closed (additionalProperties must be false)".into());
        }
        match (map.get("properties").and_then(Value::as_object), map.get("required").and_then(Value::as_array)) {
            (Some(properties), Some(required)) => {
                let names: Vec<&str> = required.iter().filter_map(Value::as_str).collect();
                if names.len() != required.len() {
                    problem("required holds something that is not a name".into());
                }
                for name in properties.keys() {
                    if !names.contains(&name.as_str()) {
                        problem(format!("property {name:?} is not required"));
                    }
                }
                for (i, name) in names.iter().enumerate() {
                    if !properties.contains_key(*name) {
                        problem(format!("required names {name:?}, which is not a property"));
                    }
                    if names[..i].contains(name) {
                        problem(format!("required names {name:?} twice"));
                    }
                }
                for (name, property) in properties {
                    check(root, property, &format!("{at}/properties/{name}"), depth + 1, problems);
                }
            }
            _ => problem("an object without both properties and required".into()),
        }
    } else if ["properties", "required", "additionalProperties"].iter().any(|k| map.contains_key(*k)) {
        problem("object keywords on a schema that is not an object".into());
    }
    if types.contains(&"array") {
        match map.get("items") {
            Some(items @ Value::Object(_)) => check(root, items, &format!("{at}/items"), depth + 1, problems),
            Some(other) => problems.push(format!("{at}: items is not one schema: {other}")),
            None => problems.push(format!("{at}: an array without items")),
        }
    } else if map.contains_key("items") {
        problems.push(format!("{at}: items on a schema that is not an array"));
    }
    if let Some(branches) = map.get("anyOf") {
        match branches.as_array() {
            Some(branches) if !branches.is_empty() => {
                for (i, branch) in branches.iter().enumerate() {
                    check(root, branch, &format!("{at}/anyOf/{i}"), depth + 1, problems);
                }
            }
            _ => problems.push(format!("{at}: anyOf is not a non-empty list")),
        }
    }
    if let Some(defs) = map.get("$defs") {
        match defs.as_object() {
            Some(defs) => {
                for (name, def) in defs {
                    check(root, def, &format!("{at}/$defs/{name}"), depth + 1, problems);
                }
            }
            None => problems.push(format!("{at}: $defs is not an object")),
        }
    }
    if let Some(target) = map.get("$ref") {
        let resolves = match target.as_str() {
            Some("#") => true,
            Some(t) if t.starts_with("#/") => root.pointer(&t[1..]).is_some_and(Value::is_object),
            _ => false,
        };
        if !resolves {
            problems.push(format!("{at}: $ref {target} does not resolve inside the schema"));
        }
    }
}

/// Whether a strict schema admits null: each constraint it carries must.
fn admits_null(schema: &Value) -> bool {
    let type_ok = match schema.get("type") {
        None => true,
        Some(Value::Array(ts)) => ts.contains(&json!("null")),
        Some(t) => t == "null",
    };
    let enum_ok = schema.get("enum").is_none_or(|e| e.as_array().is_some_and(|e| e.contains(&Value::Null)));
    let any_of_ok = schema.get("anyOf").is_none_or(|b| b.as_array().is_some_and(|b| b.iter().any(admits_null)));
    type_ok && enum_ok && any_of_ok && schema.get("$ref").is_none()
}

/// Compares the rewrite with its input, object by object: the same property names in the same
/// order (no argument lost or invented), the optional ones now admitting null, the required ones'
/// types as they were.
fn same_arguments(input: &Value, out: &Value, at: &str, problems: &mut Vec<String>) {
    if let (Some(inp), Some(outp)) =
        (input.get("properties").and_then(Value::as_object), out.get("properties").and_then(Value::as_object))
    {
        let (a, b): (Vec<&String>, Vec<&String>) = (inp.keys().collect(), outp.keys().collect());
        if a != b {
            problems.push(format!("{at}: properties {a:?} became {b:?}"));
        }
        let required: Vec<&str> = input
            .get("required")
            .and_then(Value::as_array)
            .map_or(Vec::new(), |r| r.iter().filter_map(Value::as_str).collect());
        for (name, inner) in inp {
            let Some(rewritten) = outp.get(name) else { continue };
            let here = format!("{at}/properties/{name}");
            if required.contains(&name.as_str()) {
                if inner.get("type") != rewritten.get("type") {
                    problems.push(format!("{here}: required, yet its type changed to {}", rewritten["type"]));
                }
            } else if !admits_null(rewritten) {
                problems.push(format!("{here}: optional, yet it does not admit null: {rewritten}"));
            }
            same_arguments(inner, rewritten, &here, problems);
        }
    }
    if let (Some(inner), Some(rewritten)) = (input.get("items"), out.get("items")) {
        same_arguments(inner, rewritten, &format!("{at}/items"), problems);
    }
}

/// The validator is only worth what it catches: each schema here breaks one rule.
fn validator_finds_each_broken_rule() -> Result<(), Failed> {
    let closed = |properties: Value, required: Value| json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false});
    let broken = [
        ("a bound", closed(json!({"n": {"type": "integer", "minimum": 1}}), json!(["n"]))),
        ("a default", closed(json!({"n": {"type": "integer", "default": 1}}), json!(["n"]))),
        ("oneOf", closed(json!({"n": {"oneOf": [{"type": "integer"}]}}), json!(["n"]))),
        ("an open object", json!({"type": "object", "properties": {}, "required": []})),
        (
            "additionalProperties true",
            json!({"type": "object", "properties": {}, "required": [], "additionalProperties": true}),
        ),
        ("an optional left out of required", closed(json!({"a": {"type": "string"}}), json!([]))),
        ("required naming no property", closed(json!({}), json!(["ghost"]))),
        (
            "a nested open object",
            closed(json!({"o": {"type": "object", "properties": {}, "required": []}}), json!(["o"])),
        ),
        ("an array without items", closed(json!({"l": {"type": "array"}}), json!(["l"]))),
        ("tuple items", closed(json!({"l": {"type": "array", "items": [{"type": "string"}]}}), json!(["l"]))),
        ("an unconstrained property", closed(json!({"x": {"description": "x"}}), json!(["x"]))),
        ("a dangling $ref", closed(json!({"x": {"$ref": "#/definitions/x"}}), json!(["x"]))),
        ("a non-object root", json!({"type": "array", "items": {"type": "string"}})),
        (
            "$schema",
            json!({"$schema": "x", "type": "object", "properties": {}, "required": [], "additionalProperties": false}),
        ),
        ("a bad anyOf branch", closed(json!({"x": {"anyOf": [{"type": "string", "format": "uri"}]}}), json!(["x"]))),
        (
            "a bad $defs entry",
            json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false,
                                     "$defs": {"d": {"type": "object", "properties": {}, "required": []}}}),
        ),
    ];
    let missed: Vec<&str> = broken.iter().filter(|(_, s)| violations(s).is_empty()).map(|(name, _)| *name).collect();
    let good = closed(
        json!({"a": {"type": ["string", "null"], "enum": ["x", null]}, "b": {"anyOf": [{"$ref": "#/$defs/d"}, {"type": "null"}]}}),
        json!(["a", "b"]),
    );
    let mut good = good;
    good["$defs"] = json!({"d": {"type": "array", "items": {"type": "integer"}}});
    let wrongly = violations(&good);
    if missed.is_empty() && wrongly.is_empty() {
        Ok(())
    } else {
        fail(format!("missed {missed:?}; flagged a good schema: {wrongly:?}"))
    }
}

// ---- Gemini's dialect: a validator written from the `Schema` keyword list (Google's
// ---- `@google/genai` `Schema` type), sharing nothing with src/gemini.rs.

/// Every keyword of Gemini's `Schema`; anything else fails the whole request ("Unknown name").
const GEMINI_KEYWORDS: [&str; 22] = [
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

const GEMINI_TYPES: [&str; 6] = ["string", "number", "integer", "boolean", "object", "array"];

fn gemini_pinned(name: &str) -> Option<&'static str> {
    GEMINI_PINNED_REFUSALS.iter().find(|(tool, _)| *tool == name).map(|(_, reason)| *reason)
}

/// Every way a Gemini function declaration breaks the `Schema` rules, each with where.
fn gemini_violations(tool: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let function = &tool["function"];
    let name = function["name"].as_str().unwrap_or_default();
    let name_ok = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "_.:-".contains(c))
        && name.len() <= 128;
    if !name_ok {
        problems.push(format!("function name {name:?}"));
    }
    if let Some(parameters) = function.get("parameters") {
        if parameters.get("type") != Some(&json!("object")) {
            problems.push("#: the root is not \"type\": \"object\"".into());
        }
        if parameters.get("properties").and_then(Value::as_object).is_none_or(|p| p.is_empty()) {
            problems.push("#: parameters without properties (leave them out instead)".into());
        }
        gemini_check(parameters, "#", 0, &mut problems);
    }
    problems
}

fn gemini_check(schema: &Value, at: &str, depth: usize, problems: &mut Vec<String>) {
    let mut problem = |text: String| problems.push(format!("{at}: {text}"));
    let Some(map) = schema.as_object().filter(|_| depth < 200) else {
        problem(format!("not a schema object (or absurdly deep): {schema}"));
        return;
    };
    for key in map.keys() {
        if !GEMINI_KEYWORDS.contains(&key.as_str()) {
            problem(format!("keyword {key:?} is not in Schema"));
        }
    }
    match map.get("type") {
        None if !map.contains_key("anyOf") => problem("neither type nor anyOf".into()),
        None => {}
        Some(Value::String(t)) if GEMINI_TYPES.contains(&t.as_str()) => {}
        Some(other) => problem(format!("type {other} is not one Schema type name")),
    }
    if map.contains_key("type") && map.contains_key("anyOf") {
        problem("type beside anyOf".into());
    }
    if map.get("nullable").is_some_and(|n| !n.is_boolean()) {
        problem("nullable is not a boolean".into());
    }
    if let Some(members) = map.get("enum") {
        if members.as_array().is_none_or(|m| m.is_empty() || !m.iter().all(Value::is_string)) {
            problem(format!("enum is not a non-empty list of strings: {members}"));
        }
    }
    if let Some(Value::String(format)) = map.get("format") {
        if !["date-time", "enum", "float", "double", "int32", "int64"].contains(&format.as_str()) {
            problem(format!("format {format:?}"));
        }
    }
    let ty = map.get("type").and_then(Value::as_str);
    if ty == Some("object") {
        let properties = map.get("properties").and_then(Value::as_object);
        if depth > 0 && properties.is_none_or(|p| p.is_empty()) {
            problem("a nested object without properties".into());
        }
        for (name, property) in properties.into_iter().flatten() {
            let fits = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !fits {
                problems.push(format!("{at}: property name {name:?}"));
            }
            gemini_check(property, &format!("{at}/properties/{name}"), depth + 1, problems);
        }
        if let Some(required) = map.get("required") {
            let names = properties.map(|p| p.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
            if required
                .as_array()
                .is_none_or(|r| r.iter().any(|n| !n.as_str().is_some_and(|n| names.iter().any(|p| p == n))))
            {
                problems.push(format!("{at}: required names something that is not a property: {required}"));
            }
        }
    } else if ["properties", "required", "minProperties", "maxProperties"].iter().any(|k| map.contains_key(*k)) {
        problems.push(format!("{at}: object keywords on a schema that is not an object"));
    }
    if ty == Some("array") {
        match map.get("items") {
            Some(items) => gemini_check(items, &format!("{at}/items"), depth + 1, problems),
            None => problems.push(format!("{at}: an array without items")),
        }
    } else if map.contains_key("items") {
        problems.push(format!("{at}: items on a schema that is not an array"));
    }
    if let Some(branches) = map.get("anyOf") {
        match branches.as_array() {
            Some(branches) if branches.len() > 1 => {
                for (i, branch) in branches.iter().enumerate() {
                    gemini_check(branch, &format!("{at}/anyOf/{i}"), depth + 1, problems);
                }
            }
            _ => problems.push(format!("{at}: anyOf is not a list of two or more schemas")),
        }
    }
}

/// The top-level parameter names Gemini is sent: `-` written `_`, nothing lost or invented.
fn gemini_same_arguments(input: &Value, tool: &Value) -> Option<String> {
    let expected: Vec<String> = input
        .get("properties")
        .and_then(Value::as_object)
        .map_or(Vec::new(), |p| p.keys().map(|k| k.replace('-', "_")).collect());
    let sent: Vec<String> =
        tool["function"]["parameters"]["properties"].as_object().map_or(Vec::new(), |p| p.keys().cloned().collect());
    (expected != sent).then(|| format!("parameters {expected:?} were sent as {sent:?}"))
}

/// The rewrite's result obeys every `Schema` rule and keeps every argument, and the projection
/// agrees; or the tool is refused as pinned. The strict rewrite's output (type lists with null,
/// null in enums) goes through as well.
fn gemini_conformance(case: &Case) -> Result<(), Failed> {
    let result = gemini_openai_tool(&case.openai);
    if let Some(projected) = &case.projected_gemini {
        let expected = result.clone().unwrap_or(Value::Null);
        if projected != &expected {
            return fail(format!(
                "schema::tool_schema(Gemini) differs from gemini_openai_tool:\n{projected}\n{expected}"
            ));
        }
    }
    let tool = match (result, gemini_pinned(&case.name)) {
        (Err(refusal), Some(reason)) if refusal.to_string() == reason => return Ok(()),
        (Err(refusal), _) => return fail(format!("refused: {refusal}")),
        (Ok(_), Some(reason)) => return fail(format!("pinned as refused ({reason}) but rewritten")),
        (Ok(tool), None) => tool,
    };
    let mut problems = gemini_violations(&tool);
    problems.extend(gemini_same_arguments(case.parameters(), &tool));
    if let Ok(strict) = strict_schema(case.parameters()) {
        let mut strict_tool = case.openai.clone();
        strict_tool["function"]["parameters"] = strict;
        match gemini_openai_tool(&strict_tool) {
            Ok(out) => problems.extend(gemini_violations(&out).into_iter().map(|p| format!("after strict: {p}"))),
            Err(refusal) => problems.push(format!("its strict rewrite is refused: {refusal}")),
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        fail(format!("{}\nrewritten: {tool:#}", problems.join("\n")))
    }
}

fn gemini_idempotent(case: &Case) -> Result<(), Failed> {
    let before = text(&case.openai);
    let Ok(once) = gemini_openai_tool(&case.openai) else { return Ok(()) };
    if text(&case.openai) != before {
        return fail("the rewrite changed its input");
    }
    let twice = gemini_openai_tool(&once).map_err(|r| Failed::from(format!("its own output was refused: {r}")))?;
    if text(&twice) != text(&once) {
        return fail(format!("f(f(x)) != f(x):\n{once}\n{twice}"));
    }
    Ok(())
}

fn gemini_refusals_are_pinned(cases: &[Case]) -> Result<(), Failed> {
    let refused: BTreeMap<&str, String> = cases
        .iter()
        .filter_map(|c| gemini_openai_tool(&c.openai).err().map(|r| (c.name.as_str(), r.to_string())))
        .collect();
    let expected: BTreeMap<&str, String> = GEMINI_PINNED_REFUSALS.iter().map(|(t, r)| (*t, r.to_string())).collect();
    if refused == expected {
        Ok(())
    } else {
        fail(format!("refused {refused:#?}\npinned {expected:#?}"))
    }
}

/// The Gemini validator is only worth what it catches: each tool here breaks one rule.
fn gemini_validator_finds_each_broken_rule() -> Result<(), Failed> {
    let tool = |parameters: Value| json!({"type": "function", "function": {"name": "t", "parameters": parameters}});
    let with = |property: Value| tool(json!({"type": "object", "properties": {"p": property}}));
    let broken = [
        ("$schema", tool(json!({"$schema": "x", "type": "object", "properties": {"p": {"type": "string"}}}))),
        (
            "additionalProperties",
            tool(json!({"type": "object", "properties": {"p": {"type": "string"}}, "additionalProperties": false})),
        ),
        ("a type list", with(json!({"type": ["string", "null"]}))),
        ("a null type", with(json!({"type": "null"}))),
        ("type beside anyOf", with(json!({"type": "string", "anyOf": [{"type": "string"}, {"type": "integer"}]}))),
        ("oneOf", with(json!({"oneOf": [{"type": "string"}, {"type": "integer"}]}))),
        ("$ref", with(json!({"$ref": "#/$defs/x"}))),
        ("an enum of numbers", with(json!({"type": "integer", "enum": [1, 2]}))),
        ("null in an enum", with(json!({"type": "string", "enum": ["a", null]}))),
        ("format uri", with(json!({"type": "string", "format": "uri"}))),
        ("const", with(json!({"type": "string", "const": "a"}))),
        ("an array without items", with(json!({"type": "array"}))),
        ("items on a string", with(json!({"type": "string", "items": {"type": "string"}}))),
        ("a nested free-form object", with(json!({"type": "object"}))),
        ("a - in a property name", tool(json!({"type": "object", "properties": {"a-b": {"type": "string"}}}))),
        (
            "required naming no property",
            tool(json!({"type": "object", "properties": {"p": {"type": "string"}}, "required": ["q"]})),
        ),
        ("empty parameters", tool(json!({"type": "object", "properties": {}}))),
        ("a function name with a leading digit", json!({"type": "function", "function": {"name": "9t"}})),
    ];
    let missed: Vec<&str> =
        broken.iter().filter(|(_, t)| gemini_violations(t).is_empty()).map(|(what, _)| *what).collect();
    let fine = with(json!({"type": "string", "nullable": true, "enum": ["a"], "description": "P"}));
    match (missed.is_empty(), gemini_violations(&fine).is_empty()) {
        (true, true) => Ok(()),
        (false, _) => fail(format!("the Gemini validator missed: {missed:?}")),
        (_, false) => fail(format!("the Gemini validator refused a good tool: {:?}", gemini_violations(&fine))),
    }
}
