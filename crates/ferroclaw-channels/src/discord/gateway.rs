//! One connection to Discord's gateway (v10, JSON): Hello, then Identify (or Resume of
//! the session a lost connection left), heartbeats with the last sequence number, and
//! the dispatched events; `MESSAGE_CREATE` goes to the dispatcher. How a connection
//! ended says what to do next: resume, identify anew, or stop trying.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::time::{interval_at, Instant};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message as Ws;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::api::{Message, User};
use crate::dispatch::Dispatcher;
use crate::lease::{Lease, RENEW_EVERY};
use crate::status::StatusCell;

/// GUILDS | GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT.
pub const INTENTS: u64 = 1 | (1 << 9) | (1 << 12) | (1 << 15);
const HANDSHAKE: Duration = Duration::from_secs(20);
/// Larger frames are refused (READY of a bot in many servers stays far below).
const MAX_FRAME: usize = 8 * 1024 * 1024;

/// What survives a lost connection: enough to resume the session.
#[derive(Debug, Default)]
pub struct Session {
    pub id: Option<String>,
    pub resume_url: Option<String>,
    pub seq: Option<u64>,
}

impl Session {
    pub fn resumable(&self) -> bool {
        self.id.is_some() && self.resume_url.is_some()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_query_goes_after_the_host_or_the_path() {
        assert_eq!(
            super::with_query("wss://gateway.discord.gg"),
            "wss://gateway.discord.gg/?v=10&encoding=json"
        );
        assert_eq!(
            super::with_query("ws://127.0.0.1:9/gateway?v=9"),
            "ws://127.0.0.1:9/gateway?v=10&encoding=json"
        );
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// The connection was lost or the gateway asked for a new one: resume. `ready`:
    /// whether the session had been working (else the connection itself failed).
    Resume {
        ready: bool,
    },
    /// The session is gone: identify anew.
    Reidentify,
    /// It will not work without a change (token, intents).
    Fatal(String),
    /// Another instance holds the account now.
    LeaseLost,
    Stopped,
}

pub struct Conn<'a> {
    pub url: String,
    pub token: &'a str,
    pub me: &'a User,
    pub dispatcher: &'a Dispatcher,
    pub lease: &'a Lease,
    pub status: &'a StatusCell,
    pub stop: &'a CancellationToken,
}

#[derive(Deserialize)]
struct Payload {
    op: u8,
    #[serde(default)]
    d: Value,
    s: Option<u64>,
    t: Option<String>,
}

#[derive(Deserialize)]
struct Ready {
    session_id: String,
    resume_gateway_url: String,
}

/// `url` with the version and encoding the client speaks.
pub fn with_query(url: &str) -> String {
    let base = url.split('?').next().unwrap_or(url);
    let has_path = base
        .split_once("://")
        .is_some_and(|(_, rest)| rest.contains('/'));
    if has_path {
        format!("{base}?v=10&encoding=json")
    } else {
        format!("{base}/?v=10&encoding=json")
    }
}

fn ended_by_close(code: Option<u16>, session: &mut Session) -> Ended {
    match code {
        Some(4004) => Ended::Fatal("authentication failed: check the bot token".into()),
        Some(4014) => Ended::Fatal(
            "disallowed intents: enable the Message Content intent for the bot in the \
             Developer Portal"
                .into(),
        ),
        Some(c @ (4010..=4013)) => Ended::Fatal(format!("the gateway refused the session ({c})")),
        // Invalid sequence, session timed out: a new session is needed.
        Some(4007 | 4009) => {
            *session = Session::default();
            Ended::Reidentify
        }
        _ => Ended::Resume { ready: true },
    }
}

/// Connects, runs the session until it ends, and says how it ended.
pub async fn connect(c: &Conn<'_>, session: &mut Session) -> Ended {
    let mut config = WebSocketConfig::default();
    config.max_message_size = Some(MAX_FRAME);
    config.max_frame_size = Some(MAX_FRAME);
    let connecting = tokio_tungstenite::connect_async_with_config(&c.url, Some(config), false);
    let mut ws = match tokio::time::timeout(HANDSHAKE, connecting).await {
        Ok(Ok((ws, _))) => ws,
        Ok(Err(e)) => {
            c.status.error("reconnecting", format!("gateway: {e}"));
            return Ended::Resume { ready: false };
        }
        Err(_) => {
            c.status
                .error("reconnecting", "gateway: no answer to the handshake".into());
            return Ended::Resume { ready: false };
        }
    };
    // Hello first: it says how often to heartbeat.
    let hello = tokio::time::timeout(HANDSHAKE, ws.next()).await;
    let interval = match hello {
        Ok(Some(Ok(Ws::Text(t)))) => serde_json::from_str::<Payload>(&t)
            .ok()
            .filter(|p| p.op == 10)
            .and_then(|p| p.d["heartbeat_interval"].as_u64()),
        _ => None,
    };
    let Some(interval) = interval.filter(|ms| *ms > 0) else {
        c.status
            .error("reconnecting", "gateway: no Hello after connecting".into());
        return Ended::Resume { ready: false };
    };
    let interval = Duration::from_millis(interval);
    let opening = match (&session.id, session.seq) {
        (Some(id), Some(seq)) if session.resumable() => json!({
            "op": 6,
            "d": {"token": c.token, "session_id": id, "seq": seq},
        }),
        _ => json!({
            "op": 2,
            "d": {
                "token": c.token,
                "intents": INTENTS,
                "properties": {"os": std::env::consts::OS, "browser": "ferroclaw", "device": "ferroclaw"},
            },
        }),
    };
    if ws.send(Ws::text(opening.to_string())).await.is_err() {
        return Ended::Resume { ready: false };
    }
    // The first heartbeat at a random point of the first interval (Discord asks for
    // this jitter so reconnecting bots do not beat in step).
    let jitter = interval.mul_f64(f64::from(uuid::Uuid::new_v4().as_bytes()[0]) / 255.0);
    let mut beat = interval_at(Instant::now() + jitter, interval);
    let mut renew = interval_at(Instant::now() + RENEW_EVERY, RENEW_EVERY);
    let mut acked = true;
    let mut ready = false;
    let ended = loop {
        tokio::select! {
            frame = ws.next() => {
                let payload = match frame {
                    Some(Ok(Ws::Text(t))) => match serde_json::from_str::<Payload>(&t) {
                        Ok(p) => p,
                        Err(e) => {
                            warn!(error = %e, "discord: a gateway frame that is not a payload; ignored");
                            continue;
                        }
                    },
                    Some(Ok(Ws::Close(frame))) => {
                        break ended_by_close(frame.map(|f| u16::from(f.code)), session);
                    }
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => {
                        warn!(error = %e, "discord: gateway connection lost");
                        break Ended::Resume { ready };
                    }
                    None => break Ended::Resume { ready },
                };
                if let Some(s) = payload.s {
                    session.seq = Some(s);
                }
                match payload.op {
                    0 => match payload.t.as_deref() {
                        Some("READY") => {
                            match serde_json::from_value::<Ready>(payload.d) {
                                Ok(r) => {
                                    session.id = Some(r.session_id);
                                    session.resume_url = Some(r.resume_gateway_url);
                                }
                                Err(e) => warn!(error = %e, "discord: READY without a session"),
                            }
                            info!("discord: connected to the gateway");
                            ready = true;
                            c.status.clear_error();
                            c.status.set_state("connected");
                        }
                        Some("RESUMED") => {
                            info!("discord: session resumed");
                            ready = true;
                            c.status.clear_error();
                            c.status.set_state("connected");
                        }
                        Some("MESSAGE_CREATE") => {
                            match serde_json::from_value::<Message>(payload.d) {
                                Ok(m) => {
                                    if let Some(msg) = super::inbound(&m, c.me) {
                                        let handled = c.dispatcher.handle(msg).await;
                                        c.status.handled(&handled);
                                    }
                                }
                                Err(e) => warn!(error = %e, "discord: a message that could not be read"),
                            }
                        }
                        _ => {}
                    },
                    // The gateway asks for a heartbeat now.
                    1 => {
                        let beat = json!({"op": 1, "d": session.seq}).to_string();
                        let sent = ws.send(Ws::text(beat)).await;
                        if sent.is_err() {
                            break Ended::Resume { ready };
                        }
                    }
                    7 => break Ended::Resume { ready: true },
                    9 => {
                        if payload.d.as_bool() == Some(true) {
                            break Ended::Resume { ready: true };
                        }
                        *session = Session::default();
                        break Ended::Reidentify;
                    }
                    11 => acked = true,
                    _ => {}
                }
            }
            _ = beat.tick() => {
                if !acked {
                    // No ACK since the last beat: the connection is dead without saying so.
                    warn!("discord: heartbeat not acknowledged; reconnecting");
                    break Ended::Resume { ready };
                }
                acked = false;
                if ws.send(Ws::text(json!({"op": 1, "d": session.seq}).to_string())).await.is_err() {
                    break Ended::Resume { ready };
                }
            }
            _ = renew.tick() => {
                if !c.lease.renew().await {
                    break Ended::LeaseLost;
                }
            }
            () = c.stop.cancelled() => break Ended::Stopped,
        }
    };
    // A close code other than 1000/1001 keeps the session resumable.
    let code = match ended {
        Ended::Stopped => CloseCode::Normal,
        _ => CloseCode::Library(4000),
    };
    let _ = tokio::time::timeout(
        Duration::from_secs(2),
        ws.close(Some(CloseFrame {
            code,
            reason: "".into(),
        })),
    )
    .await;
    ended
}
