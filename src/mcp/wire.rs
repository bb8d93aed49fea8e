//! JSON-RPC as it crosses `toolhost mcp`'s standard input: lines under a size limit, the envelope
//! check that finds every malformed message an answer, request ids, and a `tools/call`'s
//! `arguments` kept as the very text the client sent (so the call path judges them, repeated keys
//! and nesting depth included, as it judges `toolhost call`'s).
//!
//! The SDK's own stdio reader drops unparsable lines and over-long ones without a word, answers a
//! message of the wrong shape with an error that has no id, and sends `tools/call`s whose
//! arguments are not an object to "method not found": a client then waits forever, or cannot tell
//! which request failed. This module answers each of them itself, by id wherever the id can be read.

use std::io;
use std::sync::Arc;

use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, ErrorCode, ErrorData, GetExtensions, JsonRpcMessage, RequestId,
    ServerJsonRpcMessage,
};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use crate::tools::file::MAX_FILE_BYTES;

/// The longest message read: a `fs-write` of the largest file the tools accept survives ordinary
/// JSON escaping, with room for the envelope.
pub const MAX_MESSAGE_BYTES: usize = 2 * MAX_FILE_BYTES + (1 << 20);

/// A `tools/call`'s `arguments` as the client wrote them (empty when it sent none), carried to the
/// handler in the request's extensions.
#[derive(Debug, Clone)]
pub struct RawArguments(pub Arc<str>);

/// One line of input.
#[derive(Debug)]
pub enum Line {
    /// A complete line within the limit, without its newline.
    Message(Vec<u8>),
    /// A line over the limit: discarded, with its length and the top-level `id` if one was found.
    TooLong {
        /// The line's length in bytes.
        bytes: usize,
        /// Its request id, read while it was skipped.
        id: Option<RequestId>,
    },
    /// The end of input.
    End,
}

/// Reads newline-delimited messages of at most `limit` bytes; a longer one is read through to its
/// end and dropped, nothing past the limit kept.
pub struct LineReader<R> {
    inner: R,
    limit: usize,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    /// Lines of `inner`, at most `limit` bytes each.
    pub fn new(inner: R, limit: usize) -> Self {
        LineReader { inner, limit }
    }

    /// The next line.
    ///
    /// # Errors
    /// When reading fails.
    pub async fn next(&mut self) -> io::Result<Line> {
        let mut line = Vec::new();
        let mut skipped: Option<HeadScan> = None;
        let mut total = 0usize;
        loop {
            let buffer = self.inner.fill_buf().await?;
            if buffer.is_empty() {
                if total == 0 {
                    return Ok(Line::End);
                }
                // A last line without its newline is still a message.
                return Ok(finish(line, skipped, total));
            }
            let (chunk, used, ended) = match memchr::memchr(b'\n', buffer) {
                Some(at) => (&buffer[..at], at + 1, true),
                None => (buffer, buffer.len(), false),
            };
            total += chunk.len();
            match skipped.as_mut() {
                Some(scan) => scan.feed(chunk),
                None if line.len() + chunk.len() > self.limit => {
                    let mut scan = HeadScan::default();
                    scan.feed(&line);
                    scan.feed(chunk);
                    line = Vec::new();
                    skipped = Some(scan);
                }
                None => line.extend_from_slice(chunk),
            }
            self.inner.consume(used);
            if ended {
                return Ok(finish(line, skipped, total));
            }
        }
    }
}

fn finish(line: Vec<u8>, skipped: Option<HeadScan>, total: usize) -> Line {
    match skipped {
        Some(scan) => Line::TooLong { bytes: total, id: scan.id() },
        None => Line::Message(line),
    }
}

/// Follows a JSON object's top level byte by byte, only far enough to find the value of its `"id"`
/// member, which may come after megabytes of `params` (the TypeScript SDK writes it last).
#[derive(Default)]
struct HeadScan {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// The last string seen at the top level (a key, once a colon follows), cut short.
    last_string: Vec<u8>,
    capturing: bool,
    found: bool,
    id: Vec<u8>,
}

/// The longest id text kept.
const MAX_ID_BYTES: usize = 256;

impl HeadScan {
    fn feed(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if self.capturing && self.id.len() <= MAX_ID_BYTES {
                self.id.push(byte);
            }
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if byte == b'\\' {
                    self.escaped = true;
                } else if byte == b'"' {
                    self.in_string = false;
                } else if self.depth == 1 && !self.capturing && self.last_string.len() < 8 {
                    self.last_string.push(byte);
                }
                continue;
            }
            match byte {
                b'"' => {
                    self.in_string = true;
                    if self.depth == 1 && !self.capturing {
                        self.last_string.clear();
                    }
                }
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    if self.depth == 1 && self.capturing {
                        self.end_capture();
                    }
                    self.depth = self.depth.saturating_sub(1);
                }
                b':' if self.depth == 1 && !self.capturing && !self.found && self.last_string == b"id" => {
                    self.capturing = true;
                    self.id.clear();
                }
                b',' if self.depth == 1 && self.capturing => self.end_capture(),
                _ => {}
            }
        }
    }

    fn end_capture(&mut self) {
        self.capturing = false;
        self.found = true;
        // The byte that ended it was pushed too.
        self.id.pop();
    }

    fn id(&self) -> Option<RequestId> {
        if !self.found || self.id.len() > MAX_ID_BYTES {
            return None;
        }
        request_id(&serde_json::from_slice::<Value>(&self.id).ok()?)
    }
}

