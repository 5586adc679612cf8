//! Load benchmark for the gateway (prints figures; never fails on them).
//!
//! 1. `/v1/chat/completions` through the gateway vs. the same request sent straight to
//!    the zero-delay scripted LLM: requests/s, p50/p99 latency, and their ratio.
//! 2. 1,000 sessions, then 200 concurrent WebSocket clients each running a turn; peak
//!    RSS (VmHWM) of the gateway. The gateway runs in a child process (this binary,
//!    re-executed) so the figure excludes the scripted LLM, which keeps every request.
//!
//! Knobs (environment): BENCH_REQUESTS (default 2000), BENCH_CONCURRENCY (32),
//! BENCH_SESSIONS (1000), BENCH_WS_CLIENTS (200). Loopback only, bounded loops.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed fixture should stop the test

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferroclaw_config::{Config, Env, LoadedConfig, ProviderConfig};
use ferroclaw_gateway::server::{Gateway, ServeOptions};
use ferroclaw_store::FileSessionStore;
use ferroclaw_testkit::{Reply, ScriptedLlm};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

/// The gateway token the child is started with (every request needs one).
const BENCH_TOKEN: &str = "bench-token";

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn proc_status_kb(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

struct Stats {
    rps: f64,
    p50: Duration,
    p99: Duration,
    errors: usize,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// `total` POSTs of `body` to `url`, `concurrency` at a time; `header(i)` adds one header.
async fn drive(
    client: &reqwest::Client,
    url: &str,
    body: &Value,
    total: usize,
    concurrency: usize,
    session_header: bool,
) -> Stats {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = Vec::new();
    for w in 0..concurrency {
        let (client, url, body, next) =
            (client.clone(), url.to_string(), body.clone(), next.clone());
        workers.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut errors = 0;
            while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < total {
                let mut req = client.post(&url).json(&body);
                if session_header {
                    // One session per worker: runs in different sessions proceed in parallel.
                    req = req.header("X-Ferroclaw-Session-Key", format!("bench-{w}"));
                }
                let t = Instant::now();
                match req.send().await {
                    Ok(r) if r.status().is_success() => {
                        let _ = r.bytes().await;
                        lat.push(t.elapsed());
                    }
                    _ => errors += 1,
                }
            }
            (lat, errors)
        }));
    }
    let mut all = Vec::new();
    let mut errors = 0;
    for w in workers {
        if let Ok((lat, e)) = w.await {
            all.extend(lat);
            errors += e;
        }
    }
    let elapsed = started.elapsed();
    all.sort();
    Stats {
        rps: all.len() as f64 / elapsed.as_secs_f64(),
        p50: percentile(&all, 0.50),
        p99: percentile(&all, 0.99),
        errors,
    }
}

fn print(label: &str, s: &Stats) {
    println!(
        "{label:<10} {:>9.0} req/s   p50 {:>8.2} ms   p99 {:>8.2} ms   errors {}",
        s.rps,
        s.p50.as_secs_f64() * 1000.0,
        s.p99.as_secs_f64() * 1000.0,
        s.errors
    );
}

/// Gateway configuration shared by parent (for display) and child.
fn gateway_config(llm_base: &str, lane: usize) -> Config {
    let mut config = Config::default();
    config.agents.defaults.provider = Some("scripted".into());
    config.agents.defaults.model = Some("bench-model".into());
    // Same wire shape as the direct calls (non-streaming JSON).
    config.agents.defaults.stream = false;
    // The abuse phase opens 10,000 sockets from one address on purpose.
    config.gateway.limits.max_connections = 20_000;
    config.gateway.limits.max_connections_per_ip = 20_000;
    config.gateway.limits.max_ws_connections = 20_000;
    config.gateway.limits.max_ws_connections_per_ip = 20_000;
    config.providers.insert(
        "scripted".into(),
        ProviderConfig {
            base_url: Some(llm_base.to_string()),
            ..ProviderConfig::default()
        },
    );
    // The lane must not be the bottleneck being measured.
    config.gateway.lanes.main = lane;
    config
}

