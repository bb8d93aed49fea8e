//! The agent loop (design section 12) against a real HTTP server on 127.0.0.1 that plays the model:
//! what the loop sends (the exact body, tools, strict or not, extra_body), what it does with the
//! shapes real models send (arguments as a JSON string, a list as a JSON string, strict nulls,
//! P-format text, several calls in one reply), retries and errors, the guard's confirmations, the
//! session log, and `toolhost agent` run as a real process.

use crate::common;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use common::model_server::{assert_conforms, ModelServer, Scripted};
use common::*;
use serde_json::{json, Value};
use toolhost::agent::{
    read_log, ChatClient, ClientSettings, Dialect, End, Entry, Message, Model, ModelRequest, RetryPolicy, Session,
    SessionLog,
};
use toolhost::{ErrorKind, HostBuilder, HostHandle, Tool, ToolCtx};

fn shout(_ctx: &ToolCtx, text: String, times: Option<i64>) -> String {
    text.to_uppercase().repeat(times.filter(|t| *t > 0).unwrap_or(1) as usize)
}

/// A host with one Rust tool and nothing else, so the tools it sends are known byte for byte.
fn shout_host(dir: &Path) -> HostHandle {
    let tool = Tool::new("shout", "Upper-case a text.")
        .param("text", "What to shout")
        .param("times", "How often; once when left out")
        .build(shout)
        .unwrap();
    let builder = HostBuilder::new(dir).builtin_tools(false).shipped_tools(false).project_tools(false).tool(tool);
    HostHandle::spawn(builder).unwrap()
}

fn client(server: &ModelServer) -> ChatClient {
    let mut settings = ClientSettings::new(server.base_url(), "test-model");
    settings.retry =
        RetryPolicy { attempts: 3, base_delay: Duration::from_millis(1), max_delay: Duration::from_millis(5) };
    ChatClient::new(settings)
}

fn client_with(server: &ModelServer, edit: impl FnOnce(&mut ClientSettings)) -> ChatClient {
    let mut settings = ClientSettings::new(server.base_url(), "test-model");
    settings.retry.base_delay = Duration::from_millis(1);
    edit(&mut settings);
    ChatClient::new(settings)
}

/// The body of the first request of the shout session, as a build without strict mode sends it.
const SHOUT_FIRST_BODY: &str = concat!(
    r#"{"model":"test-model","messages":[{"role":"system","content":"Work."},{"role":"user","content":"Shout hi."}],"#,
    r#""tools":[{"type":"function","function":{"name":"shout","description":"Upper-case a text.","#,
    r#""parameters":{"type":"object","properties":{"text":{"type":"string","description":"What to shout"},"#,
    r#""times":{"type":"integer","description":"How often; once when left out"}},"required":["text"]}}}]}"#
);

fn shout_session(strict: bool) -> (Vec<common::model_server::Received>, toolhost::agent::Outcome) {
    let dir = tempfile::tempdir().unwrap();
    let server = ModelServer::start(vec![
        Scripted::calls(&[("call_a", "shout", r#"{"text":"hi"}"#)]),
        Scripted::text("HI it is."),
    ]);
    let mut model = client(&server);
    let outcome = Session::new(shout_host(dir.path()), &mut model)
        .system_prompt("Work.")
        .strict(strict)
        .run("Shout hi.")
        .unwrap();
    (server.requests(), outcome)
}

#[test]
fn without_strict_the_request_body_is_byte_for_byte_the_fixed_one() {
    let (requests, outcome) = shout_session(false);
    assert_eq!(outcome.answer.as_deref(), Some("HI it is."));
    assert_eq!(requests.len(), 2);
    assert_eq!((requests[0].method.as_str(), requests[0].path.as_str()), ("POST", "/v1/chat/completions"));
    assert_eq!(requests[0].header("content-type"), Some("application/json"));
    assert_eq!(requests[0].header("authorization"), None, "no key configured, none sent");
    assert_eq!(requests[0].body, SHOUT_FIRST_BODY);
    // The second request carries the call and its result, and nothing else changed.
    let second = requests[1].json();
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(
        Value::Array(messages[2..].to_vec()),
        json!([
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "shout", "arguments": "{\"text\":\"hi\"}"}}]},
            {"role": "tool", "tool_call_id": "call_a", "content": "HI"},
        ])
    );
    assert_eq!(second["tools"], requests[0].json()["tools"]);
    for request in &requests {
        assert_conforms(&request.json());
    }
}

