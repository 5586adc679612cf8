//! The gateway wired to the shared services, through the real binary: the start-up
//! integrity scan and its status, exec approvals answered over WebSocket, and
//! background processes that end with their session and with the gateway.

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

struct Gateway {
    child: tokio::process::Child,
    base: String,
    ws_url: String,
    home: tempfile::TempDir,
    llm: ScriptedLlm,
    http: reqwest::Client,
    /// Stdout up to and including the `listening on` line.
    startup: Vec<String>,
    stderr: Arc<Mutex<String>>,
}

impl Gateway {
    /// Starts the binary on `home` (which may already hold sessions); `extra` is added
    /// to the top level of the config.
    async fn start(
        home: tempfile::TempDir,
        llm: ScriptedLlm,
        extra: &str,
        env: &[(&str, &str)],
    ) -> Gateway {
        let cfg = format!(
            r#"{{
  agents: {{ defaults: {{ provider: "scripted", model: "model-a" }} }},
  providers: {{ scripted: {{ type: "openai_compat", base_url: "{}" }} }},
  {extra}
}}"#,
            llm.openai_base_url()
        );
        std::fs::write(home.path().join("config.json5"), cfg).expect("write config");
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
        let (addr, startup) = tokio::time::timeout(WAIT, async {
            let mut seen = Vec::new();
            while let Some(line) = lines.next_line().await.expect("read stdout") {
                seen.push(line.clone());
                if let Some(rest) = line.strip_prefix("listening on http://") {
                    return (rest.trim().to_string(), seen);
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
        Gateway {
            child,
            base: format!("http://{addr}"),
            ws_url: format!("ws://{addr}/ws"),
            home,
            llm,
            http: reqwest::Client::new(),
            startup,
            stderr,
        }
    }

    async fn ws(&self) -> Ws {
        let (stream, _) = tokio_tungstenite::connect_async(self.ws_url.as_str())
            .await
            .expect("ws connect");
        Ws {
            stream,
            next_id: 0,
            pending: Vec::new(),
        }
    }

    fn transcript(&self, key: &str) -> Vec<Value> {
        let dir = self.home.path().join("agents/main/sessions");
        let index: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("sessions.json")).expect("index"),
        )
        .expect("index json");
        let sid = index[key]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("session {key} in index {index}"))
            .to_string();
        std::fs::read_to_string(dir.join(format!("{sid}.jsonl")))
            .expect("transcript")
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}")))
            .collect()
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

struct Ws {
    stream: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next_id: u64,
    /// Frames read while looking for something else.
    pending: Vec<Value>,
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

    async fn read(&mut self) -> Value {
        loop {
            let msg = tokio::time::timeout(WAIT, self.stream.next())
                .await
                .expect("timed out waiting for a frame");
            match msg {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => {
                    panic!("connection closed")
                }
                Some(Ok(Message::Text(t))) => {
                    return serde_json::from_str(t.as_str()).expect("frame json")
                }
                Some(Ok(_)) => continue,
            }
        }
    }

    /// Reads up to the response to `id`; events and other frames are kept for later.
    async fn until_res(&mut self, id: &str) -> Value {
        if let Some(pos) = self
            .pending
            .iter()
            .position(|f| f["type"] == "res" && f["id"] == id)
        {
            return self.pending.remove(pos);
        }
        loop {
            let f = self.read().await;
            if f["type"] == "res" && f["id"] == id {
                return f;
            }
            self.pending.push(f);
        }
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params).await;
        self.until_res(&id).await
    }

    /// The first event named `name` (kept frames first, then the socket).
    async fn event(&mut self, name: &str) -> Value {
        if let Some(pos) = self
            .pending
            .iter()
            .position(|f| f["type"] == "event" && f["event"] == name)
        {
            return self.pending.remove(pos);
        }
        loop {
            let f = self.read().await;
            if f["type"] == "event" && f["event"] == name {
                return f;
            }
            self.pending.push(f);
        }
    }

    async fn connect(&mut self, token: Option<&str>) -> Value {
        let mut params = json!({"user_id": "tester"});
        if let Some(t) = token {
            params["token"] = json!(t);
        }
        let res = self.call("connect", params).await;
        assert_eq!(res["ok"], true, "{res}");
        res
    }
}

