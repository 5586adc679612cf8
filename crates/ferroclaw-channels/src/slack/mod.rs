//! Slack over Socket Mode: the app opens a WebSocket (`apps.connections.open` with the
//! app-level token), acknowledges each event envelope at once, and answers over the Web
//! API with the bot token, in mrkdwn. In channels the answer goes in a thread under the
//! message; one instance per workspace app holds the connection (the account lease).

pub mod api;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ferroclaw_config::settings::SlackSettings;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::time::{interval_at, Instant};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message as Ws;
use tracing::{info, warn};

use crate::dispatch::{ChannelPolicy, Dispatcher};
use crate::format::Markup;
use crate::lease::{pause, Lease, RENEW_EVERY};
use crate::seam::{Inbound, Outbound, SendError};
use crate::service::Task;
use crate::status::StatusCell;
use api::{Api, Identity};

pub const CHANNEL: &str = "slack";
pub const ACCOUNT: &str = "default";
/// Slack shows up to 4,000 characters of a message's text well (it cuts at 40,000).
pub const LIMIT: usize = 4000;
pub const PLACEHOLDER: &str = "Thinking…";
const BACKOFF_MAX: Duration = Duration::from_secs(60);
const HANDSHAKE: Duration = Duration::from_secs(20);
const MAX_FRAME: usize = 4 * 1024 * 1024;

/// Slack reads `&`, `<` and `>` as control characters (`<!channel>` pings everyone):
/// text sent as is must have them escaped.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `C123` or `C123:1700000000.000100` (a thread).
fn split_chat(chat: &str) -> (&str, Option<&str>) {
    match chat.split_once(':') {
        Some((channel, ts)) => (channel, Some(ts)),
        None => (chat, None),
    }
}

pub struct SlackOut {
    api: Api,
}

fn send_error(e: api::ApiError) -> SendError {
    SendError::Other(e.to_string())
}

#[async_trait]
impl Outbound for SlackOut {
    fn markup(&self) -> Markup {
        Markup::SlackMrkdwn
    }

    fn limit(&self) -> usize {
        LIMIT
    }

    async fn send(
        &self,
        chat_id: &str,
        text: &str,
        formatted: bool,
        _reply_to: Option<&str>,
    ) -> Result<String, SendError> {
        let (channel, thread) = split_chat(chat_id);
        let text = if formatted {
            text.to_string()
        } else {
            escape(text)
        };
        self.api
            .post(channel, thread, &text, formatted)
            .await
            .map_err(send_error)
    }

    /// Slack has no typing indicator for bots outside its assistant threads.
    async fn typing(&self, _chat_id: &str) {}

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
        formatted: bool,
    ) -> Result<(), SendError> {
        let (channel, _) = split_chat(chat_id);
        let text = if formatted {
            text.to_string()
        } else {
            escape(text)
        };
        self.api
            .update(channel, message_id, &text)
            .await
            .map_err(send_error)
    }
}

fn tokens(settings: &SlackSettings) -> Result<(&str, &str), String> {
    let c = &settings.config;
    let bot = settings.token.as_deref().ok_or_else(|| {
        format!(
            "{} is not set: the bot token (xoxb-…) is needed",
            c.token_env
        )
    })?;
    let app = settings.app_token.as_deref().ok_or_else(|| {
        format!(
            "{} is not set: the app-level token (xapp-…) is needed for Socket Mode",
            c.app_token_env
        )
    })?;
    Ok((bot, app))
}

/// How the process sends on Slack, or why it cannot.
pub fn outbound(settings: &SlackSettings) -> Result<Arc<dyn Outbound>, String> {
    let (bot, app) = tokens(settings)?;
    let api = Api::new(&settings.config.api_base_url, bot, Some(app)).map_err(|e| e.to_string())?;
    Ok(Arc::new(SlackOut { api }))
}

