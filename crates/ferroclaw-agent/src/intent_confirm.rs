//! `intent.confirm`: when a model's text points at a tool call but the parser cannot
//! read its arguments with confidence, one small extra request to the same model asks
//! for exactly that call, and its answer is read strictly (one JSON object, the
//! tool's name, the required arguments present). A guess is never made in between.
//!
//! `guided` constrains that answer with what the server supports: a forced native call
//! (`tool_choice`) when the server takes `tools`, vLLM's `guided_json`, or
//! `response_format: json_schema`; a server that rejects the field gets the `ask` form
//! (the same request, the format stated in the prompt) once.

use ferroclaw_config::settings::{GuidedDecoding, IntentConfirm};
use ferroclaw_intent::{ToolSpec, Unsure};
use ferroclaw_providers::{ChatRequest, ErrorKind, NoSink, Provider};
use ferroclaw_types::{ContentBlock, Message, ToolDefinition, Usage};
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

/// Enough for any call's arguments; a confirmation is not an answer.
const MAX_TOKENS: u32 = 1024;
/// How much of the conversation the model is shown again.
const EXCERPT_CHARS: usize = 4000;

/// How the confirmation request is constrained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfirmForm {
    /// `tools: [the tool]` + `tool_choice` naming it.
    ToolChoice,
    /// vLLM's `guided_json`.
    GuidedJson,
    /// `response_format: {type: json_schema}`.
    ResponseFormat,
    /// No constraint: the format is asked for in the prompt.
    Ask,
}

impl ConfirmForm {
    /// The form for a setting: `tools_accepted` says the server takes `tools` (auto mode
    /// before any refusal).
    pub fn choose(
        confirm: IntentConfirm,
        guided: GuidedDecoding,
        tools_accepted: bool,
    ) -> Option<Self> {
        match confirm {
            IntentConfirm::Off => None,
            IntentConfirm::Ask => Some(ConfirmForm::Ask),
            IntentConfirm::Guided if tools_accepted => Some(ConfirmForm::ToolChoice),
            IntentConfirm::Guided => Some(match guided {
                GuidedDecoding::Vllm => ConfirmForm::GuidedJson,
                GuidedDecoding::ResponseFormat | GuidedDecoding::Off => ConfirmForm::ResponseFormat,
            }),
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            ConfirmForm::ToolChoice => "tool_choice",
            ConfirmForm::GuidedJson => "guided_json",
            ConfirmForm::ResponseFormat => "response_format",
            ConfirmForm::Ask => "ask",
        }
    }
}

/// What a confirmation produced.
#[derive(Debug, Default)]
pub struct Confirmed {
    pub call: Option<(String, Value)>,
    pub usage: Usage,
    /// The form that answered (after a refused guided field, `ask`).
    pub form: Option<ConfirmForm>,
}

/// What a confirmation asks about.
pub struct Question<'a> {
    pub model: &'a str,
    pub unsure: &'a Unsure,
    pub spec: &'a ToolSpec,
    /// The user's newest message, for context.
    pub user_text: &'a str,
    /// The turn's reasoning and text.
    pub answer_text: &'a str,
}

/// Ask `provider` for the call `q.unsure` points at. Errors end in "no call": the run
/// goes on with the model's text as its answer.
pub async fn confirm(
    provider: &dyn Provider,
    q: &Question<'_>,
    form: ConfirmForm,
    cancel: &CancellationToken,
) -> Confirmed {
    let mut out = Confirmed::default();
    let mut form = form;
    let tool = &q.spec.name;
    for _ in 0..2 {
        let req = request(q, form);
        match provider.chat(&req, &NoSink, cancel).await {
            Ok(r) => {
                out.usage.add(&r.usage);
                out.form = Some(form);
                out.call = read_call(&r.content, q.spec);
                tracing::info!(tool = %tool, form = form.as_str(), confirmed = out.call.is_some(), "tool intent confirmation");
                return out;
            }
            Err(e)
                if e.kind == ErrorKind::BadRequest && !e.streamed && form != ConfirmForm::Ask =>
            {
                tracing::warn!(tool = %tool, form = form.as_str(), error = %e, "the server refused the guided confirmation; asking in plain form");
                form = ConfirmForm::Ask;
            }
            Err(e) => {
                tracing::warn!(tool = %tool, error = %e, "tool intent confirmation failed; no call");
                return out;
            }
        }
    }
    out
}

fn clip(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut i = s.len() - max;
    while !s.is_char_boundary(i) {
        i += 1;
    }
    &s[i..]
}

