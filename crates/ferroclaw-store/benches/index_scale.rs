//! Per-turn storage cost against the number of sessions a home holds (prints figures,
//! never fails a run):
//! - a turn on a new session and on a continuing one (open, append user + assistant,
//!   flush, record the run) with 0, 10,000 and 100,000 sessions in the index,
//! - turns/s with 32 concurrent clients, each on its own session, with
//!   `session.durability` `fsync` and `batch`,
//! - the resident memory of a fresh process serving turns on each home (a child run of
//!   this binary, so the seeding's allocations do not count).
//!
//! The same figures for the managed backend follow, on a fresh database of the test
//! server (`FERROCLAW_TEST_DATABASE_URL`, else a throwaway cluster; skipped with a line
//! saying so when neither is possible).
//!
//! Homes go to tmpfs (`/dev/shm`) when there is one, so the figures are the store's
//! cost rather than the disk's; `FERROCLAW_BENCH_DIR` points them elsewhere (a disk,
//! to see the fsync's share).
//!
//! `cargo bench -p ferroclaw-store --bench index_scale`
#![allow(clippy::unwrap_used, clippy::expect_used)] // bench: a failed fixture should stop it

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferroclaw_store::{Durability, FileSessionStore, PgSessionStore, SessionStore};
use ferroclaw_types::{AssistantMessage, ContentBlock, EntryBody, Message, StopReason, Usage};
use serde_json::{json, Value};

const AGENT: &str = "main";
const TURNS: usize = 300;
const CLIENTS: usize = 32;
const TURNS_PER_CLIENT: usize = 20;

fn bench_root() -> PathBuf {
    if let Ok(dir) = std::env::var("FERROCLAW_BENCH_DIR") {
        return PathBuf::from(dir);
    }
    let shm = PathBuf::from("/dev/shm");
    if shm.is_dir() {
        shm
    } else {
        std::env::temp_dir()
    }
}

/// A home whose index lists `n` sessions: written as the JSON index of earlier
/// versions, which the first access moves into the database in one transaction (the
/// same rows the store would have written, without creating `n` transcripts one by one).
async fn home_with(n: usize) -> (tempfile::TempDir, FileSessionStore) {
    let home = tempfile::Builder::new()
        .prefix("ferroclaw-bench-")
        .tempdir_in(bench_root())
        .expect("home");
    let dir = home.path().join("agents").join(AGENT).join("sessions");
    std::fs::create_dir_all(&dir).expect("dir");
    if n > 0 {
        let mut index = serde_json::Map::new();
        for i in 0..n {
            index.insert(
                format!("agent:main:user{i}"),
                json!({"sessionId": format!("0190aaaa-0000-7000-8000-{i:012}"),
                       "createdAt": 1_700_000_000_000_i64 + i as i64,
                       "updatedAt": 1_700_000_000_000_i64 + i as i64,
                       "model": "gpt-4o",
                       "usage": {"input": 100, "output": 20, "totalTokens": 120}}),
            );
        }
        std::fs::write(dir.join("sessions.json"), Value::Object(index).to_string()).expect("index");
    }
    let store = FileSessionStore::new(home.path());
    let t = Instant::now();
    let listed = store.list(AGENT).await.expect("list").len();
    assert_eq!(listed, n);
    drop(store);
    let store = FileSessionStore::new(home.path());
    if n > 0 {
        println!(
            "  moved {n} sessions into the database in {:.2} s",
            t.elapsed().as_secs_f64()
        );
    }
    (home, store)
}

fn answer() -> EntryBody {
    EntryBody::Message {
        message: Message::Assistant(AssistantMessage {
            content: vec![ContentBlock::text("Here is what I found.")],
            provider: "openai".into(),
            model: "gpt-4o".into(),
            usage: Usage {
                input: 1000,
                output: 50,
                total_tokens: 1050,
                ..Usage::default()
            },
            stop_reason: StopReason::Stop,
            error_message: None,
            timestamp: 1,
        }),
    }
}

async fn turn(store: &dyn SessionStore, key: &str) {
    let mut log = store.open(AGENT, key).await.expect("open");
    log.append(EntryBody::Message {
        message: Message::user("what is in the project?"),
    })
    .await
    .expect("append");
    log.append(answer()).await.expect("append");
    log.flush().await.expect("flush");
    drop(log);
    let usage = Usage {
        input: 1000,
        output: 50,
        total_tokens: 1050,
        ..Usage::default()
    };
    store
        .record_run(AGENT, key, "openai", "gpt-4o", &usage)
        .await
        .expect("record");
}

fn per_turn(total: Duration, turns: usize) -> f64 {
    total.as_secs_f64() * 1e6 / turns as f64
}

fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
}

/// The child: opens the store on `home`, serves turns on 100 sessions, prints its RSS.
async fn rss_child(home: &str) {
    let store = FileSessionStore::new(home);
    for i in 0..100 {
        turn(&store as &dyn SessionStore, &format!("agent:main:user{i}")).await;
    }
    println!("{}", rss_kib().unwrap_or(0));
}

/// The same against a database (`url`), on 100 sessions of its own (the seeded rows
/// have no transcript lines to open).
async fn rss_child_managed(url: &str) {
    let store = PgSessionStore::connect(url).await.expect("store");
    for i in 0..100 {
        turn(&store as &dyn SessionStore, &format!("rss{i}")).await;
    }
    println!("{}", rss_kib().unwrap_or(0));
}

fn rss_of_fresh_process(home: &std::path::Path) -> String {
    rss_of_child("INDEX_SCALE_RSS_HOME", home.as_os_str())
}

