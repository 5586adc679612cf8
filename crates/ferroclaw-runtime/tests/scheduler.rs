//! Scheduler behaviour, driven by a fake `RunFn` the test controls through channels and
//! a hand-driven clock (the crate's tokio has no `test-util`, so no paused clock).
//! Order is asserted from what the fake records and from scheduler state, never timing.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferroclaw_agent::{EventSink, RunError, RunOutput};
use ferroclaw_runtime::scheduler::{
    Clock, DropPolicy, Lane, QueueMode, RunFn, Scheduler, SchedulerConfig, SharedOutcome,
    Submission, SubmitError, Ticket,
};
use ferroclaw_types::{EventKind, RunEvent, StopReason, Usage};
use futures_util::future::BoxFuture;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

// ---------------------------------------------------------------- manual clock

/// Time moves only when the test calls `advance`.
#[derive(Default)]
struct ManualClock {
    state: Mutex<ClockState>,
    /// Total number of timers ever created, so a test can wait until one is armed.
    armed: watch::Sender<usize>,
}

#[derive(Default)]
struct ClockState {
    now: Duration,
    sleepers: Vec<(Duration, oneshot::Sender<()>)>,
}

impl ManualClock {
    fn advance(&self, d: Duration) {
        let mut st = self.state.lock().expect("clock lock");
        st.now += d;
        let now = st.now;
        let (due, later): (Vec<_>, Vec<_>) = st.sleepers.drain(..).partition(|(at, _)| *at <= now);
        st.sleepers = later;
        for (_, tx) in due {
            let _ = tx.send(());
        }
    }

    async fn wait_armed(&self, n: usize) {
        let mut rx = self.armed.subscribe();
        rx.wait_for(|armed| *armed >= n).await.expect("clock alive");
    }

    fn armed(&self) -> usize {
        *self.armed.borrow()
    }
}

impl Clock for ManualClock {
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.state.lock().expect("clock lock");
            let at = st.now + d;
            st.sleepers.push((at, tx));
        }
        self.armed.send_modify(|n| *n += 1);
        Box::pin(async move {
            // A dropped clock never fires: stay pending like a timer that never expires.
            if rx.await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}

// ---------------------------------------------------------------- fake agent

/// What the test learns when a run starts, and how it ends that run.
struct Started {
    message: String,
    cancel: CancellationToken,
    release: oneshot::Sender<()>,
}

impl Started {
    fn finish(self) {
        let _ = self.release.send(());
    }
}

#[derive(Clone)]
struct Fake {
    log: Arc<Mutex<Vec<String>>>,
    started: mpsc::UnboundedSender<Started>,
}

/// Builds a RunFn that records start/end, emits two events with run id `run-<message>`,
/// then waits until the test releases it (→ Ok) or its token is cancelled (→ Aborted).
/// The message `boom` panics instead.
fn fake() -> (
    RunFn,
    Arc<Mutex<Vec<String>>>,
    mpsc::UnboundedReceiver<Started>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let f = Fake {
        log: Arc::new(Mutex::new(Vec::new())),
        started: tx,
    };
    let log = Arc::clone(&f.log);
    let run: RunFn = Arc::new(
        move |run_id: String, message: String, sink: Arc<dyn EventSink>, cancel| {
            let f = f.clone();
            Box::pin(async move {
                if message == "boom" {
                    panic!("fake agent exploded");
                }
                sink.emit(RunEvent {
                    run_id: run_id.clone(),
                    seq: 1,
                    kind: EventKind::LifecycleStart {
                        agent_id: "a".into(),
                        session_key: "k".into(),
                        model: "m".into(),
                    },
                });
                f.log.lock().expect("log").push(format!("start:{message}"));
                let (release, released) = oneshot::channel();
                let _ = f.started.send(Started {
                    message: message.clone(),
                    cancel: cancel.clone(),
                    release,
                });
                tokio::select! {
                    _ = released => {}
                    _ = cancel.cancelled() => {
                        f.log.lock().expect("log").push(format!("abort:{message}"));
                        return Err(RunError::Aborted);
                    }
                }
                f.log.lock().expect("log").push(format!("end:{message}"));
                sink.emit(RunEvent {
                    run_id: run_id.clone(),
                    seq: 2,
                    kind: EventKind::LifecycleEnd {
                        stop_reason: StopReason::Stop,
                        usage: Usage::default(),
                        text: message.clone(),
                    },
                });
                Ok(RunOutput {
                    run_id,
                    session_id: "s".into(),
                    text: message,
                    silent: false,
                    stop_reason: StopReason::Stop,
                    usage: Usage::default(),
                    iterations: 1,
                    provider: "fake".into(),
                    model: "m".into(),
                    reasoning: String::new(),
                })
            })
        },
    );
    (run, log, rx)
}

#[derive(Default)]
struct Collect(Mutex<Vec<RunEvent>>);
impl EventSink for Collect {
    fn emit(&self, e: RunEvent) {
        self.0.lock().expect("collect").push(e);
    }
}
impl Collect {
    fn len(&self) -> usize {
        self.0.lock().expect("collect").len()
    }
}

// ---------------------------------------------------------------- helpers

/// Fails the test instead of hanging it when an expected event never comes.
async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .expect("scheduler did not make progress")
}

