//! The embedded backend's [`CronStore`]: tables in the records database. Claims run in
//! `BEGIN IMMEDIATE` transactions, so two processes on one home (or two threads) never
//! claim one job twice.

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::records::RecordsDb;
use crate::cron::{CronJob, CronRun, CronStore, RUNS_KEPT_PER_JOB};
use crate::StoreError;

pub(crate) struct SqliteCron {
    db: RecordsDb,
}

impl SqliteCron {
    pub(crate) fn new(db: RecordsDb) -> SqliteCron {
        SqliteCron { db }
    }
}

const JOB_COLUMNS: &str =
    "id, agent_id, owner, spec, enabled, next_run_at, created_at, updated_at, lease_owner, lease_until";

fn job_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<CronJob> {
    let spec: String = r.get(3)?;
    let lease_owner: Option<String> = r.get(8)?;
    let lease_until: Option<i64> = r.get(9)?;
    Ok(CronJob {
        id: r.get(0)?,
        agent_id: r.get(1)?,
        owner: r.get(2)?,
        spec: serde_json::from_str(&spec).unwrap_or(serde_json::Value::Null),
        enabled: r.get::<_, i64>(4)? != 0,
        next_run_at: r.get(5)?,
        created_at: r.get(6)?,
        updated_at: r.get(7)?,
        lease: lease_owner.zip(lease_until),
    })
}

const RUN_COLUMNS: &str =
    "id, job_id, started_at, ended_at, status, error, attempts, session_key, output, holder";

fn run_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<CronRun> {
    Ok(CronRun {
        id: r.get(0)?,
        job_id: r.get(1)?,
        started_at: r.get(2)?,
        ended_at: r.get(3)?,
        status: r.get(4)?,
        error: r.get(5)?,
        attempts: r.get::<_, i64>(6)?.clamp(0, u32::MAX as i64) as u32,
        session_key: r.get(7)?,
        output: r.get(8)?,
        holder: r.get(9)?,
    })
}

fn job_by_id(conn: &Connection, id: &str) -> rusqlite::Result<Option<CronJob>> {
    conn.prepare_cached(&format!(
        "SELECT {JOB_COLUMNS} FROM cron_jobs WHERE id = ?1"
    ))?
    .query_row([id], job_from_row)
    .optional()
}

#[async_trait]
impl CronStore for SqliteCron {
    async fn put_job(&self, job: &CronJob) -> Result<(), StoreError> {
        let job = job.clone();
        self.db
            .with(move |conn| {
                conn.prepare_cached(
                    "INSERT INTO cron_jobs (id, agent_id, owner, spec, enabled, next_run_at, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                     ON CONFLICT (id) DO UPDATE SET agent_id = excluded.agent_id, owner = excluded.owner,
                       spec = excluded.spec, enabled = excluded.enabled,
                       next_run_at = excluded.next_run_at, updated_at = excluded.updated_at",
                )?
                .execute(params![
                    job.id,
                    job.agent_id,
                    job.owner,
                    job.spec.to_string(),
                    job.enabled as i64,
                    job.next_run_at,
                    job.created_at,
                    job.updated_at
                ])?;
                Ok(())
            })
            .await
    }

    async fn job(&self, id: &str) -> Result<Option<CronJob>, StoreError> {
        let id = id.to_string();
        self.db.with(move |conn| job_by_id(conn, &id)).await
    }

    async fn jobs(&self, owner: Option<&str>) -> Result<Vec<CronJob>, StoreError> {
        let owner = owner.map(str::to_string);
        self.db
            .with(move |conn| match owner {
                Some(o) => conn
                    .prepare_cached(&format!(
                        "SELECT {JOB_COLUMNS} FROM cron_jobs WHERE owner = ?1 ORDER BY created_at, id"
                    ))?
                    .query_map([o], job_from_row)?
                    .collect(),
                None => conn
                    .prepare_cached(&format!(
                        "SELECT {JOB_COLUMNS} FROM cron_jobs ORDER BY created_at, id"
                    ))?
                    .query_map([], job_from_row)?
                    .collect(),
            })
            .await
    }

