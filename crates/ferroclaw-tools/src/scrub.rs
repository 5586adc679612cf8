//! Credential scrubbing: secrets that show up in tool output are replaced with
//! `[REDACTED]` before the text reaches the model or a person.
//!
//! Tool output is untrusted and unbounded: `cat .env`, `env`, a config file, a
//! verbose curl. A key the model has seen can be echoed back, written to a
//! transcript, or exfiltrated by a prompt-injected follow-up call, so the
//! registry scrubs every result ([`scrub`]) before returning it.
//!
//! Two kinds of rules:
//! - **token shapes** with a recognisable prefix (OpenAI `sk-…`, Anthropic
//!   `sk-ant-…`, GitHub `ghp_…`, AWS `AKIA…`, Slack `xox?-…`, Google `AIza…` /
//!   `ya29.…`, Stripe, JWTs, PEM private-key blocks): the whole token goes;
//! - **named values**: `password=…`, `token: …`, `"api_key": "…"`,
//!   `--password …`, `Authorization: Bearer …`, `https://user:pass@host`:
//!   only the value goes, so the output stays readable ("which key was set").
//!
//! Prefix shapes are checked for a minimum length and a mix of characters so
//! prose such as "sk-learn" or "the sk- prefix" is left alone. Text with no
//! candidate at all costs one [`RegexSet`] scan and no allocation.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Captures, Regex, RegexSet};

/// What every secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// One rule: a regex, optionally the name of the capture group holding the
/// secret (otherwise the whole match is the secret), and optionally a check on
/// the secret that rejects look-alikes the regex alone cannot rule out.
struct Rule {
    name: &'static str,
    pattern: Cow<'static, str>,
    /// Capture groups tried in order; the first that participated is replaced.
    groups: &'static [&'static str],
    check: Option<fn(&str) -> bool>,
}

/// Key words that mark the value after `=` / `:` as secret. The key must *end*
/// with one of them (`db_password`, `GITHUB_TOKEN`, `x-api-key`), so counters
/// such as `max_tokens` or `token_count` are not matched.
const SECRET_KEY: &str = r"(?:[A-Za-z0-9]+[_.\-])*(?:password|passwd|passphrase|secret|token|api[_\-]?key|apikey|access[_\-]?key|secret[_\-]?key|private[_\-]?key|client[_\-]?secret|credentials?|auth[_\-]?token)";

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    vec![
        Rule {
            name: "pem_private_key",
            // The whole block, including a block cut off by output truncation.
            pattern: r"-----BEGIN[A-Z ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[A-Z ]*PRIVATE KEY(?: BLOCK)?-----|\z)".into(),
            groups: &[],
            check: None,
        },
        Rule {
            name: "anthropic_key",
            pattern: r"\bsk-ant-[A-Za-z0-9_\-]{20,}".into(),
            groups: &[],
            check: None,
        },
        Rule {
            name: "openai_key",
            pattern: r"\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,}".into(),
            groups: &[],
            check: Some(looks_random),
        },
        Rule {
            name: "github_token",
            pattern: r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})\b".into(),
            groups: &[],
            check: None,
        },
        Rule {
            name: "aws_access_key_id",
            pattern: r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b".into(),
            groups: &[],
            check: None,
        },
        Rule {
            name: "aws_secret_access_key",
            pattern: r#"(?i)aws_?secret(?:_access)?_?key["']?\s*[:=]\s*["']?(?P<s>[A-Za-z0-9/+=]{40})\b"#.into(),
            groups: &["s"],
            check: None,
        },
        Rule {
            name: "slack_token",
            pattern: r"\bxox[abposr]-[A-Za-z0-9\-]{10,}".into(),
            groups: &[],
            check: None,
        },
        Rule {
            name: "slack_webhook",
            pattern: r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_\-]+".into(),
            groups: &[],
            check: None,
        },
        Rule {
            name: "google_api_key",
            pattern: r"\bAIza[0-9A-Za-z_\-]{35}".into(),
            groups: &[],
            check: None,
        },
        Rule {
            name: "google_oauth_token",
            pattern: r"\bya29\.[0-9A-Za-z_\-]{20,}".into(),
            groups: &[],
            check: None,
        },
        Rule {
            name: "stripe_key",
            pattern: r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}|\bwhsec_[0-9A-Za-z]{24,}".into(),
            groups: &[],
            check: None,
        },
        Rule {
            name: "jwt",
            // Header and payload are base64url JSON objects, hence `eyJ` (`{"`).
            pattern: r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}".into(),
            groups: &[],
            check: None,
        },
        Rule {
            name: "authorization_header",
            pattern: r#"(?i)\b(?:proxy-)?authorization["']?\s*[:=]\s*["']?(?:bearer|basic|token|digest)\s+(?P<s>[^\s"',]{8,})"#.into(),
            groups: &["s"],
            check: None,
        },
        Rule {
            name: "bearer_token",
            pattern: r"(?i)\bbearer\s+(?P<s>[A-Za-z0-9._~+/\-]{16,}=*)".into(),
            groups: &["s"],
            check: Some(has_digit),
        },
        Rule {
            name: "url_userinfo",
            pattern: r"(?i)\b[a-z][a-z0-9+.\-]*://[^\s:/@]+:(?P<s>[^\s/@]+)@".into(),
            groups: &["s"],
            check: None,
        },
        Rule {
            name: "cli_flag",
            pattern: r"(?i)--(?:password|passwd|token|api-key|apikey|secret|client-secret)(?:=|\s+)(?P<s>[^\s\-][^\s]*)".into(),
            groups: &["s"],
            check: Some(flag_value),
        },
        Rule {
            name: "named_value",
            // `key = value`, `key: value`, `"key": "value"`, `KEY='value'`, `?key=value&`.
            pattern: format!(
                r#"(?i)\b{SECRET_KEY}\b["']?\s*[:=]\s*(?:"(?P<dq>[^"\r\n]+)"|'(?P<sq>[^'\r\n]+)'|(?P<s>[^\s"',;&<>\[\]{{}}()]+))"#
            )
            .into(),
            groups: &["dq", "sq", "s"],
            check: Some(not_a_placeholder),
        },
    ]
});

