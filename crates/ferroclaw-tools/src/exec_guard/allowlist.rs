//! The allowlist that `allow-always` approvals add to, persisted as
//! `<home>/data/exec-allowlist.json` (`{"version":1,"entries":["git","npm run"]}`).

use std::path::{Path, PathBuf};
use std::sync::RwLock;

use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct FileFormat {
    version: u32,
    entries: Vec<String>,
}

/// Entries approved for good. Reads never block on I/O; each addition rewrites the file
/// atomically (temp file + rename) so a crash never leaves a half-written list.
#[derive(Debug, Default)]
pub struct ExecAllowlist {
    path: Option<PathBuf>,
    entries: RwLock<Vec<String>>,
}

impl ExecAllowlist {
    /// An allowlist kept in memory only (tests, embedders without a home).
    pub fn in_memory() -> Self {
        Self::default()
    }

    /// The standard location under a ferroclaw home.
    pub fn path_in_home(home: &Path) -> PathBuf {
        home.join("data").join("exec-allowlist.json")
    }

    /// Loads the list at `path`; a missing file is an empty list. A corrupt file is an
    /// error rather than silently emptied, so an operator's approvals are not lost.
    pub fn load(path: impl Into<PathBuf>) -> std::io::Result<Self> {
        let path = path.into();
        let entries = match std::fs::read_to_string(&path) {
            Ok(text) => {
                let parsed: FileFormat = serde_json::from_str(&text).map_err(|e| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("{}: {e}", path.display()),
                    )
                })?;
                parsed.entries
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        Ok(Self {
            path: Some(path),
            entries: RwLock::new(entries),
        })
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn entries(&self) -> Vec<String> {
        self.entries
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn contains(&self, entry: &str) -> bool {
        self.entries
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|e| e == entry)
    }

    /// Adds entries not already present and persists the list. The lock is held across
    /// the write so concurrent additions cannot persist out of order.
    pub fn add(&self, new: &[String]) -> std::io::Result<()> {
        let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
        let mut changed = false;
        for e in new {
            let e = e.trim();
            if !e.is_empty() && !entries.iter().any(|x| x == e) {
                entries.push(e.to_string());
                changed = true;
            }
        }
        match &self.path {
            Some(path) if changed => write_atomic(path, &entries),
            _ => Ok(()),
        }
    }
}

fn write_atomic(path: &Path, entries: &[String]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    std::fs::create_dir_all(dir)?;
    let body = serde_json::to_vec_pretty(&FileFormat {
        version: 1,
        entries: entries.to_vec(),
    })
    .map_err(std::io::Error::other)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("exec-allowlist.json"),
        std::process::id()
    ));
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&body)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}
