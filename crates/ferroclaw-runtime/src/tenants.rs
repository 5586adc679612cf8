//! Users' agents: agents kept in the store's [`Directory`] beside the configured ones,
//! with owners, shares, context files of their own and each user's, and provider
//! records whose API keys are sealed at rest. Every surface reaches them through the
//! methods here, so the access rule is applied once:
//!
//! - a configured agent: everyone with a credential (as before);
//! - a database agent: the administrator (the gateway token acting for nobody), its
//!   owner, the users it is shared with (`user` runs it, `editor` also changes it), and
//!   everyone when it is a default agent. Anyone else is told it does not exist.
//!
//! Built agents are cached (bounded); a change made here, or by another instance on the
//! same storage ([`ferroclaw_store::Signal::DirectoryChanged`]), marks them stale so the
//! next request rebuilds them from the stored record.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ferroclaw_agent::prompt::{ContextSource, CONTEXT_FILES};
use ferroclaw_config::settings::{self as cfg, ModelChoice, ProviderKind, ProviderSettings};
use ferroclaw_store::{
    AgentKind, AgentRecord, Directory, FileScope, ProviderRecord, SecretKey, Share, ShareRole,
    Signal, StoreError, StoredFile,
};
use serde::Deserialize;
use serde_json::Value;

use crate::runtime::{AgentEntry, Runtime};

/// Built users' agents kept at most (each holds its provider client and tool registry).
const CACHE_CAPACITY: usize = 256;
/// A stored context file is at most this long.
const MAX_FILE_BYTES: usize = 64 * 1024;

/// Who asks: the user a credential stands for, and whether it is the administrator.
#[derive(Debug, Clone, Copy)]
pub struct Requester<'a> {
    pub user: Option<&'a str>,
    /// The gateway token acting for nobody: sees and may change every agent.
    pub admin: bool,
}

/// What a requester may do with an agent, in increasing order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    /// Run it, with sessions and files of their own.
    Use,
    /// Also change its settings and its agent-level files.
    Edit,
    /// Also share and delete it.
    Own,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Use => "use",
            Access::Edit => "edit",
            Access::Own => "own",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TenantError {
    /// Also the answer when the agent exists but is not the requester's to see.
    #[error("unknown agent `{0}`")]
    UnknownAgent(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Conflict(String),
    /// Something other than an agent that is not there (an MCP server).
    #[error("{0}")]
    NotFound(String),
    #[error("this gateway keeps no agents in a database")]
    Unsupported,
    #[error("storage: {0}")]
    Store(StoreError),
}

impl From<StoreError> for TenantError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict(m) => TenantError::Conflict(m),
            other => TenantError::Store(other),
        }
    }
}

/// An agent as a requester may see it.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentView {
    pub id: String,
    pub name: String,
    pub provider: String,
    pub model: String,
    /// `config` or `database`.
    pub source: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<AgentKind>,
    pub is_default: bool,
    pub access: &'static str,
    /// The stored settings, to those who may change them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings: Option<Value>,
}

/// A new database agent.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AgentSpec {
    #[serde(alias = "key")]
    pub id: String,
    #[serde(default)]
    pub kind: Option<AgentKind>,
    #[serde(default, alias = "is_default")]
    pub is_default: Option<bool>,
    #[serde(default)]
    pub settings: Option<Value>,
}

/// A change to a database agent: what is absent stays.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AgentPatch {
    #[serde(default)]
    pub kind: Option<AgentKind>,
    #[serde(default, alias = "is_default")]
    pub is_default: Option<bool>,
    #[serde(default)]
    pub settings: Option<Value>,
}

/// What a database agent's settings may change from the template (the default agent).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Overrides {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    /// A provider record of the agent's owner.
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    temperature: Option<f32>,
    #[serde(default, alias = "max_tokens")]
    max_tokens: Option<u32>,
}

