//! The exec tool against real child processes.

use std::ffi::CString;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;

use ferroclaw_tools::builtin::ExecTool;
use ferroclaw_tools::{Tool, ToolRegistry};
use serde_json::json;

fn path_env() -> Vec<(String, String)> {
    vec![(
        "PATH".into(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
    )]
}

#[tokio::test]
async fn exit_code_and_stderr_are_reported() {
    let ws = tempfile::tempdir().unwrap();
    let ok = ExecTool::new()
        .execute(
            &crate::common::ctx(ws.path()),
            json!({"command": "echo hi"}),
        )
        .await;
    assert!(!ok.is_error, "{}", ok.for_llm);
    assert_eq!(ok.for_llm, "hi\n\n[exit code: 0]");

    let r = ExecTool::new()
        .execute(
            &crate::common::ctx(ws.path()),
            json!({"command": "echo out; echo err >&2; exit 3"}),
        )
        .await;
    assert!(r.is_error);
    assert!(r.for_llm.contains("out\n"), "{}", r.for_llm);
    assert!(r.for_llm.contains("err\n"), "{}", r.for_llm);
    assert!(r.for_llm.ends_with("[exit code: 3]"), "{}", r.for_llm);
}

#[tokio::test]
async fn runs_in_workspace_and_confines_workdir() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    let canon = std::fs::canonicalize(ws.path()).unwrap();
    let r = ExecTool::new()
        .execute(&crate::common::ctx(ws.path()), json!({"command": "pwd -P"}))
        .await;
    assert_eq!(r.for_llm, format!("{}\n\n[exit code: 0]", canon.display()));
    let r = ExecTool::new()
        .execute(
            &crate::common::ctx(ws.path()),
            json!({"command": "pwd -P", "workdir": "sub"}),
        )
        .await;
    assert!(
        r.for_llm
            .starts_with(&format!("{}\n", canon.join("sub").display())),
        "{}",
        r.for_llm
    );
    let r = ExecTool::new()
        .execute(
            &crate::common::ctx(ws.path()),
            json!({"command": "pwd", "workdir": ".."}),
        )
        .await;
    assert!(
        r.is_error && r.for_llm.contains("outside the workspace"),
        "{}",
        r.for_llm
    );
    let r = ExecTool::new()
        .execute(
            &crate::common::ctx(ws.path()),
            json!({"command": "pwd", "workdir": "missing"}),
        )
        .await;
    assert!(
        r.is_error && r.for_llm.contains("not an existing directory"),
        "{}",
        r.for_llm
    );
}

#[tokio::test]
async fn timeout_kills_the_whole_process_group() {
    let ws = tempfile::tempdir().unwrap();
    let fifo = make_fifo(ws.path());
    let ctx = crate::common::ctx(ws.path());
    let (sleep, marker) = crate::common::unique_sleep();
    // The background sleep inherits the output pipe: if it survived, reading would hang.
    let command = format!("{sleep} & echo started; echo ready > ready; sleep 300");
    let task = tokio::spawn(async move {
        ExecTool::with_env(path_env())
            .execute(&ctx, json!({"command": command, "timeout": 5}))
            .await
    });
    wait_ready(fifo).await;
    // The command runs in a pid namespace: find the sleep's host pid by its argument.
    let bg = crate::common::host_pid_by_arg(&marker);
    let r = task.await.unwrap();
    assert!(r.is_error);
    assert!(r.for_llm.contains("timed out after 5 s"), "{}", r.for_llm);
    assert!(r.for_llm.contains("started"), "{}", r.for_llm);
    assert!(
        !crate::common::still_running_after(bg, 10_000),
        "background process {bg} survived the time-out"
    );
}

#[tokio::test]
async fn output_is_capped_keeping_head_and_tail() {
    let ws = tempfile::tempdir().unwrap();
    let r = ExecTool::with_env(path_env())
        .with_max_output(1000)
        .execute(
            &crate::common::ctx(ws.path()),
            json!({"command": "seq 1 100000"}),
        )
        .await;
    assert!(!r.is_error, "{}", &r.for_llm[..200.min(r.for_llm.len())]);
    assert!(r.for_llm.starts_with("1\n2\n3\n"), "{}", r.for_llm);
    assert!(
        r.for_llm.contains("bytes of output omitted"),
        "{}",
        r.for_llm
    );
    assert!(r.for_llm.contains("99999\n100000\n"), "{}", r.for_llm);
    assert!(r.for_llm.len() < 1200, "{}", r.for_llm.len());
}

