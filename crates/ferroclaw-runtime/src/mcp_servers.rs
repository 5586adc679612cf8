//! MCP servers kept in the storage (`/v1/mcp/servers`), beside the config file's: the
//! administrator creates, changes and deletes them, with grants to agents and users
//! (`ferroclaw_tools::mcp::McpGrant`: deny wins, nothing without a grant). Every instance
//! on the same storage runs the same set: a change is applied here at once and told to
//! the others (`Signal::McpServersChanged`), which load the set again.
//!
//! Stored servers reach their endpoints over HTTP only (`streamable-http`, `sse`): a
//! stored `stdio` server would let an API token start programs on the host, so those are
//! for the config file. Header values (where credentials go) are sealed at rest with
//! `FERROCLAW_ENCRYPTION_KEY` and masked in every answer.

use std::sync::Arc;

use ferroclaw_config::McpServerConfig;
use ferroclaw_store::{McpServerRecord, McpServerStore, SecretKey, Signal, SignalBus};
use ferroclaw_tools::mcp::{check_grants, McpGrant, McpHub};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::tenants::{Requester, TenantError};

/// The stored definition (the record's `spec`).
#[derive(Serialize, Deserialize)]
struct Spec {
    config: McpServerConfig,
    #[serde(default)]
    grants: Vec<McpGrant>,
}

pub struct McpServers {
    store: Arc<dyn McpServerStore>,
    hub: Arc<McpHub>,
    signals: Option<Arc<dyn SignalBus>>,
    key: Option<SecretKey>,
}

/// What a header value looks like in an answer.
const MASK: &str = "********";

