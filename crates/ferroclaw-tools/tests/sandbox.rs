//! The exec sandbox tested from inside, as an attacker's command would try it: real child
//! processes through the real `exec`, `process` and custom tools, under each backend this
//! machine has (bubblewrap is required: CI installs it; Landlock when the kernel has it).
//! Every refusal asserts its reason; harmless look-alikes must keep working.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferroclaw_config::settings::{SandboxMode, SandboxSettings};
use ferroclaw_tools::builtin::ExecTool;
use ferroclaw_tools::custom_tool::{CustomTool, CustomToolSpec};
use ferroclaw_tools::exec_guard::{ApprovalMode, ExecGuard, ExecMode, ExecPolicy};
use ferroclaw_tools::process::{ProcessManager, ProcessTool};
use ferroclaw_tools::sandbox::{Sandbox, SandboxBackend};
use ferroclaw_tools::{DeniedPaths, Tool, ToolContext, ToolResult, ToolUser};
use serde_json::{json, Value};

const SECRET: &str = "sk-planted-secret-0123456789";

/// A ferroclaw home with its secrets, the workspace inside it (the default layout), a
/// second user's workspace next to it, and a denied directory elsewhere.
struct Fixture {
    _dir: tempfile::TempDir,
    home: PathBuf,
    root_ws: PathBuf,
    ws: PathBuf,
    vault: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let home = base.join("home");
    let root_ws = home.join("workspace");
    let ws = root_ws.join("user_alice");
    let bob = root_ws.join("user_bob");
    let vault = base.join("vault");
    for d in [&ws, &bob, &home.join("data"), &vault] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(
        home.join("config.json5"),
        format!("{{ token: \"{SECRET}\" }}"),
    )
    .unwrap();
    std::fs::write(
        home.join(".env.local"),
        format!("OPENAI_API_KEY={SECRET}\n"),
    )
    .unwrap();
    std::fs::write(home.join("data/exec-allowlist.json"), "[]").unwrap();
    std::fs::write(bob.join("secret.txt"), SECRET).unwrap();
    std::fs::write(vault.join("secret.txt"), SECRET).unwrap();
    Fixture {
        _dir: dir,
        home,
        root_ws,
        ws,
        vault,
    }
}

impl Fixture {
    fn ctx(&self) -> ToolContext {
        let mut c = crate::common::ctx(&self.ws);
        c.user = Some(ToolUser {
            id: "alice".into(),
            root_workspace: self.root_ws.clone(),
        });
        c
    }

    fn denied(&self) -> DeniedPaths {
        DeniedPaths::for_home(&self.home, std::slice::from_ref(&self.vault))
    }
}

fn config(backend: SandboxMode, network: bool) -> SandboxSettings {
    SandboxSettings {
        mode: backend,
        network,
        ..SandboxSettings::default()
    }
}

/// The backends to test: bubblewrap always (its absence is a failure, with the fix),
/// Landlock when the kernel has it.
fn backends() -> Vec<SandboxMode> {
    let b = Sandbox::new(&config(SandboxMode::Bwrap, false));
    assert_eq!(
        b.backend(),
        Ok(SandboxBackend::Bwrap),
        "bubblewrap must be installed for these tests (apt-get install bubblewrap)"
    );
    let mut v = vec![SandboxMode::Bwrap];
    match Sandbox::new(&config(SandboxMode::Landlock, false)).backend() {
        Ok(_) => v.push(SandboxMode::Landlock),
        // CI runs on a kernel with Landlock: there, a missing backend is a failure.
        Err(e) if std::env::var_os("CI").is_some() => {
            panic!("Landlock backend unavailable in CI: {e}")
        }
        Err(e) => eprintln!("Landlock backend not tested: {e}"),
    }
    v
}

fn full_guard() -> Arc<ExecGuard> {
    // The pattern guard is a separate layer; these tests are about what the OS allows.
    Arc::new(ExecGuard::new(ExecPolicy {
        mode: ExecMode::Full,
        approval: ApprovalMode::Off,
        allowlist: Vec::new(),
    }))
}

