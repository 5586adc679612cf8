//! One instance per channel account: whoever holds the account's lease in the store polls
//! or connects; it renews the lease while it works and gives it up when it stops, and
//! another instance takes over once a lease lapses (its holder died).

use std::sync::Arc;
use std::time::Duration;

use ferroclaw_store::ChannelStore;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::now_ms;
use crate::status::StatusCell;

/// How long an instance holds an account without renewing.
pub const LEASE: Duration = Duration::from_secs(15);
/// How often the holder renews (and a standby instance checks).
pub const RENEW_EVERY: Duration = Duration::from_secs(5);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

pub struct Lease {
    store: Arc<dyn ChannelStore>,
    key: String,
    holder: String,
}

impl Lease {
    pub fn new(store: Arc<dyn ChannelStore>, key: String, holder: String) -> Lease {
        Lease { store, key, holder }
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// Takes or renews the lease: `false` when another instance holds it or the store
    /// did not answer (an instance that cannot reach the store must not work the
    /// account: another one may hold it meanwhile).
    pub async fn renew(&self) -> bool {
        match self
            .store
            .claim_account(&self.key, &self.holder, now_ms(), LEASE.as_millis() as i64)
            .await
        {
            Ok(held) => held,
            Err(e) => {
                warn!(account = %self.key, error = %e, "channel: lease not renewed");
                false
            }
        }
    }

    /// Waits in standby until this instance holds the lease; `false` once `stop` is
    /// cancelled.
    pub async fn acquire(&self, status: &StatusCell, stop: &CancellationToken) -> bool {
        let mut backoff = Duration::from_secs(1);
        loop {
            if stop.is_cancelled() {
                return false;
            }
            match self
                .store
                .claim_account(&self.key, &self.holder, now_ms(), LEASE.as_millis() as i64)
                .await
            {
                Ok(true) => {
                    info!(account = %self.key, "channel: this instance works the account");
                    return true;
                }
                Ok(false) => {
                    status.set_state("standby");
                    pause(stop, RENEW_EVERY).await;
                }
                Err(e) => {
                    status.error("storage", e.to_string());
                    pause(stop, backoff).await;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
            }
        }
    }

    /// Where the account's update stream was left.
    pub async fn cursor(&self) -> Result<Option<i64>, ferroclaw_store::StoreError> {
        self.store.cursor(&self.key).await
    }

    /// Moves the account's cursor (the platform's update offset), only while held.
    pub async fn set_cursor(&self, cursor: i64) -> Result<bool, ferroclaw_store::StoreError> {
        self.store.set_cursor(&self.key, &self.holder, cursor).await
    }

    /// Awaits `work` (a long poll) while renewing the lease; `None` when the lease is
    /// lost or `stop` is cancelled first (the work is dropped).
    pub async fn while_held<T>(
        &self,
        work: impl std::future::Future<Output = T>,
        stop: &CancellationToken,
    ) -> Option<T> {
        tokio::pin!(work);
        let mut renew =
            tokio::time::interval_at(tokio::time::Instant::now() + RENEW_EVERY, RENEW_EVERY);
        loop {
            tokio::select! {
                r = &mut work => return Some(r),
                _ = renew.tick() => {
                    if !self.renew().await {
                        return None;
                    }
                }
                () = stop.cancelled() => return None,
            }
        }
    }

    /// Gives the account up so another instance takes over at once.
    pub async fn release(&self) {
        if let Err(e) = self.store.release_account(&self.key, &self.holder).await {
            warn!(account = %self.key, error = %e, "channel: account lease not released");
        }
    }
}

/// Sleeps `d`, or less when `stop` is cancelled.
pub async fn pause(stop: &CancellationToken, d: Duration) {
    tokio::select! {
        () = tokio::time::sleep(d) => {}
        () = stop.cancelled() => {}
    }
}
