//! The agent loop: think → act → observe until a final answer, the iteration cap, the
//! run time-out or an abort. One `Agent` serves many runs; a run owns nothing shared
//! but the session log it appends to.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferroclaw_providers::{ChatRequest, ErrorKind, Provider, ProviderError, StreamDelta};
use ferroclaw_store::{
    cap_tool_result, Incident, Issue, IssueKind, SessionLog, SessionStore, StoreError,
};
use ferroclaw_tools::{Progress, ToolContext, ToolRegistry};
use ferroclaw_types::{
    AssistantMessage, ContentBlock, EntryBody, EventKind, Message, StopReason, ToolDefinition,
    ToolResultMessage, Usage,
};
use futures_util::future::join_all;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::compaction::{self, CompactionSettings};
use crate::events::{Emitter, EventSink};
use crate::history::{self, HistoryLimits};
use crate::intent_confirm::{self, ConfirmForm};
use crate::prompt::{self, PromptInput, PromptMode};
use crate::sanitize::{is_silent, sanitize_output};
use crate::tool_intent::{self, IntentSettings};
use crate::watchdog::{self, Cause, Interrupt, Phase};
use ferroclaw_config::settings::ToolMode;
use ferroclaw_tools::{InputGuardAction, InputVerdict};

/// Everything about an agent that does not change between runs.
#[derive(Debug, Clone)]
pub struct AgentSettings {
    pub id: String,
    pub name: String,
    pub workspace: PathBuf,
    /// Primary provider and model, as named in the system prompt and events.
    pub provider: String,
    pub model: String,
    pub max_iterations: u32,
    pub timeout: Duration,
    /// Nothing progressed for this long: the run is cut short (see [`crate::watchdog`]).
    pub stall_timeout: Option<Duration>,
    /// Extended thinking budget (Anthropic's wire).
    pub thinking_budget: Option<u32>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    pub stream: bool,
    pub prompt_mode: PromptMode,
    pub history: HistoryLimits,
    /// Longer user messages are cut (with a note to the model), never rejected.
    pub max_message_chars: usize,
    pub compaction: CompactionSettings,
    /// How much of the workspace's context files the system prompt carries.
    pub context_files: prompt::ContextFilesSettings,
    /// A single tool result is capped to this when stored and when sent back.
    pub tool_result_max_chars: usize,
    /// What to do with user messages that look like prompt injection.
    pub input_guard: InputGuardAction,
    /// Runs on behalf of a user get the sub-workspace `user_<sanitized id>`.
    pub per_user_workspace: bool,
    /// Native tool calls, or tool intents parsed from text (see [`crate::tool_intent`]).
    pub intent: IntentSettings,
    /// Bytes of one model reply (text, reasoning, tool-call arguments); past it the
    /// reply is discarded and the run fails with `reply_too_large`.
    pub max_reply_bytes: usize,
    /// Tool calls executed from one model reply; the rest get a refusal as result.
    pub max_tool_calls_per_turn: usize,
    /// Tool executions at once within one run.
    pub max_concurrent_tools: usize,
    /// Tool executions at once across every agent sharing these slots (the process).
    pub tool_slots: ToolSlots,
    /// A hard budget instead of summarising compaction (see [`ContextBudget`]).
    pub context_budget: Option<ContextBudget>,
}

/// A token budget every request must fit, prompt and `max_tokens` together, kept without
/// asking the model to summarise: older tool results (all but the newest turn's) are
/// shortened to `shortened_chars` once the prompt reaches `shorten_at` of the budget,
/// replaced by a note at `omit_at`, and a request that still does not fit fails with
/// `context_overflow` before it is sent. A reply whose reported usage passes the budget
/// fails the same way. For surfaces that own the whole context of a run (the executor).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContextBudget {
    pub tokens: u64,
    pub shorten_at: f64,
    pub omit_at: f64,
    pub shortened_chars: usize,
}

/// Per-run choices a surface passes through (an OpenAI client's `temperature`, a
/// shorter time-out, its system message); each is optional and none widens a setting.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunOptions {
    /// Put before the tool instructions in the system prompt.
    pub instructions: Option<String>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    /// Capped at the agent's `max_tokens` when it has one.
    pub max_tokens: Option<u32>,
    /// Only shortens the agent's time-out.
    pub timeout: Option<Duration>,
    /// A smaller system prompt for this run (`Minimal` for scheduled jobs); never
    /// overrides an agent whose prompt is `Bare`.
    pub prompt_mode: Option<PromptMode>,
    /// The run answers a group chat (a channel): the `tools.group_chat` policy applies.
    pub group_chat: bool,
}

/// A cap on concurrent tool executions shared by every agent holding a clone: one per
/// process (see `SharedServices`), so many runs cannot together fork without bound.
#[derive(Clone)]
pub struct ToolSlots {
    slots: Arc<tokio::sync::Semaphore>,
    capacity: usize,
}

impl ToolSlots {
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            slots: Arc::new(tokio::sync::Semaphore::new(capacity)),
            capacity,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Tools executing right now under this cap.
    pub fn in_use(&self) -> usize {
        self.capacity - self.slots.available_permits()
    }
}

impl std::fmt::Debug for ToolSlots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ToolSlots({}/{})", self.in_use(), self.capacity)
    }
}

