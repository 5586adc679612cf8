//! `read`: a window of lines from a text file.

use std::io::{BufRead, BufReader};
use std::path::Path;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{looks_binary, optional_u64, required_str, Workspace};
use crate::beneath::OpenError;
use crate::{Tool, ToolContext, ToolResult};

/// Most lines returned by one call.
pub const MAX_LINES: usize = 2_000;
/// Most characters returned by one call (a few long lines can be as costly as many short).
pub const MAX_CHARS: usize = 50_000;

pub struct ReadTool;

#[async_trait]
impl Tool for ReadTool {
    fn name(&self) -> &str {
        "read"
    }

    fn aliases(&self) -> &[&str] {
        &["read_file"]
    }

    fn description(&self) -> &str {
        "Read a text file in the workspace. Returns at most 2000 lines / 50000 characters per call; use offset and limit to page through longer files."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace (or absolute inside it)."},
                "offset": {"type": "integer", "minimum": 1, "description": "1-based line number to start from (default 1)."},
                "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines to return (default and maximum 2000)."}
            },
            "required": ["path"]
        })
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> ToolResult {
        let ws = match Workspace::of(ctx) {
            Ok(ws) => ws,
            Err(e) => return e,
        };
        let (path, offset, limit) = match (
            required_str(&args, &["path", "file_path", "file"]),
            optional_u64(&args, &["offset"]),
            optional_u64(&args, &["limit"]),
        ) {
            (Ok(p), Ok(o), Ok(l)) => (p, o, l),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return e,
        };
        let resolved = match ws.resolve(path) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let shown = ws.display(&resolved);
        // Offset 0 is read as "from the start" rather than rejected: models use both bases.
        let first = offset.unwrap_or(1).max(1) as usize;
        let limit = match limit {
            Some(0) => return ToolResult::error("limit must be at least 1"),
            Some(l) => (l as usize).min(MAX_LINES),
            None => MAX_LINES,
        };
        let root = ws.root().to_path_buf();
        let task = tokio::task::spawn_blocking(move || {
            read_window(&root, &resolved, &shown, first, limit)
        });
        match task.await {
            Ok(result) => result,
            Err(e) => ToolResult::error(format!("read failed: {e}")),
        }
    }
}

/// Streams the file so that huge files cost memory only for the returned window.
fn read_window(root: &Path, path: &Path, shown: &str, first: usize, limit: usize) -> ToolResult {
    let file = match crate::beneath::open_read(root, path) {
        Ok(f) => f,
        Err(OpenError::NotFound) => return ToolResult::error(format!("file not found: {shown}")),
        Err(OpenError::IsDir) => {
            return ToolResult::error(format!(
                "{shown} is a directory, not a file; use ls to list its contents"
            ))
        }
        Err(e) => return ToolResult::error(format!("cannot read {shown}: {e}")),
    };
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    match reader.fill_buf() {
        Ok(head) if looks_binary(head) => {
            return ToolResult::error(format!(
                "{shown} looks like a binary file ({size} bytes); read only handles text"
            ))
        }
        Ok([]) => return ToolResult::ok(format!("[{shown} is empty]")),
        Ok(_) => {}
        Err(e) => return ToolResult::error(format!("cannot read {shown}: {e}")),
    }

    let mut out = String::new();
    let mut out_chars = 0usize;
    let mut line_no = 0usize;
    let mut last_shown: Option<usize> = None;
    let mut char_capped = false;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let wanted = line_no + 1 >= first && line_no + 1 < first + limit && !char_capped;
        // Lines we will not show are consumed without being stored; the rest of the file
        // is still scanned so the note can say how many lines there are.
        let keep = if wanted { MAX_CHARS * 4 } else { 0 };
        match next_line(&mut reader, keep, &mut buf) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => return ToolResult::error(format!("error reading {shown}: {e}")),
        }
        line_no += 1;
        if !wanted {
            continue;
        }
        let text = String::from_utf8_lossy(&buf);
        let text = text.strip_suffix('\n').unwrap_or(&text);
        let text = text.strip_suffix('\r').unwrap_or(text);
        let len = text.chars().count();
        let sep = usize::from(last_shown.is_some());
        if out_chars + sep + len > MAX_CHARS {
            char_capped = true;
            if last_shown.is_none() {
                // A single line longer than the whole budget: show its start rather than nothing.
                out.extend(text.chars().take(MAX_CHARS));
                out.push_str(&format!(
                    "\n[line {line_no} is longer than {MAX_CHARS} characters and was cut; use grep or exec to inspect it]"
                ));
                last_shown = Some(line_no);
            }
            continue;
        }
        if sep == 1 {
            out.push('\n');
        }
        out.push_str(text);
        out_chars += sep + len;
        last_shown = Some(line_no);
    }
    let total = line_no;
    let Some(last_shown) = last_shown else {
        return ToolResult::error(format!(
            "offset {first} is beyond the end of {shown}, which has {total} lines"
        ));
    };
    if last_shown < total {
        out.push_str(&format!(
            "\n\n[Showing lines {first}-{last_shown} of {total} in {shown}. Use offset={} to continue.]",
            last_shown + 1
        ));
    }
    ToolResult::ok(out)
}

/// Reads one line (including its `\n`) into `out`, storing at most `keep` bytes of it but
/// always consuming all of it. Returns false at end of file.
fn next_line<R: BufRead>(reader: &mut R, keep: usize, out: &mut Vec<u8>) -> std::io::Result<bool> {
    let mut any = false;
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            return Ok(any);
        }
        any = true;
        let (take, done) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let room = keep.saturating_sub(out.len());
        out.extend_from_slice(&chunk[..take.min(room)]);
        reader.consume(take);
        if done {
            return Ok(true);
        }
    }
}
