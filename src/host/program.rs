//! Running a code-mode program ([`crate::code_mode`]): the program checked as the model wrote it
//! (brackets, macros), run inside a `let` so its definitions are its own, under one deadline with
//! what it displays kept, and its result or error written for the model, with the program's own
//! line numbers.

use steel::parser::lexer::TokenStream;
use steel::parser::tokens::TokenType;
use steel::rvals::SteelVal;

use super::scheme::line_of;
use super::Host;
use super::PROGRAM_NAME;
use crate::call::CallRecord;
use crate::code_mode::{PROGRAM_PARAM, PROGRAM_TOOL};
use crate::engine::{self, MAX_SOURCE_DEPTH};
use crate::error::{Error, ErrorKind, Result};
use crate::registry::ToolOutput;
use crate::value::write_scheme;

/// What goes before a program: on its first line, so line numbers stay the program's.
const OPEN: &str = "(let () ";

impl Host {
    /// Runs the program a call of the program tool gives, with its checked arguments.
    pub(super) fn run_program(&mut self, values: &[SteelVal]) -> Result<ToolOutput> {
        let Some(SteelVal::StringV(code)) = values.first() else {
            return Err(program_error(
                ErrorKind::BadArguments,
                format!("`{PROGRAM_PARAM}` must be the program's text"),
            ));
        };
        let code = code.as_str().to_string();
        check(&code)?;
        let wrapped = wrap(&code);
        let cap = self.shared.ctx.limits.output_chars;
        self.displayed.start(cap);
        self.shared.start_program();
        let limit = self.shared.ctx.limits.program;
        self.last_raised = None;
        let result = self.run_source(&wrapped, PROGRAM_NAME, Some(limit), false);
        let (calls, unrecorded) = self.shared.end_program();
        self.program_calls = Some((calls.into_iter().map(CallRecord::from).collect(), unrecorded));
        let (displayed, dropped) = self.displayed.take();
        let mut shown = displayed;
        if dropped > 0 {
            shown.push_str(&format!("\n[... {dropped} more characters displayed, not kept]\n"));
        }
        match result {
            Ok(values) => {
                let last = values.last().map(write_scheme).unwrap_or_default();
                if !shown.is_empty() && !last.is_empty() && !shown.ends_with('\n') {
                    shown.push('\n');
                }
                shown.push_str(&last);
                Ok(ToolOutput::from(SteelVal::StringV(shown.into())))
            }
            Err(e) => {
                let calls = self.program_calls.iter().flat_map(|(calls, _)| calls);
                let failed_call = calls.rev().find(|r| r.result.is_err());
                let failed_call = failed_call.map(|r| r.tool.clone());
                Err(explain(e, self.last_raised.take(), failed_call.as_deref(), &code, &shown))
            }
        }
    }
}

/// The program wrapped so its definitions are local to it; a program that ends with a definition
/// gets a last value (a `let` body may not end in one).
fn wrap(code: &str) -> String {
    let tail = if ends_with_definition(code) { "\nvoid)" } else { "\n)" };
    format!("{OPEN}{code}{tail}")
}

