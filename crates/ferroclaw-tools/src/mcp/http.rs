//! rmcp's streamable-HTTP client over the reqwest (0.12, rustls) every other HTTP call
//! here uses: rmcp's own reqwest client is 0.13, a second HTTP stack to compile and
//! keep patched. rmcp keeps the protocol (sessions, the GET stream, re-initialising an
//! expired session); this file is only the wire: one POST, one GET, one DELETE.
//!
//! Answers are bounded: a JSON body by `max_json_response_size`, one SSE event by
//! `max_sse_event_size`, an error body to a short prefix — a server cannot make the
//! gateway buffer without limit.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use reqwest::{Response, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::{Sse, SseStream};

const SESSION_ID: &str = "mcp-session-id";
const LAST_EVENT_ID: &str = "last-event-id";
const JSON: &str = "application/json";
const EVENT_STREAM: &str = "text/event-stream";
/// What a server's error page contributes to our error message.
const ERROR_PREFIX: usize = 300;

/// Why a request to an MCP server failed below the protocol.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("{}", ferroclaw_types::error_chain(.0))]
    Http(#[from] reqwest::Error),
    #[error("an SSE event longer than {0} bytes")]
    EventTooLarge(usize),
}

type Error = StreamableHttpError<WireError>;

/// A reqwest client with the server's configured headers on every request.
#[derive(Clone)]
pub struct McpHttp {
    client: reqwest::Client,
    headers: HeaderMap,
}

impl McpHttp {
    pub fn new(client: reqwest::Client, headers: HeaderMap) -> McpHttp {
        McpHttp { client, headers }
    }

    fn request(
        &self,
        method: reqwest::Method,
        uri: &str,
        session: Option<&str>,
        auth: Option<String>,
        custom: HashMap<HeaderName, HeaderValue>,
    ) -> reqwest::RequestBuilder {
        let mut req = self
            .client
            .request(method, uri)
            .headers(self.headers.clone())
            .header(ACCEPT, format!("{JSON}, {EVENT_STREAM}"));
        // rmcp passes the negotiated protocol version here, never a reserved header.
        for (name, value) in custom {
            req = req.header(name, value);
        }
        if let Some(token) = auth {
            req = req.bearer_auth(token);
        }
        if let Some(session) = session {
            req = req.header(SESSION_ID, session);
        }
        req
    }
}

fn content_type(resp: &Response) -> Option<String> {
    resp.headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.to_ascii_lowercase())
}

fn is(ct: Option<&str>, mime: &str) -> bool {
    ct.and_then(|c| c.split(';').next())
        .is_some_and(|c| c.trim() == mime)
}

/// A refused request as an error that says what the server said.
async fn refused(resp: Response) -> Error {
    let status = resp.status();
    let mut body = Vec::new();
    let mut chunks = resp.bytes_stream();
    while let Some(Ok(chunk)) = chunks.next().await {
        body.extend_from_slice(&chunk);
        if body.len() >= ERROR_PREFIX {
            break;
        }
    }
    let text: String = String::from_utf8_lossy(&body)
        .chars()
        .take(ERROR_PREFIX)
        .collect();
    StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
        format!("HTTP {status}: {}", text.trim())
            .trim_end()
            .to_string(),
    ))
}

/// The body, refused past `max` bytes without reading further.
async fn bounded_body(resp: Response, max: usize) -> Result<Vec<u8>, Error> {
    if resp.content_length().is_some_and(|n| n > max as u64) {
        return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: max });
    }
    let mut body = Vec::new();
    let mut chunks = resp.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| StreamableHttpError::Client(e.into()))?;
        if body.len() + chunk.len() > max {
            return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: max });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The response's SSE events, each at most `max` bytes (counted between blank lines).
