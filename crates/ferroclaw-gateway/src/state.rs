//! Everything a request handler can reach: configuration, the runtime (agents built once
//! at start-up, the services they share, the session store, the scheduler), auth, rate
//! limit, metrics and the shutdown signals.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferroclaw_config::settings::{self as cfg, GatewaySettings, Settings};
pub use ferroclaw_runtime::AgentEntry;
use ferroclaw_runtime::{BuildError, QueueMode, Runtime};
use ferroclaw_store::{SessionStore, Strategy};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::Auth;
use crate::metrics::Metrics;
use crate::ratelimit::Limiter;

/// Tools `POST /tools/invoke` never runs unless `gateway.tools.allow` names them: they
/// reach other sessions, the gateway itself or the scheduler.
pub const DEFAULT_HTTP_DENY: &[&str] = &["sessions_spawn", "sessions_send", "gateway", "cron"];

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("cannot set up {0}")]
    Runtime(Box<BuildError>),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("cannot read or create the gateway token {path}: {source}")]
    Token {
        path: String,
        source: std::io::Error,
    },
    #[error("gateway.users: {0}")]
    UserToken(String),
    #[error("server error: {0}")]
    Serve(std::io::Error),
}

/// The gateway token (from the environment, else the home's token file, else generated
/// there), the viewer token and the per-user tokens.
fn credentials(
    home: &std::path::Path,
    gateway: &GatewaySettings,
) -> Result<(Auth, ferroclaw_config::GatewayToken), GatewayError> {
    let token = ferroclaw_config::load_or_create_gateway_token_from(
        home,
        gateway.token_from_env.as_deref(),
    )
    .map_err(|source| GatewayError::Token {
        path: ferroclaw_config::token_path(home).display().to_string(),
        source,
    })?;
    let viewer = gateway.viewer_token.clone();
    let mut seen = vec![token.token.clone()];
    seen.extend(viewer.clone());
    let mut users = Vec::new();
    for u in &gateway.users {
        let Some(t) = u.token.as_deref() else {
            return Err(GatewayError::UserToken(format!(
                "user {:?}: the variable {} that should hold the token is not set",
                u.id, u.token_env
            )));
        };
        if seen.iter().any(|s| s == t) {
            return Err(GatewayError::UserToken(format!(
                "user {:?}: the token in {} is already used by another credential",
                u.id, u.token_env
            )));
        }
        seen.push(t.to_string());
        let role = match u.role {
            cfg::UserRole::Viewer => crate::auth::Role::Viewer,
            cfg::UserRole::Operator => crate::auth::Role::Operator,
        };
        users.push((t.to_string(), u.id.clone(), role));
    }
    Ok((Auth::new(token.token.clone(), viewer, users), token))
}

/// One configured agent, ready to run.
/// The HTTP tool policy (`gateway.tools`).
#[derive(Debug, Clone)]
pub struct ToolPolicy {
    denied: BTreeSet<String>,
}

impl ToolPolicy {
    pub fn new(allow: &[String], deny: &[String]) -> Self {
        let mut denied: BTreeSet<String> = DEFAULT_HTTP_DENY
            .iter()
            .map(|s| (*s).to_string())
            .filter(|d| !allow.contains(d))
            .collect();
        denied.extend(deny.iter().cloned());
        ToolPolicy { denied }
    }

    pub fn allows(&self, tool: &str) -> bool {
        !self.denied.contains(tool.trim())
    }
}

/// A `chat.send` idempotency key already seen: later senders wait for its result.
pub struct IdemSlot {
    pub created: Instant,
    pub result:
        tokio::sync::watch::Receiver<Option<Result<serde_json::Value, crate::error::WsError>>>,
}

/// How long an idempotency key is remembered.
pub const IDEMPOTENCY_TTL: Duration = Duration::from_secs(600);

pub struct AppState {
    /// The ferroclaw home (integrity scans, scan status).
    pub home: std::path::PathBuf,
    /// The configuration as loaded, secrets masked (`config.get`).
    pub shown: Arc<serde_json::Value>,
    /// The providers the agents talk to (`providers.status` asks each).
    pub providers: Vec<ferroclaw_config::settings::ProviderSettings>,
    pub config: GatewaySettings,
    /// The agents, their shared services, the store and the scheduler: every run this
    /// gateway starts goes through it.
    pub runtime: Runtime,
    /// `session.integrity_strategy`, for `integrity.scan`.
    pub integrity_strategy: Strategy,
    pub metrics: Arc<Metrics>,
    pub auth: Auth,
    /// Where the gateway token came from (the token itself stays in `auth`).
    pub token: ferroclaw_config::GatewayToken,
    pub limiter: Limiter,
    pub queue_mode: QueueMode,
    pub tool_policy: ToolPolicy,
    pub started: Instant,
    /// Tells this process's start from the next (`hello-ok` v4 `server.bootId`).
    pub boot_id: String,
    /// Cancelled when shutdown begins: WebSocket clients are told, new runs refused.
    pub shutting_down: CancellationToken,
    /// Cancelled when running turns are over: WebSocket connections flush and close.
    pub closing: CancellationToken,
    /// WebSocket request handlers in flight, so their final answers go out before close.
    pub ws_tasks: TaskTracker,
    /// Open WebSocket connections, so exit waits until each has flushed and closed.
    pub ws_conns: TaskTracker,
    /// `gateway.limits.max_ws_connections[_per_ip]`; also the count of open WebSockets.
    pub ws_limiter: crate::conn_limit::ConnLimiter,
    pub idempotency: Mutex<HashMap<String, IdemSlot>>,
    /// This gateway runs due cron jobs (`cron.enabled` and a storage that keeps them).
    pub cron_running: bool,
    /// `channels`, started with the server (they need the state as their runtime host).
    pub channel_settings: ferroclaw_config::settings::ChannelsSettings,
    pub channels: std::sync::OnceLock<Arc<ferroclaw_channels::Channels>>,
}

