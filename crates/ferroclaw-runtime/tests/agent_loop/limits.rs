//! Caps on one model reply and on one turn's tool calls, as an attacker would push them:
//! a 200 MB reply, 2,000 tool calls in one turn, many runs forking at once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use ferroclaw_agent::{Agent, RunError, RunRequest, ToolSlots};
use ferroclaw_providers::{ErrorKind, RetryPolicy};
use ferroclaw_runtime::bootstrap;
use ferroclaw_testkit::{Protocol, Reply};
use ferroclaw_tools::{Tool, ToolContext, ToolRegistry, ToolResult};
use ferroclaw_types::EventKind;
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::common::*;

#[tokio::test]
async fn a_200_mb_reply_is_refused_and_the_session_goes_on() {
    // Large enough that "reading stopped long before the end" holds with a wide margin
    // even when the client is slow to close (up to ~25 MB in flight on a loaded machine).
    const PIECE: usize = 1024;
    const TIMES: usize = 200 * 1024;
    let piece = "w".repeat(PIECE);
    for protocol in PROTOCOLS {
        for stream in [true, false] {
            let what = format!("{protocol:?} stream={stream}");
            let h = Harness::new(
                protocol,
                Options {
                    stream,
                    ..Options::default()
                },
            )
            .await;
            h.llm.push(Reply::repeated_text(piece.clone(), TIMES));
            h.llm.push(Reply::text("A short answer."));
            let agent = h.agent();
            assert_eq!(agent.settings().max_reply_bytes, 1 << 20, "the default cap");

            let (res, events) = run(&agent, "s1", "write me everything").await;
            let err = res.expect_err(&what);
            let RunError::Provider(pe) = &err else {
                panic!("{what}: {err:?}")
            };
            assert_eq!(pe.kind, ErrorKind::ReplyTooLarge, "{what}: {err}");
            assert_eq!(err.kind(), "reply_too_large");
            let reason = "the model's reply exceeded 1048576 bytes; it was discarded";
            assert!(err.to_string().contains(reason), "{what}: {err}");
            let reported = events.all().iter().any(|e| {
                matches!(&e.kind, EventKind::LifecycleError { message } if message.contains(reason))
            });
            assert!(reported, "{what}: the error event names the cap");
            // Neither retried nor sent to a fallback: the next reply is still queued.
            assert_eq!(h.llm.requests().len(), 1, "{what}");
            assert_eq!(h.llm.pending(), 1, "{what}");
            // Reading stopped long before the end of the 200 MiB.
            let sent = h.llm.repeated_bytes_sent();
            assert!(
                sent < (PIECE * TIMES / 4) as u64,
                "{what}: {sent} bytes sent"
            );

            // Only the user's message was written: no line holds any of the reply.
            let meta = h
                .store
                .get("main", "s1")
                .await
                .expect("get")
                .expect("session");
            let path = h.transcript_path(&meta.session_id);
            let size = std::fs::metadata(&path).expect("transcript").len();
            assert!(size < 8 * 1024, "{what}: transcript is {size} bytes");
            let lines = transcript_lines(&path);
            assert_transcript_format(&lines);
            let roles: Vec<_> = lines[1..]
                .iter()
                .map(|l| l["message"]["role"].clone())
                .collect();
            assert_eq!(roles, [json!("user")], "{what}");

            // The session is valid for the next turn, from a restarted process too.
            let (res, _) = run(&h.restarted_agent(), "s1", "shorter please").await;
            assert_eq!(res.expect("next turn").text, "A short answer.", "{what}");
            let shape = request_shape(protocol, &h.llm.requests()[1].body);
            let users: Vec<&str> = shape
                .iter()
                .filter(|m| m.0 == "user")
                .map(|m| m.1.as_str())
                .collect();
            assert!(
                users.concat().contains("write me everything")
                    && users.concat().contains("shorter please"),
                "{what}: {shape:?}"
            );
        }
    }
}

/// Counts how many executions are inside it at once; all of them wait until the test
/// opens the gate, so the cap is reached and held before anything finishes.
struct GateTool {
    active: watch::Sender<usize>,
    open: watch::Sender<bool>,
    max_active: AtomicUsize,
    runs: AtomicUsize,
}

