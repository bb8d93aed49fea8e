//! What a host is built from outside the library's defaults, as the command line builds it (design
//! section 17): the user's config, then the workspace's own `toolhost.toml` and `.toolhost/tools/`
//! when the workspace is trusted (or a config file named with `--config`), then flags on top. An
//! embedder that wants the same start-up calls [`Setup::discover`] and [`Setup::builder`].

use std::path::PathBuf;

use crate::config::{self, Action, Config, McpServerConfig, RuleConfig};
use crate::error::{Error, Result};
use crate::guard::{self, Confirmer};
use crate::host::HostBuilder;
use crate::tool_source::ToolSource;
use crate::trust::{Admission, Ask, TrustRule};

/// The tools `toolhost agent` asks before by default (see [`Setup::add_agent_defaults`]).
pub const AGENT_CONFIRMED_TOOLS: [&str; 3] = ["shell-exec", "fs-write", "fs-edit"];

/// Where the agent's default rules say they come from, in call records and session logs.
pub const AGENT_DEFAULTS_ORIGIN: &str = "toolhost agent's defaults";

/// The command line's say in a host: the flags every command shares.
#[derive(Debug, Clone, Default)]
pub struct Flags {
    /// The workspace (`--root`; the current folder when empty).
    pub root: PathBuf,
    /// A config file to use instead of the workspace's `toolhost.toml` (`--config`).
    pub config: Option<PathBuf>,
    /// More tool folders (`--tools`, repeatable); each must exist (a settings error otherwise).
    pub tool_dirs: Vec<PathBuf>,
    /// Confirmations answer yes (`--yes`).
    pub yes: bool,
    /// Run the host in process instead of in a worker process (`--no-isolate`).
    pub no_isolate: bool,
}

/// The settings found for a workspace, ready to build a host from.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The workspace root as given.
    pub root: PathBuf,
    /// The merged config: the user's file, then the project's (when trusted) or `--config`'s. The
    /// tool folders the project's file names are not in its `tools`: they load from
    /// [`Setup::project`], as they were read for the trust check.
    pub config: Config,
    /// Whether the workspace's own files load (it is trusted, or has none).
    pub project_trusted: bool,
    /// The one line to show on standard error when the workspace's own files were skipped.
    pub notice: Option<String>,
    /// What the trust rule decided for the workspace's own files: the files to load, read once, or
    /// what was skipped.
    pub project: Admission,
    /// The trust rule, which a host built from this setup applies again at every reload.
    pub trust_rule: TrustRule,
}

impl Setup {
    /// Finds the settings for `flags.root` with the user's trust store. When the workspace has files
    /// of its own that are not trusted, `ask` (if given: the REPL on a terminal) is asked whether to
    /// trust them now, with the text to show; a yes records the trust and loads them. A host built
    /// from the setup asks again on a reload that finds them changed.
    ///
    /// # Errors
    /// A config file that cannot be read or is invalid (kind `config_error`, naming the file, the
    /// line and the key), a `--tools` folder that does not exist, or trust that cannot be recorded.
    pub fn discover(flags: &Flags, ask: Option<Ask>) -> Result<Setup> {
        Setup::discover_with(flags, TrustRule::user().ask(ask))
    }

