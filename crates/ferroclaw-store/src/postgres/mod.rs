//! Managed backend: sessions and their entries as rows of a PostgreSQL database, for
//! deployments that outgrow one machine. A transcript line is one row (the same JSON a
//! JSONL file would hold), appended, never rewritten but by a repair; the validator and
//! repair of the file backend run on the rows as they would on a file.
//!
//! Durability: appends commit without waiting for the WAL flush; [`SessionLog::flush`]
//! commits synchronously, which makes every earlier commit of the session durable too
//! (the WAL is one sequence): one fsync per turn, as with files. A session's lease is a
//! session-level advisory lock held on a connection of its own, so it ends with the
//! connection when an instance dies.

mod channels;
mod cron;
mod devices;
mod directory;
mod integrity;
mod mcp_servers;
pub(crate) mod migrations;
mod signals;
mod tls;
mod traces;

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use ferroclaw_types::{
    now_millis, Entry, EntryBody, Message, SessionHeader, Usage, TRANSCRIPT_VERSION,
};
use tracing::warn;

use crate::integrity::{
    repair_bytes, ImportOutcome, ImportReport, ImportedFile, Incident, Strategy,
    DEFAULT_TOOL_RESULT_CHARS,
};
use crate::migration::MigrationState;
use crate::transcript::{build_context, iso_now, next_entry, parse_transcript};
use crate::{
    validate_agent_id, validate_session_key, Integrity, LoadProblem, SessionLease, SessionLog,
    SessionMeta, SessionStore, StoreError,
};

/// Connections a store keeps at most (leases hold one each while a run is under way).
const POOL_SIZE: usize = 64;
/// How long a statement may take before the store reports the database as unavailable.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);

/// The managed [`SessionStore`].
#[derive(Clone)]
pub struct PgSessionStore {
    pool: Pool,
    strategy: Strategy,
    tool_result_chars: usize,
    /// The last availability check (epoch ms, result): `/health` is unauthenticated, so
    /// a flood of it must not become a flood of database round trips.
    health: std::sync::Arc<std::sync::Mutex<(i64, bool)>>,
    /// Where the signal listener connects (it needs a connection of its own).
    config: tokio_postgres::Config,
    tls: tls::MakeTls,
    signals: std::sync::Arc<std::sync::OnceLock<std::sync::Arc<signals::PgSignals>>>,
    /// `Some` under `Durability::Batch`: one synchronous commit ends many turns.
    group: Option<std::sync::Arc<crate::group_sync::GroupSync>>,
}

const HEALTH_CACHE_MS: i64 = 1_000;

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Where errors point: the database, never its credentials.
fn location() -> PathBuf {
    PathBuf::from("postgresql")
}

/// The error with its causes: tokio-postgres says only "db error" and keeps the
/// server's reason (a refused login, a missing table) in its source.
pub(crate) fn db_error(e: impl std::error::Error) -> StoreError {
    db_message(ferroclaw_types::error_chain(&e))
}

pub(crate) fn db_message(message: String) -> StoreError {
    StoreError::Database {
        path: location(),
        message,
    }
}

fn usage_json(usage: &Usage) -> String {
    serde_json::to_string(usage).unwrap_or_else(|_| "{}".into())
}

fn meta_from_row(agent_id: &str, r: &tokio_postgres::Row) -> SessionMeta {
    let usage: String = r.get(6);
    SessionMeta {
        key: r.get(0),
        session_id: r.get(1),
        agent_id: agent_id.to_string(),
        created_at: r.get(2),
        updated_at: r.get(3),
        provider: r.get(4),
        model: r.get(5),
        usage: serde_json::from_str(&usage).unwrap_or_default(),
        label: r.get(7),
    }
}

const COLUMNS: &str = "key, session_id, created_at, updated_at, provider, model, usage, label";

impl PgSessionStore {
    /// Connects to `dsn` (a `postgres://` URL or key=value string), then verifies and
    /// applies the migrations. Fails when the database cannot be reached.
    pub async fn connect(dsn: &str) -> Result<Self, StoreError> {
        let store = Self::connect_unmigrated(dsn)?;
        store.migrate_up().await?;
        Ok(store)
    }

