//! `channels.list | status` (viewer), `channels.toggle` (admin), `send` (operator) and
//! `device.pair.list | approve | revoke` (admin): chat channels and the senders allowed
//! to talk to them, over the WebSocket. Transport only: the channels crate runs the
//! channels, the store keeps the approvals.

use ferroclaw_channels::now_ms;
use std::sync::Arc;

use ferroclaw_channels::{pairing, ChannelError, Channels};
use ferroclaw_store::ChannelStore;
use serde_json::{json, Value};

use crate::error::{WsCode, WsError};
use crate::state::AppState;

fn channels(state: &AppState) -> Result<&Arc<Channels>, WsError> {
    state
        .channels
        .get()
        .ok_or_else(|| WsError::new(WsCode::Unavailable, "channels are not running"))
}

fn channel_error(e: ChannelError) -> WsError {
    let code = match &e {
        ChannelError::Unknown(_) => WsCode::NotFound,
        ChannelError::Disabled(_) | ChannelError::NoCredentials(_) => WsCode::FailedPrecondition,
        ChannelError::Send(_) => WsCode::Unavailable,
    };
    WsError::new(code, e.to_string())
}

fn store(state: &AppState) -> Result<Arc<dyn ChannelStore>, WsError> {
    state.store().channels().ok_or_else(|| {
        WsError::new(
            WsCode::Unavailable,
            "this storage keeps no channel approvals",
        )
    })
}

fn text<'a>(params: &'a Value, names: &[&str]) -> Result<&'a str, WsError> {
    names
        .iter()
        .find_map(|n| params.get(*n).and_then(Value::as_str))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| WsError::invalid(format!("`{}` is required", names[0])))
}

pub fn list(state: &AppState) -> Result<Value, WsError> {
    Ok(json!({"channels": channels(state)?.list()}))
}

pub fn status(state: &AppState, params: &Value) -> Result<Value, WsError> {
    let c = channels(state)?;
    match params.get("channel").and_then(Value::as_str) {
        None => Ok(json!({"channels": c.list()})),
        Some(name) => Ok(json!({"channel": c.status(name).map_err(channel_error)?})),
    }
}

pub fn toggle(state: &AppState, params: &Value) -> Result<Value, WsError> {
    let name = text(params, &["channel"])?;
    let enabled = params
        .get("enabled")
        .and_then(Value::as_bool)
        .ok_or_else(|| WsError::invalid("`enabled` (true or false) is required"))?;
    tracing::info!(
        channel = name,
        enabled,
        "security.channels: channel toggled"
    );
    let status = channels(state)?
        .toggle(name, enabled)
        .map_err(channel_error)?;
    Ok(json!({"channel": status}))
}

pub async fn send(state: &AppState, params: &Value) -> Result<Value, WsError> {
    let name = text(params, &["channel"])?;
    let to = text(params, &["to", "chatId"])?;
    let message = text(params, &["message", "text"])?;
    let sent = channels(state)?
        .send(name, to, message)
        .await
        .map_err(channel_error)?;
    Ok(json!({"channel": name, "to": to, "messages": sent}))
}

pub async fn pair_list(state: &AppState) -> Result<Value, WsError> {
    let s = store(state)?;
    let unavailable =
        |e: ferroclaw_store::StoreError| WsError::new(WsCode::Unavailable, e.to_string());
    let pending = s.pairing_requests(now_ms()).await.map_err(unavailable)?;
    let approved = s.approved_senders().await.map_err(unavailable)?;
    Ok(json!({"pending": pending, "approved": approved}))
}

pub async fn pair_approve(
    state: &AppState,
    params: &Value,
    by: Option<&str>,
) -> Result<Value, WsError> {
    let code = pairing::normalise(text(params, &["code"])?);
    if !pairing::is_code(&code) {
        return Err(WsError::invalid(format!(
            "`{code}` is not a pairing code (8 characters of {})",
            String::from_utf8_lossy(pairing::ALPHABET)
        )));
    }
    let approved = store(state)?
        .approve_pairing(&code, by.or(Some("admin")), now_ms())
        .await
        .map_err(|e| WsError::new(WsCode::Unavailable, e.to_string()))?
        .ok_or_else(|| {
            WsError::new(
                WsCode::NotFound,
                format!("no valid pairing code `{code}` (expired, used, or never issued)"),
            )
        })?;
    tracing::info!(
        channel = %approved.channel,
        sender = %approved.sender_id,
        "security.channels: sender approved"
    );
    Ok(json!({"approved": approved}))
}

pub async fn pair_revoke(state: &AppState, params: &Value) -> Result<Value, WsError> {
    let channel = text(params, &["channel"])?;
    let sender = text(params, &["sender", "senderId"])?;
    let account = params
        .get("account")
        .and_then(Value::as_str)
        .unwrap_or("default");
    let revoked = store(state)?
        .revoke_sender(channel, account, sender)
        .await
        .map_err(|e| WsError::new(WsCode::Unavailable, e.to_string()))?;
    if !revoked {
        return Err(WsError::new(
            WsCode::NotFound,
            format!("sender `{sender}` of {channel}:{account} was not approved"),
        ));
    }
    tracing::info!(channel, sender, "security.channels: approval revoked");
    Ok(json!({"revoked": true}))
}
