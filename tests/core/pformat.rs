//! P-format (design section 7) against a real host: calls read from model text run through the
//! JSON call path on a real workspace; rendering and parsing agree for every tool; the worked
//! examples of the instructions parse to the calls they claim; no text makes the parser panic.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{json, Map, Value};
use toolhost::pformat::{self, Call, ParsedCall};
use toolhost::{Host, Param, ParamType, Signature, SpecSet};

/// A workspace holding `a.txt`, 300 lines `line 1` .. `line 300`.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let lines: String = (1..=300).map(|n| format!("line {n}\n")).collect();
    std::fs::write(dir.path().join("a.txt"), lines).expect("write a.txt");
    dir
}

fn host(dir: &tempfile::TempDir) -> Host {
    let host = Host::new(dir.path()).expect("host");
    assert!(host.load_errors().is_empty(), "load errors: {:?}", host.load_errors());
    host
}

fn only(calls: Vec<ParsedCall>) -> ParsedCall {
    assert_eq!(calls.len(), 1, "{calls:?}");
    calls.into_iter().next().expect("one call")
}

/// The arguments as the call path will see them: tidied for the tool's signature.
fn tidied(registry: &SpecSet, call: &Call) -> Value {
    let sig = &registry.get(&call.name).expect("a registered tool").signature;
    let mut arguments = Value::Object(call.arguments.clone());
    toolhost::tidy::tidy(sig, &mut arguments);
    arguments
}

fn run(host: &mut Host, call: &Call) -> Result<String, (String, String)> {
    let outcome = host.call(&call.name, Value::Object(call.arguments.clone()));
    match outcome.result {
        Ok(Value::String(text)) => Ok(text),
        Ok(other) => Ok(other.to_string()),
        Err(e) => Err((e.kind().as_str().to_string(), e.message().to_string())),
    }
}

/// The line numbers fs-read printed, in order.
fn numbered_lines(text: &str) -> Vec<usize> {
    text.lines().filter_map(|l| l.split_once('\t')).filter_map(|(n, _)| n.parse().ok()).collect()
}

#[test]
fn sparse_fs_read_names_its_slots_and_reads_lines_one_to_five() {
    let dir = workspace();
    let mut host = host(&dir);
    let registry = host.specs();
    let call = only(pformat::parse("<tool_call>fs-read[0|a.txt|2|5]</tool_call>", &registry)).expect("read");
    assert_eq!(call.name, "fs-read");
    assert_eq!(tidied(&registry, &call), json!({"path": "a.txt", "count": 5}));
    let text = run(&mut host, &call).expect("fs-read runs");
    assert_eq!(numbered_lines(&text), vec![1, 2, 3, 4, 5], "{text}");
    assert!(text.contains("5\tline 5\n") && !text.contains("6\tline 6"), "{text}");
}

#[test]
fn bare_positional_and_one_slot_late_forms_are_refused_not_bound() {
    let dir = workspace();
    let host = host(&dir);
    let registry = host.specs();
    let cases = [
        ("index-grep[||*.rs]", "index-grep", "index-grep[0|<pattern>|1|<glob>]"),
        ("fs-read[a.txt|1|5]", "fs-read", "fs-read[0|<path>|1|<start>|2|<count>]"),
        ("fs-read[|a.txt]", "fs-read", "fs-read[0|<path>|1|<start>|2|<count>]"),
        ("fs-read[|a.txt|1|5]", "fs-read", "fs-read[0|<path>|1|<start>|2|<count>]"),
        ("fs-read[a.txt]", "fs-read", "fs-read[0|<path>|1|<start>|2|<count>]"),
        ("fs-read[a.txt|5]", "fs-read", "fs-read[0|<path>|1|<start>|2|<count>]"),
        ("index-grep[5|x|y]", "index-grep", "index-grep[0|<pattern>|1|<glob>]"),
        ("fs-read[0|a.txt|3|5]", "fs-read", "fs-read[0|<path>|1|<start>|2|<count>]"),
    ];
    for (body, tool, form) in cases {
        let text = format!("<tool_call>{body}</tool_call>");
        let error = match only(pformat::parse(&text, &registry)) {
            Ok(call) => panic!("{body} was read as {call:?}"),
            Err(error) => error,
        };
        assert_eq!(error.kind().as_str(), "bad_arguments", "{body}: {error}");
        assert_eq!(error.tool(), Some(tool), "{body}: {error}");
        assert!(error.message().contains(form), "{body}: {error}");
        assert!(error.message().contains("The call was not run"), "{body}: {error}");
    }
}

