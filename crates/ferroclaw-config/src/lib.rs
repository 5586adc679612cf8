//! Configuration loading for ferroclaw.
//!
//! `config.json5` (JSON5) under `$FERROCLAW_HOME` holds settings, never
//! secrets; keys come from the environment or `<home>/.env.local`. [`load`]
//! finds and parses the file, overlays the environment, collects unknown keys
//! as warnings and validates the result. [`LoadedConfig::settings`] then resolves it,
//! once, into the plain values of [`settings`]: what every crate below the binary takes
//! (they never see the file format's `*Config` types nor the environment).

mod channels_config;
mod env;
mod error;
mod gateway_access_config;
mod gateway_token;
mod keylines;
mod load;
mod mcp_config;
mod providers;
mod schema;
pub mod settings;
mod starter;
mod tools_config;
mod tools_exec_config;
mod tools_web_config;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Map, Value};

pub use channels_config::{
    ChannelBinding, ChannelsConfig, DiscordConfig, DmPolicy, FeishuConfig, GroupPolicy,
    SlackConfig, TelegramConfig, WhatsAppConfig, ZaloConfig,
};
pub use env::Env;
pub use error::ConfigError;
pub use gateway_access_config::{GatewayLimitsConfig, GatewayUserConfig, GatewayUserRole};
pub use gateway_token::{
    load_or_create_gateway_token, load_or_create_gateway_token_from, read_gateway_token,
    read_gateway_token_from, token_path, GatewayToken, TokenSource, TOKEN_ENV, VIEWER_TOKEN_ENV,
};
pub use load::{default_home, load, parse_config, ConfigWarning, LoadOptions};
pub use mcp_config::MCP_TRANSPORTS;
pub use providers::{env_name, mask_secret, ResolvedProvider};
pub use schema::{
    AgentConfig, AgentDefaults, AgentLimits, AgentsConfig, CatchUp, CompactionConfig, Config,
    ContextFilesConfig, CronConfig, GatewayConfig, GatewayLanesConfig, GatewayQueueMode,
    GatewayToolsConfig, GuidedDecoding, IntegrityStrategy, IntentConfig, LogFormat, LoggingConfig,
    McpConfig, McpServerConfig, ModelConfig, PromptMode, ProviderConfig, ProviderType,
    SessionConfig, SubagentsConfig, ToolMode,
};
pub use starter::{needs_auto_tool_mode, starter_config};
pub use tools_config::{InputGuardAction, ToolPolicyConfig, ToolProfile, ToolsConfig};
pub use tools_exec_config::{
    forbidden_child_env, CustomToolConfig, ExecApprovalConfig, ExecLimitsConfig, ExecModeConfig,
    ExecToolConfig, SandboxModeConfig,
};
pub use tools_web_config::{
    SearchProviderKind, SsrfConfig, WebFetchConfig, WebSearchConfig, WebToolsConfig,
};

/// The id of the agent that always exists.
pub const MAIN_AGENT_ID: &str = "main";

/// Result of [`load`]: the parsed config plus where it came from and the
/// environment it was resolved against.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub config: Config,
    pub home: PathBuf,
    /// The config file path (whether or not it exists).
    pub path: PathBuf,
    pub file_exists: bool,
    pub warnings: Vec<ConfigWarning>,
    /// Process environment with `.env.local` overlaid.
    pub env: Env,
}

/// Everything the agent loop needs to run one agent.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedAgent {
    pub id: String,
    pub name: String,
    pub workspace: PathBuf,
    pub provider: String,
    pub model: String,
    /// (provider, model) pairs tried in order when the primary fails.
    pub fallbacks: Vec<(String, String)>,
    pub context_window: u32,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    pub max_iterations: u32,
    pub timeout: Duration,
    /// `None`: no stall watchdog.
    pub stall_timeout: Option<Duration>,
    pub thinking_budget: Option<u32>,
    /// Tool allow list; `None` means every tool.
    pub tools: Option<Vec<String>>,
    /// The agent's level of the tool policy (`tools` as allow list, `tools_deny`,
    /// `tools_also_allow`); see [`AgentConfig::tool_policy`].
    pub tool_policy: ToolPolicyConfig,
    /// The agent's per-provider tool policies (`tools_by_provider`).
    pub tool_policy_by_provider: std::collections::BTreeMap<String, ToolPolicyConfig>,
    pub prompt_mode: PromptMode,
    pub stream: bool,
    pub history_turns: usize,
    pub tool_result_context_chars: usize,
    pub compaction: CompactionConfig,
    /// Tool mode of the primary model (`providers.<p>.models[].tool_mode`, else the provider's).
    pub tool_mode: ToolMode,
    pub guided_decoding: GuidedDecoding,
    pub intent: IntentConfig,
    pub per_user_workspace: bool,
    pub limits: AgentLimits,
}

impl LoadedConfig {
    /// Builds a `LoadedConfig` from an in-memory config, validating nothing.
    /// Handy for tests of crates that consume configuration.
    pub fn from_config(config: Config, home: PathBuf, env: Env) -> LoadedConfig {
        LoadedConfig {
            config,
            path: home.join("config.json5"),
            home,
            file_exists: false,
            warnings: Vec::new(),
            env,
        }
    }

