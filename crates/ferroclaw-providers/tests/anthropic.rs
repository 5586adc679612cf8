//! Anthropic Messages wire, driven through the scripted server (JSON and SSE).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed fixture should stop the test

mod common;

use common::*;
use ferroclaw_providers::{ErrorKind, NoSink, Provider};
use ferroclaw_testkit::{ReasoningField, Reply};
use ferroclaw_types::{AssistantMessage, ContentBlock, Message, StopReason, Usage};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const SIGNATURE: &str = "scripted-thinking-signature";

#[tokio::test]
async fn plain_answer_json_and_sse_with_headers_and_system() {
    for stream in [false, true] {
        let llm = server().await;
        let text = "Bonjour, tout le monde.";
        llm.push(
            Reply::text(text)
                .chunk_size(4)
                .with_usage(10, 7)
                .with_cached_tokens(200),
        );
        let sink = Collect::default();
        let resp = anthropic(&llm)
            .chat(
                &request("claude-test", stream),
                &sink,
                &CancellationToken::new(),
            )
            .await
            .expect("chat");
        assert_eq!(resp.content, vec![ContentBlock::text(text)]);
        assert_eq!(resp.stop_reason, StopReason::Stop);
        assert_eq!(
            (resp.provider.as_str(), resp.model.as_str()),
            ("anthropic", "claude-test")
        );
        // Anthropic cache reads are separate from input_tokens.
        assert_eq!(
            resp.usage,
            Usage {
                input: 10,
                output: 7,
                cache_read: 200,
                cache_write: 0,
                total_tokens: 217
            }
        );
        if stream {
            assert_eq!(sink.text(), text);
            assert!(sink.text_pieces() > 3);
        }

        let r = &llm.requests()[0];
        assert_eq!(r.path, "/v1/messages");
        assert_eq!(r.header("x-api-key"), Some("ak-test"));
        assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
        assert_eq!(r.body["system"], "You are terse.");
        assert_eq!(r.body["max_tokens"], 4096);
        assert_eq!(
            r.body["messages"],
            json!([{"role": "user", "content": [{"type": "text", "text": "hello"}]}])
        );
        assert_eq!(r.body["tools"][0]["name"], "exec");
        assert_eq!(r.body["tools"][0]["input_schema"]["type"], "object");
        assert_eq!(r.body.get("stream").is_some(), stream);
    }
}

#[tokio::test]
async fn tool_calls_json_and_sse() {
    for stream in [false, true] {
        let llm = server().await;
        let calls = vec![
            (
                "toolu_1".to_string(),
                "read".to_string(),
                json!({"path": "/tmp/x"}),
            ),
            (
                "toolu_2".to_string(),
                "exec".to_string(),
                json!({"command": "echo \"{}\""}),
            ),
            (
                "toolu_3".to_string(),
                "web".to_string(),
                json!({"q": "ß ✓", "n": [1, 2]}),
            ),
        ];
        llm.push(Reply::tool_calls(calls.clone()).chunk_size(3));
        let sink = Collect::default();
        let resp = anthropic(&llm)
            .chat(&request("c", stream), &sink, &CancellationToken::new())
            .await
            .expect("chat");
        let want: Vec<ContentBlock> = calls
            .iter()
            .map(|(id, name, args)| ContentBlock::ToolCall {
                id: id.clone(),
                name: name.clone(),
                arguments: args.clone(),
            })
            .collect();
        assert_eq!(resp.content, want);
        assert_eq!(resp.stop_reason, StopReason::ToolUse);
        if stream {
            let starts: Vec<usize> = sink.tool_starts().into_iter().map(|(i, _, _)| i).collect();
            assert_eq!(starts, vec![0, 1, 2]);
        }
    }
}

#[tokio::test]
async fn thinking_with_signature() {
    for stream in [false, true] {
        let llm = server().await;
        llm.push(
            Reply::text("Answer.")
                .with_reasoning("Pondering deeply.", ReasoningField::Reasoning)
                .chunk_size(4),
        );
        let sink = Collect::default();
        let resp = anthropic(&llm)
            .chat(&request("c", stream), &sink, &CancellationToken::new())
            .await
            .expect("chat");
        assert_eq!(
            resp.content,
            vec![
                ContentBlock::Thinking {
                    thinking: "Pondering deeply.".into(),
                    thinking_signature: Some(SIGNATURE.into()),
                },
                ContentBlock::text("Answer."),
            ]
        );
        if stream {
            assert_eq!(sink.reasoning(), "Pondering deeply.");
        }
    }
}

