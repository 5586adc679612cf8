//! Compaction: when the context nears the model's window, the older part of the
//! conversation is summarised by the same provider and replaced, in the context only, by
//! that summary. The transcript keeps everything: a `compaction` entry records the
//! summary and the first entry still sent verbatim.
//!
//! The split is always at a user message, so a tool call and its result never end up on
//! different sides of it.

use std::fmt::Write as _;

use ferroclaw_providers::{ChatRequest, NoSink, Provider, ProviderError};
use ferroclaw_types::{ContentBlock, Entry, Message, ToolDefinition};
use tokio_util::sync::CancellationToken;

pub use ferroclaw_config::settings::CompactionSettings;

/// Characters per token for a model family. A real tokenizer would cost more than the
/// precision buys here: the threshold leaves a quarter of the window as margin.
fn chars_per_token(model: &str) -> f32 {
    let m = model.to_ascii_lowercase();
    if m.contains("claude") {
        3.5
    } else if m.contains("gpt") || m.contains("o1") || m.contains("o3") || m.contains("o4") {
        4.0
    } else {
        3.7
    }
}

/// Estimated tokens of a text: ASCII by the family's ratio, other characters (CJK,
/// emoji, accents) at about one token each.
pub fn estimate_text_tokens(text: &str, model: &str) -> usize {
    let ascii = text.bytes().filter(u8::is_ascii).count();
    let other = text.chars().count().saturating_sub(ascii);
    (ascii as f32 / chars_per_token(model)).ceil() as usize + other
}

/// Per-message framing the APIs add (role markers, separators).
const MESSAGE_OVERHEAD: usize = 4;

pub fn estimate_message_tokens(m: &Message, model: &str) -> usize {
    let mut n = MESSAGE_OVERHEAD;
    for block in m.content() {
        n += match block {
            ContentBlock::Text { text } => estimate_text_tokens(text, model),
            ContentBlock::Thinking { thinking, .. } => estimate_text_tokens(thinking, model),
            // Encrypted reasoning is billed by what it stood for, not by its base64.
            ContentBlock::RedactedThinking { data } => data.len() / 4,
            ContentBlock::ToolCall {
                name, arguments, ..
            } => {
                estimate_text_tokens(name, model)
                    + estimate_text_tokens(&arguments.to_string(), model)
            }
            // Providers bill images at roughly this size at common resolutions.
            ContentBlock::Image { .. } => 1_000,
        };
    }
    n
}

/// Estimated tokens of a whole request: system prompt, tool schemas and messages.
pub fn estimate_request(
    system: &str,
    tools: &[ToolDefinition],
    messages: &[Message],
    model: &str,
) -> usize {
    let tools: usize = tools
        .iter()
        .map(|t| {
            estimate_text_tokens(&t.description, model)
                + estimate_text_tokens(&t.parameters.to_string(), model)
                + 8
        })
        .sum();
    estimate_text_tokens(system, model)
        + tools
        + messages
            .iter()
            .map(|m| estimate_message_tokens(m, model))
            .sum::<usize>()
}

pub fn should_compact(estimated_tokens: usize, messages: usize, s: &CompactionSettings) -> bool {
    let limit = (s.context_window as f32 * s.threshold) as usize;
    estimated_tokens >= limit || (s.max_messages > 0 && messages > s.max_messages)
}

/// What a compaction will do: the messages to summarise and where the kept part begins.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub previous_summary: Option<String>,
    pub summarize: Vec<Message>,
    pub first_kept_entry_id: String,
    pub kept_tokens: usize,
}

/// The entries the current context is made of (the store's rule, so the plan always
/// matches what is sent), with the newest summary.
fn effective_branch(entries: &[Entry]) -> (Option<String>, Vec<&Entry>) {
    let effective = ferroclaw_store::effective_branch(entries);
    let messages = effective
        .entries
        .into_iter()
        .filter(|e| e.message().is_some())
        .collect();
    (
        effective.compaction.map(|(_, summary)| summary.to_string()),
        messages,
    )
}

