//! Scheduled jobs with a clock the test moves: each schedule kind, retries with
//! back-off, catch-up after downtime, delivery, the run log, the `cron` tool, and a due
//! job run exactly once by two runtimes at once (two stores on one SQLite home; two
//! instances on one PostgreSQL), and a run that ends while PostgreSQL is away not run
//! again when it comes back.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferroclaw_runtime::cron::{Clock, CronService, JobInput};
use ferroclaw_runtime::{Requester, Runtime, RuntimeOptions};
use ferroclaw_store::{FileSessionStore, PgSessionStore, SessionStore};
use ferroclaw_testkit::{Reply, ScriptedLlm};
use serde_json::{json, Value};

/// 2026-03-28 08:00:00 UTC, a Saturday.
const T0: i64 = 1_774_684_800_000;
const HOUR: i64 = 3_600_000;

struct TestClock {
    now: AtomicI64,
    slept: Mutex<Vec<Duration>>,
}

impl TestClock {
    fn at(ms: i64) -> Arc<TestClock> {
        Arc::new(TestClock {
            now: AtomicI64::new(ms),
            slept: Mutex::new(Vec::new()),
        })
    }

    fn set(&self, ms: i64) {
        self.now.store(ms, Ordering::SeqCst);
    }

    fn slept(&self) -> Vec<Duration> {
        self.slept.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl Clock for TestClock {
    fn now_ms(&self) -> i64 {
        self.now.load(Ordering::SeqCst)
    }

    async fn sleep(&self, d: Duration) {
        self.slept.lock().unwrap().push(d);
        self.now.fetch_add(d.as_millis() as i64, Ordering::SeqCst);
    }
}

struct Home {
    llm: ScriptedLlm,
    home: tempfile::TempDir,
}

impl Home {
    async fn new() -> Home {
        Home::with_defaults("").await
    }

    /// `extra`: more of `agents.defaults`.
    async fn with_defaults(extra: &str) -> Home {
        let llm = ScriptedLlm::start().await.expect("llm");
        let home = tempfile::tempdir().expect("tempdir");
        let config = format!(
            r#"{{
  agents: {{ defaults: {{ provider: "scripted", model: "model-a", max_iterations: 4, timeout_seconds: 60, stream: false, {extra} }} }},
  providers: {{ scripted: {{ type: "openai_compat", base_url: "{}" }} }},
}}"#,
            llm.openai_base_url()
        );
        std::fs::write(home.path().join("config.json5"), config).expect("config");
        Home { llm, home }
    }

    fn runtime_on(&self, store: Arc<dyn SessionStore>, clock: Arc<TestClock>) -> Arc<Runtime> {
        let loaded = ferroclaw_config::load(
            &ferroclaw_config::LoadOptions {
                home: Some(self.home.path().to_path_buf()),
                config_path: None,
            },
            ferroclaw_config::Env::from_pairs([("FERROCLAW_SCRIPTED_API_KEY", "k")]),
        )
        .expect("config loads");
        let settings = loaded.settings();
        Arc::new(
            Runtime::build_with_clock(
                &settings,
                store,
                RuntimeOptions::from_settings(&settings),
                clock,
            )
            .expect("runtime"),
        )
    }

    fn runtime(&self, clock: Arc<TestClock>) -> Arc<Runtime> {
        self.runtime_on(Arc::new(FileSessionStore::new(self.home.path())), clock)
    }
}

const ADMIN: Requester<'static> = Requester {
    user: None,
    admin: true,
};

fn input(v: Value) -> JobInput {
    serde_json::from_value(v).expect("job input")
}

fn service(rt: &Arc<Runtime>) -> CronService {
    CronService::new(rt.clone()).expect("a store with cron")
}

/// A message to `main`'s session `chat`, as a CLI would send it; the answer.
async fn chat(rt: &Runtime, message: &str) -> String {
    chat_as(rt, None, message).await
}

/// [`chat`] on behalf of `user`.
async fn chat_as(rt: &Runtime, user: Option<&str>, message: &str) -> String {
    let submitted = rt
        .submit(ferroclaw_runtime::Submit {
            agent_id: "main",
            session_key: "chat",
            user,
            message,
            mode: ferroclaw_runtime::QueueMode::Queue,
            origin: ferroclaw_runtime::Origin::Cli,
            options: Default::default(),
        })
        .expect("submit");
    let ferroclaw_runtime::Submitted::Run(handle) = submitted else {
        panic!("a run");
    };
    handle.outcome().await.expect("run").text
}

fn user_text(req: &ferroclaw_testkit::RecordedRequest) -> String {
    req.body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| m["content"].to_string())
        .unwrap_or_default()
}

