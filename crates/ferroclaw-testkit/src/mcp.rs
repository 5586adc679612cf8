//! MCP test servers built on the official SDK's server side, for the MCP
//! client's tests: one handler, served over stdio by the
//! `ferroclaw-mcp-fixture` binary ([`serve_stdio`], [`fixture_bin`]) or over
//! streamable HTTP in-process ([`HttpFixture`]).
//!
//! Tools: `add` {a, b}, `echo` {text}, `sleep` {ms}, `add_tool` {name} (then
//! `notifications/tools/list_changed`), `exit` (stdio only: exit code 3),
//! `whoami` (the `x-fixture-token` header over HTTP, `FIXTURE_TOKEN` over stdio,
//! else `none`) and `cancelled_calls` (how many `sleep` calls the client
//! cancelled with `notifications/cancelled`).

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::http::request::Parts;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeRequestParams, InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt as _};
use serde_json::{json, Value};
use tokio::net::TcpListener;

use crate::killable::KillableListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Name of the stdio binary, as built next to the test executables.
pub const FIXTURE_BIN_NAME: &str = "ferroclaw-mcp-fixture";

/// Exit code of the stdio binary for `exit` and `--die-after-ms`, distinct from
/// a panic (101) or a clean end of input (0).
pub const DIE_EXIT_CODE: i32 = 3;

/// Behaviour knobs shared by both front ends.
#[derive(Debug, Clone, Default)]
pub struct FixtureOptions {
    /// How long the answer to `initialize` is held back.
    pub init_delay: Duration,
    /// stdio: the process exits with code 3 this long after [`serve_stdio`]
    /// was called. HTTP: the fixture stops (as [`HttpFixture::stop`]) this long
    /// after it started.
    pub die_after: Option<Duration>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Stdio,
    Http,
}

/// The one handler behind both front ends. Clones share the tool list, so over
/// HTTP a tool added in one session is listed in every session of the fixture.
#[derive(Clone)]
struct FixtureHandler {
    mode: Mode,
    init_delay: Duration,
    added: Arc<Mutex<Vec<String>>>,
    /// `sleep` calls ended by the client's `notifications/cancelled`.
    cancelled: Arc<AtomicU64>,
}

/// Locks ignoring poison: one panicking tool call must not break the others.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

const BUILTIN_TOOLS: [&str; 7] = [
    "add",
    "echo",
    "sleep",
    "add_tool",
    "exit",
    "whoami",
    "cancelled_calls",
];

fn object_schema(properties: Value, required: &[&str]) -> Arc<JsonObject> {
    let mut schema = JsonObject::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), properties);
    if !required.is_empty() {
        schema.insert("required".into(), json!(required));
    }
    Arc::new(schema)
}

fn no_args() -> Arc<JsonObject> {
    object_schema(json!({}), &[])
}

fn builtin_tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "add",
            "Adds two numbers.",
            object_schema(
                json!({"a": {"type": "number"}, "b": {"type": "number"}}),
                &["a", "b"],
            ),
        ),
        Tool::new(
            "echo",
            "Returns `text` unchanged.",
            object_schema(json!({"text": {"type": "string"}}), &["text"]),
        ),
        Tool::new(
            "sleep",
            "Sleeps `ms` milliseconds, then answers.",
            object_schema(json!({"ms": {"type": "integer", "minimum": 0}}), &["ms"]),
        ),
        Tool::new(
            "add_tool",
            "Adds a tool `name` and notifies tools/list_changed.",
            object_schema(json!({"name": {"type": "string"}}), &["name"]),
        ),
        Tool::new("exit", "Ends the server process (stdio only).", no_args()),
        Tool::new(
            "whoami",
            "The x-fixture-token header (HTTP) or FIXTURE_TOKEN (stdio), or `none`.",
            no_args(),
        ),
        Tool::new(
            "cancelled_calls",
            "How many `sleep` calls were cancelled by the client.",
            no_args(),
        ),
    ]
}

fn text(s: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(s)])
}

fn failure(s: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(s)])
}

fn number_arg(args: &JsonObject, name: &str) -> Result<f64, CallToolResult> {
    match args.get(name) {
        None | Some(Value::Null) => Err(failure(format!("missing argument `{name}`"))),
        Some(v) => v
            .as_f64()
            .ok_or_else(|| failure(format!("argument `{name}` must be a number, got {v}"))),
    }
}

