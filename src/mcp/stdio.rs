//! `toolhost mcp`'s standard input and output in front of the SDK's service: a
//! [`Transport`] of its own that reads the input itself (every bad line answered, see
//! [`super::wire`]), refuses a request id already in flight, hands the SDK `tools/call`s in arrival
//! order (one at a time, or as many as the host takes at once, which it then runs in that order),
//! drops a queued call that is cancelled, stops reading while
//! [`MAX_UNANSWERED`] requests wait for their replies to be written (so a client that stops reading
//! holds up the server, not its memory), and on closed input cancels what runs before the server
//! ends.
//!
//! The SDK keeps what it is good at: `initialize`, dispatch to the handler, the peer for
//! notifications, and the cancellation token of each request (a reply to a cancelled request is
//! never sent).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use rmcp::model::{ClientJsonRpcMessage, ErrorCode, GetExtensions, JsonRpcMessage, RequestId, ServerJsonRpcMessage};
use rmcp::service::{Peer, RoleServer, ServiceExt};
use rmcp::transport::Transport;
use rmcp::ServerHandler;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot, Notify, OwnedSemaphorePermit, Semaphore};

use super::wire::{self, Inbound, Line, LineReader, MAX_MESSAGE_BYTES};
use crate::error::{Error, Result};

/// Requests read and not yet answered (their replies written) before the server stops reading.
pub const MAX_UNANSWERED: usize = 64;

/// The bytes of requests read and not yet answered, in KiB: 64 huge calls cannot add up.
const MAX_UNANSWERED_KIB: u32 = (2 * MAX_MESSAGE_BYTES / 1024) as u32;

/// How long, once the input closed, a cancelled call's host work has to stop by itself before its
/// host is ended outright (a worker process is killed, and what it started with it; a host in this
/// process cannot be, and is only waited for this long).
const ORDERLY_STOP: Duration = Duration::from_millis(250);

/// What an input line holds of the reader's bounds, released when its reply is written.
#[derive(Default)]
struct Permits(Vec<OwnedSemaphorePermit>);

/// A line for the client.
struct Outgoing {
    line: Vec<u8>,
    _permits: Permits,
    written: Option<oneshot::Sender<()>>,
}

struct State {
    /// The requests read and not yet answered, with what each holds of the reader's bounds.
    in_flight: HashMap<RequestId, Permits>,
    queue: VecDeque<(RequestId, ClientJsonRpcMessage)>,
    /// The calls the SDK is running, at most [`State::window`]: handed to the host, which runs
    /// them one at a time in that order and cancels one by its number (never the next). The next
    /// starts as soon as one's host work has ended (cancelled or not), so the host has the next
    /// calls at hand while the last one's reply is still being written.
    running: Vec<RequestId>,
    window: usize,
    /// The turn of each call given to the SDK, in arrival order: its handler hands it to the host
    /// in this order ([`CallTurn::wait_to_submit`]).
    next_turn: u64,
    /// The turn whose call is handed to the host next, and the later turns that will hand none.
    submit_turn: u64,
    passed: BTreeSet<u64>,
    to_sdk: Option<mpsc::UnboundedSender<(ClientJsonRpcMessage, Permits)>>,
}

impl State {
    /// Hands `message` to the SDK; gives it back when the SDK has gone (to be dropped by the caller
    /// once the state is unlocked: a call's [`CallTurn`] locks it as it drops).
    #[must_use]
    fn forward(&mut self, message: ClientJsonRpcMessage, permits: Permits) -> Option<ClientJsonRpcMessage> {
        let sdk = self.to_sdk.as_ref()?;
        sdk.send((message, permits)).err().map(|e| e.0 .0)
    }
}

/// The bookkeeping between the input, the SDK and the output.
struct Exchange {
    state: Mutex<State>,
    output: mpsc::UnboundedSender<Outgoing>,
    idle: Notify,
    /// The turn to hand a call to the host moved on.
    submit_turns: Notify,
}

/// A `tools/call`'s turn, carried to the handler in the request's extensions: the handler hands
/// its call to the host in its turn, and keeps it until the host has finished the call.
pub struct CallTurn {
    exchange: Weak<Exchange>,
    id: RequestId,
    turn: u64,
    submitted: std::sync::atomic::AtomicBool,
}

