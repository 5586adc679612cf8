//! The progress clock of one run, read by its stall watchdog: the run ticks it on every
//! stream delta and event, tools tick it when their work shows signs of life (a command
//! writing output), and a wait that is not the run's own doing (a person deciding on an
//! approval, another run) holds it, so that wait is never taken for a stall.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Cheap to clone; every clone reads and moves the same clock.
#[derive(Clone)]
pub struct Progress {
    inner: Arc<Clock>,
}

struct Clock {
    origin: Instant,
    /// Milliseconds after `origin` of the last sign of progress.
    last_ms: AtomicU64,
    holds: AtomicUsize,
    /// Why the run was interrupted, when something other than a plain abort ended it;
    /// tools cut short report it in their result.
    interrupted: OnceLock<String>,
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("idle", &self.idle())
            .field("held", &self.is_held())
            .finish()
    }
}

impl Progress {
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Clock {
                origin: Instant::now(),
                last_ms: AtomicU64::new(0),
                holds: AtomicUsize::new(0),
                interrupted: OnceLock::new(),
            }),
        }
    }

    /// Something happened: the run is alive.
    pub fn tick(&self) {
        let now = self.inner.origin.elapsed().as_millis() as u64;
        self.inner.last_ms.fetch_max(now, Ordering::Relaxed);
    }

    /// Time since the last tick (or since the clock was made).
    pub fn idle(&self) -> Duration {
        let now = self.inner.origin.elapsed().as_millis() as u64;
        let last = self.inner.last_ms.load(Ordering::Relaxed);
        Duration::from_millis(now.saturating_sub(last))
    }

    /// While the returned guard lives the run is waiting on someone else, not stalled.
    /// Dropping it counts as progress.
    pub fn hold(&self) -> ProgressHold {
        self.inner.holds.fetch_add(1, Ordering::SeqCst);
        ProgressHold {
            progress: self.clone(),
        }
    }

    pub fn is_held(&self) -> bool {
        self.inner.holds.load(Ordering::SeqCst) > 0
    }

    /// Records why the run is being interrupted (the first reason wins).
    pub fn set_interrupted(&self, why: String) {
        let _ = self.inner.interrupted.set(why);
    }

    pub fn interrupted(&self) -> Option<&str> {
        self.inner.interrupted.get().map(String::as_str)
    }
}

pub struct ProgressHold {
    progress: Progress,
}

impl Drop for ProgressHold {
    fn drop(&mut self) {
        self.progress.tick();
        self.progress.inner.holds.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_is_counted_and_its_end_is_progress() {
        let p = Progress::new();
        assert!(!p.is_held());
        let h = p.hold();
        let h2 = p.clone().hold();
        assert!(p.is_held());
        drop(h);
        assert!(p.is_held(), "one hold is still alive");
        drop(h2);
        assert!(!p.is_held());
        assert!(p.idle() < Duration::from_secs(1));
    }

    #[test]
    fn the_first_interruption_reason_wins() {
        let p = Progress::new();
        assert_eq!(p.interrupted(), None);
        p.set_interrupted("stalled".into());
        p.clone().set_interrupted("aborted".into());
        assert_eq!(p.interrupted(), Some("stalled"));
    }
}
