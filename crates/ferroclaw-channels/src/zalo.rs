//! Zalo over the Zalo Bot Platform's API: the Bot API envelope Telegram's has (the same
//! client, `telegram::api::Api`), long polling with `getUpdates` (one update per answer,
//! no offset: the platform tracks what was read), plain text up to 2,000 characters,
//! direct messages only. One instance polls at a time (the account lease); each message
//! is handled once (its id in the store).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ferroclaw_config::settings::ZaloSettings;
use serde::Deserialize;
use serde_json::{json, Value};
use tracing::{info, warn};

use crate::dispatch::ChannelPolicy;
use crate::format::Markup;
use crate::lease::pause;
use crate::seam::{Inbound, Outbound, SendError};
use crate::service::Task;
use crate::telegram::api::{Api, ApiError};

pub const CHANNEL: &str = "zalo";
pub const ACCOUNT: &str = "default";
/// Zalo's limit for one message.
pub const LIMIT: usize = 2000;
const BACKOFF_MAX: Duration = Duration::from_secs(30);

pub struct ZaloOut {
    api: Api,
}

#[async_trait]
impl Outbound for ZaloOut {
    fn markup(&self) -> Markup {
        Markup::Plain
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
        let sent: Value = self
            .api
            .call_patiently("sendMessage", &json!({"chat_id": chat_id, "text": text}))
            .await
            .map_err(|e| SendError::Other(e.to_string()))?;
        Ok(sent["message_id"].as_str().unwrap_or_default().to_string())
    }

    async fn typing(&self, chat_id: &str) {
        let typing = json!({"chat_id": chat_id, "action": "typing"});
        if let Err(e) = self
            .api
            .call::<Value>("sendChatAction", &typing, Duration::from_secs(10))
            .await
        {
            tracing::debug!(error = %e, "zalo: typing indicator not shown");
        }
    }
}

fn api(settings: &ZaloSettings) -> Result<Api, String> {
    let token = settings.token.as_deref().ok_or_else(|| {
        format!(
            "{} is not set: the bot token is needed",
            settings.config.token_env
        )
    })?;
    Api::for_platform(CHANNEL, &settings.config.api_base_url, token).map_err(|e| e.to_string())
}

pub fn outbound(settings: &ZaloSettings) -> Result<Arc<dyn Outbound>, String> {
    Ok(Arc::new(ZaloOut {
        api: api(settings)?,
    }))
}

pub fn policy(cfg: &ferroclaw_config::ZaloConfig) -> ChannelPolicy {
    ChannelPolicy {
        dm_policy: cfg.dm_policy,
        group_policy: ferroclaw_config::GroupPolicy::Disabled,
        allow_from: cfg.allow_from.clone(),
        agent: cfg.agent.clone(),
        bindings: cfg.bindings.clone(),
        ..ChannelPolicy::default()
    }
}

#[derive(Debug, Deserialize)]
pub struct Update {
    pub event_name: Option<String>,
    pub message: Option<Message>,
}

