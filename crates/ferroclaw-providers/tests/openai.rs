//! OpenAI-compatible wire, driven through the scripted server (JSON and SSE).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed fixture should stop the test

mod common;

use common::*;
use ferroclaw_providers::{ErrorKind, NoSink, Provider, StreamDelta};
use ferroclaw_testkit::{ReasoningField, Reply};
use ferroclaw_types::{AssistantMessage, ContentBlock, Message, StopReason, Usage};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn plain_answer_json() {
    let llm = server().await;
    llm.push(Reply::text("Hello there, friend.").with_usage(12, 5));
    let p = openai(&llm);
    let resp = p
        .chat(
            &request("gpt-test", false),
            &NoSink,
            &CancellationToken::new(),
        )
        .await
        .expect("chat");
    assert_eq!(
        resp.content,
        vec![ContentBlock::text("Hello there, friend.")]
    );
    assert_eq!(resp.stop_reason, StopReason::Stop);
    assert_eq!(
        (resp.provider.as_str(), resp.model.as_str()),
        ("openai", "gpt-test")
    );
    assert_eq!(
        resp.usage,
        Usage {
            input: 12,
            output: 5,
            cache_read: 0,
            cache_write: 0,
            total_tokens: 17
        }
    );

    let reqs = llm.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(r.header("x-extra"), Some("1"));
    assert_eq!(r.body["model"], "gpt-test");
    assert!(r.body.get("stream").is_none());
    assert_eq!(
        r.body["messages"][0],
        json!({"role": "system", "content": "You are terse."})
    );
    assert_eq!(
        r.body["messages"][1],
        json!({"role": "user", "content": "hello"})
    );
    assert_eq!(r.body["tools"][0]["type"], "function");
    assert_eq!(r.body["tools"][0]["function"]["name"], "exec");
    assert_eq!(
        r.body["tools"][0]["function"]["parameters"]["required"],
        json!(["command"])
    );
}

#[tokio::test]
async fn plain_answer_sse_deltas_arrive_in_order() {
    let llm = server().await;
    let text = "The quick brown fox jumps over the lazy dog.";
    llm.push(Reply::text(text).chunk_size(3).with_usage(9, 11));
    let p = openai(&llm);
    let sink = Collect::default();
    let resp = p
        .chat(&request("gpt-test", true), &sink, &CancellationToken::new())
        .await
        .expect("chat");
    assert_eq!(resp.content, vec![ContentBlock::text(text)]);
    assert_eq!(sink.text(), text);
    assert!(sink.text_pieces() > 5, "text should arrive in pieces");
    assert_eq!(resp.usage.total_tokens, 20);
    let body = &llm.requests()[0].body;
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}

#[tokio::test]
async fn one_tool_call_json_and_sse() {
    for stream in [false, true] {
        let llm = server().await;
        llm.push(Reply::tool_call(
            "call_1",
            "exec",
            json!({"command": "ls -la"}),
        ));
        let p = openai(&llm);
        let sink = Collect::default();
        let resp = p
            .chat(&request("m", stream), &sink, &CancellationToken::new())
            .await
            .expect("chat");
        assert_eq!(resp.stop_reason, StopReason::ToolUse);
        assert_eq!(
            resp.content,
            vec![ContentBlock::ToolCall {
                id: "call_1".into(),
                name: "exec".into(),
                arguments: json!({"command": "ls -la"}),
            }]
        );
        if stream {
            assert_eq!(
                sink.tool_starts(),
                vec![(0, "call_1".into(), "exec".into())]
            );
        }
    }
}

