//! `toolhost test [DIR|FILE...]`: runs Scheme test files for tools, and the Rust half of the
//! prelude's checks. It owns discovery, the workspace copy tests run in, running a test file
//! form by form, and the report; the checks themselves (`check-equal?`, `check-error?`,
//! `check-tool`) are defined in `prelude.scm`, and `check-tool` calls through the JSON call path
//! with the procedures installed here.
//!
//! Decisions:
//! - Test files are `*_test.scm` files beside the tools (in a tool folder); tool folders do not
//!   load them as tool files. With no paths, the test files of every folder the host loads run:
//!   the workspace's own as the trust check read them, and none of them when it is not trusted
//!   (the run then says which folders it did not test and exits 2, so a CI job cannot pass having
//!   tested nothing). A folder named on the command line runs as it is, trusted or not.
//! - Each test file runs in a fresh host that has loaded every tool folder the command line would
//!   load, plus the folders given. The host's workspace is a copy of the workspace (the files git
//!   would see: `.gitignore` respected, `.git` left out), made once per run and shared by the test
//!   files in name order; `--in-place` uses the real workspace instead.
//! - A test file runs one top-level form at a time: a form that fails counts as one failure
//!   (file:line and the message) and the next form still runs.
//! - `toolhost test` rewrites `(check-equal? ` into `(%check-equal? LINE ` (same line, so every
//!   other line number stays right) so each check knows its line. A check passed around as a
//!   value (`(map check-equal? ...)`) still works, without a line.
//! - `check-tool` takes the arguments as JSON text (or a hash, sent as JSON) and compares the
//!   result, as the model would receive it converted back to a Scheme value, with `equal?`. A
//!   call that fails fails the check, showing `error (kind): message`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};
use steel::parser::lexer::TokenStream;
use steel::parser::tokens::TokenType;
use steel::rerrs::SteelErr;
use steel::rvals::SteelVal;
use steel::steel_vm::engine::Engine;

use crate::bridge::{self, steel_message, Shared};
use crate::call::{self, CallRequest};
use crate::error::{Error, ErrorKind, Result};
use crate::guard;
use crate::host::{is_test_file, read_source, Host, HostBuilder};
use crate::param::ParamType;
use crate::registry::Handler;
use crate::setup::{Flags, Setup};
use crate::trust::ProjectFile;
use crate::value::{self, write_scheme};

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

/// The checks `toolhost test` gives a line number.
const CHECKS: [&str; 3] = ["check-equal?", "check-error?", "check-tool"];

/// One check that ran, or one form that failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The test file.
    pub file: String,
    /// Its line, when known.
    pub line: Option<usize>,
    /// What ran: `check-equal?`, ..., or `error` for a form that failed.
    pub what: String,
    /// Whether it passed.
    pub passed: bool,
    /// For a failure: what was expected and what came, in Scheme notation, or the error.
    pub detail: String,
}

/// Every outcome of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TestReport {
    /// In the order they happened.
    pub outcomes: Vec<Outcome>,
}

impl TestReport {
    /// How many passed.
    pub fn passed(&self) -> usize {
        self.outcomes.iter().filter(|o| o.passed).count()
    }

    /// How many failed.
    pub fn failed(&self) -> usize {
        self.outcomes.len() - self.passed()
    }

