//! `exec`: run a shell command in the workspace.
//!
//! The command runs as `sh -c` inside the OS sandbox ([`crate::sandbox`]), in its own
//! session, process group and (where possible) cgroup, so that a time-out or an abort kills
//! everything it started, not just the shell; when the shell ends, whatever it left
//! running is killed too (long-lived work belongs in `background: true`). Output is read
//! from the pipes until they close; because a process that escaped could hold them open
//! for ever, reading stops a short grace period after the shell has ended.
//!
//! Before anything runs, the command goes through the [`ExecGuard`] (deny patterns, mode,
//! approval). `background: true` starts it under the [`ProcessManager`] and returns its id
//! at once; `yieldMs` runs it in the foreground for that long and, if it is still running,
//! leaves it in the background and returns the output so far with its id.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;

use super::{optional_bool, optional_f64, optional_str, optional_u64, required_str, Workspace};
use crate::exec_guard::ExecGuard;
use crate::process::{ProcessManager, ProcessStatus, SpawnSpec};
use crate::sandbox::{default_sandbox, Sandbox};
use crate::{Tool, ToolContext, ToolResult};

/// Default output budget in characters (head and tail are kept, the middle dropped).
pub const DEFAULT_MAX_OUTPUT: usize = 100_000;
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
pub const MAX_TIMEOUT_SECS: f64 = 1_800.0;
/// How long we keep reading after the shell is gone. Not a synchronisation point: a
/// bound, so that a stray process holding the pipe cannot hang the tool.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

pub struct ExecTool {
    /// Added to the sandbox's allowlisted environment (credential-looking names refused).
    env: Vec<(OsString, OsString)>,
    sandbox: Arc<Sandbox>,
    max_output: usize,
    default_timeout: Duration,
    guard: Arc<ExecGuard>,
    /// Needed for `background` / `yieldMs`; without it those are refused with a clear error.
    processes: Option<Arc<ProcessManager>>,
}

impl Default for ExecTool {
    fn default() -> Self {
        Self::new()
    }
}

impl ExecTool {
    /// Deny-pattern guard (the default policy), no background processes.
    pub fn new() -> Self {
        Self {
            env: Vec::new(),
            sandbox: default_sandbox(),
            max_output: DEFAULT_MAX_OUTPUT,
            default_timeout: DEFAULT_TIMEOUT,
            guard: Arc::new(ExecGuard::default()),
            processes: None,
        }
    }

    /// Adds `vars` to the allowlisted child environment (credential-looking and
    /// `FERROCLAW_*` names are still refused), like `tools.exec.env`.
    pub fn with_env<K, V>(vars: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<OsString>,
        V: Into<OsString>,
    {
        Self {
            env: vars
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            ..Self::new()
        }
    }

    /// The guard every command passes first (mode, deny patterns, approvals).
    pub fn with_guard(mut self, guard: Arc<ExecGuard>) -> Self {
        self.guard = guard;
        self
    }

    /// Enables `background` and `yieldMs`; share the manager with [`crate::process::ProcessTool`].
    pub fn with_process_manager(mut self, manager: Arc<ProcessManager>) -> Self {
        self.processes = Some(manager);
        self
    }

    /// Time-out used when the model gives none (capped at [`MAX_TIMEOUT_SECS`]).
    pub fn with_default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = timeout.min(Duration::from_secs_f64(MAX_TIMEOUT_SECS));
        self
    }

    /// Output budget in characters.
    pub fn with_max_output(mut self, chars: usize) -> Self {
        self.max_output = chars.max(2);
        self
    }

    /// The OS confinement every command runs under (default: `tools.exec` defaults).
    pub fn with_sandbox(mut self, sandbox: Arc<Sandbox>) -> Self {
        self.sandbox = sandbox;
        self
    }
}

/// Whether an environment variable name looks like it carries a credential. The agent's
/// commands must not be able to read the gateway's own keys with `env`.
pub fn is_secret_env_name(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    n == "FERROCLAW_GATEWAY_TOKEN"
        || n == "TOKEN"
        || n.ends_with("_TOKEN")
        || n.ends_with("_API_KEY")
        || n == "API_KEY"
        || n.ends_with("APIKEY")
        || n.contains("SECRET")
        || n.contains("PASSWORD")
        || n.contains("PASSWD")
        || n.contains("PRIVATE_KEY")
        || n.contains("ACCESS_KEY")
        || n.contains("CREDENTIAL")
        || n.contains("DATABASE_URL")
        || n.ends_with("_DSN")
}

#[async_trait]
impl Tool for ExecTool {
    fn name(&self) -> &str {
        "exec"
    }