impl AgentSettings {
    /// The configuration's defaults (taken from the config crate, so each number is
    /// written once), for agents built without a configuration.
    pub fn new(id: &str, provider: &str, model: &str, workspace: PathBuf) -> Self {
        let history = ferroclaw_config::settings::HistorySettings::default();
        let limits = ferroclaw_config::settings::AgentLimitsSettings::default();
        let shared = ferroclaw_config::settings::SharedSettings::default();
        let defaults = ferroclaw_config::AgentDefaults::default();
        Self {
            id: id.to_string(),
            name: id.to_string(),
            workspace,
            provider: provider.to_string(),
            model: model.to_string(),
            max_iterations: 20,
            timeout: Duration::from_secs(defaults.timeout_seconds),
            stall_timeout: Some(Duration::from_secs(defaults.stall_timeout_seconds))
                .filter(|d| !d.is_zero()),
            thinking_budget: defaults.thinking_budget_tokens,
            max_tokens: None,
            temperature: None,
            stream: true,
            prompt_mode: PromptMode::Full,
            history: HistoryLimits {
                max_user_turns: history.max_user_turns,
                old_tool_result_chars: history.old_tool_result_chars,
            },
            max_message_chars: limits.max_message_chars,
            compaction: CompactionSettings::default(),
            context_files: prompt::ContextFilesSettings::default(),
            tool_result_max_chars: limits.tool_result_max_chars,
            input_guard: InputGuardAction::default(),
            per_user_workspace: false,
            intent: IntentSettings::default(),
            max_reply_bytes: limits.max_reply_bytes,
            max_tool_calls_per_turn: limits.max_tool_calls_per_turn,
            max_concurrent_tools: limits.max_concurrent_tools,
            tool_slots: ToolSlots::new(shared.max_concurrent_tools_total),
            context_budget: None,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    pub session_key: String,
    pub message: String,
    pub options: RunOptions,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunOutput {
    pub run_id: String,
    pub session_id: String,
    /// Sanitised final answer.
    pub text: String,
    /// The reasoning the model gave with its final answer (empty when it gave none).
    pub reasoning: String,
    /// The model answered `NO_REPLY`: surfaces should stay quiet.
    pub silent: bool,
    pub stop_reason: StopReason,
    pub usage: Usage,
    pub iterations: u32,
    pub provider: String,
    pub model: String,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{0}")]
    Provider(#[from] ProviderError),
    #[error("session store: {}", store_message(.0))]
    Store(#[from] StoreError),
    #[error("run aborted")]
    Aborted,
    #[error("run timed out after {} s", .0.as_secs())]
    Timeout(Duration),
    /// The stall watchdog cut the run short: nothing progressed for this long.
    #[error("run stalled: nothing progressed for {} s (agents.defaults.stall_timeout_seconds); it was stopped and the session freed", .0.as_secs())]
    Stalled(Duration),
    #[error("stopped after {0} iterations without a final answer")]
    IterationLimit(u32),
    /// The input guard (action `block`) refused the user's message.
    #[error("message refused: {0}")]
    InputBlocked(String),
    /// The user's sub-workspace could not be prepared.
    #[error("workspace: {0}")]
    Workspace(String),
    /// The agent serves several users (`per_user_workspace`) and the run named none:
    /// it would otherwise work in the shared root workspace, over every user's files.
    #[error("this agent keeps a separate workspace and sessions per user; a run must say which user it is for")]
    UserRequired,
    /// The request does not fit the agent's [`ContextBudget`] (`needed` includes the
    /// tokens reserved for the answer).
    #[error("the context needs about {needed} tokens, over the budget of {budget}")]
    ContextBudget { needed: u64, budget: u64 },
    /// A tool's backend is gone ([`ferroclaw_tools::ToolResult::ends_run`]).
    #[error("tool `{tool}` failed: {message}")]
    ToolUnavailable { tool: String, message: String },
}

impl RunError {
    /// A short machine-readable kind for surfaces (events, HTTP errors).
    pub fn kind(&self) -> &'static str {
        match self {
            RunError::Provider(e) if e.kind == ErrorKind::ContextOverflow => "context_overflow",
            RunError::Provider(e) if e.kind == ErrorKind::ReplyTooLarge => "reply_too_large",
            RunError::Provider(_) => "provider_error",
            RunError::Store(_) => "store_error",
            RunError::Aborted => "aborted",
            RunError::Timeout(_) => "timeout",
            RunError::Stalled(_) => "stalled",
            RunError::IterationLimit(_) => "iteration_limit",
            RunError::InputBlocked(_) => "input_blocked",
            RunError::Workspace(_) => "workspace_error",
            RunError::UserRequired => "user_required",
            RunError::ContextBudget { .. } => "context_overflow",
            RunError::ToolUnavailable { .. } => "tool_unavailable",
        }
    }
}

pub struct Agent {
    settings: AgentSettings,
    provider: Arc<dyn Provider>,
    tools: Arc<ToolRegistry>,
    store: Arc<dyn SessionStore>,
    /// `Some`: context files come from here instead of the workspace.
    context: Option<Arc<dyn prompt::ContextSource>>,
}

/// What an older tool result becomes when even its shortened form does not fit.
const OMITTED_TOOL_RESULT: &str = "[earlier tool output omitted to stay within the context window]";

/// Characters of text, reasoning and tool-call arguments in a reply.
/// The newest user message of a request, for a confirmation's context.
fn last_user_text(chat: &ChatRequest) -> String {
    chat.messages
        .iter()
        .rev()
        .find(|m| matches!(m, Message::User(_)))
        .map(Message::text)
        .unwrap_or_default()
}

fn output_chars(content: &[ContentBlock]) -> usize {
    content
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => text.len(),
            ContentBlock::Thinking { thinking, .. } => thinking.len(),
            ContentBlock::RedactedThinking { data } => data.len(),
            ContentBlock::ToolCall {
                name, arguments, ..
            } => name.len() + arguments.to_string().len(),
            ContentBlock::Image { .. } => 0,
        })
        .sum()
}

/// What a run's guards share with the loop: why it was cut short, what it was doing,
/// its progress clock, and how many tool calls were cut short.
struct RunGuards {
    cause: Cause,
    phase: Phase,
    progress: Progress,
    interrupted_tools: AtomicUsize,
}

impl Agent {
    pub fn new(
        settings: AgentSettings,
        provider: Arc<dyn Provider>,
        tools: Arc<ToolRegistry>,
        store: Arc<dyn SessionStore>,
    ) -> Self {
        Self {
            settings,
            provider,
            tools,
            store,
            context: None,
        }
    }

    /// Takes context files from `source` (the agent's and the user's) instead of the
    /// workspace.
    pub fn with_context_source(mut self, source: Arc<dyn prompt::ContextSource>) -> Self {
        self.context = Some(source);
        self
    }

    pub fn settings(&self) -> &AgentSettings {
        &self.settings
    }

    /// Surfaces that cannot show partial text (or tests) switch streaming off.
    pub fn set_streaming(&mut self, on: bool) {
        self.settings.stream = on;
    }

    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.store
    }

    /// Runs one user message to completion. Events go to `events` as they happen;
    /// cancelling `cancel` aborts the LLM stream or the running tools promptly.
    pub async fn run(
        &self,
        req: RunRequest,
        events: Arc<dyn EventSink>,
        cancel: CancellationToken,
    ) -> Result<RunOutput, RunError> {
        self.run_as(req, None, events, cancel).await
    }

    /// As [`Agent::run`], on behalf of `user`. With `per_user_workspace` set, a user is
    /// required ([`RunError::UserRequired`]), the tools work in that user's
    /// sub-workspace, and `req.session_key` is the user's own key: the store holds it
    /// scoped to the user ([`crate::user_scope`]). Events carry the key as given.
    pub async fn run_as(
        &self,
        req: RunRequest,
        user: Option<&str>,
        events: Arc<dyn EventSink>,
        cancel: CancellationToken,
    ) -> Result<RunOutput, RunError> {
        let run_id = uuid::Uuid::now_v7().to_string();
        self.run_with_id(run_id, req, user, events, cancel).await
    }

    /// As [`Agent::run_as`], under a run id the caller made (the runtime makes it when
    /// the message is submitted, before the run starts).
    pub async fn run_with_id(
        &self,
        run_id: String,
        req: RunRequest,
        user: Option<&str>,
        events: Arc<dyn EventSink>,
        cancel: CancellationToken,
    ) -> Result<RunOutput, RunError> {
        let progress = Progress::new();
        let emitter = Arc::new(Emitter::new(run_id.clone(), events, progress.clone()));
        emitter.emit(EventKind::LifecycleStart {
            agent_id: self.settings.id.clone(),
            session_key: req.session_key.clone(),
            model: self.settings.model.clone(),
        });

        // The time-out and the stall watchdog are just other reasons to cancel; the
        // cause tells them apart.
        let run_cancel = cancel.child_token();
        let guards = RunGuards {
            cause: Cause::default(),
            phase: Phase::default(),
            progress,
            interrupted_tools: AtomicUsize::new(0),
        };
        let _timer = watchdog::spawn_timeout(
            self.timeout_of(&req.options),
            run_cancel.clone(),
            guards.cause.clone(),
        );
        let _watchdog = self.settings.stall_timeout.map(|stall| {
            let (emitter, phase, run_id) = (emitter.clone(), guards.phase.clone(), run_id.clone());
            let agent = self.settings.id.clone();
            watchdog::spawn_watchdog(
                stall,
                guards.progress.clone(),
                run_cancel.clone(),
                guards.cause.clone(),
                move |idle| {
                    tracing::warn!(
                        run_id = %run_id,
                        agent = %agent,
                        idle_ms = idle.as_millis() as u64,
                        waiting_on = phase.name(),
                        "run stalled: nothing progressed; cutting it short"
                    );
                    emitter.emit(EventKind::RunStalled {
                        idle_ms: idle.as_millis() as u64,
                        waiting_on: phase.name().to_string(),
                    });
                },
            )
        });

        let result = self
            .run_inner(&run_id, &req, user, &emitter, &run_cancel, &guards)
            .await;
        drop(_watchdog);
        drop(_timer);
        if guards.cause.get() == Interrupt::Stalled {
            let idle_ms = self
                .settings
                .stall_timeout
                .map_or(0, |d| d.as_millis() as u64);
            let interrupted_tools = guards.interrupted_tools.load(Ordering::SeqCst);
            self.report_stall(&req.session_key, user, idle_ms, interrupted_tools)
                .await;
            emitter.emit(EventKind::RunRecovered {
                idle_ms,
                interrupted_tools,
            });
        }

        match &result {
            Ok(out) => emitter.emit(EventKind::LifecycleEnd {
                stop_reason: out.stop_reason,
                usage: out.usage,
                text: out.text.clone(),
            }),
            Err(e) => {
                tracing::warn!(run_id = %run_id, agent = %self.settings.id, error = %e, "run failed");
                emitter.emit(EventKind::LifecycleError {
                    message: e.to_string(),
                })
            }
        }
        result
    }

    async fn run_inner(
        &self,
        run_id: &str,
        req: &RunRequest,
        on_behalf_of: Option<&str>,
        emitter: &Emitter,
        cancel: &CancellationToken,
        guards: &RunGuards,
    ) -> Result<RunOutput, RunError> {
        let s = &self.settings;
        // Who the run is for is settled before anything is written.
        let (workspace, run_user) = self.run_workspace(on_behalf_of)?;
        let scoped;
        let req = match &run_user {
            Some(u) => {
                scoped = RunRequest {
                    session_key: crate::user_scope::scoped_key(&u.id, &req.session_key),
                    message: req.message.clone(),
                    options: req.options.clone(),
                };
                &scoped
            }
            None => req,
        };
        // Checked before anything is written: a blocked message leaves no trace but a log.
        let text = cap_user_message(&req.message, s.max_message_chars);
        let text = match ferroclaw_tools::input_guard::apply(&text, s.input_guard) {
            InputVerdict::Allow => text,
            InputVerdict::AllowWithWarning(note) => format!("{text}\n\n{note}"),
            InputVerdict::Block(reason) => return Err(RunError::InputBlocked(reason)),
        };
        let mut log = self.store.open(&s.id, &req.session_key).await?;
        if !log.problems().is_empty() {
            tracing::warn!(
                session = %req.session_key,
                problems = log.problems().len(),
                "transcript had unreadable lines; they were skipped"
            );
        }

        let user = Message::user(text);
        log.append(EntryBody::Message {
            message: user.clone(),
        })
        .await?;
        let mut context = log.context();

        let tool_ctx = ToolContext {
            agent_id: s.id.clone(),
            session_key: crate::tool_scope(&s.id, &req.session_key),
            workspace,
            cancel: cancel.clone(),
            user: run_user,
            acting_user: on_behalf_of.map(str::to_string),
            group_chat: req.options.group_chat,
            progress: guards.progress.clone(),
            run_id: run_id.to_string(),
        };
        let tool_defs = self.tools.definitions_for(&tool_ctx);
        let intent = &s.intent;
        // In intent mode (and in auto mode once a server refuses `tools`) the tools are
        // described in the system prompt and calls are parsed from the text.
        let mut text_tools = intent.mode == ToolMode::Intent;
        let specs = if intent.mode == ToolMode::Native {
            Vec::new()
        } else {
            tool_intent::tool_specs(&self.tools, &tool_defs)
        };
        let instructions = req.options.instructions.as_deref();
        let mode = match (s.prompt_mode, req.options.prompt_mode) {
            (PromptMode::Bare, _) | (_, None) => s.prompt_mode,
            (_, Some(requested)) => requested,
        };
        let mut system = self
            .request_system(
                &tool_defs,
                &specs,
                text_tools,
                &tool_ctx,
                instructions,
                mode,
            )
            .await;
        let max_tokens = match (req.options.max_tokens, s.max_tokens) {
            (Some(asked), Some(cap)) => Some(asked.min(cap)),
            (asked, cap) => asked.or(cap),
        };
        let mut extra_body = if text_tools {
            tool_intent::guided_body(intent, &specs)
        } else {
            Default::default()
        };
        if let Some(top_p) = req.options.top_p {
            extra_body.insert("top_p".into(), serde_json::json!(top_p));
        }

        let mut usage = Usage::default();
        let mut answered_by = (s.provider.clone(), s.model.clone());
        let mut compaction = CompactionState::default();
        // Everything but the messages is fixed for the run: built once, not per call.
        let mut chat = ChatRequest {
            model: s.model.clone(),
            system: Some(system.clone()),
            messages: Vec::new(),
            tools: if text_tools {
                Vec::new()
            } else {
                tool_defs.clone()
            },
            max_tokens,
            temperature: req.options.temperature.or(s.temperature),
            stream: s.stream,
            extra_body,
            max_reply_bytes: Some(s.max_reply_bytes),
            thinking_budget: s.thinking_budget,
        };
        // Per run, not per turn: only one turn's tools run at a time anyway.
        let run_slots = tokio::sync::Semaphore::new(s.max_concurrent_tools.max(1));
        for iteration in 1..=s.max_iterations {
            let estimate = match s.context_budget {
                Some(budget) => {
                    let mut messages = self.prepare(&context, &req.session_key);
                    let estimate =
                        self.fit_budget(budget, &mut messages, &chat, iteration, emitter)?;
                    chat.messages = self.text_form(messages, text_tools);
                    estimate
                }
                None => {
                    chat.messages = self.prepare_request(&context, &req.session_key, text_tools);
                    compaction::estimate_request(&system, &chat.tools, &chat.messages, &s.model)
                }
            };
            if s.context_budget.is_none()
                && !compaction.tried_this_run
                && compaction::should_compact(estimate, chat.messages.len(), &s.compaction)
            {
                compaction.tried_this_run = true;
                if self
                    .compact_log(&mut *log, &chat, &tool_ctx, cancel, &mut compaction)
                    .await?
                {
                    context = log.context();
                    chat.messages = self.prepare_request(&context, &req.session_key, text_tools);
                }
            }

            // One iteration may take several calls: a context overflow is answered by
            // compacting (up to 3 times), then by cutting tool results, then it fails.
            let response = loop {
                // Streamed text is kept so an abort can still record what the user saw.
                let partial = Mutex::new(String::new());
                let sink = |d: StreamDelta| match d {
                    StreamDelta::Text(t) => {
                        if let Ok(mut p) = partial.lock() {
                            p.push_str(&t);
                        }
                        emitter.emit(EventKind::AssistantDelta { text: t });
                    }
                    StreamDelta::Reasoning(t) => {
                        emitter.emit(EventKind::ReasoningDelta { text: t })
                    }
                    StreamDelta::ToolCallStart { .. } | StreamDelta::ToolCallArguments { .. } => {
                        guards.progress.tick()
                    }
                    StreamDelta::Retrying {
                        attempt,
                        delay,
                        status,
                        error,
                    } => emitter.emit(EventKind::ModelRetry {
                        attempt,
                        delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                        status,
                        error,
                    }),
                };

                emitter.emit(EventKind::ModelRequest {
                    iteration,
                    messages: chat.messages.len(),
                    estimated_tokens: estimate as u64,
                });
                let call_started = Instant::now();
                let span = tracing::info_span!(
                    "llm.call",
                    otel.name = %format_args!("chat {}", chat.model),
                    otel.kind = "client",
                    gen_ai.operation.name = "chat",
                    gen_ai.request.model = %chat.model,
                    iteration,
                    gen_ai.system = tracing::field::Empty,
                    gen_ai.response.model = tracing::field::Empty,
                    gen_ai.usage.input_tokens = tracing::field::Empty,
                    gen_ai.usage.output_tokens = tracing::field::Empty,
                    gen_ai.response.finish_reasons = tracing::field::Empty,
                    error = tracing::field::Empty,
                );
                let answer = self
                    .provider
                    .chat(&chat, &sink, cancel)
                    .instrument(span.clone())
                    .await;
                match &answer {
                    Ok(r) => {
                        span.record("gen_ai.system", r.provider.as_str());
                        span.record("gen_ai.response.model", r.model.as_str());
                        span.record("gen_ai.usage.input_tokens", r.usage.input);
                        span.record("gen_ai.usage.output_tokens", r.usage.output);
                        span.record(
                            "gen_ai.response.finish_reasons",
                            tracing::field::debug(r.stop_reason),
                        );
                    }
                    Err(e) => {
                        span.record("error", tracing::field::display(e));
                    }
                }
                drop(span);
                match answer {
                    Ok(r) => break (r, call_started.elapsed()),
                    Err(_) if cancel.is_cancelled() => {
                        let text = partial.into_inner().unwrap_or_default();
                        let why = guards.cause.get();
                        self.record_interrupted(&mut *log, &text, &answered_by, why)
                            .await?;
                        return Err(self.interrupt_error(why, &req.options));
                    }
                    Err(e)
                        if e.kind == ErrorKind::ContextOverflow
                            && !e.streamed
                            && s.context_budget.is_none() =>
                    {
                        compaction.overflows += 1;
                        tracing::warn!(session = %req.session_key, attempt = compaction.overflows, error = %e, "context overflow");
                        if compaction.overflows <= MAX_OVERFLOW_COMPACTIONS
                            && self
                                .compact_log(&mut *log, &chat, &tool_ctx, cancel, &mut compaction)
                                .await?
                        {
                            context = log.context();
                            chat.messages =
                                self.prepare_request(&context, &req.session_key, text_tools);
                            continue;
                        }
                        if !compaction.truncated {
                            compaction.truncated = true;
                            if compaction::truncate_tool_results(
                                &mut chat.messages,
                                OVERFLOW_TOOL_RESULT_CHARS,
                            ) > 0
                            {
                                continue;
                            }
                        }
                        log.flush().await?;
                        return Err(RunError::Provider(e));
                    }
                    Err(e)
                        if intent.mode == ToolMode::Auto
                            && !text_tools
                            && e.kind == ErrorKind::BadRequest
                            && !e.streamed
                            && tool_intent::rejects_tools(&e.message) =>
                    {
                        tracing::warn!(error = %e, "the server refused `tools`; this run calls tools through text");
                        text_tools = true;
                        system = self
                            .request_system(&tool_defs, &specs, true, &tool_ctx, instructions, mode)
                            .await;
                        chat.system = Some(system.clone());
                        chat.tools = Vec::new();
                        let top_p = chat.extra_body.remove("top_p");
                        chat.extra_body = tool_intent::guided_body(intent, &specs);
                        if let Some(top_p) = top_p {
                            chat.extra_body.insert("top_p".into(), top_p);
                        }
                        chat.messages = tool_intent::downgrade_history(
                            std::mem::take(&mut chat.messages),
                            intent.prompt_strategy,
                        );
                        continue;
                    }
                    Err(e) => {
                        if e.kind == ErrorKind::ReplyTooLarge {
                            tracing::warn!(
                                target: "security.reply_too_large",
                                agent = %s.id,
                                session = %req.session_key,
                                limit = s.max_reply_bytes,
                                error = %e,
                                "model reply over the cap was discarded"
                            );
                        }
                        // The user's message stays: it was accepted, and the next turn sees it.
                        // Nothing of a failed reply is written, so the transcript stays valid.
                        log.flush().await?;
                        return Err(RunError::Provider(e));
                    }
                }
            };
            let (response, call_elapsed) = response;
            usage.add(&response.usage);
            answered_by = (response.provider.clone(), response.model.clone());
            emitter.emit(EventKind::ModelResponse {
                iteration,
                provider: response.provider.clone(),
                model: response.model.clone(),
                usage: response.usage,
                stop_reason: response.stop_reason,
                output_chars: output_chars(&response.content),
                elapsed_ms: u64::try_from(call_elapsed.as_millis()).unwrap_or(u64::MAX),
            });
            if let Some(budget) = s.context_budget {
                let used = response.usage.input + response.usage.output;
                if used > budget.tokens {
                    log.flush().await?;
                    return Err(RunError::ContextBudget {
                        needed: used,
                        budget: budget.tokens,
                    });
                }
            }

            let mut content = response.content;
            let mut stop_reason = response.stop_reason;
            let native_calls: Vec<String> = content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolCall { name, .. } => Some(name.clone()),
                    _ => None,
                })
                .collect();
            if !native_calls.is_empty() {
                emitter.emit(EventKind::ToolIntents {
                    iteration,
                    names: native_calls,
                    strategy: "native".into(),
                });
            } else if intent.mode != ToolMode::Native {
                let salt = format!("{}{iteration}", &run_id[run_id.len().saturating_sub(8)..]);
                let found = tool_intent::apply_intents(
                    &mut content,
                    &mut stop_reason,
                    &specs,
                    &intent.parser,
                    &salt,
                );
                let mut strategy = found.strategy.map(|s| s.as_str());
                if strategy.is_some()
                    && !self
                        .complete_intents(
                            &specs,
                            &chat,
                            text_tools,
                            &mut content,
                            &mut stop_reason,
                            &mut usage,
                            cancel,
                        )
                        .await
                {
                    strategy = None;
                }
                if strategy.is_none() {
                    if let Some(u) = found.unsure.first() {
                        strategy = self
                            .confirm_intent(
                                u,
                                &specs,
                                &chat,
                                text_tools,
                                &mut content,
                                &mut stop_reason,
                                &salt,
                                &mut usage,
                                cancel,
                            )
                            .await;
                    }
                }
                if let Some(strategy) = strategy {
                    emitter.emit(EventKind::ToolIntents {
                        iteration,
                        names: content
                            .iter()
                            .filter_map(|b| match b {
                                ContentBlock::ToolCall { name, .. } => Some(name.clone()),
                                _ => None,
                            })
                            .collect(),
                        strategy: strategy.to_string(),
                    });
                }
            }
            let assistant = AssistantMessage {
                content,
                provider: response.provider,
                model: response.model,
                usage: response.usage,
                stop_reason,
                error_message: None,
                timestamp: ferroclaw_types::now_millis(),
            };
            log.append(EntryBody::Message {
                message: Message::Assistant(assistant.clone()),
            })
            .await?;

            let calls: Vec<(String, String, Value)> = assistant
                .tool_calls()
                .map(|(id, name, args)| (id.to_string(), name.to_string(), args.clone()))
                .collect();
            let final_text = assistant.text();
            let reasoning: String = assistant
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Thinking { thinking, .. } => Some(thinking.as_str()),
                    _ => None,
                })
                .collect();
            let stop_reason = assistant.stop_reason;
            context.push(Message::Assistant(assistant));

            if calls.is_empty() {
                log.flush().await?;
                self.store
                    .record_run(
                        &s.id,
                        &req.session_key,
                        &answered_by.0,
                        &answered_by.1,
                        &usage,
                    )
                    .await?;
                let text = sanitize_output(&final_text);
                return Ok(RunOutput {
                    run_id: run_id.to_string(),
                    session_id: log.session_id().to_string(),
                    silent: is_silent(&text),
                    text,
                    reasoning,
                    stop_reason,
                    usage,
                    iterations: iteration,
                    provider: answered_by.0,
                    model: answered_by.1,
                });
            }

            let max_calls = s.max_tool_calls_per_turn.max(1);
            if calls.len() > max_calls {
                tracing::warn!(
                    target: "security.tool_calls",
                    agent = %s.id,
                    session = %req.session_key,
                    requested = calls.len(),
                    limit = max_calls,
                    "model asked for more tool calls in one turn than allowed; the rest are refused"
                );
            }
            // Calls run concurrently within the run's and the process's slots; join_all
            // keeps results in call order. Every call gets exactly one result, refused or not.
            guards.phase.set_tools(true);
            let results = join_all(calls.iter().enumerate().map(|(i, (id, name, args))| {
                let run_slots = &run_slots;
                let tool_ctx = &tool_ctx;
                async move {
                    if i >= max_calls {
                        let refused = self.refused_tool(
                            id,
                            name,
                            format!("refused: more than {max_calls} tool calls in one turn"),
                        );
                        return (refused, None);
                    }
                    let done = self
                        .call_tool(id, name, args, tool_ctx, emitter, run_slots)
                        .await;
                    let failed = matches!(&done.0, Message::ToolResult(r) if r.is_error);
                    if failed && tool_ctx.cancel.is_cancelled() {
                        guards.interrupted_tools.fetch_add(1, Ordering::SeqCst);
                    }
                    done
                }
            }))
            .await;
            guards.phase.set_tools(false);
            let mut unavailable = None;
            for (result, ends_run) in results {
                if unavailable.is_none() {
                    unavailable = ends_run.map(|tool| (tool, result.text()));
                }
                log.append(EntryBody::Message {
                    message: result.clone(),
                })
                .await?;
                context.push(result);
            }
            if let Some((tool, message)) = unavailable {
                log.flush().await?;
                return Err(RunError::ToolUnavailable { tool, message });
            }
            if cancel.is_cancelled() {
                log.flush().await?;
                return Err(self.interrupt_error(guards.cause.get(), &req.options));
            }
        }

        log.flush().await?;
        self.store
            .record_run(
                &s.id,
                &req.session_key,
                &answered_by.0,
                &answered_by.1,
                &usage,
            )
            .await?;
        Err(RunError::IterationLimit(s.max_iterations))
    }

    /// `intent.confirm` for calls read from text without a required argument: the model
    /// is asked for each (at most two a turn); a confirmed call gets the answer's
    /// arguments, a declined one is dropped, and a failed confirmation leaves the call
    /// as it was (the tool then says what is missing). Returns whether any call is left.
    #[allow(clippy::too_many_arguments)]
    async fn complete_intents(
        &self,
        specs: &[ferroclaw_intent::ToolSpec],
        chat: &ChatRequest,
        text_tools: bool,
        content: &mut Vec<ContentBlock>,
        stop: &mut StopReason,
        usage: &mut Usage,
        cancel: &CancellationToken,
    ) -> bool {
        let intent = &self.settings.intent;
        let Some(form) = ConfirmForm::choose(intent.confirm, intent.guided, !text_tools) else {
            return true;
        };
        let incomplete: Vec<usize> = content
            .iter()
            .enumerate()
            .filter_map(|(i, b)| match b {
                ContentBlock::ToolCall {
                    id,
                    name,
                    arguments,
                } if tool_intent::is_text_call(id) => {
                    let spec = specs.iter().find(|s| &s.name == name)?;
                    (!intent_confirm::has_required(arguments, spec)).then_some(i)
                }
                _ => None,
            })
            .take(2)
            .collect();
        if incomplete.is_empty() {
            return true;
        }
        let user_text = last_user_text(chat);
        let answer = tool_intent::turn_text(content);
        let mut dropped = Vec::new();
        for i in incomplete {
            let ContentBlock::ToolCall {
                name, arguments, ..
            } = &content[i]
            else {
                continue;
            };
            let Some(spec) = specs.iter().find(|s| &s.name == name) else {
                continue;
            };
            let unsure = ferroclaw_intent::Unsure {
                name: name.clone(),
                arguments: arguments.clone(),
                strategy: ferroclaw_intent::Strategy::Fuzzy,
                source: ferroclaw_intent::Source::Content,
                excerpt: String::new(),
            };
            let question = intent_confirm::Question {
                model: &chat.model,
                unsure: &unsure,
                spec,
                user_text: &user_text,
                answer_text: &answer,
            };
            let done = intent_confirm::confirm(&*self.provider, &question, form, cancel).await;
            usage.add(&done.usage);
            match (done.call, done.form) {
                (Some((_, args)), _) => {
                    if let ContentBlock::ToolCall { arguments, .. } = &mut content[i] {
                        *arguments = args;
                    }
                }
                (None, Some(_)) => dropped.push(i),
                (None, None) => {}
            }
        }
        for i in dropped.into_iter().rev() {
            content.remove(i);
        }
        let left = content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolCall { .. }));
        if !left {
            *stop = StopReason::Stop;
        }
        left
    }

    /// `intent.confirm`: asks the model for the call its text was unsure about and, when
    /// it answers with one, adds it to the turn. Returns the strategy name for the event.
    #[allow(clippy::too_many_arguments)]
    async fn confirm_intent(
        &self,
        unsure: &ferroclaw_intent::Unsure,
        specs: &[ferroclaw_intent::ToolSpec],
        chat: &ChatRequest,
        text_tools: bool,
        content: &mut Vec<ContentBlock>,
        stop: &mut StopReason,
        salt: &str,
        usage: &mut Usage,
        cancel: &CancellationToken,
    ) -> Option<&'static str> {
        let intent = &self.settings.intent;
        let form = ConfirmForm::choose(intent.confirm, intent.guided, !text_tools)?;
        let spec = specs.iter().find(|s| s.name == unsure.name)?;
        let user_text = last_user_text(chat);
        let answer = tool_intent::turn_text(content);
        let question = intent_confirm::Question {
            model: &chat.model,
            unsure,
            spec,
            user_text: &user_text,
            answer_text: &answer,
        };
        let done = intent_confirm::confirm(&*self.provider, &question, form, cancel).await;
        usage.add(&done.usage);
        let (name, arguments) = done.call?;
        tool_intent::push_confirmed(content, stop, name, arguments, salt);
        Some("confirm")
    }

    /// The system prompt for a request: with the tool-calling section when tools are
    /// called through text.
    async fn request_system(
        &self,
        tools: &[ToolDefinition],
        specs: &[ferroclaw_intent::ToolSpec],
        text_tools: bool,
        tool_ctx: &ToolContext,
        instructions: Option<&str>,
        mode: PromptMode,
    ) -> String {
        let instructions = instructions.map(str::trim).filter(|i| !i.is_empty());
        if self.settings.prompt_mode == PromptMode::Bare {
            // The client's instructions, then how to call tools: nothing of ours besides.
            let tools_part =
                text_tools.then(|| tool_intent::render_prompt(&self.settings.intent, specs));
            return match (instructions, tools_part) {
                (Some(i), Some(t)) => format!("{i}\n\n{t}"),
                (Some(i), None) => i.to_string(),
                (None, Some(t)) => t,
                (None, None) => String::new(),
            };
        }
        let mut system = self.system_prompt(tools, text_tools, tool_ctx, mode).await;
        if let Some(i) = instructions {
            system.push_str("\n\n## Instructions for this run\n");
            system.push_str(i);
        }
        if text_tools {
            system.push_str(&tool_intent::system_section(&self.settings.intent, specs));
        }
        system
    }

    /// Shortens, then omits, older tool results until the request fits the budget;
    /// returns the estimate of the prompt that will be sent.
    fn fit_budget(
        &self,
        budget: ContextBudget,
        messages: &mut [Message],
        chat: &ChatRequest,
        iteration: u32,
        emitter: &Emitter,
    ) -> Result<usize, RunError> {
        let model = &self.settings.model;
        let system = chat.system.as_deref().unwrap_or_default();
        let estimate =
            |m: &[Message]| compaction::estimate_request(system, &chat.tools, m, model) as u64;
        // The newest turn's results are what the model needs next; only older ones give way.
        let newest_turn = messages
            .iter()
            .rposition(|m| matches!(m, Message::Assistant(_)))
            .unwrap_or(0);
        let older: Vec<usize> = messages[..newest_turn]
            .iter()
            .enumerate()
            .filter(|(_, m)| matches!(m, Message::ToolResult(_)))
            .map(|(i, _)| i)
            .collect();
        let tokens = budget.tokens as f64;
        let mut est = estimate(messages);
        let stages = [(budget.shorten_at, false), (budget.omit_at, true)];
        for (at, omit) in stages {
            if older.is_empty() || (est as f64) < at * tokens {
                continue;
            }
            for &i in &older {
                if let Some(Message::ToolResult(r)) = messages.get_mut(i) {
                    let text = if omit {
                        OMITTED_TOOL_RESULT.to_string()
                    } else {
                        let t = r.text();
                        if t.chars().count() <= budget.shortened_chars {
                            continue;
                        }
                        history::head_tail(&t, budget.shortened_chars)
                    };
                    r.content = vec![ContentBlock::text(text)];
                }
            }
            let after = estimate(messages);
            emitter.emit(EventKind::ContextTrimmed {
                iteration,
                omitted: omit,
                tokens_before: est,
                tokens_after: after,
            });
            est = after;
        }
        let answer = u64::from(chat.max_tokens.unwrap_or(0));
        if est + answer > budget.tokens {
            return Err(RunError::ContextBudget {
                needed: est + answer,
                budget: budget.tokens,
            });
        }
        Ok(usize::try_from(est).unwrap_or(usize::MAX))
    }

    /// The history pipeline, plus the text form of tool turns when tools are called
    /// through text.
    fn prepare_request(
        &self,
        context: &[Message],
        session_key: &str,
        text_tools: bool,
    ) -> Vec<Message> {
        let messages = self.prepare(context, session_key);
        self.text_form(messages, text_tools)
    }

    /// Tool turns as the model is to see them: all as text when tools are called
    /// through text, else those it wrote as text (`auto` mode).
    fn text_form(&self, messages: Vec<Message>, text_tools: bool) -> Vec<Message> {
        let intent = &self.settings.intent;
        if text_tools {
            tool_intent::downgrade_history(messages, intent.prompt_strategy)
        } else if intent.mode == ToolMode::Auto {
            tool_intent::downgrade_text_calls(messages, intent.prompt_strategy)
        } else {
            messages
        }
    }

    /// The history pipeline, logging when it had to repair the pairing.
    fn prepare(&self, context: &[Message], session_key: &str) -> Vec<Message> {
        let (messages, repair) = history::prepare(context, self.settings.history);
        if !repair.is_clean() {
            tracing::warn!(
                session = %session_key,
                orphans = repair.dropped_orphans.len(),
                duplicates = repair.dropped_duplicates.len(),
                synthesized = repair.synthesized.len(),
                "repaired tool-call pairing in context"
            );
            self.report_runtime_repair(session_key, &repair);
        }
        messages
    }

    /// Records an incident for a pairing repair made in memory before an LLM call (the
    /// transcript itself was fine on load, or was trimmed into this shape by the pipeline).
    fn report_runtime_repair(&self, session_key: &str, repair: &history::RepairReport) {
        let issue = |kind: IssueKind, id: &String, what: &str| Issue {
            kind,
            line: 0,
            entry_id: None,
            tool_call_id: Some(id.clone()),
            description: format!("{what} (repaired in the request context)"),
        };
        let mut issues = Vec::new();
        issues.extend(repair.dropped_orphans.iter().map(|id| {
            issue(
                IssueKind::OrphanedToolResult,
                id,
                "result without its call was dropped",
            )
        }));
        issues.extend(repair.dropped_duplicates.iter().map(|id| {
            issue(
                IssueKind::DuplicateToolResult,
                id,
                "second result for a call was dropped",
            )
        }));
        issues.extend(repair.synthesized.iter().map(|id| {
            issue(
                IssueKind::MissingToolResult,
                id,
                "call without result got a placeholder",
            )
        }));
        let incident = Incident {
            timestamp: String::new(),
            agent_id: Some(self.settings.id.clone()),
            session_key: Some(session_key.to_string()),
            file: None,
            issues,
            action: "detected_at_runtime".into(),
            backup: None,
        };
        // Rare and small; the run does not wait for the report.
        let store = self.store.clone();
        tokio::spawn(async move {
            if let Err(e) = store.report_incident(incident).await {
                tracing::warn!(error = %e, "could not write integrity incident");
            }
        });
    }

    /// Records a stalled run as an incident (beside the integrity incidents, so `status`
    /// and the dashboard list both).
    async fn report_stall(
        &self,
        session_key: &str,
        user: Option<&str>,
        idle_ms: u64,
        interrupted_tools: usize,
    ) {
        let key = match user {
            Some(u) if self.settings.per_user_workspace => {
                crate::user_scope::scoped_key(u, session_key)
            }
            _ => session_key.to_string(),
        };
        let incident = Incident {
            timestamp: String::new(),
            agent_id: Some(self.settings.id.clone()),
            session_key: Some(key),
            file: None,
            issues: vec![Issue {
                kind: IssueKind::StalledRun,
                line: 0,
                entry_id: None,
                tool_call_id: None,
                description: format!(
                    "nothing progressed for {} s; the run was stopped, {interrupted_tools} tool call(s) recorded as interrupted, the session freed",
                    idle_ms / 1000
                ),
            }],
            action: "run_stalled".into(),
            backup: None,
        };
        if let Err(e) = self.store.report_incident(incident).await {
            tracing::warn!(error = %e, "could not record the stalled run");
        }
    }

    /// Summarises the older part of the session and appends a `compaction` entry.
    /// Returns whether the context changed. A failed summary is recorded in the
    /// transcript and the run goes on with the full history; the next run tries again.
    /// `chat` is the request about to be sent: its size is the "before" figure.
    async fn compact_log(
        &self,
        log: &mut dyn SessionLog,
        chat: &ChatRequest,
        tool_ctx: &ToolContext,
        cancel: &CancellationToken,
        state: &mut CompactionState,
    ) -> Result<bool, RunError> {
        // The summary streams to no one, so it shows no progress; its provider's idle
        // time-out and the run's time-out bound it instead of the stall watchdog.
        let _summarising = tool_ctx.progress.hold();
        let s = &self.settings;
        let system = chat.system.as_deref().unwrap_or_default();
        let messages = &chat.messages;
        let tokens_before = compaction::estimate_request(system, &chat.tools, messages, &s.model);
        let Some(plan) = compaction::plan(log.entries(), &s.compaction, &s.model) else {
            return Ok(false);
        };
        if s.compaction.memory_flush && !state.flushed {
            state.flushed = true;
            self.memory_flush(messages, system, tool_ctx, cancel).await;
        }
        match compaction::summarize(&*self.provider, &s.model, &plan, &s.compaction, cancel).await {
            Ok(summary) => {
                let tokens_after = compaction::estimate_text_tokens(&summary, &s.model)
                    + plan.kept_tokens
                    + compaction::estimate_text_tokens(system, &s.model);
                log.append(EntryBody::Compaction {
                    summary,
                    first_kept_entry_id: plan.first_kept_entry_id,
                    tokens_before: tokens_before as u64,
                    tokens_after: Some(tokens_after as u64),
                })
                .await?;
                log.flush().await?;
                tracing::info!(
                    agent = %s.id,
                    session = %tool_ctx.session_key,
                    tokens_before,
                    tokens_after,
                    summarized = plan.summarize.len(),
                    "compacted session history"
                );
                Ok(true)
            }
            Err(e) if cancel.is_cancelled() => {
                tracing::info!(error = %e, "compaction interrupted");
                Ok(false)
            }
            Err(e) => {
                tracing::warn!(session = %tool_ctx.session_key, error = %e, "compaction failed; continuing with the full history");
                log.append(EntryBody::Custom {
                    custom_type: "compaction_failed".into(),
                    data: serde_json::json!({
                        "error": e.to_string(),
                        "tokensBefore": tokens_before,
                    }),
                })
                .await?;
                Ok(false)
            }
        }
    }

    /// Gives the model a few tool calls to save durable notes before its history is
    /// summarised. Best effort: failures are logged, never fatal; nothing of this side
    /// conversation enters the transcript except the files it writes.
    async fn memory_flush(
        &self,
        context: &[Message],
        system: &str,
        tool_ctx: &ToolContext,
        cancel: &CancellationToken,
    ) {
        let s = &self.settings;
        let today = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        let today = today.get(..10).unwrap_or("today").to_string();
        let tools: Vec<ToolDefinition> = self
            .tools
            .definitions()
            .into_iter()
            .filter(|t| MEMORY_FLUSH_TOOLS.contains(&t.name.as_str()))
            .collect();
        let mut messages = context.to_vec();
        messages.push(Message::user(compaction::memory_flush_prompt(&today)));
        for _ in 0..MEMORY_FLUSH_ITERATIONS {
            let req = ChatRequest {
                model: s.model.clone(),
                system: Some(system.to_string()),
                messages: messages.clone(),
                tools: tools.clone(),
                max_tokens: s.max_tokens,
                temperature: s.temperature,
                stream: false,
                extra_body: Default::default(),
                max_reply_bytes: Some(s.max_reply_bytes),
                thinking_budget: None,
            };
            let resp = match self
                .provider
                .chat(&req, &ferroclaw_providers::NoSink, cancel)
                .await
            {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(error = %e, "memory flush call failed");
                    return;
                }
            };
            let assistant = AssistantMessage {
                content: resp.content,
                provider: resp.provider,
                model: resp.model,
                usage: resp.usage,
                stop_reason: resp.stop_reason,
                error_message: None,
                timestamp: ferroclaw_types::now_millis(),
            };
            let calls: Vec<(String, String, Value)> = assistant
                .tool_calls()
                .map(|(id, name, args)| (id.to_string(), name.to_string(), args.clone()))
                .collect();
            messages.push(Message::Assistant(assistant));
            if calls.is_empty() {
                return;
            }
            let max_calls = s.max_tool_calls_per_turn.max(1);
            for (i, (id, name, args)) in calls.into_iter().enumerate() {
                // Only the memory tools were offered; refuse anything else the model names.
                let result = if i >= max_calls {
                    ferroclaw_tools::ToolResult::error(format!(
                        "refused: more than {max_calls} tool calls in one turn"
                    ))
                } else if tools.iter().any(|t| t.name == name) {
                    self.tools.execute(&name, tool_ctx, args).await
                } else {
                    ferroclaw_tools::ToolResult::error(format!(
                        "`{name}` is not available during the memory flush"
                    ))
                };
                messages.push(Message::tool_result(
                    id,
                    name,
                    result.for_llm,
                    result.is_error,
                ));
            }
        }
    }

    /// Forces a compaction of a session (`/compact`). Returns the token estimates before
    /// and after, or `None` when there was nothing old enough to summarise.
    pub async fn compact_session(
        &self,
        session_key: &str,
        cancel: CancellationToken,
    ) -> Result<Option<(u64, u64)>, RunError> {
        let s = &self.settings;
        // A per-user session is compacted (and its memory flushed) as its owner.
        let owner = crate::user_scope::owner(session_key);
        let (workspace, user) = self.run_workspace(owner.as_deref())?;
        let mut log = self.store.open(&s.id, session_key).await?;
        let tool_ctx = ToolContext {
            agent_id: s.id.clone(),
            session_key: crate::tool_scope(&s.id, session_key),
            workspace,
            cancel: cancel.clone(),
            user,
            acting_user: owner.clone(),
            group_chat: false,
            progress: Default::default(),
            run_id: String::new(),
        };
        let tool_defs = self.tools.definitions_for(&tool_ctx);
        let system = self
            .system_prompt(&tool_defs, false, &tool_ctx, s.prompt_mode)
            .await;
        let chat = ChatRequest {
            model: s.model.clone(),
            system: Some(system),
            messages: self.prepare(&log.context(), session_key),
            tools: tool_defs,
            ..Default::default()
        };
        let mut state = CompactionState::default();
        let size = |messages: &[Message]| {
            let system = chat.system.as_deref().unwrap_or_default();
            compaction::estimate_request(system, &chat.tools, messages, &s.model) as u64
        };
        let before = size(&chat.messages);
        if !self
            .compact_log(&mut *log, &chat, &tool_ctx, &cancel, &mut state)
            .await?
        {
            return Ok(None);
        }
        let after = size(&self.prepare(&log.context(), session_key));
        Ok(Some((before, after)))
    }

    async fn call_tool(
        &self,
        id: &str,
        name: &str,
        args: &Value,
        ctx: &ToolContext,
        emitter: &Emitter,
        run_slots: &tokio::sync::Semaphore,
    ) -> (Message, Option<String>) {
        // Waiting on other runs (for a slot, or for a run a session tool started) is not
        // this run stalling; that run has a watchdog of its own.
        let waiting = ctx.progress.hold();
        // Waiting for a slot must not outlive the run: an abort answers the call instead.
        let acquired = tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => None,
            permits = async {
                let run = run_slots.acquire().await.ok()?;
                let process = if waits_on_other_runs(name) {
                    None
                } else {
                    Some(self.settings.tool_slots.slots.acquire().await.ok()?)
                };
                Some((run, process))
            } => permits,
        };
        if !waits_on_other_runs(name) {
            drop(waiting);
        }
        let Some(_permits) = acquired else {
            let refused = self.refused_tool(
                id,
                name,
                "not run: the run ended before the tool started".into(),
            );
            return (refused, None);
        };
        emitter.emit(EventKind::ToolStart {
            call_id: id.to_string(),
            name: name.to_string(),
            arguments: args.clone(),
        });
        let started = Instant::now();
        let result = match args {
            // Providers hand over argument text that was not valid JSON as a string.
            Value::String(raw) => ferroclaw_tools::ToolResult::error(format!(
                "tool arguments were not valid JSON; send a JSON object. Received: {}",
                truncate_chars(raw, 200)
            )),
            _ => self.tools.execute(name, ctx, args.clone()).await,
        };
        emitter.emit(EventKind::ToolResult {
            call_id: id.to_string(),
            name: name.to_string(),
            is_error: result.is_error,
            duration_ms: started.elapsed().as_millis() as u64,
            preview: truncate_chars(&result.for_llm, 500).to_string(),
        });
        let mut message = ToolResultMessage {
            tool_call_id: id.to_string(),
            tool_name: name.to_string(),
            content: vec![ContentBlock::text(result.for_llm)],
            is_error: result.is_error,
            timestamp: ferroclaw_types::now_millis(),
        };
        // Same cap as the stored copy, so the model sees what the transcript keeps.
        cap_tool_result(&mut message, self.settings.tool_result_max_chars);
        let ends_run = result.ends_run.then(|| name.to_string());
        (Message::ToolResult(message), ends_run)
    }

    /// The error result of a call that was not executed.
    fn refused_tool(&self, id: &str, name: &str, reason: String) -> Message {
        Message::ToolResult(ToolResultMessage {
            tool_call_id: id.to_string(),
            tool_name: name.to_string(),
            content: vec![ContentBlock::text(reason)],
            is_error: true,
            timestamp: ferroclaw_types::now_millis(),
        })
    }

    /// Writes what an interrupted LLM call had produced, marked aborted, so the
    /// transcript shows the run ended and the next turn starts clean.
    async fn record_interrupted(
        &self,
        log: &mut dyn SessionLog,
        partial_text: &str,
        answered_by: &(String, String),
        why: Interrupt,
    ) -> Result<(), RunError> {
        let reason = match why {
            Interrupt::Aborted => "aborted",
            Interrupt::TimedOut => "timed out",
            Interrupt::Stalled => "stalled: nothing progressed",
        };
        let mut content = Vec::new();
        if !partial_text.is_empty() {
            content.push(ContentBlock::text(partial_text));
        }
        log.append(EntryBody::Message {
            message: Message::Assistant(AssistantMessage {
                content,
                provider: answered_by.0.clone(),
                model: answered_by.1.clone(),
                usage: Usage::default(),
                stop_reason: StopReason::Aborted,
                error_message: Some(format!("run {reason}")),
                timestamp: ferroclaw_types::now_millis(),
            }),
        })
        .await?;
        log.flush().await?;
        Ok(())
    }

    fn interrupt_error(&self, why: Interrupt, options: &RunOptions) -> RunError {
        match why {
            Interrupt::Aborted => RunError::Aborted,
            Interrupt::TimedOut => RunError::Timeout(self.timeout_of(options)),
            Interrupt::Stalled => {
                RunError::Stalled(self.settings.stall_timeout.unwrap_or_default())
            }
        }
    }

    fn timeout_of(&self, options: &RunOptions) -> Duration {
        options
            .timeout
            .map_or(self.settings.timeout, |t| t.min(self.settings.timeout))
    }

    /// The workspace and user of a run on behalf of `user`: the user's sub-workspace
    /// on a per-user agent (where a user is required), the agent's workspace otherwise.
    fn run_workspace(
        &self,
        user: Option<&str>,
    ) -> Result<(PathBuf, Option<ferroclaw_tools::ToolUser>), RunError> {
        let s = &self.settings;
        if !s.per_user_workspace {
            return Ok((s.workspace.clone(), None));
        }
        let Some(user_id) = user else {
            tracing::warn!(
                target: "security.users",
                agent = %s.id,
                "run without a user on a per-user agent refused"
            );
            return Err(RunError::UserRequired);
        };
        let dir = ferroclaw_tools::path_guard::ensure_user_workspace(&s.workspace, user_id)
            .map_err(|e| {
                // The path is for the operator's log, not for the model or the client.
                tracing::warn!(
                    target: "security.users",
                    agent = %s.id,
                    error = %e,
                    "user workspace could not be prepared"
                );
                let why = match e.kind() {
                    std::io::ErrorKind::Other => {
                        "it exists but is not a plain directory".to_string()
                    }
                    kind => kind.to_string(),
                };
                RunError::Workspace(format!("the user's workspace could not be prepared: {why}"))
            })?;
        let user = ferroclaw_tools::ToolUser {
            id: user_id.to_string(),
            root_workspace: s.workspace.clone(),
        };
        Ok((dir, Some(user)))
    }

    async fn system_prompt(
        &self,
        tools: &[ToolDefinition],
        tool_calls_as_text: bool,
        tool_ctx: &ToolContext,
        mode: PromptMode,
    ) -> String {
        let s = &self.settings;
        let files = match (&self.context, &tool_ctx.user) {
            (Some(source), user) => {
                prompt::load_source_files(
                    source.as_ref(),
                    user.as_ref().map(|u| u.id.as_str()),
                    mode,
                    s.context_files,
                )
                .await
            }
            // Agent-level files from the root, then the user's own; never another user's.
            (None, Some(u)) => {
                prompt::load_user_context_files(
                    &u.root_workspace,
                    &tool_ctx.workspace,
                    mode,
                    s.context_files,
                )
                .await
            }
            (None, None) => prompt::load_context_files(&s.workspace, mode, s.context_files).await,
        };
        let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        prompt::build_system_prompt(&PromptInput {
            agent_id: &s.id,
            agent_name: &s.name,
            mode,
            tools,
            workspace: &tool_ctx.workspace,
            provider: &s.provider,
            model: &s.model,
            context_files: &files,
            now: &now,
            tool_calls_as_text,
        })
    }
}

