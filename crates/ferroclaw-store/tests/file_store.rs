//! The file backend against real files in temporary homes.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed fixture should stop the test

use std::path::{Path, PathBuf};

use ferroclaw_store::{
    read_transcript, FileSessionStore, LoadProblemKind, SessionLog, SessionStore, StoreError,
};
use ferroclaw_types::{
    AssistantMessage, ContentBlock, EntryBody, Message, StopReason, Usage, TRANSCRIPT_VERSION,
};
use serde_json::{json, Value};

const AGENT: &str = "main";

/// The home's database, opened beside the store as another process would.
fn db(home: &Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(home.join("data/ferroclaw.db")).expect("db");
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .expect("busy timeout");
    conn
}

/// Removes the database: what a home from before the database, or a lost file, looks like.
fn remove_db(home: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let p = home.join(format!("data/ferroclaw.db{suffix}"));
        if p.exists() {
            std::fs::remove_file(&p).expect("remove db");
        }
    }
}

fn user(text: &str) -> EntryBody {
    EntryBody::Message {
        message: Message::user(text),
    }
}

fn assistant_with_call() -> Message {
    Message::Assistant(AssistantMessage {
        content: vec![
            ContentBlock::Thinking {
                thinking: "list it".into(),
                thinking_signature: Some("sig".into()),
            },
            ContentBlock::ToolCall {
                id: "call_1".into(),
                name: "exec".into(),
                arguments: json!({"command": "ls"}),
            },
        ],
        provider: "openai".into(),
        model: "gpt-4o".into(),
        usage: Usage {
            input: 28,
            output: 167,
            cache_read: 0,
            cache_write: 0,
            total_tokens: 195,
        },
        stop_reason: StopReason::ToolUse,
        error_message: None,
        timestamp: 1_771_996_735_857,
    })
}

fn transcript(store: &FileSessionStore, log: &dyn SessionLog) -> PathBuf {
    store
        .transcript_path(AGENT, log.session_id())
        .expect("valid ids")
}

fn backups_of(path: &Path) -> Vec<PathBuf> {
    let prefix = format!(
        "{}.bak.",
        path.file_name().expect("file name").to_string_lossy()
    );
    let mut found: Vec<PathBuf> = std::fs::read_dir(path.parent().expect("dir"))
        .expect("read dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
        })
        .collect();
    found.sort();
    found
}

/// Writes a transcript by hand: header plus the given raw lines.
fn write_raw(path: &Path, session_id: &str, lines: &[String], trailing_newline: bool) {
    let mut text = json!({"type":"session","version":3,"id":session_id,"timestamp":"2026-01-01T00:00:00.000Z","cwd":""}).to_string();
    for l in lines {
        text.push('\n');
        text.push_str(l);
    }
    if trailing_newline {
        text.push('\n');
    }
    std::fs::write(path, text).expect("write transcript");
}

fn raw_user(id: &str, parent: Option<&str>, text: &str) -> String {
    json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-01-01T00:00:01.000Z",
           "message":{"role":"user","content":[{"type":"text","text":text}],"timestamp":1}})
    .to_string()
}

fn texts(messages: &[Message]) -> Vec<String> {
    messages.iter().map(Message::text).collect()
}

#[tokio::test]
async fn round_trip_after_reopen() {
    let home = tempfile::tempdir().expect("tempdir");
    let store = FileSessionStore::new(home.path());
    let mut log = store.open(AGENT, "chat:1").await.expect("open");
    let sent = vec![
        Message::user("hi"),
        assistant_with_call(),
        Message::tool_result("call_1", "exec", "a.txt", false),
    ];
    for m in &sent {
        log.append(EntryBody::Message { message: m.clone() })
            .await
            .expect("append");
    }
    log.flush().await.expect("flush");
    assert_eq!(log.context(), sent);
    let (entries, id) = (log.entries().to_vec(), log.session_id().to_owned());
    drop(log);
    drop(store);

    let store = FileSessionStore::new(home.path());
    let log = store.open(AGENT, "chat:1").await.expect("reopen");
    assert_eq!(log.session_id(), id);
    assert_eq!(log.key(), "chat:1");
    assert_eq!(log.entries(), entries.as_slice());
    assert!(log.problems().is_empty());
    assert_eq!(log.context(), sent);
    assert!(uuid::Uuid::parse_str(&id).is_ok_and(|u| u.get_version_num() == 7));
}

