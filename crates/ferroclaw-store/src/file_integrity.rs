//! [`Integrity`] for the embedded backend: the scan walks `<home>/agents/*/sessions/`
//! (naming sessions from the index),
//! the status and the incident reports are files under `<home>/logs/`. All of it is
//! blocking file I/O, so each call runs on a blocking thread.

use async_trait::async_trait;
use tracing::warn;

use crate::file::blocking;
use crate::integrity::{last_status, list_incidents, scan_home, write_incident};
use crate::{
    FileSessionStore, Incident, Integrity, IntegrityStatus, ScanOptions, ScanSummary, StoreError,
};

#[async_trait]
impl Integrity for FileSessionStore {
    async fn scan(&self, opts: ScanOptions) -> Result<ScanSummary, StoreError> {
        let home = self.home().to_owned();
        let store = self.clone();
        blocking(home.join("agents"), move || {
            scan_home(&home, &opts, &|agent| store.keys_by_id_blocking(agent))
        })
        .await
    }

    async fn last_scan_status(&self) -> Option<IntegrityStatus> {
        let home = self.home().to_owned();
        match tokio::task::spawn_blocking(move || last_status(&home)).await {
            Ok(status) => status,
            Err(e) => {
                warn!(error = %e, "reading the integrity scan status failed");
                None
            }
        }
    }

    async fn report_incident(&self, incident: Incident) -> Result<(), StoreError> {
        let home = self.home().to_owned();
        blocking(home.join("logs"), move || {
            write_incident(&home, &incident).map(drop)
        })
        .await
    }

    async fn incidents(&self, limit: usize) -> Result<Vec<Incident>, StoreError> {
        let home = self.home().to_owned();
        blocking(home.join("logs"), move || list_incidents(&home, limit)).await
    }
}
