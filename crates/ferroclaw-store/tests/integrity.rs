//! Hand-made corrupt transcripts of every issue type, in the transcript block form and
//! both API block forms: the validator finds each issue, the scan repairs it (backup
//! byte-identical to the original, repaired file valid, incident written), and the
//! repaired session loads with a context whose pairing is valid.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed fixture should stop the test

use std::path::{Path, PathBuf};

use ferroclaw_store::integrity::{
    repair_bytes, validate_bytes, Incident, IssueKind, RESULT_INTERRUPTED, RESULT_NOT_AVAILABLE,
};
use ferroclaw_store::{
    validate_api_messages, FileSessionStore, Integrity, ScanOptions, SessionStore, Strategy,
};
use ferroclaw_types::{ContentBlock, Message};
use serde_json::{json, Value};

const AGENT: &str = "main";

/// The three block forms a transcript line may use for calls and results.
#[derive(Debug, Clone, Copy)]
enum Form {
    Transcript,
    Anthropic,
    OpenAi,
}

const FORMS: [Form; 3] = [Form::Transcript, Form::Anthropic, Form::OpenAi];

struct T {
    lines: Vec<String>,
    last: Option<String>,
    form: Form,
    n: usize,
}

impl T {
    fn new(form: Form) -> Self {
        T {
            lines: vec![json!({"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}).to_string()],
            last: None,
            form,
            n: 0,
        }
    }

    fn next_id(&mut self) -> String {
        self.n += 1;
        format!("{:08x}", 0xa000_0000u32 + self.n as u32)
    }

    /// Appends an entry whose parent is the previous entry; returns its id.
    fn push(&mut self, mut entry: Value) -> String {
        let id = self.next_id();
        entry["id"] = json!(id);
        if entry.get("parentId").is_none() {
            entry["parentId"] = self.last.clone().map_or(Value::Null, Value::String);
        }
        entry["timestamp"] = json!("2026-01-01T00:00:01.000Z");
        self.lines.push(entry.to_string());
        self.last = Some(id.clone());
        id
    }

    fn msg(&mut self, message: Value) -> String {
        self.push(json!({"type":"message","message":message}))
    }

    fn user(&mut self, text: &str) -> String {
        self.msg(json!({"role":"user","content":[{"type":"text","text":text}],"timestamp":1}))
    }

    fn assistant_text(&mut self, text: &str) -> String {
        self.msg(json!({"role":"assistant","content":[{"type":"text","text":text}],"provider":"p","model":"m","stopReason":"stop","timestamp":1}))
    }

    fn calls(&mut self, ids: &[&str]) -> String {
        let message = match self.form {
            Form::Transcript => {
                let blocks: Vec<Value> = ids.iter().map(|id| json!({"type":"toolCall","id":id,"name":"exec","arguments":{"command":"ls"}})).collect();
                json!({"role":"assistant","content":blocks,"provider":"p","model":"m","stopReason":"toolUse","timestamp":1})
            }
            Form::Anthropic => {
                let blocks: Vec<Value> = ids.iter().map(|id| json!({"type":"tool_use","id":id,"name":"exec","input":{"command":"ls"}})).collect();
                json!({"role":"assistant","content":blocks,"timestamp":1})
            }
            Form::OpenAi => {
                let calls: Vec<Value> = ids.iter().map(|id| json!({"id":id,"type":"function","function":{"name":"exec","arguments":"{}"}})).collect();
                json!({"role":"assistant","content":[],"tool_calls":calls,"timestamp":1})
            }
        };
        self.msg(message)
    }

    fn result(&mut self, call: &str, text: &str) -> String {
        let message = match self.form {
            Form::Transcript => {
                json!({"role":"toolResult","toolCallId":call,"toolName":"exec","content":[{"type":"text","text":text}],"isError":false,"timestamp":1})
            }
            Form::Anthropic => {
                json!({"role":"user","content":[{"type":"tool_result","tool_use_id":call,"content":text}],"timestamp":1})
            }
            Form::OpenAi => json!({"role":"tool","tool_call_id":call,"content":text,"timestamp":1}),
        };
        self.msg(message)
    }

    fn raw(&mut self, line: &str) {
        self.lines.push(line.to_owned());
    }

    fn bytes(&self) -> Vec<u8> {
        let mut s = self.lines.join("\n");
        s.push('\n');
        s.into_bytes()
    }
}

fn kinds(bytes: &[u8]) -> Vec<IssueKind> {
    validate_bytes(bytes).into_iter().map(|i| i.kind).collect()
}

/// One hand-made corrupt transcript per issue type, in the given form.
fn corrupt_cases(form: Form) -> Vec<(IssueKind, Vec<u8>)> {
    let mut out = Vec::new();

    let mut t = T::new(form);
    t.user("hi");
    t.calls(&["c1"]);
    t.result("c1", "ok");
    t.result("c9", "stray");
    t.assistant_text("done");
    out.push((IssueKind::OrphanedToolResult, t.bytes()));

    let mut t = T::new(form);
    t.user("hi");
    t.calls(&["c1", "c2"]);
    t.result("c1", "ok");
    t.user("next");
    t.assistant_text("done");
    out.push((IssueKind::MissingToolResult, t.bytes()));

    let mut t = T::new(form);
    t.user("hi");
    t.calls(&["c1"]);
    t.result("c1", "ok");
    t.result("c1", "again");
    t.assistant_text("done");
    out.push((IssueKind::DuplicateToolResult, t.bytes()));

    let mut t = T::new(form);
    t.user("hi");
    t.result("c1", "early");
    t.calls(&["c1"]);
    t.assistant_text("done");
    out.push((IssueKind::ResultBeforeCall, t.bytes()));

    let mut t = T::new(form);
    t.user("hi");
    t.calls(&["c1"]);
    t.result("c1", "ok");
    t.assistant_text("done");
    let mut torn = t.bytes();
    torn.extend_from_slice(
        br#"{"type":"message","id":"ffff0000","parentId":"a0000004","message":{"role":"us"#,
    );
    out.push((IssueKind::TornLine, torn));

    let mut t = T::new(form);
    t.user("hi");
    t.raw("{this is not json");
    t.calls(&["c1"]);
    t.result("c1", "ok");
    t.assistant_text("done");
    out.push((IssueKind::UnparseableLine, t.bytes()));

    let mut t = T::new(form);
    t.user("hi");
    t.calls(&["c1"]);
    t.result("c1", "ok");
    t.push(json!({"type":"message","parentId":"deadbeef","message":{"role":"assistant","content":[{"type":"text","text":"done"}],"timestamp":1}}));
    out.push((IssueKind::BadParent, t.bytes()));

    out
}

fn home_with(files: &[(&str, &[u8])]) -> (tempfile::TempDir, Vec<PathBuf>) {
    let home = tempfile::tempdir().expect("tempdir");
    let dir = home.path().join("agents").join(AGENT).join("sessions");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let mut index = serde_json::Map::new();
    let mut paths = Vec::new();
    for (sid, bytes) in files {
        let path = dir.join(format!("{sid}.jsonl"));
        std::fs::write(&path, bytes).expect("write");
        index.insert(
            format!("key-{sid}"),
            json!({"sessionId": sid, "agentId": AGENT, "createdAt": 1, "updatedAt": 1}),
        );
        paths.push(path);
    }
    std::fs::write(dir.join("sessions.json"), Value::Object(index).to_string()).expect("index");
    (home, paths)
}

fn backups_of(path: &Path) -> Vec<PathBuf> {
    let prefix = format!("{}.bak.", path.file_name().expect("name").to_string_lossy());
    let mut v: Vec<PathBuf> = std::fs::read_dir(path.parent().expect("dir"))
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
        })
        .collect();
    v.sort();
    v
}

/// The context a provider would get, rendered in the OpenAI API form, must pair up.
fn assert_context_pairs(context: &[Message]) {
    let api: Vec<Value> = context
        .iter()
        .map(|m| match m {
            Message::User(_) => json!({"role":"user","content":m.text()}),
            Message::Assistant(a) => {
                let calls: Vec<Value> = a
                    .tool_calls()
                    .map(|(id, name, _)| json!({"id":id,"function":{"name":name}}))
                    .collect();
                json!({"role":"assistant","content":a.text(),"tool_calls":calls})
            }
            Message::ToolResult(r) => json!({"role":"tool","tool_call_id":r.tool_call_id}),
        })
        .collect();
    let issues = validate_api_messages(&api);
    assert!(issues.is_empty(), "context pairing: {issues:?}");
}

#[test]
fn validator_finds_every_issue_type_in_every_form() {
    for form in FORMS {
        for (kind, bytes) in corrupt_cases(form) {
            let found = kinds(&bytes);
            assert!(found.contains(&kind), "{form:?} {kind}: found {found:?}");
            let issue = validate_bytes(&bytes)
                .into_iter()
                .find(|i| i.kind == kind)
                .expect("issue");
            assert!(issue.line >= 2, "{form:?} {kind}: line {}", issue.line);
            assert!(!issue.description.is_empty());
        }
    }
}

#[test]
fn healthy_transcripts_validate_clean_in_every_form() {
    for form in FORMS {
        let mut t = T::new(form);
        t.user("hi");
        t.calls(&["c1", "c2"]);
        t.result("c2", "second first: order within a turn is free");
        t.result("c1", "ok");
        t.push(json!({"type":"model_change","provider":"x","modelId":"y"}));
        t.assistant_text("done");
        t.push(json!({"type":"future_entry_type","whatever":[1,2,3]}));
        t.user("more");
        assert!(
            kinds(&t.bytes()).is_empty(),
            "{form:?}: {:?}",
            validate_bytes(&t.bytes())
        );
    }
}

#[tokio::test]
async fn scan_reports_then_repairs_every_case_with_exact_backups() {
    for form in FORMS {
        let cases = corrupt_cases(form);
        let named: Vec<(String, Vec<u8>)> = cases
            .iter()
            .enumerate()
            .map(|(i, (_, b))| (format!("sess-{i}"), b.clone()))
            .collect();
        let refs: Vec<(&str, &[u8])> = named
            .iter()
            .map(|(n, b)| (n.as_str(), b.as_slice()))
            .collect();
        let (home, paths) = home_with(&refs);
        let store = FileSessionStore::new(home.path());
        assert_eq!(store.last_scan_status().await, None, "no scan ran yet");

        let report = store.scan(ScanOptions::default()).await.expect("scan");
        assert_eq!(report.sessions, cases.len());
        assert_eq!(
            report.files.len(),
            cases.len(),
            "{form:?}: every file has issues"
        );
        assert_eq!(report.repaired, 0, "report-only scan writes nothing");
        for (path, (_, original)) in paths.iter().zip(&cases) {
            assert_eq!(&std::fs::read(path).expect("read"), original);
            assert!(backups_of(path).is_empty());
        }
        let f0 = &report.files[0];
        assert_eq!(f0.session_key.as_deref(), Some("key-sess-0"));

        let report = store
            .scan(ScanOptions {
                repair: true,
                ..ScanOptions::default()
            })
            .await
            .expect("scan --repair");
        assert_eq!(report.repaired, cases.len(), "{form:?}: {report}");
        assert!(report
            .to_string()
            .starts_with(&format!("{} sessions, ", cases.len())));
        for (path, (kind, original)) in paths.iter().zip(&cases) {
            let backups = backups_of(path);
            assert_eq!(backups.len(), 1, "{form:?} {kind}");
            assert_eq!(
                &std::fs::read(&backups[0]).expect("backup"),
                original,
                "{form:?} {kind}: backup is the original byte for byte"
            );
            let repaired = std::fs::read(path).expect("repaired");
            assert!(
                kinds(&repaired).is_empty(),
                "{form:?} {kind}: {:?}",
                validate_bytes(&repaired)
            );
        }
        let incidents: Vec<Value> = std::fs::read_dir(home.path().join("logs"))
            .expect("logs")
            .map(|e| e.expect("entry").path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("integrity-incident-"))
            })
            .map(|p| serde_json::from_slice(&std::fs::read(p).expect("read")).expect("json"))
            .collect();
        assert_eq!(incidents.len(), cases.len());
        for inc in &incidents {
            for field in ["timestamp", "sessionKey", "file", "issues", "action"] {
                assert!(inc.get(field).is_some(), "incident lacks {field}: {inc}");
            }
            assert_eq!(inc["action"], "repaired");
            assert!(inc["issues"][0]["type"].is_string());
        }
        // The store lists the same reports, newest first, and honours the limit.
        let listed = store.incidents(cases.len() + 5).await.expect("incidents");
        assert_eq!(listed.len(), cases.len());
        assert!(listed.windows(2).all(|w| w[0].timestamp >= w[1].timestamp));
        assert!(listed.iter().all(|i| i.action == "repaired"));
        assert_eq!(store.incidents(2).await.expect("incidents").len(), 2);
        let status = store.last_scan_status().await.expect("status recorded");
        assert_eq!(
            (status.sessions, status.repaired, status.repair),
            (cases.len(), cases.len(), true)
        );

