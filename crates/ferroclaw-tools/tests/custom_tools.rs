//! Custom tools from config: templates with shell-escaped arguments, the exec guard, and
//! exec's time-out, workdir confinement and secret-free environment.

use std::ffi::OsString;
use std::sync::Arc;

use ferroclaw_tools::custom_tool::{CustomTool, CustomToolError, CustomToolSpec};
use ferroclaw_tools::exec_guard::ExecGuard;
use ferroclaw_tools::{Tool, ToolRegistry};
use serde_json::{json, Value};

fn env() -> Vec<(OsString, OsString)> {
    vec![(
        "PATH".into(),
        std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
    )]
}

fn spec(name: &str, command: &str, params: Value) -> CustomToolSpec {
    CustomToolSpec {
        name: name.into(),
        description: format!("test tool {name}"),
        parameters: params,
        command: command.into(),
        timeout_seconds: 60,
        workdir: None,
    }
}

fn tool(s: CustomToolSpec) -> CustomTool {
    CustomTool::new(s, Arc::new(ExecGuard::default()))
        .expect("valid spec")
        .with_env(env())
}

fn one_string(key: &str) -> Value {
    json!({"type": "object", "properties": {key: {"type": "string"}}, "required": [key]})
}

#[tokio::test]
async fn arguments_arrive_as_literal_strings() {
    let ws = tempfile::tempdir().unwrap();
    let t = tool(spec("say", "printf '[%s]\\n' {{.msg}}", one_string("msg")));
    for hostile in [
        "'; rm -rf / #",
        "$(touch pwned)",
        "`touch pwned`",
        "a\" ; touch pwned ; echo \"",
        "x' && touch pwned && echo 'y",
        "; sudo reboot",
        "line1\nline2",
    ] {
        let r = t
            .execute(&crate::common::ctx(ws.path()), json!({"msg": hostile}))
            .await;
        assert!(!r.is_error, "{hostile:?}: {}", r.for_llm);
        assert_eq!(r.for_llm, format!("[{hostile}]\n\n[exit code: 0]"));
    }
    assert!(!ws.path().join("pwned").exists());
}

#[tokio::test]
async fn rendered_command_goes_through_the_deny_patterns() {
    let ws = tempfile::tempdir().unwrap();
    let rm = tool(spec("clean", "rm -rf {{.path}}", one_string("path")));
    let r = rm
        .execute(&crate::common::ctx(ws.path()), json!({"path": "/"}))
        .await;
    assert!(r.is_error, "{}", r.for_llm);
    assert!(
        r.for_llm.contains("clean:") && r.for_llm.contains("destructive"),
        "{}",
        r.for_llm
    );
    assert!(r.for_llm.contains("not run"), "{}", r.for_llm);
    // The same tool with a harmless argument works.
    std::fs::create_dir(ws.path().join("build")).unwrap();
    let r = rm
        .execute(&crate::common::ctx(ws.path()), json!({"path": "build"}))
        .await;
    assert!(!r.is_error, "{}", r.for_llm);
    assert!(!ws.path().join("build").exists());

    let cat = tool(spec("show", "cat {{.file}}", one_string("file")));
    let r = cat
        .execute(
            &crate::common::ctx(ws.path()),
            json!({"file": "/etc/shadow"}),
        )
        .await;
    assert!(
        r.is_error && r.for_llm.contains("exfiltration"),
        "{}",
        r.for_llm
    );
    // A template that is itself dangerous is refused whatever the arguments.
    let bad = tool(spec("boom", "sudo echo {{.x}}", one_string("x")));
    let r = bad
        .execute(&crate::common::ctx(ws.path()), json!({"x": "hi"}))
        .await;
    assert!(
        r.is_error && r.for_llm.contains("privilege_escalation"),
        "{}",
        r.for_llm
    );
}

#[tokio::test]
async fn missing_required_arguments_are_explained() {
    let ws = tempfile::tempdir().unwrap();
    let t = tool(spec(
        "greet",
        "echo {{.name}} {{.suffix}}",
        json!({"type": "object", "properties": {"name": {"type": "string"}, "suffix": {"type": "string"}}, "required": ["name"]}),
    ));
    let r = t.execute(&crate::common::ctx(ws.path()), json!({})).await;
    assert!(
        r.is_error && r.for_llm.contains("missing required argument \"name\""),
        "{}",
        r.for_llm
    );
    // Optional ones become an empty word; numbers and booleans their JSON text.
    let r = t
        .execute(&crate::common::ctx(ws.path()), json!({"name": 42}))
        .await;
    assert_eq!(r.for_llm, "42 \n\n[exit code: 0]");
}

