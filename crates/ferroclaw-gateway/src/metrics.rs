//! Prometheus metrics, served as text at `GET /metrics`.

use std::sync::atomic::AtomicI64;
use std::sync::Mutex;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

pub struct Metrics {
    registry: Registry,
    http_requests: Family<Labels, Counter>,
    active_runs: Gauge<i64, AtomicI64>,
    queued_messages: Gauge<i64, AtomicI64>,
    run_duration: Histogram,
    runs: Family<Labels, Counter>,
    llm_calls: Family<Labels, Counter>,
    llm_tokens: Family<Labels, Counter>,
    tool_calls: Family<Labels, Counter>,
    ws_connections: Gauge<i64, AtomicI64>,
    ws_connections_total: Counter,
    ws_dropped_slow: Counter,
    rate_limited: Counter,
    /// Encoding takes `&Registry` but concurrent scrapes must not interleave output.
    encode_lock: Mutex<()>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("ferroclaw");
        let http_requests = Family::<Labels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests by route, method and status",
            http_requests.clone(),
        );
        let active_runs = Gauge::<i64, AtomicI64>::default();
        registry.register(
            "active_runs",
            "Agent runs executing now",
            active_runs.clone(),
        );
        let queued_messages = Gauge::<i64, AtomicI64>::default();
        registry.register(
            "queued_messages",
            "Messages waiting in session queues",
            queued_messages.clone(),
        );
        let run_duration = Histogram::new(exponential_buckets(0.005, 2.0, 16));
        registry.register(
            "run_duration_seconds",
            "Wall time of agent runs",
            run_duration.clone(),
        );
        let runs = Family::<Labels, Counter>::default();
        registry.register(
            "runs",
            "Finished agent runs by agent and outcome",
            runs.clone(),
        );
        let llm_calls = Family::<Labels, Counter>::default();
        registry.register(
            "llm_calls",
            "LLM calls by provider and model",
            llm_calls.clone(),
        );
        let llm_tokens = Family::<Labels, Counter>::default();
        registry.register(
            "llm_tokens",
            "LLM tokens by provider, model and direction",
            llm_tokens.clone(),
        );
        let tool_calls = Family::<Labels, Counter>::default();
        registry.register(
            "tool_calls",
            "Tool calls by name and outcome",
            tool_calls.clone(),
        );
        let ws_connections = Gauge::<i64, AtomicI64>::default();
        registry.register(
            "ws_connections",
            "Open WebSocket connections",
            ws_connections.clone(),
        );
        let ws_connections_total = Counter::default();
        registry.register(
            "ws_connections_opened",
            "WebSocket connections accepted",
            ws_connections_total.clone(),
        );
        let ws_dropped_slow = Counter::default();
        registry.register(
            "ws_slow_clients_dropped",
            "WebSocket clients dropped because their send buffer was full",
            ws_dropped_slow.clone(),
        );
        let rate_limited = Counter::default();
        registry.register(
            "rate_limited",
            "Requests refused by the rate limit",
            rate_limited.clone(),
        );
        Metrics {
            registry,
            http_requests,
            active_runs,
            queued_messages,
            run_duration,
            runs,
            llm_calls,
            llm_tokens,
            tool_calls,
            ws_connections,
            ws_connections_total,
            ws_dropped_slow,
            rate_limited,
            encode_lock: Mutex::new(()),
        }
    }

    pub fn http_request(&self, route: &str, method: &str, status: u16) {
        self.http_requests
            .get_or_create(&labels(&[
                ("route", route),
                ("method", method),
                ("status", &status.to_string()),
            ]))
            .inc();
    }

    pub fn run_started(&self) {
        self.active_runs.inc();
    }

    pub fn run_finished(&self, agent: &str, outcome: &str, seconds: f64) {
        self.active_runs.dec();
        self.run_duration.observe(seconds);
        self.runs
            .get_or_create(&labels(&[("agent", agent), ("outcome", outcome)]))
            .inc();
    }

    pub fn llm_usage(&self, provider: &str, model: &str, calls: u64, input: u64, output: u64) {
        let base = [("provider", provider), ("model", model)];
        self.llm_calls.get_or_create(&labels(&base)).inc_by(calls);
        for (dir, n) in [("input", input), ("output", output)] {
            self.llm_tokens
                .get_or_create(&labels(&[base[0], base[1], ("direction", dir)]))
                .inc_by(n);
        }
    }

    pub fn tool_call(&self, name: &str, is_error: bool) {
        let outcome = if is_error { "error" } else { "ok" };
        self.tool_calls
            .get_or_create(&labels(&[("tool", name), ("outcome", outcome)]))
            .inc();
    }

    pub fn ws_opened(&self) {
        self.ws_connections.inc();
        self.ws_connections_total.inc();
    }

    pub fn ws_closed(&self) {
        self.ws_connections.dec();
    }

    pub fn ws_slow_client(&self) {
        self.ws_dropped_slow.inc();
    }

    pub fn rate_limited(&self) {
        self.rate_limited.inc();
    }

    /// Prometheus text exposition; `queued` is sampled from the scheduler at scrape time.
    pub fn render(&self, queued: usize) -> String {
        self.queued_messages.set(queued as i64);
        let _guard = self.encode_lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// Every run of the gateway's runtime is counted, whoever started it (HTTP, WebSocket,
/// a session tool).
impl ferroclaw_runtime::RunObserver for Metrics {
    fn run_started(&self, _run: &ferroclaw_runtime::RunInfo) {
        Metrics::run_started(self);
    }

    fn run_finished(
        &self,
        run: &ferroclaw_runtime::RunInfo,
        result: &Result<ferroclaw_agent::RunOutput, ferroclaw_agent::RunError>,
        elapsed: std::time::Duration,
    ) {
        let outcome = match result {
            Ok(out) => {
                self.llm_usage(
                    &out.provider,
                    &out.model,
                    u64::from(out.iterations),
                    out.usage.input,
                    out.usage.output,
                );
                "ok"
            }
            Err(e) => e.kind(),
        };
        Metrics::run_finished(self, &run.agent_id, outcome, elapsed.as_secs_f64());
    }

    fn event(&self, _run: &ferroclaw_runtime::RunInfo, event: &ferroclaw_types::RunEvent) {
        if let ferroclaw_types::EventKind::ToolResult { name, is_error, .. } = &event.kind {
            self.tool_call(name, *is_error);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_family() {
        let m = Metrics::new();
        m.http_request("/v1/chat/completions", "POST", 200);
        m.run_started();
        m.run_finished("main", "ok", 0.02);
        m.llm_usage("scripted", "model-a", 2, 10, 5);
        m.tool_call("read", false);
        m.ws_opened();
        let text = m.render(0);
        for needle in [
            "ferroclaw_http_requests_total{route=\"/v1/chat/completions\",method=\"POST\",status=\"200\"} 1",
            "ferroclaw_active_runs 0",
            "ferroclaw_run_duration_seconds_bucket",
            "ferroclaw_llm_calls_total{provider=\"scripted\",model=\"model-a\"} 2",
            "ferroclaw_llm_tokens_total{provider=\"scripted\",model=\"model-a\",direction=\"input\"} 10",
            "ferroclaw_tool_calls_total{tool=\"read\",outcome=\"ok\"} 1",
            "ferroclaw_ws_connections 1",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
    }
}
