//! Signals between gateway instances that share one storage: what a client asks of a
//! session (stop it, abort one of its runs) must reach the instance where the run is,
//! which may not be the one the client talks to. Only a shared backend has a bus
//! ([`crate::SessionStore::signals`]); on one machine there is one process per home
//! that runs a gateway, and nothing to relay.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::StoreError;

/// What one instance asks of the others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Signal {
    /// `/stop`: the session's oldest running turn.
    Stop { agent_id: String, key: String },
    /// `/stopall`: every running turn of the session, and its queue.
    StopAll { agent_id: String, key: String },
    /// `chat.abort {runId}`: that run, if it belongs to the session.
    Abort {
        agent_id: String,
        key: String,
        run_id: String,
    },
    /// A user's agent (`None`: any of them, as after a provider record changed) was
    /// changed: built copies are stale.
    DirectoryChanged { agent: Option<String> },
    /// A client of instance `instance` starts (`on`) or stops watching a session: runs of
    /// it elsewhere are forwarded while someone watches. Repeated while it lasts, so an
    /// instance that died stops counting.
    Watch {
        instance: String,
        agent_id: String,
        key: String,
        on: bool,
    },
    /// The publishing instance has just started listening: tell it what you watch.
    Hello,
    /// The MCP servers kept in the storage changed: load them again.
    McpServersChanged,
    /// Never published: this instance's own listener has (re)connected, and signals
    /// sent while it was away were missed (built agents may be stale, watches unknown).
    Resumed,
    /// An event of a run executing at the publishing instance, for the watchers of its
    /// session elsewhere (long texts are cut to fit a notification).
    Run {
        agent_id: String,
        key: String,
        event: ferroclaw_types::RunEvent,
    },
}

#[async_trait]
pub trait SignalBus: Send + Sync {
    /// Tells every other instance. Best effort: a signal sent while the bus is down is
    /// lost, and said so in the log.
    async fn publish(&self, signal: &Signal) -> Result<(), StoreError>;
    /// Signals published by the other instances from now on (never this one's own).
    fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Signal>;
}
