//! Is a provider there, and what models does it list? For `doctor`, `onboard` and the
//! gateway's `providers.status`: the configured providers' reachability, and the local
//! OpenAI-compatible servers (Ollama, vLLM, LM Studio) answering on their usual ports.

use std::time::{Duration, Instant};

use serde::Serialize;

/// Local OpenAI-compatible servers, by name, on their usual ports.
pub const LOCAL_SERVERS: [(&str, &str); 3] = [
    ("ollama", "http://127.0.0.1:11434/v1"),
    ("vllm", "http://127.0.0.1:8000/v1"),
    ("lmstudio", "http://127.0.0.1:1234/v1"),
];

/// A client for probes (each probe sets its own time-out).
pub fn client() -> reqwest::Client {
    reqwest::Client::new()
}

/// How a provider answered `GET <base>/models`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    pub name: String,
    pub base_url: String,
    pub reachable: bool,
    /// The HTTP status, when it answered at all.
    pub status: Option<u16>,
    /// What it lists (at most 50).
    pub models: Vec<String>,
    pub error: Option<String>,
    pub latency_ms: u64,
}

/// Which wire a provider speaks, for its headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    OpenAi,
    Anthropic,
}

/// Asks `base_url` for its models within `timeout`. A provider that answers 401/403 is
/// reachable (the key is what is wrong), and says so.
pub async fn probe(
    http: &reqwest::Client,
    name: &str,
    base_url: &str,
    wire: Wire,
    api_key: Option<&str>,
    timeout: Duration,
) -> Probe {
    let started = Instant::now();
    let mut req = http
        .get(format!("{}/models", base_url.trim_end_matches('/')))
        .timeout(timeout);
    if let Some(key) = api_key {
        req = match wire {
            Wire::OpenAi => req.bearer_auth(key),
            Wire::Anthropic => req
                .header("x-api-key", key)
                .header("anthropic-version", "2023-06-01"),
        };
    }
    let mut out = Probe {
        name: name.to_string(),
        base_url: base_url.to_string(),
        reachable: false,
        status: None,
        models: Vec::new(),
        error: None,
        latency_ms: 0,
    };
    match req.send().await {
        Err(e) => {
            out.error = Some(if e.is_timeout() {
                format!("no answer within {} s", timeout.as_secs_f32())
            } else if e.is_connect() {
                "nothing listens there (connection refused or unreachable)".into()
            } else {
                format!("request failed: {e}")
            })
        }
        Ok(resp) => {
            let status = resp.status();
            out.status = Some(status.as_u16());
            out.reachable = true;
            if status.is_success() {
                let body = read_capped(resp, 4 << 20).await;
                match body.and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok()) {
                    Some(v) => {
                        out.models = v["data"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|m| m["id"].as_str().map(str::to_string))
                            .take(50)
                            .collect()
                    }
                    None => out.error = Some("answered, but not with a model list".into()),
                }
            } else if status.as_u16() == 401 || status.as_u16() == 403 {
                out.error = Some(format!("{status}: the key is missing or refused"));
            } else {
                out.error = Some(format!("answered {status}"));
            }
        }
    }
    out.latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    out
}

/// The local servers that answer with at least one model, in [`LOCAL_SERVERS`] order
/// (each asked at once, for at most `timeout`).
pub async fn find_local(http: &reqwest::Client, timeout: Duration) -> Vec<Probe> {
    let probes = LOCAL_SERVERS
        .iter()
        .map(|(name, base)| probe(http, name, base, Wire::OpenAi, None, timeout));
    futures_util::future::join_all(probes)
        .await
        .into_iter()
        .filter(|p| !p.models.is_empty())
        .collect()
}

/// The body, unless it passes `max` bytes: a provider's model list is small, and
/// anything bigger is not one.
async fn read_capped(mut resp: reqwest::Response, max: usize) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = resp.chunk().await {
        if body.len() + chunk.len() > max {
            return None;
        }
        body.extend_from_slice(&chunk);
    }
    Some(body)
}
