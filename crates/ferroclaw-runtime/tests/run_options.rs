//! What a surface can choose per run (`RunOptions`) and per agent beyond the config
//! file (a context budget, the bare prompt, tools that end a run), and the events a
//! surface renders its own accounting from: what the executor is built on.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ferroclaw_agent::{Agent, AgentSettings, ContextBudget, RunError, RunOptions, ToolSlots};
use ferroclaw_config::settings::PromptMode;
use ferroclaw_providers::{
    OpenAiCompat, OpenAiCompatConfig, RetryPolicy, RetryingProvider, SchemaFlavor,
};
use ferroclaw_runtime::{
    bootstrap, Origin, QueueMode, Runtime, RuntimeOptions, SchedulerConfig, Submit, Submitted,
};
use ferroclaw_store::{MemoryStore, SessionStore};
use ferroclaw_testkit::{Protocol, Reply};
use ferroclaw_tools::{Tool, ToolContext, ToolRegistry, ToolResult};
use ferroclaw_types::{EventKind, Message};
use serde_json::{json, Value};

use crate::common::{run_with, Harness, Options};

/// A tool whose backend answers `reply` (a long text, or "gone").
struct Backend {
    name: &'static str,
    reply: Result<String, String>,
}

#[async_trait]
impl Tool for Backend {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "Fetch a document from the backend."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]})
    }
    async fn execute(&self, _ctx: &ToolContext, _args: Value) -> ToolResult {
        match &self.reply {
            Ok(text) => ToolResult::ok(text.clone()),
            Err(why) => ToolResult::unavailable(why.clone()),
        }
    }
}

/// An agent built the way a surface builds its own (the executor): our provider client
/// with an exact retry schedule, our tools, settings the config file cannot express.
fn surface_agent(
    h: &Harness,
    tools: Vec<Arc<dyn Tool>>,
    store: Arc<dyn SessionStore>,
    tweak: impl FnOnce(&mut AgentSettings),
) -> Agent {
    let mut settings = bootstrap::settings_for(&h.main_settings(), ToolSlots::new(4));
    settings.stream = false;
    tweak(&mut settings);
    std::fs::create_dir_all(&settings.workspace).expect("workspace");
    let raw = OpenAiCompat::new(OpenAiCompatConfig {
        name: "scripted".into(),
        base_url: h.llm.openai_base_url(),
        api_key: None,
        headers: Vec::new(),
        request_timeout: Duration::from_secs(30),
        idle_timeout: Duration::from_secs(30),
        schema_flavor: SchemaFlavor::OpenAi,
    })
    .expect("client");
    let retry = RetryPolicy {
        attempts: 3,
        schedule: vec![Duration::from_millis(5)],
        ..RetryPolicy::default()
    };
    let mut registry = ToolRegistry::new();
    for t in tools {
        registry.register(t);
    }
    Agent::new(
        settings,
        Arc::new(RetryingProvider::new(Arc::new(raw), retry)),
        Arc::new(registry),
        store,
    )
}

