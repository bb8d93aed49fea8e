//! Streamed replies: reading server-sent events off a byte stream ([`Events`]), and assembling a
//! [`ModelReply`] from what each API's events say ([`ReplyBuilder`]): text as it comes (shown at
//! once through a sink), tool calls from their fragments, the finish reason and the usage. The
//! builder also knows what has arrived so far, so a stream cut short is reported the same way for
//! every API.
//!
//! The SSE rules followed (WHATWG's "event stream" format, the parts these APIs use): lines end in
//! LF, CRLF or CR; a blank line ends an event; `event:` names it; `data:` lines are joined with
//! `\n`; one space after the colon is dropped; lines starting with `:` are comments (keep-alive
//! pings) and `id:`/`retry:` and unknown fields are ignored; a leading byte-order mark is dropped.
//! No crate in the tree reads SSE from a blocking reader (the one there is async), and these
//! rules fit in the few lines below.

use std::io::BufRead;

use crate::agent::model::{ModelReply, ToolCall, Usage};
use crate::error::{Error, ErrorKind, Result};

/// One event: its name (`event:`), if any, and its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    pub name: Option<String>,
    pub data: String,
}

/// The events of a stream, read as they arrive.
pub(crate) struct Events<R> {
    reader: R,
    first: bool,
    /// A CR ended the last line: an LF right after it belongs to that line ending.
    after_cr: bool,
}

impl<R: BufRead> Events<R> {
    pub fn new(reader: R) -> Self {
        Events { reader, first: true, after_cr: false }
    }

    /// The next event; `None` at the end of the stream (an event not ended by a blank line is
    /// dropped, as the format says).
    ///
    /// # Errors
    /// Reading failed, or a line is not UTF-8.
    pub fn next_event(&mut self) -> std::io::Result<Option<Event>> {
        let (mut name, mut data, mut has_data) = (None, String::new(), false);
        loop {
            let Some(line) = self.line()? else { return Ok(None) };
            if line.is_empty() {
                if has_data {
                    return Ok(Some(Event { name, data }));
                }
                name = None;
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = match line.split_once(':') {
                Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
                None => (line.as_str(), ""),
            };
            match field {
                "event" => name = Some(value.to_string()),
                "data" => {
                    if has_data {
                        data.push('\n');
                    }
                    data.push_str(value);
                    has_data = true;
                }
                _ => {}
            }
        }
    }

    /// One line without its ending; `None` at the end of the stream.
    fn line(&mut self) -> std::io::Result<Option<String>> {
        let mut bytes = Vec::new();
        loop {
            let buffer = self.reader.fill_buf()?;
            if buffer.is_empty() {
                if bytes.is_empty() {
                    return Ok(None);
                }
                break;
            }
            if self.after_cr {
                self.after_cr = false;
                if buffer[0] == b'\n' {
                    self.reader.consume(1);
                    continue;
                }
            }
            match buffer.iter().position(|b| *b == b'\n' || *b == b'\r') {
                Some(at) => {
                    bytes.extend_from_slice(&buffer[..at]);
                    self.after_cr = buffer[at] == b'\r';
                    self.reader.consume(at + 1);
                    break;
                }
                None => {
                    let n = buffer.len();
                    bytes.extend_from_slice(buffer);
                    self.reader.consume(n);
                }
            }
        }
        if self.first {
            self.first = false;
            if bytes.starts_with("\u{feff}".as_bytes()) {
                bytes.drain(..3);
            }
        }
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("a line is not UTF-8: {e}")))
    }
}

/// Where streamed text goes as it arrives (the terminal).
pub type TextSink = std::sync::Arc<std::sync::Mutex<dyn FnMut(&str) + Send>>;

/// One tool call being assembled.
#[derive(Debug, Default)]
struct PartialCall {
    /// What the API keys the call's fragments by (a block index, an output index, a call index).
    key: String,
    id: String,
    name: String,
    arguments: String,
    /// The call's end was seen.
    done: bool,
}