/// A JSON-RPC id as MCP allows it: a string or an integer, never null.
fn request_id(value: &Value) -> Option<RequestId> {
    match value {
        Value::String(s) => Some(RequestId::String(s.as_str().into())),
        Value::Number(n) => n.as_i64().map(RequestId::Number),
        _ => None,
    }
}

/// What one line of input is.
#[derive(Debug)]
pub enum Inbound {
    /// A blank line, or something that gets no answer (a malformed notification or response).
    Nothing,
    /// A message refused with this error, sent back at once.
    Refused(ServerJsonRpcMessage),
    /// A request for the SDK to answer; a `tools/call` carries [`RawArguments`] in its extensions.
    Request {
        /// Its id.
        id: RequestId,
        /// The request.
        message: ClientJsonRpcMessage,
        /// Whether it is a `tools/call` (which run one at a time, in order).
        is_call: bool,
    },
    /// `notifications/cancelled` for this request id.
    Cancel(RequestId),
    /// A notification or a response, for the SDK.
    Other(ClientJsonRpcMessage),
}

/// A JSON-RPC error message.
pub fn error(id: Option<RequestId>, code: ErrorCode, message: impl Into<String>) -> ServerJsonRpcMessage {
    JsonRpcMessage::error(ErrorData::new(code, message.into(), None), id)
}

/// The members of a message's envelope, each kept as raw text (reading a raw value has no nesting
/// limit, so the id is known however deep `params` goes). A member given as `null` is present.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<String>,
    #[serde(borrow, default, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

/// A member that is there, `null` included (an `Option` alone would read `null` as absent).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// A `tools/call`'s params.
#[derive(Deserialize)]
struct CallParams<'a> {
    name: String,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
    #[serde(rename = "_meta", default)]
    meta: Option<Value>,
}

/// The methods the SDK knows: one it hands to its catch-all had params that do not fit.
const KNOWN_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
];

/// Judges one line: what it is, or the error that answers it.
pub fn classify(line: &[u8]) -> Inbound {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let Ok(text) = std::str::from_utf8(line) else {
        return Inbound::Refused(error(None, ErrorCode::PARSE_ERROR, "Parse error: the message is not UTF-8"));
    };
    let text = text.trim();
    if text.is_empty() {
        return Inbound::Nothing;
    }
    if text.starts_with('[') {
        return Inbound::Refused(error(
            None,
            ErrorCode::INVALID_REQUEST,
            "Invalid request: batches are not part of MCP (since 2025-06-18); send one message per line",
        ));
    }
    let envelope: Envelope = match serde_json::from_str(text) {
        Ok(envelope) => envelope,
        Err(e) if e.is_syntax() || e.is_eof() => {
            return Inbound::Refused(error(None, ErrorCode::PARSE_ERROR, format!("Parse error: {e}")));
        }
        Err(e) => {
            let id = serde_json::from_str::<Value>(text).ok().and_then(|v| request_id(&v["id"]));
            return Inbound::Refused(error(id, ErrorCode::INVALID_REQUEST, format!("Invalid request: {e}")));
        }
    };
    let id = match envelope.id.map(|raw| serde_json::from_str::<Value>(raw.get())) {
        None => None,
        Some(Ok(value)) => match request_id(&value) {
            Some(id) => Some(id),
            None => {
                return Inbound::Refused(error(
                    None,
                    ErrorCode::INVALID_REQUEST,
                    format!("Invalid request: the id must be a string or an integer, not {value}"),
                ));
            }
        },
        Some(Err(e)) => {
            return Inbound::Refused(error(None, ErrorCode::INVALID_REQUEST, format!("Invalid request: {e}")))
        }
    };
    if envelope.jsonrpc.map(RawValue::get) != Some("\"2.0\"") {
        let message = "Invalid request: \"jsonrpc\" must be \"2.0\"";
        return match (&envelope.method, id) {
            (Some(_), id @ Some(_)) => Inbound::Refused(error(id, ErrorCode::INVALID_REQUEST, message)),
            // A notification or a response gets no answer.
            _ => Inbound::Nothing,
        };
    }
    let (Some(method), Some(id)) = (envelope.method.as_deref(), id.clone()) else {
        return match (&envelope.method, envelope.result.or(envelope.error)) {
            (Some(method), _) if method == "notifications/cancelled" => cancelled(envelope.params),
            // Unreadable notifications and responses are dropped, as the spec allows: they get no reply.
            _ => serde_json::from_str(text).map(Inbound::Other).unwrap_or(Inbound::Nothing),
        };
    };
    if method == "tools/call" {
        return tool_call(id, envelope.params);
    }
    match serde_json::from_str::<ClientJsonRpcMessage>(text) {
        Ok(JsonRpcMessage::Request(request)) if matches!(&request.request, ClientRequest::CustomRequest(custom) if KNOWN_METHODS.contains(&custom.method.as_str())) => {
            Inbound::Refused(error(Some(id), ErrorCode::INVALID_PARAMS, format!("Invalid params for {method}")))
        }
        Ok(message @ JsonRpcMessage::Request(_)) => Inbound::Request { id, message, is_call: false },
        Ok(_) => Inbound::Refused(error(Some(id), ErrorCode::INVALID_REQUEST, "Invalid request")),
        Err(e) => {
            Inbound::Refused(error(Some(id), ErrorCode::INVALID_PARAMS, format!("Invalid params for {method}: {e}")))
        }
    }
}