        // A second scan finds nothing and rewrites nothing.
        let again = store
            .scan(ScanOptions {
                repair: true,
                ..ScanOptions::default()
            })
            .await
            .expect("rescan");
        assert_eq!((again.issues, again.repaired), (0, 0), "{form:?}: {again}");
    }
}

#[tokio::test]
async fn repaired_sessions_load_with_valid_pairing() {
    for form in FORMS {
        for (kind, bytes) in corrupt_cases(form) {
            let (home, paths) = home_with(&[("s1", &bytes)]);
            let store = FileSessionStore::new(home.path());
            // Opening repairs the file (it was never scanned).
            let log = store.open(AGENT, "key-s1").await.expect("open");
            assert!(
                log.problems().iter().any(|p| p.kind == kind),
                "{form:?} {kind}"
            );
            assert!(kinds(&std::fs::read(&paths[0]).expect("read")).is_empty());
            assert_eq!(
                std::fs::read(&backups_of(&paths[0])[0]).expect("backup"),
                bytes
            );
            if matches!(form, Form::Transcript) {
                assert_context_pairs(&log.context());
            }
        }
    }
}

#[test]
fn specific_repairs_do_the_right_thing() {
    let form = Form::Transcript;
    // Missing in the middle: synthesised right after the call's last result.
    let mut t = T::new(form);
    t.user("hi");
    let a = t.calls(&["c1", "c2"]);
    let r1 = t.result("c1", "ok");
    let next = t.user("next");
    let fixed = repair_bytes(&t.bytes(), Strategy::Full, "s1")
        .bytes
        .expect("rewritten");
    let lines: Vec<Value> = fixed
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).expect("json"))
        .collect();
    assert_eq!(lines[2]["id"], a.as_str());
    assert_eq!(lines[3]["id"], r1.as_str());
    assert_eq!(lines[4]["message"]["toolCallId"], "c2");
    assert_eq!(lines[4]["message"]["isError"], true);
    assert_eq!(
        lines[4]["message"]["content"][0]["text"],
        RESULT_NOT_AVAILABLE
    );
    assert_eq!(lines[4]["parentId"], r1.as_str());
    assert_eq!(lines[5]["id"], next.as_str());
    assert_eq!(lines[5]["parentId"], lines[4]["id"]);

    // Interrupted at the end: the interrupted text.
    let mut t = T::new(form);
    t.user("hi");
    t.calls(&["c1"]);
    let fixed = repair_bytes(&t.bytes(), Strategy::Full, "s1")
        .bytes
        .expect("rewritten");
    let text = String::from_utf8(fixed).expect("utf8");
    assert!(text.contains(RESULT_INTERRUPTED), "{text}");

    // Result before its call is moved, not synthesised: its text survives.
    let mut t = T::new(form);
    t.user("hi");
    let early = t.result("c1", "early bird");
    let a = t.calls(&["c1"]);
    let done = t.assistant_text("done");
    let fixed = repair_bytes(&t.bytes(), Strategy::Full, "s1")
        .bytes
        .expect("rewritten");
    let lines: Vec<Value> = fixed
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).expect("json"))
        .collect();
    let ids: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l["id"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(ids[1..], [a.as_str(), early.as_str(), done.as_str()]);
    assert_eq!(lines[3]["parentId"], a.as_str());
    assert_eq!(lines[3]["message"]["content"][0]["text"], "early bird");
    assert_eq!(lines[4]["parentId"], early.as_str());

    // A result stranded after a later message is moved back to its call.
    let mut t = T::new(form);
    t.user("hi");
    let a = t.calls(&["c1"]);
    t.user("impatient");
    let late = t.result("c1", "late");
    let fixed = repair_bytes(&t.bytes(), Strategy::Full, "s1")
        .bytes
        .expect("rewritten");
    assert!(kinds(&fixed).is_empty());
    let lines: Vec<Value> = fixed
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).expect("json"))
        .collect();
    assert_eq!(lines[3]["id"], late.as_str());
    assert_eq!(lines[3]["parentId"], a.as_str());
    assert!(!String::from_utf8_lossy(&fixed).contains(RESULT_NOT_AVAILABLE));
}

