//! The scheduler's state machine and the tasks it spawns.
//!
//! All bookkeeping lives behind one std `Mutex` that is only held for short, synchronous
//! sections (never across an await). Work that can take time runs in spawned tasks:
//! one per dispatched run, one per armed debounce window.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use ferroclaw_agent::{EventSink, RunError};
use ferroclaw_types::RunEvent;
use tokio::sync::{watch, Semaphore};
use tokio_util::sync::CancellationToken;

use super::clock::Clock;
use super::session::{Debounce, Entry, OutcomeTx, Session, Slot};
use super::{Lane, QueueMode, SchedulerConfig, SharedOutcome, Submission, SubmitError};

pub(super) struct Inner {
    pub cfg: SchedulerConfig,
    pub clock: Arc<dyn Clock>,
    lanes: HashMap<Lane, Arc<Semaphore>>,
    state: Mutex<State>,
    /// Number of live slots; `shutdown` waits for it to reach zero.
    live: watch::Sender<usize>,
}

#[derive(Default)]
struct State {
    /// Only sessions with something waiting or running; idle ones are forgotten.
    sessions: HashMap<String, Session>,
    next_seq: u64,
    next_slot: u64,
    live_slots: usize,
    shutting_down: bool,
}

/// A run about to be spawned. Spawning happens after the state lock is released: a task
/// dropped at once (runtime teardown) releases its slot, which takes the lock again.
struct Launch {
    key: String,
    slot: u64,
    batch: Vec<Entry>,
    cancel: CancellationToken,
}