fn string_arg<'a>(args: &'a JsonObject, name: &str) -> Result<&'a str, CallToolResult> {
    match args.get(name) {
        None | Some(Value::Null) => Err(failure(format!("missing argument `{name}`"))),
        Some(v) => v
            .as_str()
            .ok_or_else(|| failure(format!("argument `{name}` must be a string, got {v}"))),
    }
}

impl FixtureHandler {
    fn new(mode: Mode, opts: &FixtureOptions) -> Self {
        FixtureHandler {
            mode,
            init_delay: opts.init_delay,
            added: Arc::new(Mutex::new(Vec::new())),
            cancelled: Arc::new(AtomicU64::new(0)),
        }
    }

    fn whoami(&self, context: &RequestContext<RoleServer>) -> String {
        let token = match self.mode {
            Mode::Http => context
                .extensions
                .get::<Parts>()
                .and_then(|parts| parts.headers.get("x-fixture-token"))
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
            // The in-process HTTP fixture shares the test's environment, so the
            // variable only counts for the child process it was meant for.
            Mode::Stdio => std::env::var("FIXTURE_TOKEN").ok(),
        };
        token.unwrap_or_else(|| "none".to_string())
    }

    async fn add_tool(
        &self,
        args: &JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let name = match string_arg(args, "name") {
            Ok(name) => name.to_string(),
            Err(e) => return e,
        };
        if name.is_empty() {
            return failure("argument `name` must not be empty");
        }
        {
            let mut added = lock(&self.added);
            if BUILTIN_TOOLS.contains(&name.as_str()) || added.contains(&name) {
                return failure(format!("tool `{name}` already exists"));
            }
            added.push(name.clone());
        }
        // Over stdio the notification precedes the answer on the wire; over
        // HTTP rmcp routes it to the session's standalone GET stream.
        if let Err(e) = context.peer.notify_tool_list_changed().await {
            eprintln!("mcp fixture: sending tools/list_changed failed: {e}");
        }
        text(format!("added {name}"))
    }

    async fn sleep(
        &self,
        args: &JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let ms = match args.get("ms") {
            None | Some(Value::Null) => return failure("missing argument `ms`"),
            Some(v) => match v.as_u64() {
                Some(ms) => ms,
                None => {
                    return failure(format!(
                        "argument `ms` must be a non-negative integer, got {v}"
                    ))
                }
            },
        };
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(ms)) => text(format!("slept {ms} ms")),
            // A cancelled call has nobody to answer; stop holding the task.
            _ = context.ct.cancelled() => {
                self.cancelled.fetch_add(1, Ordering::SeqCst);
                failure("cancelled")
            }
        }
    }

    fn exit(&self) -> CallToolResult {
        match self.mode {
            Mode::Http => failure("not in http mode: `exit` only ends the stdio fixture"),
            Mode::Stdio => {
                // Delayed so the answer reaches stdout before the process goes.
                tokio::spawn(async {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    eprintln!("mcp fixture: exiting on `exit`");
                    std::process::exit(DIE_EXIT_CODE);
                });
                text("exiting")
            }
        }
    }
}

impl ServerHandler for FixtureHandler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(
            FIXTURE_BIN_NAME,
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        if !self.init_delay.is_zero() {
            tokio::time::sleep(self.init_delay).await;
        }
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let mut tools = builtin_tools();
        tools.extend(
            lock(&self.added)
                .iter()
                .map(|name| Tool::new(name.clone(), format!("Says it is {name}."), no_args())),
        );
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = request.arguments.unwrap_or_default();
        let result = match request.name.as_ref() {
            "add" => match (number_arg(&args, "a"), number_arg(&args, "b")) {
                // f64's Display writes 42.0 as "42".
                (Ok(a), Ok(b)) => text((a + b).to_string()),
                (Err(e), _) | (_, Err(e)) => e,
            },
            "echo" => match string_arg(&args, "text") {
                Ok(s) => text(s),
                Err(e) => e,
            },
            "sleep" => self.sleep(&args, &context).await,
            "add_tool" => self.add_tool(&args, &context).await,
            "exit" => self.exit(),
            "whoami" => text(self.whoami(&context)),
            "cancelled_calls" => text(self.cancelled.load(Ordering::SeqCst).to_string()),
            name if lock(&self.added).iter().any(|n| n == name) => text(format!("I am {name}")),
            name => {
                return Err(McpError::invalid_params(
                    format!("unknown tool `{name}`"),
                    None,
                ))
            }
        };
        Ok(result.into())
    }
}

