//! The labelled corpus and its scoring.
//!
//! A case is one JSON line: `{"id", "reasoning", "content", "tools"?, "expected":
//! [{"name","arguments"}], "tags"}`. A parsed call matches an expected one when the
//! names are equal and every expected argument is present with the same value (strings
//! compared after trimming; objects as subsets, key by key; other values by their JSON
//! text).
//!
//! Per-strategy rows run that strategy alone (sources in the configured order, first
//! source with calls wins) on the cases tagged with its format plus all cases without
//! expected calls; the overall row runs [`crate::parse`] with the default configuration
//! on every case; the baseline row runs [`crate::baseline::parse`] on every case.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{json, Value};

use crate::{ParsedCall, ParserConfig, Source, Strategy, ToolSpec};

/// The standard tool set the corpus is written against.
pub fn standard_tools() -> Vec<ToolSpec> {
    let s = |props: Value, req: &[&str]| json!({"type": "object", "properties": props, "required": req});
    vec![
        ToolSpec::new(
            "exec",
            "Run a shell command in the workspace and return its output.",
            s(json!({"command": {"type": "string"}}), &["command"]),
        ),
        ToolSpec::new(
            "read",
            "Read the contents of a file.",
            s(json!({"path": {"type": "string"}}), &["path"]),
        ),
        ToolSpec::new(
            "write",
            "Write content to a file, creating or overwriting it.",
            s(
                json!({"path": {"type": "string"}, "content": {"type": "string"}}),
                &["path", "content"],
            ),
        ),
        ToolSpec::new(
            "edit",
            "Edit a file by replacing an exact piece of text with new text.",
            s(
                json!({"path": {"type": "string"}, "oldText": {"type": "string"}, "newText": {"type": "string"}}),
                &["path", "oldText", "newText"],
            ),
        ),
        ToolSpec::new(
            "ls",
            "List directory contents.",
            s(json!({"path": {"type": "string"}}), &[]),
        ),
        ToolSpec::new(
            "glob",
            "Find files whose paths match a glob pattern.",
            s(json!({"pattern": {"type": "string"}}), &["pattern"]),
        ),
        ToolSpec::new(
            "grep",
            "Search file contents for a regex pattern.",
            s(
                json!({"pattern": {"type": "string"}, "path": {"type": "string"}}),
                &["pattern"],
            ),
        ),
        ToolSpec::new(
            "web_search",
            "Search the web and return titles, URLs and snippets.",
            s(
                json!({"query": {"type": "string"}, "count": {"type": "integer"}}),
                &["query"],
            ),
        ),
        ToolSpec::new(
            "web_fetch",
            "Fetch a URL and return its content as markdown.",
            s(json!({"url": {"type": "string"}}), &["url"]),
        ),
        ToolSpec::new(
            "memory_search",
            "Search the agent's long-term memory notes.",
            s(json!({"query": {"type": "string"}}), &["query"]),
        ),
    ]
}

#[derive(Debug, Clone, Deserialize)]
pub struct Expected {
    pub name: String,
    #[serde(default)]
    pub arguments: Value,
}

/// A tool of a case: a name from the standard set, or a whole definition (real cases
/// carry the tools that were offered to the model).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum CaseTool {
    Standard(String),
    Defined(ToolSpec),
}

#[derive(Debug, Clone, Deserialize)]
pub struct Case {
    pub id: String,
    #[serde(default)]
    pub reasoning: Option<String>,
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub tools: Option<Vec<CaseTool>>,
    #[serde(default)]
    pub expected: Vec<Expected>,
    #[serde(default)]
    pub tags: Vec<String>,
    /// Real cases: where the output was published (issue URL or `github:repo:path@commit`).
    #[serde(default)]
    pub source: Option<String>,
    /// Real cases: the model that wrote it (`gpt-oss-20b`, `qwen3`, `llama3.2`, …).
    #[serde(default)]
    pub model: Option<String>,
    /// Real cases: how the call (or non-call) is written (`harmony`, `qwen_xml`, `prose`…).
    #[serde(default)]
    pub format: Option<String>,
}

