//! A local fake of the Feishu Open API for one app (tenant access tokens, the bot's
//! info, message cards sent, replied and updated; `{"code": 0, ..}` envelopes, code
//! 99991663 for an unknown token, HTTP 429 with `x-ogw-ratelimit-reset`), and the
//! event side: it delivers `im.message.receive_v1` events (schema 2.0) and the URL check
//! to a request URL, signed with the verification token, as Feishu's event subscription
//! does.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::killable::Served;
use crate::{lock, wait_until};

/// A card the bot sent, as it is now: the text of its first element.
#[derive(Debug, Clone, PartialEq)]
pub struct Sent {
    pub message_id: String,
    /// The chat (`oc_…`) or user (`ou_…`) it went to, or the chat of the replied message.
    pub to: String,
    pub reply_to: Option<String>,
    pub text: String,
    /// `markdown` or `plain_text`.
    pub tag: String,
    pub updates: u32,
}

#[derive(Debug, Clone)]
pub struct Call {
    pub what: &'static str,
    pub status: u16,
    pub at: Instant,
}

#[derive(Default)]
struct FakeState {
    next: u64,
    tokens: Vec<String>,
    sent: Vec<Sent>,
    calls: Vec<Call>,
    limits: VecDeque<u64>,
    /// message id → chat, for replies.
    chats: Vec<(String, String)>,
}

struct Shared {
    app_id: String,
    app_secret: String,
    bot_open_id: String,
    state: Mutex<FakeState>,
    changed: Notify,
}

#[derive(Clone)]
pub struct FeishuFake {
    shared: Arc<Shared>,
    served: Arc<Served>,
    verification_token: String,
    http: reqwest::Client,
}

impl FeishuFake {
    pub async fn start(app_id: &str, app_secret: &str, verification_token: &str) -> FeishuFake {
        let shared = Arc::new(Shared {
            app_id: app_id.into(),
            app_secret: app_secret.into(),
            bot_open_id: "ou_bot0000000000000000000000000000".into(),
            state: Mutex::new(FakeState::default()),
            changed: Notify::new(),
        });
        let app = Router::new()
            .route(
                "/open-apis/auth/v3/tenant_access_token/internal",
                post(tenant_token),
            )
            .route("/open-apis/bot/v3/info", get(bot_info))
            .route("/open-apis/im/v1/messages", post(send))
            .route("/open-apis/im/v1/messages/{id}/reply", post(reply))
            .route("/open-apis/im/v1/messages/{id}", patch(update))
            .with_state(shared.clone());
        let served = Served::start(0, app)
            .await
            .expect("serving the Feishu fake");
        FeishuFake {
            shared,
            served: Arc::new(served),
            verification_token: verification_token.into(),
            http: reqwest::Client::new(),
        }
    }

