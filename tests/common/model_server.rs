//! A model for the agent tests: a real HTTP server on 127.0.0.1 that answers requests with scripted
//! replies, in order, and keeps every request it is sent, byte for byte. Replies come whole or as
//! server-sent events (written to the socket a few bytes at a time), in the shapes of the three APIs
//! toolhost speaks: chat completions, Anthropic's Messages, OpenAI's Responses. And checks that a
//! request body has the shape the provider's published schema gives it: written by hand from
//! OpenAI's API schema for chat completions (`CreateChatCompletionRequest`) and Responses
//! (`CreateResponse`), and by a JSON Schema validator against the schema derived from Anthropic's
//! SDK (`tests/fixtures/anthropic/`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct Scripted {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    content_type: &'static str,
    /// Written in pieces of this many bytes, each flushed (a stream arriving bit by bit).
    piece: Option<usize>,
}

impl Scripted {
    /// A 200 whose message says `text` and calls nothing.
    pub fn text(text: &str) -> Scripted {
        Scripted::message(json!({"role": "assistant", "content": text}), "stop")
    }

    /// A 200 whose message calls tools: `(id, name, arguments as the model wrote them)`.
    pub fn calls(calls: &[(&str, &str, &str)]) -> Scripted {
        let calls: Vec<Value> = calls
            .iter()
            .map(|(id, name, arguments)| {
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
            })
            .collect();
        Scripted::message(json!({"role": "assistant", "content": null, "tool_calls": calls}), "tool_calls")
    }

    /// A 200 with this message in the first choice.
    pub fn message(message: Value, finish_reason: &str) -> Scripted {
        let body = json!({
            "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "test-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": null}],
        });
        Scripted::raw(200, &body.to_string())
    }

    /// Any status with any body.
    pub fn raw(status: u16, body: &str) -> Scripted {
        Scripted::bytes(status, body.as_bytes())
    }

    /// Any status with a body of any bytes, UTF-8 or not.
    pub fn bytes(status: u16, body: &[u8]) -> Scripted {
        Scripted { status, headers: Vec::new(), body: body.to_vec(), content_type: "application/json", piece: None }
    }

    /// A 200 of server-sent events `(name, data)`, written a few bytes at a time.
    pub fn events(events: &[(Option<&str>, String)]) -> Scripted {
        let mut body = String::from(": a comment, as keep-alive pings are\n\n");
        for (name, data) in events {
            if let Some(name) = name {
                body.push_str(&format!("event: {name}\n"));
            }
            body.push_str(&format!("data: {data}\n\n"));
        }
        Scripted { content_type: "text/event-stream", piece: Some(7), ..Scripted::raw(200, &body) }
    }

    /// Adds a response header.
    pub fn header(mut self, name: &str, value: &str) -> Scripted {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("the request body is JSON")
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// The server. It answers in the order of its script; past the end, with a 400 saying so.
pub struct ModelServer {
    port: u16,
    received: Arc<Mutex<Vec<Received>>>,
    done: Arc<AtomicBool>,
}

impl ModelServer {
    pub fn start(script: Vec<Scripted>) -> ModelServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().expect("address").port();
        let received: Arc<Mutex<Vec<Received>>> = Arc::default();
        let done: Arc<AtomicBool> = Arc::default();
        let (log, stop) = (Arc::clone(&received), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut script = script.into_iter();
            for stream in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut stream) = stream else { continue };
                let Some(request) = read_request(&mut stream) else { continue };
                log.lock().unwrap().push(request);
                let answer = script.next().unwrap_or_else(|| {
                    Scripted::raw(400, r#"{"error":{"message":"the test script has no more replies"}}"#)
                });
                let _ = write_answer(&mut stream, &answer);
            }
        });
        ModelServer { port, received, done }
    }

    /// The base URL to give toolhost: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn read_request(stream: &mut TcpStream) -> Option<Received> {
    stream.set_read_timeout(Some(Duration::from_secs(60))).ok()?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_string(), parts.next()?.to_string());
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }
    let length: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Received { method, path, headers, body: String::from_utf8(body).ok()? })
}

