//! Exec approvals: a request is published, answered (approve / deny) or times out, and
//! allow-always persists to the allowlist file that a restart loads again.
//! Waiting is on the broker's event channel, never on sleeps; time-outs are short.

use std::sync::Arc;
use std::time::Duration;

use ferroclaw_tools::builtin::ExecTool;
use ferroclaw_tools::exec_guard::{
    ApprovalBroker, ApprovalDecision, ApprovalError, ApprovalEvent, ApprovalMode, ApprovalRequest,
    ExecAllowlist, ExecGuard, ExecMode, ExecPolicy,
};
use ferroclaw_tools::{Tool, ToolRegistry};
use serde_json::json;
use tokio::sync::broadcast;

fn env() -> Vec<(String, String)> {
    vec![(
        "PATH".into(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
    )]
}

fn broker(timeout: Duration) -> ApprovalBroker {
    ApprovalBroker::new(Arc::new(ExecAllowlist::in_memory()), timeout)
}

fn exec_with(
    approval: ApprovalMode,
    mode: ExecMode,
    allow: &[&str],
    broker: &ApprovalBroker,
) -> ExecTool {
    let policy = ExecPolicy {
        mode,
        approval,
        allowlist: allow.iter().map(|s| s.to_string()).collect(),
    };
    ExecTool::with_env(env()).with_guard(Arc::new(
        ExecGuard::new(policy).with_approvals(broker.clone()),
    ))
}

async fn next_request(rx: &mut broadcast::Receiver<ApprovalEvent>) -> ApprovalRequest {
    loop {
        match rx.recv().await.expect("event channel open") {
            ApprovalEvent::Requested(r) => return r,
            ApprovalEvent::Resolved { .. } => continue,
        }
    }
}

#[tokio::test]
async fn approved_command_runs() {
    let ws = tempfile::tempdir().unwrap();
    let b = broker(Duration::from_secs(600));
    let mut events = b.subscribe();
    let exec = exec_with(ApprovalMode::OnMiss, ExecMode::Deny, &["ls"], &b);
    let ctx = crate::common::ctx(ws.path());
    let task = tokio::spawn(async move {
        exec.execute(&ctx, json!({"command": "echo approved-ran"}))
            .await
    });
    let req = next_request(&mut events).await;
    assert_eq!(req.command, "echo approved-ran");
    assert_eq!(req.session_key, "test-session");
    assert_eq!(req.programs, vec!["echo".to_string()]);
    assert_eq!(
        ApprovalEvent::Requested(req.clone()).event_name(),
        "exec.approval.requested"
    );
    assert_eq!(b.list(), vec![req.clone()]);
    b.approve(&req.id, false).unwrap();
    let r = task.await.unwrap();
    assert_eq!(r.for_llm, "approved-ran\n\n[exit code: 0]");
    assert!(b.list().is_empty());
    // Approve-once does not touch the allowlist.
    assert!(b.allowlist().entries().is_empty());
    // The id is spent.
    assert_eq!(
        b.approve(&req.id, false),
        Err(ApprovalError::NotFound(req.id.clone()))
    );
}

#[tokio::test]
async fn unanswered_request_times_out_with_a_clear_error() {
    let ws = tempfile::tempdir().unwrap();
    let b = broker(Duration::from_millis(50));
    let mut events = b.subscribe();
    let exec = exec_with(ApprovalMode::Always, ExecMode::Deny, &[], &b);
    let r = exec
        .execute(
            &crate::common::ctx(ws.path()),
            json!({"command": "touch should-not-exist"}),
        )
        .await;
    assert!(r.is_error);
    assert!(r.for_llm.contains("approval_denied"), "{}", r.for_llm);
    assert!(
        r.for_llm
            .contains("no operator approved this command within 0.05 s"),
        "{}",
        r.for_llm
    );
    assert!(r.for_llm.contains("not run"), "{}", r.for_llm);
    assert!(!ws.path().join("should-not-exist").exists());
    assert!(b.list().is_empty());
    let req = next_request(&mut events).await;
    match events.recv().await.unwrap() {
        ApprovalEvent::Resolved { id, decision } => {
            assert_eq!(id, req.id);
            assert_eq!(decision, ApprovalDecision::TimedOut);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn denied_request_is_refused() {
    let ws = tempfile::tempdir().unwrap();
    let b = broker(Duration::from_secs(600));
    let mut events = b.subscribe();
    let exec = exec_with(ApprovalMode::Always, ExecMode::Deny, &[], &b);
    let ctx = crate::common::ctx(ws.path());
    let task =
        tokio::spawn(async move { exec.execute(&ctx, json!({"command": "touch nope"})).await });
    let req = next_request(&mut events).await;
    b.deny(&req.id).unwrap();
    let r = task.await.unwrap();
    assert!(
        r.is_error && r.for_llm.contains("an operator denied this command"),
        "{}",
        r.for_llm
    );
    assert!(!ws.path().join("nope").exists());
}

#[tokio::test]
async fn allow_always_is_persisted_and_reloaded() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let path = ExecAllowlist::path_in_home(home.path());
    let allowlist = Arc::new(ExecAllowlist::load(&path).unwrap());
    let b = ApprovalBroker::new(allowlist, Duration::from_secs(600));
    let mut events = b.subscribe();
    let exec = exec_with(ApprovalMode::OnMiss, ExecMode::Deny, &[], &b);
    let ctx = crate::common::ctx(ws.path());
    let task = tokio::spawn(async move {
        exec.execute(&ctx, json!({"command": "/bin/echo first | wc -l"}))
            .await
    });
    let req = next_request(&mut events).await;
    b.approve(&req.id, true).unwrap();
    let r = task.await.unwrap();
    assert!(!r.is_error, "{}", r.for_llm);
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(saved, json!({"version": 1, "entries": ["echo", "wc"]}));

    // A restart: a new allowlist loaded from the file, a broker that would time out at
    // once if it were asked. The allowlisted command runs without a question.
    let reloaded = Arc::new(ExecAllowlist::load(&path).unwrap());
    assert!(reloaded.contains("echo") && reloaded.contains("wc"));
    let b2 = ApprovalBroker::new(reloaded, Duration::from_millis(1));
    let exec2 = exec_with(ApprovalMode::OnMiss, ExecMode::Deny, &[], &b2);
    let r = exec2
        .execute(
            &crate::common::ctx(ws.path()),
            json!({"command": "echo again | wc -c"}),
        )
        .await;
    assert_eq!(r.for_llm, "6\n\n[exit code: 0]");
    // Anything else still asks (and here times out).
    let r = exec2
        .execute(
            &crate::common::ctx(ws.path()),
            json!({"command": "printf x"}),
        )
        .await;
    assert!(
        r.is_error && r.for_llm.contains("approval_denied"),
        "{}",
        r.for_llm
    );
}

#[tokio::test]
async fn deny_patterns_refuse_without_asking() {
    let ws = tempfile::tempdir().unwrap();
    let b = broker(Duration::from_secs(600));
    let mut events = b.subscribe();
    let exec = exec_with(ApprovalMode::Always, ExecMode::Deny, &["rm"], &b);
    let r = exec
        .execute(
            &crate::common::ctx(ws.path()),
            json!({"command": "rm -rf ~"}),
        )
        .await;
    assert!(
        r.is_error && r.for_llm.contains("destructive"),
        "{}",
        r.for_llm
    );
    assert!(b.list().is_empty());
    assert!(matches!(
        events.try_recv(),
        Err(broadcast::error::TryRecvError::Empty)
    ));
}

#[tokio::test]
async fn allowlist_mode_with_on_miss_asks_instead_of_refusing() {
    let ws = tempfile::tempdir().unwrap();
    let b = broker(Duration::from_secs(600));
    let mut events = b.subscribe();
    let exec = exec_with(ApprovalMode::OnMiss, ExecMode::Allowlist, &["echo"], &b);
    let ctx = crate::common::ctx(ws.path());
    // Listed: runs at once.
    let r = exec.execute(&ctx, json!({"command": "echo listed"})).await;
    assert_eq!(r.for_llm, "listed\n\n[exit code: 0]");
    let task = tokio::spawn(async move {
        exec.execute(&ctx, json!({"command": "printf unlisted"}))
            .await
    });
    let req = next_request(&mut events).await;
    assert_eq!(req.programs, vec!["printf".to_string()]);
    b.approve(&req.id, false).unwrap();
    assert_eq!(task.await.unwrap().for_llm, "unlisted\n[exit code: 0]");
}

#[tokio::test]
async fn approval_without_a_broker_is_refused() {
    let ws = tempfile::tempdir().unwrap();
    let exec = ExecTool::with_env(env()).with_guard(Arc::new(ExecGuard::new(ExecPolicy {
        approval: ApprovalMode::Always,
        ..Default::default()
    })));
    let r = exec
        .execute(
            &crate::common::ctx(ws.path()),
            json!({"command": "echo hi"}),
        )
        .await;
    assert!(
        r.is_error && r.for_llm.contains("no approver is configured"),
        "{}",
        r.for_llm
    );
}

#[tokio::test]
async fn aborted_run_withdraws_its_request() {
    let ws = tempfile::tempdir().unwrap();
    let b = broker(Duration::from_secs(600));
    let mut events = b.subscribe();
    let mut reg = ToolRegistry::new();
    reg.register(Arc::new(exec_with(
        ApprovalMode::Always,
        ExecMode::Deny,
        &[],
        &b,
    )));
    let ctx = crate::common::ctx(ws.path());
    let cancel = ctx.cancel.clone();
    let task = tokio::spawn(async move {
        reg.execute("exec", &ctx, json!({"command": "echo x"}))
            .await
    });
    let req = next_request(&mut events).await;
    cancel.cancel();
    let r = task.await.unwrap();
    assert!(r.is_error && r.for_llm.contains("aborted"), "{}", r.for_llm);
    assert!(b.list().is_empty());
    assert_eq!(
        b.approve(&req.id, false),
        Err(ApprovalError::NotFound(req.id))
    );
}

/// Through the agent loop: one exec call approved by an operator, one that times out.
#[tokio::test]
async fn agent_loop_approval_approved_and_timed_out() {
    use ferroclaw_agent::{Agent, AgentSettings, NullSink, RunRequest};
    use ferroclaw_providers::{OpenAiCompat, OpenAiCompatConfig, Provider, SchemaFlavor};
    use ferroclaw_store::{FileSessionStore, SessionStore};
    use ferroclaw_testkit::{Reply, ScriptedLlm};

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
    let store: Arc<dyn SessionStore> = Arc::new(FileSessionStore::new(home.path()));

    // Approved.
    let b = broker(Duration::from_secs(600));
    let mut events = b.subscribe();
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(exec_with(
        ApprovalMode::Always,
        ExecMode::Deny,
        &[],
        &b,
    )));
    let agent = Agent::new(
        AgentSettings::new("main", "scripted", "model-a", workspace.clone()),
        provider.clone(),
        Arc::new(tools),
        store.clone(),
    );
    llm.push(Reply::tool_call(
        "call_1",
        "exec",
        json!({"command": "echo operator-approved"}),
    ));
    llm.push(Reply::text("ok"));
    let run = tokio::spawn(async move {
        agent
            .run(
                RunRequest {
                    session_key: "agent:main:approve".into(),
                    message: "go".into(),
                    options: Default::default(),
                },
                Arc::new(NullSink),
                tokio_util::sync::CancellationToken::new(),
            )
            .await
    });
    let req = next_request(&mut events).await;
    assert_eq!(req.command, "echo operator-approved");
    b.approve(&req.id, false).unwrap();
    run.await.unwrap().expect("run succeeds");
    let reqs = llm.requests();
    let body = serde_json::to_string(&reqs[1].body).unwrap();
    assert!(
        body.contains("operator-approved\\n\\n[exit code: 0]"),
        "{body}"
    );

    // Timed out.
    let b = broker(Duration::from_millis(50));
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(exec_with(
        ApprovalMode::Always,
        ExecMode::Deny,
        &[],
        &b,
    )));
    let agent = Agent::new(
        AgentSettings::new("main", "scripted", "model-a", workspace.clone()),
        provider,
        Arc::new(tools),
        store,
    );
    llm.push(Reply::tool_call(
        "call_2",
        "exec",
        json!({"command": "touch never-created"}),
    ));
    llm.push(Reply::text("could not run it"));
    agent
        .run(
            RunRequest {
                session_key: "agent:main:timeout".into(),
                message: "go".into(),
                options: Default::default(),
            },
            Arc::new(NullSink),
            tokio_util::sync::CancellationToken::new(),
        )
        .await
        .expect("run succeeds");
    let reqs = llm.requests();
    let body = serde_json::to_string(&reqs[3].body).unwrap();
    assert!(
        body.contains("no operator approved this command within"),
        "{body}"
    );
    assert!(!workspace.join("never-created").exists());
}