#[tokio::test]
async fn every_line_matches_the_v3_format() {
    let home = tempfile::tempdir().expect("tempdir");
    let store = FileSessionStore::new(home.path());
    let mut log = store.open(AGENT, "k").await.expect("open");
    log.append(user("one")).await.expect("append");
    log.append(EntryBody::Message {
        message: assistant_with_call(),
    })
    .await
    .expect("append");
    let path = transcript(&store, log.as_ref());
    let before = std::fs::read(&path).expect("read");
    log.append(EntryBody::ModelChange {
        provider: "anthropic".into(),
        model_id: "claude".into(),
    })
    .await
    .expect("append");
    log.flush().await.expect("flush");

    let after = std::fs::read(&path).expect("read");
    assert!(
        after.starts_with(&before),
        "appending never rewrites earlier bytes"
    );
    assert_eq!(
        path,
        home.path()
            .join("agents/main/sessions")
            .join(format!("{}.jsonl", log.session_id()))
    );
    let text = std::fs::read_to_string(&path).expect("read");
    assert!(text.ends_with('\n'));
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is JSON"))
        .collect();
    assert_eq!(lines.len(), 4);
    let header = &lines[0];
    assert_eq!(header["type"], "session");
    assert_eq!(header["version"], TRANSCRIPT_VERSION);
    assert_eq!(header["id"], log.session_id());
    assert!(header["cwd"].is_string());
    let stamp = header["timestamp"].as_str().expect("timestamp");
    assert!(humantime::parse_rfc3339(stamp).is_ok(), "{stamp}");

    let mut previous: Option<String> = None;
    for line in &lines[1..] {
        assert!(line["type"].is_string());
        let id = line["id"].as_str().expect("id");
        assert!(id.len() == 8 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));
        match &previous {
            None => assert!(line["parentId"].is_null(), "first entry has a null parent"),
            Some(p) => assert_eq!(line["parentId"], p.as_str()),
        }
        let ts = line["timestamp"].as_str().expect("timestamp");
        assert!(
            humantime::parse_rfc3339(ts).is_ok() && ts.ends_with('Z'),
            "{ts}"
        );
        previous = Some(id.to_owned());
    }
    assert_eq!(lines[2]["message"]["stopReason"], "toolUse");
    assert_eq!(lines[3]["modelId"], "claude");
}

#[tokio::test]
async fn index_carries_runs() {
    let home = tempfile::tempdir().expect("tempdir");
    let store = FileSessionStore::new(home.path());
    let log = store.open(AGENT, "chat").await.expect("open");
    let before = store
        .get(AGENT, "chat")
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(before.session_id, log.session_id());
    assert_eq!(before.agent_id, AGENT);
    assert_eq!(before.usage, Usage::default());

    let run = Usage {
        input: 10,
        output: 5,
        cache_read: 2,
        cache_write: 1,
        total_tokens: 18,
    };
    store
        .record_run(AGENT, "chat", "openai", "gpt-4o", &run)
        .await
        .expect("record");
    store
        .record_run(AGENT, "chat", "anthropic", "claude", &run)
        .await
        .expect("record");
    let after = store
        .get(AGENT, "chat")
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(after.provider.as_deref(), Some("anthropic"));
    assert_eq!(after.model.as_deref(), Some("claude"));
    assert_eq!(after.usage.total_tokens, 36);
    assert_eq!(after.usage.input, 20);
    assert!(after.updated_at >= before.updated_at);
    assert_eq!(after.created_at, before.created_at);

    // A restart (a new store, its own connection) reads the same row back.
    let row = FileSessionStore::new(home.path())
        .get(AGENT, "chat")
        .await
        .expect("get")
        .expect("persisted");
    assert_eq!(row.session_id, log.session_id());
    assert_eq!(row.model.as_deref(), Some("claude"));
    assert_eq!(row.usage.cache_read, 4);
    assert_eq!(row.updated_at, after.updated_at);

    let missing = store
        .record_run(AGENT, "nope", "p", "m", &run)
        .await
        .expect_err("unknown key");
    assert!(matches!(missing, StoreError::NotFound(_)));
}