#[derive(Debug, Deserialize)]
pub struct Message {
    pub message_id: String,
    pub from: From,
    pub chat: Chat,
    pub text: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct From {
    pub id: String,
    #[serde(alias = "first_name", alias = "name")]
    pub display_name: Option<String>,
    #[serde(default)]
    pub is_bot: bool,
}

#[derive(Debug, Deserialize)]
pub struct Chat {
    pub id: String,
    pub chat_type: Option<String>,
}

/// A Zalo message as the dispatcher sees it (`None`: not a text message).
pub fn inbound(m: &Message) -> Option<Inbound> {
    let text = m.text.as_deref()?;
    Some(Inbound {
        message_key: m.message_id.clone(),
        message_id: m.message_id.clone(),
        chat_id: m.chat.id.clone(),
        // Zalo bots answer people, not groups (the group policy is `disabled`).
        is_group: m.chat.chat_type.as_deref().is_some_and(|t| t != "PRIVATE"),
        sender_id: m.from.id.clone(),
        sender_username: None,
        sender_name: m
            .from
            .display_name
            .clone()
            .unwrap_or_else(|| m.from.id.clone()),
        text: text.trim().to_string(),
        mentioned: true,
        from_bot: m.from.is_bot,
        reply_in: None,
    })
}

pub(crate) async fn run(settings: ZaloSettings, task: Task) {
    let (status, stop) = (task.status.clone(), task.stop.clone());
    let api = match api(&settings) {
        Ok(api) => api,
        Err(why) => return status.fail(why),
    };
    let mut backoff = Duration::from_secs(1);
    let no_params = json!({});
    let me: Value = loop {
        let got = tokio::select! {
            got = api.call::<Value>("getMe", &no_params, Duration::from_secs(30)) => got,
            () = stop.cancelled() => return,
        };
        match got {
            Ok(me) => break me,
            Err(e) => {
                let state = if matches!(e.code(), Some(401 | 403 | 404)) {
                    "failed"
                } else {
                    "reconnecting"
                };
                status.error(state, e.to_string());
                pause(&stop, backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    };
    status.set_bot(
        me["account_name"]
            .as_str()
            .or(me["id"].as_str())
            .unwrap_or(CHANNEL)
            .to_string(),
    );
    let (dispatcher, lease) = task.dispatcher(CHANNEL, ACCOUNT, policy(&settings.config));
    let wait = Duration::from_secs(settings.config.poll_timeout_seconds);
    let mut holding = false;
    let mut webhook_checked = false;
    loop {
        if holding && !lease.renew().await {
            info!("zalo: another instance holds the bot now");
            holding = false;
        }
        if !holding {
            if !lease.acquire(&status, &stop).await {
                break;
            }
            holding = true;
        }
        if !webhook_checked {
            // With a webhook set, getUpdates does not work.
            if let Err(e) = api
                .call::<Value>("deleteWebhook", &json!({}), Duration::from_secs(30))
                .await
            {
                warn!(error = %e, "zalo: could not remove a webhook");
            }
            webhook_checked = true;
        }
        status.set_state("polling");
        let params = json!({"timeout": wait.as_secs().to_string()});
        let poll = api.call::<Update>("getUpdates", &params, wait + Duration::from_secs(15));
        let polled = lease.while_held(poll, &stop).await;
        let Some(result) = polled else {
            holding = false;
            continue;
        };
        match result {
            Ok(update) => {
                backoff = Duration::from_secs(1);
                status.clear_error();
                if let Some(msg) = update.message.as_ref().and_then(inbound) {
                    let handled = dispatcher.handle(msg).await;
                    status.handled(&handled);
                }
            }
            // Nothing arrived within the wait.
            Err(ApiError::Api { code: 408, .. }) => status.clear_error(),
            Err(e) => {
                let wait = match e.code() {
                    Some(401 | 403 | 404) => {
                        status.error("failed", format!("{e}: check the bot token"));
                        Duration::from_secs(60)
                    }
                    _ => {
                        status.error("reconnecting", e.to_string());
                        e.retry_after().unwrap_or(backoff)
                    }
                };
                warn!(error = %e, wait_s = wait.as_secs(), "zalo: polling failed; retrying");
                pause(&stop, wait).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
    lease.release().await;
    status.set_state("stopped");
}

/// What `doctor` says of the channel: the bot's name, or why it cannot work.
pub async fn probe(settings: &ZaloSettings) -> Result<String, String> {
    let me: Value = api(settings)?
        .call("getMe", &json!({}), Duration::from_secs(30))
        .await
        .map_err(|e| e.to_string())?;
    Ok(me["account_name"].as_str().unwrap_or("bot").to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn zalo_updates_become_direct_messages() {
        let u: Update =
            serde_json::from_value(json!({"ok": true, "event_name": "message.text.received",
            "message": {"chat": {"id": "e4ea", "chat_type": "PRIVATE"}, "text": " Xin chào ",
                        "message_id": "16f6", "date": 1766619597466_u64,
                        "from": {"id": "e4ea", "display_name": "Nguyen Van A", "is_bot": false}}}))
            .unwrap();
        let m = inbound(u.message.as_ref().unwrap()).unwrap();
        assert!(
            !m.is_group && m.mentioned && m.text == "Xin chào" && m.sender_name == "Nguyen Van A"
        );
        let sticker: Update = serde_json::from_value(json!({"message": {"chat": {"id": "e"},
            "message_id": "1", "from": {"id": "e"}, "sticker": "x"}}))
        .unwrap();
        assert!(inbound(sticker.message.as_ref().unwrap()).is_none());
    }
}