impl GateTool {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            active: watch::channel(0).0,
            open: watch::channel(false).0,
            max_active: AtomicUsize::new(0),
            runs: AtomicUsize::new(0),
        })
    }

    /// Waits until `n` executions are inside at once, then lets everyone through.
    async fn open_when_active(&self, n: usize) {
        let mut rx = self.active.subscribe();
        rx.wait_for(|a| *a >= n).await.expect("gate alive");
        self.open.send_replace(true);
    }
}

#[async_trait]
impl Tool for GateTool {
    fn name(&self) -> &str {
        "gate"
    }
    fn description(&self) -> &str {
        "Waits at a gate"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }
    async fn execute(&self, ctx: &ToolContext, _args: Value) -> ToolResult {
        self.runs.fetch_add(1, Ordering::SeqCst);
        let mut now = 0;
        self.active.send_modify(|a| {
            *a += 1;
            now = *a;
        });
        self.max_active.fetch_max(now, Ordering::SeqCst);
        let mut open = self.open.subscribe();
        tokio::select! {
            _ = open.wait_for(|o| *o) => {}
            _ = ctx.cancel.cancelled() => {}
        }
        self.active.send_modify(|a| *a -= 1);
        ToolResult::ok("passed")
    }
}

/// The configured agent, with only the gate tool and optionally shared slots.
fn gated_agent(h: &Harness, gate: &Arc<GateTool>, slots: Option<ToolSlots>) -> Agent {
    let resolved = h.main_settings();
    std::fs::create_dir_all(&resolved.workspace).expect("workspace");
    let slots = slots
        .unwrap_or_else(|| ToolSlots::new(h.loaded.settings().shared.max_concurrent_tools_total));
    let settings = bootstrap::settings_for(&resolved, slots);
    let provider =
        bootstrap::chain_for(&resolved.providers, RetryPolicy::default()).expect("provider");
    let mut tools = ToolRegistry::new();
    tools.register(gate.clone());
    Agent::new(settings, provider, Arc::new(tools), h.store.clone())
}

fn gate_calls(prefix: &str, n: usize) -> Reply {
    Reply::tool_calls(
        (0..n)
            .map(|i| (format!("{prefix}{i}"), "gate".to_string(), json!({})))
            .collect(),
    )
}

#[tokio::test]
async fn two_thousand_tool_calls_run_at_most_the_cap_and_all_are_answered() {
    for protocol in PROTOCOLS {
        let h = Harness::new(protocol, Options::default()).await;
        let gate = GateTool::new();
        let agent = gated_agent(&h, &gate, None);
        assert_eq!(agent.settings().max_tool_calls_per_turn, 32);
        assert_eq!(agent.settings().max_concurrent_tools, 8);
        h.llm.push(gate_calls("call_", 2000));
        h.llm.push(Reply::text("Done."));

        let ((res, _), _) = tokio::join!(run(&agent, "s1", "go wild"), gate.open_when_active(8));
        let out = res.unwrap_or_else(|e| panic!("{protocol:?}: {e}"));
        assert_eq!(out.text, "Done.");
        assert_eq!(gate.runs.load(Ordering::SeqCst), 32, "{protocol:?}");
        assert_eq!(gate.max_active.load(Ordering::SeqCst), 8, "{protocol:?}");

        // The next request pairs every call with exactly one result, in call order.
        let reqs = h.llm.requests();
        assert_eq!(reqs.len(), 2);
        let shape = request_shape(protocol, &reqs[1].body);
        let calls: Vec<String> = shape
            .iter()
            .filter(|m| m.0 == "assistant")
            .flat_map(|m| m.2.clone())
            .collect();
        let results: Vec<&(String, String, Vec<String>)> =
            shape.iter().filter(|m| m.0 == "tool").collect();
        let expected: Vec<String> = (0..2000).map(|i| format!("call_{i}")).collect();
        assert_eq!(calls, expected, "{protocol:?}");
        let result_ids: Vec<String> = results.iter().flat_map(|m| m.2.clone()).collect();
        assert_eq!(result_ids, expected, "{protocol:?}");
        for (i, r) in results.iter().enumerate() {
            if i < 32 {
                assert_eq!(r.1, "passed", "{protocol:?} call {i}");
            } else {
                assert_eq!(
                    r.1, "refused: more than 32 tool calls in one turn",
                    "{protocol:?} call {i}"
                );
            }
        }

        // The transcript on disk holds the same pairing and loads valid.
        let meta = h
            .store
            .get("main", "s1")
            .await
            .expect("get")
            .expect("session");
        let lines = transcript_lines(&h.transcript_path(&meta.session_id));
        assert_transcript_format(&lines);
        let stored_results = lines
            .iter()
            .filter(|l| l["message"]["role"] == "toolResult")
            .count();
        assert_eq!(stored_results, 2000, "{protocol:?}");
    }
}

