//! Token-bucket rate limit per user or IP: `gateway.rate_limit_rpm` requests per minute
//! with a burst of 5 (0 turns it off). HTTP answers 429 with `Retry-After`; WebSocket
//! answers `RESOURCE_EXHAUSTED` with `retryAfterMs`.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

const BURST: u32 = 5;

pub struct Limiter {
    inner: Option<DefaultKeyedRateLimiter<String>>,
    clock: DefaultClock,
}

impl Limiter {
    pub fn new(rpm: u32) -> Self {
        let inner = NonZeroU32::new(rpm).map(|rpm| {
            let burst = NonZeroU32::new(BURST).unwrap_or(NonZeroU32::MIN);
            RateLimiter::keyed(Quota::per_minute(rpm).allow_burst(burst))
        });
        Limiter {
            inner,
            clock: DefaultClock::default(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// `Err(wait)` when `key` is over its budget.
    pub fn check(&self, key: &str) -> Result<(), Duration> {
        let Some(lim) = &self.inner else {
            return Ok(());
        };
        lim.check_key(&key.to_string())
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }

    /// Forgets keys whose bucket is full again, so idle clients cost no memory.
    pub fn cleanup(&self) {
        if let Some(lim) = &self.inner {
            lim.retain_recent();
            lim.shrink_to_fit();
        }
    }
}

/// Whole seconds for `Retry-After` (never 0: a client told "0" would retry at once).
pub fn retry_after_secs(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0).max(u64::from(wait.is_zero()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_refusal_per_key() {
        let lim = Limiter::new(60);
        for _ in 0..BURST {
            assert!(lim.check("a").is_ok());
        }
        let wait = lim.check("a").expect_err("sixth request is limited");
        assert!(wait <= Duration::from_secs(1));
        assert!(lim.check("b").is_ok(), "other keys have their own bucket");
        assert!(Limiter::new(0).check("a").is_ok());
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(2)), 2);
        assert_eq!(retry_after_secs(Duration::from_millis(2500)), 3);
    }
}
