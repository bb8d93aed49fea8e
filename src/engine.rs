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
use std::sync::Arc;

use steel::parser::lexer::TokenStream;
use steel::parser::tokens::TokenType;
use steel::rerrs::{ErrorKind, SteelErr};
use steel::rvals::SteelVal;
use steel::steel_vm::builtin::BuiltInModule;
use steel::steel_vm::engine::Engine;
use steel::steel_vm::primitives::*;

/// steel/meta procedures scripts must not have: new engines, `eval` (which compiles in this engine
/// and so would reach the module loader), loading files, dynamic libraries, environment variables,
/// the steel home.
const META_DENIED: &[&str] = &[
    "Engine::new",
    "Engine::clone",
    "Engine::add-module",
    "Engine::modules->list",
    "Engine::raise_error",
    "run!",
    "eval",
    "eval!",
    "eval-string",
    "expand!",
    "load",
    "load-expanded",
    "emit-expanded",
    "#%build-dylib",
    "#%get-dylib",
    "env-var",
    "maybe-get-env-var",
    "set-env-var!",
    "steel-home-location",
    "command-line",
    "feature-dylib-build?",
    "platform-dll-extension!",
    "platform-dll-prefix!",
    "current-os!",
    "target-arch!",
];

/// steel/threads procedures that create or control threads. stdlib.scm needs the module for its
/// thread-local storage, so the module stays with these removed.
const THREADS_DENIED: &[&str] = &[
    "spawn-native-thread",
    "thread-finished?",
    "thread-interrupt",
    "thread-join!",
    "thread-resume",
    "thread-suspend",
    "thread/available-parallelism",
];

fn threads_disabled(_args: &[SteelVal]) -> steel::rvals::Result<SteelVal> {
    Err(SteelErr::new(ErrorKind::Generic, "threads are not available to tool scripts".to_string()))
}

fn without(module: &BuiltInModule, denied: &[&str]) -> BuiltInModule {
    let mut out = BuiltInModule::new(module.name().to_string());
    for name in module.names() {
        if !denied.contains(&name.as_str()) {
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
        JSON_MODULE,
        CONSTANTS_MODULE,
        SYNTAX_MODULE,
        RESULT_MODULE,
        OPTION_MODULE,
        TYPE_ID_MODULE,
        BYTEVECTOR_MODULE
    );
    modules.push(META_MODULE.with(|m| without(m, META_DENIED)));
    // Reading standard input blocks inside a Rust procedure, where the time limit cannot stop it,
    // and under a future MCP server standard input is the protocol: scripts get no stdin.
    modules.push(IO_MODULE.with(|m| without(m, &["read-to-string"])));
    // A copy: a clone of a builtin module shares its table with steel's own, which `Engine::new()`
    // (trusted scripts) still needs intact.
    let stdin_names = ["stdin", "#%default-input-port"];
    let mut ports = PORT_MODULE_WITHOUT_FILESYSTEM.with(|m| without(m, &stdin_names));
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
pub(crate) fn new_engine(trusted: bool) -> Engine {
    // Every constructor looks for steel's home folder and creates (or complains about) it unless
    // STEEL_HOME is set; toolhost loads nothing from there.
    if std::env::var_os("STEEL_HOME").is_none() {
        std::env::set_var("STEEL_HOME", std::env::temp_dir().join("toolhost-steel-home"));
    }
    let mut engine = if trusted { Engine::new() } else { script_engine() };
    install_display(&mut engine);
    engine
}

fn script_engine() -> Engine {
    let mut engine = Engine::new_raw_no_kernel();
    let prims = private_prim_module();
    engine.register_module(prims.clone());
    for (key, value) in prims.inner_map().iter() {
        engine.register_value(key, value.clone());
    }
    let mut threads = THREADING_MODULE.with(|m| without(m, THREADS_DENIED));
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
        if let Err(e) = engine.compile_and_run_raw_program(program.to_string()) {
            // Only a change in steel could cause this; the host still starts, and eval shows what is missing.
            eprintln!("toolhost: the engine's base library failed to load: {e}");
        }
    }
    engine
}

/// `display`, `displayln` and `newline`, written to standard output. (steel's own come with its
/// print library, which costs as much again as everything else loaded here.)
fn install_display(engine: &mut Engine) {
    fn show(args: &[SteelVal], newline: bool) -> steel::rvals::Result<SteelVal> {
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
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(out.as_bytes());
        let _ = stdout.flush();
        Ok(SteelVal::Void)
    }
    engine.register_value("display", SteelVal::anonymous_boxed_function(Arc::new(|a: &[SteelVal]| show(a, false))));
    engine.register_value("displayln", SteelVal::anonymous_boxed_function(Arc::new(|a: &[SteelVal]| show(a, true))));
    engine.register_value("newline", SteelVal::anonymous_boxed_function(Arc::new(|_: &[SteelVal]| show(&[], true))));
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
}

/// Reads a program's tokens (without compiling it).
pub(crate) fn scan(source: &str) -> Scan {
    let mut found = Scan::default();
    // The last two tokens: an open paren, then `register-tool`.
    let (mut open, mut register) = (false, false);
    for token in TokenStream::new(source, false, None) {
        let Ok(token) = token else { continue };
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
        register = open && name == Some("register-tool");
        open = matches!(token.ty, TokenType::OpenParen(..));
    }
    found
}

/// The message for untrusted source that uses `require`.
pub(crate) const REQUIRE_REFUSED: &str = "`require` is not available to tool scripts: the host loads \
     tool files itself (put shared helpers in a file of a tool folder; files load in name order)";

/// Runs a program.
pub(crate) fn run(engine: &mut Engine, source: String) -> steel::rvals::Result<Vec<SteelVal>> {
    engine.compile_and_run_raw_program(source)
}
