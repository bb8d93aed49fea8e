//! The registry of tool primitives: what a primitive is (its [`ToolSpec`] plus the handler that runs
//! it and its confirmation preview), and lookup by real name or by the name providers were sent. The
//! naming rules `register` enforces live with the specs ([`SpecSet`]).

use std::collections::HashMap;
use std::sync::Arc;

use steel::rvals::SteelVal;

use crate::context::ToolCtx;
use crate::error::{Error, ErrorKind, Result};
use crate::param::{provider_name, Signature};
use crate::spec::{SpecSet, ToolSpec};

pub use crate::spec::Annotations;

/// A Rust handler: receives only the arguments that were given (already checked against the
/// signature) and returns the tool's result.
pub type RustHandler = Arc<dyn Fn(&ToolCtx, &[SteelVal]) -> Result<SteelVal> + Send + Sync>;

/// What a tool gives back when its result has two faces: the value Scheme code receives, and the
/// text a model is shown instead of that value's JSON (an MCP tool whose answer carries structured
/// content beside its text).
#[derive(Debug, Clone)]
pub struct ToolOutput {
    /// What Scheme code receives, and what the call record keeps as the result.
    pub value: SteelVal,
    /// What a model reads, when it is not the value's own JSON text.
    pub text: Option<String>,
}

impl From<SteelVal> for ToolOutput {
    fn from(value: SteelVal) -> Self {
        ToolOutput { value, text: None }
    }
}

/// A Rust handler whose result may carry a text for models beside its value (see [`ToolOutput`]).
pub type OutputHandler = Arc<dyn Fn(&ToolCtx, &[SteelVal]) -> Result<ToolOutput> + Send + Sync>;

/// A confirmation preview: what a person is shown before the call runs (a diff, a command line).
pub type Preview = Arc<dyn Fn(&ToolCtx, &[SteelVal]) -> Result<String> + Send + Sync>;

/// Where a primitive's work is done.
#[derive(Clone)]
pub enum Handler {
    /// A Rust function.
    Rust(RustHandler),
    /// A Rust function whose result may have a text for models of its own (an MCP tool).
    RustOutput(OutputHandler),
    /// A Scheme procedure registered with `register-tool`; it lives in the host's engine, found by
    /// the tool's name.
    Scheme,
    /// A Scheme program given as the call's one argument, run by the host in its own engine: the
    /// code-mode tool ([`crate::code_mode`]).
    Program,
}

/// A tool primitive: its spec (what models see) and what runs it.
#[derive(Clone)]
pub struct Primitive {
    /// Name, parameters, description, annotations, raw schema.
    pub spec: Arc<ToolSpec>,
    /// The work.
    pub handler: Handler,
    /// The confirmation preview, when the tool has a better one than its arguments.
    pub preview: Option<Preview>,
}

impl Primitive {
    /// A primitive from a run-time description (Scheme and MCP tools): the untyped path. Rust tools
    /// usually use [`crate::Tool`] instead, which derives the signature from the function's types.
    pub fn new(signature: Signature, description: impl Into<String>, handler: Handler) -> Self {
        Primitive { spec: Arc::new(ToolSpec::new(signature, description)), handler, preview: None }
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        self.spec.name()
    }

    /// The tool's signature.
    pub fn signature(&self) -> &Signature {
        &self.spec.signature
    }

    /// Whether Rust code does its work (bound in Scheme as a procedure of its own).
    pub fn is_rust(&self) -> bool {
        matches!(self.handler, Handler::Rust(_) | Handler::RustOutput(_))
    }
}

impl std::fmt::Debug for Primitive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Primitive").field("spec", &self.spec).finish_non_exhaustive()
    }
}

