//! Sources of tools a host starts with itself and keeps while it runs: the `[[mcp]]` servers of a
//! config (`crate::mcp`), or an embedder's own (a plugin folder, a remote service). The host knows
//! them only through [`ToolSource`]. A source whose tools change while the host runs (an MCP server
//! that sends `notifications/tools/list_changed`) changes the host's registry through
//! [`LiveTools`].

use std::sync::{Arc, Weak};

use crate::bridge::Shared;
use crate::config::McpServerConfig;
use crate::error::{Error, Result};
use crate::registry::Primitive;
use crate::workspace::Workspace;

/// What a source gives the host when it starts.
#[non_exhaustive]
#[derive(Default)]
pub struct SourceTools {
    /// The tools, registered after the Rust tools; a name the registry refuses, or one Scheme
    /// already has, becomes a load error.
    pub tools: Vec<Primitive>,
    /// What went wrong (a server that did not start): the host adds them to its load errors.
    pub problems: Vec<Error>,
    /// Name prefixes (`server.`) whose tools are missing, and why: a call of one is told so (see
    /// [`crate::Registry::note_unavailable`]).
    pub unavailable: Vec<(String, String)>,
}

impl SourceTools {
    /// Nothing yet; fill the fields.
    pub fn new() -> SourceTools {
        SourceTools::default()
    }
}

/// A source of tools, added with [`crate::HostBuilder::tool_source`]. `Send`, so a builder holding
/// one stays `Send`. The host keeps the source until it is dropped, after its registry: the tools'
/// handlers may need it alive.
pub trait ToolSource: Send + 'static {
    /// Starts the source for a host working in `workspace` and gives its tools. Never fails as a
    /// whole: what went wrong goes into [`SourceTools::problems`].
    fn start(&mut self, workspace: &Workspace) -> SourceTools;

    /// Gives the source the host's registry once the host is built, for tools that change while it
    /// runs; from any thread. Sources whose tools never change ignore it.
    fn attach(&mut self, _live: LiveTools) {}
}

/// A source's hold on the registry of the host it gave its tools to: tools added, replaced and
/// removed while the host runs, from any thread. A call from a model sees the change at once; Scheme
/// code sees an added tool from the next program that names it (a tool name is bound when a program
/// that mentions it is read). It holds the host weakly: after the host is gone it changes nothing.
#[derive(Clone)]
pub struct LiveTools(Weak<Shared>);

impl LiveTools {
    pub(crate) fn new(shared: &Arc<Shared>) -> LiveTools {
        LiveTools(Arc::downgrade(shared))
    }

    /// Adds `tool`, or replaces the tool of that name when `replace` (a source replaces only tools
    /// it gave itself).
    ///
    /// # Errors
    /// When the host is gone, the name is a Scheme procedure's, or the registry refuses it (see
    /// [`crate::Registry::register`]: a name already taken, when not replacing).
    pub fn add(&self, tool: Primitive, replace: bool) -> Result<()> {
        let Some(shared) = self.0.upgrade() else { return Err(Error::tool_failed("the host is gone")) };
        shared.check_free(tool.name())?;
        let mut registry = shared.registry.write().map_err(|_| Error::tool_failed("the registry lock is poisoned"))?;
        if replace {
            registry.unregister(tool.name());
        }
        let name = tool.name().to_string();
        registry.register(tool)?;
        if let Ok(mut added) = shared.added.lock() {
            added.push(name);
        }
        Ok(())
    }

    /// Removes the tool called `name`, which a call is then told was `why` (`removed by the MCP
    /// server "docs"`); true when there was one.
    pub fn remove(&self, name: &str, why: &str) -> bool {
        let Some(shared) = self.0.upgrade() else { return false };
        shared.registry.write().is_ok_and(|mut registry| registry.remove_noting(name, why))
    }
}

/// The `[[mcp]]` servers of a config in a build without the `mcp` feature: none is started, each is
/// one load error, and a call of one of its tools says why.
#[cfg_attr(feature = "mcp", allow(dead_code))]
pub(crate) struct McpNotBuilt(pub(crate) Vec<McpServerConfig>);