#[tokio::test]
async fn torn_last_line_is_backed_up_and_cut_before_append() {
    let home = tempfile::tempdir().expect("tempdir");
    let store = FileSessionStore::new(home.path());
    let mut log = store.open(AGENT, "k").await.expect("open");
    log.append(user("one")).await.expect("append");
    log.append(user("two")).await.expect("append");
    log.flush().await.expect("flush");
    let path = transcript(&store, log.as_ref());
    drop(log);

    let mut original = std::fs::read(&path).expect("read");
    original.extend_from_slice(br#"{"type":"message","id":"deadbe"#);
    std::fs::write(&path, &original).expect("tear");

    let mut log = store.open(AGENT, "k").await.expect("open torn");
    assert_eq!(texts(&log.context()), ["one", "two"]);
    assert_eq!(log.problems().len(), 1);
    assert_eq!(log.problems()[0].kind, LoadProblemKind::TornLine);
    assert_eq!(log.problems()[0].line, 4);
    // Loading repairs: the original is backed up byte for byte and the torn line is cut.
    let backups = backups_of(&path);
    assert_eq!(backups.len(), 1);
    assert_eq!(std::fs::read(&backups[0]).expect("backup"), original);
    let cut = original.len() - br#"{"type":"message","id":"deadbe"#.len();
    assert_eq!(std::fs::read(&path).expect("read"), original[..cut]);
    let incidents: Vec<_> = std::fs::read_dir(home.path().join("logs"))
        .expect("logs dir")
        .collect();
    assert_eq!(incidents.len(), 1, "one incident report");

    log.append(user("three")).await.expect("append after tear");
    log.flush().await.expect("flush");
    assert_eq!(backups_of(&path).len(), 1, "no second backup");

    let (_, entries, problems) = read_transcript(&path).expect("read back");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(entries.len(), 3);
    assert_eq!(
        entries[2].parent_id.as_deref(),
        Some(entries[1].id.as_str())
    );
    drop(log);
    let log = store.open(AGENT, "k").await.expect("reopen");
    assert_eq!(texts(&log.context()), ["one", "two", "three"]);
}

#[tokio::test]
async fn complete_last_line_without_newline_is_kept() {
    let home = tempfile::tempdir().expect("tempdir");
    let store = FileSessionStore::new(home.path());
    let log = store.open(AGENT, "k").await.expect("open");
    let (path, sid) = (
        transcript(&store, log.as_ref()),
        log.session_id().to_owned(),
    );
    drop(log);
    write_raw(&path, &sid, &[raw_user("aaaaaaaa", None, "kept")], false);

    let mut log = store.open(AGENT, "k").await.expect("open");
    assert!(log.problems().is_empty());
    log.append(user("next")).await.expect("append");
    assert!(backups_of(&path).is_empty(), "nothing was torn");
    let (_, entries, problems) = read_transcript(&path).expect("read");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1].parent_id.as_deref(), Some("aaaaaaaa"));
}

#[tokio::test]
async fn unparseable_middle_line_is_reported_and_skipped() {
    let home = tempfile::tempdir().expect("tempdir");
    let store = FileSessionStore::new(home.path());
    let log = store.open(AGENT, "k").await.expect("open");
    let (path, sid) = (
        transcript(&store, log.as_ref()),
        log.session_id().to_owned(),
    );
    drop(log);
    write_raw(
        &path,
        &sid,
        &[
            raw_user("aaaaaaaa", None, "one"),
            "{not json".into(),
            raw_user("bbbbbbbb", Some("aaaaaaaa"), "two"),
        ],
        true,
    );

    let (header, entries, problems) = read_transcript(&path).expect("tolerant");
    assert_eq!(header.id, sid);
    assert_eq!(entries.len(), 2);
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].line, 3);
    assert_eq!(problems[0].kind, LoadProblemKind::UnparseableLine);
    assert!(
        problems[0].description.contains("line 1"),
        "{}",
        problems[0].description
    );

    // Opening repairs the file: the bad line is cut, the rest is untouched.
    let log = store.open(AGENT, "k").await.expect("open");
    assert_eq!(log.problems().len(), 1);
    assert_eq!(log.problems()[0].kind, LoadProblemKind::UnparseableLine);
    assert_eq!(texts(&log.context()), ["one", "two"]);
    let (_, _, problems) = read_transcript(&path).expect("read repaired");
    assert!(problems.is_empty(), "{problems:?}");
}

#[tokio::test]
async fn bad_header_does_not_brick_but_garbage_is_corrupt() {
    let home = tempfile::tempdir().expect("tempdir");
    let store = FileSessionStore::new(home.path());
    let log = store.open(AGENT, "k").await.expect("open");
    let path = transcript(&store, log.as_ref());
    drop(log);

    let body = format!(
        "{{\"type\":\"session\"\n{}\n",
        raw_user("aaaaaaaa", None, "one")
    );
    std::fs::write(&path, body).expect("write");
    let mut log = store
        .open(AGENT, "k")
        .await
        .expect("bad header still opens");
    assert!(
        log.problems()
            .iter()
            .any(|p| p.kind == LoadProblemKind::BadHeader && p.line == 1),
        "{:?}",
        log.problems()
    );
    log.append(user("two")).await.expect("append");
    assert_eq!(texts(&log.context()), ["one", "two"]);
    drop(log);

    std::fs::write(&path, "nothing\nuseful\n").expect("write");
    let err = store.open(AGENT, "k").await.err().expect("corrupt");
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
}

