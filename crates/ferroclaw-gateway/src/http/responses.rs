//! `POST /v1/responses` (OpenResponses): `input` as a string or a list of items; JSON,
//! or SSE with `response.created`, `response.output_text.delta`, `response.completed`.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use ferroclaw_runtime::Origin;
use ferroclaw_types::{EventKind, Usage};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::{
    content_text, parse_body, resolve_agent, resolve_queue_mode, resolve_session, sse_data,
    sse_response, unix_now,
};
use crate::auth::Caller;
use crate::error::{ApiError, ErrorShape};
use crate::runs::{self, Ended, Started, Target};
use crate::state::AppState;

const SHAPE: ErrorShape = ErrorShape::OpenAi;

#[derive(Debug, Deserialize)]
pub struct ResponsesRequest {
    #[serde(default)]
    pub model: Option<String>,
    pub input: Value,
    #[serde(default)]
    pub instructions: Option<String>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub user: Option<String>,
}

/// The user text of `input`: the string itself, or the last user item.
fn input_text(input: &Value) -> Result<String, ApiError> {
    let text = match input {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .rev()
            .find_map(|item| {
                let role = item.get("role").and_then(Value::as_str);
                let kind = item.get("type").and_then(Value::as_str);
                match (role, kind) {
                    (Some("user"), _) => item.get("content").map(content_text),
                    (None, Some("input_text")) => {
                        item.get("text").and_then(Value::as_str).map(str::to_string)
                    }
                    _ => None,
                }
            })
            .unwrap_or_default(),
        _ => String::new(),
    };
    if text.trim().is_empty() {
        return Err(ApiError::bad_request(
            "`input` must be a string or contain a user message",
        ));
    }
    Ok(text)
}

fn usage_json(u: &Usage) -> Value {
    let input = u.input + u.cache_read + u.cache_write;
    json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": u.cache_read},
        "output_tokens": u.output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + u.output,
    })
}

struct Ids {
    response: String,
    message: String,
    model: String,
    created: u64,
}

impl Ids {
    fn message_item(&self, text: &str, status: &str) -> Value {
        json!({
            "type": "message",
            "id": self.message,
            "status": status,
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        })
    }

    fn response(&self, status: &str, text: Option<&str>, usage: Option<&Usage>) -> Value {
        let output: Vec<Value> = text
            .map(|t| vec![self.message_item(t, "completed")])
            .unwrap_or_default();
        json!({
            "id": self.response,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "model": self.model,
            "output": output,
            "output_text": text.unwrap_or(""),
            "usage": usage.map(usage_json),
            "error": null,
        })
    }
}

