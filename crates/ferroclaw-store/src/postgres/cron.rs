//! The managed backend's [`CronStore`]: the embedded one's rows in PostgreSQL. A claim is
//! one `UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED)`: instances claiming at
//! the same moment each get different jobs, none waits for another. Writes commit
//! synchronously (nothing later flushes them).

use async_trait::async_trait;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::{db_error, PgSessionStore};
use crate::cron::{CronJob, CronRun, CronStore, RUNS_KEPT_PER_JOB};
use crate::StoreError;

const JOB_COLUMNS: &str =
    "id, agent_id, owner, spec, enabled, next_run_at, created_at, updated_at, lease_owner, lease_until";
const RUN_COLUMNS: &str =
    "id, job_id, started_at, ended_at, status, error, attempts, session_key, output, holder";

fn job_from_row(r: &Row) -> CronJob {
    let spec: String = r.get(3);
    let lease_owner: Option<String> = r.get(8);
    let lease_until: Option<i64> = r.get(9);
    CronJob {
        id: r.get(0),
        agent_id: r.get(1),
        owner: r.get(2),
        spec: serde_json::from_str(&spec).unwrap_or(serde_json::Value::Null),
        enabled: r.get(4),
        next_run_at: r.get(5),
        created_at: r.get(6),
        updated_at: r.get(7),
        lease: lease_owner.zip(lease_until),
    }
}

fn run_from_row(r: &Row) -> CronRun {
    CronRun {
        id: r.get(0),
        job_id: r.get(1),
        started_at: r.get(2),
        ended_at: r.get(3),
        status: r.get(4),
        error: r.get(5),
        attempts: r.get::<_, i32>(6).max(0) as u32,
        session_key: r.get(7),
        output: r.get(8),
        holder: r.get(9),
    }
}

#[async_trait]
impl CronStore for PgSessionStore {
    async fn put_job(&self, j: &CronJob) -> Result<(), StoreError> {
        self.durable(
            "INSERT INTO cron_jobs (id, agent_id, owner, spec, enabled, next_run_at, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             ON CONFLICT (id) DO UPDATE SET agent_id = excluded.agent_id, owner = excluded.owner,
               spec = excluded.spec, enabled = excluded.enabled,
               next_run_at = excluded.next_run_at, updated_at = excluded.updated_at",
            &[
                &j.id as &(dyn ToSql + Sync),
                &j.agent_id,
                &j.owner,
                &j.spec.to_string(),
                &j.enabled,
                &j.next_run_at,
                &j.created_at,
                &j.updated_at,
            ],
        )
        .await?;
        Ok(())
    }

    async fn job(&self, id: &str) -> Result<Option<CronJob>, StoreError> {
        let rows = self
            .rows(
                &format!("SELECT {JOB_COLUMNS} FROM cron_jobs WHERE id = $1"),
                &[&id],
            )
            .await?;
        Ok(rows.first().map(job_from_row))
    }

    async fn jobs(&self, owner: Option<&str>) -> Result<Vec<CronJob>, StoreError> {
        let rows = match owner {
            Some(o) => {
                self.rows(
                    &format!("SELECT {JOB_COLUMNS} FROM cron_jobs WHERE owner = $1 ORDER BY created_at, id"),
                    &[&o],
                )
                .await?
            }
            None => {
                self.rows(
                    &format!("SELECT {JOB_COLUMNS} FROM cron_jobs ORDER BY created_at, id"),
                    &[],
                )
                .await?
            }
        };
        Ok(rows.iter().map(job_from_row).collect())
    }

