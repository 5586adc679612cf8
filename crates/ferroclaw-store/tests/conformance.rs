//! One conformance suite, run against every backend: the embedded one (SQLite index +
//! JSONL files in a temporary home) and the managed one (a fresh database on a real
//! PostgreSQL server: `FERROCLAW_TEST_DATABASE_URL`, else a throwaway cluster).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed fixture should stop the test

use std::sync::Arc;
use std::time::Duration;

use ferroclaw_store::{
    validate_bytes, AgentKind, AgentRecord, CronJob, CronRun, Durability, FileScope,
    FileSessionStore, PgSessionStore, ProviderRecord, ScanOptions, SessionStore, ShareRole,
    StoreError, Strategy, RUNS_KEPT_PER_JOB,
};
use ferroclaw_types::{EntryBody, Message, Usage};
use tokio_postgres::NoTls;

const AGENT: &str = "main";

enum Kind {
    File(tempfile::TempDir),
    Pg(String),
}

struct Subject {
    name: &'static str,
    kind: Kind,
    store: Arc<dyn SessionStore>,
}

use ferroclaw_testkit::pg::fresh_database;

impl Subject {
    async fn file() -> Subject {
        let home = tempfile::tempdir().expect("home");
        let store: Arc<dyn SessionStore> = Arc::new(FileSessionStore::new(home.path()));
        Subject {
            name: "file",
            kind: Kind::File(home),
            store,
        }
    }

    async fn pg() -> Subject {
        let url = fresh_database().await;
        let store: Arc<dyn SessionStore> =
            Arc::new(PgSessionStore::connect(&url).await.expect("pg store"));
        Subject {
            name: "postgres",
            kind: Kind::Pg(url),
            store,
        }
    }

    async fn all() -> Vec<Subject> {
        vec![Subject::file().await, Subject::pg().await]
    }

    /// The same storage through a new store: what a restart, or another instance, sees.
    async fn another(&self) -> Arc<dyn SessionStore> {
        match &self.kind {
            Kind::File(home) => Arc::new(FileSessionStore::new(home.path())),
            Kind::Pg(url) => Arc::new(PgSessionStore::connect(url).await.expect("pg store")),
        }
    }

    /// Replaces a session's stored transcript with `bytes` behind the store's back (what
    /// a crash, an old bug or a hand edit leaves).
    async fn plant(&self, key: &str, bytes: &str) {
        let sid = self
            .store
            .open(AGENT, key)
            .await
            .expect("open")
            .session_id()
            .to_string();
        let bytes = bytes.replace("SID", &sid);
        match &self.kind {
            Kind::File(home) => std::fs::write(
                home.path()
                    .join(format!("agents/{AGENT}/sessions/{sid}.jsonl")),
                bytes,
            )
            .expect("write transcript"),
            Kind::Pg(url) => {
                let (client, conn) = tokio_postgres::connect(url, NoTls).await.expect("connect");
                tokio::spawn(conn);
                client
                    .execute("DELETE FROM session_entries WHERE session_id = $1", &[&sid])
                    .await
                    .expect("clear");
                let mut lines = bytes.lines();
                let header = lines.next().expect("header");
                client
                    .execute(
                        "UPDATE sessions SET header = $2 WHERE session_id = $1",
                        &[&sid, &header],
                    )
                    .await
                    .expect("header");
                for (i, line) in lines.enumerate() {
                    client
                        .execute(
                            "INSERT INTO session_entries (session_id, seq, line) VALUES ($1, $2, $3)",
                            &[&sid, &(i as i64), &line],
                        )
                        .await
                        .expect("line");
                }
            }
        }
    }

    /// The session as an OpenClaw JSONL transcript.
    async fn export(&self, key: &str) -> Vec<u8> {
        self.store
            .export(AGENT, key)
            .await
            .expect("export")
            .expect("exists")
    }

    /// Imports a transcript; returns the key it was given.
    async fn import(&self, transcript: &[u8]) -> String {
        match &self.kind {
            Kind::File(home) => {
                let dir = tempfile::tempdir().expect("dir");
                std::fs::write(dir.path().join("import.jsonl"), transcript).expect("write");
                let report = FileSessionStore::new(home.path())
                    .import_dir(AGENT, dir.path())
                    .await
                    .expect("import");
                match &report.files[0].outcome {
                    ferroclaw_store::integrity::ImportOutcome::Imported { session_key, .. } => {
                        session_key.clone()
                    }
                    other => panic!("not imported: {other:?}"),
                }
            }
            Kind::Pg(url) => {
                let store = PgSessionStore::connect(url).await.expect("pg");
                match store
                    .import_transcript(AGENT, transcript, None)
                    .await
                    .expect("import")
                {
                    ferroclaw_store::integrity::ImportOutcome::Imported { session_key, .. } => {
                        session_key
                    }
                    other => panic!("not imported: {other:?}"),
                }
            }
        }
    }
}

fn user(text: &str) -> EntryBody {
    EntryBody::Message {
        message: Message::user(text),
    }
}

fn text_of(m: &Message) -> String {
    m.text()
}

/// A transcript (header id `SID`) with an orphaned tool result: a result whose call
/// was never written.
const DAMAGED: &str = r#"{"type":"session","version":3,"id":"SID","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}
{"type":"message","id":"00000001","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"list files"}],"timestamp":1}}
{"type":"message","id":"00000002","parentId":"00000001","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"toolResult","toolCallId":"call_gone","toolName":"exec","content":[{"type":"text","text":"a.txt"}],"isError":false,"timestamp":2}}
{"type":"message","id":"00000003","parentId":"00000002","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"assistant","content":[{"type":"text","text":"There is a.txt."}],"provider":"p","model":"m","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2},"stopReason":"stop","timestamp":3}}
"#;

#[tokio::test]
async fn the_index_creates_lists_records_and_deletes() {
    for s in Subject::all().await {
        let store = &s.store;
        let a = store.open(AGENT, "a").await.expect("open");
        let again = store.open(AGENT, "a").await.expect("reopen");
        assert_eq!(a.session_id(), again.session_id(), "{}", s.name);
        drop((a, again));
        drop(store.open(AGENT, "b").await.expect("open"));
        let usage = Usage {
            input: 7,
            output: 3,
            total_tokens: 10,
            ..Usage::default()
        };
        store
            .record_run(AGENT, "a", "openai", "gpt-4o", &usage)
            .await
            .expect("record");
        store
            .record_run(AGENT, "a", "openai", "gpt-4o-mini", &usage)
            .await
            .expect("record");
        let meta = store.get(AGENT, "a").await.expect("get").expect("row");
        assert_eq!(meta.usage.total_tokens, 20, "{}", s.name);
        assert_eq!(meta.model.as_deref(), Some("gpt-4o-mini"));
        let listed = store.list(AGENT).await.expect("list");
        let keys: Vec<&str> = listed.iter().map(|m| m.key.as_str()).collect();
        assert_eq!(keys.len(), 2, "{}", s.name);
        let b = &listed[keys.iter().position(|k| *k == "b").expect("b")];
        assert!(
            meta.updated_at >= b.updated_at,
            "{}: recording bumps",
            s.name
        );
        // Newest first (ties, within a millisecond, by creation then key).
        for pair in listed.windows(2) {
            let order = (pair[1].updated_at, pair[1].created_at)
                .cmp(&(pair[0].updated_at, pair[0].created_at));
            assert!(order.is_le(), "{}: {keys:?}", s.name);
        }
        assert!(store.list("other").await.expect("list").is_empty());
        let missing = store
            .record_run(AGENT, "nope", "p", "m", &usage)
            .await
            .expect_err("unknown key");
        assert!(
            matches!(missing, ferroclaw_store::StoreError::NotFound(_)),
            "{}",
            s.name
        );
        assert!(store.available().await, "{}", s.name);
        assert!(store.export(AGENT, "nope").await.expect("export").is_none());
        assert!(store.delete(AGENT, "a").await.expect("delete"));
        assert!(
            !store.delete(AGENT, "a").await.expect("again"),
            "{}",
            s.name
        );
        assert!(store.get(AGENT, "a").await.expect("get").is_none());
        // Keys are validated; ids that could name a path are refused.
        assert!(store.open(AGENT, "").await.is_err());
        assert!(store.open("../etc", "k").await.is_err());
    }
}

