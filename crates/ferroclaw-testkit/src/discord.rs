//! A local fake of Discord for one bot: the REST API (v10) a bot sends with, and the
//! gateway WebSocket it receives on (Hello, Identify, READY, heartbeats and their ACKs,
//! `MESSAGE_CREATE` with sequence numbers, Resume replaying what a lost connection
//! missed). Real shapes and error bodies: `{"code": 50035, "message": "Invalid Form
//! Body", ..}` past 2,000 characters, `{"message": "You are being rate limited.",
//! "retry_after": .., "global": false}` with a 429, close code 4004 for a bad token.
//!
//! Tests feed messages with [`DiscordFake::push`], script failures with
//! [`DiscordFake::fail_next`], cut the network with [`DiscordFake::disconnect`] and
//! look at what the bot did with [`DiscordFake::calls`] and [`DiscordFake::sent`].

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message as Ws, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, patch, post};
use axum::{Json, Router};
use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::sync::{mpsc, Notify};

use crate::killable::Served;
use crate::{lock, wait_until};

/// Discord's limit for a message's content.
pub const MAX_CONTENT: usize = 2000;
const API: &str = "/api/v10";

/// One REST request the fake received, in arrival order.
#[derive(Debug, Clone)]
pub struct Call {
    /// `getCurrentUser`, `getGatewayBot`, `createMessage`, `editMessage`,
    /// `triggerTyping`, `createDM` (Discord's documented names).
    pub route: &'static str,
    /// The channel (or user, for `createDM`) the call was about.
    pub target: Option<String>,
    pub body: Value,
    pub status: u16,
    pub at: Instant,
}

/// A message the bot sent, as it is now (after edits).
#[derive(Debug, Clone, PartialEq)]
pub struct Sent {
    pub id: String,
    pub channel_id: String,
    pub content: String,
    pub reply_to: Option<String>,
    /// `allowed_mentions` as sent (Discord's default, when absent, pings everyone
    /// named).
    pub allowed_mentions: Option<Value>,
    pub edits: u32,
}

/// A message from a user, delivered to the bot's gateway sessions.
#[derive(Debug, Clone)]
pub struct Incoming {
    pub channel_id: String,
    pub guild_id: Option<String>,
    pub author_id: String,
    pub username: String,
    pub author_bot: bool,
    pub content: String,
    pub mentions_bot: bool,
    pub reply_to: Option<String>,
}

impl Incoming {
    /// A direct message from `user` (in that user's DM channel with the bot).
    pub fn dm(user: &str, username: &str, content: &str) -> Incoming {
        Incoming {
            channel_id: dm_channel_of(user),
            guild_id: None,
            author_id: user.into(),
            username: username.into(),
            author_bot: false,
            content: content.into(),
            mentions_bot: false,
            reply_to: None,
        }
    }

    /// A message in channel `channel` of server `guild`.
    pub fn guild(
        guild: &str,
        channel: &str,
        user: &str,
        username: &str,
        content: &str,
    ) -> Incoming {
        Incoming {
            guild_id: Some(guild.into()),
            channel_id: channel.into(),
            ..Incoming::dm(user, username, content)
        }
    }

    /// Starts the content with `<@bot>`, listing the bot in `mentions`, as Discord does
    /// when the user picks the bot from the mention list.
    pub fn mentioning_bot(mut self) -> Incoming {
        self.mentions_bot = true;
        self
    }

    pub fn from_bot(mut self) -> Incoming {
        self.author_bot = true;
        self
    }
}

/// The id of `user`'s DM channel with the bot (stable, so tests can name it).
pub fn dm_channel_of(user: &str) -> String {
    format!("9{user}")
}

struct SessionLog {
    token_ok: bool,
    seq: u64,
    /// Every dispatched event with its sequence number, for resumes.
    events: Vec<(u64, Value)>,
    live: Option<mpsc::UnboundedSender<Value>>,
}

