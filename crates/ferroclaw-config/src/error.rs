//! Errors raised while loading, validating and resolving configuration.

use std::path::PathBuf;

/// Everything that can go wrong between reading `config.json5` and handing a
/// resolved agent to the runtime. Each variant carries enough context for the
/// CLI to print a one-line, actionable message.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but could not be read (permissions, not a file, …).
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid JSON5. `line` and `column` are 1-based.
    #[error("{}: syntax error at line {line}, column {column}: {message}", path.display())]
    Syntax {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    /// A value has the wrong type or fails a semantic check. `field` is the
    /// full dotted path (e.g. `agents.defaults.max_iterations`).
    #[error("{}: invalid value for `{field}`: {message}", path.display())]
    Invalid {
        path: PathBuf,
        field: String,
        message: String,
    },
    /// A line of a `.env`-style file could not be parsed. `line` is 1-based.
    #[error("{}:{line}: {message}", path.display())]
    DotEnv {
        path: PathBuf,
        line: usize,
        message: String,
    },
    /// An environment variable that overrides config has an unusable value.
    #[error("environment variable {var}: {message}")]
    Env { var: String, message: String },
    /// `resolve_agent` was asked for an id that is neither `main` nor listed.
    #[error("unknown agent `{id}` (known agents: {})", known.join(", "))]
    UnknownAgent { id: String, known: Vec<String> },
    /// The agent's provider or model cannot be determined from config + env.
    #[error("agent `{agent}`: {message}")]
    Resolve { agent: String, message: String },
}
