//! Transcript integrity as the gateway reports it: the start-up scan, `GET /integrity`
//! and the WebSocket `integrity.*` methods share these two calls, which go through the
//! store's [`ferroclaw_store::Integrity`] trait (the gateway never names a file in the home).

use ferroclaw_store::{ScanOptions, ScanSummary};
use serde_json::{json, Value};

use crate::state::AppState;

/// Scans every stored transcript, repairing with `session.integrity_strategy` when
/// `repair` is set.
pub async fn scan(state: &AppState, repair: bool) -> Result<ScanSummary, String> {
    let opts = ScanOptions {
        repair,
        strategy: state.integrity_strategy,
        agent: None,
    };
    state.store().scan(opts).await.map_err(|e| e.to_string())
}

/// The last scan's status with `scanned: true`, or `{scanned: false}` when none ran.
pub async fn status(state: &AppState) -> Value {
    match state
        .store()
        .last_scan_status()
        .await
        .and_then(|st| serde_json::to_value(st).ok())
    {
        Some(mut v) => {
            v["scanned"] = json!(true);
            v
        }
        None => json!({"scanned": false}),
    }
}
