//! `GET /health` (no auth), `GET /metrics` and `GET /integrity`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::state::AppState;

/// Liveness for load balancers: 503 while the session store does not answer, so a
/// balancer sends no traffic to an instance that cannot serve a turn.
pub async fn health(State(state): State<Arc<AppState>>) -> Response {
    let database = state.store().available().await;
    let body = Json(json!({
        "status": if database { "ok" } else { "degraded" },
        "database": if database { "ok" } else { "unavailable" },
        "protocol": crate::PROTOCOL_VERSION,
        "version": crate::VERSION,
    }));
    if database {
        body.into_response()
    } else {
        (axum::http::StatusCode::SERVICE_UNAVAILABLE, body).into_response()
    }
}

pub async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    let body = state.metrics.render(state.runtime.queued());
    let mut resp = body.into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    resp
}

/// `GET /integrity`: the last transcript integrity scan (the gateway runs one at
/// start-up), same payload as the WebSocket `integrity.status`.
pub async fn integrity(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(crate::integrity::status(&state).await)
}
