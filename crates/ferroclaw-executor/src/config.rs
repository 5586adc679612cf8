//! `executor.yaml`: five sections (`executor`, `parser`, `http_server`, `logging`,
//! `tools`), every top-level key of a section overridable from the environment as
//! `GPTOSS_EXECUTOR_<SECTION>_<KEY>` (e.g. `GPTOSS_EXECUTOR_EXECUTOR_MAX_ITERATIONS`,
//! `GPTOSS_EXECUTOR_HTTP_SERVER_PORT`). Keys of the `executor` section may also drop
//! the section (`GPTOSS_EXECUTOR_GPT_OSS_URL`), and a few short aliases are kept
//! (`GPTOSS_EXECUTOR_GATEWAY_URL`, `_GATEWAY_TOKEN`, `_PORT`, `_BIND`, `_LOG_LEVEL`).
//! `${NAME}` in the file is replaced by the environment variable `NAME`.
//!
//! Unknown keys are reported as warnings rather than errors, so a file written for a
//! newer version still starts; values that cannot work are errors ([`Config::validate`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ferroclaw_intent::{Precedence, Source, Strategy};
use serde::{Deserialize, Serialize};
use serde_yaml_ng::{Mapping, Value};

/// Prefix of the environment overrides.
pub const ENV_PREFIX: &str = "GPTOSS_EXECUTOR_";

const SECTIONS: [&str; 5] = ["executor", "parser", "http_server", "logging", "tools"];

/// Short names the seed documents, mapped to `(section, key)`.
const ENV_ALIASES: [(&str, &str, &str); 5] = [
    ("gateway_url", "executor", "openclaw_gateway_url"),
    ("gateway_token", "executor", "openclaw_gateway_token"),
    ("port", "http_server", "port"),
    ("bind", "http_server", "bind"),
    ("log_level", "logging", "level"),
];

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid YAML in {origin}: {message}")]
    Yaml { origin: String, message: String },
    #[error("invalid value for environment variable {var}: {message}")]
    Env { var: String, message: String },
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    pub executor: ExecutorSection,
    pub parser: ParserSection,
    pub http_server: HttpServerSection,
    pub logging: LoggingSection,
    pub tools: ToolsSection,
    /// Directory relative paths in the file are resolved against (the file's own).
    #[serde(skip)]
    pub base_dir: PathBuf,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ExecutorSection {
    /// Base URL of the reasoning model's OpenAI-compatible server; `/v1` is appended
    /// when missing.
    pub gpt_oss_url: String,
    /// Model name sent upstream.
    pub gpt_oss_model: String,
    /// Sent as a bearer token upstream when not empty (local servers need none).
    pub gpt_oss_api_key: String,
    pub gpt_oss_temperature: f32,
    /// Per-call completion limit; a request's `max_tokens` can only lower it.
    pub gpt_oss_max_tokens: u32,
    pub gpt_oss_call_timeout_seconds: f64,
    /// Model names clients may ask for; anything else is `model_not_found`.
    pub served_models: Vec<String>,
    pub max_iterations: u32,
    /// Retries of a transient fault (the first attempt not counted).
    pub max_retries: u32,
    /// Back-off before retry 1, 2, 3, …; the last value repeats.
    pub retry_backoff_ms: Vec<u64>,
    pub run_timeout_seconds: f64,
    pub context_window_limit: u64,
    pub context_buffer_tokens: u64,
    /// Older tool results are dropped from the context at this share of the budget.
    pub context_compact_threshold: f64,
    /// Older tool results are shortened at this share of the budget.
    pub context_trunc_threshold: f64,
    #[serde(alias = "gateway_url")]
    pub openclaw_gateway_url: String,
    /// Empty: `OPENCLAW_GATEWAY_TOKEN`, else `FERROCLAW_GATEWAY_TOKEN`, else none.
    #[serde(alias = "gateway_token")]
    pub openclaw_gateway_token: String,
    pub session_key: String,
}