#[tokio::test]
async fn entries_survive_a_restart_with_their_chain_and_compaction() {
    for s in Subject::all().await {
        let mut log = s.store.open(AGENT, "k").await.expect("open");
        let first = log.append(user("one")).await.expect("append");
        log.append(user("two")).await.expect("append");
        let third = log.append(user("three")).await.expect("append");
        log.append(EntryBody::Compaction {
            summary: "The user counted to three.".into(),
            first_kept_entry_id: third.id.clone(),
            tokens_before: 100,
            tokens_after: Some(20),
        })
        .await
        .expect("compaction");
        log.append(user("four")).await.expect("append");
        log.flush().await.expect("flush");
        drop(log);

        let other = s.another().await;
        let log = other.open(AGENT, "k").await.expect("reopen");
        let entries = log.entries();
        assert_eq!(entries.len(), 5, "{}", s.name);
        assert_eq!(entries[0].id, first.id);
        assert!(entries[0].parent_id.is_none());
        for pair in entries.windows(2) {
            assert_eq!(pair[1].parent_id.as_ref(), Some(&pair[0].id), "{}", s.name);
        }
        assert!(
            log.problems().is_empty(),
            "{}: {:?}",
            s.name,
            log.problems()
        );
        let texts: Vec<String> = log.context().iter().map(text_of).collect();
        assert!(
            texts[0].contains("counted to three"),
            "{}: {texts:?}",
            s.name
        );
        assert_eq!(texts[1..], ["three", "four"], "{}", s.name);
    }
}

#[tokio::test]
async fn a_damaged_transcript_is_found_repaired_with_a_backup_and_reported() {
    for s in Subject::all().await {
        s.plant("broken", DAMAGED).await;
        let summary = s
            .store
            .scan(ScanOptions {
                repair: false,
                strategy: Strategy::Full,
                agent: None,
            })
            .await
            .expect("scan");
        assert!(summary.issues > 0, "{}: {summary:?}", s.name);
        assert_eq!(summary.repaired, 0);
        assert_eq!(summary.files[0].session_key.as_deref(), Some("broken"));

        let summary = s
            .store
            .scan(ScanOptions {
                repair: true,
                strategy: Strategy::Full,
                agent: Some(AGENT.into()),
            })
            .await
            .expect("repair");
        assert_eq!(summary.repaired, 1, "{}: {summary:?}", s.name);
        assert!(summary.files[0].backup.is_some());
        let incidents = s.store.incidents(10).await.expect("incidents");
        assert!(
            incidents.iter().any(|i| i.action == "repaired"
                && i.session_key.as_deref() == Some("broken")
                && i.backup.is_some()),
            "{}: {incidents:?}",
            s.name
        );
        let status = s.store.last_scan_status().await.expect("status");
        assert_eq!((status.repaired, status.repair), (1, true), "{}", s.name);
        let clean = s.store.scan(ScanOptions::default()).await.expect("rescan");
        assert_eq!(clean.issues, 0, "{}: {clean:?}", s.name);
        assert!(validate_bytes(&s.export("broken").await).is_empty());
    }
}

#[tokio::test]
async fn a_damaged_transcript_is_repaired_when_opened() {
    for s in Subject::all().await {
        s.plant("broken", DAMAGED).await;
        let log = s.another().await.open(AGENT, "broken").await.expect("open");
        assert!(!log.problems().is_empty(), "{}: reported", s.name);
        let roles: Vec<&'static str> = log
            .context()
            .iter()
            .map(|m| match m {
                Message::User(_) => "user",
                Message::Assistant(_) => "assistant",
                Message::ToolResult(_) => "toolResult",
            })
            .collect();
        assert!(
            !roles.contains(&"toolResult"),
            "{}: the orphan is gone from the context: {roles:?}",
            s.name
        );
        let incidents = s.store.incidents(10).await.expect("incidents");
        assert!(
            incidents.iter().any(|i| i.action == "repaired_on_load"),
            "{}: {incidents:?}",
            s.name
        );
        assert!(
            validate_bytes(&s.export("broken").await).is_empty(),
            "{}",
            s.name
        );
    }
}

