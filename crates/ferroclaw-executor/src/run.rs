//! One executor request as a run of the runtime: the executor is a surface. Its one
//! agent (`tool_mode: intent`, or `auto` with `parser.native_tools`) runs in the same
//! agent loop as every other run, through `ferroclaw_runtime::Runtime::submit`; its
//! tools are the gateway's ([`crate::gateway_tool`]). Each request gets a session of
//! its own in memory, named after the run, seeded with the history the client sent
//! and removed when the run is over.
//!
//! What is the executor's own is rendered here from the run's events: the JSON event
//! log (`executor_run_start`, `gpt_oss_call_*`, `tool_intents_parsed`, …), the error
//! log's lines for the model calls, the token accounting of `executor_metadata`, and the
//! mapping of a failed run to the executor's error codes.
//!
//! The loop's limits come from `executor.yaml`: `max_iterations`, `run_timeout_seconds`
//! (a request's `timeout` can only shorten it), the model's retries with the configured
//! back-off, and a context budget of `context_window_limit - context_buffer_tokens` in
//! which older tool results are shortened at `context_trunc_threshold` and omitted at
//! `context_compact_threshold` (`ferroclaw_agent::ContextBudget`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferroclaw_agent::tool_intent::IntentSettings;
use ferroclaw_agent::{AgentSettings, ContextBudget, RunError, RunOptions};
use ferroclaw_config::settings::{GuidedDecoding, IntentConfirm, PromptMode, ToolMode};
use ferroclaw_intent::{default_aliases, prompts, ParserConfig, Strategy, ToolSpec};
use ferroclaw_providers::{
    ErrorKind, OpenAiCompat, OpenAiCompatConfig, Provider, RetryingProvider,
};
use ferroclaw_runtime::{
    Origin, QueueMode, RunFailure, Runtime, RuntimeOptions, SchedulerConfig, Submit, Submitted,
};
use ferroclaw_store::{MemoryStore, SessionStore};
use ferroclaw_tools::{InputGuardAction, ToolRegistry};
use ferroclaw_types::{EntryBody, EventKind, Message, RunEvent, StopReason};
use serde_json::{json, Value};

use crate::config::{Config, ConfigError, ToolEntry};
use crate::error::{ErrorCode, ExecError};
use crate::errors_log::{Entry, ErrorLog};
use crate::events::EventLog;
use crate::gateway_tool::{builtin_spec, Gateway, GatewayTool};
use crate::tools_client::ToolsClient;

/// The id of the executor's one agent.
const AGENT: &str = "executor";
/// Older tool results are cut to this many chars when the context gets tight.
const SHORTENED_RESULT_CHARS: usize = 600;

/// What a client asked for, already validated.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    /// The client's system/developer messages, joined.
    pub system: Option<String>,
    pub messages: Vec<Message>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub max_tokens: Option<u32>,
    /// Can only shorten the configured run time-out.
    pub timeout: Option<Duration>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    pub run_id: String,
    pub content: String,
    /// Reasoning of the last iteration.
    pub reasoning: String,
    pub finish_reason: &'static str,
    /// Prompt and completion tokens of the last call; total over all calls.
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    pub iterations: u32,
    pub tools_called: Vec<String>,
    pub total_tool_execution_time_ms: u64,
    pub context_usage_percent: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot read {what} {path}: {source}")]
    File {
        what: &'static str,
        path: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Other(String),
}

/// The event log and the error log, shared by the runs and the tools.
pub(crate) struct Logs {
    pub events: Arc<EventLog>,
    pub errors: Arc<ErrorLog>,
}

impl Logs {
    /// Appends to the error log; a log that cannot be written is reported as an event.
    pub fn record(&self, entry: Entry<'_>) {
        if let Err(e) = self.errors.append(entry) {
            self.events.warn(
                "error_log_write_failed",
                json!({"error": e.to_string(), "dir": self.errors.dir().map(|d| d.display().to_string())}),
            );
        }
    }
}

pub struct Executor {
    cfg: Arc<Config>,
    runtime: Runtime,
    /// For `/health`: the upstream's model list, asked without retries.
    upstream: Arc<dyn Provider>,
    tools: Vec<Arc<GatewayTool>>,
    logs: Arc<Logs>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("upstream", &self.cfg.upstream_base())
            .finish()
    }
}

