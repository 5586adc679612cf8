//! `channels`: chat platforms the gateway answers on. Credentials are never in the file:
//! each channel names the environment variable that holds its token.

use serde::{Deserialize, Serialize};

/// `channels.<platform>`, one account per platform.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChannelsConfig {
    pub telegram: Option<TelegramConfig>,
    pub discord: Option<DiscordConfig>,
    pub slack: Option<SlackConfig>,
    pub whatsapp: Option<WhatsAppConfig>,
    pub zalo: Option<ZaloConfig>,
    pub feishu: Option<FeishuConfig>,
}

/// Who may talk to the bot in direct messages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DmPolicy {
    /// An unknown sender gets a code an operator approves (`ferroclaw pairing approve`).
    #[default]
    Pairing,
    /// Only `allow_from` (and senders approved earlier).
    Allowlist,
    /// Anyone.
    Open,
    /// Nobody.
    Disabled,
}

/// Which group chats the bot answers in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupPolicy {
    #[default]
    Open,
    /// Only groups listed in `group_allow_from`.
    Allowlist,
    Disabled,
}

/// Routes a chat or a sender to an agent; the first binding that matches wins, then the
/// channel's `agent`, then the default agent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChannelBinding {
    pub agent: String,
    /// A chat id (a group, or a direct chat).
    pub chat: Option<String>,
    /// A sender's id.
    pub peer: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelegramConfig {
    pub enabled: bool,
    /// The variable that holds the bot token (from @BotFather).
    #[serde(alias = "tokenEnv")]
    pub token_env: String,
    /// The Bot API server (a self-hosted one, or a fake in tests).
    #[serde(alias = "apiBaseUrl")]
    pub api_base_url: String,
    #[serde(alias = "dmPolicy")]
    pub dm_policy: DmPolicy,
    #[serde(alias = "groupPolicy")]
    pub group_policy: GroupPolicy,
    /// Senders allowed in direct messages: ids or `id|username`; a leading `@` is ignored.
    #[serde(alias = "allowFrom")]
    pub allow_from: Vec<String>,
    /// Group chat ids the bot answers in under `group_policy: allowlist`.
    #[serde(alias = "groupAllowFrom")]
    pub group_allow_from: Vec<String>,
    /// In groups, answer only when mentioned (or replied to); other messages are kept as
    /// context for the next answer.
    #[serde(alias = "requireMention")]
    pub require_mention: bool,
    /// The agent that answers (default: the default agent).
    pub agent: Option<String>,
    pub bindings: Vec<ChannelBinding>,
    /// Long-poll wait per `getUpdates`.
    #[serde(alias = "pollTimeoutSeconds")]
    pub poll_timeout_seconds: u64,
}

impl Default for TelegramConfig {
    fn default() -> Self {
        TelegramConfig {
            enabled: true,
            token_env: "TELEGRAM_BOT_TOKEN".into(),
            api_base_url: "https://api.telegram.org".into(),
            dm_policy: DmPolicy::Pairing,
            group_policy: GroupPolicy::Open,
            allow_from: Vec::new(),
            group_allow_from: Vec::new(),
            require_mention: true,
            agent: None,
            bindings: Vec::new(),
            poll_timeout_seconds: 30,
        }
    }
}

impl TelegramConfig {
    /// `Err((field, why))` when these settings cannot work; `field` is relative to the
    /// channel.
    pub fn check(&self) -> Result<(), (String, String)> {
        check_common(&self.token_env, Some(&self.api_base_url), &self.bindings)?;
        if !(1..=50).contains(&self.poll_timeout_seconds) {
            return Err((
                "poll_timeout_seconds".into(),
                format!(
                    "expected 1 to 50 seconds, got {}",
                    self.poll_timeout_seconds
                ),
            ));
        }
        Ok(())
    }
}

