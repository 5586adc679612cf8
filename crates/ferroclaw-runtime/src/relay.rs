//! Stops, aborts and directory changes across gateway instances on one shared storage: a `/stop` or
//! `chat.abort` handled here is also published, and what the other instances publish
//! is applied to this one's runs (at most one instance runs a session at a time, under
//! its lease, so exactly one of them finds the run).

use std::sync::Arc;

use ferroclaw_store::{SessionStore, Signal, SignalBus};
use tokio::sync::broadcast::error::RecvError;

use crate::door::queue_key;
use crate::scheduler::Scheduler;
use crate::tenants::Tenants;

/// Subscribes this process's scheduler to the other instances' signals; `None` when the
/// store is not shared (or there is no async runtime to listen on).
pub(crate) fn start(
    store: &dyn SessionStore,
    scheduler: Arc<Scheduler>,
    tenants: Option<Arc<Tenants>>,
) -> Option<Arc<dyn SignalBus>> {
    let bus = store.signals()?;
    let mut rx = bus.subscribe();
    tokio::spawn(async move {
        loop {
            match rx.recv().await {
                Ok(Signal::DirectoryChanged { agent }) => {
                    if let Some(t) = &tenants {
                        crate::runtime::Runtime::apply_directory_change(t, agent.as_deref());
                    }
                }
                Ok(signal) => apply(&scheduler, &signal),
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "fell behind the other instances' signals")
                }
                Err(RecvError::Closed) => return,
            }
        }
    });
    Some(bus)
}

fn apply(scheduler: &Scheduler, signal: &Signal) {
    let n = match signal {
        Signal::Stop { agent_id, key } => scheduler.stop(&queue_key(agent_id, key)),
        Signal::StopAll { agent_id, key } => scheduler.stop_all(&queue_key(agent_id, key)),
        Signal::Abort {
            agent_id,
            key,
            run_id,
        } => {
            let qkey = queue_key(agent_id, key);
            usize::from(scheduler.run_in_session(&qkey, run_id) && scheduler.abort_run(run_id))
        }
        Signal::DirectoryChanged { .. } => 0,
    };
    if n > 0 {
        tracing::info!(
            ?signal,
            stopped = n,
            "stopped runs at another instance's request"
        );
    }
}

/// Tells the other instances, without making the caller wait for the database.
pub(crate) fn publish(bus: Option<&Arc<dyn SignalBus>>, signal: Signal) {
    let Some(bus) = bus.cloned() else {
        return;
    };
    tokio::spawn(async move {
        if let Err(e) = bus.publish(&signal).await {
            tracing::warn!(error = %e, ?signal, "could not tell the other instances");
        }
    });
}
