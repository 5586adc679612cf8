//! The managed backend's [`TraceStore`]: the embedded one's tables in PostgreSQL,
//! written without waiting for the commit to reach disk (telemetry, not records).

use async_trait::async_trait;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::{db_error, PgSessionStore};
use crate::traces::{
    into_page, list_statement, usage_statement, Arg, SpanRecord, Statement, TraceFilter, TracePage,
    TraceRecord, TraceStore, UsageGroup, UsageQuery, UsageRow, LOST,
};
use crate::StoreError;

const TRACE_COLUMNS: &str = "id, parent_id, agent_id, session_key, user_id, origin, status, error, started_at, ended_at, provider, model, input_tokens, output_tokens, cached_tokens, cost_usd, llm_calls, tool_calls, input, output";

const SPAN_COLUMNS: &str = "trace_id, span_id, parent_span, kind, name, started_at, ended_at, status, error, provider, model, input_tokens, output_tokens, cached_tokens, cost_usd, attrs";

impl PgSessionStore {
    async fn query(&self, st: &Statement) -> Result<Vec<Row>, StoreError> {
        let args: Vec<Box<dyn ToSql + Sync + Send>> = st
            .args
            .iter()
            .map(|a| -> Box<dyn ToSql + Sync + Send> {
                match a {
                    Arg::Int(n) => Box::new(*n),
                    Arg::Text(t) => Box::new(t.clone()),
                }
            })
            .collect();
        let refs: Vec<&(dyn ToSql + Sync)> = args
            .iter()
            .map(|a| a.as_ref() as &(dyn ToSql + Sync))
            .collect();
        let client = self.client().await?;
        client.query(&st.sql, &refs).await.map_err(db_error)
    }
}

fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn count(r: &Row, i: usize) -> u64 {
    u64::try_from(r.get::<_, i64>(i)).unwrap_or(0)
}

fn trace_row(r: &Row) -> TraceRecord {
    TraceRecord {
        id: r.get(0),
        parent_id: r.get(1),
        agent_id: r.get(2),
        session_key: r.get(3),
        user_id: r.get(4),
        origin: r.get(5),
        status: r.get(6),
        error: r.get(7),
        started_at: r.get(8),
        ended_at: r.get(9),
        provider: r.get(10),
        model: r.get(11),
        input_tokens: count(r, 12),
        output_tokens: count(r, 13),
        cached_tokens: count(r, 14),
        cost_usd: r.get(15),
        llm_calls: u32::try_from(count(r, 16)).unwrap_or(u32::MAX),
        tool_calls: u32::try_from(count(r, 17)).unwrap_or(u32::MAX),
        input: r.get(18),
        output: r.get(19),
    }
}

fn span_row(r: &Row) -> SpanRecord {
    let attrs: String = r.get(15);
    SpanRecord {
        trace_id: r.get(0),
        span_id: r.get(1),
        parent_span: r.get(2),
        kind: r.get(3),
        name: r.get(4),
        started_at: r.get(5),
        ended_at: r.get(6),
        status: r.get(7),
        error: r.get(8),
        provider: r.get(9),
        model: r.get(10),
        input_tokens: count(r, 11),
        output_tokens: count(r, 12),
        cached_tokens: count(r, 13),
        cost_usd: r.get(14),
        attrs: serde_json::from_str(&attrs).unwrap_or(serde_json::Value::Null),
    }
}

