//! Paths no tool may reach even inside the workspace, and per-user sub-workspaces.
//!
//! [`crate::paths`] confines every filesystem tool to its workspace. This module
//! adds two things on top:
//!
//! - **Denied prefixes** ([`DeniedPaths`]): the ferroclaw home (config, `.env.local`,
//!   transcripts, databases) and the operator's `tools.denied_paths`. A resolved
//!   path at or under a denied prefix is refused, whether it was named directly,
//!   reached through a symlink, or reached through a bind mount of the denied
//!   directory (detected by comparing device and inode of every directory on the
//!   way, since a bind mount has no symlink to follow). `ls` hides denied
//!   entries, `glob`/`grep` never descend into them.
//!
//!   A denied prefix that *contains* the workspace (the default
//!   `~/.ferroclaw/workspace` lies inside the home) cannot be applied as a whole
//!   without denying the workspace itself; for the home, [`DeniedPaths::for_home`]
//!   therefore also denies its sensitive entries one by one, so they stay out of
//!   reach even when the workspace *is* the home.
//!
//! - **Per-user workspaces** ([`user_workspace`]): `root/user_<sanitized id>`.
//!
//! The registry carries the deny list ([`crate::ToolRegistry::with_denied_paths`])
//! and makes it visible to the tools of the call it runs through a task-local
//! ([`DeniedPaths::scope`] / [`DeniedPaths::current`]): it reaches every
//! filesystem tool without a new field in `ToolContext`, whose struct literals
//! live in several crates.

use std::future::Future;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use crate::paths::PathError;

/// Entries of the ferroclaw home that hold secrets or other users' data.
pub const HOME_SENSITIVE_ENTRIES: &[&str] = &[
    "config.json5",
    "config.json",
    ".env.local",
    ".env",
    "agents",
    "data",
    "logs",
    "exec-approvals.json",
];

/// Longest sanitised user id kept verbatim in a directory name.
pub const MAX_USER_ID_LEN: usize = 64;

tokio::task_local! {
    static CURRENT: DeniedPaths;
}

/// A set of denied path prefixes. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct DeniedPaths {
    entries: Arc<[DeniedEntry]>,
}

#[derive(Debug, Clone)]
struct DeniedEntry {
    /// `..`-folded absolute path as configured.
    lexical: PathBuf,
    /// Canonical path, when it existed at construction.
    canonical: Option<PathBuf>,
    /// Device and inode, when it was a directory at construction.
    id: Option<(u64, u64)>,
}

impl DeniedEntry {
    /// The directory identity, looked up again if the entry did not exist before.
    fn dir_id(&self) -> Option<(u64, u64)> {
        self.id.or_else(|| {
            let m = std::fs::metadata(self.canonical.as_ref().unwrap_or(&self.lexical)).ok()?;
            m.is_dir().then(|| (m.dev(), m.ino()))
        })
    }
}