/// Whether the program's last top-level form is a `define`.
fn ends_with_definition(code: &str) -> bool {
    let mut depth = 0usize;
    let mut head_next = false;
    let mut last_defines = false;
    for token in TokenStream::new(code, false, None).flatten() {
        if matches!(token.ty, TokenType::Comment | TokenType::DatumComment) {
            continue;
        }
        if head_next {
            last_defines = match &token.ty {
                TokenType::Define | TokenType::DefineSyntax => true,
                TokenType::Identifier(name) => name.resolve().starts_with("define"),
                _ => false,
            };
            head_next = false;
        } else if depth == 0 && !matches!(token.ty, TokenType::OpenParen(..)) {
            last_defines = false;
        }
        match token.ty {
            TokenType::OpenParen(..) => {
                head_next = depth == 0;
                depth += 1;
            }
            TokenType::CloseParen(..) => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    last_defines
}

/// Where the program defines a macro, which a `let` body cannot hold.
fn macro_at(code: &str) -> Option<usize> {
    TokenStream::new(code, false, None)
        .flatten()
        .find(|t| matches!(t.ty, TokenType::DefineSyntax | TokenType::SyntaxRules))
        .map(|t| t.span.start as usize)
}

/// What must hold of the program as the model wrote it, before it runs.
fn check(code: &str) -> Result<()> {
    let empty = TokenStream::new(code, false, None)
        .flatten()
        .all(|t| matches!(t.ty, TokenType::Comment | TokenType::DatumComment));
    if empty {
        return Err(program_error(
            ErrorKind::BadArguments,
            format!("`{PROGRAM_PARAM}` holds no expression: write the program, e.g. (length (dir-entries))"),
        ));
    }
    if let Some((offset, problem)) = engine::unbalanced(code) {
        let (line, column) = place(code, offset);
        return Err(program_error(
            ErrorKind::Script,
            format!("cannot read the program: line {line}, column {column}: {problem}\n{}", shown_line(code, line)),
        ));
    }
    let scan = engine::scan(code);
    if let Some(offset) = scan.too_deep_at {
        let (line, _) = place(code, offset);
        return Err(program_error(
            ErrorKind::Script,
            format!("line {line}: brackets nest deeper than {MAX_SOURCE_DEPTH} levels"),
        ));
    }
    if let Some(offset) = macro_at(code) {
        let (line, _) = place(code, offset);
        return Err(program_error(
            ErrorKind::Script,
            format!("line {line}: a program cannot define macros; define procedures instead"),
        ));
    }
    Ok(())
}

/// The line and column (1-based) of byte `offset`.
fn place(code: &str, offset: usize) -> (usize, usize) {
    let line = line_of(code, offset).unwrap_or(1);
    let column = code[..offset.min(code.len())].rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Line `line` of the program as an error shows it.
fn shown_line(code: &str, line: usize) -> String {
    let text = code.lines().nth(line.saturating_sub(1)).unwrap_or("").trim_end();
    let text: String = if text.chars().count() > 200 {
        text.chars().take(200).chain("...".chars()).collect()
    } else {
        text.to_string()
    };
    format!("  {line} | {text}")
}

/// A program's error for the model: where in the program (its own line, shown), what failed (a
/// tool's error keeps its kind and names the tool), and what the program displayed before it.
/// `failed_call` is the tool of the program's last call that failed: where no line of the program
/// is known (an error raised deep in a Scheme tool), the line that calls it first is shown.
fn explain(error: Error, raised: Option<Error>, failed_call: Option<&str>, code: &str, displayed: &str) -> Error {
    // A tool's error that the program did not catch keeps its kind (a denial stays `denied`).
    let kind = match (&raised, error.kind()) {
        (Some(raised), ErrorKind::Script) => raised.kind(),
        (_, kind) => kind,
    };
    let line = error.line().filter(|_| error.file() == Some(PROGRAM_NAME)).or_else(|| {
        let call = code.find(&format!("({}", failed_call?))?;
        line_of(code, call)
    });
    let what = match kind {
        ErrorKind::Timeout => format!(
            "{}, the time limit of one program with every call it makes ([limits] program_s)",
            error.message().split(':').next().unwrap_or("stopped")
        ),
        _ => error.message().to_string(),
    };
    let mut message = match line {
        Some(line) => format!("line {line}: {what}\n{}", shown_line(code, line)),
        None => what,
    };
    if let Some(tool) = raised.as_ref().and_then(Error::tool).filter(|t| *t != PROGRAM_TOOL) {
        message.push_str(&format!("\n(raised by the tool call {tool}: {kind})"));
    }
    if !displayed.is_empty() {
        message.push_str("\nwhat the program displayed before it:\n");
        message.push_str(displayed);
    }
    program_error(kind, message)
}

fn program_error(kind: ErrorKind, message: String) -> Error {
    Error::new(kind, message).with_tool(PROGRAM_TOOL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_ending_in_a_definition_is_told_apart() {
        assert!(ends_with_definition("(define x 1)"));
        assert!(ends_with_definition("(+ 1 2)\n(define (f) 3)"));
        assert!(!ends_with_definition("(define x 1)\nx"));
        assert!(!ends_with_definition("(define x 1)\n(f (define-thing))"));
        assert!(!ends_with_definition("42"));
        assert!(ends_with_definition("(define x 1) ; the end\n#| more |#"));
        assert_eq!(macro_at("(display \"define-syntax\")"), None);
        assert_eq!(macro_at("1\n(define-syntax m (syntax-rules () [(_) 1]))"), Some(3));
    }
}
