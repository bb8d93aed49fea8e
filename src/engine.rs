//! Building the steel engine that runs tool scripts and REPL input, with a deliberate module set
//! (design section 10): the language (lists, strings, hash maps, numbers, macros, errors,
//! `map`/`filter`/`cond`/`let*`/`with-handler` from steel's stdlib) and no steel procedure that
//! reaches files, processes, the network, threads, dynamic libraries, the environment or `eval`, so
//! scripts reach those only through the guarded tools. It is also what start-up costs: about an
//! eighth of `Engine::new()`, which loads steel's whole prelude and macro kernel.
//!
//! The modules that reach outside (`steel/filesystem`, `steel/process`, `steel/tcp`, `steel/http`,
//! ...) are never registered, so neither their names, their `#%prim.` aliases nor
//! `require-builtin` reach them. The one door left is steel's module loader, which reads any
//! `(require "path.scm")` from disk: untrusted source containing `require` is refused before it is
//! compiled ([`check_source`]). Not available as a result: steel's `struct` (it needs the ~80 ms
//! macro kernel).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use steel::parser::lexer::TokenStream;
use steel::parser::tokens::TokenType;
use steel::rerrs::{ErrorKind, SteelErr};
use steel::rvals::SteelVal;
use steel::steel_vm::builtin::BuiltInModule;
use steel::steel_vm::engine::Engine;
use steel::steel_vm::primitives::*;

/// The steel/meta procedures scripts get: an allowlist, because the module also holds ways to reach
/// the compiler and the module loader (`eval`, `#%expand`, `load`, which read files from anywhere),
/// new engines with every module, dynamic libraries, the environment and async executors. Kept:
/// what stdlib.scm uses, errors, boxes, continuations and procedure introspection.
const META_ALLOWED: &[&str] = &[
    // stdlib.scm
    "#%black-box",
    "#%function-ptr-table",
    "#%function-ptr-table-add",
    "#%function-ptr-table-get",
    "#%native-fn-ptr-doc",
    "#%push-module-context",
    "#%pop-module-context",
    "#%expand-syntax-case",
    "#%match-syntax-case",
    "#%macro-case-bindings",
    "box",
    "unbox",
    "set-box!",
    "#%box",
    "#%unbox",
    "#%set-box!",
    "call-with-exception-handler",
    "call/cc",
    "call-with-current-continuation",
    "current-function-span",
    "error-with-span",
    "make-will-executor",
    "will-execute",
    "will-register",
    // for tool authors
    "raise-error",
    "error-object-message",
    "value->string",
    "function-name",
    "function-arity",
    "arity?",
    "multi-arity?",
    "arity-object->list",
    "assert!",
    "iter-next!",
    "value->iterator",
    "make-weak-box",
    "weak-box-value",
    "box-strong",
    "unbox-strong",
    "set-strong-box!",
    "struct->list",
    "#%struct-property-ref",
    "#%struct-update",
];

/// The steel/threads procedures scripts get: thread-local storage for stdlib.scm. Threads, locks
/// and channels are left out: a lock or a channel can block inside a Rust procedure, where the
/// per-call time limit cannot stop it.
const THREADS_ALLOWED: &[&str] = &["make-tls", "get-tls", "set-tls!", "current-thread-id"];

fn threads_disabled(_args: &[SteelVal]) -> steel::rvals::Result<SteelVal> {
    Err(SteelErr::new(ErrorKind::Generic, "threads are not available to tool scripts".to_string()))
}

/// A copy of `module` holding only the names `keep` accepts. (A clone would share its table with
/// steel's own module, which `Engine::new()` still needs intact for trusted scripts.)
fn filtered(module: &BuiltInModule, keep: impl Fn(&str) -> bool) -> BuiltInModule {
    let mut out = BuiltInModule::new(module.name().to_string());
    for name in module.names() {
        if keep(&name) {
            out.register_value(&name, module.get(name.clone()));
        }
    }
    out
}

