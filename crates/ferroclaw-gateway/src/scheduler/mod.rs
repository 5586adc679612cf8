//! Lanes and per-session queues. CONTRACT FILE: the HTTP/WS surfaces are written against
//! the public items below; the scheduler owner fills in the bodies (and may add items).
//!
//! Every run enters a lane (`main`, `subagent`, `delegate`, `cron`: each a concurrency
//! limit) and its session's queue (one active run per direct session, 3 per group
//! session), so two runs never interleave in one transcript.
//!
//! Semantics in brief (details on each item):
//! - A run holds its lane permit only while executing; queued messages hold nothing.
//! - Debounce: a message that would start a run at once opens a window instead; every
//!   message arriving before the window closes joins it (and restarts it), and the lot
//!   becomes one run, messages joined with blank lines.
//! - `Followup`: when a slot frees up, a followup at the head of the queue is merged with
//!   the followups queued right behind it into one run.
//! - `Interrupt`: cancels the session's active runs and queues the message at the front;
//!   it starts as soon as the aborted runs have returned (never alongside them in a
//!   direct session, so two runs never interleave in one transcript).
//! - A merged run uses the lane and the `RunFn` of its first message (all messages of a
//!   session key target the same agent session).

mod clock;
mod engine;
mod session;

use std::sync::Arc;
use std::time::Duration;

use ferroclaw_agent::{EventSink, RunError, RunOutput};
use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

pub use clock::{Clock, TokioClock};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lane {
    Main,
    Subagent,
    Delegate,
    Cron,
}

/// What to do with a message that arrives while its session is busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueMode {
    /// FIFO: runs after the active one.
    #[default]
    Queue,
    /// Merged with other queued messages into the next turn.
    Followup,
    /// Aborts the active run and starts this one.
    Interrupt,
}

/// Which queued message is dropped when a session queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DropPolicy {
    /// Drop the oldest queued message (its submitter gets `SubmitError::Dropped`).
    #[default]
    Old,
    /// Refuse the new message.
    New,
}

#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// Concurrency per lane: main 4, subagent 8, delegate 4, cron 2 by default;
    /// `FERROCLAW_LANE_<NAME>` overrides (read by the caller, not here).
    pub lanes: Vec<(Lane, usize)>,
    pub queue_capacity: usize,         // 10
    pub drop_policy: DropPolicy,       // Old
    pub debounce: std::time::Duration, // 800 ms; ZERO disables
    pub direct_concurrency: usize,     // 1
    pub group_concurrency: usize,      // 3
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            lanes: vec![
                (Lane::Main, 32),
                (Lane::Subagent, 8),
                (Lane::Delegate, 4),
                (Lane::Cron, 2),
            ],
            queue_capacity: 10,
            drop_policy: DropPolicy::Old,
            debounce: Duration::from_millis(800),
            direct_concurrency: 1,
            group_concurrency: 3,
        }
    }
}

impl Lane {
    pub const ALL: [Lane; 4] = [Lane::Main, Lane::Subagent, Lane::Delegate, Lane::Cron];

    /// The suffix of the lane's `FERROCLAW_LANE_<NAME>` variable.
    pub fn env_name(self) -> &'static str {
        match self {
            Lane::Main => "MAIN",
            Lane::Subagent => "SUBAGENT",
            Lane::Delegate => "DELEGATE",
            Lane::Cron => "CRON",
        }
    }

    fn default_limit(self) -> usize {
        match self {
            Lane::Main | Lane::Delegate => 4,
            Lane::Subagent => 8,
            Lane::Cron => 2,
        }
    }
}

impl SchedulerConfig {
    /// The defaults with `FERROCLAW_LANE_<NAME>` applied (`env` is usually
    /// `&|k| std::env::var(k).ok()`; taking a function keeps tests off the process env).
    pub fn from_env_overrides(env: &dyn Fn(&str) -> Option<String>) -> Self {
        Self::default().with_env_overrides(env)
    }

    /// Applies `FERROCLAW_LANE_<NAME>` (a positive integer) to this configuration;
    /// unparsable or zero values are ignored with a warning.
    pub fn with_env_overrides(mut self, env: &dyn Fn(&str) -> Option<String>) -> Self {
        for lane in Lane::ALL {
            let var = format!("FERROCLAW_LANE_{}", lane.env_name());
            let Some(raw) = env(&var) else { continue };
            match raw.trim().parse::<usize>() {
                Ok(n) if n > 0 => {
                    self.lanes.retain(|(l, _)| *l != lane);
                    self.lanes.push((lane, n));
                }
                _ => tracing::warn!(%var, value = %raw, "ignoring invalid lane concurrency"),
            }
        }
        self
    }