fn events(resp: Response, max: usize) -> BoxStream<'static, Result<Sse, SseError>> {
    let mut since_boundary = 0usize;
    let mut newline = false;
    let mut failed = false;
    let bytes = resp.bytes_stream().map(move |chunk| {
        if failed {
            return Err(WireError::EventTooLarge(max));
        }
        let chunk = chunk?;
        for &b in chunk.iter() {
            match b {
                b'\n' if newline => since_boundary = 0,
                b'\n' => newline = true,
                b'\r' => {}
                _ => {
                    newline = false;
                    since_boundary += 1;
                }
            }
            if since_boundary > max {
                failed = true;
                return Err(WireError::EventTooLarge(max));
            }
        }
        Ok(chunk)
    });
    SseStream::from_bytes_stream(bytes).boxed()
}

impl StreamableHttpClient for McpHttp {
    type Error = WireError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let with_session = session_id.is_some();
        let awaits_nothing = !matches!(message, ClientJsonRpcMessage::Request(_));
        let resp = self
            .request(
                reqwest::Method::POST,
                &uri,
                session_id.as_deref(),
                auth_header,
                custom_headers,
            )
            .json(&message)
            .send()
            .await
            .map_err(|e| StreamableHttpError::Client(e.into()))?;
        let status = resp.status();
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        // The server forgot the session (it restarted): rmcp starts a new one.
        if status == StatusCode::NOT_FOUND && with_session {
            return Err(StreamableHttpError::SessionExpired);
        }
        let ct = content_type(&resp);
        if !status.is_success() {
            // A JSON-RPC error in an error status is still the server's answer.
            if is(ct.as_deref(), JSON) {
                let body = bounded_body(resp, limits.max_json_response_size).await?;
                if let Ok(msg @ ServerJsonRpcMessage::Error(_)) =
                    serde_json::from_slice::<ServerJsonRpcMessage>(&body)
                {
                    return Ok(StreamableHttpPostResponse::Json(msg, None));
                }
                let text: String = String::from_utf8_lossy(&body)
                    .chars()
                    .take(ERROR_PREFIX)
                    .collect();
                return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                    format!("HTTP {status}: {}", text.trim()),
                )));
            }
            return Err(refused(resp).await);
        }
        let session = resp
            .headers()
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        if is(ct.as_deref(), EVENT_STREAM) {
            return Ok(StreamableHttpPostResponse::Sse(
                events(resp, limits.max_sse_event_size),
                session,
            ));
        }
        if is(ct.as_deref(), JSON) {
            let body = bounded_body(resp, limits.max_json_response_size).await?;
            return match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                Ok(msg) => Ok(StreamableHttpPostResponse::Json(msg, session)),
                Err(_) if awaits_nothing => Ok(StreamableHttpPostResponse::Accepted),
                Err(e) => Err(StreamableHttpError::Deserialize(e)),
            };
        }
        // Servers answer a notification with an empty 200 more often than with 202.
        if awaits_nothing {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        Err(StreamableHttpError::UnexpectedContentType(ct))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        let resp = self
            .request(
                reqwest::Method::DELETE,
                &uri,
                Some(&session_id),
                auth_header,
                custom_headers,
            )
            .send()
            .await
            .map_err(|e| StreamableHttpError::Client(e.into()))?;
        // 405: sessions end on their own there; 404: it is gone already.
        if resp.status().is_success()
            || matches!(
                resp.status(),
                StatusCode::METHOD_NOT_ALLOWED | StatusCode::NOT_FOUND
            )
        {
            return Ok(());
        }
        Err(refused(resp).await)
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default().max_sse_event_size,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        let mut req = self.request(
            reqwest::Method::GET,
            &uri,
            session_id.as_deref(),
            auth_header,
            custom_headers,
        );
        if let Some(id) = last_event_id {
            req = req.header(LAST_EVENT_ID, id);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| StreamableHttpError::Client(e.into()))?;
        if resp.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if !resp.status().is_success() {
            return Err(refused(resp).await);
        }
        let ct = content_type(&resp);
        if !is(ct.as_deref(), EVENT_STREAM) {
            return Err(StreamableHttpError::UnexpectedContentType(ct));
        }
        Ok(events(resp, max_sse_event_size))
    }
}
