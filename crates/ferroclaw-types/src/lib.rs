//! Serde types shared by every ferroclaw crate: transcript messages and entries
//! (OpenClaw / pi session format v3), tool definitions, usage and run events.
//! Nothing here does I/O.

mod entry;
mod event;
mod message;
mod tool;

pub use entry::{Entry, EntryBody, SessionHeader, TRANSCRIPT_VERSION};
pub use event::{EventKind, RunEvent};
pub use message::{
    AssistantMessage, ContentBlock, Message, StopReason, ToolResultMessage, Usage, UserMessage,
};
pub use tool::{ToolCall, ToolDefinition};

/// Milliseconds since the Unix epoch, the timestamp unit inside transcript messages.
pub fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// FNV-1a, 64 bit: a stable short hash for names derived from ids (directory names,
/// session keys), the same across runs and platforms, unlike `DefaultHasher`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A regular expression written in the source (a literal or a constant table). Its
/// pattern is not input, so an invalid one is a programming error the first test
/// touching it reveals: this is the one place the workspace allows `expect` outside
/// tests.
#[allow(clippy::expect_used)]
pub fn literal_regex(pattern: &str) -> regex::Regex {
    regex::Regex::new(pattern).expect("a literal regular expression compiles")
}

/// As [`literal_regex`], for a set of patterns matched at once.
#[allow(clippy::expect_used)]
pub fn literal_regex_set<I, S>(patterns: I) -> regex::RegexSet
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    regex::RegexSet::new(patterns).expect("literal regular expressions compile")
}

/// `err` followed by those of its sources that add something: many libraries say only
/// "error sending request" or "db error" and keep what went wrong in a source.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}
