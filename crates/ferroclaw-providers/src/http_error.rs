//! Mapping HTTP and transport failures onto [`ProviderError`], shared by every wire.

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::{ErrorKind, ProviderError};

/// Upstream error bodies can be whole HTML pages; keep messages readable.
const MAX_MESSAGE_CHARS: usize = 500;

/// Phrases servers use when a prompt does not fit the context window.
const OVERFLOW_PHRASES: &[&str] = &[
    "context length",
    "context_length_exceeded",
    "maximum context",
    "context window",
    "prompt is too long",
    "too many tokens",
];

/// Classifies an HTTP status alone.
pub(crate) fn kind_for_status(status: u16) -> ErrorKind {
    match status {
        429 => ErrorKind::RateLimited,
        401 | 403 => ErrorKind::Auth,
        404 => ErrorKind::NotFound,
        408 => ErrorKind::Timeout,
        413 => ErrorKind::ContextOverflow,
        // Every 5xx (incl. Anthropic's 529 "overloaded" and proxies' 52x) is upstream
        // trouble that a later attempt or another model may not have.
        500..=599 => ErrorKind::Server,
        _ => ErrorKind::BadRequest,
    }
}

pub(crate) fn looks_like_overflow(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    OVERFLOW_PHRASES.iter().any(|p| lower.contains(p))
}

/// Builds the error for a non-2xx answer from its status, headers and body text.
pub(crate) fn from_response(status: u16, headers: &HeaderMap, body: &str) -> ProviderError {
    let mut message = extract_message(body);
    if message.is_empty() {
        message = reqwest::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("no error message")
            .to_owned();
    }
    let mut kind = kind_for_status(status);
    // A 400 (or 422, ...) is the usual way to say the prompt is too long.
    if kind == ErrorKind::BadRequest && looks_like_overflow(&message) {
        kind = ErrorKind::ContextOverflow;
    }
    let mut err = ProviderError::new(kind, message);
    err.status = Some(status);
    err.retry_after = retry_after(headers, SystemTime::now());
    err
}

/// The human message inside an error body, whatever its shape, truncated.
pub(crate) fn extract_message(body: &str) -> String {
    let trimmed = body.trim();
    let from_json = serde_json::from_str::<Value>(trimmed).ok().and_then(|v| {
        let e = v.get("error");
        e.and_then(|e| e.get("message"))
            .and_then(Value::as_str)
            .or_else(|| e.and_then(Value::as_str))
            .or_else(|| v.get("message").and_then(Value::as_str))
            // FastAPI-based servers (vLLM, some proxies).
            .or_else(|| v.get("detail").and_then(Value::as_str))
            .map(str::to_owned)
    });
    truncate(from_json.as_deref().unwrap_or(trimmed))
}

pub(crate) fn truncate(s: &str) -> String {
    match s.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s.to_owned(),
    }
}

/// `retry-after-ms` (milliseconds, some OpenAI-style servers) wins over `Retry-After`
/// (seconds or an HTTP date).
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    let value = get("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    // A date in the past means "now".
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Transport failures: time-outs are `Timeout`, everything else before a response is
/// a `Network` problem (refused, reset, DNS, TLS).
pub(crate) fn from_reqwest(err: &reqwest::Error) -> ProviderError {
    let kind = if err.is_timeout() {
        ErrorKind::Timeout
    } else if err.is_decode() {
        ErrorKind::Malformed
    } else {
        ErrorKind::Network
    };
    ProviderError::new(kind, error_chain(err))
}

pub(crate) use ferroclaw_types::error_chain;

/// Fills the fields every error leaving a provider must carry.
pub(crate) fn annotate(mut err: ProviderError, provider: &str, model: &str) -> ProviderError {
    if err.provider.is_empty() {
        err.provider = provider.to_owned();
    }
    if err.model.is_empty() {
        err.model = model.to_owned();
    }
    err
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn status_kinds() {
        assert_eq!(kind_for_status(429), ErrorKind::RateLimited);
        assert_eq!(kind_for_status(401), ErrorKind::Auth);
        assert_eq!(kind_for_status(403), ErrorKind::Auth);
        assert_eq!(kind_for_status(404), ErrorKind::NotFound);
        assert_eq!(kind_for_status(408), ErrorKind::Timeout);
        assert_eq!(kind_for_status(413), ErrorKind::ContextOverflow);
        assert_eq!(kind_for_status(503), ErrorKind::Server);
        assert_eq!(kind_for_status(529), ErrorKind::Server);
        assert_eq!(kind_for_status(422), ErrorKind::BadRequest);
    }

    #[test]
    fn message_shapes() {
        assert_eq!(
            extract_message(r#"{"error":{"message":"slow down","type":"x"}}"#),
            "slow down"
        );
        assert_eq!(extract_message(r#"{"error":"bad key"}"#), "bad key");
        assert_eq!(extract_message(r#"{"message":"nope"}"#), "nope");
        assert_eq!(extract_message(r#"{"detail":"vllm says"}"#), "vllm says");
        assert_eq!(extract_message("  plain text\n"), "plain text");
        let long = "é".repeat(2000);
        let m = extract_message(&long);
        assert_eq!(m.chars().count(), MAX_MESSAGE_CHARS + 1);
    }

    #[test]
    fn overflow_detected_on_400_not_on_429() {
        let h = HeaderMap::new();
        let e = from_response(
            400,
            &h,
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens"}}"#,
        );
        assert_eq!(e.kind, ErrorKind::ContextOverflow);
        assert_eq!(e.status, Some(400));
        let e = from_response(
            429,
            &h,
            r#"{"error":{"message":"too many tokens per minute"}}"#,
        );
        assert_eq!(e.kind, ErrorKind::RateLimited);
        let e = from_response(
            400,
            &h,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
        );
        assert_eq!(e.kind, ErrorKind::ContextOverflow);
    }

    #[test]
    fn empty_body_uses_reason_phrase() {
        let e = from_response(503, &HeaderMap::new(), "");
        assert_eq!(e.message, "Service Unavailable");
        assert_eq!(e.kind, ErrorKind::Server);
    }

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("7"));
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(7)));

        let date = httpdate::fmt_http_date(now + Duration::from_secs(30));
        h.insert(
            "retry-after",
            HeaderValue::from_str(&date).expect("valid header"),
        );
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(30)));

        h.insert("retry-after-ms", HeaderValue::from_static("1500"));
        assert_eq!(retry_after(&h, now), Some(Duration::from_millis(1500)));

        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h, now), None);
    }
}
