//! Replay (design section 12): the calls of a session log run again, in order, through a fresh
//! host and without a model, and every result that differs from the logged one is reported. It
//! answers "would this session go the same way today?" after a tool, a config or a file changed.
//!
//! Decisions where the design is silent:
//! - The calls run against the workspace as it is now, writes included: replay a session on the
//!   state it started from (a fresh checkout, a copy) to check it replays clean.
//! - A result is the call's outcome as a model saw it: success and the result value, or the error's
//!   kind and message. Tidy notes, the guard's decision and the time taken are not compared (a
//!   changed decision shows in the result anyway).
//! - A confirmation is answered as it was answered in the log, and by whom ([`ReplayAnswers`]), so
//!   replay needs no person; a call the log has no answer for (it was not confirmed then) is
//!   denied as if nobody were there to ask.
//! - Calls the log marks `interrupted`, and P-format tags refused before the host saw them, are
//!   skipped and counted.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::agent::log::Entry;
use crate::call::{CallRecord, CallRequest};
use crate::guard::{Answer, Confirmer, Decision, NOBODY};
use crate::handle::HostHandle;

/// The confirmation answer of the call being replayed, for the host's confirmer.
#[derive(Debug, Clone, Default)]
pub struct ReplayAnswers(Arc<Mutex<std::collections::VecDeque<Answer>>>);

impl ReplayAnswers {
    /// No answer yet.
    pub fn new() -> Self {
        ReplayAnswers::default()
    }

    /// The confirmer to build the replay host with: it gives the logged answers, and who gave
    /// them, in the order they were asked (a program's calls may ask several), so the call's result
    /// reads as it did; past them (the log has no confirmation for the call) it answers as nobody
    /// does: no.
    pub fn confirmer(&self) -> Confirmer {
        let answers = self.clone();
        Arc::new(move |_| answers.next().unwrap_or_else(|| Answer { yes: false, by: NOBODY.into() }))
    }

    fn set(&self, answers: Vec<Answer>) {
        if let Ok(mut queue) = self.0.lock() {
            *queue = answers.into();
        }
    }

    fn next(&self) -> Option<Answer> {
        self.0.lock().ok().and_then(|mut queue| queue.pop_front())
    }
}

/// A call whose result is not what the log says.
#[derive(Debug, Clone)]
pub struct Difference {
    /// The turn whose reply made the call.
    pub turn: usize,
    /// Its place in the reply (1 for the first).
    pub index: usize,
    /// The call as it was run.
    pub request: CallRequest,
    /// What the log says happened.
    pub logged: CallRecord,
    /// What happens now.
    pub now: CallRecord,
}

impl Difference {
    /// The difference for a person: which call, then both results, one line each.
    pub fn report(&self) -> String {
        format!(
            "turn {}, call {}: {} {}\n  logged: {}\n  now:    {}",
            self.turn,
            self.index,
            self.request.tool,
            shown(&self.request.arguments),
            shown(&outcome(&self.logged).to_string()),
            shown(&outcome(&self.now).to_string()),
        )
    }
}

/// Longest result text a difference report shows, per side.
const SHOWN_CHARS: usize = 2000;

fn shown(text: &str) -> String {
    let total = text.chars().count();
    if total <= SHOWN_CHARS {
        return text.to_string();
    }
    let kept: String = text.chars().take(SHOWN_CHARS).collect();
    format!("{kept} [... {} more characters]", total - SHOWN_CHARS)
}

/// The confirmations a call's record logs, in the order they were asked: its own, then those of
/// the calls a program made.
fn logged_answers(record: &CallRecord) -> Vec<Answer> {
    let own = std::iter::once(record);
    let nested = record.nested.iter().flatten();
    own.chain(nested)
        .filter_map(|r| match &r.decision {
            Some(Decision::Confirm { answer, by, .. }) => Some(Answer { yes: *answer, by: by.clone() }),
            _ => None,
        })
        .collect()
}

/// What replay compares: `{"ok":true,"result":R}` or `{"ok":false,"error":{"kind":K,"message":M}}`.
pub fn outcome(record: &CallRecord) -> Value {
    let mut json = record.to_json();
    if let Some(object) = json.as_object_mut() {
        object.remove("notes");
    }
    json
}

/// What a replay found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Calls run again.
    pub replayed: usize,
    /// Calls skipped (interrupted, or refused before the host).
    pub skipped: usize,
    /// The calls whose result differs, in log order.
    pub differences: Vec<Difference>,
}

impl Report {
    /// Whether every replayed call gave the logged result.
    pub fn is_clean(&self) -> bool {
        self.differences.is_empty()
    }
}

/// Runs the calls of `entries` again through `handle`'s host, answering confirmations through
/// `answers` (give the host [`ReplayAnswers::confirmer`]).
///
/// ```
/// use toolhost::agent::{log::Entry, replay, ReplayAnswers};
/// use toolhost::{CallRequest, HostBuilder, HostHandle};
///
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("a.txt"), "one\n").unwrap();
/// let answers = ReplayAnswers::new();
/// let handle = HostHandle::spawn(HostBuilder::new(dir.path()).confirmer(answers.confirmer())).unwrap();
/// let request = CallRequest::new("fs-read", r#"{"path":"a.txt"}"#);
/// let record = handle.run_call(request.clone());
/// let record = Box::new(record);
/// let log = vec![Entry::Call { turn: 1, index: 1, id: "c1".into(), request: Some(request), record, interrupted: false }];
/// assert!(replay(&log, &handle, &answers).is_clean());
/// std::fs::write(dir.path().join("a.txt"), "two\n").unwrap();
/// let report = replay(&log, &handle, &answers);
/// assert_eq!(report.differences.len(), 1);
/// assert!(report.differences[0].report().contains(r#""result":"1\ttwo\n""#));
/// ```
pub fn replay(entries: &[Entry], handle: &HostHandle, answers: &ReplayAnswers) -> Report {
    let mut report = Report::default();
    for entry in entries {
        let Entry::Call { turn, index, request, record, interrupted, .. } = entry else { continue };
        let Some(request) = request.as_ref().filter(|_| !interrupted) else {
            report.skipped += 1;
            continue;
        };
        answers.set(logged_answers(record));
        let now = handle.run_call(request.clone());
        answers.set(Vec::new());
        report.replayed += 1;
        if outcome(&now) != outcome(record) {
            report.differences.push(Difference {
                turn: *turn,
                index: *index,
                request: request.clone(),
                logged: (**record).clone(),
                now,
            });
        }
    }
    report
}
