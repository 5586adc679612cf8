//! One handler per WebSocket method. Each returns the `res` payload or an error; role
//! checks already happened in `conn`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use ferroclaw_runtime::{Origin, QueueMode, Requester, RunFailure, SubmitError, TenantError};
use ferroclaw_types::{EntryBody, EventKind, Message, RunEvent, Usage};
use futures_util::future::BoxFuture;
use serde_json::{json, Value};

use super::conn::{Conn, ConnAuth};
use super::params::{self, SessionRef};
use super::table::Method;
use crate::error::{WsCode, WsError};
use crate::runs::{self, Ended, Started, Target};
use crate::state::{parse_queue_mode, AgentEntry, AppState, IdemSlot};

pub async fn dispatch(
    conn: &Arc<Conn>,
    method: Method,
    params: Value,
    auth: ConnAuth,
) -> Result<Value, WsError> {
    let state = &conn.state;
    let who = auth.requester();
    match method {
        Method::Health => Ok(json!({
            "status": "ok",
            "protocol": auth.protocol,
            "version": crate::VERSION,
        })),
        Method::Status => Ok(status(state, &auth)),
        Method::ModelsList => Ok(models(state)),
        Method::AgentsList => super::agents::list(state, who).await,
        Method::SessionsSubscribe => super::watch::subscribe(conn, &params, who).await,
        Method::SessionsUnsubscribe => super::watch::unsubscribe(conn, &params, who).await,
        Method::AgentsCreate => super::agents::create(state, params, who).await,
        Method::AgentsUpdate => super::agents::update(state, params, who).await,
        Method::AgentsDelete => super::agents::delete(state, params, who).await,
        Method::AgentsFilesList => super::agents::files_list(state, params, who).await,
        Method::AgentsFilesGet => super::agents::files_get(state, params, who).await,
        Method::AgentsFilesSet => super::agents::files_set(state, params, who).await,
        Method::Agent => agent_details(state, &params, who).await,
        Method::McpStatus => Ok(json!({"servers": mcp_status(state)})),
        Method::ChannelsList => super::channels::list(state),
        Method::ChannelsStatus => super::channels::status(state, &params),
        Method::ChannelsToggle => super::channels::toggle(state, &params),
        Method::Send => super::channels::send(state, &params).await,
        Method::DevicePairList => super::channels::pair_list(state).await,
        Method::DevicePairApprove => super::channels::pair_approve(state, &params, None).await,
        Method::DevicePairRevoke => super::channels::pair_revoke(state, &params).await,
        Method::UsageGet => super::usage::get(state, &params, who).await,
        Method::ProvidersStatus => Ok(providers_status(state).await),
        Method::ConfigGet => Ok(json!({"config": *state.shown})),
        Method::DevicesList => super::devices::list(state).await,
        Method::DevicesRevoke => super::devices::revoke(state, &params).await,
        Method::UsageSummary => super::usage::summary(state, &params, who).await,
        Method::CronList => super::cron::list(state, who).await,
        Method::CronStatus => super::cron::status(state, params, who).await,
        Method::CronRuns => super::cron::runs(state, params, who).await,
        Method::CronCreate => super::cron::create(state, params, who).await,
        Method::CronUpdate => super::cron::update(state, params, who).await,
        Method::CronDelete => super::cron::delete(state, params, who).await,
        Method::CronToggle => super::cron::toggle(state, params, who).await,
        Method::CronRun => super::cron::run(state, params, who).await,
        Method::ChatSend => chat_send(conn, &params, who).await.await,
        Method::ChatHistory => chat_history(state, &params, who).await,
        Method::ChatAbort => chat_abort(state, &params, who).await,
        Method::ChatInject => chat_inject(state, &params, who).await,
        Method::SessionsList => sessions_list(state, &params, who).await,
        Method::SessionsPreview => sessions_preview(state, &params, who).await,
        Method::SessionsPatch => sessions_patch(state, &params, who).await,
        Method::SessionsDelete => sessions_delete(state, &params, false, who).await,
        Method::SessionsReset => sessions_delete(state, &params, true, who).await,
        Method::IntegrityStatus => Ok(crate::integrity::status(state).await),
        Method::IntegrityScan => integrity_scan(state, &params).await,
        Method::ExecApprovalList => {
            let approvals: Vec<_> = state
                .runtime
                .services()
                .map(|s| s.exec.approvals.list())
                .unwrap_or_default()
                .into_iter()
                .filter(|a| may_answer(&auth, &a.session_key))
                .collect();
            Ok(json!({"approvals": approvals}))
        }
        Method::ExecApprovalApprove => approval_answer(state, &params, true, &auth),
        Method::ExecApprovalDeny => approval_answer(state, &params, false, &auth),
    }
}

