//! One WebSocket client: the read loop, the bounded send buffer, per-connection event
//! `seq`, keep-alive pings, the `connect` handshake, role checks and the forwarding of
//! exec approval events to operators.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::ws::{CloseFrame, Message, WebSocket};
use serde_json::{json, Value};
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::frames::{self, str_param, RequestFrame};
use super::{methods, MAX_FRAME_BYTES, PING_INTERVAL, SEND_BUFFER};
use crate::auth::{Role, APPROVAL_EVENTS_ROLE, EVENTS};
use crate::conn_limit::ConnPermit;
use crate::error::{WsCode, WsError};
use crate::state::AppState;

/// Who is on the other end, once `connect` succeeded.
#[derive(Debug, Clone)]
pub struct ConnAuth {
    pub role: Role,
    pub user_id: Option<String>,
    /// 3, or 4 for today's OpenClaw clients (its `agent` method, `tick` events).
    pub protocol: u64,
}

impl ConnAuth {
    /// Who asks, for the access rules of users' agents.
    pub fn requester(&self) -> ferroclaw_runtime::Requester<'_> {
        ferroclaw_runtime::Requester {
            user: self.user_id.as_deref(),
            admin: self.role == Role::Admin && self.user_id.is_none(),
        }
    }
}

struct Out {
    seq: u64,
    tx: mpsc::Sender<Message>,
}

pub struct Conn {
    pub id: String,
    pub state: Arc<AppState>,
    out: Mutex<Out>,
    /// Cancelled to drop the client (send buffer full, socket gone).
    pub closed: CancellationToken,
    auth: Mutex<Option<ConnAuth>>,
    /// Sessions watched (`sessions.subscribe`) and runs started here.
    pub watching: super::watch::Watching,
    /// What a protocol 4 client's device signs.
    challenge: super::v4::Challenge,
}

impl Conn {
    fn new(state: Arc<AppState>, tx: mpsc::Sender<Message>) -> Self {
        Conn {
            id: uuid::Uuid::new_v4().to_string(),
            state,
            out: Mutex::new(Out { seq: 0, tx }),
            closed: CancellationToken::new(),
            auth: Mutex::new(None),
            watching: Default::default(),
            challenge: super::v4::Challenge::new(),
        }
    }

    /// A frame outside the numbered events (the connect challenge).
    fn send_raw(&self, text: String) {
        let out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        self.push(&out, text);
    }

    pub fn auth(&self) -> Option<ConnAuth> {
        self.auth.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Queues a frame without waiting. A full buffer means the client cannot keep up:
    /// it is dropped rather than allowed to slow the runs that feed it.
    fn push(&self, out: &Out, text: String) -> bool {
        match out.tx.try_send(Message::Text(text.into())) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                if !self.closed.is_cancelled() {
                    tracing::warn!(conn = %self.id, "WebSocket client too slow: send buffer full, dropping it");
                    self.state.metrics.ws_slow_client();
                    self.closed.cancel();
                }
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }

    pub fn send_ok(&self, id: &Value, payload: Value) {
        let out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        self.push(&out, frames::res_ok(id, payload));
    }

    pub fn send_err(&self, id: &Value, err: &WsError) {
        let out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        self.push(&out, frames::res_err(id, err));
    }

    /// Sends an event with the next `seq`. Numbering and queueing happen under one lock,
    /// so the client sees `seq` strictly increasing.
    pub fn send_event(&self, event: &str, payload: &Value) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        out.seq += 1;
        let text = frames::event(event, payload, out.seq);
        self.push(&out, text);
    }
}

