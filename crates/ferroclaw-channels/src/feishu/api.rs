//! A thin client of the Feishu / Lark Open API: the tenant access token (fetched with the
//! app id and secret, kept until shortly before it expires, fetched again when the API
//! calls it invalid), the bot's own identity, and message cards sent, sent as replies
//! and updated. `{"code": 0, ..}` is success; rate limits (HTTP 429 or code 99991400) are
//! waited out for `x-ogw-ratelimit-reset`.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};
use tokio::sync::Mutex;

const MAX_ANSWER: usize = 4 * 1024 * 1024;
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
const ATTEMPTS: u32 = 4;
const TIMEOUT: Duration = Duration::from_secs(30);
/// Codes that say the tenant token is not (or no longer) valid.
const TOKEN_INVALID: [i64; 3] = [99991661, 99991663, 99991668];
const RATE_LIMITED: i64 = 99991400;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("feishu {what}: {msg} (HTTP {status}, code {code})")]
    Api {
        what: &'static str,
        status: u16,
        code: i64,
        msg: String,
        retry_after: Option<Duration>,
    },
    #[error("feishu {what}: {why}")]
    Transport { what: &'static str, why: String },
}

pub struct Api {
    http: reqwest::Client,
    base: String,
    app_id: String,
    app_secret: String,
    token: Mutex<Option<(String, Instant)>>,
}

impl Api {
    pub fn new(base_url: &str, app_id: &str, app_secret: &str) -> Result<Api, ApiError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ApiError::Transport {
                what: "client",
                why: e.to_string(),
            })?;
        Ok(Api {
            http,
            base: base_url.trim_end_matches('/').to_string(),
            app_id: app_id.to_string(),
            app_secret: app_secret.to_string(),
            token: Mutex::new(None),
        })
    }

    async fn raw(
        &self,
        what: &'static str,
        method: Method,
        path: &str,
        bearer: Option<&str>,
        body: Option<&Value>,
    ) -> Result<Value, ApiError> {
        let transport = |e: reqwest::Error| ApiError::Transport {
            what,
            why: ferroclaw_types::error_chain(&e),
        };
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .timeout(TIMEOUT);
        if let Some(token) = bearer {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        let mut resp = req.send().await.map_err(transport)?;
        let status = resp.status().as_u16();
        let reset = resp
            .headers()
            .get("x-ogw-ratelimit-reset")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let bytes = crate::http::read_bounded(&mut resp, MAX_ANSWER)
            .await
            .map_err(|why| ApiError::Transport { what, why })?;
        let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let code = v["code"].as_i64().unwrap_or(-1);
        if status == 200 && code == 0 {
            return Ok(v);
        }
        let limited = status == 429 || code == RATE_LIMITED;
        Err(ApiError::Api {
            what,
            status,
            code,
            msg: v["msg"]
                .as_str()
                .unwrap_or("not a Feishu answer")
                .to_string(),
            retry_after: limited.then(|| reset.unwrap_or(Duration::from_secs(1))),
        })
    }

    /// The tenant access token, fetched anew when missing or about to expire.
    async fn tenant_token(&self, fresh: bool) -> Result<String, ApiError> {
        let mut cached = self.token.lock().await;
        if let Some((token, until)) = cached.as_ref() {
            if !fresh && Instant::now() < *until {
                return Ok(token.clone());
            }
        }
        let v = self
            .raw(
                "tenant token",
                Method::POST,
                "/open-apis/auth/v3/tenant_access_token/internal",
                None,
                Some(&json!({"app_id": self.app_id, "app_secret": self.app_secret})),
            )
            .await?;
        let token = v["tenant_access_token"]
            .as_str()
            .ok_or_else(|| ApiError::Transport {
                what: "tenant token",
                why: "no token in the answer".into(),
            })?
            .to_string();
        // Renewed a few minutes early; Feishu's tokens last two hours.
        let secs = v["expire"]
            .as_u64()
            .unwrap_or(7200)
            .saturating_sub(300)
            .max(60);
        *cached = Some((token.clone(), Instant::now() + Duration::from_secs(secs)));
        Ok(token)
    }

    /// A call with the tenant token: a rejected token is fetched again once, a rate
    /// limit waited out.
    async fn call(
        &self,
        what: &'static str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ApiError> {
        let mut attempt = 1;
        let mut fresh = false;
        loop {
            let token = self.tenant_token(fresh).await?;
            match self
                .raw(what, method.clone(), path, Some(&token), body)
                .await
            {
                Err(ApiError::Api { code, .. }) if TOKEN_INVALID.contains(&code) && !fresh => {
                    fresh = true;
                }
                Err(ApiError::Api {
                    retry_after: Some(wait),
                    ..
                }) if attempt < ATTEMPTS && wait <= MAX_RETRY_AFTER => {
                    tracing::info!(
                        what,
                        wait_s = wait.as_secs(),
                        "feishu: rate limited; waiting"
                    );
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// The bot's open id (mentions name it) and name.
    pub async fn bot_info(&self) -> Result<(String, String), ApiError> {
        let v = self
            .call("bot info", Method::GET, "/open-apis/bot/v3/info", None)
            .await?;
        let bot = &v["bot"];
        Ok((
            bot["open_id"].as_str().unwrap_or_default().to_string(),
            bot["app_name"].as_str().unwrap_or_default().to_string(),
        ))
    }

    /// Sends `card` to a chat (`oc_…`) or a user (`ou_…`), or as a reply to `reply_to`;
    /// the message id.
    pub async fn send_card(
        &self,
        to: &str,
        card: &Value,
        reply_to: Option<&str>,
    ) -> Result<String, ApiError> {
        let content = card.to_string();
        let v = match reply_to {
            Some(id) => {
                let path = format!("/open-apis/im/v1/messages/{}/reply", segment(id)?);
                let body = json!({"msg_type": "interactive", "content": content});
                self.call("reply", Method::POST, &path, Some(&body)).await?
            }
            None => {
                let kind = if to.starts_with("ou_") {
                    "open_id"
                } else {
                    "chat_id"
                };
                let path = format!("/open-apis/im/v1/messages?receive_id_type={kind}");
                let body = json!({"receive_id": to, "msg_type": "interactive", "content": content});
                self.call("send", Method::POST, &path, Some(&body)).await?
            }
        };
        Ok(v["data"]["message_id"]
            .as_str()
            .unwrap_or_default()
            .to_string())
    }

    pub async fn update_card(&self, message_id: &str, card: &Value) -> Result<(), ApiError> {
        let path = format!("/open-apis/im/v1/messages/{}", segment(message_id)?);
        let body = json!({"content": card.to_string()});
        self.call("update", Method::PATCH, &path, Some(&body))
            .await
            .map(drop)
    }
}

/// Feishu ids are `om_…`-style tokens; anything else in a path would change the request.
fn segment(id: &str) -> Result<&str, ApiError> {
    if !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        Ok(id)
    } else {
        Err(ApiError::Transport {
            what: "request",
            why: format!("`{id}` is not a Feishu id"),
        })
    }
}
