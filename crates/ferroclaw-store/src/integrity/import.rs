//! `sessions import`: reads OpenClaw / pi transcripts and registers them as sessions of
//! one agent, repairing them on the way.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use ferroclaw_types::{now_millis, Usage};
use serde::Serialize;
use serde_json::Value;
use tracing::warn;

use super::repair::{repair_bytes, Strategy};
use super::validate::{validate_bytes, Issue};
use crate::file::write_atomic;
use crate::transcript::{iso_to_millis, parse_transcript, random_entry_id};
use crate::{is_safe_name, FileSessionStore, SessionMeta, StoreError};

/// Directory levels searched below the import directory (pi nests one level per cwd,
/// OpenClaw three: `agents/<id>/sessions`).
const MAX_DEPTH: usize = 6;

#[derive(Debug, Clone, Default, Serialize)]
pub struct ImportReport {
    pub files: Vec<ImportedFile>,
}

impl ImportReport {
    pub fn imported(&self) -> usize {
        self.count(|o| matches!(o, ImportOutcome::Imported { .. }))
    }
    pub fn already_imported(&self) -> usize {
        self.count(|o| matches!(o, ImportOutcome::AlreadyImported { .. }))
    }
    pub fn failed(&self) -> usize {
        self.count(|o| matches!(o, ImportOutcome::Failed { .. }))
    }
    fn count(&self, f: impl Fn(&ImportOutcome) -> bool) -> usize {
        self.files.iter().filter(|x| f(&x.outcome)).count()
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ImportedFile {
    pub source: PathBuf,
    pub outcome: ImportOutcome,
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ImportOutcome {
    Imported {
        session_key: String,
        session_id: String,
        entries: usize,
        /// What the repair fixed on the way in (empty for a healthy file).
        repaired: Vec<Issue>,
    },
    /// A transcript with this session id is already present: importing twice is a no-op.
    AlreadyImported {
        session_id: String,
    },
    Failed {
        reason: String,
    },
}

impl FileSessionStore {
    /// Imports every `*.jsonl` transcript found in `dir` (recursively) into `agent_id`.
    /// Keys come from a `sessions.json` next to the file when it names the session,
    /// else the key is the session id. Files that cannot be imported are reported with
    /// the reason; only an unreadable `dir` is an error.
    pub async fn import_dir(&self, agent_id: &str, dir: &Path) -> Result<ImportReport, StoreError> {
        let sessions_dir = self.sessions_dir(agent_id)?;
        let src = dir.to_owned();
        let mut report = ImportReport::default();
        let files = crate::file::blocking(src.clone(), move || {
            let mut out = Vec::new();
            collect_jsonl(&src, 0, &mut out)?;
            out.sort();
            Ok(out)
        })
        .await?;
        for source in files {
            let outcome = match self.import_file(agent_id, &sessions_dir, &source).await {
                Ok(o) => o,
                Err(e) => ImportOutcome::Failed {
                    reason: e.to_string(),
                },
            };
            report.files.push(ImportedFile { source, outcome });
        }
        Ok(report)
    }

    async fn import_file(
        &self,
        agent_id: &str,
        sessions_dir: &Path,
        source: &Path,
    ) -> Result<ImportOutcome, StoreError> {
        let src = source.to_owned();
        let dir = sessions_dir.to_owned();
        let prepared = crate::file::blocking(src.clone(), move || prepare(&src, &dir)).await?;
        let (session_id, key_hint, bytes, repaired) = match prepared {
            Prepared::Ready {
                session_id,
                key_hint,
                bytes,
                repaired,
            } => (session_id, key_hint, bytes, repaired),
            Prepared::Done(outcome) => return Ok(outcome),
        };
        let parsed = parse_transcript(&bytes, source)?;
        let mut meta = meta_of(agent_id, &session_id, &parsed);
        let entries = parsed.entries.len();
        let sid = session_id.clone();
        meta.key = key_hint.unwrap_or_else(|| sid.clone());
        // The file is written inside the index's write transaction so that an import
        // racing an `open` of the same key cannot leave a row without its transcript.
        let agent = agent_id.to_owned();
        let key = self
            .with_index(agent_id, move |db, dir| {
                let path = dir.join(format!("{sid}.jsonl"));
                db.insert_imported(&agent, meta, || {
                    fs::create_dir_all(dir).map_err(|e| StoreError::io(dir, e))?;
                    write_atomic(&path, &bytes)
                })
            })
            .await?;
        Ok(ImportOutcome::Imported {
            session_key: key,
            session_id,
            entries,
            repaired,
        })
    }
}

/// The index row of an imported transcript: times from its header and last entry,
/// totals from its assistant turns; the key is the caller's to set.
pub(crate) fn meta_of(
    agent_id: &str,
    session_id: &str,
    parsed: &crate::transcript::Parsed,
) -> SessionMeta {
    let mut meta = SessionMeta {
        key: session_id.to_owned(),
        session_id: session_id.to_owned(),
        agent_id: agent_id.to_owned(),
        created_at: iso_to_millis(&parsed.header.timestamp).unwrap_or_else(now_millis),
        updated_at: parsed
            .entries
            .last()
            .and_then(|e| iso_to_millis(&e.timestamp))
            .unwrap_or_else(now_millis),
        provider: None,
        model: None,
        usage: Usage::default(),
        label: None,
    };
    meta.add_runs(&parsed.entries);
    meta
}

enum Prepared {
    Ready {
        session_id: String,
        key_hint: Option<String>,
        bytes: Vec<u8>,
        repaired: Vec<Issue>,
    },
    Done(ImportOutcome),
}

fn failed(reason: impl Into<String>) -> Result<Prepared, StoreError> {
    Ok(Prepared::Done(ImportOutcome::Failed {
        reason: reason.into(),
    }))
}

/// Reads, migrates and repairs one source file; picks its session id.
fn prepare(source: &Path, sessions_dir: &Path) -> Result<Prepared, StoreError> {
    let original = match fs::read(source) {
        Ok(b) => b,
        Err(e) => return failed(format!("cannot read: {e}")),
    };
    if original.iter().all(u8::is_ascii_whitespace) {
        return failed("empty file");
    }
    let migrated = assign_missing_ids(&original);
    let bytes = migrated.as_deref().unwrap_or(&original);
    let stem = source
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let header_id = first_line_header_id(bytes);
    let wanted = header_id.clone().unwrap_or_else(|| stem.clone());
    let session_id = if is_safe_name(&wanted, 128) {
        wanted
    } else {
        uuid::Uuid::now_v7().to_string()
    };
    if sessions_dir.join(format!("{session_id}.jsonl")).exists() {
        return Ok(Prepared::Done(ImportOutcome::AlreadyImported {
            session_id,
        }));
    }
    let repair = repair_bytes(bytes, Strategy::Full, &session_id);
    if repair.hopeless {
        return failed("not a transcript: no session header and no readable entry");
    }
    let mut out = repair.bytes.unwrap_or_else(|| bytes.to_vec());
    if header_id.is_some_and(|h| h != session_id) {
        out = with_header_id(&out, &session_id);
    }
    let left = validate_bytes(&out);
    if !left.is_empty() {
        warn!(source = %source.display(), issues = left.len(), "imported transcript still has issues after repair");
    }
    // OpenClaw's index names the session by id; fall back to the file name.
    let key_hint = source.parent().and_then(|d| {
        // OpenClaw keeps the same `sessions.json` layout, so the scan's reader serves.
        let keys = super::scan::legacy_session_keys(d);
        keys.get(&session_id).or_else(|| keys.get(&stem)).cloned()
    });
    Ok(Prepared::Ready {
        session_id,
        key_hint,
        bytes: out,
        repaired: repair.issues,
    })
}

pub(crate) fn first_line_header_id(bytes: &[u8]) -> Option<String> {
    let first = bytes.split(|b| *b == b'\n').next()?;
    let v: Value = serde_json::from_slice(first).ok()?;
    (v.get("type")?.as_str()? == "session")
        .then(|| v.get("id")?.as_str().map(str::to_owned))
        .flatten()
}

pub(crate) fn with_header_id(bytes: &[u8], id: &str) -> Vec<u8> {
    let end = bytes
        .iter()
        .position(|b| *b == b'\n')
        .unwrap_or(bytes.len());
    let Ok(Value::Object(mut header)) = serde_json::from_slice::<Value>(&bytes[..end]) else {
        return bytes.to_vec();
    };
    header.insert("id".into(), Value::String(id.to_owned()));
    let Ok(mut out) = serde_json::to_vec(&Value::Object(header)) else {
        return bytes.to_vec();
    };
    out.extend_from_slice(&bytes[end..]);
    out
}

/// Older pi files (before the entry tree) have entries without `id`/`parentId`: they
/// were a plain list, so each gets a fresh id and the previous entry as parent.
pub(crate) fn assign_missing_ids(bytes: &[u8]) -> Option<Vec<u8>> {
    let lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    let needs = lines.iter().skip(1).any(|l| {
        serde_json::from_slice::<Value>(l)
            .ok()
            .is_some_and(|v| v.is_object() && v.get("id").is_none() && v.get("type").is_some())
    });
    if !needs {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() + lines.len() * 40);
    let mut prev: Option<String> = None;
    for (i, raw) in lines.iter().enumerate() {
        let parsed = serde_json::from_slice::<Value>(raw).ok();
        match parsed {
            Some(Value::Object(mut obj))
                if i > 0 && obj.get("type").and_then(Value::as_str) != Some("session") =>
            {
                let id = match obj.get("id").and_then(Value::as_str) {
                    Some(id) => id.to_owned(),
                    None => {
                        let id = random_entry_id();
                        obj.insert("id".into(), Value::String(id.clone()));
                        obj.entry("parentId")
                            .or_insert_with(|| prev.clone().map_or(Value::Null, Value::String));
                        id
                    }
                };
                prev = Some(id);
                out.extend_from_slice(&serde_json::to_vec(&Value::Object(obj)).unwrap_or_default());
            }
            _ => out.extend_from_slice(raw),
        }
        if i + 1 < lines.len() {
            out.push(b'\n');
        }
    }
    Some(out)
}

pub(crate) fn collect_jsonl(
    dir: &Path,
    depth: usize,
    out: &mut Vec<PathBuf>,
) -> Result<(), StoreError> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if depth > 0 && e.kind() == io::ErrorKind::PermissionDenied => return Ok(()),
        Err(e) => return Err(StoreError::io(dir, e)),
    };
    for item in rd {
        let item = item.map_err(|e| StoreError::io(dir, e))?;
        let path = item.path();
        let Ok(ft) = item.file_type() else { continue };
        if ft.is_dir() && depth < MAX_DEPTH {
            collect_jsonl(&path, depth + 1, out)?;
        } else if ft.is_file()
            && path.extension().is_some_and(|x| x == "jsonl")
            && !item.file_name().to_string_lossy().starts_with('.')
        {
            out.push(path);
        }
    }
    Ok(())
}
