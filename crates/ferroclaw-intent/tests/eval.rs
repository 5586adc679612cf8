//! Regression guard: the parser must keep its precision and recall on the corpus.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed fixture should stop the test

use ferroclaw_intent::eval::{default_corpus_dir, evaluate, load_corpus};
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
