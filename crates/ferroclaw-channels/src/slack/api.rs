//! A thin client of Slack's Web API (`<base>/<method>`, JSON in, `{ok, error}` out): the
//! bot's identity, a Socket Mode address, messages posted and updated, a DM opened. The
//! bot token signs every call but `apps.connections.open`, which takes the app-level
//! token. A 429 is waited out for its `Retry-After`.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

const MAX_ANSWER: usize = 4 * 1024 * 1024;
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
const ATTEMPTS: u32 = 4;
const TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Slack said no (`error` is Slack's code: `invalid_auth`, `channel_not_found`, …).
    #[error("slack {method}: {error} (HTTP {status})")]
    Api {
        method: &'static str,
        status: u16,
        error: String,
        retry_after: Option<Duration>,
    },
    #[error("slack {method}: {why}")]
    Transport { method: &'static str, why: String },
}

impl ApiError {
    pub fn is_auth(&self) -> bool {
        matches!(self, ApiError::Api { error, .. }
            if matches!(error.as_str(), "invalid_auth" | "not_authed" | "account_inactive"
                | "token_revoked" | "not_allowed_token_type"))
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct Identity {
    /// The bot's member id (`U…`), as mentions name it.
    pub user_id: String,
    #[serde(default)]
    pub user: String,
    pub bot_id: Option<String>,
}

#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    base: String,
    /// `Bearer xoxb-…` and `Bearer xapp-…`: secrets.
    bot: reqwest::header::HeaderValue,
    app: Option<reqwest::header::HeaderValue>,
}

fn bearer(token: &str) -> Result<reqwest::header::HeaderValue, ApiError> {
    let mut v =
        reqwest::header::HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            ApiError::Transport {
                method: "client",
                why: "a token has characters a header cannot carry".into(),
            }
        })?;
    v.set_sensitive(true);
    Ok(v)
}

impl Api {
    pub fn new(base_url: &str, bot_token: &str, app_token: Option<&str>) -> Result<Api, ApiError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ApiError::Transport {
                method: "client",
                why: e.to_string(),
            })?;
        Ok(Api {
            http,
            base: base_url.trim_end_matches('/').to_string(),
            bot: bearer(bot_token)?,
            app: app_token.map(bearer).transpose()?,
        })
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: &'static str,
        auth: &reqwest::header::HeaderValue,
        body: &Value,
    ) -> Result<T, ApiError> {
        let transport = |e: reqwest::Error| ApiError::Transport {
            method,
            why: ferroclaw_types::error_chain(&e),
        };
        let mut resp = self
            .http
            .post(format!("{}/{method}", self.base))
            .header(reqwest::header::AUTHORIZATION, auth.clone())
            .json(body)
            .timeout(TIMEOUT)
            .send()
            .await
            .map_err(transport)?;
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let bytes = crate::http::read_bounded(&mut resp, MAX_ANSWER)
            .await
            .map_err(|why| ApiError::Transport { method, why })?;
        let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if status == 200 && value["ok"] == true {
            return serde_json::from_value(value).map_err(|e| ApiError::Transport {
                method,
                why: format!("unexpected answer: {e}"),
            });
        }
        Err(ApiError::Api {
            method,
            status,
            error: value["error"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| format!("HTTP {status}")),
            retry_after: if status == 429 {
                retry_after.or(Some(Duration::from_secs(1)))
            } else {
                None
            },
        })
    }

    async fn call_patiently<T: DeserializeOwned>(
        &self,
        method: &'static str,
        body: &Value,
    ) -> Result<T, ApiError> {
        let mut attempt = 1;
        loop {
            match self.call(method, &self.bot, body).await {
                Err(ApiError::Api {
                    retry_after: Some(wait),
                    ..
                }) if attempt < ATTEMPTS && wait <= MAX_RETRY_AFTER => {
                    tracing::info!(
                        method,
                        wait_s = wait.as_secs(),
                        "slack: rate limited; waiting"
                    );
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    pub async fn auth_test(&self) -> Result<Identity, ApiError> {
        self.call("auth.test", &self.bot, &json!({})).await
    }

    /// A Socket Mode address to connect to (valid once, for a short while).
    pub async fn connections_open(&self) -> Result<String, ApiError> {
        let Some(app) = &self.app else {
            return Err(ApiError::Transport {
                method: "apps.connections.open",
                why: "no app-level token".into(),
            });
        };
        let v: Value = self.call("apps.connections.open", app, &json!({})).await?;
        v["url"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| ApiError::Transport {
                method: "apps.connections.open",
                why: "no url in the answer".into(),
            })
    }

    /// Posts `text` (mrkdwn when `mrkdwn`) in `channel`, in the thread `thread_ts` when
    /// given; the message's `ts`.
    pub async fn post(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        text: &str,
        mrkdwn: bool,
    ) -> Result<String, ApiError> {
        let mut body = json!({"channel": channel, "text": text, "mrkdwn": mrkdwn});
        if let Some(ts) = thread_ts {
            body["thread_ts"] = json!(ts);
        }
        let v: Value = self.call_patiently("chat.postMessage", &body).await?;
        Ok(v["ts"].as_str().unwrap_or_default().to_string())
    }

    pub async fn update(&self, channel: &str, ts: &str, text: &str) -> Result<(), ApiError> {
        let body = json!({"channel": channel, "ts": ts, "text": text});
        self.call_patiently::<Value>("chat.update", &body)
            .await
            .map(drop)
    }

    /// The direct-message channel with a member.
    pub async fn open_dm(&self, user: &str) -> Result<String, ApiError> {
        let v: Value = self
            .call_patiently("conversations.open", &json!({"users": user}))
            .await?;
        v["channel"]["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| ApiError::Transport {
                method: "conversations.open",
                why: "no channel in the answer".into(),
            })
    }
}