#[tokio::test]
async fn three_parallel_calls_reassembled_in_order() {
    let llm = server().await;
    let calls = vec![
        (
            "c_a".to_string(),
            "read".to_string(),
            json!({"path": "/etc/hosts", "lines": 10}),
        ),
        (
            "c_b".to_string(),
            "exec".to_string(),
            json!({"command": "echo \"hi\" && ls"}),
        ),
        (
            "c_c".to_string(),
            "web".to_string(),
            json!({"q": "ünïcødé ✓", "n": [1, 2, 3]}),
        ),
    ];
    llm.push(
        Reply::tool_calls(calls.clone())
            .with_text("Working on it.")
            .chunk_size(3),
    );
    let p = openai(&llm);
    let sink = Collect::default();
    let resp = p
        .chat(&request("m", true), &sink, &CancellationToken::new())
        .await
        .expect("chat");
    let mut want = vec![ContentBlock::text("Working on it.")];
    want.extend(calls.iter().map(|(id, name, args)| ContentBlock::ToolCall {
        id: id.clone(),
        name: name.clone(),
        arguments: args.clone(),
    }));
    assert_eq!(resp.content, want);
    assert_eq!(resp.stop_reason, StopReason::ToolUse);
    let starts: Vec<(usize, String)> = sink
        .tool_starts()
        .into_iter()
        .map(|(i, id, _)| (i, id))
        .collect();
    assert_eq!(
        starts,
        vec![(0, "c_a".into()), (1, "c_b".into()), (2, "c_c".into())]
    );
    // Text precedes the first tool start in the delta stream.
    assert!(matches!(sink.all().first(), Some(StreamDelta::Text(_))));
}

#[tokio::test]
async fn reasoning_in_both_spellings() {
    for field in [ReasoningField::Reasoning, ReasoningField::ReasoningContent] {
        for stream in [false, true] {
            let llm = server().await;
            llm.push(
                Reply::text("42")
                    .with_reasoning("Let me think about it.", field)
                    .chunk_size(5),
            );
            let p = openai(&llm);
            let sink = Collect::default();
            let resp = p
                .chat(&request("m", stream), &sink, &CancellationToken::new())
                .await
                .expect("chat");
            assert_eq!(
                resp.content,
                vec![
                    ContentBlock::Thinking {
                        thinking: "Let me think about it.".into(),
                        thinking_signature: None
                    },
                    ContentBlock::text("42"),
                ],
                "{field:?} stream={stream}"
            );
            if stream {
                assert_eq!(sink.reasoning(), "Let me think about it.");
            }
        }
    }
}

#[tokio::test]
async fn cached_tokens_are_split_out_of_input() {
    for stream in [false, true] {
        let llm = server().await;
        llm.push(Reply::text("ok").with_usage(100, 20).with_cached_tokens(60));
        let resp = openai(&llm)
            .chat(&request("m", stream), &NoSink, &CancellationToken::new())
            .await
            .expect("chat");
        assert_eq!(
            resp.usage,
            Usage {
                input: 40,
                output: 20,
                cache_read: 60,
                cache_write: 0,
                total_tokens: 120
            }
        );
    }
}

#[tokio::test]
async fn finish_reason_length() {
    let llm = server().await;
    llm.push(Reply::text("truncat").finish_reason("length"));
    let resp = openai(&llm)
        .chat(&request("m", true), &NoSink, &CancellationToken::new())
        .await
        .expect("chat");
    assert_eq!(resp.stop_reason, StopReason::Length);
}

#[tokio::test]
async fn history_body_carries_tool_call_ids_and_reasoning_echo() {
    let llm = server().await;
    llm.push(Reply::text("done"));
    let mut req = request("m", false);
    req.messages.push(Message::Assistant(AssistantMessage {
        content: vec![
            ContentBlock::Thinking {
                thinking: "need ls".into(),
                thinking_signature: None,
            },
            ContentBlock::text("Listing."),
            ContentBlock::ToolCall {
                id: "call_9".into(),
                name: "exec".into(),
                arguments: json!({"command": "ls"}),
            },
        ],
        provider: "openai".into(),
        model: "m".into(),
        usage: Usage::default(),
        stop_reason: StopReason::ToolUse,
        error_message: None,
        timestamp: 0,
    }));
    req.messages.push(Message::tool_result(
        "call_9",
        "exec",
        "a.txt\nb.txt",
        false,
    ));
    req.messages
        .push(Message::User(ferroclaw_types::UserMessage {
            content: vec![
                ContentBlock::text("and this?"),
                ContentBlock::Image {
                    data: "AAAA".into(),
                    mime_type: "image/png".into(),
                },
            ],
            timestamp: 0,
        }));
    openai(&llm)
        .chat(&req, &NoSink, &CancellationToken::new())
        .await
        .expect("chat");
    let body = &llm.requests()[0].body;
    let m = body["messages"].as_array().expect("messages");
    assert_eq!(m.len(), 5);
    let a = &m[2];
    assert_eq!(a["role"], "assistant");
    assert_eq!(a["content"], "Listing.");
    assert_eq!(a["reasoning_content"], "need ls");
    assert_eq!(a["reasoning"], "need ls");
    assert_eq!(a["tool_calls"][0]["id"], "call_9");
    assert_eq!(a["tool_calls"][0]["type"], "function");
    let args: Value = serde_json::from_str(
        a["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .expect("string args"),
    )
    .expect("json args");
    assert_eq!(args, json!({"command": "ls"}));
    assert_eq!(
        m[3],
        json!({"role": "tool", "tool_call_id": "call_9", "content": "a.txt\nb.txt"})
    );
    assert_eq!(
        m[4]["content"][0],
        json!({"type": "text", "text": "and this?"})
    );
    assert_eq!(
        m[4]["content"][1],
        json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}})
    );
}

