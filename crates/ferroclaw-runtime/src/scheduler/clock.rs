//! The scheduler's only source of time (debounce windows, shutdown grace).
//!
//! It is a trait so tests can drive time by hand: the workspace builds tokio without
//! `test-util`, so `tokio::time::pause()` is not available to this crate's tests.

use std::time::Duration;

use futures_util::future::BoxFuture;

pub trait Clock: Send + Sync + 'static {
    /// A future that completes `d` after THIS CALL (not after its first poll): the
    /// scheduler creates timers while holding its state lock and polls them later, and a
    /// window must be measured from the message that opened it.
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()>;
}

/// Real time, via the tokio timer (`tokio::time::sleep` fixes its deadline at creation).
#[derive(Debug, Default, Clone, Copy)]
pub struct TokioClock;

impl Clock for TokioClock {
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(d))
    }
}
