//! HTTP plumbing shared by the wire implementations: building the client, sending with
//! cancellation and time-outs, reading error bodies, and a cancel- and idle-aware SSE
//! reader.

use std::pin::Pin;
use std::time::Duration;

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::http_error::{error_chain, from_reqwest, from_response, truncate};
use crate::{ErrorKind, ProviderError};

/// Caps the TCP/TLS connect phase: a dead host should fail fast, long before the
/// request time-out, so that retry and fallback can act.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) fn build_client(request_timeout: Duration) -> Result<reqwest::Client, ProviderError> {
    // No overall client time-out: streams may legitimately run for minutes. Time-outs
    // are applied per phase by the callers.
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT.min(request_timeout))
        .build()
        .map_err(|e| ProviderError::new(ErrorKind::BadRequest, error_chain(&e)))
}

/// Validates configured extra headers once, at construction.
pub(crate) fn header_map(pairs: &[(String, String)]) -> Result<HeaderMap, ProviderError> {
    let mut map = HeaderMap::with_capacity(pairs.len());
    for (k, v) in pairs {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
            ProviderError::new(ErrorKind::BadRequest, format!("invalid header name {k:?}"))
        })?;
        let value = HeaderValue::from_str(v).map_err(|_| {
            ProviderError::new(
                ErrorKind::BadRequest,
                format!("invalid value for header {k:?}"),
            )
        })?;
        map.append(name, value);
    }
    Ok(map)
}

/// Races `fut` against cancellation and a deadline.
pub(crate) async fn guarded<T>(
    fut: impl std::future::Future<Output = Result<T, ProviderError>>,
    deadline: Instant,
    what: &str,
    cancel: &CancellationToken,
) -> Result<T, ProviderError> {
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(ProviderError::aborted()),
        r = tokio::time::timeout_at(deadline, fut) => match r {
            Ok(r) => r,
            Err(_) => Err(ProviderError::new(ErrorKind::Timeout, format!("{what} timed out"))),
        },
    }
}

/// Sends the request; a non-2xx answer becomes an error carrying the upstream status,
/// message and `Retry-After`.
pub(crate) async fn send(
    rb: reqwest::RequestBuilder,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<reqwest::Response, ProviderError> {
    let resp = guarded(
        async { rb.send().await.map_err(|e| from_reqwest(&e)) },
        deadline,
        "request",
        cancel,
    )
    .await?;
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let headers = resp.headers().clone();
    // The body is only for the message: if it cannot be read, the status still speaks.
    let body = guarded(
        async { Ok(resp.text().await.unwrap_or_default()) },
        deadline,
        "reading error body",
        cancel,
    )
    .await?;
    Err(from_response(status.as_u16(), &headers, &body))
}

/// Reads a whole 2xx body as JSON; an unparseable body is `Malformed`.
pub(crate) async fn read_json(
    resp: reqwest::Response,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<serde_json::Value, ProviderError> {
    let bytes = guarded(
        async { resp.bytes().await.map_err(|e| from_reqwest(&e)) },
        deadline,
        "reading response",
        cancel,
    )
    .await?;
    serde_json::from_slice(&bytes).map_err(|e| {
        ProviderError::new(
            ErrorKind::Malformed,
            format!(
                "response is not valid JSON ({e}): {}",
                truncate(&String::from_utf8_lossy(&bytes))
            ),
        )
    })
}

type EventResult = Result<Event, EventStreamError<reqwest::Error>>;

/// Server-sent events off a response, with a limit on the gap between two events and
/// prompt cancellation. Dropping it closes the connection.
pub(crate) struct SseReader {
    events: Pin<Box<dyn Stream<Item = EventResult> + Send>>,
    idle: Duration,
    /// Events received so far, for error messages.
    pub(crate) count: usize,
}

impl SseReader {
    pub(crate) fn new(resp: reqwest::Response, idle: Duration) -> Self {
        Self {
            events: Box::pin(resp.bytes_stream().eventsource()),
            idle,
            count: 0,
        }
    }

    /// The next event, `None` when the body ended.
    pub(crate) async fn next(
        &mut self,
        cancel: &CancellationToken,
    ) -> Result<Option<Event>, ProviderError> {
        let item = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(ProviderError::aborted()),
            r = tokio::time::timeout(self.idle, self.events.next()) => match r {
                Ok(item) => item,
                Err(_) => {
                    return Err(ProviderError::new(
                        ErrorKind::Timeout,
                        format!(
                            "no stream event for {:?} (after {} events)",
                            self.idle, self.count
                        ),
                    ))
                }
            },
        };
        match item {
            None => Ok(None),
            Some(Ok(ev)) => {
                self.count += 1;
                Ok(Some(ev))
            }
            Some(Err(EventStreamError::Transport(e))) if e.is_timeout() => {
                Err(ProviderError::new(ErrorKind::Timeout, error_chain(&e)))
            }
            Some(Err(e)) => Err(ProviderError::new(
                ErrorKind::BrokenStream,
                format!(
                    "stream failed after {} events: {}",
                    self.count,
                    error_chain(&e)
                ),
            )),
        }
    }
}
