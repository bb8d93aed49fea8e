//! `toolhost mcp`'s watch on its tool folders: when a `.scm` file in them is added, changed or
//! removed, the host loads its tools again (under the trust rule, as a fresh start would) and, when
//! a tool changed, the client is sent `notifications/tools/list_changed`. A file that fails to load
//! is reported on standard error with its file and line; the other files' tools stay.
//!
//! It polls the folders' entries (name, size, modification time) a few times a second rather than
//! asking the kernel for events: a handful of small folders costs nothing to list, and polling sees
//! editors that replace a file by renaming another over it exactly as it sees a plain write.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rmcp::service::{Peer, RoleServer};

use crate::handle::HostHandle;

/// How often the folders are listed. A change is acted on once two listings in a row agree, so an
/// editor's write in several steps is loaded once.
const POLL: Duration = Duration::from_millis(200);

/// The watch; dropping it stops it.
pub(crate) struct ToolWatch {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What a listing sees of one `.scm` file.
type Seen = Vec<(PathBuf, u64, Option<SystemTime>)>;

impl ToolWatch {
    /// Watches the tool folders and files of the host behind `handle`, telling `peer` when its
    /// tools changed. `runtime` runs the notification.
    pub(crate) fn start(handle: HostHandle, peer: Peer<RoleServer>, runtime: tokio::runtime::Handle) -> ToolWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("toolhost-mcp-watch".into())
            .spawn(move || watch(&handle, &peer, &runtime, &stopped))
            .map_err(|e| eprintln!("toolhost: the tool folders are not watched: {e}"))
            .ok();
        ToolWatch { stop, thread }
    }
}

impl Drop for ToolWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn watch(handle: &HostHandle, peer: &Peer<RoleServer>, runtime: &tokio::runtime::Handle, stop: &AtomicBool) {
    let Ok(mut paths) = handle.tool_paths() else { return };
    let mut last = listing(&paths);
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(POLL);
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
        for error in &report.errors {
            eprintln!("toolhost: warning: {error}");
        }
        if let Some(skipped) = &report.skipped {
            eprintln!("toolhost: {skipped}");
        }
        if !(report.added.is_empty() && report.changed.is_empty() && report.removed.is_empty()) {
            let peer = peer.clone();
            runtime.spawn(async move {
                if let Err(e) = peer.notify_tool_list_changed().await {
                    eprintln!("toolhost: the client was not told that the tools changed: {e}");
                }
            });
        }
        // The trust rule may admit other folders now.
        paths = handle.tool_paths().unwrap_or(paths);
        last = listing(&paths);
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