impl Default for ExecutorSection {
    fn default() -> Self {
        Self {
            gpt_oss_url: "http://127.0.0.1:8000".into(),
            gpt_oss_model: "gpt-oss".into(),
            gpt_oss_api_key: String::new(),
            gpt_oss_temperature: 0.25,
            gpt_oss_max_tokens: 1000,
            gpt_oss_call_timeout_seconds: 60.0,
            served_models: vec!["gpt-oss".into(), "executor".into()],
            max_iterations: 5,
            max_retries: 3,
            retry_backoff_ms: vec![1000, 2000, 4000],
            run_timeout_seconds: 300.0,
            context_window_limit: 32768,
            context_buffer_tokens: 2000,
            context_compact_threshold: 0.8,
            context_trunc_threshold: 0.6,
            openclaw_gateway_url: "http://127.0.0.1:18789".into(),
            openclaw_gateway_token: String::new(),
            session_key: "main".into(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ParserSection {
    /// Primary strategy: `react`, `guided_json`, `markers`, `fuzzy` or `harmony`.
    pub strategy: String,
    /// Tried when the primary finds nothing.
    pub fallback_strategy: String,
    pub source_field: String,
    pub fallback_field: String,
    /// Replaces the built-in tool prompt; `{{tools}}` and `{{tool_names}}` are filled in.
    pub system_prompt_path: String,
    /// JSON schema sent as `guided_json` with the `guided_json` strategy; empty: built
    /// from the offered tools.
    pub guided_json_schema_path: String,
    /// Directory of `<strategy>.md` prompt overrides.
    pub prompt_dir: String,
    pub min_confidence: f32,
    /// `strategy_first` (a structured call anywhere beats a fuzzy guess) or `source_first`.
    pub precedence: String,
    /// Also offer the tools as native OpenAI `tools` (vLLM `--enable-auto-tool-choice`).
    pub native_tools: bool,
}

impl Default for ParserSection {
    fn default() -> Self {
        Self {
            strategy: "react".into(),
            fallback_strategy: "fuzzy".into(),
            source_field: "reasoning".into(),
            fallback_field: "content".into(),
            system_prompt_path: String::new(),
            guided_json_schema_path: String::new(),
            prompt_dir: String::new(),
            min_confidence: 0.5,
            precedence: "strategy_first".into(),
            native_tools: false,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct HttpServerSection {
    pub port: u16,
    pub bind: String,
    /// When set, clients must send `Authorization: Bearer <api_key>`; required to bind a
    /// non-loopback address (whoever reaches the executor can run gateway tools).
    pub api_key: String,
    pub read_timeout_seconds: f64,
    pub write_timeout_seconds: f64,
    pub idle_timeout_seconds: f64,
    pub shutdown_timeout_seconds: f64,
}

impl Default for HttpServerSection {
    fn default() -> Self {
        Self {
            port: 8001,
            bind: "127.0.0.1".into(),
            api_key: String::new(),
            read_timeout_seconds: 30.0,
            write_timeout_seconds: 600.0,
            idle_timeout_seconds: 120.0,
            shutdown_timeout_seconds: 5.0,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct LoggingSection {
    pub level: String,
    pub format: String,
    /// `stdout`, `stderr` or a file path (appended).
    pub output: String,
    pub error_log_dir: String,
    /// `YYYY-MM-DD` is replaced by the UTC date.
    pub error_log_filename: String,
}

impl Default for LoggingSection {
    fn default() -> Self {
        Self {
            level: "info".into(),
            format: "json".into(),
            output: "stdout".into(),
            error_log_dir: "logs".into(),
            error_log_filename: "YYYY-MM-DD-errors.md".into(),
        }
    }
}

/// A tool the model may use: a bare name (its schema is asked from the gateway with
/// `dryRun`) or a full definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolEntry {
    Name(String),
    Spec {
        name: String,
        #[serde(default)]
        description: String,
        #[serde(default)]
        parameters: serde_json::Value,
        #[serde(default)]
        aliases: Vec<String>,
    },
}

impl ToolEntry {
    pub fn name(&self) -> &str {
        match self {
            ToolEntry::Name(n) => n,
            ToolEntry::Spec { name, .. } => name,
        }
    }
}

/// Per-tool settings (`tools.<name>: {…}`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolSettings {
    pub timeout_seconds: Option<f64>,
    pub max_results: Option<u64>,
    pub max_chars: Option<u64>,
    pub extract_mode: Option<String>,
    /// `exec` only: when not empty, the command's first word must be one of these.
    pub allowed_commands: Vec<String>,
    /// `exec` only: a command containing one of these is refused.
    pub blocked_commands: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolsSection {
    #[serde(alias = "enabled")]
    pub allowed: Vec<ToolEntry>,
    pub default_timeout_seconds: f64,
    /// Limit for tools missing from `result_limits`.
    pub default_result_limit: usize,
    pub result_limits: BTreeMap<String, usize>,
    #[serde(flatten)]
    pub per_tool: BTreeMap<String, ToolSettings>,
}

impl Default for ToolsSection {
    fn default() -> Self {
        let names = [
            "web_search",
            "web_fetch",
            "read",
            "write",
            "exec",
            "browser",
        ];
        let limits = [
            ("web_search", 1000),
            ("web_fetch", 3000),
            ("read", 5000),
            ("write", 200),
            ("exec", 2000),
            ("browser", 3000),
        ];
        let mut per_tool = BTreeMap::new();
        per_tool.insert(
            "exec".to_string(),
            ToolSettings {
                timeout_seconds: Some(60.0),
                blocked_commands: vec!["rm -rf /".into(), "shutdown".into(), "reboot".into()],
                ..ToolSettings::default()
            },
        );
        Self {
            allowed: names
                .iter()
                .map(|n| ToolEntry::Name(n.to_string()))
                .collect(),
            default_timeout_seconds: 30.0,
            default_result_limit: 4000,
            result_limits: limits.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            per_tool,
        }
    }
}

/// A loaded configuration and what was odd about it.
#[derive(Debug)]
pub struct Loaded {
    pub config: Config,
    pub warnings: Vec<String>,
}

impl Config {
    /// Reads `path` (defaults only when `None`), applies the environment, validates.
    pub fn load(path: Option<&Path>) -> Result<Loaded, ConfigError> {
        let env: Vec<(String, String)> = std::env::vars().collect();
        let (text, origin, base_dir) = match path {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|source| ConfigError::Read {
                    path: p.to_path_buf(),
                    source,
                })?;
                let base = p
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|| PathBuf::from("."));
                (text, p.display().to_string(), base)
            }
            None => (String::new(), "defaults".to_string(), PathBuf::from(".")),
        };
        let mut loaded = Self::from_yaml_with_env(&text, &origin, &env)?;
        loaded.config.base_dir = base_dir;
        Ok(loaded)
    }

    /// Parses YAML text with the given environment (tests pass their own).
    pub fn from_yaml_with_env(
        text: &str,
        origin: &str,
        env: &[(String, String)],
    ) -> Result<Loaded, ConfigError> {
        let mut warnings = Vec::new();
        let expanded = expand_env(text, env, &mut warnings);
        let mut root: Value = if expanded.trim().is_empty() {
            Value::Mapping(Mapping::new())
        } else {
            serde_yaml_ng::from_str(&expanded).map_err(|e| ConfigError::Yaml {
                origin: origin.to_string(),
                message: e.to_string(),
            })?
        };
        if root.is_null() {
            root = Value::Mapping(Mapping::new());
        }
        if !root.is_mapping() {
            return Err(ConfigError::Yaml {
                origin: origin.to_string(),
                message: "the top level must be a mapping of sections".into(),
            });
        }
        apply_env(&mut root, env, &mut warnings)?;

        let mut unknown = Vec::new();
        let config: Config = serde_ignored::deserialize(root, |path| {
            unknown.push(path.to_string());
        })
        .map_err(|e| ConfigError::Yaml {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
        for key in unknown {
            warnings.push(format!("unknown key `{key}` ignored"));
        }
        for name in config.tools.per_tool.keys() {
            if !config.tools.allowed.iter().any(|t| t.name() == name) {
                warnings.push(format!(
                    "`tools.{name}` configures a tool that is not in `tools.allowed`"
                ));
            }
        }
        warnings.extend(config.validate()?);
        Ok(Loaded { config, warnings })
    }

    /// Rejects values that cannot work; returns warnings for dubious ones.
    pub fn validate(&self) -> Result<Vec<String>, ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        let e = &self.executor;
        let mut warnings = Vec::new();
        if !(e.gpt_oss_url.starts_with("http://") || e.gpt_oss_url.starts_with("https://")) {
            return bad(format!(
                "executor.gpt_oss_url must be an http(s) URL, got `{}`",
                e.gpt_oss_url
            ));
        }
        if !(e.openclaw_gateway_url.starts_with("http://")
            || e.openclaw_gateway_url.starts_with("https://"))
        {
            return bad(format!(
                "executor.openclaw_gateway_url must be an http(s) URL, got `{}`",
                e.openclaw_gateway_url
            ));
        }
        if e.gpt_oss_model.trim().is_empty() {
            return bad("executor.gpt_oss_model must not be empty".into());
        }
        if e.served_models.iter().all(|m| m.trim().is_empty()) {
            return bad("executor.served_models must name at least one model".into());
        }
        if !(0.0..=2.0).contains(&e.gpt_oss_temperature) {
            return bad("executor.gpt_oss_temperature must be within 0..2".into());
        }
        if e.gpt_oss_max_tokens == 0 {
            return bad("executor.gpt_oss_max_tokens must be positive".into());
        }
        if e.max_iterations == 0 || e.max_iterations > 100 {
            return bad("executor.max_iterations must be within 1..100".into());
        }
        if e.max_retries > 10 {
            return bad("executor.max_retries must be at most 10".into());
        }
        if e.retry_backoff_ms.is_empty() {
            return bad("executor.retry_backoff_ms must list at least one delay".into());
        }
        for (name, secs) in [
            ("executor.run_timeout_seconds", e.run_timeout_seconds),
            (
                "executor.gpt_oss_call_timeout_seconds",
                e.gpt_oss_call_timeout_seconds,
            ),
            (
                "tools.default_timeout_seconds",
                self.tools.default_timeout_seconds,
            ),
            (
                "http_server.shutdown_timeout_seconds",
                self.http_server.shutdown_timeout_seconds,
            ),
        ] {
            if !(secs.is_finite() && secs > 0.0 && secs <= 86_400.0) {
                return bad(format!("{name} must be a positive number of seconds"));
            }
        }
        if e.context_buffer_tokens >= e.context_window_limit {
            return bad(
                "executor.context_buffer_tokens must be smaller than context_window_limit".into(),
            );
        }
        let (t, c) = (e.context_trunc_threshold, e.context_compact_threshold);
        if !(t > 0.0 && t <= 1.0 && c > 0.0 && c <= 1.0) {
            return bad("executor.context_*_threshold must be within (0, 1]".into());
        }
        if t > c {
            warnings.push(
                "executor.context_trunc_threshold is above context_compact_threshold: \
                 results will be dropped before they are shortened"
                    .into(),
            );
        }
        if e.session_key.trim().is_empty() {
            return bad("executor.session_key must not be empty".into());
        }
        self.strategies()?;
        self.sources()?;
        self.precedence()?;
        if !(0.0..=1.0).contains(&self.parser.min_confidence) {
            return bad("parser.min_confidence must be within 0..1".into());
        }
        if !["debug", "info", "warn", "error"].contains(&self.logging.level.as_str()) {
            return bad(format!(
                "logging.level must be debug, info, warn or error, got `{}`",
                self.logging.level
            ));
        }
        if !["json", "text"].contains(&self.logging.format.as_str()) {
            return bad("logging.format must be json or text".into());
        }
        if self.logging.error_log_filename.contains('/') {
            return bad("logging.error_log_filename must be a file name, not a path".into());
        }
        if self.http_server.write_timeout_seconds < e.run_timeout_seconds {
            warnings.push(
                "http_server.write_timeout_seconds is below executor.run_timeout_seconds: \
                 clients may give up before a long run ends"
                    .into(),
            );
        }
        if self.tools.allowed.is_empty() {
            warnings.push("tools.allowed is empty: the model can use no tools".into());
        }
        Ok(warnings)
    }

    /// Parser strategy order: Harmony first (leaked gpt-oss markup is unambiguous), then
    /// the configured strategy and its fallback.
    pub fn strategies(&self) -> Result<Vec<Strategy>, ConfigError> {
        let parse = |key: &str, v: &str| {
            v.parse::<Strategy>()
                .map_err(|e| ConfigError::Invalid(format!("parser.{key}: {e}")))
        };
        let primary = parse("strategy", &self.parser.strategy)?;
        // Leaked Harmony and other families' own call markup are read whatever the
        // configured format.
        let mut order = vec![Strategy::Harmony, Strategy::NativeText, primary];
        if !self.parser.fallback_strategy.trim().is_empty() {
            order.push(parse("fallback_strategy", &self.parser.fallback_strategy)?);
        }
        let mut seen = Vec::new();
        order.retain(|s| {
            let fresh = !seen.contains(s);
            seen.push(*s);
            fresh
        });
        Ok(order)
    }

    pub fn primary_strategy(&self) -> Strategy {
        self.parser.strategy.parse().unwrap_or(Strategy::React)
    }

    pub fn sources(&self) -> Result<Vec<Source>, ConfigError> {
        let mut out = Vec::new();
        for (key, v) in [
            ("source_field", &self.parser.source_field),
            ("fallback_field", &self.parser.fallback_field),
        ] {
            if v.trim().is_empty() {
                continue;
            }
            let s = v
                .parse::<Source>()
                .map_err(|e| ConfigError::Invalid(format!("parser.{key}: {e}")))?;
            if !out.contains(&s) {
                out.push(s);
            }
        }
        if out.is_empty() {
            return Err(ConfigError::Invalid(
                "parser.source_field must be reasoning or content".into(),
            ));
        }
        Ok(out)
    }

    pub fn precedence(&self) -> Result<Precedence, ConfigError> {
        match self.parser.precedence.trim() {
            "" | "strategy_first" => Ok(Precedence::StrategyFirst),
            "source_first" => Ok(Precedence::SourceFirst),
            other => Err(ConfigError::Invalid(format!(
                "parser.precedence must be strategy_first or source_first, got `{other}`"
            ))),
        }
    }

    /// A path from the file, resolved against the file's directory; `None` when empty.
    pub fn resolve_path(&self, p: &str) -> Option<PathBuf> {
        if p.trim().is_empty() {
            return None;
        }
        let p = Path::new(p);
        Some(if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base_dir.join(p)
        })
    }

    /// The upstream base URL up to and including `/v1`.
    pub fn upstream_base(&self) -> String {
        let base = self.executor.gpt_oss_url.trim_end_matches('/');
        if base.ends_with("/v1") {
            base.to_string()
        } else {
            format!("{base}/v1")
        }
    }

    pub fn gateway_token(&self) -> Option<String> {
        let t = self.executor.openclaw_gateway_token.trim();
        if !t.is_empty() {
            return Some(t.to_string());
        }
        ["OPENCLAW_GATEWAY_TOKEN", "FERROCLAW_GATEWAY_TOKEN"]
            .iter()
            .filter_map(|v| std::env::var(v).ok())
            .map(|v| v.trim().to_string())
            .find(|v| !v.is_empty())
    }

    pub fn run_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.executor.run_timeout_seconds)
    }

    pub fn tool_timeout(&self, tool: &str) -> Duration {
        let secs = self
            .tools
            .per_tool
            .get(tool)
            .and_then(|s| s.timeout_seconds)
            .filter(|s| s.is_finite() && *s > 0.0)
            .unwrap_or(self.tools.default_timeout_seconds);
        Duration::from_secs_f64(secs)
    }

    pub fn result_limit(&self, tool: &str) -> usize {
        self.tools
            .result_limits
            .get(tool)
            .copied()
            .unwrap_or(self.tools.default_result_limit)
    }

    /// Retries of the model and of the gateway: `max_retries` after the first attempt,
    /// waiting exactly `retry_backoff_ms` (the last delay repeats).
    pub fn retry_policy(&self) -> ferroclaw_providers::RetryPolicy {
        ferroclaw_providers::RetryPolicy {
            attempts: self.executor.max_retries + 1,
            schedule: self
                .executor
                .retry_backoff_ms
                .iter()
                .map(|ms| Duration::from_millis(*ms))
                .collect(),
            ..ferroclaw_providers::RetryPolicy::default()
        }
    }

    /// The tokens a run may use: the window minus the reserved buffer.
    pub fn available_tokens(&self) -> u64 {
        self.executor
            .context_window_limit
            .saturating_sub(self.executor.context_buffer_tokens)
            .max(1)
    }
}

/// Replaces `${NAME}` with the variable's value (empty, with a warning, when unset).
fn expand_env(text: &str, env: &[(String, String)], warnings: &mut Vec<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let name = &after[..end];
        let valid = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if valid {
            match env.iter().find(|(k, _)| k == name) {
                Some((_, v)) => out.push_str(v),
                None => warnings.push(format!("${{{name}}} is not set; using an empty value")),
            }
        } else {
            out.push_str(&rest[start..start + 2 + end + 1]);
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// Applies `GPTOSS_EXECUTOR_*` variables onto the parsed YAML tree.
fn apply_env(
    root: &mut Value,
    env: &[(String, String)],
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    // The defaults, serialised, tell which keys exist and what shape each value has.
    let defaults = serde_yaml_ng::to_value(Config::default()).map_err(|e| ConfigError::Yaml {
        origin: "defaults".into(),
        message: e.to_string(),
    })?;
    let known = |section: &str, key: &str| -> Option<Value> {
        defaults.get(section).and_then(|s| s.get(key)).cloned()
    };
    let mut vars: Vec<&(String, String)> = env
        .iter()
        .filter(|(k, _)| k.starts_with(ENV_PREFIX))
        .collect();
    vars.sort();
    for (var, raw) in vars {
        let rest = var[ENV_PREFIX.len()..].to_ascii_lowercase();
        let mut target: Option<(&str, String)> = None;
        for section in SECTIONS {
            if let Some(key) = rest.strip_prefix(section).and_then(|k| k.strip_prefix('_')) {
                if known(section, key).is_some() {
                    target = Some((section, key.to_string()));
                    break;
                }
            }
        }
        if target.is_none() {
            if let Some((_, s, k)) = ENV_ALIASES.iter().find(|(a, _, _)| *a == rest) {
                target = Some((s, k.to_string()));
            } else if known("executor", &rest).is_some() {
                target = Some(("executor", rest.clone()));
            }
        }
        let Some((section, key)) = target else {
            warnings.push(format!(
                "environment variable {var} matches no setting; ignored"
            ));
            continue;
        };
        let default = known(section, &key).unwrap_or(Value::Null);
        let value = env_value(raw, &default).map_err(|message| ConfigError::Env {
            var: var.clone(),
            message,
        })?;
        let Some(map) = root.as_mapping_mut() else {
            continue;
        };
        let sec = map
            .entry(Value::String(section.to_string()))
            .or_insert_with(|| Value::Mapping(Mapping::new()));
        if !sec.is_mapping() {
            *sec = Value::Mapping(Mapping::new());
        }
        if let Some(m) = sec.as_mapping_mut() {
            m.insert(Value::String(key), value);
        }
    }
    Ok(())
}

/// Types an environment string after the setting's default: strings stay strings
/// (a token of digits is still a token), lists take YAML or comma-separated items.
fn env_value(raw: &str, default: &Value) -> Result<Value, String> {
    match default {
        Value::String(_) => Ok(Value::String(raw.to_string())),
        Value::Sequence(_) => {
            let t = raw.trim();
            if t.starts_with('[') {
                serde_yaml_ng::from_str(t).map_err(|e| e.to_string())
            } else {
                let items = t
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|s| serde_yaml_ng::from_str::<Value>(s).unwrap_or(Value::String(s.into())))
                    .collect();
                Ok(Value::Sequence(items))
            }
        }
        _ => serde_yaml_ng::from_str(raw.trim()).map_err(|e| e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_match_the_seed() {
        let l = Config::from_yaml_with_env("", "t", &[]).unwrap();
        let c = l.config;
        assert_eq!(c.executor.max_iterations, 5);
        assert_eq!(c.executor.run_timeout_seconds, 300.0);
        assert_eq!(c.executor.retry_backoff_ms, vec![1000, 2000, 4000]);
        assert_eq!(c.http_server.port, 8001);
        assert_eq!(c.http_server.bind, "127.0.0.1");
        assert_eq!(c.available_tokens(), 32768 - 2000);
        assert_eq!(c.result_limit("web_fetch"), 3000);
        assert_eq!(c.result_limit("ls"), 4000);
        assert_eq!(c.upstream_base(), "http://127.0.0.1:8000/v1");
        assert_eq!(
            c.strategies().unwrap(),
            vec![
                Strategy::Harmony,
                Strategy::NativeText,
                Strategy::React,
                Strategy::Fuzzy
            ]
        );
        assert!(l.warnings.is_empty(), "{:?}", l.warnings);
    }

    #[test]
    fn yaml_env_overrides_and_unknown_keys() {
        let yaml = r#"
executor:
  gpt_oss_url: "http://spark:8000/v1"
  max_iterations: 3
  openclaw_gateway_token: "${MY_TOKEN}"
  mystery: 1
parser:
  strategy: markers
http_server:
  port: 9000
tools:
  allowed:
    - read
    - name: shout
      description: Shout a word.
      parameters: {type: object, properties: {word: {type: string}}}
  result_limits: {read: 10}
  exec:
    blocked_commands: ["rm"]
"#;
        let e = env(&[
            ("MY_TOKEN", "sekrit"),
            ("GPTOSS_EXECUTOR_EXECUTOR_MAX_ITERATIONS", "7"),
            ("GPTOSS_EXECUTOR_HTTP_SERVER_PORT", "0"),
            ("GPTOSS_EXECUTOR_GATEWAY_TOKEN", "12345"),
            ("GPTOSS_EXECUTOR_LOG_LEVEL", "debug"),
            ("GPTOSS_EXECUTOR_RETRY_BACKOFF_MS", "5,10"),
            ("GPTOSS_EXECUTOR_NOPE", "x"),
        ]);
        let l = Config::from_yaml_with_env(yaml, "t", &e).unwrap();
        let c = &l.config;
        assert_eq!(c.executor.max_iterations, 7);
        assert_eq!(c.http_server.port, 0);
        // The env var beats the file, and stays a string although it is all digits.
        assert_eq!(c.executor.openclaw_gateway_token, "12345");
        assert_eq!(c.logging.level, "debug");
        assert_eq!(c.executor.retry_backoff_ms, vec![5, 10]);
        assert_eq!(c.retry_policy().backoff(1), Duration::from_millis(5));
        assert_eq!(c.retry_policy().backoff(9), Duration::from_millis(10));
        assert_eq!(c.upstream_base(), "http://spark:8000/v1");
        assert_eq!(c.result_limit("read"), 10);
        assert_eq!(c.tools.allowed.len(), 2);
        assert_eq!(c.tools.allowed[1].name(), "shout");
        assert_eq!(c.tools.per_tool["exec"].blocked_commands, vec!["rm"]);
        let w = l.warnings.join("\n");
        assert!(w.contains("executor.mystery"), "{w}");
        assert!(w.contains("GPTOSS_EXECUTOR_NOPE"), "{w}");
        assert!(w.contains("tools.exec"), "{w}");
    }

    #[test]
    fn invalid_values_are_rejected() {
        for yaml in [
            "executor: {max_iterations: 0}",
            "executor: {gpt_oss_url: 'spark:8000'}",
            "executor: {context_window_limit: 100, context_buffer_tokens: 100}",
            "parser: {strategy: telepathy}",
            "parser: {source_field: mood}",
            "logging: {level: loud}",
            "executor: {retry_backoff_ms: []}",
            "executor: {run_timeout_seconds: 0}",
        ] {
            assert!(
                matches!(
                    Config::from_yaml_with_env(yaml, "t", &[]),
                    Err(ConfigError::Invalid(_))
                ),
                "{yaml}"
            );
        }
        assert!(matches!(
            Config::from_yaml_with_env("executor: [1", "t", &[]),
            Err(ConfigError::Yaml { .. })
        ));
        assert!(matches!(
            Config::from_yaml_with_env(
                "",
                "t",
                &env(&[("GPTOSS_EXECUTOR_EXECUTOR_MAX_ITERATIONS", "[")])
            ),
            Err(ConfigError::Env { .. })
        ));
    }
}
