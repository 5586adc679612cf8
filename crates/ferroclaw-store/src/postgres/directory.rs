//! The managed backend's [`Directory`]: the same rows as the embedded one's, in
//! PostgreSQL. The store's connections commit asynchronously (a transcript line is made
//! durable by the turn's flush); every write here commits synchronously instead, since
//! nothing later flushes it.

use async_trait::async_trait;
use ferroclaw_types::now_millis;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::{db_error, PgSessionStore};
use crate::directory::{
    AgentKind, AgentRecord, Directory, FileScope, ProviderRecord, Share, ShareRole, StoredFile,
};
use crate::StoreError;

const AGENT_COLUMNS: &str = "key, owner, kind, is_default, settings, created_at, updated_at";
const PROVIDER_COLUMNS: &str = "name, owner, kind, base_url, api_key, created_at, updated_at";

fn agent_from_row(r: &Row) -> AgentRecord {
    let kind: String = r.get(2);
    let settings: String = r.get(4);
    AgentRecord {
        key: r.get(0),
        owner: r.get(1),
        kind: AgentKind::parse(&kind).unwrap_or(AgentKind::Open),
        is_default: r.get(3),
        settings: serde_json::from_str(&settings).unwrap_or(serde_json::Value::Null),
        created_at: r.get(5),
        updated_at: r.get(6),
    }
}

fn provider_from_row(r: &Row) -> ProviderRecord {
    ProviderRecord {
        name: r.get(0),
        owner: r.get(1),
        kind: r.get(2),
        base_url: r.get(3),
        api_key: r.get(4),
        created_at: r.get(5),
        updated_at: r.get(6),
    }
}

impl PgSessionStore {
    /// One statement in a synchronously committed transaction; rows changed.
    pub(super) async fn durable(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.batch_execute("SET LOCAL synchronous_commit TO on")
            .await
            .map_err(db_error)?;
        let n = tx.execute(sql, params).await.map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(n)
    }

    pub(super) async fn rows(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(sql).await.map_err(db_error)?;
        client.query(&stmt, params).await.map_err(db_error)
    }
}

