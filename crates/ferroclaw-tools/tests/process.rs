//! Background processes: `exec {background|yieldMs}`, the `process` tool, session scoping,
//! and the clean-up paths (kill_session, kill_all, drop). Synchronisation is real: the
//! process waits for a file or stdin the test provides, a fifo handshake signals readiness,
//! and `poll {waitMs}` waits on the process's exit — no sleeps in the tests.

use std::ffi::CString;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::time::Duration;

use ferroclaw_tools::builtin::ExecTool;
use ferroclaw_tools::process::{ProcessManager, ProcessStatus, ProcessTool};
use ferroclaw_tools::{Tool, ToolContext, ToolResult};
use serde_json::{json, Value};

fn env() -> Vec<(String, String)> {
    vec![(
        "PATH".into(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
    )]
}

fn ctx_for(ws: &std::path::Path, session: &str) -> ToolContext {
    let mut c = crate::common::ctx(ws);
    c.session_key = session.into();
    c
}

struct Kit {
    manager: Arc<ProcessManager>,
    exec: ExecTool,
    process: ProcessTool,
}

fn kit_with(manager: ProcessManager) -> Kit {
    let manager = Arc::new(manager);
    Kit {
        exec: ExecTool::with_env(env()).with_process_manager(manager.clone()),
        process: ProcessTool::new(manager.clone()),
        manager,
    }
}

fn kit() -> Kit {
    kit_with(ProcessManager::new())
}

/// The process id in exec's "Started background process <id>" / "as process <id>" text.
fn proc_id(r: &ToolResult) -> String {
    let start = r
        .for_llm
        .find("proc_")
        .unwrap_or_else(|| panic!("no id in {}", r.for_llm));
    r.for_llm[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

async fn call(tool: &dyn Tool, ctx: &ToolContext, args: Value) -> ToolResult {
    tool.execute(ctx, args).await
}

fn make_fifo(dir: &std::path::Path) -> std::path::PathBuf {
    let fifo = dir.join("ready");
    let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
    // SAFETY: valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    fifo
}

async fn wait_ready(fifo: std::path::PathBuf) {
    tokio::task::spawn_blocking(move || {
        let mut s = String::new();
        std::fs::File::open(fifo)
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s.trim(), "ready");
    })
    .await
    .unwrap();
}

/// A background child, the readiness signal, then waiting; and the child's unique argument
/// (the sandbox's pid namespace hides its host pid from the command, see `common`).
fn bg_child_and_wait() -> (String, String) {
    let (sleep, marker) = crate::common::unique_sleep();
    (format!("{sleep} & echo ready > ready; wait"), marker)
}

#[tokio::test]
async fn background_process_is_read_back_with_poll() {
    let ws = tempfile::tempdir().unwrap();
    let k = kit();
    let ctx = crate::common::ctx(ws.path());
    let r = call(
        &k.exec,
        &ctx,
        json!({"command": "echo waiting; while [ ! -e go ]; do sleep 0.05; done; echo released; exit 3", "background": true}),
    )
    .await;
    assert!(!r.is_error, "{}", r.for_llm);
    assert!(
        r.for_llm.contains("Started background process"),
        "{}",
        r.for_llm
    );
    let id = proc_id(&r);

    let list = call(&k.process, &ctx, json!({"action": "list"})).await;
    assert!(
        list.for_llm.contains(&id) && list.for_llm.contains("[running]"),
        "{}",
        list.for_llm
    );
    // The process cannot finish before the file exists: this poll sees it running.
    let first = call(&k.process, &ctx, json!({"action": "poll", "sessionId": id})).await;
    assert!(
        first.for_llm.ends_with(&format!("[process {id}: running]")),
        "{}",
        first.for_llm
    );

    std::fs::write(ws.path().join("go"), "").unwrap();
    let done = call(
        &k.process,
        &ctx,
        json!({"action": "poll", "sessionId": id, "waitMs": 60_000}),
    )
    .await;
    assert!(!done.is_error, "{}", done.for_llm);
    assert!(done.for_llm.contains("released\n"), "{}", done.for_llm);
    assert!(
        done.for_llm.ends_with("exited with code 3]"),
        "{}",
        done.for_llm
    );
    // Each poll returns only what is new.
    let again = call(&k.process, &ctx, json!({"action": "poll"})).await;
    assert!(
        again.for_llm.starts_with("(no new output)"),
        "{}",
        again.for_llm
    );
    // The log still holds everything.
    let log = call(&k.process, &ctx, json!({"action": "log", "sessionId": id})).await;
    assert!(
        log.for_llm.starts_with("waiting\nreleased\n"),
        "{}",
        log.for_llm
    );
    assert!(log.for_llm.contains("lines 1-2 of 2"), "{}", log.for_llm);
}

#[tokio::test]
async fn log_offset_and_limit_are_lines() {
    let ws = tempfile::tempdir().unwrap();
    let k = kit();
    let ctx = crate::common::ctx(ws.path());
    let r = call(
        &k.exec,
        &ctx,
        json!({"command": "seq 1 50", "background": true}),
    )
    .await;
    let id = proc_id(&r);
    k.manager.wait(&ctx.session_key, &id, None).await.unwrap();
    let log = call(
        &k.process,
        &ctx,
        json!({"action": "log", "sessionId": id, "offset": 10, "limit": 5}),
    )
    .await;
    assert!(
        log.for_llm.starts_with("11\n12\n13\n14\n15\n["),
        "{}",
        log.for_llm
    );
    assert!(log.for_llm.contains("lines 11-15 of 50"), "{}", log.for_llm);
}

#[tokio::test]
async fn output_buffer_is_capped_and_says_so() {
    let ws = tempfile::tempdir().unwrap();
    let k = kit_with(ProcessManager::with_buffer_bytes(1024));
    let ctx = crate::common::ctx(ws.path());
    let r = call(
        &k.exec,
        &ctx,
        json!({"command": "seq 1 20000", "background": true}),
    )
    .await;
    let id = proc_id(&r);
    let done = call(
        &k.process,
        &ctx,
        json!({"action": "poll", "sessionId": id, "waitMs": 60_000}),
    )
    .await;
    assert!(
        done.for_llm.contains("bytes of older output were dropped"),
        "{}",
        &done.for_llm[..200]
    );
    assert!(done.for_llm.contains("19999\n20000\n"), "{}", done.for_llm);
    assert!(done.for_llm.len() < 1300, "{}", done.for_llm.len());
}

#[tokio::test]
async fn write_sends_stdin() {
    let ws = tempfile::tempdir().unwrap();
    let k = kit();
    let ctx = crate::common::ctx(ws.path());
    let r = call(
        &k.exec,
        &ctx,
        json!({"command": "read line; echo \"got:$line\"; cat", "background": true}),
    )
    .await;
    let id = proc_id(&r);
    let w = call(
        &k.process,
        &ctx,
        json!({"action": "write", "sessionId": id, "data": "hello\n"}),
    )
    .await;
    assert!(!w.is_error, "{}", w.for_llm);
    let w = call(
        &k.process,
        &ctx,
        json!({"action": "write", "sessionId": id, "data": "rest", "eof": true}),
    )
    .await;
    assert!(w.for_llm.contains("closed its stdin"), "{}", w.for_llm);
    let done = call(
        &k.process,
        &ctx,
        json!({"action": "poll", "sessionId": id, "waitMs": 60_000}),
    )
    .await;
    assert!(
        done.for_llm.starts_with("got:hello\nrest"),
        "{}",
        done.for_llm
    );
    assert!(
        done.for_llm.ends_with("exited with code 0]"),
        "{}",
        done.for_llm
    );
    // Stdin of a finished process is gone.
    let late = call(
        &k.process,
        &ctx,
        json!({"action": "write", "sessionId": id, "data": "x"}),
    )
    .await;
    assert!(
        late.is_error && late.for_llm.contains("not running"),
        "{}",
        late.for_llm
    );
}

#[tokio::test]
async fn processes_are_scoped_to_their_session() {
    let ws = tempfile::tempdir().unwrap();
    let k = kit();
    let mine = ctx_for(ws.path(), "alice");
    let other = ctx_for(ws.path(), "mallory");
    let r = call(
        &k.exec,
        &mine,
        json!({"command": "sleep 300", "background": true}),
    )
    .await;
    let id = proc_id(&r);
    let list = call(&k.process, &other, json!({"action": "list"})).await;
    assert_eq!(list.for_llm, "No background processes in this session.");
    for args in [
        json!({"action": "poll", "sessionId": id}),
        json!({"action": "log", "sessionId": id}),
        json!({"action": "write", "sessionId": id, "data": "x"}),
        json!({"action": "kill", "sessionId": id}),
    ] {
        let r = call(&k.process, &other, args.clone()).await;
        assert!(r.is_error, "{args}: {}", r.for_llm);
        assert!(
            r.for_llm
                .contains(&format!("no process \"{id}\" in this session")),
            "{}",
            r.for_llm
        );
    }
    // Without an id the other session has nothing to act on either.
    let r = call(&k.process, &other, json!({"action": "kill"})).await;
    assert!(r.is_error, "{}", r.for_llm);
    // Still running for its owner, who can kill it.
    let info = k.manager.info("alice", &id).unwrap();
    assert_eq!(info.status, ProcessStatus::Running);
    let killed = call(
        &k.process,
        &mine,
        json!({"action": "kill", "sessionId": id}),
    )
    .await;
    assert!(killed.for_llm.contains("killed"), "{}", killed.for_llm);
    assert!(!crate::common::still_running_after(info.pid as i32, 10_000));
}

#[tokio::test]
async fn kill_session_kills_the_whole_group() {
    let ws = tempfile::tempdir().unwrap();
    let fifo = make_fifo(ws.path());
    let k = kit();
    let ctx = crate::common::ctx(ws.path());
    let (command, marker) = bg_child_and_wait();
    let r = call(
        &k.exec,
        &ctx,
        json!({"command": command, "background": true}),
    )
    .await;
    let id = proc_id(&r);
    wait_ready(fifo).await;
    let shell = k.manager.info(&ctx.session_key, &id).unwrap().pid as i32;
    let bg = crate::common::host_pid_by_arg(&marker);
    // Another session's clean-up does not touch it.
    assert_eq!(k.manager.kill_session("someone-else"), 0);
    assert_eq!(k.manager.kill_session(&ctx.session_key), 1);
    assert!(
        !crate::common::still_running_after(bg, 10_000),
        "child {bg} survived"
    );
    assert!(
        !crate::common::still_running_after(shell, 10_000),
        "shell {shell} survived"
    );
    assert!(k.manager.list(&ctx.session_key).is_empty());
}

#[tokio::test]
async fn kill_all_and_drop_kill_processes() {
    let ws = tempfile::tempdir().unwrap();
    let fifo = make_fifo(ws.path());
    let k = kit();
    let ctx = crate::common::ctx(ws.path());
    let (command, marker) = bg_child_and_wait();
    let r = call(
        &k.exec,
        &ctx,
        json!({"command": command, "background": true}),
    )
    .await;
    let _ = proc_id(&r);
    wait_ready(fifo).await;
    let bg = crate::common::host_pid_by_arg(&marker);
    assert_eq!(k.manager.kill_all(), 1);
    assert!(!crate::common::still_running_after(bg, 10_000));

    // Dropping the last handle on the manager kills what is left.
    let ws2 = tempfile::tempdir().unwrap();
    let fifo = make_fifo(ws2.path());
    let k = kit();
    let ctx = crate::common::ctx(ws2.path());
    let (command, marker) = bg_child_and_wait();
    call(
        &k.exec,
        &ctx,
        json!({"command": command, "background": true}),
    )
    .await;
    wait_ready(fifo).await;
    let bg = crate::common::host_pid_by_arg(&marker);
    drop(k);
    assert!(!crate::common::still_running_after(bg, 10_000));
}

#[tokio::test]
async fn yield_ms_returns_quick_commands_in_full() {
    let ws = tempfile::tempdir().unwrap();
    let k = kit();
    let ctx = crate::common::ctx(ws.path());
    // The yield is long; the command ends long before, so the result is a normal one.
    let r = call(
        &k.exec,
        &ctx,
        json!({"command": "echo quick", "yieldMs": 600_000}),
    )
    .await;
    assert_eq!(r.for_llm, "quick\n\n[exit code: 0]");
    assert!(k.manager.list(&ctx.session_key).is_empty());
    let r = call(
        &k.exec,
        &ctx,
        json!({"command": "echo bad; exit 4", "yieldMs": 600_000}),
    )
    .await;
    assert!(
        r.is_error && r.for_llm.ends_with("[exit code: 4]"),
        "{}",
        r.for_llm
    );
}

#[tokio::test]
async fn yield_ms_hands_long_commands_to_the_background() {
    let ws = tempfile::tempdir().unwrap();
    let k = kit();
    let ctx = crate::common::ctx(ws.path());
    // Cannot finish until the test creates `go`, which happens after exec returned.
    let r = call(
        &k.exec,
        &ctx,
        json!({"command": "echo early; while [ ! -e go ]; do sleep 0.05; done; echo late", "yieldMs": 100}),
    )
    .await;
    assert!(!r.is_error, "{}", r.for_llm);
    assert!(
        r.for_llm.contains("still running after 100 ms"),
        "{}",
        r.for_llm
    );
    let id = proc_id(&r);
    std::fs::write(ws.path().join("go"), "").unwrap();
    let done = call(
        &k.process,
        &ctx,
        json!({"action": "poll", "sessionId": id, "waitMs": 60_000}),
    )
    .await;
    assert!(done.for_llm.contains("late\n"), "{}", done.for_llm);
    let log = call(&k.process, &ctx, json!({"action": "log", "sessionId": id})).await;
    assert!(log.for_llm.starts_with("early\nlate\n"), "{}", log.for_llm);
}

#[tokio::test]
async fn background_commands_pass_the_guard_too() {
    let ws = tempfile::tempdir().unwrap();
    let k = kit();
    let ctx = crate::common::ctx(ws.path());
    let r = call(
        &k.exec,
        &ctx,
        json!({"command": "sudo sleep 1", "background": true}),
    )
    .await;
    assert!(
        r.is_error && r.for_llm.contains("privilege_escalation"),
        "{}",
        r.for_llm
    );
    assert!(k.manager.list(&ctx.session_key).is_empty());
    // Without a manager, background is refused clearly.
    let r = ExecTool::new()
        .execute(&ctx, json!({"command": "echo x", "background": true}))
        .await;
    assert!(
        r.is_error && r.for_llm.contains("not enabled"),
        "{}",
        r.for_llm
    );
    let r = call(&k.process, &ctx, json!({"action": "poll"})).await;
    assert!(
        r.is_error && r.for_llm.contains("no background processes"),
        "{}",
        r.for_llm
    );
    let r = call(&k.process, &ctx, json!({"action": "explode"})).await;
    assert!(
        r.is_error && r.for_llm.contains("unknown action"),
        "{}",
        r.for_llm
    );
}

#[tokio::test]
async fn background_timeout_kills_when_asked() {
    let ws = tempfile::tempdir().unwrap();
    let k = kit();
    let ctx = crate::common::ctx(ws.path());
    let r = call(
        &k.exec,
        &ctx,
        json!({"command": "sleep 300", "background": true, "timeout": 0.2}),
    )
    .await;
    let id = proc_id(&r);
    let status = k
        .manager
        .wait(&ctx.session_key, &id, Some(Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(status, ProcessStatus::TimedOut);
}

/// Through the agent loop: the model starts a background command, then polls it; the
/// request after the poll carries the process's output back to the model.
#[tokio::test]
async fn agent_loop_reads_background_output_with_process() {
    use ferroclaw_agent::{Agent, AgentSettings, NullSink, RunRequest};
    use ferroclaw_providers::{OpenAiCompat, OpenAiCompatConfig, Provider, SchemaFlavor};
    use ferroclaw_store::{FileSessionStore, SessionStore};
    use ferroclaw_testkit::{Reply, ScriptedLlm};
    use ferroclaw_tools::ToolRegistry;

    let llm = ScriptedLlm::start().await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let workspace = home.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
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
        .unwrap(),
    );
    let manager = Arc::new(ProcessManager::new());
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(
        ExecTool::with_env(env()).with_process_manager(manager.clone()),
    ));
    tools.register(Arc::new(ProcessTool::new(manager.clone())));
    let store: Arc<dyn SessionStore> = Arc::new(FileSessionStore::new(home.path()));
    let settings = AgentSettings::new("main", "scripted", "model-a", workspace);
    let agent = Agent::new(settings, provider, Arc::new(tools), store);

    llm.push(Reply::tool_call(
        "call_1",
        "exec",
        json!({"command": "echo bg-output-42", "background": true}),
    ));
    llm.push(Reply::tool_call(
        "call_2",
        "process",
        json!({"action": "poll", "waitMs": 60_000}),
    ));
    llm.push(Reply::text("The background job printed bg-output-42."));
    let out = agent
        .run(
            RunRequest {
                session_key: "agent:main:bg".into(),
                message: "run it in the background and read it".into(),
                options: Default::default(),
            },
            Arc::new(NullSink),
            tokio_util::sync::CancellationToken::new(),
        )
        .await
        .expect("run succeeds");
    let _ = out;
    let requests = llm.requests();
    assert_eq!(requests.len(), 3);
    let body = |i: usize| serde_json::to_string(&requests[i].body).unwrap();
    // Request 2 carries exec's answer (the process id), request 3 the poll's output.
    assert!(
        body(1).contains("Started background process proc_"),
        "{}",
        body(1)
    );
    assert!(!body(1).contains("bg-output-42\\n"), "{}", body(1));
    assert!(body(2).contains("bg-output-42\\n"), "{}", body(2));
    assert!(body(2).contains("exited with code 0"), "{}", body(2));
    // The process belongs to the run's session (scoped by agent, as every tool state is).
    assert_eq!(
        manager
            .list(&ferroclaw_agent::tool_scope("main", "agent:main:bg"))
            .len(),
        1
    );
    assert!(manager.list("test-session").is_empty());
}

#[tokio::test]
async fn running_processes_per_session_are_capped_as_configured() {
    let ws = tempfile::tempdir().unwrap();
    let k = kit_with(ProcessManager::new().with_max_running(1));
    let ctx = crate::common::ctx(ws.path());
    let first = call(
        &k.exec,
        &ctx,
        json!({"command": "while [ ! -e go ]; do sleep 0.05; done", "background": true}),
    )
    .await;
    assert!(!first.is_error, "{}", first.for_llm);
    let second = call(
        &k.exec,
        &ctx,
        json!({"command": "true", "background": true}),
    )
    .await;
    assert!(
        second.is_error && second.for_llm.contains("already has 1 running processes"),
        "{}",
        second.for_llm
    );
    // Another session has its own budget.
    let other = ctx_for(ws.path(), "other");
    let r = call(
        &k.exec,
        &other,
        json!({"command": "true", "background": true}),
    )
    .await;
    assert!(!r.is_error, "{}", r.for_llm);
    std::fs::write(ws.path().join("go"), "").unwrap();
    let id = proc_id(&first);
    let done = k
        .manager
        .wait(&ctx.session_key, &id, Some(Duration::from_secs(20)))
        .await;
    assert_eq!(done.unwrap(), ProcessStatus::Exited { code: 0 });
}
