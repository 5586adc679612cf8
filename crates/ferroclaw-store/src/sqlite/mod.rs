//! The embedded database (`<home>/data/ferroclaw.db`, SQLite in WAL mode): the session
//! index of every agent, one row per session, so a turn reads and updates one row by its
//! key (O(log n)) whatever the number of sessions. SQLite's own locking makes a CLI and a
//! gateway on one home safe together; writes that must see a consistent index (a new
//! session, an import) run in `BEGIN IMMEDIATE` transactions, which serialise across
//! processes.
//!
//! Everything here is blocking and runs on the store's blocking threads.

pub(crate) mod channels;
pub(crate) mod cron;
pub(crate) mod devices;
pub(crate) mod directory;
pub(crate) mod mcp_servers;
pub(crate) mod migrations;
pub(crate) mod records;
pub(crate) mod traces;

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use ferroclaw_types::{now_millis, Usage};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use tracing::{info, warn};

use crate::migration::MigrationState;

use crate::{SessionMeta, StoreError};

/// Where the database lives under the home.
pub(crate) const DB_PATH: &str = "data/ferroclaw.db";
/// The per-agent JSON index of earlier versions (and of OpenClaw).
pub(crate) const LEGACY_INDEX: &str = "sessions.json";
/// What a migrated `sessions.json` is renamed to: kept as a backup, never read again.
pub(crate) const LEGACY_BACKUP: &str = "sessions.json.migrated";

/// How long a statement waits for another process's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) struct SqliteIndex {
    path: PathBuf,
    conn: Mutex<Connection>,
    /// Agents whose rows are known to be in the database (imported or rebuilt once).
    prepared: Mutex<HashSet<String>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the connection leaves no half-done transaction: rusqlite
    // rolls back an unfinished one when it is dropped.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

const COLUMNS: &str = "key, session_id, created_at, updated_at, provider, model, usage, label";

