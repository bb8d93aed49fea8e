//! The agent loop (design section 12): send the conversation with the tools, run the calls the
//! model makes through the host, send the results back, until the model answers without calls or
//! the turn limit is reached. It owns the order of things and the session log's lines; the host
//! owns each call (tidy, convert, guard, run, record), the dialect owns how tools are spoken, and
//! the model owns the transport.
//!
//! Decisions where the design is silent:
//! - A turn is one request. With `max_turns` N, at most N requests are sent; the calls of the N-th
//!   reply still run (the model asked for them), but their results are not sent anywhere.
//! - Every call of a reply runs, in order, even after one fails: each failure goes back to the
//!   model as that call's result, with its kind (`error (denied): ...`), so the model can act on it.
//! - Except that consecutive calls of read-only tools that cannot ask a person
//!   ([`HostHandle::concurrent_tools`]) run side by side, on the host's lanes
//!   ([`HostHandle::with_lanes`]; one after another without them); their results still go back in
//!   the calls' order, and calls that write or may ask run one at a time, in order, after the
//!   read-only ones before them have ended.
//! - The catalogue is read once, when the session starts, and every request carries that one.
//! - A reply with neither text nor calls is an answer: the empty one.
//! - A reply may make at most [`Session::max_calls_per_reply`] calls ([`DEFAULT_MAX_CALLS_PER_REPLY`]
//!   unless `[provider] max_calls_per_reply` says otherwise): the calls past it are not run, and
//!   each is answered with a `denied` result saying so, so every call id still gets its answer.
//! - One reply's results together add at most [`Session::max_turn_result_chars`] characters to the
//!   conversation ([`DEFAULT_MAX_TURN_RESULT_CHARS`]; each result is already capped by
//!   `output_chars`): the result that reaches the bound is cut with a note, and the calls after it
//!   are not run, each answered with a `denied` result saying why. With the cap on calls this
//!   bounds what one turn can add, whatever the model sends.
//! - A stop ([`Stop`]) interrupts the running call (Scheme code stops at once, and so does a
//!   `shell-exec` command with its whole process group; another Rust tool runs to its end), waits a
//!   short grace for its record, logs it, and ends the session as [`End::Interrupted`]. No further
//!   request is sent.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::agent::dialect::{Answered, Attempt, Speaker, DEFAULT_SYSTEM_PROMPT};
use crate::agent::log::{Entry, SessionLog, LOG_VERSION};
use crate::agent::model::{Message, Model, ModelReply, ModelRequest};
use crate::agent::resume::{not_run_text, Resumed};
use crate::agent::stop::{self, Stop};
use crate::call::{CallRecord, CallRequest};
use crate::code_mode::ToolsAs;
use crate::config::Dialect;
use crate::error::{Error, ErrorKind, Result};
use crate::handle::HostHandle;

/// How many requests a session sends at most, unless told otherwise.
pub const DEFAULT_MAX_TURNS: usize = 20;

/// How many calls of one reply run at most, unless told otherwise: models that call tools in
/// parallel make a handful per reply, and a reply of thousands is a model gone wrong.
pub const DEFAULT_MAX_CALLS_PER_REPLY: usize = 32;

/// How many characters one reply's results may add to the conversation together, unless told
/// otherwise: about 50,000 tokens.
pub const DEFAULT_MAX_TURN_RESULT_CHARS: usize = 200_000;

/// How long a stopped session waits for the interrupted call's own record before it gives up on
/// the call.
const CALL_GRACE: Duration = Duration::from_secs(2);

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The model answered without calling a tool.
    Answered,
    /// The turn limit was reached while the model was still calling tools.
    MaxTurns,
    /// The session was stopped ([`Stop`], Ctrl-C).
    Interrupted,
}

impl End {
    /// The name the session log gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            End::Answered => "answered",
            End::MaxTurns => "max_turns",
            End::Interrupted => "interrupted",
        }
    }
}

