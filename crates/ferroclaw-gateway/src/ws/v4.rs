//! Gateway protocol 4, what today's OpenClaw clients (its CLI, terminal UI, apps) speak:
//! the server's `connect.challenge` first, protocol negotiation, scopes in place of a
//! role, a signed device block, `hello-ok` v4, and errors with `details.code` the
//! clients act on. Protocol 3 stays: a client that connects at once, or asks for 3,
//! gets what it always got.

use serde_json::{json, Value};

use crate::auth::Role;
use crate::error::{WsCode, WsError};

/// The protocols this gateway speaks.
pub const OLDEST: u64 = 3;
pub const NEWEST: u64 = 4;

/// How long a device signature is good for around the challenge it answers.
const SIGNATURE_SKEW_MS: i64 = 120_000;

/// The challenge a connection is greeted with; its nonce must come back signed.
#[derive(Debug, Clone)]
pub struct Challenge {
    pub nonce: String,
    pub ts: i64,
}

impl Challenge {
    pub fn new() -> Self {
        Challenge {
            nonce: uuid::Uuid::new_v4().to_string(),
            ts: ferroclaw_types::now_millis(),
        }
    }

    /// The first frame of every connection. No `seq`: it is not one of the events.
    pub fn frame(&self) -> String {
        json!({
            "type": "event",
            "event": "connect.challenge",
            "payload": {"nonce": self.nonce, "ts": self.ts, "capabilities": []},
        })
        .to_string()
    }
}

impl Default for Challenge {
    fn default() -> Self {
        Self::new()
    }
}

/// A connect error as OpenClaw's clients read it: `details.code` decides whether they
/// retry, ask for a token or give up.
pub fn refusal(code: WsCode, detail: &str, message: impl Into<String>, extra: Value) -> WsError {
    let mut details = json!({"code": detail});
    if let (Value::Object(d), Value::Object(e)) = (&mut details, extra) {
        d.extend(e);
    }
    WsError::new(code, message).with_details(details)
}

/// The protocol both sides speak: the newest in the client's range that we speak.
pub fn negotiate(params: &Value) -> Result<u64, WsError> {
    let min = params
        .get("minProtocol")
        .and_then(Value::as_u64)
        .unwrap_or(OLDEST);
    let max = params
        .get("maxProtocol")
        .and_then(Value::as_u64)
        .unwrap_or(min.max(OLDEST));
    let chosen = max.min(NEWEST);
    if chosen < min || chosen < OLDEST {
        return Err(refusal(
            WsCode::InvalidRequest,
            "PROTOCOL_MISMATCH",
            format!("protocol mismatch: the client speaks {min}..={max}, this gateway {OLDEST}..={NEWEST}"),
            json!({"expectedProtocol": NEWEST, "minProtocol": OLDEST, "maxProtocol": NEWEST}),
        ));
    }
    Ok(chosen)
}

/// The role a set of OpenClaw scopes asks for (none: what the credential gives).
pub fn role_for_scopes(scopes: &[String]) -> Option<Role> {
    let has = |s: &str| scopes.iter().any(|x| x == s);
    if scopes.is_empty() {
        None
    } else if has("operator.admin") {
        Some(Role::Admin)
    } else if has("operator.write") || has("operator.approvals") {
        Some(Role::Operator)
    } else {
        Some(Role::Viewer)
    }
}

/// The scopes a role holds, as `hello-ok` reports them.
pub fn scopes_of(role: Role) -> Vec<&'static str> {
    match role {
        Role::Admin => vec![
            "operator.admin",
            "operator.write",
            "operator.approvals",
            "operator.read",
        ],
        Role::Operator => vec!["operator.write", "operator.approvals", "operator.read"],
        Role::Viewer => vec!["operator.read"],
    }
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn b64url(s: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s.trim_end_matches('='))
        .ok()
}

