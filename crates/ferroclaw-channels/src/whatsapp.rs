//! WhatsApp through a bridge: a separate process that speaks WhatsApp Web (Baileys,
//! whatsmeow, whatsapp-web.js) and relays JSON over a WebSocket, as the peers do. From
//! the bridge: `{"type":"message", id, sender, chat?, pn?, pushName?, content, isGroup,
//! fromMe?, mentions?}`, `{"type":"status", status, me?}`, `{"type":"qr", qr}`,
//! `{"type":"error", error}`; to it: `{"type":"send", to, text}` (and first `{"type":
//! "auth", token}` when a token is configured). No typing indicator, no edits: the
//! answer is sent when it is complete.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use ferroclaw_config::settings::WhatsAppSettings;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::{interval_at, Instant};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message as Ws;
use tracing::{info, warn};

use crate::dispatch::ChannelPolicy;
use crate::format::Markup;
use crate::lease::{pause, RENEW_EVERY};
use crate::seam::{Inbound, Outbound, SendError};
use crate::service::Task;

pub const CHANNEL: &str = "whatsapp";
pub const ACCOUNT: &str = "default";
/// WhatsApp takes far longer messages; shorter ones read better on a phone.
pub const LIMIT: usize = 4000;
const BACKOFF_MAX: Duration = Duration::from_secs(30);
const HANDSHAKE: Duration = Duration::from_secs(20);
const MAX_FRAME: usize = 4 * 1024 * 1024;

/// The open bridge connection's outgoing side, while there is one.
pub type Link = Arc<Mutex<Option<mpsc::UnboundedSender<String>>>>;

pub struct WhatsAppOut {
    link: Link,
}

#[async_trait]
impl Outbound for WhatsAppOut {
    fn markup(&self) -> Markup {
        Markup::WhatsApp
    }

    fn limit(&self) -> usize {
        LIMIT
    }

    async fn send(
        &self,
        chat_id: &str,
        text: &str,
        _formatted: bool,
        _reply_to: Option<&str>,
    ) -> Result<String, SendError> {
        let frame = json!({"type": "send", "to": chat_id, "text": text}).to_string();
        let link = self.link.lock().unwrap_or_else(|e| e.into_inner());
        match link.as_ref() {
            Some(tx) if tx.send(frame).is_ok() => Ok(format!("wa-{}", uuid::Uuid::now_v7())),
            _ => Err(SendError::Other(
                "not connected to the WhatsApp bridge".into(),
            )),
        }
    }

    async fn typing(&self, _chat_id: &str) {}

    /// A direct session is keyed by the phone number; the bridge wants its chat id.
    async fn direct_chat(&self, peer: &str) -> Result<String, SendError> {
        Ok(if peer.contains('@') {
            peer.to_string()
        } else {
            format!("{peer}@s.whatsapp.net")
        })
    }
}

pub fn outbound(_settings: &WhatsAppSettings) -> (Arc<dyn Outbound>, Link) {
    let link: Link = Arc::new(Mutex::new(None));
    (Arc::new(WhatsAppOut { link: link.clone() }), link)
}

pub fn policy(cfg: &ferroclaw_config::WhatsAppConfig) -> ChannelPolicy {
    ChannelPolicy {
        dm_policy: cfg.dm_policy,
        group_policy: cfg.group_policy,
        // Numbers as people write them: `+1 555-123 4567`.
        allow_from: cfg
            .allow_from
            .iter()
            .map(|n| number(n).chars().filter(char::is_ascii_digit).collect())
            .collect(),
        group_allow_from: cfg.group_allow_from.clone(),
        require_mention: cfg.require_mention,
        agent: cfg.agent.clone(),
        bindings: cfg.bindings.clone(),
    }
}

/// `+1 555…`, `1555…@s.whatsapp.net`, `1555…:12@s.whatsapp.net` → `1555…`.
fn number(id: &str) -> &str {
    let user = id.split('@').next().unwrap_or(id);
    let user = user.split(':').next().unwrap_or(user);
    user.trim().trim_start_matches('+')
}