/// The builtin modules scripts get. `PORT_MODULE_WITHOUT_FILESYSTEM` is steel's `steel/ports`
/// whose file procedures refuse.
fn script_modules() -> Vec<BuiltInModule> {
    let mut modules = Vec::new();
    macro_rules! take { ($($m:ident),*) => { $( modules.push($m.with(|m| m.clone())); )* } }
    take!(
        MAP_MODULE,
        SET_MODULE,
        LIST_MODULE,
        STRING_MODULE,
        SYMBOL_MODULE,
        VECTOR_MODULE,
        IMMUTABLE_VECTOR_MODULE,
        STREAM_MODULE,
        IDENTITY_MODULE,
        NUMBER_MODULE,
        EQUALITY_MODULE,
        ORD_MODULE,
        TRANSDUCER_MODULE,
        CONSTANTS_MODULE,
        SYNTAX_MODULE,
        RESULT_MODULE,
        OPTION_MODULE,
        TYPE_ID_MODULE,
        BYTEVECTOR_MODULE
    );
    modules.push(META_MODULE.with(|m| filtered(m, |n| META_ALLOWED.contains(&n))));
    // Reading standard input blocks inside a Rust procedure, where the time limit cannot stop it,
    // and under a future MCP server standard input is the protocol: scripts get no stdin.
    modules.push(IO_MODULE.with(|m| filtered(m, |n| n != "read-to-string")));
    let stdin_names = ["stdin", "#%default-input-port"];
    let mut ports = PORT_MODULE_WITHOUT_FILESYSTEM.with(|m| filtered(m, |n| !stdin_names.contains(&n)));
    for name in stdin_names {
        ports.register_value(name, SteelVal::FuncV(stdin_unavailable));
    }
    modules.push(ports);
    modules
}

fn stdin_unavailable(_args: &[SteelVal]) -> steel::rvals::Result<SteelVal> {
    Err(SteelErr::new(ErrorKind::Generic, "standard input is not available to tool scripts".to_string()))
}

/// A new engine for tool scripts. `trusted` scripts get steel's whole standard engine instead.
/// `display` and friends write to standard error when `output_to_stderr`, so they cannot corrupt a
/// JSON answer on standard output.
pub(crate) fn new_engine(trusted: bool, output_to_stderr: bool, captured: &Captured) -> Result<Engine, String> {
    let mut engine = if trusted { Engine::new() } else { script_engine()? };
    install_display(&mut engine, output_to_stderr, captured.clone());
    install_json(&mut engine);
    Ok(engine)
}

fn script_engine() -> Result<Engine, String> {
    let mut engine = Engine::new_raw_no_kernel();
    let prims = private_prim_module();
    engine.register_module(prims.clone());
    for (key, value) in prims.inner_map().iter() {
        engine.register_value(key, value.clone());
    }
    let mut threads = THREADING_MODULE.with(|m| filtered(m, |n| THREADS_ALLOWED.contains(&n)));
    threads.register_value("spawn-native-thread", SteelVal::FuncV(threads_disabled));
    let mut base = BuiltInModule::new("steel/base");
    let mut requires = String::new();
    let mut aliases = String::new();
    for module in script_modules() {
        requires.push_str(&format!("(require-builtin {})\n", module.name()));
        aliases.push_str(&format!("(require-builtin {} as #%prim.)\n", module.name()));
        base = base.with_module(module.clone());
        engine.register_module(module);
    }
    // Thread-local storage for stdlib.scm, under #%prim. only.
    aliases.push_str(&format!("(require-builtin {} as #%prim.)\n", threads.name()));
    base = base.with_module(threads.clone());
    engine.register_module(threads);
    engine.register_module(base);
    engine.register_module(MUTABLE_VECTOR_MODULE.with(|m| m.clone()));
    engine.register_module(PRIVATE_READER_MODULE.with(|m| m.clone()));
    requires.push_str(&aliases);
    for program in [requires.as_str(), steel::stdlib::PRELUDE] {
        engine
            .compile_and_run_raw_program(program.to_string())
            .map_err(|e| format!("the engine's base library failed to load: {e}"))?;
    }
    Ok(engine)
}

fn boxed(f: impl Fn(&[SteelVal]) -> steel::rvals::Result<SteelVal> + Send + Sync + 'static) -> SteelVal {
    SteelVal::anonymous_boxed_function(Arc::new(f))
}

