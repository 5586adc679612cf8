//! Path-escape attempts against every filesystem tool, run through the registry with
//! the ferroclaw home and a configured directory denied. Each case must be refused
//! with the error of its category and must leave the protected files untouched;
//! look-alikes must keep working.
//!
//! Layout (all under one temp dir):
//! ```text
//! home/                       ferroclaw home (denied)
//!   config.json5  .env.local  agents/main/sessions/s1.jsonl
//!   workspace/                the agent's workspace root
//!     user_alice/             ws: the workspace these tools run in
//!       notes.txt  notes..txt  ..hidden  privateer/x.txt
//!       private/secret.txt    configured denied_path inside the workspace
//!       link_home -> home, link_etc -> /etc, link_env -> home/.env.local,
//!       link_private -> private, dangling_to_home -> home/planted.txt,
//!       link_notes -> notes.txt
//!     user_bob/notes.txt
//! ```

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use ferroclaw_tools::path_guard::{ensure_user_workspace, sanitize_user_id};
use ferroclaw_tools::{user_workspace, DeniedPaths, ToolContext, ToolRegistry};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// Why a case must be refused: each maps to the fragment its error must contain.
#[derive(Debug, Clone, Copy)]
enum Why {
    Outside,
    Denied,
    Tilde,
    Nul,
    Empty,
    /// Literal odd names are not decoded: they stay inside and simply do not exist.
    NotFound,
    TooLong,
    GlobPattern,
}

impl Why {
    fn fragment(self) -> &'static str {
        match self {
            Why::Outside => "outside the workspace",
            Why::Denied => "is denied: it is in a protected location",
            Why::Tilde => "starts with '~'",
            Why::Nul => "NUL byte",
            Why::Empty => "path is empty",
            Why::NotFound => "not found",
            Why::TooLong => "too long",
            Why::GlobPattern => "must be relative and must not contain '..'",
        }
    }
}

struct Fixture {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
    registry: ToolRegistry,
}

const SECRET: &str = "TOPSECRET-do-not-leak";

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(tmp.path()).unwrap().join("home");
    std::fs::create_dir_all(home.join("agents/main/sessions")).unwrap();
    std::fs::write(home.join("config.json5"), format!("{{ // {SECRET}\n}}")).unwrap();
    std::fs::write(home.join(".env.local"), format!("KEY={SECRET}\n")).unwrap();
    std::fs::write(home.join("agents/main/sessions/s1.jsonl"), SECRET).unwrap();
    let root = home.join("workspace");
    let ws = ensure_user_workspace(&root, "alice").unwrap();
    let bob = ensure_user_workspace(&root, "bob").unwrap();
    std::fs::write(bob.join("notes.txt"), SECRET).unwrap();

    std::fs::write(ws.join("notes.txt"), "alice notes").unwrap();
    std::fs::write(ws.join("notes..txt"), "dots in name").unwrap();
    std::fs::write(ws.join("..hidden"), "leading dots").unwrap();
    std::fs::create_dir_all(ws.join("privateer")).unwrap();
    std::fs::write(ws.join("privateer/x.txt"), "similar name, not denied").unwrap();
    std::fs::create_dir_all(ws.join("private")).unwrap();
    std::fs::write(ws.join("private/secret.txt"), SECRET).unwrap();
    symlink(&home, ws.join("link_home")).unwrap();
    symlink("/etc", ws.join("link_etc")).unwrap();
    symlink(home.join(".env.local"), ws.join("link_env")).unwrap();
    symlink("private", ws.join("link_private")).unwrap();
    symlink(home.join("planted.txt"), ws.join("dangling_to_home")).unwrap();
    symlink("notes.txt", ws.join("link_notes")).unwrap();

    let denied = DeniedPaths::for_home(&home, &[ws.join("private")]);
    let registry = ToolRegistry::with_core_tools().with_denied_paths(denied);
    Fixture {
        _tmp: tmp,
        home,
        ws,
        registry,
    }
}

fn ctx(ws: &Path) -> ToolContext {
    ToolContext {
        agent_id: "main".into(),
        session_key: "attack".into(),
        workspace: ws.to_path_buf(),
        cancel: CancellationToken::new(),
        user: None,
        acting_user: None,
        group_chat: false,
        progress: Default::default(),
        run_id: String::new(),
    }
}

