//! What keeps a web page in someone's browser from driving the gateway: every route
//! (and the WebSocket upgrade) checks the `Host` header (DNS rebinding makes a page's
//! own domain resolve to 127.0.0.1, but its `Host` still names that domain), refuses a
//! foreign `Origin` (a page may send requests anywhere; browsers always say where the
//! page came from), and takes request bodies only as `application/json` (the one body
//! type a page cannot send cross-site without a CORS preflight, which we never grant).
//! The token does the rest: a page cannot read it.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::http::shape_for;
use crate::state::AppState;

/// Why a request was refused before anything else looked at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    Host(String),
    Origin(String),
    ContentType(String),
    Duplicate(String),
}

impl Refusal {
    fn into_error(self) -> (ApiError, &'static str) {
        match self {
            Refusal::Host(h) => (
                ApiError::new(
                    StatusCode::FORBIDDEN,
                    "forbidden",
                    "host_not_allowed",
                    format!(
                        "Host {h:?} is not a name of this gateway; add it to gateway.allowed_hosts \
                         if it is (this check stops DNS-rebinding attacks from web pages)"
                    ),
                ),
                "security.host_rejected",
            ),
            Refusal::Origin(o) => (
                ApiError::new(
                    StatusCode::FORBIDDEN,
                    "forbidden",
                    "origin_not_allowed",
                    format!(
                        "requests from the web origin {o:?} are not allowed; add it to \
                         gateway.allowed_origins if that page is yours"
                    ),
                ),
                "security.origin_rejected",
            ),
            Refusal::Duplicate(name) => (
                ApiError::bad_request(format!("the {name} header may appear only once")),
                "security.duplicate_header",
            ),
            Refusal::ContentType(ct) => (
                ApiError::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "invalid_request_error",
                    "unsupported_media_type",
                    format!("request bodies must be sent as Content-Type: application/json (got {ct:?})"),
                ),
                "security.content_type_rejected",
            ),
        }
    }
}

/// The host part of a `Host` header value (`name`, `name:port`, `[v6]:port`).
fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => host,
    }
}

/// Whether `host` names this gateway: an IP literal (a rebinding page cannot make the
/// browser send one: its `Host` is always the page's own domain), `localhost` or a name
/// under it (RFC 6761 keeps those on loopback), or a name in `allowed`.
pub fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let name = host_name(host.trim());
    if name.is_empty() {
        return false;
    }
    if name.parse::<IpAddr>().is_ok() {
        return true;
    }
    let lower = name.to_ascii_lowercase();
    let lower = lower.trim_end_matches('.');
    if lower == "localhost" || lower.ends_with(".localhost") {
        return true;
    }
    allowed.iter().any(|a| {
        let a = a.trim();
        a == "*"
            || a.eq_ignore_ascii_case(host.trim())
            || (!a.contains(':') && a.trim_end_matches('.').eq_ignore_ascii_case(lower))
    })
}

/// Whether a request with `Origin: origin` may proceed: the gateway's own pages
/// (origin authority equal to the request's `Host`), or an origin in `allowed`.
pub fn origin_allowed(origin: &str, host: Option<&str>, allowed: &[String]) -> bool {
    let origin = origin.trim().trim_end_matches('/');
    if allowed
        .iter()
        .any(|a| a == "*" || a.trim().trim_end_matches('/').eq_ignore_ascii_case(origin))
    {
        return true;
    }
    // `null` (sandboxed frames, file: pages) has no authority and is never the gateway.
    let authority = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    match (authority, host) {
        (Some(a), Some(h)) => a.eq_ignore_ascii_case(h.trim()),
        _ => false,
    }
}

