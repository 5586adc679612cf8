//! MCP servers nobody here wrote — the protocol's reference servers from the npm
//! registry (`.ci/mcp`, installed by `.ci/run`), over stdio, streamable HTTP and legacy
//! SSE: their tools through the registry and policy, a call that hangs past its
//! time-out, a server that dies and is started again, servers that cannot start or never
//! answer `initialize`, and a turn of the agent loop calling one.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferroclaw_config::{McpConfig, McpServerConfig};
use ferroclaw_testkit::{Reply, ScriptedLlm};
use ferroclaw_tools::mcp::McpHub;
use ferroclaw_tools::policy::PolicyEngine;
use ferroclaw_tools::ToolRegistry;
use serde_json::json;

const SETTLE: Duration = Duration::from_secs(60);

/// A reference server's executable; panics with what to run when it is not installed.
fn reference(bin: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../.ci/mcp/node_modules/.bin")
        .join(bin);
    assert!(
        path.exists(),
        "{} is missing: run `npm install --prefix .ci/mcp` (what .ci/run does)",
        path.display()
    );
    path.display().to_string()
}

fn server(command: &str, args: &[&str]) -> McpServerConfig {
    McpServerConfig {
        command: Some(command.into()),
        args: args.iter().map(|a| a.to_string()).collect(),
        ..McpServerConfig::default()
    }
}

fn hub(servers: Vec<(&str, McpServerConfig)>) -> Arc<McpHub> {
    let cfg = McpConfig {
        servers: servers
            .into_iter()
            .map(|(n, c)| (n.to_string(), c))
            .collect(),
    };
    let hub = McpHub::new(&cfg);
    hub.start();
    hub
}

fn status_of(hub: &McpHub, name: &str) -> ferroclaw_tools::mcp::McpServerStatus {
    hub.status()
        .into_iter()
        .find(|s| s.name == name)
        .expect("configured")
}

