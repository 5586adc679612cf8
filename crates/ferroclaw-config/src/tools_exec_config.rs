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
//!   custom: [{ name: "dns_lookup", description: "…", command: "dig +short {{.domain}}",
//!              parameters: { type: "object", properties: { domain: { type: "string" } },
//!                            required: ["domain"] }, timeout_seconds: 10 }],
//! } }
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;

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
}
