//! From the file format to settings: every default filled in, the environment read,
//! paths made absolute. Runs once per load ([`LoadedConfig::settings`]).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::{schema, tools_config, tools_exec_config as exec_cfg, tools_web_config as web_cfg};
use crate::{ConfigError, Env, LoadedConfig, ResolvedAgent, ResolvedProvider};

impl LoadedConfig {
    /// Resolves every agent and the process-wide settings. An agent that cannot be
    /// resolved (no provider, …) is listed in [`Settings::unresolved`] rather than failing
    /// the others: the gateway serves the agents that work.
    pub fn settings(&self) -> Settings {
        let cfg = &self.config;
        let mut agents = Vec::new();
        let mut unresolved = Vec::new();
        for id in self.agent_ids() {
            match self.agent_settings(&id) {
                Ok(a) => agents.push(a),
                Err(e) => unresolved.push(UnresolvedAgent {
                    id,
                    error: Arc::new(e),
                }),
            }
        }
        Settings {
            home: self.home.clone(),
            default_agent: self.default_agent_id(),
            agents,
            unresolved,
            shared: SharedSettings {
                exec: exec(&cfg.tools.exec),
                tool_calls_per_hour: cfg.tools.rate_limit_per_hour,
                max_concurrent_tools_total: cfg.agents.defaults.limits.max_concurrent_tools_total,
                subagents: SubagentSettings {
                    max_depth: cfg.agents.defaults.subagents.max_depth,
                    max_children: cfg.agents.defaults.subagents.max_children,
                },
            },
            store: StoreSettings {
                integrity_strategy: match cfg.session.integrity_strategy {
                    schema::IntegrityStrategy::Full => IntegrityStrategy::Full,
                    schema::IntegrityStrategy::RemoveOrphans => IntegrityStrategy::RemoveOrphans,
                },
                tool_result_max_chars: cfg.agents.defaults.limits.tool_result_max_chars,
                batch_sync: cfg.session.durability == schema::Durability::Batch,
                encryption_key: self
                    .env
                    .get("FERROCLAW_ENCRYPTION_KEY")
                    .filter(|k| !k.trim().is_empty())
                    .map(|k| super::Secret(k.to_string())),
                database: match cfg.database.mode {
                    schema::DatabaseMode::Standalone => DatabaseSettings::Standalone,
                    schema::DatabaseMode::Managed => DatabaseSettings::Managed {
                        url: self
                            .env
                            .get("FERROCLAW_DATABASE_URL")
                            .map(str::trim)
                            .filter(|u| !u.is_empty())
                            .map(str::to_owned),
                    },
                },
            },
            scheduler: SchedulerSettings {
                lanes: lanes(&cfg.gateway.lanes, &self.env),
                queue_capacity: cfg.gateway.queue_capacity.max(1),
                debounce: Duration::from_millis(cfg.gateway.debounce_ms),
            },
            gateway: gateway(&cfg.gateway, &self.env),
            cron: cfg.cron.clone(),
            mcp: cfg.mcp.clone(),
            shown: Arc::new(self.masked_json()),
            tracing: TracingSettings {
                enabled: cfg.tracing.enabled,
                verbose: cfg.tracing.verbose,
                retention: (cfg.tracing.retention_days > 0)
                    .then(|| Duration::from_secs(u64::from(cfg.tracing.retention_days) * 86_400)),
                queue: cfg.tracing.queue.max(1),
                prices: cfg
                    .providers
                    .iter()
                    .flat_map(|(name, p)| {
                        p.models.iter().filter_map(move |m| {
                            m.cost.map(|c| ModelPrice {
                                provider: name.clone(),
                                model: m.id.clone(),
                                input: c.input,
                                output: c.output,
                                cached: if c.cached > 0.0 { c.cached } else { c.input },
                            })
                        })
                    })
                    .collect(),
                otlp: cfg.tracing.otlp.as_ref().map(|o| self.otlp(o)),
            },
            channels: ChannelsSettings {
                telegram: cfg.channels.telegram.as_ref().map(|t| ChannelSettings {
                    config: t.clone(),
                    token: self.token(&t.token_env),
                    app_token: None,
                }),
                discord: cfg.channels.discord.as_ref().map(|d| ChannelSettings {
                    config: d.clone(),
                    token: self.token(&d.token_env),
                    app_token: None,
                }),
                slack: cfg.channels.slack.as_ref().map(|s| ChannelSettings {
                    config: s.clone(),
                    token: self.token(&s.token_env),
                    app_token: self.token(&s.app_token_env),
                }),
                whatsapp: cfg.channels.whatsapp.as_ref().map(|w| ChannelSettings {
                    config: w.clone(),
                    token: self.token(&w.token_env),
                    app_token: None,
                }),
                zalo: cfg.channels.zalo.as_ref().map(|z| ChannelSettings {
                    config: z.clone(),
                    token: self.token(&z.token_env),
                    app_token: None,
                }),
                feishu: cfg.channels.feishu.as_ref().map(|f| ChannelSettings {
                    config: f.clone(),
                    token: self.token(&f.token_env),
                    app_token: self.token(&f.verification_token_env),
                }),
            },
        }
    }

