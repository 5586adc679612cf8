//! Tool policy: the precedence table, the registry enforcing it, and the agent loop
//! seeing only allowed tools, getting refusals for the rest and scrubbed results.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ferroclaw_agent::{Agent, AgentSettings, NullSink, RunRequest};
use ferroclaw_config::settings::{ToolPolicySettings, ToolProfile};
use ferroclaw_providers::{OpenAiCompat, OpenAiCompatConfig, Provider, SchemaFlavor};
use ferroclaw_store::{FileSessionStore, SessionStore};
use ferroclaw_testkit::{Reply, ScriptedLlm};
use ferroclaw_tools::{PolicyContext, PolicyEngine, Tool, ToolContext, ToolRegistry, ToolResult};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

fn level(
    profile: Option<ToolProfile>,
    allow: &[&str],
    deny: &[&str],
    also: &[&str],
) -> ToolPolicySettings {
    let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
    ToolPolicySettings {
        profile,
        allow: v(allow),
        deny: v(deny),
        also_allow: v(also),
    }
}

fn none() -> ToolPolicySettings {
    ToolPolicySettings::default()
}

use ToolProfile::{Coding, Full, Messaging, Minimal};

/// One row of the precedence table.
struct Case {
    name: &'static str,
    global: ToolPolicySettings,
    /// `by_provider.ollama`; the context's provider is `provider`.
    ollama: Option<ToolPolicySettings>,
    provider: &'static str,
    agent: Option<ToolPolicySettings>,
    agent_provider: Option<ToolPolicySettings>,
    group: Option<ToolPolicySettings>,
    depth: u32,
    max_depth: u32,
    tool: &'static str,
    allowed: bool,
    /// Fragment the reason must contain (which rule and level decided).
    reason: &'static str,
}