#[tokio::test]
async fn context_follows_the_newest_leaf() {
    let home = tempfile::tempdir().expect("tempdir");
    let store = FileSessionStore::new(home.path());
    let log = store.open(AGENT, "fork").await.expect("open");
    let (path, sid) = (
        transcript(&store, log.as_ref()),
        log.session_id().to_owned(),
    );
    drop(log);
    // a - b - c is the old branch; a - d - e was forked from a later.
    write_raw(
        &path,
        &sid,
        &[
            raw_user("aaaaaaaa", None, "a"),
            raw_user("bbbbbbbb", Some("aaaaaaaa"), "b"),
            raw_user("cccccccc", Some("bbbbbbbb"), "c"),
            raw_user("dddddddd", Some("aaaaaaaa"), "d"),
            json!({"type":"label","id":"11111111","parentId":"dddddddd","timestamp":"t","targetId":"aaaaaaaa","label":"x"}).to_string(),
            raw_user("eeeeeeee", Some("11111111"), "e"),
        ],
        true,
    );
    let mut log = store.open(AGENT, "fork").await.expect("open");
    assert_eq!(log.entries().len(), 6);
    assert_eq!(texts(&log.context()), ["a", "d", "e"]);
    let entry = log.append(user("f")).await.expect("append");
    assert_eq!(entry.parent_id.as_deref(), Some("eeeeeeee"));
    assert_eq!(texts(&log.context()), ["a", "d", "e", "f"]);

    // When the old branch is written last, it is the active one again.
    write_raw(
        &path,
        &sid,
        &[
            raw_user("aaaaaaaa", None, "a"),
            raw_user("bbbbbbbb", Some("aaaaaaaa"), "b"),
            raw_user("dddddddd", Some("aaaaaaaa"), "d"),
            raw_user("cccccccc", Some("bbbbbbbb"), "c"),
        ],
        true,
    );
    drop(log);
    let log = store.open(AGENT, "fork").await.expect("open");
    assert_eq!(texts(&log.context()), ["a", "b", "c"]);
}

#[tokio::test]
async fn context_honours_the_newest_compaction() {
    let home = tempfile::tempdir().expect("tempdir");
    let store = FileSessionStore::new(home.path());
    let mut log = store.open(AGENT, "long").await.expect("open");
    let mut ids = Vec::new();
    for t in ["m1", "m2", "m3", "m4"] {
        ids.push(log.append(user(t)).await.expect("append").id);
    }
    log.append(EntryBody::Compaction {
        summary: "old summary".into(),
        first_kept_entry_id: ids[1].clone(),
        tokens_before: 100,
        tokens_after: None,
    })
    .await
    .expect("compaction");
    log.append(user("m5")).await.expect("append");
    assert_eq!(
        texts(&log.context()),
        [
            "[Conversation summary]\nold summary",
            "m2",
            "m3",
            "m4",
            "m5"
        ]
    );

    log.append(EntryBody::Compaction {
        summary: "new summary".into(),
        first_kept_entry_id: ids[3].clone(),
        tokens_before: 200,
        tokens_after: Some(50),
    })
    .await
    .expect("compaction");
    log.append(user("m6")).await.expect("append");
    let expected = ["[Conversation summary]\nnew summary", "m4", "m5", "m6"];
    assert_eq!(texts(&log.context()), expected);
    assert!(matches!(log.context()[0], Message::User(_)));
    log.flush().await.expect("flush");
    drop(log);
    let log = store.open(AGENT, "long").await.expect("reopen");
    assert_eq!(texts(&log.context()), expected);
}

#[tokio::test]
async fn invalid_ids_and_keys_are_refused() {
    let home = tempfile::tempdir().expect("tempdir");
    let store = FileSessionStore::new(home.path());
    let long_agent = "a".repeat(65);
    for agent in ["", "../etc", "a b", "a/b", "é", long_agent.as_str()] {
        let err = store.open(agent, "k").await.err().expect("refused");
        assert!(matches!(err, StoreError::InvalidKey(_)), "{agent:?}: {err}");
        assert!(matches!(
            store.list(agent).await,
            Err(StoreError::InvalidKey(_))
        ));
    }
    let long_key = "k".repeat(257);
    for key in ["", "a\nb", "tab\t", long_key.as_str()] {
        let err = store.open(AGENT, key).await.err().expect("refused");
        assert!(matches!(err, StoreError::InvalidKey(_)), "{key:?}: {err}");
    }
    assert!(!home.path().join("agents").exists(), "nothing was created");

    // Keys are only index keys: path-like keys never reach the file system.
    let log = store
        .open(&"A_-9".repeat(16), "../../escape/é")
        .await
        .expect("path-like key is fine");
    let path = store
        .transcript_path(&"A_-9".repeat(16), log.session_id())
        .expect("path");
    assert!(path.is_file());
    assert!(!home.path().join("escape").exists());
}