#[test]
fn untouched_lines_survive_a_rewrite_byte_for_byte() {
    let mut t = T::new(Form::Transcript);
    // Odd spacing, unknown fields and an unknown entry type: none of it may change.
    t.raw(r#"{"type":"message", "id":"a0000001" ,"parentId":null,"timestamp":"t","message":{"role":"user","content":"hi","timestamp":1},"x-extra":{"keep":true}}"#);
    t.last = Some("a0000001".into());
    t.n = 1;
    t.push(json!({"type":"some_future_type","payload":{"nested":[1,2]}}));
    t.calls(&["c1"]);
    t.result("c1", "ok");
    t.result("c7", "orphan");
    t.assistant_text("done");
    let original = t.bytes();
    let fixed = repair_bytes(&original, Strategy::Full, "s1")
        .bytes
        .expect("rewritten");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let orig_lines: Vec<String> = original.split(|b| *b == b'\n').map(text).collect();
    let fixed_lines: Vec<String> = fixed.split(|b| *b == b'\n').map(text).collect();
    // Header, the odd user line, the unknown entry, the call and its result: identical.
    assert_eq!(fixed_lines[..5], orig_lines[..5]);
    // The orphan (line 6) is gone; its child differs only in the parentId value.
    assert_eq!(
        fixed_lines[5],
        orig_lines[6].replace("\"a0000005\"", "\"a0000004\"")
    );
    assert_eq!(fixed_lines.len() + 1, orig_lines.len());
}

#[test]
fn remove_orphans_only_drops_orphans() {
    let mut t = T::new(Form::Transcript);
    t.user("hi");
    t.calls(&["c1", "c2"]);
    t.result("c1", "ok");
    t.result("c9", "orphan");
    t.result("c1", "dupe");
    t.user("next");
    let original = t.bytes();
    let found = kinds(&original);
    assert!(found.contains(&IssueKind::OrphanedToolResult));
    assert!(found.contains(&IssueKind::DuplicateToolResult));
    assert!(found.contains(&IssueKind::MissingToolResult));
    let fixed = repair_bytes(&original, Strategy::RemoveOrphans, "s1")
        .bytes
        .expect("rewritten");
    let left = kinds(&fixed);
    assert!(!left.contains(&IssueKind::OrphanedToolResult), "{left:?}");
    assert!(left.contains(&IssueKind::DuplicateToolResult));
    assert!(left.contains(&IssueKind::MissingToolResult));
    assert_eq!(
        fixed.len() + t.lines[4].len() + 1,
        original.len(),
        "only the orphan line went"
    );

    // A file with only issues this strategy does not fix is not rewritten.
    let mut t = T::new(Form::Transcript);
    t.user("hi");
    t.calls(&["c1"]);
    t.user("next");
    assert!(repair_bytes(&t.bytes(), Strategy::RemoveOrphans, "s1")
        .bytes
        .is_none());
}

#[tokio::test]
async fn clean_transcripts_are_never_rewritten() {
    let mut t = T::new(Form::Transcript);
    t.user("hi");
    t.calls(&["c1"]);
    t.result("c1", "ok");
    t.assistant_text("done");
    let bytes = t.bytes();
    let (home, paths) = home_with(&[("s1", &bytes)]);
    let before = std::fs::metadata(&paths[0])
        .expect("meta")
        .modified()
        .expect("mtime");
    let store = FileSessionStore::new(home.path());
    let report = store
        .scan(ScanOptions {
            repair: true,
            ..ScanOptions::default()
        })
        .await
        .expect("scan");
    assert_eq!((report.sessions, report.issues, report.repaired), (1, 0, 0));
    let log = store.open(AGENT, "key-s1").await.expect("open");
    assert!(log.problems().is_empty());
    drop(log);
    assert_eq!(std::fs::read(&paths[0]).expect("read"), bytes);
    assert_eq!(
        std::fs::metadata(&paths[0])
            .expect("meta")
            .modified()
            .expect("mtime"),
        before
    );
    assert!(backups_of(&paths[0]).is_empty());
    let incidents = std::fs::read_dir(home.path().join("logs"))
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with("integrity-incident-")
                })
                .count()
        })
        .unwrap_or(0);
    assert_eq!(incidents, 0, "a clean scan writes no incident");
    assert!(store.incidents(10).await.expect("incidents").is_empty());
}

