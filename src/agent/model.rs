//! The [`Model`] trait and what crosses it: the conversation's [`Message`]s, the [`ModelRequest`]
//! the loop sends (messages and the tool catalogue) and the [`ModelReply`] it gets back (text and
//! [`ToolCall`]s). Messages are written in the OpenAI chat-completions shape, which every
//! OpenAI-compatible server reads; how they travel (HTTP, retries) is `client`'s business, and what
//! the loop does with a reply is `session`'s.

use serde_json::{json, Map, Value};

use crate::error::Result;

/// One tool call as a model sent it. `arguments` is the text the model wrote (OpenAI sends the
/// arguments as a JSON string); the call path parses and tidies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The call's id, echoed in the tool message that answers it.
    pub id: String,
    /// The tool's name as the provider was sent it (`server__tool` for `server.tool`).
    pub name: String,
    /// The arguments as JSON text, as the model wrote them.
    pub arguments: String,
}

impl ToolCall {
    /// The call in the chat-completions shape: `{"id","type":"function","function":{"name","arguments"}}`.
    pub fn to_json(&self) -> Value {
        json!({"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}})
    }
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// What the model is told before the task: how to work, and for P-format the tool catalogue.
    System(String),
    /// The task, and in P-format the tool results.
    User(String),
    /// A reply of the model: its text (none when it only called tools) and its native tool calls.
    Assistant {
        /// The reply's text.
        content: Option<String>,
        /// The native tool calls it made.
        tool_calls: Vec<ToolCall>,
    },
    /// The result of a native tool call, as the text the model is given.
    Tool {
        /// The id of the call it answers.
        tool_call_id: String,
        /// The result, or the error with its kind.
        content: String,
    },
}

impl Message {
    /// The message in the chat-completions request shape (OpenAI's `ChatCompletionRequestMessage`):
    /// `role` and `content` always (an assistant message that only called tools has `null`
    /// content), `tool_calls` only when there are some, `tool_call_id` on tool messages.
    ///
    /// ```
    /// use toolhost::agent::Message;
    /// let m = Message::Tool { tool_call_id: "call_1".into(), content: "done".into() };
    /// assert_eq!(m.to_json().to_string(), r#"{"role":"tool","tool_call_id":"call_1","content":"done"}"#);
    /// ```
    pub fn to_json(&self) -> Value {
        match self {
            Message::System(content) => json!({"role": "system", "content": content}),
            Message::User(content) => json!({"role": "user", "content": content}),
            Message::Assistant { content, tool_calls } => {
                let mut out = Map::new();
                out.insert("role".into(), json!("assistant"));
                out.insert("content".into(), json!(content));
                if !tool_calls.is_empty() {
                    out.insert("tool_calls".into(), tool_calls.iter().map(ToolCall::to_json).collect());
                }
                Value::Object(out)
            }
            Message::Tool { tool_call_id, content } => {
                json!({"role": "tool", "tool_call_id": tool_call_id, "content": content})
            }
        }
    }
}

/// What the loop asks a model: the whole conversation so far and, for native tool calling, the
/// tool catalogue in the provider's shape (a JSON array of `{"type":"function",...}`).
#[derive(Debug, Clone, Copy)]
pub struct ModelRequest<'a> {
    /// The conversation, oldest first.
    pub messages: &'a [Message],
    /// The tools, when the dialect sends them natively (never empty when present).
    pub tools: Option<&'a Value>,
}

/// A model's answer: text, tool calls, or both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelReply {
    /// The reply's text, if it has any.
    pub text: Option<String>,
    /// Native tool calls, in the order the model made them.
    pub tool_calls: Vec<ToolCall>,
    /// Why the model stopped (`stop`, `tool_calls`, `length`, ...), when the server says.
    pub finish_reason: Option<String>,
    /// The tokens the request and the reply took, when the API says.
    pub usage: Option<Usage>,
}

/// The tokens of one turn, in one shape whatever the API: the session log writes it as `toolhost
/// stats` reads it (`{"input_tokens","output_tokens","cached_tokens"}`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    /// Input tokens, those read from (or written to) a cache included. (Anthropic counts its
    /// cached tokens apart; they are added in.)
    pub input_tokens: u64,
    /// Output tokens (reasoning included where the API counts it there).
    pub output_tokens: u64,
    /// Of the input, the tokens read from the provider's cache, when the API says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
}

impl Usage {
    /// `self` and `other` added up (cached tokens known when either knows them).
    pub fn plus(self, other: Usage) -> Usage {
        let cached = match (self.cached_tokens, other.cached_tokens) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        Usage {
            input_tokens: self.input_tokens + other.input_tokens,
            output_tokens: self.output_tokens + other.output_tokens,
            cached_tokens: cached,
        }
    }
}

impl ModelReply {
    /// A reply that only says `text`.
    pub fn text(text: impl Into<String>) -> Self {
        ModelReply { text: Some(text.into()), ..ModelReply::default() }
    }

    /// A reply that only calls tools.
    pub fn calls(tool_calls: Vec<ToolCall>) -> Self {
        ModelReply { tool_calls, ..ModelReply::default() }
    }
}

/// A model the agent loop can talk to. [`crate::agent::ChatClient`] is the OpenAI-compatible one;
/// an embedder may bring their own (another API, a scripted model for tests). Any
/// `FnMut(&ModelRequest) -> Result<ModelReply>` is a model.
///
/// ```
/// use toolhost::agent::{Model, ModelReply, ModelRequest};
/// let mut echo = |request: &ModelRequest<'_>| -> toolhost::Result<ModelReply> {
///     Ok(ModelReply::text(format!("{} messages", request.messages.len())))
/// };
/// let reply = echo.send(&ModelRequest { messages: &[], tools: None }).unwrap();
/// assert_eq!(reply.text.as_deref(), Some("0 messages"));
/// ```
pub trait Model {
    /// Sends one request and waits for the reply.
    ///
    /// # Errors
    /// The model could not answer (kind [`crate::ErrorKind::Agent`] for the HTTP client): the
    /// session ends with this error.
    fn send(&mut self, request: &ModelRequest<'_>) -> Result<ModelReply>;

    /// What the session log records about the model at the start (the HTTP client: its base URL
    /// and model name; never a key). Nothing by default.
    fn describe(&self) -> Value {
        Value::Null
    }

    /// The catalogue shape the model is sent its tools in (`strict`: the provider is marked
    /// `strict_tools`). The OpenAI shape by default; the HTTP client reshapes it for the Anthropic
    /// and Responses APIs, and a preset may choose another (`Preset::schema_format`).
    fn catalogue_format(&self, strict: bool) -> crate::schema::Format {
        crate::agent::provider::openai_format(strict)
    }
}

impl<F> Model for F
where
    F: FnMut(&ModelRequest<'_>) -> Result<ModelReply>,
{
    fn send(&mut self, request: &ModelRequest<'_>) -> Result<ModelReply> {
        self(request)
    }
}
