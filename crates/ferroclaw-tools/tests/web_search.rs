//! `web_search` against local fakes of each provider's API (on 127.0.0.1). Search providers
//! are configured by the operator, so they are not subject to the SSRF guard; the fakes
//! check the requests exactly as the real APIs would receive them.

use std::collections::HashMap;
use std::time::Duration;

use axum::extract::Query;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Json;
use ferroclaw_tools::builtin::web_search::{SearchProvider, WebSearchSettings, WebSearchTool};
use ferroclaw_tools::{Tool, ToolResult};
use serde_json::{json, Value};

async fn brave(Query(q): Query<HashMap<String, String>>, headers: HeaderMap) -> impl IntoResponse {
    if headers
        .get("x-subscription-token")
        .and_then(|v| v.to_str().ok())
        != Some("brave-test-key")
    {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "bad token"})),
        );
    }
    let count: usize = q.get("count").and_then(|c| c.parse().ok()).unwrap_or(20);
    let query = q.get("q").cloned().unwrap_or_default();
    let results: Vec<Value> = (1..=10)
        .map(|i| {
            json!({
                "title": format!("Brave result {i} for {query}"),
                "url": format!("https://brave.example/{i}"),
                "description": format!("About <strong>{query}</strong> &amp; more, number {i}"),
            })
        })
        .take(count)
        .collect();
    (
        StatusCode::OK,
        Json(json!({"type": "search", "web": {"results": results}})),
    )
}

async fn searxng(Query(q): Query<HashMap<String, String>>) -> impl IntoResponse {
    if q.get("format").map(String::as_str) != Some("json") {
        return (StatusCode::FORBIDDEN, Json(json!({})));
    }
    let query = q.get("q").cloned().unwrap_or_default();
    let results: Vec<Value> = (1..=8)
        .map(|i| json!({"title": format!("Searx {i}: {query}"), "url": format!("https://searx.example/{i}"), "content": format!("content {i}"), "engine": "x"}))
        .collect();
    (
        StatusCode::OK,
        Json(json!({"query": query, "results": results})),
    )
}

async fn generic(Query(q): Query<HashMap<String, String>>) -> impl IntoResponse {
    let count: usize = q.get("count").and_then(|c| c.parse().ok()).unwrap_or(5);
    let query = q.get("q").cloned().unwrap_or_default();
    let results: Vec<Value> = (1..=count)
        .map(|i| json!({"title": format!("Generic {i}"), "url": format!("https://generic.example/{i}?q={query}"), "snippet": format!("snippet {i}")}))
        .collect();
    Json(json!({"results": results}))
}

async fn fakes() -> String {
    let router = axum::Router::new()
        .route("/brave/res/v1/web/search", get(brave))
        .route("/searx/search", get(searxng))
        .route("/generic", get(generic))
        .route("/broken", get(|| async { "<html>not json</html>" }))
        .route("/down", get(|| async { StatusCode::SERVICE_UNAVAILABLE }));
    format!("http://{}", crate::web_support::serve(router).await)
}

fn tool(provider: SearchProvider, base: String, key: Option<&str>) -> WebSearchTool {
    WebSearchTool::new(WebSearchSettings {
        provider,
        base_url: Some(base),
        api_key: key.map(str::to_string),
        api_key_env: "TEST_BRAVE_KEY".into(),
        default_count: 5,
        timeout: Duration::from_secs(10),
    })
}

async fn run(t: &WebSearchTool, args: Value) -> ToolResult {
    let ws = tempfile::tempdir().unwrap();
    t.execute(&crate::web_support::ctx(ws.path()), args).await
}

#[tokio::test]
async fn brave_results_are_numbered_and_cleaned() {
    let base = fakes().await;
    let t = tool(
        SearchProvider::Brave,
        format!("{base}/brave"),
        Some("brave-test-key"),
    );
    let r = run(&t, json!({"query": "rust async", "count": 3})).await;
    assert!(!r.is_error, "{}", r.for_llm);
    let out = &r.for_llm;
    assert!(
        out.starts_with("External content from web search (brave) — untrusted"),
        "{out}"
    );
    assert!(out.contains("1. Brave result 1 for rust async\n   https://brave.example/1\n   About rust async & more, number 1"), "{out}");
    assert!(out.contains("3. Brave result 3"), "{out}");
    assert!(!out.contains("4. Brave"), "{out}");
    assert!(!out.contains("<strong>"), "{out}");

    // Default count comes from the settings (5); count is clamped to 1..=10.
    let r = run(&t, json!({"query": "x"})).await;
    assert!(
        r.for_llm.contains("5. Brave") && !r.for_llm.contains("6. Brave"),
        "{}",
        r.for_llm
    );
    let r = run(&t, json!({"query": "x", "count": 50})).await;
    assert!(r.for_llm.contains("10. Brave"), "{}", r.for_llm);
}