    /// A store on `dsn` that has not looked at the schema yet (`ferroclaw migrate
    /// status`); nothing is connected until the first call.
    pub fn connect_unmigrated(dsn: &str) -> Result<Self, StoreError> {
        let (mut config, tls) = tls::parse(dsn)
            .map_err(|e| db_message(format!("the database URL is not valid: {e}")))?;
        // Appends need not wait for the WAL flush: see the module's note on durability.
        config.options("-c synchronous_commit=off");
        config.connect_timeout(Duration::from_secs(10));
        config.application_name("ferroclaw");
        let manager = Manager::from_config(
            config.clone(),
            tls.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .wait_timeout(Some(STATEMENT_TIMEOUT))
            .create_timeout(Some(Duration::from_secs(10)))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(db_error)?;
        Ok(PgSessionStore {
            pool,
            strategy: Strategy::Full,
            tool_result_chars: DEFAULT_TOOL_RESULT_CHARS,
            health: std::sync::Arc::new(std::sync::Mutex::new((0, false))),
            config,
            tls,
            signals: std::sync::Arc::default(),
            group: None,
        })
    }

    /// How a damaged transcript is repaired when it is opened (default: full).
    pub fn with_integrity_strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// Cap on the text of one persisted tool result (default 50,000 chars; 0 = no cap).
    pub fn with_tool_result_chars(mut self, max_chars: usize) -> Self {
        self.tool_result_chars = max_chars;
        self
    }

    /// How a turn's end makes its lines durable (default: a synchronous commit of its own).
    pub fn with_durability(mut self, durability: crate::Durability) -> Self {
        self.group = match durability {
            crate::Durability::Fsync => None,
            crate::Durability::Batch => Some(std::sync::Arc::default()),
        };
        self
    }

    pub(crate) async fn client(&self) -> Result<Object, StoreError> {
        self.pool.get().await.map_err(db_error)
    }

    /// Applies pending migrations; returns them all.
    pub async fn migrate_up(&self) -> Result<Vec<MigrationState>, StoreError> {
        let mut client = self.client().await?;
        migrations::migrate_up(&mut client)
            .await
            .map_err(db_error)?;
        migrations::status(&client).await.map_err(db_error)
    }

    pub async fn migration_status(&self) -> Result<Vec<MigrationState>, StoreError> {
        let client = self.client().await?;
        migrations::status(&client).await.map_err(db_error)
    }

    /// The lines of a session's transcript, header first, as a JSONL file would hold them.
    pub(crate) async fn transcript_bytes(
        client: &Object,
        session_id: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let head = client
            .prepare_cached("SELECT header FROM sessions WHERE session_id = $1")
            .await
            .map_err(db_error)?;
        let Some(head) = client
            .query_opt(&head, &[&session_id])
            .await
            .map_err(db_error)?
        else {
            return Ok(None);
        };
        let header: String = head.get(0);
        Ok(Some(Self::with_lines(client, session_id, header).await?.0))
    }

    /// `header` and the session's lines as a transcript, and the `seq` its next line
    /// takes.
    async fn with_lines(
        client: &Object,
        session_id: &str,
        header: String,
    ) -> Result<(Vec<u8>, i64), StoreError> {
        let lines = client
            .prepare_cached(
                "SELECT seq, line FROM session_entries WHERE session_id = $1 ORDER BY seq",
            )
            .await
            .map_err(db_error)?;
        let mut bytes = header.into_bytes();
        bytes.push(b'\n');
        let mut next_seq = 0;
        for row in client
            .query(&lines, &[&session_id])
            .await
            .map_err(db_error)?
        {
            let seq: i64 = row.get(0);
            let line: &str = row.get(1);
            bytes.extend_from_slice(line.as_bytes());
            bytes.push(b'\n');
            next_seq = seq + 1;
        }
        Ok((bytes, next_seq))
    }

    /// Replaces a session's entries with `fixed` (a whole transcript, header first) and
    /// keeps `original` in `session_backups`, in one transaction. Returns the backup's
    /// name for reports.
    pub(crate) async fn replace_with_backup(
        &self,
        session_id: &str,
        original: &[u8],
        fixed: &[u8],
    ) -> Result<PathBuf, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.batch_execute("SET LOCAL synchronous_commit TO on")
            .await
            .map_err(db_error)?;
        let id: i64 = tx
            .query_one(
                "INSERT INTO session_backups (session_id, at, transcript) VALUES ($1, $2, $3) RETURNING id",
                &[&session_id, &now_millis(), &String::from_utf8_lossy(original).into_owned()],
            )
            .await
            .map_err(db_error)?
            .get(0);
        tx.execute(
            "DELETE FROM session_entries WHERE session_id = $1",
            &[&session_id],
        )
        .await
        .map_err(db_error)?;
        let text = String::from_utf8_lossy(fixed);
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        if let Some(header) = lines.next() {
            tx.execute(
                "UPDATE sessions SET header = $2 WHERE session_id = $1",
                &[&session_id, &header],
            )
            .await
            .map_err(db_error)?;
        }
        for (seq, line) in lines.enumerate() {
            tx.execute(
                "INSERT INTO session_entries (session_id, seq, line) VALUES ($1, $2, $3)",
                &[&session_id, &(seq as i64), &line],
            )
            .await
            .map_err(db_error)?;
        }
        tx.commit().await.map_err(db_error)?;
        Ok(PathBuf::from(format!("postgresql:session_backups/{id}")))
    }