#[tokio::test]
async fn configured_caps_apply_per_turn_and_per_run() {
    let h = Harness::new(
        Protocol::OpenAi,
        Options {
            defaults_extra: "limits: { maxToolCallsPerTurn: 5, max_concurrent_tools: 3 },",
            ..Options::default()
        },
    )
    .await;
    let gate = GateTool::new();
    let agent = gated_agent(&h, &gate, None);
    h.llm.push(gate_calls("c", 7));
    h.llm.push(Reply::text("ok"));
    let ((res, _), _) = tokio::join!(run(&agent, "s1", "go"), gate.open_when_active(3));
    assert_eq!(res.expect("run").text, "ok");
    assert_eq!(gate.runs.load(Ordering::SeqCst), 5);
    assert_eq!(gate.max_active.load(Ordering::SeqCst), 3);
    let shape = request_shape(Protocol::OpenAi, &h.llm.requests()[1].body);
    let refused = shape
        .iter()
        .filter(|m| m.1 == "refused: more than 5 tool calls in one turn")
        .count();
    assert_eq!(refused, 2);
}

#[tokio::test]
async fn the_process_wide_cap_holds_across_two_concurrent_runs() {
    let h = Harness::new(
        Protocol::OpenAi,
        Options {
            defaults_extra: "limits: { max_concurrent_tools: 2 },",
            ..Options::default()
        },
    )
    .await;
    let gate = GateTool::new();
    let slots = ToolSlots::new(3);
    let a = gated_agent(&h, &gate, Some(slots.clone()));
    let b = gated_agent(&h, &gate, Some(slots.clone()));
    // Each run alone may only run 2 at once: reaching 3 needs both runs in the gate,
    // and the fourth call must wait for the shared slots.
    h.llm.push(gate_calls("a", 2));
    h.llm.push(gate_calls("b", 2));
    h.llm.push(Reply::text("first done"));
    h.llm.push(Reply::text("second done"));
    let ((ra, _), (rb, _), _) = tokio::join!(
        run(&a, "sa", "go"),
        run(&b, "sb", "go"),
        gate.open_when_active(3)
    );
    let mut texts = vec![ra.expect("run a").text, rb.expect("run b").text];
    texts.sort();
    assert_eq!(texts, ["first done", "second done"]);
    assert_eq!(gate.runs.load(Ordering::SeqCst), 4);
    assert_eq!(gate.max_active.load(Ordering::SeqCst), 3);
    assert_eq!(slots.in_use(), 0, "every slot is given back");
}

