//! One run's answer on its way to the chat: a typing indicator while nothing is shown;
//! on platforms that edit messages, a draft showing the text as it is written (edited at
//! most every [`EDIT_EVERY`]); then the final answer, rendered and split, replacing the
//! draft. Messages merged into one run share its events and outcome, so only the first
//! of their tasks to see the run answers.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferroclaw_runtime::RunHandle;
use ferroclaw_types::EventKind;
use tracing::warn;

use crate::format::{render, utf16_len};
use crate::seam::{deliver, Outbound};

const TYPING_EVERY: Duration = Duration::from_secs(4);
/// Platforms limit edits (Telegram: about one a second per chat).
pub const EDIT_EVERY: Duration = Duration::from_millis(1500);
/// A draft is not worth showing for less.
const DRAFT_MIN_CHARS: usize = 20;

/// Runs whose answer a task took on.
#[derive(Clone)]
pub struct Claims(Arc<Mutex<lru::LruCache<String, ()>>>);

impl Claims {
    pub fn new() -> Claims {
        Claims(Arc::new(Mutex::new(lru::LruCache::new(
            NonZeroUsize::new(1_000).unwrap_or(NonZeroUsize::MIN),
        ))))
    }

    /// `true` for the first caller with this run.
    fn claim(&self, run_id: &str) -> bool {
        let mut claims = self.0.lock().unwrap_or_else(|e| e.into_inner());
        claims.put(run_id.to_string(), ()).is_none()
    }
}

/// The draft's text: the answer so far, cut under the limit.
fn preview(text: &str, limit: usize) -> String {
    let text = text.trim();
    if utf16_len(text) <= limit {
        return text.to_string();
    }
    let mut out = String::new();
    let mut units = 0;
    for c in text.chars() {
        units += c.len_utf16();
        if units + 1 > limit {
            break;
        }
        out.push(c);
    }
    out.push('…');
    out
}

/// Follows `handle` to its end and answers in `chat`.
pub async fn answer(
    mut handle: RunHandle,
    out: Arc<dyn Outbound>,
    claims: Claims,
    chat: String,
    reply_to: String,
) {
    // The events are read here; `outcome` then only waits for the end.
    let (_, closed) = tokio::sync::mpsc::unbounded_channel();
    let mut events = std::mem::replace(&mut handle.events, closed);
    let mut mine: Option<bool> = None;
    let mut written = String::new();
    let mut shown = String::new();
    let mut draft: Option<String> = None;
    let mut typing = tokio::time::interval(TYPING_EVERY);
    let mut edit = tokio::time::interval(EDIT_EVERY);
    edit.tick().await;
    loop {
        tokio::select! {
            ev = events.recv() => {
                let Some(ev) = ev else { break };
                let first = mine.is_none();
                let mine = *mine.get_or_insert_with(|| claims.claim(&ev.run_id));
                if !mine {
                    // Another message's task answers this run.
                    while events.recv().await.is_some() {}
                    break;
                }
                if let (true, Some(text)) = (first, out.placeholder()) {
                    match out.send(&chat, text, false, Some(&reply_to)).await {
                        Ok(id) => {
                            draft = Some(id);
                            shown = text.to_string();
                        }
                        Err(e) => warn!(chat = %chat, error = %e, "channel: placeholder not sent"),
                    }
                }
                match ev.kind {
                    EventKind::AssistantDelta { text } => written.push_str(&text),
                    // Text before a tool call is not the answer.
                    EventKind::ToolStart { .. } => written.clear(),
                    _ => {}
                }
            }
            _ = typing.tick(), if draft.is_none() => out.typing(&chat).await,
            _ = edit.tick(), if out.edits() && mine == Some(true) => {
                let now = preview(&written, out.limit());
                if now == shown || now.chars().count() < DRAFT_MIN_CHARS {
                    continue;
                }
                let result = match &draft {
                    None => out.send(&chat, &now, false, Some(&reply_to)).await.map(|id| {
                        draft = Some(id);
                    }),
                    Some(id) => out.edit(&chat, id, &now, false).await,
                };
                match result {
                    Ok(()) => shown = now,
                    Err(e) => warn!(chat = %chat, error = %e, "channel: draft not updated"),
                }
            }
        }
    }
    let outcome = handle.outcome().await;
    let text = match outcome {
        Ok(o) => {
            if mine == Some(false) || (mine.is_none() && !claims.claim(&o.run_id)) {
                return;
            }
            if o.silent {
                String::new()
            } else {
                o.text
            }
        }
        Err(f) if f.is_aborted() => match &draft {
            // `/stop` was answered already; a draft says where the answer stopped.
            Some(id) => {
                let stopped = if Some(shown.as_str()) == out.placeholder() {
                    "(stopped)".to_string()
                } else {
                    format!("{shown}\n\n(stopped)")
                };
                if let Err(e) = out.edit(&chat, id, &stopped, false).await {
                    warn!(chat = %chat, error = %e, "channel: draft not closed");
                }
                return;
            }
            None => return,
        },
        Err(f) => format!("Sorry, that failed: {f}"),
    };
    let chunks = render(&text, out.markup(), out.limit());
    if chunks.is_empty() {
        if let Some(id) = &draft {
            // Nothing to say after all (`NO_REPLY`): the draft must not stand as one.
            let _ = out.edit(&chat, id, "(no reply)", false).await;
        }
        return;
    }
    if let Err(e) = deliver(
        out.as_ref(),
        &chat,
        &chunks,
        Some(&reply_to),
        draft.as_deref(),
    )
    .await
    {
        warn!(chat = %chat, error = %e, "channel: answer not delivered");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preview_stays_under_the_limit() {
        assert_eq!(preview("  short  ", 10), "short");
        let long = "😀".repeat(10);
        let p = preview(&long, 9);
        assert!(utf16_len(&p) <= 9, "{p}");
        assert!(p.ends_with('…'));
    }
}
