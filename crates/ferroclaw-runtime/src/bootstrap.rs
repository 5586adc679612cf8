//! Wiring from resolved settings to a runnable [`Agent`]: providers (each wrapped in
//! retry, then chained for model fallback), the tool registry and the agent's settings.
//! Everything here takes [`ferroclaw_config::settings`] values: the configuration was
//! resolved once, by whoever loaded it.

use std::collections::HashMap;
use std::sync::Arc;

use ferroclaw_config::settings::{
    self as cfg, ProviderChainSettings, ProviderKind, ProviderSettings, SchedulerSettings,
    Settings, StoreSettings,
};
use ferroclaw_config::ConfigError;
use ferroclaw_providers::{
    Anthropic, AnthropicConfig, FallbackChain, OpenAiCompat, OpenAiCompatConfig, Provider,
    ProviderError, RetryPolicy, RetryingProvider, SchemaFlavor,
};
use ferroclaw_store::SessionStore;
use ferroclaw_tools::builtin::{apply_patch::ApplyPatchTool, memory, web_search};
use ferroclaw_tools::exec_setup::ExecToolset;
use ferroclaw_tools::{DeniedPaths, PolicyContext, PolicyEngine, RateLimiter, ToolRegistry};

use ferroclaw_agent::history::HistoryLimits;
use ferroclaw_agent::{Agent, AgentSettings, ToolSlots};

use crate::door::Core;
use crate::scheduler::{DropPolicy, Lane, SchedulerConfig};
use crate::session_tools::{SessionHub, SubagentLimits};

#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error(transparent)]
    Config(Arc<ConfigError>),
    #[error("provider `{name}`: {source}")]
    Provider { name: String, source: ProviderError },
    #[error("tools: {0}")]
    Tools(String),
    #[error("workspace {path}: {source}")]
    Workspace {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("database.mode is \"managed\" but FERROCLAW_DATABASE_URL is not set")]
    DatabaseUrlMissing,
    #[error("session store: {0}")]
    Store(#[from] ferroclaw_store::StoreError),
}

/// Builds the raw client for one provider (no retry, no fallback).
pub fn provider_client(p: &ProviderSettings) -> Result<Arc<dyn Provider>, ProviderError> {
    let provider: Arc<dyn Provider> = match p.kind {
        ProviderKind::OpenaiCompat => Arc::new(OpenAiCompat::new(OpenAiCompatConfig {
            name: p.name.clone(),
            base_url: p.base_url.clone(),
            api_key: p.api_key.clone(),
            headers: p.headers.clone(),
            request_timeout: p.request_timeout,
            idle_timeout: p.idle_timeout,
            schema_flavor: match p.schema_flavor {
                cfg::SchemaFlavor::Gemini => SchemaFlavor::Gemini,
                cfg::SchemaFlavor::OpenAi => SchemaFlavor::OpenAi,
            },
        })?),
        ProviderKind::Anthropic => Arc::new(Anthropic::new(AnthropicConfig {
            name: p.name.clone(),
            base_url: p.base_url.clone(),
            api_key: p.api_key.clone(),
            headers: p.headers.clone(),
            request_timeout: p.request_timeout,
            idle_timeout: p.idle_timeout,
            default_max_tokens: p.default_max_tokens,
        })?),
    };
    Ok(provider)
}

/// The provider an agent talks to: its primary model then each fallback, every
/// candidate retried on transient faults before the chain moves on. One client per
/// provider, shared by its candidates.
pub fn chain_for(
    chain: &ProviderChainSettings,
    retry: RetryPolicy,
) -> Result<Arc<dyn Provider>, BootstrapError> {
    let mut clients: HashMap<&str, Arc<dyn Provider>> = HashMap::new();
    let mut candidates = Vec::new();
    for c in chain.candidates() {
        let name = c.provider.name.as_str();
        let client = match clients.get(name) {
            Some(client) => client.clone(),
            None => {
                let raw =
                    provider_client(&c.provider).map_err(|source| BootstrapError::Provider {
                        name: name.to_string(),
                        source,
                    })?;
                let wrapped: Arc<dyn Provider> =
                    Arc::new(RetryingProvider::new(raw, retry.clone()));
                clients.insert(name, wrapped.clone());
                wrapped
            }
        };
        candidates.push((client, c.model.clone()));
    }
    Ok(Arc::new(FallbackChain::new(candidates, chain.cooldown)))
}

