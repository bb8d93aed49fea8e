//! What a [`HostHandle`](crate::HostHandle) asks of its host and what the host answers, as plain
//! serializable data: the same conversation runs with a host on a thread and over the pipe to a
//! worker process.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;

use crate::call::{CallRecord, CallRequest};
use crate::error::{Error, Result};
use crate::host::{render_values, Host};
use crate::pformat;
use crate::schema::{self, Format};
use crate::spec::SpecSet;

/// What a handle asks of its host.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "request", rename_all = "kebab-case")]
pub enum Request {
    /// Run one call through the call path.
    Call(CallRequest),
    /// The tool catalogue in a provider's shape (a JSON array).
    Catalogue {
        /// The shape.
        format: Format,
    },
    /// The P-format catalogue text for a prompt.
    PformatCatalogue,
    /// The specs of every tool.
    Specs,
    /// Evaluate Scheme source and render its values as `toolhost eval` prints them.
    Eval {
        /// The source.
        source: String,
        /// Stop it after this many milliseconds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit_ms: Option<u64>,
    },
    /// The tool files that failed to load.
    LoadErrors,
    /// Load the tool folders and files again ([`Host::reload`]).
    Reload,
    /// The folders and files tools are loaded from ([`Host::tool_paths`]).
    ToolPaths,
    /// The tools whose calls may run beside others ([`Host::concurrent_tools`]).
    ConcurrentTools,
    /// How many times a tool was registered or removed ([`Host::tool_changes`]).
    ToolChanges,
}

/// A host's answer to a [`Request`], one for one.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "reply", content = "value", rename_all = "kebab-case")]
pub enum Reply {
    /// The record of a call.
    Call(Box<CallRecord>),
    /// A catalogue.
    Catalogue(Value),
    /// Text (the P-format catalogue).
    Text(String),
    /// Every tool's spec.
    Specs(SpecSet),
    /// An evaluation's rendered value, or its error.
    Eval(Result<String>),
    /// Load errors.
    LoadErrors(Vec<Error>),
    /// What a reload changed.
    Reload(crate::host::ReloadReport),
    /// Folders and files.
    Paths(Vec<std::path::PathBuf>),
    /// Tool names.
    Names(Vec<String>),
    /// A count.
    Count(u64),
    /// The request was cancelled before it began, and did not run.
    NotRun,
}

/// Answers one request with the host. An interrupt that arrived between requests is forgotten: an
/// interrupt stops what runs when it comes.
pub fn answer(host: &mut Host, request: Request) -> Reply {
    host.clear_interrupt();
    match request {
        Request::Call(call) => Reply::Call(Box::new(host.run_call(&call))),
        Request::Catalogue { format } => {
            let specs = host.specs();
            Reply::Catalogue(schema::catalogue(specs.iter().map(|s| s.as_ref()), format))
        }
        Request::PformatCatalogue => Reply::Text(pformat::catalogue(&host.specs())),
        Request::Specs => Reply::Specs(host.specs()),
        Request::Eval { source, limit_ms } => {
            let limit = limit_ms.map(Duration::from_millis);
            Reply::Eval(host.eval_all(&source, limit).map(|values| render_values(&values)))
        }
        Request::LoadErrors => Reply::LoadErrors(host.load_errors().to_vec()),
        Request::Reload => Reply::Reload(host.reload()),
        Request::ToolPaths => Reply::Paths(host.tool_paths()),
        Request::ConcurrentTools => Reply::Names(host.concurrent_tools()),
        Request::ToolChanges => Reply::Count(host.tool_changes()),
    }
}

/// Which numbered request a host runs, and which ones not yet begun were cancelled. A sender that
/// hands a host several calls before the first one's reply numbers them in the order sent (the
/// first is 1), and a cancellation names the one it means: it stops that call if it runs, has it
/// answered without running if it has not begun, and can never stop the next one, as an interrupt
/// sent a moment late would. Shared between whoever answers the requests and whoever cancels.
#[derive(Clone, Default)]
pub(crate) struct Cancels(Arc<Mutex<Cancelled>>);

#[derive(Default)]
struct Cancelled {
    running: Option<u64>,
    /// The number of the last request begun.
    begun: u64,
    /// Requests cancelled before they began.
    before_begun: BTreeSet<u64>,
}

/// At most this many cancellations of requests not yet begun are kept (a sender cancels only
/// requests it sent, and has at most a few dozen out).
const MOST_CANCELLED_AHEAD: usize = 4096;

impl Cancels {
    fn lock(&self) -> MutexGuard<'_, Cancelled> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Cancels request `number`: `interrupt` stops it if it runs; if it has not begun it will not
    /// run; if it was answered already, nothing happens. A stop that comes just before the request's
    /// code begins may be forgotten (the host forgets interrupts between requests): ask again
    /// until its answer has come.
    pub(crate) fn cancel(&self, number: u64, interrupt: impl FnOnce()) {
        let mut cancelled = self.lock();
        if cancelled.running == Some(number) {
            interrupt();
        } else if number > cancelled.begun && cancelled.before_begun.len() < MOST_CANCELLED_AHEAD {
            cancelled.before_begun.insert(number);
        }
    }

    /// Request `number` begins: false when it was cancelled before, and must not run (answer it
    /// with [`Reply::NotRun`]).
    pub(crate) fn begin(&self, number: u64) -> bool {
        let mut cancelled = self.lock();
        cancelled.begun = number;
        if cancelled.before_begun.remove(&number) {
            return false;
        }
        cancelled.running = Some(number);
        true
    }

    /// The running request has been answered.
    pub(crate) fn end(&self) {
        self.lock().running = None;
    }
}

/// What a call cancelled before it began fails with.
pub(crate) fn not_run_error() -> Error {
    Error::tool_failed("the call was cancelled before it began")
}
