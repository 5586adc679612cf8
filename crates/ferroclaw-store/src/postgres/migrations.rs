//! Versioned schema of the managed database, applied like the embedded one's: each
//! migration in its own transaction, recorded with a checksum, an edited one refused.
//! Concurrent starts of several instances are serialised by a transaction-scoped
//! advisory lock, so each migration is applied once. No migration creates an extension.

use deadpool_postgres::Client;

use crate::migration::{check_recorded, checksum, MigrationError, MigrationState};

/// `(version, name, SQL)`, in order. Append only.
pub(crate) const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "sessions",
        "CREATE TABLE sessions (
        agent_id   TEXT NOT NULL,
        key        TEXT NOT NULL,
        session_id TEXT NOT NULL UNIQUE,
        header     TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        provider   TEXT,
        model      TEXT,
        usage      TEXT NOT NULL,
        label      TEXT,
        PRIMARY KEY (agent_id, key)
    );
    CREATE INDEX sessions_by_recency ON sessions (agent_id, updated_at DESC);
    -- One row per transcript line, exactly as the JSONL file would hold it.
    CREATE TABLE session_entries (
        session_id TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
        seq        BIGINT NOT NULL,
        line       TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    -- What a repair replaced, whole, as a transcript.
    CREATE TABLE session_backups (
        id         BIGSERIAL PRIMARY KEY,
        session_id TEXT NOT NULL,
        at         BIGINT NOT NULL,
        transcript TEXT NOT NULL
    );
    CREATE TABLE integrity_incidents (
        id   BIGSERIAL PRIMARY KEY,
        at   BIGINT NOT NULL,
        body TEXT NOT NULL
    );
    CREATE TABLE integrity_scans (
        id   BIGSERIAL PRIMARY KEY,
        at   BIGINT NOT NULL,
        body TEXT NOT NULL
    );",
    ),
    (
        2,
        "directory",
        "CREATE TABLE agents (
        key        TEXT PRIMARY KEY,
        owner      TEXT NOT NULL,
        kind       TEXT NOT NULL,
        is_default BOOLEAN NOT NULL,
        settings   TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        deleted_at BIGINT
    );
    CREATE INDEX agents_by_owner ON agents (owner);
    CREATE TABLE agent_shares (
        agent      TEXT NOT NULL,
        user_id    TEXT NOT NULL,
        role       TEXT NOT NULL,
        granted_at BIGINT NOT NULL,
        PRIMARY KEY (agent, user_id)
    );
    CREATE INDEX agent_shares_by_user ON agent_shares (user_id);
    -- user_id '' holds the agent's own files.
    CREATE TABLE agent_files (
        agent      TEXT NOT NULL,
        user_id    TEXT NOT NULL,
        name       TEXT NOT NULL,
        content    TEXT NOT NULL,
        updated_at BIGINT NOT NULL,
        PRIMARY KEY (agent, user_id, name)
    );
    CREATE TABLE providers (
        name       TEXT PRIMARY KEY,
        owner      TEXT NOT NULL,
        kind       TEXT NOT NULL,
        base_url   TEXT NOT NULL,
        api_key    TEXT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    );
    CREATE INDEX providers_by_owner ON providers (owner);",
    ),
    (
        3,
        "cron",
        "CREATE TABLE cron_jobs (
        id          TEXT PRIMARY KEY,
        agent_id    TEXT NOT NULL,
        owner       TEXT,
        spec        TEXT NOT NULL,
        enabled     BOOLEAN NOT NULL,
        next_run_at BIGINT,
        lease_owner TEXT,
        lease_until BIGINT,
        created_at  BIGINT NOT NULL,
        updated_at  BIGINT NOT NULL
    );
    CREATE INDEX cron_jobs_due ON cron_jobs (next_run_at) WHERE enabled;
    CREATE INDEX cron_jobs_by_owner ON cron_jobs (owner);
    CREATE TABLE cron_runs (
        id          TEXT PRIMARY KEY,
        job_id      TEXT NOT NULL,
        started_at  BIGINT NOT NULL,
        ended_at    BIGINT,
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
        4,
        "mcp servers",
        "CREATE TABLE mcp_servers (
        name       TEXT PRIMARY KEY,
        spec       TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    );",
    ),
    (
        5,
        "channels",
        "CREATE TABLE channel_pairing (
        code        TEXT PRIMARY KEY,
        channel     TEXT NOT NULL,
        account     TEXT NOT NULL,
        sender_id   TEXT NOT NULL,
        sender_name TEXT,
        created_at  BIGINT NOT NULL,
        expires_at  BIGINT NOT NULL
    );
    CREATE INDEX channel_pairing_by_sender ON channel_pairing (channel, account, sender_id);
    CREATE TABLE channel_allowed (
        channel     TEXT NOT NULL,
        account     TEXT NOT NULL,
        sender_id   TEXT NOT NULL,
        sender_name TEXT,
        approved_at BIGINT NOT NULL,
        approved_by TEXT,
        PRIMARY KEY (channel, account, sender_id)
    );
    CREATE TABLE channel_accounts (
        account     TEXT PRIMARY KEY,
        holder      TEXT,
        lease_until BIGINT,
        next_update BIGINT
    );
    CREATE TABLE channel_deliveries (
        account     TEXT NOT NULL,
        message_key TEXT NOT NULL,
        seen_at     BIGINT NOT NULL,
        PRIMARY KEY (account, message_key)
    );
    CREATE INDEX channel_deliveries_by_age ON channel_deliveries (account, seen_at);",
    ),
    (
        6,
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
        started_at    BIGINT NOT NULL,
        ended_at      BIGINT,
        provider      TEXT,
        model         TEXT,
        input_tokens  BIGINT NOT NULL,
        output_tokens BIGINT NOT NULL,
        cached_tokens BIGINT NOT NULL,
        cost_usd      DOUBLE PRECISION NOT NULL,
        llm_calls     BIGINT NOT NULL,
        tool_calls    BIGINT NOT NULL,
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
        started_at    BIGINT NOT NULL,
        ended_at      BIGINT,
        status        TEXT NOT NULL,
        error         TEXT,
        agent_id      TEXT NOT NULL,
        user_id       TEXT,
        provider      TEXT,
        model         TEXT,
        input_tokens  BIGINT NOT NULL,
        output_tokens BIGINT NOT NULL,
        cached_tokens BIGINT NOT NULL,
        cost_usd      DOUBLE PRECISION NOT NULL,
        attrs         TEXT NOT NULL,
        PRIMARY KEY (trace_id, span_id)
    );
    CREATE INDEX trace_llm_calls_by_time ON trace_spans (started_at) WHERE kind = 'llm';",
    ),
    (
        7,
        "devices",
        "CREATE TABLE gateway_devices (
        id           TEXT PRIMARY KEY,
        public_key   TEXT NOT NULL,
        client_id    TEXT NOT NULL,
        platform     TEXT NOT NULL,
        user_id      TEXT,
        role         TEXT NOT NULL,
        token_hash   TEXT NOT NULL,
        paired_at    BIGINT NOT NULL,
        last_seen_at BIGINT NOT NULL,
        revoked_at   BIGINT
    );",
    ),
    (
        8,
        "device_credentials",
        // Devices paired before have no binding: their tokens stop working until they
        // come back once with a credential.
        "ALTER TABLE gateway_devices ADD COLUMN credential_hash TEXT NOT NULL DEFAULT '';",
    ),
];