impl AsRef<Runtime> for AppState {
    fn as_ref(&self) -> &Runtime {
        &self.runtime
    }
}

impl AppState {
    /// Builds the runtime (every configured agent, once). The default agent must build;
    /// any other agent that fails is skipped with a reason (reported at start-up).
    pub fn new(
        settings: Settings,
        store: Arc<dyn SessionStore>,
    ) -> Result<Arc<AppState>, GatewayError> {
        // With no provider yet (a first run), the gateway still starts: `/health` and the
        // WebSocket work, and a chat is answered with what is missing.
        let options = ferroclaw_runtime::RuntimeOptions {
            allow_missing_default: true,
            ..ferroclaw_runtime::RuntimeOptions::from_settings(&settings)
        };
        let runtime = Runtime::build(&settings, store, options)
            .map_err(|e| GatewayError::Runtime(Box::new(e)))?;
        let metrics = Arc::new(Metrics::new());
        runtime.add_observer(metrics.clone());
        let providers = settings.providers_in_use().into_iter().cloned().collect();
        let config = settings.gateway;
        let (auth, token) = credentials(&settings.home, &config)?;
        Ok(Arc::new(AppState {
            shown: settings.shown.clone(),
            providers,
            cron_running: settings.cron.enabled && runtime.cron().is_some(),
            channel_settings: settings.channels.clone(),
            channels: std::sync::OnceLock::new(),
            runtime,
            integrity_strategy: ferroclaw_runtime::bootstrap::integrity_strategy(&settings.store),
            metrics,
            auth,
            token,
            limiter: Limiter::new(config.rate_limit_rpm),
            queue_mode: queue_mode(config.queue_mode),
            tool_policy: ToolPolicy::new(&config.http_tools_allow, &config.http_tools_deny),
            started: Instant::now(),
            boot_id: uuid::Uuid::new_v4().to_string(),
            shutting_down: CancellationToken::new(),
            closing: CancellationToken::new(),
            ws_tasks: TaskTracker::new(),
            ws_conns: TaskTracker::new(),
            ws_limiter: crate::conn_limit::ConnLimiter::new(
                config.limits.max_ws_connections,
                config.limits.max_ws_connections_per_ip,
            ),
            idempotency: Mutex::new(HashMap::new()),
            config,
            home: settings.home,
        }))
    }

    pub fn store(&self) -> &Arc<dyn SessionStore> {
        self.runtime.store()
    }

    pub fn ws_client_count(&self) -> usize {
        self.ws_limiter.open()
    }

    /// Forgets idempotency keys older than the TTL.
    pub fn prune_idempotency(&self) {
        let mut map = self.idempotency.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, slot| slot.created.elapsed() < IDEMPOTENCY_TTL);
    }
}

pub fn queue_mode(mode: cfg::QueueMode) -> QueueMode {
    match mode {
        cfg::QueueMode::Queue => QueueMode::Queue,
        cfg::QueueMode::Followup => QueueMode::Followup,
        cfg::QueueMode::Interrupt => QueueMode::Interrupt,
    }
}

/// Per-request queue mode (`queueMode` param, `X-Ferroclaw-Queue-Mode` header).
pub fn parse_queue_mode(s: &str) -> Option<QueueMode> {
    match s.trim().to_ascii_lowercase().as_str() {
        "queue" => Some(QueueMode::Queue),
        "followup" | "follow-up" | "follow_up" => Some(QueueMode::Followup),
        "interrupt" => Some(QueueMode::Interrupt),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_policy_defaults_and_overrides() {
        let p = ToolPolicy::new(&[], &[]);
        assert!(!p.allows("sessions_spawn") && !p.allows("cron") && p.allows("read"));
        let p = ToolPolicy::new(&["cron".into()], &["exec".into()]);
        assert!(p.allows("cron") && !p.allows("exec") && !p.allows("gateway"));
    }

    #[test]
    fn queue_modes_parse() {
        assert_eq!(parse_queue_mode("Interrupt"), Some(QueueMode::Interrupt));
        assert_eq!(parse_queue_mode("followup"), Some(QueueMode::Followup));
        assert_eq!(parse_queue_mode("nope"), None);
    }
}