    /// Adds a session with its whole transcript (an import): under `meta.key`, or
    /// `import:<sessionId>` when that key is taken. Returns the key used; `None` when a
    /// session with this id exists already.
    pub async fn insert_transcript(
        &self,
        agent_id: &str,
        mut meta: SessionMeta,
        transcript: &[u8],
    ) -> Result<Option<String>, StoreError> {
        validate_agent_id(agent_id)?;
        let text = String::from_utf8_lossy(transcript);
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let header = lines.next().unwrap_or_default().to_string();
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.batch_execute("SET LOCAL synchronous_commit TO on")
            .await
            .map_err(db_error)?;
        if tx
            .query_opt(
                "SELECT 1 FROM sessions WHERE session_id = $1",
                &[&meta.session_id],
            )
            .await
            .map_err(db_error)?
            .is_some()
        {
            return Ok(None);
        }
        if tx
            .query_opt(
                "SELECT 1 FROM sessions WHERE agent_id = $1 AND key = $2",
                &[&agent_id, &meta.key],
            )
            .await
            .map_err(db_error)?
            .is_some()
        {
            meta.key = format!("import:{}", meta.session_id);
        }
        tx.execute(
            "INSERT INTO sessions (agent_id, key, session_id, header, created_at, updated_at, provider, model, usage, label)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            &[
                &agent_id,
                &meta.key,
                &meta.session_id,
                &header,
                &meta.created_at,
                &meta.updated_at,
                &meta.provider,
                &meta.model,
                &usage_json(&meta.usage),
                &meta.label,
            ],
        )
        .await
        .map_err(db_error)?;
        for (seq, line) in lines.enumerate() {
            tx.execute(
                "INSERT INTO session_entries (session_id, seq, line) VALUES ($1, $2, $3)",
                &[&meta.session_id, &(seq as i64), &line],
            )
            .await
            .map_err(db_error)?;
        }
        tx.commit().await.map_err(db_error)?;
        Ok(Some(meta.key))
    }

    /// Imports an OpenClaw / pi transcript (repaired on the way in, as by the file
    /// backend): its session id from the header, its key `key` or else the session id.
    /// A session with that id already present is left as it is.
    pub async fn import_transcript(
        &self,
        agent_id: &str,
        original: &[u8],
        key: Option<String>,
    ) -> Result<ImportOutcome, StoreError> {
        use crate::integrity::import::{assign_missing_ids, first_line_header_id, with_header_id};
        let migrated = assign_missing_ids(original);
        let bytes = migrated.as_deref().unwrap_or(original);
        let header_id = first_line_header_id(bytes);
        let session_id = header_id
            .clone()
            .filter(|id| crate::is_safe_name(id, 128))
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let repair = repair_bytes(bytes, Strategy::Full, &session_id);
        if repair.hopeless {
            return Ok(ImportOutcome::Failed {
                reason: "not a transcript: no session header and no readable entry".into(),
            });
        }
        let mut out = repair.bytes.unwrap_or_else(|| bytes.to_vec());
        if header_id.is_some_and(|h| h != session_id) {
            out = with_header_id(&out, &session_id);
        }
        let parsed = parse_transcript(&out, std::path::Path::new("import"))?;
        let mut meta = crate::integrity::import::meta_of(agent_id, &session_id, &parsed);
        if let Some(key) = key {
            meta.key = key;
        }
        let session_id = meta.session_id.clone();
        let entries = parsed.entries.len();
        Ok(match self.insert_transcript(agent_id, meta, &out).await? {
            Some(session_key) => ImportOutcome::Imported {
                session_key,
                session_id,
                entries,
                repaired: repair.issues,
            },
            None => ImportOutcome::AlreadyImported { session_id },
        })
    }

    /// Imports every `*.jsonl` under `dir` (recursively), keys from an OpenClaw
    /// `sessions.json` beside a file when it names the session; as the file backend's
    /// `import_dir`.
    pub async fn import_dir(
        &self,
        agent_id: &str,
        dir: &std::path::Path,
    ) -> Result<ImportReport, StoreError> {
        let src = dir.to_owned();
        let files = tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            crate::integrity::import::collect_jsonl(&src, 0, &mut out).map(|()| {
                out.sort();
                out
            })
        })
        .await
        .map_err(db_error)??;
        let mut report = ImportReport::default();
        for source in files {
            let outcome = match tokio::fs::read(&source).await {
                Ok(bytes) => {
                    let stem = source
                        .file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    let id = crate::integrity::import::first_line_header_id(&bytes)
                        .unwrap_or_else(|| stem.clone());
                    let key = source.parent().and_then(|d| {
                        let keys = crate::integrity::scan::legacy_session_keys(d);
                        keys.get(&id).or_else(|| keys.get(&stem)).cloned()
                    });
                    self.import_transcript(agent_id, &bytes, key)
                        .await
                        .unwrap_or_else(|e| ImportOutcome::Failed {
                            reason: e.to_string(),
                        })
                }
                Err(e) => ImportOutcome::Failed {
                    reason: format!("cannot read: {e}"),
                },
            };
            report.files.push(ImportedFile { source, outcome });
        }
        Ok(report)
    }
}

