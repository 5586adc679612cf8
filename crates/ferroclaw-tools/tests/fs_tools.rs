//! The filesystem and search tools against real files in temporary workspaces.

use std::os::unix::fs::symlink;

use ferroclaw_tools::builtin::{EditTool, GlobTool, GrepTool, LsTool, ReadTool, WriteTool};
use ferroclaw_tools::{Tool, ToolResult};
use serde_json::{json, Value};

async fn run(tool: &dyn Tool, ws: &std::path::Path, args: Value) -> ToolResult {
    tool.execute(&crate::common::ctx(ws), args).await
}

fn numbered(n: usize) -> String {
    (1..=n).map(|i| format!("line{i}\n")).collect()
}

// ---------- read ----------

#[tokio::test]
async fn read_offset_and_limit() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("f.txt"), numbered(10)).unwrap();
    let r = run(
        &ReadTool,
        ws.path(),
        json!({"path": "f.txt", "offset": 3, "limit": 2}),
    )
    .await;
    assert!(!r.is_error, "{}", r.for_llm);
    assert!(r.for_llm.starts_with("line3\nline4\n"), "{}", r.for_llm);
    assert!(!r.for_llm.contains("line5"));
    assert!(r.for_llm.contains("lines 3-4 of 10"), "{}", r.for_llm);
    assert!(r.for_llm.contains("offset=5"), "{}", r.for_llm);

    let all = run(&ReadTool, ws.path(), json!({"path": "f.txt"})).await;
    assert_eq!(all.for_llm, numbered(10).trim_end());
}

#[tokio::test]
async fn read_caps_lines_and_chars() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("long.txt"), numbered(2500)).unwrap();
    let r = run(&ReadTool, ws.path(), json!({"path": "long.txt"})).await;
    assert!(!r.is_error);
    assert!(r.for_llm.contains("line2000\n"));
    assert!(!r.for_llm.contains("line2001\n"));
    assert!(
        r.for_llm.contains("lines 1-2000 of 2500"),
        "{}",
        &r.for_llm[r.for_llm.len() - 200..]
    );
    assert!(r.for_llm.contains("offset=2001"));

    let wide: String = (0..100)
        .map(|_| format!("{}\n", "x".repeat(1000)))
        .collect();
    std::fs::write(ws.path().join("wide.txt"), wide).unwrap();
    let r = run(&ReadTool, ws.path(), json!({"path": "wide.txt"})).await;
    // 49 lines of 1000 chars plus separators fit in 50,000 characters; 50 do not.
    assert!(
        r.for_llm.contains("lines 1-49 of 100"),
        "{}",
        &r.for_llm[r.for_llm.len() - 200..]
    );
    assert!(r.for_llm.contains("offset=50"));
}

#[tokio::test]
async fn read_refuses_binary_directories_missing_and_far_offsets() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("bin"), [0u8, 1, 2, 3, 0, 255]).unwrap();
    std::fs::create_dir(ws.path().join("dir")).unwrap();
    std::fs::write(ws.path().join("short.txt"), "a\nb\n").unwrap();

    let r = run(&ReadTool, ws.path(), json!({"path": "bin"})).await;
    assert!(r.is_error && r.for_llm.contains("binary"), "{}", r.for_llm);
    let r = run(&ReadTool, ws.path(), json!({"path": "dir"})).await;
    assert!(r.is_error && r.for_llm.contains("ls"), "{}", r.for_llm);
    let r = run(&ReadTool, ws.path(), json!({"path": "nope.txt"})).await;
    assert!(
        r.is_error && r.for_llm.contains("not found: nope.txt"),
        "{}",
        r.for_llm
    );
    let r = run(
        &ReadTool,
        ws.path(),
        json!({"path": "short.txt", "offset": 9}),
    )
    .await;
    assert!(r.is_error && r.for_llm.contains("2 lines"), "{}", r.for_llm);
    let r = run(&ReadTool, ws.path(), json!({"path": "../etc/passwd"})).await;
    assert!(
        r.is_error && r.for_llm.contains("outside the workspace"),
        "{}",
        r.for_llm
    );
    let r = run(&ReadTool, ws.path(), json!({})).await;
    assert!(
        r.is_error && r.for_llm.contains("\"path\""),
        "{}",
        r.for_llm
    );
}

// ---------- write ----------

#[tokio::test]
async fn write_then_read_creates_parents() {
    let ws = tempfile::tempdir().unwrap();
    let w = run(
        &WriteTool,
        ws.path(),
        json!({"path": "a/b/c.txt", "content": "héllo\nworld"}),
    )
    .await;
    assert!(!w.is_error, "{}", w.for_llm);
    assert!(w.for_llm.contains("12 bytes"), "{}", w.for_llm);
    assert!(w.for_llm.contains("a/b/c.txt"), "{}", w.for_llm);
    let r = run(&ReadTool, ws.path(), json!({"path": "a/b/c.txt"})).await;
    assert_eq!(r.for_llm, "héllo\nworld");
}

