//! Plain, fully resolved settings: what the crates below the binary take as values.
//!
//! [`crate::LoadedConfig::settings`] produces them once, after loading: every default is
//! filled in, the environment and its secrets are read, paths are absolute. Nothing here
//! is deserialised, and an `Option` only ever means "not at all" (no `max_tokens` sent,
//! no fallback provider level), never "use the default". The file format lives in the
//! `*Config` types; only this module is meant to cross into the runtime, tools, agent
//! and gateway crates.

mod agent;
mod gateway;
mod provider;
mod resolve;
mod tools;

use std::path::PathBuf;
use std::sync::Arc;

use crate::ConfigError;

pub use agent::{
    AgentLimitsSettings, AgentSettings, AgentToolsSettings, CompactionSettings,
    ContextFilesSettings, HeartbeatSettings, HistorySettings, PromptMode, SubagentSettings,
};
pub use gateway::{
    GatewayLimitsSettings, GatewaySettings, GatewayUserSettings, LaneSettings, QueueMode,
    SchedulerSettings, UserRole,
};
pub use provider::{
    GuidedDecoding, IntentConfirm, ModelChoice, ProviderChainSettings, ProviderKind,
    ProviderSettings, SchemaFlavor, ToolCallingSettings, ToolMode,
};
pub use tools::{
    AgentToolPolicySettings, ApprovalMode, CustomToolSettings, ExecLimitsSettings, ExecMode,
    ExecSettings, InputGuardAction, SandboxMode, SandboxSettings, SearchProvider, SsrfSettings,
    ToolPolicySettings, ToolProfile, WebFetchSettings, WebSearchSettings, WebToolsSettings,
    BRAVE_DEFAULT_BASE,
};

/// Everything one process needs, resolved once from `config.json5` and the environment.
#[derive(Debug, Clone)]
pub struct Settings {
    pub home: PathBuf,
    /// The agent a request naming none goes to.
    pub default_agent: String,
    /// Every agent that resolved, `main` first, then in `agents.list` order.
    pub agents: Vec<AgentSettings>,
    /// Agents that could not be resolved (no provider, unknown provider, …), with why.
    pub unresolved: Vec<UnresolvedAgent>,
    /// What every agent of the process shares.
    pub shared: SharedSettings,
    pub store: StoreSettings,
    /// Every run of the process goes through it, whichever surface started it.
    pub scheduler: SchedulerSettings,
    pub gateway: GatewaySettings,
    /// `cron`: whether this process runs due jobs, and the default catch-up.
    pub cron: crate::CronConfig,
    /// `mcp.servers`, checked by whoever connects to them.
    pub mcp: crate::McpConfig,
    /// `channels`, with their tokens read from the environment.
    pub channels: ChannelsSettings,
    pub tracing: TracingSettings,
    /// The configuration as loaded, every secret masked: for display (`config.get`).
    pub shown: std::sync::Arc<serde_json::Value>,
}

impl Settings {
    /// Every provider some agent talks to (primary or fallback), once each, by name.
    pub fn providers_in_use(&self) -> Vec<&ProviderSettings> {
        let mut seen: Vec<&ProviderSettings> = Vec::new();
        for a in &self.agents {
            let chain = std::iter::once(&a.providers.primary).chain(a.providers.fallbacks.iter());
            for c in chain {
                if !seen.iter().any(|p| p.name == c.provider.name) {
                    seen.push(&c.provider);
                }
            }
        }
        seen
    }
}

/// What is kept of each run (`tracing`).
#[derive(Debug, Clone, PartialEq)]
pub struct TracingSettings {
    pub enabled: bool,
    pub verbose: bool,
    /// `None`: kept for ever.
    pub retention: Option<std::time::Duration>,
    pub queue: usize,
    /// `providers.<name>.models[].cost`, for every model that has one.
    pub prices: Vec<ModelPrice>,
    /// `None`: no OpenTelemetry export.
    pub otlp: Option<OtlpSettings>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    Http,
    Grpc,
}

/// Where the process's spans are exported (`tracing.otlp`).
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpSettings {
    /// For HTTP, the full URL of the traces resource (`…/v1/traces`).
    pub endpoint: String,
    pub protocol: OtlpProtocol,
    pub service_name: String,
    /// `headers`, then those of `headers_env` (which win).
    pub headers: Vec<(String, String)>,
    pub timeout: std::time::Duration,
}

impl Default for TracingSettings {
    fn default() -> Self {
        let c = crate::schema::TracingConfig::default();
        TracingSettings {
            enabled: c.enabled,
            verbose: c.verbose,
            retention: Some(std::time::Duration::from_secs(
                u64::from(c.retention_days) * 86_400,
            )),
            queue: c.queue,
            prices: Vec::new(),
            otlp: None,
        }
    }
}

/// One model's price, US dollars per million tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelPrice {
    pub provider: String,
    pub model: String,
    pub input: f64,
    pub output: f64,
    pub cached: f64,
}