#[tokio::test]
async fn each_schedule_kind_runs_through_the_runtime_at_its_time() {
    let h = Home::new().await;
    let clock = TestClock::at(T0);
    let rt = h.runtime(clock.clone());
    let workspace = rt
        .agent("main")
        .expect("main")
        .agent
        .settings()
        .workspace
        .clone();
    std::fs::write(workspace.join("AGENTS.md"), "AGENTS-MARKER").expect("agents");
    std::fs::write(workspace.join("SOUL.md"), "SOUL-MARKER").expect("soul");
    let book = rt.cron().expect("cron");
    let svc = service(&rt);

    let at = rt
        .cron_create(
            ADMIN,
            input(json!({"name": "once", "message": "ping once",
            "schedule": {"kind": "at", "atMs": T0 + 30 * 60_000}})),
        )
        .await
        .expect("at");
    let every = rt
        .cron_create(
            ADMIN,
            input(json!({"message": "ping every",
            "schedule": {"kind": "every", "every": "2h"}})),
        )
        .await
        .expect("every");
    // 09:30 in Berlin is 08:30 UTC on Saturday (CET) and 07:30 UTC on Sunday (CEST).
    let daily = rt
        .cron_create(
            ADMIN,
            input(json!({"message": "ping daily",
            "schedule": {"kind": "cron", "expr": "30 9 * * *", "tz": "Europe/Berlin"}})),
        )
        .await
        .expect("cron");
    assert_eq!(at.next_run_at, Some(T0 + 30 * 60_000));
    assert_eq!(every.next_run_at, Some(T0 + 2 * HOUR));
    assert_eq!(daily.next_run_at, Some(T0 + 30 * 60_000));

    // Nothing is due yet.
    assert_eq!(svc.tick().await, 0);
    assert!(h.llm.requests().is_empty());

    // 08:30: the one-time job and the daily one.
    clock.set(T0 + 30 * 60_000);
    h.llm.push(Reply::text("done A"));
    h.llm.push(Reply::text("done B"));
    assert_eq!(svc.tick().await, 2);
    let requests = h.llm.requests();
    assert_eq!(requests.len(), 2);
    let mut sent: Vec<String> = requests.iter().map(user_text).collect();
    sent.sort();
    assert!(
        sent[0].contains("ping daily") && sent[1].contains("ping once"),
        "{sent:?}"
    );
    // The minimal prompt: AGENTS.md, not SOUL.md.
    let system = requests[0].body["messages"][0]["content"].to_string();
    assert!(
        system.contains("AGENTS-MARKER") && !system.contains("SOUL-MARKER"),
        "{system}"
    );
    // The one-time job is gone; its run is logged.
    assert!(book.get(ADMIN, &at.id).await.is_err());
    let runs = book.runs(ADMIN, None, 10).await.expect("runs");
    let once = runs
        .iter()
        .find(|r| r.job_id == at.id)
        .expect("run of the at job");
    assert_eq!((once.status.as_str(), once.attempts), ("ok", 1));
    assert!(
        once.session_key
            .starts_with(&format!("cron:{}:run:", at.id)),
        "{}",
        once.session_key
    );
    assert!(once
        .output
        .as_deref()
        .is_some_and(|o| o.starts_with("done ")));
    assert_eq!(once.duration_ms, Some(0));
    // Its session holds the run.
    let sessions = rt.store().list("main").await.expect("sessions");
    assert!(
        sessions.iter().any(|s| s.key == once.session_key),
        "{sessions:?}"
    );
    let daily_now = book.get(ADMIN, &daily.id).await.expect("daily");
    assert_eq!(
        daily_now.next_run_at,
        Some(T0 + 23 * HOUR + 30 * 60_000),
        "09:30 CEST on Sunday"
    );

    // 10:00: the interval job; the next is two hours later.
    clock.set(T0 + 2 * HOUR);
    h.llm.push(Reply::text("done C"));
    assert_eq!(svc.tick().await, 1);
    assert!(user_text(&h.llm.requests()[2]).contains("ping every"));
    assert_eq!(
        book.get(ADMIN, &every.id).await.expect("every").next_run_at,
        Some(T0 + 4 * HOUR)
    );
    // Ticking again at the same moment runs nothing twice.
    assert_eq!(svc.tick().await, 0);

    // Disabled: not run when due; run now: due at once, and the schedule goes on after.
    book.update(ADMIN, &every.id, input(json!({"enabled": false})))
        .await
        .expect("off");
    clock.set(T0 + 5 * HOUR);
    assert_eq!(svc.tick().await, 0);
    let j = book.run_now(ADMIN, &every.id).await.expect("run now");
    assert_eq!(j.next_run_at, Some(T0 + 5 * HOUR));
    h.llm.push(Reply::text("done D"));
    assert_eq!(svc.tick().await, 1);
    assert_eq!(
        book.get(ADMIN, &every.id).await.expect("every").next_run_at,
        Some(T0 + 6 * HOUR)
    );
}

