//! Tool calling for models that express tool use only as text (gpt-oss on vLLM or
//! Ollama, many GGUF models): in `intent` mode the tools are described in the system
//! prompt and never sent as `tools`; in `auto` mode they are sent, and a text intent is
//! used when the answer has no structured calls. Either way parsed calls become real
//! `toolCall` blocks, so the rest of the loop (events, transcript, policy) is unchanged.

use std::path::PathBuf;

use ferroclaw_config::settings::{GuidedDecoding, IntentConfirm, ToolCallingSettings, ToolMode};
use ferroclaw_intent::{ParserConfig, Strategy, ToolSpec, Unsure};
use ferroclaw_tools::ToolRegistry;
use ferroclaw_types::{ContentBlock, Message, StopReason, ToolDefinition, UserMessage};
use serde_json::{json, Map, Value};

#[derive(Debug, Clone)]
pub struct IntentSettings {
    pub mode: ToolMode,
    /// Format the model is asked to use in `intent` mode.
    pub prompt_strategy: Strategy,
    pub parser: ParserConfig,
    /// `<dir>/<strategy>.md` replaces the built-in prompt template when present.
    pub prompts_dir: Option<PathBuf>,
    /// A whole template given by the deployment (the executor's `system_prompt_path`);
    /// wins over `prompts_dir`.
    pub prompt_template: Option<String>,
    pub guided: GuidedDecoding,
    /// A schema given by the deployment for guided decoding (the executor's
    /// `guided_json_schema_path`); otherwise one is made from the tools.
    pub guided_schema: Option<Value>,
    /// What to do with an intent whose arguments could not be read.
    pub confirm: IntentConfirm,
}

impl Default for IntentSettings {
    fn default() -> Self {
        Self {
            mode: ToolMode::Native,
            prompt_strategy: Strategy::GuidedJson,
            parser: ParserConfig::default(),
            prompts_dir: None,
            prompt_template: None,
            guided: GuidedDecoding::Off,
            guided_schema: None,
            confirm: IntentConfirm::Off,
        }
    }
}

impl IntentSettings {
    /// From the agent's tool-calling settings; names were validated when the config
    /// loaded, so an unknown one here can only come from hand-built settings and falls
    /// back to the default.
    pub fn from_settings(cfg: &ToolCallingSettings) -> Self {
        let defaults = ParserConfig::default();
        let order: Vec<Strategy> = cfg
            .intent_order
            .iter()
            .filter_map(|n| n.parse().ok())
            .collect();
        let sources: Vec<ferroclaw_intent::Source> = cfg
            .intent_sources
            .iter()
            .filter_map(|n| n.parse().ok())
            .collect();
        Self {
            mode: cfg.mode,
            prompt_strategy: cfg.intent_prompt.parse().unwrap_or(Strategy::GuidedJson),
            parser: ParserConfig {
                order: if order.is_empty() {
                    defaults.order.clone()
                } else {
                    order
                },
                sources: if sources.is_empty() {
                    defaults.sources.clone()
                } else {
                    sources
                },
                ..defaults
            },
            prompts_dir: Some(cfg.prompts_dir.clone()),
            prompt_template: None,
            guided: cfg.guided,
            guided_schema: None,
            confirm: cfg.confirm,
        }
    }
}

/// What the parser needs to know about each tool, aliases included.
pub fn tool_specs(registry: &ToolRegistry, defs: &[ToolDefinition]) -> Vec<ToolSpec> {
    defs.iter()
        .map(|d| {
            let mut spec = ToolSpec::from(d);
            if let Some(tool) = registry.get(&d.name) {
                spec.aliases = tool.aliases().iter().map(|a| (*a).to_string()).collect();
            }
            spec
        })
        .collect()
}

/// The system-prompt section that teaches the tool-call format.
pub fn system_section(settings: &IntentSettings, specs: &[ToolSpec]) -> String {
    format!("\n## Tool calling\n{}", render_prompt(settings, specs))
}

