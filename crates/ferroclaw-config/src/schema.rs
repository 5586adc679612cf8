//! The shape of `config.json5`. Every section is optional; missing fields
//! take the defaults documented on each field.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Root of `config.json5`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    pub agents: AgentsConfig,
    pub providers: BTreeMap<String, ProviderConfig>,
    pub gateway: GatewayConfig,
    pub logging: LoggingConfig,
    pub session: SessionConfig,
    /// Tool policy, rate limit, input guard and denied paths (see `tools_config.rs`).
    pub tools: crate::tools_config::ToolsConfig,
    /// Where sessions are stored.
    pub database: DatabaseConfig,
    /// Scheduled jobs.
    pub cron: CronConfig,
    /// Outside tools over the Model Context Protocol.
    pub mcp: McpConfig,
    /// Chat platforms (see `channels_config.rs`).
    pub channels: crate::channels_config::ChannelsConfig,
    /// What is kept of each run: traces, spans and usage.
    pub tracing: TracingConfig,
}

/// `tracing`: one trace per run with spans for the agent, each model call and each tool
/// call, kept in the storage (`GET /v1/traces`, `usage.*`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TracingConfig {
    pub enabled: bool,
    /// Keep the whole user message and tool arguments (else 500-character previews).
    pub verbose: bool,
    /// Traces older than this are forgotten; 0 keeps them for ever.
    pub retention_days: u32,
    /// Traces waiting to be written; past it new ones are dropped (and counted), a run
    /// never waits for the storage.
    pub queue: usize,
    /// Export the process's spans (requests, runs, model and tool calls) to an
    /// OpenTelemetry collector.
    pub otlp: Option<OtlpConfig>,
}

impl Default for TracingConfig {
    fn default() -> Self {
        TracingConfig {
            enabled: true,
            verbose: false,
            retention_days: 30,
            queue: 4096,
            otlp: None,
        }
    }
}

/// `tracing.otlp`: where spans go, over OTLP.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OtlpConfig {
    /// The collector: `http://host:4318` (HTTP; `/v1/traces` is added) or
    /// `http://host:4317` (gRPC).
    pub endpoint: String,
    /// `http` (protobuf over HTTP) or `grpc`.
    pub protocol: String,
    pub service_name: String,
    /// Headers sent with every export (not secrets: those go in `headers_env`).
    pub headers: BTreeMap<String, String>,
    /// A variable holding more headers as `key=value,key2=value2` (the OpenTelemetry
    /// format), e.g. an API key.
    pub headers_env: String,
    pub timeout_seconds: u64,
}

impl OtlpConfig {
    /// The field at fault and why.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        let e = self.endpoint.trim();
        if !(e.starts_with("http://") || e.starts_with("https://")) || e.len() < 10 {
            return Err((
                "endpoint",
                format!("expected the collector's http:// or https:// URL, got {e:?}"),
            ));
        }
        if !matches!(self.protocol.to_ascii_lowercase().as_str(), "http" | "grpc") {
            return Err((
                "protocol",
                format!("expected \"http\" or \"grpc\", got {:?}", self.protocol),
            ));
        }
        if self.service_name.trim().is_empty() {
            return Err(("service_name", "must not be empty".into()));
        }
        Ok(())
    }
}

impl Default for OtlpConfig {
    fn default() -> Self {
        OtlpConfig {
            endpoint: String::new(),
            protocol: "http".into(),
            service_name: "ferroclaw".into(),
            headers: BTreeMap::new(),
            headers_env: "OTEL_EXPORTER_OTLP_HEADERS".into(),
            timeout_seconds: 10,
        }
    }
}

/// What a model costs, in US dollars per million tokens (for the usage summaries).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelCost {
    pub input: f64,
    pub output: f64,
    /// Prompt tokens read from the provider's cache (billed at `input` when 0).
    pub cached: f64,
}

