//! The tool lists of `[[mcp]]` servers kept between runs, so a host can offer a server's tools
//! without starting it: one JSON file per server under `$XDG_CACHE_HOME/toolhost/mcp/` (else
//! `~/.cache/toolhost/mcp/`), named after the server and a fingerprint of everything that decides
//! what it serves (its transport, its environment, the workspace it runs in, toolhost's version).
//! Values of the environment are only hashed, never written. Every real start of the server lists
//! its tools again and rewrites its file; a file that cannot be read is a miss, never an error.

use std::path::{Path, PathBuf};

use rmcp::model::Tool;
use sha2::{Digest, Sha256};

use crate::config::McpServerConfig;

/// The cache folder from the environment: `$XDG_CACHE_HOME/toolhost/mcp`, else
/// `$HOME/.cache/toolhost/mcp`; `None` when neither gives an absolute folder.
pub fn default_dir() -> Option<PathBuf> {
    let absolute = |name: &str| std::env::var_os(name).map(PathBuf::from).filter(|p| p.is_absolute());
    let base = absolute("XDG_CACHE_HOME").or_else(|| absolute("HOME").map(|home| home.join(".cache")))?;
    Some(base.join("toolhost").join("mcp"))
}

/// One server's place in a cache folder.
#[derive(Debug, Clone)]
pub(crate) struct CachedList {
    path: PathBuf,
    fingerprint: String,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct CacheFile {
    fingerprint: String,
    tools: Vec<Tool>,
}

impl CachedList {
    /// Where `config`'s tools, as served in `root`, are kept in `dir`.
    pub(crate) fn new(dir: &Path, config: &McpServerConfig, root: &Path) -> CachedList {
        let mut hash = Sha256::new();
        let transport = serde_json::to_string(&config.transport).unwrap_or_default();
        for part in [config.name.as_str(), &transport, &root.display().to_string(), env!("CARGO_PKG_VERSION")] {
            hash.update(part.len().to_le_bytes());
            hash.update(part.as_bytes());
        }
        let fingerprint: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
        // The name is the config's; only characters safe in a file name are kept.
        let name: String = config
            .name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
            .collect();
        let path = dir.join(format!("{name}-{}.json", &fingerprint[..16]));
        CachedList { path, fingerprint }
    }

    /// The tools kept, when there is a readable file for this very fingerprint.
    pub(crate) fn read(&self) -> Option<Vec<Tool>> {
        let text = crate::source::read_text(&self.path, MAX_CACHE_BYTES).ok()?;
        let file: CacheFile = serde_json::from_str(&text).ok()?;
        (file.fingerprint == self.fingerprint).then_some(file.tools)
    }

    /// Keeps `tools` (written beside and renamed into place, so a reader never sees half a file).
    /// A failure to write costs the next run a start, so it is only reported.
    pub(crate) fn write(&self, tools: &[Tool]) {
        let write = || -> std::io::Result<()> {
            let dir = self.path.parent().unwrap_or(Path::new("."));
            std::fs::create_dir_all(dir)?;
            let file = CacheFile { fingerprint: self.fingerprint.clone(), tools: tools.to_vec() };
            let mut temp = tempfile::NamedTempFile::new_in(dir)?;
            serde_json::to_writer(&mut temp, &file)?;
            temp.persist(&self.path).map_err(|e| e.error)?;
            Ok(())
        };
        if let Err(e) = write() {
            eprintln!("toolhost: cannot keep the MCP tool list in {}: {e}", self.path.display());
        }
    }
}

/// The largest cache file read back: a tool list is a few hundred KiB at most.
const MAX_CACHE_BYTES: u64 = 16 << 20;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::McpTransport;

    fn config(env: &[(&str, &str)]) -> McpServerConfig {
        McpServerConfig {
            name: "docs/x".into(),
            transport: McpTransport::Stdio {
                command: "node".into(),
                args: vec!["s.mjs".into()],
                env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            },
            timeout_s: None,
            origin: "test".into(),
        }
    }

    #[test]
    fn a_list_is_read_back_for_the_same_server_and_not_for_another() {
        let dir = tempfile::tempdir().unwrap();
        let tool: Tool =
            serde_json::from_value(serde_json::json!({"name": "t", "inputSchema": {"type": "object"}})).unwrap();
        let here = CachedList::new(dir.path(), &config(&[("TOKEN", "a")]), Path::new("/w"));
        assert!(here.read().is_none());
        here.write(std::slice::from_ref(&tool));
        assert_eq!(here.read().unwrap(), vec![tool]);
        let file = std::fs::read_to_string(&here.path).unwrap();
        assert!(!file.contains("TOKEN") && here.path.file_name().unwrap().to_str().unwrap().starts_with("docs_x-"));
        // Another secret, another workspace: another server as far as its tools go.
        assert!(CachedList::new(dir.path(), &config(&[("TOKEN", "b")]), Path::new("/w")).read().is_none());
        assert!(CachedList::new(dir.path(), &config(&[("TOKEN", "a")]), Path::new("/v")).read().is_none());
        std::fs::write(&here.path, "not json").unwrap();
        assert!(here.read().is_none());
    }
}
