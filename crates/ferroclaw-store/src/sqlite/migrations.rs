//! Versioned schema of the embedded database. A migration, once released, is never
//! edited: its checksum is recorded when it is applied, and a database whose recorded
//! checksum differs stops the start with a message naming the migration.

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::migration::{check_recorded, checksum, MigrationError, MigrationState};

/// `(version, name, SQL)`, in order. Append only.
pub(crate) const MIGRATIONS: &[(i64, &str, &str)] = &[(
    1,
    "session_index",
    "CREATE TABLE sessions (
        agent_id   TEXT NOT NULL,
        key        TEXT NOT NULL,
        session_id TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        provider   TEXT,
        model      TEXT,
        usage      TEXT NOT NULL,
        label      TEXT,
        PRIMARY KEY (agent_id, key)
    ) WITHOUT ROWID;
    CREATE UNIQUE INDEX sessions_by_id ON sessions (agent_id, session_id);
    CREATE INDEX sessions_by_recency ON sessions (agent_id, updated_at DESC);
    -- Agents whose sessions were brought in from a sessions.json or rebuilt from their
    -- transcripts, so that is done once per agent, not on every start.
    CREATE TABLE indexed_agents (
        agent_id  TEXT PRIMARY KEY,
        source    TEXT NOT NULL,
        sessions  INTEGER NOT NULL,
        at        INTEGER NOT NULL
    );",
)];

fn ensure_table(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version    INTEGER PRIMARY KEY,
            name       TEXT NOT NULL,
            checksum   TEXT NOT NULL,
            applied_at INTEGER NOT NULL
        )",
    )
}

/// Verifies the applied migrations and applies the missing ones, each in a transaction
/// of its own. `BEGIN IMMEDIATE` takes the write lock first, so two processes starting
/// together apply each migration once: the second sees the first's record and skips it.
/// Returns the versions applied now.
pub(crate) fn migrate_up(conn: &mut Connection) -> Result<Vec<i64>, MigrationError> {
    migrate_up_with(conn, MIGRATIONS)
}

/// [`migrate_up`] for another database's list (the directory's).
pub(crate) fn migrate_up_with(
    conn: &mut Connection,
    list: &[(i64, &str, &str)],
) -> Result<Vec<i64>, MigrationError> {
    ensure_table(conn)?;
    let mut applied_now = Vec::new();
    loop {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        verify(&tx, list)?;
        let mut next = None;
        for &(version, name, sql) in list {
            let done: Option<i64> = tx
                .query_row(
                    "SELECT version FROM schema_migrations WHERE version = ?1",
                    [version],
                    |r| r.get(0),
                )
                .optional()?;
            if done.is_none() {
                next = Some((version, name, sql));
                break;
            }
        }
        let Some((version, name, sql)) = next else {
            tx.commit()?;
            return Ok(applied_now);
        };
        tx.execute_batch(sql)?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (?1, ?2, ?3, ?4)",
            params![version, name, checksum(sql), ferroclaw_types::now_millis()],
        )?;
        tx.commit()?;
        tracing::info!(version, name, "applied database migration");
        applied_now.push(version);
    }
}

/// Every recorded migration must be one of ours, unchanged.
fn verify(conn: &Connection, list: &[(i64, &str, &str)]) -> Result<(), MigrationError> {
    let mut stmt = conn.prepare("SELECT version, name, checksum FROM schema_migrations")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    for row in rows {
        let (version, name, recorded) = row?;
        check_recorded(list, version, name, recorded)?;
    }
    Ok(())
}

/// Each known migration and whether it is applied (nothing is changed).
pub(crate) fn status(conn: &Connection) -> Result<Vec<MigrationState>, MigrationError> {
    status_with(conn, MIGRATIONS)
}

/// [`status`] for another database's list (the directory's).
pub(crate) fn status_with(
    conn: &Connection,
    list: &[(i64, &str, &str)],
) -> Result<Vec<MigrationState>, MigrationError> {
    ensure_table(conn)?;
    verify(conn, list)?;
    let mut out = Vec::new();
    for &(version, name, _) in list {
        let applied_at: Option<i64> = conn
            .query_row(
                "SELECT applied_at FROM schema_migrations WHERE version = ?1",
                [version],
                |r| r.get(0),
            )
            .optional()?;
        out.push(MigrationState {
            version,
            name: name.to_string(),
            applied_at,
        });
    }
    Ok(out)
}