#[derive(Default)]
struct FakeState {
    next_id: u64,
    calls: Vec<Call>,
    sent: Vec<Sent>,
    failures: HashMap<&'static str, VecDeque<(u16, f64)>>,
    sessions: HashMap<String, SessionLog>,
    identifies: u32,
    resumes: u32,
    heartbeats: u32,
    /// The most gateway connections open at once.
    most_live: usize,
}

impl FakeState {
    fn id(&mut self) -> String {
        self.next_id += 1;
        (1_300_000_000_000_000_000u64 + self.next_id).to_string()
    }

    fn live(&self) -> usize {
        self.sessions.values().filter(|s| s.live.is_some()).count()
    }
}

struct Shared {
    token: String,
    bot_id: String,
    bot_name: String,
    heartbeat_ms: u64,
    port: u16,
    state: Mutex<FakeState>,
    changed: Notify,
}

impl Shared {
    fn state(&self) -> std::sync::MutexGuard<'_, FakeState> {
        lock(&self.state)
    }

    fn bot(&self) -> Value {
        json!({"id": self.bot_id, "username": self.bot_name, "global_name": null,
               "discriminator": "0", "avatar": null, "bot": true})
    }

    fn record(&self, route: &'static str, target: Option<String>, body: Value, status: u16) {
        self.state().calls.push(Call {
            route,
            target,
            body,
            status,
            at: Instant::now(),
        });
        self.changed.notify_waiters();
    }

    /// Appends `event` to every session (sent at once on the live ones).
    fn dispatch(&self, t: &str, d: Value) {
        let mut st = self.state();
        for s in st.sessions.values_mut() {
            s.seq += 1;
            let event = json!({"op": 0, "t": t, "s": s.seq, "d": d});
            s.events.push((s.seq, event.clone()));
            if let Some(live) = &s.live {
                let _ = live.send(event);
            }
        }
    }
}

/// A running fake Discord. Clones share the server and its state.
#[derive(Clone)]
pub struct DiscordFake {
    shared: Arc<Shared>,
    served: Arc<Served>,
}

impl DiscordFake {
    /// Serves on a free port of 127.0.0.1 for the bot `bot_id`/`bot_name`
    /// authenticated by `token`, asking for heartbeats every 41.25 s as Discord does.
    pub async fn start(token: &str, bot_id: &str, bot_name: &str) -> DiscordFake {
        DiscordFake::start_with_heartbeat(token, bot_id, bot_name, 41_250).await
    }

    pub async fn start_with_heartbeat(
        token: &str,
        bot_id: &str,
        bot_name: &str,
        heartbeat_ms: u64,
    ) -> DiscordFake {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        let port = listener.local_addr().expect("its address").port();
        let shared = Arc::new(Shared {
            token: token.into(),
            bot_id: bot_id.into(),
            bot_name: bot_name.into(),
            heartbeat_ms,
            port,
            state: Mutex::new(FakeState::default()),
            changed: Notify::new(),
        });
        let app = Router::new()
            .route(&format!("{API}/users/@me"), get(current_user))
            .route(&format!("{API}/gateway/bot"), get(gateway_bot))
            .route(&format!("{API}/users/@me/channels"), post(create_dm))
            .route(
                &format!("{API}/channels/{{channel}}/messages"),
                post(create_message),
            )
            .route(
                &format!("{API}/channels/{{channel}}/messages/{{message}}"),
                patch(edit_message),
            )
            .route(&format!("{API}/channels/{{channel}}/typing"), post(typing))
            .route("/gateway", any(gateway))
            .route("/resume", any(gateway))
            .with_state(shared.clone());
        let served = Served::start_on(listener, app).expect("serving the Discord fake");
        DiscordFake {
            shared,
            served: Arc::new(served),
        }
    }

    /// The REST API root a bot is configured with (`…/api/v10`).
    pub fn api_base_url(&self) -> String {
        format!("http://127.0.0.1:{}{API}", self.served.port)
    }

    pub fn bot_id(&self) -> &str {
        &self.shared.bot_id
    }

