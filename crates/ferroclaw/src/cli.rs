use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// ferroclaw — a multi-agent AI gateway: LLMs, tools and sessions in one binary.
#[derive(Debug, Parser)]
#[command(name = "ferroclaw", version, about, long_about = None)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Args, Clone)]
pub struct GlobalArgs {
    /// Data directory (default: $FERROCLAW_HOME or ~/.ferroclaw).
    #[arg(long, global = true, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Config file (default: $FERROCLAW_CONFIG or <home>/config.json5).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Log level filter, e.g. `info`, `debug`, `ferroclaw_providers=trace`.
    #[arg(long, global = true, value_name = "FILTER")]
    pub log_level: Option<String>,
    /// Log as JSON lines instead of text.
    #[arg(long, global = true)]
    pub log_json: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Talk to an agent, list agents.
    #[command(subcommand)]
    Agent(AgentCommand),
    /// Show, locate or validate the configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Check configuration, provider reachability and workspace; say what to fix.
    Doctor,
    /// Write a starting configuration.
    Onboard(OnboardArgs),
    /// Serve agents over HTTP (OpenAI-compatible) and WebSocket (what a bare `ferroclaw` runs).
    Gateway(GatewayArgs),
    /// Serve the tool-calling executor for gpt-oss and other models without native tool
    /// calling (`--config executor.yaml`).
    Executor(crate::commands::executor::ExecutorArgs),
    /// List sessions, check and repair transcripts, import OpenClaw/pi transcripts.
    #[command(subcommand)]
    Sessions(crate::commands::sessions::SessionsCommand),
    /// Apply or list the home database's schema migrations.
    #[command(subcommand)]
    Migrate(crate::commands::migrate::MigrateCommand),
    /// List, add, remove or run scheduled jobs (a gateway runs them when due).
    #[command(subcommand)]
    Cron(crate::commands::cron::CronCommand),
    /// Approve senders who asked to talk to a chat channel (their pairing codes), list or
    /// revoke them.
    #[command(subcommand)]
    Pairing(crate::commands::pairing::PairingCommand),
}

#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Chat with an agent: interactive, or one message with -m.
    Chat(ChatArgs),
    /// List configured agents.
    List,
}

#[derive(Debug, Args)]
pub struct ChatArgs {
    /// Send one message, print the answer and exit.
    #[arg(short, long, value_name = "TEXT")]
    pub message: Option<String>,
    /// Agent id (default: the configured default agent).
    #[arg(long, value_name = "ID")]
    pub agent: Option<String>,
    /// Session key; the same key continues the same conversation.
    #[arg(long, value_name = "KEY", default_value = "main")]
    pub session: String,
    /// Wait for the whole answer instead of streaming it.
    #[arg(long)]
    pub no_stream: bool,
    /// Also print the model's reasoning as it streams (to stderr).
    #[arg(long)]
    pub show_reasoning: bool,
    /// Act for this user (needed on an agent with `per_user_workspace`).
    #[arg(long, value_name = "ID")]
    pub user: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the effective configuration, secrets masked.
    Show,
    /// Print the path of the config file in use.
    Path,
    /// Check the config file; exit non-zero if it is invalid.
    Validate,
}

#[derive(Debug, Args)]
pub struct OnboardArgs {
    /// Provider name (e.g. openai, anthropic, ollama, vllm); detected from the environment if omitted.
    #[arg(long)]
    pub provider: Option<String>,
    /// Model id.
    #[arg(long)]
    pub model: Option<String>,
    /// Base URL of an OpenAI-compatible endpoint.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Overwrite an existing config file.
    #[arg(long)]
    pub force: bool,
    /// Never prompt; fail if something cannot be decided.
    #[arg(long)]
    pub non_interactive: bool,
}

#[derive(Debug, Args, Default)]
#[command(args_conflicts_with_subcommands = true)]
pub struct GatewayArgs {
    #[command(subcommand)]
    pub action: Option<GatewayAction>,
    /// Port to listen on (default: $FERROCLAW_PORT, else gateway.port, else 18789; 0 picks a free port).
    #[arg(long)]
    pub port: Option<u16>,
    /// Address to bind (default: gateway.host, else 127.0.0.1).
    #[arg(long)]
    pub host: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum GatewayAction {
    /// Print the gateway's operator token (FERROCLAW_GATEWAY_TOKEN, else the one stored
    /// in the home, generated if none exists yet).
    Token,
}
