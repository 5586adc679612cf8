//! The start-up scan: every transcript under `<home>/agents/*/sessions/` is validated
//! and, on request, repaired (backup first, then an atomic replace) with an incident
//! report per repaired file.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::{info, warn};

use super::repair::{repair_bytes, Strategy};
use super::validate::Issue;
use crate::file::{sync_dir, write_atomic, write_atomic_with, write_backup};
use crate::transcript::iso_now;
use crate::{is_safe_name, StoreError};

#[derive(Debug, Clone, Default)]
pub struct ScanOptions {
    /// Rewrite damaged files; without it the scan only reports.
    pub repair: bool,
    pub strategy: Strategy,
    /// Only this agent's sessions.
    pub agent: Option<String>,
}

/// What happened to one file that had issues.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileReport {
    pub agent_id: String,
    /// From the session index; `None` for a transcript the index does not list.
    pub session_key: Option<String>,
    pub file: PathBuf,
    pub issues: Vec<Issue>,
    /// `detected` (report only), `repaired` / `removed_orphans` (file rewritten),
    /// `nothing_to_fix` (the strategy fixes none of these issues) or `unrepairable`.
    pub action: String,
    pub backup: Option<PathBuf>,
    pub incident: Option<PathBuf>,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScanSummary {
    /// Transcripts looked at.
    pub sessions: usize,
    /// Issues found, over all transcripts.
    pub issues: usize,
    /// Transcripts rewritten.
    pub repaired: usize,
    /// Only the transcripts that had issues.
    pub files: Vec<FileReport>,
    /// Files that could not be read at all (I/O errors); they are reported, not skipped.
    pub errors: Vec<(PathBuf, String)>,
    #[serde(skip)]
    pub elapsed: Duration,
}

impl std::fmt::Display for ScanSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} sessions, {} issues, {} repaired",
            self.sessions, self.issues, self.repaired
        )?;
        if !self.errors.is_empty() {
            write!(f, ", {} unreadable", self.errors.len())?;
        }
        Ok(())
    }
}

/// One `logs/integrity-incident-<timestamp>.json` file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Incident {
    /// ISO 8601; filled in by [`write_incident`] when empty.
    #[serde(default)]
    pub timestamp: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    pub session_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    pub issues: Vec<Issue>,
    /// e.g. `repaired`, `removed_orphans`, `repaired_on_load`, `detected_at_runtime`.
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<PathBuf>,
}

/// Writes an incident report under `<home>/logs/` (never overwriting one) and returns
/// its path.
pub(crate) fn write_incident(home: &Path, incident: &Incident) -> Result<PathBuf, StoreError> {
    let dir = home.join("logs");
    fs::create_dir_all(&dir).map_err(|e| StoreError::io(&dir, e))?;
    let mut incident = incident.clone();
    if incident.timestamp.is_empty() {
        incident.timestamp = iso_now();
    }
    let bytes = serde_json::to_vec_pretty(&incident)
        .map_err(|e| StoreError::io(&dir, io::Error::other(e)))?;
    // Named after its own timestamp, so the newest-first listing by name is newest-first
    // by timestamp too, however reports written at once interleave.
    let stamp: String = incident
        .timestamp
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '.')
        .collect();
    for n in 0u32.. {
        let name = if n == 0 {
            format!("{INCIDENT_PREFIX}{stamp}.json")
        } else {
            format!("{INCIDENT_PREFIX}{stamp}-{n}.json")
        };
        let path = dir.join(name);
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut f) => {
                f.write_all(&bytes)
                    .and_then(|()| f.sync_all())
                    .map_err(|e| StoreError::io(&path, e))?;
                sync_dir(&path)?;
                return Ok(path);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(StoreError::io(&path, e)),
        }
    }
    unreachable!("u32 range exhausted while naming an incident file")
}

const INCIDENT_PREFIX: &str = "integrity-incident-";

/// The newest `limit` incident reports under `<home>/logs/`. The file names sort by
/// time (their own timestamp), so no report has to be parsed to be ordered; one that
/// cannot be parsed is skipped with a warning, as the reports are for people.
pub(crate) fn list_incidents(home: &Path, limit: usize) -> Result<Vec<Incident>, StoreError> {
    let dir = home.join("logs");
    let mut names: Vec<String> = match fs::read_dir(&dir) {
        Ok(rd) => rd
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.starts_with(INCIDENT_PREFIX) && n.ends_with(".json"))
            .collect(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io(&dir, e)),
    };
    // `<stamp>-<n>.json` was written after `<stamp>.json`: compare without the suffix
    // first so that the counter orders reports of one millisecond.
    names.sort_by(|a, b| incident_order(b).cmp(&incident_order(a)));
    let mut out = Vec::with_capacity(limit.min(names.len()));
    for name in names {
        if out.len() == limit {
            break;
        }
        let path = dir.join(&name);
        let parsed = fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|raw| serde_json::from_slice::<Incident>(&raw).map_err(|e| e.to_string()));
        match parsed {
            Ok(incident) => out.push(incident),
            Err(error) => {
                warn!(file = %path.display(), %error, "unreadable integrity incident report")
            }
        }
    }
    Ok(out)
}

