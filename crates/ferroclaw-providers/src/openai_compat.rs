//! OpenAI-compatible chat completions (`POST {base}/chat/completions`): OpenAI,
//! OpenRouter, Groq, DeepSeek, Mistral, xAI, vLLM, Ollama, LM Studio, ... chosen by
//! base URL.
//!
//! Choices made where servers disagree:
//! - Reasoning is read from `reasoning_content` or `reasoning`; when a server sends
//!   both for the same delta (vLLM during its rename), `reasoning_content` wins so
//!   the text is not doubled. On assistant turns we send it back under both names.
//! - Tool-call arguments that are not valid JSON once reassembled are kept verbatim as
//!   `Value::String(raw)`: the turn is not lost, and the agent loop answers the call
//!   with a tool error the model can correct. Empty arguments mean `{}`.
//! - `max_tokens` (not `max_completion_tokens`): it is the field every compatible
//!   server understands.

use std::future::Future;
use std::time::Duration;

use ferroclaw_types::{ContentBlock, Message, StopReason, Usage};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::http_error::{extract_message, kind_for_status, looks_like_overflow};
use crate::schema::{clean_schema, SchemaFlavor};
use crate::shell::{Endpoint, HttpShell, KeyHeader, StreamCtx, Wire, WireTurn};
use crate::transport::ReplyBudget;
use crate::usage::normalize_usage;
use crate::{ChatRequest, ChatResponse, DeltaSink, ErrorKind, ProviderError, StreamDelta};

/// Settings for one OpenAI-compatible endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiCompatConfig {
    /// Provider name used in errors, logs and cool-downs (e.g. `openai`, `local-vllm`).
    pub name: String,
    /// Up to and including the version segment, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer …` when present (local servers need none).
    pub api_key: Option<String>,
    /// Extra headers (OpenRouter's `HTTP-Referer`, organisation ids, ...).
    pub headers: Vec<(String, String)>,
    /// Whole non-streamed request; for a stream, the wait for the response headers.
    pub request_timeout: Duration,
    /// Longest gap allowed between two stream events.
    pub idle_timeout: Duration,
    pub schema_flavor: SchemaFlavor,
}

impl OpenAiCompatConfig {
    /// A config with the usual time-outs (5 min request, 2 min idle) and no key.
    pub fn new(name: impl Into<String>, base_url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            base_url: base_url.into(),
            api_key: None,
            headers: Vec::new(),
            request_timeout: Duration::from_secs(300),
            idle_timeout: Duration::from_secs(120),
            schema_flavor: SchemaFlavor::OpenAi,
        }
    }
}

/// A provider speaking OpenAI chat completions.
pub struct OpenAiCompat {
    schema_flavor: SchemaFlavor,
    shell: HttpShell,
}

impl OpenAiCompat {
    pub fn new(cfg: OpenAiCompatConfig) -> Result<Self, ProviderError> {
        let base = cfg.base_url.trim_end_matches('/');
        let shell = HttpShell::new(Endpoint {
            name: &cfg.name,
            chat_url: format!("{base}/chat/completions"),
            models_url: format!("{base}/models"),
            headers: &cfg.headers,
            api_key: cfg.api_key.as_deref(),
            key_header: KeyHeader::Bearer,
            request_timeout: cfg.request_timeout,
            idle_timeout: cfg.idle_timeout,
        })?;
        Ok(Self {
            schema_flavor: cfg.schema_flavor,
            shell,
        })
    }
}

impl Wire for OpenAiCompat {
    type Turn = Turn;

    fn shell(&self) -> &HttpShell {
        &self.shell
    }

