//! A local fake of the Zalo Bot Platform API for one bot (`<base>/bot<token>/<method>`,
//! the `{ok, result | error_code, description}` envelope): `getMe`, `deleteWebhook`,
//! `getUpdates` (a long poll answering one update, or error 408 when none came within
//! `timeout`), `sendMessage` (1 to 2,000 characters), `sendChatAction`. Failures can be
//! scripted, 429s with a `retry_after`.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::killable::Served;
use crate::{lock, wait_until};

#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    pub params: Value,
    pub error_code: Option<u16>,
    pub at: Instant,
}

#[derive(Default)]
struct FakeState {
    next: u64,
    updates: VecDeque<Value>,
    calls: Vec<Call>,
    /// (chat id, text) of every message the bot sent.
    sent: Vec<(String, String)>,
    failures: HashMap<String, VecDeque<(u16, Option<u64>)>>,
}

struct Shared {
    token: String,
    state: Mutex<FakeState>,
    changed: Notify,
    updates_changed: Notify,
}

#[derive(Clone)]
pub struct ZaloFake {
    shared: Arc<Shared>,
    served: Arc<Served>,
}

impl ZaloFake {
    pub async fn start(token: &str) -> ZaloFake {
        let shared = Arc::new(Shared {
            token: token.into(),
            state: Mutex::new(FakeState::default()),
            changed: Notify::new(),
            updates_changed: Notify::new(),
        });
        let app = Router::new()
            .route("/{bot}/{method}", post(method))
            .with_state(shared.clone());
        let served = Served::start(0, app).await.expect("serving the Zalo fake");
        ZaloFake {
            shared,
            served: Arc::new(served),
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.served.port)
    }

    /// A text message from user `from` in their chat with the bot; returns its id.
    pub fn dm(&self, from: &str, name: &str, text: &str) -> String {
        self.message(from, name, text, false)
    }

    /// A message from another bot (Zalo marks it `is_bot`).
    pub fn from_bot(&self, from: &str, text: &str) -> String {
        self.message(from, "a bot", text, true)
    }

    fn message(&self, from: &str, name: &str, text: &str, is_bot: bool) -> String {
        let mut st = lock(&self.shared.state);
        st.next += 1;
        let n = st.next;
        let id = format!("{n:020x}");
        st.updates.push_back(json!({
            "event_name": "message.text.received",
            "message": {"message_id": id, "date": 1_764_000_000_000_u64 + n, "text": text,
                        "chat": {"id": from, "chat_type": "PRIVATE"},
                        "from": {"id": from, "display_name": name, "is_bot": is_bot}},
        }));
        drop(st);
        self.shared.updates_changed.notify_waiters();
        id
    }

    /// The next call of `method` fails with `error_code` (429: with `retry_after`).
    pub fn fail_next(&self, method: &str, error_code: u16, retry_after: Option<u64>) {
        lock(&self.shared.state)
            .failures
            .entry(method.into())
            .or_default()
            .push_back((error_code, retry_after));
    }

    pub fn calls_to(&self, method: &str) -> Vec<Call> {
        lock(&self.shared.state)
            .calls
            .iter()
            .filter(|c| c.method == method)
            .cloned()
            .collect()
    }

    pub fn sent_to(&self, chat: &str) -> Vec<String> {
        lock(&self.shared.state)
            .sent
            .iter()
            .filter(|(c, _)| c == chat)
            .map(|(_, t)| t.clone())
            .collect()
    }

    pub async fn wait_sent(
        &self,
        chat: &str,
        timeout: Duration,
        pred: impl Fn(&[String]) -> bool,
    ) -> bool {
        wait_until(&self.shared.changed, timeout, || pred(&self.sent_to(chat))).await
    }

    pub async fn disconnect(&self) {
        self.served.disconnect().await;
    }

    pub async fn restore(&self) -> io::Result<()> {
        self.served.restore().await
    }
}

fn error(code: u16, description: &str) -> Value {
    json!({"ok": false, "error_code": code, "description": description})
}

async fn method(
    State(s): State<Arc<Shared>>,
    Path((bot, method)): Path<(String, String)>,
    body: Option<Json<Value>>,
) -> Response {
    let params = body.map(|Json(b)| b).unwrap_or(Value::Null);
    let authorized = bot.strip_prefix("bot") == Some(s.token.as_str());
    let failure = if authorized {
        lock(&s.state)
            .failures
            .get_mut(&method)
            .and_then(VecDeque::pop_front)
    } else {
        None
    };
    let answer = if !authorized {
        error(401, "Unauthorized")
    } else if let Some((code, retry)) = failure {
        let mut e = error(
            code,
            if code == 429 {
                "Too Many Requests"
            } else {
                "Internal error"
            },
        );
        if let Some(r) = retry {
            e["parameters"] = json!({"retry_after": r});
        }
        e
    } else {
        match method.as_str() {
            "getMe" => json!({"ok": true, "result": {"id": "1459232241454765289",
                "account_name": "bot.ferro", "account_type": "BASIC", "can_join_groups": false}}),
            "deleteWebhook" => {
                json!({"ok": true, "result": {"url": "", "updated_at": 1_764_000_000_000_u64}})
            }
            "sendChatAction" => json!({"ok": true}),
            "getUpdates" => get_updates(&s, &params).await,
            "sendMessage" => {
                let chat = params["chat_id"].as_str().unwrap_or_default().to_string();
                let text = params["text"].as_str().unwrap_or_default().to_string();
                if chat.is_empty() {
                    error(400, "chat_id is required")
                } else if text.is_empty() || text.chars().count() > 2000 {
                    error(400, "text length must be between 1 and 2000")
                } else {
                    let mut st = lock(&s.state);
                    st.next += 1;
                    let id = format!("{:020x}", st.next);
                    st.sent.push((chat, text));
                    json!({"ok": true, "result": {"message_id": id, "date": 1_764_000_000_000_u64}})
                }
            }
            _ => error(404, "Not Found"),
        }
    };
    lock(&s.state).calls.push(Call {
        method,
        params,
        error_code: answer["error_code"].as_u64().map(|c| c as u16),
        at: Instant::now(),
    });
    s.changed.notify_waiters();
    Json(answer).into_response()
}

/// One update, or 408 once `timeout` seconds passed without one.
async fn get_updates(s: &Shared, params: &Value) -> Value {
    let secs = params["timeout"]
        .as_str()
        .and_then(|t| t.parse::<u64>().ok())
        .or(params["timeout"].as_u64())
        .unwrap_or(30)
        .min(60);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let arrived = s.updates_changed.notified();
        tokio::pin!(arrived);
        arrived.as_mut().enable();
        let next = lock(&s.state).updates.pop_front();
        if let Some(update) = next {
            return json!({"ok": true, "result": update});
        }
        tokio::select! {
            _ = arrived => {}
            _ = tokio::time::sleep_until(deadline) => return error(408, "Request timeout"),
        }
    }
}
