//! Scheduled jobs: a message for an agent on a schedule, run through the runtime like
//! any other message (the `cron` lane, a session of its own per run, the minimal
//! prompt), retried on failure, logged, and run exactly once across instances (the
//! store's claim and lease). [`CronBook`] keeps the jobs (what surfaces and the `cron`
//! tool change); [`CronService`] runs the due ones.

mod heartbeat;
mod schedule;
mod service;
mod tool;

use std::sync::Arc;
use std::time::Duration;

use ferroclaw_config::CatchUp;
use ferroclaw_store::{CronJob, CronRun, CronStore, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Requester;
pub use heartbeat::{is_ack, ACK_TOKEN};
pub use schedule::Schedule;
pub use service::{CronService, RetryPolicy, RuntimeHost};
pub(crate) use tool::CronTool;

/// Where time comes from: the system clock, or a test's.
#[async_trait::async_trait]
pub trait Clock: Send + Sync {
    fn now_ms(&self) -> i64;
    /// Waits `d` (a retry's back-off).
    async fn sleep(&self, d: Duration);
}

pub struct SystemClock;

#[async_trait::async_trait]
impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        ferroclaw_types::now_millis()
    }

    async fn sleep(&self, d: Duration) {
        tokio::time::sleep(d).await;
    }
}

/// Where a job's answer goes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum Delivery {
    /// Kept in the run's own session only.
    #[default]
    None,
    /// Also appended to this session of the job's agent (as the job's owner sees it).
    #[serde(rename_all = "camelCase")]
    Session { session_key: String },
}

/// A job as clients write it (create: all but `schedule` and `message` optional;
/// update: every field optional).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JobInput {
    pub name: Option<String>,
    pub agent_id: Option<String>,
    pub schedule: Option<Value>,
    pub message: Option<String>,
    pub deliver: Option<Delivery>,
    pub enabled: Option<bool>,
    pub catch_up: Option<CatchUp>,
}

/// What the store keeps as the job's definition.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Definition {
    pub name: String,
    pub schedule: Value,
    pub message: String,
    #[serde(default)]
    pub deliver: Delivery,
    pub catch_up: CatchUp,
    /// Set on an agent's heartbeat (which follows the configuration, not clients).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<heartbeat::HeartbeatSpec>,
}

