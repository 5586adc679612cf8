//! Shared test helpers: a real temporary workspace and a context pointing at it.
#![allow(dead_code)]

use std::path::Path;

use ferroclaw_tools::ToolContext;
use tokio_util::sync::CancellationToken;

pub fn ctx(ws: &Path) -> ToolContext {
    ToolContext {
        agent_id: "test-agent".into(),
        session_key: "test-session".into(),
        workspace: ws.to_path_buf(),
        cancel: CancellationToken::new(),
        user: None,
        acting_user: None,
        group_chat: false,
        progress: Default::default(),
        run_id: String::new(),
    }
}

/// Whether `pid` is still a running process (a zombie counts as gone).
///
/// Waits on a pidfd, which becomes readable when the process terminates: a real
/// synchronisation point, not a guess at how long a kill takes. `timeout_ms` only bounds the
/// wait when the process stays alive, which is the failure case.
pub fn still_running_after(pid: i32, timeout_ms: u64) -> bool {
    // SAFETY: plain syscalls on integers; the fd is closed before returning.
    unsafe {
        let fd = libc::syscall(libc::SYS_pidfd_open, pid, 0) as i32;
        if fd < 0 {
            let err = std::io::Error::last_os_error();
            // ESRCH: no such process (already reaped). Anything else means we cannot tell,
            // which must not pass silently as "dead".
            assert_eq!(
                err.raw_os_error(),
                Some(libc::ESRCH),
                "pidfd_open({pid}): {err}"
            );
            return false;
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(timeout_ms);
        let running = loop {
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let n = libc::poll(&mut pfd, 1, left.as_millis() as i32);
            if n < 0 {
                let err = std::io::Error::last_os_error();
                // SIGCHLD from the killed shell lands in this process and interrupts poll.
                if err.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                panic!("poll on pidfd of {pid}: {err}");
            }
            break n == 0;
        };
        libc::close(fd);
        running
    }
}

pub fn read_pid(path: &Path) -> i32 {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("pid file {}: {e}", path.display()))
        .trim()
        .parse()
        .unwrap()
}

/// A `sleep` command whose argument is unique in this machine's process list, and that
/// argument: a command in a pid namespace cannot tell its host pid, so tests find it by
/// its command line instead (see [`host_pid_by_arg`]).
pub fn unique_sleep() -> (String, String) {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let arg = format!("3000.{:06}{:03}", std::process::id() % 1_000_000, n);
    (format!("sleep {arg}"), arg)
}

/// The host pid of the one process whose command line has `arg` as an argument. The
/// forked shell may not have exec'd `sleep` yet when the command signals readiness, so
/// this looks again (bounded) until it has.
pub fn host_pid_by_arg(arg: &str) -> i32 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let found = pids_with_arg(arg);
        if found.len() == 1 || std::time::Instant::now() > deadline {
            assert_eq!(found.len(), 1, "processes with argument {arg}: {found:?}");
            return found[0];
        }
        std::thread::yield_now();
    }
}

fn pids_with_arg(arg: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        if cmdline
            .split(|b| *b == 0)
            .skip(1)
            .any(|a| a == arg.as_bytes())
        {
            found.push(pid);
        }
    }
    found
}