#[tokio::test]
async fn secret_env_vars_are_not_visible() {
    let ws = tempfile::tempdir().unwrap();
    let mut env = path_env();
    env.push(("FOO_API_KEY".into(), "sk-very-secret".into()));
    env.push(("FERROCLAW_GATEWAY_TOKEN".into(), "gw-secret".into()));
    env.push(("DB_PASSWORD".into(), "hunter2".into()));
    env.push(("VISIBLE_SETTING".into(), "plain-value".into()));
    let r = ExecTool::with_env(env)
        .execute(&crate::common::ctx(ws.path()), json!({"command": "env"}))
        .await;
    assert!(!r.is_error, "{}", r.for_llm);
    assert!(
        r.for_llm.contains("VISIBLE_SETTING=plain-value"),
        "{}",
        r.for_llm
    );
    for secret in ["FOO_API_KEY", "sk-very-secret", "gw-secret", "hunter2"] {
        assert!(
            !r.for_llm.contains(secret),
            "{secret} leaked:\n{}",
            r.for_llm
        );
    }
}

/// Starts `command` (which must write "ready" into the fifo `ready` once its background
/// job exists), waits for that signal, then runs `then`.
fn make_fifo(dir: &std::path::Path) -> std::path::PathBuf {
    let fifo = dir.join("ready");
    let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
    // SAFETY: valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    fifo
}

async fn wait_ready(fifo: std::path::PathBuf) {
    tokio::task::spawn_blocking(move || {
        // Opening blocks until the shell opens the fifo for writing: a real handshake.
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

/// A background sleep, then the readiness signal, then waiting for the sleep.
fn background_and_wait() -> (String, String) {
    let (sleep, marker) = crate::common::unique_sleep();
    (format!("{sleep} & echo ready > ready; wait"), marker)
}

#[tokio::test]
async fn cancellation_kills_the_group() {
    let ws = tempfile::tempdir().unwrap();
    let fifo = make_fifo(ws.path());
    let ctx = crate::common::ctx(ws.path());
    let cancel = ctx.cancel.clone();
    let (command, marker) = background_and_wait();
    let task = tokio::spawn(async move {
        ExecTool::with_env(path_env())
            .execute(&ctx, json!({"command": command}))
            .await
    });
    wait_ready(fifo).await;
    let bg = crate::common::host_pid_by_arg(&marker);
    cancel.cancel();
    let r = task.await.unwrap();
    assert!(r.is_error);
    assert!(r.for_llm.contains("aborted"), "{}", r.for_llm);
    assert!(
        !crate::common::still_running_after(bg, 10_000),
        "background process {bg} survived the abort"
    );
}

#[tokio::test]
async fn registry_abort_drops_exec_and_still_kills_the_group() {
    let ws = tempfile::tempdir().unwrap();
    let fifo = make_fifo(ws.path());
    let ctx = crate::common::ctx(ws.path());
    let cancel = ctx.cancel.clone();
    let mut reg = ToolRegistry::new();
    reg.register(std::sync::Arc::new(ExecTool::with_env(path_env())));
    let (command, marker) = background_and_wait();
    let task =
        tokio::spawn(async move { reg.execute("bash", &ctx, json!({"command": command})).await });
    wait_ready(fifo).await;
    let bg = crate::common::host_pid_by_arg(&marker);
    cancel.cancel();
    let r = task.await.unwrap();
    assert!(r.is_error && r.for_llm.contains("aborted"), "{}", r.for_llm);
    assert!(
        !crate::common::still_running_after(bg, 10_000),
        "background process {bg} survived the abort"
    );
}

/// The sandbox ends what a command left running when its shell exits (long-lived work
/// belongs in `background: true`), so a job holding the pipe cannot hang the tool either.
#[tokio::test]
async fn a_normal_exit_ends_what_the_command_left_running() {
    let ws = tempfile::tempdir().unwrap();
    let fifo = make_fifo(ws.path());
    let ctx = crate::common::ctx(ws.path());
    let (sleep, marker) = crate::common::unique_sleep();
    // The shell holds on until the test has found the job, then ends normally.
    let command =
        format!("{sleep} & echo ready > ready; while [ ! -e go ]; do sleep 0.05; done; echo done");
    let task = tokio::spawn(async move {
        ExecTool::with_env(path_env())
            .execute(&ctx, json!({"command": command}))
            .await
    });
    wait_ready(fifo).await;
    let bg = crate::common::host_pid_by_arg(&marker);
    std::fs::write(ws.path().join("go"), "").unwrap();
    let r = task.await.unwrap();
    assert!(!r.is_error, "{}", r.for_llm);
    assert!(r.for_llm.contains("done"), "{}", r.for_llm);
    assert!(
        !crate::common::still_running_after(bg, 10_000),
        "background job {bg} outlived its command"
    );
}

#[tokio::test]
async fn bad_arguments_are_explained() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = crate::common::ctx(ws.path());
    let r = ExecTool::new().execute(&ctx, json!({})).await;
    assert!(
        r.is_error && r.for_llm.contains("\"command\""),
        "{}",
        r.for_llm
    );
    let r = ExecTool::new()
        .execute(&ctx, json!({"command": "true", "timeout": 0}))
        .await;
    assert!(r.is_error && r.for_llm.contains("timeout"), "{}", r.for_llm);
    let r = ExecTool::new()
        .execute(&ctx, json!({"command": "true", "timeout": "soon"}))
        .await;
    assert!(r.is_error && r.for_llm.contains("timeout"), "{}", r.for_llm);
}
