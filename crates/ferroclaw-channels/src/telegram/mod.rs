//! Telegram over the Bot API's long polling. One instance polls an account at a time: it
//! holds the account's lease in the store (renewed while it polls, taken over by another
//! instance when it lapses), keeps the update offset there, and every message is handled
//! once (checked in the store), so a handover neither loses nor repeats an answer.

pub mod api;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ferroclaw_config::settings::TelegramSettings;
use tracing::{info, warn};

use crate::dispatch::ChannelPolicy;
use crate::format::Markup;
use crate::lease::pause;
use crate::seam::{Inbound, Outbound, SendError};
use crate::service::Task;
use crate::status::StatusCell;
use api::{Api, ApiError, Message, User};

pub const CHANNEL: &str = "telegram";
pub const ACCOUNT: &str = "default";
/// Telegram's limit for one message (UTF-16 units after entity parsing).
pub const LIMIT: usize = 4096;
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// The platform side the dispatcher answers through.
pub struct TelegramOut {
    api: Api,
}

impl TelegramOut {
    pub fn new(api: Api) -> TelegramOut {
        TelegramOut { api }
    }
}

#[async_trait]
impl Outbound for TelegramOut {
    fn markup(&self) -> Markup {
        Markup::TelegramHtml
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
        match self
            .api
            .send_message(chat_id, text, formatted, reply_to)
            .await
        {
            Ok(m) => Ok(m.message_id.to_string()),
            Err(e) if e.is_markup() => Err(SendError::Markup(e.to_string())),
            Err(e) => Err(SendError::Other(e.to_string())),
        }
    }

    async fn typing(&self, chat_id: &str) {
        if let Err(e) = self.api.send_typing(chat_id).await {
            tracing::debug!(error = %e, "telegram: typing indicator not shown");
        }
    }

    fn edits(&self) -> bool {
        true
    }

    async fn edit(
        &self,
        chat_id: &str,
        message_id: &str,
        text: &str,
        formatted: bool,
    ) -> Result<(), SendError> {
        match self
            .api
            .edit_message_text(chat_id, message_id, text, formatted)
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if e.is_markup() => Err(SendError::Markup(e.to_string())),
            Err(e) => Err(SendError::Other(e.to_string())),
        }
    }
}

