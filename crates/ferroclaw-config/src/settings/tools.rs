//! Tool settings: the policy levels of an agent, the exec guard and sandbox, the web
//! tools. Types the tools crate only fills from configuration live here and are used
//! there directly.

use std::time::Duration;

use serde_json::Value;

/// Named base tool sets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ToolProfile {
    /// Read-only filesystem plus `session_status`.
    Minimal,
    /// Filesystem, runtime, memory, web and session tools.
    Coding,
    /// Session, memory and web tools; no filesystem writes, no exec.
    Messaging,
    /// Every registered tool.
    #[default]
    Full,
}

impl ToolProfile {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Minimal => "minimal",
            Self::Coding => "coding",
            Self::Messaging => "messaging",
            Self::Full => "full",
        }
    }
}

/// One level of tool policy. Empty lists mean "no opinion at this level".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolPolicySettings {
    /// Replaces the base profile; `None`: this level names no profile.
    pub profile: Option<ToolProfile>,
    /// When non-empty, intersects the tools that survived the previous levels.
    pub allow: Vec<String>,
    /// Removes tools; deny always wins over any allow at any level.
    pub deny: Vec<String>,
    /// Adds tools back on top of the profile / allow lists (never over a deny).
    pub also_allow: Vec<String>,
}

/// The levels of tool policy that apply to one agent's runs, resolved for its primary
/// provider.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentToolPolicySettings {
    /// `tools.{profile,allow,deny,also_allow}`.
    pub global: ToolPolicySettings,
    /// `tools.by_provider.<primary provider>`, when set.
    pub provider: Option<ToolPolicySettings>,
    /// The agent's `tools` (allow), `tools_deny`, `tools_also_allow`.
    pub agent: ToolPolicySettings,
    /// The agent's `tools_by_provider.<primary provider>`, when set.
    pub agent_provider: Option<ToolPolicySettings>,
    /// `tools.group_chat`, for runs from a group chat.
    pub group_chat: ToolPolicySettings,
    /// Name of the primary provider the provider levels were chosen for.
    pub provider_name: String,
}

/// What the input guard does with a user message that matches an injection pattern.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum InputGuardAction {
    /// No scanning.
    Off,
    /// Log the finding (info level) and continue.
    Log,
    /// Log a warning and tell the model the message may contain an injection attempt.
    #[default]
    Warn,
    /// Log a warning and refuse the message.
    Block,
}

/// How commands are screened before they run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ExecMode {
    /// Deny patterns apply; anything else runs.
    #[default]
    Deny,
    /// Deny patterns apply and every program must be on the allowlist.
    Allowlist,
    /// No checks (the operator's explicit choice).
    Full,
}

/// When a person is asked before a command runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ApprovalMode {
    #[default]
    Off,
    /// Ask when the command is not covered by the allowlist.
    OnMiss,
    Always,
}

/// How commands are confined by the operating system.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SandboxMode {
    /// bubblewrap if it works here, else Landlock, else commands are refused.
    #[default]
    Auto,
    Bwrap,
    Landlock,
    /// No confinement: the operator's explicit choice.
    Off,
}

/// Resource limits of every command (and everything it starts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecLimitsSettings {
    pub cpu_seconds: u64,
    pub memory_mb: u64,
    pub max_processes: u64,
    pub file_size_mb: u64,
}

/// The confinement of every command (exec, background processes, custom tools).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSettings {
    pub mode: SandboxMode,
    /// Whether commands may use the network.
    pub network: bool,
    /// Added to the allowlisted child environment (credentials were refused at load).
    pub env: Vec<(String, String)>,
    pub limits: ExecLimitsSettings,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        ExecSettings::default().sandbox
    }
}

