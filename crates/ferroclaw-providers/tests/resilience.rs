//! Retry, fallback, cancellation and time-outs, through the scripted server.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed fixture should stop the test

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use ferroclaw_providers::{
    ErrorKind, FallbackChain, NoSink, OpenAiCompat, Provider, RetryPolicy, RetryingProvider,
    StreamDelta,
};
use ferroclaw_testkit::Reply;
use ferroclaw_types::ContentBlock;
use tokio_util::sync::CancellationToken;

fn fast_policy() -> RetryPolicy {
    RetryPolicy {
        attempts: 3,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        max_retry_after: Duration::from_secs(60),
        schedule: Vec::new(),
    }
}

#[tokio::test]
async fn rate_limit_with_retry_after_then_success() {
    for stream in [false, true] {
        let llm = server().await;
        llm.push(Reply::status(429, "Rate limit reached").retry_after("1"));
        llm.push(Reply::text("finally"));
        let r = RetryingProvider::new(openai(&llm), fast_policy());
        let resp = r
            .chat(&request("m", stream), &NoSink, &CancellationToken::new())
            .await
            .expect("chat");
        assert_eq!(resp.content, vec![ContentBlock::text("finally")]);
        assert_eq!(r.retries(), 1);
        assert_eq!(llm.requests().len(), 2);
    }
}

#[tokio::test]
async fn anthropic_overloaded_is_retried() {
    let llm = server().await;
    llm.push(Reply::status(529, "Overloaded"));
    llm.push(Reply::text("fine"));
    let r = RetryingProvider::new(anthropic(&llm), fast_policy());
    let resp = r
        .chat(&request("c", true), &NoSink, &CancellationToken::new())
        .await
        .expect("chat");
    assert_eq!(resp.content, vec![ContentBlock::text("fine")]);
    assert_eq!(r.retries(), 1);
}

#[tokio::test]
async fn server_errors_exhaust_attempts() {
    let llm = server().await;
    for _ in 0..3 {
        llm.push(Reply::status(500, "upstream exploded"));
    }
    llm.push(Reply::text("never reached"));
    let r = RetryingProvider::new(openai(&llm), fast_policy());
    let e = r
        .chat(&request("m", true), &NoSink, &CancellationToken::new())
        .await
        .expect_err("exhausted");
    assert_eq!((e.kind, e.status), (ErrorKind::Server, Some(500)));
    assert!(e.to_string().contains("HTTP 500"), "{e}");
    assert!(e.message.contains("upstream exploded"), "{e}");
    assert_eq!(r.retries(), 2);
    assert_eq!(llm.pending(), 1);
}

#[tokio::test]
async fn bad_request_is_not_retried() {
    let llm = server().await;
    llm.push(Reply::status(400, "messages: field required"));
    llm.push(Reply::text("never reached"));
    let r = RetryingProvider::new(openai(&llm), fast_policy());
    let e = r
        .chat(&request("m", false), &NoSink, &CancellationToken::new())
        .await
        .expect_err("400");
    assert_eq!((e.kind, e.status), (ErrorKind::BadRequest, Some(400)));
    assert_eq!(e.message, "messages: field required");
    assert_eq!(r.retries(), 0);
    assert_eq!(llm.pending(), 1);
}

#[tokio::test]
async fn long_retry_after_is_not_waited_for() {
    let llm = server().await;
    llm.push(Reply::status(429, "come back later").retry_after("3600"));
    llm.push(Reply::text("never reached"));
    let r = RetryingProvider::new(openai(&llm), fast_policy());
    let e = r
        .chat(&request("m", false), &NoSink, &CancellationToken::new())
        .await
        .expect_err("429");
    assert_eq!(e.kind, ErrorKind::RateLimited);
    assert_eq!(e.retry_after, Some(Duration::from_secs(3600)));
    assert_eq!(r.retries(), 0);
    assert_eq!(llm.pending(), 1);
}

#[tokio::test]
async fn stream_is_not_retried_after_first_delta() {
    for wire in ["openai", "anthropic"] {
        let llm = server().await;
        llm.push(
            Reply::text("partial answer that gets cut")
                .chunk_size(2)
                .cut_after(3),
        );
        llm.push(Reply::text("a retry would consume this"));
        let inner: Arc<dyn Provider> = if wire == "openai" {
            openai(&llm)
        } else {
            anthropic(&llm)
        };
        let r = RetryingProvider::new(inner, fast_policy());
        let sink = Collect::default();
        let e = r
            .chat(&request("m", true), &sink, &CancellationToken::new())
            .await
            .expect_err("cut");
        assert_eq!(e.kind, ErrorKind::BrokenStream, "{wire}: {e}");
        assert!(e.streamed, "{wire}");
        assert!(!sink.text().is_empty(), "{wire}: a delta was delivered");
        assert_eq!(r.retries(), 0, "{wire}");
        assert_eq!(llm.pending(), 1, "{wire}");
    }
}

