//! OS confinement of every command the tools start: `exec`, background processes and
//! custom tools all spawn through [`Sandbox::spawn`], so there is one `sh -c` setup and
//! one way to kill what a command started.
//!
//! Backends, chosen by `tools.exec.sandbox` (`auto` takes the first that works): bubblewrap
//! ([`bwrap`]) or Landlock ([`landlock`]). With neither, commands are refused unless the
//! operator wrote `sandbox: "off"`. Whatever the backend, a command gets an allowlisted
//! environment ([`env`]), rlimits ([`limits`]) and, where a writable cgroup hierarchy
//! exists, a cgroup of its own bounding its process count and memory ([`cgroup`]).

mod bwrap;
mod cgroup;
mod env;
mod landlock;
mod limits;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use ferroclaw_config::settings::{ExecLimitsSettings, SandboxMode, SandboxSettings};

use crate::path_guard::DeniedPaths;
use crate::ToolContext;

/// Secrets under the real home directory that no command may see. `~/.cargo/bin` and
/// `~/.rustup` stay visible (tools), only cargo's credentials are hidden.
const HOST_SECRETS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".vault-token",
    ".password-store",
    ".config/gcloud",
    ".config/gh",
    ".claude",
    ".codex",
    ".config/claude",
    ".config/openai",
    ".gemini",
    ".ollama",
    ".huggingface",
    ".cache/huggingface/token",
    ".terraform.d",
    ".config/doctl",
    ".config/hub",
    ".local/share/keyrings",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".psql_history",
    ".mysql_history",
    ".node_repl_history",
    ".lesshst",
    ".viminfo",
];

/// Which confinement a command runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxBackend {
    Bwrap,
    Landlock,
    /// Unconfined, because the operator set `sandbox: "off"`.
    Off,
}

/// The confinement settings of one tool set (see the module docs).
#[derive(Debug, Clone)]
pub struct Sandbox {
    /// `Err`: no usable backend; every spawn is refused with this explanation.
    backend: Result<SandboxBackend, String>,
    network: bool,
    env: Vec<(OsString, OsString)>,
    limits: ExecLimitsSettings,
}

impl Default for Sandbox {
    fn default() -> Self {
        Self::new(&SandboxSettings::default())
    }
}

/// What a child needs to see: the workspace, and what to hide around it.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) workspace: PathBuf,
    pub(crate) hidden: Vec<PathBuf>,
}

impl Sandbox {
    /// Resolves the backend (probing bubblewrap and Landlock once per process).
    pub fn new(cfg: &SandboxSettings) -> Self {
        let backend = match cfg.mode {
            SandboxMode::Off => Ok(SandboxBackend::Off),
            SandboxMode::Bwrap => bwrap::probe()
                .as_ref()
                .map(|_| SandboxBackend::Bwrap)
                .map_err(|e| unavailable(&format!("tools.exec.sandbox is \"bwrap\" but {e}"))),
            SandboxMode::Landlock => landlock::abi()
                .map(|_| SandboxBackend::Landlock)
                .map_err(|e| unavailable(&format!("tools.exec.sandbox is \"landlock\" but {e}"))),
            SandboxMode::Auto => match (bwrap::probe(), landlock::abi()) {
                (Ok(_), _) => Ok(SandboxBackend::Bwrap),
                (Err(_), Ok(_)) => Ok(SandboxBackend::Landlock),
                (Err(b), Err(l)) => Err(unavailable(&format!("{b}, and {l}"))),
            },
        };
        Self {
            backend,
            network: cfg.network,
            env: cfg.env.iter().map(|(k, v)| (k.into(), v.into())).collect(),
            limits: cfg.limits,
        }
    }

    /// Adds variables to the child environment (same refusals as `tools.exec.env`).
    pub fn with_env(mut self, vars: Vec<(OsString, OsString)>) -> Self {
        self.env.extend(vars);
        self
    }

    /// The active backend, or why there is none.
    pub fn backend(&self) -> Result<SandboxBackend, String> {
        self.backend.clone()
    }

    pub fn network(&self) -> bool {
        self.network
    }

