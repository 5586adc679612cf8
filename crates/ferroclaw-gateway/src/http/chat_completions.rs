//! `POST /v1/chat/completions`, OpenAI-compatible. The agent runs its tools server-side;
//! the client gets the final answer as JSON, or the text as it is produced over SSE.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use ferroclaw_agent::RunOutput;
use ferroclaw_runtime::Origin;
use ferroclaw_types::{EventKind, RunEvent, StopReason, Usage};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::{
    content_text, parse_body, resolve_agent, resolve_queue_mode, resolve_session, sse_data,
    sse_response, unix_now, SessionChoice,
};
use crate::auth::Caller;
use crate::error::{ApiError, ErrorShape};
use crate::runs::{self, Ended, Started, Target};
use crate::state::AppState;

const SHAPE: ErrorShape = ErrorShape::OpenAi;

#[derive(Debug, Deserialize)]
pub struct ChatCompletionRequest {
    #[serde(default)]
    pub model: Option<String>,
    pub messages: Vec<ChatMessage>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub user: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    #[serde(default)]
    pub content: Value,
}

#[derive(Debug, Default, Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

/// The message handed to the agent: the last user message. The session's transcript
/// holds the history; for a one-off session the earlier messages of the request are
/// the only history there is, so they are passed along as context.
fn agent_message(req: &ChatCompletionRequest, ephemeral: bool) -> Result<String, ApiError> {
    let last_user = req
        .messages
        .iter()
        .rposition(|m| m.role == "user")
        .ok_or_else(|| ApiError::bad_request("`messages` must contain a user message"))?;
    let text = content_text(&req.messages[last_user].content);
    if !ephemeral || last_user == 0 {
        return Ok(text);
    }
    let mut out = String::from("Earlier conversation (from the client):\n");
    for m in &req.messages[..last_user] {
        out.push_str(&format!("[{}] {}\n", m.role, content_text(&m.content)));
    }
    out.push_str("\nCurrent message:\n");
    out.push_str(&text);
    Ok(out)
}

pub fn usage_json(u: &Usage) -> Value {
    let prompt = u.input + u.cache_read + u.cache_write;
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": u.output,
        "total_tokens": prompt + u.output,
    })
}

fn finish_reason(stop: StopReason) -> &'static str {
    match stop {
        StopReason::Length => "length",
        _ => "stop",
    }
}

fn answer_text(out: &RunOutput) -> &str {
    // NO_REPLY means "stay quiet": an empty answer rather than the marker.
    if out.silent {
        ""
    } else {
        &out.text
    }
}

pub async fn handle(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match prepare(&state, &caller, &headers, body).await {
        Ok(p) if p.stream => stream(state, p).await,
        Ok(p) => complete(state, p)
            .await
            .unwrap_or_else(IntoResponse::into_response),
        Err(e) => e.into_response(),
    }
}

struct Prepared {
    agent: ferroclaw_runtime::AgentEntry,
    model: String,
    session: SessionChoice,
    message: String,
    mode: ferroclaw_runtime::QueueMode,
    stream: bool,
    include_usage: bool,
}

async fn prepare(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Prepared, ApiError> {
    let req: ChatCompletionRequest = parse_body(body, SHAPE)?;
    let session = resolve_session(headers, caller, req.user.as_deref(), SHAPE)?;
    let who = caller.requester(session.user.as_deref());
    let agent = resolve_agent(state, req.model.as_deref(), headers, who, SHAPE).await?;
    let mode = resolve_queue_mode(state, headers, SHAPE)?;
    let message = agent_message(&req, session.ephemeral)?;
    Ok(Prepared {
        model: req
            .model
            .clone()
            .filter(|m| !m.trim().is_empty())
            .unwrap_or_else(|| format!("ferroclaw:{}", agent.id)),
        agent,
        session,
        message,
        mode,
        stream: req.stream,
        include_usage: req.stream_options.is_some_and(|o| o.include_usage),
    })
}

fn completion_id() -> String {
    format!("chatcmpl-{}", uuid::Uuid::new_v4().simple())
}

impl Prepared {
    fn target(&self) -> Result<Target<'_>, ApiError> {
        Ok(Target {
            agent: &self.agent,
            session_key: &self.session.key,
            user: self.session.user.as_deref(),
            ephemeral: self.session.ephemeral,
            message: &self.message,
            mode: self.mode,
            origin: Origin::Http,
        })
    }
}

