//! `web_search`: query a configured search provider and return title / URL / snippet lists.
//!
//! Providers: Brave Search API, SearXNG (JSON API) and a generic endpoint
//! (`GET {base}?q=&count=` answering `{"results":[{"title","url","snippet"}]}`).
//!
//! The provider's base URL is chosen by the operator in the config, not by the model, so
//! these requests do NOT go through the SSRF guard (a self-hosted SearXNG on the LAN is a
//! normal set-up). The model only supplies the query, which is sent as a query parameter.
//! The results are still third-party content and are wrapped as untrusted.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::web_fetch::wrap_untrusted;
use super::{optional_u64, required_str};
use crate::ssrf::error_chain;
use crate::{Tool, ToolContext, ToolResult};

use ferroclaw_config::settings::WebToolsSettings;
pub use ferroclaw_config::settings::{SearchProvider, WebSearchSettings, BRAVE_DEFAULT_BASE};

/// Largest provider response read.
const MAX_RESPONSE_BYTES: usize = 2 * 1024 * 1024;
/// Longest snippet kept per result.
const MAX_SNIPPET_CHARS: usize = 500;

/// The web tools the settings ask for: `web_fetch` always, `web_search` when a provider
/// is configured.
pub fn web_tools(settings: &WebToolsSettings) -> Vec<std::sync::Arc<dyn Tool>> {
    let mut tools: Vec<std::sync::Arc<dyn Tool>> = vec![std::sync::Arc::new(
        super::web_fetch::WebFetchTool::new(settings.fetch.clone()),
    )];
    if settings.search.provider != SearchProvider::None {
        tools.push(std::sync::Arc::new(WebSearchTool::new(
            settings.search.clone(),
        )));
    }
    tools
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchResult {
    pub title: String,
    pub url: String,
    pub snippet: String,
}

pub struct WebSearchTool {
    settings: WebSearchSettings,
    client: Result<reqwest::Client, String>,
}

impl WebSearchTool {
    pub fn new(settings: WebSearchSettings) -> Self {
        let client = reqwest::Client::builder()
            .timeout(settings.timeout)
            .user_agent(concat!("ferroclaw/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| error_chain(&e));
        Self { settings, client }
    }
}

#[async_trait]
impl Tool for WebSearchTool {
    fn name(&self) -> &str {
        "web_search"
    }

    fn description(&self) -> &str {
        "Search the web. Returns a numbered list of results with title, URL and snippet; use web_fetch to read a page."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "The search query."},
                "count": {"type": "integer", "minimum": 1, "maximum": 10, "description": format!("Number of results (1-10, default {}).", self.settings.default_count.clamp(1, 10))}
            },
            "required": ["query"]
        })
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> ToolResult {
        let query = match required_str(&args, &["query", "q"]) {
            Ok(q) if !q.trim().is_empty() => q.trim().to_string(),
            Ok(_) => return ToolResult::error("web_search: the query is empty"),
            Err(e) => return e,
        };
        let count = match optional_u64(&args, &["count", "maxResults", "max_results"]) {
            Ok(n) => n
                .map(|n| n as usize)
                .unwrap_or(self.settings.default_count)
                .clamp(1, 10),
            Err(e) => return e,
        };
        tokio::select! {
            _ = ctx.cancel.cancelled() => ToolResult::error("web_search was cancelled"),
            r = self.search(&query, count) => match r {
                Ok(results) => ToolResult::ok(render(&query, self.settings.provider, &results)),
                Err(e) => ToolResult::error(format!("web_search ({}) failed: {e}", self.settings.provider.as_str())),
            },
        }
    }
}