    /// One line for `doctor` and the start-up log: backend, what it confines, what not.
    pub fn describe(&self) -> String {
        let net = if self.network {
            "network allowed"
        } else {
            "no network"
        };
        let l = &self.limits;
        let limits = format!(
            "limits: {} s CPU, {} MB memory, {} processes, {} MB files; {}",
            l.cpu_seconds,
            l.memory_mb,
            l.max_processes,
            l.file_size_mb,
            cgroup::describe()
        );
        match &self.backend {
            Ok(SandboxBackend::Bwrap) => format!(
                "exec sandbox: bubblewrap (user, mount, pid, ipc, uts{} namespaces; read-only system, read-write workspace; ferroclaw home, other users, host secrets and denied paths hidden; {net}); {limits}",
                if self.network { "" } else { ", net" }
            ),
            Ok(SandboxBackend::Landlock) => {
                format!("exec sandbox: {}; {net}; {limits}", landlock::describe(self.network))
            }
            Ok(SandboxBackend::Off) => format!(
                "exec sandbox: OFF (tools.exec.sandbox: \"off\"): commands can read, write and signal anything the gateway can; {limits}"
            ),
            Err(e) => format!("exec sandbox: UNAVAILABLE, commands are refused: {e}"),
        }
    }

    /// Starts `sh -c command` in `dir` (inside `workspace`, canonical) confined for `ctx`.
    /// `extra_env` is added to the allowlisted environment.
    pub(crate) fn spawn(
        &self,
        ctx: &ToolContext,
        workspace: &Path,
        command: &str,
        dir: &Path,
        stdin_piped: bool,
        extra_env: &[(OsString, OsString)],
    ) -> Result<(tokio::process::Child, ChildGuard), String> {
        let backend = self.backend.clone()?;
        let target = Target {
            workspace: workspace.to_path_buf(),
            hidden: hidden_paths(ctx),
        };
        if backend == SandboxBackend::Landlock
            && target
                .hidden
                .iter()
                .any(|h| h.starts_with(workspace) && h != workspace && h.exists())
        {
            // Landlock only grants; it cannot take back a part of the writable workspace.
            return Err("the Landlock sandbox cannot hide the protected files that lie inside this workspace (e.g. a workspace that is the ferroclaw home); use a workspace outside the home, or install bubblewrap".into());
        }
        let private_tmp = match backend {
            SandboxBackend::Landlock => Some(make_private_tmp()?),
            _ => None,
        };
        let tmpdir = match (&private_tmp, backend) {
            (Some(t), _) => t.clone(),
            (None, SandboxBackend::Bwrap) => PathBuf::from("/tmp"),
            (None, _) => std::env::temp_dir(),
        };
        let mut extra = self.env.clone();
        extra.extend_from_slice(extra_env);
        let env = env::child_env(workspace, &tmpdir, &extra);

        let mut cmd = match backend {
            SandboxBackend::Bwrap => {
                let b = bwrap::probe().as_ref().map_err(Clone::clone)?;
                let mut c = tokio::process::Command::new(&b.path);
                c.args(b.args(self.network, &target, dir)).arg("sh");
                c
            }
            _ => tokio::process::Command::new("sh"),
        };
        cmd.arg("-c")
            .arg(command)
            .current_dir(dir)
            .env_clear()
            .envs(env)
            .stdin(if stdin_piped {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);

        let ruleset = match backend {
            SandboxBackend::Landlock => {
                let mut writable: Vec<&Path> = vec![workspace];
                if let Some(t) = &private_tmp {
                    writable.push(t);
                }
                Some(landlock::Ruleset::build(
                    self.network,
                    &writable,
                    &landlock_readable(&target),
                )?)
            }
            _ => None,
        };
        let cg = cgroup::Cgroup::create(
            self.limits.max_processes,
            self.limits.memory_mb.max(1).saturating_mul(1 << 20),
        );
        if cg.is_none() {
            tracing::debug!(target: "security.sandbox", "no pids cgroup: process count bounded by RLIMIT_NPROC only");
        }
        let join: Vec<i32> = cg.as_ref().map(|c| c.join_fds()).unwrap_or_default();
        let rlimits = limits::Rlimits::new(&self.limits);
        // SAFETY: the closure only makes async-signal-safe system calls (setsid, write,
        // setrlimit, unshare, prctl, landlock_restrict_self) on values prepared above.
        unsafe {
            cmd.pre_exec(move || {
                // New session and process group: no controlling terminal to inject into,
                // and one group id (the child's pid) to kill.
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                for fd in &join {
                    // "0" is the writing process itself.
                    if libc::write(*fd, b"0".as_ptr().cast(), 1) != 1 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                rlimits.apply()?;
                if let Some(r) = &ruleset {
                    r.enforce()?;
                }
                Ok(())
            });
        }
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                if let Some(t) = &private_tmp {
                    let _ = std::fs::remove_dir_all(t);
                }
                return Err(format!("cannot start the sandboxed shell: {e}"));
            }
        };
        let pid = child
            .id()
            .ok_or_else(|| "the shell exited before it could be tracked".to_string())?;
        Ok((
            child,
            ChildGuard {
                pid,
                cgroup: Mutex::new(cg),
                tmp: Mutex::new(private_tmp),
            },
        ))
    }
}