impl ToolSource for McpNotBuilt {
    fn start(&mut self, _workspace: &Workspace) -> SourceTools {
        let mut given = SourceTools::new();
        for server in &self.0 {
            let why = "toolhost was built without the `mcp` feature";
            let message = format!("mcp server \"{}\" is not started: {why}; its tools are not available", server.name);
            given.problems.push(server.locate(Error::config(message)));
            given.unavailable.push((
                format!("{}.", server.name),
                format!("the MCP server \"{}\" is not started: {why}", server.name),
            ));
        }
        given
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::config::McpTransport;
    use crate::{HostBuilder, Tool, ToolCtx};

    /// An embedder's source: one tool, one tool named like a Scheme procedure, one problem, one
    /// unavailable prefix; it notes when it is dropped.
    struct Plugins {
        dropped: Arc<AtomicBool>,
    }

    impl ToolSource for Plugins {
        fn start(&mut self, workspace: &Workspace) -> SourceTools {
            let root = workspace.root().display().to_string();
            let echo = move |_ctx: &ToolCtx, text: String| format!("{text} in {root}");
            let mut given = SourceTools::new();
            given.tools.push(Tool::new("plugin.echo", "Echo a text.").param("text", "What").build(echo).unwrap());
            given.tools.push(Tool::new("car", "Shadows Scheme's car.").build(|_: &ToolCtx| 1_i64).unwrap());
            given.problems.push(Error::config("the plugin folder has a broken file"));
            given.unavailable.push(("remote.".into(), "the remote service is down".into()));
            given
        }
    }

    impl Drop for Plugins {
        fn drop(&mut self) {
            self.dropped.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_sources_tools_problems_and_missing_tools_reach_the_host() {
        let dir = tempfile::tempdir().unwrap();
        let dropped = Arc::new(AtomicBool::new(false));
        let plugins = Plugins { dropped: Arc::clone(&dropped) };
        let mut host = HostBuilder::new(dir.path()).tool_source(plugins).build().unwrap();
        let root = host.workspace().root().display().to_string();
        assert_eq!(host.call_json("plugin.echo", r#"{"text": "hi"}"#).model_text(), format!("hi in {root}"));
        assert_eq!(host.eval_to_string(r#"(plugin.echo "yo")"#).unwrap(), format!("yo in {root}"));
        let errors: Vec<String> = host.load_errors().iter().map(|e| e.message().to_string()).collect();
        assert!(errors.contains(&"the plugin folder has a broken file".to_string()), "{errors:?}");
        assert!(errors.iter().any(|e| e.contains("tool car of a tool source is not registered")), "{errors:?}");
        let missing = host.call_json("remote.fetch", "{}").result.unwrap_err();
        assert_eq!(missing.kind().as_str(), "unknown_tool");
        assert!(missing.message().contains("the remote service is down"), "{}", missing.message());
        assert!(!dropped.load(Ordering::SeqCst), "the host keeps its source while it runs");
        drop(host);
        assert!(dropped.load(Ordering::SeqCst));
    }

    #[test]
    fn mcp_servers_in_a_build_without_mcp_are_load_errors_at_their_config_line() {
        let dir = tempfile::tempdir().unwrap();
        let server = McpServerConfig {
            name: "github".into(),
            transport: McpTransport::Stdio { command: "npx".into(), args: Vec::new(), env: Default::default() },
            timeout_s: None,
            origin: "toolhost.toml:12".into(),
        };
        let mut host = HostBuilder::new(dir.path()).tool_source(McpNotBuilt(vec![server])).build().unwrap();
        let [error] = host.load_errors() else { panic!("one load error: {:?}", host.load_errors()) };
        assert_eq!((error.file(), error.line()), (Some("toolhost.toml"), Some(12)));
        assert!(error.message().contains("toolhost was built without the `mcp` feature"), "{}", error.message());
        let call = host.call_json("github.search", "{}").result.unwrap_err();
        assert_eq!(call.kind().as_str(), "unknown_tool");
        assert!(call.message().contains("built without the `mcp` feature"), "{}", call.message());
    }
}
