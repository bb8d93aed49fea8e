//! Which top-level names a program may bind: a program compiled in the host may `define`,
//! `set!` or `define-syntax` a global name only if no other program defined it first. toolhost's
//! own names (steel's library, the prelude, the tools, the procedures the host gives scripts) are
//! defined before any script runs, so no script can rebind what tools, the host and other scripts
//! rely on; a script may redefine its own names (a tool file loaded again, the REPL's input).
//! Shadowing a name locally (`let`, a parameter, an inner `define`) binds no global and is not
//! concerned.
//!
//! The check reads the compiled program, not its text: after macro expansion every global a
//! program can write is the operand of a `BIND` (a top-level `define`, however a macro or a
//! `begin` produced it) or a `SET` (a `set!` of a global, wherever it sits) instruction, and those
//! are exactly the instructions that write globals when it runs. A macro a program defines is in
//! the compiler's macro table once it is compiled: the table is compared with what it held, and a
//! program that redefined another's macro, or made a macro of another's name, has the old state
//! put back. A refused program does not run at all.
//!
//! What it does not see: code compiled at run time. Scripts get no `eval`; trusted scripts do
//! (steel's whole engine), so for them the check catches mistakes, not attacks.

use std::collections::HashMap;

use steel::core::instructions::Instruction;
use steel::core::labels::Expr;
use steel::core::opcode::OpCode;
use steel::parser::expander::SteelMacro;
use steel::parser::interner::InternedString;
use steel::parser::span::Span;
use steel::parser::tokens::TokenType;
use steel::rerrs::SteelErr;
use steel::rvals::SteelVal;
use steel::steel_vm::engine::Engine;

/// Who defined a name: an index into [`Bindings::owners`]' labels; 0 is toolhost.
type Owner = u32;

const TOOLHOST: Owner = 0;

/// A macro the table held when last looked at.
struct KnownMacro {
    span: Span,
    owner: Owner,
    /// The macro itself, put back when a program that may not redefine it did.
    saved: SteelMacro,
}

/// The owners of the engine's global names and macros.
pub(crate) struct Bindings {
    names: HashMap<InternedString, Owner>,
    macros: HashMap<InternedString, KnownMacro>,
    labels: Vec<String>,
    /// Off while the host loads its own files.
    on: bool,
}

/// Why a program did not run.
pub(crate) enum Failure {
    /// It did not compile, or failed as it ran.
    Steel(SteelErr),
    /// It would bind a name it may not: the byte offset of that name in the program, when it
    /// can be told, and what the author is told.
    Refused { offset: Option<usize>, message: String },
}

/// One write of a global a program would make.
struct Write {
    defines: bool,
    name: InternedString,
    span: Span,
}

impl Bindings {
    pub fn new() -> Bindings {
        Bindings { names: HashMap::new(), macros: HashMap::new(), labels: vec!["toolhost".to_string()], on: false }
    }

    /// Makes every name and macro the engine has now toolhost's, and checks every program from now
    /// on.
    pub fn protect(&mut self, engine: &Engine) {
        for name in engine.globals().iter() {
            self.names.insert(*name, TOOLHOST);
        }
        for (name, known) in engine.in_scope_macros().iter() {
            self.macros.insert(*name, KnownMacro { span: known.span(), owner: TOOLHOST, saved: known.clone() });
        }
        self.on = true;
    }

    fn owner(&mut self, label: &str) -> Owner {
        match self.labels.iter().position(|l| l == label) {
            Some(i) => i as Owner,
            None => {
                self.labels.push(label.to_string());
                (self.labels.len() - 1) as Owner
            }
        }
    }

