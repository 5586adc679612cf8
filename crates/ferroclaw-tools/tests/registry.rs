//! Registry lookup, filtering and the checks it applies to every call.

use std::sync::Arc;

use async_trait::async_trait;
use ferroclaw_tools::{Tool, ToolContext, ToolRegistry, ToolResult};
use serde_json::{json, Value};

#[test]
fn core_tools_resolve_by_name_and_alias() {
    let reg = ToolRegistry::with_core_tools();
    assert_eq!(
        reg.names(),
        ["read", "write", "edit", "ls", "glob", "grep", "exec"]
    );
    for (asked, expected) in [
        ("read_file", "read"),
        ("write_file", "write"),
        ("edit_file", "edit"),
        ("list_files", "ls"),
        ("bash", "exec"),
        ("  grep\n", "grep"),
    ] {
        assert_eq!(
            reg.get(asked).map(|t| t.name().to_string()).as_deref(),
            Some(expected),
            "{asked:?}"
        );
    }
    assert!(reg.get("nope").is_none());
    let defs = reg.definitions();
    assert_eq!(defs.len(), 7);
    for d in &defs {
        assert_eq!(d.parameters["type"], "object", "{}", d.name);
        assert!(!d.description.is_empty());
    }
    assert_eq!(
        defs[2].parameters["required"],
        json!(["path", "oldText", "newText"])
    );
}

#[test]
fn filtered_accepts_names_aliases_and_globs() {
    let reg = ToolRegistry::with_core_tools();
    let f = reg.filtered(&[
        "e*".to_string(),
        "read_file".to_string(),
        " ls ".to_string(),
    ]);
    assert_eq!(f.names(), ["read", "edit", "ls", "exec"]);
    assert!(f.get("bash").is_some());
    assert!(f.get("grep").is_none());
    assert!(reg.filtered(&[]).is_empty());

    let mut r = ToolRegistry::with_core_tools();
    r.retain(|n| n != "exec");
    assert!(r.get("bash").is_none());
    assert_eq!(r.len(), 6);
}

#[tokio::test]
async fn unknown_tool_and_bad_args_are_errors() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = crate::common::ctx(ws.path());
    let reg = ToolRegistry::with_core_tools();
    let r = reg.execute("frobnicate", &ctx, json!({})).await;
    assert!(r.is_error);
    assert!(r.for_llm.contains("\"frobnicate\""), "{}", r.for_llm);
    assert!(
        r.for_llm
            .contains("read, write, edit, ls, glob, grep, exec"),
        "{}",
        r.for_llm
    );

    let r = reg.execute("ls", &ctx, json!([1, 2])).await;
    assert!(
        r.is_error && r.for_llm.contains("must be a JSON object"),
        "{}",
        r.for_llm
    );
    // Null means "no arguments"; a doubly encoded object is decoded.
    std::fs::write(ws.path().join("x.txt"), "hi").unwrap();
    assert_eq!(reg.execute("ls", &ctx, Value::Null).await.for_llm, "x.txt");
    let r = reg
        .execute("read_file", &ctx, json!("{\"path\":\"x.txt\"}"))
        .await;
    assert_eq!(r.for_llm, "hi");
}

/// Counts how often it actually ran.
struct Counting(std::sync::atomic::AtomicUsize);

#[async_trait]
impl Tool for Counting {
    fn name(&self) -> &str {
        "count"
    }
    fn description(&self) -> &str {
        "counts"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, _ctx: &ToolContext, _args: Value) -> ToolResult {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        ToolResult::ok("counted")
    }
}

#[tokio::test]
async fn cancelled_context_never_starts_the_tool() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = crate::common::ctx(ws.path());
    let tool = Arc::new(Counting(Default::default()));
    let mut reg = ToolRegistry::new();
    reg.register(tool.clone());
    assert_eq!(
        reg.execute("count", &ctx, json!({})).await.for_llm,
        "counted"
    );
    ctx.cancel.cancel();
    let r = reg.execute("count", &ctx, json!({})).await;
    assert!(r.is_error && r.for_llm.contains("aborted"), "{}", r.for_llm);
    assert_eq!(tool.0.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[test]
fn re_registering_replaces_in_place() {
    let mut reg = ToolRegistry::with_core_tools();
    reg.register(Arc::new(ferroclaw_tools::builtin::ExecTool::with_env(
        Vec::<(String, String)>::new(),
    )));
    assert_eq!(reg.len(), 7);
    assert_eq!(reg.names().last().map(String::as_str), Some("exec"));
}