#[tokio::test]
async fn the_reference_server_s_tools_are_called_through_the_registry_and_its_policy() {
    let mut slow = server(&reference("mcp-server-everything"), &[]);
    slow.timeout_seconds = 2;
    let hub = hub(vec![("everything", slow)]);
    assert_eq!(hub.settled("everything", SETTLE).await, Some("ready"));
    let registry = ToolRegistry::new().with_source(hub.clone());
    let names = registry.names();
    for expected in ["mcp_everything_echo", "mcp_everything_get-sum"] {
        assert!(names.iter().any(|n| n == expected), "{names:?}");
    }
    let ws = tempfile::tempdir().unwrap();
    let ctx = crate::web_support::ctx(ws.path());
    let sum = registry
        .execute("mcp_everything_get-sum", &ctx, json!({"a": 2, "b": 40}))
        .await;
    assert!(!sum.is_error && sum.for_llm.contains("42"), "{sum:?}");
    let echo = registry
        .execute(
            "mcp_everything_echo",
            &ctx,
            json!({"message": "over stdio"}),
        )
        .await;
    assert!(echo.for_llm.contains("over stdio"), "{echo:?}");

    // A call that runs past the server's time-out is cut off, and the server goes on.
    let started = Instant::now();
    let long = registry
        .execute(
            "mcp_everything_trigger-long-running-operation",
            &ctx,
            json!({"duration": 30, "steps": 3}),
        )
        .await;
    assert!(
        long.is_error && long.for_llm.contains("did not answer within 2 s"),
        "{long:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    let again = registry
        .execute(
            "mcp_everything_echo",
            &ctx,
            json!({"message": "still here"}),
        )
        .await;
    assert!(again.for_llm.contains("still here"), "{again:?}");

    // The policy names the server's tools by group; a look-alike group denies nothing.
    let policy = |deny: &str| {
        let mut settings = ferroclaw_config::settings::AgentToolPolicySettings::default();
        settings.agent.deny = vec![deny.to_string()];
        PolicyEngine::for_agent("main", &settings, 1)
    };
    let (engine, pctx) = policy("group:mcp:everything");
    let denied = ToolRegistry::new()
        .with_source(hub.clone())
        .with_policy(&engine, &pctx);
    assert!(denied.names().iter().all(|n| !n.starts_with("mcp_")));
    let refused = denied
        .execute("mcp_everything_echo", &ctx, json!({"message": "x"}))
        .await;
    assert!(
        refused.is_error && refused.for_llm.contains("group:mcp:everything"),
        "{refused:?}"
    );
    let (engine, pctx) = policy("group:mcp:elsewhere");
    let allowed = ToolRegistry::new()
        .with_source(hub.clone())
        .with_policy(&engine, &pctx);
    assert!(allowed.names().iter().any(|n| n == "mcp_everything_echo"));
    hub.shutdown();
}

#[tokio::test]
async fn a_server_that_dies_is_started_again_and_a_broken_one_says_why() {
    // Ends itself after a few seconds, each time it is started.
    let everything = reference("mcp-server-everything");
    let dying = server("timeout", &["3", &everything]);
    let missing = server("/nonexistent/mcp-server", &[]);
    let mut mute = server("sleep", &["30"]);
    mute.init_timeout_seconds = 1;
    let http = McpServerConfig {
        transport: "streamable-http".into(),
        url: Some("http://127.0.0.1:9/mcp".into()),
        ..McpServerConfig::default()
    };
    let hub = hub(vec![
        ("dying", dying),
        ("missing", missing),
        ("mute", mute),
        ("remote", http),
    ]);
    assert_eq!(hub.settled("dying", SETTLE).await, Some("ready"));
    let deadline = Instant::now() + SETTLE;
    loop {
        let s = status_of(&hub, "dying");
        if s.starts >= 2 && s.state == "ready" {
            assert!(s.last_error.is_some(), "{s:?}");
            assert!(!s.tools.is_empty());
            break;
        }
        assert!(Instant::now() < deadline, "never came back: {s:?}");
        // Waiting for a child process that ends on its own clock.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (name, why) in [
        ("missing", "cannot start `/nonexistent/mcp-server`"),
        ("mute", "no answer to initialize within 1 s"),
        ("remote", "127.0.0.1:9"),
    ] {
        assert_eq!(hub.settled(name, SETTLE).await, Some("failed"), "{name}");
        let s = status_of(&hub, name);
        assert!(
            s.last_error.as_deref().is_some_and(|e| e.contains(why)),
            "{name}: {s:?}"
        );
        assert!(s.tools.is_empty());
    }
    hub.shutdown();
}

#[tokio::test]
async fn the_agent_loop_reads_a_file_through_the_filesystem_reference_server() {
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("notes.txt"), "the answer is 42").unwrap();
    let dir = files.path().canonicalize().unwrap().display().to_string();
    let hub = hub(vec![(
        "fs",
        server(&reference("mcp-server-filesystem"), &[&dir]),
    )]);
    assert_eq!(hub.settled("fs", SETTLE).await, Some("ready"));
    let tools = status_of(&hub, "fs").tools;
    let read = tools
        .iter()
        .find(|t| t.ends_with("read_text_file") || t.ends_with("read_file"))
        .unwrap_or_else(|| panic!("{tools:?}"))
        .clone();

    let llm = ScriptedLlm::start().await.unwrap();
    llm.push(Reply::tool_call(
        "c1",
        &read,
        json!({"path": format!("{dir}/notes.txt")}),
    ));
    llm.push(Reply::text("It says 42."));
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::new().with_source(hub.clone());
    let agent = crate::web_support::agent_on(registry, &llm, ws.path(), home.path());
    let answer = crate::web_support::run_turn(&agent, "what is in notes.txt?").await;
    assert_eq!(answer, "It says 42.");
    let requests = llm.requests();
    let offered = requests[0].body["tools"].to_string();
    assert!(offered.contains(&read), "{offered}");
    let sent_back = requests[1].body["messages"].to_string();
    assert!(sent_back.contains("the answer is 42"), "{sent_back}");
    hub.shutdown();
}

/// A reference server serving HTTP on a port of its own; killed (with its group) on drop.
struct NodeServer {
    child: tokio::process::Child,
    port: u16,
}