/// Checks a signed device block against the challenge this connection was given: the
/// id is the key's SHA-256, the nonce is ours, the time is the challenge's (give or
/// take two minutes), and the Ed25519 signature covers exactly what the client claims.
/// Returns the device id.
pub fn verify_device(params: &Value, challenge: &Challenge) -> Result<String, WsError> {
    let device = &params["device"];
    let invalid = |detail: &str, why: &str| {
        tracing::warn!(target: "security.auth", event = "security.device_refused", reason = why, "WebSocket connect with a bad device signature");
        refusal(
            WsCode::Unauthorized,
            detail,
            format!("device identity refused: {why}"),
            json!({}),
        )
    };
    let id = text(device, "id");
    let key = b64url(text(device, "publicKey"))
        .filter(|k| k.len() == 32)
        .ok_or_else(|| {
            invalid(
                "DEVICE_AUTH_PUBLIC_KEY_INVALID",
                "the public key is not a raw Ed25519 key",
            )
        })?;
    let digest = ring::digest::digest(&ring::digest::SHA256, &key);
    let expected: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    if !id.eq_ignore_ascii_case(&expected) {
        return Err(invalid(
            "DEVICE_AUTH_DEVICE_ID_MISMATCH",
            "the device id is not its key's hash",
        ));
    }
    let nonce = text(device, "nonce");
    if nonce.is_empty() {
        return Err(invalid("DEVICE_AUTH_NONCE_REQUIRED", "no nonce"));
    }
    if nonce != challenge.nonce {
        return Err(invalid(
            "DEVICE_AUTH_NONCE_MISMATCH",
            "the nonce is not this connection's challenge",
        ));
    }
    let signed_at = device.get("signedAt").and_then(Value::as_i64).unwrap_or(-1);
    if (signed_at - challenge.ts).abs() > SIGNATURE_SKEW_MS {
        return Err(invalid(
            "DEVICE_AUTH_SIGNATURE_EXPIRED",
            "the signature is not from this challenge",
        ));
    }
    let client = &params["client"];
    let scopes: Vec<&str> = params["scopes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    // What OpenClaw's clients sign: the shared token, else the device's own.
    let token = ["token", "deviceToken"]
        .iter()
        .find_map(|k| params["auth"].get(*k).and_then(Value::as_str))
        .unwrap_or_default();
    let payload = [
        "v3",
        id,
        text(client, "id"),
        text(client, "mode"),
        text(params, "role"),
        &scopes.join(","),
        &signed_at.to_string(),
        token,
        nonce,
        &text(client, "platform").trim().to_ascii_lowercase(),
        &text(client, "deviceFamily").trim().to_ascii_lowercase(),
    ]
    .join("|");
    let signature = b64url(text(device, "signature")).ok_or_else(|| {
        invalid(
            "DEVICE_AUTH_SIGNATURE_INVALID",
            "the signature is not base64url",
        )
    })?;
    ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, &key)
        .verify(payload.as_bytes(), &signature)
        .map_err(|_| {
            invalid(
                "DEVICE_AUTH_SIGNATURE_INVALID",
                "the signature does not match",
            )
        })?;
    Ok(expected)
}

/// One run's events as protocol 4 sends them: `agent` events by stream (`lifecycle`,
/// `tool`) and `chat` events whose `message` holds the answer so far (`delta`), then
/// whole (`final`), or why it ended (`error`, `aborted`). `runId` is the id the client
/// chose (its idempotency key), so it can match events to what it sent.
pub struct RunEvents {
    pub run_id: String,
    pub agent_id: String,
    pub session_key: String,
    text: String,
    seq: u64,
}

impl RunEvents {
    pub fn new(run_id: String, agent_id: String, session_key: String) -> Self {
        RunEvents {
            run_id,
            agent_id,
            session_key,
            text: String::new(),
            seq: 0,
        }
    }

    fn message(&self, text: &str) -> Value {
        json!({"role": "assistant", "content": [{"type": "text", "text": text}], "timestamp": ferroclaw_types::now_millis()})
    }

