//! One writer per session, whoever starts the runs: for each pair of entry points, a run
//! is held in flight (its model reply is slow) while the other entry point targets the
//! same session. The proof of order is in what the model was sent, not in timing: the
//! second run's request must already carry the first run's answer (had the two
//! overlapped, the second would have been sent without it), and the transcript must read
//! as one conversation.

use std::sync::Arc;
use std::time::Duration;

use ferroclaw_runtime::{Origin, QueueMode, Runtime, RuntimeOptions, Submit, Submitted};
use ferroclaw_store::{FileSessionStore, SessionStore};
use ferroclaw_testkit::{Protocol, RecordedRequest, Reply, ScriptedLlm};
use serde_json::json;

use crate::common::request_shape;

/// Long enough that a second run racing the first would reach the model before the
/// first answered; the test never waits on it (it waits on the model's requests).
const SLOW: Duration = Duration::from_millis(1500);

struct Home {
    llm: ScriptedLlm,
    /// Agent `helper`'s model, so its runs never race `main`'s for scripted replies.
    helper_llm: ScriptedLlm,
    home: tempfile::TempDir,
}

impl Home {
    async fn new() -> Home {
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
        Home {
            llm,
            helper_llm,
            home,
        }
    }

    /// A runtime over this home with a store of its own: what each process (a gateway,
    /// a CLI) has.
    fn runtime(&self) -> Runtime {
        let loaded = ferroclaw_config::load(
            &ferroclaw_config::LoadOptions {
                home: Some(self.home.path().to_path_buf()),
                config_path: None,
            },
            ferroclaw_config::Env::from_pairs([
                ("FERROCLAW_SCRIPTED_API_KEY", "k"),
                ("FERROCLAW_SECOND_API_KEY", "k2"),
            ]),
        )
        .expect("config loads");
        let store: Arc<dyn SessionStore> = Arc::new(FileSessionStore::new(self.home.path()));
        let settings = loaded.settings();
        Runtime::build(&settings, store, RuntimeOptions::from_settings(&settings)).expect("runtime")
    }
}

fn submit(rt: &Runtime, key: &str, message: &str, origin: Origin) -> ferroclaw_runtime::RunHandle {
    submit_to(rt, "main", key, message, origin)
}

fn submit_to(
    rt: &Runtime,
    agent: &str,
    key: &str,
    message: &str,
    origin: Origin,
) -> ferroclaw_runtime::RunHandle {
    match rt
        .submit(Submit {
            agent_id: agent,
            session_key: key,
            user: None,
            message,
            mode: QueueMode::Queue,
            origin,
            options: Default::default(),
        })
        .expect("accepted")
    {
        Submitted::Run(h) => h,
        Submitted::Command(c) => panic!("not a run: {c}"),
    }
}

/// The request whose last user message is `text`.
fn request_for<'a>(reqs: &'a [RecordedRequest], text: &str) -> &'a RecordedRequest {
    reqs.iter()
        .find(|r| {
            request_shape(Protocol::OpenAi, &r.body)
                .iter()
                .rev()
                .find(|(role, _, _)| role == "user")
                .is_some_and(|(_, t, _)| t.contains(text))
        })
        .unwrap_or_else(|| panic!("no request for {text:?}"))
}

fn carries(req: &RecordedRequest, answer: &str) -> bool {
    request_shape(Protocol::OpenAi, &req.body)
        .iter()
        .any(|(role, text, _)| role == "assistant" && text.contains(answer))
}

/// The session's messages as (role, text), in order.
async fn transcript(rt: &Runtime, key: &str) -> Vec<(String, String)> {
    transcript_of(rt, "main", key).await
}