#[test]
fn an_empty_repeat_retracts_the_required_path_and_the_call_path_says_it_is_missing() {
    let dir = workspace();
    let mut host = host(&dir);
    let registry = host.specs();
    let call = only(pformat::parse("<tool_call>fs-read[0|a.txt|0|]</tool_call>", &registry)).expect("read");
    assert!(call.arguments.is_empty(), "{call:?}");
    let (kind, message) = run(&mut host, &call).expect_err("path is required");
    assert_eq!(kind, "missing_argument", "{message}");
    assert!(message.contains("\"path\""), "{message}");
}

#[test]
fn a_number_slot_holding_text_is_a_wrong_type_the_model_sees() {
    let dir = workspace();
    let mut host = host(&dir);
    let registry = host.specs();
    let call = only(pformat::parse("<tool_call>fs-read[0|a.txt|1|abc]</tool_call>", &registry)).expect("read");
    let (kind, message) = run(&mut host, &call).expect_err("abc is no integer");
    assert_eq!(kind, "wrong_type", "{message}");
    assert!(message.contains("start") && message.contains("\"abc\""), "{message}");
}

#[test]
fn a_value_with_pipe_bracket_backslash_and_newline_round_trips_into_a_real_file() {
    let dir = workspace();
    let mut host = host(&dir);
    let registry = host.specs();
    let sig = &registry.get("fs-write").expect("fs-write").signature;
    let content = "fn main() {\n    let v = [1, 2];\n    println!(\"a|b\\\\n{}\", v[0]);\n}\n";
    let arguments = json!({"path": "out/b.rs", "content": content});
    let arguments = arguments.as_object().expect("object");
    let tag = pformat::render_call(sig, arguments);
    assert!(tag.starts_with("<tool_call>fs-write[0|out/b.rs|1|fn main() {\n"), "{tag}");
    assert!(tag.contains("[1, 2\\];") && tag.contains("a\\|b\\\\\\\\n"), "{tag}");
    let call = only(pformat::parse(&format!("Writing it.\n{tag}\nDone."), &registry)).expect("read");
    assert_eq!(&call.arguments, arguments);
    run(&mut host, &call).expect("fs-write runs");
    assert_eq!(std::fs::read_to_string(dir.path().join("out/b.rs")).expect("written"), content);
}

#[test]
fn mixed_pformat_and_json_tags_in_one_reply_each_run() {
    let dir = workspace();
    let mut host = host(&dir);
    let registry = host.specs();
    let reply = "Two reads and a slip.\n\
        <tool_call>fs-read[0|a.txt|1|2|2|1]</tool_call>\n\
        then, as JSON:\n\
        <tool_call> {\"name\": \"fs-read\", \"arguments\": {\"path\": \"a.txt\", \"start\": 3, \"count\": 1}} </tool_call>\n\
        <tool_call>index-grep[||*.txt]</tool_call>\n\
        and the slip retried as JSON:\n\
        <tool_call>{\"name\":\"index-grep\",\"arguments\":{\"pattern\":\"^line 42$\",\"glob\":\"*.txt\"}}</tool_call>";
    let calls = pformat::parse(reply, &registry);
    assert_eq!(calls.len(), 4, "{calls:?}");
    let first = calls[0].as_ref().expect("P-format read");
    assert_eq!(run(&mut host, first).expect("runs").lines().next(), Some("2\tline 2"));
    let second = calls[1].as_ref().expect("JSON read");
    assert_eq!(second.arguments, *json!({"path": "a.txt", "start": 3, "count": 1}).as_object().expect("object"));
    assert_eq!(run(&mut host, second).expect("runs").lines().next(), Some("3\tline 3"));
    assert!(calls[2].is_err(), "{:?}", calls[2]);
    let retried = calls[3].as_ref().expect("JSON retry read");
    let found = run(&mut host, retried).expect("index-grep runs");
    assert!(found.contains("a.txt:42:line 42"), "{found}");
}

