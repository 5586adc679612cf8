//! `ferroclaw doctor`: checks what a first run needs and says how to fix what is wrong.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use ferroclaw_config::{Env, LoadOptions};

use crate::cli::GlobalArgs;

const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Default)]
struct Report {
    failures: usize,
    warnings: usize,
}

impl Report {
    fn ok(&self, what: &str) {
        println!("[ok]   {what}");
    }
    fn warn(&mut self, what: &str, fix: &str) {
        self.warnings += 1;
        println!("[warn] {what}\n       fix: {fix}");
    }
    fn fail(&mut self, what: &str, fix: &str) {
        self.failures += 1;
        println!("[FAIL] {what}\n       fix: {fix}");
    }
}

/// Each enabled MCP server starts, answers `initialize` and lists its tools (each is
/// started here, then stopped).
async fn check_mcp(r: &mut Report, settings: &ferroclaw_config::settings::Settings) {
    if settings.mcp.servers.is_empty() {
        return;
    }
    let hub = ferroclaw_tools::mcp::McpHub::new(&settings.mcp);
    hub.start();
    hub.settle_all().await;
    for s in hub.status() {
        let label = format!("MCP server `{}` ({})", s.name, s.transport);
        match s.state {
            "ready" => r.ok(&format!("{label}: {} tools", s.tools.len())),
            "disabled" => r.ok(&format!("{label}: disabled")),
            state => r.fail(
                &format!(
                    "{label}: {state}: {}",
                    s.last_error.as_deref().unwrap_or("no answer yet")
                ),
                "check its command/url, or raise mcp.servers.<name>.init_timeout_seconds",
            ),
        }
    }
    hub.shutdown();
}

/// Each enabled channel's credentials work (the platform names the bot).
async fn check_channels(r: &mut Report, settings: &ferroclaw_config::settings::Settings) {
    use ferroclaw_config::DmPolicy;
    let c = &settings.channels;
    if let Some(t) = &c.telegram {
        let probe = if t.config.enabled {
            Some(ferroclaw_channels::telegram::probe(t).await)
        } else {
            None
        };
        let cfg = &t.config;
        report_channel(
            r,
            "telegram",
            probe,
            &format!(
                "set {} to the token @BotFather gave (check channels.telegram.api_base_url)",
                cfg.token_env
            ),
            (&cfg.dm_policy, cfg.allow_from.is_empty()),
        );
    }
    if let Some(d) = &c.discord {
        let probe = if d.config.enabled {
            Some(ferroclaw_channels::discord::probe(d).await)
        } else {
            None
        };
        let cfg = &d.config;
        report_channel(
            r,
            "discord",
            probe,
            &format!(
                "set {} to the bot token from the Developer Portal (check channels.discord.api_base_url)",
                cfg.token_env
            ),
            (&cfg.dm_policy, cfg.allow_from.is_empty()),
        );
    }
    if let Some(s) = &c.slack {
        let probe = if s.config.enabled {
            Some(ferroclaw_channels::slack::probe(s).await)
        } else {
            None
        };
        let cfg = &s.config;
        report_channel(
            r,
            "slack",
            probe,
            &format!(
                "set {} to the bot token (xoxb-…) and {} to the app-level token (xapp-…)",
                cfg.token_env, cfg.app_token_env
            ),
            (&cfg.dm_policy, cfg.allow_from.is_empty()),
        );
    }
    if let Some(w) = &c.whatsapp {
        let probe = if w.config.enabled {
            Some(ferroclaw_channels::whatsapp::probe(w).await)
        } else {
            None
        };
        let cfg = &w.config;
        report_channel(
            r,
            "whatsapp",
            probe,
            "start the bridge, or point channels.whatsapp.bridge_url at it",
            (&cfg.dm_policy, cfg.allow_from.is_empty()),
        );
    }
    if let Some(z) = &c.zalo {
        let probe = if z.config.enabled {
            Some(ferroclaw_channels::zalo::probe(z).await)
        } else {
            None
        };
        let cfg = &z.config;
        report_channel(
            r,
            "zalo",
            probe,
            &format!("set {} to the token Zalo Bot Creator gave", cfg.token_env),
            (&cfg.dm_policy, cfg.allow_from.is_empty()),
        );
    }
    if let Some(f) = &c.feishu {
        let probe = if f.config.enabled {
            Some(ferroclaw_channels::feishu::probe(f).await)
        } else {
            None
        };
        let cfg = &f.config;
        report_channel(
            r,
            "feishu",
            probe,
            &format!(
                "set {} to the app secret and {} to the event subscription's verification token (check channels.feishu.app_id)",
                cfg.token_env, cfg.verification_token_env
            ),
            (&cfg.dm_policy, cfg.allow_from.is_empty()),
        );
    }

    fn report_channel(
        r: &mut Report,
        name: &str,
        probe: Option<Result<String, String>>,
        fix: &str,
        (dm_policy, nobody_allowed): (&DmPolicy, bool),
    ) {
        match probe {
            None => return r.ok(&format!("channel {name}: disabled")),
            Some(Ok(bot)) => r.ok(&format!("channel {name}: bot {bot}")),
            Some(Err(e)) => r.fail(&format!("channel {name}: {e}"), fix),
        }
        if matches!(dm_policy, DmPolicy::Pairing | DmPolicy::Allowlist) && nobody_allowed {
            r.warn(
                &format!("channel {name}: dm_policy {dm_policy:?} with an empty allow_from"),
                &format!("add your own id to channels.{name}.allow_from, or approve senders with `ferroclaw pairing approve`"),
            );
        }
    }
}

