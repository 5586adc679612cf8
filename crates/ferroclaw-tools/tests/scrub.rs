//! Credential scrubbing: secrets that must be redacted, look-alikes that must not,
//! and the registry applying it to every result. All keys below are fabricated.

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;
use ferroclaw_tools::scrub::{scrub, scrub_counted, REDACTED};
use ferroclaw_tools::{Tool, ToolContext, ToolRegistry, ToolResult};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// (input, the secret that must disappear, rule expected to fire, text that must survive)
const SECRETS: &[(&str, &str, &str, &str)] = &[
    (
        "OPENAI_KEY is sk-abc123def456ghi789jkl012mno345pqr678stu901vwx ok",
        "sk-abc123def456ghi789jkl012mno345pqr678stu901vwx",
        "openai_key",
        "OPENAI_KEY is",
    ),
    (
        "key: sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0fGh3iJk6lMn9",
        "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0fGh3iJk6lMn9",
        "openai_key",
        "key:",
    ),
    (
        "using sk-ant-api03-Xy12Ab34Cd56Ef78Gh90Ij12Kl34Mn56Op78Qr90-St12AA for claude",
        "sk-ant-api03-Xy12Ab34Cd56Ef78Gh90Ij12Kl34Mn56Op78Qr90-St12AA",
        "anthropic_key",
        "for claude",
    ),
    (
        "remote uses ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R auth",
        "ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R",
        "github_token",
        "remote uses",
    ),
    (
        "gho_ZZ9a8b7c6d5e4f3g2h1i0jKLMNOPQRSTUVWXyz is an oauth token",
        "gho_ZZ9a8b7c6d5e4f3g2h1i0jKLMNOPQRSTUVWXyz",
        "github_token",
        "is an oauth token",
    ),
    (
        "ghs_16C7e42F292c6912E7710c838347Ae178B4a in CI",
        "ghs_16C7e42F292c6912E7710c838347Ae178B4a",
        "github_token",
        "in CI",
    ),
    (
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRST",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRST",
        "github_token",
        "",
    ),
    (
        "AWS id AKIAIOSFODNN7EXAMPLE region us-east-1",
        "AKIAIOSFODNN7EXAMPLE",
        "aws_access_key_id",
        "region us-east-1",
    ),
    (
        "temp creds ASIAY34FZKBOKMUTVV7A expire soon",
        "ASIAY34FZKBOKMUTVV7A",
        "aws_access_key_id",
        "expire soon",
    ),
    (
        "[default]\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "aws_secret_access_key",
        "aws_secret_access_key = ",
    ),
    (
        "SLACK_BOT=xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "slack_token",
        "SLACK_BOT=",
    ),
    (
        "post to https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX now",
        "hooks.slack.com/services/T00000000",
        "slack_webhook",
        "post to",
    ),
    (
        "maps key AIzaSyD-1234567890abcdefghijklmnopqrstu in page",
        "AIzaSyD-1234567890abcdefghijklmnopqrstu",
        "google_api_key",
        "in page",
    ),
    (
        "access_token ya29.a0AfH6SMBx1234567890abcdefghijKLMN issued",
        "ya29.a0AfH6SMBx1234567890abcdefghijKLMN",
        "google_oauth_token",
        "issued",
    ),
    (
        "stripe: sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "stripe_key",
        "stripe:",
    ),
    (
        "cookie eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c set",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9",
        "jwt",
        "cookie",
    ),
    (
        "before\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq98Vx\nq2Jf0zM3bQ==\n-----END RSA PRIVATE KEY-----\nafter",
        "MIIEowIBAAKCAQEA7bq98Vx",
        "pem_private_key",
        "after",
    ),
    (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n[output truncated]",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
        "pem_private_key",
        "",
    ),
    (
        "login with password=hunter2 then continue",
        "hunter2",
        "named_value",
        "password=",
    ),
    (
        r#"{"user": "bob", "api_key": "abcd1234efgh"}"#,
        "abcd1234efgh",
        "named_value",
        r#""api_key": ""#,
    ),
    (
        "database:\n  db_password: 's3cr3t pass phrase'\n",
        "s3cr3t pass phrase",
        "named_value",
        "db_password: '",
    ),
    (
        "GITHUB_TOKEN=abcdef1234567890\nHOME=/home/me",
        "abcdef1234567890",
        "named_value",
        "HOME=/home/me",
    ),
    (
        "DATABASE_URL=postgres://admin:Sup3rS3cret@db.internal:5432/app",
        "Sup3rS3cret",
        "url_userinfo",
        "postgres://admin:",
    ),
    (
        "curl -H 'Authorization: Bearer abcdefghijklmnop1234567890' https://api",
        "abcdefghijklmnop1234567890",
        "authorization_header",
        "https://api",
    ),
    (
        "mysql --password hunter22 -u root",
        "hunter22",
        "cli_flag",
        "-u root",
    ),
    (
        "passwd: correct-horse-battery",
        "correct-horse-battery",
        "named_value",
        "passwd:",
    ),
    (
        "secret=topsecretvalue;other=1",
        "topsecretvalue",
        "named_value",
        "other=1",
    ),
    (
        "GET /v1/items?api_key=zzzz9999&page=2",
        "zzzz9999",
        "named_value",
        "page=2",
    ),
];

