//! The OpenAI-compatible chat-completions client (llama-server, vLLM, Ollama, OpenRouter, OpenAI):
//! the request body, the HTTP exchange with its timeout and retries, and reading the reply. It
//! knows nothing of dialects or tools beyond carrying the `tools` array it is given: the session
//! decides what goes in a request.
//!
//! # The request body
//!
//! `{"model": M, "messages": [...], "tools": [...]}`, in that key order, then the fields of
//! `extra_body` in theirs. `tools` is left out when there are none (OpenAI refuses an empty array).
//! `extra_body` is merged at the top level and can never replace `model`, `messages` or `tools`: its
//! entries with those names are skipped, even when the request has no `tools` of its own. Nothing
//! else is added, so the body is exactly what the settings and the conversation say (the tests hold
//! it byte for byte).
//!
//! # Retries and errors
//!
//! A 429 or 5xx answer is retried, at most [`RetryPolicy::attempts`] times in all, after the
//! server's `Retry-After` (seconds) when it sends one, else after a doubling back-off from
//! [`RetryPolicy::base_delay`]; every wait is capped at [`RetryPolicy::max_delay`]. Any other
//! status is an error at once (a 400 is the request's fault and would fail again), naming the
//! status and the server's own message. A server that cannot be reached, or that takes longer than
//! the timeout, is an error at once too: the request may have reached the model, and a slow model
//! would only be asked again to be slow. All of these have kind [`crate::ErrorKind::Agent`]. The
//! API key goes in the `Authorization` header only; it is never part of a message, a log or
//! `Debug` output. The usual proxy variables (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`) apply.
//!
//! Redirects are never followed, to the same origin or another: a 3xx is an error naming where it
//! points, so that `base_url` can be set to that address deliberately (a redirect to another origin
//! would otherwise carry the conversation there and take that server's body as the model's reply).
//! A reply body is read as bytes (at most ureq's 10 MB) and must be UTF-8: one that is not is an
//! error saying at which byte.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::agent::model::{Model, ModelReply, ModelRequest, ToolCall, Usage};
pub use crate::agent::settings::{ClientSettings, RetryPolicy, DEFAULT_TIMEOUT};
use crate::agent::stop::{self, Stop};
use crate::agent::stream::{self, Event, ReplyBuilder, TextSink};
use crate::agent::{anthropic, provider, responses};
use crate::config::Api;
use crate::error::{Error, ErrorKind, Result};

/// Request fields the client sends itself; `extra_body` entries with these names are skipped.
pub const RESERVED_BODY_KEYS: [&str; 3] = ["model", "messages", "tools"];

/// The most bytes one streamed reply may have.
const STREAM_LIMIT: u64 = 64 * 1024 * 1024;

/// The request body for `request` (see the module docs for its exact shape).
///
/// ```
/// use serde_json::json;
/// use toolhost::agent::{request_body, ClientSettings, Message, ModelRequest};
/// let mut settings = ClientSettings::new("http://127.0.0.1:8080/v1", "m");
/// settings.extra_body.insert("temperature".into(), json!(0.2));
/// settings.extra_body.insert("tools".into(), json!([])); // never replaces the tools
/// let messages = [Message::User("hi".into())];
/// let tools = json!([{"type": "function", "function": {"name": "t", "parameters": {"type": "object"}}}]);
/// let body = request_body(&settings, &ModelRequest { messages: &messages, tools: Some(&tools) });
/// assert_eq!(
///     body.to_string(),
///     r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"t","parameters":{"type":"object"}}}],"temperature":0.2}"#
/// );
/// ```
pub fn request_body(settings: &ClientSettings, request: &ModelRequest<'_>) -> Value {
    match settings.api {
        Api::Chat => chat_body(settings, request),
        Api::Anthropic => anthropic::request_body(settings, request),
        Api::Responses => responses::request_body(settings, request),
    }
}

