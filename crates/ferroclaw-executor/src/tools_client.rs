//! Client of a gateway's `POST /tools/invoke` (ferroclaw's or OpenClaw's): body
//! `{tool, args, sessionKey}`, bearer token; 200 `{ok:true, result}`, 4xx
//! `{ok:false, error:{type, message}}`.
//!
//! Failures are classified for the run's recovery tiers: a tool that ran and failed,
//! or a call the gateway refused (400/404), is [`ToolFailure::Rejected`] and goes back
//! to the model; network faults, time-outs, 408/429/5xx are [`ToolFailure::Transient`]
//! and retried; a refused token (401/403) is [`ToolFailure::Fatal`], since neither a
//! retry nor the model can fix it.

use ferroclaw_types::error_chain;
use std::time::Duration;

use ferroclaw_intent::ToolSpec;
use serde_json::{json, Value};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolFailure {
    #[error("{message} (HTTP {status})")]
    Rejected { status: u16, message: String },
    #[error("{0}")]
    Transient(String),
    #[error("{0}")]
    Fatal(String),
}

#[derive(Debug, Clone)]
pub struct ToolsClient {
    http: reqwest::Client,
    invoke_url: String,
    token: Option<String>,
    session_key: String,
}

impl ToolsClient {
    pub fn new(gateway_url: &str, token: Option<String>, session_key: &str) -> Self {
        Self {
            http: reqwest::Client::new(),
            invoke_url: format!("{}/tools/invoke", gateway_url.trim_end_matches('/')),
            token,
            session_key: session_key.to_string(),
        }
    }

    /// One call, no retry. Returns the gateway's `result`.
    pub async fn invoke(
        &self,
        tool: &str,
        args: &Value,
        dry_run: bool,
        timeout: Duration,
    ) -> Result<Value, ToolFailure> {
        let mut body = json!({"tool": tool, "sessionKey": self.session_key});
        if dry_run {
            body["dryRun"] = Value::Bool(true);
        } else {
            body["args"] = args.clone();
        }
        let mut rb = self
            .http
            .post(&self.invoke_url)
            .timeout(timeout)
            .json(&body);
        if let Some(t) = &self.token {
            rb = rb.bearer_auth(t);
        }
        let resp = rb.send().await.map_err(|e| {
            ToolFailure::Transient(if e.is_timeout() {
                format!("gateway did not answer within {} ms", timeout.as_millis())
            } else {
                format!("gateway unreachable: {}", error_chain(&e))
            })
        })?;
        let status = resp.status().as_u16();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| ToolFailure::Transient(format!("reading the gateway answer: {e}")))?;
        let parsed: Option<Value> = serde_json::from_slice(&bytes).ok();
        let message = || {
            parsed
                .as_ref()
                .and_then(|v| v.get("error"))
                .and_then(|e| e.get("message").or(Some(e)))
                .map(|m| match m {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .unwrap_or_else(|| String::from_utf8_lossy(&bytes).chars().take(300).collect())
        };
        match status {
            200..=299 => {
                let Some(v) = parsed.as_ref() else {
                    return Err(ToolFailure::Transient(
                        "the gateway answered with a body that is not JSON".into(),
                    ));
                };
                if v.get("ok").and_then(Value::as_bool) == Some(false) {
                    return Err(ToolFailure::Rejected {
                        status,
                        message: message(),
                    });
                }
                Ok(v.get("result").cloned().unwrap_or(Value::Null))
            }
            401 | 403 => Err(ToolFailure::Fatal(format!(
                "the gateway refused the token (HTTP {status}): {}",
                message()
            ))),
            408 | 429 | 500..=599 => Err(ToolFailure::Transient(format!(
                "gateway HTTP {status}: {}",
                message()
            ))),
            _ => Err(ToolFailure::Rejected {
                status,
                message: message(),
            }),
        }
    }

    /// The tool's definition, asked with `dryRun` (ferroclaw answers
    /// `{dryRun, tool:{name, description, parameters}}`).
    pub async fn describe(&self, tool: &str, timeout: Duration) -> Result<ToolSpec, ToolFailure> {
        let result = self.invoke(tool, &Value::Null, true, timeout).await?;
        let def = result.get("tool").unwrap_or(&result);
        let parameters = def.get("parameters").cloned().unwrap_or(Value::Null);
        if !parameters.is_object() {
            return Err(ToolFailure::Rejected {
                status: 200,
                message: "the gateway's dry run did not describe the tool's parameters".into(),
            });
        }
        let description = def
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default();
        Ok(ToolSpec::new(tool, description, parameters))
    }
}

/// The text a tool result stands for: a string as is, ferroclaw's `{content}` or
/// OpenClaw's `{content:[{type:"text", text}]}`, else the JSON.
pub fn result_text(result: &Value) -> String {
    match result {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Object(m) => match m.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => {
                let texts: Vec<&str> = parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect();
                if texts.is_empty() {
                    result.to_string()
                } else {
                    texts.join("\n")
                }
            }
            _ => result.to_string(),
        },
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_text_reads_both_gateways() {
        assert_eq!(result_text(&json!("plain")), "plain");
        assert_eq!(
            result_text(&json!({"content": "a.txt", "forUser": null})),
            "a.txt"
        );
        assert_eq!(
            result_text(
                &json!({"content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}]})
            ),
            "x\ny"
        );
        assert_eq!(result_text(&json!({"n": 1})), r#"{"n":1}"#);
        assert_eq!(result_text(&Value::Null), "");
    }
}
