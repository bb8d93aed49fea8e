//! `shell-exec cmd [timeout-s]`: runs `sh -c cmd` in the workspace root in its own process group,
//! returns the exit code and capped stdout and stderr, and on timeout kills the whole group, so
//! children the command started die with it.

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use steel::rvals::SteelVal;

use super::text::thousands;
use crate::context::ToolCtx;
use crate::error::{Error, ErrorKind, Result};
use crate::registry::Primitive;
use crate::typed::Tool;

pub fn tool() -> Result<Primitive> {
    Tool::new(
        "shell-exec",
        "Run a shell command with `sh -c` in the workspace root, with no input. Returns the exit \
         code, stdout and stderr (each capped at 30,000 bytes). The command and every process it \
         started are killed when the timeout passes.",
    )
    .param("cmd", "The command line, as sh reads it")
    .param("timeout-s", "Seconds before the command is killed; 120 when left out or 0")
    .destructive()
    .preview(preview)
    .build(shell_exec)
}

fn preview(_ctx: &ToolCtx, args: &[SteelVal]) -> Result<String> {
    match args.first() {
        Some(SteelVal::StringV(cmd)) => Ok(format!("$ {}", cmd.as_str())),
        _ => Ok(String::new()),
    }
}

fn shell_exec(ctx: &ToolCtx, cmd: String, timeout_s: Option<i64>) -> Result<String> {
    let timeout = match timeout_s.unwrap_or(0) {
        0 => ctx.limits.shell_timeout_s,
        n if n < 0 => return Err(Error::tool_failed(format!("timeout-s must be 1 or more, got {n}"))),
        n => n as u64,
    };
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(&cmd)
        .current_dir(ctx.workspace.root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| Error::tool_failed(format!("cannot start sh: {e}")))?;
    let group = child.id() as libc::pid_t;
    let cap = ctx.limits.shell_output_bytes;
    let stdout = child.stdout.take().map(|out| thread::spawn(move || read_capped(out, cap)));
    let stderr = child.stderr.take().map(|err| thread::spawn(move || read_capped(err, cap)));
    let (done_tx, done_rx) = mpsc::channel();
    let waiter = thread::spawn(move || {
        let status = child.wait();
        let _ = done_tx.send(());
        status
    });
    let timed_out = done_rx.recv_timeout(Duration::from_secs(timeout)).is_err();
    // On timeout, and also after a normal exit, end whatever is left of the group: a background
    // child that kept the pipes open would otherwise hold the readers (and the call) forever.
    kill_group(group);
    let status = waiter.join().map_err(|_| Error::tool_failed("the process waiter failed"))?;
    let (out, out_more) = stdout.and_then(|h| h.join().ok()).unwrap_or_default();
    let (err, err_more) = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
    let mut text = String::new();
    if !timed_out {
        match status {
            Ok(s) => match (s.code(), s.signal()) {
                (Some(code), _) => text.push_str(&format!("exit code: {code}\n")),
                (None, Some(sig)) => text.push_str(&format!("killed by signal {sig}\n")),
                _ => text.push_str("exit status unknown\n"),
            },
            Err(e) => text.push_str(&format!("exit status unknown: {e}\n")),
        }
    }
    for (name, body, more) in [("stdout", out, out_more), ("stderr", err, err_more)] {
        text.push_str(&format!("--- {name} ---\n"));
        text.push_str(&String::from_utf8_lossy(&body));
        if !body.is_empty() && !body.ends_with(b"\n") {
            text.push('\n');
        }
        if more > 0 {
            text.push_str(&format!("[... {} more bytes of {name} cut]\n", thousands(more)));
        }
    }
    if timed_out {
        return Err(Error::new(
            ErrorKind::Timeout,
            format!(
                "timed out after {timeout} s; the command and its child processes were killed. Output so far:\n{text}"
            ),
        ));
    }
    Ok(text)
}

fn kill_group(group: libc::pid_t) {
    // SAFETY: killpg only sends a signal; `group` is the id of the process group this call created.
    unsafe {
        libc::killpg(group, libc::SIGKILL);
    }
}

/// Reads a pipe to its end, keeping the first `cap` bytes and counting the rest.
fn read_capped(mut pipe: impl Read, cap: usize) -> (Vec<u8>, u64) {
    let mut kept = Vec::new();
    let mut dropped = 0u64;
    let mut buf = [0u8; 16 * 1024];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len()).min(n);
                kept.extend_from_slice(&buf[..room]);
                dropped += (n - room) as u64;
            }
        }
    }
    (kept, dropped)
}