/// Runs one client until it leaves, is dropped, or the gateway closes.
pub async fn serve(mut socket: WebSocket, state: Arc<AppState>, permit: ConnPermit) {
    let (tx, mut rx) = mpsc::channel::<Message>(SEND_BUFFER);
    let conn = Arc::new(Conn::new(state.clone(), tx));
    state.metrics.ws_opened();
    tracing::debug!(conn = %conn.id, "WebSocket connected");

    let mut ping =
        tokio::time::interval_at(tokio::time::Instant::now() + PING_INTERVAL, PING_INTERVAL);
    // Subscribed before `connect` so nothing published after the handshake is missed;
    // each event is checked against the role the connection has when it arrives.
    let mut approvals = state
        .runtime
        .services()
        .map(|s| s.exec.approvals.subscribe());
    // Nobody holds a connection open without a credential for longer than this.
    let connect_limit = state.config.limits.connect_timeout;
    let connect_deadline = tokio::time::sleep(connect_limit);
    tokio::pin!(connect_deadline);
    // Protocol 4 clients wait for this before they connect; older ones ignore it.
    conn.send_raw(conn.challenge.frame());
    let mut told_shutdown = state.shutting_down.is_cancelled();
    if told_shutdown {
        conn.send_event("shutdown", &json!({"reason": "gateway shutting down"}));
    }
    loop {
        tokio::select! {
            biased;
            _ = conn.closed.cancelled() => break,
            _ = state.closing.cancelled() => {
                // Whatever was queued (final answers of turns that just ended) goes first.
                while let Ok(msg) = rx.try_recv() {
                    if socket.send(msg).await.is_err() {
                        break;
                    }
                }
                let _ = socket.send(Message::Close(Some(CloseFrame { code: 1001, reason: "gateway shutting down".into() }))).await;
                break;
            }
            _ = state.shutting_down.cancelled(), if !told_shutdown => {
                told_shutdown = true;
                let grace = u64::try_from(state.config.shutdown_grace.as_millis()).unwrap_or(u64::MAX);
                conn.send_event("shutdown", &json!({"reason": "gateway shutting down", "graceMs": grace}));
            }
            Some(msg) = rx.recv() => {
                if socket.send(msg).await.is_err() {
                    break;
                }
            }
            incoming = socket.recv() => match incoming {
                None => break,
                Some(Err(e)) => {
                    // Most likely a frame over the transport limit: say why, then close.
                    tracing::debug!(conn = %conn.id, error = %e, "WebSocket read error");
                    too_big(&mut socket, &conn).await;
                    break;
                }
                Some(Ok(Message::Text(text))) => {
                    if text.len() > MAX_FRAME_BYTES {
                        too_big(&mut socket, &conn).await;
                        break;
                    }
                    if let Some(refused) = handle_text(&conn, text.as_str()).await {
                        // What was queued before (the challenge) goes first.
                        while let Ok(msg) = rx.try_recv() {
                            let _ = socket.send(msg).await;
                        }
                        let _ = socket.send(Message::Text(refused.answer.into())).await;
                        let _ = socket.send(Message::Close(Some(CloseFrame { code: refused.close, reason: refused.reason.into() }))).await;
                        break;
                    }
                }
                Some(Ok(Message::Binary(_))) => {
                    conn.send_err(&Value::Null, &WsError::invalid("binary frames are not supported; send JSON text"));
                }
                Some(Ok(Message::Close(_))) => break,
                // Pongs are answered by the transport.
                Some(Ok(_)) => {}
            },
            ev = next_approval(&mut approvals) => match ev {
                Ok(ev) => {
                    // A user sees the approvals of their own runs only (the resolution
                    // of an id carries no command and goes to every operator).
                    let visible = |a: &ConnAuth| match &ev {
                        ferroclaw_tools::exec_guard::ApprovalEvent::Requested(r) => methods::may_answer(a, &r.session_key),
                        ferroclaw_tools::exec_guard::ApprovalEvent::Resolved { .. } => true,
                    };
                    if conn.auth().is_some_and(|a| a.role >= APPROVAL_EVENTS_ROLE && visible(&a)) {
                        conn.send_event(ev.event_name(), &ev.payload());
                    }
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    // Missed events are still answerable: `exec.approval.list` has them.
                    tracing::warn!(conn = %conn.id, missed = n, "WebSocket client missed exec approval events");
                }
                Err(broadcast::error::RecvError::Closed) => approvals = None,
            },
            _ = &mut connect_deadline, if conn.auth().is_none() => {
                tracing::warn!(target: "security.auth", event = "security.connect_timeout", conn = %conn.id, "WebSocket sent no valid `connect` in time: closing");
                let reason = format!("no connect within {} s", connect_limit.as_secs());
                let _ = socket.send(Message::Close(Some(CloseFrame { code: 1008, reason: reason.into() }))).await;
                break;
            }
            _ = ping.tick() => {
                if socket.send(Message::Ping(Bytes::new())).await.is_err() {
                    break;
                }
                // OpenClaw's clients drop a connection that shows no frame for two
                // tick intervals; WebSocket pings are not frames to them.
                if conn.auth().is_some_and(|a| a.protocol >= 4) {
                    conn.send_event("tick", &json!({"ts": ferroclaw_types::now_millis()}));
                }
            }
        }
    }
    conn.closed.cancel();
    drop(permit);
    state.metrics.ws_closed();
    tracing::debug!(conn = %conn.id, "WebSocket closed");
}

