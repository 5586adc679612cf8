//! Shared harness: a temp home, a config file pointing at the scripted LLM, and an
//! event collector.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use ferroclaw_agent::{Agent, EventSink, RunError, RunOptions, RunOutput, RunRequest};
use ferroclaw_config::{Env, LoadOptions, LoadedConfig};
use ferroclaw_runtime::bootstrap;
use ferroclaw_store::{FileSessionStore, SessionStore};
use ferroclaw_testkit::{Protocol, ScriptedLlm};
use ferroclaw_types::{EventKind, RunEvent};
use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

pub const PROTOCOLS: [Protocol; 2] = [Protocol::OpenAi, Protocol::Anthropic];

pub struct Harness {
    pub llm: ScriptedLlm,
    pub home: tempfile::TempDir,
    pub loaded: LoadedConfig,
    pub store: Arc<dyn SessionStore>,
}

pub struct Options {
    pub fallbacks: &'static [&'static str],
    pub max_iterations: u32,
    pub timeout_seconds: u64,
    pub stream: bool,
    /// Extra JSON5 keys for `agents.defaults`, e.g. `context_window: 8000,`.
    pub defaults_extra: &'static str,
    /// Extra top-level JSON5 keys, e.g. `tools: { deny: ["exec"] },`.
    pub config_extra: &'static str,
    /// Extra JSON5 keys for the scripted provider, e.g. `tool_mode: "intent",`.
    pub provider_extra: &'static str,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            fallbacks: &[],
            max_iterations: 6,
            timeout_seconds: 60,
            stream: true,
            defaults_extra: "",
            config_extra: "",
            provider_extra: "",
        }
    }
}

impl Harness {
    pub async fn new(protocol: Protocol, opts: Options) -> Harness {
        let llm = ScriptedLlm::start().await.expect("scripted llm");
        let home = tempfile::tempdir().expect("tempdir");
        let (kind, base) = match protocol {
            Protocol::OpenAi => ("openai_compat", llm.openai_base_url()),
            Protocol::Anthropic => ("anthropic", llm.anthropic_base_url()),
        };
        let fallbacks: Vec<String> = opts.fallbacks.iter().map(|f| format!("\"{f}\"")).collect();
        let config = format!(
            r#"{{
  // written by the test harness
  agents: {{ defaults: {{ provider: "scripted", model: "model-a", fallbacks: [{}],
    max_iterations: {}, timeout_seconds: {}, stream: {}, {} }} }},
  providers: {{ scripted: {{ type: "{kind}", base_url: "{base}", {} }} }},
  {}
}}"#,
            fallbacks.join(", "),
            opts.max_iterations,
            opts.timeout_seconds,
            opts.stream,
            opts.defaults_extra,
            opts.provider_extra,
            opts.config_extra
        );
        std::fs::write(home.path().join("config.json5"), config).expect("write config");
        let env = Env::from_pairs([("FERROCLAW_SCRIPTED_API_KEY", "test-key-123")]);
        let loaded = ferroclaw_config::load(
            &LoadOptions {
                home: Some(home.path().to_path_buf()),
                config_path: None,
            },
            env,
        )
        .expect("config loads");
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings.len());
        let store: Arc<dyn SessionStore> = Arc::new(FileSessionStore::new(home.path()));
        Harness {
            llm,
            home,
            loaded,
            store,
        }
    }

    pub fn agent(&self) -> Agent {
        bootstrap::build_agent(&self.loaded.settings(), "main", self.store.clone()).expect("agent")
    }

    /// The main agent's resolved settings.
    pub fn main_settings(&self) -> ferroclaw_config::settings::AgentSettings {
        self.loaded.agent_settings("main").expect("agent")
    }

    /// A fresh store and agent over the same home: what a process restart sees.
    pub fn restarted_agent(&self) -> Agent {
        let store: Arc<dyn SessionStore> = Arc::new(FileSessionStore::new(self.home.path()));
        bootstrap::build_agent(&self.loaded.settings(), "main", store).expect("agent")
    }

    pub fn workspace(&self) -> std::path::PathBuf {
        self.agent().settings().workspace.clone()
    }

    pub fn transcript_path(&self, session_id: &str) -> std::path::PathBuf {
        self.home
            .path()
            .join("agents/main/sessions")
            .join(format!("{session_id}.jsonl"))
    }
}

/// Collects events and lets a test wait for the first event of a kind.
#[derive(Default)]
pub struct Collector {
    pub events: Mutex<Vec<RunEvent>>,
    pub notify: Notify,
}

impl Collector {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn all(&self) -> Vec<RunEvent> {
        self.events.lock().expect("lock").clone()
    }

