//! Dev-only test kit: a scripted LLM server speaking the OpenAI chat-completions
//! and Anthropic Messages wire formats (JSON and SSE), plus small helpers.
//!
//! Tests push [`Reply`] values onto a FIFO queue shared by both protocols; each
//! chat/messages request consumes one reply, rendered in the protocol of the
//! route it arrived on. Every parseable request is recorded for assertions.
// Test infrastructure only (a dev-dependency): a broken fixture should stop the test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod anthropic;
mod killable;
mod openai;

pub mod browser;
pub mod discord;
pub mod feishu;
pub mod mcp;
pub mod otlp;
pub mod pg;
pub mod slack;
pub mod telegram;
pub mod whatsapp;
pub mod zalo;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::Response;
use axum::routing::{get, post};
use axum::serve::ListenerExt as _;
use axum::Router;
use futures_util::stream::{self, BoxStream, StreamExt};
use serde_json::{json, Value};
use tokio::sync::{watch, Notify};

/// Which wire protocol a request arrived on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    OpenAi,
    Anthropic,
}

/// Name of the OpenAI message/delta field carrying reasoning text; servers differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasoningField {
    Reasoning,
    ReasoningContent,
}

/// One chat/messages request as the server received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// Header names are lower-case (as normalised by the HTTP stack).
    pub headers: Vec<(String, String)>,
    pub body: Value,
    pub protocol: Protocol,
}

impl RecordedRequest {
    /// First value of the header `name`, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    None,
    Cut(usize),
    Malformed,
    Hang(usize),
}

/// A scripted answer (builder). See the crate docs for the wire rendering.
#[derive(Debug, Clone)]
pub struct Reply {
    /// `Some((code, message))` for an error answer; everything else but
    /// `retry_after` and `delay` is then ignored.
    pub(crate) status: Option<(u16, String)>,
    pub(crate) text: Option<String>,
    pub(crate) calls: Vec<(String, String, Value)>,
    pub(crate) reasoning: Option<(String, ReasoningField)>,
    pub(crate) usage: Option<(u64, u64)>,
    pub(crate) cached: Option<u64>,
    pub(crate) retry_after: Option<String>,
    pub(crate) fault: Fault,
    pub(crate) delay: Option<Duration>,
    pub(crate) chunk: usize,
    pub(crate) finish: Option<String>,
    /// `(piece, times)`: the text is `piece` repeated, generated while sending.
    pub(crate) repeat: Option<(String, usize)>,
    /// Streamed repeated text goes out as one SSE event instead of one per piece.
    pub(crate) one_event: bool,
    /// Streaming: the wait before each event.
    pub(crate) pace: Option<Duration>,
}

impl Reply {
    fn empty() -> Reply {
        Reply {
            status: None,
            text: None,
            calls: Vec::new(),
            reasoning: None,
            usage: None,
            cached: None,
            retry_after: None,
            fault: Fault::None,
            delay: None,
            chunk: 4,
            finish: None,
            repeat: None,
            one_event: false,
            pace: None,
        }
    }

    pub fn text(text: impl Into<String>) -> Reply {
        Reply::empty().with_text(text)
    }

    pub fn tool_call(id: &str, name: &str, args: Value) -> Reply {
        Reply::tool_calls(vec![(id.to_string(), name.to_string(), args)])
    }

    /// Parallel calls `(id, name, args)`, emitted in this order.
    pub fn tool_calls(calls: Vec<(String, String, Value)>) -> Reply {
        Reply {
            calls,
            ..Reply::empty()
        }
    }

    /// A text reply of `piece` repeated `times`, produced while it is sent so that a
    /// reply of many megabytes never exists in memory here. Streamed, each repetition
    /// is one delta event. [`ScriptedLlm::repeated_bytes_sent`] counts what went out.
    pub fn repeated_text(piece: impl Into<String>, times: usize) -> Reply {
        Reply {
            repeat: Some((piece.into(), times)),
            ..Reply::empty()
        }
    }

    /// Streaming a [`Reply::repeated_text`]: all of it in a single SSE event (one
    /// endless `data:` line) rather than one event per piece.
    pub fn in_one_event(mut self) -> Reply {
        self.one_event = true;
        self
    }

    /// Text emitted before any tool calls.
    pub fn with_text(mut self, text: impl Into<String>) -> Reply {
        self.text = Some(text.into());
        self
    }

    pub fn with_reasoning(mut self, text: impl Into<String>, field: ReasoningField) -> Reply {
        self.reasoning = Some((text.into(), field));
        self
    }

