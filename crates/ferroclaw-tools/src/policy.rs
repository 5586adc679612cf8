//! Tool policy: which tools a model is shown and may call.
//!
//! A decision is made per tool from up to five configured **levels**, most
//! general first:
//!
//! | level | where it comes from |
//! |---|---|
//! | global | `tools.{profile,allow,deny,also_allow}` |
//! | provider | `tools.by_provider.<provider>` |
//! | agent | `agents.list[].tools` (allow), `tools_deny`, `tools_also_allow` |
//! | agent + provider | `agents.list[].tools_by_provider.<provider>` |
//! | group chat | the group-chat policy the caller passes for runs from a group chat |
//!
//! **Precedence** (each step sees the result of the previous one):
//!
//! 1. **Profile** — the base set. The most specific level that names a profile
//!    wins (group chat > agent+provider > agent > provider > global);
//!    `full` (the default) means every tool.
//! 2. **Allow lists** — every level with a non-empty `allow` *intersects*: a
//!    tool must be in all of them. More levels can only narrow.
//! 3. **Also-allow** — a tool in any level's `also_allow` is added back, even if
//!    the profile or an allow list left it out.
//! 4. **Deny** — a tool in any level's `deny` is removed. Deny always wins: no
//!    profile, allow or also-allow at any level brings it back.
//! 5. **Subagents** — at depth ≥ 1 the subagent deny list applies
//!    ([`DEFAULT_SUBAGENT_DENY`]: gateway/cron control and cross-session
//!    messaging); at the leaf depth (`depth >= max_depth`) spawning tools are
//!    denied too, so a subagent at the limit cannot start another.
//!
//! Entries are tool names, aliases (`read_file` = `read`), groups
//! (`group:fs`, see [`GROUPS`]) or globs (`web_*`, `*`). An entry that is not a
//! valid glob is compared literally. Unknown groups match nothing.
//!
//! The registry enforces the same decision at call time
//! ([`crate::ToolRegistry::with_policy`]): a tool the model was not shown is
//! refused even if the model names it.

use std::collections::BTreeMap;

use ferroclaw_config::settings::{AgentToolPolicySettings, ToolPolicySettings, ToolProfile};
use ferroclaw_types::ToolDefinition;

/// Tool groups usable as `group:<name>` in any list.
pub const GROUPS: &[(&str, &[&str])] = &[
    (
        "fs",
        &["read", "write", "edit", "ls", "glob", "grep", "apply_patch"],
    ),
    // The read-only half of `fs`, the filesystem part of the `minimal` profile.
    ("fs_read", &["read", "ls", "glob", "grep"]),
    ("runtime", &["exec", "process"]),
    ("web", &["web_fetch", "web_search"]),
    ("memory", &["memory_search", "memory_get"]),
    (
        "sessions",
        &[
            "sessions_list",
            "sessions_history",
            "sessions_send",
            "sessions_spawn",
            "session_status",
            "subagents",
        ],
    ),
    ("automation", &["cron", "gateway"]),
    ("messaging", &["message"]),
    ("ui", &["browser", "canvas"]),
];

/// Other names for tools, as used in configs written for the OpenClaw family.
/// Entries on the left are resolved to the canonical name on the right.
pub const ALIASES: &[(&str, &str)] = &[
    ("read_file", "read"),
    ("write_file", "write"),
    ("edit_file", "edit"),
    ("list_files", "ls"),
    ("list_dir", "ls"),
    ("search", "grep"),
    ("bash", "exec"),
    ("shell", "exec"),
    ("patch", "apply_patch"),
];

/// Denied to every subagent (depth ≥ 1): gateway and scheduler control, and
/// messaging other sessions or channels on the parent's behalf.
pub const DEFAULT_SUBAGENT_DENY: &[&str] = &["group:automation", "sessions_send", "message"];

/// Denied at the leaf depth: starting or steering further subagents.
pub const LEAF_DENY: &[&str] = &["sessions_spawn", "subagents"];

