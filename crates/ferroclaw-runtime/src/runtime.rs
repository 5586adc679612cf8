//! [`Runtime`]: the agents of one process, built once from the configuration, and the
//! door every run enters by. Surfaces (HTTP, WebSocket, the CLI, the executor) turn
//! their input into [`Runtime::submit`] and render the [`RunHandle`] they get back.

use std::sync::Arc;
use std::time::Duration;

use ferroclaw_agent::{Agent, RunOptions};
use ferroclaw_config::settings::Settings;
use ferroclaw_store::SessionStore;
use ferroclaw_types::EntryBody;

use crate::bootstrap::{self, BootstrapError, SharedServices};
use crate::door::{queue_key, Core, RunObserver, RunSpec};
use crate::handle::{RunFailure, RunHandle};
use crate::origin::Origin;
use crate::scheduler::{QueueMode, Scheduler, SchedulerConfig, SubmitError};
use crate::session_tools::SubagentLimits;

/// How the runtime runs: the scheduler (lanes, queues) and the subagent limits.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    pub scheduler: SchedulerConfig,
    pub subagents: SubagentLimits,
    /// A default agent that cannot be built is skipped like any other (a gateway that
    /// starts with no provider configured serves `/health` and says what is missing)
    /// instead of failing the build.
    pub allow_missing_default: bool,
}

impl RuntimeOptions {
    /// As configured (`gateway.lanes`, `gateway.queue_capacity`, `gateway.debounce_ms`,
    /// `FERROCLAW_LANE_<NAME>`, `agents.defaults.subagents`).
    pub fn from_settings(settings: &Settings) -> Self {
        RuntimeOptions {
            scheduler: bootstrap::scheduler_config(&settings.scheduler),
            subagents: bootstrap::subagent_limits(settings),
            allow_missing_default: false,
        }
    }
}

/// A built agent and its id.
#[derive(Clone)]
pub struct AgentEntry {
    pub id: String,
    pub agent: Arc<Agent>,
}

/// A message for an agent's session.
pub struct Submit<'a> {
    pub agent_id: &'a str,
    /// The key as the caller names it; on a per-user agent it is the user's own key.
    pub session_key: &'a str,
    pub user: Option<&'a str>,
    pub message: &'a str,
    pub mode: QueueMode,
    pub origin: Origin,
    /// Per-run choices (instructions, sampling, a shorter time-out); default: none.
    pub options: RunOptions,
}

/// What a submitted message turned into.
pub enum Submitted {
    /// `/stop` or `/stopall`: answered at once with this text, no run.
    Command(String),
    Run(RunHandle),
}

/// Why a runtime could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The services all agents share (the exec sandbox, the tool rate limit).
    #[error("shared services: {0}")]
    Services(Box<BootstrapError>),
    #[error("FERROCLAW_ENCRYPTION_KEY: {0}")]
    EncryptionKey(ferroclaw_store::SecretError),
    /// The default agent (the others are skipped with a reason instead).
    #[error("agent `{id}`: {source}")]
    Agent {
        id: String,
        source: Box<BootstrapError>,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("unknown agent \"{0}\"")]
    UnknownAgent(String),
    #[error(transparent)]
    Submit(#[from] SubmitError),
}

pub struct Runtime {
    /// The configured agents, in configuration order (`main` first).
    pub(crate) agents: Vec<AgentEntry>,
    pub(crate) default_agent: String,
    skipped: Vec<(String, String)>,
    /// `None` for a runtime of prebuilt agents ([`Runtime::with_agents`]).
    pub(crate) services: Option<SharedServices>,
    pub(crate) core: Arc<Core>,
    /// The other instances on the same storage (managed mode): stops, aborts, changes.
    pub(crate) signals: Option<Arc<dyn ferroclaw_store::SignalBus>>,
    /// Users' agents kept in the store's directory (`None`: a store without one).
    pub(crate) tenants: Option<Arc<crate::tenants::Tenants>>,
    /// Scheduled jobs (`None`: a store that keeps none).
    pub(crate) cron: Option<crate::cron::CronBook>,
    /// MCP servers kept in the storage (`None`: a store that keeps none).
    pub(crate) mcp_servers: Option<Arc<crate::mcp_servers::McpServers>>,
    /// Where text delivered to a chat channel's session also goes out (set by the
    /// surface that runs the channels).
    chat_sink: std::sync::OnceLock<Arc<dyn ChatSink>>,
    /// Runs' traces (`None`: tracing off, or a store that keeps none).
    traces: Option<(
        Arc<crate::traces::TraceCollector>,
        Arc<dyn ferroclaw_store::TraceStore>,
    )>,
}

