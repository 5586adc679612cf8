use std::time::Duration;

/// Classifies a provider failure; retry and fallback decisions are made on this alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// 429.
    RateLimited,
    /// 401/403.
    Auth,
    /// 500-504.
    Server,
    /// Connection refused/reset, DNS.
    Network,
    Timeout,
    /// Any other 4xx.
    BadRequest,
    /// The prompt does not fit the model's context window.
    ContextOverflow,
    /// A stream ended before its terminal event, or carried an unparseable event.
    BrokenStream,
    /// The upstream answered 2xx with a body we cannot parse.
    Malformed,
    Aborted,
    NotFound,
    /// The reply passed [`crate::ChatRequest::max_reply_bytes`] and was discarded. Never
    /// retried nor fallen back on: the server is up and answered; asking again (or another
    /// model) with the same prompt invites the same runaway reply and its cost, and a
    /// hostile upstream would simply repeat it. The caller decides what to tell the user.
    ReplyTooLarge,
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", self.describe())]
pub struct ProviderError {
    pub kind: ErrorKind,
    pub status: Option<u16>,
    pub message: String,
    pub retry_after: Option<Duration>,
    pub provider: String,
    pub model: String,
    /// True once any delta was delivered: a stream is only retried before that.
    pub streamed: bool,
}

impl ProviderError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            status: None,
            message: message.into(),
            retry_after: None,
            provider: String::new(),
            model: String::new(),
            streamed: false,
        }
    }

    pub fn aborted() -> Self {
        Self::new(ErrorKind::Aborted, "aborted")
    }

    /// The reply went past `limit` bytes; reading stopped there.
    pub fn reply_too_large(limit: usize) -> Self {
        Self::new(
            ErrorKind::ReplyTooLarge,
            format!("the model's reply exceeded {limit} bytes; it was discarded"),
        )
    }

    /// Transient faults are retried, but a stream only before its first delta: after
    /// that the caller has already shown text that a retry would repeat.
    pub fn retryable(&self) -> bool {
        !self.streamed
            && matches!(
                self.kind,
                ErrorKind::RateLimited
                    | ErrorKind::Server
                    | ErrorKind::Network
                    | ErrorKind::Timeout
                    | ErrorKind::BrokenStream
            )
    }

    /// Whether the fallback chain should move on to the next model.
    pub fn should_fall_back(&self) -> bool {
        !self.streamed
            && matches!(
                self.kind,
                ErrorKind::RateLimited
                    | ErrorKind::Auth
                    | ErrorKind::Server
                    | ErrorKind::Network
                    | ErrorKind::Timeout
                    | ErrorKind::NotFound
            )
    }

    fn describe(&self) -> String {
        let mut s = String::new();
        if !self.provider.is_empty() {
            s.push_str(&self.provider);
            if !self.model.is_empty() {
                s.push('/');
                s.push_str(&self.model);
            }
            s.push_str(": ");
        }
        if let Some(status) = self.status {
            s.push_str(&format!("HTTP {status}: "));
        }
        s.push_str(&self.message);
        s
    }
}
