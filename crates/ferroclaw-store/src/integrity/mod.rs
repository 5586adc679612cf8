//! Transcript integrity: the pairing validator, repair strategies, the start-up scan,
//! incident reports, the tool result guard and the importer.
//!
//! The rule: in the context sent to a provider, every tool call has exactly
//! one result and every result follows its call. Each violation bricks a session on some
//! provider (HTTP 400 on every later turn), so the store refuses to leave one on disk:
//! [`crate::FileSessionStore`] repairs on open, [`crate::Integrity::scan`] at start-up.

mod guard;
pub(crate) mod import;
mod repair;
pub(crate) mod scan;
mod validate;

pub use guard::{cap_tool_result, DEFAULT_TOOL_RESULT_CHARS};
pub use import::{ImportOutcome, ImportReport, ImportedFile};
pub use repair::{repair_bytes, Repair, Strategy, RESULT_INTERRUPTED, RESULT_NOT_AVAILABLE};
pub(crate) use scan::{last_status, list_incidents, scan_home, write_incident};
pub use scan::{FileReport, Incident, IntegrityStatus, ScanOptions, ScanSummary};
pub use validate::{validate_api_messages, validate_bytes, validate_file, Issue, IssueKind};

pub(crate) use scan::replace_with_backup;
