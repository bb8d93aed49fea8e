//! OpenAI's Responses API (`POST {base_url}/responses`): the conversation as its request body, and
//! its replies, whole or streamed, read into a [`ModelReply`].
//!
//! # The request
//!
//! `{"model", "instructions", "input", "tools", "store": false, "stream"}`, then `extra_body`'s
//! fields (never one of those). The system prompt is `instructions`; the conversation is `input`:
//! the task and P-format results as `{"role":"user","content"}` items, a reply's text as
//! `{"role":"assistant","content"}`, each of its calls as a `function_call` item, each result as a
//! `function_call_output` item answering its `call_id`. Tools are flat function tools, `strict`
//! always said (`true` for a tool the strict rewrite could express, else `false`: the API's own
//! default for a missing `strict` is not the chat API's). `store` is false: every request carries
//! the whole conversation, so nothing needs keeping on the server. Reasoning items are not sent
//! back.
//!
//! # The reply
//!
//! `output_text` parts of `message` items are the text, `function_call` items the calls (their
//! `call_id` the id), `status` the finish reason (`max_output_tokens` when the reply was cut
//! there). Usage: `input_tokens` (cached included), `output_tokens`,
//! `input_tokens_details.cached_tokens`.

use serde_json::{json, Map, Value};

use crate::agent::model::{Message, ModelReply, ModelRequest, Usage};
use crate::agent::settings::ClientSettings;
use crate::agent::stream::{unreadable, Event, ReplyBuilder};
use crate::error::{Error, ErrorKind, Result};

/// Request fields the client sends itself.
const RESERVED: [&str; 7] = ["model", "instructions", "input", "tools", "store", "stream", "messages"];

/// The request body (see the module docs).
pub fn request_body(settings: &ClientSettings, request: &ModelRequest<'_>) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(settings.model));
    let system: Vec<&str> = request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::System(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    if !system.is_empty() {
        body.insert("instructions".into(), json!(system.join("\n\n")));
    }
    let mut input = Vec::new();
    for message in request.messages {
        match message {
            Message::System(_) => {}
            Message::User(text) => input.push(json!({"role": "user", "content": text})),
            Message::Assistant { content, tool_calls } => {
                if let Some(text) = content.as_deref().filter(|t| !t.is_empty()) {
                    input.push(json!({"role": "assistant", "content": text}));
                }
                for call in tool_calls {
                    input.push(json!({"type": "function_call", "call_id": call.id, "name": call.name, "arguments": call.arguments}));
                }
            }
            Message::Tool { tool_call_id, content } => {
                input.push(json!({"type": "function_call_output", "call_id": tool_call_id, "output": content}));
            }
        }
    }
    body.insert("input".into(), Value::Array(input));
    if let Some(tools) = request.tools.and_then(Value::as_array).filter(|t| !t.is_empty()) {
        body.insert("tools".into(), tools.iter().map(tool).collect());
    }
    body.insert("store".into(), json!(false));
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

/// A tool of the OpenAI chat-shaped catalogue as a flat Responses function tool.
fn tool(openai: &Value) -> Value {
    let function = openai.get("function").unwrap_or(openai);
    let mut out = Map::new();
    out.insert("type".into(), json!("function"));
    out.insert("name".into(), function.get("name").cloned().unwrap_or_else(|| json!("")));
    if let Some(description) = function.get("description").filter(|d| d.is_string()) {
        out.insert("description".into(), description.clone());
    }
    out.insert("parameters".into(), function.get("parameters").cloned().unwrap_or(Value::Null));
    out.insert("strict".into(), json!(function.get("strict").and_then(Value::as_bool).unwrap_or(false)));
    Value::Object(out)
}

/// Reads a whole (non-streamed) reply.
///
/// # Errors
/// Kind `agent_error` when it is not JSON, failed, or holds no `output`.
pub fn parse_reply(reply: &str) -> Result<ModelReply> {
    let value: Value = serde_json::from_str(reply).map_err(|_| unreadable(reply, "is not JSON"))?;
    let mut builder = ReplyBuilder::new(None);
    finished(&value, &mut builder, true)?;
    Ok(builder.finish())
}

/// A whole `Response` into `builder`: its items when `items`, its status and usage always.
fn finished(response: &Value, builder: &mut ReplyBuilder, items: bool) -> Result<()> {
    if response.get("status").and_then(Value::as_str) == Some("failed") || response.get("output").is_none() {
        if let Some(error) = response.get("error").filter(|e| e.is_object()) {
            return Err(server_error(error));
        }
    }
    let output = response.get("output").and_then(Value::as_array);
    let Some(output) = output else { return Err(unreadable(&response.to_string(), "has no output")) };
    if items {
        for (i, item) in output.iter().enumerate() {
            item_into(item, &i.to_string(), builder);
        }
    }
    let status = response.get("status").and_then(Value::as_str);
    let reason = response.pointer("/incomplete_details/reason").and_then(Value::as_str);
    builder.finish_reason = match (status, reason) {
        (Some("incomplete"), Some(reason)) => Some(reason.to_string()),
        (status, _) => status.map(String::from),
    };
    builder.usage = response.get("usage").and_then(usage);
    Ok(())
}

/// One output item into `builder`, under `key`.
fn item_into(item: &Value, key: &str, builder: &mut ReplyBuilder) {
    match item.get("type").and_then(Value::as_str) {
        Some("message") => {
            for part in item.get("content").and_then(Value::as_array).into_iter().flatten() {
                match part.get("type").and_then(Value::as_str) {
                    Some("output_text") => builder.text(str_at(part, "text")),
                    Some("refusal") => builder.text(str_at(part, "refusal")),
                    _ => {}
                }
            }
        }
        Some("function_call") => {
            builder.start_call(key, str_at(item, "call_id"), str_at(item, "name"));
            builder.call_done(key, Some(str_at(item, "arguments")));
        }
        _ => {}
    }
}

fn str_at<'v>(value: &'v Value, key: &str) -> &'v str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn usage(value: &Value) -> Option<Usage> {
    Some(Usage {
        input_tokens: value.get("input_tokens")?.as_u64()?,
        output_tokens: value.get("output_tokens").and_then(Value::as_u64).unwrap_or(0),
        cached_tokens: value.pointer("/input_tokens_details/cached_tokens").and_then(Value::as_u64),
    })
}

