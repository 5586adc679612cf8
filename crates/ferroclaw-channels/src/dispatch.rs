//! From an incoming message to a run and back: who may talk (DM and group policies,
//! pairing), which agent and session answer, the group's unaddressed messages kept as
//! context, and the answer delivered in the platform's format under its limit. Runs are
//! submitted through the runtime like any other surface's.

use std::collections::VecDeque;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use ferroclaw_config::{ChannelBinding, DmPolicy, GroupPolicy};
use ferroclaw_runtime::cron::RuntimeHost;
use ferroclaw_runtime::{Origin, QueueMode, RunOptions, Runtime, Submit, Submitted};
use ferroclaw_store::{ChannelStore, PairingOutcome};
use tracing::{info, warn};

use crate::pairing;
use crate::seam::{Inbound, Outbound};

/// Unaddressed group messages kept per chat, and chats remembered.
pub const GROUP_CONTEXT: usize = 50;
const GROUP_CHATS: usize = 1_000;

/// Who may talk to the bot and who answers: the platform-neutral part of a channel's
/// settings.
#[derive(Debug, Clone, Default)]
pub struct ChannelPolicy {
    pub dm_policy: DmPolicy,
    pub group_policy: GroupPolicy,
    pub allow_from: Vec<String>,
    pub group_allow_from: Vec<String>,
    pub require_mention: bool,
    pub agent: Option<String>,
    pub bindings: Vec<ChannelBinding>,
}

impl ChannelPolicy {
    /// `allow_from` entries are ids, usernames or `id|username`; a leading `@` is ignored.
    fn allows(&self, sender_id: &str, username: Option<&str>) -> bool {
        self.allow_from.iter().any(|entry| {
            entry.split('|').any(|part| {
                let part = part.trim().trim_start_matches('@');
                !part.is_empty()
                    && (part == sender_id || username.is_some_and(|u| u.eq_ignore_ascii_case(part)))
            })
        })
    }

    fn group_allowed(&self, chat_id: &str) -> bool {
        match self.group_policy {
            GroupPolicy::Open => true,
            GroupPolicy::Disabled => false,
            GroupPolicy::Allowlist => self.group_allow_from.iter().any(|c| c.trim() == chat_id),
        }
    }

    /// The first binding naming the sender, then one naming the chat, then the
    /// channel's agent.
    fn agent_for(&self, msg: &Inbound) -> Option<&str> {
        let by = |f: &dyn Fn(&ChannelBinding) -> bool| {
            self.bindings
                .iter()
                .find(|b| f(b))
                .map(|b| b.agent.as_str())
        };
        by(&|b| b.peer.as_deref() == Some(msg.sender_id.as_str()))
            .or_else(|| by(&|b| b.chat.as_deref() == Some(msg.chat_id.as_str())))
            .or_else(|| by(&|b| b.peer.is_none() && b.chat.is_none()))
            .or(self.agent.as_deref())
    }
}