    /// Delivers `msg` as `MESSAGE_CREATE` to the bot's sessions; returns its id.
    pub fn push(&self, msg: Incoming) -> String {
        let id = self.shared.state().id();
        let content = if msg.mentions_bot {
            format!("<@{}> {}", self.shared.bot_id, msg.content)
        } else {
            msg.content.clone()
        };
        let mut d = json!({
            "id": id,
            "type": if msg.reply_to.is_some() { 19 } else { 0 },
            "channel_id": msg.channel_id,
            "author": {"id": msg.author_id, "username": msg.username, "global_name": msg.username,
                       "discriminator": "0", "avatar": null, "bot": msg.author_bot},
            "content": content,
            "timestamp": "2026-11-25T10:00:00.000000+00:00",
            "edited_timestamp": null,
            "tts": false,
            "mention_everyone": false,
            "mentions": if msg.mentions_bot { json!([self.shared.bot()]) } else { json!([]) },
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": false,
        });
        if let Some(guild) = &msg.guild_id {
            d["guild_id"] = json!(guild);
            d["member"] = json!({"roles": [], "joined_at": "2026-01-01T00:00:00.000000+00:00"});
        }
        if let Some(target) = &msg.reply_to {
            let st = self.shared.state();
            if let Some(s) = st.sent.iter().find(|s| &s.id == target) {
                d["referenced_message"] = json!({"id": s.id, "channel_id": s.channel_id,
                    "author": self.shared.bot(), "content": s.content, "type": 0});
            }
        }
        self.shared.dispatch("MESSAGE_CREATE", d);
        id
    }

    /// The next call of `route` is answered with `status` (429: with `retry_after`
    /// seconds in the body and the `Retry-After` header). Several queue up.
    pub fn fail_next(&self, route: &'static str, status: u16, retry_after: f64) {
        self.shared
            .state()
            .failures
            .entry(route)
            .or_default()
            .push_back((status, retry_after));
    }

    pub fn calls(&self) -> Vec<Call> {
        self.shared.state().calls.clone()
    }

    pub fn calls_to(&self, route: &str) -> Vec<Call> {
        self.shared
            .state()
            .calls
            .iter()
            .filter(|c| c.route == route)
            .cloned()
            .collect()
    }

    /// The bot's messages in `channel`, oldest first, as they are now.
    pub fn sent(&self, channel: &str) -> Vec<Sent> {
        self.shared
            .state()
            .sent
            .iter()
            .filter(|m| m.channel_id == channel)
            .cloned()
            .collect()
    }

    /// Identify and Resume payloads accepted so far, and heartbeats answered.
    pub fn sessions_opened(&self) -> (u32, u32, u32) {
        let st = self.shared.state();
        (st.identifies, st.resumes, st.heartbeats)
    }

    /// Gateway connections open now, and the most ever open at once.
    pub fn live_connections(&self) -> (usize, usize) {
        let st = self.shared.state();
        (st.live(), st.most_live)
    }

    /// Waits until `pred` holds for the calls so far (re-checked on every call and
    /// gateway change) or `timeout` passes. `pred` runs under the fake's lock.
    pub async fn wait_for(&self, timeout: Duration, pred: impl Fn(&[Call]) -> bool) -> bool {
        wait_until(&self.shared.changed, timeout, || {
            pred(&self.shared.state().calls)
        })
        .await
    }

    /// Waits until `pred` holds for the bot's messages in `channel` (as they are now).
    pub async fn wait_sent(
        &self,
        channel: &str,
        timeout: Duration,
        pred: impl Fn(&[Sent]) -> bool,
    ) -> bool {
        wait_until(&self.shared.changed, timeout, || {
            let st = self.shared.state();
            let mine: Vec<Sent> = st
                .sent
                .iter()
                .filter(|m| m.channel_id == channel)
                .cloned()
                .collect();
            pred(&mine)
        })
        .await
    }

    /// Waits until the gateway state satisfies `pred(identifies, resumes, live)`.
    pub async fn wait_for_gateway(
        &self,
        timeout: Duration,
        pred: impl Fn(u32, u32, usize) -> bool,
    ) -> bool {
        wait_until(&self.shared.changed, timeout, || {
            let st = self.shared.state();
            pred(st.identifies, st.resumes, st.live())
        })
        .await
    }

