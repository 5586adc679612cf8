//! Scheduled jobs and their run log, in both backends. The store knows when a job is
//! due and who holds it; what a schedule means (and so when a job is next due) is the
//! runtime's business, so the job's definition is kept as JSON it owns.
//!
//! Exactly once across instances: a due job is *claimed* (a lease: holder and expiry,
//! taken in one statement, `FOR UPDATE SKIP LOCKED` in PostgreSQL, a write transaction
//! in SQLite), renewed while its run goes on, and released with its next due time. A
//! held job is never claimed again until its lease expires (its holder died).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::StoreError;

/// Runs kept per job; older ones are dropped as new ones are logged.
pub const RUNS_KEPT_PER_JOB: usize = 200;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CronJob {
    pub id: String,
    pub agent_id: String,
    /// The user whose job it is (`None`: the administrator's).
    pub owner: Option<String>,
    /// The definition (schedule, message, delivery, …), as the runtime wrote it.
    pub spec: serde_json::Value,
    pub enabled: bool,
    /// Epoch ms; `None`: nothing scheduled.
    pub next_run_at: Option<i64>,
    pub created_at: i64,
    /// Epoch ms, changed by every write of the definition: a run that ends after the job
    /// was edited does not overwrite the new schedule.
    pub updated_at: i64,
    /// Who holds the job now, and until when (epoch ms).
    pub lease: Option<(String, i64)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CronRun {
    pub id: String,
    pub job_id: String,
    pub started_at: i64,
    pub ended_at: Option<i64>,
    /// `running`, `ok`, `error`, `skipped` or `interrupted` (its instance died).
    pub status: String,
    pub error: Option<String>,
    pub attempts: u32,
    pub session_key: String,
    /// The answer (cut to a few thousand characters).
    pub output: Option<String>,
    /// The instance that ran it.
    pub holder: Option<String>,
}

#[async_trait]
pub trait CronStore: Send + Sync {
    /// Creates the job or replaces its definition (never its lease).
    async fn put_job(&self, job: &CronJob) -> Result<(), StoreError>;
    async fn job(&self, id: &str) -> Result<Option<CronJob>, StoreError>;
    /// Every job (`None`), or one user's.
    async fn jobs(&self, owner: Option<&str>) -> Result<Vec<CronJob>, StoreError>;
    /// Removes the job and its run log; `false` when there was none.
    async fn delete_job(&self, id: &str) -> Result<bool, StoreError>;
    /// Claims up to `limit` enabled jobs due at `now` that nobody holds (or whose holder's
    /// lease expired), for `holder` until `lease_until`; returns them, earliest first.
    async fn claim_due(
        &self,
        now: i64,
        holder: &str,
        lease_until: i64,
        limit: usize,
    ) -> Result<Vec<CronJob>, StoreError>;
    /// Claims one job whatever its schedule (run now), unless someone holds it.
    async fn claim(
        &self,
        id: &str,
        now: i64,
        holder: &str,
        lease_until: i64,
    ) -> Result<Option<CronJob>, StoreError>;
    /// Extends `holder`'s lease; `false` when it no longer holds the job.
    async fn renew(&self, id: &str, holder: &str, lease_until: i64) -> Result<bool, StoreError>;
    /// Ends `holder`'s claim. Unless the job was edited since `claimed_version` (its
    /// `updated_at` when claimed), it is next due at `next_run_at` (`None`: disabled);
    /// with `remove`, it is deleted instead (a one-time job that ran).
    async fn release(
        &self,
        id: &str,
        holder: &str,
        claimed_version: i64,
        next_run_at: Option<i64>,
        remove: bool,
    ) -> Result<(), StoreError>;
    /// Logs a run (insert or update by id), dropping the job's oldest beyond
    /// [`RUNS_KEPT_PER_JOB`].
    async fn put_run(&self, run: &CronRun) -> Result<(), StoreError>;
    /// The latest runs, newest first: of one job, or of all.
    async fn runs(&self, job_id: Option<&str>, limit: usize) -> Result<Vec<CronRun>, StoreError>;
    /// Marks the job's runs still `running` under another holder as `interrupted`
    /// (called by whoever claims a job whose lease expired).
    async fn interrupt_stale_runs(&self, job_id: &str, holder: &str) -> Result<(), StoreError>;
}