struct Compiled {
    set: RegexSet,
    regexes: Vec<Regex>,
}

static COMPILED: LazyLock<Compiled> = LazyLock::new(|| {
    let set = ferroclaw_types::literal_regex_set(RULES.iter().map(|r| r.pattern.as_ref()));
    let regexes = RULES
        .iter()
        .map(|r| ferroclaw_types::literal_regex(r.pattern.as_ref()))
        .collect();
    Compiled { set, regexes }
});

/// Replaces every credential found in `text` with [`REDACTED`]. Borrows (no
/// allocation) when nothing was found.
pub fn scrub(text: &str) -> Cow<'_, str> {
    scrub_counted(text).0
}

/// [`scrub`] plus the names of the rules that fired (for logging; never the secrets).
pub fn scrub_counted(text: &str) -> (Cow<'_, str>, Vec<&'static str>) {
    let compiled = &*COMPILED;
    let matched = compiled.set.matches(text);
    if !matched.matched_any() {
        return (Cow::Borrowed(text), Vec::new());
    }
    let mut out: Cow<'_, str> = Cow::Borrowed(text);
    let mut fired = Vec::new();
    // Rules run in order on the progressively scrubbed text, so a later
    // generic rule sees `[REDACTED]` instead of a token an earlier rule removed.
    for i in matched.iter() {
        let rule = &RULES[i];
        let mut hit = false;
        let replaced = compiled.regexes[i].replace_all(&out, |caps: &Captures<'_>| {
            let whole = caps.get(0).map_or("", |m| m.as_str());
            let secret = rule
                .groups
                .iter()
                .find_map(|g| caps.name(g))
                .or_else(|| caps.get(0));
            let Some(secret) = secret else {
                return whole.to_string();
            };
            if rule.check.is_some_and(|check| !check(secret.as_str())) {
                return whole.to_string();
            }
            hit = true;
            let (start, end) = match caps.get(0) {
                Some(m) => (secret.start() - m.start(), secret.end() - m.start()),
                None => return whole.to_string(),
            };
            format!("{}{REDACTED}{}", &whole[..start], &whole[end..])
        });
        if hit {
            fired.push(rule.name);
            out = Cow::Owned(replaced.into_owned());
        }
    }
    (out, fired)
}

/// True if `text` contains something [`scrub`] would redact.
pub fn contains_secret(text: &str) -> bool {
    matches!(scrub(text), Cow::Owned(_))
}

/// API keys are random: letters and digits mixed. Prose that happens to start
/// with `sk-` ("sk-learn-based-classifier") has no digits.
fn looks_random(token: &str) -> bool {
    let body = token.trim_start_matches("sk-");
    let digits = body.bytes().filter(u8::is_ascii_digit).count();
    let letters = body.bytes().filter(u8::is_ascii_alphabetic).count();
    digits >= 2 && letters >= 6
}

fn has_digit(token: &str) -> bool {
    token.bytes().any(|b| b.is_ascii_digit())
}

/// `--password hunter22`, but not "the --password option".
fn flag_value(value: &str) -> bool {
    not_a_placeholder(value) && (value.len() >= 8 || has_digit(value))
}

/// Values that only point at a secret (`${DB_PASSWORD}`, `$TOKEN`, `<your-token>`,
/// `***`), or say there is none, are kept so the output stays useful.
fn not_a_placeholder(value: &str) -> bool {
    let v = value.trim();
    if v.len() < 3 {
        return false;
    }
    let lower = v.to_ascii_lowercase();
    if matches!(
        lower.as_str(),
        "null" | "none" | "true" | "false" | "undefined" | "required" | "optional" | "string"
    ) {
        return false;
    }
    if v.starts_with("${") || v.starts_with("{{") || v.starts_with('<') || v.contains(REDACTED) {
        return false;
    }
    // `$NAME` is a reference to an environment variable, not its value.
    if let Some(rest) = v.strip_prefix('$') {
        if rest
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        {
            return false;
        }
    }
    !v.bytes()
        .all(|b| b == b'*' || b == b'x' || b == b'X' || b == b'.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_path_borrows() {
        assert!(matches!(scrub("nothing to see here"), Cow::Borrowed(_)));
    }

    #[test]
    fn named_value_keeps_the_key() {
        assert_eq!(scrub("DB_PASSWORD=hunter22"), "DB_PASSWORD=[REDACTED]");
        assert_eq!(
            scrub(r#"{"api_key": "abc def ghi"}"#),
            r#"{"api_key": "[REDACTED]"}"#
        );
        assert_eq!(scrub("max_tokens: 4096"), "max_tokens: 4096");
    }

    #[test]
    fn every_pattern_compiles() {
        assert_eq!(COMPILED.regexes.len(), RULES.len());
    }
}
