//! Retrying one provider/model: exponential back-off with full jitter, `Retry-After`
//! honoured, never after the first streamed delta (the caller has already shown it).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::http_error::annotate;
use crate::{ChatRequest, ChatResponse, DeltaSink, Provider, ProviderError, StreamDelta};

/// How hard to retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts, the first included (so 3 = up to 2 retries); 0 acts as 1.
    pub attempts: u32,
    /// Back-off cap of the first retry; doubles per retry.
    pub base_delay: Duration,
    pub max_delay: Duration,
    /// A `Retry-After` longer than this is not waited for: the error surfaces so that
    /// a fallback model can answer instead.
    pub max_retry_after: Duration,
    /// Exact delays before retry 1, 2, … (the last repeats) instead of the jittered
    /// exponential back-off: for deployments that document their schedule (the executor's
    /// `retry_backoff_ms`). Empty: jittered back-off.
    pub schedule: Vec<Duration>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 3,
            base_delay: Duration::from_millis(300),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
            schedule: Vec::new(),
        }
    }
}

impl RetryPolicy {
    /// Full jitter: uniformly in `[0, min(max_delay, base_delay * 2^(retry-1))]`, which
    /// spreads out clients that failed together. `retry` counts from 1.
    pub fn backoff(&self, retry: u32) -> Duration {
        if let Some(last) = self.schedule.last() {
            let i = usize::try_from(retry.saturating_sub(1)).unwrap_or(usize::MAX);
            return self.schedule.get(i).copied().unwrap_or(*last);
        }
        let factor = 1u32 << retry.saturating_sub(1).min(20);
        let cap = self.base_delay.saturating_mul(factor).min(self.max_delay);
        let nanos = u64::try_from(cap.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(fastrand::u64(0..=nanos))
    }
}

/// Wraps a provider with retries; counts them for status and tests.
pub struct RetryingProvider {
    inner: Arc<dyn Provider>,
    policy: RetryPolicy,
    retries: AtomicU64,
}

impl RetryingProvider {
    pub fn new(inner: Arc<dyn Provider>, policy: RetryPolicy) -> Self {
        Self {
            inner,
            policy,
            retries: AtomicU64::new(0),
        }
    }

    /// Retries performed so far, over all calls.
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }
}

/// Forwards deltas and remembers whether any got through, so that we never retry a
/// stream the caller has partly seen, even if the inner provider forgot to say so.
struct TrackingSink<'a> {
    inner: &'a dyn DeltaSink,
    used: AtomicBool,
}

impl DeltaSink for TrackingSink<'_> {
    fn delta(&self, delta: StreamDelta) {
        self.used.store(true, Ordering::Relaxed);
        self.inner.delta(delta);
    }
}

#[async_trait]
impl Provider for RetryingProvider {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn chat(
        &self,
        req: &ChatRequest,
        sink: &dyn DeltaSink,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, ProviderError> {
        let attempts = self.policy.attempts.max(1);
        let tracking = TrackingSink {
            inner: sink,
            used: AtomicBool::new(false),
        };
        let mut attempt = 1;
        loop {
            let mut err = match self.inner.chat(req, &tracking, cancel).await {
                Ok(r) => return Ok(r),
                Err(e) => e,
            };
            if tracking.used.load(Ordering::Relaxed) {
                err.streamed = true;
            }
            if attempt >= attempts || !err.retryable() || cancel.is_cancelled() {
                return Err(err);
            }
            let delay = match err.retry_after {
                Some(ra) if ra > self.policy.max_retry_after => return Err(err),
                Some(ra) => ra,
                None => self.policy.backoff(attempt),
            };
            tracing::warn!(
                provider = %err.provider,
                model = %err.model,
                status = ?err.status,
                kind = ?err.kind,
                attempt,
                delay_ms = delay.as_millis() as u64,
                error = %err.message,
                "provider call failed, retrying"
            );
            self.retries.fetch_add(1, Ordering::Relaxed);
            // Straight to the caller's sink: a retry notice is not part of the answer.
            sink.delta(StreamDelta::Retrying {
                attempt,
                delay,
                status: err.status,
                error: err.to_string(),
            });
            tokio::select! {
                biased;
                _ = cancel.cancelled() => {
                    return Err(annotate(ProviderError::aborted(), self.inner.name(), &req.model));
                }
                _ = tokio::time::sleep(delay) => {}
            }
            attempt += 1;
        }
    }

    async fn list_models(&self) -> Result<Vec<String>, ProviderError> {
        self.inner.list_models().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_capped_and_grows() {
        let p = RetryPolicy {
            attempts: 5,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(250),
            max_retry_after: Duration::from_secs(1),
            schedule: Vec::new(),
        };
        for _ in 0..200 {
            assert!(p.backoff(1) <= Duration::from_millis(100));
            assert!(p.backoff(2) <= Duration::from_millis(200));
            assert!(p.backoff(3) <= Duration::from_millis(250));
            assert!(p.backoff(40) <= Duration::from_millis(250));
        }
    }

    #[test]
    fn a_schedule_is_followed_exactly() {
        let p = RetryPolicy {
            schedule: vec![Duration::from_millis(10), Duration::from_millis(5)],
            ..RetryPolicy::default()
        };
        assert_eq!(p.backoff(1), Duration::from_millis(10));
        assert_eq!(p.backoff(2), Duration::from_millis(5));
        assert_eq!(p.backoff(9), Duration::from_millis(5));
    }
}
