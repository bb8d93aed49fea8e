//! What a host is built from outside the library's defaults, as the command line builds it (design
//! section 17): the user's config, then the workspace's own `toolhost.toml` and `.toolhost/tools/`
//! when the workspace is trusted (or a config file named with `--config`), then flags on top. An
//! embedder that wants the same start-up calls [`Setup::discover`] and [`Setup::builder`].

use std::path::PathBuf;

use crate::config::{self, Config};
use crate::error::Result;
use crate::guard::{self, Confirmer};
use crate::host::HostBuilder;
use crate::trust::{self, TrustState};

/// The command line's say in a host: the flags every command shares.
#[derive(Debug, Clone, Default)]
pub struct Flags {
    /// The workspace (`--root`; the current folder when empty).
    pub root: PathBuf,
    /// A config file to use instead of the workspace's `toolhost.toml` (`--config`).
    pub config: Option<PathBuf>,
    /// More tool folders (`--tools`, repeatable); each must exist.
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
    /// The merged config: the user's file, then the project's (when trusted) or `--config`'s.
    pub config: Config,
    /// Whether the workspace's own files load (it is trusted, or has none).
    pub project_trusted: bool,
    /// The one line to show on standard error when the workspace's own files were skipped.
    pub notice: Option<String>,
}

impl Setup {
    /// Finds the settings for `flags.root`. When the workspace has files of its own that are not
    /// trusted, `ask` (if given: the REPL on a terminal) is asked whether to trust them now, with
    /// the text to show; a yes records the trust and loads them.
    ///
    /// # Errors
    /// A config file that cannot be read or is invalid (kind `config_error`, naming the file, the
    /// line and the key), or trust that cannot be recorded.
    pub fn discover(flags: &Flags, ask: Option<&dyn Fn(&str) -> bool>) -> Result<Setup> {
        let root = if flags.root.as_os_str().is_empty() { PathBuf::from(".") } else { flags.root.clone() };
        let mut layers = Vec::new();
        if let Some(user) = config::user_config_path() {
            layers.extend(config::read_if_exists(&user)?);
        }
        let state = trust::state(&root);
        let mut notice = None;
        let project_trusted = match &state {
            TrustState::NothingToTrust | TrustState::Trusted => true,
            TrustState::NotTrusted { .. } | TrustState::Changed => {
                let message = trust::skipped_message(&root, &state, &trust::project_files(&root));
                match ask {
                    Some(ask) if ask(&message) => {
                        trust::trust(&root)?;
                        true
                    }
                    _ => {
                        notice = Some(message);
                        false
                    }
                }
            }
        };
        match &flags.config {
            Some(file) => layers.push(config::read_file(file)?),
            None if project_trusted => layers.extend(config::read_if_exists(&root.join(trust::PROJECT_CONFIG))?),
            None => {}
        }
        Ok(Setup { root, config: config::merge(layers), project_trusted, notice })
    }

    /// A host builder with these settings and the flags on top: the config's limits, guard rules
    /// and tool folders, then `--tools` folders; `--yes` answers confirmations, else `confirmer`
    /// does (none: confirm means deny).
    ///
    /// # Errors
    /// A rule whose glob does not compile (the config reader checks them first).
    pub fn builder(&self, flags: &Flags, confirmer: Option<Confirmer>) -> Result<HostBuilder> {
        let mut builder = HostBuilder::new(&self.root).project_tools(self.project_trusted).config(&self.config)?;
        for dir in &flags.tool_dirs {
            builder = builder.tool_dir(dir);
        }
        let confirmer = if flags.yes { Some(guard::always_yes("--yes")) } else { confirmer };
        if let Some(confirmer) = confirmer {
            builder = builder.confirmer(confirmer);
        }
        Ok(builder)
    }
}
