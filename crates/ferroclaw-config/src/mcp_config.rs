//! What makes an MCP server's settings usable: checked when the config loads and when a
//! server is stored through `/v1/mcp/servers`, so both refuse the same mistakes with the
//! same words.

use crate::schema::McpServerConfig;

/// The transports a server may use.
pub const MCP_TRANSPORTS: [&str; 3] = ["stdio", "streamable-http", "sse"];

/// Headers the transport itself sets: a configured one would confuse the protocol.
const RESERVED_HEADERS: [&str; 7] = [
    "accept",
    "content-type",
    "content-length",
    "host",
    "mcp-session-id",
    "last-event-id",
    "transfer-encoding",
];

impl McpServerConfig {
    /// `Err((field, why))` when these settings cannot work; `field` is relative to the
    /// server (`url`, `headers.X-Y`, …).
    pub fn check(&self) -> Result<(), (String, String)> {
        let bad = |field: &str, why: String| Err((field.to_string(), why));
        match self.transport.as_str() {
            "stdio" => {
                if self.command.as_deref().is_none_or(|c| c.trim().is_empty()) {
                    return bad("command", "a stdio server needs a `command`".into());
                }
            }
            "streamable-http" | "sse" => {
                let Some(url) = self.url.as_deref() else {
                    return bad("url", format!("a {} server needs a `url`", self.transport));
                };
                let rest = url
                    .strip_prefix("http://")
                    .or_else(|| url.strip_prefix("https://"));
                if rest.is_none_or(|r| r.is_empty() || r.starts_with('/')) {
                    return bad(
                        "url",
                        format!("expected an http:// or https:// URL, got `{url}`"),
                    );
                }
            }
            other => {
                return bad(
                    "transport",
                    format!(
                        "unknown `{other}`; expected one of: {}",
                        MCP_TRANSPORTS.join(", ")
                    ),
                )
            }
        }
        for (name, value) in &self.headers {
            let field = format!("headers.{name}");
            let token = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !token {
                return bad(&field, "not a valid HTTP header name".into());
            }
            if RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
                return bad(&field, "set by the MCP transport itself".into());
            }
            if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
                return bad(&field, "a header value may not hold line breaks".into());
            }
        }
        for (key, value) in [
            ("timeout_seconds", self.timeout_seconds),
            ("init_timeout_seconds", self.init_timeout_seconds),
        ] {
            if value == 0 {
                return bad(key, "expected at least 1 second".into());
            }
        }
        if let Some(prefix) = &self.tool_prefix {
            let ok = (1..=40).contains(&prefix.len())
                && prefix
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !ok {
                return bad(
                    "tool_prefix",
                    "1-40 characters of letters, digits, `_` or `-`".into(),
                );
            }
        }
        Ok(())
    }
}
