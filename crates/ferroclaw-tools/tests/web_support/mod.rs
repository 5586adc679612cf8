//! Helpers for the web tool tests: a local HTTP server on 127.0.0.1 and a tool context.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;

use ferroclaw_tools::ToolContext;
use tokio_util::sync::CancellationToken;

/// Serves `router` on an ephemeral port of 127.0.0.1 until the test's runtime ends.
pub async fn serve(router: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move {
        axum::serve(listener, router).await.expect("test server");
    });
    addr
}

pub fn ctx(ws: &Path) -> ToolContext {
    ToolContext {
        agent_id: "test-agent".into(),
        session_key: "test-session".into(),
        workspace: ws.to_path_buf(),
        cancel: CancellationToken::new(),
        user: None,
        acting_user: None,
        group_chat: false,
        progress: Default::default(),
        run_id: String::new(),
    }
}

/// An agent whose registry holds exactly `tools`, talking to `llm` (OpenAI wire), with its
/// workspace at `ws` and its sessions under `home`.
pub fn agent_with(
    tools: Vec<std::sync::Arc<dyn ferroclaw_tools::Tool>>,
    llm: &ferroclaw_testkit::ScriptedLlm,
    ws: &Path,
    home: &Path,
) -> ferroclaw_agent::Agent {
    let mut registry = ferroclaw_tools::ToolRegistry::new();
    for t in tools {
        registry.register(t);
    }
    agent_on(registry, llm, ws, home)
}

/// [`agent_with`] over a registry the caller built.
pub fn agent_on(
    registry: ferroclaw_tools::ToolRegistry,
    llm: &ferroclaw_testkit::ScriptedLlm,
    ws: &Path,
    home: &Path,
) -> ferroclaw_agent::Agent {
    use ferroclaw_providers::{OpenAiCompat, OpenAiCompatConfig, Provider, SchemaFlavor};
    let provider: std::sync::Arc<dyn Provider> = std::sync::Arc::new(
        OpenAiCompat::new(OpenAiCompatConfig {
            name: "scripted".into(),
            base_url: llm.openai_base_url(),
            api_key: None,
            headers: vec![],
            request_timeout: std::time::Duration::from_secs(30),
            idle_timeout: std::time::Duration::from_secs(30),
            schema_flavor: SchemaFlavor::OpenAi,
        })
        .expect("provider"),
    );
    let store: std::sync::Arc<dyn ferroclaw_store::SessionStore> =
        std::sync::Arc::new(ferroclaw_store::FileSessionStore::new(home));
    let settings =
        ferroclaw_agent::AgentSettings::new("main", "scripted", "model-a", ws.to_path_buf());
    ferroclaw_agent::Agent::new(settings, provider, std::sync::Arc::new(registry), store)
}

/// Runs one user message and returns the final text.
pub async fn run_turn(agent: &ferroclaw_agent::Agent, message: &str) -> String {
    agent
        .run(
            ferroclaw_agent::RunRequest {
                session_key: "web-test".into(),
                message: message.into(),
                options: Default::default(),
            },
            std::sync::Arc::new(ferroclaw_agent::NullSink),
            CancellationToken::new(),
        )
        .await
        .expect("run")
        .text
}

/// The content of the tool result for `call_id` in a recorded OpenAI request body.
pub fn tool_result_in(body: &serde_json::Value, call_id: &str) -> String {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .unwrap_or_else(|| panic!("no tool result for {call_id} in {body}"))["content"]
        .to_string()
}
