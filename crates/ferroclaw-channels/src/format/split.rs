//! Cutting text under a length limit where a reader would: at a paragraph, else a line,
//! else a space, else anywhere (never inside a character). A fenced code block that a
//! cut falls into is closed at the end of one piece and opened again in the next.

use super::utf16_len;

/// Pieces of `text`, each at most `limit` UTF-16 units (fences added at cuts counted).
pub fn split_text(text: &str, limit: usize) -> Vec<String> {
    let limit = limit.max(16);
    let mut pieces = Vec::new();
    let mut rest = text.trim().to_string();
    while !rest.is_empty() {
        if utf16_len(&rest) <= limit {
            pieces.push(rest);
            break;
        }
        let (mut piece, mut tail) = cut(&rest, limit);
        if let Some(fence) = open_fence(&piece) {
            // Leave room to close the block here.
            let closing = fence.marker.len() + 1;
            let (p, t) = cut(&rest, limit.saturating_sub(closing).max(8));
            if let Some(fence) = open_fence(&p) {
                let reopened = format!("{}{}\n{t}", fence.marker, fence.info);
                // Only when that moves on: a piece holding nothing but the opening
                // fence would come back forever.
                if reopened.len() < rest.len() {
                    piece = format!("{p}\n{}", fence.marker);
                    tail = reopened;
                }
            } else {
                piece = p;
                tail = t;
            }
        }
        if !piece.trim().is_empty() {
            pieces.push(piece);
        }
        rest = tail;
    }
    pieces
}

/// The longest head of `text` within `limit`, cut at the best boundary; the rest.
fn cut(text: &str, limit: usize) -> (String, String) {
    // The byte index where `limit` units end (never inside a char).
    let mut units = 0;
    let mut end = text.len();
    for (i, c) in text.char_indices() {
        if units + c.len_utf16() > limit {
            end = i;
            break;
        }
        units += c.len_utf16();
    }
    let window = &text[..end];
    let at = [window.rfind("\n\n"), window.rfind('\n'), window.rfind(' ')]
        .into_iter()
        .flatten()
        .find(|&i| !window[..i].trim().is_empty());
    let at = at
        .unwrap_or(end)
        .max(text.chars().next().map_or(0, char::len_utf8));
    let head = text[..at].trim_end().to_string();
    let tail = text[at..].trim_start().to_string();
    (head, tail)
}

struct Fence {
    marker: String,
    info: String,
}

/// The code fence still open at the end of `text`, if any.
fn open_fence(text: &str) -> Option<Fence> {
    let mut open: Option<Fence> = None;
    for line in text.lines() {
        let t = line.trim_start();
        if line.len() - t.len() > 3 {
            continue;
        }
        let ch = match t.chars().next() {
            Some(c @ ('`' | '~')) => c,
            _ => continue,
        };
        let run = t.chars().take_while(|&c| c == ch).count();
        if run < 3 {
            continue;
        }
        let marker: String = std::iter::repeat_n(ch, run).collect();
        match &open {
            None => {
                open = Some(Fence {
                    marker,
                    info: t[run..].trim().to_string(),
                })
            }
            Some(f) => {
                if f.marker.starts_with(ch) && run >= f.marker.len() && t[run..].trim().is_empty() {
                    open = None;
                }
            }
        }
    }
    open
}