/// The next approval event; pending forever once the broker is gone.
async fn next_approval(
    rx: &mut Option<broadcast::Receiver<ferroclaw_tools::exec_guard::ApprovalEvent>>,
) -> Result<ferroclaw_tools::exec_guard::ApprovalEvent, broadcast::error::RecvError> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

async fn too_big(socket: &mut WebSocket, conn: &Conn) {
    let err = WsError::invalid(format!(
        "frame exceeds the {} KB limit",
        MAX_FRAME_BYTES / 1024
    ));
    let _ = socket
        .send(Message::Text(frames::res_err(&Value::Null, &err).into()))
        .await;
    let _ = socket
        .send(Message::Close(Some(CloseFrame {
            code: 1009,
            reason: "frame too large".into(),
        })))
        .await;
    conn.closed.cancel();
}

/// A `connect` that was refused: the answer to send before closing with a policy
/// violation (no credential, no connection).
struct Refused {
    answer: String,
    reason: &'static str,
    /// 1008 (policy: a credential), 1002 (protocol: no version in common).
    close: u16,
}

async fn handle_text(conn: &Arc<Conn>, text: &str) -> Option<Refused> {
    let frame: RequestFrame = match serde_json::from_str(text) {
        Ok(f) => f,
        Err(e) => {
            conn.send_err(
                &Value::Null,
                &WsError::invalid(format!("malformed frame: {e}")),
            );
            return None;
        }
    };
    if frame.kind != "req" {
        conn.send_err(
            &frame.id,
            &WsError::invalid("expected a frame of type \"req\""),
        );
        return None;
    }
    if frame.method == "connect" {
        match connect(conn, &frame.params).await {
            Ok(payload) => conn.send_ok(&frame.id, payload),
            Err(e) if e.code == WsCode::Unauthorized => {
                return Some(Refused {
                    answer: frames::res_err(&frame.id, &e),
                    reason: "unauthorized",
                    close: 1008,
                })
            }
            Err(e)
                if e.details
                    .as_ref()
                    .is_some_and(|d| d["code"] == "PROTOCOL_MISMATCH") =>
            {
                return Some(Refused {
                    answer: frames::res_err(&frame.id, &e),
                    reason: "protocol mismatch",
                    close: 1002,
                })
            }
            Err(e) => conn.send_err(&frame.id, &e),
        }
        return None;
    }
    let Some(auth) = conn.auth() else {
        conn.send_err(
            &frame.id,
            &WsError::new(WsCode::Unauthorized, "send `connect` first"),
        );
        return None;
    };
    let Some((method, needed)) = super::table::lookup(&frame.method) else {
        conn.send_err(
            &frame.id,
            &WsError::invalid(format!("unknown method `{}`", frame.method)),
        );
        return None;
    };
    if auth.role < needed {
        tracing::warn!(
            target: "security.auth",
            event = "security.forbidden",
            conn = %conn.id,
            method = %frame.method,
            role = auth.role.as_str(),
            "WebSocket method refused for role"
        );
        conn.send_err(
            &frame.id,
            &WsError::new(
                WsCode::Unauthorized,
                format!(
                    "`{}` needs the {} role; this connection is {}",
                    frame.method,
                    needed.as_str(),
                    auth.role.as_str()
                ),
            ),
        );
        return None;
    }
    let key = match &auth.user_id {
        Some(u) => format!("ws-user:{u}"),
        None => format!("ws-conn:{}", conn.id),
    };
    if let Err(wait) = conn.state.limiter.check(&key) {
        conn.state.metrics.rate_limited();
        tracing::warn!(target: "security.rate_limit", event = "security.rate_limited", conn = %conn.id, "WebSocket rate limit exceeded");
        let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX).max(1);
        conn.send_err(
            &frame.id,
            &WsError::new(WsCode::ResourceExhausted, "rate limit exceeded").retry_after(ms),
        );
        return None;
    }
    // Protocol 4's `agent` runs a turn (protocol 3's returns an agent's details).
    if auth.protocol >= 4 && frame.method == "agent" {
        if auth.role < Role::Operator {
            conn.send_err(
                &frame.id,
                &WsError::new(
                    WsCode::Unauthorized,
                    format!(
                        "`agent` needs the operator role; this connection is {}",
                        auth.role.as_str()
                    ),
                ),
            );
            return None;
        }
        let tracker = conn.state.ws_tasks.clone();
        let run =
            methods::agent_turn(conn, frame.id.clone(), &frame.params, auth.requester()).await;
        tracker.spawn(run);
        return None;
    }
    // Handlers run on their own tasks so a long `chat.send` never blocks the reader;
    // the tracker lets shutdown wait for their final answers.
    let conn = conn.clone();
    let tracker = conn.state.ws_tasks.clone();
    // The request's span: the runs it starts are its children in exported traces.
    let span = tracing::info_span!(
        "ws.request",
        otel.name = %format_args!("ws {}", frame.method),
        otel.kind = "server",
        rpc.method = %frame.method,
    );
    if method == super::table::Method::ChatSend && auth.protocol >= 4 {
        // Protocol 4 answers `chat.send` at once with the run id the client chose; the
        // answer arrives as `chat` events.
        let mut params = frame.params;
        let run_id = params
            .get("idempotencyKey")
            .and_then(Value::as_str)
            .filter(|k| !k.trim().is_empty())
            .map_or_else(|| uuid::Uuid::now_v7().to_string(), str::to_string);
        params["idempotencyKey"] = json!(run_id);
        let mut run = methods::chat_send(&conn, &params, auth.requester())
            .instrument(span.clone())
            .await;
        // Refused at once (an unknown agent, a full queue), or a command answered at
        // once (`/stop`): that is the answer.
        match futures_util::future::poll_immediate(&mut run).await {
            Some(Err(e)) => {
                conn.send_err(&frame.id, &e);
                return None;
            }
            Some(Ok(done)) => {
                conn.send_ok(&frame.id, done);
                return None;
            }
            None => {}
        }
        conn.send_ok(&frame.id, json!({"runId": run_id, "status": "started"}));
        tracker.spawn(
            async move {
                let _ = run.await;
            }
            .instrument(span),
        );
        return None;
    }
    if method == super::table::Method::SessionsSubscribe
        && auth.protocol >= 4
        && frame.params.get("sessionKey").is_none()
    {
        // OpenClaw's clients subscribe to every session's list changes this way; those
        // are not sent (yet): the acknowledgement says so.
        conn.send_ok(&frame.id, json!({"subscribed": false, "reason": "session list events are not sent by this gateway"}));
        return None;
    }
    if method == super::table::Method::SessionsPatch
        && auth.protocol >= 4
        && frame.params.get("verboseLevel").is_some()
        && frame.params.get("label").is_none()
    {
        // The terminal UI's `/verbose`: whether it shows tool calls, which it keeps for
        // itself; the gateway sends tool events to protocol 4 clients either way.
        let key = frame
            .params
            .get("key")
            .or_else(|| frame.params.get("sessionKey"))
            .cloned()
            .unwrap_or(Value::Null);
        let entry = json!({"verboseLevel": frame.params["verboseLevel"], "updatedAt": ferroclaw_types::now_millis()});
        conn.send_ok(&frame.id, json!({"ok": true, "key": key, "entry": entry}));
        return None;
    }
    if method == super::table::Method::ChatSend {
        // Submitted here, in frame order; only the wait runs on its own task.
        let run = methods::chat_send(&conn, &frame.params, auth.requester())
            .instrument(span.clone())
            .await;
        tracker.spawn(
            async move {
                match run.await {
                    Ok(payload) => conn.send_ok(&frame.id, payload),
                    Err(e) => conn.send_err(&frame.id, &e),
                }
            }
            .instrument(span),
        );
        return None;
    }
    tracker.spawn(
        async move {
            match methods::dispatch(&conn, method, frame.params, auth).await {
                Ok(payload) => conn.send_ok(&frame.id, payload),
                Err(e) => conn.send_err(&frame.id, &e),
            }
        }
        .instrument(span),
    );
    None
}