impl Executor {
    pub fn new(
        cfg: Config,
        events: Arc<EventLog>,
        errors: Arc<ErrorLog>,
    ) -> Result<Self, InitError> {
        let mut oc = OpenAiCompatConfig::new("gpt-oss", cfg.upstream_base());
        oc.request_timeout = Duration::from_secs_f64(cfg.executor.gpt_oss_call_timeout_seconds);
        let key = cfg.executor.gpt_oss_api_key.trim();
        if !key.is_empty() {
            oc.api_key = Some(key.to_string());
        }
        let upstream: Arc<dyn Provider> = Arc::new(
            OpenAiCompat::new(oc).map_err(|e| InitError::Other(format!("upstream: {e}")))?,
        );
        let logs = Arc::new(Logs { events, errors });
        let retry = cfg.retry_policy();
        let provider = Arc::new(RetryingProvider::new(upstream.clone(), retry.clone()));
        let gateway = Arc::new(Gateway {
            client: ToolsClient::new(
                &cfg.executor.openclaw_gateway_url,
                cfg.gateway_token(),
                &cfg.executor.session_key,
            ),
            retry,
            logs: logs.clone(),
        });
        let tools: Vec<Arc<GatewayTool>> = cfg
            .tools
            .allowed
            .iter()
            .map(|entry| {
                let (spec, configured) = match entry {
                    ToolEntry::Spec {
                        name,
                        description,
                        parameters,
                        aliases,
                    } => {
                        let params = if parameters.is_object() {
                            parameters.clone()
                        } else {
                            json!({"type": "object", "properties": {}})
                        };
                        let mut spec = ToolSpec::new(name, description, params);
                        spec.aliases = aliases.clone();
                        (spec, true)
                    }
                    ToolEntry::Name(name) => (builtin_spec(name), false),
                };
                Arc::new(GatewayTool::new(&cfg, gateway.clone(), spec, configured))
            })
            .collect();
        let mut registry = ToolRegistry::new();
        for t in &tools {
            registry.register(t.clone());
        }
        let settings = agent_settings(&cfg)?;
        // One store for the agent and the runtime: the history the runtime seeds is
        // what the agent's run reads, and what `delete_session` removes.
        let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new(0));
        let agent =
            ferroclaw_agent::Agent::new(settings, provider, Arc::new(registry), store.clone());
        let runtime = Runtime::with_agents(
            vec![agent],
            store,
            RuntimeOptions {
                scheduler: SchedulerConfig::default(),
                subagents: ferroclaw_runtime::session_tools::SubagentLimits {
                    max_depth: 0,
                    max_children: 0,
                },
                allow_missing_default: false,
            },
        );
        Ok(Executor {
            cfg: Arc::new(cfg),
            runtime,
            upstream,
            tools,
            logs,
        })
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn events(&self) -> &EventLog {
        &self.logs.events
    }

    /// Whether the upstream answers `GET /models`.
    pub async fn upstream_health(&self) -> Result<Vec<String>, String> {
        match tokio::time::timeout(Duration::from_secs(5), self.upstream.list_models()).await {
            Ok(Ok(models)) => Ok(models),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("no answer within 5 s".into()),
        }
    }

    /// Appends to the error log; a log that cannot be written is reported as an event.
    pub fn record_error(&self, entry: Entry<'_>) {
        self.logs.record(entry);
    }