#[tokio::test]
async fn an_abort_while_waiting_for_a_slot_still_answers_every_call() {
    let h = Harness::new(
        Protocol::OpenAi,
        Options {
            defaults_extra: "limits: { max_concurrent_tools: 1 },",
            ..Options::default()
        },
    )
    .await;
    let gate = GateTool::new();
    let agent = gated_agent(&h, &gate, None);
    h.llm.push(gate_calls("c", 3));
    let cancel = CancellationToken::new();
    let events = Collector::new();
    let abort = async {
        let mut rx = gate.active.subscribe();
        rx.wait_for(|a| *a >= 1).await.expect("gate alive");
        cancel.cancel();
    };
    let (res, _) = tokio::join!(
        agent.run(
            RunRequest {
                session_key: "s1".into(),
                message: "go".into(),
                options: Default::default(),
            },
            events.clone(),
            cancel.clone()
        ),
        abort
    );
    assert!(matches!(res, Err(RunError::Aborted)), "{res:?}");
    assert_eq!(
        gate.runs.load(Ordering::SeqCst),
        1,
        "the waiting calls never ran"
    );
    let meta = h
        .store
        .get("main", "s1")
        .await
        .expect("get")
        .expect("session");
    let lines = transcript_lines(&h.transcript_path(&meta.session_id));
    assert_transcript_format(&lines);
    let results: Vec<String> = lines
        .iter()
        .filter(|l| l["message"]["role"] == "toolResult")
        .map(|l| {
            l["message"]["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(results.len(), 3, "{results:?}");
    assert_eq!(results[1], "not run: the run ended before the tool started");
    assert_eq!(results[2], "not run: the run ended before the tool started");
}

/// The values that used to be hard-coded now come from the config: the gateway's
/// `max_message_chars`, `limits.tool_result_max_chars` and `limits.default_max_tokens`.
#[tokio::test]
async fn message_tool_result_and_max_tokens_caps_come_from_the_config() {
    let h = Harness::new(
        Protocol::Anthropic,
        Options {
            defaults_extra: "limits: { tool_result_max_chars: 3000, default_max_tokens: 1234 },",
            config_extra: "gateway: { max_message_chars: 40 },",
            ..Options::default()
        },
    )
    .await;
    let agent = h.agent();
    assert_eq!(agent.settings().max_message_chars, 40);
    assert_eq!(agent.settings().tool_result_max_chars, 3000);
    std::fs::write(
        agent.settings().workspace.join("big.txt"),
        "q".repeat(20_000),
    )
    .expect("write");
    h.llm.push(Reply::tool_call(
        "c1",
        "exec",
        json!({"command": "cat big.txt"}),
    ));
    h.llm.push(Reply::text("read it"));
    let (res, _) = run(&agent, "s1", &"m".repeat(100)).await;
    assert_eq!(res.expect("run").text, "read it");
    let reqs = h.llm.requests();
    assert_eq!(reqs[0].body["max_tokens"], 1234);
    let shape = request_shape(Protocol::Anthropic, &reqs[1].body);
    let user = &shape[0].1;
    assert!(user.starts_with(&"m".repeat(40)), "{user}");
    assert!(
        user.contains("truncated from 100 to 40 characters"),
        "{user}"
    );
    let result = &shape[2].1;
    assert!(
        result.len() < 3_500,
        "tool result is {} chars",
        result.len()
    );
    assert!(result.contains("qqqq"), "{result}");
}

/// A provider's `stream_idle_timeout_seconds` reaches its client: a stream that goes
/// silent fails after the configured second, not after the 120 s default (the run's own
/// 30 s time-out would end it first).
#[tokio::test]
async fn a_stalled_stream_fails_after_the_configured_idle_time() {
    for protocol in PROTOCOLS {
        let h = Harness::new(
            protocol,
            Options {
                timeout_seconds: 30,
                provider_extra: "stream_idle_timeout_seconds: 1,",
                ..Options::default()
            },
        )
        .await;
        let agent = h.agent();
        // Past the first text delta, so the failure is final rather than retried.
        h.llm.push(
            Reply::text("then nothing more, ever")
                .chunk_size(3)
                .hang_after(5),
        );
        let started = std::time::Instant::now();
        let (res, _) = run(&agent, "s1", "hi").await;
        let elapsed = started.elapsed();
        let e = match res {
            Ok(out) => panic!("{protocol:?}: a stalled stream answered {:?}", out.text),
            Err(e) => e,
        };
        assert!(
            matches!(&e, RunError::Provider(p) if p.kind == ErrorKind::Timeout),
            "{protocol:?}: {e}"
        );
        assert!(
            elapsed >= std::time::Duration::from_secs(1)
                && elapsed < std::time::Duration::from_secs(10),
            "{protocol:?}: failed after {elapsed:?}"
        );
    }
}

/// `thinking_budget_tokens` reaches Anthropic's wire as extended thinking, with room for
/// the answer; a budget under Anthropic's minimum is refused when the config loads.
#[tokio::test]
async fn a_thinking_budget_reaches_the_anthropic_wire() {
    let h = Harness::new(
        Protocol::Anthropic,
        Options {
            defaults_extra: "thinking_budget_tokens: 2048, max_tokens: 1000,",
            ..Options::default()
        },
    )
    .await;
    h.llm.push(Reply::text("thought it through"));
    let (res, _) = run(&h.agent(), "s1", "think").await;
    assert_eq!(res.expect("answer").text, "thought it through");
    let body = &h.llm.requests()[0].body;
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048}),
        "{body}"
    );
    assert!(body["max_tokens"].as_u64().unwrap() > 2048, "{body}");

    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.json5"),
        "{ agents: { defaults: { thinking_budget_tokens: 100 } } }",
    )
    .unwrap();
    let err = ferroclaw_config::load(
        &ferroclaw_config::LoadOptions {
            home: Some(home.path().to_path_buf()),
            config_path: None,
        },
        ferroclaw_config::Env::from_pairs::<[(&str, &str); 0], _, _>([]),
    )
    .expect_err("too small a budget");
    assert!(err.to_string().contains("at least 1024"), "{err}");
}