    fn aliases(&self) -> &[&str] {
        &["bash"]
    }

    fn description(&self) -> &str {
        "Run a shell command (sh -c) in the workspace and return its combined stdout and stderr and exit code. Default time-out 120 s (max 1800). For long-running commands use background: true (returns a process id at once) or yieldMs (runs in the foreground that long, then continues in the background); read their output with the process tool. Dangerous commands are refused."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "Shell command to run."},
                "workdir": {"type": "string", "description": "Working directory, relative to the workspace (default: the workspace root)."},
                "timeout": {"type": "number", "description": "Time-out in seconds (default 120, maximum 1800). Background processes have none unless given."},
                "background": {"type": "boolean", "description": "Start in the background and return a process id immediately."},
                "yieldMs": {"type": "integer", "description": "Run in the foreground up to this many milliseconds, then continue in the background."}
            },
            "required": ["command"]
        })
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> ToolResult {
        let ws = match Workspace::of(ctx) {
            Ok(ws) => ws,
            Err(e) => return e,
        };
        let (command, workdir, timeout_arg, background, yield_ms) = match (
            required_str(&args, &["command", "cmd"]),
            optional_str(&args, &["workdir", "cwd", "working_dir"]),
            optional_f64(&args, &["timeout", "timeout_seconds"]),
            optional_bool(&args, &["background", "run_in_background"]),
            optional_u64(&args, &["yieldMs", "yield_ms"]),
        ) {
            (Ok(c), Ok(w), Ok(t), Ok(b), Ok(y)) => (c, w, t, b.unwrap_or(false), y),
            (Err(e), ..)
            | (_, Err(e), ..)
            | (_, _, Err(e), ..)
            | (.., Err(e), _)
            | (.., Err(e)) => return e,
        };
        if command.trim().is_empty() {
            return ToolResult::error("command is empty");
        }
        let mut notes = Vec::new();
        let timeout = match timeout_arg {
            None => self.default_timeout,
            Some(t) if t <= 0.0 => {
                return ToolResult::error(format!(
                    "timeout must be a positive number of seconds (at most {MAX_TIMEOUT_SECS}), got {t}"
                ))
            }
            Some(t) if t > MAX_TIMEOUT_SECS => {
                notes.push(format!("[timeout {t} s was capped at {MAX_TIMEOUT_SECS} s]"));
                Duration::from_secs_f64(MAX_TIMEOUT_SECS)
            }
            Some(t) => Duration::from_secs_f64(t),
        };
        let dir = match workdir {
            None => ws.root().to_path_buf(),
            Some(w) => match ws.resolve(w) {
                Ok(p) if p.is_dir() => p,
                Ok(p) => {
                    return ToolResult::error(format!(
                        "workdir {} is not an existing directory in the workspace",
                        ws.display(&p)
                    ))
                }
                Err(e) => return e,
            },
        };
        // A person deciding on an approval is not the run stalling.
        let waiting = ctx.progress.hold();
        let authorized = self
            .guard
            .authorize(ctx.session_display(), &ctx.agent_id, command)
            .await;
        drop(waiting);
        if let Err(denied) = authorized {
            return ToolResult::error(format!("{denied}. The command was not run."));
        }

        if background || yield_ms.is_some() {
            let Some(manager) = &self.processes else {
                return ToolResult::error(
                    "background processes are not enabled for this agent; run the command in the foreground",
                );
            };
            let spec = SpawnSpec {
                command: command.to_string(),
                dir,
                workspace: ws.root().to_path_buf(),
                sandbox: self.sandbox.clone(),
                ctx: ctx.clone(),
                env: self.env.clone(),
                // Background work has no time-out unless the model asked for one.
                timeout: timeout_arg.map(|_| timeout),
            };
            return match yield_ms {
                Some(ms) if !background => {
                    self.run_yielding(manager, ctx, spec, Duration::from_millis(ms))
                        .await
                }
                _ => start_background(manager, ctx, spec),
            };
        }
        run_foreground(
            &self.sandbox,
            &self.env,
            ws.root(),
            command,
            &dir,
            timeout,
            self.max_output,
            ctx,
            notes,
        )
        .await
    }
}

fn start_background(manager: &ProcessManager, ctx: &ToolContext, spec: SpawnSpec) -> ToolResult {
    match manager.spawn(&ctx.session_key, spec) {
        Ok(info) => ToolResult::ok(format!(
            "Started background process {id} (pid {pid}). Read its output with process {{action: \"poll\", sessionId: \"{id}\"}}; stop it with action \"kill\".",
            id = info.id,
            pid = info.pid
        )),
        Err(e) => ToolResult::error(e.to_string()),
    }
}

