//! Hermetic tests: every case builds its own temp home and `Env`; nothing
//! reads or writes the process environment.

use std::path::PathBuf;

use tempfile::TempDir;

use super::*;

struct Home {
    dir: TempDir,
}

impl Home {
    fn new() -> Home {
        Home {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }
    fn path(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }
    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.dir.path().join(name), text).expect("write");
    }
    fn opts(&self) -> LoadOptions {
        LoadOptions {
            home: Some(self.path()),
            config_path: None,
        }
    }
    fn load(&self, pairs: &[(&str, &str)]) -> Result<LoadedConfig, ConfigError> {
        load(&self.opts(), Env::from_pairs(pairs.iter().copied()))
    }
    fn load_ok(&self, pairs: &[(&str, &str)]) -> LoadedConfig {
        match self.load(pairs) {
            Ok(c) => c,
            Err(e) => panic!("load failed: {e}"),
        }
    }
}

fn invalid(err: ConfigError) -> (String, String) {
    match err {
        ConfigError::Invalid { field, message, .. } => (field, message),
        other => panic!("expected Invalid, got {other:?}"),
    }
}

// ---------------------------------------------------------------- loading

#[test]
fn missing_file_gives_defaults() {
    let h = Home::new();
    let c = h.load_ok(&[]);
    assert!(!c.file_exists);
    assert_eq!(c.config, Config::default());
    assert_eq!(c.path, h.path().join("config.json5"));
    assert_eq!(c.home, h.path());
    assert_eq!(c.config.gateway.port, 18789);
    assert_eq!(c.config.gateway.host, "127.0.0.1");
    assert_eq!(c.config.agents.defaults.max_iterations, 20);
    assert_eq!(c.config.session.history_turns, 50);
    assert!(c.warnings.is_empty());
}

#[test]
fn home_and_config_path_resolution_order() {
    let h = Home::new();
    let other = Home::new();
    other.write("custom.json5", "{ gateway: { port: 1 } }");
    let env = Env::from_pairs([
        ("FERROCLAW_HOME", h.path().display().to_string()),
        (
            "FERROCLAW_CONFIG",
            other.path().join("custom.json5").display().to_string(),
        ),
    ]);
    assert_eq!(default_home(&env), h.path());
    let c = load(&LoadOptions::default(), env.clone()).expect("load");
    assert_eq!(c.home, h.path());
    assert_eq!(c.config.gateway.port, 1);

    // CLI flags beat the environment.
    let flag_home = Home::new();
    let c = load(
        &LoadOptions {
            home: Some(flag_home.path()),
            config_path: Some(flag_home.path().join("nope.json5")),
        },
        env,
    )
    .expect("load");
    assert_eq!(c.home, flag_home.path());
    assert!(!c.file_exists);

    let env = Env::from_pairs([("HOME", "/home/u")]);
    assert_eq!(default_home(&env), PathBuf::from("/home/u/.ferroclaw"));
}

