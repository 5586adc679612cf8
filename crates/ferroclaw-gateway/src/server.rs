//! Router, listener and graceful shutdown.
//!
//! Start-up: build the agents, bind, then scan (and repair) every transcript before the
//! first request is accepted, so no turn reads a damaged file the scan would have fixed.
//!
//! Shutdown order: stop accepting; tell WebSocket clients (`shutdown` event); let the
//! scheduler give running turns `gateway.shutdown_grace_seconds` before aborting them
//! (an aborted turn still writes its transcript, see `Agent::run`); kill the background
//! processes the agents started; let in-flight answers go out; close WebSocket
//! connections; return.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};
use axum::Router;
use ferroclaw_config::settings::Settings;
use ferroclaw_store::{ScanSummary, SessionStore};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::conn_limit::ConnLimiter;
use crate::http::{self, MAX_BODY_BYTES};
use crate::state::{AppState, GatewayError};
use crate::ws;
use crate::{access, listener};

/// How often idle rate-limit buckets and old idempotency keys are forgotten.
const CLEANUP_INTERVAL: Duration = Duration::from_secs(300);
/// How often the memory release looks at the connection count.
const TRIM_INTERVAL: Duration = Duration::from_secs(5);
/// Below this many WebSockets a burst is not worth a trim.
const TRIM_MIN_PEAK: usize = 256;
/// Extra time, past the grace period, for answers to reach clients before exit.
const DRAIN_MARGIN: Duration = Duration::from_secs(5);

/// Every route. Every request, `/health` and `/ws` included, passes
/// [`access::browser_guard`] (Host, Origin, JSON bodies); `/health` needs no token, `/ws`
/// takes it in `connect`, `/channels/{name}/events` is checked by the channel with the
/// platform's token, everything else passes [`http::guard`].
pub fn router(state: Arc<AppState>) -> Router {
    let guarded = Router::new()
        .route("/metrics", get(http::health::metrics))
        .route("/integrity", get(http::health::integrity))
        .route("/v1/models", get(http::models::list))
        .route(
            "/v1/agents",
            get(http::agents::list).post(http::agents::create),
        )
        .route(
            "/v1/agents/{id}",
            get(http::agents::get_one)
                .patch(http::agents::update)
                .delete(http::agents::delete),
        )
        .route(
            "/v1/agents/{id}/sharing",
            get(http::agents::shares).post(http::agents::share),
        )
        .route(
            "/v1/agents/{id}/sharing/{user}",
            axum::routing::delete(http::agents::unshare),
        )
        .route(
            "/v1/providers",
            get(http::agents::providers).post(http::agents::put_provider),
        )
        .route(
            "/v1/providers/{name}",
            axum::routing::delete(http::agents::delete_provider),
        )
        .route(
            "/v1/mcp/servers",
            get(http::mcp_servers::list).post(http::mcp_servers::create),
        )
        .route(
            "/v1/mcp/servers/{name}",
            get(http::mcp_servers::get_one)
                .put(http::mcp_servers::replace)
                .delete(http::mcp_servers::delete),
        )
        .route("/v1/traces", get(http::traces::list))
        .route("/v1/traces/{id}", get(http::traces::get_one))
        .route("/v1/chat/completions", post(http::chat_completions::handle))
        .route("/v1/responses", post(http::responses::handle))
        .route("/tools/invoke", post(http::tools_invoke::handle))
        .route("/v1/tools/invoke", post(http::tools_invoke::handle))
        .route_layer(from_fn_with_state(state.clone(), http::guard));
    Router::new()
        .route("/health", get(http::health::health))
        // The dashboard's files; the page signs in with a token like any client.
        .route("/", get(ws::root))
        .route("/ui/app.css", get(http::dashboard::css))
        .route("/ui/app.js", get(http::dashboard::js))
        // WebSocket auth happens in `connect`, per protocol.
        .route("/ws", get(ws::upgrade))
        // A platform's events prove themselves with the platform's token.
        .route(
            "/channels/{name}/events",
            post(http::channel_events::handle),
        )
        .merge(guarded)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(from_fn_with_state(state.clone(), access::browser_guard))
        .layer(from_fn_with_state(state.clone(), http::track))
        .with_state(state)
}

/// Where to listen; `None` falls back to the environment, then the config file.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    pub host: Option<String>,
    pub port: Option<u16>,
}

/// A bound, not yet serving, gateway.
pub struct Gateway {
    state: Arc<AppState>,
    listener: TcpListener,
    addr: SocketAddr,
    /// `Ok(None)`: the store does not scan at start ([`ferroclaw_store::Integrity::scan_at_start`]).
    startup_scan: Result<Option<ScanSummary>, String>,
}

