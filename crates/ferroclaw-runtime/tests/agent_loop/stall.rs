//! The stall watchdog (`agents.defaults.stall_timeout_seconds`): a run in which nothing
//! moves is cut short and its session freed; a run that keeps moving, however long, is
//! left alone. The stall time is 1 s here; the run's own time-out and the provider's
//! idle time-out are 30 s, so a `Stalled` error can only come from the watchdog.

use std::time::{Duration, Instant};

use ferroclaw_agent::{RunError, RunOptions};
use ferroclaw_runtime::{
    Origin, QueueMode, Runtime, RuntimeOptions, SchedulerConfig, Submit, Submitted,
};
use ferroclaw_testkit::{Protocol, Reply};
use ferroclaw_types::EventKind;
use serde_json::json;

use crate::common::*;

const STALL: Duration = Duration::from_secs(1);

fn options() -> Options {
    Options {
        timeout_seconds: 30,
        defaults_extra: "stall_timeout_seconds: 1,",
        provider_extra: "stream_idle_timeout_seconds: 30,",
        ..Options::default()
    }
}

fn stalled(events: &[ferroclaw_types::RunEvent]) -> Vec<(String, u64)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::RunStalled {
                waiting_on,
                idle_ms,
            } => Some((waiting_on.clone(), *idle_ms)),
            _ => None,
        })
        .collect()
}

fn recovered(events: &[ferroclaw_types::RunEvent]) -> Option<usize> {
    events.iter().find_map(|e| match &e.kind {
        EventKind::RunRecovered {
            interrupted_tools, ..
        } => Some(*interrupted_tools),
        _ => None,
    })
}

#[tokio::test]
async fn a_stalled_stream_is_cut_and_the_next_turn_runs() {
    for protocol in PROTOCOLS {
        let h = Harness::new(protocol, options()).await;
        assert_eq!(h.main_settings().stall_timeout, Some(STALL));
        let agent = h.agent();
        h.llm.push(
            Reply::text("partial answer then silence")
                .chunk_size(4)
                .hang_after(4),
        );
        let (res, events) = run(&agent, "s1", "hi").await;
        let e = res.expect_err("a stalled stream cannot answer");
        assert!(
            matches!(e, RunError::Stalled(d) if d == STALL),
            "{protocol:?}: {e}"
        );
        assert_eq!(e.kind(), "stalled");
        let all = events.all();
        let stalls = stalled(&all);
        assert_eq!(stalls.len(), 1, "{protocol:?}: {stalls:?}");
        assert_eq!(stalls[0].0, "model");
        assert!(stalls[0].1 >= 1_000, "{stalls:?}");
        assert_eq!(recovered(&all), Some(0), "{protocol:?}");
        // Stalled, then recovered, then the run's error: in that order.
        let order: Vec<&str> = all
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::RunStalled { .. } => Some("stalled"),
                EventKind::RunRecovered { .. } => Some("recovered"),
                EventKind::LifecycleError { .. } => Some("error"),
                _ => None,
            })
            .collect();
        assert_eq!(order, ["stalled", "recovered", "error"]);

        // What streamed is kept, marked as cut short by the watchdog.
        let session = ferroclaw_testkit::session_id_in(h.home.path(), "main", "s1").expect("id");
        let lines = transcript_lines(&h.transcript_path(&session));
        let last = lines.last().expect("entries");
        assert_eq!(last["message"]["stopReason"], "aborted", "{last}");
        let why = last["message"]["errorMessage"].as_str().unwrap_or_default();
        assert!(why.contains("stalled"), "{why}");

        // An incident names the session.
        let incidents = h.store.incidents(10).await.expect("incidents");
        let incident = incidents
            .iter()
            .find(|i| i.action == "run_stalled")
            .expect("a stalled-run incident");
        assert_eq!(incident.session_key.as_deref(), Some("s1"));

        // The session is free and well-formed: the next turn answers.
        h.llm.push(Reply::text("all good now"));
        let (res, _) = run(&agent, "s1", "again").await;
        assert_eq!(res.expect("next turn").text, "all good now", "{protocol:?}");
    }
}