fn request(q: &Question<'_>, form: ConfirmForm) -> ChatRequest {
    let (spec, unsure) = (q.spec, q.unsure);
    let params = if spec.parameters.is_object() {
        spec.parameters.clone()
    } else {
        json!({"type": "object", "properties": {}})
    };
    let system = format!(
        "You write one tool call and nothing else. Reply with a single JSON object: \
         {{\"name\": \"{name}\", \"arguments\": {{...}}}} where the arguments follow this \
         JSON schema: {params}. If the assistant's text below does not decide to call \
         `{name}` now, reply {{\"name\": null}}.",
        name = spec.name,
    );
    let known = match &unsure.arguments {
        Value::Object(m) if !m.is_empty() => {
            format!("\nArguments read so far: {}", Value::Object(m.clone()))
        }
        _ => String::new(),
    };
    let user = format!(
        "The user wrote:\n{}\n\nThe assistant then wrote:\n{}\n\nThe part that points at \
         the tool:\n{}{known}\n\nWrite the call to `{}` now.",
        clip(q.user_text, EXCERPT_CHARS),
        clip(q.answer_text, EXCERPT_CHARS),
        clip(&unsure.excerpt, 1000),
        spec.name,
    );
    let schema = json!({
        "type": "object",
        "properties": {"name": {"type": "string", "enum": [spec.name]}, "arguments": params},
        "required": ["name", "arguments"],
    });
    let mut extra = Map::new();
    let mut tools = Vec::new();
    match form {
        ConfirmForm::ToolChoice => {
            tools.push(ToolDefinition {
                name: spec.name.clone(),
                description: spec.description.clone(),
                parameters: params,
            });
            extra.insert(
                "tool_choice".into(),
                json!({"type": "function", "function": {"name": spec.name}}),
            );
        }
        ConfirmForm::GuidedJson => {
            extra.insert("guided_json".into(), schema);
        }
        ConfirmForm::ResponseFormat => {
            extra.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": {"name": "tool_call", "schema": schema}}),
            );
        }
        ConfirmForm::Ask => {}
    }
    ChatRequest {
        model: q.model.to_string(),
        system: Some(system),
        messages: vec![Message::user(user)],
        tools,
        max_tokens: Some(MAX_TOKENS),
        temperature: Some(0.0),
        stream: false,
        extra_body: extra,
        max_reply_bytes: Some(64 * 1024),
        thinking_budget: None,
    }
}

/// The call in a confirmation answer, read strictly: a native call to the tool, or the
/// whole text (a code fence allowed) being one JSON object naming it with its required
/// arguments.
pub fn read_call(content: &[ContentBlock], spec: &ToolSpec) -> Option<(String, Value)> {
    for b in content {
        if let ContentBlock::ToolCall {
            name, arguments, ..
        } = b
        {
            if name == &spec.name && arguments.is_object() && has_required(arguments, spec) {
                return Some((name.clone(), arguments.clone()));
            }
        }
    }
    let text: String = content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let mut t = text.trim();
    if let Some(rest) = t.strip_prefix("```") {
        let body = rest.split_once('\n').map_or("", |(_, b)| b);
        t = body.trim_end().strip_suffix("```").unwrap_or("").trim();
    }
    let v: Value = serde_json::from_str(t).ok()?;
    let name = v.get("name")?.as_str()?;
    if name != spec.name {
        return None;
    }
    let args = v.get("arguments").cloned().unwrap_or_else(|| json!({}));
    (args.is_object() && has_required(&args, spec)).then(|| (spec.name.clone(), args))
}

/// Every required argument is there and not empty.
pub fn has_required(args: &Value, spec: &ToolSpec) -> bool {
    let required = spec
        .parameters
        .get("required")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    required.iter().filter_map(Value::as_str).all(|k| {
        args.get(k)
            .is_some_and(|v| !v.is_null() && v.as_str().is_none_or(|s| !s.trim().is_empty()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ToolSpec {
        ToolSpec::new(
            "get_weather",
            "Weather for a place.",
            json!({"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}),
        )
    }

    #[test]
    fn strict_reading() {
        let s = spec();
        let ok = |t: &str| read_call(&[ContentBlock::text(t)], &s);
        assert_eq!(
            ok(r#"{"name":"get_weather","arguments":{"location":"Paris"}}"#),
            Some(("get_weather".into(), json!({"location":"Paris"})))
        );
        assert!(ok(
            "```json\n{\"name\":\"get_weather\",\"arguments\":{\"location\":\"Oslo\"}}\n```"
        )
        .is_some());
        // Declined, another tool, a missing or empty required argument, prose around it.
        assert_eq!(ok(r#"{"name": null}"#), None);
        assert_eq!(
            ok(r#"{"name":"web_search","arguments":{"location":"x"}}"#),
            None
        );
        assert_eq!(ok(r#"{"name":"get_weather","arguments":{}}"#), None);
        assert_eq!(
            ok(r#"{"name":"get_weather","arguments":{"location":" "}}"#),
            None
        );
        assert_eq!(
            ok(r#"Sure! {"name":"get_weather","arguments":{"location":"Paris"}}"#),
            None
        );
    }

    #[test]
    fn forms_follow_the_setting() {
        use ConfirmForm::*;
        assert_eq!(
            ConfirmForm::choose(IntentConfirm::Off, GuidedDecoding::Vllm, true),
            None
        );
        assert_eq!(
            ConfirmForm::choose(IntentConfirm::Ask, GuidedDecoding::Vllm, true),
            Some(Ask)
        );
        assert_eq!(
            ConfirmForm::choose(IntentConfirm::Guided, GuidedDecoding::Off, true),
            Some(ToolChoice)
        );
        assert_eq!(
            ConfirmForm::choose(IntentConfirm::Guided, GuidedDecoding::Vllm, false),
            Some(GuidedJson)
        );
        assert_eq!(
            ConfirmForm::choose(IntentConfirm::Guided, GuidedDecoding::Off, false),
            Some(ResponseFormat)
        );
    }
}