impl Gateway {
    /// Builds the agents and binds. Refuses a non-loopback address without a token.
    pub async fn bind(
        settings: Settings,
        store: Arc<dyn SessionStore>,
        opts: ServeOptions,
    ) -> Result<Gateway, GatewayError> {
        // `FERROCLAW_HOST` / `FERROCLAW_PORT` were applied when the settings were resolved.
        let port = opts.port.unwrap_or(settings.gateway.port);
        let host = opts
            .host
            .clone()
            .unwrap_or_else(|| settings.gateway.host.clone());
        let state = AppState::new(settings, store)?;
        let shown = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let listener = TcpListener::bind((host.as_str(), port))
            .await
            .map_err(|source| GatewayError::Bind {
                addr: shown.clone(),
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| GatewayError::Bind {
            addr: shown.clone(),
            source,
        })?;
        // Bound but not yet accepting: connections wait in the backlog until the scan
        // is over. A scan that fails is reported, never fatal: the store still repairs
        // each transcript when it is loaded.
        let startup_scan = if state.store().scan_at_start() {
            crate::integrity::scan(&state, true).await.map(Some)
        } else {
            Ok(None)
        };
        match &startup_scan {
            Ok(None) => {}
            Ok(Some(summary)) => {
                for (path, error) in &summary.errors {
                    tracing::warn!(file = %path.display(), %error, "transcript unreadable during the start-up scan");
                }
            }
            Err(e) => tracing::warn!(error = %e, "start-up integrity scan failed"),
        }
        Ok(Gateway {
            state,
            listener,
            addr,
            startup_scan,
        })
    }

    /// What the start-up integrity scan found (`Err` when it could not run, `None` when
    /// the store checks sessions as they are opened instead).
    pub fn startup_scan(&self) -> &Result<Option<ScanSummary>, String> {
        &self.startup_scan
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn state(&self) -> &Arc<AppState> {
        &self.state
    }

    /// Serves until `signal` resolves, then shuts down gracefully (module docs).
    pub async fn serve(
        self,
        signal: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), GatewayError> {
        let state = self.state.clone();
        let cleanup = {
            let state = state.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(CLEANUP_INTERVAL);
                tick.tick().await;
                loop {
                    tick.tick().await;
                    state.limiter.cleanup();
                    state.prune_idempotency();
                }
            })
        };
        let trimmer = tokio::spawn(release_memory_after_load(state.clone()));
        // Due jobs run until shutdown begins; a run under way then ends with the others.
        let cron = state.cron_running.then(|| {
            let host: ferroclaw_runtime::cron::RuntimeHost = state.clone();
            ferroclaw_runtime::cron::CronService::new(host)
                .map(|svc| Arc::new(svc).spawn(state.shutting_down.clone()))
        });

        // Chat channels poll (or stand by for another instance) until shutdown.
        let host: ferroclaw_runtime::cron::RuntimeHost = state.clone();
        let channels = ferroclaw_channels::Channels::start(&state.channel_settings, host);
        let _ = state.channels.set(channels.clone());
        // Scheduled jobs and the heartbeat delivering to a channel session reach its chat.
        state.runtime.set_chat_sink(channels.clone());

        let stop = CancellationToken::new();
        let app = router(state.clone());
        let limits = listener::Limits {
            connections: ConnLimiter::new(
                state.config.limits.max_connections,
                state.config.limits.max_connections_per_ip,
            ),
            header_read_timeout: state.config.limits.header_read_timeout,
        };
        let server = tokio::spawn(listener::serve(self.listener, app, limits, stop.clone()));

        signal.await;
        tracing::info!("shutdown requested");
        // Refuse new WebSocket upgrades and tell connected clients.
        state.shutting_down.cancel();
        // No new chat messages; each channel gives its account up for another instance.
        channels.shutdown().await;
        // Stop accepting; in-flight HTTP requests keep running until they answer.
        stop.cancel();
        let grace = state.config.shutdown_grace;
        state.runtime.shutdown(grace).await;
        // No turn is left to use them: background processes must not outlive the gateway.
        let killed = state
            .runtime
            .services()
            .map_or(0, |s| s.exec.processes.kill_all());
        if killed > 0 {
            tracing::info!(killed, "killed background processes at shutdown");
        }
        // MCP servers' child processes end with the gateway.
        if let Some(services) = state.runtime.services() {
            services.mcp.shutdown();
        }
        // Turns are over: let WebSocket handlers send their final answers, then close.
        state.ws_tasks.close();
        let _ = tokio::time::timeout(DRAIN_MARGIN, state.ws_tasks.wait()).await;
        state.closing.cancel();
        state.ws_conns.close();
        let _ = tokio::time::timeout(DRAIN_MARGIN, state.ws_conns.wait()).await;
        let result = match tokio::time::timeout(DRAIN_MARGIN, server).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(join)) => Err(GatewayError::Serve(std::io::Error::other(join.to_string()))),
            // Some client keeps a connection open; the turns are done, so leave anyway.
            Err(_) => Ok(()),
        };
        cleanup.abort();
        trimmer.abort();
        if let Some(Some(cron)) = cron {
            cron.abort();
        }
        result
    }
}

/// Gives memory back to the system once a load is over. The allocator keeps what a burst
/// of connections freed (10,000 idle sockets left ~55 MB behind); when the number of
/// open WebSockets has fallen to half its recent peak, the free pages are returned.
async fn release_memory_after_load(state: Arc<AppState>) {
    let mut tick = tokio::time::interval(TRIM_INTERVAL);
    loop {
        tick.tick().await;
        let (open, peak) = state.ws_limiter.open_and_peak();
        if peak >= TRIM_MIN_PEAK && open <= peak / 2 {
            state.ws_limiter.reset_peak();
            let _ = tokio::task::spawn_blocking(trim_heap).await;
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim_heap() {
    // SAFETY: malloc_trim only returns free pages to the kernel; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_heap() {}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
