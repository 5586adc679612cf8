//! Regression guard: the parser must keep its precision and recall on the corpus.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed fixture should stop the test

use ferroclaw_intent::eval::{
    default_corpus_dir, evaluate, evaluate_real, load_corpus, load_file, real_corpus_dir,
    standard_tools, Case,
};
use ferroclaw_intent::ParserConfig;

#[test]
fn corpus_is_large_and_varied() {
    let cases = load_corpus(&default_corpus_dir()).expect("corpus loads");
    assert!(cases.len() >= 200, "{} cases", cases.len());
    assert!(cases.iter().filter(|c| c.is_negative()).count() >= 60);
    assert!(cases.iter().filter(|c| c.expected.len() > 1).count() >= 10);
    for tag in ["harmony", "guided_json", "react", "markers", "fuzzy"] {
        assert!(
            cases
                .iter()
                .filter(|c| c.tags.iter().any(|t| t == tag))
                .count()
                >= 15,
            "{tag}"
        );
    }
    let mut ids: Vec<&str> = cases.iter().map(|c| c.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), cases.len(), "duplicate case ids");
}

#[test]
fn overall_precision_and_recall_hold() {
    let cases = load_corpus(&default_corpus_dir()).expect("corpus loads");
    let report = evaluate(&cases, &ParserConfig::default());
    let o = report.overall.counts;
    println!("{}", report.table());
    assert!(
        o.precision() >= 0.95,
        "precision {:.3}: {:#?}",
        o.precision(),
        report.overall.failures
    );
    assert!(
        o.recall() >= 0.90,
        "recall {:.3}: {:#?}",
        o.recall(),
        report.overall.failures
    );
    // Clearly above the seed's regex baseline.
    let b = report.baseline.counts;
    assert!(o.precision() > b.precision() + 0.2);
    assert!(o.recall() > b.recall() + 0.2);
    for row in &report.strategies {
        assert!(
            row.counts.precision() >= 0.9,
            "{}: {:?}",
            row.label,
            row.failures
        );
    }
}

fn real(part: &str) -> Vec<Case> {
    load_file(&real_corpus_dir().join(format!("{part}.jsonl"))).expect("real corpus loads")
}

#[test]
fn real_corpus_is_sourced_labelled_and_split() {
    let dev = real("dev");
    let held = real("heldout");
    let all: Vec<&Case> = dev.iter().chain(&held).collect();
    assert!(all.len() >= 150, "{} real cases", all.len());
    // (The latest held-out part holds 213.)
    assert!(held.len() >= 200, "{} held-out cases", held.len());
    let negatives = all.iter().filter(|c| c.is_negative()).count();
    assert!(
        negatives * 3 >= all.len(),
        "{negatives} of {} without a call",
        all.len()
    );
    let mut ids: Vec<&str> = all.iter().map(|c| c.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), all.len(), "duplicate ids");
    let standard = standard_tools();
    for c in &all {
        let src = c.source.as_deref().unwrap_or_default();
        assert!(
            src.starts_with("https://") || src.starts_with("github:"),
            "{}: source {src:?}",
            c.id
        );
        assert!(c.model.is_some() && c.format.is_some(), "{}", c.id);
        assert!(c.reasoning.is_some() || c.content.is_some(), "{}", c.id);
        let tools = c.tool_specs(&standard);
        assert!(!tools.is_empty(), "{}: no tools", c.id);
        for e in &c.expected {
            assert!(
                tools.iter().any(|t| t.name == e.name),
                "{}: {} not offered",
                c.id,
                e.name
            );
        }
    }
    // Several model families and formats, in both parts.
    for part in [&dev, &held] {
        let mut families: Vec<String> = part.iter().map(Case::family).collect();
        families.sort();
        families.dedup();
        assert!(families.len() >= 4, "{families:?}");
    }
}

/// Floors at what the parser scored (rules alone) when this was written, so a change
/// that loses ground fails. Development part: P 0.913 / R 0.856 (4,452 cases, forty
/// earlier held-out parts included). Held-out part, gathered during that tuning and scored
/// once at its end: P 0.510 / R 0.345 (223). The aim for the held-out part is P 0.95 /
/// R 0.90; see the corpus README.
const FLOORS: [(&str, f64, f64); 2] = [("dev", 0.91, 0.85), ("heldout", 0.51, 0.34)];

#[test]
fn real_output_scores_hold() {
    let cfg = ParserConfig::default();
    for (part, min_p, min_r) in FLOORS {
        let report = evaluate_real(&real(part), &cfg);
        let c = report.overall.counts;
        println!("{part}: P {:.3} R {:.3}", c.precision(), c.recall());
        // Only the development part's failures are printed; the held-out parts' cases
        // are not looked at.
        let failures = if part == "dev" {
            &report.overall.failures[..]
        } else {
            &[]
        };
        assert!(
            c.precision() >= min_p,
            "{part} precision {:.3}: {failures:#?}",
            c.precision()
        );
        assert!(
            c.recall() >= min_r,
            "{part} recall {:.3}: {failures:#?}",
            c.recall()
        );
    }
}
