//! The set of tools an agent can call, and the one place every call goes through.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use ferroclaw_types::ToolDefinition;
use serde_json::Value;
use tracing::Instrument;

use crate::path_guard::DeniedPaths;
use crate::policy::{BoundPolicy, PolicyContext, PolicyEngine};
use crate::rate_limit::RateLimiter;
use crate::{Tool, ToolContext, ToolResult};
use ferroclaw_config::settings::ToolPolicySettings;

/// Tools by name, in registration order (the order the model sees them).
///
/// Every call goes through [`ToolRegistry::execute`], which applies, in order:
/// name resolution, the tool policy (if one is attached), argument checks, the
/// per-session rate limit (if attached), the denied paths (made visible to the
/// filesystem tools of this call), cancellation, and finally credential
/// scrubbing of the result (always).
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
    /// Name or alias → index into `tools`.
    index: HashMap<String, usize>,
    guards: Guards,
    /// Tools that come and go while the process runs, after the registered ones (a
    /// registered tool of the same name wins).
    sources: Vec<Arc<dyn ToolSource>>,
}

/// Tools that come and go while the process runs (an MCP server's).
pub trait ToolSource: Send + Sync {
    fn tools(&self) -> Vec<Arc<dyn Tool>>;
}

/// Optional layers around every call; cloning a registry shares them.
#[derive(Clone, Default)]
struct Guards {
    policy: Option<Arc<BoundPolicy>>,
    /// The policy with the `tools.group_chat` level, for runs answering a group chat.
    group_policy: Option<Arc<BoundPolicy>>,
    rate_limit: Option<Arc<RateLimiter>>,
    denied: DeniedPaths,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.names())
            .finish()
    }
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Attaches a tool policy: [`Self::definitions`] and [`Self::names`] then list only
    /// the tools allowed in `ctx`, and [`Self::execute`] refuses the others even when
    /// the model names them.
    pub fn with_policy(mut self, engine: &PolicyEngine, ctx: &PolicyContext) -> Self {
        self.guards.policy = Some(Arc::new(engine.bind(ctx)));
        self
    }

    /// Attaches a per-session rate limit (keyed by `ToolContext::session_key`). Share
    /// one limiter between the registries of all agents so a session's budget is one.
    pub fn with_rate_limit(mut self, limiter: Arc<RateLimiter>) -> Self {
        self.guards.rate_limit = Some(limiter);
        self
    }

    /// Paths no filesystem tool run through this registry may reach (e.g.
    /// [`DeniedPaths::for_home`]).
    pub fn with_denied_paths(mut self, denied: DeniedPaths) -> Self {
        self.guards.denied = denied;
        self
    }

    /// Also attaches the policy runs from a group chat use: `ctx` with `level` as its
    /// group-chat level (see [`ToolContext::group_chat`]).
    pub fn with_group_chat_policy(
        mut self,
        engine: &PolicyEngine,
        ctx: &PolicyContext,
        level: ToolPolicySettings,
    ) -> Self {
        let ctx = PolicyContext {
            group_chat: Some(level),
            ..ctx.clone()
        };
        self.guards.group_policy = Some(Arc::new(engine.bind(&ctx)));
        self
    }

    /// Whether the attached policy (if any) lets the model use `tool`; in a run from a
    /// group chat, the group-chat policy when one is attached.
    fn policy_allows(&self, tool: &dyn Tool) -> Result<(), String> {
        self.policy_allows_in(tool, None)
    }

    fn policy_allows_in(&self, tool: &dyn Tool, ctx: Option<&ToolContext>) -> Result<(), String> {
        let group = ctx.is_some_and(|c| c.group_chat);
        let chosen = match (group, &self.guards.group_policy) {
            (true, Some(g)) => Some(g),
            _ => self.guards.policy.as_ref(),
        };
        let Some(policy) = chosen else {
            return Ok(());
        };
        let names: Vec<&str> = std::iter::once(tool.name())
            .chain(tool.aliases().iter().copied())
            .collect();
        let d = policy.decide_names(&names);
        if d.allowed {
            Ok(())
        } else {
            Err(d.reason)
        }
    }

    /// A registry holding [`crate::core_tools`].
    pub fn with_core_tools() -> Self {
        let mut r = Self::new();
        for tool in crate::core_tools() {
            r.register(tool);
        }
        r
    }

    /// Adds the tools of `source`, as they are at each use.
    pub fn with_source(mut self, source: Arc<dyn ToolSource>) -> Self {
        self.sources.push(source);
        self
    }

    /// Every tool now: the registered ones, then the sources' (minus name clashes).
    fn all(&self) -> Vec<Arc<dyn Tool>> {
        let mut out = self.tools.clone();
        for source in &self.sources {
            for t in source.tools() {
                if !self.index.contains_key(t.name()) && !out.iter().any(|o| o.name() == t.name()) {
                    out.push(t);
                }
            }
        }
        out
    }

    /// Adds a tool. A tool with the same name is replaced in place (keeping its position).
    /// A primary name always wins over another tool's alias.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        match self.tools.iter().position(|t| t.name() == tool.name()) {
            Some(i) => self.tools[i] = tool,
            None => self.tools.push(tool),
        }
        self.reindex();
    }

    fn reindex(&mut self) {
        self.index.clear();
        for (i, t) in self.tools.iter().enumerate() {
            for alias in t.aliases() {
                self.index.entry((*alias).to_string()).or_insert(i);
            }
        }
        for (i, t) in self.tools.iter().enumerate() {
            self.index.insert(t.name().to_string(), i);
        }
    }

    /// Looks a tool up by name or alias; surrounding whitespace (which some models emit) is ignored.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        let name = name.trim();
        match self.index.get(name) {
            Some(i) => Some(Arc::clone(&self.tools[*i])),
            None => self
                .sources
                .iter()
                .flat_map(|s| s.tools())
                .find(|t| t.name() == name),
        }
    }

    /// Primary names, in registration order (only the allowed ones when a policy is attached).
    pub fn names(&self) -> Vec<String> {
        self.all()
            .iter()
            .filter(|t| self.policy_allows(t.as_ref()).is_ok())
            .map(|t| t.name().to_string())
            .collect()
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// What the model is told about each tool, in registration order (only the
    /// allowed ones when a policy is attached).
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.all()
            .iter()
            .filter(|t| self.policy_allows(t.as_ref()).is_ok())
            .map(|t| ToolDefinition {
                name: t.name().to_string(),
                description: t.description().to_string(),
                parameters: t.parameters(),
            })
            .collect()
    }

    /// [`Self::definitions`] for one run: without the tools not offered to its agent and
    /// user (an MCP server's tools outside its grants).
    pub fn definitions_for(&self, ctx: &ToolContext) -> Vec<ToolDefinition> {
        self.all()
            .iter()
            .filter(|t| {
                self.policy_allows_in(t.as_ref(), Some(ctx)).is_ok() && t.offered_to(ctx).is_ok()
            })
            .map(|t| ToolDefinition {
                name: t.name().to_string(),
                description: t.description().to_string(),
                parameters: t.parameters(),
            })
            .collect()
    }

    /// Keeps only the tools whose primary name satisfies `keep`.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.tools.retain(|t| keep(t.name()));
        self.reindex();
    }

    /// A copy holding only the tools allowed by `allow`: each entry is a tool name, an alias,
    /// or a glob over names (`web_*`, `*`). An entry that is not a valid glob is compared literally.
    pub fn filtered(&self, allow: &[String]) -> Self {
        let matchers: Vec<NameMatcher> = allow.iter().map(|e| NameMatcher::new(e)).collect();
        let mut out = Self {
            tools: self
                .tools
                .iter()
                .filter(|t| {
                    std::iter::once(t.name())
                        .chain(t.aliases().iter().copied())
                        .any(|n| matchers.iter().any(|m| m.is_match(n)))
                })
                .cloned()
                .collect(),
            index: HashMap::new(),
            guards: self.guards.clone(),
            sources: self.sources.clone(),
        };
        out.reindex();
        out
    }

    /// Runs one tool call: resolves the name, applies the policy, checks the arguments are
    /// an object, applies the rate limit, races the tool against `ctx.cancel` and scrubs
    /// credentials from the result. Never panics on bad input; every failure is a result
    /// the model can read.
    pub async fn execute(&self, name: &str, ctx: &ToolContext, args: Value) -> ToolResult {
        let result = self.execute_unscrubbed(name, ctx, args).await;
        scrub_result(name, ctx, result)
    }

    /// [`Self::execute`] under an explicit policy, for callers that decide per call
    /// instead of attaching one with [`Self::with_policy`]. Both apply when both are set.
    pub async fn execute_with_policy(
        &self,
        name: &str,
        ctx: &ToolContext,
        args: Value,
        engine: &PolicyEngine,
        policy_ctx: &PolicyContext,
    ) -> ToolResult {
        if let Some(tool) = self.get(name) {
            let names: Vec<&str> = std::iter::once(tool.name())
                .chain(tool.aliases().iter().copied())
                .collect();
            let d = engine.bind(policy_ctx).decide_names(&names);
            if !d.allowed {
                return refused_by_policy(tool.name(), ctx, &d.reason);
            }
        }
        self.execute(name, ctx, args).await
    }

    async fn execute_unscrubbed(&self, name: &str, ctx: &ToolContext, args: Value) -> ToolResult {
        let tool = match self.get(name) {
            Some(tool) => match self.policy_allows_in(tool.as_ref(), Some(ctx)) {
                Ok(()) => Some(tool),
                Err(reason) => return refused_by_policy(tool.name(), ctx, &reason),
            },
            None => None,
        };
        let Some(tool) = tool else {
            return ToolResult::error(format!(
                "unknown tool \"{}\"; available tools: {}",
                name.trim(),
                self.names().join(", ")
            ));
        };
        if let Err(reason) = tool.offered_to(ctx) {
            return refused_by_policy(tool.name(), ctx, &reason);
        }
        let args = match normalize_args(args) {
            Ok(a) => a,
            Err(kind) => {
                return ToolResult::error(format!(
                    "arguments for tool \"{}\" must be a JSON object, got {kind}",
                    tool.name()
                ))
            }
        };
        if let Some(limiter) = &self.guards.rate_limit {
            if let Err(limited) = limiter.try_acquire(&ctx.session_key) {
                tracing::warn!(
                    target: "security.rate_limit",
                    tool = tool.name(),
                    agent = %ctx.agent_id,
                    session = %ctx.session_key,
                    limit = limited.limit,
                    retry_after_secs = limited.retry_after.as_secs(),
                    "tool call refused by the per-session rate limit"
                );
                return ToolResult::error(format!("tool \"{}\" refused: {limited}", tool.name()));
            }
        }
        let span = tracing::info_span!(
            "tool",
            otel.name = %format_args!("tool {}", tool.name()),
            tool = tool.name(),
            agent = %ctx.agent_id,
            session = %ctx.session_key,
            duration_ms = tracing::field::Empty,
            is_error = tracing::field::Empty,
        );
        let started = Instant::now();
        let result = async {
            if ctx.cancel.is_cancelled() {
                return aborted(tool.name(), ctx);
            }
            let run = self.guards.denied.clone().scope(tool.execute(ctx, args));
            tokio::select! {
                // Checked first so an already-fired abort never starts side effects.
                biased;
                _ = ctx.cancel.cancelled() => aborted(tool.name(), ctx),
                r = run => r,
            }
        }
        .instrument(span.clone())
        .await;
        let elapsed = started.elapsed();
        span.record("duration_ms", elapsed.as_millis() as u64);
        span.record("is_error", result.is_error);
        span.in_scope(|| {
            tracing::debug!(
                duration_ms = elapsed.as_millis() as u64,
                is_error = result.is_error,
                "tool call finished"
            )
        });
        result
    }
}

