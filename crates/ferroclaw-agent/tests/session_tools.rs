//! Session tools and subagents through the agent loop with the scripted LLM.
//!
//! Agent `main` talks to one scripted LLM; agent `helper` to a second one, so a
//! background (`mode: "session"`) subagent of `helper` never races the parent for
//! scripted replies.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use ferroclaw_agent::bootstrap::{build_agent_with, SharedServices};
use ferroclaw_agent::session_tools::{SessionHub, SubagentLimits, SubagentStatus};
use ferroclaw_agent::Agent;
use ferroclaw_config::{Env, LoadOptions};
use ferroclaw_store::{FileSessionStore, SessionStore};
use ferroclaw_testkit::{Protocol, RecordedRequest, Reply, ScriptedLlm};
use serde_json::{json, Value};

struct Setup {
    llm: ScriptedLlm,
    helper_llm: ScriptedLlm,
    store: Arc<dyn SessionStore>,
    hub: Arc<SessionHub>,
    main: Agent,
    // Kept alive: the hub holds agents weakly.
    _helper: Agent,
    _home: tempfile::TempDir,
}

async fn setup(limits: SubagentLimits) -> Setup {
    let llm = ScriptedLlm::start().await.expect("llm");
    let helper_llm = ScriptedLlm::start().await.expect("llm");
    let home = tempfile::tempdir().expect("tempdir");
    let config = format!(
        r#"{{
  agents: {{
    defaults: {{ provider: "scripted", model: "model-a", max_iterations: 6, timeout_seconds: 60, stream: false }},
    list: [ {{ id: "helper", provider: "second" }} ],
  }},
  providers: {{
    scripted: {{ type: "openai_compat", base_url: "{}" }},
    second: {{ type: "openai_compat", base_url: "{}" }},
  }},
}}"#,
        llm.openai_base_url(),
        helper_llm.openai_base_url()
    );
    std::fs::write(home.path().join("config.json5"), config).expect("config");
    let env = Env::from_pairs([
        ("FERROCLAW_SCRIPTED_API_KEY", "k1"),
        ("FERROCLAW_SECOND_API_KEY", "k2"),
    ]);
    let loaded = ferroclaw_config::load(
        &LoadOptions {
            home: Some(home.path().to_path_buf()),
            config_path: None,
        },
        env,
    )
    .expect("config loads");
    let store: Arc<dyn SessionStore> = Arc::new(FileSessionStore::new(home.path()));
    let mut services = SharedServices::from_config(&loaded).expect("services");
    services.sessions = SessionHub::new(limits);
    let main = build_agent_with(&loaded, "main", store.clone(), &services).expect("main");
    let helper = build_agent_with(&loaded, "helper", store.clone(), &services).expect("helper");
    Setup {
        llm,
        helper_llm,
        store,
        hub: services.sessions.clone(),
        main,
        _helper: helper,
        _home: home,
    }
}

