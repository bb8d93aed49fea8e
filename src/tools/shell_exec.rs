//! `shell-exec cmd [timeout-s]`: runs `sh -c cmd` in the workspace root under the shell sandbox
//! (`crate::sandbox`: what it may write, whether it has a network, which variables it sees, and a
//! supervisor that ends every process it started), returns the exit code and capped stdout and
//! stderr, and on timeout or interrupt ends the command and everything it started.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;
use steel::rvals::SteelVal;

use super::text::thousands;
use crate::context::{Limits, ToolCtx};
use crate::error::{Error, ErrorKind, Result};
use crate::registry::Primitive;
use crate::sandbox::Sandbox;
use crate::typed::Tool;

/// How long, after the command and its processes were ended, shell-exec waits for its output pipes
/// to close and for the supervisor to exit. The pipes stay open only while a process that is not
/// ended holds them: a background process where they are allowed, a process outside the command's
/// group when the sandbox is off, or one the descriptors were passed to.
const OUTPUT_GRACE: Duration = Duration::from_secs(1);

/// How often a waiting command checks for an interrupt: a person's Ctrl-C ends it this soon.
const CANCEL_POLL: Duration = Duration::from_millis(50);

/// The closing note when the output pipes stayed open after the command ended, by why that can be.
fn abandoned_note(supervised: bool, background: bool) -> &'static str {
    match (supervised, background) {
        (true, _) => {
            "[note: a process outside this call still holds the command's output open (the descriptors were passed \
             to it); what it writes from now on is not shown]\n"
        }
        (false, true) => {
            "[note: a background process the command started still holds its output open; background processes are \
             allowed ([shell] background), so it keeps running, and what it writes from now on is not shown]\n"
        }
        (false, false) => {
            "[note: a process outside the command's process group (started with setsid or as a daemon) still holds \
             its output open; the sandbox is off, so it was not waited for or killed, and what it writes from now \
             on is not shown]\n"
        }
    }
}

pub fn tool(limits: &Limits, sandbox: &Sandbox) -> Result<Primitive> {
    Tool::new(
        "shell-exec",
        format!(
            "Run a shell command with `sh -c` in the workspace root, with no input. Returns the exit \
             code, stdout and stderr (each capped at {} bytes). The command and every process it \
             started are killed when the timeout passes. {}",
            thousands(limits.shell_stream_bytes() as u64),
            sandbox.describe()
        ),
    )
    .param("cmd", "The command line, as sh reads it")
    .param(
        "timeout-s",
        format!(
            "Seconds before the command is killed, at most {max}; {max} when left out or 0",
            max = limits.shell_timeout_s
        ),
    )
    .destructive()
    .preview(preview)
    .build(shell_exec)
}

/// The confirmation preview: the command line as it will run.
fn preview(_ctx: &ToolCtx, cmd: String, _timeout_s: Option<i64>) -> String {
    format!("$ {cmd}")
}

fn shell_exec(ctx: &ToolCtx, cmd: String, timeout_s: Option<i64>) -> Result<String> {
    let run = run(ctx, &cmd, timeout_s)?;
    let mut text = run.clamp_note.clone().unwrap_or_default();
    match &run.status {
        None => {}
        Some(Ok(s)) => match (s.code(), s.signal()) {
            (Some(code), _) => text.push_str(&format!("exit code: {code}\n")),
            (None, Some(sig)) => text.push_str(&format!("killed by signal {sig}\n")),
            _ => text.push_str("exit status unknown\n"),
        },
        Some(Err(e)) => text.push_str(&format!("exit status unknown: {e}\n")),
    }
    for (name, captured) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        let body = &captured.kept;
        text.push_str(&format!("--- {name} ---\n"));
        text.push_str(&String::from_utf8_lossy(body));
        if !body.is_empty() && !body.ends_with(b"\n") {
            text.push('\n');
        }
        if captured.dropped > 0 {
            text.push_str(&format!("[... {} more bytes of {name} cut]\n", thousands(captured.dropped)));
        }
        // Said rather than silently replaced. (A character cut at the end by the cap is not
        // counted: error_len is None for an incomplete sequence.)
        if std::str::from_utf8(body).err().is_some_and(|e| e.error_len().is_some()) {
            text.push_str(&format!("[{name} held bytes that are not UTF-8, shown as \u{fffd}]\n"));
        }
    }
    if let Some(note) = run.abandoned {
        text.push_str(note);
    }
    if run.timed_out {
        return Err(Error::new(
            ErrorKind::Timeout,
            format!(
                "timed out after {} s; the command and its child processes were killed. Output so far:\n{text}",
                run.timeout
            ),
        ));
    }
    Ok(text)
}

/// `(shell-run cmd [timeout-s])` for Scheme code: a hash map with `"exit-code"` (an integer, or
/// `#f` when a signal ended the command), `"stdout"` and `"stderr"` (strings, capped as for
/// shell-exec). Guarded as `shell-exec`; a timeout is a `timeout` error.
pub(crate) fn run_value(ctx: &ToolCtx, args: &[SteelVal]) -> Result<SteelVal> {
    let (cmd, timeout_s) = match args {
        [SteelVal::StringV(cmd)] => (cmd.as_str(), None),
        [SteelVal::StringV(cmd), SteelVal::IntV(t)] => (cmd.as_str(), Some(*t as i64)),
        _ => return Err(Error::tool_failed("shell-run: expected a command string and an optional timeout")),
    };
    let run = run(ctx, cmd, timeout_s)?;
    if run.timed_out {
        return Err(Error::new(ErrorKind::Timeout, format!("shell-run: timed out after {} s: {cmd}", run.timeout)));
    }
    let code = match &run.status {
        Some(Ok(status)) => status.code().map_or(json!(false), |c| json!(c)),
        _ => json!(false),
    };
    let value = json!({
        "exit-code": code,
        "stdout": String::from_utf8_lossy(&run.stdout.kept),
        "stderr": String::from_utf8_lossy(&run.stderr.kept),
    });
    crate::value::json_to_scheme(&value, crate::param::ParamType::Any)
        .map_err(|_| Error::tool_failed("shell-run: the result could not be built"))
}

