//! The real `ferroclaw executor` binary against the test kit's scripted LLM (standing
//! in for gpt-oss on vLLM) and a real `ferroclaw gateway` serving `/tools/invoke`,
//! all on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed fixture should stop the test

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferroclaw_testkit::{ReasoningField, Reply, ScriptedLlm};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::task::JoinHandle;

/// Upper bound on any single wait, so a broken process fails the test instead of
/// hanging it. Never used to let something "settle".
const WAIT: Duration = Duration::from_secs(60);
const TOKEN: &str = "executor-e2e-token";

const CLEARED_VARS: [&str; 8] = [
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "FERROCLAW_CONFIG",
    "FERROCLAW_MODEL",
    "FERROCLAW_GATEWAY_TOKEN",
    "OPENCLAW_GATEWAY_TOKEN",
    "GPTOSS_EXECUTOR_CONFIG",
    "FERROCLAW_LOG",
];

/// A spawned `ferroclaw` process; stdout and stderr are drained into buffers.
struct Proc {
    child: tokio::process::Child,
    base: String,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    stdout_task: JoinHandle<()>,
}

impl Proc {
    async fn spawn(args: &[&str], home: &Path, env: &[(&str, &str)]) -> Proc {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ferroclaw"));
        cmd.args(args)
            .env("FERROCLAW_HOME", home)
            .env("HOME", home)
            .env("FERROCLAW_LOG_LEVEL", "warn")
            .current_dir(home)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for v in CLEARED_VARS {
            cmd.env_remove(v);
        }
        for (k, _) in std::env::vars() {
            if k.starts_with("GPTOSS_EXECUTOR_") {
                cmd.env_remove(k);
            }
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn ferroclaw");
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
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let stdout = Arc::new(Mutex::new(String::new()));
        let addr = tokio::time::timeout(WAIT, async {
            while let Some(line) = lines.next_line().await.expect("read stdout") {
                stdout.lock().unwrap().push_str(&format!("{line}\n"));
                if let Some(rest) = line.strip_prefix("listening on http://") {
                    return rest.trim().to_string();
                }
            }
            panic!(
                "ferroclaw {args:?} exited before listening: {}",
                stderr.lock().unwrap()
            );
        })
        .await
        .expect("start-up timed out");
        // Keep draining stdout (the executor's JSON events) so the child never blocks
        // on a full pipe; the task ends at EOF, i.e. when the process is gone.
        let sink = stdout.clone();
        let stdout_task = tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                sink.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        Proc {
            child,
            base: format!("http://{addr}"),
            stdout,
            stderr,
            stdout_task,
        }
    }

    /// Kills the process and waits until its whole stdout has been read.
    async fn stop(mut self) -> String {
        self.child.kill().await.expect("kill");
        tokio::time::timeout(WAIT, self.stdout_task)
            .await
            .expect("stdout reader did not finish")
            .expect("stdout reader panicked");
        let out = self.stdout.lock().unwrap().clone();
        out
    }
}

async fn start_gateway(llm: &ScriptedLlm, home: &Path) -> Proc {
    let cfg = format!(
        r#"{{
  agents: {{ defaults: {{ provider: "scripted", model: "model-a" }}, list: [{{ id: "main" }}] }},
  providers: {{ scripted: {{ type: "openai_compat", base_url: "{}" }} }},
}}"#,
        llm.openai_base_url()
    );
    std::fs::write(home.join("config.json5"), cfg).expect("write gateway config");
    std::fs::create_dir_all(home.join("workspace")).expect("workspace");
    Proc::spawn(
        &["gateway", "--port", "0"],
        home,
        &[("FERROCLAW_GATEWAY_TOKEN", TOKEN)],
    )
    .await
}

/// Writes `executor.yaml` into `dir` and starts the executor on a free port.
async fn start_executor(dir: &Path, upstream: &str, gateway: &str) -> Proc {
    let yaml = format!(
        r#"# executor.yaml for the end-to-end test
executor:
  gpt_oss_url: "{upstream}"
  gpt_oss_max_tokens: 256
  max_iterations: 2
  max_retries: 2
  # Small back-off so the retry tests run fast; the default is 1 s, 2 s, 4 s.
  retry_backoff_ms: [10, 20, 40]
  run_timeout_seconds: 60
  context_window_limit: 4096
  context_buffer_tokens: 512
  openclaw_gateway_url: "{gateway}"
  openclaw_gateway_token: "{TOKEN}"
parser:
  strategy: react
  fallback_strategy: fuzzy
http_server:
  port: 8001
logging:
  level: debug
  error_log_dir: logs
tools:
  allowed: [read, write, ls]
  default_timeout_seconds: 10
  result_limits:
    read: 2000
"#
    );
    let path = dir.join("executor.yaml");
    std::fs::write(&path, yaml).expect("write executor.yaml");
    let path = path.to_str().expect("utf-8 path").to_string();
    Proc::spawn(&["executor", "--config", &path, "--port", "0"], dir, &[]).await
}

struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    async fn chat(&self, body: &Value) -> (u16, Value) {
        let resp = self
            .http
            .post(format!("{}/v1/chat/completions", self.base))
            .json(body)
            .send()
            .await
            .expect("POST /v1/chat/completions");
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("body");
        let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
        (status, v)
    }

    async fn ask(&self, text: &str) -> (u16, Value) {
        self.chat(&json!({
            "model": "gpt-oss",
            "messages": [
                {"role": "system", "content": "You are a careful assistant."},
                {"role": "user", "content": text},
            ],
        }))
        .await
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let resp = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("GET");
        let status = resp.status().as_u16();
        (status, resp.json().await.expect("JSON body"))
    }
}

fn assert_error(status: u16, body: &Value, want_status: u16, code: &str) {
    assert_eq!(status, want_status, "{code}: {body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    assert!(body["error"]["type"].is_string(), "{body}");
}

fn react(action: &str, input: Value) -> Reply {
    Reply::text("").with_reasoning(
        format!(
            "Thought: I need the {action} tool for this.\nAction: {action}\nAction Input: {input}"
        ),
        ReasoningField::Reasoning,
    )
}

/// Text of all messages of a recorded upstream request.
fn request_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .map(|ms| {
            ms.iter()
                .map(|m| m["content"].as_str().unwrap_or_default().to_string())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

fn error_log(dir: &Path) -> (PathBuf, String) {
    let logs = dir.join("logs");
    let entry = std::fs::read_dir(&logs)
        .unwrap_or_else(|e| panic!("no error log dir {}: {e}", logs.display()))
        .map(|e| e.expect("dir entry").path())
        .find(|p| p.to_string_lossy().ends_with("-errors.md"))
        .expect("an errors.md file");
    let text = std::fs::read_to_string(&entry).expect("read error log");
    (entry, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executor_runs_tools_through_a_real_gateway() {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let gw_home = tempfile::tempdir().expect("tempdir");
    let ex_dir = tempfile::tempdir().expect("tempdir");
    let gateway = start_gateway(&llm, gw_home.path()).await;
    let executor = start_executor(ex_dir.path(), &llm.base_url(), &gateway.base).await;
    let c = Client {
        http: reqwest::Client::new(),
        base: executor.base.clone(),
    };

    // Health with the upstream up, and the model list.
    let (status, health) = c.get("/health").await;
    assert_eq!(status, 200, "{health}");
    assert_eq!(health["gpt_oss"], "connected");
    let (status, models) = c.get("/v1/models").await;
    assert_eq!(status, 200);
    assert!(models["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["id"] == "gpt-oss"));

    // Two iterations: an intent in the reasoning only → `write` runs in the gateway's
    // workspace → the model answers.
    llm.push(
        react(
            "write",
            json!({"path": "note.txt", "content": "hello from the executor"}),
        )
        .with_usage(100, 20),
    );
    llm.push(
        Reply::text("I saved the note to note.txt.")
            .with_reasoning("All good, I can answer now.", ReasoningField::Reasoning)
            .with_usage(180, 10),
    );
    let before = llm.requests().len();
    let (status, body) = c.ask("Save a note saying hello.").await;
    assert_eq!(status, 200, "{body}\n{}", executor.stderr.lock().unwrap());
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["model"], "gpt-oss");
    let choice = &body["choices"][0];
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(
        choice["message"]["content"],
        "I saved the note to note.txt."
    );
    assert_eq!(
        choice["message"]["reasoning"],
        "All good, I can answer now."
    );
    assert_eq!(choice["finish_reason"], "stop");
    let meta = &body["executor_metadata"];
    assert!(
        meta["run_id"].as_str().unwrap().starts_with("run-"),
        "{meta}"
    );
    assert_eq!(meta["iterations"], 2);
    assert_eq!(meta["tools_called"], json!(["write"]));
    assert!(meta["total_tool_execution_time_ms"].is_u64(), "{meta}");
    // Last call: 180 + 10 tokens of a 4096 - 512 budget.
    assert_eq!(meta["context_usage_percent"], 5.3, "{meta}");
    assert_eq!(body["usage"]["prompt_tokens"], 180);
    assert_eq!(body["usage"]["completion_tokens"], 10);
    assert_eq!(body["usage"]["total_tokens"], 310);
    assert_eq!(
        std::fs::read_to_string(gw_home.path().join("workspace/note.txt")).unwrap(),
        "hello from the executor"
    );
    let reqs = llm.requests();
    assert_eq!(reqs.len(), before + 2);
    let first = &reqs[before].body;
    assert_eq!(first["model"], "gpt-oss");
    assert_ne!(
        first["stream"], true,
        "batch mode: the reasoning must be complete"
    );
    let system = first["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.starts_with("You are a careful assistant."),
        "{system}"
    );
    assert!(system.contains("Action Input"), "ReAct prompt: {system}");
    assert!(
        system.contains("`write`"),
        "tool list from the gateway: {system}"
    );
    let second = &reqs[before + 1].body;
    let text = request_text(second);
    assert!(text.contains("[TOOL_RESULT: write]"), "{text}");
    // The reasoning is echoed back on the tool turn.
    assert!(
        second["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "assistant"
                && m["reasoning"]
                    .as_str()
                    .is_some_and(|r| r.contains("Action: write"))),
        "{second}"
    );

    // A tool error is not fatal: it goes back to the model, which adapts.
    llm.push(react("read", json!({"path": "missing.txt"})));
    llm.push(Reply::text("There is no such file."));
    let before = llm.requests().len();
    let (status, body) = c.ask("What is in missing.txt?").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "There is no such file."
    );
    assert_eq!(body["executor_metadata"]["tools_called"], json!(["read"]));
    let text = request_text(&llm.requests()[before + 1].body);
    assert!(text.contains("[ERROR: read]"), "{text}");

    // A 503 upstream is retried, then the run succeeds.
    llm.push(Reply::status(503, "overloaded"));
    llm.push(Reply::text("pong"));
    let before = llm.requests().len();
    let (status, body) = c.ask("ping").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "pong");
    assert_eq!(body["executor_metadata"]["iterations"], 1);
    assert_eq!(llm.requests().len(), before + 2);

    // A client asking for a stream gets the finished answer as SSE.
    llm.push(Reply::text("streamed answer"));
    let resp = c
        .http
        .post(format!("{}/v1/chat/completions", c.base))
        .json(&json!({"model": "executor", "stream": true, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let sse = resp.text().await.unwrap();
    assert!(
        sse.contains("streamed answer") && sse.contains("executor_metadata"),
        "{sse}"
    );
    assert!(sse.trim_end().ends_with("data: [DONE]"), "{sse}");

    // Registered as an OpenAI-compatible provider of ferroclaw, the executor answers
    // an agent's (streamed) turn.
    let agent_home = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        agent_home.path().join("config.json5"),
        format!(
            r#"{{
  agents: {{ defaults: {{ provider: "executor", model: "gpt-oss" }} }},
  providers: {{ executor: {{ type: "openai_compat", base_url: "{}/v1" }} }},
}}"#,
            c.base
        ),
    )
    .unwrap();
    llm.push(Reply::text("hello via the executor"));
    let out = tokio::time::timeout(
        WAIT,
        tokio::process::Command::new(env!("CARGO_BIN_EXE_ferroclaw"))
            .args(["agent", "chat", "-m", "hi"])
            .env("FERROCLAW_HOME", agent_home.path())
            .env("HOME", agent_home.path())
            .env_remove("FERROCLAW_CONFIG")
            .env_remove("FERROCLAW_MODEL")
            .env_remove("OPENAI_API_KEY")
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("agent chat timed out")
    .expect("run agent chat");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("hello via the executor"),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // invalid_request: malformed body, missing messages.
    let resp = c
        .http
        .post(format!("{}/v1/chat/completions", c.base))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    assert_error(status, &resp.json().await.unwrap(), 400, "invalid_request");
    let (status, body) = c.chat(&json!({"model": "gpt-oss"})).await;
    assert_error(status, &body, 400, "invalid_request");

    // model_not_found.
    let (status, body) = c
        .chat(&json!({"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]}))
        .await;
    assert_error(status, &body, 404, "model_not_found");

    // context_window_exceeded: the prompt alone is over the 3584-token budget; the
    // upstream is never called.
    let before = llm.requests().len();
    let (status, body) = c.ask(&"lorem ipsum ".repeat(2000)).await;
    assert_error(status, &body, 400, "context_window_exceeded");
    assert_eq!(llm.requests().len(), before);

    // max_iterations_exceeded: the model asks for a tool on each of its 2 iterations.
    llm.push(react("ls", json!({"path": "."})));
    llm.push(react("ls", json!({"path": "."})));
    let (status, body) = c.ask("List files forever.").await;
    assert_error(status, &body, 400, "max_iterations_exceeded");

    // timeout_exceeded: the model takes longer than the request's 1 s time-out.
    llm.push(Reply::text("too late").delay(Duration::from_secs(5)));
    let (status, body) = c
        .chat(&json!({"model": "gpt-oss", "timeout": 1, "messages": [{"role": "user", "content": "slow"}]}))
        .await;
    assert_error(status, &body, 408, "timeout_exceeded");

    // tool_execution_failed: the gateway is gone; the call is retried, then the run aborts.
    let gateway_out = gateway.stop().await;
    assert!(gateway_out.contains("listening on"), "{gateway_out}");
    llm.push(react(
        "write",
        json!({"path": "again.txt", "content": "nobody home"}),
    ));
    let (status, body) = c.ask("Save another note.").await;
    assert_error(status, &body, 500, "tool_execution_failed");

    // gpt_oss_unreachable: the upstream is down, retries are spent; /health says so.
    llm.shutdown();
    let (status, body) = c.ask("anyone there?").await;
    assert_error(status, &body, 503, "gpt_oss_unreachable");
    let (status, health) = c.get("/health").await;
    assert_eq!(status, 503, "{health}");
    assert_eq!(health["gpt_oss"], "unreachable");

    // Every error also landed in logs/YYYY-MM-DD-errors.md.
    let (path, log) = error_log(ex_dir.path());
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    assert_eq!(name.len(), "YYYY-MM-DD-errors.md".len(), "{name}");
    assert!(log.starts_with(&format!("## {}\n", &name[..10])), "{log}");
    for needle in [
        "] gpt_oss | Error: ",
        "HTTP 503",
        "Status: retrying",
        "recovered on retry 1",
        "] read | Error: ",
        "injected the error into the context | Status: continued",
        "invalid_request",
        "model_not_found",
        "context_window_exceeded",
        "max_iterations_exceeded",
        "timeout_exceeded",
        "] write | Error: gateway unreachable",
        "tool_execution_failed",
        "gpt_oss_unreachable",
    ] {
        assert!(log.contains(needle), "error log lacks {needle:?}:\n{log}");
    }

    // Structured JSON events on stdout, named as documented.
    let out = executor.stop().await;
    let events: Vec<Value> = out
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad event {l}: {e}")))
        .collect();
    for name in [
        "http_server_start",
        "executor_run_start",
        "gpt_oss_call_start",
        "gpt_oss_call_complete",
        "gpt_oss_call_failed",
        "retrying_gpt_oss_call",
        "tool_intents_parsed",
        "tool_execution_start",
        "tool_execution_success",
        "tool_execution_failed",
        "tool_execution_complete",
        "no_tools_requested",
        "executor_timeout",
        "executor_max_iterations_exceeded",
    ] {
        assert!(
            events.iter().any(|e| e["event"] == name),
            "no {name} event in:\n{out}"
        );
    }
    let parsed = events
        .iter()
        .find(|e| e["event"] == "tool_intents_parsed")
        .unwrap();
    assert_eq!(parsed["tool_names"], json!(["write"]));
    assert_eq!(parsed["level"], "INFO");
    assert!(parsed["run_id"].as_str().unwrap().starts_with("run-"));
    assert!(parsed["timestamp"].is_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executor_config_errors_fail_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("executor.yaml");
    std::fs::write(&path, "executor:\n  max_iterations: 0\n").unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_ferroclaw"))
        .args([
            "executor",
            "--config",
            path.to_str().unwrap(),
            "--port",
            "0",
        ])
        .env("FERROCLAW_HOME", dir.path())
        .env_remove("GPTOSS_EXECUTOR_EXECUTOR_MAX_ITERATIONS")
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run ferroclaw executor");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("max_iterations"), "{stderr}");
}
