//! The `toolhost` command line (design section 13): `repl`, `eval`, `run`, `call`, `tools`,
//! `pformat parse`, with
//! the common `--root` and `--tools` flags. These forms are a stable interface.

use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use crate::host::{Host, HostBuilder};
use crate::pformat;
use crate::schema::{self, Format};

#[derive(Parser, Debug)]
#[command(name = "toolhost", version, about = "An embedded Scheme tool host for LLM agents")]
struct Cli {
    /// The workspace folder tools work in (default: the current folder).
    #[arg(long, global = true, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Another folder of .scm tool files to load (repeatable).
    #[arg(long = "tools", global = true, value_name = "DIR")]
    tool_dirs: Vec<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The interactive REPL.
    Repl,
    /// Evaluate one expression in a full host and print its result (exit 1 on error).
    Eval {
        /// The Scheme expression.
        expr: String,
        /// Stop the evaluation after this many seconds.
        #[arg(long, value_name = "SECONDS")]
        timeout_s: Option<f64>,
    },
    /// Run a Scheme file in a full host.
    Run {
        /// The .scm file.
        file: PathBuf,
        /// Stop the script after this many seconds.
        #[arg(long, value_name = "SECONDS")]
        timeout_s: Option<f64>,
    },
    /// Call a tool through the exact path a model's call takes; print one JSON object.
    Call {
        /// The tool's name.
        tool: String,
        /// The arguments as a model would send them (an object, or a string holding one); `-`
        /// reads them from standard input.
        json: String,
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
    /// The P-format instructions and catalogue, as text for a prompt.
    Pformat,
}

/// Runs the command line; returns the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    let root = cli.root.clone().unwrap_or_else(|| PathBuf::from("."));
    // `call` answers with JSON on standard output: what scripts print goes to standard error.
    let mut builder = HostBuilder::new(root).display_to_stderr(matches!(cli.command, Command::Call { .. }));
    for dir in &cli.tool_dirs {
        builder = builder.tool_dir(dir);
    }
    let mut host = match builder.build() {
        Ok(host) => host,
        Err(e) => {
            eprintln!("toolhost: {e}");
            return 1;
        }
    };
    for problem in host.load_errors() {
        eprintln!("toolhost: warning: {problem}");
    }
    match cli.command {
        Command::Repl => crate::repl::run(host),
        Command::Eval { expr, timeout_s } => eval(&mut host, &expr, seconds(timeout_s)),
        Command::Run { file, timeout_s } => match host.run_file(&file, seconds(timeout_s)) {
            Ok(_) => 0,
            Err(e) => {
                eprintln!("toolhost: {e}");
                1
            }
        },
        Command::Call { tool, json } => call(&mut host, &tool, &json),
        Command::Tools { format } => {
            let specs = host.specs();
            let format = match format {
                CatalogueFormat::Openai => Format::OpenAi,
                CatalogueFormat::OpenaiStrict => Format::OpenAiStrict,
                CatalogueFormat::Anthropic => Format::Anthropic,
                CatalogueFormat::Mcp => Format::Mcp,
                CatalogueFormat::Pformat => {
                    println!("{}\n\n{}", pformat::instructions(), pformat::catalogue(&specs));
                    return 0;
                }
            };
            let catalogue = schema::catalogue(specs.iter().map(|t| t.as_ref()), format);
            println!("{}", serde_json::to_string_pretty(&catalogue).unwrap_or_default());
            0
        }
        Command::Pformat { command: PformatCommand::Parse } => {
            let mut text = String::new();
            if let Err(e) = std::io::stdin().read_to_string(&mut text) {
                eprintln!("toolhost: cannot read standard input: {e}");
                return 1;
            }
            println!("{}", pformat::parse_to_json(&text, &host.specs()));
            0
        }
    }
}

fn seconds(value: Option<f64>) -> Option<Duration> {
    value.and_then(|s| Duration::try_from_secs_f64(s).ok())
}

fn eval(host: &mut Host, expr: &str, limit: Option<Duration>) -> i32 {
    match host.eval_within(expr, limit).map(|v| crate::host::render_result(&v)) {
        Ok(text) => {
            if text.ends_with('\n') {
                print!("{text}");
            } else if !text.is_empty() {
                println!("{text}");
            }
            0
        }
        Err(e) => {
            eprintln!("toolhost: {e}");
            1
        }
    }
}

fn call(host: &mut Host, tool: &str, json: &str) -> i32 {
    let mut arguments = json.to_string();
    if json == "-" {
        arguments.clear();
        if let Err(e) = std::io::stdin().read_to_string(&mut arguments) {
            eprintln!("toolhost: cannot read the arguments from standard input: {e}");
            return 1;
        }
    }
    let outcome = host.call_json(tool, &arguments);
    println!("{}", outcome.to_json());
    i32::from(outcome.result.is_err())
}