    pub async fn run(&self, req: RunRequest) -> Result<RunOutcome, ExecError> {
        let run_id = format!("run-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let timeout = req
            .timeout
            .map_or(self.cfg.run_timeout(), |t| t.min(self.cfg.run_timeout()));
        let prompt_len: usize = req.messages.iter().map(|m| m.text().chars().count()).sum();
        self.logs.events.info(
            "executor_run_start",
            json!({
                "run_id": run_id,
                "user_prompt_length": prompt_len,
                "max_iterations": self.cfg.executor.max_iterations,
                "timeout_seconds": timeout.as_secs_f64(),
            }),
        );
        let started = Instant::now();
        let mut acc = Accounting::new(&run_id, &self.cfg, &self.logs);
        let result = self.submit(&run_id, req, timeout, &mut acc).await;
        // The session was only this run's; nothing of it outlives the answer.
        if let Err(e) = self.runtime.delete_session(AGENT, &run_id).await {
            tracing::warn!(run = %run_id, error = %e, "could not remove the run's session");
        }
        match result {
            Ok(outcome) => {
                self.logs.events.info(
                    "executor_run_complete",
                    json!({
                        "run_id": run_id,
                        "iterations": outcome.iterations,
                        "tools_called": outcome.tools_called,
                        "total_tokens": outcome.total_tokens,
                        "elapsed_ms": started.elapsed().as_millis() as u64,
                    }),
                );
                Ok(outcome)
            }
            Err(mut e) => {
                match e.code {
                    ErrorCode::TimeoutExceeded => self.logs.events.error(
                        "executor_timeout",
                        json!({"run_id": run_id, "iteration": acc.iterations, "elapsed_seconds": started.elapsed().as_secs_f64()}),
                    ),
                    ErrorCode::MaxIterationsExceeded => self.logs.events.error(
                        "executor_max_iterations_exceeded",
                        json!({"run_id": run_id, "max_iterations": self.cfg.executor.max_iterations, "total_tokens": acc.total_tokens}),
                    ),
                    _ => {}
                }
                self.logs.events.error(
                    "executor_run_failed",
                    json!({"run_id": run_id, "iteration": acc.iterations, "code": e.code.as_str(), "error": e.message}),
                );
                let fix = match e.code {
                    ErrorCode::GptOssUnreachable => "retried with back-off",
                    ErrorCode::ToolExecutionFailed => "retried the tool with back-off",
                    ErrorCode::ContextWindowExceeded => "shortened and dropped older tool results",
                    _ => "none",
                };
                self.logs.record(Entry {
                    component: "executor",
                    error: &format!("{}: {}", e.code.as_str(), e.message),
                    attempted_fix: fix,
                    status: "run aborted",
                    run_id: Some(&run_id),
                });
                e.message = format!("{} (run {run_id})", e.message);
                Err(e)
            }
        }
    }

    /// Seeds the run's session with the client's history, submits its last user
    /// message and follows the run's events to the end.
    async fn submit(
        &self,
        run_id: &str,
        req: RunRequest,
        timeout: Duration,
        acc: &mut Accounting<'_>,
    ) -> Result<RunOutcome, ExecError> {
        self.describe_tools(run_id).await;
        let mut history = req.messages;
        let Some(last_user) = history.iter().rposition(|m| matches!(m, Message::User(_))) else {
            return Err(ExecError::new(
                ErrorCode::InvalidRequest,
                "`messages` must contain at least one user message",
            ));
        };
        if last_user + 1 != history.len() {
            return Err(ExecError::new(
                ErrorCode::InvalidRequest,
                "the last message must be the user's (or a tool result): there is nothing to answer after an assistant message",
            ));
        }
        let message = history.remove(last_user).text();
        if !history.is_empty() {
            let bodies = history
                .into_iter()
                .map(|message| EntryBody::Message { message })
                .collect();
            self.runtime
                .write_entries(AGENT, run_id, bodies)
                .await
                .map_err(|e| internal(format!("could not prepare the run: {e}")))?;
        }
        let submitted = self
            .runtime
            .submit(Submit {
                agent_id: AGENT,
                session_key: run_id,
                user: None,
                message: &message,
                mode: QueueMode::Queue,
                origin: Origin::Executor,
                options: RunOptions {
                    instructions: req.system,
                    temperature: req.temperature,
                    top_p: req.top_p,
                    max_tokens: req.max_tokens,
                    timeout: Some(timeout),
                    prompt_mode: None,
                    group_chat: false,
                },
            })
            .map_err(|e| internal(format!("the run could not start: {e}")))?;
        let Submitted::Run(handle) = submitted else {
            // `/stop` typed as the whole request: there is no run of this session to stop.
            return Err(ExecError::new(
                ErrorCode::InvalidRequest,
                "a command is not a request to the model",
            ));
        };
        let result = handle.finish(|ev| acc.event(&ev)).await;
        acc.batch_done();
        match result {
            Ok(out) => {
                if acc.intents_last_turn {
                    // Only a run whose last turn asked for tools can end with a
                    // completion signal rather than a plain answer.
                    self.logs.events.info(
                        "completion_signal_detected",
                        json!({"run_id": run_id, "iteration": acc.iterations}),
                    );
                } else {
                    self.logs.events.info(
                        "no_tools_requested",
                        json!({"run_id": run_id, "iteration": acc.iterations}),
                    );
                }
                Ok(acc.outcome(out.text, out.reasoning, out.stop_reason))
            }
            Err(failure) => Err(self.failure(&failure, acc)),
        }
    }

    /// The tools the gateway has not described yet are asked again (failures are not
    /// remembered: a gateway that was down at one run is asked at the next).
    async fn describe_tools(&self, run_id: &str) {
        for tool in &self.tools {
            if let Err(message) = tool.describe().await {
                self.logs.events.warn(
                    "tool_unavailable",
                    json!({"run_id": run_id, "tool": ferroclaw_tools::Tool::name(tool.as_ref()), "error": message}),
                );
            }
        }
    }

    fn failure(&self, failure: &RunFailure, acc: &Accounting<'_>) -> ExecError {
        let Some(e) = failure.run_error() else {
            return internal(failure.to_string());
        };
        let budget = |needed: u64| {
            format!(
                "the context needs about {needed} tokens, over the budget of {} \
                 (context_window_limit {} - context_buffer_tokens {})",
                self.cfg.available_tokens(),
                self.cfg.executor.context_window_limit,
                self.cfg.executor.context_buffer_tokens
            )
        };
        match e {
            RunError::ContextBudget { needed, .. } => {
                ExecError::new(ErrorCode::ContextWindowExceeded, budget(*needed))
            }
            RunError::Provider(p) if p.kind == ErrorKind::ContextOverflow => {
                self.logs.record(Entry {
                    component: "gpt_oss",
                    error: &p.to_string(),
                    attempted_fix: "none: the prompt does not fit",
                    status: "failed",
                    run_id: Some(acc.run_id),
                });
                ExecError::new(
                    ErrorCode::ContextWindowExceeded,
                    format!("the model rejected the prompt as too long: {p}"),
                )
            }
            RunError::Provider(p) => {
                let attempts = acc.retries + 1;
                self.logs.events.error(
                    "gpt_oss_call_failed",
                    json!({"run_id": acc.run_id, "iteration": acc.iterations, "attempt": attempts, "error": p.to_string(), "status": p.status}),
                );
                let fix = if p.retryable() {
                    format!("retried {} times with back-off", acc.retries)
                } else {
                    "none: not a transient fault".to_string()
                };
                self.logs.record(Entry {
                    component: "gpt_oss",
                    error: &p.to_string(),
                    attempted_fix: &fix,
                    status: "failed",
                    run_id: Some(acc.run_id),
                });
                ExecError::new(
                    ErrorCode::GptOssUnreachable,
                    format!(
                        "the reasoning model at {} failed after {attempts} attempt(s): {p}",
                        self.cfg.upstream_base()
                    ),
                )
            }
            RunError::Timeout(t) => ExecError::new(
                ErrorCode::TimeoutExceeded,
                format!(
                    "run exceeded its time-out of {} s at iteration {}",
                    t.as_secs_f64(),
                    acc.iterations
                ),
            ),
            RunError::Stalled(t) => ExecError::new(
                ErrorCode::TimeoutExceeded,
                format!(
                    "run stalled: nothing progressed for {} s at iteration {}",
                    t.as_secs_f64(),
                    acc.iterations
                ),
            ),
            RunError::IterationLimit(n) => ExecError::new(
                ErrorCode::MaxIterationsExceeded,
                format!("max iterations ({n}) exceeded without completion"),
            ),
            RunError::ToolUnavailable { tool, message } => ExecError::new(
                ErrorCode::ToolExecutionFailed,
                format!("tool `{tool}` {message}"),
            ),
            other => internal(other.to_string()),
        }
    }
}

fn internal(message: String) -> ExecError {
    ExecError::new(ErrorCode::Internal, message)
}

/// The agent the executor runs: the YAML's limits, the tool-calling format, nothing
/// of ferroclaw's own prompt.
fn agent_settings(cfg: &Config) -> Result<AgentSettings, InitError> {
    let primary = cfg.primary_strategy();
    let prompt_template = match cfg.resolve_path(&cfg.parser.system_prompt_path) {
        Some(p) => Some(
            std::fs::read_to_string(&p).map_err(|source| InitError::File {
                what: "system prompt",
                path: p.display().to_string(),
                source,
            })?,
        ),
        None => None,
    };
    let prompts_dir = cfg.resolve_path(&cfg.parser.prompt_dir);
    if prompt_template.is_none() {
        // A broken override is an error at start, not a silent fallback at each run.
        prompts::resolve(prompts_dir.as_deref(), primary).map_err(|source| InitError::File {
            what: "prompt override in",
            path: cfg.parser.prompt_dir.clone(),
            source,
        })?;
    }
    let guided_schema = match cfg.resolve_path(&cfg.parser.guided_json_schema_path) {
        Some(p) => {
            let text = std::fs::read_to_string(&p).map_err(|source| InitError::File {
                what: "guided JSON schema",
                path: p.display().to_string(),
                source,
            })?;
            Some(serde_json::from_str::<Value>(&text).map_err(|e| {
                InitError::Other(format!("guided JSON schema {}: {e}", p.display()))
            })?)
        }
        None => None,
    };
    let mut s = AgentSettings::new(
        AGENT,
        "gpt-oss",
        &cfg.executor.gpt_oss_model,
        cfg.base_dir.clone(),
    );
    s.max_iterations = cfg.executor.max_iterations;
    s.timeout = cfg.run_timeout();
    s.max_tokens = Some(cfg.executor.gpt_oss_max_tokens);
    s.temperature = Some(cfg.executor.gpt_oss_temperature);
    // Batch mode: the reasoning must be complete before intents are read from it.
    s.stream = false;
    s.prompt_mode = PromptMode::Bare;
    // The client owns its history: nothing is dropped but by the context budget.
    s.history.max_user_turns = 0;
    s.history.old_tool_result_chars = 0;
    s.max_message_chars = usize::MAX;
    s.tool_result_max_chars = 0;
    s.input_guard = InputGuardAction::Off;
    // Later calls often depend on earlier ones: one at a time, in order.
    s.max_concurrent_tools = 1;
    s.intent = IntentSettings {
        mode: if cfg.parser.native_tools {
            ToolMode::Auto
        } else {
            ToolMode::Intent
        },
        prompt_strategy: primary,
        parser: ParserConfig {
            order: cfg.strategies()?,
            sources: cfg.sources()?,
            aliases: default_aliases(),
            min_confidence: cfg.parser.min_confidence,
            precedence: cfg.precedence()?,
        },
        prompts_dir,
        prompt_template,
        guided: if primary == Strategy::GuidedJson {
            GuidedDecoding::Vllm
        } else {
            GuidedDecoding::Off
        },
        guided_schema,
        confirm: IntentConfirm::Off,
    };
    s.context_budget = Some(ContextBudget {
        tokens: cfg.available_tokens(),
        shorten_at: cfg.executor.context_trunc_threshold,
        omit_at: cfg.executor.context_compact_threshold,
        shortened_chars: SHORTENED_RESULT_CHARS,
    });
    Ok(s)
}

/// The executor's view of a run, built from its events as they come: the event log,
/// the model's retry lines in the error log, and the figures of `executor_metadata`.
struct Accounting<'a> {
    run_id: &'a str,
    logs: &'a Logs,
    avail: u64,
    max_retries: u32,
    iterations: u32,
    /// Retries of the current model call.
    retries: u32,
    estimate: u64,
    call_started: Instant,
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
    tools_called: Vec<String>,
    tool_time_ms: u64,
    /// Tools of the current batch, for `tool_execution_complete`.
    batch: Vec<String>,
    batch_started: Instant,
    /// The last model turn asked for tools.
    intents_last_turn: bool,
}