#[test]
fn full_config_parses() {
    let h = Home::new();
    h.write(
        "config.json5",
        r#"// everything
{
  agents: {
    defaults: {
      provider: "local",
      model: "qwen3",
      fallbacks: ["openai/gpt-4o-mini", "qwen2"],
      workspace: "ws",
      context_window: 32000,
      max_iterations: 7,
      timeout_seconds: 30,
      max_tokens: 2048,
      temperature: 0.2,
      prompt_mode: "minimal",
      stream: false,
    },
    list: [
      { id: "coder", name: "Coder", tools: ["exec"], max_iterations: 50, default: true,
        prompt_mode: "full", fallbacks: [], timeout_seconds: 5, context_window: 8000 },
    ],
  },
  providers: {
    local: { type: "openai_compat", base_url: "http://10.0.0.1:8000/v1/",
             headers: { "X-Team": "a" }, timeout_seconds: 60, schema_flavor: "openai",
             models: [{ id: "qwen3", context_window: 40000, max_tokens: 1024 }] },
    openai: {},
  },
  gateway: { host: "0.0.0.0", port: 9000 },
  logging: { level: "debug", format: "json" },
  session: { history_turns: 10, tool_result_context_chars: 500 },
}"#,
    );
    let c = h.load_ok(&[]);
    assert!(c.file_exists);
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let cfg = &c.config;
    assert_eq!(cfg.agents.defaults.prompt_mode, PromptMode::Minimal);
    assert!(!cfg.agents.defaults.stream);
    assert_eq!(
        cfg.agents.list[0].tools.as_deref(),
        Some(&["exec".to_string()][..])
    );
    assert_eq!(cfg.providers["openai"].r#type, ProviderType::OpenaiCompat);
    assert_eq!(cfg.logging.format, LogFormat::Json);
    assert_eq!(cfg.gateway.port, 9000);
    assert_eq!(c.default_agent_id(), "coder");
    assert_eq!(c.agent_ids(), vec!["main".to_string(), "coder".to_string()]);

    let local = c.provider("local").expect("local provider");
    assert_eq!(
        local.base_url, "http://10.0.0.1:8000/v1",
        "trailing slash trimmed"
    );
    assert_eq!(local.headers, vec![("X-Team".to_string(), "a".to_string())]);
    assert_eq!(local.timeout, Duration::from_secs(60));
    assert_eq!(local.api_key, None, "local servers need no key");

    let main = c.resolve_agent("main").expect("main");
    assert_eq!(main.provider, "local");
    assert_eq!(main.model, "qwen3");
    assert_eq!(main.context_window, 40000, "model entry wins");
    assert_eq!(main.max_tokens, Some(1024));
    assert_eq!(main.workspace, h.path().join("ws"));
    assert_eq!(
        main.fallbacks,
        vec![
            ("openai".to_string(), "gpt-4o-mini".to_string()),
            ("local".to_string(), "qwen2".to_string())
        ]
    );
    assert_eq!(main.history_turns, 10);
    assert_eq!(main.tool_result_context_chars, 500);
    assert_eq!(main.temperature, Some(0.2));
}

#[test]
fn empty_file_is_defaults() {
    let h = Home::new();
    h.write("config.json5", "  \n");
    let c = h.load_ok(&[]);
    assert!(c.file_exists);
    assert_eq!(c.config, Config::default());
}

#[test]
fn unknown_key_is_a_warning_with_path_and_line() {
    let h = Home::new();
    h.write(
        "config.json5",
        "{\n  agents: {\n    defaults: {\n      modle: \"gpt\",\n    },\n    list: [{ id: \"a\" },\n      { id: \"b\", toolz: [] }],\n  },\n  gatway: {},\n}\n",
    );
    let c = h.load_ok(&[]);
    let rendered: Vec<String> = c.warnings.iter().map(|w| w.to_string()).collect();
    assert_eq!(
        rendered,
        vec![
            "unknown config key `agents.defaults.modle` (line 4)".to_string(),
            "unknown config key `agents.list[1].toolz` (line 7)".to_string(),
            "unknown config key `gatway` (line 9)".to_string(),
        ]
    );
    assert_eq!(c.warnings[0].key_path, "agents.defaults.modle");
    assert_eq!(c.warnings[0].line, Some(4));
}

#[test]
fn invalid_value_names_field_and_expectation() {
    let h = Home::new();
    h.write(
        "config.json5",
        "{ agents: { defaults: { max_iterations: \"lots\" } } }",
    );
    let (field, message) = invalid(h.load(&[]).unwrap_err());
    assert_eq!(field, "agents.defaults.max_iterations");
    assert!(
        message.contains("invalid type: string \"lots\", expected u32"),
        "{message}"
    );

    h.write(
        "config.json5",
        "{ agents: { list: [{ id: \"x\", tools: \"exec\" }] } }",
    );
    let (field, _) = invalid(h.load(&[]).unwrap_err());
    assert_eq!(field, "agents.list[0].tools");

    h.write(
        "config.json5",
        "{ providers: { p: { type: \"gpt\", base_url: \"http://x\" } } }",
    );
    let (field, message) = invalid(h.load(&[]).unwrap_err());
    assert_eq!(field, "providers.p.type");
    assert!(message.contains("openai_compat"), "{message}");

    h.write("config.json5", "[1, 2]");
    let (field, _) = invalid(h.load(&[]).unwrap_err());
    assert_eq!(field, "(root)");
}

#[test]
fn syntax_error_reports_line_and_column() {
    let h = Home::new();
    h.write(
        "config.json5",
        "{\n  gateway: {\n    port: 80 80,\n  },\n}\n",
    );
    match h.load(&[]).unwrap_err() {
        ConfigError::Syntax {
            line,
            column,
            message,
            path,
        } => {
            assert_eq!(line, 3);
            assert!(column > 1, "column {column}");
            assert!(!message.contains(" at line "), "{message}");
            assert_eq!(path, h.path().join("config.json5"));
        }
        other => panic!("expected Syntax, got {other:?}"),
    }
}

#[test]
fn api_key_in_file_is_rejected() {
    let h = Home::new();
    h.write(
        "config.json5",
        "{ providers: { openai: { api_key: \"sk-secret\" } } }",
    );
    let err = h.load(&[]).unwrap_err();
    let text = err.to_string();
    let (field, message) = invalid(err);
    assert_eq!(field, "providers.openai.api_key");
    assert!(message.contains("api_key_env"), "{message}");
    assert!(message.contains("FERROCLAW_OPENAI_API_KEY"), "{message}");
    assert!(!text.contains("sk-secret"));
}

#[test]
fn semantic_validation() {
    let h = Home::new();
    let cases: &[(&str, &str)] = &[
        (
            "{ agents: { defaults: { max_iterations: 0 } } }",
            "agents.defaults.max_iterations",
        ),
        (
            "{ agents: { list: [{ id: \"bad id\" }] } }",
            "agents.list[0].id",
        ),
        (
            "{ agents: { list: [{ name: \"no id\" }] } }",
            "agents.list[0].id",
        ),
        (
            "{ agents: { list: [{ id: \"a\" }, { id: \"a\" }] } }",
            "agents.list[1].id",
        ),
        (
            "{ agents: { list: [{ id: \"a\", default: true }, { id: \"b\", default: true }] } }",
            "agents.list[1].default",
        ),
        (
            "{ providers: { openai: {} }, agents: { defaults: { provider: \"nope\" } } }",
            "agents.defaults.provider",
        ),
        (
            "{ providers: { openai: {} }, agents: { list: [{ id: \"a\", provider: \"nope\" }] } }",
            "agents.list[0].provider",
        ),
        (
            "{ providers: { openai: {} }, agents: { defaults: { fallbacks: [\"openai/\"] } } }",
            "agents.defaults.fallbacks[0]",
        ),
        ("{ providers: { custom: {} } }", "providers.custom.base_url"),
        (
            "{ providers: { custom: { base_url: \"ftp://x\" } } }",
            "providers.custom.base_url",
        ),
        (
            "{ providers: { openai: { schema_flavor: \"claude\" } } }",
            "providers.openai.schema_flavor",
        ),
        (
            "{ agents: { defaults: { temperature: 9 } } }",
            "agents.defaults.temperature",
        ),
    ];
    for (text, want) in cases {
        h.write("config.json5", text);
        let (field, _) = invalid(h.load(&[]).expect_err(text));
        assert_eq!(&field, want, "for {text}");
    }
}

#[test]
fn provider_type_inferred_from_name() {
    let h = Home::new();
    h.write("config.json5", "{ providers: { anthropic: {} } }");
    let c = h.load_ok(&[]);
    let p = c.provider("anthropic").expect("anthropic");
    assert_eq!(p.kind, ProviderType::Anthropic);
    assert_eq!(p.base_url, "https://api.anthropic.com");
}

// ------------------------------------------------------------ environment

#[test]
fn dotenv_parsing() {
    let text = "# comment\n\nexport A=1\nB = 'single # kept'\nC=\"dq \\\"x\\\"\\n\" # trailing\nD=\"plain value\" # comment\nE=http://x/#frag\nA=2\n";
    let parsed = env::parse_dotenv(text).expect("parse");
    assert_eq!(parsed["A"], "2", "last assignment in the file wins");
    assert_eq!(parsed["B"], "single # kept");
    assert_eq!(parsed["C"], "dq \"x\"\n");
    assert_eq!(parsed["D"], "plain value");
    assert_eq!(parsed["E"], "http://x/#frag");

    // dotenvy's rules where they differ from a shell's: a value with spaces must be
    // quoted, and `$NAME` refers to an earlier key of the file (single quotes keep it).
    let text = "FERROCLAW_T_BASE=http://h\nFERROCLAW_T_URL=${FERROCLAW_T_BASE}/v1\nFERROCLAW_T_RAW='$FERROCLAW_T_BASE'\n";
    let parsed = env::parse_dotenv(text).expect("parse");
    assert_eq!(parsed["FERROCLAW_T_URL"], "http://h/v1");
    assert_eq!(parsed["FERROCLAW_T_RAW"], "$FERROCLAW_T_BASE");

    // Errors name the line the failing entry starts on.
    assert_eq!(env::parse_dotenv("no equals here").unwrap_err().0, 1);
    assert_eq!(env::parse_dotenv("OK=1\nX='open").unwrap_err().0, 2);
    assert_eq!(
        env::parse_dotenv("OK=1\n# c\n\nD=two words\n")
            .unwrap_err()
            .0,
        4
    );
    assert_eq!(
        env::parse_dotenv("M=\"one\ntwo\"\nOK=1\nbad line\n")
            .unwrap_err()
            .0,
        4,
        "a quoted value over two lines counts both"
    );
    assert_eq!(
        env::parse_dotenv("OK=1\nQ=\"never\nclosed\n")
            .unwrap_err()
            .0,
        2
    );
    assert!(env::parse_dotenv("1BAD=x").is_err());
}

#[test]
fn dotenv_overlay_process_env_wins() {
    let h = Home::new();
    h.write(
        ".env.local",
        "export OPENAI_API_KEY=\"sk-from-file-000000\"\nFERROCLAW_MODEL='gpt-4o'\nEMPTY_IN_PROCESS=filled\n",
    );
    let c = h.load_ok(&[
        ("OPENAI_API_KEY", "sk-from-process-1111"),
        ("EMPTY_IN_PROCESS", ""),
    ]);
    assert_eq!(c.env.get("OPENAI_API_KEY"), Some("sk-from-process-1111"));
    assert_eq!(c.env.get("FERROCLAW_MODEL"), Some("gpt-4o"));
    assert_eq!(
        c.env.get("EMPTY_IN_PROCESS"),
        Some("filled"),
        "empty counts as unset"
    );
    // The overlay feeds env-driven config.
    assert_eq!(c.config.agents.defaults.model.as_deref(), Some("gpt-4o"));

    let mut env = Env::from_pairs([("X", "1")]);
    assert_eq!(
        env.overlay_dotenv(&h.path().join("missing")).expect("ok"),
        0
    );
    h.write("bad.env", "X=2\nnot a line\n");
    match env.overlay_dotenv(&h.path().join("bad.env")).unwrap_err() {
        ConfigError::DotEnv { line, .. } => assert_eq!(line, 2),
        other => panic!("expected DotEnv, got {other:?}"),
    }
}

#[test]
fn env_overrides_common_fields() {
    let h = Home::new();
    h.write(
        "config.json5",
        "{ gateway: { port: 1000 }, logging: { level: \"warn\" } }",
    );
    let c = h.load_ok(&[
        ("FERROCLAW_PORT", "2000"),
        ("FERROCLAW_HOST", "0.0.0.0"),
        ("FERROCLAW_LOG_LEVEL", "debug"),
        ("FERROCLAW_LOG_FORMAT", "JSON"),
        ("FERROCLAW_PROVIDER", "ollama"),
        ("FERROCLAW_MODEL", "llama3"),
    ]);
    assert_eq!(c.config.gateway.port, 2000);
    assert_eq!(c.config.gateway.host, "0.0.0.0");
    assert_eq!(c.config.logging.level, "debug");
    assert_eq!(c.config.logging.format, LogFormat::Json);
    let main = c.resolve_agent("main").expect("main");
    assert_eq!(
        (main.provider.as_str(), main.model.as_str()),
        ("ollama", "llama3")
    );
    assert_eq!(
        c.provider("ollama").map(|p| p.base_url),
        Some("http://127.0.0.1:11434/v1".to_string())
    );

    match h.load(&[("FERROCLAW_PORT", "lots")]).unwrap_err() {
        ConfigError::Env { var, .. } => assert_eq!(var, "FERROCLAW_PORT"),
        other => panic!("expected Env, got {other:?}"),
    }
}

#[test]
fn implicit_providers_from_env() {
    let h = Home::new();
    h.write(
        "config.json5",
        "{ providers: { openai: { base_url: \"https://proxy/v1\" } } }",
    );
    let c = h.load_ok(&[
        ("OPENAI_API_KEY", "sk-openai-aaaaaaaa"),
        ("ANTHROPIC_API_KEY", "sk-ant-bbbbbbbbbbbb"),
        ("GROQ_API_KEY", "gsk-cccccccccccc"),
        ("FERROCLAW_VLLM_BASE_URL", "http://gpu:8000/v1"),
    ]);
    let names: Vec<String> = c.providers().into_iter().map(|p| p.name).collect();
    assert_eq!(names, vec!["openai", "anthropic", "groq", "vllm"]);
    let openai = c.provider("openai").expect("openai");
    assert_eq!(
        openai.base_url, "https://proxy/v1",
        "configured one is not replaced"
    );
    let ant = c.provider("anthropic").expect("anthropic");
    assert_eq!(ant.kind, ProviderType::Anthropic);
    assert_eq!(ant.api_key_source.as_deref(), Some("ANTHROPIC_API_KEY"));
    assert_eq!(
        c.provider("groq").expect("groq").base_url,
        "https://api.groq.com/openai/v1"
    );
    assert_eq!(
        c.provider("vllm").expect("vllm").base_url,
        "http://gpu:8000/v1"
    );
    assert!(c.provider("mistral").is_none(), "no key, not configured");
    assert!(
        c.provider("lmstudio").is_some(),
        "local servers resolve on demand"
    );

    let none = Home::new().load_ok(&[]);
    assert!(none.providers().is_empty());
}

#[test]
fn base_url_env_override() {
    let h = Home::new();
    h.write(
        "config.json5",
        "{ providers: { \"my-llm\": { base_url: \"http://a/v1\" }, openai: {} } }",
    );
    let c = h.load_ok(&[
        ("FERROCLAW_MY_LLM_BASE_URL", "http://b/v1"),
        ("FERROCLAW_OPENAI_BASE_URL", "http://c/v1"),
    ]);
    assert_eq!(c.provider("my-llm").expect("p").base_url, "http://b/v1");
    assert_eq!(c.provider("openai").expect("p").base_url, "http://c/v1");

    // The env override also satisfies the "base_url required" check.
    h.write("config.json5", "{ providers: { custom: {} } }");
    let c = h.load_ok(&[("FERROCLAW_CUSTOM_BASE_URL", "http://d/v1")]);
    assert_eq!(c.provider("custom").expect("p").base_url, "http://d/v1");
}

#[test]
fn api_key_precedence() {
    let h = Home::new();
    h.write(
        "config.json5",
        "{ providers: { openai: { api_key_env: \"TEAM_KEY\" }, groq: {} } }",
    );
    let all = [
        ("TEAM_KEY", "k-team"),
        ("FERROCLAW_OPENAI_API_KEY", "k-ferro"),
        ("OPENAI_API_KEY", "k-conventional"),
    ];
    let key = |pairs: &[(&str, &str)]| {
        let p = h.load_ok(pairs).provider("openai").expect("openai");
        (p.api_key, p.api_key_source)
    };
    let some = |k: &str, s: &str| (Some(k.to_string()), Some(s.to_string()));
    assert_eq!(key(&all), some("k-team", "TEAM_KEY"));
    assert_eq!(key(&all[1..]), some("k-ferro", "FERROCLAW_OPENAI_API_KEY"));
    assert_eq!(key(&all[2..]), some("k-conventional", "OPENAI_API_KEY"));
    assert_eq!(key(&[("TEAM_KEY", "")]), (None, None));
}

#[test]
fn masked_output_never_contains_the_key() {
    let h = Home::new();
    h.write(
        "config.json5",
        "{ providers: { openai: { headers: { Authorization: \"Bearer hdr-secret-123456\", \"X-Org\": \"acme\" } } } }",
    );
    let key = "sk-test-1234567890abcdef";
    let c = h.load_ok(&[("OPENAI_API_KEY", key), ("ANTHROPIC_API_KEY", "short")]);
    let shown = c.masked_json();
    let text = shown.to_string();
    assert!(!text.contains(key));
    assert!(!text.contains("hdr-secret-123456"));
    assert!(!text.contains("short"));
    let openai = &shown["providers"]["openai"];
    assert_eq!(openai["api_key"], "sk-…cdef");
    assert_eq!(openai["api_key_source"], "OPENAI_API_KEY");
    assert_eq!(openai["headers"]["X-Org"], "acme");
    assert_eq!(shown["providers"]["anthropic"]["api_key"], "***");
    assert_eq!(shown["gateway"]["port"], 18789);
    assert_eq!(mask_secret("abc"), "***");
    assert_eq!(mask_secret("ééééééééééééé"), "ééé…éééé", "char-safe");

    // MCP servers' environment and sensitive headers, and the OTLP exporter's.
    h.write(
        "config.json5",
        r#"{ mcp: { servers: { s: { command: "x", env: { API_TOKEN: "env-secret-0987654321" } },
                              h: { transport: "streamable-http", url: "http://127.0.0.1:9/mcp",
                                   headers: { Authorization: "Bearer mcp-secret-1234567", "X-Team": "json" } } } },
             tracing: { otlp: { endpoint: "http://127.0.0.1:4318", headers: { "x-api-key": "otlp-secret-1234567" } } } }"#,
    );
    let text = h.load_ok(&[]).masked_json().to_string();
    for secret in [
        "env-secret-0987654321",
        "mcp-secret-1234567",
        "otlp-secret-1234567",
    ] {
        assert!(!text.contains(secret), "{secret} shown: {text}");
    }
    assert!(
        text.contains("\"X-Team\":\"json\""),
        "harmless headers stay: {text}"
    );
}