/// Compactions attempted in answer to context-overflow errors before giving up.
const MAX_OVERFLOW_COMPACTIONS: u32 = 3;
/// Tool results are cut to this on overflow once compaction could not help.
const OVERFLOW_TOOL_RESULT_CHARS: usize = 2_000;
/// Tools the memory flush may use, and how many calls it gets.
const MEMORY_FLUSH_TOOLS: [&str; 3] = ["write", "edit", "read"];
const MEMORY_FLUSH_ITERATIONS: usize = 3;

/// Per-run compaction bookkeeping.
#[derive(Default)]
struct CompactionState {
    /// Threshold compaction runs at most once per run.
    tried_this_run: bool,
    overflows: u32,
    truncated: bool,
    /// The memory flush runs at most once per compaction cycle.
    flushed: bool,
}

/// Tools that only wait for another run (which needs process slots for its own tools)
/// take no process-wide slot: holding one while waiting could starve the very runs they
/// wait for. They still count against their own run's cap; subagents have their lane.
fn waits_on_other_runs(tool: &str) -> bool {
    matches!(tool, "sessions_spawn" | "sessions_send")
}

/// A store error as the model and clients see it: without the host paths of transcript
/// files (the `Debug` form, which logs get, keeps them).
pub fn store_message(e: &StoreError) -> String {
    match e {
        StoreError::Io { source, .. } => format!("I/O error on a session file: {source}"),
        StoreError::Corrupt { message, .. } => format!("a session file is corrupt: {message}"),
        other => other.to_string(),
    }
}