#[tokio::test]
async fn failed_runs_are_retried_with_back_off_then_logged() {
    let h = Home::new().await;
    let clock = TestClock::at(T0);
    let rt = h.runtime(clock.clone());
    let book = rt.cron().expect("cron");
    let svc = service(&rt);
    let job = rt
        .cron_create(
            ADMIN,
            input(json!({"message": "flaky", "schedule": {"kind": "every", "everyMs": HOUR}})),
        )
        .await
        .expect("job");

    // Two failures, then an answer: three attempts, waits of 2 s and 4 s (±25%).
    clock.set(T0 + HOUR);
    h.llm.push(Reply::status(400, "bad request one"));
    h.llm.push(Reply::status(400, "bad request two"));
    h.llm.push(Reply::text("third time lucky"));
    assert_eq!(svc.tick().await, 1);
    let waits = clock.slept();
    assert_eq!(waits.len(), 2, "{waits:?}");
    assert!(
        waits[0] >= Duration::from_millis(1500) && waits[0] <= Duration::from_millis(2500),
        "{waits:?}"
    );
    assert!(
        waits[1] >= Duration::from_millis(3000) && waits[1] <= Duration::from_millis(5000),
        "{waits:?}"
    );
    let run = &book.runs(ADMIN, Some(&job.id), 5).await.expect("runs")[0];
    assert_eq!((run.status.as_str(), run.attempts), ("ok", 3), "{run:?}");
    assert_eq!(
        run.duration_ms,
        Some(waits.iter().map(|w| w.as_millis() as i64).sum())
    );

    // Three failures: logged as an error with the reason; the schedule goes on.
    clock.set(T0 + 2 * HOUR);
    for _ in 0..3 {
        h.llm.push(Reply::status(400, "the model refuses"));
    }
    assert_eq!(svc.tick().await, 1);
    let run = &book.runs(ADMIN, Some(&job.id), 5).await.expect("runs")[0];
    assert_eq!((run.status.as_str(), run.attempts), ("error", 3), "{run:?}");
    assert!(
        run.error
            .as_deref()
            .is_some_and(|e| e.contains("the model refuses")),
        "{run:?}"
    );
    assert_eq!(
        book.get(ADMIN, &job.id).await.expect("job").next_run_at,
        Some(T0 + 3 * HOUR)
    );
    // The back-off is capped: the 6th wait of a policy would be 64 s, it is at most 37.5.
    let policy = ferroclaw_runtime::cron::RetryPolicy::default();
    assert!(policy.delay(6) <= Duration::from_millis(37_500));
    assert!(policy.delay(6) >= Duration::from_millis(22_500));
}

#[tokio::test]
async fn a_run_missed_while_down_runs_once_or_is_skipped() {
    let h = Home::new().await;
    let clock = TestClock::at(T0);
    let rt = h.runtime(clock.clone());
    let book = rt.cron().expect("cron").clone();
    let once = rt
        .cron_create(
            ADMIN,
            input(json!({"message": "catch up", "schedule": {"kind": "every", "every": "1h"}})),
        )
        .await
        .expect("once");
    let skip = rt
        .cron_create(
            ADMIN,
            input(json!({"message": "skip me", "catchUp": "skip",
            "schedule": {"kind": "every", "every": "1h"}})),
        )
        .await
        .expect("skip");
    drop(rt);

    // Five hours later a new process starts: one run of the first job, none of the second.
    clock.set(T0 + 5 * HOUR + 10_000);
    let rt = h.runtime(clock.clone());
    h.llm.push(Reply::text("caught up"));
    assert_eq!(service(&rt).tick().await, 2);
    let sent: Vec<String> = h.llm.requests().iter().map(user_text).collect();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(sent[0].contains("catch up"));
    for (job, status) in [(&once, "ok"), (&skip, "skipped")] {
        let runs = book.runs(ADMIN, Some(&job.id), 10).await.expect("runs");
        assert_eq!(runs.len(), 1, "{runs:?}");
        assert_eq!(runs[0].status, status);
        let next = book.get(ADMIN, &job.id).await.expect("job").next_run_at;
        assert_eq!(
            next,
            Some(T0 + 6 * HOUR),
            "the next slot, not the missed ones"
        );
    }
}

