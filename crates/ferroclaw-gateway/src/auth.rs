//! Credentials and roles. The gateway token (`FERROCLAW_GATEWAY_TOKEN`, else generated
//! into the home on first start) grants admin; `FERROCLAW_GATEWAY_VIEWER_TOKEN` grants
//! viewer; `gateway.users` give each user a token of their own (operator or viewer, bound
//! to that user). Tokens are compared in constant time. A caller without a valid one
//! gets HTTP 401, and a WebSocket is closed: no data and no runs without a credential.

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

/// Who is calling, as established by the credential it presented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub role: Role,
    /// Fixed by a per-user token: every run of this caller is that user's.
    pub user: Option<String>,
    /// The gateway token: a trusted upstream (a reverse proxy that authenticated its
    /// users) may name the user a request is for.
    pub may_name_user: bool,
}

impl Caller {
    /// Who asks, for the access rules of users' agents: `user` is the one the request
    /// acts for (see [`Caller::user_for`]); the gateway token acting for nobody is the
    /// administrator.
    pub fn requester<'a>(&self, user: Option<&'a str>) -> ferroclaw_runtime::Requester<'a> {
        ferroclaw_runtime::Requester {
            user,
            admin: self.role == Role::Admin && user.is_none(),
        }
    }

    /// The user a request acts for, given the user it names (header, `user` field,
    /// `connect` param). A per-user token cannot act for anyone else; only the gateway
    /// token may name a user; a viewer token acts for nobody.
    pub fn user_for(&self, named: Option<&str>) -> Result<Option<String>, String> {
        let named = named.map(str::trim).filter(|u| !u.is_empty());
        match (&self.user, named) {
            (Some(own), Some(n)) if n != own => Err(format!(
                "this token belongs to another user; it cannot act for user {n:?}"
            )),
            (Some(own), _) => Ok(Some(own.clone())),
            (None, Some(n)) if self.may_name_user => {
                if n.len() > 255 || n.chars().any(char::is_control) {
                    Err("user ids are at most 255 characters, without control characters".into())
                } else {
                    Ok(Some(n.to_string()))
                }
            }
            (None, Some(_)) => {
                Err("only the gateway token may name the user a request is for".into())
            }
            (None, None) => Ok(None),
        }
    }
}

/// The credentials a gateway accepts. There is always at least the gateway token
/// (generated on first start when none is configured, see
/// `ferroclaw_config::load_or_create_gateway_token`): no request reaches data or runs
/// without one.
#[derive(Clone)]
pub struct Auth {
    entries: Vec<(String, Caller)>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the tokens themselves.
        f.debug_struct("Auth")
            .field("credentials", &self.entries.len())
            .finish()
    }
}

impl Auth {
    /// `gateway` grants admin; `viewer` read-only access; `users` are `(token, user id,
    /// role)`. Empty tokens are ignored.
    pub fn new(
        gateway: String,
        viewer: Option<String>,
        users: Vec<(String, String, Role)>,
    ) -> Self {
        let mut entries = vec![(
            gateway,
            Caller {
                role: Role::Admin,
                user: None,
                may_name_user: true,
            },
        )];
        if let Some(v) = viewer {
            entries.push((
                v,
                Caller {
                    role: Role::Viewer,
                    user: None,
                    may_name_user: false,
                },
            ));
        }
        for (token, id, role) in users {
            entries.push((
                token,
                Caller {
                    role,
                    user: Some(id),
                    may_name_user: false,
                },
            ));
        }
        entries.retain(|(t, _)| !t.is_empty());
        Auth { entries }
    }

    /// The caller a token identifies. Every credential is compared, in constant time,
    /// so the answer's timing says nothing about which one (nearly) matched.
    pub fn identify(&self, presented: &str) -> Option<Caller> {
        let mut found = None;
        for (token, caller) in &self.entries {
            if bool::from(token.as_bytes().ct_eq(presented.as_bytes())) && found.is_none() {
                found = Some(caller.clone());
            }
        }
        found
    }

    /// The caller of the credential a device was bound to, if it is still accepted:
    /// `bound` is what `binding` made of that credential.
    pub fn holder_of(&self, bound: &str, binding: impl Fn(&str) -> String) -> Option<Caller> {
        let mut found = None;
        for (token, caller) in &self.entries {
            let hit = bool::from(binding(token).as_bytes().ct_eq(bound.as_bytes()));
            if hit && found.is_none() {
                found = Some(caller.clone());
            }
        }
        found
    }

    /// The caller of an HTTP request (`Authorization: Bearer`); `None` means 401.
    pub fn http_caller(&self, headers: &HeaderMap) -> Option<Caller> {
        self.identify(bearer(headers)?)
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
    fn callers_follow_the_token() {
        let auth = Auth::new(
            "gw-secret".into(),
            Some("view-secret".into()),
            vec![("alice-secret".into(), "alice".into(), Role::Operator)],
        );
        assert_eq!(auth.http_caller(&HeaderMap::new()), None);
        assert_eq!(auth.http_caller(&headers("Bearer wrong")), None);
        assert_eq!(auth.http_caller(&headers("Bearer gw-secre")), None);
        let admin = auth
            .http_caller(&headers("bearer  gw-secret "))
            .expect("admin");
        assert_eq!((admin.role, admin.user.as_deref()), (Role::Admin, None));
        let viewer = auth.identify("view-secret").expect("viewer");
        assert_eq!(viewer.role, Role::Viewer);
        let alice = auth.identify("alice-secret").expect("alice");
        assert_eq!(
            (alice.role, alice.user.as_deref()),
            (Role::Operator, Some("alice"))
        );
        // An empty token is never a credential.
        assert_eq!(Auth::new(String::new(), None, vec![]).identify(""), None);
    }

    #[test]
    fn only_the_gateway_token_names_users() {
        let auth = Auth::new(
            "gw".into(),
            Some("view".into()),
            vec![("a".into(), "alice".into(), Role::Operator)],
        );
        let admin = auth.identify("gw").expect("admin");
        assert_eq!(admin.user_for(Some("bob")), Ok(Some("bob".into())));
        assert_eq!(admin.user_for(None), Ok(None));
        assert!(admin.user_for(Some(&"x".repeat(256))).is_err());
        let alice = auth.identify("a").expect("alice");
        assert_eq!(alice.user_for(None), Ok(Some("alice".into())));
        assert_eq!(alice.user_for(Some("alice")), Ok(Some("alice".into())));
        let err = alice.user_for(Some("bob")).expect_err("bob refused");
        assert!(err.contains("cannot act for user \"bob\""), "{err}");
        let viewer = auth.identify("view").expect("viewer");
        assert!(viewer
            .user_for(Some("bob"))
            .expect_err("refused")
            .contains("only the gateway token"));
    }

    #[test]
    fn roles_are_ordered() {
        assert!(Role::Viewer < Role::Operator && Role::Operator < Role::Admin);
    }
}