/// `channels.discord`: a bot on the Discord gateway. In Discord terms a "group" is a
/// server (guild) channel; its id is what `group_allow_from` and bindings name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DiscordConfig {
    pub enabled: bool,
    /// The variable that holds the bot token (Developer Portal → Bot → Token).
    #[serde(alias = "tokenEnv")]
    pub token_env: String,
    /// The REST API root (a fake in tests).
    #[serde(alias = "apiBaseUrl")]
    pub api_base_url: String,
    /// The gateway to connect to; empty: the one `GET /gateway/bot` names.
    #[serde(alias = "gatewayUrl")]
    pub gateway_url: String,
    #[serde(alias = "dmPolicy")]
    pub dm_policy: DmPolicy,
    #[serde(alias = "groupPolicy")]
    pub group_policy: GroupPolicy,
    /// Users allowed in direct messages: ids or `id|username`; a leading `@` is ignored.
    #[serde(alias = "allowFrom")]
    pub allow_from: Vec<String>,
    /// Server channel ids the bot answers in under `group_policy: allowlist`.
    #[serde(alias = "groupAllowFrom")]
    pub group_allow_from: Vec<String>,
    /// In server channels, answer only when mentioned (or replied to).
    #[serde(alias = "requireMention")]
    pub require_mention: bool,
    pub agent: Option<String>,
    pub bindings: Vec<ChannelBinding>,
}

impl Default for DiscordConfig {
    fn default() -> Self {
        DiscordConfig {
            enabled: true,
            token_env: "DISCORD_BOT_TOKEN".into(),
            api_base_url: "https://discord.com/api/v10".into(),
            gateway_url: String::new(),
            dm_policy: DmPolicy::Pairing,
            group_policy: GroupPolicy::Open,
            allow_from: Vec::new(),
            group_allow_from: Vec::new(),
            require_mention: true,
            agent: None,
            bindings: Vec::new(),
        }
    }
}

impl DiscordConfig {
    pub fn check(&self) -> Result<(), (String, String)> {
        check_common(&self.token_env, Some(&self.api_base_url), &self.bindings)?;
        if !self.gateway_url.is_empty() && !is_url(&self.gateway_url, &["wss://", "ws://"]) {
            return Err((
                "gateway_url".into(),
                format!("expected a ws:// or wss:// URL, got `{}`", self.gateway_url),
            ));
        }
        Ok(())
    }
}

/// `channels.slack`: a Slack app over Socket Mode (no public URL needed). A "group" is a
/// channel (public, private or a group DM).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SlackConfig {
    pub enabled: bool,
    /// The variable holding the bot token (`xoxb-…`, OAuth & Permissions).
    #[serde(alias = "tokenEnv", alias = "botTokenEnv", alias = "bot_token_env")]
    pub token_env: String,
    /// The variable holding the app-level token (`xapp-…`, with `connections:write`).
    #[serde(alias = "appTokenEnv")]
    pub app_token_env: String,
    /// The Web API root (a fake in tests).
    #[serde(alias = "apiBaseUrl")]
    pub api_base_url: String,
    #[serde(alias = "dmPolicy")]
    pub dm_policy: DmPolicy,
    #[serde(alias = "groupPolicy")]
    pub group_policy: GroupPolicy,
    /// Members allowed in direct messages: user ids (`U…`).
    #[serde(alias = "allowFrom")]
    pub allow_from: Vec<String>,
    /// Channel ids (`C…`) the bot answers in under `group_policy: allowlist`.
    #[serde(alias = "groupAllowFrom")]
    pub group_allow_from: Vec<String>,
    #[serde(alias = "requireMention")]
    pub require_mention: bool,
    /// In channels, answer in a thread under the message (always in its thread when it
    /// was written in one).
    #[serde(alias = "replyInThread")]
    pub reply_in_thread: bool,
    pub agent: Option<String>,
    pub bindings: Vec<ChannelBinding>,
}

impl Default for SlackConfig {
    fn default() -> Self {
        SlackConfig {
            enabled: true,
            token_env: "SLACK_BOT_TOKEN".into(),
            app_token_env: "SLACK_APP_TOKEN".into(),
            api_base_url: "https://slack.com/api".into(),
            dm_policy: DmPolicy::Pairing,
            group_policy: GroupPolicy::Open,
            allow_from: Vec::new(),
            group_allow_from: Vec::new(),
            require_mention: true,
            reply_in_thread: true,
            agent: None,
            bindings: Vec::new(),
        }
    }
}

