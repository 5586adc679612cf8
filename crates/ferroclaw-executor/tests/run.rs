//! The run loop against the scripted LLM and a stub `/tools/invoke` on loopback:
//! per-tool truncation, context shortening/compaction, native tool calls, exec policy.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed fixture should stop the test

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use ferroclaw_executor::errors_log::ErrorLog;
use ferroclaw_executor::events::EventLog;
use ferroclaw_executor::{Config, Executor, RunRequest};
use ferroclaw_testkit::{ReasoningField, Reply, ScriptedLlm};
use ferroclaw_types::Message;
use serde_json::{json, Value};

type Calls = Arc<Mutex<Vec<Value>>>;

/// A gateway stand-in: `read` answers a long text ending in `TAIL`; every body is kept.
async fn stub_gateway() -> (String, Calls) {
    async fn invoke(State(calls): State<Calls>, Json(body): Json<Value>) -> Json<Value> {
        calls.lock().unwrap().push(body.clone());
        if body["dryRun"] == true {
            return Json(json!({"ok": true, "result": {"dryRun": true, "tool": {
                "name": body["tool"], "description": "Read a file.",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}}));
        }
        let text = format!("{}TAIL", "A".repeat(3000));
        Json(json!({"ok": true, "result": {"content": text}}))
    }
    let calls: Calls = Arc::default();
    let app = Router::new()
        .route("/tools/invoke", post(invoke))
        .with_state(calls.clone());
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}"), calls)
}

fn executor(yaml: &str) -> Executor {
    let cfg = Config::from_yaml_with_env(yaml, "test", &[])
        .unwrap()
        .config;
    Executor::new(
        cfg,
        Arc::new(EventLog::discard()),
        Arc::new(ErrorLog::disabled()),
    )
    .unwrap()
}

fn read_intent(path: &str) -> Reply {
    Reply::text("").with_reasoning(
        format!("Thought: read it.\nAction: read\nAction Input: {{\"path\": \"{path}\"}}"),
        ReasoningField::Reasoning,
    )
}

fn all_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn ask(text: &str) -> RunRequest {
    RunRequest {
        messages: vec![Message::user(text)],
        ..RunRequest::default()
    }
}

#[tokio::test]
async fn results_are_truncated_then_older_ones_shortened_and_dropped() {
    let llm = ScriptedLlm::start().await.unwrap();
    let (gw, _calls) = stub_gateway().await;
    let exec = executor(&format!(
        r#"
executor:
  gpt_oss_url: "{}"
  gpt_oss_max_tokens: 100
  max_iterations: 4
  context_window_limit: 2000
  context_buffer_tokens: 100
  context_trunc_threshold: 0.25
  context_compact_threshold: 0.35
  openclaw_gateway_url: "{gw}"
tools:
  allowed: [read]
  result_limits: {{read: 1000}}
"#,
        llm.base_url()
    ));
    for p in ["a.txt", "b.txt", "c.txt"] {
        llm.push(read_intent(p));
    }
    llm.push(Reply::text("done reading"));
    let out = exec.run(ask("read three files")).await.unwrap();
    assert_eq!(out.content, "done reading");
    assert_eq!(out.iterations, 4);
    assert_eq!(out.tools_called, vec!["read", "read", "read"]);

    let reqs = llm.requests();
    assert_eq!(reqs.len(), 4);
    // Per-tool limit: head and tail kept, the middle cut.
    let second = all_text(&reqs[1].body);
    assert!(second.contains("[truncated"), "{second}");
    assert!(second.contains("TAIL"), "{second}");
    assert!(!second.contains(&"A".repeat(1000)), "result over its limit");
    // By the last call the oldest result gave way; the newest is intact.
    let last = all_text(&reqs[3].body);
    assert!(
        last.contains("[earlier tool output omitted"),
        "older results not compacted:\n{last}"
    );
    assert!(last.trim_end().contains("TAIL"), "{last}");
}