#[tokio::test]
async fn session_id_from_an_edited_index_cannot_escape() {
    let home = tempfile::tempdir().expect("tempdir");
    let store = FileSessionStore::new(home.path());
    drop(store.open(AGENT, "k").await.expect("open"));
    let changed = db(home.path())
        .execute(
            "UPDATE sessions SET session_id = '../../../outside' WHERE key = 'k'",
            [],
        )
        .expect("edit");
    assert_eq!(changed, 1);
    let err = FileSessionStore::new(home.path())
        .open(AGENT, "k")
        .await
        .err()
        .expect("refused");
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(!home.path().join("outside.jsonl").exists());

    // The same id in a sessions.json being migrated is dropped, not followed.
    remove_db(home.path());
    let dir = home.path().join("agents/main/sessions");
    std::fs::write(
        dir.join("sessions.json"),
        json!({"evil": {"sessionId": "../../x"}, "fine": {"sessionId": "abc"}}).to_string(),
    )
    .expect("legacy index");
    let store = FileSessionStore::new(home.path());
    let keys: Vec<String> = store
        .list(AGENT)
        .await
        .expect("list")
        .into_iter()
        .map(|m| m.key)
        .collect();
    assert!(keys.contains(&"fine".to_string()), "{keys:?}");
    assert!(!keys.contains(&"evil".to_string()), "{keys:?}");
}

#[tokio::test]
async fn a_corrupt_legacy_index_is_backed_up_and_rebuilt_from_the_transcripts() {
    let home = tempfile::tempdir().expect("tempdir");
    let store = FileSessionStore::new(home.path());
    let mut ids = Vec::new();
    for key in ["one", "two"] {
        let mut log = store.open(AGENT, key).await.expect("open");
        log.append(user("hi")).await.expect("append");
        log.append(EntryBody::Message {
            message: assistant_with_call(),
        })
        .await
        .expect("append");
        log.flush().await.expect("flush");
        ids.push(log.session_id().to_owned());
    }
    drop(store);
    remove_db(home.path());
    let index = home.path().join("agents/main/sessions/sessions.json");
    let garbage = b"{\"one\": {\"sessionId\": tru".to_vec();
    std::fs::write(&index, &garbage).expect("corrupt");

    let store = FileSessionStore::new(home.path());
    let listed = store.list(AGENT).await.expect("list survives");
    let mut keys: Vec<&str> = listed.iter().map(|m| m.key.as_str()).collect();
    keys.sort_unstable();
    // The transcript headers carry the keys, so the rebuild keeps them.
    assert_eq!(keys, ["one", "two"]);
    let mut sids: Vec<String> = listed.iter().map(|m| m.session_id.clone()).collect();
    sids.sort();
    ids.sort();
    assert_eq!(sids, ids);
    for meta in &listed {
        assert_eq!(meta.usage.total_tokens, 195);
        assert_eq!(meta.model.as_deref(), Some("gpt-4o"));
    }
    let backups = backups_of(&index);
    assert_eq!(backups.len(), 1);
    assert_eq!(std::fs::read(&backups[0]).expect("backup"), garbage);
    assert!(!index.exists(), "the old index is retired");

    let log = store
        .open(AGENT, "one")
        .await
        .expect("open by its original key");
    assert!(ids.iter().any(|id| id == log.session_id()));
    // The run that wrote these ended after the tool call; opening adds its missing result.
    assert_eq!(log.entries().len(), 3);
    assert_eq!(
        log.entries()[2].message().map(Message::text).as_deref(),
        Some(ferroclaw_store::integrity::RESULT_INTERRUPTED)
    );
}

#[tokio::test]
async fn list_is_newest_first() {
    let home = tempfile::tempdir().expect("tempdir");
    let store = FileSessionStore::new(home.path());
    for key in ["a", "b", "c"] {
        drop(store.open(AGENT, key).await.expect("open"));
    }
    // Set distinct times by hand: runs within one millisecond would tie.
    let conn = db(home.path());
    for (key, at) in [("a", 2_000), ("b", 3_000), ("c", 1_000)] {
        conn.execute(
            "UPDATE sessions SET updated_at = ?1 WHERE key = ?2",
            rusqlite::params![at, key],
        )
        .expect("set time");
    }
    let keys: Vec<String> = store
        .list(AGENT)
        .await
        .expect("list")
        .into_iter()
        .map(|m| m.key)
        .collect();
    assert_eq!(keys, ["b", "a", "c"]);

    store
        .record_run(AGENT, "c", "p", "m", &Usage::default())
        .await
        .expect("record");
    let first = store.list(AGENT).await.expect("list");
    assert_eq!(first[0].key, "c");
    assert!(store.list("other").await.expect("empty agent").is_empty());
}

