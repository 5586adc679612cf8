//! Providers as the clients need them (keys read from the environment, defaults
//! applied), the chain an agent tries them in, and how its model is given tools.

use std::path::PathBuf;
use std::time::Duration;

/// Wire protocol of a provider.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// OpenAI chat completions (OpenAI, vLLM, Ollama, Groq, …).
    #[default]
    OpenaiCompat,
    /// Anthropic Messages API.
    Anthropic,
}

/// JSON-schema dialect for tool definitions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SchemaFlavor {
    #[default]
    OpenAi,
    /// Gemini's OpenAI-compatible endpoint rejects parts of JSON Schema OpenAI accepts.
    Gemini,
}

/// One provider, ready for its HTTP client.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderSettings {
    pub name: String,
    pub kind: ProviderKind,
    /// Without a trailing `/`.
    pub base_url: String,
    /// `None`: a local server that needs no key (or none was found; the request fails).
    pub api_key: Option<String>,
    pub headers: Vec<(String, String)>,
    pub request_timeout: Duration,
    /// A stream may pause this long between events before it counts as stalled.
    pub idle_timeout: Duration,
    pub schema_flavor: SchemaFlavor,
    /// `max_tokens` sent to Anthropic-wire providers when the agent sets none (the API
    /// requires one).
    pub default_max_tokens: u32,
}

/// One candidate of a chain: a provider and the model asked of it.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelChoice {
    pub provider: ProviderSettings,
    pub model: String,
}

/// The models an agent talks to: the primary, then each fallback in order.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderChainSettings {
    pub primary: ModelChoice,
    /// Tried in order when the primary fails.
    pub fallbacks: Vec<ModelChoice>,
    /// How long a rate-limited or failing candidate is skipped.
    pub cooldown: Duration,
}

impl ProviderChainSettings {
    /// The primary model, then each fallback.
    pub fn candidates(&self) -> impl Iterator<Item = &ModelChoice> {
        std::iter::once(&self.primary).chain(&self.fallbacks)
    }
}

/// How a model is given tools.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ToolMode {
    /// Send `tools`; expect structured tool calls.
    #[default]
    Native,
    /// Never send `tools`: describe them in the system prompt and parse the text.
    Intent,
    /// Send `tools`; parse the text when the answer carries an intent only there.
    Auto,
}

/// How an `intent`-mode request asks the server to follow the tool-call schema.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GuidedDecoding {
    #[default]
    Off,
    /// vLLM's `guided_json` body field.
    Vllm,
    /// OpenAI-style `response_format: {type: json_schema}`.
    ResponseFormat,
}

/// Tool calling of the agent's primary model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallingSettings {
    pub mode: ToolMode,
    pub guided: GuidedDecoding,
    /// Intent strategies in the order they are tried (validated names: harmony,
    /// native_text, guided_json, react, markers, fuzzy).
    pub intent_order: Vec<String>,
    /// Where intents are looked for, first first (reasoning, content).
    pub intent_sources: Vec<String>,
    /// The format the model is taught in `intent` mode (one of the strategies).
    pub intent_prompt: String,
    /// `<dir>/<strategy>.md` replaces the built-in tool-calling prompt when present.
    pub prompts_dir: PathBuf,
    /// Ask the model again for a call its text is unsure about.
    pub confirm: IntentConfirm,
}

/// How an unsure text intent is settled (`providers.<p>.intent.confirm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IntentConfirm {
    /// Not a call.
    #[default]
    Off,
    /// A second request constrained by the server's guided decoding.
    Guided,
    /// A second request asking for a strict format.
    Ask,
}
