//! The trace collector: a [`RunObserver`] that turns each run's events into one trace
//! (the agent span, a span per model call with its tokens, finish reason and time to
//! first token, a span per tool call) and hands finished traces to a writer task
//! through a bounded queue. A run never waits for it: when the queue is full the trace
//! is dropped, counted and logged; when the storage fails the batch is logged and the
//! writer goes on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferroclaw_agent::{RunError, RunOutput};
use ferroclaw_config::settings::{ModelPrice, TracingSettings};
use ferroclaw_store::{SpanRecord, TraceRecord, TraceStore};
use ferroclaw_types::{EventKind, RunEvent, Usage};
use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};

use crate::door::{RunInfo, RunObserver};

/// Characters of a message, argument or result kept unless `tracing.verbose`.
pub const PREVIEW_CHARS: usize = 500;

/// Traces written to the storage in one transaction at most.
const BATCH: usize = 64;

/// How often old traces are pruned.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

enum Job {
    Write(Box<(TraceRecord, Vec<SpanRecord>)>),
    /// Answered once everything queued before it is written.
    Flush(oneshot::Sender<()>),
}

/// What the collector has done since the process started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TraceStats {
    pub written: u64,
    /// Not queued: the queue was full.
    pub dropped: u64,
    /// Queued but the storage refused the batch.
    pub failed: u64,
}

#[derive(Default)]
struct Counters {
    written: AtomicU64,
    dropped: AtomicU64,
    failed: AtomicU64,
}

pub struct TraceCollector {
    tx: mpsc::Sender<Job>,
    runs: Mutex<HashMap<String, RunTrace>>,
    verbose: bool,
    /// `provider/model` → price.
    prices: HashMap<String, ModelPrice>,
    counters: Arc<Counters>,
}

/// A run's trace while it runs.
struct RunTrace {
    trace: TraceRecord,
    spans: Vec<SpanRecord>,
    started: Instant,
    /// The model call in flight: its span and when it was asked.
    llm: Option<(usize, Instant, Option<Duration>)>,
    /// Tool calls in flight, by call id.
    tools: HashMap<String, usize>,
    agent_attrs: serde_json::Map<String, Value>,
}

impl TraceCollector {
    /// Starts the writer task on the current runtime. A trace still `running` after
    /// `stale_after` (longer than any run may last) belonged to a process that ended
    /// mid-run: the writer marks it `lost`.
    pub fn start(
        store: Arc<dyn TraceStore>,
        settings: &TracingSettings,
        stale_after: Duration,
    ) -> Arc<TraceCollector> {
        let (tx, rx) = mpsc::channel(settings.queue.max(1));
        let counters = Arc::new(Counters::default());
        tokio::spawn(writer(
            store,
            rx,
            counters.clone(),
            settings.retention,
            stale_after,
        ));
        Arc::new(TraceCollector {
            tx,
            runs: Mutex::new(HashMap::new()),
            verbose: settings.verbose,
            prices: settings
                .prices
                .iter()
                .map(|p| (format!("{}/{}", p.provider, p.model), p.clone()))
                .collect(),
            counters,
        })
    }

    pub fn stats(&self) -> TraceStats {
        TraceStats {
            written: self.counters.written.load(Ordering::Relaxed),
            dropped: self.counters.dropped.load(Ordering::Relaxed),
            failed: self.counters.failed.load(Ordering::Relaxed),
        }
    }

    /// Waits until every trace queued so far is written (or failed): for a process
    /// about to exit.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Job::Flush(tx)).await.is_ok() {
            let _ = rx.await;
        }
    }

    fn runs(&self) -> std::sync::MutexGuard<'_, HashMap<String, RunTrace>> {
        self.runs.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn queue(&self, trace: TraceRecord, spans: Vec<SpanRecord>) {
        if self
            .tx
            .try_send(Job::Write(Box::new((trace, spans))))
            .is_err()
        {
            let n = self.counters.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            // The first drop, then one line per thousand: a flood must not flood the log.
            if n == 1 || n.is_multiple_of(1000) {
                tracing::warn!(
                    dropped = n,
                    "trace queue full (tracing.queue): traces are being dropped; the storage is slower than the runs"
                );
            }
        }
    }

    fn preview(&self, text: &str) -> String {
        if self.verbose {
            text.to_string()
        } else {
            cut(text, PREVIEW_CHARS)
        }
    }

    fn cost(&self, provider: &str, model: &str, usage: &Usage) -> f64 {
        let Some(p) = self.prices.get(&format!("{provider}/{model}")) else {
            return 0.0;
        };
        // `input` counts the prompt tokens not read from the cache (both wire formats).
        (usage.input as f64 * p.input
            + usage.cache_read as f64 * p.cached
            + usage.output as f64 * p.output)
            / 1_000_000.0
    }
}

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

