//! A local fake of Slack for one app in one workspace: the Web API methods a bot uses
//! (`auth.test`, `apps.connections.open`, `chat.postMessage`, `chat.update`,
//! `conversations.open`) and the Socket Mode WebSocket (`hello`, `events_api` envelopes
//! that must be acknowledged, `disconnect` with a reason). Real shapes: `{"ok": false,
//! "error": "invalid_auth"}` with HTTP 200, `not_allowed_token_type` for the wrong kind
//! of token, `msg_too_long`, a 429 with `Retry-After`. Events written while no socket is
//! open are delivered to the next one, as Slack retries them.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message as Ws, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, post};
use axum::{Json, Router};
use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::sync::{mpsc, Notify};

use crate::killable::Served;
use crate::{lock, wait_until};

/// Slack cuts messages longer than this.
pub const MAX_TEXT: usize = 40_000;

#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    pub body: Value,
    pub status: u16,
    /// Slack's `error` when `ok` was false.
    pub error: Option<String>,
    pub at: Instant,
}

/// A message the bot posted, as it is now.
#[derive(Debug, Clone, PartialEq)]
pub struct Sent {
    pub ts: String,
    pub channel: String,
    pub thread_ts: Option<String>,
    pub text: String,
    pub mrkdwn: bool,
    pub edits: u32,
}

/// A message from a member, delivered as an `events_api` envelope.
#[derive(Debug, Clone)]
pub struct Incoming {
    pub channel: String,
    /// `im`, `channel`, `group` or `mpim`.
    pub channel_type: &'static str,
    pub user: String,
    pub text: String,
    pub thread_ts: Option<String>,
    pub bot_id: Option<String>,
}

impl Incoming {
    /// A direct message from `user` (in their DM channel with the app).
    pub fn dm(user: &str, text: &str) -> Incoming {
        Incoming {
            channel: dm_channel_of(user),
            channel_type: "im",
            user: user.into(),
            text: text.into(),
            thread_ts: None,
            bot_id: None,
        }
    }

    pub fn channel(channel: &str, user: &str, text: &str) -> Incoming {
        Incoming {
            channel: channel.into(),
            channel_type: "channel",
            ..Incoming::dm(user, text)
        }
    }

    pub fn in_thread(mut self, thread_ts: &str) -> Incoming {
        self.thread_ts = Some(thread_ts.into());
        self
    }

    pub fn from_bot(mut self, bot_id: &str) -> Incoming {
        self.bot_id = Some(bot_id.into());
        self
    }
}

/// The DM channel of `user` with the app (stable, so tests can name it).
pub fn dm_channel_of(user: &str) -> String {
    format!("D{user}")
}

#[derive(Default)]
struct FakeState {
    clock: u64,
    calls: Vec<Call>,
    sent: Vec<Sent>,
    failures: HashMap<String, VecDeque<u64>>,
    /// Envelopes not delivered yet (no socket open), oldest first.
    waiting: VecDeque<Value>,
    live: Option<mpsc::UnboundedSender<Value>>,
    tickets: u32,
    connections: u32,
    acked: Vec<String>,
    delivered: Vec<String>,
}

impl FakeState {
    fn ts(&mut self) -> String {
        self.clock += 1;
        format!("1764000000.{:06}", self.clock)
    }
}

struct Shared {
    bot_token: String,
    app_token: String,
    bot_user: String,
    bot_id: String,
    port: u16,
    state: Mutex<FakeState>,
    changed: Notify,
}

impl Shared {
    fn state(&self) -> std::sync::MutexGuard<'_, FakeState> {
        lock(&self.state)
    }

    fn deliver(&self, envelope: Value) {
        let mut st = self.state();
        match &st.live {
            Some(live) if live.send(envelope.clone()).is_ok() => {}
            _ => st.waiting.push_back(envelope),
        }
    }
}

#[derive(Clone)]
pub struct SlackFake {
    shared: Arc<Shared>,
    served: Arc<Served>,
}

impl SlackFake {
    /// Serves on a free port for an app whose bot is member `bot_user` (`U…`), bot
    /// `bot_id` (`B…`).
    pub async fn start(
        bot_token: &str,
        app_token: &str,
        bot_user: &str,
        bot_id: &str,
    ) -> SlackFake {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        let port = listener.local_addr().expect("its address").port();
        let shared = Arc::new(Shared {
            bot_token: bot_token.into(),
            app_token: app_token.into(),
            bot_user: bot_user.into(),
            bot_id: bot_id.into(),
            port,
            state: Mutex::new(FakeState::default()),
            changed: Notify::new(),
        });
        let app = Router::new()
            .route("/api/{method}", post(web_api))
            .route("/link", any(socket))
            .with_state(shared.clone());
        let served = Served::start_on(listener, app).expect("serving the Slack fake");
        SlackFake {
            shared,
            served: Arc::new(served),
        }
    }

