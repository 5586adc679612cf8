//! The HTTP shell both wire formats run in: the client, the headers (extra ones and the
//! API key), the time-outs, one chat call (send, status → error, a JSON body or an SSE
//! stream within the reply cap, errors annotated with provider and model) and the model
//! list. A wire format ([`Wire`]) only builds bodies and reads replies; every wire
//! format is a [`Provider`] through this shell.

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION};
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::http_error::annotate;
use crate::transport::{
    build_client, header_map, read_json, send, ReplyBudget, SseReader, MAX_MODEL_LIST_BYTES,
};
use crate::{ChatRequest, ChatResponse, DeltaSink, ErrorKind, Provider, ProviderError};

/// What one wire format adds to the shell: the request body and the reading of replies.
pub(crate) trait Wire: Send + Sync {
    type Turn: WireTurn + Send;

    fn shell(&self) -> &HttpShell;

    fn body(&self, req: &ChatRequest) -> Value;

    /// A whole (non-streamed) JSON reply.
    fn parse_response(v: &Value) -> Result<Self::Turn, ProviderError>;

    /// A streamed reply.
    fn read_stream(
        s: StreamCtx<'_>,
    ) -> impl Future<Output = Result<Self::Turn, ProviderError>> + Send + '_;
}

/// What reading a stream needs: deltas go to `sink` (`emitted` turns true with the
/// first), every byte counts against `budget`.
pub(crate) struct StreamCtx<'a> {
    pub(crate) reader: &'a mut SseReader,
    pub(crate) sink: &'a dyn DeltaSink,
    pub(crate) cancel: &'a CancellationToken,
    pub(crate) emitted: &'a mut bool,
    pub(crate) budget: &'a mut ReplyBudget,
}

#[async_trait]
impl<W: Wire> Provider for W {
    fn name(&self) -> &str {
        &self.shell().name
    }

    async fn chat(
        &self,
        req: &ChatRequest,
        sink: &dyn DeltaSink,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, ProviderError> {
        let body = self.body(req);
        self.shell().chat::<W>(&body, req, sink, cancel).await
    }

    async fn list_models(&self) -> Result<Vec<String>, ProviderError> {
        self.shell().list_models().await
    }
}

/// One reply as a wire format assembled it.
pub(crate) trait WireTurn {
    /// What counts against the reply cap.
    fn size(&self) -> usize;
    fn into_response(self, provider: &str, model: &str) -> ChatResponse;
}

/// Where the API key travels.
pub(crate) enum KeyHeader {
    /// `Authorization: Bearer <key>`.
    Bearer,
    /// The key alone, in the named header.
    Named(HeaderName),
}

/// What a shell is built from.
pub(crate) struct Endpoint<'a> {
    /// Provider name used in errors, logs and cool-downs.
    pub(crate) name: &'a str,
    pub(crate) chat_url: String,
    pub(crate) models_url: String,
    /// Configured extra headers.
    pub(crate) headers: &'a [(String, String)],
    pub(crate) api_key: Option<&'a str>,
    pub(crate) key_header: KeyHeader,
    pub(crate) request_timeout: Duration,
    pub(crate) idle_timeout: Duration,
}

pub(crate) struct HttpShell {
    name: String,
    chat_url: String,
    models_url: String,
    client: reqwest::Client,
    headers: HeaderMap,
    /// Whole non-streamed request; for a stream, the wait for the response headers.
    request_timeout: Duration,
    /// Longest gap allowed between two stream events.
    idle_timeout: Duration,
}

impl HttpShell {
    /// Validates the extra headers and the key once; an empty key sends none (local
    /// servers need none).
    pub(crate) fn new(ep: Endpoint<'_>) -> Result<Self, ProviderError> {
        let mut headers = header_map(ep.headers)?;
        if let Some(key) = ep.api_key.filter(|k| !k.is_empty()) {
            let (name, value) = match ep.key_header {
                KeyHeader::Bearer => (AUTHORIZATION, format!("Bearer {key}")),
                KeyHeader::Named(name) => (name, key.to_owned()),
            };
            let mut v = HeaderValue::from_str(&value).map_err(|_| {
                ProviderError::new(ErrorKind::Auth, "API key contains invalid characters")
            })?;
            v.set_sensitive(true);
            headers.insert(name, v);
        }
        Ok(Self {
            name: ep.name.to_owned(),
            chat_url: ep.chat_url,
            models_url: ep.models_url,
            client: build_client(ep.request_timeout)?,
            headers,
            request_timeout: ep.request_timeout,
            idle_timeout: ep.idle_timeout,
        })
    }

    /// A header every request carries (e.g. an API version).
    pub(crate) fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.insert(name, value);
        self
    }

    /// POSTs `body` and reads the reply in wire format `W`. Every error carries
    /// the provider, the model and whether a delta had already been streamed (after
    /// which nobody may retry).
    async fn chat<W: Wire>(
        &self,
        body: &Value,
        req: &ChatRequest,
        sink: &dyn DeltaSink,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, ProviderError> {
        let mut emitted = false;
        self.chat_inner::<W>(body, req, sink, cancel, &mut emitted)
            .await
            .map_err(|mut e| {
                e.streamed |= emitted;
                annotate(e, &self.name, &req.model)
            })
    }

    async fn chat_inner<W: Wire>(
        &self,
        body: &Value,
        req: &ChatRequest,
        sink: &dyn DeltaSink,
        cancel: &CancellationToken,
        emitted: &mut bool,
    ) -> Result<ChatResponse, ProviderError> {
        let deadline = Instant::now() + self.request_timeout;
        let rb = self
            .client
            .post(&self.chat_url)
            .headers(self.headers.clone())
            .json(body);
        let resp = send(rb, deadline, cancel).await?;
        let mut budget = ReplyBudget::new(req.reply_limit());
        let turn = if req.stream {
            let mut reader = SseReader::new(resp, self.idle_timeout, &budget);
            W::read_stream(StreamCtx {
                reader: &mut reader,
                sink,
                cancel,
                emitted,
                budget: &mut budget,
            })
            .await?
        } else {
            let limit = req.reply_limit();
            let v = read_json(resp, deadline, cancel, budget.raw_limit(), || {
                ProviderError::reply_too_large(limit)
            })
            .await?;
            let turn = W::parse_response(&v)?;
            budget.take(turn.size())?;
            turn
        };
        Ok(turn.into_response(&self.name, &req.model))
    }

    /// GETs a `{"data":[{"id":..}]}` model list.
    async fn list_models(&self) -> Result<Vec<String>, ProviderError> {
        let never = CancellationToken::new();
        let deadline = Instant::now() + self.request_timeout;
        let rb = self
            .client
            .get(&self.models_url)
            .headers(self.headers.clone());
        let result = async {
            let resp = send(rb, deadline, &never).await?;
            let v = read_json(resp, deadline, &never, MAX_MODEL_LIST_BYTES, || {
                ProviderError::new(ErrorKind::Malformed, "model list is too large")
            })
            .await?;
            model_ids(&v)
        }
        .await;
        result.map_err(|e| annotate(e, &self.name, ""))
    }
}

/// `{"data":[{"id":..}]}`: the model list of both APIs.
pub(crate) fn model_ids(v: &Value) -> Result<Vec<String>, ProviderError> {
    let data = v.get("data").and_then(Value::as_array).ok_or_else(|| {
        ProviderError::new(ErrorKind::Malformed, "model list has no `data` array")
    })?;
    Ok(data
        .iter()
        .filter_map(|m| m.get("id").and_then(Value::as_str).map(str::to_owned))
        .collect())
}
