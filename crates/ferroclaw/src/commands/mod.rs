mod agent_list;
mod chat;
mod config_cmd;
mod doctor;
mod onboard;

use std::process::ExitCode;

use clap::CommandFactory;

use crate::cli::{AgentCommand, Cli, Command};
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

    let Some(command) = cli.command else {
        Cli::command().print_help()?;
        println!();
        return Ok(ExitCode::SUCCESS);
    };
    match command {
        Command::Onboard(args) => onboard::run(&cli.global, args).await,
        Command::Config(cmd) => config_cmd::run(&cli.global, cmd),
        Command::Doctor => doctor::run(&cli.global).await,
        Command::Agent(AgentCommand::List) => agent_list::run(&AppContext::load(&cli.global)?),
        Command::Agent(AgentCommand::Chat(args)) => {
            chat::run(&AppContext::load(&cli.global)?, args).await
        }
    }
}
