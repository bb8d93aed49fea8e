//! The model boundary through the real call path and the real catalogue: tidying what a model sent
//! (design section 4), the strict-provider null drop (section 6), and the provider schemas and
//! their name mapping (section 5). The strict rewrite's own conformance sweep is tests/strict.rs.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use toolhost::guard::{Action, Answer, ConfirmRequest, Guard, Rule};
use toolhost::param::provider_name;
use toolhost::registry::RustHandler;
use toolhost::schema::{catalogue, tool_schema, Format};
use toolhost::{CallOptions, CallRecord, Handler, Host, HostBuilder, Param, ParamType, Primitive, Registry};
use toolhost::{Signature, Skipped};

const ALL_FORMATS: [Format; 4] = [Format::OpenAi, Format::OpenAiStrict, Format::Anthropic, Format::Mcp];

/// A workspace with a real file in it.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\nfour\n").unwrap();
    dir
}

/// A tool that returns what its handler received: how many arguments, and each as JSON. One
/// parameter of every type, so each tidy rule has something to act on.
fn echo_args() -> Primitive {
    let params = vec![
        Param::required("text", ParamType::String, "Some text"),
        Param::optional("tags", ParamType::List, "A list"),
        Param::optional("count", ParamType::Integer, "An integer"),
        Param::optional("ratio", ParamType::Number, "A number"),
        Param::optional("flag", ParamType::Boolean, "A boolean"),
        Param::optional("opts", ParamType::Object, "An object"),
    ];
    let handler: RustHandler = Arc::new(|_ctx, args| {
        let args: Vec<Value> = args.iter().map(|a| toolhost::value::scheme_to_json(a).unwrap()).collect();
        let result = json!({"received": args.len(), "args": args});
        Ok(toolhost::value::json_to_scheme(&result, ParamType::Any).unwrap())
    });
    Primitive::new(Signature::new("echo-args", params), "Returns its arguments.", Handler::Rust(handler))
}

fn host(dir: &Path) -> Host {
    HostBuilder::new(dir).tool(echo_args()).build().unwrap()
}

fn ok(outcome: &CallRecord) -> &Value {
    match &outcome.result {
        Ok(v) => v,
        Err(e) => panic!("the call failed: {} ({})", e.message(), e.kind().as_str()),
    }
}

fn error_kind(outcome: &CallRecord) -> &'static str {
    match &outcome.result {
        Ok(v) => panic!("the call succeeded with {v}"),
        Err(e) => e.kind().as_str(),
    }
}

/// The text of the lines an fs-read result shows, without their numbers.
fn shown_lines(text: &str) -> Vec<&str> {
    text.lines().filter_map(|l| l.split_once('\t')).map(|(_, line)| line).collect()
}

/// The JSON text of `value` as a JSON string: what a model sends when it wraps JSON in a string.
fn quoted(value: &Value) -> String {
    Value::String(value.to_string()).to_string()
}

#[test]
fn whole_arguments_sent_as_a_json_string_run_like_the_object() {
    let dir = workspace();
    let mut host = host(dir.path());
    let object = json!({"path": "a.txt", "count": 2});
    let plain = host.call_json("fs-read", &object.to_string());
    let wrapped = host.call_json("fs-read", &quoted(&object));
    assert_eq!(ok(&wrapped), ok(&plain));
    assert_eq!(shown_lines(&wrapped.model_text()), ["one", "two"]);
    assert!(plain.notes.is_empty(), "{:?}", plain.notes);
    assert_eq!(wrapped.notes.len(), 1, "{:?}", wrapped.notes);
    assert!(wrapped.notes[0].contains("fs-read") && wrapped.notes[0].contains("JSON string holding an object"));
    // `toolhost call` shows the note.
    assert_eq!(wrapped.to_json()["notes"], json!(wrapped.notes));
}

