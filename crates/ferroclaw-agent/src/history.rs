//! The pipeline every history passes before it is sent to a provider. Each step is a
//! pure function over transcript-form messages so it can be tested and benchmarked alone.

use std::collections::HashSet;

use ferroclaw_types::{ContentBlock, Message, ToolResultMessage};

/// Text of the synthetic result for a tool call whose result is gone.
pub const MISSING_RESULT: &str = "[Tool result missing]";

#[derive(Debug, Clone, Copy)]
pub struct HistoryLimits {
    /// Keep the last N user turns (0 = keep all).
    pub max_user_turns: usize,
    /// Tool results older than the current turn longer than this are cut to head + tail.
    pub old_tool_result_chars: usize,
}

/// What the pairing repair changed; surfaced so callers can log an incident.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RepairReport {
    pub dropped_orphans: Vec<String>,
    pub dropped_duplicates: Vec<String>,
    pub synthesized: Vec<String>,
}

impl RepairReport {
    pub fn is_clean(&self) -> bool {
        self.dropped_orphans.is_empty()
            && self.dropped_duplicates.is_empty()
            && self.synthesized.is_empty()
    }
}

/// Runs the whole pipeline: turn limit → trim old tool results → repair pairing.
pub fn prepare(messages: &[Message], limits: HistoryLimits) -> (Vec<Message>, RepairReport) {
    let recent = limit_user_turns(messages, limits.max_user_turns);
    let mut kept = recent.to_vec();
    trim_old_tool_results(&mut kept, limits.old_tool_result_chars);
    let report = repair_pairing(&mut kept);
    (kept, report)
}

/// The suffix starting at the Nth-last user message.
pub fn limit_user_turns(messages: &[Message], max_user_turns: usize) -> &[Message] {
    if max_user_turns == 0 {
        return messages;
    }
    let mut seen = 0;
    for (i, m) in messages.iter().enumerate().rev() {
        if matches!(m, Message::User(_)) {
            seen += 1;
            if seen == max_user_turns {
                return &messages[i..];
            }
        }
    }
    messages
}

/// Cuts tool results that precede the latest user message to `max_chars`, keeping the
/// head and the tail (where errors and summaries usually are).
pub fn trim_old_tool_results(messages: &mut [Message], max_chars: usize) {
    if max_chars == 0 {
        return;
    }
    let Some(last_user) = messages.iter().rposition(|m| matches!(m, Message::User(_))) else {
        return;
    };
    for m in &mut messages[..last_user] {
        if let Message::ToolResult(r) = m {
            for block in &mut r.content {
                if let ContentBlock::Text { text } = block {
                    if text.chars().count() > max_chars {
                        *text = head_tail(text, max_chars);
                    }
                }
            }
        }
    }
}

/// Keeps about 70% of the budget from the head and 30% from the tail.
pub fn head_tail(text: &str, max_chars: usize) -> String {
    let total = text.chars().count();
    if total <= max_chars {
        return text.to_string();
    }
    let head_n = max_chars * 7 / 10;
    let tail_n = max_chars - head_n;
    let head_end = text
        .char_indices()
        .nth(head_n)
        .map_or(text.len(), |(i, _)| i);
    let tail_start = text
        .char_indices()
        .nth(total - tail_n)
        .map_or(text.len(), |(i, _)| i);
    format!(
        "{}\n\n[truncated: {} characters omitted]\n\n{}",
        &text[..head_end],
        total - head_n - tail_n,
        &text[tail_start..]
    )
}

/// Makes every tool call have exactly one result, directly after its assistant turn:
/// results whose call is not pending are dropped, a second result for a call is
/// dropped, and calls left unanswered get a synthetic error result.
pub fn repair_pairing(messages: &mut Vec<Message>) -> RepairReport {
    let mut report = RepairReport::default();
    let mut out: Vec<Message> = Vec::with_capacity(messages.len() + 1);
    // Calls of the latest assistant turn still waiting for a result, in call order.
    let mut pending: Vec<(String, String)> = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();

    for msg in messages.drain(..) {
        match msg {
            Message::ToolResult(r) => {
                if let Some(pos) = pending.iter().position(|(id, _)| *id == r.tool_call_id) {
                    pending.remove(pos);
                    answered.insert(r.tool_call_id.clone());
                    out.push(Message::ToolResult(r));
                } else if answered.contains(&r.tool_call_id) {
                    report.dropped_duplicates.push(r.tool_call_id);
                } else {
                    report.dropped_orphans.push(r.tool_call_id);
                }
            }
            other => {
                close_pending(&mut pending, &mut out, &mut report);
                answered.clear();
                if let Message::Assistant(a) = &other {
                    pending.extend(
                        a.tool_calls()
                            .map(|(id, name, _)| (id.to_string(), name.to_string())),
                    );
                }
                out.push(other);
            }
        }
    }
    close_pending(&mut pending, &mut out, &mut report);
    *messages = out;
    report
}