fn overrides(settings: &Value) -> Result<Overrides, TenantError> {
    if settings.is_null() {
        return Ok(Overrides::default());
    }
    let o: Overrides = serde_json::from_value(settings.clone())
        .map_err(|e| TenantError::Invalid(format!("settings: {e}")))?;
    if o.name.as_ref().is_some_and(|n| n.chars().count() > 100) {
        return Err(TenantError::Invalid(
            "settings.name: at most 100 characters".into(),
        ));
    }
    if o.description
        .as_ref()
        .is_some_and(|d| d.chars().count() > 2000)
    {
        return Err(TenantError::Invalid(
            "settings.description: at most 2,000 characters".into(),
        ));
    }
    if o.temperature.is_some_and(|t| !(0.0..=2.0).contains(&t)) {
        return Err(TenantError::Invalid(
            "settings.temperature: between 0 and 2".into(),
        ));
    }
    if o.provider.is_some() && o.model.as_deref().is_none_or(|m| m.trim().is_empty()) {
        return Err(TenantError::Invalid(
            "settings.model is required with settings.provider".into(),
        ));
    }
    Ok(o)
}

/// A provider record as given by its owner.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProviderSpec {
    pub name: String,
    /// `openai_compat` (default) or `anthropic`.
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(alias = "base_url")]
    pub base_url: String,
    #[serde(default, alias = "api_key")]
    pub api_key: Option<String>,
}

/// A provider record as any answer shows it: the key masked.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderView {
    pub name: String,
    pub owner: String,
    pub kind: String,
    pub base_url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
}

/// Whose files: the agent's own, or the requester's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileTarget {
    Agent,
    Mine,
}

#[derive(Clone)]
struct Cached {
    entry: AgentEntry,
    record: AgentRecord,
    shares: Vec<Share>,
    stale: bool,
}

/// The users' agents of one runtime.
pub(crate) struct Tenants {
    directory: Arc<dyn Directory>,
    key: Option<SecretKey>,
    /// The default agent's settings: what a database agent does not set.
    template: cfg::AgentSettings,
    /// Ids a database agent may not take.
    configured: Vec<String>,
    cache: Mutex<lru::LruCache<String, Cached>>,
}

impl Tenants {
    pub(crate) fn new(
        directory: Arc<dyn Directory>,
        key: Option<SecretKey>,
        template: cfg::AgentSettings,
        configured: Vec<String>,
    ) -> Tenants {
        Tenants {
            directory,
            key,
            template,
            configured,
            cache: Mutex::new(lru::LruCache::new(
                NonZeroUsize::new(CACHE_CAPACITY).unwrap_or(NonZeroUsize::MIN),
            )),
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, lru::LruCache<String, Cached>> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A built agent, as last resolved (stale or not): a run already authorised is not
    /// refused because its agent changed since.
    pub(crate) fn peek(&self, id: &str) -> Option<AgentEntry> {
        self.cache().peek(id).map(|c| c.entry.clone())
    }

    /// Marks one agent (or, for `None`, every agent) to be reloaded on next use.
    pub(crate) fn invalidate(&self, id: Option<&str>) {
        let mut cache = self.cache();
        match id {
            Some(id) => {
                if let Some(c) = cache.peek_mut(id) {
                    c.stale = true;
                }
            }
            None => {
                for (_, c) in cache.iter_mut() {
                    c.stale = true;
                }
            }
        }
    }
}

fn access(record: &AgentRecord, shares: &[Share], who: Requester<'_>) -> Option<Access> {
    if who.admin || who.user == Some(record.owner.as_str()) {
        return Some(Access::Own);
    }
    let shared = who.user.and_then(|u| shares.iter().find(|s| s.user == u));
    match shared.map(|s| s.role) {
        Some(ShareRole::Editor) => Some(Access::Edit),
        Some(ShareRole::User) => Some(Access::Use),
        None if record.is_default => Some(Access::Use),
        None => None,
    }
}

/// A user's agent's context files: the agent's own, then the run's user's (all of them
/// on an open agent, `USER.md` only on a predefined one).
struct StoredContext {
    directory: Arc<dyn Directory>,
    agent: String,
    kind: AgentKind,
}

#[async_trait]
impl ContextSource for StoredContext {
    async fn files(&self, user: Option<&str>) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let ordered = |mut files: Vec<StoredFile>| {
            files.sort_by_key(|f| CONTEXT_FILES.iter().position(|n| *n == f.name));
            files
        };
        match self.directory.files(&self.agent, FileScope::Agent).await {
            Ok(files) => out.extend(ordered(files).into_iter().map(|f| (f.name, f.content))),
            Err(e) => tracing::warn!(agent = %self.agent, error = %e, "agent files unavailable"),
        }
        if let Some(u) = user {
            match self.directory.files(&self.agent, FileScope::User(u)).await {
                Ok(files) => out.extend(
                    ordered(files)
                        .into_iter()
                        .filter(|f| self.kind == AgentKind::Open || f.name == "USER.md")
                        .map(|f| (format!("{} (user)", f.name), f.content)),
                ),
                Err(e) => tracing::warn!(agent = %self.agent, error = %e, "user files unavailable"),
            }
        }
        out
    }
}

impl Runtime {
    fn tenants(&self) -> Result<&Tenants, TenantError> {
        self.tenants.as_deref().ok_or(TenantError::Unsupported)
    }