/// A job as clients see it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobView {
    pub id: String,
    pub name: String,
    pub agent_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    pub schedule: Value,
    pub message: String,
    pub deliver: Delivery,
    pub enabled: bool,
    pub catch_up: CatchUp,
    pub next_run_at: Option<i64>,
    /// A run of it is under way somewhere.
    pub running: bool,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A logged run as clients see it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunView {
    pub id: String,
    pub job_id: String,
    pub status: String,
    pub started_at: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    pub attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub session_key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

impl From<CronRun> for RunView {
    fn from(r: CronRun) -> RunView {
        RunView {
            duration_ms: r.ended_at.map(|e| e - r.started_at),
            id: r.id,
            job_id: r.job_id,
            status: r.status,
            started_at: r.started_at,
            ended_at: r.ended_at,
            attempts: r.attempts,
            error: r.error,
            session_key: r.session_key,
            output: r.output,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CronError {
    #[error("{0}")]
    Invalid(String),
    #[error("no cron job `{0}`")]
    NotFound(String),
    #[error("cron job `{0}` is running; try again when it has ended")]
    Busy(String),
    #[error("this storage keeps no cron jobs")]
    Unavailable,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The jobs, as surfaces and the `cron` tool change them.
#[derive(Clone)]
pub struct CronBook {
    store: Arc<dyn CronStore>,
    clock: Arc<dyn Clock>,
    default_catch_up: CatchUp,
    /// The configured agents' heartbeats, made jobs by the service's first tick.
    heartbeats: Arc<
        Vec<(
            String,
            Option<ferroclaw_config::settings::HeartbeatSettings>,
        )>,
    >,
}

/// Messages longer than this are refused: a job runs unattended, repeatedly.
const MAX_MESSAGE_CHARS: usize = 20_000;
const MAX_NAME_CHARS: usize = 200;

impl CronBook {
    pub fn new(store: Arc<dyn CronStore>, clock: Arc<dyn Clock>, catch_up: CatchUp) -> CronBook {
        CronBook {
            store,
            clock,
            default_catch_up: catch_up,
            heartbeats: Arc::default(),
        }
    }

    /// The heartbeat settings of the configured agents (`None`: none for that agent).
    pub fn with_heartbeats(
        mut self,
        agents: Vec<(
            String,
            Option<ferroclaw_config::settings::HeartbeatSettings>,
        )>,
    ) -> CronBook {
        self.heartbeats = Arc::new(agents);
        self
    }

    pub(crate) fn heartbeats(
        &self,
    ) -> &[(
        String,
        Option<ferroclaw_config::settings::HeartbeatSettings>,
    )] {
        &self.heartbeats
    }

    pub(crate) fn store(&self) -> &Arc<dyn CronStore> {
        &self.store
    }

    pub(crate) fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Creates a job of `caller`'s on `agent_id` (which the caller has been checked to
    /// be allowed to use).
    pub async fn create(
        &self,
        caller: Requester<'_>,
        agent_id: &str,
        input: JobInput,
    ) -> Result<JobView, CronError> {
        let now = self.clock.now_ms();
        let schedule_json = input
            .schedule
            .ok_or_else(|| CronError::Invalid("a job needs a `schedule`".into()))?;
        let schedule = Schedule::from_json(&schedule_json, now).map_err(CronError::Invalid)?;
        let message = check_message(input.message.unwrap_or_default())?;
        let name = check_name(input.name.unwrap_or_else(|| short(&message, 60)))?;
        let definition = Definition {
            name,
            schedule: serde_json::to_value(&schedule).unwrap_or(Value::Null),
            message,
            deliver: check_delivery(input.deliver.unwrap_or_default())?,
            catch_up: input.catch_up.unwrap_or(self.default_catch_up),
            heartbeat: None,
        };
        let enabled = input.enabled.unwrap_or(true);
        let job = CronJob {
            id: uuid::Uuid::now_v7().simple().to_string()[20..].to_string(),
            agent_id: agent_id.to_string(),
            owner: caller.user.map(str::to_string),
            spec: serde_json::to_value(&definition).unwrap_or(Value::Null),
            enabled,
            next_run_at: if enabled {
                schedule.first_run(now)
            } else {
                None
            },
            created_at: now,
            updated_at: now,
            lease: None,
        };
        self.store.put_job(&job).await?;
        Ok(view(job))
    }

    /// Changes a job; a new schedule (or enabling it) computes its next run afresh.
    pub async fn update(
        &self,
        caller: Requester<'_>,
        id: &str,
        input: JobInput,
    ) -> Result<JobView, CronError> {
        let mut job = self.owned(caller, id).await?;
        if input.agent_id.is_some() {
            return Err(CronError::Invalid(
                "a job's agent cannot change; create a new job".into(),
            ));
        }
        let mut def = definition(&job)?;
        if def.heartbeat.is_some() {
            return Err(heartbeat_is_configured());
        }
        let now = self.clock.now_ms();
        let mut reschedule = false;
        if let Some(s) = input.schedule {
            let schedule = Schedule::from_json(&s, now).map_err(CronError::Invalid)?;
            def.schedule = serde_json::to_value(&schedule).unwrap_or(Value::Null);
            reschedule = true;
        }
        if let Some(m) = input.message {
            def.message = check_message(m)?;
        }
        if let Some(n) = input.name {
            def.name = check_name(n)?;
        }
        if let Some(d) = input.deliver {
            def.deliver = check_delivery(d)?;
        }
        if let Some(c) = input.catch_up {
            def.catch_up = c;
        }
        if let Some(e) = input.enabled {
            reschedule |= e && !job.enabled;
            job.enabled = e;
        }
        if !job.enabled {
            job.next_run_at = None;
        } else if reschedule || job.next_run_at.is_none() {
            let schedule = Schedule::from_json(&def.schedule, now).map_err(CronError::Invalid)?;
            job.next_run_at = schedule.first_run(now);
        }
        job.spec = serde_json::to_value(&def).unwrap_or(Value::Null);
        job.updated_at = now.max(job.updated_at + 1);
        self.store.put_job(&job).await?;
        Ok(view(job))
    }

    pub async fn delete(&self, caller: Requester<'_>, id: &str) -> Result<(), CronError> {
        let job = self.owned(caller, id).await?;
        if definition(&job)?.heartbeat.is_some() {
            return Err(heartbeat_is_configured());
        }
        self.store.delete_job(id).await?;
        Ok(())
    }

    /// Makes the job due now: the scheduler runs it at its next tick (within a second),
    /// on whichever instance claims it first, and never while a run of it goes on.
    pub async fn run_now(&self, caller: Requester<'_>, id: &str) -> Result<JobView, CronError> {
        let mut job = self.owned(caller, id).await?;
        let now = self.clock.now_ms();
        job.next_run_at = Some(now);
        job.enabled = true;
        job.updated_at = now.max(job.updated_at + 1);
        self.store.put_job(&job).await?;
        Ok(view(job))
    }

    pub async fn list(&self, caller: Requester<'_>) -> Result<Vec<JobView>, CronError> {
        let owner = if caller.admin {
            None
        } else {
            Some(caller.user.unwrap_or(""))
        };
        let jobs = self.store.jobs(owner).await?;
        Ok(jobs.into_iter().map(view).collect())
    }

    pub async fn get(&self, caller: Requester<'_>, id: &str) -> Result<JobView, CronError> {
        Ok(view(self.owned(caller, id).await?))
    }

    /// The latest runs of one job (or, for the administrator, of all), newest first.
    pub async fn runs(
        &self,
        caller: Requester<'_>,
        id: Option<&str>,
        limit: usize,
    ) -> Result<Vec<RunView>, CronError> {
        let limit = limit.clamp(1, ferroclaw_store::RUNS_KEPT_PER_JOB);
        let runs = match id {
            Some(id) => {
                self.owned(caller, id).await?;
                self.store.runs(Some(id), limit).await?
            }
            None if caller.admin => self.store.runs(None, limit).await?,
            None => {
                return Err(CronError::Invalid(
                    "name the job whose runs you want (`id`)".into(),
                ))
            }
        };
        Ok(runs.into_iter().map(RunView::from).collect())
    }

    /// The job, if `caller` may see it: another user's job does not exist for them.
    async fn owned(&self, caller: Requester<'_>, id: &str) -> Result<CronJob, CronError> {
        match self.store.job(id).await? {
            Some(job) if caller.admin || job.owner.as_deref() == caller.user => Ok(job),
            _ => Err(CronError::NotFound(id.to_string())),
        }
    }
}

pub(crate) fn definition(job: &CronJob) -> Result<Definition, CronError> {
    serde_json::from_value(job.spec.clone())
        .map_err(|e| CronError::Invalid(format!("stored job `{}` is unreadable: {e}", job.id)))
}

fn view(job: CronJob) -> JobView {
    let def = definition(&job).ok();
    JobView {
        name: def.as_ref().map(|d| d.name.clone()).unwrap_or_default(),
        schedule: def
            .as_ref()
            .map(|d| d.schedule.clone())
            .unwrap_or(Value::Null),
        message: def.as_ref().map(|d| d.message.clone()).unwrap_or_default(),
        deliver: def.as_ref().map(|d| d.deliver.clone()).unwrap_or_default(),
        catch_up: def.as_ref().map_or(CatchUp::Once, |d| d.catch_up),
        running: job.lease.is_some(),
        id: job.id,
        agent_id: job.agent_id,
        owner: job.owner,
        enabled: job.enabled,
        next_run_at: job.next_run_at,
        created_at: job.created_at,
        updated_at: job.updated_at,
    }
}

fn heartbeat_is_configured() -> CronError {
    CronError::Invalid(
        "a heartbeat follows the agent's `heartbeat` settings in the configuration; change it there".into(),
    )
}

fn check_message(m: String) -> Result<String, CronError> {
    let m = m.trim().to_string();
    if m.is_empty() {
        return Err(CronError::Invalid("a job needs a `message`".into()));
    }
    if m.chars().count() > MAX_MESSAGE_CHARS {
        return Err(CronError::Invalid(format!(
            "`message` is longer than {MAX_MESSAGE_CHARS} characters"
        )));
    }
    Ok(m)
}

fn check_name(n: String) -> Result<String, CronError> {
    let n = n.trim().to_string();
    if n.chars().count() > MAX_NAME_CHARS {
        return Err(CronError::Invalid(format!(
            "`name` is longer than {MAX_NAME_CHARS} characters"
        )));
    }
    Ok(n)
}

fn check_delivery(d: Delivery) -> Result<Delivery, CronError> {
    if let Delivery::Session { session_key } = &d {
        ferroclaw_store::validate_session_key(session_key)
            .map_err(|e| CronError::Invalid(format!("deliver.sessionKey: {e}")))?;
    }
    Ok(d)
}

fn short(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() <= max {
        line.to_string()
    } else {
        let cut: String = line.chars().take(max).collect();
        format!("{cut}…")
    }
}

impl crate::Runtime {
    /// Creates a job of `who`'s on an agent they may use (default: the default agent).
    /// The surfaces' door to [`CronBook::create`]; the other operations need no agent
    /// check and are the book's own.
    pub async fn cron_create(
        &self,
        who: Requester<'_>,
        input: JobInput,
    ) -> Result<JobView, CronError> {
        let book = self.cron().ok_or(CronError::Unavailable)?;
        let agent_id = input
            .agent_id
            .clone()
            .unwrap_or_else(|| self.default_agent_id().to_string());
        self.agent_for(who, &agent_id)
            .await
            .map_err(|e| CronError::Invalid(e.to_string()))?;
        book.create(who, &agent_id, input).await
    }
}
