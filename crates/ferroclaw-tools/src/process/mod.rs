//! Background processes started by `exec {background: true}` or `exec {yieldMs}`.
//!
//! Each process runs `sh -c` in the OS sandbox ([`crate::sandbox`]) with piped stdin,
//! stdout and stderr.
//! A task per process copies the output into a capped ring buffer (1 MB by default: old
//! output is dropped first, and offsets stay absolute so readers can tell) and records the
//! exit status. Processes belong to the session that started them: every lookup takes the
//! caller's session key, and a process of another session is reported exactly like one
//! that does not exist. [`ProcessManager::kill_session`] (session deleted),
//! [`ProcessManager::kill_all`] (gateway shutdown) and dropping the manager kill the
//! whole process group.

mod tool;

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::ChildStdin;
use tokio::sync::watch;

pub use tool::ProcessTool;

/// Default output kept per process.
pub const DEFAULT_BUFFER_BYTES: usize = 1 << 20;
/// Running processes one session may have at once, unless configured
/// (`tools.exec.max_background_per_session`).
pub const MAX_RUNNING_PER_SESSION: usize = 16;
/// Finished processes kept per session for `list`/`log` (oldest forgotten first).
const MAX_FINISHED_PER_SESSION: usize = 32;
/// How long output is still read after the shell exited (a stray child may hold the pipe).
const DRAIN_GRACE: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ProcessStatus {
    Running,
    Exited { code: i32 },
    Signaled { signal: i32 },
    Killed,
    TimedOut,
    Failed { error: String },
}

impl ProcessStatus {
    pub fn is_running(&self) -> bool {
        matches!(self, Self::Running)
    }
}

impl std::fmt::Display for ProcessStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Running => f.write_str("running"),
            Self::Exited { code } => write!(f, "exited with code {code}"),
            Self::Signaled { signal } => write!(f, "killed by signal {signal}"),
            Self::Killed => f.write_str("killed"),
            Self::TimedOut => f.write_str("timed out and killed"),
            Self::Failed { error } => write!(f, "failed: {error}"),
        }
    }
}

/// What `list` shows about one process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessInfo {
    pub id: String,
    pub session_key: String,
    pub command: String,
    pub pid: u32,
    pub status: ProcessStatus,
    pub started_at_ms: u64,
    /// Bytes of output produced so far (including any dropped from the buffer).
    pub output_bytes: u64,
}

/// New output since the previous poll.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollResult {
    pub output: String,
    /// Bytes produced since the previous poll that the buffer no longer holds.
    pub dropped: u64,
    pub status: ProcessStatus,
}

/// What to start.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    pub command: String,
    pub dir: PathBuf,
    /// The canonical workspace `dir` lies in (the only writable place in the sandbox).
    pub workspace: PathBuf,
    pub sandbox: Arc<crate::sandbox::Sandbox>,
    /// The call that starts it (its user decides what else is hidden).
    pub ctx: crate::ToolContext,
    /// Added to the sandbox's allowlisted environment.
    pub env: Vec<(OsString, OsString)>,
    /// Kill the group after this long (`None`: run until it ends or is killed).
    pub timeout: Option<Duration>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProcessError {
    #[error("no process {0:?} in this session")]
    NotFound(String),
    #[error("this session already has {0} running processes; kill one first")]
    TooMany(usize),
    #[error("cannot start the process: {0}")]
    Spawn(String),
    #[error("process {0:?} is not running")]
    NotRunning(String),
    #[error("cannot write to the process: {0}")]
    Write(String),
}

/// Absolute byte offsets: `start` is the offset of the oldest byte still held.
struct Ring {
    buf: VecDeque<u8>,
    cap: usize,
    start: u64,
}

impl Ring {
    fn push(&mut self, bytes: &[u8]) {
        self.buf.extend(bytes);
        if self.buf.len() > self.cap {
            let excess = self.buf.len() - self.cap;
            self.buf.drain(..excess);
            self.start += excess as u64;
        }
    }

    fn end(&self) -> u64 {
        self.start + self.buf.len() as u64
    }

    fn since(&self, from: u64) -> (Vec<u8>, u64) {
        let from_abs = from.max(self.start);
        let dropped = from_abs - from;
        let skip = (from_abs - self.start) as usize;
        (self.buf.iter().skip(skip).copied().collect(), dropped)
    }
}

struct State {
    ring: Ring,
    status: ProcessStatus,
    poll_cursor: u64,
    killed: bool,
    timed_out: bool,
}

