//! The managed backend's [`ChannelStore`]: the embedded one's tables in PostgreSQL.
//! Issuing a code is serialised per account with a transaction-scoped advisory lock, so
//! two instances asked by one sender at once give it one code.

use async_trait::async_trait;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::{db_error, PgSessionStore};
use crate::channels::{
    ApprovedSender, ChannelStore, PairingOutcome, PairingRequest, DELIVERY_MEMORY_MS,
};
use crate::StoreError;

const PAIRING_COLUMNS: &str =
    "code, channel, account, sender_id, sender_name, created_at, expires_at";

fn pairing_row(r: &Row) -> PairingRequest {
    PairingRequest {
        code: r.get(0),
        channel: r.get(1),
        account: r.get(2),
        sender_id: r.get(3),
        sender_name: r.get(4),
        created_at: r.get(5),
        expires_at: r.get(6),
    }
}

fn approved_row(r: &Row) -> ApprovedSender {
    ApprovedSender {
        channel: r.get(0),
        account: r.get(1),
        sender_id: r.get(2),
        sender_name: r.get(3),
        approved_at: r.get(4),
        approved_by: r.get(5),
    }
}

#[async_trait]
impl ChannelStore for PgSessionStore {
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
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.batch_execute("SET LOCAL synchronous_commit TO on")
            .await
            .map_err(db_error)?;
        let scope = format!("pairing:{channel}:{account}");
        tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&scope])
            .await
            .map_err(db_error)?;
        tx.execute(
            "DELETE FROM channel_pairing WHERE expires_at <= $1",
            &[&now],
        )
        .await
        .map_err(db_error)?;
        let existing = tx
            .query_opt(
                &format!(
                    "SELECT {PAIRING_COLUMNS} FROM channel_pairing
                     WHERE channel = $1 AND account = $2 AND sender_id = $3"
                ),
                &[&channel, &account, &sender_id],
            )
            .await
            .map_err(db_error)?;
        let outcome = if let Some(row) = existing {
            PairingOutcome::Pending(pairing_row(&row))
        } else {
            let pending: i64 = tx
                .query_one(
                    "SELECT count(*) FROM channel_pairing WHERE channel = $1 AND account = $2",
                    &[&channel, &account],
                )
                .await
                .map_err(db_error)?
                .get(0);
            if pending >= max_pending as i64 {
                PairingOutcome::Full
            } else {
                let request = PairingRequest {
                    code: code.to_owned(),
                    channel: channel.to_owned(),
                    account: account.to_owned(),
                    sender_id: sender_id.to_owned(),
                    sender_name: sender_name.map(str::to_owned),
                    created_at: now,
                    expires_at: now.saturating_add(ttl_ms),
                };
                tx.execute(
                    &format!(
                        "INSERT INTO channel_pairing ({PAIRING_COLUMNS})
                         VALUES ($1, $2, $3, $4, $5, $6, $7)"
                    ),
                    &[
                        &request.code as &(dyn ToSql + Sync),
                        &request.channel,
                        &request.account,
                        &request.sender_id,
                        &request.sender_name,
                        &request.created_at,
                        &request.expires_at,
                    ],
                )
                .await
                .map_err(db_error)?;
                PairingOutcome::Issued(request)
            }
        };
        tx.commit().await.map_err(db_error)?;
        Ok(outcome)
    }

    async fn pairing_requests(&self, now: i64) -> Result<Vec<PairingRequest>, StoreError> {
        let rows = self
            .rows(
                &format!(
                    "SELECT {PAIRING_COLUMNS} FROM channel_pairing
                     WHERE expires_at > $1 ORDER BY created_at, code"
                ),
                &[&now],
            )
            .await?;
        Ok(rows.iter().map(pairing_row).collect())
    }

    async fn approve_pairing(
        &self,
        code: &str,
        by: Option<&str>,
        now: i64,
    ) -> Result<Option<ApprovedSender>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.batch_execute("SET LOCAL synchronous_commit TO on")
            .await
            .map_err(db_error)?;
        // Deleting returns the row to exactly one of two approvers racing on a code.
        let Some(row) = tx
            .query_opt(
                &format!(
                    "DELETE FROM channel_pairing WHERE code = $1 AND expires_at > $2
                     RETURNING {PAIRING_COLUMNS}"
                ),
                &[&code, &now],
            )
            .await
            .map_err(db_error)?
        else {
            return Ok(None);
        };
        let p = pairing_row(&row);
        let approved = ApprovedSender {
            channel: p.channel,
            account: p.account,
            sender_id: p.sender_id,
            sender_name: p.sender_name,
            approved_at: now,
            approved_by: by.map(str::to_owned),
        };
        tx.execute(
            "INSERT INTO channel_allowed
               (channel, account, sender_id, sender_name, approved_at, approved_by)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (channel, account, sender_id) DO UPDATE SET
               sender_name = excluded.sender_name, approved_at = excluded.approved_at,
               approved_by = excluded.approved_by",
            &[
                &approved.channel as &(dyn ToSql + Sync),
                &approved.account,
                &approved.sender_id,
                &approved.sender_name,
                &approved.approved_at,
                &approved.approved_by,
            ],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(Some(approved))
    }

    async fn is_approved(
        &self,
        channel: &str,
        account: &str,
        sender_id: &str,
    ) -> Result<bool, StoreError> {
        let rows = self
            .rows(
                "SELECT 1 FROM channel_allowed
                 WHERE channel = $1 AND account = $2 AND sender_id = $3",
                &[&channel, &account, &sender_id],
            )
            .await?;
        Ok(!rows.is_empty())
    }

    async fn approved_senders(&self) -> Result<Vec<ApprovedSender>, StoreError> {
        let rows = self
            .rows(
                "SELECT channel, account, sender_id, sender_name, approved_at, approved_by
                 FROM channel_allowed ORDER BY channel, account, approved_at",
                &[],
            )
            .await?;
        Ok(rows.iter().map(approved_row).collect())
    }

    async fn revoke_sender(
        &self,
        channel: &str,
        account: &str,
        sender_id: &str,
    ) -> Result<bool, StoreError> {
        let n = self
            .durable(
                "DELETE FROM channel_allowed
                 WHERE channel = $1 AND account = $2 AND sender_id = $3",
                &[&channel, &account, &sender_id],
            )
            .await?;
        Ok(n > 0)
    }

    async fn claim_account(
        &self,
        account: &str,
        holder: &str,
        now: i64,
        lease_ms: i64,
    ) -> Result<bool, StoreError> {
        let until = now.saturating_add(lease_ms);
        let n = self
            .durable(
                "INSERT INTO channel_accounts (account, holder, lease_until)
                 VALUES ($1, $2, $3)
                 ON CONFLICT (account) DO UPDATE SET holder = excluded.holder,
                   lease_until = excluded.lease_until
                 WHERE channel_accounts.holder = excluded.holder
                    OR channel_accounts.holder IS NULL
                    OR channel_accounts.lease_until < $4",
                &[&account, &holder, &until, &now],
            )
            .await?;
        if n > 0 {
            let before = now - DELIVERY_MEMORY_MS;
            self.durable(
                "DELETE FROM channel_deliveries WHERE account = $1 AND seen_at < $2",
                &[&account, &before],
            )
            .await?;
        }
        Ok(n > 0)
    }

    async fn release_account(&self, account: &str, holder: &str) -> Result<(), StoreError> {
        self.durable(
            "UPDATE channel_accounts SET holder = NULL, lease_until = NULL
             WHERE account = $1 AND holder = $2",
            &[&account, &holder],
        )
        .await?;
        Ok(())
    }

    async fn cursor(&self, account: &str) -> Result<Option<i64>, StoreError> {
        let rows = self
            .rows(
                "SELECT next_update FROM channel_accounts WHERE account = $1",
                &[&account],
            )
            .await?;
        Ok(rows.first().and_then(|r| r.get::<_, Option<i64>>(0)))
    }

    async fn set_cursor(
        &self,
        account: &str,
        holder: &str,
        cursor: i64,
    ) -> Result<bool, StoreError> {
        let n = self
            .durable(
                "UPDATE channel_accounts SET next_update = $3 WHERE account = $1 AND holder = $2",
                &[&account, &holder, &cursor],
            )
            .await?;
        Ok(n > 0)
    }

    async fn first_delivery(
        &self,
        account: &str,
        message_key: &str,
        now: i64,
    ) -> Result<bool, StoreError> {
        let n = self
            .durable(
                "INSERT INTO channel_deliveries (account, message_key, seen_at)
                 VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                &[&account, &message_key, &now],
            )
            .await?;
        Ok(n > 0)
    }
}
