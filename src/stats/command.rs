//! `toolhost stats LOG...`: its flags, and running it. Exit codes: 0 the report was printed; 1 it
//! was printed, but some input could not be read (it says which); 2 the arguments are wrong.

use std::io::Write;
use std::path::PathBuf;

use clap::ValueEnum;

/// `toolhost stats`'s flags.
#[derive(clap::Args, Debug)]
#[command(long_about = "Count what session logs say: sessions (turns, calls, how they ended, tokens where the log \
has usage), calls by tool (errors by kind, median and 95th-percentile time), calls refused for the shape of \
their arguments (unknown argument names, missing arguments, wrong types, bad arguments, unknown tools, \
P-format refusals), tidy repairs by kind, the guard's denials and confirmations, shell-exec commands that \
read files the file tools would have served (by pattern, with examples, beside the fs-read, index-grep and \
fs-list calls), and code-mode programs where the logs have them.

Logs are the files `toolhost agent --log` writes; a folder is searched for .jsonl files; - reads standard \
input. Lines that do not read (a last line cut short, corrupt lines, entries of other log formats) are \
counted and skipped, never fatal.")]
pub struct StatsArgs {
    /// Session logs: files, folders (searched for .jsonl files), or - for standard input.
    #[arg(value_name = "LOG", required = true)]
    pub logs: Vec<PathBuf>,
    /// Text tables, or one JSON object (its shape is stable; see the README).
    #[arg(long, value_enum, default_value = "text")]
    pub format: StatsFormat,
}

/// `--format`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatsFormat {
    /// Tables for a person.
    Text,
    /// One JSON object.
    Json,
}

/// Runs `toolhost stats`; returns the exit code.
pub fn command(args: &StatsArgs) -> i32 {
    let report = super::stats(&args.logs);
    let text = match args.format {
        StatsFormat::Text => report.to_text(),
        StatsFormat::Json => format!("{}\n", serde_json::to_string_pretty(&report.to_json()).unwrap_or_default()),
    };
    let mut stdout = std::io::stdout().lock();
    // A reader that went away (`| head`) is not worth a panic.
    let _ = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush());
    for unreadable in &report.inputs.unreadable {
        eprintln!("toolhost: could not read {}: {}", unreadable.path, unreadable.error);
    }
    i32::from(!report.inputs.unreadable.is_empty())
}
