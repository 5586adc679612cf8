//! Tools of MCP servers (`mcp.servers.<name>`), through the official SDK (`rmcp`): each
//! server's tools appear as `mcp_<server>_<tool>` (or `<tool_prefix>_<tool>`) in every
//! agent's registry, behind the same policy, rate limit and scrubbing as the built-in
//! ones (groups `group:mcp`, `group:mcp:<server>`), each call cut off at the server's
//! `timeout_seconds`.
//!
//! Lifecycle: every enabled server is started when the hub starts; `initialize` has its
//! own time-out (`init_timeout_seconds`); a `ping` every 30 s checks it is alive; a server
//! that fails or dies is restarted with back-off (2 s doubling to 60 s, 10 tries, then
//! given up); its tools are listed again on `notifications/tools/list_changed`. A failing
//! server is never silent: [`McpHub::status`] reports its state and last error. Child
//! processes are killed when the hub shuts down (or is dropped).
//!
//! Transports: `stdio` (a child process, in a process group of its own), `streamable-http`
//! (rmcp's protocol over our own reqwest, `http.rs`) and the legacy `sse` (`sse.rs`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use ferroclaw_config::{McpConfig, McpServerConfig};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use rmcp::model::{CallToolRequestParams, ClientRequest};
use rmcp::service::{NotificationContext, Peer, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ServiceExt};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

mod grants;
mod http;
mod sse;

pub use grants::{check as check_grants, McpGrant};

use crate::registry::ToolSource;
use crate::{Tool, ToolContext, ToolResult};

const PING_EVERY: Duration = Duration::from_secs(30);
const PING_TIMEOUT: Duration = Duration::from_secs(10);
const BACKOFF_START: Duration = Duration::from_secs(2);
const BACKOFF_MAX: Duration = Duration::from_secs(60);
const MAX_TRIES: u32 = 10;
/// The text of a tool result kept for the model.
const RESULT_CHARS: usize = 50_000;

/// What clients see of one server.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct McpServerStatus {
    pub name: String,
    pub transport: String,
    /// `starting`, `ready`, `restarting`, `failed` or `disabled`.
    pub state: &'static str,
    /// `config` (the config file) or `stored` (created through the API).
    pub source: &'static str,
    pub tools: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Times it was (re)started.
    pub starts: u32,
}

struct Server {
    name: String,
    cfg: McpServerConfig,
    prefix: String,
    state: Mutex<ServerState>,
    /// Wakes the connection loop: the tool list changed.
    list_changed: Arc<Notify>,
    /// Wakes those waiting for the server to settle (tests, `doctor`).
    settled: Notify,
    /// Ends this server alone (it was deleted or redefined); a child of the hub's.
    stop: CancellationToken,
    /// Who may use its tools (`None`: a server of the config file, for every agent).
    grants: Option<Mutex<Vec<McpGrant>>>,
}

#[derive(Default)]
struct ServerState {
    state: &'static str,
    tools: Vec<Arc<dyn Tool>>,
    peer: Option<Peer<RoleClient>>,
    last_error: Option<String>,
    starts: u32,
    /// The child process while it serves (stdio), so shutdown can end it at once rather
    /// than leave it to a drop that may never run as the process exits.
    pid: Option<u32>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Every configured MCP server, and their tools.
pub struct McpHub {
    servers: Mutex<Vec<Arc<Server>>>,
    stop: CancellationToken,
    started: std::sync::atomic::AtomicBool,
}

impl McpHub {
    /// The servers of `cfg`, not started yet.
    pub fn new(cfg: &McpConfig) -> Arc<McpHub> {
        let stop = CancellationToken::new();
        let servers = cfg
            .servers
            .iter()
            .map(|(name, c)| Server::new(name, c.clone(), None, &stop))
            .collect();
        Arc::new(McpHub {
            servers: Mutex::new(servers),
            stop,
            started: Default::default(),
        })
    }

    fn servers(&self) -> Vec<Arc<Server>> {
        lock(&self.servers).clone()
    }