impl Default for Case {
    fn default() -> Self {
        Case {
            name: "",
            global: none(),
            ollama: None,
            provider: "openai",
            agent: None,
            agent_provider: None,
            group: None,
            depth: 0,
            max_depth: 1,
            tool: "",
            allowed: true,
            reason: "",
        }
    }
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "default profile is full",
            tool: "exec",
            reason: "\"full\" profile",
            ..Case::default()
        },
        Case {
            name: "minimal allows reading",
            global: level(Some(Minimal), &[], &[], &[]),
            tool: "read",
            reason: "\"minimal\"",
            ..Case::default()
        },
        Case {
            name: "minimal refuses writing",
            global: level(Some(Minimal), &[], &[], &[]),
            tool: "write",
            allowed: false,
            reason: "not part of the \"minimal\" tool profile (set by the global",
            ..Case::default()
        },
        Case {
            name: "minimal allows session_status",
            global: level(Some(Minimal), &[], &[], &[]),
            tool: "session_status",
            ..Case::default()
        },
        Case {
            name: "coding allows exec",
            global: level(Some(Coding), &[], &[], &[]),
            tool: "exec",
            ..Case::default()
        },
        Case {
            name: "coding refuses message",
            global: level(Some(Coding), &[], &[], &[]),
            tool: "message",
            allowed: false,
            reason: "\"coding\"",
            ..Case::default()
        },
        Case {
            name: "messaging refuses exec",
            global: level(Some(Messaging), &[], &[], &[]),
            tool: "exec",
            allowed: false,
            reason: "\"messaging\"",
            ..Case::default()
        },
        Case {
            name: "messaging refuses write",
            global: level(Some(Messaging), &[], &[], &[]),
            tool: "write",
            allowed: false,
            reason: "\"messaging\"",
            ..Case::default()
        },
        Case {
            name: "messaging allows web_fetch",
            global: level(Some(Messaging), &[], &[], &[]),
            tool: "web_fetch",
            ..Case::default()
        },
        Case {
            name: "full profile allows unknown custom tools",
            tool: "my_custom_tool",
            ..Case::default()
        },
        Case {
            name: "coding refuses unknown custom tools",
            global: level(Some(Coding), &[], &[], &[]),
            tool: "my_custom_tool",
            allowed: false,
            reason: "\"coding\"",
            ..Case::default()
        },
        Case {
            name: "also_allow glob adds a custom tool",
            global: level(Some(Coding), &[], &[], &["my_*"]),
            tool: "my_custom_tool",
            reason: "also_allow entry \"my_*\"",
            ..Case::default()
        },
        Case {
            name: "global deny by name",
            global: level(None, &[], &["exec"], &[]),
            tool: "exec",
            allowed: false,
            reason: "denied by the global tool policy (deny entry \"exec\")",
            ..Case::default()
        },
        Case {
            name: "global deny by group",
            global: level(None, &[], &["group:runtime"], &[]),
            tool: "process",
            allowed: false,
            reason: "deny entry \"group:runtime\"",
            ..Case::default()
        },
        Case {
            name: "deny by alias reaches the canonical tool",
            global: level(None, &[], &["read_file"], &[]),
            tool: "read",
            allowed: false,
            reason: "deny entry \"read_file\"",
            ..Case::default()
        },
        Case {
            name: "decide by alias uses the canonical tool",
            global: level(None, &[], &["read"], &[]),
            tool: "read_file",
            allowed: false,
            reason: "tool \"read\"",
            ..Case::default()
        },
        Case {
            name: "global allow list restricts",
            global: level(None, &["read", "ls"], &[], &[]),
            tool: "write",
            allowed: false,
            reason: "allow list of the global",
            ..Case::default()
        },
        Case {
            name: "global allow list admits",
            global: level(None, &["read", "ls"], &[], &[]),
            tool: "ls",
            ..Case::default()
        },
        Case {
            name: "allow glob",
            global: level(None, &["web_*"], &[], &[]),
            tool: "web_search",
            ..Case::default()
        },
        Case {
            name: "allow glob excludes others",
            global: level(None, &["web_*"], &[], &[]),
            tool: "read",
            allowed: false,
            reason: "allow list",
            ..Case::default()
        },
        Case {
            name: "also_allow adds to a profile",
            global: level(Some(Minimal), &[], &[], &["web_fetch"]),
            tool: "web_fetch",
            reason: "also_allow",
            ..Case::default()
        },
        Case {
            name: "deny beats also_allow on the same level",
            global: level(Some(Minimal), &[], &["exec"], &["exec"]),
            tool: "exec",
            allowed: false,
            reason: "deny entry",
            ..Case::default()
        },
        Case {
            name: "deny * beats also_allow",
            global: level(None, &[], &["*"], &["read"]),
            tool: "read",
            allowed: false,
            reason: "deny entry \"*\"",
            ..Case::default()
        },
        Case {
            name: "agent deny beats global also_allow",
            global: level(Some(Minimal), &[], &[], &["exec"]),
            agent: Some(level(None, &[], &["exec"], &[])),
            tool: "exec",
            allowed: false,
            reason: "the agent's tool policy",
            ..Case::default()
        },
        Case {
            name: "global deny beats agent also_allow",
            global: level(None, &[], &["exec"], &[]),
            agent: Some(level(None, &[], &[], &["exec"])),
            tool: "exec",
            allowed: false,
            reason: "global",
            ..Case::default()
        },
        Case {
            name: "provider profile overrides global profile",
            global: level(Some(Coding), &[], &[], &[]),
            ollama: Some(level(Some(Minimal), &[], &[], &[])),
            provider: "ollama",
            tool: "exec",
            allowed: false,
            reason: "set by the provider's",
            ..Case::default()
        },
        Case {
            name: "provider policy ignored for other providers",
            global: level(Some(Coding), &[], &[], &[]),
            ollama: Some(level(Some(Minimal), &[], &[], &[])),
            provider: "openai",
            tool: "exec",
            ..Case::default()
        },
        Case {
            name: "provider deny",
            ollama: Some(level(None, &[], &["group:web"], &[])),
            provider: "ollama",
            tool: "web_fetch",
            allowed: false,
            reason: "provider's tool policy",
            ..Case::default()
        },
        Case {
            name: "provider allow narrows",
            ollama: Some(level(None, &["read"], &[], &[])),
            provider: "ollama",
            tool: "write",
            allowed: false,
            reason: "allow list of the provider's",
            ..Case::default()
        },
        Case {
            name: "agent allow intersects global allow",
            global: level(None, &["read", "write", "exec"], &[], &[]),
            agent: Some(level(None, &["read", "exec"], &[], &[])),
            tool: "write",
            allowed: false,
            reason: "allow list of the agent's",
            ..Case::default()
        },
        Case {
            name: "agent allow cannot widen global allow",
            global: level(None, &["read"], &[], &[]),
            agent: Some(level(None, &["read", "exec"], &[], &[])),
            tool: "exec",
            allowed: false,
            reason: "allow list of the global",
            ..Case::default()
        },
        Case {
            name: "agent also_allow widens",
            global: level(None, &["read"], &[], &[]),
            agent: Some(level(None, &[], &[], &["exec"])),
            tool: "exec",
            reason: "also_allow",
            ..Case::default()
        },
        Case {
            name: "agent profile overrides provider profile",
            ollama: Some(level(Some(Minimal), &[], &[], &[])),
            provider: "ollama",
            agent: Some(level(Some(Coding), &[], &[], &[])),
            tool: "exec",
            ..Case::default()
        },
        Case {
            name: "agent+provider deny",
            agent_provider: Some(level(None, &[], &["exec"], &[])),
            tool: "exec",
            allowed: false,
            reason: "per-provider",
            ..Case::default()
        },
        Case {
            name: "group chat deny",
            group: Some(level(None, &[], &["group:fs"], &[])),
            tool: "write",
            allowed: false,
            reason: "group-chat",
            ..Case::default()
        },
        Case {
            name: "group chat deny leaves other tools",
            group: Some(level(None, &[], &["group:fs"], &[])),
            tool: "exec",
            ..Case::default()
        },
        Case {
            name: "group chat profile is the most specific",
            global: level(Some(Full), &[], &[], &[]),
            agent: Some(level(Some(Coding), &[], &[], &[])),
            group: Some(level(Some(Messaging), &[], &[], &[])),
            tool: "exec",
            allowed: false,
            reason: "set by the group-chat",
            ..Case::default()
        },
        Case {
            name: "group chat also_allow cannot beat global deny",
            global: level(None, &[], &["web_fetch"], &[]),
            group: Some(level(None, &[], &[], &["web_fetch"])),
            tool: "web_fetch",
            allowed: false,
            reason: "global",
            ..Case::default()
        },
        Case {
            name: "top level may spawn",
            tool: "sessions_spawn",
            ..Case::default()
        },
        Case {
            name: "top level may use cron",
            tool: "cron",
            ..Case::default()
        },
        Case {
            name: "subagent loses gateway",
            depth: 1,
            max_depth: 2,
            tool: "gateway",
            allowed: false,
            reason: "not available to subagents",
            ..Case::default()
        },
        Case {
            name: "subagent loses sessions_send",
            depth: 2,
            max_depth: 3,
            tool: "sessions_send",
            allowed: false,
            reason: "subagents",
            ..Case::default()
        },
        Case {
            name: "subagent below the limit may spawn",
            depth: 1,
            max_depth: 2,
            tool: "sessions_spawn",
            ..Case::default()
        },
        Case {
            name: "leaf subagent may not spawn",
            depth: 1,
            max_depth: 1,
            tool: "sessions_spawn",
            allowed: false,
            reason: "leaf depth",
            ..Case::default()
        },
        Case {
            name: "subagent deny beats also_allow",
            global: level(None, &[], &[], &["cron"]),
            depth: 1,
            max_depth: 1,
            tool: "cron",
            allowed: false,
            reason: "subagents",
            ..Case::default()
        },
        Case {
            name: "subagent keeps ordinary tools",
            depth: 1,
            max_depth: 1,
            tool: "read",
            ..Case::default()
        },
        Case {
            name: "unknown group matches nothing",
            global: level(None, &[], &["group:nope"], &[]),
            tool: "exec",
            ..Case::default()
        },
    ]
}

