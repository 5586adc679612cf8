//! HTTP surface: `POST /v1/chat/completions`, `GET /v1/models`, `GET /health`
//! (also without the `/v1` prefix). Errors are OpenAI-shaped:
//! `{"error": {"message", "type", "code"}}`.
//!
//! Runs are batch (the reasoning must be complete to be parsed); a client asking for
//! `stream: true` gets the finished answer as one SSE chunk sequence, so streaming
//! OpenAI clients (ferroclaw, OpenClaw) can use the executor as a provider unchanged.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use ferroclaw_types::{AssistantMessage, ContentBlock, Message, StopReason, Usage};
use serde_json::{json, Value};

use crate::error::{ErrorCode, ExecError};
use crate::errors_log::Entry;
use crate::run::{Executor, RunOutcome, RunRequest};

pub struct AppState {
    pub exec: Executor,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error(
        "refusing to listen on {addr} without http_server.api_key: whoever reaches this \
         address could run gateway tools. Set an api_key or bind to 127.0.0.1"
    )]
    InsecureBind { addr: String },
    #[error("invalid http_server.bind `{0}`")]
    BadBind(String),
    #[error("server error: {0}")]
    Io(#[from] std::io::Error),
}

pub fn router(state: Arc<AppState>) -> Router {
    let timeouts = crate::listener::Timeouts::of(&state.exec.config().http_server);
    Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/chat/completions", post(chat))
        .route("/v1/models", get(models))
        .route("/models", get(models))
        .route("/health", get(health))
        .fallback(not_found)
        .layer(axum::middleware::from_fn(move |req, next| {
            crate::listener::deadlines(timeouts, req, next)
        }))
        .with_state(state)
}

/// A bound, not yet serving, executor.
pub struct Server {
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    addr: SocketAddr,
    shutdown_timeout: Duration,
}

impl Server {
    /// Binds `http_server.bind:port` (`port` overrides the config; 0 picks a free one).
    pub async fn bind(exec: Executor, port: Option<u16>) -> Result<Server, ServeError> {
        let cfg = exec.config();
        let host = cfg.http_server.bind.trim().to_string();
        let ip: IpAddr = if host == "localhost" {
            IpAddr::from([127, 0, 0, 1])
        } else {
            host.parse()
                .map_err(|_| ServeError::BadBind(host.clone()))?
        };
        let addr = SocketAddr::new(ip, port.unwrap_or(cfg.http_server.port));
        if !ip.is_loopback() && cfg.http_server.api_key.trim().is_empty() {
            return Err(ServeError::InsecureBind {
                addr: addr.to_string(),
            });
        }
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind {
                addr: addr.to_string(),
                source,
            })?;
        let addr = listener.local_addr()?;
        let shutdown_timeout = Duration::from_secs_f64(cfg.http_server.shutdown_timeout_seconds);
        Ok(Server {
            listener,
            state: Arc::new(AppState { exec }),
            addr,
            shutdown_timeout,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn state(&self) -> &Arc<AppState> {
        &self.state
    }

    /// Serves until `shutdown` resolves, then lets running requests finish for at most
    /// `http_server.shutdown_timeout_seconds`.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let events_state = self.state.clone();
        events_state.exec.events().info(
            "http_server_start",
            json!({"addr": self.addr.to_string(), "upstream": events_state.exec.config().upstream_base(), "gateway": events_state.exec.config().executor.openclaw_gateway_url}),
        );
        let timeouts = crate::listener::Timeouts::of(&self.state.exec.config().http_server);
        let stop = tokio_util::sync::CancellationToken::new();
        let serve = crate::listener::serve(
            self.listener,
            router(self.state.clone()),
            timeouts,
            stop.clone(),
        );
        tokio::pin!(serve);
        let grace = self.shutdown_timeout;
        tokio::select! {
            _ = serve.as_mut() => {}
            _ = shutdown => {
                // Running requests get the grace period to finish, then are dropped.
                stop.cancel();
                let _ = tokio::time::timeout(grace, serve).await;
            }
        }
        let result: std::io::Result<()> = Ok(());
        events_state
            .exec
            .events()
            .info("http_server_stopped", json!({}));
        result
    }
}

fn json_response(status: u16, body: &Value) -> Response {
    let mut resp = Response::new(Body::from(body.to_string()));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

fn error_response(e: &ExecError) -> Response {
    json_response(e.code.status(), &e.body())
}

/// When `http_server.api_key` is set, requests must carry it as a bearer token.
fn authorize(state: &AppState, headers: &HeaderMap) -> Result<(), ExecError> {
    let key = state.exec.config().http_server.api_key.trim();
    if key.is_empty() {
        return Ok(());
    }
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .unwrap_or_default()
        .trim();
    if constant_time_eq(given.as_bytes(), key.as_bytes()) {
        Ok(())
    } else {
        Err(ExecError::new(
            ErrorCode::Unauthorized,
            "missing or wrong bearer token",
        ))
    }
}

/// Compares without an early exit, so response timing does not leak the key.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= usize::from(x ^ y);
    }
    diff == 0
}