/// Chooses the split: keep the last `keep_recent_turns` user turns, fewer when they
/// would take more than half the window. `None` when there is nothing older to summarise.
pub fn plan(entries: &[Entry], s: &CompactionSettings, model: &str) -> Option<Plan> {
    let (previous_summary, branch) = effective_branch(entries);
    let user_starts: Vec<usize> = branch
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e.message(), Some(Message::User(_))))
        .map(|(i, _)| i)
        .collect();
    let budget = s.context_window as usize / 2;
    let tokens: Vec<usize> = branch
        .iter()
        .map(|e| e.message().map_or(0, |m| estimate_message_tokens(m, model)))
        .collect();
    let keep = s.keep_recent_turns.max(1);
    // Candidate split points from the most generous (keep `keep` turns) to the least.
    let first_candidate = user_starts.len().saturating_sub(keep);
    for &split in &user_starts[first_candidate..] {
        if split == 0 {
            continue;
        }
        let kept: usize = tokens[split..].iter().sum();
        if kept <= budget || split == *user_starts.last().unwrap_or(&0) {
            return Some(Plan {
                previous_summary,
                summarize: branch[..split]
                    .iter()
                    .filter_map(|e| e.message().cloned())
                    .collect(),
                first_kept_entry_id: branch[split].id.clone(),
                kept_tokens: kept,
            });
        }
    }
    None
}

const SUMMARY_SYSTEM: &str = "You condense the history of a conversation between a user and an AI agent \
so the agent can continue the work without the full transcript. Write a faithful summary that keeps: \
the user's goals, requests and constraints; decisions made and why; facts learned (names, paths, values, \
commands, errors); what was done with tools and what came of it; open questions and next steps. \
Be concise, use short bullet points, and never invent anything that is not in the history.";

const MERGE_SYSTEM: &str =
    "You are given consecutive partial summaries of one conversation, oldest \
first. Merge them into one summary with the same rules: keep goals, constraints, decisions, facts, \
tool work and open items; drop repetition; never invent anything.";

/// Tool results are cut to this many characters in the text sent for summarising.
const RESULT_CHARS_IN_SUMMARY_INPUT: usize = 2_000;

fn render(previous_summary: Option<&str>, messages: &[Message]) -> String {
    let mut out = String::new();
    if let Some(s) = previous_summary {
        let _ = writeln!(out, "[Earlier summary]\n{s}\n");
    }
    for m in messages {
        match m {
            Message::User(u) => {
                let _ = writeln!(out, "User: {}\n", Message::User(u.clone()).text());
            }
            Message::Assistant(a) => {
                let text = a.text();
                if !text.is_empty() {
                    let _ = writeln!(out, "Assistant: {text}");
                }
                for (_, name, args) in a.tool_calls() {
                    let _ = writeln!(out, "Assistant called tool {name} with {args}");
                }
                out.push('\n');
            }
            Message::ToolResult(r) => {
                let text = r.text();
                let cut = crate::history::head_tail(&text, RESULT_CHARS_IN_SUMMARY_INPUT);
                let status = if r.is_error { "error" } else { "result" };
                let _ = writeln!(out, "Tool {} {status}: {cut}\n", r.tool_name);
            }
        }
    }
    out
}

async fn summarize_once(
    provider: &dyn Provider,
    model: &str,
    system: &str,
    text: String,
    cancel: &CancellationToken,
) -> Result<String, ProviderError> {
    let req = ChatRequest {
        model: model.to_string(),
        system: Some(system.to_string()),
        messages: vec![Message::user(format!(
            "<history>\n{text}</history>\n\nWrite the summary now."
        ))],
        tools: Vec::new(),
        max_tokens: Some(2_048),
        temperature: Some(0.2),
        stream: false,
        extra_body: Default::default(),
        max_reply_bytes: None,
        thinking_budget: None,
    };
    let resp = provider.chat(&req, &NoSink, cancel).await?;
    let summary = resp
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<String>();
    let summary = crate::sanitize::sanitize_output(&summary);
    if summary.trim().is_empty() {
        return Err(ProviderError::new(
            ferroclaw_providers::ErrorKind::Malformed,
            "the summariser returned an empty summary",
        ));
    }
    Ok(summary)
}