/// Every configured MCP server: state, tools, last error.
fn mcp_status(state: &AppState) -> Value {
    let servers = state
        .runtime
        .services()
        .map(|s| s.mcp.status())
        .unwrap_or_default();
    json!(servers)
}

fn status(state: &AppState, auth: &ConnAuth) -> Value {
    json!({
        "version": crate::VERSION,
        "protocol": crate::PROTOCOL_VERSION,
        "uptimeMs": u64::try_from(state.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "agents": state.runtime.agents().iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
        "defaultAgentId": state.runtime.default_agent_id(),
        "connections": state.ws_client_count(),
        "activeRuns": state.runtime.active_runs(),
        "stalledRuns": state.runtime.recent_stalls(),
        "traces": state.runtime.trace_stats(),
        "queued": state.runtime.queued(),
        "mcp": mcp_status(state),
        "channels": state.channels.get().map(|c| c.list()).unwrap_or_default(),
        "shuttingDown": state.shutting_down.is_cancelled(),
        "role": auth.role.as_str(),
    })
}

/// Each provider an agent uses, asked for its models now (3 s at most each, all at
/// once), and the local model servers answering on their usual ports that no agent uses
/// yet: what a first run can switch to with `ferroclaw onboard`.
async fn providers_status(state: &AppState) -> Value {
    use ferroclaw_providers::probe::{client, find_local, probe, Wire};
    let http = client();
    let configured = futures_util::future::join_all(state.providers.iter().map(|p| {
        let wire = match p.kind {
            ferroclaw_config::settings::ProviderKind::Anthropic => Wire::Anthropic,
            ferroclaw_config::settings::ProviderKind::OpenaiCompat => Wire::OpenAi,
        };
        probe(
            &http,
            &p.name,
            &p.base_url,
            wire,
            p.api_key.as_deref(),
            std::time::Duration::from_secs(3),
        )
    }));
    let (configured, local) = tokio::join!(
        configured,
        find_local(&http, std::time::Duration::from_secs(1))
    );
    let local: Vec<_> = local
        .into_iter()
        .filter(|l| !state.providers.iter().any(|p| p.base_url == l.base_url))
        .collect();
    json!({"providers": configured, "local": local})
}

fn models(state: &AppState) -> Value {
    let mut seen = BTreeSet::new();
    let mut models = Vec::new();
    for a in state.runtime.agents() {
        let s = a.agent.settings();
        if seen.insert((s.provider.clone(), s.model.clone())) {
            models.push(json!({
                "id": format!("{}/{}", s.provider, s.model),
                "provider": s.provider,
                "model": s.model,
            }));
        }
    }
    json!({"models": models})
}

fn agent_json(state: &AppState, a: &AgentEntry) -> Value {
    let s = a.agent.settings();
    json!({
        "id": a.id,
        "name": s.name,
        "provider": s.provider,
        "model": s.model,
        "default": a.id == state.runtime.default_agent_id(),
    })
}

/// The agent a request names (a user's agent only if `who` may use it), else the
/// default agent.
pub(crate) async fn pick_agent(
    state: &AppState,
    target: &SessionRef,
    who: Requester<'_>,
) -> Result<AgentEntry, WsError> {
    match target.agent_id.as_deref() {
        Some(id) => state.runtime.agent_for(who, id).await.map_err(tenant_error),
        None => state.runtime.default_agent().ok_or_else(|| {
            let id = state.runtime.default_agent_id();
            let why = state.runtime.why_not_built(id).map_or_else(
                || "no default agent".to_string(),
                |w| format!("cannot set up agent `{id}`: {w}"),
            );
            WsError::new(WsCode::Unavailable, why)
        }),
    }
}

/// A tenant refusal as a WebSocket error.
pub fn tenant_error(e: TenantError) -> WsError {
    let code = match &e {
        TenantError::UnknownAgent(_) | TenantError::NotFound(_) => WsCode::NotFound,
        TenantError::Forbidden(_) => WsCode::Unauthorized,
        TenantError::Invalid(_) | TenantError::Conflict(_) => WsCode::InvalidRequest,
        TenantError::Unsupported | TenantError::Store(_) => WsCode::Unavailable,
    };
    WsError::new(code, e.to_string())
}

/// `sessionKey` (default `main`), validated.
pub(crate) fn session_key(target: &SessionRef, required: bool) -> Result<String, WsError> {
    let key = match target.session_key.as_deref() {
        Some(k) => k.to_string(),
        None if required => return Err(WsError::invalid("`sessionKey` is required")),
        None => "main".to_string(),
    };
    ferroclaw_store::validate_session_key(&key).map_err(|e| WsError::invalid(e.to_string()))?;
    Ok(key)
}

async fn agent_details(
    state: &AppState,
    params: &Value,
    who: Requester<'_>,
) -> Result<Value, WsError> {
    let p: params::AgentOrSession = params::parse(params)?;
    let a = &pick_agent(state, &p, who).await?;
    let s = a.agent.settings();
    let mut v = agent_json(state, a);
    v["tools"] = json!(a.agent.tools().names());
    v["maxIterations"] = json!(s.max_iterations);
    v["timeoutSeconds"] = json!(s.timeout.as_secs());
    v["stream"] = json!(s.stream);
    Ok(v)
}

/// Maps run events to protocol events on one connection.
struct WsSink {
    conn: Arc<Conn>,
    stream: bool,
    /// A protocol 4 client's run: its events in that protocol's shapes.
    v4: Option<std::sync::Mutex<super::v4::RunEvents>>,
}

impl WsSink {
    fn emit(&self, ev: RunEvent) {
        if let Some(v4) = &self.v4 {
            let frames = v4
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .frames(&ev.kind);
            for (event, payload) in frames {
                self.conn.send_event(event, &payload);
            }
        } else if let Some((event, payload)) = event_frame(&ev, self.stream) {
            self.conn.send_event(event, &payload);
        }
    }
}

/// A run event as a protocol event (`None`: not part of the protocol, or a delta when
/// the client asked for no streaming).
pub fn event_frame(ev: &RunEvent, stream: bool) -> Option<(&'static str, Value)> {
    let run_id = &ev.run_id;
    let (event, payload) = match &ev.kind {
        EventKind::LifecycleStart {
            agent_id,
            session_key,
            model,
        } => (
            "agent",
            json!({"type": "run.started", "runId": run_id, "agentId": agent_id, "sessionKey": session_key, "model": model}),
        ),
        EventKind::AssistantDelta { text } if stream => (
            "chat",
            json!({"type": "chunk", "runId": run_id, "content": text}),
        ),
        EventKind::ReasoningDelta { text } if stream => (
            "chat",
            json!({"type": "thinking", "runId": run_id, "content": text}),
        ),
        EventKind::AssistantDelta { .. } | EventKind::ReasoningDelta { .. } => return None,
        EventKind::ToolStart {
            call_id,
            name,
            arguments,
        } => (
            "agent",
            json!({"type": "tool.call", "runId": run_id, "id": call_id, "name": name, "arguments": arguments}),
        ),
        EventKind::ToolResult {
            call_id,
            name,
            is_error,
            duration_ms,
            ..
        } => (
            "agent",
            json!({"type": "tool.result", "runId": run_id, "id": call_id, "name": name, "isError": is_error, "durationMs": duration_ms}),
        ),
        EventKind::LifecycleEnd {
            stop_reason,
            usage,
            text,
        } => (
            "agent",
            json!({"type": "run.completed", "runId": run_id, "stopReason": stop_reason, "usage": usage, "content": text}),
        ),
        EventKind::LifecycleError { message } => (
            "agent",
            json!({"type": "run.failed", "runId": run_id, "error": message}),
        ),
        EventKind::ModelRetry {
            attempt,
            delay_ms,
            status,
            error,
        } => (
            "agent",
            json!({"type": "model.retry", "runId": run_id, "attempt": attempt, "delayMs": delay_ms, "status": status, "error": error}),
        ),
        EventKind::RunStalled {
            idle_ms,
            waiting_on,
        } => (
            "agent",
            json!({"type": "run.stalled", "runId": run_id, "idleMs": idle_ms, "waitingOn": waiting_on}),
        ),
        EventKind::RunRecovered {
            idle_ms,
            interrupted_tools,
        } => (
            "agent",
            json!({"type": "run.recovered", "runId": run_id, "idleMs": idle_ms, "interruptedTools": interrupted_tools}),
        ),
        // Per-call bookkeeping: for surfaces that account tokens per call (the
        // executor), not part of the WebSocket protocol.
        EventKind::ModelRequest { .. }
        | EventKind::ModelResponse { .. }
        | EventKind::ToolIntents { .. }
        | EventKind::ContextTrimmed { .. } => return None,
    };
    Some((event, payload))
}

/// Protocol 4's `agent` (OpenClaw's CLI, `openclaw agent --message`): the turn is
/// submitted in frame order like `chat.send`, answered at once with `status:
/// "accepted"`, and again under the same request id when it ends, with the answer in
/// `result.payloads`. The returned future sends the second answer.
pub async fn agent_turn(
    conn: &Arc<Conn>,
    id: Value,
    params: &Value,
    who: Requester<'_>,
) -> BoxFuture<'static, ()> {
    let run_id = params
        .get("idempotencyKey")
        .and_then(Value::as_str)
        .filter(|k| !k.trim().is_empty())
        .map_or_else(|| uuid::Uuid::now_v7().to_string(), str::to_string);
    let session = params
        .get("sessionKey")
        .and_then(Value::as_str)
        .filter(|k| !k.trim().is_empty())
        .unwrap_or("main");
    let mut send = json!({
        "sessionKey": session,
        "message": params.get("message").cloned().unwrap_or(Value::Null),
        "idempotencyKey": run_id,
    });
    if let Some(agent) = params.get("agentId").and_then(Value::as_str) {
        send["agentId"] = json!(agent);
    }
    let started = std::time::Instant::now();
    let run = chat_send(conn, &send, who).await;
    conn.send_ok(
        &id,
        json!({"runId": run_id, "status": "accepted", "acceptedAt": ferroclaw_types::now_millis(), "sessionKey": session}),
    );
    let conn = conn.clone();
    Box::pin(async move {
        match run.await {
            Ok(done) => conn.send_ok(
                &id,
                json!({
                    "runId": run_id,
                    "status": "ok",
                    "summary": "completed",
                    "result": {
                        "payloads": [{"text": done["content"]}],
                        "meta": {
                            "durationMs": u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                            "usage": done["usage"],
                        },
                    },
                }),
            ),
            Err(e) => conn.send_err(&id, &e),
        }
    })
}

