//! `gateway.users` and `gateway.limits`: who may call the gateway with which credential,
//! and the caps that keep one client from exhausting it.
//!
//! ```json5
//! gateway: {
//!   allowed_hosts: ["gw.example.com"],          // Host names besides loopback and IP literals
//!   allowed_origins: ["https://app.example.com"], // browser origins besides the gateway's own
//!   users: [{ id: "alice", token_env: "ALICE_GATEWAY_TOKEN" }],   // per-user tokens
//!   limits: { max_connections: 4096, max_connections_per_ip: 512,
//!             max_ws_connections: 2048, max_ws_connections_per_ip: 256,
//!             connect_timeout_seconds: 10, header_read_timeout_seconds: 10,
//!             body_read_timeout_seconds: 30, max_devices_per_user: 64 },
//! }
//! ```

use serde::{Deserialize, Serialize};

/// One person (or client) with a token of their own. The token itself never sits in the
/// config file: `token_env` names the variable (process environment or `.env.local`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GatewayUserConfig {
    /// The user id runs are made for (opaque, up to 255 characters).
    pub id: String,
    #[serde(alias = "tokenEnv")]
    pub token_env: String,
    /// `operator` (default: chat, own sessions, own approvals) or `viewer` (read only).
    pub role: GatewayUserRole,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GatewayUserRole {
    Viewer,
    #[default]
    Operator,
}

/// Caps on what clients may hold open; each refusal says which cap was hit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GatewayLimitsConfig {
    /// Open HTTP connections (a WebSocket leaves this count once upgraded and counts
    /// under `max_ws_connections`).
    #[serde(alias = "maxConnections")]
    pub max_connections: usize,
    #[serde(alias = "maxConnectionsPerIp")]
    pub max_connections_per_ip: usize,
    #[serde(alias = "maxWsConnections")]
    pub max_ws_connections: usize,
    #[serde(alias = "maxWsConnectionsPerIp")]
    pub max_ws_connections_per_ip: usize,
    /// A WebSocket that has not completed `connect` by then is closed.
    #[serde(alias = "connectTimeoutSeconds")]
    pub connect_timeout_seconds: u64,
    /// Time to send a request's headers (slowloris).
    #[serde(alias = "headerReadTimeoutSeconds")]
    pub header_read_timeout_seconds: u64,
    /// Time to send a whole request body.
    #[serde(alias = "bodyReadTimeoutSeconds")]
    pub body_read_timeout_seconds: u64,
    /// Devices one user (or the shared operator credential) may keep paired; past it a
    /// new device is refused until one is revoked.
    #[serde(alias = "maxDevicesPerUser")]
    pub max_devices_per_user: usize,
}

impl Default for GatewayLimitsConfig {
    fn default() -> Self {
        GatewayLimitsConfig {
            max_connections: 4096,
            max_connections_per_ip: 512,
            max_ws_connections: 2048,
            max_ws_connections_per_ip: 256,
            connect_timeout_seconds: 10,
            header_read_timeout_seconds: 10,
            body_read_timeout_seconds: 30,
            max_devices_per_user: 64,
        }
    }
}
