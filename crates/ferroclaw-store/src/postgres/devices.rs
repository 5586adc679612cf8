//! The managed backend's [`DeviceStore`]: the embedded one's table in PostgreSQL.

use async_trait::async_trait;
use tokio_postgres::Row;

use super::{db_error, PgSessionStore};
use crate::devices::{DevicePairing, DeviceRecord, DeviceStore};
use crate::StoreError;

const COLUMNS: &str = "id, public_key, client_id, platform, user_id, role, token_hash, paired_at, last_seen_at, revoked_at, credential_hash";

fn row(r: &Row) -> DeviceRecord {
    DeviceRecord {
        id: r.get(0),
        public_key: r.get(1),
        client_id: r.get(2),
        platform: r.get(3),
        user_id: r.get(4),
        role: r.get(5),
        token_hash: r.get(6),
        paired_at: r.get(7),
        last_seen_at: r.get(8),
        revoked_at: r.get(9),
        credential_hash: r.get(10),
    }
}

#[async_trait]
impl DeviceStore for PgSessionStore {
    async fn pair_device(
        &self,
        d: &DeviceRecord,
        max_active: usize,
    ) -> Result<DevicePairing, StoreError> {
        let client = self.client().await?;
        let max = i64::try_from(max_active).unwrap_or(i64::MAX);
        // One statement: the count and the insert see the same snapshot.
        let n = client
            .execute(
                &format!(
                    "INSERT INTO gateway_devices ({COLUMNS})
                     SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11
                     WHERE (SELECT count(*) FROM gateway_devices
                            WHERE user_id IS NOT DISTINCT FROM $5 AND revoked_at IS NULL) < $12
                     ON CONFLICT (id) DO NOTHING"
                ),
                &[
                    &d.id,
                    &d.public_key,
                    &d.client_id,
                    &d.platform,
                    &d.user_id,
                    &d.role,
                    &d.token_hash,
                    &d.paired_at,
                    &d.last_seen_at,
                    &d.revoked_at,
                    &d.credential_hash,
                    &max,
                ],
            )
            .await
            .map_err(db_error)?;
        if n == 1 {
            return Ok(DevicePairing::Paired);
        }
        let known = client
            .query_opt("SELECT 1 FROM gateway_devices WHERE id = $1", &[&d.id])
            .await
            .map_err(db_error)?
            .is_some();
        Ok(if known {
            DevicePairing::Known
        } else {
            DevicePairing::Full
        })
    }

    async fn device(&self, id: &str) -> Result<Option<DeviceRecord>, StoreError> {
        let client = self.client().await?;
        Ok(client
            .query_opt(
                &format!("SELECT {COLUMNS} FROM gateway_devices WHERE id = $1"),
                &[&id],
            )
            .await
            .map_err(db_error)?
            .map(|r| row(&r)))
    }

    async fn devices(&self) -> Result<Vec<DeviceRecord>, StoreError> {
        let client = self.client().await?;
        Ok(client
            .query(
                &format!("SELECT {COLUMNS} FROM gateway_devices ORDER BY paired_at DESC, id"),
                &[],
            )
            .await
            .map_err(db_error)?
            .iter()
            .map(row)
            .collect())
    }

    async fn touch_device(&self, id: &str, at: i64) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "UPDATE gateway_devices SET last_seen_at = $2 WHERE id = $1",
                &[&id, &at],
            )
            .await
            .map_err(db_error)?;
        Ok(())
    }

    async fn rebind_device(
        &self,
        id: &str,
        user_id: Option<&str>,
        role: &str,
        credential_hash: &str,
        at: i64,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let n = client
            .execute(
                "UPDATE gateway_devices SET user_id = $2, role = $3, credential_hash = $4, last_seen_at = $5
                 WHERE id = $1 AND revoked_at IS NULL",
                &[&id, &user_id, &role, &credential_hash, &at],
            )
            .await
            .map_err(db_error)?;
        Ok(n == 1)
    }

    async fn revoke_device(&self, id: &str, at: i64) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let n = client
            .execute(
                "UPDATE gateway_devices SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
                &[&id, &at],
            )
            .await
            .map_err(db_error)?;
        Ok(n == 1)
    }
}
