//! What a model client needs to know: where the model is, which API it speaks, its key, and how
//! long and how often to try. The chat, Anthropic and Responses request builders all read it.

use std::fmt;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::agent::provider;
use crate::config::{Api, Preset, ProviderConfig};
use crate::error::{Error, Result};

/// How long one model request may take when the config does not say (`provider.timeout_s`): long,
/// because a local model on a CPU can take minutes to answer.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// When and how often a request that met a 429 or a 5xx is sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first one included (1: never retry).
    pub attempts: u32,
    /// The wait after the first failed attempt when the server sends no `Retry-After`; it doubles
    /// with each further attempt.
    pub base_delay: Duration,
    /// The longest wait, whatever `Retry-After` asks for.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    /// Five attempts, waiting 1, 2, 4 and 8 seconds (or what `Retry-After` says, up to a minute).
    fn default() -> Self {
        RetryPolicy { attempts: 5, base_delay: Duration::from_secs(1), max_delay: Duration::from_secs(60) }
    }
}

impl RetryPolicy {
    /// The wait after failed attempt `attempt` (1-based), given the server's `Retry-After`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use toolhost::agent::RetryPolicy;
    /// let policy = RetryPolicy::default();
    /// assert_eq!(policy.delay(3, None), Duration::from_secs(4));
    /// assert_eq!(policy.delay(1, Some(Duration::from_secs(7))), Duration::from_secs(7));
    /// assert_eq!(policy.delay(1, Some(Duration::from_secs(3600))), Duration::from_secs(60));
    /// ```
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let backoff = || self.base_delay.saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)));
        retry_after.unwrap_or_else(backoff).min(self.max_delay)
    }
}

/// Where the model is and how to talk to it.
#[derive(Clone)]
pub struct ClientSettings {
    /// The API's base URL, up to and including `/v1` (`http://127.0.0.1:8080/v1`).
    pub base_url: String,
    /// The model name sent with each request.
    pub model: String,
    /// The API key, sent as `Authorization: Bearer KEY`; none for servers that need none.
    pub api_key: Option<String>,
    /// How long one request may take, from connecting to the end of the reply.
    pub timeout: Duration,
    /// Fields merged into every request body (never `model`, `messages` or `tools`).
    pub extra_body: Map<String, Value>,
    /// Retries on 429 and 5xx.
    pub retry: RetryPolicy,
    /// The wire format: chat completions, Anthropic Messages or OpenAI Responses.
    pub api: Api,
    /// The preset the settings came from, if any (it may choose the catalogue's schema format).
    pub preset: Option<Preset>,
    /// `max_tokens` (the Anthropic API requires one: [`crate::agent::anthropic::DEFAULT_MAX_TOKENS`] when unset;
    /// the other APIs get none unless `extra_body` sets one).
    pub max_tokens: Option<u64>,
    /// Asks for the reply as a stream of server-sent events, shown as it arrives.
    pub stream: bool,
}

impl fmt::Debug for ClientSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientSettings")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("timeout", &self.timeout)
            .field("extra_body", &self.extra_body)
            .field("retry", &self.retry)
            .field("api", &self.api)
            .field("preset", &self.preset)
            .field("max_tokens", &self.max_tokens)
            .field("stream", &self.stream)
            .finish()
    }
}

impl ClientSettings {
    /// A server at `base_url` running `model`, without a key, with the default timeout and
    /// retries.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        ClientSettings {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            timeout: DEFAULT_TIMEOUT,
            extra_body: Map::new(),
            retry: RetryPolicy::default(),
            api: Api::Chat,
            preset: None,
            max_tokens: None,
            stream: false,
        }
    }

    /// The settings `[provider]` describes (after flags were applied to it), taking the config as
    /// the user's own: the preset's base URL and API unless set, the model must be set, and the key
    /// is read from the variable `api_key_env` names, or the preset's own variable when the base URL
    /// is the preset's host. (`toolhost agent` scopes the key further: see `agent::provider`.)
    ///
    /// ```
    /// let mut provider = toolhost::config::ProviderConfig::default();
    /// provider.base_url = Some("http://127.0.0.1:8080/v1".into());
    /// provider.model = Some("qwen2.5-coder".into());
    /// provider.timeout_s = Some(30.0);
    /// let settings = toolhost::agent::ClientSettings::from_provider(&provider).unwrap();
    /// assert_eq!(settings.timeout.as_secs(), 30);
    /// assert!(settings.api_key.is_none());
    /// ```
    ///
    /// # Errors
    /// Kind config: no base URL or model, a base URL that is not `http(s)://`, a timeout that is
    /// not a positive number of seconds, or an `api_key_env` variable that is not set.
    pub fn from_provider(provider: &ProviderConfig) -> Result<Self> {
        let own: Vec<std::path::PathBuf> = provider.set_in.values().cloned().collect();
        let resolved = provider::resolve(provider, &provider::ProviderFlags::default(), &own)?;
        ClientSettings::from_resolved(provider, &resolved)
    }

    /// The settings for `provider` as [`provider::resolve`] resolved them (base URL, API, key
    /// variable).
    ///
    /// # Errors
    /// As [`ClientSettings::from_provider`].
    pub fn from_resolved(provider: &ProviderConfig, resolved: &provider::Resolved) -> Result<Self> {
        let base_url = resolved.base_url.clone();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(Error::config(format!("the base URL must start with http:// or https://, got {base_url:?}")));
        }
        let model = provider
            .model
            .clone()
            .ok_or_else(|| Error::config("no model name: set model in [provider] of the config, or pass --model"))?;
        let mut settings = ClientSettings::new(base_url, model);
        if let Some(seconds) = provider.timeout_s {
            settings.timeout = Duration::try_from_secs_f64(seconds)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| Error::config(format!("provider.timeout_s must be a positive number, got {seconds}")))?;
        }
        if let Some(var) = &resolved.key_env {
            settings.api_key = Some(read_key(var, &resolved.key_because)?);
        }
        settings.api = resolved.api;
        settings.preset = resolved.preset;
        settings.max_tokens = provider.max_tokens;
        settings.stream = provider.stream.unwrap_or(true);
        settings.extra_body = provider.extra_body.clone();
        Ok(settings)
    }

    /// Reads the API key from the environment variable `var`.
    ///
    /// # Errors
    /// Kind config when the variable is not set or empty (the message names the variable, never
    /// a value).
    pub fn api_key_from_env(mut self, var: &str) -> Result<Self> {
        self.api_key = Some(read_key(var, &format!("provider.api_key_env names the environment variable {var}"))?);
        Ok(self)
    }

    /// The endpoint requests go to: the base URL and `/chat/completions`, `/messages` or
    /// `/responses`.
    pub fn endpoint(&self) -> String {
        let path = match self.api {
            Api::Chat => "chat/completions",
            Api::Anthropic => "messages",
            Api::Responses => "responses",
        };
        format!("{}/{path}", self.base_url.trim_end_matches('/'))
    }
}

/// The key in `var`; `because` says why that variable is read, for the error when it is not set.
fn read_key(var: &str, because: &str) -> Result<String> {
    match std::env::var(var) {
        Ok(key) if !key.trim().is_empty() => Ok(key.trim().to_string()),
        _ => Err(Error::config(format!(
            "{because}, which is not set: set {var} to the API key, or name another variable with \
             --api-key-env NAME (provider.api_key_env)"
        ))),
    }
}
