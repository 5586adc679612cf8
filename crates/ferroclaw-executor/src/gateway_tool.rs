//! The executor's tools: each is a [`ferroclaw_tools::Tool`] whose work is done by a
//! gateway's `POST /tools/invoke` ([`crate::tools_client`]), so the agent loop runs them
//! like any other tool. What the executor promises about tools lives here: its exec
//! policy (checked before the gateway is asked), the per-tool time-out and result
//! limit, retries of transient gateway faults with the configured back-off, the
//! `tool_execution_*` events and the error-log lines. A gateway that stays unreachable
//! ends the run (`tool_execution_failed`); a tool that fails goes back to the model.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ferroclaw_agent::history::head_tail;
use ferroclaw_intent::ToolSpec;
use ferroclaw_providers::RetryPolicy;
use ferroclaw_tools::{Tool, ToolContext, ToolResult};
use serde_json::{json, Value};

use crate::config::{Config, ToolSettings};
use crate::errors_log::Entry;
use crate::run::Logs;
use crate::tools_client::{result_text, ToolFailure, ToolsClient};

/// Longest wait for a tool's `dryRun` description.
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(5);

/// What every gateway tool shares.
pub(crate) struct Gateway {
    pub client: ToolsClient,
    pub retry: RetryPolicy,
    pub logs: Arc<Logs>,
}

pub(crate) struct GatewayTool {
    name: String,
    gateway: Arc<Gateway>,
    timeout: Duration,
    result_limit: usize,
    policy: Option<ToolSettings>,
    /// The definition the gateway gave (asked again before each run until it answers).
    described: OnceLock<ToolSpec>,
    /// Used until then: the configured or the well-known definition.
    fallback: ToolSpec,
    /// From the configuration: never asked of the gateway.
    configured: bool,
}

impl GatewayTool {
    pub fn new(cfg: &Config, gateway: Arc<Gateway>, spec: ToolSpec, configured: bool) -> Self {
        let name = spec.name.clone();
        GatewayTool {
            timeout: cfg.tool_timeout(&name),
            result_limit: cfg.result_limit(&name),
            policy: cfg.tools.per_tool.get(&name).cloned(),
            name,
            gateway,
            described: OnceLock::new(),
            fallback: spec,
            configured,
        }
    }

    fn spec(&self) -> &ToolSpec {
        self.described.get().unwrap_or(&self.fallback)
    }

    /// Asks the gateway for the tool's definition unless it already gave one.
    /// `Err(message)` when the gateway says the tool does not exist (404).
    pub async fn describe(&self) -> Result<(), String> {
        if self.configured || self.described.get().is_some() {
            return Ok(());
        }
        match self
            .gateway
            .client
            .describe(&self.name, DESCRIBE_TIMEOUT.min(self.timeout))
            .await
        {
            Ok(spec) => {
                let _ = self.described.set(spec);
                Ok(())
            }
            Err(ToolFailure::Rejected {
                status: 404,
                message,
            }) => Err(message),
            Err(e) => {
                self.gateway.logs.events.warn(
                    "tool_schema_fallback",
                    json!({"tool": self.name, "error": e.to_string()}),
                );
                Ok(())
            }
        }
    }

    /// `tools.<name>.max_results` / `max_chars` cap what the model asks for (and fill in
    /// what it did not); `extract_mode` is the default when it names none. Each reaches
    /// the tool under the argument name the gateway's tools read.
    fn with_settings(&self, mut args: Value) -> Value {
        let (Some(s), Value::Object(map)) = (&self.policy, &mut args) else {
            return args;
        };
        let mut cap = |canonical: &str, aliases: &[&str], limit: Option<u64>| {
            let Some(limit) = limit else { return };
            let asked = std::iter::once(canonical)
                .chain(aliases.iter().copied())
                .find_map(|k| map.get(k).and_then(Value::as_u64));
            for k in aliases {
                map.remove(*k);
            }
            map.insert(
                canonical.into(),
                json!(asked.map_or(limit, |a| a.min(limit))),
            );
        };
        cap("count", &["maxResults", "max_results"], s.max_results);
        cap("maxChars", &["max_chars"], s.max_chars);
        if let Some(mode) = &s.extract_mode {
            let named = ["extractMode", "extract_mode", "mode", "format"]
                .iter()
                .any(|k| map.contains_key(*k));
            if !named {
                map.insert("extractMode".into(), json!(mode));
            }
        }
        args
    }