const MIGRATIONS_TABLE: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (
    version    BIGINT PRIMARY KEY,
    name       TEXT NOT NULL,
    checksum   TEXT NOT NULL,
    applied_at BIGINT NOT NULL
)";

/// The advisory lock key migrations take (any constant no other code uses).
const MIGRATION_LOCK: i64 = 0x6665_7272_6f63_6c61; // "ferrocla"

async fn ensure_table(client: &Client) -> Result<(), tokio_postgres::Error> {
    client.batch_execute(MIGRATIONS_TABLE).await
}

async fn verify(client: &impl deadpool_postgres::GenericClient) -> Result<(), MigrationError> {
    for row in client
        .query("SELECT version, name, checksum FROM schema_migrations", &[])
        .await?
    {
        check_recorded(MIGRATIONS, row.get(0), row.get(1), row.get(2))?;
    }
    Ok(())
}

pub(crate) async fn migrate_up(client: &mut Client) -> Result<Vec<i64>, MigrationError> {
    // Two instances may both find the table missing; the second CREATE then fails on
    // the catalogue's unique index, so it is serialised like the migrations themselves.
    {
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await?;
        tx.batch_execute(MIGRATIONS_TABLE).await?;
        tx.commit().await?;
    }
    let mut applied = Vec::new();
    for &(version, name, sql) in MIGRATIONS {
        let tx = client.transaction().await?;
        tx.batch_execute("SET LOCAL synchronous_commit TO on")
            .await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await?;
        verify(&tx).await?;
        let done = tx
            .query_opt(
                "SELECT 1 FROM schema_migrations WHERE version = $1",
                &[&version],
            )
            .await?;
        if done.is_some() {
            tx.commit().await?;
            continue;
        }
        tx.batch_execute(sql).await?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES ($1, $2, $3, $4)",
            &[&version, &name, &checksum(sql), &ferroclaw_types::now_millis()],
        )
        .await?;
        tx.commit().await?;
        tracing::info!(version, name, "applied database migration");
        applied.push(version);
    }
    Ok(applied)
}

pub(crate) async fn status(client: &Client) -> Result<Vec<MigrationState>, MigrationError> {
    ensure_table(client).await?;
    verify(client).await?;
    let mut out = Vec::new();
    for &(version, name, _) in MIGRATIONS {
        let applied_at: Option<i64> = client
            .query_opt(
                "SELECT applied_at FROM schema_migrations WHERE version = $1",
                &[&version],
            )
            .await?
            .map(|r| r.get(0));
        out.push(MigrationState {
            version,
            name: name.to_string(),
            applied_at,
        });
    }
    Ok(out)
}
