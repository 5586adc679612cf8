//! The real `ferroclaw` binary, started as a child process with a temporary home.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed fixture should stop the test

use std::path::Path;
use std::process::Output;

use ferroclaw_testkit::{Reply, ScriptedLlm};
use serde_json::{json, Value};

const PROVIDER_VARS: [&str; 9] = [
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENROUTER_API_KEY",
    "GROQ_API_KEY",
    "DEEPSEEK_API_KEY",
    "MISTRAL_API_KEY",
    "XAI_API_KEY",
    "FERROCLAW_CONFIG",
    "FERROCLAW_MODEL",
];

async fn ferroclaw(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ferroclaw"));
    cmd.args(args)
        .env("FERROCLAW_HOME", home)
        .env("HOME", home)
        .stdin(std::process::Stdio::null());
    for v in PROVIDER_VARS {
        cmd.env_remove(v);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().await.expect("spawn ferroclaw")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn write_config(home: &Path, base_url: &str) {
    let cfg = format!(
        r#"{{
  agents: {{ defaults: {{ provider: "scripted", model: "model-a" }} }},
  providers: {{ scripted: {{ type: "openai_compat", base_url: "{base_url}" }} }},
}}"#
    );
    std::fs::write(home.join("config.json5"), cfg).expect("write config");
}

#[tokio::test]
async fn help_lists_subcommands_and_each_has_help() {
    let home = tempfile::tempdir().expect("tempdir");
    let out = ferroclaw(home.path(), &["--help"], &[]).await;
    assert!(out.status.success());
    let text = stdout(&out);
    for sub in ["agent", "config", "doctor", "onboard"] {
        assert!(text.contains(sub), "--help must list {sub}:\n{text}");
    }
    for args in [
        &["agent", "--help"][..],
        &["agent", "chat", "--help"],
        &["agent", "list", "--help"],
        &["config", "--help"],
        &["config", "show", "--help"],
        &["config", "path", "--help"],
        &["config", "validate", "--help"],
        &["doctor", "--help"],
        &["onboard", "--help"],
    ] {
        let out = ferroclaw(home.path(), args, &[]).await;
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        assert!(stdout(&out).contains("Usage"), "{args:?}");
    }
}

#[tokio::test]
async fn one_shot_chat_runs_tools_and_the_session_survives_a_restart() {
    let llm = ScriptedLlm::start().await.expect("llm");
    let home = tempfile::tempdir().expect("tempdir");
    write_config(home.path(), &llm.openai_base_url());
    llm.push(Reply::tool_call(
        "call_1",
        "write",
        json!({"path": "hello.txt", "content": "hi there"}),
    ));
    llm.push(Reply::text("<think>done?</think>I wrote hello.txt."));

    let out = ferroclaw(
        home.path(),
        &["agent", "chat", "-m", "write a greeting"],
        &[],
    )
    .await;
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "I wrote hello.txt.\n",
        "sanitised answer only on stdout"
    );
    assert!(
        stderr(&out).contains("write"),
        "tool activity shown on stderr"
    );
    let written =
        std::fs::read_to_string(home.path().join("workspace/hello.txt")).expect("tool wrote file");
    assert_eq!(written, "hi there");

    // Transcript in the OpenClaw/pi version 3 format.
    let sid = ferroclaw_testkit::session_id_in(home.path(), "main", "main").expect("indexed");
    let raw = std::fs::read_to_string(
        home.path()
            .join(format!("agents/main/sessions/{sid}.jsonl")),
    )
    .expect("transcript");
    let lines: Vec<Value> = raw
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(lines[0]["type"], "session");
    assert_eq!(lines[0]["version"], 3);
    let roles: Vec<_> = lines[1..]
        .iter()
        .map(|l| l["message"]["role"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(roles, ["user", "assistant", "toolResult", "assistant"]);
    assert!(lines[1]["parentId"].is_null());
    for w in lines[1..].windows(2) {
        assert_eq!(w[1]["parentId"], w[0]["id"]);
    }

    // A second process continues the same session and sends the history.
    llm.push(Reply::text("Yes, still there."));
    let out = ferroclaw(
        home.path(),
        &["agent", "chat", "-m", "is it still there?"],
        &[],
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Yes, still there.\n");
    let body = &llm.requests()[2].body;
    let contents: Vec<String> = body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(contents, ["write a greeting", "is it still there?"]);
}

#[tokio::test]
async fn one_shot_failure_exits_non_zero_with_a_clear_message() {
    let llm = ScriptedLlm::start().await.expect("llm");
    let home = tempfile::tempdir().expect("tempdir");
    write_config(home.path(), &llm.openai_base_url());
    llm.push(Reply::status(401, "invalid api key provided"));
    let out = ferroclaw(home.path(), &["agent", "chat", "-m", "hi"], &[]).await;
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("401") && err.contains("invalid api key provided"),
        "{err}"
    );
    assert!(stdout(&out).is_empty());
}

#[tokio::test]
async fn config_validate_warns_on_unknown_key_and_fails_on_bad_value() {
    let home = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        home.path().join("config.json5"),
        "{\n  agents: {\n    defaults: {\n      modle: \"x\",\n    },\n  },\n}\n",
    )
    .expect("write");
    let out = ferroclaw(home.path(), &["config", "validate"], &[]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("agents.defaults.modle") && err.contains("line 4"),
        "{err}"
    );

    std::fs::write(
        home.path().join("config.json5"),
        "{ agents: { defaults: { max_iterations: \"lots\" } } }",
    )
    .expect("write");
    let out = ferroclaw(home.path(), &["config", "validate"], &[]).await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("agents.defaults.max_iterations"),
        "{}",
        stderr(&out)
    );

    std::fs::write(
        home.path().join("config.json5"),
        "{\n  agents: {\n    defaults: { model: 'x' \n}\n",
    )
    .expect("write");
    let out = ferroclaw(home.path(), &["config", "validate"], &[]).await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("line"),
        "syntax errors name a line: {}",
        stderr(&out)
    );
}

