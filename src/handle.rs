//! The host on its own thread (design section 18): a [`HostHandle`] is `Send + Sync + Clone`, and
//! carries calls, catalogues and evaluations to the one thread that owns the `!Send` engine, where
//! the host was built. Calls run one at a time, in the order they arrive. What crosses is plain data
//! ([`Request`] and [`Reply`], serializable), so the same conversation can later run over a pipe to
//! a worker process.

use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use serde_json::Value;

use crate::call::{CallRecord, CallRequest};
use crate::error::{Error, ErrorKind, Result};
use crate::host::{HostBuilder, Interrupter};
pub use crate::host_request::{answer, Reply, Request};
use crate::schema::Format;
use crate::spec::SpecSet;
use crate::worker::WorkerHandle;

type Envelope = (Request, mpsc::Sender<Reply>);

/// A `Send + Sync + Clone` way to a host that lives on its own thread.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("a.txt"), "one\ntwo\n").unwrap();
/// let handle = toolhost::HostHandle::spawn(toolhost::HostBuilder::new(dir.path())).unwrap();
/// let worker = handle.clone();
/// let record = std::thread::spawn(move || worker.call("fs-read", r#"{"path": "a.txt"}"#)).join().unwrap();
/// assert_eq!(record.model_text(), "1\tone\n2\ttwo\n");
/// ```
#[derive(Clone)]
pub struct HostHandle {
    host: Backend,
    /// Stops what the host runs: in this process, or in a worker process.
    interrupter: Interrupt,
}

/// Where requests go.
#[derive(Clone)]
enum Backend {
    /// The host's own thread (the engine is not `Send`).
    Thread(mpsc::Sender<Envelope>),
    /// A worker process, spoken to from the requesting thread, one request at a time.
    Worker(Arc<Mutex<WorkerHandle>>),
}

#[derive(Clone)]
enum Interrupt {
    Here(Interrupter),
    Worker(crate::worker::WorkerInterrupter),
}

/// The host thread's stack: as large as a main thread's, for the interpreter's recursion.
const HOST_STACK_BYTES: usize = 8 * 1024 * 1024;