    /// The last line of a run: `N passed, N failed`.
    pub fn summary(&self) -> String {
        format!("{} passed, {} failed", self.passed(), self.failed())
    }
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

/// The test files of `dir`, in name order (see [`crate::source::folder_files`]).
pub fn test_files(dir: &Path) -> Vec<PathBuf> {
    crate::source::folder_files(dir).tests
}

/// Runs one test file in `host`, one top-level form at a time, and returns its outcomes.
///
/// # Errors
/// When the file cannot be read (it must be a regular file; see [`crate::source`]).
pub fn run_test_file(host: &mut Host, path: &Path) -> Result<Vec<Outcome>> {
    let text = read_source(path)?;
    Ok(run_test_source(host, &path.display().to_string(), &text))
}

/// Runs the text of a test file called `name` in `host`, one top-level form at a time.
fn run_test_source(host: &mut Host, name: &str, text: &str) -> Vec<Outcome> {
    let name = name.to_string();
    let rewritten = rewrite_checks(text);
    let limit = host.limits().scheme_call;
    let mut outcomes = Vec::new();
    for (start, end) in top_level_forms(&rewritten) {
        let line = rewritten[..start].matches('\n').count();
        // Padded with the lines before it, so the lines errors give are the file's.
        let form = format!("{}{}", "\n".repeat(line), &rewritten[start..end]);
        let result = host.eval_all(&form, Some(limit));
        outcomes.extend(take_results(host, &name));
        if let Err(e) = result {
            // The failure is the test file's, at the form's line; an error inside a tool adds
            // the tool file's place to the message.
            let (at, detail) = match e.file() {
                Some(file) if file != "<eval>" => (line + 1, format!("  {e}")),
                _ => (e.line().unwrap_or(line + 1), format!("  {}", e.message())),
            };
            outcomes.push(Outcome { file: name.clone(), line: Some(at), what: "error".into(), passed: false, detail });
        }
    }
    outcomes
}

/// The checks recorded in the host since the last call, oldest first, and forgets them.
fn take_results(host: &mut Host, file: &str) -> Vec<Outcome> {
    let Ok(SteelVal::ListV(results)) = host.eval("(%take-check-results)") else {
        return Vec::new();
    };
    let mut out: Vec<Outcome> = results
        .iter()
        .filter_map(|entry| {
            let SteelVal::ListV(parts) = entry else { return None };
            let parts: Vec<&SteelVal> = parts.iter().collect();
            let [line, what, passed, expected, actual] = parts[..] else { return None };
            let passed = matches!(passed, SteelVal::BoolV(true));
            let line = match line {
                SteelVal::IntV(n) => usize::try_from(*n).ok(),
                _ => None,
            };
            let what = match what {
                SteelVal::StringV(s) => s.as_str().to_string(),
                other => write_scheme(other),
            };
            let detail = format!("  expected: {}\n  actual:   {}", shown(expected), shown(actual));
            Some(Outcome { file: file.to_string(), line, what, passed, detail })
        })
        .collect();
    out.reverse();
    out
}

/// A value as a failure shows it: in Scheme notation, or the words of `(%describe "words")`.
fn shown(v: &SteelVal) -> String {
    if let SteelVal::ListV(parts) = v {
        let parts: Vec<&SteelVal> = parts.iter().collect();
        if let [SteelVal::SymbolV(tag), SteelVal::StringV(words)] = parts[..] {
            if tag.as_str() == "%describe" {
                return words.as_str().to_string();
            }
        }
    }
    write_scheme(v)
}

/// Gives each check its line: `(check-equal? a b)` on line 7 becomes `(%check-equal? 7 a b)`.
/// Only the check's name changes, so every line keeps its number.
pub fn rewrite_checks(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    let mut copied = 0;
    let mut after_open = false;
    for token in TokenStream::new(text, true, None) {
        let Ok(token) = token else { continue };
        if let (true, TokenType::Identifier(name)) = (after_open, &token.ty) {
            let name = name.resolve();
            if CHECKS.contains(&name) {
                let (start, end) = (token.span.start as usize, token.span.end as usize);
                if let (Some(before), true) = (text.get(copied..start), end <= text.len()) {
                    let line = text[..start].matches('\n').count() + 1;
                    out.push_str(before);
                    out.push_str(&format!("%{name} {line}"));
                    copied = end;
                }
            }
        }
        after_open = matches!(token.ty, TokenType::OpenParen(..));
    }
    out.push_str(text.get(copied..).unwrap_or(""));
    out
}

/// The byte ranges of a program's top-level forms (a quote and what it quotes are one form).
pub fn top_level_forms(text: &str) -> Vec<(usize, usize)> {
    let mut forms = Vec::new();
    let mut depth = 0usize;
    let mut start: Option<usize> = None;
    for token in TokenStream::new(text, true, None) {
        let Ok(token) = token else { continue };
        let (at, end) = (token.span.start as usize, (token.span.end as usize).min(text.len()));
        if matches!(token.ty, TokenType::Comment | TokenType::DatumComment) {
            continue;
        }
        if depth == 0 && start.is_none() {
            start = Some(at);
        }
        let prefix = matches!(
            token.ty,
            TokenType::QuoteTick
                | TokenType::QuasiQuote
                | TokenType::Unquote
                | TokenType::UnquoteSplice
                | TokenType::QuoteSyntax
                | TokenType::QuasiQuoteSyntax
                | TokenType::UnquoteSyntax
                | TokenType::UnquoteSpliceSyntax
        );
        match token.ty {
            TokenType::OpenParen(..) => depth += 1,
            TokenType::CloseParen(..) => depth = depth.saturating_sub(1),
            _ => {}
        }
        let closes = matches!(token.ty, TokenType::CloseParen(..)) || !prefix && depth == 0;
        if depth == 0 && closes {
            if let Some(s) = start.take() {
                forms.push((s, end));
            }
        }
    }
    // An unclosed form runs to the end, so steel reports it.
    if let Some(s) = start {
        forms.push((s, text.len()));
    }
    forms
}

/// Copies the workspace into a temporary folder: the files git would see (`.gitignore`
/// respected, `.git` left out), symbolic links as links.
///
/// # Errors
/// When a file cannot be copied.
pub fn copy_workspace(root: &Path) -> Result<tempfile::TempDir> {
    let fail = |what: &Path, e: std::io::Error| {
        Error::new(ErrorKind::Config, format!("cannot copy {} for the tests: {e}", what.display()))
    };
    let copy = tempfile::Builder::new().prefix("toolhost-test-").tempdir().map_err(|e| fail(root, e))?;
    let walker = ignore::WalkBuilder::new(root)
        .hidden(false)
        .require_git(false)
        .filter_entry(|entry| entry.file_name() != ".git")
        .build();
    for entry in walker.flatten() {
        let Ok(relative) = entry.path().strip_prefix(root) else { continue };
        if relative.as_os_str().is_empty() {
            continue;
        }
        let target = copy.path().join(relative);
        let Some(kind) = entry.file_type() else { continue };
        if kind.is_dir() {
            std::fs::create_dir_all(&target).map_err(|e| fail(entry.path(), e))?;
        } else if kind.is_symlink() {
            let link = std::fs::read_link(entry.path()).map_err(|e| fail(entry.path(), e))?;
            std::os::unix::fs::symlink(link, &target).map_err(|e| fail(entry.path(), e))?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target).map_err(|e| fail(entry.path(), e))?;
        }
    }
    Ok(copy)
}

