//! What is kept of each run for `GET /v1/traces` and the usage summaries, in both
//! backends: one trace per run (who, where from, status, token sums, previews) and its
//! spans (the agent, each model call, each tool call). Written in batches by the
//! runtime's collector, never on a run's own path.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::StoreError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TraceRecord {
    /// The run id.
    pub id: String,
    /// The run whose tool started this one (a subagent, `sessions_send`).
    pub parent_id: Option<String>,
    pub agent_id: String,
    /// As stored (scoped to the user on a per-user agent).
    pub session_key: String,
    pub user_id: Option<String>,
    /// `http`, `websocket`, `cron`, `channel`, …
    pub origin: String,
    /// `running`, `ok`, or the run error's kind (`aborted`, `stalled`, `timeout`, …).
    pub status: String,
    pub error: Option<String>,
    /// Epoch ms.
    pub started_at: i64,
    pub ended_at: Option<i64>,
    /// The model that gave the last answer.
    pub provider: Option<String>,
    pub model: Option<String>,
    /// Prompt tokens not read from the provider's cache (those are `cached_tokens`).
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_tokens: u64,
    pub cost_usd: f64,
    pub llm_calls: u32,
    pub tool_calls: u32,
    /// The user's message (a preview unless `tracing.verbose`).
    pub input: String,
    /// The answer's preview.
    pub output: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpanRecord {
    pub trace_id: String,
    pub span_id: String,
    pub parent_span: Option<String>,
    /// `agent`, `llm` or `tool`.
    pub kind: String,
    pub name: String,
    pub started_at: i64,
    pub ended_at: Option<i64>,
    /// `ok`, `error`, or `interrupted`.
    pub status: String,
    pub error: Option<String>,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_tokens: u64,
    pub cost_usd: f64,
    /// Everything else: iteration, finish reason, time to first token, arguments, …
    pub attrs: Value,
}

/// Which traces to list, newest first. Every field narrows the list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceFilter {
    pub agent_id: Option<String>,
    pub user_id: Option<String>,
    pub session_key: Option<String>,
    pub status: Option<String>,
    /// Epoch ms, inclusive.
    pub since: Option<i64>,
    /// Epoch ms, exclusive.
    pub until: Option<i64>,
    pub limit: usize,
    /// Where the previous page ended ([`TracePage::next_cursor`]).
    pub cursor: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TracePage {
    pub traces: Vec<TraceRecord>,
    /// `None`: this was the last page.
    pub next_cursor: Option<String>,
}

/// How usage is summed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageGroup {
    Agent,
    Model,
    User,
    /// UTC day, `YYYY-MM-DD`.
    Day,
}

impl UsageGroup {
    pub fn parse(s: &str) -> Option<UsageGroup> {
        Some(match s {
            "agent" => UsageGroup::Agent,
            "model" => UsageGroup::Model,
            "user" => UsageGroup::User,
            "day" => UsageGroup::Day,
            _ => return None,
        })
    }
}

/// Token and cost sums of the model calls in a time range.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageQuery<'a> {
    pub since: Option<i64>,
    pub until: Option<i64>,
    /// Only this user's calls.
    pub user_id: Option<&'a str>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageRow {
    /// The agent id, `provider/model`, the user id (empty: none) or the day.
    pub key: String,
    pub calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_tokens: u64,
    pub cost_usd: f64,
}

#[async_trait]
pub trait TraceStore: Send + Sync {
    /// Writes each trace (replacing an earlier version of it, e.g. the `running` one)
    /// with its spans.
    async fn record(&self, batch: Vec<(TraceRecord, Vec<SpanRecord>)>) -> Result<(), StoreError>;
    async fn list(&self, filter: &TraceFilter) -> Result<TracePage, StoreError>;
    /// The trace, its spans in start order, and the ids of the traces it started.
    async fn get(
        &self,
        id: &str,
    ) -> Result<Option<(TraceRecord, Vec<SpanRecord>, Vec<String>)>, StoreError>;
    /// Sums of the model calls in the range, by `group`, largest cost first.
    async fn usage(
        &self,
        group: UsageGroup,
        query: UsageQuery<'_>,
    ) -> Result<Vec<UsageRow>, StoreError>;
    /// Forgets traces that started before `before` (epoch ms); returns how many.
    async fn prune(&self, before: i64) -> Result<u64, StoreError>;
    /// Marks traces still `running` that started before `before` as `lost` (the process
    /// running them ended without finishing them); returns how many.
    async fn abandon(&self, before: i64) -> Result<u64, StoreError>;
    /// Forgets every trace of a session (it was deleted: what it said goes with it).
    async fn forget_session(&self, agent_id: &str, session_key: &str) -> Result<u64, StoreError>;
}

/// Why a trace is `lost`.
pub(crate) const LOST: &str = "the process running it ended before the run did";

