//! `POST /channels/{name}/events`: a chat platform delivering events (Feishu's event
//! subscription). Not behind the gateway token: the platform cannot send it; the channel
//! checks the platform's own proof (a verification token) instead.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::state::AppState;

pub async fn handle(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    let Some(channels) = state.channels.get() else {
        return reply(503, "channels are not started yet");
    };
    match channels.webhook(&name, &body) {
        Ok(answer) => Json(answer).into_response(),
        Err(e) => reply(e.status(), &e.to_string()),
    }
}

fn reply(status: u16, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(json!({"error": {"message": message}}))).into_response()
}