/// What a session did.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Why it ended.
    pub end: End,
    /// The model's final answer (when it answered).
    pub answer: Option<String>,
    /// How many requests were sent.
    pub turns: usize,
    /// Every call's record, in the order they ran.
    pub calls: Vec<CallRecord>,
    /// The whole conversation, system prompt first.
    pub messages: Vec<Message>,
}

/// One call that has just run, as a progress callback sees it.
#[derive(Debug, Clone, Copy)]
pub struct CallEvent<'r> {
    /// The turn whose reply made the call.
    pub turn: usize,
    /// 1 for the reply's first call.
    pub index: usize,
    /// What happened.
    pub record: &'r CallRecord,
}

impl CallEvent<'_> {
    /// One line for a person watching the session: the turn, the tool, its arguments (cut short)
    /// and how it went, e.g. `[turn 1] fs-read {"path":"a.txt"}: ok (3 ms)`.
    pub fn progress_line(&self) -> String {
        let record = self.record;
        let arguments = record.tidied.as_ref().unwrap_or(&record.arguments).to_string();
        let arguments = cut(&arguments, 120);
        let how = match &record.result {
            Ok(_) => "ok".to_string(),
            Err(e) => format!("error ({})", e.kind()),
        };
        format!("[turn {}] {} {arguments}: {how} ({} ms)", self.turn, record.tool, record.elapsed.as_millis())
    }
}

fn cut(text: &str, chars: usize) -> String {
    let mut out: String = text.chars().take(chars).collect();
    if out.len() < text.len() {
        out.push_str("...");
    }
    out
}

type OnCall<'a> = Box<dyn FnMut(&CallEvent<'_>) + 'a>;

/// One agent session: a host, a model and the settings of the loop.
///
/// ```
/// use toolhost::agent::{Model, ModelReply, ModelRequest, Session, ToolCall};
/// use toolhost::{HostBuilder, HostHandle};
///
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("a.txt"), "hello\n").unwrap();
/// let handle = HostHandle::spawn(HostBuilder::new(dir.path())).unwrap();
/// // A scripted model: read a.txt, then answer with what came back.
/// let mut model = |request: &ModelRequest<'_>| -> toolhost::Result<ModelReply> {
///     Ok(match request.messages.last() {
///         Some(toolhost::agent::Message::Tool { content, .. }) => ModelReply::text(format!("it says {content}")),
///         _ => ModelReply::calls(vec![ToolCall { id: "1".into(), name: "fs-read".into(), arguments: r#"{"path":"a.txt"}"#.into() }]),
///     })
/// };
/// let outcome = Session::new(handle, &mut model).run("What does a.txt say?").unwrap();
/// assert_eq!(outcome.answer.as_deref(), Some("it says 1\thello\n"));
/// ```
pub struct Session<'a> {
    handle: HostHandle,
    model: &'a mut dyn Model,
    dialect: Dialect,
    strict: bool,
    tools_as: ToolsAs,
    max_turns: usize,
    max_calls: usize,
    max_turn_chars: usize,
    system: String,
    /// The instructions files in `system`, for the log.
    instructions: Vec<crate::agent::instructions::Included>,
    log: Option<SessionLog>,
    on_call: Option<OnCall<'a>>,
    stop: Stop,
    /// The logged conversation this session goes on from.
    resumed: Option<Resumed>,
}

impl<'a> Session<'a> {
    /// A native-dialect session on `handle`'s host with `model`, not strict, with the default
    /// turn limit and system prompt, and no log.
    pub fn new(handle: HostHandle, model: &'a mut dyn Model) -> Self {
        Session {
            handle,
            model,
            dialect: Dialect::Native,
            strict: false,
            tools_as: ToolsAs::Json,
            max_turns: DEFAULT_MAX_TURNS,
            max_calls: DEFAULT_MAX_CALLS_PER_REPLY,
            max_turn_chars: DEFAULT_MAX_TURN_RESULT_CHARS,
            system: DEFAULT_SYSTEM_PROMPT.to_string(),
            instructions: Vec::new(),
            log: None,
            on_call: None,
            stop: Stop::new(),
            resumed: None,
        }
    }

