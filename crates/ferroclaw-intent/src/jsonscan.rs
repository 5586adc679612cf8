//! Finding JSON objects in free text.

use std::ops::Range;

use serde_json::Value;

/// Strict JSON first, then JSON5 (unquoted keys, single quotes, trailing commas).
pub(crate) fn parse_lenient(s: &str) -> Option<Value> {
    if s.is_empty() || s.len() > 1_000_000 {
        return None;
    }
    if let Ok(v) = serde_json::from_str::<Value>(s) {
        return Some(v);
    }
    let first = s.trim_start().chars().next()?;
    if first != '{' && first != '[' {
        return None;
    }
    json5::from_str::<Value>(s).ok()
}

/// End (exclusive) of the balanced `{…}` or `[…]` starting at `start`, string-aware.
pub(crate) fn balanced_end(text: &str, start: usize, single_quotes: bool) -> Option<usize> {
    let bytes = text.as_bytes();
    let open = *bytes.get(start)?;
    if open != b'{' && open != b'[' {
        return None;
    }
    let mut depth = 0usize;
    let mut in_str: Option<u8> = None;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate().skip(start) {
        if let Some(q) = in_str {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == q {
                in_str = None;
            }
            continue;
        }
        match b {
            b'"' => in_str = Some(b'"'),
            b'\'' if single_quotes => in_str = Some(b'\''),
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// Parse the JSON value starting at `start` (which must be `{` or `[`).
pub(crate) fn value_at(text: &str, start: usize) -> Option<(Range<usize>, Value)> {
    for sq in [false, true] {
        if let Some(end) = balanced_end(text, start, sq) {
            if let Some(v) = parse_lenient(&text[start..end]) {
                return Some((start..end, v));
            }
        }
    }
    None
}

/// All top-level JSON objects in `text`, in order.
pub(crate) fn find_objects(text: &str) -> Vec<(Range<usize>, Value)> {
    let mut out = Vec::new();
    let mut pos = 0;
    let mut failures = 0;
    while pos < text.len() && failures < 32 {
        let Some(off) = text[pos..].find('{') else {
            break;
        };
        let start = pos + off;
        match value_at(text, start) {
            Some((r, v)) if v.is_object() => {
                pos = r.end;
                out.push((r, v));
            }
            _ => {
                failures += 1;
                pos = start + 1;
            }
        }
    }
    out
}
