//! `toolhost agent` and `toolhost replay` (design section 13): their flags, and running them from the
//! command line's common flags. The agent's settings come from `[provider]` with these flags on
//! top; the host is built as every command builds it ([`Setup`]), on its own thread. Standard
//! output carries only the final answer (scripts' `display` goes to standard error); progress, one
//! line per call, goes to standard error.
//!
//! Exit codes: 0 answered (or replayed clean); 1 the session failed, ended at the turn limit, or a
//! replayed result differs; 2 the settings are wrong (no model server, a bad config, a log that
//! cannot be created or read); 130 stopped with Ctrl-C (a second Ctrl-C quits at once; every log
//! line written so far is already on disk).

use std::io::Read;
use std::path::PathBuf;

use clap::ValueEnum;

use crate::agent::client::{ChatClient, ClientSettings};
use crate::agent::instructions;
use crate::agent::log::{self, SessionLog};
use crate::agent::replay::{self, ReplayAnswers};
use crate::agent::resume::Resumed;
use crate::agent::session::{End, Session, DEFAULT_MAX_CALLS_PER_REPLY, DEFAULT_MAX_TURNS};
use crate::agent::stop::Stop;
use crate::config::Dialect;
use crate::error::{Error, ErrorKind};
use crate::handle::HostHandle;
use crate::host::HostBuilder;
use crate::setup::{Flags, Setup};

/// What `toolhost agent --help` says after the flags: the safe defaults.
pub const AFTER_HELP: &str = "\
Safe defaults: the agent asks before every shell-exec, fs-write and fs-edit call that no [guard]
rule of your config decides, showing the command or the diff. --yes answers yes to all of them; a
rule of yours decides the calls it matches, e.g. in toolhost.toml:
  [[guard.rule]]
  tool = \"fs-*\"
  action = \"allow\"
and a [guard] default of yours turns the defaults off. Without a terminal to ask on, such a call is
denied and the model is told why.";

/// How many hosts (worker processes) read-only calls of one reply may run on at once: the first,
/// and up to three more started when a reply first makes several such calls.
const LANES: usize = 4;

/// `toolhost agent`'s own flags (`--yes` and the workspace flags are the common ones).
#[derive(clap::Args, Debug)]
pub struct AgentArgs {
    /// The OpenAI-compatible API's base URL, e.g. http://127.0.0.1:8080/v1 (instead of [provider]
    /// base_url).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The model name to request (instead of [provider] model).
    #[arg(long, value_name = "M")]
    pub model: Option<String>,
    /// Send the tools in strict form and drop the nulls in their calls (as [provider]
    /// strict_tools = true).
    #[arg(long)]
    pub strict: bool,
    /// How tools are spoken: the API's own tool calls, or P-format text (instead of [provider]
    /// dialect; native when neither says).
    #[arg(long, value_enum, value_name = "DIALECT")]
    pub dialect: Option<DialectArg>,
    /// Write the session log (JSON lines) to FILE as the session goes.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Go on from the conversation logged in LOG with TASK, in its dialect; the new lines are
    /// added to LOG (to FILE instead with --log FILE, which then holds the whole conversation).
    #[arg(long, value_name = "LOG")]
    pub resume: Option<PathBuf>,
    /// Send at most N requests to the model.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_TURNS as u32,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: u32,
    /// What the agent should do; `-` reads it from standard input.
    pub task: String,
}

/// `--dialect`.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum DialectArg {
    /// The provider's own tool calls.
    Native,
    /// Tool calls written as text tags in the reply.
    Pformat,
}

/// `toolhost replay`'s flags.
#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// The session log written by `toolhost agent --log`.
    pub log: PathBuf,
}

