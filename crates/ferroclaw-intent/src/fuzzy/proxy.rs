//! A tool that calls another tool by name (MCP's `use_mcp_tool`, `mcp_sse_call_tool`:
//! `tool_name` and `arguments`): "使用mcp_sse_call_tool调用GetCurrentTime，参数为{"city":
//! "Shanghai"}" names the inner tool and its arguments in the sentence.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::sentence_around;
use crate::{ParsedCall, ToolSpec};

/// The inner tool: an identifier after a verb of calling.
static INNER: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?:调用|使用|call|calling|invoke|invoking|use|using)\s*(?:the\s+)?`?([A-Za-z][A-Za-z0-9]*(?:[_-][A-Za-z0-9]+)*)`?",
    )
});

/// Fill `tool_name` and `arguments` of each proxy call from the text around it.
pub(super) fn fill_proxy(text: &str, tools: &[ToolSpec], calls: &mut [ParsedCall]) {
    for c in calls.iter_mut() {
        let Some(tool) = tools.iter().find(|t| t.name == c.name) else {
            continue;
        };
        let props = tool.properties();
        let has = |k: &str| props.iter().any(|(p, _)| *p == k);
        if !has("tool_name") || !has("arguments") {
            continue;
        }
        let Some(args) = c.arguments.as_object_mut() else {
            continue;
        };
        // (The sentence of the call, and the one before when the name came first.)
        // (The call's own sentence only: not a tool named in a warning before it, "Never
        // use drop_database…".)
        let sent = sentence_around(text, &c.span);
        let region = &text[sent.clone()];
        let lower = region.to_ascii_lowercase();
        if ["never", "don't", "won't", "not ", "avoid", "不", "别", "没"]
            .iter()
            .any(|n| lower.contains(n))
        {
            continue;
        }
        let inner = INNER
            .captures_iter(region)
            .filter_map(|m| m.get(1))
            .map(|m| m.as_str())
            .filter(|n| {
                // Written as a tool's name is (`GetCurrentTime`, `get_time`), and no offered
                // tool's own.
                (n.contains('_') || n.chars().skip(1).any(char::is_uppercase))
                    && !tools.iter().any(|t| t.name.eq_ignore_ascii_case(n))
            })
            .last();
        let Some(inner) = inner else { continue };
        args.insert("tool_name".into(), Value::String(inner.to_string()));
        if args.contains_key("arguments") {
            continue;
        }
        let at = region.find(inner).unwrap_or(0);
        let Some((r, v)) = crate::jsonscan::find_objects(&region[at..])
            .into_iter()
            .next()
        else {
            continue;
        };
        let as_string = tool.prop_type("arguments") == Some("string");
        let written = region[at + r.start..at + r.end].to_string();
        args.insert(
            "arguments".into(),
            if as_string { Value::String(written) } else { v },
        );
    }
}
