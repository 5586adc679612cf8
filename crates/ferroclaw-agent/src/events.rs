use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ferroclaw_tools::Progress;
use ferroclaw_types::{EventKind, RunEvent};

/// Where a run's events go (a CLI printer, a WebSocket fan-out, a test collector).
/// Called inline from the run; implementations must not block.
pub trait EventSink: Send + Sync {
    fn emit(&self, event: RunEvent);
}

impl<F: Fn(RunEvent) + Send + Sync> EventSink for F {
    fn emit(&self, event: RunEvent) {
        self(event)
    }
}

/// Drops every event.
pub struct NullSink;
impl EventSink for NullSink {
    fn emit(&self, _: RunEvent) {}
}

/// Stamps events with the run id and a sequence number that only increases, and counts
/// each as progress of the run. Tools run concurrently, so the counter is atomic rather
/// than `&mut`.
pub(crate) struct Emitter {
    run_id: String,
    seq: AtomicU64,
    sink: Arc<dyn EventSink>,
    progress: Progress,
}

impl Emitter {
    pub(crate) fn new(run_id: String, sink: Arc<dyn EventSink>, progress: Progress) -> Self {
        Self {
            run_id,
            seq: AtomicU64::new(0),
            sink,
            progress,
        }
    }

    pub(crate) fn emit(&self, kind: EventKind) {
        self.progress.tick();
        let seq = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        self.sink.emit(RunEvent {
            run_id: self.run_id.clone(),
            seq,
            kind,
        });
    }
}
