//! Gateway token and roles. The token comes only from the environment
//! (`FERROCLAW_GATEWAY_TOKEN`) and is compared in constant time.
//!
//! Token matches → admin. No token configured → operator (the server refuses to start
//! on a non-loopback address in that case, see `server`). A gateway with a token and a
//! caller without the right one: HTTP 401, WebSocket viewer.

use axum::http::{header, HeaderMap};
use subtle::ConstantTimeEq;

/// Roles in increasing order of power; `Ord` follows the declaration order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    Viewer,
    Operator,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s.trim().to_ascii_lowercase().as_str() {
            "viewer" => Some(Role::Viewer),
            "operator" => Some(Role::Operator),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }
}

/// The least role allowed to call a WebSocket method; `None` for unknown methods.
pub fn method_role(method: &str) -> Option<Role> {
    match method {
        "health" | "status" | "models.list" | "agents.list" | "agent" | "sessions.list"
        | "sessions.preview" | "integrity.status" => Some(Role::Viewer),
        "chat.send"
        | "chat.history"
        | "chat.abort"
        | "chat.inject"
        | "sessions.patch"
        | "sessions.delete"
        | "sessions.reset"
        | "exec.approval.list"
        | "exec.approval.approve"
        | "exec.approval.deny" => Some(Role::Operator),
        // Rewrites transcripts on disk.
        "integrity.scan" => Some(Role::Admin),
        _ => None,
    }
}

/// Every method the gateway serves (advertised in the OpenClaw `hello-ok`).
pub const METHODS: &[&str] = &[
    "health",
    "status",
    "models.list",
    "agents.list",
    "agent",
    "sessions.list",
    "sessions.preview",
    "chat.send",
    "chat.history",
    "chat.abort",
    "chat.inject",
    "sessions.patch",
    "sessions.delete",
    "sessions.reset",
    "integrity.status",
    "integrity.scan",
    "exec.approval.list",
    "exec.approval.approve",
    "exec.approval.deny",
];

/// Every event the gateway sends (advertised in the OpenClaw `hello-ok`).
pub const EVENTS: &[&str] = &[
    "agent",
    "chat",
    "shutdown",
    "exec.approval.requested",
    "exec.approval.resolved",
];

/// The least role that receives exec approval events: they show the commands an agent
/// wants to run, and only someone who may answer them needs to see them.
pub const APPROVAL_EVENTS_ROLE: Role = Role::Operator;

#[derive(Clone)]
pub struct Auth {
    token: Option<String>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the token itself.
        f.debug_struct("Auth")
            .field("token_configured", &self.token.is_some())
            .finish()
    }
}

impl Auth {
    pub fn new(token: Option<String>) -> Self {
        Auth {
            token: token.filter(|t| !t.is_empty()),
        }
    }

    pub fn token_configured(&self) -> bool {
        self.token.is_some()
    }

    fn matches(&self, presented: &str) -> bool {
        match &self.token {
            // ct_eq on slices of different length returns false without an early exit
            // on content; the length itself is not secret enough to matter.
            Some(t) => bool::from(t.as_bytes().ct_eq(presented.as_bytes())),
            None => false,
        }
    }

    /// Role of an HTTP caller; `None` means 401.
    pub fn http_role(&self, headers: &HeaderMap) -> Option<Role> {
        if self.token.is_none() {
            return Some(Role::Operator);
        }
        let presented = bearer(headers)?;
        self.matches(presented).then_some(Role::Admin)
    }

    /// Role of a WebSocket client from the token in its `connect` (never refused:
    /// a wrong token only earns the viewer role).
    pub fn ws_role(&self, presented: Option<&str>) -> Role {
        match (&self.token, presented) {
            (None, _) => Role::Operator,
            (Some(_), Some(p)) if self.matches(p) => Role::Admin,
            (Some(_), _) => Role::Viewer,
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, rest) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| rest.trim())
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(auth: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(auth).unwrap());
        h
    }

    #[test]
    fn roles_follow_the_token() {
        let open = Auth::new(None);
        assert_eq!(open.http_role(&HeaderMap::new()), Some(Role::Operator));
        assert_eq!(open.ws_role(Some("anything")), Role::Operator);

        let locked = Auth::new(Some("s3cret".into()));
        assert_eq!(locked.http_role(&HeaderMap::new()), None);
        assert_eq!(locked.http_role(&headers("Bearer wrong")), None);
        assert_eq!(
            locked.http_role(&headers("Bearer s3cret")),
            Some(Role::Admin)
        );
        assert_eq!(
            locked.http_role(&headers("bearer  s3cret ")),
            Some(Role::Admin)
        );
        assert_eq!(locked.ws_role(Some("s3cre")), Role::Viewer);
        assert_eq!(locked.ws_role(None), Role::Viewer);
        assert_eq!(locked.ws_role(Some("s3cret")), Role::Admin);
    }

    #[test]
    fn method_table_orders_roles() {
        assert!(Role::Viewer < Role::Operator && Role::Operator < Role::Admin);
        assert_eq!(method_role("sessions.preview"), Some(Role::Viewer));
        assert_eq!(method_role("chat.send"), Some(Role::Operator));
        assert_eq!(method_role("no.such"), None);
        assert_eq!(method_role("integrity.status"), Some(Role::Viewer));
        assert_eq!(method_role("exec.approval.approve"), Some(Role::Operator));
        assert_eq!(method_role("integrity.scan"), Some(Role::Admin));
        for m in METHODS {
            assert!(method_role(m).is_some(), "{m} advertised but not routed");
        }
    }
}