/// `(channel, "direct" | "group", chat or peer id)` of a chat channel's session key
/// (`agent:<agent>:<channel>:direct:<peer>`, also when scoped to a user).
pub fn channel_session(key: &str) -> Option<(&str, &str, &str)> {
    let mut parts = key.rsplitn(4, ':');
    let (id, scope, channel, rest) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let agent_scoped = rest.starts_with("agent:") || rest.contains(":agent:");
    (matches!(scope, "direct" | "group") && agent_scoped && !id.is_empty() && !channel.is_empty())
        .then_some((channel, scope, id))
}

/// Posts text to the chat a channel session belongs to (`agent:<id>:<channel>:direct|group:<id>`).
#[async_trait::async_trait]
pub trait ChatSink: Send + Sync {
    /// `Ok(false)`: the session is no chat channel's; `Err`: it is, and posting failed.
    async fn post(&self, session_key: &str, text: &str) -> Result<bool, String>;
}

impl Runtime {
    /// Builds every configured agent once. The default agent must build; any other
    /// agent that fails is skipped with a reason ([`Runtime::skipped_agents`]).
    pub fn build(
        settings: &Settings,
        store: Arc<dyn SessionStore>,
        options: RuntimeOptions,
    ) -> Result<Runtime, BuildError> {
        Self::build_with_clock(settings, store, options, Arc::new(crate::cron::SystemClock))
    }

    /// [`Runtime::build`] with the clock scheduled jobs are timed by (tests bring theirs).
    pub fn build_with_clock(
        settings: &Settings,
        store: Arc<dyn SessionStore>,
        options: RuntimeOptions,
        clock: Arc<dyn crate::cron::Clock>,
    ) -> Result<Runtime, BuildError> {
        let core = Core::new(Scheduler::new(options.scheduler), store.clone());
        let mut services = SharedServices::new(settings, core.clone(), options.subagents)
            .map_err(|e| BuildError::Services(Box::new(e)))?;
        let heartbeats = settings
            .agents
            .iter()
            .map(|a| (a.id.clone(), a.heartbeat.clone()))
            .collect();
        let cron = store.cron().map(|jobs| {
            crate::cron::CronBook::new(jobs, clock, settings.cron.catch_up)
                .with_heartbeats(heartbeats)
        });
        services.cron = cron.clone();
        let default_agent = settings.default_agent.clone();
        let mut agents = Vec::new();
        let mut skipped = Vec::new();
        // Agents that did not resolve fail here like agents that did not build.
        let configured = settings.agents.iter().map(|a| (a.id.clone(), Ok(a))).chain(
            settings
                .unresolved
                .iter()
                .map(|u| (u.id.clone(), Err(BootstrapError::Config(u.error.clone())))),
        );
        for (id, agent) in configured {
            let built =
                agent.and_then(|a| bootstrap::build_agent_with(a, store.clone(), &services));
            match built {
                Ok(agent) => agents.push(AgentEntry {
                    id: id.clone(),
                    agent: Arc::new(agent),
                }),
                Err(source) if id == default_agent && !options.allow_missing_default => {
                    return Err(BuildError::Agent {
                        id,
                        source: Box::new(source),
                    })
                }
                Err(e) => skipped.push((id, e.to_string())),
            }
        }
        let default_agent = if agents.iter().any(|a| a.id == default_agent) {
            default_agent
        } else {
            // A default that failed to build was skipped with its reason (a first run
            // without a provider); otherwise it is not a configured agent (a quirk).
            if !skipped.iter().any(|(id, _)| *id == default_agent) {
                tracing::warn!(default = %default_agent, "default agent not built");
            }
            agents.first().map_or(default_agent, |a| a.id.clone())
        };
        let key = settings
            .store
            .encryption_key
            .as_ref()
            .map(|k| ferroclaw_store::SecretKey::parse(&k.0))
            .transpose()
            .map_err(BuildError::EncryptionKey)?;
        let tenants = match (store.directory(), settings.agent(&default_agent)) {
            (Some(directory), Ok(template)) => Some(Arc::new(crate::tenants::Tenants::new(
                directory,
                key.clone(),
                template.clone(),
                agents.iter().map(|a| a.id.clone()).collect(),
            ))),
            _ => None,
        };
        let mcp_servers = store.mcp_servers().map(|stored| {
            Arc::new(crate::mcp_servers::McpServers::new(
                stored,
                services.mcp.clone(),
                store.signals(),
                key.clone(),
            ))
        });
        if let (Some(m), Ok(handle)) = (&mcp_servers, tokio::runtime::Handle::try_current()) {
            let m = m.clone();
            handle.spawn(async move {
                if let Err(e) = m.reload().await {
                    tracing::warn!(error = %e, "mcp: could not load the stored servers");
                }
            });
        }
        // Needs a Tokio runtime for its writer; a process without one keeps no traces.
        let traces = match (store.traces(), tokio::runtime::Handle::try_current()) {
            (Some(stored), Ok(_)) if settings.tracing.enabled => {
                // Twice the longest run any agent may make, and a minute.
                let longest = settings
                    .agents
                    .iter()
                    .map(|a| a.timeout)
                    .max()
                    .unwrap_or_default();
                let stale_after = longest * 2 + Duration::from_secs(60);
                let collector = crate::traces::TraceCollector::start(
                    stored.clone(),
                    &settings.tracing,
                    stale_after,
                );
                core.add_observer(collector.clone());
                Some((collector, stored))
            }
            _ => None,
        };
        let signals = crate::relay::start(
            store.as_ref(),
            core.scheduler.clone(),
            tenants.clone(),
            mcp_servers.clone(),
            core.watch.clone(),
        );
        Ok(Runtime {
            agents,
            default_agent,
            skipped,
            services: Some(services),
            core,
            signals,
            tenants,
            cron,
            mcp_servers,
            chat_sink: std::sync::OnceLock::new(),
            traces,
        })
    }