    fn otlp(&self, o: &schema::OtlpConfig) -> OtlpSettings {
        let protocol = if o.protocol.eq_ignore_ascii_case("grpc") {
            OtlpProtocol::Grpc
        } else {
            OtlpProtocol::Http
        };
        let base = o.endpoint.trim_end_matches('/');
        let endpoint = match protocol {
            OtlpProtocol::Http if !base.ends_with("/v1/traces") => format!("{base}/v1/traces"),
            _ => base.to_string(),
        };
        let mut headers: Vec<(String, String)> = o
            .headers
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
            .collect();
        // `key=value` pairs separated by commas.
        for pair in self.env.get(&o.headers_env).unwrap_or_default().split(',') {
            if let Some((k, v)) = pair.split_once('=') {
                let k = k.trim().to_ascii_lowercase();
                let v = v.trim().to_string();
                if !k.is_empty() {
                    headers.retain(|(name, _)| *name != k);
                    headers.push((k, v));
                }
            }
        }
        OtlpSettings {
            endpoint,
            protocol,
            service_name: o.service_name.clone(),
            headers,
            timeout: Duration::from_secs(o.timeout_seconds.max(1)),
        }
    }

    fn token(&self, var: &str) -> Option<String> {
        self.env
            .get(var)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    }

    /// The settings of one agent (what [`LoadedConfig::settings`] holds for it).
    pub fn agent_settings(&self, id: &str) -> Result<AgentSettings, ConfigError> {
        let r = self.resolve_agent(id)?;
        let cfg = &self.config;
        let d = &cfg.agents.defaults;
        let heartbeat = self
            .config
            .agents
            .list
            .iter()
            .find(|a| a.id == id)
            .and_then(|a| a.heartbeat.clone())
            .unwrap_or_else(|| d.heartbeat.clone());
        Ok(AgentSettings {
            heartbeat: heartbeat_settings(&heartbeat).map_err(|message| ConfigError::Resolve {
                agent: id.to_string(),
                message,
            })?,
            providers: self.chain(&r)?,
            id: r.id.clone(),
            name: r.name.clone(),
            workspace: r.workspace.clone(),
            per_user_workspace: r.per_user_workspace,
            home: self.home.clone(),
            max_iterations: r.max_iterations,
            timeout: r.timeout,
            stall_timeout: r.stall_timeout,
            thinking_budget: r.thinking_budget,
            max_tokens: r.max_tokens,
            temperature: r.temperature,
            stream: r.stream,
            prompt_mode: match r.prompt_mode {
                schema::PromptMode::Full => PromptMode::Full,
                schema::PromptMode::Minimal => PromptMode::Minimal,
            },
            history: HistorySettings {
                max_user_turns: r.history_turns,
                old_tool_result_chars: r.tool_result_context_chars,
            },
            compaction: CompactionSettings {
                context_window: r.context_window,
                threshold: r.compaction.threshold,
                max_messages: r.compaction.max_messages,
                keep_recent_turns: r.compaction.keep_recent_turns,
                memory_flush: r.compaction.memory_flush,
            },
            context_files: ContextFilesSettings {
                file_max_chars: d.context_files.file_max_chars,
                total_max_chars: d.context_files.total_max_chars,
            },
            tool_calling: ToolCallingSettings {
                mode: match r.tool_mode {
                    schema::ToolMode::Native => ToolMode::Native,
                    schema::ToolMode::Intent => ToolMode::Intent,
                    schema::ToolMode::Auto => ToolMode::Auto,
                },
                guided: match r.guided_decoding {
                    schema::GuidedDecoding::Off => GuidedDecoding::Off,
                    schema::GuidedDecoding::Vllm => GuidedDecoding::Vllm,
                    schema::GuidedDecoding::ResponseFormat => GuidedDecoding::ResponseFormat,
                },
                intent_order: r.intent.order.clone(),
                intent_sources: r.intent.sources.clone(),
                intent_prompt: r.intent.prompt.clone(),
                prompts_dir: self.home.join("prompts").join("intent"),
                confirm: match r.intent.confirm {
                    schema::IntentConfirm::Off => IntentConfirm::Off,
                    schema::IntentConfirm::Guided => IntentConfirm::Guided,
                    schema::IntentConfirm::Ask => IntentConfirm::Ask,
                },
            },
            tools: AgentToolsSettings {
                policy: AgentToolPolicySettings {
                    global: policy(&cfg.tools.global_policy()),
                    provider: cfg.tools.by_provider.get(&r.provider).map(policy),
                    agent: policy(&r.tool_policy),
                    agent_provider: r.tool_policy_by_provider.get(&r.provider).map(policy),
                    group_chat: policy(&cfg.tools.group_chat),
                    provider_name: r.provider.clone(),
                },
                denied_paths: cfg
                    .tools
                    .denied_paths
                    .iter()
                    .map(|p| self.resolve_path(Path::new(p)))
                    .collect(),
                web: web(&cfg.tools.web, &self.env),
                input_guard: match cfg.tools.input_guard {
                    tools_config::InputGuardAction::Off => InputGuardAction::Off,
                    tools_config::InputGuardAction::Log => InputGuardAction::Log,
                    tools_config::InputGuardAction::Warn => InputGuardAction::Warn,
                    tools_config::InputGuardAction::Block => InputGuardAction::Block,
                },
            },
            limits: AgentLimitsSettings {
                max_message_chars: cfg.gateway.max_message_chars,
                max_reply_bytes: d.limits.max_reply_bytes,
                max_tool_calls_per_turn: d.limits.max_tool_calls_per_turn,
                max_concurrent_tools: d.limits.max_concurrent_tools,
                tool_result_max_chars: d.limits.tool_result_max_chars,
            },
        })
    }

