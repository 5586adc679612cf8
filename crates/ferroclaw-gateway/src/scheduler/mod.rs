//! Lanes and per-session queues. CONTRACT FILE: the HTTP/WS surfaces are written against
//! the public items below; the scheduler owner fills in the bodies (and may add items).
//!
//! Every run enters a lane (`main`, `subagent`, `delegate`, `cron`: each a concurrency
//! limit) and its session's queue (one active run per direct session, 3 per group
//! session), so two runs never interleave in one transcript.

use std::sync::Arc;

use ferroclaw_agent::{EventSink, RunError, RunOutput};
use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

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
    pub queue_capacity: usize,            // 10
    pub drop_policy: DropPolicy,          // Old
    pub debounce: std::time::Duration,    // 800 ms; ZERO disables
    pub direct_concurrency: usize,        // 1
    pub group_concurrency: usize,         // 3
}

/// The work a run does: the gateway passes a closure that calls `Agent::run` with the
/// (possibly merged) message. Taking a closure keeps the scheduler testable without an LLM.
pub type RunFn = Arc<
    dyn Fn(String, Arc<dyn EventSink>, CancellationToken) -> BoxFuture<'static, Result<RunOutput, RunError>>
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

#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error("session queue is full")]
    QueueFull,
    #[error("dropped from a full session queue")]
    Dropped,
    #[error("cancelled by /stopall")]
    Cancelled,
    #[error("the gateway is shutting down")]
    ShuttingDown,
}

/// The outcome every merged submitter shares.
pub type SharedOutcome = Arc<Result<RunOutput, RunError>>;

pub struct Ticket {
    /// Resolves when the run that carried this message ends.
    pub outcome: tokio::sync::oneshot::Receiver<Result<SharedOutcome, SubmitError>>,
}

pub struct Scheduler {/* owner's state */}

impl Scheduler {
    pub fn new(_cfg: SchedulerConfig) -> Arc<Self> {
        unimplemented!("scheduler owner")
    }

    /// Queues a message; never blocks on the run itself.
    pub fn submit(&self, _s: Submission) -> Result<Ticket, SubmitError> {
        unimplemented!("scheduler owner")
    }

    /// `/stop`: aborts the oldest running turn of the session. Returns how many were aborted.
    pub fn stop(&self, _session_key: &str) -> usize {
        unimplemented!("scheduler owner")
    }

    /// `/stopall`: aborts every running turn of the session and drains its queue
    /// (queued submitters get `SubmitError::Cancelled`), bypassing the debounce.
    pub fn stop_all(&self, _session_key: &str) -> usize {
        unimplemented!("scheduler owner")
    }

    /// Aborts the run with this id if it is active (for `chat.abort {runId}`).
    pub fn abort_run(&self, _run_id: &str) -> bool {
        unimplemented!("scheduler owner")
    }

    /// Number of runs executing now, and queued messages, for /metrics and status.
    pub fn active_runs(&self) -> usize {
        unimplemented!("scheduler owner")
    }
    pub fn queued(&self) -> usize {
        unimplemented!("scheduler owner")
    }

    /// Stops accepting; aborts still-running turns after `grace`; resolves when all ended.
    pub async fn shutdown(&self, _grace: std::time::Duration) {
        unimplemented!("scheduler owner")
    }
}
