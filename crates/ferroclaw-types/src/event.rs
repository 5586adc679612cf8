use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{StopReason, Usage};

/// One event of a run. `seq` starts at 1 and only increases within a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunEvent {
    pub run_id: String,
    pub seq: u64,
    #[serde(flatten)]
    pub kind: EventKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum EventKind {
    LifecycleStart {
        agent_id: String,
        session_key: String,
        model: String,
    },
    LifecycleEnd {
        stop_reason: StopReason,
        usage: Usage,
        text: String,
    },
    LifecycleError {
        message: String,
    },
    AssistantDelta {
        text: String,
    },
    ReasoningDelta {
        text: String,
    },
    ToolStart {
        call_id: String,
        name: String,
        arguments: Value,
    },
    ToolResult {
        call_id: String,
        name: String,
        is_error: bool,
        duration_ms: u64,
        /// The start of what the tool returned (its error, when it failed), at most 500
        /// characters.
        #[serde(default)]
        preview: String,
    },
    /// A model call is about to be made (iteration `iteration` of the run).
    ModelRequest {
        iteration: u32,
        messages: usize,
        estimated_tokens: u64,
    },
    /// A model call answered. `usage` is what the server reported (zero when it did not);
    /// `output_chars` lets a surface estimate what it did not report.
    ModelResponse {
        iteration: u32,
        /// Who answered (a fallback's name when the primary failed).
        #[serde(default)]
        provider: String,
        #[serde(default)]
        model: String,
        usage: Usage,
        stop_reason: StopReason,
        output_chars: usize,
        elapsed_ms: u64,
    },
    /// A model call failed with a transient fault and is tried again after `delay_ms`.
    ModelRetry {
        attempt: u32,
        delay_ms: u64,
        status: Option<u16>,
        error: String,
    },
    /// Tool calls were read from the model's text (`strategy`: the parser strategy that
    /// found them) or came as native calls (`native`).
    ToolIntents {
        iteration: u32,
        names: Vec<String>,
        strategy: String,
    },
    /// Nothing progressed (no stream delta, no tool output) for `idle_ms`: the stall
    /// watchdog is cutting the run short. `waiting_on` is `model` or `tools`.
    RunStalled {
        idle_ms: u64,
        waiting_on: String,
    },
    /// A stalled run was cut short cleanly: the interrupted model call and every tool
    /// call that had no result yet are recorded as interrupted, and the session is free
    /// for its next turn.
    RunRecovered {
        idle_ms: u64,
        interrupted_tools: usize,
    },
    /// Older tool results were shortened (`omitted: false`) or replaced by a note
    /// (`omitted: true`) so the request fits the agent's context budget.
    ContextTrimmed {
        iteration: u32,
        omitted: bool,
        tokens_before: u64,
        tokens_after: u64,
    },
}