fn system_of(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn tool_call(id: &str, doc: &str) -> Reply {
    Reply::tool_call(id, "fetch", json!({ "id": doc }))
}

#[tokio::test]
async fn instructions_and_sampling_reach_the_request_and_no_option_widens_a_setting() {
    let h = Harness::new(
        Protocol::OpenAi,
        Options {
            defaults_extra: "max_tokens: 1000,",
            ..Options::default()
        },
    )
    .await;
    h.llm.push(Reply::text("Bonjour."));
    let (res, _) = run_with(
        &h.agent(),
        "s",
        "greet me",
        RunOptions {
            instructions: Some("Always answer in French.".into()),
            temperature: Some(0.25),
            top_p: Some(0.5),
            max_tokens: Some(50_000),
            timeout: None,
            prompt_mode: None,
            group_chat: false,
        },
    )
    .await;
    assert_eq!(res.expect("run").text, "Bonjour.");
    let body = &h.llm.requests()[0].body;
    let system = system_of(body);
    assert!(
        system.contains("## Instructions for this run\nAlways answer in French."),
        "{system}"
    );
    assert!(
        system.len() > 200,
        "the full prompt is still there: {system}"
    );
    assert_eq!(body["max_tokens"], 1000, "capped at the agent's max_tokens");
    assert!((body["temperature"].as_f64().expect("temperature") - 0.25).abs() < 1e-6);
    assert!((body["top_p"].as_f64().expect("top_p") - 0.5).abs() < 1e-6);

    // A smaller max_tokens is taken as asked; without options the agent's own apply.
    h.llm.push(Reply::text("ok"));
    h.llm.push(Reply::text("ok"));
    let agent = h.agent();
    let small = RunOptions {
        max_tokens: Some(64),
        ..RunOptions::default()
    };
    run_with(&agent, "s2", "hi", small).await.0.expect("run");
    run_with(&agent, "s3", "hi", RunOptions::default())
        .await
        .0
        .expect("run");
    let reqs = h.llm.requests();
    assert_eq!(reqs[1].body["max_tokens"], 64);
    assert_eq!(reqs[2].body["max_tokens"], 1000);
    assert!(reqs[2].body.get("top_p").is_none());
    assert!(!system_of(&reqs[2].body).contains("Instructions for this run"));
}

#[tokio::test]
async fn a_bare_prompt_holds_only_the_runs_instructions() {
    let h = Harness::new(Protocol::OpenAi, Options::default()).await;
    let agent = surface_agent(&h, Vec::new(), Arc::new(MemoryStore::new(0)), |s| {
        s.prompt_mode = PromptMode::Bare;
    });
    h.llm.push(Reply::text("ok"));
    h.llm.push(Reply::text("ok"));
    let with = RunOptions {
        instructions: Some("You are a terse assistant.".into()),
        ..RunOptions::default()
    };
    run_with(&agent, "a", "hi", with).await.0.expect("run");
    run_with(&agent, "b", "hi", RunOptions::default())
        .await
        .0
        .expect("run");
    let reqs = h.llm.requests();
    assert_eq!(system_of(&reqs[0].body), "You are a terse assistant.");
    // No instructions and no text tools: no system message at all.
    assert_eq!(
        reqs[1].body["messages"][0]["role"], "user",
        "{}",
        reqs[1].body
    );
}

#[tokio::test]
async fn a_shorter_run_timeout_ends_the_run_and_a_longer_one_is_ignored() {
    let h = Harness::new(
        Protocol::OpenAi,
        Options {
            timeout_seconds: 1,
            ..Options::default()
        },
    )
    .await;
    let agent = h.agent();
    h.llm
        .push(Reply::text("too late").delay(Duration::from_secs(30)));
    let short = RunOptions {
        timeout: Some(Duration::from_millis(100)),
        ..RunOptions::default()
    };
    let (res, _) = run_with(&agent, "a", "hi", short).await;
    assert!(
        matches!(res, Err(RunError::Timeout(d)) if d == Duration::from_millis(100)),
        "{res:?}"
    );
    h.llm
        .push(Reply::text("too late").delay(Duration::from_secs(30)));
    let long = RunOptions {
        timeout: Some(Duration::from_secs(3600)),
        ..RunOptions::default()
    };
    let (res, _) = run_with(&agent, "b", "hi", long).await;
    assert!(
        matches!(res, Err(RunError::Timeout(d)) if d == Duration::from_secs(1)),
        "the agent's own time-out still applies: {res:?}"
    );
}

#[tokio::test]
async fn a_context_budget_shortens_then_omits_older_results_and_refuses_what_cannot_fit() {
    let h = Harness::new(Protocol::OpenAi, Options::default()).await;
    // About 1,500 tokens a result: the newest alone stays under the budget, two do not.
    let big = format!("HEAD{}TAIL", "lorem ipsum ".repeat(500));
    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Backend {
        name: "fetch",
        reply: Ok(big.clone()),
    })];
    let budget = ContextBudget {
        tokens: 4_000,
        shorten_at: 0.3,
        omit_at: 0.35,
        shortened_chars: 200,
    };
    let agent = surface_agent(&h, tools, Arc::new(MemoryStore::new(0)), |s| {
        s.prompt_mode = PromptMode::Bare;
        s.context_budget = Some(budget);
        s.max_tokens = Some(100);
    });
    for i in 0..3 {
        h.llm.push(tool_call(&format!("c{i}"), &format!("doc{i}")));
    }
    h.llm.push(Reply::text("read them all"));
    let (res, events) = run_with(&agent, "s", "read three docs", RunOptions::default()).await;
    assert_eq!(res.expect("run").text, "read them all");

    let trims: Vec<(bool, u64, u64)> = events
        .all()
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::ContextTrimmed {
                omitted,
                tokens_before,
                tokens_after,
                ..
            } => Some((omitted, tokens_before, tokens_after)),
            _ => None,
        })
        .collect();
    assert!(trims.iter().any(|t| !t.0), "shortened: {trims:?}");
    assert!(trims.iter().any(|t| t.0), "omitted: {trims:?}");
    assert!(
        trims.iter().all(|t| t.2 < t.1),
        "each stage saves: {trims:?}"
    );

    // What the model saw last: the newest result whole, the oldest given way.
    let reqs = h.llm.requests();
    let last: Vec<String> = reqs[3].body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(last.len(), 3);
    assert_eq!(last[2], big, "the newest result is intact");
    assert!(last[0].contains("omitted"), "{}", last[0]);
    let requests_before = reqs.len();

    // A message that cannot fit even with nothing left to trim fails before sending.
    let (res, _) = run_with(
        &agent,
        "t",
        &"word ".repeat(4_000).repeat(2),
        RunOptions::default(),
    )
    .await;
    match res {
        Err(e @ RunError::ContextBudget { needed, budget }) => {
            assert_eq!(budget, 4_000);
            assert!(needed > budget, "{needed}");
            assert_eq!(e.kind(), "context_overflow");
        }
        other => panic!("expected a budget error, got {other:?}"),
    }
    assert_eq!(
        h.llm.requests().len(),
        requests_before,
        "nothing was sent upstream"
    );
}