    /// The primary model, then each fallback; each provider resolved once.
    fn chain(&self, r: &ResolvedAgent) -> Result<ProviderChainSettings, ConfigError> {
        let d = &self.config.agents.defaults;
        let mut resolved: HashMap<String, ProviderSettings> = HashMap::new();
        let mut candidates = Vec::new();
        let wanted =
            std::iter::once((r.provider.clone(), r.model.clone())).chain(r.fallbacks.clone());
        for (name, model) in wanted {
            let provider = match resolved.get(&name) {
                Some(p) => p.clone(),
                None => {
                    let p = self
                        .provider(&name)
                        .ok_or_else(|| ConfigError::Resolve {
                            agent: r.id.clone(),
                            message: format!("provider `{name}` is not configured"),
                        })?
                        .settings(d.limits.default_max_tokens);
                    resolved.insert(name, p.clone());
                    p
                }
            };
            candidates.push(ModelChoice { provider, model });
        }
        let mut candidates = candidates.into_iter();
        let primary = candidates.next().ok_or_else(|| ConfigError::Resolve {
            agent: r.id.clone(),
            message: "no model to talk to".into(),
        })?;
        Ok(ProviderChainSettings {
            primary,
            fallbacks: candidates.collect(),
            cooldown: Duration::from_secs(d.fallback_cooldown_seconds),
        })
    }
}

impl ResolvedProvider {
    /// What the HTTP client needs; `default_max_tokens` goes to Anthropic-wire requests
    /// that set none.
    pub fn settings(&self, default_max_tokens: u32) -> ProviderSettings {
        ProviderSettings {
            name: self.name.clone(),
            kind: match self.kind {
                schema::ProviderType::OpenaiCompat => ProviderKind::OpenaiCompat,
                schema::ProviderType::Anthropic => ProviderKind::Anthropic,
            },
            base_url: self.base_url.clone(),
            api_key: self.api_key.clone(),
            headers: self.headers.clone(),
            request_timeout: self.timeout,
            idle_timeout: self.idle_timeout,
            schema_flavor: if self.schema_flavor.eq_ignore_ascii_case("gemini") {
                SchemaFlavor::Gemini
            } else {
                SchemaFlavor::OpenAi
            },
            default_max_tokens,
        }
    }
}

