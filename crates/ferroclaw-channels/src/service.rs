//! The channels a process runs: started from the settings with the gateway, each on its
//! own task; listed, switched on and off, and used to send a message by the WebSocket
//! methods (`channels.*`, `send`).

use std::sync::{Arc, Mutex};

use ferroclaw_config::settings::{
    ChannelsSettings, DiscordSettings, FeishuSettings, SlackSettings, TelegramSettings,
    WhatsAppSettings, ZaloSettings,
};
use ferroclaw_config::DmPolicy;
use ferroclaw_runtime::cron::RuntimeHost;
use ferroclaw_store::ChannelStore;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::format::render;
use crate::seam::{deliver, Outbound};
use crate::status::{ChannelStatus, StatusCell};
use crate::{discord, feishu, slack, telegram, whatsapp, zalo};

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

/// A configured platform and its settings.
#[derive(Clone)]
enum Platform {
    Telegram(TelegramSettings),
    Discord(DiscordSettings),
    Slack(SlackSettings),
    WhatsApp(WhatsAppSettings, whatsapp::Link),
    Zalo(ZaloSettings),
    Feishu(FeishuSettings, feishu::Inbox),
}

/// Why a delivery to a channel's event URL was refused.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("no channel `{0}` takes events here")]
    Unknown(String),
    #[error(transparent)]
    Feishu(feishu::WebhookError),
}

impl WebhookError {
    /// The HTTP status to answer with.
    pub fn status(&self) -> u16 {
        match self {
            WebhookError::Unknown(_) => 404,
            WebhookError::Feishu(feishu::WebhookError::Malformed(_)) => 400,
            WebhookError::Feishu(feishu::WebhookError::Refused(_)) => 401,
            WebhookError::Feishu(_) => 503,
        }
    }
}

struct Running {
    name: &'static str,
    platform: Platform,
    /// How this process sends on the platform, or why it cannot.
    out: Result<Arc<dyn Outbound>, String>,
    status: Arc<StatusCell>,
    stop: Mutex<Option<CancellationToken>>,
}

/// What a platform's task is given to work one account.
pub(crate) struct Task {
    pub runtime: RuntimeHost,
    pub store: Arc<dyn ChannelStore>,
    /// This process, as the account leases name it.
    pub holder: String,
    pub status: Arc<StatusCell>,
    pub out: Arc<dyn Outbound>,
    pub stop: CancellationToken,
}

impl Task {
    /// The dispatcher answering through the task's platform, and the account's lease.
    pub fn dispatcher(
        &self,
        channel: &'static str,
        account: &str,
        policy: crate::dispatch::ChannelPolicy,
    ) -> (crate::dispatch::Dispatcher, crate::lease::Lease) {
        let dispatcher = crate::dispatch::Dispatcher::new(
            channel,
            account,
            policy,
            self.runtime.clone(),
            self.store.clone(),
            self.out.clone(),
        );
        let lease = crate::lease::Lease::new(
            self.store.clone(),
            dispatcher.account_key(),
            self.holder.clone(),
        );
        (dispatcher, lease)
    }
}

