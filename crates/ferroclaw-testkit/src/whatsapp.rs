//! A local fake of a WhatsApp bridge (the WebSocket relay the peers run next to
//! WhatsApp Web): on connect it says `{"type":"status","status":"connected","me":..}`,
//! relays pushed messages as `{"type":"message",..}` and records every `{"type":"send",
//! to, text}`. With a token, the first frame must be `{"type":"auth","token":..}` or the
//! socket is closed with 4001. Like the real bridges it keeps nothing for a client that
//! is not connected.

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message as Ws, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::sync::{mpsc, Notify};

use crate::killable::Served;
use crate::{lock, wait_until};

/// A message the bot sent through the bridge.
#[derive(Debug, Clone, PartialEq)]
pub struct Sent {
    pub to: String,
    pub text: String,
}

#[derive(Default)]
struct FakeState {
    next: u64,
    live: Vec<mpsc::UnboundedSender<Value>>,
    connections: u32,
    most_live: usize,
    refused: u32,
    sent: Vec<Sent>,
}

struct Shared {
    me: String,
    token: Option<String>,
    state: Mutex<FakeState>,
    changed: Notify,
}

#[derive(Clone)]
pub struct WhatsAppBridgeFake {
    shared: Arc<Shared>,
    served: Arc<Served>,
}

impl WhatsAppBridgeFake {
    /// A bridge linked to the phone number `me`, asking for `token` when given.
    pub async fn start(me: &str, token: Option<&str>) -> WhatsAppBridgeFake {
        let shared = Arc::new(Shared {
            me: format!("{me}:7@s.whatsapp.net"),
            token: token.map(str::to_string),
            state: Mutex::new(FakeState::default()),
            changed: Notify::new(),
        });
        let app = Router::new()
            .route("/", any(upgrade))
            .with_state(shared.clone());
        let served = Served::start(0, app)
            .await
            .expect("serving the bridge fake");
        WhatsAppBridgeFake {
            shared,
            served: Arc::new(served),
        }
    }

    pub fn url(&self) -> String {
        format!("ws://127.0.0.1:{}", self.served.port)
    }

    /// A direct message from `number` (digits); returns its id. `false` from
    /// [`WhatsAppBridgeFake::connected`] means nobody will get it.
    pub fn dm(&self, number: &str, name: &str, text: &str) -> String {
        self.push(
            json!({"sender": format!("{number}@s.whatsapp.net"), "pushName": name,
                         "content": text, "isGroup": false}),
        )
    }

    /// A group message; `mention` names the bot the way WhatsApp clients do.
    pub fn group(&self, group: &str, number: &str, text: &str, mention: bool) -> String {
        let me = self
            .shared
            .me
            .split(':')
            .next()
            .unwrap_or_default()
            .to_string();
        let (content, mentions) = if mention {
            (
                format!("@{me} {text}"),
                json!([format!("{me}@s.whatsapp.net")]),
            )
        } else {
            (text.to_string(), json!([]))
        };
        self.push(
            json!({"sender": format!("{number}@s.whatsapp.net"), "chat": group,
                         "content": content, "isGroup": true, "mentions": mentions}),
        )
    }

    /// A message the linked phone itself sent (the bot's own, seen by the bridge).
    pub fn from_me(&self, chat: &str, text: &str) -> String {
        self.push(
            json!({"sender": self.shared.me, "chat": chat, "content": text,
                         "isGroup": false, "fromMe": true}),
        )
    }

    fn push(&self, mut message: Value) -> String {
        let mut st = lock(&self.shared.state);
        st.next += 1;
        let id = format!("3EB0{:08X}", st.next);
        message["type"] = json!("message");
        message["id"] = json!(id);
        message["timestamp"] = json!(1_764_000_000 + st.next);
        st.live.retain(|l| l.send(message.clone()).is_ok());
        id
    }

    pub fn connected(&self) -> bool {
        !lock(&self.shared.state).live.is_empty()
    }

    /// Connections accepted, the most open at once, and those refused (bad token).
    pub fn connections(&self) -> (u32, usize, u32) {
        let st = lock(&self.shared.state);
        (st.connections, st.most_live, st.refused)
    }

    pub fn sent_to(&self, chat: &str) -> Vec<String> {
        lock(&self.shared.state)
            .sent
            .iter()
            .filter(|s| s.to == chat)
            .map(|s| s.text.clone())
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

    pub async fn wait_connected(&self, timeout: Duration) -> bool {
        wait_until(&self.shared.changed, timeout, || self.connected()).await
    }

    pub async fn wait_refused(&self, timeout: Duration) -> bool {
        wait_until(&self.shared.changed, timeout, || self.connections().2 > 0).await
    }

    /// The bridge goes away until [`WhatsAppBridgeFake::restore`].
    pub async fn disconnect(&self) {
        self.served.disconnect().await;
        lock(&self.shared.state).live.clear();
        self.shared.changed.notify_waiters();
    }

    pub async fn restore(&self) -> io::Result<()> {
        self.served.restore().await
    }
}

async fn upgrade(
    State(s): State<Arc<Shared>>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    match ws {
        Ok(ws) => ws.on_upgrade(move |socket| connection(s, socket)),
        Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    }
}

async fn connection(s: Arc<Shared>, mut socket: WebSocket) {
    if let Some(token) = &s.token {
        let first = match socket.next().await {
            Some(Ok(Ws::Text(t))) => serde_json::from_str::<Value>(&t).unwrap_or(Value::Null),
            _ => Value::Null,
        };
        if first["type"] != "auth" || first["token"].as_str() != Some(token) {
            lock(&s.state).refused += 1;
            s.changed.notify_waiters();
            let _ = socket
                .send(Ws::Close(Some(CloseFrame {
                    code: 4001,
                    reason: "unauthorized".into(),
                })))
                .await;
            return;
        }
    }
    let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
    let _ = tx.send(json!({"type": "status", "status": "connected", "me": s.me}));
    {
        let mut st = lock(&s.state);
        st.connections += 1;
        st.live.push(tx);
        st.most_live = st.most_live.max(st.live.len());
    }
    s.changed.notify_waiters();
    loop {
        tokio::select! {
            out = rx.recv() => {
                let Some(out) = out else { break };
                if socket.send(Ws::Text(out.to_string().into())).await.is_err() {
                    break;
                }
            }
            frame = socket.next() => match frame {
                Some(Ok(Ws::Text(t))) => {
                    let v: Value = serde_json::from_str(&t).unwrap_or(Value::Null);
                    if v["type"] == "send" {
                        lock(&s.state).sent.push(Sent {
                            to: v["to"].as_str().unwrap_or_default().into(),
                            text: v["text"].as_str().unwrap_or_default().into(),
                        });
                        s.changed.notify_waiters();
                    }
                }
                Some(Ok(Ws::Close(_))) | Some(Err(_)) | None => break,
                Some(Ok(_)) => {}
            },
        }
    }
    rx.close();
    lock(&s.state).live.retain(|l| !l.is_closed());
    s.changed.notify_waiters();
}
