//! `grep`: search file contents with a regular expression.

use std::path::Path;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{
    looks_binary, optional_bool, optional_str, required_str, walk_files, PathMatcher, Workspace,
};
use crate::paths::display_relative;
use crate::{Tool, ToolContext, ToolResult};

/// Most matching lines returned.
pub const MAX_MATCHES: usize = 200;
/// Files larger than this are skipped (logs, dumps, generated bundles).
pub const MAX_FILE_BYTES: u64 = 5 * 1024 * 1024;
/// A matching line is cut to this many characters so one minified file cannot flood the output.
const MAX_LINE_CHARS: usize = 300;

pub struct GrepTool;

#[async_trait]
impl Tool for GrepTool {
    fn name(&self) -> &str {
        "grep"
    }

    fn description(&self) -> &str {
        "Search file contents in the workspace with a regular expression (Rust regex syntax). Prints file:line: text. Skips binary files, files over 5 MB, .git, target and node_modules."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression to search for."},
                "path": {"type": "string", "description": "File or directory to search, relative to the workspace (default \".\")."},
                "glob": {"type": "string", "description": "Only search files matching this glob, e.g. \"*.rs\" or \"src/**/*.ts\"."},
                "ignoreCase": {"type": "boolean", "description": "Case-insensitive search (default false)."}
            },
            "required": ["pattern"]
        })
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> ToolResult {
        let ws = match Workspace::of(ctx) {
            Ok(ws) => ws,
            Err(e) => return e,
        };
        let (pattern, path, glob, ignore_case) = match (
            required_str(&args, &["pattern", "regex", "query"]),
            optional_str(&args, &["path", "dir"]),
            optional_str(&args, &["glob", "include"]),
            optional_bool(
                &args,
                &["ignoreCase", "ignore_case", "caseInsensitive", "-i"],
            ),
        ) {
            (Ok(p), Ok(d), Ok(g), Ok(i)) => (p, d.unwrap_or("."), g, i.unwrap_or(false)),
            (Err(e), ..) | (_, Err(e), ..) | (_, _, Err(e), _) | (.., Err(e)) => return e,
        };
        let regex = match regex::RegexBuilder::new(pattern)
            .case_insensitive(ignore_case)
            .build()
        {
            Ok(r) => r,
            Err(e) => {
                return ToolResult::error(format!("invalid regular expression {pattern:?}: {e}"))
            }
        };
        let matcher = match glob.map(PathMatcher::new).transpose() {
            Ok(m) => m,
            Err(e) => return e,
        };
        let base = match ws.resolve(path) {
            Ok(p) => p,
            Err(e) => return e,
        };
        if !base.exists() {
            return ToolResult::error(format!("path not found: {}", ws.display(&base)));
        }
        let cancel = ctx.cancel.clone();
        let root = ws.root().to_path_buf();
        let denied = ws.denied();
        let pattern = pattern.to_string();
        let task = tokio::task::spawn_blocking(move || {
            let mut search = Search {
                regex,
                root: &root,
                lines: Vec::new(),
                total: 0,
                skipped_large: 0,
            };
            if base.is_file() {
                search.file(&base);
            } else {
                for entry in walk_files(&base, cancel, root.clone(), denied) {
                    let wanted = matcher.as_ref().is_none_or(|m| {
                        entry
                            .path()
                            .strip_prefix(&base)
                            .is_ok_and(|rel| m.is_match(rel))
                    });
                    if wanted {
                        search.file(entry.path());
                    }
                }
            }
            search.report(&pattern)
        });
        match task.await {
            Ok(r) => r,
            Err(e) => ToolResult::error(format!("grep failed: {e}")),
        }
    }
}

struct Search<'a> {
    regex: regex::Regex,
    root: &'a Path,
    lines: Vec<String>,
    /// All matching lines, including those past the cap, so the note can say how many.
    total: usize,
    skipped_large: usize,
}

impl Search<'_> {
    fn file(&mut self, path: &Path) {
        // Symlinks are not followed: a link inside the workspace may point anywhere.
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return;
        };
        if !meta.is_file() {
            return;
        }
        if meta.len() > MAX_FILE_BYTES {
            self.skipped_large += 1;
            return;
        }
        // Unreadable files are skipped like binary ones; grep reports what it can. Read
        // beneath the workspace: a directory swapped for a symlink since the walk listed
        // it must not lead the read out.
        let Ok(bytes) = crate::beneath::read(self.root, path) else {
            return;
        };
        if looks_binary(&bytes) {
            return;
        }
        let text = String::from_utf8_lossy(&bytes);
        let shown = display_relative(self.root, path);
        for (i, line) in text.lines().enumerate() {
            if !self.regex.is_match(line) {
                continue;
            }
            self.total += 1;
            if self.lines.len() < MAX_MATCHES {
                let mut cut: String = line.chars().take(MAX_LINE_CHARS).collect();
                if cut.len() < line.len() {
                    cut.push_str(" …");
                }
                self.lines.push(format!("{shown}:{}: {cut}", i + 1));
            }
        }
    }

    fn report(self, pattern: &str) -> ToolResult {
        let mut out = if self.lines.is_empty() {
            format!("No matches for {pattern:?}.")
        } else {
            self.lines.join("\n")
        };
        if self.total > self.lines.len() {
            out.push_str(&format!(
                "\n\n[Showing {} of {} matching lines; narrow the search with path or glob.]",
                self.lines.len(),
                self.total
            ));
        }
        if self.skipped_large > 0 {
            out.push_str(&format!(
                "\n[Skipped {} files larger than {} MB.]",
                self.skipped_large,
                MAX_FILE_BYTES / (1024 * 1024)
            ));
        }
        ToolResult::ok(out)
    }
}
