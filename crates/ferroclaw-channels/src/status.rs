//! What `channels.status`, `status` and `doctor` show of a channel.

use std::sync::{Mutex, MutexGuard};

use serde::Serialize;

use crate::dispatch::Handled;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelStatus {
    pub name: String,
    pub enabled: bool,
    /// `starting`, `polling`, `connecting`, `connected`, `listening` (events come to the
    /// gateway), `standby` (another instance holds the account),
    /// `reconnecting`, `conflict`, `failed`, `stopped` or `disabled`.
    pub state: &'static str,
    /// The bot's username once the platform told it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bot: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Messages that started a run, since start.
    pub runs: u64,
    /// Pairing codes handed out or repeated, since start.
    pub pairing_replies: u64,
}

pub struct StatusCell(Mutex<ChannelStatus>);

impl StatusCell {
    pub fn new(name: &str, enabled: bool) -> StatusCell {
        StatusCell(Mutex::new(ChannelStatus {
            name: name.to_string(),
            enabled,
            state: if enabled { "starting" } else { "disabled" },
            bot: None,
            last_error: None,
            runs: 0,
            pairing_replies: 0,
        }))
    }

    fn lock(&self) -> MutexGuard<'_, ChannelStatus> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self) -> ChannelStatus {
        self.lock().clone()
    }

    pub fn set_state(&self, state: &'static str) {
        self.lock().state = state;
    }

    pub fn set_enabled(&self, enabled: bool) {
        let mut s = self.lock();
        s.enabled = enabled;
        s.state = if enabled { "starting" } else { "disabled" };
    }

    pub fn set_bot(&self, bot: String) {
        self.lock().bot = Some(bot);
    }

    /// A failure the channel keeps retrying (`state` says how it stands meanwhile).
    pub fn error(&self, state: &'static str, why: String) {
        let mut s = self.lock();
        s.state = state;
        s.last_error = Some(why);
    }

    /// A failure it cannot get past without a change of settings.
    pub fn fail(&self, why: String) {
        tracing::warn!(error = %why, "channel: cannot start");
        self.error("failed", why);
    }

    pub fn clear_error(&self) {
        self.lock().last_error = None;
    }

    pub fn handled(&self, h: &Handled) {
        let mut s = self.lock();
        match h {
            Handled::Run(_) => s.runs += 1,
            Handled::Pairing => s.pairing_replies += 1,
            _ => {}
        }
    }
}