#[derive(Debug, Deserialize)]
pub struct BridgeMessage {
    pub id: String,
    pub sender: String,
    pub chat: Option<String>,
    /// The phone number when `sender` is a privacy id (`…@lid`).
    pub pn: Option<String>,
    #[serde(rename = "pushName")]
    pub push_name: Option<String>,
    #[serde(default)]
    pub content: String,
    #[serde(default, rename = "isGroup")]
    pub is_group: bool,
    #[serde(default, rename = "fromMe")]
    pub from_me: bool,
    #[serde(default)]
    pub mentions: Vec<String>,
}

pub fn inbound(m: &BridgeMessage, me: Option<&str>) -> Inbound {
    let chat = m.chat.clone().unwrap_or_else(|| m.sender.clone());
    let sender = number(m.pn.as_deref().unwrap_or(&m.sender)).to_string();
    let mine = me.map(number);
    let mentioned = mine.is_some_and(|n| {
        m.mentions.iter().any(|j| number(j) == n) || m.content.contains(&format!("@{n}"))
    });
    let mut text = m.content.clone();
    if let Some(n) = mine {
        text = text.replace(&format!("@{n}"), " ");
    }
    Inbound {
        message_key: m.id.clone(),
        message_id: m.id.clone(),
        chat_id: chat,
        is_group: m.is_group,
        sender_id: sender.clone(),
        sender_username: None,
        sender_name: m.push_name.clone().unwrap_or(sender),
        text: text.split_whitespace().collect::<Vec<_>>().join(" "),
        mentioned: !m.is_group || mentioned,
        from_bot: m.from_me,
        reply_in: None,
    }
}

