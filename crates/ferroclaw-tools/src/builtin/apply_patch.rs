//! `apply_patch`: apply a unified diff or an OpenAI-style patch, all or nothing.
//!
//! Two input formats:
//! - unified diff (`diff -u`, `git diff`): `--- a/x` / `+++ b/x` headers, `@@ -l,s +l,s @@`
//!   hunks, `/dev/null` for created and deleted files;
//! - the OpenAI patch format: `*** Begin Patch`, `*** Add File: p` (lines prefixed `+`),
//!   `*** Update File: p` (optional `*** Move to: q`, `@@ context` anchors, ` `/`-`/`+`
//!   lines, optional `*** End of File`), `*** Delete File: p`, `*** End Patch`.
//!
//! Every hunk is located against the current files (in memory) before anything is written.
//! A hunk's context and removed lines must match exactly; if no exact match exists, a
//! match that differs only in trailing whitespace is accepted (editors and models often
//! drop or add trailing blanks) — nothing looser. Then every new file is staged as a temp
//! file beside its destination and renamed into place; if staging fails, the temps are
//! removed and no file has changed. Paths are confined to the workspace.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{required_str, Workspace};
use crate::beneath::OpenError;
use crate::{Tool, ToolContext, ToolResult};

pub struct ApplyPatchTool;

#[async_trait]
impl Tool for ApplyPatchTool {
    fn name(&self) -> &str {
        "apply_patch"
    }

    fn aliases(&self) -> &[&str] {
        &["patch"]
    }

    fn description(&self) -> &str {
        "Apply a patch to files in the workspace: a unified diff (--- a/x, +++ b/x, @@ hunks) or the *** Begin Patch format (Add/Update/Delete File, Move to). All or nothing: if any hunk does not apply, no file is changed."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "patch": {"type": "string", "description": "The patch text (unified diff or *** Begin Patch ... *** End Patch)."}
            },
            "required": ["patch"]
        })
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> ToolResult {
        let ws = match Workspace::of(ctx) {
            Ok(ws) => ws,
            Err(e) => return e,
        };
        let patch = match required_str(&args, &["patch", "input", "diff"]) {
            Ok(p) => p.to_string(),
            Err(e) => return e,
        };
        let root = ws.root().to_path_buf();
        let joined = tokio::task::spawn_blocking(move || apply_patch_text(&root, &patch)).await;
        match joined {
            Ok(Ok(summary)) => ToolResult::ok(summary),
            Ok(Err(e)) => {
                ToolResult::error(format!("apply_patch failed, no file was changed: {e}"))
            }
            Err(e) => ToolResult::error(format!("apply_patch failed: {e}")),
        }
    }
}

/// One line of a hunk body.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Line {
    Context(String),
    Remove(String),
    Add(String),
}

#[derive(Debug, Clone)]
struct Hunk {
    /// How the hunk is named in errors (`hunk 2 (@@ -10,3 +10,4 @@)`).
    label: String,
    /// 1-based line the hunk claims to start at (unified diffs only): a search hint.
    old_start: Option<usize>,
    /// `@@ fn foo` anchors of the OpenAI format: lines that must be found, in order, before
    /// the hunk.
    anchors: Vec<String>,
    lines: Vec<Line>,
    /// The hunk must match at the end of the file.
    at_eof: bool,
    /// The new side has no final newline (`\ No newline at end of file` after a `+` line).
    no_newline_new: bool,
    /// The old side had no final newline (the marker after a `-` line).
    no_newline_old: bool,
}

#[derive(Debug, Clone)]
enum FileOp {
    Add {
        path: String,
        content: String,
    },
    Delete {
        path: String,
        /// Lines the diff says the file had (unified diffs), verified before deleting.
        expected: Option<Vec<String>>,
    },
    Update {
        path: String,
        move_to: Option<String>,
        hunks: Vec<Hunk>,
    },
}

/// Parses either format and applies it under `root`; returns a summary.
pub fn apply_patch_text(root: &Path, patch: &str) -> Result<String, String> {
    let ops = parse_patch(patch)?;
    if ops.is_empty() {
        return Err("the patch contains no file changes".into());
    }
    apply_ops(root, &ops)
}

