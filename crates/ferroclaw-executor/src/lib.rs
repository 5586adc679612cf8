//! The executor service: an OpenAI-compatible endpoint in front of a reasoning model
//! without native tool calling (gpt-oss on vLLM or Ollama). It is a surface over the
//! runtime: each request becomes one run of the one agent loop
//! ([`ferroclaw_agent::Agent`]), which reads tool intents from the model's reasoning and
//! content ([`ferroclaw_intent`]) and calls tools that go to a gateway's
//! `POST /tools/invoke`.
//!
//! ```text
//! client ─► server (axum) ─► run::Executor ─► Runtime::submit ─► Agent ─► vLLM / Ollama
//!                                │ events              │ tool calls
//!                      Accounting (event log,          ▼
//!                      error log, metadata)   gateway_tool ─► gateway /tools/invoke
//! ```
//!
//! The client's history is written into a session of its own (in memory) before the
//! run and the session is removed after it. Configuration is `executor.yaml`
//! ([`config`]); events are JSON lines ([`events`]); every error is also appended to
//! `logs/YYYY-MM-DD-errors.md` ([`errors_log`]).

pub mod config;
pub mod error;
pub mod errors_log;
pub mod events;
mod gateway_tool;
mod listener;
pub mod run;
pub mod server;
pub mod tools_client;

pub use config::{Config, ConfigError, Loaded};
pub use error::{ErrorCode, ExecError};
pub use run::{Executor, RunOutcome, RunRequest};
pub use server::Server;

use std::sync::Arc;

/// Builds an executor from a loaded configuration: event log and error log as the
/// `logging` section says.
pub fn build(cfg: Config) -> Result<Executor, run::InitError> {
    let events = events::EventLog::from_config(&cfg).map_err(|e| {
        run::InitError::Other(format!(
            "cannot open the log output `{}`: {e}",
            cfg.logging.output
        ))
    })?;
    let errors = errors_log::ErrorLog::new(
        cfg.resolve_path(&cfg.logging.error_log_dir),
        &cfg.logging.error_log_filename,
    );
    Executor::new(cfg, Arc::new(events), Arc::new(errors))
}