#[test]
fn strict_mode_changes_only_the_tools_and_sends_them_strict() {
    let (plain, _) = shout_session(false);
    let (strict, outcome) = shout_session(true);
    assert_eq!(outcome.answer.as_deref(), Some("HI it is."));
    let (mut plain, mut strict) = (plain[0].json(), strict[0].json());
    let tools = strict.as_object_mut().unwrap().remove("tools").unwrap();
    plain.as_object_mut().unwrap().remove("tools");
    assert_eq!(plain, strict, "everything but the tools is the same");
    let function = &tools[0]["function"];
    assert_eq!(function["strict"], true);
    assert_eq!(function["parameters"]["additionalProperties"], false);
    assert_eq!(function["parameters"]["required"], json!(["text", "times"]));
    assert_eq!(function["parameters"]["properties"]["times"]["type"], json!(["integer", "null"]));
    assert_conforms(&json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": tools}));
}

#[test]
fn explicit_nulls_from_a_strict_model_are_dropped() {
    let dir = workspace(&[]);
    let server = ModelServer::start(vec![
        Scripted::calls(&[("c1", "fs-read", r#"{"path":"a.txt","start":2,"count":null}"#)]),
        Scripted::text("read"),
    ]);
    let mut model = client(&server);
    let handle = HostHandle::spawn(HostBuilder::new(dir.path())).unwrap();
    let outcome = Session::new(handle, &mut model).strict(true).run("Read a.txt from line 2.").unwrap();
    let record = &outcome.calls[0];
    assert_eq!(record.tidied, Some(json!({"path": "a.txt", "start": 2})), "the null is gone before the call");
    assert_eq!(numbered_lines(&ok_text(record))[..2], [2, 3]);
    let tools = server.requests()[0].json()["tools"].clone();
    assert!(tools.as_array().unwrap().iter().all(|t| t["function"]["strict"].is_boolean()), "{tools}");
}

#[test]
fn two_calls_in_one_reply_run_in_order_whatever_shape_their_arguments_take() {
    let dir = workspace(&[]);
    // The whole arguments as a JSON string holding the object, as some models send them; then a
    // call that reads what the first wrote; then an error the model can act on.
    let wrapped = json!(json!({"path": "notes/new.txt", "content": "hello\n"}).to_string()).to_string();
    let server = ModelServer::start(vec![
        Scripted::calls(&[
            ("w", "fs-write", &wrapped),
            ("r", "fs-read", r#"{"path":"notes/new.txt"}"#),
            ("x", "fs-read", r#"{"path":"a.txt","limit":3}"#),
        ]),
        Scripted::text("Wrote and read it."),
    ]);
    let mut model = client(&server);
    let handle = HostHandle::spawn(HostBuilder::new(dir.path())).unwrap();
    let mut progress = Vec::new();
    let outcome = Session::new(handle, &mut model)
        .on_call(|event| progress.push(event.progress_line()))
        .run("Write notes/new.txt and read it back.")
        .unwrap();
    assert_eq!(outcome.end, End::Answered);
    assert_eq!(outcome.answer.as_deref(), Some("Wrote and read it."));
    assert_eq!(std::fs::read_to_string(dir.path().join("notes/new.txt")).unwrap(), "hello\n");
    assert!(!outcome.calls[0].notes.is_empty(), "tidying noted the unwrapped string");
    let second = server.requests()[1].json();
    let results: Vec<(Value, Value)> = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| (m["tool_call_id"].clone(), m["content"].clone()))
        .collect();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0].0, "w");
    assert_eq!((results[1].0.clone(), results[1].1.clone()), (json!("r"), json!("1\thello\n")));
    let error = results[2].1.as_str().unwrap();
    assert!(error.starts_with("error (unknown_argument): ") && error.contains("limit"), "{error}");
    assert_eq!(progress.len(), 3);
    assert!(progress[0].starts_with("[turn 1] fs-write ") && progress[0].ends_with(" ms)"), "{}", progress[0]);
    assert!(progress[2].contains("error (unknown_argument)"), "{}", progress[2]);
    for request in server.requests() {
        assert_conforms(&request.json());
    }
}

#[test]
fn a_pformat_model_gets_the_catalogue_in_its_prompt_no_tools_and_its_results_as_text() {
    let dir = workspace(&[]);
    let server = ModelServer::start(vec![
        Scripted::text(
            "Let me look.\n<tool_call>fs-read[0|a.txt|1|2|2|1]</tool_call>\n<tool_call>fs-read[a.txt]</tool_call>",
        ),
        Scripted::text("Line 2 says line 2."),
    ]);
    let mut model = client_with(&server, |s| {
        s.extra_body.insert("tools".into(), json!([{"type": "function", "function": {"name": "sneaky"}}]));
    });
    let handle = HostHandle::spawn(HostBuilder::new(dir.path())).unwrap();
    let outcome = Session::new(handle, &mut model).dialect(Dialect::Pformat).run("What is on line 2?").unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("Line 2 says line 2."));
    let requests = server.requests();
    let first = requests[0].json();
    assert!(first.get("tools").is_none(), "P-format sends no tools, not even extra_body's: {first}");
    let system = first["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("fs-read[0|<path>|1|<start>|2|<count>]"), "the catalogue is in the prompt");
    assert!(system.contains("<tool_call>get-weather[0|Paris]</tool_call>"), "the instructions are in the prompt");
    let second = requests[1].json();
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(messages[2]["role"], "assistant");
    assert!(messages[2].get("tool_calls").is_none());
    let results = messages[3]["content"].as_str().unwrap();
    assert_eq!(messages[3]["role"], "user");
    assert!(results.starts_with("<tool_result call=\"1\" tool=\"fs-read\">\n2\tline 2\n"), "{results}");
    // The bare positional tag was refused, not guessed at, and the model was shown the right form.
    assert!(results.contains("<tool_result call=\"2\" tool=\"fs-read\">\nerror (bad_arguments): "), "{results}");
    assert!(results.contains("fs-read[0|<path>|1|<start>|2|<count>]"), "{results}");
    for request in &requests {
        assert_conforms(&request.json());
    }
}

#[test]
fn extra_body_is_merged_but_cannot_replace_tools_messages_or_model() {
    let dir = tempfile::tempdir().unwrap();
    let server = ModelServer::start(vec![Scripted::text("ok")]);
    let mut model = client_with(&server, |s| {
        s.extra_body.insert("temperature".into(), json!(0.2));
        s.extra_body.insert("tools".into(), json!([]));
        s.extra_body.insert("messages".into(), json!([]));
        s.extra_body.insert("model".into(), json!("other-model"));
        s.extra_body.insert("seed".into(), json!(7));
    });
    Session::new(shout_host(dir.path()), &mut model).system_prompt("Work.").run("Shout hi.").unwrap();
    let body = &server.requests()[0].body;
    let expected = format!("{},\"temperature\":0.2,\"seed\":7}}", SHOUT_FIRST_BODY.trim_end_matches('}'));
    assert_eq!(body, &expected);
}

#[test]
fn a_429_and_a_503_are_retried_and_retry_after_is_honoured() {
    let server = ModelServer::start(vec![
        Scripted::raw(429, r#"{"error":{"message":"slow down"}}"#).header("Retry-After", "0"),
        Scripted::raw(503, "overloaded"),
        Scripted::text("at last"),
    ]);
    let mut model = client(&server);
    let messages = [Message::User("hi".into())];
    let reply = model.send(&ModelRequest { messages: &messages, tools: None }).unwrap();
    assert_eq!(reply.text.as_deref(), Some("at last"));
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert!(requests.iter().all(|r| r.body == requests[0].body), "the same request each time");
}

#[test]
fn a_400_is_a_clear_error_and_is_not_retried() {
    let server = ModelServer::start(vec![
        Scripted::raw(400, r#"{"error":{"message":"Invalid schema for function 'x'","type":"invalid_request_error"}}"#),
        Scripted::text("never sent"),
    ]);
    let mut model = client(&server);
    let messages = [Message::User("hi".into())];
    let error = model.send(&ModelRequest { messages: &messages, tools: None }).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Agent);
    assert!(error.message().contains("400 Bad Request"), "{error}");
    assert!(error.message().contains("Invalid schema for function 'x'"), "{error}");
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn retries_end_after_the_last_attempt_with_the_status_and_the_count() {
    let server = ModelServer::start(vec![
        Scripted::raw(500, "boom"),
        Scripted::raw(502, "boom"),
        Scripted::raw(500, "still boom"),
    ]);
    let mut model = client(&server);
    let messages = [Message::User("hi".into())];
    let error = model.send(&ModelRequest { messages: &messages, tools: None }).unwrap_err();
    assert!(error.message().contains("500 Internal Server Error (after 3 attempts)"), "{error}");
    assert!(error.message().ends_with("still boom"), "{error}");
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn the_key_goes_in_the_authorization_header() {
    let server = ModelServer::start(vec![Scripted::text("ok")]);
    let mut model = client_with(&server, |s| s.api_key = Some("sk-test-123".into()));
    let messages = [Message::User("hi".into())];
    model.send(&ModelRequest { messages: &messages, tools: None }).unwrap();
    assert_eq!(server.requests()[0].header("authorization"), Some("Bearer sk-test-123"));
}

#[test]
fn an_unreachable_server_is_a_clear_error() {
    // A port nothing listens on: bind one, then let it go.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut model = ChatClient::new(ClientSettings::new(format!("http://127.0.0.1:{port}/v1"), "m"));
    let messages = [Message::User("hi".into())];
    let error = model.send(&ModelRequest { messages: &messages, tools: None }).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Agent);
    assert!(error.message().contains(&format!("127.0.0.1:{port}")), "{error}");
}

#[test]
fn the_turn_limit_ends_a_session_that_keeps_calling() {
    let dir = workspace(&[]);
    let call = Scripted::calls(&[("c", "fs-read", r#"{"path":"a.txt","count":1}"#)]);
    let server = ModelServer::start(vec![call.clone(), call.clone(), call]);
    let mut model = client(&server);
    let handle = HostHandle::spawn(HostBuilder::new(dir.path())).unwrap();
    let outcome = Session::new(handle, &mut model).max_turns(2).run("Loop.").unwrap();
    assert_eq!((outcome.end, outcome.turns, outcome.answer), (End::MaxTurns, 2, None));
    assert_eq!(server.requests().len(), 2);
    assert_eq!(outcome.calls.len(), 2);
}

#[test]
fn the_session_log_holds_every_request_reply_and_call_record() {
    let dir = workspace(&[]);
    let logs = tempfile::tempdir().unwrap();
    let path = logs.path().join("session.jsonl");
    let server = ModelServer::start(vec![
        Scripted::calls(&[("c1", "fs-read", r#"{"path":"a.txt","count":1}"#), ("c2", "nope", "{}")]),
        Scripted::text("done"),
    ]);
    let mut model = client(&server);
    let handle = HostHandle::spawn(HostBuilder::new(dir.path())).unwrap();
    Session::new(handle, &mut model).log(SessionLog::create(&path).unwrap()).run("Read.").unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let types: Vec<String> =
        text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["type"].as_str().unwrap().to_string()).collect();
    assert_eq!(types, ["session", "request", "reply", "call", "call", "request", "reply", "end"]);
    let entries = read_log(&path).unwrap();
    let Entry::Session { model: described, task, .. } = &entries[0] else { panic!("{:?}", entries[0]) };
    assert_eq!((described["model"].as_str(), task.as_str()), (Some("test-model"), "Read."));
    let Entry::Request { tools: Some(tools), messages_before: 0, messages, .. } = &entries[1] else { panic!() };
    assert_eq!(tools, &server.requests()[0].json()["tools"], "the schemas as sent");
    assert_eq!(messages.len(), 2);
    let Entry::Call { id, request: Some(request), record, .. } = &entries[4] else { panic!() };
    assert_eq!((id.as_str(), request.tool.as_str()), ("c2", "nope"));
    assert_eq!(record.result.as_ref().unwrap_err().kind(), ErrorKind::UnknownTool);
    let Entry::Request { messages_before: 2, messages, .. } = &entries[5] else { panic!() };
    assert_eq!(messages.len(), 3, "the assistant message and two results");
    let Entry::End { reason, answer, .. } = &entries[7] else { panic!() };
    assert_eq!((reason.as_str(), answer.as_deref()), ("answered", Some("done")));
}

#[test]
fn a_model_error_ends_the_session_and_the_log_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let server = ModelServer::start(vec![Scripted::raw(401, r#"{"error":{"message":"Incorrect API key"}}"#)]);
    let mut model = client(&server);
    let error = Session::new(shout_host(dir.path()), &mut model)
        .log(SessionLog::create(&path).unwrap())
        .run("Shout.")
        .unwrap_err();
    assert!(error.message().contains("401 Unauthorized") && error.message().contains("Incorrect API key"), "{error}");
    let entries = read_log(&path).unwrap();
    let Some(Entry::End { reason, error: Some(logged), .. }) = entries.last() else { panic!("{entries:?}") };
    assert_eq!((reason.as_str(), logged.kind()), ("error", ErrorKind::Agent));
}

/// A 200 whose first choice's message has these tool calls, written as raw JSON text (so a key may
/// be given twice, which a `Value` cannot hold).
fn raw_calls(calls: &str) -> Scripted {
    Scripted::raw(
        200,
        &format!(
            r#"{{"id":"chatcmpl-test","object":"chat.completion","created":0,"model":"test-model","choices":[{{"index":0,"message":{{"role":"assistant","content":null,"tool_calls":[{calls}]}},"finish_reason":"tool_calls","logprobs":null}}]}}"#
        ),
    )
}

/// The tool messages of a request, in order: (tool_call_id, content).
fn tool_results(request: &common::model_server::Received) -> Vec<(String, String)> {
    request.json()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| (m["tool_call_id"].as_str().unwrap().to_string(), m["content"].as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn a_key_given_twice_in_native_arguments_is_refused_as_json_text_and_as_a_json_object() {
    let dir = workspace(&[]);
    let server = ModelServer::start(vec![
        raw_calls(concat!(
            r#"{"id":"obj","type":"function","function":{"name":"fs-write","arguments":{"path":"a.txt","path":"written.txt","content":"x"}}},"#,
            r#"{"id":"txt","type":"function","function":{"name":"fs-write","arguments":"{\"path\":\"a.txt\",\"path\":\"also.txt\",\"content\":\"x\"}"}}"#
        )),
        Scripted::text("done"),
    ]);
    let mut model = client(&server);
    let handle = HostHandle::spawn(HostBuilder::new(dir.path())).unwrap();
    let outcome = Session::new(handle, &mut model).run("Write.").unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("done"));
    assert!(!dir.path().join("written.txt").exists(), "the object's last value was taken");
    assert!(!dir.path().join("also.txt").exists(), "the text's last value was taken");
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap().lines().count(), 300, "a.txt unchanged");
    let results = tool_results(&server.requests()[1]);
    assert_eq!(results.len(), 2);
    for (id, text) in &results {
        assert!(
            text.starts_with("error (bad_arguments): fs-write: the key \"path\" is given more than once"),
            "{id}: {text}"
        );
    }
    // Exactly what `toolhost call` says for the same text.
    let mut host = toolhost::Host::new(dir.path()).unwrap();
    let direct = host.call_json("fs-write", r#"{"path":"a.txt","path":"also.txt","content":"x"}"#).model_text();
    assert_eq!(results[1].1, direct);
    assert_eq!(results[0].1, direct);
}

#[test]
fn a_key_given_twice_in_a_pformat_tag_s_json_form_is_refused() {
    let dir = workspace(&[]);
    let server = ModelServer::start(vec![
        Scripted::text(concat!(
            r#"<tool_call>{"name": "fs-write", "arguments": {"path": "a.txt", "path": "written.txt", "content": "x"}}</tool_call>"#,
            "\n",
            r#"<tool_call>{"name": "fs-write", "arguments": "{\"path\": \"a.txt\", \"content\": \"x\", \"path\": \"also.txt\"}"}</tool_call>"#,
            "\n",
            r#"<tool_call>{"name": "fs-read", "name": "fs-write", "arguments": {"path": "named.txt", "content": "x"}}</tool_call>"#
        )),
        Scripted::text("done"),
    ]);
    let mut model = client(&server);
    let handle = HostHandle::spawn(HostBuilder::new(dir.path())).unwrap();
    let outcome = Session::new(handle, &mut model).dialect(Dialect::Pformat).run("Write.").unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("done"));
    for file in ["written.txt", "also.txt", "named.txt"] {
        assert!(!dir.path().join(file).exists(), "{file} was written");
    }
    let second = server.requests()[1].json();
    let results = second["messages"][3]["content"].as_str().unwrap().to_string();
    assert_eq!(results.matches("error (bad_arguments): ").count(), 3, "{results}");
    assert_eq!(results.matches("the key \"path\" is given more than once").count(), 2, "{results}");
    assert!(results.contains("the key \"name\" is given more than once"), "{results}");
}

#[test]
fn the_calls_past_max_calls_per_reply_are_not_run_and_each_still_gets_an_answer() {
    let dir = workspace(&[]);
    let calls: Vec<(String, String)> = (0..40)
        .map(|i| (format!("c{i}"), json!({"path": format!("out/{i}.txt"), "content": "x"}).to_string()))
        .collect();
    let refs: Vec<(&str, &str, &str)> =
        calls.iter().map(|(id, args)| (id.as_str(), "fs-write", args.as_str())).collect();
    let server = ModelServer::start(vec![Scripted::calls(&refs), Scripted::calls(&refs[..5]), Scripted::text("done")]);
    let mut model = client(&server);
    let handle = HostHandle::spawn(HostBuilder::new(dir.path())).unwrap();
    let outcome = Session::new(handle, &mut model).run("Write forty files.").unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("done"));
    let written = std::fs::read_dir(dir.path().join("out")).unwrap().count();
    assert_eq!(written, 32, "the default cap");
    let results = tool_results(&server.requests()[1]);
    assert_eq!(results.len(), 40, "every call id is answered");
    assert_eq!(
        results.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>(),
        calls.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>()
    );
    for (id, text) in &results[32..] {
        assert!(
            text.starts_with(
                "error (denied): fs-write: not run: this reply made 40 tool calls and one reply may make at most 32"
            ),
            "{id}: {text}"
        );
    }
    assert_conforms(&server.requests()[1].json());
    // A lower cap from the session's settings.
    let dir = workspace(&[]);
    let server = ModelServer::start(vec![Scripted::calls(&refs[..5]), Scripted::text("done")]);
    let mut model = client(&server);
    let handle = HostHandle::spawn(HostBuilder::new(dir.path())).unwrap();
    Session::new(handle, &mut model).max_calls_per_reply(2).run("Write.").unwrap();
    assert_eq!(std::fs::read_dir(dir.path().join("out")).unwrap().count(), 2);
    let results = tool_results(&server.requests()[1]);
    assert_eq!(results.len(), 5);
    assert!(results[2].1.contains("at most 2 ([provider] max_calls_per_reply)"), "{}", results[2].1);
}

#[test]
fn one_reply_s_results_together_are_bounded_with_a_note_and_the_later_calls_are_not_run() {
    let long: String = (0..300).map(|i| format!("{i:04} {}\n", "x".repeat(40))).collect();
    let dir = workspace(&[("long.txt", long.as_str())]);
    let read = r#"{"path":"long.txt"}"#;
    let write = r#"{"path":"late.txt","content":"x"}"#;
    let server = ModelServer::start(vec![
        Scripted::calls(&[("r1", "fs-read", read), ("r2", "fs-read", read), ("w", "fs-write", write)]),
        Scripted::text("done"),
    ]);
    let mut model = client(&server);
    let handle = HostHandle::spawn(HostBuilder::new(dir.path())).unwrap();
    let outcome = Session::new(handle, &mut model).max_turn_result_chars(20_000).run("Read twice.").unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("done"));
    let results = tool_results(&server.requests()[1]);
    let sizes: Vec<usize> = results.iter().map(|(_, text)| text.chars().count()).collect();
    assert!(sizes[0] > 14_000, "the first result is whole: {sizes:?}");
    assert!(sizes[0] + sizes[1] <= 20_000, "{sizes:?}");
    assert!(results[1].1.ends_with("later calls of this reply are not run]"), "{}", results[1].1);
    assert!(
        results[2].1.starts_with("error (denied): fs-write: not run: the results of this reply's earlier calls"),
        "{}",
        results[2].1
    );
    assert!(!dir.path().join("late.txt").exists(), "the call after the bound ran");
}

#[test]
fn a_redirect_to_another_origin_is_not_followed() {
    let elsewhere = ModelServer::start(vec![Scripted::text("an answer from another origin")]);
    let target = format!("{}/chat/completions", elsewhere.base_url());
    let server = ModelServer::start(vec![Scripted::raw(302, "").header("Location", &target)]);
    let mut model = client(&server);
    let messages = [Message::User("hi".into())];
    let error = model.send(&ModelRequest { messages: &messages, tools: None }).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Agent);
    assert!(error.message().contains(&format!("redirects to {target}, another origin")), "{error}");
    assert!(error.message().contains("does not follow redirects"), "{error}");
    assert!(elsewhere.requests().is_empty(), "the conversation went to the other origin");
    assert_eq!(server.requests().len(), 1, "not retried");
}

#[test]
fn a_redirect_on_the_same_origin_is_not_followed_either() {
    let server = ModelServer::start(vec![
        Scripted::raw(307, "").header("Location", "/v2/chat/completions"),
        Scripted::text("moved"),
    ]);
    let mut model = client(&server);
    let messages = [Message::User("hi".into())];
    let error = model.send(&ModelRequest { messages: &messages, tools: None }).unwrap_err();
    assert!(error.message().contains("307 Temporary Redirect"), "{error}");
    assert!(error.message().contains("redirects to /v2/chat/completions, on the same origin"), "{error}");
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn a_reply_that_is_not_utf8_is_reported_with_the_byte_and_its_offset() {
    let body: &[u8] = b"{\"choices\":[{\"message\":{\"content\":\"caf\xe9\"}}]}";
    let server = ModelServer::start(vec![Scripted::bytes(200, body)]);
    let mut model = client(&server);
    let messages = [Message::User("hi".into())];
    let error = model.send(&ModelRequest { messages: &messages, tools: None }).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Agent);
    let at = body.iter().position(|b| *b == 0xe9).unwrap();
    assert!(error.message().contains("not UTF-8"), "{error}");
    assert!(error.message().contains(&format!("byte 0xe9 at offset {at} of {} bytes", body.len())), "{error}");
    assert!(error.message().contains("caf"), "the text before it: {error}");
}

// ---- `toolhost agent` as a real process ----

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `toolhost ARGS` in `dir`, with `home`, without proxies (the model server is on 127.0.0.1).
fn run(home: &Home, dir: &Path, args: &[&str]) -> Output {
    let mut command = home.command(dir, args);
    for proxy in ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"] {
        command.env_remove(proxy);
    }
    command.stdin(std::process::Stdio::null()).output().expect("toolhost runs")
}

#[test]
fn agent_prints_the_answer_on_stdout_and_one_progress_line_per_call_on_stderr() {
    let dir = workspace(&[]);
    let server = ModelServer::start(vec![
        Scripted::calls(&[("c1", "fs-write", r#"{"path":"out.txt","content":"made by the model\n"}"#)]),
        Scripted::text("I wrote out.txt."),
    ]);
    let home = Home::new();
    let url = server.base_url();
    let out = run(&home, dir.path(), &["--yes", "agent", "--base-url", &url, "--model", "m", "Write out.txt."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "I wrote out.txt.\n");
    let err = stderr(&out);
    let progress: Vec<&str> = err.lines().filter(|l| l.contains("[turn ")).collect();
    assert_eq!(progress.len(), 1, "{err}");
    assert!(progress[0].contains("fs-write") && progress[0].contains(": ok ("), "{}", progress[0]);
    assert_eq!(std::fs::read_to_string(dir.path().join("out.txt")).unwrap(), "made by the model\n");
    let requests = server.requests();
    assert_eq!(requests[1].json()["messages"][3]["role"], "tool");
    for request in &requests {
        assert_conforms(&request.json());
    }
}

#[test]
fn agent_reads_provider_from_the_config_and_flags_override_it() {
    let dir = workspace(&[]);
    let server = ModelServer::start(vec![Scripted::text("hello"), Scripted::text("hello again")]);
    let home = Home::new();
    let config = format!(
        "[provider]\nbase_url = \"{}\"\nmodel = \"config-model\"\napi_key_env = \"TOOLHOST_TEST_KEY\"\n\
         dialect = \"pformat\"\nextra_body = {{ temperature = 0.5 }}\n",
        server.base_url()
    );
    write(&home.toolhost_config_dir(), "config.toml", &config);
    let mut command = home.command(dir.path(), &["agent", "Say hello."]);
    command.env("TOOLHOST_TEST_KEY", "sk-from-env").env_remove("HTTP_PROXY").env_remove("http_proxy");
    let out = command.stdin(std::process::Stdio::null()).output().unwrap();
    assert_eq!((out.status.code(), stdout(&out)), (Some(0), "hello\n".to_string()), "{}", stderr(&out));
    let first = &server.requests()[0];
    assert_eq!(first.header("authorization"), Some("Bearer sk-from-env"));
    let body = first.json();
    assert_eq!((body["model"].clone(), body["temperature"].clone()), (json!("config-model"), json!(0.5)));
    assert!(body.get("tools").is_none(), "the config's dialect is pformat");
    // Flags win over the config.
    let mut command = home.command(dir.path(), &["agent", "--model", "flag-model", "--dialect", "native", "Again."]);
    command.env("TOOLHOST_TEST_KEY", "sk-from-env").env_remove("HTTP_PROXY").env_remove("http_proxy");
    let out = command.stdin(std::process::Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let body = server.requests()[1].json();
    assert_eq!(body["model"], "flag-model");
    assert!(body["tools"].as_array().is_some_and(|t| !t.is_empty()));
    // The key's variable missing is a settings error that names the variable.
    let out = run(&home, dir.path(), &["agent", "Again."]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("TOOLHOST_TEST_KEY"), "{}", stderr(&out));
    assert!(!stderr(&out).contains("sk-from-env"));
}

#[test]
fn agent_without_a_model_server_says_how_to_name_one() {
    let dir = workspace(&[]);
    let out = run(&Home::new(), dir.path(), &["agent", "Do it."]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--base-url"), "{}", stderr(&out));
}

#[test]
fn agent_reports_a_400_with_its_status_and_message_and_exits_1() {
    let dir = workspace(&[]);
    let server = ModelServer::start(vec![Scripted::raw(400, r#"{"error":{"message":"context length exceeded"}}"#)]);
    let url = server.base_url();
    let out = run(&Home::new(), dir.path(), &["agent", "--base-url", &url, "--model", "m", "Do it."]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("400 Bad Request") && stderr(&out).contains("context length exceeded"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).is_empty());
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn a_confirm_rule_without_a_terminal_denies_and_the_model_is_told_why_and_yes_allows() {
    let dir = workspace(&[("confirm.toml", "[[guard.rule]]\ntool = \"shell-exec\"\naction = \"confirm\"\n")]);
    let script =
        || vec![Scripted::calls(&[("c1", "shell-exec", r#"{"cmd":"touch ran"}"#)]), Scripted::text("finished")];
    let home = Home::new();
    let server = ModelServer::start(script());
    let url = server.base_url();
    let args = ["--config", "confirm.toml", "agent", "--base-url", &url, "--model", "m", "Touch ran."];
    let out = run(&home, dir.path(), &args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!dir.path().join("ran").exists());
    let told = server.requests()[1].json()["messages"][3]["content"].as_str().unwrap().to_string();
    assert!(told.starts_with("error (denied): shell-exec: denied: "), "{told}");
    assert!(told.contains("confirmation") && told.contains("no terminal"), "{told}");

    let server = ModelServer::start(script());
    let url = server.base_url();
    let args = ["--config", "confirm.toml", "--yes", "agent", "--base-url", &url, "--model", "m", "Touch ran."];
    let out = run(&home, dir.path(), &args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(dir.path().join("ran").exists());
    let told = server.requests()[1].json()["messages"][3]["content"].as_str().unwrap().to_string();
    assert!(told.starts_with("exit code: 0"), "{told}");
}

#[test]
fn a_scheme_tool_from_a_tools_folder_is_called_by_the_model_with_a_list_sent_as_json_text() {
    let dir = workspace(&[]);
    let tools = tempfile::tempdir().unwrap();
    write(
        tools.path(),
        "tally.scm",
        "(define-tool (tally (words list \"Words to count\") (word string \"The word\"))\n  \
         \"Count how often a word occurs in a list.\"\n  \
         (length (filter (lambda (w) (equal? w word)) words)))\n",
    );
    let server = ModelServer::start(vec![
        // The list arrives as JSON text inside the arguments, as models often send it.
        Scripted::calls(&[("t1", "tally", r#"{"words":"[\"a\",\"b\",\"a\"]","word":"a"}"#)]),
        Scripted::text("a occurs twice"),
    ]);
    let url = server.base_url();
    let folder = tools.path().display().to_string();
    let out =
        run(&Home::new(), dir.path(), &["--tools", &folder, "agent", "--base-url", &url, "--model", "m", "Count a."]);
    assert_eq!((out.status.code(), stdout(&out)), (Some(0), "a occurs twice\n".to_string()), "{}", stderr(&out));
    let requests = server.requests();
    let offered = requests[0].json()["tools"].as_array().unwrap().iter().any(|t| t["function"]["name"] == "tally");
    assert!(offered, "the Scheme tool is in the catalogue");
    assert_eq!(requests[1].json()["messages"][3], json!({"role": "tool", "tool_call_id": "t1", "content": "2"}));
}

/// Needs the MCP client (the `mcp` feature), as the agent binary alone does not.
#[cfg(feature = "mcp")]
#[test]
fn a_scheme_tool_and_an_mcp_tool_are_called_by_the_model_in_one_session() {
    let tools = tempfile::tempdir().unwrap();
    write(tools.path(), "shout.scm", "(define-tool (shout (text string \"Text\")) \"Shout.\" (string-upcase text))\n");
    let config = peers::stdio_entry("fixture", &peers::fixture_server(), &[], None);
    let dir = workspace(&[("mcp.toml", &config)]);
    let server = ModelServer::start(vec![
        // One reply, two calls: the Scheme tool, and the MCP tool under the name providers see.
        Scripted::calls(&[
            ("c1", "shout", r#"{"text":"hi"}"#),
            ("c2", "fixture__args", r#"{"text":"","flag":false,"count":0}"#),
        ]),
        Scripted::text("done"),
    ]);
    let (url, folder) = (server.base_url(), tools.path().display().to_string());
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("s.jsonl").display().to_string();
    let args = ["--config", "mcp.toml", "--tools", &folder, "agent", "--base-url", &url, "--model", "m", "--log", &log];
    let mut all = args.to_vec();
    all.push("Shout and ask.");
    let out = run(&Home::new(), dir.path(), &all);
    assert_eq!((out.status.code(), stdout(&out)), (Some(0), "done\n".to_string()), "{}", stderr(&out));
    let requests = server.requests();
    let offered: Vec<Value> =
        requests[0].json()["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].clone()).collect();
    assert!(offered.contains(&json!("shout")) && offered.contains(&json!("fixture__args")), "{offered:?}");
    let messages = requests[1].json()["messages"].clone();
    assert_eq!(messages[3], json!({"role": "tool", "tool_call_id": "c1", "content": "HI"}));
    assert_eq!(messages[4]["tool_call_id"], "c2");
    let content = messages[4]["content"].as_str().unwrap();
    let received: Value = serde_json::from_str(content).unwrap_or_else(|e| panic!("{e}: {content}"));
    assert_eq!(
        received,
        json!({"text": "", "flag": false, "count": 0}),
        "\"\", false and 0 reach the MCP server as given"
    );
    let calls: Vec<String> = read_log(Path::new(&log))
        .unwrap()
        .into_iter()
        .filter_map(|e| match e {
            Entry::Call { record, .. } => Some(record.tool),
            _ => None,
        })
        .collect();
    assert_eq!(calls, ["shout", "fixture__args"], "both call records are in the log");
}

#[test]
fn ctrl_c_stops_the_running_call_and_ends_the_session_with_the_log_flushed() {
    let dir = workspace(&[("limits.toml", "[limits]\nscheme_call_s = 600\n")]);
    let tools = tempfile::tempdir().unwrap();
    write(tools.path(), "spin.scm", "(define-tool (spin) \"Never ends.\" (let loop () (loop)))\n");
    let server = ModelServer::start(vec![Scripted::calls(&[("s", "spin", "{}")]), Scripted::text("unreached")]);
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("s.jsonl");
    let (url, folder, log_arg) = (server.base_url(), tools.path().display().to_string(), log.display().to_string());
    let home = Home::new();
    let args = [
        "--config",
        "limits.toml",
        "--tools",
        &folder,
        "agent",
        "--base-url",
        &url,
        "--model",
        "m",
        "--log",
        &log_arg,
        "Spin.",
    ];
    let mut child = home.spawn(dir.path(), &args);
    // The reply is in the log once the call is about to run; the handler is installed by then.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !std::fs::read_to_string(&log).unwrap_or_default().contains(r#""type":"reply""#) {
        assert!(std::time::Instant::now() < deadline, "the session never got its reply");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) on the child's own pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the session did not end after Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130));
    let entries = read_log(&log).unwrap();
    let Some(Entry::End { reason, .. }) = entries.last() else { panic!("{entries:?}") };
    assert_eq!(reason, "interrupted");
    assert_eq!(server.requests().len(), 1, "no request after the stop");
}

#[test]
fn ctrl_c_kills_a_running_shell_exec_command_with_its_processes() {
    let dir = workspace(&[]);
    let server = ModelServer::start(vec![
        Scripted::calls(&[("s", "shell-exec", r#"{"cmd": "sleep 51.5"}"#)]),
        Scripted::text("unreached"),
    ]);
    let url = server.base_url();
    let home = Home::new();
    let args = ["--yes", "agent", "--base-url", &url, "--model", "m", "Sleep."];
    let mut child = home.spawn(dir.path(), &args);
    eventually("the command to start", || !processes_with_arg("51.5").is_empty());
    // SAFETY: kill(2) on the child's own pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    eventually("the session to end", || matches!(child.try_wait(), Ok(Some(_))));
    eventually("the command's processes to be killed", || processes_with_arg("51.5").is_empty());
    assert_eq!(server.requests().len(), 1, "no request after the stop");
}

#[test]
fn on_a_terminal_the_agent_shows_the_preview_and_takes_the_answer() {
    let dir = workspace(&[("confirm.toml", "[[guard.rule]]\ntool = \"shell-exec\"\naction = \"confirm\"\n")]);
    let home = Home::new();
    for (typed, file, told) in [("y\n", "yes-file", "exit code: 0"), ("n\n", "no-file", "the person declined")] {
        let server = ModelServer::start(vec![
            Scripted::calls(&[("c1", "shell-exec", &format!(r#"{{"cmd":"touch {file}"}}"#))]),
            Scripted::text("over"),
        ]);
        let url = server.base_url();
        let args = ["--config", "confirm.toml", "agent", "--base-url", &url, "--model", "m", "Touch it."];
        let screen = on_terminal(&home, dir.path(), &args, typed);
        assert!(
            screen.contains("shell-exec needs your confirmation") && screen.contains(&format!("$ touch {file}")),
            "{screen}"
        );
        assert_eq!(dir.path().join(file).exists(), typed == "y\n", "{screen}");
        let result = server.requests()[1].json()["messages"][3]["content"].as_str().unwrap().to_string();
        assert!(result.contains(told), "{result}");
        assert!(screen.contains("over"), "{screen}");
    }
}

#[test]
fn agent_takes_max_calls_per_reply_from_the_config() {
    let dir = workspace(&[]);
    let file = |i: usize| json!({"path": format!("out/{i}.txt"), "content": "x"}).to_string();
    let (a, b, c) = (file(0), file(1), file(2));
    let server = ModelServer::start(vec![
        Scripted::calls(&[("c0", "fs-write", &a), ("c1", "fs-write", &b), ("c2", "fs-write", &c)]),
        Scripted::text("done"),
    ]);
    let home = Home::new();
    let config = format!("[provider]\nbase_url = \"{}\"\nmodel = \"m\"\nmax_calls_per_reply = 2\n", server.base_url());
    write(&home.toolhost_config_dir(), "config.toml", &config);
    let out = run(&home, dir.path(), &["--yes", "agent", "Write three files."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::read_dir(dir.path().join("out")).unwrap().count(), 2);
    let results = tool_results(&server.requests()[1]);
    assert!(results[2].1.contains("not run") && results[2].1.contains("at most 2"), "{}", results[2].1);
}

#[test]
fn agents_md_of_the_user_and_the_project_follow_the_system_prompt_and_the_log_says_so() {
    let dir = workspace(&[("AGENTS.md", "Run `make check` before you answer.\n")]);
    let server = ModelServer::start(vec![Scripted::text("done")]);
    let home = Home::new();
    write(&home.toolhost_config_dir(), "AGENTS.md", "Answer in British English.\n");
    let log = dir.path().join("session.jsonl");
    let (url, log_arg) = (server.base_url(), log.display().to_string());
    let out = run(&home, dir.path(), &["agent", "--base-url", &url, "--model", "m", "--log", &log_arg, "Hello."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let request = server.requests()[0].json();
    let system = request["messages"][0]["content"].as_str().unwrap_or_default().to_string();
    assert!(system.starts_with(&toolhost::agent::DEFAULT_SYSTEM_PROMPT[..40]), "{system}");
    let (user, project) = (system.find("British English"), system.find("make check"));
    assert!(user.is_some() && project.is_some() && user < project, "the user's, then the project's: {system}");
    let first = std::fs::read_to_string(&log).unwrap().lines().next().unwrap_or_default().to_string();
    let session: Value = serde_json::from_str(&first).unwrap();
    let files: Vec<&str> =
        session["instructions"].as_array().unwrap().iter().filter_map(|f| f["path"].as_str()).collect();
    assert_eq!(files.len(), 2, "{session}");
    assert!(files[0].ends_with("toolhost/AGENTS.md") && files[1] == "AGENTS.md", "{files:?}");
}

#[test]
fn an_agents_md_that_leads_out_of_the_workspace_is_not_sent_to_the_model() {
    let dir = workspace(&[]);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("id_key"), "SECRET-KEY-MATERIAL\n").unwrap();
    std::os::unix::fs::symlink(outside.path().join("id_key"), dir.path().join("AGENTS.md")).unwrap();
    let server = ModelServer::start(vec![Scripted::text("done")]);
    let home = Home::new();
    let url = server.base_url();
    let out = run(&home, dir.path(), &["agent", "--base-url", &url, "--model", "m", "Hello."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!server.requests()[0].body.contains("SECRET-KEY-MATERIAL"));
    assert!(stderr(&out).contains("AGENTS.md is not included"), "{}", stderr(&out));
}
