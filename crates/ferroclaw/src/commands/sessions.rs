//! `ferroclaw sessions`: list sessions, scan/repair transcripts, import OpenClaw/pi
//! transcripts.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use ferroclaw_config::settings::DatabaseSettings;
use ferroclaw_store::integrity::ImportOutcome;
use ferroclaw_store::{FileSessionStore, PgSessionStore, ScanOptions, Strategy};

use crate::cli::GlobalArgs;
use crate::context::AppContext;

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// List an agent's sessions, newest first.
    List(ListArgs),
    /// Validate every transcript (tool-call pairing, torn/unparseable lines, parents).
    /// Without --repair, exits 1 when issues were found; with it, when a file could not
    /// be read or repaired.
    Scan(ScanArgs),
    /// Import OpenClaw / pi transcripts (*.jsonl, searched recursively) as sessions.
    Import(ImportArgs),
    /// Write a session's transcript (OpenClaw JSONL) to stdout or a file, from whichever
    /// backend holds it.
    Export(ExportArgs),
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The session key.
    pub key: String,
    /// Agent id (default: the configured default agent).
    #[arg(long, value_name = "ID")]
    pub agent: Option<String>,
    /// Write here instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Agent id (default: the configured default agent).
    #[arg(long, value_name = "ID")]
    pub agent: Option<String>,
}

#[derive(Debug, Args)]
pub struct ScanArgs {
    /// Rewrite damaged transcripts (each is backed up to <file>.bak.<ms> first).
    #[arg(long)]
    pub repair: bool,
    /// Only this agent's sessions (default: every agent).
    #[arg(long, value_name = "ID")]
    pub agent: Option<String>,
    /// `full` fixes every issue; `remove_orphans` only drops orphaned tool results
    /// (default: session.integrity_strategy from the config).
    #[arg(long, value_name = "STRATEGY")]
    pub strategy: Option<Strategy>,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Directory holding the transcripts.
    pub dir: PathBuf,
    /// Agent that receives the sessions (default: the configured default agent).
    #[arg(long, value_name = "ID")]
    pub agent: Option<String>,
}

pub async fn run(global: &GlobalArgs, cmd: SessionsCommand) -> anyhow::Result<ExitCode> {
    let ctx = AppContext::load(global).await?;
    match cmd {
        SessionsCommand::List(args) => list(&ctx, args).await,
        SessionsCommand::Scan(args) => scan(&ctx, args).await,
        SessionsCommand::Import(args) => import(&ctx, args).await,
        SessionsCommand::Export(args) => export(&ctx, args).await,
    }
}

async fn export(ctx: &AppContext, args: ExportArgs) -> anyhow::Result<ExitCode> {
    let agent = args.agent.unwrap_or_else(|| ctx.loaded.default_agent_id());
    let Some(bytes) = ctx.store.export(&agent, &args.key).await? else {
        eprintln!("no session `{}` for agent `{agent}`", args.key);
        return Ok(ExitCode::FAILURE);
    };
    match args.output {
        Some(path) => std::fs::write(&path, &bytes)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => {
            use std::io::Write as _;
            std::io::stdout().lock().write_all(&bytes)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn list(ctx: &AppContext, args: ListArgs) -> anyhow::Result<ExitCode> {
    let agent = args.agent.unwrap_or_else(|| ctx.loaded.default_agent_id());
    let sessions = ctx.store.list(&agent).await?;
    if sessions.is_empty() {
        eprintln!("no sessions for agent `{agent}`");
    }
    for s in sessions {
        println!(
            "{}\t{}\t{}\t{}\t{} tokens",
            s.key,
            s.session_id,
            humantime_ms(s.updated_at),
            s.model.as_deref().unwrap_or("-"),
            s.usage.total_tokens
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn scan(ctx: &AppContext, args: ScanArgs) -> anyhow::Result<ExitCode> {
    let strategy = match args.strategy {
        Some(s) => s,
        None => ferroclaw_runtime::bootstrap::integrity_strategy(&ctx.settings.store),
    };
    let opts = ScanOptions {
        repair: args.repair,
        strategy,
        agent: args.agent,
    };
    let summary = ctx.store.scan(opts).await?;
    for f in &summary.files {
        println!(
            "{} ({}, session {}): {} issue(s), {}",
            f.file.display(),
            f.agent_id,
            f.session_key.as_deref().unwrap_or("<not in index>"),
            f.issues.len(),
            f.action
        );
        for i in &f.issues {
            println!("  line {}: {}: {}", i.line, i.kind, i.description);
        }
        if let Some(b) = &f.backup {
            println!("  backup: {}", b.display());
        }
    }
    for (path, err) in &summary.errors {
        eprintln!("error: {}: {err}", path.display());
    }
    println!("{summary}");
    // With --repair, leftovers the chosen strategy does not fix are a choice, not a
    // failure; an unreadable or unrepairable file is.
    let failed =
        !summary.errors.is_empty() || summary.files.iter().any(|f| f.action == "unrepairable");
    let code = if failed || (!args.repair && summary.issues > 0) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    };
    Ok(code)
}

async fn import(ctx: &AppContext, args: ImportArgs) -> anyhow::Result<ExitCode> {
    let agent = args.agent.unwrap_or_else(|| ctx.loaded.default_agent_id());
    let report = match &ctx.settings.store.database {
        DatabaseSettings::Standalone => {
            FileSessionStore::new(ctx.loaded.home.clone())
                .import_dir(&agent, &args.dir)
                .await
        }
        DatabaseSettings::Managed { url } => {
            let url = url
                .as_deref()
                .context("FERROCLAW_DATABASE_URL is not set")?;
            PgSessionStore::connect(url)
                .await?
                .import_dir(&agent, &args.dir)
                .await
        }
    }
    .with_context(|| format!("cannot import from {}", args.dir.display()))?;
    for f in &report.files {
        match &f.outcome {
            ImportOutcome::Imported {
                session_key,
                session_id,
                entries,
                repaired,
            } => {
                let fixed = if repaired.is_empty() {
                    String::new()
                } else {
                    format!(", {} issue(s) repaired", repaired.len())
                };
                println!(
                    "imported {} as `{session_key}` ({session_id}, {entries} entries{fixed})",
                    f.source.display()
                );
            }
            ImportOutcome::AlreadyImported { session_id } => {
                println!(
                    "skipped {}: session {session_id} already exists",
                    f.source.display()
                );
            }
            ImportOutcome::Failed { reason } => {
                eprintln!("failed {}: {reason}", f.source.display());
            }
        }
    }
    println!(
        "{} imported, {} already present, {} failed",
        report.imported(),
        report.already_imported(),
        report.failed()
    );
    Ok(if report.failed() > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

pub(crate) fn humantime_ms(ms: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime_rfc3339(t)
}

fn humantime_rfc3339(t: std::time::SystemTime) -> String {
    // Seconds precision is enough for a listing.
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian calendar.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}
