//! The tenants' structured data: agents kept in the database (beside those of the
//! configuration), who they are shared with, their context files (the agent's own and
//! each user's), and provider records. Stored as written: access rules live in the
//! runtime, and a provider's API key arrives here already sealed ([`crate::SecretKey`]),
//! so nothing in this crate ever holds a key in clear.
//!
//! Both backends keep it in rows: the embedded one in its own SQLite file
//! (`<home>/data/directory.db`, apart from the session index, which can be rebuilt from
//! the transcripts while this cannot), the managed one in PostgreSQL.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::StoreError;

/// How a database agent treats its users.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentKind {
    /// Every context file is per user: each user shapes the agent for themselves.
    Open,
    /// The agent's context files are its owner's; a user keeps only `USER.md` of their own.
    Predefined,
}

impl AgentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::Open => "open",
            AgentKind::Predefined => "predefined",
        }
    }

    pub fn parse(s: &str) -> Option<AgentKind> {
        match s {
            "open" => Some(AgentKind::Open),
            "predefined" => Some(AgentKind::Predefined),
            _ => None,
        }
    }
}

/// An agent kept in the database.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentRecord {
    /// Its agent id; unique among live agents and never one of the configuration's.
    pub key: String,
    /// The user who created it.
    pub owner: String,
    pub kind: AgentKind,
    /// Usable by every user (still changed only by its owner and editors).
    pub is_default: bool,
    /// What differs from the template agent (name, model, provider record, sampling);
    /// read by the runtime, opaque here.
    pub settings: serde_json::Value,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
    pub updated_at: i64,
}

/// What a share lets a user do with another's agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShareRole {
    /// Run it, in sessions and with files of their own.
    User,
    /// Also change its settings and its agent-level files.
    Editor,
}

impl ShareRole {
    pub fn as_str(self) -> &'static str {
        match self {
            ShareRole::User => "user",
            ShareRole::Editor => "editor",
        }
    }

    pub fn parse(s: &str) -> Option<ShareRole> {
        match s {
            "user" => Some(ShareRole::User),
            "editor" => Some(ShareRole::Editor),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    pub user: String,
    pub role: ShareRole,
    pub granted_at: i64,
}

/// A context file (`AGENTS.md`, `USER.md`, …) of an agent, or of one user of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredFile {
    pub name: String,
    pub content: String,
    pub updated_at: i64,
}

/// An LLM endpoint a user registered for their agents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderRecord {
    pub name: String,
    pub owner: String,
    /// `openai_compat` or `anthropic`.
    pub kind: String,
    pub base_url: String,
    /// Sealed (`aes-gcm:` + base64): never the key itself.
    pub api_key: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// Whose a file is: the agent's own, or one user's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileScope<'a> {
    Agent,
    User(&'a str),
}

impl FileScope<'_> {
    /// Stored as the user column: empty for the agent's own files (user ids are never
    /// empty).
    pub(crate) fn column(&self) -> &str {
        match self {
            FileScope::Agent => "",
            FileScope::User(u) => u,
        }
    }
}

#[async_trait]
pub trait Directory: Send + Sync {
    /// Stores a new agent. [`StoreError::Conflict`] when an agent has or had its key:
    /// sessions are stored under the agent id, so a deleted agent's id is never reused
    /// (a new agent of that id, perhaps another owner's on another endpoint, would
    /// inherit its users' sessions).
    async fn create_agent(&self, record: &AgentRecord) -> Result<(), StoreError>;
    /// Replaces kind, default flag and settings of a live agent (owner and key stay);
    /// `false` when there is none.
    async fn update_agent(&self, record: &AgentRecord) -> Result<bool, StoreError>;
    /// Soft delete: the row stays, marked; `false` when there was no live agent.
    async fn delete_agent(&self, key: &str) -> Result<bool, StoreError>;
    /// A live agent.
    async fn agent(&self, key: &str) -> Result<Option<AgentRecord>, StoreError>;
    /// The live agents `user` may see (owned, shared with them, or default), by key;
    /// `None`: every live agent (an administrator's view).
    async fn agents_for(&self, user: Option<&str>) -> Result<Vec<AgentRecord>, StoreError>;
    /// Grants (`Some`) or revokes (`None`) a share; `false` when a revoke found none.
    async fn set_share(
        &self,
        agent: &str,
        user: &str,
        role: Option<ShareRole>,
    ) -> Result<bool, StoreError>;
    async fn shares(&self, agent: &str) -> Result<Vec<Share>, StoreError>;
    /// Every share granted to `user`, with its agent (one query for a listing).
    async fn shares_of(&self, user: &str) -> Result<Vec<(String, Share)>, StoreError>;
    /// By name.
    async fn files(&self, agent: &str, scope: FileScope<'_>)
        -> Result<Vec<StoredFile>, StoreError>;
    /// Writes (`Some`) or removes (`None`) a file; `false` when a removal found none.
    async fn set_file(
        &self,
        agent: &str,
        scope: FileScope<'_>,
        name: &str,
        content: Option<&str>,
    ) -> Result<bool, StoreError>;
    /// Creates or replaces the record of that name. [`StoreError::Conflict`] when the
    /// name is another owner's.
    async fn put_provider(&self, record: &ProviderRecord) -> Result<(), StoreError>;
    async fn provider(&self, name: &str) -> Result<Option<ProviderRecord>, StoreError>;
    /// `owner`'s records, by name; `None`: everyone's.
    async fn providers(&self, owner: Option<&str>) -> Result<Vec<ProviderRecord>, StoreError>;
    async fn delete_provider(&self, name: &str) -> Result<bool, StoreError>;
}
