//! The pairing validator. It reads raw lines as `serde_json::Value` (never the typed
//! entry model) so it can see torn and unparseable lines, entry types it does not know,
//! and both block forms: the transcript form (`toolCall` blocks, `toolResult` messages
//! with `toolCallId`) and the API forms (`tool_use`/`tool_result`+`tool_use_id`,
//! `tool_calls`/`role:"tool"`+`tool_call_id`).
//!
//! The rule checked is the one every provider enforces on the context it receives:
//! after an assistant turn that asks for tools, exactly one result per call follows
//! before the next user or assistant message. Transcripts are trees, so the rule is
//! checked along every root-to-leaf path; each entry has one path from the root, so
//! each verdict about an entry is unambiguous.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::StoreError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueKind {
    /// A result whose call is not the pending call of the preceding assistant turn.
    OrphanedToolResult,
    /// A call without a result before the next message (or the end of the branch).
    MissingToolResult,
    /// A second result for a call that was already answered.
    DuplicateToolResult,
    /// A result that appears before the assistant turn holding its call.
    ResultBeforeCall,
    /// The last line has no newline and does not parse: an interrupted write.
    TornLine,
    /// A complete line that is not a JSON entry object.
    UnparseableLine,
    /// `parentId` names no earlier entry (or is not a string).
    BadParent,
    /// Line 1 is not a session header.
    BadHeader,
    /// Load only: a well-formed line of a type or shape this build cannot model; it is
    /// kept on disk but left out of the context. Never repaired, never counted by scans.
    SkippedEntry,
    /// Not a transcript fault: a run in which nothing progressed was stopped by the
    /// stall watchdog (runtime incidents only; scans never report it).
    StalledRun,
}

impl IssueKind {
    pub fn as_str(self) -> &'static str {
        match self {
            IssueKind::OrphanedToolResult => "orphaned_tool_result",
            IssueKind::MissingToolResult => "missing_tool_result",
            IssueKind::DuplicateToolResult => "duplicate_tool_result",
            IssueKind::ResultBeforeCall => "result_before_call",
            IssueKind::TornLine => "torn_line",
            IssueKind::UnparseableLine => "unparseable_line",
            IssueKind::BadParent => "bad_parent",
            IssueKind::BadHeader => "bad_header",
            IssueKind::SkippedEntry => "skipped_entry",
            IssueKind::StalledRun => "stalled_run",
        }
    }
}

impl std::fmt::Display for IssueKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One finding. For transcripts `line` is the 1-based line number; for API message
/// arrays ([`validate_api_messages`]) it is the 0-based message index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Issue {
    #[serde(rename = "type")]
    pub kind: IssueKind,
    pub line: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    pub description: String,
}

impl Issue {
    pub(crate) fn new(kind: IssueKind, line: usize, description: impl Into<String>) -> Self {
        Issue {
            kind,
            line,
            entry_id: None,
            tool_call_id: None,
            description: description.into(),
        }
    }
}

/// Validates a transcript file. I/O errors are errors; damage is reported as issues.
pub fn validate_file(path: &Path) -> Result<Vec<Issue>, StoreError> {
    let bytes = std::fs::read(path).map_err(|e| StoreError::io(path, e))?;
    Ok(validate_bytes(&bytes))
}

/// Validates transcript bytes (header line + one entry per line).
pub fn validate_bytes(bytes: &[u8]) -> Vec<Issue> {
    let doc = Doc::parse(bytes);
    let analysis = analyze(&doc.pnodes());
    doc.issues(&analysis)
}

/// Validates a provider request's message array in either API form (OpenAI
/// `tool_calls`/`role:"tool"`, Anthropic `tool_use`/`tool_result`) or the transcript
/// form. `line` in the issues is the message index.
pub fn validate_api_messages(messages: &[Value]) -> Vec<Issue> {
    let nodes: Vec<PNode> = messages
        .iter()
        .enumerate()
        .map(|(i, m)| PNode {
            parent: i.checked_sub(1),
            pairing: pairing_of_message(m),
        })
        .collect();
    let analysis = analyze(&nodes);
    let mut issues = result_issues(&nodes, &analysis, |i| (i, None));
    issues.sort_by_key(|i| i.line);
    issues
}

// ---------------------------------------------------------------------------------
// Pairing facts of one message.

