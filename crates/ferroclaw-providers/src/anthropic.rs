//! Anthropic Messages API (`POST {base}/v1/messages`).
//!
//! Transcript → wire rules the API enforces:
//! - roles must alternate, so consecutive messages of one role are merged (this also
//!   gathers consecutive tool results into one `user` message of `tool_result` blocks);
//! - thinking blocks are sent back only with their signature (unsigned ones are
//!   rejected), and empty text blocks are dropped (also rejected);
//! - `tool_use.input` must be an object: arguments we kept as a raw string (invalid JSON
//!   from the model) travel as `{"_raw": "..."}`.

use std::future::Future;
use std::time::Duration;

use ferroclaw_types::{ContentBlock, Message, StopReason, Usage};
use reqwest::header::{HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::http_error::{looks_like_overflow, truncate};
use crate::openai_compat::{parse_arguments, tool_parameters};
use crate::schema::SchemaFlavor;
use crate::shell::{Endpoint, HttpShell, KeyHeader, StreamCtx, Wire, WireTurn};
use crate::usage::normalize_usage;
use crate::{ChatRequest, ChatResponse, ErrorKind, ProviderError, StreamDelta};

const API_VERSION: &str = "2023-06-01";

/// Settings for one Anthropic endpoint.
#[derive(Debug, Clone)]
pub struct AnthropicConfig {
    pub name: String,
    /// Without the `/v1` segment, e.g. `https://api.anthropic.com`.
    pub base_url: String,
    /// Sent as `x-api-key`.
    pub api_key: Option<String>,
    /// Extra headers (e.g. `anthropic-beta`).
    pub headers: Vec<(String, String)>,
    /// Whole non-streamed request; for a stream, the wait for the response headers.
    pub request_timeout: Duration,
    /// Longest gap allowed between two stream events.
    pub idle_timeout: Duration,
    /// `max_tokens` is mandatory on this API; used when the request sets none.
    pub default_max_tokens: u32,
}

impl AnthropicConfig {
    /// A config with the usual time-outs (5 min request, 2 min idle), 4096 max tokens.
    pub fn new(name: impl Into<String>, base_url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            base_url: base_url.into(),
            api_key: None,
            headers: Vec::new(),
            request_timeout: Duration::from_secs(300),
            idle_timeout: Duration::from_secs(120),
            default_max_tokens: 4096,
        }
    }
}

/// A provider speaking the Anthropic Messages API.
pub struct Anthropic {
    default_max_tokens: u32,
    shell: HttpShell,
}

impl Anthropic {
    pub fn new(cfg: AnthropicConfig) -> Result<Self, ProviderError> {
        let base = cfg.base_url.trim_end_matches('/');
        let shell = HttpShell::new(Endpoint {
            name: &cfg.name,
            chat_url: format!("{base}/v1/messages"),
            models_url: format!("{base}/v1/models?limit=1000"),
            headers: &cfg.headers,
            api_key: cfg.api_key.as_deref(),
            key_header: KeyHeader::Named(HeaderName::from_static("x-api-key")),
            request_timeout: cfg.request_timeout,
            idle_timeout: cfg.idle_timeout,
        })?
        .with_header(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        Ok(Self {
            default_max_tokens: cfg.default_max_tokens,
            shell,
        })
    }
}

impl Wire for Anthropic {
    type Turn = Turn;

    fn shell(&self) -> &HttpShell {
        &self.shell
    }

    fn body(&self, req: &ChatRequest) -> Value {
        build_body(req, self.default_max_tokens)
    }

    fn parse_response(v: &Value) -> Result<Turn, ProviderError> {
        parse_response(v)
    }

    fn read_stream(
        s: StreamCtx<'_>,
    ) -> impl Future<Output = Result<Turn, ProviderError>> + Send + '_ {
        read_stream(s)
    }
}

// ---------------------------------------------------------------------------------
// Request