    /// Starts every enabled server (on the current tokio runtime), and those added later.
    pub fn start(self: &Arc<Self>) {
        self.started
            .store(true, std::sync::atomic::Ordering::SeqCst);
        for server in self.servers().into_iter().filter(|s| s.cfg.enabled) {
            tokio::spawn(run_server(server.clone(), server.stop.clone()));
        }
    }

    /// Makes the stored servers (created through the API) exactly `stored`: new ones
    /// start, deleted ones stop, a redefined one restarts, one whose grants alone
    /// changed keeps running. A name the config file uses is left to the config file.
    pub fn sync_stored(&self, stored: Vec<(String, McpServerConfig, Vec<McpGrant>)>) {
        let started = self.started.load(std::sync::atomic::Ordering::SeqCst);
        let mut servers = lock(&self.servers);
        servers.retain(|s| {
            let Some(grants) = &s.grants else {
                return true;
            };
            match stored.iter().find(|(name, _, _)| *name == s.name) {
                Some((_, cfg, new)) if *cfg == s.cfg => {
                    *lock(grants) = new.clone();
                    true
                }
                _ => {
                    s.stop.cancel();
                    kill_group(lock(&s.state).pid.take());
                    false
                }
            }
        });
        for (name, cfg, grants) in stored {
            if servers.iter().any(|s| s.name == name) {
                if servers.iter().any(|s| s.name == name && s.grants.is_none()) {
                    warn!(server = %name, "mcp: a stored server has the name of a configured one; the configured one is kept");
                }
                continue;
            }
            let server = Server::new(&name, cfg, Some(grants), &self.stop);
            if started && server.cfg.enabled {
                tokio::spawn(run_server(server.clone(), server.stop.clone()));
            }
            servers.push(server);
        }
    }

    /// Whether the config file names a server `name`.
    pub fn is_configured(&self, name: &str) -> bool {
        self.servers()
            .iter()
            .any(|s| s.name == name && s.grants.is_none())
    }

    /// Stops every server; their child processes are killed now.
    pub fn shutdown(&self) {
        self.stop.cancel();
        for server in self.servers() {
            kill_group(lock(&server.state).pid.take());
        }
    }

    pub fn status(&self) -> Vec<McpServerStatus> {
        self.servers()
            .iter()
            .map(|s| {
                let st = lock(&s.state);
                McpServerStatus {
                    name: s.name.clone(),
                    transport: s.cfg.transport.clone(),
                    state: st.state,
                    source: if s.grants.is_some() {
                        "stored"
                    } else {
                        "config"
                    },
                    tools: st.tools.iter().map(|t| t.name().to_string()).collect(),
                    last_error: st.last_error.clone(),
                    starts: st.starts,
                }
            })
            .collect()
    }

    /// Waits until every enabled server is ready or has failed, each within its
    /// `init_timeout_seconds` (a command that sends one message, then exits).
    pub async fn settle_all(&self) {
        // They start together: waiting for one after the other costs the slowest.
        for s in self.servers().into_iter().filter(|s| s.cfg.enabled) {
            let timeout = Duration::from_secs(s.cfg.init_timeout_seconds.max(1) + 5);
            self.settled(&s.name, timeout).await;
        }
    }

    /// Waits until server `name` is ready or has failed (or `timeout` passes); its state.
    pub async fn settled(&self, name: &str, timeout: Duration) -> Option<&'static str> {
        let server = self.servers().into_iter().find(|s| s.name == name)?;
        let wait = async {
            loop {
                let notified = server.settled.notified();
                let state = lock(&server.state).state;
                if matches!(state, "ready" | "failed" | "disabled") {
                    return state;
                }
                notified.await;
            }
        };
        match tokio::time::timeout(timeout, wait).await {
            Ok(state) => Some(state),
            Err(_) => Some(lock(&server.state).state),
        }
    }
}

impl Drop for McpHub {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl ToolSource for McpHub {
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        lock(&self.servers)
            .iter()
            .flat_map(|s| lock(&s.state).tools.clone())
            .collect()
    }
}

