//! The runtime: the one door every run enters by, whoever starts it.
//!
//! A surface (HTTP, WebSocket, the CLI, the executor) or a tool (`sessions_send`,
//! `sessions_spawn`, `subagents steer`) hands a message to [`Runtime::submit`] (tools
//! through the [`session_tools`] hub, which shares the same core). The run gets its id
//! there and then, enters its session's queue and its lane in the [`scheduler`], takes
//! the session's lease in the store when it starts (one writer per session, also across
//! processes on one home), and runs the agent loop (`ferroclaw_agent::Agent`). The
//! submitter holds a [`RunHandle`]: the id, the events, the outcome, `abort()`.
//!
//! The runtime knows nothing of HTTP, WebSocket or JSON; the agent knows nothing of
//! queues or other sessions.

pub mod bootstrap;
pub mod cron;
mod door;
mod handle;
pub mod mcp_servers;
mod origin;
mod relay;
mod runtime;
pub mod scheduler;
pub mod session_tools;
pub mod stalls;
mod tenants;
pub mod traces;
mod watch;

pub use door::{queue_key, RunInfo, RunObserver};
pub use ferroclaw_agent::RunOptions;
pub use handle::{Aborter, RunFailure, RunHandle};
pub use origin::Origin;
pub use runtime::{
    channel_session, AgentEntry, BuildError, ChatSink, Runtime, RuntimeError, RuntimeOptions,
    Submit, Submitted,
};
pub use scheduler::{DropPolicy, Lane, QueueMode, Scheduler, SchedulerConfig, SubmitError};
pub use tenants::{
    Access, AgentPatch, AgentSpec, AgentView, FileTarget, ProviderSpec, ProviderView, Requester,
    TenantError,
};
pub use watch::{SessionEvent, WatchGuard};