/// (tool, arguments, why it must be refused). `{WS}` and `{HOME}` are substituted.
fn attacks() -> Vec<(&'static str, Value, Why)> {
    let long = "a/".repeat(3000) + "x.txt";
    let long_name = "n".repeat(300);
    vec![
        ("read", json!({"path": "../../config.json5"}), Why::Outside),
        ("read", json!({"path": "../../.env.local"}), Why::Outside),
        (
            "read",
            json!({"path": "../user_bob/notes.txt"}),
            Why::Outside,
        ),
        ("read", json!({"path": "/etc/passwd"}), Why::Outside),
        ("read", json!({"path": "{HOME}/.env.local"}), Why::Outside),
        (
            "read",
            json!({"path": "{HOME}/agents/main/sessions/s1.jsonl"}),
            Why::Outside,
        ),
        (
            "read",
            json!({"path": "{WS}/../../config.json5"}),
            Why::Outside,
        ),
        ("read", json!({"path": "~/.ssh/id_rsa"}), Why::Tilde),
        (
            "read",
            json!({"path": "notes.txt\u{0}../../config.json5"}),
            Why::Nul,
        ),
        ("read", json!({"path": "   "}), Why::Empty),
        (
            "read",
            json!({"path": "%2e%2e/%2e%2e/config.json5"}),
            Why::NotFound,
        ),
        (
            "read",
            json!({"path": "..%2f..%2fconfig.json5"}),
            Why::NotFound,
        ),
        (
            "read",
            json!({"path": "....//....//config.json5"}),
            Why::NotFound,
        ),
        (
            "read",
            json!({"path": "link_home/config.json5"}),
            Why::Outside,
        ),
        // `..` is folded lexically before symlinks are followed: this names ws/home/.env.local.
        (
            "read",
            json!({"path": "link_home/../home/.env.local"}),
            Why::NotFound,
        ),
        ("read", json!({"path": "link_etc/passwd"}), Why::Outside),
        ("read", json!({"path": "link_env"}), Why::Outside),
        ("read", json!({"path": "private/secret.txt"}), Why::Denied),
        (
            "read",
            json!({"path": "./private/../private/secret.txt"}),
            Why::Denied,
        ),
        (
            "read",
            json!({"path": "{WS}/private/secret.txt"}),
            Why::Denied,
        ),
        (
            "read",
            json!({"path": "link_private/secret.txt"}),
            Why::Denied,
        ),
        ("read", json!({"path": long}), Why::TooLong),
        ("read", json!({"path": long_name}), Why::TooLong),
        (
            "write",
            json!({"path": "../../config.json5", "content": "pwned"}),
            Why::Outside,
        ),
        (
            "write",
            json!({"path": "../user_bob/notes.txt", "content": "pwned"}),
            Why::Outside,
        ),
        (
            "write",
            json!({"path": "link_home/.env.local", "content": "pwned"}),
            Why::Outside,
        ),
        (
            "write",
            json!({"path": "dangling_to_home", "content": "pwned"}),
            Why::Outside,
        ),
        (
            "write",
            json!({"path": "/tmp/ferroclaw-attack.txt", "content": "pwned"}),
            Why::Outside,
        ),
        (
            "write",
            json!({"path": "private/new.txt", "content": "pwned"}),
            Why::Denied,
        ),
        (
            "write",
            json!({"path": "link_private/new.txt", "content": "pwned"}),
            Why::Denied,
        ),
        (
            "write",
            json!({"path": "~", "content": "pwned"}),
            Why::Tilde,
        ),
        (
            "edit",
            json!({"path": "../../.env.local", "old_string": "KEY", "new_string": "X"}),
            Why::Outside,
        ),
        (
            "edit",
            json!({"path": "link_env", "old_string": "KEY", "new_string": "X"}),
            Why::Outside,
        ),
        (
            "edit",
            json!({"path": "private/secret.txt", "old_string": "TOP", "new_string": "X"}),
            Why::Denied,
        ),
        ("ls", json!({"path": ".."}), Why::Outside),
        ("ls", json!({"path": "/"}), Why::Outside),
        ("ls", json!({"path": "link_home"}), Why::Outside),
        ("ls", json!({"path": "~"}), Why::Tilde),
        ("ls", json!({"path": "private"}), Why::Denied),
        ("ls", json!({"path": "link_private"}), Why::Denied),
        ("glob", json!({"pattern": "../*"}), Why::GlobPattern),
        ("glob", json!({"pattern": "/etc/*"}), Why::GlobPattern),
        (
            "glob",
            json!({"pattern": "*", "path": "../.."}),
            Why::Outside,
        ),
        (
            "glob",
            json!({"pattern": "*", "path": "private"}),
            Why::Denied,
        ),
        (
            "grep",
            json!({"pattern": "TOPSECRET", "path": "../../"}),
            Why::Outside,
        ),
        (
            "grep",
            json!({"pattern": "TOPSECRET", "path": "link_env"}),
            Why::Outside,
        ),
        (
            "grep",
            json!({"pattern": "TOPSECRET", "path": "private"}),
            Why::Denied,
        ),
        (
            "grep",
            json!({"pattern": "TOPSECRET", "path": "link_private/secret.txt"}),
            Why::Denied,
        ),
        (
            "exec",
            json!({"command": "cat .env.local", "workdir": "../.."}),
            Why::Outside,
        ),
        (
            "exec",
            json!({"command": "cat secret.txt", "workdir": "private"}),
            Why::Denied,
        ),
    ]
}