    /// Compiles `source`, checks what it binds as the program called `label`, and runs it.
    /// `is_tool` says whether a name is a registered tool's (which only the program that defined it
    /// may bind, and only while it is not registered: while its file loads again).
    pub fn run(
        &mut self,
        engine: &mut Engine,
        source: &str,
        label: &str,
        is_tool: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<SteelVal>, Failure> {
        if !self.on {
            return crate::engine::run(engine, source.to_string()).map_err(Failure::Steel);
        }
        let owner = self.owner(label);
        let compiled = crate::engine::catch_panic(|| engine.emit_raw_program_no_path(source.to_string()));
        let mut program = match compiled {
            Ok(program) => program,
            Err(e) => {
                // The compiler takes a program's macros in before it can fail on the rest: a program
                // that did not compile must not leave them for the next one.
                self.restore_macros(engine);
                return Err(Failure::Steel(e));
            }
        };
        let writes = std::cell::RefCell::new(Vec::new());
        program.with_optimization(|instructions| writes.borrow_mut().extend(instructions.iter().filter_map(write_of)));
        let writes = writes.into_inner();
        let refusal = writes.iter().find_map(|w| self.refusal(w, owner, is_tool, source));
        let refusal = match refusal {
            Some(refusal) => Some(refusal),
            None => self.check_macros(engine, owner, is_tool, source),
        };
        if let Some(refusal) = refusal {
            self.restore_macros(engine);
            return Err(refusal);
        }
        for write in writes.iter().filter(|w| w.defines) {
            self.names.entry(write.name).or_insert(owner);
        }
        crate::engine::catch_panic(|| engine.run_raw_program(program)).map_err(Failure::Steel)
    }

    /// Why `write` may not be made by `owner`, if it may not.
    fn refusal(&self, write: &Write, owner: Owner, is_tool: &dyn Fn(&str) -> bool, source: &str) -> Option<Failure> {
        let name = write.name.resolve();
        let defined_by = self.names.get(&write.name).copied();
        let whose = match defined_by {
            Some(by) if by != owner => Some(by),
            // A tool registered without a `define` (register-tool) has no owner here.
            _ if is_tool(name) && defined_by != Some(owner) => Some(TOOLHOST),
            _ => None,
        }?;
        let form = if write.defines { "define" } else { "set!" };
        Some(Failure::Refused {
            offset: offset_of(source, &write.span, name),
            message: self.explain(form, name, whose, is_tool(name), source),
        })
    }

    fn explain(&self, form: &str, name: &str, whose: Owner, tool: bool, source: &str) -> String {
        let what = if tool {
            format!("`{name}` is a tool, which models and other scripts call")
        } else if whose == TOOLHOST {
            format!("`{name}` is one of toolhost's or steel's own definitions, which tools and other scripts rely on")
        } else {
            format!("`{name}` was defined by {}, and other scripts may rely on it", self.labels[whose as usize])
        };
        let mut message = format!(
            "{form} {name}: {what}; a script may not {} it. Choose another name (a local binding, with \
             let or as a parameter, may shadow it)",
            if form == "set!" { "set!" } else { "define" }
        );
        if source.contains("require-builtin") && form == "define" {
            message.push_str(
                "; `require-builtin` binds every name of its module, and the modules scripts may use are \
                 loaded already (`(require-builtin MODULE as prefix.)` binds prefixed names instead)",
            );
        }
        message
    }

    /// Compares the compiler's macro table with what it held: a macro redefined by a program that
    /// did not define it, or a new macro named as another's global, is refused.
    fn check_macros(
        &mut self,
        engine: &Engine,
        owner: Owner,
        is_tool: &dyn Fn(&str) -> bool,
        source: &str,
    ) -> Option<Failure> {
        let macros = engine.in_scope_macros();
        let mut refusal = None;
        let mut accepted = Vec::new();
        for (name, found) in macros.iter() {
            let whose = match self.macros.get(name) {
                Some(known) if known.span == found.span() => continue,
                Some(known) => (known.owner != owner).then_some(known.owner),
                None => match self.names.get(name) {
                    Some(by) if *by != owner => Some(*by),
                    _ if is_tool(name.resolve()) => Some(TOOLHOST),
                    _ => None,
                },
            };
            match whose {
                Some(whose) if refusal.is_none() => {
                    let text = name.resolve();
                    refusal = Some(Failure::Refused {
                        offset: offset_of(source, &found.span(), text),
                        message: self.explain("define-syntax", text, whose, is_tool(text), source),
                    });
                }
                Some(_) => {}
                None => accepted.push((*name, found.clone())),
            }
        }
        drop(macros);
        if refusal.is_none() {
            for (name, found) in accepted {
                self.macros.insert(name, KnownMacro { span: found.span(), owner, saved: found });
            }
        }
        refusal
    }

    /// Puts the macro table back as it was after the last program that ran: known macros as they
    /// were, and no macro named as a global someone else defined.
    fn restore_macros(&self, engine: &mut Engine) {
        let mut macros = engine.in_scope_macros_mut();
        let unknown: Vec<InternedString> = macros
            .keys()
            .filter(|name| !self.macros.contains_key(*name) && self.names.contains_key(*name))
            .copied()
            .collect();
        for name in unknown {
            macros.remove(&name);
        }
        for (name, known) in &self.macros {
            if macros.get(name).is_none_or(|now| now.span() != known.span) {
                macros.insert(*name, known.saved.clone());
            }
        }
    }
}

/// The global an instruction writes: `BIND` is a top-level `define`, `SET` a `set!` of a global
/// (a local's is `SETLOCAL` or `SETALLOC`).
fn write_of(instruction: &Instruction) -> Option<Write> {
    let defines = match instruction.op_code {
        OpCode::BIND => true,
        OpCode::SET => false,
        _ => return None,
    };
    let Some(Expr::Atom(atom)) = &instruction.contents else { return None };
    let TokenType::Identifier(name) = &atom.ty else { return None };
    Some(Write { defines, name: *name, span: atom.span })
}

/// Where `name` is written in `source`, by its span, when the span points at it there (a name a
/// macro of another file made has a span in that file).
fn offset_of(source: &str, span: &Span, name: &str) -> Option<usize> {
    let start = span.start() as usize;
    source.get(start..).filter(|rest| rest.starts_with(name)).map(|_| start)
}