fn policy(p: &tools_config::ToolPolicyConfig) -> ToolPolicySettings {
    ToolPolicySettings {
        profile: p.profile.map(|p| match p {
            tools_config::ToolProfile::Minimal => ToolProfile::Minimal,
            tools_config::ToolProfile::Coding => ToolProfile::Coding,
            tools_config::ToolProfile::Messaging => ToolProfile::Messaging,
            tools_config::ToolProfile::Full => ToolProfile::Full,
        }),
        allow: p.allow.clone(),
        deny: p.deny.clone(),
        also_allow: p.also_allow.clone(),
    }
}

/// `tools.exec`.
pub(super) fn exec(c: &exec_cfg::ExecToolConfig) -> ExecSettings {
    ExecSettings {
        mode: match c.mode {
            exec_cfg::ExecModeConfig::Deny => ExecMode::Deny,
            exec_cfg::ExecModeConfig::Allowlist => ExecMode::Allowlist,
            exec_cfg::ExecModeConfig::Full => ExecMode::Full,
        },
        approval: match c.approval {
            exec_cfg::ExecApprovalConfig::Off => ApprovalMode::Off,
            exec_cfg::ExecApprovalConfig::OnMiss => ApprovalMode::OnMiss,
            exec_cfg::ExecApprovalConfig::Always => ApprovalMode::Always,
        },
        approval_timeout: Duration::from_secs(c.approval_timeout_seconds.max(1)),
        allowlist: c.allowlist.clone(),
        timeout: Duration::from_secs(c.timeout_seconds.max(1)),
        max_output_chars: c.max_output_chars,
        background_buffer_bytes: c.background_buffer_bytes,
        max_background_per_session: c.max_background_per_session,
        custom: c
            .custom
            .iter()
            .map(|t| CustomToolSettings {
                name: t.name.clone(),
                description: t.description.clone(),
                parameters: t.parameters.clone(),
                command: t.command.clone(),
                timeout: Duration::from_secs(t.timeout_seconds),
                workdir: t.workdir.clone(),
            })
            .collect(),
        sandbox: SandboxSettings {
            mode: match c.sandbox {
                exec_cfg::SandboxModeConfig::Auto => SandboxMode::Auto,
                exec_cfg::SandboxModeConfig::Bwrap => SandboxMode::Bwrap,
                exec_cfg::SandboxModeConfig::Landlock => SandboxMode::Landlock,
                exec_cfg::SandboxModeConfig::Off => SandboxMode::Off,
            },
            network: c.network,
            env: c.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            limits: ExecLimitsSettings {
                cpu_seconds: c.limits.cpu_seconds,
                memory_mb: c.limits.memory_mb,
                max_processes: c.limits.max_processes,
                file_size_mb: c.limits.file_size_mb,
            },
        },
    }
}

/// `tools.web`, the search key read from the variable it names.
pub(super) fn web(c: &web_cfg::WebToolsConfig, env: &Env) -> WebToolsSettings {
    let provider = match c.search.provider {
        web_cfg::SearchProviderKind::Brave => SearchProvider::Brave,
        web_cfg::SearchProviderKind::Searxng => SearchProvider::Searxng,
        web_cfg::SearchProviderKind::Generic => SearchProvider::Generic,
        web_cfg::SearchProviderKind::None => SearchProvider::None,
    };
    let base_url = c
        .search
        .base_url
        .clone()
        .filter(|b| !b.trim().is_empty())
        .or_else(|| (provider == SearchProvider::Brave).then(|| BRAVE_DEFAULT_BASE.to_string()));
    WebToolsSettings {
        search: WebSearchSettings {
            provider,
            base_url,
            api_key: c.search.api_key(env),
            api_key_env: c.search.api_key_env.clone(),
            default_count: (c.search.default_count as usize).clamp(1, 10),
            timeout: Duration::from_secs(c.search.timeout_seconds.max(1)),
        },
        fetch: WebFetchSettings {
            max_chars: c.fetch.max_chars.max(1),
            max_bytes: c.fetch.max_bytes.max(1),
            timeout: Duration::from_secs(c.fetch.timeout_seconds.max(1)),
            ssrf: SsrfSettings {
                allow_hosts: c.ssrf.allow_hosts.clone(),
                allow_private: c.ssrf.allow_private,
            },
        },
    }
}

