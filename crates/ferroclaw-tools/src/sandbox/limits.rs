//! Resource limits applied in the child between `fork` and `exec`.

use ferroclaw_config::settings::ExecLimitsSettings;

/// Raw `rlimit` values, computed before the fork so the child only makes system calls.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rlimits {
    cpu: u64,
    data: u64,
    address: u64,
    fsize: u64,
    nproc: u64,
}

impl Rlimits {
    pub(crate) fn new(l: &ExecLimitsSettings) -> Self {
        let mb = |v: u64| v.max(1).saturating_mul(1 << 20);
        Self {
            cpu: l.cpu_seconds.max(1),
            data: mb(l.memory_mb),
            // Runtimes reserve far more address space than they touch; the data limit
            // (and the cgroup) bound real use, this only stops absurd mappings.
            address: mb(l.memory_mb).saturating_mul(4),
            fsize: mb(l.file_size_mb),
            nproc: l.max_processes.max(1),
        }
    }

    /// Async-signal-safe: only `setrlimit`.
    pub(crate) fn apply(&self) -> std::io::Result<()> {
        // CPU: the soft limit sends SIGXCPU (catchable), the hard one SIGKILL shortly after.
        set(libc::RLIMIT_CPU, self.cpu, self.cpu.saturating_add(5))?;
        set(libc::RLIMIT_DATA, self.data, self.data)?;
        set(libc::RLIMIT_AS, self.address, self.address)?;
        set(libc::RLIMIT_FSIZE, self.fsize, self.fsize)?;
        // Ignored for root, hence the pids cgroup as well.
        set(libc::RLIMIT_NPROC, self.nproc, self.nproc)?;
        // A core dump of a memory hog would write gigabytes into the workspace.
        set(libc::RLIMIT_CORE, 0, 0)
    }
}

fn set(resource: libc::__rlimit_resource_t, soft: u64, hard: u64) -> std::io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: soft as libc::rlim_t,
        rlim_max: hard as libc::rlim_t,
    };
    // SAFETY: plain system call on a stack value.
    if unsafe { libc::setrlimit(resource, &lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