/// The session store answers and its schema is this build's (nothing is applied).
async fn check_database(r: &mut Report, settings: &ferroclaw_config::settings::Settings) {
    use ferroclaw_config::settings::DatabaseSettings;
    let (label, states) = match &settings.store.database {
        DatabaseSettings::Standalone => (
            "embedded database (SQLite)".to_string(),
            ferroclaw_store::FileSessionStore::new(settings.home.clone())
                .migration_status()
                .await,
        ),
        DatabaseSettings::Managed { url: None } => {
            r.fail(
                "database.mode is \"managed\" but FERROCLAW_DATABASE_URL is not set",
                "export FERROCLAW_DATABASE_URL=postgres://user:password@host:5432/database",
            );
            return;
        }
        DatabaseSettings::Managed { url: Some(url) } => {
            let states = match ferroclaw_store::PgSessionStore::connect_unmigrated(url) {
                Ok(store) => {
                    match tokio::time::timeout(PROBE_TIMEOUT, store.migration_status()).await {
                        Ok(s) => s,
                        Err(_) => {
                            r.fail(
                                "PostgreSQL did not answer within 10 s",
                                "check FERROCLAW_DATABASE_URL and that the server runs",
                            );
                            return;
                        }
                    }
                }
                Err(e) => Err(e),
            };
            ("PostgreSQL".to_string(), states)
        }
    };
    match states {
        Ok(states) => {
            let pending = states.iter().filter(|m| m.applied_at.is_none()).count();
            if pending == 0 {
                r.ok(&format!("{label}: schema up to date ({} migrations)", states.len()));
            } else {
                r.warn(
                    &format!("{label}: {pending} migration(s) pending"),
                    "they are applied at the next start, or now with `ferroclaw migrate up`",
                );
            }
        }
        Err(e) => r.fail(
            &format!("{label}: {e}"),
            "start the database or correct FERROCLAW_DATABASE_URL; an edited migration needs the build that made the database",
        ),
    }
}

