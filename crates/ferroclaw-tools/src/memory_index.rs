//! Full-text index over a workspace's memory files (`MEMORY.md` and `memory/**/*.md`),
//! kept in SQLite FTS5.
//!
//! Files are cut into chunks (a heading with the paragraph under it, or a paragraph; long
//! ones split) that remember their line range. Every search first brings the index up to
//! date: files whose mtime or size changed are re-indexed, deleted ones dropped, so the
//! index never needs a separate "rebuild" step. All calls are blocking (rusqlite); async
//! callers run them in `spawn_blocking`.

use std::path::{Component, Path, PathBuf};
use std::time::UNIX_EPOCH;

use rusqlite::{params, Connection, OptionalExtension};

/// Default index location, relative to the workspace.
pub const DEFAULT_INDEX_PATH: &str = ".ferroclaw/memory.sqlite";

/// Longest chunk, in lines, before it is split.
const MAX_CHUNK_LINES: usize = 40;

/// Terms of a query that are used (the rest is ignored): keeps queries cheap.
const MAX_QUERY_TERMS: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("memory index error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// `path` is a host path: kept for logs (`Debug`), not shown to the model.
    #[error("memory index I/O error: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// One search result.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryHit {
    /// Path relative to the workspace (`memory/2024-05.md`).
    pub path: String,
    pub start_line: usize,
    pub end_line: usize,
    pub snippet: String,
    /// Relevance (negated bm25): higher is better.
    pub score: f64,
}

/// What a sync changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncStats {
    pub indexed: usize,
    pub removed: usize,
    pub unchanged: usize,
}

/// One chunk of a markdown file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub heading: String,
    pub start_line: usize,
    pub end_line: usize,
    pub text: String,
}

pub struct MemoryIndex {
    conn: Connection,
    workspace: PathBuf,
}

/// Whether a workspace-relative path is a memory file (`MEMORY.md`, `memory.md`, or a
/// `.md` file under `memory/`).
pub fn is_memory_path(rel: &Path) -> bool {
    let comps: Vec<Component> = rel.components().collect();
    let is_md = rel
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("md"));
    match comps.as_slice() {
        [Component::Normal(n)] => *n == "MEMORY.md" || *n == "memory.md",
        [Component::Normal(first), rest @ ..] if !rest.is_empty() => {
            *first == "memory" && is_md && rest.iter().all(|c| matches!(c, Component::Normal(_)))
        }
        _ => false,
    }
}

/// Turns user text into an FTS5 query that can never be a syntax error: words (letters,
/// digits, `_`, any script) are each quoted as a string and joined with OR, so FTS
/// operators, quotes, `*`, `:` and parentheses in the input are just separators.
/// `None` when the text has no word at all.
pub fn fts_query(user: &str) -> Option<String> {
    let mut terms: Vec<String> = Vec::new();
    for word in user.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        if word.is_empty() {
            continue;
        }
        let quoted = format!("\"{word}\"");
        if !terms.contains(&quoted) {
            terms.push(quoted);
        }
        if terms.len() == MAX_QUERY_TERMS {
            break;
        }
    }
    (!terms.is_empty()).then(|| terms.join(" OR "))
}

fn heading_text(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let hashes = t.bytes().take_while(|b| *b == b'#').count();
    if (1..=6).contains(&hashes) && t[hashes..].starts_with([' ', '\t']) {
        Some(t[hashes..].trim().trim_end_matches('#').trim())
    } else {
        None
    }
}

