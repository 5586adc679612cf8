//! Compaction through the scripted LLM: threshold trigger, overflow recovery, pairing,
//! failed summaries, memory flush and `/compact`.

use crate::common::*;
use ferroclaw_testkit::{Protocol, Reply};
use ferroclaw_types::{EntryBody, Message};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// A user message of about 2,000 tokens with a marker to find it by.
fn big(marker: &str) -> String {
    format!("{marker} {}", "lorem ipsum ".repeat(650))
}

const SMALL_WINDOW: &str = "context_window: 8000, compaction: { keep_recent_turns: 1 },";
/// A fixed tool set: the thresholds below are sized against the system prompt, which
/// includes every offered tool's schema.
const FIXED_TOOLS: &str = r#"tools: { allow: ["read", "write", "edit", "ls"] },"#;

fn openai_user_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .map(|ms| {
            ms.iter()
                .filter(|m| m["role"] == "user")
                .map(|m| m["content"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

async fn entries(h: &Harness, key: &str) -> Vec<ferroclaw_types::Entry> {
    h.store
        .open("main", key)
        .await
        .expect("open")
        .entries()
        .to_vec()
}

#[tokio::test]
async fn threshold_triggers_a_summary_that_replaces_older_turns() {
    for protocol in PROTOCOLS {
        let h = Harness::new(
            protocol,
            Options {
                defaults_extra: SMALL_WINDOW,
                config_extra: FIXED_TOOLS,
                ..Options::default()
            },
        )
        .await;
        let agent = h.agent();
        h.llm.push(Reply::text("A1"));
        h.llm.push(Reply::text("A2"));
        run(&agent, "s", &big("FIRST")).await.0.expect("turn 1");
        run(&agent, "s", &big("SECOND")).await.0.expect("turn 2");
        assert_eq!(
            h.llm.requests().len(),
            2,
            "no compaction while under the threshold"
        );

        h.llm.push(Reply::text(
            "Summary: the user sent FIRST and SECOND texts.",
        ));
        h.llm.push(Reply::text("A3"));
        let out = run(&agent, "s", &big("THIRD"))
            .await
            .0
            .unwrap_or_else(|e| panic!("{protocol:?}: {e}"));
        assert_eq!(out.text, "A3");

        let reqs = h.llm.requests();
        assert_eq!(reqs.len(), 4);
        let summary_req = &reqs[2].body;
        let summary_text = summary_req.to_string();
        assert!(
            summary_text.contains("FIRST") && summary_text.contains("SECOND"),
            "older turns are summarised"
        );
        assert!(summary_text.contains("A1") && summary_text.contains("A2"));
        assert!(
            !summary_text.contains("THIRD"),
            "the kept turn is not summarised"
        );
        assert!(
            summary_req["tools"].as_array().is_none_or(|t| t.is_empty()),
            "no tools when summarising"
        );
        assert!(summary_text.contains("condense the history"));

        let next = reqs[3].body.to_string();
        assert!(
            next.contains("[Conversation summary]") && next.contains("Summary: the user sent"),
            "{protocol:?}"
        );
        assert!(next.contains("THIRD"));
        assert!(
            !next.contains("FIRST lorem"),
            "summarised turns are no longer sent verbatim"
        );

        // The transcript keeps everything and records the compaction.
        let es = entries(&h, "s").await;
        let user_ids: Vec<&str> = es
            .iter()
            .filter(|e| matches!(e.message(), Some(Message::User(_))))
            .map(|e| e.id.as_str())
            .collect();
        assert_eq!(user_ids.len(), 3, "nothing is deleted");
        let (first_kept, before, after) = es
            .iter()
            .find_map(|e| match &e.body {
                EntryBody::Compaction {
                    first_kept_entry_id,
                    tokens_before,
                    tokens_after,
                    ..
                } => Some((first_kept_entry_id.clone(), *tokens_before, *tokens_after)),
                _ => None,
            })
            .expect("compaction entry");
        assert_eq!(first_kept, user_ids[2]);
        assert!(after.is_some_and(|a| a < before), "{before} -> {after:?}");
    }
}

#[tokio::test]
async fn overflow_error_compacts_and_retries() {
    let h = Harness::new(
        Protocol::OpenAi,
        Options {
            defaults_extra: "compaction: { keep_recent_turns: 1 },",
            config_extra: FIXED_TOOLS,
            ..Options::default()
        },
    )
    .await;
    let agent = h.agent();
    h.llm.push(Reply::text("A1"));
    h.llm.push(Reply::text("A2"));
    run(&agent, "s", "first question").await.0.expect("turn 1");
    run(&agent, "s", "second question").await.0.expect("turn 2");

    h.llm.push(Reply::status(
        400,
        "This model's maximum context length is 8192 tokens. However, your messages resulted in 9100 tokens.",
    ));
    h.llm.push(Reply::text("Short summary of two questions."));
    h.llm.push(Reply::text("fits now"));
    let out = run(&agent, "s", "third question")
        .await
        .0
        .expect("recovered");
    assert_eq!(out.text, "fits now");
    let reqs = h.llm.requests();
    assert_eq!(reqs.len(), 5);
    assert!(
        reqs[3].body.to_string().contains("first question"),
        "the summary request carries the old turns"
    );
    let retried = openai_user_texts(&reqs[4].body);
    assert_eq!(retried.len(), 2, "{retried:?}");
    assert!(retried[0].starts_with("[Conversation summary]"));
    assert_eq!(retried[1], "third question");
}

#[tokio::test]
async fn persistent_overflow_fails_with_context_overflow() {
    let h = Harness::new(
        Protocol::OpenAi,
        Options {
            defaults_extra: "compaction: { keep_recent_turns: 1 },",
            config_extra: FIXED_TOOLS,
            ..Options::default()
        },
    )
    .await;
    let agent = h.agent();
    h.llm.push(Reply::text("A1"));
    run(&agent, "s", "first").await.0.expect("turn 1");
    h.llm.push(Reply::status(
        400,
        "prompt is too long: 250000 tokens > 200000 maximum",
    ));
    h.llm.push(Reply::text("summary"));
    h.llm.push(Reply::status(
        400,
        "prompt is too long: 240000 tokens > 200000 maximum",
    ));
    let err = run(&agent, "s", "second").await.0.expect_err("must fail");
    assert_eq!(err.kind(), "context_overflow", "{err}");
    assert_eq!(h.llm.pending(), 0);

    // The session is still usable afterwards.
    h.llm.push(Reply::text("ok again"));
    assert_eq!(
        run(&agent, "s", "third").await.0.expect("usable").text,
        "ok again"
    );
}

#[tokio::test]
async fn compaction_never_splits_a_tool_call_from_its_result() {
    let h = Harness::new(
        Protocol::OpenAi,
        Options {
            defaults_extra: SMALL_WINDOW,
            config_extra: FIXED_TOOLS,
            ..Options::default()
        },
    )
    .await;
    let agent = h.agent();
    std::fs::create_dir_all(h.workspace()).expect("ws");
    std::fs::write(h.workspace().join("big.txt"), "data ".repeat(1_500)).expect("file");
    h.llm
        .push(Reply::tool_call("r1", "read", json!({"path": "big.txt"})));
    h.llm.push(Reply::text("read it"));
    run(&agent, "s", &big("FIRST")).await.0.expect("turn 1");
    h.llm
        .push(Reply::tool_call("r2", "read", json!({"path": "big.txt"})));
    h.llm.push(Reply::text("read again"));
    h.llm.push(Reply::text("summary of reads"));
    h.llm.push(Reply::text("done"));
    run(&agent, "s", &big("SECOND")).await.0.expect("turn 2");
    h.llm.push(Reply::text("summary two"));
    h.llm.push(Reply::text("fine"));
    run(&agent, "s", "third").await.0.expect("turn 3");

    for req in h.llm.requests() {
        let shape = request_shape(Protocol::OpenAi, &req.body);
        let mut open: Vec<String> = Vec::new();
        for (role, _, ids) in &shape {
            match role.as_str() {
                "assistant" => open = ids.clone(),
                "tool" => {
                    let id = &ids[0];
                    assert!(
                        open.contains(id),
                        "result {id} without its call in {shape:?}"
                    );
                    open.retain(|o| o != id);
                }
                _ => assert!(
                    open.is_empty(),
                    "call(s) {open:?} left without result in {shape:?}"
                ),
            }
        }
    }
    let compactions = entries(&h, "s")
        .await
        .iter()
        .filter(|e| matches!(e.body, EntryBody::Compaction { .. }))
        .count();
    assert!(compactions >= 1);
}

#[tokio::test]
async fn failed_summary_keeps_the_session_usable_and_is_retried_later() {
    let h = Harness::new(
        Protocol::OpenAi,
        Options {
            defaults_extra: "context_window: 8000, compaction: { keep_recent_turns: 2 },",
            config_extra: FIXED_TOOLS,
            ..Options::default()
        },
    )
    .await;
    let agent = h.agent();
    h.llm.push(Reply::text("A1"));
    h.llm.push(Reply::text("A2"));
    run(&agent, "s", &big("FIRST")).await.0.expect("turn 1");
    run(&agent, "s", &big("SECOND")).await.0.expect("turn 2");

    h.llm.push(Reply::status(400, "summariser refused"));
    h.llm.push(Reply::text("A3 with full history"));
    let out = run(&agent, "s", &big("THIRD"))
        .await
        .0
        .expect("turn 3 still answers");
    assert_eq!(out.text, "A3 with full history");
    assert!(
        h.llm.requests()[3].body.to_string().contains("FIRST lorem"),
        "full history sent"
    );
    let es = entries(&h, "s").await;
    assert!(es.iter().any(|e| matches!(&e.body, EntryBody::Custom { custom_type, .. } if custom_type == "compaction_failed")));
    assert!(!es
        .iter()
        .any(|e| matches!(e.body, EntryBody::Compaction { .. })));

    h.llm.push(Reply::text("a good summary"));
    h.llm.push(Reply::text("A4"));
    run(&agent, "s", "fourth").await.0.expect("turn 4");
    assert!(
        entries(&h, "s")
            .await
            .iter()
            .any(|e| matches!(e.body, EntryBody::Compaction { .. })),
        "retried on the next run"
    );
}

#[tokio::test]
async fn memory_flush_runs_once_before_compaction() {
    let h = Harness::new(
        Protocol::OpenAi,
        Options {
            defaults_extra:
                "context_window: 8000, compaction: { keep_recent_turns: 1, memory_flush: true },",
            config_extra: FIXED_TOOLS,
            ..Options::default()
        },
    )
    .await;
    let agent = h.agent();
    h.llm.push(Reply::text("A1"));
    h.llm.push(Reply::text("A2"));
    run(&agent, "s", &big("FIRST")).await.0.expect("turn 1");
    run(&agent, "s", &big("SECOND")).await.0.expect("turn 2");

    let today = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()[..10]
        .to_string();
    let note_path = format!("memory/{today}.md");
    h.llm.push(Reply::tool_call(
        "w1",
        "write",
        json!({"path": note_path, "content": "user likes lorem ipsum"}),
    ));
    h.llm.push(Reply::text("NO_REPLY"));
    h.llm.push(Reply::text("summary"));
    h.llm.push(Reply::text("A3"));
    let out = run(&agent, "s", &big("THIRD")).await.0.expect("turn 3");
    assert_eq!(out.text, "A3");

    let reqs = h.llm.requests();
    let flush = &reqs[2].body;
    assert!(flush.to_string().contains("[Memory flush]"));
    let tool_names: Vec<&str> = flush["tools"]
        .as_array()
        .expect("tools offered")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(
        tool_names.contains(&"write") && !tool_names.contains(&"exec"),
        "{tool_names:?}"
    );
    let note =
        std::fs::read_to_string(h.workspace().join(&note_path)).expect("memory note written");
    assert_eq!(note, "user likes lorem ipsum");
    let flushes = reqs
        .iter()
        .filter(|r| r.body.to_string().contains("[Memory flush]"))
        .count();
    assert_eq!(
        flushes, 2,
        "one flush turn (two calls: write, then NO_REPLY)"
    );
    assert!(
        !entries(&h, "s").await.iter().any(|e| e
            .message()
            .is_some_and(|m| m.text().contains("[Memory flush]"))),
        "the flush stays out of the transcript"
    );
}

#[tokio::test]
async fn forced_compaction_via_compact_session() {
    let h = Harness::new(
        Protocol::Anthropic,
        Options {
            defaults_extra: "compaction: { keep_recent_turns: 1 },",
            config_extra: FIXED_TOOLS,
            ..Options::default()
        },
    )
    .await;
    let agent = h.agent();
    h.llm.push(Reply::text("A1"));
    h.llm.push(Reply::text("A2"));
    run(&agent, "s", &big("ONE")).await.0.expect("turn 1");
    run(&agent, "s", "two").await.0.expect("turn 2");
    h.llm.push(Reply::text("forced summary"));
    let res = agent
        .compact_session("s", CancellationToken::new())
        .await
        .expect("compact");
    let (before, after) = res.expect("something to compact");
    assert!(
        after + 1_500 < before,
        "the big turn is gone from the context: {before} -> {after}"
    );
    let log = h.store.open("main", "s").await.expect("open");
    let ctx = log.context();
    assert!(ctx[0].text().contains("forced summary"));
    assert_eq!(ctx.last().map(Message::text).as_deref(), Some("A2"));

    // A single turn has nothing older to summarise.
    h.llm.push(Reply::text("B1"));
    run(&agent, "fresh", "only").await.0.expect("turn");
    assert!(agent
        .compact_session("fresh", CancellationToken::new())
        .await
        .expect("ok")
        .is_none());
}

#[tokio::test]
async fn an_older_part_larger_than_the_window_is_summarised_in_chunks_and_merged() {
    let h = Harness::new(
        Protocol::OpenAi,
        Options {
            defaults_extra:
                "context_window: 10000, compaction: { keep_recent_turns: 1, threshold: 0.9 },",
            config_extra: FIXED_TOOLS,
            ..Options::default()
        },
    )
    .await;
    let agent = h.agent();
    // Three turns of ~2,000 tokens stay under 90%; the fourth crosses it, and the three
    // older turns together exceed the 60% a single summarising request may take.
    for (marker, answer) in [("FIRST", "A1"), ("SECOND", "A2")] {
        h.llm.push(Reply::text(answer));
        run(&agent, "s", &big(marker)).await.0.expect("turn");
    }
    h.llm.push(Reply::text("A3"));
    run(&agent, "s", &big("THIRD")).await.0.expect("turn 3");
    let before = h.llm.requests().len();
    assert_eq!(before, 3);

    h.llm.push(Reply::text("part one summary"));
    h.llm.push(Reply::text("part two summary"));
    h.llm.push(Reply::text("merged summary"));
    h.llm.push(Reply::text("A4"));
    let out = run(&agent, "s", &big("FOURTH")).await.0.expect("turn 4");
    assert_eq!(out.text, "A4");
    let reqs = h.llm.requests();
    assert_eq!(
        reqs.len(),
        before + 4,
        "two chunk summaries, one merge, one answer"
    );
    let chunk1 = reqs[3].body.to_string();
    let chunk2 = reqs[4].body.to_string();
    let merge = reqs[5].body.to_string();
    assert!(chunk1.contains("FIRST") && !chunk1.contains("THIRD lorem"));
    assert!(chunk2.contains("THIRD") || chunk2.contains("SECOND"));
    assert!(
        merge.contains("part one summary")
            && merge.contains("part two summary")
            && merge.contains("Merge")
    );
    assert!(reqs[6].body.to_string().contains("merged summary"));
}