/// Serves the fixture over stdin/stdout until stdin closes. Called first thing
/// by the `ferroclaw-mcp-fixture` binary, so `die_after` counts from start-up.
/// stdout carries the protocol only; anything for humans goes to stderr.
pub async fn serve_stdio(opts: FixtureOptions) -> io::Result<()> {
    if let Some(after) = opts.die_after {
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            eprintln!("mcp fixture: dying after {after:?} (--die-after-ms)");
            std::process::exit(DIE_EXIT_CODE);
        });
    }
    let handler = FixtureHandler::new(Mode::Stdio, &opts);
    let running = handler
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| io::Error::other(format!("mcp fixture: initialize failed: {e}")))?;
    running
        .waiting()
        .await
        .map_err(|e| io::Error::other(format!("mcp fixture: service task failed: {e}")))?;
    Ok(())
}

/// The stdio fixture binary, found next to the running test executable
/// (`target/<profile>/deps/<test>-<hash>` → `target/<profile>/ferroclaw-mcp-fixture`).
///
/// Panics when it is missing rather than letting a test skip: `cargo test
/// --workspace` builds it, `cargo build -p ferroclaw-testkit --bins` does too.
pub fn fixture_bin() -> PathBuf {
    let exe =
        std::env::current_exe().expect("the test executable's path is needed to find the fixture");
    let mut dir = exe
        .parent()
        .expect("the test executable lives in a directory")
        .to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let bin = dir.join(format!(
        "{FIXTURE_BIN_NAME}{}",
        std::env::consts::EXE_SUFFIX
    ));
    assert!(
        bin.is_file(),
        "MCP fixture binary not found at {}: run `cargo build -p ferroclaw-testkit --bins` \
         (`cargo test --workspace` builds it too)",
        bin.display()
    );
    bin
}

/// An in-process MCP server over streamable HTTP (stateful sessions), at
/// `http://127.0.0.1:<port>/mcp`. Dropping it stops it without waiting.
pub struct HttpFixture {
    port: u16,
    shutdown: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for HttpFixture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpFixture")
            .field("port", &self.port)
            .field("stopped", &self.shutdown.is_cancelled())
            .finish()
    }
}

impl HttpFixture {
    /// Binds 127.0.0.1 on a free port.
    pub async fn start(opts: FixtureOptions) -> HttpFixture {
        HttpFixture::start_on(0, opts)
            .await
            .expect("binding 127.0.0.1:0 for the MCP HTTP fixture")
    }

    /// Binds 127.0.0.1:`port`, e.g. to come back where a stopped fixture was.
    pub async fn start_on(port: u16, opts: FixtureOptions) -> io::Result<HttpFixture> {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        let port = listener.local_addr()?.port();
        let shutdown = CancellationToken::new();

        let handler = FixtureHandler::new(Mode::Http, &opts);
        let config = StreamableHttpServerConfig::default()
            // Cancelling it ends every session and every open SSE stream.
            .with_cancellation_token(shutdown.child_token());
        let mcp = StreamableHttpService::new(
            move || Ok(handler.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let app = axum::Router::new().route_service("/mcp", mcp);
        let listener = KillableListener {
            inner: listener,
            kill: shutdown.clone(),
        };
        let signal = shutdown.clone().cancelled_owned();
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app)
                .with_graceful_shutdown(signal)
                .await
            {
                eprintln!("mcp http fixture: server failed: {e}");
            }
        });
        if let Some(after) = opts.die_after {
            let die = shutdown.clone();
            tokio::spawn(async move {
                tokio::select! {
                    _ = tokio::time::sleep(after) => die.cancel(),
                    _ = die.cancelled() => {}
                }
            });
        }
        Ok(HttpFixture {
            port,
            shutdown,
            task: Some(task),
        })
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Closes the listener and cuts every open connection (clients see the
    /// server die, not a graceful end); returns once the port is free again.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for HttpFixture {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
