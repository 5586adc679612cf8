//! Evaluate the intent parser on the labelled corpus.
//!
//! `cargo run -p ferroclaw-intent --bin intent-eval [-- [--verbose] [corpus_dir]]`

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use ferroclaw_intent::eval::{default_corpus_dir, evaluate, load_corpus, standard_tools};
use ferroclaw_intent::{parse, ParserConfig};

fn main() -> ExitCode {
    let mut verbose = false;
    let mut dir: Option<PathBuf> = None;
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "-v" | "--verbose" => verbose = true,
            "-h" | "--help" => {
                println!("usage: intent-eval [--verbose] [corpus_dir]");
                return ExitCode::SUCCESS;
            }
            other => dir = Some(PathBuf::from(other)),
        }
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
    ExitCode::SUCCESS
}
