//! Feishu / Lark: events arrive at the gateway's `/channels/feishu/events` (the event
//! subscription's request URL), are checked against the verification token and queued
//! for this channel's task; answers are message cards (Markdown), started as
//! "Thinking…" and updated as the text grows (at most every 1.5 s: Feishu limits card
//! updates). Every instance behind the URL can take events; each message is handled
//! once (its id in the store), so Feishu's retries are not answered twice.

pub mod api;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ferroclaw_config::settings::FeishuSettings;
use serde_json::{json, Value};
use subtle::ConstantTimeEq;
use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::dispatch::ChannelPolicy;
use crate::format::Markup;
use crate::lease::pause;
use crate::seam::{Inbound, Outbound, SendError};
use crate::service::Task;
use api::Api;

pub const CHANNEL: &str = "feishu";
pub const ACCOUNT: &str = "default";
/// Cards take more, but long cards read badly on a phone.
pub const LIMIT: usize = 4000;
pub const PLACEHOLDER: &str = "Thinking…";
/// Events waiting for the channel's task; beyond, Feishu is told to retry later.
const QUEUE: usize = 1024;

/// Where the webhook puts events for the running task.
pub type Inbox = Arc<Mutex<Option<mpsc::Sender<Value>>>>;

/// A card showing `text`: Markdown, or plain text shown as written.
fn card(text: &str, markdown: bool) -> Value {
    let element = if markdown {
        json!({"tag": "markdown", "content": text})
    } else {
        json!({"tag": "div", "text": {"tag": "plain_text", "content": text}})
    };
    // `update_multi`: an update shows for everyone in the chat, not only its author.
    json!({"config": {"wide_screen_mode": true, "update_multi": true}, "elements": [element]})
}

pub struct FeishuOut {
    api: Api,
}

#[async_trait]
impl Outbound for FeishuOut {
    fn markup(&self) -> Markup {
        Markup::Markdown
    }

    fn limit(&self) -> usize {
        LIMIT
    }

    async fn send(
        &self,
        chat_id: &str,
        text: &str,
        formatted: bool,
        reply_to: Option<&str>,
    ) -> Result<String, SendError> {
        self.api
            .send_card(chat_id, &card(text, formatted), reply_to)
            .await
            .map_err(|e| SendError::Other(e.to_string()))
    }

    /// Feishu shows no typing indicator for bots; the placeholder card stands in.
    async fn typing(&self, _chat_id: &str) {}

    fn placeholder(&self) -> Option<&'static str> {
        Some(PLACEHOLDER)
    }

    fn edits(&self) -> bool {
        true
    }

    async fn edit(
        &self,
        _chat_id: &str,
        message_id: &str,
        text: &str,
        formatted: bool,
    ) -> Result<(), SendError> {
        self.api
            .update_card(message_id, &card(text, formatted))
            .await
            .map_err(|e| SendError::Other(e.to_string()))
    }
}

fn api(settings: &FeishuSettings) -> Result<Api, String> {
    let secret = settings.token.as_deref().ok_or_else(|| {
        format!(
            "{} is not set: the app secret is needed",
            settings.config.token_env
        )
    })?;
    Api::new(
        &settings.config.api_base_url,
        &settings.config.app_id,
        secret,
    )
    .map_err(|e| e.to_string())
}

pub fn outbound(settings: &FeishuSettings) -> Result<Arc<dyn Outbound>, String> {
    Ok(Arc::new(FeishuOut {
        api: api(settings)?,
    }))
}

pub fn policy(cfg: &ferroclaw_config::FeishuConfig) -> ChannelPolicy {
    ChannelPolicy {
        dm_policy: cfg.dm_policy,
        group_policy: cfg.group_policy,
        allow_from: cfg.allow_from.clone(),
        group_allow_from: cfg.group_allow_from.clone(),
        require_mention: cfg.require_mention,
        agent: cfg.agent.clone(),
        bindings: cfg.bindings.clone(),
    }
}

/// Why an event delivery was not taken.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("{0}")]
    Malformed(String),
    #[error("{0}")]
    Refused(&'static str),
    #[error("the channel is not running")]
    NotRunning,
    #[error("too many events waiting; retry later")]
    Busy,
}

/// Takes one delivery to the request URL: answers Feishu's URL check, queues a message
/// event, ignores other events. The verification token is compared in constant time.
pub fn accept(
    body: &[u8],
    verification_token: Option<&str>,
    inbox: &Inbox,
) -> Result<Value, WebhookError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| WebhookError::Malformed(format!("not JSON: {e}")))?;
    if v.get("encrypt").is_some() {
        return Err(WebhookError::Malformed(
            "encrypted events are not supported: clear the Encrypt Key of the event subscription"
                .into(),
        ));
    }
    let expected =
        verification_token.ok_or(WebhookError::Refused("no verification token is configured"))?;
    // v1 (and the URL check) carry `token` at the top, v2 in `header`.
    let given = v["header"]["token"]
        .as_str()
        .or(v["token"].as_str())
        .unwrap_or("");
    if !bool::from(given.as_bytes().ct_eq(expected.as_bytes())) {
        warn!("security.channels: feishu event with a wrong verification token refused");
        return Err(WebhookError::Refused("wrong verification token"));
    }
    if v["type"] == "url_verification" {
        let challenge = v["challenge"].as_str().unwrap_or_default();
        return Ok(json!({"challenge": challenge}));
    }
    if v["header"]["event_type"] != "im.message.receive_v1" {
        return Ok(json!({}));
    }
    let tx = inbox
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .ok_or(WebhookError::NotRunning)?;
    tx.try_send(v["event"].clone())
        .map_err(|_| WebhookError::Busy)?;
    Ok(json!({}))
}