impl Inner {
    pub fn new(cfg: SchedulerConfig, clock: Arc<dyn Clock>) -> Self {
        let lanes = [Lane::Main, Lane::Subagent, Lane::Delegate, Lane::Cron]
            .into_iter()
            .map(|lane| {
                // 0 would block the lane forever; the semaphore also has an upper bound.
                let n = cfg.lane_limit(lane).clamp(1, Semaphore::MAX_PERMITS);
                (lane, Arc::new(Semaphore::new(n)))
            })
            .collect();
        let (live, _) = watch::channel(0);
        Inner {
            cfg,
            clock,
            lanes,
            state: Mutex::new(State::default()),
            live,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock, but if something ever did, the counters
        // are still consistent enough to keep serving rather than wedge every session.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn submit(self: &Arc<Self>, s: Submission, tx: OutcomeTx) -> Result<(), SubmitError> {
        let Submission {
            run_id,
            lane,
            session_key: key,
            group,
            message,
            mode,
            mergeable,
            events,
            run,
        } = s;
        let mut dropped = None;
        let launches = {
            let mut st = self.lock();
            if st.shutting_down {
                return Err(SubmitError::ShuttingDown);
            }
            let seq = st.next_seq;
            st.next_seq += 1;
            let entry = Entry {
                seq,
                run_id,
                lane,
                message,
                mode,
                mergeable,
                events,
                run,
                tx,
            };
            let (direct_limit, group_limit) =
                (self.cfg.direct_concurrency, self.cfg.group_concurrency);
            let debounce_on = !self.cfg.debounce.is_zero() && mergeable;
            let sess = st
                .sessions
                .entry(key.clone())
                .or_insert_with(|| Session::new(group));
            sess.group = group;

            let free = sess.active.len() < sess.limit(direct_limit, group_limit);
            let would_start = sess.debounce.is_none() && sess.queue.is_empty() && free;
            // A message that starts a run right away never waits, so only the others
            // count against the queue's capacity.
            let waits = !would_start || debounce_on;
            if waits && sess.waiting() >= self.cfg.queue_capacity {
                let victim = match self.cfg.drop_policy {
                    super::DropPolicy::Old => sess.drop_oldest(),
                    super::DropPolicy::New => None,
                };
                match victim {
                    Some(v) => dropped = Some(v),
                    None => {
                        // Refused: do not leave a fresh, empty session behind.
                        if sess.is_idle() {
                            st.sessions.remove(&key);
                        }
                        return Err(SubmitError::QueueFull);
                    }
                }
            }
            if mode == QueueMode::Interrupt {
                sess.cancel_active();
            }
            // Dropping the only buffered message closes the window: open a fresh one.
            let would_start = sess.debounce.is_none() && sess.queue.is_empty() && free;

            if let Some(debounce) = sess.debounce.as_mut().filter(|_| mergeable) {
                debounce.entries.push(entry);
                debounce.generation += 1;
                debounce.timer.cancel();
                debounce.timer = CancellationToken::new();
                let (generation, timer) = (debounce.generation, debounce.timer.clone());
                self.arm_debounce(&key, generation, timer);
            } else if would_start && debounce_on {
                let timer = CancellationToken::new();
                sess.debounce = Some(Debounce {
                    entries: vec![entry],
                    generation: 0,
                    timer: timer.clone(),
                });
                self.arm_debounce(&key, 0, timer);
            } else if mode == QueueMode::Interrupt {
                // Ahead of everything queued; it starts once the aborted runs return.
                sess.queue.push_front(entry);
            } else {
                sess.queue.push_back(entry);
            }
            self.pump(&mut st, &key)
        };
        self.launch(launches);
        if let Some(v) = dropped {
            v.resolve(Err(SubmitError::Dropped));
        }
        Ok(())
    }

    /// Spawns the timer for the debounce window opened/restarted now.
    fn arm_debounce(self: &Arc<Self>, key: &str, generation: u64, timer: CancellationToken) {
        // Created here, not in the task, so the window is measured from this message.
        let sleep = self.clock.sleep(self.cfg.debounce);
        let weak = Arc::downgrade(self);
        let key = key.to_owned();
        tokio::spawn(async move {
            tokio::select! {
                _ = timer.cancelled() => {}
                _ = sleep => {
                    if let Some(inner) = weak.upgrade() {
                        inner.flush_debounce(&key, generation);
                    }
                }
            }
        });
    }

    fn flush_debounce(self: &Arc<Self>, key: &str, generation: u64) {
        let launches = {
            let mut st = self.lock();
            if st.shutting_down {
                return;
            }
            let Some(sess) = st.sessions.get_mut(key) else {
                return;
            };
            if sess.debounce.as_ref().map(|d| d.generation) != Some(generation) {
                return; // a newer message restarted the window, or /stopall cleared it
            }
            let Some(debounce) = sess.debounce.take() else {
                return;
            };
            let limit = sess.limit(self.cfg.direct_concurrency, self.cfg.group_concurrency);
            let mut launches = Vec::new();
            if sess.active.len() < limit {
                launches.push(Self::reserve_slot(&mut st, key, debounce.entries));
            } else if let Some(sess) = st.sessions.get_mut(key) {
                // Cannot happen while every message joins the open window, but never
                // lose messages: put them back at the head, in order.
                for e in debounce.entries.into_iter().rev() {
                    sess.queue.push_front(e);
                }
            }
            launches.extend(self.pump(&mut st, key));
            launches
        };
        self.launch(launches);
    }

    /// Reserves session slots for queued runs while the session has room, and forgets
    /// the session once idle. The caller spawns the returned runs after unlocking.
    fn pump(&self, st: &mut State, key: &str) -> Vec<Launch> {
        let mut launches = Vec::new();
        if !st.shutting_down {
            while let Some(sess) = st.sessions.get_mut(key) {
                let limit = sess.limit(self.cfg.direct_concurrency, self.cfg.group_concurrency);
                if sess.active.len() >= limit {
                    break;
                }
                let Some(batch) = sess.next_batch() else {
                    break;
                };
                launches.push(Self::reserve_slot(st, key, batch));
            }
        }
        if st.sessions.get(key).is_some_and(Session::is_idle) {
            st.sessions.remove(key);
        }
        self.publish_live(st.live_slots);
        launches
    }

    /// Books a slot for `batch` in the session (which must exist).
    fn reserve_slot(st: &mut State, key: &str, batch: Vec<Entry>) -> Launch {
        let slot = st.next_slot;
        st.next_slot += 1;
        let cancel = CancellationToken::new();
        if let Some(sess) = st.sessions.get_mut(key) {
            sess.active.push(Slot {
                id: slot,
                cancel: cancel.clone(),
                started: false,
                run_ids: batch.iter().map(|e| e.run_id.clone()).collect(),
                messages: batch.len(),
            });
            st.live_slots += 1;
        }
        Launch {
            key: key.to_owned(),
            slot,
            batch,
            cancel,
        }
    }

    /// Spawns reserved runs. Must be called without the state lock held.
    fn launch(self: &Arc<Self>, launches: Vec<Launch>) {
        for l in launches {
            let guard = SlotGuard {
                inner: Arc::clone(self),
                key: l.key,
                slot: l.slot,
            };
            match tokio::runtime::Handle::try_current() {
                Ok(handle) => {
                    handle.spawn(run_slot(guard, l.batch, l.cancel));
                }
                Err(_) => {
                    // Only reachable when a slot is released during runtime teardown.
                    drop(guard);
                    for e in l.batch {
                        e.resolve(Err(SubmitError::Failed("no tokio runtime".into())));
                    }
                }
            }
        }
    }

    fn publish_live(&self, n: usize) {
        self.live.send_if_modified(|v| {
            let changed = *v != n;
            *v = n;
            changed
        });
    }

    /// Removes a finished slot and lets the next queued run in.
    fn release(self: &Arc<Self>, key: &str, slot: u64) {
        let launches = {
            let mut st = self.lock();
            let removed = st.sessions.get_mut(key).and_then(|sess| {
                let pos = sess.active.iter().position(|s| s.id == slot)?;
                Some(sess.active.remove(pos))
            });
            if removed.is_some() {
                st.live_slots = st.live_slots.saturating_sub(1);
            }
            self.pump(&mut st, key)
        };
        self.launch(launches);
    }

    /// Marks the slot as executing unless it was cancelled while waiting for its lane.
    fn mark_started(&self, key: &str, slot: u64, cancel: &CancellationToken) -> bool {
        let mut st = self.lock();
        if cancel.is_cancelled() {
            return false;
        }
        let Some(s) = st
            .sessions
            .get_mut(key)
            .and_then(|sess| sess.active.iter_mut().find(|s| s.id == slot))
        else {
            return false;
        };
        s.started = true;
        true
    }

    fn is_shutting_down(&self) -> bool {
        self.lock().shutting_down
    }

    pub fn stop(&self, key: &str) -> usize {
        let st = self.lock();
        let Some(sess) = st.sessions.get(key) else {
            return 0;
        };
        // Skip runs already told to stop, so a repeated /stop reaches the next one.
        match sess.active.iter().find(|s| !s.cancel.is_cancelled()) {
            Some(slot) => {
                slot.cancel.cancel();
                1
            }
            None => 0,
        }
    }

    pub fn stop_all(&self, key: &str) -> usize {
        let (aborted, drained) = {
            let mut st = self.lock();
            let Some(sess) = st.sessions.get_mut(key) else {
                return 0;
            };
            let aborted = sess.cancel_active();
            let drained = sess.drain_waiting();
            if sess.is_idle() {
                st.sessions.remove(key);
            }
            (aborted, drained)
        };
        for e in drained {
            e.resolve(Err(SubmitError::Cancelled));
        }
        aborted
    }

    pub fn abort_run(&self, run_id: &str) -> bool {
        // `sessions` holds only busy sessions, so this scan is as long as the work in
        // flight, not as the number of sessions ever seen.
        let taken = {
            let mut st = self.lock();
            let mut taken = None;
            let mut emptied = None;
            for (key, sess) in st.sessions.iter_mut() {
                if let Some(slot) = sess
                    .active
                    .iter()
                    .find(|s| s.run_ids.iter().any(|r| r == run_id))
                {
                    let was_live = !slot.cancel.is_cancelled();
                    slot.cancel.cancel();
                    return was_live;
                }
                if let Some(entry) = sess.take_waiting(run_id) {
                    if sess.is_idle() {
                        emptied = Some(key.clone());
                    }
                    taken = Some(entry);
                    break;
                }
            }
            if let Some(key) = emptied {
                st.sessions.remove(&key);
            }
            taken
        };
        match taken {
            Some(entry) => {
                entry.resolve(Err(SubmitError::Cancelled));
                true
            }
            None => false,
        }
    }

    pub fn run_in_session(&self, key: &str, run_id: &str) -> bool {
        self.lock()
            .sessions
            .get(key)
            .is_some_and(|sess| sess.holds(run_id))
    }

    pub fn lane_available(&self, lane: Lane) -> usize {
        self.lanes
            .get(&lane)
            .map_or(0, |sem| sem.available_permits())
    }

    pub fn active_runs(&self) -> usize {
        let st = self.lock();
        st.sessions
            .values()
            .map(|s| s.active.iter().filter(|a| a.started).count())
            .sum()
    }

    pub fn queued(&self) -> usize {
        let st = self.lock();
        st.sessions
            .values()
            .map(|s| {
                let waiting_for_lane: usize = s
                    .active
                    .iter()
                    .filter(|a| !a.started)
                    .map(|a| a.messages)
                    .sum();
                s.waiting() + waiting_for_lane
            })
            .sum()
    }

    pub fn session_busy(&self, key: &str) -> bool {
        self.lock().sessions.contains_key(key)
    }

    pub async fn shutdown(&self, grace: std::time::Duration) {
        let drained = {
            let mut st = self.lock();
            st.shutting_down = true;
            let mut drained = Vec::new();
            for sess in st.sessions.values_mut() {
                drained.extend(sess.drain_waiting());
                // Dispatched but not started yet: these are still queued messages.
                for slot in sess.active.iter().filter(|s| !s.started) {
                    slot.cancel.cancel();
                }
            }
            st.sessions.retain(|_, s| !s.is_idle());
            drained
        };
        for e in drained {
            e.resolve(Err(SubmitError::ShuttingDown));
        }
        let mut live = self.live.subscribe();
        let grace_over = self.clock.sleep(grace);
        let ended = tokio::select! {
            r = live.wait_for(|n| *n == 0) => r.is_ok(),
            _ = grace_over => false,
        };
        if ended {
            return;
        }
        {
            let st = self.lock();
            for sess in st.sessions.values() {
                sess.cancel_active();
            }
        }
        // `wait_for` fails only if the sender is gone, which cannot happen while `self`
        // is borrowed; either way there is nothing left to wait for.
        let _ = live.wait_for(|n| *n == 0).await;
    }
}

/// Releases the session slot when the run task ends — also if the task is dropped
/// (runtime teardown), so a session is never left occupied by a run that is gone.
struct SlotGuard {
    inner: Arc<Inner>,
    key: String,
    slot: u64,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        self.inner.release(&self.key, self.slot);
    }
}