fn server_error(error: &Value) -> Error {
    let code = error.get("code").and_then(Value::as_str).unwrap_or("error");
    let message = error.get("message").and_then(Value::as_str).unwrap_or("(no message)");
    Error::new(ErrorKind::Agent, format!("the model server answered with an error ({code}): {message}"))
}

/// The end of a streamed reply.
pub const STREAM_END: &str = "response.completed, response.incomplete or response.failed";

/// One streamed event into `builder`; `Ok(true)` at the terminal event. Events are told apart by
/// the data's `type`; unknown ones are skipped.
///
/// # Errors
/// An `error` event, a failed response, or data that is not JSON.
pub(crate) fn on_event(event: &Event, builder: &mut ReplyBuilder) -> Result<bool> {
    let data: Value =
        serde_json::from_str(&event.data).map_err(|_| unreadable(&event.data, "has an event that is not JSON"))?;
    let key = data.get("output_index").and_then(Value::as_u64).unwrap_or(0).to_string();
    match data.get("type").and_then(Value::as_str).unwrap_or_default() {
        "response.output_item.added" => {
            let item = &data["item"];
            if item["type"] == "function_call" {
                builder.start_call(&key, str_at(item, "call_id"), str_at(item, "name"));
                builder.call_arguments(&key, str_at(item, "arguments"));
            }
        }
        "response.output_text.delta" | "response.refusal.delta" => builder.text(str_at(&data, "delta")),
        "response.function_call_arguments.delta" => builder.call_arguments(&key, str_at(&data, "delta")),
        "response.function_call_arguments.done" => {
            builder.name_call(&key, None, data.get("name").and_then(Value::as_str));
            builder.call_done(&key, data.get("arguments").and_then(Value::as_str));
        }
        "response.output_item.done" => {
            let item = &data["item"];
            if item["type"] == "function_call" {
                builder.name_call(
                    &key,
                    item.get("call_id").and_then(Value::as_str),
                    item.get("name").and_then(Value::as_str),
                );
                builder.call_done(&key, item.get("arguments").and_then(Value::as_str));
            }
        }
        "response.completed" | "response.incomplete" | "response.failed" => {
            finished(&data["response"], builder, false)?;
            return Ok(true);
        }
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
    fn calls_and_results_are_items_paired_by_call_id() {
        let settings = ClientSettings::new("http://x/v1", "m");
        let conversation = [
            Message::System("sys".into()),
            Message::User("go".into()),
            Message::Assistant {
                content: None,
                tool_calls: vec![ToolCall { id: "call_1".into(), name: "fs-read".into(), arguments: "{}".into() }],
            },
            Message::Tool { tool_call_id: "call_1".into(), content: "ok".into() },
        ];
        let tools = json!([{"type": "function", "function": {"name": "fs-read", "parameters": {"type": "object"}}}]);
        let body = request_body(&settings, &ModelRequest { messages: &conversation, tools: Some(&tools) });
        assert_eq!(body["instructions"], "sys");
        assert_eq!(
            body["input"][1],
            json!({"type": "function_call", "call_id": "call_1", "name": "fs-read", "arguments": "{}"})
        );
        assert_eq!(body["input"][2], json!({"type": "function_call_output", "call_id": "call_1", "output": "ok"}));
        assert_eq!(
            body["tools"][0],
            json!({"type": "function", "name": "fs-read", "parameters": {"type": "object"}, "strict": false})
        );
        assert_eq!(body["store"], false);
    }

    #[test]
    fn an_incomplete_reply_says_why_and_a_failed_one_is_an_error() {
        let cut = json!({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
            "output": [{"type": "message", "content": [{"type": "output_text", "text": "Hal"}]}],
            "usage": {"input_tokens": 9, "output_tokens": 3, "input_tokens_details": {"cached_tokens": 4}}});
        let reply = parse_reply(&cut.to_string()).unwrap();
        assert_eq!((reply.text.as_deref(), reply.finish_reason.as_deref()), (Some("Hal"), Some("max_output_tokens")));
        assert_eq!(reply.usage, Some(Usage { input_tokens: 9, output_tokens: 3, cached_tokens: Some(4) }));
        let failed = json!({"status": "failed", "error": {"code": "server_error", "message": "boom"}, "output": []});
        assert!(parse_reply(&failed.to_string()).unwrap_err().message().contains("boom"));
    }
}
