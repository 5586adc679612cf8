//! The gateway: serves agents over HTTP (OpenAI-compatible, OpenResponses, tools) and
//! WebSocket RPC (protocol 3), with auth, roles, rate limits, and a scheduler that puts
//! every run in a lane and in its session's queue.
//!
//! A request travels: [`server`] (router, body limit, request metrics) → [`http`] or
//! [`ws`] (auth in [`auth`], rate limit in [`ratelimit`]) → [`runs`] (agent and session
//! resolved, `/stop` commands, submission to the [`scheduler`]) → `Agent::run` → events
//! back to the surface.

pub mod access;
pub mod auth;
pub mod conn_limit;
pub mod error;
pub mod http;
pub mod listener;
pub mod metrics;
pub mod ratelimit;
pub mod runs;
pub mod scheduler;
pub mod server;
pub mod state;
pub mod ws;

/// WebSocket protocol version spoken (DESIGN §6).
pub const PROTOCOL_VERSION: u32 = 3;
/// Crate version, reported by `/health`, `status` and `connect`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