/// Where a result sits inside its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Loc {
    /// The whole message is the result (`toolResult`, OpenAI `tool`).
    Whole,
    /// Index of a `tool_result` block in the message's `content` array.
    Block(usize),
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Pairing {
    /// An assistant turn: closes the previous turn and opens one with these calls.
    pub opens: bool,
    pub calls: Vec<(String, String)>,
    pub results: Vec<(String, Loc)>,
    /// A user-side message: ends the current turn (after its own results, if any).
    pub closes: bool,
}

pub(crate) fn pairing_of_message(m: &Value) -> Pairing {
    let mut p = Pairing::default();
    let role = m.get("role").and_then(Value::as_str).unwrap_or("");
    let content = m.get("content");
    match role {
        "assistant" => {
            p.opens = true;
            if let Some(blocks) = content.and_then(Value::as_array) {
                for b in blocks {
                    let ty = b.get("type").and_then(Value::as_str).unwrap_or("");
                    if ty == "toolCall" || ty == "tool_use" {
                        p.calls.push((str_field(b, "id"), str_field(b, "name")));
                    }
                }
            }
            if let Some(calls) = m.get("tool_calls").and_then(Value::as_array) {
                for c in calls {
                    let name = c
                        .get("function")
                        .map(|f| str_field(f, "name"))
                        .unwrap_or_default();
                    p.calls.push((str_field(c, "id"), name));
                }
            }
        }
        "toolResult" => p.results.push((str_field(m, "toolCallId"), Loc::Whole)),
        "tool" => p.results.push((str_field(m, "tool_call_id"), Loc::Whole)),
        // Instructions are not turns; providers accept them anywhere we put them.
        "system" | "developer" => {}
        _ => {
            // `user` and anything else a transcript may hold as a user-side message.
            let mut other = true;
            if let Some(blocks) = content.and_then(Value::as_array) {
                other = blocks.is_empty();
                for (i, b) in blocks.iter().enumerate() {
                    if b.get("type").and_then(Value::as_str) == Some("tool_result") {
                        p.results.push((str_field(b, "tool_use_id"), Loc::Block(i)));
                    } else {
                        other = true;
                    }
                }
            }
            p.closes = other;
        }
    }
    p
}

fn str_field(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

// ---------------------------------------------------------------------------------
// Raw transcript lines.

pub(crate) struct Doc<'a> {
    pub lines: Vec<Line<'a>>,
    pub nodes: Vec<Node>,
    /// Whether line 1 is a valid session header.
    pub has_header: bool,
    /// Issues found while parsing (lines, header, parents).
    pub parse_issues: Vec<Issue>,
}