/// Whether what scripts last displayed on standard output did not end its line.
static MID_LINE: AtomicBool = AtomicBool::new(false);

/// Ends the line scripts' `display` output left open, so what is printed next (a value, the REPL's
/// prompt, which redraws its line) does not hide it. Only the command line prints so.
#[cfg(feature = "cli")]
pub(crate) fn end_display_line() {
    if MID_LINE.swap(false, Ordering::Relaxed) {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(b"\n");
        let _ = stdout.flush();
    }
}

/// What a code-mode program displays: kept for its result while it runs, instead of printed. At
/// most `cap` characters are kept (a program may print without end); the rest are counted.
#[derive(Clone, Default)]
pub(crate) struct Captured(Arc<Mutex<Option<Capture>>>);

struct Capture {
    text: String,
    cap: usize,
    dropped: usize,
}

impl Captured {
    /// Keeps what is displayed from now on, up to `cap` characters.
    pub fn start(&self, cap: usize) {
        if let Ok(mut captured) = self.0.lock() {
            *captured = Some(Capture { text: String::new(), cap, dropped: 0 });
        }
    }

    /// Stops keeping: what was displayed, and how many characters past the cap were not kept.
    pub fn take(&self) -> (String, usize) {
        match self.0.lock().ok().and_then(|mut c| c.take()) {
            Some(capture) => (capture.text, capture.dropped),
            None => (String::new(), 0),
        }
    }

    /// Keeps `out` when a program runs; false when none does.
    fn keep(&self, out: &str) -> bool {
        let Ok(mut captured) = self.0.lock() else { return false };
        let Some(capture) = captured.as_mut() else { return false };
        let room = capture.cap.saturating_sub(capture.text.len());
        if out.len() <= room {
            capture.text.push_str(out);
        } else {
            let mut cut = room;
            while !out.is_char_boundary(cut) {
                cut -= 1;
            }
            capture.text.push_str(&out[..cut]);
            capture.dropped = capture.dropped.saturating_add(out[cut..].chars().count());
        }
        true
    }
}

/// `display`, `displayln` and `newline`. (steel's own come with its print library, which costs as
/// much again as everything else loaded here.)
fn install_display(engine: &mut Engine, to_stderr: bool, captured: Captured) {
    let show = move |args: &[SteelVal], newline: bool| -> steel::rvals::Result<SteelVal> {
        let mut out = String::new();
        for (i, arg) in args.iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            match arg {
                SteelVal::StringV(s) => out.push_str(s.as_str()),
                other => out.push_str(&other.to_string()),
            }
        }
        if newline {
            out.push('\n');
        }
        if captured.keep(&out) {
            return Ok(SteelVal::Void);
        }
        if to_stderr {
            let _ = std::io::stderr().lock().write_all(out.as_bytes());
        } else if !out.is_empty() {
            let mut stdout = std::io::stdout().lock();
            let _ = stdout.write_all(out.as_bytes());
            let _ = stdout.flush();
            MID_LINE.store(!out.ends_with('\n'), Ordering::Relaxed);
        }
        Ok(SteelVal::Void)
    };
    let show = Arc::new(show);
    let (line, newline) = (Arc::clone(&show), Arc::clone(&show));
    engine.register_value("display", boxed(move |a| show(a, false)));
    engine.register_value("displayln", boxed(move |a| line(a, true)));
    engine.register_value("newline", boxed(move |_| newline(&[], true)));
}

/// `string->jsexpr` and `value->jsexpr-string`, on toolhost's own value mapping (integers stay
/// integers, object keys are strings, NaN is an error), in place of steel's JSON module, which
/// panics on NaN.
fn install_json(engine: &mut Engine) {
    let fail = |m: String| SteelErr::new(ErrorKind::Generic, m);
    engine.register_value(
        "string->jsexpr",
        boxed(move |a| match a {
            [SteelVal::StringV(text)] => {
                let value: serde_json::Value =
                    serde_json::from_str(text.as_str()).map_err(|e| fail(format!("string->jsexpr: {e}")))?;
                crate::value::json_to_scheme(&value, crate::param::ParamType::Any)
                    .map_err(|_| fail("string->jsexpr: the JSON nests too deeply".into()))
            }
            _ => Err(fail("string->jsexpr: expected one string".into())),
        }),
    );
    engine.register_value(
        "value->jsexpr-string",
        boxed(move |a| match a {
            [value] => crate::value::scheme_to_json(value)
                .map(|json| SteelVal::StringV(json.to_string().into()))
                .map_err(|e| fail(format!("value->jsexpr-string: {}", e.0))),
            _ => Err(fail("value->jsexpr-string: expected one value".into())),
        }),
    );
}