/// `chat.send`. Everything up to the scheduler submission happens before the returned
/// future is first polled, so messages sent in order on one connection are queued in
/// that order; the future then waits for the run's end.
/// Submits the message (in the connection's frame order: the caller awaits this before
/// reading the next frame) and returns the wait for its result.
pub async fn chat_send(
    conn: &Arc<Conn>,
    params: &Value,
    who: Requester<'_>,
) -> BoxFuture<'static, Result<Value, WsError>> {
    let state = &conn.state;
    let agent = match params::parse::<params::ChatSend>(params) {
        Ok(p) => pick_agent(state, &p.target, who).await,
        Err(e) => Err(e),
    };
    match agent.and_then(|agent| chat_send_start(conn, params, &agent)) {
        Ok(fut) => fut,
        Err(e) => Box::pin(async move { Err(e) }),
    }
}

fn chat_send_start(
    conn: &Arc<Conn>,
    params: &Value,
    agent: &AgentEntry,
) -> Result<BoxFuture<'static, Result<Value, WsError>>, WsError> {
    let state = &conn.state;
    let p: params::ChatSend = params::parse(params)?;
    let message = p
        .message
        .as_deref()
        .ok_or_else(|| WsError::invalid("`message` is required"))?;
    let key = session_key(&p.target, false)?;
    let mode = match p.queue_mode.as_deref() {
        None => state.queue_mode,
        Some(m) => parse_queue_mode(m).ok_or_else(|| {
            WsError::invalid(format!(
                "queueMode: expected queue, followup or interrupt, got {m:?}"
            ))
        })?,
    };
    let stream = p.stream.unwrap_or(true);

    let Some(idem) = p.idempotency_key.as_deref() else {
        return Ok(start_chat(conn, agent, &key, message, mode, stream, None));
    };
    let slot_key = format!("{}:{}:{}", agent.id, key, idem);
    let existing = {
        let mut map = state.idempotency.lock().unwrap_or_else(|e| e.into_inner());
        match map.get(&slot_key) {
            Some(slot) => Some(slot.result.clone()),
            None => {
                if map.len() > 4096 {
                    map.retain(|_, slot| slot.created.elapsed() < crate::state::IDEMPOTENCY_TTL);
                }
                let (tx, rx) = tokio::sync::watch::channel(None);
                map.insert(
                    slot_key,
                    IdemSlot {
                        created: Instant::now(),
                        result: rx,
                    },
                );
                let run = start_chat(conn, agent, &key, message, mode, stream, Some(idem));
                return Ok(Box::pin(async move {
                    let result = run.await;
                    tx.send_replace(Some(result.clone()));
                    result
                }));
            }
        }
    };
    let Some(mut rx) = existing else {
        return Err(WsError::new(WsCode::Internal, "idempotency slot missing"));
    };
    // Same key: no second run; answer with the first run's result once it exists.
    Ok(Box::pin(async move {
        let result = rx
            .wait_for(Option::is_some)
            .await
            .map_err(|_| {
                WsError::new(
                    WsCode::Internal,
                    "the original request ended without a result",
                )
            })?
            .clone();
        match result {
            Some(Ok(mut payload)) => {
                payload["duplicate"] = json!(true);
                Ok(payload)
            }
            Some(Err(e)) => Err(e),
            None => Err(WsError::new(WsCode::Internal, "no result")),
        }
    }))
}

