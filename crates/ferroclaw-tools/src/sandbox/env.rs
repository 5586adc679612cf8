//! The environment of a confined command: an allowlist, never the gateway's environment.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Variables taken from the gateway's own environment (when set); everything else is dropped.
const INHERITED: &[&str] = &["PATH", "LANG", "LC_ALL", "TERM"];
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// Toolchain locations (not secrets), and their default place under the real home.
const TOOL_HOMES: &[(&str, &str)] = &[("RUSTUP_HOME", ".rustup"), ("PYENV_ROOT", ".pyenv")];

/// `PATH`, `LANG`, `LC_ALL`, `TERM` from the gateway, `HOME` = the workspace, `TMPDIR`, then
/// `extra` (configured pairs; a credential-looking or `FERROCLAW_*` name is dropped with a
/// warning, because it would hand the command what the sandbox exists to keep from it).
pub(crate) fn child_env(
    workspace: &Path,
    tmpdir: &Path,
    extra: &[(OsString, OsString)],
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    for name in INHERITED {
        if let Some(v) = std::env::var_os(name).filter(|v| !v.is_empty()) {
            set((*name).into(), v, &mut env);
        }
    }
    if !env.iter().any(|(k, _)| k == "PATH") {
        set("PATH".into(), DEFAULT_PATH.into(), &mut env);
    }
    // HOME becomes the workspace, so toolchain managers that default to `~/.rustup` or
    // `~/.pyenv` (with their shims on PATH) are told where they really are.
    let real_home = std::env::var_os("HOME").map(PathBuf::from);
    for (name, default) in TOOL_HOMES {
        let v = std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .or_else(|| {
                let p = real_home.as_ref()?.join(default);
                p.is_dir().then(|| p.into_os_string())
            });
        if let Some(v) = v {
            set((*name).into(), v, &mut env);
        }
    }
    set("HOME".into(), workspace.as_os_str().to_owned(), &mut env);
    set("TMPDIR".into(), tmpdir.as_os_str().to_owned(), &mut env);
    for (k, v) in extra {
        let refused = match k.to_str() {
            Some(name) => ferroclaw_config::forbidden_child_env(name),
            None => Some("not a valid variable name"),
        };
        if let Some(why) = refused {
            tracing::warn!(
                target: "security.sandbox",
                variable = %k.to_string_lossy(),
                "not passing a variable to a command: {why}"
            );
            continue;
        }
        set(k.clone(), v.clone(), &mut env);
    }
    env
}

fn set(k: OsString, v: OsString, env: &mut Vec<(OsString, OsString)>) {
    env.retain(|(n, _)| *n != k);
    env.push((k, v));
}