/// Assembles a reply from a stream's events.
pub(crate) struct ReplyBuilder {
    text: String,
    has_text: bool,
    calls: Vec<PartialCall>,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
    /// The API's end-of-reply marker was seen.
    pub ended: bool,
    sink: Option<TextSink>,
    /// Whether anything was shown through the sink.
    pub shown: bool,
    /// The last part to arrive was a call (not text).
    pub last_is_call: bool,
}

impl ReplyBuilder {
    pub fn new(sink: Option<TextSink>) -> Self {
        ReplyBuilder {
            text: String::new(),
            has_text: false,
            calls: Vec::new(),
            finish_reason: None,
            usage: None,
            ended: false,
            sink,
            shown: false,
            last_is_call: false,
        }
    }

    /// More of the reply's text: kept, and shown.
    pub fn text(&mut self, fragment: &str) {
        self.has_text = true;
        if fragment.is_empty() {
            return;
        }
        self.last_is_call = false;
        self.text.push_str(fragment);
        if let Some(sink) = &self.sink {
            if let Ok(mut sink) = sink.lock() {
                sink(fragment);
                self.shown = true;
            }
        }
    }

    /// A call starts under `key`.
    pub fn start_call(&mut self, key: &str, id: &str, name: &str) {
        self.last_is_call = true;
        self.calls.push(PartialCall {
            key: key.to_string(),
            id: id.to_string(),
            name: name.to_string(),
            ..Default::default()
        });
    }

    /// Forgets the last call (one whose arguments a token limit may have cut).
    pub fn drop_last_call(&mut self) {
        self.calls.pop();
        self.last_is_call = false;
    }

    /// The call under `key`, the last one when several share it; `None` when none has it.
    fn call_mut(&mut self, key: &str) -> Option<&mut PartialCall> {
        self.calls.iter_mut().rev().find(|c| c.key == key)
    }

    /// A fragment of the arguments of the call under `key` (a call is started if none has it).
    pub fn call_arguments(&mut self, key: &str, fragment: &str) {
        if self.call_mut(key).is_none() {
            self.start_call(key, "", "");
        }
        if let Some(call) = self.call_mut(key) {
            call.arguments.push_str(fragment);
        }
    }

    /// The whole arguments of the call under `key`, when the API repeats them at its end.
    pub fn call_done(&mut self, key: &str, whole: Option<&str>) {
        if let Some(call) = self.call_mut(key) {
            if let Some(whole) = whole {
                call.arguments = whole.to_string();
            }
            call.done = true;
        }
    }

    /// Sets the name or id of the call under `key` where it was not known yet.
    pub fn name_call(&mut self, key: &str, id: Option<&str>, name: Option<&str>) {
        if let Some(call) = self.call_mut(key) {
            if let Some(id) = id.filter(|i| !i.is_empty()) {
                call.id = id.to_string();
            }
            if let Some(name) = name.filter(|n| !n.is_empty()) {
                call.name = name.to_string();
            }
        }
    }

    /// How many calls have arrived so far (the keys they came under, for chat's quirks).
    pub fn call_keys(&self) -> Vec<(&str, &str)> {
        self.calls.iter().map(|c| (c.key.as_str(), c.id.as_str())).collect()
    }

    /// The reply so far, as the non-streaming reader would have read it.
    pub fn finish(self) -> ModelReply {
        let tool_calls = self
            .calls
            .into_iter()
            .map(|c| ToolCall {
                id: c.id,
                name: c.name,
                arguments: if c.arguments.is_empty() { "{}".into() } else { c.arguments },
            })
            .collect();
        ModelReply {
            text: (self.has_text && !self.text.is_empty()).then_some(self.text),
            tool_calls,
            finish_reason: self.finish_reason,
            usage: self.usage,
        }
    }