/// Text that looks a bit like a secret but is not one; must come back unchanged.
const NEAR_MISSES: &[&str] = &[
    "The sk- prefix identifies OpenAI keys.",
    "We use sk-learn-based-classifier-pipelines for this.",
    "Click the password reset link in your email.",
    "token count: 1234",
    "max_tokens: 4096",
    "usage: input_tokens=28, output_tokens=167",
    "request id 550e8400-e29b-41d4-a716-446655440000",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b",
    "magic 0xdeadbeef at offset 0x10",
    "eyJ is how base64-encoded JSON starts: eyJhbGciOi",
    "ghp_ tokens are GitHub personal access tokens",
    "AKIA is the prefix of AWS access key ids",
    "password: ${DB_PASSWORD}",
    "api_key: <your-api-key>",
    "password=",
    "the secret to good bread is time",
    "https://example.com:8443/login?next=/a@b",
    "git@github.com:org/repo.git",
    "xoxo, see you soon",
    "Bearer authentication is described in RFC 6750",
    "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END PUBLIC KEY-----",
    "author: Jane Doe",
    "password_hint: see the docs",
    "PWD=/home/me/project\nOLDPWD=/home/me",
    "use the --password option to pass it",
    "session key agent:main:telegram:42",
];

#[test]
fn secrets_are_redacted() {
    assert!(SECRETS.len() >= 20);
    for (input, secret, rule, keep) in SECRETS {
        let (out, fired) = scrub_counted(input);
        assert!(
            !out.contains(secret),
            "secret {secret:?} survived in {out:?}"
        );
        assert!(out.contains(REDACTED), "no marker in {out:?}");
        assert!(
            fired.contains(rule),
            "expected rule {rule} for {input:?}, fired {fired:?}"
        );
        assert!(out.contains(keep), "context {keep:?} lost: {out:?}");
    }
}

#[test]
fn near_misses_are_untouched_and_borrowed() {
    assert!(NEAR_MISSES.len() >= 20);
    for input in NEAR_MISSES {
        let out = scrub(input);
        assert_eq!(&out, input, "near-miss was changed");
        assert!(
            matches!(out, Cow::Borrowed(_)),
            "near-miss allocated: {input:?}"
        );
    }
}

#[test]
fn named_values_keep_the_key_and_structure() {
    assert_eq!(scrub("DB_PASSWORD=hunter22"), "DB_PASSWORD=[REDACTED]");
    assert_eq!(
        scrub(r#"{"token":"abc123","n":1}"#),
        r#"{"token":"[REDACTED]","n":1}"#
    );
    assert_eq!(
        scrub("https://user:pa55word@example.com/x"),
        "https://user:[REDACTED]@example.com/x"
    );
    // A whole PEM block goes, not only its first line.
    let pem = "a\n-----BEGIN EC PRIVATE KEY-----\nAAA\nBBB\n-----END EC PRIVATE KEY-----\nb";
    assert_eq!(scrub(pem), "a\n[REDACTED]\nb");
}

#[test]
fn scrubbing_is_idempotent() {
    for (input, ..) in SECRETS {
        let once = scrub(input).into_owned();
        assert_eq!(scrub(&once), once, "second pass changed {once:?}");
    }
}

/// Echoes a fixed text in both channels.
struct Leaky;

#[async_trait]
impl Tool for Leaky {
    fn name(&self) -> &str {
        "leaky"
    }
    fn description(&self) -> &str {
        "returns a secret"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, _ctx: &ToolContext, args: Value) -> ToolResult {
        let is_error = args.get("error").and_then(Value::as_bool).unwrap_or(false);
        ToolResult {
            for_llm: "OPENAI_API_KEY=sk-proj-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa".into(),
            for_user: Some("token: ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R".into()),
            is_error,
            ends_run: false,
        }
    }
}

#[tokio::test]
async fn registry_scrubs_both_channels_of_every_result() {
    let mut reg = ToolRegistry::new();
    reg.register(Arc::new(Leaky));
    let ws = tempfile::tempdir().unwrap();
    let ctx = ToolContext {
        agent_id: "a".into(),
        session_key: "s".into(),
        workspace: ws.path().to_path_buf(),
        cancel: CancellationToken::new(),
        user: None,
        acting_user: None,
        group_chat: false,
        progress: Default::default(),
        run_id: String::new(),
    };
    for error in [false, true] {
        let r = reg.execute("leaky", &ctx, json!({"error": error})).await;
        assert_eq!(r.is_error, error);
        assert_eq!(r.for_llm, "OPENAI_API_KEY=[REDACTED]");
        assert_eq!(r.for_user.as_deref(), Some("token: [REDACTED]"));
    }
}

#[tokio::test]
async fn core_read_of_a_dotenv_is_scrubbed() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join(".env"),
        "ANTHROPIC_API_KEY=sk-ant-api03-Xy12Ab34Cd56Ef78Gh90Ij12Kl34Mn56Op78Qr90-St12AA\nPORT=8080\n",
    )
    .unwrap();
    let ctx = ToolContext {
        agent_id: "a".into(),
        session_key: "s".into(),
        workspace: ws.path().to_path_buf(),
        cancel: CancellationToken::new(),
        user: None,
        acting_user: None,
        group_chat: false,
        progress: Default::default(),
        run_id: String::new(),
    };
    let r = ToolRegistry::with_core_tools()
        .execute("read", &ctx, json!({"path": ".env"}))
        .await;
    assert!(!r.is_error, "{}", r.for_llm);
    assert!(!r.for_llm.contains("sk-ant-"), "{}", r.for_llm);
    assert!(r.for_llm.contains("PORT=8080"), "{}", r.for_llm);
}