/// Child mode: serve the gateway until stdin closes.
async fn child(llm_base: String, home: String, lane: usize) {
    let loaded = LoadedConfig::from_config(
        gateway_config(&llm_base, lane),
        home.clone().into(),
        Env::from_pairs([("FERROCLAW_GATEWAY_TOKEN", BENCH_TOKEN)]),
    );
    let store = Arc::new(FileSessionStore::new(std::path::PathBuf::from(home)));
    let gateway = Gateway::bind(
        loaded.settings(),
        store,
        ServeOptions {
            host: Some("127.0.0.1".into()),
            port: Some(0),
        },
    )
    .await
    .expect("gateway");
    println!("listening on {}", gateway.local_addr());
    let _ = gateway
        .serve(async {
            let mut sink = Vec::new();
            let _ = tokio::io::AsyncReadExt::read_to_end(&mut tokio::io::stdin(), &mut sink).await;
        })
        .await;
}

#[tokio::main]
async fn main() {
    if let (Ok(llm), Ok(home)) = (
        std::env::var("BENCH_CHILD_LLM"),
        std::env::var("BENCH_CHILD_HOME"),
    ) {
        let lane = knob("BENCH_CHILD_LANE", 32);
        return child(llm, home, lane).await;
    }
    let requests = knob("BENCH_REQUESTS", 2000);
    let concurrency = knob("BENCH_CONCURRENCY", 32).max(1);
    let sessions = knob("BENCH_SESSIONS", 1000);
    let ws_clients = knob("BENCH_WS_CLIENTS", 200);

    let llm = ScriptedLlm::start().await.expect("scripted LLM");
    // BENCH_HOME_DIR=/dev/shm puts transcripts on tmpfs, separating the gateway's own
    // cost from the store's fsyncs (the default: the system temp dir, usually a disk).
    let home = match std::env::var("BENCH_HOME_DIR")
        .ok()
        .filter(|d| !d.is_empty())
    {
        Some(dir) => tempfile::tempdir_in(dir),
        None => tempfile::tempdir(),
    }
    .expect("temp home");
    println!("home       {}", home.path().display());
    let exe = std::env::current_exe().expect("own path");
    let mut gateway = tokio::process::Command::new(exe)
        .env("BENCH_CHILD_LLM", llm.openai_base_url())
        .env("BENCH_CHILD_HOME", home.path())
        .env("BENCH_CHILD_LANE", concurrency.max(ws_clients).to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn gateway child");
    let pid = gateway.id().unwrap_or(0);
    let stdin = gateway.stdin.take();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(
        gateway.stdout.take().expect("child stdout"),
    ));
    let mut addr = String::new();
    while let Ok(Some(line)) = lines.next_line().await {
        if let Some(a) = line.strip_prefix("listening on ") {
            addr = a.trim().to_string();
            break;
        }
    }
    assert!(!addr.is_empty(), "gateway child did not start");
    let rss_start = proc_status_kb(pid, "VmRSS:").unwrap_or(0);

    let mut auth = reqwest::header::HeaderMap::new();
    auth.insert(
        reqwest::header::AUTHORIZATION,
        reqwest::header::HeaderValue::from_static("Bearer bench-token"),
    );
    let client = reqwest::Client::builder()
        .default_headers(auth)
        .pool_max_idle_per_host(concurrency)
        .build()
        .expect("client");
    let body = json!({"model": "bench-model", "messages": [{"role": "user", "content": "ping"}]});

    println!("gateway load: {requests} requests, concurrency {concurrency}");
    for _ in 0..requests * 2 + concurrency * 2 {
        llm.push(Reply::text("pong").with_usage(5, 1));
    }
    // Warm-up (connections, first transcripts), not measured.
    let _ = drive(
        &client,
        &format!("{}/chat/completions", llm.openai_base_url()),
        &body,
        concurrency,
        concurrency,
        false,
    )
    .await;
    let _ = drive(
        &client,
        &format!("http://{addr}/v1/chat/completions"),
        &body,
        concurrency,
        concurrency,
        true,
    )
    .await;

    let direct = drive(
        &client,
        &format!("{}/chat/completions", llm.openai_base_url()),
        &body,
        requests,
        concurrency,
        false,
    )
    .await;
    let through = drive(
        &client,
        &format!("http://{addr}/v1/chat/completions"),
        &body,
        requests,
        concurrency,
        true,
    )
    .await;
    print("direct", &direct);
    print("gateway", &through);
    println!(
        "ratio      gateway/direct throughput {:.2}   p50 latency x{:.1}   p99 latency x{:.1}",
        through.rps / direct.rps.max(f64::EPSILON),
        through.p50.as_secs_f64() / direct.p50.as_secs_f64().max(f64::EPSILON),
        through.p99.as_secs_f64() / direct.p99.as_secs_f64().max(f64::EPSILON),
    );

    // 1,000 sessions, each with one turn on disk.
    for _ in 0..sessions + ws_clients {
        llm.push(Reply::text("hello").with_usage(5, 1));
    }
    let t = Instant::now();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let (client, next) = (client.clone(), next.clone());
        let url = format!("http://{addr}/v1/chat/completions");
        let body = body.clone();
        workers.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= sessions {
                    break;
                }
                let _ = client
                    .post(&url)
                    .header("X-Ferroclaw-Session-Key", format!("session-{i}"))
                    .json(&body)
                    .send()
                    .await
                    .map(|r| r.bytes());
            }
        }));
    }
    for w in workers {
        let _ = w.await;
    }
    println!(
        "sessions   {sessions} created in {:.2} s",
        t.elapsed().as_secs_f64()
    );

    // 200 WebSocket clients at once, each connected and running one turn.
    let t = Instant::now();
    let mut socks = Vec::new();
    for _ in 0..ws_clients {
        if let Ok((ws, _)) = tokio_tungstenite::connect_async(format!("ws://{addr}/ws")).await {
            socks.push(ws);
        }
    }
    let opened = socks.len();
    let mut tasks = Vec::new();
    for (i, mut ws) in socks.into_iter().enumerate() {
        tasks.push(tokio::spawn(async move {
            let frames = [
                json!({"type": "req", "id": "c", "method": "connect", "params": {"user_id": format!("u{i}"), "token": BENCH_TOKEN}}),
                json!({"type": "req", "id": "s", "method": "chat.send", "params": {"message": "hi", "sessionKey": format!("ws-{i}")}}),
            ];
            for f in frames {
                if ws.send(Message::text(f.to_string())).await.is_err() {
                    return (false, ws);
                }
            }
            // Bounded: stop at the chat.send answer or after 10,000 frames.
            for _ in 0..10_000 {
                match ws.next().await {
                    Some(Ok(Message::Text(t))) => {
                        let v: Value = serde_json::from_str(t.as_str()).unwrap_or(Value::Null);
                        if v["type"] == "res" && v["id"] == "s" {
                            return (v["ok"] == true, ws);
                        }
                    }
                    Some(Ok(_)) => {}
                    _ => break,
                }
            }
            (false, ws)
        }));
    }
    let mut ok = 0;
    let mut keep = Vec::new();
    for t in tasks {
        if let Ok((good, ws)) = t.await {
            ok += usize::from(good);
            keep.push(ws);
        }
    }
    println!(
        "ws         {opened} clients connected, {ok} turns answered in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let hwm = proc_status_kb(pid, "VmHWM:").unwrap_or(0);
    let rss = proc_status_kb(pid, "VmRSS:").unwrap_or(0);
    println!(
        "memory     gateway peak RSS {:.1} MB (now {:.1} MB, {:.1} MB right after start-up)",
        hwm as f64 / 1024.0,
        rss as f64 / 1024.0,
        rss_start as f64 / 1024.0
    );
    drop(keep);
    abuse(&addr, pid).await;
    // Closing the child's stdin is its shutdown signal.
    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(15), gateway.wait()).await;
}