    pub fn with_usage(mut self, input: u64, output: u64) -> Reply {
        self.usage = Some((input, output));
        self
    }

    /// Implies usage (0, 0) when `with_usage` was not called.
    pub fn with_cached_tokens(mut self, cached: u64) -> Reply {
        self.cached = Some(cached);
        self
    }

    /// An error answer in the protocol's error shape.
    pub fn status(code: u16, message: impl Into<String>) -> Reply {
        Reply {
            status: Some((code, message.into())),
            ..Reply::empty()
        }
    }

    /// Adds a `Retry-After` header, passed through verbatim.
    pub fn retry_after(mut self, value: impl Into<String>) -> Reply {
        self.retry_after = Some(value.into());
        self
    }

    /// Streaming: send `events` SSE events, then abort the connection (the
    /// chunked body is never terminated, so the client sees a transport error).
    /// Non-streaming: a 200 whose JSON body is cut at half its length.
    pub fn cut_after(mut self, events: usize) -> Reply {
        self.fault = Fault::Cut(events);
        self
    }

    /// Non-streaming: 200 with an invalid JSON body. Streaming: one `data:`
    /// line of invalid JSON after the first event, then the rest as normal.
    pub fn malformed(mut self) -> Reply {
        self.fault = Fault::Malformed;
        self
    }

    /// Streaming: send `events` events, then send nothing more until the
    /// client disconnects or the server shuts down. Non-streaming: headers,
    /// then no body until then.
    pub fn hang_after(mut self, events: usize) -> Reply {
        self.fault = Fault::Hang(events);
        self
    }

    /// Wait this long before sending the response headers.
    pub fn delay(mut self, d: Duration) -> Reply {
        self.delay = Some(d);
        self
    }

    /// Streaming: wait `d` before each event, so a long answer arrives slowly but
    /// steadily.
    pub fn pace(mut self, d: Duration) -> Reply {
        self.pace = Some(d);
        self
    }

    /// Text/reasoning delta size in chars (default 4, minimum 1).
    pub fn chunk_size(mut self, chars: usize) -> Reply {
        self.chunk = chars.max(1);
        self
    }

    pub fn finish_reason(mut self, reason: &str) -> Reply {
        self.finish = Some(reason.to_string());
        self
    }

    /// The OpenAI-style finish reason: the override, else `tool_calls`/`stop`.
    pub(crate) fn openai_finish(&self) -> String {
        match &self.finish {
            Some(f) => f.clone(),
            None if !self.calls.is_empty() => "tool_calls".to_string(),
            None => "stop".to_string(),
        }
    }

    pub(crate) fn usage_or_zero(&self) -> (u64, u64) {
        self.usage.unwrap_or((0, 0))
    }
}

/// Splits into pieces of `n` chars (never splitting a UTF-8 sequence).
pub(crate) fn split_chars(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    chars.chunks(n.max(1)).map(|c| c.iter().collect()).collect()
}

/// Tool-call argument fragments: always at least two, so clients are forced
/// to reassemble arguments rather than parse each fragment.
pub(crate) fn split_args(s: &str, n: usize) -> Vec<String> {
    let parts = split_chars(s, n);
    if parts.len() >= 2 {
        return parts;
    }
    let chars: Vec<char> = s.chars().collect();
    let mid = chars.len() / 2;
    vec![chars[..mid].iter().collect(), chars[mid..].iter().collect()]
}

struct Shared {
    queue: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<RecordedRequest>>,
    models: Mutex<Vec<String>>,
    request_added: Notify,
    shutdown_rx: watch::Receiver<bool>,
    next_id: AtomicU64,
    /// Bytes of repeated-text bodies handed to the HTTP stack so far.
    repeated_sent: Arc<AtomicU64>,
}

/// Locks ignoring poison: a panicking test thread must not cascade into
/// unrelated panics inside the server.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits until `check` holds (re-checked whenever `changed` is notified) or `timeout`
/// passes; whether it held.
pub(crate) async fn wait_until(
    changed: &tokio::sync::Notify,
    timeout: Duration,
    check: impl Fn() -> bool,
) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let notified = changed.notified();
        tokio::pin!(notified);
        // Registered before the check, so a change in between still wakes us.
        notified.as_mut().enable();
        if check() {
            return true;
        }
        tokio::select! {
            _ = notified => {}
            _ = tokio::time::sleep_until(deadline) => return check(),
        }
    }
}