    /// The lane's concurrency: the last entry for it in `lanes`, else its default.
    pub fn lane_limit(&self, lane: Lane) -> usize {
        self.lanes
            .iter()
            .rev()
            .find(|(l, _)| *l == lane)
            .map_or_else(|| lane.default_limit(), |(_, n)| *n)
    }
}

/// The work a run does: the gateway passes a closure that calls `Agent::run` with the
/// (possibly merged) message. Taking a closure keeps the scheduler testable without an LLM.
pub type RunFn = Arc<
    dyn Fn(
            String,
            Arc<dyn EventSink>,
            CancellationToken,
        ) -> BoxFuture<'static, Result<RunOutput, RunError>>
        + Send
        + Sync,
>;

pub struct Submission {
    pub lane: Lane,
    /// Unique per agent+session, e.g. `main:alice` — the queue key.
    pub session_key: String,
    pub group: bool,
    pub message: String,
    pub mode: QueueMode,
    /// Receives this submission's run events (fan-out when messages were merged).
    pub events: Arc<dyn EventSink>,
    pub run: RunFn,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum SubmitError {
    #[error("session queue is full")]
    QueueFull,
    #[error("dropped from a full session queue")]
    Dropped,
    #[error("cancelled by /stopall")]
    Cancelled,
    #[error("the gateway is shutting down")]
    ShuttingDown,
    /// The run could not produce an outcome (it panicked); the session keeps going.
    #[error("run failed: {0}")]
    Failed(String),
}

/// The outcome every merged submitter shares.
pub type SharedOutcome = Arc<Result<RunOutput, RunError>>;

pub struct Ticket {
    /// Resolves when the run that carried this message ends.
    pub outcome: tokio::sync::oneshot::Receiver<Result<SharedOutcome, SubmitError>>,
}

pub struct Scheduler {
    inner: Arc<engine::Inner>,
}

impl Scheduler {
    pub fn new(cfg: SchedulerConfig) -> Arc<Self> {
        Self::with_clock(cfg, Arc::new(TokioClock))
    }

    /// Like `new`, with the time source for debounce windows and shutdown grace.
    pub fn with_clock(cfg: SchedulerConfig, clock: Arc<dyn Clock>) -> Arc<Self> {
        Arc::new(Scheduler {
            inner: Arc::new(engine::Inner::new(cfg, clock)),
        })
    }

    pub fn config(&self) -> &SchedulerConfig {
        &self.inner.cfg
    }

    /// Queues a message; never blocks on the run itself. Must be called from within a
    /// tokio runtime (runs and timers are spawned onto it), else `Failed`.
    pub fn submit(&self, s: Submission) -> Result<Ticket, SubmitError> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(SubmitError::Failed(
                "submit called outside a tokio runtime".into(),
            ));
        }
        let (tx, outcome) = tokio::sync::oneshot::channel();
        self.inner.submit(s, tx)?;
        Ok(Ticket { outcome })
    }

    /// `/stop`: aborts the oldest running turn of the session. Returns how many were aborted.
    /// A run already told to stop is skipped, so repeating `/stop` reaches the next one.
    pub fn stop(&self, session_key: &str) -> usize {
        self.inner.stop(session_key)
    }

    /// `/stopall`: aborts every running turn of the session and drains its queue
    /// (queued submitters get `SubmitError::Cancelled`), bypassing the debounce.
    /// Returns how many running turns were aborted (like `stop`; drained messages are
    /// not counted).
    pub fn stop_all(&self, session_key: &str) -> usize {
        self.inner.stop_all(session_key)
    }

    /// Aborts the run with this id if it is active (for `chat.abort {runId}`).
    /// The id is known once the run has emitted its first event.
    pub fn abort_run(&self, run_id: &str) -> bool {
        self.inner.abort_run(run_id)
    }

    /// Number of runs executing now, and queued messages, for /metrics and status.
    /// A dispatched run still waiting for its lane counts its messages as queued.
    pub fn active_runs(&self) -> usize {
        self.inner.active_runs()
    }
    pub fn queued(&self) -> usize {
        self.inner.queued()
    }

    /// Whether the session has a run active or messages waiting (debounce included).
    pub fn session_busy(&self, session_key: &str) -> bool {
        self.inner.session_busy(session_key)
    }

    /// The agent run ids of the session's active runs (those that emitted an event yet).
    pub fn active_run_ids(&self, session_key: &str) -> Vec<String> {
        self.inner.active_run_ids(session_key)
    }

    /// Stops accepting; aborts still-running turns after `grace`; resolves when all ended.
    /// Queued messages (including runs still waiting for their lane) get `ShuttingDown`.
    pub async fn shutdown(&self, grace: Duration) {
        self.inner.shutdown(grace).await
    }
}
