//! `/v1/mcp/servers`: MCP servers kept in the storage, with their grants (list, create,
//! read, replace, delete). Transport only: who may do what, and what a server's settings
//! may be, is `ferroclaw_runtime::mcp_servers`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::{Extension, Json};
use ferroclaw_runtime::mcp_servers::McpServers;
use ferroclaw_runtime::TenantError;
use serde_json::{json, Value};

use super::agents::{ok, user, who, Answer};
use super::{parse_body, tenant_error};
use crate::auth::Caller;
use crate::error::{ApiError, ErrorShape};
use crate::state::AppState;

const SHAPE: ErrorShape = ErrorShape::OpenAi;

fn servers(state: &AppState) -> Result<&Arc<McpServers>, ApiError> {
    state
        .runtime
        .mcp_servers()
        .ok_or_else(|| tenant_error(TenantError::Unsupported, SHAPE))
}

pub async fn list(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
) -> Answer {
    let u = user(&caller, &headers)?;
    let list = servers(&state)?
        .list(who(&caller, &u))
        .await
        .map_err(|e| tenant_error(e, SHAPE))?;
    ok(json!({"object": "list", "data": list}))
}

pub async fn create(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Answer {
    let u = user(&caller, &headers)?;
    let body: Value = parse_body(body, SHAPE)?;
    let name = body
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| ApiError::bad_request("name: give the server a `name`").with_shape(SHAPE))?;
    let view = servers(&state)?
        .put(who(&caller, &u), &name, body, true)
        .await
        .map_err(|e| tenant_error(e, SHAPE))?;
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

pub async fn get_one(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Answer {
    let u = user(&caller, &headers)?;
    let view = servers(&state)?
        .get(who(&caller, &u), &name)
        .await
        .map_err(|e| tenant_error(e, SHAPE))?;
    ok(view)
}

pub async fn replace(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Answer {
    let u = user(&caller, &headers)?;
    let body: Value = parse_body(body, SHAPE)?;
    let view = servers(&state)?
        .put(who(&caller, &u), &name, body, false)
        .await
        .map_err(|e| tenant_error(e, SHAPE))?;
    ok(view)
}

pub async fn delete(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Answer {
    let u = user(&caller, &headers)?;
    servers(&state)?
        .delete(who(&caller, &u), &name)
        .await
        .map_err(|e| tenant_error(e, SHAPE))?;
    ok(json!({"name": name, "deleted": true}))
}
