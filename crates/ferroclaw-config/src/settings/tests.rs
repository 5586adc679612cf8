//! Settings resolved from real files in a temp home and explicit environments.

use std::time::Duration;

use tempfile::TempDir;

use super::*;
use crate::{load, Env, LoadOptions, LoadedConfig};

fn load_in(home: &TempDir, config: &str, env: &[(&str, &str)]) -> LoadedConfig {
    std::fs::write(home.path().join("config.json5"), config).expect("write config");
    let opts = LoadOptions {
        home: Some(home.path().to_path_buf()),
        config_path: None,
    };
    match load(&opts, Env::from_pairs(env.iter().copied())) {
        Ok(c) => c,
        Err(e) => panic!("load failed: {e}"),
    }
}

fn main_agent(s: &Settings) -> &AgentSettings {
    match s.agent("main") {
        Ok(a) => a,
        Err(e) => panic!("main did not resolve: {e}"),
    }
}

#[test]
fn an_unset_config_yields_todays_defaults() {
    let home = tempfile::tempdir().expect("tempdir");
    let s = load_in(
        &home,
        "{}",
        &[
            ("OPENAI_API_KEY", "sk-default-test"),
            ("FERROCLAW_MODEL", "gpt-4o"),
        ],
    )
    .settings();
    let a = main_agent(&s);

    assert_eq!(a.limits.max_message_chars, 32_000);
    assert_eq!(a.limits.tool_result_max_chars, 50_000);
    assert_eq!(a.limits.max_reply_bytes, 1 << 20);
    assert_eq!(a.limits.max_tool_calls_per_turn, 32);
    assert_eq!(a.limits.max_concurrent_tools, 8);
    assert_eq!(a.max_iterations, 20);
    assert_eq!(a.timeout, Duration::from_secs(600));
    assert_eq!(a.max_tokens, None);
    assert_eq!(a.history.max_user_turns, 50);
    assert_eq!(a.history.old_tool_result_chars, 20_000);
    assert_eq!(a.compaction.context_window, 128_000);
    assert_eq!(
        (
            a.context_files.file_max_chars,
            a.context_files.total_max_chars
        ),
        (20_000, 24_000)
    );
    assert_eq!(a.workspace, home.path().join("workspace"));
    assert_eq!(a.tool_calling.mode, ToolMode::Native);
    assert_eq!(
        a.tool_calling.prompts_dir,
        home.path().join("prompts").join("intent")
    );

    let p = &a.providers.primary.provider;
    assert_eq!(
        (p.name.as_str(), p.kind),
        ("openai", ProviderKind::OpenaiCompat)
    );
    assert_eq!(p.default_max_tokens, 4096);
    assert_eq!(p.idle_timeout, Duration::from_secs(120));
    assert_eq!(p.request_timeout, Duration::from_secs(120));
    assert!(a.providers.fallbacks.is_empty());
    assert_eq!(a.providers.cooldown, Duration::from_secs(60));

    assert_eq!(a.tools.input_guard, InputGuardAction::Warn);
    assert_eq!(a.tools.policy.global.profile, Some(ToolProfile::Full));
    assert_eq!(a.tools.policy.provider, None);
    assert_eq!(a.tools.policy.agent, ToolPolicySettings::default());
    assert!(a.tools.denied_paths.is_empty());
    assert_eq!(a.tools.web.search.provider, SearchProvider::None);
    assert_eq!(a.tools.web.search.timeout, Duration::from_secs(20));
    assert_eq!(a.tools.web.fetch.max_chars, 50_000);
    assert_eq!(a.tools.web, WebToolsSettings::default());

    assert_eq!(s.shared.exec, ExecSettings::default());
    assert_eq!(s.shared.exec.timeout, Duration::from_secs(120));
    assert_eq!(s.shared.exec.sandbox.mode, SandboxMode::Auto);
    assert_eq!(s.shared.max_concurrent_tools_total, 64);
    assert_eq!(s.shared.tool_calls_per_hour, 0);
    assert_eq!(
        s.shared.subagents,
        SubagentSettings {
            max_depth: 1,
            max_children: 5,
        }
    );
    assert_eq!(s.store.tool_result_max_chars, 50_000);
    assert_eq!(s.store.integrity_strategy, IntegrityStrategy::Full);
    assert_eq!(
        s.scheduler.lanes,
        LaneSettings {
            main: 32,
            subagent: 8,
            delegate: 4,
            cron: 2,
        }
    );
    assert_eq!(s.scheduler, SchedulerSettings::default());
    assert_eq!(s.scheduler.queue_capacity, 10);
    assert_eq!(s.scheduler.debounce, Duration::ZERO);
    assert_eq!(s.gateway.queue_mode, QueueMode::Queue);
    assert_eq!(s.gateway.token_from_env, None);
    assert_eq!(
        s.gateway.limits.header_read_timeout,
        Duration::from_secs(10)
    );
    assert_eq!(s.default_agent, "main");
    assert!(s.unresolved.is_empty());
}

