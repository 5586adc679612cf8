//! `<home>/data/directory.db`: the embedded backend's records that nothing else can
//! rebuild (users' agents, their shares, files and provider records; cron jobs and
//! their runs). The session index beside it is derived data (a damaged one is set aside
//! and rebuilt from the transcripts); this is not, so it is kept apart, synced on every
//! commit, and a damaged file is an error to report, never replaced. Opened on first
//! use: a home that never stores such a record never gets the file.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::Connection;

use super::{db_error, lock, migrations};
use crate::file::blocking;
use crate::migration::MigrationState;
use crate::StoreError;

pub(crate) const RECORDS_PATH: &str = "data/directory.db";

const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "directory",
        "CREATE TABLE agents (
        key        TEXT PRIMARY KEY,
        owner      TEXT NOT NULL,
        kind       TEXT NOT NULL,
        is_default INTEGER NOT NULL,
        settings   TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        deleted_at INTEGER
    );
    CREATE INDEX agents_by_owner ON agents (owner);
    CREATE TABLE agent_shares (
        agent      TEXT NOT NULL,
        user_id    TEXT NOT NULL,
        role       TEXT NOT NULL,
        granted_at INTEGER NOT NULL,
        PRIMARY KEY (agent, user_id)
    ) WITHOUT ROWID;
    CREATE INDEX agent_shares_by_user ON agent_shares (user_id);
    -- user_id '' holds the agent's own files.
    CREATE TABLE agent_files (
        agent      TEXT NOT NULL,
        user_id    TEXT NOT NULL,
        name       TEXT NOT NULL,
        content    TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (agent, user_id, name)
    ) WITHOUT ROWID;
    CREATE TABLE providers (
        name       TEXT PRIMARY KEY,
        owner      TEXT NOT NULL,
        kind       TEXT NOT NULL,
        base_url   TEXT NOT NULL,
        api_key    TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE INDEX providers_by_owner ON providers (owner);",
    ),
    (
        2,
        "cron",
        "CREATE TABLE cron_jobs (
        id          TEXT PRIMARY KEY,
        agent_id    TEXT NOT NULL,
        owner       TEXT,
        spec        TEXT NOT NULL,
        enabled     INTEGER NOT NULL,
        next_run_at INTEGER,
        lease_owner TEXT,
        lease_until INTEGER,
        created_at  INTEGER NOT NULL,
        updated_at  INTEGER NOT NULL
    );
    CREATE INDEX cron_jobs_due ON cron_jobs (next_run_at) WHERE enabled = 1;
    CREATE INDEX cron_jobs_by_owner ON cron_jobs (owner);
    CREATE TABLE cron_runs (
        id          TEXT PRIMARY KEY,
        job_id      TEXT NOT NULL,
        started_at  INTEGER NOT NULL,
        ended_at    INTEGER,
        status      TEXT NOT NULL,
        error       TEXT,
        attempts    INTEGER NOT NULL,
        session_key TEXT NOT NULL,
        output      TEXT,
        holder      TEXT
    );
    CREATE INDEX cron_runs_by_job ON cron_runs (job_id, started_at DESC);",
    ),
    (
        3,
        "mcp servers",
        "CREATE TABLE mcp_servers (
        name       TEXT PRIMARY KEY,
        spec       TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );",
    ),
    (
        4,
        "channels",
        "CREATE TABLE channel_pairing (
        code        TEXT PRIMARY KEY,
        channel     TEXT NOT NULL,
        account     TEXT NOT NULL,
        sender_id   TEXT NOT NULL,
        sender_name TEXT,
        created_at  INTEGER NOT NULL,
        expires_at  INTEGER NOT NULL
    );
    CREATE INDEX channel_pairing_by_sender ON channel_pairing (channel, account, sender_id);
    CREATE TABLE channel_allowed (
        channel     TEXT NOT NULL,
        account     TEXT NOT NULL,
        sender_id   TEXT NOT NULL,
        sender_name TEXT,
        approved_at INTEGER NOT NULL,
        approved_by TEXT,
        PRIMARY KEY (channel, account, sender_id)
    );
    CREATE TABLE channel_accounts (
        account     TEXT PRIMARY KEY,
        holder      TEXT,
        lease_until INTEGER,
        next_update INTEGER
    );
    CREATE TABLE channel_deliveries (
        account     TEXT NOT NULL,
        message_key TEXT NOT NULL,
        seen_at     INTEGER NOT NULL,
        PRIMARY KEY (account, message_key)
    );
    CREATE INDEX channel_deliveries_by_age ON channel_deliveries (account, seen_at);",
    ),
    (
        5,
        "devices",
        "CREATE TABLE gateway_devices (
        id           TEXT PRIMARY KEY,
        public_key   TEXT NOT NULL,
        client_id    TEXT NOT NULL,
        platform     TEXT NOT NULL,
        user_id      TEXT,
        role         TEXT NOT NULL,
        token_hash   TEXT NOT NULL,
        paired_at    INTEGER NOT NULL,
        last_seen_at INTEGER NOT NULL,
        revoked_at   INTEGER
    );",
    ),
    (
        6,
        "device_credentials",
        // Devices paired before have no binding: their tokens stop working until they
        // come back once with a credential.
        "ALTER TABLE gateway_devices ADD COLUMN credential_hash TEXT NOT NULL DEFAULT '';",
    ),
];

pub(crate) const TRACES_PATH: &str = "data/traces.db";

