//! The embedded backend's [`ChannelStore`]: tables in the records database. Every
//! read-modify-write runs in a `BEGIN IMMEDIATE` transaction, so a CLI approving a code
//! and a gateway issuing one agree.

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension, TransactionBehavior};

use super::records::RecordsDb;
use crate::channels::{
    ApprovedSender, ChannelStore, PairingOutcome, PairingRequest, DELIVERY_MEMORY_MS,
};
use crate::StoreError;

pub(crate) struct SqliteChannels {
    db: RecordsDb,
}

impl SqliteChannels {
    pub(crate) fn new(db: RecordsDb) -> SqliteChannels {
        SqliteChannels { db }
    }
}

const PAIRING_COLUMNS: &str =
    "code, channel, account, sender_id, sender_name, created_at, expires_at";

fn pairing_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<PairingRequest> {
    Ok(PairingRequest {
        code: r.get(0)?,
        channel: r.get(1)?,
        account: r.get(2)?,
        sender_id: r.get(3)?,
        sender_name: r.get(4)?,
        created_at: r.get(5)?,
        expires_at: r.get(6)?,
    })
}

fn approved_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ApprovedSender> {
    Ok(ApprovedSender {
        channel: r.get(0)?,
        account: r.get(1)?,
        sender_id: r.get(2)?,
        sender_name: r.get(3)?,
        approved_at: r.get(4)?,
        approved_by: r.get(5)?,
    })
}