#[tokio::test]
async fn config_show_masks_secrets_and_path_points_at_home() {
    let llm = ScriptedLlm::start().await.expect("llm");
    let home = tempfile::tempdir().expect("tempdir");
    write_config(home.path(), &llm.openai_base_url());
    let secret = "sk-verysecretvalue-0123456789";
    let out = ferroclaw(
        home.path(),
        &["config", "show"],
        &[("FERROCLAW_SCRIPTED_API_KEY", secret)],
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(!text.contains(secret), "secret leaked:\n{text}");
    assert!(text.contains("scripted"));
    serde_json::from_str::<Value>(&text).expect("config show prints JSON");

    let out = ferroclaw(home.path(), &["config", "path"], &[]).await;
    assert_eq!(
        stdout(&out).trim(),
        home.path().join("config.json5").display().to_string()
    );
}

#[tokio::test]
async fn onboard_is_non_interactive_with_a_key_in_the_environment() {
    let home = tempfile::tempdir().expect("tempdir");
    let out = ferroclaw(
        home.path(),
        &["onboard"],
        &[("OPENAI_API_KEY", "sk-test-abc")],
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let cfg = std::fs::read_to_string(home.path().join("config.json5")).expect("config written");
    assert!(cfg.contains("openai"));
    assert!(
        !cfg.contains("sk-test-abc"),
        "keys are never written to the config"
    );
    let out = ferroclaw(
        home.path(),
        &["config", "validate"],
        &[("OPENAI_API_KEY", "sk-test-abc")],
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("warning"),
        "starter config has no unknown keys: {}",
        stderr(&out)
    );
    let out = ferroclaw(
        home.path(),
        &["onboard"],
        &[("OPENAI_API_KEY", "sk-test-abc")],
    )
    .await;
    assert!(
        !out.status.success(),
        "an existing config is not overwritten without --force"
    );
}

#[tokio::test]
async fn onboard_finds_a_local_server_when_no_key_is_set() {
    // Nothing listens: no key, no server, a clear refusal.
    let home = tempfile::tempdir().expect("tempdir");
    let out = ferroclaw(home.path(), &["onboard", "--non-interactive"], &[]).await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no local server answered"),
        "{}",
        stderr(&out)
    );
    // An LM Studio-like server on its usual port, with a gpt-oss model among others.
    let llm = ScriptedLlm::start_on(1234)
        .await
        .expect("port 1234 (LM Studio's) is free for this test");
    llm.set_models(vec!["llama-3.2-3b".into(), "openai/gpt-oss-20b".into()]);
    let out = ferroclaw(home.path(), &["onboard", "--non-interactive"], &[]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("found a local server: lmstudio"),
        "{}",
        stderr(&out)
    );
    let cfg = std::fs::read_to_string(home.path().join("config.json5")).expect("config written");
    assert!(cfg.contains("provider: \"lmstudio\""), "{cfg}");
    assert!(cfg.contains("model: \"openai/gpt-oss-20b\""), "{cfg}");
    assert!(
        cfg.contains("base_url: \"http://127.0.0.1:1234/v1\""),
        "{cfg}"
    );
    assert!(cfg.contains("tool_mode: \"auto\""), "{cfg}");
    let out = ferroclaw(home.path(), &["config", "validate"], &[]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    // Not a gpt-oss model: the tool mode stays native (commented out).
    let other = tempfile::tempdir().expect("tempdir");
    let out = ferroclaw(
        other.path(),
        &["onboard", "--non-interactive", "--model", "llama-3.2-3b"],
        &[],
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let cfg = std::fs::read_to_string(other.path().join("config.json5")).expect("config written");
    assert!(
        cfg.contains("model: \"llama-3.2-3b\"") && !cfg.contains("tool_mode: \"auto\""),
        "{cfg}"
    );
}

#[tokio::test]
async fn doctor_passes_against_a_live_provider_and_fails_against_a_dead_one() {
    let llm = ScriptedLlm::start().await.expect("llm");
    llm.set_models(vec!["model-a".into()]);
    let home = tempfile::tempdir().expect("tempdir");
    write_config(home.path(), &llm.openai_base_url());
    let out = ferroclaw(home.path(), &["doctor"], &[]).await;
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("answers (1 models)"),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains("[warn] embedded database (SQLite): ")
            && stdout(&out).contains("migration(s) pending"),
        "a fresh home: nothing applied yet, and doctor applies nothing: {}",
        stdout(&out)
    );

    // A port nothing listens on: bind, note it, release it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    write_config(home.path(), &format!("http://127.0.0.1:{port}/v1"));
    let out = ferroclaw(home.path(), &["doctor"], &[]).await;
    assert!(!out.status.success());
    assert!(
        stdout(&out).contains("[FAIL]") && stdout(&out).contains("not reachable"),
        "{}",
        stdout(&out)
    );
}

#[tokio::test]
async fn agent_list_shows_default_and_configured_agents() {
    let home = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        home.path().join("config.json5"),
        r#"{ agents: { defaults: { provider: "local", model: "m1" }, list: [{ id: "coder", model: "m2" }] },
             providers: { local: { type: "openai_compat", base_url: "http://127.0.0.1:9/v1" } } }"#,
    )
    .expect("write");
    let out = ferroclaw(home.path(), &["agent", "list"], &[]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("* main"), "{text}");
    assert!(
        text.contains("coder") && text.contains("local/m2"),
        "{text}"
    );
}

