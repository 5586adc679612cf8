//! The tick loop: claim the due jobs, run each through the runtime, log it, schedule
//! its next time. Every instance runs one; the store's claim makes a due job run on
//! exactly one of them, and its lease (renewed while the run goes on) keeps a job from
//! running twice at once. A run's end the store misses (it went away) is kept and
//! written before the next claims, so the job is not claimed as still due again.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use ferroclaw_agent::RunOptions;
use ferroclaw_config::settings::PromptMode;
use ferroclaw_config::CatchUp;
use ferroclaw_store::{CronJob, CronRun};
use ferroclaw_types::{AssistantMessage, ContentBlock, EntryBody, Message, StopReason, Usage};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{definition, CronBook, Delivery, Schedule};
use crate::{Origin, QueueMode, Requester, Runtime, Submit, Submitted};

/// How often due jobs are looked for.
const TICK: Duration = Duration::from_secs(1);
/// How long a claim holds without renewal (renewed every third of it).
const LEASE: Duration = Duration::from_secs(120);
/// Jobs claimed per tick at most (the `cron` lane bounds how many run at once).
const CLAIM_BATCH: usize = 32;
/// A run due longer ago than this was missed (the gateway was down): `catchUp` decides.
const MISSED_AFTER: Duration = Duration::from_secs(60);
/// The answer kept in the run log.
const OUTPUT_CHARS: usize = 4_000;

/// Retries of a failed run: `attempts` in all, back-off `base` doubling up to `cap`,
/// each delay moved by up to ±`jitter` of itself.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub attempts: u32,
    pub base: Duration,
    pub cap: Duration,
    pub jitter: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 3,
            base: Duration::from_secs(2),
            cap: Duration::from_secs(30),
            jitter: 0.25,
        }
    }
}

impl RetryPolicy {
    /// The wait after failed attempt `n` (1-based).
    pub fn delay(&self, n: u32) -> Duration {
        let exp = self
            .base
            .saturating_mul(1u32 << n.saturating_sub(1).min(16))
            .min(self.cap);
        let factor = 1.0 + self.jitter * (fastrand::f64() * 2.0 - 1.0);
        exp.mul_f64(factor.max(0.0))
    }
}

/// Why a job was started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trigger {
    /// Its time came (or a client asked for it now).
    Due,
    /// Run at once by [`CronService::run_job`], outside its schedule.
    Manual,
}

/// Whatever holds the runtime (the runtime itself, a gateway's state).
pub type RuntimeHost = Arc<dyn AsRef<Runtime> + Send + Sync>;

pub struct CronService {
    /// Set once the configured heartbeats are jobs.
    heartbeats_synced: tokio::sync::OnceCell<()>,
    host: RuntimeHost,
    book: CronBook,
    holder: String,
    retry: RetryPolicy,
    /// Ends of runs the store did not take while it was away, each with its number,
    /// written before anything else at the next ticks and kept until written.
    unwritten: std::sync::Mutex<(u64, VecDeque<(u64, Unwritten)>)>,
    /// Held while they are written, and while a tick claims: a tick never claims while
    /// another is still writing what the store missed.
    writing: tokio::sync::Mutex<()>,
}

/// What a run's end writes: its log entry, and the job's release with its next time.
#[derive(Clone)]
enum Unwritten {
    Run(CronRun),
    Release {
        job_id: String,
        claimed_version: i64,
        next: Option<i64>,
        remove: bool,
    },
}

/// Ends kept at most while the store is away (oldest dropped past it, with a warning).
const UNWRITTEN_MAX: usize = 10_000;

impl CronService {
    /// `None` when the runtime's storage keeps no jobs.
    pub fn new(host: RuntimeHost) -> Option<CronService> {
        let book = host.as_ref().as_ref().cron()?.clone();
        Some(CronService {
            heartbeats_synced: tokio::sync::OnceCell::new(),
            host,
            book,
            holder: uuid::Uuid::new_v4().to_string(),
            retry: RetryPolicy::default(),
            unwritten: std::sync::Mutex::new((0, VecDeque::new())),
            writing: tokio::sync::Mutex::new(()),
        })
    }

    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    fn runtime(&self) -> &Runtime {
        self.host.as_ref().as_ref()
    }

