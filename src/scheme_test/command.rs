//! `toolhost test` as a command (feature `cli`): its arguments, the files it runs (a trusted
//! workspace's own as the trust check read them), a fresh host for each, the lines printed.

use std::path::{Path, PathBuf};

use super::{copy_workspace, run_test_source, test_files, Outcome, TestReport};
use crate::error::{Error, Result};
use crate::guard;
use crate::host::{is_test_file, read_source, HostBuilder};
use crate::setup::{Flags, Setup};
use crate::trust::ProjectFile;

/// `toolhost test`'s arguments.
#[derive(clap::Args, Debug)]
pub struct TestArgs {
    /// Tool folders (their `*_test.scm` files run) or test files (their folder's tools load).
    /// Default: every folder the host loads (an untrusted workspace's own folders are skipped,
    /// said, and exit 2).
    pub paths: Vec<PathBuf>,
    /// Run in the real workspace instead of a temporary copy: `fs-write` in a test changes it.
    #[arg(long)]
    pub in_place: bool,
}

/// Runs `toolhost test`; returns the exit code: 0 every check passed, 1 one failed (or a tool file
/// or a test form failed), 2 bad settings, or folders it would test were skipped (an untrusted
/// workspace's own: a CI job must not pass having tested nothing).
pub fn command(flags: &Flags, args: &TestArgs) -> i32 {
    match run(flags, args) {
        Ok((report, skipped)) => {
            println!("{}", report.summary());
            if let Some(skipped) = &skipped {
                println!("{skipped}");
                return 2;
            }
            i32::from(report.failed() > 0)
        }
        Err(e) => {
            eprintln!("toolhost: {e}");
            2
        }
    }
}

/// A test file to run: one on disk (named on the command line, or in a folder the user's config or
/// `--tools` names), or one of the workspace's own as the trust check read it.
enum TestFile {
    Disk(PathBuf),
    Trusted(ProjectFile),
}

impl TestFile {
    fn path(&self) -> &Path {
        match self {
            TestFile::Disk(path) => path,
            TestFile::Trusted(file) => &file.path,
        }
    }
}

/// The report, and the line saying which of the folders it would test were skipped, if any.
fn run(flags: &Flags, args: &TestArgs) -> Result<(TestReport, Option<String>)> {
    let setup = Setup::discover(flags, None)?;
    if let Some(notice) = &setup.notice {
        eprintln!("{notice}");
    }
    // Folders loaded from disk in each test's host, besides the config's and the trusted project's.
    let mut dirs: Vec<PathBuf> = flags.tool_dirs.clone();
    let mut tests = Vec::new();
    let mut skipped = None;
    if args.paths.is_empty() {
        if let Some(project) = setup.project.loads() {
            tests.extend(project.folders.iter().flat_map(|f| f.tests.iter().cloned().map(TestFile::Trusted)));
        }
        for dir in setup.config.tools.iter().chain(&dirs) {
            tests.extend(test_files(dir).into_iter().map(TestFile::Disk));
        }
        let folders = setup.project.skipped_folders();
        if !folders.is_empty() {
            let folders: Vec<String> = folders.iter().map(|f| f.display().to_string()).collect();
            skipped = Some(format!(
                "not tested: {} ({}; trust the workspace, or name the folder to test it as it is)",
                folders.join(", "),
                setup.project.skipped_because()
            ));
        }
    }
    for path in &args.paths {
        if path.is_dir() {
            tests.extend(test_files(path).into_iter().map(TestFile::Disk));
            dirs.push(path.clone());
        } else if path.is_file() && is_test_file(path) {
            tests.push(TestFile::Disk(path.clone()));
            dirs.push(path.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf));
        } else if path.exists() {
            return Err(Error::config(format!("{} is not a test file (*_test.scm) nor a folder", path.display())));
        } else {
            return Err(Error::config(format!("{} does not exist", path.display())));
        }
    }
    let mut loaded = setup.config.tools.clone();
    if let Some(project) = setup.project.loads() {
        loaded.extend(project.folders.iter().map(|f| f.dir.clone()));
    }
    dedupe(&mut dirs, &loaded);
    let mut seen = Vec::new();
    tests.retain(|test| {
        let key = std::fs::canonicalize(test.path()).unwrap_or_else(|_| test.path().to_path_buf());
        let fresh = !seen.contains(&key);
        seen.push(key);
        fresh
    });
    let copy = if args.in_place { None } else { Some(copy_workspace(&setup.root)?) };
    let workdir = copy.as_ref().map_or_else(|| setup.root.clone(), |c| c.path().to_path_buf());
    let mut report = TestReport::default();
    let mut load_errors_shown = false;
    for test in &tests {
        // The workspace's own tools as the trust check read them, then the folders on disk.
        let mut builder = HostBuilder::new(&workdir)
            .trusted_project(setup.trust_rule.clone(), Some(setup.project.clone()))
            .config(&setup.config)?;
        builder = setup.add_mcp_servers(builder);
        for dir in &dirs {
            builder = builder.tool_dir(dir);
        }
        if flags.yes {
            builder = builder.confirmer(guard::always_yes("--yes"));
        }
        let mut host = builder.build()?;
        if !load_errors_shown {
            // A tool file that fails is a failure of the run, counted once.
            for e in host.load_errors() {
                println!("FAIL {e}");
                report.outcomes.push(Outcome {
                    file: e.file().unwrap_or("").to_string(),
                    line: e.line(),
                    what: "load".into(),
                    passed: false,
                    detail: e.message().to_string(),
                });
            }
            load_errors_shown = true;
        }
        let read = match test {
            TestFile::Disk(path) => read_source(path),
            TestFile::Trusted(file) => file.text().map(str::to_string),
        };
        let name = test.path().display().to_string();
        let outcomes = match read {
            Ok(text) => run_test_source(&mut host, &name, &text),
            // A test file that cannot be read fails, and the others still run.
            Err(e) => vec![Outcome {
                file: name,
                line: None,
                what: "read".into(),
                passed: false,
                detail: format!("  {}", e.message()),
            }],
        };
        for failure in outcomes.iter().filter(|o| !o.passed) {
            let place = failure.line.map_or_else(|| failure.file.clone(), |l| format!("{}:{l}", failure.file));
            println!("FAIL {place}: {}\n{}", failure.what, failure.detail);
        }
        let failed = outcomes.iter().filter(|o| !o.passed).count();
        let status = if failed == 0 { "ok  " } else { "FAIL" };
        println!("{status} {} ({} checks, {failed} failed)", test.path().display(), outcomes.len());
        report.outcomes.extend(outcomes);
    }
    Ok((report, skipped))
}

/// Keeps the first of each path (by its canonical form) and leaves out those in `already`.
fn dedupe(paths: &mut Vec<PathBuf>, already: &[PathBuf]) {
    let key = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let mut seen: Vec<PathBuf> = already.iter().map(|p| key(p)).collect();
    paths.retain(|p| {
        let k = key(p);
        let fresh = !seen.contains(&k);
        seen.push(k);
        fresh
    });
}
