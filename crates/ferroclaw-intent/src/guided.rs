//! `{"tool_calls":[{"name","arguments"}],"done":bool}`, bare, fenced or inside prose.

use std::ops::Range;

use serde_json::Value;

use crate::{jsonscan, make_call, ParserConfig, StrategyOutput, ToolSpec};

pub(crate) fn parse(text: &str, tools: &[ToolSpec], cfg: &ParserConfig) -> StrategyOutput {
    let mut out = StrategyOutput::default();
    if !text.contains('{') {
        return out;
    }
    for (range, obj) in jsonscan::find_objects(text) {
        if out.calls.len() >= crate::MAX_CALLS {
            break;
        }
        let list = ["tool_calls", "calls", "tool_call", "actions"]
            .iter()
            .find_map(|k| obj.get(*k));
        let done = match obj.get("done") {
            Some(Value::Bool(b)) => Some(*b),
            Some(Value::String(s)) => Some(s.trim().eq_ignore_ascii_case("true")),
            _ => None,
        };
        let items: Vec<&Value> = match list {
            Some(Value::Array(a)) => a.iter().collect(),
            Some(v @ Value::Object(_)) => vec![v],
            Some(_) => Vec::new(),
            None if done.is_some() => Vec::new(),
            // A bare `{"name": …, "arguments": …}` object.
            None if obj.get("name").is_some_and(|n| n.is_string())
                && ["arguments", "args", "parameters"]
                    .iter()
                    .any(|k| obj.get(*k).is_some()) =>
            {
                vec![&obj]
            }
            None => continue,
        };
        if done == Some(true) {
            out.done = true;
        }
        // The finishing object carries the answer for the user.
        if out.final_text.is_none() {
            out.final_text = ["answer", "final_answer", "final", "response"]
                .iter()
                .find_map(|k| obj.get(*k).and_then(Value::as_str))
                .filter(|s| !s.trim().is_empty())
                .map(str::to_string);
        }
        let span = with_fence(text, range);
        out.markup.push(span.clone());
        let conf = if list.is_some() { 0.95 } else { 0.8 };
        for item in items {
            let (name, args) = name_and_args(item);
            let Some(name) = name else { continue };
            if let Some(c) = make_call(&name, args, conf, span.clone(), tools, cfg) {
                out.calls.push(c);
            }
        }
    }
    out
}

fn name_and_args(item: &Value) -> (Option<String>, Value) {
    let func = item.get("function");
    let name = item
        .get("name")
        .or_else(|| item.get("tool"))
        .or_else(|| item.get("tool_name"))
        .or_else(|| func.and_then(|f| f.get("name")))
        .or_else(|| func.filter(|f| f.is_string()))
        .and_then(|v| v.as_str())
        .map(str::to_string);
    let args = ["arguments", "args", "parameters", "input", "params"]
        .iter()
        .find_map(|k| item.get(*k))
        .or_else(|| func.and_then(|f| f.get("arguments")))
        .cloned()
        .unwrap_or(Value::Null);
    (name, args)
}

/// Grow a JSON range over a surrounding Markdown code fence.
fn with_fence(text: &str, r: Range<usize>) -> Range<usize> {
    let before = &text[..r.start];
    let trimmed = before.trim_end();
    let mut start = r.start;
    if let Some(i) = trimmed.rfind("```") {
        let tag = &trimmed[i + 3..];
        if tag.chars().all(|c| c.is_ascii_alphanumeric()) {
            start = i;
        }
    }
    let after = &text[r.end..];
    let mut end = r.end;
    let ta = after.trim_start();
    if start != r.start && ta.starts_with("```") {
        end = r.end + (after.len() - ta.len()) + 3;
    }
    start..end
}
