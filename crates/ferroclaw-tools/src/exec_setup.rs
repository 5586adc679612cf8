//! Builds the exec tool set from its settings (`tools.exec` in the config): the guard (with the approval
//! broker and the persisted allowlist under `<home>/data/exec-allowlist.json`), the
//! background process manager, `exec`, `process` and the custom tools.
//!
//! The gateway keeps [`ExecToolset::approvals`] (to forward `exec.approval.requested` and
//! serve `exec.approval.list|approve|deny`) and [`ExecToolset::processes`] (to call
//! `kill_session` when a session is deleted and `kill_all` at shutdown).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ferroclaw_config::settings::{
    ApprovalMode as ApprovalSetting, CustomToolSettings, ExecMode as ExecModeSetting, ExecSettings,
};

use crate::builtin::ExecTool;
use crate::custom_tool::{CustomTool, CustomToolError, CustomToolSpec};
use crate::exec_guard::{
    ApprovalBroker, ApprovalMode, ExecAllowlist, ExecGuard, ExecMode, ExecPolicy,
};
use crate::process::{ProcessManager, ProcessTool};
use crate::sandbox::{Sandbox, SandboxBackend};
use crate::Tool;

#[derive(Debug, thiserror::Error)]
pub enum ExecSetupError {
    #[error("cannot load the exec allowlist: {0}")]
    Allowlist(std::io::Error),
    #[error(transparent)]
    CustomTool(#[from] CustomToolError),
    #[error("custom tool {0:?} is defined twice or shadows a built-in tool")]
    DuplicateName(String),
    #[error("tools.exec.env: {0}")]
    Env(String),
}

pub fn exec_policy(cfg: &ExecSettings) -> ExecPolicy {
    ExecPolicy {
        mode: match cfg.mode {
            ExecModeSetting::Deny => ExecMode::Deny,
            ExecModeSetting::Allowlist => ExecMode::Allowlist,
            ExecModeSetting::Full => ExecMode::Full,
        },
        approval: match cfg.approval {
            ApprovalSetting::Off => ApprovalMode::Off,
            ApprovalSetting::OnMiss => ApprovalMode::OnMiss,
            ApprovalSetting::Always => ApprovalMode::Always,
        },
        allowlist: cfg.allowlist.clone(),
    }
}

pub fn custom_spec(c: &CustomToolSettings) -> CustomToolSpec {
    CustomToolSpec {
        name: c.name.clone(),
        description: c.description.clone(),
        parameters: c.parameters.clone(),
        command: c.command.clone(),
        timeout_seconds: c.timeout.as_secs(),
        workdir: c.workdir.clone(),
    }
}

/// Everything the exec settings describe, ready to register.
#[derive(Clone)]
pub struct ExecToolset {
    pub guard: Arc<ExecGuard>,
    pub approvals: ApprovalBroker,
    pub processes: Arc<ProcessManager>,
    pub exec: Arc<ExecTool>,
    pub process: Arc<ProcessTool>,
    pub custom: Vec<Arc<CustomTool>>,
    /// The OS confinement of every command of this set.
    pub sandbox: Arc<Sandbox>,
}

impl std::fmt::Debug for ExecToolset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecToolset")
            .field("guard", &self.guard)
            .field("custom", &self.custom.len())
            .finish()
    }
}

/// Names custom tools may not take (they would replace a built-in tool).
const RESERVED: &[&str] = &[
    "read",
    "write",
    "edit",
    "ls",
    "glob",
    "grep",
    "exec",
    "bash",
    "process",
    "apply_patch",
    "web_fetch",
    "web_search",
    "memory_search",
    "memory_get",
    "sessions_list",
    "sessions_history",
    "sessions_send",
    "sessions_spawn",
    "session_status",
];

impl ExecToolset {
    /// A fresh process manager and approval broker (loading the allowlist from `home`).
    pub fn new(cfg: &ExecSettings, home: &Path) -> Result<Self, ExecSetupError> {
        let allowlist = ExecAllowlist::load(ExecAllowlist::path_in_home(home))
            .map_err(ExecSetupError::Allowlist)?;
        let broker = ApprovalBroker::new(
            Arc::new(allowlist),
            cfg.approval_timeout.max(Duration::from_secs(1)),
        );
        let processes = Arc::new(
            ProcessManager::with_buffer_bytes(cfg.background_buffer_bytes)
                .with_max_running(cfg.max_background_per_session),
        );
        Self::with_shared(cfg, processes, broker)
    }

    /// Uses a gateway-wide process manager and broker (several agents, one of each).
    pub fn with_shared(
        cfg: &ExecSettings,
        processes: Arc<ProcessManager>,
        approvals: ApprovalBroker,
    ) -> Result<Self, ExecSetupError> {
        // Loading refused these already; settings built by hand get the same refusal.
        for (name, _) in &cfg.sandbox.env {
            if let Some(why) = ferroclaw_config::forbidden_child_env(name) {
                return Err(ExecSetupError::Env(format!(
                    "`{name}` cannot be passed to commands: {why}"
                )));
            }
        }
        let sandbox = Arc::new(Sandbox::new(&cfg.sandbox));
        log_sandbox(&sandbox);
        let guard = Arc::new(ExecGuard::new(exec_policy(cfg)).with_approvals(approvals.clone()));
        let exec = Arc::new(
            ExecTool::new()
                .with_sandbox(sandbox.clone())
                .with_guard(guard.clone())
                .with_process_manager(processes.clone())
                .with_default_timeout(cfg.timeout.max(Duration::from_secs(1)))
                .with_max_output(cfg.max_output_chars),
        );
        let mut custom: Vec<Arc<CustomTool>> = Vec::new();
        for c in &cfg.custom {
            if RESERVED.contains(&c.name.as_str()) || custom.iter().any(|t| t.spec().name == c.name)
            {
                return Err(ExecSetupError::DuplicateName(c.name.clone()));
            }
            custom.push(Arc::new(
                CustomTool::new(custom_spec(c), guard.clone())?
                    .with_sandbox(sandbox.clone())
                    .with_max_output(cfg.max_output_chars),
            ));
        }
        Ok(Self {
            guard,
            approvals,
            process: Arc::new(ProcessTool::new(processes.clone())),
            processes,
            exec,
            custom,
            sandbox,
        })
    }

    /// `exec`, `process`, then the custom tools. Registering `exec` replaces the core one.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        let mut v: Vec<Arc<dyn Tool>> = vec![self.exec.clone(), self.process.clone()];
        v.extend(self.custom.iter().map(|t| t.clone() as Arc<dyn Tool>));
        v
    }
}

/// Once per tool set: loud when commands run unconfined or cannot run at all.
fn log_sandbox(sandbox: &Sandbox) {
    let line = sandbox.describe();
    match sandbox.backend() {
        Ok(SandboxBackend::Bwrap | SandboxBackend::Landlock) => {
            tracing::info!(target: "security.sandbox", "{line}")
        }
        Ok(SandboxBackend::Off) | Err(_) => tracing::warn!(target: "security.sandbox", "{line}"),
    }
}
