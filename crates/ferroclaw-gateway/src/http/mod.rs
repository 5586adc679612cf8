//! HTTP surfaces. Each route: [`guard`] (auth, rate limit) → parse the body → resolve
//! agent and session → [`crate::runs::start`] → answer as JSON or SSE.

pub mod agents;
pub mod channel_events;
pub mod chat_completions;
pub mod dashboard;
pub mod health;
pub mod mcp_servers;
pub mod models;
pub mod responses;
pub mod tools_invoke;
pub mod traces;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::auth::{Caller, Role};
use crate::error::{ApiError, ErrorShape};
use crate::ratelimit::retry_after_secs;
use crate::state::{parse_queue_mode, AgentEntry, AppState};
use ferroclaw_runtime::{QueueMode, Requester, TenantError};

pub const HEADER_AGENT: &str = "x-ferroclaw-agent-id";
pub const HEADER_SESSION: &str = "x-ferroclaw-session-key";
pub const HEADER_USER: &str = "x-ferroclaw-user-id";
pub const HEADER_QUEUE_MODE: &str = "x-ferroclaw-queue-mode";

/// Request bodies above this are refused with 413.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The error shape of the route family `path` belongs to.
pub fn shape_for(path: &str) -> ErrorShape {
    if path.starts_with("/tools") || path.starts_with("/v1/tools") {
        ErrorShape::Tools
    } else {
        ErrorShape::OpenAi
    }
}

/// Auth, role, rate limit and the body deadline, for every route but `/health` and
/// `/ws` (whose credential comes in `connect`). Reading a body is bounded in time as
/// well as size, so a client that drips it (slowloris) is cut off instead of holding a
/// connection and a task for ever; authentication comes first, so nobody without a
/// token gets to make the gateway wait for a body at all.
pub async fn guard(State(state): State<Arc<AppState>>, mut req: Request, next: Next) -> Response {
    let shape = shape_for(req.uri().path());
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip().to_string())
        .unwrap_or_else(|| "unknown".into());
    let Some(caller) = state.auth.http_caller(req.headers()) else {
        tracing::warn!(
            target: "security.auth",
            event = "security.auth_failed",
            peer = %peer,
            path = %req.uri().path(),
            "HTTP request without a valid gateway token"
        );
        return ApiError::unauthorized().with_shape(shape).into_response();
    };
    // Everything that takes a body starts runs or tools: operators only.
    if req.method() != Method::GET && caller.role < Role::Operator {
        tracing::warn!(
            target: "security.auth",
            event = "security.forbidden",
            peer = %peer,
            path = %req.uri().path(),
            role = caller.role.as_str(),
            "HTTP request refused for role"
        );
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "insufficient_role",
            format!(
                "{} {} needs the operator role; this token has the {} role",
                req.method(),
                req.uri().path(),
                caller.role.as_str()
            ),
        )
        .with_shape(shape)
        .into_response();
    }
    // /metrics is scraped on a schedule; limiting it would only create gaps.
    if req.uri().path() != "/metrics" {
        let key = match &caller.user {
            Some(u) => format!("user:{u}"),
            None => format!("ip:{peer}"),
        };
        if let Err(wait) = state.limiter.check(&key) {
            state.metrics.rate_limited();
            tracing::warn!(
                target: "security.rate_limit",
                event = "security.rate_limited",
                peer = %peer,
                path = %req.uri().path(),
                "rate limit exceeded"
            );
            return ApiError::rate_limited(retry_after_secs(wait))
                .with_shape(shape)
                .into_response();
        }
    }
    req.extensions_mut().insert(caller);
    if req.method() != Method::GET {
        let limit = state.config.limits.body_read_timeout;
        let (parts, body) = req.into_parts();
        let read = axum::body::to_bytes(body, MAX_BODY_BYTES);
        let bytes = match tokio::time::timeout(limit, read).await {
            Ok(Ok(bytes)) => bytes,
            // axum reports the size cap only in the error's text.
            Ok(Err(e)) => {
                let too_large = e.to_string().contains("length limit");
                return body_error(too_large, &e, shape).into_response();
            }
            Err(_) => {
                tracing::warn!(
                    target: "security.slow_client",
                    event = "security.body_timeout",
                    peer = %peer,
                    "request body not received in time"
                );
                let mut resp = ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "invalid_request_error",
                    "body_timeout",
                    format!(
                        "the request body did not arrive within {} s",
                        limit.as_secs()
                    ),
                )
                .with_shape(shape)
                .into_response();
                resp.headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
                return resp;
            }
        };
        req = Request::from_parts(parts, Body::from(bytes));
    }
    next.run(req).await
}

/// A body that could not be read: too large (413) or broken (400).
fn body_error(too_large: bool, reason: &dyn std::fmt::Display, shape: ErrorShape) -> ApiError {
    if too_large {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            "payload_too_large",
            format!("request body exceeds {MAX_BODY_BYTES} bytes"),
        )
    } else {
        ApiError::bad_request(format!("cannot read request body: {reason}"))
    }
    .with_shape(shape)
}

