//! Discord: the gateway WebSocket for incoming messages (one instance per bot, held by
//! the account's lease), REST for answers. An answer starts as a "Thinking…" message
//! edited as the text grows and into the final answer; answers over 2,000 characters
//! are split.

pub mod api;
pub mod gateway;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ferroclaw_config::settings::DiscordSettings;
use tracing::warn;

use crate::dispatch::ChannelPolicy;
use crate::format::Markup;
use crate::lease::pause;
use crate::seam::{Inbound, Outbound, SendError};
use crate::service::Task;
use api::{Api, ApiError, Message, User};
use gateway::{Conn, Ended, Session};

pub const CHANNEL: &str = "discord";
pub const ACCOUNT: &str = "default";
/// Discord's limit for one message.
pub const LIMIT: usize = 2000;
pub const PLACEHOLDER: &str = "Thinking…";
const BACKOFF_MAX: Duration = Duration::from_secs(60);

pub struct DiscordOut {
    api: Api,
}

fn send_error(e: ApiError) -> SendError {
    SendError::Other(e.to_string())
}

#[async_trait]
impl Outbound for DiscordOut {
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
        _formatted: bool,
        reply_to: Option<&str>,
    ) -> Result<String, SendError> {
        self.api
            .send(chat_id, text, reply_to)
            .await
            .map(|m| m.id)
            .map_err(send_error)
    }

    async fn typing(&self, chat_id: &str) {
        if let Err(e) = self.api.typing(chat_id).await {
            tracing::debug!(error = %e, "discord: typing indicator not shown");
        }
    }

    async fn direct_chat(&self, peer: &str) -> Result<String, SendError> {
        self.api.open_dm(peer).await.map_err(send_error)
    }

    fn placeholder(&self) -> Option<&'static str> {
        Some(PLACEHOLDER)
    }

    fn edits(&self) -> bool {
        true
    }

    async fn edit(
        &self,
        chat_id: &str,
        message_id: &str,
        text: &str,
        _formatted: bool,
    ) -> Result<(), SendError> {
        self.api
            .edit(chat_id, message_id, text)
            .await
            .map_err(send_error)
    }
}

/// How the process sends on Discord, or why it cannot.
pub fn outbound(settings: &DiscordSettings) -> Result<Arc<dyn Outbound>, String> {
    let token = settings.token.as_deref().ok_or_else(|| {
        format!(
            "{} is not set: the bot token is needed",
            settings.config.token_env
        )
    })?;
    let api = Api::new(&settings.config.api_base_url, token).map_err(|e| e.to_string())?;
    Ok(Arc::new(DiscordOut { api }))
}

