//! A first run: the README's main command on an empty home with no provider key. The
//! gateway must start anyway, say once what is missing, and answer a chat with it.

use std::process::Stdio;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::gateway_services::WAIT;

#[tokio::test]
async fn the_gateway_starts_without_a_provider_and_says_what_is_missing() {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ferroclaw"));
    cmd.args(["gateway", "--port", "0"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("FERROCLAW_HOME", home.path())
        .env("FERROCLAW_LOG_LEVEL", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (addr, startup) = tokio::time::timeout(WAIT, async {
        let mut seen = String::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            seen.push_str(&line);
            seen.push('\n');
            if let Some(rest) = line.strip_prefix("listening on http://") {
                return (rest.trim().to_string(), seen);
            }
        }
        panic!("the gateway exited: {seen}");
    })
    .await
    .expect("the gateway did not start");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let missing = "no provider configured";
    assert_eq!(startup.matches(missing).count(), 1, "{startup}");
    assert!(startup.contains("ferroclaw onboard"), "{startup}");

    let http = reqwest::Client::new();
    let health: Value = http
        .get(format!("http://{addr}/health"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok", "{health}");
    // The dashboard loads, and the start-up lines say where it is.
    let page = http.get(format!("http://{addr}/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("Gateway token"));
    assert!(
        startup.contains(&format!("dashboard: http://{addr}/")),
        "{startup}"
    );

    let token = std::fs::read_to_string(home.path().join("data/gateway.token")).unwrap();
    let resp = http
        .post(format!("http://{addr}/v1/chat/completions"))
        .bearer_auth(token.trim())
        .json(&json!({"model": "any", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 503);
    let body: Value = resp.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(body["error"]["code"], "agent_unavailable", "{body}");
    assert_eq!(message.matches("agent `main`").count(), 1, "{message}");
    assert_eq!(message.matches(missing).count(), 1, "{message}");
    // Without the token it is still refused first: a first run is no open door.
    let resp = http
        .post(format!("http://{addr}/v1/chat/completions"))
        .json(&json!({"model": "any", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
}