impl<'a> Accounting<'a> {
    fn new(run_id: &'a str, cfg: &Config, logs: &'a Logs) -> Self {
        Accounting {
            run_id,
            logs,
            avail: cfg.available_tokens(),
            max_retries: cfg.executor.max_retries,
            iterations: 0,
            retries: 0,
            estimate: 0,
            call_started: Instant::now(),
            prompt_tokens: 0,
            completion_tokens: 0,
            total_tokens: 0,
            tools_called: Vec::new(),
            tool_time_ms: 0,
            batch: Vec::new(),
            batch_started: Instant::now(),
            intents_last_turn: false,
        }
    }

    fn event(&mut self, ev: &RunEvent) {
        let run_id = self.run_id;
        match &ev.kind {
            EventKind::ModelRequest {
                iteration,
                messages,
                estimated_tokens,
            } => {
                self.batch_done();
                self.iterations = *iteration;
                self.estimate = *estimated_tokens;
                self.call_started = Instant::now();
                self.intents_last_turn = false;
                self.logs.events.info(
                    "gpt_oss_call_start",
                    json!({"run_id": run_id, "iteration": iteration, "message_count": messages, "estimated_prompt_tokens": estimated_tokens}),
                );
            }
            EventKind::ModelRetry {
                attempt,
                delay_ms,
                status,
                error,
            } => {
                self.retries = *attempt;
                self.logs.events.error(
                    "gpt_oss_call_failed",
                    json!({"run_id": run_id, "iteration": self.iterations, "attempt": attempt, "error": error, "status": status, "elapsed_ms": self.call_started.elapsed().as_millis() as u64}),
                );
                self.logs.record(Entry {
                    component: "gpt_oss",
                    error,
                    attempted_fix: &format!(
                        "retry {attempt} of {} after {delay_ms} ms",
                        self.max_retries
                    ),
                    status: "retrying",
                    run_id: Some(run_id),
                });
                self.logs.events.info(
                    "retrying_gpt_oss_call",
                    json!({"run_id": run_id, "iteration": self.iterations, "attempt": attempt, "delay_ms": delay_ms}),
                );
            }
            EventKind::ModelResponse {
                iteration,
                usage,
                stop_reason,
                output_chars,
                elapsed_ms,
                ..
            } => {
                if self.retries > 0 {
                    self.logs.record(Entry {
                        component: "gpt_oss",
                        error: "earlier attempts failed (see above)",
                        attempted_fix: "retried with back-off",
                        status: &format!("recovered on retry {}", self.retries),
                        run_id: Some(run_id),
                    });
                    self.retries = 0;
                }
                // What the server did not report is estimated (about four chars a token).
                self.prompt_tokens = if usage.input > 0 {
                    usage.input
                } else {
                    self.estimate
                };
                self.completion_tokens = if usage.output > 0 {
                    usage.output
                } else {
                    output_chars.div_ceil(4) as u64
                };
                let call = self.prompt_tokens + self.completion_tokens;
                self.total_tokens += call;
                let pct = percent(call, self.avail);
                self.logs.events.info(
                    "gpt_oss_call_complete",
                    json!({
                        "run_id": run_id,
                        "iteration": iteration,
                        "tokens": call,
                        "prompt_tokens": self.prompt_tokens,
                        "completion_tokens": self.completion_tokens,
                        "finish_reason": finish_reason(*stop_reason),
                        "elapsed_ms": elapsed_ms,
                        "context_usage_percent": pct,
                    }),
                );
            }
            EventKind::ToolIntents {
                iteration,
                names,
                strategy,
            } => {
                self.intents_last_turn = true;
                self.logs.events.info(
                    "tool_intents_parsed",
                    json!({"run_id": run_id, "iteration": iteration, "intent_count": names.len(), "tool_names": names, "strategy": strategy}),
                );
            }
            EventKind::ContextTrimmed {
                iteration,
                omitted,
                tokens_before,
                tokens_after,
            } => {
                let event = if *omitted {
                    "context_compacted"
                } else {
                    "context_truncated"
                };
                self.logs.events.info(
                    event,
                    json!({"run_id": run_id, "iteration": iteration, "tokens_before": tokens_before, "tokens_after": tokens_after}),
                );
            }
            EventKind::ToolStart { name, .. } => {
                if self.batch.is_empty() {
                    self.batch_started = Instant::now();
                }
                self.batch.push(name.clone());
                self.tools_called.push(name.clone());
            }
            EventKind::ToolResult { duration_ms, .. } => self.tool_time_ms += duration_ms,
            _ => {}
        }
    }