/// Runs `toolhost agent`; returns the exit code.
pub fn agent(flags: &Flags, args: &AgentArgs) -> i32 {
    let Some(mut setup) = setup(flags) else { return 2 };
    setup.add_agent_defaults();
    let mut provider = setup.config.provider.clone();
    if args.base_url.is_some() {
        provider.base_url = args.base_url.clone();
    }
    if args.model.is_some() {
        provider.model = args.model.clone();
    }
    if args.strict {
        provider.strict_tools = Some(true);
    }
    let dialect = match args.dialect {
        Some(DialectArg::Native) => Dialect::Native,
        Some(DialectArg::Pformat) => Dialect::Pformat,
        None => provider.dialect.unwrap_or(Dialect::Native),
    };
    let settings = match ClientSettings::from_provider(&provider) {
        Ok(settings) => settings,
        Err(e) => return settings_error(&e),
    };
    let task = match read_task(&args.task) {
        Ok(task) => task,
        Err(e) => return settings_error(&e),
    };
    let resumed = match &args.resume {
        Some(path) => match log::read_log(path)
            .and_then(|entries| Resumed::from_log(&entries, path.display().to_string()))
        {
            Ok(resumed) => {
                let asked = args.dialect.is_some() || args.strict;
                if asked && (resumed.dialect != dialect || resumed.strict != provider.strict_tools.unwrap_or(false)) {
                    eprintln!(
                        "toolhost: {} was a {} session{}; --resume goes on in its dialect (leave out --dialect and --strict)",
                        path.display(),
                        match resumed.dialect {
                            Dialect::Native => "native",
                            Dialect::Pformat => "pformat",
                        },
                        if resumed.strict { " in strict mode" } else { "" }
                    );
                    return 2;
                }
                Some(resumed)
            }
            Err(e) => return settings_error(&e),
        },
        None => None,
    };
    let log = match (&args.log, &args.resume) {
        (Some(path), Some(from)) if same_file(path, from) => SessionLog::append(path).map(Some),
        (Some(path), _) => SessionLog::create(path).map(Some),
        (None, Some(from)) => SessionLog::append(from).map(Some),
        (None, None) => Ok(None),
    };
    let log = match log {
        Ok(log) => log,
        Err(e) => return settings_error(&e),
    };
    let handle = if setup.config.limits.isolate.unwrap_or(true) && !flags.no_isolate {
        // The tools run in a worker process (design section 18), as `toolhost call`'s do.
        let Some(mut spec) = crate::cli::worker_spec(flags, &setup) else {
            eprintln!("toolhost: cannot tell how to start the worker process (use --no-isolate)");
            return 1;
        };
        // The worker reads the config again: it takes the same defaults.
        spec.args.push("--agent-defaults".to_string());
        match HostHandle::spawn_worker(spec.clone()) {
            Ok(handle) => {
                for problem in handle.load_errors().unwrap_or_default() {
                    eprintln!("toolhost: warning: {problem}");
                }
                handle.with_lanes(LANES, move || HostHandle::spawn_worker(spec.clone()))
            }
            Err(e) => {
                eprintln!("toolhost: {e}");
                return 1;
            }
        }
    } else {
        let builder = match setup.builder(flags, crate::cli::terminal_confirmer()) {
            Ok(builder) => builder,
            Err(e) => return settings_error(&e),
        };
        let (lane_setup, lane_flags) = (setup.clone(), flags.clone());
        match spawn(builder) {
            Ok(handle) => handle.with_lanes(LANES, move || {
                let builder = lane_setup.builder(&lane_flags, crate::cli::terminal_confirmer())?;
                HostHandle::spawn(builder.display_to_stderr(true))
            }),
            Err(code) => return code,
        }
    };

    let stop = Stop::new();
    let on_signal = stop.clone();
    if let Err(e) = ctrlc::set_handler(move || {
        if on_signal.is_stopped() {
            std::process::exit(130);
        }
        on_signal.stop();
        eprintln!("toolhost: stopping (Ctrl-C again quits at once)");
    }) {
        eprintln!("toolhost: warning: Ctrl-C will not stop the session cleanly: {e}");
    }

    let root = if setup.root.as_os_str().is_empty() { std::path::Path::new(".") } else { setup.root.as_path() };
    let instructions = match crate::workspace::Workspace::new(root) {
        Ok(workspace) => instructions::gather(&workspace, crate::config::user_config_dir().as_deref()),
        Err(e) => return settings_error(&e),
    };
    for problem in &instructions.problems {
        eprintln!("toolhost: warning: {problem}");
    }
    let mut client = ChatClient::new(settings).stop_on(stop.clone());
    let mut session = Session::new(handle, &mut client)
        .instructions(&instructions)
        .dialect(dialect)
        .strict(provider.strict_tools.unwrap_or(false))
        .max_turns(args.max_turns as usize)
        .max_calls_per_reply(
            provider
                .max_calls_per_reply
                .map_or(DEFAULT_MAX_CALLS_PER_REPLY, |n| usize::try_from(n).unwrap_or(usize::MAX)),
        )
        .stop_on(stop)
        .on_call(|event| eprintln!("toolhost: {}", event.progress_line()));
    if let Some(log) = log {
        session = session.log(log);
    }
    if let Some(resumed) = resumed {
        session = session.resume(resumed);
    }
    match session.run(&task) {
        Ok(outcome) => match outcome.end {
            End::Answered => {
                let answer = outcome.answer.unwrap_or_default();
                if answer.ends_with('\n') {
                    print!("{answer}");
                } else {
                    println!("{answer}");
                }
                0
            }
            End::MaxTurns => {
                eprintln!(
                    "toolhost: the model was still calling tools after {} turns (--max-turns); no final answer",
                    outcome.turns
                );
                1
            }
            End::Interrupted => {
                eprintln!("toolhost: interrupted");
                130
            }
        },
        Err(e) => {
            eprintln!("toolhost: {e}");
            1
        }
    }
}