// ------------------------------------------------------------- resolution

#[test]
fn model_prefix_split_vs_slashed_model_ids() {
    let h = Home::new();
    h.write(
        "config.json5",
        r#"{
  providers: {
    vllm: { base_url: "http://gpu:8000/v1" },
    anthropic: {},
  },
  agents: {
    defaults: { provider: "vllm", model: "openai/gpt-oss-20b" },
    list: [
      { id: "claude", model: "anthropic/claude-sonnet-4-5" },
      { id: "hf", model: "meta-llama/Llama-3-8B" },
      { id: "redundant", provider: "vllm", model: "vllm/qwen3" },
    ],
  },
}"#,
    );
    // OPENAI_API_KEY makes "openai" a known provider, yet the vLLM model id
    // written next to provider "vllm" must stay whole.
    let c = h.load_ok(&[("OPENAI_API_KEY", "sk-xxxxxxxxxxxxxxxx")]);
    let r = |id: &str| {
        let a = c.resolve_agent(id).expect(id);
        (a.provider, a.model)
    };
    let pair = |p: &str, m: &str| (p.to_string(), m.to_string());
    assert_eq!(r("main"), pair("vllm", "openai/gpt-oss-20b"));
    assert_eq!(r("claude"), pair("anthropic", "claude-sonnet-4-5"));
    assert_eq!(r("hf"), pair("vllm", "meta-llama/Llama-3-8B"));
    assert_eq!(r("redundant"), pair("vllm", "qwen3"));
}

