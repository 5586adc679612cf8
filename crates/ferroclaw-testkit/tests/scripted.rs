//! Drives the scripted server with a real HTTP client (reqwest).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed fixture should stop the test

use std::time::{Duration, Instant};

use ferroclaw_testkit::{temp_home, Protocol, ReasoningField, Reply, ScriptedLlm};
use serde_json::{json, Value};

async fn post(url: &str, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .header("x-api-key", "secret-key")
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .expect("request failed")
}

fn openai_url(llm: &ScriptedLlm) -> String {
    format!("{}/chat/completions", llm.openai_base_url())
}

fn anthropic_url(llm: &ScriptedLlm) -> String {
    format!("{}/v1/messages", llm.anthropic_base_url())
}

/// Reads the body chunk by chunk; returns the text so far and whether the
/// transfer ended with a transport error (abrupt close).
async fn read_all(mut resp: reqwest::Response) -> (String, bool) {
    let mut buf = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(c)) => buf.extend_from_slice(&c),
            Ok(None) => return (String::from_utf8_lossy(&buf).into_owned(), false),
            Err(_) => return (String::from_utf8_lossy(&buf).into_owned(), true),
        }
    }
}

/// `data:` payloads of an SSE body, in order.
fn data_lines(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter_map(|ev| ev.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(str::to_string)
        .collect()
}

/// (event name, parsed data) pairs of an Anthropic SSE body.
fn anthropic_events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|ev| !ev.trim().is_empty())
        .map(|ev| {
            let name = ev
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .expect("event line")
                .to_string();
            let data = ev
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .expect("data line");
            (name, serde_json::from_str(data).expect("event JSON"))
        })
        .collect()
}

#[tokio::test]
async fn openai_json_text_answer() {
    let llm = ScriptedLlm::start().await.unwrap();
    llm.push(
        Reply::text("hello there")
            .with_usage(10, 3)
            .with_cached_tokens(4)
            .with_reasoning("thinking...", ReasoningField::ReasoningContent),
    );
    let resp = post(&openai_url(&llm), json!({"model": "gpt-x", "messages": []})).await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "gpt-x");
    let choice = &v["choices"][0];
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["message"]["content"], "hello there");
    assert_eq!(choice["message"]["reasoning_content"], "thinking...");
    assert!(choice["message"].get("reasoning").is_none());
    assert!(choice["message"].get("tool_calls").is_none());
    assert_eq!(choice["finish_reason"], "stop");
    assert_eq!(
        v["usage"],
        json!({"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13,
               "prompt_tokens_details": {"cached_tokens": 4}})
    );
    assert_eq!(llm.pending(), 0);
}

