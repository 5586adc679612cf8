//! Session storage: the session index (rows of the home's SQLite database) and the
//! append-only JSONL transcripts (OpenClaw / pi session files, version 3).
//!
//! Everything above this crate talks to the [`SessionStore`], [`SessionLog`] and
//! [`Integrity`] traits so that a database backend can replace the embedded file backend
//! ([`FileSessionStore`]) without touching callers: nothing above the store names a path
//! inside the home.

use std::io;
use std::path::PathBuf;

use async_trait::async_trait;
use ferroclaw_types::{Entry, EntryBody, Message, Usage};
use serde::{Deserialize, Serialize};

mod channels;
mod cron;
mod devices;
mod directory;
mod file;
mod file_integrity;
mod group_sync;
pub mod integrity;
mod mcp_servers;
mod memory;
mod migration;
mod postgres;
mod secret;
mod signals;
mod sqlite;
mod traces;
mod transcript;

pub use channels::{
    ApprovedSender, ChannelStore, PairingOutcome, PairingRequest, DELIVERY_MEMORY_MS,
};
pub use cron::{CronJob, CronRun, CronStore, RUNS_KEPT_PER_JOB};
pub use devices::{DevicePairing, DeviceRecord, DeviceStore};
pub use directory::{
    AgentKind, AgentRecord, Directory, FileScope, ProviderRecord, Share, ShareRole, StoredFile,
};
pub use file::{FileSessionLog, FileSessionStore};
pub use integrity::{
    cap_tool_result, validate_api_messages, validate_bytes, validate_file, Incident,
    IntegrityStatus, Issue, IssueKind, ScanOptions, ScanSummary, Strategy,
};
pub use mcp_servers::{McpServerRecord, McpServerStore};
pub use memory::MemoryStore;
pub use migration::MigrationState;
pub use postgres::PgSessionStore;
pub use secret::{mask, SecretError, SecretKey, SEALED_PREFIX};
pub use signals::{Signal, SignalBus};
pub use traces::{
    SpanRecord, TraceFilter, TracePage, TraceRecord, TraceStore, UsageGroup, UsageQuery, UsageRow,
};
pub use transcript::{
    active_branch, build_context, effective_branch, read_transcript, EffectiveBranch, LoadProblem,
    LoadProblemKind, SUMMARY_PREFIX,
};

/// When an appended transcript line counts as stored (`session.durability`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// Each turn's end syncs its own session: a turn acknowledged survives a power loss.
    #[default]
    Fsync,
    /// Group commit: turns ending while another's sync runs share the next sync (of the
    /// filesystem, or one synchronous commit): the same promise per acknowledged turn,
    /// fewer syncs under load.
    Batch,
}

/// One row of the session index: where a session's transcript lives and running totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMeta {
    /// The index key; on load it is always taken from the map key, so a stale copy here
    /// cannot disagree with the index.
    #[serde(default)]
    pub key: String,
    pub session_id: String,
    #[serde(default)]
    pub agent_id: String,
    /// Milliseconds since the Unix epoch.
    #[serde(default)]
    pub created_at: i64,
    /// Milliseconds since the Unix epoch.
    #[serde(default)]
    pub updated_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Running totals over every recorded run.
    #[serde(default)]
    pub usage: Usage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

impl SessionMeta {
    /// Adds what the assistant turns of `entries` record (usage, the latest provider and
    /// model) to the totals, as when an index row is rebuilt from a transcript.
    pub(crate) fn add_runs(&mut self, entries: &[Entry]) {
        for message in entries.iter().filter_map(Entry::message) {
            if let Message::Assistant(a) = message {
                self.usage.add(&a.usage);
                if !a.provider.is_empty() {
                    self.provider = Some(a.provider.clone());
                }
                if !a.model.is_empty() {
                    self.model = Some(a.model.clone());
                }
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("corrupt file {}: {message}", path.display())]
    Corrupt { path: PathBuf, message: String },
    #[error("not found: {0}")]
    NotFound(String),
    #[error("invalid key: {0}")]
    InvalidKey(String),
    /// What was asked clashes with what is stored (a name already taken).
    #[error("{0}")]
    Conflict(String),
    /// The database failed (busy past its time-out, full disk, a damaged file, a
    /// migration that does not match this build).
    #[error("database {}: {message}", path.display())]
    Database { path: PathBuf, message: String },
}

impl StoreError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        StoreError::Io {
            path: path.into(),
            source,
        }
    }
}