/// Cuts markdown into chunks: a heading starts a chunk and stays with the paragraph below
/// it; blank lines end chunks (except inside code fences); long chunks are split.
pub fn chunk_markdown(text: &str) -> Vec<Chunk> {
    let mut chunks = Vec::new();
    let mut heading = String::new();
    let mut cur: Vec<&str> = Vec::new();
    let mut start = 1;
    let mut end = 1;
    let mut only_heading = false;
    let mut in_fence = false;
    let flush = |cur: &mut Vec<&str>,
                 (start, end): (usize, usize),
                 heading: &str,
                 chunks: &mut Vec<Chunk>| {
        if cur.iter().any(|l| !l.trim().is_empty()) {
            chunks.push(Chunk {
                heading: heading.to_string(),
                start_line: start,
                end_line: end,
                text: cur.join("\n"),
            });
        }
        cur.clear();
    };
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim_start().starts_with("```") || line.trim_start().starts_with("~~~") {
            in_fence = !in_fence;
        }
        if !in_fence {
            if let Some(h) = heading_text(line) {
                flush(&mut cur, (start, end), &heading, &mut chunks);
                heading = h.to_string();
                start = n;
                end = n;
                cur.push(line);
                only_heading = true;
                continue;
            }
            if line.trim().is_empty() {
                if !only_heading {
                    flush(&mut cur, (start, end), &heading, &mut chunks);
                }
                continue;
            }
        }
        if cur.is_empty() {
            start = n;
        }
        cur.push(line);
        end = n;
        only_heading = false;
        if cur.len() >= MAX_CHUNK_LINES {
            flush(&mut cur, (start, end), &heading, &mut chunks);
        }
    }
    flush(&mut cur, (start, end), &heading, &mut chunks);
    chunks
}

