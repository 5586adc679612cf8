//! The one door every run goes through: a run becomes a scheduler submission under its
//! session's queue key, and when the scheduler starts it, it first takes the session's
//! lease in the store (so another process on the same home cannot write the session at
//! the same time), then runs the agent. Maintenance writes take the same door.

use std::future::Future;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use ferroclaw_agent::{Agent, EventSink, RunError, RunOptions, RunOutput, RunRequest};
use ferroclaw_store::SessionStore;
use ferroclaw_types::{RunEvent, StopReason, Usage};
use futures_util::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::handle::{ChannelSink, RunFailure, RunHandle};
use crate::origin::Origin;
use crate::scheduler::{QueueMode, RunFn, Scheduler, Submission, SubmitError};

/// A run as its observers see it: whose, which session, from where, under which run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunInfo {
    pub run_id: String,
    pub agent_id: String,
    /// The session key as stored (scoped to the user on a per-user agent).
    pub session_key: String,
    pub user: Option<String>,
    pub origin: Origin,
    /// The run whose tool started this one (a subagent, `sessions_send`).
    pub parent_run_id: Option<String>,
    /// The message the run answers (several merged into one when they queued).
    pub message: String,
}

/// Told about every run, whoever started it (the gateway's metrics, the trace
/// collector, the record of stalled runs). Called inline from the run: must not block.
pub trait RunObserver: Send + Sync {
    fn run_started(&self, _run: &RunInfo) {}
    fn run_finished(
        &self,
        _run: &RunInfo,
        _result: &Result<RunOutput, RunError>,
        _elapsed: Duration,
    ) {
    }
    fn event(&self, _run: &RunInfo, _event: &RunEvent) {}
}

/// The scheduler's queue key: sessions of different agents never share a queue.
pub fn queue_key(agent_id: &str, stored_key: &str) -> String {
    format!("{agent_id}:{stored_key}")
}

/// What the runtime and the session tools share: the scheduler and the store.
pub(crate) struct Core {
    pub scheduler: Arc<Scheduler>,
    pub store: Arc<dyn SessionStore>,
    /// Each run takes a snapshot at its start (the list only grows at startup).
    observers: RwLock<Vec<Arc<dyn RunObserver>>>,
    /// Every run's events, for the watchers of its session.
    pub watch: crate::watch::Watch,
    /// The runs the stall watchdog cut short lately.
    pub stalls: Arc<crate::stalls::Stalls>,
}

/// One agent run to submit.
pub(crate) struct RunSpec {
    pub agent: Arc<Agent>,
    /// The key as the user named it (the agent scopes it to the user).
    pub session_key: String,
    pub user: Option<String>,
    pub message: String,
    pub mode: QueueMode,
    pub origin: Origin,
    pub options: RunOptions,
    /// The run whose tool submits this one.
    pub parent_run_id: Option<String>,
}

impl Core {
    pub fn new(scheduler: Arc<Scheduler>, store: Arc<dyn SessionStore>) -> Arc<Self> {
        let stalls = Arc::new(crate::stalls::Stalls::default());
        Arc::new(Core {
            scheduler,
            store,
            observers: RwLock::new(vec![stalls.clone() as Arc<dyn RunObserver>]),
            watch: crate::watch::Watch::new(),
            stalls,
        })
    }

    pub fn add_observer(&self, observer: Arc<dyn RunObserver>) {
        self.observers
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(observer);
    }

    fn observers(&self) -> Vec<Arc<dyn RunObserver>> {
        self.observers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Queues an agent run; never waits for it.
    pub fn submit_run(&self, spec: RunSpec) -> Result<RunHandle, SubmitError> {
        let agent_id = spec.agent.settings().id.clone();
        let stored = ferroclaw_agent::user_scope::stored_key(
            spec.agent.settings().per_user_workspace,
            spec.user.as_deref(),
            &spec.session_key,
        );
        let origin = spec.origin;
        let run = agent_run(AgentRun {
            agent: spec.agent,
            store: self.store.clone(),
            observers: self.observers(),
            watch: self.watch.clone(),
            stored_key: stored.clone(),
            session_key: spec.session_key,
            user: spec.user,
            origin,
            options: spec.options,
            parent_run_id: spec.parent_run_id,
            // The submitter's span (an HTTP or WebSocket request, a parent run's tool
            // call): the run's span hangs under it in exported traces.
            submitted_in: tracing::Span::current(),
        });
        self.enqueue(&agent_id, &stored, spec.message, spec.mode, origin, run)
    }

    /// Runs `op` on the session `stored_key` of `agent_id` in its queue, as a run of
    /// its own: never beside a turn, never merged with a message.
    pub fn submit_op<T, F, Fut>(
        &self,
        agent_id: &str,
        stored_key: &str,
        op: F,
    ) -> Result<impl Future<Output = Result<T, RunFailure>> + Send + 'static, SubmitError>
    where
        T: Send + 'static,
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, RunError>> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<T>();
        let slot = Arc::new(Mutex::new(Some((op, tx))));
        let store = self.store.clone();
        let (agent, key) = (agent_id.to_string(), stored_key.to_string());
        let run: RunFn = Arc::new(move |run_id, _message, _sink, cancel| {
            let taken = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
            let (store, agent, key) = (store.clone(), agent.clone(), key.clone());
            Box::pin(async move {
                let Some((op, tx)) = taken else {
                    return Err(RunError::Aborted);
                };
                let _lease = lease(&store, &agent, &key, &cancel).await?;
                let value = op().await?;
                let _ = tx.send(value);
                Ok(quiet_output(run_id))
            })
        });
        let handle = self.enqueue(
            agent_id,
            stored_key,
            String::new(),
            QueueMode::Queue,
            Origin::Maintenance,
            run,
        )?;
        Ok(async move {
            handle.outcome().await?;
            rx.await.map_err(|_| {
                RunFailure::Submit(SubmitError::Failed(
                    "the operation ended without a result".into(),
                ))
            })
        })
    }

