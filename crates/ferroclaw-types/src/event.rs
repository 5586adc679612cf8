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
    },
}