#[tokio::test]
async fn the_answer_is_delivered_to_a_session_and_users_see_only_their_jobs() {
    let h = Home::new().await;
    let clock = TestClock::at(T0);
    let rt = h.runtime(clock.clone());
    let book = rt.cron().expect("cron");
    let alice = Requester {
        user: Some("alice"),
        admin: false,
    };
    let bob = Requester {
        user: Some("bob"),
        admin: false,
    };
    let job = rt
        .cron_create(
            alice,
            input(json!({"message": "morning summary",
            "deliver": {"kind": "session", "sessionKey": "inbox"},
            "schedule": {"kind": "every", "every": "1h"}})),
        )
        .await
        .expect("job");
    assert_eq!(job.owner.as_deref(), Some("alice"));
    // Bob: the job does not exist for him, whatever he tries.
    assert_eq!(book.list(bob).await.expect("list").len(), 0);
    assert!(matches!(
        book.get(bob, &job.id).await,
        Err(ferroclaw_runtime::cron::CronError::NotFound(_))
    ));
    assert!(book
        .update(bob, &job.id, input(json!({"message": "mine now"})))
        .await
        .is_err());
    assert!(book.run_now(bob, &job.id).await.is_err());
    assert!(book.runs(bob, Some(&job.id), 5).await.is_err());
    assert!(book.delete(bob, &job.id).await.is_err());
    assert!(
        book.runs(bob, None, 5).await.is_err(),
        "all runs are the administrator's view"
    );
    assert_eq!(book.list(alice).await.expect("list").len(), 1);
    assert_eq!(book.list(ADMIN).await.expect("list").len(), 1);

    clock.set(T0 + HOUR);
    h.llm.push(Reply::text("Three meetings today."));
    assert_eq!(service(&rt).tick().await, 1);
    // Alice's session `inbox` (her own, on this per-user agent or not) has the answer.
    let agent = rt.agent("main").expect("main");
    let stored = rt.stored_key(&agent, Some("alice"), "inbox");
    let log = rt.store().open("main", &stored).await.expect("inbox");
    let last = serde_json::to_string(&log.entries().last().expect("an entry").body).expect("json");
    assert!(
        last.contains("[cron: morning summary] Three meetings today."),
        "{last}"
    );
    // The run acted for alice.
    let run = &book.runs(alice, Some(&job.id), 1).await.expect("runs")[0];
    assert_eq!(run.status, "ok", "{run:?}");

    // Bad input is refused with the reason, and nothing is stored.
    for (bad, why) in [
        (
            json!({"message": "x", "schedule": {"kind": "cron", "expr": "* * *"}}),
            "5 fields",
        ),
        (
            json!({"message": "", "schedule": {"kind": "every", "every": "1h"}}),
            "needs a `message`",
        ),
        (json!({"message": "x"}), "needs a `schedule`"),
        (
            json!({"message": "x", "agentId": "nobody", "schedule": {"kind": "every", "every": "1h"}}),
            "nobody",
        ),
        (
            json!({"message": "x", "deliver": {"kind": "session", "sessionKey": "a\u{7}b"}, "schedule": {"kind": "every", "every": "1h"}}),
            "sessionKey",
        ),
    ] {
        let err = rt
            .cron_create(alice, input(bad.clone()))
            .await
            .err()
            .map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(|e| e.contains(why)),
            "{bad}: {err:?}"
        );
    }
    assert_eq!(book.list(alice).await.expect("list").len(), 1);
}

#[tokio::test]
async fn the_model_schedules_its_own_jobs_with_the_cron_tool() {
    let h = Home::new().await;
    let clock = TestClock::at(T0);
    let rt = h.runtime(clock.clone());
    h.llm.push(Reply::tool_call(
        "c1",
        "cron",
        json!({"action": "add", "name": "stretch", "message": "Remind me to stretch",
               "schedule": {"kind": "every", "every": "45m"}}),
    ));
    h.llm.push(Reply::text("Scheduled."));
    assert_eq!(
        chat(&rt, "remind me to stretch every 45 minutes").await,
        "Scheduled."
    );
    let tool_result = h.llm.requests()[1].body["messages"].to_string();
    assert!(
        tool_result.contains("stretch") && tool_result.contains("nextRunAt"),
        "{tool_result}"
    );
    let jobs = rt.cron().expect("cron").list(ADMIN).await.expect("list");
    assert_eq!(jobs.len(), 1);
    assert_eq!(
        (jobs[0].agent_id.as_str(), jobs[0].next_run_at),
        ("main", Some(T0 + 45 * 60_000))
    );

    // A bad call gets the reason back, and nothing changes.
    h.llm
        .push(Reply::tool_call("c2", "cron", json!({"action": "remove"})));
    h.llm.push(Reply::text("ok"));
    chat(&rt, "remove it").await;
    let last = h.llm.requests().last().expect("request").body["messages"].to_string();
    assert!(last.contains("`remove` needs `id`"), "{last}");
    assert_eq!(
        rt.cron()
            .expect("cron")
            .list(ADMIN)
            .await
            .expect("list")
            .len(),
        1
    );
}

