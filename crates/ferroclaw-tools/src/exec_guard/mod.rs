//! The guard in front of every shell command the model asks for (`exec`, custom tools).
//!
//! Three decisions, in order:
//! 1. **Deny patterns** ([`check_command`]): the command is normalised (see `normalize`) and
//!    matched against a table of dangerous patterns grouped by [`ExecCategory`]. A match is
//!    refused, whatever the approval settings: deny always wins.
//! 2. **Mode** ([`ExecMode`]): `deny` runs anything that passed the patterns, `allowlist`
//!    additionally requires every program in the command to be on the allowlist, `full`
//!    skips both checks (an operator's explicit choice).
//! 3. **Approval** ([`ApprovalMode`]): `on-miss` asks a person when the command is not on
//!    the allowlist, `always` asks for every command; see [`ApprovalBroker`].
//!
//! [`ExecGuard`] bundles the three for the tools; [`check_command`] is the pure part.

mod allowlist;
mod approval;
mod normalize;
mod patterns;

use serde::{Deserialize, Serialize};

pub use allowlist::ExecAllowlist;
pub use approval::{
    ApprovalBroker, ApprovalDecision, ApprovalError, ApprovalEvent, ApprovalRequest,
    DEFAULT_APPROVAL_TIMEOUT,
};

/// Why a command was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecCategory {
    Destructive,
    Shutdown,
    ForkBomb,
    DownloadExec,
    ReverseShell,
    EvalDecode,
    Exfiltration,
    PrivilegeEscalation,
    SystemWrite,
    Persistence,
    AntiForensics,
    /// Arguments, configuration or environment that make a program run another command
    /// (`git -c core.pager=…`, `git --upload-pack=…`, `GIT_CONFIG_PARAMETERS`).
    CommandInjection,
    /// Nested deeper than the guard reads, or too long to analyse.
    Obfuscation,
    /// `allowlist` mode and a program is not on the list.
    NotAllowlisted,
    /// An approval was required and was denied, timed out, or nobody could be asked.
    ApprovalDenied,
}

impl ExecCategory {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Destructive => "destructive",
            Self::Shutdown => "shutdown",
            Self::ForkBomb => "fork_bomb",
            Self::DownloadExec => "download_exec",
            Self::ReverseShell => "reverse_shell",
            Self::EvalDecode => "eval_decode",
            Self::Exfiltration => "exfiltration",
            Self::PrivilegeEscalation => "privilege_escalation",
            Self::SystemWrite => "system_write",
            Self::Persistence => "persistence",
            Self::AntiForensics => "anti_forensics",
            Self::CommandInjection => "command_injection",
            Self::Obfuscation => "obfuscation",
            Self::NotAllowlisted => "not_allowlisted",
            Self::ApprovalDenied => "approval_denied",
        }
    }
}

impl std::fmt::Display for ExecCategory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecMode {
    /// Deny patterns apply; anything else runs (default).
    #[default]
    Deny,
    /// Deny patterns apply and every program must be on the allowlist.
    Allowlist,
    /// No checks at all.
    Full,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalMode {
    /// Never ask (default).
    #[default]
    Off,
    /// Ask when the command is not covered by the allowlist.
    OnMiss,
    /// Ask for every command (deny patterns still refuse without asking).
    Always,
}

/// Static settings of the guard (from config).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecPolicy {
    pub mode: ExecMode,
    pub approval: ApprovalMode,
    /// Program names (`git`) or command prefixes (`npm run`).
    pub allowlist: Vec<String>,
}

/// A refusal: the category, the rule that matched and a sentence for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecDenied {
    pub category: ExecCategory,
    pub pattern: String,
    pub message: String,
}

impl std::fmt::Display for ExecDenied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "command refused by the exec guard [{}]: {} (rule: {})",
            self.category, self.message, self.pattern
        )
    }
}

impl std::error::Error for ExecDenied {}

fn denied(category: ExecCategory, pattern: &str, message: String) -> ExecDenied {
    ExecDenied {
        category,
        pattern: pattern.to_string(),
        message,
    }
}

/// Checks `cmd` against the deny patterns and, in `allowlist` mode, the allowlist.
/// Approvals are not considered here (see [`ExecGuard::authorize`]).
pub fn check_command(cmd: &str, policy: &ExecPolicy) -> Result<(), ExecDenied> {
    if policy.mode == ExecMode::Full {
        return Ok(());
    }
    check_patterns(cmd)?;
    if policy.mode == ExecMode::Allowlist {
        if let Some(d) = allowlist_miss(cmd, &policy.allowlist) {
            return Err(d);
        }
    }
    Ok(())
}