async fn transcript_of(rt: &Runtime, agent: &str, key: &str) -> Vec<(String, String)> {
    let log = rt.store().open(agent, key).await.expect("open");
    log.context()
        .iter()
        .map(|m| {
            let role = match m {
                ferroclaw_types::Message::User(_) => "user",
                ferroclaw_types::Message::Assistant(_) => "assistant",
                ferroclaw_types::Message::ToolResult(_) => "tool",
            };
            (role.to_string(), m.text())
        })
        .collect()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| ((*a).to_string(), (*b).to_string()))
        .collect()
}

#[tokio::test]
async fn a_surface_message_waits_for_a_sessions_send_run_on_the_same_session() {
    let h = Home::new().await;
    let rt = h.runtime();
    h.llm.push(Reply::text("ready"));
    submit(&rt, "target", "init", Origin::Cli)
        .outcome()
        .await
        .expect("init");

    // s1's turn asks `target` through sessions_send; target's reply is slow.
    h.llm.push(Reply::tool_call(
        "c1",
        "sessions_send",
        json!({"sessionKey": "target", "message": "from s1"}),
    ));
    h.llm.push(Reply::text("one").delay(SLOW));
    h.llm.push(Reply::text("done"));
    h.llm.push(Reply::text("done"));
    let s1 = submit(&rt, "s1", "ask target", Origin::WebSocket);
    h.llm.wait_for_requests(3).await; // init, s1, the sessions_send run on target
                                      // Now a surface message for the same session, while that run is in flight.
    let direct = submit(&rt, "target", "from surface", Origin::Http);
    s1.outcome().await.expect("s1");
    direct.outcome().await.expect("direct");

    let reqs = h.llm.requests();
    assert!(
        carries(request_for(&reqs, "from surface"), "one"),
        "the surface run started only after the sessions_send run answered"
    );
    assert_eq!(
        transcript(&rt, "target").await,
        pairs(&[
            ("user", "init"),
            ("assistant", "ready"),
            ("user", "from s1"),
            ("assistant", "one"),
            ("user", "from surface"),
            ("assistant", "done"),
        ])
    );
}

#[tokio::test]
async fn sessions_send_refuses_a_session_a_surface_run_holds() {
    let h = Home::new().await;
    let rt = h.runtime();
    h.llm.push(Reply::text("ready"));
    submit(&rt, "target", "init", Origin::Cli)
        .outcome()
        .await
        .expect("init");

    h.llm.push(Reply::text("slow answer").delay(SLOW));
    let held = submit(&rt, "target", "hold it", Origin::Http);
    h.llm.wait_for_requests(2).await;
    h.llm.push(Reply::tool_call(
        "c1",
        "sessions_send",
        json!({"sessionKey": "target", "message": "sneak in"}),
    ));
    h.llm.push(Reply::text("ok"));
    submit(&rt, "s1", "ask target", Origin::WebSocket)
        .outcome()
        .await
        .expect("s1");
    held.outcome().await.expect("held");

    let reqs = h.llm.requests();
    let results: Vec<String> = request_shape(Protocol::OpenAi, &reqs[3].body)
        .into_iter()
        .filter(|(role, _, _)| role == "tool")
        .map(|(_, t, _)| t)
        .collect();
    assert!(
        results
            .iter()
            .any(|r| r.contains("refused: session \"target\" has a run in progress")),
        "{results:?}"
    );
    assert!(
        !transcript(&rt, "target")
            .await
            .iter()
            .any(|(_, t)| t == "sneak in"),
        "the refused message never reached the session"
    );
}

