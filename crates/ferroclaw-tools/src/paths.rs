//! Workspace confinement shared by every filesystem tool.
//!
//! The model names paths; we decide where they really lead. A path is accepted only if,
//! after `..` is folded and every symlink that exists is followed (dangling ones too), it
//! lies inside the canonical workspace. The tools then operate on the *resolved* path we
//! return, not on the string the model gave, so what we checked is what gets touched
//! (short of another process swapping in a symlink between check and use, which a
//! path-based check cannot rule out).
//!
//! `~` is deliberately not expanded: a leading `~` or `~/` is refused with a message,
//! because silently creating a directory literally named `~` in the workspace would
//! surprise the model as much as reaching into the real home directory would.

use std::path::{Component, Path, PathBuf};

/// Symlinks followed by hand (dangling ones) before we give up, like the kernel's ELOOP limit.
const MAX_SYMLINK_HOPS: usize = 40;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("path is empty; give a path relative to the workspace")]
    Empty,
    #[error("path {0:?} contains a NUL byte")]
    NulByte(String),
    #[error(
        "path {0:?} starts with '~', which is not expanded; use a path relative to the workspace"
    )]
    Tilde(String),
    /// `resolved` and `workspace` are absolute host paths: kept for logs, never shown
    /// (the model and clients see only the path they gave).
    #[error(
        "path {path:?} is outside the workspace (after following `..` and symbolic links); only paths inside the workspace are allowed"
    )]
    OutsideWorkspace {
        path: String,
        resolved: String,
        workspace: String,
    },
    #[error("path {0:?} has too many levels of symbolic links")]
    SymlinkLoop(String),
    #[error("cannot resolve path {path:?}: {reason}")]
    Unresolvable { path: String, reason: String },
    /// `workspace` is an absolute host path, kept for logs and not shown.
    #[error("the workspace is not usable: {reason}")]
    Workspace { workspace: String, reason: String },
    /// Inside the workspace but under a denied prefix (see `path_guard`). The
    /// message does not name the prefix: where the gateway keeps its secrets is
    /// none of the model's business.
    #[error("access to {path:?} is denied: it is in a protected location that tools may not read, list or modify")]
    Denied { path: String, prefix: String },
}

/// Canonical form of the workspace root; it must exist and be a directory.
pub fn canonical_workspace(workspace: &Path) -> Result<PathBuf, PathError> {
    let bad = |reason: String| PathError::Workspace {
        workspace: workspace.display().to_string(),
        reason,
    };
    let canon = std::fs::canonicalize(workspace).map_err(|e| bad(e.to_string()))?;
    if !canon.is_dir() {
        return Err(bad("not a directory".into()));
    }
    Ok(canon)
}

/// Resolves a model-supplied path to an absolute path inside `workspace`.
///
/// Relative paths are taken from the workspace root; absolute paths are allowed only if
/// they land inside it. The result has no `.`/`..` components and no symlinks in the part
/// that exists; the non-existing tail (e.g. a file about to be created) is appended as is.
pub fn resolve_in_workspace(workspace: &Path, user_path: &str) -> Result<PathBuf, PathError> {
    if user_path.trim().is_empty() {
        return Err(PathError::Empty);
    }
    if user_path.contains('\0') {
        return Err(PathError::NulByte(user_path.to_string()));
    }
    if user_path == "~" || user_path.starts_with("~/") {
        return Err(PathError::Tilde(user_path.to_string()));
    }
    let ws = canonical_workspace(workspace)?;
    // `join` with an absolute path replaces the base, which is what we want here.
    let joined = normalize(&ws.join(user_path));
    let resolved = resolve_symlinks(&joined, user_path)?;
    if !resolved.starts_with(&ws) {
        return Err(PathError::OutsideWorkspace {
            path: user_path.to_string(),
            resolved: resolved.display().to_string(),
            workspace: ws.display().to_string(),
        });
    }
    Ok(resolved)
}

/// Folds `.` and `..` lexically. Only ever applied to absolute paths whose existing part
/// is about to be canonicalised, so lexical folding cannot hide an escape: the result is
/// the path we check and the path the tool uses.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Prefix(_) | Component::RootDir => out.push(c.as_os_str()),
            Component::CurDir => {}
            // At the root `pop` is a no-op, matching how the kernel treats `/..`.
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
        }
    }
    out
}