    fn body(&self, req: &ChatRequest) -> Value {
        build_body(req, self.schema_flavor)
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

pub(crate) fn build_body(req: &ChatRequest, flavor: SchemaFlavor) -> Value {
    let mut messages = Vec::with_capacity(req.messages.len() + 1);
    if let Some(system) = req.system.as_deref().filter(|s| !s.is_empty()) {
        messages.push(json!({"role": "system", "content": system}));
    }
    // A `tool` message carries text only: the images a tool returned follow the last
    // tool message of the turn as a user message of their own (tool messages must stay
    // together, right after the call).
    let mut images: Vec<Value> = Vec::new();
    for m in &req.messages {
        if !matches!(m, Message::ToolResult(_)) && !images.is_empty() {
            messages.push(json!({"role": "user", "content": std::mem::take(&mut images)}));
        }
        messages.push(wire_message(m));
        if let Message::ToolResult(r) = m {
            let mut first = true;
            for b in &r.content {
                if let ContentBlock::Image { data, mime_type } = b {
                    if first {
                        images.push(json!({"type": "text", "text": format!(
                            "Image(s) returned by the tool call {} ({}):", r.tool_call_id, r.tool_name
                        )}));
                        first = false;
                    }
                    images.push(json!({
                        "type": "image_url",
                        "image_url": {"url": format!("data:{mime_type};base64,{data}")},
                    }));
                }
            }
        }
    }
    if !images.is_empty() {
        messages.push(json!({"role": "user", "content": images}));
    }

    let mut body = Map::new();
    body.insert("model".into(), Value::String(req.model.clone()));
    body.insert("messages".into(), Value::Array(messages));
    if !req.tools.is_empty() {
        let tools = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": tool_parameters(&t.parameters, flavor),
                }})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(n) = req.max_tokens {
        body.insert("max_tokens".into(), n.into());
    }
    if let Some(t) = req.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if req.stream {
        body.insert("stream".into(), Value::Bool(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    crate::merge_extra_body(&mut body, &req.extra_body);
    Value::Object(body)
}

/// A tool without parameters still needs an object schema on the wire.
pub(crate) fn tool_parameters(params: &Value, flavor: SchemaFlavor) -> Value {
    match params {
        Value::Null => json!({"type": "object", "properties": {}}),
        p => clean_schema(p, flavor),
    }
}

fn wire_message(m: &Message) -> Value {
    match m {
        Message::User(u) => {
            let has_image = u
                .content
                .iter()
                .any(|b| matches!(b, ContentBlock::Image { .. }));
            if has_image {
                let parts: Vec<Value> = u
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::Text { text } => Some(json!({"type": "text", "text": text})),
                        ContentBlock::Image { data, mime_type } => Some(json!({
                            "type": "image_url",
                            "image_url": {"url": format!("data:{mime_type};base64,{data}")},
                        })),
                        _ => None,
                    })
                    .collect();
                json!({"role": "user", "content": parts})
            } else {
                json!({"role": "user", "content": joined_text(&u.content)})
            }
        }
        Message::Assistant(a) => {
            let mut out = Map::new();
            out.insert("role".into(), "assistant".into());
            let text = joined_text(&a.content);
            let calls: Vec<Value> = a
                .tool_calls()
                .map(|(id, name, args)| {
                    json!({"id": id, "type": "function", "function": {
                        "name": name, "arguments": arguments_string(args),
                    }})
                })
                .collect();
            // OpenAI's canonical form for a pure tool-call turn is `content: null`.
            let content = if text.is_empty() && !calls.is_empty() {
                Value::Null
            } else {
                Value::String(text)
            };
            out.insert("content".into(), content);
            if !calls.is_empty() {
                out.insert("tool_calls".into(), Value::Array(calls));
            }
            let mut reasoning = String::new();
            for b in &a.content {
                if let ContentBlock::Thinking { thinking, .. } = b {
                    reasoning.push_str(thinking);
                }
            }
            if !reasoning.is_empty() {
                // Servers disagree on the name; each ignores the one it does not know.
                out.insert("reasoning_content".into(), Value::String(reasoning.clone()));
                out.insert("reasoning".into(), Value::String(reasoning));
            }
            Value::Object(out)
        }
        Message::ToolResult(r) => {
            let mut text = joined_text(&r.content);
            if r.content
                .iter()
                .any(|b| matches!(b, ContentBlock::Image { .. }))
            {
                text.push_str("\n[the image(s) this call returned follow in a user message]");
            }
            json!({"role": "tool", "tool_call_id": r.tool_call_id, "content": text})
        }
    }
}

fn joined_text(blocks: &[ContentBlock]) -> String {
    let mut out = String::new();
    for b in blocks {
        if let ContentBlock::Text { text } = b {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(text);
        }
    }
    out
}

/// Arguments go on the wire as a JSON string. Unparseable arguments we kept as a raw
/// string are sent back exactly as the model wrote them.
fn arguments_string(args: &Value) -> String {
    match args {
        Value::String(raw) => raw.clone(),
        Value::Null => "{}".to_owned(),
        v => v.to_string(),
    }
}

// ---------------------------------------------------------------------------------
// Response

/// What one turn produced, before it is laid out as content blocks.
#[derive(Default)]
pub(crate) struct Turn {
    text: String,
    reasoning: String,
    calls: Vec<CallSlot>,
    finish: Option<String>,
    usage: Usage,
}

struct CallSlot {
    /// Wire `index`, the reassembly key.
    index: u64,
    id: String,
    name: String,
    args: String,
    announced: bool,
}

impl WireTurn for Turn {
    fn size(&self) -> usize {
        self.text.len()
            + self.reasoning.len()
            + self
                .calls
                .iter()
                .map(|c| c.name.len() + c.args.len())
                .sum::<usize>()
    }

