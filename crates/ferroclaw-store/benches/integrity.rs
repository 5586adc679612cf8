//! Integrity benchmarks (prints figures, never fails a run):
//! - load + validate a 10,000-entry transcript,
//! - start-up scan of 1,000 healthy transcripts.
//!
//! `cargo bench -p ferroclaw-store --bench integrity`
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed fixture should stop the test

use std::path::Path;
use std::time::{Duration, Instant};

use ferroclaw_store::{
    read_transcript, validate_file, FileSessionStore, Integrity, ScanOptions, SessionStore,
};
use serde_json::json;

/// A realistic mix: user, assistant with two tool calls, two results (~400 chars each),
/// assistant answer, repeated.
fn transcript(sid: &str, entries: usize) -> String {
    let mut out = json!({"type":"session","version":3,"id":sid,"timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}).to_string();
    out.push('\n');
    let mut parent: Option<String> = None;
    let output = "drwxr-xr-x  2 user user 4096 Jan  1 00:00 src\n".repeat(8);
    for i in 0..entries {
        let id = format!("{:08x}", i + 1);
        let turn = i / 5;
        let message = match i % 5 {
            0 => {
                json!({"role":"user","content":[{"type":"text","text":format!("please look at part {turn} of the project")}],"timestamp":1})
            }
            1 => {
                json!({"role":"assistant","content":[{"type":"thinking","thinking":"look first"},{"type":"toolCall","id":format!("call_{turn}_a"),"name":"exec","arguments":{"command":"ls -la"}},{"type":"toolCall","id":format!("call_{turn}_b"),"name":"read","arguments":{"path":"README.md"}}],"provider":"openai","model":"gpt-4o","usage":{"input":1000,"output":50,"cacheRead":0,"cacheWrite":0,"totalTokens":1050},"stopReason":"toolUse","timestamp":1})
            }
            2 => {
                json!({"role":"toolResult","toolCallId":format!("call_{turn}_a"),"toolName":"exec","content":[{"type":"text","text":output}],"isError":false,"timestamp":1})
            }
            3 => {
                json!({"role":"toolResult","toolCallId":format!("call_{turn}_b"),"toolName":"read","content":[{"type":"text","text":output}],"isError":false,"timestamp":1})
            }
            _ => {
                json!({"role":"assistant","content":[{"type":"text","text":"Here is what I found: the project has a src directory and a README."}],"provider":"openai","model":"gpt-4o","stopReason":"stop","timestamp":1})
            }
        };
        let line = json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-01-01T00:00:01.000Z","message":message});
        out.push_str(&line.to_string());
        out.push('\n');
        parent = Some(id);
    }
    out
}

fn best_of<F: FnMut()>(runs: usize, mut f: F) -> Duration {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn install(home: &Path, sessions: usize, entries: usize) {
    let dir = home.join("agents/main/sessions");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let mut index = serde_json::Map::new();
    for s in 0..sessions {
        let sid = format!("s{s:05}");
        std::fs::write(dir.join(format!("{sid}.jsonl")), transcript(&sid, entries)).expect("write");
        index.insert(
            format!("key-{s}"),
            json!({"sessionId": sid, "createdAt": 1, "updatedAt": 1}),
        );
    }
    std::fs::write(
        dir.join("sessions.json"),
        serde_json::Value::Object(index).to_string(),
    )
    .expect("index");
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");

    // 1. One 10,000-entry transcript.
    let home = tempfile::tempdir().expect("tempdir");
    install(home.path(), 1, 10_000);
    let path = home.path().join("agents/main/sessions/s00000.jsonl");
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let validate = best_of(10, || {
        let issues = validate_file(&path).expect("validate");
        assert!(issues.is_empty());
    });
    let typed = best_of(10, || {
        let (_, entries, _) = read_transcript(&path).expect("read");
        assert_eq!(entries.len(), 10_000);
    });
    let store = FileSessionStore::new(home.path());
    let open = best_of(10, || {
        rt.block_on(async {
            let log = store.open("main", "key-0").await.expect("open");
            assert_eq!(log.entries().len(), 10_000);
        })
    });
    println!("10,000-entry transcript ({:.1} MB):", size as f64 / 1e6);
    println!(
        "  read + validate (raw JSON, pairing):     {}",
        ms(validate)
    );
    println!("  read + typed parse (loader before):       {}", ms(typed));
    println!("  FileSessionStore::open (validate + load): {}", ms(open));

    // 2. 1,000 healthy transcripts of 50 entries each.
    let home = tempfile::tempdir().expect("tempdir");
    install(home.path(), 1_000, 50);
    let opts = ScanOptions {
        repair: true,
        ..ScanOptions::default()
    };
    let store = FileSessionStore::new(home.path());
    let mut summary = None;
    let scan = best_of(5, || {
        summary = Some(rt.block_on(store.scan(opts.clone())).expect("scan"));
    });
    let summary = summary.expect("ran");
    assert_eq!(
        (summary.sessions, summary.issues, summary.repaired),
        (1_000, 0, 0)
    );
    println!(
        "start-up scan, 1,000 healthy transcripts x 50 entries: {} ({summary})",
        ms(scan)
    );
}
