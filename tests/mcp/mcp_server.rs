//! `toolhost mcp` against the official SDK's client (`Client` + `StdioClientTransport`, in
//! tests/fixtures/mcp/client-check.mjs): the tools it lists, calls through the host's call path,
//! errors as `isError` results, confirmations without a person, and a standard output that carries
//! nothing but the protocol.

use crate::common;

use serde_json::{json, Value};

use common::{peers, workspace, Home};

/// A Scheme tool that prints to standard output before it answers.
const NOISY_TOOL: &str = r#"(define-tool (noisy (word string "A word to shout"))
  "Print a line to standard output, then return the word with an exclamation mark."
  (displayln "noise from a script")
  (string-append word "!"))
"#;

struct Session {
    tools: Vec<Value>,
    results: Vec<Value>,
    errors: Vec<Value>,
    stderr: String,
}

impl Session {
    fn tool(&self, name: &str) -> &Value {
        self.tools.iter().find(|t| t["name"] == name).unwrap_or_else(|| panic!("{name} is listed"))
    }
}

/// Runs the SDK client against `toolhost ARGS mcp` in `dir`, making `calls`.
fn session(home: &Home, dir: &std::path::Path, args: &[&str], calls: &Value) -> Session {
    let script = peers::ensure().join("client-check.mjs");
    let mut command = std::process::Command::new("node");
    command.arg(script).arg(env!("CARGO_BIN_EXE_toolhost")).arg(calls.to_string()).args(args).current_dir(dir);
    home.environment(&mut command);
    let out = command.output().expect("node runs");
    assert!(
        out.status.success(),
        "the client failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("the client prints one JSON object");
    let list = |key: &str| report[key].as_array().cloned().unwrap_or_default();
    Session {
        tools: list("tools"),
        results: list("results"),
        errors: list("errors"),
        stderr: report["stderr"].as_str().unwrap_or_default().to_string(),
    }
}

/// The text of a result, and whether it is an error.
fn text_of(result: &Value) -> (String, bool) {
    assert!(result.get("thrown").is_none(), "the call was a protocol error, not a tool result: {result}");
    let text = result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("text content: {result}"));
    (text.to_string(), result["isError"] == true)
}

fn setup() -> (tempfile::TempDir, Home, String, String) {
    let dir = workspace(&[("tools/noisy.scm", NOISY_TOOL)]);
    let home = Home::new();
    let config = format!(
        "[[guard.rule]]\ntool = \"fs-write\"\naction = \"confirm\"\n\n{}",
        peers::stdio_entry("fixture", &peers::fixture_server(), &[], None)
    );
    std::fs::write(dir.path().join("server.toml"), config).unwrap();
    let tools = dir.path().join("tools").display().to_string();
    (dir, home, "server.toml".to_string(), tools)
}