    /// The error for a stream that stopped before `marker`: what had arrived.
    pub fn cut(&self, url: &str, marker: &str, cause: Option<&str>) -> Error {
        let chars = self.text.chars().count();
        let incomplete = self
            .calls
            .iter()
            .filter(|c| !c.done && serde_json::from_str::<serde_json::Value>(&c.arguments).is_err())
            .count();
        let calls = match (self.calls.len(), incomplete) {
            (0, _) => "no tool call".to_string(),
            (n, 0) => format!("{n} tool call{}", if n == 1 { "" } else { "s" }),
            (n, k) => format!("{n} tool call{} ({k} with arguments cut short)", if n == 1 { "" } else { "s" }),
        };
        let cause = cause.map(|c| format!(" ({c})")).unwrap_or_default();
        Error::new(
            ErrorKind::Agent,
            format!(
                "the model server's stream ({url}) stopped{cause} after {chars} characters of text and {calls}, \
                 without its end ({marker}); the reply is incomplete and was not used"
            ),
        )
    }
}

/// How a stream went: the reply, or the error and whether nothing of the reply had arrived before
/// it (no text, no call: the request can be sent again without showing anything twice).
pub(crate) type Streamed = std::result::Result<ModelReply, (Error, bool)>;

/// Reads every event of `reader` into `builder` through `on_event` (which returns `Ok(true)` at
/// the API's end marker), and the reply; a stream that ends or fails before the marker is cut.
// The error half is large, but a stream fails once at most, where boxing would cost every caller.
#[allow(clippy::result_large_err)]
pub(crate) fn read_stream<R: BufRead>(
    reader: R,
    mut builder: ReplyBuilder,
    url: &str,
    marker: &str,
    mut on_event: impl FnMut(&Event, &mut ReplyBuilder) -> Result<bool>,
) -> Streamed {
    let mut events = Events::new(reader);
    let nothing = |b: &ReplyBuilder| b.text.is_empty() && b.calls.is_empty();
    loop {
        match events.next_event() {
            Ok(Some(event)) => match on_event(&event, &mut builder) {
                Ok(true) => {
                    builder.ended = true;
                    return Ok(builder.finish());
                }
                Ok(false) => {}
                Err(e) => return Err((e, nothing(&builder))),
            },
            Ok(None) if builder.ended => return Ok(builder.finish()),
            Ok(None) => return Err((builder.cut(url, marker, None), nothing(&builder))),
            Err(e) => return Err((builder.cut(url, marker, Some(&e.to_string())), nothing(&builder))),
        }
    }
}

/// A reply (or a streamed event) the client cannot read, quoting its first 500 characters.
pub(crate) fn unreadable(reply: &str, what: &str) -> Error {
    let excerpt: String = reply.trim().chars().take(500).collect();
    Error::new(ErrorKind::Agent, format!("the model server's reply {what}; it reads: {excerpt}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str) -> Vec<Event> {
        let mut events = Events::new(std::io::BufReader::with_capacity(3, text.as_bytes()));
        std::iter::from_fn(|| events.next_event().unwrap()).collect()
    }

    #[test]
    fn events_follow_the_sse_rules() {
        let text = "\u{feff}: ping\r\nevent: a\r\ndata: one\r\ndata:two\r\n\r\nid: 7\rretry: 5\rdata:  x\r\rdata: cut";
        assert_eq!(
            all(text),
            [Event { name: Some("a".into()), data: "one\ntwo".into() }, Event { name: None, data: " x".into() },]
        );
        assert_eq!(all("data: {}\n\n\n\nevent: e\n\ndata: z\n\n")[1], Event { name: None, data: "z".into() });
    }

    #[test]
    fn a_cut_names_what_arrived() {
        let mut builder = ReplyBuilder::new(None);
        builder.text("Hello");
        builder.start_call("0", "c1", "fs-read");
        builder.call_arguments("0", "{\"pa");
        let e = builder.cut("http://x/v1", "message_stop", None);
        assert!(e.message().contains("after 5 characters of text and 1 tool call (1 with arguments cut short)"), "{e}");
        assert!(e.message().contains("message_stop"), "{e}");
    }
}