#[tokio::test]
async fn a_hung_tool_is_cut_and_recorded_as_interrupted() {
    let h = Harness::new(Protocol::OpenAi, options()).await;
    let agent = h.agent();
    h.llm.push(Reply::tool_calls(vec![
        (
            "c1".into(),
            "exec".into(),
            json!({"command": "sleep 25", "timeout": 60}),
        ),
        ("c2".into(), "exec".into(), json!({"command": "echo quick"})),
    ]));
    let (res, events) = run(&agent, "s1", "run it").await;
    let e = res.expect_err("a hung tool cannot answer");
    assert!(matches!(e, RunError::Stalled(_)), "{e}");
    let all = events.all();
    assert_eq!(stalled(&all).first().map(|s| s.0.as_str()), Some("tools"));
    assert_eq!(recovered(&all), Some(1), "only the hung call was cut");

    let session = ferroclaw_testkit::session_id_in(h.home.path(), "main", "s1").expect("id");
    let lines = transcript_lines(&h.transcript_path(&session));
    assert_transcript_format(&lines);
    let result = |id: &str| {
        lines
            .iter()
            .find(|l| l["message"]["role"] == "toolResult" && l["message"]["toolCallId"] == id)
            .unwrap_or_else(|| panic!("no result for {id}: {lines:?}"))
            .clone()
    };
    let hung = result("c1");
    assert_eq!(hung["message"]["isError"], true);
    let text = hung["message"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("interrupted: the run stalled"), "{text}");
    let quick = result("c2");
    assert_eq!(quick["message"]["isError"], false, "{quick}");

    h.llm.push(Reply::text("recovered"));
    let (res, _) = run(&agent, "s1", "and now?").await;
    assert_eq!(res.expect("next turn").text, "recovered");
}

#[tokio::test]
async fn a_slow_stream_that_keeps_coming_is_left_alone() {
    for protocol in PROTOCOLS {
        let h = Harness::new(protocol, options()).await;
        let agent = h.agent();
        let answer = "slow and steady wins the race, one piece at a time";
        // About 14 events, 250 ms apart: well past the stall time in all, never idle
        // for it.
        h.llm.push(
            Reply::text(answer)
                .chunk_size(4)
                .pace(Duration::from_millis(250)),
        );
        let started = Instant::now();
        let (res, events) = run(&agent, "s1", "tell me").await;
        assert!(
            started.elapsed() > STALL,
            "the test must outlast the stall time"
        );
        assert_eq!(res.expect("answered").text, answer, "{protocol:?}");
        assert!(stalled(&events.all()).is_empty());
    }
}

#[tokio::test]
async fn a_long_command_that_prints_is_left_alone() {
    let h = Harness::new(Protocol::OpenAi, options()).await;
    let agent = h.agent();
    h.llm.push(Reply::tool_call(
        "c1",
        "exec",
        json!({"command": "for i in 1 2 3 4 5 6 7 8; do echo tick $i; sleep 0.4; done", "timeout": 60}),
    ));
    h.llm.push(Reply::text("counted"));
    let started = Instant::now();
    let (res, events) = run(&agent, "s1", "count").await;
    assert!(
        started.elapsed() > STALL * 3,
        "the command outlasts the stall time"
    );
    assert_eq!(res.expect("answered").text, "counted");
    assert!(stalled(&events.all()).is_empty());
    let sent = h.llm.requests()[1].body.to_string();
    assert!(
        sent.contains("tick 8"),
        "the whole output reached the model: {sent}"
    );
}

/// Through the runtime's door with the file store's session lease: the turn queued
/// behind a stalled one runs once the watchdog has freed the session.
#[tokio::test]
async fn the_turn_queued_behind_a_stalled_one_runs() {
    let h = Harness::new(Protocol::OpenAi, options()).await;
    let runtime = Runtime::with_agents(
        vec![h.agent()],
        h.store.clone(),
        RuntimeOptions {
            scheduler: SchedulerConfig::default(),
            subagents: ferroclaw_runtime::session_tools::SubagentLimits {
                max_depth: 0,
                max_children: 0,
            },
            allow_missing_default: false,
        },
    );
    h.llm.push(Reply::text("never finished").hang_after(2));
    h.llm.push(Reply::text("second answer"));
    let submit = |message: &'static str| {
        let Submitted::Run(handle) = runtime
            .submit(Submit {
                agent_id: "main",
                session_key: "q",
                user: None,
                message,
                mode: QueueMode::Queue,
                origin: Origin::Executor,
                options: RunOptions::default(),
            })
            .expect("submit")
        else {
            panic!("a message, not a command");
        };
        handle
    };
    let first = submit("first");
    let second = submit("second");
    let e = first.finish(|_| {}).await.expect_err("stalled");
    assert!(matches!(e.run_error(), Some(RunError::Stalled(_))), "{e:?}");
    let out = second.finish(|_| {}).await.expect("the queued turn ran");
    assert_eq!(out.text, "second answer");
    // The runtime remembers it for `status`.
    let stalls = runtime.recent_stalls();
    assert_eq!(stalls.len(), 1, "{stalls:?}");
    assert_eq!(
        (
            stalls[0].session_key.as_str(),
            stalls[0].waiting_on.as_str(),
            stalls[0].recovered
        ),
        ("q", "model", true)
    );
    // Both turns are in the one transcript, the first marked as cut short.
    let session = ferroclaw_testkit::session_id_in(h.home.path(), "main", "q").expect("id");
    let lines = transcript_lines(&h.transcript_path(&session));
    let users: Vec<_> = lines
        .iter()
        .filter(|l| l["message"]["role"] == "user")
        .collect();
    assert_eq!(users.len(), 2);
}
