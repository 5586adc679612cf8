//! `usage.get` (`groupBy`: `agent` | `model` | `user` | `day`, default `day`) and
//! `usage.summary` (all four at once, and the total): tokens and cost of the model calls
//! in a time range (`since`, `until`: epoch ms), from the traces. Transport only: a user
//! sees their own usage, the operator everyone's (`TraceReader`).

use ferroclaw_runtime::traces::{TraceError, TraceReader};
use ferroclaw_runtime::Requester;
use ferroclaw_store::{UsageGroup, UsageRow};
use serde_json::{json, Value};

use crate::error::{WsCode, WsError};
use crate::state::AppState;

fn usage_error(e: TraceError) -> WsError {
    let code = match &e {
        TraceError::Invalid(_) => WsCode::InvalidRequest,
        TraceError::Off => WsCode::FailedPrecondition,
        TraceError::Store(_) => WsCode::Unavailable,
    };
    WsError::new(code, e.to_string())
}

fn millis(params: &Value, name: &str) -> Result<Option<i64>, WsError> {
    match params.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_i64().map(Some).ok_or_else(|| {
            WsError::invalid(format!("{name}: expected a time in epoch milliseconds"))
        }),
    }
}

fn total(rows: &[UsageRow]) -> Value {
    json!({
        "calls": rows.iter().map(|r| r.calls).sum::<u64>(),
        "inputTokens": rows.iter().map(|r| r.input_tokens).sum::<u64>(),
        "outputTokens": rows.iter().map(|r| r.output_tokens).sum::<u64>(),
        "cachedTokens": rows.iter().map(|r| r.cached_tokens).sum::<u64>(),
        "costUsd": rows.iter().map(|r| r.cost_usd).sum::<f64>(),
    })
}

pub async fn get(state: &AppState, params: &Value, who: Requester<'_>) -> Result<Value, WsError> {
    let name = params
        .get("groupBy")
        .and_then(Value::as_str)
        .unwrap_or("day");
    let group = UsageGroup::parse(name).ok_or_else(|| {
        WsError::invalid(format!(
            "groupBy: expected agent, model, user or day, got {name:?}"
        ))
    })?;
    let (since, until) = (millis(params, "since")?, millis(params, "until")?);
    let rows = state
        .runtime
        .usage(TraceReader { user: who.user }, group, since, until)
        .await
        .map_err(usage_error)?;
    Ok(json!({"groupBy": name, "total": total(&rows), "rows": rows}))
}

pub async fn summary(
    state: &AppState,
    params: &Value,
    who: Requester<'_>,
) -> Result<Value, WsError> {
    let (since, until) = (millis(params, "since")?, millis(params, "until")?);
    let reader = TraceReader { user: who.user };
    let mut out = serde_json::Map::new();
    for (key, group) in [
        ("byAgent", UsageGroup::Agent),
        ("byModel", UsageGroup::Model),
        ("byUser", UsageGroup::User),
        ("byDay", UsageGroup::Day),
    ] {
        let rows = state
            .runtime
            .usage(reader, group, since, until)
            .await
            .map_err(usage_error)?;
        if key == "byDay" {
            out.insert("total".into(), total(&rows));
        }
        out.insert(key.into(), json!(rows));
    }
    Ok(Value::Object(out))
}