/// Submits the run now; the returned future resolves to the `res` payload.
fn start_chat(
    conn: &Arc<Conn>,
    agent: &AgentEntry,
    key: &str,
    message: &str,
    mode: QueueMode,
    stream: bool,
    client_run: Option<&str>,
) -> BoxFuture<'static, Result<Value, WsError>> {
    let state = conn.state.clone();
    let v4 = conn.auth().is_some_and(|a| a.protocol >= 4).then(|| {
        std::sync::Mutex::new(super::v4::RunEvents::new(
            client_run.map_or_else(|| uuid::Uuid::now_v7().to_string(), str::to_string),
            agent.id.clone(),
            key.to_string(),
        ))
    });
    let sink = WsSink {
        conn: conn.clone(),
        stream,
        v4,
    };
    let agent_id = agent.id.clone();
    let key_owned = key.to_string();
    let base = move |run: Option<String>, content: &str, usage: &Usage, status: &str| {
        json!({
            "runId": run,
            "agentId": agent_id,
            "sessionKey": key_owned,
            "content": content,
            "usage": usage,
            "status": status,
        })
    };
    let user = conn.auth().and_then(|a| a.user_id);
    let started = conn.watching.own_run(|| {
        let started = runs::start(
            &state,
            Target {
                agent,
                session_key: key,
                user: user.as_deref(),
                ephemeral: false,
                message,
                mode,
                origin: Origin::WebSocket,
            },
        );
        let id = match &started {
            Ok(Started::Run(p)) => Some(p.run_id().to_string()),
            _ => None,
        };
        (started, id)
    });
    let pending = match started {
        Ok(Started::Command(text)) => {
            let v = base(None, &text, &Usage::default(), "command");
            return Box::pin(async move { Ok(v) });
        }
        Ok(Started::Run(p)) => p,
        Err(e) => {
            let e = WsError::from_submit(&e);
            return Box::pin(async move { Err(e) });
        }
    };
    let run_id = pending.run_id().to_string();
    Box::pin(async move {
        // A run started over WebSocket goes on if the connection drops (its result is
        // in the transcript); `chat.abort` or `/stop` end it.
        let ended = runs::drive(&state, pending, |ev| sink.emit(ev), std::future::pending()).await;
        let Ended::Done(result) = ended else {
            return Err(WsError::new(WsCode::Internal, "run abandoned"));
        };
        match result {
            Ok(out) => {
                let content = if out.silent { "" } else { out.text.as_str() };
                let mut v = base(Some(out.run_id.clone()), content, &out.usage, "completed");
                v["stopReason"] = json!(out.stop_reason);
                Ok(v)
            }
            // Stopped on purpose (chat.abort, /stop, interrupt, /stopall): not a failure
            // of the request, so the answer says what happened instead of erroring.
            Err(f) if f.is_aborted() => Ok(base(Some(run_id), "", &Usage::default(), "aborted")),
            Err(RunFailure::Submit(SubmitError::Cancelled)) => {
                Ok(base(None, "", &Usage::default(), "cancelled"))
            }
            Err(RunFailure::Submit(e)) => Err(WsError::from_submit(&e)),
            Err(f) => Err(match f.run_error() {
                Some(e) => WsError::from_run(e),
                None => WsError::new(WsCode::Internal, "run ended without an outcome"),
            }),
        }
    })
}

