//! [`Integrity`] for the managed backend: the same validator and repair as for files,
//! on each session's rows; backups, incidents and the scan status are rows too.

use std::path::PathBuf;
use std::time::Instant;

use async_trait::async_trait;
use tracing::warn;

use super::{db_error, PgSessionStore};
use crate::integrity::scan::{assess, record_repair};
use crate::integrity::{FileReport, Incident, IntegrityStatus, ScanOptions, ScanSummary};
use crate::transcript::iso_now;
use crate::{Integrity, StoreError};

#[async_trait]
impl Integrity for PgSessionStore {
    async fn scan(&self, opts: ScanOptions) -> Result<ScanSummary, StoreError> {
        let started = Instant::now();
        let mut summary = ScanSummary::default();
        let sessions: Vec<(String, String, String)> = {
            let client = self.client().await?;
            let rows = match &opts.agent {
                Some(agent) => client
                    .query(
                        "SELECT agent_id, key, session_id FROM sessions WHERE agent_id = $1 ORDER BY agent_id, key",
                        &[agent],
                    )
                    .await,
                None => client
                    .query(
                        "SELECT agent_id, key, session_id FROM sessions ORDER BY agent_id, key",
                        &[],
                    )
                    .await,
            }
            .map_err(db_error)?;
            rows.iter()
                .map(|r| (r.get(0), r.get(1), r.get(2)))
                .collect()
        };
        summary.sessions = sessions.len();
        for (agent, key, session_id) in sessions {
            let place = PathBuf::from(format!("postgresql:sessions/{session_id}"));
            let result = self
                .scan_session(&agent, &key, &session_id, &place, &opts)
                .await;
            summary.add(place, result);
        }
        summary.elapsed = started.elapsed();
        let status = summary.finish(opts.repair);
        if let Err(e) = self.record("integrity_scans", &status).await {
            warn!(error = %e, "could not record the integrity scan status");
        }
        Ok(summary)
    }

    fn scan_at_start(&self) -> bool {
        false
    }

    async fn last_scan_status(&self) -> Option<IntegrityStatus> {
        let client = self.client().await.ok()?;
        let row = client
            .query_opt(
                "SELECT body FROM integrity_scans ORDER BY id DESC LIMIT 1",
                &[],
            )
            .await
            .ok()??;
        serde_json::from_str(&row.get::<_, String>(0)).ok()
    }

    async fn report_incident(&self, mut incident: Incident) -> Result<(), StoreError> {
        if incident.timestamp.is_empty() {
            incident.timestamp = iso_now();
        }
        self.record("integrity_incidents", &incident).await
    }

    async fn incidents(&self, limit: usize) -> Result<Vec<Incident>, StoreError> {
        let client = self.client().await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = client
            .query(
                "SELECT body FROM integrity_incidents ORDER BY id DESC LIMIT $1",
                &[&limit],
            )
            .await
            .map_err(db_error)?;
        Ok(rows
            .iter()
            .filter_map(|r| serde_json::from_str(&r.get::<_, String>(0)).ok())
            .collect())
    }
}

impl PgSessionStore {
    /// Appends `body` as JSON to one of the record tables.
    async fn record(&self, table: &str, body: &impl serde::Serialize) -> Result<(), StoreError> {
        let text = serde_json::to_string(body).map_err(db_error)?;
        let client = self.client().await?;
        client
            .execute(
                &format!("INSERT INTO {table} (at, body) VALUES ($1, $2)"),
                &[&ferroclaw_types::now_millis(), &text],
            )
            .await
            .map_err(db_error)?;
        Ok(())
    }

    async fn scan_session(
        &self,
        agent: &str,
        key: &str,
        session_id: &str,
        place: &std::path::Path,
        opts: &ScanOptions,
    ) -> Result<Option<FileReport>, StoreError> {
        let bytes = {
            let client = self.client().await?;
            match Self::transcript_bytes(&client, session_id).await? {
                Some(b) => b,
                // Deleted while the scan ran.
                None => return Ok(None),
            }
        };
        let Some((mut report, fix)) =
            assess(agent, Some(key.to_owned()), place, &bytes, session_id, opts)
        else {
            return Ok(None);
        };
        let Some((fixed, action)) = fix else {
            return Ok(Some(report));
        };
        let backup = self.replace_with_backup(session_id, &bytes, &fixed).await?;
        let incident = record_repair(&mut report, action, backup);
        if let Err(e) = self.report_incident(incident).await {
            warn!(error = %e, "could not record the integrity incident");
        }
        Ok(Some(report))
    }
}