fn unavailable(why: &str) -> String {
    format!(
        "no OS sandbox is available for commands ({why}). Install bubblewrap (e.g. `apt-get install bubblewrap`) or use a kernel with Landlock; to run commands unconfined anyway, set tools.exec.sandbox: \"off\""
    )
}

/// The ferroclaw home and denied paths of this call, other users' workspaces, the real
/// home's secrets; canonical forms too, so a symlinked spelling hides the real place.
fn hidden_paths(ctx: &ToolContext) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = DeniedPaths::current()
        .paths()
        .map(Path::to_path_buf)
        .collect();
    if let Some(u) = &ctx.user {
        v.push(u.root_workspace.clone());
    }
    if let Some(home) = real_home() {
        v.extend(HOST_SECRETS.iter().map(|s| home.join(s)));
    }
    let canon: Vec<PathBuf> = v
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    v.extend(canon);
    v.sort();
    v.dedup();
    v
}

fn real_home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// System directories and the tool directories on PATH; nothing under a hidden path.
fn landlock_readable(target: &Target) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = [
        "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc",
        "/dev", "/sys",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    let home = real_home();
    if let Some(h) = &home {
        v.push(h.join(".rustup"));
        v.push(h.join(".cargo/bin"));
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
            // A tool manager under the home (pyenv, nvm, …) keeps its versions next to its shims.
            let grant = match &home {
                Some(h) if dir.starts_with(h) && !dir.starts_with(h.join(".cargo")) => dir
                    .strip_prefix(h)
                    .ok()
                    .and_then(|r| r.components().next())
                    .map(|c| h.join(c))
                    .unwrap_or(dir),
                _ => dir,
            };
            v.push(grant);
        }
    }
    v.retain(|p| {
        p.is_absolute()
            && p != Path::new("/")
            && home.as_ref() != Some(p)
            && !target.hidden.iter().any(|h| p.starts_with(h))
    });
    v
}

