//! The core tools every agent gets: filesystem access confined to the workspace, search,
//! and a shell.

mod edit;
mod exec;
mod glob;
mod grep;
mod ls;
mod read;
mod write;
// Web, patch and memory tools (not part of `core_tools`; built from their settings).
pub mod apply_patch;
pub mod memory;
pub mod web_fetch;
pub mod web_search;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use edit::EditTool;
pub use exec::{is_secret_env_name, ExecTool};
pub(crate) use exec::{run_foreground, DEFAULT_MAX_OUTPUT};
pub use glob::GlobTool;
pub use grep::GrepTool;
pub use ls::LsTool;
pub use read::ReadTool;
pub use write::WriteTool;

use crate::path_guard::DeniedPaths;
use crate::paths::{canonical_workspace, display_relative, resolve_in_workspace};
use crate::{Tool, ToolContext, ToolResult};

/// All core tools, in the order they are presented to the model.
pub fn core_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ReadTool),
        Arc::new(WriteTool),
        Arc::new(EditTool),
        Arc::new(LsTool),
        Arc::new(GlobTool),
        Arc::new(GrepTool),
        Arc::new(ExecTool::new()),
    ]
}

/// How many leading bytes are inspected to decide whether a file is binary.
const BINARY_SNIFF_BYTES: usize = 8192;

/// A NUL byte near the start is the same heuristic git and grep use.
pub(crate) fn looks_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(BINARY_SNIFF_BYTES)].contains(&0)
}

/// The first argument present under any of `names` (models spell keys differently);
/// JSON `null` counts as absent.
fn arg<'a>(args: &'a Value, names: &[&'static str]) -> Option<(&'static str, &'a Value)> {
    names.iter().find_map(|n| match args.get(*n) {
        Some(Value::Null) | None => None,
        Some(v) => Some((*n, v)),
    })
}

pub(crate) fn optional_str<'a>(
    args: &'a Value,
    names: &[&'static str],
) -> Result<Option<&'a str>, ToolResult> {
    match arg(args, names) {
        None => Ok(None),
        Some((_, Value::String(s))) => Ok(Some(s)),
        Some((n, _)) => Err(ToolResult::error(format!(
            "argument \"{n}\" must be a string"
        ))),
    }
}

pub(crate) fn required_str<'a>(
    args: &'a Value,
    names: &[&'static str],
) -> Result<&'a str, ToolResult> {
    optional_str(args, names)?.ok_or_else(|| {
        ToolResult::error(format!(
            "missing required argument \"{}\" (string)",
            names.first().copied().unwrap_or("?")
        ))
    })
}