fn exec_for(cfg: &SandboxSettings) -> ExecTool {
    ExecTool::new()
        .with_sandbox(Arc::new(Sandbox::new(cfg)))
        .with_guard(full_guard())
}

async fn run_with(f: &Fixture, tool: &dyn Tool, args: Value) -> ToolResult {
    f.denied().scope(tool.execute(&f.ctx(), args)).await
}

async fn sh(f: &Fixture, mode: SandboxMode, command: &str) -> ToolResult {
    run_with(
        f,
        &exec_for(&config(mode, false)),
        json!({"command": command}),
    )
    .await
}

/// The refusal a backend gives for a hidden path: bubblewrap shows an empty tmpfs in its
/// place, Landlock denies the access.
fn hidden_reason(mode: SandboxMode) -> &'static str {
    match mode {
        SandboxMode::Landlock => "Permission denied",
        _ => "No such file or directory",
    }
}

fn assert_refused(r: &ToolResult, reason: &str, what: &str) {
    assert!(r.is_error, "{what}: ran:\n{}", r.for_llm);
    assert!(
        r.for_llm.contains(reason),
        "{what}: expected {reason:?}:\n{}",
        r.for_llm
    );
    assert!(
        !r.for_llm.contains(SECRET),
        "{what}: secret leaked:\n{}",
        r.for_llm
    );
}

#[tokio::test]
async fn home_secrets_other_users_and_denied_paths_cannot_be_read() {
    let f = fixture();
    for mode in backends() {
        let why = hidden_reason(mode);
        let home = f.home.display();
        for (what, cmd) in [
            ("config", format!("cat {home}/config.json5")),
            ("config via ..", "cat ../../config.json5".to_string()),
            (".env.local", format!("cat {home}/.env.local")),
            ("other user", "cat ../user_bob/secret.txt".to_string()),
            (
                "other user (absolute)",
                format!("cat {}/user_bob/secret.txt", f.root_ws.display()),
            ),
            (
                "denied path",
                format!("cat {}/secret.txt", f.vault.display()),
            ),
        ] {
            let r = sh(&f, mode, &cmd).await;
            assert_refused(&r, why, &format!("{mode:?} {what}"));
        }
        // The gateway's environment (this test process plays the gateway).
        let r = sh(
            &f,
            mode,
            &format!("cat /proc/{}/environ", std::process::id()),
        )
        .await;
        assert_refused(&r, why, &format!("{mode:?} /proc/<gateway>/environ"));
    }
}

#[tokio::test]
async fn writes_outside_the_workspace_and_hard_links_are_refused() {
    let f = fixture();
    let allowlist = f.home.join("data/exec-allowlist.json");
    for mode in backends() {
        let r = sh(
            &f,
            mode,
            &format!("echo '[\"sh\"]' > {}", allowlist.display()),
        )
        .await;
        let why = match mode {
            SandboxMode::Landlock => "Permission denied",
            // An empty tmpfs stands where the home was.
            _ => "Directory nonexistent",
        };
        assert_refused(&r, why, &format!("{mode:?} allowlist write"));
        let r = sh(&f, mode, "echo x > /etc/ferroclaw-sandbox-test").await;
        let why = match mode {
            SandboxMode::Landlock => "Permission denied",
            _ => "Read-only file system",
        };
        assert_refused(&r, why, &format!("{mode:?} write into /etc"));
        assert!(!Path::new("/etc/ferroclaw-sandbox-test").exists());
        // Moving itself out of its cgroup would lift the process and memory limits.
        let r = sh(&f, mode, "for c in /sys/fs/cgroup/*/cgroup.procs /sys/fs/cgroup/cgroup.procs; do [ -e $c ] && echo $$ > $c; done").await;
        assert_refused(&r, why, &format!("{mode:?} cgroup escape"));
        // A hard link would let the file tools read a file from outside.
        let r = sh(&f, mode, "ln /etc/hostname hostname-link").await;
        assert_refused(
            &r,
            "Invalid cross-device link",
            &format!("{mode:?} hard link"),
        );
        assert!(!f.ws.join("hostname-link").exists());
    }
    assert_eq!(std::fs::read_to_string(&allowlist).unwrap(), "[]");
}