fn header_for(session_id: &str, key: &str) -> Result<(SessionHeader, String), StoreError> {
    let header = SessionHeader {
        kind: "session".into(),
        version: TRANSCRIPT_VERSION,
        id: session_id.to_owned(),
        timestamp: iso_now(),
        cwd: String::new(),
        session_key: Some(key.to_owned()),
    };
    let line = serde_json::to_string(&header).map_err(db_error)?;
    Ok((header, line))
}

#[async_trait]
impl SessionStore for PgSessionStore {
    async fn open(&self, agent_id: &str, key: &str) -> Result<Box<dyn SessionLog>, StoreError> {
        validate_agent_id(agent_id)?;
        validate_session_key(key)?;
        let client = self.client().await?;
        let find = client
            .prepare_cached(
                "SELECT session_id, header FROM sessions WHERE agent_id = $1 AND key = $2",
            )
            .await
            .map_err(db_error)?;
        let row = match client
            .query_opt(&find, &[&agent_id, &key])
            .await
            .map_err(db_error)?
        {
            Some(row) => row,
            None => {
                let id = uuid::Uuid::now_v7().to_string();
                let (_, header) = header_for(&id, key)?;
                let now = now_millis();
                // Two instances opening a new key at once: one insert wins, both read it.
                let create = client
                    .prepare_cached(
                        "INSERT INTO sessions (agent_id, key, session_id, header, created_at, updated_at, usage)
                         VALUES ($1, $2, $3, $4, $5, $5, $6) ON CONFLICT (agent_id, key) DO NOTHING",
                    )
                    .await
                    .map_err(db_error)?;
                client
                    .execute(
                        &create,
                        &[
                            &agent_id,
                            &key,
                            &id,
                            &header,
                            &now,
                            &usage_json(&Usage::default()),
                        ],
                    )
                    .await
                    .map_err(db_error)?;
                client
                    .query_one(&find, &[&agent_id, &key])
                    .await
                    .map_err(db_error)?
            }
        };
        let session_id: String = row.get(0);
        let (bytes, next_seq) = Self::with_lines(&client, &session_id, row.get(1)).await?;
        drop(client);
        let repair = repair_bytes(&bytes, self.strategy, &session_id);
        let mut problems: Vec<LoadProblem> = repair.issues.clone();
        let repaired = repair.bytes.is_some();
        let bytes = match repair.bytes {
            Some(fixed) => {
                let backup = self
                    .replace_with_backup(&session_id, &bytes, &fixed)
                    .await?;
                warn!(agent = agent_id, session = %session_id, issues = repair.issues.len(), "transcript failed validation on load; backed up and repaired");
                let incident = Incident {
                    timestamp: String::new(),
                    agent_id: Some(agent_id.to_owned()),
                    session_key: Some(key.to_owned()),
                    file: None,
                    issues: repair.issues,
                    action: "repaired_on_load".into(),
                    backup: Some(backup),
                };
                if let Err(e) = self.report_incident(incident).await {
                    warn!(error = %e, "could not record the integrity incident");
                }
                fixed
            }
            None => bytes,
        };
        let parsed = parse_transcript(&bytes, std::path::Path::new("postgresql"))?;
        problems.extend(
            parsed
                .problems
                .into_iter()
                .filter(|p| p.kind == crate::IssueKind::SkippedEntry),
        );
        // A repair renumbered the lines from 0.
        let next_seq = if repaired {
            bytes
                .split(|b| *b == b'\n')
                .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
                .count()
                .saturating_sub(1) as i64
        } else {
            next_seq
        };
        Ok(Box::new(PgSessionLog {
            pool: self.pool.clone(),
            ids: parsed.entries.iter().map(|e| e.id.clone()).collect(),
            entries: parsed.entries,
            session_id,
            key: key.to_owned(),
            problems,
            next_seq,
            tool_result_chars: self.tool_result_chars,
            group: self.group.clone(),
        }))
    }