pub fn policy(cfg: &ferroclaw_config::TelegramConfig) -> ChannelPolicy {
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

/// A Bot API message as the dispatcher sees it (`None`: nothing to answer, such as a
/// photo without a caption or a service message).
pub fn inbound(msg: &Message, me: &User) -> Option<Inbound> {
    let from = msg.from.as_ref()?;
    let (text, entities) = match (&msg.text, &msg.caption) {
        (Some(t), _) => (t.as_str(), &msg.entities),
        (None, Some(c)) => (c.as_str(), &msg.caption_entities),
        (None, None) => return None,
    };
    let handle = me.username.as_deref().map(|u| format!("@{u}"));
    let names_me = |piece: &str| {
        handle.as_deref().is_some_and(|h| {
            piece.eq_ignore_ascii_case(h)
                || piece
                    .to_ascii_lowercase()
                    .ends_with(&h.to_ascii_lowercase())
        })
    };
    let units: Vec<u16> = text.encode_utf16().collect();
    let mentioned_in_entities = entities.iter().any(|e| {
        let piece = units
            .get(e.offset..e.offset.saturating_add(e.length))
            .map(String::from_utf16_lossy)
            .unwrap_or_default();
        match e.kind.as_str() {
            "mention" => handle
                .as_deref()
                .is_some_and(|h| piece.eq_ignore_ascii_case(h)),
            "bot_command" => names_me(&piece),
            "text_mention" => e.user.as_ref().is_some_and(|u| u.id == me.id),
            _ => false,
        }
    });
    let replied_to_me = msg
        .reply_to_message
        .as_ref()
        .and_then(|r| r.from.as_ref())
        .is_some_and(|u| u.id == me.id);
    let is_group = msg.chat.kind != "private";
    Some(Inbound {
        message_key: format!("{}:{}", msg.chat.id, msg.message_id),
        message_id: msg.message_id.to_string(),
        chat_id: msg.chat.id.to_string(),
        is_group,
        sender_id: from.id.to_string(),
        sender_username: from.username.clone(),
        sender_name: from.first_name.clone(),
        text: strip_handle(text, handle.as_deref()),
        mentioned: !is_group || mentioned_in_entities || replied_to_me,
        from_bot: from.is_bot || from.id == me.id,
        reply_in: None,
    })
}

/// The text without the bot's `@handle` (case-insensitive), which says nothing to the
/// model.
fn strip_handle(text: &str, handle: Option<&str>) -> String {
    let Some(handle) = handle else {
        return text.trim().to_string();
    };
    let lower = text.to_ascii_lowercase();
    let needle = handle.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut rest = 0;
    for (at, _) in lower.match_indices(&needle) {
        // Only a whole handle: `@ferro_bot` but not `@ferro_botany`.
        let end = at + needle.len();
        let whole = lower[end..]
            .chars()
            .next()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'));
        if whole && at >= rest {
            out.push_str(&text[rest..at]);
            rest = end;
        }
    }
    out.push_str(&text[rest..]);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// How the process sends on Telegram, or why it cannot.
pub fn outbound(settings: &TelegramSettings) -> Result<Arc<dyn Outbound>, String> {
    let token = settings.token.as_deref().ok_or_else(|| {
        format!(
            "{} is not set: the bot token is needed",
            settings.config.token_env
        )
    })?;
    let api = Api::new(&settings.config.api_base_url, token).map_err(|e| e.to_string())?;
    Ok(Arc::new(TelegramOut::new(api)))
}

/// Polls while the task is not stopped: gets the bot, takes the account's lease (or
/// stands by), long-polls updates and hands each message to the dispatcher.
pub(crate) async fn run(settings: TelegramSettings, task: Task) {
    let (status, stop) = (task.status.clone(), task.stop.clone());
    let Some(token) = settings.token.clone() else {
        return status.fail(format!("{} is not set", settings.config.token_env));
    };
    let api = match Api::new(&settings.config.api_base_url, &token) {
        Ok(api) => api,
        Err(e) => return status.fail(e.to_string()),
    };
    let me = tokio::select! {
        me = get_me(&api, &status) => me,
        () = stop.cancelled() => return,
    };
    status.set_bot(me.username.clone().unwrap_or_else(|| me.id.to_string()));
    let (dispatcher, lease) = task.dispatcher(CHANNEL, ACCOUNT, policy(&settings.config));
    let wait = Duration::from_secs(settings.config.poll_timeout_seconds);
    let mut backoff = Duration::from_secs(1);
    let mut webhook_checked = false;
    let mut offset: Option<i64> = None;
    let mut holding = false;
    loop {
        if holding && !lease.renew().await {
            info!(account = %lease.key(), "telegram: another instance holds the account now");
            holding = false;
        }
        if !holding {
            if !lease.acquire(&status, &stop).await {
                break;
            }
            offset = match lease.cursor().await {
                Ok(o) => o,
                Err(e) => {
                    status.error("storage", e.to_string());
                    pause(&stop, backoff).await;
                    continue;
                }
            };
            holding = true;
        }
        if !webhook_checked {
            // A webhook left set makes every getUpdates fail with 409.
            if let Err(e) = api.delete_webhook().await {
                warn!(error = %e, "telegram: could not remove a webhook");
            }
            webhook_checked = true;
        }
        status.set_state("polling");
        let poll = api.get_updates(offset, wait);
        let polled = lease.while_held(poll, &stop).await;
        let Some(result) = polled else {
            holding = false;
            continue;
        };
        match result {
            Ok(updates) => {
                backoff = Duration::from_secs(1);
                status.clear_error();
                for u in updates {
                    if let Some(msg) = u.message.as_ref().and_then(|m| inbound(m, &me)) {
                        let handled = dispatcher.handle(msg).await;
                        status.handled(&handled);
                    }
                    offset = Some(u.update_id + 1);
                    if let Err(e) = lease.set_cursor(u.update_id + 1).await {
                        warn!(error = %e, "telegram: update offset not saved");
                    }
                }
            }
            Err(e) => {
                let wait = match (&e, e.code()) {
                    (_, Some(409)) => {
                        warn!(error = %e, "telegram: another process polls this bot");
                        status.error("conflict", e.to_string());
                        backoff
                    }
                    (_, Some(401)) | (_, Some(404)) => {
                        status.error("failed", format!("{e}: check the bot token"));
                        Duration::from_secs(60)
                    }
                    _ => {
                        status.error("reconnecting", e.to_string());
                        e.retry_after().unwrap_or(backoff)
                    }
                };
                warn!(error = %e, wait_s = wait.as_secs(), "telegram: polling failed; retrying");
                pause(&stop, wait).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
    lease.release().await;
    status.set_state("stopped");
}

/// What `doctor` says of the channel: the bot's name, or why it cannot work.
pub async fn probe(settings: &TelegramSettings) -> Result<String, String> {
    let token = settings
        .token
        .as_deref()
        .ok_or_else(|| format!("{} is not set", settings.config.token_env))?;
    let api = Api::new(&settings.config.api_base_url, token).map_err(|e| e.to_string())?;
    let me = api.get_me().await.map_err(|e| e.to_string())?;
    Ok(me
        .username
        .map(|u| format!("@{u}"))
        .unwrap_or_else(|| me.id.to_string()))
}

async fn get_me(api: &Api, status: &StatusCell) -> User {
    let mut backoff = Duration::from_secs(1);
    loop {
        match api.get_me().await {
            Ok(me) => return me,
            Err(e) => {
                let state = if matches!(
                    e,
                    ApiError::Api {
                        code: 401 | 404,
                        ..
                    }
                ) {
                    "failed"
                } else {
                    "reconnecting"
                };
                status.error(state, format!("{e}"));
                tokio::time::sleep(e.retry_after().unwrap_or(backoff)).await;
                backoff = (backoff * 2).min(Duration::from_secs(60));
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_handle_is_taken_out_only_where_it_is_whole() {
        let h = Some("@ferro_bot");
        assert_eq!(strip_handle("@Ferro_Bot what is 2+2?", h), "what is 2+2?");
        assert_eq!(strip_handle("hey @ferro_bot, hi", h), "hey , hi");
        assert_eq!(strip_handle("ask @ferro_botany", h), "ask @ferro_botany");
        assert_eq!(strip_handle("plain", None), "plain");
    }
}