    fn configured_entry(&self, id: &str) -> Option<&AgentEntry> {
        self.agents.iter().find(|a| a.id == id)
    }

    /// The agent `id` if `who` may run it: a configured agent, or a database agent the
    /// requester may use (anything else is an unknown agent).
    pub async fn agent_for(&self, who: Requester<'_>, id: &str) -> Result<AgentEntry, TenantError> {
        if let Some(a) = self.configured_entry(id) {
            return Ok(a.clone());
        }
        let cached = self.resolve(who, id).await?;
        Ok(cached.entry)
    }

    /// Loads (or takes from the cache) a database agent and checks `who` may use it.
    async fn resolve(&self, who: Requester<'_>, id: &str) -> Result<Cached, TenantError> {
        let t = self
            .tenants()
            .map_err(|_| TenantError::UnknownAgent(id.to_string()))?;
        let fresh = t.cache().get(id).filter(|c| !c.stale).cloned();
        let cached = match fresh {
            Some(c) => c,
            None => {
                let Some(record) = t.directory.agent(id).await? else {
                    if t.cache().pop(id).is_some() {
                        self.unbind(id);
                    }
                    return Err(TenantError::UnknownAgent(id.to_string()));
                };
                let shares = t.directory.shares(id).await?;
                let entry = self.build_stored(t, &record).await?;
                let c = Cached {
                    entry,
                    record,
                    shares,
                    stale: false,
                };
                if let Some((old, _)) = t.cache().push(id.to_string(), c.clone()) {
                    if old != id {
                        self.unbind(&old);
                    }
                }
                c
            }
        };
        match access(&cached.record, &cached.shares, who) {
            Some(_) => Ok(cached),
            None => Err(TenantError::UnknownAgent(id.to_string())),
        }
    }

    fn unbind(&self, id: &str) {
        if let Some(s) = &self.services {
            s.sessions.unbind(id);
        }
    }

    /// Builds a database agent from its record: the template's settings with the
    /// record's changes, its own workspace, per-user sessions, files from the directory.
    async fn build_stored(
        &self,
        t: &Tenants,
        record: &AgentRecord,
    ) -> Result<AgentEntry, TenantError> {
        let o = overrides(&record.settings)?;
        let mut a = t.template.clone();
        a.id = record.key.clone();
        a.name = o.name.clone().unwrap_or_else(|| record.key.clone());
        a.workspace = a.home.join("tenants").join(&record.key);
        // A user's agent is always used by users: sessions and workspaces per user.
        a.per_user_workspace = true;
        if let Some(temp) = o.temperature {
            a.temperature = Some(temp);
        }
        if let Some(max) = o.max_tokens {
            a.max_tokens = Some(max);
        }
        match (&o.provider, &o.model) {
            (Some(name), Some(model)) => {
                let p = self.provider_for(t, &record.owner, name).await?;
                a.providers.primary = ModelChoice {
                    provider: p,
                    model: model.clone(),
                };
                a.providers.fallbacks.clear();
            }
            (None, Some(model)) => a.providers.primary.model = model.clone(),
            _ => {}
        }
        let services = self.services.as_ref().ok_or(TenantError::Unsupported)?;
        let agent = crate::bootstrap::build_agent_with(&a, self.core.store.clone(), services)
            .map_err(|e| TenantError::Invalid(format!("agent `{}`: {e}", record.key)))?
            .with_context_source(Arc::new(StoredContext {
                directory: t.directory.clone(),
                agent: record.key.clone(),
                kind: record.kind,
            }));
        services.sessions.bind_private(&record.key);
        Ok(AgentEntry {
            id: record.key.clone(),
            agent: Arc::new(agent),
        })
    }