impl Shared {
    /// Resolves once shutdown was requested or every handle was dropped.
    async fn stopped(&self) {
        let mut rx = self.shutdown_rx.clone();
        // Err means the sender (held by the handles) is gone: also a stop.
        let _ = rx.wait_for(|stop| *stop).await;
    }
}

/// Held only by user handles (never by the server), so its drop marks the
/// moment the last handle goes away and the server must stop.
struct Guard {
    shutdown_tx: watch::Sender<bool>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.shutdown_tx.send_replace(true);
    }
}

/// Handle to a running scripted LLM server. Cheap to clone.
#[derive(Clone)]
pub struct ScriptedLlm {
    shared: Arc<Shared>,
    guard: Arc<Guard>,
    addr: SocketAddr,
}

impl std::fmt::Debug for ScriptedLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedLlm")
            .field("addr", &self.addr)
            .field("pending", &self.pending())
            .finish()
    }
}

impl ScriptedLlm {
    /// Binds 127.0.0.1 on a random port and serves in a background task.
    pub async fn start() -> std::io::Result<ScriptedLlm> {
        ScriptedLlm::start_on(0).await
    }

    /// Serves on 127.0.0.1:`port`, e.g. where a local model server usually listens.
    pub async fn start_on(port: u16) -> std::io::Result<ScriptedLlm> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        let addr = listener.local_addr()?;
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            queue: Mutex::new(VecDeque::new()),
            requests: Mutex::new(Vec::new()),
            models: Mutex::new(vec!["scripted-model".to_string()]),
            request_added: Notify::new(),
            shutdown_rx,
            next_id: AtomicU64::new(1),
            repeated_sent: Arc::new(AtomicU64::new(0)),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(openai_chat))
            .route("/chat/completions", post(openai_chat))
            .route("/v1/messages", post(anthropic_messages))
            .route("/v1/models", get(models))
            .route("/models", get(models))
            // Tests may send large attachments; the default 2 MB cap would
            // turn them into confusing 413s.
            .layer(DefaultBodyLimit::disable())
            .with_state(shared.clone());
        let stop = shared.clone();
        tokio::spawn(async move {
            // Graceful shutdown closes idle keep-alive connections, so pooled
            // clients see the server as gone; hanging streams end themselves
            // on the same signal (see `body_stream`).
            // Small SSE writes would otherwise wait on Nagle + delayed ACK (~40 ms each),
            // which is an artefact of the test server, not of the client under test.
            let listener = listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.stopped().await })
                .await;
        });
        Ok(ScriptedLlm {
            shared,
            guard: Arc::new(Guard { shutdown_tx }),
            addr,
        })
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn openai_base_url(&self) -> String {
        format!("{}/v1", self.base_url())
    }

    pub fn anthropic_base_url(&self) -> String {
        self.base_url()
    }

    pub fn push(&self, reply: Reply) {
        lock(&self.shared.queue).push_back(reply);
    }

    pub fn pending(&self) -> usize {
        lock(&self.shared.queue).len()
    }

    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// Resolves once at least `n` chat/messages requests have been recorded.
    pub async fn wait_for_requests(&self, n: usize) {
        loop {
            let notified = self.shared.request_added.notified();
            tokio::pin!(notified);
            // Register before checking so a request recorded in between
            // still wakes us.
            notified.as_mut().enable();
            if lock(&self.shared.requests).len() >= n {
                return;
            }
            notified.await;
        }
    }

    /// Bytes of [`Reply::repeated_text`] bodies handed to the HTTP stack so far (the
    /// stack pulls more only as the client reads, up to the socket buffers).
    pub fn repeated_bytes_sent(&self) -> u64 {
        self.shared.repeated_sent.load(Ordering::SeqCst)
    }

    pub fn set_models(&self, ids: Vec<String>) {
        *lock(&self.shared.models) = ids;
    }

    /// Stops accepting connections and ends hanging streams.
    pub fn shutdown(&self) {
        self.guard.shutdown_tx.send_replace(true);
    }
}

/// A fresh temporary directory for `FERROCLAW_HOME`, removed on drop.
pub fn temp_home() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("ferroclaw-home-")
        .tempdir()
        .expect("cannot create a temporary FERROCLAW_HOME")
}

