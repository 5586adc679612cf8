//! What a scheduler tick costs against the number of jobs stored (prints figures, never
//! fails a run): claim the one due job among 0, 10,000 and 100,000 that are not due,
//! log its run and release it, on the embedded backend (tmpfs when there is one) and on
//! PostgreSQL (`FERROCLAW_TEST_DATABASE_URL`, else a throwaway cluster; skipped with a
//! line saying so when neither is possible). An idle tick (nothing due) is measured too:
//! every instance pays it each second.
//!
//! `cargo bench -p ferroclaw-store --bench cron_scale`
#![allow(clippy::unwrap_used, clippy::expect_used)] // bench: a failed fixture should stop it

use std::sync::Arc;
use std::time::Instant;

use ferroclaw_store::{
    CronJob, CronRun, CronStore, FileSessionStore, PgSessionStore, SessionStore,
};

const ROUNDS: usize = 200;
const FAR: i64 = 4_000_000_000_000;

fn job(id: &str, next: Option<i64>) -> CronJob {
    CronJob {
        id: id.into(),
        agent_id: "main".into(),
        owner: None,
        spec: serde_json::json!({"message": "tick"}),
        enabled: true,
        next_run_at: next,
        created_at: 1,
        updated_at: 1,
        lease: None,
    }
}

/// µs per idle tick, µs per tick that claims, logs and releases one job.
async fn measure(cron: Arc<dyn CronStore>) -> (f64, f64) {
    let start = Instant::now();
    for i in 0..ROUNDS {
        let claimed = cron
            .claim_due(1_000 + i as i64, "me", 2_000_000, 32)
            .await
            .unwrap();
        assert!(claimed.is_empty());
    }
    let idle = start.elapsed().as_secs_f64() * 1e6 / ROUNDS as f64;
    cron.put_job(&job("due", Some(0))).await.unwrap();
    let start = Instant::now();
    for i in 0..ROUNDS {
        let now = 10_000 + i as i64 * 10;
        let claimed = cron.claim_due(now, "me", now + 120_000, 32).await.unwrap();
        assert_eq!(claimed.len(), 1);
        let run = CronRun {
            id: format!("r{i}"),
            job_id: "due".into(),
            started_at: now,
            ended_at: Some(now + 1),
            status: "ok".into(),
            error: None,
            attempts: 1,
            session_key: format!("cron:due:run:r{i}"),
            output: Some("done".into()),
            holder: Some("me".into()),
        };
        cron.put_run(&run).await.unwrap();
        cron.release("due", "me", 1, Some(now + 5), false)
            .await
            .unwrap();
    }
    let busy = start.elapsed().as_secs_f64() * 1e6 / ROUNDS as f64;
    (idle, busy)
}

fn ratios(backend: &str, rows: &[(usize, f64, f64)]) {
    let (_, idle0, busy0) = rows[0];
    for (n, idle, busy) in &rows[1..] {
        println!(
            "  {backend}: {n} jobs vs 0: idle tick {:.2}x, tick with a run {:.2}x",
            idle / idle0,
            busy / busy0
        );
    }
}

#[tokio::main]
async fn main() {
    let root = if std::path::Path::new("/dev/shm").is_dir() {
        std::path::PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let mut rows = Vec::new();
    for n in [0usize, 10_000, 100_000] {
        let home = tempfile::Builder::new()
            .prefix("ferroclaw-cron-bench-")
            .tempdir_in(&root)
            .unwrap();
        let store = FileSessionStore::new(home.path());
        let cron = store.cron().unwrap();
        cron.put_job(&job("seed", Some(FAR))).await.unwrap();
        if n > 0 {
            let mut db = rusqlite::Connection::open(home.path().join("data/directory.db")).unwrap();
            let tx = db.transaction().unwrap();
            {
                let mut insert = tx
                    .prepare(
                        "INSERT INTO cron_jobs (id, agent_id, owner, spec, enabled, next_run_at, created_at, updated_at)
                         VALUES (?1, 'main', NULL, '{}', 1, ?2, 1, 1)",
                    )
                    .unwrap();
                for i in 0..n {
                    insert
                        .execute(rusqlite::params![format!("j{i}"), FAR + i as i64])
                        .unwrap();
                }
            }
            tx.commit().unwrap();
        }
        let (idle, busy) = measure(cron).await;
        println!("embedded, {n} jobs: idle tick {idle:.0} µs, tick with a run {busy:.0} µs");
        rows.push((n, idle, busy));
    }
    ratios("embedded", &rows);

    if std::panic::catch_unwind(ferroclaw_testkit::pg::server_url).is_err() {
        println!("managed: no PostgreSQL server to measure against (see the message above)");
        return;
    }
    let mut rows = Vec::new();
    for n in [0usize, 10_000, 100_000] {
        let url = ferroclaw_testkit::pg::fresh_database().await;
        let store = PgSessionStore::connect(&url).await.unwrap();
        if n > 0 {
            let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(conn);
            client
                .execute(
                    "INSERT INTO cron_jobs (id, agent_id, owner, spec, enabled, next_run_at, created_at, updated_at)
                     SELECT 'j' || i, 'main', NULL, '{}', TRUE, $1::bigint + i, 1, 1
                     FROM generate_series(1, $2::int) AS i",
                    &[&FAR, &(n as i32)],
                )
                .await
                .unwrap();
            client.batch_execute("ANALYZE cron_jobs").await.unwrap();
        }
        let (idle, busy) = measure(Arc::new(store)).await;
        println!("managed, {n} jobs: idle tick {idle:.0} µs, tick with a run {busy:.0} µs");
        rows.push((n, idle, busy));
    }
    ratios("managed", &rows);
}