#[tokio::test]
async fn delete_removes_file_and_index_entry() {
    let home = tempfile::tempdir().expect("tempdir");
    let store = FileSessionStore::new(home.path());
    let mut log = store.open(AGENT, "gone").await.expect("open");
    log.append(user("bye")).await.expect("append");
    let path = transcript(&store, log.as_ref());
    let old_id = log.session_id().to_owned();
    drop(log);
    drop(store.open(AGENT, "kept").await.expect("open"));

    assert!(store.delete(AGENT, "gone").await.expect("delete"));
    assert!(!path.exists());
    assert!(store.get(AGENT, "gone").await.expect("get").is_none());
    assert!(store.get(AGENT, "kept").await.expect("get").is_some());
    assert!(!store.delete(AGENT, "gone").await.expect("second delete"));

    let log = store.open(AGENT, "gone").await.expect("fresh");
    assert_ne!(log.session_id(), old_id);
    assert!(log.entries().is_empty());
}

#[tokio::test]
async fn concurrent_opens_of_a_new_key_share_one_session() {
    let home = tempfile::tempdir().expect("tempdir");
    let store = std::sync::Arc::new(FileSessionStore::new(home.path()));
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .open(AGENT, "same")
                    .await
                    .map(|l| l.session_id().to_owned())
            })
        })
        .collect();
    let mut ids = Vec::new();
    for t in tasks {
        ids.push(t.await.expect("task").expect("open"));
    }
    ids.dedup();
    assert_eq!(ids.len(), 1);
    assert_eq!(store.list(AGENT).await.expect("list").len(), 1);
    let files = std::fs::read_dir(home.path().join("agents/main/sessions"))
        .expect("dir")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        })
        .count();
    assert_eq!(files, 1);
}

#[tokio::test]
async fn missing_or_empty_transcript_is_started_afresh() {
    let home = tempfile::tempdir().expect("tempdir");
    let store = FileSessionStore::new(home.path());
    let log = store.open(AGENT, "k").await.expect("open");
    let (path, sid) = (
        transcript(&store, log.as_ref()),
        log.session_id().to_owned(),
    );
    drop(log);

    std::fs::write(&path, b"").expect("empty it");
    let mut log = store.open(AGENT, "k").await.expect("empty file opens");
    assert_eq!(log.session_id(), sid);
    log.append(user("x")).await.expect("append");
    let (header, entries, problems) = read_transcript(&path).expect("read");
    assert_eq!(
        (header.id.as_str(), entries.len(), problems.len()),
        (sid.as_str(), 1, 0)
    );
    drop(log);

    std::fs::remove_file(&path).expect("remove");
    let log = store.open(AGENT, "k").await.expect("missing file opens");
    assert_eq!(log.session_id(), sid);
    assert!(path.is_file());
}

/// The in-memory caches never hide a change made through another store (another process).
#[tokio::test]
async fn caches_see_changes_made_by_another_store_instance() {
    use ferroclaw_store::{FileSessionStore, SessionStore};
    use ferroclaw_types::{EntryBody, Message};
    let home = tempfile::tempdir().expect("tempdir");
    let a = FileSessionStore::new(home.path());
    let b = FileSessionStore::new(home.path());

    let mut log = a.open("main", "k").await.expect("open");
    log.append(EntryBody::Message {
        message: Message::user("from a"),
    })
    .await
    .expect("append");
    log.flush().await.expect("flush");
    let first = log.entries().to_vec();
    drop(log); // now cached in `a`

    // Reopening in `a` (from its cache) gives exactly what a fresh read gives.
    let cached = a.open("main", "k").await.expect("reopen");
    let fresh = FileSessionStore::new(home.path())
        .open("main", "k")
        .await
        .expect("fresh");
    assert_eq!(cached.entries(), fresh.entries());
    assert_eq!(cached.entries(), &first[..]);
    drop(cached);
    drop(fresh);

    // `b` appends to the same session and creates another one.
    let mut other = b.open("main", "k").await.expect("open in b");
    other
        .append(EntryBody::Message {
            message: Message::user("from b"),
        })
        .await
        .expect("append");
    other.flush().await.expect("flush");
    drop(other);
    drop(b.open("main", "second").await.expect("create in b"));

    let log = a.open("main", "k").await.expect("reopen in a");
    let texts: Vec<String> = log.context().iter().map(Message::text).collect();
    assert_eq!(
        texts,
        ["from a", "from b"],
        "a stale cache would miss b's append"
    );
    let keys: Vec<String> = a
        .list("main")
        .await
        .expect("list")
        .into_iter()
        .map(|m| m.key)
        .collect();
    assert!(
        keys.contains(&"second".to_string()),
        "a stale index cache would miss b's session: {keys:?}"
    );
}

