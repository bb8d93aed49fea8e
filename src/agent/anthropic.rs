//! Anthropic's Messages API (`POST {base_url}/messages`, `anthropic-version: 2023-06-01`): the
//! conversation as its request body, and its replies, whole or streamed, read into a
//! [`ModelReply`].
//!
//! # The request
//!
//! `{"model", "max_tokens", "system", "messages", "tools", "stream"}`, then `extra_body`'s fields
//! (never one of those). The system prompt is one text block marked `cache_control`, and so is the
//! last tool: the API caches the prefix up to a mark (tools, then system), so later turns read the
//! catalogue and the prompt from the cache. Turns alternate: an assistant turn is its text and one
//! `tool_use` block per call (`input` the arguments as a JSON object; arguments that are not an
//! object go as `{}`, and the call's result says why it did not run), and the results of one turn
//! go back together in the next user message, one `tool_result` block each, in the calls' order,
//! `is_error` on errors; text for the model after them (P-format results) joins that message.
//!
//! # The reply
//!
//! Text blocks are the text, `tool_use` blocks the calls, `stop_reason` the finish reason. A reply
//! cut at `max_tokens` whose last block is a `tool_use` drops that call: its input may be cut too.
//! Usage: `input_tokens` counts only what was not cached, so the tokens read from and written to
//! the cache are added to it; `cached_tokens` is `cache_read_input_tokens`. Thinking blocks are not
//! kept (extended thinking with tool use would need them sent back).

use serde_json::{json, Map, Value};

use crate::agent::model::{Message, ModelReply, ModelRequest, Usage};
use crate::agent::settings::ClientSettings;
use crate::agent::stream::{unreadable, Event, ReplyBuilder};
use crate::error::{Error, ErrorKind, Result};

/// The API version sent in `anthropic-version`: the one every Anthropic-compatible server knows.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// `max_tokens` when the config does not say: the API requires one.
pub const DEFAULT_MAX_TOKENS: u64 = 8192;

/// Request fields the client sends itself.
const RESERVED: [&str; 6] = ["model", "max_tokens", "system", "messages", "tools", "stream"];

/// The request body (see the module docs).
pub fn request_body(settings: &ClientSettings, request: &ModelRequest<'_>) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(settings.model));
    body.insert("max_tokens".into(), json!(settings.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)));
    let system: Vec<&str> = request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::System(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    if !system.is_empty() {
        body.insert(
            "system".into(),
            json!([{"type": "text", "text": system.join("\n\n"), "cache_control": {"type": "ephemeral"}}]),
        );
    }
    body.insert("messages".into(), Value::Array(messages(request.messages)));
    if let Some(tools) = request.tools.and_then(Value::as_array).filter(|t| !t.is_empty()) {
        let mut tools: Vec<Value> = tools.iter().map(tool).collect();
        if let Some(Value::Object(last)) = tools.last_mut() {
            last.insert("cache_control".into(), json!({"type": "ephemeral"}));
        }
        body.insert("tools".into(), Value::Array(tools));
    }
    if settings.stream {
        body.insert("stream".into(), json!(true));
    }
    for (key, value) in &settings.extra_body {
        if !RESERVED.contains(&key.as_str()) {
            body.insert(key.clone(), value.clone());
        }
    }
    Value::Object(body)
}

/// A tool of the OpenAI-shaped catalogue as an Anthropic custom tool.
fn tool(openai: &Value) -> Value {
    let function = openai.get("function").unwrap_or(openai);
    let mut out = Map::new();
    out.insert("name".into(), function.get("name").cloned().unwrap_or_else(|| json!("")));
    if let Some(description) = function.get("description").filter(|d| d.is_string()) {
        out.insert("description".into(), description.clone());
    }
    let schema = function.get("parameters").cloned().unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    out.insert("input_schema".into(), schema);
    Value::Object(out)
}