async fn chat_history(
    state: &AppState,
    params: &Value,
    who: Requester<'_>,
) -> Result<Value, WsError> {
    let user = who.user;
    let p: params::WithLimit = params::parse(params)?;
    let agent = &pick_agent(state, &p.target, who).await?;
    let named = session_key(&p.target, true)?;
    let key = state.runtime.stored_key(agent, user, &named);
    let limit = p.limit.map_or(200, |l| l.clamp(1, 1000) as usize);
    let Some(meta) = state
        .store()
        .get(&agent.id, &key)
        .await
        .map_err(store_err)?
    else {
        return Ok(json!({"sessionKey": named, "agentId": agent.id, "messages": []}));
    };
    let messages = read_messages(state, &agent.id, &key).await?;
    let skip = messages.len().saturating_sub(limit);
    Ok(json!({
        "sessionKey": named,
        "agentId": agent.id,
        "sessionId": meta.session_id,
        "messages": messages[skip..],
    }))
}

/// Messages of a session in file order. Reading never appends, so it is safe beside a
/// running turn (a line being written is skipped by the loader).
async fn read_messages(
    state: &AppState,
    agent_id: &str,
    key: &str,
) -> Result<Vec<Message>, WsError> {
    // A read, not an open: it never creates the session nor repairs it under a run.
    let entries = state
        .store()
        .read(agent_id, key)
        .await
        .map_err(store_err)?
        .unwrap_or_default();
    Ok(entries
        .iter()
        .filter_map(|e| e.message().cloned())
        .collect())
}