impl ExecTool {
    /// Foreground for up to `yield_for`; then the process stays in the background.
    async fn run_yielding(
        &self,
        manager: &ProcessManager,
        ctx: &ToolContext,
        spec: SpawnSpec,
        yield_for: Duration,
    ) -> ToolResult {
        let info = match manager.spawn(&ctx.session_key, spec) {
            Ok(i) => i,
            Err(e) => return ToolResult::error(e.to_string()),
        };
        let session = ctx.session_key.as_str();
        // Until it is handed to the background, an abort (or this future being dropped)
        // kills it like a foreground command.
        let mut guard = YieldGuard {
            manager,
            session,
            id: &info.id,
            armed: true,
        };
        let status = tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => None,
            s = manager.wait(session, &info.id, Some(yield_for)) => s.ok(),
        };
        let Some(status) = status else {
            drop(guard);
            return ToolResult::error(
                "Command aborted: the run was cancelled and the command was killed together with the processes it started.",
            );
        };
        guard.armed = false;
        let output = match manager.poll(session, &info.id, None).await {
            Ok(p) => p.output,
            Err(e) => return ToolResult::error(e.to_string()),
        };
        let mut buf = OutputBuffer::new(self.max_output);
        buf.push(output.as_bytes());
        let text = buf.render();
        match status {
            ProcessStatus::Running => ToolResult::ok(format!(
                "{text}\n[still running after {} ms; continuing in the background as process {id}. Read more with process {{action: \"poll\", sessionId: \"{id}\"}}]",
                yield_for.as_millis(),
                id = info.id
            )),
            done => {
                // Finished within the yield: nothing left to manage.
                let _ = manager.remove(session, &info.id);
                match done {
                    ProcessStatus::Exited { code: 0 } => ToolResult::ok(format!("{text}\n[exit code: 0]")),
                    ProcessStatus::Exited { code } => ToolResult::error(format!("{text}\n[exit code: {code}]")),
                    ProcessStatus::TimedOut => ToolResult::error(format!(
                        "Command timed out and was killed together with the processes it started.\n{text}"
                    )),
                    other => ToolResult::error(format!("{text}\n[{other}]")),
                }
            }
        }
    }
}

struct YieldGuard<'a> {
    manager: &'a ProcessManager,
    session: &'a str,
    id: &'a str,
    armed: bool,
}

impl Drop for YieldGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.manager.remove(self.session, self.id);
        }
    }
}

/// Runs `command` with `sh -c` in the sandbox and waits for it (or the time-out, or
/// `ctx.cancel`). Shared with custom tools.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_foreground(
    sandbox: &Sandbox,
    extra_env: &[(OsString, OsString)],
    workspace: &std::path::Path,
    command: &str,
    dir: &std::path::Path,
    timeout: Duration,
    max_output: usize,
    ctx: &ToolContext,
    notes: Vec<String>,
) -> ToolResult {
    // Dropping the guard (this future dropped, e.g. the registry's abort won the race)
    // kills everything the command started.
    let (mut child, group) = match sandbox.spawn(ctx, workspace, command, dir, false, extra_env) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(target: "security.sandbox", "command refused: {e}");
            return ToolResult::error(format!("The command was not run: {e}"));
        }
    };
    let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return ToolResult::error("cannot capture the command's output");
    };

    let mut output = OutputBuffer::new(max_output);
    let mut out_buf = [0u8; 8192];
    let mut err_buf = [0u8; 8192];
    let (mut out_open, mut err_open) = (true, true);
    let mut status = None;
    let mut ended: Option<Ending> = None;
    let mut drain_cut = false;
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    // Armed (reset) once the shell has exited or been killed.
    let drain = tokio::time::sleep(Duration::from_secs(86_400));
    tokio::pin!(drain);
    let mut draining = false;

    while out_open || err_open || status.is_none() {
        tokio::select! {
            r = stdout.read(&mut out_buf), if out_open => match r {
                Ok(n) if n > 0 => {
                    ctx.progress.tick();
                    output.push(&out_buf[..n]);
                }
                _ => out_open = false,
            },
            r = stderr.read(&mut err_buf), if err_open => match r {
                Ok(n) if n > 0 => {
                    ctx.progress.tick();
                    output.push(&err_buf[..n]);
                }
                _ => err_open = false,
            },
            s = child.wait(), if status.is_none() => {
                // What the shell left running ends with it; the pipes then close.
                group.kill();
                status = Some(s);
                draining = true;
                drain.as_mut().reset(tokio::time::Instant::now() + DRAIN_GRACE);
            }
            _ = &mut deadline, if ended.is_none() && status.is_none() => {
                group.kill();
                ended = Some(Ending::TimedOut);
            }
            _ = ctx.cancel.cancelled(), if ended.is_none() && status.is_none() => {
                group.kill();
                ended = Some(Ending::Cancelled);
            }
            _ = &mut drain, if draining => {
                drain_cut = true;
                break;
            }
        }
    }
    let limit_notes = group.limit_notes();
    group.finish();

    let mut text = output.render();
    for note in limit_notes {
        text.push('\n');
        text.push_str(&note);
    }
    if drain_cut {
        text.push_str(
                "\n[output may be incomplete: a background process kept the output open; redirect its output to a file]",
            );
    }
    for note in notes {
        text.push('\n');
        text.push_str(&note);
    }
    let secs = timeout.as_secs_f64();
    match (ended, status) {
            (Some(Ending::TimedOut), _) => ToolResult::error(format!(
                "Command timed out after {secs} s and was killed together with the processes it started.\n{text}"
            )),
            (Some(Ending::Cancelled), _) => ToolResult::error(format!(
                "Command aborted: the run was cancelled and the command was killed together with the processes it started.\n{text}"
            )),
            (None, Some(Ok(st))) => match st.code() {
                Some(0) => ToolResult::ok(format!("{text}\n[exit code: 0]")),
                Some(code) => ToolResult::error(format!("{text}\n[exit code: {code}]")),
                None => {
                    use std::os::unix::process::ExitStatusExt;
                    let sig = st.signal().unwrap_or(0);
                    ToolResult::error(format!("{text}\n[killed by signal {sig}]"))
                }
            },
            (None, Some(Err(e))) => ToolResult::error(format!("{text}\n[cannot get the exit status: {e}]")),
            // The loop only ends without a status through `drain`, which needs a status.
            (None, None) => ToolResult::error(format!("{text}\n[the command's exit status is unknown]")),
        }
}

