//! The embedded backend's [`TraceStore`]: `data/traces.db`. Lists are keyset-paged on
//! an index that matches the filter, so a page costs the same however many traces are
//! kept.

use async_trait::async_trait;
use rusqlite::types::Value as SqlValue;
use rusqlite::{params, params_from_iter, OptionalExtension};

use super::records::RecordsDb;
use crate::traces::{
    into_page, list_statement, usage_statement, Arg, SpanRecord, TraceFilter, TracePage,
    TraceRecord, TraceStore, UsageGroup, UsageQuery, UsageRow, LOST,
};
use crate::StoreError;

pub(crate) struct SqliteTraces {
    db: RecordsDb,
}

impl SqliteTraces {
    pub(crate) fn new(db: RecordsDb) -> SqliteTraces {
        SqliteTraces { db }
    }
}

const TRACE_COLUMNS: &str = "id, parent_id, agent_id, session_key, user_id, origin, status, error, started_at, ended_at, provider, model, input_tokens, output_tokens, cached_tokens, cost_usd, llm_calls, tool_calls, input, output";

const SPAN_COLUMNS: &str = "trace_id, span_id, parent_span, kind, name, started_at, ended_at, status, error, provider, model, input_tokens, output_tokens, cached_tokens, cost_usd, attrs";

fn values(args: Vec<Arg>) -> Vec<SqlValue> {
    args.into_iter()
        .map(|a| match a {
            Arg::Int(n) => SqlValue::Integer(n),
            Arg::Text(t) => SqlValue::Text(t),
        })
        .collect()
}