#[tokio::test]
async fn write_through_symlink_escape_is_refused() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    symlink(outside.path(), ws.path().join("out")).unwrap();
    symlink(
        outside.path().join("created.txt"),
        ws.path().join("dangling"),
    )
    .unwrap();

    let r = run(
        &WriteTool,
        ws.path(),
        json!({"path": "out/x.txt", "content": "x"}),
    )
    .await;
    assert!(
        r.is_error && r.for_llm.contains("outside the workspace"),
        "{}",
        r.for_llm
    );
    let r = run(
        &WriteTool,
        ws.path(),
        json!({"path": "dangling", "content": "x"}),
    )
    .await;
    assert!(
        r.is_error && r.for_llm.contains("outside the workspace"),
        "{}",
        r.for_llm
    );
    let abs = outside.path().join("abs.txt").display().to_string();
    let r = run(&WriteTool, ws.path(), json!({"path": abs, "content": "x"})).await;
    assert!(
        r.is_error && r.for_llm.contains("outside the workspace"),
        "{}",
        r.for_llm
    );

    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        0,
        "nothing may be written outside"
    );
}

// ---------- edit ----------

#[tokio::test]
async fn edit_exactly_one_match() {
    let ws = tempfile::tempdir().unwrap();
    let f = ws.path().join("f.rs");
    std::fs::write(&f, "fn a() {}\nfn b() {}\n").unwrap();
    let r = run(
        &EditTool,
        ws.path(),
        json!({"path": "f.rs", "oldText": "fn b() {}", "newText": "fn c() {}"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.for_llm);
    assert!(r.for_llm.contains("line 2"), "{}", r.for_llm);
    assert_eq!(
        std::fs::read_to_string(&f).unwrap(),
        "fn a() {}\nfn c() {}\n"
    );
    // Other spellings of the arguments, and the alias-friendly snake case.
    let r = run(
        &EditTool,
        ws.path(),
        json!({"path": "f.rs", "old_string": "fn a", "new_string": "fn z"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.for_llm);
    let r = run(
        &EditTool,
        ws.path(),
        json!({"path": "f.rs", "old_text": "fn z", "new_text": "fn y"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.for_llm);
    assert_eq!(
        std::fs::read_to_string(&f).unwrap(),
        "fn y() {}\nfn c() {}\n"
    );
    // The atomic write leaves no temporary file behind.
    let names: Vec<_> = std::fs::read_dir(ws.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("f.rs")]);
}

#[tokio::test]
async fn edit_zero_or_several_matches_leaves_file_unchanged() {
    let ws = tempfile::tempdir().unwrap();
    let f = ws.path().join("f.txt");
    let original = "x = 1\ny = 2\nx = 1\nz\nx = 1\n";
    std::fs::write(&f, original).unwrap();

    let r = run(
        &EditTool,
        ws.path(),
        json!({"path": "f.txt", "oldText": "nope", "newText": "n"}),
    )
    .await;
    assert!(r.is_error);
    assert_eq!(r.for_llm, "oldText not found in f.txt");

    let r = run(
        &EditTool,
        ws.path(),
        json!({"path": "f.txt", "oldText": "x = 1", "newText": "x = 9"}),
    )
    .await;
    assert!(r.is_error);
    assert!(r.for_llm.contains("3 times"), "{}", r.for_llm);
    assert!(r.for_llm.contains("lines 1, 3, 5"), "{}", r.for_llm);

    let r = run(
        &EditTool,
        ws.path(),
        json!({"path": "missing.txt", "oldText": "a", "newText": "b"}),
    )
    .await;
    assert!(
        r.is_error && r.for_llm.contains("not found: missing.txt"),
        "{}",
        r.for_llm
    );

    assert_eq!(std::fs::read_to_string(&f).unwrap(), original);
}

// ---------- ls ----------

#[tokio::test]
async fn ls_sorts_marks_dirs_and_caps() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("b.txt"), "").unwrap();
    std::fs::write(ws.path().join("a.txt"), "").unwrap();
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    let r = run(&LsTool, ws.path(), json!({})).await;
    assert_eq!(r.for_llm, "a.txt\nb.txt\nsub/");

    for i in 0..600 {
        std::fs::write(ws.path().join(format!("sub/f{i:04}")), "").unwrap();
    }
    let r = run(&LsTool, ws.path(), json!({"path": "sub"})).await;
    assert!(r.for_llm.starts_with("f0000\nf0001\n"));
    assert!(r.for_llm.contains("f0499\n"));
    assert!(!r.for_llm.contains("f0500"));
    assert!(
        r.for_llm.contains("500 of 600"),
        "{}",
        &r.for_llm[r.for_llm.len() - 150..]
    );

    let r = run(&LsTool, ws.path(), json!({"path": "a.txt"})).await;
    assert!(
        r.is_error && r.for_llm.contains("not a directory"),
        "{}",
        r.for_llm
    );
    let r = run(&LsTool, ws.path(), json!({"path": ".."})).await;
    assert!(
        r.is_error && r.for_llm.contains("outside the workspace"),
        "{}",
        r.for_llm
    );
}

// ---------- glob ----------

#[tokio::test]
async fn glob_matches_skips_and_stays_inside() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("evil.rs"), "").unwrap();
    for p in [
        "src/main.rs",
        "src/lib/mod.rs",
        "README.md",
        "target/debug/x.rs",
        ".git/hooks/h.rs",
        "node_modules/m/i.rs",
    ] {
        let p = ws.path().join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "").unwrap();
    }
    symlink(outside.path(), ws.path().join("link")).unwrap();

    let r = run(&GlobTool, ws.path(), json!({"pattern": "**/*.rs"})).await;
    assert_eq!(r.for_llm, "src/lib/mod.rs\nsrc/main.rs");
    // No '/' in the pattern: matched against file names at any depth.
    let r = run(&GlobTool, ws.path(), json!({"pattern": "*.rs"})).await;
    assert_eq!(r.for_llm, "src/lib/mod.rs\nsrc/main.rs");
    let r = run(
        &GlobTool,
        ws.path(),
        json!({"pattern": "*.rs", "path": "src/lib"}),
    )
    .await;
    assert_eq!(r.for_llm, "src/lib/mod.rs");
    let r = run(&GlobTool, ws.path(), json!({"pattern": "*.py"})).await;
    assert!(
        !r.is_error && r.for_llm.contains("No files"),
        "{}",
        r.for_llm
    );
    let r = run(&GlobTool, ws.path(), json!({"pattern": "../*"})).await;
    assert!(r.is_error, "{}", r.for_llm);
    let r = run(
        &GlobTool,
        ws.path(),
        json!({"pattern": "*", "path": "link"}),
    )
    .await;
    assert!(
        r.is_error && r.for_llm.contains("outside the workspace"),
        "{}",
        r.for_llm
    );
}

