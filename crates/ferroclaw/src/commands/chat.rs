//! `ferroclaw agent chat`: one-shot (`-m`) or an interactive REPL that streams answers.

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use ferroclaw_agent::RunOutput;
use ferroclaw_runtime::{AgentEntry, Origin, QueueMode, RunFailure, Runtime, Submit, Submitted};
use ferroclaw_types::{EventKind, RunEvent};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::cli::ChatArgs;
use crate::context::AppContext;

/// Exit code after Ctrl-C, as shells expect.
const EXIT_INTERRUPTED: u8 = 130;

pub async fn run(ctx: &AppContext, args: ChatArgs) -> anyhow::Result<ExitCode> {
    let runtime = ctx.runtime()?;
    // The first message should find the MCP servers' tools there.
    if let Some(services) = runtime.services() {
        services.mcp.settle_all().await;
    }
    let id = args
        .agent
        .clone()
        .unwrap_or_else(|| ctx.loaded.default_agent_id());
    let Some(agent) = runtime.agent(&id) else {
        let reason = runtime.why_not_built(&id).unwrap_or("no such agent");
        anyhow::bail!("cannot set up agent `{id}`: {reason}");
    };
    let chat = Chat {
        runtime: &runtime,
        agent: &agent,
        args: &args,
    };
    let done = match &args.message {
        Some(message) => chat.one_shot(message).await,
        None => chat.repl(ctx).await,
    };
    // The runs' traces are written before the process ends.
    runtime.flush_traces().await;
    done
}

/// One chat session of the CLI: every message goes through the runtime's door, like a
/// gateway's, so a CLI and a gateway on one home never write a session at once.
struct Chat<'a> {
    runtime: &'a Runtime,
    agent: &'a AgentEntry,
    args: &'a ChatArgs,
}

impl Chat<'_> {
    async fn one_shot(&self, message: &str) -> anyhow::Result<ExitCode> {
        // stdout carries only the final answer, so scripts can capture it.
        let printer = Printer::new(false, self.args.show_reasoning);
        match self.send(&self.args.session, message, &printer).await {
            Ok(Some(out)) => {
                if !out.silent {
                    println!("{}", out.text);
                }
                Ok(ExitCode::SUCCESS)
            }
            Ok(None) => Ok(ExitCode::SUCCESS),
            Err(f) if f.is_aborted() => {
                eprintln!("aborted");
                Ok(ExitCode::from(EXIT_INTERRUPTED))
            }
            Err(e) => {
                eprintln!("error: {e}");
                Ok(ExitCode::FAILURE)
            }
        }
    }

    async fn repl(&self, ctx: &AppContext) -> anyhow::Result<ExitCode> {
        let (agent, args) = (&self.agent.agent, self.args);
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
                    match ctx.store.last_scan_status().await {
                        Some(st) => eprintln!(
                        "last scan {}: {} sessions, {} issues, {} repaired, {} unreadable ({} ms)",
                        st.timestamp, st.sessions, st.issues, st.repaired, st.errors, st.elapsed_ms
                    ),
                        None => {
                            eprintln!("no integrity scan has run yet; `/integrity scan` runs one")
                        }
                    }
                    continue;
                }
                "/integrity scan" => {
                    let opts = ferroclaw_store::ScanOptions {
                        repair: true,
                        strategy: ferroclaw_runtime::bootstrap::integrity_strategy(
                            &ctx.settings.store,
                        ),
                        agent: None,
                    };
                    match ctx.store.scan(opts).await {
                        Ok(summary) => eprintln!("{summary}"),
                        Err(e) => eprintln!("error: {e}"),
                    }
                    continue;
                }
                "/compact" => {
                    // Compaction names the session as the store knows it, and waits in the
                    // session's queue like any write.
                    let stored =
                        self.runtime
                            .stored_key(self.agent, args.user.as_deref(), &session);
                    match self.runtime.compact(&self.agent.id, &stored).await {
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

            let stream = agent.settings().stream && !args.no_stream;
            let printer = Printer::new(stream, args.show_reasoning);
            let result = self.send(&session, text, &printer).await;
            if printer.streamed_text() {
                println!();
            }
            match result {
                Ok(Some(out)) if !printer.streamed_text() && !out.silent => {
                    println!("{}", out.text)
                }
                Ok(_) => {}
                Err(f) if f.is_aborted() => eprintln!("[aborted]"),
                Err(e) => eprintln!("error: {e}"),
            }
        }
    }

    /// Submits one message and shows its events; Ctrl-C aborts the run (which then records
    /// itself as aborted). `Ok(None)`: a `/stop` command, answered on stderr.
    async fn send(
        &self,
        session: &str,
        message: &str,
        printer: &Printer,
    ) -> Result<Option<RunOutput>, RunFailure> {
        let submitted = self
            .runtime
            .submit(Submit {
                agent_id: &self.agent.id,
                session_key: session,
                user: self.args.user.as_deref(),
                message,
                mode: QueueMode::Queue,
                origin: Origin::Cli,
                options: Default::default(),
            })
            .map_err(|e| match e {
                ferroclaw_runtime::RuntimeError::Submit(e) => RunFailure::Submit(e),
                other => {
                    RunFailure::Submit(ferroclaw_runtime::SubmitError::Failed(other.to_string()))
                }
            })?;
        let handle = match submitted {
            Submitted::Command(text) => {
                eprintln!("{text}");
                return Ok(None);
            }
            Submitted::Run(handle) => handle,
        };
        let aborter = handle.aborter();
        let finish = handle.finish(|ev| printer.show(ev));
        tokio::pin!(finish);
        let result = tokio::select! {
            res = &mut finish => res,
            _ = tokio::signal::ctrl_c() => {
                aborter.abort();
                finish.await
            }
        };
        result.map(Some)
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

impl Printer {
    fn show(&self, event: RunEvent) {
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
