//! The embedded backend's [`McpServerStore`]: a table in the records database.

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension};

use super::records::RecordsDb;
use crate::mcp_servers::{McpServerRecord, McpServerStore};
use crate::StoreError;

pub(crate) struct SqliteMcpServers {
    db: RecordsDb,
}

impl SqliteMcpServers {
    pub(crate) fn new(db: RecordsDb) -> SqliteMcpServers {
        SqliteMcpServers { db }
    }
}

fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<McpServerRecord> {
    let spec: String = r.get(1)?;
    Ok(McpServerRecord {
        name: r.get(0)?,
        spec: serde_json::from_str(&spec).unwrap_or(serde_json::Value::Null),
        created_at: r.get(2)?,
        updated_at: r.get(3)?,
    })
}

#[async_trait]
impl McpServerStore for SqliteMcpServers {
    async fn put_server(&self, s: &McpServerRecord) -> Result<(), StoreError> {
        let s = s.clone();
        self.db
            .with(move |conn| {
                conn.prepare_cached(
                    "INSERT INTO mcp_servers (name, spec, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (name) DO UPDATE SET spec = excluded.spec,
                       updated_at = excluded.updated_at",
                )?
                .execute(params![
                    s.name,
                    s.spec.to_string(),
                    s.created_at,
                    s.updated_at
                ])
                .map(drop)
            })
            .await
    }

    async fn server(&self, name: &str) -> Result<Option<McpServerRecord>, StoreError> {
        let name = name.to_owned();
        self.db
            .with(move |conn| {
                conn.prepare_cached(
                    "SELECT name, spec, created_at, updated_at FROM mcp_servers WHERE name = ?1",
                )?
                .query_row([name], from_row)
                .optional()
            })
            .await
    }

    async fn servers(&self) -> Result<Vec<McpServerRecord>, StoreError> {
        self.db
            .with(|conn| {
                conn.prepare_cached(
                    "SELECT name, spec, created_at, updated_at FROM mcp_servers ORDER BY name",
                )?
                .query_map([], from_row)?
                .collect()
            })
            .await
    }

    async fn delete_server(&self, name: &str) -> Result<bool, StoreError> {
        let name = name.to_owned();
        self.db
            .with(move |conn| {
                conn.prepare_cached("DELETE FROM mcp_servers WHERE name = ?1")?
                    .execute([name])
                    .map(|n| n > 0)
            })
            .await
    }
}