fn parse_patch(patch: &str) -> Result<Vec<FileOp>, String> {
    let text = patch.replace("\r\n", "\n");
    let lines: Vec<&str> = text.lines().collect();
    if lines.iter().any(|l| l.trim() == "*** Begin Patch") {
        parse_openai(&lines)
    } else {
        parse_unified(&lines)
    }
}

fn parse_openai(lines: &[&str]) -> Result<Vec<FileOp>, String> {
    let start = lines
        .iter()
        .position(|l| l.trim() == "*** Begin Patch")
        .ok_or("missing *** Begin Patch")?;
    let mut i = start + 1;
    let mut ops = Vec::new();
    let mut ended = false;
    while i < lines.len() {
        let line = lines[i];
        let t = line.trim_end();
        if t == "*** End Patch" {
            ended = true;
            break;
        }
        if let Some(p) = t.strip_prefix("*** Add File: ") {
            i += 1;
            let mut content = String::new();
            while i < lines.len() && !lines[i].starts_with("*** ") {
                let l = lines[i];
                let body = l.strip_prefix('+').ok_or_else(|| {
                    format!("*** Add File: {p}: line {:?} must start with '+'", l)
                })?;
                content.push_str(body);
                content.push('\n');
                i += 1;
            }
            ops.push(FileOp::Add {
                path: p.trim().to_string(),
                content,
            });
        } else if let Some(p) = t.strip_prefix("*** Delete File: ") {
            ops.push(FileOp::Delete {
                path: p.trim().to_string(),
                expected: None,
            });
            i += 1;
        } else if let Some(p) = t.strip_prefix("*** Update File: ") {
            let path = p.trim().to_string();
            i += 1;
            let mut move_to = None;
            if let Some(m) = lines
                .get(i)
                .and_then(|l| l.trim_end().strip_prefix("*** Move to: "))
            {
                move_to = Some(m.trim().to_string());
                i += 1;
            }
            let mut hunks: Vec<Hunk> = Vec::new();
            let mut current: Option<Hunk> = None;
            while i < lines.len() {
                let l = lines[i];
                if l.trim_end() == "*** End of File" {
                    if let Some(h) = current.as_mut() {
                        h.at_eof = true;
                    }
                    i += 1;
                    continue;
                }
                if l.starts_with("*** ") {
                    break;
                }
                if let Some(anchor) = l.strip_prefix("@@") {
                    let anchor = anchor.trim();
                    // Consecutive `@@` lines narrow the same hunk (class, then method).
                    let open_empty = current.as_ref().is_some_and(|h| h.lines.is_empty());
                    if !open_empty {
                        if let Some(h) = current.take() {
                            hunks.push(h);
                        }
                        let header = if anchor.is_empty() {
                            String::new()
                        } else {
                            format!("@@ {anchor}")
                        };
                        current = Some(new_hunk(hunks.len() + 1, header, None));
                    }
                    if let Some(h) = current.as_mut() {
                        if !anchor.is_empty() {
                            h.anchors.push(anchor.to_string());
                        }
                    }
                    i += 1;
                    continue;
                }
                let h =
                    current.get_or_insert_with(|| new_hunk(hunks.len() + 1, String::new(), None));
                let parsed = match l.chars().next() {
                    Some(' ') => Line::Context(l[1..].to_string()),
                    Some('-') => Line::Remove(l[1..].to_string()),
                    Some('+') => Line::Add(l[1..].to_string()),
                    // Blank lines lose their leading space in transit: context "".
                    None => Line::Context(String::new()),
                    Some(_) => {
                        return Err(format!(
                        "*** Update File: {path}: line {:?} must start with ' ', '-', '+' or '@@'",
                        l
                    ))
                    }
                };
                h.lines.push(parsed);
                i += 1;
            }
            if let Some(h) = current.take() {
                hunks.push(h);
            }
            hunks.retain(|h| !h.lines.is_empty());
            if hunks.is_empty() && move_to.is_none() {
                return Err(format!("*** Update File: {path} has no changes"));
            }
            ops.push(FileOp::Update {
                path,
                move_to,
                hunks,
            });
        } else if t.trim().is_empty() {
            i += 1;
        } else {
            return Err(format!(
                "unexpected line {:?} in *** Begin Patch (expected *** Add File, *** Update File, *** Delete File or *** End Patch)",
                line
            ));
        }
    }
    if !ended {
        return Err("missing *** End Patch".into());
    }
    Ok(ops)
}

