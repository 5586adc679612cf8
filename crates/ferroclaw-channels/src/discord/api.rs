//! A thin client of Discord's REST API (v10): the bot's own user, the gateway's address,
//! messages sent and edited, the typing indicator, a direct-message channel. Every call
//! carries `Authorization: Bot <token>`; a 429 is waited out for its `retry_after`.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

const MAX_ANSWER: usize = 4 * 1024 * 1024;
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
const ATTEMPTS: u32 = 4;
const TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Discord said no (`code` is Discord's JSON error code, 0 when it gave none).
    #[error("discord {what}: {message} (HTTP {status}, code {code})")]
    Api {
        what: &'static str,
        status: u16,
        code: u64,
        message: String,
        retry_after: Option<Duration>,
    },
    #[error("discord {what}: {why}")]
    Transport { what: &'static str, why: String },
}

impl ApiError {
    pub fn status(&self) -> Option<u16> {
        match self {
            ApiError::Api { status, .. } => Some(*status),
            ApiError::Transport { .. } => None,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            ApiError::Api { retry_after, .. } => *retry_after,
            ApiError::Transport { .. } => None,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct User {
    pub id: String,
    #[serde(default)]
    pub username: String,
    pub global_name: Option<String>,
    #[serde(default)]
    pub bot: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    pub id: String,
    pub channel_id: String,
    pub guild_id: Option<String>,
    pub author: User,
    #[serde(default)]
    pub content: String,
    #[serde(default)]
    pub mentions: Vec<User>,
    pub referenced_message: Option<Box<Message>>,
    /// 0: a message, 19: a reply; others are system messages.
    #[serde(default, rename = "type")]
    pub kind: u8,
}

#[derive(Deserialize)]
struct Gateway {
    url: String,
}

#[derive(Deserialize)]
struct Channel {
    id: String,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    code: u64,
    #[serde(default)]
    message: String,
    retry_after: Option<f64>,
}

#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    pub fn new(base_url: &str, token: &str) -> Result<Api, ApiError> {
        let client = |why: String| ApiError::Transport {
            what: "client",
            why,
        };
        let mut auth = HeaderValue::from_str(&format!("Bot {token}"))
            .map_err(|_| client("the token has characters a header cannot carry".into()))?;
        auth.set_sensitive(true);
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, auth);
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .user_agent(concat!(
                "DiscordBot (https://github.com/ferroclaw, ",
                env!("CARGO_PKG_VERSION"),
                ")"
            ))
            .connect_timeout(Duration::from_secs(10))
            // The token would follow a redirect elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| client(e.to_string()))?;
        Ok(Api {
            http,
            base: base_url.trim_end_matches('/').to_string(),
        })
    }

    async fn call<T: DeserializeOwned>(
        &self,
        what: &'static str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<T, ApiError> {
        let transport = |e: reqwest::Error| ApiError::Transport {
            what,
            why: ferroclaw_types::error_chain(&e),
        };
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .timeout(TIMEOUT);
        if let Some(body) = body {
            req = req.json(body);
        }
        let mut resp = req.send().await.map_err(transport)?;
        let status = resp.status().as_u16();
        let header_wait = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok());
        let bytes = crate::http::read_bounded(&mut resp, MAX_ANSWER)
            .await
            .map_err(|why| ApiError::Transport { what, why })?;
        if (200..300).contains(&status) {
            let body: &[u8] = if status == 204 || bytes.is_empty() {
                b"null"
            } else {
                &bytes
            };
            return serde_json::from_slice(body).map_err(|e| ApiError::Transport {
                what,
                why: format!("unexpected answer: {e}"),
            });
        }
        let err: Option<ErrorBody> = serde_json::from_slice(&bytes).ok();
        let wait = err
            .as_ref()
            .and_then(|e| e.retry_after)
            .or(header_wait)
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64);
        Err(ApiError::Api {
            what,
            status,
            code: err.as_ref().map_or(0, |e| e.code),
            message: err
                .map(|e| e.message)
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| String::from_utf8_lossy(&bytes).chars().take(200).collect()),
            retry_after: if status == 429 { wait } else { None },
        })
    }

    /// A call that waits out a 429 (up to a minute each time) and tries again.
    async fn call_patiently<T: DeserializeOwned>(
        &self,
        what: &'static str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<T, ApiError> {
        let mut attempt = 1;
        loop {
            match self.call(what, method.clone(), path, body).await {
                Err(e) if attempt < ATTEMPTS => match e.retry_after() {
                    Some(wait) if wait <= MAX_RETRY_AFTER => {
                        tracing::info!(
                            what,
                            wait_ms = wait.as_millis() as u64,
                            "discord: rate limited; waiting"
                        );
                        tokio::time::sleep(wait).await;
                        attempt += 1;
                    }
                    _ => return Err(e),
                },
                other => return other,
            }
        }
    }

    pub async fn me(&self) -> Result<User, ApiError> {
        self.call("users/@me", Method::GET, "/users/@me", None)
            .await
    }

    /// The gateway's address (`wss://gateway.discord.gg`).
    pub async fn gateway_url(&self) -> Result<String, ApiError> {
        let g: Gateway = self
            .call("gateway/bot", Method::GET, "/gateway/bot", None)
            .await?;
        Ok(g.url)
    }

    /// Sends `content`; nobody is pinged by what the text says (`@everyone`, roles,
    /// users): the model's words must not page a server.
    pub async fn send(
        &self,
        channel: &str,
        content: &str,
        reply_to: Option<&str>,
    ) -> Result<Message, ApiError> {
        let mut body = json!({
            "content": content,
            "allowed_mentions": {"parse": [], "replied_user": false},
        });
        if let Some(id) = reply_to {
            body["message_reference"] = json!({"message_id": id, "fail_if_not_exists": false});
        }
        let path = format!("/channels/{}/messages", segment(channel)?);
        self.call_patiently("send", Method::POST, &path, Some(&body))
            .await
    }

    pub async fn edit(&self, channel: &str, message: &str, content: &str) -> Result<(), ApiError> {
        let body = json!({
            "content": content,
            "allowed_mentions": {"parse": [], "replied_user": false},
        });
        let path = format!(
            "/channels/{}/messages/{}",
            segment(channel)?,
            segment(message)?
        );
        self.call_patiently::<Value>("edit", Method::PATCH, &path, Some(&body))
            .await
            .map(drop)
    }

    pub async fn typing(&self, channel: &str) -> Result<(), ApiError> {
        let path = format!("/channels/{}/typing", segment(channel)?);
        self.call::<Value>("typing", Method::POST, &path, None)
            .await
            .map(drop)
    }

    /// The direct-message channel with a user.
    pub async fn open_dm(&self, user: &str) -> Result<String, ApiError> {
        segment(user)?;
        let c: Channel = self
            .call_patiently(
                "open dm",
                Method::POST,
                "/users/@me/channels",
                Some(&json!({"recipient_id": user})),
            )
            .await?;
        Ok(c.id)
    }
}

/// Discord ids are snowflakes; anything else in a path would change the request.
fn segment(id: &str) -> Result<&str, ApiError> {
    if !id.is_empty() && id.len() <= 20 && id.bytes().all(|b| b.is_ascii_digit()) {
        Ok(id)
    } else {
        Err(ApiError::Transport {
            what: "request",
            why: format!("`{id}` is not a Discord id"),
        })
    }
}