#[test]
fn the_sdk_client_lists_every_tool_and_calls_them_through_the_call_path() {
    let (dir, home, config, tools) = setup();
    let calls = json!([
        {"name": "fs-read", "arguments": {"path": "a.txt", "count": 2}},
        {"name": "fs-read", "arguments": {"path": "a.txt", "start": "5", "count": "1"}},
        {"name": "fs-read", "arguments": {"path": "a.txt", "limit": 5}},
        {"name": "noisy", "arguments": {"word": "hi"}},
        {"name": "fs-write", "arguments": {"path": "b.txt", "content": "x"}},
        {"name": "fixture.args", "arguments": {"text": "via toolhost", "flag": false}},
        {"name": "no-such-tool", "arguments": {}},
    ]);
    let args = ["--config", &config, "--tools", &tools];
    let session = session(&home, dir.path(), &args, &calls);
    // Every message parsed, though a script printed to standard output.
    assert!(session.errors.is_empty(), "the client reported errors: {:?}", session.errors);
    assert!(session.stderr.contains("noise from a script"), "{}", session.stderr);

    // The listing is the one projection point's MCP shape, tool for tool.
    let mut command = home.command(dir.path(), &["--config", &config, "--tools", &tools, "tools", "--format", "mcp"]);
    let out = command.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let catalogue: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(session.tools.len(), catalogue.len());
    for expected in &catalogue {
        let listed = session.tool(expected["name"].as_str().unwrap());
        for key in ["description", "inputSchema", "annotations"] {
            assert_eq!(listed[key], expected[key], "{key} of {}", expected["name"]);
        }
    }
    // Built-in, shipped Scheme, --tools Scheme, and the MCP tools it is a client of.
    let fs_read = session.tool("fs-read");
    assert_eq!(fs_read["inputSchema"]["required"], json!(["path"]));
    assert_eq!(fs_read["inputSchema"]["properties"]["start"]["type"], "integer");
    assert_eq!(fs_read["annotations"], json!({"readOnlyHint": true, "destructiveHint": false}));
    assert_eq!(session.tool("fs-write")["annotations"]["destructiveHint"], true);
    session.tool("read-around");
    let noisy = session.tool("noisy");
    assert_eq!(noisy["inputSchema"]["properties"]["word"], json!({"type": "string", "description": "A word to shout"}));
    assert_eq!(noisy["inputSchema"]["required"], json!(["word"]));
    let fixture = session.tool("fixture.args");
    assert_eq!(
        fixture["inputSchema"]["properties"]["either"]["anyOf"],
        json!([{"type": "string"}, {"type": "integer"}])
    );

    let results: Vec<(String, bool)> = session.results.iter().map(text_of).collect();
    // fs-read with `start` left out.
    assert_eq!(results[0], ("1\tline 1\n2\tline 2\n... 298 more lines; next start 3\n".to_string(), false));
    // Numbers sent as strings are tidied.
    assert_eq!(results[1], ("5\tline 5\n... 295 more lines; next start 6\n".to_string(), false));
    // Errors are results the model can read, with their kind.
    assert!(results[2].1, "{:?}", results[2]);
    assert!(
        results[2].0.starts_with("error (unknown_argument): fs-read has no parameter \"limit\""),
        "{}",
        results[2].0
    );
    assert_eq!(results[3], ("hi!".to_string(), false));
    // A confirm rule denies: there is no one to ask.
    assert!(results[4].1 && results[4].0.starts_with("error (denied): fs-write: denied:"), "{:?}", results[4]);
    assert!(!dir.path().join("b.txt").exists());
    assert_eq!(results[5], (r#"{"text":"via toolhost","flag":false}"#.to_string(), false));
    assert!(results[6].1 && results[6].0.starts_with("error (unknown_tool):"), "{:?}", results[6]);
}

#[test]
fn with_yes_a_confirm_rule_allows_the_call() {
    let (dir, home, config, tools) = setup();
    let calls = json!([{"name": "fs-write", "arguments": {"path": "b.txt", "content": "written"}}]);
    let session = session(&home, dir.path(), &["--config", &config, "--tools", &tools, "--yes"], &calls);
    assert!(session.errors.is_empty(), "{:?}", session.errors);
    let (text, is_error) = text_of(&session.results[0]);
    assert!(!is_error, "{text}");
    assert_eq!(std::fs::read_to_string(dir.path().join("b.txt")).unwrap(), "written");
}

/// Scheme tools whose results are values rather than text, some declaring their shape.
const VALUE_TOOLS: &str = r#"(define-tool (pair) "Two words, as a list." (list "a" "b"))
(define-tool (point)
  "A point."
  (returns (hash "type" "object" "properties" (hash "x" (hash "type" "number")) "required" (list "x")))
  (hash "x" 1.5 "y" 2))
(define-tool (answer) "The answer." (returns "integer") 42)
(define-tool (yes) "Yes." #t)
(define-tool (liar) "Promises a number, gives text." (returns "number") "not a number")
(register-tool "counted" "Counts, by register-tool." '() (lambda () (list 1 2 3)) "list")
"#;

#[test]
fn values_are_served_as_structured_content_beside_the_text_and_declared_shapes_as_output_schemas() {
    let dir = workspace(&[("tools/values.scm", VALUE_TOOLS)]);
    let home = Home::new();
    std::fs::write(dir.path().join("server.toml"), peers::stdio_entry("fixture", &peers::fixture_server(), &[], None))
        .unwrap();
    let tools = dir.path().join("tools").display().to_string();
    let names = ["pair", "point", "answer", "yes", "liar", "counted", "fixture.structured", "fs-read"];
    let mut calls: Vec<Value> = names.iter().map(|name| json!({"name": name, "arguments": {}})).collect();
    calls[7] = json!({"name": "fs-read", "arguments": {"path": "a.txt", "count": 1}});
    // The SDK client checks every structured result against the tool's outputSchema and throws
    // (a "thrown" result here) when it does not conform or is missing.
    let session = session(&home, dir.path(), &["--config", "server.toml", "--tools", &tools], &Value::Array(calls));
    assert!(session.errors.is_empty(), "{:?}", session.errors);
    let result = |name: &str| &session.results[names.iter().position(|n| *n == name).unwrap()];
    let structured = |name: &str| {
        let (text, is_error) = text_of(result(name));
        assert!(!is_error, "{name}: {text}");
        (text, result(name).get("structuredContent").cloned())
    };
    assert_eq!(structured("pair"), (r#"["a","b"]"#.to_string(), Some(json!({"result": ["a", "b"]}))));
    assert_eq!(structured("point").1, Some(json!({"x": 1.5, "y": 2})));
    assert_eq!(structured("answer"), ("42".to_string(), Some(json!({"result": 42}))));
    assert_eq!(structured("yes").1, Some(json!({"result": true})));
    assert_eq!(structured("counted").1, Some(json!({"result": [1, 2, 3]})));
    // An MCP tool toolhost is a client of: its server's text and structured content, passed on.
    assert_eq!(
        structured("fixture.structured"),
        ("2 items, total 3.5".to_string(), Some(json!({"total": 3.5, "items": ["a", "b"]})))
    );
    // Text stays text.
    assert_eq!(structured("fs-read"), ("1\tline 1\n... 299 more lines; next start 2\n".to_string(), None));
    // A result that breaks its declared shape is an error result, never nonconforming content.
    let (text, is_error) = text_of(result("liar"));
    assert!(is_error, "{text}");
    assert!(text.contains("liar: its result is a string, not the number its declared output shape promises"), "{text}");

    // The shapes as outputSchema: objects as declared, anything else as an object holding "result".
    assert_eq!(
        session.tool("point")["outputSchema"],
        json!({"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]})
    );
    let wrapped = |inner: Value| json!({"type": "object", "properties": {"result": inner}, "required": ["result"]});
    assert_eq!(session.tool("answer")["outputSchema"], wrapped(json!({"type": "integer"})));
    assert_eq!(session.tool("counted")["outputSchema"], wrapped(json!({"type": "array"})));
    assert_eq!(session.tool("fixture.structured")["outputSchema"]["properties"]["total"], json!({"type": "number"}));
    assert!(session.tool("pair").get("outputSchema").is_none(), "{}", session.tool("pair"));
    assert!(session.tool("fs-read").get("outputSchema").is_none());
}

/// Runs the SDK client's `steps` (see live-check.mjs) against `toolhost ARGS mcp` in `dir`.
fn live_session(home: &Home, dir: &std::path::Path, args: &[&str], steps: &Value) -> Value {
    let script = peers::ensure().join("live-check.mjs");
    let mut command = std::process::Command::new("node");
    command.arg(script).arg(env!("CARGO_BIN_EXE_toolhost")).arg(steps.to_string()).args(args).current_dir(dir);
    home.environment(&mut command);
    let out = command.output().expect("node runs");
    assert!(
        out.status.success(),
        "the client failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the client prints one JSON object")
}

#[test]
fn a_tool_file_added_changed_or_removed_reloads_the_tools_and_tells_the_client() {
    let dir = workspace(&[("tools/alpha.scm", r#"(define-tool (alpha) "The alpha tool." "one")"#)]);
    let home = Home::new();
    let tools = dir.path().join("tools");
    let file = |name: &str| tools.join(name).display().to_string();
    let steps = json!([
        {"write": file("beta.scm"), "text": "(define-tool (beta) \"The beta tool.\" \"two\")"},
        {"changed": true},
        {"list": true},
        {"call": "beta"},
        {"write": file("beta.scm"), "text": "(define-tool (beta) \"The beta tool, changed.\" \"2\")"},
        {"changed": true},
        {"call": "beta"},
        // A file that fails: reported with its file and line; the other tools stay.
        {"write": file("broken.scm"), "text": "(define-tool (gamma) \"Third.\" \"3\")\n(+ 1 (car '()))\n"},
        {"changed": true},
        {"list": true},
        {"call": "alpha"},
        {"remove": file("beta.scm")},
        {"changed": true},
        {"list": true},
    ]);
    let tools_arg = tools.display().to_string();
    let report = live_session(&home, dir.path(), &["--tools", &tools_arg], &steps);
    let steps = report["steps"].as_array().unwrap();
    let names = |at: usize| -> Vec<String> {
        steps[at].as_array().unwrap().iter().filter_map(|n| n.as_str().map(String::from)).collect()
    };
    let text = |at: usize| steps[at]["content"][0]["text"].as_str().unwrap_or_default().to_string();
    let stderr = report["stderr"].as_str().unwrap_or_default();
    assert_eq!(steps[1], true, "no list_changed after a file was added: {report}");
    assert!(names(2).contains(&"beta".to_string()) && names(2).contains(&"alpha".to_string()), "{:?}", names(2));
    assert_eq!(text(3), "two");
    assert_eq!(steps[5], true, "no list_changed after a file changed: {stderr}");
    assert_eq!(text(6), "2");
    assert_eq!(steps[8], true, "no list_changed after a file failed: {stderr}");
    assert!(stderr.contains(&format!("{}:2", file("broken.scm"))), "the failure names its file and line: {stderr}");
    assert!(names(9).contains(&"alpha".to_string()) && names(9).contains(&"beta".to_string()), "{:?}", names(9));
    assert_eq!(text(10), "one");
    assert_eq!(steps[12], true, "no list_changed after a file was removed: {stderr}");
    assert!(!names(13).contains(&"beta".to_string()) && names(13).contains(&"alpha".to_string()), "{:?}", names(13));
}