/// Why `cmd` is not covered by `allowlist`: a program not on it, or something the guard
/// cannot vouch for (an expansion it does not read, inline code with dangerous calls, a
/// file written and run by the same command).
fn allowlist_miss(cmd: &str, allowlist: &[String]) -> Option<ExecDenied> {
    let analysis = normalize::analyze(cmd);
    if let Some(f) = analysis
        .findings
        .iter()
        .find(|f| f.scope == normalize::FindingScope::Allowlist)
    {
        return Some(denied(f.category, f.rule, f.message.clone()));
    }
    first_unlisted(cmd, allowlist).map(|program| {
        denied(
            ExecCategory::NotAllowlisted,
            "allowlist",
            format!("\"{program}\" is not on the exec allowlist"),
        )
    })
}

/// The deny patterns alone.
pub fn check_patterns(cmd: &str) -> Result<(), ExecDenied> {
    if cmd.chars().count() > normalize::MAX_COMMAND_CHARS {
        return Err(denied(
            ExecCategory::Obfuscation,
            "length",
            format!(
                "the command is longer than {} characters",
                normalize::MAX_COMMAND_CHARS
            ),
        ));
    }
    if cmd.contains('\0') {
        return Err(denied(
            ExecCategory::Obfuscation,
            "nul byte",
            "the command contains a NUL byte".into(),
        ));
    }
    let analysis = normalize::analyze(cmd);
    if analysis.too_large {
        return Err(denied(
            ExecCategory::Obfuscation,
            "expansion size",
            "the command expands to more text than the guard reads".into(),
        ));
    }
    if analysis.too_deep {
        return Err(denied(
            ExecCategory::Obfuscation,
            "nesting depth",
            "the command nests shells or substitutions too deeply to be checked".into(),
        ));
    }
    for pat in patterns::PATTERNS.iter() {
        for line in &analysis.lines {
            let hit = match pat.scope {
                patterns::Scope::Raw => pat.is_match(&unquoted_compact(&line.raw)),
                patterns::Scope::Line => pat.is_match(&line.text),
                patterns::Scope::Cmd => line.commands.iter().any(|c| pat.is_match(&c.text)),
                patterns::Scope::Assign => line
                    .commands
                    .iter()
                    .any(|c| c.assigns.iter().any(|a| pat.is_match(a))),
            };
            if hit {
                return Err(denied(
                    pat.category,
                    pat.id,
                    describe(pat.category).to_string(),
                ));
            }
        }
    }
    if let Some(f) = analysis
        .findings
        .iter()
        .find(|f| f.scope == normalize::FindingScope::Always)
    {
        return Err(denied(
            f.category,
            f.rule,
            format!("{}: {}", describe(f.category), f.message),
        ));
    }
    Ok(())
}

/// The source without whitespace and without quoted text: what a raw pattern sees. Quoted
/// text is data here; if it is code (`sh -c '…'`, `eval '…'`), it is its own nested line.
fn unquoted_compact(raw: &str) -> String {
    let mut out = String::new();
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in raw.chars() {
        if escaped {
            escaped = false;
            if quote.is_none() {
                out.push(c);
            }
            continue;
        }
        match (quote, c) {
            (_, '\\') if quote != Some('\'') => escaped = true,
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, c) if c.is_whitespace() => {}
            (None, c) => out.push(c),
        }
    }
    out
}

fn describe(category: ExecCategory) -> &'static str {
    match category {
        ExecCategory::Destructive => "destructive file or disk operation",
        ExecCategory::Shutdown => "shutdown, reboot or killing the system",
        ExecCategory::ForkBomb => "fork bomb",
        ExecCategory::DownloadExec => "downloaded code executed directly",
        ExecCategory::ReverseShell => "reverse or bind shell",
        ExecCategory::EvalDecode => "decoded or generated text executed as a command",
        ExecCategory::Exfiltration => "access to credentials or secret files",
        ExecCategory::PrivilegeEscalation => "privilege escalation",
        ExecCategory::SystemWrite => "write to system files (/etc, /boot, /sys, /proc)",
        ExecCategory::Persistence => "persistence (scheduled jobs, start-up files, services)",
        ExecCategory::AntiForensics => "wiping history or logs",
        ExecCategory::CommandInjection => {
            "arguments or configuration that make a program run another command"
        }
        ExecCategory::Obfuscation => "command too obfuscated to check",
        ExecCategory::NotAllowlisted => "program not on the allowlist",
        ExecCategory::ApprovalDenied => "approval not granted",
    }
}

/// Every program the command runs, nested ones included (lowercased base names).
pub fn command_programs(cmd: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in normalize::analyze(cmd).lines {
        for c in line.commands {
            if !c.program.is_empty() && !out.contains(&c.program) {
                out.push(c.program);
            }
        }
    }
    out
}

/// Whether every command in `cmd` (nested ones included) is covered by `allowlist`.
pub fn is_allowlisted(cmd: &str, allowlist: &[String]) -> bool {
    allowlist_miss(cmd, allowlist).is_none()
}

