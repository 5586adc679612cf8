//! The agent loop's own cost per turn: full `Agent::run` turns against the scripted LLM,
//! minus the same provider calls made directly. Counts allocations with a wrapping
//! global allocator. Prints figures; never fails on them.
//!
//! Run: `cargo bench -p ferroclaw-agent --bench loop_overhead`
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed fixture should stop the test

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferroclaw_agent::{prompt::PromptMode, Agent, AgentSettings, NullSink, RunRequest};
use ferroclaw_providers::{
    ChatRequest, NoSink, OpenAiCompat, OpenAiCompatConfig, Provider, SchemaFlavor,
};
use ferroclaw_store::{FileSessionStore, SessionStore};
use ferroclaw_testkit::{Reply, ScriptedLlm};
use ferroclaw_tools::ToolRegistry;
use ferroclaw_types::Message;
use serde_json::json;
use tokio_util::sync::CancellationToken;

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

struct Sample {
    times: Vec<Duration>,
    allocs: u64,
    bytes: u64,
}

impl Sample {
    fn per_turn(&self) -> (f64, f64, f64, f64, f64) {
        let mut t: Vec<f64> = self.times.iter().map(|d| d.as_secs_f64() * 1e6).collect();
        t.sort_by(|a, b| a.total_cmp(b));
        let n = t.len().max(1) as f64;
        let mean = t.iter().sum::<f64>() / n;
        let p50 = t[t.len() / 2];
        let p99 = t[((t.len() as f64 * 0.99) as usize).min(t.len() - 1)];
        (
            mean,
            p50,
            p99,
            self.allocs as f64 / n,
            self.bytes as f64 / n,
        )
    }
}

fn print(label: &str, s: &Sample) {
    let (mean, p50, p99, allocs, bytes) = s.per_turn();
    println!(
        "{label:<34} mean {mean:>8.1} us  p50 {p50:>8.1} us  p99 {p99:>8.1} us  {allocs:>8.0} allocs/turn  {:>7.1} KiB/turn",
        bytes / 1024.0
    );
}

async fn measure<F, Fut>(turns: usize, mut f: F) -> Sample
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut times = Vec::with_capacity(turns);
    let (a0, b0) = (
        ALLOCS.load(Ordering::Relaxed),
        BYTES.load(Ordering::Relaxed),
    );
    for i in 0..turns {
        let t = Instant::now();
        f(i).await;
        times.push(t.elapsed());
    }
    Sample {
        times,
        allocs: ALLOCS.load(Ordering::Relaxed) - a0,
        bytes: BYTES.load(Ordering::Relaxed) - b0,
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(bench());
}