fn new_hunk(n: usize, header: String, old_start: Option<usize>) -> Hunk {
    let label = if header.is_empty() {
        format!("hunk {n}")
    } else {
        format!("hunk {n} ({header})")
    };
    Hunk {
        label,
        old_start,
        anchors: Vec::new(),
        lines: Vec::new(),
        at_eof: false,
        no_newline_new: false,
        no_newline_old: false,
    }
}

/// `\ No newline at end of file` refers to the line just before it.
fn mark_no_newline(h: &mut Hunk) {
    match h.lines.last() {
        Some(Line::Add(_)) => h.no_newline_new = true,
        Some(Line::Remove(_)) => h.no_newline_old = true,
        Some(Line::Context(_)) => {
            h.no_newline_new = true;
            h.no_newline_old = true;
        }
        None => {}
    }
}

/// `--- a/x\t2024-01-01` → `x`; `/dev/null` → None.
fn diff_path(raw: &str) -> Option<String> {
    let p = raw.split('\t').next().unwrap_or("").trim();
    let p = p.trim_matches('"');
    if p == "/dev/null" {
        return None;
    }
    let p = p
        .strip_prefix("a/")
        .or_else(|| p.strip_prefix("b/"))
        .unwrap_or(p);
    Some(p.to_string())
}

/// `@@ -12,3 +12,4 @@ ...` → (12, 3, 12, 4); a missing count means 1.
fn parse_range_header(h: &str) -> Option<(usize, usize, usize, usize)> {
    let inner = h.strip_prefix("@@ ")?;
    let end = inner.find(" @@")?;
    let mut parts = inner[..end].split_whitespace();
    let range = |s: &str, sign: char| -> Option<(usize, usize)> {
        let s = s.strip_prefix(sign)?;
        match s.split_once(',') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => Some((s.parse().ok()?, 1)),
        }
    };
    let (os, oc) = range(parts.next()?, '-')?;
    let (ns, nc) = range(parts.next()?, '+')?;
    Some((os, oc, ns, nc))
}

fn parse_unified(lines: &[&str]) -> Result<Vec<FileOp>, String> {
    let mut ops = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(old_raw) = lines[i].strip_prefix("--- ") else {
            i += 1;
            continue;
        };
        let Some(new_raw) = lines.get(i + 1).and_then(|l| l.strip_prefix("+++ ")) else {
            i += 1;
            continue;
        };
        let old = diff_path(old_raw);
        let new = diff_path(new_raw);
        let name = new.clone().or(old.clone()).unwrap_or_default();
        i += 2;
        let mut hunks = Vec::new();
        while i < lines.len() && lines[i].starts_with("@@") {
            let header = lines[i];
            let (os, oc, _ns, nc) = parse_range_header(header)
                .ok_or_else(|| format!("{name}: malformed hunk header {header:?}"))?;
            let mut h = new_hunk(hunks.len() + 1, header.trim_end().to_string(), Some(os));
            i += 1;
            let (mut old_left, mut new_left) = (oc, nc);
            // Counts in the header say where the hunk ends: a body line starting with
            // "---" is then content, not the next file's header.
            while old_left > 0 || new_left > 0 {
                let Some(l) = lines.get(i) else {
                    return Err(format!(
                        "{name}: {} ends early (the patch is cut off)",
                        h.label
                    ));
                };
                match l.chars().next() {
                    Some(' ') | None => {
                        h.lines.push(Line::Context(l.get(1..).unwrap_or("").to_string()));
                        old_left = old_left.saturating_sub(1);
                        new_left = new_left.saturating_sub(1);
                    }
                    Some('-') => {
                        h.lines.push(Line::Remove(l[1..].to_string()));
                        old_left = old_left.saturating_sub(1);
                    }
                    Some('+') => {
                        h.lines.push(Line::Add(l[1..].to_string()));
                        new_left = new_left.saturating_sub(1);
                    }
                    Some('\\') => mark_no_newline(&mut h),
                    Some(_) => {
                        return Err(format!(
                            "{name}: {} has an unexpected line {:?} (the line counts in the header do not match the body)",
                            h.label, l
                        ))
                    }
                }
                i += 1;
            }
            // "\ No newline at end of file" right after the hunk applies to its last line.
            while let Some(l) = lines.get(i) {
                if !l.starts_with('\\') {
                    break;
                }
                mark_no_newline(&mut h);
                i += 1;
            }
            hunks.push(h);
        }
        match (old, new) {
            (None, None) => return Err("a file header names /dev/null on both sides".into()),
            (None, Some(path)) => {
                let mut content = String::new();
                for h in &hunks {
                    for l in &h.lines {
                        if let Line::Add(s) | Line::Context(s) = l {
                            content.push_str(s);
                            content.push('\n');
                        }
                    }
                }
                if hunks.last().is_some_and(|h| h.no_newline_new) {
                    content.pop();
                }
                ops.push(FileOp::Add { path, content });
            }
            (Some(path), None) => {
                let expected = hunks
                    .iter()
                    .flat_map(|h| h.lines.iter())
                    .filter_map(|l| match l {
                        Line::Remove(s) | Line::Context(s) => Some(s.clone()),
                        Line::Add(_) => None,
                    })
                    .collect();
                ops.push(FileOp::Delete {
                    path,
                    expected: Some(expected),
                });
            }
            (Some(old), Some(new)) => {
                if hunks.is_empty() && old == new {
                    return Err(format!("{name}: the diff has no hunks"));
                }
                ops.push(FileOp::Update {
                    move_to: (old != new).then_some(new),
                    path: old,
                    hunks,
                });
            }
        }
    }
    if ops.is_empty() {
        return Err(
            "no file changes found: expected a unified diff (--- a/file, +++ b/file, @@ hunks) or *** Begin Patch ... *** End Patch".into(),
        );
    }
    Ok(ops)
}

