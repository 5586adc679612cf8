//! `ferroclaw agent chat`: one-shot (`-m`) or an interactive REPL that streams answers.

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ferroclaw_agent::{Agent, EventSink, RunError, RunOutput, RunRequest};
use ferroclaw_types::{EventKind, RunEvent};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_util::sync::CancellationToken;

use crate::cli::ChatArgs;
use crate::context::AppContext;

/// Exit code after Ctrl-C, as shells expect.
const EXIT_INTERRUPTED: u8 = 130;

pub async fn run(ctx: &AppContext, args: ChatArgs) -> anyhow::Result<ExitCode> {
    let mut agent = ctx.agent(args.agent.as_deref())?;
    if args.no_stream {
        agent.set_streaming(false);
    }
    match &args.message {
        Some(message) => one_shot(&agent, &args, message).await,
        None => repl(ctx, &agent, &args).await,
    }
}

async fn one_shot(agent: &Agent, args: &ChatArgs, message: &str) -> anyhow::Result<ExitCode> {
    // stdout carries only the final answer, so scripts can capture it.
    let printer = Arc::new(Printer::new(false, args.show_reasoning));
    match run_with_ctrl_c(agent, &args.session, args.user.as_deref(), message, printer).await {
        Ok(out) => {
            if !out.silent {
                println!("{}", out.text);
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(RunError::Aborted) => {
            eprintln!("aborted");
            Ok(ExitCode::from(EXIT_INTERRUPTED))
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

async fn repl(ctx: &AppContext, agent: &Agent, args: &ChatArgs) -> anyhow::Result<ExitCode> {
    let mut session = args.session.clone();
    let s = agent.settings();
    eprintln!(
        "ferroclaw — agent `{}` ({}/{}), session `{}`. /help for commands; Ctrl-C stops a reply, Ctrl-D exits.",
        s.id, s.provider, s.model, session
    );
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    loop {
        eprint!("\n> ");
        let _ = std::io::stderr().flush();
        let line = tokio::select! {
            line = lines.next_line() => line?,
            _ = tokio::signal::ctrl_c() => None,
        };
        let Some(line) = line else {
            eprintln!();
            return Ok(ExitCode::SUCCESS);
        };
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        match text {
            "/exit" | "/quit" => return Ok(ExitCode::SUCCESS),
            "/help" => {
                eprintln!("/new            start a fresh session\n/session KEY    switch to session KEY\n/compact        summarise older history now\n/integrity      last transcript scan; `/integrity scan` runs one\n/exit           quit");
                continue;
            }
            "/integrity" => {
                match ferroclaw_store::last_status(&ctx.loaded.home) {
                    Some(st) => eprintln!(
                        "last scan {}: {} sessions, {} issues, {} repaired, {} unreadable ({} ms)",
                        st.timestamp, st.sessions, st.issues, st.repaired, st.errors, st.elapsed_ms
                    ),
                    None => eprintln!("no integrity scan has run yet; `/integrity scan` runs one"),
                }
                continue;
            }
            "/integrity scan" => {
                let home = ctx.loaded.home.clone();
                let opts = ferroclaw_store::ScanOptions {
                    repair: true,
                    strategy: ferroclaw_agent::bootstrap::integrity_strategy(&ctx.settings.store),
                    agent: None,
                };
                match tokio::task::spawn_blocking(move || ferroclaw_store::scan_home(&home, &opts))
                    .await
                {
                    Ok(Ok(summary)) => eprintln!("{summary}"),
                    Ok(Err(e)) => eprintln!("error: {e}"),
                    Err(e) => eprintln!("error: scan task failed: {e}"),
                }
                continue;
            }
            "/compact" => {
                // Compaction names the session as the store knows it.
                let stored = ferroclaw_agent::user_scope::stored_key(
                    agent.settings().per_user_workspace,
                    args.user.as_deref(),
                    &session,
                );
                match agent
                    .compact_session(&stored, CancellationToken::new())
                    .await
                {
                    Ok(Some((before, after))) => {
                        eprintln!("compacted: about {before} -> {after} tokens")
                    }
                    Ok(None) => eprintln!("nothing old enough to compact yet"),
                    Err(e) => eprintln!("error: {e}"),
                }
                continue;
            }
            "/new" => {
                session = format!("cli-{}", uuid_like());
                eprintln!("new session `{session}`");
                continue;
            }
            _ => {}
        }
        if let Some(key) = text.strip_prefix("/session ") {
            session = key.trim().to_string();
            eprintln!("session `{session}`");
            continue;
        }

        let printer = Arc::new(Printer::new(agent.settings().stream, args.show_reasoning));
        let result =
            run_with_ctrl_c(agent, &session, args.user.as_deref(), text, printer.clone()).await;
        if printer.streamed_text() {
            println!();
        }
        match result {
            Ok(out) if !printer.streamed_text() && !out.silent => println!("{}", out.text),
            Ok(_) => {}
            Err(RunError::Aborted) => eprintln!("[aborted]"),
            Err(e) => eprintln!("error: {e}"),
        }
    }
}

/// Runs one message; Ctrl-C cancels the run (which then records itself as aborted).
async fn run_with_ctrl_c(
    agent: &Agent,
    session: &str,
    user: Option<&str>,
    message: &str,
    printer: Arc<Printer>,
) -> Result<RunOutput, RunError> {
    let cancel = CancellationToken::new();
    let run = agent.run_as(
        RunRequest {
            session_key: session.to_string(),
            message: message.to_string(),
        },
        user,
        printer,
        cancel.clone(),
    );
    tokio::pin!(run);
    tokio::select! {
        res = &mut run => res,
        _ = tokio::signal::ctrl_c() => {
            cancel.cancel();
            run.await
        }
    }
}

fn uuid_like() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    format!("{ms:x}")
}

/// Shows a run as it happens: answer text on stdout, tool activity on stderr.
struct Printer {
    stream_text: bool,
    show_reasoning: bool,
    streamed: AtomicBool,
}

impl Printer {
    fn new(stream_text: bool, show_reasoning: bool) -> Self {
        Self {
            stream_text,
            show_reasoning,
            streamed: AtomicBool::new(false),
        }
    }

    fn streamed_text(&self) -> bool {
        self.streamed.load(Ordering::Relaxed)
    }
}

impl EventSink for Printer {
    fn emit(&self, event: RunEvent) {
        match event.kind {
            EventKind::AssistantDelta { text } if self.stream_text => {
                self.streamed.store(true, Ordering::Relaxed);
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(text.as_bytes());
                let _ = out.flush();
            }
            EventKind::ReasoningDelta { text } if self.show_reasoning => {
                eprint!("{text}");
            }
            EventKind::ToolStart {
                name, arguments, ..
            } => {
                let mut args = arguments.to_string();
                if args.len() > 120 {
                    let cut = (0..=117)
                        .rev()
                        .find(|i| args.is_char_boundary(*i))
                        .unwrap_or(0);
                    args.truncate(cut);
                    args.push_str("...");
                }
                eprintln!("\n  -> {name} {args}");
            }
            EventKind::ToolResult {
                name,
                is_error,
                duration_ms,
                ..
            } => {
                let mark = if is_error { "failed" } else { "ok" };
                eprintln!("  <- {name} {mark} ({duration_ms} ms)");
            }
            _ => {}
        }
    }
}