#[tokio::test]
async fn a_transcript_exported_from_one_backend_imports_into_the_other() {
    let subjects = Subject::all().await;
    for (from, to) in [(0, 1), (1, 0)] {
        let (a, b) = (&subjects[from], &subjects[to]);
        let key = format!("trip-{from}");
        let mut log = a.store.open(AGENT, &key).await.expect("open");
        log.append(user("carry me over")).await.expect("append");
        log.append(user("and me")).await.expect("append");
        log.flush().await.expect("flush");
        let ids: Vec<String> = log.entries().iter().map(|e| e.id.clone()).collect();
        let sid = log.session_id().to_string();
        drop(log);
        let bytes = a.export(&key).await;
        assert!(validate_bytes(&bytes).is_empty());
        let imported_key = b.import(&bytes).await;
        let meta = b
            .store
            .get(AGENT, &imported_key)
            .await
            .expect("get")
            .expect("imported row");
        assert_eq!(meta.session_id, sid, "{} → {}", a.name, b.name);
        let log = b.store.open(AGENT, &imported_key).await.expect("open");
        let got: Vec<String> = log.entries().iter().map(|e| e.id.clone()).collect();
        assert_eq!(got, ids, "{} → {}", a.name, b.name);
        assert_eq!(b.export(&imported_key).await, bytes, "byte for byte");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writers_of_one_session_are_serialised_by_the_lease() {
    for s in Subject::all().await {
        // Two stores: two processes (or instances) on the same storage.
        let stores = [s.store.clone(), s.another().await];
        let mut tasks = Vec::new();
        for i in 0..20 {
            let store = stores[i % 2].clone();
            tasks.push(tokio::spawn(async move {
                let _lease = store.lease(AGENT, "shared").await.expect("lease");
                let mut log = store.open(AGENT, "shared").await.expect("open");
                log.append(user(&format!("writer {i}")))
                    .await
                    .expect("append");
                log.flush().await.expect("flush");
            }));
        }
        for t in tasks {
            t.await.expect("writer");
        }
        let log = s.another().await.open(AGENT, "shared").await.expect("open");
        assert_eq!(log.entries().len(), 20, "{}: no write lost", s.name);
        for pair in log.entries().windows(2) {
            assert_eq!(
                pair[1].parent_id.as_ref(),
                Some(&pair[0].id),
                "{}: one chain, no fork",
                s.name
            );
        }
        assert!(validate_bytes(&s.export("shared").await).is_empty());

        // While a lease is held, another one on the same key waits; a different key not.
        let held = stores[0].lease(AGENT, "busy").await.expect("lease");
        let waiting = {
            let store = stores[1].clone();
            tokio::spawn(async move { store.lease(AGENT, "busy").await.map(drop) })
        };
        stores[1]
            .lease(AGENT, "free")
            .await
            .expect("another key is not blocked");
        assert!(
            tokio::time::timeout(Duration::from_millis(300), async {
                while !waiting.is_finished() {
                    tokio::task::yield_now().await;
                }
            })
            .await
            .is_err(),
            "{}: a second lease on a held key must wait",
            s.name
        );
        drop(held);
        waiting
            .await
            .expect("task")
            .expect("acquired after release");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_sessions_at_once_never_interleave() {
    for s in Subject::all().await {
        let mut tasks = Vec::new();
        for i in 0..200 {
            let store = s.store.clone();
            tasks.push(tokio::spawn(async move {
                let key = format!("s{i}");
                let mut log = store.open(AGENT, &key).await.expect("open");
                for n in 0..3 {
                    log.append(user(&format!("{key} #{n}")))
                        .await
                        .expect("append");
                }
                log.flush().await.expect("flush");
            }));
        }
        for t in tasks {
            t.await.expect("session");
        }
        let other = s.another().await;
        assert_eq!(
            other.list(AGENT).await.expect("list").len(),
            200,
            "{}",
            s.name
        );
        for i in (0..200).step_by(37) {
            let key = format!("s{i}");
            let log = other.open(AGENT, &key).await.expect("open");
            let texts: Vec<String> = log.context().iter().map(text_of).collect();
            assert_eq!(
                texts,
                [0, 1, 2].map(|n| format!("{key} #{n}")),
                "{}",
                s.name
            );
        }
    }
}

#[tokio::test]
async fn the_managed_schema_is_migrated_once_and_guarded() {
    let url = fresh_database().await;
    // Several instances starting together apply each migration once.
    let starts: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { PgSessionStore::connect(&url).await.map(drop) })
        })
        .collect();
    for s in starts {
        s.await.expect("task").expect("start");
    }
    let store = PgSessionStore::connect(&url).await.expect("store");
    let states = store.migration_status().await.expect("status");
    assert!(states.iter().all(|m| m.applied_at.is_some()));
    let (client, conn) = tokio_postgres::connect(&url, NoTls).await.expect("connect");
    tokio::spawn(conn);
    let n: i64 = client
        .query_one("SELECT count(*) FROM schema_migrations", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(n, states.len() as i64);
    client
        .execute(
            "UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1",
            &[],
        )
        .await
        .expect("tamper");
    let err = PgSessionStore::connect(&url).await.err().expect("refused");
    assert!(
        err.to_string().contains("changed after it was applied"),
        "{err}"
    );
    // An unreachable server is an error that says so, not a hang.
    let err = PgSessionStore::connect("postgres://postgres@127.0.0.1:9/none")
        .await
        .err()
        .expect("unreachable");
    assert!(
        matches!(err, ferroclaw_store::StoreError::Database { .. }),
        "{err}"
    );
}

/// `session.durability: "batch"`: turns ending together share syncs, and every one of
/// them is stored (and readable by another store) once its flush returned.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn batched_syncs_keep_every_turn() {
    let home = tempfile::tempdir().expect("home");
    let url = fresh_database().await;
    type Pair = (&'static str, Arc<dyn SessionStore>, Arc<dyn SessionStore>);
    let stores: Vec<Pair> = vec![
        (
            "file",
            Arc::new(FileSessionStore::new(home.path()).with_durability(Durability::Batch)),
            Arc::new(FileSessionStore::new(home.path())),
        ),
        (
            "postgres",
            Arc::new(
                PgSessionStore::connect(&url)
                    .await
                    .expect("pg")
                    .with_durability(Durability::Batch),
            ),
            Arc::new(PgSessionStore::connect(&url).await.expect("pg")),
        ),
    ];
    for (name, store, reader) in stores {
        let mut tasks = Vec::new();
        for i in 0..50 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let key = format!("b{i}");
                let mut log = store.open(AGENT, &key).await.expect("open");
                log.append(user(&format!("{key} asks")))
                    .await
                    .expect("append");
                log.flush().await.expect("flush");
                log.append(user(&format!("{key} again")))
                    .await
                    .expect("append");
                log.flush().await.expect("flush");
            }));
        }
        for t in tasks {
            t.await.expect("turns");
        }
        for i in (0..50).step_by(7) {
            let key = format!("b{i}");
            let log = reader.open(AGENT, &key).await.expect("open");
            let texts: Vec<String> = log.context().iter().map(text_of).collect();
            assert_eq!(
                texts,
                [format!("{key} asks"), format!("{key} again")],
                "{name}"
            );
        }
    }
}

fn agent_record(key: &str, owner: &str, is_default: bool) -> AgentRecord {
    AgentRecord {
        key: key.into(),
        owner: owner.into(),
        kind: AgentKind::Open,
        is_default,
        settings: serde_json::json!({"name": key}),
        created_at: ferroclaw_types::now_millis(),
        updated_at: 0,
    }
}

