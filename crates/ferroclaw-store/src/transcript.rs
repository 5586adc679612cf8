//! Reading transcripts tolerantly and turning their entry tree into model context.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use ferroclaw_types::{
    ContentBlock, Entry, EntryBody, Message, SessionHeader, UserMessage, TRANSCRIPT_VERSION,
};
use serde_json::Value;

use crate::integrity::{Issue, IssueKind};
use crate::StoreError;

/// Text that opens the user message standing in for everything a compaction summarised.
pub const SUMMARY_PREFIX: &str = "[Conversation summary]\n";

/// What the loader found; the same type as the validator's findings.
pub type LoadProblem = Issue;
/// Kinds of [`LoadProblem`].
pub type LoadProblemKind = IssueKind;

fn problem(line: usize, kind: IssueKind, description: impl Into<String>) -> LoadProblem {
    Issue::new(kind, line, description)
}

pub(crate) struct Parsed {
    pub header: SessionHeader,
    pub entries: Vec<Entry>,
    pub problems: Vec<LoadProblem>,
}

/// Reads a transcript without giving up on damage: bad lines are skipped and reported.
///
/// Rules:
/// - Line 1 should be the session header. If it is not, a `BadHeader` problem is reported
///   and a header is synthesised (id = file stem, version 3, empty timestamp and cwd) so
///   that a damaged file does not lock its owner out; if line 1 is in fact a valid entry
///   (header lost), the entry is kept.
/// - A last line without `\n` that does not parse is a `TornLine`; a last line without
///   `\n` that does parse is kept as an entry.
/// - Any other line that does not parse is `Unparseable`; blank lines are ignored.
/// - An empty file, or one with neither a header nor a single readable entry nor a torn
///   line, is `Corrupt`: there is nothing left to salvage.
///
/// This is blocking I/O; async callers should run it on a blocking thread.
pub fn read_transcript(
    path: &Path,
) -> Result<(SessionHeader, Vec<Entry>, Vec<LoadProblem>), StoreError> {
    let bytes = std::fs::read(path).map_err(|e| StoreError::io(path, e))?;
    let parsed = parse_transcript(&bytes, path)?;
    Ok((parsed.header, parsed.entries, parsed.problems))
}

pub(crate) fn parse_transcript(bytes: &[u8], path: &Path) -> Result<Parsed, StoreError> {
    if bytes.is_empty() {
        return Err(StoreError::Corrupt {
            path: path.into(),
            message: "empty file: no session header".into(),
        });
    }
    let terminated = bytes.ends_with(b"\n");
    let mut lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    if terminated {
        // split() yields an empty piece after the final newline; it is not a line.
        lines.pop();
    }
    let last_line = lines.len();

    let mut header = None;
    let mut entries = Vec::new();
    let mut problems = Vec::new();
    let mut saw_torn = false;
    let mut skipped: HashMap<String, Option<String>> = HashMap::new();

    for (idx, raw) in lines.iter().enumerate() {
        let line = idx + 1;
        let torn = !terminated && line == last_line;
        if line == 1 {
            match parse_header(raw) {
                Ok(h) => header = Some(h),
                Err(_) if torn => {
                    saw_torn = true;
                    problems.push(torn_problem(line, raw, "no session header"));
                }
                Err(header_err) => match serde_json::from_slice::<Entry>(raw) {
                    Ok(entry) => {
                        problems.push(problem(
                            line,
                            IssueKind::BadHeader,
                            "session header missing: line 1 is an entry (kept)",
                        ));
                        entries.push(entry);
                    }
                    Err(_) => problems.push(problem(
                        line,
                        IssueKind::BadHeader,
                        format!("not a session header (skipped): {header_err}"),
                    )),
                },
            }
            continue;
        }
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Entry>(raw) {
            Ok(entry) => entries.push(entry),
            Err(err) if torn => {
                saw_torn = true;
                problems.push(torn_problem(line, raw, &err.to_string()));
            }
            Err(err) => match skippable_entry(raw) {
                // A well-formed entry of a type (or shape) this build does not model:
                // it stays on disk; its children are linked past it below.
                Some((id, parent)) => {
                    problems.push(problem(
                        line,
                        IssueKind::SkippedEntry,
                        format!("entry {id:?} kept on disk but not loaded: {err}"),
                    ));
                    skipped.insert(id, parent);
                }
                None => problems.push(problem(line, IssueKind::UnparseableLine, err.to_string())),
            },
        }
    }
    if !skipped.is_empty() {
        for entry in &mut entries {
            // Bounded: a chain of skipped entries cannot be longer than their count.
            for _ in 0..=skipped.len() {
                match entry.parent_id.as_deref().and_then(|p| skipped.get(p)) {
                    Some(grand) => entry.parent_id.clone_from(grand),
                    None => break,
                }
            }
        }
    }

    let header = match header {
        Some(h) => h,
        None if entries.is_empty() && !saw_torn => {
            return Err(StoreError::Corrupt {
                path: path.into(),
                message: "no session header and no readable entry".into(),
            })
        }
        None => SessionHeader {
            kind: "session".into(),
            version: TRANSCRIPT_VERSION,
            id: path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            timestamp: String::new(),
            cwd: String::new(),
            session_key: None,
        },
    };
    Ok(Parsed {
        header,
        entries,
        problems,
    })
}

