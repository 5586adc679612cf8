//! Per-session tool rate limit: sliding window, per-session budgets, and the
//! registry refusing with a retry time. Time is passed explicitly; nothing sleeps.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferroclaw_tools::{RateLimiter, ToolContext, ToolRegistry};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const HOUR: Duration = Duration::from_secs(3600);

#[test]
fn window_slides() {
    let rl = RateLimiter::per_hour(3);
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    assert!(rl.try_acquire_at("s", at(0)).is_ok());
    assert!(rl.try_acquire_at("s", at(600)).is_ok());
    assert!(rl.try_acquire_at("s", at(1200)).is_ok());
    assert_eq!(rl.remaining_at("s", at(1200)), 0);

    // Fourth call inside the hour: refused until the first call is an hour old.
    let refused = rl.try_acquire_at("s", at(1800)).unwrap_err();
    assert_eq!(refused.retry_after, Duration::from_secs(1800));
    assert_eq!(refused.limit, 3);
    // Refusals are not counted: the wait does not grow.
    let refused = rl.try_acquire_at("s", at(3599)).unwrap_err();
    assert_eq!(refused.retry_after, Duration::from_secs(1));

    // At exactly one hour the first call leaves the window: one slot frees up, not three
    // (a fixed bucket would have reset everything here).
    assert!(rl.try_acquire_at("s", at(3600)).is_ok());
    let refused = rl.try_acquire_at("s", at(3601)).unwrap_err();
    assert_eq!(refused.retry_after, Duration::from_secs(600 + 3600 - 3601));
    assert!(rl.try_acquire_at("s", at(4200)).is_ok());
}

#[test]
fn sessions_have_separate_budgets() {
    let rl = RateLimiter::new(1, HOUR);
    let t = Instant::now();
    assert!(rl.try_acquire_at("a", t).is_ok());
    assert!(rl.try_acquire_at("a", t).is_err());
    assert!(rl.try_acquire_at("b", t).is_ok());
    rl.forget("a");
    assert!(rl.try_acquire_at("a", t).is_ok());
}

#[test]
fn zero_means_unlimited() {
    let rl = RateLimiter::per_hour(0);
    let t = Instant::now();
    for _ in 0..10_000 {
        assert!(rl.try_acquire_at("s", t).is_ok());
    }
}

#[test]
fn refusal_message_says_when_to_retry() {
    let rl = RateLimiter::per_hour(1);
    let t = Instant::now();
    rl.try_acquire_at("s", t).unwrap();
    let msg = rl
        .try_acquire_at("s", t + Duration::from_secs(60 * 20))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("1 tool calls in the last 1 h"), "{msg}");
    assert!(msg.contains("retry in 40 min 0 s"), "{msg}");
}

#[tokio::test]
async fn registry_refuses_over_the_limit() {
    let ws = tempfile::tempdir().unwrap();
    let limiter = Arc::new(RateLimiter::per_hour(2));
    let reg = ToolRegistry::with_core_tools().with_rate_limit(limiter.clone());
    let ctx = |session: &str| ToolContext {
        agent_id: "main".into(),
        session_key: session.into(),
        workspace: ws.path().to_path_buf(),
        cancel: CancellationToken::new(),
        user: None,
        acting_user: None,
        group_chat: false,
        progress: Default::default(),
        run_id: String::new(),
    };
    for _ in 0..2 {
        let r = reg.execute("ls", &ctx("s1"), json!({})).await;
        assert!(!r.is_error, "{}", r.for_llm);
    }
    let r = reg
        .execute("write", &ctx("s1"), json!({"path": "x", "content": "y"}))
        .await;
    assert!(r.is_error);
    assert!(
        r.for_llm
            .contains("tool \"write\" refused: tool rate limit reached"),
        "{}",
        r.for_llm
    );
    assert!(r.for_llm.contains("retry in"), "{}", r.for_llm);
    assert!(!ws.path().join("x").exists(), "refused call must not run");
    // Another session is unaffected; a clone of the registry shares the limiter.
    let r = reg.clone().execute("ls", &ctx("s2"), json!({})).await;
    assert!(!r.is_error, "{}", r.for_llm);
    // Calls refused before execution (unknown tool, bad arguments) do not use up the budget.
    let fresh = ToolRegistry::with_core_tools().with_rate_limit(Arc::new(RateLimiter::per_hour(1)));
    let r = fresh.execute("ls", &ctx("s3"), json!([1])).await;
    assert!(r.for_llm.contains("must be a JSON object"), "{}", r.for_llm);
    let r = fresh.execute("ls", &ctx("s3"), json!({})).await;
    assert!(!r.is_error, "{}", r.for_llm);
}
