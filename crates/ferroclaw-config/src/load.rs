//! Locating, reading, parsing and validating `config.json5`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::keylines::{key_lines, render_path, Seg};
use crate::providers::{env_name, known_provider_names, well_known};
use crate::schema::{Config, LogFormat};
use crate::{ConfigError, Env, LoadedConfig};

/// Where to look for configuration. Mirrors the CLI flags; `None` defers to
/// the environment and then the defaults.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    pub home: Option<PathBuf>,
    pub config_path: Option<PathBuf>,
}

/// A key in the file that no setting recognises. Not fatal: a typo should not
/// stop the gateway, but the user should see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    /// Dotted path of the key, e.g. `agents.defaults.modle`.
    pub key_path: String,
    /// 1-based line of the key in the file, when it could be located.
    pub line: Option<usize>,
    pub message: String,
}

impl std::fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        if let Some(line) = self.line {
            write!(f, " (line {line})")?;
        }
        Ok(())
    }
}

/// `FERROCLAW_HOME`, else `$HOME/.ferroclaw` (a leading `~/` in
/// `FERROCLAW_HOME` is expanded too).
pub fn default_home(env: &Env) -> PathBuf {
    match env.get("FERROCLAW_HOME") {
        Some(h) => expand_tilde(Path::new(h), env),
        None => match env.get("HOME") {
            Some(h) => Path::new(h).join(".ferroclaw"),
            // No HOME (some service managers): fall back to the working
            // directory rather than failing outright.
            None => PathBuf::from(".ferroclaw"),
        },
    }
}

/// Expands a leading `~` / `~/` using `HOME` from `env`.
pub(crate) fn expand_tilde(p: &Path, env: &Env) -> PathBuf {
    let Some(home) = env.get("HOME") else {
        return p.to_path_buf();
    };
    match p.to_str() {
        Some("~") => PathBuf::from(home),
        Some(s) if s.starts_with("~/") => Path::new(home).join(&s[2..]),
        _ => p.to_path_buf(),
    }
}

/// Loads configuration: resolves home and config path, overlays
/// `<home>/.env.local` onto `env`, parses the file (a missing file means
/// defaults), applies `FERROCLAW_*` overrides and validates the result.
pub fn load(opts: &LoadOptions, mut env: Env) -> Result<LoadedConfig, ConfigError> {
    // Home cannot come from .env.local: that file lives inside home.
    let home = match &opts.home {
        Some(h) => expand_tilde(h, &env),
        None => default_home(&env),
    };
    env.overlay_dotenv(&home.join(".env.local"))?;

    let path = match &opts.config_path {
        Some(p) => expand_tilde(p, &env),
        None => match env.get("FERROCLAW_CONFIG") {
            Some(p) => expand_tilde(Path::new(p), &env),
            None => home.join("config.json5"),
        },
    };

    let (text, file_exists) = match std::fs::read_to_string(&path) {
        Ok(t) => (t, true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (String::new(), false),
        Err(source) => return Err(ConfigError::Io { path, source }),
    };

    let (mut config, warnings) = parse_config(&text, &path)?;
    apply_env_overrides(&mut config, &env)?;
    validate(&config, &env, &path)?;

    for w in &warnings {
        tracing::debug!(key = %w.key_path, line = ?w.line, "unknown config key");
    }
    Ok(LoadedConfig {
        config,
        home,
        path,
        file_exists,
        warnings,
        env,
    })
}

/// Parses JSON5 text into a [`Config`], collecting unknown keys as warnings.
/// Text that is empty or only whitespace yields the defaults, so a freshly
/// `touch`ed file is not a syntax error.
pub fn parse_config(text: &str, path: &Path) -> Result<(Config, Vec<ConfigWarning>), ConfigError> {
    if text.trim().is_empty() {
        return Ok((Config::default(), Vec::new()));
    }
    let mut value: Value = json5::from_str(text).map_err(|e| syntax_error(&e, path))?;
    if !value.is_object() {
        return Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            field: "(root)".into(),
            message: "the configuration must be an object (`{ ... }`)".into(),
        });
    }
    reject_inline_secrets(&value, path)?;
    infer_provider_types(&mut value);

    let mut ignored: Vec<Vec<Seg>> = Vec::new();
    let mut on_ignored = |p: serde_ignored::Path<'_>| ignored.push(segments(&p));
    let de = serde_ignored::Deserializer::new(value, &mut on_ignored);
    let config: Config = serde_path_to_error::deserialize(de).map_err(|e| {
        let field = e.path().to_string();
        ConfigError::Invalid {
            path: path.to_path_buf(),
            field: if field == "." { "(root)".into() } else { field },
            message: e.into_inner().to_string(),
        }
    })?;

    let lines = if ignored.is_empty() {
        Default::default()
    } else {
        key_lines(text)
    };
    let warnings = ignored
        .iter()
        .map(|segs| {
            let key_path = render_path(segs);
            ConfigWarning {
                line: lines.get(&key_path).copied(),
                message: format!("unknown config key `{key_path}`"),
                key_path,
            }
        })
        .collect();
    Ok((config, warnings))
}

