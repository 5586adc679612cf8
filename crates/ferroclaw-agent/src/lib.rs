//! The agent runtime: the loop ([`runner`]), the history pipeline that keeps every
//! provider request well-formed ([`history`]), the system prompt ([`prompt`]), the
//! output sanitiser ([`sanitize`]). One run of one session: queues, lanes and the wiring
//! from configuration live in `ferroclaw-runtime`, which every run goes through.

pub mod compaction;
pub mod events;
pub mod history;
pub mod intent_confirm;
pub mod prompt;
pub mod runner;
pub mod sanitize;
pub mod tool_intent;
pub mod user_scope;
mod watchdog;

pub use events::{EventSink, NullSink};
pub use runner::{
    Agent, AgentSettings, ContextBudget, RunError, RunOptions, RunOutput, RunRequest, ToolSlots,
};

/// The key tool state (background processes, the tool rate limit, approvals) is scoped
/// by: session keys are only unique within an agent.
pub fn tool_scope(agent_id: &str, session_key: &str) -> String {
    format!("{agent_id}:{session_key}")
}
