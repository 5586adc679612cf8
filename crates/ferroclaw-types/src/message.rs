use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// One block of message content, tagged by `type` as in the transcript format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum ContentBlock {
    Text {
        text: String,
    },
    Thinking {
        thinking: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thinking_signature: Option<String>,
    },
    /// Reasoning the provider encrypted (Anthropic's `redacted_thinking`): kept as it
    /// came and sent back with the turn it belongs to, never shown.
    RedactedThinking {
        data: String,
    },
    ToolCall {
        id: String,
        name: String,
        #[serde(default)]
        arguments: Value,
    },
    Image {
        data: String,
        mime_type: String,
    },
}

impl ContentBlock {
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }
}

/// Why an assistant turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    #[default]
    Stop,
    Length,
    ToolUse,
    Error,
    Aborted,
}

/// Token usage, normalised from every provider spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total_tokens: u64,
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
        self.total_tokens += other.total_tokens;
    }

    /// Fills `total_tokens` when a provider did not report it.
    pub fn with_total(mut self) -> Self {
        if self.total_tokens == 0 {
            self.total_tokens = self.input + self.output + self.cache_read + self.cache_write;
        }
        self
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserMessage {
    #[serde(deserialize_with = "string_or_blocks")]
    pub content: Vec<ContentBlock>,
    #[serde(default)]
    pub timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    #[serde(deserialize_with = "string_or_blocks")]
    pub content: Vec<ContentBlock>,
    #[serde(default)]
    pub provider: String,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub usage: Usage,
    #[serde(default)]
    pub stop_reason: StopReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    #[serde(default)]
    pub timestamp: i64,
}

impl AssistantMessage {
    /// The tool calls this turn asked for, in the order the model gave them.
    pub fn tool_calls(&self) -> impl Iterator<Item = (&str, &str, &Value)> {
        self.content.iter().filter_map(|b| match b {
            ContentBlock::ToolCall {
                id,
                name,
                arguments,
            } => Some((id.as_str(), name.as_str(), arguments)),
            _ => None,
        })
    }

    /// Concatenated visible text of this turn.
    pub fn text(&self) -> String {
        join_text(&self.content)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultMessage {
    pub tool_call_id: String,
    #[serde(default)]
    pub tool_name: String,
    #[serde(deserialize_with = "string_or_blocks")]
    pub content: Vec<ContentBlock>,
    #[serde(default)]
    pub is_error: bool,
    #[serde(default)]
    pub timestamp: i64,
}

impl ToolResultMessage {
    pub fn text(&self) -> String {
        join_text(&self.content)
    }
}

/// A message as stored in a transcript, tagged by `role`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "camelCase")]
pub enum Message {
    User(UserMessage),
    Assistant(AssistantMessage),
    ToolResult(ToolResultMessage),
}

impl Message {
    pub fn user(text: impl Into<String>) -> Self {
        Message::User(UserMessage {
            content: vec![ContentBlock::text(text)],
            timestamp: crate::now_millis(),
        })
    }

    pub fn tool_result(
        call_id: impl Into<String>,
        tool_name: impl Into<String>,
        text: impl Into<String>,
        is_error: bool,
    ) -> Self {
        Message::ToolResult(ToolResultMessage {
            tool_call_id: call_id.into(),
            tool_name: tool_name.into(),
            content: vec![ContentBlock::text(text)],
            is_error,
            timestamp: crate::now_millis(),
        })
    }

    pub fn content(&self) -> &[ContentBlock] {
        match self {
            Message::User(m) => &m.content,
            Message::Assistant(m) => &m.content,
            Message::ToolResult(m) => &m.content,
        }
    }

    pub fn text(&self) -> String {
        join_text(self.content())
    }
}

fn join_text(blocks: &[ContentBlock]) -> String {
    let mut out = String::new();
    for b in blocks {
        if let ContentBlock::Text { text } = b {
            out.push_str(text);
        }
    }
    out
}

/// pi writes plain-string content for some messages; both forms are valid on read.
fn string_or_blocks<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ContentBlock>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Text(String),
        Blocks(Vec<ContentBlock>),
    }
    Ok(match Either::deserialize(d)? {
        Either::Text(text) => vec![ContentBlock::Text { text }],
        Either::Blocks(b) => b,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assistant_round_trips_in_transcript_form() {
        let raw = r#"{"role":"assistant","content":[{"type":"thinking","thinking":"hm"},{"type":"toolCall","id":"call_1","name":"exec","arguments":{"command":"ls"}}],"provider":"openai","model":"gpt-4o","usage":{"input":28,"output":167,"cacheRead":0,"cacheWrite":0,"totalTokens":195},"stopReason":"toolUse","timestamp":1}"#;
        let m: Message = serde_json::from_str(raw).expect("parse");
        let Message::Assistant(a) = &m else {
            panic!("not assistant")
        };
        assert_eq!(a.stop_reason, StopReason::ToolUse);
        assert_eq!(a.usage.total_tokens, 195);
        assert_eq!(a.tool_calls().count(), 1);
        let back: Value = serde_json::to_value(&m).expect("ser");
        let orig: Value = serde_json::from_str(raw).expect("parse");
        assert_eq!(back, orig);
    }

    #[test]
    fn user_content_may_be_a_plain_string() {
        let m: Message =
            serde_json::from_str(r#"{"role":"user","content":"hi","timestamp":5}"#).expect("parse");
        assert_eq!(m.text(), "hi");
    }

    #[test]
    fn tool_result_uses_camel_case_fields() {
        let m = Message::tool_result("c1", "read", "ok", true);
        let v = serde_json::to_value(&m).expect("ser");
        assert_eq!(v["role"], "toolResult");
        assert_eq!(v["toolCallId"], "c1");
        assert_eq!(v["isError"], true);
    }
}
