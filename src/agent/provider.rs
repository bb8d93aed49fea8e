//! Provider presets and the API key's scope: what `--provider NAME` (`[provider] preset`) sets (the
//! base URL, the API shape, the variable the key is read from, the default dialect and schema
//! format), which variable's key a request may carry to which host, and llama-server's `/props`
//! check of whether the model's chat template can take tools at all.
//!
//! # The key's scope
//!
//! A preset's key variable (`OPENAI_API_KEY`, ...) is read only when the request goes to that
//! preset's own host over https (the host compared exactly, after parsing the URL). Any other base
//! URL gets a key only when the user chose its variable: `--api-key-env NAME`, or `api_key_env` in
//! the user's own config file (or a `--config` file). A project's `toolhost.toml` can point
//! `base_url` anywhere, but a key the user named is then not sent there (the user confirms the
//! address with `--base-url`), and its own `api_key_env` is not used at all: a project cannot
//! choose which of the user's secrets leaves the machine, nor where to.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::config::{Api, Dialect, Preset, ProviderConfig};
use crate::error::{Error, Result};
use crate::schema::Format;

/// Every preset, in the order `--help` lists them.
pub const PRESETS: [Preset; 7] = [
    Preset::OpenAi,
    Preset::Anthropic,
    Preset::OpenRouter,
    Preset::Gemini,
    Preset::Ollama,
    Preset::LlamaServer,
    Preset::Vllm,
];

impl Preset {
    /// The name `--provider` and `[provider] preset` take.
    pub fn name(self) -> &'static str {
        match self {
            Preset::OpenAi => "openai",
            Preset::Anthropic => "anthropic",
            Preset::OpenRouter => "openrouter",
            Preset::Gemini => "gemini",
            Preset::Ollama => "ollama",
            Preset::LlamaServer => "llama-server",
            Preset::Vllm => "vllm",
        }
    }

    /// The base URL, up to the path the API's endpoints hang from. Local servers are asked at
    /// 127.0.0.1, not `localhost`, so that nothing resolves the name elsewhere.
    pub fn base_url(self) -> &'static str {
        match self {
            Preset::OpenAi => "https://api.openai.com/v1",
            Preset::Anthropic => "https://api.anthropic.com/v1",
            Preset::OpenRouter => "https://openrouter.ai/api/v1",
            Preset::Gemini => "https://generativelanguage.googleapis.com/v1beta/openai",
            Preset::Ollama => "http://127.0.0.1:11434/v1",
            Preset::LlamaServer => "http://127.0.0.1:8080/v1",
            Preset::Vllm => "http://127.0.0.1:8000/v1",
        }
    }

    /// The API shape requests take unless `--api` or `[provider] api` says otherwise.
    pub fn api(self) -> Api {
        match self {
            Preset::OpenAi => Api::Responses,
            Preset::Anthropic => Api::Anthropic,
            _ => Api::Chat,
        }
    }

    /// The variable the key is conventionally in; none for local servers.
    pub fn key_env(self) -> Option<&'static str> {
        match self {
            Preset::OpenAi => Some("OPENAI_API_KEY"),
            Preset::Anthropic => Some("ANTHROPIC_API_KEY"),
            Preset::OpenRouter => Some("OPENROUTER_API_KEY"),
            Preset::Gemini => Some("GEMINI_API_KEY"),
            Preset::Ollama | Preset::LlamaServer | Preset::Vllm => None,
        }
    }

    /// The one host the preset's key may go to (over https).
    fn own_host(self) -> Option<&'static str> {
        self.key_env().map(|_| host_of(self.base_url()).map_or("", |(_, host)| host_name(host)))
    }

    /// The dialect unless `--dialect` or `[provider] dialect` says otherwise: llama-server's
    /// models often have chat templates without tools, which its `/props` tells (see
    /// [`template_takes_tools`]).
    pub fn dialect(self) -> Dialect {
        match self {
            Preset::LlamaServer => Dialect::Auto,
            _ => Dialect::Native,
        }
    }

    /// The schema format of the tool catalogue this preset's requests carry: Gemini's function
    /// declarations take only a subset of JSON Schema, so the gemini preset sends its dialect
    /// (strict mode's rewrite uses type arrays, which Gemini refuses, so it has no strict form).
    pub fn schema_format(self, strict: bool) -> Format {
        match self {
            Preset::Gemini => Format::Gemini,
            _ => openai_format(strict),
        }
    }
}