pub fn policy(cfg: &ferroclaw_config::DiscordConfig) -> ChannelPolicy {
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

/// A gateway message as the dispatcher sees it (`None`: a system message).
pub fn inbound(m: &Message, me: &User) -> Option<Inbound> {
    if !matches!(m.kind, 0 | 19) {
        return None;
    }
    let tags = [format!("<@{}>", me.id), format!("<@!{}>", me.id)];
    let mentioned = m.mentions.iter().any(|u| u.id == me.id)
        || tags.iter().any(|t| m.content.contains(t.as_str()))
        || m.referenced_message
            .as_ref()
            .is_some_and(|r| r.author.id == me.id);
    let mut text = m.content.clone();
    for t in &tags {
        text = text.replace(t.as_str(), " ");
    }
    let is_group = m.guild_id.is_some();
    Some(Inbound {
        message_key: m.id.clone(),
        message_id: m.id.clone(),
        chat_id: m.channel_id.clone(),
        is_group,
        sender_id: m.author.id.clone(),
        sender_username: Some(m.author.username.clone()).filter(|u| !u.is_empty()),
        sender_name: m
            .author
            .global_name
            .clone()
            .unwrap_or_else(|| m.author.username.clone()),
        text: text.split_whitespace().collect::<Vec<_>>().join(" "),
        mentioned: !is_group || mentioned,
        from_bot: m.author.bot || m.author.id == me.id,
        reply_in: None,
    })
}

/// Works the bot while the task is not stopped: takes the account's lease (or stands
/// by), holds a gateway session (resumed after a lost connection) and hands each
/// message to the dispatcher.
pub(crate) async fn run(settings: DiscordSettings, task: Task) {
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
    status.set_bot(me.username.clone());
    let (dispatcher, lease) = task.dispatcher(CHANNEL, ACCOUNT, policy(&settings.config));
    let mut session = Session::default();
    let mut backoff = Duration::from_secs(1);
    let mut holding = false;
    loop {
        if !holding {
            if !lease.acquire(&status, &stop).await {
                break;
            }
            holding = true;
        }
        let url = match (&session.resume_url, settings.config.gateway_url.as_str()) {
            (Some(url), _) if session.resumable() => url.clone(),
            (_, "") => match api.gateway_url().await {
                Ok(url) => url,
                Err(e) => {
                    status.error("reconnecting", e.to_string());
                    pause(&stop, backoff).await;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                    holding = lease.renew().await;
                    continue;
                }
            },
            (_, configured) => configured.to_string(),
        };
        status.set_state("connecting");
        let conn = Conn {
            url: gateway::with_query(&url),
            token: &token,
            me: &me,
            dispatcher: &dispatcher,
            lease: &lease,
            status: &status,
            stop: &stop,
        };
        let ended = gateway::connect(&conn, &mut session).await;
        match ended {
            Ended::Stopped => break,
            Ended::LeaseLost => {
                tracing::info!("discord: another instance holds the account now");
                holding = false;
                session = Session::default();
                continue;
            }
            Ended::Resume { ready: true } => backoff = Duration::from_secs(1),
            Ended::Resume { ready: false } => {
                // The session stays resumable (the gateway keeps it a while); the
                // gateway says so with an invalid session when it is not.
                pause(&stop, backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
            Ended::Reidentify => pause(&stop, Duration::from_secs(2)).await,
            Ended::Fatal(why) => {
                warn!(%why, "discord: the gateway refused the bot");
                status.error("failed", why);
                // Nothing works until the settings change; another instance may fare
                // no better, but must not be kept out.
                lease.release().await;
                holding = false;
                pause(&stop, BACKOFF_MAX).await;
            }
        }
        holding = holding && lease.renew().await;
    }
    lease.release().await;
    status.set_state("stopped");
}

/// What `doctor` says of the channel: the bot's name, or why it cannot work.
pub async fn probe(settings: &DiscordSettings) -> Result<String, String> {
    let token = settings
        .token
        .as_deref()
        .ok_or_else(|| format!("{} is not set", settings.config.token_env))?;
    let api = Api::new(&settings.config.api_base_url, token).map_err(|e| e.to_string())?;
    let me = api.me().await.map_err(|e| e.to_string())?;
    Ok(me.username)
}

async fn get_me(api: &Api, status: &crate::status::StatusCell) -> User {
    let mut backoff = Duration::from_secs(1);
    loop {
        match api.me().await {
            Ok(me) => return me,
            Err(e) => {
                let state = if e.status() == Some(401) {
                    "failed"
                } else {
                    "reconnecting"
                };
                status.error(state, e.to_string());
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(v: serde_json::Value) -> Message {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn mentions_replies_and_bots_are_recognised() {
        let me: User =
            serde_json::from_value(json!({"id": "9", "username": "ferro", "bot": true})).unwrap();
        let author = json!({"id": "5", "username": "ann", "global_name": "Ann"});
        let plain = message(
            json!({"id": "1", "channel_id": "c", "guild_id": "g", "author": author, "content": "hello all", "type": 0}),
        );
        let m = inbound(&plain, &me).unwrap();
        assert!(m.is_group && !m.mentioned && !m.from_bot);
        let tagged = message(
            json!({"id": "2", "channel_id": "c", "guild_id": "g", "author": author,
            "content": "<@!9> what is 2+2?", "mentions": [{"id": "9", "username": "ferro"}], "type": 0}),
        );
        let m = inbound(&tagged, &me).unwrap();
        assert!(m.mentioned);
        assert_eq!(m.text, "what is 2+2?");
        // A mention of someone else, and a reply to someone else, are not to the bot.
        let other = message(
            json!({"id": "3", "channel_id": "c", "guild_id": "g", "author": author,
            "content": "<@8> hi", "mentions": [{"id": "8", "username": "bob"}],
            "referenced_message": {"id": "0", "channel_id": "c", "author": {"id": "8", "username": "bob"}, "content": "x"},
            "type": 19}),
        );
        assert!(!inbound(&other, &me).unwrap().mentioned);
        let reply = message(
            json!({"id": "4", "channel_id": "c", "guild_id": "g", "author": author, "content": "and?",
            "referenced_message": {"id": "0", "channel_id": "c", "author": {"id": "9", "username": "ferro"}, "content": "x"},
            "type": 19}),
        );
        assert!(inbound(&reply, &me).unwrap().mentioned);
        let dm = message(
            json!({"id": "5", "channel_id": "d", "author": author, "content": "hi", "type": 0}),
        );
        let m = inbound(&dm, &me).unwrap();
        assert!(!m.is_group && m.mentioned && m.chat_id == "d" && m.sender_id == "5");
        let own = message(
            json!({"id": "6", "channel_id": "d", "author": {"id": "9", "username": "ferro", "bot": true}, "content": "x"}),
        );
        assert!(inbound(&own, &me).unwrap().from_bot);
        let joined = message(
            json!({"id": "7", "channel_id": "c", "guild_id": "g", "author": author, "content": "", "type": 7}),
        );
        assert!(inbound(&joined, &me).is_none());
    }
}