/// The tool-call instructions with the tools filled in.
pub fn render_prompt(settings: &IntentSettings, specs: &[ToolSpec]) -> String {
    let template = match &settings.prompt_template {
        Some(t) => t.clone(),
        None => match ferroclaw_intent::prompts::resolve(
            settings.prompts_dir.as_deref(),
            settings.prompt_strategy,
        ) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the intent prompt override; using the built-in one");
                ferroclaw_intent::prompts::template(settings.prompt_strategy).to_string()
            }
        },
    };
    ferroclaw_intent::prompts::render(&template, specs)
}

/// Body fields that constrain decoding to the tool-call schema, when configured.
pub fn guided_body(settings: &IntentSettings, specs: &[ToolSpec]) -> Map<String, Value> {
    let mut extra = Map::new();
    if settings.guided == GuidedDecoding::Off {
        return extra;
    }
    let schema = settings
        .guided_schema
        .clone()
        .unwrap_or_else(|| ferroclaw_intent::guided_json_schema(specs));
    match settings.guided {
        GuidedDecoding::Off => {}
        GuidedDecoding::Vllm => {
            extra.insert("guided_json".into(), schema);
        }
        GuidedDecoding::ResponseFormat => {
            extra.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": {"name": "tool_calls", "schema": schema}}),
            );
        }
    }
    extra
}

/// A server rejected the `tools` field (some local servers and models do).
pub fn rejects_tools(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("tool")
        && (m.contains("support")
            || m.contains("not allowed")
            || m.contains("unknown")
            || m.contains("invalid")
            || m.contains("unrecognized"))
}

/// Rewrites earlier tool calls and results as text in the chosen format: a server
/// that was never told about tools may reject (and a model may misread) structured ones.
pub fn downgrade_history(messages: Vec<Message>, strategy: Strategy) -> Vec<Message> {
    downgrade(messages, strategy, |_| true)
}

/// As [`downgrade_history`] for the calls read from text only ([`apply_intents`]'s ids):
/// in `auto` mode a call the model wrote as text goes back to it as text, while its
/// native calls keep their structured form.
pub fn downgrade_text_calls(messages: Vec<Message>, strategy: Strategy) -> Vec<Message> {
    downgrade(messages, strategy, |id| id.starts_with(INTENT_ID_PREFIX))
}

/// Ids of the calls [`apply_intents`] makes from text.
const INTENT_ID_PREFIX: &str = "intent_";

/// The call was read from text (not made natively).
pub fn is_text_call(id: &str) -> bool {
    id.starts_with(INTENT_ID_PREFIX)
}

fn downgrade(
    messages: Vec<Message>,
    strategy: Strategy,
    which: impl Fn(&str) -> bool,
) -> Vec<Message> {
    messages
        .into_iter()
        .map(|m| match m {
            Message::Assistant(mut a) => {
                let mut calls = Vec::new();
                a.content.retain(|b| match b {
                    ContentBlock::ToolCall {
                        id,
                        name,
                        arguments,
                    } if which(id) => {
                        calls.push((name.clone(), arguments.clone()));
                        false
                    }
                    _ => true,
                });
                if !calls.is_empty() {
                    a.content
                        .push(ContentBlock::text(render_calls(&calls, strategy)));
                }
                Message::Assistant(a)
            }
            Message::ToolResult(r) if which(&r.tool_call_id) => {
                let text = if r.is_error {
                    format!("[ERROR: {}] {}", r.tool_name, r.text())
                } else {
                    format!("[TOOL_RESULT: {}]\n{}", r.tool_name, r.text())
                };
                Message::User(UserMessage {
                    content: vec![ContentBlock::text(text)],
                    timestamp: r.timestamp,
                })
            }
            other => other,
        })
        .collect()
}