impl SlackConfig {
    pub fn check(&self) -> Result<(), (String, String)> {
        check_common(&self.token_env, Some(&self.api_base_url), &self.bindings)?;
        if self.app_token_env.trim().is_empty() {
            return Err((
                "app_token_env".into(),
                "name the environment variable that holds the app-level token".into(),
            ));
        }
        Ok(())
    }
}

/// `channels.whatsapp`: WhatsApp through a bridge (a separate process speaking WhatsApp
/// Web, e.g. on Baileys or whatsmeow) reached over a WebSocket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WhatsAppConfig {
    pub enabled: bool,
    #[serde(alias = "bridgeUrl")]
    pub bridge_url: String,
    /// The variable holding the bridge's shared secret, sent first when it is set.
    #[serde(
        alias = "tokenEnv",
        alias = "bridgeTokenEnv",
        alias = "bridge_token_env"
    )]
    pub token_env: String,
    #[serde(alias = "dmPolicy")]
    pub dm_policy: DmPolicy,
    #[serde(alias = "groupPolicy")]
    pub group_policy: GroupPolicy,
    /// Phone numbers (with or without `+`) allowed in direct messages.
    #[serde(alias = "allowFrom")]
    pub allow_from: Vec<String>,
    /// Group ids (`…@g.us`) the bot answers in under `group_policy: allowlist`.
    #[serde(alias = "groupAllowFrom")]
    pub group_allow_from: Vec<String>,
    #[serde(alias = "requireMention")]
    pub require_mention: bool,
    pub agent: Option<String>,
    pub bindings: Vec<ChannelBinding>,
}

impl Default for WhatsAppConfig {
    fn default() -> Self {
        WhatsAppConfig {
            enabled: true,
            bridge_url: "ws://127.0.0.1:3001".into(),
            token_env: "WHATSAPP_BRIDGE_TOKEN".into(),
            dm_policy: DmPolicy::Pairing,
            group_policy: GroupPolicy::Open,
            allow_from: Vec::new(),
            group_allow_from: Vec::new(),
            require_mention: true,
            agent: None,
            bindings: Vec::new(),
        }
    }
}

impl WhatsAppConfig {
    pub fn check(&self) -> Result<(), (String, String)> {
        check_common(&self.token_env, None, &self.bindings)?;
        if !is_url(&self.bridge_url, &["ws://", "wss://"]) {
            return Err((
                "bridge_url".into(),
                format!("expected a ws:// or wss:// URL, got `{}`", self.bridge_url),
            ));
        }
        Ok(())
    }
}

/// `channels.zalo`: a Zalo bot (Zalo Bot Platform), direct messages only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ZaloConfig {
    pub enabled: bool,
    /// The variable holding the bot token (`<bot id>:<secret>`, from Zalo Bot Creator).
    #[serde(alias = "tokenEnv")]
    pub token_env: String,
    #[serde(alias = "apiBaseUrl")]
    pub api_base_url: String,
    #[serde(alias = "dmPolicy")]
    pub dm_policy: DmPolicy,
    /// Zalo user ids allowed to talk.
    #[serde(alias = "allowFrom")]
    pub allow_from: Vec<String>,
    pub agent: Option<String>,
    pub bindings: Vec<ChannelBinding>,
    #[serde(alias = "pollTimeoutSeconds")]
    pub poll_timeout_seconds: u64,
}

impl Default for ZaloConfig {
    fn default() -> Self {
        ZaloConfig {
            enabled: true,
            token_env: "ZALO_BOT_TOKEN".into(),
            api_base_url: "https://bot-api.zaloplatforms.com".into(),
            dm_policy: DmPolicy::Pairing,
            allow_from: Vec::new(),
            agent: None,
            bindings: Vec::new(),
            poll_timeout_seconds: 30,
        }
    }
}