#[tokio::test]
async fn reported_incidents_are_listed_newest_first() {
    let home = tempfile::tempdir().expect("tempdir");
    let store = FileSessionStore::new(home.path());
    assert!(store.incidents(10).await.expect("no logs dir").is_empty());
    for n in 0..3 {
        store
            .report_incident(Incident {
                timestamp: String::new(),
                agent_id: Some(AGENT.into()),
                session_key: Some(format!("k{n}")),
                file: None,
                issues: Vec::new(),
                action: "detected_at_runtime".into(),
                backup: None,
            })
            .await
            .expect("report");
    }
    // Written within one millisecond or not, the newest comes first.
    let keys: Vec<Option<String>> = store
        .incidents(10)
        .await
        .expect("incidents")
        .into_iter()
        .map(|i| i.session_key)
        .collect();
    assert_eq!(
        keys,
        vec![Some("k2".into()), Some("k1".into()), Some("k0".into())]
    );
    let newest = store.incidents(1).await.expect("incidents");
    assert!(!newest[0].timestamp.is_empty(), "timestamp filled in");
}

#[test]
fn branches_are_checked_per_path() {
    // a: user → b: assistant(c1) → c: result c1 → d: user "v1"
    //                             ↘ e: user "v2" (a branch off the call: c1 missing there)
    let mut t = T::new(Form::Transcript);
    t.user("hi");
    let b = t.calls(&["c1"]);
    t.result("c1", "ok");
    t.user("v1");
    t.push(json!({"type":"message","parentId":b,"message":{"role":"user","content":"v2","timestamp":1}}));
    let issues = validate_bytes(&t.bytes());
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].kind, IssueKind::MissingToolResult);
    let fixed = repair_bytes(&t.bytes(), Strategy::Full, "s1")
        .bytes
        .expect("rewritten");
    assert!(kinds(&fixed).is_empty(), "{:?}", validate_bytes(&fixed));
    // The newest leaf is still "v2", now after a synthetic result.
    let last: Value = serde_json::from_slice(
        fixed
            .split(|b| *b == b'\n')
            .rfind(|l| !l.is_empty())
            .expect("line"),
    )
    .expect("json");
    assert_eq!(last["message"]["content"], "v2");
}

