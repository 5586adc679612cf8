//! Answers rendered for a platform and cut under its length limit. The model writes
//! Markdown; each platform has its own markup (Telegram a small HTML), so the answer is
//! parsed once (pulldown-cmark) and written out in the platform's form, with a plain
//! text twin to send when the platform rejects the markup anyway.

mod markdown;
mod split;
#[cfg(test)]
mod tests;

pub use markdown::{to_plain, to_slack_mrkdwn, to_telegram_html, to_whatsapp};
pub use split::split_text;

/// Which markup a platform speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Markup {
    TelegramHtml,
    /// Discord renders the Markdown itself; its limit counts the markup too.
    Markdown,
    /// Slack's mrkdwn (`*bold*`, `_italic_`, `<url|text>`); its limit counts the markup.
    SlackMrkdwn,
    /// WhatsApp's marks (`*bold*`, `_italic_`, `~strike~`, monospace).
    WhatsApp,
    Plain,
}

/// One message to send: the formatted text and the plain-text fallback the channel
/// sends when the platform rejects the markup. Both say the same thing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub formatted: String,
    pub plain: String,
}

/// Length as the platforms count it (Telegram: UTF-16 code units of the visible text).
pub fn utf16_len(s: &str) -> usize {
    s.encode_utf16().count()
}

/// An answer ready to send: the Markdown cut with [`split_text`], each piece rendered;
/// a piece whose rendering grew past `limit` (bullets, URLs written out) is cut smaller.
/// The visible text of a formatted chunk is never longer than its plain twin, so
/// bounding the plain text bounds both.
pub fn render(markdown: &str, markup: Markup, limit: usize) -> Vec<Chunk> {
    let mut out = Vec::new();
    render_into(markdown, markup, limit.max(16), limit.max(16), &mut out);
    out
}

fn render_into(markdown: &str, markup: Markup, limit: usize, cut: usize, out: &mut Vec<Chunk>) {
    for piece in split_text(markdown, cut) {
        let plain = to_plain(&piece);
        if plain.trim().is_empty() {
            continue;
        }
        let formatted = match markup {
            Markup::TelegramHtml => to_telegram_html(&piece),
            Markup::Markdown => piece.trim().to_string(),
            Markup::SlackMrkdwn => to_slack_mrkdwn(&piece),
            Markup::WhatsApp => to_whatsapp(&piece),
            Markup::Plain => plain.clone(),
        };
        // Telegram counts the text it shows; a Markdown platform counts what is sent.
        let counted = match markup {
            Markup::Markdown | Markup::SlackMrkdwn => utf16_len(&formatted).max(utf16_len(&plain)),
            _ => utf16_len(&plain),
        };
        if counted > limit && cut > 16 {
            render_into(&piece, markup, limit, cut * 3 / 4, out);
            continue;
        }
        out.push(Chunk { formatted, plain });
    }
}
