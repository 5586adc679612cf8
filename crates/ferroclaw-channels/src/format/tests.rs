#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

/// Whether every tag is closed in order (a tiny checker for Telegram's subset).
fn well_formed(html: &str) -> bool {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find('<') {
        let Some(end) = rest[at..].find('>') else {
            return false;
        };
        let tag = &rest[at + 1..at + end];
        if let Some(name) = tag.strip_prefix('/') {
            if stack.pop().as_deref() != Some(name) {
                return false;
            }
        } else {
            let name = tag.split_whitespace().next().unwrap_or("").to_string();
            if !["b", "i", "s", "u", "code", "pre", "a", "blockquote"].contains(&name.as_str()) {
                return false;
            }
            stack.push(name);
        }
        rest = &rest[at + end + 1..];
    }
    stack.is_empty()
}

fn non_space(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

#[test]
fn cuts_prefer_paragraphs_then_lines_then_spaces_then_anywhere() {
    let para = format!("{}\n\n{}", "a".repeat(10), "b".repeat(10));
    assert_eq!(split_text(&para, 16), vec!["a".repeat(10), "b".repeat(10)]);
    let lines = format!("{} {}\n{}", "a".repeat(5), "c".repeat(5), "b".repeat(10));
    assert_eq!(
        split_text(&lines, 16),
        vec![
            format!("{} {}", "a".repeat(5), "c".repeat(5)),
            "b".repeat(10)
        ]
    );
    let words = format!("{} {}", "a".repeat(10), "b".repeat(10));
    assert_eq!(split_text(&words, 16), vec!["a".repeat(10), "b".repeat(10)]);
    let word = "x".repeat(40);
    let pieces = split_text(&word, 16);
    assert_eq!(pieces.concat(), word);
    assert!(pieces.iter().all(|p| utf16_len(p) <= 16));
}

#[test]
fn no_piece_is_over_the_limit_or_empty_and_nothing_is_lost() {
    let text = "Paragraph one 😀 with emoji.\n\n日本語のテキストも少し。\n```rust\nfn main() {\n    println!(\"hi\");\n}\n```\nA verylongwordwithoutanyspacesatallthatgoesonandon end.\n\n- item\n- item two"
        .repeat(5);
    for limit in (16..200).step_by(7) {
        let pieces = split_text(&text, limit);
        assert!(!pieces.is_empty());
        for p in &pieces {
            assert!(utf16_len(p) <= limit, "{limit}: {p:?}");
            assert!(!p.trim().is_empty());
            // A surrogate pair is never split: every piece is valid text by construction.
        }
        // Fences re-added at cuts aside, the text is all there, in order.
        let joined: String = pieces.join("\n");
        let strip = |s: &str| non_space(s).replace("```rust", "").replace("```", "");
        assert_eq!(strip(&joined), strip(&text), "limit {limit}");
    }
}

#[test]
fn a_code_block_cut_in_two_is_closed_and_reopened() {
    let code = format!("intro\n\n```python\n{}```\nafter", "print(1)\n".repeat(20));
    let pieces = split_text(&code, 80);
    assert!(pieces.len() > 2);
    for p in &pieces[1..pieces.len() - 1] {
        assert!(p.starts_with("```python\n") && p.ends_with("```"), "{p:?}");
    }
    for p in &pieces {
        let html = to_telegram_html(p);
        assert!(well_formed(&html), "{html}");
    }
}

#[test]
fn markdown_becomes_telegram_html() {
    let cases = [
        (
            "**bold** and *it* and ~~gone~~",
            "<b>bold</b> and <i>it</i> and <s>gone</s>",
        ),
        ("use `x < y`", "use <code>x &lt; y</code>"),
        ("# Title\n\ntext", "<b>Title</b>\n\ntext"),
        (
            "```rust\nlet a = 1 & 2;\n```",
            "<pre><code class=\"language-rust\">let a = 1 &amp; 2;</code></pre>",
        ),
        ("    indented", "<pre><code>indented</code></pre>"),
        (
            "[site](https://example.com/?a=1&b=\"2\")",
            "<a href=\"https://example.com/?a=1&amp;b=&quot;2&quot;\">site</a>",
        ),
        ("- one\n- two", "• one\n• two"),
        ("1. one\n2. two", "1. one\n2. two"),
        ("- a\n  - b", "• a\n  • b"),
        ("> quoted", "<blockquote>quoted</blockquote>"),
        (
            "<script>alert(1)</script> & more",
            "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more",
        ),
        ("![cat](https://x/cat.png)", "cat (https://x/cat.png)"),
        ("| a | b |\n|---|---|\n| 1 | 2 |", "<pre>a | b\n1 | 2</pre>"),
    ];
    for (md, want) in cases {
        let html = to_telegram_html(md);
        assert_eq!(html, want, "{md}");
        assert!(well_formed(&html), "{html}");
    }
}

#[test]
fn only_safe_links_become_links() {
    let html = to_telegram_html("[click](javascript:alert(1))");
    assert!(!html.contains("<a"), "{html}");
    assert!(html.contains("click (javascript:alert(1))"), "{html}");
    assert_eq!(to_plain("[site](https://e.com)"), "site (https://e.com)");
    assert_eq!(to_plain("<https://e.com>"), "https://e.com");
}

#[test]
fn plain_text_keeps_the_structure_without_markup() {
    let plain = to_plain("# T\n\n**b** `c`\n\n- x\n- y\n\n```\ncode <here>\n```");
    assert_eq!(plain, "T\n\nb c\n\n• x\n• y\n\ncode <here>");
}

#[test]
fn render_cuts_long_answers_under_the_limit_and_skips_empty_ones() {
    let answer =
        "Some **bold** text with a [link](https://example.com/a/very/long/path).\n\n".repeat(150);
    let chunks = render(&answer, Markup::TelegramHtml, 4096);
    assert!(chunks.len() >= 2);
    for c in &chunks {
        assert!(utf16_len(&c.plain) <= 4096);
        assert!(well_formed(&c.formatted), "{}", c.formatted);
    }
    let plain = render(&answer, Markup::Plain, 500);
    assert!(plain
        .iter()
        .all(|c| c.formatted == c.plain && utf16_len(&c.plain) <= 500));
    assert!(render("", Markup::TelegramHtml, 4096).is_empty());
    assert!(render("  \n ", Markup::TelegramHtml, 4096).is_empty());
}

#[test]
fn markdown_platforms_get_the_markdown_and_its_markup_counts_toward_the_limit() {
    // Bold markers take room: the Markdown sent must fit, not only its visible text.
    let answer: String = (0..40)
        .map(|i| format!("**word {i}** `code {i}` and ~~more~~ text\n"))
        .collect();
    for limit in [60, 100, 333, 2000] {
        let chunks = render(&answer, Markup::Markdown, limit);
        for c in &chunks {
            assert!(utf16_len(&c.formatted) <= limit, "{limit}: {}", c.formatted);
            assert!(
                c.formatted.contains("**"),
                "{limit}: the markup was taken out"
            );
        }
        let joined: String = chunks.iter().map(|c| non_space(&c.formatted)).collect();
        assert_eq!(joined, non_space(&answer), "{limit}: text lost or added");
    }
    // A fence cut in two is closed and reopened, so each message renders as code.
    let fenced = format!("```rust\n{}```\n", "let x = 1;\n".repeat(300));
    for c in render(&fenced, Markup::Markdown, 500) {
        assert!(utf16_len(&c.formatted) <= 500);
        assert_eq!(c.formatted.matches("```").count() % 2, 0, "{}", c.formatted);
    }
}

#[test]
fn markdown_becomes_slack_mrkdwn() {
    let m = to_slack_mrkdwn(
        "# Title\n\n**bold**, *it*, ~~gone~~, `x<y`, [site](https://example.com/a) and \
         [bad](javascript:alert(1)) & <b>raw</b>\n\n```rust\nlet a = 1 < 2;\n```",
    );
    assert!(m.starts_with("*Title*"), "{m}");
    assert!(
        m.contains("*bold*") && m.contains("_it_") && m.contains("~gone~"),
        "{m}"
    );
    assert!(m.contains("`x&lt;y`"), "{m}");
    assert!(m.contains("<https://example.com/a|site>"), "{m}");
    // Unsafe schemes are text; the model's raw HTML and Slack's control characters are
    // escaped, so no `<!channel>`-style control sequence can be written by the model.
    assert!(
        !m.contains("<javascript") && m.contains("bad (javascript:alert(1))"),
        "{m}"
    );
    assert!(m.contains("&amp; &lt;b&gt;raw&lt;/b&gt;"), "{m}");
    assert!(m.contains("```\nlet a = 1 &lt; 2;\n```"), "{m}");
    let ping = to_slack_mrkdwn("hey <!channel> and <@U123>");
    assert!(
        !ping.contains("<!channel>") && !ping.contains("<@U123>"),
        "{ping}"
    );
    for c in render(&"**a** word\n\n".repeat(500), Markup::SlackMrkdwn, 300) {
        assert!(utf16_len(&c.formatted) <= 300);
    }
}
