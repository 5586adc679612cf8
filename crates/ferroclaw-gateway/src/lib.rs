//! The gateway: serves agents over HTTP (OpenAI-compatible, OpenResponses, tools) and
//! WebSocket RPC (protocol 3), with auth, roles, rate limits, and a scheduler that puts
//! every run in a lane and in its session's queue.

pub mod scheduler;
