//! Crash safety: a `ferroclaw agent chat` child running a multi-tool turn is SIGKILLed
//! at many randomised moments. After every kill the session must load with a valid
//! transcript, the next turn must succeed, the request the model receives must pair
//! every tool call with one result, and no acknowledged message may be lost.
//!
//! The sleep before each kill is the experiment (a random point in the turn), not a
//! synchronisation: every outcome is acceptable as long as the invariants hold.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed fixture should stop the test

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use ferroclaw_store::{validate_api_messages, validate_file, FileSessionStore, SessionStore};
use ferroclaw_testkit::{Reply, ScriptedLlm};
use ferroclaw_types::{ContentBlock, Message};
use serde_json::json;

const ITERATIONS: usize = 50;
const SEED: u64 = 0x5eed_c1a5;

fn write_config(home: &Path, base_url: &str) {
    let cfg = format!(
        r#"{{
  agents: {{ defaults: {{ provider: "scripted", model: "model-a", stream: true }} }},
  providers: {{ scripted: {{ type: "openai_compat", base_url: "{base_url}" }} }},
}}"#
    );
    std::fs::write(home.join("config.json5"), cfg).expect("write config");
}

fn command(home: &Path, message: &str) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ferroclaw"));
    cmd.args(["agent", "chat", "-m", message, "--session", "s"])
        .env("FERROCLAW_HOME", home)
        .env("HOME", home)
        .env_remove("FERROCLAW_CONFIG")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// A turn with several tool calls that take a little while, then a streamed answer.
fn script_turn(llm: &ScriptedLlm, i: usize) {
    llm.push(
        Reply::tool_calls(vec![
            (
                format!("x{i}a"),
                "exec".into(),
                json!({"command": "sleep 0.03; echo first"}),
            ),
            (
                format!("w{i}"),
                "write".into(),
                json!({"path": format!("f{i}.txt"), "content": "data"}),
            ),
            (
                format!("x{i}b"),
                "exec".into(),
                json!({"command": "sleep 0.05; echo second"}),
            ),
        ])
        .with_text("working on it")
        .delay(Duration::from_millis(15)),
    );
    llm.push(
        Reply::text(format!("turn {i} finished with a longer streamed answer"))
            .chunk_size(3)
            .delay(Duration::from_millis(15)),
    );
}

/// User texts of every message entry in the transcript, in file order.
async fn user_texts(home: &Path) -> Vec<String> {
    let store = FileSessionStore::new(home);
    let log = store.open("main", "s").await.expect("session loads");
    log.entries()
        .iter()
        .filter_map(|e| match e.message() {
            Some(Message::User(u)) => Some(
                u.content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect::<String>(),
            ),
            _ => None,
        })
        .collect()
}

fn assert_requests_pair(llm: &ScriptedLlm, what: &str) {
    for (n, req) in llm.requests().iter().enumerate() {
        let messages = req.body["messages"].as_array().cloned().unwrap_or_default();
        let issues = validate_api_messages(&messages);
        assert!(issues.is_empty(), "{what}, request {n}: {issues:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_random_moments_never_bricks_the_session() {
    let home = tempfile::tempdir().expect("tempdir");
    let home = home.path();
    let mut rng = fastrand::Rng::with_seed(SEED);
    let mut acknowledged: Vec<String> = Vec::new();

    // Calibration: how long one complete turn takes on this machine. The kill points are
    // drawn over that span (plus a margin, so some children finish first).
    let llm = ScriptedLlm::start().await.expect("llm");
    write_config(home, &llm.openai_base_url());
    script_turn(&llm, 0);
    let started = Instant::now();
    let out = command(home, "calibrate").output().await.expect("run");
    let span = started.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    acknowledged.push("calibrate".into());
    let span_ms = span.as_millis().max(50) as u64 * 12 / 10;

    let (mut killed, mut finished) = (0, 0);
    for i in 1..=ITERATIONS {
        // A fresh server per child: a killed child leaves replies unconsumed.
        let llm = ScriptedLlm::start().await.expect("llm");
        write_config(home, &llm.openai_base_url());
        script_turn(&llm, i);
        let message = format!("message {i}");
        let mut child = command(home, &message).spawn().expect("spawn");
        let pid = child.id().expect("pid") as libc::pid_t;
        tokio::time::sleep(Duration::from_millis(rng.u64(0..=span_ms))).await;
        // SAFETY: `pid` is our own child and has not been reaped yet (we have not
        // waited on it), so the id cannot have been reused by another process.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
        let status = child.wait().await.expect("wait");
        if status.success() {
            finished += 1;
            acknowledged.push(message.clone());
        } else {
            killed += 1;
        }
        assert_requests_pair(&llm, &format!("iteration {i}, killed child"));

        // What the kill left behind: the session loads (repairing on the way) and the
        // file on disk validates clean afterwards.
        let store = FileSessionStore::new(home);
        let log = store
            .open("main", "s")
            .await
            .expect("session loads after kill");
        let path = store
            .transcript_path("main", log.session_id())
            .expect("path");
        drop(log);
        let issues = validate_file(&path).expect("read transcript");
        assert!(issues.is_empty(), "iteration {i}: {issues:?}");

        // The next turn works and sends a well-paired history.
        let llm2 = ScriptedLlm::start().await.expect("llm");
        write_config(home, &llm2.openai_base_url());
        llm2.push(Reply::text(format!("ack {i}")));
        let follow = format!("follow-up {i}");
        let out = command(home, &follow)
            .output()
            .await
            .expect("run follow-up");
        assert!(
            out.status.success(),
            "iteration {i}: follow-up failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("ack {i}")
        );
        acknowledged.push(follow);
        assert_requests_pair(&llm2, &format!("iteration {i}, follow-up"));

        let users = user_texts(home).await;
        for m in &acknowledged {
            assert!(users.contains(m), "iteration {i}: acknowledged {m:?} lost");
        }
    }
    let reports: Vec<String> = std::fs::read_dir(home.join("logs"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                .collect()
        })
        .unwrap_or_default();
    let incidents = reports.len();
    let interrupted = reports
        .iter()
        .filter(|r| r.contains("missing_tool_result"))
        .count();
    eprintln!(
        "crash test: {killed} children killed mid-turn, {finished} finished before the kill, \
         {incidents} transcripts repaired on load"
    );
    // Both outcomes must have been exercised for the test to mean anything, including
    // a run killed between the tool calls and their results.
    assert!(
        killed > ITERATIONS / 4,
        "only {killed} kills landed mid-turn"
    );
    assert!(
        interrupted > 0,
        "no kill landed between tool calls and results"
    );
}
