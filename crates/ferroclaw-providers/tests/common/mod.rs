//! Helpers shared by the integration tests: providers pointed at a scripted server,
//! a delta collector and small request builders.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferroclaw_providers::{
    Anthropic, AnthropicConfig, ChatRequest, DeltaSink, OpenAiCompat, OpenAiCompatConfig,
    StreamDelta,
};
use ferroclaw_testkit::ScriptedLlm;
use ferroclaw_types::{Message, ToolDefinition};
use serde_json::json;

pub async fn server() -> ScriptedLlm {
    ScriptedLlm::start().await.expect("start scripted LLM")
}

pub fn openai_cfg(llm: &ScriptedLlm) -> OpenAiCompatConfig {
    let mut cfg = OpenAiCompatConfig::new("openai", llm.openai_base_url());
    cfg.api_key = Some("sk-test".into());
    cfg.headers = vec![("x-extra".into(), "1".into())];
    cfg.request_timeout = Duration::from_secs(20);
    cfg.idle_timeout = Duration::from_secs(20);
    cfg
}

pub fn openai(llm: &ScriptedLlm) -> Arc<OpenAiCompat> {
    Arc::new(OpenAiCompat::new(openai_cfg(llm)).expect("provider"))
}

pub fn anthropic(llm: &ScriptedLlm) -> Arc<Anthropic> {
    let mut cfg = AnthropicConfig::new("anthropic", llm.anthropic_base_url());
    cfg.api_key = Some("ak-test".into());
    cfg.request_timeout = Duration::from_secs(20);
    cfg.idle_timeout = Duration::from_secs(20);
    Arc::new(Anthropic::new(cfg).expect("provider"))
}

pub fn request(model: &str, stream: bool) -> ChatRequest {
    ChatRequest {
        model: model.into(),
        system: Some("You are terse.".into()),
        messages: vec![Message::user("hello")],
        tools: vec![ToolDefinition {
            name: "exec".into(),
            description: "Run a command".into(),
            parameters: json!({
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"]
            }),
        }],
        max_tokens: None,
        temperature: None,
        stream,
        extra_body: Default::default(),
        max_reply_bytes: None,
        thinking_budget: None,
    }
}

/// Records every delta in arrival order.
#[derive(Default)]
pub struct Collect(pub Mutex<Vec<StreamDelta>>);

impl DeltaSink for Collect {
    fn delta(&self, d: StreamDelta) {
        self.0.lock().expect("lock").push(d);
    }
}

impl Collect {
    pub fn all(&self) -> Vec<StreamDelta> {
        self.0.lock().expect("lock").clone()
    }

    pub fn text(&self) -> String {
        self.all()
            .into_iter()
            .filter_map(|d| match d {
                StreamDelta::Text(t) => Some(t),
                _ => None,
            })
            .collect()
    }

    pub fn reasoning(&self) -> String {
        self.all()
            .into_iter()
            .filter_map(|d| match d {
                StreamDelta::Reasoning(t) => Some(t),
                _ => None,
            })
            .collect()
    }

    pub fn text_pieces(&self) -> usize {
        self.all()
            .iter()
            .filter(|d| matches!(d, StreamDelta::Text(_)))
            .count()
    }

    pub fn tool_starts(&self) -> Vec<(usize, String, String)> {
        self.all()
            .into_iter()
            .filter_map(|d| match d {
                StreamDelta::ToolCallStart { index, id, name } => Some((index, id, name)),
                _ => None,
            })
            .collect()
    }
}
