//! Session tools and subagents: `sessions_list`, `sessions_history`, `session_status`,
//! `sessions_send`, `sessions_spawn` and `subagents`.
//!
//! These tools have to run agents, and the tools live inside each agent's own registry,
//! so they reach agents through a [`SessionHub`] that is bound *after* the agents are
//! built ([`SessionHub::bind`], called by `bootstrap::build_agent_with`). The hub keeps
//! per agent only what is needed to assemble an [`Agent`] on demand (settings, provider,
//! store, policy) and a *weak* reference to the agent's tool registry: the registry holds
//! the tools, the tools hold the hub, so a strong reference would be a cycle.
//!
//! Every run these tools start goes through the runtime's door (the same scheduler as
//! HTTP, WebSocket and the CLI): `sessions_send` in the `delegate` lane, subagents in the
//! `subagent` lane, each in its session's queue, so no run here can overlap another run
//! on the same session, whoever started that one.
//!
//! Design choices (documented here because they are the contract):
//! - **Depth** travels in the tool instances: a subagent gets its own registry whose
//!   session tools carry `depth = parent + 1`, and whose policy is bound at that depth
//!   (the policy's subagent deny list and leaf rules then hide `sessions_send`, and at the
//!   maximum depth `sessions_spawn` / `subagents`). `sessions_spawn` refuses on its own
//!   too, so a policy that allows it anyway cannot go deeper.
//! - **Announcements** (`mode: "session"`): when a background subagent ends, a user-role
//!   message `[Subagent <label> finished]\n<text>` (or `failed`) is appended to the parent
//!   session's transcript, so the parent's next turn sees it. The append is queued in the
//!   parent session's queue like any write, so it lands after the parent's running turn.
//!   A cancelled subagent is not announced: the parent asked for it.
//! - **Limits**: depth (default 1), running children per parent session (default 5) and
//!   running subagents in the process (the scheduler's `subagent` lane, default 8). A
//!   spawn is refused with a clear error when the lane has no free slot, so a model never
//!   waits on a queue it cannot see (a spawn racing another for the last slot waits for
//!   the lane instead).
//! - `sessions_send` and `subagents steer` refuse a session that has a run in progress
//!   (its own current session included: waiting on it would deadlock).
//! - A `model` override for a subagent is refused unless it names the agent's model: the
//!   provider chain fixes its models when it is built.
//! - **Users** (agents with `per_user_workspace`): a call made for user U (`ctx.user`)
//!   sees and touches only U's sessions. Keys the model names are U's own keys, turned
//!   into stored keys with [`ferroclaw_agent::user_scope::scoped_key`], so another user's session
//!   cannot even be named; answers show U's keys unscoped. `sessions_send`,
//!   `sessions_spawn` and `subagents steer` run on behalf of U (U's workspace and
//!   sessions), and a user's call cannot reach an agent that does not keep users apart.
//!   A session that does not exist and one of another user get the same "no session"
//!   answer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use async_trait::async_trait;
use ferroclaw_agent::prompt::PromptMode;
use ferroclaw_agent::runner::store_message;
use ferroclaw_agent::{Agent, AgentSettings};
use ferroclaw_providers::Provider;
use ferroclaw_store::{SessionMeta, SessionStore};
use ferroclaw_tools::{PolicyContext, PolicyEngine, Tool, ToolContext, ToolRegistry, ToolResult};
use ferroclaw_types::{EntryBody, Message};
use serde_json::{json, Value};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::door::{queue_key, Core, RunSpec};
use crate::origin::Origin;
use crate::scheduler::{Lane, QueueMode};

/// Finished subagent records kept for `subagents list` (oldest dropped first).
const KEEP_FINISHED: usize = 100;
/// `sessions_send` waits this long unless told otherwise, and never longer than the max.
const DEFAULT_SEND_TIMEOUT: u64 = 60;
const MAX_TIMEOUT: u64 = 3600;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubagentLimits {
    /// Deepest subagent level; a run at this depth cannot spawn.
    pub max_depth: u32,
    /// Subagents running at once per parent session.
    pub max_children: usize,
}