fn store_err(e: ferroclaw_store::StoreError) -> WsError {
    match e {
        ferroclaw_store::StoreError::InvalidKey(m) => WsError::invalid(m),
        ferroclaw_store::StoreError::NotFound(m) => WsError::new(WsCode::NotFound, m),
        other => WsError::new(WsCode::Internal, other.to_string()),
    }
}

async fn chat_abort(
    state: &AppState,
    params: &Value,
    who: Requester<'_>,
) -> Result<Value, WsError> {
    let user = who.user;
    let p: params::ChatAbort = params::parse(params)?;
    let agent = &pick_agent(state, &p.target, who).await?;
    let named = session_key(&p.target, true)?;
    let key = state.runtime.stored_key(agent, user, &named);
    if let Some(run_id) = p.run_id.as_deref() {
        // Only a run of the named session: a run id alone must not reach another's run.
        let aborted = state.runtime.abort_in_session(&agent.id, &key, run_id);
        return Ok(json!({"aborted": aborted, "count": usize::from(aborted), "runId": run_id}));
    }
    let n = state.runtime.stop(&agent.id, &key);
    Ok(json!({"aborted": n > 0, "count": n}))
}

async fn chat_inject(
    state: &Arc<AppState>,
    params: &Value,
    who: Requester<'_>,
) -> Result<Value, WsError> {
    let user = who.user;
    let p: params::ChatInject = params::parse(params)?;
    let agent = &pick_agent(state, &p.target, who).await?;
    let named = session_key(&p.target, true)?;
    let key = state.runtime.stored_key(agent, user, &named);
    let text = p
        .message
        .as_deref()
        .ok_or_else(|| WsError::invalid("`message` is required"))?;
    write(state, agent, &key, runs::injected_message(text)).await?;
    Ok(json!({"ok": true, "sessionKey": named, "agentId": agent.id}))
}

/// Appends one entry through the session's queue (never in the middle of a turn).
async fn write(
    state: &AppState,
    agent: &AgentEntry,
    stored_key: &str,
    body: EntryBody,
) -> Result<(), WsError> {
    match state
        .runtime
        .write_entries(&agent.id, stored_key, vec![body])
        .await
    {
        Ok(()) => Ok(()),
        Err(RunFailure::Submit(e)) => Err(WsError::from_submit(&e)),
        Err(f) => Err(WsError::new(WsCode::Internal, f.to_string())),
    }
}

