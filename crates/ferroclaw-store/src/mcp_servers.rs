//! MCP servers kept in the storage (created through `/v1/mcp/servers`), in both backends.
//! What a server's settings and grants mean is the tools' business, so the definition is
//! JSON they own; the store keeps it by name.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::StoreError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpServerRecord {
    pub name: String,
    /// Settings and grants, as the tools wrote them.
    pub spec: serde_json::Value,
    /// Epoch ms.
    pub created_at: i64,
    pub updated_at: i64,
}

#[async_trait]
pub trait McpServerStore: Send + Sync {
    /// Creates the server or replaces its definition (`created_at` of an existing one
    /// is kept).
    async fn put_server(&self, server: &McpServerRecord) -> Result<(), StoreError>;
    async fn server(&self, name: &str) -> Result<Option<McpServerRecord>, StoreError>;
    /// Every stored server, by name.
    async fn servers(&self) -> Result<Vec<McpServerRecord>, StoreError>;
    /// Whether there was one to delete.
    async fn delete_server(&self, name: &str) -> Result<bool, StoreError>;
}
