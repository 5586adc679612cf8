//! `ferroclaw migrate up | status`: the home database's schema. Every start applies
//! pending migrations anyway; these let an operator do it, or look, beforehand.

use std::process::ExitCode;

use clap::Subcommand;
use ferroclaw_config::settings::DatabaseSettings;
use ferroclaw_store::{FileSessionStore, PgSessionStore};

use crate::cli::GlobalArgs;

#[derive(Debug, Subcommand)]
pub enum MigrateCommand {
    /// Apply every pending migration (each in its own transaction).
    Up,
    /// List the migrations and when each was applied.
    Status,
}

pub async fn run(global: &GlobalArgs, cmd: MigrateCommand) -> anyhow::Result<ExitCode> {
    // Not through the usual store: opening it would apply the migrations already.
    let settings = crate::context::load_config(global)?.settings();
    let states = match &settings.store.database {
        DatabaseSettings::Standalone => {
            let store = FileSessionStore::new(settings.home.clone());
            match cmd {
                MigrateCommand::Up => store.migrate_up().await?,
                MigrateCommand::Status => store.migration_status().await?,
            }
        }
        DatabaseSettings::Managed { url } => {
            let url = url.as_deref().ok_or_else(|| {
                anyhow::anyhow!(
                    "database.mode is \"managed\" but FERROCLAW_DATABASE_URL is not set"
                )
            })?;
            let store = PgSessionStore::connect_unmigrated(url)?;
            match cmd {
                MigrateCommand::Up => store.migrate_up().await?,
                MigrateCommand::Status => store.migration_status().await?,
            }
        }
    };
    for m in &states {
        let when = match m.applied_at {
            Some(ms) => format!("applied {}", crate::commands::sessions::humantime_ms(ms)),
            None => "pending".to_string(),
        };
        println!("{:>4}  {:<24} {when}", m.version, m.name);
    }
    if matches!(cmd, MigrateCommand::Up) {
        println!("database is up to date ({} migrations)", states.len());
    }
    Ok(ExitCode::SUCCESS)
}