#[test]
fn parse_to_json_has_one_entry_per_tag() {
    let dir = workspace();
    let host = host(&dir);
    let text = "<tool_call>fs-list[]</tool_call> and <tool_call>fs-list[depth]</tool_call>";
    let out = pformat::parse_to_json(text, &host.specs());
    let entries = out.as_array().expect("array");
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0], json!({"name": "fs-list", "arguments": {}}));
    let error = entries[1]["error"].as_str().expect("error text");
    assert!(error.contains("fs-list[0|<path>|1|<depth>]"), "{error}");
    assert_eq!(entries[1].as_object().map(|o| o.len()), Some(1));
}

#[test]
fn the_catalogue_shows_placeholder_signatures_with_parameters_beneath() {
    let dir = workspace();
    let host = host(&dir);
    let text = pformat::catalogue(&host.specs());
    assert!(text.contains("fs-read[0|<path>|1|<start>|2|<count>]\n"), "{text}");
    assert!(text.contains("  0 path (string, required): File to read"), "{text}");
    assert!(text.contains("  2 count (integer, optional): "), "{text}");
    assert!(text.contains("fs-edit[0|<path>|1|<old>|2|<new>|3|<replace-all>]\n"), "{text}");
    assert!(text.contains("  3 replace-all (true or false, optional): "), "{text}");
    for primitive in host.specs().iter() {
        let form = pformat::placeholder_signature(&primitive.signature);
        assert!(text.contains(&format!("{form}\n")), "{form} missing from\n{text}");
    }
}

#[test]
fn every_worked_example_in_the_instructions_parses_to_the_call_it_claims() {
    let text = pformat::instructions();
    let registry = pformat::example_specs();
    let calls = pformat::parse(&text, &registry);
    let claims: Vec<Value> = text
        .lines()
        .filter_map(|line| line.strip_prefix("is the call "))
        .map(|claim| serde_json::from_str(claim).expect("a claim is JSON"))
        .collect();
    assert!(claims.len() >= 5, "{text}");
    assert_eq!(calls.len(), claims.len(), "every tag in the instructions is a worked example\n{text}");
    for (parsed, claim) in calls.into_iter().zip(claims) {
        let call = parsed.unwrap_or_else(|e| panic!("an example is refused: {e}\n{text}"));
        assert_eq!(json!({"name": call.name, "arguments": tidied(&registry, &call)}), claim);
    }
    // The rules the examples illustrate are spelled out.
    for rule in ["\\|", "\\]", "\\\\", "empty value", "JSON object", "last value"] {
        assert!(text.contains(rule), "the instructions do not mention {rule}\n{text}");
    }
}

// ---- properties ----

/// Strings that favour the dialect's special characters, tags, unicode and line breaks.
fn text_value() -> BoxedStrategy<String> {
    let piece = prop_oneof![
        Just("|".to_string()),
        Just("]".to_string()),
        Just("[".to_string()),
        Just("\\".to_string()),
        Just("\n".to_string()),
        Just("\r\n".to_string()),
        Just(" ".to_string()),
        Just("0".to_string()),
        Just("<tool_call>".to_string()),
        Just("</tool_call>".to_string()),
        Just("{\"name\":".to_string()),
        Just("é😀".to_string()),
        "[a-z]{1,3}".prop_map(String::from),
        any::<char>().prop_map(String::from),
    ];
    prop_oneof![
        3 => proptest::collection::vec(piece, 0..12).prop_map(|pieces| pieces.concat()),
        1 => any::<String>(),
    ]
    .boxed()
}