/// What an attacker's idle sockets cost and how fast they are cut: 10,000 WebSockets
/// that never send `connect` (closed by the server after `connect_timeout_seconds`),
/// then 500 connections that drip their headers (slowloris).
async fn abuse(addr: &str, pid: u32) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const IDLE_WS: usize = 10_000;
    const SLOWLORIS: usize = 500;
    let rss = || proc_status_kb(pid, "VmRSS:").unwrap_or(0) as f64 / 1024.0;
    let before = rss();
    let t = Instant::now();
    let sem = Arc::new(tokio::sync::Semaphore::new(256));
    let mut tasks = Vec::with_capacity(IDLE_WS);
    for _ in 0..IDLE_WS {
        let (sem, url) = (sem.clone(), format!("ws://{addr}/ws"));
        tasks.push(tokio::spawn(async move {
            let permit = sem.acquire_owned().await.ok();
            let Ok((mut ws, _)) = tokio_tungstenite::connect_async(url).await else {
                return None;
            };
            drop(permit);
            let opened = Instant::now();
            // Bounded: the server must close within its connect time-out.
            let closed = tokio::time::timeout(Duration::from_secs(60), async {
                while let Some(Ok(m)) = ws.next().await {
                    if matches!(m, Message::Close(_)) {
                        break;
                    }
                }
            })
            .await
            .is_ok();
            Some((closed, opened.elapsed()))
        }));
    }
    // Sample the gateway's memory while the sockets are open.
    let mut peak = before;
    let sampler_done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let done = sampler_done.clone();
        tokio::spawn(async move {
            let mut peak = 0.0f64;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(proc_status_kb(pid, "VmRSS:").unwrap_or(0) as f64 / 1024.0);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            peak
        })
    };
    let (mut opened, mut closed, mut longest) = (0, 0, Duration::ZERO);
    for task in tasks {
        if let Ok(Some((c, held))) = task.await {
            opened += 1;
            closed += usize::from(c);
            longest = longest.max(held);
        }
    }
    sampler_done.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Ok(p) = sampler.await {
        peak = peak.max(p);
    }
    let right_after = rss();
    // The gateway gives freed memory back within its release interval (5 s).
    tokio::time::sleep(Duration::from_secs(6)).await;
    println!(
        "idle ws    {opened}/{IDLE_WS} opened without connect, {closed} closed by the server (longest held {:.1} s) in {:.1} s; RSS {before:.1} MB before, peak {peak:.1} MB, {right_after:.1} MB right after, {:.1} MB 6 s later",
        longest.as_secs_f64(),
        t.elapsed().as_secs_f64(),
        rss()
    );

    let t = Instant::now();
    let mut tasks = Vec::with_capacity(SLOWLORIS);
    for _ in 0..SLOWLORIS {
        let addr = addr.to_string();
        tasks.push(tokio::spawn(async move {
            let mut s = tokio::net::TcpStream::connect(&addr).await.ok()?;
            let opened = Instant::now();
            s.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                .await
                .ok()?;
            // Drip a header byte a second until the server hangs up (bounded).
            for _ in 0..60 {
                if s.write_all(b"X").await.is_err() {
                    break;
                }
                let mut buf = [0u8; 256];
                match tokio::time::timeout(Duration::from_secs(1), s.read(&mut buf)).await {
                    Ok(Ok(0)) | Ok(Err(_)) => break,
                    _ => {}
                }
            }
            Some(opened.elapsed())
        }));
    }
    let mut cut = Vec::new();
    for task in tasks {
        if let Ok(Some(held)) = task.await {
            cut.push(held);
        }
    }
    cut.sort();
    println!(
        "slowloris  {} connections dripping headers, cut after p50 {:.1} s / max {:.1} s (run {:.1} s); RSS now {:.1} MB",
        cut.len(),
        cut.get(cut.len() / 2).map_or(0.0, Duration::as_secs_f64),
        cut.last().map_or(0.0, Duration::as_secs_f64),
        t.elapsed().as_secs_f64(),
        rss()
    );
}