    async fn read(&self, agent_id: &str, key: &str) -> Result<Option<Vec<Entry>>, StoreError> {
        validate_agent_id(agent_id)?;
        validate_session_key(key)?;
        let client = self.client().await?;
        let Some(row) = client
            .query_opt(
                "SELECT session_id, header FROM sessions WHERE agent_id = $1 AND key = $2",
                &[&agent_id, &key],
            )
            .await
            .map_err(db_error)?
        else {
            return Ok(None);
        };
        let session_id: String = row.get(0);
        let (bytes, _) = Self::with_lines(&client, &session_id, row.get(1)).await?;
        drop(client);
        let parsed = parse_transcript(&bytes, std::path::Path::new("postgresql"))?;
        Ok(Some(parsed.entries))
    }

    async fn get(&self, agent_id: &str, key: &str) -> Result<Option<SessionMeta>, StoreError> {
        let client = self.client().await?;
        Ok(client
            .query_opt(
                &format!("SELECT {COLUMNS} FROM sessions WHERE agent_id = $1 AND key = $2"),
                &[&agent_id, &key],
            )
            .await
            .map_err(db_error)?
            .map(|r| meta_from_row(agent_id, &r)))
    }

    async fn list(&self, agent_id: &str) -> Result<Vec<SessionMeta>, StoreError> {
        let client = self.client().await?;
        Ok(client
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM sessions WHERE agent_id = $1
                     ORDER BY updated_at DESC, created_at DESC, key ASC"
                ),
                &[&agent_id],
            )
            .await
            .map_err(db_error)?
            .iter()
            .map(|r| meta_from_row(agent_id, r))
            .collect())
    }

    async fn record_run(
        &self,
        agent_id: &str,
        key: &str,
        provider: &str,
        model: &str,
        usage: &Usage,
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        // One statement: the totals are added where they are stored, so two recorders
        // (there should be none: runs hold the session's lease) could not lose one.
        let stmt = client
            .prepare_cached(
                "UPDATE sessions SET provider = $3, model = $4,
                     updated_at = GREATEST(updated_at, $5),
                     usage = json_build_object(
                         'input', COALESCE((usage::jsonb->>'input')::bigint, 0) + $6,
                         'output', COALESCE((usage::jsonb->>'output')::bigint, 0) + $7,
                         'cacheRead', COALESCE((usage::jsonb->>'cacheRead')::bigint, 0) + $8,
                         'cacheWrite', COALESCE((usage::jsonb->>'cacheWrite')::bigint, 0) + $9,
                         'totalTokens', COALESCE((usage::jsonb->>'totalTokens')::bigint, 0) + $10
                     )::text
                 WHERE agent_id = $1 AND key = $2",
            )
            .await
            .map_err(db_error)?;
        let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let changed = client
            .execute(
                &stmt,
                &[
                    &agent_id,
                    &key,
                    &provider,
                    &model,
                    &now_millis(),
                    &n(usage.input),
                    &n(usage.output),
                    &n(usage.cache_read),
                    &n(usage.cache_write),
                    &n(usage.total_tokens),
                ],
            )
            .await
            .map_err(db_error)?;
        if changed == 0 {
            return Err(StoreError::NotFound(format!(
                "session {key:?} of agent {agent_id:?}"
            )));
        }
        Ok(())
    }

    fn signals(&self) -> Option<std::sync::Arc<dyn crate::SignalBus>> {
        // The listener is a task: without a runtime there is nobody to run it.
        tokio::runtime::Handle::try_current().ok()?;
        let bus = self.signals.get_or_init(|| {
            signals::PgSignals::start(self.pool.clone(), self.config.clone(), self.tls.clone())
        });
        Some(bus.clone())
    }

    async fn available(&self) -> bool {
        let now = now_millis();
        let (at, ok) = *lock(&self.health);
        if now - at < HEALTH_CACHE_MS {
            return ok;
        }
        let ok = tokio::time::timeout(Duration::from_secs(2), async {
            match self.client().await {
                Ok(c) => c.simple_query("SELECT 1").await.is_ok(),
                Err(_) => false,
            }
        })
        .await
        .unwrap_or(false);
        *lock(&self.health) = (now, ok);
        ok
    }

    fn directory(&self) -> Option<std::sync::Arc<dyn crate::Directory>> {
        Some(std::sync::Arc::new(self.clone()))
    }

    fn cron(&self) -> Option<std::sync::Arc<dyn crate::CronStore>> {
        Some(std::sync::Arc::new(self.clone()))
    }

    fn mcp_servers(&self) -> Option<std::sync::Arc<dyn crate::McpServerStore>> {
        Some(std::sync::Arc::new(self.clone()))
    }

    fn channels(&self) -> Option<std::sync::Arc<dyn crate::ChannelStore>> {
        Some(std::sync::Arc::new(self.clone()))
    }

    fn traces(&self) -> Option<std::sync::Arc<dyn crate::TraceStore>> {
        Some(std::sync::Arc::new(self.clone()))
    }

    fn devices(&self) -> Option<std::sync::Arc<dyn crate::DeviceStore>> {
        Some(std::sync::Arc::new(self.clone()))
    }

    async fn export(&self, agent_id: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let client = self.client().await?;
        let Some(row) = client
            .query_opt(
                "SELECT session_id FROM sessions WHERE agent_id = $1 AND key = $2",
                &[&agent_id, &key],
            )
            .await
            .map_err(db_error)?
        else {
            return Ok(None);
        };
        let session_id: String = row.get(0);
        Self::transcript_bytes(&client, &session_id).await
    }

    async fn delete(&self, agent_id: &str, key: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let n = client
            .execute(
                "DELETE FROM sessions WHERE agent_id = $1 AND key = $2",
                &[&agent_id, &key],
            )
            .await
            .map_err(db_error)?;
        Ok(n > 0)
    }

    async fn lease(&self, agent_id: &str, key: &str) -> Result<SessionLease, StoreError> {
        validate_agent_id(agent_id)?;
        validate_session_key(key)?;
        let lock_key = ferroclaw_types::fnv1a(format!("{agent_id}\0{key}").as_bytes()) as i64;
        let client = self.client().await?;
        // Waits, on this connection only, until whoever holds the key (in any instance)
        // lets go; the database releases it if that instance's connection dies.
        client
            .execute("SELECT pg_advisory_lock($1)", &[&lock_key])
            .await
            .map_err(db_error)?;
        Ok(SessionLease::new(HeldLock {
            client: Some(client),
            key: lock_key,
        }))
    }
}