impl CallTurn {
    /// Waits until the calls that came before this one were handed to the host (or never will be),
    /// so the host gets them in arrival order however the SDK's tasks are run.
    pub async fn wait_to_submit(&self) {
        let Some(exchange) = self.exchange.upgrade() else { return };
        loop {
            let moved = exchange.submit_turns.notified();
            if exchange.lock().submit_turn >= self.turn {
                return;
            }
            moved.await;
        }
    }

    /// This call was handed to the host: the next may be.
    pub fn submitted(&self) {
        if !self.submitted.swap(true, std::sync::atomic::Ordering::SeqCst) {
            if let Some(exchange) = self.exchange.upgrade() {
                exchange.pass_turn(self.turn);
            }
        }
    }
}

impl Drop for CallTurn {
    fn drop(&mut self) {
        self.submitted();
        if let Some(exchange) = self.exchange.upgrade() {
            exchange.work_done(&self.id);
        }
    }
}

impl Exchange {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues `message` for the output; the receiver fires once it is written.
    fn write(&self, message: &ServerJsonRpcMessage, permits: Permits) -> oneshot::Receiver<()> {
        let (written, done) = oneshot::channel();
        match serde_json::to_vec(message) {
            Ok(mut line) => {
                line.push(b'\n');
                let _ = self.output.send(Outgoing { line, _permits: permits, written: Some(written) });
            }
            Err(e) => eprintln!("toolhost: a reply could not be encoded and was not sent: {e}"),
        }
        done
    }

    fn accept(self: &Arc<Self>, id: RequestId, message: ClientJsonRpcMessage, is_call: bool, permits: Permits) {
        let mut unsent = None;
        let mut state = self.lock();
        // A cancelled call keeps its id until its host work has ended: the SDK still knows the id
        // until then, and would take the old call's end for the new one's.
        if state.in_flight.contains_key(&id) || state.running.contains(&id) {
            drop(state);
            let refusal = wire::error(
                Some(id.clone()),
                ErrorCode::INVALID_REQUEST,
                format!("Invalid request: request id {id} is still in flight; give each request an id of its own"),
            );
            self.write(&refusal, permits);
            return;
        }
        state.in_flight.insert(id.clone(), permits);
        if !is_call {
            unsent = state.forward(message, Permits::default());
        } else if state.running.len() < state.window && state.queue.is_empty() {
            unsent = self.start(&mut state, id, message);
        } else {
            state.queue.push_back((id, message));
        }
        drop(state);
        drop(unsent);
    }

    #[must_use]
    fn start(
        self: &Arc<Self>,
        state: &mut State,
        id: RequestId,
        mut message: ClientJsonRpcMessage,
    ) -> Option<ClientJsonRpcMessage> {
        let turn = state.next_turn;
        state.next_turn += 1;
        if let JsonRpcMessage::Request(request) = &mut message {
            let submitted = std::sync::atomic::AtomicBool::new(false);
            let turn = CallTurn { exchange: Arc::downgrade(self), id: id.clone(), turn, submitted };
            request.request.extensions_mut().insert(Arc::new(turn));
        }
        state.running.push(id);
        state.forward(message, Permits::default())
    }

    /// Call `turn` was handed to the host, or never will be: the turn moves past it and the turns
    /// passed already.
    fn pass_turn(&self, turn: u64) {
        let mut guard = self.lock();
        let state = &mut *guard;
        if turn != state.submit_turn {
            state.passed.insert(turn);
            return;
        }
        state.submit_turn += 1;
        while state.passed.remove(&state.submit_turn) {
            state.submit_turn += 1;
        }
        drop(guard);
        self.submit_turns.notify_waiters();
    }

    /// A running call's host work has ended: the next call starts.
    fn work_done(self: &Arc<Self>, id: &RequestId) {
        let mut unsent = None;
        let mut state = self.lock();
        let Some(at) = state.running.iter().position(|running| running == id) else { return };
        state.running.swap_remove(at);
        match state.queue.pop_front() {
            Some((next, message)) => unsent = self.start(&mut state, next, message),
            None if state.running.is_empty() => self.idle.notify_waiters(),
            None => {}
        }
        drop(state);
        drop(unsent);
    }