    pub fn api_base_url(&self) -> String {
        format!("http://127.0.0.1:{}/api", self.served.port)
    }

    /// Delivers `msg` as a `message` event (and, when it names the bot, an
    /// `app_mention` for the same message, as Slack does); returns its `ts`.
    pub fn push(&self, msg: Incoming) -> String {
        let ts = self.shared.state().ts();
        let mut event = json!({
            "type": "message", "channel": msg.channel, "channel_type": msg.channel_type,
            "text": msg.text, "ts": ts, "event_ts": ts, "team": "T1",
        });
        match &msg.bot_id {
            Some(bot) => {
                event["bot_id"] = json!(bot);
                event["subtype"] = json!("bot_message");
            }
            None => event["user"] = json!(msg.user),
        }
        if let Some(t) = &msg.thread_ts {
            event["thread_ts"] = json!(t);
        }
        let mention = format!("<@{}>", self.shared.bot_user);
        let mut events = vec![event.clone()];
        if msg.text.contains(&mention) && msg.channel_type != "im" {
            let mut m = event;
            m["type"] = json!("app_mention");
            if let Some(o) = m.as_object_mut() {
                o.remove("channel_type");
            }
            events.push(m);
        }
        for e in events {
            let id = format!("env-{}", self.shared.state().ts());
            self.shared.deliver(json!({
                "envelope_id": id, "type": "events_api", "accepts_response_payload": false,
                "retry_attempt": 0, "retry_reason": "",
                "payload": {"token": "legacy", "team_id": "T1", "api_app_id": "A1", "type": "event_callback",
                            "event_id": format!("Ev{id}"), "event_time": 1_764_000_000, "event": e},
            }));
        }
        ts
    }

    /// Sends `{"type": "disconnect", "reason": ..}` on the open socket (Slack does so
    /// before it closes one, e.g. `refresh_requested`).
    pub fn ask_to_reconnect(&self, reason: &str) {
        self.shared
            .deliver(json!({"type": "disconnect", "reason": reason,
            "debug_info": {"host": "fake"}}));
    }

    /// The next call of `method` gets a 429 telling to wait `retry_after` seconds.
    pub fn rate_limit_next(&self, method: &str, retry_after: u64) {
        self.shared
            .state()
            .failures
            .entry(method.into())
            .or_default()
            .push_back(retry_after);
    }

    pub fn calls_to(&self, method: &str) -> Vec<Call> {
        self.shared
            .state()
            .calls
            .iter()
            .filter(|c| c.method == method)
            .cloned()
            .collect()
    }

    /// The bot's messages in `channel` (any thread), as they are now.
    pub fn sent(&self, channel: &str) -> Vec<Sent> {
        self.shared
            .state()
            .sent
            .iter()
            .filter(|m| m.channel == channel)
            .cloned()
            .collect()
    }

    /// Socket addresses handed out, sockets opened; envelopes delivered and acked.
    pub fn sockets(&self) -> (u32, u32, usize, usize) {
        let st = self.shared.state();
        (
            st.tickets,
            st.connections,
            st.delivered.len(),
            st.acked.len(),
        )
    }

    pub fn connected(&self) -> bool {
        self.shared.state().live.is_some()
    }

    /// Waits until `pred` holds for the bot's messages in `channel`.
    pub async fn wait_sent(
        &self,
        channel: &str,
        timeout: Duration,
        pred: impl Fn(&[Sent]) -> bool,
    ) -> bool {
        wait_until(&self.shared.changed, timeout, || {
            let mine: Vec<Sent> = self.sent(channel);
            pred(&mine)
        })
        .await
    }

    /// Waits until `pred(tickets, connections, connected)` holds.
    pub async fn wait_socket(
        &self,
        timeout: Duration,
        pred: impl Fn(u32, u32, bool) -> bool,
    ) -> bool {
        wait_until(&self.shared.changed, timeout, || {
            let st = self.shared.state();
            pred(st.tickets, st.connections, st.live.is_some())
        })
        .await
    }

    /// A network outage until [`SlackFake::restore`]; events pushed meanwhile wait.
    pub async fn disconnect(&self) {
        self.served.disconnect().await;
        self.shared.state().live = None;
        self.shared.changed.notify_waiters();
    }