fn span(trace_id: &str, n: usize, kind: &str, name: &str) -> SpanRecord {
    SpanRecord {
        trace_id: trace_id.to_string(),
        span_id: format!("{trace_id}.{n}"),
        parent_span: Some(trace_id.to_string()),
        kind: kind.into(),
        name: name.into(),
        started_at: ferroclaw_types::now_millis(),
        ended_at: None,
        status: "running".into(),
        error: None,
        provider: None,
        model: None,
        input_tokens: 0,
        output_tokens: 0,
        cached_tokens: 0,
        cost_usd: 0.0,
        attrs: json!({}),
    }
}

fn attr(s: &mut SpanRecord, key: &str, value: Value) {
    if let Value::Object(map) = &mut s.attrs {
        map.insert(key.to_string(), value);
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl RunObserver for TraceCollector {
    fn run_started(&self, run: &RunInfo) {
        // A subagent of a shared agent runs as no one; its usage is still its
        // requester's.
        let user_id = run.user.clone().or_else(|| {
            let parent = run.parent_run_id.as_ref()?;
            self.runs().get(parent)?.trace.user_id.clone()
        });
        let trace = TraceRecord {
            id: run.run_id.clone(),
            parent_id: run.parent_run_id.clone(),
            agent_id: run.agent_id.clone(),
            session_key: run.session_key.clone(),
            user_id,
            origin: run.origin.as_str().to_string(),
            status: "running".into(),
            error: None,
            started_at: ferroclaw_types::now_millis(),
            ended_at: None,
            provider: None,
            model: None,
            input_tokens: 0,
            output_tokens: 0,
            cached_tokens: 0,
            cost_usd: 0.0,
            llm_calls: 0,
            tool_calls: 0,
            input: self.preview(&run.message),
            output: String::new(),
        };
        // Written at once so a run that never ends (a crash, a hang) is still listed.
        self.queue(trace.clone(), Vec::new());
        self.runs().insert(
            run.run_id.clone(),
            RunTrace {
                trace,
                spans: Vec::new(),
                started: Instant::now(),
                llm: None,
                tools: HashMap::new(),
                agent_attrs: serde_json::Map::new(),
            },
        );
    }

    fn event(&self, run: &RunInfo, event: &RunEvent) {
        let mut runs = self.runs();
        let Some(t) = runs.get_mut(&run.run_id) else {
            return;
        };
        let id = t.trace.id.clone();
        match &event.kind {
            EventKind::ModelRequest {
                iteration,
                messages,
                estimated_tokens,
            } => {
                if let Some((open, _, _)) = t.llm.take() {
                    // Asked again within the iteration (the context was compacted).
                    let s = &mut t.spans[open];
                    s.status = "error".into();
                    s.error = Some("asked again after a context overflow".into());
                    s.ended_at = Some(ferroclaw_types::now_millis());
                }
                let mut s = span(&id, t.spans.len() + 1, "llm", "llm.call");
                s.attrs = json!({
                    "iteration": iteration,
                    "messages": messages,
                    "estimatedTokens": estimated_tokens,
                });
                t.llm = Some((t.spans.len(), Instant::now(), None));
                t.spans.push(s);
            }
            EventKind::AssistantDelta { .. } | EventKind::ReasoningDelta { .. } => {
                if let Some((_, asked, first @ None)) = &mut t.llm {
                    *first = Some(asked.elapsed());
                }
            }
            EventKind::ModelRetry {
                attempt,
                status,
                error,
                ..
            } => {
                if let Some((open, _, _)) = t.llm {
                    let s = &mut t.spans[open];
                    attr(s, "retries", json!(attempt));
                    attr(s, "lastError", json!({"status": status, "error": error}));
                }
            }
            EventKind::ModelResponse {
                provider,
                model,
                usage,
                stop_reason,
                output_chars,
                elapsed_ms,
                ..
            } => {
                let Some((open, asked, first)) = t.llm.take() else {
                    return;
                };
                let cost = self.cost(provider, model, usage);
                let s = &mut t.spans[open];
                s.ended_at = Some(ferroclaw_types::now_millis());
                s.status = "ok".into();
                s.provider = Some(provider.clone());
                s.model = Some(model.clone());
                s.input_tokens = usage.input;
                s.output_tokens = usage.output;
                s.cached_tokens = usage.cache_read;
                s.cost_usd = cost;
                attr(s, "finishReason", json!(stop_reason));
                attr(s, "outputChars", json!(output_chars));
                attr(s, "elapsedMs", json!(elapsed_ms));
                // No delta at all (a reply in one piece): the first token came with it.
                attr(
                    s,
                    "timeToFirstTokenMs",
                    json!(millis(first.unwrap_or_else(|| asked.elapsed()))),
                );
                t.trace.provider = Some(provider.clone());
                t.trace.model = Some(model.clone());
            }
            EventKind::ToolIntents {
                names, strategy, ..
            } => {
                if let Some(s) = t.spans.iter_mut().rev().find(|s| s.kind == "llm") {
                    attr(s, "toolCalls", json!(names));
                    attr(s, "toolCallsFrom", json!(strategy));
                }
            }
            EventKind::ToolStart {
                call_id,
                name,
                arguments,
            } => {
                let mut s = span(&id, t.spans.len() + 1, "tool", name);
                let args = arguments.to_string();
                s.attrs = json!({"callId": call_id, "arguments": self.preview(&args)});
                t.tools.insert(call_id.clone(), t.spans.len());
                t.spans.push(s);
            }
            EventKind::ToolResult {
                call_id,
                is_error,
                duration_ms,
                preview,
                ..
            } => {
                let Some(at) = t.tools.remove(call_id) else {
                    return;
                };
                let s = &mut t.spans[at];
                s.ended_at = Some(ferroclaw_types::now_millis());
                s.status = if *is_error { "error" } else { "ok" }.into();
                if *is_error {
                    s.error = Some(preview.clone());
                }
                attr(s, "durationMs", json!(duration_ms));
                attr(s, "output", json!(preview));
            }
            EventKind::RunStalled {
                idle_ms,
                waiting_on,
            } => {
                t.agent_attrs.insert(
                    "stalled".into(),
                    json!({"idleMs": idle_ms, "waitingOn": waiting_on}),
                );
            }
            EventKind::LifecycleEnd { text, .. } => t.trace.output = cut(text, PREVIEW_CHARS),
            EventKind::LifecycleError { message } => t.trace.error = Some(message.clone()),
            _ => {}
        }
    }

    fn run_finished(
        &self,
        run: &RunInfo,
        result: &Result<RunOutput, RunError>,
        _elapsed: Duration,
    ) {
        let Some(mut t) = self.runs().remove(&run.run_id) else {
            return;
        };
        let now = ferroclaw_types::now_millis();
        let (status, error) = match result {
            Ok(_) => ("ok".to_string(), None),
            Err(e) => (e.kind().to_string(), Some(e.to_string())),
        };
        // What was still running when the run ended was cut short by its end.
        for s in t.spans.iter_mut().filter(|s| s.ended_at.is_none()) {
            s.ended_at = Some(now);
            s.status = "interrupted".into();
            s.error
                .get_or_insert_with(|| format!("the run ended: {status}"));
        }
        for s in t.spans.iter().filter(|s| s.kind == "llm") {
            t.trace.llm_calls += 1;
            t.trace.input_tokens += s.input_tokens;
            t.trace.output_tokens += s.output_tokens;
            t.trace.cached_tokens += s.cached_tokens;
            t.trace.cost_usd += s.cost_usd;
        }
        t.trace.tool_calls = t.spans.iter().filter(|s| s.kind == "tool").count() as u32;
        if let Ok(out) = result {
            if !out.provider.is_empty() {
                t.trace.provider = Some(out.provider.clone());
                t.trace.model = Some(out.model.clone());
            }
        }
        t.trace.status = status.clone();
        t.trace.error = error.or(t.trace.error.take());
        t.trace.ended_at = Some(now);
        t.agent_attrs
            .insert("durationMs".into(), json!(millis(t.started.elapsed())));
        let root = SpanRecord {
            trace_id: t.trace.id.clone(),
            span_id: t.trace.id.clone(),
            parent_span: None,
            kind: "agent".into(),
            name: t.trace.agent_id.clone(),
            started_at: t.trace.started_at,
            ended_at: Some(now),
            status: if status == "ok" { "ok" } else { "error" }.into(),
            error: t.trace.error.clone(),
            provider: t.trace.provider.clone(),
            model: t.trace.model.clone(),
            input_tokens: t.trace.input_tokens,
            output_tokens: t.trace.output_tokens,
            cached_tokens: t.trace.cached_tokens,
            cost_usd: t.trace.cost_usd,
            attrs: Value::Object(t.agent_attrs),
        };
        let mut spans = Vec::with_capacity(t.spans.len() + 1);
        spans.push(root);
        spans.extend(t.spans);
        self.queue(t.trace, spans);
    }
}

async fn writer(
    store: Arc<dyn TraceStore>,
    mut rx: mpsc::Receiver<Job>,
    counters: Arc<Counters>,
    retention: Option<Duration>,
    stale_after: Duration,
) {
    let mut prune = tokio::time::interval(PRUNE_EVERY);
    let mut jobs = Vec::with_capacity(BATCH);
    loop {
        tokio::select! {
            n = rx.recv_many(&mut jobs, BATCH) => {
                if n == 0 {
                    return;
                }
                let mut batch = Vec::with_capacity(n);
                let mut flushes = Vec::new();
                for job in jobs.drain(..) {
                    match job {
                        Job::Write(w) => batch.push(*w),
                        Job::Flush(done) => flushes.push(done),
                    }
                }
                let size = batch.len() as u64;
                match store.record(batch).await {
                    Ok(()) => {
                        counters.written.fetch_add(size, Ordering::Relaxed);
                    }
                    Err(e) => {
                        counters.failed.fetch_add(size, Ordering::Relaxed);
                        tracing::warn!(error = %e, traces = size, "traces could not be written");
                    }
                }
                for done in flushes {
                    let _ = done.send(());
                }
            }
            _ = prune.tick() => {
                let stale = ferroclaw_types::now_millis()
                    - i64::try_from(stale_after.as_millis()).unwrap_or(i64::MAX);
                match store.abandon(stale).await {
                    Ok(0) => {}
                    Ok(n) => tracing::warn!(traces = n, "runs left unfinished by an ended process marked lost"),
                    Err(e) => tracing::warn!(error = %e, "unfinished traces could not be marked"),
                }
                if let Some(keep) = retention {
                    let before = ferroclaw_types::now_millis()
                        - i64::try_from(keep.as_millis()).unwrap_or(i64::MAX);
                    match store.prune(before).await {
                        Ok(0) => {}
                        Ok(n) => tracing::info!(traces = n, "old traces pruned (tracing.retention_days)"),
                        Err(e) => tracing::warn!(error = %e, "old traces could not be pruned"),
                    }
                }
            }
        }
    }
}

/// Why traces could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("traces are not kept here (tracing.enabled is false, or the storage keeps none)")]
    Off,
    #[error("{0}")]
    Invalid(String),
    #[error("trace storage: {0}")]
    Store(#[from] ferroclaw_store::StoreError),
}

/// Who reads traces: a user sees the traces of their own runs only; the operator
/// (acting for no user) sees all.
#[derive(Debug, Clone, Copy)]
pub struct TraceReader<'a> {
    pub user: Option<&'a str>,
}

impl TraceReader<'_> {
    /// `filter` narrowed to what this reader may see.
    pub fn scope(
        &self,
        mut filter: ferroclaw_store::TraceFilter,
    ) -> Result<ferroclaw_store::TraceFilter, TraceError> {
        if let Some(own) = self.user {
            match filter.user_id.as_deref() {
                Some(other) if other != own => {
                    return Err(TraceError::Invalid(format!(
                        "you can read your own traces only, not user {other:?}'s"
                    )))
                }
                _ => filter.user_id = Some(own.to_string()),
            }
        }
        Ok(filter)
    }

    /// Whether this reader may see `trace` (one that is not theirs is reported as
    /// missing, like one that does not exist).
    pub fn may_read(&self, trace: &TraceRecord) -> bool {
        self.user
            .is_none_or(|own| trace.user_id.as_deref() == Some(own))
    }
}
