//! `ferroclaw gateway` (and a bare `ferroclaw`): serves the agents over HTTP and
//! WebSocket until SIGINT/SIGTERM, after scanning every transcript (summary printed as
//! `  integrity: N sessions, M issues, K repaired`). The last start-up line on stdout is
//! `listening on http://HOST:PORT` (tests and scripts read the port from it).

use std::io::Write as _;
use std::process::ExitCode;

use ferroclaw_config::TokenSource;
use ferroclaw_gateway::server::{shutdown_signal, Gateway, ServeOptions};

use crate::cli::{GatewayAction, GatewayArgs, GlobalArgs};
use crate::context::AppContext;

pub async fn run(global: &GlobalArgs, args: GatewayArgs) -> anyhow::Result<ExitCode> {
    if let Some(GatewayAction::Token) = args.action {
        return print_token(global);
    }
    let ctx = AppContext::load_for_server(global).await?;
    // Before anything is served, so the first request's spans are exported too.
    let telemetry = match &ctx.settings.tracing.otlp {
        Some(otlp) => Some(crate::logging::export(otlp)?),
        None => None,
    };
    let providers = ctx.loaded.providers();
    let gateway = Gateway::bind(
        ctx.settings,
        ctx.store,
        ServeOptions {
            host: args.host,
            port: args.port,
        },
    )
    .await?;
    let state = gateway.state().clone();
    let addr = gateway.local_addr();

    let mut out = std::io::stdout().lock();
    writeln!(out, "ferroclaw gateway {}", ferroclaw_gateway::VERSION)?;
    for p in &providers {
        writeln!(out, "  provider {} ({}, {})", p.name, p.kind, p.base_url)?;
    }
    for a in state.runtime.agents() {
        let s = a.agent.settings();
        let mark = if a.id == state.runtime.default_agent_id() {
            " (default)"
        } else {
            ""
        };
        writeln!(out, "  agent {}{mark}: {}/{}", a.id, s.provider, s.model)?;
    }
    for (id, _) in state.runtime.skipped_agents() {
        let why = state.runtime.why_not_built(id).unwrap_or_default();
        writeln!(out, "  agent {id} skipped: {why}")?;
    }
    let token = &state.token;
    match token.source {
        TokenSource::Environment => {
            writeln!(out, "  auth: token required (FERROCLAW_GATEWAY_TOKEN)")?
        }
        TokenSource::File => writeln!(
            out,
            "  auth: token required (stored in {})",
            token.path.display()
        )?,
        TokenSource::Generated => writeln!(
            out,
            "  auth: generated a gateway token in {} (mode 0600); clients send \
             `Authorization: Bearer <token>`; `ferroclaw gateway token` prints it",
            token.path.display()
        )?,
    }
    // A failed or partial scan never stops the gateway: the store still repairs each
    // transcript when it is loaded.
    match gateway.startup_scan() {
        Ok(None) => writeln!(
            out,
            "  integrity: checked per session as it is opened (shared database); `ferroclaw sessions scan` scans all"
        )?,
        Ok(Some(summary)) => {
            writeln!(out, "  integrity: {summary}")?;
            for (path, error) in &summary.errors {
                writeln!(out, "  integrity: unreadable {}: {error}", path.display())?;
            }
        }
        Err(e) => writeln!(out, "  integrity: scan failed: {e}")?,
    }
    writeln!(
        out,
        "  dashboard: http://{addr}/ (sign in with the token; `ferroclaw gateway token` prints it)"
    )?;
    writeln!(out, "listening on http://{addr}")?;
    out.flush()?;
    drop(out);

    gateway.serve(shutdown_signal()).await?;
    if let Some(t) = telemetry {
        t.shutdown().await;
    }
    eprintln!("gateway stopped");
    Ok(ExitCode::SUCCESS)
}

/// `ferroclaw gateway token`: the operator token of the gateway on this home (created
/// if no gateway has started yet), for clients on the same machine.
fn print_token(global: &GlobalArgs) -> anyhow::Result<ExitCode> {
    let loaded = crate::context::load_config(global)?;
    let token = ferroclaw_config::load_or_create_gateway_token(&loaded.home, &loaded.env)?;
    println!("{}", token.token);
    Ok(ExitCode::SUCCESS)
}