async fn not_found() -> Response {
    error_response(&ExecError::new(ErrorCode::NotFound, "no such route"))
}

async fn health(State(state): State<Arc<AppState>>) -> Response {
    let cfg = state.exec.config();
    let gateway = if cfg.gateway_token().is_some() {
        "configured"
    } else {
        "configured (no token)"
    };
    let ts = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    match state.exec.upstream_health().await {
        Ok(_) => json_response(
            200,
            &json!({"status": "ok", "gpt_oss": "connected", "gateway": gateway, "timestamp": ts}),
        ),
        Err(e) => {
            state.exec.events().warn(
                "health_upstream_unreachable",
                json!({"error": e, "upstream": cfg.upstream_base()}),
            );
            json_response(
                503,
                &json!({"status": "degraded", "gpt_oss": "unreachable", "gateway": gateway, "error": e, "timestamp": ts}),
            )
        }
    }
}

async fn models(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    if let Err(e) = authorize(&state, &headers) {
        return error_response(&e);
    }
    let created = unix_now();
    let data: Vec<Value> = state
        .exec
        .config()
        .executor
        .served_models
        .iter()
        .filter(|m| !m.trim().is_empty())
        .map(|id| json!({"id": id, "object": "model", "created": created, "owned_by": "ferroclaw-executor"}))
        .collect();
    json_response(200, &json!({"object": "list", "data": data}))
}

async fn chat(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if let Err(e) = authorize(&state, &headers) {
        return error_response(&e);
    }
    let parsed = body
        .map_err(|e| {
            ExecError::new(
                ErrorCode::InvalidRequest,
                format!("cannot read the body: {e}"),
            )
        })
        .and_then(|b| parse_request(&b, &state.exec.config().executor.served_models));
    let (model, stream, req) = match parsed {
        Ok(p) => p,
        Err(e) => {
            state.exec.events().warn(
                "request_rejected",
                json!({"code": e.code.as_str(), "error": e.message}),
            );
            state.exec.record_error(Entry {
                component: "http",
                error: &format!("{}: {}", e.code.as_str(), e.message),
                attempted_fix: "none: the client must fix the request",
                status: "rejected",
                run_id: None,
            });
            return error_response(&e);
        }
    };
    match state.exec.run(req).await {
        Ok(outcome) if stream => sse_response(&outcome, &model),
        Ok(outcome) => json_response(200, &completion_body(&outcome, &model)),
        Err(e) => error_response(&e),
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn completion_id() -> String {
    format!("chatcmpl-{}", uuid::Uuid::new_v4().simple())
}

fn usage_json(o: &RunOutcome) -> Value {
    json!({
        "prompt_tokens": o.prompt_tokens,
        "completion_tokens": o.completion_tokens,
        "total_tokens": o.total_tokens,
    })
}

fn metadata_json(o: &RunOutcome) -> Value {
    json!({
        "run_id": o.run_id,
        "iterations": o.iterations,
        "tools_called": o.tools_called,
        "total_tool_execution_time_ms": o.total_tool_execution_time_ms,
        "context_usage_percent": o.context_usage_percent,
    })
}

pub fn completion_body(o: &RunOutcome, model: &str) -> Value {
    let mut message = json!({"role": "assistant", "content": o.content});
    if !o.reasoning.is_empty() {
        message["reasoning"] = Value::String(o.reasoning.clone());
    }
    json!({
        "id": completion_id(),
        "object": "chat.completion",
        "created": unix_now(),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": o.finish_reason}],
        "usage": usage_json(o),
        "executor_metadata": metadata_json(o),
    })
}

fn sse_response(o: &RunOutcome, model: &str) -> Response {
    let id = completion_id();
    let created = unix_now();
    let chunk = |choices: Value, extra: Option<(&str, Value)>| {
        let mut v = json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model, "choices": choices});
        if let Some((k, x)) = extra {
            v[k] = x;
        }
        format!("data: {v}\n\n")
    };
    let mut delta = json!({"role": "assistant", "content": o.content});
    if !o.reasoning.is_empty() {
        delta["reasoning"] = Value::String(o.reasoning.clone());
    }
    let mut body = chunk(
        json!([{"index": 0, "delta": delta, "finish_reason": null}]),
        None,
    );
    let mut last = json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
        "choices": [{"index": 0, "delta": {}, "finish_reason": o.finish_reason}]});
    last["usage"] = usage_json(o);
    last["executor_metadata"] = metadata_json(o);
    body.push_str(&format!("data: {last}\n\n"));
    body.push_str("data: [DONE]\n\n");
    let mut resp = Response::new(Body::from(body));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

