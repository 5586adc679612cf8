//! One executor run: call the reasoning model → parse tool intents → run each tool
//! through the gateway → inject the results → again, until the model asks for no
//! tool, signals completion, `max_iterations` is spent or the run times out.
//!
//! Recovery tiers: transient faults (upstream 5xx/429/network/time-out, gateway
//! 5xx/network) are retried after the configured back-off (1 s, 2 s, 4 s by default);
//! a tool that fails or is refused (4xx) goes back to the model as an `[ERROR: …]`
//! result and the run goes on; everything else ends the run with an error code.
//!
//! Token accounting: before each call the prompt is estimated (chars/4, calibrated
//! by the usage the upstream reported for the previous call) against
//! `context_window_limit - context_buffer_tokens`; older tool results are shortened at
//! `context_trunc_threshold`, dropped at `context_compact_threshold`, and a prompt that
//! still leaves no room for `max_tokens` ends the run with `context_window_exceeded`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferroclaw_intent::{
    clean_tool_name, default_aliases, guided_json_schema, prompts, ParserConfig, Strategy, ToolSpec,
};
use ferroclaw_providers::{
    ChatRequest, ChatResponse, ErrorKind, NoSink, OpenAiCompat, OpenAiCompatConfig, Provider,
};
use ferroclaw_types::{AssistantMessage, ContentBlock, Message, StopReason, ToolDefinition};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::config::{Config, ConfigError, ToolEntry};
use crate::error::{ErrorCode, ExecError};
use crate::errors_log::{Entry, ErrorLog};
use crate::events::EventLog;
use crate::tools_client::{result_text, ToolFailure, ToolsClient};

/// Older tool results are cut to this many chars when the context gets tight.
const SHORTENED_RESULT_CHARS: usize = 600;
/// Longest wait for a tool's `dryRun` description.
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(5);

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

pub struct Executor {
    cfg: Arc<Config>,
    provider: Arc<dyn Provider>,
    tools: ToolsClient,
    events: Arc<EventLog>,
    errors: Arc<ErrorLog>,
    parser: ParserConfig,
    prompt_template: String,
    guided_schema: Option<Value>,
    /// Tool definitions learnt from the gateway's dry runs; failures are not cached,
    /// so a gateway that was down at one run is asked again at the next.
    described: tokio::sync::Mutex<BTreeMap<String, ToolSpec>>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("upstream", &self.cfg.upstream_base())
            .finish()
    }
}