/// A file's text as lines plus whether it ended with a newline.
#[derive(Debug, Clone)]
struct Text {
    lines: Vec<String>,
    final_newline: bool,
}

impl Text {
    fn parse(s: &str) -> Self {
        if s.is_empty() {
            return Self {
                lines: Vec::new(),
                final_newline: true,
            };
        }
        let final_newline = s.ends_with('\n');
        let lines = s.lines().map(str::to_string).collect();
        Self {
            lines,
            final_newline,
        }
    }

    fn render(&self) -> String {
        let mut out = self.lines.join("\n");
        if self.final_newline && !self.lines.is_empty() {
            out.push('\n');
        }
        out
    }
}

/// Where `needle` occurs in `hay` at or after `from`, nearest to `hint`; exact first, then
/// ignoring trailing whitespace. `at_eof` requires the match to end at the last line.
fn find_block(
    hay: &[String],
    needle: &[&str],
    from: usize,
    hint: Option<usize>,
    at_eof: bool,
) -> Option<usize> {
    if needle.len() > hay.len() {
        return None;
    }
    let last_start = hay.len() - needle.len();
    if from > last_start {
        return None;
    }
    let candidates: Vec<usize> = if at_eof {
        vec![last_start]
    } else {
        let mut c: Vec<usize> = (from..=last_start).collect();
        if let Some(h) = hint {
            c.sort_by_key(|p| p.abs_diff(h));
        }
        c
    };
    let exact = |p: usize| needle.iter().enumerate().all(|(k, n)| hay[p + k] == *n);
    let loose = |p: usize| {
        needle
            .iter()
            .enumerate()
            .all(|(k, n)| hay[p + k].trim_end() == n.trim_end())
    };
    candidates
        .iter()
        .copied()
        .find(|p| *p >= from && exact(*p))
        .or_else(|| candidates.iter().copied().find(|p| *p >= from && loose(*p)))
}

