//! `edit`: replace one exact occurrence of a text in a file.

use std::path::Path;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{looks_binary, required_str, Workspace};
use crate::beneath::OpenError;
use crate::{Tool, ToolContext, ToolResult};

pub struct EditTool;

/// Spellings of the two text arguments seen from different model families.
const OLD_NAMES: &[&str] = &["oldText", "old_text", "old_string", "oldString"];
const NEW_NAMES: &[&str] = &["newText", "new_text", "new_string", "newString"];

#[async_trait]
impl Tool for EditTool {
    fn name(&self) -> &str {
        "edit"
    }

    fn aliases(&self) -> &[&str] {
        &["edit_file"]
    }

    fn description(&self) -> &str {
        "Edit a file by replacing an exact text with a new text. oldText must match exactly once (including whitespace); add surrounding lines to make it unique."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace (or absolute inside it)."},
                "oldText": {"type": "string", "description": "Exact text to replace; must occur exactly once in the file."},
                "newText": {"type": "string", "description": "Text to put in its place."}
            },
            "required": ["path", "oldText", "newText"]
        })
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> ToolResult {
        let ws = match Workspace::of(ctx) {
            Ok(ws) => ws,
            Err(e) => return e,
        };
        let (path, old, new) = match (
            required_str(&args, &["path", "file_path", "file"]),
            required_str(&args, OLD_NAMES),
            required_str(&args, NEW_NAMES),
        ) {
            (Ok(p), Ok(o), Ok(n)) => (p, o, n),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return e,
        };
        if old.is_empty() {
            return ToolResult::error(
                "oldText is empty; give the exact text to replace (use write to create a file)",
            );
        }
        if old == new {
            return ToolResult::error("oldText and newText are identical; nothing to change");
        }
        let resolved = match ws.resolve(path) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let shown = ws.display(&resolved);
        let root = ws.root().to_path_buf();
        let read = {
            let (root, resolved) = (root.clone(), resolved.clone());
            tokio::task::spawn_blocking(move || crate::beneath::read(&root, &resolved)).await
        };
        let bytes = match read {
            Ok(Ok(b)) => b,
            Ok(Err(OpenError::NotFound)) => {
                return ToolResult::error(format!("file not found: {shown}"))
            }
            Ok(Err(OpenError::IsDir)) => {
                return ToolResult::error(format!("{shown} is a directory, not a file"))
            }
            Ok(Err(e)) => return ToolResult::error(format!("cannot read {shown}: {e}")),
            Err(e) => return ToolResult::error(format!("cannot read {shown}: {e}")),
        };
        if looks_binary(&bytes) {
            return ToolResult::error(format!(
                "{shown} looks like a binary file; edit only handles text"
            ));
        }
        let Ok(content) = String::from_utf8(bytes) else {
            return ToolResult::error(format!(
                "{shown} is not valid UTF-8; edit cannot change it safely"
            ));
        };

        let (old, new) = match adapt_line_endings(&content, old, new) {
            Some(pair) => pair,
            None => return ToolResult::error(format!("oldText not found in {shown}")),
        };
        let matches = match_offsets(&content, &old);
        match matches.as_slice() {
            [] => ToolResult::error(format!("oldText not found in {shown}")),
            [at] => {
                let updated = format!("{}{}{}", &content[..*at], new, &content[at + old.len()..]);
                let line = line_of(&content, *at);
                match write_atomically(&root, &resolved, updated.as_bytes()).await {
                    Ok(()) => ToolResult::ok(format!(
                        "Edited {shown}: replaced 1 occurrence at line {line}."
                    )),
                    Err(e) => ToolResult::error(format!("cannot write {shown}: {e}")),
                }
            }
            several => {
                let lines: Vec<String> = several
                    .iter()
                    .map(|at| line_of(&content, *at).to_string())
                    .collect();
                ToolResult::error(format!(
                    "oldText matches {} times in {shown} (at lines {}); it must match exactly once, so include more surrounding text to make it unique",
                    several.len(),
                    lines.join(", ")
                ))
            }
        }
    }
}

/// When the file uses CRLF but the model sent LF (the usual case), translate both texts so
/// the edit matches and keeps the file's line endings. `None` if nothing can match.
fn adapt_line_endings(content: &str, old: &str, new: &str) -> Option<(String, String)> {
    if content.contains(old) {
        return Some((old.to_string(), new.to_string()));
    }
    if content.contains("\r\n") && old.contains('\n') && !old.contains("\r\n") {
        let crlf = |s: &str| s.replace("\r\n", "\n").replace('\n', "\r\n");
        let old_crlf = crlf(old);
        if content.contains(&old_crlf) {
            return Some((old_crlf, crlf(new)));
        }
    }
    None
}

/// Byte offsets of every occurrence, overlapping ones included: "aa" in "aaa" is ambiguous.
fn match_offsets(haystack: &str, needle: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(i) = haystack[from..].find(needle) {
        let at = from + i;
        found.push(at);
        // Step one character, not one byte, to stay on a char boundary.
        from = at + haystack[at..].chars().next().map_or(1, char::len_utf8);
    }
    found
}

fn line_of(content: &str, byte_offset: usize) -> usize {
    content[..byte_offset]
        .bytes()
        .filter(|b| *b == b'\n')
        .count()
        + 1
}

/// Replaces the file at `path` beneath `root` with `data` through a temporary file in
/// the same directory, keeping its permissions (see `beneath::write`).
pub(crate) async fn write_atomically(
    root: &Path,
    path: &Path,
    data: &[u8],
) -> Result<(), OpenError> {
    let (root, path, data) = (root.to_path_buf(), path.to_path_buf(), data.to_vec());
    tokio::task::spawn_blocking(move || crate::beneath::write(&root, &path, &data, false))
        .await
        .map_err(|e| OpenError::Io(std::io::Error::other(e.to_string())))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_matches_are_counted() {
        assert_eq!(match_offsets("aaa", "aa"), vec![0, 1]);
        assert_eq!(match_offsets("é-é", "é"), vec![0, 3]);
    }

    #[test]
    fn crlf_is_adapted() {
        let (o, n) = adapt_line_endings("a\r\nb\r\n", "a\nb", "x\ny").unwrap();
        assert_eq!(o, "a\r\nb");
        assert_eq!(n, "x\r\ny");
    }
}