fn syntax_error(e: &json5::Error, path: &Path) -> ConfigError {
    // json5 positions are 0-based; editors and humans count from 1.
    let (line, column) = e
        .position()
        .map(|p| (p.line + 1, p.column + 1))
        .unwrap_or((1, 1));
    // The Display impl appends " at line X column Y"; we report those
    // separately, so prefer the bare code (or strip the suffix of a custom
    // message).
    let message = match e.code() {
        Some(code) => code.to_string(),
        None => {
            let s = e.to_string();
            match s.rfind(" at line ") {
                Some(i) => s[..i].to_string(),
                None => s,
            }
        }
    };
    ConfigError::Syntax {
        path: path.to_path_buf(),
        line,
        column,
        message,
    }
}

/// Converts a serde_ignored path into our segments, dropping the `Some` /
/// newtype wrappers that carry no key.
fn segments(p: &serde_ignored::Path<'_>) -> Vec<Seg> {
    let mut out = Vec::new();
    let mut cur = p;
    loop {
        match cur {
            serde_ignored::Path::Root => break,
            serde_ignored::Path::Seq { parent, index } => {
                out.push(Seg::Index(*index));
                cur = parent;
            }
            serde_ignored::Path::Map { parent, key } => {
                out.push(Seg::Key(key.clone()));
                cur = parent;
            }
            serde_ignored::Path::Some { parent }
            | serde_ignored::Path::NewtypeStruct { parent }
            | serde_ignored::Path::NewtypeVariant { parent } => cur = parent,
        }
    }
    out.reverse();
    out
}

/// Secrets never live in config.json5 (it gets shared, pasted into issues and
/// printed by `config show`), so an inline key is an error, not a warning.
fn reject_inline_secrets(value: &Value, path: &Path) -> Result<(), ConfigError> {
    let Some(providers) = value.get("providers").and_then(Value::as_object) else {
        return Ok(());
    };
    for (name, p) in providers {
        for key in ["api_key", "apiKey"] {
            if p.get(key).is_some() {
                return Err(ConfigError::Invalid {
                    path: path.to_path_buf(),
                    field: format!("providers.{name}.{key}"),
                    message: format!(
                        "API keys are not accepted in the config file; remove it and set \
                         `api_key_env` to the name of an environment variable, or set \
                         FERROCLAW_{}_API_KEY in the environment or in .env.local",
                        env_name(name)
                    ),
                });
            }
        }
    }
    Ok(())
}

/// A provider without `type` gets one inferred from its name (a provider
/// called "anthropic" speaks the Anthropic protocol). Done on the raw value
/// because the typed default cannot see the map key.
fn infer_provider_types(value: &mut Value) {
    if let Some(providers) = value.get_mut("providers").and_then(Value::as_object_mut) {
        for (name, p) in providers.iter_mut() {
            if let Some(obj) = p.as_object_mut() {
                if !obj.contains_key("type") {
                    if let Some(wk) = well_known(name) {
                        obj.insert("type".into(), Value::String(wk.kind.as_str().into()));
                    }
                }
            }
        }
    }
}

