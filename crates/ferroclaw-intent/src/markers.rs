//! `[TOOL:name|key=value|…]` markers and `[DONE]`.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

use crate::schema::{resolve, strip_quotes};
use crate::{jsonscan, make_call, ParserConfig, StrategyOutput, ToolSpec};

static OPEN: LazyLock<Regex> =
    LazyLock::new(|| ferroclaw_types::literal_regex(r"(?i)\[\s*tool\s*:\s*"));
static DONE: LazyLock<Regex> =
    LazyLock::new(|| ferroclaw_types::literal_regex(r"(?i)\[\s*done\s*\]"));
static KEY: LazyLock<Regex> =
    LazyLock::new(|| ferroclaw_types::literal_regex(r"^\s*([A-Za-z_][A-Za-z0-9_\-]{0,40})\s*="));

pub(crate) fn parse(text: &str, tools: &[ToolSpec], cfg: &ParserConfig) -> StrategyOutput {
    let mut out = StrategyOutput::default();
    for m in DONE.find_iter(text) {
        out.done = true;
        out.markup.push(m.range());
    }
    for m in OPEN.find_iter(text) {
        if out.calls.len() >= crate::MAX_CALLS {
            break;
        }
        let body_start = m.end();
        let Some(close) = closing_bracket(text, body_start) else {
            // No later marker can close either (the rest of the text has no `]` at
            // depth 0 from here on); stop instead of rescanning.
            break;
        };
        let body = &text[body_start..close];
        let span = m.start()..close + 1;
        out.markup.push(span.clone());
        let parts = split_top(body, b'|');
        let Some(first) = parts.first() else { continue };
        let first = first.trim();
        // `[TOOL:name {json}]`
        let (name, inline_json) = match first.find('{') {
            Some(i) => (first[..i].trim(), Some(&first[i..])),
            None => (first, None),
        };
        let Some(tool) = resolve(name, tools, &cfg.aliases) else {
            continue;
        };
        let args = match inline_json.and_then(jsonscan::parse_lenient) {
            Some(v) => v,
            None => Value::Object(pairs(&parts[1..], tool)),
        };
        if let Some(c) = make_call(name, args, 0.9, span, tools, cfg) {
            out.calls.push(c);
        }
    }
    out
}

/// Index of the `]` closing a marker body starting at `start` (nested brackets allowed).
fn closing_bracket(text: &str, start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let limit = (start + 64 * 1024).min(text.len());
    for (i, b) in text.as_bytes()[..limit].iter().enumerate().skip(start) {
        match b {
            b'[' => depth += 1,
            b']' if depth == 0 => return Some(i),
            b']' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// Split on `sep` outside brackets and braces.
fn split_top(s: &str, sep: u8) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut last = 0;
    for (i, b) in s.as_bytes().iter().enumerate() {
        match b {
            b'[' | b'{' | b'(' => depth += 1,
            b']' | b'}' | b')' => depth -= 1,
            _ if *b == sep && depth <= 0 => {
                parts.push(&s[last..i]);
                last = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[last..]);
    parts
}

/// `key=value` segments. A segment that does not start with a known key (or any
/// identifier, when the schema lists no properties) continues the previous value: it was
/// a `|` inside the value.
fn pairs(parts: &[&str], tool: &ToolSpec) -> Map<String, Value> {
    let props = tool.properties();
    let known = |k: &str| props.is_empty() || props.iter().any(|(p, _)| p.eq_ignore_ascii_case(k));
    let mut entries: Vec<(Option<String>, String)> = Vec::new();
    for p in parts {
        let key = KEY
            .captures(p)
            .and_then(|c| Some((c.get(0)?.end(), c.get(1)?.as_str().to_string())))
            .filter(|(_, k)| known(k) || entries.is_empty() || is_synonym(k));
        match key {
            Some((end, k)) => entries.push((Some(k), p[end..].to_string())),
            None => match entries.last_mut() {
                Some((Some(_), v)) => {
                    v.push('|');
                    v.push_str(p);
                }
                _ => entries.push((None, p.to_string())),
            },
        }
    }
    let mut m = Map::new();
    for (k, v) in entries {
        let v = strip_quotes(v.trim()).to_string();
        match k {
            Some(k) => {
                m.insert(k, Value::String(v));
            }
            None => {
                if let Some(p) = tool.primary_property() {
                    if !m.contains_key(p) && !v.is_empty() {
                        m.insert(p.to_string(), Value::String(v));
                    }
                }
            }
        }
    }
    m
}

fn is_synonym(k: &str) -> bool {
    matches!(
        k.to_ascii_lowercase().as_str(),
        "file_path"
            | "filepath"
            | "file"
            | "cmd"
            | "q"
            | "url"
            | "input"
            | "text"
            | "old_text"
            | "new_text"
    )
}