/// The session id a home's index holds for `key` of `agent`, read from the database as
/// another process would (tests of the binary look at what it left behind).
pub fn session_id_in(home: &std::path::Path, agent: &str, key: &str) -> Option<String> {
    let conn = rusqlite::Connection::open_with_flags(
        home.join("data/ferroclaw.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .ok()?;
    conn.busy_timeout(std::time::Duration::from_secs(10)).ok()?;
    conn.query_row(
        "SELECT session_id FROM sessions WHERE agent_id = ?1 AND key = ?2",
        [agent, key],
        |r| r.get(0),
    )
    .ok()
}

async fn models(State(shared): State<Arc<Shared>>) -> Response {
    let data: Vec<Value> = lock(&shared.models)
        .iter()
        .map(|id| json!({"id": id, "object": "model", "owned_by": "scripted"}))
        .collect();
    json_response(StatusCode::OK, &json!({"object": "list", "data": data}))
}

async fn openai_chat(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    handle(shared, Protocol::OpenAi, method, uri, headers, body).await
}

async fn anthropic_messages(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    handle(shared, Protocol::Anthropic, method, uri, headers, body).await
}

fn error_body(protocol: Protocol, code: u16, message: &str) -> Value {
    match protocol {
        Protocol::OpenAi => openai::error_body(code, message),
        Protocol::Anthropic => anthropic::error_body(code, message),
    }
}

fn json_response(status: StatusCode, value: &Value) -> Response {
    raw_response(status, "application/json", Body::from(value.to_string()))
}

fn raw_response(status: StatusCode, content_type: &'static str, body: Body) -> Response {
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// Everything a wire renderer needs besides the reply itself.
pub(crate) struct Meta {
    pub model: String,
    pub id: String,
    pub created: u64,
}

async fn handle(
    shared: Arc<Shared>,
    protocol: Protocol,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            let msg = format!("scripted LLM: request body is not JSON: {e}");
            return json_response(StatusCode::BAD_REQUEST, &error_body(protocol, 400, &msg));
        }
    };
    let stream = body.get("stream").and_then(Value::as_bool) == Some(true);
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("scripted-model")
        .to_string();
    let recorded = RecordedRequest {
        method: method.to_string(),
        path: uri.path().to_string(),
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body,
        protocol,
    };
    lock(&shared.requests).push(recorded);
    shared.request_added.notify_waiters();

    let Some(reply) = lock(&shared.queue).pop_front() else {
        return json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &error_body(protocol, 500, "scripted LLM: no reply queued"),
        );
    };

    if let Some(d) = reply.delay {
        tokio::select! {
            _ = tokio::time::sleep(d) => {}
            _ = shared.stopped() => {}
        }
    }

    let mut resp = render(&shared, protocol, stream, &reply, model);
    if let Some(value) = &reply.retry_after {
        match HeaderValue::from_str(value) {
            Ok(v) => {
                resp.headers_mut().insert(header::RETRY_AFTER, v);
            }
            Err(_) => {
                let msg = format!("scripted LLM: invalid Retry-After value {value:?}");
                return json_response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &error_body(protocol, 500, &msg),
                );
            }
        }
    }
    resp
}

