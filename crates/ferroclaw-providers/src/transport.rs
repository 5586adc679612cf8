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

/// Reads a whole 2xx body as JSON, chunk by chunk; past `max_bytes` reading stops
/// and `too_large` is the error (a declared larger `Content-Length` fails at once). An
/// unparseable body is `Malformed`.
pub(crate) async fn read_json(
    mut resp: reqwest::Response,
    deadline: Instant,
    cancel: &CancellationToken,
    max_bytes: usize,
    too_large: impl FnOnce() -> ProviderError,
) -> Result<serde_json::Value, ProviderError> {
    let declared = resp.content_length().unwrap_or(0);
    if declared > max_bytes as u64 {
        return Err(too_large());
    }
    let bytes = guarded(
        async {
            let mut body = Vec::with_capacity(declared as usize);
            while let Some(chunk) = resp.chunk().await.map_err(|e| from_reqwest(&e))? {
                if body.len() + chunk.len() > max_bytes {
                    return Ok(None);
                }
                body.extend_from_slice(&chunk);
            }
            Ok(Some(body))
        },
        deadline,
        "reading response",
        cancel,
    )
    .await?;
    let Some(bytes) = bytes else {
        return Err(too_large());
    };
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

/// Counts the bytes of one reply (text, reasoning, tool names and arguments) against
/// the request's cap.
pub(crate) struct ReplyBudget {
    limit: usize,
    used: usize,
}

impl ReplyBudget {
    pub(crate) fn new(limit: usize) -> Self {
        Self { limit, used: 0 }
    }

    pub(crate) fn take(&mut self, bytes: usize) -> Result<(), ProviderError> {
        self.used = self.used.saturating_add(bytes);
        if self.used > self.limit {
            return Err(ProviderError::reply_too_large(self.limit));
        }
        Ok(())
    }

    /// Raw wire bytes allowed for a JSON body (or one SSE line) carrying a reply within
    /// the cap: JSON escaping can blow a byte up sixfold (`\u0001`), plus the envelope.
    pub(crate) fn raw_limit(&self) -> usize {
        self.limit.saturating_mul(6).saturating_add(64 * 1024)
    }
}

/// Model lists are small, but OpenRouter's runs to a few MiB.
pub(crate) const MAX_MODEL_LIST_BYTES: usize = 32 << 20;

/// A failure of the SSE byte stream: the transport, or a line longer than allowed
/// (an event is buffered whole until its line ends, so this bounds memory).
#[derive(Debug)]
pub(crate) enum StreamFault {
    Http(reqwest::Error),
    LineTooLong,
}

impl std::fmt::Display for StreamFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamFault::Http(e) => e.fmt(f),
            StreamFault::LineTooLong => f.write_str("stream line too long"),
        }
    }
}

impl std::error::Error for StreamFault {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StreamFault::Http(e) => Some(e),
            StreamFault::LineTooLong => None,
        }
    }
}

type EventResult = Result<Event, EventStreamError<StreamFault>>;

/// Server-sent events off a response, with a limit on the gap between two events and
/// prompt cancellation. Dropping it closes the connection.
pub(crate) struct SseReader {
    events: Pin<Box<dyn Stream<Item = EventResult> + Send>>,
    idle: Duration,
    /// Reply cap, reported when a line outgrows [`ReplyBudget::raw_limit`].
    reply_limit: usize,
    /// Events received so far, for error messages.
    pub(crate) count: usize,
}

impl SseReader {
    pub(crate) fn new(resp: reqwest::Response, idle: Duration, budget: &ReplyBudget) -> Self {
        let max_line = budget.raw_limit();
        // Bytes since the last line break, carried across chunks.
        let mut line = 0usize;
        let bytes = resp.bytes_stream().map(move |chunk| {
            let chunk = chunk.map_err(StreamFault::Http)?;
            line = match chunk.iter().rposition(|&b| b == b'\n' || b == b'\r') {
                Some(i) => chunk.len() - i - 1,
                None => line.saturating_add(chunk.len()),
            };
            if line > max_line {
                return Err(StreamFault::LineTooLong);
            }
            Ok(chunk)
        });
        Self {
            events: Box::pin(bytes.eventsource()),
            idle,
            reply_limit: budget.limit,
            count: 0,
        }
    }

    /// The error for a body that ended before the reply was complete.
    pub(crate) fn ended_early(&self) -> ProviderError {
        ProviderError::new(
            ErrorKind::BrokenStream,
            format!("stream ended before completion after {} events", self.count),
        )
    }

    /// The data of the latest event as `T`.
    pub(crate) fn parse<T: serde::de::DeserializeOwned>(
        &self,
        data: &str,
    ) -> Result<T, ProviderError> {
        serde_json::from_str(data).map_err(|e| {
            ProviderError::new(
                ErrorKind::BrokenStream,
                format!(
                    "unparseable stream event #{} ({e}): {}",
                    self.count,
                    truncate(data)
                ),
            )
        })
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
            Some(Err(EventStreamError::Transport(StreamFault::LineTooLong))) => {
                Err(ProviderError::reply_too_large(self.reply_limit))
            }
            Some(Err(EventStreamError::Transport(StreamFault::Http(e)))) if e.is_timeout() => {
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