/// Per-run bookkeeping.
struct RunState {
    run_id: String,
    system: Option<String>,
    messages: Vec<Message>,
    /// Indices of messages holding tool results, oldest first.
    injected: Vec<usize>,
    iteration: u32,
    total_tokens: u64,
    /// Prompt + completion of the last call: the context in use.
    context_tokens: u64,
    /// Context size in chars when `context_tokens` was measured (calibrates estimates).
    context_chars: usize,
    tools_called: Vec<String>,
    tool_time: Duration,
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
        let provider =
            OpenAiCompat::new(oc).map_err(|e| InitError::Other(format!("upstream: {e}")))?;
        Self::with_provider(cfg, Arc::new(provider), events, errors)
    }

    /// With any provider (tests).
    pub fn with_provider(
        cfg: Config,
        provider: Arc<dyn Provider>,
        events: Arc<EventLog>,
        errors: Arc<ErrorLog>,
    ) -> Result<Self, InitError> {
        let primary = cfg.primary_strategy();
        let prompt_template = match cfg.resolve_path(&cfg.parser.system_prompt_path) {
            Some(p) => std::fs::read_to_string(&p).map_err(|source| InitError::File {
                what: "system prompt",
                path: p.display().to_string(),
                source,
            })?,
            None => {
                let dir = cfg.resolve_path(&cfg.parser.prompt_dir);
                prompts::resolve(dir.as_deref(), primary).map_err(|source| InitError::File {
                    what: "prompt override in",
                    path: cfg.parser.prompt_dir.clone(),
                    source,
                })?
            }
        };
        let guided_schema = match cfg.resolve_path(&cfg.parser.guided_json_schema_path) {
            Some(p) => {
                let text = std::fs::read_to_string(&p).map_err(|source| InitError::File {
                    what: "guided JSON schema",
                    path: p.display().to_string(),
                    source,
                })?;
                Some(serde_json::from_str(&text).map_err(|e| {
                    InitError::Other(format!("guided JSON schema {}: {e}", p.display()))
                })?)
            }
            None => None,
        };
        let parser = ParserConfig {
            order: cfg.strategies()?,
            sources: cfg.sources()?,
            aliases: default_aliases(),
            min_confidence: cfg.parser.min_confidence,
            precedence: cfg.precedence()?,
        };
        let tools = ToolsClient::new(
            &cfg.executor.openclaw_gateway_url,
            cfg.gateway_token(),
            &cfg.executor.session_key,
        );
        Ok(Self {
            cfg: Arc::new(cfg),
            provider,
            tools,
            events,
            errors,
            parser,
            prompt_template,
            guided_schema,
            described: tokio::sync::Mutex::new(BTreeMap::new()),
        })
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn events(&self) -> &EventLog {
        &self.events
    }

    /// Whether the upstream answers `GET /models`.
    pub async fn upstream_health(&self) -> Result<Vec<String>, String> {
        match tokio::time::timeout(Duration::from_secs(5), self.provider.list_models()).await {
            Ok(Ok(models)) => Ok(models),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("no answer within 5 s".into()),
        }
    }

    /// Appends to the error log; a log that cannot be written is reported as an event.
    pub fn record_error(&self, entry: Entry<'_>) {
        if let Err(e) = self.errors.append(entry) {
            self.events.warn(
                "error_log_write_failed",
                json!({"error": e.to_string(), "dir": self.errors.dir().map(|d| d.display().to_string())}),
            );
        }
    }

    pub async fn run(&self, req: RunRequest) -> Result<RunOutcome, ExecError> {
        let run_id = format!("run-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let timeout = req
            .timeout
            .map(|t| t.min(self.cfg.run_timeout()))
            .unwrap_or_else(|| self.cfg.run_timeout());
        let prompt_len: usize = req.messages.iter().map(|m| m.text().chars().count()).sum();
        self.events.info(
            "executor_run_start",
            json!({
                "run_id": run_id,
                "user_prompt_length": prompt_len,
                "max_iterations": self.cfg.executor.max_iterations,
                "timeout_seconds": timeout.as_secs_f64(),
            }),
        );
        let mut st = RunState {
            run_id: run_id.clone(),
            system: req.system.clone(),
            messages: req.messages.clone(),
            injected: Vec::new(),
            iteration: 0,
            total_tokens: 0,
            context_tokens: 0,
            context_chars: 0,
            tools_called: Vec::new(),
            tool_time: Duration::ZERO,
        };
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + timeout;
        let result = match tokio::time::timeout_at(deadline, self.run_loop(&mut st, &req)).await {
            Ok(r) => r,
            Err(_) => {
                self.events.error(
                    "executor_timeout",
                    json!({
                        "run_id": run_id,
                        "iteration": st.iteration,
                        "elapsed_seconds": started.elapsed().as_secs_f64(),
                    }),
                );
                Err(ExecError::new(
                    ErrorCode::TimeoutExceeded,
                    format!(
                        "run exceeded its time-out of {} s at iteration {}",
                        timeout.as_secs_f64(),
                        st.iteration
                    ),
                ))
            }
        };
        match result {
            Ok(outcome) => {
                self.events.info(
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
                self.events.error(
                    "executor_run_failed",
                    json!({"run_id": run_id, "iteration": st.iteration, "code": e.code.as_str(), "error": e.message}),
                );
                let fix = match e.code {
                    ErrorCode::GptOssUnreachable => "retried with back-off",
                    ErrorCode::ToolExecutionFailed => "retried the tool with back-off",
                    ErrorCode::ContextWindowExceeded => "shortened and dropped older tool results",
                    _ => "none",
                };
                self.record_error(Entry {
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

    async fn run_loop(&self, st: &mut RunState, req: &RunRequest) -> Result<RunOutcome, ExecError> {
        let tools = self.offered_tools(&st.run_id).await;
        let tool_prompt = prompts::render(&self.prompt_template, &tools);
        let system = match st
            .system
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            Some(client) => format!("{client}\n\n{tool_prompt}"),
            None => tool_prompt,
        };
        let native: Vec<ToolDefinition> = if self.cfg.parser.native_tools {
            tools
                .iter()
                .map(|t| ToolDefinition {
                    name: t.name.clone(),
                    description: t.description.clone(),
                    parameters: t.parameters.clone(),
                })
                .collect()
        } else {
            Vec::new()
        };
        let mut extra = serde_json::Map::new();
        if let Some(p) = req.top_p {
            extra.insert("top_p".into(), json!(p));
        }
        if self.cfg.primary_strategy() == Strategy::GuidedJson {
            let schema = self
                .guided_schema
                .clone()
                .unwrap_or_else(|| guided_json_schema(&tools));
            extra.insert("guided_json".into(), schema);
        }
        let max_tokens = req
            .max_tokens
            .unwrap_or(self.cfg.executor.gpt_oss_max_tokens)
            .min(self.cfg.executor.gpt_oss_max_tokens);
        let fixed_chars = system.len()
            + native
                .iter()
                .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
                .sum::<usize>();
        let avail = self.cfg.available_tokens();

        for iteration in 1..=self.cfg.executor.max_iterations {
            st.iteration = iteration;
            let est = self.fit_context(st, fixed_chars, u64::from(max_tokens))?;
            self.events.info(
                "gpt_oss_call_start",
                json!({"run_id": st.run_id, "iteration": iteration, "message_count": st.messages.len(), "estimated_prompt_tokens": est}),
            );
            let chat = ChatRequest {
                model: self.cfg.executor.gpt_oss_model.clone(),
                system: Some(system.clone()),
                messages: st.messages.clone(),
                tools: native.clone(),
                max_tokens: Some(max_tokens),
                temperature: Some(
                    req.temperature
                        .unwrap_or(self.cfg.executor.gpt_oss_temperature),
                ),
                stream: false,
                extra_body: extra.clone(),
                max_reply_bytes: None,
            };
            let started = Instant::now();
            let resp = self.call_model(st, &chat).await?;

            // Token accounting for this iteration.
            let (reasoning, content, native_calls) = split_answer(&resp);
            let usage = resp.usage;
            let out_chars = reasoning.len() + content.len();
            let prompt_tokens = if usage.input > 0 { usage.input } else { est };
            let completion_tokens = if usage.output > 0 {
                usage.output
            } else {
                estimate_tokens(out_chars)
            };
            let call_tokens = prompt_tokens + completion_tokens;
            st.total_tokens += call_tokens;
            st.context_tokens = call_tokens;
            st.messages.push(Message::Assistant(AssistantMessage {
                content: resp.content.clone(),
                provider: resp.provider.clone(),
                model: resp.model.clone(),
                usage,
                stop_reason: resp.stop_reason,
                error_message: None,
                timestamp: ferroclaw_types::now_millis(),
            }));
            st.context_chars = context_chars(st, fixed_chars);
            let usage_pct = percent(st.context_tokens, avail);
            self.events.info(
                "gpt_oss_call_complete",
                json!({
                    "run_id": st.run_id,
                    "iteration": iteration,
                    "tokens": call_tokens,
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "finish_reason": finish_reason(resp.stop_reason),
                    "elapsed_ms": started.elapsed().as_millis() as u64,
                    "context_usage_percent": usage_pct,
                }),
            );
            if st.context_tokens as f64 >= self.cfg.executor.context_trunc_threshold * avail as f64
            {
                self.events.warn(
                    "context_window_approaching",
                    json!({"run_id": st.run_id, "iteration": iteration, "total_tokens": st.context_tokens, "limit": avail}),
                );
            }
            if st.context_tokens > avail {
                return Err(ExecError::new(
                    ErrorCode::ContextWindowExceeded,
                    format!(
                        "the context reached {} tokens, over the budget of {avail} \
                         (context_window_limit {} - context_buffer_tokens {})",
                        st.context_tokens,
                        self.cfg.executor.context_window_limit,
                        self.cfg.executor.context_buffer_tokens
                    ),
                ));
            }
            if reasoning.trim().is_empty() && !content.trim().is_empty() {
                self.events.debug(
                    "reasoning_field_empty_using_content",
                    json!({"run_id": st.run_id, "iteration": iteration}),
                );
            }

            // Native tool calls win; otherwise read intents from the text.
            let (calls, done, final_text, strategy) = if !native_calls.is_empty() {
                (native_calls, false, None, "native")
            } else {
                let out = ferroclaw_intent::parse(
                    Some(reasoning.as_str()),
                    Some(content.as_str()),
                    &tools,
                    &self.parser,
                );
                let strategy = out
                    .calls
                    .first()
                    .map(|c| c.strategy.as_str())
                    .unwrap_or("none");
                let calls = out
                    .calls
                    .into_iter()
                    .map(|c| Call {
                        id: None,
                        name: c.name,
                        arguments: c.arguments,
                    })
                    .collect();
                (calls, out.done, out.final_text, strategy)
            };
            let finish = |st: &RunState| RunOutcome {
                run_id: st.run_id.clone(),
                content: final_text.clone().unwrap_or_else(|| content.clone()),
                reasoning: reasoning.clone(),
                finish_reason: finish_reason(resp.stop_reason),
                prompt_tokens,
                completion_tokens,
                total_tokens: st.total_tokens,
                iterations: iteration,
                tools_called: st.tools_called.clone(),
                total_tool_execution_time_ms: st.tool_time.as_millis() as u64,
                context_usage_percent: usage_pct,
            };
            if calls.is_empty() {
                self.events.info(
                    "no_tools_requested",
                    json!({"run_id": st.run_id, "iteration": iteration}),
                );
                return Ok(finish(st));
            }
            let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
            self.events.info(
                "tool_intents_parsed",
                json!({"run_id": st.run_id, "iteration": iteration, "intent_count": calls.len(), "tool_names": names, "strategy": strategy}),
            );

            self.execute_calls(st, &tools, calls).await?;

            if done {
                self.events.info(
                    "completion_signal_detected",
                    json!({"run_id": st.run_id, "iteration": iteration}),
                );
                return Ok(finish(st));
            }
        }
        self.events.error(
            "executor_max_iterations_exceeded",
            json!({"run_id": st.run_id, "max_iterations": self.cfg.executor.max_iterations, "total_tokens": st.total_tokens}),
        );
        Err(ExecError::new(
            ErrorCode::MaxIterationsExceeded,
            format!(
                "max iterations ({}) exceeded without completion",
                self.cfg.executor.max_iterations
            ),
        ))
    }

    /// Runs the calls in order (later ones often depend on earlier ones) and injects
    /// their results into the context.
    async fn execute_calls(
        &self,
        st: &mut RunState,
        tools: &[ToolSpec],
        calls: Vec<Call>,
    ) -> Result<(), ExecError> {
        let batch_start = Instant::now();
        let mut text_results: Vec<String> = Vec::new();
        let mut names = Vec::new();
        for call in calls {
            names.push(call.name.clone());
            st.tools_called.push(call.name.clone());
            let t0 = Instant::now();
            let result = if tools.iter().any(|t| t.name == call.name) {
                self.execute_tool(st, &call.name, &call.arguments).await?
            } else {
                Err(format!("unknown tool `{}`", call.name))
            };
            st.tool_time += t0.elapsed();
            let (text, is_error) = match result {
                Ok(text) => {
                    let limit = self.cfg.result_limit(&call.name);
                    (truncate_head_tail(&text, limit), false)
                }
                Err(msg) => (msg, true),
            };
            match call.id {
                Some(id) => {
                    st.injected.push(st.messages.len());
                    st.messages
                        .push(Message::tool_result(id, call.name.clone(), text, is_error));
                }
                None if is_error => text_results.push(format!("[ERROR: {}] {text}", call.name)),
                None => text_results.push(format!("[TOOL_RESULT: {}]\n{text}", call.name)),
            }
        }
        if !text_results.is_empty() {
            st.injected.push(st.messages.len());
            st.messages.push(Message::user(format!(
                "Tool execution results:\n\n{}\n\nContinue with the next step, or give the final \
                 answer if the task is complete.",
                text_results.join("\n\n")
            )));
        }
        self.events.info(
            "tool_execution_complete",
            json!({"run_id": st.run_id, "iteration": st.iteration, "tools": names.join(","), "total_time_ms": batch_start.elapsed().as_millis() as u64}),
        );
        Ok(())
    }

    /// `Ok(Ok(text))` success, `Ok(Err(msg))` a non-fatal failure for the model,
    /// `Err` a fatal one.
    async fn execute_tool(
        &self,
        st: &RunState,
        name: &str,
        args: &Value,
    ) -> Result<Result<String, String>, ExecError> {
        let mut shown = args.to_string();
        if shown.len() > 500 {
            shown = truncate_head_tail(&shown, 500);
        }
        self.events.info(
            "tool_execution_start",
            json!({"run_id": st.run_id, "iteration": st.iteration, "tool": name, "args": shown}),
        );
        if let Some(why) = self.exec_policy(name, args) {
            self.tool_failed(
                st,
                name,
                &why,
                "refused by the executor's exec policy; told the model",
                "continued",
            );
            return Ok(Err(why));
        }
        let attempts = self.cfg.executor.max_retries + 1;
        let timeout = self.cfg.tool_timeout(name);
        for attempt in 1..=attempts {
            let t0 = Instant::now();
            match self.tools.invoke(name, args, false, timeout).await {
                Ok(v) => {
                    let text = result_text(&v);
                    self.events.info(
                        "tool_execution_success",
                        json!({"run_id": st.run_id, "iteration": st.iteration, "tool": name, "result_length": text.chars().count(), "elapsed_ms": t0.elapsed().as_millis() as u64, "attempt": attempt}),
                    );
                    if attempt > 1 {
                        self.record_error(Entry {
                            component: name,
                            error: "earlier attempts failed (see above)",
                            attempted_fix: "retried with back-off",
                            status: &format!("recovered on retry {}", attempt - 1),
                            run_id: Some(&st.run_id),
                        });
                    }
                    return Ok(Ok(text));
                }
                Err(ToolFailure::Rejected { message, .. }) => {
                    self.tool_failed(
                        st,
                        name,
                        &message,
                        "injected the error into the context",
                        "continued",
                    );
                    return Ok(Err(message));
                }
                Err(ToolFailure::Fatal(message)) => {
                    self.tool_failed(st, name, &message, "none: not retryable", "failed");
                    return Err(ExecError::new(
                        ErrorCode::ToolExecutionFailed,
                        format!("tool `{name}` failed: {message}"),
                    ));
                }
                Err(ToolFailure::Transient(message)) if attempt < attempts => {
                    let delay = self.cfg.backoff(attempt);
                    self.tool_failed(
                        st,
                        name,
                        &message,
                        &format!(
                            "retry {attempt} of {} after {} ms",
                            attempts - 1,
                            delay.as_millis()
                        ),
                        "retrying",
                    );
                    tokio::time::sleep(delay).await;
                }
                Err(ToolFailure::Transient(message)) => {
                    self.tool_failed(
                        st,
                        name,
                        &message,
                        &format!("failed after {attempts} attempts"),
                        "failed",
                    );
                    return Err(ExecError::new(
                        ErrorCode::ToolExecutionFailed,
                        format!("tool `{name}` failed after {attempts} attempts: {message}"),
                    ));
                }
            }
        }
        // The loop always returns on its last attempt.
        Err(ExecError::new(
            ErrorCode::ToolExecutionFailed,
            format!("tool `{name}` failed"),
        ))
    }

    fn tool_failed(&self, st: &RunState, name: &str, error: &str, action: &str, status: &str) {
        self.events.warn(
            "tool_execution_failed",
            json!({"run_id": st.run_id, "iteration": st.iteration, "tool": name, "error": error, "action": action}),
        );
        self.record_error(Entry {
            component: name,
            error,
            attempted_fix: action,
            status,
            run_id: Some(&st.run_id),
        });
    }

    /// `tools.exec.allowed_commands` / `blocked_commands`, checked before the gateway.
    fn exec_policy(&self, name: &str, args: &Value) -> Option<String> {
        let settings = self.cfg.tools.per_tool.get(name)?;
        let command = args.get("command").and_then(Value::as_str)?;
        if let Some(b) = settings
            .blocked_commands
            .iter()
            .find(|b| !b.is_empty() && command.contains(b.as_str()))
        {
            return Some(format!("command refused: it contains the blocked `{b}`"));
        }
        let first = command.split_whitespace().next().unwrap_or_default();
        if !settings.allowed_commands.is_empty()
            && !settings.allowed_commands.iter().any(|a| a == first)
        {
            return Some(format!(
                "command refused: `{first}` is not one of the allowed commands ({})",
                settings.allowed_commands.join(", ")
            ));
        }
        None
    }

    /// One model call with the transient-fault retries.
    async fn call_model(
        &self,
        st: &RunState,
        req: &ChatRequest,
    ) -> Result<ChatResponse, ExecError> {
        let attempts = self.cfg.executor.max_retries + 1;
        // The run's deadline drops this future; nothing else cancels a call.
        let cancel = CancellationToken::new();
        for attempt in 1..=attempts {
            let t0 = Instant::now();
            let err = match self.provider.chat(req, &NoSink, &cancel).await {
                Ok(r) => {
                    if attempt > 1 {
                        self.record_error(Entry {
                            component: "gpt_oss",
                            error: "earlier attempts failed (see above)",
                            attempted_fix: "retried with back-off",
                            status: &format!("recovered on retry {}", attempt - 1),
                            run_id: Some(&st.run_id),
                        });
                    }
                    return Ok(r);
                }
                Err(e) => e,
            };
            self.events.error(
                "gpt_oss_call_failed",
                json!({
                    "run_id": st.run_id,
                    "iteration": st.iteration,
                    "attempt": attempt,
                    "error": err.to_string(),
                    "status": err.status,
                    "elapsed_ms": t0.elapsed().as_millis() as u64,
                }),
            );
            let record = |fix: &str, status: &str| {
                self.record_error(Entry {
                    component: "gpt_oss",
                    error: &err.to_string(),
                    attempted_fix: fix,
                    status,
                    run_id: Some(&st.run_id),
                })
            };
            if err.kind == ErrorKind::ContextOverflow {
                record("none: the prompt does not fit", "failed");
                return Err(ExecError::new(
                    ErrorCode::ContextWindowExceeded,
                    format!("the model rejected the prompt as too long: {err}"),
                ));
            }
            if err.retryable() && attempt < attempts {
                // A server's own Retry-After wins when it is reasonable.
                let delay = err
                    .retry_after
                    .filter(|d| *d <= Duration::from_secs(60))
                    .unwrap_or_else(|| self.cfg.backoff(attempt));
                record(
                    &format!(
                        "retry {attempt} of {} after {} ms",
                        attempts - 1,
                        delay.as_millis()
                    ),
                    "retrying",
                );
                self.events.info(
                    "retrying_gpt_oss_call",
                    json!({"run_id": st.run_id, "iteration": st.iteration, "attempt": attempt, "delay_ms": delay.as_millis() as u64}),
                );
                tokio::time::sleep(delay).await;
                continue;
            }
            let fix = if err.retryable() {
                format!("retried {} times with back-off", attempts - 1)
            } else {
                "none: not a transient fault".to_string()
            };
            record(&fix, "failed");
            return Err(ExecError::new(
                ErrorCode::GptOssUnreachable,
                format!(
                    "the reasoning model at {} failed after {attempt} attempt(s): {err}",
                    self.cfg.upstream_base()
                ),
            ));
        }
        Err(ExecError::new(
            ErrorCode::GptOssUnreachable,
            "the reasoning model could not be called",
        ))
    }

    /// Shortens, then drops, older tool results until the prompt and `max_tokens` fit
    /// the budget; returns the prompt estimate.
    fn fit_context(
        &self,
        st: &mut RunState,
        fixed_chars: usize,
        max_tokens: u64,
    ) -> Result<u64, ExecError> {
        let avail = self.cfg.available_tokens();
        let trunc = self.cfg.executor.context_trunc_threshold * avail as f64;
        let compact = self.cfg.executor.context_compact_threshold * avail as f64;
        let mut est = estimate_prompt(st, fixed_chars);
        // The newest results are what the model needs next; only older ones give way.
        let older: Vec<usize> = st
            .injected
            .iter()
            .copied()
            .take(st.injected.len().saturating_sub(1))
            .collect();
        if est as f64 >= trunc && !older.is_empty() {
            for &i in &older {
                if let Some(m) = st.messages.get_mut(i) {
                    let text = m.text();
                    if text.chars().count() > SHORTENED_RESULT_CHARS {
                        set_text(m, truncate_head_tail(&text, SHORTENED_RESULT_CHARS));
                    }
                }
            }
            let before = est;
            est = estimate_prompt(st, fixed_chars);
            self.events.info(
                "context_truncated",
                json!({"run_id": st.run_id, "iteration": st.iteration, "tokens_before": before, "tokens_after": est}),
            );
        }
        if est as f64 >= compact && !older.is_empty() {
            for &i in &older {
                if let Some(m) = st.messages.get_mut(i) {
                    set_text(
                        m,
                        "[earlier tool output omitted to stay within the context window]".into(),
                    );
                }
            }
            let before = est;
            est = estimate_prompt(st, fixed_chars);
            self.events.info(
                "context_compacted",
                json!({"run_id": st.run_id, "iteration": st.iteration, "tokens_before": before, "tokens_after": est}),
            );
        }
        if est + max_tokens > avail {
            return Err(ExecError::new(
                ErrorCode::ContextWindowExceeded,
                format!(
                    "the prompt needs about {est} tokens plus {max_tokens} for the answer, over \
                     the budget of {avail} (context_window_limit {} - context_buffer_tokens {})",
                    self.cfg.executor.context_window_limit, self.cfg.executor.context_buffer_tokens
                ),
            ));
        }
        Ok(est)
    }

    /// The tools offered to the model: definitions from the config, else from the
    /// gateway's dry run, else a built-in definition for the well-known names.
    async fn offered_tools(&self, run_id: &str) -> Vec<ToolSpec> {
        let mut out = Vec::new();
        for entry in &self.cfg.tools.allowed {
            match entry {
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
                    out.push(spec);
                }
                ToolEntry::Name(name) => {
                    if let Some(s) = self.described.lock().await.get(name) {
                        out.push(s.clone());
                        continue;
                    }
                    match self
                        .tools
                        .describe(name, DESCRIBE_TIMEOUT.min(self.cfg.tool_timeout(name)))
                        .await
                    {
                        Ok(spec) => {
                            self.described
                                .lock()
                                .await
                                .insert(name.clone(), spec.clone());
                            out.push(spec);
                        }
                        Err(ToolFailure::Rejected {
                            status: 404,
                            message,
                        }) => {
                            self.events.warn(
                                "tool_unavailable",
                                json!({"run_id": run_id, "tool": name, "error": message}),
                            );
                        }
                        Err(e) => {
                            self.events.warn(
                                "tool_schema_fallback",
                                json!({"run_id": run_id, "tool": name, "error": e.to_string()}),
                            );
                            out.push(builtin_spec(name));
                        }
                    }
                }
            }
        }
        out
    }
}

/// A tool call to run: native ones carry the model's call id.
struct Call {
    id: Option<String>,
    name: String,
    arguments: Value,
}

/// `(reasoning, content, native calls)` of one answer.
fn split_answer(resp: &ChatResponse) -> (String, String, Vec<Call>) {
    let mut reasoning = String::new();
    let mut content = String::new();
    let mut calls = Vec::new();
    for b in &resp.content {
        match b {
            ContentBlock::Thinking { thinking, .. } => reasoning.push_str(thinking),
            ContentBlock::Text { text } => content.push_str(text),
            ContentBlock::ToolCall {
                id,
                name,
                arguments,
            } => calls.push(Call {
                id: Some(id.clone()),
                name: clean_tool_name(name),
                arguments: match arguments {
                    // Arguments the provider could not parse are kept as raw text.
                    Value::String(raw) => serde_json::from_str(raw).unwrap_or(json!({})),
                    Value::Null => json!({}),
                    v => v.clone(),
                },
            }),
            ContentBlock::Image { .. } => {}
        }
    }
    (reasoning, content, calls)
}

/// What the well-known gateway tools take, for when the gateway cannot describe them.
fn builtin_spec(name: &str) -> ToolSpec {
    let mut known = ferroclaw_intent::eval::standard_tools();
    known.push(ToolSpec::new(
        "browser",
        "Control a browser: navigate to a URL, take a snapshot or a screenshot.",
        json!({"type": "object", "properties": {"action": {"type": "string"}, "url": {"type": "string"}}, "required": ["action"]}),
    ));
    known
        .into_iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| ToolSpec::new(name, "", json!({"type": "object", "properties": {}})))
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

/// A rough token count: about four chars a token for English and code, the usual
/// rule; calibrated per run against the usage the upstream reports.
pub fn estimate_tokens(chars: usize) -> u64 {
    chars.div_ceil(4) as u64
}

fn context_chars(st: &RunState, fixed_chars: usize) -> usize {
    let mut n = fixed_chars;
    for m in &st.messages {
        // Role markers and separators cost a few tokens per message.
        n += 16;
        for b in m.content() {
            n += match b {
                ContentBlock::Text { text } => text.len(),
                ContentBlock::Thinking { thinking, .. } => thinking.len(),
                ContentBlock::ToolCall {
                    name, arguments, ..
                } => name.len() + arguments.to_string().len(),
                ContentBlock::Image { .. } => 3000,
            };
        }
    }
    n
}

fn estimate_prompt(st: &RunState, fixed_chars: usize) -> u64 {
    let chars = context_chars(st, fixed_chars);
    let est = estimate_tokens(chars);
    if st.context_tokens == 0 || st.context_chars == 0 {
        return est;
    }
    // Scale by how far the real tokenizer was from the rule last time (never below it).
    let ratio =
        (st.context_tokens as f64 / estimate_tokens(st.context_chars) as f64).clamp(1.0, 4.0);
    (est as f64 * ratio).ceil() as u64
}

fn set_text(m: &mut Message, text: String) {
    let blocks = match m {
        Message::User(u) => &mut u.content,
        Message::ToolResult(r) => &mut r.content,
        Message::Assistant(a) => &mut a.content,
    };
    blocks.retain(|b| !matches!(b, ContentBlock::Text { .. }));
    blocks.push(ContentBlock::text(text));
}

/// Keeps the head (two thirds) and the tail (one third) of a text longer than `limit`
/// chars, with a marker saying how much was cut: the start of a file or page and the
/// end of a command's output are where the useful parts usually are.
pub fn truncate_head_tail(text: &str, limit: usize) -> String {
    let total = text.chars().count();
    if total <= limit {
        return text.to_string();
    }
    let marker_room = 48.min(limit / 2);
    let keep = limit.saturating_sub(marker_room);
    let head = keep * 2 / 3;
    let tail = keep - head;
    let cut = total - head - tail;
    let h: String = text.chars().take(head).collect();
    let t: String = text.chars().skip(total - tail).collect();
    format!("{h}\n…[truncated {cut} chars]…\n{t}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_head_and_tail() {
        assert_eq!(truncate_head_tail("short", 10), "short");
        let text: String = (0..1000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let t = truncate_head_tail(&text, 200);
        assert!(t.starts_with(&text[..50]));
        assert!(t.ends_with(&text[text.len() - 40..]));
        assert!(t.contains("[truncated"));
        assert!(t.chars().count() <= 200 + 10, "{}", t.chars().count());
        // Multi-byte text is cut on char boundaries.
        let wide = "é".repeat(500);
        assert!(truncate_head_tail(&wide, 100).contains("truncated"));
    }

    #[test]
    fn percent_rounds_to_a_tenth() {
        assert_eq!(percent(1, 3), 33.3);
        assert_eq!(percent(0, 0), 0.0);
    }

    #[test]
    fn builtin_specs_cover_the_gateway_tools() {
        assert!(builtin_spec("read").parameters["properties"]["path"].is_object());
        assert!(builtin_spec("browser").parameters["properties"]["action"].is_object());
        assert_eq!(builtin_spec("mystery").name, "mystery");
    }
}