/// Summarises the plan's older part; splits it into chunks when it would not fit a
/// single request and merges the chunk summaries.
pub async fn summarize(
    provider: &dyn Provider,
    model: &str,
    plan: &Plan,
    s: &CompactionSettings,
    cancel: &CancellationToken,
) -> Result<String, ProviderError> {
    // Each summarising request must fit the window with room for instructions and output.
    let chunk_budget = (s.context_window as usize * 3 / 5).max(1_000);
    let mut chunks: Vec<Vec<Message>> = vec![Vec::new()];
    let mut used = 0;
    for m in &plan.summarize {
        let t = estimate_message_tokens(m, model).min(chunk_budget);
        if used + t > chunk_budget && chunks.last().is_some_and(|c| !c.is_empty()) {
            chunks.push(Vec::new());
            used = 0;
        }
        used += t;
        if let Some(c) = chunks.last_mut() {
            c.push(m.clone());
        }
    }
    if chunks.len() == 1 {
        let text = render(plan.previous_summary.as_deref(), &chunks[0]);
        return summarize_once(provider, model, SUMMARY_SYSTEM, text, cancel).await;
    }
    let mut partials = Vec::with_capacity(chunks.len());
    for (i, chunk) in chunks.iter().enumerate() {
        let prev = if i == 0 {
            plan.previous_summary.as_deref()
        } else {
            None
        };
        partials.push(
            summarize_once(provider, model, SUMMARY_SYSTEM, render(prev, chunk), cancel).await?,
        );
    }
    let mut merged_input = String::new();
    for (i, p) in partials.iter().enumerate() {
        let _ = writeln!(merged_input, "[Part {}]\n{p}\n", i + 1);
    }
    summarize_once(provider, model, MERGE_SYSTEM, merged_input, cancel).await
}

/// The user message of the pre-compaction memory flush turn.
pub fn memory_flush_prompt(today: &str) -> String {
    format!(
        "[Memory flush] Your older conversation history is about to be summarised. If anything \
         in it must be remembered long-term (decisions, preferences, facts, open tasks), write it \
         now with the write or edit tool to memory/{today}.md in your workspace (append to it if \
         it exists). Then reply with exactly NO_REPLY."
    )
}