/// `mcp`: the MCP servers whose tools the agents get, by name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct McpConfig {
    pub servers: BTreeMap<String, McpServerConfig>,
}

/// One MCP server: a child process (`stdio`) or an endpoint (`streamable-http`, `sse`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpServerConfig {
    /// `stdio`, `streamable-http` or `sse`.
    pub transport: String,
    pub command: Option<String>,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub url: Option<String>,
    pub headers: BTreeMap<String, String>,
    /// One tool call at most (the server's tools that hang are cut off here).
    #[serde(alias = "timeoutSeconds")]
    pub timeout_seconds: u64,
    /// Starting and `initialize` at most (slow servers need more).
    #[serde(alias = "initTimeoutSeconds")]
    pub init_timeout_seconds: u64,
    /// Tools are named `<prefix>_<tool>` (default `mcp_<server>`).
    #[serde(alias = "toolPrefix")]
    pub tool_prefix: Option<String>,
    pub enabled: bool,
}

impl Default for McpServerConfig {
    fn default() -> Self {
        McpServerConfig {
            transport: "stdio".into(),
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            url: None,
            headers: BTreeMap::new(),
            timeout_seconds: 60,
            init_timeout_seconds: 30,
            tool_prefix: None,
            enabled: true,
        }
    }
}

/// `cron`: the scheduler of jobs (`ferroclaw cron`, WebSocket `cron.*`, the `cron` tool).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CronConfig {
    /// `false`: jobs are kept but the gateway runs none.
    pub enabled: bool,
    /// What a job created without `catchUp` does about a run missed while the gateway
    /// was down: `once` (run it once at start) or `skip`.
    pub catch_up: CatchUp,
}