#[tokio::test]
async fn glob_caps_results() {
    let ws = tempfile::tempdir().unwrap();
    for i in 0..1100 {
        std::fs::write(ws.path().join(format!("f{i:04}.txt")), "").unwrap();
    }
    let r = run(&GlobTool, ws.path(), json!({"pattern": "*.txt"})).await;
    assert_eq!(
        r.for_llm.lines().filter(|l| l.ends_with(".txt")).count(),
        1000
    );
    assert!(
        r.for_llm.contains("1000 of 1100"),
        "{}",
        &r.for_llm[r.for_llm.len() - 150..]
    );
}

// ---------- grep ----------

#[tokio::test]
async fn grep_finds_lines_and_respects_options() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("src")).unwrap();
    std::fs::write(ws.path().join("a.txt"), "zero\nHello world\nbye\n").unwrap();
    std::fs::write(ws.path().join("src/b.rs"), "// hello from rust\n").unwrap();
    std::fs::write(ws.path().join("bin.dat"), b"hello\0binary").unwrap();

    let r = run(&GrepTool, ws.path(), json!({"pattern": "hello"})).await;
    assert_eq!(r.for_llm, "src/b.rs:1: // hello from rust");
    let r = run(
        &GrepTool,
        ws.path(),
        json!({"pattern": "hello", "ignoreCase": true}),
    )
    .await;
    assert_eq!(
        r.for_llm,
        "a.txt:2: Hello world\nsrc/b.rs:1: // hello from rust"
    );
    let r = run(
        &GrepTool,
        ws.path(),
        json!({"pattern": "(?i)hello", "glob": "*.txt"}),
    )
    .await;
    assert_eq!(r.for_llm, "a.txt:2: Hello world");
    let r = run(
        &GrepTool,
        ws.path(),
        json!({"pattern": "o", "path": "a.txt"}),
    )
    .await;
    assert_eq!(r.for_llm, "a.txt:1: zero\na.txt:2: Hello world");
    let r = run(&GrepTool, ws.path(), json!({"pattern": "nothing-here"})).await;
    assert!(!r.is_error && r.for_llm.contains("No matches"));
    let r = run(&GrepTool, ws.path(), json!({"pattern": "foo("})).await;
    assert!(
        r.is_error && r.for_llm.contains("invalid regular expression"),
        "{}",
        r.for_llm
    );
}

#[tokio::test]
async fn grep_caps_matches_and_skips_huge_files() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("many.txt"), "match\n".repeat(250)).unwrap();
    let huge = "match\n".repeat((5 * 1024 * 1024) / 6 + 10);
    std::fs::write(ws.path().join("huge.log"), huge).unwrap();
    let r = run(&GrepTool, ws.path(), json!({"pattern": "match"})).await;
    assert_eq!(
        r.for_llm
            .lines()
            .filter(|l| l.starts_with("many.txt:"))
            .count(),
        200
    );
    assert!(!r.for_llm.contains("huge.log:"));
    assert!(
        r.for_llm.contains("200 of 250"),
        "{}",
        &r.for_llm[r.for_llm.len() - 200..]
    );
    assert!(
        r.for_llm.contains("Skipped 1 files larger"),
        "{}",
        &r.for_llm[r.for_llm.len() - 200..]
    );
}