async fn next(rx: &mut mpsc::UnboundedReceiver<Started>) -> Started {
    within(rx.recv()).await.expect("fake alive")
}

/// Lets every runnable task run, so anything the scheduler wrongly started shows up.
async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

fn cfg() -> SchedulerConfig {
    SchedulerConfig {
        debounce: Duration::ZERO,
        ..SchedulerConfig::default()
    }
}

struct Env {
    sched: Arc<Scheduler>,
    run: RunFn,
    log: Arc<Mutex<Vec<String>>>,
    started: mpsc::UnboundedReceiver<Started>,
}

impl Env {
    fn new(cfg: SchedulerConfig) -> Self {
        Self::with(Scheduler::new(cfg))
    }
    fn with(sched: Arc<Scheduler>) -> Self {
        let (run, log, started) = fake();
        Env {
            sched,
            run,
            log,
            started,
        }
    }
    fn sub(&self, key: &str, msg: &str, mode: QueueMode) -> Submission {
        self.sub_to(key, msg, mode, Arc::new(Collect::default()))
    }
    fn sub_to(&self, key: &str, msg: &str, mode: QueueMode, sink: Arc<Collect>) -> Submission {
        Submission {
            run_id: format!("run-{msg}"),
            lane: Lane::Main,
            session_key: key.into(),
            group: key.starts_with("group"),
            message: msg.into(),
            mode,
            mergeable: true,
            events: sink,
            run: Arc::clone(&self.run),
        }
    }
    fn submit(&self, key: &str, msg: &str) -> Ticket {
        self.sched
            .submit(self.sub(key, msg, QueueMode::Queue))
            .expect("accepted")
    }
    async fn next(&mut self) -> Started {
        next(&mut self.started).await
    }
    fn log(&self) -> Vec<String> {
        self.log.lock().expect("log").clone()
    }
}

async fn outcome(t: Ticket) -> Result<SharedOutcome, SubmitError> {
    within(t.outcome).await.expect("ticket resolved")
}

async fn text(t: Ticket) -> String {
    match outcome(t).await {
        Ok(o) => match o.as_ref() {
            Ok(out) => out.text.clone(),
            Err(e) => panic!("run failed: {e}"),
        },
        Err(e) => panic!("not run: {e}"),
    }
}

async fn aborted(t: Ticket) -> bool {
    matches!(outcome(t).await, Ok(o) if matches!(o.as_ref(), Err(RunError::Aborted)))
}

// ---------------------------------------------------------------- tests

#[tokio::test]
async fn direct_session_runs_one_at_a_time() {
    let mut env = Env::new(cfg());
    let a = env.submit("dm", "a");
    let b = env.submit("dm", "b");
    let first = env.next().await;
    assert_eq!(first.message, "a");
    settle().await;
    assert_eq!(env.sched.active_runs(), 1);
    assert_eq!(env.sched.queued(), 1);
    first.finish();
    assert_eq!(text(a).await, "a");
    env.next().await.finish();
    assert_eq!(text(b).await, "b");
    assert_eq!(env.log(), ["start:a", "end:a", "start:b", "end:b"]);
    assert_eq!(env.sched.active_runs(), 0);
    assert!(!env.sched.session_busy("dm"), "idle sessions are forgotten");
}

