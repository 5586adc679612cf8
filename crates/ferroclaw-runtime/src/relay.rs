//! Stops, aborts, directory changes and run events across gateway instances on one
//! shared storage: a `/stop` or `chat.abort` handled here is also published, and what the
//! other instances publish is applied to this one's runs (at most one instance runs a
//! session at a time, under its lease, so exactly one of them finds the run). A run's
//! events go to the other instances only while a client there watches its session, so
//! an unwatched turn costs no notification.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferroclaw_store::{SessionStore, Signal, SignalBus};
use tokio::sync::broadcast::error::RecvError;

use crate::door::queue_key;
use crate::scheduler::Scheduler;
use crate::tenants::Tenants;
use crate::watch::{SessionEvent, SessionId, Watch, WatchChanges};

/// How often an instance repeats which sessions its clients watch.
const WATCH_REFRESH: Duration = Duration::from_secs(10);
/// A watch not repeated for this long is forgotten (its instance died).
const WATCH_EXPIRY: Duration = Duration::from_secs(30);

/// Sessions the other instances' clients watch: session → instance → last heard.
#[derive(Default)]
struct Interest(Mutex<HashMap<SessionId, HashMap<String, Instant>>>);

impl Interest {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, HashMap<String, Instant>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set(&self, instance: String, id: SessionId, on: bool) {
        let mut map = self.lock();
        if on {
            map.entry(id).or_default().insert(instance, Instant::now());
        } else if let Some(by) = map.get_mut(&id) {
            by.remove(&instance);
            if by.is_empty() {
                map.remove(&id);
            }
        }
    }

    fn wanted(&self, agent_id: &str, key: &str) -> bool {
        let mut map = self.lock();
        let id = (agent_id.to_string(), key.to_string());
        let Some(by) = map.get_mut(&id) else {
            return false;
        };
        by.retain(|_, heard| heard.elapsed() < WATCH_EXPIRY);
        if by.is_empty() {
            map.remove(&id);
            return false;
        }
        true
    }
}

/// Subscribes this process's scheduler to the other instances' signals; `None` when the
/// store is not shared (or there is no async runtime to listen on).
pub(crate) fn start(
    store: &dyn SessionStore,
    scheduler: Arc<Scheduler>,
    tenants: Option<Arc<Tenants>>,
    mcp: Option<Arc<crate::mcp_servers::McpServers>>,
    watch: Watch,
) -> Option<Arc<dyn SignalBus>> {
    let bus = store.signals()?;
    let mut rx = bus.subscribe();
    let interest = Arc::new(Interest::default());
    let instance = uuid::Uuid::new_v4().to_string();
    tokio::spawn(forward_runs(
        bus.clone(),
        watch.subscribe(),
        interest.clone(),
    ));
    let reannounce = Arc::new(tokio::sync::Notify::new());
    if let Some(changes) = watch.take_changes() {
        tokio::spawn(announce_watches(
            bus.clone(),
            watch.clone(),
            changes,
            instance,
            reannounce.clone(),
        ));
    }
    tokio::spawn(async move {
        loop {
            match rx.recv().await {
                Ok(Signal::Run {
                    agent_id,
                    key,
                    event,
                }) => watch.publish(SessionEvent {
                    agent_id,
                    stored_key: key,
                    event,
                    remote: true,
                }),
                Ok(Signal::Watch {
                    instance,
                    agent_id,
                    key,
                    on,
                }) => interest.set(instance, (agent_id, key), on),
                Ok(Signal::DirectoryChanged { agent }) => {
                    if let Some(t) = &tenants {
                        crate::runtime::Runtime::apply_directory_change(t, agent.as_deref());
                    }
                }
                Ok(Signal::Hello) => reannounce.notify_one(),
                Ok(Signal::McpServersChanged) => reload_mcp(&mcp),
                Ok(Signal::Resumed) => {
                    // Whatever was said while the listener was away is lost: rebuild
                    // users' agents from the store and say again what is watched here.
                    if let Some(t) = &tenants {
                        crate::runtime::Runtime::apply_directory_change(t, None);
                    }
                    reload_mcp(&mcp);
                    reannounce.notify_one();
                }
                Ok(signal) => apply(&scheduler, &signal),
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "fell behind the other instances' signals");
                    if let Some(t) = &tenants {
                        crate::runtime::Runtime::apply_directory_change(t, None);
                    }
                    reload_mcp(&mcp);
                }
                Err(RecvError::Closed) => return,
            }
        }
    });
    Some(bus)
}

