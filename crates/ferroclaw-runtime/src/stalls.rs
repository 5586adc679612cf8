//! The runs the stall watchdog cut short lately, kept in memory for `status` and the
//! dashboard (the store keeps each as an incident too).

use std::collections::VecDeque;
use std::sync::Mutex;

use ferroclaw_types::{EventKind, RunEvent};
use serde::Serialize;

use crate::door::{RunInfo, RunObserver};

/// How many stalled runs are remembered.
const KEPT: usize = 20;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StalledRun {
    pub run_id: String,
    pub agent_id: String,
    pub session_key: String,
    pub idle_ms: u64,
    /// `model` or `tools`.
    pub waiting_on: String,
    /// Milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// Cleaned up and its session freed.
    pub recovered: bool,
}

#[derive(Default)]
pub struct Stalls {
    recent: Mutex<VecDeque<StalledRun>>,
}

impl Stalls {
    /// Newest first.
    pub fn recent(&self) -> Vec<StalledRun> {
        self.lock().iter().rev().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<StalledRun>> {
        self.recent.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl RunObserver for Stalls {
    fn event(&self, run: &RunInfo, event: &RunEvent) {
        match &event.kind {
            EventKind::RunStalled {
                idle_ms,
                waiting_on,
            } => {
                let mut recent = self.lock();
                if recent.len() == KEPT {
                    recent.pop_front();
                }
                recent.push_back(StalledRun {
                    run_id: run.run_id.clone(),
                    agent_id: run.agent_id.clone(),
                    session_key: run.session_key.clone(),
                    idle_ms: *idle_ms,
                    waiting_on: waiting_on.clone(),
                    at_ms: ferroclaw_types::now_millis(),
                    recovered: false,
                });
            }
            EventKind::RunRecovered { .. } => {
                if let Some(r) = self
                    .lock()
                    .iter_mut()
                    .rev()
                    .find(|r| r.run_id == run.run_id)
                {
                    r.recovered = true;
                }
            }
            _ => {}
        }
    }
}