#[test]
fn ferroclaw_model_with_provider_prefix_switches_provider() {
    let h = Home::new();
    h.write(
        "config.json5",
        "{ providers: { openai: {}, anthropic: {} }, agents: { defaults: { provider: \"openai\", model: \"gpt-4o\" } } }",
    );
    let c = h.load_ok(&[("FERROCLAW_MODEL", "anthropic/claude-x")]);
    let a = c.resolve_agent("main").expect("main");
    assert_eq!(
        (a.provider.as_str(), a.model.as_str()),
        ("anthropic", "claude-x")
    );
}

#[test]
fn agent_overrides_and_workspaces() {
    let h = Home::new();
    h.write(
        "config.json5",
        r#"{
  providers: { openai: {} },
  agents: {
    defaults: { model: "gpt-4o", max_iterations: 9, timeout_seconds: 100, context_window: 1000,
                fallbacks: ["gpt-4o-mini"] },
    list: [
      { id: "a", model: "o3", max_iterations: 3, timeout_seconds: 7, context_window: 50,
        prompt_mode: "minimal", tools: ["read"], fallbacks: [], workspace: "~/wa" },
      { id: "b", name: "Bee" },
      { id: "c", workspace: "/abs/c" },
      { id: "main", workspace: "rel" },
    ],
  },
}"#,
    );
    let c = h.load_ok(&[("HOME", "/home/u")]);
    let a = c.resolve_agent("a").expect("a");
    assert_eq!(a.provider, "openai", "the only provider");
    assert_eq!(a.model, "o3");
    assert_eq!(a.max_iterations, 3);
    assert_eq!(a.timeout, Duration::from_secs(7));
    assert_eq!(a.context_window, 50);
    assert_eq!(a.prompt_mode, PromptMode::Minimal);
    assert_eq!(a.tools, Some(vec!["read".to_string()]));
    assert!(a.fallbacks.is_empty());
    assert_eq!(a.workspace, PathBuf::from("/home/u/wa"));
    assert_eq!(a.name, "a");

    let b = c.resolve_agent("b").expect("b");
    assert_eq!(b.name, "Bee");
    assert_eq!(b.model, "gpt-4o");
    assert_eq!(b.max_iterations, 9);
    assert_eq!(b.context_window, 1000);
    assert_eq!(b.tools, None);
    assert_eq!(
        b.fallbacks,
        vec![("openai".to_string(), "gpt-4o-mini".to_string())]
    );
    assert_eq!(b.workspace, h.path().join("workspace-b"));
    assert!(b.stream);

    assert_eq!(
        c.resolve_agent("c").expect("c").workspace,
        PathBuf::from("/abs/c")
    );
    assert_eq!(
        c.resolve_agent("main").expect("main").workspace,
        h.path().join("rel")
    );
    assert_eq!(c.agent_ids(), vec!["main", "a", "b", "c"]);
    assert_eq!(c.default_agent_id(), "main");

    let plain = Home::new();
    let c = plain.load_ok(&[("OPENAI_API_KEY", "k"), ("FERROCLAW_MODEL", "m")]);
    assert_eq!(
        c.resolve_agent("main").expect("main").workspace,
        plain.path().join("workspace")
    );
}

