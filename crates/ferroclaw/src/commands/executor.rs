//! `ferroclaw executor [--config executor.yaml] [--port N]`: the tool-calling executor
//! for reasoning models without native tool calling (see `ferroclaw-executor`). The
//! global `--config` names the executor's YAML file here, not `config.json5`. The last
//! start-up line on stdout is `listening on http://HOST:PORT`; JSON log events follow.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use ferroclaw_executor::{Config, Server};

use crate::cli::GlobalArgs;

#[derive(Debug, Args)]
pub struct ExecutorArgs {
    /// Port to listen on (default: http_server.port, 8001; 0 picks a free port).
    #[arg(long)]
    pub port: Option<u16>,
}

/// `--config`, else `$GPTOSS_EXECUTOR_CONFIG`, else `./executor.yaml` when present,
/// else the built-in defaults.
fn config_path(global: &GlobalArgs) -> Option<PathBuf> {
    if let Some(p) = &global.config {
        return Some(p.clone());
    }
    if let Some(p) = std::env::var_os("GPTOSS_EXECUTOR_CONFIG").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let local = PathBuf::from("executor.yaml");
    local.is_file().then_some(local)
}

pub async fn run(global: &GlobalArgs, args: ExecutorArgs) -> anyhow::Result<ExitCode> {
    let path = config_path(global);
    let loaded = Config::load(path.as_deref())?;
    for w in &loaded.warnings {
        eprintln!("warning: executor config: {w}");
    }
    let mut cfg = loaded.config;
    if cfg.gateway_token().is_none() {
        // A gateway on this machine keeps its token in its home: use it, as the CLI does.
        let env = ferroclaw_config::Env::from_process();
        let home = global
            .home
            .clone()
            .unwrap_or_else(|| ferroclaw_config::default_home(&env));
        if let Ok(Some(t)) = ferroclaw_config::read_gateway_token(&home, &env) {
            cfg.executor.openclaw_gateway_token = t.token;
        }
    }
    let upstream = cfg.upstream_base();
    let gateway_url = cfg.executor.openclaw_gateway_url.clone();
    let has_token = cfg.gateway_token().is_some();
    let tools: Vec<String> = cfg
        .tools
        .allowed
        .iter()
        .map(|t| t.name().to_string())
        .collect();
    let exec = ferroclaw_executor::build(cfg).context("cannot set up the executor")?;
    let server = Server::bind(exec, args.port).await?;
    let addr = server.local_addr();

    let mut out = std::io::stdout().lock();
    writeln!(out, "ferroclaw executor {}", env!("CARGO_PKG_VERSION"))?;
    match &path {
        Some(p) => writeln!(out, "  config: {}", p.display())?,
        None => writeln!(out, "  config: built-in defaults")?,
    }
    writeln!(out, "  reasoning model: {upstream}")?;
    let token = if has_token { "token set" } else { "no token" };
    writeln!(out, "  tools via: {gateway_url}/tools/invoke ({token})")?;
    writeln!(out, "  tools: {}", tools.join(", "))?;
    writeln!(out, "listening on http://{addr}")?;
    out.flush()?;
    drop(out);

    server
        .serve(ferroclaw_gateway::server::shutdown_signal())
        .await?;
    eprintln!("executor stopped");
    Ok(ExitCode::SUCCESS)
}
