//! The tool result guard: one tool result may not flood the transcript (and every later
//! context) with megabytes of output.

use ferroclaw_types::{ContentBlock, ToolResultMessage};

/// Default cap on the text of one persisted tool result, in characters.
pub const DEFAULT_TOOL_RESULT_CHARS: usize = 50_000;
/// Each text block keeps at least this much (or all of itself when shorter).
const MIN_BLOCK_CHARS: usize = 2_000;
/// A cut moves back to a newline when one lies within this share of the block budget.
const NEWLINE_WINDOW_DIVISOR: usize = 5;

/// Caps the text of `result` to about `max_chars` characters in total. The budget is
/// shared across its text blocks in proportion to their size (at least 2,000 each); a
/// block over its share is cut at a newline near the end of its share when there is
/// one, and a note says how much was dropped. Returns whether anything was cut.
pub fn cap_tool_result(result: &mut ToolResultMessage, max_chars: usize) -> bool {
    if max_chars == 0 {
        return false;
    }
    let sizes: Vec<usize> = result
        .content
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => text.chars().count(),
            _ => 0,
        })
        .collect();
    let total: usize = sizes.iter().sum();
    if total <= max_chars {
        return false;
    }
    let mut cut_any = false;
    for (block, &size) in result.content.iter_mut().zip(&sizes) {
        let ContentBlock::Text { text } = block else {
            continue;
        };
        // Proportional share, computed in u128 so huge outputs cannot overflow.
        let share = (size as u128 * max_chars as u128 / total as u128) as usize;
        let budget = share.max(MIN_BLOCK_CHARS.min(size));
        if size <= budget {
            continue;
        }
        *text = cut_text(text, size, budget);
        cut_any = true;
    }
    cut_any
}

fn cut_text(text: &str, size: usize, budget: usize) -> String {
    let byte_end = text
        .char_indices()
        .nth(budget)
        .map_or(text.len(), |(i, _)| i);
    let head = &text[..byte_end];
    let window = budget / NEWLINE_WINDOW_DIVISOR;
    let window_start = head
        .char_indices()
        .nth(budget.saturating_sub(window))
        .map_or(head.len(), |(i, _)| i);
    let cut = head[window_start..]
        .rfind('\n')
        .map_or(head.len(), |i| window_start + i + 1);
    let kept = &text[..cut];
    let kept_chars = kept.chars().count();
    format!(
        "{kept}\n[... tool result truncated: {} of {size} characters omitted ...]",
        size - kept_chars
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(blocks: Vec<String>) -> ToolResultMessage {
        ToolResultMessage {
            tool_call_id: "c".into(),
            tool_name: "exec".into(),
            content: blocks.into_iter().map(ContentBlock::text).collect(),
            is_error: false,
            timestamp: 0,
        }
    }

    fn texts(r: &ToolResultMessage) -> Vec<String> {
        r.content
            .iter()
            .map(|b| match b {
                ContentBlock::Text { text } => text.clone(),
                _ => String::new(),
            })
            .collect()
    }

    #[test]
    fn small_results_are_untouched() {
        let mut r = result(vec!["a".repeat(100)]);
        assert!(!cap_tool_result(&mut r, 1_000));
        assert_eq!(texts(&r)[0].len(), 100);
    }

    #[test]
    fn cut_lands_on_a_newline_near_the_budget_with_a_note() {
        let line = format!("{}\n", "x".repeat(99)); // 100 chars per line
        let mut r = result(vec![line.repeat(1_000)]); // 100,000 chars
        assert!(cap_tool_result(&mut r, 50_050));
        let t = &texts(&r)[0];
        let (kept, note) = t
            .split_once("\n[... tool result truncated: ")
            .expect("note");
        assert!(kept.ends_with('x') || kept.ends_with('\n'));
        assert_eq!(kept.len() % 100, 0, "cut at a line end");
        assert!(kept.len() <= 50_050 && kept.len() >= 40_000);
        assert!(note.contains("of 100000 characters omitted"), "{note}");
    }

    #[test]
    fn budget_is_shared_with_a_floor_per_block() {
        let mut r = result(vec![
            "a".repeat(90_000),
            "b".repeat(10_000),
            "c".repeat(500),
        ]);
        assert!(cap_tool_result(&mut r, 10_000));
        let t = texts(&r);
        let kept = |s: &str| s.split('\n').next().map_or(0, str::len);
        assert!((8_000..=9_000).contains(&kept(&t[0])), "{}", kept(&t[0]));
        assert_eq!(kept(&t[1]), 2_000, "floor of 2,000");
        assert_eq!(t[2].len(), 500, "short blocks are kept whole");
    }

    #[test]
    fn multibyte_text_is_cut_on_char_boundaries() {
        let mut r = result(vec!["é".repeat(10_000)]);
        assert!(cap_tool_result(&mut r, 3_000));
        assert!(texts(&r)[0].starts_with(&"é".repeat(3_000)));
    }
}