/// `notifications/cancelled`: the request it names, or nothing for a malformed one.
fn cancelled(params: Option<&RawValue>) -> Inbound {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Params {
        request_id: Value,
    }
    params
        .and_then(|raw| serde_json::from_str::<Params>(raw.get()).ok())
        .and_then(|p| request_id(&p.request_id))
        .map_or(Inbound::Nothing, Inbound::Cancel)
}

/// A `tools/call`: the SDK gets its name and `_meta`; the arguments go beside it as text.
fn tool_call(id: RequestId, params: Option<&RawValue>) -> Inbound {
    let invalid = |why: String| {
        Inbound::Refused(error(
            Some(id.clone()),
            ErrorCode::INVALID_PARAMS,
            format!("Invalid params for tools/call: {why}; send {{\"name\": TOOL, \"arguments\": {{...}}}}"),
        ))
    };
    let Some(params) = params else { return invalid("no params".into()) };
    let params: CallParams = match serde_json::from_str(params.get()) {
        Ok(params) => params,
        Err(e) => return invalid(e.to_string()),
    };
    let mut call = json!({"name": params.name});
    if let Some(meta) = params.meta {
        call["_meta"] = meta;
    }
    let request = json!({"jsonrpc": "2.0", "id": id.clone().into_json_value(), "method": "tools/call", "params": call});
    let mut message = match serde_json::from_value::<ClientJsonRpcMessage>(request) {
        Ok(message) => message,
        Err(e) => return invalid(e.to_string()),
    };
    let arguments = params.arguments.map(RawValue::get).unwrap_or_default();
    if let JsonRpcMessage::Request(request) = &mut message {
        request.request.extensions_mut().insert(RawArguments(arguments.into()));
    }
    Inbound::Request { id, message, is_call: true }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused_code(line: &str) -> (Option<Value>, i32) {
        match classify(line.as_bytes()) {
            Inbound::Refused(JsonRpcMessage::Error(e)) => (e.id.map(|id| id.into_json_value()), e.error.code.0),
            other => panic!("{line}: not refused: {other:?}"),
        }
    }

    #[test]
    fn malformed_messages_are_refused_with_their_id_when_it_can_be_read() {
        assert_eq!(refused_code(r#"{"jsonrpc":"2.0","id":1,"method":"ping""#), (None, -32700));
        assert_eq!(refused_code(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#), (None, -32600));
        assert_eq!(refused_code(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#), (None, -32600));
        assert_eq!(refused_code(r#"{"jsonrpc":"1.0","id":4,"method":"ping"}"#), (Some(json!(4)), -32600));
        assert_eq!(
            refused_code(r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":7}"#),
            (Some(json!("a")), -32602)
        );
        assert_eq!(refused_code(r#"{"jsonrpc":"2.0","id":5,"id":6,"method":"ping"}"#), (Some(json!(6)), -32600));
        assert_eq!(
            refused_code(r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":"x"}"#),
            (Some(json!(7)), -32602)
        );
    }

    #[test]
    fn a_calls_arguments_pass_as_text_however_deep_or_repeated() {
        let deep = format!(r#"{{"a":{}{}}}"#, "[".repeat(500), "]".repeat(500));
        for arguments in [r#""text""#, r#"{"p":1,"p":2}"#, deep.as_str()] {
            let line = format!(
                r#"{{"params":{{"name":"t","arguments":{arguments}}},"jsonrpc":"2.0","id":3,"method":"tools/call"}}"#
            );
            let Inbound::Request { id, message: JsonRpcMessage::Request(request), is_call: true } =
                classify(line.as_bytes())
            else {
                panic!("{line}: not a call")
            };
            assert_eq!(id, RequestId::Number(3));
            assert_eq!(&*request.request.extensions().get::<RawArguments>().unwrap().0, arguments);
        }
    }

    #[test]
    fn an_id_after_the_params_is_found_in_a_skipped_line() {
        let mut scan = HeadScan::default();
        scan.feed(br#"{"method":"tools/call","params":{"id":"inner","s":"a\"id\":9,"},"#);
        scan.feed(br#""jsonrpc":"2.0","id" : "outer"}"#);
        assert_eq!(scan.id(), Some(RequestId::String("outer".into())));
        let mut scan = HeadScan::default();
        scan.feed(br#"{"id":12,"params":{}}"#);
        assert_eq!(scan.id(), Some(RequestId::Number(12)));
    }
}
