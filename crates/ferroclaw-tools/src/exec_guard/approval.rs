//! Asking a person before a command runs.
//!
//! [`ApprovalBroker::request`] publishes an [`ApprovalEvent::Requested`] on a broadcast
//! channel (the gateway forwards it as the WS event `exec.approval.requested`) and waits
//! until someone calls [`ApprovalBroker::approve`] or [`ApprovalBroker::deny`] (the gateway's
//! `exec.approval.approve|deny` methods), or until the time-out (default 2 minutes) passes.
//! `approve(id, always = true)` also adds the command's programs to the persisted
//! [`ExecAllowlist`], so `on-miss` stops asking for them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::Value;
use tokio::sync::{broadcast, oneshot};

use super::ExecAllowlist;

pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(120);

/// One pending question, as listed by `exec.approval.list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequest {
    pub id: String,
    pub session_key: String,
    pub agent_id: String,
    pub command: String,
    /// What `allow-always` would add to the allowlist.
    pub programs: Vec<String>,
    pub created_at_ms: u64,
    pub expires_at_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalDecision {
    Approved,
    ApprovedAlways,
    Denied,
    TimedOut,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ApprovalEvent {
    Requested(ApprovalRequest),
    Resolved {
        id: String,
        decision: ApprovalDecision,
    },
}

impl ApprovalEvent {
    /// The WS event name the gateway uses for this event.
    pub fn event_name(&self) -> &'static str {
        match self {
            Self::Requested(_) => "exec.approval.requested",
            Self::Resolved { .. } => "exec.approval.resolved",
        }
    }

    /// The WS event payload.
    pub fn payload(&self) -> Value {
        match self {
            Self::Requested(r) => serde_json::to_value(r).unwrap_or(Value::Null),
            Self::Resolved { id, decision } => {
                serde_json::json!({"id": id, "decision": decision})
            }
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ApprovalError {
    #[error("no pending exec approval with id {0:?}")]
    NotFound(String),
    /// The command was approved for this run, but the allowlist could not be saved.
    #[error("approved once, but the allowlist could not be saved: {0}")]
    Persist(String),
}

struct Pending {
    request: ApprovalRequest,
    reply: oneshot::Sender<ApprovalDecision>,
}

struct Inner {
    pending: Mutex<HashMap<String, Pending>>,
    events: broadcast::Sender<ApprovalEvent>,
    timeout: Duration,
    allowlist: Arc<ExecAllowlist>,
}

/// Cheap to clone; all clones share the pending requests.
#[derive(Clone)]
pub struct ApprovalBroker {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ApprovalBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalBroker")
            .field("timeout", &self.inner.timeout)
            .field("pending", &self.list().len())
            .finish()
    }
}

impl ApprovalBroker {
    pub fn new(allowlist: Arc<ExecAllowlist>, timeout: Duration) -> Self {
        let (events, _) = broadcast::channel(256);
        Self {
            inner: Arc::new(Inner {
                pending: Mutex::new(HashMap::new()),
                events,
                timeout,
                allowlist,
            }),
        }
    }

    pub fn timeout(&self) -> Duration {
        self.inner.timeout
    }

    pub fn allowlist(&self) -> &Arc<ExecAllowlist> {
        &self.inner.allowlist
    }

    /// Events for the gateway to forward (requests and resolutions).
    pub fn subscribe(&self) -> broadcast::Receiver<ApprovalEvent> {
        self.inner.events.subscribe()
    }

    /// Pending requests, oldest first.
    pub fn list(&self) -> Vec<ApprovalRequest> {
        let mut v: Vec<ApprovalRequest> = self.lock().values().map(|p| p.request.clone()).collect();
        v.sort_by(|a, b| a.created_at_ms.cmp(&b.created_at_ms).then(a.id.cmp(&b.id)));
        v
    }

    /// Approves a pending request; `always` also adds its programs to the allowlist.
    pub fn approve(&self, id: &str, always: bool) -> Result<(), ApprovalError> {
        let pending = self.take(id)?;
        let mut result = Ok(());
        let decision = if always {
            match self.inner.allowlist.add(&pending.request.programs) {
                Ok(()) => ApprovalDecision::ApprovedAlways,
                Err(e) => {
                    tracing::warn!(target: "security.exec", error = %e, "cannot persist the exec allowlist");
                    result = Err(ApprovalError::Persist(e.to_string()));
                    ApprovalDecision::Approved
                }
            }
        } else {
            ApprovalDecision::Approved
        };
        self.resolve(pending, decision);
        result
    }

    pub fn deny(&self, id: &str) -> Result<(), ApprovalError> {
        let pending = self.take(id)?;
        self.resolve(pending, ApprovalDecision::Denied);
        Ok(())
    }

    /// Publishes a request and waits for the answer or the time-out. Dropping the future
    /// (the run was aborted) withdraws the request.
    pub async fn request(
        &self,
        session_key: &str,
        agent_id: &str,
        command: &str,
    ) -> ApprovalDecision {
        let now = now_ms();
        let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
        let request = ApprovalRequest {
            id: id.clone(),
            session_key: session_key.to_string(),
            agent_id: agent_id.to_string(),
            command: command.to_string(),
            programs: super::command_programs(command),
            created_at_ms: now,
            expires_at_ms: now.saturating_add(self.inner.timeout.as_millis() as u64),
        };
        let (tx, rx) = oneshot::channel();
        self.lock().insert(
            id.clone(),
            Pending {
                request: request.clone(),
                reply: tx,
            },
        );
        tracing::info!(target: "security.exec", id = %id, session = session_key, "exec approval requested");
        // No subscriber is not an error: `list` still shows the request.
        let _ = self.inner.events.send(ApprovalEvent::Requested(request));
        let withdraw = Withdraw {
            broker: self,
            id: &id,
        };
        let decision = match tokio::time::timeout(self.inner.timeout, rx).await {
            Ok(Ok(d)) => d,
            // The sender only disappears through `take`, which always answers; be safe.
            Ok(Err(_)) => ApprovalDecision::Denied,
            Err(_) => {
                if let Ok(p) = self.take(&id) {
                    self.resolve(p, ApprovalDecision::TimedOut);
                }
                ApprovalDecision::TimedOut
            }
        };
        drop(withdraw);
        decision
    }

    fn take(&self, id: &str) -> Result<Pending, ApprovalError> {
        self.lock()
            .remove(id)
            .ok_or_else(|| ApprovalError::NotFound(id.to_string()))
    }

    fn resolve(&self, pending: Pending, decision: ApprovalDecision) {
        let id = pending.request.id.clone();
        let _ = pending.reply.send(decision);
        let _ = self
            .inner
            .events
            .send(ApprovalEvent::Resolved { id, decision });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.inner.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Removes a request whose waiter went away.
struct Withdraw<'a> {
    broker: &'a ApprovalBroker,
    id: &'a str,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        if self.broker.lock().remove(self.id).is_some() {
            let _ = self.broker.inner.events.send(ApprovalEvent::Resolved {
                id: self.id.to_string(),
                decision: ApprovalDecision::Denied,
            });
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