#[tokio::test]
async fn migrate_covers_the_index_and_the_directory_of_users_agents() {
    let home = tempfile::tempdir().expect("tempdir");
    write_config(home.path(), "http://127.0.0.1:9/v1");
    let directory = home.path().join("data/directory.db");
    let out = ferroclaw(home.path(), &["migrate", "status"], &[]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("session_index") && text.contains("pending"),
        "{text}"
    );
    // No directory yet: nothing of it to migrate, and status does not create it.
    assert!(!text.contains("directory.db"), "{text}");
    assert!(!directory.exists());
    let out = ferroclaw(home.path(), &["migrate", "up"], &[]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(directory.exists());
    let out = ferroclaw(home.path(), &["migrate", "status"], &[]).await;
    let text = stdout(&out);
    let directory_line = text
        .lines()
        .find(|l| l.contains("directory.db: directory"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(directory_line.contains("applied"), "{text}");
    assert!(!text.contains("pending"), "{text}");
}

#[tokio::test]
async fn interactive_repl_streams_answers_and_compacts_on_request() {
    use tokio::io::AsyncWriteExt;
    let llm = ScriptedLlm::start().await.expect("llm");
    let home = tempfile::tempdir().expect("tempdir");
    write_config(home.path(), &llm.openai_base_url());
    llm.push(Reply::text("first streamed answer").chunk_size(3));
    llm.push(Reply::text("second answer"));
    llm.push(Reply::text("summary of the first exchange"));

    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_ferroclaw"))
        .args(["agent", "chat", "--session", "repl"])
        .env("FERROCLAW_HOME", home.path())
        .env("HOME", home.path())
        .envs(PROVIDER_VARS.iter().map(|v| (*v, "")))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn repl");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(b"hello\nand again\n/compact\n/exit\n")
        .await
        .expect("write");
    drop(stdin);
    let out = child.wait_with_output().await.expect("repl output");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("first streamed answer") && text.contains("second answer"),
        "{text}"
    );
    assert!(stderr(&out).contains("compacted:"), "{}", stderr(&out));
    // The second request carried the first exchange: one session across REPL lines.
    let second = llm.requests()[1].body.to_string();
    assert!(second.contains("hello") && second.contains("first streamed answer"));
    let summary_req = llm.requests()[2].body.to_string();
    assert!(
        summary_req.contains("hello"),
        "the summariser saw the older turn"
    );
}

#[tokio::test]
async fn repl_integrity_commands_report_and_run_a_scan() {
    use tokio::io::AsyncWriteExt;
    let llm = ScriptedLlm::start().await.expect("llm");
    let home = tempfile::tempdir().expect("tempdir");
    write_config(home.path(), &llm.openai_base_url());
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_ferroclaw"))
        .args(["agent", "chat"])
        .env("FERROCLAW_HOME", home.path())
        .env("HOME", home.path())
        .envs(PROVIDER_VARS.iter().map(|v| (*v, "")))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn repl");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(b"/integrity\n/integrity scan\n/integrity\n")
        .await
        .expect("write");
    drop(stdin);
    let out = child.wait_with_output().await.expect("output");
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    let none = err
        .find("no integrity scan has run yet")
        .expect("first /integrity: no scan yet");
    let summary = err
        .find("0 sessions, 0 issues, 0 repaired")
        .expect("scan summary");
    let last = err.find("last scan").expect("status after the scan");
    assert!(none < summary && summary < last, "{err}");
    assert!(home.path().join("logs/integrity-status.json").exists());
}

/// Managed mode end to end through the binary: a chat turn stored as rows, listed,
/// exported as an OpenClaw transcript, imported back, migrations reported; nothing of
/// the embedded database is created.
#[tokio::test]
async fn managed_mode_keeps_sessions_in_postgres() {
    let llm = ScriptedLlm::start().await.expect("llm");
    let home = tempfile::tempdir().expect("tempdir");
    let cfg = format!(
        r#"{{
  agents: {{ defaults: {{ provider: "scripted", model: "model-a" }} }},
  providers: {{ scripted: {{ type: "openai_compat", base_url: "{}" }} }},
  database: {{ mode: "managed" }},
}}"#,
        llm.openai_base_url()
    );
    std::fs::write(home.path().join("config.json5"), cfg).expect("config");

    // Without the URL: a clear refusal, before anything runs.
    let out = ferroclaw(home.path(), &["agent", "chat", "-m", "hi"], &[]).await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("FERROCLAW_DATABASE_URL"),
        "{}",
        stderr(&out)
    );

    let url = ferroclaw_testkit::pg::fresh_database().await;
    let env = [("FERROCLAW_DATABASE_URL", url.as_str())];
    let out = ferroclaw(home.path(), &["migrate", "status"], &env).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("pending"), "{}", stdout(&out));

    llm.push(Reply::text("Stored in rows."));
    let out = ferroclaw(
        home.path(),
        &[
            "agent",
            "chat",
            "-m",
            "where do you keep this?",
            "--session",
            "pg-1",
        ],
        &env,
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Stored in rows.\n");

    let out = ferroclaw(home.path(), &["sessions", "list"], &env).await;
    assert!(stdout(&out).starts_with("pg-1\t"), "{}", stdout(&out));
    let out = ferroclaw(home.path(), &["migrate", "status"], &env).await;
    assert!(stdout(&out).contains("applied"), "{}", stdout(&out));
    let out = ferroclaw(home.path(), &["doctor"], &env).await;
    assert!(
        stdout(&out).contains("[ok]   PostgreSQL: schema up to date"),
        "{}",
        stdout(&out)
    );
    let dead = [(
        "FERROCLAW_DATABASE_URL",
        "postgres://postgres@127.0.0.1:9/none",
    )];
    let out = ferroclaw(home.path(), &["doctor"], &dead).await;
    assert!(!out.status.success());
    assert!(
        stdout(&out).contains("[FAIL] PostgreSQL:"),
        "{}",
        stdout(&out)
    );

    let exported = home.path().join("pg-1.jsonl");
    let out = ferroclaw(
        home.path(),
        &[
            "sessions",
            "export",
            "pg-1",
            "-o",
            exported.to_str().expect("path"),
        ],
        &env,
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let bytes = std::fs::read(&exported).expect("export");
    assert!(ferroclaw_store::validate_bytes(&bytes).is_empty());
    let lines: Vec<Value> = String::from_utf8_lossy(&bytes)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(lines[0]["type"], "session");
    assert_eq!(lines[0]["sessionKey"], "pg-1");
    assert_eq!(lines[1]["message"]["role"], "user");
    assert_eq!(
        lines.last().expect("answer")["message"]["content"][0]["text"],
        "Stored in rows."
    );
    assert!(
        !home.path().join("data/ferroclaw.db").exists(),
        "managed mode does not touch the embedded database"
    );

    // The same transcript into the embedded backend of another home: the round trip.
    let other = tempfile::tempdir().expect("other home");
    write_config(other.path(), &llm.openai_base_url());
    let dir = tempfile::tempdir().expect("dir");
    std::fs::copy(&exported, dir.path().join("pg-1.jsonl")).expect("copy");
    let out = ferroclaw(
        other.path(),
        &["sessions", "import", dir.path().to_str().expect("dir")],
        &[],
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("1 imported"), "{}", stdout(&out));

    // An unknown key is an error that says so.
    let out = ferroclaw(home.path(), &["sessions", "export", "nope"], &env).await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no session `nope`"),
        "{}",
        stderr(&out)
    );
}