    /// A message from the SDK: a reply is written (and releases its request's bounds) unless its
    /// request was cancelled; anything else is written as it is.
    fn from_sdk(self: &Arc<Self>, message: ServerJsonRpcMessage) -> oneshot::Receiver<()> {
        let id = match &message {
            JsonRpcMessage::Response(response) => Some(response.id.clone()),
            JsonRpcMessage::Error(error) => error.id.clone(),
            _ => None,
        };
        let Some(id) = id else { return self.write(&message, Permits::default()) };
        let permits = self.lock().in_flight.remove(&id);
        let Some(permits) = permits else {
            // Cancelled: no reply, as the spec asks.
            let (written, done) = oneshot::channel();
            let _ = written.send(());
            return done;
        };
        self.write(&message, permits)
    }

    /// `notifications/cancelled`: a queued call is dropped; a running request's token fires in the
    /// SDK (its handler stops the host's work) and its reply is never written; an unknown or
    /// finished id is ignored.
    fn cancel(self: &Arc<Self>, id: RequestId, reason: &str) {
        let mut unsent = None;
        let mut state = self.lock();
        if let Some(at) = state.queue.iter().position(|(queued, _)| queued == &id) {
            state.queue.remove(at);
            state.in_flight.remove(&id);
            return;
        }
        if state.in_flight.remove(&id).is_none() {
            return;
        }
        let notification = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id.clone().into_json_value(), "reason": reason}});
        if let Ok(message) = serde_json::from_value::<ClientJsonRpcMessage>(notification) {
            unsent = state.forward(message, Permits::default());
        }
        drop(state);
        drop(unsent);
    }

    /// The input closed: queued calls are dropped, the running ones are cancelled, and the SDK is
    /// told there is no more input.
    fn end_of_input(self: &Arc<Self>) {
        let running = {
            let mut state = self.lock();
            let queued: Vec<_> = state.queue.drain(..).collect();
            for (id, _) in &queued {
                state.in_flight.remove(id);
            }
            state.running.clone()
        };
        for id in running {
            self.cancel(id, "the client closed the connection");
        }
        self.lock().to_sdk = None;
    }

    /// Waits until no call's host work runs, at most `limit`.
    async fn wait_idle(&self, limit: Duration) {
        let _ = tokio::time::timeout(limit, async {
            loop {
                let notified = self.idle.notified();
                if self.lock().running.is_empty() {
                    return;
                }
                notified.await;
            }
        })
        .await;
    }
}

/// The SDK's side of the exchange.
struct StdioChannel {
    exchange: Arc<Exchange>,
    from_input: mpsc::UnboundedReceiver<(ClientJsonRpcMessage, Permits)>,
}

impl Transport<RoleServer> for StdioChannel {
    type Error = io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = std::result::Result<(), io::Error>> + Send + 'static {
        let written = self.exchange.from_sdk(item);
        async move { written.await.map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the output has closed")) }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        self.from_input.recv().await.map(|(message, _permits)| message)
    }

    fn close(&mut self) -> impl Future<Output = std::result::Result<(), io::Error>> + Send {
        std::future::ready(Ok(()))
    }
}