impl Default for CronConfig {
    fn default() -> Self {
        CronConfig {
            enabled: true,
            catch_up: CatchUp::Once,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    #[default]
    Once,
    Skip,
}

/// `database`: the embedded store (default) or PostgreSQL. The DSN is never in the file:
/// it comes from `FERROCLAW_DATABASE_URL`, which may hold a password.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DatabaseConfig {
    pub mode: DatabaseMode,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DatabaseMode {
    /// SQLite and files under the home: nothing to install.
    #[default]
    Standalone,
    /// PostgreSQL: several gateway instances on one database.
    Managed,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentsConfig {
    /// Settings every agent inherits (and the implicit `main` agent uses).
    pub defaults: AgentDefaults,
    /// Additional agents (or overrides for `main`).
    pub list: Vec<AgentConfig>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentDefaults {
    pub provider: Option<String>,
    /// `"provider/model"` or a bare model id.
    pub model: Option<String>,
    /// `"provider/model"` or bare `"model"` (= same provider as the agent).
    pub fallbacks: Vec<String>,
    pub workspace: Option<PathBuf>,
    pub context_window: u32,
    pub max_iterations: u32,
    pub timeout_seconds: u64,
    /// A run in which nothing progressed (no stream delta, no tool output) for this
    /// long is cut short and its session freed; waits on a person (exec approvals) or
    /// on other runs do not count. 0 turns the watchdog off.
    pub stall_timeout_seconds: u64,
    /// Extended thinking with this many tokens of budget (Anthropic models; at least
    /// 1,024). Unset: the model's default.
    pub thinking_budget_tokens: Option<u32>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    pub prompt_mode: PromptMode,
    pub stream: bool,
    pub compaction: CompactionConfig,
    /// Give each user (WS `user_id`, HTTP `X-Ferroclaw-User-Id` or OpenAI `user`) their own
    /// sub-workspace `user_<sanitized id>` inside the agent's workspace.
    pub per_user_workspace: bool,
    /// Bounds on what one model reply and one turn's tool calls may cost.
    pub limits: AgentLimits,
    /// How long a rate-limited or failing (provider, model) is skipped by the fallback
    /// chain.
    #[serde(alias = "fallbackCooldownSeconds")]
    pub fallback_cooldown_seconds: u64,
    /// Depth and fan-out of `sessions_spawn`.
    pub subagents: SubagentsConfig,
    /// A periodic turn of its own (off by default); an agent's own replaces this.
    pub heartbeat: HeartbeatConfig,
    /// How much of the workspace's context files (AGENTS.md, SOUL.md, …) the system
    /// prompt carries.
    #[serde(alias = "contextFiles")]
    pub context_files: ContextFilesConfig,
}

/// `agents.defaults.context_files`: each file is cut (head and tail kept) past
/// `file_max_chars`, and all of them together past `total_max_chars`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ContextFilesConfig {
    #[serde(alias = "fileMaxChars")]
    pub file_max_chars: usize,
    #[serde(alias = "totalMaxChars")]
    pub total_max_chars: usize,
}

impl Default for ContextFilesConfig {
    fn default() -> Self {
        ContextFilesConfig {
            file_max_chars: 20_000,
            total_max_chars: 24_000,
        }
    }
}

/// `agents.defaults.subagents`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SubagentsConfig {
    /// Deepest subagent level; a run at this depth cannot spawn another.
    #[serde(alias = "maxDepth")]
    pub max_depth: u32,
    /// Subagents running at once per parent session.
    #[serde(alias = "maxChildren")]
    pub max_children: usize,
}

impl Default for SubagentsConfig {
    fn default() -> Self {
        SubagentsConfig {
            max_depth: 1,
            max_children: 5,
        }
    }
}

/// `agents.defaults.limits`: caps that keep one runaway (or hostile) model reply from
/// exhausting memory or processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentLimits {
    /// Bytes of one model reply (text, reasoning and tool-call arguments together);
    /// reading stops past it and the run fails with a clear error. 1 MiB: real turns
    /// stay well below (model output limits end near 512 KiB).
    #[serde(alias = "maxReplyBytes")]
    pub max_reply_bytes: usize,
    /// Tool calls executed from one model reply; the rest are answered with a refusal.
    #[serde(alias = "maxToolCallsPerTurn")]
    pub max_tool_calls_per_turn: usize,
    /// Tool executions running at once within one run.
    #[serde(alias = "maxConcurrentTools")]
    pub max_concurrent_tools: usize,
    /// Tool executions running at once in the whole process, all agents together.
    #[serde(alias = "maxConcurrentToolsTotal")]
    pub max_concurrent_tools_total: usize,
    /// A single tool result is cut to this many characters (stored and sent back).
    #[serde(alias = "toolResultMaxChars")]
    pub tool_result_max_chars: usize,
    /// `max_tokens` sent to Anthropic-wire providers when no model sets one (the API
    /// requires it).
    #[serde(alias = "defaultMaxTokens")]
    pub default_max_tokens: u32,
}

impl Default for AgentLimits {
    fn default() -> Self {
        AgentLimits {
            max_reply_bytes: 1 << 20,
            max_tool_calls_per_turn: 32,
            max_concurrent_tools: 8,
            max_concurrent_tools_total: 64,
            tool_result_max_chars: 50_000,
            default_max_tokens: 4096,
        }
    }
}

/// When and how the older part of a conversation is summarised.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CompactionConfig {
    /// Share of the context window at which compaction starts.
    pub threshold: f32,
    /// Message count that also starts it (0 = no cap).
    pub max_messages: usize,
    /// User turns kept verbatim.
    pub keep_recent_turns: usize,
    /// One turn for the agent to write durable notes before summarising.
    pub memory_flush: bool,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            threshold: 0.75,
            max_messages: 400,
            keep_recent_turns: 3,
            memory_flush: false,
        }
    }
}