fn write_answer(stream: &mut TcpStream, answer: &Scripted) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} Scripted\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        answer.status,
        answer.content_type,
        answer.body.len()
    );
    for (name, value) in &answer.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    match answer.piece {
        None => stream.write_all(&answer.body)?,
        Some(n) => {
            for piece in answer.body.chunks(n) {
                stream.write_all(piece)?;
                stream.flush()?;
            }
        }
    }
    stream.flush()
}

/// Every top-level key `CreateChatCompletionRequest` has.
const REQUEST_KEYS: &[&str] = &[
    "metadata",
    "top_logprobs",
    "temperature",
    "top_p",
    "user",
    "safety_identifier",
    "prompt_cache_key",
    "prompt_cache_retention",
    "prompt_cache_options",
    "messages",
    "model",
    "service_tier",
    "modalities",
    "verbosity",
    "reasoning_effort",
    "max_completion_tokens",
    "frequency_penalty",
    "presence_penalty",
    "web_search_options",
    "response_format",
    "audio",
    "store",
    "moderation",
    "stream",
    "stop",
    "logit_bias",
    "logprobs",
    "max_tokens",
    "n",
    "prediction",
    "seed",
    "stream_options",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "function_call",
    "functions",
];

/// Panics, saying where, unless `body` fits OpenAI's `CreateChatCompletionRequest` in the parts
/// toolhost sends: `model` and a non-empty `messages` (required); each message one of the system,
/// user, assistant and tool shapes with their required keys and types and no others; `tools`, when
/// present, a non-empty array of function tools with a provider-legal name; no top-level key the
/// schema does not have.
pub fn assert_conforms(body: &Value) {
    let object = body.as_object().expect("the body is an object");
    for key in object.keys() {
        assert!(REQUEST_KEYS.contains(&key.as_str()), "top-level key {key:?} is not in the schema");
    }
    assert!(object.get("model").is_some_and(Value::is_string), "model must be a string");
    let messages = object.get("messages").and_then(Value::as_array).expect("messages must be an array");
    assert!(!messages.is_empty(), "messages must not be empty");
    for (i, message) in messages.iter().enumerate() {
        check_message(message).unwrap_or_else(|e| panic!("messages[{i}]: {e}: {message}"));
    }
    if let Some(tools) = object.get("tools") {
        let tools = tools.as_array().expect("tools must be an array");
        assert!(!tools.is_empty(), "an empty tools array is refused by OpenAI");
        for (i, tool) in tools.iter().enumerate() {
            check_tool(tool).unwrap_or_else(|e| panic!("tools[{i}]: {e}: {tool}"));
        }
    }
}

fn only_keys(value: &Value, allowed: &[&str]) -> Result<(), String> {
    let object = value.as_object().ok_or("not an object")?;
    match object.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(key) => Err(format!("key {key:?} is not in the schema")),
        None => Ok(()),
    }
}

fn string_at(value: &Value, key: &str) -> Result<(), String> {
    value.get(key).filter(|v| v.is_string()).map(|_| ()).ok_or(format!("{key} must be a string"))
}

fn check_message(message: &Value) -> Result<(), String> {
    match message.get("role").and_then(Value::as_str) {
        Some("system" | "user" | "developer") => {
            only_keys(message, &["role", "content", "name"])?;
            string_at(message, "content")
        }
        Some("assistant") => {
            only_keys(message, &["role", "content", "name", "tool_calls", "refusal"])?;
            match message.get("content") {
                None | Some(Value::Null | Value::String(_)) => {}
                Some(_) => return Err("content must be a string or null".into()),
            }
            if let Some(calls) = message.get("tool_calls") {
                for call in calls.as_array().ok_or("tool_calls must be an array")? {
                    only_keys(call, &["id", "type", "function"])?;
                    string_at(call, "id")?;
                    if call.get("type") != Some(&json!("function")) {
                        return Err("a tool call's type must be \"function\"".into());
                    }
                    let function = call.get("function").ok_or("a tool call needs its function")?;
                    only_keys(function, &["name", "arguments"])?;
                    string_at(function, "name")?;
                    string_at(function, "arguments")?;
                }
            }
            Ok(())
        }
        Some("tool") => {
            only_keys(message, &["role", "content", "tool_call_id"])?;
            string_at(message, "content")?;
            string_at(message, "tool_call_id")
        }
        other => Err(format!("unknown role {other:?}")),
    }
}