/// The chat platforms this process answers on.
#[derive(Debug, Clone, Default)]
pub struct ChannelsSettings {
    pub telegram: Option<TelegramSettings>,
    pub discord: Option<DiscordSettings>,
    pub slack: Option<SlackSettings>,
    pub whatsapp: Option<WhatsAppSettings>,
    pub zalo: Option<ZaloSettings>,
    pub feishu: Option<FeishuSettings>,
}

pub type TelegramSettings = ChannelSettings<crate::TelegramConfig>;
pub type DiscordSettings = ChannelSettings<crate::DiscordConfig>;
pub type SlackSettings = ChannelSettings<crate::SlackConfig>;
pub type WhatsAppSettings = ChannelSettings<crate::WhatsAppConfig>;
pub type ZaloSettings = ChannelSettings<crate::ZaloConfig>;
pub type FeishuSettings = ChannelSettings<crate::FeishuConfig>;

/// One channel's settings and its token, read from the variable the settings name.
#[derive(Clone)]
pub struct ChannelSettings<C> {
    pub config: C,
    /// The value of `token_env` (`None`: not set, the channel cannot start).
    pub token: Option<String>,
    /// A platform's second secret: Slack's app-level token, Feishu's verification token.
    pub app_token: Option<String>,
}

impl<C: std::fmt::Debug> std::fmt::Debug for ChannelSettings<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelSettings")
            .field("config", &self.config)
            .field("token", &self.token.as_ref().map(|_| "********"))
            .field("app_token", &self.app_token.as_ref().map(|_| "********"))
            .finish()
    }
}

/// An agent whose settings could not be resolved.
#[derive(Debug, Clone)]
pub struct UnresolvedAgent {
    pub id: String,
    /// Shared because settings are cloned and an I/O error cannot be.
    pub error: Arc<ConfigError>,
}

/// Services one process shares between all its agents.
#[derive(Debug, Clone)]
pub struct SharedSettings {
    /// `exec`, `process` and custom tools: one guard, approval queue and process table.
    pub exec: ExecSettings,
    /// Tool calls allowed per session per hour (sliding window); 0 = unlimited.
    pub tool_calls_per_hour: u32,
    /// Tool executions at once in the whole process, all agents together.
    pub max_concurrent_tools_total: usize,
    pub subagents: SubagentSettings,
}

impl Default for SharedSettings {
    fn default() -> Self {
        let d = crate::AgentDefaults::default();
        Self {
            exec: ExecSettings::default(),
            tool_calls_per_hour: crate::ToolsConfig::default().rate_limit_per_hour,
            max_concurrent_tools_total: d.limits.max_concurrent_tools_total,
            subagents: SubagentSettings {
                max_depth: d.subagents.max_depth,
                max_children: d.subagents.max_children,
            },
        }
    }
}

/// How sessions are stored and repaired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSettings {
    pub integrity_strategy: IntegrityStrategy,
    /// A single stored tool result is cut to this many characters (the agent's cap too,
    /// so the transcript keeps what the model saw).
    pub tool_result_max_chars: usize,
    pub database: DatabaseSettings,
    /// `session.durability`: `true` for `batch` (turns share syncs), `false` for `fsync`.
    pub batch_sync: bool,
    /// `FERROCLAW_ENCRYPTION_KEY`: what provider API keys stored in the database are
    /// sealed with (`None`: such keys cannot be stored).
    pub encryption_key: Option<Secret>,
}

/// A value from the environment that must never reach a log or `config show`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<set>")
    }
}

/// Which backend holds the sessions.
#[derive(Clone, PartialEq, Eq)]
pub enum DatabaseSettings {
    /// SQLite index and JSONL transcripts under the home.
    Standalone,
    /// PostgreSQL at `url` (`FERROCLAW_DATABASE_URL`); `None` when the variable is unset,
    /// which the binary reports before starting anything.
    Managed { url: Option<String> },
}

impl std::fmt::Debug for DatabaseSettings {
    // The URL may carry a password: never in logs or `config show`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DatabaseSettings::Standalone => f.write_str("Standalone"),
            DatabaseSettings::Managed { url } => write!(
                f,
                "Managed {{ url: {} }}",
                if url.is_some() { "<set>" } else { "<unset>" }
            ),
        }
    }
}

/// How damaged transcripts are repaired.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum IntegrityStrategy {
    /// Fix every pairing issue.
    #[default]
    Full,
    /// Only drop orphaned tool results.
    RemoveOrphans,
}

impl Settings {
    /// The settings of agent `id`, or why it has none.
    pub fn agent(&self, id: &str) -> Result<&AgentSettings, Arc<ConfigError>> {
        if let Some(a) = self.agents.iter().find(|a| a.id == id) {
            return Ok(a);
        }
        match self.unresolved.iter().find(|u| u.id == id) {
            Some(u) => Err(u.error.clone()),
            None => Err(Arc::new(ConfigError::UnknownAgent {
                id: id.to_string(),
                known: self
                    .agents
                    .iter()
                    .map(|a| a.id.clone())
                    .chain(self.unresolved.iter().map(|u| u.id.clone()))
                    .collect(),
            })),
        }
    }
}

#[cfg(test)]
mod tests;