#[tokio::test]
async fn openai_json_tool_calls_and_v1_less_route() {
    let llm = ScriptedLlm::start().await.unwrap();
    llm.push(Reply::tool_call("call_1", "exec", json!({"command": "ls"})));
    let url = format!("{}/chat/completions", llm.base_url());
    let v: Value = post(&url, json!({"model": "m"}))
        .await
        .json()
        .await
        .unwrap();
    let msg = &v["choices"][0]["message"];
    assert_eq!(msg["content"], Value::Null);
    assert_eq!(msg["tool_calls"][0]["id"], "call_1");
    assert_eq!(msg["tool_calls"][0]["type"], "function");
    assert_eq!(msg["tool_calls"][0]["function"]["name"], "exec");
    let args: Value = serde_json::from_str(
        msg["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(args, json!({"command": "ls"}));
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(llm.requests()[0].path, "/chat/completions");
}

#[tokio::test]
async fn anthropic_json_answer_with_thinking_and_tool_use() {
    let llm = ScriptedLlm::start().await.unwrap();
    llm.push(
        Reply::tool_call("toolu_1", "read", json!({"path": "a.txt"}))
            .with_text("let me look")
            .with_reasoning("hmm", ReasoningField::Reasoning)
            .with_usage(20, 5)
            .with_cached_tokens(7),
    );
    let resp = post(
        &anthropic_url(&llm),
        json!({"model": "claude-x", "messages": []}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["type"], "message");
    assert_eq!(v["model"], "claude-x");
    assert_eq!(v["stop_reason"], "tool_use");
    let content = v["content"].as_array().unwrap();
    assert_eq!(content.len(), 3);
    assert_eq!(content[0]["type"], "thinking");
    assert_eq!(content[0]["thinking"], "hmm");
    assert!(content[0]["signature"]
        .as_str()
        .is_some_and(|s| !s.is_empty()));
    assert_eq!(content[1], json!({"type": "text", "text": "let me look"}));
    assert_eq!(
        content[2],
        json!({"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.txt"}})
    );
    assert_eq!(
        v["usage"],
        json!({"input_tokens": 20, "output_tokens": 5, "cache_read_input_tokens": 7})
    );
}

#[tokio::test]
async fn anthropic_finish_reason_length_maps_to_max_tokens() {
    let llm = ScriptedLlm::start().await.unwrap();
    llm.push(Reply::text("cut").finish_reason("length"));
    let v: Value = post(&anthropic_url(&llm), json!({"model": "c"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["stop_reason"], "max_tokens");
}

#[tokio::test]
async fn openai_sse_text_stream_is_well_formed() {
    let llm = ScriptedLlm::start().await.unwrap();
    llm.push(
        Reply::text("Hello, streaming world!")
            .with_reasoning("why not", ReasoningField::Reasoning)
            .chunk_size(5)
            .with_usage(8, 6),
    );
    let resp = post(&openai_url(&llm), json!({"model": "gpt-s", "stream": true})).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let (body, aborted) = read_all(resp).await;
    assert!(!aborted);
    let lines = data_lines(&body);
    assert_eq!(lines.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = lines[..lines.len() - 1]
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(chunks
        .iter()
        .all(|c| c["object"] == "chat.completion.chunk"));
    assert!(chunks.iter().all(|c| c["model"] == "gpt-s"));
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");

    let field = |name: &str| -> String {
        chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"][name].as_str())
            .collect()
    };
    assert_eq!(field("content"), "Hello, streaming world!");
    assert_eq!(field("reasoning"), "why not");
    // chunk_size(5): no content delta longer than 5 chars.
    assert!(chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .all(|s| s.chars().count() <= 5));

    let n = chunks.len();
    assert_eq!(chunks[n - 2]["choices"][0]["finish_reason"], "stop");
    assert_eq!(chunks[n - 1]["choices"], json!([]));
    assert_eq!(chunks[n - 1]["usage"]["total_tokens"], 14);
}

#[tokio::test]
async fn openai_sse_parallel_tool_call_fragments_reassemble() {
    let llm = ScriptedLlm::start().await.unwrap();
    let a = json!({"command": "ls -la", "cwd": "/tmp"});
    let b = json!({"q": "ünïcödé"});
    llm.push(
        Reply::tool_calls(vec![
            ("call_a".into(), "exec".into(), a.clone()),
            ("call_b".into(), "search".into(), b.clone()),
        ])
        .with_text("two calls")
        // A huge chunk size must still yield >= 2 fragments per call.
        .chunk_size(1000),
    );
    let resp = post(&openai_url(&llm), json!({"model": "m", "stream": true})).await;
    let (body, aborted) = read_all(resp).await;
    assert!(!aborted);
    let lines = data_lines(&body);
    assert_eq!(lines.last().unwrap(), "[DONE]");
    let mut calls: Vec<(String, String, String, usize)> = Vec::new();
    let mut finish = None;
    for l in &lines[..lines.len() - 1] {
        let c: Value = serde_json::from_str(l).unwrap();
        if let Some(f) = c["choices"][0]["finish_reason"].as_str() {
            finish = Some(f.to_string());
        }
        let Some(tcs) = c["choices"][0]["delta"]["tool_calls"].as_array() else {
            continue;
        };
        for tc in tcs {
            let idx = tc["index"].as_u64().unwrap() as usize;
            if idx == calls.len() {
                // First fragment of a call carries id, type and name.
                assert_eq!(tc["type"], "function");
                calls.push((
                    tc["id"].as_str().unwrap().into(),
                    tc["function"]["name"].as_str().unwrap().into(),
                    String::new(),
                    0,
                ));
            } else {
                assert!(tc.get("id").is_none() && tc["function"].get("name").is_none());
            }
            calls[idx].2 += tc["function"]["arguments"].as_str().unwrap();
            calls[idx].3 += 1;
        }
    }
    assert_eq!(finish.as_deref(), Some("tool_calls"));
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].0.as_str(), calls[0].1.as_str()),
        ("call_a", "exec")
    );
    assert_eq!(
        (calls[1].0.as_str(), calls[1].1.as_str()),
        ("call_b", "search")
    );
    assert_eq!(serde_json::from_str::<Value>(&calls[0].2).unwrap(), a);
    assert_eq!(serde_json::from_str::<Value>(&calls[1].2).unwrap(), b);
    assert!(calls.iter().all(|c| c.3 >= 2), "fragments: {calls:?}");
}

#[tokio::test]
async fn anthropic_sse_stream_is_well_formed() {
    let llm = ScriptedLlm::start().await.unwrap();
    let args = json!({"path": "notes/today.md", "limit": 10});
    llm.push(
        Reply::tool_call("toolu_9", "read", args.clone())
            .with_text("Reading the file now.")
            .with_reasoning("I should read it", ReasoningField::Reasoning)
            .with_usage(30, 12)
            .with_cached_tokens(3),
    );
    let resp = post(
        &anthropic_url(&llm),
        json!({"model": "claude-s", "stream": true}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let (body, aborted) = read_all(resp).await;
    assert!(!aborted);
    let events = anthropic_events(&body);
    for (name, data) in &events {
        assert_eq!(data["type"], name.as_str());
    }
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(
        &names[names.len() - 2..],
        &["message_delta", "message_stop"]
    );
    let start = &events[0].1["message"];
    assert_eq!(start["model"], "claude-s");
    assert_eq!(start["usage"]["input_tokens"], 30);
    assert_eq!(start["usage"]["cache_read_input_tokens"], 3);
    let delta = &events[events.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(delta["usage"]["output_tokens"], 12);

    // Blocks in order: thinking (0), text (1), tool_use (2).
    let starts: Vec<&Value> = events
        .iter()
        .filter(|(n, _)| n == "content_block_start")
        .map(|(_, d)| d)
        .collect();
    let kinds: Vec<&str> = starts
        .iter()
        .map(|d| d["content_block"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["thinking", "text", "tool_use"]);
    assert_eq!(starts[2]["content_block"]["id"], "toolu_9");
    assert_eq!(starts[2]["content_block"]["name"], "read");
    let stops = events
        .iter()
        .filter(|(n, _)| n == "content_block_stop")
        .count();
    assert_eq!(stops, 3);

    let deltas = |idx: u64, kind: &str, key: &str| -> Vec<String> {
        events
            .iter()
            .filter(|(n, d)| {
                n == "content_block_delta" && d["index"] == idx && d["delta"]["type"] == kind
            })
            .map(|(_, d)| d["delta"][key].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        deltas(0, "thinking_delta", "thinking").concat(),
        "I should read it"
    );
    assert_eq!(deltas(0, "signature_delta", "signature").len(), 1);
    assert_eq!(
        deltas(1, "text_delta", "text").concat(),
        "Reading the file now."
    );
    let json_parts = deltas(2, "input_json_delta", "partial_json");
    assert!(json_parts.len() >= 2);
    assert_eq!(
        serde_json::from_str::<Value>(&json_parts.concat()).unwrap(),
        args
    );
}

#[tokio::test]
async fn status_reply_uses_protocol_error_shape_and_retry_after() {
    let llm = ScriptedLlm::start().await.unwrap();
    llm.push(Reply::status(429, "slow down").retry_after("7"));
    llm.push(Reply::status(529, "overloaded").retry_after("Wed, 21 Oct 2015 07:28:00 GMT"));

    let resp = post(&openai_url(&llm), json!({"model": "m", "stream": true})).await;
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "7");
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["message"], "slow down");
    assert!(v["error"]["type"].is_string());
    assert!(v["error"].get("code").is_some());

    let resp = post(&anthropic_url(&llm), json!({"model": "m"})).await;
    assert_eq!(resp.status(), 529);
    assert_eq!(
        resp.headers()["retry-after"],
        "Wed, 21 Oct 2015 07:28:00 GMT"
    );
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "overloaded_error");
    assert_eq!(v["error"]["message"], "overloaded");
}

// Multi-thread flavour: the abort must also reach the client when server and
// client run on different worker threads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_after_aborts_streams_without_terminator() {
    let llm = ScriptedLlm::start().await.unwrap();
    llm.push(Reply::text("abcdefghijklmnop").cut_after(3));
    llm.push(Reply::text("abcdefghijklmnop").cut_after(2));

    let resp = post(&openai_url(&llm), json!({"model": "m", "stream": true})).await;
    let (body, aborted) = read_all(resp).await;
    assert!(aborted, "expected a transport error, got clean end: {body}");
    let lines = data_lines(&body);
    assert_eq!(lines.len(), 3);
    assert!(!body.contains("[DONE]"));

    let resp = post(&anthropic_url(&llm), json!({"model": "m", "stream": true})).await;
    let (body, aborted) = read_all(resp).await;
    assert!(aborted);
    let events = anthropic_events(&body);
    assert_eq!(events.len(), 2);
    assert!(!body.contains("message_stop"));

    // Cut before the first event: headers arrive, then the body fails.
    llm.push(Reply::text("x").cut_after(0));
    let resp = post(&anthropic_url(&llm), json!({"model": "m", "stream": true})).await;
    assert_eq!(resp.status(), 200);
    let (body, aborted) = read_all(resp).await;
    assert!(aborted);
    assert!(body.is_empty());
}

#[tokio::test]
async fn cut_after_non_streaming_sends_truncated_json() {
    let llm = ScriptedLlm::start().await.unwrap();
    llm.push(Reply::text("hello").cut_after(0));
    let resp = post(&openai_url(&llm), json!({"model": "m"})).await;
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    assert!(text.starts_with('{'));
    assert!(serde_json::from_str::<Value>(&text).is_err());
}

#[tokio::test]
async fn malformed_bodies_in_both_modes() {
    let llm = ScriptedLlm::start().await.unwrap();
    llm.push(Reply::text("x").malformed());
    llm.push(Reply::text("hello").malformed());

    let resp = post(&openai_url(&llm), json!({"model": "m"})).await;
    assert_eq!(resp.status(), 200);
    assert!(serde_json::from_str::<Value>(&resp.text().await.unwrap()).is_err());

    let resp = post(&openai_url(&llm), json!({"model": "m", "stream": true})).await;
    let (body, _) = read_all(resp).await;
    let lines = data_lines(&body);
    assert!(serde_json::from_str::<Value>(&lines[0]).is_ok());
    assert!(serde_json::from_str::<Value>(&lines[1]).is_err());
}

#[tokio::test]
async fn hang_after_holds_the_stream_until_shutdown() {
    let llm = ScriptedLlm::start().await.unwrap();
    llm.push(Reply::text("abcdefgh").hang_after(2));
    let mut resp = post(&openai_url(&llm), json!({"model": "m", "stream": true})).await;
    let mut got = String::new();
    while data_lines(&got).len() < 2 {
        let chunk = resp.chunk().await.unwrap().expect("stream ended early");
        got.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert_eq!(data_lines(&got).len(), 2);
    // Nothing more arrives until the server is shut down; then it is cut.
    llm.shutdown();
    let (rest, aborted) = read_all(resp).await;
    assert!(aborted);
    assert!(rest.is_empty());
}

#[tokio::test]
async fn delay_postpones_the_answer() {
    let llm = ScriptedLlm::start().await.unwrap();
    llm.push(Reply::text("late").delay(Duration::from_millis(150)));
    let t0 = Instant::now();
    let resp = post(&openai_url(&llm), json!({"model": "m"})).await;
    assert_eq!(resp.status(), 200);
    assert!(t0.elapsed() >= Duration::from_millis(150));
}

#[tokio::test]
async fn empty_queue_is_a_loud_500() {
    let llm = ScriptedLlm::start().await.unwrap();
    let resp = post(&openai_url(&llm), json!({"model": "m"})).await;
    assert_eq!(resp.status(), 500);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["message"], "scripted LLM: no reply queued");

    let resp = post(&anthropic_url(&llm), json!({"model": "m"})).await;
    assert_eq!(resp.status(), 500);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["message"], "scripted LLM: no reply queued");
}

#[tokio::test]
async fn invalid_json_is_400_and_not_recorded() {
    let llm = ScriptedLlm::start().await.unwrap();
    llm.push(Reply::text("kept"));
    let resp = reqwest::Client::new()
        .post(anthropic_url(&llm))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "invalid_request_error");
    assert!(llm.requests().is_empty());
    assert_eq!(llm.pending(), 1);
}

#[tokio::test]
async fn requests_are_recorded_with_headers_and_body() {
    let llm = ScriptedLlm::start().await.unwrap();
    llm.push(Reply::text("one"));
    llm.push(Reply::text("two"));
    assert_eq!(llm.pending(), 2);
    let body_a = json!({"model": "a", "messages": [{"role": "user", "content": "hi"}]});
    let body_b = json!({"model": "b", "system": "be nice", "messages": []});
    post(&openai_url(&llm), body_a.clone()).await;
    post(&anthropic_url(&llm), body_b.clone()).await;
    // /models is not a chat request and must not be recorded.
    reqwest::get(format!("{}/models", llm.openai_base_url()))
        .await
        .unwrap();

    let reqs = llm.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].protocol, Protocol::OpenAi);
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(reqs[0].path, "/v1/chat/completions");
    assert_eq!(reqs[0].body, body_a);
    assert_eq!(reqs[1].protocol, Protocol::Anthropic);
    assert_eq!(reqs[1].path, "/v1/messages");
    assert_eq!(reqs[1].body, body_b);
    assert_eq!(reqs[1].header("X-Api-Key"), Some("secret-key"));
    assert_eq!(reqs[1].header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(reqs[1].header("x-missing"), None);
    assert_eq!(llm.pending(), 0);
}