/// An advisory lock and the connection that holds it.
struct HeldLock {
    client: Option<Object>,
    key: i64,
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        let key = self.key;
        match tokio::runtime::Handle::try_current() {
            // Unlock, then the connection goes back to the pool; if the unlock fails the
            // connection is closed instead, which releases the lock as well.
            Ok(rt) => {
                rt.spawn(async move {
                    if client
                        .execute("SELECT pg_advisory_unlock($1)", &[&key])
                        .await
                        .is_err()
                    {
                        drop(Object::take(client));
                    }
                });
            }
            Err(_) => drop(Object::take(client)),
        }
    }
}

/// One open session of the managed store.
struct PgSessionLog {
    pool: Pool,
    session_id: String,
    key: String,
    entries: Vec<Entry>,
    ids: HashSet<String>,
    problems: Vec<LoadProblem>,
    next_seq: i64,
    tool_result_chars: usize,
    group: Option<std::sync::Arc<crate::group_sync::GroupSync>>,
}

#[async_trait]
impl SessionLog for PgSessionLog {
    fn session_id(&self) -> &str {
        &self.session_id
    }

    fn key(&self) -> &str {
        &self.key
    }

    fn entries(&self) -> &[Entry] {
        &self.entries
    }

    fn problems(&self) -> &[LoadProblem] {
        &self.problems
    }