    /// `tools.<name>.allowed_commands` / `blocked_commands`, checked before the gateway.
    fn exec_policy(&self, args: &Value) -> Option<String> {
        let settings = self.policy.as_ref()?;
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

    fn failed(&self, run_id: &str, error: &str, action: &str, status: &str) {
        self.gateway.logs.events.warn(
            "tool_execution_failed",
            json!({"run_id": run_id, "tool": self.name, "error": error, "action": action}),
        );
        self.gateway.logs.record(Entry {
            component: &self.name,
            error,
            attempted_fix: action,
            status,
            run_id: Some(run_id),
        });
    }
}

#[async_trait]
impl Tool for GatewayTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn aliases(&self) -> &[&str] {
        &[]
    }

    fn description(&self) -> &str {
        &self.spec().description
    }

    fn parameters(&self) -> Value {
        self.spec().parameters.clone()
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> ToolResult {
        // The executor names each run's session after the run.
        let run_id = ctx.session_display();
        let logs = &self.gateway.logs;
        let mut shown = args.to_string();
        if shown.len() > 500 {
            shown = head_tail(&shown, 500);
        }
        logs.events.info(
            "tool_execution_start",
            json!({"run_id": run_id, "tool": self.name, "args": shown}),
        );
        if let Some(why) = self.exec_policy(&args) {
            self.failed(
                run_id,
                &why,
                "refused by the executor's exec policy; told the model",
                "continued",
            );
            return ToolResult::error(why);
        }
        let args = self.with_settings(args);
        let attempts = self.gateway.retry.attempts.max(1);
        for attempt in 1..=attempts {
            let t0 = Instant::now();
            let outcome = tokio::select! {
                biased;
                _ = ctx.cancel.cancelled() => return ToolResult::error("not finished: the run ended"),
                r = self.gateway.client.invoke(&self.name, &args, false, self.timeout) => r,
            };
            match outcome {
                Ok(v) => {
                    let text = result_text(&v);
                    logs.events.info(
                        "tool_execution_success",
                        json!({"run_id": run_id, "tool": self.name, "result_length": text.chars().count(), "elapsed_ms": t0.elapsed().as_millis() as u64, "attempt": attempt}),
                    );
                    if attempt > 1 {
                        logs.record(Entry {
                            component: &self.name,
                            error: "earlier attempts failed (see above)",
                            attempted_fix: "retried with back-off",
                            status: &format!("recovered on retry {}", attempt - 1),
                            run_id: Some(run_id),
                        });
                    }
                    return ToolResult::ok(head_tail(&text, self.result_limit));
                }
                Err(ToolFailure::Rejected { message, .. }) => {
                    self.failed(
                        run_id,
                        &message,
                        "injected the error into the context",
                        "continued",
                    );
                    return ToolResult::error(message);
                }
                Err(ToolFailure::Fatal(message)) => {
                    self.failed(run_id, &message, "none: not retryable", "failed");
                    return ToolResult::unavailable(message);
                }
                Err(ToolFailure::Transient(message)) if attempt < attempts => {
                    let delay = self.gateway.retry.backoff(attempt);
                    self.failed(
                        run_id,
                        &message,
                        &format!(
                            "retry {attempt} of {} after {} ms",
                            attempts - 1,
                            delay.as_millis()
                        ),
                        "retrying",
                    );
                    tokio::select! {
                        biased;
                        _ = ctx.cancel.cancelled() => return ToolResult::error("not finished: the run ended"),
                        _ = tokio::time::sleep(delay) => {}
                    }
                }
                Err(ToolFailure::Transient(message)) => {
                    self.failed(
                        run_id,
                        &message,
                        &format!("failed after {attempts} attempts"),
                        "failed",
                    );
                    return ToolResult::unavailable(format!(
                        "failed after {attempts} attempts: {message}"
                    ));
                }
            }
        }
        // Every attempt returns above; zero attempts cannot be configured.
        ToolResult::unavailable("the gateway was not asked")
    }
}

/// What the well-known gateway tools take, for when the gateway cannot describe them.
pub(crate) fn builtin_spec(name: &str) -> ToolSpec {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_specs_cover_the_gateway_tools() {
        assert!(builtin_spec("read").parameters["properties"]["path"].is_object());
        assert!(builtin_spec("browser").parameters["properties"]["action"].is_object());
        assert_eq!(builtin_spec("mystery").name, "mystery");
    }
}