#[derive(Clone, Copy)]
enum Ending {
    TimedOut,
    Cancelled,
}

/// Keeps the first and last halves of the budget and counts what falls in between, so that
/// memory stays bounded however much a command prints.
struct OutputBuffer {
    half: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    dropped: usize,
}

impl OutputBuffer {
    fn new(max_chars: usize) -> Self {
        Self {
            half: max_chars / 2,
            head: Vec::new(),
            tail: VecDeque::new(),
            dropped: 0,
        }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        if self.head.len() < self.half {
            let take = bytes.len().min(self.half - self.head.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        self.tail.extend(bytes);
        if self.tail.len() > self.half {
            let excess = self.tail.len() - self.half;
            self.tail.drain(..excess);
            self.dropped += excess;
        }
    }

    fn render(self) -> String {
        if self.head.is_empty() {
            return "(no output)".to_string();
        }
        let mut head = self.head;
        let tail: Vec<u8> = self.tail.into();
        if self.dropped == 0 {
            head.extend_from_slice(&tail);
            return String::from_utf8_lossy(&head).into_owned();
        }
        // Trim cut UTF-8 sequences at the seams instead of showing replacement characters.
        let head_end = match std::str::from_utf8(&head) {
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            _ => head.len(),
        };
        let tail_start = tail
            .iter()
            .take(4)
            .take_while(|b| (**b & 0xC0) == 0x80)
            .count();
        format!(
            "{}\n\n[... {} bytes of output omitted ...]\n\n{}",
            String::from_utf8_lossy(&head[..head_end]),
            self.dropped,
            String::from_utf8_lossy(&tail[tail_start..])
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names() {
        for n in [
            "OPENAI_API_KEY",
            "FERROCLAW_GATEWAY_TOKEN",
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "DB_PASSWORD",
            "client_secret",
        ] {
            assert!(is_secret_env_name(n), "{n}");
        }
        for n in ["PATH", "HOME", "LANG", "TERM", "FERROCLAW_HOME"] {
            assert!(!is_secret_env_name(n), "{n}");
        }
    }

    #[test]
    fn output_buffer_keeps_head_and_tail() {
        let mut b = OutputBuffer::new(10);
        for i in 0..100u8 {
            b.push(&[b'a' + (i % 26)]);
        }
        let s = b.render();
        assert!(s.starts_with("abcde"), "{s}");
        assert!(s.contains("90 bytes of output omitted"), "{s}");
        assert!(s.ends_with("rstuv"), "{s}");
    }

    #[test]
    fn output_buffer_small_is_verbatim() {
        let mut b = OutputBuffer::new(100);
        b.push(b"hello ");
        b.push(b"world");
        assert_eq!(b.render(), "hello world");
    }
}
