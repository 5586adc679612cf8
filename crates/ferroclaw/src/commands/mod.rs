mod agent_list;
mod chat;
mod config_cmd;
pub(crate) mod cron;
mod doctor;
pub(crate) mod executor;
mod gateway;
pub(crate) mod migrate;
mod onboard;
pub(crate) mod pairing;
pub(crate) mod sessions;

use std::process::ExitCode;

use crate::cli::{AgentCommand, Cli, Command, GatewayArgs};
use crate::context::AppContext;

pub async fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    let level = cli
        .global
        .log_level
        .clone()
        .or_else(|| std::env::var("FERROCLAW_LOG_LEVEL").ok())
        .unwrap_or_else(|| "warn".to_string());
    let json = cli.global.log_json
        || std::env::var("FERROCLAW_LOG_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("json"));
    crate::logging::init(&level, json);

    // A bare `ferroclaw` serves the gateway.
    let Some(command) = cli.command else {
        return gateway::run(&cli.global, GatewayArgs::default()).await;
    };
    match command {
        Command::Onboard(args) => onboard::run(&cli.global, args).await,
        Command::Config(cmd) => config_cmd::run(&cli.global, cmd),
        Command::Doctor => doctor::run(&cli.global).await,
        Command::Gateway(args) => gateway::run(&cli.global, args).await,
        Command::Executor(args) => executor::run(&cli.global, args).await,
        Command::Sessions(cmd) => sessions::run(&cli.global, cmd).await,
        Command::Migrate(cmd) => migrate::run(&cli.global, cmd).await,
        Command::Cron(cmd) => cron::run(&cli.global, cmd).await,
        Command::Pairing(cmd) => pairing::run(&cli.global, cmd).await,
        Command::Agent(AgentCommand::List) => {
            agent_list::run(&AppContext::load(&cli.global).await?)
        }
        Command::Agent(AgentCommand::Chat(args)) => {
            chat::run(&AppContext::load(&cli.global).await?, args).await
        }
    }
}