async fn sessions_list(
    state: &AppState,
    params: &Value,
    who: Requester<'_>,
) -> Result<Value, WsError> {
    let user = who.user;
    let p: params::AgentOrSession = params::parse(params)?;
    let agents: Vec<AgentEntry> = match p.agent_id {
        Some(_) => vec![pick_agent(state, &p, who).await?],
        None => state.runtime.agents().to_vec(),
    };
    let mut sessions = Vec::new();
    for a in agents {
        let per_user = a.agent.settings().per_user_workspace;
        for mut meta in state.store().list(&a.id).await.map_err(store_err)? {
            // On a per-user agent a user sees their own sessions, by the keys they use.
            if let (true, Some(u)) = (per_user, user) {
                match ferroclaw_agent::user_scope::unscoped(u, &meta.key) {
                    Some(own) => meta.key = own.to_string(),
                    None => continue,
                }
            }
            if meta.agent_id.is_empty() {
                meta.agent_id = a.id.clone();
            }
            sessions.push(serde_json::to_value(&meta).unwrap_or(Value::Null));
        }
    }
    Ok(json!({"sessions": sessions}))
}

async fn sessions_preview(
    state: &AppState,
    params: &Value,
    who: Requester<'_>,
) -> Result<Value, WsError> {
    let user = who.user;
    const PREVIEW_CHARS: usize = 500;
    let p: params::WithLimit = params::parse(params)?;
    let agent = &pick_agent(state, &p.target, who).await?;
    let named = session_key(&p.target, true)?;
    let key = state.runtime.stored_key(agent, user, &named);
    let limit = p.limit.map_or(10, |l| l.clamp(1, 100) as usize);
    if state
        .store()
        .get(&agent.id, &key)
        .await
        .map_err(store_err)?
        .is_none()
    {
        return Err(WsError::new(
            WsCode::NotFound,
            format!("no session `{named}`"),
        ));
    }
    let messages = read_messages(state, &agent.id, &key).await?;
    let skip = messages.len().saturating_sub(limit);
    let items: Vec<Value> = messages[skip..]
        .iter()
        .map(|m| {
            let role = match m {
                Message::User(_) => "user",
                Message::Assistant(_) => "assistant",
                Message::ToolResult(_) => "toolResult",
            };
            let text = m.text();
            let cut: String = text.chars().take(PREVIEW_CHARS).collect();
            json!({"role": role, "text": cut, "truncated": cut.len() < text.len()})
        })
        .collect();
    Ok(json!({"sessionKey": named, "agentId": agent.id, "messages": items}))
}

async fn sessions_patch(
    state: &Arc<AppState>,
    params: &Value,
    who: Requester<'_>,
) -> Result<Value, WsError> {
    let user = who.user;
    let p: params::SessionsPatch = params::parse(params)?;
    let agent = &pick_agent(state, &p.target, who).await?;
    let named = session_key(&p.target, true)?;
    let key = state.runtime.stored_key(agent, user, &named);
    let Some(name) = p.label else {
        return Err(WsError::invalid("nothing to change: send `label`"));
    };
    if state
        .store()
        .get(&agent.id, &key)
        .await
        .map_err(store_err)?
        .is_none()
    {
        return Err(WsError::new(
            WsCode::NotFound,
            format!("no session `{named}`"),
        ));
    }
    // The label is recorded in the transcript (`session_info`), the format's own place
    // for a session name; it goes through the session queue like any write.
    write(
        state,
        agent,
        &key,
        EntryBody::SessionInfo { name: name.clone() },
    )
    .await?;
    Ok(json!({"ok": true, "sessionKey": named, "agentId": agent.id, "label": name}))
}

async fn sessions_delete(
    state: &AppState,
    params: &Value,
    reset: bool,
    who: Requester<'_>,
) -> Result<Value, WsError> {
    let user = who.user;
    let p: params::AgentOrSession = params::parse(params)?;
    let agent = &pick_agent(state, &p, who).await?;
    let named = session_key(&p, true)?;
    let key = state.runtime.stored_key(agent, user, &named);
    // Stops its turns, then deletes through the queue (a turn still unwinding would
    // recreate what is being removed) and drops its background processes.
    let (deleted, stopped) = match state.runtime.delete_session(&agent.id, &key).await {
        Ok(r) => r,
        Err(RunFailure::Submit(e)) => return Err(WsError::from_submit(&e)),
        Err(f) => return Err(WsError::new(WsCode::Internal, f.to_string())),
    };
    state.runtime.forget_traces(&agent.id, &key).await;
    if reset {
        Ok(json!({"reset": true, "existed": deleted, "stoppedRuns": stopped, "sessionKey": named}))
    } else {
        Ok(json!({"deleted": deleted, "stoppedRuns": stopped, "sessionKey": named}))
    }
}