    /// The provider record `name` of `owner`, its key opened.
    async fn provider_for(
        &self,
        t: &Tenants,
        owner: &str,
        name: &str,
    ) -> Result<ProviderSettings, TenantError> {
        let unknown =
            || TenantError::Invalid(format!("settings.provider: unknown provider `{name}`"));
        let rec = t.directory.provider(name).await?.ok_or_else(unknown)?;
        if rec.owner != owner {
            return Err(unknown());
        }
        let api_key = match &rec.api_key {
            None => None,
            Some(sealed) => {
                let key = t.key.as_ref().ok_or_else(|| {
                    TenantError::Invalid(format!(
                        "provider `{name}`: its API key is sealed and FERROCLAW_ENCRYPTION_KEY is not set"
                    ))
                })?;
                Some(
                    key.open(sealed)
                        .map_err(|e| TenantError::Invalid(format!("provider `{name}`: {e}")))?,
                )
            }
        };
        let base = &t.template.providers.primary.provider;
        Ok(ProviderSettings {
            name: rec.name.clone(),
            kind: provider_kind(&rec.kind)?,
            base_url: rec.base_url.trim_end_matches('/').to_string(),
            api_key,
            headers: Vec::new(),
            request_timeout: base.request_timeout,
            idle_timeout: base.idle_timeout,
            schema_flavor: cfg::SchemaFlavor::OpenAi,
            default_max_tokens: base.default_max_tokens,
        })
    }

    fn view_configured(&self, a: &AgentEntry) -> AgentView {
        let s = a.agent.settings();
        AgentView {
            id: a.id.clone(),
            name: s.name.clone(),
            provider: s.provider.clone(),
            model: s.model.clone(),
            source: "config",
            owner: None,
            kind: None,
            is_default: a.id == self.default_agent,
            access: Access::Use.as_str(),
            settings: None,
        }
    }

    fn view_stored(&self, record: &AgentRecord, access: Access) -> AgentView {
        let o = overrides(&record.settings).unwrap_or_default();
        let template = self.tenants.as_ref().map(|t| &t.template);
        AgentView {
            id: record.key.clone(),
            name: o.name.unwrap_or_else(|| record.key.clone()),
            provider: o
                .provider
                .or_else(|| template.map(|t| t.providers.primary.provider.name.clone()))
                .unwrap_or_default(),
            model: o
                .model
                .or_else(|| template.map(|t| t.providers.primary.model.clone()))
                .unwrap_or_default(),
            source: "database",
            owner: Some(record.owner.clone()),
            kind: Some(record.kind),
            is_default: record.is_default,
            access: access.as_str(),
            settings: (access >= Access::Edit).then(|| record.settings.clone()),
        }
    }

    /// Every agent `who` may see: the configured ones, then the database ones.
    pub async fn visible_agents(&self, who: Requester<'_>) -> Result<Vec<AgentView>, TenantError> {
        let mut out: Vec<AgentView> = self
            .agents
            .iter()
            .map(|a| self.view_configured(a))
            .collect();
        let Ok(t) = self.tenants() else {
            return Ok(out);
        };
        let filter = if who.admin {
            None
        } else {
            Some(who.user.unwrap_or(""))
        };
        // One query for the caller's shares, not one per agent listed.
        let mine = match filter {
            Some(user) => t.directory.shares_of(user).await?,
            None => Vec::new(),
        };
        for record in t.directory.agents_for(filter).await? {
            let shares: Vec<Share> = mine
                .iter()
                .filter(|(agent, _)| *agent == record.key)
                .map(|(_, s)| s.clone())
                .collect();
            if let Some(a) = access(&record, &shares, who) {
                out.push(self.view_stored(&record, a));
            }
        }
        Ok(out)
    }