struct Proc {
    id: String,
    session_key: String,
    command: String,
    pid: u32,
    started_at_ms: u64,
    /// Kills the sandboxed group (and cgroup) and releases them when the process ends.
    group: crate::sandbox::ChildGuard,
    state: Mutex<State>,
    /// Bumped on every change of output or status; waiters watch it.
    version: watch::Sender<u64>,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
}

impl Proc {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn info(&self) -> ProcessInfo {
        let st = self.lock();
        ProcessInfo {
            id: self.id.clone(),
            session_key: self.session_key.clone(),
            command: self.command.clone(),
            pid: self.pid,
            status: st.status.clone(),
            started_at_ms: self.started_at_ms,
            output_bytes: st.ring.end(),
        }
    }

    fn bump(&self) {
        self.version.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// SIGKILL to the whole group, if the shell is still running.
    fn kill_group(&self) {
        let mut st = self.lock();
        if st.status.is_running() {
            st.killed = true;
            self.group.kill();
        }
    }

    /// Resolves once the status is final or `limit` passed; returns the status.
    async fn wait_done(&self, limit: Option<Duration>) -> ProcessStatus {
        let mut rx = self.version.subscribe();
        let wait = async {
            loop {
                {
                    let st = self.lock();
                    if !st.status.is_running() {
                        return st.status.clone();
                    }
                }
                if rx.changed().await.is_err() {
                    return self.lock().status.clone();
                }
            }
        };
        match limit {
            Some(d) => match tokio::time::timeout(d, wait).await {
                Ok(s) => s,
                Err(_) => self.lock().status.clone(),
            },
            None => wait.await,
        }
    }
}

/// All background processes of a gateway, by id.
pub struct ProcessManager {
    procs: Mutex<HashMap<String, Arc<Proc>>>,
    buffer_bytes: usize,
    max_running: usize,
    seq: AtomicU64,
}

impl std::fmt::Debug for ProcessManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessManager")
            .field("processes", &self.lock().len())
            .field("buffer_bytes", &self.buffer_bytes)
            .finish()
    }
}

impl Default for ProcessManager {
    fn default() -> Self {
        Self::new()
    }
}

impl ProcessManager {
    pub fn new() -> Self {
        Self::with_buffer_bytes(DEFAULT_BUFFER_BYTES)
    }

    pub fn with_buffer_bytes(bytes: usize) -> Self {
        Self {
            procs: Mutex::new(HashMap::new()),
            buffer_bytes: bytes.max(1024),
            max_running: MAX_RUNNING_PER_SESSION,
            seq: AtomicU64::new(1),
        }
    }

