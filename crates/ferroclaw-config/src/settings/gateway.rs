//! The gateway: where it listens, who may call it (tokens read from the environment) and
//! the caps that keep one client from exhausting it; and the scheduler every run of the
//! process goes through (lanes, queues), whichever surface started it.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewaySettings {
    /// `FERROCLAW_HOST` already applied.
    pub host: String,
    /// `FERROCLAW_PORT` already applied.
    pub port: u16,
    /// Requests per minute per user or IP; 0 turns limiting off.
    pub rate_limit_rpm: u32,
    /// Browser origins allowed besides the gateway's own; `"*"` allows any.
    pub allowed_origins: Vec<String>,
    /// `Host` names accepted besides loopback names and IP literals.
    pub allowed_hosts: Vec<String>,
    /// `FERROCLAW_GATEWAY_TOKEN`; `None`: the token file in the home is used (or made).
    pub token_from_env: Option<String>,
    /// `FERROCLAW_GATEWAY_VIEWER_TOKEN`: read-only access.
    pub viewer_token: Option<String>,
    pub users: Vec<GatewayUserSettings>,
    pub limits: GatewayLimitsSettings,
    /// On SIGINT/SIGTERM, running turns get this long to finish before they are aborted.
    pub shutdown_grace: Duration,
    /// What a message does when its session is busy (unless the request says).
    pub queue_mode: QueueMode,
    /// Tools `POST /tools/invoke` may run besides the default (`gateway.tools.allow`).
    pub http_tools_allow: Vec<String>,
    /// Tools `POST /tools/invoke` never runs (`gateway.tools.deny`).
    pub http_tools_deny: Vec<String>,
}

/// Lanes and session queues (`gateway.lanes`, `gateway.queue_capacity`,
/// `gateway.debounce_ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulerSettings {
    /// `FERROCLAW_LANE_<NAME>` already applied.
    pub lanes: LaneSettings,
    /// Messages waiting per session before the oldest is dropped.
    pub queue_capacity: usize,
    /// Quiet period during which messages to an idle session are merged into one turn.
    pub debounce: Duration,
}

/// One person (or client) with a token of their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayUserSettings {
    pub id: String,
    /// The variable the token is read from (named in errors).
    pub token_env: String,
    /// `None`: the variable is unset or blank, which the gateway refuses at start-up.
    pub token: Option<String>,
    pub role: UserRole,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UserRole {
    /// Read only.
    Viewer,
    /// Chat, own sessions, own approvals.
    #[default]
    Operator,
}

/// Caps on what clients may hold open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatewayLimitsSettings {
    pub max_connections: usize,
    pub max_connections_per_ip: usize,
    pub max_ws_connections: usize,
    pub max_ws_connections_per_ip: usize,
    /// A WebSocket that has not completed `connect` by then is closed.
    pub connect_timeout: Duration,
    /// Time to send a request's headers (slowloris).
    pub header_read_timeout: Duration,
    /// Time to send a whole request body.
    pub body_read_timeout: Duration,
    /// Devices one user (or the shared operator credential) may keep paired.
    pub max_devices_per_user: usize,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum QueueMode {
    #[default]
    Queue,
    Followup,
    Interrupt,
}

impl Default for SchedulerSettings {
    /// The configuration's defaults, without the environment.
    fn default() -> Self {
        let g = crate::GatewayConfig::default();
        Self {
            lanes: LaneSettings {
                main: g.lanes.main.max(1),
                subagent: g.lanes.subagent.max(1),
                delegate: g.lanes.delegate.max(1),
                cron: g.lanes.cron.max(1),
            },
            queue_capacity: g.queue_capacity.max(1),
            debounce: Duration::from_millis(g.debounce_ms),
        }
    }
}

/// Concurrent runs per scheduler lane (each at least 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneSettings {
    pub main: usize,
    pub subagent: usize,
    pub delegate: usize,
    pub cron: usize,
}