fn render_calls(calls: &[(String, Value)], strategy: Strategy) -> String {
    match strategy {
        Strategy::React => calls
            .iter()
            .map(|(n, a)| format!("Action: {n}\nAction Input: {a}"))
            .collect::<Vec<_>>()
            .join("\n"),
        Strategy::Markers => calls
            .iter()
            .map(|(n, a)| {
                let mut s = format!("[TOOL:{n}");
                if let Value::Object(map) = a {
                    for (k, v) in map {
                        let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                        s.push_str(&format!("|{k}={v}"));
                    }
                }
                s.push(']');
                s
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Strategy::NativeText => calls
            .iter()
            .map(|(n, a)| {
                format!(
                    "<tool_call>\n{}\n</tool_call>",
                    json!({"name": n, "arguments": a})
                )
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => json!({
            "tool_calls": calls.iter().map(|(n, a)| json!({"name": n, "arguments": a})).collect::<Vec<_>>(),
            "done": false,
        })
        .to_string(),
    }
}

fn joined(content: &[ContentBlock], thinking: bool) -> Option<String> {
    let mut out = String::new();
    for b in content {
        match (b, thinking) {
            (ContentBlock::Thinking { thinking: t, .. }, true) => out.push_str(t),
            (ContentBlock::Text { text }, false) => out.push_str(text),
            _ => {}
        }
    }
    (!out.is_empty()).then_some(out)
}

/// What [`apply_intents`] found.
#[derive(Debug, Default)]
pub struct Intents {
    /// The strategy that found the calls added; `None` when none were.
    pub strategy: Option<Strategy>,
    /// Intents that did not become calls (see `intent.confirm`).
    pub unsure: Vec<Unsure>,
}

/// Parses the turn's reasoning and text for tool intents and, when there are some, adds
/// them as tool calls (ids `intent_<n>_<run-unique>`). Harmony markup leaked into the text
/// is replaced by its final-channel text either way.
pub fn apply_intents(
    content: &mut Vec<ContentBlock>,
    stop: &mut StopReason,
    specs: &[ToolSpec],
    parser: &ParserConfig,
    id_salt: &str,
) -> Intents {
    let reasoning = joined(content, true);
    let text = joined(content, false);
    let outcome = ferroclaw_intent::parse(reasoning.as_deref(), text.as_deref(), specs, parser);
    let leaked_markup = text.as_deref().is_some_and(|t| {
        t.contains("<|") || t.contains("assistantfinal") || t.contains("to=functions.")
    });
    // A completion signal with an answer ("done": true + "answer", `Final Answer:`) also
    // turns the answer into the visible text.
    let finished_with_answer =
        outcome.calls.is_empty() && outcome.done && outcome.final_text.is_some();
    if outcome.calls.is_empty() && !leaked_markup && !finished_with_answer {
        return Intents {
            strategy: None,
            unsure: outcome.unsure,
        };
    }
    let unsure = outcome.unsure;
    // Text that carried the calls (or leaked markup) is replaced by what is left for the
    // user; intents read from the reasoning leave the visible text alone.
    let calls_from_content = outcome
        .calls
        .iter()
        .any(|c| c.source == ferroclaw_intent::Source::Content);
    if leaked_markup || calls_from_content || finished_with_answer {
        content.retain(|b| !matches!(b, ContentBlock::Text { .. }));
        if let Some(final_text) = outcome.final_text.filter(|t| !t.trim().is_empty()) {
            content.push(ContentBlock::text(final_text));
        }
    }
    let strategy = outcome.calls.first().map(|c| c.strategy);
    for (i, call) in outcome.calls.into_iter().enumerate() {
        tracing::info!(tool = %call.name, strategy = ?call.strategy, confidence = call.confidence, "tool intent parsed from text");
        content.push(ContentBlock::ToolCall {
            id: format!("{INTENT_ID_PREFIX}{}_{id_salt}", i + 1),
            name: call.name,
            arguments: call.arguments,
        });
    }
    if strategy.is_some() {
        *stop = StopReason::ToolUse;
    }
    Intents { strategy, unsure }
}

/// Adds a confirmed call (see [`crate::intent_confirm`]) as a tool call.
pub fn push_confirmed(
    content: &mut Vec<ContentBlock>,
    stop: &mut StopReason,
    name: String,
    arguments: Value,
    id_salt: &str,
) {
    content.push(ContentBlock::ToolCall {
        id: format!("{INTENT_ID_PREFIX}c_{id_salt}"),
        name,
        arguments,
    });
    *stop = StopReason::ToolUse;
}

/// The text of the turn (reasoning first), for a confirmation request.
pub fn turn_text(content: &[ContentBlock]) -> String {
    let mut s = joined(content, true).unwrap_or_default();
    if let Some(t) = joined(content, false) {
        if !s.is_empty() {
            s.push_str("\n\n");
        }
        s.push_str(&t);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferroclaw_types::{AssistantMessage, Usage};

    fn specs() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "exec".into(),
            aliases: vec!["bash".into()],
            description: "Run a shell command".into(),
            parameters: json!({"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}),
        }]
    }

    #[test]
    fn harmony_in_content_becomes_a_call_and_markup_goes() {
        let mut content = vec![ContentBlock::text(
            "<|start|>assistant<|channel|>commentary to=functions.exec <|constrain|>json<|message|>{\"command\":\"ls\"}<|call|>",
        )];
        let mut stop = StopReason::Stop;
        let found = apply_intents(
            &mut content,
            &mut stop,
            &specs(),
            &ParserConfig::default(),
            "x",
        );
        assert_eq!(found.strategy, Some(Strategy::Harmony));
        assert_eq!(stop, StopReason::ToolUse);
        assert!(content.iter().any(|b| matches!(b, ContentBlock::ToolCall { name, arguments, .. } if name == "exec" && arguments["command"] == "ls")));
        assert!(!content
            .iter()
            .any(|b| matches!(b, ContentBlock::Text { text } if text.contains("<|"))));
    }

    #[test]
    fn plain_answer_is_untouched() {
        let mut content = vec![ContentBlock::text("The capital of France is Paris.")];
        let before = content.clone();
        let mut stop = StopReason::Stop;
        assert_eq!(
            apply_intents(
                &mut content,
                &mut stop,
                &specs(),
                &ParserConfig::default(),
                "x"
            )
            .strategy,
            None
        );
        assert_eq!(content, before);
        assert_eq!(stop, StopReason::Stop);
    }

    #[test]
    fn history_downgrade_turns_calls_and_results_into_text() {
        let msgs = vec![
            Message::user("go"),
            Message::Assistant(AssistantMessage {
                content: vec![ContentBlock::ToolCall {
                    id: "c1".into(),
                    name: "exec".into(),
                    arguments: json!({"command": "ls"}),
                }],
                provider: String::new(),
                model: String::new(),
                usage: Usage::default(),
                stop_reason: StopReason::ToolUse,
                error_message: None,
                timestamp: 0,
            }),
            Message::tool_result("c1", "exec", "a.txt", false),
        ];
        let out = downgrade_history(msgs, Strategy::GuidedJson);
        assert!(
            matches!(&out[1], Message::Assistant(a) if a.tool_calls().count() == 0 && a.text().contains("\"tool_calls\""))
        );
        assert!(matches!(&out[2], Message::User(_)));
        assert!(out[2].text().contains("[TOOL_RESULT: exec]\na.txt"));
    }

    #[test]
    fn rejection_messages_are_recognised() {
        assert!(rejects_tools("tools is not supported for this model"));
        assert!(rejects_tools(
            "\"auto\" tool choice requires --enable-auto-tool-choice; tools not supported"
        ));
        assert!(!rejects_tools("maximum context length exceeded"));
    }
}
