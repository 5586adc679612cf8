//! Structured log events: one JSON object per line (`timestamp`, `level`, `logger`,
//! `event`, then the event's fields), to stdout, stderr or a file, as `logging` says.
//! Kept apart from `tracing` so the executor's log schema and destination follow its
//! own config whatever the host binary set up.
//!
//! Lines are written by a thread of their own: a request handler only formats its line
//! and queues it, so a slow disk or a full stdout pipe never stalls a runtime thread.
//! When the queue is full a line is dropped and counted, and the writer says how many
//! were lost once it catches up.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::SystemTime;

/// Lines waiting for the writer thread before new ones are dropped.
const QUEUE: usize = 4096;

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
    tx: Mutex<Option<SyncSender<String>>>,
    dropped: Arc<AtomicU64>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for EventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLog").field("min", &self.min).finish()
    }
}

impl EventLog {
    pub fn new(min: Level, json: bool, mut out: Box<dyn Write + Send>) -> Self {
        let (tx, rx) = sync_channel::<String>(QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        let lost = dropped.clone();
        let writer = std::thread::Builder::new()
            .name("executor-log".into())
            .spawn(move || {
                for line in rx {
                    // A log line that cannot be written must not fail anything else.
                    let _ = writeln!(out, "{line}");
                    let n = lost.swap(0, Ordering::Relaxed);
                    if n > 0 {
                        let _ = writeln!(out, "{{\"level\":\"WARN\",\"logger\":\"executor\",\"event\":\"log_lines_dropped\",\"count\":{n}}}");
                    }
                    let _ = out.flush();
                }
            })
            .ok();
        Self {
            min,
            json,
            tx: Mutex::new(writer.as_ref().map(|_| tx)),
            dropped,
            writer: Mutex::new(writer),
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
        let tx = self.tx.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(tx) = tx {
            if let Err(TrySendError::Full(_)) = tx.try_send(line) {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
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

impl Drop for EventLog {
    /// Writes out what is queued before the log goes away.
    fn drop(&mut self) {
        self.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(w) = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer the test can read back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_are_written_in_order_by_the_writer_thread() {
        let out = Shared::default();
        let log = EventLog::new(Level::Info, true, Box::new(out.clone()));
        for i in 0..100 {
            log.info("step", serde_json::json!({"i": i}));
        }
        log.debug("hidden", Value::Null);
        drop(log); // joins the writer: everything queued is written
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 100);
        for (i, l) in lines.iter().enumerate() {
            assert_eq!(l["event"], "step");
            assert_eq!(l["i"], i);
            assert_eq!(l["logger"], "executor");
        }
    }
}
