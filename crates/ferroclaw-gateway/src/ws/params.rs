//! The parameters of each WebSocket method, typed. Names are camelCase on the wire,
//! with the snake_case (and older) spellings clients send accepted as aliases; unknown
//! fields are ignored; a string that is blank counts as absent. A parameter of the
//! wrong type is refused with its name (`INVALID_REQUEST`).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::error::WsError;

/// The identifier under the first of `keys` present (the wire name first, then its
/// aliases), taken out of `params`; the rest is left for typed parsing.
pub fn take_id(params: Value, keys: &[&str]) -> Result<(String, Value), WsError> {
    let name = keys.first().copied().unwrap_or("id");
    let Value::Object(mut map) = params else {
        return Err(WsError::invalid(format!(
            "params must be an object with `{name}`"
        )));
    };
    let id = keys
        .iter()
        .find_map(|k| map.remove(*k))
        .and_then(|v| v.as_str().map(str::trim).map(str::to_string))
        .filter(|s| !s.is_empty())
        .ok_or_else(|| WsError::invalid(format!("`{name}` is required")))?;
    Ok((id, Value::Object(map)))
}

/// Reads `params` as `T`; absent parameters (`null`) are `T::default()`.
pub fn parse<T: DeserializeOwned + Default>(params: &Value) -> Result<T, WsError> {
    if params.is_null() {
        return Ok(T::default());
    }
    // serde loses the path of a flattened field, so the session fields most methods
    // share are read on their own first: a wrong one is then named.
    if params.is_object() {
        typed::<SessionRef>(params)?;
    }
    typed(params)
}

fn typed<T: DeserializeOwned>(params: &Value) -> Result<T, WsError> {
    serde_path_to_error::deserialize(params).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            WsError::invalid(format!("params: {inner}"))
        } else {
            WsError::invalid(format!("`{path}`: {inner}"))
        }
    })
}

/// A trimmed string; blank is absent.
fn text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Option::<String>::deserialize(d)?
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty()))
}

/// A string kept as written; blank is absent.
fn nonblank<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.filter(|s| !s.trim().is_empty()))
}

/// Which agent and session a method is about (`agentId` default: the default agent;
/// `sessionKey` default: `main` where the method allows one).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionRef {
    #[serde(alias = "agent_id", deserialize_with = "text")]
    pub agent_id: Option<String>,
    #[serde(alias = "session_key", deserialize_with = "text")]
    pub session_key: Option<String>,
}

/// `agent`, `sessions.list`, `sessions.delete`, `sessions.reset`.
pub type AgentOrSession = SessionRef;

/// `chat.send`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ChatSend {
    #[serde(flatten)]
    pub target: SessionRef,
    /// Sent as written (not trimmed); blank is absent.
    #[serde(deserialize_with = "nonblank")]
    pub message: Option<String>,
    #[serde(alias = "queue_mode", deserialize_with = "text")]
    pub queue_mode: Option<String>,
    /// Stream chunks as events (default true).
    pub stream: Option<bool>,
    #[serde(alias = "idempotency_key", deserialize_with = "text")]
    pub idempotency_key: Option<String>,
}

/// `chat.history` (limit default 200, 1..=1000), `sessions.preview` (10, 1..=100).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WithLimit {
    #[serde(flatten)]
    pub target: SessionRef,
    pub limit: Option<u64>,
}

/// `chat.abort`: a run of the session by id, else its oldest running turn.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ChatAbort {
    #[serde(flatten)]
    pub target: SessionRef,
    #[serde(alias = "run_id", deserialize_with = "text")]
    pub run_id: Option<String>,
}

/// `chat.inject`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ChatInject {
    #[serde(flatten)]
    pub target: SessionRef,
    #[serde(alias = "content", alias = "text", deserialize_with = "text")]
    pub message: Option<String>,
}

/// `sessions.patch`: `label` (alias `name`) a string, or `null` to clear it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionsPatch {
    #[serde(flatten)]
    pub target: SessionRef,
    /// Absent: `None`; `null`: `Some(None)`.
    #[serde(alias = "name", deserialize_with = "present")]
    pub label: Option<Option<String>>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// `integrity.scan` (repair default true).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct IntegrityScan {
    pub repair: Option<bool>,
}

/// `exec.approval.approve {id, always?}`, `exec.approval.deny {id}`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ApprovalAnswer {
    #[serde(alias = "approvalId", deserialize_with = "text")]
    pub id: Option<String>,
    pub always: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn aliases_are_accepted() {
        let p: ChatSend = parse(&json!({
            "message": " hi ", "agent_id": "helper", "session_key": "s1",
            "queue_mode": "followup", "idempotency_key": "k", "stream": false
        }))
        .unwrap();
        assert_eq!(
            p.message.as_deref(),
            Some(" hi "),
            "a message is sent as written"
        );
        assert_eq!(p.target.agent_id.as_deref(), Some("helper"));
        assert_eq!(p.target.session_key.as_deref(), Some("s1"));
        assert_eq!(p.queue_mode.as_deref(), Some("followup"));
        assert_eq!(p.idempotency_key.as_deref(), Some("k"));
        assert_eq!(p.stream, Some(false));
        let p: ChatAbort = parse(&json!({"run_id": "r1", "sessionKey": "s"})).unwrap();
        assert_eq!(p.run_id.as_deref(), Some("r1"));
        for key in ["message", "content", "text"] {
            let p: ChatInject = parse(&json!({ key: "note" })).unwrap();
            assert_eq!(p.message.as_deref(), Some("note"), "{key}");
        }
        let p: ApprovalAnswer = parse(&json!({"approvalId": "a1", "always": true})).unwrap();
        assert_eq!((p.id.as_deref(), p.always), (Some("a1"), Some(true)));
    }

    #[test]
    fn blank_strings_are_absent_and_null_params_are_defaults() {
        let p: ChatSend = parse(&json!({"message": "   ", "sessionKey": ""})).unwrap();
        assert!(p.message.is_none() && p.target.session_key.is_none());
        let p: WithLimit = parse(&Value::Null).unwrap();
        assert!(p.limit.is_none() && p.target.agent_id.is_none());
    }

    #[test]
    fn a_wrong_type_is_refused_with_the_field_named() {
        let e = parse::<WithLimit>(&json!({"limit": "ten"})).unwrap_err();
        assert!(e.message.contains("limit"), "{}", e.message);
        let e = parse::<ChatSend>(&json!({"stream": "yes"})).unwrap_err();
        assert!(e.message.contains("stream"), "{}", e.message);
        let e = parse::<ChatSend>(&json!({"sessionKey": 7})).unwrap_err();
        assert!(e.message.contains("sessionKey"), "{}", e.message);
        let e = parse::<ChatSend>(&json!(["not", "an", "object"])).unwrap_err();
        assert!(e.message.contains("params"), "{}", e.message);
    }

    #[test]
    fn a_label_can_be_set_cleared_or_left_out() {
        let p: SessionsPatch = parse(&json!({"label": "x"})).unwrap();
        assert_eq!(p.label, Some(Some("x".into())));
        let p: SessionsPatch = parse(&json!({"name": null})).unwrap();
        assert_eq!(p.label, Some(None));
        let p: SessionsPatch = parse(&json!({})).unwrap();
        assert_eq!(p.label, None);
    }
}