/// A gateway whose database is down waits for it (a log line per attempt) instead of
/// exiting, so a supervisor does not crash-loop it.
#[tokio::test]
async fn a_gateway_waits_for_an_unreachable_database() {
    use tokio::io::AsyncBufReadExt;
    let llm = ScriptedLlm::start().await.expect("llm");
    let home = tempfile::tempdir().expect("tempdir");
    let cfg = format!(
        r#"{{
  agents: {{ defaults: {{ provider: "scripted", model: "model-a" }} }},
  providers: {{ scripted: {{ type: "openai_compat", base_url: "{}" }} }},
  database: {{ mode: "managed" }},
}}"#,
        llm.openai_base_url()
    );
    std::fs::write(home.path().join("config.json5"), cfg).expect("config");
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_ferroclaw"))
        .args(["gateway", "--port", "0"])
        .env("FERROCLAW_HOME", home.path())
        .env("HOME", home.path())
        .env(
            "FERROCLAW_DATABASE_URL",
            format!("postgres://postgres@127.0.0.1:{port}/none"),
        )
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut retries = 0;
    while let Some(line) = lines.next_line().await.expect("read") {
        if line.contains("database unavailable; retrying") {
            retries += 1;
            if retries == 2 {
                break;
            }
        }
    }
    assert_eq!(retries, 2, "two attempts logged");
    assert!(
        child.try_wait().expect("status").is_none(),
        "still running, not crash-looping"
    );
    child.kill().await.expect("kill");
}