    fn into_response(mut self, provider: &str, model: &str) -> ChatResponse {
        let mut content = Vec::with_capacity(2 + self.calls.len());
        if !self.reasoning.is_empty() {
            content.push(ContentBlock::Thinking {
                thinking: self.reasoning,
                thinking_signature: None,
            });
        }
        if !self.text.is_empty() {
            content.push(ContentBlock::Text { text: self.text });
        }
        // Stable: slots sharing an index keep arrival order.
        self.calls.sort_by_key(|c| c.index);
        let has_calls = !self.calls.is_empty();
        for c in self.calls {
            let id = if c.id.is_empty() {
                // Some local servers omit ids; the transcript needs one to pair results.
                format!("call_{}", fastrand::u64(..))
            } else {
                c.id
            };
            content.push(ContentBlock::ToolCall {
                id,
                name: c.name,
                arguments: parse_arguments(&c.args),
            });
        }
        let stop_reason = if has_calls {
            StopReason::ToolUse
        } else {
            map_finish(self.finish.as_deref())
        };
        ChatResponse {
            content,
            usage: self.usage,
            stop_reason,
            provider: provider.to_owned(),
            model: model.to_owned(),
        }
    }
}

fn map_finish(reason: Option<&str>) -> StopReason {
    match reason {
        Some("length") => StopReason::Length,
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        Some("content_filter") => StopReason::Error,
        _ => StopReason::Stop,
    }
}

pub(crate) fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Map::new());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

/// An `{"error": ...}` object inside a 200 body or a stream chunk (OpenRouter does
/// this when the upstream fails after the headers were sent).
fn embedded_error(err: &Value) -> ProviderError {
    let message = extract_message(&json!({ "error": err }).to_string());
    let status = err
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..600).contains(c));
    let mut kind = status.map_or(ErrorKind::Server, kind_for_status);
    if (kind == ErrorKind::BadRequest || status.is_none()) && looks_like_overflow(&message) {
        kind = ErrorKind::ContextOverflow;
    }
    let mut e = ProviderError::new(kind, format!("upstream error: {message}"));
    e.status = status;
    e
}