impl Case {
    /// The case's tools: its own definitions, the named subset of the standard set, or
    /// the whole standard set when absent.
    pub fn tool_specs(&self, all: &[ToolSpec]) -> Vec<ToolSpec> {
        match &self.tools {
            Some(list) => list
                .iter()
                .filter_map(|t| match t {
                    CaseTool::Standard(name) => all.iter().find(|s| &s.name == name).cloned(),
                    CaseTool::Defined(spec) => Some(spec.clone()),
                })
                .collect(),
            None => all.to_vec(),
        }
    }
    pub fn is_negative(&self) -> bool {
        self.expected.is_empty()
    }
    /// The model family, for per-family rows: gpt-oss, qwen, llama, deepseek, mistral…
    pub fn family(&self) -> String {
        let m = self
            .model
            .as_deref()
            .unwrap_or("unknown")
            .to_ascii_lowercase();
        let m = m.strip_prefix("other:").unwrap_or(&m);
        // `meta-llama/Llama-3.2-3B`, `moonshotai/kimi-k2.5`, `amazon.nova-micro`: the
        // model's own name, not its publisher.
        let m = m.rsplit('/').next().unwrap_or(m);
        let m = m.strip_prefix("amazon.").unwrap_or(m);
        for (prefix, family) in [
            ("gpt-oss", "gpt-oss"),
            ("qwen", "qwen"),
            ("qwq", "qwen"),
            ("llama", "llama"),
            ("deepseek", "deepseek"),
            ("mistral", "mistral"),
            ("devstral", "mistral"),
            ("magistral", "mistral"),
            ("hermes", "hermes"),
            ("glm", "glm"),
            ("granite", "granite"),
            ("gemma", "gemma"),
            ("phi", "phi"),
            ("kimi", "kimi"),
            ("moonshot", "kimi"),
            ("gpt", "gpt"),
            ("o1", "gpt"),
            ("o3", "gpt"),
            ("o4", "gpt"),
            ("claude", "claude"),
            ("gemini", "gemini"),
            ("command", "cohere"),
            ("nova", "nova"),
        ] {
            if m.starts_with(prefix) {
                return family.to_string();
            }
        }
        "other".to_string()
    }
}

/// Load every `*.jsonl` in `dir` (sorted by file name).
pub fn load_corpus(dir: &Path) -> Result<Vec<Case>, String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for f in files {
        cases.extend(load_file(&f)?);
    }
    Ok(cases)
}

/// The real-output corpus: `dev.jsonl` (tuned on) and `heldout.jsonl` (scored only).
pub fn real_corpus_dir() -> std::path::PathBuf {
    default_corpus_dir().join("real")
}

/// Load one JSONL file of cases.
pub fn load_file(path: &Path) -> Result<Vec<Case>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut cases = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let c: Case =
            serde_json::from_str(line).map_err(|e| format!("{}:{}: {e}", path.display(), n + 1))?;
        cases.push(c);
    }
    Ok(cases)
}

/// The corpus shipped in this crate.
pub fn default_corpus_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.trim().to_string(),
        other => other.to_string(),
    }
}

fn matches(exp: &Expected, got: &ParsedCall) -> bool {
    if exp.name != got.name {
        return false;
    }
    exp.arguments.is_null() || subset(&exp.arguments, &got.arguments)
}

/// `want` is within `got`: each key of an object (at any depth) holds the same value, strings
/// compared after trimming.
fn subset(want: &Value, got: &Value) -> bool {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => w
            .iter()
            .all(|(k, v)| g.get(k).is_some_and(|gv| subset(v, gv))),
        _ => value_text(want) == value_text(got),
    }
}

/// True/false positives and false negatives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub tp: usize,
    pub fp: usize,
    pub fn_: usize,
}