    /// A runtime for agents a surface built itself, with their own provider and tools
    /// (the executor: one agent whose tools are a gateway's). They share no exec toolset,
    /// rate limiter or session tools; the first agent is the default.
    pub fn with_agents(
        agents: Vec<Agent>,
        store: Arc<dyn SessionStore>,
        options: RuntimeOptions,
    ) -> Runtime {
        let core = Core::new(Scheduler::new(options.scheduler), store);
        let agents: Vec<AgentEntry> = agents
            .into_iter()
            .map(|a| AgentEntry {
                id: a.settings().id.clone(),
                agent: Arc::new(a),
            })
            .collect();
        Runtime {
            default_agent: agents.first().map(|a| a.id.clone()).unwrap_or_default(),
            agents,
            skipped: Vec::new(),
            services: None,
            core,
            signals: None,
            tenants: None,
            cron: None,
            mcp_servers: None,
            chat_sink: std::sync::OnceLock::new(),
            traces: None,
        }
    }

    /// Where runs' traces are kept (`None`: tracing is off).
    pub fn trace_store(&self) -> Option<&Arc<dyn ferroclaw_store::TraceStore>> {
        self.traces.as_ref().map(|(_, store)| store)
    }

    /// The traces `reader` may see that match `filter`, newest first.
    pub async fn list_traces(
        &self,
        reader: crate::traces::TraceReader<'_>,
        filter: ferroclaw_store::TraceFilter,
    ) -> Result<ferroclaw_store::TracePage, crate::traces::TraceError> {
        let store = self.trace_store().ok_or(crate::traces::TraceError::Off)?;
        store
            .list(&reader.scope(filter)?)
            .await
            .map_err(|e| match e {
                // A cursor this API did not give is the caller's mistake.
                ferroclaw_store::StoreError::InvalidKey(why) => {
                    crate::traces::TraceError::Invalid(why)
                }
                e => e.into(),
            })
    }

    /// One trace with its spans and the traces it started (`None`: no such trace, or
    /// not `reader`'s).
    pub async fn trace(
        &self,
        reader: crate::traces::TraceReader<'_>,
        id: &str,
    ) -> Result<
        Option<(
            ferroclaw_store::TraceRecord,
            Vec<ferroclaw_store::SpanRecord>,
            Vec<String>,
        )>,
        crate::traces::TraceError,
    > {
        let store = self.trace_store().ok_or(crate::traces::TraceError::Off)?;
        Ok(store.get(id).await?.filter(|(t, _, _)| reader.may_read(t)))
    }