#[tokio::test]
async fn group_session_runs_three_at_a_time() {
    let mut env = Env::new(cfg());
    let tickets: Vec<_> = ["1", "2", "3", "4"]
        .iter()
        .map(|m| env.submit("group:g", m))
        .collect();
    let mut running = vec![env.next().await, env.next().await, env.next().await];
    settle().await;
    assert_eq!(env.sched.active_runs(), 3);
    assert_eq!(env.sched.queued(), 1);
    assert!(env.started.try_recv().is_err(), "4th must wait for a slot");
    running.remove(0).finish();
    let fourth = env.next().await;
    assert_eq!(fourth.message, "4");
    fourth.finish();
    for r in running {
        r.finish();
    }
    for t in tickets {
        outcome(t).await.expect("ran");
    }
}

#[tokio::test]
async fn different_sessions_run_in_parallel() {
    let mut env = Env::new(cfg());
    let a = env.submit("dm:alice", "a");
    let b = env.submit("dm:bob", "b");
    let first = env.next().await;
    let second = env.next().await;
    // Both started before either was released.
    assert_eq!(env.sched.active_runs(), 2);
    first.finish();
    second.finish();
    assert_eq!(text(a).await, "a");
    assert_eq!(text(b).await, "b");
}

#[tokio::test]
async fn lane_limit_caps_concurrency_across_sessions() {
    let mut env = Env::new(SchedulerConfig {
        lanes: vec![(Lane::Main, 2)],
        ..cfg()
    });
    let tickets: Vec<_> = ["s1", "s2", "s3"]
        .iter()
        .map(|k| env.submit(k, k))
        .collect();
    let first = env.next().await;
    let second = env.next().await;
    settle().await;
    assert_eq!(env.sched.active_runs(), 2);
    assert_eq!(env.sched.queued(), 1, "third waits for a lane permit");
    assert!(env.started.try_recv().is_err());
    first.finish();
    let third = env.next().await;
    assert_eq!(third.message, "s3");
    second.finish();
    third.finish();
    for t in tickets {
        outcome(t).await.expect("ran");
    }
}

#[tokio::test]
async fn queue_mode_is_fifo() {
    let mut env = Env::new(cfg());
    let tickets: Vec<_> = ["a", "b", "c", "d"]
        .iter()
        .map(|m| env.submit("dm", m))
        .collect();
    let mut order = Vec::new();
    for _ in 0..4 {
        let s = env.next().await;
        order.push(s.message.clone());
        s.finish();
    }
    assert_eq!(order, ["a", "b", "c", "d"]);
    for (t, m) in tickets.into_iter().zip(["a", "b", "c", "d"]) {
        assert_eq!(text(t).await, m, "each message is its own run");
    }
}

#[tokio::test]
async fn followup_merges_waiting_messages_into_one_run() {
    let mut env = Env::new(cfg());
    let a = env.submit("dm", "a");
    let first = env.next().await;
    let sinks: Vec<Arc<Collect>> = (0..3).map(|_| Arc::new(Collect::default())).collect();
    let tickets: Vec<Ticket> = ["b", "c", "d"]
        .iter()
        .zip(&sinks)
        .map(|(m, sink)| {
            env.sched
                .submit(env.sub_to("dm", m, QueueMode::Followup, Arc::clone(sink)))
                .expect("accepted")
        })
        .collect();
    assert_eq!(env.sched.queued(), 3);
    first.finish();
    assert_eq!(text(a).await, "a");
    let merged = env.next().await;
    assert_eq!(merged.message, "b\n\nc\n\nd");
    merged.finish();
    let mut outcomes = Vec::new();
    for t in tickets {
        outcomes.push(outcome(t).await.expect("ran"));
    }
    assert!(outcomes.iter().all(|o| Arc::ptr_eq(o, &outcomes[0])));
    for sink in &sinks {
        assert_eq!(
            sink.len(),
            2,
            "every merged submitter sees the run's events"
        );
    }
    settle().await;
    assert!(env.started.try_recv().is_err(), "exactly one merged run");
}

