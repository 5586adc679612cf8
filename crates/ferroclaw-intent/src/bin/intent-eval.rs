//! Evaluate the intent parser on the labelled corpus.
//!
//! `cargo run -p ferroclaw-intent --bin intent-eval [-- [--verbose] [--heldout] [corpus_dir]]`
//!
//! Scores the written corpus, then the real-output corpus (`real/dev.jsonl`,
//! `real/heldout.jsonl`). `--verbose` lists the failures of the written corpus and of
//! the real development part; the held-out part's failures are listed only with
//! `--heldout`, so tuning does not look at them.
//!
//! `intent-eval --prose FILE…` measures false calls another way: it parses prose that
//! commits to nothing (documentation, READMEs, changelogs), two paragraphs at a time, as
//! an answer's content with the standard tools offered, and counts the calls made (every
//! one is false); `--verbose` lists them.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use ferroclaw_intent::eval::{
    default_corpus_dir, evaluate, evaluate_real, load_corpus, load_file, standard_tools,
};
use ferroclaw_intent::{parse, ParserConfig};

fn main() -> ExitCode {
    let mut verbose = false;
    let mut heldout_failures = false;
    let mut dir: Option<PathBuf> = None;
    let mut prose: Option<Vec<PathBuf>> = None;
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "-v" | "--verbose" => verbose = true,
            "--heldout" => heldout_failures = true,
            "--prose" => prose = Some(Vec::new()),
            "-h" | "--help" => {
                println!("usage: intent-eval [--verbose] [--heldout] [corpus_dir]\n       intent-eval --prose [--verbose] FILE...");
                return ExitCode::SUCCESS;
            }
            other => match prose.as_mut() {
                Some(files) => files.push(PathBuf::from(other)),
                None => dir = Some(PathBuf::from(other)),
            },
        }
    }
    if let Some(files) = prose {
        return prose_scan(&files, verbose);
    }
    let dir = dir.unwrap_or_else(default_corpus_dir);
    let cases = match load_corpus(&dir) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("intent-eval: {e}");
            return ExitCode::FAILURE;
        }
    };
    let cfg = ParserConfig::default();
    let report = evaluate(&cases, &cfg);
    print!("{}", report.table());

    // Throughput of the full parser (the per-row cases/s above include scoring).
    let tools = standard_tools();
    let rounds = 20;
    let start = Instant::now();
    let mut n = 0usize;
    for _ in 0..rounds {
        for c in &cases {
            n += parse(c.reasoning.as_deref(), c.content.as_deref(), &tools, &cfg)
                .calls
                .len();
        }
    }
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    println!(
        "throughput: {:.0} answers/s ({} parses, {} calls, {:.1} µs/answer)",
        (rounds * cases.len()) as f64 / secs,
        rounds * cases.len(),
        n,
        secs * 1e6 / (rounds * cases.len()) as f64
    );

    let mut real_failures = Vec::new();
    for (part, show) in [("dev", verbose), ("heldout", heldout_failures)] {
        let path = dir.join("real").join(format!("{part}.jsonl"));
        if !path.exists() {
            continue;
        }
        let cases = match load_file(&path) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("intent-eval: {e}");
                return ExitCode::FAILURE;
            }
        };
        let real = evaluate_real(&cases, &cfg);
        println!("\n{}", real.table(&format!("real output, {part}")));
        if show {
            real_failures.push((part, real.overall.failures));
        }
    }

    if verbose {
        let rows = report
            .strategies
            .iter()
            .chain([&report.overall, &report.baseline]);
        for r in rows {
            if r.failures.is_empty() {
                continue;
            }
            println!("\n{} failures ({}):", r.label, r.failures.len());
            for f in &r.failures {
                println!("  {f}");
            }
        }
    }
    for (part, failures) in real_failures {
        println!("\nreal {part} failures ({}):", failures.len());
        for f in failures {
            println!("  {f}");
        }
    }
    ExitCode::SUCCESS
}

/// Calls made on prose that commits to nothing, two paragraphs at a time.
fn prose_scan(files: &[PathBuf], verbose: bool) -> ExitCode {
    let tools = standard_tools();
    let cfg = ParserConfig::default();
    let (mut chunks, mut with_calls) = (0usize, 0usize);
    for f in files {
        let text = match std::fs::read_to_string(f) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("intent-eval: {}: {e}", f.display());
                return ExitCode::FAILURE;
            }
        };
        let paras: Vec<&str> = text
            .split("\n\n")
            .filter(|p| !p.trim().is_empty())
            .collect();
        for pair in paras.chunks(2) {
            let chunk = pair.join("\n\n");
            chunks += 1;
            let calls = parse(None, Some(&chunk), &tools, &cfg).calls;
            if let Some(c) = calls.first() {
                with_calls += 1;
                if verbose {
                    let said = chunk.get(c.span.clone()).unwrap_or_default();
                    println!("{}: {} {} ← {said:?}", f.display(), c.name, c.arguments);
                }
            }
        }
    }
    println!(
        "prose: {chunks} chunks from {} files, {with_calls} with a call ({:.1} per 1,000)",
        files.len(),
        with_calls as f64 * 1000.0 / chunks.max(1) as f64
    );
    ExitCode::SUCCESS
}
