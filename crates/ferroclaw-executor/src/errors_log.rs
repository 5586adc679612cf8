//! Every error is also appended, one line each, to `<error_log_dir>/YYYY-MM-DD-errors.md`
//! (UTC date), under a `## YYYY-MM-DD` header written when the day's file is created:
//!
//! ```text
//! [09:16:15] gpt_oss | Error: HTTP 503: overloaded | Attempted fix: retry 1 of 3 after 1000 ms | Status: retrying | run: run-1a2b
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

#[derive(Debug)]
pub struct ErrorLog {
    dir: Option<PathBuf>,
    pattern: String,
    lock: Mutex<()>,
}

/// One entry; `component` is `gpt_oss`, a tool name, `executor` or `http`.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    pub component: &'a str,
    pub error: &'a str,
    pub attempted_fix: &'a str,
    pub status: &'a str,
    pub run_id: Option<&'a str>,
}

impl ErrorLog {
    pub fn new(dir: Option<PathBuf>, pattern: &str) -> Self {
        let pattern = if pattern.trim().is_empty() {
            "YYYY-MM-DD-errors.md".to_string()
        } else {
            pattern.to_string()
        };
        Self {
            dir,
            pattern,
            lock: Mutex::new(()),
        }
    }

    /// No file at all (unit tests).
    pub fn disabled() -> Self {
        Self::new(None, "")
    }

    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Path of today's file.
    pub fn path_for(&self, date: &str) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join(self.pattern.replace("YYYY-MM-DD", date)))
    }

    /// Appends one entry; I/O failures are returned for the caller to report, never fatal.
    pub fn append(&self, e: Entry<'_>) -> std::io::Result<()> {
        let (date, time) = now_utc();
        let Some(path) = self.path_for(&date) else {
            return Ok(());
        };
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let fresh = !path.exists();
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        let mut text = String::new();
        if fresh {
            text.push_str(&format!("## {date}\n\n"));
        }
        text.push_str(&format!(
            "[{time}] {} | Error: {} | Attempted fix: {} | Status: {}",
            one_line(e.component),
            one_line(e.error),
            one_line(e.attempted_fix),
            one_line(e.status),
        ));
        if let Some(run) = e.run_id {
            text.push_str(&format!(" | run: {run}"));
        }
        text.push('\n');
        f.write_all(text.as_bytes())
    }
}

/// Entries are single lines: newlines and the `|` separator would break the format.
fn one_line(s: &str) -> String {
    let s: String = s
        .chars()
        .map(|c| match c {
            '\n' | '\r' => ' ',
            '|' => '/',
            c => c,
        })
        .collect();
    let s = s.trim();
    if s.chars().count() > 500 {
        let cut: String = s.chars().take(500).collect();
        format!("{cut}…")
    } else {
        s.to_string()
    }
}

/// `("YYYY-MM-DD", "HH:MM:SS")` in UTC.
fn now_utc() -> (String, String) {
    let ts = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    // `2026-02-28T09:15:30Z`
    let date = ts.get(..10).unwrap_or("1970-01-01").to_string();
    let time = ts.get(11..19).unwrap_or("00:00:00").to_string();
    (date, time)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_once_per_file_and_one_line_entries() {
        let dir = tempfile::tempdir().unwrap();
        let log = ErrorLog::new(Some(dir.path().join("logs")), "YYYY-MM-DD-errors.md");
        for i in 0..2 {
            log.append(Entry {
                component: "web_fetch",
                error: &format!("404 not found\nline {i} | x"),
                attempted_fix: "injected error into context",
                status: "continued",
                run_id: Some("run-1"),
            })
            .unwrap();
        }
        let (date, _) = now_utc();
        let text = std::fs::read_to_string(log.path_for(&date).unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], format!("## {date}"));
        assert_eq!(text.matches("## ").count(), 1);
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[2].starts_with('['));
        assert!(lines[2].contains(
            "] web_fetch | Error: 404 not found line 0 / x | Attempted fix: injected error into context | Status: continued | run: run-1"
        ));
    }
}