    pub async fn restore(&self) -> io::Result<()> {
        self.served.restore().await
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("authorization")?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

async fn web_api(
    State(s): State<Arc<Shared>>,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: Option<Json<Value>>,
) -> Response {
    let body = body.map(|Json(b)| b).unwrap_or(Value::Null);
    let token = bearer(&headers).unwrap_or("");
    let wants_app = method == "apps.connections.open";
    let known = [s.bot_token.as_str(), s.app_token.as_str()];
    let failure = s
        .state()
        .failures
        .get_mut(&method)
        .and_then(VecDeque::pop_front);
    let (status, answer) = if failure.is_some() {
        (429, json!({"ok": false, "error": "ratelimited"}))
    } else if !known.contains(&token) {
        (200, json!({"ok": false, "error": "invalid_auth"}))
    } else if wants_app != (token == s.app_token) {
        (200, json!({"ok": false, "error": "not_allowed_token_type"}))
    } else {
        answer(&s, &method, &body)
    };
    let error = answer["error"].as_str().map(str::to_string);
    s.state().calls.push(Call {
        method,
        body,
        status,
        error,
        at: Instant::now(),
    });
    s.changed.notify_waiters();
    let mut resp = (
        StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
        Json(answer),
    )
        .into_response();
    if let Some(v) = failure.and_then(|wait| wait.to_string().parse().ok()) {
        resp.headers_mut().insert("retry-after", v);
    }
    resp
}

fn answer(s: &Shared, method: &str, body: &Value) -> (u16, Value) {
    let fail = |error: &str| (200, json!({"ok": false, "error": error}));
    match method {
        "auth.test" => (
            200,
            json!({"ok": true, "url": "https://fake.slack.com/", "team": "Fake",
            "user": "ferro", "team_id": "T1", "user_id": s.bot_user, "bot_id": s.bot_id}),
        ),
        "apps.connections.open" => {
            let ticket = {
                let mut st = s.state();
                st.tickets += 1;
                st.tickets
            };
            (
                200,
                json!({"ok": true, "url": format!("ws://127.0.0.1:{}/link?ticket={ticket}", s.port)}),
            )
        }
        "conversations.open" => match body["users"].as_str() {
            Some(u) if !u.is_empty() => (
                200,
                json!({"ok": true, "channel": {"id": dm_channel_of(u)}}),
            ),
            _ => fail("users_not_found"),
        },
        "chat.postMessage" | "chat.update" => {
            let Some(channel) = body["channel"].as_str() else {
                return fail("channel_not_found");
            };
            let text = body["text"].as_str().unwrap_or("");
            if text.trim().is_empty() {
                return fail("no_text");
            }
            if text.chars().count() > MAX_TEXT {
                return fail("msg_too_long");
            }
            let mut st = s.state();
            if method == "chat.update" {
                let ts = body["ts"].as_str().unwrap_or("");
                let Some(m) = st
                    .sent
                    .iter_mut()
                    .find(|m| m.ts == ts && m.channel == channel)
                else {
                    return fail("message_not_found");
                };
                m.text = text.into();
                m.edits += 1;
                return (
                    200,
                    json!({"ok": true, "channel": channel, "ts": ts, "text": text}),
                );
            }
            let ts = st.ts();
            st.sent.push(Sent {
                ts: ts.clone(),
                channel: channel.into(),
                thread_ts: body["thread_ts"].as_str().map(str::to_string),
                text: text.into(),
                mrkdwn: body["mrkdwn"].as_bool().unwrap_or(true),
                edits: 0,
            });
            (
                200,
                json!({"ok": true, "channel": channel, "ts": ts,
                         "message": {"type": "message", "text": text, "bot_id": s.bot_id, "ts": ts}}),
            )
        }
        _ => fail("unknown_method"),
    }
}

async fn socket(
    State(s): State<Arc<Shared>>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    match ws {
        Ok(ws) => ws.on_upgrade(move |socket| connection(s, socket)),
        Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    }
}

async fn connection(s: Arc<Shared>, mut socket: WebSocket) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
    {
        let mut st = s.state();
        st.connections += 1;
        let _ = tx.send(json!({"type": "hello", "num_connections": 1,
            "debug_info": {"host": "fake"}, "connection_info": {"app_id": "A1"}}));
        while let Some(waiting) = st.waiting.pop_front() {
            let _ = tx.send(waiting);
        }
        st.live = Some(tx);
    }
    s.changed.notify_waiters();
    loop {
        tokio::select! {
            out = rx.recv() => {
                let Some(out) = out else { break };
                if let Some(id) = out["envelope_id"].as_str() {
                    s.state().delivered.push(id.to_string());
                }
                let closing = out["type"] == "disconnect";
                if socket.send(Ws::Text(out.to_string().into())).await.is_err() || closing {
                    break;
                }
            }
            frame = socket.next() => match frame {
                Some(Ok(Ws::Text(t))) => {
                    let v: Value = serde_json::from_str(&t).unwrap_or(Value::Null);
                    if let Some(id) = v["envelope_id"].as_str() {
                        s.state().acked.push(id.to_string());
                        s.changed.notify_waiters();
                    }
                }
                Some(Ok(Ws::Close(_))) | Some(Err(_)) | None => break,
                Some(Ok(_)) => {}
            },
        }
    }
    // Only this socket's end: a newer one may be live already.
    rx.close();
    let mut st = s.state();
    if st.live.as_ref().is_some_and(|l| l.is_closed()) {
        st.live = None;
    }
    drop(st);
    s.changed.notify_waiters();
}