/// What became of a message (logged; asserted by tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handled {
    /// Not for the bot: its own message, a disabled policy, an unlisted group, no text.
    Ignored(&'static str),
    /// Seen before (another instance, or the platform sent it again).
    Duplicate,
    /// A group message without a mention, kept as context.
    Remembered,
    /// An unknown sender got (or was reminded of) a pairing code.
    Pairing,
    /// An unknown sender under `allowlist`, or pairing is full.
    Refused(&'static str),
    /// `/stop`, `/stopall`: answered at once.
    Command,
    /// A run was submitted; its answer follows.
    Run(String),
    /// The runtime refused it (logged with the reason).
    Failed(String),
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Epoch milliseconds, as the store keeps times.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

pub struct Dispatcher {
    channel: &'static str,
    account: String,
    policy: ChannelPolicy,
    runtime: RuntimeHost,
    store: Arc<dyn ChannelStore>,
    out: Arc<dyn Outbound>,
    context: Mutex<lru::LruCache<String, VecDeque<String>>>,
    pairing_replied: Mutex<lru::LruCache<String, Instant>>,
    /// Runs whose answer a task took on: messages merged into one run share it.
    claims: crate::answer::Claims,
    pub runs: AtomicU64,
}

impl Dispatcher {
    pub fn new(
        channel: &'static str,
        account: &str,
        policy: ChannelPolicy,
        runtime: RuntimeHost,
        store: Arc<dyn ChannelStore>,
        out: Arc<dyn Outbound>,
    ) -> Dispatcher {
        let cap = |n: usize| NonZeroUsize::new(n).unwrap_or(NonZeroUsize::MIN);
        Dispatcher {
            channel,
            account: account.to_string(),
            policy,
            runtime,
            store,
            out,
            context: Mutex::new(lru::LruCache::new(cap(GROUP_CHATS))),
            pairing_replied: Mutex::new(lru::LruCache::new(cap(10_000))),
            claims: crate::answer::Claims::new(),
            runs: AtomicU64::new(0),
        }
    }

    /// The account as the store knows it (`telegram:default`).
    pub fn account_key(&self) -> String {
        format!("{}:{}", self.channel, self.account)
    }

    pub async fn handle(&self, msg: Inbound) -> Handled {
        let handled = self.decide_and_submit(&msg).await;
        match &handled {
            Handled::Run(_) | Handled::Command | Handled::Remembered | Handled::Duplicate => {}
            other => info!(
                channel = self.channel,
                chat = %msg.chat_id,
                sender = %msg.sender_id,
                outcome = ?other,
                "channel: message not run"
            ),
        }
        handled
    }

    async fn decide_and_submit(&self, msg: &Inbound) -> Handled {
        if msg.from_bot {
            return Handled::Ignored("sent by a bot");
        }
        if msg.text.trim().is_empty() {
            return Handled::Ignored("no text");
        }
        match self
            .store
            .first_delivery(&self.account_key(), &msg.message_key, now_ms())
            .await
        {
            Ok(true) => {}
            Ok(false) => return Handled::Duplicate,
            Err(e) => {
                // Without the check an answer could go out twice; without the message
                // nobody is answered. Answering is the lesser harm.
                warn!(channel = self.channel, error = %e, "channel: duplicate check failed");
            }
        }
        let command = command_of(&msg.text);
        if msg.is_group {
            if !self.policy.group_allowed(&msg.chat_id) {
                return Handled::Ignored("group not allowed");
            }
            if self.policy.require_mention && !msg.mentioned && command.is_none() {
                self.remember(msg);
                return Handled::Remembered;
            }
        } else if let Some(refusal) = self.check_direct(msg).await {
            return refusal;
        }

        let runtime: &Runtime = (*self.runtime).as_ref();
        let agent_id = self
            .policy
            .agent_for(msg)
            .unwrap_or(runtime.default_agent_id())
            .to_string();
        let scope = if msg.is_group { "group" } else { "direct" };
        let peer = if msg.is_group {
            &msg.chat_id
        } else {
            &msg.sender_id
        };
        let session_key = format!("agent:{agent_id}:{}:{scope}:{peer}", self.channel);
        let user = format!("{}:{}", self.channel, msg.sender_id);
        let message = match command {
            Some(c) => c.to_string(),
            None => self.with_context(msg),
        };
        let submitted = runtime.submit(Submit {
            agent_id: &agent_id,
            session_key: &session_key,
            user: Some(&user),
            message: &message,
            mode: QueueMode::Queue,
            origin: Origin::Channel,
            // Runs answering a group use the `tools.group_chat` policy level too.
            options: RunOptions {
                group_chat: msg.is_group,
                ..RunOptions::default()
            },
        });
        match submitted {
            Err(e) => {
                warn!(channel = self.channel, error = %e, "channel: run refused");
                self.reply(msg, format!("Sorry, I cannot answer now: {e}"), true);
                Handled::Failed(e.to_string())
            }
            Ok(Submitted::Command(text)) => {
                self.reply(msg, text, true);
                Handled::Command
            }
            Ok(Submitted::Run(handle)) => {
                self.runs.fetch_add(1, Ordering::Relaxed);
                let id = handle.id.clone();
                tokio::spawn(crate::answer::answer(
                    handle,
                    self.out.clone(),
                    self.claims.clone(),
                    msg.reply_chat().to_string(),
                    msg.message_id.clone(),
                ));
                Handled::Run(id)
            }
        }
    }

    /// `None` when the sender may talk; else what they got instead.
    async fn check_direct(&self, msg: &Inbound) -> Option<Handled> {
        match self.policy.dm_policy {
            DmPolicy::Disabled => return Some(Handled::Ignored("direct messages disabled")),
            DmPolicy::Open => return None,
            DmPolicy::Allowlist | DmPolicy::Pairing => {}
        }
        if self
            .policy
            .allows(&msg.sender_id, msg.sender_username.as_deref())
        {
            return None;
        }
        match self
            .store
            .is_approved(self.channel, &self.account, &msg.sender_id)
            .await
        {
            Ok(true) => return None,
            Ok(false) => {}
            Err(e) => {
                warn!(channel = self.channel, error = %e, "channel: approval check failed");
                return Some(Handled::Refused("approvals unavailable"));
            }
        }
        if self.policy.dm_policy == DmPolicy::Allowlist {
            warn!(
                channel = self.channel,
                sender = %msg.sender_id,
                "security.channels: direct message from a sender not allowed"
            );
            return Some(Handled::Refused("not in allow_from"));
        }
        let outcome = self
            .store
            .request_pairing(
                self.channel,
                &self.account,
                &msg.sender_id,
                msg.sender_username.as_deref().or(Some(&msg.sender_name)),
                &pairing::new_code(),
                now_ms(),
                pairing::CODE_TTL.as_millis() as i64,
                pairing::MAX_PENDING,
            )
            .await;
        let (reply, handled) = match &outcome {
            Ok(PairingOutcome::Issued(p)) => {
                info!(
                    channel = self.channel,
                    sender = %msg.sender_id,
                    "security.channels: pairing code issued"
                );
                (pairing::code_message(&p.code), Handled::Pairing)
            }
            Ok(PairingOutcome::Pending(p)) => (pairing::code_message(&p.code), Handled::Pairing),
            Ok(PairingOutcome::Full) => (
                pairing::FULL_MESSAGE.to_string(),
                Handled::Refused("too many pending pairing codes"),
            ),
            Err(e) => {
                warn!(channel = self.channel, error = %e, "channel: pairing failed");
                return Some(Handled::Refused("pairing unavailable"));
            }
        };
        // A new code always goes out (at most one an hour); reminders of it once a
        // minute per sender, whatever they send meanwhile.
        let issued = matches!(outcome, Ok(PairingOutcome::Issued(_)));
        let due = {
            let mut replied = lock(&self.pairing_replied);
            let due = issued
                || replied
                    .get(&msg.sender_id)
                    .is_none_or(|at| at.elapsed() >= pairing::REPLY_EVERY);
            if due {
                replied.put(msg.sender_id.clone(), Instant::now());
            }
            due
        };
        if due {
            self.reply(msg, reply, false);
        }
        Some(handled)
    }

    /// Sends a short plain answer on its own task: a platform that makes the bot wait
    /// (a 429 waited out for up to a minute) must not hold up the next messages, the
    /// connection's heartbeats or the account's lease.
    fn reply(&self, msg: &Inbound, text: String, as_reply: bool) {
        let out = self.out.clone();
        let chat = msg.reply_chat().to_string();
        let reply_to = as_reply.then(|| msg.message_id.clone());
        let channel = self.channel;
        tokio::spawn(async move {
            if let Err(e) = out.send(&chat, &text, false, reply_to.as_deref()).await {
                warn!(channel, error = %e, "channel: reply not sent");
            }
        });
    }

    fn remember(&self, msg: &Inbound) {
        let mut context = lock(&self.context);
        let lines = context.get_or_insert_mut(msg.chat_id.clone(), VecDeque::new);
        if lines.len() == GROUP_CONTEXT {
            lines.pop_front();
        }
        lines.push_back(format!("{}: {}", display_name(msg), msg.text.trim()));
    }

    /// The message, after the group's messages since the bot last answered there.
    fn with_context(&self, msg: &Inbound) -> String {
        if !msg.is_group {
            return msg.text.clone();
        }
        let earlier = lock(&self.context).pop(&msg.chat_id).unwrap_or_default();
        let now = format!("{}: {}", display_name(msg), msg.text.trim());
        if earlier.is_empty() {
            return now;
        }
        let mut text = String::from("[Messages in the group since you last answered]\n");
        for line in earlier {
            text.push_str(&line);
            text.push('\n');
        }
        text.push_str("[The message to you]\n");
        text.push_str(&now);
        text
    }
}

fn display_name(msg: &Inbound) -> &str {
    msg.sender_username
        .as_deref()
        .filter(|u| !u.is_empty())
        .unwrap_or(&msg.sender_name)
}

/// `/stop` and `/stopall` (also `/stop@bot`), which bypass the queue.
fn command_of(text: &str) -> Option<&'static str> {
    let first = text.split_whitespace().next()?;
    let name = first.split('@').next()?;
    match name.to_ascii_lowercase().as_str() {
        "/stop" => Some("/stop"),
        "/stopall" => Some("/stopall"),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn msg(sender: &str, username: Option<&str>) -> Inbound {
        Inbound {
            message_key: "1".into(),
            message_id: "1".into(),
            chat_id: "c".into(),
            is_group: false,
            sender_id: sender.into(),
            sender_username: username.map(str::to_string),
            sender_name: "Ann".into(),
            text: "hi".into(),
            mentioned: false,
            from_bot: false,
            reply_in: None,
        }
    }

    #[test]
    fn allow_from_takes_ids_usernames_and_both() {
        let p = ChannelPolicy {
            allow_from: vec!["42".into(), "@Bob".into(), "7|carol".into()],
            ..ChannelPolicy::default()
        };
        assert!(p.allows("42", None));
        assert!(p.allows("9", Some("bob")));
        assert!(p.allows("7", None));
        assert!(p.allows("8", Some("Carol")));
        // Look-alikes: a prefix, an id that contains an allowed one, an empty entry.
        assert!(!p.allows("420", None));
        assert!(!p.allows("4", Some("bobby")));
        let empty = ChannelPolicy {
            allow_from: vec!["".into(), "@".into(), "|".into()],
            ..ChannelPolicy::default()
        };
        assert!(!empty.allows("", Some("")));
    }

    #[test]
    fn bindings_pick_the_sender_then_the_chat_then_the_channel() {
        let bind = |agent: &str, chat: Option<&str>, peer: Option<&str>| ChannelBinding {
            agent: agent.into(),
            chat: chat.map(str::to_string),
            peer: peer.map(str::to_string),
        };
        let p = ChannelPolicy {
            agent: Some("fallback".into()),
            bindings: vec![
                bind("by-chat", Some("c"), None),
                bind("by-peer", None, Some("42")),
            ],
            ..ChannelPolicy::default()
        };
        assert_eq!(p.agent_for(&msg("42", None)), Some("by-peer"));
        assert_eq!(p.agent_for(&msg("43", None)), Some("by-chat"));
        let mut elsewhere = msg("43", None);
        elsewhere.chat_id = "d".into();
        assert_eq!(p.agent_for(&elsewhere), Some("fallback"));
    }

    #[test]
    fn stop_commands_are_recognised_with_or_without_the_bot_name() {
        assert_eq!(command_of("/stop"), Some("/stop"));
        assert_eq!(command_of("/STOP@ferro_bot now"), Some("/stop"));
        assert_eq!(command_of("/stopall"), Some("/stopall"));
        assert_eq!(command_of("/stopping"), None);
        assert_eq!(command_of("please /stop"), None);
    }
}