#[tokio::test]
async fn cut_stream_is_broken_and_marked_streamed() {
    let llm = server().await;
    llm.push(Reply::text("a fairly long answer that will be cut").cut_after(3));
    let sink = Collect::default();
    let err = openai(&llm)
        .chat(&request("m", true), &sink, &CancellationToken::new())
        .await
        .expect_err("cut");
    assert_eq!(err.kind, ErrorKind::BrokenStream, "{err}");
    assert!(err.streamed);
    assert!(!err.retryable());
    assert_eq!((err.provider.as_str(), err.model.as_str()), ("openai", "m"));
    assert!(!sink.text().is_empty());
}

#[tokio::test]
async fn malformed_stream_and_body() {
    let llm = server().await;
    llm.push(Reply::text("hello world").malformed());
    let err = openai(&llm)
        .chat(&request("m", true), &NoSink, &CancellationToken::new())
        .await
        .expect_err("malformed sse");
    assert_eq!(err.kind, ErrorKind::BrokenStream);
    assert!(err.message.contains("unparseable"), "{err}");

    llm.push(Reply::text("hello world").malformed());
    let err = openai(&llm)
        .chat(&request("m", false), &NoSink, &CancellationToken::new())
        .await
        .expect_err("malformed json");
    assert_eq!(err.kind, ErrorKind::Malformed, "{err}");

    llm.push(Reply::text("hello world").cut_after(1));
    let err = openai(&llm)
        .chat(&request("m", false), &NoSink, &CancellationToken::new())
        .await
        .expect_err("truncated json");
    assert_eq!(err.kind, ErrorKind::Malformed, "{err}");
}

#[tokio::test]
async fn http_errors_name_status_and_message() {
    let llm = server().await;
    llm.push(Reply::status(401, "Incorrect API key provided"));
    llm.push(Reply::status(
        400,
        "This model's maximum context length is 8192 tokens",
    ));
    llm.push(Reply::status(404, "model `nope` does not exist"));
    let p = openai(&llm);
    let c = CancellationToken::new();
    let e = p
        .chat(&request("m", false), &NoSink, &c)
        .await
        .expect_err("401");
    assert_eq!((e.kind, e.status), (ErrorKind::Auth, Some(401)));
    assert_eq!(
        e.to_string(),
        "openai/m: HTTP 401: Incorrect API key provided"
    );
    let e = p
        .chat(&request("m", true), &NoSink, &c)
        .await
        .expect_err("400");
    assert_eq!(e.kind, ErrorKind::ContextOverflow);
    let e = p
        .chat(&request("nope", false), &NoSink, &c)
        .await
        .expect_err("404");
    assert_eq!(e.kind, ErrorKind::NotFound);
    assert!(e.should_fall_back());
}

#[tokio::test]
async fn list_models() {
    let llm = server().await;
    llm.set_models(vec!["gpt-a".into(), "gpt-b".into()]);
    let models = openai(&llm).list_models().await.expect("models");
    assert_eq!(models, vec!["gpt-a".to_string(), "gpt-b".to_string()]);
}