#[test]
fn configured_limits_and_levels_land_in_the_agents_settings() {
    let home = tempfile::tempdir().expect("tempdir");
    let config = r#"{
      agents: {
        defaults: {
          provider: "anthropic", model: "claude-x", fallbacks: ["openai/gpt-4o", "claude-y"],
          max_tokens: 2000, fallback_cooldown_seconds: 9,
          limits: { tool_result_max_chars: 777, default_max_tokens: 1234, max_tool_calls_per_turn: 4 },
          subagents: { max_depth: 2, maxChildren: 3 }, context_files: { file_max_chars: 900 },
        },
        list: [{ id: "writer", tools_deny: ["exec"], tools_by_provider: { anthropic: { deny: ["web_fetch"] } },
                 max_iterations: 7, default: true }],
      },
      providers: {
        anthropic: { stream_idle_timeout_seconds: 5, timeout_seconds: 30 },
        openai: {},
      },
      gateway: { max_message_chars: 1000, lanes: { subagent: 3 }, queue_mode: "interrupt", debounce_ms: 250 },
      session: { integrity_strategy: "remove_orphans" },
      tools: {
        profile: "coding", by_provider: { anthropic: { deny: ["process"] } },
        input_guard: "block", denied_paths: ["secret", "/srv/private"], rate_limit_per_hour: 100,
        exec: { mode: "allowlist", allowlist: ["git"], timeout_seconds: 9, sandbox: "off",
                limits: { cpu_seconds: 5 }, custom: [{ name: "dns", command: "dig {{.d}}", timeout_seconds: 3 }] },
        web: { search: { provider: "searxng", base_url: "http://searx.lan", timeout_seconds: 4 },
               fetch: { max_chars: 10 }, ssrf: { allow_private: true } },
      },
    }"#;
    let s = load_in(
        &home,
        config,
        &[
            ("ANTHROPIC_API_KEY", "sk-ant-test"),
            ("OPENAI_API_KEY", "sk-oai-test"),
            ("FERROCLAW_LANE_MAIN", "5"),
        ],
    )
    .settings();
    assert_eq!(s.default_agent, "writer");
    let w = match s.agent("writer") {
        Ok(a) => a,
        Err(e) => panic!("writer did not resolve: {e}"),
    };

    assert_eq!(w.limits.max_message_chars, 1000);
    assert_eq!(w.limits.tool_result_max_chars, 777);
    assert_eq!(w.limits.max_tool_calls_per_turn, 4);
    assert_eq!(w.max_iterations, 7);
    assert_eq!(w.context_files.file_max_chars, 900);
    assert_eq!(w.context_files.total_max_chars, 24_000);
    assert_eq!(w.max_tokens, Some(2000));

    let chain: Vec<(&str, &str)> = w
        .providers
        .candidates()
        .map(|c| (c.provider.name.as_str(), c.model.as_str()))
        .collect();
    assert_eq!(
        chain,
        [
            ("anthropic", "claude-x"),
            ("openai", "gpt-4o"),
            ("anthropic", "claude-y")
        ]
    );
    let anthropic = &w.providers.primary.provider;
    assert_eq!(anthropic.kind, ProviderKind::Anthropic);
    assert_eq!(anthropic.default_max_tokens, 1234);
    assert_eq!(anthropic.idle_timeout, Duration::from_secs(5));
    assert_eq!(anthropic.request_timeout, Duration::from_secs(30));
    assert_eq!(
        w.providers.fallbacks[0].provider.idle_timeout,
        Duration::from_secs(120)
    );
    assert_eq!(w.providers.cooldown, Duration::from_secs(9));

    let policy = &w.tools.policy;
    assert_eq!(policy.provider_name, "anthropic");
    assert_eq!(policy.global.profile, Some(ToolProfile::Coding));
    assert_eq!(
        policy.provider.as_ref().map(|p| p.deny.clone()),
        Some(vec!["process".to_string()])
    );
    assert_eq!(policy.agent.deny, ["exec"]);
    assert_eq!(
        policy.agent_provider.as_ref().map(|p| p.deny.clone()),
        Some(vec!["web_fetch".to_string()])
    );
    assert_eq!(w.tools.input_guard, InputGuardAction::Block);
    assert_eq!(
        w.tools.denied_paths,
        [
            home.path().join("secret"),
            std::path::PathBuf::from("/srv/private")
        ]
    );
    assert_eq!(w.tools.web.search.provider, SearchProvider::Searxng);
    assert_eq!(
        w.tools.web.search.base_url.as_deref(),
        Some("http://searx.lan")
    );
    assert_eq!(w.tools.web.search.timeout, Duration::from_secs(4));
    assert_eq!(w.tools.web.fetch.max_chars, 10);
    assert!(w.tools.web.fetch.ssrf.allow_private);

    // `main` inherits the defaults but not the writer's own levels.
    let m = main_agent(&s);
    assert_eq!(m.tools.policy.agent, ToolPolicySettings::default());
    assert_eq!(m.workspace, home.path().join("workspace"));
    assert_eq!(w.workspace, home.path().join("workspace-writer"));

    let exec = &s.shared.exec;
    assert_eq!(exec.mode, ExecMode::Allowlist);
    assert_eq!(exec.allowlist, ["git"]);
    assert_eq!(exec.timeout, Duration::from_secs(9));
    assert_eq!(exec.sandbox.mode, SandboxMode::Off);
    assert_eq!(exec.sandbox.limits.cpu_seconds, 5);
    assert_eq!(exec.sandbox.limits.memory_mb, 2048);
    assert_eq!(exec.custom[0].timeout, Duration::from_secs(3));
    assert_eq!(s.shared.tool_calls_per_hour, 100);
    assert_eq!(
        s.shared.subagents,
        SubagentSettings {
            max_depth: 2,
            max_children: 3,
        }
    );
    assert_eq!(s.store.integrity_strategy, IntegrityStrategy::RemoveOrphans);
    assert_eq!(s.store.tool_result_max_chars, 777);
    assert_eq!(s.scheduler.lanes.main, 5);
    assert_eq!(s.scheduler.lanes.subagent, 3);
    assert_eq!(s.gateway.queue_mode, QueueMode::Interrupt);
    assert_eq!(s.scheduler.queue_capacity, 10);
    assert_eq!(s.scheduler.debounce, Duration::from_millis(250));
}

