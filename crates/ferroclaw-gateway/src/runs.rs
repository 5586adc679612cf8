//! The one path every surface takes to run an agent: `/stop` commands and submission to the scheduler under the queue key `agentId:sessionKey`.
//! Surfaces pass their own event sink and await the ticket.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use ferroclaw_agent::{EventSink, RunError, RunOutput, RunRequest};
use ferroclaw_types::{
    AssistantMessage, ContentBlock, EntryBody, EventKind, Message, RunEvent, StopReason, Usage,
};

use crate::scheduler::{Lane, QueueMode, RunFn, SharedOutcome, Submission, SubmitError, Ticket};
use crate::state::{AgentEntry, AppState};

/// What a submitted message turned into.
pub enum Started {
    /// `/stop` or `/stopall`: answered at once with this text, no run.
    Command(String),
    Run(Ticket),
}

/// The scheduler's queue key: sessions of different agents never share a queue.
pub fn queue_key(agent_id: &str, session_key: &str) -> String {
    format!("{agent_id}:{session_key}")
}

/// The key the store and the scheduler know a session by: on a per-user agent, the key
/// a user names is scoped to that user (`ferroclaw_agent::user_scope`), so two users'
/// `main` are two sessions, and `/stop`, history or deletion never reach another's.
pub fn stored_key(agent: &AgentEntry, user: Option<&str>, key: &str) -> String {
    ferroclaw_agent::user_scope::stored_key(agent.agent.settings().per_user_workspace, user, key)
}

/// Submits `message` for `agent`/`session_key`; never waits for the run.
pub fn start(
    state: &Arc<AppState>,
    agent: &AgentEntry,
    session_key: &str,
    user: Option<&str>,
    message: &str,
    mode: QueueMode,
    events: Arc<dyn EventSink>,
) -> Result<Started, SubmitError> {
    let qkey = queue_key(&agent.id, &stored_key(agent, user, session_key));
    match message.trim().to_ascii_lowercase().as_str() {
        "/stop" => {
            let n = state.scheduler.stop(&qkey);
            return Ok(Started::Command(format!("Stopped {n} running turn(s).")));
        }
        "/stopall" => {
            let n = state.scheduler.stop_all(&qkey);
            return Ok(Started::Command(format!(
                "Stopped {n} turn(s) and cleared the queue."
            )));
        }
        _ => {}
    }
    // The agent caps the message (`gateway.max_message_chars`), once, with its note.
    let message = message.to_string();
    let run = agent_run_fn(
        state.clone(),
        agent,
        session_key.to_string(),
        user.map(str::to_string),
    );
    state
        .scheduler
        .submit(Submission {
            lane: Lane::Main,
            session_key: qkey,
            group: false,
            message,
            mode,
            events,
            run,
        })
        .map(Started::Run)
}

/// The closure the scheduler calls: `Agent::run` with run metrics around it.
fn agent_run_fn(
    state: Arc<AppState>,
    entry: &AgentEntry,
    session_key: String,
    user: Option<String>,
) -> RunFn {
    let agent = entry.agent.clone();
    let agent_id = entry.id.clone();
    Arc::new(move |message, sink, cancel| {
        let (agent, agent_id, key, state, user) = (
            agent.clone(),
            agent_id.clone(),
            session_key.clone(),
            state.clone(),
            user.clone(),
        );
        Box::pin(async move {
            state.metrics.run_started();
            let started = Instant::now();
            let sink: Arc<dyn EventSink> = Arc::new(MeteredSink {
                inner: sink,
                state: state.clone(),
            });
            let req = RunRequest {
                session_key: key,
                message,
            };
            let result = agent.run_as(req, user.as_deref(), sink, cancel).await;
            let outcome = match &result {
                Ok(out) => {
                    state.metrics.llm_usage(
                        &out.provider,
                        &out.model,
                        u64::from(out.iterations),
                        out.usage.input,
                        out.usage.output,
                    );
                    "ok"
                }
                Err(e) => e.kind(),
            };
            state
                .metrics
                .run_finished(&agent_id, outcome, started.elapsed().as_secs_f64());
            result
        })
    })
}

/// Counts tool calls on their way to the surface's sink.
struct MeteredSink {
    inner: Arc<dyn EventSink>,
    state: Arc<AppState>,
}

impl EventSink for MeteredSink {
    fn emit(&self, event: RunEvent) {
        if let EventKind::ToolResult { name, is_error, .. } = &event.kind {
            self.state.metrics.tool_call(name, *is_error);
        }
        self.inner.emit(event);
    }
}

/// Appends one transcript entry through the session's queue, so it can never land in
/// the middle of a running turn (`chat.inject`, `sessions.patch`).
pub fn write_entry(
    state: &Arc<AppState>,
    agent: &AgentEntry,
    session_key: &str,
    body: EntryBody,
) -> Result<Ticket, SubmitError> {
    let store = agent.agent.store().clone();
    let agent_id = agent.id.clone();
    let key = session_key.to_string();
    let body = Arc::new(body);
    let run: RunFn = Arc::new(move |_message, _sink, _cancel| {
        let (store, agent_id, key, body) =
            (store.clone(), agent_id.clone(), key.clone(), body.clone());
        Box::pin(async move {
            let mut log = store.open(&agent_id, &key).await?;
            log.append((*body).clone()).await?;
            log.flush().await?;
            Ok(RunOutput {
                run_id: uuid::Uuid::now_v7().to_string(),
                session_id: log.session_id().to_string(),
                text: String::new(),
                silent: true,
                stop_reason: StopReason::Stop,
                usage: Usage::default(),
                iterations: 0,
                provider: String::new(),
                model: String::new(),
            })
        })
    });
    state.scheduler.submit(Submission {
        lane: Lane::Main,
        session_key: queue_key(&agent.id, session_key),
        group: false,
        message: String::new(),
        // Never merged with user messages, never aborts a turn.
        mode: QueueMode::Queue,
        events: Arc::new(ferroclaw_agent::NullSink),
        run,
    })
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

/// Why a ticket ended without an outcome or with a failed run.
pub enum RunFailure {
    Submit(SubmitError),
    Run(SharedOutcome),
}

/// Awaits a ticket: the run's output, or why there is none.
pub async fn finish(ticket: Ticket) -> Result<(SharedOutcome, RunOutput), RunFailure> {
    match ticket.outcome.await {
        // The scheduler dropped the ticket without answering: it is going away.
        Err(_) => Err(RunFailure::Submit(SubmitError::ShuttingDown)),
        Ok(Err(e)) => Err(RunFailure::Submit(e)),
        Ok(Ok(shared)) => match shared.as_ref() {
            Ok(out) => {
                let out = out.clone();
                Ok((shared, out))
            }
            Err(_) => Err(RunFailure::Run(shared)),
        },
    }
}

impl RunFailure {
    pub fn run_error(&self) -> Option<&RunError> {
        match self {
            RunFailure::Run(shared) => shared.as_ref().as_ref().err(),
            RunFailure::Submit(_) => None,
        }
    }
}

/// Remembers the run id from the first event, for answers about aborted runs.
#[derive(Default)]
pub struct RunIdSlot(Mutex<Option<String>>);

impl RunIdSlot {
    pub fn observe(&self, event: &RunEvent) {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some(event.run_id.clone());
        }
    }

    pub fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