/// Whether a result's text is an error: the call path writes errors as `error (KIND): message`
/// (`CallRecord::model_text`), with KIND a lowercase name.
fn is_error(text: &str) -> bool {
    text.strip_prefix("error (")
        .and_then(|rest| rest.split_once("): "))
        .is_some_and(|(kind, _)| !kind.is_empty() && kind.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
}

/// The conversation (without the system prompt) as alternating user and assistant messages.
fn messages(conversation: &[Message]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    // Adds blocks to the last message when it is the same role, else starts one.
    fn push(out: &mut Vec<Value>, role: &str, blocks: Vec<Value>) {
        if blocks.is_empty() {
            return;
        }
        if let Some(last) = out.last_mut().filter(|m| m["role"] == role) {
            if let Some(content) = last.get_mut("content").and_then(Value::as_array_mut) {
                content.extend(blocks);
                return;
            }
        }
        out.push(json!({"role": role, "content": blocks}));
    }
    for message in conversation {
        match message {
            Message::System(_) => {}
            Message::User(text) => push(&mut out, "user", vec![json!({"type": "text", "text": text})]),
            Message::Assistant { content, tool_calls } => {
                let mut blocks = Vec::new();
                if let Some(text) = content.as_deref().filter(|t| !t.is_empty()) {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for call in tool_calls {
                    let input = serde_json::from_str::<Value>(&call.arguments)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!({}));
                    blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
                }
                push(&mut out, "assistant", blocks);
            }
            Message::Tool { tool_call_id, content } => {
                let mut block = json!({"type": "tool_result", "tool_use_id": tool_call_id, "content": content});
                if is_error(content) {
                    block["is_error"] = json!(true);
                }
                push(&mut out, "user", vec![block]);
            }
        }
    }
    // A user message of one text block reads best as plain text.
    for message in &mut out {
        let single = message["content"]
            .as_array()
            .filter(|c| c.len() == 1 && c[0]["type"] == "text")
            .map(|c| c[0]["text"].clone());
        if let Some(text) = single {
            message["content"] = text;
        }
    }
    out
}

/// Reads a whole (non-streamed) reply.
///
/// # Errors
/// Kind `agent_error` when it is not JSON, is an error object, or holds no `content`.
pub fn parse_reply(reply: &str) -> Result<ModelReply> {
    let value: Value = serde_json::from_str(reply).map_err(|_| unreadable(reply, "is not JSON"))?;
    if value.get("type").and_then(Value::as_str) == Some("error") {
        return Err(server_error(&value));
    }
    let blocks = value.get("content").and_then(Value::as_array).ok_or_else(|| unreadable(reply, "has no content"))?;
    let mut builder = ReplyBuilder::new(None);
    for (i, block) in blocks.iter().enumerate() {
        let key = i.to_string();
        match block.get("type").and_then(Value::as_str) {
            Some("text") => builder.text(block.get("text").and_then(Value::as_str).unwrap_or_default()),
            Some("tool_use") => {
                builder.start_call(&key, str_at(block, "id"), str_at(block, "name"));
                let input = block.get("input").map_or_else(|| "{}".to_string(), Value::to_string);
                builder.call_done(&key, Some(&input));
            }
            _ => {}
        }
    }
    stopped(&mut builder, value.get("stop_reason").and_then(Value::as_str));
    builder.usage = value.get("usage").and_then(usage);
    Ok(builder.finish())
}

/// Records why the reply stopped; one cut at `max_tokens` does not run a last call whose input may
/// be cut too.
fn stopped(builder: &mut ReplyBuilder, reason: Option<&str>) {
    if reason == Some("max_tokens") && builder.last_is_call {
        builder.drop_last_call();
    }
    if let Some(reason) = reason {
        builder.finish_reason = Some(reason.to_string());
    }
}

fn str_at<'v>(value: &'v Value, key: &str) -> &'v str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The normalised usage of a `usage` object.
fn usage(value: &Value) -> Option<Usage> {
    let n = |key: &str| value.get(key).and_then(Value::as_u64);
    let input = n("input_tokens")?;
    let (read, written) = (n("cache_read_input_tokens"), n("cache_creation_input_tokens"));
    Some(Usage {
        input_tokens: input + read.unwrap_or(0) + written.unwrap_or(0),
        output_tokens: n("output_tokens").unwrap_or(0),
        cached_tokens: read,
    })
}

fn server_error(value: &Value) -> Error {
    let kind = value.pointer("/error/type").and_then(Value::as_str).unwrap_or("error");
    let message = value.pointer("/error/message").and_then(Value::as_str).unwrap_or("(no message)");
    Error::new(ErrorKind::Agent, format!("the model server answered with an error ({kind}): {message}"))
}