    /// This instance's name in leases and the run log.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Runs the jobs due now, all at once, and returns when they have ended; how many.
    pub async fn tick(&self) -> usize {
        let synced = self
            .heartbeats_synced
            .get_or_try_init(|| async {
                // Only agents that were built: one skipped at start has no heartbeat.
                let built: Vec<_> = self
                    .book
                    .heartbeats()
                    .iter()
                    .filter(|(id, _)| self.runtime().agent(id).is_some())
                    .cloned()
                    .collect();
                self.book.sync_heartbeats(&built).await
            })
            .await;
        if let Err(e) = synced {
            warn!(error = %e, "heartbeat: could not schedule the agents' heartbeats; retrying");
        }
        // First what the store missed: a run that ended while it was away must not be
        // claimed again as still due once its lease has run out. (A tick that finds
        // another still writing leaves the claims to the next one.)
        let Ok(writing) = self.writing.try_lock() else {
            return 0;
        };
        self.write_unwritten().await;
        let now = self.book.clock().now_ms();
        let lease_until = now + LEASE.as_millis() as i64;
        let claimed = self
            .book
            .store()
            .claim_due(now, &self.holder, lease_until, CLAIM_BATCH)
            .await;
        drop(writing);
        let claimed = match claimed {
            Ok(jobs) => jobs,
            Err(e) => {
                warn!(error = %e, "cron: could not look for due jobs");
                return 0;
            }
        };
        let n = claimed.len();
        let runs = claimed
            .into_iter()
            .map(|job| self.run_claimed(job, now, Trigger::Due));
        futures_util::future::join_all(runs).await;
        n
    }

    /// Runs one job now, here, whatever its schedule (which stays as it was), and returns
    /// its logged run; refused while a run of it goes on anywhere.
    pub async fn run_job(
        &self,
        who: crate::Requester<'_>,
        id: &str,
    ) -> Result<super::RunView, super::CronError> {
        self.book.get(who, id).await?;
        // (Its last run's end is still to be written: that run is not over for the store.)
        if self.awaits_release(id) {
            return Err(super::CronError::Busy(id.to_string()));
        }
        let now = self.book.clock().now_ms();
        let lease_until = now + LEASE.as_millis() as i64;
        let job = self
            .book
            .store()
            .claim(id, now, &self.holder, lease_until)
            .await?
            .ok_or_else(|| super::CronError::Busy(id.to_string()))?;
        self.run_claimed(job, now, Trigger::Manual).await;
        let runs = self.book.runs(who, Some(id), 1).await?;
        runs.into_iter()
            .next()
            .ok_or_else(|| super::CronError::NotFound(id.to_string()))
    }