/// (stamp, counter) of an incident file name, for ordering.
fn incident_order(name: &str) -> (&str, u32) {
    let stem = name
        .trim_start_matches(INCIDENT_PREFIX)
        .trim_end_matches(".json");
    match stem.rsplit_once('-') {
        Some((stamp, n)) => (stamp, n.parse().unwrap_or(0)),
        None => (stem, 0),
    }
}

/// `20260101T120000.123Z`: sortable and valid on every file system (no colons).
/// Scans (and optionally repairs) every transcript of every agent under `home`. Blocking
/// file I/O: [`crate::Integrity::scan`] runs it on a blocking thread. Per-file failures
/// are collected in the summary; only an unreadable `agents` directory is an error.
/// `keys_of` names an agent's sessions (session id → key) for the report.
pub(crate) fn scan_home(
    home: &Path,
    opts: &ScanOptions,
    keys_of: &dyn Fn(&str) -> HashMap<String, String>,
) -> Result<ScanSummary, StoreError> {
    let started = Instant::now();
    let mut summary = ScanSummary::default();
    let agents_dir = home.join("agents");
    let agents: Vec<String> = match &opts.agent {
        Some(a) => vec![a.clone()],
        None => match fs::read_dir(&agents_dir) {
            Ok(rd) => {
                let mut v: Vec<String> = rd
                    .filter_map(Result::ok)
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                    .collect();
                v.sort();
                v
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(StoreError::io(&agents_dir, e)),
        },
    };
    // (agent, session key, path, session id) of every transcript, in a stable order.
    let mut jobs: Vec<(String, Option<String>, PathBuf, String)> = Vec::new();
    for agent in agents {
        if !is_safe_name(&agent, 64) {
            continue;
        }
        let dir = agents_dir.join(&agent).join("sessions");
        let keys = keys_of(&agent);
        let mut files: Vec<PathBuf> = match fs::read_dir(&dir) {
            Ok(rd) => rd
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
                .collect(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                summary.errors.push((dir.clone(), e.to_string()));
                continue;
            }
        };
        files.sort();
        for path in files {
            let session_id = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let key = keys.get(&session_id).cloned();
            jobs.push((agent.clone(), key, path, session_id));
        }
    }
    summary.sessions = jobs.len();
    // Files are independent: spread them over the cores so a large home does not hold
    // up start-up. Results are collected per chunk and merged in the original order.
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .clamp(1, 8);
    let chunk = jobs.len().div_ceil(threads).max(1);
    let results: Vec<(PathBuf, Result<Option<FileReport>, StoreError>)> = std::thread::scope(|s| {
        let handles: Vec<_> = jobs
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|(agent, key, path, sid)| {
                            let r = scan_file(home, agent, key.clone(), path, sid, opts);
                            (path.clone(), r)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| match h.join() {
                Ok(v) => v,
                // A panic in a scan thread is a bug; surface it instead of hiding files.
                Err(p) => std::panic::resume_unwind(p),
            })
            .collect()
    });
    for (path, result) in results {
        summary.add(path, result);
    }
    summary.elapsed = started.elapsed();
    let status = summary.finish(opts.repair);
    // A status that cannot be written must not fail the scan it describes.
    if let Err(e) = write_status(home, &status) {
        warn!(error = %e, "could not record the integrity scan status");
    }
    Ok(summary)
}

impl ScanSummary {
    /// Counts one transcript's outcome (the place names it when it could not be read).
    pub(crate) fn add(&mut self, place: PathBuf, result: Result<Option<FileReport>, StoreError>) {
        match result {
            Ok(Some(report)) => {
                self.issues += report.issues.len();
                if report.backup.is_some() {
                    self.repaired += 1;
                }
                self.files.push(report);
            }
            Ok(None) => {}
            Err(e) => self.errors.push((place, e.to_string())),
        }
    }

    /// Logs the finished scan and returns the status to record.
    pub(crate) fn finish(&self, repair: bool) -> IntegrityStatus {
        if self.issues > 0 || !self.errors.is_empty() {
            warn!(summary = %self, "transcript integrity scan");
        } else {
            info!(summary = %self, elapsed_ms = self.elapsed.as_millis() as u64, "transcript integrity scan");
        }
        IntegrityStatus {
            timestamp: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            sessions: self.sessions,
            issues: self.issues,
            repaired: self.repaired,
            errors: self.errors.len(),
            repair,
            elapsed_ms: self.elapsed.as_millis() as u64,
        }
    }
}

/// The last scan, as `/integrity` and status surfaces report it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IntegrityStatus {
    pub timestamp: String,
    pub sessions: usize,
    pub issues: usize,
    pub repaired: usize,
    pub errors: usize,
    /// Whether that scan was allowed to repair.
    pub repair: bool,
    pub elapsed_ms: u64,
}