/// Numbers that survive a trip through JSON text exactly (binary fractions and integers).
fn number() -> BoxedStrategy<Value> {
    prop_oneof![
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<i32>().prop_map(|n| json!(f64::from(n) / 8.0)),
    ]
    .boxed()
}

fn json_value() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        text_value().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec((text_value(), inner), 0..4)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
    .boxed()
}

/// A value for a parameter of type `ty`: mostly of that type, sometimes a string (which tidy
/// may or may not turn into one), as models send them.
fn value_for(ty: ParamType) -> BoxedStrategy<Value> {
    let as_text = text_value().prop_map(Value::String);
    match ty {
        ParamType::String => as_text.boxed(),
        ParamType::Integer => prop_oneof![3 => any::<i64>().prop_map(|n| json!(n)), 1 => as_text].boxed(),
        ParamType::Number => prop_oneof![3 => number(), 1 => as_text].boxed(),
        ParamType::Boolean => prop_oneof![3 => any::<bool>().prop_map(Value::Bool), 1 => as_text].boxed(),
        ParamType::List => prop_oneof![
            3 => proptest::collection::vec(json_value(), 0..4).prop_map(Value::Array),
            1 => as_text
        ]
        .boxed(),
        ParamType::Object => prop_oneof![
            3 => json_value().prop_map(|v| json!({"k": v})),
            1 => as_text
        ]
        .boxed(),
        ParamType::Any => json_value(),
    }
}

/// An arbitrary subset of a signature's parameters with typed values; the variadic one gets a
/// list of values of its type. Sometimes an argument the tool does not have.
fn arguments_for(sig: &Signature) -> BoxedStrategy<Map<String, Value>> {
    let mut entries: Vec<BoxedStrategy<Option<(String, Value)>>> = sig
        .params
        .iter()
        .map(|p| {
            proptest::option::of(value_for(p.ty).prop_map({
                let name = p.name.clone();
                move |v| (name.clone(), v)
            }))
            .boxed()
        })
        .collect();
    if let Some(rest) = &sig.rest {
        let name = rest.name.clone();
        let items = proptest::collection::vec(value_for(rest.ty), 0..4).prop_map(Value::Array);
        entries.push(proptest::option::of(items.prop_map(move |v| (name.clone(), v))).boxed());
    }
    let stray = prop_oneof![9 => Just(None), 1 => text_value().prop_map(|v| Some(("not-a-parameter".to_string(), Value::String(v))))];
    entries.push(stray.boxed());
    entries.prop_map(|entries| entries.into_iter().flatten().collect()).boxed()
}

/// A registry with a parameter of every type, a variadic tool and a tool that skips as void, so
/// the property covers what the shipped catalogue does not.
fn every_type_registry() -> SpecSet {
    let mut registry = SpecSet::new();
    let mut all = vec![Param::required("s", ParamType::String, "")];
    all.extend(ParamType::ALL.iter().map(|ty| Param::optional(format!("{}-opt", ty.name()), *ty, "")));
    let mut variadic = Signature::new("srv.concat", vec![Param::required("first", ParamType::Integer, "")]);
    variadic.rest = Some(Param::required("more", ParamType::Any, ""));
    let mut void = Signature::new("void", vec![Param::optional("flag", ParamType::Boolean, "")]);
    void.skipped = toolhost::Skipped::Void;
    for sig in [Signature::new("typed", all), variadic, void] {
        registry.insert(std::sync::Arc::new(toolhost::ToolSpec::new(sig, ""))).expect("register");
    }
    registry
}

