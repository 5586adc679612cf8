//! Structured log events: one JSON object per line (`timestamp`, `level`, `logger`,
//! `event`, then the event's fields), to stdout, stderr or a file, as `logging` says.
//! Kept apart from `tracing` so the executor's log schema and destination follow its
//! own config whatever the host binary set up.

use std::io::Write;
use std::sync::Mutex;
use std::time::SystemTime;

use serde_json::{Map, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

impl Level {
    pub fn parse(s: &str) -> Level {
        match s.trim().to_ascii_lowercase().as_str() {
            "debug" => Level::Debug,
            "warn" | "warning" => Level::Warn,
            "error" => Level::Error,
            _ => Level::Info,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Level::Debug => "DEBUG",
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
        }
    }
}

pub struct EventLog {
    min: Level,
    json: bool,
    out: Mutex<Box<dyn Write + Send>>,
}

impl std::fmt::Debug for EventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLog").field("min", &self.min).finish()
    }
}

impl EventLog {
    pub fn new(min: Level, json: bool, out: Box<dyn Write + Send>) -> Self {
        Self {
            min,
            json,
            out: Mutex::new(out),
        }
    }

    /// From the `logging` section: `output` is `stdout`, `stderr` or a file to append to.
    pub fn from_config(cfg: &crate::config::Config) -> std::io::Result<Self> {
        let out: Box<dyn Write + Send> = match cfg.logging.output.trim() {
            "" | "stdout" => Box::new(std::io::stdout()),
            "stderr" => Box::new(std::io::stderr()),
            path => {
                let path = cfg
                    .resolve_path(path)
                    .unwrap_or_else(|| std::path::PathBuf::from(path));
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir)?;
                }
                Box::new(
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(path)?,
                )
            }
        };
        Ok(Self::new(
            Level::parse(&cfg.logging.level),
            cfg.logging.format != "text",
            out,
        ))
    }

    /// A log that drops everything (unit tests).
    pub fn discard() -> Self {
        Self::new(Level::Error, true, Box::new(std::io::sink()))
    }

    pub fn enabled(&self, level: Level) -> bool {
        level >= self.min
    }

    /// `fields` should be a JSON object; anything else is logged under `data`.
    pub fn emit(&self, level: Level, event: &str, fields: Value) {
        if !self.enabled(level) {
            return;
        }
        let ts = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
        let line = if self.json {
            let mut m = Map::new();
            m.insert("timestamp".into(), ts.into());
            m.insert("level".into(), level.as_str().into());
            m.insert("logger".into(), "executor".into());
            m.insert("event".into(), event.into());
            match fields {
                Value::Object(f) => {
                    for (k, v) in f {
                        m.entry(k).or_insert(v);
                    }
                }
                Value::Null => {}
                other => {
                    m.insert("data".into(), other);
                }
            }
            Value::Object(m).to_string()
        } else {
            let mut s = format!("{ts} {:5} executor {event}", level.as_str());
            if let Value::Object(f) = fields {
                for (k, v) in f {
                    match v {
                        Value::String(t) => s.push_str(&format!(" {k}={t:?}")),
                        v => s.push_str(&format!(" {k}={v}")),
                    }
                }
            }
            s
        };
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        // A log line that cannot be written must not fail the request it describes.
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }

    pub fn debug(&self, event: &str, fields: Value) {
        self.emit(Level::Debug, event, fields)
    }
    pub fn info(&self, event: &str, fields: Value) {
        self.emit(Level::Info, event, fields)
    }
    pub fn warn(&self, event: &str, fields: Value) {
        self.emit(Level::Warn, event, fields)
    }
    pub fn error(&self, event: &str, fields: Value) {
        self.emit(Level::Error, event, fields)
    }
}
