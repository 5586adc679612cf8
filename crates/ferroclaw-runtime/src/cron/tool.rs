//! The `cron` tool: the model lists, adds, changes, removes and runs the jobs of the
//! user it acts for, on its own agent only. Group `automation`: denied to subagents and
//! over `POST /tools/invoke` unless configured otherwise.

use async_trait::async_trait;
use ferroclaw_tools::{Tool, ToolContext, ToolResult};
use serde_json::{json, Value};

use super::{CronBook, CronError, JobInput};
use crate::Requester;

pub(crate) struct CronTool {
    pub book: CronBook,
}

fn caller(ctx: &ToolContext) -> Requester<'_> {
    // A run for nobody in particular is the operator's own: its jobs are the
    // administrator's. A run for a user, on any agent, manages that user's jobs only.
    Requester {
        user: ctx.acting_user.as_deref(),
        admin: ctx.acting_user.is_none(),
    }
}

fn to_value<T: serde::Serialize>(r: Result<T, CronError>) -> Result<Value, CronError> {
    r.map(|x| serde_json::to_value(x).unwrap_or(Value::Null))
}

fn answer(r: Result<Value, CronError>) -> ToolResult {
    match r {
        Ok(v) => ToolResult::ok(serde_json::to_string_pretty(&v).unwrap_or_default()),
        Err(e) => ToolResult::error(e.to_string()),
    }
}

#[async_trait]
impl Tool for CronTool {
    fn name(&self) -> &str {
        "cron"
    }

    fn description(&self) -> &str {
        "Schedule messages to yourself: list, add, update, remove or run jobs. A job runs its message in a fresh session at its time (kind \"at\": once, \"every\": an interval such as \"1h\", \"cron\": a 5-field expression in an IANA time zone)."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["list", "add", "update", "remove", "run", "runs"]},
                "id": {"type": "string", "description": "the job (update, remove, run, runs)"},
                "name": {"type": "string"},
                "message": {"type": "string", "description": "what to do when the job runs"},
                "schedule": {
                    "type": "object",
                    "description": "{\"kind\":\"at\",\"at\":\"2026-11-25T09:00:00+01:00\"} | {\"kind\":\"every\",\"every\":\"30m\"} | {\"kind\":\"cron\",\"expr\":\"0 9 * * 1-5\",\"tz\":\"Europe/Berlin\"}"
                },
                "deliverToSession": {"type": "string", "description": "also post the answer to this session"},
                "enabled": {"type": "boolean"}
            },
            "required": ["action"]
        })
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> ToolResult {
        let who = caller(ctx);
        let action = args["action"].as_str().unwrap_or("");
        let id = args["id"].as_str();
        let need_id = || id.ok_or_else(|| CronError::Invalid(format!("`{action}` needs `id`")));
        let input = || JobInput {
            name: args["name"].as_str().map(str::to_string),
            agent_id: None,
            schedule: args.get("schedule").filter(|v| !v.is_null()).cloned(),
            message: args["message"].as_str().map(str::to_string),
            deliver: args["deliverToSession"]
                .as_str()
                .map(|k| super::Delivery::Session {
                    session_key: k.to_string(),
                }),
            enabled: args["enabled"].as_bool(),
            catch_up: None,
        };
        let result = match action {
            "list" => to_value(self.book.list(who).await.map(|jobs| {
                // Only this agent's: the model manages its own schedule.
                jobs.into_iter()
                    .filter(|j| j.agent_id == ctx.agent_id)
                    .collect::<Vec<_>>()
            })),
            "add" => to_value(self.book.create(who, &ctx.agent_id, input()).await),
            "update" => match need_id() {
                Ok(id) => match self.own_agent(who, id, ctx).await {
                    Ok(()) => to_value(self.book.update(who, id, input()).await),
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            },
            "remove" => match need_id() {
                Ok(id) => match self.own_agent(who, id, ctx).await {
                    Ok(()) => self
                        .book
                        .delete(who, id)
                        .await
                        .map(|_| json!({"removed": id})),
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            },
            "run" => match need_id() {
                Ok(id) => match self.own_agent(who, id, ctx).await {
                    Ok(()) => to_value(self.book.run_now(who, id).await),
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            },
            "runs" => match need_id() {
                Ok(id) => match self.own_agent(who, id, ctx).await {
                    Ok(()) => to_value(self.book.runs(who, Some(id), 20).await),
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            },
            other => Err(CronError::Invalid(format!(
                "unknown action `{other}`; one of list, add, update, remove, run, runs"
            ))),
        };
        answer(result)
    }
}

impl CronTool {
    /// A job of another agent does not exist for this agent's model.
    async fn own_agent(
        &self,
        who: Requester<'_>,
        id: &str,
        ctx: &ToolContext,
    ) -> Result<(), CronError> {
        let job = self.book.get(who, id).await?;
        if job.agent_id == ctx.agent_id {
            Ok(())
        } else {
            Err(CronError::NotFound(id.to_string()))
        }
    }
}
