//! What chat channels keep in the storage, in both backends: pairing codes and the
//! senders approved by them, which instance holds each channel account (a lease), the
//! account's position in the platform's update stream, and which platform messages were
//! already handled (so a handover between instances answers nothing twice).

use async_trait::async_trait;
use serde::Serialize;

use crate::StoreError;

/// A code an unknown sender got, waiting for an operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PairingRequest {
    pub code: String,
    pub channel: String,
    pub account: String,
    pub sender_id: String,
    pub sender_name: Option<String>,
    /// Epoch ms.
    pub created_at: i64,
    pub expires_at: i64,
}

/// What asking for a code gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairingOutcome {
    /// A new code for this sender.
    Issued(PairingRequest),
    /// The sender's code that is still valid (never a second one).
    Pending(PairingRequest),
    /// The account already has as many pending codes as it may.
    Full,
}

/// A sender an operator approved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovedSender {
    pub channel: String,
    pub account: String,
    pub sender_id: String,
    pub sender_name: Option<String>,
    pub approved_at: i64,
    pub approved_by: Option<String>,
}

/// How long a handled message id is remembered: longer than any platform redelivers.
pub const DELIVERY_MEMORY_MS: i64 = 7 * 24 * 3600 * 1000;

#[async_trait]
pub trait ChannelStore: Send + Sync {
    /// The sender's valid code, else a new one (`code`) unless the account has
    /// `max_pending` valid codes already. Expired codes are forgotten here.
    #[allow(clippy::too_many_arguments)]
    async fn request_pairing(
        &self,
        channel: &str,
        account: &str,
        sender_id: &str,
        sender_name: Option<&str>,
        code: &str,
        now: i64,
        ttl_ms: i64,
        max_pending: usize,
    ) -> Result<PairingOutcome, StoreError>;
    /// Valid codes, oldest first.
    async fn pairing_requests(&self, now: i64) -> Result<Vec<PairingRequest>, StoreError>;
    /// Approves the sender of a valid `code` (the code is used up); `None`: no such
    /// valid code.
    async fn approve_pairing(
        &self,
        code: &str,
        by: Option<&str>,
        now: i64,
    ) -> Result<Option<ApprovedSender>, StoreError>;
    async fn is_approved(
        &self,
        channel: &str,
        account: &str,
        sender_id: &str,
    ) -> Result<bool, StoreError>;
    async fn approved_senders(&self) -> Result<Vec<ApprovedSender>, StoreError>;
    /// Whether there was such an approval to revoke.
    async fn revoke_sender(
        &self,
        channel: &str,
        account: &str,
        sender_id: &str,
    ) -> Result<bool, StoreError>;

    /// Takes or renews the account for `holder` until `now + lease_ms`; `false` while
    /// another holder's lease runs. Also forgets handled messages older than
    /// [`DELIVERY_MEMORY_MS`], so what is remembered stays bounded.
    async fn claim_account(
        &self,
        account: &str,
        holder: &str,
        now: i64,
        lease_ms: i64,
    ) -> Result<bool, StoreError>;
    /// Gives the account up (a clean stop), so another instance takes it at once.
    async fn release_account(&self, account: &str, holder: &str) -> Result<(), StoreError>;
    /// Where the account's update stream was left (`None`: never read).
    async fn cursor(&self, account: &str) -> Result<Option<i64>, StoreError>;
    /// Moves the cursor; `false` (nothing changed) when `holder` no longer holds the
    /// account.
    async fn set_cursor(
        &self,
        account: &str,
        holder: &str,
        cursor: i64,
    ) -> Result<bool, StoreError>;
    /// `true` the first time the platform message `message_key` of `account` is seen.
    async fn first_delivery(
        &self,
        account: &str,
        message_key: &str,
        now: i64,
    ) -> Result<bool, StoreError>;
}