impl Counts {
    pub fn precision(&self) -> f64 {
        if self.tp + self.fp == 0 {
            1.0
        } else {
            self.tp as f64 / (self.tp + self.fp) as f64
        }
    }
    pub fn recall(&self) -> f64 {
        if self.tp + self.fn_ == 0 {
            1.0
        } else {
            self.tp as f64 / (self.tp + self.fn_) as f64
        }
    }
    fn add(&mut self, o: Counts) {
        self.tp += o.tp;
        self.fp += o.fp;
        self.fn_ += o.fn_;
    }
}

/// Score one case's calls against its expectations (greedy one-to-one matching).
pub fn score(expected: &[Expected], got: &[ParsedCall]) -> Counts {
    let mut used = vec![false; got.len()];
    let mut c = Counts::default();
    for e in expected {
        match (0..got.len()).find(|&i| !used[i] && matches(e, &got[i])) {
            Some(i) => {
                used[i] = true;
                c.tp += 1;
            }
            None => c.fn_ += 1,
        }
    }
    c.fp = used.iter().filter(|u| !**u).count();
    c
}

/// One row of the report.
#[derive(Debug, Clone, Default)]
pub struct Row {
    pub label: String,
    pub cases: usize,
    pub counts: Counts,
    pub failures: Vec<String>,
    pub elapsed: Duration,
}

/// The whole report.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub strategies: Vec<Row>,
    pub overall: Row,
    pub baseline: Row,
    pub baseline_fuzzy_subset: Row,
    pub total_cases: usize,
    pub negative_cases: usize,
}

fn format_tag(s: Strategy) -> &'static str {
    s.as_str()
}

fn run_row(label: &str, cases: &[&Case], mut f: impl FnMut(&Case) -> Vec<ParsedCall>) -> Row {
    let mut row = Row {
        label: label.to_string(),
        cases: cases.len(),
        ..Row::default()
    };
    let start = Instant::now();
    for c in cases {
        let got = f(c);
        let s = score(&c.expected, &got);
        if s.fp > 0 || s.fn_ > 0 {
            let names: Vec<String> = got
                .iter()
                .map(|g| format!("{} {}", g.name, g.arguments))
                .collect();
            row.failures.push(format!(
                "{} (fp {}, fn {}) got: [{}]",
                c.id,
                s.fp,
                s.fn_,
                names.join("; ")
            ));
        }
        row.counts.add(s);
    }
    row.elapsed = start.elapsed();
    row
}

fn by_sources(
    c: &Case,
    cfg: &ParserConfig,
    mut f: impl FnMut(&str) -> Vec<ParsedCall>,
) -> Vec<ParsedCall> {
    for src in &cfg.sources {
        let text = match src {
            Source::Reasoning => c.reasoning.as_deref(),
            Source::Content => c.content.as_deref(),
        };
        if let Some(t) = text.filter(|t| !t.trim().is_empty()) {
            let calls = f(t);
            if !calls.is_empty() {
                return calls;
            }
        }
    }
    Vec::new()
}

/// Evaluate the parser (and the baseline) on a corpus.
pub fn evaluate(cases: &[Case], cfg: &ParserConfig) -> Report {
    let all_tools = standard_tools();
    let mut report = Report {
        total_cases: cases.len(),
        negative_cases: cases.iter().filter(|c| c.is_negative()).count(),
        ..Report::default()
    };
    for st in Strategy::ALL {
        let subset: Vec<&Case> = cases
            .iter()
            .filter(|c| c.is_negative() || c.tags.iter().any(|t| t == format_tag(st)))
            .collect();
        let row = run_row(st.as_str(), &subset, |c| {
            let tools = c.tool_specs(&all_tools);
            by_sources(c, cfg, |t| crate::parse_with(st, t, &tools, cfg))
        });
        report.strategies.push(row);
    }
    let all: Vec<&Case> = cases.iter().collect();
    report.overall = run_row("overall", &all, |c| {
        let tools = c.tool_specs(&all_tools);
        crate::parse(c.reasoning.as_deref(), c.content.as_deref(), &tools, cfg).calls
    });
    report.baseline = run_row("baseline (seed regexes)", &all, |c| {
        let tools = c.tool_specs(&all_tools);
        by_sources(c, cfg, |t| crate::baseline::parse(t, &tools))
    });
    let fuzzy_subset: Vec<&Case> = cases
        .iter()
        .filter(|c| c.is_negative() || c.tags.iter().any(|t| t == "fuzzy"))
        .collect();
    report.baseline_fuzzy_subset = run_row("baseline on fuzzy+neg", &fuzzy_subset, |c| {
        let tools = c.tool_specs(&all_tools);
        by_sources(c, cfg, |t| crate::baseline::parse(t, &tools))
    });
    report
}