/// `FERROCLAW_PROVIDER`, `FERROCLAW_MODEL`, `FERROCLAW_HOST`, `FERROCLAW_PORT`,
/// `FERROCLAW_LOG_LEVEL` and `FERROCLAW_LOG_FORMAT` override the file.
fn apply_env_overrides(config: &mut Config, env: &Env) -> Result<(), ConfigError> {
    if let Some(p) = env.get("FERROCLAW_PROVIDER") {
        config.agents.defaults.provider = Some(p.to_string());
    }
    if let Some(m) = env.get("FERROCLAW_MODEL") {
        config.agents.defaults.model = Some(m.to_string());
        // `FERROCLAW_MODEL=anthropic/claude-…` alone should switch provider
        // too; otherwise a provider from the file would bind the new model.
        if env.get("FERROCLAW_PROVIDER").is_none() {
            if let Some((prefix, _)) = m.split_once('/') {
                if known_provider_names(config, env).contains(prefix) {
                    config.agents.defaults.provider = Some(prefix.to_string());
                }
            }
        }
    }
    if let Some(h) = env.get("FERROCLAW_HOST") {
        config.gateway.host = h.to_string();
    }
    if let Some(p) = env.get("FERROCLAW_PORT") {
        config.gateway.port = p.trim().parse().map_err(|_| ConfigError::Env {
            var: "FERROCLAW_PORT".into(),
            message: format!("expected a port number (0-65535), got `{p}`"),
        })?;
    }
    if let Some(l) = env.get("FERROCLAW_LOG_LEVEL") {
        config.logging.level = l.to_string();
    }
    if let Some(f) = env.get("FERROCLAW_LOG_FORMAT") {
        config.logging.format = match f.trim().to_ascii_lowercase().as_str() {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            _ => {
                return Err(ConfigError::Env {
                    var: "FERROCLAW_LOG_FORMAT".into(),
                    message: format!("expected `text` or `json`, got `{f}`"),
                })
            }
        };
    }
    Ok(())
}

