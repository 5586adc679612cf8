//! The embedded backend's [`Directory`]: tables in the records database
//! (`records.rs`, `<home>/data/directory.db`).

use async_trait::async_trait;
use ferroclaw_types::now_millis;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::records::RecordsDb;
use crate::directory::{
    AgentKind, AgentRecord, Directory, FileScope, ProviderRecord, Share, ShareRole, StoredFile,
};
use crate::StoreError;

/// The directory's tables in the records database.
pub(crate) struct SqliteDirectory {
    db: RecordsDb,
}

impl SqliteDirectory {
    pub(crate) fn new(db: RecordsDb) -> SqliteDirectory {
        SqliteDirectory { db }
    }

    async fn with<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<R> + Send + 'static,
    {
        self.db.with(f).await
    }
}

const AGENT_COLUMNS: &str = "key, owner, kind, is_default, settings, created_at, updated_at";

fn agent_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<AgentRecord> {
    let kind: String = r.get(2)?;
    let settings: String = r.get(4)?;
    Ok(AgentRecord {
        key: r.get(0)?,
        owner: r.get(1)?,
        kind: AgentKind::parse(&kind).unwrap_or(AgentKind::Open),
        is_default: r.get::<_, i64>(3)? != 0,
        settings: serde_json::from_str(&settings).unwrap_or(serde_json::Value::Null),
        created_at: r.get(5)?,
        updated_at: r.get(6)?,
    })
}

const PROVIDER_COLUMNS: &str = "name, owner, kind, base_url, api_key, created_at, updated_at";

fn provider_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ProviderRecord> {
    Ok(ProviderRecord {
        name: r.get(0)?,
        owner: r.get(1)?,
        kind: r.get(2)?,
        base_url: r.get(3)?,
        api_key: r.get(4)?,
        created_at: r.get(5)?,
        updated_at: r.get(6)?,
    })
}

/// A statement refused for what it asked (a key taken), told apart from a failure.
enum Outcome<T> {
    Done(T),
    Conflict(String),
}

fn settle<T>(o: Result<Outcome<T>, StoreError>) -> Result<T, StoreError> {
    match o? {
        Outcome::Done(v) => Ok(v),
        Outcome::Conflict(m) => Err(StoreError::Conflict(m)),
    }
}