/// What a look at a program's tokens finds before it is compiled.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// The byte offset of a `require`, which untrusted source may not use: steel's module loader
    /// would read the named file from anywhere on disk.
    pub require_at: Option<usize>,
    /// The names of `(register-tool "name" ...)` forms, so the host can bind them before the
    /// program runs and the program can call the tools it registers.
    pub tool_names: Vec<String>,
    /// The names of `(define-tool (name ...) ...)` forms: with `tool_names`, every tool the
    /// program means to define, so a file that fails can leave its tools saying why.
    pub defined_tools: Vec<String>,
    /// The byte offset where brackets first nest deeper than [`MAX_SOURCE_DEPTH`]: steel's
    /// parser and compiler recurse per level and would overflow the stack.
    pub too_deep_at: Option<usize>,
}

/// How deeply brackets may nest in a program. Real code stays far below; steel's recursive parser
/// and compiler overflow a thread's stack a few thousand levels down.
pub(crate) const MAX_SOURCE_DEPTH: usize = 256;

/// Reads a program's tokens (without compiling it).
pub(crate) fn scan(source: &str) -> Scan {
    let mut found = Scan::default();
    // The last tokens: an open paren, then `register-tool`; or `(define-tool (`.
    let (mut open, mut register) = (false, false);
    let mut define_tool = 0u8;
    let mut depth = 0usize;
    for token in TokenStream::new(source, false, None) {
        let Ok(token) = token else { continue };
        match token.ty {
            TokenType::OpenParen(..) => {
                depth += 1;
                if depth > MAX_SOURCE_DEPTH && found.too_deep_at.is_none() {
                    found.too_deep_at = Some(token.span.start as usize);
                }
            }
            TokenType::CloseParen(..) => depth = depth.saturating_sub(1),
            _ => {}
        }
        let name = match &token.ty {
            TokenType::Require => Some("require"),
            TokenType::Identifier(name) => Some(name.resolve()),
            _ => None,
        };
        if name == Some("require") && found.require_at.is_none() {
            found.require_at = Some(token.span.start as usize);
        }
        if let (true, TokenType::StringLiteral(text)) = (register, &token.ty) {
            found.tool_names.push(text.to_string());
        }
        define_tool = match (define_tool, &token.ty, name) {
            (2, _, Some(tool)) => {
                found.defined_tools.push(tool.to_string());
                0
            }
            (1, TokenType::OpenParen(..), _) => 2,
            (_, _, Some("define-tool")) if open => 1,
            _ => 0,
        };
        register = open && name == Some("register-tool");
        open = matches!(token.ty, TokenType::OpenParen(..));
    }
    found
}

/// Where a program's brackets do not balance: the byte offset and what is wrong, read from steel's
/// own tokens (so brackets in strings, characters and comments do not count). `None` when they
/// balance.
pub(crate) fn unbalanced(source: &str) -> Option<(usize, String)> {
    let mut open: Vec<(usize, char)> = Vec::new();
    for token in TokenStream::new(source, false, None) {
        let Ok(token) = token else { continue };
        let at = token.span.start as usize;
        let text = source.get(at..token.span.end as usize).unwrap_or("(");
        let bracket = text.chars().find(|c| "()[]{}".contains(*c)).unwrap_or('(');
        match token.ty {
            TokenType::OpenParen(..) => open.push((at, bracket)),
            TokenType::CloseParen(..) if open.pop().is_none() => {
                return Some((at, format!("`{bracket}` closes nothing")));
            }
            _ => {}
        }
    }
    let (at, bracket) = open.pop()?;
    let more = if open.is_empty() { String::new() } else { format!(" ({} more open before it)", open.len()) };
    Some((at, format!("`{bracket}` is never closed{more}")))
}

