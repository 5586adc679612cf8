//! The events of every run, with the session they belong to, for whoever watches a
//! session rather than a run it started (a WebSocket client subscribed to a session).
//! Runs of this process are published by the door; on a shared store the relay adds the
//! runs of the other instances, so a watcher sees a session's runs wherever they execute.

use std::sync::Arc;

use ferroclaw_types::RunEvent;
use tokio::sync::broadcast;

/// Events kept for a watcher that falls behind before it is told it missed some.
const CAPACITY: usize = 1024;

/// One event of a run and its session.
#[derive(Debug, Clone)]
pub struct SessionEvent {
    pub agent_id: String,
    /// The key the store knows the session by (scoped to its user on per-user agents).
    pub stored_key: String,
    pub event: RunEvent,
    /// The run executes on another instance of the same storage.
    pub remote: bool,
}

#[derive(Clone)]
pub(crate) struct Watch {
    tx: broadcast::Sender<Arc<SessionEvent>>,
}

impl Watch {
    pub(crate) fn new() -> Watch {
        Watch {
            tx: broadcast::channel(CAPACITY).0,
        }
    }

    /// Whether anybody watches (so a run without watchers copies nothing).
    pub(crate) fn watched(&self) -> bool {
        self.tx.receiver_count() > 0
    }

    pub(crate) fn publish(&self, event: SessionEvent) {
        // No watcher left since `watched` was asked: nothing to deliver.
        let _ = self.tx.send(Arc::new(event));
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<SessionEvent>> {
        self.tx.subscribe()
    }
}

/// An event sink that also publishes to the watchers of the run's session.
pub(crate) struct WatchedSink {
    pub inner: Arc<dyn ferroclaw_agent::EventSink>,
    pub watch: Watch,
    pub agent_id: String,
    pub stored_key: String,
}

impl ferroclaw_agent::EventSink for WatchedSink {
    fn emit(&self, event: RunEvent) {
        if self.watch.watched() {
            self.watch.publish(SessionEvent {
                agent_id: self.agent_id.clone(),
                stored_key: self.stored_key.clone(),
                event: event.clone(),
                remote: false,
            });
        }
        self.inner.emit(event);
    }
}
