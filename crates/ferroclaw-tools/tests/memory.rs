//! `memory_search` / `memory_get` over a real workspace and SQLite FTS5 index, including
//! queries that would be FTS syntax errors if passed through, re-indexing after changes,
//! and one run through the agent loop with the scripted LLM.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ferroclaw_agent::{Agent, AgentSettings, NullSink, RunRequest};
use ferroclaw_providers::{OpenAiCompat, OpenAiCompatConfig, Provider, SchemaFlavor};
use ferroclaw_store::{FileSessionStore, SessionStore};
use ferroclaw_testkit::{Reply, ScriptedLlm};
use ferroclaw_tools::builtin::memory::{
    memory_tools, MemoryGetTool, MemorySearchTool, MemorySettings,
};
use ferroclaw_tools::memory_index::MemoryIndex;
use ferroclaw_tools::{Tool, ToolRegistry, ToolResult};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    let p = ws.path();
    std::fs::write(
        p.join("MEMORY.md"),
        "# About the user\n\nThe user prefers Rust and dislikes YAML.\nFavourite editor: helix.\n\n## Projects\n\nferroclaw is a gateway written in Rust.\n",
    )
    .unwrap();
    std::fs::create_dir_all(p.join("memory/2024")).unwrap();
    std::fs::write(
        p.join("memory/2024/trip.md"),
        "# Trip to Kyoto\n\nVisited 東京 and Kyoto in April.\nThe café near the station was great.\n",
    )
    .unwrap();
    std::fs::write(
        p.join("memory/todo.md"),
        "- renew the passport\n- call the dentist\n",
    )
    .unwrap();
    // Not memory: must never be indexed or read by the memory tools.
    std::fs::write(p.join("README.md"), "secret project notes about passport\n").unwrap();
    std::fs::write(p.join("memory/notes.txt"), "passport text file\n").unwrap();
    ws
}

async fn search(ws: &Path, query: &str) -> ToolResult {
    MemorySearchTool::new(MemorySettings::default())
        .execute(&crate::web_support::ctx(ws), json!({"query": query}))
        .await
}

async fn get(ws: &Path, args: serde_json::Value) -> ToolResult {
    MemoryGetTool
        .execute(&crate::web_support::ctx(ws), args)
        .await
}

#[tokio::test]
async fn search_finds_chunks_with_lines_and_scores() {
    let ws = workspace();
    let r = search(ws.path(), "Rust gateway").await;
    assert!(!r.is_error, "{}", r.for_llm);
    assert!(r.for_llm.contains("MEMORY.md:6-8"), "{}", r.for_llm);
    assert!(r.for_llm.contains("score "), "{}", r.for_llm);
    assert!(
        r.for_llm
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("1. MEMORY.md:6-8"),
        "best hit first: {}",
        r.for_llm
    );

    let r = search(ws.path(), "passport").await;
    assert!(r.for_llm.contains("memory/todo.md:1-2"), "{}", r.for_llm);
    assert!(
        !r.for_llm.contains("README") && !r.for_llm.contains("notes.txt"),
        "{}",
        r.for_llm
    );

    // Diacritics folded, other scripts searchable.
    let r = search(ws.path(), "cafe").await;
    assert!(
        r.for_llm.contains("memory/2024/trip.md:1-4"),
        "{}",
        r.for_llm
    );
    let r = search(ws.path(), "東京").await;
    assert!(r.for_llm.contains("memory/2024/trip.md"), "{}", r.for_llm);

    let max = MemorySearchTool::new(MemorySettings::default())
        .execute(
            &crate::web_support::ctx(ws.path()),
            json!({"query": "the", "maxResults": 1}),
        )
        .await;
    assert!(
        max.for_llm.starts_with("1 memory result(s)"),
        "{}",
        max.for_llm
    );
}

