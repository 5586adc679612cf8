//! The WebSocket surface at `/ws`: upgrade (origin check) → [`conn`] (frames, seq,
//! send buffer, keep-alive, auth state) → [`methods`] (one handler per RPC method).

pub mod conn;
pub mod frames;
pub mod methods;

use std::sync::Arc;

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::state::AppState;

/// Frames above this are answered with an error and the connection is closed.
pub const MAX_FRAME_BYTES: usize = 512 * 1024;
/// Frames queued for one client; a client that lets it fill up is dropped.
pub const SEND_BUFFER: usize = 256;
/// Keep-alive ping period.
pub const PING_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30);

pub async fn upgrade(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    if !state.config.allowed_origins.is_empty() {
        // Browsers always send Origin; other clients (CLIs, SDKs) may not, and origin
        // checks only protect browsers, so a missing Origin is let through.
        if let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
            let allowed = state.config.allowed_origins.iter().any(|o| {
                o == "*"
                    || o.trim_end_matches('/')
                        .eq_ignore_ascii_case(origin.trim_end_matches('/'))
            });
            if !allowed {
                tracing::warn!(
                    target: "security.origin",
                    event = "security.origin_rejected",
                    origin = %origin,
                    "WebSocket origin not in gateway.allowed_origins"
                );
                return (
                    StatusCode::FORBIDDEN,
                    Json(json!({"error": {"message": "origin not allowed", "type": "forbidden", "code": "origin_not_allowed"}})),
                )
                    .into_response();
            }
        }
    }
    if state.shutting_down.is_cancelled() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"error": {"message": "the gateway is shutting down", "type": "server_error", "code": "shutting_down"}})),
        )
            .into_response();
    }
    // The transport limit sits above ours so that a frame between the two still gets
    // a proper error answer before the close.
    ws.max_message_size(MAX_FRAME_BYTES * 2)
        .max_frame_size(MAX_FRAME_BYTES * 2)
        .on_upgrade(move |socket| {
            let conns = state.ws_conns.clone();
            conns.track_future(conn::serve(socket, state))
        })
}
