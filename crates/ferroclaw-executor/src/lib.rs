//! The executor service: an OpenAI-compatible endpoint in front of a reasoning model
//! without native tool calling (gpt-oss on vLLM or Ollama). Each request is a run:
//! call the model, read tool intents from its reasoning and content
//! ([`ferroclaw_intent`]), execute them through a gateway's `POST /tools/invoke`,
//! feed the results back, until the model is done.
//!
//! ```text
//! client ─► server (axum) ─► run::Executor ─► OpenAiCompat ─► vLLM / Ollama
//!                                  │  ▲
//!                     intents      ▼  │ results (truncated per tool)
//!                           tools_client ─► gateway /tools/invoke
//! ```
//!
//! Configuration is `executor.yaml` ([`config`]); events are JSON lines ([`events`]);
//! every error is also appended to `logs/YYYY-MM-DD-errors.md` ([`errors_log`]).

pub mod config;
pub mod error;
pub mod errors_log;
pub mod events;
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
