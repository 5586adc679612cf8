//! Cleans a final answer before a person sees it: models leak reasoning tags, the
//! runtime's own downgraded tool-call text, and sometimes repeat themselves.

use std::sync::LazyLock;

use regex::Regex;

/// The exact reply that means "say nothing".
pub const SILENT_REPLY: &str = "NO_REPLY";

static THINK_BLOCK: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?is)<\s*(think|thinking|reasoning)\s*>.*?<\s*/\s*(think|thinking|reasoning)\s*>",
    )
});
static STRAY_CLOSE: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(r"(?is)^.*?<\s*/\s*(think|thinking|reasoning)\s*>")
});
static UNCLOSED_OPEN: LazyLock<Regex> =
    LazyLock::new(|| ferroclaw_types::literal_regex(r"(?is)<\s*(think|thinking|reasoning)\s*>.*$"));
static FINAL_TAG: LazyLock<Regex> =
    LazyLock::new(|| ferroclaw_types::literal_regex(r"(?i)<\s*/?\s*final\s*>"));
static DOWNGRADED: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?m)^[ \t]*\[(Tool Call|Tool Result|Historical context):[^\n]*\][ \t]*\n?",
    )
});
static BLANK_RUNS: LazyLock<Regex> =
    LazyLock::new(|| ferroclaw_types::literal_regex(r"\n[ \t]*\n(?:[ \t]*\n)+"));

/// Returns the user-facing form of a model's final text.
pub fn sanitize_output(text: &str) -> String {
    // Fast path: most answers carry none of the markers.
    let suspicious = text.contains('<') || text.contains("[T") || text.contains("[H");
    let mut out = if suspicious {
        let mut s = THINK_BLOCK.replace_all(text, "").into_owned();
        // A closing tag with no opener: everything before it was reasoning.
        if STRAY_CLOSE.is_match(&s) {
            s = STRAY_CLOSE.replace(&s, "").into_owned();
        }
        // An opener that never closes: the rest is reasoning (stream cut mid-thought).
        s = UNCLOSED_OPEN.replace(&s, "").into_owned();
        s = FINAL_TAG.replace_all(&s, "").into_owned();
        DOWNGRADED.replace_all(&s, "").into_owned()
    } else {
        text.to_string()
    };
    if out.contains("\n\n") || out.len() > 40 {
        out = collapse_stutter(&out);
    }
    let trimmed = out.trim();
    if trimmed.len() == out.len() {
        out
    } else {
        trimmed.to_string()
    }
}

/// True when the reply asks to stay silent.
pub fn is_silent(text: &str) -> bool {
    text.trim() == SILENT_REPLY
}

/// Removes a paragraph repeated back to back, and an answer emitted twice in full.
fn collapse_stutter(text: &str) -> String {
    let normalised = BLANK_RUNS.replace_all(text, "\n\n");
    let trimmed = normalised.trim();
    // Whole answer doubled, with or without a separator between the halves.
    let half = trimmed.len() / 2;
    if trimmed.len() >= 40 && trimmed.is_char_boundary(half) {
        let (a, b) = trimmed.split_at(half);
        if a.trim() == b.trim() {
            return a.trim().to_string();
        }
    }
    let mut kept: Vec<&str> = Vec::new();
    for para in trimmed.split("\n\n") {
        let p = para.trim();
        if p.is_empty() {
            continue;
        }
        if kept.last().is_some_and(|last| last.trim() == p) {
            continue;
        }
        kept.push(para);
    }
    kept.join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_think_blocks_and_keeps_answer() {
        assert_eq!(
            sanitize_output("<think>plan it</think>The answer is 4."),
            "The answer is 4."
        );
        assert_eq!(
            sanitize_output("<thinking>\nmulti\nline\n</thinking>\n\nHi"),
            "Hi"
        );
    }

    #[test]
    fn stray_closing_tag_drops_leading_reasoning() {
        assert_eq!(sanitize_output("hmm let me see</think>Done."), "Done.");
    }

    #[test]
    fn unclosed_think_is_dropped() {
        assert_eq!(sanitize_output("Result: ok\n<think>but wait"), "Result: ok");
    }

    #[test]
    fn final_tags_removed_content_kept() {
        assert_eq!(sanitize_output("<final>All set.</final>"), "All set.");
    }

    #[test]
    fn downgraded_tool_text_removed() {
        let raw =
            "[Tool Call: exec (ID: call_1)]\nI listed the files.\n[Historical context: earlier]\n";
        assert_eq!(sanitize_output(raw), "I listed the files.");
    }

    #[test]
    fn stuttered_paragraphs_collapse() {
        let raw = "First paragraph here.\n\nFirst paragraph here.\n\nSecond one.";
        assert_eq!(sanitize_output(raw), "First paragraph here.\n\nSecond one.");
    }

    #[test]
    fn doubled_answer_collapses() {
        let once = "The build passed and all tests are green now.";
        assert_eq!(sanitize_output(&format!("{once}{once}")), once);
    }

    #[test]
    fn distinct_paragraphs_survive() {
        let raw = "Alpha.\n\nBeta.\n\nAlpha.";
        assert_eq!(sanitize_output(raw), raw);
    }

    #[test]
    fn silent_reply_detected() {
        assert!(is_silent("  NO_REPLY\n"));
        assert!(!is_silent("NO_REPLY because"));
    }
}
