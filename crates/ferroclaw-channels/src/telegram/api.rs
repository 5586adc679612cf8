//! A thin client of the Telegram Bot API (`<base>/bot<token>/<method>`, JSON in, the
//! `{ok, result | error_code, description, parameters}` envelope out). Thin on purpose:
//! the bot needs six methods, and the client libraries bring their own HTTP stack and
//! hundreds of types. The token is part of every URL, so no error carries a URL.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

/// Answers larger than this are refused (100 updates with long texts stay well under).
const MAX_ANSWER: usize = 16 * 1024 * 1024;
/// Waits a 429's `retry_after` at most this long; longer is reported.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
const SEND_ATTEMPTS: u32 = 4;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The API said no.
    #[error("{platform} {method}: {description} ({code})")]
    Api {
        platform: &'static str,
        method: &'static str,
        code: u16,
        description: String,
        /// Seconds to wait, with 429.
        retry_after: Option<u64>,
    },
    #[error("{platform} {method}: {why}")]
    Transport {
        platform: &'static str,
        method: &'static str,
        why: String,
    },
}

impl ApiError {
    pub fn code(&self) -> Option<u16> {
        match self {
            ApiError::Api { code, .. } => Some(*code),
            ApiError::Transport { .. } => None,
        }
    }

    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ApiError::Api { retry_after, .. } => retry_after.map(Duration::from_secs),
            ApiError::Transport { .. } => None,
        }
    }

    /// The text had markup Telegram could not parse.
    pub fn is_markup(&self) -> bool {
        matches!(self, ApiError::Api { code: 400, description, .. }
            if description.contains("can't parse entities"))
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct User {
    pub id: i64,
    #[serde(default)]
    pub is_bot: bool,
    #[serde(default)]
    pub first_name: String,
    pub username: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Chat {
    pub id: i64,
    #[serde(rename = "type")]
    pub kind: String,
    pub title: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Entity {
    #[serde(rename = "type")]
    pub kind: String,
    pub offset: usize,
    pub length: usize,
    pub user: Option<User>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    pub message_id: i64,
    pub from: Option<User>,
    pub chat: Chat,
    pub text: Option<String>,
    pub caption: Option<String>,
    #[serde(default)]
    pub entities: Vec<Entity>,
    #[serde(default)]
    pub caption_entities: Vec<Entity>,
    pub reply_to_message: Option<Box<Message>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Update {
    pub update_id: i64,
    pub message: Option<Message>,
}

#[derive(Deserialize)]
struct Envelope {
    ok: bool,
    result: Option<Value>,
    error_code: Option<u16>,
    description: Option<String>,
    parameters: Option<Parameters>,
}

#[derive(Deserialize)]
struct Parameters {
    retry_after: Option<u64>,
}

#[derive(Clone)]
pub struct Api {
    /// Whose API this is (`telegram`, `zalo`: Zalo's Bot API has the same envelope).
    platform: &'static str,
    http: reqwest::Client,
    /// `<base>/bot<token>`: a secret.
    root: String,
}

impl Api {
    pub fn new(base_url: &str, token: &str) -> Result<Api, ApiError> {
        Api::for_platform("telegram", base_url, token)
    }

    pub fn for_platform(
        platform: &'static str,
        base_url: &str,
        token: &str,
    ) -> Result<Api, ApiError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ApiError::Transport {
                platform,
                method: "client",
                why: e.without_url().to_string(),
            })?;
        Ok(Api {
            platform,
            http,
            root: format!("{}/bot{token}", base_url.trim_end_matches('/')),
        })
    }

    /// One call, answered within `timeout`.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: &'static str,
        params: &Value,
        timeout: Duration,
    ) -> Result<T, ApiError> {
        let transport = |e: reqwest::Error| ApiError::Transport {
            platform: self.platform,
            method,
            why: ferroclaw_types::error_chain(&e.without_url()),
        };
        let mut resp = self
            .http
            .post(format!("{}/{method}", self.root))
            .json(params)
            .timeout(timeout)
            .send()
            .await
            .map_err(transport)?;
        let status = resp.status().as_u16();
        let body = crate::http::read_bounded(&mut resp, MAX_ANSWER)
            .await
            .map_err(|why| ApiError::Transport {
                platform: self.platform,
                method,
                why,
            })?;
        let envelope: Envelope =
            serde_json::from_slice(&body).map_err(|e| ApiError::Transport {
                platform: self.platform,
                method,
                why: format!("HTTP {status}, not a Bot API answer: {e}"),
            })?;
        if !envelope.ok {
            return Err(ApiError::Api {
                platform: self.platform,
                method,
                code: envelope.error_code.unwrap_or(status),
                description: envelope.description.unwrap_or_default(),
                retry_after: envelope.parameters.and_then(|p| p.retry_after),
            });
        }
        serde_json::from_value(envelope.result.unwrap_or(Value::Null)).map_err(|e| {
            ApiError::Transport {
                platform: self.platform,
                method,
                why: format!("unexpected result: {e}"),
            }
        })
    }

    /// A call that waits out a 429's `retry_after` (up to a minute) and tries again.
    pub async fn call_patiently<T: DeserializeOwned>(
        &self,
        method: &'static str,
        params: &Value,
    ) -> Result<T, ApiError> {
        let mut attempt = 1;
        loop {
            match self.call(method, params, Duration::from_secs(30)).await {
                Err(e) if attempt < SEND_ATTEMPTS => match e.retry_after() {
                    Some(wait) if wait <= MAX_RETRY_AFTER => {
                        tracing::info!(
                            method,
                            wait_s = wait.as_secs(),
                            "telegram: rate limited; waiting"
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

    pub async fn get_me(&self) -> Result<User, ApiError> {
        self.call("getMe", &json!({}), Duration::from_secs(30))
            .await
    }

    pub async fn delete_webhook(&self) -> Result<bool, ApiError> {
        self.call(
            "deleteWebhook",
            &json!({"drop_pending_updates": false}),
            Duration::from_secs(30),
        )
        .await
    }

    /// Long poll: waits up to `wait` for updates from `offset` on.
    pub async fn get_updates(
        &self,
        offset: Option<i64>,
        wait: Duration,
    ) -> Result<Vec<Update>, ApiError> {
        let mut params = json!({
            "timeout": wait.as_secs(),
            "limit": 100,
            "allowed_updates": ["message"],
        });
        if let Some(offset) = offset {
            params["offset"] = json!(offset);
        }
        // The server holds the request for `wait`; the client waits a little longer.
        self.call("getUpdates", &params, wait + Duration::from_secs(15))
            .await
    }

    pub async fn send_message(
        &self,
        chat_id: &str,
        text: &str,
        html: bool,
        reply_to: Option<&str>,
    ) -> Result<Message, ApiError> {
        let mut params = json!({"chat_id": chat_id, "text": text});
        if html {
            params["parse_mode"] = json!("HTML");
        }
        if let Some(id) = reply_to.and_then(|r| r.parse::<i64>().ok()) {
            params["reply_parameters"] =
                json!({"message_id": id, "allow_sending_without_reply": true});
        }
        self.call_patiently("sendMessage", &params).await
    }

    pub async fn edit_message_text(
        &self,
        chat_id: &str,
        message_id: &str,
        text: &str,
        html: bool,
    ) -> Result<(), ApiError> {
        let id = message_id.parse::<i64>().map_err(|_| ApiError::Transport {
            platform: self.platform,
            method: "editMessageText",
            why: format!("`{message_id}` is not a message id"),
        })?;
        let mut params = json!({"chat_id": chat_id, "message_id": id, "text": text});
        if html {
            params["parse_mode"] = json!("HTML");
        }
        match self
            .call_patiently::<Value>("editMessageText", &params)
            .await
        {
            // The text shown already is the text wanted.
            Err(ApiError::Api { description, .. })
                if description.contains("message is not modified") =>
            {
                Ok(())
            }
            other => other.map(drop),
        }
    }

    pub async fn send_typing(&self, chat_id: &str) -> Result<bool, ApiError> {
        self.call(
            "sendChatAction",
            &json!({"chat_id": chat_id, "action": "typing"}),
            Duration::from_secs(10),
        )
        .await
    }
}