fn substitute(v: &Value, fx: &Fixture) -> Value {
    match v {
        Value::String(s) => Value::String(
            s.replace("{WS}", &fx.ws.display().to_string())
                .replace("{HOME}", &fx.home.display().to_string()),
        ),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), substitute(v, fx)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[tokio::test]
async fn path_escape_attempts_are_refused() {
    let fx = fixture();
    let cases = attacks();
    assert!(cases.len() >= 30);
    for (tool, args, why) in cases {
        let args = substitute(&args, &fx);
        let r = fx.registry.execute(tool, &ctx(&fx.ws), args.clone()).await;
        assert!(r.is_error, "{tool} {args}: not refused: {}", r.for_llm);
        assert!(
            r.for_llm.contains(why.fragment()),
            "{tool} {args}: expected {why:?}, got {}",
            r.for_llm
        );
        assert!(
            !r.for_llm.contains(SECRET),
            "{tool} {args}: leaked {}",
            r.for_llm
        );
        // Host paths appear only when the model itself gave them (every workspace
        // path lies under the home, so this covers both).
        let home = fx.home.display().to_string();
        if !args.to_string().contains(&home) {
            assert!(
                !r.for_llm.contains(&home),
                "{tool} {args}: shows a host path: {}",
                r.for_llm
            );
        }
    }
    // Nothing was written or changed anywhere it must not be.
    assert!(!fx.home.join("planted.txt").exists());
    assert!(!Path::new("/tmp/ferroclaw-attack.txt").exists());
    assert!(!fx.ws.join("private/new.txt").exists());
    assert!(!fx.ws.join("~").exists());
    assert_eq!(
        std::fs::read_to_string(fx.home.join(".env.local")).unwrap(),
        format!("KEY={SECRET}\n")
    );
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("private/secret.txt")).unwrap(),
        SECRET
    );
}

#[tokio::test]
async fn look_alikes_still_work() {
    let fx = fixture();
    let ok = [
        ("read", json!({"path": "notes..txt"})),
        ("read", json!({"path": "..hidden"})),
        ("read", json!({"path": "privateer/x.txt"})),
        ("read", json!({"path": "sub/../notes.txt"})),
        ("read", json!({"path": "link_notes"})),
        (
            "read",
            json!({"path": format!("{}/notes.txt", fx.ws.display())}),
        ),
        (
            "write",
            json!({"path": "new/dir/file.txt", "content": "fine"}),
        ),
        ("ls", json!({"path": "privateer"})),
        ("grep", json!({"pattern": "similar", "path": "privateer"})),
    ];
    for (tool, args) in ok {
        let r = fx.registry.execute(tool, &ctx(&fx.ws), args.clone()).await;
        assert!(!r.is_error, "{tool} {args}: {}", r.for_llm);
    }
}

#[tokio::test]
async fn listings_and_searches_hide_denied_directories() {
    let fx = fixture();
    let r = fx.registry.execute("ls", &ctx(&fx.ws), json!({})).await;
    assert!(!r.is_error, "{}", r.for_llm);
    let entries: Vec<&str> = r.for_llm.lines().collect();
    assert!(entries.contains(&"privateer/"), "{entries:?}");
    assert!(
        !entries.iter().any(|e| e.starts_with("private/")),
        "{entries:?}"
    );
    // The symlink into the denied directory resolves into it, so it is hidden too.
    assert!(
        !entries.iter().any(|e| e.starts_with("link_private")),
        "{entries:?}"
    );

    let r = fx
        .registry
        .execute("glob", &ctx(&fx.ws), json!({"pattern": "**/*.txt"}))
        .await;
    assert!(r.for_llm.contains("privateer/x.txt"), "{}", r.for_llm);
    assert!(!r.for_llm.contains("secret.txt"), "{}", r.for_llm);

    let r = fx
        .registry
        .execute("grep", &ctx(&fx.ws), json!({"pattern": "TOPSECRET"}))
        .await;
    assert!(!r.for_llm.contains(SECRET), "{}", r.for_llm);
    assert!(!r.for_llm.contains("private/"), "{}", r.for_llm);
}

