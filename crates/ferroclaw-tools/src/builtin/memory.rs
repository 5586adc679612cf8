//! `memory_search` / `memory_get`: search and read the workspace's memory files
//! (`MEMORY.md`, `memory/**/*.md`) through the FTS5 index of [`crate::memory_index`].

use std::path::PathBuf;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{optional_u64, required_str, Workspace};
use crate::memory_index::{is_memory_path, MemoryIndex};
use crate::{Tool, ToolContext, ToolResult};

/// Results returned when the model does not say.
const DEFAULT_MAX_RESULTS: usize = 5;
/// Most results one search may return.
const MAX_RESULTS_CAP: usize = 50;
/// Lines `memory_get` returns at most in one call.
const MAX_GET_LINES: usize = 2_000;

/// Where the index lives; `None` = `<workspace>/.ferroclaw/memory.sqlite`.
#[derive(Debug, Clone, Default)]
pub struct MemorySettings {
    pub index_path: Option<PathBuf>,
}

pub struct MemorySearchTool {
    settings: MemorySettings,
}

impl MemorySearchTool {
    pub fn new(settings: MemorySettings) -> Self {
        Self { settings }
    }
}

pub struct MemoryGetTool;

/// Both memory tools.
pub fn memory_tools(settings: MemorySettings) -> Vec<std::sync::Arc<dyn Tool>> {
    vec![
        std::sync::Arc::new(MemorySearchTool::new(settings)),
        std::sync::Arc::new(MemoryGetTool),
    ]
}

#[async_trait]
impl Tool for MemorySearchTool {
    fn name(&self) -> &str {
        "memory_search"
    }

    fn description(&self) -> &str {
        "Search the long-term memory files (MEMORY.md and memory/**/*.md) by keywords. Returns file paths, line ranges, snippets and relevance scores; read more with memory_get."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words to search for."},
                "maxResults": {"type": "integer", "minimum": 1, "description": "Maximum results (default 5)."}
            },
            "required": ["query"]
        })
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> ToolResult {
        let ws = match Workspace::of(ctx) {
            Ok(ws) => ws,
            Err(e) => return e,
        };
        let query = match required_str(&args, &["query", "q"]) {
            Ok(q) => q.to_string(),
            Err(e) => return e,
        };
        let max = match optional_u64(&args, &["maxResults", "max_results", "limit"]) {
            Ok(n) => n
                .map(|n| (n as usize).clamp(1, MAX_RESULTS_CAP))
                .unwrap_or(DEFAULT_MAX_RESULTS),
            Err(e) => return e,
        };
        if crate::memory_index::fts_query(&query).is_none() {
            return ToolResult::error(format!(
                "memory_search: the query {query:?} contains no words to search for"
            ));
        }
        let root = ws.root().to_path_buf();
        let index_path = self.settings.index_path.clone();
        let q = query.clone();
        let result = tokio::task::spawn_blocking(move || {
            MemoryIndex::open(&root, index_path.as_deref())?.search(&q, max)
        })
        .await;
        let hits = match result {
            Ok(Ok(h)) => h,
            Ok(Err(e)) => return ToolResult::error(format!("memory_search failed: {e}")),
            Err(e) => return ToolResult::error(format!("memory_search failed: {e}")),
        };
        if hits.is_empty() {
            return ToolResult::ok(format!("No memory matches {query:?}."));
        }
        let mut out = format!("{} memory result(s) for {query:?}:\n", hits.len());
        for (i, h) in hits.iter().enumerate() {
            let snippet = h.snippet.split_whitespace().collect::<Vec<_>>().join(" ");
            out.push_str(&format!(
                "{}. {}:{}-{} (score {:.3})\n   {}\n",
                i + 1,
                h.path,
                h.start_line,
                h.end_line,
                h.score,
                snippet
            ));
        }
        ToolResult::ok(out.trim_end().to_string())
    }
}

#[async_trait]
impl Tool for MemoryGetTool {
    fn name(&self) -> &str {
        "memory_get"
    }

    fn description(&self) -> &str {
        "Read a memory file (MEMORY.md or memory/**/*.md), optionally a line range."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "MEMORY.md or a path under memory/."},
                "from": {"type": "integer", "minimum": 1, "description": "First line (1-based, default 1)."},
                "lines": {"type": "integer", "minimum": 1, "description": "Number of lines (default: to the end)."}
            },
            "required": ["path"]
        })
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> ToolResult {
        let ws = match Workspace::of(ctx) {
            Ok(ws) => ws,
            Err(e) => return e,
        };
        let path = match required_str(&args, &["path", "file"]) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let (from, lines) = match (
            optional_u64(&args, &["from", "startLine", "start_line"]),
            optional_u64(&args, &["lines", "count"]),
        ) {
            (Ok(f), Ok(l)) => (f.unwrap_or(1).max(1) as usize, l.map(|l| l as usize)),
            (Err(e), _) | (_, Err(e)) => return e,
        };
        let resolved = match ws.resolve(path) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let rel = resolved
            .strip_prefix(ws.root())
            .map(|p| p.to_path_buf())
            .unwrap_or_default();
        if !is_memory_path(&rel) {
            tracing::warn!(target: "security.paths", path = %path, "memory_get refused a non-memory path");
            return ToolResult::error(format!(
                "memory_get refused {path:?}: it only reads MEMORY.md and memory/**/*.md (use read for other files)"
            ));
        }
        let shown = ws.display(&resolved);
        let root = ws.root().to_path_buf();
        let read =
            tokio::task::spawn_blocking(move || crate::beneath::read(&root, &resolved)).await;
        let content = match read {
            Ok(Ok(b)) => String::from_utf8_lossy(&b).into_owned(),
            Ok(Err(crate::beneath::OpenError::NotFound)) => {
                return ToolResult::error(format!("memory file {shown} does not exist"))
            }
            Ok(Err(e)) => return ToolResult::error(format!("cannot read {shown}: {e}")),
            Err(e) => return ToolResult::error(format!("cannot read {shown}: {e}")),
        };
        let all: Vec<&str> = content.lines().collect();
        let total = all.len();
        if total == 0 {
            return ToolResult::ok(format!("{shown} is empty."));
        }
        if from > total {
            return ToolResult::error(format!(
                "{shown} has {total} lines; from={from} is past the end"
            ));
        }
        let count = lines.unwrap_or(total).clamp(1, MAX_GET_LINES);
        let end = (from - 1 + count).min(total);
        let mut out = format!("{shown} (lines {from}-{end} of {total}):\n");
        out.push_str(&all[from - 1..end].join("\n"));
        ToolResult::ok(out)
    }
}