    /// Token and cost sums of the model calls `reader` may see, by `group`.
    pub async fn usage(
        &self,
        reader: crate::traces::TraceReader<'_>,
        group: ferroclaw_store::UsageGroup,
        since: Option<i64>,
        until: Option<i64>,
    ) -> Result<Vec<ferroclaw_store::UsageRow>, crate::traces::TraceError> {
        let store = self.trace_store().ok_or(crate::traces::TraceError::Off)?;
        let query = ferroclaw_store::UsageQuery {
            since,
            until,
            user_id: reader.user,
        };
        Ok(store.usage(group, query).await?)
    }

    /// What the trace collector wrote, dropped and failed to write so far.
    pub fn trace_stats(&self) -> Option<crate::traces::TraceStats> {
        self.traces.as_ref().map(|(c, _)| c.stats())
    }

    /// Waits until the traces of finished runs are written (before the process exits).
    pub async fn flush_traces(&self) {
        if let Some((c, _)) = &self.traces {
            c.flush().await;
        }
    }

    /// Lets text delivered to channel sessions (scheduled jobs, the heartbeat) reach
    /// their chats (set once; `false` if already set).
    pub fn set_chat_sink(&self, sink: Arc<dyn ChatSink>) -> bool {
        self.chat_sink.set(sink).is_ok()
    }

    pub fn chat_sink(&self) -> Option<&Arc<dyn ChatSink>> {
        self.chat_sink.get()
    }

    /// The MCP servers kept in the storage (`None`: a store that keeps none, or a runtime
    /// of prebuilt agents).
    pub fn mcp_servers(&self) -> Option<&Arc<crate::mcp_servers::McpServers>> {
        self.mcp_servers.as_ref()
    }

    /// Tells `observer` about every run from now on.
    pub fn add_observer(&self, observer: Arc<dyn RunObserver>) {
        self.core.add_observer(observer)
    }

    /// The runs the stall watchdog cut short lately, newest first.
    pub fn recent_stalls(&self) -> Vec<crate::stalls::StalledRun> {
        self.core.stalls.recent()
    }

    /// The configured agents (users' agents: [`Runtime::visible_agents`]).
    pub fn agents(&self) -> &[AgentEntry] {
        &self.agents
    }

    /// A configured agent, or a user's agent already resolved by
    /// [`Runtime::agent_for`] (which is where access is checked).
    pub fn agent(&self, id: &str) -> Option<AgentEntry> {
        match self.agents.iter().find(|a| a.id == id) {
            Some(a) => Some(a.clone()),
            None => self.tenants.as_ref().and_then(|t| t.peek(id)),
        }
    }

    /// The scheduled jobs of this runtime's storage.
    pub fn cron(&self) -> Option<&crate::cron::CronBook> {
        self.cron.as_ref()
    }

    pub fn default_agent_id(&self) -> &str {
        &self.default_agent
    }

    pub fn default_agent(&self) -> Option<AgentEntry> {
        self.agent(&self.default_agent)
    }

    /// Agents that could not be built, with the reason.
    /// Why agent `id` could not be built (`None`: it was, or it is not configured).
    pub fn why_not_built(&self, id: &str) -> Option<&str> {
        let (_, why) = self.skipped.iter().find(|(a, _)| a == id)?;
        // The reason often names the agent already; say it once.
        let named = format!("agent `{id}`: ");
        Some(why.strip_prefix(named.as_str()).unwrap_or(why))
    }