/// The chat-completions body: `{"model","messages","tools"}`, `"stream": true` and
/// `"stream_options": {"include_usage": true}` when streaming, then `extra_body`.
fn chat_body(settings: &ClientSettings, request: &ModelRequest<'_>) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::String(settings.model.clone()));
    body.insert("messages".into(), request.messages.iter().map(|m| m.to_json()).collect());
    if let Some(tools) = request.tools.filter(|t| t.as_array().is_none_or(|a| !a.is_empty())) {
        body.insert("tools".into(), tools.clone());
    }
    if settings.stream {
        body.insert("stream".into(), Value::Bool(true));
        body.insert("stream_options".into(), serde_json::json!({"include_usage": true}));
    }
    for (key, value) in &settings.extra_body {
        let streamed = settings.stream && (key == "stream" || key == "stream_options");
        if !RESERVED_BODY_KEYS.contains(&key.as_str()) && !streamed {
            body.insert(key.clone(), value.clone());
        }
    }
    Value::Object(body)
}

/// The model's HTTP client, for each API toolhost speaks: OpenAI-compatible chat completions,
/// Anthropic's Messages and OpenAI's Responses ([`ClientSettings::api`]). It also keeps the
/// session's token usage and how many replies were cut at the token limit ([`ChatClient::totals`]).
///
/// ```no_run
/// use toolhost::agent::{ChatClient, ClientSettings, Message, Model, ModelRequest};
/// let settings = ClientSettings::new("http://127.0.0.1:8080/v1", "qwen2.5-coder");
/// let mut client = ChatClient::new(settings);
/// let messages = [Message::User("Say hi.".into())];
/// let reply = client.send(&ModelRequest { messages: &messages, tools: None }).unwrap();
/// println!("{}", reply.text.unwrap_or_default());
/// ```
pub struct ChatClient {
    settings: ClientSettings,
    agent: ureq::Agent,
    stop: Option<Stop>,
    sink: Option<TextSink>,
    totals: Totals,
}

/// What a client's replies added up to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Replies received.
    pub replies: usize,
    /// The usage of those that said it, added up.
    pub usage: Option<Usage>,
    /// Replies with usage.
    pub with_usage: usize,
    /// Replies cut at the token limit (`length`, `max_tokens`, `max_output_tokens`).
    pub cut: usize,
    /// Whether the last reply was cut there.
    pub last_cut: bool,
}

impl Totals {
    /// The one line `toolhost agent` ends with on standard error, e.g. `tokens: input 2200 (cached
    /// 900), output 80 in 2 turns`; `None` when no reply said its usage.
    pub fn summary(&self) -> Option<String> {
        let usage = self.usage?;
        let cached = usage.cached_tokens.map(|c| format!(" (cached {c})")).unwrap_or_default();
        let turns = if self.replies == 1 { "1 turn".to_string() } else { format!("{} turns", self.replies) };
        Some(format!("tokens: input {}{cached}, output {} in {turns}", usage.input_tokens, usage.output_tokens))
    }
}

/// Whether a finish reason says the reply hit the token limit.
pub fn is_cut(finish_reason: Option<&str>) -> bool {
    matches!(finish_reason, Some("length" | "max_tokens" | "max_output_tokens"))
}

impl ChatClient {
    /// A client with these settings.
    pub fn new(settings: ClientSettings) -> Self {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(settings.timeout))
            // Statuses are answers to read (the server's message, Retry-After), not transport errors.
            .http_status_as_error(false)
            .user_agent(concat!("toolhost/", env!("CARGO_PKG_VERSION")))
            // A redirect is an answer to report, never followed: another origin's body would be
            // taken as the model's reply (and the conversation sent there).
            .max_redirects(0)
            .build();
        ChatClient { settings, agent: config.into(), stop: None, sink: None, totals: Totals::default() }
    }

    /// Gives up waiting for the server (and between retries) as soon as `stop` is set; the request
    /// then fails with an `agent_error` saying it was interrupted.
    pub fn stop_on(mut self, stop: Stop) -> Self {
        self.stop = Some(stop);
        self
    }

    /// Shows a streamed reply's text as it arrives by passing each piece to `sink` (the terminal).
    pub fn show_text(mut self, sink: impl FnMut(&str) + Send + 'static) -> Self {
        self.sink = Some(std::sync::Arc::new(std::sync::Mutex::new(sink)));
        self
    }

    /// The settings.
    pub fn settings(&self) -> &ClientSettings {
        &self.settings
    }

    /// What the replies so far added up to.
    pub fn totals(&self) -> Totals {
        self.totals
    }
}