#[test]
fn unknown_agent_and_missing_provider_errors() {
    let h = Home::new();
    h.write("config.json5", "{ agents: { list: [{ id: \"x\" }] } }");
    let c = h.load_ok(&[]);
    match c.resolve_agent("nope").unwrap_err() {
        ConfigError::UnknownAgent { id, known } => {
            assert_eq!(id, "nope");
            assert_eq!(known, vec!["main", "x"]);
        }
        other => panic!("expected UnknownAgent, got {other:?}"),
    }
    let msg = c.resolve_agent("main").unwrap_err().to_string();
    assert!(msg.contains("no provider configured"), "{msg}");
    assert!(
        msg.contains("OPENAI_API_KEY") && msg.contains("ferroclaw onboard"),
        "{msg}"
    );

    let c = h.load_ok(&[("OPENAI_API_KEY", "k"), ("GROQ_API_KEY", "k")]);
    let msg = c.resolve_agent("main").unwrap_err().to_string();
    assert!(msg.contains("several providers"), "{msg}");

    let c = h.load_ok(&[("OPENAI_API_KEY", "k")]);
    let msg = c.resolve_agent("main").unwrap_err().to_string();
    assert!(msg.contains("no model configured"), "{msg}");
}

// ---------------------------------------------------------------- starter

