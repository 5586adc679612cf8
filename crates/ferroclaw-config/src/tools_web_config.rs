//! `tools.web` in `config.json5`: the search provider, fetch limits and the SSRF policy of
//! the web tools.
//!
//! ```json5
//! tools: { web: {
//!   search: { provider: "brave", api_key_env: "BRAVE_API_KEY", default_count: 5 },
//!   fetch:  { max_chars: 50000, max_bytes: 5242880, timeout_seconds: 30 },
//!   ssrf:   { allow_hosts: ["wiki.corp.example", "10.20.0.0/16"], allow_private: false },
//! } }
//! ```
//!
//! The Brave key is never in the file: `api_key_env` names the environment variable (or
//! `.env.local` entry) it is read from.

use serde::{Deserialize, Serialize};

use crate::Env;

/// `tools.web`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WebToolsConfig {
    pub search: WebSearchConfig,
    pub fetch: WebFetchConfig,
    pub ssrf: SsrfConfig,
}

/// Which web search backend `web_search` uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchProviderKind {
    /// Brave Search API (`X-Subscription-Token`).
    Brave,
    /// A SearXNG instance's JSON API (`/search?format=json`).
    #[serde(alias = "searx")]
    Searxng,
    /// `GET {base_url}?q=&count=` answering `{results: [{title, url, snippet}]}`.
    Generic,
    /// No `web_search` tool.
    #[default]
    None,
}

/// `tools.web.search`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WebSearchConfig {
    pub provider: SearchProviderKind,
    /// Brave: optional (defaults to the public API); SearXNG and generic: required.
    /// Chosen by the operator, so search requests are not subject to the SSRF guard.
    #[serde(alias = "baseUrl")]
    pub base_url: Option<String>,
    /// Environment variable holding the Brave key.
    #[serde(alias = "apiKeyEnv")]
    pub api_key_env: String,
    /// Results when the model does not ask for a number (1–10).
    #[serde(alias = "defaultCount")]
    pub default_count: u32,
    /// Time for one search request.
    #[serde(alias = "timeoutSeconds")]
    pub timeout_seconds: u64,
}

impl Default for WebSearchConfig {
    fn default() -> Self {
        Self {
            provider: SearchProviderKind::None,
            base_url: None,
            api_key_env: "BRAVE_API_KEY".into(),
            default_count: 5,
            timeout_seconds: 20,
        }
    }
}

impl WebSearchConfig {
    /// The API key from the environment (`None` when unset or empty).
    pub fn api_key(&self, env: &Env) -> Option<String> {
        env.get(&self.api_key_env)
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(str::to_string)
    }
}

/// `tools.web.fetch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WebFetchConfig {
    /// Default and maximum characters `web_fetch` returns.
    #[serde(alias = "maxChars")]
    pub max_chars: usize,
    /// Largest response body read.
    #[serde(alias = "maxBytes")]
    pub max_bytes: usize,
    #[serde(alias = "timeoutSeconds")]
    pub timeout_seconds: u64,
}

impl Default for WebFetchConfig {
    fn default() -> Self {
        Self {
            max_chars: 50_000,
            max_bytes: 5 * 1024 * 1024,
            timeout_seconds: 30,
        }
    }
}

/// `tools.web.ssrf`: what outbound fetches made for the model may reach.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SsrfConfig {
    /// Internal hosts allowed anyway: names, globs (`*.corp.example`), IPs or CIDRs.
    #[serde(alias = "allowHosts")]
    pub allow_hosts: Vec<String>,
    /// Allow loopback/private/link-local/unique-local addresses (metadata stays blocked).
    #[serde(alias = "allowPrivate")]
    pub allow_private: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_aliases() {
        let d = WebToolsConfig::default();
        assert_eq!(d.search.provider, SearchProviderKind::None);
        assert_eq!(d.fetch.max_chars, 50_000);
        assert!(!d.ssrf.allow_private);

        let c: WebToolsConfig = serde_json::from_value(serde_json::json!({
            "search": {"provider": "searxng", "baseUrl": "http://searx.lan:8080", "default_count": 8},
            "fetch": {"timeoutSeconds": 10},
            "ssrf": {"allowHosts": ["*.corp.example"], "allow_private": true}
        }))
        .unwrap();
        assert_eq!(c.search.provider, SearchProviderKind::Searxng);
        assert_eq!(c.search.base_url.as_deref(), Some("http://searx.lan:8080"));
        assert_eq!(c.fetch.timeout_seconds, 10);
        assert_eq!(c.fetch.max_bytes, 5 * 1024 * 1024);
        assert_eq!(c.ssrf.allow_hosts, vec!["*.corp.example"]);

        let env = Env::from_pairs([("BRAVE_API_KEY", " k-123 ")]);
        assert_eq!(c.search.api_key(&env).as_deref(), Some("k-123"));
        assert_eq!(c.search.api_key(&Env::from_pairs([("X", "y")])), None);
    }
}
