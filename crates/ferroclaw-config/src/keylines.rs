//! Maps each key path in a JSON5 document to the line where the key is
//! written, so warnings about unknown keys can point at the right line.
//!
//! This is a tolerant scanner, not a parser: it runs only on text that json5
//! already accepted, and it only needs to track nesting, object keys and
//! array indices. If it ever gets confused the worst outcome is a missing or
//! slightly wrong line number in a warning.

use std::collections::HashMap;

/// One step of a key path: an object key or an array index.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

/// Renders a path the way `serde_path_to_error` does: `a.b[0].c`.
pub(crate) fn render_path(segs: &[Seg]) -> String {
    let mut out = String::new();
    for seg in segs {
        match seg {
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
        }
    }
    out
}

enum Frame {
    Object {
        key: Option<String>,
        expecting_key: bool,
    },
    Array {
        index: usize,
    },
}

/// Returns (rendered key path → 1-based line) for every key in `text`; the
/// first occurrence wins when a key is repeated.
pub(crate) fn key_lines(text: &str) -> HashMap<String, usize> {
    let mut lines = HashMap::new();
    let mut stack: Vec<Frame> = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let mut line = 1;

    while i < chars.len() {
        let c = chars[i];
        match c {
            '\n' => {
                line += 1;
                i += 1;
            }
            '/' if chars.get(i + 1) == Some(&'/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '/' if chars.get(i + 1) == Some(&'*') => {
                i += 2;
                while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                    if chars[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
                i += 2;
            }
            '{' => {
                stack.push(Frame::Object {
                    key: None,
                    expecting_key: true,
                });
                i += 1;
            }
            '[' => {
                stack.push(Frame::Array { index: 0 });
                i += 1;
            }
            '}' | ']' => {
                stack.pop();
                i += 1;
            }
            ',' => {
                match stack.last_mut() {
                    Some(Frame::Object { expecting_key, .. }) => *expecting_key = true,
                    Some(Frame::Array { index }) => *index += 1,
                    None => {}
                }
                i += 1;
            }
            ':' => {
                if let Some(Frame::Object { expecting_key, .. }) = stack.last_mut() {
                    *expecting_key = false;
                }
                i += 1;
            }
            '"' | '\'' => {
                let start_line = line;
                let (s, next, newlines) = scan_string(&chars, i);
                line += newlines;
                i = next;
                record_key(&mut stack, &mut lines, s, start_line);
            }
            c if c == '_' || c == '$' || c.is_alphanumeric() => {
                let start = i;
                while i < chars.len()
                    && (chars[i] == '_' || chars[i] == '$' || chars[i].is_alphanumeric())
                {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                record_key(&mut stack, &mut lines, word, line);
            }
            _ => i += 1,
        }
    }
    lines
}

/// If the innermost container is an object waiting for a key, `token` is that
/// key: remember it and record its path. Otherwise it is a value and ignored.
fn record_key(stack: &mut [Frame], lines: &mut HashMap<String, usize>, token: String, line: usize) {
    let Some(Frame::Object { key, expecting_key }) = stack.last_mut() else {
        return;
    };
    if !*expecting_key {
        return;
    }
    *key = Some(token);
    // A key only counts once; a following value token must not replace it.
    *expecting_key = false;
    let path: Vec<Seg> = stack
        .iter()
        .filter_map(|f| match f {
            Frame::Object { key, .. } => key.clone().map(Seg::Key),
            Frame::Array { index } => Some(Seg::Index(*index)),
        })
        .collect();
    lines.entry(render_path(&path)).or_insert(line);
}

/// Scans a quoted string starting at `start` (the quote). Returns the decoded
/// text (simple escapes only), the index after the closing quote, and the
/// number of line breaks consumed (JSON5 allows escaped newlines).
fn scan_string(chars: &[char], start: usize) -> (String, usize, usize) {
    let quote = chars[start];
    let mut out = String::new();
    let mut newlines = 0;
    let mut i = start + 1;
    while i < chars.len() {
        let c = chars[i];
        if c == quote {
            return (out, i + 1, newlines);
        }
        if c == '\\' {
            if let Some(&next) = chars.get(i + 1) {
                if next == '\n' {
                    newlines += 1;
                }
                out.push(next);
            }
            i += 2;
            continue;
        }
        if c == '\n' {
            newlines += 1;
        }
        out.push(c);
        i += 1;
    }
    (out, i, newlines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nested_keys_and_array_indices() {
        let text = "// top\n{\n  agents: {\n    defaults: { 'model': \"x\",\n      modle: 1 },\n    list: [ { id: \"a\" },\n      { \"id\": \"b\", extra: true } ],\n  },\n  /* model: here? */ gateway: {},\n}\n";
        let lines = key_lines(text);
        assert_eq!(lines.get("agents"), Some(&3));
        assert_eq!(lines.get("agents.defaults.model"), Some(&4));
        assert_eq!(lines.get("agents.defaults.modle"), Some(&5));
        assert_eq!(lines.get("agents.list[0].id"), Some(&6));
        assert_eq!(lines.get("agents.list[1].extra"), Some(&7));
        assert_eq!(lines.get("gateway"), Some(&9));
        assert!(!lines.contains_key("model"));
    }
}