#[tokio::test]
async fn wait_for_requests_resolves_when_requests_arrive() {
    let llm = ScriptedLlm::start().await.unwrap();
    llm.push(Reply::text("a"));
    llm.push(Reply::text("b"));
    let waiter = {
        let llm = llm.clone();
        tokio::spawn(async move { llm.wait_for_requests(2).await })
    };
    let url = openai_url(&llm);
    post(&url, json!({"model": "m"})).await;
    post(&url, json!({"model": "m"})).await;
    // The timeout only turns a hang into a failure; it does not synchronise.
    tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("wait_for_requests did not resolve")
        .unwrap();
    // Already satisfied: resolves at once.
    llm.wait_for_requests(1).await;
}

#[tokio::test]
async fn models_endpoint_lists_configured_ids() {
    let llm = ScriptedLlm::start().await.unwrap();
    let v: Value = reqwest::get(format!("{}/models", llm.openai_base_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["object"], "list");
    assert_eq!(v["data"][0]["id"], "scripted-model");
    assert_eq!(v["data"][0]["object"], "model");

    llm.set_models(vec!["a".into(), "b".into()]);
    let v: Value = reqwest::get(format!("{}/models", llm.base_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a", "b"]);
}

#[tokio::test]
async fn dropping_the_last_handle_stops_the_server() {
    let llm = ScriptedLlm::start().await.unwrap();
    let addr = llm.base_url().trim_start_matches("http://").to_string();
    let clone = llm.clone();
    drop(llm);
    // Still one handle: the server must keep answering.
    assert!(tokio::net::TcpStream::connect(&addr).await.is_ok());
    drop(clone);
    // The serve task stops asynchronously; yield until the listener is gone.
    tokio::time::timeout(Duration::from_secs(10), async {
        while tokio::net::TcpStream::connect(&addr).await.is_ok() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("server kept accepting after the last handle was dropped");
}

#[test]
fn temp_home_is_a_fresh_directory() {
    let a = temp_home();
    let b = temp_home();
    assert!(a.path().is_dir());
    assert_ne!(a.path(), b.path());
    assert_eq!(std::fs::read_dir(a.path()).unwrap().count(), 0);
}

// ----- MCP HTTP fixture -----

/// One MCP POST the way a streamable-HTTP client sends it.
async fn mcp_post(
    client: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: Value,
) -> reqwest::Result<reqwest::Response> {
    let mut req = client
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("x-fixture-token", "header-token")
        .json(&body);
    if let Some(id) = session {
        req = req
            .header("mcp-session-id", id)
            .header("mcp-protocol-version", "2025-06-18");
    }
    req.send().await
}

fn mcp_initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "scripted-test", "version": "0"}
    }})
}