fn torn_problem(line: usize, raw: &[u8], why: &str) -> LoadProblem {
    problem(
        line,
        IssueKind::TornLine,
        format!(
            "last line ({} bytes) has no newline and does not parse: {why}",
            raw.len()
        ),
    )
}

/// `(id, parentId)` of a line that is a JSON entry object the typed model rejects.
fn skippable_entry(raw: &[u8]) -> Option<(String, Option<String>)> {
    let v: Value = serde_json::from_slice(raw).ok()?;
    let ty = v.get("type")?.as_str()?;
    let id = v.get("id")?.as_str()?;
    if ty == "session" || id.is_empty() {
        return None;
    }
    let parent = v.get("parentId").and_then(Value::as_str).map(str::to_owned);
    Some((id.to_owned(), parent))
}

pub(crate) fn parse_header(raw: &[u8]) -> Result<SessionHeader, String> {
    let header: SessionHeader = serde_json::from_slice(raw).map_err(|e| e.to_string())?;
    if header.kind != "session" {
        return Err(format!("type is {:?}, expected \"session\"", header.kind));
    }
    if header.id.is_empty() {
        return Err("empty session id".into());
    }
    Ok(header)
}

/// The active branch in root-to-leaf order: the leaf is the last entry in file order and
/// the walk follows `parent_id` until the root, a missing parent, or a cycle.
pub fn active_branch(entries: &[Entry]) -> Vec<&Entry> {
    let Some(leaf_idx) = entries.len().checked_sub(1) else {
        return Vec::new();
    };
    // Later duplicates win, mirroring a map filled in file order.
    let by_id: HashMap<&str, usize> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| (e.id.as_str(), i))
        .collect();
    let mut seen = HashSet::from([leaf_idx]);
    let mut path = vec![leaf_idx];
    let mut current = &entries[leaf_idx];
    while let Some(parent) = current.parent_id.as_deref() {
        let Some(&idx) = by_id.get(parent) else {
            break;
        };
        if !seen.insert(idx) {
            break; // a cycle in hand-edited files must not hang the loader
        }
        path.push(idx);
        current = &entries[idx];
    }
    path.into_iter().rev().map(|i| &entries[i]).collect()
}

/// Messages of the active branch. When the branch holds a compaction, the newest one
/// replaces everything before its `firstKeptEntryId` with a single user message
/// `"[Conversation summary]\n<summary>"`; if that id is not on the branch, only what
/// follows the compaction is kept. Non-message entries contribute nothing.
/// What the context is made of: the newest compaction on the active branch (if any) and
/// the branch entries sent verbatim, from that compaction's first kept entry on.
pub struct EffectiveBranch<'a> {
    pub compaction: Option<(&'a Entry, &'a str)>,
    pub entries: Vec<&'a Entry>,
}

pub fn effective_branch(entries: &[Entry]) -> EffectiveBranch<'_> {
    let branch = active_branch(entries);
    let newest_compaction = branch
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, e)| match &e.body {
            EntryBody::Compaction {
                summary,
                first_kept_entry_id,
                ..
            } => Some((i, *e, summary.as_str(), first_kept_entry_id)),
            _ => None,
        });
    let (compaction, start) = match newest_compaction {
        None => (None, 0),
        Some((ci, entry, summary, first_kept)) => (
            Some((entry, summary)),
            branch
                .iter()
                .position(|e| e.id == *first_kept)
                .unwrap_or(ci + 1),
        ),
    };
    EffectiveBranch {
        compaction,
        entries: branch[start..].to_vec(),
    }
}

/// The messages sent to a model: the newest compaction's summary as a user message, then
/// the messages of the effective branch.
pub fn build_context(entries: &[Entry]) -> Vec<Message> {
    let effective = effective_branch(entries);
    let mut out = Vec::with_capacity(effective.entries.len() + 1);
    if let Some((entry, summary)) = effective.compaction {
        out.push(Message::User(UserMessage {
            content: vec![ContentBlock::text(format!("{SUMMARY_PREFIX}{summary}"))],
            timestamp: iso_to_millis(&entry.timestamp).unwrap_or(0),
        }));
    }
    out.extend(
        effective
            .entries
            .iter()
            .filter_map(|e| e.message().cloned()),
    );
    out
}

pub(crate) fn iso_now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

