//! Going on from a session log (`toolhost agent --resume LOG TASK`): the logged conversation read
//! back, so a new session can continue it with a new task. It owns reading the conversation out of
//! the log's `request`, `reply` and `call` lines; the session owns finishing it (the last reply and
//! its results, in the session's dialect) and sending it.
//!
//! Decisions where the design is silent:
//! - The conversation goes on as it was logged, system prompt included (and with it, in P-format,
//!   the catalogue of then); each request still carries today's tools.
//! - The dialect and strict mode are the log's: a conversation cannot change how tools are spoken
//!   in the middle.
//! - Turns go on counting from the log's last one, so each call keeps an id and a place of its own
//!   in a log both sessions write to.
//! - A last reply whose calls ran but whose results were never sent (the turn limit, a stop, an
//!   error) gets its results from the log's `call` lines; a call the log has no line for is
//!   answered as not run.

use serde_json::Value;

use crate::agent::log::Entry;
use crate::agent::model::{Message, ModelReply, ToolCall};
use crate::config::Dialect;
use crate::error::{Error, ErrorKind, Result};

/// A logged conversation, ready to go on.
#[derive(Debug, Clone)]
pub struct Resumed {
    /// Where it was read from, as given (the new `session` line names it).
    pub from: String,
    /// How tools were spoken.
    pub dialect: Dialect,
    /// Whether tools were sent strict.
    pub strict: bool,
    /// Which tools the model was offered.
    pub tools_as: crate::code_mode::ToolsAs,
    /// The messages the log's requests carried, in order.
    pub messages: Vec<Message>,
    /// The last turn's number.
    pub turns: usize,
    /// The reply to the last request, when the log has one (the session adds it, and its calls'
    /// results, to the conversation).
    pub last_reply: Option<ModelReply>,
    /// The results of the last reply's calls, by their place in the reply (1 for the first): the
    /// call's id, its tool and the text the model would have been sent.
    pub last_results: Vec<(usize, String, String, String)>,
}

impl Resumed {
    /// Reads the conversation out of a session log's entries (as [`crate::agent::read_log`] gives
    /// them), `from` being where they came from.
    ///
    /// # Errors
    /// Kind config: the log has no session line or no request, or a logged message is not one
    /// the conversation can hold.
    pub fn from_log(entries: &[Entry], from: impl Into<String>) -> Result<Resumed> {
        let from = from.into();
        let bad = |what: String| Error::config(format!("cannot go on from {from}: {what}"));
        let Some((dialect, strict, tools_as)) = entries.iter().find_map(|e| match e {
            Entry::Session { dialect, strict, tools, .. } => Some((*dialect, *strict, *tools)),
            _ => None,
        }) else {
            return Err(bad("it has no session line".into()));
        };
        let mut messages: Vec<Message> = Vec::new();
        let mut turns = 0;
        let mut last_reply = None;
        let mut last_results = Vec::new();
        for entry in entries {
            match entry {
                Entry::Request { turn, messages_before, messages: added, .. } => {
                    if *messages_before > messages.len() {
                        return Err(bad(format!(
                            "turn {turn}'s request follows {messages_before} messages, and the log holds {} before it",
                            messages.len()
                        )));
                    }
                    messages.truncate(*messages_before);
                    for message in added {
                        messages.push(message_from_json(message).map_err(|what| bad(format!("turn {turn}: {what}")))?);
                    }
                    turns = *turn;
                    last_reply = None;
                    last_results.clear();
                }
                Entry::Reply { turn, text, tool_calls, finish_reason, usage } if *turn == turns => {
                    let tool_calls = tool_calls
                        .iter()
                        .map(tool_call_from_json)
                        .collect::<std::result::Result<Vec<_>, String>>()
                        .map_err(|what| bad(format!("turn {turn}'s reply: {what}")))?;
                    last_reply = Some(ModelReply {
                        text: text.clone(),
                        tool_calls,
                        finish_reason: finish_reason.clone(),
                        usage: *usage,
                    });
                }
                Entry::Call { turn, index, id, record, .. } if *turn == turns => {
                    last_results.push((*index, id.clone(), record.tool.clone(), record.model_text()));
                }
                _ => {}
            }
        }
        if messages.is_empty() {
            return Err(bad("it has no request".into()));
        }
        Ok(Resumed { from, dialect, strict, tools_as, messages, turns, last_reply, last_results })
    }
}

/// What a session answers for a call of the last reply the log has no result for.
pub(crate) fn not_run_text(tool: &str) -> String {
    format!(
        "error ({}): {tool}: not run: the session ended before this call ran; make it again if it is still needed",
        ErrorKind::Denied
    )
}

/// A message in the chat-completions request shape ([`Message::to_json`]) read back.
fn message_from_json(value: &Value) -> std::result::Result<Message, String> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
    let role = value.get("role").and_then(Value::as_str).unwrap_or_default();
    let content = text("content");
    Ok(match role {
        "system" => Message::System(content.ok_or("a system message without content")?),
        "user" => Message::User(content.ok_or("a user message without content")?),
        "assistant" => Message::Assistant {
            content,
            tool_calls: match value.get("tool_calls") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(calls)) => calls.iter().map(tool_call_from_json).collect::<Result<_, _>>()?,
                Some(_) => return Err("an assistant message whose tool_calls is not a list".into()),
            },
        },
        "tool" => Message::Tool {
            tool_call_id: text("tool_call_id").ok_or("a tool message without tool_call_id")?,
            content: content.ok_or("a tool message without content")?,
        },
        other => return Err(format!("a message with the role {other:?}")),
    })
}

/// A tool call in the chat-completions shape ([`ToolCall::to_json`]) read back.
fn tool_call_from_json(value: &Value) -> std::result::Result<ToolCall, String> {
    let function = value.get("function").ok_or("a tool call without function")?;
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
    Ok(ToolCall {
        id: text(value, "id").unwrap_or_default(),
        name: text(function, "name").ok_or("a tool call without a name")?,
        arguments: text(function, "arguments").unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_shape_reads_back_as_it_was_written() {
        let messages = vec![
            Message::System("Work.".into()),
            Message::User("Do it.".into()),
            Message::Assistant {
                content: None,
                tool_calls: vec![ToolCall { id: "c1".into(), name: "fs-read".into(), arguments: "{}".into() }],
            },
            Message::Tool { tool_call_id: "c1".into(), content: "ok".into() },
            Message::Assistant { content: Some("done".into()), tool_calls: Vec::new() },
        ];
        for message in messages {
            assert_eq!(message_from_json(&message.to_json()), Ok(message.clone()));
        }
        assert!(message_from_json(&serde_json::json!({"role": "wizard", "content": "x"})).is_err());
    }
}