/// The handshake, in either dialect.
async fn connect(conn: &Conn, params: &Value) -> Result<Value, WsError> {
    if conn.auth().is_some() {
        return Err(WsError::invalid("already connected"));
    }
    let state = &conn.state;
    let openclaw = params.get("minProtocol").is_some()
        || params.get("maxProtocol").is_some()
        || params.get("client").is_some()
        || params.get("auth").is_some();
    let protocol = if openclaw {
        super::v4::negotiate(params).inspect_err(|_| {
            tracing::warn!(conn = %conn.id, "WebSocket connect with no protocol in common: closing");
        })?
    } else {
        3
    };
    let token = str_param(params, &["token"])
        .or_else(|| params.get("auth").and_then(|a| str_param(a, &["token"])));
    let device_token = params
        .get("auth")
        .and_then(|a| str_param(a, &["deviceToken"]));
    // A device block is checked whenever one comes: a bad signature is refused even
    // though the token alone would have done.
    let device = if protocol >= 4 && params.get("device").is_some_and(Value::is_object) {
        Some(super::v4::verify_device(params, &conn.challenge)?)
    } else {
        None
    };
    let by_token = token.and_then(|t| state.auth.identify(t));
    // The credential a device presented, which it is (re)bound to.
    let credential = token.filter(|_| by_token.is_some());
    let caller = match by_token {
        Some(c) => Some(c),
        // A paired device may come back with the token it was given instead.
        None if token.is_none() => match (&device, device_token) {
            (Some(id), Some(t)) => Some(super::devices::sign_in(state, id, t).await?),
            _ => None,
        },
        None => None,
    };
    let Some(caller) = caller else {
        tracing::warn!(
            target: "security.auth",
            event = "security.auth_failed",
            conn = %conn.id,
            token_present = token.is_some(),
            "WebSocket connect without a valid token: closing"
        );
        let (detail, message) = if token.is_some() {
            (
                "AUTH_TOKEN_MISMATCH",
                "the token is not valid for this gateway",
            )
        } else {
            (
                "AUTH_TOKEN_MISSING",
                "a token is required: send it as `token` (or `auth.token`) in `connect`",
            )
        };
        return Err(if openclaw {
            super::v4::refusal(WsCode::Unauthorized, detail, message, json!({}))
        } else {
            WsError::new(WsCode::Unauthorized, message)
        });
    };
    let named = str_param(params, &["user_id", "userId", "sender_id"]);
    let user_id = caller.user_for(named).map_err(|reason| {
        tracing::warn!(target: "security.auth", event = "security.user_refused", conn = %conn.id, %reason, "WebSocket connect names a user it may not act for");
        WsError::new(WsCode::Unauthorized, reason)
    })?;
    let mut role = caller.role;
    if protocol >= 4 {
        // OpenClaw's `role` names the kind of client (operator, node); what it may do
        // is in its scopes, never more than the credential gives.
        let scopes: Vec<String> = params["scopes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        if let Some(asked) = super::v4::role_for_scopes(&scopes) {
            role = role.min(asked);
        }
    } else if let Some(asked) = str_param(params, &["role"]).and_then(Role::parse) {
        // A client may ask for less than it could have (e.g. a read-only dashboard).
        role = role.min(asked);
    }
    // A device seen for the first time with a credential is paired: it gets a token
    // of its own (shown once); a revoked one is refused whatever else it brings.
    let device_token_issued = match &device {
        Some(id) => {
            let who = super::devices::Pairing {
                role,
                user: user_id.as_deref(),
                credential,
            };
            super::devices::pair(state, id, params, who).await?
        }
        None => None,
    };
    *conn.auth.lock().unwrap_or_else(|e| e.into_inner()) = Some(ConnAuth {
        role,
        user_id: user_id.clone(),
        protocol,
    });
    let server_name = "ferroclaw";
    if protocol >= 4 {
        Ok(json!({
            "type": "hello-ok",
            "protocol": protocol,
            "server": {
                "name": server_name,
                "version": crate::VERSION,
                "bootId": state.boot_id.as_str(),
                "connId": conn.id,
            },
            "features": {
                "methods": super::table::names(),
                "events": EVENTS.iter().copied().chain(["tick", "connect.challenge"]).collect::<Vec<_>>(),
                "capabilities": [],
            },
            "snapshot": {
                "agents": state.runtime.agents().iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
                "defaultAgentId": state.runtime.default_agent_id(),
                "uptimeMs": u64::try_from(state.started.elapsed().as_millis()).unwrap_or(u64::MAX),
                "presence": [],
                "stateVersion": {"presence": 0, "health": 0},
            },
            "auth": {
                "method": if token.is_none() && device.is_some() { "device-token" } else { "token" },
                "role": "operator",
                "scopes": super::v4::scopes_of(role),
                "deviceId": device,
                "deviceToken": device_token_issued,
            },
            "policy": {
                "maxPayload": MAX_FRAME_BYTES,
                "maxBufferedBytes": MAX_FRAME_BYTES * super::SEND_BUFFER,
                "tickIntervalMs": u64::try_from(PING_INTERVAL.as_millis()).unwrap_or(30_000),
            },
        }))
    } else if openclaw {
        Ok(json!({
            "type": "hello-ok",
            "protocol": protocol,
            "role": role.as_str(),
            "server": {"name": server_name, "version": crate::VERSION, "connId": conn.id},
            "features": {
                "methods": super::table::names(),
                "events": EVENTS,
            },
            "snapshot": {
                "agents": state.runtime.agents().iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
                "defaultAgentId": state.runtime.default_agent_id(),
                "uptimeMs": u64::try_from(state.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            },
            "policy": {
                "maxPayload": MAX_FRAME_BYTES,
                "tickIntervalMs": u64::try_from(PING_INTERVAL.as_millis()).unwrap_or(30_000),
            },
        }))
    } else {
        Ok(json!({
            "protocol": crate::PROTOCOL_VERSION,
            "role": role.as_str(),
            "user_id": user_id,
            "server": {"name": server_name, "version": crate::VERSION},
        }))
    }
}