/// Cuts every tool result in the context to `max_chars` (last resort on overflow).
pub fn truncate_tool_results(messages: &mut [Message], max_chars: usize) -> usize {
    let mut cut = 0;
    for m in messages {
        if let Message::ToolResult(r) = m {
            for b in &mut r.content {
                if let ContentBlock::Text { text } = b {
                    if text.chars().count() > max_chars {
                        *text = crate::history::head_tail(text, max_chars);
                        cut += 1;
                    }
                }
            }
        }
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferroclaw_types::{AssistantMessage, EntryBody, StopReason, Usage};
    use serde_json::json;

    fn entry(id: &str, parent: Option<&str>, message: Message) -> Entry {
        Entry {
            id: id.into(),
            parent_id: parent.map(Into::into),
            timestamp: "2026-01-01T00:00:00Z".into(),
            body: EntryBody::Message { message },
        }
    }

    fn call(id: &str) -> Message {
        Message::Assistant(AssistantMessage {
            content: vec![ContentBlock::ToolCall {
                id: id.into(),
                name: "read".into(),
                arguments: json!({"path": "a"}),
            }],
            provider: "p".into(),
            model: "m".into(),
            usage: Usage::default(),
            stop_reason: StopReason::ToolUse,
            error_message: None,
            timestamp: 0,
        })
    }

    fn chain(messages: Vec<Message>) -> Vec<Entry> {
        let mut out: Vec<Entry> = Vec::new();
        for (i, m) in messages.into_iter().enumerate() {
            let id = format!("{i:08x}");
            let parent = out.last().map(|e: &Entry| e.id.clone());
            out.push(entry(&id, parent.as_deref(), m));
        }
        out
    }

    #[test]
    fn estimates_scale_with_text_and_family() {
        let s = "a".repeat(400);
        assert_eq!(estimate_text_tokens(&s, "gpt-4o"), 100);
        assert!(estimate_text_tokens(&s, "claude-sonnet") > 100);
        assert_eq!(estimate_text_tokens("日本語", "gpt-4o"), 3);
    }

    #[test]
    fn threshold_and_message_cap_trigger() {
        let s = CompactionSettings {
            context_window: 1_000,
            threshold: 0.75,
            max_messages: 10,
            ..Default::default()
        };
        assert!(!should_compact(700, 5, &s));
        assert!(should_compact(750, 5, &s));
        assert!(should_compact(10, 11, &s));
    }

    #[test]
    fn plan_splits_at_a_user_turn_never_between_call_and_result() {
        let entries = chain(vec![
            Message::user("one"),
            call("c1"),
            Message::tool_result("c1", "read", "r1", false),
            Message::user("two"),
            call("c2"),
            Message::tool_result("c2", "read", "r2", false),
            Message::user("three"),
        ]);
        let s = CompactionSettings {
            keep_recent_turns: 2,
            ..Default::default()
        };
        let p = plan(&entries, &s, "gpt").expect("plan");
        assert_eq!(p.first_kept_entry_id, entries[3].id);
        assert_eq!(p.summarize.len(), 3);
        assert!(matches!(p.summarize[2], Message::ToolResult(_)));
    }

    #[test]
    fn plan_keeps_fewer_turns_when_they_do_not_fit() {
        let big = "x".repeat(4_000);
        let entries = chain(vec![
            Message::user("one"),
            Message::user(big.clone()),
            Message::user("three"),
        ]);
        let s = CompactionSettings {
            context_window: 1_000,
            keep_recent_turns: 2,
            ..Default::default()
        };
        let p = plan(&entries, &s, "gpt").expect("plan");
        assert_eq!(
            p.first_kept_entry_id, entries[2].id,
            "the big turn is summarised"
        );
    }

    #[test]
    fn nothing_to_summarise_with_a_single_turn() {
        let entries = chain(vec![
            Message::user("only"),
            call("c"),
            Message::tool_result("c", "read", "r", false),
        ]);
        assert!(plan(&entries, &CompactionSettings::default(), "gpt").is_none());
    }

    #[test]
    fn plan_after_a_compaction_starts_from_its_kept_entry() {
        let mut entries = chain(vec![
            Message::user("one"),
            Message::user("two"),
            Message::user("three"),
            Message::user("four"),
        ]);
        let parent = entries.last().map(|e| e.id.clone());
        entries.push(Entry {
            id: "cccccccc".into(),
            parent_id: parent,
            timestamp: "t".into(),
            body: EntryBody::Compaction {
                summary: "old stuff".into(),
                first_kept_entry_id: entries[2].id.clone(),
                tokens_before: 10,
                tokens_after: Some(5),
            },
        });
        let s = CompactionSettings {
            keep_recent_turns: 1,
            ..Default::default()
        };
        let p = plan(&entries, &s, "gpt").expect("plan");
        assert_eq!(p.previous_summary.as_deref(), Some("old stuff"));
        assert_eq!(p.summarize.len(), 1);
        assert_eq!(p.summarize[0].text(), "three");
        assert_eq!(p.first_kept_entry_id, entries[3].id);
    }

    #[test]
    fn render_includes_tool_work() {
        let text = render(
            Some("before"),
            &[
                Message::user("hi"),
                call("c1"),
                Message::tool_result("c1", "read", "contents", false),
            ],
        );
        assert!(text.contains("[Earlier summary]\nbefore"));
        assert!(text.contains("User: hi"));
        assert!(text.contains("called tool read"));
        assert!(text.contains("Tool read result: contents"));
    }
}