/// Registers the procedures the prelude's `check-tool` calls through.
pub(crate) fn install(engine: &mut Engine, shared: &Arc<Shared>) {
    type Procedure = fn(&Shared, &[SteelVal]) -> Result<SteelVal>;
    let procedures: [(&str, Procedure); 3] = [
        ("%check-call", check_call),
        ("%check-call-finish", check_call_finish),
        ("%check-call-failed", check_call_failed),
    ];
    for (name, procedure) in procedures {
        let shared = Arc::clone(shared);
        let function = move |a: &[SteelVal]| procedure(&shared, a).map_err(|e| shared.raise(e));
        engine.register_value(name, SteelVal::anonymous_boxed_function(Arc::new(function)));
    }
}

/// What `check-tool` compares: the outcome `toolhost call` prints, `{"ok", "result"}` or
/// `{"ok", "error": {"kind", "message"}}`, as a Scheme hash.
fn outcome(json: &Value) -> Result<SteelVal> {
    value::json_to_scheme(json, ParamType::Any)
        .map_err(|_| Error::tool_failed("check-tool: the result cannot be turned back into a Scheme value"))
}

fn failed(kind: ErrorKind, message: String) -> Value {
    json!({"ok": false, "error": {"kind": kind.as_str(), "message": message}})
}