/// The OpenAI catalogue shape, strict or not; the Anthropic and Responses clients reshape it.
pub fn openai_format(strict: bool) -> Format {
    if strict {
        Format::OpenAiStrict
    } else {
        Format::OpenAi
    }
}

/// Where one provider setting came from, for the key's scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A command-line flag.
    Flag,
    /// The user's own config file, or a `--config` file.
    User,
    /// The workspace's `toolhost.toml`.
    Project,
    /// The preset.
    Preset,
}

/// The provider settings once presets and flags are applied: what the client needs besides the
/// key, the variable the key is to be read from, and notes for the user about keys not sent.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The preset in use, if any.
    pub preset: Option<Preset>,
    /// The API shape.
    pub api: Api,
    /// The base URL.
    pub base_url: String,
    /// The variable to read the key from; `None`: send no key.
    pub key_env: Option<String>,
    /// Why the key variable was chosen, for the message when it is not set.
    pub key_because: String,
    /// What the user should know (a key not sent, and why).
    pub notes: Vec<String>,
}

/// What the command line says about the provider, on top of the config.
#[derive(Debug, Clone, Default)]
pub struct ProviderFlags {
    /// `--provider`.
    pub preset: Option<Preset>,
    /// `--api`.
    pub api: Option<Api>,
    /// `--base-url`.
    pub base_url: Option<String>,
    /// `--api-key-env`.
    pub api_key_env: Option<String>,
}

/// Applies `flags` and the preset to `provider`: the base URL, the API and the key's variable,
/// scoped as the module docs say. `user_files` are the config files that are the user's own
/// (their config file, a `--config` file): settings from any other file are the project's.
///
/// # Errors
/// Kind config when no base URL is set by a flag, the config or a preset.
pub fn resolve(provider: &ProviderConfig, flags: &ProviderFlags, user_files: &[PathBuf]) -> Result<Resolved> {
    let source_in_config = |key: &str| match provider.set_in.get(key) {
        Some(file) if !user_files.contains(file) => Source::Project,
        _ => Source::User,
    };
    let preset = flags.preset.or(provider.preset);
    let (base_url, url_source) = match (&flags.base_url, &provider.base_url, preset) {
        (Some(url), _, _) => (url.clone(), Source::Flag),
        (None, Some(url), _) => (url.clone(), source_in_config("base_url")),
        (None, None, Some(preset)) => (preset.base_url().to_string(), Source::Preset),
        (None, None, None) => {
            return Err(Error::config(
                "no model server: pass --provider NAME (openai, anthropic, openrouter, gemini, ollama, \
                 llama-server, vllm) or --base-url URL, or set preset or base_url in [provider] of the config",
            ))
        }
    };
    let api = flags.api.or(provider.api).or(preset.map(Preset::api)).unwrap_or(Api::Chat);
    let named = match (&flags.api_key_env, &provider.api_key_env) {
        (Some(var), _) => Some((var.clone(), Source::Flag)),
        (None, Some(var)) => Some((var.clone(), source_in_config("api_key_env"))),
        (None, None) => None,
    };
    let mut notes = Vec::new();
    if let Some((var, source)) = &named {
        match (source, url_source) {
            (Source::Project, _) => notes.push(format!(
                "the project's toolhost.toml names api_key_env = {var:?}; a project's file cannot choose \
                 which key is sent: name it in your own config or with --api-key-env"
            )),
            (_, Source::Project) => notes.push(format!(
                "not sending the key in {var}: the base URL {base_url} comes from the project's \
                 toolhost.toml; pass --base-url {base_url} to send it there"
            )),
            _ => {
                let because = format!(
                    "{} names the environment variable {var}",
                    match source {
                        Source::Flag => "--api-key-env",
                        _ => "provider.api_key_env",
                    }
                );
                return Ok(Resolved { preset, api, base_url, key_env: Some(var.clone()), key_because: because, notes });
            }
        }
    }
    // A preset's key, to the preset's own host only; a base URL on a known provider's host gets
    // that provider's key without naming the preset.
    let host = host_of(&base_url)
        .filter(|(scheme, _)| scheme == "https")
        .map(|(_, host)| host_name(host).to_ascii_lowercase());
    let owner =
        preset.into_iter().chain(PRESETS).find(|p| p.own_host().is_some() && p.own_host().map(str::to_string) == host);
    let (key_env, key_because) = match owner {
        Some(owner) => {
            let var = owner.key_env().unwrap_or_default().to_string();
            let because = format!("the {} API at {} reads the key from {var}", owner.name(), base_url);
            (Some(var), because)
        }
        None => (None, String::new()),
    };
    Ok(Resolved { preset, api, base_url, key_env, key_because, notes })
}

