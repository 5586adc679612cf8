//! Text as clients and servers hand it over is not always text as the model wrote it.
//! Before any strategy looks at an answer:
//!
//! * reasoning streamed piece by piece and wrapped per piece
//!   (`<reasoning>get_</reasoning><reasoning>weather</reasoning>`) is joined, so a
//!   tool name split across pieces is whole again;
//! * DeepSeek's full-width special tokens (`<｜tool▁call▁begin｜>`) become ASCII ones, and
//!   its DSML namespace (`<｜｜DSML｜｜invoke …>`) is dropped;
//! * an answer that arrived JSON-escaped (`\"location\": \"Paris\"\n`, no real newline
//!   or quote) is unescaped, as is HTML-escaped markup (`&lt;tool_call&gt;`).
//!
//! Nothing is done (and nothing allocated) when none of this applies.

use std::borrow::Cow;

pub(crate) fn normalize(text: &str) -> Cow<'_, str> {
    let mut s = Cow::Borrowed(text);
    if s.contains('\u{ff5c}') {
        s = Cow::Owned(s.replace('\u{ff5c}', "|").replace('\u{2581}', "_"));
    }
    // DeepSeek's DSML markup (`<||DSML||invoke name="read">`) is the invoke markup
    // MiniMax writes, under a namespace.
    if s.contains("|DSML|") {
        s = Cow::Owned(
            s.replace("||DSML|| ", "")
                .replace("||DSML||", "")
                .replace("|DSML| ", "")
                .replace("|DSML|", ""),
        );
    }
    for tag in ["reasoning", "think", "thinking"] {
        let close = format!("</{tag}>");
        let open = format!("<{tag}>");
        if s.matches(close.as_str()).nth(1).is_some() && s.contains(&format!("{close}{open}")) {
            s = Cow::Owned(join_pieces(&s, &open, &close));
        }
    }
    // Gorilla OpenFunctions' `<<function>>get_weather(…)<<function>>get_weather(…)`:
    // each marker opens a call, as a line does.
    if s.contains("<<function>>") {
        s = Cow::Owned(gorilla_calls(&s));
    }
    // Roo's history header in place of MiniMax's invoke tag: `[Tool Use: NAME]` then
    // `<parameter name=…>` lines and `</invoke>`.
    if s.contains("[Tool Use: ") && s.contains("<parameter name=") {
        s = Cow::Owned(tool_use_headers(&s));
    }
    // MiniMax's internal namespace marks leaked around its markup.
    if s.contains("]<]minimax[>[") {
        s = Cow::Owned(s.replace("]<]minimax[>[", ""));
    }
    if s.contains("&lt;") && s.contains("&gt;") {
        s = Cow::Owned(
            s.replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&#39;", "'")
                .replace("&amp;", "&"),
        );
    }
    if looks_escaped(&s) {
        s = Cow::Owned(unescape(&s));
    }
    s
}

/// A `<<function>>` marker before a name or a list of calls becomes a line break; one
/// before anything else (a prompt's function list) stays.
fn gorilla_calls(s: &str) -> String {
    const MARK: &str = "<<function>>";
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find(MARK) {
        out.push_str(&rest[..at]);
        rest = &rest[at + MARK.len()..];
        // (Where a call can start: the text's or a line's start, a space, or the end of
        // the call before; not inside a quoted string.)
        let opens = out
            .chars()
            .next_back()
            .is_none_or(|c| c.is_whitespace() || c == ')');
        let named = opens
            && rest
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '[');
        out.push_str(if named { "\n" } else { MARK });
    }
    out.push_str(rest);
    out
}

/// `[Tool Use: NAME]` right before a `<parameter name=` tag becomes `<invoke name="NAME">`.
fn tool_use_headers(s: &str) -> String {
    const HEAD: &str = "[Tool Use: ";
    let mut out = String::with_capacity(s.len() + 16);
    let mut rest = s;
    while let Some(at) = rest.find(HEAD) {
        out.push_str(&rest[..at]);
        let after = &rest[at + HEAD.len()..];
        let name_end = after.find(']').filter(|&e| {
            e <= 80
                && after[..e]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        });
        match name_end {
            Some(e) if after[e + 1..].trim_start().starts_with("<parameter name=") => {
                out.push_str("<invoke name=\"");
                out.push_str(&after[..e]);
                out.push_str("\">");
                rest = &after[e + 1..];
            }
            _ => {
                out.push_str(HEAD);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// `<t>a</t><t>b</t>` → `a` `b` joined: the wrapper tags go, the text stays in order.
fn join_pieces(s: &str, open: &str, close: &str) -> String {
    s.replace(&format!("{close}{open}"), "")
        .replace(open, "")
        .replace(close, "")
}

/// Escaped newlines or quotes, and not one real newline or bare quote: a JSON string
/// body. (JSON that merely holds escaped strings has bare quotes around them.)
fn looks_escaped(s: &str) -> bool {
    if s.contains('\n') || !(s.matches("\\n").nth(2).is_some() || s.contains("\\\"")) {
        return false;
    }
    let b = s.as_bytes();
    !b.iter()
        .enumerate()
        .any(|(i, &c)| c == b'"' && (i == 0 || b[i - 1] != b'\\'))
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => {}
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some('/') => out.push('/'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) => out.push(ch),
                    None => {
                        out.push_str("\\u");
                        out.push_str(&hex);
                    }
                }
            }
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn joins_wrapped_pieces() {
        let t =
            "<reasoning>We need to call get_</reasoning><reasoning>weather for Paris.</reasoning>";
        assert_eq!(normalize(t), "We need to call get_weather for Paris.");
    }

    #[test]
    fn plain_text_is_borrowed() {
        let t = "Hello <think>x</think> world \\n";
        assert!(matches!(normalize(t), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn escaped_answers_and_full_width_tokens() {
        assert_eq!(
            normalize(r#"<tool_call>\n{\"name\": \"f\"}\n</tool_call>"#),
            "<tool_call>\n{\"name\": \"f\"}\n</tool_call>"
        );
        assert_eq!(
            normalize("<\u{ff5c}tool\u{2581}call\u{2581}begin\u{ff5c}>"),
            "<|tool_call_begin|>"
        );
        assert_eq!(normalize("&lt;tool_call&gt;"), "<tool_call>");
    }
}
