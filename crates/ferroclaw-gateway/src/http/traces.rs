//! `GET /v1/traces` (filters: `agent`, `user`, `session`, `status`, `since`, `until` in
//! epoch ms; `limit`, `cursor` for paging) and `GET /v1/traces/{id}`. Transport only:
//! who may read which trace is `ferroclaw_runtime::traces::TraceReader`.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Extension;
use ferroclaw_runtime::traces::{TraceError, TraceReader};
use ferroclaw_store::TraceFilter;
use serde_json::json;

use super::agents::{ok, user, Answer};
use crate::auth::Caller;
use crate::error::{ApiError, ErrorShape};
use crate::state::AppState;

const SHAPE: ErrorShape = ErrorShape::OpenAi;

const PARAMS: [&str; 8] = [
    "agent", "user", "session", "status", "since", "until", "limit", "cursor",
];

pub(crate) fn trace_error(e: TraceError) -> ApiError {
    match e {
        TraceError::Off => ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "invalid_request_error",
            "tracing_disabled",
            e.to_string(),
        ),
        TraceError::Invalid(_) => ApiError::bad_request(e.to_string()),
        TraceError::Store(_) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "storage_unavailable",
            e.to_string(),
        ),
    }
    .with_shape(SHAPE)
}

fn millis(q: &HashMap<String, String>, name: &str) -> Result<Option<i64>, ApiError> {
    q.get(name)
        .map(|v| {
            v.parse::<i64>().map_err(|_| {
                ApiError::bad_request(format!(
                    "{name}: expected a time in epoch milliseconds, got {v:?}"
                ))
                .with_shape(SHAPE)
            })
        })
        .transpose()
}

pub async fn list(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Answer {
    let u = user(&caller, &headers)?;
    if let Some(unknown) = q.keys().find(|k| !PARAMS.contains(&k.as_str())) {
        return Err(ApiError::bad_request(format!(
            "unknown parameter {unknown:?}; the filters are {}",
            PARAMS.join(", ")
        ))
        .with_shape(SHAPE));
    }
    let limit = match q.get("limit") {
        None => 0,
        Some(v) => match v.parse::<usize>() {
            Ok(n) if (1..=500).contains(&n) => n,
            _ => {
                return Err(
                    ApiError::bad_request(format!("limit: expected 1 to 500, got {v:?}"))
                        .with_shape(SHAPE),
                )
            }
        },
    };
    let filter = TraceFilter {
        agent_id: q.get("agent").cloned(),
        user_id: q.get("user").cloned(),
        session_key: q.get("session").cloned(),
        status: q.get("status").cloned(),
        since: millis(&q, "since")?,
        until: millis(&q, "until")?,
        limit,
        cursor: q.get("cursor").cloned(),
    };
    let page = state
        .runtime
        .list_traces(TraceReader { user: u.as_deref() }, filter)
        .await
        .map_err(trace_error)?;
    ok(json!({"object": "list", "data": page.traces, "nextCursor": page.next_cursor}))
}

pub async fn get_one(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Answer {
    let u = user(&caller, &headers)?;
    match state
        .runtime
        .trace(TraceReader { user: u.as_deref() }, &id)
        .await
        .map_err(trace_error)?
    {
        Some((trace, spans, children)) => {
            ok(json!({"trace": trace, "spans": spans, "children": children}))
        }
        None => Err(
            ApiError::not_found("trace_not_found", format!("no trace {id:?}")).with_shape(SHAPE),
        ),
    }
}
