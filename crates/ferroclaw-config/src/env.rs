//! A snapshot of environment variables.
//!
//! All configuration code reads the environment through [`Env`] instead of
//! `std::env`, so that tests can build an environment from pairs and never
//! touch (or depend on) the real process environment.

use std::collections::BTreeMap;
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

    /// Overlays a dotenv file (`KEY=value` lines) without overriding keys that
    /// are already set. Supports an `export ` prefix, `#` comments (whole-line,
    /// and after whitespace in unquoted values), and single or double quotes
    /// (double quotes understand `\n`, `\t`, `\"` and `\\`). A missing file is
    /// not an error and yields `Ok(0)`. Returns how many keys were applied.
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
        // Within the file the last assignment wins (like a shell sourcing it);
        // against the existing environment the existing value wins.
        let mut applied = 0;
        for (key, value) in parsed {
            if self.set_default(key, value) {
                applied += 1;
            }
        }
        Ok(applied)
    }
}

/// Parses dotenv text into a map (last assignment wins). Errors carry the
/// 1-based line number and a message.
pub(crate) fn parse_dotenv(text: &str) -> Result<BTreeMap<String, String>, (usize, String)> {
    let mut out = BTreeMap::new();
    for (idx, raw) in text.lines().enumerate() {
        let lineno = idx + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line
            .strip_prefix("export")
            .filter(|rest| rest.starts_with(char::is_whitespace))
            .map(str::trim_start)
            .unwrap_or(line);
        let Some((key, rest)) = line.split_once('=') else {
            return Err((lineno, format!("expected KEY=value, found `{line}`")));
        };
        let key = key.trim();
        if !is_env_name(key) {
            return Err((lineno, format!("invalid variable name `{key}`")));
        }
        let value = parse_dotenv_value(rest.trim()).map_err(|m| (lineno, m))?;
        out.insert(key.to_string(), value);
    }
    Ok(out)
}

fn is_env_name(key: &str) -> bool {
    let mut chars = key.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn parse_dotenv_value(rest: &str) -> Result<String, String> {
    if let Some(body) = rest.strip_prefix('\'') {
        let Some(end) = body.find('\'') else {
            return Err("unterminated single-quoted value".into());
        };
        check_trailing(&body[end + 1..])?;
        return Ok(body[..end].to_string());
    }
    if let Some(body) = rest.strip_prefix('"') {
        let mut value = String::new();
        let mut chars = body.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    check_trailing(&body[i + 1..])?;
                    return Ok(value);
                }
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, 't')) => value.push('\t'),
                    Some((_, 'r')) => value.push('\r'),
                    Some((_, other)) => value.push(other),
                    None => break,
                },
                other => value.push(other),
            }
        }
        return Err("unterminated double-quoted value".into());
    }
    // Unquoted: a `#` starts a comment only after whitespace, so values such
    // as URLs with fragments (`http://x/#a`) survive.
    let mut end = rest.len();
    let bytes = rest.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'#' && i > 0 && bytes[i - 1].is_ascii_whitespace() {
            end = i;
            break;
        }
    }
    Ok(rest[..end].trim_end().to_string())
}

fn check_trailing(after: &str) -> Result<(), String> {
    let after = after.trim();
    if after.is_empty() || after.starts_with('#') {
        Ok(())
    } else {
        Err(format!("unexpected text after closing quote: `{after}`"))
    }
}