/// The scheme and authority of an absolute URL (lowercased), if it has them.
fn host_of(url: &str) -> Option<(String, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    Some((scheme.to_ascii_lowercase(), authority))
}

/// The host of an authority (`user@host:port`): without user or port.
fn host_name(authority: &str) -> &str {
    let host = authority.rsplit('@').next().unwrap_or(authority);
    if host.starts_with('[') {
        return host.split(']').next().map_or(host, |h| &host[..h.len() + 1]);
    }
    host.split(':').next().unwrap_or(host)
}

/// What llama-server's `/props` says about the model's chat template: `Some(false)` when it
/// cannot take tools (`chat_template_caps.supports_tools` or `supports_tool_calls` false and no
/// separate `chat_template_tool_use` template), `Some(true)` when it can, `None` when the server
/// does not say (no `/props`, not JSON, no caps). `/props` is at the server's root, so a base URL
/// ending in `/v1` is asked without it.
pub fn template_takes_tools(base_url: &str, timeout: Duration) -> Option<(bool, String)> {
    let root = base_url.trim_end_matches('/');
    let root = root.strip_suffix("/v1").unwrap_or(root);
    let url = format!("{root}/props");
    let config = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .max_redirects(0)
        .user_agent(concat!("toolhost/", env!("CARGO_PKG_VERSION")))
        .build();
    let agent: ureq::Agent = config.into();
    let mut response = agent.get(&url).call().ok()?;
    if response.status().as_u16() != 200 {
        return None;
    }
    let text = response.body_mut().with_config().limit(16 * 1024 * 1024).read_to_string().ok()?;
    let props: Value = serde_json::from_str(&text).ok()?;
    caps_take_tools(&props)
}