impl Model for ChatClient {
    fn send(&mut self, request: &ModelRequest<'_>) -> Result<ModelReply> {
        let exchange = Exchange {
            agent: self.agent.clone(),
            url: self.settings.endpoint(),
            api: self.settings.api,
            api_key: self.settings.api_key.clone(),
            body: request_body(&self.settings, request).to_string(),
            retry: self.settings.retry,
            timeout: self.settings.timeout,
            stop: self.stop.clone(),
            sink: self.sink.clone(),
        };
        let reply = match self.stop.clone() {
            None => exchange.run(),
            // The blocking request runs on a thread of its own so that a stop need not wait for it.
            Some(stop) => stop::wait_or_stop(&stop, Duration::ZERO, || {}, move || exchange.run())
                .unwrap_or_else(|| Err(Error::new(ErrorKind::Agent, "interrupted while waiting for the model"))),
        }?;
        let totals = &mut self.totals;
        totals.replies += 1;
        if let Some(usage) = reply.usage {
            totals.with_usage += 1;
            totals.usage = Some(totals.usage.map_or(usage, |u| u.plus(usage)));
        }
        totals.last_cut = is_cut(reply.finish_reason.as_deref());
        totals.cut += usize::from(totals.last_cut);
        Ok(reply)
    }

    fn describe(&self) -> Value {
        let mut described = serde_json::json!({"base_url": self.settings.base_url, "model": self.settings.model});
        if self.settings.api != Api::Chat {
            described["api"] = serde_json::to_value(self.settings.api).unwrap_or(Value::Null);
        }
        described
    }

    fn catalogue_format(&self, strict: bool) -> crate::schema::Format {
        match self.settings.preset {
            Some(preset) => preset.schema_format(strict),
            None => provider::openai_format(strict),
        }
    }
}

/// One request with its retries, as owned data so it can run on another thread.
struct Exchange {
    agent: ureq::Agent,
    url: String,
    api: Api,
    api_key: Option<String>,
    body: String,
    retry: RetryPolicy,
    timeout: Duration,
    stop: Option<Stop>,
    sink: Option<TextSink>,
}

/// What the server answered: a status to act on, or a stream already read into a reply.
enum Answered {
    Whole(Answer),
    Streamed(stream::Streamed),
}

/// What the server answered, read whole.
struct Answer {
    status: u16,
    reason: &'static str,
    retry_after: Option<Duration>,
    /// Where a redirect points (`Location`).
    location: Option<String>,
    text: String,
}

impl Exchange {
    fn run(&self) -> Result<ModelReply> {
        let attempts = self.retry.attempts.max(1);
        let mut attempt = 1;
        loop {
            let answer = match self.post()? {
                Answered::Streamed(Ok(reply)) => return Ok(reply),
                // A stream that failed before any of the reply arrived (Anthropic's overloaded
                // error event, a connection dropped at once) is sent again like a 529; once
                // something was shown, it cannot be taken back, and the error ends the request.
                Answered::Streamed(Err((error, nothing_arrived))) => {
                    if !nothing_arrived || attempt >= attempts {
                        return Err(error);
                    }
                    if !stop::pause(self.retry.delay(attempt, None), self.stop.as_ref()) {
                        return Err(Error::new(
                            ErrorKind::Agent,
                            "interrupted while waiting to retry the model request",
                        ));
                    }
                    attempt += 1;
                    continue;
                }
                Answered::Whole(answer) => answer,
            };
            if (200..300).contains(&answer.status) {
                return match self.api {
                    Api::Chat => parse_reply(&answer.text),
                    Api::Anthropic => anthropic::parse_reply(&answer.text),
                    Api::Responses => responses::parse_reply(&answer.text),
                };
            }
            if (300..400).contains(&answer.status) {
                return Err(redirect_error(&self.url, &answer));
            }
            // 529 is Anthropic's "overloaded": a 5xx like the others.
            let retryable = answer.status == 429 || (500..600).contains(&answer.status);
            if !retryable || attempt >= attempts {
                return Err(status_error(&self.url, &answer, attempt));
            }
            if !stop::pause(self.retry.delay(attempt, answer.retry_after), self.stop.as_ref()) {
                return Err(Error::new(ErrorKind::Agent, "interrupted while waiting to retry the model request"));
            }
            attempt += 1;
        }
    }