#[tokio::test]
async fn native_tool_calls_and_exec_policy() {
    let llm = ScriptedLlm::start().await.unwrap();
    let (gw, calls) = stub_gateway().await;
    let exec = executor(&format!(
        r#"
executor:
  gpt_oss_url: "{}"
  openclaw_gateway_url: "{gw}"
parser:
  native_tools: true
tools:
  allowed:
    - read
    - name: exec
      description: Run a command.
      parameters: {{type: object, properties: {{command: {{type: string}}}}, required: [command]}}
  exec:
    blocked_commands: ["shutdown"]
"#,
        llm.base_url()
    ));
    llm.push(Reply::tool_call("call_1", "read", json!({"path": "x"})));
    llm.push(Reply::text("").with_reasoning(
        "Thought: stop the box.\nAction: exec\nAction Input: {\"command\": \"shutdown -h now\"}",
        ReasoningField::Reasoning,
    ));
    llm.push(Reply::text("finished"));
    let out = exec.run(ask("go")).await.unwrap();
    assert_eq!(out.content, "finished");
    assert_eq!(out.tools_called, vec!["read", "exec"]);

    let reqs = llm.requests();
    // Native tools were offered, and the native call's result came back as a `tool`
    // message paired with its id.
    assert!(reqs[0].body["tools"]
        .as_array()
        .is_some_and(|t| t.len() == 2));
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    assert!(msgs
        .iter()
        .any(|m| m["role"] == "tool" && m["tool_call_id"] == "call_1"));
    // The blocked command never reached the gateway; the model was told why.
    let third = all_text(&reqs[2].body);
    assert!(
        third.contains("[ERROR: exec]") && third.contains("blocked"),
        "{third}"
    );
    let bodies = calls.lock().unwrap().clone();
    assert!(bodies.iter().all(|b| b["tool"] != "exec"), "{bodies:?}");
    assert!(bodies
        .iter()
        .any(|b| b["tool"] == "read" && b["args"]["path"] == "x" && b["sessionKey"] == "main"));
}