    /// One agent as `who` sees it.
    pub async fn agent_view(&self, who: Requester<'_>, id: &str) -> Result<AgentView, TenantError> {
        if let Some(a) = self.configured_entry(id) {
            return Ok(self.view_configured(a));
        }
        let c = self.resolve(who, id).await?;
        let a = access(&c.record, &c.shares, who)
            .ok_or_else(|| TenantError::UnknownAgent(id.into()))?;
        Ok(self.view_stored(&c.record, a))
    }

    /// The database agent `id` with at least `need` for `who`, from the directory itself
    /// (not the cache): changes are decided on what is stored now.
    async fn stored_with(
        &self,
        who: Requester<'_>,
        id: &str,
        need: Access,
    ) -> Result<(AgentRecord, Access), TenantError> {
        let t = self.tenants()?;
        if self.configured_entry(id).is_some() {
            return Err(TenantError::Forbidden(format!(
                "agent `{id}` comes from the configuration file; change it there"
            )));
        }
        let record = t
            .directory
            .agent(id)
            .await?
            .ok_or_else(|| TenantError::UnknownAgent(id.to_string()))?;
        let shares = t.directory.shares(id).await?;
        let have = access(&record, &shares, who)
            .ok_or_else(|| TenantError::UnknownAgent(id.to_string()))?;
        if have < need {
            tracing::warn!(target: "security.users", event = "security.agent_forbidden", agent = %id, user = ?who.user, have = have.as_str(), need = need.as_str(), "change to an agent refused");
            return Err(TenantError::Forbidden(format!(
                "agent `{id}`: this needs {} access; you have {}",
                need.as_str(),
                have.as_str()
            )));
        }
        Ok((record, have))
    }

    /// Marks the agent stale here and at every other instance.
    fn changed(&self, id: Option<&str>) {
        if let Some(t) = &self.tenants {
            t.invalidate(id);
        }
        crate::relay::publish(
            self.signals.as_ref(),
            Signal::DirectoryChanged {
                agent: id.map(str::to_string),
            },
        );
    }

    /// Applies another instance's change.
    pub(crate) fn apply_directory_change(tenants: &Tenants, agent: Option<&str>) {
        tenants.invalidate(agent);
    }

    fn owner_of(who: Requester<'_>) -> Result<String, TenantError> {
        match (who.user, who.admin) {
            (Some(u), _) => Ok(u.to_string()),
            (None, true) => Ok("admin".to_string()),
            (None, false) => Err(TenantError::Forbidden(
                "only a user (or the administrator) can own agents and providers".into(),
            )),
        }
    }

    pub async fn create_agent(
        &self,
        who: Requester<'_>,
        spec: AgentSpec,
    ) -> Result<AgentView, TenantError> {
        let t = self.tenants()?;
        let owner = Self::owner_of(who)?;
        let id = spec.id.trim();
        ferroclaw_store::validate_agent_id(id).map_err(|e| TenantError::Invalid(e.to_string()))?;
        if t.configured.iter().any(|c| c == id) {
            return Err(TenantError::Conflict(format!(
                "agent id `{id}` is a configured agent's"
            )));
        }
        let is_default = spec.is_default.unwrap_or(false);
        if is_default && !who.admin {
            return Err(TenantError::Forbidden(
                "only the administrator makes an agent everyone's default".into(),
            ));
        }
        let record = AgentRecord {
            key: id.to_string(),
            owner,
            kind: spec.kind.unwrap_or(AgentKind::Open),
            is_default,
            settings: spec.settings.unwrap_or(Value::Object(Default::default())),
            created_at: ferroclaw_types::now_millis(),
            updated_at: 0,
        };
        self.check_buildable(t, &record).await?;
        t.directory.create_agent(&record).await?;
        tracing::info!(agent = %record.key, owner = %record.owner, "agent created");
        self.changed(Some(&record.key));
        Ok(self.view_stored(&record, Access::Own))
    }

    /// Refuses settings the agent could not be built from (unknown keys, another's
    /// provider, a key that cannot be opened) before they are stored.
    async fn check_buildable(&self, t: &Tenants, record: &AgentRecord) -> Result<(), TenantError> {
        let o = overrides(&record.settings)?;
        if let Some(p) = &o.provider {
            self.provider_for(t, &record.owner, p).await?;
        }
        Ok(())
    }