/// Counts every request by matched route, method and status.
pub async fn track(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let method = req.method().clone();
    // The request's span: the run it starts is its child in exported traces.
    let span = tracing::info_span!(
        "http.request",
        otel.name = %format_args!("{method} {route}"),
        otel.kind = "server",
        http.request.method = %method,
        http.route = %route,
        http.response.status_code = tracing::field::Empty,
    );
    let resp = next.run(req).instrument(span.clone()).await;
    span.record("http.response.status_code", resp.status().as_u16());
    state
        .metrics
        .http_request(&route, method.as_str(), resp.status().as_u16());
    resp
}

/// Parses a JSON body; too large → 413, malformed → 400, both in the route's shape.
pub fn parse_body<T: DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
    shape: ErrorShape,
) -> Result<T, ApiError> {
    let bytes =
        body.map_err(|rej| body_error(rej.status() == StatusCode::PAYLOAD_TOO_LARGE, &rej, shape))?;
    serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::bad_request(format!(
            "request body is not valid JSON for this route: {e}"
        ))
        .with_shape(shape)
    })
}

pub(crate) fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// The agent named by `model` (`ferroclaw:<id>`, `agent:<id>`, `openclaw:<id>` or a bare
/// agent id), else by `X-Ferroclaw-Agent-Id`, else the default agent; a user's agent only
/// when `who` may use it (otherwise it is as unknown as one that does not exist).
pub async fn resolve_agent(
    state: &AppState,
    model: Option<&str>,
    headers: &HeaderMap,
    who: Requester<'_>,
    shape: ErrorShape,
) -> Result<AgentEntry, ApiError> {
    let by_id = |id: &str| {
        let id = id.to_string();
        async move {
            state
                .runtime
                .agent_for(who, &id)
                .await
                .map_err(|e| tenant_error(e, shape))
        }
    };
    if let Some(model) = model.map(str::trim).filter(|m| !m.is_empty()) {
        for prefix in ["ferroclaw:", "agent:", "openclaw:"] {
            if let Some(id) = model.strip_prefix(prefix) {
                return by_id(id).await;
            }
        }
        if let Some(agent) = state.runtime.agents().iter().find(|a| a.id == model) {
            return Ok(agent.clone());
        }
        // Any other model name (e.g. the SDK default "gpt-4o") means "the agent
        // chosen by header or default": the agent owns its real model.
    }
    if let Some(id) = header_str(headers, HEADER_AGENT) {
        return by_id(id).await;
    }
    state.runtime.default_agent().ok_or_else(|| {
        let id = state.runtime.default_agent_id();
        match state.runtime.why_not_built(id) {
            // A first run without a provider: say what is missing, as the CLI does.
            Some(why) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                "agent_unavailable",
                format!("cannot set up agent `{id}`: {why}"),
            ),
            None => ApiError::internal("no default agent is available"),
        }
        .with_shape(shape)
    })
}

/// A tenant refusal as an HTTP error.
pub fn tenant_error(e: TenantError, shape: ErrorShape) -> ApiError {
    let err = match &e {
        TenantError::UnknownAgent(_) => ApiError::not_found("model_not_found", e.to_string()),
        TenantError::NotFound(_) => ApiError::not_found("not_found", e.to_string()),
        TenantError::Forbidden(_) => ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "forbidden",
            e.to_string(),
        ),
        TenantError::Invalid(_) => ApiError::bad_request(e.to_string()),
        TenantError::Conflict(_) => ApiError::new(
            StatusCode::CONFLICT,
            "invalid_request_error",
            "conflict",
            e.to_string(),
        ),
        TenantError::Unsupported => ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "invalid_request_error",
            "unsupported",
            e.to_string(),
        ),
        TenantError::Store(_) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "storage_unavailable",
            e.to_string(),
        ),
    };
    err.with_shape(shape)
}

/// The session a request continues.
pub struct SessionChoice {
    pub key: String,
    /// No key was given: a one-off session, removed after the run.
    pub ephemeral: bool,
    /// Who the run is for (`X-Ferroclaw-User-Id`, else the OpenAI `user` field); selects
    /// the per-user sub-workspace when the agent has one.
    pub user: Option<String>,
}

