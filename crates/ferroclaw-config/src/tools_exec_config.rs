//! `tools.exec` in `config.json5`: the exec guard (mode, approvals, allowlist), exec's
//! limits, and custom shell tools (`tools.exec.custom`), which run through the same guard.
//!
//! ```json5
//! tools: { exec: {
//!   mode: "deny",              // deny | allowlist | full
//!   approval: "off",           // off | on-miss | always
//!   approval_timeout_seconds: 120,
//!   allowlist: ["git", "npm run"],
//!   timeout_seconds: 120, max_output_chars: 100000,
//!   sandbox: "auto",           // auto | bwrap | landlock | off
//!   network: false,            // commands may open sockets
//!   env: { GIT_AUTHOR_NAME: "bot" },   // added to the allowlisted environment
//!   limits: { cpu_seconds: 300, memory_mb: 2048, max_processes: 256, file_size_mb: 1024 },
//!   max_background_per_session: 16,
//!   custom: [{ name: "dns_lookup", description: "…", command: "dig +short {{.domain}}",
//!              parameters: { type: "object", properties: { domain: { type: "string" } },
//!                            required: ["domain"] }, timeout_seconds: 10 }],
//! } }
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How commands are confined by the operating system.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxModeConfig {
    /// bubblewrap if it works here, else Landlock, else exec refuses to run.
    #[default]
    Auto,
    Bwrap,
    Landlock,
    /// No confinement: the operator's explicit choice.
    Off,
}

/// Resource limits of every command (and everything it starts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExecLimitsConfig {
    #[serde(alias = "cpuSeconds")]
    pub cpu_seconds: u64,
    #[serde(alias = "memoryMb")]
    pub memory_mb: u64,
    #[serde(alias = "maxProcesses")]
    pub max_processes: u64,
    #[serde(alias = "fileSizeMb")]
    pub file_size_mb: u64,
}

impl Default for ExecLimitsConfig {
    fn default() -> Self {
        Self {
            cpu_seconds: 300,
            memory_mb: 2048,
            max_processes: 256,
            file_size_mb: 1024,
        }
    }
}

/// How commands are screened before they run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecModeConfig {
    /// Deny patterns apply; anything else runs.
    #[default]
    Deny,
    /// Deny patterns apply and every program must be on the allowlist.
    Allowlist,
    /// No checks (the operator's explicit choice).
    Full,
}

/// When a person is asked before a command runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExecApprovalConfig {
    #[default]
    Off,
    /// Ask when the command is not covered by the allowlist.
    #[serde(alias = "on_miss", alias = "onMiss")]
    OnMiss,
    Always,
}

/// `tools.exec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExecToolConfig {
    pub mode: ExecModeConfig,
    pub approval: ExecApprovalConfig,
    /// How long an approval request waits for an answer.
    #[serde(alias = "approvalTimeoutSeconds")]
    pub approval_timeout_seconds: u64,
    /// Program names (`git`) or command prefixes (`npm run`). Approvals with
    /// allow-always add to `<home>/data/exec-allowlist.json`, not to this list.
    pub allowlist: Vec<String>,
    /// Default time-out of a foreground command (the model may ask for up to 1800 s).
    #[serde(alias = "timeoutSeconds")]
    pub timeout_seconds: u64,
    /// Output returned to the model, in characters (head and tail kept).
    #[serde(alias = "maxOutputChars")]
    pub max_output_chars: usize,
    /// Output kept per background process.
    #[serde(alias = "backgroundBufferBytes")]
    pub background_buffer_bytes: usize,
    /// Shell tools defined by the operator.
    pub custom: Vec<CustomToolConfig>,
    /// OS confinement of every command (exec, process, custom tools).
    pub sandbox: SandboxModeConfig,
    /// Whether commands may use the network (off: no sockets beyond their own loopback).
    pub network: bool,
    /// Variables added to the child environment, which otherwise holds only PATH, HOME,
    /// LANG, LC_ALL, TERM and TMPDIR. Secret-looking and `FERROCLAW_*` names are refused.
    pub env: BTreeMap<String, String>,
    pub limits: ExecLimitsConfig,
    /// Background processes one session may have running at once.
    #[serde(alias = "maxBackgroundPerSession")]
    pub max_background_per_session: usize,
}

impl ExecToolConfig {
    /// Refuses `env` entries that would hand a child a credential or gateway setting.
    pub fn check_env(&self) -> Result<(), String> {
        for name in self.env.keys() {
            if let Some(why) = forbidden_child_env(name) {
                return Err(format!("`{name}` cannot be passed to commands: {why}"));
            }
        }
        Ok(())
    }
}