fn system_of(req: &RecordedRequest) -> String {
    req.body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn offers(req: &RecordedRequest, tool: &str) -> bool {
    req.body["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["function"]["name"] == tool))
}

/// Texts of the tool results in a request, in order.
fn tool_results(req: &RecordedRequest) -> Vec<String> {
    request_shape(Protocol::OpenAi, &req.body)
        .into_iter()
        .filter(|(role, _, _)| role == "tool")
        .map(|(_, text, _)| text)
        .collect()
}

fn user_texts(req: &RecordedRequest) -> Vec<String> {
    request_shape(Protocol::OpenAi, &req.body)
        .into_iter()
        .filter(|(role, _, _)| role == "user")
        .map(|(_, text, _)| text)
        .collect()
}

async fn session_texts(store: &Arc<dyn SessionStore>, agent: &str, key: &str) -> Vec<String> {
    let log = store.open(agent, key).await.expect("open");
    log.context().iter().map(|m| m.text()).collect()
}

fn call(id: &str, name: &str, args: Value) -> (String, String, Value) {
    (id.to_string(), name.to_string(), args)
}

#[tokio::test]
async fn list_history_and_status_after_a_prior_run() {
    let s = setup(SubagentLimits::default()).await;
    s.llm.push(Reply::text("first answer"));
    let (res, _) = run(&s.main, "s1", "hello there").await;
    res.expect("first run");

    s.llm.push(Reply::tool_calls(vec![
        call("c1", "sessions_list", json!({})),
        call("c2", "sessions_history", json!({"sessionKey": "s1"})),
        call("c3", "session_status", json!({})),
        call("c4", "sessions_history", json!({"sessionKey": "nope"})),
    ]));
    s.llm.push(Reply::text("done"));
    let (res, _) = run(&s.main, "s2", "what do you know?").await;
    assert_eq!(res.expect("second run").text, "done");

    let reqs = s.llm.requests();
    let results = tool_results(&reqs[2]);
    assert_eq!(results.len(), 4, "{results:?}");
    let list: Value = serde_json::from_str(&results[0]).expect("list is JSON");
    let keys: Vec<&str> = list["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .filter_map(|s| s["key"].as_str())
        .collect();
    assert!(keys.contains(&"s1"), "{keys:?}");
    let s1 = list["sessions"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["key"] == "s1"))
        .expect("s1 listed");
    assert_eq!(s1["model"], "model-a");

    let history: Value = serde_json::from_str(&results[1]).expect("history is JSON");
    assert_eq!(
        history["messages"],
        json!([
            {"role": "user", "text": "hello there"},
            {"role": "assistant", "text": "first answer"},
        ])
    );
    let status: Value = serde_json::from_str(&results[2]).expect("status is JSON");
    assert_eq!(status["sessionKey"], "s2");
    assert_eq!(status["subagentDepth"], 0);
    assert!(results[3].contains("no session \"nope\""), "{}", results[3]);
}

#[tokio::test]
async fn sessions_send_runs_the_other_session_and_refuses_its_own() {
    let s = setup(SubagentLimits::default()).await;
    s.llm.push(Reply::text("ready"));
    run(&s.main, "other", "get ready")
        .await
        .0
        .expect("prior run");

    s.llm.push(Reply::tool_call(
        "c1",
        "sessions_send",
        json!({"sessionKey": "other", "message": "ping", "timeoutSeconds": 30}),
    ));
    s.llm.push(Reply::text("pong from other"));
    s.llm.push(Reply::tool_call(
        "c2",
        "sessions_send",
        json!({"sessionKey": "s1", "message": "loop"}),
    ));
    s.llm.push(Reply::text("relayed"));
    let (res, _) = run(&s.main, "s1", "ask the other session").await;
    assert_eq!(res.expect("run").text, "relayed");

    let reqs = s.llm.requests();
    // prior run, parent call 1, inner run on `other`, parent call 2, parent call 3.
    assert_eq!(reqs.len(), 5);
    assert_eq!(user_texts(&reqs[2]), vec!["get ready", "ping"]);
    let results = tool_results(&reqs[3]);
    assert!(results[0].contains("pong from other"), "{results:?}");
    let results = tool_results(&reqs[4]);
    assert!(
        results[1].contains("cannot send to the current session"),
        "{results:?}"
    );
    let other = session_texts(&s.store, "main", "other").await;
    assert_eq!(other, vec!["get ready", "ready", "ping", "pong from other"]);
}

#[tokio::test]
async fn spawn_run_mode_waits_for_the_subagent() {
    let s = setup(SubagentLimits::default()).await;
    // One LLM serves parent and subagent: parent → subagent → parent.
    s.llm.push(Reply::tool_call(
        "c1",
        "sessions_spawn",
        json!({"task": "count the files", "label": "counter", "mode": "run"}),
    ));
    s.llm.push(Reply::text("there are 42"));
    s.llm.push(Reply::text("The subagent says 42."));
    let (res, _) = run(&s.main, "s1", "delegate this").await;
    assert_eq!(res.expect("run").text, "The subagent says 42.");

    let reqs = s.llm.requests();
    assert_eq!(reqs.len(), 3);
    assert!(system_of(&reqs[0]).contains("## Safety"));
    assert!(offers(&reqs[0], "sessions_spawn"));
    // The subagent: minimal prompt, its own task, no spawning at depth 1 (the maximum).
    assert!(!system_of(&reqs[1]).contains("## Safety"));
    assert!(!offers(&reqs[1], "sessions_spawn"));
    assert!(!offers(&reqs[1], "sessions_send"));
    assert!(offers(&reqs[1], "read"));
    assert_eq!(user_texts(&reqs[1]), vec!["count the files"]);
    let results = tool_results(&reqs[2]);
    assert!(results[0].contains("there are 42"), "{results:?}");

    let sub = session_texts(&s.store, "main", "s1::counter").await;
    assert_eq!(sub, vec!["count the files", "there are 42"]);
    let info = s.hub.subagents();
    assert_eq!(info.len(), 1);
    assert_eq!(info[0].status, SubagentStatus::Done);
}

#[tokio::test]
async fn a_subagent_at_the_maximum_depth_cannot_spawn() {
    let s = setup(SubagentLimits::default()).await;
    s.llm.push(Reply::tool_call(
        "c1",
        "sessions_spawn",
        json!({"task": "go deeper", "mode": "run"}),
    ));
    s.llm.push(Reply::tool_call(
        "c2",
        "sessions_spawn",
        json!({"task": "deeper still", "mode": "run"}),
    ));
    s.llm.push(Reply::text("could not delegate"));
    s.llm.push(Reply::text("ok"));
    let (res, _) = run(&s.main, "s1", "delegate").await;
    assert_eq!(res.expect("run").text, "ok");

    let reqs = s.llm.requests();
    assert_eq!(reqs.len(), 4, "no third-level run was started");
    let refusal = &tool_results(&reqs[2])[0];
    assert!(refusal.contains("depth 1"), "{refusal}");
    assert!(tool_results(&reqs[3])[0].contains("could not delegate"));
}

#[tokio::test]
async fn spawn_session_mode_announces_the_result_to_the_parent() {
    let s = setup(SubagentLimits::default()).await;
    s.llm.push(Reply::tool_call(
        "c1",
        "sessions_spawn",
        json!({"task": "research X", "label": "bg", "agentId": "helper", "mode": "session"}),
    ));
    s.llm.push(Reply::text("started it"));
    s.helper_llm.push(Reply::text("X is fine"));
    let (res, _) = run(&s.main, "s1", "look into X").await;
    assert_eq!(res.expect("run").text, "started it");
    let results = tool_results(&s.llm.requests()[1]);
    assert!(results[0].contains("Subagent bg started"), "{results:?}");

    let id = s.hub.subagents()[0].id.clone();
    tokio::time::timeout(Duration::from_secs(30), s.hub.wait_finished(&id))
        .await
        .expect("subagent finishes");
    let announcement = "[Subagent bg finished]\nX is fine";
    // The announcement is written after the status changes: poll the transcript, bounded.
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if session_texts(&s.store, "main", "s1")
                .await
                .iter()
                .any(|t| t == announcement)
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(found.is_ok(), "announcement never reached the parent");
    let helper_req = &s.helper_llm.requests()[0];
    assert!(!system_of(helper_req).contains("## Safety"));
    assert_eq!(user_texts(helper_req), vec!["research X"]);
    assert_eq!(
        session_texts(&s.store, "helper", "s1::bg").await,
        vec!["research X", "X is fine"]
    );

    s.llm.push(Reply::text("X is fine, it turns out"));
    let (res, _) = run(&s.main, "s1", "so?").await;
    res.expect("next turn");
    let reqs = s.llm.requests();
    let users = user_texts(&reqs[2]);
    assert!(users.contains(&announcement.to_string()), "{users:?}");
}

#[tokio::test]
async fn children_limit_refuses_and_cancel_stops_a_running_subagent() {
    let s = setup(SubagentLimits {
        max_children: 1,
        ..SubagentLimits::default()
    })
    .await;
    // The helper's answer never completes: the subagent stays running until cancelled.
    s.helper_llm.push(Reply::text("thinking").hang_after(1));
    s.llm.push(Reply::tool_call(
        "c1",
        "sessions_spawn",
        json!({"task": "slow job", "label": "a", "agentId": "helper", "mode": "session"}),
    ));
    s.llm.push(Reply::tool_call(
        "c2",
        "sessions_spawn",
        json!({"task": "another", "label": "b", "agentId": "helper", "mode": "session"}),
    ));
    s.llm.push(Reply::tool_call(
        "c3",
        "subagents",
        json!({"action": "cancel", "id": "a"}),
    ));
    s.llm.push(Reply::tool_call(
        "c4",
        "subagents",
        json!({"action": "list"}),
    ));
    s.llm.push(Reply::text("cancelled it"));
    let (res, _) = run(&s.main, "s1", "start two").await;
    assert_eq!(res.expect("run").text, "cancelled it");

    let reqs = s.llm.requests();
    let refusal = &tool_results(&reqs[2])[1];
    assert!(
        refusal.contains("already has 1 subagents running"),
        "{refusal}"
    );
    assert!(tool_results(&reqs[3])[2].contains("cancelled"));
    let listed: Value = serde_json::from_str(&tool_results(&reqs[4])[3]).expect("list JSON");
    assert_eq!(listed["subagents"][0]["label"], "a");

    let id = s.hub.subagents()[0].id.clone();
    tokio::time::timeout(Duration::from_secs(30), s.hub.wait_finished(&id))
        .await
        .expect("cancelled subagent ends");
    assert_eq!(s.hub.subagents()[0].status, SubagentStatus::Cancelled);
    assert_eq!(
        s.hub.subagents().len(),
        1,
        "the refused spawn left no record"
    );
    // A cancelled subagent is not announced.
    let parent = session_texts(&s.store, "main", "s1").await;
    assert!(
        !parent.iter().any(|t| t.contains("[Subagent")),
        "{parent:?}"
    );
}

/// Polls the parent transcript (bounded) until it holds `text`.
async fn wait_for_message(store: &Arc<dyn SessionStore>, agent: &str, key: &str, text: &str) {
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        while !session_texts(store, agent, key)
            .await
            .iter()
            .any(|t| t == text)
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(found.is_ok(), "{text:?} never reached {agent}/{key}");
}

#[tokio::test]
async fn steer_sends_a_follow_up_to_a_finished_session_subagent() {
    let s = setup(SubagentLimits::default()).await;
    s.llm.push(Reply::tool_call(
        "c1",
        "sessions_spawn",
        json!({"task": "draft it", "label": "writer", "agentId": "helper", "mode": "session"}),
    ));
    s.llm.push(Reply::text("started"));
    s.helper_llm.push(Reply::text("draft v1"));
    run(&s.main, "s1", "write").await.0.expect("run");
    wait_for_message(
        &s.store,
        "main",
        "s1",
        "[Subagent writer finished]\ndraft v1",
    )
    .await;

    s.llm.push(Reply::tool_call(
        "c2",
        "subagents",
        json!({"action": "steer", "id": "writer", "message": "shorter please"}),
    ));
    s.llm.push(Reply::text("asked for a shorter one"));
    s.helper_llm.push(Reply::text("draft v2"));
    run(&s.main, "s1", "make it shorter").await.0.expect("run");
    wait_for_message(
        &s.store,
        "main",
        "s1",
        "[Subagent writer finished]\ndraft v2",
    )
    .await;

    // The follow-up continued the subagent's own session.
    assert_eq!(
        session_texts(&s.store, "helper", "s1::writer").await,
        vec!["draft it", "draft v1", "shorter please", "draft v2"]
    );
    // The request carries the earlier turn's tool result too; the steer result is last.
    let results = tool_results(&s.llm.requests()[3]);
    assert!(
        results
            .last()
            .is_some_and(|r| r.contains("working on the follow-up")),
        "{results:?}"
    );
}

#[tokio::test]
async fn a_full_subagent_lane_refuses_another_spawn() {
    let s = setup(SubagentLimits {
        max_concurrent: 1,
        ..SubagentLimits::default()
    })
    .await;
    s.helper_llm.push(Reply::text("busy").hang_after(1));
    s.llm.push(Reply::tool_call(
        "c1",
        "sessions_spawn",
        json!({"task": "hold the lane", "label": "a", "agentId": "helper", "mode": "session"}),
    ));
    s.llm.push(Reply::tool_call(
        "c2",
        "sessions_spawn",
        json!({"task": "one more", "label": "b", "mode": "run"}),
    ));
    s.llm.push(Reply::tool_call(
        "c3",
        "subagents",
        json!({"action": "cancel", "id": "a"}),
    ));
    s.llm.push(Reply::text("ok"));
    run(&s.main, "s1", "go").await.0.expect("run");

    let reqs = s.llm.requests();
    assert_eq!(
        reqs.len(),
        4,
        "the refused run-mode subagent never called the LLM"
    );
    let refusal = &tool_results(&reqs[2])[1];
    assert!(refusal.contains("subagent lane is full"), "{refusal}");
    let id = s.hub.subagents()[0].id.clone();
    tokio::time::timeout(Duration::from_secs(30), s.hub.wait_finished(&id))
        .await
        .expect("cancelled subagent ends");
}