#[test]
fn api_validator_understands_both_wire_forms() {
    let openai = vec![
        json!({"role":"system","content":"s"}),
        json!({"role":"user","content":"hi"}),
        json!({"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"x","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"y","arguments":"{}"}}]}),
        json!({"role":"tool","tool_call_id":"a","content":"1"}),
        json!({"role":"tool","tool_call_id":"b","content":"2"}),
        json!({"role":"assistant","content":"done"}),
    ];
    assert!(validate_api_messages(&openai).is_empty());
    let mut broken = openai.clone();
    broken.remove(4);
    broken.push(json!({"role":"tool","tool_call_id":"zz","content":"?"}));
    let k: Vec<IssueKind> = validate_api_messages(&broken)
        .into_iter()
        .map(|i| i.kind)
        .collect();
    assert_eq!(
        k,
        [IssueKind::MissingToolResult, IssueKind::OrphanedToolResult]
    );

    let anthropic = vec![
        json!({"role":"user","content":"hi"}),
        json!({"role":"assistant","content":[{"type":"text","text":"let me"},{"type":"tool_use","id":"t1","name":"x","input":{}}]}),
        json!({"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"},{"type":"text","text":"and now?"}]}),
        json!({"role":"assistant","content":[{"type":"text","text":"done"}]}),
    ];
    assert!(validate_api_messages(&anthropic).is_empty());
    let mut dup = anthropic.clone();
    dup[2] = json!({"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"},{"type":"tool_result","tool_use_id":"t1","content":"ok"}]});
    let k: Vec<IssueKind> = validate_api_messages(&dup)
        .into_iter()
        .map(|i| i.kind)
        .collect();
    assert_eq!(k, [IssueKind::DuplicateToolResult]);
}

