//! `ferroclaw sessions scan|import` and the chat turn after a repair, through the real
//! binary with a temporary home and the scripted LLM.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed fixture should stop the test

use std::path::{Path, PathBuf};
use std::process::Output;

use ferroclaw_store::{validate_api_messages, validate_file};
use ferroclaw_testkit::{Reply, ScriptedLlm};
use serde_json::{json, Value};

async fn ferroclaw(home: &Path, args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_ferroclaw"))
        .args(args)
        .env("FERROCLAW_HOME", home)
        .env("HOME", home)
        .env_remove("FERROCLAW_CONFIG")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("spawn ferroclaw")
}

fn write_config(home: &Path, base_url: &str, extra: &str) {
    let cfg = format!(
        r#"{{
  agents: {{ defaults: {{ provider: "scripted", model: "model-a" }} }},
  providers: {{ scripted: {{ type: "openai_compat", base_url: "{base_url}" }} }},
  {extra}
}}"#
    );
    std::fs::write(home.join("config.json5"), cfg).expect("write config");
}

#[derive(Clone, Copy, Debug)]
enum Form {
    Transcript,
    Api,
}

/// Builds transcript lines with linear parents.
struct T {
    lines: Vec<String>,
    last: Option<String>,
    n: u32,
    form: Form,
}

impl T {
    fn new(sid: &str, form: Form) -> Self {
        T {
            lines: vec![json!({"type":"session","version":3,"id":sid,"timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}).to_string()],
            last: None,
            n: 0,
            form,
        }
    }
    fn push(&mut self, message: Value) -> String {
        self.n += 1;
        let id = format!("{:08x}", 0xb000_0000u32 + self.n);
        self.lines.push(json!({"type":"message","id":id,"parentId":self.last,"timestamp":"2026-01-01T00:00:01.000Z","message":message}).to_string());
        self.last = Some(id.clone());
        id
    }
    fn user(&mut self, text: &str) {
        self.push(json!({"role":"user","content":[{"type":"text","text":text}],"timestamp":1}));
    }
    fn answer(&mut self, text: &str) {
        self.push(json!({"role":"assistant","content":[{"type":"text","text":text}],"stopReason":"stop","timestamp":1}));
    }
    fn calls(&mut self, ids: &[&str]) {
        let m = match self.form {
            Form::Transcript => {
                json!({"role":"assistant","content":ids.iter().map(|i| json!({"type":"toolCall","id":i,"name":"exec","arguments":{}})).collect::<Vec<_>>(),"stopReason":"toolUse","timestamp":1})
            }
            Form::Api => {
                json!({"role":"assistant","content":ids.iter().map(|i| json!({"type":"tool_use","id":i,"name":"exec","input":{}})).collect::<Vec<_>>(),"timestamp":1})
            }
        };
        self.push(m);
    }
    fn result(&mut self, id: &str) {
        let m = match self.form {
            Form::Transcript => {
                json!({"role":"toolResult","toolCallId":id,"toolName":"exec","content":[{"type":"text","text":"out"}],"isError":false,"timestamp":1})
            }
            Form::Api => {
                json!({"role":"user","content":[{"type":"tool_result","tool_use_id":id,"content":"out"}],"timestamp":1})
            }
        };
        self.push(m);
    }
    fn bytes(&self) -> Vec<u8> {
        let mut s = self.lines.join("\n");
        s.push('\n');
        s.into_bytes()
    }
}

/// (issue type, transcript) for every issue type.
fn cases(form: Form) -> Vec<(&'static str, Vec<u8>)> {
    let mut v = Vec::new();
    let base = |sid: &str| {
        let mut t = T::new(sid, form);
        t.user("hi");
        t
    };
    let mut t = base("orphan");
    t.calls(&["c1"]);
    t.result("c1");
    t.result("c9");
    t.answer("done");
    v.push(("orphaned_tool_result", t.bytes()));
    let mut t = base("missing");
    t.calls(&["c1", "c2"]);
    t.result("c1");
    t.user("next");
    t.answer("done");
    v.push(("missing_tool_result", t.bytes()));
    let mut t = base("duplicate");
    t.calls(&["c1"]);
    t.result("c1");
    t.result("c1");
    t.answer("done");
    v.push(("duplicate_tool_result", t.bytes()));
    let mut t = base("early");
    t.result("c1");
    t.calls(&["c1"]);
    t.answer("done");
    v.push(("result_before_call", t.bytes()));
    let mut t = base("torn");
    t.calls(&["c1"]);
    t.result("c1");
    t.answer("done");
    let mut b = t.bytes();
    b.extend_from_slice(br#"{"type":"message","id":"ffffffff","par"#);
    v.push(("torn_line", b));
    let mut t = base("garbage");
    t.lines.push("{{{ not json".into());
    t.answer("done");
    v.push(("unparseable_line", t.bytes()));
    let mut t = base("parent");
    t.calls(&["c1"]);
    t.result("c1");
    t.last = Some("0badbad0".into());
    t.answer("done");
    v.push(("bad_parent", t.bytes()));
    v
}

fn install(home: &Path, files: &[(String, Vec<u8>)]) -> Vec<PathBuf> {
    let dir = home.join("agents/main/sessions");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let mut index = serde_json::Map::new();
    let mut paths = Vec::new();
    for (sid, bytes) in files {
        let p = dir.join(format!("{sid}.jsonl"));
        std::fs::write(&p, bytes).expect("write");
        index.insert(
            sid.clone(),
            json!({"sessionId": sid, "createdAt": 1, "updatedAt": 1}),
        );
        paths.push(p);
    }
    std::fs::write(dir.join("sessions.json"), Value::Object(index).to_string()).expect("index");
    paths
}

fn backup_of(path: &Path) -> Vec<u8> {
    let prefix = format!("{}.bak.", path.file_name().expect("name").to_string_lossy());
    let found: Vec<PathBuf> = std::fs::read_dir(path.parent().expect("dir"))
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
        })
        .collect();
    assert_eq!(found.len(), 1, "one backup of {}", path.display());
    std::fs::read(&found[0]).expect("backup")
}

#[tokio::test]
async fn scan_finds_and_repairs_every_issue_then_chat_works() {
    for form in [Form::Transcript, Form::Api] {
        let llm = ScriptedLlm::start().await.expect("llm");
        let home = tempfile::tempdir().expect("home");
        write_config(home.path(), &llm.openai_base_url(), "");
        let cases = cases(form);
        let files: Vec<(String, Vec<u8>)> = cases
            .iter()
            .map(|(kind, b)| (kind.replace('_', "-"), b.clone()))
            .collect();
        let paths = install(home.path(), &files);

        let out = ferroclaw(home.path(), &["sessions", "scan"]).await;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(1), "issues found → exit 1\n{text}");
        for (kind, _) in &cases {
            assert!(
                text.contains(kind),
                "{form:?}: scan output lacks {kind}\n{text}"
            );
        }
        assert!(
            text.contains(&format!("{} sessions,", cases.len())),
            "{text}"
        );
        assert!(text.contains(" 0 repaired"), "{text}");

        let out = ferroclaw(home.path(), &["sessions", "scan", "--repair"]).await;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{form:?}: {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains(&format!("{} repaired", cases.len())),
            "{text}"
        );
        for ((kind, original), path) in cases.iter().zip(&paths) {
            assert_eq!(
                &backup_of(path),
                original,
                "{form:?} {kind}: backup is the original"
            );
            let left = validate_file(path).expect("read");
            assert!(left.is_empty(), "{form:?} {kind}: {left:?}");
        }
        let logs = std::fs::read_dir(home.path().join("logs"))
            .expect("logs")
            .filter_map(Result::ok)
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("integrity-incident-")
            })
            .count();
        assert_eq!(logs, cases.len(), "one incident per repaired file");

