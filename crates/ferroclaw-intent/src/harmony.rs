//! gpt-oss Harmony markup, intact or with the special tokens stripped.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::{jsonscan, make_call, ParserConfig, StrategyOutput, ToolSpec};

static RECIPIENT: LazyLock<Regex> =
    LazyLock::new(|| ferroclaw_types::literal_regex(r"\bto\s*=\s*([A-Za-z0-9_.\-]{1,128})"));
/// What may sit between the recipient and the arguments (a constraint token names any
/// short type, `<|constrain|>json`, `<|constrain|>2`).
static BETWEEN: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"^(?:\s+|<\|constrain\|>\s*[A-Za-z0-9_]{1,12}|<\|[a-z_]{1,20}\|>|commentary|analysis|assistant|json|code|constrain)*",
    )
});
static CONTEXT: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(r"(?:<\|[a-z_]{1,20}\|>|commentary|analysis|assistant)\s*$")
});
static CALL_END: LazyLock<Regex> =
    LazyLock::new(|| ferroclaw_types::literal_regex(r"^\s*(?:<\|call\|>|<\|end\|>)"));
static PLAIN_END: LazyLock<Regex> =
    LazyLock::new(|| ferroclaw_types::literal_regex(r"<\|(?:call|end|start|return)\|>"));
static FINAL: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?s)(?:<\|channel\|>\s*final\s*<\|message\|>|assistant\s*final(?:\s*<\|message\|>)?)",
    )
});
static FINAL_END: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"<\|(?:return|end|start|call)\|>|assistant(?:analysis|commentary)",
    )
});
static DETECT: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"<\|(?:channel|message|start|call|end|return|constrain)\|>|assistant(?:final|commentary|analysis)|commentary\s+to\s*=|^\s*analysis[A-Z]",
    )
});

pub(crate) fn parse(text: &str, tools: &[ToolSpec], cfg: &ParserConfig) -> StrategyOutput {
    let mut out = StrategyOutput::default();
    let detected = DETECT.is_match(text);
    for caps in RECIPIENT.captures_iter(text) {
        if out.calls.len() >= crate::MAX_CALLS {
            break;
        }
        let (Some(whole), Some(name)) = (caps.get(0), caps.get(1)) else {
            continue;
        };
        let mut raw = name.as_str();
        let mut name_end = whole.end();
        // A name with spaces (`to=functions.Web Search json`) runs past the match.
        if crate::schema::resolve(raw, tools, &cfg.aliases).is_none() {
            if let Some((long, end)) = spaced_name(text, name.start()) {
                if crate::schema::resolve(long, tools, &cfg.aliases).is_some() {
                    raw = long;
                    name_end = end;
                }
            }
        }
        let prefixed = raw.to_ascii_lowercase().starts_with("functions.");
        let before = &text[floor(text, whole.start().saturating_sub(48))..whole.start()];
        if !prefixed && !CONTEXT.is_match(before) {
            continue;
        }
        let after = &text[name_end..];
        let gap = BETWEEN.find(after).map_or(0, |m| m.end());
        let gap_text = &after[..gap];
        let has_message = gap_text.contains("<|message|>");
        let arg_start = name_end + gap;
        let (args, mut end) = if text[arg_start..].starts_with('{') {
            match jsonscan::value_at(text, arg_start) {
                Some((r, v)) => (v, r.end),
                None => continue,
            }
        } else if has_message {
            let rest = &text[arg_start..];
            let stop = PLAIN_END.find(rest).map_or(rest.len(), |m| m.start());
            let body = rest[..stop].trim();
            if body.is_empty() {
                continue;
            }
            (Value::String(body.to_string()), arg_start + stop)
        } else {
            continue;
        };
        if let Some(m) = CALL_END.find(&text[end..]) {
            end += m.end();
        }
        let intact = has_message || text[..end].ends_with("<|call|>");
        let start = message_start(text, whole.start());
        let conf = if intact { 0.98 } else { 0.9 };
        if let Some(c) = make_call(raw, args, conf, start..end, tools, cfg) {
            out.calls.push(c);
        }
    }
    if let Some(m) = FINAL.find(text) {
        let rest = &text[m.end()..];
        let stop = FINAL_END.find(rest).map_or(rest.len(), |e| e.start());
        let body = rest[..stop].trim();
        out.done = true;
        if !body.is_empty() {
            out.final_text = Some(body.to_string());
        }
    }
    if detected || !out.calls.is_empty() {
        // Everything in a Harmony transcript is markup except the final channel.
        out.markup.push(0..text.len());
    }
    out
}

/// The recipient from `start` up to the next token, brace or line end, without a
/// trailing `json`/`code`: `functions.Web Search`.
fn spaced_name(text: &str, start: usize) -> Option<(&str, usize)> {
    let rest = &text[start..];
    let stop = rest.find(['<', '{', '\n']).unwrap_or(rest.len()).min(96);
    let stop = floor(rest, stop);
    let mut cand = rest[..stop].trim_end();
    for tail in [" json", " code"] {
        if let Some(s) = cand.strip_suffix(tail) {
            cand = s.trim_end();
        }
    }
    (cand.contains(' ') && !cand.is_empty()).then(|| (cand, start + cand.len()))
}

/// Start of the Harmony message that holds the recipient at `pos`.
fn message_start(text: &str, pos: usize) -> usize {
    let from = floor(text, pos.saturating_sub(80));
    let window = &text[from..pos];
    if let Some(i) = window.rfind("<|start|>") {
        return from + i;
    }
    if let Some(i) = window.rfind("<|channel|>") {
        return from + i;
    }
    if let Some(i) = window.rfind("commentary") {
        let s = from + i;
        return if text[..s].ends_with("assistant") {
            s - "assistant".len()
        } else {
            s
        };
    }
    pos
}

pub(crate) fn floor(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}
