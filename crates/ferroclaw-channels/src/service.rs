//! The channels a process runs: started from the settings with the gateway, each on its
//! own task; listed, switched on and off, and used to send a message by the WebSocket
//! methods (`channels.*`, `send`).

use std::sync::{Arc, Mutex};

use ferroclaw_config::settings::ChannelsSettings;
use ferroclaw_config::DmPolicy;
use ferroclaw_runtime::cron::RuntimeHost;
use ferroclaw_store::ChannelStore;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::format::{render, Markup};
use crate::seam::{deliver, Outbound};
use crate::status::{ChannelStatus, StatusCell};
use crate::telegram;

#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("no channel named `{0}` is configured")]
    Unknown(String),
    #[error("channel `{0}` is disabled")]
    Disabled(String),
    #[error("channel `{0}` has no credentials")]
    NoCredentials(String),
    #[error("{0}")]
    Send(String),
}

struct Running {
    status: Arc<StatusCell>,
    stop: Mutex<Option<CancellationToken>>,
    settings: ferroclaw_config::settings::TelegramSettings,
}

pub struct Channels {
    runtime: RuntimeHost,
    store: Option<Arc<dyn ChannelStore>>,
    holder: String,
    telegram: Option<Running>,
    stop: CancellationToken,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Channels {
    /// The configured channels; the enabled ones start polling at once (on the current
    /// tokio runtime).
    pub fn start(settings: &ChannelsSettings, runtime: RuntimeHost) -> Arc<Channels> {
        let store = (*runtime).as_ref().store().channels();
        let channels = Arc::new(Channels {
            store,
            holder: format!("gw-{}", uuid::Uuid::now_v7()),
            telegram: settings.telegram.as_ref().map(|t| Running {
                status: Arc::new(StatusCell::new(telegram::CHANNEL, t.config.enabled)),
                stop: Mutex::new(None),
                settings: t.clone(),
            }),
            runtime,
            stop: CancellationToken::new(),
            tasks: Mutex::new(Vec::new()),
        });
        if let Some(t) = &channels.telegram {
            warn_about_policy(
                telegram::CHANNEL,
                &t.settings.config.dm_policy,
                &t.settings.config.allow_from,
            );
            if t.settings.config.enabled {
                channels.launch(t);
            }
        }
        channels
    }

    fn launch(&self, t: &Running) {
        let Some(store) = self.store.clone() else {
            t.status
                .fail("the storage keeps no channel data (pairing, leases)".into());
            return;
        };
        let stop = self.stop.child_token();
        *t.stop.lock().unwrap_or_else(|e| e.into_inner()) = Some(stop.clone());
        t.status.set_enabled(true);
        let task = tokio::spawn(telegram::run(
            t.settings.clone(),
            self.runtime.clone(),
            store,
            self.holder.clone(),
            t.status.clone(),
            stop,
        ));
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }

    fn running(&self, name: &str) -> Result<&Running, ChannelError> {
        match name {
            telegram::CHANNEL => self.telegram.as_ref(),
            _ => None,
        }
        .ok_or_else(|| ChannelError::Unknown(name.to_string()))
    }

    pub fn list(&self) -> Vec<ChannelStatus> {
        self.telegram.iter().map(|t| t.status.get()).collect()
    }

    pub fn status(&self, name: &str) -> Result<ChannelStatus, ChannelError> {
        Ok(self.running(name)?.status.get())
    }

    /// Starts or stops a channel in this process (the config file is not changed).
    pub fn toggle(&self, name: &str, enabled: bool) -> Result<ChannelStatus, ChannelError> {
        let t = self.running(name)?;
        let current = t.stop.lock().unwrap_or_else(|e| e.into_inner()).take();
        match (enabled, current) {
            (true, Some(stop)) => {
                // Already running: keep it.
                *t.stop.lock().unwrap_or_else(|e| e.into_inner()) = Some(stop);
            }
            (true, None) => self.launch(t),
            (false, Some(stop)) => {
                stop.cancel();
                t.status.set_enabled(false);
            }
            (false, None) => t.status.set_enabled(false),
        }
        Ok(t.status.get())
    }

    /// Sends `text` (Markdown) to chat `to` on channel `name`; the ids of the messages.
    pub async fn send(&self, name: &str, to: &str, text: &str) -> Result<usize, ChannelError> {
        let t = self.running(name)?;
        if t.stop.lock().unwrap_or_else(|e| e.into_inner()).is_none() {
            return Err(ChannelError::Disabled(name.to_string()));
        }
        let token = t
            .settings
            .token
            .as_deref()
            .ok_or_else(|| ChannelError::NoCredentials(name.to_string()))?;
        let api = telegram::api::Api::new(&t.settings.config.api_base_url, token)
            .map_err(|e| ChannelError::Send(e.to_string()))?;
        let out = telegram::TelegramOut::new(api);
        let chunks = render(text, Markup::TelegramHtml, out.limit());
        deliver(&out, to, &chunks, None, None)
            .await
            .map_err(|e| ChannelError::Send(e.to_string()))
    }

    /// Stops every channel; each gives its lease up so another instance takes over at
    /// once (waited for up to two seconds; the lease lapses on its own otherwise).
    pub async fn shutdown(&self) {
        self.stop.cancel();
        let tasks: Vec<_> =
            std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        let all = async {
            for t in tasks {
                let _ = t.await;
            }
        };
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), all).await;
    }
}

#[async_trait::async_trait]
impl ferroclaw_runtime::ChatSink for Channels {
    async fn post(&self, session_key: &str, text: &str) -> Result<bool, String> {
        let Some((channel, _, chat)) = ferroclaw_runtime::channel_session(session_key) else {
            return Ok(false);
        };
        if self.running(channel).is_err() {
            return Ok(false);
        }
        self.send(channel, chat, text)
            .await
            .map(|_| true)
            .map_err(|e| e.to_string())
    }
}

fn warn_about_policy(channel: &str, policy: &DmPolicy, allow_from: &[String]) {
    if matches!(policy, DmPolicy::Pairing | DmPolicy::Allowlist) && allow_from.is_empty() {
        let what = match policy {
            DmPolicy::Pairing => {
                "only senders approved with `ferroclaw pairing approve` get answers"
            }
            _ => "nobody but previously approved senders gets an answer",
        };
        warn!(
            channel,
            "security.channels: `allow_from` is empty under dm_policy {policy:?}: {what}"
        );
    }
}