/// Runs `toolhost replay`; returns the exit code.
pub fn replay(flags: &Flags, args: &ReplayArgs) -> i32 {
    let entries = match log::read_log(&args.log) {
        Ok(entries) => entries,
        Err(e) => return settings_error(&e),
    };
    let Some(mut setup) = setup(flags) else { return 2 };
    // The calls were judged under the agent's defaults: they are judged so again.
    setup.add_agent_defaults();
    let answers = ReplayAnswers::new();
    let builder = match setup.builder(flags, Some(answers.confirmer())) {
        Ok(builder) => builder,
        Err(e) => return settings_error(&e),
    };
    let handle = match spawn(builder) {
        Ok(handle) => handle,
        Err(code) => return code,
    };
    let report = replay::replay(&entries, &handle, &answers);
    for difference in &report.differences {
        println!("{}", difference.report());
    }
    let skipped = if report.skipped > 0 { format!(" ({} skipped)", report.skipped) } else { String::new() };
    if report.is_clean() {
        println!("replayed {} calls{skipped}: every result is as logged", report.replayed);
        0
    } else {
        println!("replayed {} calls{skipped}: {} differ", report.replayed, report.differences.len());
        1
    }
}

/// The settings for the workspace, the notice about skipped files shown; `None` (reported) when
/// they are wrong.
fn setup(flags: &Flags) -> Option<Setup> {
    match Setup::discover(flags, None) {
        Ok(setup) => {
            if let Some(notice) = &setup.notice {
                eprintln!("{notice}");
            }
            Some(setup)
        }
        Err(e) => {
            settings_error(&e);
            None
        }
    }
}

/// The host on its own thread, its load errors shown; the exit code (reported) when it cannot be
/// built: 2 for a settings error (a tool folder that does not exist), else 1.
fn spawn(builder: HostBuilder) -> Result<HostHandle, i32> {
    // Standard output carries the answer (or the replay report): what scripts print goes to
    // standard error.
    match HostHandle::spawn(builder.display_to_stderr(true)) {
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

/// Whether two paths name one file (both must exist; a path that does not is no file of the other).
fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

fn read_task(task: &str) -> crate::Result<String> {
    if task != "-" {
        return Ok(task.to_string());
    }
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| Error::new(ErrorKind::Config, format!("cannot read the task from standard input: {e}")))?;
    Ok(text)
}

fn settings_error(e: &Error) -> i32 {
    eprintln!("toolhost: {e}");
    2
}