pub(crate) fn iso_to_millis(s: &str) -> Option<i64> {
    let t = humantime::parse_rfc3339_weak(s).ok()?;
    Some(t.duration_since(UNIX_EPOCH).ok()?.as_millis() as i64)
}

/// 8 lowercase hex characters from the random tail of a v4 UUID.
pub(crate) fn random_entry_id() -> String {
    format!("{:08x}", uuid::Uuid::new_v4().as_u128() as u32)
}

/// The entry a log appends next: `body` under a fresh id (`taken` says which are in
/// use), child of the last of `entries`, a tool result in it capped at `cap` characters
/// first (`session` names the log in the warning).
pub(crate) fn next_entry(
    entries: &[Entry],
    taken: impl Fn(&str) -> bool,
    mut body: EntryBody,
    cap: usize,
    session: &str,
) -> Entry {
    if let EntryBody::Message {
        message: ferroclaw_types::Message::ToolResult(result),
    } = &mut body
    {
        if crate::integrity::cap_tool_result(result, cap) {
            tracing::warn!(session, tool = %result.tool_name, max_chars = cap, "tool result over the cap was truncated before it was stored");
        }
    }
    let id = loop {
        let id = random_entry_id();
        if !taken(&id) {
            break id;
        }
    };
    Entry {
        id,
        parent_id: entries.last().map(|e| e.id.clone()),
        timestamp: iso_now(),
        body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferroclaw_types::Message;

    fn msg(id: &str, parent: Option<&str>, text: &str) -> Entry {
        Entry {
            id: id.into(),
            parent_id: parent.map(Into::into),
            timestamp: "2026-01-01T00:00:00.000Z".into(),
            body: EntryBody::Message {
                message: Message::user(text),
            },
        }
    }

    fn texts(ms: &[Message]) -> Vec<String> {
        ms.iter().map(Message::text).collect()
    }

    #[test]
    fn cycle_ends_the_walk() {
        let entries = vec![msg("a", Some("b"), "1"), msg("b", Some("a"), "2")];
        assert_eq!(texts(&build_context(&entries)), ["1", "2"]);
        let selfish = vec![msg("a", Some("a"), "1")];
        assert_eq!(texts(&build_context(&selfish)), ["1"]);
    }

    #[test]
    fn missing_parent_ends_the_walk() {
        let entries = vec![msg("a", None, "1"), msg("b", Some("zz"), "2")];
        assert_eq!(texts(&build_context(&entries)), ["2"]);
    }

    #[test]
    fn compaction_with_unknown_first_kept_keeps_only_later_messages() {
        let mut entries = vec![msg("a", None, "1"), msg("b", Some("a"), "2")];
        entries.push(Entry {
            id: "c".into(),
            parent_id: Some("b".into()),
            timestamp: "2026-01-01T00:00:01.000Z".into(),
            body: EntryBody::Compaction {
                summary: "S".into(),
                first_kept_entry_id: "nope".into(),
                tokens_before: 1,
                tokens_after: None,
            },
        });
        entries.push(msg("d", Some("c"), "3"));
        let ctx = build_context(&entries);
        assert_eq!(texts(&ctx), ["[Conversation summary]\nS", "3"]);
        let Message::User(u) = &ctx[0] else {
            panic!("summary must be a user message")
        };
        assert_eq!(u.timestamp, 1_767_225_601_000);
    }

    #[test]
    fn entry_ids_are_eight_lowercase_hex() {
        for _ in 0..100 {
            let id = random_entry_id();
            assert_eq!(id.len(), 8);
            assert!(id
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        }
    }

    #[test]
    fn empty_and_garbage_files_are_corrupt() {
        let p = Path::new("x.jsonl");
        assert!(matches!(
            parse_transcript(b"", p),
            Err(StoreError::Corrupt { .. })
        ));
        assert!(matches!(
            parse_transcript(b"garbage\nmore garbage\n", p),
            Err(StoreError::Corrupt { .. })
        ));
    }

    #[test]
    fn torn_header_only_is_salvageable() {
        let parsed = parse_transcript(br#"{"type":"sess"#, Path::new("abc.jsonl"))
            .expect("torn header is not fatal");
        assert_eq!(parsed.header.id, "abc");
        assert_eq!(parsed.problems.len(), 1);
        assert_eq!(parsed.problems[0].kind, IssueKind::TornLine);
    }

    #[test]
    fn entry_in_place_of_header_is_kept() {
        let raw = concat!(
            r#"{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"t","message":{"role":"user","content":"hi","timestamp":1}}"#,
            "\n"
        );
        let parsed = parse_transcript(raw.as_bytes(), Path::new("s1.jsonl")).expect("salvage");
        assert_eq!(parsed.entries.len(), 1);
        assert_eq!(parsed.problems[0].kind, IssueKind::BadHeader);
        assert_eq!(parsed.problems[0].line, 1);
        assert_eq!(parsed.header.id, "s1");
    }
}