/// `(%check-call name json)`: a call through the JSON call path (parse, look up, tidy, convert,
/// guard). A Rust tool runs there: `("done" outcome)`. A Scheme tool's procedure lives in the
/// engine, which a Rust procedure cannot call back into, so the prelude runs it:
/// `("run" real-name arguments)`, then `%check-call-finish` or `%check-call-failed`.
fn check_call(shared: &Shared, a: &[SteelVal]) -> Result<SteelVal> {
    let [SteelVal::StringV(name), SteelVal::StringV(json)] = a else {
        return Err(Error::new(ErrorKind::BadArguments, "check-tool: expected a tool name and JSON arguments"));
    };
    let mut deferred: Option<(String, Vec<SteelVal>)> = None;
    let request = CallRequest::new(name.as_str(), json.as_str());
    let record = call::run(shared, &request, &mut |tool, values| match &tool.handler {
        Handler::Rust(_) => bridge::invoke_rust(shared, tool, &values),
        Handler::Scheme => {
            deferred = Some((tool.name().to_string(), values));
            Ok(SteelVal::Void)
        }
    });
    match deferred {
        // The call got through every step up to running the tool.
        Some((real, values)) => Ok(SteelVal::ListV(
            vec![SteelVal::StringV("run".into()), SteelVal::StringV(real.into()), SteelVal::ListV(values.into())]
                .into(),
        )),
        None => Ok(SteelVal::ListV(vec![SteelVal::StringV("done".into()), outcome(&record.to_json())?].into())),
    }
}

/// `(%check-call-finish name value)`: a Scheme tool's result as the model receives it.
fn check_call_finish(shared: &Shared, a: &[SteelVal]) -> Result<SteelVal> {
    let [SteelVal::StringV(name), result] = a else {
        return Err(Error::new(ErrorKind::BadArguments, "check-tool: expected a tool name and a result"));
    };
    let json = match value::scheme_to_json(result) {
        Ok(json) => json!({"ok": true, "result": call::cap_result(json, shared.ctx.limits.output_chars)}),
        Err(e) => failed(ErrorKind::ToolFailed, format!("{name}: its result cannot be sent back: {}", e.0)),
    };
    outcome(&json)
}

/// `(%check-call-failed name error)`: a Scheme tool's error as the model receives it, its kind
/// kept when a tool it called raised it.
fn check_call_failed(shared: &Shared, a: &[SteelVal]) -> Result<SteelVal> {
    let [SteelVal::StringV(name), error] = a else {
        return Err(Error::new(ErrorKind::BadArguments, "check-tool: expected a tool name and an error"));
    };
    let err: Option<SteelErr> = match error {
        SteelVal::Custom(custom) => {
            let custom = custom.borrow();
            steel::rvals::as_underlying_type::<SteelErr>(custom.as_ref()).cloned()
        }
        _ => None,
    };
    let (kind, message) = match &err {
        Some(err) => (shared.raised(err).map_or(ErrorKind::ToolFailed, |raised| raised.kind()), steel_message(err)),
        None => (ErrorKind::ToolFailed, write_scheme(error)),
    };
    let message = Error::new(kind, message).in_tool(name.as_str()).message().to_string();
    outcome(&failed(kind, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_get_their_line_and_every_line_keeps_its_number() {
        let text =
            "(check-equal? 1 1)\n; (check-equal? 2 2)\n(define x \"(check-tool\")\n  (check-tool \"a\" \"{}\" 1)";
        let out = rewrite_checks(text);
        assert_eq!(
            out,
            "(%check-equal? 1 1 1)\n; (check-equal? 2 2)\n(define x \"(check-tool\")\n  (%check-tool 4 \"a\" \"{}\" 1)"
        );
        assert_eq!(out.lines().count(), text.lines().count());
    }

    #[test]
    fn top_level_forms_are_split_with_quotes_and_atoms_kept_whole() {
        let text = "; c\n(define x 1)\n'(a b) x\n(f\n  (g))";
        let forms: Vec<&str> = top_level_forms(text).into_iter().map(|(s, e)| &text[s..e]).collect();
        assert_eq!(forms, ["(define x 1)", "'(a b)", "x", "(f\n  (g))"]);
    }
}