#[tokio::test]
async fn an_unavailable_tool_ends_the_run_and_leaves_a_valid_transcript() {
    let h = Harness::new(Protocol::OpenAi, Options::default()).await;
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new(0));
    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Backend {
        name: "fetch",
        reply: Err("the gateway at 127.0.0.1:9 refused the connection".into()),
    })];
    let agent = surface_agent(&h, tools, store.clone(), |_| {});
    h.llm.push(tool_call("c1", "doc"));
    h.llm.push(Reply::text("never asked"));
    let (res, _) = run_with(&agent, "s", "fetch doc", RunOptions::default()).await;
    match res {
        Err(e @ RunError::ToolUnavailable { .. }) => {
            assert_eq!(e.kind(), "tool_unavailable");
            let shown = e.to_string();
            assert!(
                shown.contains("fetch") && shown.contains("refused"),
                "{shown}"
            );
        }
        other => panic!("expected tool_unavailable, got {other:?}"),
    }
    assert_eq!(h.llm.requests().len(), 1, "no model call after the failure");
    // The call has its (error) result: the next run on the session starts clean.
    let log = store.open("main", "s").await.expect("open");
    let ctx = log.context();
    let pending_calls = ctx
        .iter()
        .filter(|m| matches!(m, Message::Assistant(a) if a.content.iter().any(|b| matches!(b, ferroclaw_types::ContentBlock::ToolCall { .. }))))
        .count();
    let results = ctx
        .iter()
        .filter(|m| matches!(m, Message::ToolResult(r) if r.is_error))
        .count();
    assert_eq!((pending_calls, results), (1, 1), "{ctx:?}");
}

