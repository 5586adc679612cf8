//! Per-session tool rate limit: at most N tool calls per session in any
//! sliding window (one hour by default).
//!
//! A runaway loop, or a prompt-injected model hammering `web_fetch` or
//! `exec`, should stop costing money and side effects long before the
//! iteration cap of many runs adds up. The window slides (a log of call times
//! per session, not fixed buckets), so there is no burst of 2N at a bucket
//! boundary, and a refusal can say exactly when the next call will be allowed.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Sessions tracked before idle ones are swept.
const SWEEP_THRESHOLD: usize = 4096;

/// Sliding-window limiter keyed by session.
#[derive(Debug)]
pub struct RateLimiter {
    limit: u32,
    window: Duration,
    calls: Mutex<HashMap<String, VecDeque<Instant>>>,
}

/// A refused call: how long until the oldest call in the window expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimited {
    pub limit: u32,
    pub window: Duration,
    pub retry_after: Duration,
}

impl std::fmt::Display for RateLimited {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tool rate limit reached: this session already made {} tool calls in the last {}; retry in {}",
            self.limit,
            human(self.window),
            human(self.retry_after),
        )
    }
}

fn human(d: Duration) -> String {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    match (secs, secs / 3600, secs % 3600) {
        (0..=119, ..) => format!("{secs} s"),
        (_, hours, 0) => format!("{hours} h"),
        _ => format!("{} min {} s", secs / 60, secs % 60),
    }
}

impl RateLimiter {
    /// `limit_per_hour` calls per session per hour; 0 means unlimited.
    pub fn per_hour(limit_per_hour: u32) -> Self {
        Self::new(limit_per_hour, Duration::from_secs(3600))
    }

    /// `limit` calls per `window`; a limit of 0 means unlimited.
    pub fn new(limit: u32, window: Duration) -> Self {
        Self {
            limit,
            window,
            calls: Mutex::new(HashMap::new()),
        }
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Records a call for `session` now, or refuses it.
    pub fn try_acquire(&self, session: &str) -> Result<(), RateLimited> {
        self.try_acquire_at(session, Instant::now())
    }

    /// [`Self::try_acquire`] at an explicit time, so tests need no sleeping.
    /// Refused calls are not recorded (they did nothing).
    pub fn try_acquire_at(&self, session: &str, now: Instant) -> Result<(), RateLimited> {
        if self.limit == 0 {
            return Ok(());
        }
        // A poisoned lock only means another caller panicked mid-update of a
        // counter; the data is still a valid log of times.
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        if calls.len() > SWEEP_THRESHOLD {
            let window = self.window;
            calls.retain(|_, log| {
                log.back()
                    .is_some_and(|t| now.saturating_duration_since(*t) < window)
            });
        }
        let log = calls.entry(session.to_string()).or_default();
        while log
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= self.window)
        {
            log.pop_front();
        }
        if log.len() >= self.limit as usize {
            let oldest = log.front().copied().unwrap_or(now);
            let retry_after = (oldest + self.window).saturating_duration_since(now);
            return Err(RateLimited {
                limit: self.limit,
                window: self.window,
                retry_after,
            });
        }
        log.push_back(now);
        Ok(())
    }

    /// Calls `session` may still make at `now`.
    pub fn remaining_at(&self, session: &str, now: Instant) -> u32 {
        if self.limit == 0 {
            return u32::MAX;
        }
        let calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        let used = calls.get(session).map_or(0, |log| {
            log.iter()
                .filter(|t| now.saturating_duration_since(**t) < self.window)
                .count()
        });
        self.limit.saturating_sub(used as u32)
    }

    /// Drops the history of a deleted session.
    pub fn forget(&self, session: &str) {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(session);
    }
}