/// Cuts an oversized user message and tells the model it was cut.
fn cap_user_message(text: &str, max_chars: usize) -> String {
    if max_chars == 0 || text.chars().count() <= max_chars {
        return text.to_string();
    }
    let total = text.chars().count();
    format!(
        "{}\n\n[Note: this message was truncated from {} to {} characters.]",
        truncate_chars(text, max_chars),
        total,
        max_chars
    )
}

fn truncate_chars(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_errors_show_no_host_path() {
        let e = RunError::from(StoreError::Io {
            path: "/srv/home/agents/main/sessions/x.jsonl".into(),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        });
        let text = e.to_string();
        assert!(text.contains("I/O error on a session file"), "{text}");
        assert!(!text.contains("/srv"), "{text}");
        let e = RunError::from(StoreError::Corrupt {
            path: "/srv/home/agents/main/sessions.json".into(),
            message: "bad JSON".into(),
        });
        assert!(!e.to_string().contains("/srv"), "{e}");
        assert!(e.to_string().contains("bad JSON"), "{e}");
    }

    #[test]
    fn long_user_message_is_cut_with_note() {
        let out = cap_user_message(&"x".repeat(50), 10);
        assert!(out.starts_with("xxxxxxxxxx\n"));
        assert!(out.contains("truncated from 50 to 10"));
        assert_eq!(cap_user_message("short", 10), "short");
    }
}
