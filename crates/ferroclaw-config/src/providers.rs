//! Provider resolution: configured providers, implicit ones from the
//! environment, default base URLs and API-key lookup.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::schema::{Config, ModelConfig, ProviderConfig, ProviderType};
use crate::Env;

/// A provider with everything the HTTP client needs, after applying
/// defaults and environment overrides.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedProvider {
    pub name: String,
    pub kind: ProviderType,
    pub base_url: String,
    pub api_key: Option<String>,
    /// Name of the environment variable the key came from.
    pub api_key_source: Option<String>,
    pub headers: Vec<(String, String)>,
    pub timeout: Duration,
    /// A stream may pause this long between events before it counts as stalled.
    pub idle_timeout: Duration,
    /// "openai" or "gemini".
    pub schema_flavor: String,
    pub tool_mode: crate::ToolMode,
    pub guided_decoding: crate::GuidedDecoding,
    pub intent: crate::IntentConfig,
    pub models: Vec<ModelConfig>,
}

impl ResolvedProvider {
    /// The listed model entry for `model`, if any.
    pub fn model(&self, model: &str) -> Option<&ModelConfig> {
        self.models.iter().find(|m| m.id == model)
    }
}

/// A provider name we know defaults for.
pub(crate) struct WellKnown {
    pub name: &'static str,
    pub kind: ProviderType,
    pub base_url: &'static str,
    /// The conventional API-key variable; `None` for local servers.
    pub key_var: Option<&'static str>,
}

const WELL_KNOWN: &[WellKnown] = &[
    wk(
        "openai",
        ProviderType::OpenaiCompat,
        "https://api.openai.com/v1",
        Some("OPENAI_API_KEY"),
    ),
    wk(
        "anthropic",
        ProviderType::Anthropic,
        "https://api.anthropic.com",
        Some("ANTHROPIC_API_KEY"),
    ),
    wk(
        "openrouter",
        ProviderType::OpenaiCompat,
        "https://openrouter.ai/api/v1",
        Some("OPENROUTER_API_KEY"),
    ),
    wk(
        "groq",
        ProviderType::OpenaiCompat,
        "https://api.groq.com/openai/v1",
        Some("GROQ_API_KEY"),
    ),
    wk(
        "deepseek",
        ProviderType::OpenaiCompat,
        "https://api.deepseek.com/v1",
        Some("DEEPSEEK_API_KEY"),
    ),
    wk(
        "mistral",
        ProviderType::OpenaiCompat,
        "https://api.mistral.ai/v1",
        Some("MISTRAL_API_KEY"),
    ),
    wk(
        "xai",
        ProviderType::OpenaiCompat,
        "https://api.x.ai/v1",
        Some("XAI_API_KEY"),
    ),
    wk(
        "ollama",
        ProviderType::OpenaiCompat,
        "http://127.0.0.1:11434/v1",
        None,
    ),
    wk(
        "vllm",
        ProviderType::OpenaiCompat,
        "http://127.0.0.1:8000/v1",
        None,
    ),
    wk(
        "lmstudio",
        ProviderType::OpenaiCompat,
        "http://127.0.0.1:1234/v1",
        None,
    ),
];

const fn wk(
    name: &'static str,
    kind: ProviderType,
    base_url: &'static str,
    key_var: Option<&'static str>,
) -> WellKnown {
    WellKnown {
        name,
        kind,
        base_url,
        key_var,
    }
}

pub(crate) fn well_known(name: &str) -> Option<&'static WellKnown> {
    WELL_KNOWN.iter().find(|w| w.name == name)
}

/// Provider name as it appears in variable names: upper case, `-` → `_`.
pub fn env_name(name: &str) -> String {
    name.to_ascii_uppercase().replace('-', "_")
}

/// Names of well-known providers that the environment brings in without any
/// config: a cloud provider whose key is set (conventional or
/// `FERROCLAW_<NAME>_API_KEY`), or any well-known provider whose
/// `FERROCLAW_<NAME>_BASE_URL` is set.
fn implicit_names(config: &Config, env: &Env) -> Vec<&'static str> {
    WELL_KNOWN
        .iter()
        .filter(|w| !config.providers.contains_key(w.name))
        .filter(|w| {
            let n = env_name(w.name);
            w.key_var.is_some_and(|v| env.get(v).is_some())
                || env.get(&format!("FERROCLAW_{n}_API_KEY")).is_some()
                || env.get(&format!("FERROCLAW_{n}_BASE_URL")).is_some()
        })
        .map(|w| w.name)
        .collect()
}