/// Why `name` may not be set in a command's environment, if it may not.
pub fn forbidden_child_env(name: &str) -> Option<&'static str> {
    let n = name.to_ascii_uppercase();
    if n.is_empty() || n.contains('=') || n.contains('\0') {
        return Some("not a valid variable name");
    }
    if n.starts_with("FERROCLAW_") {
        return Some("FERROCLAW_* variables configure the gateway and never reach commands");
    }
    let secret = n == "TOKEN"
        || n.ends_with("_TOKEN")
        || n == "API_KEY"
        || n.ends_with("_API_KEY")
        || n.ends_with("APIKEY")
        || [
            "SECRET",
            "PASSWORD",
            "PASSWD",
            "PRIVATE_KEY",
            "ACCESS_KEY",
            "CREDENTIAL",
        ]
        .iter()
        .any(|w| n.contains(w))
        || n.contains("DATABASE_URL")
        || n.ends_with("_DSN");
    if secret {
        return Some("it looks like a credential, and commands must not hold credentials");
    }
    None
}

impl Default for ExecToolConfig {
    fn default() -> Self {
        Self {
            mode: ExecModeConfig::Deny,
            approval: ExecApprovalConfig::Off,
            approval_timeout_seconds: 120,
            allowlist: Vec::new(),
            timeout_seconds: 120,
            max_output_chars: 100_000,
            background_buffer_bytes: 1 << 20,
            custom: Vec::new(),
            sandbox: SandboxModeConfig::Auto,
            network: false,
            env: BTreeMap::new(),
            limits: ExecLimitsConfig::default(),
            max_background_per_session: 16,
        }
    }
}

/// One custom tool: arguments are shell-escaped into `{{.key}}` placeholders.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CustomToolConfig {
    pub name: String,
    pub description: String,
    /// JSON schema of the arguments (an object schema).
    pub parameters: Value,
    /// Shell command template, e.g. `dig +short {{.record_type}} {{.domain}}`.
    pub command: String,
    #[serde(alias = "timeoutSeconds")]
    pub timeout_seconds: u64,
    /// Working directory relative to the workspace.
    pub workdir: Option<String>,
}

impl Default for CustomToolConfig {
    fn default() -> Self {
        Self {
            name: String::new(),
            description: String::new(),
            parameters: serde_json::json!({"type": "object", "properties": {}}),
            command: String::new(),
            timeout_seconds: 60,
            workdir: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_with_defaults_and_aliases() {
        let c: ExecToolConfig = json5::from_str(
            r#"{ mode: "allowlist", approval: "on-miss", allowlist: ["git"],
                 approvalTimeoutSeconds: 30,
                 custom: [{ name: "dns", command: "dig {{.d}}",
                            parameters: { type: "object", properties: { d: { type: "string" } } } }] }"#,
        )
        .unwrap();
        assert_eq!(c.mode, ExecModeConfig::Allowlist);
        assert_eq!(c.approval, ExecApprovalConfig::OnMiss);
        assert_eq!(c.approval_timeout_seconds, 30);
        assert_eq!(c.timeout_seconds, 120);
        assert_eq!(c.custom[0].timeout_seconds, 60);
        let d: ExecToolConfig = json5::from_str("{}").unwrap();
        assert_eq!(d, ExecToolConfig::default());
        let on: ExecToolConfig = json5::from_str(r#"{approval: "on_miss"}"#).unwrap();
        assert_eq!(on.approval, ExecApprovalConfig::OnMiss);
    }

    #[test]
    fn sandbox_settings_and_env_checks() {
        let c: ExecToolConfig = json5::from_str(
            r#"{ sandbox: "landlock", network: true, env: { GIT_AUTHOR_NAME: "bot" },
                 limits: { cpuSeconds: 5, memory_mb: 64 }, maxBackgroundPerSession: 2 }"#,
        )
        .unwrap();
        assert_eq!(c.sandbox, SandboxModeConfig::Landlock);
        assert!(c.network);
        assert_eq!(c.limits.cpu_seconds, 5);
        assert_eq!(c.limits.memory_mb, 64);
        assert_eq!(c.limits.max_processes, 256);
        assert_eq!(c.max_background_per_session, 2);
        assert!(c.check_env().is_ok());
        for bad in [
            "OPENAI_API_KEY",
            "FERROCLAW_GATEWAY_TOKEN",
            "ferroclaw_home",
            "GH_TOKEN",
        ] {
            let mut c = ExecToolConfig::default();
            c.env.insert(bad.into(), "x".into());
            let e = c.check_env().unwrap_err();
            assert!(e.contains(bad) && e.contains("cannot be passed"), "{e}");
        }
        assert!(json5::from_str::<ExecToolConfig>(r#"{sandbox: "chroot"}"#).is_err());
    }
}
