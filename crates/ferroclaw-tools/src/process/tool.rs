//! `process`: the model's handle on its background processes.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{ProcessError, ProcessManager};
use crate::builtin::{optional_bool, optional_str, optional_u64, required_str};
use crate::{Tool, ToolContext, ToolResult};

/// Lines `log` returns when no limit is given.
const DEFAULT_LOG_LINES: usize = 200;
/// Upper bound for `waitMs`, so a poll cannot pin a run for ever.
const MAX_WAIT_MS: u64 = 600_000;
/// Characters of output one poll/log returns at most (the rest stays readable via `log`).
const MAX_RESULT_CHARS: usize = 100_000;

pub struct ProcessTool {
    manager: Arc<ProcessManager>,
}

impl ProcessTool {
    pub fn new(manager: Arc<ProcessManager>) -> Self {
        Self { manager }
    }
}

#[async_trait]
impl Tool for ProcessTool {
    fn name(&self) -> &str {
        "process"
    }

    fn description(&self) -> &str {
        "Manage background processes started with exec {background: true} or exec {yieldMs}: list them, poll new output and status (optionally waiting up to waitMs for the process to finish), read the buffered log (offset/limit in lines), write to stdin, or kill. Without sessionId, acts on the most recent process of this session."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["list", "poll", "log", "write", "kill"]},
                "sessionId": {"type": "string", "description": "Process id returned by exec (default: the most recent process)."},
                "offset": {"type": "integer", "description": "log: first line (0-based)."},
                "limit": {"type": "integer", "description": "log: number of lines (default 200)."},
                "data": {"type": "string", "description": "write: text to send to stdin."},
                "eof": {"type": "boolean", "description": "write: close stdin after writing."},
                "waitMs": {"type": "integer", "description": "poll: wait up to this many milliseconds for the process to finish."}
            },
            "required": ["action"]
        })
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> ToolResult {
        match run(&self.manager, ctx, &args).await {
            Ok(r) | Err(r) => r,
        }
    }
}

async fn run(
    m: &ProcessManager,
    ctx: &ToolContext,
    args: &Value,
) -> Result<ToolResult, ToolResult> {
    let action = required_str(args, &["action"])?.trim().to_ascii_lowercase();
    let session = ctx.session_key.as_str();
    if action == "list" {
        let procs = m.list(session);
        if procs.is_empty() {
            return Ok(ToolResult::ok("No background processes in this session."));
        }
        let lines: Vec<String> = procs
            .iter()
            .map(|p| format!("{} [{}] pid {}: {}", p.id, p.status, p.pid, p.command))
            .collect();
        return Ok(ToolResult::ok(lines.join("\n")));
    }
    if !matches!(action.as_str(), "poll" | "log" | "write" | "kill") {
        return Err(ToolResult::error(format!(
            "unknown action {action:?}; use list, poll, log, write or kill"
        )));
    }
    let id = match optional_str(
        args,
        &["sessionId", "session_id", "id", "processId", "process_id"],
    )? {
        Some(id) if !id.trim().is_empty() => id.trim().to_string(),
        _ => m.latest(session).ok_or_else(|| {
            ToolResult::error(
                "no background processes in this session; start one with exec {background: true}",
            )
        })?,
    };
    let not_found = |e: ProcessError| ToolResult::error(e.to_string());
    match action.as_str() {
        "poll" => {
            let wait = optional_u64(args, &["waitMs", "wait_ms", "timeoutMs", "timeout_ms"])?
                .map(|ms| Duration::from_millis(ms.min(MAX_WAIT_MS)));
            let r = m.poll(session, &id, wait).await.map_err(not_found)?;
            let mut text = if r.output.is_empty() {
                "(no new output)".to_string()
            } else {
                cap(&r.output)
            };
            if r.dropped > 0 {
                text = format!(
                    "[{} bytes of older output were dropped from the buffer]\n{text}",
                    r.dropped
                );
            }
            if !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!("[process {id}: {}]", r.status));
            Ok(ToolResult::ok(text))
        }
        "log" => {
            let offset = optional_u64(args, &["offset"])?.unwrap_or(0) as usize;
            let limit = optional_u64(args, &["limit"])?
                .map(|l| l as usize)
                .unwrap_or(DEFAULT_LOG_LINES)
                .max(1);
            let (text, from, total) = m.log(session, &id, offset, limit).map_err(not_found)?;
            let shown =
                text.matches('\n').count() + usize::from(!text.is_empty() && !text.ends_with('\n'));
            let status = m.info(session, &id).map_err(not_found)?.status;
            let mut out = cap(&text);
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&format!(
                "[process {id}: {status}; lines {}-{} of {total}]",
                if shown == 0 { from } else { from + 1 },
                from + shown
            ));
            Ok(ToolResult::ok(out))
        }
        "write" => {
            let data = optional_str(args, &["data", "input", "text"])?.unwrap_or("");
            let eof = optional_bool(args, &["eof", "close"])?.unwrap_or(false);
            if data.is_empty() && !eof {
                return Err(ToolResult::error(
                    "write needs \"data\" (or eof: true to close stdin)",
                ));
            }
            m.write(session, &id, data.as_bytes(), eof)
                .await
                .map_err(not_found)?;
            Ok(ToolResult::ok(format!(
                "Wrote {} bytes to {id}{}.",
                data.len(),
                if eof { " and closed its stdin" } else { "" }
            )))
        }
        _ => {
            let status = m.kill(session, &id).await.map_err(not_found)?;
            Ok(ToolResult::ok(format!("Process {id}: {status}.")))
        }
    }
}

fn cap(s: &str) -> String {
    if s.chars().count() <= MAX_RESULT_CHARS {
        return s.to_string();
    }
    let tail: String = {
        let v: Vec<char> = s.chars().rev().take(MAX_RESULT_CHARS).collect();
        v.into_iter().rev().collect()
    };
    format!("[... output truncated; use action \"log\" with offset/limit to read all of it ...]\n{tail}")
}
