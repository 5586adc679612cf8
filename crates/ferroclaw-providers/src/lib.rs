//! LLM providers. Each speaks one wire protocol and returns one normalised result;
//! the agent loop never sees a wire format.
//!
//! Entry points: [`Provider::chat`] (one call), wrapped by [`retry::RetryingProvider`]
//! (back-off, `Retry-After`) and [`fallback::FallbackChain`] (model fallback with
//! per-(provider, model) cool-downs).
//!
//! # Layering
//!
//! ```text
//! FallbackChain            tries (provider, model) candidates in order, cools down failures
//!   └─ RetryingProvider    retries one candidate: back-off with jitter, Retry-After,
//!        │                 never after the first streamed delta
//!        └─ OpenAiCompat | Anthropic    one HTTP call in one wire format
//!              ├─ schema     tool-schema cleaning per provider family
//!              ├─ usage      token counters from every spelling
//!              └─ shell       the HTTP call both share: headers, time-outs, reply cap
//!                   └─ http_error / transport   status → ErrorKind, Retry-After, SSE reading
//! ```
//!
//! The wire providers never retry; they classify failures ([`ErrorKind`]) and fill
//! `provider`, `model`, `status` and `streamed` on every error so that the layers above
//! decide on those fields alone. Every network await is raced against the caller's
//! [`CancellationToken`], so an abort drops the connection at once.

pub mod anthropic;
mod error;
pub mod fallback;
mod http_error;
pub mod openai_compat;
pub mod probe;
pub mod retry;
pub mod schema;
mod shell;
mod transport;
pub mod usage;

pub use anthropic::{Anthropic, AnthropicConfig};
pub use error::{ErrorKind, ProviderError};
pub use fallback::FallbackChain;
pub use openai_compat::{OpenAiCompat, OpenAiCompatConfig};
pub use retry::{RetryPolicy, RetryingProvider};
pub use schema::{clean_schema, SchemaFlavor};
pub use usage::normalize_usage;

use async_trait::async_trait;
use ferroclaw_types::{ContentBlock, Message, StopReason, ToolDefinition, Usage};
use tokio_util::sync::CancellationToken;

/// One request to a model, in transcript form; each provider converts it to its wire.
#[derive(Debug, Clone, Default)]
pub struct ChatRequest {
    pub model: String,
    pub system: Option<String>,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolDefinition>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    pub stream: bool,
    /// Extra top-level body fields for servers that take them (e.g. vLLM's
    /// `guided_json`); they never replace a field the provider sets itself.
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// Cap on the reply's text, reasoning and tool-call arguments together, in bytes;
    /// `None` means [`DEFAULT_MAX_REPLY_BYTES`]. Reading stops as soon as it is passed
    /// (the error is [`ErrorKind::ReplyTooLarge`]), so a runaway or hostile upstream
    /// cannot make us buffer an unbounded answer.
    pub max_reply_bytes: Option<usize>,
    /// Extended thinking with this many tokens of budget (Anthropic's wire; at least
    /// 1,024). `None`: the model's own default.
    pub thinking_budget: Option<u32>,
}

/// 1 MiB. A long legitimate turn (a few thousand lines of code in a file write, or a
/// long essay with reasoning) is a few hundred KiB; output token limits of current
/// models (≤ 128k tokens, ~4 bytes each) end near 512 KiB. Twice that leaves headroom
/// while keeping six concurrent runaway replies at a few MiB instead of gigabytes.
pub const DEFAULT_MAX_REPLY_BYTES: usize = 1 << 20;

impl ChatRequest {
    /// The reply cap in effect for this request.
    pub fn reply_limit(&self) -> usize {
        self.max_reply_bytes.unwrap_or(DEFAULT_MAX_REPLY_BYTES)
    }
}

/// The completed assistant turn: `content` holds thinking, text and tool calls in the
/// order the model produced them.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    pub content: Vec<ContentBlock>,
    pub usage: Usage,
    pub stop_reason: StopReason,
    /// The provider name and model that actually answered (differs from the request
    /// after a fallback).
    pub provider: String,
    pub model: String,
}

/// Incremental output while a streamed answer arrives.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamDelta {
    Text(String),
    Reasoning(String),
    /// A tool call has begun (its arguments are still arriving).
    ToolCallStart {
        index: usize,
        id: String,
        name: String,
    },
    /// More of a started tool call's arguments arrived (`bytes` of them): the model is
    /// still writing, though nothing of it is shown yet.
    ToolCallArguments {
        bytes: usize,
    },
    /// Attempt `attempt` failed with a transient fault; the call is tried again after
    /// `delay`. Nothing of the failed attempt reached the sink.
    Retrying {
        attempt: u32,
        delay: std::time::Duration,
        status: Option<u16>,
        error: String,
    },
}

/// Receives deltas; called from the provider's task, must not block.
pub trait DeltaSink: Send + Sync {
    fn delta(&self, delta: StreamDelta);
}

impl<F: Fn(StreamDelta) + Send + Sync> DeltaSink for F {
    fn delta(&self, delta: StreamDelta) {
        self(delta)
    }
}

/// A sink that drops everything (non-streaming callers).
pub struct NoSink;
impl DeltaSink for NoSink {
    fn delta(&self, _: StreamDelta) {}
}

#[async_trait]
pub trait Provider: Send + Sync {
    /// Configured provider name (e.g. `openai`, `local-vllm`).
    fn name(&self) -> &str;

    /// One model call. Must return promptly with `ErrorKind::Aborted` when `cancel` fires,
    /// dropping the HTTP stream.
    async fn chat(
        &self,
        req: &ChatRequest,
        sink: &dyn DeltaSink,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, ProviderError>;

    /// Model ids the endpoint reports (`GET /models`); used by `doctor`.
    async fn list_models(&self) -> Result<Vec<String>, ProviderError>;
}

/// Adds `extra` fields to a wire body without replacing any the provider set itself.
pub(crate) fn merge_extra_body(
    body: &mut serde_json::Map<String, serde_json::Value>,
    extra: &serde_json::Map<String, serde_json::Value>,
) {
    for (k, v) in extra {
        body.entry(k.clone()).or_insert_with(|| v.clone());
    }
}
