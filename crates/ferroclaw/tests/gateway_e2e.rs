//! The real `ferroclaw gateway` binary, started with a temporary home against the test
//! kit's scripted LLM, driven over loopback HTTP (reqwest) and WebSocket (tungstenite).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed fixture should stop the test

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferroclaw_testkit::{Reply, ScriptedLlm};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

const PROVIDER_VARS: [&str; 10] = [
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENROUTER_API_KEY",
    "GROQ_API_KEY",
    "DEEPSEEK_API_KEY",
    "MISTRAL_API_KEY",
    "XAI_API_KEY",
    "FERROCLAW_CONFIG",
    "FERROCLAW_MODEL",
    "FERROCLAW_GATEWAY_TOKEN",
];

/// Upper bound on any single wait, so a broken gateway fails the test instead of
/// hanging it. Never used to let something "settle".
const WAIT: Duration = Duration::from_secs(30);

pub(crate) struct Gateway {
    child: tokio::process::Child,
    pub(crate) base: String,
    ws_url: String,
    home: tempfile::TempDir,
    pub(crate) llm: ScriptedLlm,
    /// Sends the gateway token with every request.
    http: reqwest::Client,
    /// Sends no credential.
    anon: reqwest::Client,
    /// The operator token: from the environment given, else the one the gateway
    /// generated into its home on first start.
    pub(crate) token: String,
    stderr: Arc<Mutex<String>>,
}

impl Gateway {
    /// Starts the binary; `gateway_cfg` is the body of the config's `gateway` object.
    async fn start(gateway_cfg: &str, env: &[(&str, &str)]) -> Gateway {
        Self::start_with("", "", gateway_cfg, env).await
    }

    /// As `start`, with `defaults` added to `agents.defaults` and `top` to the top level.
    pub(crate) async fn start_with(
        defaults: &str,
        top: &str,
        gateway_cfg: &str,
        env: &[(&str, &str)],
    ) -> Gateway {
        let llm = ScriptedLlm::start().await.expect("scripted llm");
        let home = tempfile::tempdir().expect("tempdir");
        let cfg = format!(
            r#"{{
  agents: {{
    defaults: {{ provider: "scripted", model: "model-a", {defaults} }},
    list: [{{ id: "main" }}, {{ id: "helper", name: "Helper" }}],
  }},
  providers: {{ scripted: {{ type: "openai_compat", base_url: "{}" }} }},
  gateway: {{ {gateway_cfg} }},
  {top}
}}"#,
            llm.openai_base_url()
        );
        std::fs::write(home.path().join("config.json5"), cfg).expect("write config");
        Self::spawn(home, llm, env).await
    }

    /// Stops this gateway and starts another in the same home with `env` (e.g. a
    /// rotated token); the scripted LLM carries over.
    pub(crate) async fn restart(self, env: &[(&str, &str)]) -> Gateway {
        let Gateway {
            mut child,
            home,
            llm,
            ..
        } = self;
        child.kill().await.expect("stop the gateway");
        Self::spawn(home, llm, env).await
    }

    async fn spawn(home: tempfile::TempDir, llm: ScriptedLlm, env: &[(&str, &str)]) -> Gateway {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ferroclaw"));
        cmd.args(["gateway", "--port", "0"])
            .env("FERROCLAW_HOME", home.path())
            .env("HOME", home.path())
            .env("FERROCLAW_LOG_LEVEL", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for v in PROVIDER_VARS {
            cmd.env_remove(v);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn ferroclaw gateway");

        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(mut err) = child.stderr.take() {
            let sink = stderr.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n) = err.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    sink.lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            });
        }
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let addr = tokio::time::timeout(WAIT, async {
            while let Some(line) = lines.next_line().await.expect("read stdout") {
                if let Some(rest) = line.strip_prefix("listening on http://") {
                    return rest.trim().to_string();
                }
            }
            panic!(
                "gateway exited before listening: {}",
                stderr.lock().unwrap()
            );
        })
        .await
        .expect("gateway start-up timed out");
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

        let token = env
            .iter()
            .find(|(k, _)| *k == "FERROCLAW_GATEWAY_TOKEN")
            .map(|(_, v)| v.to_string())
            .unwrap_or_else(|| {
                std::fs::read_to_string(home.path().join("data/gateway.token"))
                    .expect("the gateway writes its token before listening")
                    .trim()
                    .to_string()
            });
        let mut auth = reqwest::header::HeaderMap::new();
        auth.insert(
            reqwest::header::AUTHORIZATION,
            format!("Bearer {token}").parse().expect("header"),
        );
        Gateway {
            child,
            base: format!("http://{addr}"),
            ws_url: format!("ws://{addr}/ws"),
            home,
            llm,
            http: reqwest::Client::builder()
                .default_headers(auth)
                .build()
                .expect("client"),
            anon: reqwest::Client::new(),
            token,
            stderr,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    async fn post(&self, path: &str, body: &Value) -> reqwest::Response {
        self.http
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .expect("POST")
    }

    async fn ws(&self) -> Ws {
        let (stream, _) = tokio_tungstenite::connect_async(self.ws_url.as_str())
            .await
            .expect("ws connect");
        Ws {
            stream,
            next_id: 0,
            pending: Vec::new(),
            token: self.token.clone(),
        }
    }

    fn sessions_dir(&self, agent: &str) -> PathBuf {
        self.home.path().join(format!("agents/{agent}/sessions"))
    }

    /// Transcript entries of a session (every line must be valid JSON).
    fn transcript(&self, agent: &str, key: &str) -> Vec<Value> {
        transcript_in(&self.sessions_dir(agent), key)
    }

    fn signal(&self, sig: i32) {
        let pid = self.child.id().expect("child pid") as i32;
        // SAFETY: sending a signal to our own child process by pid.
        let rc = unsafe { libc::kill(pid, sig) };
        assert_eq!(rc, 0, "kill({pid}, {sig})");
    }

    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

fn transcript_in(dir: &Path, key: &str) -> Vec<Value> {
    // `dir` is `<home>/agents/<agent>/sessions`.
    let home = dir.ancestors().nth(3).expect("home");
    let agent = dir
        .parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .expect("agent");
    let sid = ferroclaw_testkit::session_id_in(home, agent, key)
        .unwrap_or_else(|| panic!("session {key} in the index"));
    std::fs::read_to_string(dir.join(format!("{sid}.jsonl")))
        .expect("transcript")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}")))
        .collect()
}