/// The message for untrusted source that uses `require`.
pub(crate) const REQUIRE_REFUSED: &str = "`require` is not available to tool scripts: the host loads \
     tool files itself (put shared helpers in a file of a tool folder; files load in name order)";

/// Runs a program. A panic inside steel becomes an error: no script may take the host down.
pub(crate) fn run(engine: &mut Engine, source: String) -> steel::rvals::Result<Vec<SteelVal>> {
    catch_panic(|| engine.compile_and_run_raw_program(source))
}

/// Calls a Scheme procedure, turning a panic inside steel into an error.
pub(crate) fn call(engine: &mut Engine, procedure: SteelVal, args: Vec<SteelVal>) -> steel::rvals::Result<SteelVal> {
    catch_panic(|| engine.call_function_with_args(procedure, args))
}

pub(crate) fn catch_panic<T>(f: impl FnOnce() -> steel::rvals::Result<T>) -> steel::rvals::Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown cause".to_string());
        Err(SteelErr::new(ErrorKind::Generic, format!("the interpreter failed ({what})")))
    })
}

/// Where a program defines the tool called `tool`: the byte offset of its `(register-tool "tool"`
/// or `(define-tool (tool` form, and the text of the top-level form holding it (what `:reload`
/// compares to tell a changed tool). `None` when the program names it in no such form (a name
/// computed at run time).
pub(crate) fn definition(source: &str, tool: &str) -> Option<(usize, String)> {
    let mut depth = 0usize;
    let mut top_start = 0usize;
    let mut found: Option<usize> = None;
    // The last tokens: an open paren at `open_at`, then `register-tool`; or `(define-tool (`.
    let (mut open_at, mut register, mut define_tool) = (None::<usize>, None::<usize>, (0u8, 0usize));
    for token in TokenStream::new(source, false, None) {
        let Ok(token) = token else { continue };
        let at = token.span.start as usize;
        let name = match &token.ty {
            TokenType::Identifier(name) => Some(name.resolve()),
            _ => None,
        };
        if found.is_none() {
            if let (Some(start), TokenType::StringLiteral(text)) = (register, &token.ty) {
                if text.to_string() == tool {
                    found = Some(start);
                }
            }
            define_tool = match (define_tool, &token.ty, name) {
                ((2, start), _, Some(n)) if n == tool => {
                    found = Some(start);
                    (0, 0)
                }
                ((1, start), TokenType::OpenParen(..), _) => (2, start),
                (_, _, Some("define-tool")) if open_at.is_some() => (1, open_at.unwrap_or(at)),
                _ => (0, 0),
            };
            register = match (open_at, name) {
                (Some(start), Some("register-tool")) => Some(start),
                _ => None,
            };
        }
        open_at = None;
        match token.ty {
            TokenType::OpenParen(..) => {
                if depth == 0 {
                    top_start = at;
                }
                depth += 1;
                open_at = Some(at);
            }
            TokenType::CloseParen(..) => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    if let Some(offset) = found {
                        if offset >= top_start {
                            let end = (token.span.end as usize).min(source.len());
                            return Some((offset, source.get(top_start..end).unwrap_or("").to_string()));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    found.map(|offset| (offset, source.get(offset..).unwrap_or("").to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_s_definition_is_found_with_its_whole_form() {
        let text = "(define x 1)\n(define-tool (wc (p string \"P\"))\n  \"Counts.\"\n  0)\n(register-tool \"two\" \"D\" '() (lambda () 2))";
        let (at, form) = definition(text, "wc").unwrap();
        assert_eq!(&text[at..at + 12], "(define-tool");
        assert_eq!(form, "(define-tool (wc (p string \"P\"))\n  \"Counts.\"\n  0)");
        let (at, form) = definition(text, "two").unwrap();
        assert!(text[at..].starts_with("(register-tool \"two\"") && form.ends_with("(lambda () 2))"));
        assert_eq!(definition(text, "x"), None);
    }
}