/// `X-Ferroclaw-Session-Key`, else a key derived from the OpenAI `user` field, else a
/// fresh ephemeral session. The user is the caller's own (a per-user token), or the one
/// the gateway token names (`X-Ferroclaw-User-Id`, else the OpenAI `user` field).
pub fn resolve_session(
    headers: &HeaderMap,
    caller: &Caller,
    user: Option<&str>,
    shape: ErrorShape,
) -> Result<SessionChoice, ApiError> {
    let user = user.map(str::trim).filter(|u| !u.is_empty());
    let named = header_str(headers, HEADER_USER).or(user);
    let who = caller.user_for(named).map_err(|reason| {
        tracing::warn!(target: "security.auth", event = "security.user_refused", %reason, "request names a user it may not act for");
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", "user_not_allowed", reason).with_shape(shape)
    })?;
    if let Some(key) = header_str(headers, HEADER_SESSION) {
        ferroclaw_store::validate_session_key(key)
            .map_err(|e| ApiError::bad_request(e.to_string()).with_shape(shape))?;
        return Ok(SessionChoice {
            key: key.to_string(),
            ephemeral: false,
            user: who,
        });
    }
    if let Some(user) = user {
        return Ok(SessionChoice {
            key: user_session_key(user),
            ephemeral: false,
            user: who,
        });
    }
    Ok(SessionChoice {
        key: format!("ephemeral:{}", uuid::Uuid::new_v4()),
        ephemeral: true,
        user: who,
    })
}

/// A stable session key for an OpenAI `user`: readable when the id is short and plain,
/// otherwise a hash (keys are capped at 256 characters and exclude control characters).
pub fn user_session_key(user: &str) -> String {
    if user.len() <= 128 && !user.chars().any(char::is_control) {
        format!("openai-user:{user}")
    } else {
        format!(
            "openai-user:h{:016x}",
            ferroclaw_types::fnv1a(user.as_bytes())
        )
    }
}

/// `X-Ferroclaw-Queue-Mode`, else the configured default.
pub fn resolve_queue_mode(
    state: &AppState,
    headers: &HeaderMap,
    shape: ErrorShape,
) -> Result<QueueMode, ApiError> {
    match header_str(headers, HEADER_QUEUE_MODE) {
        None => Ok(state.queue_mode),
        Some(v) => parse_queue_mode(v).ok_or_else(|| {
            ApiError::bad_request(format!(
                "{HEADER_QUEUE_MODE}: expected queue, followup or interrupt, got {v:?}"
            ))
            .with_shape(shape)
        }),
    }
}

/// An SSE response fed by a channel of ready-made `data:` blocks.
pub fn sse_response(rx: mpsc::UnboundedReceiver<Bytes>) -> Response {
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    });
    let mut resp = Response::new(Body::from_stream(stream));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

/// One SSE `data:` block (optionally with an `event:` line).
pub fn sse_data(event: Option<&str>, data: &str) -> Bytes {
    match event {
        Some(ev) => Bytes::from(format!("event: {ev}\ndata: {data}\n\n")),
        None => Bytes::from(format!("data: {data}\n\n")),
    }
}

pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Text of an OpenAI/OpenResponses content value: a string or a list of parts.
pub fn content_text(content: &serde_json::Value) -> String {
    use serde_json::Value;
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                Value::Object(o) => o.get("text").and_then(Value::as_str),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_user_comes_from_the_header_then_the_openai_field() {
        let gw = Caller {
            role: Role::Admin,
            user: None,
            may_name_user: true,
        };
        let mut h = HeaderMap::new();
        let s = resolve_session(&h, &gw, Some("bob"), ErrorShape::OpenAi).expect("ok");
        assert_eq!(s.user.as_deref(), Some("bob"));
        h.insert(HEADER_USER, "alice".parse().expect("header"));
        h.insert(HEADER_SESSION, "k".parse().expect("header"));
        let s = resolve_session(&h, &gw, Some("bob"), ErrorShape::OpenAi).expect("ok");
        assert_eq!((s.key.as_str(), s.user.as_deref()), ("k", Some("alice")));
        let s = resolve_session(&HeaderMap::new(), &gw, None, ErrorShape::OpenAi).expect("ok");
        assert!(s.ephemeral && s.user.is_none());
        // A per-user token is its user, and cannot name another.
        let carol = Caller {
            role: Role::Operator,
            user: Some("carol".into()),
            may_name_user: false,
        };
        let s = resolve_session(&HeaderMap::new(), &carol, None, ErrorShape::OpenAi).expect("ok");
        assert_eq!(s.user.as_deref(), Some("carol"));
        let err = resolve_session(&h, &carol, None, ErrorShape::OpenAi)
            .err()
            .expect("refused");
        assert_eq!(err.status, StatusCode::FORBIDDEN);
        assert!(
            err.message.contains("cannot act for user \"alice\""),
            "{}",
            err.message
        );
    }

    #[test]
    fn session_keys_from_user_are_stable_and_valid() {
        assert_eq!(user_session_key("alice"), "openai-user:alice");
        let long = "x".repeat(500);
        let k = user_session_key(&long);
        assert_eq!(k, user_session_key(&long));
        assert!(ferroclaw_store::validate_session_key(&k).is_ok());
        assert!(ferroclaw_store::validate_session_key(&user_session_key("a\nb")).is_ok());
    }

    #[test]
    fn content_parts_are_joined() {
        assert_eq!(content_text(&json!("hi")), "hi");
        assert_eq!(
            content_text(&json!([{"type":"text","text":"a"},{"type":"input_text","text":"b"}])),
            "a\nb"
        );
        assert_eq!(content_text(&json!(null)), "");
    }
}