/// `(role, text, stopReason)` of each message entry.
fn messages(entries: &[Value]) -> Vec<(String, String, String)> {
    entries
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| {
            let m = &e["message"];
            let text = m["content"]
                .as_array()
                .map(|blocks| {
                    blocks
                        .iter()
                        .filter_map(|b| b["text"].as_str())
                        .collect::<String>()
                })
                .unwrap_or_default();
            (
                m["role"].as_str().unwrap_or("").to_string(),
                text,
                m["stopReason"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

struct Ws {
    stream: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next_id: u64,
    /// Frames read while looking for something else.
    pending: Vec<Value>,
    /// Sent by `connect_goclaw(None)`.
    token: String,
}

impl Ws {
    async fn send(&mut self, method: &str, params: Value) -> String {
        self.next_id += 1;
        let id = format!("r{}", self.next_id);
        let frame = json!({"type": "req", "id": id, "method": method, "params": params});
        self.stream
            .send(Message::text(frame.to_string()))
            .await
            .expect("ws send");
        id
    }

    /// Next JSON frame from the socket; `None` once the server closed.
    async fn read(&mut self) -> Option<Value> {
        loop {
            let msg = tokio::time::timeout(WAIT, self.stream.next())
                .await
                .expect("timed out waiting for a frame");
            match msg {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return None,
                Some(Ok(Message::Text(t))) => {
                    return Some(serde_json::from_str(t.as_str()).expect("frame json"))
                }
                Some(Ok(_)) => continue,
            }
        }
    }

    /// Frames up to and including the response to `id`; the events seen meanwhile are
    /// returned (and other responses kept for later).
    async fn until_res(&mut self, id: &str) -> (Vec<Value>, Value) {
        if let Some(pos) = self
            .pending
            .iter()
            .position(|f| f["type"] == "res" && f["id"] == id)
        {
            return (Vec::new(), self.pending.remove(pos));
        }
        let mut events = Vec::new();
        loop {
            let f = self
                .read()
                .await
                .expect("connection closed before the response");
            if f["type"] == "res" && f["id"] == id {
                return (events, f);
            }
            if f["type"] == "event" {
                events.push(f);
            } else {
                self.pending.push(f);
            }
        }
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params).await;
        self.until_res(&id).await.1
    }

    /// Reads until an event satisfying `pred`; returns every event read.
    async fn until_event(&mut self, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut events = Vec::new();
        loop {
            let f = self
                .read()
                .await
                .expect("connection closed before the event");
            if f["type"] == "event" {
                let hit = pred(&f);
                events.push(f);
                if hit {
                    return events;
                }
            } else {
                self.pending.push(f);
            }
        }
    }

    /// `connect` with `token`, else the gateway token.
    async fn connect_goclaw(&mut self, token: Option<&str>) -> Value {
        let token = token.map_or_else(|| self.token.clone(), str::to_string);
        self.call("connect", json!({"user_id": "tester", "token": token}))
            .await
    }
}

fn event_type(f: &Value) -> String {
    format!(
        "{}:{}",
        f["event"].as_str().unwrap_or(""),
        f["payload"]["type"].as_str().unwrap_or("")
    )
}

/// Parses an SSE body into its `data:` payloads (in order).
fn sse_data(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter_map(|block| {
            block
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .map(str::to_string)
        })
        .collect()
}

/// Reads an SSE response body to the end, chunk by chunk.
async fn read_stream(resp: reqwest::Response) -> String {
    let mut body = String::new();
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("SSE stream stalled")
    {
        body.push_str(&String::from_utf8_lossy(&chunk.expect("SSE chunk")));
    }
    body
}

#[tokio::test]
async fn health_models_and_metrics() {
    let gw = Gateway::start("", &[]).await;
    let health: Value = gw
        .http
        .get(gw.url("/health"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");
    assert_eq!(health["database"], "ok");
    assert_eq!(health["protocol"], 3);
    assert!(health["version"].is_string());

    let models: Value = gw
        .http
        .get(gw.url("/v1/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["ferroclaw:main", "ferroclaw:helper"]);

    let resp = gw.http.get(gw.url("/no/such/route")).send().await.unwrap();
    assert_eq!(resp.status(), 404);

    let metrics = gw
        .http
        .get(gw.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(
            r#"ferroclaw_http_requests_total{route="/v1/models",method="GET",status="200"} 1"#
        ),
        "{metrics}"
    );
    assert!(metrics.contains("ferroclaw_active_runs 0"), "{metrics}");
    assert!(metrics.contains("ferroclaw_ws_connections 0"), "{metrics}");
}

#[tokio::test]
async fn chat_completions_json_runs_tools_server_side() {
    let gw = Gateway::start("", &[]).await;
    gw.llm.push(Reply::tool_call(
        "call_1",
        "write",
        json!({"path": "note.txt", "content": "from the gateway"}),
    ));
    gw.llm
        .push(Reply::text("I saved the note.").with_usage(30, 7));

    let resp = gw
        .http
        .post(gw.url("/v1/chat/completions"))
        .header("X-Ferroclaw-Session-Key", "http-json")
        .json(&json!({
            "model": "ferroclaw:main",
            "messages": [{"role": "user", "content": "save a note"}],
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["model"], "ferroclaw:main");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "I saved the note."
    );
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(body["usage"]["completion_tokens"], 7);
    assert_eq!(
        std::fs::read_to_string(gw.home.path().join("workspace/note.txt")).unwrap(),
        "from the gateway",
        "the tool ran on the server"
    );
    assert_eq!(gw.llm.requests().len(), 2);

    // The session header picked the transcript.
    let roles: Vec<String> = messages(&gw.transcript("main", "http-json"))
        .into_iter()
        .map(|m| m.0)
        .collect();
    assert_eq!(roles, ["user", "assistant", "toolResult", "assistant"]);

    // Agent by header, bare model names fall through to it; unknown prefixed agent → 404.
    gw.llm.push(Reply::text("helper here"));
    let resp = gw
        .http
        .post(gw.url("/v1/chat/completions"))
        .header("X-Ferroclaw-Agent-Id", "helper")
        .json(&json!({"model": "gpt-4o", "user": "alice", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(gw.transcript("helper", "openai-user:alice").len() >= 2);

    let resp = gw
        .post(
            "/v1/chat/completions",
            &json!({"model": "agent:nobody", "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(resp.status(), 404);
    let err: Value = resp.json().await.unwrap();
    assert_eq!(err["error"]["code"], "model_not_found");
    assert!(err["error"]["message"].is_string() && err["error"]["type"].is_string());

    // Malformed JSON → 400 in OpenAI's shape.
    let resp = gw
        .http
        .post(gw.url("/v1/chat/completions"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let err: Value = resp.json().await.unwrap();
    assert_eq!(err["error"]["type"], "invalid_request_error");

    let metrics = gw
        .http
        .get(gw.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for needle in [
        r#"ferroclaw_http_requests_total{route="/v1/chat/completions",method="POST",status="200"} 2"#,
        r#"ferroclaw_tool_calls_total{tool="write",outcome="ok"} 1"#,
        r#"ferroclaw_llm_calls_total{provider="scripted",model="model-a"} 3"#,
        "ferroclaw_run_duration_seconds_count 2",
    ] {
        assert!(metrics.contains(needle), "missing {needle}:\n{metrics}");
    }
}

#[tokio::test]
async fn chat_completions_stream_sends_chunks_usage_and_done() {
    let gw = Gateway::start("", &[]).await;
    gw.llm
        .push(Reply::tool_call("call_1", "ls", json!({"path": "."})));
    gw.llm
        .push(Reply::text("Streaming answer here.").with_usage(12, 5));
    let resp = gw
        .post(
            "/v1/chat/completions",
            &json!({
                "model": "main",
                "stream": true,
                "stream_options": {"include_usage": true},
                "messages": [{"role": "user", "content": "list files"}],
            }),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let body = read_stream(resp).await;
    let data = sse_data(&body);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{body}");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Streaming answer here.");
    assert!(
        chunks
            .iter()
            .filter(|c| c["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|t| !t.is_empty()))
            .count()
            > 1,
        "text arrives in several chunks"
    );
    let finish = chunks
        .iter()
        .find(|c| c["choices"][0]["finish_reason"] == "stop")
        .expect("finish chunk");
    assert_eq!(finish["object"], "chat.completion.chunk");
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["completion_tokens"], 5);
    assert_eq!(gw.llm.requests().len(), 2, "tool call executed server-side");
}

#[tokio::test]
async fn responses_api_json_and_sse() {
    let gw = Gateway::start("", &[]).await;
    gw.llm.push(Reply::text("Plain response.").with_usage(9, 3));
    let body: Value = gw
        .post(
            "/v1/responses",
            &json!({"model": "ferroclaw:main", "input": "hello"}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["object"], "response");
    assert_eq!(body["status"], "completed");
    assert_eq!(body["output"][0]["content"][0]["type"], "output_text");
    assert_eq!(body["output"][0]["content"][0]["text"], "Plain response.");
    assert_eq!(body["output_text"], "Plain response.");
    assert_eq!(body["usage"]["output_tokens"], 3);

    gw.llm
        .push(Reply::text("Streamed response.").with_usage(4, 2));
    let resp = gw
        .post(
            "/v1/responses",
            &json!({
                "stream": true,
                "input": [{"role": "user", "content": [{"type": "input_text", "text": "stream it"}]}],
            }),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let body = read_stream(resp).await;
    let events: Vec<Value> = sse_data(&body)
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"response.created"));
    assert_eq!(types.last(), Some(&"response.completed"));
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Streamed response.");
    let done = events.last().unwrap();
    assert_eq!(done["response"]["usage"]["output_tokens"], 2);
    assert_eq!(done["response"]["output_text"], "Streamed response.");
    let seqs: Vec<u64> = events
        .iter()
        .map(|e| e["sequence_number"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    // The user text reached the model.
    let last = gw.llm.requests().pop().unwrap();
    assert!(last.body.to_string().contains("stream it"));
}

#[tokio::test]
async fn tools_invoke_contract() {
    let gw = Gateway::start(r#"tools: { deny: ["exec"] }"#, &[]).await;
    std::fs::create_dir_all(gw.home.path().join("workspace")).unwrap();
    std::fs::write(gw.home.path().join("workspace/data.txt"), "tool data\n").unwrap();

    for path in ["/tools/invoke", "/v1/tools/invoke"] {
        let resp = gw
            .post(path, &json!({"tool": "read", "args": {"path": "data.txt"}}))
            .await;
        assert_eq!(resp.status(), 200, "{path}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["ok"], true);
        assert!(body["result"]["content"]
            .as_str()
            .unwrap()
            .contains("tool data"));
    }

    let body: Value = gw
        .post("/tools/invoke", &json!({"tool": "read", "dryRun": true}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["ok"], true);
    assert_eq!(body["result"]["tool"]["name"], "read");
    assert_eq!(body["result"]["tool"]["parameters"]["type"], "object");

    // 400: bad arguments, failing tool, malformed body.
    let resp = gw
        .post("/tools/invoke", &json!({"tool": "read", "args": [1, 2]}))
        .await;
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["ok"], false);
    assert!(body["error"]["type"].is_string() && body["error"]["message"].is_string());
    let resp = gw
        .post(
            "/tools/invoke",
            &json!({"tool": "read", "args": {"path": "missing.txt"}}),
        )
        .await;
    assert_eq!(resp.status(), 400);
    assert_eq!(
        resp.json::<Value>().await.unwrap()["error"]["type"],
        "tool_error"
    );
    // A body that is not JSON: refused by its type before it is read, then (with the
    // right type) by its content.
    let resp = gw
        .http
        .post(gw.url("/tools/invoke"))
        .body("tool=read")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 415);
    assert_eq!(resp.json::<Value>().await.unwrap()["ok"], false);
    let resp = gw
        .http
        .post(gw.url("/tools/invoke"))
        .header("content-type", "application/json")
        .body("tool=read")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    assert_eq!(resp.json::<Value>().await.unwrap()["ok"], false);

    // 404: unknown, denied by config, denied by default.
    for tool in ["no_such_tool", "exec", "cron", "sessions_spawn"] {
        let resp = gw.post("/tools/invoke", &json!({"tool": tool})).await;
        assert_eq!(resp.status(), 404, "{tool}");
        assert_eq!(resp.json::<Value>().await.unwrap()["ok"], false);
    }
}

#[tokio::test]
async fn auth_roles_and_tokens() {
    let token = "test-gateway-token";
    let gw = Gateway::start(
        r#"users: [{ id: "alice", token_env: "ALICE_TOKEN" }, { id: "vera", token_env: "VERA_TOKEN", role: "viewer" }]"#,
        &[
            ("FERROCLAW_GATEWAY_TOKEN", token),
            ("FERROCLAW_GATEWAY_VIEWER_TOKEN", "viewer-token"),
            ("ALICE_TOKEN", "alice-token"),
            ("VERA_TOKEN", "vera-token"),
        ],
    )
    .await;
    let chat = json!({"messages": [{"role": "user", "content": "hi"}]});

    // HTTP: no token / wrong token → 401 in each route's shape; /health stays open.
    let post = |auth: Option<&'static str>, path: &'static str, body: Value| {
        let mut rb = gw.anon.post(gw.url(path)).json(&body);
        if let Some(t) = auth {
            rb = rb.bearer_auth(t);
        }
        rb.send()
    };
    for auth in [
        None,
        Some("wrong"),
        Some("test-gateway-toke"),
        Some("test-gateway-tokenX"),
    ] {
        let resp = post(auth, "/v1/chat/completions", chat.clone())
            .await
            .unwrap();
        assert_eq!(resp.status(), 401, "{auth:?}");
        assert!(resp.json::<Value>().await.unwrap()["error"]["message"].is_string());
        let resp = post(auth, "/tools/invoke", json!({"tool": "read"}))
            .await
            .unwrap();
        assert_eq!(resp.status(), 401);
        assert_eq!(resp.json::<Value>().await.unwrap()["ok"], false);
        let resp = gw.anon.get(gw.url("/v1/models")).send().await.unwrap();
        assert_eq!(resp.status(), 401);
    }
    assert_eq!(
        gw.anon
            .get(gw.url("/health"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    gw.llm.push(Reply::text("authorised"));
    let resp = post(Some(token), "/v1/chat/completions", chat.clone())
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);

    // The viewer token reads but cannot start runs or tools.
    let resp = gw
        .anon
        .get(gw.url("/v1/models"))
        .bearer_auth("viewer-token")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    for path in ["/v1/chat/completions", "/v1/responses", "/tools/invoke"] {
        let resp = post(
            Some("viewer-token"),
            path,
            json!({"tool": "ls", "input": "x"}),
        )
        .await
        .unwrap();
        assert_eq!(resp.status(), 403, "{path}");
        let body = resp.text().await.unwrap();
        assert!(body.contains("needs the operator role"), "{body}");
    }

    // A per-user token is its user: it cannot act for another.
    let resp = gw
        .anon
        .post(gw.url("/v1/chat/completions"))
        .bearer_auth("alice-token")
        .header("x-ferroclaw-user-id", "bob")
        .json(&chat)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    assert!(resp.text().await.unwrap().contains("cannot act for user"));
    let resp = gw
        .anon
        .post(gw.url("/v1/chat/completions"))
        .bearer_auth("alice-token")
        .json(&json!({"user": "bob", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403, "the OpenAI user field names a user too");

    // WS: requests before connect are refused.
    let mut ws = gw.ws().await;
    let res = ws.call("health", json!({})).await;
    assert_eq!(res["ok"], false);
    assert_eq!(res["error"]["code"], "UNAUTHORIZED");

    // Wrong or no token: refused with the reason, then the socket is closed (no
    // viewer access to conversations without a credential).
    for params in [
        json!({"user_id": "x", "token": "wrong"}),
        json!({"user_id": "x"}),
        json!({"minProtocol": 3, "maxProtocol": 3, "client": {"id": "t"}, "auth": {"token": "test-gateway-toke"}}),
        json!({"minProtocol": 3, "maxProtocol": 3, "client": {"id": "t"}}),
    ] {
        let mut ws = gw.ws().await;
        let res = ws.call("connect", params.clone()).await;
        assert_eq!(res["ok"], false, "{params}");
        assert_eq!(res["error"]["code"], "UNAUTHORIZED");
        let msg = res["error"]["message"].as_str().unwrap();
        assert!(msg.contains("token"), "{msg}");
        assert!(ws.read().await.is_none(), "closed after a refused connect");
    }

    // Viewer token: read methods work, chat and deletion do not.
    let mut ws = gw.ws().await;
    let res = ws
        .call("connect", json!({"token": "viewer-token", "user_id": "x"}))
        .await;
    assert!(
        res["error"]["message"]
            .as_str()
            .unwrap()
            .contains("only the gateway token may name"),
        "{res}"
    );
    let mut ws = gw.ws().await;
    let res = ws.call("connect", json!({"token": "viewer-token"})).await;
    assert_eq!(res["payload"]["role"], "viewer", "{res}");
    for m in [
        "health",
        "status",
        "agents.list",
        "models.list",
        "sessions.list",
    ] {
        let res = ws.call(m, json!({})).await;
        assert_eq!(res["ok"], true, "{m}: {res}");
    }
    let res = ws.call("chat.send", json!({"message": "hi"})).await;
    assert_eq!(res["error"]["code"], "UNAUTHORIZED");
    let res = ws
        .call("sessions.delete", json!({"sessionKey": "main"}))
        .await;
    assert_eq!(res["error"]["code"], "UNAUTHORIZED");
    let res = ws.call("no.such.method", json!({})).await;
    assert_eq!(res["error"]["code"], "INVALID_REQUEST");

    // A user token over WS: operator, bound to its user.
    let mut ws = gw.ws().await;
    let res = ws
        .call("connect", json!({"token": "alice-token", "user_id": "bob"}))
        .await;
    assert_eq!(res["error"]["code"], "UNAUTHORIZED", "{res}");
    let mut ws = gw.ws().await;
    let res = ws.call("connect", json!({"token": "alice-token"})).await;
    assert_eq!(res["payload"]["role"], "operator", "{res}");
    assert_eq!(res["payload"]["user_id"], "alice");

    // Right token → admin (OpenClaw dialect, token under auth).
    let mut ws = gw.ws().await;
    let res = ws
        .call(
            "connect",
            json!({"minProtocol": 3, "maxProtocol": 3, "client": {"id": "t", "version": "1", "platform": "test", "mode": "cli"}, "auth": {"token": token}}),
        )
        .await;
    assert_eq!(res["payload"]["role"], "admin");
    gw.llm.push(Reply::text("ws authorised"));
    let res = ws.call("chat.send", json!({"message": "hi"})).await;
    assert_eq!(res["ok"], true, "{res}");
    assert_eq!(res["payload"]["content"], "ws authorised");
}

#[tokio::test]
async fn ws_connect_both_dialects() {
    let gw = Gateway::start("", &[]).await;
    let mut ws = gw.ws().await;
    let res = ws.connect_goclaw(None).await;
    assert_eq!(res["type"], "res");
    assert_eq!(res["ok"], true);
    let p = &res["payload"];
    assert_eq!(p["protocol"], 3);
    assert_eq!(
        p["role"], "admin",
        "the gateway token is the admin credential"
    );
    assert_eq!(p["user_id"], "tester");
    assert_eq!(p["server"]["name"], "ferroclaw");
    let res = ws.call("connect", json!({"user_id": "x"})).await;
    assert_eq!(res["ok"], false, "second connect is refused");

    let mut ws = gw.ws().await;
    let res = ws
        .call(
            "connect",
            json!({"minProtocol": 3, "maxProtocol": 3, "client": {"id": "cli", "version": "1.0", "platform": "linux", "mode": "cli"}, "auth": {"token": gw.token}}),
        )
        .await;
    let p = &res["payload"];
    assert_eq!(p["type"], "hello-ok");
    assert_eq!(p["protocol"], 3);
    assert!(p["server"]["connId"].is_string() && p["server"]["version"].is_string());
    let methods = p["features"]["methods"].as_array().unwrap();
    assert!(methods.contains(&json!("chat.send")));
    assert_eq!(p["policy"]["maxPayload"], 512 * 1024);
    assert_eq!(p["snapshot"]["defaultAgentId"], "main");
    let agents = ws.call("agents.list", json!({})).await;
    assert_eq!(agents["payload"]["agents"][1]["id"], "helper");
    let agent = ws.call("agent", json!({"agentId": "helper"})).await;
    assert_eq!(agent["payload"]["name"], "Helper");
    assert!(agent["payload"]["tools"]
        .as_array()
        .unwrap()
        .contains(&json!("read")));

    // No protocol in common (this gateway speaks 3 and 4).
    let mut ws = gw.ws().await;
    let res = ws
        .call(
            "connect",
            json!({"minProtocol": 5, "maxProtocol": 6, "client": {"id": "future"}}),
        )
        .await;
    assert_eq!(res["error"]["code"], "INVALID_REQUEST");
    assert_eq!(res["error"]["details"]["code"], "PROTOCOL_MISMATCH");
    // Protocol 4 in common, but no token: refused for that.
    let mut ws = gw.ws().await;
    let res = ws
        .call(
            "connect",
            json!({"minProtocol": 4, "maxProtocol": 5, "client": {"id": "future"}}),
        )
        .await;
    assert_eq!(res["error"]["code"], "UNAUTHORIZED");
    assert_eq!(res["error"]["details"]["code"], "AUTH_TOKEN_MISSING");
}

#[tokio::test]
async fn ws_chat_send_streams_events_in_order_then_answers() {
    let gw = Gateway::start("", &[]).await;
    gw.llm.push(Reply::tool_call(
        "call_9",
        "write",
        json!({"path": "ws.txt", "content": "x"}),
    ));
    gw.llm
        .push(Reply::text("All done over WS.").with_usage(20, 6));
    let mut ws = gw.ws().await;
    ws.connect_goclaw(None).await;
    let id = ws
        .send(
            "chat.send",
            json!({"message": "write ws.txt", "sessionKey": "ws-1"}),
        )
        .await;
    let (events, res) = ws.until_res(&id).await;
    assert_eq!(res["ok"], true, "{res}");
    let p = &res["payload"];
    assert_eq!(p["content"], "All done over WS.");
    assert_eq!(p["usage"]["output"], 6);
    let run_id = p["runId"].as_str().unwrap();

    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "seq increases: {seqs:?}"
    );
    let types: Vec<String> = events.iter().map(event_type).collect();
    let pos = |t: &str| {
        types
            .iter()
            .position(|x| x == t)
            .unwrap_or_else(|| panic!("no {t} in {types:?}"))
    };
    assert_eq!(pos("agent:run.started"), 0);
    assert!(pos("agent:tool.call") < pos("agent:tool.result"));
    assert!(pos("agent:tool.result") < pos("chat:chunk"));
    assert_eq!(types.last().unwrap(), "agent:run.completed");
    for e in &events {
        assert_eq!(e["payload"]["runId"], run_id);
    }
    let text: String = events
        .iter()
        .filter(|e| event_type(e) == "chat:chunk")
        .map(|e| e["payload"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(text, "All done over WS.");

    // History and session methods see the run.
    let hist = ws
        .call("chat.history", json!({"sessionKey": "ws-1", "limit": 2}))
        .await;
    let msgs = hist["payload"]["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[1]["role"], "assistant");
    let list = ws.call("sessions.list", json!({})).await;
    assert!(list["payload"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["key"] == "ws-1"));
    let preview = ws
        .call("sessions.preview", json!({"sessionKey": "ws-1"}))
        .await;
    assert_eq!(preview["payload"]["messages"][0]["text"], "write ws.txt");
    let inject = ws
        .call(
            "chat.inject",
            json!({"sessionKey": "ws-1", "message": "operator note"}),
        )
        .await;
    assert_eq!(inject["ok"], true, "{inject}");
    let patch = ws
        .call(
            "sessions.patch",
            json!({"sessionKey": "ws-1", "label": "demo"}),
        )
        .await;
    assert_eq!(patch["ok"], true, "{patch}");
    let entries = gw.transcript("main", "ws-1");
    assert!(entries
        .iter()
        .any(|e| e["type"] == "session_info" && e["name"] == "demo"));
    assert_eq!(messages(&entries).last().unwrap().1, "operator note");
    let del = ws
        .call("sessions.delete", json!({"sessionKey": "ws-1"}))
        .await;
    assert_eq!(del["payload"]["deleted"], true);
    let hist = ws.call("chat.history", json!({"sessionKey": "ws-1"})).await;
    assert_eq!(hist["payload"]["messages"], json!([]));
}

#[tokio::test]
async fn ws_chat_abort_stops_the_run_and_keeps_a_valid_transcript() {
    let gw = Gateway::start("", &[]).await;
    gw.llm
        .push(Reply::text("this answer never finishes").hang_after(2));
    let mut ws = gw.ws().await;
    ws.connect_goclaw(None).await;
    let send = ws
        .send(
            "chat.send",
            json!({"message": "long task", "sessionKey": "abort-me"}),
        )
        .await;
    // The run is producing text: abort it.
    ws.until_event(|e| event_type(e) == "chat:chunk").await;
    let abort = ws
        .send("chat.abort", json!({"sessionKey": "abort-me"}))
        .await;
    let (_, abort_res) = ws.until_res(&abort).await;
    assert_eq!(abort_res["payload"]["aborted"], true, "{abort_res}");
    let (events, res) = ws.until_res(&send).await;
    assert_eq!(res["ok"], true, "{res}");
    assert_eq!(res["payload"]["status"], "aborted");
    assert!(events.iter().any(|e| event_type(e) == "agent:run.failed"));
    let msgs = messages(&gw.transcript("main", "abort-me"));
    assert_eq!(msgs[0].0, "user");
    assert_eq!(msgs.last().unwrap().0, "assistant");
    assert_eq!(msgs.last().unwrap().2, "aborted");
}

#[tokio::test]
async fn ws_repeated_idempotency_key_runs_once() {
    let gw = Gateway::start("", &[]).await;
    gw.llm.push(Reply::text("only once"));
    let mut ws = gw.ws().await;
    ws.connect_goclaw(None).await;
    let params = json!({"message": "do it", "sessionKey": "idem", "idempotencyKey": "k-1"});
    // Back to back: the second arrives while the first is still running.
    let a = ws.send("chat.send", params.clone()).await;
    let b = ws.send("chat.send", params.clone()).await;
    let (_, ra) = ws.until_res(&a).await;
    let (_, rb) = ws.until_res(&b).await;
    assert_eq!(ra["payload"]["content"], "only once");
    assert_eq!(rb["payload"]["content"], "only once");
    assert_eq!(ra["payload"]["runId"], rb["payload"]["runId"]);
    assert_eq!(rb["payload"]["duplicate"], true);
    // And again after it finished.
    let rc = ws.call("chat.send", params).await;
    assert_eq!(rc["payload"]["runId"], ra["payload"]["runId"]);
    assert_eq!(gw.llm.requests().len(), 1, "one run, one LLM call");
    let users = messages(&gw.transcript("main", "idem"))
        .into_iter()
        .filter(|m| m.0 == "user")
        .count();
    assert_eq!(users, 1);
}

#[tokio::test]
async fn concurrent_sends_on_one_session_run_in_turn() {
    let gw = Gateway::start("", &[]).await;
    // The first answer is slow, so the second message arrives while it runs.
    gw.llm
        .push(Reply::text("first answer").delay(Duration::from_millis(300)));
    gw.llm.push(Reply::text("second answer"));
    let mut a = gw.ws().await;
    let mut b = gw.ws().await;
    a.connect_goclaw(None).await;
    b.connect_goclaw(None).await;
    let ia = a
        .send(
            "chat.send",
            json!({"message": "message A", "sessionKey": "shared"}),
        )
        .await;
    a.until_event(|e| event_type(e) == "agent:run.started")
        .await;
    let ib = b
        .send(
            "chat.send",
            json!({"message": "message B", "sessionKey": "shared"}),
        )
        .await;
    let (_, ra) = a.until_res(&ia).await;
    let (_, rb) = b.until_res(&ib).await;
    assert_eq!(ra["payload"]["content"], "first answer");
    assert_eq!(rb["payload"]["content"], "second answer");

    let msgs: Vec<(String, String)> = messages(&gw.transcript("main", "shared"))
        .into_iter()
        .map(|m| (m.0, m.1))
        .collect();
    let expect = |r: &str, t: &str| (r.to_string(), t.to_string());
    assert_eq!(
        msgs,
        [
            expect("user", "message A"),
            expect("assistant", "first answer"),
            expect("user", "message B"),
            expect("assistant", "second answer"),
        ]
    );
    // The second run saw the first one's answer: it started after the first ended.
    let second = &gw.llm.requests()[1];
    assert!(second.body.to_string().contains("first answer"));
}

#[tokio::test]
async fn a_cli_and_a_websocket_on_one_home_take_turns_on_a_session() {
    // Two processes, two schedulers: the gateway serving a WebSocket turn, and
    // `ferroclaw agent chat` on the same home and session. The store's session lease
    // makes the CLI's run wait until the gateway's turn has written its answer.
    let gw = Gateway::start("", &[]).await;
    gw.llm
        .push(Reply::text("gateway answer").delay(Duration::from_millis(1500)));
    gw.llm.push(Reply::text("cli answer"));
    let mut ws = gw.ws().await;
    ws.connect_goclaw(None).await;
    let id = ws
        .send(
            "chat.send",
            json!({"message": "from the websocket", "sessionKey": "shared"}),
        )
        .await;
    gw.llm.wait_for_requests(1).await;
    let mut cli = tokio::process::Command::new(env!("CARGO_BIN_EXE_ferroclaw"));
    cli.args([
        "agent",
        "chat",
        "--session",
        "shared",
        "--no-stream",
        "-m",
        "from the cli",
    ])
    .env("FERROCLAW_HOME", gw.home.path())
    .env("HOME", gw.home.path())
    .env("FERROCLAW_LOG_LEVEL", "warn")
    .stdin(Stdio::null())
    .kill_on_drop(true);
    for v in PROVIDER_VARS {
        cli.env_remove(v);
    }
    let out = tokio::time::timeout(WAIT, cli.output())
        .await
        .expect("cli in time")
        .expect("cli runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "cli answer");
    let (_, res) = ws.until_res(&id).await;
    assert_eq!(res["payload"]["content"], "gateway answer");

    let reqs = gw.llm.requests();
    assert_eq!(reqs.len(), 2);
    assert!(
        reqs[1].body.to_string().contains("gateway answer"),
        "the CLI's run was sent the gateway turn's answer: it started after it"
    );
    let msgs: Vec<(String, String)> = messages(&gw.transcript("main", "shared"))
        .into_iter()
        .map(|m| (m.0, m.1))
        .collect();
    let expect = |r: &str, t: &str| (r.to_string(), t.to_string());
    assert_eq!(
        msgs,
        [
            expect("user", "from the websocket"),
            expect("assistant", "gateway answer"),
            expect("user", "from the cli"),
            expect("assistant", "cli answer"),
        ]
    );
}

#[tokio::test]
async fn interrupt_mode_aborts_the_running_turn() {
    let gw = Gateway::start("", &[]).await;
    gw.llm
        .push(Reply::text("slow original answer").hang_after(2));
    gw.llm.push(Reply::text("the new answer"));
    let mut ws = gw.ws().await;
    ws.connect_goclaw(None).await;
    let first = ws
        .send(
            "chat.send",
            json!({"message": "first", "sessionKey": "intr"}),
        )
        .await;
    ws.until_event(|e| event_type(e) == "chat:chunk").await;
    let second = ws
        .send(
            "chat.send",
            json!({"message": "never mind, do this", "sessionKey": "intr", "queueMode": "interrupt"}),
        )
        .await;
    let (_, r1) = ws.until_res(&first).await;
    let (_, r2) = ws.until_res(&second).await;
    assert_eq!(r1["payload"]["status"], "aborted", "{r1}");
    assert_eq!(r2["payload"]["content"], "the new answer", "{r2}");
    let msgs = messages(&gw.transcript("main", "intr"));
    let roles: Vec<(&str, &str)> = msgs.iter().map(|m| (m.0.as_str(), m.2.as_str())).collect();
    assert_eq!(
        roles,
        [
            ("user", ""),
            ("assistant", "aborted"),
            ("user", ""),
            ("assistant", "stop")
        ]
    );

    // The HTTP header selects the mode too, and `/stop` answers without a run.
    let resp = gw
        .http
        .post(gw.url("/v1/chat/completions"))
        .header("X-Ferroclaw-Queue-Mode", "sideways")
        .json(&json!({"messages": [{"role": "user", "content": "x"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let resp = gw
        .http
        .post(gw.url("/v1/chat/completions"))
        .header("X-Ferroclaw-Session-Key", "intr")
        .json(&json!({"messages": [{"role": "user", "content": "/stop"}]}))
        .send()
        .await
        .unwrap();
    let body: Value = resp.json().await.unwrap();
    assert!(body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .starts_with("Stopped 0"));
}

#[tokio::test]
async fn rate_limit_answers_429_then_recovers() {
    let gw = Gateway::start("rate_limit_rpm: 60", &[]).await;
    // Burst of 5, then refused.
    for i in 0..5 {
        let r = gw.http.get(gw.url("/v1/models")).send().await.unwrap();
        assert_eq!(r.status(), 200, "request {i}");
    }
    let r = gw.http.get(gw.url("/v1/models")).send().await.unwrap();
    assert_eq!(r.status(), 429);
    let retry: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry >= 1);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    // Waiting as told is the protocol; afterwards a request goes through.
    tokio::time::sleep(Duration::from_secs(retry)).await;
    let r = gw.http.get(gw.url("/v1/models")).send().await.unwrap();
    assert_eq!(r.status(), 200);

    // WebSocket requests share the budget per user: RESOURCE_EXHAUSTED with retryAfterMs.
    let mut ws = gw.ws().await;
    ws.connect_goclaw(None).await;
    let mut refused = None;
    for _ in 0..10 {
        let res = ws.call("health", json!({})).await;
        if res["ok"] == false {
            refused = Some(res);
            break;
        }
    }
    let res = refused.expect("WS requests are limited too");
    assert_eq!(res["error"]["code"], "RESOURCE_EXHAUSTED");
    assert!(res["error"]["retryAfterMs"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn oversized_http_body_and_ws_frame_are_refused() {
    let gw = Gateway::start("", &[]).await;
    let big = "x".repeat(1024 * 1024 + 10);
    let resp = gw
        .post(
            "/v1/chat/completions",
            &json!({"messages": [{"role": "user", "content": big}]}),
        )
        .await;
    assert_eq!(resp.status(), 413);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "payload_too_large");
    assert_eq!(gw.llm.requests().len(), 0);

    let mut ws = gw.ws().await;
    ws.connect_goclaw(None).await;
    let frame = json!({"type": "req", "id": "big", "method": "chat.send", "params": {"message": "y".repeat(600 * 1024)}});
    ws.stream
        .send(Message::text(frame.to_string()))
        .await
        .unwrap();
    let err = ws.read().await.expect("an error before the close");
    assert_eq!(err["ok"], false);
    assert_eq!(err["error"]["code"], "INVALID_REQUEST");
    assert!(ws.read().await.is_none(), "then the connection closes");
    assert_eq!(gw.llm.requests().len(), 0);
}

#[tokio::test]
async fn long_messages_are_truncated_with_a_note() {
    let gw = Gateway::start("max_message_chars: 100", &[]).await;
    gw.llm.push(Reply::text("got it"));
    let resp = gw
        .post(
            "/v1/chat/completions",
            &json!({"messages": [{"role": "user", "content": "z".repeat(500)}]}),
        )
        .await;
    assert_eq!(resp.status(), 200, "never rejected");
    let sent = gw.llm.requests()[0].body.to_string();
    assert!(sent.contains(&"z".repeat(100)) && !sent.contains(&"z".repeat(101)));
    assert!(sent.contains("truncated from 500 to 100"));
}

#[tokio::test]
async fn a_gateway_without_a_configured_token_generates_one_and_requires_it() {
    // Bound to every address (this machine has only loopback to reach it by): the
    // generated token guards it like a configured one.
    let gw = Gateway::start(r#"host: "0.0.0.0""#, &[]).await;
    let path = gw.home.path().join("data/gateway.token");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "only the owner may read the token file");
    }
    assert!(gw.token.len() >= 40, "a long random token");
    let resp = gw.anon.get(gw.url("/v1/models")).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    let resp = gw.http.get(gw.url("/v1/models")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    // The CLI on the same home prints the same token.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_ferroclaw"))
        .args(["gateway", "token"])
        .env("FERROCLAW_HOME", gw.home.path())
        .env_remove("FERROCLAW_GATEWAY_TOKEN")
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), gw.token);
    // The token is never printed by the gateway itself.
    assert!(!gw.stderr().contains(&gw.token));
}

#[tokio::test]
async fn graceful_shutdown_with_a_turn_in_flight() {
    let mut gw = Gateway::start("shutdown_grace_seconds: 1", &[]).await;
    gw.llm
        .push(Reply::text("an answer that hangs").hang_after(2));
    let mut ws = gw.ws().await;
    ws.connect_goclaw(None).await;
    let send = ws
        .send(
            "chat.send",
            json!({"message": "keep working", "sessionKey": "shut"}),
        )
        .await;
    ws.until_event(|e| event_type(e) == "chat:chunk").await;

    gw.signal(libc::SIGTERM);
    let events = ws.until_event(|e| e["event"] == "shutdown").await;
    assert!(!events.is_empty());
    // The hung turn is aborted after the grace period and still answered.
    let (_, res) = ws.until_res(&send).await;
    assert_eq!(res["payload"]["status"], "aborted", "{res}");
    assert!(
        ws.read().await.is_none(),
        "then the server closes the socket"
    );

    let status = tokio::time::timeout(WAIT, gw.child.wait())
        .await
        .expect("gateway exits")
        .unwrap();
    assert!(status.success(), "exit 0; stderr: {}", gw.stderr());
    let msgs = messages(&gw.transcript("main", "shut"));
    assert_eq!(msgs.first().unwrap().0, "user");
    assert_eq!(msgs.last().unwrap().0, "assistant");
    assert_eq!(msgs.last().unwrap().2, "aborted");
}

#[tokio::test]
async fn websocket_origin_is_checked() {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let gw = Gateway::start(r#"allowed_origins: ["http://good.example"]"#, &[]).await;
    let with_origin = |origin: &str| {
        let mut req = gw.ws_url.as_str().into_client_request().unwrap();
        req.headers_mut().insert("origin", origin.parse().unwrap());
        req
    };
    // The socket OpenClaw's clients open at the root is guarded the same way.
    let root = gw.base.replacen("http://", "ws://", 1);
    let at_root = |origin: &str| {
        let mut req = root.as_str().into_client_request().unwrap();
        req.headers_mut().insert("origin", origin.parse().unwrap());
        req
    };
    let own = gw.base.clone();
    for (origin, req) in [
        "http://evil.example",
        "null",
        "http://good.example.evil.example",
    ]
    .into_iter()
    .flat_map(|o| [(o, with_origin(o)), (o, at_root(o))])
    {
        let err = tokio_tungstenite::connect_async(req)
            .await
            .expect_err("foreign origin refused");
        match err {
            tokio_tungstenite::tungstenite::Error::Http(resp) => {
                assert_eq!(resp.status(), 403);
                let body =
                    String::from_utf8_lossy(resp.body().as_deref().unwrap_or_default()).to_string();
                assert!(body.contains("origin_not_allowed"), "{body}");
            }
            other => panic!("{origin}: expected HTTP 403, got {other:?}"),
        }
    }
    for origin in ["http://good.example", own.as_str()] {
        let (mut ok, _) = tokio_tungstenite::connect_async(with_origin(origin))
            .await
            .expect("allowed origin");
        ok.send(Message::text(
            json!({"type": "req", "id": "1", "method": "connect", "params": {"token": gw.token}})
                .to_string(),
        ))
        .await
        .unwrap();
        let challenge = ok.next().await.unwrap().unwrap();
        assert!(challenge.to_text().unwrap().contains("connect.challenge"));
        let reply = ok.next().await.unwrap().unwrap();
        assert!(reply.to_text().unwrap().contains("\"ok\":true"), "{origin}");
    }
}

// ---------------------------------------------------------------------------------
// Attacks from outside (issue: safe by default). Each refusal asserts its reason; the
// look-alikes next to them must keep working.

/// Sends raw bytes and returns everything the server answers until it closes.
async fn raw_exchange(addr: &str, request: &[u8]) -> String {
    use tokio::io::AsyncWriteExt;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(request).await.expect("write");
    let mut out = Vec::new();
    tokio::time::timeout(WAIT, s.read_to_end(&mut out))
        .await
        .expect("the server must close the connection")
        .expect("read");
    String::from_utf8_lossy(&out).to_string()
}

#[tokio::test]
async fn attack_cross_site_requests_from_a_web_page_are_refused() {
    let gw = Gateway::start(r#"tools: { allow: ["exec"] }"#, &[]).await;
    let ws_dir = gw.home.path().join("workspace");
    let exec = r#"{"tool":"exec","args":{"command":"touch pwned"}}"#;
    // What a page can send without a CORS preflight: text/plain, form and multipart
    // bodies, with or without the Origin a browser adds, with or without a token.
    let shapes: Vec<(Option<&str>, Option<&str>, &str)> = vec![
        (Some("text/plain"), None, "unsupported_media_type"),
        (
            Some("text/plain;charset=UTF-8"),
            None,
            "unsupported_media_type",
        ),
        (
            Some("application/x-www-form-urlencoded"),
            None,
            "unsupported_media_type",
        ),
        (
            Some("multipart/form-data; boundary=x"),
            None,
            "unsupported_media_type",
        ),
        (None, None, "unsupported_media_type"),
        (
            Some("text/plain"),
            Some("https://evil.example"),
            "origin_not_allowed",
        ),
        (
            Some("application/json"),
            Some("https://evil.example"),
            "origin_not_allowed",
        ),
        (Some("application/json"), Some("null"), "origin_not_allowed"),
        (
            Some("application/json"),
            Some("http://127.0.0.1:1"),
            "origin_not_allowed",
        ),
    ];
    for path in [
        "/tools/invoke",
        "/v1/tools/invoke",
        "/v1/chat/completions",
        "/v1/responses",
    ] {
        for (ct, origin, reason) in &shapes {
            for client in [&gw.anon, &gw.http] {
                let mut rb = client.post(gw.url(path)).body(exec);
                if let Some(ct) = ct {
                    rb = rb.header("content-type", *ct);
                }
                if let Some(o) = origin {
                    rb = rb.header("origin", *o);
                }
                let resp = rb.send().await.unwrap();
                let status = resp.status().as_u16();
                let body = resp.text().await.unwrap();
                assert!(
                    status == 415 || status == 403,
                    "{path} {ct:?} {origin:?}: {status} {body}"
                );
                assert!(body.contains(reason), "{path} {ct:?} {origin:?}: {body}");
            }
        }
    }
    assert!(!ws_dir.join("pwned").exists(), "no command ran");
    assert!(gw.llm.requests().is_empty(), "no run started");

    // Look-alikes: the same request as JSON with the token, from no origin or the
    // gateway's own, runs.
    for origin in [None, Some(gw.base.clone())] {
        let mut rb = gw
            .http
            .post(gw.url("/tools/invoke"))
            .header("content-type", "application/json; charset=utf-8")
            .body(r#"{"tool":"exec","args":{"command":"echo harmless > ok.txt"}}"#);
        if let Some(o) = origin {
            rb = rb.header("origin", o);
        }
        let resp = rb.send().await.unwrap();
        assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    }
    assert!(ws_dir.join("ok.txt").exists());
}

#[tokio::test]
async fn attack_dns_rebinding_host_names_are_refused() {
    let gw = Gateway::start("", &[]).await;
    let chat = json!({"messages": [{"role": "user", "content": "hi"}]});
    for host in [
        "evil.example",
        "evil.example:18789",
        "localhost.evil.example",
        "127.0.0.1.nip.io",
        "attacker.test:80",
    ] {
        for (method, path) in [
            ("GET", "/health"),
            ("GET", "/v1/models"),
            ("POST", "/v1/chat/completions"),
            ("GET", "/ws"),
        ] {
            let rb = match method {
                "GET" => gw.http.get(gw.url(path)),
                _ => gw.http.post(gw.url(path)).json(&chat),
            };
            let resp = rb.header("host", host).send().await.unwrap();
            assert_eq!(resp.status(), 403, "{host} {path}");
            let body = resp.text().await.unwrap();
            assert!(body.contains("host_not_allowed"), "{host} {path}: {body}");
        }
    }
    let port = gw.base.rsplit(':').next().unwrap().to_string();
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        "LOCALHOST".to_string(),
        format!("[::1]:{port}"),
    ] {
        let resp = gw
            .http
            .get(gw.url("/v1/models"))
            .header("host", &host)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{host}");
    }
    // Heads a proxy and this server could read differently: an absolute-form target
    // naming another host, and a second Host header.
    let addr = gw.base.trim_start_matches("http://").to_string();
    let t = gw.token.clone();
    let absolute = format!("GET http://evil.example/v1/models HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {t}\r\nConnection: close\r\n\r\n");
    let answer = raw_exchange(&addr, absolute.as_bytes()).await;
    assert!(
        answer.starts_with("HTTP/1.1 403") && answer.contains("host_not_allowed"),
        "{answer}"
    );
    let twice = format!("GET /v1/models HTTP/1.1\r\nHost: {addr}\r\nHost: evil.example\r\nAuthorization: Bearer {t}\r\nConnection: close\r\n\r\n");
    let answer = raw_exchange(&addr, twice.as_bytes()).await;
    assert!(
        answer.starts_with("HTTP/1.1 400") && answer.contains("may appear only once"),
        "{answer}"
    );
    assert!(gw.llm.requests().is_empty());
    // A name the operator lists is accepted.
    let gw = Gateway::start(r#"allowed_hosts: ["gw.example.com"]"#, &[]).await;
    let resp = gw
        .http
        .get(gw.url("/v1/models"))
        .header("host", "gw.example.com:443")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = gw
        .http
        .get(gw.url("/v1/models"))
        .header("host", "evil.gw.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
}

#[tokio::test]
async fn attack_websocket_without_credential_gets_nothing() {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let gw = Gateway::start("", &[]).await;
    // A page on another origin cannot even open the socket.
    let mut req = gw.ws_url.as_str().into_client_request().unwrap();
    req.headers_mut()
        .insert("origin", "https://evil.example".parse().unwrap());
    assert!(tokio_tungstenite::connect_async(req).await.is_err());
    // A socket without a token: every method refused, then closed at connect.
    let mut ws = gw.ws().await;
    for m in [
        "sessions.list",
        "sessions.preview",
        "chat.history",
        "chat.send",
        "exec.approval.list",
        "exec.approval.approve",
    ] {
        let res = ws
            .call(m, json!({"sessionKey": "main", "id": "x", "always": true}))
            .await;
        assert_eq!(res["error"]["code"], "UNAUTHORIZED", "{m}: {res}");
    }
    let res = ws.call("connect", json!({"role": "operator"})).await;
    assert_eq!(res["error"]["code"], "UNAUTHORIZED");
    assert!(ws.read().await.is_none());
    // With the token it works (look-alike).
    let mut ws = gw.ws().await;
    assert_eq!(ws.connect_goclaw(None).await["ok"], true);
    assert_eq!(ws.call("sessions.list", json!({})).await["ok"], true);
}

#[tokio::test]
async fn attack_slow_clients_are_cut_off() {
    let gw = Gateway::start(
        "limits: { header_read_timeout_seconds: 1, body_read_timeout_seconds: 1, connect_timeout_seconds: 1 }",
        &[],
    )
    .await;
    let addr = gw.base.trim_start_matches("http://").to_string();
    // Headers dripped, never finished: the connection is closed (many at once).
    let mut dripping = Vec::new();
    for _ in 0..50 {
        let addr = addr.clone();
        dripping.push(tokio::spawn(async move {
            raw_exchange(
                &addr,
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: 1",
            )
            .await
        }));
    }
    for d in dripping {
        let answer = d.await.unwrap();
        assert!(
            answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
            "{answer}"
        );
    }
    // A body that never arrives in full: 408 with the reason, then closed.
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"messages\":",
        gw.token
    );
    let answer = raw_exchange(&addr, req.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("body_timeout"), "{answer}");
    // A WebSocket that never sends `connect` is closed with the reason (after the
    // challenge every connection is greeted with).
    let mut ws = gw.ws().await;
    let challenge = ws.read().await.expect("the challenge");
    assert_eq!(challenge["event"], "connect.challenge");
    let closed = tokio::time::timeout(WAIT, ws.stream.next())
        .await
        .expect("closed in time");
    match closed {
        Some(Ok(Message::Close(Some(frame)))) => {
            assert_eq!(u16::from(frame.code), 1008);
            assert!(
                frame.reason.contains("no connect within 1 s"),
                "{}",
                frame.reason
            );
        }
        other => panic!("expected a close frame, got {other:?}"),
    }
    // Look-alike: a normal request still works.
    gw.llm.push(Reply::text("still here"));
    let resp = gw
        .post(
            "/v1/chat/completions",
            &json!({"messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn attack_connection_floods_hit_the_caps() {
    let gw = Gateway::start(
        "limits: { max_connections_per_ip: 6, max_ws_connections_per_ip: 2, header_read_timeout_seconds: 120 }",
        &[],
    )
    .await;
    let addr = gw.base.trim_start_matches("http://").to_string();
    // Plain TCP connections that say nothing: once the address holds its cap of 6 HTTP
    // connections the next one is answered with a 503 and closed.
    let mut idle = Vec::new();
    for _ in 0..6 {
        idle.push(TcpStream::connect(&addr).await.unwrap());
    }
    let mut answer = String::new();
    for _ in 0..100 {
        // The accept loop takes connections in order, so the six are counted before
        // this one; each try is a fresh connection, not a wait.
        answer = raw_exchange(
            &addr,
            b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        )
        .await;
        if answer.starts_with("HTTP/1.1 503") {
            break;
        }
    }
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("too_many_connections"), "{answer}");
    // Places come back when connections close.
    drop(idle);
    assert!(
        serves_again(&gw).await,
        "HTTP serves again once the flood is gone"
    );

    // WebSockets have their own cap (an upgraded socket leaves the HTTP count).
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut ws = gw.ws().await;
        assert_eq!(ws.connect_goclaw(None).await["ok"], true);
        held.push(ws);
    }
    match tokio_tungstenite::connect_async(gw.ws_url.as_str()).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
            assert_eq!(resp.status(), 503);
            let body =
                String::from_utf8_lossy(resp.body().as_deref().unwrap_or_default()).to_string();
            assert!(body.contains("too_many_connections"), "{body}");
        }
        other => panic!("third WebSocket from one address must be refused: {other:?}"),
    }
    drop(held);
    let mut reopened = false;
    for _ in 0..200 {
        if tokio_tungstenite::connect_async(gw.ws_url.as_str())
            .await
            .is_ok()
        {
            reopened = true;
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(reopened, "a WebSocket place comes back when one closes");
}

/// Polls `/health` (bounded) until the gateway answers 200 again.
async fn serves_again(gw: &Gateway) -> bool {
    for _ in 0..200 {
        if let Ok(resp) = gw.http.get(gw.url("/health")).send().await {
            if resp.status() == 200 {
                return true;
            }
        }
        tokio::task::yield_now().await;
    }
    false
}

#[tokio::test]
async fn attack_users_cannot_reach_each_other_through_the_gateway() {
    let gw = Gateway::start_with(
        "per_user_workspace: true",
        "",
        r#"users: [{ id: "alice", token_env: "ALICE_TOKEN" }, { id: "bob", token_env: "BOB_TOKEN" }]"#,
        &[("ALICE_TOKEN", "alice-secret-token"), ("BOB_TOKEN", "bob-secret-token")],
    )
    .await;
    users_cannot_reach_each_other(gw).await;
}

/// The same attacks on a gateway whose sessions are rows of PostgreSQL.
#[tokio::test]
async fn attack_users_cannot_reach_each_other_in_managed_mode() {
    let url = ferroclaw_testkit::pg::fresh_database().await;
    let gw = Gateway::start_with(
        "per_user_workspace: true",
        r#"database: { mode: "managed" },"#,
        r#"users: [{ id: "alice", token_env: "ALICE_TOKEN" }, { id: "bob", token_env: "BOB_TOKEN" }]"#,
        &[
            ("ALICE_TOKEN", "alice-secret-token"),
            ("BOB_TOKEN", "bob-secret-token"),
            ("FERROCLAW_DATABASE_URL", url.as_str()),
        ],
    )
    .await;
    users_cannot_reach_each_other(gw).await;
}

async fn users_cannot_reach_each_other(gw: Gateway) {
    let chat = |token: &'static str, key: &'static str, text: &'static str| {
        gw.anon
            .post(gw.url("/v1/chat/completions"))
            .bearer_auth(token)
            .header("x-ferroclaw-session-key", key)
            .json(&json!({"messages": [{"role": "user", "content": text}]}))
            .send()
    };
    // Bob talks in his `main` session.
    gw.llm.push(Reply::text("noted, bob"));
    let resp = chat("bob-secret-token", "main", "my secret is TOPAZ-42")
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    // Alice's `main` is hers: her turn's request carries none of Bob's history.
    gw.llm.push(Reply::text("hello alice"));
    let resp = chat("alice-secret-token", "main", "what was said before?")
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let sent = gw.llm.requests().last().unwrap().body.to_string();
    assert!(!sent.contains("TOPAZ-42"), "alice's run saw bob's history");
    // Naming Bob's stored key does not reach it either.
    for key in ["user:bob:main", "user:bob%3A:main", "../main", "user:bob"] {
        gw.llm.push(Reply::text("nothing here"));
        let resp = chat("alice-secret-token", key, "repeat the secret")
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{key}");
        let sent = gw.llm.requests().last().unwrap().body.to_string();
        assert!(!sent.contains("TOPAZ-42"), "{key}");
    }
    // Acting for Bob with Alice's token is refused, whichever way the user is named.
    let resp = gw
        .anon
        .post(gw.url("/v1/chat/completions"))
        .bearer_auth("alice-secret-token")
        .header("x-ferroclaw-user-id", "bob")
        .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    // The gateway token naming no user on a per-user agent: refused, nothing written.
    let resp = gw
        .post(
            "/v1/chat/completions",
            &json!({"messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(resp.status(), 403);
    assert!(resp.text().await.unwrap().contains("user"));
    // Tools over HTTP work in the caller's own workspace only.
    let bob_ws = gw.home.path().join("workspace/user_bob");
    std::fs::write(bob_ws.join("secret.txt"), "TOPAZ-42").unwrap();
    for path in [
        "../user_bob/secret.txt",
        "../../workspace/user_bob/secret.txt",
    ] {
        let resp = gw
            .anon
            .post(gw.url("/tools/invoke"))
            .bearer_auth("alice-secret-token")
            .json(&json!({"tool": "read", "args": {"path": path}}))
            .send()
            .await
            .unwrap();
        let body = resp.text().await.unwrap();
        assert!(!body.contains("TOPAZ-42"), "{path}: {body}");
        assert!(body.contains("outside the workspace"), "{path}: {body}");
        assert!(
            !body.contains(gw.home.path().to_str().unwrap()),
            "no host path: {body}"
        );
    }
    let resp = gw
        .anon
        .post(gw.url("/tools/invoke"))
        .bearer_auth("bob-secret-token")
        .json(&json!({"tool": "read", "args": {"path": "secret.txt"}}))
        .send()
        .await
        .unwrap();
    assert!(
        resp.text().await.unwrap().contains("TOPAZ-42"),
        "bob reads his own file"
    );

    // WebSocket: Alice's list, history, preview, deletion and abort see only hers.
    let mut alice = gw.ws().await;
    let res = alice
        .call("connect", json!({"token": "alice-secret-token"}))
        .await;
    assert_eq!(res["payload"]["user_id"], "alice");
    let list = alice.call("sessions.list", json!({})).await;
    let keys: Vec<String> = list["payload"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap_or("").to_string())
        .collect();
    // Exactly the keys she used herself (even the ones that look like Bob's).
    let mut keys = keys;
    keys.sort();
    assert_eq!(
        keys,
        [
            "../main",
            "main",
            "user:bob",
            "user:bob%3A:main",
            "user:bob:main"
        ]
    );
    for key in ["main", "user:bob:main"] {
        let h = alice.call("chat.history", json!({"sessionKey": key})).await;
        assert!(!h.to_string().contains("TOPAZ-42"), "{key}: {h}");
        let p = alice
            .call("sessions.preview", json!({"sessionKey": key}))
            .await;
        assert!(!p.to_string().contains("TOPAZ-42"), "{key}: {p}");
    }
    let res = alice
        .call("sessions.delete", json!({"sessionKey": "main"}))
        .await;
    assert_eq!(res["ok"], true);
    let mut bob = gw.ws().await;
    bob.call("connect", json!({"token": "bob-secret-token"}))
        .await;
    let h = bob
        .call("chat.history", json!({"sessionKey": "main"}))
        .await;
    assert!(
        h.to_string().contains("TOPAZ-42"),
        "bob's session survived alice's delete: {h}"
    );
    let list = bob.call("sessions.list", json!({})).await;
    let sessions = list["payload"]["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{list}");
    assert_eq!(sessions[0]["key"], "main");

    // Watching `main` is watching one's own `main`: Bob's run never reaches Alice's
    // watcher (events arrive in order, so a leaked one would come before her own run's).
    let res = alice
        .call("sessions.subscribe", json!({"sessionKey": "main"}))
        .await;
    assert_eq!(res["ok"], true, "{res}");
    gw.llm.push(Reply::text("bob's reply SAPPHIRE-9"));
    assert_eq!(
        chat("bob-secret-token", "main", "hello")
            .await
            .unwrap()
            .status(),
        200
    );
    gw.llm.push(Reply::text("alice's reply"));
    assert_eq!(
        chat("alice-secret-token", "main", "hi")
            .await
            .unwrap()
            .status(),
        200
    );
    let seen = alice
        .until_event(|e| event_type(e) == "agent:run.completed")
        .await;
    assert!(!format!("{seen:?}").contains("SAPPHIRE"), "{seen:?}");
    assert_eq!(seen.last().unwrap()["payload"]["content"], "alice's reply");
}

#[tokio::test]
async fn attack_exec_through_the_gateway_is_confined_by_the_os() {
    // `full` mode switches the pattern guard off: what is refused here is refused by
    // the sandbox alone.
    let gw = Gateway::start_with(
        "",
        r#"tools: { exec: { mode: "full" } },"#,
        r#"tools: { allow: ["exec"] }"#,
        &[
            ("OPENAI_API_KEY", "sk-provider-secret-123456"),
            ("FERROCLAW_PROBE", "probe-value"),
        ],
    )
    .await;
    std::fs::write(
        gw.home.path().join(".env.local"),
        "SOME_KEY=dotenv-secret-value\n",
    )
    .unwrap();
    let pid = gw.child.id().expect("pid");
    let exec = |command: String| {
        let body = json!({"tool": "exec", "args": {"command": command}});
        let req = gw.http.post(gw.url("/tools/invoke")).json(&body);
        async move {
            let v: Value = req.send().await.unwrap().json().await.unwrap();
            v.to_string()
        }
    };
    let token = gw.token.clone();
    for (command, secret) in [
        ("cat ../config.json5".to_string(), "scripted"),
        ("cat ../.env.local".to_string(), "dotenv-secret-value"),
        ("cat ../data/gateway.token".to_string(), token.as_str()),
        (
            format!("cat /proc/{pid}/environ | base64"),
            "T1BFTkFJX0FQSV9LRVk",
        ),
        (
            format!("tr '\\0' '\\n' < /proc/{pid}/environ"),
            "sk-provider-secret",
        ),
        ("env".to_string(), "sk-provider-secret"),
        ("env".to_string(), "FERROCLAW_"),
        ("env".to_string(), token.as_str()),
    ] {
        let out = exec(command.clone()).await;
        assert!(!out.contains(secret), "{command} leaked {secret}: {out}");
    }
    // It cannot change the home (the exec allowlist survives restarts).
    let out = exec(
        "mkdir -p ../data && echo '[\"sh\"]' > ../data/exec-allowlist.json; echo done".to_string(),
    )
    .await;
    assert!(out.contains("done"), "{out}");
    assert!(
        !gw.home.path().join("data/exec-allowlist.json").exists(),
        "{out}"
    );
    // It cannot reach the network, nor the gateway itself on loopback.
    let port = gw.base.rsplit(':').next().unwrap().to_string();
    let out = exec(format!("python3 -c \"import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:{port}/health').read())\"")).await;
    assert!(!out.contains("status"), "{out}");
    // It cannot see or kill the gateway.
    let out = exec(format!("kill -9 {pid}; echo rc=$?")).await;
    assert!(out.contains("rc=1"), "{out}");
    let out = exec("ps -e -o comm".to_string()).await;
    assert!(!out.contains("ferroclaw"), "{out}");
    let resp = gw.http.get(gw.url("/health")).send().await.unwrap();
    assert_eq!(resp.status(), 200, "the gateway is alive");
    // Look-alikes: work in the workspace goes on.
    let out = exec("echo hello > note.txt && cat note.txt && git init -q . && git status --short && python3 -c 'print(1+1)'".to_string()).await;
    assert!(out.contains("hello") && out.contains('2'), "{out}");
    assert!(gw.home.path().join("workspace/note.txt").exists());
}

#[tokio::test]
async fn attack_a_users_approval_is_theirs_and_only_once() {
    let gw = Gateway::start_with(
        "per_user_workspace: true",
        r#"tools: { exec: { approval: "always", approval_timeout_seconds: 30 } },"#,
        r#"users: [{ id: "alice", token_env: "ALICE_T" }, { id: "bob", token_env: "BOB_T" }]"#,
        &[("ALICE_T", "alice-token"), ("BOB_T", "bob-token")],
    )
    .await;
    let mut alice = gw.ws().await;
    assert_eq!(
        alice.call("connect", json!({"token": "alice-token"})).await["ok"],
        true
    );
    let mut bob = gw.ws().await;
    assert_eq!(
        bob.call("connect", json!({"token": "bob-token"})).await["ok"],
        true
    );
    gw.llm.push(Reply::tool_call(
        "call_u",
        "exec",
        json!({"command": "echo alice-run"}),
    ));
    gw.llm.push(Reply::text("done"));
    let chat_id = alice
        .send("chat.send", json!({"message": "run it", "sessionKey": "s"}))
        .await;
    let events = alice
        .until_event(|e| e["event"] == "exec.approval.requested")
        .await;
    let id = events.last().unwrap()["payload"]["id"]
        .as_str()
        .expect("id")
        .to_string();
    // Bob neither lists nor answers it.
    let res = bob.call("exec.approval.list", json!({})).await;
    assert_eq!(res["payload"]["approvals"], json!([]), "{res}");
    let res = bob.call("exec.approval.approve", json!({"id": id})).await;
    assert_eq!(res["error"]["code"], "NOT_FOUND", "{res}");
    // Alice may approve her own once, never for everyone.
    let res = alice
        .call("exec.approval.approve", json!({"id": id, "always": true}))
        .await;
    assert_eq!(res["error"]["code"], "UNAUTHORIZED", "{res}");
    assert!(
        res["error"]["message"]
            .as_str()
            .unwrap()
            .contains("gateway token"),
        "{res}"
    );
    let res = alice.call("exec.approval.approve", json!({"id": id})).await;
    assert_eq!(res["payload"]["decision"], "approved", "{res}");
    let (_, res) = alice.until_res(&chat_id).await;
    assert_eq!(res["ok"], true, "{res}");
    assert!(!gw.home.path().join("data/exec-allowlist.json").exists());
}

/// A gateway in managed mode on `url`, sharing `token` with its peers.
async fn managed(url: &str, token: &str) -> Gateway {
    Gateway::start_with(
        "",
        r#"database: { mode: "managed" },"#,
        "",
        &[
            ("FERROCLAW_DATABASE_URL", url),
            ("FERROCLAW_GATEWAY_TOKEN", token),
        ],
    )
    .await
}

async fn ask(gw: &Gateway, session: &str, text: &str) -> reqwest::Response {
    gw.http
        .post(gw.url("/v1/chat/completions"))
        .header("X-Ferroclaw-Session-Key", session)
        .json(&json!({
            "model": "ferroclaw:main",
            "messages": [{"role": "user", "content": text}],
        }))
        .send()
        .await
        .expect("POST")
}

/// The user messages of a stored session, checking on the way that the transcript is
/// valid and one chain (a run overlapping another would fork it: two entries with the
/// same parent).
async fn user_messages(store: &ferroclaw_store::PgSessionStore, key: &str) -> Vec<String> {
    use ferroclaw_store::SessionStore as _;
    let bytes = store
        .export("main", key)
        .await
        .expect("export")
        .unwrap_or_else(|| panic!("session {key} stored"));
    assert!(
        ferroclaw_store::validate_bytes(&bytes).is_empty(),
        "{key}: {}",
        String::from_utf8_lossy(&bytes)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&bytes)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    for pair in lines[1..].windows(2) {
        assert_eq!(pair[1]["parentId"], pair[0]["id"], "{key}: one chain");
    }
    lines[1..]
        .iter()
        .filter(|l| l["message"]["role"] == "user")
        .map(|l| {
            l["message"]["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// Two gateway processes on one PostgreSQL behave as one gateway for sessions: 50
/// clients spread over both on 10 sessions, every acknowledged message stored exactly
/// once, no two runs of a session overlapping across the instances.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_one_database_share_sessions_without_overlap() {
    let url = ferroclaw_testkit::pg::fresh_database().await;
    let a = Arc::new(managed(&url, "shared-token").await);
    let b = Arc::new(managed(&url, "shared-token").await);
    // A takes clients 0-9, 20-29 and 40-49 (30), B the other 20: a reply for each.
    for (gw, n) in [(&a, 30), (&b, 20)] {
        for _ in 0..n {
            gw.llm.push(Reply::text("noted"));
        }
    }
    let mut clients = Vec::new();
    for i in 0..50 {
        // Session k gets clients k, k+10, …: alternately on A and on B.
        let gw = if (i / 10) % 2 == 0 {
            a.clone()
        } else {
            b.clone()
        };
        clients.push(tokio::spawn(async move {
            let session = format!("multi-{}", i % 10);
            let text = format!("message {i}");
            let resp = ask(&gw, &session, &text).await;
            (session, text, resp.status())
        }));
    }
    let mut sent: std::collections::HashMap<String, Vec<String>> = Default::default();
    for c in clients {
        let (session, text, status) = tokio::time::timeout(WAIT, c)
            .await
            .expect("answered in time")
            .expect("client");
        assert_eq!(status, 200, "{session}: {text}");
        sent.entry(session).or_default().push(text);
    }
    let store = ferroclaw_store::PgSessionStore::connect(&url)
        .await
        .expect("store");
    for (session, mut texts) in sent {
        let mut stored = user_messages(&store, &session).await;
        stored.sort();
        texts.sort();
        assert_eq!(stored, texts, "{session}: each message exactly once");
    }
}

/// An instance killed mid-run releases the session (its database connection, and so the
/// lease, dies with it); the other instance carries on with the session, whose history
/// stays valid.
#[tokio::test]
async fn a_killed_instance_does_not_block_its_sessions() {
    let url = ferroclaw_testkit::pg::fresh_database().await;
    let a = managed(&url, "shared-token").await;
    let b = managed(&url, "shared-token").await;
    // A's model never answers: its run is mid-flight when A dies.
    a.llm.push(Reply::text("never finished").hang_after(0));
    let stuck = {
        let http = a.http.clone();
        let target = a.url("/v1/chat/completions");
        tokio::spawn(async move {
            http.post(target)
                .header("X-Ferroclaw-Session-Key", "survivor")
                .json(&json!({"model": "ferroclaw:main",
                              "messages": [{"role": "user", "content": "first, on A"}]}))
                .send()
                .await
        })
    };
    tokio::time::timeout(WAIT, a.llm.wait_for_requests(1))
        .await
        .expect("A's run reached its model");
    a.signal(libc::SIGKILL);
    assert!(stuck.await.expect("task").is_err(), "A died mid-answer");

    b.llm.push(Reply::text("carried on"));
    let resp = tokio::time::timeout(WAIT, ask(&b, "survivor", "then, on B"))
        .await
        .expect("B is not blocked by A's lease");
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body["choices"][0]["message"]["content"], "carried on");
    let store = ferroclaw_store::PgSessionStore::connect(&url)
        .await
        .expect("store");
    let users = user_messages(&store, "survivor").await;
    assert_eq!(
        users,
        ["first, on A", "then, on B"],
        "nothing acknowledged lost"
    );
}

/// A stop sent to one instance reaches a run on the other: `chat.abort {runId}` over
/// WebSocket, then a `/stop` message over HTTP, each to A for a run executing on B.
#[tokio::test]
async fn a_stop_sent_to_one_instance_ends_the_run_on_the_other() {
    let url = ferroclaw_testkit::pg::fresh_database().await;
    let a = managed(&url, "shared-token").await;
    let b = managed(&url, "shared-token").await;
    let mut on_b = b.ws().await;
    on_b.connect_goclaw(None).await;
    let mut on_a = a.ws().await;
    on_a.connect_goclaw(None).await;

    for round in ["by-run-id", "by-stop-message"] {
        b.llm
            .push(Reply::text("this answer never finishes").hang_after(2));
        let send = on_b
            .send(
                "chat.send",
                json!({"message": format!("long task ({round})"), "sessionKey": "cross"}),
            )
            .await;
        let started = on_b
            .until_event(|e| event_type(e) == "agent:run.started")
            .await;
        let run_id = started
            .last()
            .and_then(|e| e["payload"]["runId"].as_str())
            .expect("run id")
            .to_string();
        on_b.until_event(|e| event_type(e) == "chat:chunk").await;
        if round == "by-run-id" {
            let res = on_a
                .call(
                    "chat.abort",
                    json!({"sessionKey": "cross", "runId": run_id}),
                )
                .await;
            assert_eq!(res["ok"], true, "{res}");
            assert_eq!(res["payload"]["aborted"], false, "not running on A: {res}");
        } else {
            let resp = ask(&a, "cross", "/stop").await;
            assert_eq!(resp.status(), 200);
            let body: Value = resp.json().await.expect("json");
            assert!(
                body["choices"][0]["message"]["content"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("other instances"),
                "{body}"
            );
        }
        let (_, res) = tokio::time::timeout(WAIT, on_b.until_res(&send))
            .await
            .expect("B's run ended");
        assert_eq!(res["payload"]["status"], "aborted", "{round}: {res}");
    }
}

/// Polls `/health` until it answers `status` (bounded by WAIT); returns its body.
async fn health_becomes(gw: &Gateway, status: u16) -> Value {
    tokio::time::timeout(WAIT, async {
        loop {
            if let Ok(resp) = gw.anon.get(gw.url("/health")).send().await {
                if resp.status() == status {
                    return resp.json().await.expect("json");
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("/health never answered {status}"))
}

/// The database goes away under a running gateway and comes back: turns meanwhile fail
/// with an error (nothing half-stored), `/health` says so, and the gateway serves again
/// once the database is back, without a restart.
#[tokio::test]
async fn a_gateway_rides_out_its_database_going_away() {
    // The server is the test's own: started from this thread, which outlives it.
    let mut pg = ferroclaw_testkit::pg::OwnServer::start().expect("postgres");
    let gw = managed(pg.url(), "shared-token").await;
    gw.llm.push(Reply::text("stored"));
    assert_eq!(ask(&gw, "steady", "before").await.status(), 200);
    assert_eq!(health_becomes(&gw, 200).await["database"], "ok");

    pg.stop();
    let body = health_becomes(&gw, 503).await;
    assert_eq!(body["database"], "unavailable");
    let resp = ask(&gw, "steady", "while it is down").await;
    assert!(resp.status().is_server_error(), "{}", resp.status());
    let err: Value = resp.json().await.expect("json error");
    assert!(err["error"]["message"].is_string(), "{err}");

    pg.resume().expect("postgres again");
    health_becomes(&gw, 200).await;
    gw.llm.push(Reply::text("stored again"));
    let resp = ask(&gw, "steady", "after").await;
    assert_eq!(resp.status(), 200);
    let store = ferroclaw_store::PgSessionStore::connect(pg.url())
        .await
        .expect("store");
    assert_eq!(
        user_messages(&store, "steady").await,
        ["before", "after"],
        "the failed turn left nothing behind"
    );
}

/// A gateway of users' agents on `url`: tokens for alice, bob and carol, an encryption key.
async fn tenant_gateway(url: &str) -> Gateway {
    Gateway::start_with(
        "",
        r#"database: { mode: "managed" },"#,
        r#"users: [{ id: "alice", token_env: "ALICE_TOKEN" }, { id: "bob", token_env: "BOB_TOKEN" }, { id: "carol", token_env: "CAROL_TOKEN" }]"#,
        &[
            ("ALICE_TOKEN", "alice-secret-token"),
            ("BOB_TOKEN", "bob-secret-token"),
            ("CAROL_TOKEN", "carol-secret-token"),
            ("FERROCLAW_DATABASE_URL", url),
            (
                "FERROCLAW_ENCRYPTION_KEY",
                "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
            ),
        ],
    )
    .await
}

/// `(status, body)` of a request with `token`.
async fn call_as(
    gw: &Gateway,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = gw.anon.request(method, gw.url(path)).bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn agent_ids(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn attack_users_cannot_reach_each_others_agents_files_or_provider_keys() {
    use reqwest::Method;
    let url = ferroclaw_testkit::pg::fresh_database().await;
    let a = tenant_gateway(&url).await;
    let b = tenant_gateway(&url).await;
    const ALICE: &str = "alice-secret-token";
    const BOB: &str = "bob-secret-token";
    const CAROL: &str = "carol-secret-token";

    // Alice registers her own endpoint with her key, and an agent on it.
    let (st, p) = call_as(&a, ALICE, Method::POST, "/v1/providers", Some(json!({
        "name": "alice-llm", "baseUrl": a.llm.openai_base_url(), "apiKey": "sk-alice-very-secret-9876"
    }))).await;
    assert_eq!(st, 200, "{p}");
    assert_eq!(p["apiKey"], "****9876", "masked: {p}");
    assert!(!p.to_string().contains("sk-alice"));
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let stored: String = client
        .query_one(
            "SELECT api_key FROM providers WHERE name = 'alice-llm'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        stored.starts_with("aes-gcm:") && !stored.contains("sk-alice"),
        "sealed at rest: {stored}"
    );
    let (st, body) = call_as(
        &a,
        ALICE,
        Method::POST,
        "/v1/agents",
        Some(json!({
            "id": "alice-bot", "kind": "predefined",
            "settings": {"name": "Alice Bot", "provider": "alice-llm", "model": "alice-model"}
        })),
    )
    .await;
    assert_eq!(st, 201, "{body}");
    let mut alice_ws = a.ws().await;
    alice_ws.call("connect", json!({"token": ALICE})).await;
    let res = alice_ws.call("agents.files.set", json!({
        "agentId": "alice-bot", "scope": "agent", "name": "AGENTS.md", "content": "ALICE-INSTRUCTIONS"
    })).await;
    assert_eq!(res["ok"], true, "{res}");
    // Her agent runs on her endpoint, with her key and her instructions.
    a.llm.push(Reply::text("hi alice"));
    let (st, body) = call_as(
        &a,
        ALICE,
        Method::POST,
        "/v1/chat/completions",
        Some(json!({
            "model": "ferroclaw:alice-bot",
            "messages": [{"role": "user", "content": "my secret is RUBY-7"}]
        })),
    )
    .await;
    assert_eq!(st, 200, "{body}");
    let req = a.llm.requests().last().unwrap().clone();
    assert_eq!(req.body["model"], "alice-model");
    assert_eq!(
        req.header("authorization"),
        Some("Bearer sk-alice-very-secret-9876")
    );
    assert!(req.body.to_string().contains("ALICE-INSTRUCTIONS"));

    // Bob, over HTTP: the agent, its sharing and her provider do not exist for him.
    let (st, list) = call_as(&a, BOB, Method::GET, "/v1/agents", None).await;
    assert_eq!(st, 200);
    assert!(
        !agent_ids(&list["data"]).contains(&"alice-bot".to_string()),
        "{list}"
    );
    // Nor among the models: she sees hers there, he does not.
    let model_ids = |v: &Value| -> Vec<String> {
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_string())
            .collect()
    };
    let (_, models) = call_as(&a, ALICE, Method::GET, "/v1/models", None).await;
    assert!(
        model_ids(&models).contains(&"ferroclaw:alice-bot".to_string()),
        "{models}"
    );
    let (st, models) = call_as(&a, BOB, Method::GET, "/v1/models", None).await;
    assert_eq!(st, 200);
    let ids = model_ids(&models);
    assert!(
        !ids.contains(&"ferroclaw:alice-bot".to_string()),
        "{models}"
    );
    assert!(ids.contains(&"ferroclaw:main".to_string()), "{models}");
    let not_found: Vec<(Method, &str, Option<Value>)> = vec![
        (Method::GET, "/v1/agents/alice-bot", None),
        (
            Method::PATCH,
            "/v1/agents/alice-bot",
            Some(json!({"settings": {"model": "x"}})),
        ),
        (Method::DELETE, "/v1/agents/alice-bot", None),
        (Method::GET, "/v1/agents/alice-bot/sharing", None),
        (
            Method::POST,
            "/v1/agents/alice-bot/sharing",
            Some(json!({"user": "bob", "role": "editor"})),
        ),
        (Method::DELETE, "/v1/agents/alice-bot/sharing/bob", None),
        (
            Method::POST,
            "/v1/chat/completions",
            Some(
                json!({"model": "ferroclaw:alice-bot", "messages": [{"role": "user", "content": "hi"}]}),
            ),
        ),
        (
            Method::POST,
            "/v1/chat/completions",
            Some(
                json!({"model": "agent:alice-bot", "messages": [{"role": "user", "content": "hi"}]}),
            ),
        ),
        (
            Method::POST,
            "/v1/responses",
            Some(json!({"model": "ferroclaw:alice-bot", "input": "hi"})),
        ),
        (
            Method::POST,
            "/tools/invoke",
            Some(json!({"tool": "read", "agentId": "alice-bot", "args": {"path": "AGENTS.md"}})),
        ),
        (Method::DELETE, "/v1/providers/alice-llm", None),
    ];
    for (method, path, body) in not_found {
        let (st, res) = call_as(&a, BOB, method.clone(), path, body).await;
        assert_eq!(st, 404, "{method} {path}: {res}");
        assert!(!res.to_string().contains("ALICE-INSTRUCTIONS"));
    }
    // The agent header names it no better than the model field.
    let resp = a
        .anon
        .post(a.url("/v1/chat/completions"))
        .bearer_auth(BOB)
        .header("x-ferroclaw-agent-id", "alice-bot")
        .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    assert!(resp.text().await.unwrap().contains("unknown agent"));
    // Acting as Alice is refused with the reason.
    let resp = a
        .anon
        .get(a.url("/v1/agents/alice-bot"))
        .bearer_auth(BOB)
        .header("x-ferroclaw-user-id", "alice")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    assert!(resp.text().await.unwrap().contains("cannot act for user"));
    // Her provider: not listed, not taken over, not usable for his own agent.
    let (_, provs) = call_as(&a, BOB, Method::GET, "/v1/providers", None).await;
    assert!(provs["data"].as_array().unwrap().is_empty(), "{provs}");
    let (st, res) = call_as(
        &a,
        BOB,
        Method::POST,
        "/v1/providers",
        Some(json!({
            "name": "alice-llm", "baseUrl": "http://127.0.0.1:9/v1"
        })),
    )
    .await;
    assert_eq!(st, 409, "{res}");
    let (st, res) = call_as(
        &a,
        BOB,
        Method::POST,
        "/v1/agents",
        Some(json!({
            "id": "bob-steals", "settings": {"provider": "alice-llm", "model": "m"}
        })),
    )
    .await;
    assert_eq!(st, 400, "{res}");
    assert!(res.to_string().contains("unknown provider"), "{res}");
    // Names that are not his to take, and a default for everyone.
    for (id, want) in [("main", 409), ("alice-bot", 409), ("../etc", 400)] {
        let (st, res) = call_as(&a, BOB, Method::POST, "/v1/agents", Some(json!({"id": id}))).await;
        assert_eq!(st, want, "{id}: {res}");
    }
    let (st, res) = call_as(
        &a,
        BOB,
        Method::POST,
        "/v1/agents",
        Some(json!({"id": "bob-everyone", "isDefault": true})),
    )
    .await;
    assert_eq!(st, 403, "{res}");
    let (st, res) = call_as(
        &a,
        BOB,
        Method::POST,
        "/v1/agents",
        Some(json!({"id": "bob-x", "settings": {"system": "x"}})),
    )
    .await;
    assert_eq!(st, 400, "unknown settings are refused: {res}");

    // Bob, over the WebSocket.
    let mut bob_ws = a.ws().await;
    bob_ws.call("connect", json!({"token": BOB})).await;
    let list = bob_ws.call("agents.list", json!({})).await;
    assert!(
        !agent_ids(&list["payload"]["agents"]).contains(&"alice-bot".to_string()),
        "{list}"
    );
    for (method, params) in [
        ("agent", json!({"agentId": "alice-bot"})),
        (
            "chat.send",
            json!({"agentId": "alice-bot", "message": "hi"}),
        ),
        (
            "chat.history",
            json!({"agentId": "alice-bot", "sessionKey": "main"}),
        ),
        ("sessions.list", json!({"agentId": "alice-bot"})),
        (
            "agents.update",
            json!({"agentId": "alice-bot", "settings": {"model": "x"}}),
        ),
        ("agents.delete", json!({"agentId": "alice-bot"})),
        (
            "agents.files.list",
            json!({"agentId": "alice-bot", "scope": "agent"}),
        ),
        (
            "agents.files.get",
            json!({"agentId": "alice-bot", "scope": "agent", "name": "AGENTS.md"}),
        ),
        (
            "agents.files.set",
            json!({"agentId": "alice-bot", "scope": "agent", "name": "AGENTS.md", "content": "pwned"}),
        ),
    ] {
        let res = bob_ws.call(method, params).await;
        assert_eq!(res["ok"], false, "{method}: {res}");
        assert_eq!(res["error"]["code"], "NOT_FOUND", "{method}: {res}");
        assert!(!res.to_string().contains("ALICE-INSTRUCTIONS"), "{method}");
    }

    // Bob's own agent: its model cannot start a subagent on Alice's (her key, her files).
    let (st, res) = call_as(
        &a,
        BOB,
        Method::POST,
        "/v1/agents",
        Some(json!({"id": "bob-bot"})),
    )
    .await;
    assert_eq!(st, 201, "{res}");
    a.llm.push(Reply::tool_call(
        "c1",
        "sessions_spawn",
        json!({"task": "say hi", "agentId": "alice-bot"}),
    ));
    a.llm.push(Reply::text("could not"));
    let before = a.llm.requests().len();
    let (st, _) = call_as(
        &a,
        BOB,
        Method::POST,
        "/v1/chat/completions",
        Some(json!({
            "model": "ferroclaw:bob-bot", "messages": [{"role": "user", "content": "use alice-bot"}]
        })),
    )
    .await;
    assert_eq!(st, 200);
    let reqs = a.llm.requests();
    assert_eq!(reqs.len(), before + 2, "no run on alice-bot");
    let last = reqs.last().unwrap().body.to_string();
    assert!(last.contains("unknown agent"), "{last}");
    assert!(reqs[before..]
        .iter()
        .all(|r| r.body["model"] != "alice-model"));

    // Instance B caches its view of alice-bot (not Bob's); Alice shares it on A; B sees
    // the change without a restart.
    let (st, _) = call_as(&b, BOB, Method::GET, "/v1/agents/alice-bot", None).await;
    assert_eq!(st, 404);
    let (st, res) = call_as(
        &a,
        ALICE,
        Method::POST,
        "/v1/agents/alice-bot/sharing",
        Some(json!({"user": "bob"})),
    )
    .await;
    assert_eq!(st, 200, "{res}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (st, view) = call_as(&b, BOB, Method::GET, "/v1/agents/alice-bot", None).await;
        if st == 200 {
            assert_eq!(view["access"], "use");
            assert!(
                view.get("settings").is_none(),
                "a user does not see the settings: {view}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "instance B never saw the share"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Shared as a user: he runs it in a session of his own, on her endpoint.
    b.llm.push(Reply::text("unused"));
    a.llm.push(Reply::text("hello bob"));
    let (st, body) = call_as(
        &b,
        BOB,
        Method::POST,
        "/v1/chat/completions",
        Some(json!({
            "model": "ferroclaw:alice-bot",
            "messages": [{"role": "user", "content": "what was said before?"}]
        })),
    )
    .await;
    assert_eq!(st, 200, "{body}");
    let sent = a.llm.requests().last().unwrap().body.to_string();
    assert!(!sent.contains("RUBY-7"), "bob's run saw alice's history");
    // ... but cannot change it, read its instructions, or keep more than USER.md.
    let (st, res) = call_as(
        &b,
        BOB,
        Method::PATCH,
        "/v1/agents/alice-bot",
        Some(json!({"settings": {}})),
    )
    .await;
    assert_eq!(st, 403, "{res}");
    assert!(res.to_string().contains("edit access"), "{res}");
    let mut bob_b = b.ws().await;
    bob_b.call("connect", json!({"token": BOB})).await;
    let res = bob_b
        .call(
            "agents.files.get",
            json!({"agentId": "alice-bot", "scope": "agent", "name": "AGENTS.md"}),
        )
        .await;
    assert_eq!(res["error"]["code"], "UNAUTHORIZED", "{res}");
    let res = bob_b
        .call(
            "agents.files.set",
            json!({"agentId": "alice-bot", "name": "AGENTS.md", "content": "x"}),
        )
        .await;
    assert_eq!(res["ok"], false, "{res}");
    assert!(res.to_string().contains("USER.md"), "{res}");
    let res = bob_b
        .call(
            "agents.files.set",
            json!({"agentId": "alice-bot", "name": "USER.md", "content": "BOB-PRIVATE"}),
        )
        .await;
    assert_eq!(res["ok"], true, "{res}");
    let res = alice_ws
        .call(
            "agents.files.get",
            json!({"agentId": "alice-bot", "name": "USER.md"}),
        )
        .await;
    assert_eq!(
        res["payload"]["exists"], false,
        "alice does not get bob's file: {res}"
    );
    // Carol was never shared it.
    let (st, _) = call_as(&b, CAROL, Method::GET, "/v1/agents/alice-bot", None).await;
    assert_eq!(st, 404);

    // Revoked on B: A forgets too.
    let (st, _) = call_as(
        &b,
        ALICE,
        Method::DELETE,
        "/v1/agents/alice-bot/sharing/bob",
        None,
    )
    .await;
    assert_eq!(st, 200);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while call_as(&a, BOB, Method::GET, "/v1/agents/alice-bot", None)
        .await
        .0
        != 404
    {
        assert!(
            std::time::Instant::now() < deadline,
            "instance A kept the revoked share"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Her deletion: gone for her too; the administrator sees what remains.
    let (st, _) = call_as(&a, ALICE, Method::DELETE, "/v1/agents/alice-bot", None).await;
    assert_eq!(st, 200);
    let (st, _) = call_as(&a, ALICE, Method::GET, "/v1/agents/alice-bot", None).await;
    assert_eq!(st, 404);
    // Her users' sessions stay stored under the id: nobody's new agent inherits them.
    let (st, res) = call_as(
        &b,
        BOB,
        Method::POST,
        "/v1/agents",
        Some(json!({"id": "alice-bot"})),
    )
    .await;
    assert_eq!(st, 409, "{res}");
    assert!(
        res.to_string().contains("not reused") || res.to_string().contains("deleted"),
        "{res}"
    );
    let (st, all) = call_as(&a, &a.token, Method::GET, "/v1/agents", None).await;
    assert_eq!(st, 200);
    let ids = agent_ids(&all["data"]);
    assert!(
        ids.contains(&"bob-bot".to_string()) && !ids.contains(&"alice-bot".to_string()),
        "{ids:?}"
    );
    let (_, provs) = call_as(&a, &a.token, Method::GET, "/v1/providers", None).await;
    assert!(!provs.to_string().contains("sk-alice"), "{provs}");
}

/// Runs short turns of `key` on `b` until `watcher` has seen one completed: the sign
/// that `b` forwards that session's runs (it learns of a new watcher asynchronously).
async fn relayed(watcher: &mut Ws, b: &Gateway, key: &str) {
    let completed = |e: &Value, text: &str| {
        event_type(e) == "agent:run.completed"
            && e["payload"]["remote"] == true
            && e["payload"]["content"]
                .as_str()
                .is_some_and(|c| c.contains(text))
    };
    for i in 0..100 {
        let text = format!("probe {i}.");
        b.llm.push(Reply::text(text.clone()));
        let resp = b
            .anon
            .post(b.url("/v1/chat/completions"))
            .bearer_auth(&b.token)
            .header("x-ferroclaw-session-key", key)
            .json(&json!({"messages": [{"role": "user", "content": "probe"}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let id = watcher.send("health", json!({})).await;
        let (events, _) = watcher.until_res(&id).await;
        if events.iter().any(|e| completed(e, "probe ")) {
            // An earlier probe's end arrived: this one is forwarded too, and its events
            // may still be on their way. The test starts after the last of them.
            if !events.iter().any(|e| completed(e, &text)) {
                watcher.until_event(|e| completed(e, &text)).await;
            }
            return;
        }
    }
    panic!("{key}: instance B never forwarded the runs of a watched session");
}

#[tokio::test]
async fn a_websocket_on_one_instance_watches_and_aborts_a_run_on_another() {
    let url = ferroclaw_testkit::pg::fresh_database().await;
    let env = [("FERROCLAW_DATABASE_URL", url.as_str())];
    let a = Gateway::start_with("", r#"database: { mode: "managed" },"#, "", &env).await;
    let b = Gateway::start_with("", r#"database: { mode: "managed" },"#, "", &env).await;
    let mut watcher = a.ws().await;
    watcher.connect_goclaw(None).await;
    let res = watcher
        .call("sessions.subscribe", json!({"sessionKey": "watched"}))
        .await;
    assert_eq!(res["payload"]["subscribed"], true, "{res}");
    // Another client on A watches another session.
    let mut other = a.ws().await;
    other.connect_goclaw(None).await;
    other
        .call("sessions.subscribe", json!({"sessionKey": "elsewhere"}))
        .await;
    // B forwards a session's runs once it has heard that someone watches it.
    relayed(&mut watcher, &b, "watched").await;
    relayed(&mut other, &b, "elsewhere").await;

    // A run of "watched" on B, producing text and then hanging.
    b.llm
        .push(Reply::text("partial answer that never ends").hang_after(2));
    let (b_http, b_url, b_token) = (
        b.anon.clone(),
        b.url("/v1/chat/completions"),
        b.token.clone(),
    );
    let request = tokio::spawn(async move {
        b_http
            .post(b_url)
            .bearer_auth(b_token)
            .header("x-ferroclaw-session-key", "watched")
            .json(&json!({"stream": true, "messages": [{"role": "user", "content": "go on"}]}))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    let events = watcher
        .until_event(|e| event_type(e) == "agent:run.started")
        .await;
    let started = events.last().unwrap();
    assert_eq!(started["payload"]["sessionKey"], "watched");
    assert_eq!(started["payload"]["remote"], true, "{started}");
    let run_id = started["payload"]["runId"].as_str().unwrap().to_string();
    let events = watcher.until_event(|e| event_type(e) == "chat:chunk").await;
    assert!(
        events.last().unwrap()["payload"]["content"]
            .as_str()
            .unwrap()
            .starts_with("part"),
        "{events:?}"
    );
    // Aborted from A, where it does not run.
    let res = watcher
        .call(
            "chat.abort",
            json!({"sessionKey": "watched", "runId": run_id}),
        )
        .await;
    assert_eq!(res["ok"], true, "{res}");
    let events = watcher
        .until_event(|e| {
            e["payload"]["runId"] == run_id.as_str()
                && matches!(
                    event_type(e).as_str(),
                    "agent:run.failed" | "agent:run.completed"
                )
        })
        .await;
    assert_eq!(event_type(events.last().unwrap()), "agent:run.failed");
    let body = tokio::time::timeout(WAIT, request).await.unwrap().unwrap();
    assert!(body.contains("part"), "{body}");

    // The other watcher got none of it: the first event it sees is the start of a run
    // of its own session (a broadcast keeps order, so a leaked event would come first).
    b.llm.push(Reply::text("done elsewhere"));
    let resp = b
        .anon
        .post(b.url("/v1/chat/completions"))
        .bearer_auth(&b.token)
        .header("x-ferroclaw-session-key", "elsewhere")
        .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let seen = other
        .until_event(|e| event_type(e) == "agent:run.completed")
        .await;
    assert!(
        seen.iter()
            .all(|e| e["payload"]["runId"] != run_id.as_str()),
        "{seen:?}"
    );
    assert_eq!(seen[0]["payload"]["sessionKey"], "elsewhere", "{seen:?}");
    assert!(seen.last().unwrap()["payload"]["content"]
        .as_str()
        .unwrap()
        .contains("done elsewhere"));

    // A run the watcher starts itself is sent once, with its chat.send.
    a.llm.push(Reply::text("mine"));
    let id = watcher
        .send(
            "chat.send",
            json!({"message": "hi", "sessionKey": "watched"}),
        )
        .await;
    let (events, res) = watcher.until_res(&id).await;
    assert_eq!(res["payload"]["status"], "completed", "{res}");
    let starts = events
        .iter()
        .filter(|e| event_type(e) == "agent:run.started")
        .count();
    assert_eq!(starts, 1, "{events:?}");
}

#[tokio::test]
async fn cron_jobs_over_websocket_run_once_across_two_instances_and_stay_their_owners() {
    let url = ferroclaw_testkit::pg::fresh_database().await;
    let a = tenant_gateway(&url).await;
    let b = tenant_gateway(&url).await;
    let mut alice = a.ws().await;
    alice
        .call("connect", json!({"token": "alice-secret-token"}))
        .await;
    let mut bob = b.ws().await;
    bob.call("connect", json!({"token": "bob-secret-token"}))
        .await;

    let res = alice
        .call(
            "cron.create",
            json!({"name": "ping", "message": "cron ping", "schedule": {"kind": "every", "every": "1h"}}),
        )
        .await;
    assert_eq!(res["ok"], true, "{res}");
    let job = res["payload"]["job"].clone();
    let id = job["id"].as_str().unwrap().to_string();
    assert_eq!(job["owner"], "alice");
    let res = alice
        .call(
            "cron.create",
            json!({"message": "x", "schedule": {"kind": "cron", "expr": "99 * * * *"}}),
        )
        .await;
    assert_eq!(res["error"]["code"], "INVALID_REQUEST", "{res}");
    assert!(
        res["error"]["message"]
            .as_str()
            .unwrap()
            .contains("schedule.expr"),
        "{res}"
    );

    // Bob, on the other instance: the job does not exist for him.
    let res = bob.call("cron.list", json!({})).await;
    assert_eq!(res["payload"]["jobs"], json!([]), "{res}");
    for (method, params) in [
        ("cron.status", json!({"id": id})),
        ("cron.runs", json!({"id": id})),
        ("cron.update", json!({"id": id, "message": "bob's now"})),
        ("cron.toggle", json!({"id": id})),
        ("cron.run", json!({"id": id})),
        ("cron.delete", json!({"id": id})),
    ] {
        let res = bob.call(method, params).await;
        assert_eq!(res["error"]["code"], "NOT_FOUND", "{method}: {res}");
    }
    let res = bob.call("cron.runs", json!({})).await;
    assert_eq!(
        res["error"]["code"], "INVALID_REQUEST",
        "all runs are the administrator's: {res}"
    );
    // Over HTTP the tool is denied by default.
    let (st, body) = call_as(
        &a,
        "alice-secret-token",
        reqwest::Method::POST,
        "/tools/invoke",
        Some(json!({"tool": "cron", "args": {"action": "list"}})),
    )
    .await;
    assert_ne!(st, 200, "{body}");
    assert!(body.to_string().contains("cron"), "{body}");

    // Toggle off and on; then run it now: one of the two instances runs it, once.
    let res = alice.call("cron.toggle", json!({"id": id})).await;
    assert_eq!(res["payload"]["job"]["enabled"], false, "{res}");
    assert_eq!(res["payload"]["job"]["nextRunAt"], Value::Null);
    let res = alice
        .call("cron.toggle", json!({"id": id, "enabled": true}))
        .await;
    assert_eq!(res["payload"]["job"]["enabled"], true, "{res}");
    a.llm.push(Reply::text("pong from cron"));
    b.llm.push(Reply::text("pong from cron"));
    let res = alice.call("cron.run", json!({"id": id})).await;
    assert_eq!(res["payload"]["queued"], true, "{res}");
    // The scheduler ticks every second: wait, bounded, for the run to be logged.
    let deadline = std::time::Instant::now() + WAIT;
    let run = loop {
        let res = alice.call("cron.runs", json!({"id": id})).await;
        let runs = res["payload"]["runs"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if let Some(r) = runs.iter().find(|r| r["status"] == "ok") {
            assert_eq!(runs.len(), 1, "{runs:?}");
            break r.clone();
        }
        assert!(std::time::Instant::now() < deadline, "no run logged: {res}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(run["output"], "pong from cron", "{run}");
    assert!(run["sessionKey"]
        .as_str()
        .unwrap()
        .starts_with(&format!("cron:{id}:run:")));
    let asked = |gw: &Gateway| {
        gw.llm
            .requests()
            .iter()
            .filter(|r| r.body.to_string().contains("cron ping"))
            .count()
    };
    assert_eq!(asked(&a) + asked(&b), 1, "run by exactly one instance");
    let res = alice.call("cron.status", json!({"id": id})).await;
    let next = res["payload"]["job"]["nextRunAt"].as_i64().unwrap();
    assert!(
        next > run["startedAt"].as_i64().unwrap() + 3_000_000,
        "{res}"
    );
    let res = alice.call("cron.status", json!({})).await;
    assert_eq!(
        (
            res["payload"]["enabled"].clone(),
            res["payload"]["jobs"].clone()
        ),
        (json!(true), json!(1)),
        "{res}"
    );

    let res = alice.call("cron.delete", json!({"id": id})).await;
    assert_eq!(res["payload"]["deleted"], true, "{res}");
    let res = alice.call("cron.list", json!({})).await;
    assert_eq!(res["payload"]["jobs"], json!([]), "{res}");
}

/// The child processes of `pid` (every thread's).
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            let list = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            out.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out
}

#[tokio::test]
async fn an_mcp_server_s_tools_reach_the_model_through_the_gateway_and_end_with_it() {
    let everything = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../.ci/mcp/node_modules/.bin/mcp-server-everything");
    assert!(
        everything.exists(),
        "run `npm install --prefix .ci/mcp` (what .ci/run does)"
    );
    let mcp = format!(
        r#"mcp: {{ servers: {{ everything: {{ command: "{}" }}, broken: {{ command: "/nonexistent/server" }} }} }},"#,
        everything.display()
    );
    let mut gw = Gateway::start_with("", &mcp, "", &[]).await;
    let mut ws = gw.ws().await;
    ws.connect_goclaw(None).await;
    // Started with the gateway: wait, bounded, for it to be ready.
    let deadline = std::time::Instant::now() + WAIT;
    let servers = loop {
        let res = ws.call("mcp.status", json!({})).await;
        let servers = res["payload"]["servers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let state = |n: &str| {
            servers
                .iter()
                .find(|s| s["name"] == n)
                .map(|s| s["state"].as_str().unwrap_or("").to_string())
        };
        if state("everything").as_deref() == Some("ready")
            && state("broken").as_deref() == Some("failed")
        {
            break servers;
        }
        assert!(std::time::Instant::now() < deadline, "{res}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let broken = servers.iter().find(|s| s["name"] == "broken").unwrap();
    assert!(
        broken["lastError"]
            .as_str()
            .unwrap()
            .contains("cannot start"),
        "{broken}"
    );
    let res = ws.call("status", json!({})).await;
    assert_eq!(
        res["payload"]["mcp"].as_array().map(Vec::len),
        Some(2),
        "{res}"
    );

    gw.llm.push(Reply::tool_call(
        "c1",
        "mcp_everything_echo",
        json!({"message": "through the gateway"}),
    ));
    gw.llm.push(Reply::text("Echoed."));
    let resp = gw
        .post(
            "/v1/chat/completions",
            &json!({"messages": [{"role": "user", "content": "echo something"}]}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let requests = gw.llm.requests();
    assert!(requests[0].body["tools"]
        .to_string()
        .contains("mcp_everything_echo"));
    assert!(requests[1].body["messages"]
        .to_string()
        .contains("through the gateway"));

    // Its child process ends with the gateway.
    let pid = gw.child.id().expect("pid");
    let children = children_of(pid);
    assert!(
        !children.is_empty(),
        "the server runs as the gateway's child"
    );
    gw.signal(libc::SIGTERM);
    let status = tokio::time::timeout(WAIT, gw.child.wait())
        .await
        .expect("gateway exits")
        .unwrap();
    assert!(status.success(), "stderr: {}", gw.stderr());
    // A killed process takes a moment to go; it is not ours to wait on any more.
    let deadline = std::time::Instant::now() + WAIT;
    for child in children {
        loop {
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            // Gone, or a zombie about to be reaped by init.
            if stat.is_empty() || stat.contains(") Z ") {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{child} still runs: {stat}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// `mcp-server-everything streamableHttp` on a port of its own, once it says it listens;
/// its process group is killed on drop.
struct EverythingOverHttp {
    child: tokio::process::Child,
    url: String,
}

impl EverythingOverHttp {
    async fn start() -> EverythingOverHttp {
        let bin = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../.ci/mcp/node_modules/.bin/mcp-server-everything");
        assert!(
            bin.exists(),
            "run `npm ci --prefix .ci/mcp` (what .ci/run does)"
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = tokio::process::Command::new(bin)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        tokio::time::timeout(WAIT, async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if line.contains(&port.to_string()) {
                    return;
                }
            }
            panic!("the MCP server ended before listening");
        })
        .await
        .expect("the MCP server did not start");
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        EverythingOverHttp {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for EverythingOverHttp {
    fn drop(&mut self) {
        if let Some(pid) = self.child.id() {
            // SAFETY: the group this test started.
            unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
        }
    }
}

/// Polls `GET /v1/mcp/servers` of `gw` until `want` holds of the list (another
/// instance's change arrives by a signal, a server's start takes its time).
async fn mcp_servers_until(gw: &Gateway, want: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let (st, list) =
            call_as(gw, &gw.token, reqwest::Method::GET, "/v1/mcp/servers", None).await;
        assert_eq!(st, 200, "{list}");
        if want(&list["data"]) {
            return list;
        }
        assert!(std::time::Instant::now() < deadline, "never: {list}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn offered_tools(req: &ferroclaw_testkit::RecordedRequest) -> Vec<String> {
    req.body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn stored_mcp_servers_reach_every_instance_and_their_grants_decide_who_uses_them() {
    use reqwest::Method;
    let url = ferroclaw_testkit::pg::fresh_database().await;
    let a = tenant_gateway(&url).await;
    let b = tenant_gateway(&url).await;
    let everything = EverythingOverHttp::start().await;
    const ALICE: &str = "alice-secret-token";
    const BOB: &str = "bob-secret-token";
    let server = json!({
        "name": "every",
        "transport": "streamable-http",
        "url": everything.url,
        "headers": {"X-Team": "blue-team-secret"},
        "timeout_seconds": 10,
        "grants": [
            {"agent": "main", "allow": ["echo"]},
            {"user": "bob", "deny": ["*"]},
        ],
    });

    // Refused, each with its reason: not the administrator, a program on the host, an
    // unknown setting, a grant naming two subjects, a name the config could not hold.
    let refusals: Vec<(&str, Value, u16, &str)> = vec![
        (ALICE, server.clone(), 403, "only the administrator"),
        (
            &a.token,
            json!({"name": "local", "transport": "stdio", "command": "sh"}),
            400,
            "belongs in the config file",
        ),
        (
            &a.token,
            json!({"name": "x", "transport": "sse", "url": "http://127.0.0.1:9/sse", "colour": "red"}),
            400,
            "unknown field `colour`",
        ),
        (
            &a.token,
            json!({"name": "x", "transport": "sse", "url": "http://127.0.0.1:9/sse", "grants": [{"agent": "main", "user": "bob", "allow": ["*"]}]}),
            400,
            "exactly one of `agent` or `user`",
        ),
        (
            &a.token,
            json!({"name": "bad name", "transport": "sse", "url": "http://127.0.0.1:9/sse"}),
            400,
            "name: 1-64 characters",
        ),
    ];
    for (token, body, status, why) in refusals {
        let (st, answer) = call_as(&a, token, Method::POST, "/v1/mcp/servers", Some(body)).await;
        assert_eq!(st, status, "{answer}");
        assert!(answer.to_string().contains(why), "{why}: {answer}");
    }
    let (st, created) = call_as(
        &a,
        &a.token,
        Method::POST,
        "/v1/mcp/servers",
        Some(server.clone()),
    )
    .await;
    assert_eq!(st, 201, "{created}");
    assert_eq!(created["headers"]["X-Team"], "********", "{created}");
    assert!(!created.to_string().contains("blue-team-secret"));
    let (st, again) = call_as(
        &a,
        &a.token,
        Method::POST,
        "/v1/mcp/servers",
        Some(server.clone()),
    )
    .await;
    assert_eq!(st, 409, "{again}");
    let (st, _) = call_as(&a, &a.token, Method::GET, "/v1/mcp/servers/nothing", None).await;
    assert_eq!(st, 404);
    // The header value is sealed at rest.
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let spec: String = client
        .query_one("SELECT spec FROM mcp_servers WHERE name = 'every'", &[])
        .await
        .unwrap()
        .get(0);
    assert!(
        spec.contains("aes-gcm:") && !spec.contains("blue-team-secret"),
        "{spec}"
    );

    // The other instance hears of it and connects too.
    let ready = |list: &Value| {
        list.as_array().is_some_and(|l| {
            l.iter()
                .any(|s| s["name"] == "every" && s["status"]["state"] == "ready")
        })
    };
    mcp_servers_until(&a, ready).await;
    let listed = mcp_servers_until(&b, ready).await;
    let tools = listed["data"][0]["status"]["tools"].to_string();
    assert!(
        tools.contains("mcp_every_echo") && tools.contains("mcp_every_get-sum"),
        "{tools}"
    );

    // Alice on `main`: the agent's grant offers `echo` only, and her call is answered.
    b.llm.push(Reply::tool_call(
        "c1",
        "mcp_every_echo",
        json!({"message": "hello from alice"}),
    ));
    b.llm.push(Reply::text("echoed"));
    let chat = || json!({"model": "ferroclaw:main", "messages": [{"role": "user", "content": "echo please"}]});
    let (st, body) = call_as(
        &b,
        ALICE,
        Method::POST,
        "/v1/chat/completions",
        Some(chat()),
    )
    .await;
    assert_eq!(st, 200, "{body}");
    let reqs = b.llm.requests();
    let offered = offered_tools(&reqs[reqs.len() - 2]);
    assert!(offered.iter().any(|t| t == "mcp_every_echo"), "{offered:?}");
    assert!(
        !offered.iter().any(|t| t == "mcp_every_get-sum"),
        "{offered:?}"
    );
    let result = reqs.last().unwrap().body["messages"].to_string();
    assert!(result.contains("hello from alice"), "{result}");

    // Bob's own grant denies everything, and deny wins over the agent's allow: nothing is
    // offered, and a call naming the tool anyway is refused with the reason.
    b.llm.push(Reply::tool_call(
        "c2",
        "mcp_every_echo",
        json!({"message": "bob was here"}),
    ));
    b.llm.push(Reply::text("refused"));
    let (st, body) = call_as(&b, BOB, Method::POST, "/v1/chat/completions", Some(chat())).await;
    assert_eq!(st, 200, "{body}");
    let reqs = b.llm.requests();
    let offered = offered_tools(&reqs[reqs.len() - 2]);
    assert!(
        !offered.iter().any(|t| t.starts_with("mcp_every_")),
        "{offered:?}"
    );
    let result = reqs.last().unwrap().body["messages"].to_string();
    assert!(result.contains("denied to user `bob`"), "{result}");
    assert!(!result.contains("bob was here\""), "{result}");

    // A change of grants applies at once on both instances (no restart): now `get-sum`.
    // The client sends back the masked header it was shown: the stored value stays.
    let mut changed = server.clone();
    changed["grants"] = json!([{"agent": "main", "allow": ["get-sum"]}]);
    changed["headers"]["X-Team"] = json!("********");
    let (st, body) = call_as(
        &a,
        &a.token,
        Method::PUT,
        "/v1/mcp/servers/every",
        Some(changed),
    )
    .await;
    assert_eq!(st, 200, "{body}");
    let kept: String = client
        .query_one("SELECT spec FROM mcp_servers WHERE name = 'every'", &[])
        .await
        .unwrap()
        .get(0);
    let sealed = |spec: &str| -> String {
        serde_json::from_str::<Value>(spec).unwrap()["config"]["headers"]["X-Team"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        sealed(&kept),
        sealed(&spec),
        "the sealed value is kept as it was"
    );
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        b.llm.push(Reply::text("ok"));
        let (st, body) = call_as(
            &b,
            ALICE,
            Method::POST,
            "/v1/chat/completions",
            Some(chat()),
        )
        .await;
        assert_eq!(st, 200, "{body}");
        let offered = offered_tools(b.llm.requests().last().unwrap());
        if offered.iter().any(|t| t == "mcp_every_get-sum") {
            assert!(
                !offered.iter().any(|t| t == "mcp_every_echo"),
                "{offered:?}"
            );
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{offered:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Deleted: gone on both instances, its tools with it.
    let (st, body) = call_as(&a, &a.token, Method::DELETE, "/v1/mcp/servers/every", None).await;
    assert_eq!(st, 200, "{body}");
    let empty = |list: &Value| list.as_array().is_some_and(|l| l.is_empty());
    mcp_servers_until(&a, empty).await;
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        b.llm.push(Reply::text("ok"));
        let (st, body) = call_as(
            &b,
            ALICE,
            Method::POST,
            "/v1/chat/completions",
            Some(chat()),
        )
        .await;
        assert_eq!(st, 200, "{body}");
        let offered = offered_tools(b.llm.requests().last().unwrap());
        if !offered.iter().any(|t| t.starts_with("mcp_every_")) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{offered:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (st, _) = call_as(&a, &a.token, Method::DELETE, "/v1/mcp/servers/every", None).await;
    assert_eq!(st, 404);
}

/// Lists traces with `token` until `pred` holds (the collector writes behind the runs).
async fn traces_until(
    gw: &Gateway,
    token: &str,
    query: &str,
    pred: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let resp = gw
            .anon
            .get(gw.url(&format!("/v1/traces{query}")))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let body: Value = resp.json().await.unwrap();
        let data = body["data"].as_array().cloned().unwrap_or_default();
        if pred(&data) {
            return data;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "traces never matched: {body}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn traces_and_usage_are_served_and_each_user_sees_their_own() {
    let token = "trace-admin-token";
    let gw = Gateway::start(
        r#"users: [{ id: "alice", token_env: "ALICE_T" }, { id: "bob", token_env: "BOB_T" }]"#,
        &[
            ("FERROCLAW_GATEWAY_TOKEN", token),
            ("ALICE_T", "alice-token"),
            ("BOB_T", "bob-token"),
        ],
    )
    .await;
    let chat = |t: &'static str| {
        gw.anon
            .post(gw.url("/v1/chat/completions"))
            .bearer_auth(t)
            .json(&json!({"messages": [{"role": "user", "content": format!("hello from {t}")}]}))
            .send()
    };
    gw.llm.push(Reply::text("for alice").with_usage(12, 3));
    assert_eq!(chat("alice-token").await.unwrap().status(), 200);
    gw.llm.push(Reply::text("for bob").with_usage(7, 1));
    assert_eq!(chat("bob-token").await.unwrap().status(), 200);
    let finished = |d: &[Value]| d.len() == 2 && d.iter().all(|t| t["status"] == "ok");
    let all = traces_until(&gw, token, "", finished).await;
    let of = |user: &str| {
        all.iter()
            .find(|t| t["userId"] == user)
            .unwrap_or_else(|| panic!("{user}'s trace in {all:?}"))
            .clone()
    };
    let (alice, bob) = (of("alice"), of("bob"));
    assert_eq!(alice["input"], "hello from alice-token");
    assert_eq!(alice["output"], "for alice");
    assert_eq!(
        (
            alice["inputTokens"].as_u64(),
            alice["outputTokens"].as_u64()
        ),
        (Some(12), Some(3))
    );
    assert_eq!(alice["origin"], "http");

    // One trace with its spans.
    let id = alice["id"].as_str().unwrap();
    let one: Value = gw
        .http
        .get(gw.url(&format!("/v1/traces/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let kinds: Vec<&str> = one["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["agent", "llm"], "{one}");
    assert_eq!(one["spans"][1]["attrs"]["finishReason"], "stop");

    // Filters and paging.
    let only = traces_until(&gw, token, "?user=bob", |d| d.len() == 1).await;
    assert_eq!(only[0]["id"], bob["id"]);
    let page: Value = gw
        .http
        .get(gw.url("/v1/traces?limit=1"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let cursor = page["nextCursor"]
        .as_str()
        .expect("a second page")
        .to_string();
    let next: Value = gw
        .http
        .get(gw.url("/v1/traces"))
        .query(&[("limit", "1"), ("cursor", cursor.as_str())])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_ne!(next["data"][0]["id"], page["data"][0]["id"]);
    assert!(next["nextCursor"].is_null(), "{next}");

    // A user reads their own traces only.
    let mine = traces_until(&gw, "alice-token", "", |d| !d.is_empty()).await;
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0]["id"], alice["id"]);
    let get_as = |t: &'static str, path: String| gw.anon.get(gw.url(&path)).bearer_auth(t).send();
    let resp = get_as(
        "alice-token",
        format!("/v1/traces/{}", bob["id"].as_str().unwrap()),
    )
    .await
    .unwrap();
    assert_eq!(
        resp.status(),
        404,
        "another user's trace is reported as missing"
    );
    let resp = get_as("alice-token", "/v1/traces?user=bob".into())
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let resp = gw.anon.get(gw.url("/v1/traces")).send().await.unwrap();
    assert_eq!(resp.status(), 401);

    // Bad input is named.
    for (query, needle) in [
        ("?limit=0", "limit"),
        ("?since=yesterday", "since"),
        ("?colour=red", "colour"),
        ("?cursor=garbage", "cursor"),
    ] {
        let resp = gw
            .http
            .get(gw.url(&format!("/v1/traces{query}")))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "{query}");
        let body: Value = resp.json().await.unwrap();
        assert!(
            body["error"]["message"].as_str().unwrap().contains(needle),
            "{query}: {body}"
        );
    }
    let resp = gw
        .http
        .get(gw.url("/v1/traces/no-such-trace"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);

    // Usage over the WebSocket: everyone's for the operator, their own for a user.
    let mut ws = gw.ws().await;
    assert_eq!(
        ws.call("connect", json!({"token": token})).await["ok"],
        true
    );
    let sum = ws.call("usage.summary", json!({})).await;
    assert_eq!(sum["payload"]["total"]["inputTokens"], 19, "{sum}");
    let users: Vec<&str> = sum["payload"]["byUser"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert_eq!(users.len(), 2, "{sum}");
    let by_model = ws.call("usage.get", json!({"groupBy": "model"})).await;
    assert_eq!(
        by_model["payload"]["rows"][0]["key"], "scripted/model-a",
        "{by_model}"
    );
    let bad = ws.call("usage.get", json!({"groupBy": "colour"})).await;
    assert_eq!(bad["ok"], false);
    let mut alice_ws = gw.ws().await;
    assert_eq!(
        alice_ws
            .call("connect", json!({"token": "alice-token"}))
            .await["ok"],
        true
    );
    let hers = alice_ws.call("usage.summary", json!({})).await;
    assert_eq!(hers["payload"]["total"]["inputTokens"], 12, "{hers}");

    // A conversation a person deletes takes its traces with it.
    gw.llm.push(Reply::text("kept for now"));
    let resp = gw
        .anon
        .post(gw.url("/v1/chat/completions"))
        .bearer_auth("alice-token")
        .header("X-Ferroclaw-Session-Key", "diary")
        .json(&json!({"messages": [{"role": "user", "content": "dear diary"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    traces_until(&gw, "alice-token", "", |d| {
        d.iter()
            .any(|t| t["input"] == "dear diary" && t["status"] == "ok")
    })
    .await;
    let deleted = alice_ws
        .call("sessions.delete", json!({"sessionKey": "diary"}))
        .await;
    assert_eq!(deleted["payload"]["deleted"], true, "{deleted}");
    let left = traces_until(&gw, "alice-token", "", |_| true).await;
    assert!(left.iter().all(|t| t["input"] != "dear diary"), "{left:?}");
}

/// `tracing.otlp`: a request's spans reach a collector as one trace — the HTTP request,
/// the run under it, each model call and tool call under the run — with the service
/// name and the headers configured, over HTTP and over gRPC.
#[tokio::test]
async fn spans_are_exported_over_otlp_as_one_trace_per_request() {
    use ferroclaw_testkit::otlp::{OtlpReceiver, ReceivedSpan};
    for protocol in ["http", "grpc"] {
        let receiver = match protocol {
            "grpc" => OtlpReceiver::grpc().await,
            _ => OtlpReceiver::http().await,
        }
        .expect("receiver");
        let top = format!(
            r#"tracing: {{ otlp: {{ endpoint: "{}", protocol: "{protocol}", service_name: "ferroclaw-under-test",
                headers: {{ "x-team": "blue" }}, headers_env: "OTLP_TEST_HEADERS" }} }},"#,
            receiver.endpoint()
        );
        let gw = Gateway::start_with(
            "",
            &top,
            "",
            &[
                ("OTLP_TEST_HEADERS", "authorization=Bearer otlp-secret"),
                // Batches leave every 50 ms instead of every 5 s.
                ("OTEL_BSP_SCHEDULE_DELAY", "50"),
            ],
        )
        .await;
        gw.llm.push(Reply::tool_call(
            "c1",
            "exec",
            json!({"command": "echo traced"}),
        ));
        gw.llm.push(Reply::text("done").with_usage(11, 4));
        let resp = gw
            .post(
                "/v1/chat/completions",
                &json!({"messages": [{"role": "user", "content": "trace me"}]}),
            )
            .await;
        assert_eq!(resp.status(), 200, "{protocol}");
        let wanted = ["POST /v1/chat/completions", "agent main", "tool exec"];
        let complete = |spans: &[ReceivedSpan]| {
            wanted.iter().all(|w| spans.iter().any(|s| s.name == *w))
                && spans.iter().filter(|s| s.name == "chat model-a").count() == 2
        };
        assert!(
            receiver.wait_for(WAIT, complete).await,
            "{protocol}: {:#?}\n{}",
            receiver.spans(),
            gw.stderr()
        );
        let spans = receiver.spans();
        let one = |name: &str| spans.iter().find(|s| s.name == name).unwrap().clone();
        let (request, run, tool) = (
            one("POST /v1/chat/completions"),
            one("agent main"),
            one("tool exec"),
        );
        assert_eq!(
            request.parent_span_id, "",
            "{protocol}: the request is the root"
        );
        assert_eq!(request.attributes["http.response.status_code"], "200");
        assert_eq!(
            run.parent_span_id, request.span_id,
            "{protocol}: the run is the request's"
        );
        assert_eq!(run.attributes["run.status"], "ok");
        assert_eq!(tool.parent_span_id, run.span_id, "{protocol}");
        let calls: Vec<&ReceivedSpan> = spans.iter().filter(|s| s.name == "chat model-a").collect();
        for s in &calls {
            assert_eq!(s.parent_span_id, run.span_id, "{protocol}");
            assert_eq!(s.attributes["gen_ai.request.model"], "model-a");
        }
        assert!(
            calls.iter().any(|s| s
                .attributes
                .get("gen_ai.usage.input_tokens")
                .map(String::as_str)
                == Some("11")),
            "{calls:?}"
        );
        for s in [&request, &run, &tool] {
            assert_eq!(s.trace_id, request.trace_id, "{protocol}: one trace");
            assert_eq!(s.service_name, "ferroclaw-under-test");
            assert_eq!(s.headers.get("x-team").map(String::as_str), Some("blue"));
            assert_eq!(
                s.headers.get("authorization").map(String::as_str),
                Some("Bearer otlp-secret")
            );
        }
    }
}

/// `providers.status` asks each provider in use for its models (a dead address says
/// why), and `config.get` shows the configuration with its secrets masked, to the
/// operator only.
#[tokio::test]
async fn providers_are_probed_and_the_configuration_is_shown_masked() {
    let secret = "sk-scripted-secret-0123456789";
    let gw = Gateway::start(
        "",
        &[
            ("FERROCLAW_GATEWAY_TOKEN", "probe-admin"),
            ("FERROCLAW_GATEWAY_VIEWER_TOKEN", "probe-viewer"),
            ("FERROCLAW_SCRIPTED_API_KEY", secret),
        ],
    )
    .await;
    gw.llm.set_models(vec!["model-a".into(), "model-b".into()]);
    let mut ws = gw.ws().await;
    assert_eq!(
        ws.call("connect", json!({"token": "probe-admin"})).await["ok"],
        true
    );
    let st = ws.call("providers.status", json!({})).await;
    let p = &st["payload"]["providers"][0];
    assert_eq!(p["name"], "scripted", "{st}");
    assert_eq!(p["reachable"], true, "{st}");
    assert_eq!(p["models"], json!(["model-a", "model-b"]), "{st}");
    assert!(p["error"].is_null(), "{st}");
    let cfg = ws.call("config.get", json!({})).await;
    let text = cfg["payload"]["config"].to_string();
    assert!(cfg["ok"] == true && text.contains("scripted"), "{cfg}");
    assert!(!text.contains(secret), "the key is masked: {text}");
    let mut viewer = gw.ws().await;
    assert_eq!(
        viewer
            .call("connect", json!({"token": "probe-viewer"}))
            .await["ok"],
        true
    );
    let refused = viewer.call("config.get", json!({})).await;
    assert_eq!(refused["ok"], false, "{refused}");
    assert_eq!(viewer.call("providers.status", json!({})).await["ok"], true);

    // A provider whose address answers nothing is reported so.
    let dead = Gateway::start(
        "",
        &[
            ("FERROCLAW_GATEWAY_TOKEN", "probe-admin"),
            ("FERROCLAW_SCRIPTED_BASE_URL", "http://127.0.0.1:9/v1"),
        ],
    )
    .await;
    let mut ws = dead.ws().await;
    assert_eq!(
        ws.call("connect", json!({"token": "probe-admin"})).await["ok"],
        true
    );
    let st = ws.call("providers.status", json!({})).await;
    let p = &st["payload"]["providers"][0];
    assert_eq!(p["reachable"], false, "{st}");
    assert!(
        p["error"]
            .as_str()
            .unwrap_or_default()
            .contains("nothing listens"),
        "{st}"
    );
}