#[tokio::test]
async fn interrupt_aborts_the_active_run_and_goes_first() {
    let mut env = Env::new(cfg());
    let a = env.submit("dm", "a");
    let first = env.next().await;
    let q = env.submit("dm", "queued");
    let i = env
        .sched
        .submit(env.sub("dm", "urgent", QueueMode::Interrupt))
        .expect("accepted");
    assert!(first.cancel.is_cancelled());
    assert!(aborted(a).await);
    let next_run = env.next().await;
    assert_eq!(next_run.message, "urgent", "ahead of what was queued");
    next_run.finish();
    assert_eq!(text(i).await, "urgent");
    env.next().await.finish();
    assert_eq!(text(q).await, "queued");
    assert_eq!(
        env.log(),
        [
            "start:a",
            "abort:a",
            "start:urgent",
            "end:urgent",
            "start:queued",
            "end:queued"
        ]
    );
}

#[tokio::test]
async fn full_queue_drops_oldest_with_policy_old() {
    let mut env = Env::new(SchedulerConfig {
        queue_capacity: 2,
        drop_policy: DropPolicy::Old,
        ..cfg()
    });
    let a = env.submit("dm", "a");
    let first = env.next().await;
    let b = env.submit("dm", "b");
    let c = env.submit("dm", "c");
    let d = env.submit("dm", "d");
    assert!(matches!(outcome(b).await, Err(SubmitError::Dropped)));
    assert_eq!(env.sched.queued(), 2);
    first.finish();
    env.next().await.finish();
    env.next().await.finish();
    assert_eq!(text(a).await, "a");
    assert_eq!(text(c).await, "c");
    assert_eq!(text(d).await, "d");
}

#[tokio::test]
async fn full_queue_refuses_new_with_policy_new() {
    let mut env = Env::new(SchedulerConfig {
        queue_capacity: 2,
        drop_policy: DropPolicy::New,
        ..cfg()
    });
    let a = env.submit("dm", "a");
    let first = env.next().await;
    let b = env.submit("dm", "b");
    let c = env.submit("dm", "c");
    let refused = env.sched.submit(env.sub("dm", "d", QueueMode::Queue));
    assert!(matches!(refused, Err(SubmitError::QueueFull)));
    first.finish();
    env.next().await.finish();
    env.next().await.finish();
    assert_eq!(text(a).await, "a");
    assert_eq!(text(b).await, "b");
    assert_eq!(text(c).await, "c");
}

#[tokio::test]
async fn debounce_merges_messages_within_the_window() {
    let clock = Arc::new(ManualClock::default());
    let mut env = Env::with(Scheduler::with_clock(
        SchedulerConfig {
            debounce: Duration::from_millis(800),
            ..SchedulerConfig::default()
        },
        Arc::clone(&clock) as Arc<dyn Clock>,
    ));
    let a = env.submit("dm", "a");
    clock.advance(Duration::from_millis(500));
    let b = env.submit("dm", "b"); // restarts the window: now closes at 1300 ms
    clock.advance(Duration::from_millis(500));
    settle().await;
    assert!(env.started.try_recv().is_err(), "window restarted by b");
    assert_eq!(env.sched.queued(), 2);
    let c = env.submit("dm", "c");
    clock.advance(Duration::from_millis(800));
    let run = env.next().await;
    assert_eq!(run.message, "a\n\nb\n\nc");
    run.finish();
    let (a, b, c) = (outcome(a).await, outcome(b).await, outcome(c).await);
    let a = a.expect("ran");
    assert!(Arc::ptr_eq(&a, &b.expect("ran")) && Arc::ptr_eq(&a, &c.expect("ran")));
}

#[tokio::test]
async fn debounce_keeps_messages_outside_the_window_apart() {
    let clock = Arc::new(ManualClock::default());
    let mut env = Env::with(Scheduler::with_clock(
        SchedulerConfig {
            debounce: Duration::from_millis(800),
            ..SchedulerConfig::default()
        },
        Arc::clone(&clock) as Arc<dyn Clock>,
    ));
    let a = env.submit("dm", "a");
    clock.advance(Duration::from_millis(800));
    let first = env.next().await;
    assert_eq!(first.message, "a");
    first.finish();
    assert_eq!(text(a).await, "a");
    let b = env.submit("dm", "b");
    clock.advance(Duration::from_millis(799));
    settle().await;
    assert!(
        env.started.try_recv().is_err(),
        "b still inside its own window"
    );
    clock.advance(Duration::from_millis(1));
    let second = env.next().await;
    assert_eq!(second.message, "b");
    second.finish();
    assert_eq!(text(b).await, "b");
}

