//! Lanes and per-session queues: the runtime's door (`crate::door`) submits every run
//! here, whoever starts it.
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
//! - Only `mergeable` submissions (messages people type) join a debounce window or a
//!   followup batch; tool-started runs and maintenance writes always run on their own.
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
    /// Concurrency per lane (defaults: main 32, subagent 8, delegate 4, cron 2, as
    /// `gateway.lanes` in the configuration); `FERROCLAW_LANE_<NAME>` overrides.
    pub lanes: Vec<(Lane, usize)>,
    /// Messages waiting per session before the drop policy applies (10).
    pub queue_capacity: usize,
    pub drop_policy: DropPolicy,
    /// Quiet period merging messages to an idle session; ZERO (the default) disables.
    pub debounce: std::time::Duration,
    /// Runs at once in a direct session (1) and in a group session (3).
    pub direct_concurrency: usize,
    pub group_concurrency: usize,
}

impl Default for SchedulerConfig {
    /// The configuration's defaults (lane sizes, queue capacity, no debounce), taken from
    /// the config crate so each number is written once.
    fn default() -> Self {
        crate::bootstrap::scheduler_config(&ferroclaw_config::settings::SchedulerSettings::default())
    }
}

impl Lane {
    pub const ALL: [Lane; 4] = [Lane::Main, Lane::Subagent, Lane::Delegate, Lane::Cron];
}

impl SchedulerConfig {
    /// The lane's concurrency: the last entry for it in `lanes`, else the default's.
    pub fn lane_limit(&self, lane: Lane) -> usize {
        let find = |lanes: &[(Lane, usize)]| {
            lanes
                .iter()
                .rev()
                .find(|(l, _)| *l == lane)
                .map(|(_, n)| *n)
        };
        find(&self.lanes)
            .or_else(|| find(&SchedulerConfig::default().lanes))
            .unwrap_or(1)
    }
}

/// The work a run does: the runtime's door passes a closure that calls the agent with
/// the run id and the (possibly merged) message. Taking a closure keeps the scheduler
/// testable without an LLM.
pub type RunFn = Arc<
    dyn Fn(
            String,
            String,
            Arc<dyn EventSink>,
            CancellationToken,
        ) -> BoxFuture<'static, Result<RunOutput, RunError>>
        + Send
        + Sync,
>;

pub struct Submission {
    /// Made by the submitter; a merged run carries the id of its first message.
    pub run_id: String,
    pub lane: Lane,
    /// Unique per agent+session, e.g. `main:alice` — the queue key.
    pub session_key: String,
    pub group: bool,
    pub message: String,
    pub mode: QueueMode,
    /// Whether the message may join a debounce window or a followup batch.
    pub mergeable: bool,
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

    /// Aborts the run carrying the message with this id if it is running, or takes the
    /// message out of its queue (its submitter gets `Cancelled`) if it is waiting.
    pub fn abort_run(&self, run_id: &str) -> bool {
        self.inner.abort_run(run_id)
    }

    /// Whether a message with this id is queued or running in the session.
    pub fn run_in_session(&self, session_key: &str, run_id: &str) -> bool {
        self.inner.run_in_session(session_key, run_id)
    }

    /// Permits free in a lane now (a hint: it can change as soon as it is read).
    pub fn lane_available(&self, lane: Lane) -> usize {
        self.inner.lane_available(lane)
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

    /// Stops accepting; aborts still-running turns after `grace`; resolves when all ended.
    /// Queued messages (including runs still waiting for their lane) get `ShuttingDown`.
    pub async fn shutdown(&self, grace: Duration) {
        self.inner.shutdown(grace).await
    }
}