#[tokio::test]
async fn cron_jobs_are_added_listed_run_and_removed_from_the_command_line() {
    let llm = ScriptedLlm::start().await.expect("llm");
    let home = tempfile::tempdir().expect("tempdir");
    write_config(home.path(), &llm.openai_base_url());
    let out = ferroclaw(
        home.path(),
        &[
            "cron",
            "add",
            "-m",
            "summarise the news",
            "--cron",
            "0 7 * * 1-5",
            "--tz",
            "Europe/Berlin",
            "--name",
            "news",
        ],
        &[],
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let id = stdout(&out)
        .split('\t')
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(stdout(&out).contains("next run"), "{}", stdout(&out));

    let out = ferroclaw(home.path(), &["cron", "list"], &[]).await;
    let text = stdout(&out);
    assert!(
        text.contains(&id)
            && text.contains("news")
            && text.contains("cron 0 7 * * 1-5 (Europe/Berlin)"),
        "{text}"
    );

    llm.push(Reply::text("Markets are calm."));
    let out = ferroclaw(home.path(), &["cron", "run", &id], &[]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Markets are calm.\n");
    let sent = llm.requests()[0].body.to_string();
    assert!(sent.contains("summarise the news"), "{sent}");
    // The schedule is unchanged by a run by hand.
    let out = ferroclaw(home.path(), &["cron", "list"], &[]).await;
    assert_eq!(stdout(&out), text);

    // Bad input: refused with the reason, nothing added.
    for (args, why) in [
        (
            vec!["cron", "add", "-m", "x", "--cron", "0 7 * *"],
            "5 fields",
        ),
        (
            vec![
                "cron",
                "add",
                "-m",
                "x",
                "--every",
                "1h",
                "--catch-up",
                "later",
            ],
            "once or skip",
        ),
        (
            vec!["cron", "add", "-m", "x"],
            "one of --at, --every, --cron",
        ),
        (vec!["cron", "run", "nope"], "no cron job `nope`"),
    ] {
        let out = ferroclaw(home.path(), &args, &[]).await;
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr(&out).contains(why), "{args:?}: {}", stderr(&out));
    }

    let out = ferroclaw(home.path(), &["cron", "rm", &id], &[]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let out = ferroclaw(home.path(), &["cron", "list"], &[]).await;
    assert_eq!(stdout(&out), "no cron jobs\n");
}

#[tokio::test]
async fn a_one_shot_chat_waits_for_the_mcp_servers_tools() {
    let everything = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../.ci/mcp/node_modules/.bin/mcp-server-everything");
    assert!(
        everything.exists(),
        "run `npm install --prefix .ci/mcp` (what .ci/run does)"
    );
    let llm = ScriptedLlm::start().await.expect("llm");
    let home = tempfile::tempdir().expect("tempdir");
    let cfg = format!(
        r#"{{
  agents: {{ defaults: {{ provider: "scripted", model: "model-a" }} }},
  providers: {{ scripted: {{ type: "openai_compat", base_url: "{}" }} }},
  mcp: {{ servers: {{ everything: {{ command: "{}" }} }} }},
}}"#,
        llm.openai_base_url(),
        everything.display()
    );
    std::fs::write(home.path().join("config.json5"), cfg).expect("config");
    llm.push(Reply::tool_call(
        "c1",
        "mcp_everything_get-sum",
        json!({"a": 20, "b": 22}),
    ));
    llm.push(Reply::text("42 it is."));
    let out = ferroclaw(home.path(), &["agent", "chat", "-m", "add 20 and 22"], &[]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "42 it is.\n");
    let requests = llm.requests();
    assert!(requests[0].body["tools"]
        .to_string()
        .contains("mcp_everything_get-sum"));
    assert!(
        requests[1].body["messages"].to_string().contains("42"),
        "{}",
        requests[1].body
    );
}

