//! Who started a run. The origin picks the lane, whether messages may be merged, and
//! labels logs and metrics; it never changes what the run itself does.

use crate::scheduler::Lane;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Origin {
    /// `POST /v1/chat/completions`, `POST /v1/responses`.
    Http,
    /// A WebSocket `chat.send`.
    WebSocket,
    /// `ferroclaw agent chat` (one-shot or REPL).
    Cli,
    /// The gpt-oss executor's `POST /v1/chat/completions`.
    Executor,
    /// The `sessions_send` tool: one agent session asking another and waiting.
    SessionsSend,
    /// The `sessions_spawn` tool.
    SessionsSpawn,
    /// `subagents steer`: a follow-up to a finished subagent.
    SubagentSteer,
    /// A scheduled job (`cron`).
    Cron,
    /// A message from a chat channel (Telegram, …).
    Channel,
    /// A write the runtime itself queues on a session (inject, patch, announcement,
    /// compaction, deletion), never merged with a message.
    Maintenance,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Http => "http",
            Origin::WebSocket => "websocket",
            Origin::Cli => "cli",
            Origin::Executor => "executor",
            Origin::SessionsSend => "sessions_send",
            Origin::SessionsSpawn => "sessions_spawn",
            Origin::SubagentSteer => "subagent_steer",
            Origin::Cron => "cron",
            Origin::Channel => "channel",
            Origin::Maintenance => "maintenance",
        }
    }

    /// Subagents share the `subagent` lane, agent-to-agent messages the `delegate`
    /// lane, so neither can starve the lane people's messages use.
    pub fn lane(self) -> Lane {
        match self {
            Origin::SessionsSpawn | Origin::SubagentSteer => Lane::Subagent,
            Origin::SessionsSend => Lane::Delegate,
            Origin::Cron => Lane::Cron,
            Origin::Http
            | Origin::WebSocket
            | Origin::Cli
            | Origin::Channel
            | Origin::Executor
            | Origin::Maintenance => Lane::Main,
        }
    }

    /// Only messages people type are merged (debounce window, followups); a tool's
    /// message or a maintenance write always runs on its own.
    pub fn mergeable(self) -> bool {
        matches!(self, Origin::Http | Origin::WebSocket | Origin::Channel)
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