/// Non-negative integer; numeric strings are accepted because some models quote numbers.
pub(crate) fn optional_u64(
    args: &Value,
    names: &[&'static str],
) -> Result<Option<u64>, ToolResult> {
    let Some((n, v)) = arg(args, names) else {
        return Ok(None);
    };
    let parsed = match v {
        Value::Number(num) => num.as_u64().or_else(|| {
            num.as_f64()
                .filter(|f| *f >= 0.0 && f.fract() == 0.0)
                .map(|f| f as u64)
        }),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    };
    parsed.map(Some).ok_or_else(|| {
        ToolResult::error(format!(
            "argument \"{n}\" must be a non-negative integer, got {v}"
        ))
    })
}

pub(crate) fn optional_f64(
    args: &Value,
    names: &[&'static str],
) -> Result<Option<f64>, ToolResult> {
    let Some((n, v)) = arg(args, names) else {
        return Ok(None);
    };
    let parsed = match v {
        Value::Number(num) => num.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    parsed
        .filter(|f| f.is_finite())
        .map(Some)
        .ok_or_else(|| ToolResult::error(format!("argument \"{n}\" must be a number, got {v}")))
}

pub(crate) fn optional_bool(
    args: &Value,
    names: &[&'static str],
) -> Result<Option<bool>, ToolResult> {
    match arg(args, names) {
        None => Ok(None),
        Some((_, Value::Bool(b))) => Ok(Some(*b)),
        Some((_, Value::String(s))) if s.eq_ignore_ascii_case("true") => Ok(Some(true)),
        Some((_, Value::String(s))) if s.eq_ignore_ascii_case("false") => Ok(Some(false)),
        Some((n, v)) => Err(ToolResult::error(format!(
            "argument \"{n}\" must be true or false, got {v}"
        ))),
    }
}

/// The canonical workspace of one call, used to resolve and to display paths.
pub(crate) struct Workspace {
    root: PathBuf,
    /// Denied prefixes of the current call (set by the registry, see `path_guard`).
    denied: DeniedPaths,
}

impl Workspace {
    pub(crate) fn of(ctx: &ToolContext) -> Result<Self, ToolResult> {
        canonical_workspace(&ctx.workspace)
            .map(|root| Self {
                root,
                denied: DeniedPaths::current(),
            })
            .map_err(|e| ToolResult::error(e.to_string()))
    }

    /// The deny list, for walks that run off the async task (`spawn_blocking`).
    pub(crate) fn denied(&self) -> DeniedPaths {
        self.denied.clone()
    }

    /// True if `path`, an entry of an allowed directory, is denied.
    pub(crate) fn is_denied_entry(&self, path: &Path) -> bool {
        self.denied.is_denied_entry(&self.root, path)
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    pub(crate) fn resolve(&self, user_path: &str) -> Result<PathBuf, ToolResult> {
        let resolved = resolve_in_workspace(&self.root, user_path)
            .map_err(|e| ToolResult::error(e.to_string()))?;
        self.denied
            .check(&self.root, &resolved, user_path)
            .map_err(|e| ToolResult::error(e.to_string()))?;
        Ok(resolved)
    }

    pub(crate) fn display(&self, path: &Path) -> String {
        display_relative(&self.root, path)
    }
}

/// Directories no search descends into: VCS metadata and build output are noise.
const SKIPPED_DIRS: &[&str] = &[".git", "target", "node_modules"];

/// Files under `root` (not following symlinks, so a link cannot lead the walk out of the
/// workspace), skipping [`SKIPPED_DIRS`] below the root. Stops early when `cancel` fires.
/// Never enters (nor yields) entries under a denied prefix of `workspace`.
pub(crate) fn walk_files(
    root: &Path,
    cancel: CancellationToken,
    workspace: PathBuf,
    denied: DeniedPaths,
) -> impl Iterator<Item = walkdir::DirEntry> {
    walkdir::WalkDir::new(root)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(move |e| {
            !(e.depth() > 0
                && e.file_type().is_dir()
                && e.file_name()
                    .to_str()
                    .is_some_and(|n| SKIPPED_DIRS.contains(&n)))
                && (denied.is_empty() || !denied.is_denied_entry(&workspace, e.path()))
        })
        // Unreadable directories are skipped rather than failing the whole search.
        .filter_map(Result::ok)
        .take_while(move |_| !cancel.is_cancelled())
        .filter(|e| !e.file_type().is_dir())
}

/// A glob as models write it: a pattern without `/` (e.g. `*.rs`) matches file names at any
/// depth; a pattern with `/` (e.g. `src/**/*.rs`) matches the path relative to the search root.
pub(crate) struct PathMatcher {
    matcher: globset::GlobMatcher,
    name_only: bool,
}

impl PathMatcher {
    pub(crate) fn new(pattern: &str) -> Result<Self, ToolResult> {
        let trimmed = pattern.trim().trim_start_matches("./");
        if trimmed.is_empty() {
            return Err(ToolResult::error("glob pattern is empty"));
        }
        if trimmed.starts_with('/') || trimmed.split('/').any(|c| c == "..") {
            return Err(ToolResult::error(format!(
                "glob pattern {pattern:?} must be relative and must not contain '..'; use the \"path\" argument to choose the directory to search"
            )));
        }
        let glob = globset::GlobBuilder::new(trimmed)
            .literal_separator(true)
            .build()
            .map_err(|e| ToolResult::error(format!("invalid glob pattern {pattern:?}: {e}")))?;
        Ok(Self {
            matcher: glob.compile_matcher(),
            name_only: !trimmed.contains('/'),
        })
    }

    pub(crate) fn is_match(&self, relative: &Path) -> bool {
        if self.name_only {
            relative
                .file_name()
                .is_some_and(|n| self.matcher.is_match(Path::new(n)))
        } else {
            self.matcher.is_match(relative)
        }
    }
}
