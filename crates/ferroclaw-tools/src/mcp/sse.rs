//! The legacy HTTP+SSE transport (MCP 2024-11-05), which rmcp no longer ships: a GET
//! opens an event stream whose first `endpoint` event names where to POST messages;
//! every answer comes back on the stream as a `message` event.
//!
//! The endpoint must be on the stream's own origin: a server may not send the gateway's
//! requests (and the configured headers, credentials included) somewhere else.

use std::borrow::Cow;
use std::sync::Arc;

use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use reqwest::header::{HeaderMap, ACCEPT};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleClient;
use rmcp::transport::Transport;
use sse_stream::{Sse, SseStream};
use url::Url;

/// One SSE event at most (a tool result can be large; a runaway stream cannot).
const MAX_EVENT: usize = 16 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum SseTransportError {
    #[error("{}", ferroclaw_types::error_chain(.0))]
    Http(#[from] reqwest::Error),
    #[error("the server refused a message: HTTP {0}")]
    Refused(reqwest::StatusCode),
}

pub struct LegacySse {
    client: reqwest::Client,
    headers: HeaderMap,
    endpoint: Arc<str>,
    events: BoxStream<'static, Result<Sse, sse_stream::Error>>,
}

impl LegacySse {
    /// Opens the stream at `url` and waits for its `endpoint` event.
    pub async fn connect(
        client: reqwest::Client,
        url: &str,
        headers: HeaderMap,
    ) -> Result<LegacySse, String> {
        let base = Url::parse(url).map_err(|e| format!("bad url `{url}`: {e}"))?;
        let resp = client
            .get(base.clone())
            .headers(headers.clone())
            .header(ACCEPT, "text/event-stream")
            .send()
            .await
            .map_err(|e| format!("cannot reach {url}: {}", ferroclaw_types::error_chain(&e)))?;
        if !resp.status().is_success() {
            return Err(format!("{url} answered HTTP {}", resp.status()));
        }
        let mut seen = 0usize;
        let bytes = resp.bytes_stream().map(move |chunk| {
            // A bound on the whole stream would cut a healthy long-lived one; this bounds
            // what one chunk may add to an event still open (the parser buffers it).
            let chunk = chunk.map_err(std::io::Error::other)?;
            seen = if chunk.contains(&b'\n') {
                0
            } else {
                seen + chunk.len()
            };
            if seen > MAX_EVENT {
                return Err(std::io::Error::other("an SSE event larger than 16 MiB"));
            }
            Ok(chunk)
        });
        let mut events = SseStream::from_bytes_stream(bytes).boxed();
        let endpoint = loop {
            match events.next().await {
                Some(Ok(ev)) if ev.event.as_deref() == Some("endpoint") => {
                    break ev.data.unwrap_or_default();
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(format!("the event stream failed: {e}")),
                None => return Err("the event stream ended before naming an endpoint".into()),
            }
        };
        let endpoint = base
            .join(endpoint.trim())
            .map_err(|e| format!("the server named a bad endpoint `{endpoint}`: {e}"))?;
        if endpoint.origin() != base.origin() {
            return Err(format!(
                "the server named an endpoint on another origin ({}); refused",
                endpoint.origin().ascii_serialization()
            ));
        }
        Ok(LegacySse {
            client,
            headers,
            endpoint: endpoint.as_str().into(),
            events,
        })
    }
}

impl Transport<RoleClient> for LegacySse {
    type Error = SseTransportError;

    fn name() -> Cow<'static, str> {
        "sse".into()
    }

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let req = self
            .client
            .post(&*self.endpoint)
            .headers(self.headers.clone())
            .json(&item);
        async move {
            let resp = req.send().await?;
            if !resp.status().is_success() {
                return Err(SseTransportError::Refused(resp.status()));
            }
            Ok(())
        }
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            let ev = match self.events.next().await? {
                Ok(ev) => ev,
                Err(e) => {
                    tracing::warn!(error = %e, "mcp: the SSE stream failed");
                    return None;
                }
            };
            // Unnamed events are `message` events.
            if !matches!(ev.event.as_deref(), None | Some("message")) {
                continue;
            }
            let Some(data) = ev.data.filter(|d| !d.trim().is_empty()) else {
                continue;
            };
            match serde_json::from_str(&data) {
                Ok(msg) => return Some(msg),
                Err(e) => tracing::warn!(error = %e, "mcp: an SSE message that is not JSON-RPC"),
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.events = futures_util::stream::empty().boxed();
        Ok(())
    }
}
