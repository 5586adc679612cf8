//! A cgroup per command, bounding its process count (and memory) as a whole.
//!
//! `RLIMIT_NPROC` does nothing for root and counts per user rather than per command, so a
//! fork bomb is contained by a `pids` cgroup instead. The cgroup is created under the
//! gateway's own cgroup in whichever hierarchy carries the controller (v1 per-controller
//! mounts or the v2 unified tree), the child moves itself into it between `fork` and
//! `exec` (so nothing it starts escapes), and it is emptied and removed afterwards.

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

static SEQ: AtomicU64 = AtomicU64::new(1);

/// Where a controller's cgroups of this process live.
#[derive(Debug, Clone)]
struct Hierarchy {
    /// The gateway's own cgroup directory in that hierarchy.
    base: PathBuf,
    v2: bool,
}

#[derive(Debug, Clone, Default)]
struct Hierarchies {
    pids: Option<Hierarchy>,
    memory: Option<Hierarchy>,
}

fn hierarchies() -> &'static Hierarchies {
    static H: OnceLock<Hierarchies> = OnceLock::new();
    H.get_or_init(detect)
}

fn detect() -> Hierarchies {
    let (Ok(mounts), Ok(own)) = (
        std::fs::read_to_string("/proc/self/mounts"),
        std::fs::read_to_string("/proc/self/cgroup"),
    ) else {
        return Hierarchies::default();
    };
    let own_path = |controller: &str| -> Option<String> {
        own.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
            let hit = if controller.is_empty() {
                ctrls.is_empty()
            } else {
                ctrls.split(',').any(|c| c == controller)
            };
            hit.then(|| path.to_string())
        })
    };
    let find = |controller: &str| -> Option<Hierarchy> {
        for line in mounts.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 4 {
                continue;
            }
            let (mnt, fstype, opts) = (f[1], f[2], f[3]);
            if fstype == "cgroup" && opts.split(',').any(|o| o == controller) {
                let rel = own_path(controller)?;
                let base = Path::new(mnt).join(rel.trim_start_matches('/'));
                return usable(&base, controller, false).then_some(Hierarchy { base, v2: false });
            }
        }
        for line in mounts.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() >= 3 && f[2] == "cgroup2" {
                let rel = own_path("")?;
                let base = Path::new(f[1]).join(rel.trim_start_matches('/'));
                if usable(&base, controller, true) {
                    return Some(Hierarchy { base, v2: true });
                }
            }
        }
        None
    };
    let h = Hierarchies {
        pids: find("pids"),
        memory: find("memory"),
    };
    for hier in [&h.pids, &h.memory].into_iter().flatten() {
        remove_stale(&hier.base);
    }
    h
}

/// Cgroups left by a gateway that died before its clean-up ran (an empty cgroup of a
/// process that no longer exists); `rmdir` refuses any that still holds a process.
fn remove_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("ferroclaw-")
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

/// Whether a child cgroup under `base` would carry `controller` and can be created here.
fn usable(base: &Path, controller: &str, v2: bool) -> bool {
    if v2 {
        let enabled = std::fs::read_to_string(base.join("cgroup.subtree_control"))
            .is_ok_and(|s| s.split_whitespace().any(|c| c == controller));
        if !enabled {
            return false;
        }
    }
    let probe = base.join(format!("ferroclaw-probe-{}", std::process::id()));
    let ok = std::fs::create_dir(&probe).is_ok() && probe.join(limit_file(controller, v2)).exists();
    let _ = std::fs::remove_dir(&probe);
    ok
}

fn limit_file(controller: &str, v2: bool) -> &'static str {
    match (controller, v2) {
        ("pids", _) => "pids.max",
        ("memory", true) => "memory.max",
        _ => "memory.limit_in_bytes",
    }
}

/// One-line description for `doctor`.
pub(crate) fn describe() -> String {
    let h = hierarchies();
    let show = |x: &Option<Hierarchy>| match x {
        Some(h) => format!("cgroup {}", if h.v2 { "v2" } else { "v1" }),
        None => "unavailable".to_string(),
    };
    format!(
        "pids cgroup {}, memory cgroup {}",
        show(&h.pids),
        show(&h.memory)
    )
    .replace("cgroup cgroup", "cgroup")
}

pub(crate) fn pids_available() -> bool {
    hierarchies().pids.is_some()
}

/// The cgroups of one command; dropping it kills what is left inside and removes them.
#[derive(Debug)]
pub(crate) struct Cgroup {
    dirs: Vec<(PathBuf, bool)>,
    /// `cgroup.procs` of each, opened before the fork: the child writes "0" (itself) to them.
    procs: Vec<OwnedFd>,
    max_processes: u64,
}