const STATUS_FILE: &str = "integrity-status.json";

fn write_status(home: &Path, status: &IntegrityStatus) -> Result<(), StoreError> {
    let dir = home.join("logs");
    fs::create_dir_all(&dir).map_err(|e| StoreError::io(&dir, e))?;
    let path = dir.join(STATUS_FILE);
    let bytes = serde_json::to_vec_pretty(status).map_err(|e| StoreError::io(&path, e.into()))?;
    // Rewritten by every scan: whole on a crash, not worth an fsync.
    write_atomic_with(&path, &bytes, false)
}

/// The status of the most recent scan of `home`, if one ran. Blocking.
pub(crate) fn last_status(home: &Path) -> Option<IntegrityStatus> {
    let raw = fs::read(home.join("logs").join(STATUS_FILE)).ok()?;
    serde_json::from_slice(&raw).ok()
}

/// A repaired transcript and the name of the repair (`repaired`, `removed_orphans`).
pub(crate) type Fix = (Vec<u8>, &'static str);

/// What a scan makes of one transcript: `None` when it is clean; else the report, and,
/// when the scan may repair and the strategy fixes something, the fixed transcript and
/// the action's name. Backends store the fix their own way ([`record_repair`] after).
pub(crate) fn assess(
    agent: &str,
    key: Option<String>,
    place: &Path,
    bytes: &[u8],
    session_id: &str,
    opts: &ScanOptions,
) -> Option<(FileReport, Option<Fix>)> {
    let repair = repair_bytes(bytes, opts.strategy, session_id);
    if repair.issues.is_empty() {
        return None;
    }
    let mut report = FileReport {
        agent_id: agent.to_owned(),
        session_key: key,
        file: place.to_owned(),
        issues: repair.issues,
        action: "detected".into(),
        backup: None,
        incident: None,
    };
    if !opts.repair {
        return Some((report, None));
    }
    if repair.hopeless {
        report.action = "unrepairable".into();
        return Some((report, None));
    }
    let Some(fixed) = repair.bytes else {
        report.action = "nothing_to_fix".into();
        return Some((report, None));
    };
    let action = match opts.strategy {
        Strategy::Full => "repaired",
        Strategy::RemoveOrphans => "removed_orphans",
    };
    Some((report, Some((fixed, action))))
}

/// Marks `report` as repaired with `backup` kept; returns the incident to record.
pub(crate) fn record_repair(report: &mut FileReport, action: &str, backup: PathBuf) -> Incident {
    report.action = action.into();
    report.backup = Some(backup.clone());
    Incident {
        timestamp: String::new(),
        agent_id: Some(report.agent_id.clone()),
        session_key: report.session_key.clone(),
        file: Some(report.file.clone()),
        issues: report.issues.clone(),
        action: action.into(),
        backup: Some(backup),
    }
}

fn scan_file(
    home: &Path,
    agent: &str,
    key: Option<String>,
    path: &Path,
    session_id: &str,
    opts: &ScanOptions,
) -> Result<Option<FileReport>, StoreError> {
    let bytes = fs::read(path).map_err(|e| StoreError::io(path, e))?;
    let Some((mut report, fix)) = assess(agent, key, path, &bytes, session_id, opts) else {
        return Ok(None);
    };
    let Some((fixed, action)) = fix else {
        return Ok(Some(report));
    };
    let backup = replace_with_backup(path, &bytes, &fixed)?;
    let incident = record_repair(&mut report, action, backup);
    match write_incident(home, &incident) {
        Ok(p) => report.incident = Some(p),
        // The repair itself succeeded; a missing report must not undo it.
        Err(e) => warn!(error = %e, "could not write integrity incident report"),
    }
    Ok(Some(report))
}

/// Backs `original` up to `<path>.bak.<ms>`, then atomically replaces `path` with
/// `fixed` (temp file, fsync, rename, fsync dir). Returns the backup path.
pub(crate) fn replace_with_backup(
    path: &Path,
    original: &[u8],
    fixed: &[u8],
) -> Result<PathBuf, StoreError> {
    let backup = write_backup(path, original)?;
    write_atomic(path, fixed)?;
    Ok(backup)
}

/// Session id → key from a `sessions.json` (OpenClaw's index, met when importing its
/// sessions), read tolerantly: only names are wanted.
pub(crate) fn legacy_session_keys(dir: &Path) -> HashMap<String, String> {
    let Ok(bytes) = fs::read(dir.join("sessions.json")) else {
        return HashMap::new();
    };
    let Ok(Value::Object(index)) = serde_json::from_slice::<Value>(&bytes) else {
        return HashMap::new();
    };
    index
        .into_iter()
        .filter_map(|(key, meta)| {
            let id = meta.get("sessionId")?.as_str()?.to_owned();
            Some((id, key))
        })
        .collect()
}