/// The loop's settings of an agent, drawing on `tool_slots` for its tool executions
/// ([`build_agent_with`] passes the process-wide ones).
pub fn settings_for(agent: &cfg::AgentSettings, tool_slots: ToolSlots) -> AgentSettings {
    AgentSettings {
        id: agent.id.clone(),
        name: agent.name.clone(),
        workspace: agent.workspace.clone(),
        provider: agent.provider().to_string(),
        model: agent.model().to_string(),
        max_iterations: agent.max_iterations,
        timeout: agent.timeout,
        stall_timeout: agent.stall_timeout,
        thinking_budget: agent.thinking_budget,
        max_tokens: agent.max_tokens,
        temperature: agent.temperature,
        stream: agent.stream,
        prompt_mode: agent.prompt_mode,
        history: HistoryLimits {
            max_user_turns: agent.history.max_user_turns,
            old_tool_result_chars: agent.history.old_tool_result_chars,
        },
        max_message_chars: agent.limits.max_message_chars,
        compaction: agent.compaction,
        context_files: agent.context_files,
        tool_result_max_chars: agent.limits.tool_result_max_chars,
        input_guard: agent.tools.input_guard,
        per_user_workspace: agent.per_user_workspace,
        intent: ferroclaw_agent::tool_intent::IntentSettings::from_settings(&agent.tool_calling),
        max_reply_bytes: agent.limits.max_reply_bytes,
        max_tool_calls_per_turn: agent.limits.max_tool_calls_per_turn,
        max_concurrent_tools: agent.limits.max_concurrent_tools,
        tool_slots,
        context_budget: None,
    }
}

/// The transcript repair strategy, for the store's repair-on-load and for integrity
/// scans (CLI and gateway use the same one).
pub fn integrity_strategy(store: &StoreSettings) -> ferroclaw_store::Strategy {
    match store.integrity_strategy {
        cfg::IntegrityStrategy::Full => ferroclaw_store::Strategy::Full,
        cfg::IntegrityStrategy::RemoveOrphans => ferroclaw_store::Strategy::RemoveOrphans,
    }
}

/// The embedded file store under the home, repairing with the configured strategy.
pub fn file_store(settings: &Settings) -> ferroclaw_store::FileSessionStore {
    ferroclaw_store::FileSessionStore::new(settings.home.clone())
        .with_integrity_strategy(integrity_strategy(&settings.store))
        // The same cap as the agent's, so the transcript keeps what the model saw.
        .with_tool_result_chars(settings.store.tool_result_max_chars)
        .with_durability(durability(&settings.store))
}

fn durability(store: &StoreSettings) -> ferroclaw_store::Durability {
    if store.batch_sync {
        ferroclaw_store::Durability::Batch
    } else {
        ferroclaw_store::Durability::Fsync
    }
}

/// The session store as configured: the embedded one under the home, or PostgreSQL
/// (connected, its migrations verified and applied). Fails when the database cannot be
/// reached; a server retries ([`session_store_with_retry`]).
pub async fn session_store(settings: &Settings) -> Result<Arc<dyn SessionStore>, BootstrapError> {
    match &settings.store.database {
        cfg::DatabaseSettings::Standalone => Ok(Arc::new(file_store(settings))),
        cfg::DatabaseSettings::Managed { url } => {
            let url = url.as_deref().ok_or(BootstrapError::DatabaseUrlMissing)?;
            let store = ferroclaw_store::PgSessionStore::connect(url)
                .await?
                .with_integrity_strategy(integrity_strategy(&settings.store))
                .with_tool_result_chars(settings.store.tool_result_max_chars)
                .with_durability(durability(&settings.store));
            Ok(Arc::new(store))
        }
    }
}

