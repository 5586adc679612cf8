//! `/v1/agents` (users' agents: list, create, read, change, delete), their sharing, and
//! `/v1/providers` (provider records, keys masked in every answer). Transport only: the
//! access rules are the runtime's (`ferroclaw_runtime::Runtime::agent_for` and the
//! tenant methods beside it). The request acts for the caller's user (a per-user token),
//! or the one the gateway token names in `X-Ferroclaw-User-Id`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use ferroclaw_runtime::{AgentPatch, AgentSpec, ProviderSpec, Requester};
use ferroclaw_store::ShareRole;
use serde::Deserialize;
use serde_json::json;

use super::{header_str, parse_body, tenant_error, HEADER_USER};
use crate::auth::Caller;
use crate::error::{ApiError, ErrorShape};
use crate::state::AppState;

const SHAPE: ErrorShape = ErrorShape::OpenAi;

/// The user the request acts for.
pub(super) fn user(caller: &Caller, headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    caller.user_for(header_str(headers, HEADER_USER)).map_err(|reason| {
        tracing::warn!(target: "security.auth", event = "security.user_refused", %reason, "request names a user it may not act for");
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", "user_not_allowed", reason)
    })
}

pub(super) fn who<'a>(caller: &Caller, user: &'a Option<String>) -> Requester<'a> {
    caller.requester(user.as_deref())
}

pub(super) type Answer = Result<Response, ApiError>;

pub(super) fn ok(v: impl serde::Serialize) -> Answer {
    Ok(Json(v).into_response())
}

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
        .map_err(|e| tenant_error(e, SHAPE))?;
    ok(json!({"object": "list", "data": agents}))
}

pub async fn create(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Answer {
    let u = user(&caller, &headers)?;
    let spec: AgentSpec = parse_body(body, SHAPE)?;
    let view = state
        .runtime
        .create_agent(who(&caller, &u), spec)
        .await
        .map_err(|e| tenant_error(e, SHAPE))?;
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

pub async fn get_one(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Answer {
    let u = user(&caller, &headers)?;
    let view = state
        .runtime
        .agent_view(who(&caller, &u), &id)
        .await
        .map_err(|e| tenant_error(e, SHAPE))?;
    ok(view)
}

pub async fn update(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Answer {
    let u = user(&caller, &headers)?;
    let patch: AgentPatch = parse_body(body, SHAPE)?;
    let view = state
        .runtime
        .update_agent(who(&caller, &u), &id, patch)
        .await
        .map_err(|e| tenant_error(e, SHAPE))?;
    ok(view)
}

pub async fn delete(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Answer {
    let u = user(&caller, &headers)?;
    state
        .runtime
        .delete_agent(who(&caller, &u), &id)
        .await
        .map_err(|e| tenant_error(e, SHAPE))?;
    ok(json!({"id": id, "deleted": true}))
}

pub async fn shares(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Answer {
    let u = user(&caller, &headers)?;
    let shares = state
        .runtime
        .agent_shares(who(&caller, &u), &id)
        .await
        .map_err(|e| tenant_error(e, SHAPE))?;
    ok(json!({"agentId": id, "shares": shares}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShareBody {
    user: String,
    /// `user` (default) or `editor`.
    #[serde(default)]
    role: Option<String>,
}

pub async fn share(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Answer {
    let u = user(&caller, &headers)?;
    let b: ShareBody = parse_body(body, SHAPE)?;
    let role = match b.role.as_deref() {
        None => ShareRole::User,
        Some(r) => ShareRole::parse(r).ok_or_else(|| {
            ApiError::bad_request(format!("role: expected user or editor, got {r:?}"))
        })?,
    };
    state
        .runtime
        .set_agent_share(who(&caller, &u), &id, &b.user, Some(role))
        .await
        .map_err(|e| tenant_error(e, SHAPE))?;
    ok(json!({"agentId": id, "user": b.user.trim(), "role": role}))
}

pub async fn unshare(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path((id, target)): Path<(String, String)>,
) -> Answer {
    let u = user(&caller, &headers)?;
    let removed = state
        .runtime
        .set_agent_share(who(&caller, &u), &id, &target, None)
        .await
        .map_err(|e| tenant_error(e, SHAPE))?;
    ok(json!({"agentId": id, "user": target, "removed": removed}))
}

pub async fn providers(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
) -> Answer {
    let u = user(&caller, &headers)?;
    let list = state
        .runtime
        .providers(who(&caller, &u))
        .await
        .map_err(|e| tenant_error(e, SHAPE))?;
    ok(json!({"object": "list", "data": list}))
}

pub async fn put_provider(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Answer {
    let u = user(&caller, &headers)?;
    let spec: ProviderSpec = parse_body(body, SHAPE)?;
    let view = state
        .runtime
        .put_provider(who(&caller, &u), spec)
        .await
        .map_err(|e| tenant_error(e, SHAPE))?;
    ok(view)
}

pub async fn delete_provider(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Answer {
    let u = user(&caller, &headers)?;
    let deleted = state
        .runtime
        .delete_provider(who(&caller, &u), &name)
        .await
        .map_err(|e| tenant_error(e, SHAPE))?;
    if !deleted {
        return Err(ApiError::not_found(
            "not_found",
            format!("unknown provider `{name}`"),
        ));
    }
    ok(json!({"name": name, "deleted": true}))
}
