//! Backend 1: bubblewrap. Namespaces (user, mount, pid, ipc, uts, and net unless allowed),
//! `/` read-only, fresh `/dev`, `/proc` and `/tmp`, tmpfs over every hidden path, then the
//! workspace bound read-write on top.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Size of the sandbox's `/tmp` (a tmpfs lives in RAM: unbounded, one command could
/// fill the host's memory through it).
const TMP_BYTES: &str = "268435456";
/// Size of the empty tmpfs laid over hidden directories and `/run`: nothing belongs there.
const COVER_BYTES: &str = "1048576";

use super::Target;

#[derive(Debug, Clone)]
pub(crate) struct Bwrap {
    pub(crate) path: PathBuf,
    /// `--disable-userns` (bubblewrap >= 0.8): the command cannot build a user namespace
    /// of its own, in which it could rearrange mounts.
    disable_userns: bool,
}

/// Found on PATH and seen to work here (probed once).
pub(crate) fn probe() -> &'static Result<Bwrap, String> {
    static P: OnceLock<Result<Bwrap, String>> = OnceLock::new();
    P.get_or_init(|| {
        let path = find_on_path("bwrap").ok_or_else(|| "bwrap is not installed".to_string())?;
        let mut last = String::new();
        for disable_userns in [true, false] {
            let b = Bwrap {
                path: path.clone(),
                disable_userns,
            };
            let target = Target {
                workspace: PathBuf::from("/"),
                hidden: Vec::new(),
            };
            let args = b.args(false, &target, Path::new("/"));
            let out = Command::new(&b.path)
                .args(args)
                .args(["true"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .output();
            match out {
                Ok(o) if o.status.success() => return Ok(b),
                Ok(o) => last = String::from_utf8_lossy(&o.stderr).trim().to_string(),
                Err(e) => last = e.to_string(),
            }
        }
        Err(format!("bwrap does not work here: {last}"))
    })
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

impl Bwrap {
    /// Arguments up to (not including) the program to run.
    pub(crate) fn args(&self, network: bool, target: &Target, dir: &Path) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::new();
        let mut push = |items: &[&str]| a.extend(items.iter().map(OsString::from));
        push(&[
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--die-with-parent",
            "--cap-drop",
            "ALL",
        ]);
        if self.disable_userns {
            push(&["--disable-userns"]);
        }
        if !network {
            push(&["--unshare-net"]);
        }
        push(&[
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--size",
            TMP_BYTES,
            "--tmpfs",
            "/tmp",
        ]);
        // Unix sockets on a read-only bind can still be connected to (docker, dbus, …).
        let mut covered: Vec<PathBuf> = vec![PathBuf::from("/tmp")];
        for run in ["/run", "/var/run"] {
            let p = Path::new(run);
            if p.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                push(&["--size", COVER_BYTES, "--tmpfs", run]);
                covered.push(p.to_path_buf());
            }
        }
        let ws = &target.workspace;
        let (inside, outside): (Vec<&PathBuf>, Vec<&PathBuf>) = target
            .hidden
            .iter()
            .partition(|p| p.starts_with(ws) && *p != ws);
        let hide = |p: &Path, a: &mut Vec<OsString>, covered: &mut Vec<PathBuf>| {
            let Ok(m) = p.symlink_metadata() else { return };
            if m.is_dir() {
                a.push("--size".into());
                a.push(COVER_BYTES.into());
                a.push("--tmpfs".into());
                a.push(p.into());
                covered.push(p.to_path_buf());
            } else {
                a.push("--ro-bind".into());
                a.push("/dev/null".into());
                a.push(p.into());
            }
        };
        let mut outside = outside;
        outside.sort();
        for p in outside {
            // Already under a hidden directory: nothing of it is left to hide.
            if covered.iter().any(|c| p.starts_with(c)) {
                continue;
            }
            hide(p, &mut a, &mut covered);
        }
        // The workspace goes back on top: it may lie inside a hidden path (the default
        // workspace is inside the ferroclaw home).
        a.push("--bind".into());
        a.push(ws.into());
        a.push(ws.into());
        let mut inside_covered = Vec::new();
        let mut inside = inside;
        inside.sort();
        for p in inside {
            if inside_covered.iter().any(|c: &PathBuf| p.starts_with(c)) {
                continue;
            }
            hide(p, &mut a, &mut inside_covered);
        }
        a.push("--chdir".into());
        a.push(dir.into());
        a.push("--".into());
        a
    }
}
