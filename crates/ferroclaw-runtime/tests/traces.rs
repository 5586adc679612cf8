//! The trace collector through the runtime's door: one trace per run with its spans and
//! token sums (parallel tool calls, a subagent with a trace of its own under its
//! parent), usage sums with the configured prices, and a storage that stops answering
//! never holding up a run.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ferroclaw_agent::RunOptions;
use ferroclaw_runtime::traces::TraceCollector;
use ferroclaw_runtime::{Origin, QueueMode, Runtime, RuntimeOptions, Submit, Submitted};
use ferroclaw_store::{
    SpanRecord, StoreError, TraceFilter, TracePage, TraceRecord, TraceStore, UsageGroup,
    UsageQuery, UsageRow,
};
use ferroclaw_testkit::{Protocol, Reply};
use serde_json::json;

use crate::common::{Harness, Options};

async fn submit(runtime: &Runtime, session: &str, message: &str) -> Result<String, String> {
    let Submitted::Run(handle) = runtime
        .submit(Submit {
            agent_id: "main",
            session_key: session,
            user: Some("alice"),
            message,
            mode: QueueMode::Queue,
            origin: Origin::Http,
            options: RunOptions::default(),
        })
        .expect("submit")
    else {
        panic!("a message, not a command");
    };
    let id = handle.id.clone();
    handle
        .finish(|_| {})
        .await
        .map(|_| id)
        .map_err(|e| format!("{e:?}"))
}

