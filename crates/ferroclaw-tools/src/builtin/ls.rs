//! `ls`: the entries of one directory.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{optional_str, Workspace};
use crate::{Tool, ToolContext, ToolResult};

/// Most entries listed; a huge directory is better explored with glob.
pub const MAX_ENTRIES: usize = 500;

pub struct LsTool;

#[async_trait]
impl Tool for LsTool {
    fn name(&self) -> &str {
        "ls"
    }

    fn aliases(&self) -> &[&str] {
        &["list_files"]
    }

    fn description(&self) -> &str {
        "List a directory in the workspace (default: the workspace root). Directories end with '/', symlinks with '@'."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Directory to list, relative to the workspace (default \".\")."}
            },
            "required": []
        })
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> ToolResult {
        let ws = match Workspace::of(ctx) {
            Ok(ws) => ws,
            Err(e) => return e,
        };
        let path = match optional_str(&args, &["path", "dir", "directory"]) {
            Ok(p) => p.unwrap_or("."),
            Err(e) => return e,
        };
        let resolved = match ws.resolve(path) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let shown = ws.display(&resolved);
        // Listed through a handle opened beneath the workspace: a directory swapped for a
        // symlink after the check cannot make us list somewhere else.
        let handle = {
            let (root, resolved) = (ws.root().to_path_buf(), resolved.clone());
            tokio::task::spawn_blocking(move || crate::beneath::open_dir(&root, &resolved)).await
        };
        let handle = match handle {
            Ok(Ok(fd)) => fd,
            Ok(Err(crate::beneath::OpenError::NotFound)) => {
                return ToolResult::error(format!("directory not found: {shown}"))
            }
            _ if resolved.is_file() => {
                return ToolResult::error(format!(
                    "{shown} is a file, not a directory; use read to see its content"
                ))
            }
            Ok(Err(e)) => return ToolResult::error(format!("cannot list {shown}: {e}")),
            Err(e) => return ToolResult::error(format!("cannot list {shown}: {e}")),
        };
        let mut dir = match tokio::fs::read_dir(crate::beneath::fd_path(&handle)).await {
            Ok(d) => d,
            Err(e) => return ToolResult::error(format!("cannot list {shown}: {e}")),
        };
        let mut entries = Vec::new();
        loop {
            match dir.next_entry().await {
                Ok(Some(entry)) => {
                    // Denied entries are not listed at all: the model should not
                    // learn they exist, let alone try paths under them.
                    if ws.is_denied_entry(&resolved.join(entry.file_name())) {
                        continue;
                    }
                    let mut name = entry.file_name().to_string_lossy().into_owned();
                    match entry.file_type().await {
                        Ok(t) if t.is_dir() => name.push('/'),
                        Ok(t) if t.is_symlink() => name.push('@'),
                        _ => {}
                    }
                    entries.push(name);
                }
                Ok(None) => break,
                Err(e) => return ToolResult::error(format!("error while listing {shown}: {e}")),
            }
        }
        if entries.is_empty() {
            return ToolResult::ok(format!("[{shown} is empty]"));
        }
        entries.sort();
        let total = entries.len();
        entries.truncate(MAX_ENTRIES);
        let mut out = entries.join("\n");
        if total > MAX_ENTRIES {
            out.push_str(&format!(
                "\n\n[Showing {MAX_ENTRIES} of {total} entries in {shown}; use glob with a pattern to narrow down.]"
            ));
        }
        ToolResult::ok(out)
    }
}