    /// [`Setup::discover`] under a trust rule of the caller's (its own store, say).
    ///
    /// # Errors
    /// As [`Setup::discover`].
    pub fn discover_with(flags: &Flags, rule: TrustRule) -> Result<Setup> {
        let root = if flags.root.as_os_str().is_empty() { PathBuf::from(".") } else { flags.root.clone() };
        if let Some(missing) = flags.tool_dirs.iter().find(|d| !d.is_dir()) {
            return Err(Error::config(format!(
                "the tool folder {} given with --tools does not exist",
                missing.display()
            )));
        }
        let mut layers = Vec::new();
        if let Some(user) = config::user_config_path() {
            layers.extend(config::read_if_exists(&user)?);
        }
        let rule = rule.config_replaced(flags.config.is_some());
        let project = rule.admit(&root)?;
        match (&flags.config, project.loads().and_then(|files| files.config.as_ref())) {
            (Some(file), _) => layers.push(config::read_file(file)?),
            // The bytes the trust check read, not the file as it may be by now.
            (None, Some(file)) => {
                let mut layer = config::parse(file.text()?, &file.path)?;
                if let Some(missing) = layer.tools.iter().find(|d| !d.is_dir()) {
                    return Err(Error::config(format!(
                        "the tool folder {} named in `tools` does not exist (config read from {})",
                        missing.display(),
                        file.path.display()
                    )));
                }
                layer.tools.clear();
                layers.push(layer);
            }
            (None, None) => {}
        }
        Ok(Setup {
            root,
            config: config::merge(layers),
            project_trusted: project.admitted,
            notice: project.notice.clone(),
            project,
            trust_rule: rule,
        })
    }

    /// A host builder with these settings and the flags on top: the config's limits, guard rules,
    /// tool folders and `[[mcp]]` servers (see [`Setup::add_mcp_servers`]), then `--tools`
    /// folders; `--yes` answers confirmations, else `confirmer` does (none: confirm means deny).
    ///
    /// # Errors
    /// A rule whose glob does not compile (the config reader checks them first).
    pub fn builder(&self, flags: &Flags, confirmer: Option<Confirmer>) -> Result<HostBuilder> {
        let mut builder = HostBuilder::new(&self.root)
            .trusted_project(self.trust_rule.clone(), Some(self.project.clone()))
            .config(&self.config)?;
        builder = self.add_mcp_servers(builder);
        for dir in &flags.tool_dirs {
            builder = builder.tool_dir(dir);
        }
        let confirmer = if flags.yes { Some(guard::always_yes("--yes")) } else { confirmer };
        if let Some(confirmer) = confirmer {
            builder = builder.confirmer(confirmer);
        }
        Ok(builder)
    }

    /// The agent's safe defaults: calls of the tools that change the workspace or run commands
    /// ([`AGENT_CONFIRMED_TOOLS`]) need a person's confirmation when no rule of the config decides
    /// them, as Codex and Claude Code ask before them. They are rules after the config's own, so a
    /// rule of the user's (allow, deny or confirm) still decides the calls it matches; a config
    /// that sets `[guard] default` has decided every other call, and gets none. `toolhost call` and
    /// `toolhost mcp` do not take them: their caller chose the call. True when they were added.
    pub fn add_agent_defaults(&mut self) -> bool {
        if self.config.guard_default.is_some() {
            return false;
        }
        self.config.rules.extend(AGENT_CONFIRMED_TOOLS.iter().map(|tool| RuleConfig {
            tool: (*tool).to_string(),
            path: None,
            action: Action::Confirm,
            reason: None,
            origin: AGENT_DEFAULTS_ORIGIN.to_string(),
        }));
        true
    }

    /// Adds the config's `[[mcp]]` servers to `builder` as a tool source. In a build without the
    /// `mcp` feature nothing is started: each server is a load error that says so.
    pub fn add_mcp_servers(&self, builder: HostBuilder) -> HostBuilder {
        if self.config.mcp.is_empty() {
            return builder;
        }
        builder.tool_source(mcp_servers(self.config.mcp.clone()))
    }
}

/// The tool source of a config's `[[mcp]]` servers.
#[cfg(feature = "mcp")]
fn mcp_servers(servers: Vec<McpServerConfig>) -> impl ToolSource {
    // The command line keeps the servers' tool lists: a command that calls none of their tools
    // starts none of them.
    crate::mcp::McpClients::configured(servers).cache_in(crate::mcp::cache::default_dir())
}

/// Without the `mcp` feature, the servers are reported, not started.
#[cfg(not(feature = "mcp"))]
fn mcp_servers(servers: Vec<McpServerConfig>) -> impl ToolSource {
    crate::tool_source::McpNotBuilt(servers)
}
