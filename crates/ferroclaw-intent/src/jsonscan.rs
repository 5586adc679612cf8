//! Finding JSON objects in free text.

use std::ops::Range;

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// A call's argument key glued to its value by something other than `": "`:
/// `"parameters>{`, `"parameters {`, `"parameters={`, `"parameters({`, `"arguments':{`.
static ARG_KEY: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r#""(parameters|arguments|args|params|input)\s*(?:['"]\s*)?(?:>|=|:|\\>|\()?\s*([\[{])"#,
    )
});
/// `"name": get_weather,` — a bare word where a string belongs.
static BARE_VALUE: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(r#"(:\s*)([A-Za-z_][A-Za-z0-9_.\-]*)(\s*[,}\]])"#)
});
/// `"x": 10 - 5`: a value written as the arithmetic that gives it.
static ARITHMETIC: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r#"("\s*:\s*)(-?\d{1,15}(?:\.\d{1,15})?)\s*([-+*/])\s*(-?\d{1,15}(?:\.\d{1,15})?)(\s*[,}\]])"#,
    )
});
/// `{"command": "ls", ...}` — an elision where more members were left out.
static ELISION: LazyLock<Regex> =
    LazyLock::new(|| ferroclaw_types::literal_regex(r#",\s*(?:\.\.\.|\u{2026})\s*([}\]])"#));
/// `{"name","get_x"` — a comma for the colon after `"name"`.
static NAME_COMMA: LazyLock<Regex> =
    LazyLock::new(|| ferroclaw_types::literal_regex(r#""name"\s*,\s*""#));

/// `"name": "get_x\ "arguments"`: the comma and closing quote after the name lost.
static NAME_RUN_ON: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r#""name"\s*:\s*"([A-Za-z_][\w.-]{0,80})\\?\s+"(arguments|parameters|args)""#,
    )
});

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
    // Typographic quotes from a chat front end, and backslashes JSON does not know
    // (`".*\(\.cpp\)$"` written for a shell): JSON5 would drop those backslashes.
    if let Some(plain) = plain_quotes_and_escapes(s) {
        if let Some(v) = serde_json::from_str::<Value>(&plain)
            .ok()
            .or_else(|| json5::from_str::<Value>(&plain).ok())
        {
            return Some(v);
        }
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

/// Parse the JSON value starting at `start` (which must be `{` or `[`). Damaged JSON
/// is repaired ([`repair`]); an object left open at the end of the text is closed.
pub(crate) fn value_at(text: &str, start: usize) -> Option<(Range<usize>, Value)> {
    let mut ends = Vec::with_capacity(2);
    for sq in [false, true] {
        if let Some(end) = balanced_end(text, start, sq) {
            if let Some(v) = parse_lenient(&text[start..end]) {
                return Some((start..end, v));
            }
            ends.push(end);
        }
    }
    for end in ends {
        if let Some(v) = repair(&text[start..end]) {
            return Some((start..end, v));
        }
    }
    // Never closed: small models stop before the last braces. Only a short tail counts,
    // so a stray `{` in prose does not swallow the rest of the answer; a code fence or a
    // special token ends it.
    let mut tail = &text[start..];
    for stop in ["```", "<|", "</"] {
        if let Some(i) = tail.find(stop) {
            tail = &tail[..i];
        }
    }
    if tail.len() <= 4096 {
        // The object may be followed by prose: try it whole, then up to each line end,
        // the longest first (the first line alone, `{`, would repair to nothing).
        let mut ends: Vec<usize> = vec![tail.trim_end().len()];
        let mut lines: Vec<usize> = tail.match_indices('\n').map(|(i, _)| i).take(16).collect();
        lines.reverse();
        ends.extend(lines);
        for len in ends {
            let end = start + tail[..len].trim_end().len();
            if end <= start + 1 {
                continue;
            }
            if let Some(v) = repair(&text[start..end]) {
                return Some((start..end, v));
            }
        }
    }
    None
}

/// Repairs the damage small models do to JSON: quotes of the wrong kind next to
/// structure (`"parameters':{'city':'New York'}`), `>` or `=` for `:`
/// (`"parameters>{`), Python literals, and brackets left open at the end.
pub(crate) fn repair(s: &str) -> Option<Value> {
    if s.len() > 64 * 1024 {
        return None;
    }
    // Quotes escaped in part of the object only (`"parameters\":{\"timezone\":…`).
    let unescaped;
    let s = if s.contains("\\\"") {
        unescaped = s.replace("\\\"", "\"");
        if let Some(v) = parse_lenient(&unescaped) {
            return Some(v);
        }
        unescaped.as_str()
    } else {
        s
    };
    let keyed = ARG_KEY.replace_all(s, "\"$1\": $2");
    let keyed = NAME_COMMA.replace_all(&keyed, "\"name\": \"");
    let keyed = NAME_RUN_ON.replace_all(&keyed, "\"name\": \"$1\", \"$2\"");
    let keyed = ELISION.replace_all(&keyed, "$1");
    // A stray `\>` before a key.
    let keyed = keyed.replace("{\\>", "{");
    let fixed = fix_structure(&keyed);
    if let Some(v) = parse_lenient(&fixed) {
        return Some(v);
    }
    let fixed = ARITHMETIC
        .replace_all(&fixed, |c: &regex::Captures| {
            match arithmetic(&c[2], &c[3], &c[4]) {
                Some(v) => format!("{}{v}{}", &c[1], &c[5]),
                None => c[0].to_string(),
            }
        })
        .into_owned();
    let fixed = BARE_VALUE
        .replace_all(&fixed, |c: &regex::Captures| {
            let w = &c[2];
            if matches!(w, "true" | "false" | "null") {
                c[0].to_string()
            } else {
                format!("{}\"{w}\"{}", &c[1], &c[3])
            }
        })
        .into_owned();
    if let Some(v) = parse_lenient(&fixed) {
        return Some(v);
    }
    if let Some(v) = parse_lenient(&close_open(&fixed)) {
        return Some(v);
    }
    // `{{"name": "x"}}`: a template's escaped braces copied literally.
    if let Some(inner) = fixed.strip_prefix("{{").and_then(|r| r.strip_suffix("}}")) {
        if let Some(v) = parse_lenient(&format!("{{{inner}}}")) {
            return Some(v);
        }
    }
    // Junk after the last brace (`}}"`): cut back to the last balanced object.
    let t = fixed.trim_end_matches(|c: char| c != '}' && c != ']');
    (t.len() < fixed.len()).then(|| parse_lenient(t)).flatten()
}

/// `a op b` worked out, as JSON text: whole numbers stay whole.
fn arithmetic(a: &str, op: &str, b: &str) -> Option<String> {
    if let (Ok(x), Ok(y)) = (a.parse::<i64>(), b.parse::<i64>()) {
        let v = match op {
            "+" => x.checked_add(y),
            "-" => x.checked_sub(y),
            "*" => x.checked_mul(y),
            _ => None,
        };
        if let Some(v) = v {
            return Some(v.to_string());
        }
    }
    let (x, y) = (a.parse::<f64>().ok()?, b.parse::<f64>().ok()?);
    let v = match op {
        "+" => x + y,
        "-" => x - y,
        "*" => x * y,
        _ => x / y,
    };
    serde_json::Number::from_f64(v).map(|n| n.to_string())
}

/// `s` with typographic quotes made plain and stray backslashes doubled, or `None`
/// when it has neither.
fn plain_quotes_and_escapes(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len() + 8);
    let mut changed = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{201c}' | '\u{201d}' | '\u{201e}' => {
                out.push('"');
                changed = true;
            }
            '\u{2018}' | '\u{2019}' => {
                out.push('\'');
                changed = true;
            }
            '\\' => match chars.peek() {
                Some(&n)
                    if matches!(
                        n,
                        '"' | '\'' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't' | 'u'
                    ) =>
                {
                    out.push('\\');
                    out.push(n);
                    chars.next();
                }
                // A Markdown escape kept when the answer was copied as rendered
                // (`"action\_input"`, inside a word): the character itself (not
                // `C:\_backup`, `\*.log`).
                Some('_') if out.ends_with(|c: char| c.is_ascii_alphanumeric()) => {
                    out.push('_');
                    chars.next();
                    changed = true;
                }
                _ => {
                    out.push_str("\\\\");
                    changed = true;
                }
            },
            _ => out.push(c),
        }
    }
    changed.then_some(out)
}