async fn complete(state: Arc<AppState>, p: Prepared) -> Result<Response, ApiError> {
    let started = runs::start(&state, p.target()?).map_err(|e| ApiError::from_submit(&e))?;
    let (text, usage, stop) = match started {
        Started::Command(text) => (text, Usage::default(), StopReason::Stop),
        // Nobody watches a plain JSON request's events; a client that leaves mid-run
        // is noticed only by the connection, as with any non-streaming request.
        Started::Run(pending) => {
            match runs::drive(&state, pending, |_| {}, std::future::pending()).await {
                Ended::Done(Ok(out)) => (answer_text(&out).to_string(), out.usage, out.stop_reason),
                Ended::Done(Err(f)) => return Err(ApiError::from_failure(&f)),
                Ended::ClientGone => return Err(ApiError::internal("run abandoned")),
            }
        }
    };
    Ok(Json(json!({
        "id": completion_id(),
        "object": "chat.completion",
        "created": unix_now(),
        "model": p.model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": finish_reason(stop),
        }],
        "usage": usage_json(&usage),
    }))
    .into_response())
}

fn chunk_bytes(id: &str, model: &str, created: u64, delta: Value, finish: Option<&str>) -> Bytes {
    let v = json!({
        "id": id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    sse_data(None, &v.to_string())
}

async fn stream(state: Arc<AppState>, p: Prepared) -> Response {
    let (tx, rx) = mpsc::unbounded_channel();
    let id = completion_id();
    let created = unix_now();
    let chunk = {
        let (id, model) = (id.clone(), p.model.clone());
        move |delta: Value, finish: Option<&str>| chunk_bytes(&id, &model, created, delta, finish)
    };
    // The role chunk is queued before the run can emit a delta; if the runtime refuses,
    // the unread channel is dropped and the client gets a plain HTTP error status.
    let _ = tx.send(chunk(json!({"role": "assistant", "content": ""}), None));
    let started = match p
        .target()
        .and_then(|t| runs::start(&state, t).map_err(|e| ApiError::from_submit(&e)))
    {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    tokio::spawn(async move {
        let outcome = match started {
            Started::Command(text) => Ok((text, Usage::default(), StopReason::Stop)),
            Started::Run(pending) => {
                let mut streamed = false;
                let on_event = |event: RunEvent| {
                    if let EventKind::AssistantDelta { text } = event.kind {
                        streamed = true;
                        let _ = tx.send(chunk(json!({"content": text}), None));
                    }
                };
                let gone = tx.clone();
                match runs::drive(
                    &state,
                    pending,
                    on_event,
                    async move { gone.closed().await },
                )
                .await
                {
                    Ended::ClientGone => return,
                    Ended::Done(r) => r.map(|out| {
                        // Deltas already showed the text; an agent with streaming off
                        // produced none, so its answer goes out whole.
                        let text = if streamed {
                            String::new()
                        } else {
                            answer_text(&out).to_string()
                        };
                        (text, out.usage, out.stop_reason)
                    }),
                }
            }
        };
        match outcome {
            Ok((text, usage, stop)) => {
                if !text.is_empty() {
                    let _ = tx.send(chunk(json!({"content": text}), None));
                }
                let _ = tx.send(chunk(json!({}), Some(finish_reason(stop))));
                if p.include_usage {
                    let v = json!({
                        "id": id,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": p.model,
                        "choices": [],
                        "usage": usage_json(&usage),
                    });
                    let _ = tx.send(sse_data(None, &v.to_string()));
                }
            }
            Err(f) => {
                let err = ApiError::from_failure(&f);
                let _ = tx.send(sse_data(None, &err.body().to_string()));
            }
        }
        let _ = tx.send(sse_data(None, "[DONE]"));
    });
    sse_response(rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(messages: Value) -> ChatCompletionRequest {
        serde_json::from_value(json!({"messages": messages})).unwrap()
    }

    #[test]
    fn last_user_message_is_sent() {
        let r = req(json!([
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "1"},
            {"role": "user", "content": [{"type": "text", "text": "two"}]},
        ]));
        assert_eq!(agent_message(&r, false).unwrap(), "two");
        let eph = agent_message(&r, true).unwrap();
        assert!(eph.contains("[system] be brief") && eph.ends_with("two"));
        assert!(agent_message(&req(json!([{"role": "system", "content": "x"}])), false).is_err());
    }
}
