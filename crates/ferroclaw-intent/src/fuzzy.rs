//! Natural-language intents: "let's read config.yaml", "we should fetch https://…".
//!
//! The text is cut into sentences and clauses. In each clause, trigger words (verbs from
//! a lexicon keyed by the words of each tool's name, aliases and description, plus
//! explicit tool-name mentions) propose tools; each proposal needs its primary argument,
//! extracted according to the JSON schema (URL, path, command, query, pattern, text).
//! A trigger counts only in an intending context: imperative, or after a cue such as
//! "let's", "we need to", "I'll"; it is rejected when negated ("no need to", "don't"),
//! hypothetical ("if", "whether", "would", "could"), past ("already", "we have read"),
//! inside quotes or backticks, in a question, or addressed to someone else ("you could").

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

use crate::harmony::floor;
use crate::{jsonscan, make_call, ParsedCall, ParserConfig, StrategyOutput, ToolSpec};

const MAX_TEXT: usize = 256 * 1024;
/// How far (bytes) context cues and arguments are looked for around a trigger.
const WINDOW: usize = 240;

// ---------------------------------------------------------------- lexicon

struct Concept {
    keys: &'static [&'static str],
    verbs: &'static [&'static str],
    nouns: &'static [&'static str],
}

const CONCEPTS: &[Concept] = &[
    Concept {
        keys: &["search", "query", "lookup"],
        verbs: &["search", "look up", "google", "search up"],
        nouns: &[],
    },
    Concept {
        keys: &["web", "internet", "online", "google"],
        verbs: &[],
        nouns: &["web", "internet", "online", "google"],
    },
    Concept {
        keys: &["fetch", "url", "download", "http", "webpage", "browse"],
        verbs: &[
            "fetch", "open", "retrieve", "download", "grab", "visit", "load", "pull", "get",
            "browse", "scrape", "curl",
        ],
        nouns: &["page", "url", "link", "site", "website", "article"],
    },
    Concept {
        keys: &["read", "view", "cat"],
        verbs: &[
            "read",
            "open",
            "view",
            "inspect",
            "examine",
            "look at",
            "a look at",
            "check",
            "cat",
            "load",
        ],
        nouns: &["file", "contents"],
    },
    Concept {
        keys: &["write", "save", "create", "store"],
        verbs: &["write", "save", "create", "store", "dump", "output", "put"],
        nouns: &["file"],
    },
    Concept {
        keys: &[
            "exec", "execute", "run", "shell", "command", "bash", "terminal",
        ],
        verbs: &["run", "execute", "exec", "invoke", "launch"],
        nouns: &["command", "shell", "terminal"],
    },
    Concept {
        keys: &["edit", "replace", "modify", "patch"],
        verbs: &[
            "edit", "replace", "change", "modify", "update", "patch", "swap",
        ],
        nouns: &[],
    },
    Concept {
        keys: &["list", "ls", "directory"],
        verbs: &["list", "ls"],
        nouns: &["directory", "folder", "dir", "contents"],
    },
    Concept {
        keys: &["glob", "matching"],
        verbs: &["glob", "find", "locate", "list"],
        nouns: &["matching", "named"],
    },
    Concept {
        keys: &["grep", "regex"],
        verbs: &["grep", "search", "look for", "scan"],
        nouns: &[
            "codebase",
            "code",
            "repo",
            "repository",
            "source",
            "sources",
            "project",
            "crate",
            "crates",
            "workspace",
        ],
    },
    Concept {
        keys: &["memory", "memories", "remember", "notes"],
        verbs: &["search", "look up", "recall", "check"],
        nouns: &["memory", "memories", "notes"],
    },
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Url,
    /// Any path, directories included.
    Path,
    /// A file path (the tool's description does not mention directories).
    File,
    Command,
    Query,
    Pattern,
    Glob,
    Text,
}

struct Profile<'a> {
    tool: &'a ToolSpec,
    verbs: Vec<Vec<String>>,
    /// Verbs of concepts named by the tool's own name or aliases (not its description).
    own_verbs: Vec<Vec<String>>,
    nouns: Vec<String>,
    names: Vec<String>,
    primary: String,
    kind: Kind,
    needs_noun: bool,
}

fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase())
        .collect()
}

fn kind_of(tool: &ToolSpec, prop: &str) -> Kind {
    let p = prop.to_ascii_lowercase();
    let desc = tool
        .parameters
        .get("properties")
        .and_then(|ps| ps.get(prop))
        .and_then(|d| d.get("description"))
        .and_then(|d| d.as_str())
        .unwrap_or("")
        .to_lowercase();
    let tname = tool.name.to_lowercase();
    if p.contains("url") || p.contains("uri") || p == "link" || p == "href" {
        Kind::Url
    } else if p.contains("path") || p.contains("file") || p == "dir" || p == "directory" {
        let d = tool.description.to_lowercase();
        if p.contains("dir") || d.contains("director") || d.contains("folder") {
            Kind::Path
        } else {
            Kind::File
        }
    } else if p.contains("command") || p == "cmd" || p == "script" {
        Kind::Command
    } else if p == "pattern" || p == "glob" || p == "regex" {
        if tname.contains("glob") || desc.contains("glob") {
            Kind::Glob
        } else {
            Kind::Pattern
        }
    } else if p.contains("query") || p == "q" || p == "search" || p == "term" || p == "topic" {
        Kind::Query
    } else {
        Kind::Text
    }
}

