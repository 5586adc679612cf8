//! `agents.create | update | delete` and `agents.files.list | get | set`: users' agents
//! over the WebSocket. Transport only; access is decided by the runtime.

use ferroclaw_runtime::{AgentPatch, AgentSpec, FileTarget, Requester};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::methods::tenant_error;
use crate::error::WsError;
use crate::state::AppState;

fn typed<T: DeserializeOwned>(v: Value) -> Result<T, WsError> {
    serde_json::from_value(v).map_err(|e| WsError::invalid(format!("params: {e}")))
}

/// `agentId` (also `agent_id`, `id`) taken out of the params, the rest left.
fn take_agent_id(params: Value) -> Result<(String, Value), WsError> {
    super::params::take_id(params, &["agentId", "agent_id", "id"])
}

pub async fn list(state: &AppState, who: Requester<'_>) -> Result<Value, WsError> {
    let agents = state
        .runtime
        .visible_agents(who)
        .await
        .map_err(tenant_error)?;
    Ok(json!({"agents": agents, "defaultId": state.runtime.default_agent_id()}))
}

pub async fn create(state: &AppState, params: Value, who: Requester<'_>) -> Result<Value, WsError> {
    let spec: AgentSpec = typed(params)?;
    let view = state
        .runtime
        .create_agent(who, spec)
        .await
        .map_err(tenant_error)?;
    Ok(json!({"agent": view}))
}

pub async fn update(state: &AppState, params: Value, who: Requester<'_>) -> Result<Value, WsError> {
    let (id, rest) = take_agent_id(params)?;
    let patch: AgentPatch = typed(rest)?;
    let view = state
        .runtime
        .update_agent(who, &id, patch)
        .await
        .map_err(tenant_error)?;
    Ok(json!({"agent": view}))
}

pub async fn delete(state: &AppState, params: Value, who: Requester<'_>) -> Result<Value, WsError> {
    let (id, _) = take_agent_id(params)?;
    state
        .runtime
        .delete_agent(who, &id)
        .await
        .map_err(tenant_error)?;
    Ok(json!({"agentId": id, "deleted": true}))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileParams {
    /// `user` (default: the caller's own files) or `agent` (the agent's own).
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    name: Option<String>,
    /// `null` removes the file.
    #[serde(default)]
    content: Option<Value>,
}

fn target(scope: Option<&str>) -> Result<FileTarget, WsError> {
    match scope {
        None | Some("user") => Ok(FileTarget::Mine),
        Some("agent") => Ok(FileTarget::Agent),
        Some(other) => Err(WsError::invalid(format!(
            "scope: expected user or agent, got {other:?}"
        ))),
    }
}

fn file_params(params: Value) -> Result<(String, FileParams), WsError> {
    let (id, rest) = take_agent_id(params)?;
    let rest = if rest == Value::Object(Map::new()) {
        FileParams::default()
    } else {
        typed(rest)?
    };
    Ok((id, rest))
}

pub async fn files_list(
    state: &AppState,
    params: Value,
    who: Requester<'_>,
) -> Result<Value, WsError> {
    let (id, p) = file_params(params)?;
    let files = state
        .runtime
        .agent_files(who, &id, target(p.scope.as_deref())?)
        .await
        .map_err(tenant_error)?;
    let listed: Vec<Value> = files
        .iter()
        .map(|f| json!({"name": f.name, "size": f.content.len(), "updatedAt": f.updated_at}))
        .collect();
    Ok(json!({"agentId": id, "files": listed}))
}

pub async fn files_get(
    state: &AppState,
    params: Value,
    who: Requester<'_>,
) -> Result<Value, WsError> {
    let (id, p) = file_params(params)?;
    let name = p
        .name
        .ok_or_else(|| WsError::invalid("`name` is required"))?;
    let files = state
        .runtime
        .agent_files(who, &id, target(p.scope.as_deref())?)
        .await
        .map_err(tenant_error)?;
    let file = files.into_iter().find(|f| f.name == name);
    Ok(json!({
        "agentId": id,
        "name": name,
        "exists": file.is_some(),
        "content": file.map(|f| f.content),
    }))
}

pub async fn files_set(
    state: &AppState,
    params: Value,
    who: Requester<'_>,
) -> Result<Value, WsError> {
    let (id, p) = file_params(params)?;
    let name = p
        .name
        .ok_or_else(|| WsError::invalid("`name` is required"))?;
    let content = match &p.content {
        None => {
            return Err(WsError::invalid(
                "`content` is required (null removes the file)",
            ))
        }
        Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => return Err(WsError::invalid("`content` must be a string or null")),
    };
    let changed = state
        .runtime
        .set_agent_file(who, &id, target(p.scope.as_deref())?, &name, content)
        .await
        .map_err(tenant_error)?;
    Ok(json!({"agentId": id, "name": name, "ok": true, "changed": changed}))
}