fn invalid(msg: impl Into<String>) -> ExecError {
    ExecError::new(ErrorCode::InvalidRequest, msg)
}

/// Validates an OpenAI chat request: `(model, stream, run request)`.
pub fn parse_request(
    body: &[u8],
    served: &[String],
) -> Result<(String, bool, RunRequest), ExecError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| invalid(format!("the body is not valid JSON: {e}")))?;
    let Some(obj) = v.as_object() else {
        return Err(invalid("the body must be a JSON object"));
    };
    let model = match obj.get("model") {
        Some(Value::String(m)) if !m.trim().is_empty() => m.trim().to_string(),
        Some(_) => return Err(invalid("`model` must be a non-empty string")),
        None => return Err(invalid("`model` is required")),
    };
    let messages = match obj.get("messages") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        Some(Value::Array(_)) => return Err(invalid("`messages` must not be empty")),
        Some(_) => return Err(invalid("`messages` must be an array")),
        None => return Err(invalid("`messages` is required")),
    };
    // Accept `provider/model` spellings some clients send.
    let bare = model.rsplit('/').next().unwrap_or(&model);
    if !served.iter().any(|s| s == &model || s == bare) {
        return Err(ExecError::new(
            ErrorCode::ModelNotFound,
            format!(
                "the model `{model}` does not exist; this executor serves: {}",
                served.join(", ")
            ),
        ));
    }
    let (system, messages) = convert_messages(messages)?;
    let num = |key: &str| -> Result<Option<f64>, ExecError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(_) => Err(invalid(format!("`{key}` must be a number"))),
        }
    };
    let temperature = num("temperature")?;
    if temperature.is_some_and(|t| !(0.0..=2.0).contains(&t)) {
        return Err(invalid("`temperature` must be within 0..2"));
    }
    let top_p = num("top_p")?;
    if top_p.is_some_and(|t| !(0.0..=1.0).contains(&t)) {
        return Err(invalid("`top_p` must be within 0..1"));
    }
    let max_tokens = match num("max_completion_tokens")?.or(num("max_tokens")?) {
        None => None,
        Some(n) if n >= 1.0 && n.fract() == 0.0 && n <= f64::from(u32::MAX) => Some(n as u32),
        Some(_) => return Err(invalid("`max_tokens` must be a positive integer")),
    };
    let timeout = match num("timeout")? {
        None => None,
        Some(t) if t > 0.0 && t.is_finite() && t <= 86_400.0 => Some(Duration::from_secs_f64(t)),
        Some(_) => return Err(invalid("`timeout` must be a positive number of seconds")),
    };
    let stream = match obj.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(invalid("`stream` must be a boolean")),
    };
    Ok((
        model,
        stream,
        RunRequest {
            system,
            messages,
            temperature: temperature.map(|t| t as f32),
            top_p: top_p.map(|t| t as f32),
            max_tokens,
            timeout,
        },
    ))
}

/// OpenAI messages → the executor's context. The executor runs its own tools, so a
/// client's earlier tool calls and results become plain text: that keeps the context
/// valid for the upstream whatever call ids the client used.
fn convert_messages(raw: &[Value]) -> Result<(Option<String>, Vec<Message>), ExecError> {
    let mut system = Vec::new();
    let mut out = Vec::new();
    for (i, m) in raw.iter().enumerate() {
        let Some(obj) = m.as_object() else {
            return Err(invalid(format!("messages[{i}] must be an object")));
        };
        let Some(role) = obj.get("role").and_then(Value::as_str) else {
            return Err(invalid(format!("messages[{i}].role is required")));
        };
        let text = content_text(obj.get("content")).ok_or_else(|| {
            invalid(format!(
                "messages[{i}].content must be a string or an array of parts"
            ))
        })?;
        match role {
            "system" | "developer" => system.push(text),
            "user" => out.push(Message::user(text)),
            "assistant" => {
                let mut t = text;
                for call in obj
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let f = call.get("function").unwrap_or(call);
                    let name = f.get("name").and_then(Value::as_str).unwrap_or("tool");
                    let args = f.get("arguments").map(|a| match a {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    });
                    t.push_str(&format!(
                        "\n[called {name} with {}]",
                        args.unwrap_or_else(|| "{}".into())
                    ));
                }
                if !t.trim().is_empty() {
                    out.push(assistant_text(t.trim().to_string()));
                }
            }
            "tool" | "function" => {
                let label = obj
                    .get("name")
                    .or_else(|| obj.get("tool_call_id"))
                    .and_then(Value::as_str)
                    .unwrap_or("tool");
                out.push(Message::user(format!("[TOOL_RESULT: {label}]\n{text}")));
            }
            other => {
                return Err(invalid(format!(
                    "messages[{i}].role `{other}` is not one of system, developer, user, assistant, tool"
                )))
            }
        }
    }
    if !out.iter().any(|m| matches!(m, Message::User(_))) {
        return Err(invalid("`messages` must contain at least one user message"));
    }
    let system = system.join("\n\n");
    Ok(((!system.trim().is_empty()).then_some(system), out))
}