impl Server {
    fn new(
        name: &str,
        cfg: McpServerConfig,
        grants: Option<Vec<McpGrant>>,
        hub_stop: &CancellationToken,
    ) -> Arc<Server> {
        let prefix = cfg
            .tool_prefix
            .clone()
            .unwrap_or_else(|| format!("mcp_{}", sanitize(name)));
        let state = if cfg.enabled { "starting" } else { "disabled" };
        Arc::new(Server {
            name: name.to_string(),
            cfg,
            prefix,
            state: Mutex::new(ServerState {
                state,
                ..ServerState::default()
            }),
            list_changed: Arc::new(Notify::new()),
            settled: Notify::new(),
            stop: hub_stop.child_token(),
            grants: grants.map(Mutex::new),
        })
    }
}

/// Ends a server's process group (it leads its own), at once.
fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: signalling the process group of a child this hub started and had not
        // yet seen end.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
}

/// Tool names keep to what every provider accepts.
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Receives the server's notifications.
struct Handler {
    list_changed: Arc<Notify>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changed.notify_one();
    }
}

type Client = RunningService<RoleClient, Handler>;

/// Connects, serves, reconnects with back-off, until stopped or given up. A server
/// that dies within a minute of starting counts as a failed start.
async fn run_server(server: Arc<Server>, stop: CancellationToken) {
    let mut failures = 0u32;
    loop {
        {
            let mut st = lock(&server.state);
            st.starts += 1;
            if st.starts > 1 {
                st.state = "restarting";
            }
        }
        let started = std::time::Instant::now();
        let outcome = tokio::select! {
            _ = stop.cancelled() => return,
            r = connect(&server) => r,
        };
        let error = match outcome {
            Ok(client) => {
                let why = serve(&server, client, &stop).await;
                {
                    let mut st = lock(&server.state);
                    st.tools.clear();
                    st.peer = None;
                    // Whatever is left of it goes before another is started.
                    kill_group(st.pid.take());
                    st.last_error = why.clone();
                }
                let Some(e) = why else {
                    return;
                };
                warn!(server = %server.name, error = %e, "mcp: server lost; restarting");
                if started.elapsed() >= Duration::from_secs(60) {
                    failures = 0;
                    continue;
                }
                e
            }
            Err(e) => {
                warn!(server = %server.name, error = %e, "mcp: server failed to start");
                e
            }
        };
        failures += 1;
        {
            let mut st = lock(&server.state);
            kill_group(st.pid.take());
            st.last_error = Some(error);
            st.state = "failed";
        }
        server.settled.notify_waiters();
        if failures >= MAX_TRIES {
            warn!(server = %server.name, "mcp: giving up after {MAX_TRIES} tries");
            return;
        }
        let wait = BACKOFF_START
            .saturating_mul(1 << (failures - 1).min(6))
            .min(BACKOFF_MAX);
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// Starts (stdio) or reaches (HTTP) the server and initialises it, within
/// `init_timeout_seconds`, then lists its tools.
async fn connect(server: &Arc<Server>) -> Result<Client, String> {
    let cfg = &server.cfg;
    let handler = Handler {
        list_changed: server.list_changed.clone(),
    };
    // The server's last words, for the error when it fails (stdio).
    let last_words = Arc::new(Mutex::new(String::new()));
    let init = async {
        match cfg.transport.as_str() {
            "stdio" => {
                let transport = spawn_child(server, &last_words)?;
                handler.serve(transport).await
            }
            "streamable-http" => {
                let (client, headers, url) = http_parts(cfg)?;
                let mut config = StreamableHttpClientTransportConfig::with_uri(url);
                // A server that restarted forgot our session: start a new one.
                config.reinit_on_expired_session = true;
                let transport = StreamableHttpClientTransport::with_client(
                    http::McpHttp::new(client, headers),
                    config,
                );
                handler.serve(transport).await
            }
            "sse" => {
                let (client, headers, url) = http_parts(cfg)?;
                let transport = sse::LegacySse::connect(client, &url, headers).await?;
                handler.serve(transport).await
            }
            other => return Err(format!("unknown transport `{other}`")),
        }
        .map_err(|e| format!("initialize failed: {e}"))
    };
    let timeout = Duration::from_secs(cfg.init_timeout_seconds.max(1));
    let with_words = |e: String| {
        let words = lock(&last_words).clone();
        if words.is_empty() {
            e
        } else {
            format!("{e} (its last words: {words})")
        }
    };
    let client = tokio::time::timeout(timeout, init)
        .await
        .map_err(|_| format!("no answer to initialize within {} s", timeout.as_secs()))
        .map_err(with_words)?
        .map_err(with_words)?;
    refresh_tools(server, client.peer()).await?;
    Ok(client)
}

/// The child process of a stdio server, its stderr logged and its pid kept.
fn spawn_child(
    server: &Arc<Server>,
    last_words: &Arc<Mutex<String>>,
) -> Result<TokioChildProcess, String> {
    let cfg = &server.cfg;
    let command = cfg
        .command
        .as_deref()
        .filter(|c| !c.trim().is_empty())
        .ok_or("a stdio server needs a `command`")?;
    let mut cmd = tokio::process::Command::new(command);
    // A group of its own, so ending it ends whatever it started too (a wrapper script's
    // child, an `npx`'s node).
    cmd.args(&cfg.args)
        .envs(&cfg.env)
        .kill_on_drop(true)
        .process_group(0);
    let (transport, stderr) = TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start `{command}`: {e}"))?;
    if let Some(stderr) = stderr {
        tokio::spawn(log_stderr(server.name.clone(), stderr, last_words.clone()));
    }
    lock(&server.state).pid = transport.id();
    Ok(transport)
}

/// The HTTP client, configured headers and URL of an HTTP server. Redirects are not
/// followed: they would carry the configured headers (credentials) elsewhere.
fn http_parts(cfg: &McpServerConfig) -> Result<(reqwest::Client, HeaderMap, String), String> {
    let url = cfg
        .url
        .clone()
        .filter(|u| !u.trim().is_empty())
        .ok_or_else(|| format!("a {} server needs a `url`", cfg.transport))?;
    let mut headers = HeaderMap::new();
    for (name, value) in &cfg.headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("`{name}` is not a valid HTTP header name"))?;
        let mut value = HeaderValue::from_str(value)
            .map_err(|_| format!("the value of header `{name}` is not a valid header value"))?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
    Ok((client, headers, url))
}

/// Logs what the server writes to stderr and keeps its last line.
async fn log_stderr(name: String, stderr: tokio::process::ChildStderr, last: Arc<Mutex<String>>) {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(server = %name, "mcp stderr: {line}");
        if !line.trim().is_empty() {
            *lock(&last) = line.chars().take(300).collect();
        }
    }
}

