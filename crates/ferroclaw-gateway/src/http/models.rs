//! `GET /v1/models`: every agent as an OpenAI model, id `ferroclaw:<agent>`.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::state::AppState;

pub async fn list(State(state): State<Arc<AppState>>) -> Json<Value> {
    // Agents exist since the gateway started.
    let created = super::unix_now().saturating_sub(state.started.elapsed().as_secs());
    let data: Vec<Value> = state
        .runtime
        .agents()
        .iter()
        .map(|a| {
            let s = a.agent.settings();
            json!({
                "id": format!("ferroclaw:{}", a.id),
                "object": "model",
                "created": created,
                "owned_by": "ferroclaw",
                "agent_id": a.id,
                "name": s.name,
                "provider": s.provider,
                "model": s.model,
                "default": a.id == state.runtime.default_agent_id(),
            })
        })
        .collect();
    Json(json!({"object": "list", "data": data}))
}
