//! Protocol 3 frames: `req`, `res`, `event`.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::WsError;

#[derive(Debug, Deserialize)]
pub struct RequestFrame {
    #[serde(rename = "type")]
    pub kind: String,
    /// Clients send strings or numbers; echoed back as given.
    #[serde(default)]
    pub id: Value,
    #[serde(default)]
    pub method: String,
    #[serde(default)]
    pub params: Value,
}

pub fn res_ok(id: &Value, payload: Value) -> String {
    json!({"type": "res", "id": id, "ok": true, "payload": payload}).to_string()
}

pub fn res_err(id: &Value, err: &WsError) -> String {
    json!({"type": "res", "id": id, "ok": false, "error": err.to_json()}).to_string()
}

pub fn event(event: &str, payload: &Value, seq: u64) -> String {
    json!({"type": "event", "event": event, "payload": payload, "seq": seq}).to_string()
}

/// A string parameter, trimmed; `None` when absent or blank.
pub fn str_param<'a>(params: &'a Value, names: &[&str]) -> Option<&'a str> {
    names
        .iter()
        .find_map(|n| params.get(*n).and_then(Value::as_str))
        .map(str::trim)
        .filter(|s| !s.is_empty())
}
