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
use crate::host::{read_source, Host};
use crate::param::ParamType;
use crate::registry::Handler;
use crate::value::{self, write_scheme};

/// `toolhost test` itself: its arguments, which files it runs, what it prints.
#[cfg(feature = "cli")]
mod command;
#[cfg(feature = "cli")]
pub use command::{command, TestArgs};

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
        Handler::Rust(_) | Handler::RustOutput(_) => bridge::invoke_rust(shared, tool, &values),
        Handler::Scheme => {
            deferred = Some((tool.name().to_string(), values));
            Ok(SteelVal::Void.into())
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