/// A log held open (by a reader, say) while the writer appends goes back to the cache
/// when dropped; the next open must still see the append.
#[tokio::test]
async fn a_log_dropped_after_a_newer_append_does_not_hide_it() {
    let home = tempfile::tempdir().expect("tempdir");
    let store = FileSessionStore::new(home.path());
    let mut log = store.open(AGENT, "k").await.expect("open");
    log.append(user("one")).await.expect("append");
    drop(log);

    let reader = store.open(AGENT, "k").await.expect("reader");
    let mut writer = FileSessionStore::new(home.path())
        .open(AGENT, "k")
        .await
        .expect("writer");
    writer.append(user("two")).await.expect("append");
    drop(writer);
    assert_eq!(texts(&reader.context()), ["one"]);
    drop(reader); // cached, knowing one entry fewer than the file holds

    let log = store.open(AGENT, "k").await.expect("reopen");
    assert_eq!(texts(&log.context()), ["one", "two"], "stale cache");
}

/// A lost database is rebuilt with the real session keys (from the transcript headers).
#[tokio::test]
async fn a_lost_index_is_rebuilt_with_the_original_keys() {
    use ferroclaw_store::{FileSessionStore, SessionStore};
    let home = tempfile::tempdir().expect("tempdir");
    let store = FileSessionStore::new(home.path());
    let id = store
        .open("main", "telegram:42")
        .await
        .expect("open")
        .session_id()
        .to_string();
    drop(store);
    remove_db(home.path());

    let store = FileSessionStore::new(home.path());
    let meta = store
        .get("main", "telegram:42")
        .await
        .expect("get")
        .expect("key survives");
    assert_eq!(meta.session_id, id);
}

/// A home from before the database: its `sessions.json` moves into the database once,
/// is kept as `sessions.json.migrated`, and the transcripts are not touched.
#[tokio::test]
async fn a_legacy_index_is_migrated_once_and_kept_as_a_backup() {
    let home = tempfile::tempdir().expect("tempdir");
    let store = FileSessionStore::new(home.path());
    let mut ids = Vec::new();
    for key in ["telegram:1", "cli", "gone"] {
        let mut log = store.open(AGENT, key).await.expect("open");
        log.append(user("hello")).await.expect("append");
        log.flush().await.expect("flush");
        ids.push((key, log.session_id().to_owned()));
    }
    drop(store);
    remove_db(home.path());
    let dir = home.path().join("agents/main/sessions");
    // The JSON index as earlier versions (and OpenClaw) wrote it.
    let mut legacy = serde_json::Map::new();
    for (i, (key, id)) in ids.iter().enumerate() {
        legacy.insert(
            key.to_string(),
            json!({"sessionId": id, "createdAt": 1_000 + i, "updatedAt": 5_000 + i,
                   "model": "m", "usage": {"input": 10, "output": 5, "totalTokens": 15},
                   "label": if *key == "cli" { json!("from the CLI") } else { Value::Null }}),
        );
    }
    std::fs::write(dir.join("sessions.json"), Value::Object(legacy).to_string()).expect("index");
    let transcripts_before: Vec<Vec<u8>> = ids
        .iter()
        .map(|(_, id)| std::fs::read(dir.join(format!("{id}.jsonl"))).expect("transcript"))
        .collect();

    let store = FileSessionStore::new(home.path());
    let listed = store.list(AGENT).await.expect("list");
    let keys: Vec<&str> = listed.iter().map(|m| m.key.as_str()).collect();
    assert_eq!(
        keys,
        ["gone", "cli", "telegram:1"],
        "by updatedAt, newest first"
    );
    let cli = store.get(AGENT, "cli").await.expect("get").expect("row");
    assert_eq!(cli.session_id, ids[1].1);
    assert_eq!((cli.created_at, cli.updated_at), (1_001, 5_001));
    assert_eq!(cli.usage.total_tokens, 15);
    assert_eq!(cli.label.as_deref(), Some("from the CLI"));
    assert!(!dir.join("sessions.json").exists());
    assert!(
        dir.join("sessions.json.migrated").is_file(),
        "kept as a backup"
    );
    for ((_, id), before) in ids.iter().zip(&transcripts_before) {
        let now = std::fs::read(dir.join(format!("{id}.jsonl"))).expect("transcript");
        assert_eq!(&now, before, "transcripts untouched");
    }

    // Once only: a deleted session stays deleted across restarts.
    assert!(store.delete(AGENT, "gone").await.expect("delete"));
    drop(store);
    let store = FileSessionStore::new(home.path());
    assert!(store.get(AGENT, "gone").await.expect("get").is_none());
    assert_eq!(store.list(AGENT).await.expect("list").len(), 2);
}

