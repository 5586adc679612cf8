//! `apply_patch`: both formats, all-or-nothing on failure, workspace confinement.

use std::path::Path;

use ferroclaw_tools::builtin::apply_patch::ApplyPatchTool;
use ferroclaw_tools::{Tool, ToolResult};
use serde_json::json;

async fn apply(ws: &Path, patch: &str) -> ToolResult {
    ApplyPatchTool
        .execute(&crate::web_support::ctx(ws), json!({ "patch": patch }))
        .await
}

fn read(ws: &Path, p: &str) -> String {
    std::fs::read_to_string(ws.join(p)).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn setup() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("src")).unwrap();
    std::fs::write(
        ws.path().join("src/main.rs"),
        "fn main() {\n    println!(\"hello\");\n}\n\nfn helper() -> u32 {\n    1\n}\n",
    )
    .unwrap();
    std::fs::write(ws.path().join("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();
    std::fs::write(ws.path().join("old.txt"), "to be removed\n").unwrap();
    ws
}

/// Every file's content, to prove a failed patch changed nothing.
fn snapshot(ws: &Path) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = walkdir::WalkDir::new(ws)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            (
                e.path().strip_prefix(ws).unwrap().display().to_string(),
                std::fs::read_to_string(e.path()).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn unified_diff_updates_adds_and_deletes() {
    let ws = setup();
    let patch = "\
diff --git a/src/main.rs b/src/main.rs
--- a/src/main.rs
+++ b/src/main.rs
@@ -1,3 +1,3 @@
 fn main() {
-    println!(\"hello\");
+    println!(\"hello, world\");
 }
@@ -5,3 +5,4 @@
 fn helper() -> u32 {
-    1
+    // the answer
+    42
 }
--- /dev/null
+++ b/docs/new.md
@@ -0,0 +1,2 @@
+# New
+content
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-to be removed
";
    let r = apply(ws.path(), patch).await;
    assert!(!r.is_error, "{}", r.for_llm);
    assert!(
        r.for_llm.contains("M src/main.rs (2 hunks)"),
        "{}",
        r.for_llm
    );
    assert_eq!(
        read(ws.path(), "src/main.rs"),
        "fn main() {\n    println!(\"hello, world\");\n}\n\nfn helper() -> u32 {\n    // the answer\n    42\n}\n"
    );
    assert_eq!(read(ws.path(), "docs/new.md"), "# New\ncontent\n");
    assert!(!ws.path().join("old.txt").exists());
}

#[tokio::test]
async fn unified_diff_with_shifted_lines_and_trailing_whitespace_fuzz() {
    let ws = setup();
    // Line numbers are off by two and the context line lost its trailing space: the hunk
    // is found by content near the stated line, and trailing whitespace is tolerated.
    std::fs::write(ws.path().join("notes.txt"), "x\ny\nalpha \nbeta\ngamma\n").unwrap();
    let patch = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,3 +1,3 @@\n alpha\n-beta\n+BETA\n gamma\n";
    let r = apply(ws.path(), patch).await;
    assert!(!r.is_error, "{}", r.for_llm);
    assert_eq!(read(ws.path(), "notes.txt"), "x\ny\nalpha \nBETA\ngamma\n");
}

#[tokio::test]
async fn openai_format_add_update_move_delete() {
    let ws = setup();
    let patch = "\
*** Begin Patch
*** Add File: src/lib.rs
+pub fn add(a: u32, b: u32) -> u32 {
+    a + b
+}
*** Update File: src/main.rs
@@ fn helper() -> u32 {
-    1
+    2
*** Update File: notes.txt
*** Move to: renamed/notes.md
@@
 alpha
-beta
+BETA
 gamma
*** End of File
*** Delete File: old.txt
*** End Patch";
    let r = apply(ws.path(), patch).await;
    assert!(!r.is_error, "{}", r.for_llm);
    assert_eq!(
        read(ws.path(), "src/lib.rs"),
        "pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n"
    );
    assert!(read(ws.path(), "src/main.rs").contains("fn helper() -> u32 {\n    2\n}"));
    assert_eq!(read(ws.path(), "renamed/notes.md"), "alpha\nBETA\ngamma\n");
    assert!(!ws.path().join("notes.txt").exists());
    assert!(!ws.path().join("old.txt").exists());
    assert!(
        r.for_llm.contains("R notes.txt -> renamed/notes.md"),
        "{}",
        r.for_llm
    );
}

#[tokio::test]
async fn a_failing_hunk_changes_nothing() {
    // Each patch has valid changes first and one change that cannot apply last.
    let cases: &[(&str, &str)] = &[
        (
            "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,3 +1,3 @@\n alpha\n-beta\n+BETA\n gamma\n--- a/src/main.rs\n+++ b/src/main.rs\n@@ -1,3 +1,3 @@\n fn main() {\n-    println!(\"goodbye\");\n+    println!(\"x\");\n }\n",
            "src/main.rs: hunk 1 (@@ -1,3 +1,3 @@) did not apply",
        ),
        (
            "*** Begin Patch\n*** Add File: fresh.txt\n+new\n*** Update File: notes.txt\n@@\n-alpha\n+ALPHA\n*** Update File: src/main.rs\n@@ fn nonexistent()\n-    1\n+    2\n*** End Patch",
            "src/main.rs: hunk 1 (@@ fn nonexistent()) did not apply: the context line \"fn nonexistent()\" was not found",
        ),
        (
            "*** Begin Patch\n*** Update File: notes.txt\n@@\n-alpha\n+ALPHA\n*** Delete File: nope.txt\n*** End Patch",
            "nope.txt: cannot delete, the file does not exist",
        ),
        (
            "*** Begin Patch\n*** Update File: notes.txt\n@@\n-alpha\n+ALPHA\n*** Add File: src/main.rs\n+dup\n*** End Patch",
            "src/main.rs: cannot add, the file already exists",
        ),
        (
            "*** Begin Patch\n*** Update File: notes.txt\n@@\n-alpha\n+ALPHA\n*** Update File: missing.rs\n@@\n-a\n+b\n*** End Patch",
            "missing.rs: cannot update, the file does not exist",
        ),
        (
            "*** Begin Patch\n*** Update File: notes.txt\n@@\n-alpha\n+ALPHA\n*** Update File: src/main.rs\n@@\n-    1\n+    2\n-}\n-}\n*** End Patch",
            "src/main.rs: hunk 1 did not apply",
        ),
        (
            "*** Begin Patch\n*** Update File: notes.txt\n@@\n-alpha\n+ALPHA\n",
            "missing *** End Patch",
        ),
        ("just some text", "no file changes found"),
        (
            "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,3 +1,3 @@\n alpha\n-beta\n",
            "ends early",
        ),
    ];
    for (patch, expected) in cases {
        let ws = setup();
        let before = snapshot(ws.path());
        let r = apply(ws.path(), patch).await;
        assert!(r.is_error, "{patch}: {}", r.for_llm);
        assert!(r.for_llm.contains("no file was changed"), "{}", r.for_llm);
        assert!(
            r.for_llm.contains(expected),
            "expected {expected:?} in {}",
            r.for_llm
        );
        assert_eq!(snapshot(ws.path()), before, "{patch}");
    }
}

#[tokio::test]
async fn paths_outside_the_workspace_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("victim.txt"), "safe\n").unwrap();
    let victim = outside.path().join("victim.txt").display().to_string();
    let ws = setup();
    std::os::unix::fs::symlink(outside.path(), ws.path().join("link")).unwrap();
    let patches = [
        "*** Begin Patch\n*** Add File: ../escape.txt\n+x\n*** End Patch".to_string(),
        format!("*** Begin Patch\n*** Update File: {victim}\n@@\n-safe\n+owned\n*** End Patch"),
        format!("*** Begin Patch\n*** Delete File: {victim}\n*** End Patch"),
        "*** Begin Patch\n*** Update File: link/victim.txt\n@@\n-safe\n+owned\n*** End Patch".to_string(),
        "*** Begin Patch\n*** Update File: notes.txt\n*** Move to: ../../moved.txt\n@@\n-alpha\n+a\n*** End Patch".to_string(),
        "--- a/../../etc/passwd\n+++ b/../../etc/passwd\n@@ -1 +1 @@\n-root\n+evil\n".to_string(),
        "--- /dev/null\n+++ b/link/new.txt\n@@ -0,0 +1 @@\n+x\n".to_string(),
    ];
    for p in &patches {
        let before = snapshot(ws.path());
        let r = apply(ws.path(), p).await;
        assert!(r.is_error, "{p}: {}", r.for_llm);
        assert!(
            r.for_llm.contains("outside the workspace"),
            "{p}: {}",
            r.for_llm
        );
        assert_eq!(snapshot(ws.path()), before);
    }
    assert_eq!(
        std::fs::read_to_string(outside.path().join("victim.txt")).unwrap(),
        "safe\n"
    );
    assert!(!outside.path().join("new.txt").exists());
}

#[tokio::test]
async fn no_newline_at_end_of_file() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\ntwo").unwrap();
    let patch = "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n\\ No newline at end of file\n+TWO\n\\ No newline at end of file\n";
    let r = apply(ws.path(), patch).await;
    assert!(!r.is_error, "{}", r.for_llm);
    assert_eq!(read(ws.path(), "a.txt"), "one\nTWO");
}

#[tokio::test]
async fn adding_a_final_newline() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\ntwo").unwrap();
    let patch = "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n\\ No newline at end of file\n+two\n";
    let r = apply(ws.path(), patch).await;
    assert!(!r.is_error, "{}", r.for_llm);
    assert_eq!(read(ws.path(), "a.txt"), "one\ntwo\n");
}

/// The model sends a patch; the file changes and the summary reaches its next request.
#[tokio::test]
async fn apply_patch_through_the_agent_loop() {
    let llm = ferroclaw_testkit::ScriptedLlm::start().await.expect("llm");
    let ws = setup();
    let home = tempfile::tempdir().unwrap();
    let agent = crate::web_support::agent_with(
        vec![std::sync::Arc::new(ApplyPatchTool)],
        &llm,
        ws.path(),
        home.path(),
    );
    let patch =
        "*** Begin Patch\n*** Update File: notes.txt\n@@\n alpha\n-beta\n+BETA\n*** End Patch";
    llm.push(ferroclaw_testkit::Reply::tool_call(
        "p1",
        "apply_patch",
        json!({"patch": patch}),
    ));
    llm.push(ferroclaw_testkit::Reply::text("patched"));
    assert_eq!(
        crate::web_support::run_turn(&agent, "fix it").await,
        "patched"
    );
    assert_eq!(read(ws.path(), "notes.txt"), "alpha\nBETA\ngamma\n");
    let result = crate::web_support::tool_result_in(&llm.requests()[1].body, "p1");
    assert!(result.contains("M notes.txt (1 hunk)"), "{result}");
}

/// Errors name files as the model named them, never by their host path.
#[tokio::test]
async fn errors_show_workspace_relative_paths() {
    let ws = setup();
    let host = std::fs::canonicalize(ws.path())
        .unwrap()
        .display()
        .to_string();
    std::fs::write(ws.path().join("binary.bin"), [0xff, 0xfe, 0x00]).unwrap();
    let cases = [
        (
            "*** Begin Patch\n*** Update File: src\n@@\n-x\n+y\n*** End Patch",
            "src is a directory",
        ),
        (
            "*** Begin Patch\n*** Update File: binary.bin\n@@\n-x\n+y\n*** End Patch",
            "binary.bin is not UTF-8 text",
        ),
    ];
    for (patch, expected) in cases {
        let r = apply(ws.path(), patch).await;
        assert!(r.is_error, "{patch}: {}", r.for_llm);
        assert!(r.for_llm.contains(expected), "{patch}: {}", r.for_llm);
        assert!(!r.for_llm.contains(&host), "host path in {}", r.for_llm);
    }
}