    fn post(&self) -> Result<Answered> {
        let mut request = self.agent.post(&self.url).content_type("application/json");
        if let Some(key) = &self.api_key {
            request = match self.api {
                Api::Anthropic => request.header("x-api-key", key.as_str()),
                Api::Chat | Api::Responses => request.header("Authorization", format!("Bearer {key}")),
            };
        }
        if self.api == Api::Anthropic {
            request = request.header("anthropic-version", anthropic::ANTHROPIC_VERSION);
        }
        let mut response = request.send(self.body.as_str()).map_err(|e| self.transport_error(&e))?;
        let status = response.status();
        let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::trim);
        let retry_after = header("retry-after-ms")
            .and_then(|v| v.parse::<f64>().ok())
            .map(|ms| ms / 1000.0)
            .or_else(|| header("retry-after").and_then(|v| v.parse::<f64>().ok()))
            .and_then(|s| Duration::try_from_secs_f64(s).ok());
        let location = response.headers().get("location").map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let event_stream = header("content-type").is_some_and(|t| t.starts_with("text/event-stream"));
        if status.is_success() && event_stream {
            let reader = std::io::BufReader::new(response.body_mut().with_config().limit(STREAM_LIMIT).reader());
            let builder = ReplyBuilder::new(self.sink.clone());
            let reply = match self.api {
                Api::Chat => stream::read_stream(reader, builder, &self.url, "[DONE]", chat_event),
                Api::Anthropic => {
                    stream::read_stream(reader, builder, &self.url, anthropic::STREAM_END, anthropic::on_event)
                }
                Api::Responses => {
                    stream::read_stream(reader, builder, &self.url, responses::STREAM_END, responses::on_event)
                }
            };
            if let Some(sink) = &self.sink {
                if let Ok(mut sink) = sink.lock() {
                    // The end of a streamed text: the next line of the terminal is someone else's.
                    sink("");
                }
            }
            return Ok(Answered::Streamed(reply));
        }
        // Read as bytes, not as text: ureq's text reading would quietly replace bytes that are not
        // UTF-8, and a reply the model server garbled must be reported as such.
        let bytes = response.body_mut().read_to_vec().map_err(|e| self.transport_error(&e))?;
        let text = String::from_utf8(bytes).map_err(|e| self.not_utf8(status.as_u16(), &e))?;
        Ok(Answered::Whole(Answer {
            status: status.as_u16(),
            reason: status.canonical_reason().unwrap_or(""),
            retry_after,
            location,
            text,
        }))
    }

    /// The error for a reply whose bytes are not UTF-8 text: where the first bad byte is, and the
    /// text before it.
    fn not_utf8(&self, status: u16, e: &std::string::FromUtf8Error) -> Error {
        let bytes = e.as_bytes();
        let at = e.utf8_error().valid_up_to();
        let bad: Vec<String> = bytes[at..]
            .iter()
            .take(e.utf8_error().error_len().unwrap_or(1).max(1))
            .map(|b| format!("0x{b:02x}"))
            .collect();
        let before = String::from_utf8_lossy(&bytes[at.saturating_sub(80)..at]).into_owned();
        Error::new(
            ErrorKind::Agent,
            format!(
                "the model server at {} answered {status} with a body that is not UTF-8 text: byte {} at offset {at} \
                 of {} bytes is not valid UTF-8 (after {:?}); a chat-completions reply is JSON in UTF-8, so \
                 the server or a proxy between garbled it",
                self.url,
                bad.join(" "),
                bytes.len(),
                before
            ),
        )
    }

    fn transport_error(&self, e: &ureq::Error) -> Error {
        let message = match e {
            ureq::Error::Timeout(_) => format!(
                "the model server at {} did not answer within {} s (provider.timeout_s)",
                self.url,
                self.timeout.as_secs_f64()
            ),
            other => format!("cannot talk to the model server at {}: {other}", self.url),
        };
        Error::new(ErrorKind::Agent, message)
    }
}