#[tokio::test]
async fn fts_hostile_queries_never_error() {
    let ws = workspace();
    let hostile = [
        "\"",
        "\"\"",
        "*",
        "**",
        "AND",
        "OR",
        "NOT",
        "AND OR",
        "rust AND",
        "OR rust",
        "NEAR(rust, yaml)",
        "rust*",
        "(rust",
        "rust)",
        "col:rust",
        "text:rust",
        "^rust",
        "-rust",
        "rust\"yaml",
        "'; DROP TABLE chunks; --",
        "{rust yaml}",
        "rust + yaml",
        "\u{0}rust",
        "🦀 rust",
        "日本語",
        "ß",
        "a\nb\tc",
        "%",
        "rust:",
        "...",
        "NEAR",
        "helix\\",
    ];
    for q in hostile {
        let r = search(ws.path(), q).await;
        let ok = !r.is_error || r.for_llm.contains("contains no words");
        assert!(ok, "{q:?}: {}", r.for_llm);
        assert!(
            !r.for_llm.contains("syntax error") && !r.for_llm.contains("fts5"),
            "{q:?}: {}",
            r.for_llm
        );
    }
    // Operators are treated as words, not as FTS syntax.
    let r = search(ws.path(), "rust AND").await;
    assert!(r.for_llm.contains("MEMORY.md"), "{}", r.for_llm);
    let r = search(ws.path(), "\"*").await;
    assert!(
        r.is_error && r.for_llm.contains("contains no words"),
        "{}",
        r.for_llm
    );
}

#[tokio::test]
async fn index_follows_changes_and_deletions() {
    let ws = workspace();
    let r = search(ws.path(), "kangaroo").await;
    assert!(r.for_llm.contains("No memory matches"), "{}", r.for_llm);

    std::fs::write(ws.path().join("memory/new.md"), "A kangaroo appeared.\n").unwrap();
    let r = search(ws.path(), "kangaroo").await;
    assert!(r.for_llm.contains("memory/new.md:1-1"), "{}", r.for_llm);

    // Changed content (different size) is re-indexed: old words gone, new words found.
    std::fs::write(
        ws.path().join("memory/new.md"),
        "Now about wombats instead, longer.\n",
    )
    .unwrap();
    assert!(search(ws.path(), "kangaroo")
        .await
        .for_llm
        .contains("No memory matches"));
    assert!(search(ws.path(), "wombats")
        .await
        .for_llm
        .contains("memory/new.md"));

    std::fs::remove_file(ws.path().join("memory/new.md")).unwrap();
    assert!(search(ws.path(), "wombats")
        .await
        .for_llm
        .contains("No memory matches"));

    // The index API reports what it did.
    let mut idx = MemoryIndex::open(ws.path(), None).unwrap();
    let stats = idx.sync().unwrap();
    assert_eq!((stats.indexed, stats.removed), (0, 0));
    assert_eq!(stats.unchanged, 3);
    assert!(ws.path().join(".ferroclaw/memory.sqlite").exists());
}

#[tokio::test]
async fn index_path_can_be_chosen() {
    let ws = workspace();
    let elsewhere = tempfile::tempdir().unwrap();
    let db = elsewhere.path().join("idx/mem.sqlite");
    let t = MemorySearchTool::new(MemorySettings {
        index_path: Some(db.clone()),
    });
    let r = t
        .execute(
            &crate::web_support::ctx(ws.path()),
            json!({"query": "helix"}),
        )
        .await;
    assert!(r.for_llm.contains("MEMORY.md"), "{}", r.for_llm);
    assert!(db.exists());
    assert!(!ws.path().join(".ferroclaw").exists());
}

