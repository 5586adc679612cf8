//! Who may use the tools of an MCP server kept in the storage: grants to an agent or to
//! a user, each with allow and deny lists of the server's tool names (globs such as
//! `read_*` or `*`). A stored server is closed by default: a run sees a tool only when a
//! grant to its agent or its user allows it, and none of them denies it (deny wins).
//! Servers from the config file have no grants; the tool policy alone governs them.

use serde::{Deserialize, Serialize};

use crate::registry::NameMatcher;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpGrant {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
}

impl McpGrant {
    fn subject(&self) -> String {
        match (&self.agent, &self.user) {
            (Some(a), _) => format!("agent `{a}`"),
            (_, Some(u)) => format!("user `{u}`"),
            _ => "nobody".into(),
        }
    }

    fn applies(&self, agent: &str, user: Option<&str>) -> bool {
        self.agent.as_deref() == Some(agent) || (user.is_some() && self.user.as_deref() == user)
    }
}

/// `Err(why)` when the grants cannot be what was meant.
pub fn check(grants: &[McpGrant]) -> Result<(), String> {
    for (i, g) in grants.iter().enumerate() {
        let named = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.trim().is_empty());
        if named(&g.agent) == named(&g.user) {
            return Err(format!(
                "grants[{i}]: name exactly one of `agent` or `user`"
            ));
        }
        if g.allow.is_empty() && g.deny.is_empty() {
            return Err(format!("grants[{i}]: give an `allow` or a `deny` list"));
        }
        if let Some(bad) = g.allow.iter().chain(&g.deny).find(|p| p.trim().is_empty()) {
            return Err(format!("grants[{i}]: an empty tool pattern `{bad}`"));
        }
    }
    Ok(())
}

/// Whether `tool` (the server's own name for it) of server `server` is offered to a run
/// of `agent` acting for `user`.
pub fn decide(
    grants: &[McpGrant],
    server: &str,
    tool: &str,
    agent: &str,
    user: Option<&str>,
) -> Result<(), String> {
    let matches = |patterns: &[String]| patterns.iter().any(|p| NameMatcher::new(p).is_match(tool));
    let applicable: Vec<&McpGrant> = grants.iter().filter(|g| g.applies(agent, user)).collect();
    if let Some(g) = applicable.iter().find(|g| matches(&g.deny)) {
        return Err(format!(
            "tool `{tool}` of MCP server `{server}` is denied to {}",
            g.subject()
        ));
    }
    if applicable.iter().any(|g| matches(&g.allow)) {
        return Ok(());
    }
    let who = match user {
        Some(u) => format!("agent `{agent}` or user `{u}`"),
        None => format!("agent `{agent}`"),
    };
    Err(format!(
        "no grant of MCP server `{server}` gives tool `{tool}` to {who}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(agent: Option<&str>, user: Option<&str>, allow: &[&str], deny: &[&str]) -> McpGrant {
        McpGrant {
            agent: agent.map(str::to_string),
            user: user.map(str::to_string),
            allow: allow.iter().map(|s| s.to_string()).collect(),
            deny: deny.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn deny_wins_and_nothing_is_offered_without_a_grant() {
        let grants = vec![
            grant(Some("main"), None, &["*"], &[]),
            grant(None, Some("bob"), &[], &["write_*"]),
            grant(None, Some("carol"), &["read_*"], &[]),
        ];
        let d =
            |tool: &str, agent: &str, user: Option<&str>| decide(&grants, "fs", tool, agent, user);
        assert!(d("write_file", "main", None).is_ok());
        assert!(d("write_file", "main", Some("alice")).is_ok());
        let bob = d("write_file", "main", Some("bob")).unwrap_err();
        assert!(bob.contains("denied to user `bob`"), "{bob}");
        assert!(d("read_file", "main", Some("bob")).is_ok());
        // Another agent: only what the user's own grant allows.
        let other = d("write_file", "helper", Some("carol")).unwrap_err();
        assert!(other.contains("no grant"), "{other}");
        assert!(d("read_file", "helper", Some("carol")).is_ok());
        assert!(d("read_file", "helper", None).is_err());
        // A user named like the agent is not the agent.
        assert!(d("read_file", "helper", Some("main")).is_err());
    }

    #[test]
    fn grants_must_name_one_subject_and_a_list() {
        assert!(check(&[grant(Some("a"), Some("b"), &["*"], &[])]).is_err());
        assert!(check(&[grant(None, None, &["*"], &[])]).is_err());
        assert!(check(&[grant(Some("a"), None, &[], &[])]).is_err());
        assert!(check(&[grant(Some("a"), None, &[""], &[])]).is_err());
        assert!(check(&[grant(Some("a"), None, &[], &["*"])]).is_ok());
    }
}