/// The error for a status that is not retried (or no longer): the status, the URL and the server's
/// own message.
fn status_error(url: &str, answer: &Answer, attempts: u32) -> Error {
    let tries = if attempts > 1 { format!(" (after {attempts} attempts)") } else { String::new() };
    let reason = if answer.reason.is_empty() { String::new() } else { format!(" {}", answer.reason) };
    Error::new(
        ErrorKind::Agent,
        format!("the model server answered {}{reason}{tries} ({url}): {}", answer.status, server_message(&answer.text)),
    )
}

/// The error for a redirect, which is never followed: where it points, and whether that is
/// another origin (scheme, host and port) than the one asked.
fn redirect_error(url: &str, answer: &Answer) -> Error {
    let reason = if answer.reason.is_empty() { String::new() } else { format!(" {}", answer.reason) };
    let target = match &answer.location {
        None => "without saying where (no Location header)".to_string(),
        Some(location) => {
            let absolute = ureq::http::Uri::try_from(location.as_str()).ok().filter(|u| u.scheme().is_some());
            match absolute {
                Some(uri) if origin_of(&uri) != ureq::http::Uri::try_from(url).ok().as_ref().and_then(origin_of) => {
                    format!("to {location}, another origin")
                }
                _ => format!("to {location}, on the same origin"),
            }
        }
    };
    Error::new(
        ErrorKind::Agent,
        format!(
            "the model server answered {}{reason} ({url}): it redirects {target}; toolhost does not follow \
             redirects: set base_url (provider.base_url or --base-url) to the address the model is served at",
            answer.status
        ),
    )
}

/// Scheme, host and port of an absolute URI, the port filled in for http and https.
fn origin_of(uri: &ureq::http::Uri) -> Option<(String, String, u16)> {
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let host = uri.host()?.to_ascii_lowercase();
    let port = uri.port_u16().unwrap_or(if scheme == "https" { 443 } else { 80 });
    Some((scheme, host, port))
}

/// Longest excerpt of a server's text an error quotes.
const EXCERPT_CHARS: usize = 500;

/// The message in an error body: OpenAI's and Anthropic's `{"error": {"message": ...}}` (in an
/// array, as Gemini may send it), the `{"error": "..."}` or `{"message": ...}` some servers send, or
/// else the text itself, cut short.
fn server_message(text: &str) -> String {
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        // Gemini's compatibility layer may wrap its error object in an array.
        let value = match value {
            Value::Array(mut items) if !items.is_empty() => items.swap_remove(0),
            other => other,
        };
        let found = value
            .pointer("/error/message")
            .or_else(|| value.get("error").filter(|e| e.is_string()))
            .or_else(|| value.get("message"))
            .and_then(Value::as_str);
        if let Some(message) = found {
            return message.to_string();
        }
    }
    let text = text.trim();
    if text.is_empty() {
        return "(no message)".into();
    }
    excerpt(text)
}

fn excerpt(text: &str) -> String {
    let mut out: String = text.chars().take(EXCERPT_CHARS).collect();
    if out.len() < text.len() {
        out.push_str(" ...");
    }
    out
}

