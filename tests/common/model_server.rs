//! A model for the agent tests: a real HTTP server on 127.0.0.1 that answers chat-completions
//! requests with scripted replies, in order, and keeps every request it is sent, byte for byte. And
//! a check, written by hand from OpenAI's published API schema (`CreateChatCompletionRequest`), that
//! a request body has the shape that schema gives it.

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
        Scripted { status, headers: Vec::new(), body: body.to_vec() }
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
        "HTTP/1.1 {} Scripted\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        answer.status,
        answer.body.len()
    );
    for (name, value) in &answer.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(&answer.body)?;
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