impl WebSearchTool {
    /// Runs one query against the configured provider.
    pub async fn search(&self, query: &str, count: usize) -> Result<Vec<SearchResult>, String> {
        let client = self.client.as_ref().map_err(|e| e.clone())?;
        let base = self
            .settings
            .base_url
            .as_deref()
            .map(|b| b.trim_end_matches('/').to_string());
        let count_s = count.to_string();
        let request = match self.settings.provider {
            SearchProvider::None => {
                return Err("no search provider is configured (tools.web.search.provider)".into())
            }
            SearchProvider::Brave => {
                let key = self
                    .settings
                    .api_key
                    .as_deref()
                    .filter(|k| !k.is_empty())
                    .ok_or_else(|| {
                        format!(
                            "Brave Search needs an API key in the environment variable {}",
                            self.settings.api_key_env
                        )
                    })?;
                let base = base.unwrap_or_else(|| BRAVE_DEFAULT_BASE.to_string());
                client
                    .get(format!("{base}/res/v1/web/search"))
                    .query(&[("q", query), ("count", count_s.as_str())])
                    .header("X-Subscription-Token", key)
                    .header(reqwest::header::ACCEPT, "application/json")
            }
            SearchProvider::Searxng => {
                let base = base.ok_or("SearXNG needs tools.web.search.base_url")?;
                client
                    .get(format!("{base}/search"))
                    .query(&[("q", query), ("format", "json")])
            }
            SearchProvider::Generic => {
                let base = base.ok_or("the generic provider needs tools.web.search.base_url")?;
                client
                    .get(base)
                    .query(&[("q", query), ("count", count_s.as_str())])
            }
        };
        let mut response = request.send().await.map_err(|e| error_chain(&e))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("the provider answered HTTP {status}"));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| error_chain(&e))? {
            if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                return Err(format!(
                    "the provider's response is larger than {MAX_RESPONSE_BYTES} bytes"
                ));
            }
            body.extend_from_slice(&chunk);
        }
        let json: Value = serde_json::from_slice(&body)
            .map_err(|e| format!("the provider's response is not valid JSON: {e}"))?;
        let (list, snippet_key) = match self.settings.provider {
            SearchProvider::Brave => (json.pointer("/web/results"), "description"),
            SearchProvider::Searxng => (json.get("results"), "content"),
            _ => (json.get("results"), "snippet"),
        };
        let Some(list) = list else {
            // Brave omits `web` when nothing matched.
            return Ok(Vec::new());
        };
        let items = list
            .as_array()
            .ok_or("the provider's results are not a list")?;
        let text = |v: &Value, k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .map(clean_snippet)
                .unwrap_or_default()
        };
        Ok(items
            .iter()
            .map(|r| SearchResult {
                title: text(r, "title"),
                url: text(r, "url"),
                snippet: {
                    let s = text(r, snippet_key);
                    if s.is_empty() {
                        // Providers differ; take whichever description field is there.
                        ["description", "content", "snippet"]
                            .iter()
                            .map(|k| text(r, k))
                            .find(|s| !s.is_empty())
                            .unwrap_or_default()
                    } else {
                        s
                    }
                },
            })
            .filter(|r| !r.url.is_empty())
            .take(count)
            .collect())
    }
}

/// Snippets carry highlight markup (`<strong>`) and entities; keep the words only, on
/// one line, bounded. Angle brackets are dropped rather than rendered: a snippet is a
/// hint, the page itself is read with web_fetch.
fn clean_snippet(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_tag = false;
    for ch in s.chars() {
        match ch {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if in_tag => {}
            _ => out.push(ch),
        }
    }
    let out = out
        .replace("&amp;", "&")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&lt;", "‹")
        .replace("&gt;", "›")
        .replace("&nbsp;", " ");
    let mut one_line = out.split_whitespace().collect::<Vec<_>>().join(" ");
    if super::web_fetch::truncate_chars(&mut one_line, MAX_SNIPPET_CHARS).is_some() {
        one_line.push('…');
    }
    one_line
}

fn render(query: &str, provider: SearchProvider, results: &[SearchResult]) -> String {
    let mut body = String::new();
    if results.is_empty() {
        body.push_str("No results.");
    }
    for (i, r) in results.iter().enumerate() {
        body.push_str(&format!(
            "{}. {}\n   {}\n",
            i + 1,
            if r.title.is_empty() {
                "(no title)"
            } else {
                &r.title
            },
            r.url
        ));
        if !r.snippet.is_empty() {
            body.push_str(&format!("   {}\n", r.snippet));
        }
    }
    wrap_untrusted(
        &format!("web search ({})", provider.as_str()),
        &format!("Results for {query:?}:"),
        &body,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn web_search_only_when_a_provider_is_set() {
        let mut settings = WebToolsSettings::default();
        let names = |t: Vec<std::sync::Arc<dyn Tool>>| {
            t.iter().map(|t| t.name().to_string()).collect::<Vec<_>>()
        };
        assert_eq!(names(web_tools(&settings)), ["web_fetch"]);
        settings.search.provider = SearchProvider::Brave;
        assert_eq!(names(web_tools(&settings)), ["web_fetch", "web_search"]);
    }

    #[test]
    fn snippets_lose_markup() {
        assert_eq!(
            clean_snippet("The <strong>Rust</strong> book &amp; more\n  text"),
            "The Rust book & more text"
        );
    }
}