pub(crate) fn build_body(req: &ChatRequest, default_max_tokens: u32) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::String(req.model.clone()));
    let budget = req.thinking_budget.filter(|b| *b >= 1024);
    let mut max_tokens = req.max_tokens.unwrap_or(default_max_tokens);
    if let Some(b) = budget {
        // The budget is spent out of `max_tokens`, which must leave room for an answer.
        if max_tokens <= b {
            max_tokens = b.saturating_add(default_max_tokens);
        }
        body.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": b}),
        );
    }
    body.insert("max_tokens".into(), max_tokens.into());
    if let Some(system) = req.system.as_deref().filter(|s| !s.is_empty()) {
        body.insert("system".into(), Value::String(system.to_owned()));
    }
    body.insert(
        "messages".into(),
        Value::Array(wire_messages(&req.messages)),
    );
    if !req.tools.is_empty() {
        let tools = req
            .tools
            .iter()
            .map(|t| {
                let mut schema = tool_parameters(&t.parameters, SchemaFlavor::Anthropic);
                // `input_schema` must declare an object at the top.
                if let Value::Object(m) = &mut schema {
                    m.entry("type").or_insert_with(|| "object".into());
                }
                json!({"name": t.name, "description": t.description, "input_schema": schema})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    // Extended thinking takes no temperature other than the default.
    if let (Some(t), None) = (req.temperature, budget) {
        body.insert("temperature".into(), json!(t));
    }
    if req.stream {
        body.insert("stream".into(), Value::Bool(true));
    }
    crate::merge_extra_body(&mut body, &req.extra_body);
    Value::Object(body)
}

fn wire_messages(messages: &[Message]) -> Vec<Value> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::with_capacity(messages.len());
    for m in messages {
        let (role, blocks) = match m {
            Message::User(u) => ("user", u.content.iter().filter_map(user_block).collect()),
            Message::Assistant(a) => (
                "assistant",
                a.content.iter().filter_map(assistant_block).collect(),
            ),
            Message::ToolResult(r) => {
                let has_image = r
                    .content
                    .iter()
                    .any(|b| matches!(b, ContentBlock::Image { .. }));
                let content = if has_image {
                    Value::Array(r.content.iter().filter_map(user_block).collect())
                } else {
                    Value::String(r.text())
                };
                let block = json!({
                    "type": "tool_result",
                    "tool_use_id": r.tool_call_id,
                    "content": content,
                    "is_error": r.is_error,
                });
                ("user", vec![block])
            }
        };
        // A message left empty (e.g. only unsigned thinking) would be rejected.
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((last_role, last)) if *last_role == role => last.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    out.into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

fn user_block(b: &ContentBlock) -> Option<Value> {
    match b {
        ContentBlock::Text { text } if !text.is_empty() => {
            Some(json!({"type": "text", "text": text}))
        }
        ContentBlock::Image { data, mime_type } => Some(json!({
            "type": "image",
            "source": {"type": "base64", "media_type": mime_type, "data": data},
        })),
        _ => None,
    }
}

fn assistant_block(b: &ContentBlock) -> Option<Value> {
    match b {
        ContentBlock::Text { text } if !text.is_empty() => {
            Some(json!({"type": "text", "text": text}))
        }
        ContentBlock::Thinking {
            thinking,
            thinking_signature: Some(sig),
        } if !sig.is_empty() => Some(json!({
            "type": "thinking", "thinking": thinking, "signature": sig,
        })),
        ContentBlock::RedactedThinking { data } if !data.is_empty() => {
            Some(json!({"type": "redacted_thinking", "data": data}))
        }
        ContentBlock::ToolCall {
            id,
            name,
            arguments,
        } => {
            let input = match arguments {
                Value::Object(_) => arguments.clone(),
                Value::Null => json!({}),
                other => json!({ "_raw": other }),
            };
            Some(json!({"type": "tool_use", "id": id, "name": name, "input": input}))
        }
        _ => None,
    }
}

// ---------------------------------------------------------------------------------
// Response

enum Block {
    Text(String),
    Thinking {
        text: String,
        signature: String,
    },
    Tool {
        id: String,
        name: String,
        /// Concatenated `input_json_delta` fragments.
        json: String,
        /// `input` from the block start (used when no fragments follow).
        initial: Value,
    },
    /// `redacted_thinking`: opaque, echoed back as it came.
    Redacted(String),
    /// Block types we do not model (server tools, ...).
    Other,
}

impl Block {
    /// What counts against the reply cap.
    fn size(&self) -> usize {
        match self {
            Block::Text(t) => t.len(),
            Block::Thinking { text, signature } => text.len() + signature.len(),
            Block::Tool {
                name,
                json,
                initial,
                ..
            } => {
                let initial = match initial {
                    Value::Null => 0,
                    v => v.to_string().len(),
                };
                name.len() + json.len() + initial
            }
            Block::Redacted(data) => data.len(),
            Block::Other => 0,
        }
    }
}

#[derive(Default)]
pub(crate) struct Turn {
    /// Keyed by the wire `index`, in arrival order.
    blocks: Vec<(u64, Block)>,
    stop_reason: Option<String>,
    /// Usage fields merged across `message_start` and `message_delta`: later counts
    /// replace earlier ones field by field.
    usage: Map<String, Value>,
}

impl Turn {
    fn block_mut(&mut self, index: u64) -> Option<&mut Block> {
        self.blocks
            .iter_mut()
            .rev()
            .find(|(i, _)| *i == index)
            .map(|(_, b)| b)
    }
}

impl WireTurn for Turn {
    fn size(&self) -> usize {
        self.blocks.iter().map(|(_, b)| b.size()).sum()
    }

    fn into_response(self, provider: &str, model: &str) -> ChatResponse {
        let mut content = Vec::with_capacity(self.blocks.len());
        let mut has_calls = false;
        for (_, b) in self.blocks {
            match b {
                Block::Text(text) if !text.is_empty() => content.push(ContentBlock::Text { text }),
                Block::Thinking { text, signature } => content.push(ContentBlock::Thinking {
                    thinking: text,
                    thinking_signature: (!signature.is_empty()).then_some(signature),
                }),
                Block::Redacted(data) if !data.is_empty() => {
                    content.push(ContentBlock::RedactedThinking { data })
                }
                Block::Tool {
                    id,
                    name,
                    json,
                    initial,
                } => {
                    has_calls = true;
                    let arguments = if json.trim().is_empty() {
                        match initial {
                            Value::Null => json!({}),
                            v => v,
                        }
                    } else {
                        parse_arguments(&json)
                    };
                    content.push(ContentBlock::ToolCall {
                        id,
                        name,
                        arguments,
                    });
                }
                _ => {}
            }
        }
        let usage = if self.usage.is_empty() {
            Usage::default()
        } else {
            normalize_usage(&Value::Object(self.usage))
        };
        let stop_reason = match self.stop_reason.as_deref() {
            Some("tool_use") => StopReason::ToolUse,
            Some("max_tokens" | "model_context_window_exceeded") => StopReason::Length,
            Some("refusal") => StopReason::Error,
            _ if has_calls => StopReason::ToolUse,
            _ => StopReason::Stop,
        };
        ChatResponse {
            content,
            usage,
            stop_reason,
            provider: provider.to_owned(),
            model: model.to_owned(),
        }
    }
}

fn merge_usage(into: &mut Map<String, Value>, usage: &Value) {
    if let Value::Object(m) = usage {
        for (k, v) in m {
            if !v.is_null() {
                into.insert(k.clone(), v.clone());
            }
        }
    }
}

fn start_block(content_block: &Value) -> Block {
    let s = |k: &str| {
        content_block
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    match content_block.get("type").and_then(Value::as_str) {
        Some("text") => Block::Text(s("text")),
        Some("thinking") => Block::Thinking {
            text: s("thinking"),
            signature: s("signature"),
        },
        Some("redacted_thinking") => Block::Redacted(s("data")),
        Some("tool_use") => Block::Tool {
            id: s("id"),
            name: s("name"),
            json: String::new(),
            initial: content_block.get("input").cloned().unwrap_or(Value::Null),
        },
        _ => Block::Other,
    }
}

/// An `error` event or error body: `{"type": "overloaded_error", "message": ".."}`.
fn api_error(err: &Value) -> ProviderError {
    let kind_name = err.get("type").and_then(Value::as_str).unwrap_or("error");
    let message = err
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or(kind_name);
    let (kind, status) = match kind_name {
        "overloaded_error" => (ErrorKind::Server, 529),
        "api_error" => (ErrorKind::Server, 500),
        "rate_limit_error" => (ErrorKind::RateLimited, 429),
        "authentication_error" => (ErrorKind::Auth, 401),
        "permission_error" => (ErrorKind::Auth, 403),
        "not_found_error" => (ErrorKind::NotFound, 404),
        "request_too_large" => (ErrorKind::ContextOverflow, 413),
        "timeout_error" => (ErrorKind::Timeout, 504),
        "invalid_request_error" if looks_like_overflow(message) => {
            (ErrorKind::ContextOverflow, 400)
        }
        "invalid_request_error" => (ErrorKind::BadRequest, 400),
        _ => (ErrorKind::Server, 500),
    };
    let mut e = ProviderError::new(kind, format!("{kind_name}: {}", truncate(message)));
    e.status = Some(status);
    e
}

fn parse_response(v: &Value) -> Result<Turn, ProviderError> {
    if v.get("type").and_then(Value::as_str) == Some("error") {
        return Err(api_error(v.get("error").unwrap_or(&Value::Null)));
    }
    let blocks = v.get("content").and_then(Value::as_array).ok_or_else(|| {
        ProviderError::new(
            ErrorKind::Malformed,
            format!("response has no content: {}", truncate(&v.to_string())),
        )
    })?;
    let mut turn = Turn {
        stop_reason: v
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(str::to_owned),
        ..Turn::default()
    };
    if let Some(u) = v.get("usage") {
        merge_usage(&mut turn.usage, u);
    }
    for (i, b) in blocks.iter().enumerate() {
        turn.blocks.push((i as u64, start_block(b)));
    }
    Ok(turn)
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StreamEvent {
    MessageStart {
        message: Value,
    },
    ContentBlockStart {
        index: u64,
        content_block: Value,
    },
    ContentBlockDelta {
        index: u64,
        delta: BlockDelta,
    },
    ContentBlockStop {},
    MessageDelta {
        #[serde(default)]
        delta: Value,
        #[serde(default)]
        usage: Value,
    },
    MessageStop {},
    Error {
        #[serde(default)]
        error: Value,
    },
    /// `ping` and event types added after this code was written.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    #[serde(other)]
    Other,
}

async fn read_stream(s: StreamCtx<'_>) -> Result<Turn, ProviderError> {
    let StreamCtx {
        reader,
        sink,
        cancel,
        emitted,
        budget,
    } = s;
    let mut turn = Turn::default();
    // Position of each tool call among the turn's calls, for `ToolCallStart`.
    let mut tool_ordinal = 0usize;
    loop {
        let Some(ev) = reader.next(cancel).await? else {
            return Err(reader.ended_early());
        };
        let data = ev.data.trim();
        if data.is_empty() {
            continue;
        }
        let event: StreamEvent = reader.parse(data)?;
        match event {
            StreamEvent::MessageStart { message } => {
                if let Some(u) = message.get("usage") {
                    merge_usage(&mut turn.usage, u);
                }
            }
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                let block = start_block(&content_block);
                budget.take(block.size())?;
                match &block {
                    Block::Tool { id, name, .. } => {
                        *emitted = true;
                        sink.delta(StreamDelta::ToolCallStart {
                            index: tool_ordinal,
                            id: id.clone(),
                            name: name.clone(),
                        });
                        tool_ordinal += 1;
                    }
                    Block::Text(t) if !t.is_empty() => {
                        *emitted = true;
                        sink.delta(StreamDelta::Text(t.clone()));
                    }
                    _ => {}
                }
                turn.blocks.push((index, block));
            }
            StreamEvent::ContentBlockDelta { index, delta } => {
                let Some(block) = turn.block_mut(index) else {
                    return Err(ProviderError::new(
                        ErrorKind::BrokenStream,
                        format!("delta for unknown content block {index}"),
                    ));
                };
                match (block, delta) {
                    (Block::Text(acc), BlockDelta::TextDelta { text }) => {
                        budget.take(text.len())?;
                        acc.push_str(&text);
                        *emitted = true;
                        sink.delta(StreamDelta::Text(text));
                    }
                    (Block::Thinking { text: acc, .. }, BlockDelta::ThinkingDelta { thinking }) => {
                        budget.take(thinking.len())?;
                        acc.push_str(&thinking);
                        *emitted = true;
                        sink.delta(StreamDelta::Reasoning(thinking));
                    }
                    (
                        Block::Thinking { signature, .. },
                        BlockDelta::SignatureDelta { signature: s },
                    ) => {
                        budget.take(s.len())?;
                        signature.push_str(&s);
                    }
                    (Block::Tool { json, .. }, BlockDelta::InputJsonDelta { partial_json }) => {
                        budget.take(partial_json.len())?;
                        json.push_str(&partial_json);
                        if !partial_json.is_empty() {
                            sink.delta(StreamDelta::ToolCallArguments {
                                bytes: partial_json.len(),
                            });
                        }
                    }
                    // Deltas for blocks we do not model, or new delta kinds.
                    _ => {}
                }
            }
            StreamEvent::ContentBlockStop {} | StreamEvent::Other => {}
            StreamEvent::MessageDelta { delta, usage } => {
                if let Some(r) = delta.get("stop_reason").and_then(Value::as_str) {
                    turn.stop_reason = Some(r.to_owned());
                }
                merge_usage(&mut turn.usage, &usage);
            }
            StreamEvent::MessageStop {} => return Ok(turn),
            StreamEvent::Error { error } => return Err(api_error(&error)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferroclaw_types::{AssistantMessage, ToolDefinition};

    fn assistant(content: Vec<ContentBlock>) -> Message {
        Message::Assistant(AssistantMessage {
            content,
            provider: String::new(),
            model: String::new(),
            usage: Usage::default(),
            stop_reason: StopReason::ToolUse,
            error_message: None,
            timestamp: 0,
        })
    }

    #[test]
    fn a_thinking_budget_turns_extended_thinking_on_with_room_for_the_answer() {
        let req = |budget: Option<u32>, max: Option<u32>| ChatRequest {
            model: "claude".into(),
            messages: vec![Message::user("q")],
            max_tokens: max,
            temperature: Some(0.2),
            thinking_budget: budget,
            ..Default::default()
        };
        let body = build_body(&req(Some(4000), Some(2000)), 1024);
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": 4000})
        );
        assert_eq!(
            body["max_tokens"], 5024,
            "the budget plus room for the answer"
        );
        assert!(body.get("temperature").is_none());
        let body = build_body(&req(Some(4000), Some(16000)), 1024);
        assert_eq!(body["max_tokens"], 16000);
        let body = build_body(&req(None, None), 1024);
        assert!(body.get("thinking").is_none());
        assert_eq!(body["temperature"], json!(0.2f32));
    }

    #[test]
    fn redacted_thinking_is_kept_and_sent_back_as_it_came() {
        let turn = parse_response(&json!({
            "type": "message",
            "content": [
                {"type": "thinking", "thinking": "plain", "signature": "sig"},
                {"type": "redacted_thinking", "data": "EncryptedBlob=="},
                {"type": "text", "text": "answer"},
            ],
            "stop_reason": "end_turn",
        }))
        .unwrap();
        let resp = turn.into_response("anthropic", "claude");
        assert!(resp.content.contains(&ContentBlock::RedactedThinking {
            data: "EncryptedBlob==".into()
        }));
        let req = ChatRequest {
            model: "claude".into(),
            messages: vec![
                Message::user("q"),
                Message::Assistant(AssistantMessage {
                    content: resp.content,
                    provider: "anthropic".into(),
                    model: "claude".into(),
                    usage: Usage::default(),
                    stop_reason: StopReason::Stop,
                    error_message: None,
                    timestamp: 0,
                }),
                Message::user("more"),
            ],
            ..Default::default()
        };
        let body = build_body(&req, 1024);
        let blocks = &body["messages"][1]["content"];
        assert_eq!(
            blocks[1],
            json!({"type": "redacted_thinking", "data": "EncryptedBlob=="}),
            "{blocks}"
        );
        assert_eq!(blocks[0]["type"], "thinking");
    }

    #[test]
    fn merges_tool_results_and_drops_unsigned_thinking() {
        let req = ChatRequest {
            model: "claude".into(),
            system: Some("sys".into()),
            messages: vec![
                Message::user("go"),
                assistant(vec![
                    ContentBlock::Thinking {
                        thinking: "unsigned".into(),
                        thinking_signature: None,
                    },
                    ContentBlock::Thinking {
                        thinking: "signed".into(),
                        thinking_signature: Some("sig".into()),
                    },
                    ContentBlock::ToolCall {
                        id: "t1".into(),
                        name: "a".into(),
                        arguments: json!({"x": 1}),
                    },
                    ContentBlock::ToolCall {
                        id: "t2".into(),
                        name: "b".into(),
                        arguments: json!("{broken"),
                    },
                ]),
                Message::tool_result("t1", "a", "one", false),
                Message::tool_result("t2", "b", "bad args", true),
                Message::user("and?"),
            ],
            tools: vec![ToolDefinition {
                name: "a".into(),
                description: "d".into(),
                parameters: json!({"properties": {}}),
            }],
            ..ChatRequest::default()
        };
        let b = build_body(&req, 4096);
        assert_eq!(b["system"], "sys");
        assert_eq!(b["max_tokens"], 4096);
        assert_eq!(b["tools"][0]["input_schema"]["type"], "object");
        let m = b["messages"].as_array().expect("messages");
        assert_eq!(m.len(), 3);
        let a = m[1]["content"].as_array().expect("assistant blocks");
        assert_eq!(a.len(), 3);
        assert_eq!(a[0]["signature"], "sig");
        assert_eq!(a[2]["input"], json!({"_raw": "{broken"}));
        let u = m[2]["content"].as_array().expect("user blocks");
        assert_eq!(u.len(), 3);
        assert_eq!(u[0]["type"], "tool_result");
        assert_eq!(u[1]["is_error"], true);
        assert_eq!(u[2], json!({"type": "text", "text": "and?"}));
    }

    #[test]
    fn error_types_map_to_kinds() {
        let e = api_error(&json!({"type": "overloaded_error", "message": "Overloaded"}));
        assert_eq!((e.kind, e.status), (ErrorKind::Server, Some(529)));
        let e = api_error(
            &json!({"type": "invalid_request_error", "message": "prompt is too long: 300000 tokens"}),
        );
        assert_eq!(e.kind, ErrorKind::ContextOverflow);
    }
}