fn rss_of_child(var: &str, value: &std::ffi::OsStr) -> String {
    let out = std::process::Command::new(std::env::current_exe().expect("exe"))
        .env(var, value)
        .output()
        .expect("child");
    if !out.status.success() {
        eprintln!("rss child: {}", String::from_utf8_lossy(&out.stderr));
    }
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse::<u64>()
        .map_or("?".to_string(), |k| format!("{:.1} MiB", k as f64 / 1024.0))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if let Ok(home) = std::env::var("INDEX_SCALE_RSS_HOME") {
        rss_child(&home).await;
        return;
    }
    if let Ok(url) = std::env::var("INDEX_SCALE_RSS_URL") {
        rss_child_managed(&url).await;
        return;
    }
    println!("storage root: {}", bench_root().display());
    let mut rows = Vec::new();
    for n in [0usize, 10_000, 100_000] {
        println!("{n} sessions:");
        let (home, store) = home_with(n).await;
        let (new, cont, rate) = measure(Arc::new(store)).await;
        let rss = rss_of_fresh_process(home.path());
        println!(
            "  new-session turn {new:.0} µs, continuing turn {cont:.0} µs, {CLIENTS} clients {rate:.0} turns/s, RSS of a fresh process serving 100 of them {rss}"
        );
        rows.push((n, new, cont, rate));
        drop(home);
    }
    ratios("embedded", &rows);
    durability().await;
    managed().await;
}

/// 32 clients, each ending turns on its own session, with each durability setting.
async fn concurrent_rate(store: Arc<dyn SessionStore>) -> f64 {
    let t = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..TURNS_PER_CLIENT {
                turn(store.as_ref(), &format!("client-{c}")).await;
            }
        }));
    }
    for task in tasks {
        task.await.expect("client");
    }
    (CLIENTS * TURNS_PER_CLIENT) as f64 / t.elapsed().as_secs_f64()
}

async fn durability() {
    let mut rates = Vec::new();
    for d in [Durability::Fsync, Durability::Batch] {
        let home = tempfile::Builder::new()
            .prefix("ferroclaw-bench-")
            .tempdir_in(bench_root())
            .expect("home");
        let store = Arc::new(FileSessionStore::new(home.path()).with_durability(d));
        rates.push(concurrent_rate(store).await);
    }
    println!(
        "embedded, {CLIENTS} clients: fsync {:.0} turns/s, batch {:.0} turns/s ({:.2}x)",
        rates[0],
        rates[1],
        rates[1] / rates[0]
    );
}

fn ratios(backend: &str, rows: &[(usize, f64, f64, f64)]) {
    let (_, new0, cont0, _) = rows[0];
    for (n, new, cont, _) in &rows[1..] {
        println!(
            "{backend}: {n} vs 0 sessions: new-session turn {:.2}x, continuing turn {:.2}x",
            new / new0,
            cont / cont0
        );
    }
}

/// Turn costs and concurrency of one store (returns new, continuing µs and turns/s).
async fn measure(store: Arc<dyn SessionStore>) -> (f64, f64, f64) {
    turn(store.as_ref(), "warm").await;
    let t = Instant::now();
    for i in 0..TURNS {
        turn(store.as_ref(), &format!("new-{i}")).await;
    }
    let new = per_turn(t.elapsed(), TURNS);
    let t = Instant::now();
    for i in 0..TURNS {
        turn(store.as_ref(), &format!("new-{}", i % 10)).await;
    }
    let cont = per_turn(t.elapsed(), TURNS);
    let rate = concurrent_rate(store).await;
    (new, cont, rate)
}

async fn managed() {
    let probe = std::panic::catch_unwind(ferroclaw_testkit::pg::server_url);
    if probe.is_err() {
        println!("managed: no PostgreSQL server to measure against (see the message above)");
        return;
    }
    let mut rows = Vec::new();
    for n in [0usize, 10_000, 100_000] {
        let url = ferroclaw_testkit::pg::fresh_database().await;
        let store = PgSessionStore::connect(&url).await.expect("store");
        if n > 0 {
            let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .expect("connect");
            tokio::spawn(conn);
            client
                .execute(
                    "INSERT INTO sessions (agent_id, key, session_id, header, created_at, updated_at, usage)
                     SELECT 'main', 'agent:main:user' || i, '0190aaaa-0000-7000-8000-' || lpad(i::text, 12, '0'),
                            '{}', 1700000000000 + i, 1700000000000 + i, '{}'
                     FROM generate_series(1, $1::int) AS i",
                    &[&(n as i32)],
                )
                .await
                .expect("seed");
            client
                .batch_execute("ANALYZE sessions")
                .await
                .expect("analyze");
        }
        let (new, cont, rate) = measure(Arc::new(store)).await;
        if n == 0 {
            let batch = PgSessionStore::connect(&url)
                .await
                .expect("store")
                .with_durability(Durability::Batch);
            let batched = concurrent_rate(Arc::new(batch)).await;
            println!(
                "managed, {CLIENTS} clients: fsync {rate:.0} turns/s, batch {batched:.0} turns/s ({:.2}x)",
                batched / rate
            );
        }
        let rss = rss_of_child("INDEX_SCALE_RSS_URL", std::ffi::OsStr::new(&url));
        println!(
            "managed, {n} sessions: new-session turn {new:.0} µs, continuing turn {cont:.0} µs, {CLIENTS} clients {rate:.0} turns/s, RSS of a fresh process serving 100 of them {rss}"
        );
        rows.push((n, new, cont, rate));
    }
    ratios("managed", &rows);
}