fn parse_response(v: &Value) -> Result<Turn, ProviderError> {
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return Err(embedded_error(err));
    }
    let choice = v.get("choices").and_then(|c| c.get(0)).ok_or_else(|| {
        ProviderError::new(
            ErrorKind::Malformed,
            format!(
                "response has no choices: {}",
                crate::http_error::truncate(&v.to_string())
            ),
        )
    })?;
    let msg = choice.get("message").unwrap_or(&Value::Null);
    let mut turn = Turn {
        finish: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_owned),
        usage: v.get("usage").map(normalize_usage).unwrap_or_default(),
        ..Turn::default()
    };
    match msg.get("content") {
        Some(Value::String(s)) => turn.text.push_str(s),
        // Some servers answer with content parts even for plain text.
        Some(Value::Array(parts)) => {
            for p in parts {
                if let Some(t) = p.get("text").and_then(Value::as_str) {
                    turn.text.push_str(t);
                }
            }
        }
        _ => {}
    }
    let reasoning = ["reasoning_content", "reasoning"]
        .iter()
        .filter_map(|k| msg.get(*k).and_then(Value::as_str))
        .find(|s| !s.is_empty());
    if let Some(r) = reasoning {
        turn.reasoning.push_str(r);
    }
    if let Some(calls) = msg.get("tool_calls").and_then(Value::as_array) {
        for (pos, c) in calls.iter().enumerate() {
            let f = c.get("function").unwrap_or(&Value::Null);
            let args = match f.get("arguments") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            turn.calls.push(CallSlot {
                index: c.get("index").and_then(Value::as_u64).unwrap_or(pos as u64),
                id: c
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                name: f
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                args,
                announced: true,
            });
        }
    }
    Ok(turn)
}

// Stream chunks, deserialised into typed structs: only the fields we use are read.

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    delta: Option<ChunkDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChunkDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    /// A string fragment normally; Ollama may send the whole object at once.
    #[serde(default)]
    arguments: Option<Value>,
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
    loop {
        let Some(ev) = reader.next(cancel).await? else {
            if turn.finish.is_some() {
                return Ok(turn);
            }
            return Err(reader.ended_early());
        };
        let data = ev.data.trim();
        if data == "[DONE]" {
            return Ok(turn);
        }
        if data.is_empty() {
            continue;
        }
        let chunk: Chunk = reader.parse(data)?;
        apply_chunk(&mut turn, chunk, sink, emitted, budget)?;
    }
}

fn apply_chunk(
    turn: &mut Turn,
    chunk: Chunk,
    sink: &dyn DeltaSink,
    emitted: &mut bool,
    budget: &mut ReplyBudget,
) -> Result<(), ProviderError> {
    if let Some(err) = chunk.error.filter(|e| !e.is_null()) {
        return Err(embedded_error(&err));
    }
    if let Some(u) = chunk.usage.filter(Value::is_object) {
        turn.usage = normalize_usage(&u);
    }
    for choice in chunk.choices {
        if let Some(f) = choice.finish_reason {
            turn.finish = Some(f);
        }
        let Some(delta) = choice.delta else { continue };
        let reasoning = delta
            .reasoning_content
            .filter(|s| !s.is_empty())
            .or(delta.reasoning.filter(|s| !s.is_empty()));
        if let Some(r) = reasoning {
            budget.take(r.len())?;
            turn.reasoning.push_str(&r);
            *emitted = true;
            sink.delta(StreamDelta::Reasoning(r));
        }
        if let Some(t) = delta.content.filter(|s| !s.is_empty()) {
            budget.take(t.len())?;
            turn.text.push_str(&t);
            *emitted = true;
            sink.delta(StreamDelta::Text(t));
        }
        for (pos, tc) in delta.tool_calls.into_iter().flatten().enumerate() {
            apply_tool_fragment(turn, tc, pos as u64, sink, emitted, budget)?;
        }
    }
    Ok(())
}