    /// A network outage: every connection cut (the gateway's too), the port closed,
    /// until [`DiscordFake::restore`]. Sessions stay resumable; messages pushed
    /// meanwhile are replayed to a resume.
    pub async fn disconnect(&self) {
        self.served.disconnect().await;
        for s in self.shared.state().sessions.values_mut() {
            s.live = None;
        }
        self.shared.changed.notify_waiters();
    }

    pub async fn restore(&self) -> io::Result<()> {
        self.served.restore().await
    }
}

fn authorized(shared: &Shared, headers: &HeaderMap) -> bool {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bot {}", shared.token))
}

/// The answer to a REST call: 401 without the token, a scripted failure, or `ok()`.
fn answer(
    shared: &Shared,
    headers: &HeaderMap,
    route: &'static str,
    target: Option<String>,
    body: Value,
    ok: impl FnOnce(&Shared) -> Result<(StatusCode, Value), (StatusCode, Value)>,
) -> Response {
    if !authorized(shared, headers) {
        shared.record(route, target, body, 401);
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"message": "401: Unauthorized", "code": 0})),
        )
            .into_response();
    }
    let failure = shared
        .state()
        .failures
        .get_mut(route)
        .and_then(VecDeque::pop_front);
    if let Some((status, retry_after)) = failure {
        shared.record(route, target, body, status);
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if status == StatusCode::TOO_MANY_REQUESTS {
            let mut resp = (
                status,
                Json(json!({"message": "You are being rate limited.", "retry_after": retry_after, "global": false})),
            )
                .into_response();
            if let Ok(v) = format!("{}", retry_after.ceil() as u64).parse() {
                resp.headers_mut().insert("retry-after", v);
            }
            return resp;
        }
        return (
            status,
            Json(json!({"message": "Internal Server Error", "code": 0})),
        )
            .into_response();
    }
    let (status, value) = match ok(shared) {
        Ok(v) | Err(v) => v,
    };
    shared.record(route, target, body, status.as_u16());
    if status == StatusCode::NO_CONTENT {
        return status.into_response();
    }
    (status, Json(value)).into_response()
}

async fn current_user(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    answer(&s, &headers, "getCurrentUser", None, Value::Null, |s| {
        Ok((StatusCode::OK, s.bot()))
    })
}