pub struct Channels {
    runtime: RuntimeHost,
    store: Option<Arc<dyn ChannelStore>>,
    holder: String,
    running: Vec<Running>,
    stop: CancellationToken,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Channels {
    /// The configured channels; the enabled ones start at once (on the current tokio
    /// runtime).
    pub fn start(settings: &ChannelsSettings, runtime: RuntimeHost) -> Arc<Channels> {
        let store = (*runtime).as_ref().store().channels();
        let mut running = Vec::new();
        if let Some(t) = &settings.telegram {
            let c = &t.config;
            warn_about_policy(telegram::CHANNEL, &c.dm_policy, &c.allow_from);
            running.push(Running {
                name: telegram::CHANNEL,
                out: telegram::outbound(t),
                status: Arc::new(StatusCell::new(telegram::CHANNEL, c.enabled)),
                stop: Mutex::new(None),
                platform: Platform::Telegram(t.clone()),
            });
        }
        if let Some(d) = &settings.discord {
            let c = &d.config;
            warn_about_policy(discord::CHANNEL, &c.dm_policy, &c.allow_from);
            running.push(Running {
                name: discord::CHANNEL,
                out: discord::outbound(d),
                status: Arc::new(StatusCell::new(discord::CHANNEL, c.enabled)),
                stop: Mutex::new(None),
                platform: Platform::Discord(d.clone()),
            });
        }
        if let Some(sl) = &settings.slack {
            let c = &sl.config;
            warn_about_policy(slack::CHANNEL, &c.dm_policy, &c.allow_from);
            running.push(Running {
                name: slack::CHANNEL,
                out: slack::outbound(sl),
                status: Arc::new(StatusCell::new(slack::CHANNEL, c.enabled)),
                stop: Mutex::new(None),
                platform: Platform::Slack(sl.clone()),
            });
        }
        if let Some(wa) = &settings.whatsapp {
            let c = &wa.config;
            warn_about_policy(whatsapp::CHANNEL, &c.dm_policy, &c.allow_from);
            let (out, link) = whatsapp::outbound(wa);
            running.push(Running {
                name: whatsapp::CHANNEL,
                out: Ok(out),
                status: Arc::new(StatusCell::new(whatsapp::CHANNEL, c.enabled)),
                stop: Mutex::new(None),
                platform: Platform::WhatsApp(wa.clone(), link),
            });
        }
        if let Some(z) = &settings.zalo {
            let c = &z.config;
            warn_about_policy(zalo::CHANNEL, &c.dm_policy, &c.allow_from);
            running.push(Running {
                name: zalo::CHANNEL,
                out: zalo::outbound(z),
                status: Arc::new(StatusCell::new(zalo::CHANNEL, c.enabled)),
                stop: Mutex::new(None),
                platform: Platform::Zalo(z.clone()),
            });
        }
        if let Some(f) = &settings.feishu {
            let c = &f.config;
            warn_about_policy(feishu::CHANNEL, &c.dm_policy, &c.allow_from);
            running.push(Running {
                name: feishu::CHANNEL,
                out: feishu::outbound(f),
                status: Arc::new(StatusCell::new(feishu::CHANNEL, c.enabled)),
                stop: Mutex::new(None),
                platform: Platform::Feishu(f.clone(), Arc::new(Mutex::new(None))),
            });
        }
        let channels = Arc::new(Channels {
            store,
            holder: format!("gw-{}", uuid::Uuid::now_v7()),
            running,
            runtime,
            stop: CancellationToken::new(),
            tasks: Mutex::new(Vec::new()),
        });
        for r in &channels.running {
            let enabled = match &r.platform {
                Platform::Telegram(t) => t.config.enabled,
                Platform::Discord(d) => d.config.enabled,
                Platform::Slack(s) => s.config.enabled,
                Platform::WhatsApp(w, _) => w.config.enabled,
                Platform::Zalo(z) => z.config.enabled,
                Platform::Feishu(f, _) => f.config.enabled,
            };
            if enabled {
                channels.launch(r);
            }
        }
        channels
    }

    fn launch(&self, r: &Running) {
        let Some(store) = self.store.clone() else {
            r.status
                .fail("the storage keeps no channel data (pairing, leases)".into());
            return;
        };
        let out = match &r.out {
            Ok(out) => out.clone(),
            Err(why) => return r.status.fail(why.clone()),
        };
        let stop = self.stop.child_token();
        *lock(&r.stop) = Some(stop.clone());
        r.status.set_enabled(true);
        let task = Task {
            runtime: self.runtime.clone(),
            store,
            holder: self.holder.clone(),
            status: r.status.clone(),
            out,
            stop,
        };
        let handle = match &r.platform {
            Platform::Telegram(t) => tokio::spawn(telegram::run(t.clone(), task)),
            Platform::Discord(d) => tokio::spawn(discord::run(d.clone(), task)),
            Platform::Slack(s) => tokio::spawn(slack::run(s.clone(), task)),
            Platform::WhatsApp(w, link) => {
                tokio::spawn(whatsapp::run(w.clone(), link.clone(), task))
            }
            Platform::Zalo(z) => tokio::spawn(zalo::run(z.clone(), task)),
            Platform::Feishu(f, inbox) => tokio::spawn(feishu::run(f.clone(), inbox.clone(), task)),
        };
        let mut tasks = lock(&self.tasks);
        tasks.retain(|t| !t.is_finished());
        tasks.push(handle);
    }

    fn running(&self, name: &str) -> Result<&Running, ChannelError> {
        self.running
            .iter()
            .find(|r| r.name == name)
            .ok_or_else(|| ChannelError::Unknown(name.to_string()))
    }

    pub fn list(&self) -> Vec<ChannelStatus> {
        self.running.iter().map(|r| r.status.get()).collect()
    }

    pub fn status(&self, name: &str) -> Result<ChannelStatus, ChannelError> {
        Ok(self.running(name)?.status.get())
    }

    /// Starts or stops a channel in this process (the config file is not changed).
    pub fn toggle(&self, name: &str, enabled: bool) -> Result<ChannelStatus, ChannelError> {
        let r = self.running(name)?;
        let current = lock(&r.stop).take();
        match (enabled, current) {
            (true, Some(stop)) => {
                // Already running: keep it.
                *lock(&r.stop) = Some(stop);
            }
            (true, None) => self.launch(r),
            (false, Some(stop)) => {
                stop.cancel();
                r.status.set_enabled(false);
            }
            (false, None) => r.status.set_enabled(false),
        }
        Ok(r.status.get())
    }

    /// Sends `text` (Markdown) to chat `to` on channel `name`; how many messages it took.
    pub async fn send(&self, name: &str, to: &str, text: &str) -> Result<usize, ChannelError> {
        let r = self.running(name)?;
        if lock(&r.stop).is_none() {
            return Err(ChannelError::Disabled(name.to_string()));
        }
        let out = r
            .out
            .as_ref()
            .map_err(|_| ChannelError::NoCredentials(name.to_string()))?;
        let chunks = render(text, out.markup(), out.limit());
        deliver(out.as_ref(), to, &chunks, None, None)
            .await
            .map_err(|e| ChannelError::Send(e.to_string()))
    }

    /// One delivery to a channel's event URL (`/channels/<name>/events`): the answer
    /// to give the platform, or why the delivery is refused.
    pub fn webhook(&self, name: &str, body: &[u8]) -> Result<serde_json::Value, WebhookError> {
        let r = self
            .running(name)
            .map_err(|_| WebhookError::Unknown(name.to_string()))?;
        match &r.platform {
            Platform::Feishu(f, inbox) => {
                feishu::accept(body, f.app_token.as_deref(), inbox).map_err(WebhookError::Feishu)
            }
            _ => Err(WebhookError::Unknown(name.to_string())),
        }
    }

    /// Stops every channel; each gives its lease up so another instance takes over at
    /// once (waited for up to two seconds; the lease lapses on its own otherwise).
    pub async fn shutdown(&self) {
        self.stop.cancel();
        let tasks: Vec<_> = std::mem::take(&mut *lock(&self.tasks));
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
        let Some((channel, scope, peer)) = ferroclaw_runtime::channel_session(session_key) else {
            return Ok(false);
        };
        let Ok(r) = self.running(channel) else {
            return Ok(false);
        };
        // A direct session is keyed by the person; some platforms talk to them in a
        // chat of its own.
        let chat = match (scope, &r.out) {
            ("direct", Ok(out)) => out.direct_chat(peer).await.map_err(|e| e.to_string())?,
            _ => peer.to_string(),
        };
        self.send(channel, &chat, text)
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