fn check_tool(tool: &Value) -> Result<(), String> {
    only_keys(tool, &["type", "function"])?;
    if tool.get("type") != Some(&json!("function")) {
        return Err("type must be \"function\"".into());
    }
    let function = tool.get("function").ok_or("function is required")?;
    only_keys(function, &["name", "description", "parameters", "strict"])?;
    let name = function.get("name").and_then(Value::as_str).ok_or("name must be a string")?;
    let legal =
        !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !legal {
        return Err(format!("name {name:?} is not ^[a-zA-Z0-9_-]{{1,64}}$"));
    }
    if let Some(description) = function.get("description") {
        description.as_str().ok_or("description must be a string")?;
    }
    if let Some(parameters) = function.get("parameters") {
        parameters.as_object().ok_or("parameters must be an object")?;
    }
    match function.get("strict") {
        None | Some(Value::Null | Value::Bool(_)) => Ok(()),
        Some(_) => Err("strict must be a boolean".into()),
    }
}

/// Server-sent events: `(event name, data)`.
pub type Events = Vec<(Option<&'static str>, String)>;

/// A scripted reply in each API's shape: its text, its calls `(id, name, arguments as JSON text)`,
/// why it stopped (the API's own word) and its usage `(input, output, cached)`; served whole or
/// streamed, the same reply.
#[derive(Debug, Clone)]
pub struct Reply {
    pub text: Option<String>,
    pub calls: Vec<(String, String, String)>,
    pub stop: Option<String>,
    pub usage: Option<(u64, u64, u64)>,
    /// How many characters each streamed fragment of text or arguments has.
    pub split: usize,
}

impl Reply {
    pub fn text(text: &str) -> Reply {
        Reply { text: Some(text.into()), calls: Vec::new(), stop: None, usage: None, split: 3 }
    }

    pub fn calls(calls: &[(&str, &str, &str)]) -> Reply {
        let calls = calls.iter().map(|(i, n, a)| (i.to_string(), n.to_string(), a.to_string())).collect();
        Reply { text: None, calls, stop: None, usage: None, split: 3 }
    }

    pub fn with_text(mut self, text: &str) -> Reply {
        self.text = Some(text.into());
        self
    }

    pub fn stop(mut self, stop: &str) -> Reply {
        self.stop = Some(stop.into());
        self
    }

    pub fn usage(mut self, input: u64, output: u64, cached: u64) -> Reply {
        self.usage = Some((input, output, cached));
        self
    }

    fn pieces(&self, text: &str) -> Vec<String> {
        let chars: Vec<char> = text.chars().collect();
        chars.chunks(self.split.max(1)).map(|c| c.iter().collect()).collect()
    }

    // --- chat completions ---

    pub fn chat(&self) -> Scripted {
        let calls: Vec<Value> = self
            .calls
            .iter()
            .map(
                |(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}),
            )
            .collect();
        let mut message = json!({"role": "assistant", "content": self.text});
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(calls);
        }
        let stop =
            self.stop.clone().unwrap_or_else(|| if self.calls.is_empty() { "stop" } else { "tool_calls" }.into());
        let mut body = json!({"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "test-model",
            "choices": [{"index": 0, "message": message, "finish_reason": stop, "logprobs": null}]});
        if let Some((input, output, cached)) = self.usage {
            body["usage"] = json!({"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output,
                "prompt_tokens_details": {"cached_tokens": cached}});
        }
        Scripted::raw(200, &body.to_string())
    }

    pub fn chat_events(&self) -> Events {
        let chunk = |delta: Value, finish: Value| {
            (
                None,
                json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0, "model": "test-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
                .to_string(),
            )
        };
        let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), Value::Null)];
        if let Some(text) = &self.text {
            events.extend(self.pieces(text).into_iter().map(|p| chunk(json!({"content": p}), Value::Null)));
        }
        for (i, (id, name, args)) in self.calls.iter().enumerate() {
            events.push(chunk(
                json!({"tool_calls": [{"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
                Value::Null,
            ));
            for piece in self.pieces(args) {
                events
                    .push(chunk(json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}), Value::Null));
            }
        }
        let stop =
            self.stop.clone().unwrap_or_else(|| if self.calls.is_empty() { "stop" } else { "tool_calls" }.into());
        events.push(chunk(json!({}), json!(stop)));
        if let Some((input, output, cached)) = self.usage {
            events.push((
                None,
                json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0,
                "model": "test-model", "choices": [], "usage": {"prompt_tokens": input, "completion_tokens": output,
                "total_tokens": input + output, "prompt_tokens_details": {"cached_tokens": cached}}})
                .to_string(),
            ));
        }
        events.push((None, "[DONE]".into()));
        events
    }

    // --- Anthropic Messages ---

    fn anthropic_usage(&self) -> Value {
        let (input, output, cached) = self.usage.unwrap_or((0, 0, 0));
        // Anthropic counts cached tokens apart from input_tokens.
        json!({"input_tokens": input - cached, "cache_creation_input_tokens": 0, "cache_read_input_tokens": cached,
            "output_tokens": output})
    }

    fn anthropic_stop(&self) -> String {
        self.stop.clone().unwrap_or_else(|| if self.calls.is_empty() { "end_turn" } else { "tool_use" }.into())
    }

    pub fn anthropic(&self) -> Scripted {
        let mut content = Vec::new();
        if let Some(text) = &self.text {
            content.push(json!({"type": "text", "text": text}));
        }
        for (id, name, args) in &self.calls {
            let input: Value = serde_json::from_str(args).expect("scripted arguments are JSON");
            content.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
        }
        let body = json!({"id": "msg_test", "type": "message", "role": "assistant", "model": "test-model",
            "content": content, "stop_reason": self.anthropic_stop(), "stop_sequence": null, "usage": self.anthropic_usage()});
        Scripted::raw(200, &body.to_string())
    }

    pub fn anthropic_events(&self) -> Events {
        let mut usage = self.anthropic_usage();
        let output = usage["output_tokens"].clone();
        usage["output_tokens"] = json!(1);
        let mut events = vec![(
            Some("message_start"),
            json!({"type": "message_start", "message": {"id": "msg_test",
            "type": "message", "role": "assistant", "model": "test-model", "content": [], "stop_reason": null,
            "usage": usage}})
            .to_string(),
        )];
        events.push((Some("ping"), json!({"type": "ping"}).to_string()));
        let mut index = 0;
        if let Some(text) = &self.text {
            events.push((
                Some("content_block_start"),
                json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "text", "text": ""}})
                .to_string(),
            ));
            for piece in self.pieces(text) {
                events.push((
                    Some("content_block_delta"),
                    json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "text_delta", "text": piece}})
                    .to_string(),
                ));
            }
            events
                .push((Some("content_block_stop"), json!({"type": "content_block_stop", "index": index}).to_string()));
            index += 1;
        }
        for (id, name, args) in &self.calls {
            events.push((
                Some("content_block_start"),
                json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}})
                .to_string(),
            ));
            events.push((
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta", "partial_json": ""}})
                .to_string(),
            ));
            for piece in self.pieces(args) {
                events.push((
                    Some("content_block_delta"),
                    json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": piece}})
                    .to_string(),
                ));
            }
            events
                .push((Some("content_block_stop"), json!({"type": "content_block_stop", "index": index}).to_string()));
            index += 1;
        }
        events.push((
            Some("message_delta"),
            json!({"type": "message_delta", "delta": {"stop_reason": self.anthropic_stop(),
            "stop_sequence": null}, "usage": {"output_tokens": output}})
            .to_string(),
        ));
        events.push((Some("message_stop"), json!({"type": "message_stop"}).to_string()));
        events
    }

    // --- OpenAI Responses ---

    fn responses_output(&self) -> Vec<Value> {
        let mut output = Vec::new();
        if let Some(text) = &self.text {
            output.push(json!({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}));
        }
        for (i, (id, name, args)) in self.calls.iter().enumerate() {
            output.push(json!({"type": "function_call", "id": format!("fc_{i}"), "call_id": id, "name": name,
                "arguments": args, "status": "completed"}));
        }
        output
    }

    fn response(&self) -> Value {
        let (status, incomplete) = match self.stop.as_deref() {
            Some(reason) => ("incomplete", json!({"reason": reason})),
            None => ("completed", Value::Null),
        };
        let mut response = json!({"id": "resp_test", "object": "response", "status": status, "error": null,
            "incomplete_details": incomplete, "model": "test-model", "output": self.responses_output()});
        if let Some((input, output, cached)) = self.usage {
            response["usage"] = json!({"input_tokens": input, "input_tokens_details": {"cached_tokens": cached},
                "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": input + output});
        }
        response
    }

    pub fn responses(&self) -> Scripted {
        Scripted::raw(200, &self.response().to_string())
    }

    pub fn responses_events(&self) -> Events {
        let event = |name: &'static str, mut data: Value| {
            data["type"] = json!(name);
            (Some(name), data.to_string())
        };
        let mut events = vec![event(
            "response.created",
            json!({"response": {"id": "resp_test", "status": "in_progress", "output": []}}),
        )];
        for (index, item) in self.responses_output().into_iter().enumerate() {
            if item["type"] == "message" {
                let text = item["content"][0]["text"].as_str().unwrap_or_default().to_string();
                events.push(event("response.output_item.added", json!({"output_index": index,
                    "item": {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}})));
                for piece in self.pieces(&text) {
                    events.push(event(
                        "response.output_text.delta",
                        json!({"item_id": "msg_1", "output_index": index,
                        "content_index": 0, "delta": piece}),
                    ));
                }
                events.push(event(
                    "response.output_text.done",
                    json!({"item_id": "msg_1", "output_index": index, "text": text}),
                ));
            } else {
                let args = item["arguments"].as_str().unwrap_or_default().to_string();
                let mut added = item.clone();
                added["arguments"] = json!("");
                added["status"] = json!("in_progress");
                events.push(event("response.output_item.added", json!({"output_index": index, "item": added})));
                for piece in self.pieces(&args) {
                    events.push(event(
                        "response.function_call_arguments.delta",
                        json!({"item_id": item["id"],
                        "output_index": index, "delta": piece}),
                    ));
                }
                events.push(event(
                    "response.function_call_arguments.done",
                    json!({"item_id": item["id"],
                    "output_index": index, "arguments": args}),
                ));
            }
            events.push(event("response.output_item.done", json!({"output_index": index, "item": item})));
        }
        let terminal = if self.stop.is_some() { "response.incomplete" } else { "response.completed" };
        events.push(event(terminal, json!({"response": self.response()})));
        events
    }
}