#[tokio::test]
async fn the_clients_history_reaches_the_model_in_order_and_no_session_outlives_its_run() {
    let llm = ScriptedLlm::start().await.unwrap();
    let (gw, _calls) = stub_gateway().await;
    let exec = executor(&format!(
        r#"
executor:
  gpt_oss_url: "{}"
  openclaw_gateway_url: "{gw}"
tools:
  allowed: [read]
"#,
        llm.base_url()
    ));
    let earlier_answer = Message::Assistant(ferroclaw_types::AssistantMessage {
        content: vec![ferroclaw_types::ContentBlock::text("Paris.")],
        provider: String::new(),
        model: String::new(),
        usage: Default::default(),
        stop_reason: ferroclaw_types::StopReason::Stop,
        error_message: None,
        timestamp: 0,
    });
    for round in 0..2 {
        llm.push(Reply::text(format!("About 2.1 million ({round}).")));
        let out = exec
            .run(RunRequest {
                system: Some("Answer in one line.".into()),
                messages: vec![
                    Message::user("Capital of France?"),
                    earlier_answer.clone(),
                    Message::user("And its population?"),
                ],
                temperature: Some(0.2),
                top_p: Some(0.9),
                ..RunRequest::default()
            })
            .await
            .unwrap();
        assert_eq!(out.content, format!("About 2.1 million ({round})."));
        let body = &llm.requests()[round].body;
        let msgs = body["messages"].as_array().unwrap();
        let shape: Vec<(String, String)> = msgs
            .iter()
            .skip(1)
            .map(|m| {
                (
                    m["role"].as_str().unwrap_or_default().to_string(),
                    m["content"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        // The same three messages each time: the first request's session was removed,
        // so the second does not see its history twice.
        assert_eq!(
            shape,
            [
                ("user".to_string(), "Capital of France?".to_string()),
                ("assistant".to_string(), "Paris.".to_string()),
                ("user".to_string(), "And its population?".to_string()),
            ],
            "{body}"
        );
        assert_eq!(msgs[0]["role"], "system");
        assert!(msgs[0]["content"]
            .as_str()
            .unwrap_or_default()
            .contains("Answer in one line."));
        assert!((body["temperature"].as_f64().unwrap() - 0.2).abs() < 1e-6);
        assert!((body["top_p"].as_f64().unwrap() - 0.9).abs() < 1e-6);
    }
}

/// `tools.<name>.max_results`, `max_chars` and `extract_mode` reach the gateway's tools:
/// caps on what the model asks for, defaults for what it leaves out.
#[tokio::test]
async fn per_tool_settings_reach_the_tools() {
    let llm = ScriptedLlm::start().await.unwrap();
    let (gw, calls) = stub_gateway().await;
    let exec = executor(&format!(
        r#"
executor:
  gpt_oss_url: "{}"
  openclaw_gateway_url: "{gw}"
parser:
  native_tools: true
tools:
  allowed: [web_search, web_fetch]
  web_search:
    max_results: 3
  web_fetch:
    max_chars: 2000
    extract_mode: text
"#,
        llm.base_url()
    ));
    llm.push(Reply::tool_calls(vec![
        (
            "c1".into(),
            "web_search".into(),
            json!({"query": "rust", "max_results": 9}),
        ),
        (
            "c2".into(),
            "web_fetch".into(),
            json!({"url": "https://example.com/a"}),
        ),
        (
            "c3".into(),
            "web_fetch".into(),
            json!({"url": "https://example.com/b", "maxChars": 500, "extractMode": "markdown"}),
        ),
    ]));
    llm.push(Reply::text("done"));
    let out = exec.run(ask("look it up")).await.unwrap();
    assert_eq!(out.content, "done");
    let bodies = calls.lock().unwrap().clone();
    let args = |tool: &str, url: Option<&str>| {
        bodies
            .iter()
            .find(|b| {
                b["dryRun"] != true
                    && b["tool"] == tool
                    && url.is_none_or(|u| b["args"]["url"] == u)
            })
            .unwrap_or_else(|| panic!("{tool} {url:?} in {bodies:?}"))["args"]
            .clone()
    };
    let search = args("web_search", None);
    assert_eq!(search["count"], 3, "capped: {search}");
    assert!(search.get("max_results").is_none());
    let a = args("web_fetch", Some("https://example.com/a"));
    assert_eq!(
        (a["maxChars"].as_u64(), a["extractMode"].as_str()),
        (Some(2000), Some("text")),
        "defaults: {a}"
    );
    let b = args("web_fetch", Some("https://example.com/b"));
    assert_eq!(
        (b["maxChars"].as_u64(), b["extractMode"].as_str()),
        (Some(500), Some("markdown")),
        "the model's own, under the cap: {b}"
    );
}

/// `http_server`'s time-outs on the executor's own endpoint: headers or a body that drip
/// in are cut off, an answer that takes too long is a 504, a kept-alive connection with
/// nothing in flight is closed when idle — and a request that takes longer than the idle
/// time is not.
#[tokio::test]
async fn the_http_server_applies_its_read_write_and_idle_time_outs() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let llm = ScriptedLlm::start().await.unwrap();
    let (gw, _calls) = stub_gateway().await;
    let exec = executor(&format!(
        r#"
executor:
  gpt_oss_url: "{}"
  openclaw_gateway_url: "{gw}"
http_server:
  read_timeout_seconds: 1
  write_timeout_seconds: 3
  idle_timeout_seconds: 1
tools:
  allowed: [read]
"#,
        llm.base_url()
    ));
    let server = ferroclaw_executor::server::Server::bind(exec, Some(0))
        .await
        .unwrap();
    let addr = server.local_addr();
    tokio::spawn(server.serve(std::future::pending()));
    let limit = std::time::Duration::from_secs(15);
    // The server's answer (or its closing the connection) to what was written.
    async fn answer(s: &mut tokio::net::TcpStream, limit: std::time::Duration) -> String {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match tokio::time::timeout(limit, s.read(&mut buf))
                .await
                .expect("the server acted in time")
            {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    out.extend_from_slice(&buf[..n]);
                    if out.windows(4).any(|w| w == b"\r\n\r\n")
                        && String::from_utf8_lossy(&out).contains("\"error\"")
                    {
                        break;
                    }
                }
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    // Headers that never end: the connection is dropped.
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let got = answer(&mut s, limit).await;
    assert!(!got.contains("200 OK"), "{got}");

    // A body that never arrives in full: 408, with the reason.
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"messages\":")
        .await
        .unwrap();
    let got = answer(&mut s, limit).await;
    assert!(got.starts_with("HTTP/1.1 408"), "{got}");
    assert!(got.contains("read_timeout"), "{got}");

    let http = reqwest::Client::new();
    let url = format!("http://{addr}/v1/chat/completions");
    let ask = json!({"model": "gpt-oss", "messages": [{"role": "user", "content": "hi"}]});
    // Slower than the idle time, within the write time: answered.
    llm.push(Reply::text("in time").delay(std::time::Duration::from_millis(1500)));
    let resp = http.post(&url).json(&ask).send().await.unwrap();
    assert_eq!(resp.status(), 200, "{:?}", resp.text().await);
    // Slower than the write time: 504 with the reason.
    llm.push(Reply::text("too late").delay(std::time::Duration::from_secs(5)));
    let resp = http.post(&url).json(&ask).send().await.unwrap();
    assert_eq!(resp.status(), 504);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "write_timeout", "{body}");

    // Kept alive after an answer, then idle: closed by the server.
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 4096];
    let n = s.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1"));
    let closed = tokio::time::timeout(limit, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "an idle kept-alive connection is closed");
}
