//! `POST /tools/invoke` and `POST /v1/tools/invoke` (the OpenClaw contract): run one
//! tool directly, without the agent loop. Body `{tool, action?, args?, sessionKey?,
//! dryRun?}`; 200 `{ok:true, result}`, 400/401/404 `{ok:false, error:{type, message}}`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use ferroclaw_tools::ToolContext;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use super::{parse_body, resolve_agent, HEADER_USER};
use crate::auth::Caller;
use crate::error::{ApiError, ErrorShape};
use crate::state::AppState;

const SHAPE: ErrorShape = ErrorShape::Tools;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InvokeRequest {
    pub tool: String,
    #[serde(default)]
    pub action: Option<String>,
    #[serde(default)]
    pub args: Option<Value>,
    #[serde(default)]
    pub session_key: Option<String>,
    #[serde(default)]
    pub dry_run: bool,
    #[serde(default)]
    pub agent_id: Option<String>,
}

fn error(status: StatusCode, kind: &'static str, msg: impl Into<String>) -> ApiError {
    ApiError::new(status, "invalid_request_error", kind, msg).with_shape(SHAPE)
}

pub async fn handle(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    invoke(&state, &caller, &headers, body)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

async fn invoke(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let req: InvokeRequest = parse_body(body, SHAPE)?;
    let name = req.tool.trim();
    if name.is_empty() {
        return Err(error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "`tool` is required",
        ));
    }
    let named = headers.get(HEADER_USER).and_then(|v| v.to_str().ok());
    let user = caller
        .user_for(named)
        .map_err(|reason| error(StatusCode::FORBIDDEN, "user_not_allowed", reason))?;
    let who = caller.requester(user.as_deref());
    let agent = match req.agent_id.as_deref() {
        Some(id) => state
            .runtime
            .agent_for(who, id)
            .await
            .map_err(|e| error(StatusCode::NOT_FOUND, "not_found", e.to_string()))?,
        None => resolve_agent(state, None, headers, who, SHAPE).await?,
    };
    let agent = &agent;
    // A denied tool is reported exactly like a missing one, so the policy does not
    // reveal which tools exist.
    let tool = agent
        .agent
        .tools()
        .get(name)
        .filter(|t| state.tool_policy.allows(t.name()) && state.tool_policy.allows(name))
        .ok_or_else(|| {
            tracing::info!(tool = %name, agent = %agent.id, "tools/invoke: unknown or denied tool");
            error(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("tool `{name}` is not available"),
            )
        })?;

    if req.dry_run {
        return Ok(Json(json!({
            "ok": true,
            "result": {
                "dryRun": true,
                "tool": {
                    "name": tool.name(),
                    "description": tool.description(),
                    "parameters": tool.parameters(),
                },
            },
        }))
        .into_response());
    }

    let mut args = match req.args {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(_) => {
            return Err(error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "`args` must be a JSON object",
            ))
        }
    };
    if let Some(action) = req.action {
        args.entry("action").or_insert(Value::String(action));
    }
    let session_key = req.session_key.unwrap_or_else(|| "main".to_string());
    ferroclaw_store::validate_session_key(&session_key)
        .map_err(|e| error(StatusCode::BAD_REQUEST, "invalid_request", e.to_string()))?;
    let settings = agent.agent.settings();
    // A shared agent's tools work in one user's sub-workspace, never in the root that
    // holds everyone's.
    let store_key = state
        .runtime
        .stored_key(agent, user.as_deref(), &session_key);
    let acting_user = user.clone();
    let (workspace, tool_user) = match (settings.per_user_workspace, user) {
        (false, _) => (settings.workspace.clone(), None),
        (true, None) => {
            return Err(error(
                StatusCode::FORBIDDEN,
                "user_required",
                format!(
                    "agent `{}` serves several users; this request names none",
                    agent.id
                ),
            ))
        }
        (true, Some(id)) => {
            let dir = ferroclaw_tools::path_guard::ensure_user_workspace(&settings.workspace, &id)
                .map_err(|_| {
                    error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "workspace",
                        "cannot prepare the user's workspace",
                    )
                })?;
            let tool_user = ferroclaw_tools::ToolUser {
                id,
                root_workspace: settings.workspace.clone(),
            };
            (dir, Some(tool_user))
        }
    };
    let ctx = ToolContext {
        agent_id: agent.id.clone(),
        // Same scope as the agent's own runs, so `process` sees that session's processes.
        session_key: ferroclaw_agent::tool_scope(&agent.id, &store_key),
        workspace,
        cancel: CancellationToken::new(),
        user: tool_user,
        acting_user,
        group_chat: false,
        progress: Default::default(),
        run_id: String::new(),
    };
    let result = agent
        .agent
        .tools()
        .execute(tool.name(), &ctx, Value::Object(args))
        .await;
    state.metrics.tool_call(tool.name(), result.is_error);
    if result.is_error {
        return Err(error(StatusCode::BAD_REQUEST, "tool_error", result.for_llm));
    }
    Ok(Json(json!({
        "ok": true,
        "result": {
            "content": result.for_llm,
            "forUser": result.for_user,
        },
    }))
    .into_response())
}