#[async_trait]
impl Directory for SqliteDirectory {
    async fn create_agent(&self, a: &AgentRecord) -> Result<(), StoreError> {
        let a = a.clone();
        settle(
            self.with(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let live: Option<Option<i64>> = tx
                    .query_row(
                        "SELECT deleted_at FROM agents WHERE key = ?1",
                        [&a.key],
                        |r| r.get(0),
                    )
                    .optional()?;
                match live {
                    Some(None) => {
                        return Ok(Outcome::Conflict(format!(
                            "an agent `{}` exists already",
                            a.key
                        )))
                    }
                    // Sessions are stored under the agent id: a new agent of that id
                    // (another owner's, on another endpoint) would inherit them.
                    Some(Some(_)) => {
                        return Ok(Outcome::Conflict(format!(
                            "the agent id `{}` belonged to a deleted agent and is not reused",
                            a.key
                        )))
                    }
                    None => {}
                }
                tx.execute(
                    "INSERT INTO agents (key, owner, kind, is_default, settings, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
                    params![
                        a.key,
                        a.owner,
                        a.kind.as_str(),
                        a.is_default as i64,
                        a.settings.to_string(),
                        a.created_at
                    ],
                )?;
                tx.commit()?;
                Ok(Outcome::Done(()))
            })
            .await,
        )
    }

    async fn update_agent(&self, a: &AgentRecord) -> Result<bool, StoreError> {
        let a = a.clone();
        self.with(move |conn| {
            let n = conn.execute(
                "UPDATE agents SET kind = ?2, is_default = ?3, settings = ?4, updated_at = ?5
                 WHERE key = ?1 AND deleted_at IS NULL",
                params![
                    a.key,
                    a.kind.as_str(),
                    a.is_default as i64,
                    a.settings.to_string(),
                    now_millis()
                ],
            )?;
            Ok(n > 0)
        })
        .await
    }

    async fn delete_agent(&self, key: &str) -> Result<bool, StoreError> {
        let key = key.to_string();
        self.with(move |conn| {
            let n = conn.execute(
                "UPDATE agents SET deleted_at = ?2 WHERE key = ?1 AND deleted_at IS NULL",
                params![key, now_millis()],
            )?;
            Ok(n > 0)
        })
        .await
    }

    async fn agent(&self, key: &str) -> Result<Option<AgentRecord>, StoreError> {
        let key = key.to_string();
        self.with(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {AGENT_COLUMNS} FROM agents WHERE key = ?1 AND deleted_at IS NULL"
            ))?
            .query_row([key], agent_from_row)
            .optional()
        })
        .await
    }

    async fn agents_for(&self, user: Option<&str>) -> Result<Vec<AgentRecord>, StoreError> {
        let user = user.map(str::to_string);
        self.with(move |conn| {
            let rows = match user {
                None => conn
                    .prepare_cached(&format!(
                        "SELECT {AGENT_COLUMNS} FROM agents WHERE deleted_at IS NULL ORDER BY key"
                    ))?
                    .query_map([], agent_from_row)?
                    .collect::<rusqlite::Result<Vec<_>>>()?,
                Some(u) => conn
                    .prepare_cached(&format!(
                        "SELECT {AGENT_COLUMNS} FROM agents WHERE deleted_at IS NULL AND
                         (owner = ?1 OR is_default <> 0 OR
                          key IN (SELECT agent FROM agent_shares WHERE user_id = ?1))
                         ORDER BY key"
                    ))?
                    .query_map([u], agent_from_row)?
                    .collect::<rusqlite::Result<Vec<_>>>()?,
            };
            Ok(rows)
        })
        .await
    }

    async fn set_share(
        &self,
        agent: &str,
        user: &str,
        role: Option<ShareRole>,
    ) -> Result<bool, StoreError> {
        let (agent, user) = (agent.to_string(), user.to_string());
        self.with(move |conn| {
            let n = match role {
                Some(role) => conn.execute(
                    "INSERT INTO agent_shares (agent, user_id, role, granted_at) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (agent, user_id) DO UPDATE SET role = excluded.role",
                    params![agent, user, role.as_str(), now_millis()],
                )?,
                None => conn.execute(
                    "DELETE FROM agent_shares WHERE agent = ?1 AND user_id = ?2",
                    params![agent, user],
                )?,
            };
            Ok(n > 0)
        })
        .await
    }

    async fn shares(&self, agent: &str) -> Result<Vec<Share>, StoreError> {
        let agent = agent.to_string();
        self.with(move |conn| {
            conn.prepare_cached(
                "SELECT user_id, role, granted_at FROM agent_shares WHERE agent = ?1 ORDER BY user_id",
            )?
            .query_map([agent], |r| {
                let role: String = r.get(1)?;
                Ok(Share {
                    user: r.get(0)?,
                    role: ShareRole::parse(&role).unwrap_or(ShareRole::User),
                    granted_at: r.get(2)?,
                })
            })?
            .collect()
        })
        .await
    }

    async fn shares_of(&self, user: &str) -> Result<Vec<(String, Share)>, StoreError> {
        let user = user.to_string();
        self.with(move |conn| {
            conn.prepare_cached(
                "SELECT agent, user_id, role, granted_at FROM agent_shares WHERE user_id = ?1 ORDER BY agent",
            )?
            .query_map([user], |r| {
                let role: String = r.get(2)?;
                Ok((
                    r.get(0)?,
                    Share {
                        user: r.get(1)?,
                        role: ShareRole::parse(&role).unwrap_or(ShareRole::User),
                        granted_at: r.get(3)?,
                    },
                ))
            })?
            .collect()
        })
        .await
    }

    async fn files(
        &self,
        agent: &str,
        scope: FileScope<'_>,
    ) -> Result<Vec<StoredFile>, StoreError> {
        let (agent, user) = (agent.to_string(), scope.column().to_string());
        self.with(move |conn| {
            conn.prepare_cached(
                "SELECT name, content, updated_at FROM agent_files
                 WHERE agent = ?1 AND user_id = ?2 ORDER BY name",
            )?
            .query_map(params![agent, user], |r| {
                Ok(StoredFile {
                    name: r.get(0)?,
                    content: r.get(1)?,
                    updated_at: r.get(2)?,
                })
            })?
            .collect()
        })
        .await
    }

    async fn set_file(
        &self,
        agent: &str,
        scope: FileScope<'_>,
        name: &str,
        content: Option<&str>,
    ) -> Result<bool, StoreError> {
        let (agent, user, name) = (
            agent.to_string(),
            scope.column().to_string(),
            name.to_string(),
        );
        let content = content.map(str::to_string);
        self.with(move |conn| {
            let n = match content {
                Some(c) => conn.execute(
                    "INSERT INTO agent_files (agent, user_id, name, content, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (agent, user_id, name) DO UPDATE
                     SET content = excluded.content, updated_at = excluded.updated_at",
                    params![agent, user, name, c, now_millis()],
                )?,
                None => conn.execute(
                    "DELETE FROM agent_files WHERE agent = ?1 AND user_id = ?2 AND name = ?3",
                    params![agent, user, name],
                )?,
            };
            Ok(n > 0)
        })
        .await
    }

    async fn put_provider(&self, p: &ProviderRecord) -> Result<(), StoreError> {
        let p = p.clone();
        settle(
            self.with(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let owner: Option<String> = tx
                    .query_row(
                        "SELECT owner FROM providers WHERE name = ?1",
                        [&p.name],
                        |r| r.get(0),
                    )
                    .optional()?;
                if owner.as_ref().is_some_and(|o| *o != p.owner) {
                    return Ok(Outcome::Conflict(format!(
                        "the provider name `{}` is taken",
                        p.name
                    )));
                }
                tx.execute(
                    "INSERT INTO providers (name, owner, kind, base_url, api_key, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
                     ON CONFLICT (name) DO UPDATE SET kind = excluded.kind,
                       base_url = excluded.base_url, api_key = excluded.api_key,
                       updated_at = excluded.updated_at",
                    params![p.name, p.owner, p.kind, p.base_url, p.api_key, now_millis()],
                )?;
                tx.commit()?;
                Ok(Outcome::Done(()))
            })
            .await,
        )
    }

    async fn provider(&self, name: &str) -> Result<Option<ProviderRecord>, StoreError> {
        let name = name.to_string();
        self.with(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {PROVIDER_COLUMNS} FROM providers WHERE name = ?1"
            ))?
            .query_row([name], provider_from_row)
            .optional()
        })
        .await
    }

    async fn providers(&self, owner: Option<&str>) -> Result<Vec<ProviderRecord>, StoreError> {
        let owner = owner.map(str::to_string);
        self.with(move |conn| match owner {
            Some(o) => conn
                .prepare_cached(&format!(
                    "SELECT {PROVIDER_COLUMNS} FROM providers WHERE owner = ?1 ORDER BY name"
                ))?
                .query_map([o], provider_from_row)?
                .collect(),
            None => conn
                .prepare_cached(&format!(
                    "SELECT {PROVIDER_COLUMNS} FROM providers ORDER BY name"
                ))?
                .query_map([], provider_from_row)?
                .collect(),
        })
        .await
    }

    async fn delete_provider(&self, name: &str) -> Result<bool, StoreError> {
        let name = name.to_string();
        self.with(move |conn| {
            Ok(conn.execute("DELETE FROM providers WHERE name = ?1", [name])? > 0)
        })
        .await
    }
}