/// Two runtimes claim at the same moment, again and again: every due job runs once.
async fn due_jobs_run_once_across(
    h: &Home,
    a: Arc<Runtime>,
    b: Arc<Runtime>,
    clock: Arc<TestClock>,
) {
    let mut ids = Vec::new();
    for i in 0..12 {
        let job = a
            .cron_create(
                ADMIN,
                input(json!({"message": format!("job {i}"),
                "schedule": {"kind": "at", "atMs": T0 + 60_000}})),
            )
            .await
            .expect("job");
        ids.push(job.id);
    }
    for i in 0..12 {
        h.llm.push(Reply::text(format!("answer {i}")));
    }
    clock.set(T0 + 60_000);
    let (sa, sb) = (Arc::new(service(&a)), Arc::new(service(&b)));
    let mut tasks = Vec::new();
    for round in 0..6 {
        let s = if round % 2 == 0 {
            sa.clone()
        } else {
            sb.clone()
        };
        tasks.push(tokio::spawn(async move { s.tick().await }));
    }
    let mut ran = 0;
    for t in tasks {
        ran += t.await.expect("tick");
    }
    assert_eq!(ran, 12, "each due job claimed once");
    let mut sent: Vec<String> = h.llm.requests().iter().map(user_text).collect();
    sent.sort();
    sent.dedup();
    assert_eq!(sent.len(), 12, "{sent:?}");
    assert_eq!(h.llm.requests().len(), 12);
    let runs = a
        .cron()
        .expect("cron")
        .runs(ADMIN, None, 100)
        .await
        .expect("runs");
    assert_eq!(runs.len(), 12);
    assert!(runs.iter().all(|r| r.status == "ok"), "{runs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_due_job_runs_once_with_two_runtimes_on_one_sqlite_home() {
    let h = Home::new().await;
    let clock = TestClock::at(T0);
    let (a, b) = (h.runtime(clock.clone()), h.runtime(clock.clone()));
    due_jobs_run_once_across(&h, a, b, clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_due_job_runs_once_with_two_instances_on_one_postgres() {
    let h = Home::new().await;
    let url = ferroclaw_testkit::pg::fresh_database().await;
    let clock = TestClock::at(T0);
    let store = |url: String| async move {
        Arc::new(PgSessionStore::connect(&url).await.expect("pg")) as Arc<dyn SessionStore>
    };
    let a = h.runtime_on(store(url.clone()).await, clock.clone());
    let b = h.runtime_on(store(url).await, clock.clone());
    due_jobs_run_once_across(&h, a, b, clock).await;
}

fn last_entry_text(log: &dyn ferroclaw_store::SessionLog) -> String {
    serde_json::to_string(&log.entries().last().expect("an entry").body).expect("json")
}

#[tokio::test]
async fn the_heartbeat_runs_in_its_hours_with_something_to_do_and_says_new_things_once() {
    let h = Home::with_defaults(
        r#"heartbeat: { enabled: true, every: "30m", target: "last",
                        active_hours: { start: "22:00", end: "10:15", timezone: "Europe/Berlin" } }"#,
    )
    .await;
    let clock = TestClock::at(T0); // 09:00 in Berlin
    let rt = h.runtime(clock.clone());
    let book = rt.cron().expect("cron");
    let svc = service(&rt);
    let workspace = rt
        .agent("main")
        .expect("main")
        .agent
        .settings()
        .workspace
        .clone();
    // A conversation the heartbeat reports to (the session used last).
    h.llm.push(Reply::text("hello"));
    chat(&rt, "hi").await;
    let asked = || h.llm.requests().len();
    assert_eq!(asked(), 1);

    // The first tick makes the heartbeat a job; nothing is due yet.
    assert_eq!(svc.tick().await, 0);
    let jobs = book.list(ADMIN).await.expect("list");
    assert_eq!(jobs.len(), 1);
    let id = jobs[0].id.clone();
    assert_eq!(jobs[0].next_run_at, Some(T0 + 30 * 60_000));
    let refused = book
        .update(ADMIN, &id, input(json!({"message": "x"})))
        .await;
    assert!(refused.is_err_and(|e| e.to_string().contains("configuration")));

    // The latest run's status and reason.
    let latest = || {
        let book = book.clone();
        let id = id.clone();
        async move {
            let runs = book.runs(ADMIN, Some(&id), 1).await.expect("runs");
            (
                runs[0].status.clone(),
                runs[0].error.clone().unwrap_or_default(),
            )
        }
    };
    // 09:30, no HEARTBEAT.md: nothing to do, no turn spent.
    clock.set(T0 + 30 * 60_000);
    assert_eq!(svc.tick().await, 1);
    assert_eq!(
        latest().await,
        ("skipped".into(), "HEARTBEAT.md has nothing to do".into())
    );
    // A template with nothing in it is the same.
    std::fs::write(
        workspace.join("HEARTBEAT.md"),
        "# Heartbeat\n\n- \n<!-- tasks -->\n",
    )
    .expect("file");
    clock.set(T0 + 60 * 60_000);
    assert_eq!(svc.tick().await, 1);
    assert_eq!(latest().await.0, "skipped");
    std::fs::write(
        workspace.join("HEARTBEAT.md"),
        "# Heartbeat\n- check the inbox\n",
    )
    .expect("file");
    // 10:30 is outside 22:00-10:15.
    clock.set(T0 + 90 * 60_000);
    assert_eq!(svc.tick().await, 1);
    assert_eq!(
        latest().await,
        ("skipped".into(), "outside the active hours".into())
    );
    assert_eq!(asked(), 1);

    // The gateway ticks on through the day, outside the hours.
    for half_hour in 4..26 {
        clock.set(T0 + half_hour * 30 * 60_000);
        assert_eq!(svc.tick().await, 1);
        assert_eq!(latest().await.1, "outside the active hours");
    }
    // 22:00: a turn; an acknowledgement is not delivered.
    clock.set(T0 + 13 * HOUR);
    h.llm.push(Reply::text("**HEARTBEAT_OK**"));
    assert_eq!(svc.tick().await, 1);
    assert_eq!(latest().await.0, "ack");
    assert_eq!(asked(), 2);
    let sent = h.llm.requests()[1].body.to_string();
    assert!(
        sent.contains("check the inbox") && sent.contains("HEARTBEAT_OK"),
        "{sent}"
    );
    let chat_key = |rt: &Runtime| rt.stored_key(&rt.agent("main").expect("main"), None, "chat");
    let chat = rt.store().open("main", &chat_key(&rt)).await.expect("chat");
    assert!(last_entry_text(chat.as_ref()).contains("hello"));
    drop(chat);

    // 22:30: news, delivered to the chat.
    clock.set(T0 + 13 * HOUR + 30 * 60_000);
    h.llm.push(Reply::text("You have 3 unread mails."));
    assert_eq!(svc.tick().await, 1);
    assert_eq!(latest().await.0, "delivered");
    let chat = rt.store().open("main", &chat_key(&rt)).await.expect("chat");
    assert!(last_entry_text(chat.as_ref()).contains("[heartbeat] You have 3 unread mails."));
    let entries = chat.entries().len();
    drop(chat);

    // 23:00: the same news again: not delivered twice within a day.
    clock.set(T0 + 14 * HOUR);
    h.llm.push(Reply::text("You have 3 unread mails."));
    assert_eq!(svc.tick().await, 1);
    assert_eq!(latest().await.0, "duplicate");
    let chat = rt.store().open("main", &chat_key(&rt)).await.expect("chat");
    assert_eq!(chat.entries().len(), entries);
    drop(chat);

    // Two days later (the gateway was down): the missed heartbeats are not made up for.
    clock.set(T0 + 13 * HOUR + 48 * HOUR);
    assert_eq!(svc.tick().await, 1);
    assert_eq!(latest().await.0, "skipped");
    // Half an hour on, at 22:30: the same news is news again.
    clock.set(T0 + 13 * HOUR + 48 * HOUR + 30 * 60_000);
    h.llm.push(Reply::text("You have 3 unread mails."));
    assert_eq!(svc.tick().await, 1);
    assert_eq!(latest().await.0, "delivered");
    let chat = rt.store().open("main", &chat_key(&rt)).await.expect("chat");
    assert_eq!(chat.entries().len(), entries + 1);
}

#[tokio::test]
async fn the_cron_tool_acts_for_the_run_s_user_even_on_a_shared_agent() {
    let h = Home::new().await;
    let clock = TestClock::at(T0);
    let rt = h.runtime(clock.clone());
    let book = rt.cron().expect("cron").clone();
    let admin_job = rt
        .cron_create(
            ADMIN,
            input(json!({"message": "operator's", "schedule": {"kind": "every", "every": "1h"}})),
        )
        .await
        .expect("job");
    // Her model lists: the operator's job is not there.
    h.llm
        .push(Reply::tool_call("c1", "cron", json!({"action": "list"})));
    h.llm.push(Reply::text("none"));
    chat_as(&rt, Some("alice"), "my jobs?").await;
    let listed = h.llm.requests().last().expect("req").body["messages"].to_string();
    assert!(
        !listed.contains(&admin_job.id) && !listed.contains("operator's"),
        "{listed}"
    );
    // It cannot remove or run the operator's job, and what it adds is hers.
    h.llm.push(Reply::tool_call(
        "c2",
        "cron",
        json!({"action": "remove", "id": admin_job.id}),
    ));
    h.llm.push(Reply::text("ok"));
    chat_as(&rt, Some("alice"), "remove that").await;
    let answer = h.llm.requests().last().expect("req").body["messages"].to_string();
    assert!(
        answer.contains(&format!("no cron job `{}`", admin_job.id)),
        "{answer}"
    );
    assert!(book.get(ADMIN, &admin_job.id).await.is_ok());
    h.llm.push(Reply::tool_call(
        "c3",
        "cron",
        json!({"action": "add", "message": "water the plants", "schedule": {"kind": "every", "every": "1d"}}),
    ));
    h.llm.push(Reply::text("ok"));
    chat_as(&rt, Some("alice"), "remind me daily").await;
    let alice = Requester {
        user: Some("alice"),
        admin: false,
    };
    let hers = book.list(alice).await.expect("list");
    assert_eq!(hers.len(), 1);
    assert_eq!(hers[0].owner.as_deref(), Some("alice"));
}

/// A store whose database is stopped the first time a job's release is written: the run
/// itself is over by then, and the release meets a database that went away.
struct CutAtRelease {
    inner: Arc<dyn SessionStore>,
    cron: Arc<CutCron>,
}

struct CutCron {
    inner: Arc<dyn ferroclaw_store::CronStore>,
    server: Arc<Mutex<ferroclaw_testkit::pg::OwnServer>>,
    cut: std::sync::atomic::AtomicBool,
    /// Cut when the run's end is logged (before its release) rather than at the release.
    at_run_end: bool,
}

impl CutCron {
    async fn cut_once(&self) {
        if !self.cut.swap(true, Ordering::SeqCst) {
            let server = self.server.clone();
            tokio::task::spawn_blocking(move || server.lock().unwrap().stop())
                .await
                .expect("stop");
        }
    }
}

#[async_trait::async_trait]
impl ferroclaw_store::CronStore for CutCron {
    async fn put_job(
        &self,
        job: &ferroclaw_store::CronJob,
    ) -> Result<(), ferroclaw_store::StoreError> {
        self.inner.put_job(job).await
    }
    async fn job(
        &self,
        id: &str,
    ) -> Result<Option<ferroclaw_store::CronJob>, ferroclaw_store::StoreError> {
        self.inner.job(id).await
    }
    async fn jobs(
        &self,
        owner: Option<&str>,
    ) -> Result<Vec<ferroclaw_store::CronJob>, ferroclaw_store::StoreError> {
        self.inner.jobs(owner).await
    }
    async fn delete_job(&self, id: &str) -> Result<bool, ferroclaw_store::StoreError> {
        self.inner.delete_job(id).await
    }
    async fn claim_due(
        &self,
        now: i64,
        holder: &str,
        lease_until: i64,
        limit: usize,
    ) -> Result<Vec<ferroclaw_store::CronJob>, ferroclaw_store::StoreError> {
        self.inner.claim_due(now, holder, lease_until, limit).await
    }
    async fn claim(
        &self,
        id: &str,
        now: i64,
        holder: &str,
        lease_until: i64,
    ) -> Result<Option<ferroclaw_store::CronJob>, ferroclaw_store::StoreError> {
        self.inner.claim(id, now, holder, lease_until).await
    }
    async fn renew(
        &self,
        id: &str,
        holder: &str,
        lease_until: i64,
    ) -> Result<bool, ferroclaw_store::StoreError> {
        self.inner.renew(id, holder, lease_until).await
    }
    async fn release(
        &self,
        id: &str,
        holder: &str,
        claimed_version: i64,
        next_run_at: Option<i64>,
        remove: bool,
    ) -> Result<(), ferroclaw_store::StoreError> {
        self.cut_once().await;
        self.inner
            .release(id, holder, claimed_version, next_run_at, remove)
            .await
    }
    async fn put_run(
        &self,
        run: &ferroclaw_store::CronRun,
    ) -> Result<(), ferroclaw_store::StoreError> {
        if self.at_run_end && run.ended_at.is_some() {
            self.cut_once().await;
        }
        self.inner.put_run(run).await
    }
    async fn runs(
        &self,
        job_id: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ferroclaw_store::CronRun>, ferroclaw_store::StoreError> {
        self.inner.runs(job_id, limit).await
    }
    async fn interrupt_stale_runs(
        &self,
        job_id: &str,
        holder: &str,
    ) -> Result<(), ferroclaw_store::StoreError> {
        self.inner.interrupt_stale_runs(job_id, holder).await
    }
}

#[async_trait::async_trait]
impl ferroclaw_store::Integrity for CutAtRelease {
    async fn scan(
        &self,
        opts: ferroclaw_store::ScanOptions,
    ) -> Result<ferroclaw_store::ScanSummary, ferroclaw_store::StoreError> {
        self.inner.scan(opts).await
    }
    async fn last_scan_status(&self) -> Option<ferroclaw_store::IntegrityStatus> {
        self.inner.last_scan_status().await
    }
    async fn report_incident(
        &self,
        incident: ferroclaw_store::Incident,
    ) -> Result<(), ferroclaw_store::StoreError> {
        self.inner.report_incident(incident).await
    }
    async fn incidents(
        &self,
        limit: usize,
    ) -> Result<Vec<ferroclaw_store::Incident>, ferroclaw_store::StoreError> {
        self.inner.incidents(limit).await
    }
    fn scan_at_start(&self) -> bool {
        self.inner.scan_at_start()
    }
}

#[async_trait::async_trait]
impl SessionStore for CutAtRelease {
    async fn open(
        &self,
        agent_id: &str,
        key: &str,
    ) -> Result<Box<dyn ferroclaw_store::SessionLog>, ferroclaw_store::StoreError> {
        self.inner.open(agent_id, key).await
    }
    async fn read(
        &self,
        agent_id: &str,
        key: &str,
    ) -> Result<Option<Vec<ferroclaw_types::Entry>>, ferroclaw_store::StoreError> {
        self.inner.read(agent_id, key).await
    }
    async fn get(
        &self,
        agent_id: &str,
        key: &str,
    ) -> Result<Option<ferroclaw_store::SessionMeta>, ferroclaw_store::StoreError> {
        self.inner.get(agent_id, key).await
    }
    async fn list(
        &self,
        agent_id: &str,
    ) -> Result<Vec<ferroclaw_store::SessionMeta>, ferroclaw_store::StoreError> {
        self.inner.list(agent_id).await
    }
    async fn record_run(
        &self,
        agent_id: &str,
        key: &str,
        provider: &str,
        model: &str,
        usage: &ferroclaw_types::Usage,
    ) -> Result<(), ferroclaw_store::StoreError> {
        self.inner
            .record_run(agent_id, key, provider, model, usage)
            .await
    }
    async fn delete(&self, agent_id: &str, key: &str) -> Result<bool, ferroclaw_store::StoreError> {
        self.inner.delete(agent_id, key).await
    }
    async fn lease(
        &self,
        agent_id: &str,
        key: &str,
    ) -> Result<ferroclaw_store::SessionLease, ferroclaw_store::StoreError> {
        self.inner.lease(agent_id, key).await
    }
    async fn export(
        &self,
        agent_id: &str,
        key: &str,
    ) -> Result<Option<Vec<u8>>, ferroclaw_store::StoreError> {
        self.inner.export(agent_id, key).await
    }
    fn cron(&self) -> Option<Arc<dyn ferroclaw_store::CronStore>> {
        Some(self.cron.clone())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_ends_while_the_database_is_away_does_not_run_again() {
    let h = Home::new().await;
    let server = Arc::new(Mutex::new(
        ferroclaw_testkit::pg::OwnServer::start().expect("postgres"),
    ));
    let url = server.lock().unwrap().url().to_string();
    let pg = Arc::new(PgSessionStore::connect(&url).await.expect("pg"));
    let store = Arc::new(CutAtRelease {
        inner: pg.clone(),
        cron: Arc::new(CutCron {
            inner: pg.cron().expect("pg keeps jobs"),
            server: server.clone(),
            cut: std::sync::atomic::AtomicBool::new(false),
            at_run_end: false,
        }),
    });
    let clock = TestClock::at(T0);
    let rt = h.runtime_on(store, clock.clone());
    let job = rt
        .cron_create(
            ADMIN,
            input(json!({"message": "hourly report",
            "schedule": {"kind": "every", "every": "1h"}})),
        )
        .await
        .expect("job");
    h.llm.push(Reply::text("report one"));
    h.llm.push(Reply::text("report two"));
    let svc = service(&rt);

    // The run ends with an answer; writing its release meets a stopped database.
    clock.set(T0 + HOUR);
    assert_eq!(svc.tick().await, 1);
    assert_eq!(h.llm.requests().len(), 1);
    // While it is away nothing is claimed, and nothing fails but the log lines.
    assert_eq!(svc.tick().await, 0);

    // It comes back after the job's lease ran out: the kept release is written first,
    // so the job is not claimed again as still due.
    let resumed = server.clone();
    tokio::task::spawn_blocking(move || resumed.lock().unwrap().resume())
        .await
        .expect("resume")
        .expect("postgres again");
    clock.set(T0 + HOUR + 3 * 60_000);
    // (Run by hand before the release is written: refused, its last run is not over.)
    assert!(
        matches!(
            svc.run_job(ADMIN, &job.id).await,
            Err(ferroclaw_runtime::cron::CronError::Busy(_))
        ),
        "a manual run waits for the kept release"
    );
    assert_eq!(svc.tick().await, 0, "the run that ended is not run again");
    assert_eq!(h.llm.requests().len(), 1);
    let after = rt
        .cron()
        .expect("cron")
        .get(ADMIN, &job.id)
        .await
        .expect("job");
    assert_eq!(after.next_run_at, Some(T0 + 2 * HOUR));
    let runs = rt
        .cron()
        .expect("cron")
        .runs(ADMIN, Some(&job.id), 10)
        .await
        .expect("runs");
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].status, "ok");

    // Its next time comes: it runs, as scheduled.
    clock.set(T0 + 2 * HOUR);
    assert_eq!(svc.tick().await, 1);
    assert_eq!(h.llm.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_s_end_kept_while_the_database_is_away_is_logged_later_unless_its_job_is_gone() {
    let h = Home::new().await;
    let server = Arc::new(Mutex::new(
        ferroclaw_testkit::pg::OwnServer::start().expect("postgres"),
    ));
    let url = server.lock().unwrap().url().to_string();
    let pg = Arc::new(PgSessionStore::connect(&url).await.expect("pg"));
    let cron = Arc::new(CutCron {
        inner: pg.cron().expect("pg keeps jobs"),
        server: server.clone(),
        cut: std::sync::atomic::AtomicBool::new(false),
        at_run_end: true,
    });
    let store = Arc::new(CutAtRelease {
        inner: pg.clone(),
        cron: cron.clone(),
    });
    let clock = TestClock::at(T0);
    let rt = h.runtime_on(store, clock.clone());
    let book = rt.cron().expect("cron");
    let job = rt
        .cron_create(
            ADMIN,
            input(json!({"message": "hourly", "schedule": {"kind": "every", "every": "1h"}})),
        )
        .await
        .expect("job");
    h.llm.push(Reply::text("first"));
    h.llm.push(Reply::text("second"));
    let svc = service(&rt);
    let resume = || {
        let server = server.clone();
        async move {
            tokio::task::spawn_blocking(move || server.lock().unwrap().resume())
                .await
                .expect("resume")
                .expect("postgres again");
        }
    };

    // The run ends as the database goes away: neither its log entry nor its release
    // is written. Once it is back, both are, and the run is not run again.
    clock.set(T0 + HOUR);
    assert_eq!(svc.tick().await, 1);
    resume().await;
    clock.set(T0 + HOUR + 3 * 60_000);
    assert_eq!(svc.tick().await, 0, "the run is not run again");
    assert_eq!(h.llm.requests().len(), 1);
    let runs = book.runs(ADMIN, None, 10).await.expect("runs");
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].status, "ok");
    assert_eq!(runs[0].output.as_deref(), Some("first"));
    assert_eq!(
        book.get(ADMIN, &job.id).await.expect("job").next_run_at,
        Some(T0 + 2 * HOUR)
    );

    // Again; this time the job is deleted before the database comes back. Its log went
    // with it, and the kept end does not bring a run of it back.
    cron.cut.store(false, Ordering::SeqCst);
    clock.set(T0 + 2 * HOUR);
    assert_eq!(svc.tick().await, 1);
    resume().await;
    book.delete(ADMIN, &job.id).await.expect("delete");
    clock.set(T0 + 2 * HOUR + 3 * 60_000);
    assert_eq!(svc.tick().await, 0);
    assert_eq!(h.llm.requests().len(), 2);
    let runs = book.runs(ADMIN, None, 10).await.expect("runs");
    assert!(runs.is_empty(), "{runs:?}");
}