fn mcp_call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments}})
}

/// Opens a session (initialize + initialized); returns its id.
async fn mcp_session(client: &reqwest::Client, url: &str) -> String {
    let resp = mcp_post(client, url, None, mcp_initialize())
        .await
        .expect("initialize");
    assert_eq!(resp.status(), 200);
    let session = resp
        .headers()
        .get("mcp-session-id")
        .expect("a stateful server answers initialize with mcp-session-id")
        .to_str()
        .unwrap()
        .to_string();
    let (body, cut) = read_all(resp).await;
    assert!(!cut);
    assert!(body.contains(r#""listChanged":true"#), "{body}");
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let resp = mcp_post(client, url, Some(&session), note).await.unwrap();
    assert_eq!(resp.status(), 202);
    session
}

#[tokio::test]
async fn mcp_http_fixture_serves_tools_and_dies_on_stop() {
    use ferroclaw_testkit::mcp::{FixtureOptions, HttpFixture};

    let fixture = HttpFixture::start(FixtureOptions::default()).await;
    let url = fixture.url();
    let port = fixture.port();
    assert_eq!(url, format!("http://127.0.0.1:{port}/mcp"));
    let client = reqwest::Client::new();
    let session = mcp_session(&client, &url).await;

    let resp = mcp_post(
        &client,
        &url,
        Some(&session),
        mcp_call(2, "add", json!({"a": 2, "b": 40})),
    )
    .await
    .unwrap();
    let (body, _) = read_all(resp).await;
    assert!(body.contains(r#""text":"42""#), "{body}");

    // The request's headers reach the handler.
    let resp = mcp_post(
        &client,
        &url,
        Some(&session),
        mcp_call(3, "whoami", json!({})),
    )
    .await
    .unwrap();
    let (body, _) = read_all(resp).await;
    assert!(body.contains(r#""text":"header-token""#), "{body}");

    let resp = mcp_post(
        &client,
        &url,
        Some(&session),
        mcp_call(4, "exit", json!({})),
    )
    .await
    .unwrap();
    let (body, _) = read_all(resp).await;
    assert!(
        body.contains("not in http mode") && body.contains(r#""isError":true"#),
        "{body}"
    );

    fixture.stop().await;
    let err = mcp_post(
        &client,
        &url,
        Some(&session),
        mcp_call(6, "add", json!({"a": 1, "b": 1})),
    )
    .await
    .expect_err("a stopped fixture still answered");
    assert!(err.is_connect() || err.is_request(), "{err:?}");

    // Back on the same port: a fresh server that forgot the old session.
    let fixture = HttpFixture::start_on(port, FixtureOptions::default())
        .await
        .expect("rebinding the same port");
    assert_eq!(fixture.url(), url);
    let resp = mcp_post(
        &client,
        &url,
        Some(&session),
        mcp_call(7, "add", json!({"a": 1, "b": 1})),
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), 404);
    mcp_session(&client, &url).await;
    fixture.stop().await;
}

#[tokio::test]
async fn mcp_http_fixture_announces_added_tools_on_the_get_stream() {
    use ferroclaw_testkit::mcp::{FixtureOptions, HttpFixture};

    let fixture = HttpFixture::start(FixtureOptions::default()).await;
    let url = fixture.url();
    let client = reqwest::Client::new();
    let session = mcp_session(&client, &url).await;

    // rmcp sends notifications not tied to a request on the standalone GET stream.
    let mut stream = client
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);

    let resp = mcp_post(
        &client,
        &url,
        Some(&session),
        mcp_call(2, "add_tool", json!({"name": "zed"})),
    )
    .await
    .unwrap();
    let (body, _) = read_all(resp).await;
    assert!(body.contains("added zed"), "{body}");

    let mut seen = String::new();
    tokio::time::timeout(Duration::from_secs(5), async {
        while !seen.contains("notifications/tools/list_changed") {
            let chunk = stream.chunk().await.unwrap().expect("GET stream ended");
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no tools/list_changed on the GET stream: {seen}"));

    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
    let (body, _) = read_all(mcp_post(&client, &url, Some(&session), list).await.unwrap()).await;
    assert!(body.contains(r#""name":"zed""#), "{body}");
    let resp = mcp_post(&client, &url, Some(&session), mcp_call(4, "zed", json!({})))
        .await
        .unwrap();
    let (body, _) = read_all(resp).await;
    assert!(body.contains("I am zed"), "{body}");

    // The init delay holds back the answer to initialize.
    let slow = HttpFixture::start(FixtureOptions {
        init_delay: Duration::from_millis(400),
        ..FixtureOptions::default()
    })
    .await;
    let started = Instant::now();
    mcp_session(&client, &slow.url()).await;
    assert!(started.elapsed() >= Duration::from_millis(400));
    slow.stop().await;
    fixture.stop().await;
}

#[tokio::test]
async fn mcp_stdio_fixture_answers_and_exits_on_request() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    let mut child = tokio::process::Command::new(ferroclaw_testkit::mcp::fixture_bin())
        .env("FIXTURE_TOKEN", "env-token")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawning the stdio fixture");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = async |msg: Value| {
        stdin
            .write_all(format!("{msg}\n").as_bytes())
            .await
            .unwrap();
    };
    let mut next = async || -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("the fixture went quiet")
            .unwrap()
            .expect("the fixture closed stdout");
        serde_json::from_str(&line).unwrap()
    };

    send(mcp_initialize()).await;
    let init = next().await;
    assert_eq!(init["result"]["capabilities"]["tools"]["listChanged"], true);
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    send(mcp_call(2, "whoami", json!({}))).await;
    assert_eq!(next().await["result"]["content"][0]["text"], "env-token");
    send(mcp_call(3, "exit", json!({}))).await;
    assert_eq!(next().await["result"]["content"][0]["text"], "exiting");
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("the fixture did not exit")
        .unwrap();
    assert_eq!(status.code(), Some(3));
}

// ----- Telegram fake -----

use ferroclaw_testkit::telegram::{Incoming, TelegramFake, NO_ANSWER};

const TG_TOKEN: &str = "7000001:test-token";

async fn tg_fake() -> TelegramFake {
    TelegramFake::start(TG_TOKEN, 7000001, "ferro_bot").await
}

/// Calls `method` with a JSON body; returns the HTTP status and the answer.
async fn tg(fake: &TelegramFake, method: &str, params: Value) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(fake.method_url(method))
        .json(&params)
        .send()
        .await
        .expect("request failed");
    let status = resp.status().as_u16();
    (status, resp.json().await.expect("answer JSON"))
}

fn tg_error(code: u16, description: &str) -> Value {
    json!({"ok": false, "error_code": code, "description": description})
}

fn update_ids(answer: &Value) -> Vec<i64> {
    answer["result"]
        .as_array()
        .expect("a result list")
        .iter()
        .map(|u| u["update_id"].as_i64().unwrap())
        .collect()
}

/// A `getUpdates` long poll in the background, answered as (status, JSON).
fn tg_poll(
    fake: &TelegramFake,
    params: Value,
) -> tokio::task::JoinHandle<Result<(u16, Value), reqwest::Error>> {
    let url = fake.method_url("getUpdates");
    tokio::spawn(async move {
        let resp = reqwest::Client::new()
            .post(url)
            .json(&params)
            .send()
            .await?;
        let status = resp.status().as_u16();
        Ok((status, resp.json().await?))
    })
}

async fn tg_polls(fake: &TelegramFake, n: usize) {
    let seen = fake
        .wait_for(Duration::from_secs(5), |calls| {
            calls.iter().filter(|c| c.method == "getUpdates").count() >= n
        })
        .await;
    assert!(seen, "no getUpdates #{n}: {:?}", fake.calls());
}

#[tokio::test]
async fn telegram_long_poll_returns_when_a_message_is_pushed() {
    let fake = tg_fake().await;
    let started = Instant::now();
    let poll = tg_poll(&fake, json!({"timeout": 30}));
    tg_polls(&fake, 1).await;
    let id = fake.push_message(Incoming::dm(42, "alice", "hi 👋 @ferro_bot"));
    assert_eq!(id, 1);
    let (status, answer) = poll.await.unwrap().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "woke by timeout"
    );
    assert_eq!(status, 200);
    assert_eq!(answer["ok"], true);
    let message = &answer["result"][0]["message"];
    assert_eq!(answer["result"][0]["update_id"], 1);
    assert_eq!(message["message_id"], 1);
    assert_eq!(message["text"], "hi 👋 @ferro_bot");
    assert_eq!(
        message["chat"],
        json!({"id": 42, "type": "private", "first_name": "alice", "username": "alice"})
    );
    assert_eq!(message["from"]["id"], 42);
    assert_eq!(message["from"]["is_bot"], false);
    assert!(message["date"].as_i64().unwrap() > 1_700_000_000);
    // 👋 is two UTF-16 units.
    assert_eq!(
        message["entities"],
        json!([{"type": "mention", "offset": 6, "length": 10}])
    );
    assert_eq!(fake.calls()[0].status, Some(200));

    // A group command, with the bot's name in it; message ids count per chat.
    let id = fake.push_message(Incoming::group(-100, 42, "alice", "/ask@ferro_bot why?"));
    fake.push_message(Incoming::dm(42, "alice", "again"));
    let (_, answer) = tg(&fake, "getUpdates", json!({"offset": id, "timeout": 0})).await;
    let message = &answer["result"][0]["message"];
    assert_eq!(message["chat"]["type"], "group");
    assert_eq!(message["chat"]["title"], "Test group");
    assert_eq!(message["message_id"], 1);
    assert_eq!(
        message["entities"],
        json!([{"type": "bot_command", "offset": 0, "length": 14}])
    );
    assert_eq!(answer["result"][1]["message"]["message_id"], 2);

    // Nothing new: an idle long poll answers [] at its timeout.
    let started = Instant::now();
    let (_, answer) = tg(&fake, "getUpdates", json!({"offset": 4, "timeout": 1})).await;
    assert_eq!(answer, json!({"ok": true, "result": []}));
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn telegram_offset_confirms_updates() {
    let fake = tg_fake().await;
    for text in ["one", "two", "three"] {
        fake.push_message(Incoming::dm(42, "alice", text));
    }
    let (_, answer) = tg(&fake, "getUpdates", json!({})).await;
    assert_eq!(update_ids(&answer), [1, 2, 3]);
    // Not confirmed yet: delivered again.
    let (_, answer) = tg(&fake, "getUpdates", json!({"offset": 0})).await;
    assert_eq!(update_ids(&answer), [1, 2, 3]);
    let (_, answer) = tg(&fake, "getUpdates", json!({"offset": 3})).await;
    assert_eq!(update_ids(&answer), [3]);
    assert_eq!(fake.pending_updates(), 1);
    let (_, answer) = tg(&fake, "getUpdates", json!({"offset": 4, "limit": 1})).await;
    assert_eq!(update_ids(&answer), Vec::<i64>::new());
    assert_eq!(fake.pending_updates(), 0);

    for text in ["four", "five", "six"] {
        fake.push_message(Incoming::dm(42, "alice", text));
    }
    let (_, answer) = tg(&fake, "getUpdates", json!({"offset": 4, "limit": 2})).await;
    assert_eq!(update_ids(&answer), [4, 5]);
    let (_, answer) = tg(&fake, "getWebhookInfo", json!({})).await;
    assert_eq!(answer["result"]["pending_update_count"], 3);
    assert_eq!(answer["result"]["url"], "");
    // A negative offset keeps only the last updates.
    let (_, answer) = tg(&fake, "getUpdates", json!({"offset": -1})).await;
    assert_eq!(update_ids(&answer), [6]);

    // allowed_updates filters, and is remembered by later calls.
    fake.push_raw_update(json!({"callback_query": {"id": "cb1", "data": "x"}}));
    let id = fake.push_message(Incoming::dm(42, "alice", "seven"));
    let (_, answer) = tg(
        &fake,
        "getUpdates",
        json!({"offset": 7, "allowed_updates": ["callback_query"]}),
    )
    .await;
    assert_eq!(update_ids(&answer), [7]);
    assert_eq!(answer["result"][0]["callback_query"]["data"], "x");
    let (_, answer) = tg(&fake, "getUpdates", json!({"offset": 7})).await;
    assert_eq!(update_ids(&answer), [7]);
    let (_, answer) = tg(
        &fake,
        "getUpdates",
        json!({"offset": 7, "allowed_updates": []}),
    )
    .await;
    assert_eq!(update_ids(&answer), [7, id]);
}

const TG_CONFLICT: &str = "Conflict: terminated by other getUpdates request; \
                           make sure that only one bot instance is running";

#[tokio::test]
async fn telegram_concurrent_get_updates_answers_the_earlier_with_409() {
    let fake = tg_fake().await;
    let started = Instant::now();
    let first = tg_poll(&fake, json!({"timeout": 30}));
    tg_polls(&fake, 1).await;
    let second = tg_poll(&fake, json!({"timeout": 30}));
    let (status, answer) = first.await.unwrap().unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!((status, answer), (409, tg_error(409, TG_CONFLICT)));
    assert_eq!(fake.conflicts(), 1);
    assert_eq!(fake.calls()[0].error.as_deref(), Some(TG_CONFLICT));

    // The later poll is the one still waiting.
    fake.push_message(Incoming::dm(42, "alice", "hello"));
    let (status, answer) = second.await.unwrap().unwrap();
    assert_eq!(status, 200);
    assert_eq!(update_ids(&answer), [1]);
    let statuses: Vec<_> = fake.calls().iter().map(|c| c.status).collect();
    assert_eq!(statuses, [Some(409), Some(200)]);

    // A poll whose client went away is no longer competing.
    let gone = tg_poll(&fake, json!({"offset": 2, "timeout": 30}));
    tg_polls(&fake, 3).await;
    gone.abort();
    let _ = gone.await;
    let given_up = fake
        .wait_for(Duration::from_secs(5), |calls| {
            calls[2].error.as_deref() == Some(NO_ANSWER)
        })
        .await;
    assert!(given_up, "{:?}", fake.calls()[2]);
    let next = tg_poll(&fake, json!({"offset": 2, "timeout": 30}));
    tg_polls(&fake, 4).await;
    fake.push_message(Incoming::dm(42, "alice", "again"));
    assert_eq!(next.await.unwrap().unwrap().0, 200);
    assert_eq!(fake.conflicts(), 1);
}

#[tokio::test]
async fn telegram_send_message_parses_html_like_telegram() {
    let fake = tg_fake().await;
    fake.push_message(Incoming::dm(42, "alice", "hi"));
    let html = "<b>Bold</b> &amp; <i>it</i> <a href=\"https://example.com/?a=1&amp;b=2\">link</a> \
                &lt;3 &#128512; <pre><code class=\"language-rust\">fn main() {}</code></pre>";
    let (status, answer) = tg(
        &fake,
        "sendMessage",
        json!({"chat_id": 42, "text": html, "parse_mode": "HTML",
               "reply_parameters": {"message_id": 1}, "disable_notification": true}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let message = &answer["result"];
    assert_eq!(message["text"], "Bold & it link <3 😀 fn main() {}");
    assert_eq!(message["message_id"], 2);
    assert_eq!(
        message["from"],
        json!({"id": 7000001, "is_bot": true, "first_name": "ferro_bot", "username": "ferro_bot"})
    );
    assert_eq!(message["chat"]["id"], 42);
    assert_eq!(message["reply_to_message"]["text"], "hi");
    assert_eq!(
        message["entities"],
        json!([
            {"type": "bold", "offset": 0, "length": 4},
            {"type": "italic", "offset": 7, "length": 2},
            {"type": "text_link", "offset": 10, "length": 4, "url": "https://example.com/?a=1&b=2"},
            {"type": "pre", "offset": 21, "length": 12, "language": "rust"},
        ])
    );
    let sent = fake.sent(42);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].raw_text, html);
    assert_eq!(sent[0].text, "Bold & it link <3 😀 fn main() {}");
    assert_eq!(sent[0].parse_mode.as_deref(), Some("HTML"));
    assert_eq!(sent[0].reply_to_message_id, Some(1));

    let (_, answer) = tg(
        &fake,
        "sendMessage",
        json!({"chat_id": 42, "parse_mode": "html", "text": "<blockquote expandable>q</blockquote>\
            <tg-spoiler>s</tg-spoiler><span class=\"tg-spoiler\">t</span><U>u</u>"}),
    )
    .await;
    assert_eq!(answer["result"]["text"], "qstu", "{answer}");
    assert_eq!(
        answer["result"]["entities"],
        json!([
            {"type": "expandable_blockquote", "offset": 0, "length": 1},
            {"type": "spoiler", "offset": 1, "length": 1},
            {"type": "spoiler", "offset": 2, "length": 1},
            {"type": "underline", "offset": 3, "length": 1},
        ])
    );

    let rejected = [
        (
            "<div>x</div>",
            "Unsupported start tag \"div\" at byte offset 0",
        ),
        (
            "<b>x",
            "Can't find end tag corresponding to start tag \"b\"",
        ),
        (
            "<b><i>x</b></i>",
            "Unmatched end tag at byte offset 7, expected \"</i>\", found \"</b>\"",
        ),
        ("1 < 2", "Unsupported start tag \"\" at byte offset 2"),
        (
            "Q&A",
            "Character '&' must be escaped as \"&amp;\" at byte offset 1",
        ),
        (
            "<span>x</span>",
            "Tag \"span\" must have class \"tg-spoiler\" at byte offset 0",
        ),
    ];
    for (text, reason) in rejected {
        let (status, answer) = tg(
            &fake,
            "sendMessage",
            json!({"chat_id": 42, "text": text, "parse_mode": "HTML"}),
        )
        .await;
        assert_eq!(status, 400, "{text}");
        assert_eq!(
            answer,
            tg_error(400, &format!("Bad Request: can't parse entities: {reason}")),
            "{text}"
        );
    }
    // Without parse_mode the same text is just text.
    let (status, _) = tg(
        &fake,
        "sendMessage",
        json!({"chat_id": 42, "text": "<b>x & y"}),
    )
    .await;
    assert_eq!(status, 200);

    for text in ["", "<b> </b>"] {
        let (status, answer) = tg(
            &fake,
            "sendMessage",
            json!({"chat_id": 42, "text": text, "parse_mode": "HTML"}),
        )
        .await;
        assert_eq!(
            (status, answer),
            (400, tg_error(400, "Bad Request: message text is empty"))
        );
    }
    let (_, answer) = tg(
        &fake,
        "sendMessage",
        json!({"chat_id": 42, "text": "x",
        "reply_parameters": {"message_id": 99}}),
    )
    .await;
    assert_eq!(
        answer,
        tg_error(400, "Bad Request: message to be replied not found")
    );
    let (_, answer) = tg(&fake, "sendMessage", json!({"text": "x"})).await;
    assert_eq!(answer, tg_error(400, "Bad Request: chat_id is empty"));
    assert_eq!(fake.sent(42).len(), 3);
}

#[tokio::test]
async fn telegram_send_message_length_counts_utf16_after_parsing() {
    let fake = tg_fake().await;
    let send = |text: String, mode: Option<&str>| {
        let fake = fake.clone();
        let mut params = json!({"chat_id": 42, "text": text});
        if let Some(mode) = mode {
            params["parse_mode"] = json!(mode);
        }
        async move { tg(&fake, "sendMessage", params).await }
    };
    let too_long = tg_error(400, "Bad Request: message is too long");
    assert_eq!(send("a".repeat(4096), None).await.0, 200);
    assert_eq!(send("a".repeat(4097), None).await, (400, too_long.clone()));
    // 16384 bytes on the wire, 4096 characters once decoded.
    assert_eq!(send("&lt;".repeat(4096), Some("HTML")).await.0, 200);
    assert_eq!(
        send(format!("<b>{}</b>", "&lt;".repeat(4097)), Some("HTML")).await,
        (400, too_long.clone())
    );
    // 2049 characters, but 4098 UTF-16 units.
    assert_eq!(send("😀".repeat(2049), None).await, (400, too_long));
    assert_eq!(fake.sent(42).len(), 2);
}

#[tokio::test]
async fn telegram_edit_message_text_counts_edits_and_refuses_no_ops() {
    let fake = tg_fake().await;
    let (_, answer) = tg(
        &fake,
        "sendMessage",
        json!({"chat_id": 42, "text": "draft"}),
    )
    .await;
    let id = answer["result"]["message_id"].as_i64().unwrap();

    let edit = |text: &str, mode: Option<&str>| {
        let fake = fake.clone();
        let mut params = json!({"chat_id": 42, "message_id": id, "text": text});
        if let Some(mode) = mode {
            params["parse_mode"] = json!(mode);
        }
        async move { tg(&fake, "editMessageText", params).await }
    };
    let (status, answer) = edit("draft, longer", None).await;
    assert_eq!(status, 200);
    assert_eq!(answer["result"]["text"], "draft, longer");
    assert!(answer["result"]["edit_date"].is_i64());
    let not_modified = tg_error(
        400,
        "Bad Request: message is not modified: specified new message content and reply markup \
         are exactly the same as a current content and reply markup of the message",
    );
    assert_eq!(
        edit("draft, longer", None).await,
        (400, not_modified.clone())
    );
    // The same text in bold is new content; the same bold text again is not.
    assert_eq!(edit("<b>draft, longer</b>", Some("HTML")).await.0, 200);
    assert_eq!(
        edit("<strong>draft, longer</strong>", Some("HTML")).await,
        (400, not_modified)
    );
    assert_eq!(
        edit("<b>oops", Some("HTML")).await.1["description"],
        "Bad Request: can't parse entities: Can't find end tag corresponding to start tag \"b\""
    );

    let sent = fake.sent(42);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].text, "draft, longer");
    assert_eq!(sent[0].raw_text, "<b>draft, longer</b>");
    assert_eq!(sent[0].edits, 2);
    assert_eq!(
        sent[0].entities,
        [json!({"type": "bold", "offset": 0, "length": 13})]
    );

    let (_, answer) = tg(
        &fake,
        "editMessageText",
        json!({"chat_id": 42, "message_id": 99, "text": "x"}),
    )
    .await;
    assert_eq!(
        answer,
        tg_error(400, "Bad Request: message to edit not found")
    );
    fake.push_message(Incoming::dm(42, "alice", "mine"));
    let (_, answer) = tg(
        &fake,
        "editMessageText",
        json!({"chat_id": 42, "message_id": id + 1, "text": "x"}),
    )
    .await;
    assert_eq!(
        answer,
        tg_error(400, "Bad Request: message can't be edited")
    );

    let (_, answer) = tg(
        &fake,
        "deleteMessage",
        json!({"chat_id": 42, "message_id": id}),
    )
    .await;
    assert_eq!(answer, json!({"ok": true, "result": true}));
    assert!(fake.sent(42)[0].deleted);
    let (_, answer) = tg(
        &fake,
        "deleteMessage",
        json!({"chat_id": 42, "message_id": id}),
    )
    .await;
    assert_eq!(
        answer,
        tg_error(400, "Bad Request: message to delete not found")
    );
}

#[tokio::test]
async fn telegram_fail_next_answers_429_with_retry_after_once() {
    let fake = tg_fake().await;
    fake.fail_next(
        "sendMessage",
        429,
        "Too Many Requests: retry after 2",
        Some(2),
    );
    let (status, answer) = tg(&fake, "sendMessage", json!({"chat_id": 42, "text": "hi"})).await;
    assert_eq!(status, 429);
    assert_eq!(
        answer,
        json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 2",
               "parameters": {"retry_after": 2}})
    );
    assert!(fake.sent(42).is_empty());
    let (status, _) = tg(&fake, "sendMessage", json!({"chat_id": 42, "text": "hi"})).await;
    assert_eq!(status, 200);
    assert_eq!(fake.sent(42).len(), 1);
    let statuses: Vec<_> = fake
        .calls_to("sendMessage")
        .iter()
        .map(|c| c.status)
        .collect();
    assert_eq!(statuses, [Some(429), Some(200)]);
}

#[tokio::test]
async fn telegram_accepts_form_and_query_parameters() {
    let fake = tg_fake().await;
    fake.push_message(Incoming::dm(42, "alice", "hi"));
    let client = reqwest::Client::new();
    let resp = client
        .post(fake.method_url("sendMessage"))
        .form(&[
            ("chat_id", "42"),
            ("text", "<i>hi</i> & bye + more"),
            ("reply_parameters", r#"{"message_id":1}"#),
            ("disable_notification", "true"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["result"]["text"], "<i>hi</i> & bye + more");
    assert_eq!(answer["result"]["reply_to_message"]["message_id"], 1);
    assert_eq!(
        fake.calls().last().unwrap().params,
        json!({"chat_id": 42, "text": "<i>hi</i> & bye + more",
               "reply_parameters": {"message_id": 1}, "disable_notification": true})
    );

    let resp = client
        .get(fake.method_url("sendMessage"))
        .query(&[
            ("chat_id", "42"),
            ("text", "grüße <b>+</b>"),
            ("parse_mode", "HTML"),
        ])
        .send()
        .await
        .unwrap();
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["result"]["text"], "grüße +", "{answer}");
    assert_eq!(fake.sent(42).len(), 2);

    let resp = client
        .get(fake.method_url("getUpdates"))
        .query(&[
            ("offset", "1"),
            ("timeout", "0"),
            ("allowed_updates", r#"["message"]"#),
        ])
        .send()
        .await
        .unwrap();
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(update_ids(&answer), [1]);
    assert_eq!(
        fake.calls().last().unwrap().params,
        json!({"offset": 1, "timeout": 0, "allowed_updates": ["message"]})
    );
}

#[tokio::test]
async fn telegram_wrong_token_and_unknown_method() {
    let fake = tg_fake().await;
    let client = reqwest::Client::new();
    let resp = client
        .post(format!("{}/bot7000001:wrong/getMe", fake.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(
        resp.json::<Value>().await.unwrap(),
        tg_error(401, "Unauthorized")
    );
    let (status, answer) = tg(&fake, "getMeNow", json!({})).await;
    assert_eq!((status, answer), (404, tg_error(404, "Not Found")));

    // Method names are case-insensitive; the call is recorded as documented.
    let (status, answer) = tg(&fake, "getme", json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(
        answer["result"],
        json!({"id": 7000001, "is_bot": true, "first_name": "ferro_bot", "username": "ferro_bot",
               "can_join_groups": true, "can_read_all_group_messages": false,
               "supports_inline_queries": false, "can_connect_to_business": false,
               "has_main_web_app": false})
    );
    let methods: Vec<_> = fake.calls().into_iter().map(|c| c.method).collect();
    assert_eq!(methods, ["getMe", "getMeNow", "getMe"]);
}

#[tokio::test]
async fn telegram_other_methods_and_markdown_v2() {
    let fake = tg_fake().await;
    let ok_true = json!({"ok": true, "result": true});
    assert_eq!(
        tg(
            &fake,
            "sendChatAction",
            json!({"chat_id": 42, "action": "typing"})
        )
        .await,
        (200, ok_true.clone())
    );
    assert_eq!(
        tg(
            &fake,
            "sendChatAction",
            json!({"chat_id": 42, "action": "dancing"})
        )
        .await,
        (
            400,
            tg_error(400, "Bad Request: wrong parameter action in request")
        )
    );
    let commands = json!([{"command": "new", "description": "Start over"}]);
    assert_eq!(
        tg(&fake, "setMyCommands", json!({"commands": commands})).await,
        (200, ok_true.clone())
    );
    assert_eq!(
        tg(&fake, "getMyCommands", json!({})).await.1["result"],
        commands
    );
    assert_eq!(
        tg(
            &fake,
            "setMyCommands",
            json!({"commands": [{"command": "New!", "description": "x"}]})
        )
        .await
        .0,
        400
    );
    fake.push_message(Incoming::dm(42, "alice", "pending"));
    assert_eq!(
        tg(
            &fake,
            "deleteWebhook",
            json!({"drop_pending_updates": true})
        )
        .await,
        (200, ok_true)
    );
    assert_eq!(fake.pending_updates(), 0);

    let md = |text: &str| {
        let fake = fake.clone();
        let params = json!({"chat_id": 42, "text": text, "parse_mode": "MarkdownV2"});
        async move { tg(&fake, "sendMessage", params).await }
    };
    let (status, answer) = md(r"*bold* _it_ `x\`y` [link](https://e.com/a\)b) 1\.5").await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["text"], "bold it x`y link 1.5");
    assert_eq!(
        answer["result"]["entities"],
        json!([
            {"type": "bold", "offset": 0, "length": 4},
            {"type": "italic", "offset": 5, "length": 2},
            {"type": "code", "offset": 8, "length": 3},
            {"type": "text_link", "offset": 12, "length": 4, "url": "https://e.com/a)b"},
        ])
    );
    let (_, answer) = md(">quote\n>more\nafter \\>").await;
    assert_eq!(answer["result"]["text"], "quote\nmore\nafter >", "{answer}");
    assert_eq!(
        answer["result"]["entities"],
        json!([{"type": "blockquote", "offset": 0, "length": 10}])
    );
    assert_eq!(
        md("Done. Next").await.1,
        tg_error(
            400,
            r"Bad Request: can't parse entities: Character '.' is reserved and must be escaped with the preceding '\'"
        )
    );
    assert_eq!(
        md("*open").await.1,
        tg_error(
            400,
            "Bad Request: can't parse entities: Can't find end of Bold entity at byte offset 0"
        )
    );
}

#[tokio::test]
async fn telegram_stop_fails_a_pending_long_poll_and_start_on_comes_back() {
    let fake = tg_fake().await;
    let port = fake.port();
    let url = fake.method_url("getMe");
    let poll = tg_poll(&fake, json!({"timeout": 30}));
    tg_polls(&fake, 1).await;
    let started = Instant::now();
    fake.stop().await;
    let err = poll
        .await
        .unwrap()
        .expect_err("a stopped fake answered the long poll");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        err.is_request() || err.is_body() || err.is_decode(),
        "{err:?}"
    );
    let err = reqwest::Client::new()
        .post(&url)
        .send()
        .await
        .expect_err("a stopped fake accepted a connection");
    assert!(err.is_connect(), "{err:?}");

    let fake = TelegramFake::start_on(port, TG_TOKEN, 7000001, "ferro_bot")
        .await
        .expect("rebinding the same port");
    assert_eq!(fake.method_url("getMe"), url);
    assert_eq!(tg(&fake, "getMe", json!({})).await.0, 200);
}

#[tokio::test]
async fn telegram_disconnect_and_restore_keep_the_state() {
    let fake = tg_fake().await;
    fake.push_message(Incoming::dm(42, "alice", "before"));
    let (_, answer) = tg(&fake, "getUpdates", json!({})).await;
    assert_eq!(update_ids(&answer), [1]);
    let poll = tg_poll(&fake, json!({"offset": 2, "timeout": 30}));
    tg_polls(&fake, 2).await;
    fake.disconnect().await;
    assert!(poll.await.unwrap().is_err());
    let calls = fake.calls();
    assert_eq!(calls[1].status, None, "the cut poll was never answered");
    assert_eq!(calls[1].error.as_deref(), Some(NO_ANSWER));
    let err = reqwest::Client::new()
        .post(fake.method_url("getMe"))
        .send()
        .await
        .expect_err("connected during the outage");
    assert!(err.is_connect(), "{err:?}");

    fake.push_message(Incoming::dm(42, "alice", "during"));
    fake.restore().await.expect("rebinding the same port");
    let (_, answer) = tg(&fake, "getUpdates", json!({"offset": 2})).await;
    assert_eq!(update_ids(&answer), [2]);
    assert_eq!(answer["result"][0]["message"]["message_id"], 2);
}
