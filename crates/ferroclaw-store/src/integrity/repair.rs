//! Rewrites a damaged transcript so it validates. Works on raw lines: an entry the
//! repair does not touch is written back byte for byte (unknown fields and entry types
//! included); a moved or re-parented entry only has its `parentId` value replaced.

use std::collections::{HashMap, HashSet};

use ferroclaw_types::{
    ContentBlock, Entry, EntryBody, Message, SessionHeader, ToolResultMessage, TRANSCRIPT_VERSION,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::validate::{analyze, Doc, Issue, IssueKind, LineKind, Loc, ParentRef, RRef, Verdict};
use crate::transcript::{iso_now, random_entry_id};

/// Synthetic result for a call whose result is gone.
pub const RESULT_NOT_AVAILABLE: &str = "[Tool result not available]";
/// Synthetic result for a call left unanswered at the end of a branch: the run that
/// made the call was killed before it could record the results.
pub const RESULT_INTERRUPTED: &str = "[Tool result not available: run was interrupted]";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Fix every issue type: each one bricks a session on some provider.
    #[default]
    Full,
    /// Only drop orphaned results (a torn last line is always cut: a rewrite cannot keep
    /// half a line without turning it into a corrupt middle line).
    RemoveOrphans,
}

impl Strategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Full => "full",
            Strategy::RemoveOrphans => "remove_orphans",
        }
    }
}

impl std::str::FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "full" => Ok(Strategy::Full),
            "remove_orphans" => Ok(Strategy::RemoveOrphans),
            other => Err(format!(
                "unknown integrity strategy {other:?} (expected full or remove_orphans)"
            )),
        }
    }
}

/// Outcome of [`repair_bytes`].
#[derive(Debug, Clone)]
pub struct Repair {
    /// Everything the validator found before the repair.
    pub issues: Vec<Issue>,
    /// The rewritten file, or `None` when there was nothing to do (a clean transcript is
    /// never rewritten) or the strategy fixes none of the issues found.
    pub bytes: Option<Vec<u8>>,
    /// Nothing readable at all (no header, no entry): refused rather than replaced by an
    /// empty session.
    pub hopeless: bool,
}

/// Validates and, when needed, repairs transcript bytes. `session_id` names the header
/// written when line 1 is not one.
pub fn repair_bytes(bytes: &[u8], strategy: Strategy, session_id: &str) -> Repair {
    let doc = Doc::parse(bytes);
    let analysis = analyze(&doc.pnodes());
    let issues = doc.issues(&analysis);
    if issues.is_empty() {
        return Repair {
            issues,
            bytes: None,
            hopeless: false,
        };
    }
    if doc.is_hopeless() {
        return Repair {
            issues,
            bytes: None,
            hopeless: true,
        };
    }
    let fixes_something = match strategy {
        Strategy::Full => true,
        Strategy::RemoveOrphans => issues
            .iter()
            .any(|i| matches!(i.kind, IssueKind::OrphanedToolResult | IssueKind::TornLine)),
    };
    let out = fixes_something.then(|| Rewriter::new(&doc, &analysis, strategy).run(session_id));
    Repair {
        issues,
        bytes: out,
        hopeless: false,
    }
}

/// What becomes of one result.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fate {
    Keep,
    Drop,
    Move,
}

enum Item {
    Synth {
        call_id: String,
        tool_name: String,
        text: &'static str,
    },
    MoveWhole(usize),
    MoveBlock(RRef, String),
}

struct Group {
    items: Vec<(String, Item)>,
}

struct Rewriter<'d, 'a> {
    doc: &'d Doc<'a>,
    full: bool,
    fates: Vec<Vec<Fate>>,
    /// The whole entry leaves its position (dropped, or moved into a slot).
    removed: Vec<bool>,
    /// Content edited (some result blocks leave the message).
    edited: Vec<bool>,
    /// Groups of inserted results keyed by (anchor, child on the path).
    groups: HashMap<(usize, Option<usize>), Group>,
    /// Group keys per anchor, in creation order.
    anchored: HashMap<usize, Vec<Option<usize>>>,
}