fn profiles<'a>(tools: &'a [ToolSpec], cfg: &ParserConfig) -> Vec<Profile<'a>> {
    tools
        .iter()
        .filter_map(|t| {
            let primary = t.primary_property()?.to_string();
            let kind = kind_of(t, &primary);
            let mut names: Vec<String> = vec![t.name.to_lowercase()];
            names.extend(t.aliases.iter().map(|a| a.to_lowercase()));
            for (alias, target) in &cfg.aliases {
                if target == &t.name && (alias.contains('_') || alias.contains('.')) {
                    names.push(alias.to_lowercase());
                }
            }
            let mut name_keys: Vec<String> = words(&t.name);
            for a in &t.aliases {
                name_keys.extend(words(a));
            }
            let mut keys: Vec<String> = name_keys.clone();
            for n in &names {
                keys.extend(words(n));
            }
            keys.extend(words(&t.description).into_iter().take(16));
            let mut verbs: Vec<Vec<String>> = Vec::new();
            let mut nouns: Vec<String> = Vec::new();
            let mut own_verbs: Vec<Vec<String>> = Vec::new();
            for c in CONCEPTS {
                if c.keys.iter().any(|k| name_keys.iter().any(|w| w == k)) {
                    own_verbs.extend(
                        c.verbs
                            .iter()
                            .map(|v| v.split(' ').map(str::to_string).collect()),
                    );
                }
                if c.keys.iter().any(|k| keys.iter().any(|w| w == k)) {
                    for v in c.verbs {
                        let v: Vec<String> = v.split(' ').map(str::to_string).collect();
                        if !verbs.contains(&v) {
                            verbs.push(v);
                        }
                    }
                    nouns.extend(c.nouns.iter().map(|s| s.to_string()));
                }
            }
            // Unknown tools: the first word of the name (often a verb) triggers too.
            if verbs.is_empty() {
                if let Some(w) = words(&t.name).first() {
                    verbs.push(vec![w.clone()]);
                }
            }
            // A verb shared with many tools (search) is not enough for a tool whose
            // defining word is a noun (memory): require that noun.
            let needs_noun = keys
                .iter()
                .any(|k| ["memory", "memories", "notes"].contains(&k.as_str()));
            Some(Profile {
                tool: t,
                verbs,
                own_verbs,
                nouns,
                names,
                primary,
                kind,
                needs_noun,
            })
        })
        .collect()
}

// ---------------------------------------------------------------- text structure

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quote {
    Backtick,
    Double,
    Single,
}

#[derive(Debug, Clone)]
struct Protected {
    range: Range<usize>, // including the delimiters
    inner: Range<usize>,
    kind: Quote,
}

fn protected_spans(text: &str) -> Vec<Protected> {
    let mut out = Vec::new();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (pos, c) = chars[i];
        let prev = if i > 0 { Some(chars[i - 1].1) } else { None };
        let (close, kind): (&[char], Quote) = match c {
            '`' => (&['`'], Quote::Backtick),
            '"' => (&['"'], Quote::Double),
            '\u{201c}' => (&['\u{201d}'], Quote::Double),
            '\'' | '\u{2018}' if prev.is_none_or(|p| !p.is_alphanumeric()) => {
                (&['\'', '\u{2019}'], Quote::Single)
            }
            _ => {
                i += 1;
                continue;
            }
        };
        // Code fences: skip ``` blocks as one span.
        let mut j = i + 1;
        let mut found = None;
        while j < chars.len() {
            let (p2, c2) = chars[j];
            if close.contains(&c2) {
                let next = chars.get(j + 1).map(|x| x.1);
                let ok = match kind {
                    Quote::Single => next.is_none_or(|n| !n.is_alphanumeric()),
                    _ => true,
                };
                if ok {
                    found = Some((j, p2 + c2.len_utf8()));
                    break;
                }
            }
            if c2 == '\n' && kind != Quote::Backtick {
                break;
            }
            if kind == Quote::Single && p2 - pos > 400 {
                break;
            }
            j += 1;
        }
        match found {
            Some((j, end)) if j > i + 1 || kind == Quote::Backtick => {
                out.push(Protected {
                    range: pos..end,
                    inner: pos + c.len_utf8()..chars[j].0,
                    kind,
                });
                i = j + 1;
            }
            _ => i += 1,
        }
    }
    out
}

fn in_protected(prot: &[Protected], pos: usize) -> bool {
    prot_at(prot, pos).is_some()
}

/// Spans are sorted and disjoint: binary search.
fn prot_at(prot: &[Protected], pos: usize) -> Option<&Protected> {
    let i = prot.partition_point(|p| p.range.start <= pos);
    let p = prot.get(i.checked_sub(1)?)?;
    (pos < p.range.end).then_some(p)
}

/// Sentence ranges: split at `.!?;` followed by whitespace, and at newlines.
fn sentences(text: &str, prot: &[Protected]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut iter = text.char_indices().peekable();
    while let Some((i, c)) = iter.next() {
        let next = iter.peek().map(|x| x.1);
        let boundary = match c {
            '\n' => true,
            '.' | '!' | '?' | ';' => next.is_none_or(char::is_whitespace),
            _ => false,
        };
        if boundary && !in_protected(prot, i) {
            let end = i + c.len_utf8();
            if text[start..end].trim().len() > 1 {
                out.push(start..end);
            }
            start = end;
        }
    }
    if text[start..].trim().len() > 1 {
        out.push(start..text.len());
    }
    out
}

#[derive(Debug, Clone)]
struct Tok {
    range: Range<usize>,
    lower: String,
}