/// [`template_takes_tools`] on a `/props` answer: whether tools are usable, and the caps that say
/// so (`supports_tools=false`), for the message.
pub fn caps_take_tools(props: &Value) -> Option<(bool, String)> {
    let caps = props.get("chat_template_caps").and_then(Value::as_object).filter(|c| !c.is_empty())?;
    let tools = caps.get("supports_tools").and_then(Value::as_bool)?;
    let calls = caps.get("supports_tool_calls").and_then(Value::as_bool).unwrap_or(true);
    let separate = props.get("chat_template_tool_use").is_some_and(|t| t.as_str().is_some_and(|s| !s.is_empty()));
    let said = format!("supports_tools={tools}, supports_tool_calls={calls}");
    Some((separate || (tools && calls), said))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn provider(base_url: Option<&str>, key: Option<&str>, file: &str) -> ProviderConfig {
        let mut p = ProviderConfig {
            base_url: base_url.map(String::from),
            api_key_env: key.map(String::from),
            ..Default::default()
        };
        for (k, set) in [("base_url", base_url.is_some()), ("api_key_env", key.is_some())] {
            if set {
                p.set_in.insert(k.into(), PathBuf::from(file));
            }
        }
        p
    }

    fn user() -> Vec<PathBuf> {
        vec![PathBuf::from("/home/u/.config/toolhost/config.toml")]
    }

    #[test]
    fn a_presets_key_goes_to_its_own_host_only() {
        let flags = ProviderFlags { preset: Some(Preset::OpenAi), ..Default::default() };
        let r = resolve(&ProviderConfig::default(), &flags, &user()).unwrap();
        assert_eq!(
            (r.base_url.as_str(), r.api, r.key_env.as_deref()),
            ("https://api.openai.com/v1", Api::Responses, Some("OPENAI_API_KEY"))
        );
        for elsewhere in
            ["https://api.openai.com.evil.example/v1", "http://api.openai.com/v1", "https://proxy.example/v1"]
        {
            let flags =
                ProviderFlags { preset: Some(Preset::OpenAi), base_url: Some(elsewhere.into()), ..Default::default() };
            let r = resolve(&ProviderConfig::default(), &flags, &user()).unwrap();
            assert_eq!(r.key_env, None, "{elsewhere}");
        }
        let flags = ProviderFlags { base_url: Some("https://API.anthropic.com:443/v1".into()), ..Default::default() };
        let r = resolve(&ProviderConfig::default(), &flags, &user()).unwrap();
        assert_eq!(r.key_env.as_deref(), Some("ANTHROPIC_API_KEY"), "a known provider's host gets its key");
        let local = ProviderFlags { preset: Some(Preset::LlamaServer), ..Default::default() };
        assert_eq!(resolve(&ProviderConfig::default(), &local, &user()).unwrap().key_env, None);
    }

    #[test]
    fn a_project_file_cannot_send_the_users_key_elsewhere() {
        let project = "/w/toolhost.toml";
        // The project names a variable: not used.
        let p = provider(Some("https://evil.example/v1"), Some("AWS_SECRET_ACCESS_KEY"), project);
        let r = resolve(&p, &ProviderFlags::default(), &user()).unwrap();
        assert_eq!(r.key_env, None);
        assert!(r.notes[0].contains("cannot choose"), "{:?}", r.notes);
        // The user names it, the project moves the URL: not sent there.
        let mut p = provider(Some("https://evil.example/v1"), None, project);
        p.api_key_env = Some("MY_KEY".into());
        p.set_in.insert("api_key_env".into(), user()[0].clone());
        let r = resolve(&p, &ProviderFlags::default(), &user()).unwrap();
        assert_eq!(r.key_env, None);
        assert!(r.notes[0].contains("pass --base-url https://evil.example/v1"), "{:?}", r.notes);
        let flags = ProviderFlags { api_key_env: Some("MY_KEY".into()), ..Default::default() };
        assert_eq!(
            resolve(&p, &flags, &user()).unwrap().key_env,
            None,
            "--api-key-env does not confirm a project's URL"
        );
        // The user confirms the URL: sent.
        let flags = ProviderFlags { base_url: Some("https://evil.example/v1".into()), ..Default::default() };
        assert_eq!(resolve(&p, &flags, &user()).unwrap().key_env.as_deref(), Some("MY_KEY"));
        // The user's own file sets both: sent.
        let p = provider(Some("https://mine.example/v1"), Some("MY_KEY"), "/home/u/.config/toolhost/config.toml");
        assert_eq!(resolve(&p, &ProviderFlags::default(), &user()).unwrap().key_env.as_deref(), Some("MY_KEY"));
    }

    #[test]
    fn llama_server_caps_are_read() {
        let no = json!({"chat_template_caps": {"supports_tools": false, "supports_tool_calls": false}});
        assert_eq!(caps_take_tools(&no).map(|c| c.0), Some(false));
        let separate =
            json!({"chat_template_caps": {"supports_tools": false}, "chat_template_tool_use": "{{ tools }}"});
        assert_eq!(caps_take_tools(&separate).map(|c| c.0), Some(true));
        let yes = json!({"chat_template_caps": {"supports_tools": true, "supports_tool_calls": true}});
        assert_eq!(caps_take_tools(&yes).map(|c| c.0), Some(true));
        assert_eq!(caps_take_tools(&json!({"chat_template_caps": {}})), None);
        assert_eq!(caps_take_tools(&json!({"model_path": "x"})), None);
    }
}
