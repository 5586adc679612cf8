//! What the runtime's door costs per turn: the same agent, turns run through
//! `Runtime::submit` (scheduler queue and lane, session lease, event channel, run id)
//! against `Agent::run` called directly. Counts allocations with a wrapping global
//! allocator. Prints figures; never fails on them.
//!
//! Run: `cargo bench -p ferroclaw-runtime --bench door_overhead`
//! (`FERROCLAW_BENCH_DIR=/dev/shm` keeps disk fsync latency out of the figures;
//! `FERROCLAW_BENCH_TRACING=off` turns the trace collector off, to see what it costs).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench: a failed fixture should stop it

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferroclaw_agent::{NullSink, RunRequest};
use ferroclaw_runtime::{Origin, QueueMode, Runtime, RuntimeOptions, Submit, Submitted};
use ferroclaw_store::{FileSessionStore, SessionStore};
use ferroclaw_testkit::{Reply, ScriptedLlm};
use tokio_util::sync::CancellationToken;

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[derive(Default)]
struct Sample {
    times: Vec<Duration>,
    allocs: u64,
}

impl Sample {
    fn add(&mut self, other: Sample) {
        self.times.extend(other.times);
        self.allocs += other.allocs;
    }

    fn stats(&self) -> (f64, f64, f64) {
        let mut t: Vec<f64> = self.times.iter().map(|d| d.as_secs_f64() * 1e6).collect();
        t.sort_by(|a, b| a.total_cmp(b));
        let n = t.len().max(1) as f64;
        (
            t.iter().sum::<f64>() / n,
            t[t.len() / 2],
            self.allocs as f64 / n,
        )
    }
}

async fn measure<F, Fut>(turns: usize, mut f: F) -> Sample
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut times = Vec::with_capacity(turns);
    let a0 = ALLOCS.load(Ordering::Relaxed);
    for i in 0..turns {
        let t = Instant::now();
        f(i).await;
        times.push(t.elapsed());
    }
    Sample {
        times,
        allocs: ALLOCS.load(Ordering::Relaxed) - a0,
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(bench());
}

async fn bench() {
    let turns: usize = std::env::var("FERROCLAW_BENCH_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = match std::env::var("FERROCLAW_BENCH_DIR") {
        Ok(dir) => tempfile::tempdir_in(dir).expect("tempdir in FERROCLAW_BENCH_DIR"),
        Err(_) => tempfile::tempdir().expect("tempdir"),
    };
    let tracing = std::env::var("FERROCLAW_BENCH_TRACING").map_or(true, |v| v != "off");
    let config = format!(
        r#"{{
  agents: {{ defaults: {{ provider: "scripted", model: "bench-model", stream: true }} }},
  providers: {{ scripted: {{ type: "openai_compat", base_url: "{}" }} }},
  tracing: {{ enabled: {tracing} }},
}}"#,
        llm.openai_base_url()
    );
    std::fs::write(home.path().join("config.json5"), config).expect("config");
    let loaded = ferroclaw_config::load(
        &ferroclaw_config::LoadOptions {
            home: Some(home.path().to_path_buf()),
            config_path: None,
        },
        ferroclaw_config::Env::from_pairs([("FERROCLAW_SCRIPTED_API_KEY", "k")]),
    )
    .expect("config");
    let settings = loaded.settings();
    let store: Arc<dyn SessionStore> = Arc::new(FileSessionStore::new(home.path()));
    let runtime = Runtime::build(&settings, store, RuntimeOptions::from_settings(&settings))
        .expect("runtime");
    let agent = runtime.agent("main").expect("main").agent.clone();
    let answer = "The answer is forty-two, as computed by the door benchmark.";

    let submit = |key: String| {
        let runtime = &runtime;
        async move {
            let Ok(Submitted::Run(handle)) = runtime.submit(Submit {
                agent_id: "main",
                session_key: &key,
                user: None,
                message: "What is the answer?",
                mode: QueueMode::Queue,
                origin: Origin::Http,
                options: Default::default(),
            }) else {
                panic!("not a run")
            };
            handle.outcome().await.expect("turn");
        }
    };
    let direct = |key: String| {
        let agent = agent.clone();
        async move {
            agent
                .run(
                    RunRequest {
                        session_key: key,
                        message: "What is the answer?".into(),
                        options: Default::default(),
                    },
                    Arc::new(NullSink),
                    CancellationToken::new(),
                )
                .await
                .expect("turn");
        }
    };

    for _ in 0..40 {
        llm.push(Reply::text(answer));
    }
    for i in 0..20 {
        direct(format!("warm-a-{i}")).await;
        submit(format!("warm-b-{i}")).await;
    }
    println!(
        "ferroclaw runtime door overhead, {turns} turns each, streaming OpenAI wire, scripted LLM on 127.0.0.1, home in {}, traces {}\n",
        home.path().parent().map_or_else(String::new, |p| p.display().to_string()),
        if tracing { "kept" } else { "off" }
    );
    let mut rows = Vec::new();
    for (label, same) in [("new session", false), ("same session", true)] {
        for _ in 0..turns * 2 {
            llm.push(Reply::text(answer));
        }
        let key = |kind: &str, i: usize| {
            if same {
                format!("{kind}-long")
            } else {
                format!("{kind}-{i}")
            }
        };
        // Alternating turns, so both sides see the same index size and cache state.
        let (mut d, mut s) = (Sample::default(), Sample::default());
        for i in 0..turns {
            d.add(measure(1, |_| direct(key("direct", i))).await);
            s.add(measure(1, |_| submit(key("door", i))).await);
        }
        rows.push((label, d, s));
    }
    for (label, d, s) in &rows {
        let ((dm, dp, da), (sm, sp, sa)) = (d.stats(), s.stats());
        println!(
            "{label:<13} Agent::run mean {dm:>8.1} us p50 {dp:>8.1} us {da:>6.0} allocs | Runtime::submit mean {sm:>8.1} us p50 {sp:>8.1} us {sa:>6.0} allocs | door {:+.1} us/turn ({:.3}x), {:+.0} allocs/turn",
            sm - dm,
            sm / dm,
            sa - da
        );
    }
}