#[tokio::test]
async fn home_inside_the_workspace_stays_denied() {
    // An operator pointed the workspace at a directory that contains the ferroclaw home.
    let tmp = tempfile::tempdir().unwrap();
    let big = std::fs::canonicalize(tmp.path()).unwrap();
    let home = big.join(".ferroclaw");
    std::fs::create_dir_all(home.join("agents/main/sessions")).unwrap();
    std::fs::write(home.join(".env.local"), format!("KEY={SECRET}")).unwrap();
    std::fs::write(home.join("agents/main/sessions/s1.jsonl"), SECRET).unwrap();
    std::fs::write(big.join("readme.txt"), "hello").unwrap();
    symlink(&home, big.join("innocent")).unwrap();
    let reg = ToolRegistry::with_core_tools()
        .with_denied_paths(DeniedPaths::for_home(&home, &[] as &[PathBuf]));
    let c = ctx(&big);

    for (tool, args) in [
        ("read", json!({"path": ".ferroclaw/.env.local"})),
        (
            "read",
            json!({"path": ".ferroclaw/agents/main/sessions/s1.jsonl"}),
        ),
        ("read", json!({"path": "innocent/.env.local"})),
        ("ls", json!({"path": ".ferroclaw"})),
        (
            "write",
            json!({"path": ".ferroclaw/config.json5", "content": "{}"}),
        ),
        ("grep", json!({"pattern": "KEY", "path": ".ferroclaw"})),
    ] {
        let r = reg.execute(tool, &c, args.clone()).await;
        assert!(r.is_error, "{tool} {args}: {}", r.for_llm);
        assert!(
            r.for_llm.contains(Why::Denied.fragment()),
            "{tool} {args}: {}",
            r.for_llm
        );
    }
    let r = reg.execute("ls", &c, json!({})).await;
    assert!(r.for_llm.contains("readme.txt"), "{}", r.for_llm);
    assert!(!r.for_llm.contains(".ferroclaw"), "{}", r.for_llm);
    assert!(!r.for_llm.contains("innocent"), "{}", r.for_llm);
    let r = reg
        .execute("grep", &c, json!({"pattern": "TOPSECRET"}))
        .await;
    assert!(!r.for_llm.contains(SECRET), "{}", r.for_llm);
    let r = reg.execute("glob", &c, json!({"pattern": "**/*"})).await;
    assert!(!r.for_llm.contains(".ferroclaw"), "{}", r.for_llm);
    assert!(!home.join("config.json5").exists());
}

#[tokio::test]
async fn the_home_workspace_itself_keeps_its_secrets() {
    // Workspace == home: the home prefix cannot apply as a whole, its secret entries still do.
    let tmp = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(tmp.path()).unwrap();
    std::fs::write(home.join(".env.local"), format!("KEY={SECRET}")).unwrap();
    std::fs::write(home.join("notes.md"), "fine").unwrap();
    let reg = ToolRegistry::with_core_tools()
        .with_denied_paths(DeniedPaths::for_home(&home, &[] as &[PathBuf]));
    let r = reg
        .execute("read", &ctx(&home), json!({"path": ".env.local"}))
        .await;
    assert!(r.for_llm.contains(Why::Denied.fragment()), "{}", r.for_llm);
    let r = reg
        .execute("read", &ctx(&home), json!({"path": "notes.md"}))
        .await;
    assert!(!r.is_error, "{}", r.for_llm);
}

/// User ids an attacker controls (channel user names, group ids) never leave the root.
#[test]
fn user_workspace_ids_are_sanitised() {
    let root = Path::new("/srv/ws");
    let ids = [
        "../x",
        "..",
        "a/../../b",
        "/etc",
        "alice\0",
        "ali ce",
        "C:\\Windows",
        "%2e%2e%2f",
        "~root",
        "user_../x",
        "ａｌｉｃｅ",
        "",
        &"x".repeat(10_000),
    ];
    for id in ids {
        let dir = user_workspace(root, id);
        assert_eq!(dir.parent(), Some(root), "{id:?} -> {}", dir.display());
        let name = dir.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("user_"), "{name}");
        assert!(name.len() <= 5 + 64, "{name}");
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
            "{name}"
        );
        assert!(!name.contains(".."));
    }
    assert_eq!(
        user_workspace(root, "group:telegram:-1001234"),
        root.join("user_group_telegram_-1001234")
    );
    assert_eq!(sanitize_user_id("alice"), "alice");
}

