//! The registry of tool primitives: what a primitive is (signature, description, annotations,
//! handler, confirmation preview), the checks `register` makes, and lookup by real name or by the
//! name providers were sent.

use std::collections::HashMap;
use std::sync::Arc;

use indexmap::IndexMap;
use steel::rvals::SteelVal;

use crate::context::ToolCtx;
use crate::error::{Error, ErrorKind, Result};
use crate::param::{provider_name, Signature};

/// A Rust handler: receives only the arguments that were given (already checked against the
/// signature) and returns the tool's result.
pub type RustHandler = Arc<dyn Fn(&ToolCtx, &[SteelVal]) -> Result<SteelVal> + Send + Sync>;

/// A confirmation preview: what a person is shown before the call runs (a diff, a command line).
pub type Preview = Arc<dyn Fn(&ToolCtx, &[SteelVal]) -> Result<String> + Send + Sync>;

/// Where a primitive's work is done.
#[derive(Clone)]
pub enum Handler {
    /// A Rust function.
    Rust(RustHandler),
    /// A Scheme procedure registered with `register-tool`; it lives in the host's engine, found by
    /// the tool's name.
    Scheme,
}

/// Hints about a tool's effects, shown to MCP clients and used by the guard.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Annotations {
    /// The tool does not change anything.
    pub read_only: bool,
    /// The tool may destroy or overwrite data.
    pub destructive: bool,
}

/// A tool primitive: everything the registry knows about one tool.
#[derive(Clone)]
pub struct Primitive {
    /// Name, ordered parameters, variadic tail, skipping convention.
    pub signature: Signature,
    /// One paragraph for the model: what the tool does and its defaults, in prose.
    pub description: String,
    /// Effect hints.
    pub annotations: Annotations,
    /// The work.
    pub handler: Handler,
    /// The confirmation preview, when the tool has a better one than its arguments.
    pub preview: Option<Preview>,
}

impl Primitive {
    /// A primitive from a run-time description (Scheme and MCP tools): the untyped path. Rust tools
    /// usually use [`crate::Tool`] instead, which derives the signature from the function's types.
    pub fn new(signature: Signature, description: impl Into<String>, handler: Handler) -> Self {
        Primitive {
            signature,
            description: description.into(),
            annotations: Annotations::default(),
            handler,
            preview: None,
        }
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.signature.name
    }
}

impl std::fmt::Debug for Primitive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Primitive")
            .field("signature", &self.signature)
            .field("description", &self.description)
            .field("annotations", &self.annotations)
            .finish_non_exhaustive()
    }
}

/// The tools a host offers, in registration order.
#[derive(Default, Clone)]
pub struct Registry {
    tools: IndexMap<String, Arc<Primitive>>,
    /// Provider-facing name -> real name, for names that map (`server.tool` -> `server__tool`).
    by_provider_name: HashMap<String, String>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Registry::default()
    }

    /// Adds a primitive.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidDefinition`], naming the primitive and the parameter: a signature that
    /// breaks the rules of [`Signature::validate`], a name already registered, or a name whose
    /// provider form collides with another tool's.
    pub fn register(&mut self, primitive: Primitive) -> Result<()> {
        let sig = &primitive.signature;
        sig.validate()?;
        let name = sig.name.clone();
        if self.tools.contains_key(&name) {
            return Err(Error::new(ErrorKind::InvalidDefinition, format!("tool \"{name}\" is already registered"))
                .with_tool(name));
        }
        // validate() guarantees the name maps.
        let mapped = provider_name(&name).unwrap_or_else(|| name.clone());
        if let Some(other) = self.by_provider_name.get(&mapped).or(self.tools.get(&mapped).map(|p| &p.signature.name)) {
            return Err(Error::new(
                ErrorKind::InvalidDefinition,
                format!("tool \"{name}\" would be sent to providers as \"{mapped}\", which \"{other}\" already uses"),
            )
            .with_tool(name));
        }
        if mapped != name {
            self.by_provider_name.insert(mapped, name.clone());
        }
        self.tools.insert(name, Arc::new(primitive));
        Ok(())
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Primitive>> {
        self.tools.get(name)
    }

    /// The tool a provider-facing name refers to: the real name, or its mapped form.
    pub fn get_by_provider_name(&self, name: &str) -> Option<&Arc<Primitive>> {
        match self.by_provider_name.get(name) {
            Some(real) => self.tools.get(real),
            None => self.tools.get(name),
        }
    }

    /// The `unknown_tool` error for `name`, listing the tools there are so the model can pick one.
    pub fn unknown_tool_error(&self, name: &str) -> Error {
        const SHOWN: usize = 60;
        let mut names: Vec<&str> = self.tools.keys().map(String::as_str).collect();
        names.sort_unstable();
        let listing = if names.len() > SHOWN {
            format!("{} and {} more", names[..SHOWN].join(", "), names.len() - SHOWN)
        } else {
            names.join(", ")
        };
        let name = crate::value::clip(name.to_string());
        Error::new(ErrorKind::UnknownTool, format!("there is no tool called \"{name}\"; the tools are {listing}"))
            .with_tool(name)
    }

    /// Every tool, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Primitive>> {
        self.tools.values()
    }

    /// How many tools there are.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
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
    fn duplicate_names_are_refused() {
        let mut reg = Registry::new();
        reg.register(prim("a")).unwrap();
        let err = reg.register(prim("a")).unwrap_err();
        assert!(err.message().contains("already registered"), "{err}");
    }

    #[test]
    fn provider_names_map_back_and_cannot_collide() {
        let mut reg = Registry::new();
        reg.register(prim("srv.read")).unwrap();
        assert_eq!(reg.get_by_provider_name("srv__read").unwrap().name(), "srv.read");
        assert_eq!(reg.get_by_provider_name("srv.read").unwrap().name(), "srv.read");
        let err = reg.register(prim("srv__read")).unwrap_err();
        assert!(err.message().contains("already uses"), "{err}");
    }
}
