//! The `toolhost` command line (design section 13): `repl`, `eval`, `run`, `call`, `tools`,
//! `pformat parse`, `trust`, `untrust` and `mcp`, with the common `--root`, `--config`, `--tools` and
//! `--yes` flags. These forms are a stable interface. Exit codes: 0 done, 1 the command failed (a
//! call's error, a script's error), 2 the settings are wrong (a bad config file, a missing folder).

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use crate::call::CallRequest;
use crate::error::ErrorKind;
use crate::host::Host;
use crate::launch::{ask_yes_no, on_terminal, settings_error, terminal_confirmer, tty_confirmer, worker_spec, Asker};
use crate::pformat;
use crate::schema::{self, Format};
use crate::setup::{Flags, Setup};
use crate::trust;
use crate::worker::WorkerHandle;

/// What `--help` says about the shell sandbox, after the commands and flags.
const SANDBOX_HELP: &str = "\
The shell sandbox: shell-exec commands may write only beneath the workspace, their own temporary
folder ($TMPDIR) and the folders [shell] writable names; they have no network; every process they
start ends with the call; environment variables named like secrets (*KEY*, *SECRET*, *TOKEN*,
*PASSWORD*) are not passed. To turn parts of it off, in the config's [shell] section:
  network = true            let commands use the network
  background = true         let processes a command starts outlive its call
  writable = [\"/some/dir\"]  more folders commands may write to
  env_keep = [\"NAME\"]       pass a variable that looks like a secret (env_drop: drop more)
  sandbox = \"best-effort\"   run with what this kernel can confine (a warning says what not)
  sandbox = \"off\"           run commands unconfined, with your rights
By default (sandbox = \"required\") a command the kernel cannot confine is not run. See SECURITY.md.";

#[derive(Parser, Debug)]
#[command(name = "toolhost", version, about = "An embedded Scheme tool host for LLM agents", after_help = SANDBOX_HELP)]
struct Cli {
    /// The workspace folder tools work in (default: the current folder).
    #[arg(long, global = true, value_name = "DIR")]
    root: Option<PathBuf>,
    /// A config file to use instead of the workspace's toolhost.toml (trusted: you named it).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Another folder of .scm tool files to load (repeatable; trusted: you named it).
    #[arg(long = "tools", global = true, value_name = "DIR")]
    tool_dirs: Vec<PathBuf>,
    /// Answer yes to every confirmation the guard asks for.
    #[arg(long, global = true)]
    yes: bool,
    /// Run `call`'s tool in this process instead of a worker process (see `[limits] isolate`).
    #[arg(long, global = true)]
    no_isolate: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The interactive REPL.
    #[command(long_about = "The interactive REPL: type Scheme and every expression on the line is evaluated and \
printed in Scheme notation; tools are procedures, (fs-read \"src/main.rs\" 120 50).

Input continues on the next line until its brackets balance. Tab completes tool names, Scheme \
procedures and :commands, listing the candidates when there are several.

  :help NAME         a tool's signature, description and parameters (:help alone: this list)
  :tools             every tool with its signature
  :call NAME JSON    call a tool with JSON arguments, exactly as a model's call runs
  :reload            load the tool files again; says which tools were added, changed, removed
                     (the workspace's own load only while trusted, as at start-up)
  :load FILE         load one more tool file (and again on each :reload)
  :quit              leave (also Ctrl-D)

Ctrl-C stops what runs (a Scheme loop, a shell-exec command and its processes) and gives the \
prompt back; twice quits. History is kept in ~/.toolhost_history ($TOOLHOST_HISTORY to move it).")]
    Repl,
    /// Evaluate one expression in a full host and print its result (exit 1 on error).
    Eval {
        /// The Scheme expression.
        expr: String,
        /// Stop the evaluation after this many seconds (a positive number).
        #[arg(long, value_name = "SECONDS", value_parser = positive_seconds, allow_negative_numbers = true)]
        timeout_s: Option<Duration>,
    },
    /// Run a Scheme file in a full host.
    Run {
        /// The .scm file.
        file: PathBuf,
        /// Stop the script after this many seconds (a positive number).
        #[arg(long, value_name = "SECONDS", value_parser = positive_seconds, allow_negative_numbers = true)]
        timeout_s: Option<Duration>,
    },
    /// Call a tool through the exact path a model's call takes; print one JSON object.
    Call {
        /// The tool's name.
        tool: String,
        /// The arguments as a model would send them (an object, or a string holding one); `-`
        /// reads them from standard input; left out means {}.
        json: Option<String>,
        /// Print the whole call record (arguments as received and tidied, notes, the guard's
        /// decision, result or error, time taken) instead of the answer alone.
        #[arg(long)]
        record: bool,
    },
    /// Print the tool catalogue in a provider's shape (a JSON array; for pformat, the
    /// instructions and catalogue text).
    Tools {
        /// The shape.
        #[arg(long, value_enum, default_value = "openai")]
        format: CatalogueFormat,
    },
    /// The P-format text dialect for models without native tool calls.
    Pformat {
        #[command(subcommand)]
        command: PformatCommand,
    },
    /// Trust the workspace's own toolhost.toml and .toolhost/tools/ (recorded with a digest in your
    /// config folder; a changed file makes it untrusted again).
    Trust,
    /// Forget the workspace's trust.
    Untrust,
    /// The worker process `call` runs the host in: answers requests on descriptor 3.
    #[command(hide = true)]
    Worker {
        /// Serve the Rust tools alone, without the interpreter or tool files: `call` of a
        /// built-in tool starts its worker so.
        #[arg(long)]
        rust_tools: bool,
        /// Whoever started it has a terminal on standard error, so confirmations are asked on the
        /// terminal (the worker's own standard error is a pipe to its parent).
        #[arg(long)]
        terminal: bool,
        /// Take `toolhost agent`'s safe defaults (confirm shell-exec, fs-write and fs-edit when the
        /// config has no guard rule).
        #[arg(long)]
        agent_defaults: bool,
    },
    #[cfg(feature = "agent")]
    /// Run the agent loop on TASK with the configured model; print its final answer.
    #[command(after_help = crate::agent::command::AFTER_HELP)]
    Agent(crate::agent::command::AgentArgs),
    #[cfg(feature = "agent")]
    /// Run a session log's calls again without a model; exit 1 if any result differs.
    Replay(crate::agent::command::ReplayArgs),
    #[cfg(feature = "mcp")]
    /// Serve every tool of the host as an MCP server over standard input and output, or over
    /// streamable HTTP with --http.
    Mcp(crate::mcp::McpArgs),
    /// Load tool files in a fresh host and report each tool's signature and source, load errors
    /// (exit 1) and warnings (missing descriptions, strict-mode refusals).
    Check(crate::check::CheckArgs),
    /// Run Scheme test files (*_test.scm beside the tools) in a copy of the workspace; ends with
    /// `N passed, N failed`, exit 1 on any failure.
    Test(crate::scheme_test::TestArgs),
    /// Count what session logs say: sessions, calls by tool, refused shapes, tidy repairs, guard
    /// decisions, shell reads the file tools would have served, code mode.
    #[command(long_about = crate::stats::command::LONG_ABOUT)]
    Stats(crate::stats::StatsArgs),
}

#[derive(Subcommand, Debug)]
enum PformatCommand {
    /// Read model text on standard input; print a JSON array with one entry per tool-call tag:
    /// {"name":N,"arguments":{...}} or {"error":M}.
    Parse,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum CatalogueFormat {
    Openai,
    /// OpenAI tools rewritten for strict mode (`"strict": true`), or sent as they are with
    /// `"strict": false` when a schema cannot be expressed strictly.
    OpenaiStrict,
    Anthropic,
    Mcp,
    /// OpenAI tools for Gemini's OpenAI-compatible endpoint: schemas in Gemini's dialect; the
    /// tools it cannot take are left out, each named on standard error with the reason.
    Gemini,
    /// The P-format instructions and catalogue, as text for a prompt.
    Pformat,
    /// Code mode's catalogue: every tool as a Scheme procedure, as the `scheme` program tool's
    /// description shows it.
    Code,
}

/// Prints a line on standard output. A reader that went away (`toolhost call ... | head`) is not
/// an error worth a panic, as `println!` would make it: the line is dropped quietly.
macro_rules! out {
    ($($arg:tt)*) => {{
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, $($arg)*).and_then(|()| stdout.flush());
    }};
}

/// Keeps standard output for the answer alone: the real standard output is moved to a private
/// descriptor, returned, and descriptor 1 is pointed at standard error. Whatever else writes to
/// descriptor 1 from then on (a script through steel's `stdout` port, steel's own diagnostics)
/// lands on standard error and cannot forge or garble the answer. `None` if the descriptors could
/// not be moved (the answer then goes to standard output as it is).
fn private_stdout() -> Option<std::fs::File> {
    let _ = std::io::stdout().lock().flush();
    let answer = rustix::io::fcntl_dupfd_cloexec(std::io::stdout(), 3).ok()?;
    rustix::stdio::dup2_stdout(std::io::stderr()).ok()?;
    Some(std::fs::File::from(answer))
}

/// Runs the command line; returns the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    let flags = Flags {
        root: cli.root.clone().unwrap_or_else(|| PathBuf::from(".")),
        config: cli.config.clone(),
        tool_dirs: cli.tool_dirs.clone(),
        yes: cli.yes,
        no_isolate: cli.no_isolate,
    };
    match &cli.command {
        Command::Trust => return trust_workspace(&flags),
        Command::Untrust => return untrust_workspace(&flags),
        #[cfg(feature = "agent")]
        Command::Agent(args) => return crate::agent::command::agent(&flags, args),
        #[cfg(feature = "agent")]
        Command::Replay(args) => return crate::agent::command::replay(&flags, args),
        #[cfg(feature = "mcp")]
        Command::Mcp(args) => return crate::mcp::serve(&flags, args),
        Command::Check(args) => return crate::check::command(&flags, args),
        Command::Test(args) => return crate::scheme_test::command(&flags, args),
        Command::Stats(args) => return crate::stats::command::command(args),
        _ => {}
    }
    if let Command::Worker { rust_tools, terminal, agent_defaults } = cli.command {
        let confirmer = terminal.then(tty_confirmer);
        let setup = Setup::discover(&flags, None).map(|mut setup| {
            if agent_defaults {
                setup.add_agent_defaults();
            }
            setup
        });
        return match setup.and_then(|setup| setup.builder(&flags, confirmer)) {
            Ok(builder) => crate::worker::serve(builder, rust_tools),
            Err(e) => settings_error(&e),
        };
    }
    // `call` answers on standard output and nothing else may: see `private_stdout`.
    let answer_out = if matches!(cli.command, Command::Call { .. }) { private_stdout() } else { None };
    // The REPL on a terminal asks whether to trust a workspace instead of skipping its files.
    let interactive = matches!(cli.command, Command::Repl) && on_terminal();
    // And it asks again when `:reload` finds the workspace's files changed.
    let ask: trust::Ask =
        Arc::new(|message: &str| ask_yes_no(&format!("{message}.\nTrust this workspace now? [y/N] ")));
    let setup = match crate::launch::settings(&flags, interactive.then_some(ask)) {
        Ok(setup) => setup,
        Err(code) => return code,
    };
    if let Command::Call { tool, json, record } = &cli.command {
        let json = json.as_deref().unwrap_or("{}");
        if setup.config.limits.isolate.unwrap_or(true) && !flags.no_isolate {
            return isolated_call(&flags, &setup, tool, json, *record, answer_out);
        }
        if let Some(host) = rust_tool_host(&flags, &setup, tool) {
            let Some(arguments) = call_arguments(json) else { return 1 };
            let cancel = host.cancel();
            if let Err(e) = ctrlc::set_handler(move || cancel.cancel()) {
                eprintln!("toolhost: Ctrl-C will not interrupt the call: {e}");
            }
            return answer(&host.run_call(&CallRequest::new(tool.as_str(), arguments)), *record, answer_out);
        }
    }
    let builder = match setup.builder(&flags, terminal_confirmer()) {
        Ok(builder) => builder,
        Err(e) => return settings_error(&e),
    };
    // `call` answers with JSON on standard output: what scripts print goes to standard error.
    let builder = builder.display_to_stderr(matches!(cli.command, Command::Call { .. }));
    let mut host = match builder.build() {
        Ok(host) => host,
        Err(e) if e.kind() == ErrorKind::Config => return settings_error(&e),
        Err(e) => {
            eprintln!("toolhost: {e}");
            return 1;
        }
    };
    for problem in host.load_errors() {
        eprintln!("toolhost: warning: {problem}");
    }
    if !matches!(cli.command, Command::Repl) {
        // Ctrl-C stops a running evaluation or call (the REPL installs its own).
        crate::repl::on_interrupt(host.interrupter());
    }
    match cli.command {
        Command::Repl => crate::repl::run(host),
        Command::Eval { expr, timeout_s } => eval(&mut host, &expr, timeout_s),
        Command::Run { file, timeout_s } => match host.run_file(&file, timeout_s) {
            Ok(_) => 0,
            Err(e) => {
                eprintln!("toolhost: {e}");
                1
            }
        },
        Command::Call { tool, json, record } => {
            call(&mut host, &tool, json.as_deref().unwrap_or("{}"), record, answer_out)
        }
        Command::Tools { format } => {
            // What a model is offered by default: each tool, the program tool left out.
            let specs = crate::code_mode::offered(&host.specs(), crate::code_mode::ToolsAs::Json);
            let format = match format {
                CatalogueFormat::Openai => Format::OpenAi,
                CatalogueFormat::OpenaiStrict => Format::OpenAiStrict,
                CatalogueFormat::Anthropic => Format::Anthropic,
                CatalogueFormat::Mcp => Format::Mcp,
                CatalogueFormat::Gemini => Format::Gemini,
                CatalogueFormat::Pformat => {
                    out!("{}\n\n{}", pformat::instructions(), pformat::catalogue(&specs));
                    return 0;
                }
                CatalogueFormat::Code => {
                    out!("{}", crate::code_mode::catalogue(&specs));
                    return 0;
                }
            };
            for (tool, refusal) in schema::left_out(specs.iter().map(|t| t.as_ref()), format) {
                eprintln!("toolhost: {tool} is left out: {refusal}");
            }
            let catalogue = schema::catalogue(specs.iter().map(|t| t.as_ref()), format);
            out!("{}", serde_json::to_string_pretty(&catalogue).unwrap_or_default());
            0
        }
        Command::Pformat { command: PformatCommand::Parse } => {
            let mut text = String::new();
            if let Err(e) = std::io::stdin().read_to_string(&mut text) {
                eprintln!("toolhost: cannot read standard input: {e}");
                return 1;
            }
            out!("{}", pformat::parse_to_json(&text, &host.specs()));
            0
        }
        Command::Trust | Command::Untrust => 0,
        #[cfg(feature = "agent")]
        Command::Agent(_) | Command::Replay(_) => 0,
        #[cfg(feature = "mcp")]
        Command::Mcp(_) => 0,
        Command::Check(_) | Command::Test(_) | Command::Stats(_) | Command::Worker { .. } => 0,
    }
}

fn trust_workspace(flags: &Flags) -> i32 {
    match trust::trust(&flags.root) {
        Ok(record) => {
            let files = record.shown_files();
            if files.is_empty() {
                out!(
                    "trusted {} (it has no toolhost.toml or tool files yet; files added later need `toolhost trust` again)",
                    record.root.display()
                );
            } else {
                out!("trusted {}: {} (until one of them changes)", record.root.display(), files.join(", "));
            }
            0
        }
        Err(e) => settings_error(&e),
    }
}

fn untrust_workspace(flags: &Flags) -> i32 {
    match trust::untrust(&flags.root) {
        Ok(true) => {
            out!("forgot the trust of {}", flags.root.display());
            0
        }
        Ok(false) => {
            out!("{} was not trusted", flags.root.display());
            0
        }
        Err(e) => settings_error(&e),
    }
}

/// Reads a `--timeout-s` value: a positive, finite number of seconds.
fn positive_seconds(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text.trim().parse().map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !seconds.is_finite() || seconds <= 0.0 {
        return Err(format!("the timeout must be a positive number of seconds, got {text}"));
    }
    Duration::try_from_secs_f64(seconds).map_err(|_| format!("{text} seconds is too long a timeout"))
}

fn eval(host: &mut Host, expr: &str, limit: Option<Duration>) -> i32 {
    match host.eval_all(expr, limit).map(|values| crate::host::render_values(&values)) {
        Ok(text) => {
            crate::engine::end_display_line();
            if !text.is_empty() {
                out!("{text}");
            }
            0
        }
        Err(e) => {
            eprintln!("toolhost: {e}");
            1
        }
    }
}

/// The arguments of `call`: the JSON given, or standard input for `-`.
fn call_arguments(json: &str) -> Option<String> {
    if json != "-" {
        return Some(json.to_string());
    }
    let mut arguments = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut arguments) {
        eprintln!("toolhost: cannot read the arguments from standard input: {e}");
        return None;
    }
    Some(arguments)
}

/// The host of the Rust tools alone, when `tool` is one of them: a built-in tool needs no
/// interpreter, so its call compiles no Scheme. (A tool file cannot take a built-in tool's name,
/// so the name decides.)
fn rust_tool_host(flags: &Flags, setup: &Setup, tool: &str) -> Option<crate::RustToolHost> {
    let host = setup.builder(flags, terminal_confirmer()).and_then(crate::HostBuilder::build_rust_tools).ok()?;
    host.has_tool(tool).then_some(host)
}

/// `call` with the host in a worker process (design section 18).
fn isolated_call(
    flags: &Flags,
    setup: &Setup,
    tool: &str,
    json: &str,
    record: bool,
    answer_out: Option<std::fs::File>,
) -> i32 {
    let Some(mut spec) = worker_spec(flags, setup, Asker::Terminal) else {
        eprintln!("toolhost: cannot tell how to start the worker process (use --no-isolate)");
        return 1;
    };
    if rust_tool_host(flags, setup, tool).is_some() {
        spec.args.push("--rust-tools".to_string());
    }
    let mut worker = match WorkerHandle::spawn(spec) {
        Ok(worker) => worker,
        Err(e) => {
            eprintln!("toolhost: {e}");
            return 1;
        }
    };
    for problem in worker.load_errors() {
        eprintln!("toolhost: warning: {problem}");
    }
    // Ctrl-C stops the call in the worker (a shell-exec command and its processes too), as it
    // stops one in process.
    let interrupter = worker.interrupter();
    if let Err(e) = ctrlc::set_handler(move || interrupter.interrupt()) {
        eprintln!("toolhost: Ctrl-C will not interrupt the call: {e}");
    }
    let Some(arguments) = call_arguments(json) else { return 1 };
    let outcome = worker.call(tool, &arguments);
    answer(&outcome, record, answer_out)
}

/// Prints `call`'s answer on `answer_out` (standard output kept private) and gives the exit code.
fn answer(outcome: &crate::call::CallRecord, record: bool, answer_out: Option<std::fs::File>) -> i32 {
    let answer = if record { outcome.to_record_json() } else { outcome.to_json() };
    match answer_out {
        Some(mut file) => {
            // One write: the file is unbuffered, and JSON is displayed a token at a time.
            let _ = file.write_all(format!("{answer}\n").as_bytes());
        }
        None => out!("{answer}"),
    }
    i32::from(outcome.result.is_err())
}

fn call(host: &mut Host, tool: &str, json: &str, record: bool, answer_out: Option<std::fs::File>) -> i32 {
    let Some(arguments) = call_arguments(json) else { return 1 };
    let outcome = host.call_json(tool, &arguments);
    answer(&outcome, record, answer_out)
}
