use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Message;

pub const TRANSCRIPT_VERSION: u32 = 3;

/// Line 1 of every transcript file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionHeader {
    #[serde(rename = "type")]
    pub kind: String,
    pub version: u32,
    pub id: String,
    pub timestamp: String,
    #[serde(default)]
    pub cwd: String,
    /// The session key this transcript belongs to, so an index can always be rebuilt
    /// from the transcripts alone (an extra field other readers ignore).
    #[serde(
        rename = "sessionKey",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub session_key: Option<String>,
}

/// Any line after the header. Entries form a tree through `parent_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub id: String,
    #[serde(rename = "parentId", default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub timestamp: String,
    #[serde(flatten)]
    pub body: EntryBody,
}

/// The typed part of an entry. Types we only keep (not act on) are still modelled so
/// that an imported transcript round-trips.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum EntryBody {
    Message {
        message: Message,
    },
    Compaction {
        summary: String,
        first_kept_entry_id: String,
        #[serde(default)]
        tokens_before: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens_after: Option<u64>,
    },
    ModelChange {
        provider: String,
        model_id: String,
    },
    ThinkingLevelChange {
        thinking_level: String,
    },
    Custom {
        custom_type: String,
        #[serde(default)]
        data: Value,
    },
    CustomMessage {
        custom_type: String,
        #[serde(default)]
        content: Value,
        #[serde(default)]
        display: bool,
    },
    BranchSummary {
        from_id: String,
        summary: String,
    },
    Label {
        target_id: String,
        #[serde(default)]
        label: Option<String>,
    },
    SessionInfo {
        #[serde(default)]
        name: Option<String>,
    },
}

impl Entry {
    pub fn message(&self) -> Option<&Message> {
        match &self.body {
            EntryBody::Message { message } => Some(message),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_entry_keeps_null_parent() {
        let raw = r#"{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":1}}"#;
        let e: Entry = serde_json::from_str(raw).expect("parse");
        assert!(e.parent_id.is_none());
        let v = serde_json::to_value(&e).expect("ser");
        assert!(v.get("parentId").is_some_and(Value::is_null));
        assert_eq!(v, serde_json::from_str::<Value>(raw).expect("parse"));
    }

    #[test]
    fn compaction_and_kept_types_parse() {
        for raw in [
            r#"{"type":"compaction","id":"1","parentId":"0","timestamp":"t","summary":"s","firstKeptEntryId":"x","tokensBefore":5}"#,
            r#"{"type":"model_change","id":"2","parentId":"1","timestamp":"t","provider":"openai","modelId":"gpt"}"#,
            r#"{"type":"thinking_level_change","id":"3","parentId":"2","timestamp":"t","thinkingLevel":"high"}"#,
            r#"{"type":"custom","id":"4","parentId":"3","timestamp":"t","customType":"x","data":{"a":1}}"#,
            r#"{"type":"label","id":"5","parentId":"4","timestamp":"t","targetId":"1","label":"here"}"#,
        ] {
            let e: Entry = serde_json::from_str(raw).expect(raw);
            assert_eq!(
                serde_json::to_value(&e).expect("ser"),
                serde_json::from_str::<Value>(raw).expect("parse")
            );
        }
    }
}
