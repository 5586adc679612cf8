//! `ferroclaw cron list | add | rm | run`: the scheduled jobs of this home's storage, as
//! its administrator. A gateway runs them when due; `run` runs one here and now.

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Subcommand};
use ferroclaw_runtime::cron::{CronService, Delivery, JobInput};
use ferroclaw_runtime::Requester;
use serde_json::json;

use crate::cli::GlobalArgs;
use crate::commands::sessions::humantime_ms;
use crate::context::AppContext;

const ADMIN: Requester<'static> = Requester {
    user: None,
    admin: true,
};

#[derive(Debug, Subcommand)]
pub enum CronCommand {
    /// List the jobs: id, name, agent, schedule, next run.
    List,
    /// Add a job (one of --at, --every, --cron).
    Add(AddArgs),
    /// Remove a job and its run log.
    Rm {
        /// The job's id.
        id: String,
    },
    /// Run a job now, here, and print its answer (its schedule is unchanged).
    Run {
        /// The job's id.
        id: String,
    },
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// What the agent is asked each time the job runs.
    #[arg(long, short = 'm', value_name = "TEXT")]
    pub message: String,
    /// Once, at this time (RFC 3339, e.g. 2026-11-25T09:00:00+01:00).
    #[arg(long, value_name = "TIME", group = "when")]
    pub at: Option<String>,
    /// At this interval (e.g. 30m, 2h, 1day).
    #[arg(long, value_name = "INTERVAL", group = "when")]
    pub every: Option<String>,
    /// On this 5-field cron expression (minute hour day month weekday).
    #[arg(long, value_name = "EXPR", group = "when")]
    pub cron: Option<String>,
    /// The time zone of --cron (IANA name; default UTC).
    #[arg(long, value_name = "ZONE", requires = "cron")]
    pub tz: Option<String>,
    #[arg(long)]
    pub name: Option<String>,
    /// Agent id (default: the configured default agent).
    #[arg(long, value_name = "ID")]
    pub agent: Option<String>,
    /// Also post the answer to this session of the agent.
    #[arg(long, value_name = "SESSION")]
    pub deliver_to: Option<String>,
    /// A run missed while no gateway ran: `once` (run it at start) or `skip`.
    #[arg(long, value_name = "once|skip")]
    pub catch_up: Option<String>,
}

pub async fn run(global: &GlobalArgs, cmd: CronCommand) -> anyhow::Result<ExitCode> {
    let ctx = AppContext::load(global).await?;
    let runtime = Arc::new(ctx.runtime()?);
    let book = runtime
        .cron()
        .ok_or_else(|| anyhow::anyhow!("this storage keeps no cron jobs"))?
        .clone();
    match cmd {
        CronCommand::List => {
            let jobs = book.list(ADMIN).await?;
            if jobs.is_empty() {
                println!("no cron jobs");
            }
            for j in jobs {
                let next = match (j.enabled, j.next_run_at) {
                    (false, _) => "disabled".to_string(),
                    (true, Some(ms)) => humantime_ms(ms),
                    (true, None) => "-".to_string(),
                };
                println!(
                    "{}\t{}\t{}\t{}\t{next}",
                    j.id,
                    j.name,
                    j.agent_id,
                    schedule_text(&j.schedule)
                );
            }
        }
        CronCommand::Add(a) => {
            let schedule = match (a.at, a.every, a.cron) {
                (Some(at), None, None) => json!({"kind": "at", "at": at}),
                (None, Some(every), None) => json!({"kind": "every", "every": every}),
                (None, None, Some(expr)) => json!({"kind": "cron", "expr": expr, "tz": a.tz}),
                _ => anyhow::bail!("say when: one of --at, --every, --cron"),
            };
            let catch_up = match a.catch_up.as_deref() {
                None => None,
                Some("once") => Some(ferroclaw_config::CatchUp::Once),
                Some("skip") => Some(ferroclaw_config::CatchUp::Skip),
                Some(other) => anyhow::bail!("--catch-up `{other}`: once or skip"),
            };
            let input = JobInput {
                name: a.name,
                agent_id: a.agent,
                schedule: Some(schedule),
                message: Some(a.message),
                deliver: a
                    .deliver_to
                    .map(|session_key| Delivery::Session { session_key }),
                enabled: None,
                catch_up,
            };
            let job = runtime.cron_create(ADMIN, input).await?;
            let next = job.next_run_at.map(humantime_ms).unwrap_or_default();
            println!("{}\tnext run {next}", job.id);
        }
        CronCommand::Rm { id } => {
            book.delete(ADMIN, &id).await?;
            println!("removed {id}");
        }
        CronCommand::Run { id } => {
            let host: ferroclaw_runtime::cron::RuntimeHost = runtime.clone();
            let svc = CronService::new(host)
                .ok_or_else(|| anyhow::anyhow!("this storage keeps no cron jobs"))?;
            let run = svc.run_job(ADMIN, &id).await?;
            match run.status.as_str() {
                "ok" => println!("{}", run.output.unwrap_or_default()),
                status => {
                    eprintln!(
                        "run {status}: {}",
                        run.error.unwrap_or_else(|| "no reason given".into())
                    );
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn schedule_text(s: &serde_json::Value) -> String {
    match s["kind"].as_str() {
        Some("at") => format!(
            "at {}",
            s["atMs"].as_i64().map(humantime_ms).unwrap_or_default()
        ),
        Some("every") => {
            let ms = s["everyMs"].as_u64().unwrap_or(0);
            format!(
                "every {}",
                humantime::format_duration(std::time::Duration::from_millis(ms))
            )
        }
        Some("cron") => format!(
            "cron {} ({})",
            s["expr"].as_str().unwrap_or(""),
            s["tz"].as_str().unwrap_or("UTC")
        ),
        _ => s.to_string(),
    }
}