    fn context(&self) -> Vec<Message> {
        build_context(&self.entries)
    }

    async fn append(&mut self, body: EntryBody) -> Result<Entry, StoreError> {
        let entry = next_entry(
            &self.entries,
            |id| self.ids.contains(id),
            body,
            self.tool_result_chars,
            &self.session_id,
        );
        let line = serde_json::to_string(&entry).map_err(db_error)?;
        let client = self.pool.get().await.map_err(db_error)?;
        let insert = client
            .prepare_cached(
                "INSERT INTO session_entries (session_id, seq, line) VALUES ($1, $2, $3)",
            )
            .await
            .map_err(db_error)?;
        client
            .execute(&insert, &[&self.session_id, &self.next_seq, &line])
            .await
            .map_err(db_error)?;
        self.next_seq += 1;
        self.ids.insert(entry.id.clone());
        self.entries.push(entry.clone());
        Ok(entry)
    }

    async fn flush(&mut self) -> Result<(), StoreError> {
        let pool = self.pool.clone();
        // A synchronous commit that writes WAL flushes the WAL up to it, and so every
        // asynchronous append before it, of this session or any other.
        let sync = || async move {
            let client = pool.get().await.map_err(db_error)?;
            client
                .batch_execute(
                    "BEGIN; SET LOCAL synchronous_commit TO on; SELECT txid_current(); COMMIT",
                )
                .await
                .map_err(db_error)
        };
        match &self.group {
            None => sync().await,
            Some(group) => group.flush(sync).await,
        }
    }
}