fn check_round_trips(registry: &SpecSet, cases: u32) {
    let sigs: Vec<Signature> = registry.iter().map(|p| p.signature.clone()).collect();
    let strategy = proptest::sample::select(sigs).prop_flat_map(|sig| {
        let args = arguments_for(&sig);
        (Just(sig), args)
    });
    let mut runner = TestRunner::new(Config { cases, ..Config::default() });
    let result = runner.run(&strategy, |(sig, arguments)| {
        let tag = pformat::render_call(&sig, &arguments);
        let reply = format!("Calling it.\n{tag}\nthen waiting.");
        let parsed = pformat::parse(&reply, registry);
        prop_assert_eq!(parsed.len(), 1, "{}", tag);
        let call = match parsed.into_iter().next() {
            Some(Ok(call)) => call,
            other => return Err(TestCaseError::fail(format!("{tag} was not read back: {other:?}"))),
        };
        prop_assert_eq!(&call.name, &sig.name);
        // Compared after tidying, as the call path sees both: P-format carries numbers, booleans
        // and JSON as text, which tidy reads back; nulls are left out, as the call path leaves
        // them out.
        let mut expected = Value::Object(arguments.into_iter().filter(|(_, v)| !v.is_null()).collect());
        toolhost::tidy::tidy(&sig, &mut expected);
        let mut got = Value::Object(call.arguments.into_iter().filter(|(_, v)| !v.is_null()).collect());
        toolhost::tidy::tidy(&sig, &mut got);
        prop_assert_eq!(got, expected, "{}", tag);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn rendering_then_parsing_gives_the_arguments_back_for_every_catalogue_tool() {
    let dir = workspace();
    let host = host(&dir);
    check_round_trips(&host.specs(), 1024);
}

#[test]
fn rendering_then_parsing_gives_the_arguments_back_for_every_parameter_type() {
    check_round_trips(&every_type_registry(), 1024);
}

fn model_text(names: Vec<String>) -> BoxedStrategy<String> {
    let piece = prop_oneof![
        Just("<tool_call>".to_string()),
        Just("</tool_call>".to_string()),
        Just("<tool_call".to_string()),
        Just("[".to_string()),
        Just("]".to_string()),
        Just("|".to_string()),
        Just("\\".to_string()),
        Just("{".to_string()),
        Just("}".to_string()),
        Just("\"name\":".to_string()),
        Just("\"arguments\":".to_string()),
        Just("\"".to_string()),
        Just(" ".to_string()),
        Just("\n".to_string()),
        "[0-9]{1,25}".prop_map(String::from),
        proptest::sample::select(names),
        any::<String>(),
    ];
    proptest::collection::vec(piece, 0..60).prop_map(|pieces| pieces.concat()).boxed()
}

#[test]
fn no_text_makes_the_parser_panic_and_every_opening_tag_gets_one_entry() {
    let dir = workspace();
    let host = host(&dir);
    let registry = host.specs();
    let mut names: Vec<String> = registry.iter().map(|p| p.name().to_string()).collect();
    names.push("srv__concat".into());
    let mut runner = TestRunner::new(Config { cases: 2048, ..Config::default() });
    let result = runner.run(&model_text(names), |text| {
        let calls = pformat::parse(&text, &registry);
        prop_assert_eq!(calls.len(), text.matches("<tool_call>").count());
        for call in calls.iter().flatten() {
            prop_assert!(registry.get(&call.name).is_some(), "{:?}", call);
        }
        let json = pformat::parse_to_json(&text, &registry);
        prop_assert_eq!(json.as_array().map(Vec::len), Some(calls.len()));
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn huge_and_deeply_nested_text_is_read_without_overflow() {
    let dir = workspace();
    let host = host(&dir);
    let registry = host.specs();
    // A reply is read for at most MAX_TAGS tags; one more entry stands for the rest.
    let many = "<tool_call>".repeat(100_000);
    assert_eq!(pformat::parse(&many, &registry).len(), pformat::MAX_TAGS + 1);
    let deep = format!("<tool_call>{}</tool_call>", "{".repeat(200_000));
    assert!(only(pformat::parse(&deep, &registry)).is_err());
    let long = format!("<tool_call>fs-write[0|x|1|{}]</tool_call>", "\\|".repeat(500_000));
    let call = only(pformat::parse(&long, &registry)).expect("read");
    assert_eq!(call.arguments["content"].as_str().map(str::len), Some(500_000));
}