#[tokio::test]
async fn a_surface_message_to_a_subagent_session_waits_for_the_subagent() {
    let h = Home::new().await;
    let rt = h.runtime();
    // s1 spawns a background subagent (agent `helper`) whose run is slow.
    h.llm.push(Reply::tool_call(
        "c1",
        "sessions_spawn",
        json!({"task": "research", "label": "a", "agentId": "helper", "mode": "session"}),
    ));
    h.llm.push(Reply::text("spawned"));
    h.helper_llm.push(Reply::text("sub answer").delay(SLOW));
    h.helper_llm.push(Reply::text("direct answer"));
    submit(&rt, "s1", "spawn one", Origin::Http)
        .outcome()
        .await
        .expect("s1");
    h.helper_llm.wait_for_requests(1).await; // the subagent's run is in flight
    let hub = rt.services().expect("built from settings").sessions.clone();
    let child = hub.subagents()[0].clone();
    assert_eq!(child.session_key, "s1::a");
    // A person writes straight into the subagent's session while it works.
    let direct = submit_to(&rt, "helper", "s1::a", "from surface", Origin::WebSocket);
    direct.outcome().await.expect("direct");
    tokio::time::timeout(Duration::from_secs(30), hub.wait_finished(&child.id))
        .await
        .expect("subagent ends");

    let reqs = h.helper_llm.requests();
    assert!(carries(request_for(&reqs, "from surface"), "sub answer"));
    let t = transcript_of(&rt, "helper", "s1::a").await;
    assert_eq!(
        t,
        pairs(&[
            ("user", "research"),
            ("assistant", "sub answer"),
            ("user", "from surface"),
            ("assistant", "direct answer"),
        ])
    );
}

#[tokio::test]
async fn two_processes_on_one_home_take_turns_on_a_session() {
    // Two runtimes with stores of their own over one home: a gateway and a CLI. Their
    // schedulers know nothing of each other; the store's session lease orders them.
    let h = Home::new().await;
    let gateway = h.runtime();
    let cli = h.runtime();
    h.llm.push(Reply::text("gateway answer").delay(SLOW));
    h.llm.push(Reply::text("cli answer"));
    let first = submit(&gateway, "shared", "from the gateway", Origin::WebSocket);
    h.llm.wait_for_requests(1).await;
    let second = submit(&cli, "shared", "from the cli", Origin::Cli);
    first.outcome().await.expect("gateway run");
    second.outcome().await.expect("cli run");

    let reqs = h.llm.requests();
    assert!(
        carries(request_for(&reqs, "from the cli"), "gateway answer"),
        "the CLI's run started only after the gateway's run had written its answer"
    );
    assert_eq!(
        transcript(&cli, "shared").await,
        pairs(&[
            ("user", "from the gateway"),
            ("assistant", "gateway answer"),
            ("user", "from the cli"),
            ("assistant", "cli answer"),
        ])
    );
}

#[tokio::test]
async fn an_injected_entry_lands_after_the_running_turn() {
    let h = Home::new().await;
    let rt = h.runtime();
    h.llm.push(Reply::text("answer").delay(SLOW));
    let run = submit(&rt, "s", "question", Origin::Http);
    h.llm.wait_for_requests(1).await;
    rt.write_entries(
        "main",
        "s",
        vec![ferroclaw_types::EntryBody::Message {
            message: ferroclaw_types::Message::user("note"),
        }],
    )
    .await
    .expect("write");
    run.outcome().await.expect("run");
    assert_eq!(
        transcript(&rt, "s").await,
        pairs(&[
            ("user", "question"),
            ("assistant", "answer"),
            ("user", "note")
        ])
    );
}

#[tokio::test]
async fn aborting_a_queued_message_keeps_it_out_of_the_session() {
    let h = Home::new().await;
    let rt = h.runtime();
    h.llm.push(Reply::text("answer").delay(SLOW));
    let run = submit(&rt, "s", "question", Origin::Http);
    h.llm.wait_for_requests(1).await;
    let queued = submit(&rt, "s", "never mind", Origin::Http);
    assert!(
        queued.abort(),
        "a queued message can be aborted by its handle"
    );
    let err = queued.outcome().await.expect_err("cancelled");
    assert!(err.to_string().contains("cancelled"), "{err}");
    run.outcome().await.expect("run");
    assert_eq!(
        transcript(&rt, "s").await,
        pairs(&[("user", "question"), ("assistant", "answer")])
    );
    assert_eq!(h.llm.requests().len(), 1);
}