/// Agent ids name directories and appear in URLs, so keep them tame.
pub(crate) fn valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Semantic checks that serde cannot express.
fn validate(config: &Config, env: &Env, path: &Path) -> Result<(), ConfigError> {
    let invalid = |field: String, message: String| ConfigError::Invalid {
        path: path.to_path_buf(),
        field,
        message,
    };

    for (i, u) in config.gateway.users.iter().enumerate() {
        let field = |f: &str| format!("gateway.users[{i}].{f}");
        if u.id.trim().is_empty() || u.id.len() > 255 || u.id.chars().any(char::is_control) {
            return Err(invalid(
                field("id"),
                "expected a non-empty user id of at most 255 characters".into(),
            ));
        }
        if u.token_env.trim().is_empty() {
            return Err(invalid(
                field("token_env"),
                "name the environment variable that holds this user's token".into(),
            ));
        }
        if config.gateway.users[..i].iter().any(|o| o.id == u.id) {
            return Err(invalid(
                field("id"),
                format!("user {:?} is listed twice", u.id),
            ));
        }
    }

    for (name, server) in &config.mcp.servers {
        if !valid_id(name) {
            return Err(invalid(
                format!("mcp.servers.{name}"),
                "server names must be 1-64 characters of letters, digits, `_` or `-`".into(),
            ));
        }
        if let Err((field, message)) = server.check() {
            return Err(invalid(format!("mcp.servers.{name}.{field}"), message));
        }
    }

    if let Some(tg) = &config.channels.telegram {
        if let Err((field, message)) = tg.check() {
            return Err(invalid(format!("channels.telegram.{field}"), message));
        }
    }
    if let Some(dc) = &config.channels.discord {
        if let Err((field, message)) = dc.check() {
            return Err(invalid(format!("channels.discord.{field}"), message));
        }
    }
    if let Some(sl) = &config.channels.slack {
        if let Err((field, message)) = sl.check() {
            return Err(invalid(format!("channels.slack.{field}"), message));
        }
    }
    if let Some(wa) = &config.channels.whatsapp {
        if let Err((field, message)) = wa.check() {
            return Err(invalid(format!("channels.whatsapp.{field}"), message));
        }
    }
    if let Some(za) = &config.channels.zalo {
        if let Err((field, message)) = za.check() {
            return Err(invalid(format!("channels.zalo.{field}"), message));
        }
    }
    if let Some(fs) = &config.channels.feishu {
        if let Err((field, message)) = fs.check() {
            return Err(invalid(format!("channels.feishu.{field}"), message));
        }
    }

    if let Some(o) = &config.tracing.otlp {
        if let Err((field, message)) = o.check() {
            return Err(invalid(format!("tracing.otlp.{field}"), message));
        }
    }
    if config.tracing.queue == 0 {
        return Err(invalid("tracing.queue".into(), "must be at least 1".into()));
    }

    let threshold = config.agents.defaults.compaction.threshold;
    if !(threshold > 0.0 && threshold <= 1.0) {
        return Err(invalid(
            "agents.defaults.compaction.threshold".into(),
            format!("expected a share of the context window in (0, 1], got {threshold}"),
        ));
    }

    if let Err(message) = config.tools.exec.check_env() {
        return Err(invalid("tools.exec.env".into(), message));
    }

    for (name, p) in &config.providers {
        let field = |f: &str| format!("providers.{name}.{f}");
        let known = |list: &[&str], v: &str| list.contains(&v);
        for (list, values, what) in [
            (
                &crate::schema::INTENT_STRATEGIES[..],
                &p.intent.order,
                "intent.order",
            ),
            (
                &crate::schema::INTENT_SOURCES[..],
                &p.intent.sources,
                "intent.sources",
            ),
        ] {
            if values.is_empty() {
                return Err(invalid(field(what), "expected at least one entry".into()));
            }
            if let Some(bad) = values.iter().find(|v| !known(list, v)) {
                return Err(invalid(
                    field(what),
                    format!("unknown `{bad}`; expected one of: {}", list.join(", ")),
                ));
            }
        }
        if !known(&crate::schema::INTENT_STRATEGIES, &p.intent.prompt) {
            return Err(invalid(
                field("intent.prompt"),
                format!(
                    "unknown `{}`; expected one of: {}",
                    p.intent.prompt,
                    crate::schema::INTENT_STRATEGIES.join(", ")
                ),
            ));
        }
        if !valid_id(name) {
            return Err(invalid(
                format!("providers.{name}"),
                "provider names must be 1-64 characters of letters, digits, `_` or `-`".into(),
            ));
        }
        let env_base = env.get(&format!("FERROCLAW_{}_BASE_URL", env_name(name)));
        match (&p.base_url, env_base) {
            (Some(url), _) if !is_http_url(url) => {
                return Err(invalid(
                    field("base_url"),
                    format!("expected an http:// or https:// URL, got `{url}`"),
                ))
            }
            (None, None) if well_known(name).is_none() => {
                return Err(invalid(
                    field("base_url"),
                    format!(
                        "provider `{name}` needs a base_url (or FERROCLAW_{}_BASE_URL)",
                        env_name(name)
                    ),
                ))
            }
            _ => {}
        }
        if let Some(flavor) = &p.schema_flavor {
            if !matches!(flavor.as_str(), "openai" | "gemini") {
                return Err(invalid(
                    field("schema_flavor"),
                    format!("expected `openai` or `gemini`, got `{flavor}`"),
                ));
            }
        }
        for (key, value) in [
            ("timeout_seconds", p.timeout_seconds),
            ("stream_idle_timeout_seconds", p.stream_idle_timeout_seconds),
        ] {
            if value == 0 {
                return Err(invalid(field(key), "must be at least 1".into()));
            }
        }
        if let Some(var) = &p.api_key_env {
            if var.is_empty() || var.contains(char::is_whitespace) || var.contains('=') {
                return Err(invalid(
                    field("api_key_env"),
                    format!("expected an environment variable name, got `{var}`"),
                ));
            }
        }
        for (i, m) in p.models.iter().enumerate() {
            if m.id.trim().is_empty() {
                return Err(invalid(
                    format!("providers.{name}.models[{i}].id"),
                    "required".into(),
                ));
            }
        }
    }

    let known: BTreeSet<String> = known_provider_names(config, env);
    let check_provider = |field: String, name: &str| -> Result<(), ConfigError> {
        // Only enforce when the user configured providers explicitly; without
        // any, resolution reports a friendlier "no provider configured".
        if !config.providers.is_empty() && !known.contains(name) {
            return Err(invalid(
                field,
                format!(
                    "unknown provider `{name}` (configured: {})",
                    known.iter().cloned().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        Ok(())
    };
    let check_fallbacks = |field: &str, list: &[String]| -> Result<(), ConfigError> {
        for (i, f) in list.iter().enumerate() {
            let (prefix, model) = match f.split_once('/') {
                Some((p, m)) if known.contains(p) => (Some(p), m),
                _ => (None, f.as_str()),
            };
            if model.trim().is_empty() {
                return Err(invalid(
                    format!("{field}[{i}]"),
                    "expected \"provider/model\" or \"model\"".into(),
                ));
            }
            if let Some(p) = prefix {
                check_provider(format!("{field}[{i}]"), p)?;
            }
        }
        Ok(())
    };

    let d = &config.agents.defaults;
    if let Some(p) = &d.provider {
        check_provider("agents.defaults.provider".into(), p)?;
    }
    check_fallbacks("agents.defaults.fallbacks", &d.fallbacks)?;
    if d.max_iterations == 0 {
        return Err(invalid(
            "agents.defaults.max_iterations".into(),
            "must be at least 1".into(),
        ));
    }
    if d.timeout_seconds == 0 {
        return Err(invalid(
            "agents.defaults.timeout_seconds".into(),
            "must be at least 1".into(),
        ));
    }
    let budgets = std::iter::once((
        "agents.defaults.thinking_budget_tokens".to_string(),
        d.thinking_budget_tokens,
    ))
    .chain(config.agents.list.iter().enumerate().map(|(i, a)| {
        (
            format!("agents.list[{i}].thinking_budget_tokens"),
            a.thinking_budget_tokens,
        )
    }));
    for (field, budget) in budgets {
        if budget.is_some_and(|b| b < 1024) {
            return Err(invalid(
                field,
                "Anthropic's extended thinking needs a budget of at least 1024 tokens".into(),
            ));
        }
    }
    if d.context_window == 0 {
        return Err(invalid(
            "agents.defaults.context_window".into(),
            "must be at least 1".into(),
        ));
    }
    let l = &d.limits;
    for (key, value) in [
        ("max_reply_bytes", l.max_reply_bytes),
        ("max_tool_calls_per_turn", l.max_tool_calls_per_turn),
        ("max_concurrent_tools", l.max_concurrent_tools),
        ("max_concurrent_tools_total", l.max_concurrent_tools_total),
        ("tool_result_max_chars", l.tool_result_max_chars),
        ("default_max_tokens", l.default_max_tokens as usize),
    ] {
        if value == 0 {
            return Err(invalid(
                format!("agents.defaults.limits.{key}"),
                "must be at least 1".into(),
            ));
        }
    }
    for (key, value) in [
        ("subagents.max_depth", d.subagents.max_depth as usize),
        ("subagents.max_children", d.subagents.max_children),
        (
            "context_files.file_max_chars",
            d.context_files.file_max_chars,
        ),
        (
            "context_files.total_max_chars",
            d.context_files.total_max_chars,
        ),
    ] {
        if value == 0 {
            return Err(invalid(
                format!("agents.defaults.{key}"),
                "must be at least 1".into(),
            ));
        }
    }
    if let Some(t) = d.temperature {
        if !(0.0..=2.0).contains(&t) {
            return Err(invalid(
                "agents.defaults.temperature".into(),
                format!("expected a number between 0 and 2, got {t}"),
            ));
        }
    }

    let mut seen = BTreeSet::new();
    let mut default_agent: Option<&str> = None;
    for (i, a) in config.agents.list.iter().enumerate() {
        let field = |f: &str| format!("agents.list[{i}].{f}");
        if a.id.is_empty() {
            return Err(invalid(field("id"), "required".into()));
        }
        if !valid_id(&a.id) {
            return Err(invalid(
                field("id"),
                format!(
                    "`{}` is not a valid id: use 1-64 letters, digits, `_` or `-`",
                    a.id
                ),
            ));
        }
        if !seen.insert(a.id.as_str()) {
            return Err(invalid(
                field("id"),
                format!("duplicate agent id `{}`", a.id),
            ));
        }
        if a.default {
            if let Some(other) = default_agent {
                return Err(invalid(
                    field("default"),
                    format!("agent `{other}` is already marked default"),
                ));
            }
            default_agent = Some(&a.id);
        }
        if let Some(p) = &a.provider {
            check_provider(field("provider"), p)?;
        }
        if let Some(f) = &a.fallbacks {
            check_fallbacks(&field("fallbacks"), f)?;
        }
        if a.max_iterations == Some(0) {
            return Err(invalid(
                field("max_iterations"),
                "must be at least 1".into(),
            ));
        }
        if a.timeout_seconds == Some(0) {
            return Err(invalid(
                field("timeout_seconds"),
                "must be at least 1".into(),
            ));
        }
        if a.context_window == Some(0) {
            return Err(invalid(
                field("context_window"),
                "must be at least 1".into(),
            ));
        }
    }
    if config.session.history_turns == 0 {
        return Err(invalid(
            "session.history_turns".into(),
            "must be at least 1".into(),
        ));
    }
    Ok(())
}

fn is_http_url(url: &str) -> bool {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    matches!(rest, Some(r) if !r.is_empty())
}