pub async fn handle(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let req: ResponsesRequest = match parse_body(body, SHAPE) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let prepared = async {
        let session = resolve_session(&headers, &caller, req.user.as_deref(), SHAPE)?;
        let who = caller.requester(session.user.as_deref());
        let agent = resolve_agent(&state, req.model.as_deref(), &headers, who, SHAPE).await?;
        let mode = resolve_queue_mode(&state, &headers, SHAPE)?;
        let mut message = input_text(&req.input)?;
        if let Some(instr) = req.instructions.as_deref().filter(|s| !s.trim().is_empty()) {
            message = format!("Instructions: {instr}\n\n{message}");
        }
        Ok::<_, ApiError>((agent, session, mode, message))
    }
    .await;
    let (agent, session, mode, message) = match prepared {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let agent_id = agent.id.clone();
    let agent = &agent;
    let ids = Ids {
        response: format!("resp_{}", uuid::Uuid::new_v4().simple()),
        message: format!("msg_{}", uuid::Uuid::new_v4().simple()),
        model: req
            .model
            .clone()
            .filter(|m| !m.trim().is_empty())
            .unwrap_or_else(|| format!("ferroclaw:{agent_id}")),
        created: unix_now(),
    };

    let target = Target {
        agent,
        session_key: &session.key,
        user: session.user.as_deref(),
        ephemeral: session.ephemeral,
        message: &message,
        mode,
        origin: Origin::Http,
    };
    if !req.stream {
        let started = match runs::start(&state, target) {
            Ok(s) => s,
            Err(e) => return ApiError::from_submit(&e).into_response(),
        };
        let (text, usage) = match started {
            Started::Command(t) => (t, Usage::default()),
            Started::Run(pending) => {
                match runs::drive(&state, pending, |_| {}, std::future::pending()).await {
                    Ended::Done(Ok(out)) => {
                        (if out.silent { String::new() } else { out.text }, out.usage)
                    }
                    Ended::Done(Err(f)) => return ApiError::from_failure(&f).into_response(),
                    Ended::ClientGone => {
                        return ApiError::internal("run abandoned").into_response()
                    }
                }
            }
        };
        return Json(ids.response("completed", Some(&text), Some(&usage))).into_response();
    }

    let (tx, rx) = mpsc::unbounded_channel();
    let out = Arc::new(SseOut {
        tx,
        inner: Mutex::new((0, String::new())),
        item_id: ids.message.clone(),
    });
    out.send(
        "response.created",
        json!({"response": ids.response("in_progress", None, None)}),
    );
    out.send(
        "response.output_item.added",
        json!({"output_index": 0, "item": {"type": "message", "id": ids.message, "status": "in_progress", "role": "assistant", "content": []}}),
    );
    out.send(
        "response.content_part.added",
        json!({"item_id": ids.message, "output_index": 0, "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
    );
    // The preamble is queued before the run can emit its first delta; if the scheduler
    // refuses, the unread channel is dropped and the client gets a plain HTTP error.
    let started = match runs::start(&state, target) {
        Ok(s) => s,
        Err(e) => return ApiError::from_submit(&e).into_response(),
    };
    tokio::spawn(async move {
        let result = match started {
            Started::Command(t) => {
                out.delta(&t);
                Ok(Usage::default())
            }
            Started::Run(pending) => {
                let on_event = |event: ferroclaw_types::RunEvent| {
                    if let EventKind::AssistantDelta { text } = &event.kind {
                        out.delta(text);
                    }
                };
                let gone = out.tx.clone();
                match runs::drive(
                    &state,
                    pending,
                    on_event,
                    async move { gone.closed().await },
                )
                .await
                {
                    Ended::ClientGone => return,
                    Ended::Done(Ok(o)) => {
                        if out.streamed_text().is_empty() && !o.silent {
                            out.delta(&o.text);
                        }
                        Ok(o.usage)
                    }
                    Ended::Done(Err(f)) => Err(ApiError::from_failure(&f)),
                }
            }
        };
        let text = out.streamed_text();
        match result {
            Ok(usage) => {
                out.send(
                    "response.output_text.done",
                    json!({"item_id": ids.message, "output_index": 0, "content_index": 0, "text": text}),
                );
                out.send(
                    "response.content_part.done",
                    json!({"item_id": ids.message, "output_index": 0, "content_index": 0, "part": {"type": "output_text", "text": text, "annotations": []}}),
                );
                out.send(
                    "response.output_item.done",
                    json!({"output_index": 0, "item": ids.message_item(&text, "completed")}),
                );
                out.send(
                    "response.completed",
                    json!({"response": ids.response("completed", Some(&text), Some(&usage))}),
                );
            }
            Err(e) => {
                let mut resp = ids.response("failed", None, None);
                resp["error"] = json!({"code": e.code, "message": e.message});
                out.send("response.failed", json!({"response": resp}));
            }
        }
    });
    sse_response(rx)
}

/// Numbered SSE events for one response.
struct SseOut {
    tx: mpsc::UnboundedSender<Bytes>,
    /// Next sequence number and the text streamed so far.
    inner: Mutex<(u64, String)>,
    item_id: String,
}

impl SseOut {
    fn send(&self, event: &str, mut payload: Value) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        payload["type"] = json!(event);
        payload["sequence_number"] = json!(g.0);
        g.0 += 1;
        let _ = self.tx.send(sse_data(Some(event), &payload.to_string()));
    }

    fn delta(&self, text: &str) {
        if text.is_empty() {
            return;
        }
        {
            let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            g.1.push_str(text);
        }
        self.send(
            "response.output_text.delta",
            json!({"item_id": self.item_id, "output_index": 0, "content_index": 0, "delta": text}),
        );
    }

    fn streamed_text(&self) -> String {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .1
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_forms() {
        assert_eq!(input_text(&json!("hello")).unwrap(), "hello");
        let items = json!([
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "x"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "last"}]},
        ]);
        assert_eq!(input_text(&items).unwrap(), "last");
        assert!(input_text(&json!([])).is_err());
        assert!(input_text(&json!(3)).is_err());
    }
}
