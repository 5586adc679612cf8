//! Devices paired with the gateway (OpenClaw's clients sign their connects with a device
//! key), in both backends: the key, who it acts for, what it may do, and the hash of the
//! device token it was given — never the token itself. A revoked device stays listed,
//! so the same key cannot simply pair again with a shared token.

use async_trait::async_trait;
use serde::Serialize;

use crate::StoreError;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceRecord {
    /// SHA-256 hex of the raw Ed25519 public key.
    pub id: String,
    /// base64url of the raw public key.
    pub public_key: String,
    pub client_id: String,
    pub platform: String,
    /// The user a per-user token paired it for (`None`: the operator).
    pub user_id: Option<String>,
    /// `admin`, `operator` or `viewer`: at most what the pairing credential gave.
    pub role: String,
    /// SHA-256 hex of the device token.
    #[serde(skip)]
    pub token_hash: String,
    /// SHA-256 hex of `device id | credential` for the credential that paired it (or
    /// that it came back with last): its token works only while that credential does,
    /// so rotating a leaked credential also shuts out the devices it paired.
    #[serde(skip)]
    pub credential_hash: String,
    /// Epoch ms.
    pub paired_at: i64,
    pub last_seen_at: i64,
    pub revoked_at: Option<i64>,
}

/// What pairing a device did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DevicePairing {
    /// Recorded.
    Paired,
    /// The id is already known (paired or revoked): nothing changed.
    Known,
    /// Its user (or the shared operator credential) already has the most devices it may
    /// keep paired: nothing changed.
    Full,
}

#[async_trait]
pub trait DeviceStore: Send + Sync {
    /// Records a newly paired device unless its id is known or `device.user_id` already
    /// has `max_active` devices that are not revoked. (Two instances pairing at the same
    /// moment may each see room for one more.)
    async fn pair_device(
        &self,
        device: &DeviceRecord,
        max_active: usize,
    ) -> Result<DevicePairing, StoreError>;
    async fn device(&self, id: &str) -> Result<Option<DeviceRecord>, StoreError>;
    /// Newest pairing first.
    async fn devices(&self) -> Result<Vec<DeviceRecord>, StoreError>;
    async fn touch_device(&self, id: &str, at: i64) -> Result<(), StoreError>;
    /// Binds a paired device to the credential it came with now (who it acts for, its
    /// role, the credential's hash) and marks it seen; `false` when it is unknown or
    /// revoked.
    async fn rebind_device(
        &self,
        id: &str,
        user_id: Option<&str>,
        role: &str,
        credential_hash: &str,
        at: i64,
    ) -> Result<bool, StoreError>;
    /// Whether a paired (not yet revoked) device was revoked now.
    async fn revoke_device(&self, id: &str, at: i64) -> Result<bool, StoreError>;
}