    pub fn api_base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.served.port)
    }

    pub fn bot_open_id(&self) -> &str {
        &self.shared.bot_open_id
    }

    /// Posts the URL check to `url` with `token`; the HTTP status and answer.
    pub async fn url_check(&self, url: &str, token: &str, challenge: &str) -> (u16, Value) {
        let body = json!({"type": "url_verification", "token": token, "challenge": challenge});
        self.post(url, &body).await
    }

    /// Delivers a text message event to `url`; returns (status, message id). `group`:
    /// the chat is a group, else a direct chat with `sender`; `mention` names the bot.
    pub async fn deliver(
        &self,
        url: &str,
        sender: &str,
        group: Option<&str>,
        text: &str,
        mention: bool,
    ) -> (u16, String) {
        let chat = group.map_or_else(|| format!("oc_p2p_{sender}"), str::to_string);
        let id = {
            let mut st = lock(&self.shared.state);
            st.next += 1;
            let id = format!("om_{:016x}", st.next);
            st.chats.push((id.clone(), chat));
            id
        };
        let event = self.event(&id, sender, group, text, mention, "user");
        (self.post(url, &event).await.0, id)
    }

    /// The same event delivered again (Feishu retries when unsure it arrived).
    pub fn event(
        &self,
        id: &str,
        sender: &str,
        group: Option<&str>,
        text: &str,
        mention: bool,
        sender_type: &str,
    ) -> Value {
        let (content, mentions) = if mention {
            (
                format!("@_user_1 {text}"),
                json!([{"key": "@_user_1", "id": {"open_id": self.shared.bot_open_id}, "name": "ferro"}]),
            )
        } else {
            (text.to_string(), json!([]))
        };
        let chat = group.map_or_else(|| format!("oc_p2p_{sender}"), str::to_string);
        json!({
            "schema": "2.0",
            "header": {"event_id": format!("ev_{id}"), "event_type": "im.message.receive_v1",
                       "create_time": "1764000000000", "token": self.verification_token,
                       "app_id": self.shared.app_id, "tenant_key": "tk"},
            "event": {
                "sender": {"sender_id": {"open_id": sender, "union_id": "on_x", "user_id": "u"}, "sender_type": sender_type},
                "message": {"message_id": id, "chat_id": chat, "chat_type": if group.is_some() { "group" } else { "p2p" },
                            "message_type": "text", "content": json!({"text": content}).to_string(),
                            "mentions": mentions, "create_time": "1764000000000"},
            },
        })
    }

    pub async fn post(&self, url: &str, body: &Value) -> (u16, Value) {
        let resp = self
            .http
            .post(url)
            .json(body)
            .send()
            .await
            .expect("the request URL answers");
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// The next message call is answered 429, reset after `secs`.
    pub fn rate_limit_next(&self, secs: u64) {
        lock(&self.shared.state).limits.push_back(secs);
    }

    /// Forgets every tenant token handed out (they expire).
    pub fn expire_tokens(&self) {
        lock(&self.shared.state).tokens.clear();
    }

    pub fn sent_to(&self, to: &str) -> Vec<Sent> {
        lock(&self.shared.state)
            .sent
            .iter()
            .filter(|s| s.to == to)
            .cloned()
            .collect()
    }

    pub fn calls(&self) -> Vec<Call> {
        lock(&self.shared.state).calls.clone()
    }

    pub async fn wait_sent(
        &self,
        to: &str,
        timeout: Duration,
        pred: impl Fn(&[Sent]) -> bool,
    ) -> bool {
        wait_until(&self.shared.changed, timeout, || pred(&self.sent_to(to))).await
    }
}

fn ok(data: Value) -> Response {
    Json(json!({"code": 0, "msg": "success", "data": data})).into_response()
}

fn record(s: &Shared, what: &'static str, status: u16) {
    lock(&s.state).calls.push(Call {
        what,
        status,
        at: Instant::now(),
    });
    s.changed.notify_waiters();
}

/// `None` when the bearer is a live tenant token; else the refusal (and a scripted 429).
fn check(s: &Shared, headers: &HeaderMap, what: &'static str) -> Option<Response> {
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    let mut st = lock(&s.state);
    if !st.tokens.iter().any(|t| t == token) {
        drop(st);
        record(s, what, 400);
        return Some(
            (StatusCode::BAD_REQUEST, Json(json!({"code": 99991663, "msg": "Invalid access token for authorization. Please make a request with token attached."})))
                .into_response(),
        );
    }
    if what != "info" {
        if let Some(secs) = st.limits.pop_front() {
            drop(st);
            record(s, what, 429);
            let mut resp = (
                StatusCode::TOO_MANY_REQUESTS,
                Json(json!({"code": 99991400, "msg": "request trigger frequency limit"})),
            )
                .into_response();
            if let Ok(v) = secs.to_string().parse() {
                resp.headers_mut().insert("x-ogw-ratelimit-reset", v);
            }
            return Some(resp);
        }
    }
    None
}

async fn tenant_token(State(s): State<Arc<Shared>>, Json(body): Json<Value>) -> Response {
    if body["app_id"] != s.app_id.as_str() || body["app_secret"] != s.app_secret.as_str() {
        record(&s, "token", 400);
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"code": 10014, "msg": "app secret invalid"})),
        )
            .into_response();
    }
    let token = {
        let mut st = lock(&s.state);
        st.next += 1;
        let t = format!("t-{:032x}", st.next);
        st.tokens.push(t.clone());
        t
    };
    record(&s, "token", 200);
    Json(json!({"code": 0, "msg": "ok", "tenant_access_token": token, "expire": 7200}))
        .into_response()
}

