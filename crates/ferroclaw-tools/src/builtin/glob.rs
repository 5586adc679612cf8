//! `glob`: find files by name pattern.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{optional_str, required_str, walk_files, PathMatcher, Workspace};
use crate::{Tool, ToolContext, ToolResult};

/// Most paths returned.
pub const MAX_RESULTS: usize = 1_000;

pub struct GlobTool;

#[async_trait]
impl Tool for GlobTool {
    fn name(&self) -> &str {
        "glob"
    }

    fn description(&self) -> &str {
        "Find files in the workspace by glob pattern, e.g. \"**/*.rs\" or \"src/*.ts\". A pattern without '/' matches file names at any depth. Skips .git, target and node_modules."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Glob pattern relative to the search directory (*, **, ?, [abc], {a,b})."},
                "path": {"type": "string", "description": "Directory to search in, relative to the workspace (default \".\")."}
            },
            "required": ["pattern"]
        })
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> ToolResult {
        let ws = match Workspace::of(ctx) {
            Ok(ws) => ws,
            Err(e) => return e,
        };
        let (pattern, path) = match (
            required_str(&args, &["pattern", "glob"]),
            optional_str(&args, &["path", "dir"]),
        ) {
            (Ok(p), Ok(d)) => (p, d.unwrap_or(".")),
            (Err(e), _) | (_, Err(e)) => return e,
        };
        let matcher = match PathMatcher::new(pattern) {
            Ok(m) => m,
            Err(e) => return e,
        };
        let base = match ws.resolve(path) {
            Ok(p) => p,
            Err(e) => return e,
        };
        if !base.is_dir() {
            return ToolResult::error(format!(
                "{} is not a directory in the workspace",
                ws.display(&base)
            ));
        }
        let cancel = ctx.cancel.clone();
        let root = ws.root().to_path_buf();
        let denied = ws.denied();
        let pattern = pattern.to_string();
        let task = tokio::task::spawn_blocking(move || {
            let mut found: Vec<String> = walk_files(&base, cancel, root.clone(), denied)
                .filter(|e| {
                    e.path()
                        .strip_prefix(&base)
                        .is_ok_and(|rel| matcher.is_match(rel))
                })
                .map(|e| crate::paths::display_relative(&root, e.path()))
                .collect();
            if found.is_empty() {
                return ToolResult::ok(format!("No files match {pattern:?}."));
            }
            found.sort();
            let total = found.len();
            found.truncate(MAX_RESULTS);
            let mut out = found.join("\n");
            if total > MAX_RESULTS {
                out.push_str(&format!(
                    "\n\n[Showing {MAX_RESULTS} of {total} matches; use a more specific pattern or path.]"
                ));
            }
            ToolResult::ok(out)
        });
        match task.await {
            Ok(r) => r,
            Err(e) => ToolResult::error(format!("glob failed: {e}")),
        }
    }
}