fn close_pending(
    pending: &mut Vec<(String, String)>,
    out: &mut Vec<Message>,
    report: &mut RepairReport,
) {
    for (id, name) in pending.drain(..) {
        report.synthesized.push(id.clone());
        out.push(Message::ToolResult(ToolResultMessage {
            tool_call_id: id,
            tool_name: name,
            content: vec![ContentBlock::text(MISSING_RESULT)],
            is_error: true,
            timestamp: ferroclaw_types::now_millis(),
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferroclaw_types::{AssistantMessage, StopReason, Usage};
    use serde_json::json;

    fn assistant_calls(ids: &[&str]) -> Message {
        Message::Assistant(AssistantMessage {
            content: ids
                .iter()
                .map(|id| ContentBlock::ToolCall {
                    id: id.to_string(),
                    name: "exec".into(),
                    arguments: json!({}),
                })
                .collect(),
            provider: "p".into(),
            model: "m".into(),
            usage: Usage::default(),
            stop_reason: StopReason::ToolUse,
            error_message: None,
            timestamp: 0,
        })
    }

    fn result(id: &str) -> Message {
        Message::tool_result(id, "exec", "ok", false)
    }

    fn shape(ms: &[Message]) -> Vec<String> {
        ms.iter()
            .map(|m| match m {
                Message::User(_) => "U".to_string(),
                Message::Assistant(a) => format!(
                    "A[{}]",
                    a.tool_calls().map(|c| c.0).collect::<Vec<_>>().join(",")
                ),
                Message::ToolResult(r) => {
                    format!("R{}{}", r.tool_call_id, if r.is_error { "!" } else { "" })
                }
            })
            .collect()
    }

    #[test]
    fn orphan_result_dropped() {
        let mut ms = vec![Message::user("hi"), result("gone"), Message::user("again")];
        let rep = repair_pairing(&mut ms);
        assert_eq!(shape(&ms), ["U", "U"]);
        assert_eq!(rep.dropped_orphans, ["gone"]);
    }

    #[test]
    fn missing_result_synthesized_after_existing_ones() {
        let mut ms = vec![
            Message::user("hi"),
            assistant_calls(&["a", "b"]),
            result("a"),
            Message::user("next"),
        ];
        let rep = repair_pairing(&mut ms);
        assert_eq!(shape(&ms), ["U", "A[a,b]", "Ra", "Rb!", "U"]);
        assert_eq!(rep.synthesized, ["b"]);
        assert_eq!(ms[3].text(), MISSING_RESULT);
    }

    #[test]
    fn duplicate_result_dropped() {
        let mut ms = vec![assistant_calls(&["a"]), result("a"), result("a")];
        let rep = repair_pairing(&mut ms);
        assert_eq!(shape(&ms), ["A[a]", "Ra"]);
        assert_eq!(rep.dropped_duplicates, ["a"]);
    }

    #[test]
    fn result_for_older_turn_is_orphan() {
        let mut ms = vec![
            assistant_calls(&["a"]),
            result("a"),
            Message::user("u"),
            result("a"),
        ];
        let rep = repair_pairing(&mut ms);
        assert_eq!(shape(&ms), ["A[a]", "Ra", "U"]);
        assert_eq!(rep.dropped_orphans, ["a"]);
    }

    #[test]
    fn trailing_unanswered_calls_get_results() {
        let mut ms = vec![Message::user("u"), assistant_calls(&["x"])];
        repair_pairing(&mut ms);
        assert_eq!(shape(&ms), ["U", "A[x]", "Rx!"]);
    }

    #[test]
    fn clean_history_untouched() {
        let mut ms = vec![
            Message::user("u"),
            assistant_calls(&["a", "b"]),
            result("b"),
            result("a"),
        ];
        let before = ms.clone();
        assert!(repair_pairing(&mut ms).is_clean());
        assert_eq!(ms, before);
    }

    #[test]
    fn turn_limit_keeps_last_n_users_then_repairs_leading_orphans() {
        let ms = vec![
            Message::user("1"),
            assistant_calls(&["a"]),
            result("a"),
            Message::user("2"),
            Message::user("3"),
        ];
        let (out, _) = prepare(
            &ms,
            HistoryLimits {
                max_user_turns: 2,
                old_tool_result_chars: 0,
            },
        );
        assert_eq!(shape(&out), ["U", "U"]);
        assert_eq!(out[0].text(), "2");
    }

    #[test]
    fn old_tool_results_trimmed_current_kept() {
        let big = "x".repeat(1000);
        let mut ms = vec![
            Message::user("1"),
            assistant_calls(&["a"]),
            Message::tool_result("a", "exec", big.clone(), false),
            Message::user("2"),
            assistant_calls(&["b"]),
            Message::tool_result("b", "exec", big.clone(), false),
        ];
        trim_old_tool_results(&mut ms, 100);
        assert!(ms[2].text().contains("characters omitted"));
        assert!(ms[2].text().len() < 200);
        assert_eq!(ms[5].text(), big);
    }

    #[test]
    fn head_tail_respects_char_boundaries() {
        let s = "é".repeat(50);
        let out = head_tail(&s, 10);
        assert!(out.starts_with("ééééééé\n"));
        assert!(out.ends_with("ééé"));
    }
}