/// Reads the input line by line, a slot taken before each read.
async fn read_input<R: AsyncRead + Unpin>(reader: R, exchange: Arc<Exchange>) {
    let slots = Arc::new(Semaphore::new(MAX_UNANSWERED));
    let kib = Arc::new(Semaphore::new(MAX_UNANSWERED_KIB as usize));
    let mut lines = LineReader::new(BufReader::with_capacity(1 << 20, reader), MAX_MESSAGE_BYTES);
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else { break };
        let mut permits = Permits(vec![slot]);
        match lines.next().await.unwrap_or(Line::End) {
            Line::End => break,
            Line::TooLong { bytes, id } => {
                let refusal = wire::error(
                    id,
                    ErrorCode::INVALID_REQUEST,
                    format!(
                        "Invalid request: the message is {bytes} bytes, over the limit of {MAX_MESSAGE_BYTES} bytes, and \
                         was not read"
                    ),
                );
                exchange.write(&refusal, permits);
            }
            Line::Message(bytes) => {
                let size = u32::try_from(bytes.len() / 1024).unwrap_or(u32::MAX).min(MAX_UNANSWERED_KIB);
                if size > 0 {
                    if let Ok(held) = Arc::clone(&kib).acquire_many_owned(size).await {
                        permits.0.push(held);
                    }
                }
                match wire::classify(&bytes) {
                    Inbound::Nothing => {}
                    Inbound::Refused(refusal) => {
                        exchange.write(&refusal, permits);
                    }
                    Inbound::Request { id, message, is_call } => exchange.accept(id, message, is_call, permits),
                    Inbound::Cancel(id) => exchange.cancel(id, "cancelled by the client"),
                    Inbound::Other(message) => {
                        let unsent = exchange.lock().forward(message, permits);
                        drop(unsent);
                    }
                }
            }
        }
    }
    exchange.end_of_input();
}

/// Writes each line and flushes it, then releases what its request held. After a failed write
/// (the client is gone) lines are dropped.
async fn write_output<W: AsyncWrite + Unpin>(mut writer: W, mut lines: mpsc::UnboundedReceiver<Outgoing>) {
    let mut broken = false;
    while let Some(outgoing) = lines.recv().await {
        if !broken {
            let wrote = async {
                writer.write_all(&outgoing.line).await?;
                writer.flush().await
            };
            broken = wrote.await.is_err();
        }
        if let Some(written) = outgoing.written {
            let _ = written.send(());
        }
    }
}

/// Serves `service` on `reader` and `writer` until the input ends, then stops what runs and writes
/// what is left to write. `window`: how many calls the SDK may run at once (see [`State::running`]).
pub async fn serve<S: ServerHandler, Held>(
    service: S,
    window: usize,
    reader: impl AsyncRead + Send + Unpin + 'static,
    writer: impl AsyncWrite + Send + Unpin + 'static,
    started: impl FnOnce(Peer<RoleServer>) -> Held,
    end_host: impl FnOnce() + Send + 'static,
) -> Result<()> {
    let (output, lines) = mpsc::unbounded_channel();
    let (to_sdk, from_input) = mpsc::unbounded_channel();
    let exchange = Arc::new(Exchange {
        state: Mutex::new(State {
            in_flight: HashMap::new(),
            queue: VecDeque::new(),
            running: Vec::new(),
            window: window.max(1),
            next_turn: 0,
            submit_turn: 0,
            passed: BTreeSet::new(),
            to_sdk: Some(to_sdk),
        }),
        output,
        idle: Notify::new(),
        submit_turns: Notify::new(),
    });
    let writing = tokio::spawn(write_output(writer, lines));
    tokio::spawn(read_input(reader, Arc::clone(&exchange)));
    let channel = StdioChannel { exchange: Arc::clone(&exchange), from_input };
    let outcome = match service.serve(channel).await {
        Ok(running) => {
            // What the caller started once the client is there (a watch on the tool folders), held
            // while the connection lasts.
            let _held = started(running.peer().clone());
            running.waiting().await.map(drop).map_err(|e| Error::tool_failed(format!("the MCP server stopped: {e}")))
        }
        Err(e) => Err(Error::tool_failed(format!("MCP initialization with the client failed: {e}"))),
    };
    // The input has ended (or the SDK gave up): the running call was cancelled. Its host work gets
    // a moment to stop by itself; then the host is ended outright, waiting until its worker and
    // what that started are gone, so neither outlives the server however busy the machine is or
    // however deaf to interrupts the call (a worker left to notice its closed socket by itself
    // would end after the server). Then what is queued is written (the output ends once the
    // reader and the channel have let go of the exchange).
    exchange.end_of_input();
    exchange.wait_idle(ORDERLY_STOP).await;
    let _ = tokio::task::spawn_blocking(end_host).await;
    drop(exchange);
    let _ = tokio::time::timeout(Duration::from_millis(500), writing).await;
    outcome
}