/// Reads a chat-completions reply: the first choice's message, its text and its tool calls. Shapes
/// servers send besides OpenAI's own are read too: `content` as a list of text parts, `arguments`
/// as a JSON object instead of a string (written back as JSON text), a call without an id (the
/// session gives it one).
///
/// # Errors
/// Kind `agent_error` when the text is not JSON or holds no message (a 200 that carries an
/// `error` object is reported with its message).
pub fn parse_reply(reply: &str) -> Result<ModelReply> {
    let unreadable = |what: &str| {
        Error::new(ErrorKind::Agent, format!("the model server's reply {what}; it reads: {}", excerpt(reply.trim())))
    };
    let value: Value = serde_json::from_str(reply).map_err(|_| unreadable("is not JSON"))?;
    let choice = value.pointer("/choices/0");
    let Some(message) = choice.and_then(|c| c.get("message")).filter(|m| m.is_object()) else {
        if value.get("error").is_some() {
            return Err(Error::new(
                ErrorKind::Agent,
                format!("the model server answered with an error: {}", server_message(reply)),
            ));
        }
        return Err(unreadable("has no choices[0].message"));
    };
    let text = match message.get("content") {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Array(parts)) => {
            Some(parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join(""))
        }
        _ => None,
    };
    let mut tool_calls: Vec<ToolCall> = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| calls.iter().map(tool_call).collect())
        .unwrap_or_default();
    // Arguments sent as a JSON object go on as the very text the model wrote, so that the call
    // path sees a key it gives twice (a parsed object keeps only the last value).
    let objects: Vec<bool> = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| calls.iter().map(|c| c.pointer("/function/arguments").is_some_and(Value::is_object)).collect())
        .unwrap_or_default();
    if objects.contains(&true) {
        let raw = raw_arguments(reply);
        for (i, call) in tool_calls.iter_mut().enumerate() {
            if let (Some(true), Some(Some(raw))) = (objects.get(i), raw.get(i)) {
                call.arguments = raw.clone();
            }
        }
    }
    let finish_reason = choice.and_then(|c| c.get("finish_reason")).and_then(Value::as_str).map(String::from);
    let usage = value.get("usage").and_then(chat_usage);
    Ok(ModelReply { text, tool_calls, finish_reason, usage })
}

/// A chat-completions `usage` object: `prompt_tokens` (cached included), `completion_tokens`,
/// `prompt_tokens_details.cached_tokens`.
fn chat_usage(usage: &Value) -> Option<Usage> {
    Some(Usage {
        input_tokens: usage.get("prompt_tokens")?.as_u64()?,
        output_tokens: usage.get("completion_tokens").and_then(Value::as_u64).unwrap_or(0),
        cached_tokens: usage.pointer("/prompt_tokens_details/cached_tokens").and_then(Value::as_u64),
    })
}

/// One chat-completions chunk into `builder`; `Ok(true)` at `data: [DONE]`. A stream that ends
/// after a chunk with a `finish_reason` but without `[DONE]` is whole too. Tool-call fragments are
/// keyed by their `index`; a fragment with another `id` than its index's call starts a new call,
/// and one without an `index` belongs to the call with its `id`, else to the last one (servers
/// differ here).
fn chat_event(event: &Event, builder: &mut ReplyBuilder) -> Result<bool> {
    if event.data.trim() == "[DONE]" {
        return Ok(true);
    }
    let chunk: Value = serde_json::from_str(&event.data).map_err(|_| {
        Error::new(
            ErrorKind::Agent,
            format!("the model server's stream has an event that is not JSON: {}", excerpt(&event.data)),
        )
    })?;
    if chunk.get("error").is_some() {
        return Err(Error::new(
            ErrorKind::Agent,
            format!("the model server's stream carried an error: {}", server_message(&event.data)),
        ));
    }
    if let Some(usage) = chunk.get("usage").and_then(chat_usage) {
        builder.usage = Some(usage);
    }
    let Some(choice) = chunk.pointer("/choices/0") else { return Ok(false) };
    let delta = &choice["delta"];
    match delta.get("content") {
        Some(Value::String(text)) => builder.text(text),
        Some(Value::Array(parts)) => {
            for part in parts {
                builder.text(part.get("text").and_then(Value::as_str).unwrap_or_default());
            }
        }
        _ => {}
    }
    for call in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
        let id = call.get("id").and_then(Value::as_str).filter(|i| !i.is_empty());
        let name = call.pointer("/function/name").and_then(Value::as_str);
        let known: Vec<(String, String)> =
            builder.call_keys().into_iter().map(|(k, i)| (k.to_string(), i.to_string())).collect();
        let key = match call.get("index").and_then(Value::as_u64) {
            Some(index) => index.to_string(),
            None => id
                .and_then(|id| known.iter().find(|(_, i)| i == id))
                .or(known.last())
                .map_or_else(|| "0".to_string(), |(k, _)| k.clone()),
        };
        let current = known.iter().rev().find(|(k, _)| *k == key).map(|(_, i)| i.as_str());
        let starts = match (current, id) {
            (None, _) => true,
            (Some(current), Some(id)) => !current.is_empty() && current != id,
            (Some(_), None) => false,
        };
        if starts {
            builder.start_call(&key, id.unwrap_or_default(), name.unwrap_or_default());
        } else {
            builder.name_call(&key, id, name);
        }
        match call.pointer("/function/arguments") {
            Some(Value::String(fragment)) => builder.call_arguments(&key, fragment),
            None | Some(Value::Null) => {}
            Some(whole) => builder.call_arguments(&key, &whole.to_string()),
        }
    }
    if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
        builder.finish_reason = Some(reason.to_string());
        builder.ended = true;
    }
    Ok(false)
}

