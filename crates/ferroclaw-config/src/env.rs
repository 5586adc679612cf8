//! A snapshot of environment variables.
//!
//! All configuration code reads the environment through [`Env`] instead of
//! `std::env`, so that tests can build an environment from pairs and never
//! touch (or depend on) the real process environment.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use crate::ConfigError;

/// Snapshot of environment variables (process env + `.env.local` overlay;
/// the process env wins).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Env {
    vars: BTreeMap<String, String>,
}

impl Env {
    /// Captures the current process environment. Variables whose name or
    /// value is not valid UTF-8 are converted lossily rather than dropped, so
    /// a stray byte never hides a key.
    pub fn from_process() -> Env {
        let vars = std::env::vars_os()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .collect();
        Env { vars }
    }

    /// Builds an environment from explicit pairs (tests, embedding).
    pub fn from_pairs<I, K, V>(pairs: I) -> Env
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        Env {
            vars: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    /// Returns the value of `key`. An empty value counts as unset: shells make
    /// it easy to export `FOO=` by accident, and an empty API key or URL is
    /// never what the user meant.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.vars
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// Sets `key` only when it is currently unset (or empty). Returns whether
    /// the value was applied.
    pub fn set_default(&mut self, key: impl Into<String>, value: impl Into<String>) -> bool {
        let key = key.into();
        if self.get(&key).is_some() {
            return false;
        }
        self.vars.insert(key, value.into());
        true
    }

    /// Iterates over all (non-empty) variables in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Overlays a dotenv file (dotenvy's syntax: `KEY=value` lines, an optional
    /// `export `, `#` comments, single and double quotes, `$VAR` substitution outside
    /// single quotes) without overriding keys that are already set. Within the file
    /// the last assignment wins (like a shell sourcing it). A missing file is not an
    /// error and yields `Ok(0)`. Returns how many keys were applied.
    pub fn overlay_dotenv(&mut self, path: &Path) -> Result<usize, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(source) => {
                return Err(ConfigError::Io {
                    path: path.to_path_buf(),
                    source,
                })
            }
        };
        let parsed = parse_dotenv(&text).map_err(|(line, message)| ConfigError::DotEnv {
            path: path.to_path_buf(),
            line,
            message,
        })?;
        let mut applied = 0;
        for (key, value) in parsed {
            if self.set_default(key, value) {
                applied += 1;
            }
        }
        Ok(applied)
    }
}

/// Parses dotenv text with dotenvy into a map (last assignment wins). Errors carry the
/// 1-based line number where the failing entry starts, and dotenvy's message.
pub(crate) fn parse_dotenv(text: &str) -> Result<BTreeMap<String, String>, (usize, String)> {
    let taken = Cell::new(0);
    let feeder = LineFeeder {
        text: text.as_bytes(),
        taken: &taken,
    };
    let mut out = BTreeMap::new();
    for item in dotenvy::from_read_iter(feeder) {
        match item {
            Ok((key, value)) => {
                out.insert(key, value);
            }
            Err(e) => {
                let line = failing_line(text, taken.get(), &e);
                return Err((line, describe(&e)));
            }
        }
    }
    Ok(out)
}

/// dotenvy does not say on which line it failed. It reads through a buffer, so this
/// reader hands it at most one line per call: what it has taken when an error comes
/// out then ends with the line that failed.
struct LineFeeder<'a> {
    text: &'a [u8],
    taken: &'a Cell<usize>,
}

impl Read for LineFeeder<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let rest = &self.text[self.taken.get()..];
        let line = rest
            .iter()
            .position(|&b| b == b'\n')
            .map_or(rest.len(), |i| i + 1);
        let n = line.min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.taken.set(self.taken.get() + n);
        Ok(n)
    }
}

/// The line on which the entry dotenvy rejected starts: the last line taken, less the
/// line breaks inside the entry (a quoted value may span lines).
fn failing_line(text: &str, taken: usize, err: &dotenvy::Error) -> usize {
    let read = text.get(..taken).unwrap_or(text);
    let last = read.trim_end_matches(['\n', '\r']).matches('\n').count() + 1;
    let spanned = match err {
        dotenvy::Error::LineParse(entry, _) => {
            entry.trim_end_matches(['\n', '\r']).matches('\n').count()
        }
        _ => 0,
    };
    last.saturating_sub(spanned).max(1)
}

/// dotenvy's own message quotes the whole entry; the value may be a secret, so only the
/// key is named.
fn describe(err: &dotenvy::Error) -> String {
    let dotenvy::Error::LineParse(entry, _) = err else {
        return err.to_string();
    };
    let key = entry
        .split_once('=')
        .map(|(k, _)| k.trim())
        .map(|k| k.strip_prefix("export ").map_or(k, str::trim_start))
        .filter(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    match key {
        Some(key) => {
            format!("cannot parse the value of {key} (unterminated quote, or unquoted spaces?)")
        }
        None => "expected KEY=value".to_owned(),
    }
}