async fn refresh_tools(server: &Arc<Server>, peer: &Peer<RoleClient>) -> Result<(), String> {
    let timeout = Duration::from_secs(server.cfg.timeout_seconds.max(1));
    let listed = tokio::time::timeout(timeout, peer.list_all_tools())
        .await
        .map_err(|_| "tools/list did not answer in time".to_string())?
        .map_err(|e| format!("tools/list failed: {e}"))?;
    let tools: Vec<Arc<dyn Tool>> = listed
        .into_iter()
        .map(|t| {
            Arc::new(McpTool {
                name: format!("{}_{}", server.prefix, sanitize(&t.name)),
                remote: t.name.to_string(),
                description: t
                    .description
                    .map(|d| d.to_string())
                    .unwrap_or_else(|| format!("{} (MCP server {})", t.name, server.name)),
                parameters: Value::Object((*t.input_schema).clone()),
                server: server.clone(),
            }) as Arc<dyn Tool>
        })
        .collect();
    let mut st = lock(&server.state);
    info!(server = %server.name, tools = tools.len(), "mcp: server ready");
    st.tools = tools;
    st.peer = Some(peer.clone());
    st.state = "ready";
    drop(st);
    server.settled.notify_waiters();
    Ok(())
}

/// Serves a connected server until it dies (`Some(why)`) or the hub stops (`None`).
async fn serve(server: &Arc<Server>, client: Client, stop: &CancellationToken) -> Option<String> {
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.tick().await;
    let peer = client.peer().clone();
    let mut cancel = Some(client.cancellation_token());
    let end = |cancel: &mut Option<rmcp::service::RunningServiceCancellationToken>| {
        if let Some(c) = cancel.take() {
            c.cancel();
        }
    };
    let mut done = tokio::spawn(client.waiting());
    loop {
        tokio::select! {
            _ = stop.cancelled() => {
                end(&mut cancel);
                let _ = done.await;
                return None;
            }
            r = &mut done => {
                return Some(match r {
                    Ok(reason) => format!("the server's connection ended ({reason:?})"),
                    Err(e) => format!("the server's connection failed: {e}"),
                });
            }
            _ = server.list_changed.notified() => {
                if let Err(e) = refresh_tools(server, &peer).await {
                    warn!(server = %server.name, error = %e, "mcp: could not list tools again");
                }
            }
            _ = ping.tick() => {
                let ping = peer.send_request(ClientRequest::PingRequest(Default::default()));
                let why = match tokio::time::timeout(PING_TIMEOUT, ping).await {
                    Ok(Ok(_)) => continue,
                    Ok(Err(e)) => format!("ping failed: {e}"),
                    Err(_) => "no answer to ping".to_string(),
                };
                end(&mut cancel);
                let _ = done.await;
                return Some(why);
            }
        }
    }
}

