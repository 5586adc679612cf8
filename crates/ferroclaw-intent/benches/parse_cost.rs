//! What parsing costs: the real corpus (per case, mean and slowest), and pathological
//! inputs at two sizes, so that a recogniser whose cost grows faster than the text shows
//! as a ratio well above 2. Prints figures; never fails on them.
//!
//! Run: `cargo bench -p ferroclaw-intent --bench parse_cost`
#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench: a missing corpus should stop it

use std::time::{Duration, Instant};

use ferroclaw_intent::eval::{load_file, real_corpus_dir, standard_tools};
use ferroclaw_intent::{parse, ParserConfig};

fn main() {
    let cfg = ParserConfig::default();
    let standard = standard_tools();

    let cases = load_file(&real_corpus_dir().join("dev.jsonl")).expect("dev corpus");
    let mut times: Vec<Duration> = Vec::with_capacity(cases.len());
    let mut bytes = 0usize;
    for c in &cases {
        let tools = c.tool_specs(&standard);
        bytes +=
            c.reasoning.as_deref().map_or(0, str::len) + c.content.as_deref().map_or(0, str::len);
        let start = Instant::now();
        let out = parse(c.reasoning.as_deref(), c.content.as_deref(), &tools, &cfg);
        times.push(start.elapsed());
        std::hint::black_box(out);
    }
    let total: Duration = times.iter().sum();
    times.sort_unstable();
    println!(
        "real corpus: {} cases, {} KB, total {:?}, mean {:?}, p99 {:?}, slowest {:?}",
        cases.len(),
        bytes / 1024,
        total,
        total / cases.len().max(1) as u32,
        times[times.len() * 99 / 100],
        times[times.len() - 1]
    );

    // Openers without closers, mentions that never commit, calls that never close.
    let shapes: [(&str, &str); 10] = [
        ("to=functions.exec", "to=functions.exec "),
        ("let's read", "let's read a.txt, "),
        ("run backticks", "run `x` and "),
        ("Action lines", "Action: exec\n"),
        ("<tool_call>", "<tool_call>"),
        ("<function=exec>", "<function=exec>"),
        ("[TOOL_CALLS]", "[TOOL_CALLS]"),
        ("commitment", "We need to call exec. The command is "),
        ("chinese mention", "我需要调用 exec 工具，"),
        (
            "russian mention",
            "Теперь нужно выполнить команду с помощью exec ",
        ),
    ];
    for (label, piece) in shapes {
        let mut row = Vec::new();
        for kb in [90usize, 180] {
            let text = piece.repeat(kb * 1024 / piece.len());
            let start = Instant::now();
            std::hint::black_box(parse(Some(&text), Some(&text), &standard, &cfg));
            row.push(start.elapsed());
        }
        println!(
            "{label:>18}: 90 KB {:>10.1?}, 180 KB {:>10.1?} (x{:.1})",
            row[0],
            row[1],
            row[1].as_secs_f64() / row[0].as_secs_f64().max(1e-9)
        );
    }
}