#[tokio::test]
async fn memory_get_reads_ranges_of_memory_files_only() {
    let ws = workspace();
    let r = get(
        ws.path(),
        json!({"path": "MEMORY.md", "from": 3, "lines": 2}),
    )
    .await;
    assert!(!r.is_error, "{}", r.for_llm);
    assert_eq!(
        r.for_llm,
        "MEMORY.md (lines 3-4 of 8):\nThe user prefers Rust and dislikes YAML.\nFavourite editor: helix."
    );
    let r = get(ws.path(), json!({"path": "memory/todo.md"})).await;
    assert!(
        r.for_llm
            .ends_with("- renew the passport\n- call the dentist"),
        "{}",
        r.for_llm
    );

    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("x.md"), "secret").unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.path().join("memory/out")).unwrap();
    let refused = [
        ("README.md", "only reads MEMORY.md"),
        ("memory/notes.txt", "only reads MEMORY.md"),
        ("memory/../README.md", "only reads MEMORY.md"),
        ("../MEMORY.md", "outside the workspace"),
        ("/etc/passwd", "outside the workspace"),
        ("memory/out/x.md", "outside the workspace"),
        (".ferroclaw/memory.sqlite", "only reads MEMORY.md"),
    ];
    for (p, why) in refused {
        let r = get(ws.path(), json!({"path": p})).await;
        assert!(r.is_error && r.for_llm.contains(why), "{p}: {}", r.for_llm);
    }
    let r = get(ws.path(), json!({"path": "memory/none.md"})).await;
    assert!(
        r.is_error && r.for_llm.contains("does not exist"),
        "{}",
        r.for_llm
    );
    let r = get(ws.path(), json!({"path": "MEMORY.md", "from": 99})).await;
    assert!(
        r.is_error && r.for_llm.contains("past the end"),
        "{}",
        r.for_llm
    );
}

#[tokio::test]
async fn symlinked_memory_files_leading_out_are_not_indexed() {
    let ws = workspace();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("leak.md"), "platypus credentials\n").unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("leak.md"),
        ws.path().join("memory/leak.md"),
    )
    .unwrap();
    let r = search(ws.path(), "platypus").await;
    assert!(r.for_llm.contains("No memory matches"), "{}", r.for_llm);
}

/// The model calls `memory_search`; the tool result reaches the model's second request.
#[tokio::test]
async fn memory_search_through_the_agent_loop() {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = tempfile::tempdir().unwrap();
    let ws = workspace();
    let provider: Arc<dyn Provider> = Arc::new(
        OpenAiCompat::new(OpenAiCompatConfig {
            name: "scripted".into(),
            base_url: llm.openai_base_url(),
            api_key: None,
            headers: vec![],
            request_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(30),
            schema_flavor: SchemaFlavor::OpenAi,
        })
        .expect("provider"),
    );
    let mut registry = ToolRegistry::new();
    for t in memory_tools(MemorySettings::default()) {
        registry.register(t);
    }
    let store: Arc<dyn SessionStore> = Arc::new(FileSessionStore::new(home.path()));
    let settings = AgentSettings::new("main", "scripted", "model-a", ws.path().to_path_buf());
    let agent = Agent::new(settings, provider, Arc::new(registry), store);

    llm.push(Reply::tool_call(
        "call_1",
        "memory_search",
        json!({"query": "favourite editor"}),
    ));
    llm.push(Reply::text("Your favourite editor is helix."));
    let out = agent
        .run(
            RunRequest {
                session_key: "mem-test".into(),
                message: "Which editor do I like?".into(),
                options: Default::default(),
            },
            Arc::new(NullSink),
            CancellationToken::new(),
        )
        .await
        .expect("run");
    assert_eq!(out.text, "Your favourite editor is helix.");

    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    // The first request offered the tool; the second carries its result.
    assert!(requests[0].body.to_string().contains("\"memory_search\""));
    let messages = requests[1].body["messages"].as_array().expect("messages");
    let tool_msg = messages
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "call_1")
        .unwrap_or_else(|| panic!("no tool result in {messages:?}"));
    let content = tool_msg["content"].to_string();
    assert!(content.contains("MEMORY.md:1-4"), "{content}");
    assert!(content.contains("helix"), "{content}");
}