/// The Anthropic request schema (`tests/fixtures/anthropic/`), compiled once per check.
fn anthropic_schema() -> (boon::Schemas, boon::SchemaIndex) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/anthropic/messages-request-2023-06-01.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("the fixture")).expect("JSON");
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    compiler.add_resource("file:///anthropic-messages-request.json", schema).expect("the schema loads");
    let index = compiler.compile("file:///anthropic-messages-request.json", &mut schemas).expect("the schema compiles");
    (schemas, index)
}

/// Panics, saying why, unless `body` is valid against the JSON Schema derived from Anthropic's SDK
/// types for the `anthropic-version` toolhost sends, and meets what the SDK types do not say: tool
/// names `^[a-zA-Z0-9_-]{1,128}$`, property names `^[a-zA-Z0-9_.-]{1,64}$`, an integer `max_tokens`.
pub fn assert_conforms_anthropic(body: &Value) {
    let (schemas, index) = anthropic_schema();
    if let Err(e) = schemas.validate(body, index) {
        panic!("the request does not fit Anthropic's schema: {e:#}\n{body:#}");
    }
    assert!(body["max_tokens"].is_u64(), "max_tokens must be an integer");
    for tool in body["tools"].as_array().into_iter().flatten() {
        let name = tool["name"].as_str().unwrap_or_default();
        let legal =
            (1..=128).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        assert!(legal, "tool name {name:?} is not ^[a-zA-Z0-9_-]{{1,128}}$");
        for key in tool["input_schema"]["properties"].as_object().into_iter().flatten().map(|(k, _)| k) {
            let legal =
                (1..=64).contains(&key.len()) && key.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
            assert!(legal, "property {key:?} of {name} is not ^[a-zA-Z0-9_.-]{{1,64}}$");
        }
    }
}