/// Sessions of every agent: the index plus access to transcripts. Every store also
/// answers for the integrity of what it holds ([`Integrity`]), so one handle serves both.
#[async_trait]
pub trait SessionStore: Integrity + Send + Sync {
    /// Opens (creating if absent) the session `key` of `agent_id` and loads its transcript.
    async fn open(&self, agent_id: &str, key: &str) -> Result<Box<dyn SessionLog>, StoreError>;
    /// A session's entries for a reader (history, previews, the session tools): never
    /// creates the session and never writes — a run may be appending to it this very
    /// moment, and a repair on load would replace the transcript under that run's feet.
    /// Lines a reader cannot use (one being written, a damaged one) are left out of the
    /// copy; the transcript itself is the next writer's to repair. `None`: no such session.
    async fn read(&self, agent_id: &str, key: &str) -> Result<Option<Vec<Entry>>, StoreError>;
    async fn get(&self, agent_id: &str, key: &str) -> Result<Option<SessionMeta>, StoreError>;
    /// Newest `updated_at` first.
    async fn list(&self, agent_id: &str) -> Result<Vec<SessionMeta>, StoreError>;
    /// After a run: sets provider/model, adds usage to the totals, bumps updated_at.
    async fn record_run(
        &self,
        agent_id: &str,
        key: &str,
        provider: &str,
        model: &str,
        usage: &Usage,
    ) -> Result<(), StoreError>;
    /// Removes the index entry and the transcript; `false` when the key was unknown.
    async fn delete(&self, agent_id: &str, key: &str) -> Result<bool, StoreError>;
    /// Waits until nobody else writes the session, and keeps it so until the lease is
    /// dropped. Within one process the runtime's session queue already serialises runs;
    /// the lease extends the one-writer rule to every process on the same storage (a CLI
    /// beside a gateway). The runtime takes it for every run and every queued write.
    async fn lease(&self, agent_id: &str, key: &str) -> Result<SessionLease, StoreError>;
    /// Whether the storage answers now (`/health`). Cheap enough to call per request: a
    /// backend may answer from a check made within the last second.
    async fn available(&self) -> bool {
        true
    }
    /// The bus to the other instances on the same storage (`None`: this process is the
    /// only one that runs sessions of it).
    fn signals(&self) -> Option<std::sync::Arc<dyn SignalBus>> {
        None
    }
    /// The session as an OpenClaw JSONL transcript, header first (`None`: no such
    /// session): what `ferroclaw sessions export` writes, whatever the backend.
    async fn export(&self, agent_id: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// The tenants' agents, shares, files and provider records in the same storage
    /// (`None`: a store that keeps none, such as the in-memory one).
    fn directory(&self) -> Option<std::sync::Arc<dyn Directory>> {
        None
    }
    /// Scheduled jobs and their run log in the same storage (`None`: a store that keeps
    /// none, such as the in-memory one).
    fn cron(&self) -> Option<std::sync::Arc<dyn CronStore>> {
        None
    }
    /// MCP servers created through the API, in the same storage (`None`: a store that
    /// keeps none).
    fn mcp_servers(&self) -> Option<std::sync::Arc<dyn McpServerStore>> {
        None
    }
    /// Chat channels' pairing, account leases and handled messages, in the same storage
    /// (`None`: a store that keeps none).
    fn channels(&self) -> Option<std::sync::Arc<dyn ChannelStore>> {
        None
    }
    /// Runs' traces in the same storage (`None`: a store that keeps none).
    fn traces(&self) -> Option<std::sync::Arc<dyn TraceStore>> {
        None
    }
    /// Devices paired with the gateway (`None`: a store that keeps none).
    fn devices(&self) -> Option<std::sync::Arc<dyn DeviceStore>> {
        None
    }
}

/// Transcript integrity over everything a store holds. The rule it enforces: in the
/// context sent to a provider, every tool call has exactly one result, after its call.
#[async_trait]
pub trait Integrity: Send + Sync {
    /// Validates every stored transcript (of `opts.agent` only, when set) and, with
    /// `opts.repair`, repairs the damaged ones, reporting an incident for each. Per-file
    /// failures are collected in the summary. The outcome becomes the
    /// [`Integrity::last_scan_status`].
    async fn scan(&self, opts: ScanOptions) -> Result<ScanSummary, StoreError>;
    /// The status of the most recent scan, `None` when none was recorded (or the record
    /// cannot be read: a status is informative, never a reason to fail a caller).
    async fn last_scan_status(&self) -> Option<IntegrityStatus>;
    /// Records an incident report (its timestamp is filled in when empty).
    async fn report_incident(&self, incident: Incident) -> Result<(), StoreError>;
    /// The most recent incident reports, newest first, at most `limit`.
    async fn incidents(&self, limit: usize) -> Result<Vec<Incident>, StoreError>;
    /// Whether a server scans everything at start. A shared database does not: every
    /// instance would scan it all at each start, a cost that grows with the data, while
    /// each session is validated (and repaired) when it is opened anyway.
    fn scan_at_start(&self) -> bool {
        true
    }
}

/// The right to write one session, for as long as it is held.
pub struct SessionLease {
    _held: Box<dyn Send + Sync>,
}

impl SessionLease {
    /// A lease backed by `held` (a lock file, a database lock), released when dropped.
    pub fn new(held: impl Send + Sync + 'static) -> Self {
        SessionLease {
            _held: Box::new(held),
        }
    }
}

impl std::fmt::Debug for SessionLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionLease")
    }
}