    fn chat(&mut self, state: &str, extra: Value) -> (&'static str, Value) {
        self.seq += 1;
        let mut v = json!({
            "runId": self.run_id, "sessionKey": self.session_key, "agentId": self.agent_id,
            "seq": self.seq, "state": state,
        });
        if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
            m.extend(e);
        }
        ("chat", v)
    }

    fn agent(&mut self, stream: &str, data: Value) -> (&'static str, Value) {
        self.seq += 1;
        (
            "agent",
            json!({
                "runId": self.run_id, "sessionKey": self.session_key, "agentId": self.agent_id,
                "seq": self.seq, "stream": stream, "ts": ferroclaw_types::now_millis(), "data": data,
            }),
        )
    }

    /// The frames one run event becomes (most become one; the end becomes two).
    pub fn frames(&mut self, kind: &ferroclaw_types::EventKind) -> Vec<(&'static str, Value)> {
        use ferroclaw_types::EventKind as K;
        match kind {
            K::LifecycleStart { .. } => vec![self.agent(
                "lifecycle",
                json!({"phase": "start", "startedAt": ferroclaw_types::now_millis()}),
            )],
            K::AssistantDelta { text } => {
                self.text.push_str(text);
                let message = self.message(&self.text.clone());
                let so_far = self.text.clone();
                vec![
                    self.agent("assistant", json!({"text": so_far, "delta": text})),
                    self.chat("delta", json!({"message": message})),
                ]
            }
            K::ToolStart {
                call_id,
                name,
                arguments,
            } => vec![self.agent(
                "tool",
                json!({"phase": "start", "name": name, "toolCallId": call_id, "args": arguments}),
            )],
            K::ToolResult {
                call_id,
                name,
                is_error,
                duration_ms,
                preview,
            } => vec![self.agent(
                "tool",
                json!({"phase": "result", "name": name, "toolCallId": call_id, "isError": is_error,
                       "durationMs": duration_ms, "result": preview}),
            )],
            K::LifecycleEnd { text, usage, .. } => {
                let message = self.message(text);
                vec![
                    self.agent(
                        "usage",
                        json!({"input": usage.input, "output": usage.output, "cacheRead": usage.cache_read, "total": usage.total_tokens}),
                    ),
                    self.agent("lifecycle", json!({"phase": "end", "usage": usage})),
                    self.chat("final", json!({"message": message})),
                ]
            }
            K::LifecycleError { message } => {
                let aborted = message == "run aborted";
                let partial = self.message(&self.text.clone());
                vec![
                    self.agent(
                        "lifecycle",
                        json!({"phase": if aborted { "end" } else { "error" }, "error": message}),
                    ),
                    self.chat(
                        if aborted { "aborted" } else { "error" },
                        json!({"errorMessage": message, "message": partial}),
                    ),
                ]
            }
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_common_protocol_is_chosen_and_a_gap_is_refused() {
        assert_eq!(negotiate(&json!({})).unwrap(), 3);
        assert_eq!(
            negotiate(&json!({"minProtocol": 3, "maxProtocol": 3})).unwrap(),
            3
        );
        assert_eq!(
            negotiate(&json!({"minProtocol": 4, "maxProtocol": 4})).unwrap(),
            4
        );
        assert_eq!(
            negotiate(&json!({"minProtocol": 3, "maxProtocol": 9})).unwrap(),
            4
        );
        for gap in [
            json!({"minProtocol": 5, "maxProtocol": 6}),
            json!({"minProtocol": 1, "maxProtocol": 2}),
        ] {
            let e = negotiate(&gap).unwrap_err();
            assert_eq!(e.to_json()["details"]["code"], "PROTOCOL_MISMATCH", "{gap}");
            assert_eq!(e.to_json()["details"]["expectedProtocol"], 4);
        }
    }

    #[test]
    fn a_run_streams_the_answer_so_far_and_ends_once() {
        use ferroclaw_types::EventKind as K;
        let mut r = RunEvents::new("client-run".into(), "main".into(), "agent:main:main".into());
        let start = r.frames(&K::LifecycleStart {
            agent_id: "main".into(),
            session_key: "s".into(),
            model: "m".into(),
        });
        assert_eq!(start[0].1["data"]["phase"], "start");
        r.frames(&K::AssistantDelta { text: "Hel".into() });
        let d = r.frames(&K::AssistantDelta { text: "lo".into() });
        assert_eq!(
            (d[0].0, d[0].1["stream"].as_str()),
            ("agent", Some("assistant"))
        );
        assert_eq!(d[0].1["data"]["text"], "Hello");
        assert_eq!(d[1].0, "chat");
        assert_eq!(d[1].1["state"], "delta");
        assert_eq!(
            d[1].1["message"]["content"][0]["text"], "Hello",
            "the answer so far"
        );
        assert_eq!(d[1].1["runId"], "client-run");
        let end = r.frames(&K::LifecycleEnd {
            stop_reason: ferroclaw_types::StopReason::Stop,
            usage: Default::default(),
            text: "Hello".into(),
        });
        let streams: Vec<&str> = end
            .iter()
            .map(|f| f.1["stream"].as_str().unwrap_or(f.0))
            .collect();
        assert_eq!(streams, ["usage", "lifecycle", "chat"]);
        assert_eq!(end[2].1["state"], "final");
        assert!(end[2].1["seq"].as_u64() > d[1].1["seq"].as_u64());
        let aborted = r.frames(&K::LifecycleError {
            message: "run aborted".into(),
        });
        assert_eq!(aborted[1].1["state"], "aborted");
        let failed = r.frames(&K::LifecycleError {
            message: "provider down".into(),
        });
        assert_eq!(failed[1].1["state"], "error");
        assert_eq!(failed[1].1["errorMessage"], "provider down");
    }

    #[test]
    fn scopes_ask_for_a_role_never_more_than_named() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(role_for_scopes(&s(&["operator.read"])), Some(Role::Viewer));
        assert_eq!(
            role_for_scopes(&s(&["operator.read", "operator.write"])),
            Some(Role::Operator)
        );
        assert_eq!(role_for_scopes(&s(&["operator.admin"])), Some(Role::Admin));
        assert_eq!(role_for_scopes(&[]), None);
    }
}