impl ZaloConfig {
    pub fn check(&self) -> Result<(), (String, String)> {
        check_common(&self.token_env, Some(&self.api_base_url), &self.bindings)?;
        if !(1..=50).contains(&self.poll_timeout_seconds) {
            return Err((
                "poll_timeout_seconds".into(),
                format!(
                    "expected 1 to 50 seconds, got {}",
                    self.poll_timeout_seconds
                ),
            ));
        }
        Ok(())
    }
}

/// `channels.feishu`: a Feishu (or Lark) app receiving events at the gateway's
/// `/channels/feishu/events` and answering with message cards.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FeishuConfig {
    pub enabled: bool,
    /// The app's id (`cli_…`; not a secret).
    #[serde(alias = "appId")]
    pub app_id: String,
    /// The variable holding the app secret.
    #[serde(alias = "tokenEnv", alias = "appSecretEnv", alias = "app_secret_env")]
    pub token_env: String,
    /// The variable holding the event subscription's verification token.
    #[serde(alias = "verificationTokenEnv")]
    pub verification_token_env: String,
    /// `https://open.feishu.cn` (Feishu) or `https://open.larksuite.com` (Lark).
    #[serde(alias = "apiBaseUrl")]
    pub api_base_url: String,
    #[serde(alias = "dmPolicy")]
    pub dm_policy: DmPolicy,
    #[serde(alias = "groupPolicy")]
    pub group_policy: GroupPolicy,
    /// Users allowed in direct messages: open ids (`ou_…`).
    #[serde(alias = "allowFrom")]
    pub allow_from: Vec<String>,
    /// Group chat ids (`oc_…`) the bot answers in under `group_policy: allowlist`.
    #[serde(alias = "groupAllowFrom")]
    pub group_allow_from: Vec<String>,
    #[serde(alias = "requireMention")]
    pub require_mention: bool,
    pub agent: Option<String>,
    pub bindings: Vec<ChannelBinding>,
}

impl Default for FeishuConfig {
    fn default() -> Self {
        FeishuConfig {
            enabled: true,
            app_id: String::new(),
            token_env: "FEISHU_APP_SECRET".into(),
            verification_token_env: "FEISHU_VERIFICATION_TOKEN".into(),
            api_base_url: "https://open.feishu.cn".into(),
            dm_policy: DmPolicy::Pairing,
            group_policy: GroupPolicy::Open,
            allow_from: Vec::new(),
            group_allow_from: Vec::new(),
            require_mention: true,
            agent: None,
            bindings: Vec::new(),
        }
    }
}

impl FeishuConfig {
    pub fn check(&self) -> Result<(), (String, String)> {
        check_common(&self.token_env, Some(&self.api_base_url), &self.bindings)?;
        if self.app_id.trim().is_empty() {
            return Err((
                "app_id".into(),
                "name the app (its id starts with cli_)".into(),
            ));
        }
        if self.verification_token_env.trim().is_empty() {
            return Err((
                "verification_token_env".into(),
                "name the environment variable that holds the verification token".into(),
            ));
        }
        Ok(())
    }
}

fn is_url(url: &str, schemes: &[&str]) -> bool {
    schemes
        .iter()
        .find_map(|s| url.strip_prefix(s))
        .is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/'))
}

/// What every channel needs: a token variable, an API URL, bindings naming agents.
fn check_common(
    token_env: &str,
    api_base_url: Option<&str>,
    bindings: &[ChannelBinding],
) -> Result<(), (String, String)> {
    let bad = |field: &str, why: String| Err((field.to_string(), why));
    if token_env.trim().is_empty() {
        return bad(
            "token_env",
            "name the environment variable that holds the bot token".into(),
        );
    }
    if let Some(url) = api_base_url.filter(|u| !is_url(u, &["https://", "http://"])) {
        return bad(
            "api_base_url",
            format!("expected an http:// or https:// URL, got `{url}`"),
        );
    }
    for (i, b) in bindings.iter().enumerate() {
        if b.agent.trim().is_empty() {
            return bad(&format!("bindings[{i}].agent"), "name an agent".into());
        }
    }
    Ok(())
}