#[test]
fn precedence_table() {
    let cases = cases();
    assert!(cases.len() >= 40);
    for c in cases {
        let mut engine = PolicyEngine::new(&c.global);
        if let Some(o) = &c.ollama {
            engine = engine.with_provider("ollama", o.clone());
        }
        let ctx = PolicyContext {
            provider: Some(c.provider.into()),
            agent_id: Some("main".into()),
            agent: c.agent.clone(),
            agent_provider: c.agent_provider.clone(),
            group_chat: c.group.clone(),
            subagent_depth: c.depth,
            max_depth: c.max_depth,
        };
        let d = engine.decide(c.tool, &ctx);
        assert_eq!(d.allowed, c.allowed, "case {:?}: {}", c.name, d.reason);
        assert!(
            d.reason.contains(c.reason),
            "case {:?}: reason {:?} lacks {:?}",
            c.name,
            d.reason,
            c.reason
        );
    }
}

/// The engine and context of `agent` as `config.json5` describes them (through the
/// resolved settings, as the runtime builds them).
fn agent_policy(config: &str, agent: &str) -> (PolicyEngine, PolicyContext) {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.json5"), config).unwrap();
    let loaded = ferroclaw_config::load(
        &ferroclaw_config::LoadOptions {
            home: Some(home.path().to_path_buf()),
            config_path: None,
        },
        ferroclaw_config::Env::from_pairs([("OPENAI_API_KEY", "sk-test")]),
    )
    .unwrap();
    let a = loaded.agent_settings(agent).unwrap();
    PolicyEngine::for_agent(&a.id, &a.tools.policy, 1)
}

