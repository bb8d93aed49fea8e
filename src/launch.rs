//! How a command of the `toolhost` executable starts its host: the settings found and their notice
//! shown, the person at the terminal (or nobody) answering confirmations, and the host in a worker
//! process (the default, design section 18) or on a thread of this one. Every command that keeps a
//! host goes through here, so they all start it alike.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, ErrorKind};
use crate::guard::{Answer, ConfirmRequest, Confirmer};
use crate::handle::HostHandle;
use crate::host::HostBuilder;
use crate::setup::{Flags, Setup};
use crate::trust::Ask;
use crate::worker::WorkerSpec;

/// Who answers the guard's confirmations for a command (`--yes` answers yes over either).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asker {
    /// The person at the terminal, when standard error is one; else nobody.
    Terminal,
    /// Nobody: a confirmation denies (`toolhost mcp`, whose standard input is the protocol).
    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    Nobody,
}

/// How a command wants its host started, beyond the settings.
pub(crate) struct Start {
    /// Who answers confirmations.
    pub asker: Asker,
    /// Flags for `toolhost worker` beyond the common ones (the agent's `--agent-defaults`).
    pub worker_flags: &'static [&'static str],
    /// How many hosts calls may run on at once (see `HostHandle::with_lanes`); 1 for one host.
    pub lanes: usize,
}

/// Finds the settings for the workspace (asking `ask` whether to trust its files, if given) and
/// shows the notice about its skipped files; a wrong setting is reported and comes back as exit
/// code 2.
pub(crate) fn settings(flags: &Flags, ask: Option<Ask>) -> Result<Setup, i32> {
    match Setup::discover(flags, ask) {
        Ok(setup) => {
            if let Some(notice) = &setup.notice {
                eprintln!("{notice}");
            }
            Ok(setup)
        }
        Err(e) => Err(settings_error(&e)),
    }
}

/// The host of `setup` behind a handle: in a worker process unless `[limits] isolate = false` or
/// `--no-isolate`, else on its own thread, with what scripts print sent to standard error (standard
/// output is the command's). Load errors are shown as warnings. A failure is reported and comes
/// back as the exit code: 2 for a settings error, else 1.
// The commands that keep a host behind a handle are `agent` and `mcp`.
#[cfg_attr(not(any(feature = "agent", feature = "mcp")), allow(dead_code))]
pub(crate) fn host_handle(flags: &Flags, setup: &Setup, start: &Start) -> Result<HostHandle, i32> {
    let lanes = start.lanes.max(1);
    if !setup.config.limits.isolate.unwrap_or(true) || flags.no_isolate {
        let asker = start.asker;
        let confirmer = move || match asker {
            Asker::Terminal => terminal_confirmer(),
            Asker::Nobody => None,
        };
        let handle = match setup.builder(flags, confirmer()) {
            Ok(builder) => thread_handle(builder)?,
            Err(e) => return Err(settings_error(&e)),
        };
        if lanes == 1 {
            return Ok(handle);
        }
        let (setup, flags) = (setup.clone(), flags.clone());
        return Ok(handle.with_lanes(lanes, move || {
            HostHandle::spawn(setup.builder(&flags, confirmer())?.display_to_stderr(true))
        }));
    }
    let Some(mut spec) = worker_spec(flags, setup, start.asker) else {
        eprintln!("toolhost: cannot tell how to start the worker process (use --no-isolate)");
        return Err(1);
    };
    spec.args.extend(start.worker_flags.iter().map(|flag| flag.to_string()));
    let handle = shown(HostHandle::spawn_worker(spec.clone()))?;
    Ok(if lanes == 1 { handle } else { handle.with_lanes(lanes, move || HostHandle::spawn_worker(spec.clone())) })
}

/// The host of `builder` on its own thread, as [`host_handle`] starts one (for a command that
/// chose its own confirmer, like `toolhost replay`).
#[cfg_attr(not(any(feature = "agent", feature = "mcp")), allow(dead_code))]
pub(crate) fn thread_handle(builder: HostBuilder) -> Result<HostHandle, i32> {
    shown(HostHandle::spawn(builder.display_to_stderr(true)))
}