/// The tool results of a transcript: `(text, isError)`.
fn tool_results(entries: &[Value]) -> Vec<(String, bool)> {
    entries
        .iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "toolResult")
        .map(|e| {
            let m = &e["message"];
            let text = m["content"]
                .as_array()
                .map(|b| b.iter().filter_map(|c| c["text"].as_str()).collect())
                .unwrap_or_default();
            (text, m["isError"].as_bool().unwrap_or(false))
        })
        .collect()
}

/// A transcript whose second tool result answers a call that was never made.
fn orphaned_result_transcript(sid: &str) -> String {
    let lines = [
        json!({"type":"session","version":3,"id":sid,"timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}),
        json!({"type":"message","id":"a0000001","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",
               "message":{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":1}}),
        json!({"type":"message","id":"a0000002","parentId":"a0000001","timestamp":"2026-01-01T00:00:01.000Z",
               "message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"exec","arguments":{}}],"stopReason":"toolUse","timestamp":1}}),
        json!({"type":"message","id":"a0000003","parentId":"a0000002","timestamp":"2026-01-01T00:00:01.000Z",
               "message":{"role":"toolResult","toolCallId":"c1","toolName":"exec","content":[{"type":"text","text":"out"}],"isError":false,"timestamp":1}}),
        json!({"type":"message","id":"a0000004","parentId":"a0000003","timestamp":"2026-01-01T00:00:01.000Z",
               "message":{"role":"toolResult","toolCallId":"c9","toolName":"exec","content":[{"type":"text","text":"stray"}],"isError":false,"timestamp":1}}),
        json!({"type":"message","id":"a0000005","parentId":"a0000004","timestamp":"2026-01-01T00:00:01.000Z",
               "message":{"role":"assistant","content":[{"type":"text","text":"done"}],"stopReason":"stop","timestamp":1}}),
    ];
    let mut s = lines.map(|l| l.to_string()).join("\n");
    s.push('\n');
    s
}

fn backups_of(path: &Path) -> Vec<PathBuf> {
    let prefix = format!("{}.bak.", path.file_name().expect("name").to_string_lossy());
    std::fs::read_dir(path.parent().expect("dir"))
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
        })
        .collect()
}

#[tokio::test]
async fn startup_scan_repairs_transcripts_and_reports_status() {
    let llm = ScriptedLlm::start().await.expect("llm");
    let home = tempfile::tempdir().expect("home");
    let dir = home.path().join("agents/main/sessions");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("broken-sid.jsonl");
    let original = orphaned_result_transcript("broken-sid");
    std::fs::write(&file, &original).unwrap();
    std::fs::write(
        dir.join("sessions.json"),
        json!({"broken": {"sessionId": "broken-sid", "createdAt": 1, "updatedAt": 1}}).to_string(),
    )
    .unwrap();
    assert!(!ferroclaw_store::validate_file(&file).unwrap().is_empty());

    let token = "scan-token";
    let gw = Gateway::start(home, llm, "", &[("FERROCLAW_GATEWAY_TOKEN", token)]).await;
    let line = gw
        .startup
        .iter()
        .find(|l| l.trim_start().starts_with("integrity:"))
        .unwrap_or_else(|| panic!("no integrity line in {:?}", gw.startup));
    assert_eq!(
        line.trim(),
        "integrity: 1 sessions, 1 issues, 1 repaired",
        "{:?}",
        gw.startup
    );
    // Repaired before the first request: valid now, the original kept as a backup.
    assert_eq!(ferroclaw_store::validate_file(&file).unwrap(), vec![]);
    let backups = backups_of(&file);
    assert_eq!(backups.len(), 1, "{backups:?}");
    assert_eq!(std::fs::read_to_string(&backups[0]).unwrap(), original);

    // Any role may read the status.
    let mut viewer = gw.ws().await;
    viewer.connect(None).await;
    let res = viewer.call("integrity.status", json!({})).await;
    assert_eq!(res["ok"], true, "{res}");
    let st = &res["payload"];
    assert_eq!(st["scanned"], true, "{st}");
    assert!(st["issues"].as_u64().unwrap() >= 1, "{st}");
    assert_eq!(st["repaired"], 1, "{st}");
    assert_eq!(st["repair"], true, "{st}");
    // Only an admin may rewrite transcripts.
    let res = viewer.call("integrity.scan", json!({})).await;
    assert_eq!(res["error"]["code"], "UNAUTHORIZED", "{res}");

    let resp = gw
        .http
        .get(format!("{}/integrity", gw.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    let resp = gw
        .http
        .get(format!("{}/integrity", gw.base))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["issues"], st["issues"], "{body}");
    assert_eq!(body["timestamp"], st["timestamp"], "{body}");

    // An admin rescan finds nothing left and becomes the new status.
    let mut admin = gw.ws().await;
    admin.connect(Some(token)).await;
    let res = admin.call("integrity.scan", json!({})).await;
    assert_eq!(res["ok"], true, "{res}");
    let p = &res["payload"];
    assert_eq!(
        (
            p["sessions"].as_u64(),
            p["issues"].as_u64(),
            p["repaired"].as_u64()
        ),
        (Some(1), Some(0), Some(0)),
        "{p}"
    );
    assert_eq!(p["summary"], "1 sessions, 0 issues, 0 repaired");
    let res = viewer.call("integrity.status", json!({})).await;
    assert_eq!(res["payload"]["issues"], 0, "{res}");
    assert!(!gw.stderr().contains("panicked"), "{}", gw.stderr());
}

const APPROVAL_CFG: &str =
    r#"tools: { exec: { approval: "always", approval_timeout_seconds: 30 } },"#;

#[tokio::test]
async fn exec_approvals_are_answered_over_websocket() {
    let llm = ScriptedLlm::start().await.expect("llm");
    let home = tempfile::tempdir().expect("home");
    let gw = Gateway::start(home, llm, APPROVAL_CFG, &[]).await;
    // Someone watching for approvals, and someone chatting.
    let mut approver = gw.ws().await;
    approver.connect(None).await;
    let mut chat = gw.ws().await;
    chat.connect(None).await;

    // Approved: the command runs.
    gw.llm.push(Reply::tool_call(
        "call_a",
        "exec",
        json!({"command": "echo approved-run"}),
    ));
    gw.llm.push(Reply::text("It ran."));
    let chat_id = chat
        .send(
            "chat.send",
            json!({"message": "run it", "sessionKey": "appr"}),
        )
        .await;
    let req = approver.event("exec.approval.requested").await;
    let p = &req["payload"];
    assert_eq!(p["command"], "echo approved-run", "{req}");
    assert_eq!(p["sessionKey"], "appr", "{req}");
    assert_eq!(p["agentId"], "main", "{req}");
    let id = p["id"].as_str().expect("approval id").to_string();
    // The requester sees it too (operator role).
    let seen = chat.event("exec.approval.requested").await;
    assert_eq!(seen["payload"]["id"], id.as_str());

    let res = approver.call("exec.approval.list", json!({})).await;
    let listed: Vec<&str> = res["payload"]["approvals"]
        .as_array()
        .expect("approvals")
        .iter()
        .filter_map(|a| a["id"].as_str())
        .collect();
    assert_eq!(listed, [id.as_str()], "{res}");
    let res = approver
        .call("exec.approval.approve", json!({"id": "no-such-id"}))
        .await;
    assert_eq!(res["error"]["code"], "NOT_FOUND", "{res}");
    let res = approver
        .call("exec.approval.approve", json!({"id": id}))
        .await;
    assert_eq!(res["ok"], true, "{res}");
    assert_eq!(res["payload"]["decision"], "approved", "{res}");
    let resolved = approver.event("exec.approval.resolved").await;
    assert_eq!(resolved["payload"]["id"], id.as_str(), "{resolved}");
    assert_eq!(resolved["payload"]["decision"], "approved", "{resolved}");

    let res = chat.until_res(&chat_id).await;
    assert_eq!(res["ok"], true, "{res}");
    assert_eq!(res["payload"]["content"], "It ran.");
    let results = tool_results(&gw.transcript("appr"));
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(!results[0].1, "{results:?}");
    assert!(results[0].0.contains("approved-run"), "{results:?}");
    // Answered requests are gone.
    let res = approver.call("exec.approval.list", json!({})).await;
    assert_eq!(res["payload"]["approvals"], json!([]), "{res}");
    let res = approver.call("exec.approval.deny", json!({"id": id})).await;
    assert_eq!(res["error"]["code"], "NOT_FOUND", "{res}");

    // Denied: the tool result is an error and the command never ran.
    gw.llm.push(Reply::tool_call(
        "call_d",
        "exec",
        json!({"command": "echo denied-run > denied.txt"}),
    ));
    gw.llm.push(Reply::text("It was refused."));
    let chat_id = chat
        .send(
            "chat.send",
            json!({"message": "run that", "sessionKey": "deny"}),
        )
        .await;
    let req = approver.event("exec.approval.requested").await;
    let id = req["payload"]["id"].as_str().expect("id").to_string();
    let res = approver.call("exec.approval.deny", json!({"id": id})).await;
    assert_eq!(res["ok"], true, "{res}");
    assert_eq!(res["payload"]["decision"], "denied", "{res}");
    let resolved = approver.event("exec.approval.resolved").await;
    assert_eq!(resolved["payload"]["decision"], "denied", "{resolved}");
    let res = chat.until_res(&chat_id).await;
    assert_eq!(res["ok"], true, "{res}");
    let results = tool_results(&gw.transcript("deny"));
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].1, "denied → error result: {results:?}");
    assert!(!gw.home.path().join("workspace/denied.txt").exists());
}

/// The pid in an exec tool result ("Started background process … (pid N)").
fn started_pid(text: &str) -> i32 {
    let rest = text
        .split("(pid ")
        .nth(1)
        .unwrap_or_else(|| panic!("no pid in {text:?}"));
    rest.split(')')
        .next()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in {text:?}"))
}

/// Whether `pid` is a live process (a zombie counts as dead: it was killed, only not
/// yet reaped).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            // Field 3, after the parenthesised command name.
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next());
            !matches!(state, Some("Z") | Some("X"))
        }
    }
}