impl MemoryIndex {
    /// Opens (creating if needed) the index of `workspace` at `index_path`, or at
    /// [`DEFAULT_INDEX_PATH`] inside the workspace.
    pub fn open(workspace: &Path, index_path: Option<&Path>) -> Result<Self, MemoryError> {
        let db = match index_path {
            Some(p) => p.to_path_buf(),
            None => workspace.join(DEFAULT_INDEX_PATH),
        };
        if let Some(dir) = db.parent() {
            std::fs::create_dir_all(dir).map_err(|source| MemoryError::Io {
                path: dir.display().to_string(),
                source,
            })?;
        }
        let conn = Connection::open(&db)?;
        // Several runs may search at once; wait for the writer instead of failing.
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             CREATE TABLE IF NOT EXISTS files(
                 path TEXT PRIMARY KEY, mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL);
             CREATE VIRTUAL TABLE IF NOT EXISTS chunks USING fts5(
                 text, heading, path UNINDEXED, start_line UNINDEXED, end_line UNINDEXED,
                 tokenize = 'unicode61 remove_diacritics 2');",
        )?;
        Ok(Self {
            conn,
            workspace: workspace.to_path_buf(),
        })
    }

    /// Memory files currently on disk: (relative path, absolute path).
    fn files_on_disk(&self) -> Vec<(String, PathBuf)> {
        let mut out = Vec::new();
        let mut consider = |rel: String| {
            // Confined like every file tool: a symlink leading out is not indexed.
            if let Ok(abs) = crate::paths::resolve_in_workspace(&self.workspace, &rel) {
                if abs.is_file() {
                    out.push((rel, abs));
                }
            }
        };
        for top in ["MEMORY.md", "memory.md"] {
            if self.workspace.join(top).exists() {
                consider(top.to_string());
            }
        }
        let dir = self.workspace.join("memory");
        for entry in walkdir::WalkDir::new(&dir)
            .follow_links(false)
            .sort_by_file_name()
            .into_iter()
            .filter_map(Result::ok)
        {
            if entry.file_type().is_dir() {
                continue;
            }
            let Ok(rel) = entry.path().strip_prefix(&self.workspace) else {
                continue;
            };
            if is_memory_path(rel) {
                if let Some(s) = rel.to_str() {
                    consider(s.to_string());
                }
            }
        }
        out.sort();
        out.dedup_by(|a, b| a.1 == b.1);
        out
    }

    /// Brings the index up to date with the files on disk.
    pub fn sync(&mut self) -> Result<SyncStats, MemoryError> {
        let files = self.files_on_disk();
        let mut stats = SyncStats::default();
        let tx = self.conn.transaction()?;
        let known: Vec<String> = {
            let mut stmt = tx.prepare("SELECT path FROM files")?;
            let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
            rows.collect::<Result<_, _>>()?
        };
        for old in &known {
            if !files.iter().any(|(rel, _)| rel == old) {
                tx.execute("DELETE FROM chunks WHERE path = ?1", params![old])?;
                tx.execute("DELETE FROM files WHERE path = ?1", params![old])?;
                stats.removed += 1;
            }
        }
        for (rel, abs) in &files {
            let meta = std::fs::metadata(abs).map_err(|source| MemoryError::Io {
                path: rel.clone(),
                source,
            })?;
            let size = meta.len() as i64;
            let mtime = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_nanos() as i64)
                .unwrap_or(0);
            let indexed: Option<(i64, i64)> = tx
                .query_row(
                    "SELECT mtime_ns, size FROM files WHERE path = ?1",
                    params![rel],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            if indexed == Some((mtime, size)) {
                stats.unchanged += 1;
                continue;
            }
            // Beneath the workspace, regular files only (see `beneath`).
            let bytes =
                crate::beneath::read(&self.workspace, abs).map_err(|e| MemoryError::Io {
                    path: rel.clone(),
                    source: std::io::Error::other(e.to_string()),
                })?;
            let text = String::from_utf8_lossy(&bytes);
            tx.execute("DELETE FROM chunks WHERE path = ?1", params![rel])?;
            {
                let mut ins = tx.prepare(
                    "INSERT INTO chunks(text, heading, path, start_line, end_line) VALUES (?1, ?2, ?3, ?4, ?5)",
                )?;
                for c in chunk_markdown(&text) {
                    ins.execute(params![
                        c.text,
                        c.heading,
                        rel,
                        c.start_line as i64,
                        c.end_line as i64
                    ])?;
                }
            }
            tx.execute(
                "INSERT INTO files(path, mtime_ns, size) VALUES (?1, ?2, ?3)
                 ON CONFLICT(path) DO UPDATE SET mtime_ns = excluded.mtime_ns, size = excluded.size",
                params![rel, mtime, size],
            )?;
            stats.indexed += 1;
        }
        tx.commit()?;
        Ok(stats)
    }

    /// Syncs, then returns the best `max` chunks for `query` (empty when the query has no
    /// words or nothing matches).
    pub fn search(&mut self, query: &str, max: usize) -> Result<Vec<MemoryHit>, MemoryError> {
        self.sync()?;
        let Some(q) = fts_query(query) else {
            return Ok(Vec::new());
        };
        let mut stmt = self.conn.prepare(
            "SELECT path, start_line, end_line,
                    snippet(chunks, 0, '', '', ' … ', 24),
                    bm25(chunks, 1.0, 0.5) AS rank
             FROM chunks WHERE chunks MATCH ?1 ORDER BY rank LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![q, max as i64], |r| {
            Ok(MemoryHit {
                path: r.get(0)?,
                start_line: r.get::<_, i64>(1)? as usize,
                end_line: r.get::<_, i64>(2)? as usize,
                snippet: r.get(3)?,
                score: -r.get::<_, f64>(4)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_paths() {
        for ok in ["MEMORY.md", "memory.md", "memory/a.md", "memory/x/y/z.MD"] {
            assert!(is_memory_path(Path::new(ok)), "{ok}");
        }
        for no in [
            "README.md",
            "memory/a.txt",
            "memory",
            "other/memory/a.md",
            "../MEMORY.md",
            "memory/../x.md",
        ] {
            assert!(!is_memory_path(Path::new(no)), "{no}");
        }
    }

    #[test]
    fn queries_are_quoted_words() {
        assert_eq!(
            fts_query("hello world"),
            Some("\"hello\" OR \"world\"".into())
        );
        assert_eq!(
            fts_query("a\"b*c AND OR"),
            Some("\"a\" OR \"b\" OR \"c\" OR \"AND\" OR \"OR\"".into())
        );
        assert_eq!(fts_query("\"*():^-"), None);
        assert_eq!(fts_query("café 東京"), Some("\"café\" OR \"東京\"".into()));
    }

    #[test]
    fn chunks_keep_headings_and_lines() {
        let text = "# Title\n\nIntro line\nsecond\n\n## Sub\nbody\n\n```\ncode\n\nmore\n```\n";
        let c = chunk_markdown(text);
        assert_eq!(c[0].heading, "Title");
        assert_eq!(
            (c[0].start_line, c[0].end_line, c[0].text.as_str()),
            (1, 4, "# Title\nIntro line\nsecond")
        );
        assert_eq!(
            (c[1].heading.as_str(), c[1].start_line, c[1].end_line),
            ("Sub", 6, 7)
        );
        assert_eq!((c[2].start_line, c[2].end_line), (9, 13));
        assert_eq!(c.len(), 3);
    }
}