impl HostHandle {
    /// Builds the host on a new thread and returns a handle to it. The thread ends when the last
    /// handle is dropped.
    ///
    /// # Errors
    /// The host failed to build (see [`HostBuilder::build`]), or the thread could not start.
    pub fn spawn(builder: HostBuilder) -> Result<HostHandle> {
        let (ready_tx, ready_rx) = mpsc::channel::<Result<Interrupter>>();
        let (sender, receiver) = mpsc::channel::<Envelope>();
        thread::Builder::new()
            .name("toolhost-host".into())
            .stack_size(HOST_STACK_BYTES)
            .spawn(move || {
                let mut host = match builder.build() {
                    Ok(host) => host,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                if ready_tx.send(Ok(host.interrupter())).is_err() {
                    return;
                }
                for (request, reply) in receiver {
                    let _ = reply.send(answer(&mut host, request));
                }
            })
            .map_err(|e| Error::tool_failed(format!("cannot start the host thread: {e}")))?;
        let interrupter = ready_rx.recv().map_err(|_| stopped())??;
        Ok(HostHandle { host: Backend::Thread(sender), interrupter: Interrupt::Here(interrupter) })
    }

    /// The same handle over a worker process ([`crate::worker`]): requests go to a `toolhost
    /// worker` started by `spec`, under its limits; a worker that dies or overruns ends that call
    /// with `crashed` or `timeout` and a fresh one takes the next. [`HostHandle::interrupt`] sends
    /// the worker SIGINT, which interrupts its running call.
    ///
    /// # Errors
    /// When the first worker cannot be started.
    pub fn spawn_worker(spec: crate::worker::WorkerSpec) -> Result<HostHandle> {
        let worker = WorkerHandle::spawn(spec)?;
        let interrupter = Interrupt::Worker(worker.interrupter());
        Ok(HostHandle { host: Backend::Worker(Arc::new(Mutex::new(worker))), interrupter })
    }

    /// Sends a request and waits for its reply.
    ///
    /// # Errors
    /// [`ErrorKind::Crashed`] when the host thread has stopped; over a worker, `crashed` or
    /// `timeout` when the worker died or overran (an evaluation's reply carries these instead).
    pub fn request(&self, request: Request) -> Result<Reply> {
        match &self.host {
            Backend::Thread(sender) => {
                let (reply_tx, reply_rx) = mpsc::channel();
                sender.send((request, reply_tx)).map_err(|_| stopped())?;
                reply_rx.recv().map_err(|_| stopped())
            }
            Backend::Worker(worker) => {
                let mut worker = worker.lock().map_err(|_| stopped())?;
                match request {
                    Request::Call(call) => Ok(Reply::Call(Box::new(worker.run_call(call)))),
                    Request::LoadErrors => Ok(Reply::LoadErrors(worker.load_errors().to_vec())),
                    Request::Eval { .. } => {
                        // An evaluation's failure is its reply: the worker crashing or overrunning too.
                        Ok(worker.request(&request).unwrap_or_else(|e| Reply::Eval(Err(e))))
                    }
                    other => worker.request(&other),
                }
            }
        }
    }

    /// Runs one call; a host that has stopped answers with a `crashed` record.
    pub fn run_call(&self, call: CallRequest) -> CallRecord {
        let (tool, arguments) = (call.tool.clone(), call.arguments.clone());
        match self.request(Request::Call(call)) {
            Ok(Reply::Call(record)) => *record,
            Ok(other) => CallRecord::failed(tool, arguments, unexpected(&other)),
            Err(e) => CallRecord::failed(tool, arguments, e),
        }
    }

    /// Calls `tool` with arguments as a model sent them, as JSON text.
    pub fn call(&self, tool: &str, arguments: &str) -> CallRecord {
        self.run_call(CallRequest::new(tool, arguments))
    }

    /// The catalogue in a provider's shape.
    ///
    /// # Errors
    /// When the host thread has stopped.
    pub fn catalogue(&self, format: Format) -> Result<Value> {
        match self.request(Request::Catalogue { format })? {
            Reply::Catalogue(value) => Ok(value),
            other => Err(unexpected(&other)),
        }
    }

    /// The P-format catalogue text.
    ///
    /// # Errors
    /// When the host thread has stopped.
    pub fn pformat_catalogue(&self) -> Result<String> {
        match self.request(Request::PformatCatalogue)? {
            Reply::Text(text) => Ok(text),
            other => Err(unexpected(&other)),
        }
    }

    /// Every tool's spec.
    ///
    /// # Errors
    /// When the host thread has stopped.
    pub fn specs(&self) -> Result<SpecSet> {
        match self.request(Request::Specs)? {
            Reply::Specs(specs) => Ok(specs),
            other => Err(unexpected(&other)),
        }
    }

    /// Evaluates Scheme source and renders its value as `toolhost eval` prints it.
    ///
    /// # Errors
    /// The evaluation's error, or the host thread has stopped.
    pub fn eval(&self, source: &str, limit: Option<Duration>) -> Result<String> {
        let limit_ms = limit.map(|l| u64::try_from(l.as_millis()).unwrap_or(u64::MAX));
        match self.request(Request::Eval { source: source.to_string(), limit_ms })? {
            Reply::Eval(result) => result,
            other => Err(unexpected(&other)),
        }
    }

    /// The tool files that failed to load.
    ///
    /// # Errors
    /// When the host thread has stopped.
    pub fn load_errors(&self) -> Result<Vec<Error>> {
        match self.request(Request::LoadErrors)? {
            Reply::LoadErrors(errors) => Ok(errors),
            other => Err(unexpected(&other)),
        }
    }

    /// Loads the tool folders and files again (see [`Host::reload`]).
    ///
    /// # Errors
    /// When the host thread has stopped.
    pub fn reload(&self) -> Result<crate::host::ReloadReport> {
        match self.request(Request::Reload)? {
            Reply::Reload(report) => Ok(report),
            other => Err(unexpected(&other)),
        }
    }

    /// The folders and files tools are loaded from (see [`Host::tool_paths`]).
    ///
    /// # Errors
    /// When the host thread has stopped.
    pub fn tool_paths(&self) -> Result<Vec<std::path::PathBuf>> {
        match self.request(Request::ToolPaths)? {
            Reply::Paths(paths) => Ok(paths),
            other => Err(unexpected(&other)),
        }
    }

    /// Stops the Scheme code the host is running now (the call it is in fails); later requests run
    /// normally.
    pub fn interrupt(&self) {
        match &self.interrupter {
            Interrupt::Here(interrupter) => interrupter.interrupt(),
            Interrupt::Worker(interrupter) => interrupter.interrupt(),
        }
    }
}

fn stopped() -> Error {
    Error::new(ErrorKind::Crashed, "the host thread has stopped")
}

fn unexpected(reply: &Reply) -> Error {
    Error::tool_failed(format!("the host answered with an unexpected reply: {reply:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync + Clone>() {}

    #[test]
    fn the_handle_is_send_sync_and_clone_and_the_builder_is_send() {
        assert_send_sync::<HostHandle>();
        fn assert_send<T: Send>() {}
        assert_send::<HostBuilder>();
    }

    #[test]
    fn requests_and_replies_survive_a_trip_through_json() {
        let request = Request::Call(CallRequest::new("fs-read", r#"{"path":"a"}"#));
        let text = serde_json::to_string(&request).unwrap();
        assert_eq!(serde_json::from_str::<Request>(&text).unwrap(), request);
        let reply = Reply::Eval(Err(Error::new(ErrorKind::Script, "boom").at("x.scm", Some(3))));
        let text = serde_json::to_string(&reply).unwrap();
        assert_eq!(serde_json::from_str::<Reply>(&text).unwrap(), reply);
    }
}