/// What one run of a command produced.
struct Run {
    /// The exit status; `None` when the command was killed for its timeout.
    status: Option<std::io::Result<std::process::ExitStatus>>,
    stdout: Captured,
    stderr: Captured,
    timed_out: bool,
    /// The output pipes stayed open after the command ended: the note saying why.
    abandoned: Option<&'static str>,
    /// The timeout that applied, in seconds.
    timeout: u64,
    /// Said when the asked-for timeout was above the configured maximum.
    clamp_note: Option<String>,
}

/// Runs `sh -c cmd` under the sandbox with the timeout asked for (the configured one when left out
/// or 0, at most the configured maximum), capturing capped output.
fn run(ctx: &ToolCtx, cmd: &str, timeout_s: Option<i64>) -> Result<Run> {
    let max = ctx.limits.shell_timeout_s;
    let (timeout, clamp_note) = match timeout_s.unwrap_or(0) {
        0 => (max, None),
        n if n < 0 => return Err(Error::tool_failed(format!("timeout-s must be 1 or more, got {n}"))),
        n if n as u64 > max => {
            (max, Some(format!("[note: timeout-s {n} is above the maximum of {max} s; {max} s applied]\n")))
        }
        n => (n as u64, None),
    };
    let prepared = ctx.sandbox.prepare(ctx.workspace.root(), std::env::vars_os())?;
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(cmd)
        .current_dir(ctx.workspace.root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (mut child, mut supervision) =
        prepared.spawn(command).map_err(|e| Error::tool_failed(format!("cannot start sh: {e}")))?;
    let cap = ctx.limits.shell_stream_bytes();
    let stdout = Arc::new(Mutex::new(Captured::default()));
    let stderr = Arc::new(Mutex::new(Captured::default()));
    let (read_tx, read_rx) = mpsc::channel();
    let mut readers = 0;
    if let Some(pipe) = child.stdout.take() {
        spawn_reader(pipe, cap, stdout.clone(), read_tx.clone());
        readers += 1;
    }
    if let Some(pipe) = child.stderr.take() {
        spawn_reader(pipe, cap, stderr.clone(), read_tx.clone());
        readers += 1;
    }
    drop(read_tx);
    let (exit_tx, exit_rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = exit_tx.send(child.wait());
    });
    // Waits for the exit, the timeout or an interrupt, whichever comes first. With a supervisor,
    // its exit comes once every process the command started is gone.
    let deadline = Instant::now() + Duration::from_secs(timeout);
    let (mut timed_out, mut interrupted, mut status) = (false, false, None);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match exit_rx.recv_timeout(left.min(CANCEL_POLL)) {
            Ok(exit) => {
                status = Some(exit);
                break;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) if ctx.cancel.is_cancelled() => {
                interrupted = true;
                break;
            }
            Err(mpsc::RecvTimeoutError::Timeout) if left.is_zero() => {
                timed_out = true;
                break;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
    // On timeout or interrupt, and (unless background processes are allowed) after a normal
    // exit, end whatever is left.
    supervision.end(timed_out || interrupted);
    // From here on the call waits at most OUTPUT_GRACE in all.
    let deadline = Instant::now() + OUTPUT_GRACE;
    if status.is_none() {
        // Reap the process started (the supervisor exits once it ended everything).
        let _ = exit_rx.recv_timeout(deadline.saturating_duration_since(Instant::now()));
    }
    // The readers end when every process holding the pipes has closed them.
    let mut finished = 0;
    while finished < readers {
        match read_rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(()) => finished += 1,
            Err(_) => break,
        }
    }
    let abandoned =
        (finished < readers).then(|| abandoned_note(supervision.supervised(), supervision.background_allowed()));
    let take = |captured: Arc<Mutex<Captured>>| {
        let mut guard = captured.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        std::mem::take(&mut *guard)
    };
    if interrupted {
        return Err(Error::tool_failed("interrupted: the command and every process it started were killed"));
    }
    Ok(Run { status, stdout: take(stdout), stderr: take(stderr), timed_out, abandoned, timeout, clamp_note })
}

/// What was read from one pipe: the first bytes, up to the cap, and how many more were dropped.
#[derive(Default)]
struct Captured {
    kept: Vec<u8>,
    dropped: u64,
}

/// Reads `pipe` to its end on a thread of its own, appending to `into` as it goes (so what was
/// read so far can be taken at any time) and sending on `done` when the pipe is closed.
fn spawn_reader(mut pipe: impl Read + Send + 'static, cap: usize, into: Arc<Mutex<Captured>>, done: mpsc::Sender<()>) {
    thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
                Ok(n) => {
                    let mut captured = into.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                    let room = cap.saturating_sub(captured.kept.len()).min(n);
                    captured.kept.extend_from_slice(&buf[..room]);
                    captured.dropped += (n - room) as u64;
                }
            }
        }
        let _ = done.send(());
    });
}