impl Cgroup {
    /// `None` when no writable hierarchy exists (the caller says so in its description).
    pub(crate) fn create(max_processes: u64, memory_bytes: u64) -> Option<Self> {
        let h = hierarchies();
        let name = format!(
            "ferroclaw-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut cg = Self {
            dirs: Vec::new(),
            procs: Vec::new(),
            max_processes,
        };
        let mut add = |hier: &Hierarchy, file: &str, value: String| -> std::io::Result<()> {
            let dir = hier.base.join(&name);
            if !cg.dirs.iter().any(|(d, _)| *d == dir) {
                std::fs::create_dir(&dir)?;
                cg.dirs.push((dir.clone(), hier.v2));
                let f = File::options().write(true).open(dir.join("cgroup.procs"))?;
                cg.procs.push(f.into());
            }
            std::fs::write(dir.join(file), value)
        };
        if let Some(p) = &h.pids {
            if let Err(e) = add(p, "pids.max", max_processes.to_string()) {
                tracing::warn!(target: "security.sandbox", "cannot set up the pids cgroup: {e}");
                return None;
            }
        }
        if let Some(m) = &h.memory {
            let file = limit_file("memory", m.v2);
            if let Err(e) = add(m, file, memory_bytes.to_string()) {
                tracing::warn!(target: "security.sandbox", "cannot set up the memory cgroup: {e}");
            }
        }
        (!cg.dirs.is_empty()).then_some(cg)
    }

    /// Raw descriptors for the child to join (async-signal-safe use only).
    pub(crate) fn join_fds(&self) -> Vec<i32> {
        self.procs.iter().map(|f| f.as_raw_fd()).collect()
    }

    /// SIGKILL to every process inside, until none is left or `limit` passed. A fork bomb
    /// keeps forking while it is killed, hence the loop.
    pub(crate) fn kill_all(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            let mut any = false;
            for (dir, v2) in &self.dirs {
                if *v2 && std::fs::write(dir.join("cgroup.kill"), "1").is_ok() {
                    any |= !read_pids(dir).is_empty();
                    continue;
                }
                for pid in read_pids(dir) {
                    any = true;
                    // SAFETY: plain system call; a pid that just exited yields ESRCH.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
            if !any {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Why the command may have failed, in words, if it ran into a limit.
    pub(crate) fn limit_notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        for (dir, v2) in &self.dirs {
            if let Ok(ev) = std::fs::read_to_string(dir.join("pids.events")) {
                let hits = ev
                    .lines()
                    .find_map(|l| l.strip_prefix("max "))
                    .and_then(|n| n.trim().parse::<u64>().ok())
                    .unwrap_or(0);
                if hits > 0 {
                    notes.push(format!(
                        "[sandbox: the command reached its limit of {} processes; {hits} fork(s) were refused]",
                        self.max_processes
                    ));
                }
            }
            let oom = if *v2 {
                std::fs::read_to_string(dir.join("memory.events"))
                    .ok()
                    .and_then(|ev| {
                        ev.lines()
                            .find_map(|l| l.strip_prefix("oom_kill "))
                            .and_then(|n| n.trim().parse::<u64>().ok())
                    })
            } else {
                std::fs::read_to_string(dir.join("memory.oom_control"))
                    .ok()
                    .and_then(|ev| {
                        ev.lines()
                            .find_map(|l| l.strip_prefix("oom_kill "))
                            .and_then(|n| n.trim().parse::<u64>().ok())
                    })
            };
            if oom.unwrap_or(0) > 0 {
                notes.push(
                    "[sandbox: the command ran out of its memory limit and was killed]".into(),
                );
            }
        }
        notes
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        if self.dirs.is_empty() {
            return;
        }
        let mut cg = Cgroup {
            dirs: std::mem::take(&mut self.dirs),
            procs: std::mem::take(&mut self.procs),
            max_processes: self.max_processes,
        };
        // Emptying takes a moment (exiting processes): never block the async caller.
        let cleanup = move || {
            cg.kill_all(Duration::from_secs(10));
            let deadline = Instant::now() + Duration::from_secs(10);
            for (dir, _) in std::mem::take(&mut cg.dirs) {
                while std::fs::remove_dir(&dir).is_err() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        };
        if let Err(e) = std::thread::Builder::new()
            .name("ferroclaw-cgroup-cleanup".into())
            .spawn(cleanup)
        {
            tracing::warn!(target: "security.sandbox", "cannot clean up a command cgroup: {e}");
        }
    }
}

fn read_pids(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}