/// The end of a streamed reply.
pub const STREAM_END: &str = "message_stop";

/// One streamed event into `builder`; `Ok(true)` at `message_stop`. Events are told apart by the
/// data's `type`; unknown ones (and `ping`) are skipped.
///
/// # Errors
/// An `error` event, or data that is not JSON.
pub(crate) fn on_event(event: &Event, builder: &mut ReplyBuilder) -> Result<bool> {
    let data: Value =
        serde_json::from_str(&event.data).map_err(|_| unreadable(&event.data, "has an event that is not JSON"))?;
    let key = data.get("index").and_then(Value::as_u64).unwrap_or(0).to_string();
    match data.get("type").and_then(Value::as_str).unwrap_or_default() {
        "message_start" => builder.usage = data.pointer("/message/usage").and_then(usage),
        "content_block_start" => {
            let block = &data["content_block"];
            match block.get("type").and_then(Value::as_str) {
                Some("tool_use") => builder.start_call(&key, str_at(block, "id"), str_at(block, "name")),
                Some("text") => builder.text(str_at(block, "text")),
                _ => {}
            }
        }
        "content_block_delta" => {
            let delta = &data["delta"];
            match delta.get("type").and_then(Value::as_str) {
                Some("text_delta") => builder.text(str_at(delta, "text")),
                Some("input_json_delta") => builder.call_arguments(&key, str_at(delta, "partial_json")),
                _ => {}
            }
        }
        "content_block_stop" => builder.call_done(&key, None),
        "message_delta" => {
            stopped(builder, data.pointer("/delta/stop_reason").and_then(Value::as_str));
            // Cumulative; the input side may be missing here, so it stays as message_start said.
            if let Some(delta) = data.get("usage") {
                let mut known = builder.usage.unwrap_or_default();
                if let Some(output) = delta.get("output_tokens").and_then(Value::as_u64) {
                    known.output_tokens = output;
                }
                if let Some(newer) = usage(delta) {
                    known.input_tokens = newer.input_tokens;
                    known.cached_tokens = newer.cached_tokens.or(known.cached_tokens);
                }
                builder.usage = Some(known);
            }
        }
        "message_stop" => return Ok(true),
        "error" => return Err(server_error(&data)),
        _ => {}
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::model::ToolCall;

    #[test]
    fn results_go_back_in_one_user_message_with_errors_marked() {
        let conversation = [
            Message::System("be brief".into()),
            Message::User("go".into()),
            Message::Assistant {
                content: Some("two calls".into()),
                tool_calls: vec![
                    ToolCall { id: "a".into(), name: "fs-read".into(), arguments: r#"{"path":"x"}"#.into() },
                    ToolCall { id: "b".into(), name: "fs-read".into(), arguments: "not json".into() },
                ],
            },
            Message::Tool { tool_call_id: "a".into(), content: "1\tx".into() },
            Message::Tool { tool_call_id: "b".into(), content: "error (bad_arguments): not JSON".into() },
        ];
        let out = messages(&conversation);
        assert_eq!(out.len(), 3);
        assert_eq!(out[0], json!({"role": "user", "content": "go"}));
        assert_eq!(out[1]["content"][2]["input"], json!({}));
        assert_eq!(out[2]["content"][0], json!({"type": "tool_result", "tool_use_id": "a", "content": "1\tx"}));
        assert_eq!(out[2]["content"][1]["is_error"], json!(true));
    }

    #[test]
    fn a_reply_cut_at_max_tokens_drops_its_last_call_and_usage_adds_the_cache() {
        let reply = json!({"type": "message", "content": [
            {"type": "text", "text": "I'll read."},
            {"type": "tool_use", "id": "t1", "name": "fs-read", "input": {"path": "a"}},
            {"type": "tool_use", "id": "t2", "name": "fs-read", "input": {"pa": 1}},
        ], "stop_reason": "max_tokens", "usage": {"input_tokens": 10, "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 5, "output_tokens": 7}});
        let reply = parse_reply(&reply.to_string()).unwrap();
        assert_eq!(reply.tool_calls.len(), 1);
        assert_eq!(reply.usage, Some(Usage { input_tokens: 115, output_tokens: 7, cached_tokens: Some(100) }));
        assert!(is_error("error (not_found): x") && !is_error("error (see below): x") && !is_error("1\terror ("));
    }
}