#[tokio::test]
async fn stream_cut_before_first_delta_is_retried() {
    for wire in ["openai", "anthropic"] {
        let llm = server().await;
        // Headers arrive, then the connection drops before any event: nothing was shown yet.
        llm.push(Reply::text("lost").cut_after(0));
        llm.push(Reply::text("second try"));
        let inner: Arc<dyn Provider> = if wire == "openai" {
            openai(&llm)
        } else {
            anthropic(&llm)
        };
        let r = RetryingProvider::new(inner, fast_policy());
        let sink = Collect::default();
        let resp = r
            .chat(&request("m", true), &sink, &CancellationToken::new())
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "{wire}: {e} (retries {}, pending {}, streamed {})",
                    r.retries(),
                    llm.pending(),
                    e.streamed
                )
            });
        assert_eq!(
            resp.content,
            vec![ContentBlock::text("second try")],
            "{wire}"
        );
        assert_eq!(
            sink.text(),
            "second try",
            "{wire}: no text from the cut attempt"
        );
        assert_eq!(r.retries(), 1, "{wire}");
        assert_eq!(llm.pending(), 0, "{wire}");
    }
}

#[tokio::test]
async fn abort_mid_stream() {
    for wire in ["openai", "anthropic"] {
        let llm = server().await;
        llm.push(Reply::text("first words and then silence").hang_after(3));
        let inner: Arc<dyn Provider> = if wire == "openai" {
            openai(&llm)
        } else {
            anthropic(&llm)
        };
        let p = RetryingProvider::new(inner, fast_policy());
        let cancel = CancellationToken::new();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let sink = move |d: StreamDelta| {
            let _ = tx.send(d);
        };
        let req = request("m", true);
        let call = p.chat(&req, &sink, &cancel);
        tokio::pin!(call);
        // Drive the call until the first delta arrives, then abort.
        let first = tokio::select! {
            d = rx.recv() => d,
            r = &mut call => panic!("{wire}: finished before any delta: {r:?}"),
        };
        assert!(matches!(first, Some(StreamDelta::Text(_))), "{wire}");
        cancel.cancel();
        // Guard against a hang only; no timing assertion.
        let e = tokio::time::timeout(Duration::from_secs(10), call)
            .await
            .expect("abort must end the call")
            .expect_err("aborted");
        assert_eq!(e.kind, ErrorKind::Aborted, "{wire}: {e}");
        assert_eq!(p.retries(), 0);
    }
}

#[tokio::test]
async fn abort_while_waiting_for_headers() {
    let llm = server().await;
    llm.push(Reply::text("late").delay(Duration::from_secs(30)));
    let p = openai(&llm);
    let cancel = CancellationToken::new();
    let req = request("m", false);
    let call = p.chat(&req, &NoSink, &cancel);
    tokio::pin!(call);
    tokio::select! {
        _ = llm.wait_for_requests(1) => {}
        r = &mut call => panic!("finished early: {r:?}"),
    }
    cancel.cancel();
    let e = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("abort must end the call")
        .expect_err("aborted");
    assert_eq!(e.kind, ErrorKind::Aborted);
    assert_eq!(e.provider, "openai");
}

#[tokio::test]
async fn idle_gap_is_a_timeout() {
    let llm = server().await;
    llm.push(Reply::text("then nothing").hang_after(2));
    let mut cfg = openai_cfg(&llm);
    cfg.idle_timeout = Duration::from_millis(200);
    let p = OpenAiCompat::new(cfg).expect("provider");
    let e = p
        .chat(&request("m", true), &NoSink, &CancellationToken::new())
        .await
        .expect_err("idle");
    assert_eq!(e.kind, ErrorKind::Timeout, "{e}");
    assert!(e.streamed, "a text delta was delivered before the gap");
}

#[tokio::test]
async fn connection_refused_is_network() {
    // Bind then drop to get a port nobody listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let mut cfg = ferroclaw_providers::OpenAiCompatConfig::new(
        "local",
        format!("http://127.0.0.1:{port}/v1"),
    );
    cfg.request_timeout = Duration::from_secs(10);
    let p = OpenAiCompat::new(cfg).expect("provider");
    let e = p
        .chat(&request("m", false), &NoSink, &CancellationToken::new())
        .await
        .expect_err("refused");
    assert_eq!(e.kind, ErrorKind::Network, "{e}");
    assert!(e.retryable());
    assert_eq!(e.provider, "local");
}

