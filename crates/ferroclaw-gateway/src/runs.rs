//! The one choreography every surface uses for a run: submit the message to the runtime,
//! then drive the handle to its end — each event to the surface as it happens, abort
//! when the client leaves, remove a one-off session afterwards. Surfaces only translate
//! their input into a [`Target`] and the events and outcome into their wire format.

use std::future::Future;
use std::sync::Arc;

use ferroclaw_agent::RunOutput;
use ferroclaw_runtime::{
    Origin, QueueMode, RunFailure, RunHandle, RuntimeError, Submit, SubmitError, Submitted,
};
use ferroclaw_types::{
    AssistantMessage, ContentBlock, EntryBody, Message, RunEvent, StopReason, Usage,
};

use crate::state::{AgentEntry, AppState};

/// A message for a session, as a surface resolved it.
pub struct Target<'a> {
    pub agent: &'a AgentEntry,
    /// The key the client named (scoped to the user by the runtime on per-user agents).
    pub session_key: &'a str,
    pub user: Option<&'a str>,
    /// A one-off session: removed once its run is over.
    pub ephemeral: bool,
    pub message: &'a str,
    pub mode: QueueMode,
    pub origin: Origin,
}

/// What a submitted message turned into.
pub enum Started {
    /// `/stop` or `/stopall`: answered at once with this text, no run.
    Command(String),
    Run(Pending),
}

/// A run accepted by the runtime, not yet driven.
pub struct Pending {
    pub handle: RunHandle,
    /// `(agent, stored key)` of a one-off session to remove afterwards.
    forget: Option<(String, String)>,
}

impl Pending {
    pub fn run_id(&self) -> &str {
        &self.handle.id
    }
}

/// How a driven run ended.
pub enum Ended {
    Done(Result<RunOutput, RunFailure>),
    /// The client went away first; the run was aborted.
    ClientGone,
}

/// Submits the message; never waits for the run.
pub fn start(state: &AppState, t: Target<'_>) -> Result<Started, SubmitError> {
    let submitted = state.runtime.submit(Submit {
        agent_id: &t.agent.id,
        session_key: t.session_key,
        user: t.user,
        message: t.message,
        mode: t.mode,
        origin: t.origin,
        options: Default::default(),
    });
    match submitted {
        Ok(Submitted::Command(text)) => Ok(Started::Command(text)),
        Ok(Submitted::Run(handle)) => Ok(Started::Run(Pending {
            handle,
            forget: t.ephemeral.then(|| {
                (
                    t.agent.id.clone(),
                    state.runtime.stored_key(t.agent, t.user, t.session_key),
                )
            }),
        })),
        Err(RuntimeError::Submit(e)) => Err(e),
        Err(RuntimeError::UnknownAgent(a)) => {
            Err(SubmitError::Failed(format!("unknown agent \"{a}\"")))
        }
    }
}

/// Drives a run to its end: `on_event` gets every event in order; if `client_gone`
/// resolves first the run is aborted. A one-off session is removed either way.
pub async fn drive(
    state: &Arc<AppState>,
    pending: Pending,
    on_event: impl FnMut(RunEvent),
    client_gone: impl Future<Output = ()>,
) -> Ended {
    let Pending { handle, forget } = pending;
    let aborter = handle.aborter();
    let finish = handle.finish(on_event);
    tokio::pin!(finish);
    let ended = tokio::select! {
        r = &mut finish => Ended::Done(r),
        _ = client_gone => {
            // Stop spending tokens on a client that left.
            aborter.abort();
            Ended::ClientGone
        }
    };
    if let Some((agent, key)) = forget {
        forget_session(state, agent, key);
    }
    ended
}

/// Removes a one-off session once whatever still runs on it has ended (the deletion is
/// queued behind it), with its background processes (best effort, in the background).
fn forget_session(state: &Arc<AppState>, agent: String, key: String) {
    let state = state.clone();
    tokio::spawn(async move {
        if let Err(e) = state.runtime.delete_session(&agent, &key).await {
            tracing::debug!(error = %e, session = %key, "could not remove a one-off session");
        }
    });
}

/// An injected note: an assistant message from the gateway, not from a model.
pub fn injected_message(text: &str) -> EntryBody {
    EntryBody::Message {
        message: Message::Assistant(AssistantMessage {
            content: vec![ContentBlock::text(text)],
            provider: "gateway".into(),
            model: "inject".into(),
            usage: Usage::default(),
            stop_reason: StopReason::Stop,
            error_message: None,
            timestamp: ferroclaw_types::now_millis(),
        }),
    }
}