    /// Goes on from a logged conversation (see [`crate::agent::resume`]): the task of
    /// [`Session::run`] follows it, in its dialect and strict mode, and turns go on counting from
    /// its last. A log opened with [`SessionLog::append`] on the same file gets only what is new;
    /// any other log gets the whole conversation in its first request, so it stands alone.
    pub fn resume(mut self, resumed: Resumed) -> Self {
        self.dialect = resumed.dialect;
        self.strict = resumed.strict;
        self.tools_as = resumed.tools_as;
        self.resumed = Some(resumed);
        self
    }

    /// How tools are spoken: native tool calls, or P-format text.
    pub fn dialect(mut self, dialect: Dialect) -> Self {
        self.dialect = dialect;
        self
    }

    /// Which tools the model is offered: each as a JSON tool (the default), the program tool alone
    /// with the catalogue of the others as procedures (code mode), or both. A call of a tool that
    /// was not offered is refused as an unknown tool.
    pub fn tools_as(mut self, tools_as: ToolsAs) -> Self {
        self.tools_as = tools_as;
        self
    }

    /// Sends the strict rewrite of each tool and drops the top-level nulls of its calls (native
    /// only: P-format sends no schemas).
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Sends at most `turns` requests (at least 1).
    pub fn max_turns(mut self, turns: usize) -> Self {
        self.max_turns = turns.max(1);
        self
    }

    /// Runs at most `calls` calls of one reply (at least 1); the rest are answered with a `denied`
    /// result saying so.
    pub fn max_calls_per_reply(mut self, calls: usize) -> Self {
        self.max_calls = calls.max(1);
        self
    }

    /// Lets one reply's results add at most `chars` characters to the conversation together (at
    /// least 1,000): the result that reaches the bound is cut with a note, the calls after it are not
    /// run.
    pub fn max_turn_result_chars(mut self, chars: usize) -> Self {
        self.max_turn_chars = chars.max(1000);
        self
    }

    /// The system prompt (P-format adds its instructions and catalogue after it).
    pub fn system_prompt(mut self, text: impl Into<String>) -> Self {
        self.system = text.into();
        self
    }

    /// Puts project instructions (see [`instructions::gather`](crate::agent::instructions::gather))
    /// after the system prompt; the session log notes which files they came from.
    pub fn instructions(mut self, found: &crate::agent::instructions::Instructions) -> Self {
        if !found.text.is_empty() {
            self.system = format!("{}\n\n{}", self.system.trim_end(), found.text);
            self.instructions.extend(found.files.iter().cloned());
        }
        self
    }

    /// Writes the session log there as the session goes.
    pub fn log(mut self, log: SessionLog) -> Self {
        self.log = Some(log);
        self
    }

