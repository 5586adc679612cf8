//! The gateway: serves agents over HTTP (OpenAI-compatible, OpenResponses, tools) and
//! WebSocket RPC (protocol 3), with auth, roles and rate limits. It is transport only:
//! every run is submitted to the runtime (`ferroclaw-runtime`), which owns the queues,
//! lanes and agents.
//!
//! A request travels: [`listener`] (accept, caps) → [`access`] (Host/Origin/JSON) →
//! [`http`] or [`ws`] (auth in [`auth`], rate limit in [`ratelimit`]) → [`runs`]
//! (submit to the runtime, then drive the run handle: events to the client, abort when
//! the client leaves) → the answer rendered as JSON, SSE or WebSocket frames.

pub mod access;
pub mod auth;
pub mod conn_limit;
pub mod error;
pub mod http;
pub mod integrity;
pub mod listener;
pub mod metrics;
pub mod ratelimit;
pub mod runs;
pub mod server;
pub mod state;
pub mod ws;

/// WebSocket protocol version spoken.
pub const PROTOCOL_VERSION: u32 = 3;
/// Crate version, reported by `/health`, `status` and `connect`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
