//! `channels`: chat platforms the gateway answers on. Credentials are never in the file:
//! each channel names the environment variable that holds its token.

use serde::{Deserialize, Serialize};

/// `channels.<platform>`, one account per platform.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChannelsConfig {
    pub telegram: Option<TelegramConfig>,
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
        let bad = |field: &str, why: String| Err((field.to_string(), why));
        if self.token_env.trim().is_empty() {
            return bad(
                "token_env",
                "name the environment variable that holds the bot token".into(),
            );
        }
        let rest = self
            .api_base_url
            .strip_prefix("https://")
            .or_else(|| self.api_base_url.strip_prefix("http://"));
        if rest.is_none_or(|r| r.is_empty() || r.starts_with('/')) {
            return bad(
                "api_base_url",
                format!(
                    "expected an http:// or https:// URL, got `{}`",
                    self.api_base_url
                ),
            );
        }
        if !(1..=50).contains(&self.poll_timeout_seconds) {
            return bad(
                "poll_timeout_seconds",
                format!(
                    "expected 1 to 50 seconds, got {}",
                    self.poll_timeout_seconds
                ),
            );
        }
        for (i, b) in self.bindings.iter().enumerate() {
            if b.agent.trim().is_empty() {
                return bad(&format!("bindings[{i}].agent"), "name an agent".into());
            }
        }
        Ok(())
    }
}