    /// Running processes one session may have at once (at least 1).
    pub fn with_max_running(mut self, n: usize) -> Self {
        self.max_running = n.max(1);
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Proc>>> {
        self.procs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get(&self, session_key: &str, id: &str) -> Result<Arc<Proc>, ProcessError> {
        self.lock()
            .get(id.trim())
            .filter(|p| p.session_key == session_key)
            .cloned()
            .ok_or_else(|| ProcessError::NotFound(id.trim().to_string()))
    }

    /// Starts a process for `session_key`. Must be called inside a Tokio runtime.
    pub fn spawn(&self, session_key: &str, spec: SpawnSpec) -> Result<ProcessInfo, ProcessError> {
        {
            let procs = self.lock();
            let running = procs
                .values()
                .filter(|p| p.session_key == session_key && p.lock().status.is_running())
                .count();
            if running >= self.max_running {
                return Err(ProcessError::TooMany(self.max_running));
            }
        }
        let (mut child, group) = spec
            .sandbox
            .spawn(
                &spec.ctx,
                &spec.workspace,
                &spec.command,
                &spec.dir,
                true,
                &spec.env,
            )
            .map_err(ProcessError::Spawn)?;
        let pid = group.pid();
        let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take())
        else {
            return Err(ProcessError::Spawn("cannot capture the output".into()));
        };
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let suffix = &uuid::Uuid::new_v4().simple().to_string()[..6];
        let id = format!("proc_{n}_{suffix}");
        let (version, _) = watch::channel(0u64);
        let proc = Arc::new(Proc {
            id: id.clone(),
            session_key: session_key.to_string(),
            command: spec.command.clone(),
            pid,
            started_at_ms: now_ms(),
            group,
            state: Mutex::new(State {
                ring: Ring {
                    buf: VecDeque::new(),
                    cap: self.buffer_bytes,
                    start: 0,
                },
                status: ProcessStatus::Running,
                poll_cursor: 0,
                killed: false,
                timed_out: false,
            }),
            version,
            stdin: tokio::sync::Mutex::new(child.stdin.take()),
        });
        let task_proc = Arc::clone(&proc);
        let timeout = spec.timeout;
        tokio::spawn(async move {
            let p = task_proc;
            let mut out_buf = [0u8; 8192];
            let mut err_buf = [0u8; 8192];
            let (mut out_open, mut err_open) = (true, true);
            let mut exit: Option<std::io::Result<std::process::ExitStatus>> = None;
            let deadline = tokio::time::sleep(timeout.unwrap_or(Duration::from_secs(86_400 * 365)));
            tokio::pin!(deadline);
            let drain = tokio::time::sleep(Duration::from_secs(86_400));
            tokio::pin!(drain);
            while out_open || err_open || exit.is_none() {
                tokio::select! {
                    r = stdout.read(&mut out_buf), if out_open => match r {
                        Ok(n) if n > 0 => { p.lock().ring.push(&out_buf[..n]); p.bump(); }
                        _ => out_open = false,
                    },
                    r = stderr.read(&mut err_buf), if err_open => match r {
                        Ok(n) if n > 0 => { p.lock().ring.push(&err_buf[..n]); p.bump(); }
                        _ => err_open = false,
                    },
                    s = child.wait(), if exit.is_none() => {
                        p.group.kill();
                        exit = Some(s);
                        drain.as_mut().reset(tokio::time::Instant::now() + DRAIN_GRACE);
                    }
                    _ = &mut deadline, if exit.is_none() && timeout.is_some() => {
                        p.lock().timed_out = true;
                        p.group.kill();
                    }
                    _ = &mut drain, if exit.is_some() => break,
                }
            }
            let status = {
                let st = p.lock();
                match exit {
                    _ if st.timed_out => ProcessStatus::TimedOut,
                    _ if st.killed => ProcessStatus::Killed,
                    Some(Ok(s)) => match s.code() {
                        Some(code) => ProcessStatus::Exited { code },
                        None => {
                            use std::os::unix::process::ExitStatusExt;
                            ProcessStatus::Signaled {
                                signal: s.signal().unwrap_or(0),
                            }
                        }
                    },
                    Some(Err(e)) => ProcessStatus::Failed {
                        error: e.to_string(),
                    },
                    None => ProcessStatus::Failed {
                        error: "exit status unknown".into(),
                    },
                }
            };
            let notes = p.group.limit_notes();
            if !notes.is_empty() {
                let mut st = p.lock();
                for n in notes {
                    st.ring.push(format!("\n{n}\n").as_bytes());
                }
            }
            // Whatever the shell left running ends with it, like a foreground command.
            p.group.finish();
            // Nobody can write to a finished process.
            p.stdin.lock().await.take();
            p.lock().status = status;
            p.bump();
        });
        let info = proc.info();
        let mut procs = self.lock();
        procs.insert(id, proc);
        prune_finished(&mut procs, session_key);
        Ok(info)
    }

    /// This session's processes, oldest first.
    pub fn list(&self, session_key: &str) -> Vec<ProcessInfo> {
        let mut v: Vec<ProcessInfo> = self
            .lock()
            .values()
            .filter(|p| p.session_key == session_key)
            .map(|p| p.info())
            .collect();
        v.sort_by_key(|i| (i.started_at_ms, seq_of(&i.id)));
        v
    }

    /// The most recently started process of the session.
    pub fn latest(&self, session_key: &str) -> Option<String> {
        self.list(session_key).pop().map(|i| i.id)
    }

    pub fn info(&self, session_key: &str, id: &str) -> Result<ProcessInfo, ProcessError> {
        Ok(self.get(session_key, id)?.info())
    }

    /// Output produced since the previous poll, and the status. With `wait`, waits up to
    /// that long for the process to finish first (returns as soon as it does).
    pub async fn poll(
        &self,
        session_key: &str,
        id: &str,
        wait: Option<Duration>,
    ) -> Result<PollResult, ProcessError> {
        let p = self.get(session_key, id)?;
        if let Some(w) = wait {
            p.wait_done(Some(w)).await;
        }
        let mut st = p.lock();
        let (bytes, dropped) = st.ring.since(st.poll_cursor);
        st.poll_cursor = st.ring.end();
        Ok(PollResult {
            output: String::from_utf8_lossy(&bytes).into_owned(),
            dropped,
            status: st.status.clone(),
        })
    }

    /// Buffered output as lines: `offset` lines skipped, at most `limit` returned.
    /// Returns the text, the index of the first returned line and the total line count.
    pub fn log(
        &self,
        session_key: &str,
        id: &str,
        offset: usize,
        limit: usize,
    ) -> Result<(String, usize, usize), ProcessError> {
        let p = self.get(session_key, id)?;
        let st = p.lock();
        let (bytes, _) = st.ring.since(st.ring.start);
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let total = lines.len();
        let from = offset.min(total);
        let out: String = lines[from..(from + limit).min(total)].concat();
        Ok((out, from, total))
    }

    /// Writes `data` to the process's stdin; `eof` closes it afterwards.
    pub async fn write(
        &self,
        session_key: &str,
        id: &str,
        data: &[u8],
        eof: bool,
    ) -> Result<(), ProcessError> {
        let p = self.get(session_key, id)?;
        let mut stdin = p.stdin.lock().await;
        let Some(pipe) = stdin.as_mut() else {
            return Err(ProcessError::NotRunning(p.id.clone()));
        };
        if !data.is_empty() {
            pipe.write_all(data)
                .await
                .map_err(|e| ProcessError::Write(e.to_string()))?;
            pipe.flush()
                .await
                .map_err(|e| ProcessError::Write(e.to_string()))?;
        }
        if eof {
            stdin.take();
        }
        Ok(())
    }

    /// Kills the process group and waits (bounded) for the final status.
    pub async fn kill(&self, session_key: &str, id: &str) -> Result<ProcessStatus, ProcessError> {
        let p = self.get(session_key, id)?;
        p.kill_group();
        Ok(p.wait_done(Some(Duration::from_secs(10))).await)
    }

    /// Waits until the process has finished (or `limit` passed) and returns its status.
    pub async fn wait(
        &self,
        session_key: &str,
        id: &str,
        limit: Option<Duration>,
    ) -> Result<ProcessStatus, ProcessError> {
        let p = self.get(session_key, id)?;
        Ok(p.wait_done(limit).await)
    }

    /// Forgets a process (killing it if it still runs).
    pub fn remove(&self, session_key: &str, id: &str) -> Result<(), ProcessError> {
        let p = self.get(session_key, id)?;
        p.kill_group();
        self.lock().remove(&p.id);
        Ok(())
    }

    /// Kills and forgets every process of a session (the session was deleted or reset).
    /// Returns how many were still running.
    pub fn kill_session(&self, session_key: &str) -> usize {
        let removed: Vec<Arc<Proc>> = {
            let mut procs = self.lock();
            let ids: Vec<String> = procs
                .values()
                .filter(|p| p.session_key == session_key)
                .map(|p| p.id.clone())
                .collect();
            ids.iter().filter_map(|id| procs.remove(id)).collect()
        };
        kill_each(removed)
    }

    /// Kills and forgets every process (gateway shutdown). Returns how many were running.
    pub fn kill_all(&self) -> usize {
        let removed: Vec<Arc<Proc>> = self.lock().drain().map(|(_, p)| p).collect();
        kill_each(removed)
    }
}

impl Drop for ProcessManager {
    fn drop(&mut self) {
        self.kill_all();
    }
}

fn kill_each(procs: Vec<Arc<Proc>>) -> usize {
    let mut running = 0;
    for p in procs {
        if p.lock().status.is_running() {
            running += 1;
            tracing::info!(process = %p.id, session = %p.session_key, "killing background process");
        }
        p.kill_group();
    }
    running
}

/// Keeps at most [`MAX_FINISHED_PER_SESSION`] finished processes of a session.
fn prune_finished(procs: &mut HashMap<String, Arc<Proc>>, session_key: &str) {
    let mut finished: Vec<(u64, u64, String)> = procs
        .values()
        .filter(|p| p.session_key == session_key && !p.lock().status.is_running())
        .map(|p| (p.started_at_ms, seq_of(&p.id), p.id.clone()))
        .collect();
    if finished.len() <= MAX_FINISHED_PER_SESSION {
        return;
    }
    finished.sort();
    let excess = finished.len() - MAX_FINISHED_PER_SESSION;
    for (_, _, id) in finished.into_iter().take(excess) {
        procs.remove(&id);
    }
}

fn seq_of(id: &str) -> u64 {
    id.split('_')
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_keeps_the_newest_bytes_with_absolute_offsets() {
        let mut r = Ring {
            buf: VecDeque::new(),
            cap: 4,
            start: 0,
        };
        r.push(b"abcdef");
        assert_eq!(r.start, 2);
        assert_eq!(r.end(), 6);
        assert_eq!(r.since(0), (b"cdef".to_vec(), 2));
        assert_eq!(r.since(5), (b"f".to_vec(), 0));
        assert_eq!(r.since(6), (Vec::new(), 0));
    }
}