#[tokio::test]
async fn fallback_cools_down_the_model_not_the_provider() {
    let llm = server().await;
    let p = openai(&llm);
    let chain = FallbackChain::new(
        vec![(p.clone(), "model-1".into()), (p.clone(), "model-2".into())],
        Duration::from_secs(60),
    );
    assert_eq!(chain.name(), "openai");

    llm.push(Reply::status(429, "rate limited on model-1"));
    llm.push(Reply::text("from model-2"));
    let mut req = request("ignored", true);
    let resp = chain
        .chat(&req, &NoSink, &CancellationToken::new())
        .await
        .expect("fallback");
    assert_eq!(resp.content, vec![ContentBlock::text("from model-2")]);
    assert_eq!(
        (resp.provider.as_str(), resp.model.as_str()),
        ("openai", "model-2")
    );
    assert_eq!(
        chain.cooling(),
        vec![("openai".to_string(), "model-1".to_string())]
    );

    // model-1 is skipped while cooling; model-2 of the same provider is still used.
    llm.push(Reply::text("model-2 again"));
    req.stream = false;
    let resp = chain
        .chat(&req, &NoSink, &CancellationToken::new())
        .await
        .expect("second call");
    assert_eq!(resp.model, "model-2");
    let models: Vec<String> = llm
        .requests()
        .iter()
        .map(|r| r.body["model"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(models, vec!["model-1", "model-2", "model-2"]);
}

#[tokio::test]
async fn fallback_all_cooling_tries_the_soonest() {
    let llm = server().await;
    let p = openai(&llm);
    let chain = FallbackChain::new(
        vec![(p.clone(), "a".into()), (p.clone(), "b".into())],
        Duration::from_secs(60),
    );
    llm.push(Reply::status(503, "a is down").retry_after("120"));
    llm.push(Reply::status(500, "b is down"));
    let e = chain
        .chat(&request("x", false), &NoSink, &CancellationToken::new())
        .await
        .expect_err("all fail");
    assert_eq!((e.kind, e.status), (ErrorKind::Server, Some(500)));
    assert!(e.message.contains("openai/a: HTTP 503: a is down"), "{e}");
    assert!(e.message.contains("openai/b: HTTP 500: b is down"), "{e}");
    assert_eq!(chain.cooling().len(), 2);

    // Both cooling: `b` (60 s) ends before `a` (Retry-After 120 s).
    llm.push(Reply::text("b is back"));
    let resp = chain
        .chat(&request("x", false), &NoSink, &CancellationToken::new())
        .await
        .expect("soonest");
    assert_eq!(resp.model, "b");
    assert_eq!(
        chain.cooling(),
        vec![("openai".to_string(), "a".to_string())]
    );
}

#[tokio::test]
async fn fallback_surfaces_non_fallback_errors_at_once() {
    let llm = server().await;
    let p = openai(&llm);
    let chain = FallbackChain::new(
        vec![(p.clone(), "a".into()), (p.clone(), "b".into())],
        Duration::from_secs(60),
    );
    llm.push(Reply::status(400, "bad tool schema"));
    llm.push(Reply::text("never reached"));
    let e = chain
        .chat(&request("x", false), &NoSink, &CancellationToken::new())
        .await
        .expect_err("400");
    assert_eq!(e.kind, ErrorKind::BadRequest);
    assert_eq!(e.model, "a");
    assert_eq!(llm.pending(), 1);
    assert!(chain.cooling().is_empty());
}

#[tokio::test]
async fn fallback_over_retrying_providers_across_wires() {
    let llm = server().await;
    let first: Arc<dyn Provider> = Arc::new(RetryingProvider::new(openai(&llm), fast_policy()));
    let second: Arc<dyn Provider> = Arc::new(RetryingProvider::new(anthropic(&llm), fast_policy()));
    let chain = FallbackChain::new(
        vec![(first, "gpt".into()), (second, "claude".into())],
        Duration::from_secs(60),
    );
    for _ in 0..3 {
        llm.push(Reply::status(502, "bad gateway"));
    }
    llm.push(Reply::text("claude here"));
    let resp = chain
        .chat(&request("x", true), &NoSink, &CancellationToken::new())
        .await
        .expect("fallback");
    assert_eq!(
        (resp.provider.as_str(), resp.model.as_str()),
        ("anthropic", "claude")
    );
    let paths: Vec<String> = llm.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        paths,
        vec![
            "/v1/chat/completions",
            "/v1/chat/completions",
            "/v1/chat/completions",
            "/v1/messages"
        ]
    );
}

/// A 50 MB reply on both wires, streamed and as one JSON body: reading stops soon after
/// the cap, the error names it, and it is neither retried nor sent to the next model.
#[tokio::test]
async fn oversized_reply_stops_reading_and_is_not_retried() {
    const PIECE: usize = 1024;
    const TIMES: usize = 50 * 1024; // 50 MiB
    const CAP: usize = 64 * 1024;
    let piece = "y".repeat(PIECE);
    for anthropic_wire in [false, true] {
        for stream in [false, true] {
            let what = format!("anthropic={anthropic_wire} stream={stream}");
            let llm = server().await;
            llm.push(Reply::repeated_text(piece.clone(), TIMES));
            llm.push(Reply::text("a second answer that must not be asked for"));
            let raw: Arc<dyn Provider> = if anthropic_wire {
                anthropic(&llm)
            } else {
                openai(&llm)
            };
            let retrying: Arc<dyn Provider> = Arc::new(RetryingProvider::new(raw, fast_policy()));
            let chain = FallbackChain::new(
                vec![(retrying.clone(), "m1".into()), (retrying, "m2".into())],
                Duration::from_secs(60),
            );
            let mut req = request("m1", stream);
            req.max_reply_bytes = Some(CAP);
            let sink = Collect::default();
            let err = chain
                .chat(&req, &sink, &CancellationToken::new())
                .await
                .expect_err(&what);
            assert_eq!(err.kind, ErrorKind::ReplyTooLarge, "{what}: {err}");
            assert!(
                err.to_string()
                    .contains("the model's reply exceeded 65536 bytes; it was discarded"),
                "{what}: {err}"
            );
            assert_eq!(llm.requests().len(), 1, "{what}: retried or fell back");
            assert_eq!(llm.pending(), 1, "{what}");
            // What reached the client never passed the cap.
            assert!(sink.text().len() <= CAP, "{what}: {}", sink.text().len());
            // The server got to hand out only a small part of the 50 MiB before the
            // client hung up (the rest of what it sent sits in socket buffers).
            let sent = llm.repeated_bytes_sent();
            assert!(
                sent < (PIECE * TIMES / 4) as u64,
                "{what}: {sent} bytes were sent"
            );
        }
    }
}

/// Just under the cap is an ordinary answer, streamed or not, on both wires.
#[tokio::test]
async fn reply_just_under_the_cap_is_accepted() {
    let piece = "z\n".repeat(512);
    for anthropic_wire in [false, true] {
        for stream in [false, true] {
            let llm = server().await;
            llm.push(Reply::repeated_text(piece.clone(), 63));
            let p: Arc<dyn Provider> = if anthropic_wire {
                anthropic(&llm)
            } else {
                openai(&llm)
            };
            let mut req = request("m", stream);
            req.max_reply_bytes = Some(64 * 1024);
            let resp = p
                .chat(&req, &NoSink, &CancellationToken::new())
                .await
                .expect("under the cap");
            assert_eq!(
                resp.content,
                vec![ContentBlock::text(piece.repeat(63))],
                "anthropic={anthropic_wire} stream={stream}"
            );
        }
    }
}

/// A stream whose single event never ends its line: it is buffered whole by the SSE
/// parser, so the line itself is capped (JSON escaping allowance included).
#[tokio::test]
async fn one_endless_stream_event_is_cut_off() {
    const PIECE: usize = 1024;
    const TIMES: usize = 50 * 1024;
    for anthropic_wire in [false, true] {
        let llm = server().await;
        llm.push(Reply::repeated_text("v".repeat(PIECE), TIMES).in_one_event());
        let p: Arc<dyn Provider> = if anthropic_wire {
            anthropic(&llm)
        } else {
            openai(&llm)
        };
        let mut req = request("m", true);
        req.max_reply_bytes = Some(64 * 1024);
        let err = p
            .chat(&req, &NoSink, &CancellationToken::new())
            .await
            .expect_err("over the cap");
        assert_eq!(err.kind, ErrorKind::ReplyTooLarge, "{err}");
        assert!(err.message.contains("exceeded 65536 bytes"), "{err}");
        let sent = llm.repeated_bytes_sent();
        assert!(sent < (PIECE * TIMES / 4) as u64, "{sent} bytes sent");
    }
}