/// One open transcript. Callers (the scheduler's session queue) guarantee a single writer
/// per session; two logs open on the same session would each believe they own the leaf.
#[async_trait]
pub trait SessionLog: Send + Sync {
    fn session_id(&self) -> &str;
    fn key(&self) -> &str;
    /// All entries in file order (header excluded, problem lines skipped).
    fn entries(&self) -> &[Entry];
    /// What the loader had to skip or could not read as intended.
    fn problems(&self) -> &[LoadProblem];
    /// Messages of the active branch (path from the newest entry back to the root),
    /// compaction-aware: see [`build_context`].
    fn context(&self) -> Vec<Message>;
    /// Appends one entry as one line (never rewrites the file), parent = current leaf.
    async fn append(&mut self, body: EntryBody) -> Result<Entry, StoreError>;
    /// Makes what was appended durable; called before a run reports success.
    async fn flush(&mut self) -> Result<(), StoreError>;
}

/// Agent ids become directory names, so they are restricted to `[A-Za-z0-9_-]{1,64}`.
pub fn validate_agent_id(agent_id: &str) -> Result<(), StoreError> {
    if is_safe_name(agent_id, 64) {
        Ok(())
    } else {
        Err(StoreError::InvalidKey(format!(
            "agent id {agent_id:?} must be 1-64 characters of A-Z a-z 0-9 _ -"
        )))
    }
}

/// Session keys are only index keys (never paths): any non-empty text of at most 256
/// characters without control characters.
pub fn validate_session_key(key: &str) -> Result<(), StoreError> {
    if key.is_empty() {
        return Err(StoreError::InvalidKey("session key is empty".into()));
    }
    if key.chars().count() > 256 {
        return Err(StoreError::InvalidKey(
            "session key is longer than 256 characters".into(),
        ));
    }
    if key.chars().any(char::is_control) {
        return Err(StoreError::InvalidKey(format!(
            "session key {key:?} contains control characters"
        )));
    }
    Ok(())
}

/// Session ids read back from the index become file names; an edited index must not be
/// able to point outside the sessions directory.
pub(crate) fn is_safe_name(name: &str, max: usize) -> bool {
    !name.is_empty()
        && name.len() <= max
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