#[tokio::test]
async fn the_directory_keeps_agents_shares_files_and_providers_apart_per_user() {
    for s in Subject::all().await {
        let n = s.name;
        let d = s.store.directory().expect("a directory");
        d.create_agent(&agent_record("alice-bot", "alice", false))
            .await
            .expect("create");
        d.create_agent(&agent_record("house", "admin", true))
            .await
            .expect("create default");
        // A live key cannot be taken twice, by anyone.
        let again = d
            .create_agent(&agent_record("alice-bot", "mallory", false))
            .await;
        assert!(
            matches!(again, Err(StoreError::Conflict(ref m)) if m.contains("alice-bot")),
            "{n}: {again:?}"
        );
        let keys = |v: Vec<AgentRecord>| v.into_iter().map(|a| a.key).collect::<Vec<_>>();
        assert_eq!(
            keys(d.agents_for(Some("alice")).await.unwrap()),
            ["alice-bot", "house"],
            "{n}"
        );
        assert_eq!(
            keys(d.agents_for(Some("bob")).await.unwrap()),
            ["house"],
            "{n}"
        );
        assert_eq!(
            keys(d.agents_for(None).await.unwrap()),
            ["alice-bot", "house"],
            "{n}"
        );
        // A share makes it visible to that user only.
        assert!(d
            .set_share("alice-bot", "bob", Some(ShareRole::User))
            .await
            .unwrap());
        assert_eq!(
            keys(d.agents_for(Some("bob")).await.unwrap()),
            ["alice-bot", "house"],
            "{n}"
        );
        assert_eq!(
            keys(d.agents_for(Some("carol")).await.unwrap()),
            ["house"],
            "{n}"
        );
        d.set_share("alice-bot", "bob", Some(ShareRole::Editor))
            .await
            .unwrap();
        let shares = d.shares("alice-bot").await.unwrap();
        assert_eq!(shares.len(), 1, "{n}: a re-grant replaces the role");
        assert_eq!(
            (shares[0].user.as_str(), shares[0].role),
            ("bob", ShareRole::Editor)
        );
        let of_bob = d.shares_of("bob").await.unwrap();
        assert_eq!(of_bob.len(), 1, "{n}");
        assert_eq!(
            (of_bob[0].0.as_str(), of_bob[0].1.role),
            ("alice-bot", ShareRole::Editor)
        );
        assert!(d.shares_of("carol").await.unwrap().is_empty(), "{n}");

        // Files: the agent's own and each user's are separate.
        d.set_file("alice-bot", FileScope::Agent, "AGENTS.md", Some("be brief"))
            .await
            .unwrap();
        d.set_file(
            "alice-bot",
            FileScope::User("alice"),
            "USER.md",
            Some("alice likes tea"),
        )
        .await
        .unwrap();
        d.set_file(
            "alice-bot",
            FileScope::User("bob"),
            "USER.md",
            Some("bob likes coffee"),
        )
        .await
        .unwrap();
        let bob = d.files("alice-bot", FileScope::User("bob")).await.unwrap();
        assert_eq!(bob.len(), 1, "{n}");
        assert_eq!(bob[0].content, "bob likes coffee");
        let own = d.files("alice-bot", FileScope::Agent).await.unwrap();
        assert_eq!((own.len(), own[0].name.as_str()), (1, "AGENTS.md"), "{n}");
        assert!(d
            .set_file("alice-bot", FileScope::User("bob"), "USER.md", None)
            .await
            .unwrap());
        assert!(!d
            .set_file("alice-bot", FileScope::User("bob"), "USER.md", None)
            .await
            .unwrap());
        assert!(
            d.files("alice-bot", FileScope::User("bob"))
                .await
                .unwrap()
                .is_empty(),
            "{n}"
        );

        // Update, seen through another store (a restart, another instance).
        let mut changed = agent_record("alice-bot", "alice", false);
        changed.kind = AgentKind::Predefined;
        changed.settings = serde_json::json!({"model": "m2"});
        assert!(d.update_agent(&changed).await.unwrap());
        let other = s.another().await.directory().expect("directory");
        let seen = other.agent("alice-bot").await.unwrap().expect("there");
        assert_eq!(
            (seen.kind, seen.owner.as_str()),
            (AgentKind::Predefined, "alice"),
            "{n}"
        );
        assert_eq!(seen.settings["model"], "m2");

        // Soft delete: gone for everyone, and its id is not taken again (its sessions
        // stay stored under it).
        assert!(d.delete_agent("alice-bot").await.unwrap());
        assert!(!d.delete_agent("alice-bot").await.unwrap());
        assert!(d.agent("alice-bot").await.unwrap().is_none(), "{n}");
        assert!(
            !d.update_agent(&changed).await.unwrap(),
            "{n}: a deleted agent is not updated"
        );
        assert_eq!(
            keys(d.agents_for(Some("bob")).await.unwrap()),
            ["house"],
            "{n}"
        );
        let reuse = d
            .create_agent(&agent_record("alice-bot", "mallory", false))
            .await;
        assert!(
            matches!(reuse, Err(StoreError::Conflict(ref m)) if m.contains("deleted")),
            "{n}: {reuse:?}"
        );
        assert!(d.agent("alice-bot").await.unwrap().is_none(), "{n}");

        // Provider records: a name is its owner's.
        let p = ProviderRecord {
            name: "alice-openai".into(),
            owner: "alice".into(),
            kind: "openai_compat".into(),
            base_url: "http://127.0.0.1:9/v1".into(),
            api_key: Some("aes-gcm:AAAA".into()),
            created_at: ferroclaw_types::now_millis(),
            updated_at: 0,
        };
        d.put_provider(&p).await.expect("put");
        let mut hijack = p.clone();
        hijack.owner = "mallory".into();
        hijack.base_url = "http://evil.example/v1".into();
        let refused = d.put_provider(&hijack).await;
        assert!(
            matches!(refused, Err(StoreError::Conflict(_))),
            "{n}: {refused:?}"
        );
        assert_eq!(
            d.provider("alice-openai")
                .await
                .unwrap()
                .expect("kept")
                .base_url,
            p.base_url,
            "{n}"
        );
        let mut moved = p.clone();
        moved.base_url = "http://127.0.0.1:10/v1".into();
        d.put_provider(&moved).await.expect("the owner replaces it");
        assert_eq!(d.providers(Some("alice")).await.unwrap().len(), 1, "{n}");
        assert!(
            d.providers(Some("mallory")).await.unwrap().is_empty(),
            "{n}"
        );
        assert_eq!(
            d.provider("alice-openai")
                .await
                .unwrap()
                .expect("there")
                .base_url,
            moved.base_url
        );
        assert!(d.delete_provider("alice-openai").await.unwrap());
        assert!(d.provider("alice-openai").await.unwrap().is_none(), "{n}");
    }
}