    async fn delete_job(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_string();
        self.db
            .with(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let n = tx.execute("DELETE FROM cron_jobs WHERE id = ?1", [&id])?;
                tx.execute("DELETE FROM cron_runs WHERE job_id = ?1", [&id])?;
                tx.commit()?;
                Ok(n > 0)
            })
            .await
    }

    async fn claim_due(
        &self,
        now: i64,
        holder: &str,
        lease_until: i64,
        limit: usize,
    ) -> Result<Vec<CronJob>, StoreError> {
        let holder = holder.to_string();
        self.db
            .with(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let ids: Vec<String> = tx
                    .prepare_cached(
                        "SELECT id FROM cron_jobs
                         WHERE enabled = 1 AND next_run_at <= ?1
                           AND (lease_until IS NULL OR lease_until < ?1)
                         ORDER BY next_run_at, id LIMIT ?2",
                    )?
                    .query_map(params![now, limit as i64], |r| r.get(0))?
                    .collect::<rusqlite::Result<_>>()?;
                let mut out = Vec::with_capacity(ids.len());
                for id in ids {
                    tx.prepare_cached(
                        "UPDATE cron_jobs SET lease_owner = ?2, lease_until = ?3 WHERE id = ?1",
                    )?
                    .execute(params![id, holder, lease_until])?;
                    out.extend(job_by_id(&tx, &id)?);
                }
                tx.commit()?;
                Ok(out)
            })
            .await
    }

    async fn claim(
        &self,
        id: &str,
        now: i64,
        holder: &str,
        lease_until: i64,
    ) -> Result<Option<CronJob>, StoreError> {
        let (id, holder) = (id.to_string(), holder.to_string());
        self.db
            .with(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let n = tx
                    .prepare_cached(
                        "UPDATE cron_jobs SET lease_owner = ?2, lease_until = ?3
                         WHERE id = ?1 AND (lease_until IS NULL OR lease_until < ?4)",
                    )?
                    .execute(params![id, holder, lease_until, now])?;
                let job = if n == 1 { job_by_id(&tx, &id)? } else { None };
                tx.commit()?;
                Ok(job)
            })
            .await
    }

    async fn renew(&self, id: &str, holder: &str, lease_until: i64) -> Result<bool, StoreError> {
        let (id, holder) = (id.to_string(), holder.to_string());
        self.db
            .with(move |conn| {
                let n = conn
                    .prepare_cached(
                        "UPDATE cron_jobs SET lease_until = ?3 WHERE id = ?1 AND lease_owner = ?2",
                    )?
                    .execute(params![id, holder, lease_until])?;
                Ok(n == 1)
            })
            .await
    }

    async fn release(
        &self,
        id: &str,
        holder: &str,
        claimed_version: i64,
        next_run_at: Option<i64>,
        remove: bool,
    ) -> Result<(), StoreError> {
        let (id, holder) = (id.to_string(), holder.to_string());
        self.db
            .with(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                if remove {
                    tx.execute(
                        "DELETE FROM cron_jobs WHERE id = ?1 AND updated_at = ?2",
                        params![id, claimed_version],
                    )?;
                }
                tx.prepare_cached(
                    "UPDATE cron_jobs SET
                       next_run_at = CASE WHEN updated_at = ?3 THEN ?4 ELSE next_run_at END,
                       enabled = CASE WHEN updated_at = ?3 AND ?4 IS NULL THEN 0 ELSE enabled END,
                       lease_owner = NULL, lease_until = NULL
                     WHERE id = ?1 AND lease_owner = ?2",
                )?
                .execute(params![id, holder, claimed_version, next_run_at])?;
                tx.commit()
            })
            .await
    }

    async fn put_run(&self, run: &CronRun) -> Result<(), StoreError> {
        let run = run.clone();
        self.db
            .with(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                tx.prepare_cached(
                    "INSERT INTO cron_runs (id, job_id, started_at, ended_at, status, error, attempts, session_key, output, holder)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
                     ON CONFLICT (id) DO UPDATE SET ended_at = excluded.ended_at, status = excluded.status,
                       error = excluded.error, attempts = excluded.attempts, output = excluded.output",
                )?
                .execute(params![
                    run.id,
                    run.job_id,
                    run.started_at,
                    run.ended_at,
                    run.status,
                    run.error,
                    run.attempts as i64,
                    run.session_key,
                    run.output,
                    run.holder
                ])?;
                tx.prepare_cached(
                    "DELETE FROM cron_runs WHERE job_id = ?1 AND id NOT IN
                       (SELECT id FROM cron_runs WHERE job_id = ?1 ORDER BY started_at DESC, id DESC LIMIT ?2)",
                )?
                .execute(params![run.job_id, RUNS_KEPT_PER_JOB as i64])?;
                tx.commit()
            })
            .await
    }

    async fn runs(&self, job_id: Option<&str>, limit: usize) -> Result<Vec<CronRun>, StoreError> {
        let job_id = job_id.map(str::to_string);
        self.db
            .with(move |conn| match job_id {
                Some(j) => conn
                    .prepare_cached(&format!(
                        "SELECT {RUN_COLUMNS} FROM cron_runs WHERE job_id = ?1
                         ORDER BY started_at DESC, id DESC LIMIT ?2"
                    ))?
                    .query_map(params![j, limit as i64], run_from_row)?
                    .collect(),
                None => conn
                    .prepare_cached(&format!(
                        "SELECT {RUN_COLUMNS} FROM cron_runs ORDER BY started_at DESC, id DESC LIMIT ?1"
                    ))?
                    .query_map(params![limit as i64], run_from_row)?
                    .collect(),
            })
            .await
    }

    async fn interrupt_stale_runs(&self, job_id: &str, holder: &str) -> Result<(), StoreError> {
        let (job_id, holder) = (job_id.to_string(), holder.to_string());
        self.db
            .with(move |conn| {
                conn.prepare_cached(
                    "UPDATE cron_runs SET status = 'interrupted', error = 'its instance stopped before it ended'
                     WHERE job_id = ?1 AND status = 'running' AND holder IS NOT ?2",
                )?
                .execute(params![job_id, holder])?;
                Ok(())
            })
            .await
    }
}