#[test]
fn starter_config_round_trips_without_warnings() {
    for (provider, model, url) in [
        ("openai", "gpt-4o-mini", None),
        ("anthropic", "claude-sonnet-4-5", None),
        ("vllm", "openai/gpt-oss-20b", Some("http://gpu:8000/v1")),
        ("my-server", "model \"quoted\"", None),
    ] {
        let h = Home::new();
        h.write("config.json5", &starter_config(provider, model, url));
        let c = h.load_ok(&[]);
        assert!(c.file_exists);
        assert!(c.warnings.is_empty(), "{provider}: {:?}", c.warnings);
        let a = c.resolve_agent("main").expect("main");
        assert_eq!((a.provider.as_str(), a.model.as_str()), (provider, model));
        if let Some(url) = url {
            assert_eq!(c.provider(provider).expect("p").base_url, url);
        }
        let expected_kind = if provider == "anthropic" {
            ProviderType::Anthropic
        } else {
            ProviderType::OpenaiCompat
        };
        assert_eq!(c.provider(provider).expect("p").kind, expected_kind);
    }
}

#[test]
fn tool_mode_and_intent_settings_resolve_and_validate() {
    let h = Home::new();
    h.write(
        "config.json5",
        r#"{ agents: { defaults: { provider: "local", model: "gpt-oss" } },
             providers: { local: { base_url: "http://127.0.0.1:8000/v1", tool_mode: "auto",
               intent: { order: ["harmony", "react"], sources: ["content", "reasoning"], prompt: "react" },
               models: [{ id: "gpt-oss", tool_mode: "intent" }] } } }"#,
    );
    let a = h.load_ok(&[]).resolve_agent("main").expect("main");
    assert_eq!(
        a.tool_mode,
        crate::ToolMode::Intent,
        "the model entry overrides the provider"
    );
    assert_eq!(a.intent.order, ["harmony", "react"]);
    assert_eq!(a.intent.prompt, "react");
    assert_eq!(
        a.intent.confirm,
        crate::schema::IntentConfirm::Off,
        "off unless asked"
    );

    h.write(
        "config.json5",
        r#"{ agents: { defaults: { provider: "local", model: "qwen3" } },
             providers: { local: { base_url: "http://127.0.0.1:8000/v1", tool_mode: "auto",
               intent: { order: ["harmony", "native_text", "fuzzy"], prompt: "native_text", confirm: "guided" } } } }"#,
    );
    let a = h.load_ok(&[]).resolve_agent("main").expect("main");
    assert_eq!(a.intent.confirm, crate::schema::IntentConfirm::Guided);
    assert_eq!(a.intent.order, ["harmony", "native_text", "fuzzy"]);
    h.write(
        "config.json5",
        r#"{ providers: { local: { base_url: "http://127.0.0.1:8000/v1", intent: { confirm: "maybe" } } } }"#,
    );
    let err = h.load(&[]).expect_err("unknown confirm mode").to_string();
    assert!(err.contains("maybe") && err.contains("guided"), "{err}");

    for (snippet, field) in [
        (
            r#"intent: { order: ["regex"] }"#,
            "providers.local.intent.order",
        ),
        (
            r#"intent: { sources: ["thoughts"] }"#,
            "providers.local.intent.sources",
        ),
        (
            r#"intent: { prompt: "xml" }"#,
            "providers.local.intent.prompt",
        ),
        (r#"intent: { order: [] }"#, "providers.local.intent.order"),
    ] {
        h.write(
            "config.json5",
            &format!(r#"{{ providers: {{ local: {{ base_url: "http://127.0.0.1:8000/v1", {snippet} }} }} }}"#),
        );
        let (f, msg) = invalid(h.load(&[]).expect_err(snippet));
        assert_eq!(f, field, "{snippet}: {msg}");
    }
}

#[test]
fn agent_limits_default_parse_and_validate() {
    let h = Home::new();
    let c = h.load_ok(&[]);
    let l = c.config.agents.defaults.limits;
    assert_eq!(l, AgentLimits::default());
    assert_eq!(l.max_reply_bytes, 1 << 20);
    assert_eq!(l.max_tool_calls_per_turn, 32);
    assert_eq!(l.tool_result_max_chars, 50_000);

    h.write(
        "config.json5",
        "{ agents: { defaults: { limits: { maxReplyBytes: 4096, max_tool_calls_per_turn: 3,\n  maxConcurrentTools: 2, max_concurrent_tools_total: 5, toolResultMaxChars: 900,\n  default_max_tokens: 1000, max_reply_byte: 1 } } } }",
    );
    let c = h.load_ok(&[("OPENAI_API_KEY", "sk-test"), ("FERROCLAW_MODEL", "gpt-4o")]);
    let l = c.config.agents.defaults.limits;
    assert_eq!(
        l,
        AgentLimits {
            max_reply_bytes: 4096,
            max_tool_calls_per_turn: 3,
            max_concurrent_tools: 2,
            max_concurrent_tools_total: 5,
            tool_result_max_chars: 900,
            default_max_tokens: 1000,
        }
    );
    let warned: Vec<&str> = c.warnings.iter().map(|w| w.key_path.as_str()).collect();
    assert_eq!(warned, ["agents.defaults.limits.max_reply_byte"]);
    assert_eq!(c.resolve_agent("main").map(|a| a.limits).unwrap(), l);

    h.write(
        "config.json5",
        "{ agents: { defaults: { limits: { max_concurrent_tools: 0 } } } }",
    );
    let (field, message) = invalid(h.load(&[]).unwrap_err());
    assert_eq!(field, "agents.defaults.limits.max_concurrent_tools");
    assert_eq!(message, "must be at least 1");
}

#[test]
fn exec_env_refuses_credentials_and_gateway_variables_at_load() {
    let h = Home::new();
    h.write(
        "config.json5",
        r#"{ tools: { exec: { env: { GIT_AUTHOR_NAME: "bot", OPENAI_API_KEY: "sk-x" } } } }"#,
    );
    let (field, message) = invalid(h.load(&[]).unwrap_err());
    assert_eq!(field, "tools.exec.env");
    assert!(
        message.contains("OPENAI_API_KEY") && message.contains("credential"),
        "{message}"
    );
    h.write(
        "config.json5",
        r#"{ tools: { exec: { env: { FERROCLAW_HOME: "/x" } } } }"#,
    );
    let (_, message) = invalid(h.load(&[]).unwrap_err());
    assert!(message.contains("FERROCLAW_"), "{message}");
    h.write(
        "config.json5",
        r#"{ tools: { exec: { sandbox: "off", env: { GIT_AUTHOR_NAME: "bot" } } } }"#,
    );
    let c = h.load_ok(&[]);
    assert_eq!(c.config.tools.exec.sandbox, SandboxModeConfig::Off);
}

#[test]
fn mcp_servers_are_checked_with_the_field_and_the_reason() {
    let h = Home::new();
    let cases: &[(&str, &str, &str)] = &[
        ("{ mcp: { servers: { s: {} } } }", "mcp.servers.s.command", "needs a `command`"),
        (
            "{ mcp: { servers: { s: { transport: \"websocket\", url: \"http://x\" } } } }",
            "mcp.servers.s.transport",
            "unknown `websocket`",
        ),
        (
            "{ mcp: { servers: { s: { transport: \"sse\" } } } }",
            "mcp.servers.s.url",
            "needs a `url`",
        ),
        (
            "{ mcp: { servers: { s: { transport: \"streamable-http\", url: \"file:///etc\" } } } }",
            "mcp.servers.s.url",
            "http:// or https://",
        ),
        (
            "{ mcp: { servers: { s: { transport: \"streamable-http\", url: \"http://x/mcp\", headers: { \"Mcp-Session-Id\": \"stolen\" } } } } }",
            "mcp.servers.s.headers.Mcp-Session-Id",
            "set by the MCP transport",
        ),
        (
            "{ mcp: { servers: { s: { transport: \"streamable-http\", url: \"http://x/mcp\", headers: { \"Bad Header\": \"v\" } } } } }",
            "mcp.servers.s.headers.Bad Header",
            "not a valid HTTP header name",
        ),
        (
            "{ mcp: { servers: { s: { transport: \"sse\", url: \"http://x/sse\", headers: { \"X-A\": \"v\\r\\nHost: evil\" } } } } }",
            "mcp.servers.s.headers.X-A",
            "line breaks",
        ),
        (
            "{ mcp: { servers: { s: { command: \"x\", timeout_seconds: 0 } } } }",
            "mcp.servers.s.timeout_seconds",
            "at least 1 second",
        ),
        (
            "{ mcp: { servers: { s: { command: \"x\", tool_prefix: \"a b\" } } } }",
            "mcp.servers.s.tool_prefix",
            "letters, digits",
        ),
        (
            "{ mcp: { servers: { \"a.b\": { command: \"x\" } } } }",
            "mcp.servers.a.b",
            "server names",
        ),
    ];
    for (text, field, why) in cases {
        h.write("config.json5", text);
        let (f, m) = invalid(h.load(&[]).expect_err(text));
        assert_eq!(&f, field, "{text}");
        assert!(m.contains(why), "{text}: {m}");
    }
    // Look-alikes that are fine: an Authorization header, a https URL, a prefix with `-`.
    h.write(
        "config.json5",
        "{ mcp: { servers: { remote: { transport: \"streamable-http\", url: \"https://mcp.example.com/mcp\", headers: { Authorization: \"Bearer x\" }, tool_prefix: \"ex-1\" }, local: { command: \"npx\" } } } }",
    );
    let loaded = h.load_ok(&[]);
    assert_eq!(loaded.config.mcp.servers.len(), 2);
}

#[test]
fn a_telegram_channel_is_checked_and_its_token_comes_from_the_environment() {
    let h = Home::new();
    let cases: &[(&str, &str, &str)] = &[
        (
            "{ channels: { telegram: { api_base_url: \"ftp://x\" } } }",
            "channels.telegram.api_base_url",
            "http:// or https://",
        ),
        (
            "{ channels: { telegram: { poll_timeout_seconds: 0 } } }",
            "channels.telegram.poll_timeout_seconds",
            "1 to 50 seconds",
        ),
        (
            "{ channels: { telegram: { token_env: \" \" } } }",
            "channels.telegram.token_env",
            "environment variable",
        ),
        (
            "{ channels: { telegram: { bindings: [{ chat: \"-100\" }] } } }",
            "channels.telegram.bindings[0].agent",
            "name an agent",
        ),
        (
            "{ channels: { discord: { gateway_url: \"https://gateway.discord.gg\" } } }",
            "channels.discord.gateway_url",
            "ws:// or wss://",
        ),
        (
            "{ channels: { discord: { api_base_url: \"discord.com\" } } }",
            "channels.discord.api_base_url",
            "http:// or https://",
        ),
        (
            "{ channels: { discord: { intents: 1 } } }",
            "channels.discord.intents",
            "unknown",
        ),
        (
            "{ channels: { feishu: { } } }",
            "channels.feishu.app_id",
            "cli_",
        ),
        (
            "{ channels: { zalo: { group_policy: \"open\" } } }",
            "channels.zalo.group_policy",
            "unknown",
        ),
        (
            "{ channels: { whatsapp: { bridge_url: \"http://127.0.0.1:3001\" } } }",
            "channels.whatsapp.bridge_url",
            "ws:// or wss://",
        ),
        (
            "{ channels: { slack: { app_token_env: \"\" } } }",
            "channels.slack.app_token_env",
            "app-level token",
        ),
    ];
    for (text, field, why) in cases {
        h.write("config.json5", text);
        let (f, m) = invalid(h.load(&[]).expect_err(text));
        assert_eq!(&f, field, "{text}");
        assert!(m.contains(why), "{text}: {m}");
    }
    // A token written into the file is refused by name, never taken.
    h.write(
        "config.json5",
        "{ channels: { telegram: { token: \"123:secret\" } } }",
    );
    let err = h.load(&[]).expect_err("a token in the file").to_string();
    assert!(err.contains("token"), "{err}");
    assert!(!err.contains("123:secret"), "{err}");
    // Look-alikes that are fine: a self-hosted API, a dm policy, allow entries with @.
    h.write(
        "config.json5",
        "{ channels: { telegram: { api_base_url: \"http://127.0.0.1:8081\", dm_policy: \"allowlist\", allow_from: [\"@ann\", \"42|bob\"], token_env: \"MY_BOT\" } } }",
    );
    let loaded = h.load_ok(&[("MY_BOT", " 123:abc ")]);
    let settings = loaded.settings();
    let tg = settings.channels.telegram.expect("configured");
    assert_eq!(tg.token.as_deref(), Some("123:abc"));
    assert_eq!(tg.config.dm_policy, crate::DmPolicy::Allowlist);
    assert!(!format!("{tg:?}").contains("123:abc"));
    let unset = h
        .load_ok(&[])
        .settings()
        .channels
        .telegram
        .expect("configured");
    assert!(unset.token.is_none());
}

#[test]
fn tracing_is_checked_and_resolved_with_its_prices_and_otlp_headers() {
    let h = Home::new();
    for (text, field, why) in [
        (
            "{ tracing: { otlp: { endpoint: \"127.0.0.1:4317\" } } }",
            "tracing.otlp.endpoint",
            "http:// or https://",
        ),
        (
            "{ tracing: { otlp: { endpoint: \"http://127.0.0.1:4317\", protocol: \"thrift\" } } }",
            "tracing.otlp.protocol",
            "\"http\" or \"grpc\"",
        ),
        ("{ tracing: { queue: 0 } }", "tracing.queue", "at least 1"),
    ] {
        h.write("config.json5", text);
        let (f, m) = invalid(h.load(&[]).expect_err(text));
        assert_eq!(f, field, "{text}");
        assert!(m.contains(why), "{text}: {m}");
    }
    // An unknown key inside tracing is refused, not ignored.
    h.write("config.json5", "{ tracing: { verbos: true } }");
    assert!(h.load(&[]).is_err());

    h.write(
        "config.json5",
        r#"{ agents: { defaults: { provider: "p", model: "m" } },
             providers: { p: { type: "openai_compat", base_url: "http://127.0.0.1:9/v1",
               models: [{ id: "m", cost: { input: 2, output: 8 } }] } },
             tracing: { retention_days: 0, verbose: true,
               otlp: { endpoint: "http://collector:4318/", headers: { "X-Team": "a", "authorization": "file" } } } }"#,
    );
    let s = h
        .load_ok(&[(
            "OTEL_EXPORTER_OTLP_HEADERS",
            "authorization=Bearer k, x-more = 1",
        )])
        .settings();
    let t = &s.tracing;
    assert!(t.enabled && t.verbose);
    assert_eq!(t.retention, None, "0 keeps traces for ever");
    assert_eq!(t.prices.len(), 1);
    assert_eq!(
        (t.prices[0].input, t.prices[0].output, t.prices[0].cached),
        (2.0, 8.0, 2.0),
        "cached tokens cost the input price unless priced"
    );
    let o = t.otlp.as_ref().expect("otlp");
    assert_eq!(o.endpoint, "http://collector:4318/v1/traces");
    assert_eq!(o.service_name, "ferroclaw");
    let mut headers = o.headers.clone();
    headers.sort();
    assert_eq!(
        headers,
        [
            ("authorization".to_string(), "Bearer k".to_string()),
            ("x-more".into(), "1".into()),
            ("x-team".into(), "a".into()),
        ],
        "the variable's headers win over the file's"
    );
    assert_eq!(
        s.agents[0].stall_timeout,
        Some(std::time::Duration::from_secs(300))
    );
}
