//! `toolhost check` as a command (feature `cli`): its arguments, the host it checks, the report
//! printed.

use std::path::PathBuf;

use super::CheckReport;
use crate::error::Error;
use crate::host::{Host, HostBuilder};
use crate::setup::{Flags, Setup};

/// `toolhost check`'s arguments.
#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// Tool folders or files to check (default: the folders the host loads: the config's `tools`,
    /// a trusted project's .toolhost/tools/, --tools; an untrusted workspace's own folders are
    /// skipped, said, and exit 2). A folder named here is checked as it is, trusted or not.
    pub paths: Vec<PathBuf>,
    /// `text` for people, `json` for editors and CI.
    #[arg(long, value_enum, default_value = "text")]
    pub format: ReportFormat,
}

/// How a report is printed.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportFormat {
    /// Lines for people.
    Text,
    /// One JSON object.
    Json,
}

/// Runs `toolhost check`; returns the exit code: 0 no errors, 1 errors, 2 bad settings, or folders
/// it would check were skipped (an untrusted workspace's own: a CI job must not pass having checked
/// nothing).
pub fn command(flags: &Flags, args: &CheckArgs) -> i32 {
    let (host, setup) = match check_host(flags, &args.paths) {
        Ok(checked) => checked,
        Err(e) => {
            eprintln!("toolhost: {e}");
            return 2;
        }
    };
    let mut report = CheckReport::of(&host);
    if let Some(setup) = setup {
        report.skipped = setup.project.skipped_folders();
        report.skipped_because = Some(setup.project.skipped_because());
    }
    match args.format {
        ReportFormat::Text => print!("{}", report.to_text()),
        ReportFormat::Json => println!("{}", serde_json::to_string_pretty(&report.to_json()).unwrap_or_default()),
    }
    if !report.skipped.is_empty() {
        2
    } else {
        i32::from(!report.errors.is_empty())
    }
}

/// The host `check` looks at: the command line's host (and its setup) when no paths are given, else
/// a fresh host (built-in and shipped tools only) with the given folders and files loaded as they are.
fn check_host(flags: &Flags, paths: &[PathBuf]) -> crate::Result<(Host, Option<Setup>)> {
    if paths.is_empty() {
        let setup = Setup::discover(flags, None)?;
        if let Some(notice) = &setup.notice {
            eprintln!("{notice}");
        }
        let host = setup.builder(flags, None)?.display_to_stderr(true).build()?;
        return Ok((host, Some(setup)));
    }
    if let Some(missing) = paths.iter().find(|p| !p.exists()) {
        return Err(Error::config(format!("{} does not exist", missing.display())));
    }
    let mut host = HostBuilder::new(&flags.root).project_tools(false).display_to_stderr(true).build()?;
    for path in paths {
        if path.is_dir() {
            host.load_dir(path);
        } else {
            host.load_tool_file(path);
        }
    }
    Ok((host, None))
}