fn render(
    shared: &Arc<Shared>,
    protocol: Protocol,
    stream: bool,
    reply: &Reply,
    model: String,
) -> Response {
    if let Some((code, message)) = &reply.status {
        let status = StatusCode::from_u16(*code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return json_response(status, &error_body(protocol, *code, message));
    }
    let n = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let meta = Meta {
        model,
        id: match protocol {
            Protocol::OpenAi => format!("chatcmpl-scripted-{n}"),
            Protocol::Anthropic => format!("msg_scripted_{n}"),
        },
        created: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    };

    if let Some((piece, times)) = &reply.repeat {
        return render_repeated(shared, protocol, stream, reply, &meta, piece, *times);
    }

    if stream {
        let events = match protocol {
            Protocol::OpenAi => openai::sse_events(reply, &meta),
            Protocol::Anthropic => anthropic::sse_events(reply, &meta),
        };
        let malformed = match protocol {
            Protocol::OpenAi => "data: {\"choices\": [{\"delta\": {not json\n\n",
            Protocol::Anthropic => "event: content_block_delta\ndata: {\"type\": not json\n\n",
        };
        let body = body_stream(shared, events, reply.fault, malformed, reply.pace);
        let mut resp = raw_response(StatusCode::OK, "text/event-stream", body);
        resp.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        return resp;
    }

    let full = match protocol {
        Protocol::OpenAi => openai::json_body(reply, &meta),
        Protocol::Anthropic => anthropic::json_body(reply, &meta),
    }
    .to_string();
    let body = match reply.fault {
        Fault::None => Body::from(full),
        Fault::Cut(_) => {
            let chars: Vec<char> = full.chars().collect();
            Body::from(chars[..chars.len() / 2].iter().collect::<String>())
        }
        Fault::Malformed => Body::from("{\"id\": \"scripted\", this is not json"),
        Fault::Hang(_) => body_stream(shared, Vec::new(), Fault::Hang(0), "", None),
    };
    raw_response(StatusCode::OK, "application/json", body)
}

/// Stands in for the repeated text while the body is rendered; then replaced piecewise.
const REPEAT_MARKER: &str = "@@scripted-repeat@@";

fn render_repeated(
    shared: &Arc<Shared>,
    protocol: Protocol,
    stream: bool,
    reply: &Reply,
    meta: &Meta,
    piece: &str,
    times: usize,
) -> Response {
    let mut template = reply.clone();
    template.repeat = None;
    template.text = Some(REPEAT_MARKER.to_string());
    template.chunk = usize::MAX;
    // The piece as it appears inside a JSON string.
    let escaped = serde_json::to_string(piece).unwrap_or_default();
    let escaped = escaped[1..escaped.len().saturating_sub(1)].to_string();
    let parts: Vec<String> = if stream {
        match protocol {
            Protocol::OpenAi => openai::sse_events(&template, meta),
            Protocol::Anthropic => anthropic::sse_events(&template, meta),
        }
    } else {
        vec![match protocol {
            Protocol::OpenAi => openai::json_body(&template, meta),
            Protocol::Anthropic => anthropic::json_body(&template, meta),
        }
        .to_string()]
    };
    let at = parts
        .iter()
        .position(|p| p.contains(REPEAT_MARKER))
        .unwrap_or(0);
    let (head, tail) = parts[at].split_once(REPEAT_MARKER).unwrap_or(("", ""));
    let (head, tail) = (head.to_string(), tail.to_string());
    let middle: BoxStream<'static, String> = if stream && !reply.one_event {
        // One whole event per repetition.
        stream::iter(0..times)
            .map(move |_| format!("{head}{escaped}{tail}"))
            .boxed()
    } else {
        stream::once(async move { head })
            .chain(stream::iter(0..times).map(move |_| escaped.clone()))
            .chain(stream::once(async move { tail }))
            .boxed()
    };
    let before = stream::iter(parts[..at].to_vec());
    let after = stream::iter(parts[at + 1..].to_vec());
    let counter = shared.repeated_sent.clone();
    let body = before.chain(middle).chain(after).map(move |s| {
        counter.fetch_add(s.len() as u64, Ordering::SeqCst);
        Ok::<_, std::io::Error>(s)
    });
    let content_type = if stream {
        "text/event-stream"
    } else {
        "application/json"
    };
    raw_response(StatusCode::OK, content_type, Body::from_stream(body))
}

/// Builds the SSE body, applying the fault. An `Err` item makes hyper drop
/// the connection without the terminating chunk: an abrupt close.
fn body_stream(
    shared: &Arc<Shared>,
    events: Vec<String>,
    fault: Fault,
    malformed: &str,
    pace: Option<Duration>,
) -> Body {
    type Item = Result<String, std::io::Error>;
    let abort = || std::io::Error::other("scripted LLM: connection cut");
    let s: BoxStream<'static, Item> = match fault {
        Fault::None => stream::iter(events.into_iter().map(Ok)).boxed(),
        Fault::Malformed => {
            let mut events = events;
            let at = events.len().min(1);
            events.insert(at, malformed.to_string());
            stream::iter(events.into_iter().map(Ok)).boxed()
        }
        Fault::Cut(n) => stream::iter(events.into_iter().take(n).map(Ok))
            .chain(stream::once(async move {
                // hyper drops buffered-but-unflushed bytes when the body
                // errors; returning Pending once makes its connection loop
                // flush the `n` events (and the head) before the abort.
                tokio::task::yield_now().await;
                Err(abort())
            }))
            .boxed(),
        Fault::Hang(n) => {
            let shared = shared.clone();
            stream::iter(events.into_iter().take(n).map(Ok))
                .chain(stream::once(async move {
                    shared.stopped().await;
                    Err(abort())
                }))
                .boxed()
        }
    };
    let s = match pace {
        Some(d) => s
            .then(move |item| async move {
                tokio::time::sleep(d).await;
                item
            })
            .boxed(),
        None => s,
    };
    Body::from_stream(s)
}
