//! `cron.list | status | runs` (viewer) and `cron.create | update | delete | toggle |
//! run` (operator): scheduled jobs over the WebSocket. Transport only; who may see and
//! change which job is the runtime's cron book's rule (a user their own, the
//! administrator all).

use ferroclaw_runtime::cron::{CronBook, CronError, JobInput};
use ferroclaw_runtime::Requester;
use serde_json::{json, Map, Value};

use crate::error::{WsCode, WsError};
use crate::state::AppState;

fn cron_error(e: CronError) -> WsError {
    let code = match &e {
        CronError::Invalid(_) => WsCode::InvalidRequest,
        CronError::NotFound(_) => WsCode::NotFound,
        CronError::Busy(_) => WsCode::FailedPrecondition,
        CronError::Unavailable | CronError::Store(_) => WsCode::Unavailable,
    };
    WsError::new(code, e.to_string())
}

fn book(state: &AppState) -> Result<&CronBook, WsError> {
    state
        .runtime
        .cron()
        .ok_or_else(|| cron_error(CronError::Unavailable))
}

/// `id` (also `jobId`) taken out of the params, the rest left.
fn take_id(params: Value) -> Result<(String, Value), WsError> {
    super::params::take_id(params, &["id", "jobId"])
}

fn job_input(v: Value) -> Result<JobInput, WsError> {
    let v = if v.is_null() {
        Value::Object(Map::new())
    } else {
        v
    };
    serde_json::from_value(v).map_err(|e| WsError::invalid(format!("params: {e}")))
}

pub async fn list(state: &AppState, who: Requester<'_>) -> Result<Value, WsError> {
    let jobs = book(state)?.list(who).await.map_err(cron_error)?;
    Ok(json!({"jobs": jobs}))
}

/// One job with its latest runs, or (no `id`) how many jobs there are and whether this
/// gateway runs them.
pub async fn status(state: &AppState, params: Value, who: Requester<'_>) -> Result<Value, WsError> {
    let b = book(state)?;
    if params.get("id").or_else(|| params.get("jobId")).is_none() {
        let jobs = b.list(who).await.map_err(cron_error)?;
        return Ok(json!({
            "enabled": state.cron_running,
            "jobs": jobs.len(),
            "running": jobs.iter().filter(|j| j.running).count(),
            "nextRunAt": jobs.iter().filter_map(|j| j.next_run_at).min(),
        }));
    }
    let (id, _) = take_id(params)?;
    let job = b.get(who, &id).await.map_err(cron_error)?;
    let runs = b.runs(who, Some(&id), 5).await.map_err(cron_error)?;
    Ok(json!({"job": job, "runs": runs}))
}

pub async fn runs(state: &AppState, params: Value, who: Requester<'_>) -> Result<Value, WsError> {
    let limit = params
        .get("limit")
        .and_then(Value::as_u64)
        .unwrap_or(20)
        .min(200) as usize;
    let id = params
        .get("id")
        .or_else(|| params.get("jobId"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let runs = book(state)?
        .runs(who, id.as_deref(), limit)
        .await
        .map_err(cron_error)?;
    Ok(json!({"runs": runs}))
}

pub async fn create(state: &AppState, params: Value, who: Requester<'_>) -> Result<Value, WsError> {
    book(state)?;
    let job = state
        .runtime
        .cron_create(who, job_input(params)?)
        .await
        .map_err(cron_error)?;
    Ok(json!({"job": job}))
}

pub async fn update(state: &AppState, params: Value, who: Requester<'_>) -> Result<Value, WsError> {
    let (id, rest) = take_id(params)?;
    let job = book(state)?
        .update(who, &id, job_input(rest)?)
        .await
        .map_err(cron_error)?;
    Ok(json!({"job": job}))
}

pub async fn toggle(state: &AppState, params: Value, who: Requester<'_>) -> Result<Value, WsError> {
    let (id, rest) = take_id(params)?;
    let b = book(state)?;
    let enabled = match rest.get("enabled") {
        Some(Value::Bool(e)) => *e,
        Some(_) => return Err(WsError::invalid("`enabled` must be true or false")),
        None => !b.get(who, &id).await.map_err(cron_error)?.enabled,
    };
    let input = JobInput {
        enabled: Some(enabled),
        ..JobInput::default()
    };
    let job = b.update(who, &id, input).await.map_err(cron_error)?;
    Ok(json!({"job": job}))
}

pub async fn delete(state: &AppState, params: Value, who: Requester<'_>) -> Result<Value, WsError> {
    let (id, _) = take_id(params)?;
    book(state)?.delete(who, &id).await.map_err(cron_error)?;
    Ok(json!({"id": id, "deleted": true}))
}

pub async fn run(state: &AppState, params: Value, who: Requester<'_>) -> Result<Value, WsError> {
    let (id, _) = take_id(params)?;
    let job = book(state)?.run_now(who, &id).await.map_err(cron_error)?;
    Ok(json!({"job": job, "queued": true}))
}