#[tokio::test]
async fn oversized_tool_results_are_capped_when_stored() {
    let home = tempfile::tempdir().expect("tempdir");
    let store = FileSessionStore::new(home.path()).with_tool_result_chars(5_000);
    let mut log = store.open(AGENT, "k").await.expect("open");
    let big = "line of output\n".repeat(2_000); // 30,000 chars
    log.append(ferroclaw_types::EntryBody::Message {
        message: Message::tool_result("c1", "exec", big, false),
    })
    .await
    .expect("append");
    let stored = log.entries()[0].message().expect("message").clone();
    let Message::ToolResult(r) = stored else {
        panic!("not a result")
    };
    let ContentBlock::Text { text } = &r.content[0] else {
        panic!("not text")
    };
    assert!(text.chars().count() < 5_200, "{}", text.len());
    assert!(text.contains("tool result truncated"));
}

#[tokio::test]
async fn import_reads_all_entry_types_branches_and_compaction() {
    let src = tempfile::tempdir().expect("src");
    let mut t = T::new(Form::Transcript);
    t.lines[0] = json!({"type":"session","version":3,"id":"pi-session-1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}).to_string();
    t.user("first question");
    t.assistant_text("first answer");
    t.push(json!({"type":"model_change","provider":"anthropic","modelId":"claude"}));
    t.push(json!({"type":"thinking_level_change","thinkingLevel":"high"}));
    t.push(json!({"type":"custom","customType":"ext","data":{"k":1}}));
    let kept = t.user("second question");
    let a = t.calls(&["c1"]);
    t.result("c1", "tool output");
    let fork = t.assistant_text("second answer");
    t.push(json!({"type":"compaction","summary":"they asked twice","firstKeptEntryId":kept,"tokensBefore":1000}));
    let old_leaf = t.user("abandoned branch");
    // A branch: back to the second answer, newer than the abandoned leaf.
    t.push(json!({"type":"message","parentId":fork,"message":{"role":"user","content":"rewritten question","timestamp":1}}));
    t.assistant_text("final answer");
    // One orphan so the import has something to repair on the way.
    t.result("zz", "stray");
    std::fs::write(src.path().join("good.jsonl"), t.bytes()).expect("write");
    std::fs::write(src.path().join("junk.jsonl"), b"not a transcript\nat all\n").expect("write");
    std::fs::write(src.path().join("empty.jsonl"), b"").expect("write");
    let _ = (a, old_leaf);

    let home = tempfile::tempdir().expect("home");
    let store = FileSessionStore::new(home.path());
    let report = store.import_dir(AGENT, src.path()).await.expect("import");
    assert_eq!(report.files.len(), 3);
    assert_eq!((report.imported(), report.failed()), (1, 2), "{report:?}");

    let log = store
        .open(AGENT, "pi-session-1")
        .await
        .expect("open imported");
    assert!(
        log.problems().is_empty(),
        "repaired on import: {:?}",
        log.problems()
    );
    let texts: Vec<String> = log.context().iter().map(Message::text).collect();
    assert_eq!(
        texts,
        [
            "first question",
            "first answer",
            "second question",
            "",
            "tool output",
            "second answer",
            "rewritten question",
            "final answer"
        ],
        "active branch = path to the newest leaf"
    );
    // All kept entry types were read.
    assert_eq!(
        log.entries().len(),
        13,
        "orphan removed, everything else kept"
    );

    // Compaction on the active branch is respected.
    let mut t2 = T::new(Form::Transcript);
    t2.lines[0] = json!({"type":"session","version":3,"id":"pi-session-2","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}).to_string();
    t2.user("old");
    t2.assistant_text("old answer");
    let keep = t2.user("kept");
    t2.assistant_text("kept answer");
    t2.push(json!({"type":"compaction","summary":"S","firstKeptEntryId":keep,"tokensBefore":10}));
    t2.user("after");
    let src2 = tempfile::tempdir().expect("src2");
    std::fs::write(src2.path().join("c.jsonl"), t2.bytes()).expect("write");
    let report = store.import_dir(AGENT, src2.path()).await.expect("import");
    assert_eq!(report.imported(), 1);
    let log = store.open(AGENT, "pi-session-2").await.expect("open");
    let texts: Vec<String> = log.context().iter().map(Message::text).collect();
    assert_eq!(
        texts,
        ["[Conversation summary]\nS", "kept", "kept answer", "after"]
    );

    // Importing again is a no-op.
    let again = store
        .import_dir(AGENT, src2.path())
        .await
        .expect("reimport");
    assert_eq!(again.already_imported(), 1);
}