#[test]
fn planted_symlink_user_workspace_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    symlink(outside.path(), tmp.path().join("user_mallory")).unwrap();
    let err = ensure_user_workspace(tmp.path(), "mallory").unwrap_err();
    assert!(err.to_string().contains("symlinks are refused"), "{err}");
    assert!(ensure_user_workspace(tmp.path(), "carol").unwrap().is_dir());
}

/// A command swapping a checked directory for a symlink while the file tools run (the
/// time-of-check/time-of-use race): `race` flips between a real directory and a link to
/// a directory outside, atomically, as fast as it can. No read ever returns the outside
/// secret, no write ever lands outside, and the directory's own file stays readable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_swapped_for_a_symlink_mid_call_never_leads_out() {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let ws = base.join("ws");
    let outside = base.join("outside");
    std::fs::create_dir_all(ws.join("race")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(ws.join("race/f.txt"), "inside").unwrap();
    std::fs::write(outside.join("f.txt"), "TOPAZ-OUTSIDE").unwrap();
    std::fs::write(outside.join("outside-only.txt"), "").unwrap();
    symlink(&outside, ws.join("swap")).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, a, b) = (stop.clone(), ws.join("race"), ws.join("swap"));
        std::thread::spawn(move || {
            let a = CString::new(a.as_os_str().as_bytes()).unwrap();
            let b = CString::new(b.as_os_str().as_bytes()).unwrap();
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: two valid NUL-terminated paths; exchanges the two names.
                let rc = unsafe {
                    libc::renameat2(
                        libc::AT_FDCWD,
                        a.as_ptr(),
                        libc::AT_FDCWD,
                        b.as_ptr(),
                        libc::RENAME_EXCHANGE,
                    )
                };
                assert_eq!(rc, 0, "renameat2: {}", std::io::Error::last_os_error());
                swaps += 1;
            }
            swaps
        })
    };
    let mut reg = ToolRegistry::with_core_tools();
    reg.register(Arc::new(
        ferroclaw_tools::builtin::apply_patch::ApplyPatchTool,
    ));
    let ctx = ToolContext {
        agent_id: "a".into(),
        session_key: "s".into(),
        workspace: ws.clone(),
        cancel: CancellationToken::new(),
        user: None,
        acting_user: None,
        group_chat: false,
        progress: Default::default(),
        run_id: String::new(),
    };
    let mut inside_reads = 0;
    let mut last_patch = String::new();
    for i in 0..400 {
        let r = reg
            .execute("read", &ctx, json!({"path": "race/f.txt"}))
            .await;
        assert!(
            !r.for_llm.contains("TOPAZ"),
            "read {i} followed the swapped link: {}",
            r.for_llm
        );
        inside_reads += usize::from(r.for_llm.contains("inside"));
        let r = reg
            .execute("grep", &ctx, json!({"pattern": "TOPAZ", "path": "."}))
            .await;
        assert!(
            !r.for_llm.contains("TOPAZ-OUTSIDE"),
            "grep {i}: {}",
            r.for_llm
        );
        let _ = reg
            .execute(
                "write",
                &ctx,
                json!({"path": format!("race/w{i}.txt"), "content": "x"}),
            )
            .await;
        let r = reg.execute("ls", &ctx, json!({"path": "race"})).await;
        assert!(
            !r.for_llm.contains("TOPAZ") && !r.for_llm.contains("outside-only"),
            "ls {i} listed the outside directory: {}",
            r.for_llm
        );
        let patch = format!("*** Begin Patch\n*** Add File: race/p{i}.txt\n+x\n*** End Patch\n");
        last_patch = reg
            .execute("apply_patch", &ctx, json!({"input": patch}))
            .await
            .for_llm;
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 100, "the race actually ran ({swaps} swaps)");
    let planted: Vec<_> = std::fs::read_dir(&outside)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .filter(|n| n != "f.txt" && n != "outside-only.txt")
        .collect();
    assert!(planted.is_empty(), "writes landed outside: {planted:?}");
    // Look-alikes: whenever the name held the real directory, reads and writes worked.
    assert!(inside_reads > 0, "no read ever succeeded");
    let real = ["race", "swap"]
        .iter()
        .map(|n| ws.join(n))
        .find(|p| std::fs::symlink_metadata(p).unwrap().is_dir())
        .unwrap();
    let names: Vec<String> = std::fs::read_dir(&real)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with('w')),
        "no write landed: {names:?}"
    );
    assert!(
        names.iter().any(|n| n.starts_with('p')),
        "no patch landed: {last_patch}"
    );
}