#[tokio::test]
async fn workspace_files_git_and_tools_still_work() {
    let f = fixture();
    for mode in backends() {
        for cmd in [
            "echo hello > note.txt && cat note.txt && mkdir -p d && mv note.txt d/ && ln d/note.txt same && rm same",
            "git init -q repo && cd repo && git status --short && echo ok",
            "cargo --version",
            "python3 -c 'print(1)'",
            "ls /usr/bin | grep -c .",
            "echo tmp > \"$TMPDIR/x\" && cat \"$TMPDIR/x\"",
        ] {
            let r = sh(&f, mode, cmd).await;
            assert!(!r.is_error, "{mode:?} `{cmd}` failed:\n{}", r.for_llm);
        }
        assert_eq!(
            std::fs::read_to_string(f.ws.join("d/note.txt")).unwrap(),
            "hello\n"
        );
        std::fs::remove_dir_all(f.ws.join("d")).unwrap();
        std::fs::remove_dir_all(f.ws.join("repo")).unwrap();
    }
}

#[tokio::test]
async fn network_is_refused_unless_allowed() {
    let f = fixture();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!(
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 5); print('connected')\""
    );
    for mode in backends() {
        let r = run_with(
            &f,
            &exec_for(&config(mode, false)),
            json!({"command": connect}),
        )
        .await;
        let why = match mode {
            SandboxMode::Landlock if !r.for_llm.contains("refused") => "Permission denied",
            _ => "Connection refused",
        };
        assert!(
            r.is_error && r.for_llm.contains(why),
            "{mode:?}:\n{}",
            r.for_llm
        );
        assert!(!r.for_llm.contains("connected\n"), "{}", r.for_llm);

        let r = run_with(
            &f,
            &exec_for(&config(mode, true)),
            json!({"command": connect}),
        )
        .await;
        assert!(
            !r.is_error && r.for_llm.contains("connected"),
            "{mode:?} with network:\n{}",
            r.for_llm
        );
        // The connection really reached this listener.
        listener.accept().unwrap();
    }
}

#[tokio::test]
async fn the_gateway_process_cannot_be_seen_or_signalled() {
    let f = fixture();
    let me = std::process::id();
    for mode in backends() {
        let r = sh(&f, mode, &format!("kill -0 {me}")).await;
        let why = match mode {
            SandboxMode::Landlock => "Operation not permitted",
            _ => "No such process",
        };
        assert!(
            r.is_error && r.for_llm.contains(why),
            "{mode:?}:\n{}",
            r.for_llm
        );
    }
    // With a pid namespace, `ps` shows only the command's own processes.
    let r = sh(&f, SandboxMode::Bwrap, "ps -eo pid=,comm=").await;
    assert!(!r.is_error, "{}", r.for_llm);
    let lines: Vec<&str> = r
        .for_llm
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('['))
        .collect();
    assert!(lines.len() <= 5, "ps sees too much:\n{}", r.for_llm);
    let exe = std::env::current_exe().unwrap();
    let name: String = exe
        .file_name()
        .unwrap()
        .to_string_lossy()
        .chars()
        .take(15)
        .collect();
    assert!(
        !r.for_llm.contains(&name),
        "ps sees the test process:\n{}",
        r.for_llm
    );
}

#[tokio::test]
async fn environment_is_an_allowlist() {
    let f = fixture();
    for mode in backends() {
        let tool = ExecTool::with_env([
            ("FERROCLAW_HOME", f.home.display().to_string()),
            ("FERROCLAW_GATEWAY_TOKEN", SECRET.to_string()),
            ("OPENAI_API_KEY", SECRET.to_string()),
            ("VISIBLE_SETTING", "plain".to_string()),
        ])
        .with_sandbox(Arc::new(Sandbox::new(&config(mode, false))))
        .with_guard(full_guard());
        let r = run_with(&f, &tool, json!({"command": "env"})).await;
        assert!(!r.is_error, "{}", r.for_llm);
        assert!(r.for_llm.contains("VISIBLE_SETTING=plain"), "{}", r.for_llm);
        assert!(
            r.for_llm.contains(&format!("HOME={}\n", f.ws.display())),
            "{}",
            r.for_llm
        );
        for bad in ["FERROCLAW_", "_API_KEY", SECRET] {
            assert!(
                !r.for_llm.contains(bad),
                "{mode:?}: {bad} reached the command:\n{}",
                r.for_llm
            );
        }
    }
}

