//! The events of every run, with the session they belong to, for whoever watches a
//! session rather than a run it started (a WebSocket client subscribed to a session).
//! Runs of this process are published by the door; on a shared store the relay adds the
//! runs of the other instances, so a watcher sees a session's runs wherever they execute.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ferroclaw_types::RunEvent;
use tokio::sync::{broadcast, mpsc};

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

/// `(agent id, stored key)` of a session.
pub(crate) type SessionId = (String, String);

/// Receives `(session, watched)` whenever a session starts or stops being watched here.
pub(crate) type WatchChanges = mpsc::UnboundedReceiver<(SessionId, bool)>;

#[derive(Clone)]
pub(crate) struct Watch {
    tx: broadcast::Sender<Arc<SessionEvent>>,
    /// Sessions watched here, with how many watchers each.
    local: Arc<Mutex<HashMap<SessionId, usize>>>,
    /// A session starts (`true`) or stops being watched here: the relay tells the other
    /// instances, which forward only the runs of sessions someone watches.
    changes: mpsc::UnboundedSender<(SessionId, bool)>,
    changes_rx: Arc<Mutex<Option<WatchChanges>>>,
}

/// A session watched for as long as this is held.
pub struct WatchGuard {
    watch: Watch,
    id: SessionId,
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        let mut local = lock(&self.watch.local);
        if let Some(n) = local.get_mut(&self.id) {
            *n -= 1;
            if *n == 0 {
                local.remove(&self.id);
                let _ = self.watch.changes.send((self.id.clone(), false));
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Watch {
    pub(crate) fn new() -> Watch {
        let (changes, rx) = mpsc::unbounded_channel();
        Watch {
            tx: broadcast::channel(CAPACITY).0,
            local: Arc::default(),
            changes,
            changes_rx: Arc::new(Mutex::new(Some(rx))),
        }
    }

    /// Registers a watcher of a session until the guard is dropped.
    pub(crate) fn watch_session(&self, agent_id: &str, stored_key: &str) -> WatchGuard {
        let id = (agent_id.to_string(), stored_key.to_string());
        let mut local = lock(&self.local);
        let n = local.entry(id.clone()).or_insert(0);
        *n += 1;
        if *n == 1 {
            let _ = self.changes.send((id.clone(), true));
        }
        WatchGuard {
            watch: self.clone(),
            id,
        }
    }

    /// The sessions watched here now.
    pub(crate) fn watched_here(&self) -> Vec<SessionId> {
        lock(&self.local).keys().cloned().collect()
    }

    /// The stream of watch changes, for the relay (once).
    pub(crate) fn take_changes(&self) -> Option<WatchChanges> {
        lock(&self.changes_rx).take()
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