/// `integrity.scan {repair?}` (admin): scans every transcript now, repairing unless
/// `repair: false`, and answers with the summary.
async fn integrity_scan(state: &AppState, params: &Value) -> Result<Value, WsError> {
    let p: params::IntegrityScan = params::parse(params)?;
    let repair = p.repair.unwrap_or(true);
    // A running turn holds its transcript open for appending and, mid-turn, looks like
    // a missing tool result: a repair would replace the file under it and lose what it
    // writes next. Runs starting during the scan are not excluded; the window is the
    // scan's duration.
    let active = state.runtime.active_runs();
    if repair && active > 0 {
        return Err(WsError::new(
            WsCode::FailedPrecondition,
            format!(
                "{active} run(s) in progress: a repair scan could rewrite a transcript being written; retry when idle or send repair: false"
            ),
        ));
    }
    let summary = crate::integrity::scan(state, repair)
        .await
        .map_err(|e| WsError::new(WsCode::Internal, e))?;
    let errors: Vec<Value> = summary
        .errors
        .iter()
        .map(|(path, error)| json!({"file": path, "error": error}))
        .collect();
    Ok(json!({
        "summary": summary.to_string(),
        "repair": repair,
        "sessions": summary.sessions,
        "issues": summary.issues,
        "repaired": summary.repaired,
        "files": summary.files,
        "errors": errors,
        "elapsedMs": u64::try_from(summary.elapsed.as_millis()).unwrap_or(u64::MAX),
    }))
}

/// Whether a connection may see and answer the approval of a run in `session_key`
/// (the approval's key, `<agent>:<stored key>` minus the agent): the gateway token
/// answers all; a user answers for their own sessions of a per-user agent and for the
/// shared sessions of other agents.
pub fn may_answer(auth: &ConnAuth, session_key: &str) -> bool {
    if auth.role >= crate::auth::Role::Admin {
        return true;
    }
    match &auth.user_id {
        // A key scoped to a user is that user's; an unscoped one is a shared agent's.
        Some(u) => ferroclaw_agent::user_scope::owner(session_key).is_none_or(|o| &o == u),
        None => true,
    }
}

/// `exec.approval.approve {id, always?}` and `exec.approval.deny {id}`.
fn approval_answer(
    state: &AppState,
    params: &Value,
    approve: bool,
    auth: &ConnAuth,
) -> Result<Value, WsError> {
    use ferroclaw_tools::exec_guard::ApprovalError;
    let p: params::ApprovalAnswer = params::parse(params)?;
    let id =
        p.id.as_deref()
            .ok_or_else(|| WsError::invalid("`id` is required"))?;
    let broker = state.runtime.services().map(|s| &s.exec.approvals);
    // Someone else's approval is answered exactly like a missing one.
    let Some(broker) = broker.filter(|b| {
        b.list()
            .iter()
            .any(|a| a.id == id && may_answer(auth, &a.session_key))
    }) else {
        return Err(WsError::new(
            WsCode::NotFound,
            format!("no pending exec approval `{id}` (already answered, expired or withdrawn)"),
        ));
    };
    let always = approve && p.always.unwrap_or(false);
    // "Always" widens the allowlist every agent and user shares: the gateway token's call.
    if always && auth.role < crate::auth::Role::Admin {
        return Err(WsError::new(
            WsCode::Unauthorized,
            "approving with `always` changes the allowlist for everyone and needs the gateway token; approve this once instead",
        ));
    }
    let result = if approve {
        broker.approve(id, always)
    } else {
        broker.deny(id)
    };
    let decision = match (approve, always) {
        (false, _) => "denied",
        (true, false) => "approved",
        (true, true) => "approved-always",
    };
    match result {
        Ok(()) => Ok(json!({"ok": true, "id": id, "decision": decision})),
        Err(ApprovalError::NotFound(_)) => Err(WsError::new(
            WsCode::NotFound,
            format!("no pending exec approval `{id}` (already answered, expired or withdrawn)"),
        )),
        // The command was approved for this run; only the allowlist entry is missing.
        Err(e @ ApprovalError::Persist(_)) => Ok(json!({
            "ok": true,
            "id": id,
            "decision": "approved",
            "warning": e.to_string(),
        })),
    }
}
