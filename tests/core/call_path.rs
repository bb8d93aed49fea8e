//! The JSON call path (design section 3) and Scheme calls of the same tools (section 1), observed
//! through real tools on a real workspace.

use crate::common;

use std::sync::Arc;

use common::*;
use serde_json::{json, Value};
use steel::rvals::SteelVal;
use toolhost::{Handler, HostBuilder, Param, ParamType, Primitive, Signature, Skipped};

#[test]
fn count_without_start_reads_from_line_one() {
    let dir = workspace(&[]);
    let mut host = host(&dir);
    let text = ok_text(&host.call_json("fs-read", r#"{"path":"a.txt","count":5}"#));
    assert_eq!(numbered_lines(&text), vec![1, 2, 3, 4, 5]);
    assert!(text.contains("next start 6"), "{text}");
}

#[test]
fn null_optionals_are_the_same_as_leaving_them_out() {
    let dir = workspace(&[]);
    let mut host = host(&dir);
    let plain = host.call_json("fs-read", r#"{"path":"a.txt"}"#);
    let nulls = host.call_json("fs-read", r#"{"path":"a.txt","start":null,"count":null}"#);
    assert_eq!((&plain.result, &plain.notes), (&nulls.result, &nulls.notes));
    assert_eq!(numbered_lines(&ok_text(&plain)).len(), 300);
}

#[test]
fn an_unknown_argument_is_refused_with_the_parameter_list() {
    let dir = workspace(&[]);
    let mut host = host(&dir);
    let (kind, message) = err_of(&host.call_json("fs-read", r#"{"path":"a.txt","limit":5}"#));
    assert_eq!(kind, "unknown_argument");
    assert!(message.contains("path, start, count"), "{message}");
}

#[test]
fn scheme_call_with_start_and_count_returns_exactly_that_range() {
    let dir = workspace(&[]);
    let mut host = host(&dir);
    let text = host.eval_to_string(r#"(fs-read "a.txt" 120 50)"#).unwrap();
    assert_eq!(numbered_lines(&text), (120..=169).collect::<Vec<_>>());
    assert!(!text.contains("line 170\n") && !text.contains("line 119\n"), "{text}");
}

#[test]
fn scheme_arity_errors_show_the_signature() {
    let dir = workspace(&[]);
    let mut host = host(&dir);
    let none = host.eval("(fs-read)").unwrap_err();
    assert!(
        none.message().contains("fs-read: expected 1 to 3 arguments (fs-read path [start] [count]), got 0"),
        "{none}"
    );
    let four = host.eval(r#"(fs-read "a.txt" 1 2 3)"#).unwrap_err();
    assert!(four.message().contains("(fs-read path [start] [count]), got 4"), "{four}");
    let typed = host.eval(r#"(fs-read "a.txt" "abc")"#).unwrap_err();
    assert!(typed.message().contains("fs-read: argument 2 (start) must be an integer, got \"abc\""), "{typed}");
}

#[test]
fn missing_required_wrong_type_and_bad_shapes_have_stable_kinds() {
    let dir = workspace(&[]);
    let mut host = host(&dir);
    assert_eq!(err_of(&host.call_json("fs-read", r#"{"count":2}"#)).0, "missing_argument");
    assert_eq!(err_of(&host.call_json("fs-read", r#"{"path":null}"#)).0, "missing_argument");
    assert_eq!(err_of(&host.call_json("fs-read", r#"{"path":"a.txt","start":1.5}"#)).0, "wrong_type");
    assert_eq!(err_of(&host.call_json("fs-read", r#"["a.txt"]"#)).0, "bad_arguments");
    assert_eq!(err_of(&host.call_json("fs-read", r#"{"path":"#)).0, "bad_arguments");
    let (kind, message) = err_of(&host.call_json("fs-reed", r#"{}"#));
    assert_eq!(kind, "unknown_tool");
    assert!(message.contains("fs-read"), "the message lists the tools: {message}");
    // 5.0 is the integer 5.
    let five = ok_text(&host.call_json("fs-read", r#"{"path":"a.txt","count":5.0}"#));
    assert_eq!(numbered_lines(&five).len(), 5);
}

/// A tool that returns the arguments its handler received, as JSON.
fn echo(name: &str, skipped: Skipped) -> Primitive {
    let mut sig = Signature::new(
        name,
        vec![
            Param::optional("flag", ParamType::Boolean, "a boolean"),
            Param::optional("n", ParamType::Integer, "an integer"),
            Param::optional("s", ParamType::String, "a string"),
            Param::optional("last", ParamType::String, "a later one"),
        ],
    );
    sig.skipped = skipped;
    let handler =
        Arc::new(|_: &toolhost::ToolCtx, args: &[SteelVal]| Ok(SteelVal::ListV(args.iter().cloned().collect())));
    Primitive::new(sig, "Echo the arguments received.", Handler::Rust(handler))
}

#[test]
fn skips_as_void_passes_false_zero_and_empty_as_given_and_void_for_skipped() {
    let dir = workspace(&[]);
    let mut host = HostBuilder::new(dir.path())
        .tool(echo("srv.echo", Skipped::Void))
        .tool(echo("typed-echo", Skipped::TypedEmpty))
        .build()
        .unwrap();
    let given = host.call("srv.echo", json!({"flag": false, "n": 0, "s": ""}));
    assert_eq!(given.result.unwrap(), json!([false, 0, ""]));
    let skipped = host.call("srv.echo", json!({"last": "x"}));
    assert_eq!(skipped.result.unwrap(), json!([null, null, null, "x"]));
    // Host primitives get typed empty values instead.
    let typed = host.call("typed-echo", json!({"last": "x"}));
    assert_eq!(typed.result.unwrap(), json!([false, 0, "", "x"]));
    // The provider form of the name reaches the same tool.
    assert_eq!(host.call("srv__echo", json!({"n": 3})).result.unwrap(), json!([null, 3]));
}

#[test]
fn results_keep_integers_and_refuse_nan_and_procedures_without_panicking() {
    let dir = workspace(&[(
        ".toolhost/tools/results.scm",
        r#"
(define-tool (give-int) "An integer." 5)
(define-tool (give-map) "A map." (hash "b" 1 'a (list 1.5 "x")))
(define-tool (give-proc) "A procedure." (lambda (x) x))
"#,
    )]);
    let nan = Primitive::new(
        Signature::new("give-nan", vec![]),
        "NaN.",
        Handler::Rust(Arc::new(|_: &toolhost::ToolCtx, _: &[SteelVal]| Ok(SteelVal::NumV(f64::NAN)))),
    );
    let boom = Primitive::new(
        Signature::new("boom", vec![]),
        "Panics.",
        Handler::Rust(Arc::new(|_: &toolhost::ToolCtx, _: &[SteelVal]| -> toolhost::Result<SteelVal> {
            panic!("boom")
        })),
    );
    let mut host = HostBuilder::new(dir.path()).tool(nan).tool(boom).build().unwrap();
    assert!(host.load_errors().is_empty(), "{:?}", host.load_errors());
    assert_eq!(host.call("give-int", json!({})).result.unwrap(), json!(5));
    assert_eq!(host.call("give-map", json!({})).result.unwrap().to_string(), r#"{"a":[1.5,"x"],"b":1}"#);
    let (kind, message) = err_of(&host.call("give-proc", json!({})));
    assert_eq!(kind, "tool_failed");
    assert!(message.starts_with("give-proc:"), "{message}");
    assert_eq!(err_of(&host.call("give-nan", json!({}))).0, "tool_failed");
    assert_eq!(err_of(&host.call("boom", json!({}))).0, "tool_failed");
    // The host is still usable after all of that.
    assert_eq!(host.eval_to_string("(+ 1 2)").unwrap(), "3");
}

#[test]
fn call_outcome_json_has_the_documented_shape() {
    let dir = workspace(&[]);
    let mut host = host(&dir);
    let ok = host.call_json("fs-read", r#"{"path":"a.txt","count":1}"#).to_json();
    assert_eq!(ok["ok"], json!(true));
    assert!(ok["result"].as_str().unwrap().starts_with("1\tline 1"));
    assert_eq!(ok["notes"], json!([]));
    let err = host.call_json("fs-read", r#"{"path":"a.txt","limit":1}"#).to_json();
    assert_eq!(err["ok"], json!(false));
    assert_eq!(err["error"]["kind"], json!("unknown_argument"));
    assert!(err["error"]["message"].is_string());
    let keys: Vec<&String> = err.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["ok", "error", "notes"]);
}

#[test]
fn deep_or_huge_json_arguments_are_errors_not_crashes() {
    let dir = workspace(&[]);
    let mut host = host(&dir);
    let deep = format!("{{\"path\":{}\"a\"{}}}", "[".repeat(100_000), "]".repeat(100_000));
    assert_eq!(err_of(&host.call_json("fs-read", &deep)).0, "bad_arguments");
    let mut nested = json!("x");
    for _ in 0..120 {
        nested = json!([nested]);
    }
    // Within serde's limit but a string parameter: a wrong type, described briefly.
    let (kind, message) = err_of(&host.call("fs-read", json!({"path": nested})));
    assert_eq!(kind, "wrong_type");
    assert!(message.len() < 300, "{message}");
    let huge = "x".repeat(5_000_000);
    assert_eq!(err_of(&host.call("fs-read", json!({"path": huge}))).0, "tool_failed");
}

#[test]
fn scheme_and_json_calls_give_the_same_values() {
    let dir = workspace(&[]);
    let mut host = host(&dir);
    let scheme = host.eval_to_string(r#"(fs-read "a.txt" 0 7)"#).unwrap();
    let json = ok_text(&host.call_json("fs-read", r#"{"path":"a.txt","count":7}"#));
    assert_eq!(scheme, json);
    let value: Value =
        serde_json::from_str(&host.call_json("fs-read", r#"{"path":"a.txt"}"#).to_json().to_string()).unwrap();
    assert_eq!(value["ok"], json!(true));
}

#[test]
fn the_record_keeps_tidied_arguments_only_when_tidying_changed_them() {
    let dir = workspace(&[("a.txt", "one\ntwo\n")]);
    let mut host = host(&dir);
    let plain = host.call_json("fs-read", r#"{"path": "a.txt", "count": 1}"#);
    assert_eq!(plain.arguments, json!({"path": "a.txt", "count": 1}));
    assert_eq!(plain.tidied, None, "nothing to tidy: the tool got the arguments as received");
    let tidied = host.call_json("fs-read", r#"{"path": "a.txt", "count": "1"}"#);
    assert_eq!(tidied.arguments, json!({"path": "a.txt", "count": "1"}));
    assert_eq!(tidied.tidied, Some(json!({"path": "a.txt", "count": 1})));
    assert_eq!(ok_text(&plain), ok_text(&tidied));
    let repeated = host.call_json("fs-read", r#"{"path": "a.txt", "path": "b.txt"}"#);
    assert_eq!(err_of(&repeated).0, "bad_arguments", "a key given twice is refused");
    assert_eq!(repeated.arguments, json!({"path": "b.txt"}), "the record keeps what a JSON parser keeps");
}
