//! One agent, resolved: who it is, where it works, which models it talks to, what it may
//! do and how much of it.

use std::path::PathBuf;
use std::time::Duration;

use super::provider::{ProviderChainSettings, ToolCallingSettings};
use super::tools::{AgentToolPolicySettings, InputGuardAction, WebToolsSettings};

#[derive(Debug, Clone)]
pub struct AgentSettings {
    /// `None`: no heartbeat.
    pub heartbeat: Option<HeartbeatSettings>,
    pub id: String,
    pub name: String,
    /// Absolute; created (and canonicalised) by whoever builds the agent.
    pub workspace: PathBuf,
    /// Runs on behalf of a user get the sub-workspace `user_<sanitized id>`.
    pub per_user_workspace: bool,
    /// The ferroclaw home (incident reports, the intent prompt overrides).
    pub home: PathBuf,
    /// The primary model first, then each fallback.
    pub providers: ProviderChainSettings,
    pub max_iterations: u32,
    pub timeout: Duration,
    /// `None`: no stall watchdog (see `agents.defaults.stall_timeout_seconds`).
    pub stall_timeout: Option<Duration>,
    /// Extended thinking budget in tokens (Anthropic's wire).
    pub thinking_budget: Option<u32>,
    /// `None`: the request carries no `max_tokens` (the model's own limit applies).
    pub max_tokens: Option<u32>,
    /// `None`: the provider's default temperature.
    pub temperature: Option<f32>,
    pub stream: bool,
    pub prompt_mode: PromptMode,
    pub history: HistorySettings,
    pub compaction: CompactionSettings,
    pub context_files: ContextFilesSettings,
    /// How the primary model is given tools.
    pub tool_calling: ToolCallingSettings,
    pub tools: AgentToolsSettings,
    pub limits: AgentLimitsSettings,
}

impl AgentSettings {
    /// Name of the primary provider.
    pub fn provider(&self) -> &str {
        &self.providers.primary.provider.name
    }

    /// The primary model id.
    pub fn model(&self) -> &str {
        &self.providers.primary.model
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PromptMode {
    #[default]
    Full,
    Minimal,
    /// Only the run's own instructions and the tool-calling instructions: for surfaces
    /// whose clients bring their whole prompt (the executor). Not a config value.
    Bare,
}

/// What of a conversation is sent back to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistorySettings {
    /// The last N user turns (and what followed them).
    pub max_user_turns: usize,
    /// Older tool results longer than this are trimmed (head + tail) in the context.
    pub old_tool_result_chars: usize,
}

/// How much of the workspace's context files the system prompt carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextFilesSettings {
    /// Each file is cut (head and tail kept) past this many characters.
    pub file_max_chars: usize,
    /// All of them together stop at this many characters.
    pub total_max_chars: usize,
}

impl Default for ContextFilesSettings {
    fn default() -> Self {
        let c = crate::ContextFilesConfig::default();
        Self {
            file_max_chars: c.file_max_chars,
            total_max_chars: c.total_max_chars,
        }
    }
}

/// When and how the older part of a conversation is summarised.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionSettings {
    /// The primary model's context window in tokens.
    pub context_window: u32,
    /// Share of the context window at which compaction starts.
    pub threshold: f32,
    /// Message count that also starts it (0 = no cap).
    pub max_messages: usize,
    /// User turns kept verbatim.
    pub keep_recent_turns: usize,
    /// One turn for the agent to write durable notes before summarising.
    pub memory_flush: bool,
}

/// The agent's tools: which it may use, and the settings of those built per agent.
#[derive(Debug, Clone)]
pub struct AgentToolsSettings {
    /// The policy of the agent's top-level runs (subagents bind it deeper).
    pub policy: AgentToolPolicySettings,
    /// Paths no tool may reach, absolute; the home is denied on top of these.
    pub denied_paths: Vec<PathBuf>,
    pub web: WebToolsSettings,
    pub input_guard: InputGuardAction,
}

/// Caps that keep one runaway (or hostile) model reply or user from exhausting the
/// process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentLimitsSettings {
    /// Longer user messages are cut (with a note to the model), never rejected.
    pub max_message_chars: usize,
    /// Bytes of one model reply; reading stops past it and the run fails.
    pub max_reply_bytes: usize,
    /// Tool calls executed from one model reply; the rest get a refusal.
    pub max_tool_calls_per_turn: usize,
    /// Tool executions at once within one run.
    pub max_concurrent_tools: usize,
    /// A single tool result is cut to this many characters (stored and sent back).
    pub tool_result_max_chars: usize,
}

// Defaults come from the file format's, so each number is written once.
impl Default for HistorySettings {
    fn default() -> Self {
        let s = crate::SessionConfig::default();
        Self {
            max_user_turns: s.history_turns,
            old_tool_result_chars: s.tool_result_context_chars,
        }
    }
}

impl Default for CompactionSettings {
    fn default() -> Self {
        let d = crate::AgentDefaults::default();
        Self {
            context_window: d.context_window,
            threshold: d.compaction.threshold,
            max_messages: d.compaction.max_messages,
            keep_recent_turns: d.compaction.keep_recent_turns,
            memory_flush: d.compaction.memory_flush,
        }
    }
}

impl Default for AgentLimitsSettings {
    fn default() -> Self {
        let l = crate::AgentLimits::default();
        Self {
            max_message_chars: crate::GatewayConfig::default().max_message_chars,
            max_reply_bytes: l.max_reply_bytes,
            max_tool_calls_per_turn: l.max_tool_calls_per_turn,
            max_concurrent_tools: l.max_concurrent_tools,
            tool_result_max_chars: l.tool_result_max_chars,
        }
    }
}

/// Subagents (`sessions_spawn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubagentSettings {
    /// Deepest subagent level; a run at this depth cannot spawn.
    pub max_depth: u32,
    /// Subagents running at once per parent session (the process-wide bound is the
    /// scheduler's `subagent` lane).
    pub max_children: usize,
}

/// A resolved `heartbeat`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatSettings {
    pub every: Duration,
    /// Minutes after midnight `[start, end)` in `tz`; `end < start` wraps midnight.
    pub active_hours: Option<(u32, u32, String)>,
    /// Deliver to the session used last (`true`) or nowhere.
    pub deliver_to_last: bool,
}