/// Two stores on one home, as a CLI beside a gateway: a new key opened by both at once
/// is one session, and each sees the other's sessions at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_one_home_agree_on_every_session() {
    let home = tempfile::tempdir().expect("tempdir");
    let a = std::sync::Arc::new(FileSessionStore::new(home.path()));
    let b = std::sync::Arc::new(FileSessionStore::new(home.path()));
    let mut tasks = Vec::new();
    for i in 0..40 {
        let store = if i % 2 == 0 { a.clone() } else { b.clone() };
        let key = format!("shared-{}", i % 10);
        tasks.push(tokio::spawn(async move {
            let log = store.open(AGENT, &key).await.expect("open");
            (key, log.session_id().to_owned())
        }));
    }
    let mut seen = std::collections::HashMap::new();
    for t in tasks {
        let (key, id) = t.await.expect("task");
        let first = seen.entry(key.clone()).or_insert_with(|| id.clone());
        assert_eq!(first, &id, "{key} opened as two sessions");
    }
    assert_eq!(seen.len(), 10);
    assert_eq!(a.list(AGENT).await.expect("list").len(), 10);
    assert_eq!(b.list(AGENT).await.expect("list").len(), 10);
    let files = std::fs::read_dir(home.path().join("agents/main/sessions"))
        .expect("dir")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        })
        .count();
    assert_eq!(files, 10, "no orphan transcript from a lost race");
}

#[tokio::test]
async fn migrations_are_recorded_and_an_edited_one_stops_the_start() {
    let home = tempfile::tempdir().expect("tempdir");
    let store = FileSessionStore::new(home.path());
    let before = store.migration_status().await.expect("status");
    assert!(!before.is_empty());
    assert!(
        before.iter().all(|m| m.applied_at.is_none()),
        "status applies nothing"
    );
    let states = store.migrate_up().await.expect("up");
    // `up` also brings the directory of users' agents, which status did not list
    // while its file did not exist.
    assert!(states.len() > before.len(), "{states:?}");
    assert!(states.iter().any(|m| m.name.starts_with("directory.db: ")));
    assert!(states.iter().all(|m| m.applied_at.is_some()), "{states:?}");
    assert_eq!(store.migration_status().await.expect("status"), states);
    assert_eq!(states[0].version, 1);
    drop(store);

    db(home.path())
        .execute(
            "UPDATE schema_migrations SET checksum = 'deadbeef' WHERE version = 1",
            [],
        )
        .expect("tamper");
    let err = FileSessionStore::new(home.path())
        .open(AGENT, "k")
        .await
        .err()
        .expect("refused");
    let msg = err.to_string();
    assert!(
        msg.contains("migration 1") && msg.contains("changed after it was applied"),
        "{msg}"
    );

    // A database from a newer build is refused too, with a reason.
    remove_db(home.path());
    drop(
        FileSessionStore::new(home.path())
            .open(AGENT, "k")
            .await
            .expect("fresh db"),
    );
    db(home.path())
        .execute(
            "INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (999, 'future', 'x', 0)",
            [],
        )
        .expect("future migration");
    let err = FileSessionStore::new(home.path())
        .get(AGENT, "k")
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("newer ferroclaw"), "{err}");
}

/// A database file that is not a database any more (a disk fault, a bad copy): it is
/// kept aside and the index rebuilt from the transcripts, instead of every turn failing.
#[tokio::test]
async fn a_damaged_database_is_set_aside_and_the_index_rebuilt() {
    let home = tempfile::tempdir().expect("tempdir");
    let store = FileSessionStore::new(home.path());
    let mut ids = Vec::new();
    for key in ["telegram:7", "cli"] {
        let mut log = store.open(AGENT, key).await.expect("open");
        log.append(user("hello")).await.expect("append");
        log.flush().await.expect("flush");
        ids.push(log.session_id().to_owned());
    }
    drop(store);
    remove_db(home.path());
    let garbage = b"this is not an SQLite database, just bytes".repeat(200);
    std::fs::write(home.path().join("data/ferroclaw.db"), &garbage).expect("damage");

    let store = FileSessionStore::new(home.path());
    let mut keys: Vec<String> = store
        .list(AGENT)
        .await
        .expect("the store works again")
        .into_iter()
        .map(|m| m.key)
        .collect();
    keys.sort();
    assert_eq!(keys, ["cli", "telegram:7"]);
    let log = store.open(AGENT, "cli").await.expect("open");
    assert!(ids.contains(&log.session_id().to_owned()));
    assert_eq!(log.entries().len(), 1, "the transcript is untouched");
    let kept: Vec<_> = std::fs::read_dir(home.path().join("data"))
        .expect("data dir")
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("ferroclaw.db.damaged.")
                && !name.ends_with("-wal")
                && !name.ends_with("-shm")
        })
        .collect();
    assert_eq!(kept.len(), 1, "the damaged file is kept for inspection");
    assert_eq!(std::fs::read(kept[0].path()).expect("kept"), garbage);
}