fn apply_tool_fragment(
    turn: &mut Turn,
    tc: ToolCallDelta,
    pos: u64,
    sink: &dyn DeltaSink,
    emitted: &mut bool,
    budget: &mut ReplyBudget,
) -> Result<(), ProviderError> {
    let index = tc.index.unwrap_or(pos);
    let id = tc.id.filter(|s| !s.is_empty());
    // The latest slot with this index; a *different* id at the same index means a
    // server that numbers every call 0 (seen with some Gemini/Mistral proxies).
    let found = turn.calls.iter().rposition(|c| c.index == index);
    let slot = match found {
        Some(i)
            if id
                .as_ref()
                .is_none_or(|id| turn.calls[i].id.is_empty() || *id == turn.calls[i].id) =>
        {
            i
        }
        _ => {
            turn.calls.push(CallSlot {
                index,
                id: String::new(),
                name: String::new(),
                args: String::new(),
                announced: false,
            });
            turn.calls.len() - 1
        }
    };
    let ordinal = slot;
    let call = &mut turn.calls[slot];
    if let Some(id) = id {
        call.id = id;
    }
    let mut arg_bytes = 0;
    if let Some(f) = tc.function {
        if let Some(name) = f.name.filter(|n| !n.is_empty()) {
            budget.take(name.len())?;
            // Names arrive whole in practice; appending covers servers that split them.
            call.name.push_str(&name);
        }
        let args = match f.arguments {
            Some(Value::String(s)) => s,
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        budget.take(args.len())?;
        call.args.push_str(&args);
        arg_bytes = args.len();
    }
    if !call.announced && !call.name.is_empty() {
        call.announced = true;
        *emitted = true;
        sink.delta(StreamDelta::ToolCallStart {
            index: ordinal,
            id: call.id.clone(),
            name: call.name.clone(),
        });
    }
    if call.announced && arg_bytes > 0 {
        sink.delta(StreamDelta::ToolCallArguments { bytes: arg_bytes });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferroclaw_types::{AssistantMessage, ToolDefinition};

    #[test]
    fn images_from_tools_follow_the_turn_s_tool_messages_as_a_user_message() {
        let result = |id: &str, content: Vec<ContentBlock>| {
            Message::ToolResult(ferroclaw_types::ToolResultMessage {
                tool_call_id: id.into(),
                tool_name: "screenshot".into(),
                content,
                is_error: false,
                timestamp: 0,
            })
        };
        let req = ChatRequest {
            model: "m".into(),
            messages: vec![
                Message::user("look"),
                Message::Assistant(AssistantMessage {
                    content: vec![
                        ContentBlock::ToolCall {
                            id: "c1".into(),
                            name: "screenshot".into(),
                            arguments: json!({}),
                        },
                        ContentBlock::ToolCall {
                            id: "c2".into(),
                            name: "screenshot".into(),
                            arguments: json!({}),
                        },
                    ],
                    provider: String::new(),
                    model: String::new(),
                    usage: Usage::default(),
                    stop_reason: StopReason::ToolUse,
                    error_message: None,
                    timestamp: 0,
                }),
                result(
                    "c1",
                    vec![
                        ContentBlock::text("shot 1"),
                        ContentBlock::Image {
                            data: "AAAA".into(),
                            mime_type: "image/png".into(),
                        },
                    ],
                ),
                result("c2", vec![ContentBlock::text("no image")]),
                Message::user("what do you see?"),
            ],
            ..Default::default()
        };
        let body = build_body(&req, SchemaFlavor::OpenAi);
        let roles: Vec<&str> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "assistant", "tool", "tool", "user", "user"]);
        let tool = &body["messages"][2];
        assert!(
            tool["content"].as_str().unwrap().starts_with("shot 1"),
            "{tool}"
        );
        let images = &body["messages"][4]["content"];
        assert_eq!(images[1]["type"], "image_url");
        assert_eq!(images[1]["image_url"]["url"], "data:image/png;base64,AAAA");
        assert!(images[0]["text"].as_str().unwrap().contains("c1"));
        assert_eq!(body["messages"][5]["content"], "what do you see?");
    }

    #[test]
    fn body_maps_transcript_messages() {
        let req = ChatRequest {
            model: "m".into(),
            system: Some("be brief".into()),
            messages: vec![
                Message::user("hi"),
                Message::Assistant(AssistantMessage {
                    content: vec![
                        ContentBlock::Thinking {
                            thinking: "hmm".into(),
                            thinking_signature: None,
                        },
                        ContentBlock::ToolCall {
                            id: "c1".into(),
                            name: "exec".into(),
                            arguments: json!({"cmd": "ls"}),
                        },
                    ],
                    provider: String::new(),
                    model: String::new(),
                    usage: Usage::default(),
                    stop_reason: StopReason::ToolUse,
                    error_message: None,
                    timestamp: 0,
                }),
                Message::tool_result("c1", "exec", "a.txt", false),
            ],
            tools: vec![ToolDefinition {
                name: "exec".into(),
                description: "run".into(),
                parameters: Value::Null,
            }],
            max_tokens: Some(10),
            temperature: None,
            stream: true,
            extra_body: Default::default(),
            max_reply_bytes: None,
            thinking_budget: None,
        };
        let b = build_body(&req, SchemaFlavor::OpenAi);
        let m = &b["messages"];
        assert_eq!(m[0], json!({"role": "system", "content": "be brief"}));
        assert_eq!(m[1], json!({"role": "user", "content": "hi"}));
        assert_eq!(m[2]["content"], Value::Null);
        assert_eq!(m[2]["reasoning_content"], "hmm");
        assert_eq!(m[2]["reasoning"], "hmm");
        assert_eq!(
            m[2]["tool_calls"][0]["function"]["arguments"],
            r#"{"cmd":"ls"}"#
        );
        assert_eq!(
            m[3],
            json!({"role": "tool", "tool_call_id": "c1", "content": "a.txt"})
        );
        assert_eq!(b["tools"][0]["function"]["parameters"]["type"], "object");
        assert_eq!(b["stream_options"]["include_usage"], true);
        assert_eq!(b["max_tokens"], 10);
    }

    #[test]
    fn arguments_fallback_to_raw_string() {
        assert_eq!(parse_arguments(""), json!({}));
        assert_eq!(parse_arguments(r#"{"a":1}"#), json!({"a": 1}));
        assert_eq!(parse_arguments(r#"{"a":"#), json!(r#"{"a":"#));
    }

    #[test]
    fn same_index_different_id_is_a_new_call() {
        let mut turn = Turn::default();
        let mut emitted = false;
        let frag = |id: &str, name: &str, args: &str| ToolCallDelta {
            index: Some(0),
            id: Some(id.into()),
            function: Some(FunctionDelta {
                name: Some(name.into()),
                arguments: Some(Value::String(args.into())),
            }),
        };
        let mut budget = ReplyBudget::new(1024);
        for (id, name) in [("a", "x"), ("b", "y")] {
            apply_tool_fragment(
                &mut turn,
                frag(id, name, "{}"),
                0,
                &NoopSink,
                &mut emitted,
                &mut budget,
            )
            .unwrap();
        }
        assert_eq!(turn.calls.len(), 2);
        assert!(emitted);
    }

    #[test]
    fn tool_arguments_count_against_the_reply_cap() {
        let mut turn = Turn::default();
        let mut emitted = false;
        let mut budget = ReplyBudget::new(10);
        let frag = |args: &str| ToolCallDelta {
            index: Some(0),
            id: Some("a".into()),
            function: Some(FunctionDelta {
                name: None,
                arguments: Some(Value::String(args.into())),
            }),
        };
        apply_tool_fragment(
            &mut turn,
            frag("{\"a\":"),
            0,
            &NoopSink,
            &mut emitted,
            &mut budget,
        )
        .unwrap();
        let err = apply_tool_fragment(
            &mut turn,
            frag("\"12345\"}"),
            0,
            &NoopSink,
            &mut emitted,
            &mut budget,
        )
        .unwrap_err();
        assert_eq!(err.kind, ErrorKind::ReplyTooLarge);
        assert!(err.message.contains("exceeded 10 bytes"), "{err}");
        assert!(!err.retryable() && !err.should_fall_back());
        // Nothing past the cap was kept.
        assert_eq!(turn.calls[0].args, "{\"a\":");
    }

    struct NoopSink;
    impl DeltaSink for NoopSink {
        fn delta(&self, _: StreamDelta) {}
    }
}
