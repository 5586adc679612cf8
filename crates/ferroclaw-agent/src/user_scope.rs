//! Session keys of per-user agents, scoped to their user.
//!
//! On an agent with `per_user_workspace`, the key a client names (`main`, `work::sub-1`)
//! is never stored as is: the store holds `user:<escaped id>:<key>`, where the user id is
//! escaped by replacing `%` with `%25` and `:` with `%3A`. The escaped id contains no `:`,
//! so the first `:` after the `user:` prefix ends it, and unescaping gives back the id:
//! two different ids always give different prefixes, and no key a client can name (it is
//! appended after the prefix) turns one user's stored key into another's. (The lossy
//! directory-name sanitiser `sanitize_user_id` must not be used here.)
//!
//! The agent ([`crate::Agent::run_as`]), the session tools and the gateway all go through
//! this module; clients only ever see their own unscoped keys.

const PREFIX: &str = "user:";

/// The key stored for `key` named by `user`.
pub fn scoped_key(user: &str, key: &str) -> String {
    format!("{PREFIX}{}:{key}", escape(user))
}

/// The key stored for `key` on an agent with per-user workspaces (`per_user`) when
/// `user` names it; any other key is stored as named.
pub fn stored_key(per_user: bool, user: Option<&str>, key: &str) -> String {
    match user {
        Some(u) if per_user => scoped_key(u, key),
        _ => key.to_string(),
    }
}

/// The key `user` knows `stored` by, or `None` when `stored` is not one of `user`'s.
pub fn unscoped<'a>(user: &str, stored: &'a str) -> Option<&'a str> {
    stored
        .strip_prefix(PREFIX)?
        .strip_prefix(escape(user).as_str())?
        .strip_prefix(':')
}

/// The user a stored key belongs to, or `None` for a key that is not scoped (or whose
/// prefix is malformed).
pub fn owner(stored: &str) -> Option<String> {
    let rest = stored.strip_prefix(PREFIX)?;
    let (escaped, _) = rest.split_once(':')?;
    unescape(escaped)
}

fn escape(user: &str) -> String {
    let mut out = String::with_capacity(user.len());
    for c in user.chars() {
        match c {
            '%' => out.push_str("%25"),
            ':' => out.push_str("%3A"),
            c => out.push(c),
        }
    }
    out
}

/// Inverse of [`escape`]; `None` for text [`escape`] cannot produce, so a hand-written
/// key like `user:a%zz:x` has no owner rather than a made-up one.
fn unescape(escaped: &str) -> Option<String> {
    let mut out = String::with_capacity(escaped.len());
    let mut rest = escaped;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 3)?;
        out.push(match code {
            "25" => '%',
            "3A" => ':',
            _ => return None,
        });
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for user in ["alice", "a:b", "a%3Ab", "%", ":", "", "user:bob", "ünï"] {
            for key in ["main", "", "x:y", "user:bob:main", "a::sub-1"] {
                let stored = scoped_key(user, key);
                assert_eq!(owner(&stored).as_deref(), Some(user), "{stored}");
                assert_eq!(unscoped(user, &stored), Some(key), "{stored}");
            }
        }
    }

    #[test]
    fn different_users_never_share_a_key() {
        // Pairs that would collide under a naive or lossy scheme.
        let pairs = [
            ("a:b", "a"),
            ("a%3Ab", "a:b"),
            ("a_b", "a:b"),
            ("a", "a:"),
            ("bob", "bo"),
        ];
        for (u1, u2) in pairs {
            for k1 in ["main", "b:main", "3Ab:main", ":main"] {
                for k2 in ["main", "b:main", "3Ab:main", ":main"] {
                    assert_ne!(
                        scoped_key(u1, k1),
                        scoped_key(u2, k2),
                        "{u1} {k1} / {u2} {k2}"
                    );
                }
                assert_eq!(
                    unscoped(u2, &scoped_key(u1, k1)),
                    None,
                    "{u1} {k1} seen by {u2}"
                );
            }
        }
    }

    #[test]
    fn unscoped_and_malformed_keys_have_no_owner() {
        assert_eq!(owner("main"), None);
        assert_eq!(owner("user:alice"), None);
        assert_eq!(owner("user:a%zz:main"), None);
        assert_eq!(owner("user:a%3:main"), None);
        assert_eq!(unscoped("alice", "main"), None);
        assert_eq!(unscoped("alice", "user:alicex:main"), None);
    }
}