/// Every top-level key `CreateResponse` has (OpenAI's API schema, version 2.3.0).
const RESPONSES_KEYS: &[&str] = &[
    "background",
    "context_management",
    "conversation",
    "include",
    "input",
    "instructions",
    "max_output_tokens",
    "max_tool_calls",
    "metadata",
    "model",
    "moderation",
    "parallel_tool_calls",
    "previous_response_id",
    "prompt",
    "prompt_cache_key",
    "prompt_cache_options",
    "prompt_cache_retention",
    "reasoning",
    "safety_identifier",
    "service_tier",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "truncation",
    "user",
];

/// Panics, saying where, unless `body` fits OpenAI's `CreateResponse` in the parts toolhost sends:
/// no top-level key the schema does not have; `input` items each an `EasyInputMessage` (`role`,
/// `content` a string), a `FunctionToolCall` (`type`, `call_id`, `name`, `arguments` a string) or a
/// `FunctionCallOutputItemParam` (`type`, `call_id`, `output` a string), every output answering a
/// call made before it; tools flat `FunctionTool`s with `type`, `name`, `parameters` and `strict`.
pub fn assert_conforms_responses(body: &Value) {
    let object = body.as_object().expect("the body is an object");
    for key in object.keys() {
        assert!(RESPONSES_KEYS.contains(&key.as_str()), "top-level key {key:?} is not in CreateResponse");
    }
    assert!(body["model"].is_string(), "model must be a string");
    let mut calls: Vec<&str> = Vec::new();
    for (i, item) in body["input"].as_array().expect("input is an array").iter().enumerate() {
        let mut check = || -> Result<(), String> {
            match item.get("type").and_then(Value::as_str) {
                None | Some("message") => {
                    only_keys(item, &["role", "content", "phase", "type"])?;
                    let role = item["role"].as_str().ok_or("role must be a string")?;
                    if !["user", "assistant", "system", "developer"].contains(&role) {
                        return Err(format!("role {role:?} is not one the schema has"));
                    }
                    string_at(item, "content")
                }
                Some("function_call") => {
                    only_keys(item, &["id", "type", "call_id", "caller", "namespace", "name", "arguments", "status"])?;
                    string_at(item, "call_id")?;
                    string_at(item, "name")?;
                    string_at(item, "arguments")?;
                    calls.push(item["call_id"].as_str().unwrap_or_default());
                    Ok(())
                }
                Some("function_call_output") => {
                    only_keys(item, &["id", "call_id", "type", "output", "name", "namespace", "caller", "status"])?;
                    string_at(item, "output")?;
                    let id = item["call_id"].as_str().ok_or("call_id must be a string")?;
                    if !calls.contains(&id) {
                        return Err(format!("no function_call before it has call_id {id:?}"));
                    }
                    Ok(())
                }
                Some(other) => Err(format!("toolhost sends no {other:?} items")),
            }
        };
        check().unwrap_or_else(|e| panic!("input[{i}]: {e}: {item}"));
    }
    for (i, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
        let check = || -> Result<(), String> {
            only_keys(
                tool,
                &[
                    "type",
                    "name",
                    "description",
                    "parameters",
                    "output_schema",
                    "strict",
                    "defer_loading",
                    "allowed_callers",
                ],
            )?;
            if tool["type"] != "function" {
                return Err("type must be \"function\"".into());
            }
            string_at(tool, "name")?;
            if !(tool["parameters"].is_object() || tool["parameters"].is_null()) || tool.get("parameters").is_none() {
                return Err("parameters is required, an object or null".into());
            }
            if !tool.get("strict").is_some_and(|s| s.is_boolean() || s.is_null()) {
                return Err("strict is required, a boolean".into());
            }
            Ok(())
        };
        check().unwrap_or_else(|e| panic!("tools[{i}]: {e}: {tool}"));
    }
}