pub fn policy(cfg: &ferroclaw_config::SlackConfig) -> ChannelPolicy {
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

#[derive(Debug, Deserialize)]
pub struct Event {
    #[serde(rename = "type")]
    pub kind: String,
    pub subtype: Option<String>,
    pub channel: Option<String>,
    pub channel_type: Option<String>,
    pub user: Option<String>,
    pub bot_id: Option<String>,
    #[serde(default)]
    pub text: String,
    pub ts: Option<String>,
    pub thread_ts: Option<String>,
}

/// An Events API event as the dispatcher sees it (`None`: not a new message).
pub fn inbound(e: &Event, me: &Identity, in_thread: bool) -> Option<Inbound> {
    if !matches!(e.kind.as_str(), "message" | "app_mention") {
        return None;
    }
    // Edits, deletions, joins: not new messages.
    if !matches!(
        e.subtype.as_deref(),
        None | Some("thread_broadcast" | "file_share" | "bot_message")
    ) {
        return None;
    }
    let (channel, ts) = (e.channel.as_ref()?, e.ts.as_ref()?);
    let user = e
        .user
        .clone()
        .or_else(|| e.bot_id.clone())
        .unwrap_or_default();
    let tag = format!("<@{}>", me.user_id);
    let is_group = e.kind == "app_mention" || e.channel_type.as_deref() != Some("im");
    let thread = e
        .thread_ts
        .as_deref()
        .or((is_group && in_thread).then_some(ts.as_str()));
    Some(Inbound {
        // `message` and `app_mention` of one message share it: handled once.
        message_key: format!("{channel}:{ts}"),
        message_id: ts.clone(),
        chat_id: channel.clone(),
        is_group,
        sender_id: user.clone(),
        sender_username: None,
        sender_name: user.clone(),
        text: e
            .text
            .replace(&tag, " ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
        mentioned: !is_group || e.kind == "app_mention" || e.text.contains(&tag),
        from_bot: e.bot_id.is_some()
            || e.subtype.as_deref() == Some("bot_message")
            || user == me.user_id,
        reply_in: thread.map(|t| format!("{channel}:{t}")),
    })
}

enum Ended {
    /// Slack asked for a new connection, or it was lost: open another.
    Reconnect {
        ready: bool,
    },
    LeaseLost,
    Stopped,
}

pub(crate) async fn run(settings: SlackSettings, task: Task) {
    let (status, stop) = (task.status.clone(), task.stop.clone());
    let api = match tokens(&settings).and_then(|(bot, app)| {
        Api::new(&settings.config.api_base_url, bot, Some(app)).map_err(|e| e.to_string())
    }) {
        Ok(api) => api,
        Err(why) => return status.fail(why),
    };
    let me = {
        let mut backoff = Duration::from_secs(1);
        loop {
            let who = tokio::select! {
                who = api.auth_test() => who,
                () = stop.cancelled() => return,
            };
            match who {
                Ok(me) => break me,
                Err(e) => {
                    status.error(
                        if e.is_auth() {
                            "failed"
                        } else {
                            "reconnecting"
                        },
                        e.to_string(),
                    );
                    pause(&stop, backoff).await;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
            }
        }
    };
    status.set_bot(if me.user.is_empty() {
        me.user_id.clone()
    } else {
        me.user.clone()
    });
    let (dispatcher, lease) = task.dispatcher(CHANNEL, ACCOUNT, policy(&settings.config));
    let mut backoff = Duration::from_secs(1);
    let mut holding = false;
    loop {
        if !holding {
            if !lease.acquire(&status, &stop).await {
                break;
            }
            holding = true;
        }
        let url = match api.connections_open().await {
            Ok(url) => url,
            Err(e) => {
                status.error(
                    if e.is_auth() {
                        "failed"
                    } else {
                        "reconnecting"
                    },
                    e.to_string(),
                );
                pause(&stop, if e.is_auth() { BACKOFF_MAX } else { backoff }).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                holding = lease.renew().await;
                continue;
            }
        };
        status.set_state("connecting");
        let session = Session {
            me: &me,
            dispatcher: &dispatcher,
            lease: &lease,
            status: &status,
            stop: &stop,
            in_thread: settings.config.reply_in_thread,
        };
        match session.connect(&url).await {
            Ended::Stopped => break,
            Ended::LeaseLost => {
                info!("slack: another instance holds the app now");
                holding = false;
            }
            Ended::Reconnect { ready: true } => backoff = Duration::from_secs(1),
            Ended::Reconnect { ready: false } => {
                pause(&stop, backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
        holding = holding && lease.renew().await;
    }
    lease.release().await;
    status.set_state("stopped");
}

struct Session<'a> {
    me: &'a Identity,
    dispatcher: &'a Dispatcher,
    lease: &'a Lease,
    status: &'a StatusCell,
    stop: &'a tokio_util::sync::CancellationToken,
    in_thread: bool,
}

impl Session<'_> {
    async fn connect(&self, url: &str) -> Ended {
        let mut config = WebSocketConfig::default();
        config.max_message_size = Some(MAX_FRAME);
        config.max_frame_size = Some(MAX_FRAME);
        let connecting = tokio_tungstenite::connect_async_with_config(url, Some(config), false);
        let mut ws = match tokio::time::timeout(HANDSHAKE, connecting).await {
            Ok(Ok((ws, _))) => ws,
            Ok(Err(e)) => {
                self.status
                    .error("reconnecting", format!("socket mode: {e}"));
                return Ended::Reconnect { ready: false };
            }
            Err(_) => {
                self.status.error(
                    "reconnecting",
                    "socket mode: no answer to the handshake".into(),
                );
                return Ended::Reconnect { ready: false };
            }
        };
        let mut renew = interval_at(Instant::now() + RENEW_EVERY, RENEW_EVERY);
        let mut ready = false;
        let ended = loop {
            tokio::select! {
                frame = ws.next() => {
                    let text = match frame {
                        Some(Ok(Ws::Text(t))) => t,
                        Some(Ok(Ws::Close(_))) | None => break Ended::Reconnect { ready },
                        Some(Ok(_)) => continue,
                        Some(Err(e)) => {
                            warn!(error = %e, "slack: socket lost");
                            break Ended::Reconnect { ready };
                        }
                    };
                    let envelope: Value = match serde_json::from_str(&text) {
                        Ok(v) => v,
                        Err(e) => {
                            warn!(error = %e, "slack: a frame that is not JSON; ignored");
                            continue;
                        }
                    };
                    // Acknowledged first: Slack sends an envelope again after 3 s.
                    if let Some(id) = envelope["envelope_id"].as_str() {
                        let ack = json!({"envelope_id": id}).to_string();
                        if ws.send(Ws::text(ack)).await.is_err() {
                            break Ended::Reconnect { ready };
                        }
                    }
                    match envelope["type"].as_str() {
                        Some("hello") => {
                            info!("slack: connected over Socket Mode");
                            ready = true;
                            self.status.clear_error();
                            self.status.set_state("connected");
                        }
                        Some("disconnect") => {
                            info!(reason = envelope["reason"].as_str().unwrap_or(""), "slack: asked to reconnect");
                            break Ended::Reconnect { ready: true };
                        }
                        Some("events_api") => {
                            let event = serde_json::from_value::<Event>(envelope["payload"]["event"].clone());
                            match event {
                                Ok(e) => {
                                    if let Some(msg) = inbound(&e, self.me, self.in_thread) {
                                        let handled = self.dispatcher.handle(msg).await;
                                        self.status.handled(&handled);
                                    }
                                }
                                Err(e) => warn!(error = %e, "slack: an event that could not be read"),
                            }
                        }
                        _ => {}
                    }
                }
                _ = renew.tick() => {
                    if !self.lease.renew().await {
                        break Ended::LeaseLost;
                    }
                }
                () = self.stop.cancelled() => break Ended::Stopped,
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(2), ws.close(None)).await;
        ended
    }
}

/// What `doctor` says of the channel: the bot's name, or why it cannot work.
pub async fn probe(settings: &SlackSettings) -> Result<String, String> {
    let (bot, app) = tokens(settings)?;
    let api = Api::new(&settings.config.api_base_url, bot, Some(app)).map_err(|e| e.to_string())?;
    let me = api.auth_test().await.map_err(|e| e.to_string())?;
    // The app token is checked too: without it nothing arrives.
    api.connections_open().await.map_err(|e| e.to_string())?;
    Ok(me.user)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn event(v: Value) -> Event {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn slack_events_become_messages_answered_in_threads() {
        let me = Identity {
            user_id: "UBOT".into(),
            user: "ferro".into(),
            bot_id: Some("B1".into()),
        };
        let dm = event(
            json!({"type": "message", "channel": "D1", "channel_type": "im", "user": "U1", "text": "hi", "ts": "1.1"}),
        );
        let m = inbound(&dm, &me, true).unwrap();
        assert!(!m.is_group && m.mentioned && m.reply_in.is_none() && m.reply_chat() == "D1");
        let said = event(
            json!({"type": "message", "channel": "C1", "channel_type": "channel", "user": "U1",
            "text": "<@UBOT> what now?", "ts": "2.2"}),
        );
        let m = inbound(&said, &me, true).unwrap();
        assert!(m.is_group && m.mentioned && m.text == "what now?");
        assert_eq!(m.reply_chat(), "C1:2.2");
        assert_eq!(inbound(&said, &me, false).unwrap().reply_chat(), "C1");
        let threaded = event(
            json!({"type": "message", "channel": "C1", "channel_type": "channel", "user": "U1",
            "text": "more", "ts": "3.3", "thread_ts": "2.2"}),
        );
        let m = inbound(&threaded, &me, false).unwrap();
        assert!(!m.mentioned && m.reply_chat() == "C1:2.2");
        // The same message as `app_mention` has the same key: it is handled once.
        let mention = event(
            json!({"type": "app_mention", "channel": "C1", "user": "U1", "text": "<@UBOT> what now?", "ts": "2.2"}),
        );
        assert_eq!(
            inbound(&mention, &me, true).unwrap().message_key,
            m_key(&said, &me)
        );
        let own = event(
            json!({"type": "message", "channel": "C1", "channel_type": "channel", "bot_id": "B1", "text": "x", "ts": "4.4"}),
        );
        assert!(inbound(&own, &me, true).unwrap().from_bot);
        let edited = event(
            json!({"type": "message", "subtype": "message_changed", "channel": "C1", "ts": "5.5"}),
        );
        assert!(inbound(&edited, &me, true).is_none());
        assert_eq!(
            escape("<!channel> & <@U1>"),
            "&lt;!channel&gt; &amp; &lt;@U1&gt;"
        );
    }

    fn m_key(e: &Event, me: &Identity) -> String {
        inbound(e, me, true).unwrap().message_key
    }
}
