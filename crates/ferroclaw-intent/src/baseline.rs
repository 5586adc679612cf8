//! Baseline for measurement only: the seed specification's literal fuzzy regex set
//! (five patterns, one per tool; a tool is reported at most once per text, confidence
//! 0.6). Reimplemented here so the evaluation can compare against it; not used by
//! [`crate::parse`]. Go's RE2 `\w` is ASCII-only, so it is spelled `[0-9A-Za-z_]` here.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{json, Value};

use crate::{ParsedCall, Source, Strategy, ToolSpec};

const W: &str = "[0-9A-Za-z_]";

static PATTERNS: LazyLock<Vec<(&'static str, &'static str, Regex)>> = LazyLock::new(|| {
    let w = W;
    let specs: [(&str, &str, String); 5] = [
        (
            "web_search",
            "query",
            r#"(?i)(?:search|look up|query|find)\s+(?:for\s+)?["']?(.+?)["']?(?:\s+(?:on|using|via)|[.\n]|$)"#
                .to_string(),
        ),
        (
            "web_fetch",
            "url",
            r"(?i)(?:fetch|retrieve|get|download|open)\s+(?:the\s+)?(?:page|url|site|content)?\s*(?:at|from)?\s*(https?://\S+)"
                .to_string(),
        ),
        (
            "read",
            "path",
            format!(r#"(?i)(?:read|open|view|check)\s+(?:the\s+)?(?:file|contents?\s+of)\s+["'`]?([/{w}.\-]+)["'`]?"#),
        ),
        (
            "write",
            "path",
            format!(r#"(?i)(?:write|save|create|output)\s+(?:to|as|the file)\s+["'`]?([/{w}.\-]+)["'`]?"#),
        ),
        (
            "exec",
            "command",
            r#"(?i)(?:run|execute|exec)\s+(?:the\s+)?(?:command|shell|bash)?\s*["'`](.+?)["'`]"#
                .to_string(),
        ),
    ];
    specs
        .into_iter()
        // Every pattern is a literal (`patterns_all_compile` checks them).
        .filter_map(|(t, k, re)| Regex::new(&re).ok().map(|re| (t, k, re)))
        .collect()
});

/// The seed's fuzzy pass over one text.
pub fn parse(text: &str, tools: &[ToolSpec]) -> Vec<ParsedCall> {
    let mut out: Vec<ParsedCall> = Vec::new();
    for (tool, key, re) in PATTERNS.iter() {
        if !tools.iter().any(|t| t.name == *tool) {
            continue;
        }
        for caps in re.captures_iter(text) {
            let (Some(m0), Some(m1)) = (caps.get(0), caps.get(1)) else {
                continue;
            };
            let mut v = m1.as_str().trim().to_string();
            if *tool == "web_fetch" && !v.starts_with("http") {
                v = format!("https://{v}");
            }
            // The seed de-duplicates by tool name only.
            if out.iter().any(|c| c.name == *tool) {
                continue;
            }
            let mut args = serde_json::Map::new();
            args.insert((*key).to_string(), Value::String(v));
            out.push(ParsedCall {
                name: (*tool).to_string(),
                arguments: json!(args),
                confidence: 0.6,
                strategy: Strategy::Fuzzy,
                source: Source::Content,
                span: m0.range(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn patterns_all_compile() {
        assert_eq!(super::PATTERNS.len(), 5);
    }
}