fn apply_hunks(path: &str, text: &mut Text, hunks: &[Hunk]) -> Result<(), String> {
    let mut cursor = 0usize;
    for h in hunks {
        // `@@ anchor` lines: each must be found (trimmed) after the previous one.
        for a in &h.anchors {
            let pos = text.lines[cursor.min(text.lines.len())..]
                .iter()
                .position(|l| l.trim() == a.trim())
                .ok_or_else(|| {
                    format!(
                        "{path}: {} did not apply: the context line {a:?} was not found",
                        h.label
                    )
                })?;
            cursor += pos + 1;
        }
        let old: Vec<&str> = h
            .lines
            .iter()
            .filter_map(|l| match l {
                Line::Context(s) | Line::Remove(s) => Some(s.as_str()),
                Line::Add(_) => None,
            })
            .collect();
        let at = if old.is_empty() {
            // Pure insertion: after the stated line (unified), after the `@@` anchor, or,
            // with neither, at the end of the file.
            match h.old_start {
                Some(s) => s.min(text.lines.len()),
                None if h.at_eof || h.anchors.is_empty() => text.lines.len(),
                None => cursor.min(text.lines.len()),
            }
        } else {
            let hint = h.old_start.map(|s| s.saturating_sub(1));
            find_block(&text.lines, &old, cursor, hint, h.at_eof).ok_or_else(|| {
                let first = old.first().copied().unwrap_or("");
                format!(
                    "{path}: {} did not apply: its {} context/removed line(s) starting with {first:?} do not match the file{}",
                    h.label,
                    old.len(),
                    match h.old_start {
                        Some(s) => format!(" near line {s}"),
                        None => String::new(),
                    }
                )
            })?
        };
        // Context lines keep the file's own text (they may differ in trailing whitespace).
        let mut k = 0;
        let mut new: Vec<String> = Vec::with_capacity(h.lines.len());
        for l in &h.lines {
            match l {
                Line::Context(_) => {
                    new.push(text.lines[at + k].clone());
                    k += 1;
                }
                Line::Remove(_) => k += 1,
                Line::Add(s) => new.push(s.clone()),
            }
        }
        let added = new.len();
        text.lines.splice(at..at + old.len(), new);
        cursor = at + added;
        if at + added == text.lines.len() {
            if h.no_newline_new {
                text.final_newline = false;
            } else if h.no_newline_old {
                text.final_newline = true;
            }
        }
    }
    Ok(())
}

/// The planned state of one path: new content, or deletion.
#[derive(Debug, Clone)]
enum Planned {
    Write(String),
    Delete,
}

struct Plan {
    /// Resolved path → (shown name, final state). Ordered for deterministic summaries.
    files: BTreeMap<PathBuf, (String, Planned)>,
    summary: Vec<String>,
    /// Canonical workspace: errors show paths relative to it, never host paths.
    root: PathBuf,
}

impl Plan {
    /// The content a path has at this point of the plan (earlier ops included).
    fn current(&self, resolved: &Path) -> Result<Option<String>, String> {
        if let Some((_, p)) = self.files.get(resolved) {
            return Ok(match p {
                Planned::Write(s) => Some(s.clone()),
                Planned::Delete => None,
            });
        }
        match crate::beneath::read(&self.root, resolved) {
            Ok(bytes) => String::from_utf8(bytes)
                .map(Some)
                .map_err(|_| format!("{} is not UTF-8 text", self.shown(resolved))),
            Err(OpenError::NotFound) => Ok(None),
            Err(OpenError::IsDir) => Err(format!("{} is a directory", self.shown(resolved))),
            Err(e) => Err(format!("cannot read {}: {e}", self.shown(resolved))),
        }
    }

    fn shown(&self, resolved: &Path) -> String {
        crate::paths::display_relative(&self.root, resolved)
    }
}

fn resolve(root: &Path, p: &str) -> Result<PathBuf, String> {
    crate::paths::resolve_in_workspace(root, p).map_err(|e| {
        if matches!(e, crate::paths::PathError::OutsideWorkspace { .. }) {
            tracing::warn!(target: "security.paths", path = %p, "apply_patch refused a path outside the workspace");
        }
        e.to_string()
    })
}