/// Canonicalises the deepest existing ancestor of `path` and re-appends the rest.
/// A dangling symlink on the way is followed by hand, so that a file created through it
/// would be checked at its real destination.
fn resolve_symlinks(path: &Path, original: &str) -> Result<PathBuf, PathError> {
    let unresolvable = |reason: String| PathError::Unresolvable {
        path: original.to_string(),
        reason,
    };
    let mut current = path.to_path_buf();
    for _ in 0..MAX_SYMLINK_HOPS {
        let comps: Vec<Component> = current.components().collect();
        let mut followed = None;
        for split in (1..=comps.len()).rev() {
            let prefix: PathBuf = comps[..split].iter().collect();
            if let Ok(canon) = std::fs::canonicalize(&prefix) {
                let mut out = canon;
                out.extend(&comps[split..]);
                return Ok(out);
            }
            // Not resolvable: either it does not exist (try a shorter prefix) or it is a
            // symlink whose target does not exist / loops (follow it ourselves).
            let is_link = std::fs::symlink_metadata(&prefix)
                .map(|m| m.file_type().is_symlink())
                .unwrap_or(false);
            if !is_link {
                continue;
            }
            let target = std::fs::read_link(&prefix).map_err(|e| unresolvable(e.to_string()))?;
            let parent = prefix.parent().unwrap_or(Path::new("/"));
            let parent = std::fs::canonicalize(parent).map_err(|e| unresolvable(e.to_string()))?;
            let mut next = parent.join(target);
            next.extend(&comps[split..]);
            followed = Some(normalize(&next));
            break;
        }
        match followed {
            Some(next) => current = next,
            // Only reachable if even the root failed to canonicalise.
            None => return Err(unresolvable("no part of the path exists".into())),
        }
    }
    Err(PathError::SymlinkLoop(original.to_string()))
}