    pub async fn wait_for(&self, pred: impl Fn(&EventKind) -> bool) {
        loop {
            let notified = self.notify.notified();
            if self.all().iter().any(|e| pred(&e.kind)) {
                return;
            }
            notified.await;
        }
    }
}

impl EventSink for Collector {
    fn emit(&self, event: RunEvent) {
        self.events.lock().expect("lock").push(event);
        self.notify.notify_waiters();
    }
}

pub async fn run(
    agent: &Agent,
    session: &str,
    message: &str,
) -> (Result<RunOutput, RunError>, Arc<Collector>) {
    run_with(agent, session, message, RunOptions::default()).await
}

/// [`run`] with per-run options.
pub async fn run_with(
    agent: &Agent,
    session: &str,
    message: &str,
    options: RunOptions,
) -> (Result<RunOutput, RunError>, Arc<Collector>) {
    let c = Collector::new();
    let res = agent
        .run(
            RunRequest {
                session_key: session.into(),
                message: message.into(),
                options,
            },
            c.clone(),
            CancellationToken::new(),
        )
        .await;
    (res, c)
}

/// Every line of a transcript parsed as JSON, header first.
pub fn transcript_lines(path: &std::path::Path) -> Vec<Value> {
    let raw = std::fs::read_to_string(path).expect("read transcript");
    assert!(
        raw.ends_with('\n'),
        "transcript must end with a complete line"
    );
    raw.lines()
        .map(|l| serde_json::from_str(l).expect("every line is JSON"))
        .collect()
}

/// Checks the transcript shape (OpenClaw/pi version 3): header, then entries chained by parentId.
pub fn assert_transcript_format(lines: &[Value]) {
    let header = &lines[0];
    assert_eq!(header["type"], "session");
    assert_eq!(header["version"], 3);
    assert!(header["id"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(header["timestamp"].is_string());
    let mut prev: Option<String> = None;
    for e in &lines[1..] {
        let id = e["id"].as_str().expect("id");
        assert_eq!(id.len(), 8, "entry ids are 8 hex chars: {id}");
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
        assert!(e["timestamp"].is_string());
        match &prev {
            None => assert!(e["parentId"].is_null(), "first entry has parentId null"),
            Some(p) => assert_eq!(e["parentId"].as_str(), Some(p.as_str())),
        }
        if e["type"] == "message" {
            let role = e["message"]["role"].as_str().expect("role");
            assert!(["user", "assistant", "toolResult"].contains(&role));
        }
        prev = Some(id.to_string());
    }
}

/// Messages (roles and the tool pairing) of the request the scripted LLM received,
/// normalised across both wire formats: ("user"|"assistant"|"tool", text, call ids).
pub fn request_shape(protocol: Protocol, body: &Value) -> Vec<(String, String, Vec<String>)> {
    let mut out = Vec::new();
    let msgs = body["messages"].as_array().expect("messages");
    for m in msgs {
        let role = m["role"].as_str().unwrap_or_default();
        match protocol {
            Protocol::OpenAi => {
                if role == "system" {
                    continue;
                }
                let text = m["content"].as_str().unwrap_or_default().to_string();
                let ids: Vec<String> = match role {
                    "assistant" => m["tool_calls"]
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .map(|c| c["id"].as_str().unwrap_or_default().to_string())
                                .collect()
                        })
                        .unwrap_or_default(),
                    "tool" => vec![m["tool_call_id"].as_str().unwrap_or_default().to_string()],
                    _ => vec![],
                };
                out.push((role.to_string(), text, ids));
            }
            Protocol::Anthropic => {
                let blocks = match &m["content"] {
                    Value::String(s) => vec![serde_json::json!({"type":"text","text":s})],
                    Value::Array(a) => a.clone(),
                    _ => vec![],
                };
                let results: Vec<&Value> = blocks
                    .iter()
                    .filter(|b| b["type"] == "tool_result")
                    .collect();
                if !results.is_empty() {
                    for r in results {
                        let text = match &r["content"] {
                            Value::String(s) => s.clone(),
                            Value::Array(a) => {
                                a.iter().filter_map(|b| b["text"].as_str()).collect()
                            }
                            _ => String::new(),
                        };
                        out.push((
                            "tool".into(),
                            text,
                            vec![r["tool_use_id"].as_str().unwrap_or_default().to_string()],
                        ));
                    }
                    continue;
                }
                let text: String = blocks
                    .iter()
                    .filter(|b| b["type"] == "text")
                    .filter_map(|b| b["text"].as_str())
                    .collect();
                let ids = blocks
                    .iter()
                    .filter(|b| b["type"] == "tool_use")
                    .map(|b| b["id"].as_str().unwrap_or_default().to_string())
                    .collect();
                out.push((role.to_string(), text, ids));
            }
        }
    }
    out
}