#[tokio::test]
async fn timeout_workdir_and_environment_follow_exec() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    let canon = std::fs::canonicalize(ws.path()).unwrap();

    let mut s = spec("slow", "sleep {{.secs}}", one_string("secs"));
    s.timeout_seconds = 1;
    let r = tool(s)
        .execute(&crate::common::ctx(ws.path()), json!({"secs": "30"}))
        .await;
    assert!(
        r.is_error && r.for_llm.contains("timed out after 1 s"),
        "{}",
        r.for_llm
    );

    let mut s = spec(
        "where",
        "pwd -P",
        json!({"type": "object", "properties": {}}),
    );
    s.workdir = Some("sub".into());
    let r = tool(s)
        .execute(&crate::common::ctx(ws.path()), json!({}))
        .await;
    assert_eq!(
        r.for_llm,
        format!("{}\n\n[exit code: 0]", canon.join("sub").display())
    );

    let mut s = spec("escape", "pwd", json!({"type": "object", "properties": {}}));
    s.workdir = Some("../..".into());
    let r = tool(s)
        .execute(&crate::common::ctx(ws.path()), json!({}))
        .await;
    assert!(
        r.is_error && r.for_llm.contains("outside the workspace"),
        "{}",
        r.for_llm
    );

    let mut vars = env();
    vars.push(("MY_API_KEY".into(), "sk-hidden".into()));
    vars.push(("PLAIN".into(), "visible".into()));
    let t = CustomTool::new(
        spec(
            "showenv",
            "env",
            json!({"type": "object", "properties": {}}),
        ),
        Arc::new(ExecGuard::default()),
    )
    .unwrap()
    .with_env(vars);
    let r = t.execute(&crate::common::ctx(ws.path()), json!({})).await;
    assert!(r.for_llm.contains("PLAIN=visible"), "{}", r.for_llm);
    assert!(!r.for_llm.contains("sk-hidden"), "{}", r.for_llm);
}

#[tokio::test]
async fn runs_through_the_registry_under_its_name() {
    let ws = tempfile::tempdir().unwrap();
    let mut reg = ToolRegistry::new();
    reg.register(Arc::new(tool(spec(
        "shout",
        "echo {{.word}} | tr a-z A-Z",
        one_string("word"),
    ))));
    let defs = reg.definitions();
    assert_eq!(defs[0].name, "shout");
    assert_eq!(defs[0].parameters["required"], json!(["word"]));
    let r = reg
        .execute(
            "shout",
            &crate::common::ctx(ws.path()),
            json!({"word": "hello"}),
        )
        .await;
    assert_eq!(r.for_llm, "HELLO\n\n[exit code: 0]");
}

#[test]
fn invalid_specs_are_rejected() {
    let guard = Arc::new(ExecGuard::default());
    let e = CustomTool::new(
        spec("x", "echo {{.nope}}", one_string("msg")),
        guard.clone(),
    )
    .unwrap_err();
    assert!(
        matches!(e, CustomToolError::UndeclaredPlaceholder { .. }),
        "{e}"
    );
    let e = CustomTool::new(spec("bad name!", "echo", json!({})), guard.clone()).unwrap_err();
    assert!(matches!(e, CustomToolError::BadName(_)), "{e}");
    let e = CustomTool::new(spec("x", "echo", json!([1])), guard).unwrap_err();
    assert!(matches!(e, CustomToolError::BadSchema { .. }), "{e}");
}

#[tokio::test]
async fn toolset_from_settings() {
    use ferroclaw_config::settings::{CustomToolSettings, ExecMode, ExecSettings};
    use ferroclaw_tools::exec_setup::ExecToolset;
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("data")).unwrap();
    std::fs::write(
        home.path().join("data/exec-allowlist.json"),
        r#"{"version":1,"entries":["printf"]}"#,
    )
    .unwrap();
    let hello = CustomToolSettings {
        name: "hello".into(),
        description: "greets".into(),
        parameters: json!({"type": "object", "properties": {"who": {"type": "string"}}}),
        command: "echo hello {{.who}}".into(),
        timeout: std::time::Duration::from_secs(60),
        workdir: None,
    };
    let cfg = ExecSettings {
        mode: ExecMode::Allowlist,
        allowlist: vec!["echo".into()],
        custom: vec![hello.clone()],
        ..ExecSettings::default()
    };
    let set = ExecToolset::new(&cfg, home.path()).unwrap();
    let names: Vec<String> = set.tools().iter().map(|t| t.name().to_string()).collect();
    assert_eq!(names, ["exec", "process", "hello"]);
    let ctx = crate::common::ctx(ws.path());
    let r = set.custom[0].execute(&ctx, json!({"who": "you"})).await;
    assert_eq!(r.for_llm, "hello you\n\n[exit code: 0]");
    // The persisted allowlist counts: printf runs, ls does not (allowlist mode).
    let r = set
        .exec
        .execute(&ctx, json!({"command": "printf ok"}))
        .await;
    assert_eq!(r.for_llm, "ok\n[exit code: 0]");
    let r = set.exec.execute(&ctx, json!({"command": "ls"})).await;
    assert!(
        r.is_error && r.for_llm.contains("not_allowlisted"),
        "{}",
        r.for_llm
    );

    let dup = ExecSettings {
        custom: vec![CustomToolSettings {
            name: "exec".into(),
            command: "echo".into(),
            ..hello
        }],
        ..ExecSettings::default()
    };
    assert!(ExecToolset::new(&dup, home.path()).is_err());
    // Settings built by hand get the refusal loading gives a credential in `env`.
    let mut leaky = ExecSettings::default();
    leaky
        .sandbox
        .env
        .push(("GH_TOKEN".into(), "ghp_secret".into()));
    let e = ExecToolset::new(&leaky, home.path()).unwrap_err();
    assert!(e.to_string().contains("GH_TOKEN"), "{e}");
}