fn profile_entries(profile: ToolProfile) -> Option<&'static [&'static str]> {
    match profile {
        ToolProfile::Full => None,
        ToolProfile::Minimal => Some(&["group:fs_read", "session_status"]),
        ToolProfile::Coding => Some(&[
            "group:fs",
            "group:runtime",
            "group:memory",
            "group:web",
            "group:sessions",
        ]),
        ToolProfile::Messaging => Some(&[
            "group:sessions",
            "group:memory",
            "group:web",
            "group:messaging",
        ]),
    }
}

/// Canonical name for `name` (resolving [`ALIASES`]); unknown names are returned trimmed.
pub fn canonical_name(name: &str) -> &str {
    let name = name.trim();
    ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, canon)| canon)
}

/// The members of `group:<name>`, if the group exists.
pub fn group_members(group: &str) -> Option<&'static [&'static str]> {
    GROUPS.iter().find(|(g, _)| *g == group).map(|(_, m)| *m)
}

/// Which of the five levels an entry came from (used in reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Global,
    Provider,
    Agent,
    AgentProvider,
    GroupChat,
    Subagent,
}

impl Level {
    fn describe(self) -> &'static str {
        match self {
            Level::Global => "the global tool policy",
            Level::Provider => "the provider's tool policy (tools.by_provider)",
            Level::Agent => "the agent's tool policy",
            Level::AgentProvider => "the agent's per-provider tool policy",
            Level::GroupChat => "the group-chat tool policy",
            Level::Subagent => "the subagent restrictions",
        }
    }
}

/// The run-specific half of a decision.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PolicyContext {
    /// Provider the run talks to (selects `tools.by_provider.<name>`).
    pub provider: Option<String>,
    pub agent_id: Option<String>,
    /// The agent's level (`AgentToolPolicySettings::agent`).
    pub agent: Option<ToolPolicySettings>,
    /// The agent's per-provider level (`AgentToolPolicySettings::agent_provider`).
    pub agent_provider: Option<ToolPolicySettings>,
    /// Set for runs coming from a group chat.
    pub group_chat: Option<ToolPolicySettings>,
    /// 0 for a top-level run, 1 for a subagent of it, …
    pub subagent_depth: u32,
    /// Deepest allowed subagent level (default 1); a run at this depth cannot spawn.
    pub max_depth: u32,
}

impl PolicyContext {
    pub fn new() -> Self {
        Self {
            max_depth: 1,
            ..Self::default()
        }
    }
}

/// Outcome for one tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// Why, naming the level and entry that decided (shown in refusals and logs).
    pub reason: String,
}

/// Global and per-provider policy, built once from the settings.
#[derive(Debug, Clone, Default)]
pub struct PolicyEngine {
    global: ToolPolicySettings,
    by_provider: BTreeMap<String, ToolPolicySettings>,
    subagent_deny: Vec<String>,
}

impl PolicyEngine {
    /// An engine with only a global level.
    pub fn new(global: &ToolPolicySettings) -> Self {
        Self {
            global: global.clone(),
            by_provider: BTreeMap::new(),
            subagent_deny: DEFAULT_SUBAGENT_DENY
                .iter()
                .map(|s| s.to_string())
                .collect(),
        }
    }

    /// The policy of one agent's top-level runs: the engine with its levels, and the
    /// context that selects them (subagents re-bind it at their depth).
    pub fn for_agent(
        agent_id: &str,
        levels: &AgentToolPolicySettings,
        max_depth: u32,
    ) -> (Self, PolicyContext) {
        let mut engine = Self::new(&levels.global);
        if let Some(p) = &levels.provider {
            engine = engine.with_provider(levels.provider_name.clone(), p.clone());
        }
        let ctx = PolicyContext {
            provider: Some(levels.provider_name.clone()),
            agent_id: Some(agent_id.to_string()),
            agent: Some(levels.agent.clone()),
            agent_provider: levels.agent_provider.clone(),
            // A run from a group chat sets `tools.group_chat` on its own context.
            group_chat: None,
            subagent_depth: 0,
            max_depth,
        };
        (engine, ctx)
    }

    /// Adds (or replaces) the level for one provider.
    pub fn with_provider(
        mut self,
        provider: impl Into<String>,
        policy: ToolPolicySettings,
    ) -> Self {
        self.by_provider.insert(provider.into(), policy);
        self
    }