impl NodeServer {
    /// `mcp-server-everything <mode>`, once it says it listens.
    async fn start(mode: &str) -> NodeServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Self::start_on(mode, port).await
    }

    async fn start_on(mode: &str, port: u16) -> NodeServer {
        use tokio::io::AsyncBufReadExt;
        let mut child = tokio::process::Command::new(reference("mcp-server-everything"))
            .arg(mode)
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .process_group(0)
            .spawn()
            .unwrap();
        let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let said = tokio::time::timeout(SETTLE, async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if line.contains(&port.to_string()) {
                    return line;
                }
            }
            panic!("{mode}: the server ended before listening");
        })
        .await
        .expect("the server did not start");
        assert!(!said.contains("in use"), "{said}");
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        NodeServer { child, port }
    }

    fn kill(&mut self) {
        if let Some(pid) = self.child.id() {
            // SAFETY: the group this test started.
            unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
        }
    }
}

impl Drop for NodeServer {
    fn drop(&mut self) {
        self.kill();
    }
}

#[tokio::test]
async fn the_reference_server_over_streamable_http_and_over_legacy_sse() {
    for (mode, transport, path) in [
        ("streamableHttp", "streamable-http", "/mcp"),
        ("sse", "sse", "/sse"),
    ] {
        let mut node = NodeServer::start(mode).await;
        let cfg = McpServerConfig {
            transport: transport.into(),
            url: Some(format!("http://127.0.0.1:{}{path}", node.port)),
            headers: [("X-Team".to_string(), "blue".to_string())].into(),
            timeout_seconds: 5,
            ..McpServerConfig::default()
        };
        let hub = hub(vec![("everything", cfg)]);
        assert_eq!(
            hub.settled("everything", SETTLE).await,
            Some("ready"),
            "{mode}: {:?}",
            status_of(&hub, "everything")
        );
        let status = status_of(&hub, "everything");
        assert_eq!(status.transport, transport);
        let registry = ToolRegistry::new().with_source(hub.clone());
        let ws = tempfile::tempdir().unwrap();
        let ctx = crate::web_support::ctx(ws.path());
        let sum = registry
            .execute("mcp_everything_get-sum", &ctx, json!({"a": 2, "b": 40}))
            .await;
        assert!(
            !sum.is_error && sum.for_llm.contains("42"),
            "{mode}: {sum:?}"
        );
        // Several calls in flight at once each get their own answer.
        let calls = (0..5).map(|i| {
            let registry = registry.clone();
            let ctx = ctx.clone();
            async move {
                registry
                    .execute(
                        "mcp_everything_echo",
                        &ctx,
                        json!({"message": format!("call {i}")}),
                    )
                    .await
            }
        });
        let results = futures_util::future::join_all(calls).await;
        for (i, r) in results.iter().enumerate() {
            assert!(r.for_llm.contains(&format!("call {i}")), "{mode}: {r:?}");
        }

        // The server goes away: a call fails with a reason, within the time-out.
        node.kill();
        let started = Instant::now();
        let gone = registry
            .execute("mcp_everything_echo", &ctx, json!({"message": "anyone?"}))
            .await;
        assert!(gone.is_error, "{mode}: {gone:?}");
        assert!(started.elapsed() < Duration::from_secs(20), "{mode}");

        // It comes back on the same address (a new process: every session forgotten),
        // and so do its tools, without anyone restarting the gateway.
        let _back = NodeServer::start_on(mode, node.port).await;
        let deadline = Instant::now() + SETTLE;
        loop {
            let r = registry
                .execute(
                    "mcp_everything_echo",
                    &ctx,
                    json!({"message": "back again"}),
                )
                .await;
            if !r.is_error && r.for_llm.contains("back again") {
                break;
            }
            assert!(Instant::now() < deadline, "{mode}: never came back: {r:?}");
            // Waiting for the hub's back-off to reconnect (it doubles from 2 s).
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        hub.shutdown();
    }
}

// ----- Our own servers (`ferroclaw_testkit::mcp`, written with rmcp's server side) -----
// They do on request what the reference servers only do by accident: answer late, hang,
// die, add a tool.

use ferroclaw_testkit::mcp::{fixture_bin, FixtureOptions, HttpFixture};

/// The stdio fixture with `args`, the token in its environment.
fn stdio_fixture(args: &[&str]) -> McpServerConfig {
    let mut cfg = server(&fixture_bin().display().to_string(), args);
    cfg.env = [("FIXTURE_TOKEN".to_string(), "s3cret".to_string())].into();
    cfg
}

/// The HTTP fixture at `url`, the token in a header.
fn http_fixture(url: &str) -> McpServerConfig {
    McpServerConfig {
        transport: "streamable-http".into(),
        url: Some(url.to_string()),
        headers: [("x-fixture-token".to_string(), "s3cret".to_string())].into(),
        ..McpServerConfig::default()
    }
}

/// Calls `tool` until `done` holds for its result (the server acts on its own time: a
/// notification in flight, a restart with back-off); panics with the last result.
async fn call_until(
    registry: &ToolRegistry,
    ctx: &ferroclaw_tools::ToolContext,
    tool: &str,
    args: serde_json::Value,
    done: impl Fn(&ferroclaw_tools::ToolResult) -> bool,
) -> ferroclaw_tools::ToolResult {
    let deadline = Instant::now() + SETTLE;
    loop {
        if registry.names().iter().any(|n| n == tool) {
            let r = registry.execute(tool, ctx, args.clone()).await;
            if done(&r) {
                return r;
            }
            assert!(Instant::now() < deadline, "{tool}: {r:?}");
        } else {
            assert!(Instant::now() < deadline, "{tool} never listed");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn our_server_over_stdio_and_http_answers_is_cancelled_past_its_time_out_and_adds_tools() {
    let fixture = HttpFixture::start(FixtureOptions::default()).await;
    for (transport, mut cfg) in [
        ("stdio", stdio_fixture(&[])),
        ("streamable-http", http_fixture(&fixture.url())),
    ] {
        cfg.timeout_seconds = 1;
        let hub = hub(vec![("fx", cfg)]);
        assert_eq!(
            hub.settled("fx", SETTLE).await,
            Some("ready"),
            "{transport}: {:?}",
            status_of(&hub, "fx")
        );
        let registry = ToolRegistry::new().with_source(hub.clone());
        let ws = tempfile::tempdir().unwrap();
        let ctx = crate::web_support::ctx(ws.path());
        let call = |tool: &'static str, args: serde_json::Value| {
            let (registry, ctx) = (registry.clone(), ctx.clone());
            async move { registry.execute(tool, &ctx, args).await }
        };

        let sum = call("mcp_fx_add", json!({"a": 2, "b": 40})).await;
        assert!(!sum.is_error && sum.for_llm == "42", "{transport}: {sum:?}");
        // The server's own refusal reaches the model as an error, with its reason.
        let bad = call("mcp_fx_add", json!({"a": "two", "b": 40})).await;
        assert!(
            bad.is_error && bad.for_llm.contains("`a` must be a number"),
            "{transport}: {bad:?}"
        );
        // The configured environment (stdio) or header (HTTP) reaches the server.
        let who = call("mcp_fx_whoami", json!({})).await;
        assert_eq!(who.for_llm, "s3cret", "{transport}");

        // A call past the time-out is cut off and cancelled on the server, which goes on.
        let started = Instant::now();
        let slow = call("mcp_fx_sleep", json!({"ms": 60_000})).await;
        assert!(
            slow.is_error && slow.for_llm.contains("did not answer within 1 s"),
            "{transport}: {slow:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(20), "{transport}");
        call_until(&registry, &ctx, "mcp_fx_cancelled_calls", json!({}), |r| {
            r.for_llm == "1"
        })
        .await;
        let echo = call("mcp_fx_echo", json!({"text": "still here"})).await;
        assert_eq!(echo.for_llm, "still here", "{transport}");

        // A tool added on the server is offered once it says its list changed.
        assert!(!registry.names().iter().any(|n| n == "mcp_fx_zed"));
        let added = call("mcp_fx_add_tool", json!({"name": "zed"})).await;
        assert_eq!(added.for_llm, "added zed", "{transport}");
        let zed = call_until(&registry, &ctx, "mcp_fx_zed", json!({}), |r| !r.is_error).await;
        assert_eq!(zed.for_llm, "I am zed", "{transport}");
        hub.shutdown();
    }
    fixture.stop().await;
}

#[tokio::test]
async fn a_slow_initialize_is_waited_for_up_to_its_limit_and_not_beyond() {
    let slow = HttpFixture::start(FixtureOptions {
        init_delay: Duration::from_millis(2_500),
        ..FixtureOptions::default()
    })
    .await;
    let with_limit = |mut cfg: McpServerConfig, secs: u64| {
        cfg.init_timeout_seconds = secs;
        cfg
    };
    let hub = hub(vec![
        (
            "stdio_short",
            with_limit(stdio_fixture(&["--init-delay-ms", "2500"]), 1),
        ),
        (
            "stdio_long",
            with_limit(stdio_fixture(&["--init-delay-ms", "2500"]), 10),
        ),
        ("http_short", with_limit(http_fixture(&slow.url()), 1)),
        ("http_long", with_limit(http_fixture(&slow.url()), 10)),
    ]);
    for name in ["stdio_short", "http_short"] {
        assert_eq!(hub.settled(name, SETTLE).await, Some("failed"), "{name}");
        let s = status_of(&hub, name);
        assert!(
            s.last_error
                .as_deref()
                .is_some_and(|e| e.contains("no answer to initialize within 1 s")),
            "{name}: {s:?}"
        );
        assert!(s.tools.is_empty(), "{name}: {s:?}");
    }
    for name in ["stdio_long", "http_long"] {
        assert_eq!(hub.settled(name, SETTLE).await, Some("ready"), "{name}");
        let s = status_of(&hub, name);
        assert_eq!(s.starts, 1, "{name}: {s:?}");
        assert!(
            s.tools.iter().any(|t| t == &format!("mcp_{name}_add")),
            "{s:?}"
        );
    }
    hub.shutdown();
    slow.stop().await;
}

#[tokio::test]
async fn our_server_dies_and_comes_back_over_stdio_and_http() {
    let fixture = HttpFixture::start(FixtureOptions::default()).await;
    let port = fixture.port();
    let hub = hub(vec![
        ("local", stdio_fixture(&[])),
        ("remote", http_fixture(&fixture.url())),
    ]);
    for name in ["local", "remote"] {
        assert_eq!(hub.settled(name, SETTLE).await, Some("ready"), "{name}");
    }
    let registry = ToolRegistry::new().with_source(hub.clone());
    let ws = tempfile::tempdir().unwrap();
    let ctx = crate::web_support::ctx(ws.path());

    // The stdio server exits (code 3) after answering; it is started again.
    let bye = registry.execute("mcp_local_exit", &ctx, json!({})).await;
    assert_eq!(bye.for_llm, "exiting");
    let back = call_until(
        &registry,
        &ctx,
        "mcp_local_add",
        json!({"a": 1, "b": 2}),
        |r| !r.is_error && status_of(&hub, "local").starts >= 2,
    )
    .await;
    assert_eq!(back.for_llm, "3");
    let s = status_of(&hub, "local");
    assert!(
        s.last_error
            .as_deref()
            .is_some_and(|e| e.contains("connection ended")),
        "{s:?}"
    );

    // The HTTP server goes away: calls fail with a reason instead of hanging.
    fixture.stop().await;
    let gone = registry
        .execute("mcp_remote_add", &ctx, json!({"a": 1, "b": 2}))
        .await;
    assert!(gone.is_error, "{gone:?}");
    // A new server on the same port knows nothing of the old session; the client
    // starts another and the tools work again.
    let fixture = HttpFixture::start_on(port, FixtureOptions::default())
        .await
        .unwrap();
    let back = call_until(
        &registry,
        &ctx,
        "mcp_remote_add",
        json!({"a": 20, "b": 22}),
        |r| !r.is_error,
    )
    .await;
    assert_eq!(back.for_llm, "42");
    hub.shutdown();
    fixture.stop().await;
}