fn assistant_text(text: String) -> Message {
    Message::Assistant(AssistantMessage {
        content: vec![ContentBlock::text(text)],
        provider: String::new(),
        model: String::new(),
        usage: Usage::default(),
        stop_reason: StopReason::Stop,
        error_message: None,
        timestamp: ferroclaw_types::now_millis(),
    })
}

/// `None` for a content of the wrong type; parts other than text are skipped.
fn content_text(v: Option<&Value>) -> Option<String> {
    match v {
        None | Some(Value::Null) => Some(String::new()),
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            for p in parts {
                match p {
                    Value::String(s) => texts.push(s.clone()),
                    Value::Object(o) => {
                        if let Some(t) = o.get("text").and_then(Value::as_str) {
                            texts.push(t.to_string());
                        }
                    }
                    _ => return None,
                }
            }
            Some(texts.join("\n"))
        }
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served() -> Vec<String> {
        vec!["gpt-oss".into(), "executor".into()]
    }

    fn code(body: &str) -> ErrorCode {
        parse_request(body.as_bytes(), &served()).unwrap_err().code
    }

    #[test]
    fn request_validation() {
        assert_eq!(code("{"), ErrorCode::InvalidRequest);
        assert_eq!(code("[]"), ErrorCode::InvalidRequest);
        assert_eq!(
            code(r#"{"messages":[{"role":"user","content":"x"}]}"#),
            ErrorCode::InvalidRequest
        );
        assert_eq!(code(r#"{"model":"gpt-oss"}"#), ErrorCode::InvalidRequest);
        assert_eq!(
            code(r#"{"model":"gpt-oss","messages":[]}"#),
            ErrorCode::InvalidRequest
        );
        assert_eq!(
            code(r#"{"model":"gpt-oss","messages":[{"role":"wizard","content":"x"}]}"#),
            ErrorCode::InvalidRequest
        );
        assert_eq!(
            code(r#"{"model":"gpt-oss","messages":[{"role":"system","content":"x"}]}"#),
            ErrorCode::InvalidRequest
        );
        assert_eq!(
            code(
                r#"{"model":"gpt-oss","messages":[{"role":"user","content":"x"}],"temperature":"hot"}"#
            ),
            ErrorCode::InvalidRequest
        );
        assert_eq!(
            code(r#"{"model":"gpt-5","messages":[{"role":"user","content":"x"}]}"#),
            ErrorCode::ModelNotFound
        );
        assert_eq!(ErrorCode::ModelNotFound.status(), 404);
    }

    #[test]
    fn request_conversion() {
        let body = r#"{"model":"gpt-oss-executor/executor","stream":true,"max_tokens":50,"timeout":2,
          "messages":[{"role":"system","content":"be brief"},
            {"role":"user","content":[{"type":"text","text":"hi"}]},
            {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"{\"path\":\"a\"}"}}]},
            {"role":"tool","tool_call_id":"c1","content":"data"}]}"#;
        let (model, stream, req) = parse_request(body.as_bytes(), &served()).unwrap();
        assert_eq!(model, "gpt-oss-executor/executor");
        assert!(stream);
        assert_eq!(req.system.as_deref(), Some("be brief"));
        assert_eq!(req.max_tokens, Some(50));
        assert_eq!(req.timeout, Some(Duration::from_secs(2)));
        assert_eq!(req.messages.len(), 3);
        assert_eq!(req.messages[0].text(), "hi");
        assert!(req.messages[1]
            .text()
            .contains(r#"[called read with {"path":"a"}]"#));
        assert_eq!(req.messages[2].text(), "[TOOL_RESULT: c1]\ndata");
    }

    #[test]
    fn constant_time_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
    }
}