#[tokio::test]
async fn stop_aborts_the_oldest_run_only() {
    let mut env = Env::new(cfg());
    let t1 = env.submit("group:g", "1");
    let r1 = env.next().await;
    let _t2 = env.submit("group:g", "2");
    let r2 = env.next().await;
    assert_eq!(env.sched.stop("group:g"), 1);
    assert!(r1.cancel.is_cancelled());
    assert!(!r2.cancel.is_cancelled());
    assert!(aborted(t1).await);
    assert_eq!(env.sched.stop("group:g"), 1, "the next /stop reaches run 2");
    assert!(r2.cancel.is_cancelled());
    assert_eq!(env.sched.stop("nobody"), 0);
}

#[tokio::test]
async fn stop_all_aborts_and_drains() {
    let mut env = Env::new(cfg());
    let a = env.submit("dm", "a");
    let first = env.next().await;
    let b = env.submit("dm", "b");
    let c = env.submit("dm", "c");
    assert_eq!(env.sched.stop_all("dm"), 1, "one running turn aborted");
    assert!(first.cancel.is_cancelled());
    assert!(aborted(a).await);
    assert!(matches!(outcome(b).await, Err(SubmitError::Cancelled)));
    assert!(matches!(outcome(c).await, Err(SubmitError::Cancelled)));
    settle().await;
    assert!(
        env.started.try_recv().is_err(),
        "drained messages never run"
    );
    assert_eq!(env.sched.queued(), 0);
    assert_eq!(env.sched.active_runs(), 0);
    assert!(!env.sched.session_busy("dm"));
}

#[tokio::test]
async fn stop_all_cancels_a_pending_debounce() {
    let clock = Arc::new(ManualClock::default());
    let mut env = Env::with(Scheduler::with_clock(
        SchedulerConfig {
            debounce: Duration::from_millis(800),
            ..SchedulerConfig::default()
        },
        Arc::clone(&clock) as Arc<dyn Clock>,
    ));
    let a = env.submit("dm", "a");
    assert_eq!(env.sched.stop_all("dm"), 0, "nothing was running yet");
    assert!(matches!(outcome(a).await, Err(SubmitError::Cancelled)));
    clock.advance(Duration::from_secs(5));
    settle().await;
    assert!(env.started.try_recv().is_err());
    assert!(!env.sched.session_busy("dm"));
}

#[tokio::test]
async fn abort_run_by_the_id_made_at_submit() {
    let mut env = Env::new(cfg());
    let a = env.submit("dm", "a");
    let first = env.next().await;
    assert!(env.sched.run_in_session("dm", "run-a"));
    assert!(!env.sched.run_in_session("other", "run-a"));
    assert!(!env.sched.abort_run("run-unknown"));
    assert!(env.sched.abort_run("run-a"));
    assert!(first.cancel.is_cancelled());
    assert!(aborted(a).await);
    assert!(!env.sched.abort_run("run-a"), "no longer active");
}

#[tokio::test]
async fn abort_of_a_queued_message_takes_it_out_of_the_queue() {
    let mut env = Env::new(cfg());
    let a = env.submit("dm", "a");
    let b = env.submit("dm", "b");
    let c = env.submit("dm", "c");
    let first = env.next().await;
    assert!(env.sched.run_in_session("dm", "run-b"));
    assert!(
        env.sched.abort_run("run-b"),
        "a waiting message can be aborted"
    );
    assert!(!env.sched.run_in_session("dm", "run-b"));
    assert!(
        !first.cancel.is_cancelled(),
        "the running turn is untouched"
    );
    match b.outcome.await.expect("answered") {
        Err(SubmitError::Cancelled) => {}
        other => panic!("expected Cancelled, got {:?}", other.map(|_| ())),
    }
    let _ = first.release.send(());
    assert!(a.outcome.await.is_ok());
    let next = env.next().await;
    assert_eq!(next.message, "c", "b never ran");
    let _ = next.release.send(());
    assert!(c.outcome.await.is_ok());
}