impl Default for AgentDefaults {
    fn default() -> Self {
        AgentDefaults {
            provider: None,
            model: None,
            fallbacks: Vec::new(),
            workspace: None,
            context_window: 128_000,
            max_iterations: 20,
            timeout_seconds: 600,
            stall_timeout_seconds: 300,
            thinking_budget_tokens: None,
            max_tokens: None,
            temperature: None,
            prompt_mode: PromptMode::Full,
            stream: true,
            compaction: CompactionConfig::default(),
            per_user_workspace: false,
            limits: AgentLimits::default(),
            fallback_cooldown_seconds: 60,
            subagents: SubagentsConfig::default(),
            context_files: ContextFilesConfig::default(),
            heartbeat: HeartbeatConfig::default(),
        }
    }
}

/// One entry of `agents.list`. Unset fields fall back to `agents.defaults`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentConfig {
    pub id: String,
    pub name: Option<String>,
    pub workspace: Option<PathBuf>,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub fallbacks: Option<Vec<String>>,
    /// Tool allow list; `None` means every tool.
    pub tools: Option<Vec<String>>,
    /// Tools this agent may never use (deny wins over every allow).
    #[serde(alias = "toolsDeny")]
    pub tools_deny: Vec<String>,
    /// Tools added to this agent on top of the global profile / allow lists.
    #[serde(alias = "toolsAlsoAllow")]
    pub tools_also_allow: Vec<String>,
    /// Per-provider policy for this agent only (`byProvider` at agent level).
    #[serde(alias = "toolsByProvider")]
    pub tools_by_provider: BTreeMap<String, crate::tools_config::ToolPolicyConfig>,
    pub max_iterations: Option<u32>,
    pub timeout_seconds: Option<u64>,
    pub stall_timeout_seconds: Option<u64>,
    pub thinking_budget_tokens: Option<u32>,
    pub context_window: Option<u32>,
    pub prompt_mode: Option<PromptMode>,
    /// Overrides `agents.defaults.per_user_workspace` for this agent.
    pub per_user_workspace: Option<bool>,
    /// Marks the agent used when a request names none.
    pub default: bool,
    /// Replaces `agents.defaults.heartbeat` for this agent.
    pub heartbeat: Option<HeartbeatConfig>,
}

/// `heartbeat`: every `every`, inside `active_hours`, the agent gets a turn to follow
/// its `HEARTBEAT.md`; an answer other than `HEARTBEAT_OK` goes to `target`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HeartbeatConfig {
    pub enabled: bool,
    /// A duration (`30m`, `2h`).
    pub every: String,
    #[serde(alias = "activeHours")]
    pub active_hours: Option<ActiveHoursConfig>,
    /// `last` (the session used last) or `none`.
    pub target: String,
}

impl Default for HeartbeatConfig {
    fn default() -> Self {
        HeartbeatConfig {
            enabled: false,
            every: "30m".into(),
            active_hours: None,
            target: "last".into(),
        }
    }
}

/// Local times `HH:MM`; an end before the start wraps midnight (`22:00`–`06:00`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActiveHoursConfig {
    pub start: String,
    pub end: String,
    /// IANA zone (default UTC).
    #[serde(default, alias = "tz")]
    pub timezone: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptMode {
    #[default]
    Full,
    Minimal,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderType {
    /// OpenAI chat-completions wire format (OpenAI, vLLM, Ollama, Groq, …).
    #[default]
    OpenaiCompat,
    /// Anthropic Messages API.
    Anthropic,
}

impl ProviderType {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderType::OpenaiCompat => "openai_compat",
            ProviderType::Anthropic => "anthropic",
        }
    }
}

