//! `toolhost mcp`'s watch on its tools: when a `.scm` file in its tool folders is added, changed
//! or removed, the host loads its tools again (under the trust rule, as a fresh start would) and,
//! when a tool changed, every client is sent `notifications/tools/list_changed`; a file that fails
//! to load is reported on standard error with its file and line, the other files' tools stay. The
//! same notification goes out when the host's tools change otherwise: an `[[mcp]]` server toolhost
//! is a client of changed its own list.
//!
//! It polls the folders' entries (name, size, modification time) and the host's count of tool
//! changes a few times a second rather than asking the kernel or the host for events: a handful of
//! small folders costs nothing to list, polling sees editors that replace a file by renaming
//! another over it exactly as it sees a plain write, and the count is one small request to the host
//! (which may be a worker process, where the `[[mcp]]` clients live).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rmcp::service::{Peer, RoleServer};

use crate::handle::HostHandle;

/// How often the folders are listed. A change is acted on once two listings in a row agree, so an
/// editor's write in several steps is loaded once.
const POLL: Duration = Duration::from_millis(200);

/// The clients to tell that the tools changed: the one over standard input and output, or each
/// HTTP session.
#[derive(Clone, Default)]
pub(crate) struct Listeners(Arc<Mutex<Vec<Peer<RoleServer>>>>);

impl Listeners {
    /// Adds a client; those whose connection has closed are let go.
    pub(crate) fn add(&self, peer: Peer<RoleServer>) {
        if let Ok(mut peers) = self.0.lock() {
            peers.retain(|p| !p.is_transport_closed());
            peers.push(peer);
        }
    }

    /// Sends `notifications/tools/list_changed` to every client still connected.
    fn tools_changed(&self, runtime: &tokio::runtime::Handle) {
        let peers = match self.0.lock() {
            Ok(mut peers) => {
                peers.retain(|p| !p.is_transport_closed());
                peers.clone()
            }
            Err(_) => return,
        };
        for peer in peers {
            runtime.spawn(async move {
                if let Err(e) = peer.notify_tool_list_changed().await {
                    eprintln!("toolhost: a client was not told that the tools changed: {e}");
                }
            });
        }
    }
}

/// The watch; dropping it stops it.
pub(crate) struct ToolWatch {
    stop: Arc<AtomicBool>,
}

/// What a listing sees of one `.scm` file.
type Seen = Vec<(PathBuf, u64, Option<SystemTime>)>;

impl ToolWatch {
    /// Watches the tools of the host behind `handle` (its tool folders and files, and its count of
    /// tool changes), telling `listeners` when they changed. `runtime` runs the notifications.
    pub(crate) fn start(handle: HostHandle, listeners: Listeners, runtime: tokio::runtime::Handle) -> ToolWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let _ = std::thread::Builder::new()
            .name("toolhost-mcp-watch".into())
            .spawn(move || watch(&handle, &listeners, &runtime, &stopped))
            .map_err(|e| eprintln!("toolhost: the tool folders are not watched: {e}"))
            .ok();
        ToolWatch { stop }
    }
}

impl Drop for ToolWatch {
    /// Stops the watch without waiting for it: its thread may be waiting on the host, behind a long
    /// call, and the server going away must not wait for that call.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn watch(handle: &HostHandle, listeners: &Listeners, runtime: &tokio::runtime::Handle, stop: &AtomicBool) {
    let Ok(mut paths) = handle.tool_paths() else { return };
    let mut last = listing(&paths);
    let mut changes = handle.tool_changes().unwrap_or_default();
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(POLL);
        // The tools changed without a file changing: an MCP server's list did.
        if let Ok(now) = handle.tool_changes() {
            if now != changes && !stop.load(Ordering::SeqCst) {
                changes = now;
                listeners.tools_changed(runtime);
            }
        }
        let now = listing(&paths);
        if now == last {
            continue;
        }
        std::thread::sleep(POLL);
        if listing(&paths) != now {
            continue;
        }
        let report = match handle.reload() {
            Ok(report) => report,
            Err(e) => {
                eprintln!("toolhost: the tools were not loaded again: {e}");
                return;
            }
        };
        // The reload's changes are told by its report (a reload that changed nothing moves the
        // count too).
        changes = handle.tool_changes().unwrap_or(changes);
        for error in &report.errors {
            eprintln!("toolhost: warning: {error}");
        }
        if let Some(skipped) = &report.skipped {
            eprintln!("toolhost: {skipped}");
        }
        if !(report.added.is_empty() && report.changed.is_empty() && report.removed.is_empty()) {
            listeners.tools_changed(runtime);
        }
        // What was loaded is what the listing before the reload saw, not a listing made now: a file
        // written while the tools loaded, or once the client heard of them, is a change still to
        // load. The trust rule may admit other folders now; a listing of those differs from `now`,
        // so they are loaded at the next look (a reload that changes nothing tells nobody).
        paths = handle.tool_paths().unwrap_or(paths);
        last = now;
    }
}

/// The `.scm` tool files in `paths` (folders and files), with their sizes and times, in order.
fn listing(paths: &[PathBuf]) -> Seen {
    let mut seen = Seen::new();
    let mut note = |file: &Path| {
        let meta = std::fs::metadata(file).ok();
        let size = meta.as_ref().map_or(0, |m| m.len());
        seen.push((file.to_path_buf(), size, meta.and_then(|m| m.modified().ok())));
    };
    for path in paths {
        if path.is_dir() {
            let Ok(entries) = std::fs::read_dir(path) else { continue };
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| Some(e.ok()?.path()))
                .filter(|p| p.extension().is_some_and(|ext| ext == "scm") && !crate::host::is_test_file(p))
                .collect();
            files.sort();
            files.iter().for_each(|file| note(file));
        } else {
            note(path);
        }
    }
    seen
}