#[test]
fn agent_config_levels() {
    let base = r#"agents: { defaults: { model: "openai/gpt-4o" }, list: ["#;
    // `tools: []` means no tools at all.
    let (engine, ctx) = agent_policy(&format!("{{ {base} {{ id: \"a\", tools: [] }}] }} }}"), "a");
    assert!(!engine.decide("read", &ctx).allowed);
    // No `tools` restricts nothing; tools_deny removes.
    let (engine, ctx) = agent_policy(
        &format!("{{ {base} {{ id: \"a\", tools_deny: [\"exec\"] }}] }} }}"),
        "a",
    );
    assert!(engine.decide("read", &ctx).allowed);
    assert!(!engine.decide("exec", &ctx).allowed);
    // Another agent keeps its own (empty) level.
    let (engine, main) = agent_policy(
        &format!("{{ {base} {{ id: \"a\", tools_deny: [\"exec\"] }}] }} }}"),
        "main",
    );
    assert!(engine.decide("exec", &main).allowed);
}

#[test]
fn config_section_builds_the_engine() {
    let tools = r#"tools: { profile: "coding", byProvider: { ollama: { deny: ["exec"] } } }"#;
    let (engine, ollama) = agent_policy(
        &format!(
            r#"{{ agents: {{ defaults: {{ provider: "ollama", model: "llama3" }} }}, {tools} }}"#
        ),
        "main",
    );
    assert_eq!(ollama.provider.as_deref(), Some("ollama"));
    assert!(!engine.decide("exec", &ollama).allowed);
    let (engine, openai) = agent_policy(
        &format!(r#"{{ agents: {{ defaults: {{ model: "openai/gpt-4o" }} }}, {tools} }}"#),
        "main",
    );
    assert!(engine.decide("exec", &openai).allowed);
    assert!(!engine.decide("message", &openai).allowed);
}

fn ctx(ws: &std::path::Path) -> ToolContext {
    ToolContext {
        agent_id: "main".into(),
        session_key: "s1".into(),
        workspace: ws.to_path_buf(),
        cancel: CancellationToken::new(),
        user: None,
        acting_user: None,
        group_chat: false,
        progress: Default::default(),
        run_id: String::new(),
    }
}

#[tokio::test]
async fn registry_hides_and_refuses_denied_tools() {
    let ws = tempfile::tempdir().unwrap();
    let engine = PolicyEngine::new(&level(Some(Minimal), &[], &["grep"], &[]));
    let reg = ToolRegistry::with_core_tools().with_policy(&engine, &PolicyContext::new());
    let names: Vec<String> = reg.definitions().into_iter().map(|d| d.name).collect();
    assert_eq!(names, ["read", "ls", "glob"]);
    assert_eq!(reg.names(), names);

    // Named directly, by alias, or with stray whitespace: refused, and never run.
    for name in ["write", "exec", " exec ", "grep", "write_file"] {
        let r = reg
            .execute(
                name,
                &ctx(ws.path()),
                json!({"path": "x.txt", "content": "x", "command": "touch y", "pattern": "x"}),
            )
            .await;
        assert!(r.is_error, "{name}: {}", r.for_llm);
        assert!(
            r.for_llm.contains("is not allowed here and was not run"),
            "{}",
            r.for_llm
        );
    }
    assert!(!ws.path().join("x.txt").exists());
    assert!(!ws.path().join("y").exists());
    // Unknown tools do not leak hidden names.
    let r = reg.execute("nope", &ctx(ws.path()), json!({})).await;
    assert!(!r.for_llm.contains("exec"), "{}", r.for_llm);
    // Allowed tools still work.
    let r = reg.execute("ls", &ctx(ws.path()), json!({})).await;
    assert!(!r.is_error, "{}", r.for_llm);
}

#[tokio::test]
async fn a_run_from_a_group_chat_gets_the_group_chat_level_too() {
    let ws = tempfile::tempdir().unwrap();
    let engine = PolicyEngine::new(&level(None, &[], &[], &[]));
    let reg = ToolRegistry::with_core_tools()
        .with_policy(&engine, &PolicyContext::new())
        .with_group_chat_policy(
            &engine,
            &PolicyContext::new(),
            level(None, &[], &["write", "exec"], &[]),
        );
    let direct = ctx(ws.path());
    let group = ToolContext {
        group_chat: true,
        ..ctx(ws.path())
    };
    let offered = |c: &ToolContext| -> Vec<String> {
        reg.definitions_for(c).into_iter().map(|d| d.name).collect()
    };
    assert!(offered(&direct).iter().any(|n| n == "write"));
    let in_group = offered(&group);
    assert!(
        !in_group.iter().any(|n| n == "write" || n == "exec"),
        "{in_group:?}"
    );
    assert!(in_group.iter().any(|n| n == "read"), "{in_group:?}");
    // Named anyway from a group: refused with the level that decided, never run.
    let args = json!({"path": "x.txt", "content": "x"});
    let r = reg.execute("write", &group, args.clone()).await;
    assert!(r.is_error && r.for_llm.contains("group"), "{}", r.for_llm);
    assert!(!ws.path().join("x.txt").exists());
    // The same call from a direct chat works.
    let r = reg.execute("write", &direct, args).await;
    assert!(!r.is_error, "{}", r.for_llm);
    assert!(ws.path().join("x.txt").exists());
}

#[tokio::test]
async fn execute_with_policy_decides_per_call() {
    let ws = tempfile::tempdir().unwrap();
    let reg = ToolRegistry::with_core_tools();
    let engine = PolicyEngine::new(&none());
    let sub = PolicyContext {
        subagent_depth: 1,
        max_depth: 1,
        ..PolicyContext::new()
    };
    let r = reg
        .execute_with_policy("ls", &ctx(ws.path()), json!({}), &engine, &sub)
        .await;
    assert!(!r.is_error, "{}", r.for_llm);
    let engine = PolicyEngine::new(&level(None, &[], &["ls"], &[]));
    let r = reg
        .execute_with_policy("list_files", &ctx(ws.path()), json!({}), &engine, &sub)
        .await;
    assert!(r.is_error);
    assert!(r.for_llm.contains("deny entry \"ls\""), "{}", r.for_llm);
}

/// A tool whose output carries a (fabricated) OpenAI key.
struct PrintEnv;

const FAKE_KEY: &str = "sk-proj-Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8L9zXcV";

#[async_trait]
impl Tool for PrintEnv {
    fn name(&self) -> &str {
        "print_env"
    }
    fn description(&self) -> &str {
        "prints the environment"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }
    async fn execute(&self, _ctx: &ToolContext, _args: Value) -> ToolResult {
        ToolResult::ok(format!("HOME=/home/me\nOPENAI_API_KEY={FAKE_KEY}\n"))
    }
}

#[tokio::test]
async fn agent_loop_sees_scrubbed_results_and_policy_refusals() {
    let llm = ScriptedLlm::start().await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let workspace = home.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let provider: Arc<dyn Provider> = Arc::new(
        OpenAiCompat::new(OpenAiCompatConfig {
            name: "scripted".into(),
            base_url: llm.openai_base_url(),
            api_key: None,
            headers: vec![],
            request_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(30),
            schema_flavor: SchemaFlavor::OpenAi,
        })
        .unwrap(),
    );
    let mut reg = ToolRegistry::with_core_tools();
    reg.register(Arc::new(PrintEnv));
    let engine = PolicyEngine::new(&level(None, &[], &["group:runtime"], &[]));
    let tools = Arc::new(reg.with_policy(&engine, &PolicyContext::new()));
    let store: Arc<dyn SessionStore> = Arc::new(FileSessionStore::new(home.path()));
    let settings = AgentSettings::new("main", "scripted", "model-a", workspace.clone());
    let agent = Agent::new(settings, provider, tools, store);

    llm.push(Reply::tool_calls(vec![
        ("call_1".into(), "print_env".into(), json!({})),
        (
            "call_2".into(),
            "exec".into(),
            json!({"command": "touch pwned"}),
        ),
    ]));
    llm.push(Reply::text("done"));
    let out = agent
        .run(
            RunRequest {
                session_key: "policy-test".into(),
                message: "show me the env".into(),
                options: Default::default(),
            },
            Arc::new(NullSink),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.text, "done");

    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    // The model was never offered exec.
    let offered: Vec<String> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(String::from))
        .collect();
    assert!(offered.contains(&"print_env".to_string()), "{offered:?}");
    assert!(!offered.contains(&"exec".to_string()), "{offered:?}");

    let second = requests[1].body.to_string();
    assert!(
        !second.contains(FAKE_KEY),
        "key reached the model: {second}"
    );
    assert!(second.contains("OPENAI_API_KEY=[REDACTED]"), "{second}");
    assert!(
        second.contains("is not allowed here and was not run"),
        "{second}"
    );
    assert!(!workspace.join("pwned").exists());
}