pub(crate) async fn run(settings: WhatsAppSettings, link: Link, task: Task) {
    let (status, stop) = (task.status.clone(), task.stop.clone());
    let (dispatcher, lease) = task.dispatcher(CHANNEL, ACCOUNT, policy(&settings.config));
    let mut me: Option<String> = None;
    let mut backoff = Duration::from_secs(1);
    loop {
        if !lease.acquire(&status, &stop).await {
            break;
        }
        status.set_state("connecting");
        let mut config = WebSocketConfig::default();
        config.max_message_size = Some(MAX_FRAME);
        config.max_frame_size = Some(MAX_FRAME);
        let connecting = tokio_tungstenite::connect_async_with_config(
            settings.config.bridge_url.as_str(),
            Some(config),
            false,
        );
        let mut ws = match tokio::time::timeout(HANDSHAKE, connecting).await {
            Ok(Ok((ws, _))) => ws,
            failed => {
                let why = match failed {
                    Ok(Err(e)) => e.to_string(),
                    _ => "no answer to the handshake".into(),
                };
                status.error("reconnecting", format!("bridge: {why}"));
                pause(&stop, backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        if let Some(token) = &settings.token {
            let auth = json!({"type": "auth", "token": token}).to_string();
            if ws.send(Ws::text(auth)).await.is_err() {
                continue;
            }
        }
        info!("whatsapp: connected to the bridge");
        status.clear_error();
        status.set_state("connected");
        backoff = Duration::from_secs(1);
        let (tx, mut outgoing) = mpsc::unbounded_channel::<String>();
        *link.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
        let mut renew = interval_at(Instant::now() + RENEW_EVERY, RENEW_EVERY);
        let stopped = loop {
            tokio::select! {
                frame = ws.next() => {
                    let text = match frame {
                        Some(Ok(Ws::Text(t))) => t,
                        Some(Ok(Ws::Close(_))) | None => break false,
                        Some(Ok(_)) => continue,
                        Some(Err(e)) => {
                            warn!(error = %e, "whatsapp: bridge connection lost");
                            break false;
                        }
                    };
                    let v: serde_json::Value = match serde_json::from_str(&text) {
                        Ok(v) => v,
                        Err(e) => {
                            warn!(error = %e, "whatsapp: a bridge frame that is not JSON; ignored");
                            continue;
                        }
                    };
                    match v["type"].as_str() {
                        Some("message") => match serde_json::from_value::<BridgeMessage>(v) {
                            Ok(m) => {
                                let handled = dispatcher.handle(inbound(&m, me.as_deref())).await;
                                status.handled(&handled);
                            }
                            Err(e) => warn!(error = %e, "whatsapp: a message that could not be read"),
                        },
                        Some("status") => {
                            if let Some(jid) = v["me"].as_str() {
                                me = Some(jid.to_string());
                                status.set_bot(number(jid).to_string());
                            }
                            let state = v["status"].as_str().unwrap_or("");
                            info!(state, "whatsapp: bridge status");
                            if state == "disconnected" {
                                status.error("reconnecting", "the bridge lost WhatsApp".into());
                            }
                        }
                        Some("qr") => {
                            warn!("whatsapp: the bridge waits for a QR code to be scanned (Linked Devices)");
                            status.error("failed", "the bridge is not linked: scan its QR code".into());
                        }
                        Some("error") => {
                            let e = v["error"].as_str().unwrap_or("unknown").to_string();
                            warn!(error = %e, "whatsapp: the bridge reports an error");
                            status.error("connected", format!("bridge: {e}"));
                        }
                        _ => {}
                    }
                }
                Some(frame) = outgoing.recv() => {
                    if ws.send(Ws::text(frame)).await.is_err() {
                        break false;
                    }
                }
                _ = renew.tick() => {
                    if !lease.renew().await {
                        break false;
                    }
                }
                () = stop.cancelled() => break true,
            }
        };
        *link.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let _ = tokio::time::timeout(Duration::from_secs(2), ws.close(None)).await;
        if stopped {
            break;
        }
        status.error("reconnecting", "the bridge connection was lost".into());
        pause(&stop, backoff).await;
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
    lease.release().await;
    status.set_state("stopped");
}

/// What `doctor` says of the channel: whether the bridge answers.
pub async fn probe(settings: &WhatsAppSettings) -> Result<String, String> {
    let url = settings.config.bridge_url.as_str();
    match tokio::time::timeout(
        Duration::from_secs(5),
        tokio_tungstenite::connect_async(url),
    )
    .await
    {
        Ok(Ok((mut ws, _))) => {
            let _ = ws.close(None).await;
            Ok(format!("bridge at {url}"))
        }
        Ok(Err(e)) => Err(format!("the bridge at {url} does not answer: {e}")),
        Err(_) => Err(format!("the bridge at {url} does not answer")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn bridge_messages_are_read_with_numbers_and_mentions() {
        let m: BridgeMessage = serde_json::from_value(json!({"type": "message", "id": "A1",
            "sender": "15551234567@s.whatsapp.net", "content": "hi", "isGroup": false, "pushName": "Ann"}))
        .unwrap();
        let i = inbound(&m, None);
        assert_eq!(
            (i.chat_id.as_str(), i.sender_id.as_str()),
            ("15551234567@s.whatsapp.net", "15551234567")
        );
        assert!(i.mentioned && !i.is_group && i.sender_name == "Ann");
        let g: BridgeMessage = serde_json::from_value(json!({"type": "message", "id": "A2",
            "sender": "15550000001:3@s.whatsapp.net", "chat": "1203630@g.us", "pn": "+15550000001",
            "content": "@15559999999 what now?", "isGroup": true, "mentions": ["15559999999@s.whatsapp.net"]}))
        .unwrap();
        let i = inbound(&g, Some("15559999999:7@s.whatsapp.net"));
        assert!(i.is_group && i.mentioned && i.text == "what now?" && i.chat_id == "1203630@g.us");
        assert_eq!(i.sender_id, "15550000001");
        assert!(!inbound(&g, Some("15558888888@s.whatsapp.net")).mentioned);
        let p = policy(&ferroclaw_config::WhatsAppConfig {
            allow_from: vec!["+1 5551234567".into(), "15557654321@s.whatsapp.net".into()],
            ..Default::default()
        });
        assert_eq!(p.allow_from, vec!["15551234567", "15557654321"]);
    }
}