/// One operator-defined shell tool.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomToolSettings {
    pub name: String,
    pub description: String,
    /// JSON schema of the arguments (an object schema).
    pub parameters: Value,
    /// Shell command template, e.g. `dig +short {{.record_type}} {{.domain}}`.
    pub command: String,
    pub timeout: Duration,
    /// Working directory relative to the workspace; `None`: the workspace itself.
    pub workdir: Option<String>,
}

/// `exec`, `process` and the custom tools.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecSettings {
    pub mode: ExecMode,
    pub approval: ApprovalMode,
    /// How long an approval request waits for an answer.
    pub approval_timeout: Duration,
    /// Program names (`git`) or command prefixes (`npm run`).
    pub allowlist: Vec<String>,
    /// Time-out of a foreground command when the model asks for none.
    pub timeout: Duration,
    /// Output returned to the model, in characters (head and tail kept).
    pub max_output_chars: usize,
    /// Output kept per background process.
    pub background_buffer_bytes: usize,
    /// Background processes one session may have running at once.
    pub max_background_per_session: usize,
    pub custom: Vec<CustomToolSettings>,
    pub sandbox: SandboxSettings,
}

impl Default for ExecSettings {
    fn default() -> Self {
        super::resolve::exec(&crate::ExecToolConfig::default())
    }
}

/// Which web search backend `web_search` uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum SearchProvider {
    /// Brave Search API (`X-Subscription-Token`).
    Brave,
    /// A SearXNG instance's JSON API.
    Searxng,
    /// `GET {base_url}?q=&count=` answering `{results: [{title, url, snippet}]}`.
    Generic,
    /// No `web_search` tool.
    #[default]
    None,
}

impl SearchProvider {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Brave => "brave",
            Self::Searxng => "searxng",
            Self::Generic => "generic",
            Self::None => "none",
        }
    }
}

/// Public endpoint of the Brave Search API.
pub const BRAVE_DEFAULT_BASE: &str = "https://api.search.brave.com";

/// `web_search`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebSearchSettings {
    pub provider: SearchProvider,
    /// Brave: filled with [`BRAVE_DEFAULT_BASE`] when unset. `None` for SearXNG or
    /// generic means it was not configured, and searches fail saying so.
    pub base_url: Option<String>,
    /// Brave's subscription token, read from the environment.
    pub api_key: Option<String>,
    /// Name of the variable the key comes from (for error messages).
    pub api_key_env: String,
    /// Results when the model does not ask for a number (1–10).
    pub default_count: usize,
    pub timeout: Duration,
}

impl Default for WebSearchSettings {
    fn default() -> Self {
        WebToolsSettings::default().search
    }
}

/// What outbound fetches made for the model may reach beyond public addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SsrfSettings {
    /// Hosts the operator trusts even though they are internal: exact names, globs
    /// (`*.corp.example`), IP addresses or CIDR ranges (`10.1.0.0/16`). A host matching a
    /// name/glob skips every check; an address matching an IP/CIDR entry passes.
    pub allow_hosts: Vec<String>,
    /// Allows loopback, private (RFC 1918), CGNAT, link-local and unique-local addresses.
    /// Cloud metadata addresses, unspecified, multicast, broadcast and reserved ranges stay
    /// blocked, and so do the blocked host names.
    pub allow_private: bool,
}

/// `web_fetch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebFetchSettings {
    /// Default and maximum number of characters returned to the model.
    pub max_chars: usize,
    /// Largest response body read; larger ones are refused.
    pub max_bytes: usize,
    /// Time for the whole fetch, redirects and body included.
    pub timeout: Duration,
    pub ssrf: SsrfSettings,
}

impl Default for WebFetchSettings {
    fn default() -> Self {
        WebToolsSettings::default().fetch
    }
}

/// `web_fetch` always, `web_search` when a provider is configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebToolsSettings {
    pub search: WebSearchSettings,
    pub fetch: WebFetchSettings,
}

impl Default for WebToolsSettings {
    fn default() -> Self {
        super::resolve::web(&crate::WebToolsConfig::default(), &crate::Env::default())
    }
}