#[tokio::test]
async fn fork_bomb_and_memory_hog_are_contained() {
    let f = fixture();
    for mode in backends() {
        let mut cfg = config(mode, false);
        cfg.limits.max_processes = 64;
        cfg.limits.memory_mb = 512;
        let tool = exec_for(&cfg);
        let r = run_with(
            &f,
            &tool,
            json!({"command": "python3 -c \"x=' '*(8<<30)\""}),
        )
        .await;
        assert!(
            r.is_error && r.for_llm.contains("MemoryError"),
            "{mode:?}:\n{}",
            r.for_llm
        );

        if !ferroclaw_tools::sandbox::process_limit_enforced() {
            // As root without a pids cgroup nothing bounds a fork bomb: do not run one,
            // and never pass quietly where the tests must prove containment.
            assert!(
                std::env::var_os("CI").is_none(),
                "CI needs a writable pids cgroup (or a non-root user) to prove fork-bomb containment"
            );
            eprintln!("no writable pids cgroup here: fork bomb not run");
            continue;
        }
        let r = run_with(
            &f,
            &tool,
            json!({"command": "bash -c ':(){ :|:& };:'; sleep 30", "timeout": 5}),
        )
        .await;
        assert!(r.is_error, "{}", r.for_llm);
        assert!(
            r.for_llm.contains("reached its limit of 64 processes"),
            "{mode:?}:\n{}",
            r.for_llm
        );
        // This process (the gateway) is fine: it can still start a child.
        assert!(std::process::Command::new("true")
            .status()
            .unwrap()
            .success());
    }
}