/// [`session_store`], waiting out an unreachable database (back-off from 1 s to 30 s,
/// a log line each time) instead of failing: a gateway started before its database, or
/// during a fail-over, comes up when the database does. Configuration mistakes (no URL,
/// a migration that does not match) still fail at once.
pub async fn session_store_with_retry(
    settings: &Settings,
) -> Result<Arc<dyn SessionStore>, BootstrapError> {
    let mut delay = std::time::Duration::from_secs(1);
    loop {
        match session_store(settings).await {
            Err(BootstrapError::Store(ferroclaw_store::StoreError::Database {
                message, ..
            })) if !message.contains("migration") => {
                tracing::warn!(error = %message, retry_in_s = delay.as_secs(), "database unavailable; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(std::time::Duration::from_secs(30));
            }
            other => return other,
        }
    }
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
    /// The jobs the `cron` tool changes (`None`: the storage keeps none).
    pub cron: Option<crate::cron::CronBook>,
    /// The MCP servers of `mcp.servers`, whose tools every agent gets.
    pub mcp: Arc<ferroclaw_tools::mcp::McpHub>,
}

impl SharedServices {
    pub(crate) fn new(
        settings: &Settings,
        core: Arc<Core>,
        subagents: SubagentLimits,
    ) -> Result<Self, BootstrapError> {
        let shared = &settings.shared;
        Ok(Self {
            exec: ExecToolset::new(&shared.exec, &settings.home)
                .map_err(|e| BootstrapError::Tools(e.to_string()))?,
            rate_limiter: Arc::new(RateLimiter::per_hour(shared.tool_calls_per_hour)),
            sessions: SessionHub::new(subagents, core),
            tool_slots: ToolSlots::new(shared.max_concurrent_tools_total),
            cron: None,
            mcp: start_mcp(settings),
        })
    }
}

/// The configured MCP servers, started when there is a tokio runtime to run them on
/// (their tools appear as each becomes ready); stored ones join when they are loaded.
fn start_mcp(settings: &Settings) -> Arc<ferroclaw_tools::mcp::McpHub> {
    let hub = ferroclaw_tools::mcp::McpHub::new(&settings.mcp);
    if tokio::runtime::Handle::try_current().is_ok() {
        hub.start();
    }
    hub
}

/// The subagent limits as configured (`agents.defaults.subagents`); how many run at once
/// in the process is the scheduler's `subagent` lane.
pub fn subagent_limits(settings: &Settings) -> SubagentLimits {
    SubagentLimits {
        max_depth: settings.shared.subagents.max_depth,
        max_children: settings.shared.subagents.max_children,
    }
}

pub(crate) fn build_agent_with(
    agent: &cfg::AgentSettings,
    store: Arc<dyn SessionStore>,
    services: &SharedServices,
) -> Result<Agent, BootstrapError> {
    std::fs::create_dir_all(&agent.workspace).map_err(|source| BootstrapError::Workspace {
        path: agent.workspace.clone(),
        source,
    })?;
    let mut settings = settings_for(agent, services.tool_slots.clone());
    // Confinement checks compare canonical paths; resolve symlinks in the root once.
    if let Ok(canonical) = std::fs::canonicalize(&agent.workspace) {
        settings.workspace = canonical;
    }
    let provider = chain_for(&agent.providers, RetryPolicy::default())?;
    // The policy of the agent's top-level runs, computed once: the registry enforces it,
    // the hub re-binds it for subagents.
    let (policy, policy_ctx) = PolicyEngine::for_agent(
        &agent.id,
        &agent.tools.policy,
        services.sessions.limits().max_depth,
    );
    let tools = Arc::new(tool_registry(agent, services, &policy, &policy_ctx));
    // The session tools inside `tools` reach agents through the hub, so the agent is
    // bound after its registry exists.
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

/// The agent's tools behind its policy (what the model sees and may call), the
/// per-session rate limit, and the paths no tool may reach (the ferroclaw home first).
pub fn tool_registry(
    agent: &cfg::AgentSettings,
    services: &SharedServices,
    policy: &PolicyEngine,
    ctx: &PolicyContext,
) -> ToolRegistry {
    let mut registry = ToolRegistry::with_core_tools();
    // The guarded exec (and process, custom tools) replace the plain core exec.
    for tool in services.exec.tools() {
        registry.register(tool);
    }
    registry.register(Arc::new(ApplyPatchTool));
    for tool in web_search::web_tools(&agent.tools.web) {
        registry.register(tool);
    }
    for tool in memory::memory_tools(memory::MemorySettings::default()) {
        registry.register(tool);
    }
    for tool in services.sessions.tools(0) {
        registry.register(tool);
    }
    if let Some(book) = &services.cron {
        registry.register(Arc::new(crate::cron::CronTool { book: book.clone() }));
    }
    // Servers come and go (the API adds stored ones), so the hub is always a source.
    registry = registry.with_source(services.mcp.clone());
    // Policy last: it decides over everything registered above.
    registry
        .with_policy(policy, ctx)
        .with_group_chat_policy(policy, ctx, agent.tools.policy.group_chat.clone())
        .with_rate_limit(services.rate_limiter.clone())
        .with_denied_paths(DeniedPaths::for_home(
            &agent.home,
            &agent.tools.denied_paths,
        ))
}

/// The scheduler as configured: lane sizes (`FERROCLAW_LANE_<NAME>` applied when the
/// settings were resolved), queue capacity and debounce. One scheduler per process,
/// whichever surface it serves.
pub fn scheduler_config(settings: &SchedulerSettings) -> SchedulerConfig {
    SchedulerConfig {
        lanes: vec![
            (Lane::Main, settings.lanes.main),
            (Lane::Subagent, settings.lanes.subagent),
            (Lane::Delegate, settings.lanes.delegate),
            (Lane::Cron, settings.lanes.cron),
        ],
        queue_capacity: settings.queue_capacity,
        drop_policy: DropPolicy::Old,
        debounce: settings.debounce,
        // A direct conversation is one person: one run at a time. Groups get a little
        // parallelism so one slow member does not stall the others.
        direct_concurrency: 1,
        group_concurrency: 3,
    }
}

/// An agent outside any runtime, with services of its own: for tests and benchmarks of
/// the agent loop itself. A process's runs go through a `Runtime`, never through this.
pub fn build_agent(
    settings: &Settings,
    agent_id: &str,
    store: Arc<dyn SessionStore>,
) -> Result<Agent, BootstrapError> {
    let agent = settings.agent(agent_id).map_err(BootstrapError::Config)?;
    let scheduler = crate::scheduler::Scheduler::new(scheduler_config(&settings.scheduler));
    let services = SharedServices::new(
        settings,
        Core::new(scheduler, store.clone()),
        subagent_limits(settings),
    )?;
    build_agent_with(agent, store, &services)
}