    /// Replaces [`DEFAULT_SUBAGENT_DENY`].
    pub fn with_subagent_deny(mut self, deny: Vec<String>) -> Self {
        self.subagent_deny = deny;
        self
    }

    /// Compiles the levels that apply to `ctx`, for many decisions in a row.
    pub fn bind(&self, ctx: &PolicyContext) -> BoundPolicy {
        let mut levels = vec![CompiledLevel::new(Level::Global, &self.global)];
        if let Some(p) = ctx
            .provider
            .as_deref()
            .and_then(|p| self.by_provider.get(p))
        {
            levels.push(CompiledLevel::new(Level::Provider, p));
        }
        for (level, cfg) in [
            (Level::Agent, &ctx.agent),
            (Level::AgentProvider, &ctx.agent_provider),
            (Level::GroupChat, &ctx.group_chat),
        ] {
            if let Some(cfg) = cfg {
                levels.push(CompiledLevel::new(level, cfg));
            }
        }
        let mut subagent_deny = Vec::new();
        if ctx.subagent_depth > 0 {
            subagent_deny.extend(self.subagent_deny.iter().map(|e| (Entry::new(e), false)));
        }
        if ctx.subagent_depth > 0 && ctx.subagent_depth >= ctx.max_depth {
            subagent_deny.extend(LEAF_DENY.iter().map(|e| (Entry::new(e), true)));
        }
        BoundPolicy {
            levels,
            subagent_deny,
            depth: ctx.subagent_depth,
            max_depth: ctx.max_depth,
        }
    }

    /// Whether `tool` (a name or alias) may be shown and called in `ctx`.
    pub fn decide(&self, tool: &str, ctx: &PolicyContext) -> Decision {
        self.bind(ctx).decide(tool)
    }

    /// The definitions from `all` the model may see in `ctx`, in order.
    pub fn visible_tools(
        &self,
        all: &[ToolDefinition],
        ctx: &PolicyContext,
    ) -> Vec<ToolDefinition> {
        self.bind(ctx).visible_tools(all)
    }
}

/// A [`PolicyEngine`] with a [`PolicyContext`] applied and its lists compiled.
#[derive(Debug, Clone)]
pub struct BoundPolicy {
    levels: Vec<CompiledLevel>,
    /// (entry, is the leaf-depth rule)
    subagent_deny: Vec<(Entry, bool)>,
    depth: u32,
    max_depth: u32,
}

impl BoundPolicy {
    /// Decision for `tool`, a canonical name, a known alias or a tool's own name.
    pub fn decide(&self, tool: &str) -> Decision {
        let canon = canonical_name(tool);
        let mut names = vec![canon];
        names.extend(
            ALIASES
                .iter()
                .filter(|(_, c)| *c == canon)
                .map(|(alias, _)| *alias),
        );
        self.decide_names(&names)
    }

    /// Decision for a tool known under several names (primary first, then its aliases).
    pub fn decide_names(&self, names: &[&str]) -> Decision {
        let primary = names.first().copied().unwrap_or_default();
        let refuse = |reason: String| Decision {
            allowed: false,
            reason,
        };

        // 4. Deny wins over everything, so it is checked first.
        for level in &self.levels {
            if let Some(entry) = level.deny.iter().find(|e| e.matches(names)) {
                return refuse(format!(
                    "tool \"{primary}\" is denied by {} (deny entry \"{}\")",
                    level.level.describe(),
                    entry.raw
                ));
            }
        }
        // 5. Subagent restrictions.
        if let Some((entry, leaf)) = self.subagent_deny.iter().find(|(e, _)| e.matches(names)) {
            return refuse(if *leaf {
                format!(
                    "tool \"{primary}\" is denied at subagent depth {} (the maximum is {}): a subagent at the leaf depth cannot start further subagents",
                    self.depth, self.max_depth
                )
            } else {
                format!(
                    "tool \"{primary}\" is not available to subagents (subagent deny entry \"{}\")",
                    entry.raw
                )
            });
        }
        // 3. Also-allow adds back what the profile / allow lists left out.
        for level in &self.levels {
            if let Some(entry) = level.also_allow.iter().find(|e| e.matches(names)) {
                return Decision {
                    allowed: true,
                    reason: format!(
                        "tool \"{primary}\" is allowed by {} (also_allow entry \"{}\")",
                        level.level.describe(),
                        entry.raw
                    ),
                };
            }
        }
        // 1. Profile: the most specific level naming one.
        let (profile_level, profile) = self
            .levels
            .iter()
            .rev()
            .find_map(|l| l.profile.map(|p| (l.level, p)))
            .unwrap_or((Level::Global, ToolProfile::Full));
        if let Some(entries) = profile_entries(profile) {
            if !entries.iter().any(|e| Entry::new(e).matches(names)) {
                return refuse(format!(
                    "tool \"{primary}\" is not part of the \"{}\" tool profile (set by {})",
                    profile.as_str(),
                    profile_level.describe()
                ));
            }
        }
        // 2. Every non-empty allow list must contain the tool.
        for level in &self.levels {
            if !level.allow.is_empty() && !level.allow.iter().any(|e| e.matches(names)) {
                return refuse(format!(
                    "tool \"{primary}\" is not in the allow list of {}",
                    level.level.describe()
                ));
            }
        }
        Decision {
            allowed: true,
            reason: format!(
                "tool \"{primary}\" is allowed by the \"{}\" profile and every allow list",
                profile.as_str()
            ),
        }
    }