/// The keyset cursor after `t`: its start and id.
pub(crate) fn cursor_after(t: &TraceRecord) -> String {
    format!("{}:{}", t.started_at, t.id)
}

/// A cursor's start and id; a malformed one is a caller's mistake.
pub(crate) fn parse_cursor(cursor: &str) -> Result<(i64, String), StoreError> {
    cursor
        .split_once(':')
        .and_then(|(at, id)| Some((at.parse().ok()?, id.to_string())))
        .ok_or_else(|| {
            StoreError::InvalidKey(format!("cursor {cursor:?} is not one this API gave"))
        })
}

/// Page size bounds: a caller asking for 0 gets the default, never more than the cap.
pub(crate) fn page_size(limit: usize) -> usize {
    match limit {
        0 => 50,
        n => n.min(500),
    }
}

/// A value bound to a statement; each backend maps it to its own parameter type.
pub(crate) enum Arg {
    Int(i64),
    Text(String),
}

/// A statement and its arguments, for backends that number placeholders with `mark`
/// (`?1` for SQLite, `$1` for PostgreSQL).
pub(crate) struct Statement {
    pub sql: String,
    pub args: Vec<Arg>,
}

impl Statement {
    fn new(sql: String) -> Self {
        Statement {
            sql,
            args: Vec::new(),
        }
    }

    /// Appends ` AND <condition>` with `{}` standing for the argument's placeholder.
    fn and(&mut self, condition: &str, arg: Arg, mark: fn(usize) -> String) {
        self.args.push(arg);
        let at = mark(self.args.len());
        self.sql.push_str(" AND ");
        self.sql.push_str(&condition.replace("{}", &at));
    }
}

/// The page of `filter` (one row more than the page, which says whether another
/// follows), newest first. Only the predicates asked for are written, so the database
/// picks the index that matches.
pub(crate) fn list_statement(
    filter: &TraceFilter,
    columns: &str,
    mark: fn(usize) -> String,
) -> Result<(Statement, usize), StoreError> {
    let limit = page_size(filter.limit);
    let mut st = Statement::new(format!("SELECT {columns} FROM traces WHERE TRUE"));
    for (column, value) in [
        ("agent_id", &filter.agent_id),
        ("user_id", &filter.user_id),
        ("session_key", &filter.session_key),
        ("status", &filter.status),
    ] {
        if let Some(v) = value {
            st.and(&format!("{column} = {{}}"), Arg::Text(v.clone()), mark);
        }
    }
    if let Some(since) = filter.since {
        st.and("started_at >= {}", Arg::Int(since), mark);
    }
    if let Some(until) = filter.until {
        st.and("started_at < {}", Arg::Int(until), mark);
    }
    if let Some((at, id)) = filter.cursor.as_deref().map(parse_cursor).transpose()? {
        st.args.push(Arg::Int(at));
        let a = mark(st.args.len());
        st.args.push(Arg::Text(id));
        let b = mark(st.args.len());
        st.sql.push_str(&format!(
            " AND (started_at < {a} OR (started_at = {a} AND id < {b}))"
        ));
    }
    st.sql.push_str(&format!(
        " ORDER BY started_at DESC, id DESC LIMIT {}",
        limit + 1
    ));
    Ok((st, limit))
}

/// Keeps a page of `limit` out of `rows` and says where the next one starts.
pub(crate) fn into_page(mut traces: Vec<TraceRecord>, limit: usize) -> TracePage {
    let next_cursor = if traces.len() > limit {
        traces.truncate(limit);
        traces.last().map(cursor_after)
    } else {
        None
    };
    TracePage {
        traces,
        next_cursor,
    }
}

/// Sums of the model-call spans by `key` (an SQL expression: the backends differ on
/// dates): key, calls, input, output, cached tokens, cost.
pub(crate) fn usage_statement(
    key: &str,
    query: UsageQuery<'_>,
    mark: fn(usize) -> String,
) -> Statement {
    let mut st = Statement::new(format!(
        // PostgreSQL sums integers as numeric: cast back so both backends read integers.
        "SELECT {key} AS k, COUNT(*), CAST(SUM(input_tokens) AS BIGINT),
                CAST(SUM(output_tokens) AS BIGINT), CAST(SUM(cached_tokens) AS BIGINT), SUM(cost_usd)
         FROM trace_spans WHERE kind = 'llm'"
    ));
    if let Some(since) = query.since {
        st.and("started_at >= {}", Arg::Int(since), mark);
    }
    if let Some(until) = query.until {
        st.and("started_at < {}", Arg::Int(until), mark);
    }
    if let Some(user) = query.user_id {
        st.and("user_id = {}", Arg::Text(user.to_owned()), mark);
    }
    st.sql
        .push_str(" GROUP BY k ORDER BY SUM(cost_usd) DESC, SUM(input_tokens) DESC, k");
    st
}