    /// Effective providers: configured ones plus implicit ones from the
    /// environment (e.g. `OPENAI_API_KEY` → `openai`).
    pub fn providers(&self) -> Vec<ResolvedProvider> {
        providers::resolve_all(&self.config, &self.env)
    }

    /// One provider by name; local servers (ollama, vllm, lmstudio) resolve
    /// even when not configured.
    pub fn provider(&self, name: &str) -> Option<ResolvedProvider> {
        providers::resolve_named(&self.config, &self.env, name)
    }

    /// `main` first, then the ids from `agents.list`.
    pub fn agent_ids(&self) -> Vec<String> {
        let mut ids = vec![MAIN_AGENT_ID.to_string()];
        for a in &self.config.agents.list {
            if !ids.contains(&a.id) {
                ids.push(a.id.clone());
            }
        }
        ids
    }

    /// The `agents.list` entry marked `default: true`, else `main`.
    pub fn default_agent_id(&self) -> String {
        self.config
            .agents
            .list
            .iter()
            .find(|a| a.default)
            .map(|a| a.id.clone())
            .unwrap_or_else(|| MAIN_AGENT_ID.to_string())
    }

    /// Merges the agent's entry over `agents.defaults` and resolves provider,
    /// model, fallbacks and workspace.
    ///
    /// Provider choice: the agent's own `provider`; else, when the model is
    /// inherited from the defaults, `agents.defaults.provider` (a provider and
    /// model written side by side belong together, which keeps vLLM ids like
    /// `openai/gpt-oss-20b` on vLLM); else the model's `provider/` prefix when
    /// it names a known provider; else `agents.defaults.provider`; else the
    /// only provider, if there is exactly one.
    pub fn resolve_agent(&self, id: &str) -> Result<ResolvedAgent, ConfigError> {
        let entry = self.config.agents.list.iter().find(|a| a.id == id);
        if entry.is_none() && id != MAIN_AGENT_ID {
            return Err(ConfigError::UnknownAgent {
                id: id.to_string(),
                known: self.agent_ids(),
            });
        }
        let empty = AgentConfig::default();
        let a = entry.unwrap_or(&empty);
        let d = &self.config.agents.defaults;
        let err = |message: String| ConfigError::Resolve {
            agent: id.to_string(),
            message,
        };

        let known = providers::known_provider_names(&self.config, &self.env);
        let model_str = a.model.as_deref().or(d.model.as_deref());
        let bound = a.provider.as_deref().or(if a.model.is_none() {
            d.provider.as_deref()
        } else {
            None
        });
        let split = |m: &str| -> Option<(String, String)> {
            m.split_once('/')
                .filter(|(p, rest)| known.contains(*p) && !rest.is_empty())
                .map(|(p, rest)| (p.to_string(), rest.to_string()))
        };

        let (provider_name, model) = match (bound, model_str) {
            (Some(p), Some(m)) => {
                // Strip a redundant "p/" prefix; any other slash is part of
                // the model id.
                let m = m
                    .strip_prefix(p)
                    .and_then(|r| r.strip_prefix('/'))
                    .filter(|r| !r.is_empty())
                    .unwrap_or(m);
                (p.to_string(), Some(m.to_string()))
            }
            (Some(p), None) => (p.to_string(), None),
            (None, m) => match m.and_then(split) {
                Some((p, rest)) => (p, Some(rest)),
                None => {
                    let p = match d.provider.clone() {
                        Some(p) => p,
                        None => {
                            let all = self.providers();
                            match all.as_slice() {
                                [only] => only.name.clone(),
                                [] => {
                                    return Err(err(
                                        "no provider configured: set OPENAI_API_KEY (or \
                                         ANTHROPIC_API_KEY, …) in the environment or \
                                         .env.local, or run `ferroclaw onboard`"
                                            .into(),
                                    ))
                                }
                                many => {
                                    return Err(err(format!(
                                        "several providers are available ({}); choose one \
                                         with agents.defaults.provider or FERROCLAW_PROVIDER",
                                        many.iter()
                                            .map(|p| p.name.as_str())
                                            .collect::<Vec<_>>()
                                            .join(", ")
                                    )))
                                }
                            }
                        }
                    };
                    (p, m.map(str::to_string))
                }
            },
        };

        let provider = self.provider(&provider_name).ok_or_else(|| {
            err(format!(
                "provider `{provider_name}` is not configured (available: {})",
                self.providers()
                    .iter()
                    .map(|p| p.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        let model = match model.or_else(|| provider.models.first().map(|m| m.id.clone())) {
            Some(m) => m,
            None => {
                return Err(err(format!(
                    "no model configured: set agents.defaults.model in {} or FERROCLAW_MODEL",
                    self.path.display()
                )))
            }
        };

        let fallbacks = a
            .fallbacks
            .as_ref()
            .unwrap_or(&d.fallbacks)
            .iter()
            .map(|f| split(f).unwrap_or_else(|| (provider_name.clone(), f.clone())))
            .collect();

        let listed = provider.model(&model);
        let tool_mode = listed
            .and_then(|m| m.tool_mode)
            .unwrap_or(provider.tool_mode);
        let context_window = listed
            .and_then(|m| m.context_window)
            .or(a.context_window)
            .unwrap_or(d.context_window);
        let max_tokens = listed.and_then(|m| m.max_tokens).or(d.max_tokens);

        let workspace = match a.workspace.as_ref().or(d.workspace.as_ref()) {
            Some(w) => self.resolve_path(w),
            None if id == MAIN_AGENT_ID => self.home.join("workspace"),
            None => self.home.join(format!("workspace-{id}")),
        };

        Ok(ResolvedAgent {
            id: id.to_string(),
            name: a.name.clone().unwrap_or_else(|| id.to_string()),
            workspace,
            provider: provider_name,
            model,
            fallbacks,
            context_window,
            tool_mode,
            guided_decoding: provider.guided_decoding,
            intent: provider.intent.clone(),
            per_user_workspace: a.per_user_workspace.unwrap_or(d.per_user_workspace),
            limits: d.limits,
            max_tokens,
            temperature: d.temperature,
            max_iterations: a.max_iterations.unwrap_or(d.max_iterations),
            timeout: Duration::from_secs(a.timeout_seconds.unwrap_or(d.timeout_seconds)),
            thinking_budget: a.thinking_budget_tokens.or(d.thinking_budget_tokens),
            stall_timeout: Some(a.stall_timeout_seconds.unwrap_or(d.stall_timeout_seconds))
                .filter(|s| *s > 0)
                .map(Duration::from_secs),
            tools: a.tools.clone(),
            tool_policy: a.tool_policy(),
            tool_policy_by_provider: a.tools_by_provider.clone(),
            prompt_mode: a.prompt_mode.unwrap_or(d.prompt_mode),
            stream: d.stream,
            history_turns: self.config.session.history_turns,
            tool_result_context_chars: self.config.session.tool_result_context_chars,
            compaction: self.config.agents.defaults.compaction,
        })
    }

    /// Expands `~/` and makes relative paths relative to home.
    pub fn resolve_path(&self, p: &Path) -> PathBuf {
        let p = load::expand_tilde(p, &self.env);
        if p.is_absolute() {
            p
        } else {
            self.home.join(p)
        }
    }

    /// The effective configuration for `config show`: the config with
    /// environment overrides applied, providers replaced by their resolved
    /// form (API keys and credential headers masked, key source named), plus
    /// where it was loaded from.
    pub fn masked_json(&self) -> Value {
        let mut root = match serde_json::to_value(&self.config) {
            Ok(Value::Object(m)) => m,
            // Config serialises to an object by construction; keep going with
            // an empty one rather than panicking in a display path.
            _ => Map::new(),
        };
        let mut providers = Map::new();
        for p in self.providers() {
            let headers: Map<String, Value> = p
                .headers
                .iter()
                .map(|(k, v)| {
                    let v = if providers::is_sensitive_header(k) {
                        mask_secret(v)
                    } else {
                        v.clone()
                    };
                    (k.clone(), Value::String(v))
                })
                .collect();
            providers.insert(
                p.name.clone(),
                json!({
                    "type": p.kind.as_str(),
                    "base_url": p.base_url,
                    "api_key": p.api_key.as_deref().map(mask_secret),
                    "api_key_source": p.api_key_source,
                    "headers": headers,
                    "timeout_seconds": p.timeout.as_secs(),
                    "stream_idle_timeout_seconds": p.idle_timeout.as_secs(),
                    "schema_flavor": p.schema_flavor,
                    "models": p.models,
                }),
            );
        }
        root.insert("providers".into(), Value::Object(providers));
        // MCP servers' environment (any value may be a key) and their sensitive headers,
        // and the OTLP exporter's: shown masked too.
        let mask_map = |m: &mut Value, all: bool| {
            if let Value::Object(map) = m {
                for (k, v) in map.iter_mut() {
                    if let Value::String(s) = v {
                        if all || providers::is_sensitive_header(k) {
                            *s = mask_secret(s);
                        }
                    }
                }
            }
        };
        if let Some(Value::Object(servers)) = root.get_mut("mcp").and_then(|m| m.get_mut("servers"))
        {
            for server in servers.values_mut() {
                if let Some(env) = server.get_mut("env") {
                    mask_map(env, true);
                }
                if let Some(h) = server.get_mut("headers") {
                    mask_map(h, false);
                }
            }
        }
        if let Some(h) = root
            .get_mut("tracing")
            .and_then(|t| t.get_mut("otlp"))
            .and_then(|o| o.get_mut("headers"))
        {
            mask_map(h, false);
        }
        root.insert(
            "_source".into(),
            json!({
                "home": self.home.display().to_string(),
                "config_path": self.path.display().to_string(),
                "config_file_exists": self.file_exists,
            }),
        );
        Value::Object(root)
    }
}

#[cfg(test)]
mod tests;
