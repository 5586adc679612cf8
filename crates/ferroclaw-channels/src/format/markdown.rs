//! Markdown → Telegram HTML, → Slack mrkdwn and → plain text, from one walk over
//! pulldown-cmark's events. Each target knows only a few marks; everything else is
//! written as text, escaped, so the output is always well formed and never carries the
//! model's raw HTML.

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// Links keep their `<a>` only for these schemes; others are shown as text.
const SAFE_SCHEMES: [&str; 4] = ["http://", "https://", "tg://", "mailto:"];

pub fn to_telegram_html(markdown: &str) -> String {
    Writer::new(Flavor::Html).write(markdown)
}

pub fn to_slack_mrkdwn(markdown: &str) -> String {
    Writer::new(Flavor::Mrkdwn).write(markdown)
}

pub fn to_whatsapp(markdown: &str) -> String {
    Writer::new(Flavor::WhatsApp).write(markdown)
}

pub fn to_plain(markdown: &str) -> String {
    Writer::new(Flavor::Plain).write(markdown)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Flavor {
    Html,
    Mrkdwn,
    /// Slack's marks without its escapes or links (WhatsApp shows URLs as they are).
    WhatsApp,
    Plain,
}

fn escape(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
}

fn safe_link(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    SAFE_SCHEMES.iter().any(|s| lower.starts_with(s))
}

struct Writer {
    flavor: Flavor,
    out: String,
    /// Open lists: the next number of an ordered one.
    lists: Vec<Option<u64>>,
    /// Open links and images: (url, shown as `<a>`), and the text length at their start.
    links: Vec<(String, bool, usize)>,
    in_table_cell_row: bool,
}

impl Writer {
    fn new(flavor: Flavor) -> Writer {
        Writer {
            flavor,
            out: String::new(),
            lists: Vec::new(),
            links: Vec::new(),
            in_table_cell_row: false,
        }
    }

    /// A mark: `html` in Telegram's HTML, `mrkdwn` in Slack's, nothing in plain text.
    fn mark(&mut self, html: &str, mrkdwn: &str) {
        match self.flavor {
            Flavor::Html => self.out.push_str(html),
            Flavor::Mrkdwn | Flavor::WhatsApp => self.out.push_str(mrkdwn),
            Flavor::Plain => {}
        }
    }

    fn text(&mut self, s: &str) {
        match self.flavor {
            Flavor::Html => escape(s, &mut self.out),
            // Slack reads `&`, `<` and `>` as its own control characters.
            Flavor::Mrkdwn => {
                for c in s.chars() {
                    match c {
                        '&' => self.out.push_str("&amp;"),
                        '<' => self.out.push_str("&lt;"),
                        '>' => self.out.push_str("&gt;"),
                        c => self.out.push(c),
                    }
                }
            }
            Flavor::WhatsApp | Flavor::Plain => self.out.push_str(s),
        }
    }

    /// Ends the current line (and, for blocks, leaves a blank one) unless already done.
    fn block_end(&mut self, blank: bool) {
        let want = if blank && self.lists.is_empty() {
            "\n\n"
        } else {
            "\n"
        };
        while self.out.ends_with(' ') {
            self.out.pop();
        }
        if self.out.is_empty() || self.out.ends_with(want) {
            return;
        }
        if want == "\n\n" && self.out.ends_with('\n') {
            self.out.push('\n');
        } else {
            self.out.push_str(want);
        }
    }

    fn write(mut self, markdown: &str) -> String {
        let options =
            Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS;
        for event in Parser::new_ext(markdown, options) {
            match event {
                Event::Start(tag) => self.start(tag),
                Event::End(tag) => self.end(tag),
                Event::Text(t) => self.text(&t),
                Event::Code(t) => {
                    self.mark("<code>", "`");
                    self.text(&t);
                    self.mark("</code>", "`");
                }
                // The model's raw HTML is shown, never passed through.
                Event::Html(t) | Event::InlineHtml(t) => self.text(&t),
                Event::SoftBreak | Event::HardBreak => self.out.push('\n'),
                Event::Rule => {
                    self.block_end(true);
                    self.out.push_str("———");
                    self.block_end(true);
                }
                Event::TaskListMarker(done) => self.text(if done { "[x] " } else { "[ ] " }),
                Event::FootnoteReference(t) => self.text(&format!("[{t}]")),
                Event::InlineMath(t) | Event::DisplayMath(t) => self.text(&t),
            }
        }
        let mut out = self.out.trim_end().to_string();
        while out.contains("\n\n\n") {
            out = out.replace("\n\n\n", "\n\n");
        }
        out
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => {}
            Tag::Heading { .. } => {
                self.block_end(true);
                self.mark("<b>", "*");
            }
            Tag::BlockQuote(_) => {
                self.block_end(true);
                self.mark("<blockquote>", "> ");
            }
            Tag::CodeBlock(kind) => {
                self.block_end(true);
                let lang = match &kind {
                    CodeBlockKind::Fenced(info) => {
                        info.split_whitespace().next().unwrap_or("").to_string()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                if lang.is_empty() || self.flavor != Flavor::Html {
                    self.mark("<pre><code>", "```\n");
                } else {
                    self.out.push_str("<pre><code class=\"language-");
                    escape(&lang, &mut self.out);
                    self.out.push_str("\">");
                }
            }
            Tag::List(start) => {
                if self.lists.is_empty() {
                    self.block_end(true);
                } else {
                    self.block_end(false);
                }
                self.lists.push(start);
            }
            Tag::Item => {
                self.block_end(false);
                let depth = self.lists.len().saturating_sub(1);
                self.out.push_str(&"  ".repeat(depth));
                let bullet = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let b = format!("{n}. ");
                        *n += 1;
                        b
                    }
                    _ => "• ".to_string(),
                };
                self.out.push_str(&bullet);
            }
            Tag::Emphasis => self.mark("<i>", "_"),
            Tag::Strong => self.mark("<b>", "*"),
            Tag::Strikethrough => self.mark("<s>", "~"),
            Tag::Link { dest_url, .. } => {
                let url = dest_url.to_string();
                // Slack's `<url|text>` cannot carry `|` or `>` in the address.
                let as_tag = match self.flavor {
                    Flavor::Html => safe_link(&url),
                    Flavor::Mrkdwn => safe_link(&url) && !url.contains(['|', '>', '<']),
                    Flavor::WhatsApp | Flavor::Plain => false,
                };
                if as_tag && self.flavor == Flavor::Html {
                    self.out.push_str("<a href=\"");
                    escape(&url, &mut self.out);
                    self.out.push_str("\">");
                } else if as_tag {
                    self.out.push('<');
                    self.out.push_str(url.trim());
                    self.out.push('|');
                }
                self.links.push((url, as_tag, self.out.len()));
            }
            Tag::Image { dest_url, .. } => {
                self.links
                    .push((dest_url.to_string(), false, self.out.len()));
            }
            Tag::Table(_) => {
                self.block_end(true);
                self.mark("<pre>", "```\n");
            }
            Tag::TableHead | Tag::TableRow => self.in_table_cell_row = false,
            Tag::TableCell => {
                if self.in_table_cell_row {
                    self.out.push_str(" | ");
                }
                self.in_table_cell_row = true;
            }
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => self.block_end(true),
            TagEnd::Heading(_) => {
                self.mark("</b>", "*");
                self.block_end(true);
            }
            TagEnd::BlockQuote(_) => {
                while self.out.ends_with('\n') {
                    self.out.pop();
                }
                self.mark("</blockquote>", "");
                self.block_end(true);
            }
            TagEnd::CodeBlock => {
                if self.out.ends_with('\n') {
                    self.out.pop();
                }
                self.mark("</code></pre>", "\n```");
                self.block_end(true);
            }
            TagEnd::List(_) => {
                self.lists.pop();
                self.block_end(true);
            }
            TagEnd::Item => self.block_end(false),
            TagEnd::Emphasis => self.mark("</i>", "_"),
            TagEnd::Strong => self.mark("</b>", "*"),
            TagEnd::Strikethrough => self.mark("</s>", "~"),
            TagEnd::Link => {
                if let Some((url, as_tag, at)) = self.links.pop() {
                    if as_tag {
                        self.mark("</a>", ">");
                        // Plain text keeps the address the HTML hides behind the text.
                    } else {
                        let shown = self.out[at..].to_string();
                        if shown.trim() != url.trim() {
                            self.text(&format!(" ({url})"));
                        }
                    }
                }
            }
            TagEnd::Image => {
                if let Some((url, _, _)) = self.links.pop() {
                    self.text(&format!(" ({url})"));
                }
            }
            TagEnd::TableHead | TagEnd::TableRow => self.out.push('\n'),
            TagEnd::Table => {
                while self.out.ends_with('\n') {
                    self.out.pop();
                }
                self.mark("</pre>", "\n```");
                self.block_end(true);
            }
            _ => {}
        }
    }
}