#[tokio::test]
async fn unmergeable_messages_never_join_a_followup_batch() {
    let mut env = Env::new(cfg());
    let a = env.submit("dm", "a");
    let first = env.next().await;
    let b = env
        .sched
        .submit(env.sub("dm", "b", QueueMode::Followup))
        .expect("b");
    let mut solo = env.sub("dm", "tool", QueueMode::Followup);
    solo.mergeable = false;
    let t = env.sched.submit(solo).expect("tool");
    let c = env
        .sched
        .submit(env.sub("dm", "c", QueueMode::Followup))
        .expect("c");
    let _ = first.release.send(());
    assert!(a.outcome.await.is_ok());
    let next = env.next().await;
    assert_eq!(next.message, "b", "the unmergeable message ends the batch");
    let _ = next.release.send(());
    let next = env.next().await;
    assert_eq!(next.message, "tool", "it runs on its own");
    let _ = next.release.send(());
    let next = env.next().await;
    assert_eq!(next.message, "c");
    let _ = next.release.send(());
    for t in [b, t, c] {
        assert!(t.outcome.await.is_ok());
    }
}

#[tokio::test]
async fn shutdown_lets_a_cooperative_run_finish_within_grace() {
    let clock = Arc::new(ManualClock::default());
    let mut env = Env::with(Scheduler::with_clock(
        cfg(),
        Arc::clone(&clock) as Arc<dyn Clock>,
    ));
    let a = env.submit("dm", "a");
    let first = env.next().await;
    let queued = env.submit("dm", "b");
    let armed = clock.armed();
    let sched = Arc::clone(&env.sched);
    let done = tokio::spawn(async move { sched.shutdown(Duration::from_secs(30)).await });
    clock.wait_armed(armed + 1).await; // the grace timer is running
    assert!(matches!(
        outcome(queued).await,
        Err(SubmitError::ShuttingDown)
    ));
    assert!(matches!(
        env.sched.submit(env.sub("dm", "late", QueueMode::Queue)),
        Err(SubmitError::ShuttingDown)
    ));
    assert!(!done.is_finished());
    first.finish(); // the grace never elapses: the run ends on its own
    within(done).await.expect("shutdown task");
    assert_eq!(text(a).await, "a");
    assert_eq!(env.log(), ["start:a", "end:a"]);
}

#[tokio::test]
async fn shutdown_cancels_a_stubborn_run_after_grace() {
    let clock = Arc::new(ManualClock::default());
    let mut env = Env::with(Scheduler::with_clock(
        cfg(),
        Arc::clone(&clock) as Arc<dyn Clock>,
    ));
    let a = env.submit("dm", "a");
    let first = env.next().await;
    let armed = clock.armed();
    let sched = Arc::clone(&env.sched);
    let done = tokio::spawn(async move { sched.shutdown(Duration::from_secs(30)).await });
    clock.wait_armed(armed + 1).await;
    clock.advance(Duration::from_secs(29));
    settle().await;
    assert!(!first.cancel.is_cancelled(), "still within grace");
    clock.advance(Duration::from_secs(1));
    within(done).await.expect("shutdown task");
    assert!(first.cancel.is_cancelled());
    assert!(aborted(a).await);
}

#[tokio::test]
async fn panicking_run_does_not_wedge_the_session() {
    let mut env = Env::new(cfg());
    let boom = env.submit("dm", "boom");
    let ok = env.submit("dm", "ok");
    assert!(matches!(outcome(boom).await, Err(SubmitError::Failed(_))));
    env.next().await.finish();
    assert_eq!(text(ok).await, "ok");
    assert_eq!(env.sched.active_runs(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_sessions_never_overlap_under_load() {
    let mut env = Env::new(SchedulerConfig {
        lanes: vec![(Lane::Main, 3)],
        queue_capacity: 100,
        ..cfg()
    });
    let mut tickets = Vec::new();
    for i in 0..20 {
        for key in ["x", "y", "z", "w"] {
            tickets.push(env.submit(key, &format!("{key}{i}")));
        }
    }
    for _ in 0..tickets.len() {
        env.next().await.finish();
    }
    for t in tickets {
        outcome(t).await.expect("ran");
    }
    let log = env.log();
    for key in ["x", "y", "z", "w"] {
        let mine: Vec<&String> = log
            .iter()
            .filter(|l| l.contains(&format!(":{key}")))
            .collect();
        let expected: Vec<String> = (0..20)
            .flat_map(|i| [format!("start:{key}{i}"), format!("end:{key}{i}")])
            .collect();
        assert_eq!(mine, expected.iter().collect::<Vec<_>>(), "session {key}");
    }
    assert_eq!(env.sched.active_runs(), 0);
    assert_eq!(env.sched.queued(), 0);
}