#[async_trait]
impl TraceStore for PgSessionStore {
    async fn record(&self, batch: Vec<(TraceRecord, Vec<SpanRecord>)>) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.batch_execute("SET LOCAL synchronous_commit TO off")
            .await
            .map_err(db_error)?;
        let upsert_trace = tx
            .prepare(&format!(
                "INSERT INTO traces ({TRACE_COLUMNS}) VALUES
                 ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)
                 ON CONFLICT (id) DO UPDATE SET parent_id = EXCLUDED.parent_id, status = EXCLUDED.status,
                   error = EXCLUDED.error, ended_at = EXCLUDED.ended_at, provider = EXCLUDED.provider,
                   model = EXCLUDED.model, input_tokens = EXCLUDED.input_tokens,
                   output_tokens = EXCLUDED.output_tokens, cached_tokens = EXCLUDED.cached_tokens,
                   cost_usd = EXCLUDED.cost_usd, llm_calls = EXCLUDED.llm_calls,
                   tool_calls = EXCLUDED.tool_calls, input = EXCLUDED.input, output = EXCLUDED.output"
            ))
            .await
            .map_err(db_error)?;
        let upsert_span = tx
            .prepare(&format!(
                "INSERT INTO trace_spans ({SPAN_COLUMNS}, agent_id, user_id) VALUES
                 ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)
                 ON CONFLICT (trace_id, span_id) DO UPDATE SET ended_at = EXCLUDED.ended_at,
                   status = EXCLUDED.status, error = EXCLUDED.error, provider = EXCLUDED.provider,
                   model = EXCLUDED.model, input_tokens = EXCLUDED.input_tokens,
                   output_tokens = EXCLUDED.output_tokens, cached_tokens = EXCLUDED.cached_tokens,
                   cost_usd = EXCLUDED.cost_usd, attrs = EXCLUDED.attrs"
            ))
            .await
            .map_err(db_error)?;
        for (t, spans) in &batch {
            let (inp, out, cached) = (
                int(t.input_tokens),
                int(t.output_tokens),
                int(t.cached_tokens),
            );
            let (llm, tools) = (i64::from(t.llm_calls), i64::from(t.tool_calls));
            let args: [&(dyn ToSql + Sync); 20] = [
                &t.id,
                &t.parent_id,
                &t.agent_id,
                &t.session_key,
                &t.user_id,
                &t.origin,
                &t.status,
                &t.error,
                &t.started_at,
                &t.ended_at,
                &t.provider,
                &t.model,
                &inp,
                &out,
                &cached,
                &t.cost_usd,
                &llm,
                &tools,
                &t.input,
                &t.output,
            ];
            tx.execute(&upsert_trace, &args).await.map_err(db_error)?;
            for s in spans {
                let (inp, out, cached) = (
                    int(s.input_tokens),
                    int(s.output_tokens),
                    int(s.cached_tokens),
                );
                let attrs = s.attrs.to_string();
                let args: [&(dyn ToSql + Sync); 18] = [
                    &s.trace_id,
                    &s.span_id,
                    &s.parent_span,
                    &s.kind,
                    &s.name,
                    &s.started_at,
                    &s.ended_at,
                    &s.status,
                    &s.error,
                    &s.provider,
                    &s.model,
                    &inp,
                    &out,
                    &cached,
                    &s.cost_usd,
                    &attrs,
                    &t.agent_id,
                    &t.user_id,
                ];
                tx.execute(&upsert_span, &args).await.map_err(db_error)?;
            }
        }
        tx.commit().await.map_err(db_error)
    }

    async fn list(&self, filter: &TraceFilter) -> Result<TracePage, StoreError> {
        let (st, limit) = list_statement(filter, TRACE_COLUMNS, |n| format!("${n}"))?;
        let rows = self.query(&st).await?;
        Ok(into_page(rows.iter().map(trace_row).collect(), limit))
    }

    async fn get(
        &self,
        id: &str,
    ) -> Result<Option<(TraceRecord, Vec<SpanRecord>, Vec<String>)>, StoreError> {
        let client = self.client().await?;
        let Some(row) = client
            .query_opt(
                &format!("SELECT {TRACE_COLUMNS} FROM traces WHERE id = $1"),
                &[&id],
            )
            .await
            .map_err(db_error)?
        else {
            return Ok(None);
        };
        let spans = client
            .query(
                &format!(
                    "SELECT {SPAN_COLUMNS} FROM trace_spans WHERE trace_id = $1
                     ORDER BY started_at, span_id"
                ),
                &[&id],
            )
            .await
            .map_err(db_error)?;
        let children = client
            .query(
                "SELECT id FROM traces WHERE parent_id = $1 ORDER BY started_at, id",
                &[&id],
            )
            .await
            .map_err(db_error)?;
        Ok(Some((
            trace_row(&row),
            spans.iter().map(span_row).collect(),
            children.iter().map(|r| r.get(0)).collect(),
        )))
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
            UsageGroup::Day => {
                "to_char(to_timestamp(started_at / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
            }
        };
        let st = usage_statement(key, query, |n| format!("${n}"));
        let rows = self.query(&st).await?;
        Ok(rows
            .iter()
            .map(|r| UsageRow {
                key: r.get(0),
                calls: count(r, 1),
                input_tokens: count(r, 2),
                output_tokens: count(r, 3),
                cached_tokens: count(r, 4),
                cost_usd: r.get(5),
            })
            .collect())
    }

    async fn abandon(&self, before: i64) -> Result<u64, StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "UPDATE traces SET status = 'lost', error = $2
                 WHERE status = 'running' AND started_at < $1",
                &[&before, &LOST],
            )
            .await
            .map_err(db_error)
    }

    async fn forget_session(&self, agent_id: &str, session_key: &str) -> Result<u64, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.execute(
            "DELETE FROM trace_spans WHERE trace_id IN
               (SELECT id FROM traces WHERE session_key = $2 AND agent_id = $1)",
            &[&agent_id, &session_key],
        )
        .await
        .map_err(db_error)?;
        let n = tx
            .execute(
                "DELETE FROM traces WHERE session_key = $2 AND agent_id = $1",
                &[&agent_id, &session_key],
            )
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(n)
    }

    async fn prune(&self, before: i64) -> Result<u64, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.execute(
            "DELETE FROM trace_spans WHERE trace_id IN (SELECT id FROM traces WHERE started_at < $1)",
            &[&before],
        )
        .await
        .map_err(db_error)?;
        let n = tx
            .execute("DELETE FROM traces WHERE started_at < $1", &[&before])
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(n)
    }
}