pub(crate) struct Line<'a> {
    pub raw: &'a [u8],
    pub kind: LineKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LineKind {
    Header,
    Entry(usize),
    Blank,
    Torn,
    Unparseable,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParentRef {
    Root,
    Node(usize),
    /// Names nothing usable; the raw value is kept unless the repair fixes it.
    Dangling,
}

pub(crate) struct Node {
    /// Index into `Doc::lines`.
    pub line: usize,
    pub id: String,
    pub value: Value,
    /// As written.
    pub parent: ParentRef,
    /// What the analysis (and a full repair) uses: a dangling parent becomes the
    /// previous entry in file order, which is where an append-only writer put it.
    pub fixed_parent: Option<usize>,
    pub pairing: Pairing,
}

impl<'a> Doc<'a> {
    pub fn parse(bytes: &'a [u8]) -> Doc<'a> {
        let terminated = bytes.ends_with(b"\n");
        let mut raws: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
        if terminated || bytes.is_empty() {
            // split() yields an empty piece after the final newline; it is not a line.
            raws.pop();
        }
        let count = raws.len();
        let mut doc = Doc {
            lines: Vec::with_capacity(count),
            nodes: Vec::with_capacity(count),
            has_header: false,
            parse_issues: Vec::new(),
        };
        let mut ids: HashMap<String, usize> = HashMap::with_capacity(count);
        for (idx, raw) in raws.into_iter().enumerate() {
            let line_no = idx + 1;
            let torn = !terminated && idx + 1 == count;
            let kind = doc.classify(raw, line_no, torn, &mut ids);
            doc.lines.push(Line { raw, kind });
        }
        if !doc.has_header {
            doc.parse_issues.push(Issue::new(
                IssueKind::BadHeader,
                1,
                "line 1 is not a session header",
            ));
        }
        doc
    }

    fn classify(
        &mut self,
        raw: &[u8],
        line_no: usize,
        torn: bool,
        ids: &mut HashMap<String, usize>,
    ) -> LineKind {
        if raw.iter().all(u8::is_ascii_whitespace) {
            return LineKind::Blank;
        }
        let value: Value = match serde_json::from_slice(raw) {
            Ok(v) => v,
            Err(e) if torn => {
                self.parse_issues.push(Issue::new(
                    IssueKind::TornLine,
                    line_no,
                    format!(
                        "last line ({} bytes) has no newline and does not parse: {e}",
                        raw.len()
                    ),
                ));
                return LineKind::Torn;
            }
            Err(e) => {
                self.parse_issues.push(Issue::new(
                    IssueKind::UnparseableLine,
                    line_no,
                    format!("not JSON: {e}"),
                ));
                return LineKind::Unparseable;
            }
        };
        let ty = value.get("type").and_then(Value::as_str).unwrap_or("");
        if ty == "session" {
            if line_no == 1
                && value
                    .get("id")
                    .and_then(Value::as_str)
                    .is_some_and(|s| !s.is_empty())
            {
                self.has_header = true;
                return LineKind::Header;
            }
            self.parse_issues.push(Issue::new(
                IssueKind::UnparseableLine,
                line_no,
                "session header where an entry belongs",
            ));
            return LineKind::Unparseable;
        }
        let id = value.get("id").and_then(Value::as_str).unwrap_or("");
        if ty.is_empty() || id.is_empty() {
            self.parse_issues.push(Issue::new(
                IssueKind::UnparseableLine,
                line_no,
                "JSON but not an entry (needs string `type` and `id`)",
            ));
            return LineKind::Unparseable;
        }
        let id = id.to_owned();
        let n = self.nodes.len();
        let parent = match value.get("parentId") {
            None | Some(Value::Null) => ParentRef::Root,
            Some(Value::String(p)) => match ids.get(p.as_str()) {
                Some(&i) => ParentRef::Node(i),
                None => {
                    let mut issue = Issue::new(
                        IssueKind::BadParent,
                        line_no,
                        format!("parentId {p:?} names no earlier entry"),
                    );
                    issue.entry_id = Some(id.clone());
                    self.parse_issues.push(issue);
                    ParentRef::Dangling
                }
            },
            Some(other) => {
                let mut issue = Issue::new(
                    IssueKind::BadParent,
                    line_no,
                    format!("parentId is not a string: {other}"),
                );
                issue.entry_id = Some(id.clone());
                self.parse_issues.push(issue);
                ParentRef::Dangling
            }
        };
        let fixed_parent = match parent {
            ParentRef::Root => None,
            ParentRef::Node(i) => Some(i),
            ParentRef::Dangling => n.checked_sub(1),
        };
        let pairing = match ty {
            "message" => value
                .get("message")
                .map(pairing_of_message)
                .unwrap_or_default(),
            // pi turns these into user messages when it builds the context.
            "custom_message" | "branch_summary" => Pairing {
                closes: true,
                ..Pairing::default()
            },
            _ => Pairing::default(),
        };
        // Later duplicates win, as in the loader's active-branch walk.
        ids.insert(id.clone(), n);
        self.nodes.push(Node {
            line: self.lines.len(),
            id,
            value,
            parent,
            fixed_parent,
            pairing,
        });
        LineKind::Entry(n)
    }

    pub fn pnodes(&self) -> Vec<PNode> {
        self.nodes
            .iter()
            .map(|n| PNode {
                parent: n.fixed_parent,
                pairing: n.pairing.clone(),
            })
            .collect()
    }

    /// Nothing at all could be read: no header, no entry, no torn line. Repairing such a
    /// file would replace it with an empty session, so callers refuse instead.
    pub fn is_hopeless(&self) -> bool {
        !self.has_header
            && self.nodes.is_empty()
            && !self.lines.iter().any(|l| l.kind == LineKind::Torn)
    }

    pub fn issues(&self, analysis: &Analysis) -> Vec<Issue> {
        let mut issues = self.parse_issues.clone();
        let pnodes_ids = |n: usize| (self.nodes[n].line + 1, Some(self.nodes[n].id.clone()));
        let nodes = self.pnodes();
        issues.extend(result_issues(&nodes, analysis, pnodes_ids));
        issues.sort_by_key(|i| i.line);
        issues
    }
}

// ---------------------------------------------------------------------------------
// The analysis shared by transcripts and API arrays.

pub(crate) struct PNode {
    pub parent: Option<usize>,
    pub pairing: Pairing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct RRef {
    pub node: usize,
    /// Index into the node's `pairing.results`.
    pub k: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Ok,
    Duplicate,
    Orphan,
    /// An orphan at its position that belongs in this slot (moved there by a repair).
    Fills(usize),
}

/// A place right after `anchor` (the assistant turn or its last good result) where a
/// result for `call_id` is missing on the path through `child`.
#[derive(Debug, Clone)]
pub(crate) struct Slot {
    pub anchor: usize,
    pub child: Option<usize>,
    pub call_id: String,
    pub tool_name: String,
    pub assistant: usize,
    /// Detected at the end of a branch: the run stopped before writing results.
    pub at_end: bool,
    pub fill: Option<RRef>,
    /// The fill appeared before the call (else after a later message).
    pub fill_before: bool,
}

pub(crate) struct Analysis {
    /// Per node, per result.
    pub verdicts: Vec<Vec<Verdict>>,
    pub slots: Vec<Slot>,
}

#[derive(Clone)]
struct Turn {
    assistant: usize,
    calls: Vec<(String, String)>,
    answered: HashSet<String>,
    anchor: usize,
    anchor_depth: usize,
}

#[derive(Clone, Default)]
struct PathState {
    turn: Option<Turn>,
    /// Orphans seen on this path: a later call with the same id may claim them.
    stash: Vec<(String, RRef)>,
    /// Slots left empty on this path: a later stray result may fill them.
    open: Vec<(String, usize)>,
}

struct Walker<'n> {
    nodes: &'n [PNode],
    verdicts: Vec<Vec<Verdict>>,
    slots: Vec<Slot>,
    slot_index: HashMap<(usize, Option<usize>, String), usize>,
    path: Vec<usize>,
}

pub(crate) fn analyze(nodes: &[PNode]) -> Analysis {
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut roots = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        match n.parent {
            // Parents always precede children (the parser only links backwards), so
            // the walk below cannot cycle.
            Some(p) if p < i => children[p].push(i),
            _ => roots.push(i),
        }
    }
    let mut w = Walker {
        nodes,
        verdicts: nodes
            .iter()
            .map(|n| vec![Verdict::Ok; n.pairing.results.len()])
            .collect(),
        slots: Vec::new(),
        slot_index: HashMap::new(),
        path: Vec::new(),
    };
    // Iterative depth-first walk: transcripts can be deeper than the thread stack.
    let mut stack: Vec<(usize, usize, PathState)> = roots
        .into_iter()
        .rev()
        .map(|r| (r, 0, PathState::default()))
        .collect();
    while let Some((n, depth, mut state)) = stack.pop() {
        w.path.truncate(depth);
        w.path.push(n);
        w.visit(n, depth, &mut state);
        let kids = &children[n];
        match kids.len() {
            0 => w.close(&mut state, true),
            _ => {
                // Branch points are rare, so cloning the path state there is cheap.
                for (j, &c) in kids.iter().enumerate().rev() {
                    let s = if j == 0 {
                        std::mem::take(&mut state)
                    } else {
                        state.clone()
                    };
                    stack.push((c, depth + 1, s));
                }
            }
        }
    }
    Analysis {
        verdicts: w.verdicts,
        slots: w.slots,
    }
}

impl Walker<'_> {
    fn visit(&mut self, n: usize, depth: usize, state: &mut PathState) {
        let p = &self.nodes[n].pairing;
        if p.opens {
            self.close(state, false);
            state.turn = Some(Turn {
                assistant: n,
                calls: p.calls.clone(),
                answered: HashSet::new(),
                anchor: n,
                anchor_depth: depth,
            });
        }
        for (k, (id, _)) in p.results.iter().enumerate() {
            let rref = RRef { node: n, k };
            if let Some(t) = state.turn.as_mut() {
                if t.answered.contains(id) {
                    self.verdicts[n][k] = Verdict::Duplicate;
                    continue;
                }
                if t.calls.iter().any(|(c, _)| c == id) {
                    t.answered.insert(id.clone());
                    t.anchor = n;
                    t.anchor_depth = depth;
                    continue;
                }
            }
            if let Some(pos) = state.open.iter().position(|(c, _)| c == id) {
                let slot = state.open.remove(pos).1;
                if self.slots[slot].fill.is_none() {
                    self.slots[slot].fill = Some(rref);
                    self.verdicts[n][k] = Verdict::Fills(slot);
                    continue;
                }
            }
            self.verdicts[n][k] = Verdict::Orphan;
            state.stash.push((id.clone(), rref));
        }
        if p.closes {
            self.close(state, false);
        }
    }

    fn close(&mut self, state: &mut PathState, at_end: bool) {
        let Some(turn) = state.turn.take() else {
            return;
        };
        let child = self.path.get(turn.anchor_depth + 1).copied();
        for (call_id, name) in &turn.calls {
            if turn.answered.contains(call_id) {
                continue;
            }
            let key = (turn.anchor, child, call_id.clone());
            let slot = match self.slot_index.get(&key) {
                Some(&s) => s,
                None => {
                    self.slots.push(Slot {
                        anchor: turn.anchor,
                        child,
                        call_id: call_id.clone(),
                        tool_name: name.clone(),
                        assistant: turn.assistant,
                        at_end,
                        fill: None,
                        fill_before: false,
                    });
                    self.slot_index.insert(key, self.slots.len() - 1);
                    self.slots.len() - 1
                }
            };
            if self.slots[slot].fill.is_some() {
                continue;
            }
            let claim = state
                .stash
                .iter()
                .position(|(c, r)| c == call_id && self.verdicts[r.node][r.k] == Verdict::Orphan);
            if let Some(pos) = claim {
                let rref = state.stash.remove(pos).1;
                self.verdicts[rref.node][rref.k] = Verdict::Fills(slot);
                self.slots[slot].fill = Some(rref);
                self.slots[slot].fill_before = true;
            } else if !at_end {
                state.open.push((call_id.clone(), slot));
            }
        }
    }
}