    /// Reports the tools of the turn that just ended, if it ran any.
    fn batch_done(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let tools = std::mem::take(&mut self.batch).join(",");
        self.logs.events.info(
            "tool_execution_complete",
            json!({"run_id": self.run_id, "iteration": self.iterations, "tools": tools, "total_time_ms": self.batch_started.elapsed().as_millis() as u64}),
        );
    }

    fn outcome(&self, content: String, reasoning: String, stop: StopReason) -> RunOutcome {
        RunOutcome {
            run_id: self.run_id.to_string(),
            content,
            reasoning,
            finish_reason: finish_reason(stop),
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.completion_tokens,
            total_tokens: self.total_tokens,
            iterations: self.iterations,
            tools_called: self.tools_called.clone(),
            total_tool_execution_time_ms: self.tool_time_ms,
            context_usage_percent: percent(self.prompt_tokens + self.completion_tokens, self.avail),
        }
    }
}

fn finish_reason(s: StopReason) -> &'static str {
    match s {
        StopReason::Length => "length",
        _ => "stop",
    }
}

fn percent(used: u64, avail: u64) -> f64 {
    let p = used as f64 / avail.max(1) as f64 * 100.0;
    (p * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_rounds_to_a_tenth() {
        assert_eq!(percent(1, 3), 33.3);
        assert_eq!(percent(0, 0), 0.0);
    }
}
