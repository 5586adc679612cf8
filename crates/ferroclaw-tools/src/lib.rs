//! Tools the agent can call, the registry that runs them, and the guards around them.

pub mod beneath;
pub mod builtin;
pub mod custom_tool;
pub mod exec_guard;
pub mod exec_setup;
pub mod input_guard;
pub mod mcp;
pub mod memory_index;
pub mod path_guard;
pub mod paths;
pub mod policy;
pub mod process;
pub mod progress;
pub mod rate_limit;
mod registry;
pub mod sandbox;
pub mod scrub;
pub mod ssrf;

pub use builtin::core_tools;
pub use input_guard::{InputGuardAction, InputVerdict};
pub use path_guard::{user_workspace, DeniedPaths};
pub use paths::{resolve_in_workspace, PathError};
pub use policy::{Decision, PolicyContext, PolicyEngine};
pub use progress::{Progress, ProgressHold};
pub use rate_limit::RateLimiter;
pub use registry::ToolRegistry;
pub use scrub::scrub;

use std::path::PathBuf;

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Per-call context handed to a tool.
#[derive(Debug, Clone)]
pub struct ToolContext {
    pub agent_id: String,
    pub session_key: String,
    /// Root the filesystem tools are confined to (must exist; canonicalised by the registry user).
    pub workspace: PathBuf,
    pub cancel: CancellationToken,
    /// Set when the run acts for one user of a per-user agent: `workspace` is then that
    /// user's sub-workspace, and everything else under the agent's root workspace (the
    /// other users) is out of reach.
    pub user: Option<ToolUser>,
    /// The user the run acts for, whatever the agent's workspace (`None`: nobody in
    /// particular, the operator's own run). Tools that keep per-user records (`cron`)
    /// act for this user.
    pub acting_user: Option<String>,
    /// The run answers a group chat: the `tools.group_chat` policy level applies too.
    pub group_chat: bool,
    /// The run's progress clock: tick it when the work shows signs of life, hold it
    /// while waiting on a person (see [`progress`]).
    pub progress: Progress,
    /// The run that makes the call (empty outside a run): what a run started by a tool
    /// names as its parent.
    pub run_id: String,
}

/// The user a tool call acts for (see [`ToolContext::user`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolUser {
    pub id: String,
    /// The agent's shared workspace root, parent of every `user_<id>` sub-workspace.
    pub root_workspace: PathBuf,
}

impl ToolContext {
    /// The session key as the store knows it: `session_key` is scoped by agent
    /// (`<agent>:<key>`, see `ferroclaw_agent::tool_scope`) for keying tool state. For a
    /// run on behalf of a user this is the user-scoped key (`user:<id>:<key>`, see
    /// `ferroclaw_agent::user_scope`), so tool state of two users never mixes.
    pub fn session_display(&self) -> &str {
        self.session_key
            .strip_prefix(self.agent_id.as_str())
            .and_then(|rest| rest.strip_prefix(':'))
            .unwrap_or(&self.session_key)
    }
}

/// What a tool returns. `for_llm` goes back to the model; `for_user` (if set) is what a
/// surface shows a person instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    pub for_llm: String,
    pub for_user: Option<String>,
    pub is_error: bool,
    /// The tool's backend is gone (after its own retries): the run cannot usefully go
    /// on, so it ends with this error instead of handing it to the model.
    pub ends_run: bool,
}

impl ToolResult {
    pub fn ok(text: impl Into<String>) -> Self {
        Self {
            for_llm: text.into(),
            for_user: None,
            is_error: false,
            ends_run: false,
        }
    }

    pub fn error(text: impl Into<String>) -> Self {
        Self {
            for_llm: text.into(),
            for_user: None,
            is_error: true,
            ends_run: false,
        }
    }

    /// An error that ends the run (see [`ToolResult::ends_run`]).
    pub fn unavailable(text: impl Into<String>) -> Self {
        Self {
            ends_run: true,
            ..Self::error(text)
        }
    }
}

#[async_trait]
pub trait Tool: Send + Sync {
    fn name(&self) -> &str;
    /// Other names models use for this tool (e.g. GoClaw's `read_file`).
    fn aliases(&self) -> &[&str] {
        &[]
    }
    /// One-line summary for the system prompt and the tool schema.
    fn description(&self) -> &str;
    /// JSON schema of the arguments object.
    fn parameters(&self) -> Value;
    /// Runs the tool. Errors are returned as `ToolResult::error`, never panics.
    async fn execute(&self, ctx: &ToolContext, args: Value) -> ToolResult;
    /// Whether this run (its agent and user) may see and call the tool at all, beside the
    /// policy: `Err(why)` hides it from the run and refuses a call that names it anyway.
    fn offered_to(&self, _ctx: &ToolContext) -> Result<(), String> {
        Ok(())
    }
}