impl<'d, 'a> Rewriter<'d, 'a> {
    fn new(doc: &'d Doc<'a>, analysis: &super::validate::Analysis, strategy: Strategy) -> Self {
        let full = strategy == Strategy::Full;
        let n = doc.nodes.len();
        let mut fates: Vec<Vec<Fate>> = analysis
            .verdicts
            .iter()
            .map(|v| {
                v.iter()
                    .map(|verdict| match verdict {
                        Verdict::Ok => Fate::Keep,
                        Verdict::Duplicate if full => Fate::Drop,
                        Verdict::Duplicate => Fate::Keep,
                        Verdict::Orphan => Fate::Drop,
                        Verdict::Fills(_) if full => Fate::Move,
                        // Conservative: a result that only sits before its call is no
                        // orphan; one stranded after a later message is.
                        Verdict::Fills(s) if analysis.slots[*s].fill_before => Fate::Keep,
                        Verdict::Fills(_) => Fate::Drop,
                    })
                    .collect()
            })
            .collect();
        let mut used_ids: HashSet<String> = doc.nodes.iter().map(|n| n.id.clone()).collect();
        let mut groups: HashMap<(usize, Option<usize>), Group> = HashMap::new();
        let mut anchored: HashMap<usize, Vec<Option<usize>>> = HashMap::new();
        if full {
            for slot in &analysis.slots {
                let item = match slot.fill {
                    None => Item::Synth {
                        call_id: slot.call_id.clone(),
                        tool_name: slot.tool_name.clone(),
                        text: if slot.at_end {
                            RESULT_INTERRUPTED
                        } else {
                            RESULT_NOT_AVAILABLE
                        },
                    },
                    Some(r) => match doc.nodes[r.node].pairing.results[r.k].1 {
                        Loc::Whole => Item::MoveWhole(r.node),
                        Loc::Block(_) => Item::MoveBlock(r, slot.tool_name.clone()),
                    },
                };
                let id = match item {
                    Item::MoveWhole(node) => doc.nodes[node].id.clone(),
                    _ => fresh_id(&mut used_ids),
                };
                let key = (slot.anchor, slot.child);
                groups
                    .entry(key)
                    .or_insert_with(|| {
                        anchored.entry(slot.anchor).or_default().push(slot.child);
                        Group { items: Vec::new() }
                    })
                    .items
                    .push((id, item));
            }
        } else {
            // Nothing is moved, so nothing claimed by a slot leaves its place.
            for f in fates.iter_mut().flatten() {
                if *f == Fate::Move {
                    *f = Fate::Keep;
                }
            }
        }
        let mut removed = vec![false; n];
        let mut edited = vec![false; n];
        for (i, node) in doc.nodes.iter().enumerate() {
            let f = &fates[i];
            if f.iter().all(|x| *x == Fate::Keep) {
                continue;
            }
            let whole = node.pairing.results.iter().any(|(_, l)| *l == Loc::Whole);
            let keeps_other_content = !whole && (node.pairing.closes || f.contains(&Fate::Keep));
            if whole || !keeps_other_content {
                removed[i] = true;
            } else {
                edited[i] = true;
            }
        }
        Rewriter {
            doc,
            full,
            fates,
            removed,
            edited,
            groups,
            anchored,
        }
    }

    fn base_parent(&self, n: usize) -> ParentRef {
        let node = &self.doc.nodes[n];
        if self.full {
            node.fixed_parent.map_or(ParentRef::Root, ParentRef::Node)
        } else {
            node.parent
        }
    }

    /// The `parentId` value node `n` must carry in the output, or `None` when the raw
    /// value stays.
    fn new_parent(&self, n: usize) -> Option<Value> {
        let mut x = n;
        let parent = loop {
            match self.base_parent(x) {
                ParentRef::Node(p) if self.removed[p] => x = p,
                other => break other,
            }
        };
        let value = match parent {
            ParentRef::Node(p) => match self.groups.get(&(p, Some(x))) {
                Some(g) => Value::String(g.items.last().map(|(id, _)| id.clone())?),
                None => Value::String(self.doc.nodes[p].id.clone()),
            },
            ParentRef::Root => Value::Null,
            // Dangling and kept as written (conservative strategy): use x's raw value.
            ParentRef::Dangling => self.doc.nodes[x]
                .value
                .get("parentId")
                .cloned()
                .unwrap_or(Value::Null),
        };
        let current = self.doc.nodes[n]
            .value
            .get("parentId")
            .cloned()
            .unwrap_or(Value::Null);
        (value != current).then_some(value)
    }