    pub fn skipped_agents(&self) -> &[(String, String)] {
        &self.skipped
    }

    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.core.store
    }

    /// The services shared by configured agents; `None` for [`Runtime::with_agents`].
    pub fn services(&self) -> Option<&SharedServices> {
        self.services.as_ref()
    }

    pub fn scheduler(&self) -> &Arc<Scheduler> {
        &self.core.scheduler
    }

    /// The events of every run from now on, with their sessions: this process's runs
    /// and, on a shared store, the other instances' (`remote`). For watchers of a
    /// session; whoever started a run reads its [`RunHandle`].
    pub fn watch(&self) -> tokio::sync::broadcast::Receiver<Arc<crate::SessionEvent>> {
        self.core.watch.subscribe()
    }

    /// Declares a watcher of a session until the guard is dropped: the other instances
    /// of a shared store forward that session's runs here only while it is watched.
    pub fn watch_session(&self, agent_id: &str, stored_key: &str) -> crate::WatchGuard {
        self.core.watch.watch_session(agent_id, stored_key)
    }

    /// The key the store and the queue know a session by: on a per-user agent, the key
    /// a user names is scoped to that user, so two users' `main` are two sessions.
    pub fn stored_key(&self, agent: &AgentEntry, user: Option<&str>, key: &str) -> String {
        ferroclaw_agent::user_scope::stored_key(
            agent.agent.settings().per_user_workspace,
            user,
            key,
        )
    }

    /// Queues a message for a session (or answers `/stop`, `/stopall` at once). Never
    /// waits for the run.
    pub fn submit(&self, s: Submit<'_>) -> Result<Submitted, RuntimeError> {
        let agent = self
            .agent(s.agent_id)
            .ok_or_else(|| RuntimeError::UnknownAgent(s.agent_id.to_string()))?;
        let stored = self.stored_key(&agent, s.user, s.session_key);
        match s.message.trim().to_ascii_lowercase().as_str() {
            "/stop" => {
                let n = self.stop(&agent.id, &stored);
                if n == 0 && self.signals.is_some() {
                    return Ok(Submitted::Command(
                        "No turn of this session was running here; the other instances were asked to stop theirs.".into(),
                    ));
                }
                return Ok(Submitted::Command(format!("Stopped {n} running turn(s).")));
            }
            "/stopall" => {
                let n = self.stop_all(&agent.id, &stored);
                return Ok(Submitted::Command(format!(
                    "Stopped {n} turn(s) and cleared the queue."
                )));
            }
            _ => {}
        }
        let handle = self.core.submit_run(RunSpec {
            agent: agent.agent.clone(),
            session_key: s.session_key.to_string(),
            user: s.user.map(str::to_string),
            message: s.message.to_string(),
            mode: s.mode,
            origin: s.origin,
            options: s.options,
            parent_run_id: None,
        })?;
        Ok(Submitted::Run(handle))
    }

    /// Appends transcript entries, in order, through the session's queue, so they never
    /// land in the middle of a turn (`chat.inject`, `sessions.patch`, a surface seeding
    /// a session with the history its client sent).
    pub async fn write_entries(
        &self,
        agent_id: &str,
        stored_key: &str,
        bodies: Vec<EntryBody>,
    ) -> Result<(), RunFailure> {
        self.core.write_entries(agent_id, stored_key, bodies).await
    }

    /// Compacts a session's older history now (`/compact`), in the session's queue.
    /// `Ok(None)`: nothing old enough to compact.
    pub async fn compact(
        &self,
        agent_id: &str,
        stored_key: &str,
    ) -> Result<Option<(u64, u64)>, RunFailure> {
        let agent = self
            .agent(agent_id)
            .map(|a| a.agent.clone())
            .ok_or_else(|| {
                RunFailure::Submit(SubmitError::Failed(format!("unknown agent \"{agent_id}\"")))
            })?;
        let key = stored_key.to_string();
        let op = self
            .core
            .submit_op(agent_id, stored_key, move || async move {
                agent
                    .compact_session(&key, tokio_util::sync::CancellationToken::new())
                    .await
            })
            .map_err(RunFailure::Submit)?;
        op.await
    }

    /// Removes a session: stops its turns, drops its queue, then deletes it through the
    /// queue (a turn still unwinding would otherwise recreate what is being removed), and
    /// forgets its background processes and tool budget. Returns (existed, stopped runs).
    pub async fn delete_session(
        &self,
        agent_id: &str,
        stored_key: &str,
    ) -> Result<(bool, usize), RunFailure> {
        let stopped = self.stop_all(agent_id, stored_key);
        let store = self.core.store.clone();
        let (agent, key) = (agent_id.to_string(), stored_key.to_string());
        let op = self
            .core
            .submit_op(agent_id, stored_key, move || async move {
                Ok(store.delete(&agent, &key).await?)
            })
            .map_err(RunFailure::Submit)?;
        let existed = op.await?;
        self.forget_session(agent_id, stored_key);
        Ok((existed, stopped))
    }

    /// Deletes a session's traces: when a person deletes or resets a conversation,
    /// what it said goes with it (the traces hold previews of it). Not for the
    /// sessions a surface removes after each request (one-off HTTP, the executor):
    /// their runs' traces are the only record left of them.
    pub async fn forget_traces(&self, agent_id: &str, stored_key: &str) {
        if let Some(traces) = self.trace_store() {
            self.flush_traces().await;
            if let Err(e) = traces.forget_session(agent_id, stored_key).await {
                tracing::warn!(agent = %agent_id, session = %stored_key, error = %e, "the traces of a deleted session could not be removed");
            }
        }
    }

    /// Kills a session's background processes and drops its tool rate-limit history.
    pub fn forget_session(&self, agent_id: &str, stored_key: &str) {
        let Some(services) = &self.services else {
            return;
        };
        let scope = ferroclaw_agent::tool_scope(agent_id, stored_key);
        let killed = services.exec.processes.kill_session(&scope);
        if killed > 0 {
            tracing::info!(agent = %agent_id, session = %stored_key, killed, "killed the background processes of a removed session");
        }
        services.rate_limiter.forget(&scope);
    }

    /// `/stop`: aborts the session's oldest running turn. Returns how many ran here; a
    /// turn on another instance of the same storage is stopped there.
    pub fn stop(&self, agent_id: &str, stored_key: &str) -> usize {
        let n = self.core.scheduler.stop(&queue_key(agent_id, stored_key));
        if n == 0 {
            crate::relay::publish(
                self.signals.as_ref(),
                ferroclaw_store::Signal::Stop {
                    agent_id: agent_id.to_string(),
                    key: stored_key.to_string(),
                },
            );
        }
        n
    }

    /// `/stopall`: aborts every running turn of the session and drains its queue, here
    /// and on the other instances of the same storage. Returns how many ran here.
    pub fn stop_all(&self, agent_id: &str, stored_key: &str) -> usize {
        crate::relay::publish(
            self.signals.as_ref(),
            ferroclaw_store::Signal::StopAll {
                agent_id: agent_id.to_string(),
                key: stored_key.to_string(),
            },
        );
        self.core
            .scheduler
            .stop_all(&queue_key(agent_id, stored_key))
    }

    /// Aborts run `run_id` if it belongs to this session (a run id alone must not reach
    /// another's run); `false` when it is not running here, in which case the other
    /// instances of the same storage are asked.
    pub fn abort_in_session(&self, agent_id: &str, stored_key: &str, run_id: &str) -> bool {
        let qkey = queue_key(agent_id, stored_key);
        let here = self.core.scheduler.run_in_session(&qkey, run_id)
            && self.core.scheduler.abort_run(run_id);
        if !here {
            crate::relay::publish(
                self.signals.as_ref(),
                ferroclaw_store::Signal::Abort {
                    agent_id: agent_id.to_string(),
                    key: stored_key.to_string(),
                    run_id: run_id.to_string(),
                },
            );
        }
        here
    }

    pub fn session_busy(&self, agent_id: &str, stored_key: &str) -> bool {
        self.core
            .scheduler
            .session_busy(&queue_key(agent_id, stored_key))
    }

    pub fn active_runs(&self) -> usize {
        self.core.scheduler.active_runs()
    }

    pub fn queued(&self) -> usize {
        self.core.scheduler.queued()
    }

    /// Stops accepting; aborts still-running turns after `grace`; resolves when all ended.
    pub async fn shutdown(&self, grace: Duration) {
        self.core.scheduler.shutdown(grace).await;
        self.flush_traces().await;
    }
}

impl AsRef<Runtime> for Runtime {
    fn as_ref(&self) -> &Runtime {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::channel_session;

    #[test]
    fn channel_sessions_are_recognised_by_their_tail() {
        assert_eq!(
            channel_session("agent:main:telegram:direct:42"),
            Some(("telegram", "direct", "42"))
        );
        assert_eq!(
            channel_session("user:telegram:42:agent:main:telegram:group:-100"),
            Some(("telegram", "group", "-100"))
        );
        for not in [
            "main",
            "agent:main:telegram:dm:42",
            "cron:x:run:y",
            "telegram:direct:42",
            "agent:main:telegram:direct:",
        ] {
            assert_eq!(channel_session(not), None, "{not}");
        }
    }
}