#[test]
fn a_list_parameter_sent_as_json_text_becomes_a_list() {
    let dir = workspace();
    let mut host = host(dir.path());
    let outcome = host.call_json("echo-args", r#"{"text": "t", "tags": "[\"a\",\"b\"]"}"#);
    assert_eq!(ok(&outcome)["args"], json!(["t", ["a", "b"]]));
    assert_eq!(outcome.notes.len(), 1, "{:?}", outcome.notes);
    assert!(outcome.notes[0].contains("\"tags\"") && outcome.notes[0].contains("a JSON string holding a list"));
}

#[test]
fn an_object_parameter_sent_as_json_text_becomes_an_object() {
    let dir = workspace();
    let mut host = host(dir.path());
    let outcome = host.call_json("echo-args", r#"{"text": "t", "opts": "{\"deep\": {\"k\": [1]}}"}"#);
    let args = &ok(&outcome)["args"];
    assert_eq!(args[5], json!({"deep": {"k": [1]}}));
    assert_eq!(outcome.notes.len(), 1, "{:?}", outcome.notes);
}

#[test]
fn wrapped_arguments_and_wrapped_values_are_both_unwrapped_each_with_a_note() {
    let dir = workspace();
    let mut host = host(dir.path());
    let inner = json!({"text": "t", "tags": "[1, 2]", "count": "7", "flag": "true"});
    let outcome = host.call_json("echo-args", &quoted(&inner));
    assert_eq!(ok(&outcome)["args"], json!(["t", [1, 2], 7, 0, true]));
    assert_eq!(outcome.notes.len(), 4, "{:?}", outcome.notes);
}

#[test]
fn text_that_is_not_exactly_json_is_refused_as_wrong_type() {
    let dir = workspace();
    let mut host = host(dir.path());
    for (args, parameter) in [
        (json!({"text": "t", "tags": "[1,2"}), "tags"),
        (json!({"text": "t", "tags": "a, b"}), "tags"),
        (json!({"text": "t", "tags": "{\"a\": 1}"}), "tags"),
        (json!({"text": "t", "opts": "[1]"}), "opts"),
        (json!({"text": "t", "opts": "{\"a\": 1"}), "opts"),
        (json!({"text": "t", "count": " 2480"}), "count"),
        (json!({"text": "t", "count": "2480 lines"}), "count"),
        (json!({"text": "t", "count": "2480.5"}), "count"),
        (json!({"text": "t", "count": ""}), "count"),
        (json!({"text": "t", "ratio": "0x10"}), "ratio"),
    ] {
        let outcome = host.call_json("echo-args", &args.to_string());
        assert_eq!(error_kind(&outcome), "wrong_type", "{args}");
        let err = outcome.result.as_ref().unwrap_err();
        assert_eq!(err.parameter(), Some(parameter), "{args}");
        assert!(outcome.notes.is_empty(), "{args}: {:?}", outcome.notes);
    }
    // The whole arguments as a string that is not a JSON object stays a string, and is refused.
    for text in ["{\"text\": \"t\"", "[\"t\"]", "text=t"] {
        let outcome = host.call_json("echo-args", &Value::String(text.into()).to_string());
        assert_eq!(error_kind(&outcome), "bad_arguments", "{text}");
        assert!(outcome.notes.is_empty());
    }
}

#[test]
fn a_numeric_string_for_an_integer_or_number_becomes_the_number() {
    let dir = workspace();
    let mut host = host(dir.path());
    let outcome = host.call_json("echo-args", r#"{"text": "t", "count": "2480", "ratio": "-0.25"}"#);
    assert_eq!(ok(&outcome)["args"], json!(["t", [], 2480, -0.25]));
    assert_eq!(outcome.notes.len(), 2, "{:?}", outcome.notes);
    assert!(outcome.notes[0].contains("\"count\"") && outcome.notes[0].contains("read as 2480"), "{:?}", outcome.notes);

    // A real tool: fs-read's start sent as text reads from that line.
    let outcome = host.call_json("fs-read", r#"{"path": "a.txt", "start": "3", "count": "1"}"#);
    assert_eq!(shown_lines(&outcome.model_text()), ["three"]);
    assert_eq!(outcome.notes.len(), 2);
}

#[test]
fn only_true_and_false_are_read_as_booleans() {
    let dir = workspace();
    let mut host = host(dir.path());
    let outcome = host.call_json("fs-edit", r#"{"path": "a.txt", "old": "o", "new": "0", "replace-all": "true"}"#);
    ok(&outcome);
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "0ne\ntw0\nthree\nf0ur\n");
    assert_eq!(outcome.notes.len(), 1, "{:?}", outcome.notes);

    for text in ["yes", "True", "1", " true"] {
        let args = json!({"path": "a.txt", "old": "0", "new": "o", "replace-all": text});
        let outcome = host.call_json("fs-edit", &args.to_string());
        assert_eq!(error_kind(&outcome), "wrong_type", "{text}");
        assert!(outcome.notes.is_empty());
    }
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "0ne\ntw0\nthree\nf0ur\n");
}

#[test]
fn names_the_tool_does_not_have_stay_unknown_argument_errors() {
    let dir = workspace();
    let mut host = host(dir.path());
    for name in ["limit", "offset", "timeout", "commentary", "parameters"] {
        let args = json!({"path": "a.txt", name: 5});
        for sent in [args.to_string(), quoted(&args)] {
            let outcome = host.call_json("fs-read", &sent);
            assert_eq!(error_kind(&outcome), "unknown_argument", "{sent}");
            let err = outcome.result.as_ref().unwrap_err();
            assert_eq!(err.parameter(), Some(name));
            assert!(err.message().contains("its parameters are path, start, count"), "{}", err.message());
        }
    }
    // `parameters` holding the real arguments, as some models nest them, is not unwrapped either.
    let outcome = host.call_json("fs-read", r#"{"parameters": {"path": "a.txt"}}"#);
    assert_eq!(error_kind(&outcome), "unknown_argument");
}

#[test]
fn the_guard_judges_the_tidied_call() {
    let dir = workspace();
    let previews = Arc::new(Mutex::new(Vec::new()));
    let seen = previews.clone();
    let guard = Guard::default().rule(Rule::new("echo-args", Action::Confirm).unwrap()).confirmer(Arc::new(
        move |request: &ConfirmRequest<'_>| {
            seen.lock().unwrap().push(request.preview.to_string());
            Answer { yes: true, by: "test".into() }
        },
    ));
    let mut host = HostBuilder::new(dir.path()).tool(echo_args()).guard(guard).build().unwrap();
    let outcome = host.call_json("echo-args", &quoted(&json!({"text": "t", "tags": "[\"x\"]", "count": "3"})));
    ok(&outcome);
    assert_eq!(*previews.lock().unwrap(), vec![r#"echo-args(text: "t", tags: ["x"], count: 3)"#.to_string()]);
}

#[test]
fn strict_calls_drop_top_level_nulls_and_keep_nested_ones() {
    let dir = workspace();
    let mut host = host(dir.path());
    let strict = CallOptions { strict: true, ..CallOptions::default() };

    // What a strict model sends for optionals it leaves out reaches the handler as if left out.
    let with_nulls = json!({"text": "t", "tags": null, "count": 4, "ratio": null, "flag": null, "opts": null});
    let outcome = host.call_json_with("echo-args", &with_nulls.to_string(), strict);
    let left_out = host.call_json("echo-args", r#"{"text": "t", "count": 4}"#);
    assert_eq!(ok(&outcome), ok(&left_out));
    assert_eq!(ok(&outcome)["received"], 3);

    // Nested nulls are data.
    let nested = json!({"text": "t", "tags": [null, 1], "opts": {"k": null, "deep": {"n": null}}});
    let outcome = host.call_json_with("echo-args", &nested.to_string(), strict);
    let args = &ok(&outcome)["args"];
    assert_eq!(args[1], json!([null, 1]));
    assert_eq!(args[5], json!({"k": null, "deep": {"n": null}}));

    // The drop is top-level and by value, before names are checked: a null under a name the tool
    // does not have is gone in strict mode, and an error otherwise.
    let unknown_null = r#"{"text": "t", "limit": null}"#;
    assert_eq!(ok(&host.call_json_with("echo-args", unknown_null, strict))["received"], 1);
    assert_eq!(error_kind(&host.call_json("echo-args", unknown_null)), "unknown_argument");

    // A required argument sent as null is then missing, as if left out.
    let outcome = host.call_json_with("echo-args", r#"{"text": null}"#, strict);
    assert_eq!(error_kind(&outcome), "missing_argument");
    assert!(outcome.result.as_ref().unwrap_err().message().contains("\"text\" is missing"));
    let outcome = host.call_json("echo-args", r#"{"text": null}"#);
    assert!(outcome.result.as_ref().unwrap_err().message().contains("\"text\" is null"));
}

/// A fixture's `tools` array, captured from an MCP reference server by tests/fixtures/mcp/capture.mjs.
fn fixture(server: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/mcp/server-{server}.json"));
    let text = std::fs::read_to_string(&path).unwrap();
    let Value::Array(tools) = serde_json::from_str(&text).unwrap() else { panic!("{} is not a list", path.display()) };
    assert!(!tools.is_empty());
    tools
}

const SERVERS: [&str; 2] = ["everything", "filesystem"];

/// An MCP tool as toolhost registers it: `server.tool`, its inputSchema's properties as parameters
/// (required ones first, as signatures must have them), skipped ones as void. The handler returns
/// the real name it was registered under, so a call shows which tool it reached.
fn mcp_primitive(server: &str, tool: &Value) -> Primitive {
    let name = format!("{server}.{}", tool["name"].as_str().unwrap());
    let schema = &tool["inputSchema"];
    let required: Vec<&str> =
        schema["required"].as_array().map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    let ty = |s: &Value| match s["type"].as_str() {
        Some("string") => ParamType::String,
        Some("integer") => ParamType::Integer,
        Some("number") => ParamType::Number,
        Some("boolean") => ParamType::Boolean,
        Some("array") => ParamType::List,
        Some("object") => ParamType::Object,
        _ => ParamType::Any,
    };
    let mut params = Vec::new();
    let properties = schema["properties"].as_object().cloned().unwrap_or_default();
    for want_required in [true, false] {
        for (pname, pschema) in &properties {
            if required.contains(&pname.as_str()) == want_required {
                let description = pschema["description"].as_str().unwrap_or("").to_string();
                params.push(Param { name: pname.clone(), ty: ty(pschema), description, optional: !want_required });
            }
        }
    }
    let mut signature = Signature::new(name.clone(), params);
    signature.skipped = Skipped::Void;
    let reached = name.clone();
    let handler: RustHandler =
        Arc::new(move |_ctx, _args| Ok(toolhost::value::json_to_scheme(&json!(reached), ParamType::Any).unwrap()));
    let description = tool["description"].as_str().unwrap_or("").to_string();
    Primitive::new(signature, description, Handler::Rust(handler))
}

fn sendable(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[test]
fn every_fixture_tool_name_maps_to_a_sendable_name_and_back() {
    let mut registry = Registry::new();
    let mut names = Vec::new();
    for server in SERVERS {
        for tool in fixture(server) {
            let primitive = mcp_primitive(server, &tool);
            names.push(primitive.name().to_string());
            registry.register(primitive).unwrap();
        }
    }
    assert!(names.len() > 20, "the fixtures hold {} tools", names.len());
    for real in &names {
        let mapped = provider_name(real).unwrap_or_else(|| panic!("{real} cannot be sent"));
        assert!(sendable(&mapped), "{real} is sent as {mapped}");
        assert!(!mapped.contains('.'), "{mapped}");
        assert_eq!(registry.get_by_provider_name(&mapped).map(|p| p.name()), Some(real.as_str()), "{real}");
        // The real name still finds it too.
        assert_eq!(registry.get_by_provider_name(real).map(|p| p.name()), Some(real.as_str()));
        let tool = registry.get(real).unwrap();
        assert_eq!(tool_schema(&tool.spec, Format::OpenAi)["function"]["name"], json!(mapped));
        assert_eq!(tool_schema(&tool.spec, Format::OpenAiStrict)["function"]["name"], json!(mapped));
        assert_eq!(tool_schema(&tool.spec, Format::Anthropic)["name"], json!(mapped));
    }
}

/// One argument of the parameter's type, so a call passes conversion.
fn sample(ty: ParamType) -> Value {
    match ty {
        ParamType::String | ParamType::Any => json!("x"),
        ParamType::Integer | ParamType::Number => json!(1),
        ParamType::Boolean => json!(false),
        ParamType::List => json!([]),
        ParamType::Object => json!({}),
    }
}

#[test]
fn calls_to_mapped_names_reach_the_real_tool() {
    let dir = workspace();
    let mut host = Host::new(dir.path()).unwrap();
    let mut tools = Vec::new();
    for server in SERVERS {
        for tool in fixture(server) {
            let primitive = mcp_primitive(server, &tool);
            let args: serde_json::Map<String, Value> = primitive
                .signature()
                .params
                .iter()
                .filter(|p| !p.optional)
                .map(|p| (p.name.clone(), sample(p.ty)))
                .collect();
            tools.push((primitive.name().to_string(), Value::Object(args)));
            host.register(primitive).unwrap();
        }
    }
    for (real, args) in tools {
        let mapped = provider_name(&real).unwrap();
        let outcome = host.call_json(&mapped, &args.to_string());
        assert_eq!(ok(&outcome), &json!(real), "{mapped}");
    }
    assert_eq!(error_kind(&host.call_json("filesystem__no_such_tool", "{}")), "unknown_tool");
}

/// Every place an object carries the key `default`, as JSON Pointers.
fn defaults(value: &Value, at: &str, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let here = format!("{at}/{key}");
                if key == "default" {
                    found.push(here.clone());
                }
                defaults(child, &here, found);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                defaults(child, &format!("{at}/{i}"), found);
            }
        }
        _ => {}
    }
}

#[test]
fn no_emitted_schema_carries_a_default_in_any_format() {
    // The fixtures themselves carry defaults, so the search below is one that finds them.
    let mut in_fixtures = Vec::new();
    for server in SERVERS {
        defaults(&Value::Array(fixture(server)), "", &mut in_fixtures);
    }
    assert!(in_fixtures.len() > 10, "{in_fixtures:?}");

    let dir = workspace();
    let mut host = Host::new(dir.path()).unwrap();
    for server in SERVERS {
        for tool in fixture(server) {
            host.register(mcp_primitive(server, &tool)).unwrap();
        }
    }
    let registry = host.registry();
    assert!(registry.len() > 35, "{} tools", registry.len());
    for format in ALL_FORMATS {
        let emitted = catalogue(registry.iter().map(|t| t.spec.as_ref()), format);
        let mut found = Vec::new();
        defaults(&emitted, "", &mut found);
        assert!(found.is_empty(), "{format:?}: {found:?}");
    }
    // The captured schemas as they are, rewritten for a strict provider (the ones it refuses are
    // pinned in tests/strict.rs and sent untouched).
    let mut rewritten = 0;
    for server in SERVERS {
        for tool in fixture(server) {
            let Ok(strict) = toolhost::strict::strict_schema(&tool["inputSchema"]) else { continue };
            rewritten += 1;
            let mut found = Vec::new();
            defaults(&strict, "", &mut found);
            assert!(found.is_empty(), "{}: {found:?}", tool["name"]);
        }
    }
    assert!(rewritten > 20, "{rewritten}");
}

#[test]
fn catalogue_properties_keep_declared_order_and_required_lists_only_required() {
    let dir = workspace();
    let host = host(dir.path());
    let registry = host.registry();
    assert!(registry.get("fs-read").is_some() && registry.get("git-log").is_some(), "built-in and Scheme tools");
    for tool in registry.iter() {
        let declared: Vec<&str> = tool.signature().params.iter().map(|p| p.name.as_str()).collect();
        let required: Vec<&str> =
            tool.signature().params.iter().filter(|p| !p.optional).map(|p| p.name.as_str()).collect();
        for (format, parameters) in [
            (Format::OpenAi, tool_schema(&tool.spec, Format::OpenAi)["function"]["parameters"].clone()),
            (Format::Anthropic, tool_schema(&tool.spec, Format::Anthropic)["input_schema"].clone()),
            (Format::Mcp, tool_schema(&tool.spec, Format::Mcp)["inputSchema"].clone()),
        ] {
            let keys: Vec<&str> = parameters["properties"].as_object().unwrap().keys().map(String::as_str).collect();
            assert_eq!(keys, declared, "{} {format:?}", tool.name());
            assert_eq!(parameters["required"], json!(required), "{} {format:?}", tool.name());
        }
        // Strict mode lists them all, in the same order. An `object` parameter is a free-form map
        // and an `any` parameter is unconstrained, so a tool with one is sent non-strict.
        let strict = tool_schema(&tool.spec, Format::OpenAiStrict);
        let expressible = tool.signature().params.iter().all(|p| !matches!(p.ty, ParamType::Object | ParamType::Any));
        assert_eq!(strict["function"]["strict"], json!(expressible), "{}", tool.name());
        if expressible {
            assert_eq!(strict["function"]["parameters"]["required"], json!(declared), "{}", tool.name());
        }
    }
    assert_eq!(
        tool_schema(&registry.get("echo-args").unwrap().spec, Format::OpenAiStrict)["function"]["strict"],
        false
    );
    let fs_read = tool_schema(&registry.get("fs-read").unwrap().spec, Format::OpenAi);
    assert_eq!(fs_read["function"]["parameters"]["required"], json!(["path"]));
}

#[test]
fn toolhost_call_prints_the_tidy_notes() {
    let dir = workspace();
    let args = quoted(&json!({"path": "a.txt", "count": "1"}));
    // A home of its own, so the real user's config and trust store are never read.
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .current_dir(dir.path())
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path())
        .args(["call", "fs-read", &args])
        .output()
        .unwrap();
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["ok"], true, "{printed}");
    let notes = printed["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 2, "{printed}");
    assert!(notes[0].as_str().unwrap().contains("JSON string holding an object"), "{printed}");
    assert!(notes[1].as_str().unwrap().contains("\"count\""), "{printed}");
}

/// Whatever text arrives as a call's arguments (random text, JSON-shaped objects with repeated,
/// unknown or mistyped keys, wrapped in a string or not), the call path answers with a record of a
/// known kind, never a panic; and a key given twice is always refused naming it.
#[test]
fn any_argument_text_comes_back_as_a_record_and_repeated_keys_are_refused() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    let dir = workspace();
    let host = std::cell::RefCell::new(host(dir.path()));
    let object = r#"\{( *"(text|tags|count|ratio|flag|opts|path|x)" *: *("[a-z. /\\]{0,8}"|-?[0-9]{1,4}(\.[0-9])?|true|false|null|\[[0-9,]{0,5}\]|\{\}) *,?){0,5}\}"#;
    let text = prop_oneof![
        ".{0,60}",
        object,
        proptest::string::string_regex(object).unwrap().prop_map(|o| serde_json::to_string(&o).unwrap()),
    ];
    let tool = proptest::sample::select(vec!["echo-args", "fs-read", "fs-list", "nope"]);
    let known = [
        "unknown_tool",
        "unknown_argument",
        "missing_argument",
        "wrong_type",
        "bad_arguments",
        "denied",
        "tool_failed",
    ];
    let mut runner = TestRunner::new(Config { cases: 400, failure_persistence: None, ..Config::default() });
    runner
        .run(&(tool, text), |(tool, text)| {
            let record = host.borrow_mut().call_json(tool, &text);
            if let Err(e) = &record.result {
                prop_assert!(known.contains(&e.kind().as_str()), "{tool} {text}: {e}");
            }
            Ok(())
        })
        .unwrap();
    let repeated = host.borrow_mut().call_json("echo-args", r#"{"text":"a","count":1,"text":"b"}"#);
    assert_eq!(error_kind(&repeated), "bad_arguments");
}

/// `(kind, parameter)` of each repair a record keeps, in order.
fn repairs(outcome: &CallRecord) -> Vec<(&'static str, Option<&str>)> {
    outcome.repairs.iter().map(|r| (r.kind.as_str(), r.parameter.as_deref())).collect()
}

#[test]
fn each_change_to_the_arguments_is_recorded_as_a_repair_of_its_kind_beside_its_note() {
    let dir = workspace();
    let mut host = host(dir.path());
    let inner = json!({"text": "t", "tags": "[1]", "opts": "{}", "count": "7", "ratio": "0.5", "flag": "false"});
    let outcome = host.call_json("echo-args", &quoted(&inner));
    ok(&outcome);
    assert_eq!(
        repairs(&outcome),
        [
            ("arguments_json_string", None),
            ("json_text_parameter", Some("tags")),
            ("numeric_string", Some("count")),
            ("numeric_string", Some("ratio")),
            ("boolean_string", Some("flag")),
            ("json_text_parameter", Some("opts")),
        ]
    );
    assert_eq!(outcome.notes.len(), outcome.repairs.len(), "one note per repair: {:?}", outcome.notes);

    // Strict nulls dropped are repairs without a note, also inside arguments sent as a string.
    let strict = CallOptions { strict: true, ..CallOptions::default() };
    let outcome = host.call_json_with("echo-args", r#"{"text": "t", "count": null, "flag": null}"#, strict);
    assert_eq!(repairs(&outcome), [("strict_null_dropped", Some("count")), ("strict_null_dropped", Some("flag"))]);
    assert!(outcome.notes.is_empty(), "{:?}", outcome.notes);
    let outcome = host.call_json_with("echo-args", &quoted(&json!({"text": "t", "ratio": null})), strict);
    assert_eq!(repairs(&outcome), [("arguments_json_string", None), ("strict_null_dropped", Some("ratio"))]);

    // Nothing changed, nothing recorded; and the record as written carries the repairs.
    assert!(host.call_json("echo-args", r#"{"text": "t", "count": 1}"#).repairs.is_empty());
    let record = host.call_json("fs-read", r#"{"path": "a.txt", "count": "1"}"#).to_record_json();
    assert_eq!(record["repairs"], json!([{"kind": "numeric_string", "parameter": "count"}]));
    let read: CallRecord = serde_json::from_value(record).unwrap();
    assert_eq!(repairs(&read), [("numeric_string", Some("count"))]);
}

#[test]
fn a_record_written_before_repairs_were_kept_still_reads() {
    let old = json!({"tool": "fs-read", "arguments": {"path": "a.txt", "count": "1"},
        "tidied": {"path": "a.txt", "count": 1}, "notes": ["fs-read: argument \"count\" was ..."],
        "decision": {"action": "allow"}, "ok": true, "result": "1\tone\n", "elapsed_ms": 0.3});
    let read: CallRecord = serde_json::from_value(old).unwrap();
    assert!(read.repairs.is_empty());
    assert_eq!(read.notes.len(), 1);
    assert!(read.to_record_json().get("repairs").is_none(), "none written when there are none");
    // A reason this toolhost does not know (a newer log's) is left out; the record still reads.
    let newer = json!({"tool": "fs-read", "arguments": "x", "notes": [], "ok": false,
        "error": {"kind": "bad_arguments", "message": "m", "reason": "from_a_later_version"}, "elapsed_ms": 0.1});
    let read: CallRecord = serde_json::from_value(newer).unwrap();
    assert_eq!(read.result.unwrap_err().reason(), None);
}

#[test]
fn bad_arguments_refusals_say_why_by_a_stable_reason() {
    let dir = workspace();
    let mut host = host(dir.path());
    for (arguments, reason) in [
        (r#"{"path": "a.txt", "path": "b.txt"}"#, "duplicate_key"),
        (r#""{\"path\": \"a.txt\", \"path\": \"b.txt\"}""#, "duplicate_key"),
        (r#"{"path": "a.txt""#, "not_json"),
        ("path=a.txt", "not_json"),
        ("[\"a.txt\"]", "not_an_object"),
        (r#""a.txt""#, "not_an_object"),
    ] {
        let outcome = host.call_json("fs-read", arguments);
        assert_eq!(error_kind(&outcome), "bad_arguments", "{arguments}");
        let error = outcome.result.as_ref().unwrap_err();
        assert_eq!(error.reason().map(|r| r.as_str()), Some(reason), "{arguments}");
        assert_eq!(outcome.to_record_json()["error"]["reason"], reason, "the record keeps it");
    }
    // Other kinds need no reason: the kind and the parameter say it all.
    let outcome = host.call_json("fs-read", r#"{"path": "a.txt", "limit": 1}"#);
    assert_eq!(outcome.result.as_ref().unwrap_err().reason(), None);
    assert!(outcome.to_record_json()["error"].get("reason").is_none());
}