fn tokens(text: &str, range: Range<usize>) -> Vec<Tok> {
    let mut out = Vec::new();
    let s = &text[range.clone()];
    let mut start: Option<usize> = None;
    let is_w = |c: char| c.is_alphanumeric() || c == '_' || c == '\'' || c == '\u{2019}';
    for (i, c) in s.char_indices() {
        if is_w(c) {
            if start.is_none() {
                start = Some(i);
            }
        } else if let Some(st) = start.take() {
            push_tok(&mut out, s, st, i, range.start);
        }
    }
    if let Some(st) = start {
        push_tok(&mut out, s, st, s.len(), range.start);
    }
    out
}

fn push_tok(out: &mut Vec<Tok>, s: &str, st: usize, en: usize, base: usize) {
    let w = s[st..en].trim_matches(|c| c == '\'' || c == '\u{2019}');
    if w.is_empty() {
        return;
    }
    let lead = s[st..en].find(w).unwrap_or(0);
    let st = st + lead;
    out.push(Tok {
        range: base + st..base + st + w.len(),
        lower: w.to_lowercase().replace('\u{2019}', "'"),
    });
}

const CLAUSE_WORDS: &[&str] = &[
    "then", "but", "so", "because", "while", "although", "whereas",
];

/// Clause ranges inside a sentence: split at commas, dashes and clause words, and at
/// "and" when a trigger verb follows.
fn clauses(
    text: &str,
    sent: Range<usize>,
    toks: &[Tok],
    prot: &[Protected],
    is_verb: &dyn Fn(&str) -> bool,
) -> Vec<Range<usize>> {
    let mut cuts: Vec<usize> = Vec::new();
    for (i, c) in text[sent.clone()].char_indices() {
        let p = sent.start + i;
        if (c == ',' || c == '\u{2014}' || c == '(' || c == ')') && !in_protected(prot, p) {
            cuts.push(p);
        }
    }
    for (k, t) in toks.iter().enumerate() {
        if in_protected(prot, t.range.start) {
            continue;
        }
        let next_is_verb = toks.get(k + 1).is_some_and(|n| is_verb(&n.lower));
        if CLAUSE_WORDS.contains(&t.lower.as_str()) || (t.lower == "and" && next_is_verb) {
            cuts.push(t.range.start);
        }
    }
    cuts.sort_unstable();
    let mut out = Vec::new();
    let mut start = sent.start;
    for c in cuts {
        if c > start {
            out.push(start..c);
        }
        start = c;
    }
    if start < sent.end {
        out.push(start..sent.end);
    }
    out
}

// ---------------------------------------------------------------- context

const NEG: &[&str] = &[
    "no",
    "not",
    "never",
    "without",
    "avoid",
    "instead",
    "unnecessary",
    "pointless",
    "cannot",
    "refuse",
    "skip",
    "nor",
    "neither",
    "nothing",
    "forbid",
    "forbade",
    "forbidden",
    "dont",
    "wont",
    "cant",
    "shouldnt",
    "rather",
    "needn't",
    "none",
];
const HYP: &[&str] = &[
    "if",
    "whether",
    "would",
    "could",
    "might",
    "may",
    "hypothetically",
    "suppose",
    "imagine",
    "example",
    "e",
    "wonder",
    "wonders",
    "wondering",
    "asking",
    "how",
    "explain",
    "suggest",
    "recommend",
    "you",
    "your",
    "they",
    "their",
    "themselves",
    "already",
    "earlier",
    "previously",
    "previous",
    "had",
    "did",
    "was",
    "were",
    "said",
    "says",
    "wrote",
    "mentions",
    "mentioned",
    "according",
    "meaning",
    "unless",
];
const POST_PAST: &[&str] = &["already", "earlier", "previously"];
const BEFORE_BLOCK: &[&str] = &[
    "have", "has", "had", "was", "were", "been", "is", "are", "be", "being", "the", "a", "an",
    "this", "that", "its", "our", "his", "her", "their", "to-be", "of",
];
const POS: &[&str] = &[
    "let's",
    "lets",
    "let us",
    "let me",
    "we'll",
    "we will",
    "i'll",
    "i will",
    "we need",
    "i need",
    "need to",
    "needs to",
    "we should",
    "i should",
    "should",
    "we must",
    "must",
    "have to",
    "has to",
    "we can",
    "i can",
    "going to",
    "gonna",
    "try to",
    "want to",
    "time to",
    "next",
    "now",
    "then",
    "first",
    "plan",
    "call",
    "use",
    "using",
    "proceed",
    "start by",
    "begin by",
    "we'd better",
    "ought to",
    "we're going",
    "also",
    "step",
];
const DISCOURSE: &[&str] = &[
    "and", "then", "also", "now", "next", "so", "first", "finally", "okay", "ok", "alright",
    "plan", "step", "hmm", "well", "lastly", "second", "third", "please",
];

fn context_ok(text: &str, clause: &Range<usize>, toks: &[Tok], t: usize, t_end: usize) -> bool {
    let trig = &toks[t];
    // Cues are local: look at most WINDOW bytes back and a few words ahead.
    let cstart = clause
        .start
        .max(floor(text, trig.range.start.saturating_sub(WINDOW)));
    let clause = &(cstart..clause.end);
    let lo = toks.partition_point(|x| x.range.start < clause.start);
    let pre_toks: Vec<&Tok> = toks[lo.min(t)..t].iter().collect();
    let post_toks = toks[t..]
        .iter()
        .skip_while(|x| x.range.start < t_end)
        .take_while(|x| x.range.end <= clause.end)
        .take(24);
    for p in &pre_toks {
        let w = p.lower.as_str();
        if NEG.contains(&w) || w.ends_with("n't") || HYP.contains(&w) {
            return false;
        }
    }
    for p in post_toks {
        if POST_PAST.contains(&p.lower.as_str()) {
            return false;
        }
    }
    if let Some(prev) = pre_toks.last() {
        let followed_by_tool = toks[t..]
            .iter()
            .find(|x| x.range.start >= t_end)
            .is_some_and(|x| x.lower == "tool");
        if BEFORE_BLOCK.contains(&prev.lower.as_str()) && !followed_by_tool {
            return false;
        }
    }
    // Imperative: nothing but discourse words (or a label ending in ':') before the verb.
    let pre = text[clause.start..trig.range.start].to_lowercase();
    let after_colon = pre.rsplit(':').next().unwrap_or("");
    let imperative = words(after_colon)
        .iter()
        .all(|w| DISCOURSE.contains(&w.as_str()));
    if imperative {
        return true;
    }
    let pre_norm = pre.replace('\u{2019}', "'");
    POS.iter().any(|cue| has_phrase(&pre_norm, cue))
}