/// The first program in `cmd` not covered by `allowlist`. An entry is a program name
/// (`git`, `/usr/bin/git`) or a command prefix matched on whole words (`git status`).
fn first_unlisted(cmd: &str, allowlist: &[String]) -> Option<String> {
    let entries: Vec<String> = allowlist
        .iter()
        .filter_map(|e| {
            normalize::analyze(e)
                .lines
                .first()
                .and_then(|l| l.commands.first().map(|c| c.text.clone()))
        })
        .filter(|e| !e.is_empty())
        .collect();
    let analysis = normalize::analyze(cmd);
    for line in &analysis.lines {
        for c in &line.commands {
            if c.program.is_empty() || c.local {
                continue;
            }
            let covered = entries.iter().any(|e| {
                c.text.eq_ignore_ascii_case(e)
                    || (c.text.len() > e.len()
                        && c.text.is_char_boundary(e.len())
                        && c.text[..e.len()].eq_ignore_ascii_case(e)
                        && c.text[e.len()..].starts_with(' '))
            });
            if !covered {
                return Some(c.program.clone());
            }
        }
    }
    None
}

/// Deny patterns + mode + approvals, as the `exec` tool and custom tools use them.
#[derive(Debug, Clone)]
pub struct ExecGuard {
    policy: ExecPolicy,
    broker: Option<ApprovalBroker>,
}

impl Default for ExecGuard {
    fn default() -> Self {
        Self::new(ExecPolicy::default())
    }
}

impl ExecGuard {
    pub fn new(policy: ExecPolicy) -> Self {
        Self {
            policy,
            broker: None,
        }
    }

    /// Approvals go through `broker`; its persisted allowlist joins the policy's.
    pub fn with_approvals(mut self, broker: ApprovalBroker) -> Self {
        self.broker = Some(broker);
        self
    }

    pub fn policy(&self) -> &ExecPolicy {
        &self.policy
    }

    pub fn broker(&self) -> Option<&ApprovalBroker> {
        self.broker.as_ref()
    }

    /// Config entries plus those persisted by allow-always approvals.
    pub fn effective_allowlist(&self) -> Vec<String> {
        let mut list = self.policy.allowlist.clone();
        if let Some(b) = &self.broker {
            for e in b.allowlist().entries() {
                if !list.contains(&e) {
                    list.push(e);
                }
            }
        }
        list
    }

    /// Decides whether `command` may run for this session, asking for approval when the
    /// policy says so. Every refusal is logged under `security.exec`.
    pub async fn authorize(
        &self,
        session_key: &str,
        agent_id: &str,
        command: &str,
    ) -> Result<(), ExecDenied> {
        let allowlist = self.effective_allowlist();
        let policy = ExecPolicy {
            allowlist: allowlist.clone(),
            ..self.policy.clone()
        };
        let needs_approval = match check_command(command, &policy) {
            Ok(()) => match self.policy.approval {
                ApprovalMode::Off => false,
                ApprovalMode::Always => true,
                ApprovalMode::OnMiss => !is_allowlisted(command, &allowlist),
            },
            // An allowlist miss can still be approved by a person when approvals are on.
            Err(d)
                if d.category == ExecCategory::NotAllowlisted
                    && self.policy.approval != ApprovalMode::Off =>
            {
                true
            }
            Err(d) => {
                tracing::warn!(
                    target: "security.exec",
                    session = session_key,
                    agent = agent_id,
                    category = d.category.as_str(),
                    rule = %d.pattern,
                    command = %truncate_for_log(command),
                    "exec command refused"
                );
                return Err(d);
            }
        };
        if !needs_approval {
            return Ok(());
        }
        let Some(broker) = &self.broker else {
            let d = denied(
                ExecCategory::ApprovalDenied,
                "approval",
                "this command needs an operator's approval, but no approver is configured".into(),
            );
            tracing::warn!(target: "security.exec", session = session_key, command = %truncate_for_log(command), "exec approval unavailable");
            return Err(d);
        };
        match broker.request(session_key, agent_id, command).await {
            ApprovalDecision::Approved | ApprovalDecision::ApprovedAlways => Ok(()),
            ApprovalDecision::Denied => {
                tracing::warn!(target: "security.exec", session = session_key, command = %truncate_for_log(command), "exec approval denied");
                Err(denied(
                    ExecCategory::ApprovalDenied,
                    "approval",
                    "an operator denied this command".into(),
                ))
            }
            ApprovalDecision::TimedOut => {
                tracing::warn!(target: "security.exec", session = session_key, command = %truncate_for_log(command), "exec approval timed out");
                Err(denied(
                    ExecCategory::ApprovalDenied,
                    "approval",
                    format!(
                        "no operator approved this command within {} s",
                        broker.timeout().as_secs_f64()
                    ),
                ))
            }
        }
    }
}

fn truncate_for_log(cmd: &str) -> String {
    const MAX: usize = 300;
    if cmd.chars().count() <= MAX {
        cmd.to_string()
    } else {
        let mut s: String = cmd.chars().take(MAX).collect();
        s.push('…');
        s
    }
}
