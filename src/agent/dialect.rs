//! How the loop speaks tools with a model, in each dialect (design sections 6, 7 and 12): what the
//! system prompt and the request's `tools` carry, which calls a reply makes, and how their results
//! go back.
//!
//! - **native**: the catalogue travels as `tools` (rewritten for strict mode when the provider is
//!   marked `strict_tools`, whose calls then have their top-level nulls dropped); calls are the
//!   reply's `tool_calls`; each result goes back as a `tool` message answering its call's id.
//! - **pformat**: no `tools`; the system prompt carries the P-format instructions and catalogue
//!   (written by the same code that parses); calls are the reply's `<tool_call>` tags; the results
//!   go back together in one user message, one `<tool_result>` tag per call, in order. A tag that
//!   cannot be read is not run: its refusal, written for the model, is its result.

use serde_json::Value;

use crate::agent::model::{Message, ModelReply, ToolCall};
use crate::call::{CallOptions, CallRequest};
use crate::code_mode::{self, ToolsAs};
use crate::config::Dialect;
use crate::error::{Error, Result};
use crate::handle::HostHandle;
use crate::pformat;
use crate::schema::{self, Format};
use crate::spec::SpecSet;

/// What a model is told when the embedder gives no system prompt of its own.
pub const DEFAULT_SYSTEM_PROMPT: &str = "\
You are an agent that works in a software workspace through the tools you are given: read and \
change files and run commands with them, with paths relative to the workspace root. A tool that \
fails tells you why and what kind of error it was; use that to try again differently. When the \
task is done, reply with your answer and no tool call.";

/// How P-format results come back, added to the P-format system prompt.
const PFORMAT_RESULTS: &str = "\
# Results

After a reply with tool calls, the results come back in the next message, one \
<tool_result call=\"N\" tool=\"NAME\"> tag per call, in the order of the calls. When the task is \
done, reply with your answer and no tool_call tag.";

/// The dialect and what the session needs of the host to speak it, fixed at the session's start.
pub(crate) struct Speaker {
    dialect: Dialect,
    /// The shape the native catalogue is sent in; it also says how calls' arguments arrive.
    format: Format,
    /// The tools sent with every request (native only; `None` when there are none).
    pub tools: Option<Value>,
    /// The spec of every tool the model is offered: P-format tags are read with them, and a call
    /// of another tool of the host's is refused.
    specs: SpecSet,
    /// The host's tools that the model was not offered (code mode offers one).
    withheld: Vec<String>,
}

/// One call a reply asks for: runnable, or refused before it reached the host.
pub(crate) enum Attempt {
    /// A call for the host to run; `id` is what its result answers.
    Run { id: String, request: CallRequest },
    /// A P-format tag that could not be read: `tool` is the tool it named, if it named a known one.
    Refused { id: String, tool: String, error: Error },
}

/// A result on its way back to the model.
pub(crate) struct Answered {
    pub id: String,
    pub tool: String,
    pub text: String,
}

impl Speaker {
    /// Reads the specs from the host and keeps those `tools_as` offers; makes the native
    /// catalogue of them in `format` (the model's [`crate::agent::Model::catalogue_format`]).
    pub fn new(handle: &HostHandle, dialect: Dialect, format: Format, tools_as: ToolsAs) -> Result<Speaker> {
        let all = handle.specs()?;
        let specs = code_mode::offered(&all, tools_as);
        let withheld =
            all.iter().map(|s| s.name()).filter(|name| specs.get(name).is_none()).map(String::from).collect();
        let tools = match dialect {
            Dialect::Native | Dialect::Auto => {
                let catalogue = schema::catalogue(specs.iter().map(|s| s.as_ref()), format);
                catalogue.as_array().is_some_and(|a| !a.is_empty()).then_some(catalogue)
            }
            Dialect::Pformat => None,
        };
        Ok(Speaker { dialect, format, tools, specs, withheld })
    }