async fn run_slot(guard: SlotGuard, batch: Vec<Entry>, cancel: CancellationToken) {
    let inner = Arc::clone(&guard.inner);
    let Some(first) = batch.first() else {
        return;
    };
    let (lane, run, run_id) = (first.lane, Arc::clone(&first.run), first.run_id.clone());
    let sem = inner.lanes.get(&lane).cloned();

    // The lane permit is taken here, not at submit: queued messages hold no capacity.
    let permit = match sem {
        Some(sem) => tokio::select! {
            biased;
            _ = cancel.cancelled() => None,
            p = sem.acquire_owned() => p.ok(),
        },
        None => None,
    };
    if permit.is_none() || !inner.mark_started(&guard.key, guard.slot, &cancel) {
        let outcome = if inner.is_shutting_down() {
            Err(SubmitError::ShuttingDown)
        } else {
            Ok(Arc::new(Err(RunError::Aborted)))
        };
        drop(guard);
        for e in batch {
            e.resolve(outcome.clone());
        }
        return;
    }

    let message = batch
        .iter()
        .map(|e| e.message.as_str())
        .collect::<Vec<_>>()
        .join("\n\n");
    let sink: Arc<dyn EventSink> = if batch.len() == 1 {
        Arc::clone(&first.events)
    } else {
        Arc::new(FanoutSink {
            sinks: batch.iter().map(|e| Arc::clone(&e.events)).collect(),
        })
    };
    // A nested task so a panic (in the closure or its future) surfaces as a JoinError
    // here instead of unwinding through the bookkeeping.
    let joined = tokio::spawn(async move { run(run_id, message, sink, cancel).await }).await;
    drop(permit);
    drop(guard);
    let outcome: Result<SharedOutcome, SubmitError> = match joined {
        Ok(result) => Ok(Arc::new(result)),
        Err(e) if e.is_panic() => {
            tracing::error!("agent run panicked");
            Err(SubmitError::Failed("the run panicked".into()))
        }
        Err(_) => Err(SubmitError::Failed("the run task was cancelled".into())),
    };
    for e in batch {
        e.resolve(outcome.clone());
    }
}

/// Gives every merged submitter the run's events.
struct FanoutSink {
    sinks: Vec<Arc<dyn EventSink>>,
}

impl EventSink for FanoutSink {
    fn emit(&self, event: RunEvent) {
        if let Some((last, rest)) = self.sinks.split_last() {
            for s in rest {
                s.emit(event.clone());
            }
            last.emit(event);
        }
    }
}
