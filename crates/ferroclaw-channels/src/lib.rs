//! Chat channels: platform updates become runs submitted through the runtime, and the
//! run's answer goes back to the chat. A channel knows nothing of providers or tools.
//!
//! `seam.rs` is what a platform gives and takes, `dispatch.rs` the platform-neutral
//! rules (policies, pairing, sessions, group context, delivery), `format/` the answer in
//! the platform's markup under its limit, `lease.rs` one instance per account,
//! `telegram/`, `discord/`, `slack/`, `whatsapp.rs`, `zalo.rs` and `feishu/` the platforms, `service.rs` the channels of a process
//! (started with the gateway, listed, toggled).

mod answer;
pub mod discord;
pub mod dispatch;
pub mod feishu;
pub mod format;
mod http;
mod lease;
pub mod pairing;
pub mod seam;
mod service;
pub mod slack;
mod status;
pub mod telegram;
pub mod whatsapp;
pub mod zalo;

pub use dispatch::now_ms;
pub use service::{ChannelError, Channels, WebhookError};
pub use status::ChannelStatus;