/// Issues about results and slots; `at` maps a node to (line, entry id).
fn result_issues(
    nodes: &[PNode],
    a: &Analysis,
    at: impl Fn(usize) -> (usize, Option<String>),
) -> Vec<Issue> {
    let mut out = Vec::new();
    for (n, verdicts) in a.verdicts.iter().enumerate() {
        for (k, v) in verdicts.iter().enumerate() {
            let id = &nodes[n].pairing.results[k].0;
            let (kind, description) = match v {
                Verdict::Ok => continue,
                Verdict::Duplicate => (
                    IssueKind::DuplicateToolResult,
                    format!("second result for tool call {id:?}"),
                ),
                Verdict::Orphan => (
                    IssueKind::OrphanedToolResult,
                    format!("result for tool call {id:?} follows no pending call with that id"),
                ),
                Verdict::Fills(s) if a.slots[*s].fill_before => (
                    IssueKind::ResultBeforeCall,
                    format!(
                        "result for tool call {id:?} comes before the turn that makes the call"
                    ),
                ),
                Verdict::Fills(_) => (
                    IssueKind::OrphanedToolResult,
                    format!(
                        "result for tool call {id:?} is separated from its call by a later message"
                    ),
                ),
            };
            let (line, entry_id) = at(n);
            out.push(Issue {
                kind,
                line,
                entry_id,
                tool_call_id: Some(id.clone()),
                description,
            });
        }
    }
    for s in a.slots.iter().filter(|s| s.fill.is_none()) {
        let (line, entry_id) = at(s.assistant);
        let why = if s.at_end {
            "the branch ends before its result (interrupted run)"
        } else {
            "the next message comes before its result"
        };
        out.push(Issue {
            kind: IssueKind::MissingToolResult,
            line,
            entry_id,
            tool_call_id: Some(s.call_id.clone()),
            description: format!(
                "tool call {:?} ({}) has no result: {why}",
                s.call_id, s.tool_name
            ),
        });
    }
    out
}