/// One tool of an MCP server.
struct McpTool {
    name: String,
    remote: String,
    description: String,
    parameters: Value,
    server: Arc<Server>,
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    fn offered_to(&self, ctx: &ToolContext) -> Result<(), String> {
        match &self.server.grants {
            None => Ok(()),
            Some(grants) => grants::decide(
                &lock(grants),
                &self.server.name,
                &self.remote,
                &ctx.agent_id,
                ctx.acting_user.as_deref(),
            ),
        }
    }

    async fn execute(&self, _ctx: &ToolContext, args: Value) -> ToolResult {
        let peer = lock(&self.server.state).peer.clone();
        let Some(peer) = peer else {
            return ToolResult::error(format!(
                "MCP server `{}` is not connected right now; try again later",
                self.server.name
            ));
        };
        let mut params = CallToolRequestParams::new(self.remote.clone());
        params.arguments = match args {
            Value::Object(map) => Some(map),
            _ => None,
        };
        let timeout = Duration::from_secs(self.server.cfg.timeout_seconds.max(1));
        match tokio::time::timeout(timeout, peer.call_tool(params)).await {
            Err(_) => ToolResult::error(format!(
                "MCP tool `{}` of server `{}` did not answer within {} s",
                self.remote,
                self.server.name,
                timeout.as_secs()
            )),
            Ok(Err(e)) => ToolResult::error(format!("MCP server `{}`: {e}", self.server.name)),
            Ok(Ok(result)) => {
                let v = serde_json::to_value(&result).unwrap_or(Value::Null);
                let text = render_content(&v);
                if v["isError"].as_bool() == Some(true) {
                    ToolResult::error(text)
                } else {
                    ToolResult::ok(text)
                }
            }
        }
    }
}

/// The result's content as text: text parts as they are, others named.
fn render_content(result: &Value) -> String {
    let mut parts: Vec<String> = Vec::new();
    for c in result["content"].as_array().into_iter().flatten() {
        match c["type"].as_str() {
            Some("text") => parts.push(c["text"].as_str().unwrap_or_default().to_string()),
            Some("image") | Some("audio") => parts.push(format!(
                "[{} {}]",
                c["type"].as_str().unwrap_or_default(),
                c["mimeType"].as_str().unwrap_or("")
            )),
            Some("resource") => parts.push(
                c["resource"]["text"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("[resource {}]", c["resource"]["uri"])),
            ),
            Some("resource_link") => parts.push(format!("[resource {}]", c["uri"])),
            _ => parts.push(c.to_string()),
        }
    }
    if parts.is_empty() {
        if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
            parts.push(structured.to_string());
        }
    }
    let text = parts.join("\n");
    if text.chars().count() > RESULT_CHARS {
        let cut: String = text.chars().take(RESULT_CHARS).collect();
        format!("{cut}\n[cut at {RESULT_CHARS} characters]")
    } else {
        text
    }
}

/// Names of the configured servers by state, for `doctor` and `status`.
pub fn summary(statuses: &[McpServerStatus]) -> BTreeMap<&'static str, usize> {
    let mut out = BTreeMap::new();
    for s in statuses {
        *out.entry(s.state).or_insert(0) += 1;
    }
    out
}