impl DeniedPaths {
    /// Denies each of `paths` (absolute; relative ones are ignored with a warning,
    /// since they would depend on the process's working directory).
    pub fn new<I, P>(paths: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: AsRef<Path>,
    {
        let mut entries: Vec<DeniedEntry> = Vec::new();
        for p in paths {
            let p = p.as_ref();
            if !p.is_absolute() {
                tracing::warn!(
                    target: "security.paths",
                    path = %p.display(),
                    "ignoring relative denied path; denied paths must be absolute"
                );
                continue;
            }
            let lexical = fold(p);
            let canonical = std::fs::canonicalize(&lexical).ok();
            let id = std::fs::metadata(&lexical)
                .ok()
                .filter(|m| m.is_dir())
                .map(|m| (m.dev(), m.ino()));
            if !entries.iter().any(|e| e.lexical == lexical) {
                entries.push(DeniedEntry {
                    lexical,
                    canonical,
                    id,
                });
            }
        }
        Self {
            entries: entries.into(),
        }
    }

    /// The ferroclaw `home`, its sensitive entries ([`HOME_SENSITIVE_ENTRIES`]) and
    /// `extra` (e.g. `tools.denied_paths`, already made absolute).
    pub fn for_home<P: AsRef<Path>>(home: &Path, extra: &[P]) -> Self {
        let mut all: Vec<PathBuf> = vec![home.to_path_buf()];
        all.extend(HOME_SENSITIVE_ENTRIES.iter().map(|e| home.join(e)));
        all.extend(extra.iter().map(|p| p.as_ref().to_path_buf()));
        Self::new(all)
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The denied paths as configured (absolute, `..` folded), for the exec sandbox.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.entries.iter().map(|e| e.lexical.as_path())
    }

    /// Runs `fut` with `self` as the deny list seen by [`DeniedPaths::current`].
    pub async fn scope<F: Future>(self, fut: F) -> F::Output {
        CURRENT.scope(self, fut).await
    }

    /// The deny list of the tool call running on this task (empty outside one).
    pub fn current() -> Self {
        CURRENT.try_with(Clone::clone).unwrap_or_default()
    }

    /// Refuses `resolved` (an absolute path already confined to `workspace`, both
    /// canonical) when it is at or under a denied prefix that does not contain
    /// the workspace, or when a directory on the way is a denied directory
    /// reached another way (bind mount).
    pub fn check(&self, workspace: &Path, resolved: &Path, shown: &str) -> Result<(), PathError> {
        if let Some(prefix) = self.denied_prefix(workspace, resolved) {
            tracing::warn!(
                target: "security.paths",
                path = shown,
                denied = %prefix.display(),
                "tool access to a denied path refused"
            );
            return Err(PathError::Denied {
                path: shown.to_string(),
                prefix: prefix.display().to_string(),
            });
        }
        Ok(())
    }

    /// True if `path` is denied (see [`DeniedPaths::check`]).
    pub fn is_denied(&self, workspace: &Path, path: &Path) -> bool {
        self.denied_prefix(workspace, path).is_some()
    }

    /// Like [`DeniedPaths::is_denied`] for an entry whose parent directory is known
    /// to be allowed (a directory listing, a walk): only the entry itself is checked
    /// for identity, one `stat` instead of one per level.
    pub fn is_denied_entry(&self, workspace: &Path, path: &Path) -> bool {
        if self.entries.is_empty() {
            return false;
        }
        let applicable = self.applicable(workspace);
        if applicable.iter().any(|e| e.contains(path)) {
            return true;
        }
        let ids: Vec<(u64, u64)> = applicable.iter().filter_map(|e| e.dir_id()).collect();
        !ids.is_empty()
            && std::fs::metadata(path)
                .is_ok_and(|m| m.is_dir() && ids.contains(&(m.dev(), m.ino())))
    }

    /// Entries that do not contain the workspace (those would deny all of it).
    fn applicable(&self, workspace: &Path) -> Vec<&DeniedEntry> {
        self.entries
            .iter()
            .filter(|e| !e.contains(workspace))
            .collect()
    }

    fn denied_prefix(&self, workspace: &Path, path: &Path) -> Option<PathBuf> {
        if self.entries.is_empty() {
            return None;
        }
        let applicable = self.applicable(workspace);
        if let Some(e) = applicable.iter().find(|e| e.contains(path)) {
            return Some(e.lexical.clone());
        }
        // Identity check: any existing directory from the workspace down to
        // `path` that *is* a denied directory (same device and inode), which is
        // how a bind mount of a denied directory shows up.
        let ids: Vec<((u64, u64), &DeniedEntry)> = applicable
            .iter()
            .filter_map(|e| e.dir_id().map(|id| (id, *e)))
            .collect();
        if ids.is_empty() {
            return None;
        }
        let rel = path.strip_prefix(workspace).ok()?;
        let mut current = workspace.to_path_buf();
        for comp in rel.components() {
            current.push(comp);
            let Ok(m) = std::fs::metadata(&current) else {
                break;
            };
            if let Some((_, e)) = ids.iter().find(|(id, _)| *id == (m.dev(), m.ino())) {
                return Some(e.lexical.clone());
            }
        }
        None
    }
}

impl DeniedEntry {
    fn contains(&self, path: &Path) -> bool {
        path.starts_with(&self.lexical)
            || self.canonical.as_ref().is_some_and(|c| path.starts_with(c))
    }
}

/// Folds `.` and `..` lexically (the path is absolute).
fn fold(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// A user id made safe as one path component: `[A-Za-z0-9_-]` kept, everything
/// else becomes `_` (so `.`, `/`, `\`, NUL and `..` cannot survive). Ids longer
/// than [`MAX_USER_ID_LEN`] are cut and suffixed with a hash of the full id so
/// two long ids sharing a prefix still get different directories. An empty id
/// becomes `_`.
pub fn sanitize_user_id(user_id: &str) -> String {
    let mut s: String = user_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        s.push('_');
    }
    if s.len() > MAX_USER_ID_LEN {
        // ASCII only after mapping, so byte truncation is a char boundary.
        s.truncate(MAX_USER_ID_LEN - 17);
        s.push('-');
        s.push_str(&format!(
            "{:016x}",
            ferroclaw_types::fnv1a(user_id.as_bytes())
        ));
    }
    s
}

/// `root/user_<sanitized id>`: the workspace of one user of a shared agent.
pub fn user_workspace(root: &Path, user_id: &str) -> PathBuf {
    root.join(format!("user_{}", sanitize_user_id(user_id)))
}

/// [`user_workspace`], created if missing. Refuses an existing entry that is not a
/// plain directory (a symlink planted there would lead the user's tools elsewhere).
pub fn ensure_user_workspace(root: &Path, user_id: &str) -> std::io::Result<PathBuf> {
    let dir = user_workspace(root, user_id);
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.file_type().is_dir() => Ok(dir),
        Ok(_) => {
            tracing::warn!(
                target: "security.paths",
                path = %dir.display(),
                "user workspace exists but is not a plain directory; refusing it"
            );
            Err(std::io::Error::other(format!(
                "user workspace {} exists but is not a directory (symlinks are refused)",
                dir.display()
            )))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(&dir)?;
            Ok(dir)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitizer() {
        assert_eq!(sanitize_user_id("alice"), "alice");
        assert_eq!(
            sanitize_user_id("group:telegram:-1001234"),
            "group_telegram_-1001234"
        );
        assert_eq!(sanitize_user_id("../x"), "___x");
        assert_eq!(sanitize_user_id(""), "_");
        let long = "a".repeat(500);
        let s = sanitize_user_id(&long);
        assert_eq!(s.len(), MAX_USER_ID_LEN);
        assert_ne!(s, sanitize_user_id(&"a".repeat(501)));
    }
}