    async fn delete_job(&self, id: &str) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.batch_execute("SET LOCAL synchronous_commit TO on")
            .await
            .map_err(db_error)?;
        let n = tx
            .execute("DELETE FROM cron_jobs WHERE id = $1", &[&id])
            .await
            .map_err(db_error)?;
        tx.execute("DELETE FROM cron_runs WHERE job_id = $1", &[&id])
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(n > 0)
    }

    async fn claim_due(
        &self,
        now: i64,
        holder: &str,
        lease_until: i64,
        limit: usize,
    ) -> Result<Vec<CronJob>, StoreError> {
        let limit = limit as i64;
        let rows = self
            .rows(
                &format!(
                    // `= ANY(ARRAY(…))`, not `IN (…)`: the generic plan of a prepared
                    // `IN` is a hash join over a scan of every job.
                    "UPDATE cron_jobs SET lease_owner = $2, lease_until = $3
                     WHERE id = ANY(ARRAY(
                       SELECT id FROM cron_jobs
                       WHERE enabled AND next_run_at <= $1 AND (lease_until IS NULL OR lease_until < $1)
                       ORDER BY next_run_at, id LIMIT $4
                       FOR UPDATE SKIP LOCKED))
                     RETURNING {JOB_COLUMNS}"
                ),
                &[&now, &holder, &lease_until, &limit],
            )
            .await?;
        let mut jobs: Vec<CronJob> = rows.iter().map(job_from_row).collect();
        jobs.sort_by(|a, b| (a.next_run_at, &a.id).cmp(&(b.next_run_at, &b.id)));
        Ok(jobs)
    }

    async fn claim(
        &self,
        id: &str,
        now: i64,
        holder: &str,
        lease_until: i64,
    ) -> Result<Option<CronJob>, StoreError> {
        let rows = self
            .rows(
                &format!(
                    "UPDATE cron_jobs SET lease_owner = $2, lease_until = $3
                     WHERE id = $1 AND (lease_until IS NULL OR lease_until < $4)
                     RETURNING {JOB_COLUMNS}"
                ),
                &[&id, &holder, &lease_until, &now],
            )
            .await?;
        Ok(rows.first().map(job_from_row))
    }

    async fn renew(&self, id: &str, holder: &str, lease_until: i64) -> Result<bool, StoreError> {
        let n = self
            .durable(
                "UPDATE cron_jobs SET lease_until = $3 WHERE id = $1 AND lease_owner = $2",
                &[&id, &holder, &lease_until],
            )
            .await?;
        Ok(n == 1)
    }

    async fn release(
        &self,
        id: &str,
        holder: &str,
        claimed_version: i64,
        next_run_at: Option<i64>,
        remove: bool,
    ) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.batch_execute("SET LOCAL synchronous_commit TO on")
            .await
            .map_err(db_error)?;
        if remove {
            tx.execute(
                "DELETE FROM cron_jobs WHERE id = $1 AND updated_at = $2",
                &[&id, &claimed_version],
            )
            .await
            .map_err(db_error)?;
        }
        tx.execute(
            "UPDATE cron_jobs SET
               next_run_at = CASE WHEN updated_at = $3 THEN $4 ELSE next_run_at END,
               enabled = CASE WHEN updated_at = $3 AND $4::BIGINT IS NULL THEN FALSE ELSE enabled END,
               lease_owner = NULL, lease_until = NULL
             WHERE id = $1 AND lease_owner = $2",
            &[&id, &holder, &claimed_version, &next_run_at],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)
    }

    async fn put_run(&self, run: &CronRun) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.batch_execute("SET LOCAL synchronous_commit TO on")
            .await
            .map_err(db_error)?;
        let attempts = run.attempts.min(i32::MAX as u32) as i32;
        tx.execute(
            "INSERT INTO cron_runs (id, job_id, started_at, ended_at, status, error, attempts, session_key, output, holder)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
             ON CONFLICT (id) DO UPDATE SET ended_at = excluded.ended_at, status = excluded.status,
               error = excluded.error, attempts = excluded.attempts, output = excluded.output",
            &[
                &run.id as &(dyn ToSql + Sync),
                &run.job_id,
                &run.started_at,
                &run.ended_at,
                &run.status,
                &run.error,
                &attempts,
                &run.session_key,
                &run.output,
                &run.holder,
            ],
        )
        .await
        .map_err(db_error)?;
        let keep = RUNS_KEPT_PER_JOB as i64;
        tx.execute(
            "DELETE FROM cron_runs WHERE job_id = $1 AND id NOT IN
               (SELECT id FROM cron_runs WHERE job_id = $1 ORDER BY started_at DESC, id DESC LIMIT $2)",
            &[&run.job_id, &keep],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)
    }

    async fn runs(&self, job_id: Option<&str>, limit: usize) -> Result<Vec<CronRun>, StoreError> {
        let limit = limit as i64;
        let rows = match job_id {
            Some(j) => {
                self.rows(
                    &format!(
                        "SELECT {RUN_COLUMNS} FROM cron_runs WHERE job_id = $1
                         ORDER BY started_at DESC, id DESC LIMIT $2"
                    ),
                    &[&j, &limit],
                )
                .await?
            }
            None => {
                self.rows(
                    &format!(
                        "SELECT {RUN_COLUMNS} FROM cron_runs ORDER BY started_at DESC, id DESC LIMIT $1"
                    ),
                    &[&limit],
                )
                .await?
            }
        };
        Ok(rows.iter().map(run_from_row).collect())
    }

    async fn interrupt_stale_runs(&self, job_id: &str, holder: &str) -> Result<(), StoreError> {
        self.durable(
            "UPDATE cron_runs SET status = 'interrupted', error = 'its instance stopped before it ended'
             WHERE job_id = $1 AND status = 'running' AND holder IS DISTINCT FROM $2",
            &[&job_id, &holder],
        )
        .await?;
        Ok(())
    }
}