impl Row {
    /// The row under [`header`]'s columns.
    fn line(&self) -> String {
        format!(
            "{:<26} {:>5} {:>5} {:>5} {:>5} {:>9.3} {:>7.3}",
            self.label,
            self.cases,
            self.counts.tp,
            self.counts.fp,
            self.counts.fn_,
            self.counts.precision(),
            self.counts.recall()
        )
    }
}

/// The columns every table shares.
fn header() -> String {
    format!(
        "{:<26} {:>5} {:>5} {:>5} {:>5} {:>9} {:>7}",
        "row", "cases", "TP", "FP", "FN", "precision", "recall"
    )
}

impl Report {
    /// A plain-text table.
    pub fn table(&self) -> String {
        let mut s = format!(
            "corpus: {} cases ({} negative)\n{} {:>10}\n",
            self.total_cases,
            self.negative_cases,
            header(),
            "cases/s"
        );
        let rows = self.strategies.iter().chain([
            &self.overall,
            &self.baseline,
            &self.baseline_fuzzy_subset,
        ]);
        for r in rows {
            let secs = r.elapsed.as_secs_f64().max(1e-9);
            s.push_str(&format!("{} {:>10.0}\n", r.line(), r.cases as f64 / secs));
        }
        s
    }
}

/// The full parser on real model output: one overall row, then one row per model
/// family and one per format (a row's cases are those of its family or format).
#[derive(Debug, Clone, Default)]
pub struct RealReport {
    pub overall: Row,
    pub families: Vec<Row>,
    pub formats: Vec<Row>,
    pub negative_cases: usize,
}

pub fn evaluate_real(cases: &[Case], cfg: &ParserConfig) -> RealReport {
    let all_tools = standard_tools();
    let parse_case = |c: &Case| {
        let tools = c.tool_specs(&all_tools);
        crate::parse(c.reasoning.as_deref(), c.content.as_deref(), &tools, cfg).calls
    };
    let all: Vec<&Case> = cases.iter().collect();
    let grouped = |key: &dyn Fn(&Case) -> String| {
        let mut keys: Vec<String> = cases.iter().map(key).collect();
        keys.sort();
        keys.dedup();
        keys.into_iter()
            .map(|k| {
                let subset: Vec<&Case> = cases.iter().filter(|c| key(c) == k).collect();
                run_row(&k, &subset, parse_case)
            })
            .collect::<Vec<Row>>()
    };
    RealReport {
        overall: run_row("overall", &all, parse_case),
        families: grouped(&|c: &Case| format!("model {}", c.family())),
        formats: grouped(&|c: &Case| {
            format!("format {}", c.format.as_deref().unwrap_or("unknown"))
        }),
        negative_cases: cases.iter().filter(|c| c.is_negative()).count(),
    }
}

impl RealReport {
    pub fn table(&self, title: &str) -> String {
        let mut s = format!(
            "{title}: {} cases ({} without a call)\n{}\n",
            self.overall.cases,
            self.negative_cases,
            header()
        );
        for r in std::iter::once(&self.overall)
            .chain(&self.families)
            .chain(&self.formats)
        {
            s.push_str(&r.line());
            s.push('\n');
        }
        s
    }
}
