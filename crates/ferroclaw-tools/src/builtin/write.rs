//! `write`: create or overwrite a file.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{required_str, Workspace};
use crate::{Tool, ToolContext, ToolResult};

pub struct WriteTool;

#[async_trait]
impl Tool for WriteTool {
    fn name(&self) -> &str {
        "write"
    }

    fn aliases(&self) -> &[&str] {
        &["write_file"]
    }

    fn description(&self) -> &str {
        "Create or overwrite a file in the workspace with the given content. Parent directories are created as needed."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace (or absolute inside it)."},
                "content": {"type": "string", "description": "The complete new content of the file."}
            },
            "required": ["path", "content"]
        })
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> ToolResult {
        let ws = match Workspace::of(ctx) {
            Ok(ws) => ws,
            Err(e) => return e,
        };
        let (path, content) = match (
            required_str(&args, &["path", "file_path", "file"]),
            required_str(&args, &["content", "text"]),
        ) {
            (Ok(p), Ok(c)) => (p, c),
            (Err(e), _) | (_, Err(e)) => return e,
        };
        let resolved = match ws.resolve(path) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let shown = ws.display(&resolved);
        if resolved.is_dir() {
            return ToolResult::error(format!("{shown} is a directory; give a file path to write"));
        }
        // Written beneath the workspace through verified directory handles (see `beneath`).
        let root = ws.root().to_path_buf();
        let len = content.len();
        let bytes = content.as_bytes().to_vec();
        let task = tokio::task::spawn_blocking(move || {
            crate::beneath::write(&root, &resolved, &bytes, true)
        });
        match task.await {
            Ok(Ok(())) => ToolResult::ok(format!("Wrote {len} bytes to {shown}")),
            Ok(Err(e)) => ToolResult::error(format!("cannot write {shown}: {e}")),
            Err(e) => ToolResult::error(format!("cannot write {shown}: {e}")),
        }
    }
}
