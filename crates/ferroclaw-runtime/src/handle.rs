//! What a submitter holds once the runtime accepted its message: the run's id (made at
//! submit time), the run's events as they happen, its outcome, and a way to abort it.

use std::sync::Arc;

use ferroclaw_agent::{EventSink, RunError, RunOutput};
use ferroclaw_types::RunEvent;
use tokio::sync::{mpsc, oneshot};

use crate::scheduler::{Scheduler, SharedOutcome, SubmitError};

pub(crate) type OutcomeRx = oneshot::Receiver<Result<SharedOutcome, SubmitError>>;

/// One submitted message on its way through the runtime.
///
/// When several messages are merged into one run (followups, a debounce window), each
/// submitter keeps its own handle; the events and the outcome are the merged run's, and
/// the events carry the id of the first message's handle.
pub struct RunHandle {
    pub id: String,
    pub events: mpsc::UnboundedReceiver<RunEvent>,
    outcome: OutcomeRx,
    aborter: Aborter,
}

/// Aborts one run, from anywhere (a surface watching its client, a tool's cancellation).
#[derive(Clone)]
pub struct Aborter {
    scheduler: Arc<Scheduler>,
    id: String,
}

impl Aborter {
    /// Aborts the run if it is running, or takes the message out of its queue if it is
    /// still waiting. `false` when it has already ended.
    pub fn abort(&self) -> bool {
        self.scheduler.abort_run(&self.id)
    }
}

/// Why a handle ended without an output.
#[derive(Debug)]
pub enum RunFailure {
    /// The runtime never ran the message (queue full, dropped, cancelled, shutting down).
    Submit(SubmitError),
    /// The run ended with an error (shared by every message it carried).
    Run(SharedOutcome),
}

impl RunFailure {
    pub fn run_error(&self) -> Option<&RunError> {
        match self {
            RunFailure::Run(shared) => shared.as_ref().as_ref().err(),
            RunFailure::Submit(_) => None,
        }
    }

    /// Stopped on purpose (abort, `/stop`, an interrupt), not a fault.
    pub fn is_aborted(&self) -> bool {
        matches!(self.run_error(), Some(RunError::Aborted))
    }
}

impl std::fmt::Display for RunFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunFailure::Submit(e) => e.fmt(f),
            RunFailure::Run(shared) => match shared.as_ref() {
                Err(e) => e.fmt(f),
                Ok(_) => f.write_str("run ended"),
            },
        }
    }
}

impl RunHandle {
    pub(crate) fn new(
        id: String,
        events: mpsc::UnboundedReceiver<RunEvent>,
        outcome: OutcomeRx,
        scheduler: Arc<Scheduler>,
    ) -> Self {
        let aborter = Aborter {
            scheduler,
            id: id.clone(),
        };
        RunHandle {
            id,
            events,
            outcome,
            aborter,
        }
    }

    pub fn abort(&self) -> bool {
        self.aborter.abort()
    }

    pub fn aborter(&self) -> Aborter {
        self.aborter.clone()
    }

    /// Waits for the run's end, handing every event to `on_event` in order; the last
    /// events are delivered before this returns.
    pub async fn finish(self, mut on_event: impl FnMut(RunEvent)) -> Result<RunOutput, RunFailure> {
        let RunHandle {
            mut events,
            mut outcome,
            ..
        } = self;
        let result = loop {
            tokio::select! {
                biased;
                ev = events.recv() => match ev {
                    Some(ev) => on_event(ev),
                    None => break (&mut outcome).await,
                },
                r = &mut outcome => break r,
            }
        };
        // Every event is sent before the outcome, so what is buffered now is the rest.
        while let Ok(ev) = events.try_recv() {
            on_event(ev);
        }
        interpret(result)
    }

    /// The outcome alone (events are dropped).
    pub async fn outcome(self) -> Result<RunOutput, RunFailure> {
        self.finish(|_| {}).await
    }
}

fn interpret(
    result: Result<Result<SharedOutcome, SubmitError>, oneshot::error::RecvError>,
) -> Result<RunOutput, RunFailure> {
    match result {
        // The scheduler dropped the entry without answering: it is going away.
        Err(_) => Err(RunFailure::Submit(SubmitError::ShuttingDown)),
        Ok(Err(e)) => Err(RunFailure::Submit(e)),
        Ok(Ok(shared)) => match shared.as_ref() {
            Ok(out) => Ok(out.clone()),
            Err(_) => Err(RunFailure::Run(shared)),
        },
    }
}

/// The sink a submission's events go to: its handle's channel.
pub(crate) struct ChannelSink(pub mpsc::UnboundedSender<RunEvent>);

impl EventSink for ChannelSink {
    fn emit(&self, event: RunEvent) {
        // A dropped receiver means nobody watches the events; the run goes on.
        let _ = self.0.send(event);
    }
}
