//! toolhost as an MCP client, against real servers: the reference `server-everything` over stdio
//! and over streamable HTTP, and `fixture-server.mjs` (the official SDK's low-level server, which
//! shows the exact arguments it received). The peers are the pinned npm packages of
//! tests/fixtures/mcp, installed on first use (see `common::peers`).

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolhost::config::{McpServerConfig, McpTransport};
use toolhost::guard::{Action, Answer, Guard, Rule};
use toolhost::mcp::McpClients;
use toolhost::{Host, HostBuilder, ParamType, Skipped};

use common::{err_of, ok_text, peers, workspace, Home};

fn node_server(name: &str, script: &std::path::Path, args: &[&str], timeout_s: Option<f64>) -> McpServerConfig {
    let mut all = vec![script.display().to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    McpServerConfig {
        name: name.into(),
        transport: McpTransport::Stdio { command: "node".into(), args: all, env: Default::default() },
        timeout_s,
        origin: "test".into(),
    }
}

fn everything_stdio() -> McpServerConfig {
    node_server("everything", &peers::everything(), &["stdio"], None)
}

fn fixture(mode: &str) -> McpServerConfig {
    node_server("fixture", &peers::fixture_server(), &[mode], None)
}

fn host_with(dir: &tempfile::TempDir, servers: Vec<McpServerConfig>) -> Host {
    HostBuilder::new(dir.path()).tool_source(McpClients::configured(servers)).build().expect("host")
}

fn no_load_errors(host: &Host) {
    assert!(host.load_errors().is_empty(), "load errors: {:?}", host.load_errors());
}

/// What `fixture.args` received, parsed.
fn received(host: &mut Host, arguments: Value) -> Value {
    let text = ok_text(&host.call("fixture.args", arguments));
    serde_json::from_str(&text).expect("the fixture answers JSON")
}

/// Checks that hold whichever transport reaches server-everything.
fn everything_works(host: &mut Host) {
    no_load_errors(host);
    let echo = host.tool("everything.echo").expect("everything.echo is registered");
    assert_eq!(echo.signature().render(), "(everything.echo message)");
    assert_eq!(echo.signature().params[0].ty, ParamType::String);
    assert_eq!(echo.signature().skipped, Skipped::Void);
    assert!(echo.spec.annotations.read_only);
    let schema = echo.spec.input_schema.as_ref().expect("the server's inputSchema is kept");
    assert_eq!(schema["properties"]["message"]["description"], "Message to echo");
    let sum = host.tool("everything.get-sum").expect("everything.get-sum is registered");
    assert_eq!(sum.signature().render(), "(everything.get-sum a b)");
    assert_eq!(sum.signature().params[0].ty, ParamType::Number);

    // 0 is a value: it is sent, and the server adds it.
    let text = ok_text(&host.call_json("everything.get-sum", r#"{"a": 0, "b": 7}"#));
    assert!(text.contains("0") && text.contains('7'), "{text}");
    // From JSON by the name providers see, and from Scheme positionally.
    assert_eq!(ok_text(&host.call_json("everything__echo", r#"{"message": "from json"}"#)), "Echo: from json");
    assert_eq!(host.eval_to_string(r#"(everything.echo "from scheme")"#).unwrap(), "Echo: from scheme");
    let text = host.eval_to_string("(everything.get-sum 0 0.5)").unwrap();
    assert!(text.contains("0.5"), "{text}");
    // An image is described, not dropped.
    let image = ok_text(&host.call_json("everything.get-tiny-image", "{}"));
    assert!(image.contains("[image: image/png, ") && image.contains(" bytes]"), "{image}");
}

#[test]
fn everything_over_stdio_tools_are_primitives_callable_from_json_and_scheme() {
    let dir = workspace(&[]);
    let mut host = host_with(&dir, vec![everything_stdio()]);
    everything_works(&mut host);
}

#[test]
fn everything_over_streamable_http_tools_are_primitives_callable_from_json_and_scheme() {
    let server = peers::EverythingHttp::start();
    let dir = workspace(&[]);
    let config = McpServerConfig {
        name: "everything".into(),
        transport: McpTransport::Http { url: server.url.clone() },
        timeout_s: None,
        origin: "test".into(),
    };
    let mut host = host_with(&dir, vec![config]);
    everything_works(&mut host);
}

#[test]
fn mcp_tools_send_false_zero_and_empty_string_as_given() {
    let dir = workspace(&[]);
    let mut host = host_with(&dir, vec![fixture("normal")]);
    no_load_errors(&host);
    let sent = json!({"text": "", "flag": false, "count": 0, "ratio": 0});
    assert_eq!(received(&mut host, sent.clone()), sent);
    // The same from Scheme: #f, 0 and "" are values.
    let text = host.eval_to_string(r#"(fixture.args "" #f 0 0)"#).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), sent);
}

#[test]
fn mcp_tools_send_no_key_for_a_skipped_optional_before_a_given_one() {
    let dir = workspace(&[]);
    let mut host = host_with(&dir, vec![fixture("normal")]);
    no_load_errors(&host);
    assert_eq!(received(&mut host, json!({"text": "x", "last": "z"})), json!({"text": "x", "last": "z"}));
    // Null is "left out" too.
    assert_eq!(received(&mut host, json!({"text": "x", "flag": null, "count": 2})), json!({"text": "x", "count": 2}));
    // From Scheme, void skips a parameter.
    let text = host.eval_to_string(r#"(fixture.args "x" void void 1.5)"#).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), json!({"text": "x", "ratio": 1.5}));
    // Nested values go as they came.
    let nested = json!({"text": "x", "options": {"depth": 0, "mode": "slow"}, "either": 3, "tags": []});
    assert_eq!(received(&mut host, nested.clone()), nested);
}

#[test]
fn parameters_come_from_the_input_schema_required_first_and_unmappable_ones_are_any() {
    let dir = workspace(&[]);
    let host = host_with(&dir, vec![fixture("normal")]);
    let args = host.tool("fixture.args").unwrap();
    assert_eq!(
        args.signature().render(),
        "(fixture.args text [flag] [count] [ratio] [tags] [options] [either] [last])"
    );
    let types: Vec<ParamType> = args.signature().params.iter().map(|p| p.ty).collect();
    use ParamType::*;
    assert_eq!(types, [String, Boolean, Integer, Number, List, Object, Any, String]);
    assert!(args.spec.annotations.read_only && !args.spec.annotations.destructive);
    // A tool that says nothing of its effects keeps MCP's default: it may be destructive.
    let mixed = host.tool("fixture.mixed").unwrap();
    assert!(!mixed.spec.annotations.read_only && mixed.spec.annotations.destructive);
    let crash = host.tool("fixture.crash").unwrap();
    assert!(!crash.spec.annotations.destructive);
}

#[test]
fn wrong_arguments_are_refused_before_anything_is_sent() {
    let dir = workspace(&[]);
    let mut host = host_with(&dir, vec![fixture("normal")]);
    let (kind, message) = err_of(&host.call("fixture.args", json!({"text": "x", "limit": 1})));
    assert_eq!(kind, "unknown_argument");
    assert!(message.contains("its parameters are text, flag, count"), "{message}");
    let (kind, _) = err_of(&host.call("fixture.args", json!({"text": "x", "count": "many"})));
    assert_eq!(kind, "wrong_type");
    // A number sent as a string is tidied, then sent as a number.
    assert_eq!(received(&mut host, json!({"text": "x", "count": "4"})), json!({"text": "x", "count": 4}));
}

#[test]
fn is_error_results_are_tool_failed_with_the_servers_text() {
    let dir = workspace(&[]);
    let mut host = host_with(&dir, vec![fixture("normal")]);
    let (kind, message) = err_of(&host.call("fixture.fail", json!({"why": "the disk is full"})));
    assert_eq!(kind, "tool_failed");
    assert_eq!(message, "fixture.fail: fixture failure: the disk is full");
}

#[test]
fn structured_content_reaches_scheme_as_a_value_while_the_model_reads_the_text() {
    let dir = workspace(&[]);
    let mut host = host_with(&dir, vec![fixture("normal"), everything_stdio()]);
    no_load_errors(&host);
    // A model reads the server's text; the record keeps the value.
    let record = host.call("fixture.structured", json!({}));
    assert_eq!(record.model_text(), "2 items, total 3.5");
    assert_eq!(record.result.as_ref().unwrap(), &json!({"total": 3.5, "items": ["a", "b"]}));
    // Scheme code gets the structured content as a hash map.
    assert_eq!(host.eval_to_string(r#"(hash-ref (fixture.structured) "total")"#).unwrap(), "3.5");
    assert_eq!(host.eval_to_string(r#"(car (hash-ref (fixture.structured) "items"))"#).unwrap(), "a");
    // The server's own output schema is kept.
    let spec = &host.tool("fixture.structured").unwrap().spec;
    assert_eq!(spec.output_schema.as_ref().unwrap()["properties"]["total"], json!({"type": "number"}));
    // The reference server's structured tool, from Scheme.
    let conditions = host.eval_to_string(r#"(hash-ref (everything.get-structured-content "Chicago") "conditions")"#);
    assert!(!conditions.unwrap().is_empty());
    let humidity =
        host.eval_to_string(r#"(number? (hash-ref (everything.get-structured-content "Chicago") "humidity"))"#);
    assert_eq!(humidity.unwrap(), "true");
    // A tool with text only is text in Scheme too.
    assert_eq!(host.eval_to_string(r#"(string? (everything.echo "x"))"#).unwrap(), "true");
}

#[test]
fn a_servers_list_changed_adds_its_new_tools_and_removed_ones_say_so() {
    let dir = workspace(&[]);
    let mut host = host_with(&dir, vec![fixture("normal")]);
    no_load_errors(&host);
    assert!(host.tool("fixture.extra").is_none());
    // The server adds a tool and sends notifications/tools/list_changed; the client lists again.
    assert_eq!(ok_text(&host.call("fixture.grow", json!({"name": "extra"}))), "grew extra");
    common::eventually("the new tool to be registered", || host.tool("fixture.extra").is_some());
    assert_eq!(ok_text(&host.call_json("fixture__extra", "{}")), "I am extra");
    assert_eq!(host.eval_to_string("(fixture.extra)").unwrap(), "I am extra");
    let catalogue = host.specs();
    assert!(catalogue.iter().any(|spec| spec.name() == "fixture.extra"));
    // It removes it again: calls by either name, and from Scheme, are told why.
    assert_eq!(ok_text(&host.call("fixture.shrink", json!({"name": "extra"}))), "shrank extra");
    common::eventually("the tool to be removed", || host.tool("fixture.extra").is_none());
    for name in ["fixture.extra", "fixture__extra"] {
        let (kind, message) = err_of(&host.call(name, json!({})));
        assert_eq!(kind, "unknown_tool");
        assert!(message.contains("was removed by the MCP server \"fixture\""), "{message}");
    }
    let scheme = host.eval("(fixture.extra)").unwrap_err();
    assert!(scheme.message().contains("was removed by the MCP server \"fixture\""), "{}", scheme.message());
    // A Scheme program that names a tool before it exists reaches it once it does.
    assert_eq!(ok_text(&host.call("fixture.grow", json!({"name": "later"}))), "grew later");
    common::eventually("the second tool", || host.tool("fixture.later").is_some());
    assert_eq!(host.eval_to_string("(fixture.later)").unwrap(), "I am later");
}

#[test]
fn content_other_than_text_is_described_not_dropped() {
    let dir = workspace(&[]);
    let mut host = host_with(&dir, vec![fixture("normal")]);
    assert_eq!(
        ok_text(&host.call("fixture.mixed", json!({}))),
        "here it is\n[image: image/png, 8 bytes]\n[resource: file:///notes.txt]\ninside\n\
         [resource link: file:///big.bin (big.bin), application/octet-stream]"
    );
}

#[test]
fn confirmation_previews_show_the_arguments_sent_leaving_out_void_ones() {
    let dir = workspace(&[]);
    let previews = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&previews);
    let guard = Guard::default()
        .rule(Rule::new("fixture.fail", Action::Deny).unwrap().reason("no failing today"))
        .rule(Rule::new("fixture.*", Action::Confirm).unwrap());
    let mut host = HostBuilder::new(dir.path())
        .tool_source(McpClients::configured(vec![fixture("normal")]))
        .guard(guard)
        .confirmer(Arc::new(move |request| {
            seen.lock().unwrap().push(request.preview.to_string());
            Answer { yes: true, by: "test".into() }
        }))
        .build()
        .unwrap();
    let sent = json!({"text": "x", "flag": false, "last": ""});
    assert_eq!(received(&mut host, sent.clone()), sent);
    assert_eq!(previews.lock().unwrap().as_slice(), [r#"fixture.args(text: "x", flag: false, last: "")"#]);
    // Rules match MCP tools by their `server.tool` name.
    let (kind, message) = err_of(&host.call("fixture.fail", json!({})));
    assert_eq!((kind.as_str(), message.as_str()), ("denied", "fixture.fail: denied: no failing today"));
}

#[test]
fn a_server_that_exits_after_its_first_answer_is_started_again_by_the_next_call() {
    let dir = workspace(&[]);
    let clients = McpClients::configured(vec![fixture("exit-after-first-answer")]);
    let status = clients.status();
    let mut host = HostBuilder::new(dir.path()).tool_source(clients).build().expect("host");
    no_load_errors(&host);
    assert!(status.is_connected("fixture"), "the server is connected once the host is built");
    for round in 0..3 {
        assert_eq!(received(&mut host, json!({"text": round.to_string()})), json!({"text": round.to_string()}));
        // Wait (by polling, with a generous bound) until the client has seen the server go.
        let deadline = Instant::now() + Duration::from_secs(30);
        while status.is_connected("fixture") {
            assert!(Instant::now() < deadline, "the client never noticed that the server exited");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn a_call_that_could_not_be_written_to_a_stopped_server_goes_to_a_fresh_one() {
    let dir = workspace(&[]);
    let mut host = host_with(&dir, vec![fixture("deaf-after-first-answer")]);
    no_load_errors(&host);
    for round in 0..2 {
        // The first call of each server answers; the next cannot reach it, so a new one is started
        // and the call, which the old one never read, goes to it.
        assert_eq!(received(&mut host, json!({"text": round.to_string()})), json!({"text": round.to_string()}));
    }
}

#[test]
fn a_server_that_dies_during_a_call_fails_that_call_and_the_next_call_starts_it_again() {
    let dir = workspace(&[]);
    let mut host = host_with(&dir, vec![fixture("normal")]);
    let (kind, message) = err_of(&host.call("fixture.crash", json!({})));
    assert_eq!(kind, "tool_failed");
    assert!(message.starts_with("fixture.crash: the MCP server \"fixture\" stopped during the call"), "{message}");
    assert!(message.contains("started again on the next call"), "{message}");
    // Its last words on standard error explain it.
    assert!(message.contains("its standard error ended with: fixture: crashing on purpose"), "{message}");
    assert_eq!(received(&mut host, json!({"text": "after"})), json!({"text": "after"}));
    // The other tools of the host never noticed.
    ok_text(&host.call("fs-read", json!({"path": "a.txt", "count": 1})));
}

#[test]
fn a_call_past_the_servers_time_limit_is_a_timeout() {
    let dir = workspace(&[]);
    let mut config = everything_stdio();
    config.timeout_s = Some(1.0);
    let mut host = host_with(&dir, vec![config]);
    no_load_errors(&host);
    let (kind, message) =
        err_of(&host.call("everything.trigger-long-running-operation", json!({"duration": 30, "steps": 2})));
    assert_eq!(kind, "timeout");
    assert!(message.contains("did not answer within 1 s"), "{message}");
    // The connection is still there for the next call.
    assert_eq!(ok_text(&host.call("everything.echo", json!({"message": "still here"}))), "Echo: still here");
}

#[test]
fn servers_that_do_not_start_are_load_errors_naming_why_and_the_rest_of_the_host_works() {
    let dir = workspace(&[]);
    let missing = McpServerConfig {
        name: "ghost".into(),
        transport: McpTransport::Stdio {
            command: "toolhost-no-such-command".into(),
            args: vec![],
            env: Default::default(),
        },
        timeout_s: None,
        origin: "/w/toolhost.toml:7".into(),
    };
    let mut exits = fixture("exit-at-start");
    exits.name = "quitter".into();
    let mut garbage = fixture("garbage");
    garbage.name = "babbler".into();
    let started = Instant::now();
    let mut host = host_with(&dir, vec![missing, exits, garbage, fixture("normal")]);
    // Generous: the start time it no longer waits for is 60 s (its `timeout_s` is not set).
    assert!(started.elapsed() < Duration::from_secs(30), "the host waited {:?} for the servers", started.elapsed());
    let problems: Vec<String> = host.load_errors().iter().map(|e| e.to_string()).collect();
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(
        problems[0].starts_with(
            "/w/toolhost.toml:7: mcp server \"ghost\" did not start: cannot run `toolhost-no-such-command`"
        ),
        "{}",
        problems[0]
    );
    assert!(problems[0].ends_with("its tools are not available"), "{}", problems[0]);
    assert!(
        problems[1].contains("\"quitter\" did not start") && problems[1].contains("FIXTURE_TOKEN is not set"),
        "{}",
        problems[1]
    );
    // What a server wrote that is not MCP is reported at once, not when the start time runs out.
    assert!(
        problems[2].contains(
            "\"babbler\" did not start: it wrote something that is not MCP on its standard output: \
             `this is not JSON-RPC`"
        ),
        "{}",
        problems[2]
    );
    // A call naming a tool of a server that did not start says why, by either name.
    for name in ["ghost.search", "ghost__search"] {
        let (kind, message) = err_of(&host.call(name, json!({})));
        assert_eq!(kind, "unknown_tool");
        assert!(message.contains("the MCP server \"ghost\" did not start: cannot run"), "{message}");
    }
    // The rest works: built-in tools and the server that did start.
    ok_text(&host.call("fs-read", json!({"path": "a.txt", "count": 1})));
    assert_eq!(received(&mut host, json!({"text": "ok"})), json!({"text": "ok"}));
}

/// The command line, with the config naming the servers.
fn cli_config(dir: &tempfile::TempDir, entries: &str) -> String {
    let path = dir.path().join("mcp.toml");
    std::fs::write(&path, entries).unwrap();
    path.display().to_string()
}

#[test]
fn the_command_line_reports_a_server_that_did_not_start_once_and_runs_the_call() {
    let dir = workspace(&[]);
    let home = Home::new();
    let config = cli_config(
        &dir,
        &format!(
            "[[mcp]]\nname = \"ghost\"\ncommand = \"toolhost-no-such-command\"\n\n{}",
            peers::stdio_entry("fixture", &peers::fixture_server(), &[], None)
        ),
    );
    let out = home.run(dir.path(), &["--config", &config, "call", "fixture.args", r#"{"text": "", "count": 0}"#], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let answer: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(answer["result"], "{\"text\":\"\",\"count\":0}");
    assert_eq!(stderr.matches("mcp server \"ghost\" did not start").count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{config}:1: mcp server \"ghost\" did not start: cannot run `toolhost-no-such-command`"
        )),
        "{stderr}"
    );
}

#[test]
fn the_command_line_reports_a_server_that_stopped_once_and_starts_it_again() {
    let dir = workspace(&[]);
    let home = Home::new();
    let config = cli_config(&dir, &peers::stdio_entry("fixture", &peers::fixture_server(), &[], None));
    common::write(
        dir.path(),
        "script.scm",
        r#"(displayln (with-handler (lambda (e) "the crash failed") (fixture.crash)))
(displayln (fixture.args "after"))
"#,
    );
    let out = home.run(dir.path(), &["--config", &config, "run", "script.scm"], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout, "the crash failed\n{\"text\":\"after\"}\n");
    assert_eq!(stderr.matches("mcp server \"fixture\" stopped").count(), 1, "{stderr}");
    // The server's own last words are passed on, marked with its name.
    assert!(stderr.contains("[fixture] fixture: crashing on purpose"), "{stderr}");
}

#[test]
fn commands_that_call_no_mcp_tool_start_no_server_once_its_tool_list_is_kept_and_a_start_relists() {
    let dir = workspace(&[]);
    let home = Home::new();
    let (starts, tools_file) = (dir.path().join("starts.log"), dir.path().join("more-tools"));
    std::fs::write(&tools_file, "old\n").unwrap();
    let env = format!(
        "env = {{ FIXTURE_STARTS = {}, FIXTURE_TOOLS_FILE = {} }}\n",
        Value::String(starts.display().to_string()),
        Value::String(tools_file.display().to_string())
    );
    let config =
        cli_config(&dir, &format!("{}{env}", peers::stdio_entry("fixture", &peers::fixture_server(), &[], None)));
    let started = || std::fs::read_to_string(&starts).unwrap_or_default().lines().count();
    let listed = |home: &Home| -> Vec<String> {
        let out = home.run(dir.path(), &["--config", &config, "tools", "--format", "mcp"], None);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let catalogue: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        catalogue
            .iter()
            .filter_map(|t| t["name"].as_str())
            .filter(|n| n.starts_with("fixture__"))
            .map(String::from)
            .collect()
    };
    // The first command starts the server and keeps its tool list.
    assert!(listed(&home).contains(&"fixture__old".to_string()));
    assert_eq!(started(), 1);
    // Commands that call none of its tools start none: they read the kept list.
    let out = home.run(dir.path(), &["--config", &config, "eval", "(+ 1 2)"], None);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "3", "{}", String::from_utf8_lossy(&out.stderr));
    let out = home.run(dir.path(), &["--config", &config, "pformat", "parse"], Some("no tags here\n"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(listed(&home).contains(&"fixture__old".to_string()));
    assert_eq!(started(), 1, "no command above called an MCP tool");
    // The server's tools change while it is not running. The first call starts it, which lists
    // them again: the kept tool it no longer has is removed, and says so.
    std::fs::write(&tools_file, "new\n").unwrap();
    let out = home.run(dir.path(), &["--config", &config, "call", "fixture.old"], None);
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["error"]["kind"], "unknown_tool", "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("fixture.old was removed by the MCP server \"fixture\""), "{message}");
    assert_eq!(started(), 2);
    // The list kept now is the server's new one.
    let now = listed(&home);
    assert!(now.contains(&"fixture__new".to_string()) && !now.contains(&"fixture__old".to_string()), "{now:?}");
    assert_eq!(started(), 2);
    let out = home.run(dir.path(), &["--config", &config, "eval", "(fixture.new)"], None);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "\"I am new\"", "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn tools_format_openai_shows_the_servers_own_schema_with_its_enums_and_nested_objects() {
    let dir = workspace(&[]);
    let home = Home::new();
    let config = cli_config(
        &dir,
        &format!(
            "{}{}",
            peers::stdio_entry("everything", &peers::everything(), &["stdio"], None),
            peers::stdio_entry("fixture", &peers::fixture_server(), &[], None)
        ),
    );
    let function = |catalogue: &Value, name: &str| -> Value {
        catalogue
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["function"]["name"] == name)
            .unwrap_or_else(|| panic!("{name} is in the catalogue"))["function"]
            .clone()
    };
    let out = home.run(dir.path(), &["--config", &config, "tools", "--format", "openai"], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let catalogue: Value = serde_json::from_slice(&out.stdout).unwrap();
    let structured = function(&catalogue, "everything__get-structured-content");
    assert_eq!(
        structured["parameters"]["properties"]["location"]["enum"],
        json!(["New York", "Chicago", "Los Angeles"])
    );
    let args = function(&catalogue, "fixture__args");
    assert_eq!(args["parameters"]["properties"]["options"]["properties"]["mode"]["enum"], json!(["fast", "slow"]));
    assert_eq!(args["description"], "Return the arguments received, exactly, as JSON text.");
    // The strict rewrite applies to the server's schema, nested objects included.
    let out = home.run(dir.path(), &["--config", &config, "tools", "--format", "openai-strict"], None);
    let strict: Value = serde_json::from_slice(&out.stdout).unwrap();
    let args = function(&strict, "fixture__args");
    assert_eq!(args["strict"], true, "{args}");
    assert_eq!(args["parameters"]["properties"]["options"]["additionalProperties"], false);
    assert_eq!(
        args["parameters"]["properties"]["options"]["properties"]["mode"]["enum"],
        json!(["fast", "slow", null])
    );
}

/// The processes whose parent is `parent`, read from /proc.
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse::<u32>().ok())
                == Some(parent)
        })
        .collect()
}

/// What each descriptor of process `pid` refers to (`socket:[123]`, a path, ...).
fn descriptors_of(pid: u32) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return Vec::new() };
    entries.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok()).map(|target| target.display().to_string()).collect()
}

/// Regression (issue 17, hole 5): every `[[mcp]]` server a worker started inherited the socket the
/// worker talks to its parent on. No process but the worker holds it.
#[test]
fn an_mcp_server_a_worker_starts_does_not_hold_the_workers_socket() {
    let dir = workspace(&[]);
    let config = cli_config(&dir, &peers::stdio_entry("fixture", &peers::fixture_server(), &[], None));
    let home = tempfile::tempdir().unwrap();
    let args = ["--root", &dir.path().display().to_string(), "--config", &config, "worker"];
    let mut spec =
        toolhost::worker::WorkerSpec::new(env!("CARGO_BIN_EXE_toolhost"), args.iter().map(|s| s.to_string()).collect());
    spec.env = vec![
        ("HOME".into(), home.path().display().to_string()),
        ("XDG_CONFIG_HOME".into(), home.path().join("xdg-config").display().to_string()),
        ("XDG_CACHE_HOME".into(), home.path().join("xdg-cache").display().to_string()),
    ];
    let mut worker = toolhost::worker::WorkerHandle::spawn(spec).expect("worker starts");
    assert_eq!(worker.call("fixture.args", r#"{"text": "up"}"#).model_text(), r#"{"text":"up"}"#);
    let pid = worker.worker_pid().expect("a worker runs");
    let socket = std::fs::read_link(format!("/proc/{pid}/fd/3")).unwrap().display().to_string();
    assert!(socket.starts_with("socket:"), "{socket}");
    let servers = children_of(pid);
    assert!(!servers.is_empty(), "the worker started its MCP server");
    for server in servers {
        assert!(!descriptors_of(server).contains(&socket), "process {server} holds the worker's {socket}");
    }
}

/// The shell sandbox ends every process a call started, and nothing else: the MCP servers the same
/// host started go on serving.
#[test]
fn ending_a_calls_processes_leaves_the_hosts_mcp_servers_alone() {
    let dir = workspace(&[]);
    let mut host = host_with(&dir, vec![fixture("normal")]);
    no_load_errors(&host);
    assert_eq!(received(&mut host, json!({"text": "before"})), json!({"text": "before"}));
    let cmd = "setsid sh -c 'echo $$ > s.pid; exec sleep 1020' & sh -c 'sleep 1021 & echo $! > d.pid'; \
               while [ ! -s s.pid ] || [ ! -s d.pid ]; do sleep 0.02; done; echo left";
    let text = ok_text(&host.call("shell-exec", json!({ "cmd": cmd })));
    assert!(text.contains("left"), "{text}");
    for file in ["s.pid", "d.pid"] {
        let pid = common::pid_in(&dir.path().join(file));
        assert!(common::is_gone(pid), "{file}: {pid} outlived the call");
    }
    assert_eq!(received(&mut host, json!({"text": "after"})), json!({"text": "after"}));
}