fn admin_only(who: Requester<'_>) -> Result<(), TenantError> {
    if who.admin {
        Ok(())
    } else {
        tracing::warn!(target: "security.mcp", user = ?who.user, "MCP server administration refused to a non-administrator");
        Err(TenantError::Forbidden(
            "only the administrator (the gateway token, acting for nobody) manages MCP servers"
                .into(),
        ))
    }
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl McpServers {
    pub(crate) fn new(
        store: Arc<dyn McpServerStore>,
        hub: Arc<McpHub>,
        signals: Option<Arc<dyn SignalBus>>,
        key: Option<SecretKey>,
    ) -> McpServers {
        McpServers {
            store,
            hub,
            signals,
            key,
        }
    }

    /// Loads the stored servers into the hub (at start, and when another instance says
    /// they changed). A server whose secrets cannot be opened is left out, with the reason
    /// in the log.
    pub async fn reload(&self) -> Result<(), TenantError> {
        let records = self.store.servers().await?;
        let mut set = Vec::with_capacity(records.len());
        for r in records {
            match self.open(&r) {
                Ok(spec) => set.push((r.name, spec.config, spec.grants)),
                Err(why) => {
                    tracing::warn!(server = %r.name, error = %why, "mcp: a stored server cannot be used")
                }
            }
        }
        self.hub.sync_stored(set);
        Ok(())
    }

    fn open(&self, r: &McpServerRecord) -> Result<Spec, String> {
        let mut spec: Spec = serde_json::from_value(r.spec.clone())
            .map_err(|e| format!("unreadable definition: {e}"))?;
        for value in spec.config.headers.values_mut() {
            let key = self
                .key
                .as_ref()
                .ok_or("its header values are sealed and FERROCLAW_ENCRYPTION_KEY is not set")?;
            *value = key
                .open(value)
                .map_err(|e| format!("cannot open a header value: {e}"))?;
        }
        Ok(spec)
    }

    /// Every stored server as the administrator sees it: settings (header values
    /// masked), grants, and how it is doing.
    pub async fn list(&self, who: Requester<'_>) -> Result<Vec<Value>, TenantError> {
        admin_only(who)?;
        let records = self.store.servers().await?;
        Ok(records.iter().map(|r| self.view(r)).collect())
    }

    pub async fn get(&self, who: Requester<'_>, name: &str) -> Result<Value, TenantError> {
        admin_only(who)?;
        match self.store.server(name).await? {
            Some(r) => Ok(self.view(&r)),
            None => Err(not_found(name)),
        }
    }

    fn view(&self, r: &McpServerRecord) -> Value {
        let mut v = json!({"name": r.name, "createdAt": r.created_at, "updatedAt": r.updated_at});
        if let Some(config) = r.spec.get("config").and_then(Value::as_object) {
            for (k, val) in config {
                v[k] = val.clone();
            }
        }
        if let Some(headers) = v.get_mut("headers").and_then(Value::as_object_mut) {
            for val in headers.values_mut() {
                *val = json!(MASK);
            }
        }
        v["grants"] = r.spec.get("grants").cloned().unwrap_or(json!([]));
        if let Some(s) = self.hub.status().into_iter().find(|s| s.name == r.name) {
            v["status"] = serde_json::to_value(s).unwrap_or(Value::Null);
        }
        v
    }

    /// Creates (`create`) or replaces server `name` from a request body: the settings of
    /// `mcp.servers.<name>` (`transport`, `url`, `headers`, `timeout_seconds`, …) and
    /// `grants`.
    pub async fn put(
        &self,
        who: Requester<'_>,
        name: &str,
        body: Value,
        create: bool,
    ) -> Result<Value, TenantError> {
        admin_only(who)?;
        if !valid_name(name) {
            return Err(TenantError::Invalid(
                "name: 1-64 characters of letters, digits, `_` or `-`".into(),
            ));
        }
        if self.hub.is_configured(name) {
            return Err(TenantError::Conflict(format!(
                "the config file defines an MCP server `{name}`"
            )));
        }
        let Value::Object(mut fields) = body else {
            return Err(TenantError::Invalid("expected a JSON object".into()));
        };
        match fields.remove("name") {
            Some(Value::String(n)) if n == name => {}
            None => {}
            Some(other) => {
                return Err(TenantError::Invalid(format!(
                    "name: the body names {other}, the path `{name}`"
                )))
            }
        }
        let grants: Vec<McpGrant> = match fields.remove("grants") {
            Some(g) => serde_json::from_value(g)
                .map_err(|e| TenantError::Invalid(format!("grants: {e}")))?,
            None => Vec::new(),
        };
        check_grants(&grants).map_err(TenantError::Invalid)?;
        let config: McpServerConfig = serde_json::from_value(Value::Object(fields))
            .map_err(|e| TenantError::Invalid(e.to_string()))?;
        config
            .check()
            .map_err(|(field, why)| TenantError::Invalid(format!("{field}: {why}")))?;
        if config.transport == "stdio" {
            tracing::warn!(target: "security.mcp", server = %name, "a stored stdio MCP server was refused");
            return Err(TenantError::Invalid(
                "transport: stored servers use `streamable-http` or `sse`; a `stdio` server starts a program on the host, so it belongs in the config file".into(),
            ));
        }
        let existing = self.store.server(name).await?;
        // A client that sends back what it was shown (`********`) keeps the stored value.
        let kept = |header: &str| -> Option<String> {
            existing.as_ref()?.spec["config"]["headers"][header]
                .as_str()
                .map(str::to_string)
        };
        let mut sealed = config.clone();
        for (header, value) in sealed.headers.iter_mut() {
            if value == MASK {
                match kept(header) {
                    Some(stored) if !create => {
                        *value = stored;
                        continue;
                    }
                    _ => {
                        return Err(TenantError::Invalid(format!(
                            "headers.{header}: `{MASK}` keeps a stored value, and there is none"
                        )))
                    }
                }
            }
            let key = self.key.as_ref().ok_or_else(|| {
                TenantError::Invalid(
                    "headers: header values are stored only sealed: set FERROCLAW_ENCRYPTION_KEY (64 hex characters, 44 base64 characters or 32 bytes)".into(),
                )
            })?;
            *value = key
                .seal(value)
                .map_err(|e| TenantError::Invalid(format!("headers: {e}")))?;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let created_at = match (&existing, create) {
            (Some(_), true) => {
                return Err(TenantError::Conflict(format!(
                    "an MCP server `{name}` exists; change it with PUT"
                )))
            }
            (None, false) => return Err(not_found(name)),
            (Some(r), false) => r.created_at,
            (None, true) => now,
        };
        let record = McpServerRecord {
            name: name.to_string(),
            spec: serde_json::to_value(Spec {
                config: sealed,
                grants,
            })
            .map_err(|e| TenantError::Invalid(e.to_string()))?,
            created_at,
            updated_at: now,
        };
        self.store.put_server(&record).await?;
        tracing::info!(target: "security.mcp", server = %name, created = create, "MCP server stored");
        self.changed().await?;
        Ok(self.view(&record))
    }

    pub async fn delete(&self, who: Requester<'_>, name: &str) -> Result<(), TenantError> {
        admin_only(who)?;
        if !self.store.delete_server(name).await? {
            return Err(not_found(name));
        }
        tracing::info!(target: "security.mcp", server = %name, "MCP server deleted");
        self.changed().await
    }

    /// Applies the change here and tells the other instances.
    async fn changed(&self) -> Result<(), TenantError> {
        self.reload().await?;
        if let Some(bus) = &self.signals {
            if let Err(e) = bus.publish(&Signal::McpServersChanged).await {
                tracing::warn!(error = %e, "could not tell the other instances that MCP servers changed");
            }
        }
        Ok(())
    }
}

fn not_found(name: &str) -> TenantError {
    TenantError::NotFound(format!("no MCP server `{name}`"))
}
