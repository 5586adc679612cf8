//! The WebSocket surface at `/ws` (and `/`, where OpenClaw's clients open it): upgrade (connection caps) → [`conn`] (frames, seq,
//! send buffer, keep-alive, auth state) → [`methods`] (one handler per RPC method).

pub mod agents;
pub mod channels;
pub mod conn;
pub mod cron;
pub mod devices;
pub mod frames;
pub mod methods;
pub mod params;
pub mod table;
pub mod usage;
pub mod v4;
pub mod watch;

use std::sync::Arc;

use axum::extract::ws::WebSocketUpgrade;
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::state::AppState;

/// Frames above this are answered with an error and the connection is closed.
pub const MAX_FRAME_BYTES: usize = 512 * 1024;
/// Frames queued for one client; a client that lets it fill up is dropped.
pub const SEND_BUFFER: usize = 256;
/// Initial read and write buffer per connection.
pub const IO_BUFFER: usize = 4 * 1024;
/// Keep-alive ping period.
pub const PING_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30);

/// `/`: OpenClaw's clients open their WebSocket at the root; a browser gets the
/// dashboard there.
pub async fn root(
    state: State<Arc<AppState>>,
    peer: ConnectInfo<SocketAddr>,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    match ws {
        Ok(ws) => upgrade(state, peer, ws).await,
        Err(_) => crate::http::dashboard::index().await,
    }
}

pub async fn upgrade(
    State(state): State<Arc<AppState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    ws: WebSocketUpgrade,
) -> Response {
    // Host and Origin were checked for every route by `access::browser_guard`.
    if state.shutting_down.is_cancelled() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"error": {"message": "the gateway is shutting down", "type": "server_error", "code": "shutting_down"}})),
        )
            .into_response();
    }
    let permit = match state.ws_limiter.try_acquire(peer.ip()) {
        Ok(p) => p,
        Err(hit) => {
            tracing::warn!(target: "security.limits", event = "security.ws_limit", peer = %peer.ip(), %hit, "WebSocket refused");
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::RETRY_AFTER, "5")],
                Json(json!({"error": {"message": format!("too many WebSocket connections: {hit}"), "type": "server_error", "code": "too_many_connections"}})),
            )
                .into_response();
        }
    };
    // The transport limit sits above ours so that a frame between the two still gets
    // a proper error answer before the close. Buffers start small (tungstenite's
    // defaults are 128 KiB each way, per connection) and grow only for a large frame.
    ws.max_message_size(MAX_FRAME_BYTES * 2)
        .max_frame_size(MAX_FRAME_BYTES * 2)
        .read_buffer_size(IO_BUFFER)
        .write_buffer_size(IO_BUFFER)
        .on_upgrade(move |socket| {
            let conns = state.ws_conns.clone();
            conns.track_future(conn::serve(socket, state, permit))
        })
}