/// Structural characters a quote of either kind may sit next to.
fn structural(c: Option<char>) -> bool {
    matches!(c, None | Some('{' | '}' | '[' | ']' | ':' | ','))
}

fn fix_structure(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len() + 8);
    let mut in_str = false;
    let prev_sig = |i: usize| {
        chars[..i]
            .iter()
            .rev()
            .find(|c| !c.is_whitespace())
            .copied()
    };
    let next_sig = |i: usize| chars[i + 1..].iter().find(|c| !c.is_whitespace()).copied();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if in_str {
            match c {
                '\\' => {
                    out.push(c);
                    if let Some(n) = chars.get(i + 1) {
                        out.push(*n);
                    }
                    i += 2;
                    continue;
                }
                // A quote of either kind closes the string when structure follows it.
                '"' | '\'' if structural(next_sig(i)) || next_sig(i) == Some('>') => {
                    out.push('"');
                    in_str = false;
                    // `"key">{` → `"key":{`
                    let mut j = i + 1;
                    while j < chars.len() && chars[j].is_whitespace() {
                        j += 1;
                    }
                    if chars.get(j) == Some(&'>') {
                        out.push(':');
                        i = j + 1;
                        continue;
                    }
                }
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => {}
                _ => out.push(c),
            }
        } else {
            match c {
                // A quote right after a closing bracket opens nothing a value could
                // follow (`[2,3]"}}`): it is debris.
                '"' | '\'' if matches!(prev_sig(i), Some('}' | ']')) => {}
                '"' | '\'' if structural(prev_sig(i)) => {
                    out.push('"');
                    in_str = true;
                }
                '=' if next_sig(i).is_some() => out.push(':'),
                _ => out.push(c),
            }
        }
        i += 1;
    }
    if in_str {
        out.push('"');
    }
    // Python literals outside strings are rare enough in keys that a word swap is safe.
    for (py, js) in [
        (": True", ": true"),
        (": False", ": false"),
        (": None", ": null"),
    ] {
        if out.contains(py) {
            out = out.replace(py, js);
        }
    }
    out
}

/// Close what is left open (string-aware): a closer of the wrong kind first gets the
/// closers it skipped (`{"a": {"b": 1]` → `{"a": {"b": 1}]`), and the brackets still
/// open at the end are appended.
fn close_open(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    let mut stack = Vec::new();
    let mut in_str = false;
    let mut escaped = false;
    for c in s.trim_end().trim_end_matches(',').chars() {
        if in_str {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_str = false;
            }
            out.push(c);
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' => stack.push('}'),
            '[' => stack.push(']'),
            '}' | ']' => {
                if stack.contains(&c) {
                    while let Some(top) = stack.pop() {
                        if top == c {
                            break;
                        }
                        out.push(top);
                    }
                } else {
                    // A closer with nothing of its kind open is dropped.
                    continue;
                }
            }
            _ => {}
        }
        out.push(c);
    }
    if in_str {
        out.push('"');
    }
    while let Some(c) = stack.pop() {
        out.push(c);
    }
    out
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