    /// Appends transcript entries, in order, through the session's queue, so they never
    /// land in the middle of a turn.
    pub async fn write_entries(
        &self,
        agent_id: &str,
        stored_key: &str,
        bodies: Vec<ferroclaw_types::EntryBody>,
    ) -> Result<(), RunFailure> {
        let store = self.store.clone();
        let (agent, key) = (agent_id.to_string(), stored_key.to_string());
        let op = self
            .submit_op(agent_id, stored_key, move || async move {
                let mut log = store.open(&agent, &key).await?;
                for body in bodies {
                    log.append(body).await?;
                }
                log.flush().await?;
                Ok(())
            })
            .map_err(RunFailure::Submit)?;
        op.await
    }

    fn enqueue(
        &self,
        agent_id: &str,
        stored_key: &str,
        message: String,
        mode: QueueMode,
        origin: Origin,
        run: RunFn,
    ) -> Result<RunHandle, SubmitError> {
        let id = uuid::Uuid::now_v7().to_string();
        let (tx, events) = mpsc::unbounded_channel();
        let outcome = self.scheduler.submit(Submission {
            run_id: id.clone(),
            lane: origin.lane(),
            session_key: queue_key(agent_id, stored_key),
            group: false,
            message,
            mode,
            mergeable: origin.mergeable(),
            events: Arc::new(ChannelSink(tx)),
            run,
        })?;
        Ok(RunHandle::new(
            id,
            events,
            outcome.outcome,
            self.scheduler.clone(),
        ))
    }
}

/// Everything an agent run closure holds.
struct AgentRun {
    agent: Arc<Agent>,
    store: Arc<dyn SessionStore>,
    observers: Vec<Arc<dyn RunObserver>>,
    watch: crate::watch::Watch,
    stored_key: String,
    session_key: String,
    user: Option<String>,
    origin: Origin,
    options: RunOptions,
    parent_run_id: Option<String>,
    submitted_in: tracing::Span,
}

/// The closure the scheduler calls for an agent run: lease, observe, run.
fn agent_run(r: AgentRun) -> RunFn {
    let r = Arc::new(r);
    Arc::new(move |run_id, message, sink, cancel| {
        let span = tracing::info_span!(
            parent: &r.submitted_in,
            "agent.run",
            otel.name = %format_args!("agent {}", r.agent.settings().id),
            run.id = %run_id,
            agent.id = %r.agent.settings().id,
            session.key = %r.stored_key,
            origin = r.origin.as_str(),
            run.status = tracing::field::Empty,
        );
        let r = r.clone();
        let fut: BoxFuture<'static, Result<RunOutput, RunError>> = Box::pin(async move {
            let agent_id = r.agent.settings().id.clone();
            let _lease = lease(&r.store, &agent_id, &r.stored_key, &cancel).await?;
            let started = Instant::now();
            let info = Arc::new(RunInfo {
                run_id: run_id.clone(),
                agent_id: agent_id.clone(),
                session_key: r.stored_key.clone(),
                user: r.user.clone(),
                origin: r.origin,
                parent_run_id: r.parent_run_id.clone(),
                message: message.clone(),
            });
            for o in &r.observers {
                o.run_started(&info);
            }
            let sink: Arc<dyn EventSink> = Arc::new(crate::watch::WatchedSink {
                inner: Arc::new(ObservedSink {
                    inner: sink,
                    observers: r.observers.clone(),
                    run: info.clone(),
                }),
                watch: r.watch.clone(),
                agent_id: agent_id.clone(),
                stored_key: r.stored_key.clone(),
            });
            let req = RunRequest {
                session_key: r.session_key.clone(),
                message,
                options: r.options.clone(),
            };
            let result = r
                .agent
                .run_with_id(run_id, req, r.user.as_deref(), sink, cancel)
                .await;
            let elapsed = started.elapsed();
            for o in &r.observers {
                o.run_finished(&info, &result, elapsed);
            }
            let status = match &result {
                Ok(_) => "ok",
                Err(e) => e.kind(),
            };
            tracing::Span::current().record("run.status", status);
            result
        });
        Box::pin(fut.instrument(span)) as BoxFuture<'static, Result<RunOutput, RunError>>
    })
}

/// The session's lease, or `Aborted` if the run is cancelled while waiting for it.
async fn lease(
    store: &Arc<dyn SessionStore>,
    agent_id: &str,
    stored_key: &str,
    cancel: &CancellationToken,
) -> Result<ferroclaw_store::SessionLease, RunError> {
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(RunError::Aborted),
        lease = store.lease(agent_id, stored_key) => lease.map_err(RunError::Store),
    }
}

fn quiet_output(run_id: String) -> RunOutput {
    RunOutput {
        run_id,
        session_id: String::new(),
        text: String::new(),
        reasoning: String::new(),
        silent: true,
        stop_reason: StopReason::Stop,
        usage: Usage::default(),
        iterations: 0,
        provider: String::new(),
        model: String::new(),
    }
}

struct ObservedSink {
    inner: Arc<dyn EventSink>,
    observers: Vec<Arc<dyn RunObserver>>,
    run: Arc<RunInfo>,
}

impl EventSink for ObservedSink {
    fn emit(&self, event: RunEvent) {
        for o in &self.observers {
            o.event(&self.run, &event);
        }
        self.inner.emit(event);
    }
}