#[test]
fn secrets_from_the_environment_land_in_the_settings() {
    let home = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        home.path().join(".env.local"),
        "ANTHROPIC_API_KEY=sk-ant-from-dotenv\nSEARCH_KEY=brave-from-dotenv\n",
    )
    .expect("write .env.local");
    let config = r#"{
      agents: { defaults: { provider: "anthropic", model: "claude-x" } },
      tools: { web: { search: { provider: "brave", api_key_env: "SEARCH_KEY" } } },
      gateway: { users: [{ id: "alice", token_env: "ALICE_TOKEN", role: "viewer" },
                         { id: "bob", token_env: "BOB_TOKEN" }] },
    }"#;
    let s = load_in(
        &home,
        config,
        &[
            ("ALICE_TOKEN", " alice-secret "),
            ("FERROCLAW_GATEWAY_TOKEN", "gw-secret"),
            ("FERROCLAW_LANE_SUBAGENT", "zero"),
        ],
    )
    .settings();
    let a = main_agent(&s);
    assert_eq!(
        a.providers.primary.provider.api_key.as_deref(),
        Some("sk-ant-from-dotenv")
    );
    let search = &a.tools.web.search;
    assert_eq!(search.api_key.as_deref(), Some("brave-from-dotenv"));
    assert_eq!(search.api_key_env, "SEARCH_KEY");
    assert_eq!(search.base_url.as_deref(), Some(BRAVE_DEFAULT_BASE));

    assert_eq!(s.gateway.token_from_env.as_deref(), Some("gw-secret"));
    assert_eq!(s.gateway.viewer_token, None);
    let users: Vec<(&str, Option<&str>, UserRole)> = s
        .gateway
        .users
        .iter()
        .map(|u| (u.id.as_str(), u.token.as_deref(), u.role))
        .collect();
    assert_eq!(
        users,
        [
            ("alice", Some("alice-secret"), UserRole::Viewer),
            ("bob", None, UserRole::Operator)
        ]
    );
    // An unusable lane override keeps the configured size.
    assert_eq!(s.scheduler.lanes.subagent, 8);
}