impl Default for SubagentLimits {
    fn default() -> Self {
        Self {
            max_depth: 1,
            max_children: 5,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubagentMode {
    Run,
    Session,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubagentStatus {
    Running,
    Done,
    Failed(String),
    Cancelled,
}

/// What `subagents list` shows, and what [`SessionHub::subagents`] returns.
#[derive(Debug, Clone)]
pub struct SubagentInfo {
    pub id: String,
    pub label: String,
    pub agent_id: String,
    pub session_key: String,
    pub parent_agent: String,
    pub parent_key: String,
    pub mode: SubagentMode,
    pub status: SubagentStatus,
    pub result: Option<String>,
    /// The user the subagent runs for (per-user agents); `session_key` and `parent_key`
    /// are then stored keys, scoped to that user ([`crate::user_scope`]).
    pub user: Option<String>,
}

impl SubagentInfo {
    /// The subagent's session key as its user knows it.
    pub fn client_key(&self) -> &str {
        client_key(self.user.as_deref(), &self.session_key)
    }
}

struct Record {
    info: SubagentInfo,
    cancel: CancellationToken,
}

/// What the hub needs to assemble agent `settings.id` on demand.
struct AgentHandle {
    settings: AgentSettings,
    provider: Arc<dyn Provider>,
    tools: Weak<ToolRegistry>,
    store: Arc<dyn SessionStore>,
    policy: PolicyEngine,
    policy_ctx: PolicyContext,
}

/// Shared by all agents of a process; see the module docs.
pub struct SessionHub {
    limits: SubagentLimits,
    agents: RwLock<HashMap<String, Arc<AgentHandle>>>,
    /// Users' agents (kept in the database): reachable from their own runs only, never
    /// named as another agent's subagent target (their provider keys and files are
    /// their owner's).
    private: RwLock<std::collections::HashSet<String>>,
    records: Mutex<Vec<Record>>,
    next_id: AtomicU64,
    finished: Notify,
    /// The runtime's scheduler and store: every run and write goes through them.
    core: Arc<Core>,
}

impl SessionHub {
    pub(crate) fn new(limits: SubagentLimits, core: Arc<Core>) -> Arc<Self> {
        Arc::new(Self {
            limits,
            agents: RwLock::new(HashMap::new()),
            private: RwLock::default(),
            records: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            finished: Notify::new(),
            core,
        })
    }

    pub fn limits(&self) -> SubagentLimits {
        self.limits
    }

    /// The session tools for a run at subagent `depth` (0 = top level).
    pub fn tools(self: &Arc<Self>, depth: u32) -> Vec<Arc<dyn Tool>> {
        [
            Kind::List,
            Kind::History,
            Kind::Status,
            Kind::Send,
            Kind::Spawn,
            Kind::Subagents,
        ]
        .into_iter()
        .map(|kind| {
            Arc::new(SessionTool {
                kind,
                hub: self.clone(),
                depth,
            }) as Arc<dyn Tool>
        })
        .collect()
    }

    /// Makes an agent reachable from the session tools.
    pub fn bind(
        &self,
        settings: AgentSettings,
        provider: Arc<dyn Provider>,
        tools: &Arc<ToolRegistry>,
        store: Arc<dyn SessionStore>,
        policy: PolicyEngine,
        policy_ctx: PolicyContext,
    ) {
        let handle = AgentHandle {
            settings,
            provider,
            tools: Arc::downgrade(tools),
            store,
            policy,
            policy_ctx,
        };
        if let Ok(mut agents) = self.agents.write() {
            agents.insert(handle.settings.id.clone(), Arc::new(handle));
        }
    }

    /// Every subagent the hub knows of (running and recently finished).
    pub fn subagents(&self) -> Vec<SubagentInfo> {
        self.lock_records().iter().map(|r| r.info.clone()).collect()
    }

    /// Resolves once subagent `id` is no longer running (or is unknown).
    pub async fn wait_finished(&self, id: &str) {
        loop {
            let notified = self.finished.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let running = self
                .lock_records()
                .iter()
                .any(|r| r.info.id == id && r.info.status == SubagentStatus::Running);
            if !running {
                return;
            }
            notified.await;
        }
    }

    fn lock_records(&self) -> std::sync::MutexGuard<'_, Vec<Record>> {
        // A panic while holding the lock leaves consistent data (plain pushes/updates).
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Binds a user's agent (see `private`).
    pub fn bind_private(&self, id: &str) {
        if let Ok(mut p) = self.private.write() {
            p.insert(id.to_string());
        }
    }

    /// Forgets an agent that is no longer built (a user's agent changed or evicted).
    pub fn unbind(&self, id: &str) {
        if let Ok(mut agents) = self.agents.write() {
            agents.remove(id);
        }
        if let Ok(mut p) = self.private.write() {
            p.remove(id);
        }
    }

    fn is_private(&self, id: &str) -> bool {
        self.private.read().map_or(true, |p| p.contains(id))
    }

    fn handle(&self, agent_id: &str) -> Result<Arc<AgentHandle>, String> {
        let agents = self
            .agents
            .read()
            .map_err(|_| "agent directory unavailable")?;
        agents.get(agent_id).cloned().ok_or_else(|| {
            let mut known: Vec<&String> = agents.keys().filter(|k| !self.is_private(k)).collect();
            known.sort();
            format!("unknown agent \"{agent_id}\"; known agents: {known:?}")
        })
    }

    /// Whether the session has a run going or messages waiting, whoever sent them.
    fn session_busy(&self, agent_id: &str, key: &str) -> bool {
        self.core.scheduler.session_busy(&queue_key(agent_id, key))
    }

    /// Registers a running subagent after checking the per-parent and lane limits.
    fn admit(&self, info: SubagentInfo, cancel: CancellationToken) -> Result<(), String> {
        let mut records = self.lock_records();
        let running = |r: &&Record| r.info.status == SubagentStatus::Running;
        let children = records
            .iter()
            .filter(running)
            .filter(|r| {
                r.info.parent_agent == info.parent_agent && r.info.parent_key == info.parent_key
            })
            .count();
        if children >= self.limits.max_children {
            return Err(format!(
                "refused: this session already has {children} subagents running (the limit is {}); wait for one to finish or cancel one with `subagents`",
                self.limits.max_children
            ));
        }
        if records
            .iter()
            .filter(running)
            .any(|r| r.info.agent_id == info.agent_id && r.info.session_key == info.session_key)
        {
            return Err(format!(
                "refused: subagent \"{}\" is already running; choose another label or wait for it",
                info.label
            ));
        }
        let lane_free = self.core.scheduler.lane_available(Lane::Subagent);
        if lane_free == 0 {
            return Err(format!(
                "refused: the subagent lane is full ({} subagents running in this process); try again later",
                self.core.scheduler.config().lane_limit(Lane::Subagent)
            ));
        }
        // Re-steering a finished subagent replaces its old record.
        records.retain(|r| r.info.id != info.id);
        records.push(Record { info, cancel });
        let finished = records
            .iter()
            .filter(|r| r.info.status != SubagentStatus::Running)
            .count();
        if finished > KEEP_FINISHED {
            if let Some(i) = records
                .iter()
                .position(|r| r.info.status != SubagentStatus::Running)
            {
                records.remove(i);
            }
        }
        Ok(())
    }

    fn finish(&self, id: &str, outcome: &Result<String, String>, cancelled: bool) {
        if let Some(r) = self.lock_records().iter_mut().find(|r| r.info.id == id) {
            r.info.status = match outcome {
                Ok(_) => SubagentStatus::Done,
                Err(_) if cancelled => SubagentStatus::Cancelled,
                Err(e) => SubagentStatus::Failed(e.clone()),
            };
            r.info.result = outcome.as_ref().ok().cloned();
        }
        self.finished.notify_waiters();
    }

    /// Appends `text` as a user message to a session, in the session's queue (after its
    /// running turn, if any).
    async fn append_queued(&self, agent_id: &str, key: &str, text: String) -> Result<(), String> {
        let body = EntryBody::Message {
            message: Message::user(text),
        };
        self.core
            .write_entries(agent_id, key, vec![body])
            .await
            .map_err(|e| e.to_string())
    }

    /// Runs `message` in the session `session_key` names for `user` (unscoped: the agent
    /// scopes it) through the runtime's door; `cancel` aborts it.
    async fn run_text(
        &self,
        agent: Agent,
        session_key: &str,
        user: Option<&str>,
        message: String,
        from: StartedBy,
        cancel: CancellationToken,
    ) -> Result<String, String> {
        let handle = self
            .core
            .submit_run(RunSpec {
                agent: Arc::new(agent),
                session_key: session_key.to_string(),
                user: user.map(str::to_string),
                message,
                mode: QueueMode::Queue,
                origin: from.origin,
                options: Default::default(),
                parent_run_id: from.parent_run_id,
            })
            .map_err(|e| e.to_string())?;
        let aborter = handle.aborter();
        let outcome = handle.outcome();
        tokio::pin!(outcome);
        let result = tokio::select! {
            r = &mut outcome => r,
            _ = cancel.cancelled() => {
                aborter.abort();
                outcome.await
            }
        };
        result.map(|out| out.text).map_err(|e| e.to_string())
    }

    /// Runs a subagent in the background and announces its end to the parent session.
    fn start_background(
        self: &Arc<Self>,
        agent: Agent,
        info: SubagentInfo,
        message: String,
        from: StartedBy,
        cancel: CancellationToken,
    ) {
        let hub = self.clone();
        tokio::spawn(async move {
            let outcome = hub
                .run_text(
                    agent,
                    info.client_key(),
                    info.user.as_deref(),
                    message,
                    from,
                    cancel.clone(),
                )
                .await;
            let cancelled = cancel.is_cancelled();
            hub.finish(&info.id, &outcome, cancelled);
            if cancelled {
                return;
            }
            let text = match &outcome {
                Ok(text) => format!("[Subagent {} finished]\n{text}", info.label),
                Err(e) => format!("[Subagent {} failed]\n{e}", info.label),
            };
            if let Err(e) = hub
                .append_queued(&info.parent_agent, &info.parent_key, text)
                .await
            {
                tracing::warn!(subagent = %info.id, error = %e, "could not announce the subagent result");
            }
        });
    }
}

impl AgentHandle {
    fn registry(&self) -> Result<Arc<ToolRegistry>, String> {
        self.tools
            .upgrade()
            .ok_or_else(|| format!("agent \"{}\" is no longer running", self.settings.id))
    }

    /// The agent itself, with its run time-out replaced.
    fn agent(&self, timeout: Duration) -> Result<Agent, String> {
        let mut settings = self.settings.clone();
        settings.timeout = timeout;
        // Nobody watches these runs' partial text; only the final answer is used.
        settings.stream = false;
        Ok(Agent::new(
            settings,
            self.provider.clone(),
            self.registry()?,
            self.store.clone(),
        ))
    }

    /// A subagent at `depth`: minimal prompt, tools re-bound to the policy at that depth,
    /// with session tools that know their depth.
    fn subagent(
        &self,
        hub: &Arc<SessionHub>,
        depth: u32,
        timeout: Option<Duration>,
    ) -> Result<Agent, String> {
        let mut registry = (*self.registry()?).clone();
        for tool in hub.tools(depth) {
            registry.register(tool);
        }
        let ctx = PolicyContext {
            subagent_depth: depth,
            max_depth: hub.limits.max_depth,
            ..self.policy_ctx.clone()
        };
        let registry = registry.with_policy(&self.policy, &ctx);
        let mut settings = self.settings.clone();
        settings.prompt_mode = PromptMode::Minimal;
        settings.stream = false;
        if let Some(t) = timeout {
            settings.timeout = t;
        }
        Ok(Agent::new(
            settings,
            self.provider.clone(),
            Arc::new(registry),
            self.store.clone(),
        ))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    List,
    History,
    Status,
    Send,
    Spawn,
    Subagents,
}

struct SessionTool {
    kind: Kind,
    hub: Arc<SessionHub>,
    /// Subagent depth of the run this instance belongs to (0 = top level).
    depth: u32,
}

#[async_trait]
impl Tool for SessionTool {
    fn name(&self) -> &str {
        match self.kind {
            Kind::List => "sessions_list",
            Kind::History => "sessions_history",
            Kind::Status => "session_status",
            Kind::Send => "sessions_send",
            Kind::Spawn => "sessions_spawn",
            Kind::Subagents => "subagents",
        }
    }

    fn description(&self) -> &str {
        match self.kind {
            Kind::List => "List this agent's sessions (key, last update, model, tokens).",
            Kind::History => "Read the messages of one of this agent's sessions.",
            Kind::Status => "Show the current session's details and its running subagents.",
            Kind::Send => "Send a message to another session of this agent and wait for its reply.",
            Kind::Spawn => "Start a subagent on a task, in its own session; mode \"run\" waits for the result, mode \"session\" posts it back here when done.",
            Kind::Subagents => "List, cancel or steer (send a follow-up to) the subagents of this session.",
        }
    }

    fn parameters(&self) -> Value {
        match self.kind {
            Kind::List => json!({"type": "object", "properties": {
                "limit": {"type": "integer", "description": "most recent sessions to list (default 20)"}}}),
            Kind::History => json!({"type": "object", "properties": {
                "sessionKey": {"type": "string"},
                "limit": {"type": "integer", "description": "last N messages (default 20)"},
                "includeTools": {"type": "boolean", "description": "include tool calls and results"}},
                "required": ["sessionKey"]}),
            Kind::Status => json!({"type": "object", "properties": {}}),
            Kind::Send => json!({"type": "object", "properties": {
                "sessionKey": {"type": "string"},
                "label": {"type": "string", "description": "a subagent label of this session, instead of sessionKey"},
                "message": {"type": "string"},
                "timeoutSeconds": {"type": "integer"}},
                "required": ["message"]}),
            Kind::Spawn => json!({"type": "object", "properties": {
                "task": {"type": "string"},
                "label": {"type": "string"},
                "agentId": {"type": "string"},
                "model": {"type": "string"},
                "runTimeoutSeconds": {"type": "integer"},
                "mode": {"type": "string", "enum": ["run", "session"]}},
                "required": ["task"]}),
            Kind::Subagents => json!({"type": "object", "properties": {
                "action": {"type": "string", "enum": ["list", "cancel", "steer"]},
                "id": {"type": "string", "description": "subagent id or label"},
                "message": {"type": "string"}},
                "required": ["action"]}),
        }
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> ToolResult {
        let result = match self.kind {
            Kind::List => self.list(ctx, &args).await,
            Kind::History => self.history(ctx, &args).await,
            Kind::Status => self.status(ctx).await,
            Kind::Send => self.send(ctx, &args).await,
            Kind::Spawn => self.spawn(ctx, &args).await,
            Kind::Subagents => self.subagents(ctx, &args).await,
        };
        match result {
            Ok(text) => ToolResult::ok(text),
            Err(text) => ToolResult::error(format!("{}: {text}", self.name())),
        }
    }
}

impl SessionTool {
    async fn list(&self, ctx: &ToolContext, args: &Value) -> Result<String, String> {
        let handle = self.hub.handle(&ctx.agent_id)?;
        let limit = uint_arg(args, &["limit"]).unwrap_or(20).clamp(1, 200) as usize;
        let sessions = handle
            .store
            .list(&ctx.agent_id)
            .await
            .map_err(|e| store_message(&e))?;
        // Another user's sessions are not counted either: their number is theirs.
        let mine: Vec<(&str, &SessionMeta)> = sessions
            .iter()
            .filter_map(|m| shown_key(ctx, &m.key).map(|k| (k, m)))
            .collect();
        let rows: Vec<Value> = mine
            .iter()
            .take(limit)
            .map(|(key, m)| meta_json(key, m))
            .collect();
        Ok(json!({"count": mine.len(), "sessions": rows}).to_string())
    }

    async fn history(&self, ctx: &ToolContext, args: &Value) -> Result<String, String> {
        let key = str_arg(args, &["sessionKey", "session_key"]).ok_or("sessionKey is required")?;
        let limit = uint_arg(args, &["limit"]).unwrap_or(20).clamp(1, 500) as usize;
        let tools = args
            .get("includeTools")
            .or_else(|| args.get("include_tools"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let handle = self.hub.handle(&ctx.agent_id)?;
        let stored = stored_key(ctx, &key);
        existing(&handle, &ctx.agent_id, &stored, &key).await?;
        // A read: the other session may be running and must not be repaired under it.
        let entries = handle
            .store
            .read(&ctx.agent_id, &stored)
            .await
            .map_err(|e| store_message(&e))?
            .unwrap_or_default();
        let mut rows: Vec<Value> = ferroclaw_store::build_context(&entries)
            .iter()
            .filter_map(|m| message_json(m, tools))
            .collect();
        let skip = rows.len().saturating_sub(limit);
        let rows: Vec<Value> = rows.drain(skip..).collect();
        Ok(json!({"sessionKey": key, "messages": rows}).to_string())
    }

    async fn status(&self, ctx: &ToolContext) -> Result<String, String> {
        let handle = self.hub.handle(&ctx.agent_id)?;
        let stored = ctx.session_display();
        let key = client_key(caller(ctx), stored);
        let meta = handle
            .store
            .get(&ctx.agent_id, stored)
            .await
            .map_err(|e| store_message(&e))?;
        let running: Vec<Value> = self
            .children(ctx)
            .into_iter()
            .filter(|i| i.status == SubagentStatus::Running)
            .map(|i| info_json(&i))
            .collect();
        Ok(json!({
            "agentId": ctx.agent_id,
            "sessionKey": key,
            "session": meta.as_ref().map(|m| meta_json(key, m)),
            "subagentDepth": self.depth,
            "runningSubagents": running,
        })
        .to_string())
    }

    async fn send(&self, ctx: &ToolContext, args: &Value) -> Result<String, String> {
        let message = str_arg(args, &["message"]).ok_or("message is required")?;
        let current = client_key(caller(ctx), ctx.session_display());
        let key = match (
            str_arg(args, &["sessionKey", "session_key"]),
            str_arg(args, &["label"]),
        ) {
            (Some(key), _) => key,
            (None, Some(label)) => format!("{current}::{label}"),
            (None, None) => return Err("give sessionKey or label".into()),
        };
        if key == current {
            return Err(
                "refused: cannot send to the current session (it is waiting on this call)".into(),
            );
        }
        let timeout = uint_arg(args, &["timeoutSeconds", "timeout_seconds"])
            .unwrap_or(DEFAULT_SEND_TIMEOUT)
            .clamp(1, MAX_TIMEOUT);
        let handle = self.hub.handle(&ctx.agent_id)?;
        let stored = stored_key(ctx, &key);
        existing(&handle, &ctx.agent_id, &stored, &key).await?;
        if self.hub.session_busy(&ctx.agent_id, &stored) {
            return Err(format!(
                "refused: session \"{key}\" has a run in progress; try again later"
            ));
        }
        let agent = handle.agent(Duration::from_secs(timeout))?;
        let reply = self
            .hub
            .run_text(
                agent,
                &key,
                caller(ctx),
                message,
                StartedBy::tool(ctx, Origin::SessionsSend),
                ctx.cancel.child_token(),
            )
            .await
            .map_err(|e| format!("the run in session \"{key}\" failed: {e}"))?;
        Ok(format!("Reply from session {key}:\n{reply}"))
    }

    async fn spawn(&self, ctx: &ToolContext, args: &Value) -> Result<String, String> {
        let limits = self.hub.limits;
        if self.depth >= limits.max_depth {
            return Err(format!(
                "refused: this run is at subagent depth {} and the maximum depth is {}; do the task yourself",
                self.depth, limits.max_depth
            ));
        }
        let task = str_arg(args, &["task"]).ok_or("task is required")?;
        let mode = match str_arg(args, &["mode"]).as_deref() {
            None | Some("run") => SubagentMode::Run,
            Some("session") => SubagentMode::Session,
            Some(other) => {
                return Err(format!(
                    "mode must be \"run\" or \"session\", not \"{other}\""
                ))
            }
        };
        let agent_id = str_arg(args, &["agentId", "agent_id"]).unwrap_or(ctx.agent_id.clone());
        if agent_id != ctx.agent_id && self.hub.is_private(&agent_id) {
            tracing::warn!(
                target: "security.users",
                agent = %ctx.agent_id,
                target_agent = %agent_id,
                "a subagent on another user's agent refused"
            );
            return Err(format!("unknown agent \"{agent_id}\""));
        }
        let handle = self.hub.handle(&agent_id)?;
        if ctx.user.is_some() && !handle.settings.per_user_workspace {
            tracing::warn!(
                target: "security.users",
                agent = %ctx.agent_id,
                target_agent = %agent_id,
                "a user's subagent on an agent without per-user workspaces refused"
            );
            return Err(format!(
                "refused: agent \"{agent_id}\" does not keep a separate workspace per user, so a user's subagent cannot run there"
            ));
        }
        if let Some(model) = str_arg(args, &["model"]) {
            if model != handle.settings.model {
                return Err(format!(
                    "a model override is not supported (agent \"{agent_id}\" runs \"{}\"); configure an agent with that model and pass its agentId",
                    handle.settings.model
                ));
            }
        }
        let n = self.hub.next_id.fetch_add(1, Ordering::Relaxed);
        let label = match str_arg(args, &["label"]) {
            Some(l) => valid_label(&l)?,
            None => format!("sub-{n}"),
        };
        let timeout = uint_arg(args, &["runTimeoutSeconds", "run_timeout_seconds"])
            .map(|s| Duration::from_secs(s.clamp(1, MAX_TIMEOUT)));
        let agent = handle.subagent(&self.hub, self.depth + 1, timeout)?;
        let parent_shown = client_key(caller(ctx), ctx.session_display());
        let info = SubagentInfo {
            id: format!("sa-{n}"),
            label: label.clone(),
            agent_id,
            session_key: stored_key(ctx, &format!("{parent_shown}::{label}")),
            parent_agent: ctx.agent_id.clone(),
            parent_key: ctx.session_display().to_string(),
            mode,
            status: SubagentStatus::Running,
            result: None,
            user: caller(ctx).map(str::to_string),
        };
        match mode {
            SubagentMode::Run => {
                // The parent's abort reaches the subagent; `subagents cancel` too.
                let cancel = ctx.cancel.child_token();
                self.hub.admit(info.clone(), cancel.clone())?;
                let outcome = self
                    .hub
                    .run_text(
                        agent,
                        info.client_key(),
                        info.user.as_deref(),
                        task,
                        StartedBy::tool(ctx, Origin::SessionsSpawn),
                        cancel.clone(),
                    )
                    .await;
                self.hub.finish(&info.id, &outcome, cancel.is_cancelled());
                let text = outcome.map_err(|e| format!("subagent \"{label}\" failed: {e}"))?;
                Ok(format!("Subagent {label} ({}) finished:\n{text}", info.id))
            }
            SubagentMode::Session => {
                // Outlives the parent's run on purpose; only `subagents cancel` stops it.
                let cancel = CancellationToken::new();
                self.hub.admit(info.clone(), cancel.clone())?;
                let reply = format!(
                    "Subagent {label} started (id {}, session {}). Its result will be posted to this session when it finishes.",
                    info.id,
                    info.client_key()
                );
                self.hub.start_background(
                    agent,
                    info,
                    task,
                    StartedBy::tool(ctx, Origin::SessionsSpawn),
                    cancel,
                );
                Ok(reply)
            }
        }
    }

    async fn subagents(&self, ctx: &ToolContext, args: &Value) -> Result<String, String> {
        let action = str_arg(args, &["action"]).unwrap_or_else(|| "list".into());
        if action == "list" {
            let rows: Vec<Value> = self.children(ctx).iter().map(info_json).collect();
            return Ok(json!({"subagents": rows}).to_string());
        }
        let id = str_arg(args, &["id", "label"]).ok_or("id is required")?;
        let info = self
            .children(ctx)
            .into_iter()
            .rev()
            .find(|i| i.id == id || i.label == id)
            .ok_or_else(|| format!("no subagent \"{id}\" in this session"))?;
        match action.as_str() {
            "cancel" => {
                if info.status != SubagentStatus::Running {
                    return Err(format!("subagent \"{id}\" is not running"));
                }
                if let Some(r) = self
                    .hub
                    .lock_records()
                    .iter()
                    .find(|r| r.info.id == info.id)
                {
                    r.cancel.cancel();
                }
                Ok(format!("Subagent {} ({}) cancelled.", info.label, info.id))
            }
            "steer" => {
                let message = str_arg(args, &["message"]).ok_or("message is required")?;
                if info.mode != SubagentMode::Session {
                    return Err(
                        "only subagents spawned with mode \"session\" can be steered".into(),
                    );
                }
                if info.status == SubagentStatus::Running
                    || self.hub.session_busy(&info.agent_id, &info.session_key)
                {
                    return Err(format!(
                        "subagent \"{id}\" is still running; steer it after it finishes (its result is posted here)"
                    ));
                }
                let handle = self.hub.handle(&info.agent_id)?;
                let agent = handle.subagent(&self.hub, self.depth + 1, None)?;
                let cancel = CancellationToken::new();
                let next = SubagentInfo {
                    status: SubagentStatus::Running,
                    result: None,
                    ..info
                };
                self.hub.admit(next.clone(), cancel.clone())?;
                let reply = format!(
                    "Subagent {} ({}) is working on the follow-up; its result will be posted here.",
                    next.label, next.id
                );
                self.hub.start_background(
                    agent,
                    next,
                    message,
                    StartedBy::tool(ctx, Origin::SubagentSteer),
                    cancel,
                );
                Ok(reply)
            }
            other => Err(format!(
                "action must be list, cancel or steer, not \"{other}\""
            )),
        }
    }

    /// Subagents spawned from the current session.
    fn children(&self, ctx: &ToolContext) -> Vec<SubagentInfo> {
        let key = ctx.session_display();
        // The parent key is a stored key, already scoped to the user; the user is
        // compared as well so that no key shape can ever cross users.
        self.hub
            .lock_records()
            .iter()
            .filter(|r| {
                r.info.parent_agent == ctx.agent_id
                    && r.info.parent_key == key
                    && r.info.user.as_deref() == caller(ctx)
            })
            .map(|r| r.info.clone())
            .collect()
    }
}

/// Checks the session stored as `stored` exists; the refusal names it as `shown`, the
/// caller's own key (for another user's session it is simply not found).
async fn existing(
    handle: &AgentHandle,
    agent_id: &str,
    stored: &str,
    shown: &str,
) -> Result<(), String> {
    let key = shown;
    match handle.store.get(agent_id, stored).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(format!(
            "no session \"{key}\" for agent \"{agent_id}\"; sessions_list shows the existing ones"
        )),
        Err(e) => Err(store_message(&e)),
    }
}

/// The user a call acts for, if its agent keeps users apart.
/// Where a run a session tool submits comes from: its origin and the calling run.
struct StartedBy {
    origin: Origin,
    parent_run_id: Option<String>,
}

impl StartedBy {
    fn tool(ctx: &ToolContext, origin: Origin) -> Self {
        Self {
            origin,
            parent_run_id: Some(ctx.run_id.clone()).filter(|id| !id.is_empty()),
        }
    }
}

fn caller(ctx: &ToolContext) -> Option<&str> {
    ctx.user.as_ref().map(|u| u.id.as_str())
}

/// The stored form of a key the caller named.
fn stored_key(ctx: &ToolContext, key: &str) -> String {
    match caller(ctx) {
        Some(user) => ferroclaw_agent::user_scope::scoped_key(user, key),
        None => key.to_string(),
    }
}

/// The caller's own key for `stored`, or `None` when it belongs to someone else.
fn shown_key<'a>(ctx: &ToolContext, stored: &'a str) -> Option<&'a str> {
    match caller(ctx) {
        Some(user) => ferroclaw_agent::user_scope::unscoped(user, stored),
        None => Some(stored),
    }
}

/// `stored` as `user` knows it (for keys known to be `user`'s).
fn client_key<'a>(user: Option<&str>, stored: &'a str) -> &'a str {
    user.and_then(|u| ferroclaw_agent::user_scope::unscoped(u, stored))
        .unwrap_or(stored)
}

fn str_arg(args: &Value, names: &[&str]) -> Option<String> {
    names
        .iter()
        .filter_map(|n| args.get(*n).and_then(Value::as_str))
        .map(str::trim)
        .find(|s| !s.is_empty())
        .map(str::to_string)
}

/// Accepts numbers and numeric strings (models send both); anything else is ignored.
fn uint_arg(args: &Value, names: &[&str]) -> Option<u64> {
    names.iter().find_map(|n| match args.get(*n)? {
        Value::Number(v) => v.as_u64().or_else(|| v.as_f64().map(|f| f.max(0.0) as u64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    })
}

fn valid_label(label: &str) -> Result<String, String> {
    let ok = label.len() <= 64
        && label
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(label.to_string())
    } else {
        Err(format!(
            "label \"{label}\" must be at most 64 characters of A-Z a-z 0-9 - _ ."
        ))
    }
}

fn meta_json(key: &str, m: &SessionMeta) -> Value {
    let tokens = if m.usage.total_tokens > 0 {
        m.usage.total_tokens
    } else {
        m.usage.input + m.usage.output
    };
    json!({
        "key": key,
        "sessionId": m.session_id,
        "updatedAt": m.updated_at,
        "model": m.model,
        "tokens": tokens,
        "label": m.label,
    })
}

fn message_json(m: &Message, include_tools: bool) -> Option<Value> {
    match m {
        Message::User(_) => Some(json!({"role": "user", "text": m.text()})),
        Message::Assistant(a) => {
            let calls: Vec<Value> = a
                .tool_calls()
                .map(|(id, name, args)| json!({"id": id, "name": name, "arguments": args}))
                .collect();
            let text = a.text();
            if include_tools && !calls.is_empty() {
                Some(json!({"role": "assistant", "text": text, "toolCalls": calls}))
            } else if text.is_empty() {
                None
            } else {
                Some(json!({"role": "assistant", "text": text}))
            }
        }
        Message::ToolResult(r) if include_tools => Some(json!({
            "role": "toolResult", "toolName": r.tool_name, "text": r.text(), "isError": r.is_error})),
        Message::ToolResult(_) => None,
    }
}

fn info_json(i: &SubagentInfo) -> Value {
    let (status, error) = match &i.status {
        SubagentStatus::Running => ("running", None),
        SubagentStatus::Done => ("done", None),
        SubagentStatus::Failed(e) => ("failed", Some(e.clone())),
        SubagentStatus::Cancelled => ("cancelled", None),
    };
    json!({
        "id": i.id,
        "label": i.label,
        "agentId": i.agent_id,
        "sessionKey": i.client_key(),
        "mode": if i.mode == SubagentMode::Run { "run" } else { "session" },
        "status": status,
        "error": error,
        "result": i.result.as_deref().map(|r| r.chars().take(500).collect::<String>()),
    })
}
