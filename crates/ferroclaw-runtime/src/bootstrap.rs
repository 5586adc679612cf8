//! Wiring from configuration to a runnable [`Agent`]: providers (each wrapped in retry,
//! then chained for model fallback), the tool registry and the agent's settings.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ferroclaw_config::{LoadedConfig, ProviderType, ResolvedAgent, ResolvedProvider};
use ferroclaw_providers::{
    Anthropic, AnthropicConfig, FallbackChain, OpenAiCompat, OpenAiCompatConfig, Provider,
    ProviderError, RetryPolicy, RetryingProvider, SchemaFlavor,
};
use ferroclaw_store::SessionStore;
use ferroclaw_tools::builtin::{apply_patch::ApplyPatchTool, memory, web_search};
use ferroclaw_tools::exec_setup::ExecToolset;
use ferroclaw_tools::{DeniedPaths, PolicyContext, PolicyEngine, RateLimiter, ToolRegistry};

use ferroclaw_agent::history::HistoryLimits;
use ferroclaw_agent::prompt::PromptMode;
use ferroclaw_agent::{Agent, AgentSettings, ToolSlots};

use crate::door::Core;
use crate::session_tools::{SessionHub, SubagentLimits};

/// A stream may pause this long between events before it counts as stalled.
const STREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a rate-limited or failing (provider, model) is skipped by the fallback chain.
const FALLBACK_COOLDOWN: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error(transparent)]
    Config(#[from] ferroclaw_config::ConfigError),
    #[error("provider `{0}` is not configured")]
    UnknownProvider(String),
    #[error("provider `{name}`: {source}")]
    Provider { name: String, source: ProviderError },
    #[error("tools: {0}")]
    Tools(String),
    #[error("workspace {path}: {source}")]
    Workspace {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

/// Builds the raw client for one configured provider (no retry, no fallback).
pub fn provider_from_config(p: &ResolvedProvider) -> Result<Arc<dyn Provider>, ProviderError> {
    provider_with_max_tokens(p, DEFAULT_MAX_TOKENS)
}

/// As [`provider_from_config`]; `default_max_tokens` goes to Anthropic-wire requests
/// that set none (`agents.defaults.limits.default_max_tokens`).
fn provider_with_max_tokens(
    p: &ResolvedProvider,
    default_max_tokens: u32,
) -> Result<Arc<dyn Provider>, ProviderError> {
    let provider: Arc<dyn Provider> = match p.kind {
        ProviderType::OpenaiCompat => Arc::new(OpenAiCompat::new(OpenAiCompatConfig {
            name: p.name.clone(),
            base_url: p.base_url.clone(),
            api_key: p.api_key.clone(),
            headers: p.headers.clone(),
            request_timeout: p.timeout,
            idle_timeout: STREAM_IDLE_TIMEOUT,
            schema_flavor: if p.schema_flavor.eq_ignore_ascii_case("gemini") {
                SchemaFlavor::Gemini
            } else {
                SchemaFlavor::OpenAi
            },
        })?),
        ProviderType::Anthropic => Arc::new(Anthropic::new(AnthropicConfig {
            name: p.name.clone(),
            base_url: p.base_url.clone(),
            api_key: p.api_key.clone(),
            headers: p.headers.clone(),
            request_timeout: p.timeout,
            idle_timeout: STREAM_IDLE_TIMEOUT,
            default_max_tokens,
        })?),
    };
    Ok(provider)
}

/// `max_tokens` for Anthropic-wire requests that set none, unless configured otherwise.
const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The provider an agent talks to: its primary model then each fallback, every
/// candidate retried on transient faults before the chain moves on.
pub fn chain_for(
    loaded: &LoadedConfig,
    agent: &ResolvedAgent,
    retry: RetryPolicy,
) -> Result<Arc<dyn Provider>, BootstrapError> {
    let mut clients: HashMap<String, Arc<dyn Provider>> = HashMap::new();
    let mut candidates = Vec::new();
    let wanted = std::iter::once((agent.provider.clone(), agent.model.clone()))
        .chain(agent.fallbacks.iter().cloned());
    for (name, model) in wanted {
        let client = match clients.get(&name) {
            Some(c) => c.clone(),
            None => {
                let cfg = loaded
                    .provider(&name)
                    .ok_or_else(|| BootstrapError::UnknownProvider(name.clone()))?;
                let raw = provider_with_max_tokens(&cfg, agent.limits.default_max_tokens).map_err(
                    |source| BootstrapError::Provider {
                        name: name.clone(),
                        source,
                    },
                )?;
                let wrapped: Arc<dyn Provider> = Arc::new(RetryingProvider::new(raw, retry));
                clients.insert(name.clone(), wrapped.clone());
                wrapped
            }
        };
        candidates.push((client, model));
    }
    Ok(Arc::new(FallbackChain::new(candidates, FALLBACK_COOLDOWN)))
}

pub fn settings_for(agent: &ResolvedAgent) -> AgentSettings {
    AgentSettings {
        id: agent.id.clone(),
        name: agent.name.clone(),
        workspace: agent.workspace.clone(),
        provider: agent.provider.clone(),
        model: agent.model.clone(),
        max_iterations: agent.max_iterations,
        timeout: agent.timeout,
        max_tokens: agent.max_tokens,
        temperature: agent.temperature,
        stream: agent.stream,
        prompt_mode: match agent.prompt_mode {
            ferroclaw_config::PromptMode::Full => PromptMode::Full,
            ferroclaw_config::PromptMode::Minimal => PromptMode::Minimal,
        },
        history: HistoryLimits {
            max_user_turns: agent.history_turns,
            old_tool_result_chars: agent.tool_result_context_chars,
        },
        // The gateway's `max_message_chars` replaces this in `build_agent_with`.
        max_message_chars: 32_000,
        compaction: ferroclaw_agent::compaction::CompactionSettings {
            context_window: agent.context_window,
            threshold: agent.compaction.threshold,
            max_messages: agent.compaction.max_messages,
            keep_recent_turns: agent.compaction.keep_recent_turns,
            memory_flush: agent.compaction.memory_flush,
        },
        tool_result_max_chars: agent.limits.tool_result_max_chars,
        input_guard: ferroclaw_tools::InputGuardAction::Warn,
        per_user_workspace: agent.per_user_workspace,
        intent: ferroclaw_agent::tool_intent::IntentSettings::from_config(
            agent.tool_mode,
            agent.guided_decoding,
            &agent.intent,
        ),
        max_reply_bytes: agent.limits.max_reply_bytes,
        max_tool_calls_per_turn: agent.limits.max_tool_calls_per_turn,
        max_concurrent_tools: agent.limits.max_concurrent_tools,
        // Private to this agent; `build_agent_with` shares the process-wide slots.
        tool_slots: ToolSlots::new(agent.limits.max_concurrent_tools_total),
    }
}

/// The transcript repair strategy configured in `session.integrity_strategy`, for the
/// store's repair-on-load and for integrity scans (CLI and gateway use the same one).
pub fn integrity_strategy(loaded: &LoadedConfig) -> ferroclaw_store::Strategy {
    match loaded.config.session.integrity_strategy {
        ferroclaw_config::IntegrityStrategy::Full => ferroclaw_store::Strategy::Full,
        ferroclaw_config::IntegrityStrategy::RemoveOrphans => {
            ferroclaw_store::Strategy::RemoveOrphans
        }
    }
}

/// The embedded file store under the home, repairing with the configured strategy.
pub fn file_store(loaded: &LoadedConfig) -> ferroclaw_store::FileSessionStore {
    ferroclaw_store::FileSessionStore::new(loaded.home.clone())
        .with_integrity_strategy(integrity_strategy(loaded))
        // The same cap as the agent's, so the transcript keeps what the model saw.
        .with_tool_result_chars(loaded.config.agents.defaults.limits.tool_result_max_chars)
}

/// Services one process shares between all its agents: the exec toolset (guard,
/// approval broker, background processes), the per-session tool rate limiter, and the
/// hub behind the session tools and subagents.
pub struct SharedServices {
    pub exec: ExecToolset,
    pub rate_limiter: Arc<RateLimiter>,
    /// Agents built with these services are bound to it by [`build_agent_with`].
    pub sessions: Arc<SessionHub>,
    /// Concurrent tool executions across all agents (`limits.max_concurrent_tools_total`).
    pub tool_slots: ToolSlots,
}

impl SharedServices {
    pub(crate) fn from_config(
        loaded: &LoadedConfig,
        core: Arc<Core>,
        subagents: SubagentLimits,
    ) -> Result<Self, BootstrapError> {
        let cfg = &loaded.config.tools;
        Ok(Self {
            exec: ExecToolset::from_config(&cfg.exec, &loaded.home)
                .map_err(|e| BootstrapError::Tools(e.to_string()))?,
            rate_limiter: Arc::new(RateLimiter::per_hour(cfg.rate_limit_per_hour)),
            sessions: SessionHub::new(subagents, core),
            tool_slots: ToolSlots::new(
                loaded
                    .config
                    .agents
                    .defaults
                    .limits
                    .max_concurrent_tools_total,
            ),
        })
    }
}

pub(crate) fn build_agent_with(
    loaded: &LoadedConfig,
    agent_id: &str,
    store: Arc<dyn SessionStore>,
    services: &SharedServices,
) -> Result<Agent, BootstrapError> {
    let resolved = loaded.resolve_agent(agent_id)?;
    std::fs::create_dir_all(&resolved.workspace).map_err(|source| BootstrapError::Workspace {
        path: resolved.workspace.clone(),
        source,
    })?;
    let mut settings = settings_for(&resolved);
    settings.input_guard = loaded.config.tools.input_guard;
    settings.max_message_chars = loaded.config.gateway.max_message_chars;
    settings.tool_slots = services.tool_slots.clone();
    // `<home>/prompts/intent/<strategy>.md` overrides the built-in tool-calling prompts.
    settings.intent.prompts_dir = Some(loaded.home.join("prompts").join("intent"));
    // Confinement checks compare canonical paths; resolve symlinks in the root once.
    if let Ok(canonical) = std::fs::canonicalize(&resolved.workspace) {
        settings.workspace = canonical;
    }
    let provider = chain_for(loaded, &resolved, RetryPolicy::default())?;
    let tools = Arc::new(tool_registry(loaded, &resolved, services));
    // The session tools inside `tools` reach agents through the hub, so the agent is
    // bound after its registry exists.
    let (policy, policy_ctx) = policy_for(loaded, &resolved, services);
    services.sessions.bind(
        settings.clone(),
        provider.clone(),
        &tools,
        store.clone(),
        policy,
        policy_ctx,
    );
    Ok(Agent::new(settings, provider, tools, store))
}

/// The tool policy of an agent's top-level runs (subagents re-bind it deeper).
fn policy_for(
    loaded: &LoadedConfig,
    agent: &ResolvedAgent,
    services: &SharedServices,
) -> (PolicyEngine, PolicyContext) {
    let policy = PolicyEngine::from_config(&loaded.config.tools);
    let ctx = PolicyContext {
        provider: Some(agent.provider.clone()),
        agent_id: Some(agent.id.clone()),
        agent: Some(agent.tool_policy.clone()),
        agent_provider: agent.tool_policy_by_provider.get(&agent.provider).cloned(),
        group_chat: None,
        subagent_depth: 0,
        max_depth: services.sessions.limits().max_depth,
    };
    (policy, ctx)
}

/// The agent's tools behind its policy (what the model sees and may call), the
/// per-session rate limit, and the paths no tool may reach (the ferroclaw home first).
pub fn tool_registry(
    loaded: &LoadedConfig,
    agent: &ResolvedAgent,
    services: &SharedServices,
) -> ToolRegistry {
    let cfg = &loaded.config.tools;
    let (policy, ctx) = policy_for(loaded, agent, services);
    let denied: Vec<std::path::PathBuf> = cfg
        .denied_paths
        .iter()
        .map(|p| loaded.resolve_path(std::path::Path::new(p)))
        .collect();
    let mut registry = ToolRegistry::with_core_tools();
    // The guarded exec (and process, custom tools) replace the plain core exec.
    for tool in services.exec.tools() {
        registry.register(tool);
    }
    registry.register(Arc::new(ApplyPatchTool));
    for tool in web_search::web_tools(&cfg.web, &loaded.env) {
        registry.register(tool);
    }
    for tool in memory::memory_tools(memory::MemorySettings::default()) {
        registry.register(tool);
    }
    for tool in services.sessions.tools(0) {
        registry.register(tool);
    }
    // Policy last: it decides over everything registered above.
    registry
        .with_policy(&policy, &ctx)
        .with_rate_limit(services.rate_limiter.clone())
        .with_denied_paths(DeniedPaths::for_home(&loaded.home, &denied))
}

/// The scheduler as configured: lane sizes, queue capacity and debounce from
/// `gateway.lanes`, `gateway.queue_capacity`, `gateway.debounce_ms`, each lane overridden
/// by `FERROCLAW_LANE_<NAME>`. One scheduler per process, whichever surface it serves.
pub fn scheduler_config(loaded: &LoadedConfig) -> crate::scheduler::SchedulerConfig {
    use crate::scheduler::{DropPolicy, Lane, SchedulerConfig};
    let cfg = &loaded.config.gateway;
    SchedulerConfig {
        lanes: vec![
            (Lane::Main, cfg.lanes.main.max(1)),
            (Lane::Subagent, cfg.lanes.subagent.max(1)),
            (Lane::Delegate, cfg.lanes.delegate.max(1)),
            (Lane::Cron, cfg.lanes.cron.max(1)),
        ],
        queue_capacity: cfg.queue_capacity.max(1),
        drop_policy: DropPolicy::Old,
        debounce: Duration::from_millis(cfg.debounce_ms),
        ..SchedulerConfig::default()
    }
    .with_env_overrides(&|k| loaded.env.get(k).map(str::to_string))
}

/// An agent outside any runtime, with services of its own: for tests and benchmarks of
/// the agent loop itself. A process's runs go through a `Runtime`, never through this.
pub fn build_agent(
    loaded: &LoadedConfig,
    agent_id: &str,
    store: Arc<dyn SessionStore>,
) -> Result<Agent, BootstrapError> {
    let scheduler = crate::scheduler::Scheduler::new(scheduler_config(loaded));
    let services = SharedServices::from_config(
        loaded,
        Core::new(scheduler, store.clone()),
        SubagentLimits::default(),
    )?;
    build_agent_with(loaded, agent_id, store, &services)
}
