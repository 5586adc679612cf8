//! The `tools` section of `config.json5`: which tools a model may see and call
//! (profiles, allow/deny lists at several levels), the per-session rate limit,
//! the input guard's action and paths no tool may ever reach.
//!
//! Sub-sections owned by the individual tools (exec, web, …) live in their own
//! files and hang off [`ToolsConfig`] as one field each.
//!
//! Keys are snake_case like the rest of the file; the camelCase spellings used
//! by the OpenClaw family (`alsoAllow`, `byProvider`, …) are accepted as aliases.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `tools` in `config.json5`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolsConfig {
    /// Base set of tools before allow/deny lists apply (`full` = every tool).
    pub profile: ToolProfile,
    /// When non-empty, only these tools (names, aliases, `group:*`, globs) remain.
    pub allow: Vec<String>,
    /// Never offered nor callable, whatever else says so. Deny always wins.
    pub deny: Vec<String>,
    /// Added on top of the profile / allow list (still subject to `deny`).
    #[serde(alias = "alsoAllow")]
    pub also_allow: Vec<String>,
    /// Policy overrides for one provider (key = provider name as configured).
    #[serde(alias = "byProvider")]
    pub by_provider: BTreeMap<String, ToolPolicyConfig>,
    /// Policy applied to runs coming from group chats (on top of everything else).
    #[serde(alias = "groupChat")]
    pub group_chat: ToolPolicyConfig,
    /// Tool calls allowed per session per hour (sliding window); 0 = unlimited.
    #[serde(alias = "rateLimitPerHour")]
    pub rate_limit_per_hour: u32,
    /// What to do when a user message looks like a prompt injection.
    #[serde(alias = "inputGuard")]
    pub input_guard: InputGuardAction,
    /// Path prefixes no filesystem tool may reach (the ferroclaw home is always
    /// denied in addition to these). `~/` is expanded, relative paths are
    /// taken from the ferroclaw home.
    #[serde(alias = "deniedPaths")]
    pub denied_paths: Vec<String>,
    /// `web_search` / `web_fetch` settings and the SSRF policy.
    pub web: crate::tools_web_config::WebToolsConfig,
    /// `exec` guard, approvals, limits and custom shell tools (see `tools_exec_config.rs`).
    pub exec: crate::tools_exec_config::ExecToolConfig,
}

/// One level of tool policy (global, per provider, per agent, per group chat).
/// Empty lists mean "no opinion at this level".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolPolicyConfig {
    /// Replaces the base profile when set.
    pub profile: Option<ToolProfile>,
    /// When non-empty, intersects the tools that survived the previous levels.
    pub allow: Vec<String>,
    /// Removes tools; deny always wins over any allow at any level.
    pub deny: Vec<String>,
    /// Adds tools back on top of the profile / allow lists (never over a deny).
    #[serde(alias = "alsoAllow")]
    pub also_allow: Vec<String>,
}

impl ToolPolicyConfig {
    /// True when this level changes nothing.
    pub fn is_empty(&self) -> bool {
        self.profile.is_none()
            && self.allow.is_empty()
            && self.deny.is_empty()
            && self.also_allow.is_empty()
    }
}

impl ToolsConfig {
    /// The global level of the tool policy as a [`ToolPolicyConfig`].
    pub fn global_policy(&self) -> ToolPolicyConfig {
        ToolPolicyConfig {
            profile: Some(self.profile),
            allow: self.allow.clone(),
            deny: self.deny.clone(),
            also_allow: self.also_allow.clone(),
        }
    }
}

impl crate::schema::AgentConfig {
    /// This agent's level of the tool policy: `tools` is its allow list
    /// (`None` = no restriction, an empty list = no tools at all),
    /// `tools_deny` and `tools_also_allow` as named.
    pub fn tool_policy(&self) -> ToolPolicyConfig {
        let mut deny = self.tools_deny.clone();
        let allow = match &self.tools {
            None => Vec::new(),
            // An explicit empty allow list means "nothing", which an empty
            // `allow` ("no opinion") cannot express; deny everything instead.
            Some(list) if list.is_empty() => {
                deny.push("*".to_string());
                Vec::new()
            }
            Some(list) => list.clone(),
        };
        ToolPolicyConfig {
            profile: None,
            allow,
            deny,
            also_allow: self.tools_also_allow.clone(),
        }
    }
}

/// Named base tool sets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolProfile {
    /// Read-only filesystem plus `session_status`.
    Minimal,
    /// Filesystem, runtime, memory, web and session tools.
    Coding,
    /// Session, memory and web tools; no filesystem writes, no exec.
    Messaging,
    /// Every registered tool.
    #[default]
    Full,
}

impl ToolProfile {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Minimal => "minimal",
            Self::Coding => "coding",
            Self::Messaging => "messaging",
            Self::Full => "full",
        }
    }
}

/// What the input guard does with a user message that matches an injection pattern.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputGuardAction {
    /// No scanning.
    Off,
    /// Log the finding (info level) and continue.
    Log,
    /// Log a warning and tell the model the message may contain an injection attempt.
    #[default]
    Warn,
    /// Log a warning and refuse the message.
    Block,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_aliases() {
        let d = ToolsConfig::default();
        assert_eq!(d.profile, ToolProfile::Full);
        assert_eq!(d.input_guard, InputGuardAction::Warn);
        assert_eq!(d.rate_limit_per_hour, 0);

        let c: ToolsConfig = serde_json::from_value(serde_json::json!({
            "profile": "coding",
            "deny": ["exec"],
            "alsoAllow": ["web_fetch"],
            "byProvider": {"ollama": {"profile": "minimal", "deny": ["group:web"]}},
            "rate_limit_per_hour": 100,
            "input_guard": "block",
            "denied_paths": ["/srv/secret"]
        }))
        .unwrap();
        assert_eq!(c.profile, ToolProfile::Coding);
        assert_eq!(c.also_allow, vec!["web_fetch"]);
        assert_eq!(c.by_provider["ollama"].profile, Some(ToolProfile::Minimal));
        assert_eq!(c.input_guard, InputGuardAction::Block);
        assert_eq!(c.global_policy().deny, vec!["exec"]);
    }
}