/// A started handle with its load errors shown, or the failure reported as an exit code.
#[cfg_attr(not(any(feature = "agent", feature = "mcp")), allow(dead_code))]
fn shown(spawned: crate::Result<HostHandle>) -> Result<HostHandle, i32> {
    match spawned {
        Ok(handle) => {
            for problem in handle.load_errors().unwrap_or_default() {
                eprintln!("toolhost: warning: {problem}");
            }
            Ok(handle)
        }
        Err(e) if e.kind() == ErrorKind::Config => Err(settings_error(&e)),
        Err(e) => {
            eprintln!("toolhost: {e}");
            Err(1)
        }
    }
}

/// Reports a settings error (a bad config file, a missing folder): exit 2.
pub(crate) fn settings_error(e: &Error) -> i32 {
    eprintln!("toolhost: {e}");
    2
}

/// How a command starts its worker: this executable, with the same workspace, config, tool folders
/// and `--yes`, the configured bounds, and the terminal for confirmations when `asker` says so and
/// standard error is one.
pub(crate) fn worker_spec(flags: &Flags, setup: &Setup, asker: Asker) -> Option<WorkerSpec> {
    let program = std::env::current_exe().ok()?;
    let root = std::path::absolute(&setup.root).ok()?;
    let mut args = vec!["--root".to_string(), root.to_str()?.to_string()];
    if let Some(config) = &flags.config {
        args.extend(["--config".to_string(), std::path::absolute(config).ok()?.to_str()?.to_string()]);
    }
    for dir in &flags.tool_dirs {
        args.extend(["--tools".to_string(), std::path::absolute(dir).ok()?.to_str()?.to_string()]);
    }
    if flags.yes {
        args.push("--yes".to_string());
    }
    args.push("worker".to_string());
    if asker == Asker::Terminal && std::io::stderr().is_terminal() {
        args.push("--terminal".to_string());
    }
    let limits = setup.config.tool_limits();
    let mut spec = WorkerSpec::new(program, args);
    // Nobody is asked on the terminal (`toolhost mcp`): the worker may lead its own process group,
    // so a server going away ends the worker and what it started together.
    spec.own_process_group = asker == Asker::Nobody;
    spec.call_deadline = limits.scheme_call;
    spec.shell_deadline = Duration::from_secs(limits.shell_timeout_s);
    spec.program_deadline = limits.program;
    if let Some(mb) = setup.config.limits.worker_memory_mb {
        spec.memory_bytes = mb.saturating_mul(1 << 20);
    }
    Some(spec)
}

/// Whether a person is at a terminal: standard input and standard error both are one.
pub(crate) fn on_terminal() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// Asks a yes/no question on the terminal (`/dev/tty`, so standard input may carry data); no
/// answer, or no terminal, is no.
pub(crate) fn ask_yes_no(question: &str) -> bool {
    let Ok(tty) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/tty") else { return false };
    let mut writer = &tty;
    if writer.write_all(question.as_bytes()).and_then(|()| writer.flush()).is_err() {
        return false;
    }
    let mut answer = String::new();
    if std::io::BufReader::new(&tty).read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// Who answers the guard's confirmations from the command line: the person at the terminal, shown
/// the preview; `None` when standard error is not a terminal (confirm then means deny).
pub(crate) fn terminal_confirmer() -> Option<Confirmer> {
    std::io::stderr().is_terminal().then(tty_confirmer)
}

/// Asks the person at the terminal (`/dev/tty`), shown the preview.
pub(crate) fn tty_confirmer() -> Confirmer {
    Arc::new(|request: &ConfirmRequest<'_>| {
        let reason = request.reason.map(|r| format!(" ({r})")).unwrap_or_default();
        let question = format!(
            "toolhost: {} needs your confirmation{reason}:\n{}\nRun it? [y/N] ",
            request.tool,
            request.preview.trim_end()
        );
        Answer { yes: ask_yes_no(&question), by: "terminal".into() }
    })
}
