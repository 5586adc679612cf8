//! `GET /v1/models`: every agent the caller may use as an OpenAI model, id
//! `ferroclaw:<agent>` (the configured ones, and the users' agents they own, are shared
//! or are defaults).

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::Extension;
use serde_json::{json, Value};

use super::agents::{ok, user, who, Answer};
use super::tenant_error;
use crate::auth::Caller;
use crate::error::ErrorShape;
use crate::state::AppState;

pub async fn list(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
) -> Answer {
    let u = user(&caller, &headers)?;
    let agents = state
        .runtime
        .visible_agents(who(&caller, &u))
        .await
        .map_err(|e| tenant_error(e, ErrorShape::OpenAi))?;
    // Configured agents exist since the gateway started.
    let started = super::unix_now().saturating_sub(state.started.elapsed().as_secs());
    let default = state.runtime.default_agent_id();
    let data: Vec<Value> = agents
        .into_iter()
        .map(|a| {
            json!({
                "id": format!("ferroclaw:{}", a.id),
                "object": "model",
                "created": started,
                "owned_by": a.owner.as_deref().unwrap_or("ferroclaw"),
                "default": a.source == "config" && a.id == default,
                "agent_id": a.id,
                "name": a.name,
                "provider": a.provider,
                "model": a.model,
            })
        })
        .collect();
    ok(json!({"object": "list", "data": data}))
}
