//! Backend 2: Landlock, for machines without bubblewrap.
//!
//! Raw system calls rather than a crate: the ruleset is built in the parent (opening
//! paths, allocating), and the child only calls `prctl` and `landlock_restrict_self`
//! between `fork` and `exec`, where nothing but async-signal-safe calls is allowed.
//!
//! Read and execute for system directories and the tool directories on PATH, everything
//! for the workspace and a private temporary directory, nothing else (so not the
//! ferroclaw home, the real home's secrets, or another user's workspace). ABI 4 adds a
//! TCP connect/bind ban when the network is off, ABI 6 stops signals and abstract unix
//! sockets from leaving the sandbox (the command cannot kill the gateway).

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const CREATE_RULESET_VERSION: u32 = 1;
const RULE_PATH_BENEATH: i32 = 1;

const FS_EXECUTE: u64 = 1 << 0;
const FS_WRITE_FILE: u64 = 1 << 1;
const FS_READ_FILE: u64 = 1 << 2;
const FS_READ_DIR: u64 = 1 << 3;
const FS_REFER: u64 = 1 << 13;
const FS_TRUNCATE: u64 = 1 << 14;
const FS_IOCTL_DEV: u64 = 1 << 15;
const NET_BIND_TCP: u64 = 1 << 0;
const NET_CONNECT_TCP: u64 = 1 << 1;
const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
const SCOPE_SIGNAL: u64 = 1 << 1;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// The Landlock ABI of the running kernel, if Landlock is enabled.
pub(crate) fn abi() -> Result<i64, String> {
    static ABI: OnceLock<Result<i64, String>> = OnceLock::new();
    ABI.get_or_init(|| {
        // SAFETY: the documented version query (NULL attributes, size 0).
        let v = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<RulesetAttr>(),
                0usize,
                CREATE_RULESET_VERSION,
            )
        };
        if v < 1 {
            Err(format!(
                "Landlock is not enabled in this kernel ({})",
                std::io::Error::last_os_error()
            ))
        } else {
            Ok(v)
        }
    })
    .clone()
}

/// Whether a fresh user + network namespace can be entered (probed once).
pub(crate) fn can_unshare_net() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.args(["-c", "exit 0"]);
        // SAFETY: unshare is a plain system call, safe between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

fn fs_all(abi: i64) -> u64 {
    let mut all = (1u64 << 13) - 1;
    if abi >= 2 {
        all |= FS_REFER;
    }
    if abi >= 3 {
        all |= FS_TRUNCATE;
    }
    if abi >= 5 {
        all |= FS_IOCTL_DEV;
    }
    all
}

/// What this kernel's Landlock can and cannot confine, in words.
pub(crate) fn describe(network: bool) -> String {
    match abi() {
        Err(e) => e,
        Ok(abi) => {
            let mut can = vec!["filesystem (read-only system, read-write workspace)"];
            let mut cannot = vec![
                "processes stay visible in /proc",
                "UDP when no network namespace",
            ];
            if abi >= 4 {
                if !network {
                    can.push("TCP connect/bind");
                }
            } else {
                cannot.push("TCP (ABI < 4)");
            }
            if abi >= 6 {
                can.push("signals and abstract unix sockets");
            } else {
                cannot.push("signals to the gateway (ABI < 6)");
            }
            if !network && can_unshare_net() {
                can.push("network namespace");
                cannot.retain(|c| !c.starts_with("UDP"));
            }
            format!(
                "Landlock ABI {abi}: confines {}; cannot confine {}; denied paths inside system directories stay readable",
                can.join(", "),
                cannot.join(", ")
            )
        }
    }
}

/// A ruleset ready for the child to enforce.
#[derive(Debug)]
pub(crate) struct Ruleset {
    fd: OwnedFd,
    unshare_net: bool,
}

impl Ruleset {
    pub(crate) fn build(
        network: bool,
        writable: &[&Path],
        readable: &[PathBuf],
    ) -> Result<Self, String> {
        let abi = abi()?;
        let all = fs_all(abi);
        let attr = RulesetAttr {
            handled_access_fs: all,
            handled_access_net: if abi >= 4 && !network {
                NET_BIND_TCP | NET_CONNECT_TCP
            } else {
                0
            },
            scoped: if abi >= 6 {
                SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
            } else {
                0
            },
        };
        // SAFETY: a valid attribute struct and its size.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                &attr as *const RulesetAttr,
                std::mem::size_of::<RulesetAttr>(),
                0u32,
            )
        };
        if fd < 0 {
            return Err(format!(
                "cannot create a Landlock ruleset: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        let file_rights =
            FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | (all & (FS_TRUNCATE | FS_IOCTL_DEV));
        for w in writable {
            add_rule(&fd, w, all, file_rights)?;
        }
        for r in readable {
            add_rule(
                &fd,
                r,
                FS_EXECUTE | FS_READ_FILE | FS_READ_DIR,
                FS_EXECUTE | FS_READ_FILE,
            )?;
        }
        for dev in [
            "/dev/null",
            "/dev/zero",
            "/dev/full",
            "/dev/random",
            "/dev/urandom",
            "/dev/tty",
        ] {
            add_rule(&fd, Path::new(dev), file_rights, file_rights)?;
        }
        Ok(Self {
            fd,
            unshare_net: !network && can_unshare_net(),
        })
    }

    /// In the child: async-signal-safe system calls only.
    pub(crate) fn enforce(&self) -> std::io::Result<()> {
        // SAFETY: plain system calls on integers and our own descriptor.
        unsafe {
            if self.unshare_net && libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::syscall(libc::SYS_landlock_restrict_self, self.fd.as_raw_fd(), 0u32) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// Grants `dir_rights` beneath `path` (or `file_rights` if it is a file); a missing path
/// is skipped, since there is nothing to grant.
fn add_rule(fd: &OwnedFd, path: &Path, dir_rights: u64, file_rights: u64) -> Result<(), String> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("path {} contains a NUL byte", path.display()))?;
    // SAFETY: a valid NUL-terminated path.
    let pfd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if pfd < 0 {
        return Ok(());
    }
    // SAFETY: a fresh descriptor we own.
    let pfd = unsafe { OwnedFd::from_raw_fd(pfd) };
    let attr = PathBeneathAttr {
        allowed_access: if meta.is_dir() {
            dir_rights
        } else {
            file_rights
        },
        parent_fd: pfd.as_raw_fd(),
    };
    // SAFETY: a valid rule struct and descriptors.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            fd.as_raw_fd(),
            RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        )
    };
    if r != 0 {
        return Err(format!(
            "cannot add a Landlock rule for {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}
