//! What every platform gives the dispatcher and what it takes back: a platform-neutral
//! incoming message, and the few things the dispatcher asks of a platform to answer.

use async_trait::async_trait;

use crate::format::{Chunk, Markup};

/// One incoming chat message, as the dispatcher sees it whatever the platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inbound {
    /// Unique per account: what "handled once" is checked against.
    pub message_key: String,
    /// The platform's id of the message (answers reply to it).
    pub message_id: String,
    pub chat_id: String,
    pub is_group: bool,
    pub sender_id: String,
    pub sender_username: Option<String>,
    pub sender_name: String,
    /// The text with the bot's own mention taken out.
    pub text: String,
    /// The bot was mentioned, replied to, or named in a command.
    pub mentioned: bool,
    /// Sent by the bot itself (or another bot): never answered.
    pub from_bot: bool,
    /// Where answers go when not to the chat itself (a Slack thread).
    pub reply_in: Option<String>,
}

impl Inbound {
    /// The chat answers are sent to.
    pub fn reply_chat(&self) -> &str {
        self.reply_in.as_deref().unwrap_or(&self.chat_id)
    }
}

/// Why a platform refused to send.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The platform could not parse the markup: send the plain text instead.
    #[error("the platform rejected the formatting: {0}")]
    Markup(String),
    #[error("{0}")]
    Other(String),
}

/// What the dispatcher needs of a platform to answer.
#[async_trait]
pub trait Outbound: Send + Sync {
    fn markup(&self) -> Markup;
    /// The longest message the platform takes (in its own unit).
    fn limit(&self) -> usize;
    /// Sends one message; returns its id.
    async fn send(
        &self,
        chat_id: &str,
        text: &str,
        formatted: bool,
        reply_to: Option<&str>,
    ) -> Result<String, SendError>;
    /// Shows that an answer is being written (best effort).
    async fn typing(&self, chat_id: &str);
    /// The chat in which to talk to `peer` alone (on most platforms, the peer's id).
    async fn direct_chat(&self, peer: &str) -> Result<String, SendError> {
        Ok(peer.to_string())
    }
    /// Sent at once when a run starts and edited into the answer (platforms that show
    /// no typing indicator for long).
    fn placeholder(&self) -> Option<&'static str> {
        None
    }
    /// Whether a sent message can be edited: the answer is then shown while it is
    /// written.
    fn edits(&self) -> bool {
        false
    }
    /// Replaces the text of a message the bot sent.
    async fn edit(
        &self,
        _chat_id: &str,
        _message_id: &str,
        _text: &str,
        _formatted: bool,
    ) -> Result<(), SendError> {
        Err(SendError::Other(
            "this platform cannot edit messages".into(),
        ))
    }
}

/// Sends an answer chunk by chunk, each in the platform's markup and, when the platform
/// rejects it, as plain text. The first chunk replies to `reply_to`, or replaces the
/// `draft` the answer was shown in while it was written.
pub async fn deliver(
    out: &dyn Outbound,
    chat_id: &str,
    chunks: &[Chunk],
    reply_to: Option<&str>,
    draft: Option<&str>,
) -> Result<usize, SendError> {
    let formatted = out.markup() != Markup::Plain;
    let mut sent = 0;
    for (i, chunk) in chunks.iter().enumerate() {
        let reply = if i == 0 { reply_to } else { None };
        let result = match (i, draft) {
            (0, Some(id)) => match out.edit(chat_id, id, &chunk.formatted, formatted).await {
                Err(SendError::Markup(why)) if formatted => {
                    tracing::warn!(chat = %chat_id, %why, "channel: markup rejected, plain text instead");
                    out.edit(chat_id, id, &chunk.plain, false).await
                }
                other => other,
            }
            .map(|()| id.to_string()),
            _ => match out.send(chat_id, &chunk.formatted, formatted, reply).await {
                Err(SendError::Markup(why)) if formatted => {
                    tracing::warn!(chat = %chat_id, %why, "channel: markup rejected, plain text instead");
                    out.send(chat_id, &chunk.plain, false, reply).await
                }
                other => other,
            },
        };
        result?;
        sent += 1;
    }
    Ok(sent)
}