fn meta_from_row(agent_id: &str, r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionMeta> {
    let usage: String = r.get(6)?;
    Ok(SessionMeta {
        key: r.get(0)?,
        session_id: r.get(1)?,
        agent_id: agent_id.to_string(),
        created_at: r.get(2)?,
        updated_at: r.get(3)?,
        provider: r.get(4)?,
        model: r.get(5)?,
        // Totals are derived data: a damaged value restarts them rather than hiding the session.
        usage: serde_json::from_str(&usage).unwrap_or_default(),
        label: r.get(7)?,
    })
}

fn usage_json(usage: &Usage) -> String {
    serde_json::to_string(usage).unwrap_or_else(|_| "{}".into())
}

impl SqliteIndex {
    /// Opens (creating) the database under `home` and applies pending migrations.
    pub(crate) fn open(home: &Path) -> Result<SqliteIndex, StoreError> {
        let path = home.join(DB_PATH);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(|e| StoreError::io(dir, e))?;
        }
        let mut conn = match connect(&path) {
            Err(e) if is_damaged(&e) => {
                // The database holds only the index, which the transcripts' headers can
                // rebuild: keep the damaged file for inspection and start afresh.
                let kept = set_aside(&path)?;
                warn!(path = %path.display(), kept = %kept.display(), error = %e, "the database file was damaged; set aside, the session index is rebuilt from the transcripts");
                connect(&path).map_err(|e| db_error(&path, e))?
            }
            other => other.map_err(|e| db_error(&path, e))?,
        };
        migrations::migrate_up(&mut conn).map_err(|e| StoreError::Database {
            path: path.clone(),
            message: e.to_string(),
        })?;
        Ok(SqliteIndex {
            path,
            conn: Mutex::new(conn),
            prepared: Mutex::new(HashSet::new()),
        })
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |e| db_error(&self.path, e)
    }

    pub(crate) fn migration_status(&self) -> Result<Vec<MigrationState>, StoreError> {
        migrations::status(&lock(&self.conn)).map_err(|e| StoreError::Database {
            path: self.path.clone(),
            message: e.to_string(),
        })
    }

    /// The migrations of the database under `home` without applying any.
    pub(crate) fn pending_status(home: &Path) -> Result<Vec<MigrationState>, StoreError> {
        let path = home.join(DB_PATH);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(|e| StoreError::io(dir, e))?;
        }
        create_private(&path)?;
        let conn = Connection::open(&path).map_err(|e| db_error(&path, e))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| db_error(&path, e))?;
        migrations::status(&conn).map_err(|e| StoreError::Database {
            path: path.clone(),
            message: e.to_string(),
        })
    }

    /// Brings an agent's sessions in once: from its `sessions.json` when there is one
    /// (renamed to `sessions.json.migrated` afterwards, the transcripts untouched), else
    /// from its transcripts' headers. Later calls in this process return at once.
    pub(crate) fn prepare_agent(&self, agent_id: &str, dir: &Path) -> Result<(), StoreError> {
        if lock(&self.prepared).contains(agent_id) {
            return Ok(());
        }
        let mut conn = lock(&self.conn);
        let err = self.err();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&err)?;
        let known: Option<i64> = tx
            .query_row(
                "SELECT 1 FROM indexed_agents WHERE agent_id = ?1",
                [agent_id],
                |r| r.get(0),
            )
            .optional()
            .map_err(&err)?;
        let mut legacy_imported = false;
        if known.is_none() {
            let legacy = dir.join(LEGACY_INDEX);
            let (rows, source) = if legacy.exists() {
                legacy_imported = true;
                (crate::file::read_legacy_index(dir, agent_id)?, LEGACY_INDEX)
            } else {
                (crate::file::rebuild_index(dir, agent_id)?, "transcripts")
            };
            {
                let mut insert = tx
                    .prepare(
                        "INSERT OR IGNORE INTO sessions (agent_id, key, session_id, created_at, updated_at, provider, model, usage, label)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    )
                    .map_err(&err)?;
                for m in rows.values() {
                    insert
                        .execute(params![
                            agent_id,
                            m.key,
                            m.session_id,
                            m.created_at,
                            m.updated_at,
                            m.provider,
                            m.model,
                            usage_json(&m.usage),
                            m.label
                        ])
                        .map_err(&err)?;
                }
            }
            tx.execute(
                "INSERT INTO indexed_agents (agent_id, source, sessions, at) VALUES (?1, ?2, ?3, ?4)",
                params![agent_id, source, rows.len() as i64, now_millis()],
            )
            .map_err(&err)?;
            tx.commit().map_err(&err)?;
            if !rows.is_empty() || legacy_imported {
                info!(
                    agent = agent_id,
                    sessions = rows.len(),
                    source,
                    "session index moved into the database"
                );
            }
        } else {
            tx.commit().map_err(&err)?;
        }
        drop(conn);
        if legacy_imported {
            let from = dir.join(LEGACY_INDEX);
            let to = dir.join(LEGACY_BACKUP);
            // The rows are committed and the agent marked: a failed rename only leaves
            // the old file where it was, never read again.
            if let Err(e) = fs::rename(&from, &to) {
                warn!(path = %from.display(), error = %e, "could not rename the migrated session index");
            }
        }
        lock(&self.prepared).insert(agent_id.to_string());
        Ok(())
    }

    pub(crate) fn get(&self, agent_id: &str, key: &str) -> Result<Option<SessionMeta>, StoreError> {
        let conn = lock(&self.conn);
        conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM sessions WHERE agent_id = ?1 AND key = ?2"
        ))
        .and_then(|mut s| {
            s.query_row(params![agent_id, key], |r| meta_from_row(agent_id, r))
                .optional()
        })
        .map_err(self.err())
    }

    /// Newest `updated_at` first.
    pub(crate) fn list(&self, agent_id: &str) -> Result<Vec<SessionMeta>, StoreError> {
        let conn = lock(&self.conn);
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM sessions WHERE agent_id = ?1
                 ORDER BY updated_at DESC, created_at DESC, key ASC"
            ))
            .map_err(self.err())?;
        let rows = stmt
            .query_map([agent_id], |r| meta_from_row(agent_id, r))
            .map_err(self.err())?;
        rows.collect::<Result<Vec<_>, _>>().map_err(self.err())
    }

    /// The session id of `key`, creating the session when there is none: `create` makes
    /// its transcript before the row is committed, inside the write transaction, so two
    /// processes opening a new key at once end up in the same session.
    pub(crate) fn session_for(
        &self,
        agent_id: &str,
        key: &str,
        create: impl FnOnce(&str) -> Result<(), StoreError>,
    ) -> Result<String, StoreError> {
        let err = self.err();
        let mut conn = lock(&self.conn);
        let existing: Option<String> = conn
            .prepare_cached("SELECT session_id FROM sessions WHERE agent_id = ?1 AND key = ?2")
            .and_then(|mut s| s.query_row(params![agent_id, key], |r| r.get(0)).optional())
            .map_err(&err)?;
        if let Some(id) = existing {
            return Ok(id);
        }
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&err)?;
        // Another process may have created it between the read and the lock.
        let raced: Option<String> = tx
            .query_row(
                "SELECT session_id FROM sessions WHERE agent_id = ?1 AND key = ?2",
                params![agent_id, key],
                |r| r.get(0),
            )
            .optional()
            .map_err(&err)?;
        if let Some(id) = raced {
            return Ok(id);
        }
        let session_id = uuid::Uuid::now_v7().to_string();
        create(&session_id)?;
        let now = now_millis();
        tx.execute(
            "INSERT INTO sessions (agent_id, key, session_id, created_at, updated_at, usage)
             VALUES (?1, ?2, ?3, ?4, ?4, ?5)",
            params![
                agent_id,
                key,
                session_id,
                now,
                usage_json(&Usage::default())
            ],
        )
        .map_err(&err)?;
        tx.commit().map_err(&err)?;
        Ok(session_id)
    }

    /// Adds a run's figures to the session's totals; `updated_at` never moves backwards.
    pub(crate) fn record_run(
        &self,
        agent_id: &str,
        key: &str,
        provider: &str,
        model: &str,
        usage: &Usage,
    ) -> Result<(), StoreError> {
        let err = self.err();
        let conn = lock(&self.conn);
        let current: Option<String> = conn
            .prepare_cached("SELECT usage FROM sessions WHERE agent_id = ?1 AND key = ?2")
            .and_then(|mut s| s.query_row(params![agent_id, key], |r| r.get(0)).optional())
            .map_err(&err)?;
        let Some(current) = current else {
            return Err(StoreError::NotFound(format!(
                "session {key:?} of agent {agent_id:?}"
            )));
        };
        let mut totals: Usage = serde_json::from_str(&current).unwrap_or_default();
        totals.add(usage);
        // One statement: a concurrent run elsewhere is serialised by the session lease,
        // and this process holds the connection, so read-then-write cannot interleave.
        conn.prepare_cached(
            "UPDATE sessions SET provider = ?3, model = ?4, usage = ?5,
                 updated_at = MAX(updated_at, ?6)
             WHERE agent_id = ?1 AND key = ?2",
        )
        .and_then(|mut s| {
            s.execute(params![
                agent_id,
                key,
                provider,
                model,
                usage_json(&totals),
                now_millis()
            ])
        })
        .map_err(&err)?;
        Ok(())
    }

    /// Removes the row; the caller removes the transcript after (a crash in between
    /// leaves an orphan file, never a row pointing at nothing).
    pub(crate) fn remove(
        &self,
        agent_id: &str,
        key: &str,
    ) -> Result<Option<SessionMeta>, StoreError> {
        let err = self.err();
        let mut conn = lock(&self.conn);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&err)?;
        let meta = tx
            .query_row(
                &format!("SELECT {COLUMNS} FROM sessions WHERE agent_id = ?1 AND key = ?2"),
                params![agent_id, key],
                |r| meta_from_row(agent_id, r),
            )
            .optional()
            .map_err(&err)?;
        if meta.is_some() {
            tx.execute(
                "DELETE FROM sessions WHERE agent_id = ?1 AND key = ?2",
                params![agent_id, key],
            )
            .map_err(&err)?;
        }
        tx.commit().map_err(&err)?;
        Ok(meta)
    }

    /// Adds an imported session under `meta.key`, or `import:<sessionId>` when that key
    /// is taken; `write` puts its transcript in place inside the transaction. Returns
    /// the key used.
    pub(crate) fn insert_imported(
        &self,
        agent_id: &str,
        mut meta: SessionMeta,
        write: impl FnOnce() -> Result<(), StoreError>,
    ) -> Result<String, StoreError> {
        let err = self.err();
        let mut conn = lock(&self.conn);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&err)?;
        let taken: Option<i64> = tx
            .query_row(
                "SELECT 1 FROM sessions WHERE agent_id = ?1 AND key = ?2",
                params![agent_id, meta.key],
                |r| r.get(0),
            )
            .optional()
            .map_err(&err)?;
        if taken.is_some() {
            meta.key = format!("import:{}", meta.session_id);
        }
        write()?;
        tx.execute(
            "INSERT OR REPLACE INTO sessions (agent_id, key, session_id, created_at, updated_at, provider, model, usage, label)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                agent_id,
                meta.key,
                meta.session_id,
                meta.created_at,
                meta.updated_at,
                meta.provider,
                meta.model,
                usage_json(&meta.usage),
                meta.label
            ],
        )
        .map_err(&err)?;
        tx.commit().map_err(&err)?;
        Ok(meta.key)
    }

    /// Session id → key, for reports that name sessions.
    pub(crate) fn keys_by_id(&self, agent_id: &str) -> HashMap<String, String> {
        let conn = lock(&self.conn);
        let Ok(mut stmt) =
            conn.prepare_cached("SELECT session_id, key FROM sessions WHERE agent_id = ?1")
        else {
            return HashMap::new();
        };
        let Ok(rows) = stmt.query_map([agent_id], |r| Ok((r.get(0)?, r.get(1)?))) else {
            return HashMap::new();
        };
        rows.filter_map(Result::ok).collect()
    }
}