#[tokio::test]
async fn background_processes_and_custom_tools_are_confined_too() {
    let f = fixture();
    let sandbox = Arc::new(Sandbox::new(&config(SandboxMode::Auto, false)));
    let manager = Arc::new(ProcessManager::new());
    let exec = ExecTool::new()
        .with_sandbox(sandbox.clone())
        .with_guard(full_guard())
        .with_process_manager(manager.clone());
    let process = ProcessTool::new(manager.clone());
    let cmd = format!(
        "echo started; cat {}/config.json5; cat ../user_bob/secret.txt; echo done",
        f.home.display()
    );
    let r = run_with(&f, &exec, json!({"command": cmd, "background": true})).await;
    assert!(!r.is_error, "{}", r.for_llm);
    let start = r.for_llm.find("proc_").unwrap();
    let id: String = r.for_llm[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    let p = run_with(
        &f,
        &process,
        json!({"action": "poll", "sessionId": id, "waitMs": 20000}),
    )
    .await;
    assert!(
        p.for_llm.contains("started") && p.for_llm.contains("done"),
        "{}",
        p.for_llm
    );
    assert!(
        p.for_llm.contains("No such file or directory"),
        "{}",
        p.for_llm
    );
    assert!(!p.for_llm.contains(SECRET), "{}", p.for_llm);

    let tool = CustomTool::new(
        CustomToolSpec {
            name: "show".into(),
            description: "show a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            command: "cat {{.path}}".into(),
            timeout_seconds: 10,
            workdir: None,
        },
        full_guard(),
    )
    .unwrap()
    .with_sandbox(sandbox);
    let path = f.home.join(".env.local").display().to_string();
    let r = run_with(&f, &tool, json!({"path": path})).await;
    assert_refused(&r, "No such file or directory", "custom tool");
    std::fs::write(f.ws.join("mine.txt"), "mine").unwrap();
    let r = run_with(&f, &tool, json!({"path": "mine.txt"})).await;
    assert!(!r.is_error && r.for_llm.contains("mine"), "{}", r.for_llm);
}

/// A job that leaves the process group (`setsid`) still dies with the time-out: the pid
/// namespace (bubblewrap) or the command's cgroup (Landlock) takes it down.
#[tokio::test]
async fn timeout_kills_jobs_that_left_the_process_group() {
    let f = fixture();
    for mode in backends() {
        let (sleep, marker) = crate::common::unique_sleep();
        let tool = exec_for(&config(mode, false));
        let command = format!("setsid {sleep} > /dev/null 2>&1 < /dev/null & sleep 300");
        let ctx = f.ctx();
        let denied = f.denied();
        let task = tokio::spawn(async move {
            denied
                .scope(tool.execute(&ctx, json!({"command": command, "timeout": 5})))
                .await
        });
        let bg = tokio::task::spawn_blocking(move || crate::common::host_pid_by_arg(&marker))
            .await
            .unwrap();
        let r = task.await.unwrap();
        assert!(
            r.is_error && r.for_llm.contains("timed out after 5 s"),
            "{mode:?}:\n{}",
            r.for_llm
        );
        assert!(
            !crate::common::still_running_after(bg, 10_000),
            "{mode:?}: job {bg} that left the group survived the time-out"
        );
    }
}

/// The workspace is the ferroclaw home: bubblewrap hides the secrets inside it; Landlock,
/// which cannot take back part of a granted tree, refuses to run rather than expose them.
#[tokio::test]
async fn workspace_that_is_the_home_keeps_its_secrets() {
    let f = fixture();
    let mut ctx = crate::common::ctx(&f.home);
    ctx.user = None;
    for mode in backends() {
        let tool = exec_for(&config(mode, false));
        let r = f
            .denied()
            .scope(tool.execute(&ctx, json!({"command": "ls; cat config.json5 .env.local"})))
            .await;
        match mode {
            SandboxMode::Landlock => assert_refused(
                &r,
                "cannot hide the protected files",
                "landlock home workspace",
            ),
            _ => {
                // /dev/null is bound over each file, on a nodev mount.
                assert_refused(
                    &r,
                    "config.json5: Permission denied",
                    "bwrap home workspace",
                );
                // The workspace itself is still there.
                assert!(r.for_llm.contains("workspace"), "{}", r.for_llm);
            }
        }
    }
}

#[test]
fn describe_names_the_backend_and_its_gaps() {
    let b = Sandbox::new(&config(SandboxMode::Bwrap, false)).describe();
    assert!(b.contains("bubblewrap") && b.contains("no network"), "{b}");
    let off = Sandbox::new(&config(SandboxMode::Off, false)).describe();
    assert!(off.contains("OFF"), "{off}");
    if let Ok(SandboxBackend::Landlock) =
        Sandbox::new(&config(SandboxMode::Landlock, false)).backend()
    {
        let l = Sandbox::new(&config(SandboxMode::Landlock, false)).describe();
        assert!(
            l.contains("Landlock ABI") && l.contains("cannot confine"),
            "{l}"
        );
    }
}

/// The sandbox's `/tmp` lives in RAM: it is capped, so a command cannot fill the host's
/// memory through it; a small temporary file (look-alike) still works.
#[tokio::test]
async fn the_sandbox_tmp_is_capped() {
    let f = fixture();
    let tool = exec_for(&config(SandboxMode::Bwrap, false));
    let r = run_with(
        &f,
        &tool,
        json!({"command": "head -c 400M /dev/zero > /tmp/fill; echo rc=$?; du -m /tmp/fill"}),
    )
    .await;
    assert!(
        r.for_llm.contains("No space left on device"),
        "{}",
        r.for_llm
    );
    let r = run_with(
        &f,
        &tool,
        json!({"command": "head -c 1M /dev/zero > /tmp/small && wc -c < /tmp/small"}),
    )
    .await;
    assert!(
        !r.is_error && r.for_llm.contains("1048576"),
        "{}",
        r.for_llm
    );
}