pub async fn run(global: &GlobalArgs) -> anyhow::Result<ExitCode> {
    let mut r = Report::default();
    let opts = LoadOptions {
        home: global.home.clone(),
        config_path: global.config.clone(),
    };
    let loaded = match ferroclaw_config::load(&opts, Env::from_process()) {
        Ok(l) => l,
        Err(e) => {
            r.fail(
                &format!("configuration: {e}"),
                "correct the file, then run `ferroclaw config validate`",
            );
            return Ok(ExitCode::FAILURE);
        }
    };
    if loaded.file_exists {
        r.ok(&format!("config file {}", loaded.path.display()));
    } else {
        r.warn(
            &format!("no config file at {}", loaded.path.display()),
            "run `ferroclaw onboard` (defaults and environment variables are used meanwhile)",
        );
    }
    for w in &loaded.warnings {
        r.warn(&w.to_string(), "remove or rename the key");
    }

    match check_writable(&loaded.home).await {
        Ok(()) => r.ok(&format!("home {} is writable", loaded.home.display())),
        Err(e) => r.fail(
            &format!("home {} is not writable: {e}", loaded.home.display()),
            "set FERROCLAW_HOME to a writable directory or fix its permissions",
        ),
    }

    let settings = loaded.settings();
    check_database(&mut r, &settings).await;
    let sandbox = ferroclaw_tools::sandbox::Sandbox::new(&settings.shared.exec.sandbox);
    match sandbox.backend() {
        Ok(ferroclaw_tools::sandbox::SandboxBackend::Off) => r.warn(&sandbox.describe(), "install bubblewrap and remove tools.exec.sandbox: \"off\""),
        Ok(_) => r.ok(&sandbox.describe()),
        Err(_) => r.fail(&sandbox.describe(), "install bubblewrap (apt-get install bubblewrap), or set tools.exec.sandbox: \"off\" to run commands unconfined"),
    }

    check_mcp(&mut r, &settings).await;
    check_channels(&mut r, &settings).await;

    let providers = loaded.providers();
    if providers.is_empty() {
        r.fail(
            "no provider configured",
            "set OPENAI_API_KEY or ANTHROPIC_API_KEY, or run `ferroclaw onboard`",
        );
    }
    for p in &providers {
        let max_tokens = loaded.config.agents.defaults.limits.default_max_tokens;
        let provider = match ferroclaw_runtime::bootstrap::provider_client(&p.settings(max_tokens))
        {
            Ok(p) => p,
            Err(e) => {
                r.fail(&format!("provider `{}`: {e}", p.name), "check its base_url");
                continue;
            }
        };
        let label = format!("provider `{}` at {}", p.name, p.base_url);
        match tokio::time::timeout(PROBE_TIMEOUT, provider.list_models()).await {
            Ok(Ok(models)) => r.ok(&format!("{label} answers ({} models)", models.len())),
            Ok(Err(e)) if e.kind == ferroclaw_providers::ErrorKind::Auth => r.fail(
                &format!("{label} rejected the API key: {e}"),
                &format!(
                    "set a valid key in {}",
                    p.api_key_source
                        .clone()
                        .unwrap_or_else(|| format!("FERROCLAW_{}_API_KEY", env_name(&p.name)))
                ),
            ),
            Ok(Err(e)) => r.fail(
                &format!("{label} is not reachable: {e}"),
                "start the server or correct base_url",
            ),
            Err(_) => r.fail(
                &format!(
                    "{label} did not answer within {} s",
                    PROBE_TIMEOUT.as_secs()
                ),
                "check the network or the server",
            ),
        }
    }

    for id in loaded.agent_ids() {
        match loaded.resolve_agent(&id) {
            Ok(agent) => {
                r.ok(&format!(
                    "agent `{id}` uses {}/{}",
                    agent.provider, agent.model
                ));
                match check_writable(&agent.workspace).await {
                    Ok(()) => r.ok(&format!(
                        "workspace {} is writable",
                        agent.workspace.display()
                    )),
                    Err(e) => r.fail(
                        &format!(
                            "workspace {} is not writable: {e}",
                            agent.workspace.display()
                        ),
                        "fix permissions or set agents.defaults.workspace",
                    ),
                }
            }
            Err(e) => r.fail(
                &format!("agent `{id}`: {e}"),
                "fix the agent's provider/model",
            ),
        }
    }

    println!("\n{} problem(s), {} warning(s)", r.failures, r.warnings);
    Ok(if r.failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

async fn check_writable(dir: &Path) -> std::io::Result<()> {
    tokio::fs::create_dir_all(dir).await?;
    let probe = dir.join(format!(".ferroclaw-doctor-{}", std::process::id()));
    tokio::fs::write(&probe, b"ok").await?;
    tokio::fs::remove_file(&probe).await
}

fn env_name(name: &str) -> String {
    name.to_ascii_uppercase().replace('-', "_")
}