/// A connection in WAL mode with the busy time-out set.
fn connect(path: &Path) -> rusqlite::Result<Connection> {
    create_private(path).map_err(|e| {
        rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
            Some(e.to_string()),
        )
    })?;
    let conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // WAL: readers never wait for the writer. NORMAL: a commit is not fsynced (the WAL
    // is, at checkpoints), so a process crash loses nothing and a power loss at most the
    // last index updates, while the transcripts carry their own fsync.
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        warn!(path = %path.display(), mode, "the database could not switch to WAL mode");
    }
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    Ok(conn)
}

fn is_damaged(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt)
    )
}

/// Renames the database (and its WAL files) to `<name>.damaged.<ms>`; returns the new
/// name of the main file.
fn set_aside(path: &Path) -> Result<PathBuf, StoreError> {
    let stamp = now_millis();
    let mut kept = PathBuf::new();
    for suffix in ["", "-wal", "-shm"] {
        let from = PathBuf::from(format!("{}{suffix}", path.display()));
        let to = PathBuf::from(format!("{}.damaged.{stamp}{suffix}", path.display()));
        match fs::rename(&from, &to) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io(&from, e)),
        }
        if suffix.is_empty() {
            kept = to;
        }
    }
    Ok(kept)
}

fn db_error(path: &Path, e: rusqlite::Error) -> StoreError {
    StoreError::Database {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// The database holds every session's key and totals: readable by its owner only.
fn create_private(path: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::OpenOptionsExt;
    match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(StoreError::io(path, e)),
    }
}