    fn run(&self, session_id: &str) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.doc.lines.iter().map(|l| l.raw.len() + 1).sum());
        if self.full && !self.doc.has_header {
            let header = SessionHeader {
                kind: "session".into(),
                version: TRANSCRIPT_VERSION,
                id: session_id.to_owned(),
                timestamp: iso_now(),
                cwd: String::new(),
                session_key: None,
            };
            // Serialising plain strings and numbers cannot fail.
            if let Ok(line) = serde_json::to_vec(&header) {
                out.extend_from_slice(&line);
                out.push(b'\n');
            }
        }
        for line in &self.doc.lines {
            match line.kind {
                LineKind::Header | LineKind::Blank => push_line(&mut out, line.raw),
                LineKind::Torn => {}
                LineKind::Unparseable => {
                    if !self.full {
                        push_line(&mut out, line.raw);
                    }
                }
                LineKind::Entry(n) => {
                    if self.removed[n] {
                        continue;
                    }
                    let bytes = self.entry_bytes(n);
                    push_line(&mut out, &bytes);
                    if let Some(children) = self.anchored.get(&n) {
                        for child in children {
                            if let Some(g) = self.groups.get(&(n, *child)) {
                                let mut prev = self.doc.nodes[n].id.clone();
                                for (id, item) in &g.items {
                                    let bytes = self.item_bytes(id, &prev, item);
                                    push_line(&mut out, &bytes);
                                    prev.clone_from(id);
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }

    fn entry_bytes(&self, n: usize) -> Vec<u8> {
        let node = &self.doc.nodes[n];
        let raw = self.doc.lines[node.line].raw;
        let parent = self.new_parent(n);
        if !self.edited[n] {
            return match parent {
                Some(p) => set_parent_raw(raw, &p),
                None => raw.to_vec(),
            };
        }
        let mut value = node.value.clone();
        let drop: HashSet<usize> = node
            .pairing
            .results
            .iter()
            .zip(&self.fates[n])
            .filter(|(_, f)| **f != Fate::Keep)
            .filter_map(|((_, loc), _)| match loc {
                Loc::Block(i) => Some(*i),
                Loc::Whole => None,
            })
            .collect();
        if let Some(Value::Array(blocks)) = value.pointer_mut("/message/content") {
            let mut i = 0;
            blocks.retain(|_| {
                let keep = !drop.contains(&i);
                i += 1;
                keep
            });
        }
        if let (Some(p), Some(obj)) = (parent, value.as_object_mut()) {
            obj.insert("parentId".into(), p);
        }
        serde_json::to_vec(&value).unwrap_or_else(|_| raw.to_vec())
    }

    fn item_bytes(&self, id: &str, parent: &str, item: &Item) -> Vec<u8> {
        let parent_v = Value::String(parent.to_owned());
        match item {
            Item::MoveWhole(n) => {
                let raw = self.doc.lines[self.doc.nodes[*n].line].raw;
                set_parent_raw(raw, &parent_v)
            }
            Item::Synth {
                call_id,
                tool_name,
                text,
            } => synth_line(
                id,
                parent,
                call_id,
                tool_name,
                vec![ContentBlock::text(*text)],
                true,
            ),
            Item::MoveBlock(r, tool_name) => {
                let node = &self.doc.nodes[r.node];
                let (call_id, loc) = &node.pairing.results[r.k];
                let block = match loc {
                    Loc::Block(i) => node.value.pointer(&format!("/message/content/{i}")),
                    Loc::Whole => None,
                };
                let (content, is_error) = block.map_or_else(
                    || (vec![ContentBlock::text(RESULT_NOT_AVAILABLE)], true),
                    |b| {
                        (
                            api_result_content(b.get("content")),
                            b.get("is_error").and_then(Value::as_bool).unwrap_or(false),
                        )
                    },
                );
                synth_line(id, parent, call_id, tool_name, content, is_error)
            }
        }
    }
}

fn fresh_id(used: &mut HashSet<String>) -> String {
    loop {
        let id = random_entry_id();
        if used.insert(id.clone()) {
            return id;
        }
    }
}

fn push_line(out: &mut Vec<u8>, raw: &[u8]) {
    out.extend_from_slice(raw);
    out.push(b'\n');
}

/// Transcript-form content of an Anthropic `tool_result` block's `content`.
fn api_result_content(content: Option<&Value>) -> Vec<ContentBlock> {
    match content {
        Some(Value::String(s)) => vec![ContentBlock::text(s.clone())],
        Some(Value::Array(blocks)) => {
            let text: Vec<ContentBlock> = blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .map(|t| ContentBlock::text(t.to_owned()))
                .collect();
            if text.is_empty() {
                vec![ContentBlock::text("")]
            } else {
                text
            }
        }
        _ => vec![ContentBlock::text("")],
    }
}

pub(crate) fn synth_line(
    id: &str,
    parent: &str,
    call_id: &str,
    tool_name: &str,
    content: Vec<ContentBlock>,
    is_error: bool,
) -> Vec<u8> {
    let entry = Entry {
        id: id.to_owned(),
        parent_id: Some(parent.to_owned()),
        timestamp: iso_now(),
        body: EntryBody::Message {
            message: Message::ToolResult(ToolResultMessage {
                tool_call_id: call_id.to_owned(),
                tool_name: tool_name.to_owned(),
                content,
                is_error,
                timestamp: ferroclaw_types::now_millis(),
            }),
        },
    };
    serde_json::to_vec(&entry).unwrap_or_default()
}

/// Replaces the value of the top-level `parentId` key in a raw JSON object line, leaving
/// every other byte as it was. Falls back to a full re-serialisation when the key is
/// absent or its value is not a plain string or null.
pub(crate) fn set_parent_raw(raw: &[u8], parent: &Value) -> Vec<u8> {
    let new_value = serde_json::to_vec(parent).unwrap_or_else(|_| b"null".to_vec());
    if let Some((start, end)) = find_top_level_value(raw, b"parentId") {
        let mut out = Vec::with_capacity(raw.len() + new_value.len());
        out.extend_from_slice(&raw[..start]);
        out.extend_from_slice(&new_value);
        out.extend_from_slice(&raw[end..]);
        return out;
    }
    match serde_json::from_slice::<Value>(raw) {
        Ok(Value::Object(mut obj)) => {
            obj.insert("parentId".into(), parent.clone());
            serde_json::to_vec(&Value::Object(obj)).unwrap_or_else(|_| raw.to_vec())
        }
        _ => raw.to_vec(),
    }
}

/// Byte span of the value of `key` at depth 1 of a JSON object, when that value is a
/// string or `null`.
fn find_top_level_value(raw: &[u8], key: &[u8]) -> Option<(usize, usize)> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'"' => {
                let end = string_end(raw, i)?;
                if depth == 1 && &raw[i + 1..end] == key {
                    let mut j = end + 1;
                    while j < raw.len() && raw[j].is_ascii_whitespace() {
                        j += 1;
                    }
                    if raw.get(j) == Some(&b':') {
                        j += 1;
                        while j < raw.len() && raw[j].is_ascii_whitespace() {
                            j += 1;
                        }
                        return match raw.get(j) {
                            Some(b'"') => Some((j, string_end(raw, j)? + 1)),
                            Some(b'n') if raw[j..].starts_with(b"null") => Some((j, j + 4)),
                            _ => None,
                        };
                    }
                }
                i = end + 1;
            }
            b'{' | b'[' => {
                depth += 1;
                i += 1;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            _ => i += 1,
        }
    }
    None
}

/// Index of the closing quote of the string starting at `start`.
fn string_end(raw: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < raw.len() {
        match raw[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_patch_touches_only_the_value() {
        let raw = br#"{"type":"message","id":"b","parentId":"a","x":{"parentId":"deep"},"z":"\"parentId\""}"#;
        let out = set_parent_raw(raw, &Value::String("q".into()));
        assert_eq!(
            out,
            br#"{"type":"message","id":"b","parentId":"q","x":{"parentId":"deep"},"z":"\"parentId\""}"#
        );
        let raw = br#"{"type":"m","parentId" : null,"id":"b"}"#;
        assert_eq!(
            set_parent_raw(raw, &Value::String("p".into())),
            br#"{"type":"m","parentId" : "p","id":"b"}"#
        );
        let raw = br#"{"type":"m","id":"b"}"#;
        let v: Value =
            serde_json::from_slice(&set_parent_raw(raw, &Value::String("p".into()))).expect("json");
        assert_eq!(v["parentId"], "p");
    }
}