/// A `im.message.receive_v1` event as the dispatcher sees it (`None`: not text).
pub fn inbound(event: &Value, bot_open_id: &str) -> Option<Inbound> {
    let m = &event["message"];
    if m["message_type"] != "text" {
        return None;
    }
    let content: Value = serde_json::from_str(m["content"].as_str()?).ok()?;
    let mut text = content["text"].as_str()?.to_string();
    let mut mentioned = false;
    for mention in m["mentions"].as_array().into_iter().flatten() {
        let key = mention["key"].as_str().unwrap_or_default();
        if key.is_empty() {
            continue;
        }
        if mention["id"]["open_id"].as_str() == Some(bot_open_id) {
            mentioned = true;
            text = text.replace(key, " ");
        } else {
            let name = format!("@{}", mention["name"].as_str().unwrap_or("someone"));
            text = text.replace(key, &name);
        }
    }
    let sender = event["sender"]["sender_id"]["open_id"]
        .as_str()?
        .to_string();
    let is_group = m["chat_type"] != "p2p";
    let id = m["message_id"].as_str()?.to_string();
    Some(Inbound {
        message_key: id.clone(),
        message_id: id,
        chat_id: m["chat_id"].as_str()?.to_string(),
        is_group,
        sender_id: sender.clone(),
        sender_username: None,
        sender_name: sender.clone(),
        text: text.split_whitespace().collect::<Vec<_>>().join(" "),
        mentioned: !is_group || mentioned,
        from_bot: event["sender"]["sender_type"] != "user" || sender == bot_open_id,
        reply_in: None,
    })
}

pub(crate) async fn run(settings: FeishuSettings, inbox: Inbox, task: Task) {
    let (status, stop) = (task.status.clone(), task.stop.clone());
    let api = match api(&settings) {
        Ok(api) => api,
        Err(why) => return status.fail(why),
    };
    let mut backoff = std::time::Duration::from_secs(1);
    let (bot, name) = loop {
        let got = tokio::select! {
            got = api.bot_info() => got,
            () = stop.cancelled() => return,
        };
        match got {
            Ok(me) => break me,
            Err(e) => {
                status.error("failed", e.to_string());
                pause(&stop, backoff).await;
                backoff = (backoff * 2).min(std::time::Duration::from_secs(60));
            }
        }
    };
    status.set_bot(name);
    status.clear_error();
    let (dispatcher, _) = task.dispatcher(CHANNEL, ACCOUNT, policy(&settings.config));
    let (tx, mut rx) = mpsc::channel::<Value>(QUEUE);
    *inbox.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
    status.set_state("listening");
    info!("feishu: taking events at /channels/feishu/events");
    loop {
        tokio::select! {
            event = rx.recv() => {
                let Some(event) = event else { break };
                if let Some(msg) = inbound(&event, &bot) {
                    let handled = dispatcher.handle(msg).await;
                    status.handled(&handled);
                }
            }
            () = stop.cancelled() => break,
        }
    }
    *inbox.lock().unwrap_or_else(|e| e.into_inner()) = None;
    status.set_state("stopped");
}

/// What `doctor` says of the channel: the bot's name, or why it cannot work.
pub async fn probe(settings: &FeishuSettings) -> Result<String, String> {
    if settings.app_token.is_none() {
        return Err(format!(
            "{} is not set: events cannot be checked",
            settings.config.verification_token_env
        ));
    }
    let (_, name) = api(settings)?.bot_info().await.map_err(|e| e.to_string())?;
    Ok(name)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn deliveries_are_checked_and_messages_read() {
        let inbox: Inbox = Arc::new(Mutex::new(None));
        let check = json!({"type": "url_verification", "token": "vt", "challenge": "c-1"});
        let ok = accept(check.to_string().as_bytes(), Some("vt"), &inbox).unwrap();
        assert_eq!(ok, json!({"challenge": "c-1"}));
        let forged = json!({"type": "url_verification", "token": "vt2", "challenge": "c-1"});
        assert!(matches!(
            accept(forged.to_string().as_bytes(), Some("vt"), &inbox),
            Err(WebhookError::Refused(_))
        ));
        assert!(matches!(
            accept(b"{", Some("vt"), &inbox),
            Err(WebhookError::Malformed(_))
        ));
        let event = json!({"schema": "2.0", "header": {"token": "vt", "event_type": "im.message.receive_v1"},
            "event": {"sender": {"sender_id": {"open_id": "ou_ann"}, "sender_type": "user"},
                      "message": {"message_id": "om_1", "chat_id": "oc_g", "chat_type": "group", "message_type": "text",
                                  "content": "{\"text\":\"@_user_1 hi @_user_2\"}",
                                  "mentions": [{"key": "@_user_1", "id": {"open_id": "ou_bot"}, "name": "ferro"},
                                               {"key": "@_user_2", "id": {"open_id": "ou_bob"}, "name": "Bob"}]}}});
        assert!(matches!(
            accept(event.to_string().as_bytes(), Some("vt"), &inbox),
            Err(WebhookError::NotRunning)
        ));
        let m = inbound(&event["event"], "ou_bot").unwrap();
        assert!(m.is_group && m.mentioned && m.text == "hi @Bob" && m.sender_id == "ou_ann");
        assert!(!inbound(&event["event"], "ou_other").unwrap().mentioned);
    }
}