fn has_phrase(hay: &str, phrase: &str) -> bool {
    let mut from = 0;
    while let Some(i) = hay[from..].find(phrase) {
        let s = from + i;
        let e = s + phrase.len();
        let before_ok = hay[..s]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric() && c != '\'');
        let after_ok = hay[e..]
            .chars()
            .next()
            .is_none_or(|c| !c.is_alphanumeric() && c != '\'');
        if before_ok && after_ok {
            return true;
        }
        from = e;
    }
    false
}

fn sentence_rejected(text: &str, sent: &Range<usize>) -> bool {
    let s = text[sent.clone()].trim();
    if s.ends_with('?') {
        return true;
    }
    let lower = s
        .trim_start_matches(|c: char| !c.is_alphanumeric())
        .to_lowercase();
    [
        "if ",
        "unless ",
        "in case",
        "hypothetically",
        "suppose",
        "imagine",
        "for example",
        "for instance",
        "e.g.",
        "example:",
        "an example",
    ]
    .iter()
    .any(|p| lower.starts_with(p))
}

// ---------------------------------------------------------------- arguments

static URL: LazyLock<Regex> =
    LazyLock::new(|| ferroclaw_types::literal_regex(r#"https?://[^\s<>"'`\])}]+"#));
static EXT: LazyLock<Regex> =
    LazyLock::new(|| ferroclaw_types::literal_regex(r"^[\w.\-~/@+]*\.[A-Za-z][A-Za-z0-9]{0,7}$"));
static REPLACE: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r#"(?i)\b(?:replace|change|swap|update)\s+(?:`([^`]*)`|"([^"]*)")\s+(?:with|to|by|into|for)\s+(?:`([^`]*)`|"([^"]*)")"#,
    )
});
static CONTENT: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r#"(?i)\b(?:with (?:the )?(?:content|contents|text|body)|containing|content)\s*[:=]?\s*(?:`([^`]*)`|"([^"]*)"|'([^']*)')"#,
    )
});

const KNOWN_FILES: &[&str] = &[
    "Makefile",
    "Dockerfile",
    "README",
    "LICENSE",
    "Justfile",
    "Gemfile",
    "Rakefile",
    "Procfile",
    "Vagrantfile",
    "Jenkinsfile",
    "Containerfile",
    "CHANGELOG",
    "CODEOWNERS",
];
const DOMAIN_EXT: &[&str] = &[
    "com", "org", "net", "io", "ai", "gov", "edu", "co", "uk", "de",
];
const KNOWN_BINS: &[&str] = &[
    "ls",
    "cat",
    "git",
    "cargo",
    "npm",
    "npx",
    "pnpm",
    "yarn",
    "node",
    "python",
    "python3",
    "pip",
    "pip3",
    "make",
    "grep",
    "rg",
    "find",
    "echo",
    "curl",
    "wget",
    "docker",
    "kubectl",
    "pytest",
    "go",
    "rustc",
    "mkdir",
    "rm",
    "cp",
    "mv",
    "pwd",
    "whoami",
    "uname",
    "df",
    "du",
    "ps",
    "top",
    "tail",
    "head",
    "wc",
    "sed",
    "awk",
    "chmod",
    "touch",
    "which",
    "env",
    "date",
    "ping",
    "tar",
    "unzip",
    "jq",
    "bash",
    "sh",
    "uptime",
    "free",
    "systemctl",
    "journalctl",
    "terraform",
    "helm",
    "ruby",
    "java",
    "mvn",
    "gradle",
    "dotnet",
    "deno",
    "bun",
    "tree",
];
const QUERY_REJECT: &[&str] = &[
    "it",
    "this",
    "that",
    "them",
    "something",
    "anything",
    "more",
    "more info",
    "info",
    "information",
    "results",
    "sources",
    "more sources",
    "the answer",
    "answers",
    "those",
    "these",
    "stuff",
    "a bit",
    "around",
    "the web",
    "online",
    "the internet",
    "memory",
];

fn path_like(s: &str) -> bool {
    if s.is_empty() || s.len() > 260 || s.contains("://") || s.chars().any(char::is_whitespace) {
        return false;
    }
    if KNOWN_FILES.contains(&s) {
        return true;
    }
    if !s
        .chars()
        .all(|c| c.is_alphanumeric() || "_-./~@+".contains(c))
    {
        return false;
    }
    let lower = s.to_ascii_lowercase();
    if ["e.g", "i.e", "etc", "vs", "e.g.", "i.e."].contains(&lower.as_str()) {
        return false;
    }
    if (s.starts_with('/') || s.starts_with("~/") || s.starts_with("./") || s.starts_with("../"))
        && s.len() > 2
    {
        return true;
    }
    if s.contains('/') {
        return s.ends_with('/') || s.matches('/').count() >= 2 || EXT.is_match(s);
    }
    if s.starts_with('.')
        && s.len() > 2
        && s[1..]
            .chars()
            .all(|c| c.is_alphanumeric() || "_-.".contains(c))
    {
        return true;
    }
    if EXT.is_match(s) {
        let ext = lower.rsplit('.').next().unwrap_or("");
        return !DOMAIN_EXT.contains(&ext);
    }
    false
}

