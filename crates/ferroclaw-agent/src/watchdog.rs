//! The guards that end a run early: its time-out and its stall watchdog. Both are one
//! task beside the run that cancels the run's token; [`Cause`] tells afterwards which of
//! them fired (or neither: the caller aborted).
//!
//! The watchdog reads the run's [`Progress`] clock: every stream delta and run event
//! ticks it, a command writing output ticks it, and a wait on a person or another run
//! holds it. A run that keeps progressing is never cut, however long it takes; one in
//! which nothing moved for the stall time is.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ferroclaw_tools::Progress;
use tokio_util::sync::CancellationToken;

/// Why the run's token was cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interrupt {
    Aborted,
    TimedOut,
    Stalled,
}

/// Set once by whichever guard fires first.
#[derive(Clone, Default)]
pub(crate) struct Cause(Arc<AtomicU8>);

impl Cause {
    const NONE: u8 = 0;
    const TIMED_OUT: u8 = 1;
    const STALLED: u8 = 2;

    fn claim(&self, cause: u8) -> bool {
        self.0
            .compare_exchange(Self::NONE, cause, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    pub fn get(&self) -> Interrupt {
        match self.0.load(Ordering::SeqCst) {
            Self::TIMED_OUT => Interrupt::TimedOut,
            Self::STALLED => Interrupt::Stalled,
            _ => Interrupt::Aborted,
        }
    }
}

/// What the run is doing, for the stall report.
#[derive(Clone, Default)]
pub(crate) struct Phase(Arc<AtomicU8>);

impl Phase {
    pub fn set_tools(&self, on: bool) {
        self.0.store(u8::from(on), Ordering::Relaxed);
    }

    pub fn name(&self) -> &'static str {
        if self.0.load(Ordering::Relaxed) == 1 {
            "tools"
        } else {
            "model"
        }
    }
}

/// Cancels `token` when `limit` has passed.
pub(crate) fn spawn_timeout(limit: Duration, token: CancellationToken, cause: Cause) -> Guard {
    Guard(tokio::spawn(async move {
        tokio::select! {
            _ = tokio::time::sleep(limit) => {
                if cause.claim(Cause::TIMED_OUT) {
                    token.cancel();
                }
            }
            _ = token.cancelled() => {}
        }
    }))
}

/// Cancels `token` once `progress` has stood still for `stall` while not held, after
/// telling `on_stall` how long it stood still.
pub(crate) fn spawn_watchdog(
    stall: Duration,
    progress: Progress,
    token: CancellationToken,
    cause: Cause,
    on_stall: impl FnOnce(Duration) + Send + 'static,
) -> Guard {
    Guard(tokio::spawn(async move {
        loop {
            let idle = progress.idle();
            let wait = if progress.is_held() {
                stall
            } else if idle >= stall {
                if cause.claim(Cause::STALLED) {
                    progress.set_interrupted(format!(
                        "the run stalled: nothing progressed for {} s",
                        idle.as_secs()
                    ));
                    on_stall(idle);
                    token.cancel();
                }
                return;
            } else {
                stall - idle
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = token.cancelled() => return,
            }
        }
    }))
}

/// Stops its task when dropped (the run ended).
pub(crate) struct Guard(tokio::task::JoinHandle<()>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.abort();
    }
}