#[tokio::test]
async fn brave_needs_its_key() {
    let base = fakes().await;
    let no_key = tool(SearchProvider::Brave, format!("{base}/brave"), None);
    let r = run(&no_key, json!({"query": "x"})).await;
    assert!(
        r.is_error && r.for_llm.contains("TEST_BRAVE_KEY"),
        "{}",
        r.for_llm
    );
    let wrong = tool(
        SearchProvider::Brave,
        format!("{base}/brave"),
        Some("wrong"),
    );
    let r = run(&wrong, json!({"query": "x"})).await;
    assert!(r.is_error && r.for_llm.contains("401"), "{}", r.for_llm);
}

#[tokio::test]
async fn searxng_json_api() {
    let base = fakes().await;
    let t = tool(SearchProvider::Searxng, format!("{base}/searx/"), None);
    let r = run(&t, json!({"query": "ferroclaw", "count": 2})).await;
    assert!(!r.is_error, "{}", r.for_llm);
    assert!(
        r.for_llm
            .contains("1. Searx 1: ferroclaw\n   https://searx.example/1\n   content 1"),
        "{}",
        r.for_llm
    );
    assert!(
        r.for_llm.contains("2. Searx 2") && !r.for_llm.contains("3. Searx"),
        "{}",
        r.for_llm
    );
}

#[tokio::test]
async fn generic_endpoint() {
    let base = fakes().await;
    let t = tool(SearchProvider::Generic, format!("{base}/generic"), None);
    let r = run(&t, json!({"query": "a&b c", "count": 2})).await;
    assert!(!r.is_error, "{}", r.for_llm);
    // The query arrives intact (properly encoded on the way).
    assert!(
        r.for_llm.contains("https://generic.example/1?q=a&b c"),
        "{}",
        r.for_llm
    );
    assert!(
        r.for_llm.contains("2. Generic 2") && r.for_llm.contains("snippet 2"),
        "{}",
        r.for_llm
    );
}

#[tokio::test]
async fn provider_failures_are_clear_errors() {
    let base = fakes().await;
    let broken = tool(SearchProvider::Generic, format!("{base}/broken"), None);
    let r = run(&broken, json!({"query": "x"})).await;
    assert!(
        r.is_error && r.for_llm.contains("not valid JSON"),
        "{}",
        r.for_llm
    );
    let down = tool(SearchProvider::Generic, format!("{base}/down"), None);
    let r = run(&down, json!({"query": "x"})).await;
    assert!(r.is_error && r.for_llm.contains("503"), "{}", r.for_llm);
    let none = tool(SearchProvider::None, base.clone(), None);
    let r = run(&none, json!({"query": "x"})).await;
    assert!(
        r.is_error && r.for_llm.contains("no search provider"),
        "{}",
        r.for_llm
    );
    let t = tool(SearchProvider::Generic, format!("{base}/generic"), None);
    let r = run(&t, json!({"query": "   "})).await;
    assert!(r.is_error && r.for_llm.contains("empty"), "{}", r.for_llm);
}

/// The model searches; the numbered results reach its next request.
#[tokio::test]
async fn web_search_through_the_agent_loop() {
    let base = fakes().await;
    let llm = ferroclaw_testkit::ScriptedLlm::start().await.expect("llm");
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let t = tool(SearchProvider::Searxng, format!("{base}/searx"), None);
    let agent =
        crate::web_support::agent_with(vec![std::sync::Arc::new(t)], &llm, ws.path(), home.path());
    llm.push(ferroclaw_testkit::Reply::tool_call(
        "s1",
        "web_search",
        json!({"query": "ferroclaw", "count": 2}),
    ));
    llm.push(ferroclaw_testkit::Reply::text("found"));
    assert_eq!(
        crate::web_support::run_turn(&agent, "search").await,
        "found"
    );
    let result = crate::web_support::tool_result_in(&llm.requests()[1].body, "s1");
    assert!(
        result.contains("1. Searx 1: ferroclaw") && result.contains("untrusted"),
        "{result}"
    );
}