#[async_trait]
impl Directory for PgSessionStore {
    async fn create_agent(&self, a: &AgentRecord) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.batch_execute("SET LOCAL synchronous_commit TO on")
            .await
            .map_err(db_error)?;
        let inserted = tx
            .execute(
                "INSERT INTO agents (key, owner, kind, is_default, settings, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $6) ON CONFLICT (key) DO NOTHING",
                &[
                    &a.key,
                    &a.owner,
                    &a.kind.as_str(),
                    &a.is_default,
                    &a.settings.to_string(),
                    &a.created_at,
                ],
            )
            .await
            .map_err(db_error)?;
        if inserted == 0 {
            // Live or deleted: sessions are stored under the agent id, so a new agent of
            // that id (another owner's, on another endpoint) would inherit them.
            return Err(StoreError::Conflict(format!(
                "the agent id `{}` is taken (by an agent, or by a deleted one: ids are not reused)",
                a.key
            )));
        }
        tx.commit().await.map_err(db_error)
    }

    async fn update_agent(&self, a: &AgentRecord) -> Result<bool, StoreError> {
        let n = self
            .durable(
                "UPDATE agents SET kind = $2, is_default = $3, settings = $4, updated_at = $5
                 WHERE key = $1 AND deleted_at IS NULL",
                &[
                    &a.key,
                    &a.kind.as_str(),
                    &a.is_default,
                    &a.settings.to_string(),
                    &now_millis(),
                ],
            )
            .await?;
        Ok(n > 0)
    }

    async fn delete_agent(&self, key: &str) -> Result<bool, StoreError> {
        let n = self
            .durable(
                "UPDATE agents SET deleted_at = $2 WHERE key = $1 AND deleted_at IS NULL",
                &[&key, &now_millis()],
            )
            .await?;
        Ok(n > 0)
    }

    async fn agent(&self, key: &str) -> Result<Option<AgentRecord>, StoreError> {
        let rows = self
            .rows(
                &format!(
                    "SELECT {AGENT_COLUMNS} FROM agents WHERE key = $1 AND deleted_at IS NULL"
                ),
                &[&key],
            )
            .await?;
        Ok(rows.first().map(agent_from_row))
    }

    async fn agents_for(&self, user: Option<&str>) -> Result<Vec<AgentRecord>, StoreError> {
        let rows = match user {
            None => {
                self.rows(
                    &format!(
                        "SELECT {AGENT_COLUMNS} FROM agents WHERE deleted_at IS NULL ORDER BY key"
                    ),
                    &[],
                )
                .await?
            }
            Some(u) => {
                self.rows(
                    &format!(
                        "SELECT {AGENT_COLUMNS} FROM agents WHERE deleted_at IS NULL AND
                         (owner = $1 OR is_default OR
                          key IN (SELECT agent FROM agent_shares WHERE user_id = $1))
                         ORDER BY key"
                    ),
                    &[&u],
                )
                .await?
            }
        };
        Ok(rows.iter().map(agent_from_row).collect())
    }

    async fn set_share(
        &self,
        agent: &str,
        user: &str,
        role: Option<ShareRole>,
    ) -> Result<bool, StoreError> {
        let n = match role {
            Some(role) => {
                self.durable(
                    "INSERT INTO agent_shares (agent, user_id, role, granted_at) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (agent, user_id) DO UPDATE SET role = excluded.role",
                    &[&agent, &user, &role.as_str(), &now_millis()],
                )
                .await?
            }
            None => {
                self.durable(
                    "DELETE FROM agent_shares WHERE agent = $1 AND user_id = $2",
                    &[&agent, &user],
                )
                .await?
            }
        };
        Ok(n > 0)
    }

    async fn shares(&self, agent: &str) -> Result<Vec<Share>, StoreError> {
        let rows = self
            .rows(
                "SELECT user_id, role, granted_at FROM agent_shares WHERE agent = $1 ORDER BY user_id",
                &[&agent],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| Share {
                user: r.get(0),
                role: ShareRole::parse(r.get(1)).unwrap_or(ShareRole::User),
                granted_at: r.get(2),
            })
            .collect())
    }

    async fn shares_of(&self, user: &str) -> Result<Vec<(String, Share)>, StoreError> {
        let rows = self
            .rows(
                "SELECT agent, user_id, role, granted_at FROM agent_shares WHERE user_id = $1 ORDER BY agent",
                &[&user],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| {
                (
                    r.get(0),
                    Share {
                        user: r.get(1),
                        role: ShareRole::parse(r.get(2)).unwrap_or(ShareRole::User),
                        granted_at: r.get(3),
                    },
                )
            })
            .collect())
    }

    async fn files(
        &self,
        agent: &str,
        scope: FileScope<'_>,
    ) -> Result<Vec<StoredFile>, StoreError> {
        let rows = self
            .rows(
                "SELECT name, content, updated_at FROM agent_files
                 WHERE agent = $1 AND user_id = $2 ORDER BY name",
                &[&agent, &scope.column()],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| StoredFile {
                name: r.get(0),
                content: r.get(1),
                updated_at: r.get(2),
            })
            .collect())
    }

    async fn set_file(
        &self,
        agent: &str,
        scope: FileScope<'_>,
        name: &str,
        content: Option<&str>,
    ) -> Result<bool, StoreError> {
        let user = scope.column();
        let n = match content {
            Some(c) => {
                self.durable(
                    "INSERT INTO agent_files (agent, user_id, name, content, updated_at)
                     VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (agent, user_id, name) DO UPDATE
                     SET content = excluded.content, updated_at = excluded.updated_at",
                    &[&agent, &user, &name, &c, &now_millis()],
                )
                .await?
            }
            None => {
                self.durable(
                    "DELETE FROM agent_files WHERE agent = $1 AND user_id = $2 AND name = $3",
                    &[&agent, &user, &name],
                )
                .await?
            }
        };
        Ok(n > 0)
    }

    async fn put_provider(&self, p: &ProviderRecord) -> Result<(), StoreError> {
        // One statement: the update happens only while the name is the same owner's.
        let n = self
            .durable(
                "INSERT INTO providers (name, owner, kind, base_url, api_key, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $6)
                 ON CONFLICT (name) DO UPDATE SET kind = excluded.kind,
                   base_url = excluded.base_url, api_key = excluded.api_key,
                   updated_at = excluded.updated_at
                 WHERE providers.owner = excluded.owner",
                &[
                    &p.name,
                    &p.owner,
                    &p.kind,
                    &p.base_url,
                    &p.api_key,
                    &now_millis(),
                ],
            )
            .await?;
        if n == 0 {
            return Err(StoreError::Conflict(format!(
                "the provider name `{}` is taken",
                p.name
            )));
        }
        Ok(())
    }

    async fn provider(&self, name: &str) -> Result<Option<ProviderRecord>, StoreError> {
        let rows = self
            .rows(
                &format!("SELECT {PROVIDER_COLUMNS} FROM providers WHERE name = $1"),
                &[&name],
            )
            .await?;
        Ok(rows.first().map(provider_from_row))
    }

    async fn providers(&self, owner: Option<&str>) -> Result<Vec<ProviderRecord>, StoreError> {
        let rows = match owner {
            Some(o) => {
                self.rows(
                    &format!(
                        "SELECT {PROVIDER_COLUMNS} FROM providers WHERE owner = $1 ORDER BY name"
                    ),
                    &[&o],
                )
                .await?
            }
            None => {
                self.rows(
                    &format!("SELECT {PROVIDER_COLUMNS} FROM providers ORDER BY name"),
                    &[],
                )
                .await?
            }
        };
        Ok(rows.iter().map(provider_from_row).collect())
    }

    async fn delete_provider(&self, name: &str) -> Result<bool, StoreError> {
        Ok(self
            .durable("DELETE FROM providers WHERE name = $1", &[&name])
            .await?
            > 0)
    }
}