fn trim_token(s: &str) -> &str {
    s.trim_start_matches(['(', '[', '<', '"', '\'', '`', '\u{201c}', '\u{2018}'])
        .trim_end_matches([
            '.', ',', ';', ':', '!', '?', ')', ']', '>', '"', '\'', '`', '\u{201d}', '\u{2019}',
        ])
}

/// Whitespace-separated tokens in `range`, with byte ranges.
fn ws_tokens(text: &str, range: Range<usize>) -> Vec<(Range<usize>, &str)> {
    let range = floor(text, range.start)..floor(text, range.end.max(range.start));
    let s = &text[range.clone()];
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in s.char_indices() {
        if c.is_whitespace() {
            if let Some(st) = start.take() {
                out.push((range.start + st..range.start + i, &s[st..i]));
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(st) = start {
        out.push((range.start + st..range.end, &s[st..]));
    }
    out
}

struct Found {
    value: String,
    range: Range<usize>,
}

/// First quoted span (of the given kinds) starting in `win`.
fn quoted_in(prot: &[Protected], text: &str, win: Range<usize>, kinds: &[Quote]) -> Option<Found> {
    let from = prot.partition_point(|p| p.range.start < win.start);
    prot[from..]
        .iter()
        .take_while(|p| p.range.start < win.end)
        .filter(|p| {
            p.range.start >= win.start && p.range.start < win.end && kinds.contains(&p.kind)
        })
        .find(|p| !text[p.inner.clone()].trim().is_empty())
        .map(|p| Found {
            value: text[p.inner.clone()].trim().to_string(),
            range: p.range.clone(),
        })
}

fn url_in(text: &str, win: Range<usize>) -> Option<Found> {
    URL.find(&text[win.clone()]).map(|m| {
        let v = m
            .as_str()
            .trim_end_matches(['.', ',', ';', ':', '!', '?', '\'']);
        Found {
            value: v.to_string(),
            range: win.start + m.start()..win.start + m.start() + v.len(),
        }
    })
}

fn path_in(text: &str, prot: &[Protected], win: Range<usize>) -> Option<Found> {
    for (r, tok) in ws_tokens(text, win) {
        // A quoted span may hold a path with spaces trimmed away; bare tokens inside a
        // longer quoted text (a command, a content string) are skipped.
        if let Some(p) = prot_at(prot, r.start) {
            if p.range.start == r.start {
                let inner = text[p.inner.clone()].trim();
                if path_like(inner) {
                    return Some(Found {
                        value: inner.to_string(),
                        range: p.range.clone(),
                    });
                }
            }
            continue;
        }
        let t = trim_token(tok);
        if path_like(t) {
            let off = tok.find(t).unwrap_or(0);
            return Some(Found {
                value: t.to_string(),
                range: r.start + off..r.start + off + t.len(),
            });
        }
    }
    None
}

fn command_in(text: &str, prot: &[Protected], win: Range<usize>) -> Option<Found> {
    let near = win.start..floor(text, (win.start + 60).min(win.end));
    if let Some(f) = quoted_in(prot, text, near.clone(), &[Quote::Backtick]) {
        return Some(f);
    }
    // `run the command "make"`
    let lead = text[win.clone()].to_lowercase();
    if lead.trim_start().starts_with("the command") || lead.trim_start().starts_with("command") {
        if let Some(f) = quoted_in(prot, text, near.clone(), &[Quote::Double, Quote::Single]) {
            return Some(f);
        }
    }
    // Unquoted: a known program right after the verb, up to the end of the clause.
    let toks = ws_tokens(text, win.clone());
    let mut k = 0;
    while k < toks.len() && ["the", "command", "a"].contains(&toks[k].1.to_lowercase().as_str()) {
        k += 1;
    }
    let (r0, first) = toks.get(k)?;
    if !KNOWN_BINS.contains(&trim_token(first)) || in_protected(prot, r0.start) {
        return None;
    }
    let mut end = r0.end;
    for (r, tok) in &toks[k + 1..] {
        let l = tok.to_lowercase();
        if [
            "to", "so", "in", "and", "then", "first", "now", "again", "for", "which", "because",
        ]
        .contains(&l.as_str())
        {
            break;
        }
        end = r.end;
        if tok.ends_with(['.', ',', ';']) {
            break;
        }
    }
    let v = trim_token(&text[r0.start..end]).to_string();
    Some(Found {
        value: v,
        range: r0.start..end,
    })
}

const QUERY_STOPS: &[&str] = &[
    " to see",
    " to find",
    " to get",
    " to check",
    " to learn",
    " to confirm",
    " to verify",
    " to know",
    " to understand",
    " to figure",
    " to answer",
    " to help",
    " so ",
    " and then",
    " then ",
    " because",
    " since",
    " using ",
    " via ",
    " with ",
    " in order",
    " first",
    " before ",
    " after ",
    " on the web",
    " online",
    " if ",
    " which ",
    " later",
    " again",
    " for the user",
    " for details",
];

fn query_in(text: &str, prot: &[Protected], win: Range<usize>) -> Option<Found> {
    let near = win.start..floor(text, (win.start + 70).min(win.end));
    if let Some(f) = quoted_in(
        prot,
        text,
        near,
        &[Quote::Double, Quote::Single, Quote::Backtick],
    ) {
        return Some(f);
    }
    let s = &text[win.clone()];
    let mut rest = s.trim_start();
    loop {
        let lower = rest.to_ascii_lowercase();
        let mut advanced = false;
        for pre in [
            "for ",
            "about ",
            "up ",
            "the web ",
            "web ",
            "the internet ",
            "internet ",
            "online ",
            "memory ",
            "the codebase ",
            "codebase ",
        ] {
            if lower.starts_with(pre) {
                rest = rest[pre.len()..].trim_start();
                advanced = true;
                if pre == "for " || pre == "about " {
                    return finish_query(text, rest, &win);
                }
                break;
            }
        }
        if !advanced {
            break;
        }
    }
    finish_query(text, rest, &win)
}

fn finish_query(text: &str, rest: &str, win: &Range<usize>) -> Option<Found> {
    let lower = rest.to_ascii_lowercase();
    let mut end = rest.len();
    for stop in QUERY_STOPS {
        if let Some(i) = lower.find(stop) {
            end = end.min(i);
        }
    }
    for (i, c) in rest.char_indices() {
        if i >= end {
            break;
        }
        let next = rest[i + c.len_utf8()..].chars().next();
        if matches!(c, ',' | ';' | ':' | '\n' | '(' | '"' | '`')
            || (matches!(c, '.' | '!' | '?') && next.is_none_or(char::is_whitespace))
        {
            end = i;
            break;
        }
    }
    let q = rest[..end].trim();
    let ql = q.to_lowercase();
    if q.chars().count() < 2
        || QUERY_REJECT.contains(&ql.as_str())
        || q.split_whitespace().count() > 12
    {
        return None;
    }
    let _ = win;
    let off = rest.as_ptr() as usize - text.as_ptr() as usize;
    Some(Found {
        value: q.to_string(),
        range: off..off + q.len(),
    })
}

fn pattern_in(text: &str, prot: &[Protected], win: Range<usize>) -> Option<Found> {
    let near = win.start..floor(text, (win.start + 60).min(win.end));
    if let Some(f) = quoted_in(
        prot,
        text,
        near,
        &[Quote::Double, Quote::Single, Quote::Backtick],
    ) {
        return Some(f);
    }
    let s = text[win.clone()].trim_start();
    let rest = s.strip_prefix("for ")?;
    let tok = rest.split_whitespace().next()?;
    let t = trim_token(tok);
    if t.len() < 2 {
        return None;
    }
    let off = rest.as_ptr() as usize - text.as_ptr() as usize;
    Some(Found {
        value: t.to_string(),
        range: off..off + tok.len(),
    })
}

fn glob_in(text: &str, prot: &[Protected], win: Range<usize>) -> Option<Found> {
    let is_glob = |s: &str| s.contains(['*', '?', '{']) && !s.contains(char::is_whitespace);
    let from = prot.partition_point(|p| p.range.start < win.start);
    for p in prot[from..].iter().take_while(|p| p.range.start < win.end) {
        let inner = text[p.inner.clone()].trim();
        if is_glob(inner) {
            return Some(Found {
                value: inner.to_string(),
                range: p.range.clone(),
            });
        }
    }
    for (r, tok) in ws_tokens(text, win) {
        if in_protected(prot, r.start) {
            continue;
        }
        let t = trim_token(tok);
        if is_glob(t) && t.len() > 1 {
            return Some(Found {
                value: t.to_string(),
                range: r,
            });
        }
    }
    None
}

/// `in src` / `in crates/` after the main argument.
fn in_dir(text: &str, prot: &[Protected], from: usize, end: usize) -> Option<Found> {
    let toks = ws_tokens(text, from..end);
    for w in toks.windows(2) {
        if w[0].1.eq_ignore_ascii_case("in") || w[0].1.eq_ignore_ascii_case("under") {
            let (r, tok) = (&w[1].0, w[1].1);
            if let Some(p) = prot_at(prot, r.start) {
                let inner = text[p.inner.clone()].trim();
                return path_like(inner).then(|| Found {
                    value: inner.to_string(),
                    range: p.range.clone(),
                });
            }
            let t = trim_token(tok);
            let simple = !t.is_empty()
                && t.chars().all(|c| c.is_alphanumeric() || "_-./".contains(c))
                && ![
                    "the", "a", "an", "this", "that", "our", "your", "all", "every", "order",
                    "case", "it", "them", "there", "here", "which", "each", "any", "its",
                ]
                .contains(&t.to_lowercase().as_str());
            if simple || path_like(t) {
                return Some(Found {
                    value: t.to_string(),
                    range: r.clone(),
                });
            }
            return None;
        }
    }
    None
}

fn extract_primary(kind: Kind, text: &str, prot: &[Protected], win: Range<usize>) -> Option<Found> {
    match kind {
        Kind::Url => {
            let near = win.start..floor(text, (win.start + 100).min(win.end));
            url_in(text, near)
        }
        Kind::Path | Kind::File => {
            let near = win.start..floor(text, (win.start + 60).min(win.end));
            path_in(text, prot, near).filter(|f| kind == Kind::Path || !f.value.ends_with('/'))
        }
        Kind::Command => command_in(text, prot, win),
        Kind::Query => query_in(text, prot, win),
        Kind::Pattern => pattern_in(text, prot, win),
        Kind::Glob => glob_in(text, prot, win),
        Kind::Text => {
            let near = win.start..floor(text, (win.start + 60).min(win.end));
            quoted_in(
                prot,
                text,
                near,
                &[Quote::Double, Quote::Single, Quote::Backtick],
            )
        }
    }
}

/// Further values of the same kind joined by "and" / "," (`run `a` and `b``).
fn more_of_kind(
    kind: Kind,
    text: &str,
    prot: &[Protected],
    mut after: usize,
    end: usize,
) -> Vec<Found> {
    static JOIN: LazyLock<Regex> = LazyLock::new(|| {
        ferroclaw_types::literal_regex(r"^\s*(?:,\s*(?:and\s+|then\s+)?|and\s+(?:then\s+)?)")
    });
    let mut out = Vec::new();
    if !matches!(kind, Kind::Command | Kind::Path | Kind::File | Kind::Url) {
        return out;
    }
    while after < end && out.len() < 8 {
        let Some(m) = JOIN.find(&text[after..end]) else {
            break;
        };
        let s = after + m.end();
        let tok_end = text[s..end]
            .find(char::is_whitespace)
            .map_or(end, |i| s + i);
        let f = match kind {
            Kind::Command => quoted_in(prot, text, s..s + 1, &[Quote::Backtick]),
            Kind::Path | Kind::File => path_in(text, prot, s..tok_end),
            _ => url_in(text, s..tok_end),
        };
        match f {
            Some(f) if f.range.start == s || f.range.start <= s + 1 => {
                after = f.range.end;
                out.push(f);
            }
            _ => break,
        }
    }
    out
}

// ---------------------------------------------------------------- main

struct Trigger {
    tok: usize,
    end: usize,
    profile: usize,
    by_name: bool,
    own: bool,
}

pub(crate) fn parse(text: &str, tools: &[ToolSpec], cfg: &ParserConfig) -> StrategyOutput {
    let mut out = StrategyOutput::default();
    let text = &text[..floor(text, MAX_TEXT)];
    let profs = profiles(tools, cfg);
    if profs.is_empty() || text.trim().is_empty() {
        return out;
    }
    let prot = protected_spans(text);
    let is_verb = |w: &str| {
        profs
            .iter()
            .any(|p| p.verbs.iter().any(|v| v[0] == w) || p.names.iter().any(|n| n == w))
    };
    for sent in sentences(text, &prot) {
        if out.calls.len() >= crate::MAX_CALLS {
            break;
        }
        if sentence_rejected(text, &sent) {
            continue;
        }
        let toks = tokens(text, sent.clone());
        for clause in clauses(text, sent.clone(), &toks, &prot, &is_verb) {
            let lo = toks.partition_point(|t| t.range.start < clause.start);
            let hi = toks.partition_point(|t| t.range.end <= clause.end).max(lo);
            let idx: Vec<usize> = (lo..hi).collect();
            let mut trigs: Vec<Trigger> = Vec::new();
            for &k in &idx {
                let t = &toks[k];
                if in_protected(&prot, t.range.start) || code_like(text, &t.range) {
                    continue;
                }
                for (pi, p) in profs.iter().enumerate() {
                    if p.names.contains(&t.lower) {
                        trigs.push(Trigger {
                            tok: k,
                            end: t.range.end,
                            profile: pi,
                            by_name: true,
                            own: true,
                        });
                        continue;
                    }
                    for v in &p.verbs {
                        if toks.len() >= k + v.len()
                            && v.iter().enumerate().all(|(j, w)| toks[k + j].lower == *w)
                            && toks[k + v.len() - 1].range.end <= clause.end
                        {
                            let end = toks[k + v.len() - 1].range.end;
                            let own = p.own_verbs.contains(v);
                            trigs.push(Trigger {
                                tok: k,
                                end,
                                profile: pi,
                                by_name: false,
                                own,
                            });
                            break;
                        }
                    }
                }
            }
            let mut k = 0;
            while k < trigs.len() && out.calls.len() < crate::MAX_CALLS {
                let tok = trigs[k].tok;
                let group: Vec<&Trigger> = trigs[k..].iter().take_while(|t| t.tok == tok).collect();
                k += group.len();
                let t_end = group
                    .iter()
                    .map(|t| t.end)
                    .max()
                    .unwrap_or(toks[tok].range.end);
                if !context_ok(text, &clause, &toks, tok, t_end) {
                    continue;
                }
                let verb_word = toks[tok].lower.as_str();
                let mut best: Option<(i32, Vec<ParsedCall>)> = None;
                for tr in &group {
                    let p = &profs[tr.profile];
                    let Some(calls) = build_calls(p, tr, text, &prot, &clause, &sent, cfg, tools)
                    else {
                        continue;
                    };
                    // Nouns between the verb and the argument ("search the codebase for").
                    let reach = calls.iter().map(|c| c.span.end).max().unwrap_or(t_end);
                    let noun_hits = idx
                        .iter()
                        .filter(|&&j| {
                            toks[j].range.start >= toks[tok].range.start
                                && toks[j].range.end <= reach
                                && !in_protected(&prot, toks[j].range.start)
                        })
                        .filter(|&&j| p.nouns.contains(&toks[j].lower))
                        .count() as i32;
                    if p.needs_noun && noun_hits == 0 && !tr.by_name {
                        continue;
                    }
                    let alias_hit = cfg
                        .aliases
                        .get(verb_word)
                        .is_some_and(|target| *target == p.tool.name);
                    let score = 2 * noun_hits
                        + i32::from(alias_hit)
                        + i32::from(tr.own)
                        + 3 * i32::from(tr.by_name);
                    if best.as_ref().is_none_or(|(s, _)| score > *s) {
                        best = Some((score, calls));
                    }
                }
                if let Some((_, calls)) = best {
                    out.calls.extend(calls);
                }
            }
        }
    }
    merge_subsets(&mut out.calls);
    out
}

/// `open(` / `.read()` / `os.read` / `--run` are code, not verbs.
fn code_like(text: &str, r: &Range<usize>) -> bool {
    let before = text[..r.start].chars().next_back();
    let after = text[r.end..].chars().next();
    let functions_prefix = text[..r.start].ends_with("functions.");
    matches!(after, Some('('))
        || (matches!(before, Some('.' | '/' | '-' | '$')) && !functions_prefix)
}

#[allow(clippy::too_many_arguments)]
fn build_calls(
    p: &Profile,
    tr: &Trigger,
    text: &str,
    prot: &[Protected],
    clause: &Range<usize>,
    sent: &Range<usize>,
    cfg: &ParserConfig,
    tools: &[ToolSpec],
) -> Option<Vec<ParsedCall>> {
    let clause = &(clause.start..floor(text, clause.end.min(tr.end + 2 * WINDOW)));
    let sent = &(floor(text, sent.start.max(tr.end.saturating_sub(WINDOW)))
        ..floor(text, sent.end.min(tr.end + 3 * WINDOW)));
    let win = tr.end..clause.end.max(tr.end);
    let start = tr.end.min(text.len());
    // Explicit JSON after a tool-name mention: `web_search {"query": "x"}`.
    if tr.by_name {
        let look = &text[start..floor(text, (start + 24).min(sent.end))];
        if let Some(i) = look.find('{') {
            if let Some((r, v)) = jsonscan::value_at(text, start + i) {
                if v.is_object() {
                    let c = make_call(&p.tool.name, v, 0.8, start..r.end, tools, cfg)?;
                    return Some(vec![c]);
                }
            }
        }
    }
    let first = extract_primary(p.kind, text, prot, win.clone())?;
    let mut found = vec![first];
    let last_end = found[0].range.end;
    found.extend(more_of_kind(p.kind, text, prot, last_end, clause.end));
    let strong = matches!(p.kind, Kind::Url)
        || text
            .get(found[0].range.clone())
            .is_some_and(|s| s.starts_with(['`', '"', '\'']));
    let conf = 0.6 + if strong { 0.1 } else { 0.0 } + if tr.by_name { 0.1 } else { 0.0 };
    let mut calls = Vec::new();
    for f in &found {
        let mut args = Map::new();
        args.insert(p.primary.clone(), Value::String(f.value.clone()));
        let mut span_end = f.range.end;
        for (prop, _) in p.tool.properties() {
            if prop == p.primary || args.contains_key(prop) {
                continue;
            }
            let lp = prop.to_ascii_lowercase();
            let extra = if ["content", "text", "body", "contents"].contains(&lp.as_str()) {
                content_in(text, prot, tr.end..sent.end, &f.range)
            } else if lp == "oldtext" || lp == "old_text" || lp == "old_string" {
                replace_in(text, sent.clone()).map(|(o, _)| o)
            } else if lp == "newtext" || lp == "new_text" || lp == "new_string" {
                replace_in(text, sent.clone()).map(|(_, n)| n)
            } else if lp == "path" && !matches!(p.kind, Kind::Path | Kind::File) {
                in_dir(text, prot, f.range.end, clause.end)
            } else {
                None
            };
            if let Some(e) = extra {
                span_end = span_end.max(e.range.end);
                args.insert(prop.to_string(), Value::String(e.value));
            }
        }
        let span = toks_start(tr, text)..span_end;
        if let Some(c) = make_call(&p.tool.name, Value::Object(args), conf, span, tools, cfg) {
            calls.push(c);
        }
    }
    (!calls.is_empty()).then_some(calls)
}

fn toks_start(tr: &Trigger, text: &str) -> usize {
    // The trigger token starts at most a few words before `end`; find the word start.
    let _ = tr.tok;
    let s = &text[..tr.end];
    s.rfind(|c: char| c.is_whitespace()).map_or(0, |i| i + 1)
}

fn content_in(
    text: &str,
    prot: &[Protected],
    win: Range<usize>,
    path: &Range<usize>,
) -> Option<Found> {
    if let Some(c) = CONTENT.captures(&text[win.clone()]) {
        let m = c.get(1).or_else(|| c.get(2)).or_else(|| c.get(3))?;
        return Some(Found {
            value: m.as_str().to_string(),
            range: win.start + m.start()..win.start + m.end(),
        });
    }
    // `write "hello" to hello.txt`: a quoted string between the verb and the path.
    if path.start > win.start {
        let between = win.start..path.start;
        return quoted_in(prot, text, between, &[Quote::Double, Quote::Single])
            .filter(|f| f.range.end <= path.start);
    }
    None
}

fn replace_in(text: &str, sent: Range<usize>) -> Option<(Found, Found)> {
    let c = REPLACE.captures(&text[sent.clone()])?;
    let o = c.get(1).or_else(|| c.get(2))?;
    let n = c.get(3).or_else(|| c.get(4))?;
    Some((
        Found {
            value: o.as_str().to_string(),
            range: sent.start + o.start()..sent.start + o.end(),
        },
        Found {
            value: n.as_str().to_string(),
            range: sent.start + n.start()..sent.start + n.end(),
        },
    ))
}

/// Drop a call whose arguments are a strict subset of another call to the same tool.
fn merge_subsets(calls: &mut Vec<ParsedCall>) {
    let n = calls.len();
    let mut keep = vec![true; n];
    for i in 0..n {
        for j in 0..n {
            if i == j || !keep[j] || calls[i].name != calls[j].name {
                continue;
            }
            let (Some(a), Some(b)) = (
                calls[i].arguments.as_object(),
                calls[j].arguments.as_object(),
            ) else {
                continue;
            };
            if a.len() < b.len() && a.iter().all(|(k, v)| b.get(k) == Some(v)) {
                keep[i] = false;
            }
        }
    }
    let mut it = keep.into_iter();
    calls.retain(|_| it.next().unwrap_or(true));
}
