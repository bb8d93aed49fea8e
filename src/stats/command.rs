//! `toolhost stats LOG...`: its flags, and running it. Exit codes: 0 the report was printed; 1 it
//! was printed, but some input could not be read (it says which); 2 the arguments are wrong.

use std::io::Write;
use std::path::PathBuf;

use clap::ValueEnum;

/// `toolhost stats --help` beyond its first line.
pub const LONG_ABOUT: &str = "Count what session logs say.

Logs are the files `toolhost agent --log` writes; a folder is searched for .jsonl files; - reads \
standard input. The report has, in order:
  Sessions       count; turns and calls per session (median, max); how each ended; tokens where \
the log has usage
  Calls by tool  count, errors by kind, median and 95th-percentile time
  Refused shapes unknown argument names, missing arguments, wrong types (with the names), bad \
arguments (duplicate_key, not_json, not_an_object), unknown tools (with the names), P-format \
refusals by reason
  Tidy repairs   by kind: arguments_json_string, json_text_parameter, numeric_string, \
boolean_string, strict_null_dropped
  Guard          denials by rule, confirmations asked and how they were answered
  Shell reads    shell-exec commands that read files a file tool would have served (cat, head, \
tail, sed -n, grep, rg, find, ls, python -c with open, wc, ...), by pattern with examples, beside \
the fs-read, index-grep and fs-list calls
  Code mode      programs, nested calls per program, errors, where the logs have them

Lines that do not read (a last line cut short, lines that are not JSON or not UTF-8, entries of \
other log formats) are counted and skipped, never fatal. --format json prints one object of a \
stable shape (see the README).

Exit codes: 0 the report was printed; 1 it was printed, but an input could not be read; 2 the \
arguments are wrong.";

/// `toolhost stats`'s flags.
#[derive(clap::Args, Debug)]
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
