//! Markdown → Telegram HTML and → plain text, from one walk over pulldown-cmark's
//! events. Telegram's HTML knows only a few tags; everything else is written as text,
//! escaped, so the output is always well formed and never carries the model's raw HTML.

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// Links keep their `<a>` only for these schemes; others are shown as text.
const SAFE_SCHEMES: [&str; 4] = ["http://", "https://", "tg://", "mailto:"];

pub fn to_telegram_html(markdown: &str) -> String {
    Writer::new(true).write(markdown)
}

pub fn to_plain(markdown: &str) -> String {
    Writer::new(false).write(markdown)
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
    html: bool,
    out: String,
    /// Open lists: the next number of an ordered one.
    lists: Vec<Option<u64>>,
    /// Open links and images: (url, shown as `<a>`), and the text length at their start.
    links: Vec<(String, bool, usize)>,
    in_table_cell_row: bool,
}

impl Writer {
    fn new(html: bool) -> Writer {
        Writer {
            html,
            out: String::new(),
            lists: Vec::new(),
            links: Vec::new(),
            in_table_cell_row: false,
        }
    }

    fn tag(&mut self, t: &str) {
        if self.html {
            self.out.push_str(t);
        }
    }

    fn text(&mut self, s: &str) {
        if self.html {
            escape(s, &mut self.out);
        } else {
            self.out.push_str(s);
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
                    self.tag("<code>");
                    self.text(&t);
                    self.tag("</code>");
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
                self.tag("<b>");
            }
            Tag::BlockQuote(_) => {
                self.block_end(true);
                self.tag("<blockquote>");
            }
            Tag::CodeBlock(kind) => {
                self.block_end(true);
                let lang = match &kind {
                    CodeBlockKind::Fenced(info) => {
                        info.split_whitespace().next().unwrap_or("").to_string()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                if lang.is_empty() {
                    self.tag("<pre><code>");
                } else {
                    self.tag("<pre><code class=\"language-");
                    if self.html {
                        escape(&lang, &mut self.out);
                    }
                    self.tag("\">");
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
            Tag::Emphasis => self.tag("<i>"),
            Tag::Strong => self.tag("<b>"),
            Tag::Strikethrough => self.tag("<s>"),
            Tag::Link { dest_url, .. } => {
                let url = dest_url.to_string();
                let as_tag = self.html && safe_link(&url);
                if as_tag {
                    self.out.push_str("<a href=\"");
                    escape(&url, &mut self.out);
                    self.out.push_str("\">");
                }
                self.links.push((url, as_tag, self.out.len()));
            }
            Tag::Image { dest_url, .. } => {
                self.links
                    .push((dest_url.to_string(), false, self.out.len()));
            }
            Tag::Table(_) => {
                self.block_end(true);
                self.tag("<pre>");
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
                self.tag("</b>");
                self.block_end(true);
            }
            TagEnd::BlockQuote(_) => {
                while self.out.ends_with('\n') {
                    self.out.pop();
                }
                self.tag("</blockquote>");
                self.block_end(true);
            }
            TagEnd::CodeBlock => {
                if self.out.ends_with('\n') {
                    self.out.pop();
                }
                self.tag("</code></pre>");
                self.block_end(true);
            }
            TagEnd::List(_) => {
                self.lists.pop();
                self.block_end(true);
            }
            TagEnd::Item => self.block_end(false),
            TagEnd::Emphasis => self.tag("</i>"),
            TagEnd::Strong => self.tag("</b>"),
            TagEnd::Strikethrough => self.tag("</s>"),
            TagEnd::Link => {
                if let Some((url, as_tag, at)) = self.links.pop() {
                    if as_tag {
                        self.out.push_str("</a>");
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
                self.tag("</pre>");
                self.block_end(true);
            }
            _ => {}
        }
    }
}