/// Whether a body-carrying request is JSON (`application/json`, any parameters).
pub fn is_json(content_type: Option<&str>) -> bool {
    content_type
        .and_then(|ct| ct.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
}

/// The checks, on the request head alone. `authority` is the host of an absolute-form
/// request target (`GET http://host/path`), which servers may route by.
pub fn check(
    method: &Method,
    authority: Option<&str>,
    headers: &HeaderMap,
    allowed_hosts: &[String],
    allowed_origins: &[String],
) -> Result<(), Refusal> {
    // Two values of a header the checks read would let a proxy and this server disagree
    // about which one counts.
    for name in [header::HOST, header::ORIGIN, header::CONTENT_TYPE] {
        if headers.get_all(&name).iter().count() > 1 {
            return Err(Refusal::Duplicate(name.as_str().to_string()));
        }
    }
    if let Some(a) = authority {
        if !host_allowed(a, allowed_hosts) {
            return Err(Refusal::Host(a.to_string()));
        }
    }
    let get =
        |name: header::HeaderName| headers.get(name).map(|v| v.to_str().unwrap_or("\u{fffd}"));
    let host = get(header::HOST);
    // Browsers always send Host; a client without one is not a page in a browser.
    if let Some(h) = host {
        if !host_allowed(h, allowed_hosts) {
            return Err(Refusal::Host(h.to_string()));
        }
    }
    if let Some(o) = get(header::ORIGIN) {
        if !origin_allowed(o, host, allowed_origins) {
            return Err(Refusal::Origin(o.to_string()));
        }
    }
    let has_body = matches!(*method, Method::POST | Method::PUT | Method::PATCH);
    if has_body && !is_json(get(header::CONTENT_TYPE)) {
        return Err(Refusal::ContentType(
            get(header::CONTENT_TYPE).unwrap_or("none").to_string(),
        ));
    }
    Ok(())
}

/// Middleware over every route, `/health` and `/ws` included.
pub async fn browser_guard(
    State(state): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    let cfg = &state.config;
    let authority = req.uri().authority().map(|a| a.as_str());
    if let Err(refusal) = check(
        req.method(),
        authority,
        req.headers(),
        &cfg.allowed_hosts,
        &cfg.allowed_origins,
    ) {
        let (err, event) = refusal.into_error();
        tracing::warn!(
            target: "security.access",
            event,
            path = %req.uri().path(),
            reason = %err.message,
            "request refused"
        );
        return err.with_shape(shape_for(req.uri().path())).into_response();
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts() {
        let none: Vec<String> = Vec::new();
        for ok in [
            "127.0.0.1:18789",
            "localhost",
            "LOCALHOST:1",
            "[::1]:80",
            "app.localhost:9",
            "10.0.0.5:1",
            "localhost.",
        ] {
            assert!(host_allowed(ok, &none), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:18789",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
            "",
            "localhostx",
        ] {
            assert!(!host_allowed(bad, &none), "{bad}");
        }
        let listed = vec![
            "gw.example.com".to_string(),
            "other.example:8443".to_string(),
        ];
        assert!(host_allowed("GW.example.com:443", &listed));
        assert!(host_allowed("other.example:8443", &listed));
        assert!(!host_allowed("other.example:9000", &listed));
        assert!(!host_allowed("sub.gw.example.com", &listed));
    }

    #[test]
    fn origins() {
        let none: Vec<String> = Vec::new();
        assert!(origin_allowed(
            "http://127.0.0.1:18789",
            Some("127.0.0.1:18789"),
            &none
        ));
        assert!(!origin_allowed(
            "http://127.0.0.1:18790",
            Some("127.0.0.1:18789"),
            &none
        ));
        assert!(!origin_allowed(
            "https://evil.example",
            Some("127.0.0.1:18789"),
            &none
        ));
        assert!(!origin_allowed("null", Some("127.0.0.1:18789"), &none));
        assert!(!origin_allowed("http://localhost:18789", None, &none));
        let listed = vec!["https://app.example.com/".to_string()];
        assert!(origin_allowed(
            "https://APP.example.com",
            Some("127.0.0.1:1"),
            &listed
        ));
        assert!(origin_allowed(
            "https://evil.example",
            None,
            &["*".to_string()]
        ));
    }

    #[test]
    fn duplicated_heads_and_absolute_targets() {
        let none: Vec<String> = Vec::new();
        let mut h = HeaderMap::new();
        h.append(header::HOST, "127.0.0.1:1".parse().expect("h"));
        assert_eq!(check(&Method::GET, None, &h, &none, &none), Ok(()));
        assert_eq!(
            check(&Method::GET, Some("evil.example"), &h, &none, &none),
            Err(Refusal::Host("evil.example".into()))
        );
        h.append(header::HOST, "evil.example".parse().expect("h"));
        assert_eq!(
            check(&Method::GET, None, &h, &none, &none),
            Err(Refusal::Duplicate("host".into()))
        );
        let mut h = HeaderMap::new();
        h.append(header::CONTENT_TYPE, "application/json".parse().expect("h"));
        h.append(header::CONTENT_TYPE, "text/plain".parse().expect("h"));
        assert_eq!(
            check(&Method::POST, None, &h, &none, &none),
            Err(Refusal::Duplicate("content-type".into()))
        );
    }

    #[test]
    fn content_types() {
        assert!(is_json(Some("application/json")));
        assert!(is_json(Some("Application/JSON; charset=utf-8")));
        for bad in [
            None,
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
            Some("application/jsonp"),
            Some("text/plain; application/json"),
        ] {
            assert!(!is_json(bad), "{bad:?}");
        }
    }
}