/// Loads the stored MCP servers again, off the signal loop.
fn reload_mcp(mcp: &Option<Arc<crate::mcp_servers::McpServers>>) {
    if let Some(mcp) = mcp.clone() {
        tokio::spawn(async move {
            if let Err(e) = mcp.reload().await {
                tracing::warn!(error = %e, "mcp: could not load the stored servers");
            }
        });
    }
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
        Signal::DirectoryChanged { .. }
        | Signal::Run { .. }
        | Signal::Watch { .. }
        | Signal::Hello
        | Signal::McpServersChanged
        | Signal::Resumed => 0,
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

/// A notification carries at most 8,000 bytes: texts are cut well below that.
const MAX_TEXT: usize = 3_000;

/// Publishes this instance's run events to the others, in order. Deltas that queued up
/// while the previous notification was on its way go out as one, so a fast stream costs
/// a notification per database round trip, not per token.
async fn forward_runs(
    bus: Arc<dyn SignalBus>,
    mut rx: tokio::sync::broadcast::Receiver<Arc<SessionEvent>>,
    interest: Arc<Interest>,
) {
    loop {
        let first = match rx.recv().await {
            Ok(ev) => ev,
            Err(RecvError::Lagged(n)) => {
                tracing::warn!(
                    missed = n,
                    "run events not forwarded to the other instances"
                );
                continue;
            }
            Err(RecvError::Closed) => return,
        };
        let mut batch = vec![first];
        while let Ok(ev) = rx.try_recv() {
            batch.push(ev);
        }
        let wanted = batch
            .iter()
            .filter(|e| !e.remote && interest.wanted(&e.agent_id, &e.stored_key));
        for ev in coalesce(wanted.map(|e| e.as_ref())) {
            let signal = Signal::Run {
                agent_id: ev.agent_id.clone(),
                key: ev.stored_key.clone(),
                event: ev.event,
            };
            if let Err(e) = bus.publish(&signal).await {
                tracing::warn!(error = %e, "could not forward a run event to the other instances");
            }
        }
    }
}

/// Tells the other instances which sessions this one's clients watch: at once when
/// that changes, when an instance starts listening, and again every [`WATCH_REFRESH`].
async fn announce_watches(
    bus: Arc<dyn SignalBus>,
    watch: Watch,
    mut changes: WatchChanges,
    instance: String,
    reannounce: Arc<tokio::sync::Notify>,
) {
    let signal = |(agent_id, key): SessionId, on: bool| Signal::Watch {
        instance: instance.clone(),
        agent_id,
        key,
        on,
    };
    let mut refresh = tokio::time::interval(WATCH_REFRESH);
    loop {
        let signals: Vec<Signal> = tokio::select! {
            change = changes.recv() => match change {
                Some((id, on)) => vec![signal(id, on)],
                None => return,
            },
            _ = refresh.tick() => watch.watched_here().into_iter().map(|id| signal(id, true)).collect(),
            _ = reannounce.notified() => watch.watched_here().into_iter().map(|id| signal(id, true)).collect(),
        };
        for s in signals {
            if let Err(e) = bus.publish(&s).await {
                tracing::warn!(error = %e, "could not tell the other instances what is watched here");
            }
        }
    }
}

/// Merges consecutive deltas of one run and kind, and cuts texts to [`MAX_TEXT`].
fn coalesce<'a>(events: impl Iterator<Item = &'a SessionEvent>) -> Vec<SessionEvent> {
    use ferroclaw_types::EventKind as K;
    let mut out: Vec<SessionEvent> = Vec::new();
    for ev in events {
        if let Some(last) = out.last_mut() {
            if last.event.run_id == ev.event.run_id {
                let merged = match (&mut last.event.kind, &ev.event.kind) {
                    (K::AssistantDelta { text: a }, K::AssistantDelta { text: b })
                    | (K::ReasoningDelta { text: a }, K::ReasoningDelta { text: b })
                        if a.len() + b.len() <= MAX_TEXT =>
                    {
                        a.push_str(b);
                        true
                    }
                    _ => false,
                };
                if merged {
                    last.event.seq = ev.event.seq;
                    continue;
                }
            }
        }
        let mut ev = ev.clone();
        match &mut ev.event.kind {
            K::AssistantDelta { text }
            | K::ReasoningDelta { text }
            | K::LifecycleEnd { text, .. }
            | K::LifecycleError { message: text } => cut(text),
            K::ToolStart { arguments, .. } if arguments.to_string().len() > MAX_TEXT => {
                *arguments = serde_json::json!({"omitted": "too long to relay"});
            }
            _ => {}
        }
        out.push(ev);
    }
    out
}

fn cut(text: &mut String) {
    if text.len() > MAX_TEXT {
        let mut end = MAX_TEXT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str(" […]");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferroclaw_types::{EventKind, RunEvent};

    fn ev(run: &str, seq: u64, kind: EventKind) -> SessionEvent {
        SessionEvent {
            agent_id: "main".into(),
            stored_key: "k".into(),
            event: RunEvent {
                run_id: run.into(),
                seq,
                kind,
            },
            remote: false,
        }
    }

    fn delta(t: &str) -> EventKind {
        EventKind::AssistantDelta { text: t.into() }
    }

    #[test]
    fn deltas_of_one_run_merge_in_order_and_long_texts_are_cut() {
        let events = [
            ev("r1", 1, delta("Hel")),
            ev("r1", 2, delta("lo")),
            ev("r2", 1, delta("x")),
            ev("r1", 3, delta(" world")),
            ev(
                "r1",
                4,
                EventKind::LifecycleError {
                    message: "é".repeat(4000),
                },
            ),
        ];
        let out = coalesce(events.iter());
        assert_eq!(out.len(), 4);
        assert_eq!(out[0].event.kind, delta("Hello"));
        assert_eq!(out[0].event.seq, 2, "the merged event carries the last seq");
        assert_eq!(out[1].event.run_id, "r2");
        assert_eq!(out[2].event.kind, delta(" world"));
        let EventKind::LifecycleError { message } = &out[3].event.kind else {
            panic!("kind")
        };
        assert!(message.len() <= MAX_TEXT + 8 && message.ends_with("[…]"));
        // Merging stops at the cap instead of growing past it.
        let big = [
            ev("r", 1, delta(&"a".repeat(2000))),
            ev("r", 2, delta(&"b".repeat(2000))),
        ];
        assert_eq!(coalesce(big.iter()).len(), 2);
    }
}