fn apply_ops(root: &Path, ops: &[FileOp]) -> Result<String, String> {
    let mut plan = Plan {
        files: BTreeMap::new(),
        summary: Vec::new(),
        root: crate::paths::canonical_workspace(root).map_err(|e| e.to_string())?,
    };
    // Phase 1: compute every file's final content in memory; any error stops here.
    for op in ops {
        match op {
            FileOp::Add { path, content } => {
                let r = resolve(root, path)?;
                if plan.current(&r)?.is_some() {
                    return Err(format!("{path}: cannot add, the file already exists"));
                }
                plan.files
                    .insert(r, (path.clone(), Planned::Write(content.clone())));
                plan.summary.push(format!("A {path}"));
            }
            FileOp::Delete { path, expected } => {
                let r = resolve(root, path)?;
                let Some(current) = plan.current(&r)? else {
                    return Err(format!("{path}: cannot delete, the file does not exist"));
                };
                if let Some(exp) = expected {
                    let have = Text::parse(&current).lines;
                    let same = have.len() == exp.len()
                        && have
                            .iter()
                            .zip(exp)
                            .all(|(a, b)| a.trim_end() == b.trim_end());
                    if !same {
                        return Err(format!(
                            "{path}: cannot delete, the file's content differs from the diff"
                        ));
                    }
                }
                plan.files.insert(r, (path.clone(), Planned::Delete));
                plan.summary.push(format!("D {path}"));
            }
            FileOp::Update {
                path,
                move_to,
                hunks,
            } => {
                let r = resolve(root, path)?;
                let Some(current) = plan.current(&r)? else {
                    return Err(format!("{path}: cannot update, the file does not exist"));
                };
                let mut text = Text::parse(&current);
                apply_hunks(path, &mut text, hunks)?;
                let new_content = text.render();
                match move_to {
                    Some(dest) => {
                        let d = resolve(root, dest)?;
                        if d != r && plan.current(&d)?.is_some() {
                            return Err(format!(
                                "{path}: cannot move to {dest}, which already exists"
                            ));
                        }
                        plan.files
                            .insert(r.clone(), (path.clone(), Planned::Delete));
                        plan.files
                            .insert(d, (dest.clone(), Planned::Write(new_content)));
                        plan.summary.push(format!(
                            "R {path} -> {dest} ({} hunk{})",
                            hunks.len(),
                            if hunks.len() == 1 { "" } else { "s" }
                        ));
                    }
                    None => {
                        plan.files
                            .insert(r, (path.clone(), Planned::Write(new_content)));
                        plan.summary.push(format!(
                            "M {path} ({} hunk{})",
                            hunks.len(),
                            if hunks.len() == 1 { "" } else { "s" }
                        ));
                    }
                }
            }
        }
    }
    commit(&plan)?;
    Ok(format!("Patch applied:\n{}", plan.summary.join("\n")))
}

/// Phase 2: apply every write and deletion beneath the workspace (each write lands
/// through a temporary file renamed in a verified directory, see `beneath`). If one
/// fails, everything already changed is put back as it was.
fn commit(plan: &Plan) -> Result<(), String> {
    let root = &plan.root;
    // Previous content of everything we are about to replace or delete, for the rollback.
    let previous: Vec<(PathBuf, Option<Vec<u8>>)> = plan
        .files
        .keys()
        .map(|p| (p.clone(), crate::beneath::read(root, p).ok()))
        .collect();
    let mut done: Vec<&PathBuf> = Vec::new();
    let rollback = |done: &[&PathBuf]| {
        for (p, old) in previous.iter().filter(|(p, _)| done.contains(&p)) {
            let _ = match old {
                Some(bytes) => crate::beneath::write(root, p, bytes, true),
                None => crate::beneath::remove(root, p),
            };
        }
    };
    for (path, (shown, planned)) in &plan.files {
        let result = match planned {
            Planned::Write(content) => crate::beneath::write(root, path, content.as_bytes(), true)
                .map_err(|e| format!("cannot write {shown}: {e}")),
            Planned::Delete => crate::beneath::remove(root, path)
                .map_err(|e| format!("cannot delete {shown}: {e}")),
        };
        if let Err(e) = result {
            rollback(&done);
            return Err(e);
        }
        done.push(path);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_headers() {
        assert_eq!(
            parse_range_header("@@ -1,3 +1,4 @@ fn x"),
            Some((1, 3, 1, 4))
        );
        assert_eq!(parse_range_header("@@ -5 +5 @@"), Some((5, 1, 5, 1)));
        assert_eq!(parse_range_header("@@ -0,0 +1,2 @@"), Some((0, 0, 1, 2)));
        assert_eq!(parse_range_header("@@ nonsense @@"), None);
    }

    #[test]
    fn text_roundtrip_keeps_final_newline_state() {
        for s in ["a\nb\n", "a\nb", "", "\n"] {
            assert_eq!(Text::parse(s).render(), s, "{s:?}");
        }
    }
}