/// Counts are kept as SQLite integers (i64); none comes near its range.
fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn count(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<u64> {
    Ok(u64::try_from(r.get::<_, i64>(i)?).unwrap_or(0))
}

fn trace_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TraceRecord> {
    Ok(TraceRecord {
        id: r.get(0)?,
        parent_id: r.get(1)?,
        agent_id: r.get(2)?,
        session_key: r.get(3)?,
        user_id: r.get(4)?,
        origin: r.get(5)?,
        status: r.get(6)?,
        error: r.get(7)?,
        started_at: r.get(8)?,
        ended_at: r.get(9)?,
        provider: r.get(10)?,
        model: r.get(11)?,
        input_tokens: count(r, 12)?,
        output_tokens: count(r, 13)?,
        cached_tokens: count(r, 14)?,
        cost_usd: r.get(15)?,
        llm_calls: u32::try_from(count(r, 16)?).unwrap_or(u32::MAX),
        tool_calls: u32::try_from(count(r, 17)?).unwrap_or(u32::MAX),
        input: r.get(18)?,
        output: r.get(19)?,
    })
}

fn span_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SpanRecord> {
    let attrs: String = r.get(15)?;
    Ok(SpanRecord {
        trace_id: r.get(0)?,
        span_id: r.get(1)?,
        parent_span: r.get(2)?,
        kind: r.get(3)?,
        name: r.get(4)?,
        started_at: r.get(5)?,
        ended_at: r.get(6)?,
        status: r.get(7)?,
        error: r.get(8)?,
        provider: r.get(9)?,
        model: r.get(10)?,
        input_tokens: count(r, 11)?,
        output_tokens: count(r, 12)?,
        cached_tokens: count(r, 13)?,
        cost_usd: r.get(14)?,
        attrs: serde_json::from_str(&attrs).unwrap_or(serde_json::Value::Null),
    })
}

#[async_trait]
impl TraceStore for SqliteTraces {
    async fn record(&self, batch: Vec<(TraceRecord, Vec<SpanRecord>)>) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        self.db
            .with(move |conn| {
                let tx = conn.transaction()?;
                for (t, spans) in &batch {
                    tx.prepare_cached(&format!(
                        "INSERT OR REPLACE INTO traces ({TRACE_COLUMNS}) VALUES
                         (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)"
                    ))?
                    .execute(params![
                        t.id,
                        t.parent_id,
                        t.agent_id,
                        t.session_key,
                        t.user_id,
                        t.origin,
                        t.status,
                        t.error,
                        t.started_at,
                        t.ended_at,
                        t.provider,
                        t.model,
                        int(t.input_tokens),
                        int(t.output_tokens),
                        int(t.cached_tokens),
                        t.cost_usd,
                        t.llm_calls,
                        t.tool_calls,
                        t.input,
                        t.output,
                    ])?;
                    for s in spans {
                        tx.prepare_cached(&format!(
                            "INSERT OR REPLACE INTO trace_spans ({SPAN_COLUMNS}, agent_id, user_id) VALUES
                             (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)"
                        ))?
                        .execute(params![
                            s.trace_id,
                            s.span_id,
                            s.parent_span,
                            s.kind,
                            s.name,
                            s.started_at,
                            s.ended_at,
                            s.status,
                            s.error,
                            s.provider,
                            s.model,
                            int(s.input_tokens),
                            int(s.output_tokens),
                            int(s.cached_tokens),
                            s.cost_usd,
                            s.attrs.to_string(),
                            t.agent_id,
                            t.user_id,
                        ])?;
                    }
                }
                tx.commit()
            })
            .await
    }

    async fn list(&self, filter: &TraceFilter) -> Result<TracePage, StoreError> {
        let (st, limit) = list_statement(filter, TRACE_COLUMNS, |n| format!("?{n}"))?;
        let traces = self
            .db
            .with(move |conn| {
                let mut stmt = conn.prepare_cached(&st.sql)?;
                let rows = stmt.query_map(params_from_iter(values(st.args)), trace_row)?;
                rows.collect::<rusqlite::Result<Vec<_>>>()
            })
            .await?;
        Ok(into_page(traces, limit))
    }

    async fn get(
        &self,
        id: &str,
    ) -> Result<Option<(TraceRecord, Vec<SpanRecord>, Vec<String>)>, StoreError> {
        let id = id.to_owned();
        self.db
            .with(move |conn| {
                let Some(trace) = conn
                    .prepare_cached(&format!("SELECT {TRACE_COLUMNS} FROM traces WHERE id = ?1"))?
                    .query_row([&id], trace_row)
                    .optional()?
                else {
                    return Ok(None);
                };
                let spans = conn
                    .prepare_cached(&format!(
                        "SELECT {SPAN_COLUMNS} FROM trace_spans WHERE trace_id = ?1
                         ORDER BY started_at, span_id"
                    ))?
                    .query_map([&id], span_row)?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                let children = conn
                    .prepare_cached(
                        "SELECT id FROM traces WHERE parent_id = ?1 ORDER BY started_at, id",
                    )?
                    .query_map([&id], |r| r.get(0))?
                    .collect::<rusqlite::Result<Vec<String>>>()?;
                Ok(Some((trace, spans, children)))
            })
            .await
    }

    async fn usage(
        &self,
        group: UsageGroup,
        query: UsageQuery<'_>,
    ) -> Result<Vec<UsageRow>, StoreError> {
        let key = match group {
            UsageGroup::Agent => "agent_id",
            UsageGroup::Model => "COALESCE(provider, '') || '/' || COALESCE(model, '')",
            UsageGroup::User => "COALESCE(user_id, '')",
            UsageGroup::Day => "strftime('%Y-%m-%d', started_at / 1000, 'unixepoch')",
        };
        let st = usage_statement(key, query, |n| format!("?{n}"));
        self.db
            .with(move |conn| {
                let mut stmt = conn.prepare_cached(&st.sql)?;
                let rows = stmt.query_map(params_from_iter(values(st.args)), |r| {
                    Ok(UsageRow {
                        key: r.get(0)?,
                        calls: count(r, 1)?,
                        input_tokens: count(r, 2)?,
                        output_tokens: count(r, 3)?,
                        cached_tokens: count(r, 4)?,
                        cost_usd: r.get(5)?,
                    })
                })?;
                rows.collect()
            })
            .await
    }

    async fn abandon(&self, before: i64) -> Result<u64, StoreError> {
        self.db
            .with(move |conn| {
                let n = conn.execute(
                    "UPDATE traces SET status = 'lost', error = ?2
                     WHERE status = 'running' AND started_at < ?1",
                    params![before, LOST],
                )?;
                Ok(n as u64)
            })
            .await
    }

    async fn forget_session(&self, agent_id: &str, session_key: &str) -> Result<u64, StoreError> {
        let (agent, key) = (agent_id.to_owned(), session_key.to_owned());
        self.db
            .with(move |conn| {
                let tx = conn.transaction()?;
                tx.execute(
                    "DELETE FROM trace_spans WHERE trace_id IN
                       (SELECT id FROM traces WHERE session_key = ?2 AND agent_id = ?1)",
                    params![agent, key],
                )?;
                let n = tx.execute(
                    "DELETE FROM traces WHERE session_key = ?2 AND agent_id = ?1",
                    params![agent, key],
                )?;
                tx.commit()?;
                Ok(n as u64)
            })
            .await
    }

    async fn prune(&self, before: i64) -> Result<u64, StoreError> {
        self.db
            .with(move |conn| {
                let tx = conn.transaction()?;
                tx.execute(
                    "DELETE FROM trace_spans WHERE trace_id IN (SELECT id FROM traces WHERE started_at < ?1)",
                    [before],
                )?;
                let n = tx.execute("DELETE FROM traces WHERE started_at < ?1", [before])?;
                tx.commit()?;
                Ok(n as u64)
            })
            .await
    }
}