fn job(id: &str, next: Option<i64>) -> CronJob {
    CronJob {
        id: id.into(),
        agent_id: AGENT.into(),
        owner: Some("alice".into()),
        spec: serde_json::json!({"message": format!("do {id}")}),
        enabled: true,
        next_run_at: next,
        created_at: 1,
        updated_at: 1,
        lease: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cron_jobs_are_claimed_once_leased_released_and_logged() {
    for s in Subject::all().await {
        let n = s.name;
        let cron = s.store.cron().expect("cron store");
        for i in 0..20 {
            cron.put_job(&job(&format!("j{i:02}"), Some(1_000 + i)))
                .await
                .unwrap();
        }
        cron.put_job(&job("later", Some(10_000))).await.unwrap();
        let mut off = job("off", Some(0));
        off.enabled = false;
        cron.put_job(&off).await.unwrap();
        assert_eq!(cron.jobs(Some("alice")).await.unwrap().len(), 22, "{n}");
        assert!(cron.jobs(Some("bob")).await.unwrap().is_empty(), "{n}");

        // Eight claimers on two stores at the same moment: every due job exactly once.
        let other = s.another().await.cron().expect("cron store");
        let mut tasks = Vec::new();
        for c in 0..8 {
            let store = if c % 2 == 0 {
                cron.clone()
            } else {
                other.clone()
            };
            tasks.push(tokio::spawn(async move {
                let holder = format!("h{c}");
                let mut got = Vec::new();
                loop {
                    let claimed = store.claim_due(5_000, &holder, 65_000, 3).await.unwrap();
                    if claimed.is_empty() {
                        return got;
                    }
                    for j in claimed {
                        assert_eq!(
                            j.lease.as_ref().map(|l| l.0.as_str()),
                            Some(holder.as_str())
                        );
                        got.push(j.id);
                    }
                }
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        all.sort();
        let expected: Vec<String> = (0..20).map(|i| format!("j{i:02}")).collect();
        assert_eq!(
            all, expected,
            "{n}: each due job once, none early, none disabled"
        );

        // Held: neither claimed again nor run now, until the lease expires.
        assert!(
            cron.claim_due(60_000, "x", 120_000, 10)
                .await
                .unwrap()
                .iter()
                .all(|j| j.id == "later"),
            "{n}"
        );
        cron.release("later", "x", 1, Some(70_000), false)
            .await
            .unwrap();
        assert!(
            cron.claim("j00", 60_000, "x", 120_000)
                .await
                .unwrap()
                .is_none(),
            "{n}"
        );
        assert!(
            !cron.renew("j00", "x", 130_000).await.unwrap(),
            "{n}: not x's"
        );
        let holder = cron.job("j00").await.unwrap().unwrap().lease.unwrap().0;
        assert!(cron.renew("j00", &holder, 130_000).await.unwrap());
        assert!(
            cron.claim("j00", 120_000, "x", 200_000)
                .await
                .unwrap()
                .is_none(),
            "{n}: renewed"
        );
        let taken = cron.claim("j00", 130_001, "x", 200_000).await.unwrap();
        assert!(taken.is_some(), "{n}: an expired lease is taken over");

        // Release: the next due time, unless the job was edited meanwhile.
        cron.release("j00", "x", 1, Some(90_000), false)
            .await
            .unwrap();
        let j = cron.job("j00").await.unwrap().unwrap();
        assert_eq!(
            (j.next_run_at, j.lease.is_none()),
            (Some(90_000), true),
            "{n}"
        );
        cron.claim("j01", 200_000, "x", 300_000)
            .await
            .unwrap()
            .unwrap();
        let mut edited = job("j01", Some(500_000));
        edited.updated_at = 2;
        cron.put_job(&edited).await.unwrap();
        cron.release("j01", "x", 1, Some(250_000), false)
            .await
            .unwrap();
        let j = cron.job("j01").await.unwrap().unwrap();
        assert_eq!(j.next_run_at, Some(500_000), "{n}: the edit wins");
        assert!(j.lease.is_none());
        // Nothing next: disabled. A one-time job that ran: removed.
        cron.claim("j02", 200_000, "x", 300_000)
            .await
            .unwrap()
            .unwrap();
        cron.release("j02", "x", 1, None, false).await.unwrap();
        assert!(!cron.job("j02").await.unwrap().unwrap().enabled, "{n}");
        cron.claim("j03", 200_000, "x", 300_000)
            .await
            .unwrap()
            .unwrap();
        cron.release("j03", "x", 1, None, true).await.unwrap();
        assert!(cron.job("j03").await.unwrap().is_none(), "{n}");

        // The run log: newest first, bounded per job, stale runs marked interrupted.
        for i in 0..(RUNS_KEPT_PER_JOB + 5) {
            cron.put_run(&CronRun {
                id: format!("r{i:04}"),
                job_id: "j04".into(),
                started_at: i as i64,
                ended_at: Some(i as i64 + 1),
                status: "ok".into(),
                error: None,
                attempts: 1,
                session_key: format!("cron:j04:run:r{i:04}"),
                output: Some("done".into()),
                holder: Some("x".into()),
            })
            .await
            .unwrap();
        }
        let runs = cron.runs(Some("j04"), 1_000).await.unwrap();
        assert_eq!(runs.len(), RUNS_KEPT_PER_JOB, "{n}");
        assert_eq!(runs[0].id, format!("r{:04}", RUNS_KEPT_PER_JOB + 4));
        let mut running = runs[0].clone();
        running.id = "stale".into();
        running.started_at = 1_000_000;
        running.status = "running".into();
        running.holder = Some("dead".into());
        cron.put_run(&running).await.unwrap();
        cron.interrupt_stale_runs("j04", "x").await.unwrap();
        let latest = &cron.runs(None, 1).await.unwrap()[0];
        assert_eq!(
            (latest.id.as_str(), latest.status.as_str()),
            ("stale", "interrupted"),
            "{n}"
        );
        assert!(cron.delete_job("j04").await.unwrap());
        assert!(
            cron.runs(Some("j04"), 10).await.unwrap().is_empty(),
            "{n}: runs go with the job"
        );
        assert!(!cron.delete_job("j04").await.unwrap());
    }
}

#[tokio::test]
async fn a_branched_transcript_reads_and_grows_along_its_active_branch() {
    let subjects = Subject::all().await;
    // One, two, three; then a branch back from "one" (as after an edit and a rerun).
    let bytes = {
        let s = &subjects[0];
        let mut log = s.store.open(AGENT, "source").await.expect("open");
        for t in ["one", "two", "three"] {
            log.append(user(t)).await.expect("append");
        }
        log.flush().await.expect("flush");
        drop(log);
        let text = String::from_utf8(s.export("source").await).expect("utf8");
        let lines: Vec<&str> = text.lines().collect();
        let first: serde_json::Value = serde_json::from_str(lines[1]).expect("entry");
        let mut branch: serde_json::Value = serde_json::from_str(lines[3]).expect("entry");
        branch["id"] = "b7a9c0de".into();
        branch["parentId"] = first["id"].clone();
        let body = branch.to_string().replace("three", "branch");
        // Under a session id of its own: the source stays where it is.
        let mut header: serde_json::Value = serde_json::from_str(lines[0]).expect("header");
        header["id"] = "01a2ffff-0000-7000-8000-00000000b7a9".into();
        let rest: String = lines[1..].iter().map(|l| format!("{l}\n")).collect();
        format!("{header}\n{rest}{body}\n").into_bytes()
    };
    assert!(validate_bytes(&bytes).is_empty(), "a branch is valid");
    for s in &subjects {
        let key = s.import(&bytes).await;
        let mut log = s.store.open(AGENT, &key).await.expect("open");
        assert_eq!(log.entries().len(), 4, "{}", s.name);
        let texts: Vec<String> = log.context().iter().map(text_of).collect();
        assert_eq!(
            texts,
            ["one", "branch"],
            "{}: the active branch only",
            s.name
        );
        let next = log.append(user("after")).await.expect("append");
        assert_eq!(next.parent_id.as_deref(), Some("b7a9c0de"), "{}", s.name);
        log.flush().await.expect("flush");
        drop(log);
        let again = s.another().await.open(AGENT, &key).await.expect("reopen");
        let texts: Vec<String> = again.context().iter().map(text_of).collect();
        assert_eq!(texts, ["one", "branch", "after"], "{}", s.name);
        assert!(
            again.problems().is_empty(),
            "{}: {:?}",
            s.name,
            again.problems()
        );
        drop(again);
        let exported = s.export(&key).await;
        assert!(
            exported.starts_with(&bytes),
            "{}: kept as it was, grown",
            s.name
        );
    }
}

#[tokio::test]
async fn mcp_servers_are_kept_replaced_listed_and_deleted() {
    for s in Subject::all().await {
        let n = s.name;
        let servers = s.store.mcp_servers().expect("mcp server store");
        assert!(servers.servers().await.unwrap().is_empty(), "{n}");
        let record = |name: &str, url: &str, at: i64| ferroclaw_store::McpServerRecord {
            name: name.into(),
            spec: serde_json::json!({"transport": "streamable-http", "url": url}),
            created_at: at,
            updated_at: at,
        };
        servers
            .put_server(&record("zeta", "http://z/mcp", 1))
            .await
            .unwrap();
        servers
            .put_server(&record("alpha", "http://a/mcp", 2))
            .await
            .unwrap();
        // A replacement keeps the creation time and takes the new definition.
        servers
            .put_server(&record("zeta", "http://z2/mcp", 5))
            .await
            .unwrap();
        let all = servers.servers().await.unwrap();
        let names: Vec<&str> = all.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["alpha", "zeta"], "{n}");
        let zeta = servers.server("zeta").await.unwrap().expect("kept");
        assert_eq!(zeta.spec["url"], "http://z2/mcp", "{n}");
        assert_eq!((zeta.created_at, zeta.updated_at), (1, 5), "{n}");
        assert!(servers.delete_server("zeta").await.unwrap(), "{n}");
        assert!(!servers.delete_server("zeta").await.unwrap(), "{n}");
        assert!(servers.server("zeta").await.unwrap().is_none(), "{n}");
        assert_eq!(servers.servers().await.unwrap().len(), 1, "{n}");
    }
}

#[tokio::test]
async fn channel_pairing_gives_one_code_per_sender_caps_pending_and_approves_once() {
    use ferroclaw_store::PairingOutcome;
    const HOUR: i64 = 3_600_000;
    for s in Subject::all().await {
        let n = s.name;
        let ch = s.store.channels().expect("channel store");
        let other = s.another().await.channels().expect("channel store");
        let issued = ch
            .request_pairing(
                "telegram",
                "default",
                "42",
                Some("ann"),
                "AAAA2222",
                1_000,
                HOUR,
                3,
            )
            .await
            .unwrap();
        let PairingOutcome::Issued(first) = issued else {
            panic!("{n}: {issued:?}")
        };
        assert_eq!(
            (first.code.as_str(), first.expires_at),
            ("AAAA2222", 1_000 + HOUR)
        );
        // The same sender again, from another instance: the same code, no new one.
        let again = other
            .request_pairing(
                "telegram",
                "default",
                "42",
                Some("ann"),
                "BBBB3333",
                2_000,
                HOUR,
                3,
            )
            .await
            .unwrap();
        assert_eq!(again, PairingOutcome::Pending(first.clone()), "{n}");
        for (sender, code) in [("43", "CCCC4444"), ("44", "DDDD5555")] {
            let r = ch
                .request_pairing("telegram", "default", sender, None, code, 3_000, HOUR, 3)
                .await
                .unwrap();
            assert!(matches!(r, PairingOutcome::Issued(_)), "{n}: {r:?}");
        }
        // A fourth sender while three codes are pending: none.
        let full = ch
            .request_pairing(
                "telegram", "default", "45", None, "EEEE6666", 4_000, HOUR, 3,
            )
            .await
            .unwrap();
        assert_eq!(full, PairingOutcome::Full, "{n}");
        // Another account of the same channel has its own three.
        let elsewhere = ch
            .request_pairing("telegram", "work", "45", None, "FFFF7777", 4_000, HOUR, 3)
            .await
            .unwrap();
        assert!(matches!(elsewhere, PairingOutcome::Issued(_)), "{n}");
        assert_eq!(ch.pairing_requests(5_000).await.unwrap().len(), 4, "{n}");

        // Approval uses the code up; a second approval (another instance) gets nothing.
        assert!(!ch.is_approved("telegram", "default", "42").await.unwrap());
        let approved = ch
            .approve_pairing("AAAA2222", Some("admin"), 6_000)
            .await
            .unwrap()
            .expect("a valid code");
        assert_eq!(
            (approved.sender_id.as_str(), approved.sender_name.as_deref()),
            ("42", Some("ann")),
            "{n}"
        );
        assert!(other
            .approve_pairing("AAAA2222", None, 6_001)
            .await
            .unwrap()
            .is_none());
        assert!(
            other
                .is_approved("telegram", "default", "42")
                .await
                .unwrap(),
            "{n}"
        );
        assert!(
            !other.is_approved("telegram", "work", "42").await.unwrap(),
            "{n}"
        );
        assert_eq!(ch.approved_senders().await.unwrap(), vec![approved], "{n}");

        // An expired code cannot be approved and frees its place.
        let late = 3_000 + HOUR + 1;
        assert!(ch
            .approve_pairing("CCCC4444", None, late)
            .await
            .unwrap()
            .is_none());
        let r = ch
            .request_pairing("telegram", "default", "45", None, "GGGG8888", late, HOUR, 3)
            .await
            .unwrap();
        assert!(matches!(r, PairingOutcome::Issued(_)), "{n}: {r:?}");

        assert!(
            ch.revoke_sender("telegram", "default", "42").await.unwrap(),
            "{n}"
        );
        assert!(
            !ch.revoke_sender("telegram", "default", "42").await.unwrap(),
            "{n}"
        );
        assert!(
            !ch.is_approved("telegram", "default", "42").await.unwrap(),
            "{n}"
        );
    }
}

#[tokio::test]
async fn a_channel_account_is_held_by_one_instance_and_each_message_is_handled_once() {
    for s in Subject::all().await {
        let n = s.name;
        let a = s.store.channels().expect("channel store");
        let b = s.another().await.channels().expect("channel store");
        assert!(a
            .claim_account("telegram:default", "one", 1_000, 10_000)
            .await
            .unwrap());
        assert!(
            !b.claim_account("telegram:default", "two", 2_000, 10_000)
                .await
                .unwrap(),
            "{n}"
        );
        // Renewal by the holder; the other gets it only once the lease ran out.
        assert!(a
            .claim_account("telegram:default", "one", 9_000, 10_000)
            .await
            .unwrap());
        assert!(!b
            .claim_account("telegram:default", "two", 15_000, 10_000)
            .await
            .unwrap());
        assert!(
            b.claim_account("telegram:default", "two", 19_001, 10_000)
                .await
                .unwrap(),
            "{n}"
        );
        // The old holder can no longer move the cursor; the new one can.
        assert_eq!(a.cursor("telegram:default").await.unwrap(), None);
        assert!(
            !a.set_cursor("telegram:default", "one", 5).await.unwrap(),
            "{n}"
        );
        assert!(b.set_cursor("telegram:default", "two", 7).await.unwrap());
        assert_eq!(a.cursor("telegram:default").await.unwrap(), Some(7), "{n}");
        // A clean release hands it over at once.
        b.release_account("telegram:default", "two").await.unwrap();
        assert!(
            a.claim_account("telegram:default", "one", 19_002, 10_000)
                .await
                .unwrap(),
            "{n}"
        );

        // Eight instances racing on one message: exactly one handles it.
        let mut racers = Vec::new();
        for i in 0..8 {
            let store = if i % 2 == 0 { a.clone() } else { b.clone() };
            racers.push(tokio::spawn(async move {
                store
                    .first_delivery("telegram:default", "chat1:77", 20_000)
                    .await
                    .unwrap()
            }));
        }
        let mut firsts = 0;
        for r in racers {
            firsts += usize::from(r.await.unwrap());
        }
        assert_eq!(firsts, 1, "{n}");
        assert!(
            a.first_delivery("telegram:other", "chat1:77", 20_000)
                .await
                .unwrap(),
            "{n}"
        );
        // Remembered for a week, then forgotten when the account is next claimed.
        let week = ferroclaw_store::DELIVERY_MEMORY_MS;
        assert!(!b
            .first_delivery("telegram:default", "chat1:77", 20_000 + week - 1)
            .await
            .unwrap());
        assert!(a
            .claim_account("telegram:default", "one", 20_001 + week, 10_000)
            .await
            .unwrap());
        assert!(
            a.first_delivery("telegram:default", "chat1:77", 20_002 + week)
                .await
                .unwrap(),
            "{n}"
        );
    }
}

fn trace(
    id: &str,
    agent: &str,
    user: Option<&str>,
    at: i64,
    status: &str,
) -> ferroclaw_store::TraceRecord {
    ferroclaw_store::TraceRecord {
        id: id.into(),
        parent_id: None,
        agent_id: agent.into(),
        session_key: format!("s-{agent}"),
        user_id: user.map(str::to_string),
        origin: "http".into(),
        status: status.into(),
        error: None,
        started_at: at,
        ended_at: Some(at + 500),
        provider: Some("p".into()),
        model: Some("m".into()),
        input_tokens: 0,
        output_tokens: 0,
        cached_tokens: 0,
        cost_usd: 0.0,
        llm_calls: 0,
        tool_calls: 0,
        input: "question".into(),
        output: "answer".into(),
    }
}

fn llm_span(
    trace: &str,
    id: &str,
    at: i64,
    model: &str,
    tokens: (u64, u64, u64),
    cost: f64,
) -> ferroclaw_store::SpanRecord {
    ferroclaw_store::SpanRecord {
        trace_id: trace.into(),
        span_id: id.into(),
        parent_span: Some(trace.into()),
        kind: "llm".into(),
        name: "llm.call".into(),
        started_at: at,
        ended_at: Some(at + 100),
        status: "ok".into(),
        error: None,
        provider: Some("p".into()),
        model: Some(model.into()),
        input_tokens: tokens.0,
        output_tokens: tokens.1,
        cached_tokens: tokens.2,
        cost_usd: cost,
        attrs: serde_json::json!({"iteration": 1, "finishReason": "stop"}),
    }
}

#[tokio::test]
async fn traces_are_replaced_paged_filtered_summed_and_pruned() {
    use ferroclaw_store::{TraceFilter, UsageGroup, UsageQuery};
    const DAY: i64 = 86_400_000;
    let day1 = 1_767_225_600_000; // 2026-01-01T00:00:00Z
    for s in Subject::all().await {
        let n = s.name;
        let traces = s.store.traces().expect("trace store");
        // A running trace, then its finished version with spans.
        let mut running = trace("t1", "main", Some("alice"), day1, "running");
        running.ended_at = None;
        traces.record(vec![(running, Vec::new())]).await.unwrap();
        let page = traces.list(&TraceFilter::default()).await.unwrap();
        assert_eq!(page.traces[0].status, "running", "{n}");
        let mut done = trace("t1", "main", Some("alice"), day1, "ok");
        done.input_tokens = 30;
        let spans = vec![
            llm_span("t1", "t1.1", day1 + 1, "m", (10, 5, 2), 0.01),
            llm_span("t1", "t1.2", day1 + 2, "m2", (20, 7, 0), 0.02),
        ];
        traces.record(vec![(done, spans)]).await.unwrap();
        // Two more days, two agents, a child of t1.
        let mut child = trace("t2", "helper", Some("bob"), day1 + DAY, "stalled");
        child.parent_id = Some("t1".into());
        traces
            .record(vec![
                (
                    child,
                    vec![llm_span("t2", "t2.1", day1 + DAY, "m", (1, 1, 0), 0.5)],
                ),
                (trace("t3", "main", None, day1 + 2 * DAY, "ok"), Vec::new()),
            ])
            .await
            .unwrap();

        let (t1, spans, children) = traces.get("t1").await.unwrap().expect("t1");
        assert_eq!(
            (t1.status.as_str(), t1.input_tokens),
            ("ok", 30),
            "{n}: replaced"
        );
        assert_eq!(spans.len(), 2, "{n}");
        assert_eq!(spans[0].attrs["finishReason"], "stop", "{n}");
        assert_eq!(children, ["t2"], "{n}");
        assert!(traces.get("nope").await.unwrap().is_none(), "{n}");

        // Newest first, one per page, the cursor walking on to the end.
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let page = traces
                .list(&TraceFilter {
                    limit: 1,
                    cursor: cursor.clone(),
                    ..TraceFilter::default()
                })
                .await
                .unwrap();
            seen.extend(page.traces.iter().map(|t| t.id.clone()));
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        assert_eq!(seen, ["t3", "t2", "t1"], "{n}");
        let by = |f: TraceFilter| {
            let traces = traces.clone();
            async move {
                traces
                    .list(&f)
                    .await
                    .unwrap()
                    .traces
                    .into_iter()
                    .map(|t| t.id)
                    .collect::<Vec<_>>()
            }
        };
        assert_eq!(
            by(TraceFilter {
                agent_id: Some("main".into()),
                ..Default::default()
            })
            .await,
            ["t3", "t1"],
            "{n}"
        );
        assert_eq!(
            by(TraceFilter {
                user_id: Some("bob".into()),
                ..Default::default()
            })
            .await,
            ["t2"],
            "{n}"
        );
        assert_eq!(
            by(TraceFilter {
                status: Some("stalled".into()),
                ..Default::default()
            })
            .await,
            ["t2"],
            "{n}"
        );
        assert_eq!(
            by(TraceFilter {
                session_key: Some("s-main".into()),
                ..Default::default()
            })
            .await,
            ["t3", "t1"],
            "{n}"
        );
        assert_eq!(
            by(TraceFilter {
                since: Some(day1 + DAY),
                until: Some(day1 + 2 * DAY),
                ..Default::default()
            })
            .await,
            ["t2"],
            "{n}"
        );
        let bad = traces
            .list(&TraceFilter {
                cursor: Some("not a cursor".into()),
                ..Default::default()
            })
            .await;
        assert!(bad.is_err(), "{n}");

        // Usage sums the model calls.
        let q = UsageQuery::default();
        let by_model = traces.usage(UsageGroup::Model, q).await.unwrap();
        let m = by_model.iter().find(|r| r.key == "p/m").expect("p/m");
        assert_eq!(
            (m.calls, m.input_tokens, m.output_tokens, m.cached_tokens),
            (2, 11, 6, 2),
            "{n}"
        );
        assert!((m.cost_usd - 0.51).abs() < 1e-9, "{n}: {}", m.cost_usd);
        let by_agent = traces.usage(UsageGroup::Agent, q).await.unwrap();
        assert_eq!(by_agent[0].key, "helper", "{n}: largest cost first");
        let by_day = traces.usage(UsageGroup::Day, q).await.unwrap();
        let mut days: Vec<&str> = by_day.iter().map(|r| r.key.as_str()).collect();
        days.sort();
        assert_eq!(days, ["2026-01-01", "2026-01-02"], "{n}");
        let alice = traces
            .usage(
                UsageGroup::User,
                UsageQuery {
                    user_id: Some("alice"),
                    ..q
                },
            )
            .await
            .unwrap();
        assert_eq!(alice.len(), 1, "{n}");
        assert_eq!(
            (alice[0].key.as_str(), alice[0].input_tokens),
            ("alice", 30),
            "{n}"
        );
        let later = traces
            .usage(
                UsageGroup::Agent,
                UsageQuery {
                    since: Some(day1 + DAY),
                    ..q
                },
            )
            .await
            .unwrap();
        assert_eq!(later.len(), 1, "{n}");

        // A trace left running by a process that ended is marked lost once stale.
        let mut orphan = trace("t9", "main", None, day1, "running");
        orphan.ended_at = None;
        orphan.session_key = "s-orphan".into();
        traces.record(vec![(orphan, Vec::new())]).await.unwrap();
        assert_eq!(
            traces.abandon(day1 - 1).await.unwrap(),
            0,
            "{n}: not stale yet"
        );
        assert_eq!(traces.abandon(day1 + 1).await.unwrap(), 1, "{n}");
        let (lost, _, _) = traces.get("t9").await.unwrap().unwrap();
        assert_eq!(lost.status, "lost", "{n}");
        assert!(lost.error.is_some(), "{n}");
        traces.forget_session("main", "s-orphan").await.unwrap();

        // A deleted session's traces go, others stay.
        assert_eq!(
            traces.forget_session("main", "s-main").await.unwrap(),
            2,
            "{n}"
        );
        assert!(traces.get("t3").await.unwrap().is_none(), "{n}");
        assert!(traces.get("t2").await.unwrap().is_some(), "{n}");
        traces
            .record(vec![
                (
                    trace("t1", "main", Some("alice"), day1, "ok"),
                    vec![llm_span("t1", "t1.1", day1 + 1, "m", (10, 5, 2), 0.01)],
                ),
                (trace("t3", "main", None, day1 + 2 * DAY, "ok"), Vec::new()),
            ])
            .await
            .unwrap();

        // Pruning forgets old traces and their spans.
        assert_eq!(traces.prune(day1 + DAY).await.unwrap(), 1, "{n}");
        assert!(traces.get("t1").await.unwrap().is_none(), "{n}");
        let after = traces.usage(UsageGroup::Model, q).await.unwrap();
        assert_eq!(
            after.iter().map(|r| r.calls).sum::<u64>(),
            1,
            "{n}: t1's calls went with it"
        );
    }
}

fn message(v: serde_json::Value) -> EntryBody {
    EntryBody::Message {
        message: serde_json::from_value(v).expect("message"),
    }
}

/// A reader (history, previews, another session's tool) that comes by while a run waits
/// on a tool call sees the call as it is, and the run's later writes all stay: reading
/// never creates, repairs or replaces a transcript. (It once did, through `open`: the
/// pending call looked like a missing result, the file was repaired under the run, and
/// the run's next lines went to the replaced file.)
#[tokio::test]
async fn reading_a_session_while_its_run_waits_on_a_tool_leaves_the_run_s_writes() {
    for s in Subject::all().await {
        let n = s.name;
        let mut run = s.store.open(AGENT, "busy").await.unwrap();
        run.append(user("run it")).await.unwrap();
        run.append(message(serde_json::json!({"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "exec", "arguments": {"command": "sleep 5"}}], "provider": "p", "model": "m", "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2}, "stopReason": "toolUse", "timestamp": 2})))
            .await
            .unwrap();
        run.flush().await.unwrap();

        let seen = s
            .store
            .read(AGENT, "busy")
            .await
            .unwrap()
            .expect("the session");
        assert_eq!(
            seen.len(),
            2,
            "{n}: the call as it is, no placeholder result"
        );
        assert!(
            s.store.read(AGENT, "nobody").await.unwrap().is_none(),
            "{n}"
        );
        assert!(
            s.store.get(AGENT, "nobody").await.unwrap().is_none(),
            "{n}: not created"
        );

        run.append(message(serde_json::json!({"role": "toolResult", "toolCallId": "c1", "toolName": "exec", "content": [{"type": "text", "text": "slept"}], "isError": false, "timestamp": 3})))
            .await
            .unwrap();
        run.append(message(serde_json::json!({"role": "assistant", "content": [{"type": "text", "text": "done"}], "provider": "p", "model": "m", "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2}, "stopReason": "stop", "timestamp": 4})))
            .await
            .unwrap();
        run.flush().await.unwrap();
        drop(run);

        let after = s
            .store
            .read(AGENT, "busy")
            .await
            .unwrap()
            .expect("the session");
        assert_eq!(after.len(), 4, "{n}: every line of the run is there");
        let reopened = s.store.open(AGENT, "busy").await.unwrap();
        let context = reopened.context();
        assert_eq!(context.len(), 4, "{n}");
        assert_eq!(text_of(&context[3]), "done", "{n}");
        assert!(reopened.problems().is_empty(), "{n}: nothing needed repair");
    }
}

#[tokio::test]
async fn devices_are_paired_once_listed_touched_and_revoked_for_good() {
    use ferroclaw_store::{DevicePairing, DeviceRecord};
    for s in Subject::all().await {
        let n = s.name;
        let devices = s.store.devices().expect("device store");
        let other = s.another().await.devices().expect("device store");
        let d = |id: &str, at: i64| DeviceRecord {
            id: id.into(),
            public_key: format!("key-of-{id}"),
            client_id: "openclaw-tui".into(),
            platform: "linux".into(),
            user_id: Some("alice".into()),
            role: "operator".into(),
            token_hash: format!("hash-of-{id}"),
            credential_hash: format!("credential-of-{id}"),
            paired_at: at,
            last_seen_at: at,
            revoked_at: None,
        };
        let paired = |p: DevicePairing| p == DevicePairing::Paired;
        assert!(
            paired(devices.pair_device(&d("d1", 10), 8).await.unwrap()),
            "{n}"
        );
        // A second pairing of the same id changes nothing (from any instance).
        let mut again = d("d1", 20);
        again.token_hash = "another".into();
        assert_eq!(
            other.pair_device(&again, 8).await.unwrap(),
            DevicePairing::Known,
            "{n}"
        );
        assert_eq!(
            devices.device("d1").await.unwrap().unwrap().token_hash,
            "hash-of-d1",
            "{n}"
        );
        assert!(
            paired(devices.pair_device(&d("d2", 30), 8).await.unwrap()),
            "{n}"
        );
        let ids: Vec<String> = other
            .devices()
            .await
            .unwrap()
            .into_iter()
            .map(|d| d.id)
            .collect();
        assert_eq!(
            ids,
            ["d2", "d1"],
            "{n}: newest first, seen by every instance"
        );
        devices.touch_device("d1", 99).await.unwrap();
        assert_eq!(
            other.device("d1").await.unwrap().unwrap().last_seen_at,
            99,
            "{n}"
        );
        // Back with another credential: bound to it, from any instance; its token kept.
        assert!(other
            .rebind_device("d1", None, "viewer", "credential-2", 98)
            .await
            .unwrap());
        let rebound = devices.device("d1").await.unwrap().unwrap();
        assert_eq!(
            (
                rebound.user_id.as_deref(),
                rebound.role.as_str(),
                rebound.credential_hash.as_str(),
                rebound.token_hash.as_str(),
                rebound.last_seen_at
            ),
            (None, "viewer", "credential-2", "hash-of-d1", 98),
            "{n}"
        );
        assert!(
            !devices
                .rebind_device("nope", None, "admin", "x", 98)
                .await
                .unwrap(),
            "{n}: unknown"
        );
        assert!(other.revoke_device("d1", 100).await.unwrap(), "{n}");
        assert!(
            !devices.revoke_device("d1", 101).await.unwrap(),
            "{n}: once"
        );
        let revoked = devices.device("d1").await.unwrap().unwrap();
        assert_eq!(revoked.revoked_at, Some(100), "{n}");
        assert!(
            !other
                .rebind_device("d1", None, "admin", "credential-3", 102)
                .await
                .unwrap(),
            "{n}: a revoked device is not bound again"
        );
        assert_eq!(
            devices.device("d1").await.unwrap().unwrap().credential_hash,
            "credential-2",
            "{n}"
        );
        // Revoked stays revoked: pairing the key again is refused.
        assert_eq!(
            devices.pair_device(&d("d1", 200), 8).await.unwrap(),
            DevicePairing::Known,
            "{n}"
        );
        assert!(devices.device("nope").await.unwrap().is_none(), "{n}");
    }
}

/// One credential holder cannot fill the store with devices: past the cap a new device
/// is refused (from any instance) until one is revoked; other users, the shared operator
/// credential and devices already paired are not affected.
#[tokio::test]
async fn devices_per_user_are_capped() {
    use ferroclaw_store::{DevicePairing, DeviceRecord};
    for s in Subject::all().await {
        let n = s.name;
        let devices = s.store.devices().expect("device store");
        let other = s.another().await.devices().expect("device store");
        let d = |id: &str, user: Option<&str>| DeviceRecord {
            id: id.into(),
            public_key: format!("key-of-{id}"),
            client_id: "openclaw-tui".into(),
            platform: "linux".into(),
            user_id: user.map(str::to_string),
            role: "operator".into(),
            token_hash: format!("hash-of-{id}"),
            credential_hash: format!("credential-of-{id}"),
            paired_at: 1,
            last_seen_at: 1,
            revoked_at: None,
        };
        for id in ["m1", "m2"] {
            assert_eq!(
                devices
                    .pair_device(&d(id, Some("mallory")), 2)
                    .await
                    .unwrap(),
                DevicePairing::Paired,
                "{n}"
            );
        }
        assert_eq!(
            other
                .pair_device(&d("m3", Some("mallory")), 2)
                .await
                .unwrap(),
            DevicePairing::Full,
            "{n}: the third device of one user"
        );
        assert!(
            devices.device("m3").await.unwrap().is_none(),
            "{n}: nothing stored"
        );
        // A known device is still known, not "full".
        assert_eq!(
            devices
                .pair_device(&d("m1", Some("mallory")), 2)
                .await
                .unwrap(),
            DevicePairing::Known,
            "{n}"
        );
        // Other users and the operator credential (no user) count on their own.
        assert_eq!(
            devices
                .pair_device(&d("c1", Some("carol")), 2)
                .await
                .unwrap(),
            DevicePairing::Paired,
            "{n}"
        );
        for id in ["o1", "o2"] {
            assert_eq!(
                devices.pair_device(&d(id, None), 2).await.unwrap(),
                DevicePairing::Paired,
                "{n}"
            );
        }
        assert_eq!(
            devices.pair_device(&d("o3", None), 2).await.unwrap(),
            DevicePairing::Full,
            "{n}"
        );
        // Revoking one makes room.
        assert!(devices.revoke_device("m1", 5).await.unwrap(), "{n}");
        assert_eq!(
            other
                .pair_device(&d("m3", Some("mallory")), 2)
                .await
                .unwrap(),
            DevicePairing::Paired,
            "{n}"
        );
    }
}