/// The tools a host offers, in registration order.
#[derive(Default, Clone)]
pub struct Registry {
    specs: SpecSet,
    tools: HashMap<String, Arc<Primitive>>,
    /// Name prefixes whose tools could not be registered, with why (an MCP server that did not
    /// start): a call naming one is told the reason instead of a bare "no such tool".
    unavailable: Vec<(String, String)>,
    /// Tools that were registered and are gone, by name, with why (removed by their MCP server): a
    /// call naming one is told so.
    removed: HashMap<String, String>,
    /// How many times a tool was registered or removed: a reader that saw another count knows
    /// the tools changed since (a server telling its clients).
    changes: u64,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Registry::default()
    }

    /// Adds a primitive.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidDefinition`], naming the primitive and the parameter: see
    /// [`SpecSet::insert`].
    pub fn register(&mut self, primitive: Primitive) -> Result<()> {
        self.specs.insert(Arc::clone(&primitive.spec))?;
        self.removed.remove(primitive.name());
        self.tools.insert(primitive.name().to_string(), Arc::new(primitive));
        self.changes += 1;
        Ok(())
    }

    /// Removes the tool called `name`; true when there was one.
    pub fn unregister(&mut self, name: &str) -> bool {
        self.tools.remove(name);
        let removed = self.specs.remove(name);
        self.changes += u64::from(removed);
        removed
    }

    /// How many times a tool was registered or removed so far: when it moved, the tools changed.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Primitive>> {
        self.tools.get(name)
    }

    /// The tool a provider-facing name refers to: the real name, or its mapped form.
    pub fn get_by_provider_name(&self, name: &str) -> Option<&Arc<Primitive>> {
        self.specs.resolve(name).and_then(|real| self.tools.get(real))
    }

    /// Records that the tools whose names start with `prefix` (`server.`) are unavailable, and
    /// `why`, for the `unknown_tool` error of a call naming one.
    pub fn note_unavailable(&mut self, prefix: impl Into<String>, why: impl Into<String>) {
        self.unavailable.push((prefix.into(), why.into()));
    }

    /// Removes the tool called `name` and records `why` (`removed by the MCP server "docs"`), for
    /// the `unknown_tool` error of a later call naming it; true when there was one.
    pub fn remove_noting(&mut self, name: &str, why: impl Into<String>) -> bool {
        self.removed.insert(name.to_string(), why.into());
        self.unregister(name)
    }

    /// The `unknown_tool` error for `name`: why, when it was removed or its prefix was noted
    /// unavailable, else a list of the tools there are.
    pub fn unknown_tool_error(&self, name: &str) -> Error {
        let removed = self
            .removed
            .iter()
            .find(|(gone, _)| gone.as_str() == name || provider_name(gone).is_some_and(|mapped| mapped == name));
        if let Some((gone, why)) = removed {
            let shown = crate::value::clip(name.to_string());
            return Error::new(
                ErrorKind::UnknownTool,
                format!("there is no tool called \"{shown}\" any more: {gone} was {why}"),
            )
            .with_tool(shown);
        }
        let noted = self.unavailable.iter().find(|(prefix, _)| {
            name.starts_with(prefix.as_str())
                || provider_name(prefix).is_some_and(|mapped| name.starts_with(mapped.as_str()))
        });
        match noted {
            Some((_, why)) => {
                let shown = crate::value::clip(name.to_string());
                Error::new(
                    ErrorKind::UnknownTool,
                    format!("there is no tool called \"{shown}\": {why}; its tools are unknown"),
                )
                .with_tool(shown)
            }
            None => self.specs.unknown_tool_error(name),
        }
    }

    /// The specs of every tool, in registration order: what catalogues are made from.
    pub fn specs(&self) -> &SpecSet {
        &self.specs
    }

    /// Every tool, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Primitive>> {
        self.specs.iter().filter_map(|spec| self.tools.get(spec.name()))
    }

    /// How many tools there are.
    pub fn len(&self) -> usize {
        self.specs.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::param::{Param, ParamType};

    fn prim(name: &str) -> Primitive {
        let handler: RustHandler = Arc::new(|_, _| Ok(SteelVal::Void));
        Primitive::new(Signature::new(name, vec![Param::required("x", ParamType::Any, "")]), "", Handler::Rust(handler))
    }

    #[test]
    fn tools_are_found_by_real_and_provider_name_and_can_be_removed() {
        let mut reg = Registry::new();
        reg.register(prim("srv.read")).unwrap();
        reg.register(prim("b")).unwrap();
        assert_eq!(reg.get_by_provider_name("srv__read").unwrap().name(), "srv.read");
        assert!(reg.register(prim("b")).is_err());
        assert!(reg.unregister("srv.read"));
        assert!(reg.get_by_provider_name("srv__read").is_none());
        assert_eq!(reg.iter().map(|p| p.name().to_string()).collect::<Vec<_>>(), ["b"]);
    }

    #[test]
    fn a_tool_under_an_unavailable_prefix_is_unknown_with_the_reason_by_either_name() {
        let mut reg = Registry::new();
        reg.register(prim("up.read")).unwrap();
        reg.note_unavailable("down.", "the MCP server \"down\" did not start: no such command");
        for name in ["down.read", "down__read"] {
            let err = reg.unknown_tool_error(name);
            assert_eq!(err.kind(), ErrorKind::UnknownTool);
            assert!(err.message().contains("\"down\" did not start: no such command"), "{err}");
        }
        assert!(reg.unknown_tool_error("other").message().contains("the tools are up.read"));
    }
}
