//! `sessions.subscribe | unsubscribe`: a client watches a session and receives the
//! events of its runs, whoever started them and on whichever instance of the same
//! storage they execute (the runtime's watch carries the other instances' runs too).
//! A run this connection started itself is not sent twice: its events already come
//! with its `chat.send`.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use ferroclaw_runtime::{Requester, SessionEvent};
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;

use super::conn::Conn;
use super::methods::{event_frame, pick_agent, session_key};
use super::params::{self, SessionRef};
use crate::error::WsError;

/// Sessions one connection may watch at once.
const MAX_SUBSCRIPTIONS: usize = 64;
/// Runs of its own a connection remembers, so their events are not sent twice.
const OWN_RUNS: usize = 256;

struct Subscription {
    agent_id: String,
    stored_key: String,
    /// The key as the client named it (what its events carry).
    shown_key: String,
    /// Keeps the session's runs on other instances coming here.
    _guard: ferroclaw_runtime::WatchGuard,
}

/// A connection's subscriptions and the runs it started.
#[derive(Default)]
pub struct Watching {
    subs: Mutex<Vec<Subscription>>,
    own: Mutex<(HashSet<String>, VecDeque<String>)>,
    started: AtomicBool,
}

impl Watching {
    /// Runs `start` (which submits a run and returns its id) while holding the list of
    /// own runs, so the watcher cannot see the run's first event before it is known as
    /// this connection's.
    pub fn own_run<T>(&self, start: impl FnOnce() -> (T, Option<String>)) -> T {
        let mut own = self.own.lock().unwrap_or_else(|e| e.into_inner());
        let (out, id) = start();
        if let Some(id) = id {
            let (set, order) = &mut *own;
            if set.insert(id.clone()) {
                order.push_back(id);
            }
            while order.len() > OWN_RUNS {
                if let Some(old) = order.pop_front() {
                    set.remove(&old);
                }
            }
        }
        out
    }

    fn is_own(&self, run_id: &str) -> bool {
        self.own
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .contains(run_id)
    }

    /// The key the client knows the event's session by, if it watches it.
    fn shown_key(&self, ev: &SessionEvent) -> Option<String> {
        self.subs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|s| s.agent_id == ev.agent_id && s.stored_key == ev.stored_key)
            .map(|s| s.shown_key.clone())
    }
}

pub async fn subscribe(
    conn: &Arc<Conn>,
    params: &Value,
    who: Requester<'_>,
) -> Result<Value, WsError> {
    let p: SessionRef = params::parse(params)?;
    let agent = pick_agent(&conn.state, &p, who).await?;
    let shown = session_key(&p, true)?;
    let stored = conn.state.runtime.stored_key(&agent, who.user, &shown);
    {
        let mut subs = conn.watching.subs.lock().unwrap_or_else(|e| e.into_inner());
        if !subs
            .iter()
            .any(|s| s.agent_id == agent.id && s.stored_key == stored)
        {
            if subs.len() >= MAX_SUBSCRIPTIONS {
                return Err(WsError::invalid(format!(
                    "a connection watches at most {MAX_SUBSCRIPTIONS} sessions"
                )));
            }
            subs.push(Subscription {
                _guard: conn.state.runtime.watch_session(&agent.id, &stored),
                agent_id: agent.id.clone(),
                stored_key: stored,
                shown_key: shown.clone(),
            });
        }
    }
    start_watching(conn);
    Ok(json!({"subscribed": true, "agentId": agent.id, "sessionKey": shown}))
}

pub async fn unsubscribe(
    conn: &Arc<Conn>,
    params: &Value,
    who: Requester<'_>,
) -> Result<Value, WsError> {
    let p: SessionRef = params::parse(params)?;
    let agent = pick_agent(&conn.state, &p, who).await?;
    let shown = session_key(&p, true)?;
    let stored = conn.state.runtime.stored_key(&agent, who.user, &shown);
    let mut subs = conn.watching.subs.lock().unwrap_or_else(|e| e.into_inner());
    let before = subs.len();
    subs.retain(|s| !(s.agent_id == agent.id && s.stored_key == stored));
    Ok(json!({"unsubscribed": subs.len() < before, "agentId": agent.id, "sessionKey": shown}))
}

/// The connection's watcher: one task, from the first subscription until it closes.
fn start_watching(conn: &Arc<Conn>) {
    if conn.watching.started.swap(true, Ordering::SeqCst) {
        return;
    }
    let mut rx = conn.state.runtime.watch();
    let conn = conn.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = conn.closed.cancelled() => return,
                r = rx.recv() => match r {
                    Ok(ev) => deliver(&conn, &ev),
                    Err(RecvError::Lagged(n)) => {
                        tracing::warn!(conn = %conn.id, missed = n, "WebSocket watcher fell behind");
                        conn.send_event("agent", &json!({"type": "events.missed", "count": n}));
                    }
                    Err(RecvError::Closed) => return,
                },
            }
        }
    });
}

fn deliver(conn: &Conn, ev: &SessionEvent) {
    let Some(shown) = conn.watching.shown_key(ev) else {
        return;
    };
    if conn.watching.is_own(&ev.event.run_id) {
        return;
    }
    if let Some((name, mut payload)) = event_frame(&ev.event, true) {
        payload["agentId"] = json!(ev.agent_id);
        payload["sessionKey"] = json!(shown);
        payload["remote"] = json!(ev.remote);
        conn.send_event(name, &payload);
    }
}