#[tokio::test]
async fn a_run_with_parallel_tools_and_a_subagent_is_one_trace_tree_with_its_sums() {
    let h = Harness::new(
        Protocol::OpenAi,
        Options {
            provider_extra: r#"models: [{ id: "model-a", cost: { input: 1.0, output: 2.0, cached: 0.5 } }],"#,
            ..Options::default()
        },
    )
    .await;
    let settings = h.loaded.settings();
    let runtime = Runtime::build(
        &settings,
        h.store.clone(),
        RuntimeOptions::from_settings(&settings),
    )
    .expect("runtime");
    h.llm.push(
        Reply::tool_calls(vec![
            ("c1".into(), "exec".into(), json!({"command": "echo one"})),
            ("c2".into(), "exec".into(), json!({"command": "exit 3"})),
            (
                "c3".into(),
                "sessions_spawn".into(),
                json!({"task": "count the files", "label": "counter", "mode": "run"}),
            ),
        ])
        .with_usage(100, 20)
        .with_cached_tokens(30),
    );
    h.llm.push(Reply::text("there are 42").with_usage(10, 5));
    h.llm.push(Reply::text("All done: 42.").with_usage(150, 10));
    let run_id = submit(&runtime, "s1", "count them, in parallel")
        .await
        .expect("run");
    runtime.flush_traces().await;

    let store = runtime.trace_store().expect("traces kept");
    let (trace, spans, children) = store.get(&run_id).await.unwrap().expect("the run's trace");
    assert_eq!(trace.status, "ok");
    assert_eq!(trace.user_id.as_deref(), Some("alice"));
    assert_eq!(trace.origin, "http");
    assert_eq!(trace.input, "count them, in parallel");
    assert_eq!(trace.output, "All done: 42.");
    assert_eq!((trace.llm_calls, trace.tool_calls), (2, 3));
    assert_eq!(
        (trace.input_tokens, trace.output_tokens, trace.cached_tokens),
        (220, 30, 30),
        "the parent's own calls only; input counts what the cache did not hold"
    );
    // (70 fresh + 30 cached at half + 20 out at 2) + (150 + 10 at 2), per million.
    assert!(
        (trace.cost_usd - 295e-6).abs() < 1e-12,
        "{}",
        trace.cost_usd
    );

    let root = spans
        .iter()
        .find(|s| s.kind == "agent")
        .expect("agent span");
    assert_eq!(
        (root.span_id.as_str(), root.parent_span.as_deref()),
        (run_id.as_str(), None)
    );
    for s in spans.iter().filter(|s| s.kind != "agent") {
        assert_eq!(s.parent_span.as_deref(), Some(run_id.as_str()), "{s:?}");
        assert!(s.ended_at.is_some_and(|e| e >= s.started_at), "{s:?}");
    }
    let llm: Vec<&SpanRecord> = spans.iter().filter(|s| s.kind == "llm").collect();
    assert_eq!(llm.len(), 2);
    assert_eq!(
        (
            llm[0].model.as_deref(),
            llm[0].input_tokens,
            llm[0].cached_tokens
        ),
        (Some("model-a"), 70, 30)
    );
    assert_eq!(llm[0].attrs["iteration"], 1);
    assert_eq!(llm[0].attrs["finishReason"], "toolUse");
    assert!(
        llm[0].attrs["timeToFirstTokenMs"].is_u64(),
        "{}",
        llm[0].attrs
    );
    assert_eq!(llm[1].attrs["finishReason"], "stop");
    let mut tools: Vec<(&str, &str)> = spans
        .iter()
        .filter(|s| s.kind == "tool")
        .map(|s| (s.name.as_str(), s.status.as_str()))
        .collect();
    tools.sort();
    assert_eq!(
        tools,
        [("exec", "error"), ("exec", "ok"), ("sessions_spawn", "ok")],
        "the failed command is an error span"
    );
    let failed = spans
        .iter()
        .find(|s| s.kind == "tool" && s.status == "error")
        .unwrap();
    assert!(
        failed.error.as_deref().unwrap_or_default().contains('3'),
        "{failed:?}"
    );
    assert!(failed.attrs["durationMs"].is_u64());

    // The subagent: a trace of its own, under the parent.
    assert_eq!(children.len(), 1, "{children:?}");
    let (child, child_spans, _) = store.get(&children[0]).await.unwrap().expect("child");
    assert_eq!(child.parent_id.as_deref(), Some(run_id.as_str()));
    assert_eq!(child.origin, "sessions_spawn");
    assert_eq!((child.input_tokens, child.output_tokens), (10, 5));
    assert_eq!(child_spans.iter().filter(|s| s.kind == "llm").count(), 1);

    // Usage: every call of the agent, the subagent's included.
    let by_agent = store
        .usage(UsageGroup::Agent, UsageQuery::default())
        .await
        .unwrap();
    assert_eq!(by_agent.len(), 1);
    assert_eq!(
        (
            by_agent[0].key.as_str(),
            by_agent[0].calls,
            by_agent[0].input_tokens
        ),
        ("main", 3, 230)
    );
    let by_model = store
        .usage(UsageGroup::Model, UsageQuery::default())
        .await
        .unwrap();
    assert_eq!(by_model[0].key, "scripted/model-a");
    let listed = store
        .list(&TraceFilter {
            user_id: Some("alice".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.traces.len(), 2, "parent and subagent run for alice");
    assert_eq!(runtime.trace_stats().expect("stats").dropped, 0);

    // Removing the session (as a surface removes a one-off session) keeps its traces;
    // a person deleting it (`forget_traces`, what `sessions.delete` adds) takes them too.
    let (existed, _) = runtime
        .delete_session("main", &trace.session_key)
        .await
        .expect("delete");
    assert!(existed);
    assert!(
        store.get(&run_id).await.unwrap().is_some(),
        "kept when only the session is removed"
    );
    runtime.forget_traces("main", &trace.session_key).await;
    assert!(
        store.get(&run_id).await.unwrap().is_none(),
        "the session's trace is gone"
    );
}

/// A storage whose writes never finish.
struct Stuck;

#[async_trait]
impl TraceStore for Stuck {
    async fn record(&self, _: Vec<(TraceRecord, Vec<SpanRecord>)>) -> Result<(), StoreError> {
        std::future::pending().await
    }
    async fn list(&self, _: &TraceFilter) -> Result<TracePage, StoreError> {
        std::future::pending().await
    }
    async fn get(
        &self,
        _: &str,
    ) -> Result<Option<(TraceRecord, Vec<SpanRecord>, Vec<String>)>, StoreError> {
        std::future::pending().await
    }
    async fn usage(&self, _: UsageGroup, _: UsageQuery<'_>) -> Result<Vec<UsageRow>, StoreError> {
        std::future::pending().await
    }
    async fn prune(&self, _: i64) -> Result<u64, StoreError> {
        std::future::pending().await
    }
    async fn forget_session(&self, _: &str, _: &str) -> Result<u64, StoreError> {
        std::future::pending().await
    }
    async fn abandon(&self, _: i64) -> Result<u64, StoreError> {
        std::future::pending().await
    }
}

#[tokio::test]
async fn a_storage_that_hangs_never_holds_up_a_run() {
    let h = Harness::new(Protocol::OpenAi, Options::default()).await;
    let runtime = Runtime::with_agents(
        vec![h.agent()],
        h.store.clone(),
        RuntimeOptions::from_settings(&h.loaded.settings()),
    );
    let mut tracing = h.loaded.settings().tracing;
    tracing.queue = 2;
    let collector = TraceCollector::start(Arc::new(Stuck), &tracing, Duration::from_secs(3600));
    runtime.add_observer(collector.clone());
    const RUNS: usize = 12;
    for i in 0..RUNS {
        h.llm.push(Reply::text(format!("answer {i}")));
    }
    let all = async {
        for i in 0..RUNS {
            submit(&runtime, &format!("s{i}"), "hello")
                .await
                .expect("run");
        }
    };
    tokio::time::timeout(Duration::from_secs(60), all)
        .await
        .expect("every run finished while the storage hung");
    let stats = collector.stats();
    // Two writes a run; the writer holds at most one batch and the queue two.
    assert!(stats.dropped >= (2 * RUNS - 4) as u64, "{stats:?}");
    assert_eq!(stats.written, 0);
}