async fn gateway_bot(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    answer(&s, &headers, "getGatewayBot", None, Value::Null, |s| {
        Ok((
            StatusCode::OK,
            json!({"url": format!("ws://127.0.0.1:{}/gateway", s.port), "shards": 1,
                   "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 14_400_000, "max_concurrency": 1}}),
        ))
    })
}

async fn create_dm(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Option<Json<Value>>,
) -> Response {
    let body = body.map(|Json(b)| b).unwrap_or(Value::Null);
    let user = body["recipient_id"].as_str().map(str::to_string);
    answer(
        &s,
        &headers,
        "createDM",
        user.clone(),
        body,
        |_| match user {
            Some(u) => Ok((
                StatusCode::OK,
                json!({"id": dm_channel_of(&u), "type": 1, "recipients": [{"id": u}]}),
            )),
            None => Err(invalid_form(
                "recipient_id",
                "BASE_TYPE_REQUIRED",
                "This field is required",
            )),
        },
    )
}

fn invalid_form(field: &str, code: &str, message: &str) -> (StatusCode, Value) {
    (
        StatusCode::BAD_REQUEST,
        json!({"code": 50035, "message": "Invalid Form Body",
               "errors": {field: {"_errors": [{"code": code, "message": message}]}}}),
    )
}

/// Content as Discord checks it: present, and at most 2,000 characters.
fn check_content(body: &Value) -> Result<String, (StatusCode, Value)> {
    let content = body["content"].as_str().unwrap_or("");
    if content.trim().is_empty() {
        return Err((
            StatusCode::BAD_REQUEST,
            json!({"code": 50006, "message": "Cannot send an empty message"}),
        ));
    }
    if content.encode_utf16().count() > MAX_CONTENT {
        return Err(invalid_form(
            "content",
            "BASE_TYPE_MAX_LENGTH",
            "Must be 2000 or fewer in length.",
        ));
    }
    Ok(content.to_string())
}

fn message_json(s: &Shared, m: &Sent) -> Value {
    json!({"id": m.id, "channel_id": m.channel_id, "author": s.bot(), "content": m.content,
           "type": if m.reply_to.is_some() { 19 } else { 0 }, "mentions": [], "attachments": [], "embeds": []})
}

async fn create_message(
    State(s): State<Arc<Shared>>,
    Path(channel): Path<String>,
    headers: HeaderMap,
    body: Option<Json<Value>>,
) -> Response {
    let body = body.map(|Json(b)| b).unwrap_or(Value::Null);
    let checked = check_content(&body);
    answer(
        &s,
        &headers,
        "createMessage",
        Some(channel.clone()),
        body.clone(),
        |s| {
            let content = checked?;
            let mut st = s.state();
            let sent = Sent {
                id: st.id(),
                channel_id: channel,
                content,
                reply_to: body["message_reference"]["message_id"]
                    .as_str()
                    .map(str::to_string),
                allowed_mentions: body.get("allowed_mentions").cloned(),
                edits: 0,
            };
            st.sent.push(sent.clone());
            Ok((StatusCode::OK, message_json(s, &sent)))
        },
    )
}

async fn edit_message(
    State(s): State<Arc<Shared>>,
    Path((channel, message)): Path<(String, String)>,
    headers: HeaderMap,
    body: Option<Json<Value>>,
) -> Response {
    let body = body.map(|Json(b)| b).unwrap_or(Value::Null);
    let checked = check_content(&body);
    answer(
        &s,
        &headers,
        "editMessage",
        Some(channel.clone()),
        body,
        |s| {
            let content = checked?;
            let mut st = s.state();
            let Some(m) = st
                .sent
                .iter_mut()
                .find(|m| m.id == message && m.channel_id == channel)
            else {
                return Err((
                    StatusCode::NOT_FOUND,
                    json!({"code": 10008, "message": "Unknown Message"}),
                ));
            };
            m.content = content;
            m.edits += 1;
            let m = m.clone();
            Ok((StatusCode::OK, message_json(s, &m)))
        },
    )
}

async fn typing(
    State(s): State<Arc<Shared>>,
    Path(channel): Path<String>,
    headers: HeaderMap,
) -> Response {
    answer(
        &s,
        &headers,
        "triggerTyping",
        Some(channel),
        Value::Null,
        |_| Ok((StatusCode::NO_CONTENT, Value::Null)),
    )
}

async fn gateway(
    State(s): State<Arc<Shared>>,
    method: Method,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    match ws {
        Ok(ws) => ws.on_upgrade(move |socket| session(s, socket)),
        Err(_) => (
            StatusCode::BAD_REQUEST,
            format!("{method}: a WebSocket upgrade is expected"),
        )
            .into_response(),
    }
}

async fn close(mut socket: WebSocket, code: u16, reason: &'static str) {
    let _ = socket
        .send(Ws::Close(Some(CloseFrame {
            code,
            reason: reason.into(),
        })))
        .await;
}

/// One gateway connection: Hello, then Identify or Resume, then events and heartbeats.
async fn session(s: Arc<Shared>, mut socket: WebSocket) {
    let hello =
        json!({"op": 10, "d": {"heartbeat_interval": s.heartbeat_ms}, "s": null, "t": null});
    if socket
        .send(Ws::Text(hello.to_string().into()))
        .await
        .is_err()
    {
        return;
    }
    let first = match socket.next().await {
        Some(Ok(Ws::Text(t))) => serde_json::from_str::<Value>(&t).unwrap_or(Value::Null),
        _ => return,
    };
    let token_ok = first["d"]["token"].as_str() == Some(s.token.as_str());
    let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
    let session_id = match first["op"].as_u64() {
        Some(2) => {
            if !token_ok {
                return close(socket, 4004, "Authentication failed.").await;
            }
            let id = format!("session-{}", s.state().id());
            let ready = json!({"v": 10, "user": s.bot(), "guilds": [], "session_id": id,
                "resume_gateway_url": format!("ws://127.0.0.1:{}/resume", s.port),
                "application": {"id": s.bot_id, "flags": 0}});
            let mut st = s.state();
            st.identifies += 1;
            st.sessions.insert(
                id.clone(),
                SessionLog {
                    token_ok,
                    seq: 1,
                    events: Vec::new(),
                    live: Some(tx),
                },
            );
            let _ = st
                .sessions
                .get(&id)
                .and_then(|l| l.live.as_ref())
                .map(|live| live.send(json!({"op": 0, "t": "READY", "s": 1, "d": ready})));
            id
        }
        Some(6) => {
            let id = first["d"]["session_id"].as_str().unwrap_or("").to_string();
            let from = first["d"]["seq"].as_u64().unwrap_or(0);
            let resumed = {
                let mut st = s.state();
                match st.sessions.get_mut(&id).filter(|l| l.token_ok && token_ok) {
                    Some(log) => {
                        for (_, event) in log.events.iter().filter(|(seq, _)| *seq > from) {
                            let _ = tx.send(event.clone());
                        }
                        log.seq += 1;
                        let _ = tx.send(json!({"op": 0, "t": "RESUMED", "s": log.seq, "d": {}}));
                        log.live = Some(tx);
                        st.resumes += 1;
                        true
                    }
                    None => false,
                }
            };
            if !resumed {
                let invalid = json!({"op": 9, "d": false, "s": null, "t": null});
                let _ = socket.send(Ws::Text(invalid.to_string().into())).await;
                return;
            }
            id
        }
        _ => return close(socket, 4002, "Error while decoding payload.").await,
    };
    {
        let mut st = s.state();
        st.most_live = st.most_live.max(st.live());
    }
    s.changed.notify_waiters();
    let end = loop {
        tokio::select! {
            event = rx.recv() => {
                let Some(event) = event else { break false };
                if socket.send(Ws::Text(event.to_string().into())).await.is_err() {
                    break false;
                }
            }
            frame = socket.next() => match frame {
                Some(Ok(Ws::Text(t))) => {
                    let p: Value = serde_json::from_str(&t).unwrap_or(Value::Null);
                    if p["op"].as_u64() == Some(1) {
                        s.state().heartbeats += 1;
                        let ack = json!({"op": 11, "d": null, "s": null, "t": null});
                        if socket.send(Ws::Text(ack.to_string().into())).await.is_err() {
                            break false;
                        }
                    }
                }
                // 1000/1001 end the session for good; other codes leave it resumable.
                Some(Ok(Ws::Close(frame))) => break frame.is_some_and(|f| f.code == 1000 || f.code == 1001),
                Some(Ok(_)) => {}
                Some(Err(_)) | None => break false,
            },
        }
    };
    let mut st = s.state();
    if end {
        st.sessions.remove(&session_id);
    } else if let Some(log) = st.sessions.get_mut(&session_id) {
        log.live = None;
    }
    drop(st);
    s.changed.notify_waiters();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn rest_calls_need_the_token_and_check_the_length() {
        let fake = DiscordFake::start("tok", "77", "ferro").await;
        let http = reqwest::Client::new();
        let url = format!("{}/channels/5/messages", fake.api_base_url());
        let r = http
            .post(&url)
            .json(&json!({"content": "hi"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401);
        let r = http
            .post(&url)
            .header("authorization", "Bot tok")
            .json(&json!({"content": "x".repeat(2001)}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400);
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["code"], 50035);
        fake.fail_next("createMessage", 429, 0.5);
        let r = http
            .post(&url)
            .header("authorization", "Bot tok")
            .json(&json!({"content": "hi"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 429);
        assert_eq!(r.headers()["retry-after"], "1");
        let r = http
            .post(&url)
            .header("authorization", "Bot tok")
            .json(&json!({"content": "hi"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(fake.sent("5").len(), 1);
    }
}