impl std::fmt::Display for ProviderType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProviderConfig {
    /// Wire protocol. When omitted: `anthropic` for a provider named
    /// "anthropic", otherwise `openai_compat`.
    #[serde(rename = "type")]
    pub r#type: ProviderType,
    pub base_url: Option<String>,
    /// Name of the environment variable holding the API key.
    pub api_key_env: Option<String>,
    pub headers: BTreeMap<String, String>,
    pub timeout_seconds: u64,
    /// A stream may pause this long between events before it counts as stalled.
    #[serde(alias = "streamIdleTimeoutSeconds")]
    pub stream_idle_timeout_seconds: u64,
    /// JSON-schema dialect for tool definitions: "openai" or "gemini".
    pub schema_flavor: Option<String>,
    /// How tools reach this provider's models (a model entry may override it).
    pub tool_mode: ToolMode,
    /// In `intent` mode, constrain the answer to the tool-call JSON schema.
    pub guided_decoding: GuidedDecoding,
    /// How tool intents are read from text (`tool_mode` intent or auto).
    pub intent: IntentConfig,
    pub models: Vec<ModelConfig>,
}

/// Text-intent parsing for models without native tool calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct IntentConfig {
    /// Strategies in the order they are tried: harmony, native_text, guided_json, react,
    /// markers, fuzzy.
    pub order: Vec<String>,
    /// Where intents are looked for, first first: reasoning, content.
    pub sources: Vec<String>,
    /// The format the model is taught in `intent` mode (one of the strategies).
    pub prompt: String,
    /// When the text names a call but its arguments cannot be read with confidence:
    /// `off` (no call), `guided` (a second, small request for exactly that call with the
    /// server's guided decoding, falling back to `ask` when the server refuses it) or
    /// `ask` (the same request with a strict format and no guided fields).
    pub confirm: IntentConfirm,
}

/// See [`IntentConfig::confirm`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntentConfirm {
    #[default]
    Off,
    Guided,
    Ask,
}

/// Names the intent settings accept.
pub const INTENT_STRATEGIES: [&str; 6] = [
    "harmony",
    "native_text",
    "guided_json",
    "react",
    "markers",
    "fuzzy",
];
pub const INTENT_SOURCES: [&str; 2] = ["reasoning", "content"];

impl Default for IntentConfig {
    fn default() -> Self {
        IntentConfig {
            order: INTENT_STRATEGIES.iter().map(|s| (*s).to_string()).collect(),
            sources: INTENT_SOURCES.iter().map(|s| (*s).to_string()).collect(),
            prompt: "guided_json".into(),
            confirm: IntentConfirm::Off,
        }
    }
}

/// How a model is given tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolMode {
    /// Send `tools`; expect structured tool calls.
    #[default]
    Native,
    /// Never send `tools`: describe them in the system prompt and parse the text.
    Intent,
    /// Send `tools`; when the answer carries a tool intent only in its text (or the
    /// server rejects `tools`), parse the text.
    Auto,
}

/// How an `intent`-mode request asks the server to follow the tool-call schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuidedDecoding {
    #[default]
    Off,
    /// vLLM's `guided_json` body field.
    Vllm,
    /// OpenAI-style `response_format: {type: json_schema}`.
    ResponseFormat,
}