/// How a resolved path is shown to the model: relative to the workspace, `.` for the root.
/// A path outside it (never expected of a resolved path) is not spelled out: host paths
/// are not the model's business.
pub fn display_relative(workspace: &Path, path: &Path) -> String {
    match path.strip_prefix(workspace) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
        Ok(rel) => rel.display().to_string(),
        Err(_) => "<outside the workspace>".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, tempfile::TempDir, PathBuf) {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let canon = std::fs::canonicalize(ws.path()).unwrap();
        (ws, outside, canon)
    }

    fn assert_outside(r: Result<PathBuf, PathError>) {
        match r {
            Err(e @ PathError::OutsideWorkspace { .. }) => {
                let text = e.to_string();
                assert!(text.contains("outside the workspace"), "{e}");
                // Neither the host's workspace nor where the path led is revealed.
                let PathError::OutsideWorkspace {
                    path,
                    resolved,
                    workspace,
                } = &e
                else {
                    unreachable!()
                };
                assert!(!text.contains(workspace.as_str()), "{text}");
                if !path.contains(resolved.as_str()) {
                    assert!(!text.contains(resolved.as_str()), "{text}");
                }
            }
            other => panic!("expected OutsideWorkspace, got {other:?}"),
        }
    }

    #[test]
    fn relative_paths_resolve_inside() {
        let (ws, _o, canon) = setup();
        assert_eq!(
            resolve_in_workspace(ws.path(), "a/b.txt").unwrap(),
            canon.join("a/b.txt")
        );
        assert_eq!(resolve_in_workspace(ws.path(), ".").unwrap(), canon);
        assert_eq!(
            resolve_in_workspace(ws.path(), "./x/../y").unwrap(),
            canon.join("y")
        );
    }

    #[test]
    fn parent_escapes_are_refused() {
        let (ws, _o, _) = setup();
        assert_outside(resolve_in_workspace(ws.path(), "../x"));
        assert_outside(resolve_in_workspace(ws.path(), "a/../../x"));
        assert_outside(resolve_in_workspace(ws.path(), ".."));
    }

    #[test]
    fn dotdot_that_stays_inside_is_fine() {
        let (ws, _o, canon) = setup();
        std::fs::create_dir(ws.path().join("a")).unwrap();
        assert_eq!(
            resolve_in_workspace(ws.path(), "a/../b/../c.txt").unwrap(),
            canon.join("c.txt")
        );
    }

    #[test]
    fn absolute_paths() {
        let (ws, outside, canon) = setup();
        assert_outside(resolve_in_workspace(ws.path(), "/etc/passwd"));
        let out = outside.path().join("f").display().to_string();
        assert_outside(resolve_in_workspace(ws.path(), &out));
        let inside = canon.join("new/file.txt");
        assert_eq!(
            resolve_in_workspace(ws.path(), &inside.display().to_string()).unwrap(),
            inside
        );
        // The non-canonical spelling of the workspace (tempdir may sit under a symlink) also works.
        let spelled = ws.path().join("f.txt").display().to_string();
        assert_eq!(
            resolve_in_workspace(ws.path(), &spelled).unwrap(),
            canon.join("f.txt")
        );
    }

    #[test]
    fn symlinked_dir_escape_is_refused() {
        let (ws, outside, _) = setup();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        symlink(outside.path(), ws.path().join("out")).unwrap();
        assert_outside(resolve_in_workspace(ws.path(), "out/secret"));
        assert_outside(resolve_in_workspace(ws.path(), "out/not-yet/created.txt"));
        assert_outside(resolve_in_workspace(ws.path(), "out"));
    }

    #[test]
    fn symlinked_file_escape_is_refused() {
        let (ws, outside, _) = setup();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        symlink(outside.path().join("secret"), ws.path().join("link")).unwrap();
        assert_outside(resolve_in_workspace(ws.path(), "link"));
    }

    #[test]
    fn dangling_symlink_escape_is_refused() {
        let (ws, outside, _) = setup();
        symlink(outside.path().join("nope/x"), ws.path().join("dangling")).unwrap();
        assert_outside(resolve_in_workspace(ws.path(), "dangling"));
        assert_outside(resolve_in_workspace(ws.path(), "dangling/child"));
        // Relative dangling target climbing out.
        symlink("../../../../../../../../tmp/zzz", ws.path().join("rel")).unwrap();
        assert_outside(resolve_in_workspace(ws.path(), "rel"));
    }

    #[test]
    fn symlinks_inside_are_followed() {
        let (ws, _o, canon) = setup();
        std::fs::create_dir(ws.path().join("real")).unwrap();
        symlink("real", ws.path().join("alias")).unwrap();
        assert_eq!(
            resolve_in_workspace(ws.path(), "alias/f.txt").unwrap(),
            canon.join("real/f.txt")
        );
        // Dangling but pointing inside: resolves to where the file would be created.
        symlink("real/later.txt", ws.path().join("later")).unwrap();
        assert_eq!(
            resolve_in_workspace(ws.path(), "later").unwrap(),
            canon.join("real/later.txt")
        );
    }

    #[test]
    fn symlink_loop_is_an_error() {
        let (ws, _o, _) = setup();
        symlink("b", ws.path().join("a")).unwrap();
        symlink("a", ws.path().join("b")).unwrap();
        assert!(matches!(
            resolve_in_workspace(ws.path(), "a"),
            Err(PathError::SymlinkLoop(_))
        ));
    }

    #[test]
    fn empty_nul_and_tilde_are_refused() {
        let (ws, _o, canon) = setup();
        assert_eq!(resolve_in_workspace(ws.path(), ""), Err(PathError::Empty));
        assert_eq!(resolve_in_workspace(ws.path(), "  "), Err(PathError::Empty));
        assert!(matches!(
            resolve_in_workspace(ws.path(), "a\0b"),
            Err(PathError::NulByte(_))
        ));
        assert!(matches!(
            resolve_in_workspace(ws.path(), "~/x"),
            Err(PathError::Tilde(_))
        ));
        // `~name` is just an odd file name.
        assert_eq!(
            resolve_in_workspace(ws.path(), "~x").unwrap(),
            canon.join("~x")
        );
    }

    #[test]
    fn display_is_relative_and_never_a_host_path() {
        let ws = Path::new("/srv/ws");
        assert_eq!(display_relative(ws, Path::new("/srv/ws")), ".");
        assert_eq!(
            display_relative(ws, Path::new("/srv/ws/a/b.txt")),
            "a/b.txt"
        );
        assert_eq!(
            display_relative(ws, Path::new("/srv/other/x")),
            "<outside the workspace>"
        );
    }

    #[test]
    fn missing_workspace_is_reported() {
        let (ws, _o, _) = setup();
        let gone = ws.path().join("missing");
        let err = resolve_in_workspace(&gone, "a").unwrap_err();
        assert!(matches!(err, PathError::Workspace { .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.contains("workspace is not usable"), "{text}");
        assert!(!text.contains(&ws.path().display().to_string()), "{text}");
    }
}