/// Polls until `pid` is dead; the kill is a signal, so death is observed, not awaited.
async fn wait_dead(pid: i32) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while alive(pid) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "process {pid} still alive"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs one turn whose tool call starts `sleep 30` in the background; returns its pid.
async fn start_background(gw: &Gateway, ws: &mut Ws, session: &str) -> i32 {
    gw.llm.push(Reply::tool_call(
        "call_bg",
        "exec",
        json!({"command": "sleep 30", "background": true}),
    ));
    gw.llm.push(Reply::text("Started."));
    let res = ws
        .call(
            "chat.send",
            json!({"message": "start it", "sessionKey": session}),
        )
        .await;
    assert_eq!(res["ok"], true, "{res}");
    let results = tool_results(&gw.transcript(session));
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(!results[0].1, "{results:?}");
    let pid = started_pid(&results[0].0);
    assert!(alive(pid), "background process {pid} is running");
    pid
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn background_processes_end_with_their_session_and_the_gateway() {
    let llm = ScriptedLlm::start().await.expect("llm");
    let home = tempfile::tempdir().expect("home");
    let mut gw = Gateway::start(home, llm, "", &[]).await;
    let mut ws = gw.ws().await;
    ws.connect(None).await;

    let doomed = start_background(&gw, &mut ws, "bg-delete").await;
    let kept = start_background(&gw, &mut ws, "bg-keep").await;
    let res = ws
        .call("sessions.delete", json!({"sessionKey": "bg-delete"}))
        .await;
    assert_eq!(res["ok"], true, "{res}");
    assert_eq!(res["payload"]["deleted"], true, "{res}");
    wait_dead(doomed).await;
    // Another session's process is untouched.
    assert!(alive(kept), "process {kept} of another session survives");

    // Shutdown kills what is left.
    let pid = gw.child.id().expect("child pid") as i32;
    // SAFETY: sending a signal to our own child process by pid.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = tokio::time::timeout(WAIT, gw.child.wait())
        .await
        .expect("gateway exit")
        .expect("wait");
    assert!(status.success(), "{status:?}: {}", gw.stderr());
    wait_dead(kept).await;
}