#[async_trait]
impl ChannelStore for SqliteChannels {
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
    ) -> Result<PairingOutcome, StoreError> {
        let request = PairingRequest {
            code: code.to_owned(),
            channel: channel.to_owned(),
            account: account.to_owned(),
            sender_id: sender_id.to_owned(),
            sender_name: sender_name.map(str::to_owned),
            created_at: now,
            expires_at: now.saturating_add(ttl_ms),
        };
        self.db
            .with(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let r = &request;
                tx.execute("DELETE FROM channel_pairing WHERE expires_at <= ?1", [now])?;
                let existing = tx
                    .prepare_cached(&format!(
                        "SELECT {PAIRING_COLUMNS} FROM channel_pairing
                         WHERE channel = ?1 AND account = ?2 AND sender_id = ?3"
                    ))?
                    .query_row(params![r.channel, r.account, r.sender_id], pairing_row)
                    .optional()?;
                let outcome = if let Some(p) = existing {
                    PairingOutcome::Pending(p)
                } else {
                    let pending: i64 = tx.query_row(
                        "SELECT count(*) FROM channel_pairing WHERE channel = ?1 AND account = ?2",
                        params![r.channel, r.account],
                        |row| row.get(0),
                    )?;
                    if pending >= max_pending as i64 {
                        PairingOutcome::Full
                    } else {
                        tx.execute(
                            &format!(
                                "INSERT INTO channel_pairing ({PAIRING_COLUMNS})
                                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
                            ),
                            params![
                                r.code,
                                r.channel,
                                r.account,
                                r.sender_id,
                                r.sender_name,
                                r.created_at,
                                r.expires_at
                            ],
                        )?;
                        PairingOutcome::Issued(r.clone())
                    }
                };
                tx.commit()?;
                Ok(outcome)
            })
            .await
    }

    async fn pairing_requests(&self, now: i64) -> Result<Vec<PairingRequest>, StoreError> {
        self.db
            .with(move |conn| {
                conn.prepare_cached(&format!(
                    "SELECT {PAIRING_COLUMNS} FROM channel_pairing
                     WHERE expires_at > ?1 ORDER BY created_at, code"
                ))?
                .query_map([now], pairing_row)?
                .collect()
            })
            .await
    }

    async fn approve_pairing(
        &self,
        code: &str,
        by: Option<&str>,
        now: i64,
    ) -> Result<Option<ApprovedSender>, StoreError> {
        let (code, by) = (code.to_owned(), by.map(str::to_owned));
        self.db
            .with(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let found = tx
                    .prepare_cached(&format!(
                        "SELECT {PAIRING_COLUMNS} FROM channel_pairing
                         WHERE code = ?1 AND expires_at > ?2"
                    ))?
                    .query_row(params![code, now], pairing_row)
                    .optional()?;
                let Some(p) = found else {
                    return Ok(None);
                };
                tx.execute("DELETE FROM channel_pairing WHERE code = ?1", [&code])?;
                let approved = ApprovedSender {
                    channel: p.channel,
                    account: p.account,
                    sender_id: p.sender_id,
                    sender_name: p.sender_name,
                    approved_at: now,
                    approved_by: by,
                };
                tx.execute(
                    "INSERT INTO channel_allowed
                       (channel, account, sender_id, sender_name, approved_at, approved_by)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                     ON CONFLICT (channel, account, sender_id) DO UPDATE SET
                       sender_name = excluded.sender_name, approved_at = excluded.approved_at,
                       approved_by = excluded.approved_by",
                    params![
                        approved.channel,
                        approved.account,
                        approved.sender_id,
                        approved.sender_name,
                        approved.approved_at,
                        approved.approved_by
                    ],
                )?;
                tx.commit()?;
                Ok(Some(approved))
            })
            .await
    }

    async fn is_approved(
        &self,
        channel: &str,
        account: &str,
        sender_id: &str,
    ) -> Result<bool, StoreError> {
        let key = (channel.to_owned(), account.to_owned(), sender_id.to_owned());
        self.db
            .with(move |conn| {
                conn.prepare_cached(
                    "SELECT 1 FROM channel_allowed
                     WHERE channel = ?1 AND account = ?2 AND sender_id = ?3",
                )?
                .query_row(params![key.0, key.1, key.2], |_| Ok(()))
                .optional()
                .map(|r| r.is_some())
            })
            .await
    }

    async fn approved_senders(&self) -> Result<Vec<ApprovedSender>, StoreError> {
        self.db
            .with(|conn| {
                conn.prepare_cached(
                    "SELECT channel, account, sender_id, sender_name, approved_at, approved_by
                     FROM channel_allowed ORDER BY channel, account, approved_at",
                )?
                .query_map([], approved_row)?
                .collect()
            })
            .await
    }

    async fn revoke_sender(
        &self,
        channel: &str,
        account: &str,
        sender_id: &str,
    ) -> Result<bool, StoreError> {
        let key = (channel.to_owned(), account.to_owned(), sender_id.to_owned());
        self.db
            .with(move |conn| {
                conn.execute(
                    "DELETE FROM channel_allowed
                     WHERE channel = ?1 AND account = ?2 AND sender_id = ?3",
                    params![key.0, key.1, key.2],
                )
                .map(|n| n > 0)
            })
            .await
    }

    async fn claim_account(
        &self,
        account: &str,
        holder: &str,
        now: i64,
        lease_ms: i64,
    ) -> Result<bool, StoreError> {
        let (account, holder) = (account.to_owned(), holder.to_owned());
        self.db
            .with(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let n = tx.execute(
                    "INSERT INTO channel_accounts (account, holder, lease_until)
                     VALUES (?1, ?2, ?3)
                     ON CONFLICT (account) DO UPDATE SET holder = excluded.holder,
                       lease_until = excluded.lease_until
                     WHERE channel_accounts.holder = excluded.holder
                        OR channel_accounts.holder IS NULL
                        OR channel_accounts.lease_until < ?4",
                    params![account, holder, now.saturating_add(lease_ms), now],
                )?;
                if n > 0 {
                    tx.execute(
                        "DELETE FROM channel_deliveries WHERE account = ?1 AND seen_at < ?2",
                        params![account, now - DELIVERY_MEMORY_MS],
                    )?;
                }
                tx.commit()?;
                Ok(n > 0)
            })
            .await
    }

    async fn release_account(&self, account: &str, holder: &str) -> Result<(), StoreError> {
        let (account, holder) = (account.to_owned(), holder.to_owned());
        self.db
            .with(move |conn| {
                conn.execute(
                    "UPDATE channel_accounts SET holder = NULL, lease_until = NULL
                     WHERE account = ?1 AND holder = ?2",
                    params![account, holder],
                )
                .map(drop)
            })
            .await
    }

    async fn cursor(&self, account: &str) -> Result<Option<i64>, StoreError> {
        let account = account.to_owned();
        self.db
            .with(move |conn| {
                conn.prepare_cached("SELECT next_update FROM channel_accounts WHERE account = ?1")?
                    .query_row([account], |r| r.get::<_, Option<i64>>(0))
                    .optional()
                    .map(Option::flatten)
            })
            .await
    }

    async fn set_cursor(
        &self,
        account: &str,
        holder: &str,
        cursor: i64,
    ) -> Result<bool, StoreError> {
        let (account, holder) = (account.to_owned(), holder.to_owned());
        self.db
            .with(move |conn| {
                conn.prepare_cached(
                    "UPDATE channel_accounts SET next_update = ?3 WHERE account = ?1 AND holder = ?2",
                )?
                .execute(params![account, holder, cursor])
                .map(|n| n > 0)
            })
            .await
    }

    async fn first_delivery(
        &self,
        account: &str,
        message_key: &str,
        now: i64,
    ) -> Result<bool, StoreError> {
        let (account, key) = (account.to_owned(), message_key.to_owned());
        self.db
            .with(move |conn| {
                conn.prepare_cached(
                    "INSERT INTO channel_deliveries (account, message_key, seen_at)
                     VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
                )?
                .execute(params![account, key, now])
                .map(|n| n > 0)
            })
            .await
    }
}