/// One entry of an allow list.
pub(crate) enum NameMatcher {
    Glob(globset::GlobMatcher),
    /// Entries that are not valid globs are compared literally.
    Literal(String),
}

impl NameMatcher {
    pub(crate) fn new(entry: &str) -> Self {
        let entry = entry.trim();
        match globset::Glob::new(entry) {
            Ok(g) => Self::Glob(g.compile_matcher()),
            Err(_) => Self::Literal(entry.to_string()),
        }
    }

    pub(crate) fn is_match(&self, name: &str) -> bool {
        match self {
            Self::Glob(m) => m.is_match(name),
            Self::Literal(l) => l == name,
        }
    }
}

fn refused_by_policy(tool: &str, ctx: &ToolContext, reason: &str) -> ToolResult {
    tracing::warn!(
        target: "security.policy",
        tool,
        agent = %ctx.agent_id,
        session = %ctx.session_key,
        reason,
        "tool call refused by the tool policy"
    );
    ToolResult::error(format!(
        "tool \"{tool}\" is not allowed here and was not run: {reason}"
    ))
}

/// Credentials never leave the registry: both what the model reads and what a
/// person is shown are scrubbed, errors included (they often echo input).
fn scrub_result(name: &str, ctx: &ToolContext, mut result: ToolResult) -> ToolResult {
    let mut fired = Vec::new();
    if let (std::borrow::Cow::Owned(s), rules) = crate::scrub::scrub_counted(&result.for_llm) {
        result.for_llm = s;
        fired.extend(rules);
    }
    if let Some(user) = &result.for_user {
        if let (std::borrow::Cow::Owned(s), rules) = crate::scrub::scrub_counted(user) {
            result.for_user = Some(s);
            fired.extend(rules);
        }
    }
    if !fired.is_empty() {
        fired.sort_unstable();
        fired.dedup();
        tracing::warn!(
            target: "security.scrub",
            tool = name.trim(),
            agent = %ctx.agent_id,
            session = %ctx.session_key,
            rules = ?fired,
            "credentials redacted from tool output"
        );
    }
    result
}

fn aborted(name: &str, ctx: &ToolContext) -> ToolResult {
    match ctx.progress.interrupted() {
        Some(why) => ToolResult::error(format!("tool \"{name}\" interrupted: {why}")),
        None => ToolResult::error(format!("tool \"{name}\" aborted: the run was cancelled")),
    }
}

/// `null` (no arguments) becomes `{}`, and an object encoded a second time as a JSON string
/// (a common model slip) is decoded; anything else that is not an object is refused.
fn normalize_args(args: Value) -> Result<Value, &'static str> {
    match args {
        Value::Object(_) => Ok(args),
        Value::Null => Ok(Value::Object(Default::default())),
        Value::String(s) => match serde_json::from_str::<Value>(&s) {
            Ok(v @ Value::Object(_)) => Ok(v),
            _ => Err("a string"),
        },
        Value::Array(_) => Err("an array"),
        Value::Bool(_) => Err("a boolean"),
        Value::Number(_) => Err("a number"),
    }
}