        let out = ferroclaw(home.path(), &["sessions", "scan"]).await;
        assert!(
            out.status.success(),
            "clean after repair: {}",
            String::from_utf8_lossy(&out.stdout)
        );

        // The next turn in every repaired session works and sends valid pairing.
        for (n, (sid, _)) in files.iter().enumerate() {
            llm.push(Reply::text(format!("fine {n}")));
            let out = ferroclaw(
                home.path(),
                &["agent", "chat", "-m", "still there?", "--session", sid],
            )
            .await;
            assert!(
                out.status.success(),
                "{form:?} {sid}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(
                String::from_utf8_lossy(&out.stdout).trim(),
                format!("fine {n}")
            );
            let req = llm.requests().pop().expect("request");
            let messages = req.body["messages"].as_array().cloned().unwrap_or_default();
            let issues = validate_api_messages(&messages);
            assert!(
                issues.is_empty(),
                "{form:?} {sid}: request pairing {issues:?}"
            );
            // Only the transcript form is understood by the loader; API-form entries
            // stay on disk but are left out of the context.
            if matches!(form, Form::Transcript) {
                assert!(
                    messages.len() >= 4,
                    "{form:?} {sid}: history was sent: {messages:?}"
                );
            }
        }
    }
}

#[tokio::test]
async fn chat_on_an_unscanned_corrupt_session_repairs_on_open() {
    let llm = ScriptedLlm::start().await.expect("llm");
    for (kind, bytes) in cases(Form::Transcript) {
        // A home per case: its index is moved into the database at the first start, so
        // a later sessions.json would not be read.
        let home = tempfile::tempdir().expect("home");
        write_config(home.path(), &llm.openai_base_url(), "");
        let sid = kind.replace('_', "-");
        let paths = install(home.path(), &[(sid.clone(), bytes.clone())]);
        llm.push(Reply::text("ok"));
        let out = ferroclaw(
            home.path(),
            &["agent", "chat", "-m", "again", "--session", &sid],
        )
        .await;
        assert!(
            out.status.success(),
            "{kind}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let req = llm.requests().pop().expect("request");
        let issues = validate_api_messages(req.body["messages"].as_array().expect("messages"));
        assert!(issues.is_empty(), "{kind}: {issues:?}");
        assert_eq!(backup_of(&paths[0]), bytes, "{kind}");
        assert!(validate_file(&paths[0]).expect("read").is_empty(), "{kind}");
    }
}

#[tokio::test]
async fn remove_orphans_strategy_from_flag_and_config() {
    let home = tempfile::tempdir().expect("home");
    write_config(
        home.path(),
        "http://127.0.0.1:9",
        "session: { integrity_strategy: \"remove_orphans\" },",
    );
    let mut t = T::new("mixed", Form::Transcript);
    t.user("hi");
    t.calls(&["c1", "c2"]);
    t.result("c1");
    t.result("c9");
    t.user("next");
    let paths = install(home.path(), &[("mixed".into(), t.bytes())]);
    // Config says remove_orphans: the orphan goes, the missing result stays.
    let out = ferroclaw(home.path(), &["sessions", "scan", "--repair"]).await;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    assert!(text.contains("removed_orphans"), "{text}");
    let left: Vec<String> = validate_file(&paths[0])
        .expect("read")
        .iter()
        .map(|i| i.kind.to_string())
        .collect();
    assert_eq!(left, ["missing_tool_result"]);
    let out = ferroclaw(home.path(), &["sessions", "scan"]).await;
    assert_eq!(
        out.status.code(),
        Some(1),
        "report-only scan still sees the leftover"
    );
    // The flag overrides the config.
    let out = ferroclaw(
        home.path(),
        &["sessions", "scan", "--repair", "--strategy", "full"],
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(validate_file(&paths[0]).expect("read").is_empty());
    let out = ferroclaw(home.path(), &["sessions", "scan", "--strategy", "bogus"]).await;
    assert_eq!(
        out.status.code(),
        Some(2),
        "clap rejects an unknown strategy"
    );
}

#[tokio::test]
async fn import_registers_sessions_and_reports_failures() {
    let llm = ScriptedLlm::start().await.expect("llm");
    let home = tempfile::tempdir().expect("home");
    write_config(home.path(), &llm.openai_base_url(), "");
    let src = tempfile::tempdir().expect("src");
    let nested = src.path().join("--work-project--");
    std::fs::create_dir_all(&nested).expect("mkdir");
    let mut t = T::new("pi-abc", Form::Transcript);
    t.user("imported question");
    t.calls(&["c1"]);
    t.result("c1");
    t.answer("imported answer");
    t.calls(&["c2"]); // interrupted run in the source
    std::fs::write(nested.join("2026-01-01_pi-abc.jsonl"), t.bytes()).expect("write");
    std::fs::write(src.path().join("broken.jsonl"), b"\x00\x01garbage\n").expect("write");

    let out = ferroclaw(
        home.path(),
        &["sessions", "import", &src.path().to_string_lossy()],
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "a failed file makes the import exit 1"
    );
    assert!(
        stdout.contains("1 imported") && stdout.contains("1 failed"),
        "{stdout}"
    );
    assert!(
        stderr.contains("broken.jsonl"),
        "failures are named: {stderr}"
    );

    let out = ferroclaw(home.path(), &["sessions", "list"]).await;
    assert!(String::from_utf8_lossy(&out.stdout).contains("pi-abc"));

    llm.push(Reply::text("continuing"));
    let out = ferroclaw(
        home.path(),
        &["agent", "chat", "-m", "go on", "--session", "pi-abc"],
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let req = llm.requests().pop().expect("request");
    let messages = req.body["messages"].as_array().expect("messages");
    assert!(validate_api_messages(messages).is_empty());
    assert!(
        messages.iter().any(|m| m["content"] == "imported question"),
        "{messages:?}"
    );
}