    /// Called after each call, with its record (the command line prints a progress line).
    pub fn on_call(mut self, f: impl FnMut(&CallEvent<'_>) + 'a) -> Self {
        self.on_call = Some(Box::new(f));
        self
    }

    /// Stops the session when `stop` is set (see the module docs).
    pub fn stop_on(mut self, stop: Stop) -> Self {
        self.stop = stop;
        self
    }

    /// Runs the session on `task`.
    ///
    /// # Errors
    /// The model failed (kind `agent_error` for the HTTP client), the session log could not be
    /// written, or the host thread had stopped before the session began. Tool calls never end a
    /// session: their errors go to the model.
    pub fn run(mut self, task: &str) -> Result<Outcome> {
        self.write(&Entry::Session {
            version: LOG_VERSION,
            toolhost: env!("CARGO_PKG_VERSION").to_string(),
            dialect: self.dialect,
            strict: self.strict,
            tools: self.tools_as,
            max_turns: self.max_turns,
            model: self.model.describe(),
            task: task.to_string(),
            // A resumed conversation keeps the system prompt it was logged with.
            instructions: if self.resumed.is_some() { Vec::new() } else { self.instructions.clone() },
            resumes: self.resumed.as_ref().map(|r| r.from.clone()),
        })?;
        let format = self.model.catalogue_format(self.strict);
        let speaker = match Speaker::new(&self.handle, self.dialect, format, self.tools_as) {
            Ok(speaker) => speaker,
            Err(e) => return Err(self.fail(0, e)),
        };
        let concurrent: HashSet<String> = match self.handle.concurrent_tools() {
            Ok(names) => names.into_iter().collect(),
            Err(e) => return Err(self.fail(0, e)),
        };
        let (mut run, before) = match self.resumed.take() {
            Some(resumed) => {
                let appends = self.log.as_ref().is_some_and(SessionLog::appends);
                let before = resumed.turns;
                (go_on(&speaker, resumed, task, appends), before)
            }
            None => {
                let messages =
                    vec![Message::System(speaker.system_prompt(&self.system)), Message::User(task.to_string())];
                (Run { messages, calls: Vec::new(), logged: 0 }, 0)
            }
        };
        // `sent` counts this session's requests; `turn` numbers them in the log, after the turns
        // of the conversation it goes on from.
        for sent in 1..=self.max_turns {
            let turn = before + sent;
            if self.stop.is_stopped() {
                return self.finish(End::Interrupted, sent - 1, None, run);
            }
            let reply = match self.ask(turn, &speaker, &mut run) {
                Ok(reply) => reply,
                Err(_) if self.stop.is_stopped() => return self.finish(End::Interrupted, sent, None, run),
                Err(e) => return Err(self.fail(sent, e)),
            };
            let attempts = speaker.attempts(turn, &reply);
            run.messages.push(speaker.assistant_message(&reply, &attempts));
            if attempts.is_empty() {
                let answer = reply.text.unwrap_or_default();
                return self.finish(End::Answered, sent, Some(answer), run);
            }
            let made = attempts.len();
            let mut results: Vec<Answered> = Vec::new();
            let mut spent = 0usize;
            let mut groups = self.side_by_side(&attempts, &concurrent).into_iter().peekable();
            let mut ran_early: Vec<Option<CallRecord>> = Vec::new();
            for (i, attempt) in attempts.into_iter().enumerate() {
                if self.stop.is_stopped() {
                    break;
                }
                // A run of read-only calls starts here: they run together now, after every call
                // before them ended.
                if let Some((_, calls)) = groups.next_if(|(start, _)| *start == i) {
                    if spent < self.max_turn_chars {
                        ran_early = vec![None; i];
                        ran_early.extend(self.run_side_by_side(calls).into_iter().map(Some));
                    }
                }
                let early = ran_early.get_mut(i).and_then(Option::take);
                let (attempt, runs) = if i >= self.max_calls {
                    (not_run(attempt, &over_cap(made, self.max_calls)), false)
                } else if spent >= self.max_turn_chars {
                    // A read-only call that already ran beside others is answered as not run too:
                    // it changed nothing, and its result does not fit.
                    (not_run(attempt, &over_budget(self.max_turn_chars)), false)
                } else {
                    (attempt, true)
                };
                let early = if runs { early } else { None };
                let mut answered = self.attempt(turn, i + 1, attempt, early, &mut run)?;
                if runs {
                    answered.text = fit(answered.text, self.max_turn_chars - spent, self.max_turn_chars);
                    spent += answered.text.chars().count();
                }
                results.push(answered);
            }
            if self.stop.is_stopped() {
                return self.finish(End::Interrupted, sent, None, run);
            }
            run.messages.extend(speaker.result_messages(&results));
        }
        let turns = self.max_turns;
        self.finish(End::MaxTurns, turns, None, run)
    }

    /// Sends turn `turn`'s request, logging it and the reply.
    fn ask(&mut self, turn: usize, speaker: &Speaker, run: &mut Run) -> Result<ModelReply> {
        self.write(&Entry::Request {
            turn,
            tools: speaker.tools.clone(),
            messages_before: run.logged,
            messages: run.messages[run.logged..].iter().map(Message::to_json).collect(),
        })?;
        run.logged = run.messages.len();
        let reply = self.model.send(&ModelRequest { messages: &run.messages, tools: speaker.tools.as_ref() })?;
        self.write(&Entry::Reply {
            turn,
            text: reply.text.clone(),
            tool_calls: reply.tool_calls.iter().map(|c| c.to_json()).collect(),
            finish_reason: reply.finish_reason.clone(),
            usage: reply.usage,
        })?;
        Ok(reply)
    }

    /// The runs of two or more consecutive calls of a reply (within the cap on calls) that may
    /// run side by side, each by the place of its first call: the calls of `concurrent` tools.
    fn side_by_side(&self, attempts: &[Attempt], concurrent: &HashSet<String>) -> Vec<(usize, Vec<CallRequest>)> {
        let beside = |a: &Attempt| match a {
            Attempt::Run { request, .. } if concurrent.contains(&request.tool) => Some(request.clone()),
            _ => None,
        };
        let capped = &attempts[..attempts.len().min(self.max_calls)];
        let mut groups = Vec::new();
        let mut start = 0;
        while start < capped.len() {
            let calls: Vec<CallRequest> = capped[start..].iter().map_while(beside).collect();
            let taken = calls.len();
            if taken >= 2 {
                groups.push((start, calls));
            }
            start += taken.max(1);
        }
        groups
    }

    /// Runs `calls` on the host's lanes at once, giving up on them after the grace once the
    /// session is stopped; their records in the calls' order.
    fn run_side_by_side(&self, calls: Vec<CallRequest>) -> Vec<CallRecord> {
        let started = Instant::now();
        let (worker, interrupter, sent) = (self.handle.clone(), self.handle.clone(), calls.clone());
        stop::wait_or_stop(&self.stop, CALL_GRACE, move || interrupter.interrupt(), move || worker.run_calls(sent))
            .unwrap_or_else(|| calls.iter().map(|c| abandoned_record(c, started.elapsed())).collect())
    }

    /// Runs (or records the refusal of) one call, logs it and reports it; `early` is its record
    /// when it already ran beside others.
    fn attempt(
        &mut self,
        turn: usize,
        index: usize,
        attempt: Attempt,
        early: Option<CallRecord>,
        run: &mut Run,
    ) -> Result<Answered> {
        let (id, request, record) = match attempt {
            Attempt::Run { id, request } => {
                let record = early.unwrap_or_else(|| self.call(&request));
                (id, Some(request), record)
            }
            Attempt::Refused { id, tool, error } => (id, None, refused_record(tool, error)),
        };
        self.write(&Entry::Call {
            turn,
            index,
            id: id.clone(),
            request,
            record: Box::new(record.clone()),
            interrupted: self.stop.is_stopped(),
        })?;
        if let Some(on_call) = self.on_call.as_mut() {
            on_call(&CallEvent { turn, index, record: &record });
        }
        let answered = Answered { id, tool: record.tool.clone(), text: record.model_text() };
        run.calls.push(record);
        Ok(answered)
    }

    /// Runs a call on the host, giving up on it after the grace once the session is stopped.
    fn call(&self, request: &CallRequest) -> CallRecord {
        let started = Instant::now();
        let (worker, interrupter) = (self.handle.clone(), self.handle.clone());
        let sent = request.clone();
        stop::wait_or_stop(&self.stop, CALL_GRACE, move || interrupter.interrupt(), move || worker.run_call(sent))
            .unwrap_or_else(|| abandoned_record(request, started.elapsed()))
    }

    fn finish(mut self, end: End, turns: usize, answer: Option<String>, run: Run) -> Result<Outcome> {
        self.write(&Entry::End { reason: end.as_str().into(), turns, answer: answer.clone(), error: None })?;
        Ok(Outcome { end, answer, turns, calls: run.calls, messages: run.messages })
    }

    /// Logs an error that ends the session (when the log can still be written) and returns it.
    fn fail(&mut self, turns: usize, error: Error) -> Error {
        let _ = self.write(&Entry::End { reason: "error".into(), turns, answer: None, error: Some(error.clone()) });
        error
    }

    fn write(&mut self, entry: &Entry) -> Result<()> {
        match self.log.as_mut() {
            Some(log) => log.write(entry),
            None => Ok(()),
        }
    }
}

/// `attempt` refused before it reaches the host, with `why`.
fn not_run(attempt: Attempt, why: &str) -> Attempt {
    let (id, tool) = match attempt {
        Attempt::Run { id, request } => (id, request.tool),
        Attempt::Refused { id, tool, .. } => (id, tool),
    };
    let error = Error::new(ErrorKind::Denied, format!("{tool}: not run: {why}")).with_tool(&tool);
    Attempt::Refused { id, tool, error }
}

fn over_cap(made: usize, cap: usize) -> String {
    format!(
        "this reply made {made} tool calls and one reply may make at most {cap} ([provider] \
         max_calls_per_reply); only the first {cap} ran: make the others in your next reply"
    )
}

fn over_budget(budget: usize) -> String {
    format!(
        "the results of this reply's earlier calls already hold {budget} characters, the most one \
         reply's results may add to the conversation; make this call again in your next reply"
    )
}

/// `text` cut to at most `room` characters (of a turn's `budget`) with a note saying so; whole
/// when it fits.
fn fit(text: String, room: usize, budget: usize) -> String {
    if text.chars().count() <= room {
        return text;
    }
    let note = format!(
        "\n[... cut: one reply's results may add at most {budget} characters to the conversation, and \
         this result reached that; later calls of this reply are not run]"
    );
    let keep = room.saturating_sub(note.chars().count());
    let mut out: String = text.chars().take(keep).collect();
    out.push_str(&note);
    out
}

/// The conversation a resumed session starts from: the logged messages, the last reply and its
/// results when the log's requests did not carry them yet, then `task`. `appends`: the session logs
/// to the file the conversation came from, which holds the logged messages already.
fn go_on(speaker: &Speaker, resumed: Resumed, task: &str, appends: bool) -> Run {
    let logged = if appends { resumed.messages.len() } else { 0 };
    let mut messages = resumed.messages;
    if let Some(reply) = &resumed.last_reply {
        let attempts = speaker.attempts(resumed.turns, reply);
        messages.push(speaker.assistant_message(reply, &attempts));
        let results: Vec<Answered> = attempts
            .iter()
            .enumerate()
            .map(|(i, attempt)| match resumed.last_results.iter().find(|(index, ..)| *index == i + 1) {
                Some((_, id, tool, text)) => Answered { id: id.clone(), tool: tool.clone(), text: text.clone() },
                None => {
                    let tool = match attempt {
                        Attempt::Run { request, .. } => request.tool.clone(),
                        Attempt::Refused { tool, .. } => tool.clone(),
                    };
                    Answered { id: attempt.id().to_string(), text: not_run_text(&tool), tool }
                }
            })
            .collect();
        messages.extend(speaker.result_messages(&results));
    }
    messages.push(Message::User(task.to_string()));
    Run { messages, calls: Vec::new(), logged }
}

/// The conversation as it grows.
struct Run {
    messages: Vec<Message>,
    calls: Vec<CallRecord>,
    /// How many messages earlier requests' log lines already hold.
    logged: usize,
}

/// The arguments of a request as a record keeps them: parsed, or the text itself.
fn received(arguments: &str) -> Value {
    serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_string()))
}

/// The record of a P-format tag that could not be read: its refusal is the result.
fn refused_record(tool: String, error: Error) -> CallRecord {
    CallRecord {
        tool,
        arguments: Value::Null,
        tidied: None,
        notes: Vec::new(),
        repairs: Vec::new(),
        decision: None,
        result: Err(error),
        text: None,
        elapsed: Duration::ZERO,
        nested: None,
    }
}

/// The record of a call the session stopped waiting for.
fn abandoned_record(request: &CallRequest, elapsed: Duration) -> CallRecord {
    CallRecord {
        tool: request.tool.clone(),
        arguments: received(&request.arguments),
        tidied: None,
        notes: Vec::new(),
        repairs: Vec::new(),
        decision: None,
        result: Err(Error::new(
            ErrorKind::Agent,
            format!(
                "{}: the session was stopped while this call ran and did not wait for it to end \
                 (a command it started may still be running)",
                request.tool
            ),
        )),
        text: None,
        elapsed,
        nested: None,
    }
}