#[test]
fn an_agent_that_cannot_resolve_is_reported_not_fatal() {
    let home = tempfile::tempdir().expect("tempdir");
    let config = r#"{ agents: { list: [{ id: "local", provider: "ollama", model: "llama3" }] } }"#;
    let s = load_in(
        &home,
        config,
        &[("OPENAI_API_KEY", "sk-a"), ("ANTHROPIC_API_KEY", "sk-b")],
    )
    .settings();
    // Two cloud providers and no choice: `main` cannot pick one; `local` names its own.
    let ids: Vec<&str> = s.agents.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, ["local"]);
    let e = s.agent("main").map(|a| a.id.clone()).unwrap_err();
    assert!(e.to_string().contains("several providers"), "{e}");
    let e = s.agent("nobody").map(|a| a.id.clone()).unwrap_err();
    assert!(e.to_string().contains("unknown agent `nobody`"), "{e}");
}

#[test]
fn heartbeats_are_off_by_default_resolved_per_agent_and_bad_values_named() {
    let home = tempfile::tempdir().expect("tempdir");
    let config = r#"{
      agents: {
        defaults: { model: "gpt-4o", heartbeat: { enabled: true, every: "45m",
                                 active_hours: { start: "22:00", end: "06:30", timezone: "Europe/Berlin" } } },
        list: [
          { id: "quiet", heartbeat: { enabled: false } },
          { id: "bad", heartbeat: { enabled: true, every: "soon" } },
          { id: "late", heartbeat: { enabled: true, every: "1h", active_hours: { start: "25:00", end: "06:00" } } },
          { id: "nowhere", heartbeat: { enabled: true, target: "email" } },
        ],
      },
    }"#;
    let s = load_in(&home, config, &[("OPENAI_API_KEY", "sk-a")]).settings();
    let hb = main_agent(&s)
        .heartbeat
        .clone()
        .expect("main inherits the default");
    assert_eq!(hb.every, Duration::from_secs(45 * 60));
    assert_eq!(
        hb.active_hours,
        Some((22 * 60, 6 * 60 + 30, "Europe/Berlin".to_string()))
    );
    assert!(hb.deliver_to_last);
    assert_eq!(
        s.agent("quiet").map(|a| a.heartbeat.clone()).ok(),
        Some(None)
    );
    for (id, why) in [
        ("bad", "heartbeat.every `soon`"),
        ("late", "heartbeat.active_hours.start `25:00`"),
        ("nowhere", "heartbeat.target `email`"),
    ] {
        let e = s.agent(id).map(|a| a.id.clone()).unwrap_err();
        assert!(e.to_string().contains(why), "{id}: {e}");
    }
    // Unset: off.
    let home = tempfile::tempdir().expect("tempdir");
    let s = load_in(
        &home,
        r#"{ agents: { defaults: { model: "gpt-4o" } } }"#,
        &[("OPENAI_API_KEY", "sk-a")],
    )
    .settings();
    assert!(main_agent(&s).heartbeat.is_none());
}
