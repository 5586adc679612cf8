//! One session's queue: waiting messages, the debounce buffer and the active runs.
//! Pure data: every method runs under the scheduler's state lock and never awaits.

use std::collections::VecDeque;
use std::sync::Arc;

use ferroclaw_agent::EventSink;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::{Lane, QueueMode, RunFn, SharedOutcome, SubmitError};

pub(super) type OutcomeTx = oneshot::Sender<Result<SharedOutcome, SubmitError>>;

/// One submitted message, from `submit` until its ticket is resolved.
pub(super) struct Entry {
    /// Arrival order across the whole scheduler; `DropPolicy::Old` drops the smallest,
    /// which is not always the queue's front (an interrupt is queued at the front).
    pub seq: u64,
    pub run_id: String,
    pub lane: Lane,
    pub message: String,
    pub mode: QueueMode,
    pub mergeable: bool,
    pub events: Arc<dyn EventSink>,
    pub run: RunFn,
    pub tx: OutcomeTx,
}

impl Entry {
    pub fn resolve(self, outcome: Result<SharedOutcome, SubmitError>) {
        // The submitter may have stopped listening (client went away): nothing to do.
        let _ = self.tx.send(outcome);
    }
}

/// A run that holds one of the session's slots: dispatched, possibly still waiting for
/// its lane permit (`started == false`), or executing.
pub(super) struct Slot {
    pub id: u64,
    pub cancel: CancellationToken,
    pub started: bool,
    /// The ids of the messages this run carries (the run itself has the first).
    pub run_ids: Vec<String>,
    /// Messages carried by this run, for `queued()` while it waits for its lane.
    pub messages: usize,
}

/// Messages gathered while the debounce window is open; they become one run.
pub(super) struct Debounce {
    pub entries: Vec<Entry>,
    /// Bumped on every new message: only the timer armed by the newest message flushes.
    pub generation: u64,
    /// Cancels the armed timer task so restarted windows leave no stale tasks behind.
    pub timer: CancellationToken,
}

pub(super) struct Session {
    pub group: bool,
    pub queue: VecDeque<Entry>,
    /// Oldest first: `/stop` aborts `active[0]`'s run first.
    pub active: Vec<Slot>,
    pub debounce: Option<Debounce>,
}

impl Session {
    pub fn new(group: bool) -> Self {
        Session {
            group,
            queue: VecDeque::new(),
            active: Vec::new(),
            debounce: None,
        }
    }

    pub fn limit(&self, direct: usize, group: usize) -> usize {
        // A limit of 0 would strand every message forever; treat it as 1.
        if self.group { group } else { direct }.max(1)
    }

    /// Messages not yet carried by a run.
    pub fn waiting(&self) -> usize {
        self.queue.len() + self.debounce.as_ref().map_or(0, |d| d.entries.len())
    }

    pub fn is_idle(&self) -> bool {
        self.active.is_empty() && self.queue.is_empty() && self.debounce.is_none()
    }

    /// Removes the waiting message that arrived first (queue or debounce buffer).
    pub fn drop_oldest(&mut self) -> Option<Entry> {
        let in_queue = self
            .queue
            .iter()
            .enumerate()
            .min_by_key(|(_, e)| e.seq)
            .map(|(i, e)| (i, e.seq));
        let in_buffer = self.debounce.as_ref().and_then(|d| {
            d.entries
                .iter()
                .enumerate()
                .min_by_key(|(_, e)| e.seq)
                .map(|(i, e)| (i, e.seq))
        });
        match (in_queue, in_buffer) {
            (Some((qi, qs)), Some((_, bs))) if qs < bs => self.queue.remove(qi),
            (_, Some((bi, _))) => self.take_buffered(bi),
            (Some((qi, _)), None) => self.queue.remove(qi),
            (None, None) => None,
        }
    }

    /// The next run's messages: the queue's head, plus, when the head is a followup,
    /// every followup directly behind it (stopping at another mode keeps FIFO order).
    pub fn next_batch(&mut self) -> Option<Vec<Entry>> {
        let head = self.queue.pop_front()?;
        let merge = head.mode == QueueMode::Followup && head.mergeable;
        let mut batch = vec![head];
        if merge {
            while let Some(next) = self.queue.pop_front() {
                if next.mode != QueueMode::Followup || !next.mergeable {
                    self.queue.push_front(next);
                    break;
                }
                batch.push(next);
            }
        }
        Some(batch)
    }

    /// Takes every waiting message (queue, then debounce buffer) and disarms the timer.
    pub fn drain_waiting(&mut self) -> Vec<Entry> {
        let mut out: Vec<Entry> = self.queue.drain(..).collect();
        if let Some(debounce) = self.debounce.take() {
            debounce.timer.cancel();
            out.extend(debounce.entries);
        }
        out
    }

    /// Takes the waiting message with this id out of the queue or the debounce buffer.
    pub fn take_waiting(&mut self, run_id: &str) -> Option<Entry> {
        if let Some(i) = self.queue.iter().position(|e| e.run_id == run_id) {
            return self.queue.remove(i);
        }
        let i = self
            .debounce
            .as_ref()?
            .entries
            .iter()
            .position(|e| e.run_id == run_id)?;
        self.take_buffered(i)
    }

    /// Takes entry `i` out of the debounce buffer; an emptied window is closed.
    fn take_buffered(&mut self, i: usize) -> Option<Entry> {
        let debounce = self.debounce.as_mut()?;
        let entry = debounce.entries.remove(i);
        if debounce.entries.is_empty() {
            debounce.timer.cancel();
            self.debounce = None;
        }
        Some(entry)
    }

    /// Whether a message with this id is waiting or carried by a run.
    pub fn holds(&self, run_id: &str) -> bool {
        self.queue.iter().any(|e| e.run_id == run_id)
            || self
                .debounce
                .as_ref()
                .is_some_and(|d| d.entries.iter().any(|e| e.run_id == run_id))
            || self
                .active
                .iter()
                .any(|s| s.run_ids.iter().any(|r| r == run_id))
    }

    /// Cancels every run not already cancelled; returns how many.
    pub fn cancel_active(&self) -> usize {
        let mut n = 0;
        for slot in &self.active {
            if !slot.cancel.is_cancelled() {
                slot.cancel.cancel();
                n += 1;
            }
        }
        n
    }
}