fn make_private_tmp() -> Result<PathBuf, String> {
    static SEQ: AtomicU64 = AtomicU64::new(1);
    let dir = std::env::temp_dir().join(format!(
        "ferroclaw-sbx-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("cannot create a private temporary directory: {e}"))?;
    Ok(dir)
}

/// What a spawned command leaves to clean up: its process group, its cgroup, its private
/// temporary directory. Dropping it (or [`ChildGuard::finish`]) kills whatever is left.
#[derive(Debug)]
pub(crate) struct ChildGuard {
    pid: u32,
    cgroup: Mutex<Option<cgroup::Cgroup>>,
    tmp: Mutex<Option<PathBuf>>,
}

impl ChildGuard {
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// SIGKILL to the process group and to everything in the cgroup (which also catches
    /// processes that left the group). bubblewrap's pid namespace dies with its first
    /// process, so the group kill alone ends a bwrap sandbox.
    pub(crate) fn kill(&self) {
        if self.pid > 0 && self.pid <= i32::MAX as u32 {
            // SAFETY: killpg has no memory-safety preconditions; ESRCH is ignored.
            unsafe {
                libc::killpg(self.pid as i32, libc::SIGKILL);
            }
        }
        // One pass, no waiting: this runs on async threads. Whatever is still forking
        // is killed to the last by the cgroup's own clean-up thread when it is dropped.
        if let Some(cg) = lock(&self.cgroup).as_ref() {
            cg.kill_all(Duration::ZERO);
        }
    }

    /// Notes on limits the command ran into (read before [`ChildGuard::finish`]).
    pub(crate) fn limit_notes(&self) -> Vec<String> {
        lock(&self.cgroup)
            .as_ref()
            .map(|c| c.limit_notes())
            .unwrap_or_default()
    }

    /// The command has ended: kill what it left running and release its resources.
    pub(crate) fn finish(&self) {
        self.kill();
        lock(&self.cgroup).take();
        if let Some(t) = lock(&self.tmp).take() {
            // Usually empty (bubblewrap mounts a tmpfs over it): one rmdir, done now, so
            // a process that exits right after its command leaves nothing behind. A tree
            // left by Landlock-confined commands is disk work: off the async threads.
            if std::fs::remove_dir(&t).is_err() {
                match tokio::runtime::Handle::try_current() {
                    Ok(rt) => drop(rt.spawn_blocking(move || std::fs::remove_dir_all(t))),
                    Err(_) => {
                        let _ = std::fs::remove_dir_all(t);
                    }
                }
            }
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.finish();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The sandbox of [`SandboxSettings::default`], probed once and shared by tools built
/// without a configuration.
pub fn default_sandbox() -> Arc<Sandbox> {
    static S: OnceLock<Arc<Sandbox>> = OnceLock::new();
    S.get_or_init(|| Arc::new(Sandbox::default())).clone()
}

/// Whether a command's process count is bounded as a whole (a writable pids cgroup
/// exists). Without one, a fork bomb run by root is bounded by nothing.
pub fn process_limit_enforced() -> bool {
    cgroup::pids_available()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn without_a_backend_commands_are_refused_with_the_fix() {
        let ws = tempfile::tempdir().unwrap();
        let s = Sandbox {
            backend: Err(unavailable(
                "bwrap is not installed, and Landlock is not enabled",
            )),
            ..Sandbox::default()
        };
        let ctx = ToolContext {
            agent_id: "a".into(),
            session_key: "s".into(),
            workspace: ws.path().to_path_buf(),
            cancel: tokio_util::sync::CancellationToken::new(),
            user: None,
            acting_user: None,
            group_chat: false,
            progress: Default::default(),
            run_id: String::new(),
        };
        let e = s
            .spawn(&ctx, ws.path(), "touch ran", ws.path(), false, &[])
            .unwrap_err();
        assert!(e.contains("no OS sandbox"), "{e}");
        assert!(e.contains("apt-get install bubblewrap"), "{e}");
        assert!(e.contains("tools.exec.sandbox: \"off\""), "{e}");
        assert!(!ws.path().join("ran").exists());
        assert!(s.describe().contains("UNAVAILABLE"), "{}", s.describe());
    }

    #[test]
    fn hidden_paths_cover_host_secrets_and_other_users() {
        let ctx = ToolContext {
            agent_id: "a".into(),
            session_key: "s".into(),
            workspace: PathBuf::from("/srv/ws/user_a"),
            cancel: tokio_util::sync::CancellationToken::new(),
            user: Some(crate::ToolUser {
                id: "a".into(),
                root_workspace: PathBuf::from("/srv/ws"),
            }),
            acting_user: None,
            group_chat: false,
            progress: Default::default(),
            run_id: String::new(),
        };
        let hidden = hidden_paths(&ctx);
        assert!(hidden.contains(&PathBuf::from("/srv/ws")));
        if let Some(home) = real_home() {
            assert!(hidden.contains(&home.join(".ssh")));
            assert!(!hidden.contains(&home.join(".cargo/bin")));
        }
    }
}