#[tokio::test]
async fn doctor_starts_each_mcp_server_and_says_which_fails_and_why() {
    let everything = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../.ci/mcp/node_modules/.bin/mcp-server-everything");
    assert!(
        everything.exists(),
        "run `npm install --prefix .ci/mcp` (what .ci/run does)"
    );
    let llm = ScriptedLlm::start().await.expect("llm");
    let home = tempfile::tempdir().expect("tempdir");
    let cfg = format!(
        r#"{{
  agents: {{ defaults: {{ provider: "scripted", model: "model-a" }} }},
  providers: {{ scripted: {{ type: "openai_compat", base_url: "{}" }} }},
  mcp: {{ servers: {{
    everything: {{ command: "{}" }},
    broken: {{ command: "/nonexistent/mcp" }},
    off: {{ command: "/nonexistent/mcp", enabled: false }},
  }} }},
}}"#,
        llm.openai_base_url(),
        everything.display()
    );
    std::fs::write(home.path().join("config.json5"), cfg).expect("config");
    let out = ferroclaw(home.path(), &["doctor"], &[]).await;
    let text = stdout(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("[ok]   MCP server `everything` (stdio):")
                && l.ends_with("tools")),
        "{text}"
    );
    assert!(
        text.contains(
            "[FAIL] MCP server `broken` (stdio): failed: cannot start `/nonexistent/mcp`"
        ),
        "{text}"
    );
    assert!(
        text.contains("[ok]   MCP server `off` (stdio): disabled"),
        "{text}"
    );
}
