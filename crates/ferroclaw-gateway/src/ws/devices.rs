//! Devices paired through protocol 4 connects, kept in the storage: pairing on first
//! sight with a credential (a device token of its own, stored as a hash), sign-in with
//! that token later, revocation for good. Transport of `devices.list` and
//! `devices.revoke` too.

use serde_json::{json, Value};
use subtle::ConstantTimeEq;

use ferroclaw_store::DevicePairing;

use crate::auth::{Caller, Role};
use crate::error::{WsCode, WsError};
use crate::state::AppState;

fn sha256_hex(text: &str) -> String {
    ring::digest::digest(&ring::digest::SHA256, text.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn store_error(e: ferroclaw_store::StoreError) -> WsError {
    WsError::new(WsCode::Unavailable, format!("device storage: {e}"))
}

fn refused(detail: &str, why: &str) -> WsError {
    tracing::warn!(target: "security.auth", event = "security.device_refused", reason = why, "WebSocket connect refused for its device");
    super::v4::refusal(WsCode::Unauthorized, detail, why.to_string(), json!({}))
}

/// The caller a paired device's own token stands for.
pub async fn sign_in(state: &AppState, device_id: &str, token: &str) -> Result<Caller, WsError> {
    let devices = state.store().devices().ok_or_else(|| {
        refused(
            "AUTH_DEVICE_TOKEN_MISMATCH",
            "this gateway keeps no paired devices",
        )
    })?;
    let Some(d) = devices.device(device_id).await.map_err(store_error)? else {
        return Err(refused(
            "AUTH_DEVICE_TOKEN_MISMATCH",
            "this device is not paired",
        ));
    };
    if d.revoked_at.is_some() {
        return Err(refused("DEVICE_AUTH_INVALID", "this device was revoked"));
    }
    let ok: bool = sha256_hex(token)
        .as_bytes()
        .ct_eq(d.token_hash.as_bytes())
        .into();
    if !ok {
        return Err(refused(
            "AUTH_DEVICE_TOKEN_MISMATCH",
            "the device token is not this device's",
        ));
    }
    // Only while the credential that paired it is accepted, and never above it now.
    let holder = state
        .auth
        .holder_of(&d.credential_hash, |c| binding(device_id, c))
        .filter(|h| h.user_for(d.user_id.as_deref()).ok() == Some(d.user_id.clone()));
    let Some(holder) = holder else {
        return Err(refused(
            "AUTH_DEVICE_TOKEN_MISMATCH",
            "the credential that paired this device is no longer accepted: connect once with a current token",
        ));
    };
    let _ = devices
        .touch_device(device_id, ferroclaw_types::now_millis())
        .await;
    Ok(Caller {
        role: Role::parse(&d.role)
            .unwrap_or(Role::Viewer)
            .min(holder.role),
        user: d.user_id,
        may_name_user: false,
    })
}

/// What binds a device to a credential, salted with the device so equal credentials
/// never give equal hashes.
fn binding(device_id: &str, credential: &str) -> String {
    sha256_hex(&format!("{device_id}|{credential}"))
}

/// Who a connecting device acts for, and the credential it presented (none when it
/// signed in with its own token).
pub struct Pairing<'a> {
    pub role: Role,
    pub user: Option<&'a str>,
    pub credential: Option<&'a str>,
}

/// Pairs a device seen with a credential for the first time and returns its new token;
/// a known device is only marked seen (`None`), a revoked one refused.
pub async fn pair(
    state: &AppState,
    device_id: &str,
    params: &Value,
    who: Pairing<'_>,
) -> Result<Option<String>, WsError> {
    let Some(devices) = state.store().devices() else {
        return Ok(None);
    };
    let Pairing {
        role,
        user,
        credential,
    } = who;
    let now = ferroclaw_types::now_millis();
    let revoked = || refused("DEVICE_AUTH_INVALID", "this device was revoked");
    if let Some(known) = devices.device(device_id).await.map_err(store_error)? {
        if known.revoked_at.is_some() {
            return Err(revoked());
        }
        // Back with a credential: its token now stands for that credential.
        let Some(c) = credential else {
            return Ok(None);
        };
        let bound = devices
            .rebind_device(device_id, user, role.as_str(), &binding(device_id, c), now)
            .await
            .map_err(store_error)?;
        return if bound { Ok(None) } else { Err(revoked()) };
    }
    let Some(credential) = credential else {
        return Ok(None);
    };
    let mut raw = [0u8; 32];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut raw)
        .map_err(|_| WsError::new(WsCode::Internal, "no randomness for a device token"))?;
    let token: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    let text = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let record = ferroclaw_store::DeviceRecord {
        id: device_id.to_string(),
        public_key: text(&params["device"], "publicKey"),
        client_id: text(&params["client"], "id"),
        platform: text(&params["client"], "platform"),
        user_id: user.map(str::to_string),
        role: role.as_str().to_string(),
        token_hash: sha256_hex(&token),
        credential_hash: binding(device_id, credential),
        paired_at: now,
        last_seen_at: now,
        revoked_at: None,
    };
    // Another instance may pair it at the same moment: whoever wrote first holds the
    // token, and this connection simply goes on with its credential. Past the cap of
    // devices per user the connect is refused: one credential cannot fill the store.
    let cap = state.config.limits.max_devices_per_user;
    match devices
        .pair_device(&record, cap)
        .await
        .map_err(store_error)?
    {
        DevicePairing::Paired => {
            tracing::info!(target: "security.auth", event = "security.device_paired", device = %device_id, role = role.as_str(), "device paired");
            Ok(Some(token))
        }
        DevicePairing::Known => Ok(None),
        DevicePairing::Full => {
            tracing::warn!(target: "security.auth", event = "security.device_limit", device = %device_id, user = user.unwrap_or("(operator)"), cap, "device pairing refused: too many devices");
            Err(super::v4::refusal(
                WsCode::ResourceExhausted,
                "DEVICE_LIMIT",
                format!("this credential already has {cap} paired devices: revoke one (devices.revoke) to pair another"),
                json!({}),
            ))
        }
    }
}

/// `devices.list` (admin): every paired device, revoked ones marked.
pub async fn list(state: &AppState) -> Result<Value, WsError> {
    let Some(devices) = state.store().devices() else {
        return Ok(json!({"devices": []}));
    };
    Ok(json!({"devices": devices.devices().await.map_err(store_error)?}))
}

/// `devices.revoke {id}` (admin): the device's token stops working, and so does its key.
pub async fn revoke(state: &AppState, params: &Value) -> Result<Value, WsError> {
    let id = params
        .get("id")
        .or_else(|| params.get("deviceId"))
        .and_then(Value::as_str)
        .ok_or_else(|| WsError::invalid("`id` is required"))?;
    let devices = state
        .store()
        .devices()
        .ok_or_else(|| WsError::new(WsCode::NotFound, "this gateway keeps no paired devices"))?;
    let revoked = devices
        .revoke_device(id, ferroclaw_types::now_millis())
        .await
        .map_err(store_error)?;
    if !revoked {
        return Err(WsError::new(
            WsCode::NotFound,
            format!("no paired device `{id}`"),
        ));
    }
    tracing::warn!(target: "security.auth", event = "security.device_revoked", device = %id, "device revoked");
    Ok(json!({"id": id, "revoked": true}))
}