    /// Ticks every second until `stop`; each tick's runs go on in the background, so a
    /// long run does not hold the others up.
    pub fn spawn(self: Arc<Self>, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(TICK);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = interval.tick() => {
                        let me = self.clone();
                        tokio::spawn(async move { me.tick().await });
                    }
                }
            }
        })
    }

    async fn run_claimed(&self, job: CronJob, now: i64, trigger: Trigger) {
        let store = self.book.store();
        // Claimed again by this instance because its release never reached the store:
        // the run is over, only its release is left to write.
        if self.awaits_release(&job.id) {
            let _writing = self.writing.lock().await;
            self.write_unwritten().await;
            info!(job = %job.id, "cron: a run that ended while the store was away is not run again");
            return;
        }
        if let Err(e) = store.interrupt_stale_runs(&job.id, &self.holder).await {
            warn!(job = %job.id, error = %e, "cron: could not close the runs of a dead instance");
        }
        let (def, schedule) = match definition(&job).and_then(|d| {
            let s = Schedule::from_json(&d.schedule, job.created_at)
                .map_err(super::CronError::Invalid)?;
            Ok((d, s))
        }) {
            Ok(x) => x,
            Err(e) => {
                // Unreadable: disabled rather than retried every second.
                warn!(job = %job.id, error = %e, "cron: job disabled");
                let id = uuid::Uuid::now_v7().simple().to_string();
                self.record(
                    &job,
                    &id,
                    "error",
                    Some(e.to_string()),
                    0,
                    now,
                    Some(now),
                    "",
                    None,
                )
                .await;
                self.release(&job, None, false).await;
                return;
            }
        };
        let next = match trigger {
            Trigger::Due => schedule.next_after(now),
            Trigger::Manual => job.next_run_at,
        };
        let missed = job
            .next_run_at
            .is_some_and(|due| now - due > MISSED_AFTER.as_millis() as i64);
        if trigger == Trigger::Due && missed && def.catch_up == CatchUp::Skip {
            info!(job = %job.id, "cron: run missed while down; skipped (catchUp: skip)");
            let why = "missed while the gateway was down (catchUp: skip)".to_string();
            let id = uuid::Uuid::now_v7().simple().to_string();
            self.record(&job, &id, "skipped", Some(why), 0, now, Some(now), "", None)
                .await;
            self.release(&job, next, false).await;
            return;
        }

        let mut message = def.message.clone();
        if let Some(hb) = &def.heartbeat {
            match self.heartbeat_message(&job, hb, now).await {
                Ok(m) => message = m,
                Err(why) => {
                    let id = uuid::Uuid::now_v7().simple().to_string();
                    self.record(&job, &id, "skipped", Some(why), 0, now, Some(now), "", None)
                        .await;
                    self.release(&job, next, false).await;
                    return;
                }
            }
        }
        let run_id = uuid::Uuid::now_v7().simple().to_string();
        // A heartbeat keeps one conversation; a job's runs each have their own.
        let session_key = match def.heartbeat {
            Some(_) => "heartbeat".to_string(),
            None => format!("cron:{}:run:{}", job.id, &run_id[20..]),
        };
        self.record(
            &job,
            &run_id,
            "running",
            None,
            0,
            now,
            None,
            &session_key,
            None,
        )
        .await;
        info!(job = %job.id, agent = %job.agent_id, session = %session_key, "cron: run started");

        // The lease is renewed while the run goes on, so nobody takes the job over.
        let renewing = CancellationToken::new();
        let renewer = tokio::spawn({
            let (store, clock, id, holder, stop) = (
                store.clone(),
                self.book.clock().clone(),
                job.id.clone(),
                self.holder.clone(),
                renewing.clone(),
            );
            async move {
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(LEASE / 3) => {
                            let until = clock.now_ms() + LEASE.as_millis() as i64;
                            if let Err(e) = store.renew(&id, &holder, until).await {
                                warn!(job = %id, error = %e, "cron: could not renew a lease");
                            }
                        }
                    }
                }
            }
        });

        let mut attempts = 0;
        let mut outcome = Err(String::new());
        while attempts < self.retry.attempts.max(1) {
            attempts += 1;
            outcome = self.attempt(&job, &message, &session_key).await;
            match &outcome {
                Ok(_) => break,
                Err(e) if attempts < self.retry.attempts => {
                    let wait = self.retry.delay(attempts);
                    warn!(job = %job.id, attempt = attempts, error = %e, retry_in_ms = wait.as_millis() as u64, "cron: run failed; retrying");
                    self.book.clock().sleep(wait).await;
                }
                Err(_) => {}
            }
        }
        let mut status = "ok";
        let outcome = match (outcome, &def.heartbeat) {
            (Ok(text), None) => self
                .deliver(&job, &def.deliver, &def.name, &text)
                .await
                .map(|_| text),
            (Ok(text), Some(hb)) => {
                status = self.heartbeat_answer(&job, hb, &text, now).await;
                Ok(text)
            }
            (Err(e), _) => Err(e),
        };
        renewing.cancel();
        let _ = renewer.await;

        let ended = self.book.clock().now_ms();
        match &outcome {
            Ok(text) => {
                info!(job = %job.id, attempts, duration_ms = ended - now, "cron: run ended");
                let output: String = text.chars().take(OUTPUT_CHARS).collect();
                self.record(
                    &job,
                    &run_id,
                    status,
                    None,
                    attempts,
                    now,
                    Some(ended),
                    &session_key,
                    Some(output),
                )
                .await;
            }
            Err(e) => {
                warn!(job = %job.id, attempts, error = %e, "cron: run failed");
                self.record(
                    &job,
                    &run_id,
                    "error",
                    Some(e.clone()),
                    attempts,
                    now,
                    Some(ended),
                    &session_key,
                    None,
                )
                .await;
            }
        }
        // A one-time job is done whatever the outcome (the log keeps what happened),
        // unless it was run by hand before its time.
        let done = schedule.is_one_time() && trigger == Trigger::Due;
        self.release(&job, next, done).await;
    }

    /// One run of the job's message in its session; the answer's text.
    async fn attempt(
        &self,
        job: &CronJob,
        message: &str,
        session_key: &str,
    ) -> Result<String, String> {
        let who = Requester {
            user: job.owner.as_deref(),
            admin: job.owner.is_none(),
        };
        // Access is checked at every run: a share revoked since the job was made ends it.
        let agent = self
            .runtime()
            .agent_for(who, &job.agent_id)
            .await
            .map_err(|e| e.to_string())?;
        let submitted = self
            .runtime()
            .submit(Submit {
                agent_id: &agent.id,
                session_key,
                user: job.owner.as_deref(),
                message,
                mode: QueueMode::Queue,
                origin: Origin::Cron,
                options: RunOptions {
                    prompt_mode: Some(PromptMode::Minimal),
                    ..RunOptions::default()
                },
            })
            .map_err(|e| e.to_string())?;
        let Submitted::Run(handle) = submitted else {
            return Err("the job's message is a command, not a request".into());
        };
        handle
            .outcome()
            .await
            .map(|out| out.text)
            .map_err(|e| e.to_string())
    }

    async fn deliver(
        &self,
        job: &CronJob,
        to: &Delivery,
        name: &str,
        text: &str,
    ) -> Result<(), String> {
        let Delivery::Session { session_key } = to else {
            return Ok(());
        };
        if text.trim().is_empty() {
            return Ok(());
        }
        let agent = self
            .runtime()
            .agent(&job.agent_id)
            .ok_or_else(|| format!("agent `{}` is gone", job.agent_id))?;
        let stored = self
            .runtime()
            .stored_key(&agent, job.owner.as_deref(), session_key);
        let label = if name.is_empty() {
            job.id.as_str()
        } else {
            name
        };
        self.deliver_stored(job, &stored, &format!("cron: {label}"), text)
            .await
            .map_err(|e| format!("delivery to session `{session_key}` failed: {e}"))?;
        self.post_to_chat(job, session_key, text).await
    }

    /// When `session_key` is a chat channel's, the text also goes to that chat: for the
    /// administrator's jobs (and the heartbeat), and for a user's own direct chat only,
    /// so a user's job cannot make the bot write to anyone else.
    async fn post_to_chat(
        &self,
        job: &CronJob,
        session_key: &str,
        text: &str,
    ) -> Result<(), String> {
        let Some((channel, scope, id)) = crate::runtime::channel_session(session_key) else {
            return Ok(());
        };
        let Some(sink) = self.runtime().chat_sink() else {
            return Ok(());
        };
        if let Some(owner) = job.owner.as_deref() {
            if scope != "direct" || owner != format!("{channel}:{id}") {
                warn!(job = %job.id, owner, to = %session_key, "security.channels: a user's job may post only to their own direct chat");
                return Err(format!(
                    "a job of `{owner}` may post only to its owner's own direct chat, not to `{session_key}`"
                ));
            }
        }
        sink.post(session_key, text)
            .await
            .map(drop)
            .map_err(|e| format!("posting to {channel} chat {id} failed: {e}"))
    }

    /// Appends `[label] text` to a session of the job's agent, by its stored key, in the
    /// session's queue.
    async fn deliver_stored(
        &self,
        job: &CronJob,
        stored_key: &str,
        label: &str,
        text: &str,
    ) -> Result<(), String> {
        let body = EntryBody::Message {
            message: Message::Assistant(AssistantMessage {
                content: vec![ContentBlock::Text {
                    text: format!("[{label}] {text}"),
                }],
                provider: "ferroclaw".into(),
                model: "cron".into(),
                usage: Usage::default(),
                stop_reason: StopReason::Stop,
                error_message: None,
                timestamp: ferroclaw_types::now_millis(),
            }),
        };
        self.runtime()
            .write_entries(&job.agent_id, stored_key, vec![body])
            .await
            .map_err(|e| e.to_string())
    }

    /// The heartbeat turn's message, or why there is none now.
    async fn heartbeat_message(
        &self,
        job: &CronJob,
        hb: &super::heartbeat::HeartbeatSpec,
        now: i64,
    ) -> Result<String, String> {
        if !super::heartbeat::active_at(&hb.active_hours, now)? {
            return Err("outside the active hours".into());
        }
        let agent = self
            .runtime()
            .agent(&job.agent_id)
            .ok_or_else(|| format!("agent `{}` is gone", job.agent_id))?;
        let workspace = agent.agent.settings().workspace.clone();
        let file = super::heartbeat::read_file(&workspace)
            .await
            .unwrap_or_default();
        let file = super::heartbeat::meaningful(&file).ok_or("HEARTBEAT.md has nothing to do")?;
        Ok(super::heartbeat::message(&file))
    }

    /// Delivers a heartbeat's answer unless it only acknowledges or was delivered in
    /// the last day; the run's status says which.
    async fn heartbeat_answer(
        &self,
        job: &CronJob,
        hb: &super::heartbeat::HeartbeatSpec,
        text: &str,
        now: i64,
    ) -> &'static str {
        if super::heartbeat::is_ack(text) || text.trim().is_empty() {
            return "ack";
        }
        let output: String = text.chars().take(OUTPUT_CHARS).collect();
        let recent = self
            .book
            .store()
            .runs(Some(&job.id), ferroclaw_store::RUNS_KEPT_PER_JOB)
            .await
            .unwrap_or_default();
        let repeated = recent.iter().any(|r| {
            r.status == "delivered"
                && r.output.as_deref() == Some(output.as_str())
                && now - r.started_at < super::heartbeat::DEDUP_WINDOW_MS
        });
        if repeated {
            return "duplicate";
        }
        if !hb.deliver_to_last {
            return "ok";
        }
        let sessions = match self.runtime().store().list(&job.agent_id).await {
            Ok(s) => s,
            Err(e) => {
                warn!(job = %job.id, error = %e, "heartbeat: could not find the last session");
                return "ok";
            }
        };
        let last = sessions
            .into_iter()
            .filter(|s| !s.key.starts_with("cron:") && s.key != "heartbeat")
            .max_by_key(|s| s.updated_at);
        let Some(last) = last else {
            return "ok";
        };
        match self.deliver_stored(job, &last.key, "heartbeat", text).await {
            Ok(()) => {
                if let Err(e) = self.post_to_chat(job, &last.key, text).await {
                    warn!(job = %job.id, to = %last.key, error = %e, "heartbeat: not posted to the chat");
                }
                "delivered"
            }
            Err(e) => {
                warn!(job = %job.id, to = %last.key, error = %e, "heartbeat: delivery failed");
                "ok"
            }
        }
    }

    async fn release(&self, job: &CronJob, next: Option<i64>, remove: bool) {
        if let Err(e) = self
            .book
            .store()
            .release(&job.id, &self.holder, job.updated_at, next, remove)
            .await
        {
            // Kept and written at the next ticks: left to its lease, the job would run
            // again once the lease ran out.
            warn!(job = %job.id, error = %e, "cron: could not release a job; kept to write when the store answers");
            self.keep(Unwritten::Release {
                job_id: job.id.clone(),
                claimed_version: job.updated_at,
                next,
                remove,
            });
        }
    }

    fn keep(&self, end: Unwritten) {
        let mut kept = self.unwritten.lock().unwrap_or_else(|p| p.into_inner());
        let (next, list) = &mut *kept;
        *next += 1;
        list.push_back((*next, end));
        if list.len() > UNWRITTEN_MAX {
            warn!("cron: too many run ends kept while the store is away; the oldest is dropped");
            list.pop_front();
        }
    }

    fn awaits_release(&self, job_id: &str) -> bool {
        let kept = self.unwritten.lock().unwrap_or_else(|p| p.into_inner());
        kept.1
            .iter()
            .any(|(_, u)| matches!(u, Unwritten::Release { job_id: id, .. } if id == job_id))
    }

    /// Writes the run ends the store missed, oldest first, each removed once written;
    /// stops at the first the store still refuses. The caller holds `writing`.
    async fn write_unwritten(&self) {
        let store = self.book.store();
        loop {
            let first = {
                let kept = self.unwritten.lock().unwrap_or_else(|p| p.into_inner());
                kept.1.front().cloned()
            };
            let Some((n, end)) = first else {
                return;
            };
            let written = match &end {
                // (A job deleted meanwhile took its log with it: its run is not logged
                // after it, where nothing would ever remove it.)
                Unwritten::Run(run) => match store.job(&run.job_id).await {
                    Ok(Some(_)) => store.put_run(run).await,
                    Ok(None) => Ok(()),
                    Err(e) => Err(e),
                },
                Unwritten::Release {
                    job_id,
                    claimed_version,
                    next,
                    remove,
                } => {
                    store
                        .release(job_id, &self.holder, *claimed_version, *next, *remove)
                        .await
                }
            };
            if let Err(e) = written {
                warn!(error = %e, "cron: the store still refuses a kept run end");
                return;
            }
            let mut kept = self.unwritten.lock().unwrap_or_else(|p| p.into_inner());
            kept.1.retain(|(m, _)| *m != n);
            if kept.1.is_empty() {
                info!("cron: run ends kept while the store was away are written");
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn record(
        &self,
        job: &CronJob,
        run_id: &str,
        status: &str,
        error: Option<String>,
        attempts: u32,
        started: i64,
        ended: Option<i64>,
        session_key: &str,
        output: Option<String>,
    ) {
        let run = CronRun {
            id: run_id.to_string(),
            job_id: job.id.clone(),
            started_at: started,
            ended_at: ended,
            status: status.into(),
            error,
            attempts,
            session_key: session_key.to_string(),
            output,
            holder: Some(self.holder.clone()),
        };
        if let Err(e) = self.book.store().put_run(&run).await {
            warn!(job = %job.id, error = %e, "cron: could not log a run");
            // A run's end is kept to log later; its start is replaced by its end anyway.
            if run.ended_at.is_some() {
                self.keep(Unwritten::Run(run));
            }
        }
    }
}