/// Configured plus implicit provider names.
pub(crate) fn effective_provider_names(config: &Config, env: &Env) -> BTreeSet<String> {
    config
        .providers
        .keys()
        .cloned()
        .chain(implicit_names(config, env).into_iter().map(String::from))
        .collect()
}

/// Names usable in `provider` fields and as a `provider/` model prefix:
/// effective providers plus local servers, which resolve without config.
pub(crate) fn known_provider_names(config: &Config, env: &Env) -> BTreeSet<String> {
    let mut names = effective_provider_names(config, env);
    names.extend(
        WELL_KNOWN
            .iter()
            .filter(|w| w.key_var.is_none())
            .map(|w| w.name.to_string()),
    );
    names
}

/// All effective providers, configured first (in name order), then implicit.
pub(crate) fn resolve_all(config: &Config, env: &Env) -> Vec<ResolvedProvider> {
    let mut out: Vec<ResolvedProvider> = config
        .providers
        .iter()
        .map(|(name, p)| resolve_one(name, p, env))
        .collect();
    for name in implicit_names(config, env) {
        out.push(resolve_one(name, &implicit_config(name), env));
    }
    out
}

/// Looks up one provider: configured, implicit, or — for local servers that
/// need no key (ollama, vllm, lmstudio) — synthesised on demand, so
/// `FERROCLAW_PROVIDER=ollama` works with no config at all.
pub(crate) fn resolve_named(config: &Config, env: &Env, name: &str) -> Option<ResolvedProvider> {
    if let Some(p) = config.providers.get(name) {
        return Some(resolve_one(name, p, env));
    }
    let w = well_known(name)?;
    if implicit_names(config, env).contains(&w.name) || w.key_var.is_none() {
        return Some(resolve_one(name, &implicit_config(name), env));
    }
    None
}

fn implicit_config(name: &str) -> ProviderConfig {
    ProviderConfig {
        r#type: well_known(name).map(|w| w.kind).unwrap_or_default(),
        ..ProviderConfig::default()
    }
}

fn resolve_one(name: &str, p: &ProviderConfig, env: &Env) -> ResolvedProvider {
    let n = env_name(name);
    let wk = well_known(name);
    let base_url = env
        .get(&format!("FERROCLAW_{n}_BASE_URL"))
        .map(str::to_string)
        .or_else(|| p.base_url.clone())
        .or_else(|| wk.map(|w| w.base_url.to_string()))
        // Validation rejects a configured provider with no URL at all, so this
        // is only reachable for hand-built configs; an empty URL fails loudly
        // at request time.
        .unwrap_or_default();
    let base_url = base_url.trim_end_matches('/').to_string();

    let ferroclaw_var = format!("FERROCLAW_{n}_API_KEY");
    let candidates = p
        .api_key_env
        .iter()
        .map(String::as_str)
        .chain(std::iter::once(ferroclaw_var.as_str()))
        .chain(wk.and_then(|w| w.key_var));
    let mut api_key = None;
    let mut api_key_source = None;
    for var in candidates {
        if let Some(v) = env.get(var) {
            api_key = Some(v.to_string());
            api_key_source = Some(var.to_string());
            break;
        }
    }

    let schema_flavor = p.schema_flavor.clone().unwrap_or_else(|| {
        // Gemini's OpenAI-compatible endpoint rejects parts of JSON Schema
        // that OpenAI accepts, so detect it when the user did not say.
        if base_url.contains("generativelanguage.googleapis.com") {
            "gemini".into()
        } else {
            "openai".into()
        }
    });

    ResolvedProvider {
        name: name.to_string(),
        kind: p.r#type,
        base_url,
        api_key,
        api_key_source,
        headers: p
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        timeout: Duration::from_secs(p.timeout_seconds),
        idle_timeout: Duration::from_secs(p.stream_idle_timeout_seconds.max(1)),
        schema_flavor,
        tool_mode: p.tool_mode,
        guided_decoding: p.guided_decoding,
        intent: p.intent.clone(),
        models: p.models.clone(),
    }
}

/// Masks a secret for display: at most the first 3 and last 4 characters
/// survive, and only when at least 5 characters stay hidden.
pub fn mask_secret(secret: &str) -> String {
    let chars: Vec<char> = secret.chars().collect();
    if chars.len() < 12 {
        return "***".into();
    }
    let head: String = chars[..3].iter().collect();
    let tail: String = chars[chars.len() - 4..].iter().collect();
    format!("{head}…{tail}")
}

/// Header names whose values are credentials and must be masked on display.
pub(crate) fn is_sensitive_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n == "authorization"
        || n.contains("key")
        || n.contains("token")
        || n.contains("secret")
        || n.contains("cookie")
}