#[tokio::test]
async fn tool_results_are_merged_and_signed_thinking_echoed() {
    let llm = server().await;
    llm.push(Reply::text("ok"));
    let mut req = request("c", false);
    req.messages.push(Message::Assistant(AssistantMessage {
        content: vec![
            ContentBlock::Thinking {
                thinking: "t".into(),
                thinking_signature: Some("sig-1".into()),
            },
            ContentBlock::Thinking {
                thinking: "unsigned".into(),
                thinking_signature: None,
            },
            ContentBlock::ToolCall {
                id: "tu_1".into(),
                name: "read".into(),
                arguments: json!({"p": 1}),
            },
            ContentBlock::ToolCall {
                id: "tu_2".into(),
                name: "exec".into(),
                arguments: json!({"c": "x"}),
            },
        ],
        provider: "anthropic".into(),
        model: "c".into(),
        usage: Usage::default(),
        stop_reason: StopReason::ToolUse,
        error_message: None,
        timestamp: 0,
    }));
    req.messages
        .push(Message::tool_result("tu_1", "read", "contents", false));
    req.messages
        .push(Message::tool_result("tu_2", "exec", "exit 1", true));
    anthropic(&llm)
        .chat(&req, &NoSink, &CancellationToken::new())
        .await
        .expect("chat");
    let body = &llm.requests()[0].body;
    assert!(body["messages"][0]["role"] == "user");
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "t", "signature": "sig-1"},
            {"type": "tool_use", "id": "tu_1", "name": "read", "input": {"p": 1}},
            {"type": "tool_use", "id": "tu_2", "name": "exec", "input": {"c": "x"}},
        ]})
    );
    assert_eq!(
        body["messages"][2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "tu_1", "content": "contents", "is_error": false},
            {"type": "tool_result", "tool_use_id": "tu_2", "content": "exit 1", "is_error": true},
        ]})
    );
    assert_eq!(body["messages"].as_array().map(Vec::len), Some(3));
}

#[tokio::test]
async fn overloaded_and_overflow_errors() {
    let llm = server().await;
    llm.push(Reply::status(529, "Overloaded"));
    llm.push(Reply::status(
        400,
        "prompt is too long: 250000 tokens > 200000 maximum",
    ));
    let p = anthropic(&llm);
    let c = CancellationToken::new();
    let e = p
        .chat(&request("c", true), &NoSink, &c)
        .await
        .expect_err("529");
    assert_eq!((e.kind, e.status), (ErrorKind::Server, Some(529)));
    assert_eq!(e.message, "Overloaded");
    assert!(e.retryable());
    let e = p
        .chat(&request("c", false), &NoSink, &c)
        .await
        .expect_err("400");
    assert_eq!((e.kind, e.status), (ErrorKind::ContextOverflow, Some(400)));
}

#[tokio::test]
async fn cut_and_malformed_streams() {
    let llm = server().await;
    llm.push(Reply::text("some answer text here").cut_after(4));
    let p = anthropic(&llm);
    let c = CancellationToken::new();
    let e = p
        .chat(&request("c", true), &NoSink, &c)
        .await
        .expect_err("cut");
    assert_eq!(e.kind, ErrorKind::BrokenStream, "{e}");
    assert!(e.streamed);

    llm.push(Reply::text("some answer").malformed());
    let e = p
        .chat(&request("c", true), &NoSink, &c)
        .await
        .expect_err("malformed");
    assert_eq!(e.kind, ErrorKind::BrokenStream, "{e}");

    llm.push(Reply::text("some answer").malformed());
    let e = p
        .chat(&request("c", false), &NoSink, &c)
        .await
        .expect_err("malformed json");
    assert_eq!(e.kind, ErrorKind::Malformed, "{e}");
}

#[tokio::test]
async fn max_tokens_maps_to_length() {
    let llm = server().await;
    llm.push(Reply::text("cut sh").finish_reason("length"));
    let resp = anthropic(&llm)
        .chat(&request("c", true), &NoSink, &CancellationToken::new())
        .await
        .expect("chat");
    assert_eq!(resp.stop_reason, StopReason::Length);
}

#[tokio::test]
async fn list_models() {
    let llm = server().await;
    llm.set_models(vec!["claude-x".into()]);
    assert_eq!(
        anthropic(&llm).list_models().await.expect("models"),
        vec!["claude-x".to_string()]
    );
}
