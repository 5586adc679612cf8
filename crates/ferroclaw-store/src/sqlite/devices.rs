//! The embedded backend's [`DeviceStore`]: a table in the records database.

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension, TransactionBehavior};

use super::records::RecordsDb;
use crate::devices::{DevicePairing, DeviceRecord, DeviceStore};
use crate::StoreError;

pub(crate) struct SqliteDevices {
    db: RecordsDb,
}

impl SqliteDevices {
    pub(crate) fn new(db: RecordsDb) -> SqliteDevices {
        SqliteDevices { db }
    }
}

const COLUMNS: &str = "id, public_key, client_id, platform, user_id, role, token_hash, paired_at, last_seen_at, revoked_at, credential_hash";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<DeviceRecord> {
    Ok(DeviceRecord {
        id: r.get(0)?,
        public_key: r.get(1)?,
        client_id: r.get(2)?,
        platform: r.get(3)?,
        user_id: r.get(4)?,
        role: r.get(5)?,
        token_hash: r.get(6)?,
        paired_at: r.get(7)?,
        last_seen_at: r.get(8)?,
        revoked_at: r.get(9)?,
        credential_hash: r.get(10)?,
    })
}

#[async_trait]
impl DeviceStore for SqliteDevices {
    async fn pair_device(
        &self,
        d: &DeviceRecord,
        max_active: usize,
    ) -> Result<DevicePairing, StoreError> {
        let d = d.clone();
        let max = i64::try_from(max_active).unwrap_or(i64::MAX);
        self.db
            .with(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let known: bool = tx.query_row(
                    "SELECT EXISTS (SELECT 1 FROM gateway_devices WHERE id = ?1)",
                    [&d.id],
                    |r| r.get(0),
                )?;
                if known {
                    return Ok(DevicePairing::Known);
                }
                let active: i64 = tx.query_row(
                    "SELECT count(*) FROM gateway_devices WHERE user_id IS ?1 AND revoked_at IS NULL",
                    [&d.user_id],
                    |r| r.get(0),
                )?;
                if active >= max {
                    return Ok(DevicePairing::Full);
                }
                tx.execute(
                    &format!("INSERT INTO gateway_devices ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"),
                    params![d.id, d.public_key, d.client_id, d.platform, d.user_id, d.role, d.token_hash, d.paired_at, d.last_seen_at, d.revoked_at, d.credential_hash],
                )?;
                tx.commit()?;
                Ok(DevicePairing::Paired)
            })
            .await
    }

    async fn device(&self, id: &str) -> Result<Option<DeviceRecord>, StoreError> {
        let id = id.to_owned();
        self.db
            .with(move |conn| {
                conn.prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM gateway_devices WHERE id = ?1"
                ))?
                .query_row([&id], row)
                .optional()
            })
            .await
    }

    async fn devices(&self) -> Result<Vec<DeviceRecord>, StoreError> {
        self.db
            .with(|conn| {
                conn.prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM gateway_devices ORDER BY paired_at DESC, id"
                ))?
                .query_map([], row)?
                .collect()
            })
            .await
    }

    async fn touch_device(&self, id: &str, at: i64) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.db
            .with(move |conn| {
                conn.execute(
                    "UPDATE gateway_devices SET last_seen_at = ?2 WHERE id = ?1",
                    params![id, at],
                )
                .map(drop)
            })
            .await
    }

    async fn rebind_device(
        &self,
        id: &str,
        user_id: Option<&str>,
        role: &str,
        credential_hash: &str,
        at: i64,
    ) -> Result<bool, StoreError> {
        let (id, user_id, role, credential_hash) = (
            id.to_owned(),
            user_id.map(str::to_owned),
            role.to_owned(),
            credential_hash.to_owned(),
        );
        self.db
            .with(move |conn| {
                let n = conn.execute(
                    "UPDATE gateway_devices SET user_id = ?2, role = ?3, credential_hash = ?4, last_seen_at = ?5
                     WHERE id = ?1 AND revoked_at IS NULL",
                    params![id, user_id, role, credential_hash, at],
                )?;
                Ok(n == 1)
            })
            .await
    }

    async fn revoke_device(&self, id: &str, at: i64) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.db
            .with(move |conn| {
                let n = conn.execute(
                    "UPDATE gateway_devices SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
                    params![id, at],
                )?;
                Ok(n == 1)
            })
            .await
    }
}