#[tokio::test]
async fn events_report_each_model_call_retry_and_text_tool_call() {
    let h = Harness::new(Protocol::OpenAi, Options::default()).await;
    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Backend {
        name: "fetch",
        reply: Ok("the document".into()),
    })];
    let agent = surface_agent(&h, tools, Arc::new(MemoryStore::new(0)), |s| {
        s.intent.mode = ferroclaw_config::settings::ToolMode::Intent;
    });
    h.llm.push(Reply::status(503, "upstream overloaded"));
    h.llm.push(Reply::text(
        "Action: fetch\nAction Input: {\"id\": \"doc-7\"}",
    ));
    h.llm.push(Reply::text("It says: the document."));
    let (res, events) = run_with(&agent, "s", "fetch doc-7", RunOptions::default()).await;
    assert_eq!(res.expect("run").text, "It says: the document.");
    let all = events.all();
    let retries: Vec<_> = all
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ModelRetry {
                attempt,
                delay_ms,
                status,
                ..
            } => Some((*attempt, *delay_ms, *status)),
            _ => None,
        })
        .collect();
    assert_eq!(
        retries,
        [(1, 5, Some(503))],
        "the exact schedule, the status"
    );
    let intents: Vec<_> = all
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolIntents {
                names, strategy, ..
            } => Some((names.clone(), strategy.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(intents.len(), 1, "{intents:?}");
    assert_eq!(intents[0].0, ["fetch"]);
    assert!(!intents[0].1.is_empty());
    let calls = all
        .iter()
        .filter(|e| matches!(e.kind, EventKind::ModelRequest { .. }))
        .count();
    let answers: Vec<u64> = all
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ModelResponse { output_chars, .. } => Some(*output_chars as u64),
            _ => None,
        })
        .collect();
    // Two model calls answered (the retried one counts once).
    assert_eq!(calls, 2);
    assert_eq!(answers.len(), 2);
    assert!(answers.iter().all(|c| *c > 0), "{answers:?}");
}

#[tokio::test]
async fn a_surface_runtime_over_a_memory_store_leaves_nothing_behind() {
    let h = Harness::new(Protocol::OpenAi, Options::default()).await;
    let store = Arc::new(MemoryStore::new(0));
    let agent = surface_agent(&h, Vec::new(), store.clone(), |s| s.id = "solo".into());
    let runtime = Runtime::with_agents(
        vec![agent],
        store.clone(),
        RuntimeOptions {
            scheduler: SchedulerConfig::default(),
            subagents: ferroclaw_runtime::session_tools::SubagentLimits {
                max_depth: 0,
                max_children: 0,
            },
            allow_missing_default: false,
        },
    );
    assert_eq!(runtime.default_agent_id(), "solo");
    // History seeded through the runtime is what the run reads.
    runtime
        .write_entries(
            "solo",
            "r1",
            vec![ferroclaw_types::EntryBody::Message {
                message: Message::user("My name is Ada."),
            }],
        )
        .await
        .expect("seed");
    h.llm.push(Reply::text("Hello Ada."));
    let Submitted::Run(handle) = runtime
        .submit(Submit {
            agent_id: "solo",
            session_key: "r1",
            user: None,
            message: "What is my name?",
            mode: QueueMode::Queue,
            origin: Origin::Executor,
            options: RunOptions::default(),
        })
        .expect("submit")
    else {
        panic!("a message, not a command");
    };
    let out = handle.finish(|_| {}).await.expect("run");
    assert_eq!(out.text, "Hello Ada.");
    let body = h.llm.requests()[0].body.to_string();
    assert!(body.contains("My name is Ada."), "{body}");
    assert_eq!(store.len(), 1);
    let (existed, _) = runtime.delete_session("solo", "r1").await.expect("delete");
    assert!(existed);
    assert!(store.is_empty());
}