async fn bot_info(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Some(refused) = check(&s, &headers, "info") {
        return refused;
    }
    record(&s, "info", 200);
    Json(json!({"code": 0, "msg": "ok", "bot": {"activate_status": 2, "app_name": "ferro", "open_id": s.bot_open_id}}))
        .into_response()
}

/// The card's text and element tag, or why it is not a card the fake takes.
fn card_text(content: &Value) -> Result<(String, String), String> {
    let card: Value =
        serde_json::from_str(content.as_str().ok_or("content must be a JSON string")?)
            .map_err(|e| format!("content is not JSON: {e}"))?;
    let el = &card["elements"][0];
    let (text, tag) = match el["tag"].as_str() {
        Some("markdown") => (el["content"].as_str(), "markdown"),
        Some("div") => (el["text"]["content"].as_str(), "plain_text"),
        _ => (None, ""),
    };
    let text = text.ok_or("the card has no text element")?.to_string();
    Ok((text, tag.to_string()))
}

fn store(s: &Shared, to: String, reply_to: Option<String>, body: &Value) -> Response {
    if body["msg_type"] != "interactive" {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"code": 230001, "msg": "msg_type must be interactive here"})),
        )
            .into_response();
    }
    let (text, tag) = match card_text(&body["content"]) {
        Ok(t) => t,
        Err(why) => {
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"code": 230001, "msg": why})),
            )
                .into_response()
        }
    };
    let id = {
        let mut st = lock(&s.state);
        st.next += 1;
        let id = format!("om_{:016x}", st.next);
        st.chats.push((id.clone(), to.clone()));
        st.sent.push(Sent {
            message_id: id.clone(),
            to,
            reply_to,
            text,
            tag,
            updates: 0,
        });
        id
    };
    ok(json!({"message_id": id, "msg_type": "interactive"}))
}

async fn send(
    State(s): State<Arc<Shared>>,
    Query(q): Query<std::collections::HashMap<String, String>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if let Some(refused) = check(&s, &headers, "send") {
        return refused;
    }
    let kind = q.get("receive_id_type").map(String::as_str).unwrap_or("");
    let to = body["receive_id"].as_str().unwrap_or_default().to_string();
    let fits = match kind {
        "chat_id" => to.starts_with("oc_"),
        "open_id" => to.starts_with("ou_"),
        _ => false,
    };
    if !fits {
        record(&s, "send", 400);
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"code": 99992402, "msg": "field validation failed: receive_id"})),
        )
            .into_response();
    }
    let resp = store(&s, to, None, &body);
    record(&s, "send", resp.status().as_u16());
    resp
}

async fn reply(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if let Some(refused) = check(&s, &headers, "reply") {
        return refused;
    }
    // The replied message's chat: one the fake delivered (its id says so) or sent.
    let chat = {
        let st = lock(&s.state);
        st.chats
            .iter()
            .find(|(m, _)| *m == id)
            .map(|(_, c)| c.clone())
    };
    let Some(chat) = chat else {
        record(&s, "reply", 400);
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"code": 230011, "msg": "message not found"})),
        )
            .into_response();
    };
    let resp = store(&s, chat, Some(id), &body);
    record(&s, "reply", resp.status().as_u16());
    resp
}

async fn update(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if let Some(refused) = check(&s, &headers, "update") {
        return refused;
    }
    let (text, tag) = match card_text(&body["content"]) {
        Ok(t) => t,
        Err(why) => {
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"code": 230001, "msg": why})),
            )
                .into_response()
        }
    };
    let found = {
        let mut st = lock(&s.state);
        match st.sent.iter_mut().find(|m| m.message_id == id) {
            Some(m) => {
                m.text = text;
                m.tag = tag;
                m.updates += 1;
                true
            }
            None => false,
        }
    };
    if !found {
        record(&s, "update", 400);
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"code": 230011, "msg": "message not found"})),
        )
            .into_response();
    }
    record(&s, "update", 200);
    ok(json!({}))
}