/// The text of each tool call's `arguments` in the first choice's message, as the reply holds it,
/// found the way [`parse_reply`] finds them (where a key repeats above them, the last is taken, as a
/// parsed value takes it).
fn raw_arguments(reply: &str) -> Vec<Option<String>> {
    use serde_json::value::RawValue;
    type Object<'a> = std::collections::BTreeMap<String, &'a RawValue>;
    fn object(raw: &RawValue) -> Option<Object<'_>> {
        serde_json::from_str(raw.get()).ok()
    }
    fn list(raw: &RawValue) -> Option<Vec<&RawValue>> {
        serde_json::from_str(raw.get()).ok()
    }
    let top: Option<Object<'_>> = serde_json::from_str(reply).ok();
    let calls = top
        .as_ref()
        .and_then(|top| list(top.get("choices").copied()?))
        .and_then(|choices| object(choices.first().copied()?))
        .and_then(|choice| object(choice.get("message").copied()?))
        .and_then(|message| list(message.get("tool_calls").copied()?))
        .unwrap_or_default();
    calls
        .into_iter()
        .map(|call| {
            let function = object(object(call)?.get("function").copied()?)?;
            function.get("arguments").map(|raw| raw.get().to_string())
        })
        .collect()
}

fn tool_call(call: &Value) -> ToolCall {
    let function = call.get("function");
    let name = function.and_then(|f| f.get("name")).and_then(Value::as_str).unwrap_or_default();
    let arguments = match function.and_then(|f| f.get("arguments")) {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        Some(other) => other.to_string(),
    };
    let id = call.get("id").and_then(Value::as_str).unwrap_or_default();
    ToolCall { id: id.to_string(), name: name.to_string(), arguments }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_reply_with_text_and_calls_is_read() {
        let reply = parse_reply(
            &json!({"choices": [{"message": {"role": "assistant", "content": "ok", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "fs-read", "arguments": "{\"path\":\"a\"}"}},
                {"type": "function", "function": {"name": "fs-list", "arguments": {"depth": 1}}},
            ]}, "finish_reason": "tool_calls"}]})
            .to_string(),
        )
        .unwrap();
        assert_eq!(reply.text.as_deref(), Some("ok"));
        assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(
            reply.tool_calls[0],
            ToolCall { id: "c1".into(), name: "fs-read".into(), arguments: r#"{"path":"a"}"#.into() }
        );
        assert_eq!(reply.tool_calls[1].id, "");
        assert_eq!(reply.tool_calls[1].arguments, r#"{"depth":1}"#);
    }

    #[test]
    fn content_parts_and_null_content_are_read() {
        let parts = json!({"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}}]});
        assert_eq!(parse_reply(&parts.to_string()).unwrap().text.as_deref(), Some("ab"));
        let none = json!({"choices": [{"message": {"content": null}}]});
        assert_eq!(parse_reply(&none.to_string()).unwrap().text, None);
    }

    #[test]
    fn unreadable_replies_are_agent_errors_that_quote_the_server() {
        let e = parse_reply("<html>bad gateway</html>").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Agent);
        assert!(e.message().contains("is not JSON") && e.message().contains("bad gateway"), "{e}");
        let e = parse_reply(r#"{"error": {"message": "model not loaded"}}"#).unwrap_err();
        assert!(e.message().contains("model not loaded"), "{e}");
        let e = parse_reply(r#"{"choices": []}"#).unwrap_err();
        assert!(e.message().contains("no choices[0].message"), "{e}");
    }

    #[test]
    fn server_messages_come_from_the_usual_places() {
        assert_eq!(server_message(r#"{"error": {"message": "bad tools"}}"#), "bad tools");
        assert_eq!(server_message(r#"{"error": "overloaded"}"#), "overloaded");
        assert_eq!(server_message(r#"{"message": "no"}"#), "no");
        assert_eq!(
            server_message(r#"[{"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}]"#),
            "quota"
        );
        assert_eq!(server_message("  plain text \n"), "plain text");
        assert_eq!(server_message(""), "(no message)");
    }

    #[test]
    fn the_key_never_shows_in_debug_output() {
        let mut settings = ClientSettings::new("http://x/v1", "m");
        settings.api_key = Some("sk-very-secret".into());
        let shown = format!("{settings:?}");
        assert!(!shown.contains("sk-very-secret") && shown.contains("<set>"), "{shown}");
    }

    /// Runs chat-completions chunks (their `delta`s and finish reasons) through the stream reader.
    fn streamed(chunks: &[Value]) -> Result<ModelReply> {
        let mut text = String::new();
        for chunk in chunks {
            text.push_str(&format!("data: {chunk}\n\n"));
        }
        stream::read_stream(text.as_bytes(), ReplyBuilder::new(None), "http://x/v1", "[DONE]", chat_event)
            .map_err(|(e, _)| e)
    }

    #[test]
    fn streamed_tool_calls_survive_what_compatible_servers_send() {
        let delta = |d: Value| json!({"choices": [{"index": 0, "delta": d, "finish_reason": null}]});
        let reply = streamed(&[
            delta(json!({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "fs-read", "arguments": "{\"pa"}}]})),
            // No index: the call with this id.
            delta(json!({"tool_calls": [{"id": "a", "function": {"arguments": "th\":1}"}}]})),
            // The same index with a new id: a second call, not more of the first.
            delta(json!({"tool_calls": [{"index": 0, "id": "b", "function": {"name": "fs-list", "arguments": {"depth": 1}}}]})),
            // A tool-call reply that says "stop", ended without [DONE].
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        ])
        .unwrap();
        let calls: Vec<(&str, &str, &str)> =
            reply.tool_calls.iter().map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str())).collect();
        assert_eq!(calls, [("a", "fs-read", "{\"path\":1}"), ("b", "fs-list", "{\"depth\":1}")]);
        // Neither [DONE] nor a finish reason: cut.
        let e = streamed(&[delta(json!({"content": "Hel"}))]).unwrap_err();
        assert!(e.message().contains("after 3 characters of text and no tool call"), "{e}");
        // An error chunk.
        let e = streamed(&[json!({"error": {"message": "overloaded"}})]).unwrap_err();
        assert!(e.message().contains("overloaded"), "{e}");
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let policy =
            RetryPolicy { attempts: 9, base_delay: Duration::from_millis(10), max_delay: Duration::from_millis(50) };
        let waits: Vec<u128> = (1..=4).map(|a| policy.delay(a, None).as_millis()).collect();
        assert_eq!(waits, [10, 20, 40, 50]);
    }
}
