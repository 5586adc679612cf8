//! Tool calling for models that only write their tool intent as text.

use crate::common::*;
use ferroclaw_testkit::{Protocol, ReasoningField, Reply};
use ferroclaw_types::{EventKind, Message};
use serde_json::Value;

fn tool_results(body: &Value) -> Vec<String> {
    request_shape(Protocol::OpenAi, body)
        .into_iter()
        .filter(|m| m.0 == "tool")
        .map(|m| m.1)
        .collect()
}

/// Results of intent-derived calls: in auto mode they go back as user text,
/// because the model never made a native call the server could pair them with.
fn text_tool_results(body: &Value, tool: &str) -> Vec<String> {
    let marker = format!("[TOOL_RESULT: {tool}]");
    request_shape(Protocol::OpenAi, body)
        .into_iter()
        .filter(|m| m.0 == "user" && m.1.contains(&marker))
        .map(|m| m.1)
        .collect()
}

#[tokio::test]
async fn auto_mode_runs_a_tool_intent_found_only_in_the_reasoning() {
    for field in [ReasoningField::Reasoning, ReasoningField::ReasoningContent] {
        let h = Harness::new(
            Protocol::OpenAi,
            Options {
                provider_extra: r#"tool_mode: "auto","#,
                ..Options::default()
            },
        )
        .await;
        std::fs::create_dir_all(h.workspace()).expect("ws");
        std::fs::write(h.workspace().join("notes.md"), "remember the milk").expect("file");
        h.llm.push(Reply::text("").with_reasoning(
            "The user asks what is in notes.md. We need to read the file notes.md first.",
            field,
        ));
        h.llm.push(Reply::text("It says: remember the milk."));
        let (res, events) = run(&h.agent(), "s", "what's in notes.md?").await;
        let out = res.unwrap_or_else(|e| panic!("{field:?}: {e}"));
        assert_eq!(out.text, "It says: remember the milk.");

        let reqs = h.llm.requests();
        assert!(
            reqs[0].body["tools"]
                .as_array()
                .is_some_and(|t| !t.is_empty()),
            "auto mode still sends tools"
        );
        assert!(
            tool_results(&reqs[1].body).is_empty(),
            "{field:?}: no native tool message for a call the model never made natively"
        );
        let results = text_tool_results(&reqs[1].body, "read");
        assert_eq!(results.len(), 1, "{field:?}");
        assert!(results[0].contains("remember the milk"));
        let started: Vec<String> = events
            .all()
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::ToolStart { name, .. } => Some(name.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(started, ["read"], "same events as a native call");
    }
}

#[tokio::test]
async fn intent_mode_never_sends_tools_and_keeps_history_as_text() {
    let h = Harness::new(
        Protocol::OpenAi,
        Options {
            provider_extra: r#"tool_mode: "intent", guided_decoding: "vllm","#,
            ..Options::default()
        },
    )
    .await;
    h.llm.push(Reply::text(
        r#"Sure. ```json
{"tool_calls":[{"name":"write","arguments":{"path":"out.txt","content":"hello"}}],"done":false}
```"#,
    ));
    h.llm.push(Reply::text(
        r#"{"tool_calls": [], "done": true, "answer": "Wrote out.txt."}"#,
    ));
    let (res, _) = run(&h.agent(), "s", "write hello to out.txt").await;
    assert_eq!(
        res.expect("run").text,
        "Wrote out.txt.",
        "the user sees the answer, not the JSON"
    );
    assert_eq!(h.llm.pending(), 0);
    assert_eq!(
        std::fs::read_to_string(h.workspace().join("out.txt")).expect("written"),
        "hello"
    );

    for req in h.llm.requests() {
        let body = &req.body;
        assert!(
            body.get("tools").is_none(),
            "intent mode must never send tools: {body}"
        );
        assert!(
            body.get("guided_json").is_some(),
            "vLLM guided decoding schema is sent"
        );
        let msgs = body["messages"].as_array().expect("messages");
        assert!(msgs[0]["content"]
            .as_str()
            .unwrap_or_default()
            .contains("## Tool calling"));
        assert!(
            msgs.iter()
                .all(|m| m.get("tool_calls").is_none() && m["role"] != "tool"),
            "history is text-only"
        );
    }
    let second = h.llm.requests()[1].body.to_string();
    assert!(second.contains("[TOOL_RESULT: write]"), "{second}");

    // The transcript keeps real toolCall/toolResult entries.
    let log = h.store.open("main", "s").await.expect("open");
    let ctx = log.context();
    assert!(ctx
        .iter()
        .any(|m| matches!(m, Message::ToolResult(r) if r.tool_name == "write")));
}

#[tokio::test]
async fn harmony_markup_in_content_is_parsed_and_never_shown() {
    let h = Harness::new(
        Protocol::OpenAi,
        Options {
            provider_extra: r#"tool_mode: "auto","#,
            ..Options::default()
        },
    )
    .await;
    h.llm.push(Reply::text(
        "<|start|>assistant<|channel|>commentary to=functions.exec <|constrain|>json<|message|>{\"command\":\"echo harmony-ok\"}<|call|>",
    ));
    h.llm.push(Reply::text(
        "<|start|>assistant<|channel|>final<|message|>The command printed harmony-ok.<|end|>",
    ));
    let (res, _) = run(&h.agent(), "s", "run it").await;
    let out = res.expect("run");
    assert_eq!(out.text, "The command printed harmony-ok.");
    let body = &h.llm.requests()[1].body;
    assert!(
        tool_results(body).is_empty(),
        "intent results go back as text"
    );
    let results = text_tool_results(body, "exec");
    assert_eq!(results.len(), 1, "{body}");
    assert!(results[0].contains("harmony-ok"), "{results:?}");
}

#[tokio::test]
async fn auto_mode_falls_back_to_text_when_the_server_refuses_tools() {
    let h = Harness::new(
        Protocol::OpenAi,
        Options {
            provider_extra: r#"tool_mode: "auto","#,
            ..Options::default()
        },
    )
    .await;
    h.llm.push(Reply::status(
        400,
        "\"auto\" tool choice requires --enable-auto-tool-choice; tools are not supported",
    ));
    h.llm.push(Reply::text("Action: ls\nAction Input: {}"));
    h.llm.push(Reply::text("Listed."));
    let (res, _) = run(&h.agent(), "s", "list files").await;
    assert_eq!(res.expect("run").text, "Listed.");
    let reqs = h.llm.requests();
    assert!(reqs[0].body.get("tools").is_some());
    assert!(reqs[1].body.get("tools").is_none(), "retried without tools");
    assert!(reqs[2].body.to_string().contains("[TOOL_RESULT: ls]"));
}

#[tokio::test]
async fn native_mode_ignores_text_that_only_mentions_tools() {
    let h = Harness::new(Protocol::OpenAi, Options::default()).await;
    h.llm.push(Reply::text(
        "You could run `ls -la` yourself to see the files.",
    ));
    let (res, _) = run(&h.agent(), "s", "how do I list files?").await;
    assert_eq!(
        res.expect("run").text,
        "You could run `ls -la` yourself to see the files."
    );
    assert_eq!(h.llm.requests().len(), 1);
}

#[tokio::test]
async fn the_configured_parser_order_and_prompt_are_used() {
    let h = Harness::new(
        Protocol::OpenAi,
        Options {
            provider_extra: r#"tool_mode: "intent", intent: { order: ["react"], sources: ["content"], prompt: "react" },"#,
            ..Options::default()
        },
    )
    .await;
    // Guided JSON is not in the configured order: it stays text.
    h.llm.push(Reply::text(
        r#"{"tool_calls":[{"name":"ls","arguments":{}}],"done":false}"#,
    ));
    let (res, _) = run(&h.agent(), "a", "list").await;
    assert!(
        res.expect("run").text.contains("tool_calls"),
        "not parsed as a call"
    );
    assert_eq!(h.llm.requests().len(), 1);
    let system = h.llm.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        system.contains("Action Input"),
        "the ReAct format is taught: {system}"
    );

    // ReAct is.
    h.llm.push(Reply::text(
        "Thought: look around\nAction: ls\nAction Input: {}",
    ));
    h.llm.push(Reply::text("Final Answer: listed"));
    let (res, _) = run(&h.agent(), "b", "list").await;
    assert_eq!(res.expect("run").text, "listed");
    assert!(h.llm.requests()[2]
        .body
        .to_string()
        .contains("[TOOL_RESULT: ls]"));
}