impl Default for ProviderConfig {
    fn default() -> Self {
        ProviderConfig {
            r#type: ProviderType::OpenaiCompat,
            base_url: None,
            api_key_env: None,
            headers: BTreeMap::new(),
            timeout_seconds: 120,
            stream_idle_timeout_seconds: 120,
            schema_flavor: None,
            tool_mode: ToolMode::Native,
            guided_decoding: GuidedDecoding::Off,
            intent: IntentConfig::default(),
            models: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelConfig {
    pub id: String,
    pub context_window: Option<u32>,
    pub max_tokens: Option<u32>,
    /// Overrides the provider's `tool_mode` for this model.
    pub tool_mode: Option<ToolMode>,
    /// Prices for the usage summaries.
    pub cost: Option<ModelCost>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GatewayConfig {
    pub host: String,
    pub port: u16,
    /// Requests per minute per user or IP (token bucket, burst 5); 0 turns limiting off.
    pub rate_limit_rpm: u32,
    /// Longer incoming user messages are truncated (with a note to the model).
    pub max_message_chars: usize,
    /// Browser origins allowed besides the gateway's own (same-origin); `"*"` allows any.
    /// A request from any other origin is refused on every route.
    pub allowed_origins: Vec<String>,
    /// `Host` names accepted besides loopback names and IP literals (DNS rebinding).
    pub allowed_hosts: Vec<String>,
    /// Per-user tokens (see `gateway_access_config`).
    pub users: Vec<crate::GatewayUserConfig>,
    /// Connection and time caps.
    pub limits: crate::GatewayLimitsConfig,
    /// On SIGINT/SIGTERM, running turns get this long to finish before they are aborted.
    pub shutdown_grace_seconds: u64,
    /// What a message does when its session is busy: `queue`, `followup` or `interrupt`.
    pub queue_mode: GatewayQueueMode,
    /// Quiet period (ms) during which messages to an idle session are merged into one
    /// turn. 0 (default) starts every turn at once, as API clients expect.
    pub debounce_ms: u64,
    /// Messages waiting per session before the drop policy applies.
    pub queue_capacity: usize,
    /// Which tools `POST /tools/invoke` may run.
    pub tools: GatewayToolsConfig,
    /// Concurrent runs per scheduler lane.
    pub lanes: GatewayLanesConfig,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            host: "127.0.0.1".into(),
            port: 18789,
            rate_limit_rpm: 0,
            max_message_chars: 32_000,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            users: Vec::new(),
            limits: crate::GatewayLimitsConfig::default(),
            shutdown_grace_seconds: 5,
            queue_mode: GatewayQueueMode::Queue,
            debounce_ms: 0,
            queue_capacity: 10,
            tools: GatewayToolsConfig::default(),
            lanes: GatewayLanesConfig::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GatewayQueueMode {
    #[default]
    Queue,
    Followup,
    Interrupt,
}

/// HTTP tool policy. `sessions_spawn`, `sessions_send`, `gateway` and `cron` are denied
/// over HTTP unless named in `allow`; `deny` adds more.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GatewayToolsConfig {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GatewayLanesConfig {
    pub main: usize,
    pub subagent: usize,
    pub delegate: usize,
    pub cron: usize,
}

impl Default for GatewayLanesConfig {
    fn default() -> Self {
        GatewayLanesConfig {
            // Runs mostly wait on the model: the lane bounds load, it should not make a few
            // slow conversations queue everyone else.
            main: 32,
            subagent: 8,
            delegate: 4,
            cron: 2,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LoggingConfig {
    /// A tracing filter directive, e.g. "info" or "ferroclaw=debug,info".
    pub level: String,
    pub format: LogFormat,
}

impl Default for LoggingConfig {
    fn default() -> Self {
        LoggingConfig {
            level: "info".into(),
            format: LogFormat::Text,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SessionConfig {
    /// Keep the last N user turns (and what followed them) in the context.
    pub history_turns: usize,
    /// Older tool results longer than this are trimmed (head + tail) in the
    /// context sent to the model; the transcript keeps them whole.
    pub tool_result_context_chars: usize,
    /// How damaged transcripts are repaired (start-up scan, open): `full` fixes every
    /// pairing issue, `remove_orphans` only drops orphaned tool results.
    pub integrity_strategy: IntegrityStrategy,
    /// When a turn counts as stored: `fsync` (each turn syncs its own session) or
    /// `batch` (turns ending during another's sync share the next one).
    pub durability: Durability,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            history_turns: 50,
            tool_result_context_chars: 20_000,
            integrity_strategy: IntegrityStrategy::Full,
            durability: Durability::Fsync,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    #[default]
    Fsync,
    Batch,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntegrityStrategy {
    #[default]
    Full,
    RemoveOrphans,
}

impl IntegrityStrategy {
    /// The config spelling; also what `ferroclaw_store::Strategy` parses.
    pub fn as_str(self) -> &'static str {
        match self {
            IntegrityStrategy::Full => "full",
            IntegrityStrategy::RemoveOrphans => "remove_orphans",
        }
    }
}