    /// The system prompt: `base`, and in P-format the instructions, the catalogue and how results
    /// come back.
    pub fn system_prompt(&self, base: &str) -> String {
        match self.dialect {
            Dialect::Native | Dialect::Auto => base.to_string(),
            Dialect::Pformat => format!(
                "{base}\n\n{}\n# Your tools\n\n{}\n\n{PFORMAT_RESULTS}",
                pformat::instructions(),
                pformat::catalogue(&self.specs)
            ),
        }
    }

    /// The calls `reply` makes, in order, with ids: a native call keeps its own id, or gets
    /// `call_TURN_N` when the server sent none (the tool message must answer some id).
    pub fn attempts(&self, turn: usize, reply: &ModelReply) -> Vec<Attempt> {
        let id_for = |i: usize, given: &str| {
            if given.is_empty() {
                format!("call_{turn}_{}", i + 1)
            } else {
                given.to_string()
            }
        };
        match self.dialect {
            Dialect::Native | Dialect::Auto => reply
                .tool_calls
                .iter()
                .enumerate()
                .map(|(i, call)| match self.was_withheld(&call.name) {
                    false => Attempt::Run {
                        id: id_for(i, &call.id),
                        request: CallRequest {
                            tool: call.name.clone(),
                            arguments: call.arguments.clone(),
                            options: CallOptions::sent(self.format),
                        },
                    },
                    true => Attempt::Refused {
                        id: id_for(i, &call.id),
                        tool: call.name.clone(),
                        error: self.specs.unknown_tool_error(&call.name),
                    },
                })
                .collect(),
            Dialect::Pformat => pformat::parse(reply.text.as_deref().unwrap_or_default(), &self.specs)
                .into_iter()
                .enumerate()
                .map(|(i, parsed)| match parsed {
                    Ok(call) => Attempt::Run {
                        id: id_for(i, ""),
                        request: CallRequest::new(call.name, Value::Object(call.arguments).to_string()),
                    },
                    Err(error) => Attempt::Refused {
                        id: id_for(i, ""),
                        tool: error.tool().unwrap_or("(unreadable tool call)").to_string(),
                        error,
                    },
                })
                .collect(),
        }
    }

    /// The reply as the conversation keeps it: its text, and in native its calls under the ids
    /// [`Speaker::attempts`] gave them.
    pub fn assistant_message(&self, reply: &ModelReply, attempts: &[Attempt]) -> Message {
        let tool_calls = match self.dialect {
            Dialect::Native | Dialect::Auto => reply
                .tool_calls
                .iter()
                .zip(attempts)
                .map(|(call, attempt)| ToolCall { id: attempt.id().to_string(), ..call.clone() })
                .collect(),
            Dialect::Pformat => Vec::new(),
        };
        Message::Assistant { content: reply.text.clone(), tool_calls }
    }

    /// The messages that carry `results` back.
    pub fn result_messages(&self, results: &[Answered]) -> Vec<Message> {
        match self.dialect {
            Dialect::Native | Dialect::Auto => {
                results.iter().map(|r| Message::Tool { tool_call_id: r.id.clone(), content: r.text.clone() }).collect()
            }
            Dialect::Pformat if results.is_empty() => Vec::new(),
            Dialect::Pformat => {
                let tags: Vec<String> = results
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        format!("<tool_result call=\"{}\" tool=\"{}\">\n{}\n</tool_result>", i + 1, r.tool, r.text)
                    })
                    .collect();
                vec![Message::User(tags.join("\n"))]
            }
        }
    }
}

impl Speaker {
    /// Whether `tool` (as a provider was sent it) is one of the host's that the model was not
    /// offered: calling it is refused as a call of an unknown tool. (A tool the host does not have
    /// goes to the host, which says so.)
    fn was_withheld(&self, tool: &str) -> bool {
        let named = |w: &String| w == tool || crate::param::provider_name(w).is_some_and(|sent| sent == tool);
        self.specs.get_by_provider_name(tool).is_none() && self.withheld.iter().any(named)
    }
}

impl Attempt {
    pub fn id(&self) -> &str {
        match self {
            Attempt::Run { id, .. } | Attempt::Refused { id, .. } => id,
        }
    }
}