/// The traces of runs: telemetry, kept apart from the records so their volume never
/// slows a record's commit, and not synced on every commit (a power loss may cost the
/// last traces, never a record).
const TRACE_MIGRATIONS: &[(i64, &str, &str)] = &[(
    1,
    "traces",
    "CREATE TABLE traces (
        id            TEXT PRIMARY KEY,
        parent_id     TEXT,
        agent_id      TEXT NOT NULL,
        session_key   TEXT NOT NULL,
        user_id       TEXT,
        origin        TEXT NOT NULL,
        status        TEXT NOT NULL,
        error         TEXT,
        started_at    INTEGER NOT NULL,
        ended_at      INTEGER,
        provider      TEXT,
        model         TEXT,
        input_tokens  INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        cached_tokens INTEGER NOT NULL,
        cost_usd      REAL NOT NULL,
        llm_calls     INTEGER NOT NULL,
        tool_calls    INTEGER NOT NULL,
        input         TEXT NOT NULL,
        output        TEXT NOT NULL
    );
    CREATE INDEX traces_by_time ON traces (started_at DESC, id DESC);
    CREATE INDEX traces_by_agent ON traces (agent_id, started_at DESC, id DESC);
    CREATE INDEX traces_by_user ON traces (user_id, started_at DESC, id DESC);
    CREATE INDEX traces_by_session ON traces (session_key, started_at DESC, id DESC);
    CREATE INDEX traces_by_status ON traces (status, started_at DESC, id DESC);
    CREATE INDEX traces_by_parent ON traces (parent_id) WHERE parent_id IS NOT NULL;
    CREATE TABLE trace_spans (
        trace_id      TEXT NOT NULL,
        span_id       TEXT NOT NULL,
        parent_span   TEXT,
        kind          TEXT NOT NULL,
        name          TEXT NOT NULL,
        started_at    INTEGER NOT NULL,
        ended_at      INTEGER,
        status        TEXT NOT NULL,
        error         TEXT,
        agent_id      TEXT NOT NULL,
        user_id       TEXT,
        provider      TEXT,
        model         TEXT,
        input_tokens  INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        cached_tokens INTEGER NOT NULL,
        cost_usd      REAL NOT NULL,
        attrs         TEXT NOT NULL,
        PRIMARY KEY (trace_id, span_id)
    ) WITHOUT ROWID;
    CREATE INDEX trace_llm_calls_by_time ON trace_spans (started_at) WHERE kind = 'llm';",
)];

/// The records database of a home, shared by the stores that keep tables in it (and,
/// built by [`RecordsDb::traces`], the traces database).
#[derive(Clone)]
pub(crate) struct RecordsDb {
    path: PathBuf,
    conn: Arc<Mutex<Option<Connection>>>,
    migrations: &'static [(i64, &'static str, &'static str)],
    /// Every commit synced before it returns.
    durable: bool,
}

impl RecordsDb {
    pub(crate) fn new(home: &Path) -> RecordsDb {
        RecordsDb {
            path: home.join(RECORDS_PATH),
            conn: Arc::default(),
            migrations: MIGRATIONS,
            durable: true,
        }
    }

    /// `data/traces.db`, opened on first use like the records.
    pub(crate) fn traces(home: &Path) -> RecordsDb {
        RecordsDb {
            path: home.join(TRACES_PATH),
            conn: Arc::default(),
            migrations: TRACE_MIGRATIONS,
            durable: false,
        }
    }

    /// Runs `f` on the connection, on a blocking thread.
    pub(crate) async fn with<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<R> + Send + 'static,
    {
        let (path, slot) = (self.path.clone(), self.conn.clone());
        let (migrations, durable) = (self.migrations, self.durable);
        blocking(path.clone(), move || {
            let mut guard = lock(&slot);
            if guard.is_none() {
                *guard = Some(open(&path, migrations, durable)?);
            }
            match guard.as_mut() {
                Some(conn) => f(conn).map_err(|e| db_error(&path, e)),
                None => Err(db_error(&path, rusqlite::Error::InvalidQuery)),
            }
        })
        .await
    }
}

/// The records database's migrations under `home`, named `directory.db: …` beside the
/// index's; the pending ones are applied when `apply`. A home without the file has
/// nothing to migrate (it is created at the current version when first used) and lists
/// none.
pub(crate) fn migration_states(
    home: &Path,
    apply: bool,
) -> Result<Vec<MigrationState>, StoreError> {
    let path = home.join(RECORDS_PATH);
    if !apply && !path.exists() {
        return Ok(Vec::new());
    }
    let conn = if apply {
        open(&path, MIGRATIONS, true)?
    } else {
        super::connect(&path).map_err(|e| db_error(&path, e))?
    };
    let states = migrations::status_with(&conn, MIGRATIONS).map_err(|e| StoreError::Database {
        path: path.clone(),
        message: e.to_string(),
    })?;
    Ok(states
        .into_iter()
        .map(|m| MigrationState {
            name: format!("directory.db: {}", m.name),
            ..m
        })
        .collect())
}

fn open(path: &Path, list: &[(i64, &str, &str)], durable: bool) -> Result<Connection, StoreError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::io(dir, e))?;
    }
    let mut conn = super::connect(path).map_err(|e| db_error(path, e))?;
    if durable {
        // Not derivable from anything else: a commit is on disk before it returns.
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(|e| db_error(path, e))?;
    }
    migrations::migrate_up_with(&mut conn, list).map_err(|e| StoreError::Database {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    Ok(conn)
}