    /// The definitions from `all` that are allowed, in order.
    pub fn visible_tools(&self, all: &[ToolDefinition]) -> Vec<ToolDefinition> {
        all.iter()
            .filter(|d| self.decide(&d.name).allowed)
            .cloned()
            .collect()
    }
}

#[derive(Debug, Clone)]
struct CompiledLevel {
    level: Level,
    profile: Option<ToolProfile>,
    allow: Vec<Entry>,
    deny: Vec<Entry>,
    also_allow: Vec<Entry>,
}

impl CompiledLevel {
    fn new(level: Level, cfg: &ToolPolicySettings) -> Self {
        let compile = |list: &[String]| list.iter().map(|e| Entry::new(e)).collect();
        Self {
            level,
            profile: cfg.profile,
            allow: compile(&cfg.allow),
            deny: compile(&cfg.deny),
            also_allow: compile(&cfg.also_allow),
        }
    }
}

/// One list entry, compiled.
#[derive(Debug, Clone)]
struct Entry {
    raw: String,
    kind: EntryKind,
}

#[derive(Debug, Clone)]
enum EntryKind {
    /// `group:<name>`; `None` for an unknown group (matches nothing).
    Group(Option<&'static [&'static str]>),
    /// `group:mcp` (every MCP tool, `mcp_…`) and `group:mcp:<server>` (`mcp_<server>_…`).
    Prefix(String),
    Glob(globset::GlobMatcher),
    Literal(String),
}

impl Entry {
    fn new(raw: &str) -> Self {
        let trimmed = raw.trim();
        let kind = if trimmed == "group:mcp" {
            EntryKind::Prefix("mcp_".into())
        } else if let Some(server) = trimmed.strip_prefix("group:mcp:") {
            EntryKind::Prefix(format!("mcp_{server}_"))
        } else if let Some(group) = trimmed.strip_prefix("group:") {
            let members = group_members(group);
            if members.is_none() {
                tracing::warn!(
                    target: "security.policy",
                    entry = trimmed,
                    "unknown tool group in tool policy; it matches no tool"
                );
            }
            EntryKind::Group(members)
        } else {
            let canon = canonical_name(trimmed);
            match globset::Glob::new(canon) {
                Ok(g) => EntryKind::Glob(g.compile_matcher()),
                Err(_) => EntryKind::Literal(canon.to_string()),
            }
        };
        Self {
            raw: trimmed.to_string(),
            kind,
        }
    }

    /// True if the entry names any of `names` (a tool's primary name and aliases).
    fn matches(&self, names: &[&str]) -> bool {
        match &self.kind {
            EntryKind::Group(None) => false,
            EntryKind::Group(Some(members)) => {
                names.iter().any(|n| members.contains(&canonical_name(n)))
            }
            EntryKind::Prefix(p) => names.iter().any(|n| n.starts_with(p.as_str())),
            EntryKind::Glob(m) => names.iter().any(|n| m.is_match(n)),
            EntryKind::Literal(l) => names.iter().any(|n| n == l),
        }
    }
}