    pub async fn update_agent(
        &self,
        who: Requester<'_>,
        id: &str,
        patch: AgentPatch,
    ) -> Result<AgentView, TenantError> {
        let t = self.tenants()?;
        let (mut record, have) = self.stored_with(who, id, Access::Edit).await?;
        if patch.kind.is_some_and(|k| k != record.kind) && have < Access::Own {
            return Err(TenantError::Forbidden(format!(
                "agent `{id}`: only its owner changes its kind"
            )));
        }
        if patch.is_default.is_some_and(|d| d != record.is_default) && !who.admin {
            return Err(TenantError::Forbidden(
                "only the administrator makes an agent everyone's default".into(),
            ));
        }
        record.kind = patch.kind.unwrap_or(record.kind);
        record.is_default = patch.is_default.unwrap_or(record.is_default);
        if let Some(s) = patch.settings {
            record.settings = s;
        }
        self.check_buildable(t, &record).await?;
        if !t.directory.update_agent(&record).await? {
            return Err(TenantError::UnknownAgent(id.to_string()));
        }
        self.changed(Some(id));
        Ok(self.view_stored(&record, have))
    }

    pub async fn delete_agent(&self, who: Requester<'_>, id: &str) -> Result<(), TenantError> {
        let t = self.tenants()?;
        self.stored_with(who, id, Access::Own).await?;
        t.directory.delete_agent(id).await?;
        tracing::info!(agent = %id, "agent deleted");
        self.changed(Some(id));
        Ok(())
    }

    pub async fn agent_shares(
        &self,
        who: Requester<'_>,
        id: &str,
    ) -> Result<Vec<Share>, TenantError> {
        let t = self.tenants()?;
        self.stored_with(who, id, Access::Edit).await?;
        Ok(t.directory.shares(id).await?)
    }

    /// Grants (`Some`) or revokes (`None`) `user`'s share of agent `id`.
    pub async fn set_agent_share(
        &self,
        who: Requester<'_>,
        id: &str,
        user: &str,
        role: Option<ShareRole>,
    ) -> Result<bool, TenantError> {
        let t = self.tenants()?;
        let (record, _) = self.stored_with(who, id, Access::Own).await?;
        let user = user.trim();
        if user.is_empty() || user.len() > 255 || user.chars().any(char::is_control) {
            return Err(TenantError::Invalid(
                "user ids are 1-255 characters, without control characters".into(),
            ));
        }
        if user == record.owner {
            return Err(TenantError::Invalid(
                "an agent is not shared with its owner".into(),
            ));
        }
        let changed = t.directory.set_share(id, user, role).await?;
        self.changed(Some(id));
        Ok(changed)
    }