/// `gateway.lanes`, overridden by `FERROCLAW_LANE_<NAME>` (a positive integer; other
/// values are ignored with a warning).
fn lanes(c: &schema::GatewayLanesConfig, env: &Env) -> LaneSettings {
    let lane = |name: &str, configured: usize| {
        let var = format!("FERROCLAW_LANE_{name}");
        match env.get(&var).map(|raw| (raw, raw.trim().parse::<usize>())) {
            Some((_, Ok(n))) if n > 0 => n,
            Some((raw, _)) => {
                tracing::warn!(%var, value = %raw, "ignoring invalid lane concurrency");
                configured.max(1)
            }
            None => configured.max(1),
        }
    };
    LaneSettings {
        main: lane("MAIN", c.main),
        subagent: lane("SUBAGENT", c.subagent),
        delegate: lane("DELEGATE", c.delegate),
        cron: lane("CRON", c.cron),
    }
}

fn gateway(c: &schema::GatewayConfig, env: &Env) -> GatewaySettings {
    let secret = |var: &str| {
        env.get(var)
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
    };
    GatewaySettings {
        host: c.host.clone(),
        port: c.port,
        rate_limit_rpm: c.rate_limit_rpm,
        allowed_origins: c.allowed_origins.clone(),
        allowed_hosts: c.allowed_hosts.clone(),
        token_from_env: secret(crate::TOKEN_ENV),
        viewer_token: secret(crate::VIEWER_TOKEN_ENV),
        users: c
            .users
            .iter()
            .map(|u| GatewayUserSettings {
                id: u.id.clone(),
                token_env: u.token_env.clone(),
                token: secret(&u.token_env),
                role: match u.role {
                    crate::GatewayUserRole::Viewer => UserRole::Viewer,
                    crate::GatewayUserRole::Operator => UserRole::Operator,
                },
            })
            .collect(),
        limits: GatewayLimitsSettings {
            max_connections: c.limits.max_connections,
            max_connections_per_ip: c.limits.max_connections_per_ip,
            max_ws_connections: c.limits.max_ws_connections,
            max_ws_connections_per_ip: c.limits.max_ws_connections_per_ip,
            connect_timeout: Duration::from_secs(c.limits.connect_timeout_seconds.max(1)),
            header_read_timeout: Duration::from_secs(c.limits.header_read_timeout_seconds.max(1)),
            body_read_timeout: Duration::from_secs(c.limits.body_read_timeout_seconds.max(1)),
            max_devices_per_user: c.limits.max_devices_per_user,
        },
        shutdown_grace: Duration::from_secs(c.shutdown_grace_seconds),
        queue_mode: match c.queue_mode {
            schema::GatewayQueueMode::Queue => QueueMode::Queue,
            schema::GatewayQueueMode::Followup => QueueMode::Followup,
            schema::GatewayQueueMode::Interrupt => QueueMode::Interrupt,
        },
        http_tools_allow: c.tools.allow.clone(),
        http_tools_deny: c.tools.deny.clone(),
    }
}

/// `None` when off; errors name the field.
fn heartbeat_settings(h: &schema::HeartbeatConfig) -> Result<Option<HeartbeatSettings>, String> {
    if !h.enabled {
        return Ok(None);
    }
    let every = humantime::parse_duration(h.every.trim())
        .map_err(|e| format!("heartbeat.every `{}`: {e}", h.every))?;
    if every < Duration::from_secs(60) {
        return Err(format!(
            "heartbeat.every `{}` is shorter than a minute",
            h.every
        ));
    }
    let minutes = |field: &str, t: &str| -> Result<u32, String> {
        let (hh, mm) = t
            .trim()
            .split_once(':')
            .ok_or_else(|| format!("heartbeat.active_hours.{field} `{t}` is not HH:MM"))?;
        match (hh.parse::<u32>(), mm.parse::<u32>()) {
            (Ok(h), Ok(m)) if h < 24 && m < 60 => Ok(h * 60 + m),
            // 24:00 closes a window at midnight.
            (Ok(24), Ok(0)) => Ok(24 * 60),
            _ => Err(format!("heartbeat.active_hours.{field} `{t}` is not HH:MM")),
        }
    };
    let active_hours = match &h.active_hours {
        Some(a) => Some((
            minutes("start", &a.start)?,
            minutes("end", &a.end)?,
            a.timezone.clone().unwrap_or_else(|| "UTC".into()),
        )),
        None => None,
    };
    let deliver_to_last = match h.target.as_str() {
        "last" => true,
        "none" => false,
        other => return Err(format!("heartbeat.target `{other}`: last or none")),
    };
    Ok(Some(HeartbeatSettings {
        every,
        active_hours,
        deliver_to_last,
    }))
}