async fn bench() {
    let turns: usize = std::env::var("FERROCLAW_BENCH_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    // FERROCLAW_BENCH_DIR=/dev/shm separates the loop's own cost from disk fsync latency.
    let home = match std::env::var("FERROCLAW_BENCH_DIR") {
        Ok(dir) => tempfile::tempdir_in(dir).expect("tempdir in FERROCLAW_BENCH_DIR"),
        Err(_) => tempfile::tempdir().expect("tempdir"),
    };
    let workspace = home.path().join("workspace");
    std::fs::create_dir_all(&workspace).expect("workspace");
    let provider: Arc<dyn Provider> = Arc::new(
        OpenAiCompat::new(OpenAiCompatConfig {
            name: "scripted".into(),
            base_url: llm.openai_base_url(),
            api_key: None,
            headers: vec![],
            request_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(30),
            schema_flavor: SchemaFlavor::OpenAi,
        })
        .expect("provider"),
    );
    let tools = Arc::new(ToolRegistry::with_core_tools());
    let store: Arc<dyn SessionStore> = Arc::new(FileSessionStore::new(home.path()));
    let mut settings = AgentSettings::new("main", "scripted", "bench-model", workspace.clone());
    settings.prompt_mode = PromptMode::Full;
    let agent = Agent::new(settings, provider.clone(), tools.clone(), store);
    let answer = "The answer is forty-two, as computed by the loop benchmark.";

    // Warm up connections, caches and the allocator.
    for _ in 0..20 {
        llm.push(Reply::text(answer));
    }
    for i in 0..20 {
        let _ = agent
            .run(
                RunRequest {
                    session_key: format!("warm-{i}"),
                    message: "hi".into(),
                    options: Default::default(),
                },
                Arc::new(NullSink),
                CancellationToken::new(),
            )
            .await;
    }

    let request = ChatRequest {
        model: "bench-model".into(),
        system: Some("x".repeat(3_000)),
        messages: vec![Message::user("What is the answer?")],
        tools: tools.definitions(),
        max_tokens: None,
        temperature: None,
        stream: true,
        extra_body: Default::default(),
        max_reply_bytes: None,
        thinking_budget: None,
    };
    println!(
        "ferroclaw loop overhead, {turns} turns each, streaming OpenAI wire, scripted LLM on 127.0.0.1, home in {}\n",
        home.path().parent().map_or_else(String::new, |p| p.display().to_string())
    );

    for _ in 0..turns {
        llm.push(Reply::text(answer));
    }
    let direct = measure(turns, |_| {
        let (p, r) = (provider.clone(), request.clone());
        async move {
            p.chat(&r, &NoSink, &CancellationToken::new())
                .await
                .expect("direct call");
        }
    })
    .await;

    for _ in 0..turns {
        llm.push(Reply::text(answer));
    }
    let agent_fresh = measure(turns, |i| {
        let agent = &agent;
        async move {
            agent
                .run(
                    RunRequest {
                        session_key: format!("fresh-{i}"),
                        message: "What is the answer?".into(),
                        options: Default::default(),
                    },
                    Arc::new(NullSink),
                    CancellationToken::new(),
                )
                .await
                .expect("agent turn");
        }
    })
    .await;

    for _ in 0..turns {
        llm.push(Reply::text(answer));
    }
    let agent_same = measure(turns, |_| {
        let agent = &agent;
        async move {
            agent
                .run(
                    RunRequest {
                        session_key: "long".into(),
                        message: "What is the answer?".into(),
                        options: Default::default(),
                    },
                    Arc::new(NullSink),
                    CancellationToken::new(),
                )
                .await
                .expect("agent turn");
        }
    })
    .await;

    // Tool turn: the model asks for `ls`, then answers; two LLM calls either way.
    for _ in 0..turns {
        llm.push(Reply::tool_call("call_1", "ls", json!({})));
        llm.push(Reply::text(answer));
    }
    let direct_two = measure(turns, |_| {
        let (p, r) = (provider.clone(), request.clone());
        async move {
            p.chat(&r, &NoSink, &CancellationToken::new())
                .await
                .expect("direct 1");
            p.chat(&r, &NoSink, &CancellationToken::new())
                .await
                .expect("direct 2");
        }
    })
    .await;
    for _ in 0..turns {
        llm.push(Reply::tool_call("call_1", "ls", json!({})));
        llm.push(Reply::text(answer));
    }
    let agent_tool = measure(turns, |i| {
        let agent = &agent;
        async move {
            agent
                .run(
                    RunRequest {
                        session_key: format!("tool-{i}"),
                        message: "list files".into(),
                        options: Default::default(),
                    },
                    Arc::new(NullSink),
                    CancellationToken::new(),
                )
                .await
                .expect("agent tool turn");
        }
    })
    .await;

    print("direct provider call", &direct);
    print("agent turn, new session", &agent_fresh);
    print("agent turn, same session (grows)", &agent_same);
    print("direct, two calls", &direct_two);
    print("agent turn with ls tool", &agent_tool);
    println!();
    for (label, agent_s, direct_s) in [
        ("new session", &agent_fresh, &direct),
        ("same session", &agent_same, &direct),
        ("tool turn", &agent_tool, &direct_two),
    ] {
        let (am, ap50, _, aa, _) = agent_s.per_turn();
        let (dm, dp50, _, da, _) = direct_s.per_turn();
        println!(
            "overhead, {label:<13} mean {:>8.1} us/turn  p50 {:>8.1} us  ratio agent/direct {:.2}x  allocs {:+.0}/turn",
            am - dm,
            ap50 - dp50,
            am / dm,
            aa - da
        );
    }
}