    fn file_scope<'a>(
        who: Requester<'a>,
        target: FileTarget,
    ) -> Result<FileScope<'a>, TenantError> {
        match target {
            FileTarget::Agent => Ok(FileScope::Agent),
            FileTarget::Mine => who.user.map(FileScope::User).ok_or_else(|| {
                TenantError::Invalid(
                    "user files need a user: this credential acts for nobody".into(),
                )
            }),
        }
    }

    pub async fn agent_files(
        &self,
        who: Requester<'_>,
        id: &str,
        target: FileTarget,
    ) -> Result<Vec<StoredFile>, TenantError> {
        let t = self.tenants()?;
        let need = match target {
            FileTarget::Agent => Access::Edit,
            FileTarget::Mine => Access::Use,
        };
        self.stored_with(who, id, need).await?;
        Ok(t.directory
            .files(id, Self::file_scope(who, target)?)
            .await?)
    }

    /// Writes (`Some`) or removes (`None`) a context file.
    pub async fn set_agent_file(
        &self,
        who: Requester<'_>,
        id: &str,
        target: FileTarget,
        name: &str,
        content: Option<&str>,
    ) -> Result<bool, TenantError> {
        let t = self.tenants()?;
        if !CONTEXT_FILES.contains(&name) {
            return Err(TenantError::Invalid(format!(
                "`{name}` is not a context file; one of {}",
                CONTEXT_FILES.join(", ")
            )));
        }
        if content.is_some_and(|c| c.len() > MAX_FILE_BYTES) {
            return Err(TenantError::Invalid(format!(
                "a context file is at most {MAX_FILE_BYTES} bytes"
            )));
        }
        let need = match target {
            FileTarget::Agent => Access::Edit,
            FileTarget::Mine => Access::Use,
        };
        let (record, _) = self.stored_with(who, id, need).await?;
        if target == FileTarget::Mine && record.kind == AgentKind::Predefined && name != "USER.md" {
            return Err(TenantError::Forbidden(format!(
                "agent `{id}` is predefined: its users keep only USER.md of their own"
            )));
        }
        Ok(t.directory
            .set_file(id, Self::file_scope(who, target)?, name, content)
            .await?)
    }

    pub async fn put_provider(
        &self,
        who: Requester<'_>,
        spec: ProviderSpec,
    ) -> Result<ProviderView, TenantError> {
        let t = self.tenants()?;
        let owner = Self::owner_of(who)?;
        let name = spec.name.trim();
        ferroclaw_store::validate_agent_id(name).map_err(|_| {
            TenantError::Invalid("provider names are 1-64 characters of A-Z a-z 0-9 _ -".into())
        })?;
        let kind = spec.kind.as_deref().unwrap_or("openai_compat");
        provider_kind(kind)?;
        let url = spec.base_url.trim();
        if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() > 2048 {
            return Err(TenantError::Invalid(
                "baseUrl must be an http:// or https:// URL".into(),
            ));
        }
        let api_key = match spec
            .api_key
            .as_deref()
            .map(str::trim)
            .filter(|k| !k.is_empty())
        {
            None => None,
            Some(k) => {
                let key = t.key.as_ref().ok_or_else(|| {
                    TenantError::Invalid(
                        "an API key is stored only sealed: set FERROCLAW_ENCRYPTION_KEY (64 hex characters, 44 base64 characters or 32 bytes)".into(),
                    )
                })?;
                Some(
                    key.seal(k)
                        .map_err(|e| TenantError::Invalid(e.to_string()))?,
                )
            }
        };
        let record = ProviderRecord {
            name: name.to_string(),
            owner,
            kind: kind.to_string(),
            base_url: url.to_string(),
            api_key,
            created_at: ferroclaw_types::now_millis(),
            updated_at: 0,
        };
        t.directory.put_provider(&record).await?;
        // Agents built on the old record must pick up the new one.
        self.changed(None);
        Ok(self.provider_view(t, &record))
    }

    fn provider_view(&self, t: &Tenants, r: &ProviderRecord) -> ProviderView {
        ProviderView {
            name: r.name.clone(),
            owner: r.owner.clone(),
            kind: r.kind.clone(),
            base_url: r.base_url.clone(),
            api_key: r.api_key.as_ref().map(|sealed| {
                t.key
                    .as_ref()
                    .and_then(|k| k.open(sealed).ok())
                    .map_or_else(|| "****".to_string(), |plain| ferroclaw_store::mask(&plain))
            }),
        }
    }

    /// `who`'s provider records (every record for the administrator), keys masked.
    pub async fn providers(&self, who: Requester<'_>) -> Result<Vec<ProviderView>, TenantError> {
        let t = self.tenants()?;
        let owner = if who.admin && who.user.is_none() {
            None
        } else {
            Some(Self::owner_of(who)?)
        };
        let records = t.directory.providers(owner.as_deref()).await?;
        Ok(records.iter().map(|r| self.provider_view(t, r)).collect())
    }

    pub async fn delete_provider(
        &self,
        who: Requester<'_>,
        name: &str,
    ) -> Result<bool, TenantError> {
        let t = self.tenants()?;
        let Some(r) = t.directory.provider(name).await? else {
            return Ok(false);
        };
        if !who.admin && who.user != Some(r.owner.as_str()) {
            // Another's record does not exist for this requester.
            return Ok(false);
        }
        let deleted = t.directory.delete_provider(name).await?;
        self.changed(None);
        Ok(deleted)
    }
}

fn provider_kind(kind: &str) -> Result<ProviderKind, TenantError> {
    match kind {
        "openai_compat" | "openai" => Ok(ProviderKind::OpenaiCompat),
        "anthropic" => Ok(ProviderKind::Anthropic),
        other => Err(TenantError::Invalid(format!(
            "provider kind `{other}`: expected openai_compat or anthropic"
        ))),
    }
}
