//! The managed backend's [`McpServerStore`]: the embedded one's table in PostgreSQL.

use async_trait::async_trait;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::PgSessionStore;
use crate::mcp_servers::{McpServerRecord, McpServerStore};
use crate::StoreError;

const COLUMNS: &str = "name, spec, created_at, updated_at";

fn from_row(r: &Row) -> McpServerRecord {
    let spec: String = r.get(1);
    McpServerRecord {
        name: r.get(0),
        spec: serde_json::from_str(&spec).unwrap_or(serde_json::Value::Null),
        created_at: r.get(2),
        updated_at: r.get(3),
    }
}

#[async_trait]
impl McpServerStore for PgSessionStore {
    async fn put_server(&self, s: &McpServerRecord) -> Result<(), StoreError> {
        self.durable(
            "INSERT INTO mcp_servers (name, spec, created_at, updated_at)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT (name) DO UPDATE SET spec = excluded.spec,
               updated_at = excluded.updated_at",
            &[
                &s.name as &(dyn ToSql + Sync),
                &s.spec.to_string(),
                &s.created_at,
                &s.updated_at,
            ],
        )
        .await?;
        Ok(())
    }

    async fn server(&self, name: &str) -> Result<Option<McpServerRecord>, StoreError> {
        let rows = self
            .rows(
                &format!("SELECT {COLUMNS} FROM mcp_servers WHERE name = $1"),
                &[&name],
            )
            .await?;
        Ok(rows.first().map(from_row))
    }

    async fn servers(&self) -> Result<Vec<McpServerRecord>, StoreError> {
        let rows = self
            .rows(
                &format!("SELECT {COLUMNS} FROM mcp_servers ORDER BY name"),
                &[],
            )
            .await?;
        Ok(rows.iter().map(from_row).collect())
    }

    async fn delete_server(&self, name: &str) -> Result<bool, StoreError> {
        let n = self
            .durable("DELETE FROM mcp_servers WHERE name = $1", &[&name])
            .await?;
        Ok(n > 0)
    }
}
