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

mod antecedent;
mod cjk_named;
mod convert;
mod described;
mod hant;
mod managed;
mod proxy;
mod workbench;

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
        verbs: &["browse"],
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
    // Multi-agent handoffs (`transfer_to_summarizer`): the agent's noun decides which.
    Concept {
        keys: &["transfer", "handoff", "delegate"],
        verbs: &["transfer", "hand", "delegate", "forward"],
        nouns: &[],
    },
    // Claude Code's `Agent` (`Task`) tool: "let me spawn a subagent to …".
    Concept {
        keys: &["agent", "subagent"],
        verbs: &["spawn", "launch", "dispatch"],
        nouns: &["subagent", "subagents", "sub-agent"],
    },
    Concept {
        keys: &["memory", "memories", "remember", "notes"],
        verbs: &["search", "look up", "recall", "check"],
        nouns: &["memory", "memories", "notes"],
    },
];

/// Nouns of tool names and the words models use for the same things.
const NOUN_KIN: &[(&str, &[&str])] = &[
    ("event", &["appointment", "meeting"]),
    ("events", &["appointment", "meeting"]),
    // Names abbreviate what prose spells out (`list_dir`: "the directory").
    ("dir", &["directory", "folder"]),
    ("repo", &["repository"]),
    ("msg", &["message"]),
    ("env", &["environment"]),
    ("config", &["configuration"]),
];

/// `word` is a word models use for the name's noun `n` ("appointment" for `event`).
fn kin_of(n: &str, word: &str) -> bool {
    NOUN_KIN
        .iter()
        .any(|(noun, kin)| *noun == n && kin.iter().any(|k| names_noun(k, word)))
}

/// Words of tool names that are neither verb nor noun (`about_the_user`).
const NAME_FILLERS: &[&str] = &[
    "about", "the", "a", "an", "of", "to", "for", "with", "from", "in", "on", "my",
];

/// Nouns that tool names glue to their verb (`todowrite`, `webfetch`, `filesearch`).
const GLUED_NOUNS: &[&str] = &[
    "todo", "web", "file", "files", "code", "url", "page", "doc", "docs", "note", "notes",
    "memory", "task", "tasks", "image", "dir",
];

/// Gerunds of thinking, which a model says of itself all the time.
const THOUGHT_GERUNDS: &[&str] = &[
    "thinking",
    "reasoning",
    "reflecting",
    "planning",
    "considering",
    "understanding",
    "processing",
    "learning",
    "remembering",
];

/// Words of tool names that say what is done, not to what.
const NAME_VERBS: &[&str] = &[
    "get",
    "set",
    "fetch",
    "find",
    "search",
    "lookup",
    "look",
    "check",
    "create",
    "delete",
    "update",
    "list",
    "send",
    "run",
    "read",
    "write",
    "query",
    "calculate",
    "compute",
    "convert",
    "translate",
    "add",
    "remove",
    "make",
    "do",
    "call",
    "post",
    "put",
    "load",
    "open",
    "show",
    "current",
    "tool",
    "api",
    "function",
];
/// Nouns "search" makes a compound with ("search engine", "search results").
const SEARCH_COMPOUNDS: &[&str] = &[
    "engine",
    "engines",
    "bar",
    "box",
    "history",
    "field",
    "index",
    "ranking",
    "rankings",
    "optimization",
    "functionality",
    "feature",
    "features",
    "page",
    "console",
    "term",
    "terms",
    "result",
    "results",
    "algorithm",
    "algorithms",
    "space",
    "capability",
    "capabilities",
];
/// Verbs that ask a look-up tool for something.
const LOOKUP_VERBS: &[&str] = &[
    "check", "get", "fetch", "look up", "find", "retrieve", "find out", "query", "pull",
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
    /// A coordinate: a number, never a name read from prose.
    Number,
    Text,
}

/// Properties that hold a number whatever their schema type says.
const NUMERIC_NAMES: &[&str] = &["lat", "latitude", "lon", "lng", "long", "longitude"];

fn numeric_prop(tool: &ToolSpec, prop: &str) -> bool {
    matches!(tool.prop_type(prop), Some("integer" | "number"))
        || NUMERIC_NAMES.contains(&prop.to_ascii_lowercase().as_str())
}

struct Profile<'a> {
    tool: &'a ToolSpec,
    verbs: Vec<Vec<String>>,
    /// Verbs of concepts named by the tool's own name or aliases (not its description).
    own_verbs: Vec<Vec<String>>,
    nouns: Vec<String>,
    names: Vec<String>,
    /// Names of two words or more as prose writes them ("the no args tool").
    spaced: Vec<Vec<String>>,
    primary: String,
    kind: Kind,
    needs_noun: bool,
    /// The generic look-up verbs count only with a noun of the tool's name.
    lookup_needs_noun: bool,
    /// A tool that makes something of its own (`create_goal`): the words of its name
    /// that say what, which its verb needs ("create a file" makes no goal).
    made_nouns: Vec<String>,
}

fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase())
        .collect()
}

fn kind_of(tool: &ToolSpec, prop: &str) -> Kind {
    let p = prop.to_ascii_lowercase();
    let desc = tool.prop_description(prop).to_lowercase();
    let tname = tool.name.to_lowercase();
    if NUMERIC_NAMES.contains(&p.as_str()) {
        Kind::Number
    } else if p.contains("url") || p.contains("uri") || p == "link" || p == "href" {
        Kind::Url
    } else if p.contains("path") || p.contains("file") || p == "dir" || p == "directory" {
        let d = tool.description.to_lowercase();
        if p.contains("dir") || d.contains("director") || d.contains("folder") {
            Kind::Path
        } else {
            Kind::File
        }
    } else if (p.contains("command") || p == "cmd" || p == "script")
        // (`str_replace_editor`'s `command` is one of view / create / str_replace.)
        && tool.prop(prop).and_then(|d| d.get("enum")).is_none()
    {
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

/// The longest prefix (up to one of `seps`) the tool's name shares with another offered
/// tool's.
fn shared_prefix_of<'a>(t: &'a ToolSpec, tools: &[ToolSpec], seps: &[char]) -> Option<&'a str> {
    t.name
        .char_indices()
        .filter(|(_, c)| seps.contains(c))
        .map(|(i, _)| &t.name[..=i])
        .rfind(|p| {
            tools
                .iter()
                .any(|o| o.name != t.name && o.name.starts_with(p))
        })
}

fn profiles<'a>(tools: &'a [ToolSpec], cfg: &ParserConfig) -> Vec<Profile<'a>> {
    tools
        .iter()
        .map(|t| {
            // A tool without arguments (`get_todays_date`) is called by its name alone.
            let mut primary = t.primary_property().unwrap_or_default().to_string();
            let mut kind = kind_of(t, &primary);
            // `search_code(folder_path, query)`: what a search is asked for is its query,
            // the folder only where.
            if matches!(kind, Kind::Path | Kind::File)
                && crate::schema::name_words(&t.name)
                    .iter()
                    .any(|w| matches!(w.as_str(), "search" | "grep" | "find" | "lookup"))
            {
                let asked = t.required().into_iter().find_map(|p| {
                    let k = kind_of(t, p);
                    matches!(k, Kind::Query | Kind::Pattern).then_some((p, k))
                });
                if let Some((q, k)) = asked {
                    primary = q.to_string();
                    kind = k;
                }
            }
            let mut names: Vec<String> = vec![t.name.to_lowercase()];
            names.extend(t.aliases.iter().map(|a| a.to_lowercase()));
            if t.name.contains('-') {
                names.push(t.name.to_lowercase().replace('-', "_"));
            }
            // ToolBench's `<endpoint>_for_<api>`: "the cep_brazil tool", when no other
            // offered tool belongs to that API.
            if let Some((_, api)) = t.name.rsplit_once("_for_").filter(|(_, a)| a.len() > 2) {
                let shared = tools
                    .iter()
                    .filter(|o| o.name.rsplit_once("_for_").is_some_and(|(_, b)| b == api))
                    .count();
                if shared == 1 {
                    names.push(api.to_lowercase());
                }
            }
            // A server's prefix several offered tools share (`chrome-devtools_type_text`,
            // `chrome-devtools_click`): "使用 type_text" names the tool by its own part,
            // when that part is written as code is (`type_text`) and no other tool has it.
            // (`amap-amap-sse-maps_geo` beside `…-maps_distance`: "the maps_geo function",
            // the part after the server's own name, as well as after the longest prefix.)
            let prefixes = [
                shared_prefix_of(t, tools, &['-']),
                shared_prefix_of(t, tools, &['-', '_']),
            ];
            for local in prefixes.into_iter().flatten().map(|p| &t.name[p.len()..]) {
                let unique = tools.iter().filter(|o| o.name.ends_with(local)).count() == 1;
                if local.contains('_') && local.len() >= 6 && unique {
                    names.push(local.to_lowercase());
                }
            }
            // MCP-style namespaces (`developer__text_editor`): the model says the tool's
            // own part ("the text editor tool").
            if let Some((_, local)) = t.name.rsplit_once("__").filter(|(_, l)| l.len() > 2) {
                names.push(local.to_lowercase());
            }
            for (alias, target) in &cfg.aliases {
                if target == &t.name && (alias.contains('_') || alias.contains('.')) {
                    names.push(alias.to_lowercase());
                }
            }
            let mut name_keys: Vec<String> = crate::schema::name_words(&t.name);
            for a in &t.aliases {
                name_keys.extend(words(a));
            }
            // `todowrite`, `webfetch`: a word of the name that glues a noun to a concept's
            // key holds that key (not `dispatch`, `preview`, `checklist`).
            let glued: Vec<String> = name_keys
                .iter()
                .flat_map(|w| {
                    CONCEPTS.iter().flat_map(|c| c.keys).filter(move |k| {
                        k.len() >= 4
                            && w.strip_suffix(*k)
                                .is_some_and(|noun| GLUED_NOUNS.contains(&noun))
                    })
                })
                .map(|k| k.to_string())
                .collect();
            name_keys.extend(glued);
            let mut keys: Vec<String> = name_keys.clone();
            for n in &names {
                keys.extend(words(n));
            }
            keys.extend(words(&t.description).into_iter().take(16));
            let mut verbs: Vec<Vec<String>> = Vec::new();
            let mut nouns: Vec<String> = Vec::new();
            let mut own_verbs: Vec<Vec<String>> = Vec::new();
            // A name with a concept of its own (`todowrite`) is not also every concept its
            // description's nouns name ("a structured task list").
            let named_concept = CONCEPTS
                .iter()
                .any(|c| c.keys.iter().any(|k| name_keys.iter().any(|w| w == k)));
            for c in CONCEPTS {
                let own = c.keys.iter().any(|k| name_keys.iter().any(|w| w == k));
                if own {
                    own_verbs.extend(
                        c.verbs
                            .iter()
                            .map(|v| v.split(' ').map(str::to_string).collect()),
                    );
                }
                let described = c.keys.iter().any(|k| keys.iter().any(|w| w == k));
                if own || (described && !named_concept) {
                    for v in c.verbs {
                        let v: Vec<String> = v.split(' ').map(str::to_string).collect();
                        if !verbs.contains(&v) {
                            verbs.push(v);
                        }
                    }
                    nouns.extend(c.nouns.iter().map(|s| s.to_string()));
                }
            }
            // Unknown tools (`get_weather`, `weather`, `get_boiling_point`): the verb of
            // the name and the usual look-up verbs trigger, but only together with a
            // noun of the name ("check the weather in Florence").
            let needs_noun = keys
                .iter()
                .any(|k| ["memory", "memories", "notes"].contains(&k.as_str()));
            let mut lookup_needs_noun = false;
            let mut made_nouns: Vec<String> = Vec::new();
            // No concept in the name (`weather`, `get_boiling_point`), whatever the
            // description matched: the name's own words lead.
            if own_verbs.is_empty() {
                let name_words = crate::schema::name_words(&t.name);
                // `redis-set`, `redis-get`: a first word other offered tools share, and no
                // verb, is the server's namespace ("Redis key `a` was updated").
                let namespace = name_words.len() > 1
                    && name_words.first().is_some_and(|w| {
                        !NAME_VERBS.contains(&w.as_str())
                            && !CONCEPTS.iter().any(|c| c.verbs.contains(&w.as_str()))
                    })
                    && tools.iter().any(|o| {
                        o.name != t.name
                            && crate::schema::name_words(&o.name).first() == name_words.first()
                    });
                // `about_the_user`: a preposition is no verb; nor is an abbreviation
                // (`sc_celltypist`, `db_lookup`).
                // (`HassTurnOn`: its verb is the phrasal one, below.)
                let phrasal = namespace
                    && name_words
                        .get(2)
                        .is_some_and(|w| PARTICLES.contains(&w.as_str()));
                let verb = name_words.get(usize::from(namespace)).filter(|w| {
                    !phrasal
                        && w.len() > 2
                        && !verbs.contains(&vec![(*w).clone()])
                        && !NAME_FILLERS.contains(&w.as_str())
                });
                if let Some(w) = verb {
                    verbs.push(vec![w.clone()]);
                }
                let name_nouns: Vec<String> = name_words
                    .iter()
                    .filter(|w| !NAME_VERBS.contains(&w.as_str()) && w.len() > 2)
                    .cloned()
                    .collect();
                if let Some(w) = name_words.first() {
                    own_verbs.push(vec![w.clone()]);
                }
                // `restaurant_booking`: a gerund of the name says its verb ("book"). Not a
                // verb of thought (`sequential_thinking`: "Let me think" is no call).
                for g in name_words.iter().filter(|w| w.len() > 6 && w.is_ascii()) {
                    if THOUGHT_GERUNDS.contains(&g.as_str()) {
                        continue;
                    }
                    let Some(stem) = g.strip_suffix("ing") else {
                        continue;
                    };
                    let b = stem.as_bytes();
                    let undoubled = (b.len() > 2 && b[b.len() - 1] == b[b.len() - 2])
                        .then(|| stem[..stem.len() - 1].to_string());
                    for v in [Some(stem.to_string()), undoubled, Some(format!("{stem}e"))]
                        .into_iter()
                        .flatten()
                    {
                        let v = vec![v];
                        if !verbs.contains(&v) {
                            verbs.push(v.clone());
                            own_verbs.push(v);
                        }
                    }
                }
                if !name_nouns.is_empty() {
                    for v in LOOKUP_VERBS {
                        let v: Vec<String> = v.split(' ').map(str::to_string).collect();
                        if !verbs.contains(&v) {
                            verbs.push(v);
                        }
                    }
                    nouns.extend(name_nouns);
                    lookup_needs_noun = true;
                }
            } else {
                let makes = own_verbs
                    .iter()
                    .any(|v| ["create", "write", "save", "store"].contains(&v[0].as_str()));
                // A tool that lists (`list_calendar_events`) or hands over to an agent
                // (`transfer_to_invoice_information_subagent`) is also what "check the
                // calendar" or "get your invoice information" means, with a noun of its
                // name.
                let reads = own_verbs
                    .iter()
                    .any(|v| v[0] == "list" || v[0] == "transfer");
                // `DocumentSearchTool`: the words of the name beside its concept's
                // ("searching the document") tell it from the other searches.
                let name_ws = crate::schema::name_words(&t.name);
                for w in name_ws.iter().cloned() {
                    let generic = NAME_VERBS.contains(&w.as_str())
                        || NAME_FILLERS.contains(&w.as_str())
                        || ["tool", "tools", "function", "api"].contains(&w.as_str())
                        || CONCEPTS.iter().any(|c| c.keys.contains(&w.as_str()));
                    if w.len() > 2 && !generic && !nouns.contains(&w) {
                        if makes {
                            made_nouns.push(w.clone());
                        }
                        nouns.push(w);
                        if reads && !lookup_needs_noun {
                            lookup_needs_noun = true;
                            for v in LOOKUP_VERBS {
                                let v: Vec<String> = v.split(' ').map(str::to_string).collect();
                                if !verbs.contains(&v) {
                                    verbs.push(v);
                                }
                            }
                        }
                    }
                }
                // What a making tool makes is named after its verb (`git_create_branch`
                // makes a branch, not a git); when no word after it says what, the others
                // do (`todo_write`).
                let verb = name_ws
                    .iter()
                    .position(|w| ["create", "write", "save", "store"].contains(&w.as_str()));
                if let Some(after) = verb.map(|v| &name_ws[v + 1..]) {
                    if made_nouns.iter().any(|w| after.contains(w)) {
                        made_nouns.retain(|w| after.contains(w));
                    }
                }
            }
            // `HassTurnOff`: a verb and its particle in the name are a verb of the tool.
            let name_words = crate::schema::name_words(&t.name);
            for pair in name_words.windows(2) {
                if PARTICLES.contains(&pair[1].as_str())
                    && !NAME_FILLERS.contains(&pair[0].as_str())
                {
                    let v = pair.to_vec();
                    if !verbs.contains(&v) {
                        verbs.push(v.clone());
                        own_verbs.push(v);
                    }
                }
            }
            // (`sqlite-list_tables` is written as the tokens `sqlite` and `list_tables`.)
            let spaced = names
                .iter()
                .map(|n| words(n))
                .chain(names.iter().filter(|n| n.contains('-')).map(|n| {
                    n.split('-')
                        .filter(|w| !w.is_empty())
                        .map(str::to_string)
                        .collect()
                }))
                .filter(|w: &Vec<String>| w.len() >= 2)
                .collect();
            Profile {
                tool: t,
                verbs,
                own_verbs,
                nouns,
                names,
                spaced,
                primary,
                kind,
                needs_noun,
                lookup_needs_noun,
                made_nouns,
            }
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
        // A fence's ``` opens no quotation (what is in code fences is judged apart).
        let run = chars[i..].iter().take_while(|x| x.1 == '`').count();
        if run >= 3 {
            i += run;
            continue;
        }
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
/// The longest sentence read as one.
const MAX_SENTENCE: usize = 2_000;

fn sentences(text: &str, prot: &[Protected]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut iter = text.char_indices().peekable();
    while let Some((i, c)) = iter.next() {
        let next = iter.peek().map(|x| x.1);
        // A closing tag (`Paris.</reasoning>`) ends a sentence too.
        let closing_tag = c == '<' && next == Some('/');
        // (A run of words with no stop is cut every few thousand bytes: what is read per
        // trigger looks over its sentence, and a sentence that never ends would make a
        // text of many triggers quadratic.)
        let overlong = i - start >= MAX_SENTENCE && c.is_whitespace();
        let boundary = closing_tag
            || overlong
            || match c {
                '\n' => !soft_wrap(text, i),
                '\u{3002}' | '\u{ff01}' | '\u{ff1f}' | '\u{ff1b}' => true,
                '.' | '!' | '?' | ';' => next.is_none_or(|n| n.is_whitespace() || n == '<'),
                _ => false,
            };
        if boundary && !in_protected(prot, i) {
            let end = if closing_tag { i } else { i + c.len_utf8() };
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

/// A line break inside a hard-wrapped paragraph ("This library provides multiple
/// pattern\nsearch principally through …"): a long line that stops mid-sentence and a
/// next line that goes on in lower case. The break ends no sentence.
fn soft_wrap(text: &str, nl: usize) -> bool {
    let line = &text[line_start(text, nl)..nl];
    let next = &text[nl + 1..];
    line.trim_end().len() >= 60
        && !line.trim_start().starts_with(['#', '|', '>'])
        && line
            .trim_end()
            .ends_with(|c: char| c.is_ascii_alphanumeric() || c == ',')
        && next
            .trim_start_matches([' ', '\t'])
            .starts_with(|c: char| c.is_ascii_lowercase())
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
    // Chinese and Japanese run into Latin names without a space
    // ("我需要使用code_interpreter"): a change of script ends a word.
    let mut cjk_run = false;
    for (i, c) in s.char_indices() {
        if is_w(c) {
            let cjk = is_cjk(c);
            if start.is_some() && cjk != cjk_run {
                if let Some(st) = start.take() {
                    push_tok(&mut out, s, st, i, range.start);
                }
            }
            if start.is_none() {
                start = Some(i);
                cjk_run = cjk;
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

/// Where the line holding byte `pos` starts.
pub(crate) fn line_start(text: &str, pos: usize) -> usize {
    text[..pos].rfind('\n').map_or(0, |i| i + 1)
}

/// "Let me start by searching for …": the gerund after "by" is the verb the model
/// commits to, read as its base form when a tool has that verb (whether it commits is
/// still the context's to say).
/// ("… by exploring the structure and finding all Python files": each gerund joined by
/// "and" a few words on.)
fn gerunds_as_verbs(toks: &mut [Tok], is_verb: &dyn Fn(&str) -> bool) {
    let mut chain_until = 0;
    for k in 0..toks.len() {
        // ("We can do this by checking the Wikipedia page for Joe Orton.")
        // ("Getting the name of the current day...": a sentence that opens with it.)
        // (Not a gerund that is the subject: "Running `rm -rf /` would be catastrophic.")
        let announced = k == 0
            && !toks[1..].iter().any(|t| {
                matches!(
                    t.lower.as_str(),
                    "is" | "are"
                        | "was"
                        | "were"
                        | "be"
                        | "would"
                        | "could"
                        | "will"
                        | "can"
                        | "might"
                        | "may"
                        | "should"
                        | "seems"
                        | "requires"
                        | "needs"
                )
            });
        // ("Let's move on to describing the table", "proceed with listing", "start
        // searching".)
        let prev = |back: usize| k.checked_sub(back).map(|i| toks[i].lower.as_str());
        let lead = announced
            || matches!(prev(1), Some("by" | "start" | "begin" | "continue"))
            // "I'm checking the weather for you!": the model says what it is doing.
            || matches!(prev(1), Some("i'm" | "i\u{2019}m" | "we're" | "we\u{2019}re"))
            || (prev(1) == Some("am") && prev(2) == Some("i"))
            || (prev(1) == Some("to") && prev(2) == Some("on"))
            || (prev(1) == Some("with") && matches!(prev(2), Some("proceed" | "continue")));
        // "I will proceed with the cancellation of reservation FDZ0T5": the action named
        // as a noun.
        let nominal = prev(1) == Some("the")
            && prev(2) == Some("with")
            && matches!(prev(3), Some("proceed" | "continue" | "ahead"));
        if nominal {
            let w = toks[k].lower.as_str();
            let base = ["ation", "ition", "ion", "ment", "al"]
                .iter()
                .find_map(|suf| w.strip_suffix(suf).filter(|s| s.len() > 2))
                .and_then(|stem| verb_of_stem(stem, is_verb));
            if let Some(base) = base {
                toks[k].lower = base;
            }
            continue;
        }
        if lead {
            chain_until = k + 8;
        } else if !(k > 0 && k <= chain_until && toks[k - 1].lower == "and") {
            continue;
        }
        let Some(stem) = toks[k].lower.strip_suffix("ing") else {
            continue;
        };
        // "running" -> "run", "creating" -> "create", "searching" -> "search".
        if let Some(base) = verb_of_stem(stem, is_verb) {
            toks[k].lower = base;
        }
    }
}

/// The verb a stem stands for, when a tool has it: the stem itself, without a doubled
/// last letter ("runn", "cancell"), or with an "e" ("creat").
fn verb_of_stem(stem: &str, is_verb: &dyn Fn(&str) -> bool) -> Option<String> {
    let mut last = stem.chars().rev();
    let doubled = stem.len() > 2
        && matches!((last.next(), last.next()), (Some(a), Some(b)) if a == b && a.is_ascii());
    let undoubled = doubled.then(|| stem[..stem.len() - 1].to_string());
    [Some(stem.to_string()), undoubled, Some(format!("{stem}e"))]
        .into_iter()
        .flatten()
        .find(|w| is_verb(w))
}

/// Particles of phrasal verbs that tool names hold (`HassTurnOff`, `switch_on`).
const PARTICLES: &[&str] = &["on", "off", "up", "down"];

/// Where the verb `v` written from token `k` ends inside the clause: its words in a
/// row, or a phrasal verb split by its object at the clause's end ("turn those off").
fn verb_end(toks: &[Tok], k: usize, v: &[String], clause_end: usize) -> Option<usize> {
    if words_at(toks, k, v) {
        let end = toks[k + v.len() - 1].range.end;
        return (end <= clause_end).then_some(end);
    }
    let [verb, particle] = v else { return None };
    if toks[k].lower != *verb || !PARTICLES.contains(&particle.as_str()) {
        return None;
    }
    let last = toks.partition_point(|t| t.range.end <= clause_end);
    (k + 2..last.min(k + 5))
        .find(|&j| toks[j].lower == *particle)
        .filter(|&j| {
            toks.get(j + 1).is_none_or(|n| {
                n.range.end > clause_end
                    || !n.lower.starts_with(char::is_alphanumeric)
                    || ["now", "for", "please"].contains(&n.lower.as_str())
            })
        })
        .map(|j| toks[j].range.end)
}

/// Whether the words `w` are the tokens from `k` on.
fn words_at(toks: &[Tok], k: usize, w: &[String]) -> bool {
    toks.len() >= k + w.len() && w.iter().enumerate().all(|(j, x)| toks[k + j].lower == *x)
}

/// `get_weather`, `getWeather`: a word written the way code names things.
fn identifier_shaped(word: &str) -> bool {
    word.contains('_') || word.chars().skip(1).any(|c| c.is_ascii_uppercase())
}

fn is_cjk(c: char) -> bool {
    matches!(c, '\u{3040}'..='\u{30ff}' | '\u{3400}'..='\u{4dbf}' | '\u{4e00}'..='\u{9fff}' | '\u{ac00}'..='\u{d7af}' | '\u{f900}'..='\u{faff}')
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
    "perhaps",
    "possibly",
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
const POST_PAST: &[&str] = &["already", "earlier", "previously", "failed"];
/// A call already made: "I called get_x for now and get_y for tomorrow".
const PRE_PAST: &[&str] = &[
    "called",
    "used",
    "invoked",
    "ran",
    "executed",
    "tried",
    "attempted",
];
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

/// Whether words before a tool's mention negate it, make it hypothetical or past, or
/// hand it to the reader ("you could search"). The reader as an object is no such cue:
/// "I'll help you create …", "… in your current directory".
fn refusing<'a>(ws: impl Iterator<Item = &'a str>) -> bool {
    let mut prev = "";
    let mut ws = ws.peekable();
    while let Some(w) = ws.next() {
        let next = ws.peek().copied().unwrap_or("");
        let objective = match w {
            "you" => matches!(prev, "help" | "for" | "assist" | "show" | "to" | "with"),
            "your" => matches!(
                prev,
                "in" | "into" | "from" | "to" | "for" | "on" | "at" | "of" | "with" | "about"
            ),
            // The users' request reported: "Since they asked for three rolls, …".
            "they" => matches!(
                next,
                "asked" | "want" | "wanted" | "requested" | "said" | "mentioned" | "specified"
            ),
            _ => false,
        };
        if !objective
            && (NEG.contains(&w) || w.ends_with("n't") || HYP.contains(&w) || PRE_PAST.contains(&w))
        {
            return true;
        }
        prev = w;
    }
    false
}

/// "* \[[`e52f047`](…/commit/e52f047)] - **tools**: update certdata.txt (Luigi Pinca)
/// [#45490](…/pull/45490)": a list item that links a commit or a pull request records a
/// change made, it takes no step.
fn changelog_entry(text: &str, pos: usize) -> bool {
    let start = line_start(text, pos);
    let end = text[pos..].find('\n').map_or(text.len(), |i| pos + i);
    let line = &text[start..end];
    list_item(line)
        && ["/commit/", "/pull/", "/issues/", "/compare/"]
            .iter()
            .any(|p| line.contains(p) && line.contains("]("))
}

/// `- [Search for tuples by type](https://…)`, `see [`search`](#search)`: the words of a
/// Markdown link name a page, they ask nothing to be done.
fn in_link_label(text: &str, pos: usize) -> bool {
    let start = line_start(text, pos);
    // (The mention may begin at the bracket itself.)
    let upto = if text[pos..].starts_with('[') {
        pos + 1
    } else {
        pos
    };
    let Some(open) = text[start..upto].rfind('[') else {
        return false;
    };
    if text[start + open..upto].contains(']') {
        return false;
    }
    let rest = &text[upto..];
    let line = &rest[..rest.find('\n').unwrap_or(rest.len())];
    // `[…](url)`, `[…][ref]`, and a reference's definition `[Google Test]: https://…`.
    line.find(']').is_some_and(|i| {
        line[i + 1..].starts_with(['(', '[']) || line[i + 1..].starts_with(": http")
    })
}

/// "Rustc will now search for custom targets", "the script can then read the file": a
/// modal whose subject is someone or something other than the model (or its next
/// step) tells what that one does.
/// Modals whose subject says whose step it is.
const MODALS: &[&str] = &["will", "can", "should", "must", "shall"];

fn others_modal(pre: &[&Tok]) -> bool {
    let Some(m) = pre.iter().rposition(|t| MODALS.contains(&t.lower.as_str())) else {
        return false;
    };
    m > 0
        && !matches!(
            pre[m - 1].lower.as_str(),
            "i" | "we"
                | "then"
                | "also"
                | "now"
                | "first"
                | "next"
                | "so"
                | "and"
                | "that"
                // "the tool call should be …", "the next step will be to …": the
                // model's own next move.
                | "call"
                | "step"
                | "action"
                | "plan"
        )
}

/// "the `get_weather` function from the provided code snippet": the words after a
/// mention say it is code's, not an offered tool.
fn from_code(after: &[&str]) -> bool {
    after
        .iter()
        .take(3)
        .position(|w| *w == "from")
        .is_some_and(|i| {
            after[i + 1..].iter().take(4).any(|w| {
                matches!(
                    *w,
                    "code" | "script" | "snippet" | "module" | "library" | "package"
                )
            })
        })
}

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
    if refusing(pre_toks.iter().map(|p| p.lower.as_str())) {
        return false;
    }
    if others_modal(&pre_toks) {
        return false;
    }
    // "the installer can then run …": the clause split at "then" left the modal and
    // its subject before it.
    let ext: Vec<&Tok> = toks[lo.saturating_sub(3).min(t)..t].iter().collect();
    if let Some(m) = ext.iter().rposition(|x| MODALS.contains(&x.lower.as_str())) {
        let adverbs_only = ext[m + 1..].iter().all(|x| {
            matches!(
                x.lower.as_str(),
                "then" | "also" | "now" | "first" | "just" | "simply"
            )
        });
        if adverbs_only && m + 1 < ext.len() && others_modal(&ext[..=m]) {
            return false;
        }
    }
    let post: Vec<&str> = post_toks.map(|p| p.lower.as_str()).collect();
    // ("Running the command failed": a report. "Retry the search that failed": not.)
    if post.iter().enumerate().any(|(i, w)| {
        POST_PAST.contains(w)
            && !(*w == "failed" && i > 0 && matches!(post[i - 1], "that" | "which"))
    }) {
        return false;
    }
    // "… I can help you find the weather if you'd like!": an offer to the reader.
    if post
        .windows(2)
        .any(|w| w[0] == "if" && matches!(w[1], "you" | "you'd" | "you're" | "you'll"))
    {
        return false;
    }
    if from_code(&post) {
        return false;
    }
    // "search works across crates", "the search is faster now": the word is a noun,
    // the subject of the verb after it.
    if !trig.lower.ends_with("ing")
        && post.first().is_some_and(|w| {
            matches!(
                *w,
                "is" | "was"
                    | "works"
                    | "has"
                    | "does"
                    | "seems"
                    | "returns"
                    | "results"
                    | "fails"
                    | "failed"
                    | "succeeded"
                    | "takes"
                    | "gives"
            )
        })
    {
        return false;
    }
    // "a tool like Wolfram Alpha", "something such as a web search": an example.
    let n = pre_toks.len();
    if n >= 1 && pre_toks[n - 1].lower == "like"
        || n >= 2 && pre_toks[n - 2].lower == "such" && pre_toks[n - 1].lower == "as"
    {
        return false;
    }
    if advice_item(text, trig.range.start) {
        return false;
    }
    // "- get_weather: for getting the weather": a definition, not an intent. (Not a
    // phrasal verb split by its object: "Let me turn those off:".)
    let split_verb = text[trig.range.start..t_end].split_whitespace().count() > 2;
    if !split_verb
        && text[t_end..]
            .trim_start_matches(['*', '`', '"', '\''])
            .starts_with(':')
    {
        return false;
    }
    if let Some(prev) = pre_toks.last() {
        let followed_by_tool = toks[t..]
            .iter()
            .find(|x| x.range.start >= t_end)
            // (A ReAct prompt calls its tools actions: "use the 'wikipedia' action".)
            .is_some_and(|x| {
                matches!(
                    x.lower.as_str(),
                    "tool" | "function" | "functions" | "action"
                )
            })
            // A name written as words may end with the word itself ("the no args tool").
            || toks[t..]
                .iter()
                .take_while(|x| x.range.end <= t_end)
                .last()
                .is_some_and(|x| x.range.end == t_end && matches!(x.lower.as_str(), "tool" | "function"))
            // "the OpenMeteoTool", "the get_weather": written as an identifier.
            || identifier_shaped(&text[trig.range.clone()])
            // "use the structured data assistant": a name of several words as the
            // object of "use".
            || (t_end > trig.range.end
                && pre_toks.len() >= 2
                && matches!(
                    pre_toks[pre_toks.len() - 2].lower.as_str(),
                    "use" | "using" | "call" | "invoke"
                ));
        // ("proceed with the cancellation": the noun was read as its verb.)
        let nominal = || {
            text[trig.range.clone()]
                .to_lowercase()
                .replace('\u{2019}', "'")
                != trig.lower
        };
        if BEFORE_BLOCK.contains(&prev.lower.as_str()) && !followed_by_tool && !nominal() {
            return false;
        }
    }
    // Imperative: nothing but discourse words (or a label ending in ':') before the verb.
    let pre = text[clause.start..trig.range.start].to_lowercase();
    // ("Recommended follow-up — Run `npm audit fix`": an advice label before a dash.)
    // (Within a window: a text with no sentence end would make this quadratic.)
    let from = floor(text, trig.range.start.saturating_sub(300));
    let sentence_pre = last_sentence(&text[from..trig.range.start]).to_lowercase();
    // "I should tell the user to run `ls -la` themselves": the user's step, not the model's.
    let ws = words(&sentence_pre);
    let users_step = ws.iter().enumerate().any(|(i, w)| {
        matches!(
            w.as_str(),
            "tell"
                | "ask"
                | "advise"
                | "suggest"
                | "instruct"
                | "recommend"
                | "remind"
                | "encourage"
                | "guide"
        ) && ws[i + 1..].iter().take(3).any(|x| {
            matches!(
                x.as_str(),
                "user" | "users" | "you" | "them" | "him" | "her" | "customer" | "reader"
            )
        })
    });
    if users_step {
        return false;
    }
    let dashed_advice = sentence_pre
        .rsplit_once(['—', '–'])
        .is_some_and(|(l, rest)| {
            let l = l.trim_end_matches(|c: char| !c.is_alphanumeric());
            words(rest).iter().all(|w| DISCOURSE.contains(&w.as_str()))
                && ADVICE_LABELS.iter().any(|w| l.ends_with(w))
        });
    if dashed_advice {
        return false;
    }
    let after_colon = pre.rsplit(':').next().unwrap_or("");
    let imperative = words(after_colon)
        .iter()
        .all(|w| DISCOURSE.contains(&w.as_str()));
    if imperative {
        // ("**Next Steps:** Run `node x.js` …", "Usage: run …": a label over steps for the
        // reader.)
        let label = pre
            .rsplit_once(':')
            .map(|(l, _)| l.trim_matches(|c: char| c.is_whitespace() || c == '*' || c == '_'));
        if label.is_some_and(|l| {
            let l = l.trim_end_matches(|c: char| !c.is_alphanumeric());
            ADVICE_LABELS.iter().any(|w| l.ends_with(w))
        }) {
            return false;
        }
        // ("list peers supports `?peer_type=`": the verb's words are the subject of a
        // statement, not an order.)
        return !subject_of_statement(&text[trig.range.end..clause.end.max(trig.range.end)]);
    }
    // ("The question implies the need to find …": a noun, not the model's need.)
    let pre_norm = pre.replace('\u{2019}', "'").replace("the need to", "");
    // ("This is a JSON response for a function call to `x`": a call named as a thing,
    // not made — unless the model makes it, "let me make a call to `x`".)
    let named_call = [
        "a function call to",
        "a tool call to",
        "the function call to",
        "the tool call to",
        "a call to",
        "the call to",
    ]
    .iter()
    .find_map(|n| {
        pre_norm
            .trim_end_matches(|c: char| c.is_whitespace() || matches!(c, '`' | '"' | '\'' | '*'))
            .strip_suffix(n)
    });
    if let Some(before) = named_call {
        // ("I'll start with a call to `read`", "Next step: a call to `read`".)
        let made = [
            "make", "making", "issue", "issuing", "perform", "place", "do", "with", ":",
        ]
        .iter()
        .any(|v| before.trim_end().ends_with(v));
        if !made {
            return false;
        }
    }
    // "I'm checking the weather for you": the progressive reports what is being done.
    let progressive = text[trig.range.clone()].ends_with("ing")
        && ["i'm", "i am", "we're", "we are"]
            .iter()
            .any(|c| pre_norm.trim_end().ends_with(c) && has_phrase(&pre_norm, c));
    progressive
        || POS.iter().any(|cue| has_phrase(&pre_norm, cue))
        || cjk_commits(&pre, &text[trig.range.end..])
        || ru_commits(&pre)
}

/// Labels over steps for the reader ("**Next Steps:** Run `x`", "To verify: run …").
const ADVICE_LABELS: &[&str] = &[
    "next steps",
    "what's next",
    "usage",
    "how to use",
    "how to run",
    "tip",
    "to use it",
    "to test it",
    "to try it",
    "to try it out",
    "to verify",
    "to run it",
    "follow-up",
    "recommended",
];

/// The words after a sentence-opening verb go on to a finite verb of their own within
/// three words: "list peers supports …", "search results are …".
fn subject_of_statement(after: &str) -> bool {
    const FINITE: &[&str] = &[
        "is", "are", "was", "were", "has", "have", "supports", "accepts", "returns", "filters",
        "handles", "takes", "works", "uses", "needs", "shows", "contains", "includes", "requires",
        "calls",
    ];
    let ws = words(&after[..floor(after, 80)]);
    ws.iter()
        .take(3)
        .skip(1)
        .any(|w| FINITE.contains(&w.as_str()))
        && !ws.first().is_some_and(|w| FINITE.contains(&w.as_str()))
}

/// Russian commitments before a tool's name ("я воспользуюсь инструментом
/// **password_analyzer**", "нужно вызвать get_weather"): the first person or "нужно" with
/// an infinitive of using or calling, never negated or done ("не буду вызывать",
/// "уже вызвал").
const RU_CUES: &[&str] = &[
    "воспользуюсь",
    "воспользуемся",
    "использую",
    "используем",
    "вызову",
    "вызовем",
    "применю",
    "нужно вызвать",
    "нужно использовать",
    "надо вызвать",
    "необходимо вызвать",
    "необходимо использовать",
];

fn ru_commits(pre: &str) -> bool {
    // (Negation within the cue's own clause; a condition, a habit, a maybe or the reader
    // anywhere before it.)
    let clause = pre.rsplit([':', ';', '.', '!', '?']).next().unwrap_or(pre);
    // ("Теперь нужно завершить задачу с помощью X": the step's own need, done with X.)
    let done_with = clause.trim_end().ends_with("с помощью")
        && words(clause).iter().any(|w| {
            matches!(
                w.as_str(),
                "нужно"
                    | "надо"
                    | "осталось"
                    | "необходимо"
                    | "давайте"
                    | "давай"
                    | "сейчас"
                    | "теперь"
            )
        });
    (done_with || RU_CUES.iter().any(|c| has_phrase(clause, c)))
        && !words(clause)
            .iter()
            .any(|w| matches!(w.as_str(), "не" | "уже"))
        && !words(pre).iter().any(|w| {
            matches!(
                w.as_str(),
                "вам"
                    | "вы"
                    | "ты"
                    | "тебе"
                    | "тебя"
                    | "если"
                    | "обычно"
                    | "возможно"
                    | "позже"
                    | "потом"
                    | "иногда"
                    | "когда"
            )
        })
}

/// Chinese commitments right before a tool's name ("让我用 `Read`", "我需要使用
/// code_interpreter"), unless negated ("我不需要使用").
const CJK_CUES: &[&str] = &[
    "让我用",
    "让我使用",
    "让我调用",
    "我来用",
    "我来使用",
    "我来调用",
    "我需要使用",
    "我需要用",
    "我需要调用",
    "我要用",
    "我要使用",
    "我要调用",
    "我将使用",
    "我将调用",
    "我会使用",
    "我会调用",
    "现在调用",
    "接下来调用",
    "必须使用",
    "应该使用",
    "应该调用",
    "首先，调用",
    "先调用",
    "直接调用",
    "立即调用",
];

/// Chinese commitments that open a clause ("我来为您查询…", "我将进行相关搜索").
const CJK_COMMIT: &[&str] = &[
    "我来",
    "我帮你",
    "我帮您",
    "我这就",
    "让我",
    "我将",
    "我会",
    "我要",
    "我需要",
    "我先",
    "我再",
    "我正在",
    "我现在",
    "我们来",
    "让我们",
    "接下来我",
];

/// Chinese verbs and the concept (a key of [`CONCEPTS`]) each one asks for.
const CJK_VERBS: &[(&str, &str)] = &[
    ("搜索", "search"),
    ("搜一下", "search"),
    ("检索", "search"),
    ("查询", "search"),
    ("查找", "search"),
    ("读取", "read"),
    ("写入", "write"),
    ("创建文件", "write"),
    ("保存", "write"),
    ("执行命令", "exec"),
    ("运行命令", "exec"),
    ("列出", "list"),
    ("文件结构", "list"),
    ("目录结构", "list"),
    ("修正", "edit"),
    ("修改", "edit"),
    ("修复", "edit"),
    ("编辑", "edit"),
    ("下载", "fetch"),
    ("抓取", "fetch"),
];

/// Chinese verbs and the English words a tool's name says them with.
const CJK_NAME_VERBS: &[(&str, &[&str])] = &[
    (
        "计算",
        &[
            "calculator",
            "calculate",
            "calc",
            "compute",
            "math",
            "calculation",
        ],
    ),
    ("翻译", &["translate", "translator", "translation"]),
    ("导航", &["navigate", "goto"]),
    ("预订", &["book", "booking", "reserve"]),
    ("发送", &["send"]),
    ("发一封", &["send"]),
    ("发邮件", &["send"]),
    ("发消息", &["send"]),
    ("安排", &["schedule", "event", "meeting"]),
];

/// Chinese nouns a tool's name may hold in English.
const CJK_NOUNS: &[(&str, &str)] = &[
    ("信息", "info"),
    ("订单", "order"),
    ("航班", "flight"),
    ("酒店", "hotel"),
    ("时间", "time"),
    ("天气", "weather"),
    ("新闻", "news"),
    ("邮件", "email"),
    ("日历", "calendar"),
    ("股票", "stock"),
    ("价格", "price"),
    ("汇率", "exchange"),
    ("历史", "history"),
    ("消息", "message"),
    ("状态", "status"),
    ("指标", "metrics"),
    ("系统", "system"),
    ("日志", "logs"),
    ("服务器", "server"),
    ("联系方式", "contact"),
    ("联系人", "contact"),
    ("通讯录", "contact"),
    ("邮箱", "email"),
    ("日程", "calendar"),
];

/// "我来为您查询当前人民币与美元的汇率。": a Chinese commitment and a verb of the one
/// offered tool whose name holds that verb's concept. Arguments are left to the model
/// (the words are not the tool's parameters).
fn cjk_intent(text: &str, cfg: &ParserConfig, tools: &[ToolSpec], out: &mut StrategyOutput) {
    let mut at = 0;
    for sent in text.split_inclusive(['。', '！', '？', '\n', '!', '?']) {
        let start = at;
        at += sent.len();
        if sent.trim_end().ends_with(['？', '?']) {
            continue;
        }
        let Some(cue) = CJK_COMMIT.iter().filter_map(|c| sent.find(c)).min() else {
            continue;
        };
        // "用户让我查深圳今天的天气": what the user asked, reported.
        // ("用户想让我…", "老板让我…", "用户问我要…".)
        if [
            "用户", "他", "她", "你", "您", "客户", "对方", "想", "老板", "他们", "问",
        ]
        .iter()
        .any(|who| {
            // ("用户之前让我…": what the user asked earlier.)
            let before = ["之前", "刚才", "刚刚", "先前", "曾经"]
                .iter()
                .find_map(|t| sent[..cue].strip_suffix(t))
                .unwrap_or(&sent[..cue]);
            before.ends_with(who)
        }) {
            continue;
        }
        // (Someone's words quoted: "用户说：“我帮你安排明天的会议”".)
        if sent[..cue].matches(['“', '「']).count() > sent[..cue].matches(['”', '」']).count()
        {
            continue;
        }
        let rest = &sent[cue..];
        // ("有没有" asks whether, it negates nothing; "我先前" is "earlier", no lead.)
        let plain = rest.replace("有没有", "");
        // (Done: "我帮你查了北京的天气：晴", "我帮你安排好了明天的会议".)
        if [
            "不",
            "没",
            "无需",
            "别",
            "无法",
            "已经",
            "已",
            "过",
            "失败",
            "先前",
            "查了",
            "好了",
            "完了",
            "完成了",
        ]
        .iter()
        .any(|n| plain.contains(n))
        {
            continue;
        }
        // Explaining or teaching how a look-up goes ("我来教你怎么查…", "我要说明一下：查天气
        // 需要城市名"), a condition or a later time ("要是下雨，我再查…", "等你确认后"), a
        // question ("…吗"), the reader's choice ("你想查哪个城市").
        // ("我将读取 a.mjs 并为您解释代码": explaining what it read comes after the step.)
        let first_verb = CJK_VERBS
            .iter()
            .filter_map(|(v, _)| rest.find(v))
            .min()
            .unwrap_or(rest.len());
        let aside = [
            "说明",
            "说一下",
            "教",
            "告诉",
            "如何",
            "怎么",
            "解释",
            "总结",
            "概括",
            "汇报",
            "介绍",
        ]
        .iter()
        .any(|w| rest[..first_verb].contains(w))
            || [
                "要是",
                "等你",
                "等到",
                "等用户",
                "以后",
                "之后",
                "明天我",
                "回头",
            ]
            .iter()
            .any(|w| sent[..cue].contains(w) || rest.contains(w))
            || rest
                .trim_end_matches(['。', '！', '.', ' '])
                .ends_with(['吗', '呢'])
            || rest
                .replace("帮你", "")
                .replace("为你", "")
                .replace("给你", "")
                .contains('你');
        if aside {
            continue;
        }
        // "我需要您提供邮件的主题…，才能帮您发送": asking the user first, not a step
        // (the familiar 你 is the reader's above).
        let asks = CJK_COMMIT
            .iter()
            .filter(|c| rest.starts_with(*c))
            .any(|c| rest[c.len()..].starts_with('您'));
        if asks || rest.contains("才能") || cjk_conditional(&sent[..cue]) {
            continue;
        }
        let concept = CJK_VERBS
            .iter()
            .filter_map(|(v, k)| rest.find(v).map(|i| (i, *k)))
            .min_by_key(|(i, _)| *i)
            .and_then(|(_, k)| CONCEPTS.iter().find(|c| c.keys.contains(&k)));
        let by_concept: Vec<&ToolSpec> = concept.map_or_else(Vec::new, |concept| {
            tools
                .iter()
                .filter(|t| {
                    crate::schema::name_words(&t.name)
                        .iter()
                        .any(|w| concept.keys.contains(&w.as_str()))
                })
                .collect()
        });
        // "我来为您查询当前时间": a look-up of a thing one tool's name holds.
        let looks_up = concept.is_some() || ["查", "获取", "取得"].iter().any(|v| rest.contains(v));
        // "我不知道今天北京的天气。让我帮你查一下：": a look-up of nothing named is of what
        // the sentence before named.
        let named_here = CJK_NOUNS.iter().any(|(n, _)| rest.contains(n));
        let nouns_in = if named_here || start == 0 {
            rest
        } else {
            &text[floor(text, start.saturating_sub(240))..start + cue]
        };
        let mut by_noun: Vec<&ToolSpec> = if looks_up {
            CJK_NOUNS
                .iter()
                .filter(|(n, _)| nouns_in.contains(n))
                .flat_map(|(_, en)| {
                    tools
                        .iter()
                        .filter(move |t| crate::schema::name_words(&t.name).iter().any(|w| w == en))
                })
                .collect()
        } else {
            Vec::new()
        };
        by_noun.sort_by(|a, b| a.name.cmp(&b.name));
        by_noun.dedup_by(|a, b| a.name == b.name);
        // "我来帮你计算100除以5": a verb whose English is a word of one tool's name.
        let by_word: Vec<&ToolSpec> = CJK_NAME_VERBS
            .iter()
            // ("日程安排", "行程安排": a schedule, the noun, not arranging one.)
            .filter(|(v, _)| {
                *v != "安排"
                    || !["日程安排", "行程安排", "安排表"]
                        .iter()
                        .any(|n| rest.contains(n))
            })
            .filter_map(|(v, en)| rest.find(v).map(|i| (i, *en)))
            .min_by_key(|(i, _)| *i)
            .map_or_else(Vec::new, |(_, en)| {
                tools
                    .iter()
                    .filter(|t| {
                        crate::schema::name_words(&t.name)
                            .iter()
                            .any(|w| en.contains(&w.as_str()))
                    })
                    .collect()
            });
        // "我先同时查王五的联系方式和明天的日历安排": things of two tools looked up
        // together, each its own call.
        let together = by_concept.is_empty()
            && (2..=3).contains(&by_noun.len())
            && ["同时", "和", "以及", "与"]
                .iter()
                .any(|j| rest.contains(j));
        let chosen: Vec<&ToolSpec> = match (
            by_concept.as_slice(),
            by_noun.as_slice(),
            by_word.as_slice(),
        ) {
            ([t], _, _) | ([], [t], _) | ([], [], [t]) => vec![*t],
            _ if together => by_noun.clone(),
            _ => continue,
        };
        let span = start + cue..start + sent.trim_end().len();
        for tool in chosen {
            let mut args = cjk_numbers(rest, tool);
            cjk_identifier(rest, tool, &mut args);
            cjk_owner(nouns_in, tool, &mut args);
            if let Some(c) = make_call(
                &tool.name,
                Value::Object(args),
                0.55,
                span.clone(),
                tools,
                cfg,
            ) {
                out.calls.push(c);
            }
        }
        if !out.calls.is_empty() {
            return;
        }
    }
}

/// "计算100除以5": the numbers of a Chinese clause, in order, for the tool's numeric
/// required properties when there are as many (dates and times are not counted).
fn cjk_numbers(rest: &str, tool: &ToolSpec) -> Map<String, Value> {
    static NUMBER: LazyLock<Regex> =
        LazyLock::new(|| ferroclaw_types::literal_regex(r"-?\d+(?:\.\d+)?"));
    let mut args = Map::new();
    let keys: Vec<&str> = tool
        .required()
        .into_iter()
        .filter(|k| numeric_prop(tool, k))
        .collect();
    let nums: Vec<Value> = NUMBER
        .find_iter(rest)
        .filter(|m| {
            !rest[m.end()..].starts_with(['年', '月', '日', '号', '点', '时', '分', '.', '%'])
        })
        .filter_map(|m| serde_json::from_str::<Value>(m.as_str()).ok())
        .collect();
    if keys.len() >= 2 && nums.len() == keys.len() {
        for (k, v) in keys.into_iter().zip(nums) {
            args.insert(k.to_string(), v);
        }
    }
    args
}

/// "我来帮您查看 web-server-01 服务器的状态": the one name written in Latin letters with a
/// digit, hyphen or underscore, for the tool's one required text property.
fn cjk_identifier(rest: &str, tool: &ToolSpec, args: &mut Map<String, Value>) {
    static IDENT: LazyLock<Regex> = LazyLock::new(|| {
        ferroclaw_types::literal_regex(r"[A-Za-z0-9./~][A-Za-z0-9._/-]*[A-Za-z0-9]")
    });
    // ("我現在立刻修正 `app.py`": a file named for an editing tool's path among others.)
    let path_key = tool.properties().into_iter().map(|(k, _)| k).find(|k| {
        matches!(
            k.to_ascii_lowercase().as_str(),
            "path" | "file_path" | "filepath" | "file" | "filename" | "target_file"
        )
    });
    let key = match (&tool.required()[..], path_key) {
        ([one], _) => *one,
        (_, Some(p)) => p,
        _ => return,
    };
    if args.contains_key(key) || numeric_prop(tool, key) {
        return;
    }
    let clause = &rest[..rest.find(['。', '，', '\n']).unwrap_or(rest.len())];
    let idents: Vec<&str> = IDENT
        .find_iter(clause)
        .map(|m| m.as_str())
        // A name with letters (`web-server-01`), not a number, a date or a version.
        .filter(|w| {
            w.contains(|c: char| c.is_ascii_digit() || matches!(c, '-' | '_' | '.' | '/'))
                && w.chars().filter(char::is_ascii_alphabetic).count() >= 2
        })
        .collect();
    let fits = |w: &str| Some(key) != path_key || w.contains(['.', '/']);
    if let [one] = idents[..] {
        if !fits(one) {
            return;
        }
        args.insert(key.to_string(), Value::String(one.to_string()));
    }
}

/// Things a tool looks up and who or where they belong to: "查一下北京的天气" (a place
/// for a weather tool's location), "查王五的联系方式" (a person for a contact's name).
const CJK_OWNED: &[(&str, &[&str])] = &[
    ("天气", &["location", "city", "place"]),
    ("联系方式", &["name", "person", "contact_name"]),
    ("邮箱", &["name", "person", "contact_name"]),
    ("电话", &["name", "person", "contact_name"]),
];

fn cjk_owner(rest: &str, tool: &ToolSpec, args: &mut Map<String, Value>) {
    static OWNER: LazyLock<Regex> = LazyLock::new(|| {
        ferroclaw_types::literal_regex(
            r"(\p{Han}{2,4}?)(?:今天|明天|现在)?的(天气|联系方式|邮箱|电话)",
        )
    });
    for c in OWNER.captures_iter(rest) {
        let (Some(owner), Some(thing)) = (c.get(1), c.get(2)) else {
            continue;
        };
        let Some((_, props)) = CJK_OWNED.iter().find(|(t, _)| *t == thing.as_str()) else {
            continue;
        };
        let Some(key) = tool
            .required()
            .into_iter()
            .find(|k| props.contains(&k.to_ascii_lowercase().as_str()))
        else {
            continue;
        };
        if args.contains_key(key) {
            continue;
        }
        // (The lead's own words before the owner: "帮你查一下", "查询", "要查的是"; two
        // owners, "张三和李四", are no one's.)
        if owner.as_str().contains(['和', '与', '及']) {
            continue;
        }
        let who = owner
            .as_str()
            .rsplit([
                '查', '下', '是', '有', '看', '询', '问', '到', '你', '您', '帮',
            ])
            .next()
            .unwrap_or("");
        // ("今天北京的天气": the day before the place.)
        let who = ["今天", "明天", "后天", "现在"]
            .iter()
            .find_map(|d| who.strip_prefix(d))
            .unwrap_or(who);
        let vague = [
            "今天", "明天", "后天", "昨天", "周末", "现在", "当地", "那里", "那边", "这里", "他",
            "她", "我们", "你们", "哪里",
        ];
        if who.chars().count() >= 2 && !vague.contains(&who) && !who.starts_with(['这', '那', '哪'])
        {
            args.insert(key.to_string(), Value::String(who.to_string()));
        }
    }
}

fn cjk_commits(pre: &str, after: &str) -> bool {
    // (Only the sentence around the name matters: bounded, each mention costs the same
    // however long the text.)
    let pre = &pre[crate::harmony::floor(pre, pre.len().saturating_sub(CJK_REACH))..];
    let after = &after[..crate::harmony::floor(after, CJK_REACH)];
    let tail = pre.trim_end_matches(|c: char| c.is_whitespace() || matches!(c, '`' | '"' | '\''));
    let start = tail.char_indices().rev().nth(9).map_or(0, |(i, _)| i);
    // ("我需要再次使用": again, the same commitment.)
    let tail = tail[start..].replace("再次", "");
    // ("调用一次X", "使用一下X": how often, then the name.)
    let tail = ["一次", "一下"]
        .iter()
        .find_map(|w| tail.strip_suffix(w))
        .unwrap_or(&tail)
        .to_string();
    // ("如果您需要发送邮件，我可以使用 send_email": on a condition.)
    let sentence = pre.rsplit(['。', '！', '？', '\n']).next().unwrap_or(pre);
    let conditional = cjk_conditional(sentence)
        || ["才能", "确认后", "之后我", "后我会"]
            .iter()
            .any(|w| sentence.contains(w));
    // "因此，调用X函数": the model's own next step after a "so"; "正确的做法是使用X":
    // the way it settled on.
    // ("我需要先使用OCR工具…，然后使用ChatWithEB工具": "then" after a "first" is a later
    // step.)
    let settled = ["调用", "使用"].iter().any(|v| {
        tail.strip_suffix(v).is_some_and(|lead| {
            let lead = lead.trim_end_matches(['，', ',', ' ']);
            [
                "因此",
                "所以",
                "于是",
                "然后",
                "接下来",
                "那么",
                "做法是",
                "方法是",
            ]
            .iter()
            .any(|c| lead.ends_with(c) && !(*c == "然后" && sentence.contains('先')))
        })
    });
    // What the name's own clause goes on to say: "调用 web_fetch 时需要…", "使用 web_search
    // 之前请…" are conditions of its use, not the use.
    let clause_after = after
        .split(['，', '。', ',', '；', '！', '？', '\n'])
        .next()
        .unwrap_or("");
    let condition_after = ["时", "的时候", "之前", "以前"]
        .iter()
        .any(|w| clause_after.contains(w));
    // A "so"/"then" settles the model's own step only in its own voice, not in an
    // account of what was done ("我刚才…，然后使用 exec 运行了测试") or of how something works
    // ("系统的处理流程是…然后调用…", "所以使用 X 需要先…").
    let settled = settled
        && !["需要", "了", "过"]
            .iter()
            .any(|w| clause_after.contains(w))
        && ![
            "刚才",
            "刚刚",
            "已经",
            "流程",
            "原理",
            "会自动",
            "依赖",
            "最后",
            "请",
        ]
        .iter()
        .any(|w| sentence.contains(w));
    // "我需要为每个城市调用X": the first person's need, the verb of calling right before
    // the name, words between them.
    // (Not a later step: "…，然后使用X", "最后使用X".)
    let own_need = ["调用", "使用"].iter().any(|v| tail.ends_with(v))
        && !["然后", "最后", "再", "接着", "之后"]
            .iter()
            .any(|w| tail.contains(w))
        && ["我需要", "我要", "我将", "我会", "我来", "我们需要", "我先"]
            .iter()
            .any(|w| sentence.contains(w))
        // (Not a need before the call: "我需要知道账号才能调用X", "我需要您先确认".)
        && !["才能", "知道", "确认", "您", "你"]
            .iter()
            .any(|w| sentence.contains(w));
    !conditional
        && !condition_after
        && (settled || own_need || CJK_CUES.iter().any(|c| tail.ends_with(c)))
        && !["不", "没", "无需", "别"].iter().any(|n| tail.contains(n))
}

/// How far around a tool's name a Chinese commitment or condition is looked for (bytes;
/// 200 characters of Chinese).
const CJK_REACH: usize = 600;

/// Phrases that introduce steps for the reader to take, not for the assistant.
const ADVICE: &[&str] = &[
    "you can",
    "you could",
    "you may",
    "you might",
    "you should",
    "you'll need",
    "you will need",
    "you need",
    "for you to",
    "you can try",
];

/// The text tells the reader what to do ("you can run …").
pub(crate) fn addresses_reader(lower: &str) -> bool {
    ADVICE.iter().any(|p| has_phrase(lower, p))
}

/// Phrases that introduce a list of what the assistant is able to do.
const ABILITIES: &[&str] = &[
    "can help with",
    "can help you with",
    "can assist with",
    "can assist you with",
    "things i can",
    "i'm able to",
    "i am able to",
    "i have access to",
    "my capabilities",
];

/// A list item under a line that addresses the reader ("Here are some ways you can
/// check the weather: 1. Look up a forecast…"): instructions, not the assistant's plan.
fn advice_item(text: &str, pos: usize) -> bool {
    let start = line_start(text, pos);
    if !list_item(&text[start..pos]) {
        return false;
    }
    let floor_at = floor(text, start.saturating_sub(4096));
    for line in text[floor_at..start].lines().rev() {
        let t = line.trim();
        if t.is_empty() || list_item(line) {
            continue;
        }
        let lower = t.to_lowercase().replace('\u{2019}', "'");
        return ADVICE
            .iter()
            .chain(ABILITIES)
            .any(|p| has_phrase(&lower, p));
    }
    false
}

/// `1. `, `2) `, `- `, `* `, `• ` at the start of a line.
fn list_item(line: &str) -> bool {
    let t = line.trim_start();
    let digits = t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits > 0 {
        return t[digits..].starts_with(['.', ')']);
    }
    t.starts_with(['-', '*', '\u{2022}'])
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

/// A promise that waits for the user ("please provide …, and I'll …").
const WAITS_ON_USER: &[&str] = &[
    "please provide",
    "please let me know",
    "let me know",
    "please tell me",
    "please add",
    "please set",
    "please log in",
    "please install",
    "please run",
    "please create",
    "please confirm",
    "i need you to",
    "once you",
    "when you",
    "as soon as you",
    "after you",
];

/// A Chinese clause on a condition: 如果, 要是, 假如, 若您/若需, 如有需要, 如需, 的话, 倘若,
/// 万一 (not 若干, "several").
pub(crate) fn cjk_conditional(s: &str) -> bool {
    [
        "如果", "要是", "假如", "如有", "如需", "的话", "倘若", "万一",
    ]
    .iter()
    .any(|w| s.contains(w))
        || s.match_indices('若')
            .any(|(i, _)| !s[i..].starts_with("若干"))
}

/// A sentence (lowercased) that follows on from the one before — "After that, I'll run
/// …", "Then …": what it waits on may be said there.
pub(crate) fn follows_on(lower_sentence: &str) -> bool {
    ["after that", "then", "afterwards", "once that", "once done"]
        .iter()
        .any(|w| lower_sentence.trim_start().starts_with(w))
}

/// "Please provide the time and I'll schedule it", "I'll need some additional
/// information to schedule the meeting": the call waits on the user.
fn waits_on_user(lower_before: &str) -> bool {
    if WAITS_ON_USER.iter().any(|p| has_phrase(lower_before, p)) {
        return true;
    }
    let ws = words(lower_before);
    ws.iter().enumerate().any(|(i, w)| {
        w == "need"
            && ws[i + 1..].iter().take(4).any(|x| {
                matches!(
                    x.as_str(),
                    "information" | "info" | "details" | "clarification"
                )
            })
    })
}

/// The text ends by asking the user something ("Please provide the address so I can
/// proceed.", "Would 7:30 PM work for you?"): the turn ends there, and what it planned
/// waits on the answer.
fn ends_asking_user(text: &str) -> bool {
    let last = last_sentence(text.trim_end()).trim();
    let lower = last
        .trim_start_matches(|c: char| !c.is_alphanumeric())
        .to_lowercase()
        .replace('\u{2019}', "'");
    // ("And how many people should I include?": the model asks what to do.)
    let ws = words(&lower);
    let asks = last.ends_with('?')
        && (ws.iter().any(|w| w == "you" || w == "your")
            || ws
                .windows(2)
                .any(|p| matches!(p[0].as_str(), "should" | "shall") && p[1] == "i"));
    asks || [
        "please provide",
        "please share",
        "please let me know",
        "please tell me",
        "please confirm",
    ]
    .iter()
    .any(|p| has_phrase(&lower, p))
}

/// The line so far is a tool's name as a label: `2. **Search Web**: Search the …`.
fn describes_tool(text: &str, pos: usize, tools: &[ToolSpec]) -> bool {
    let line = &text[line_start(text, pos)..pos];
    let Some(label) = line.trim_end().strip_suffix(':').or_else(|| {
        line.trim_end()
            .strip_suffix("**:")
            .or_else(|| line.trim_end().strip_suffix(":**"))
    }) else {
        return false;
    };
    // Letters only (unlike `schema`'s name matching): the list number before the
    // label ("2. **Search Web**") is no part of the name.
    // In any order: "**Web Search**" labels `search_web`.
    let key = |s: &str| -> Vec<String> {
        let mut w = words(s);
        w.retain(|w| w.chars().all(|c| c.is_ascii_alphabetic()));
        w.sort_unstable();
        w
    };
    let label = key(label);
    !label.is_empty() && tools.iter().any(|t| key(&t.name) == label)
}

/// What follows `end` puts the sentence before off: it asks the user's leave ("Would
/// you like me to proceed?", an offer) or is the answer itself ("Here's a breakdown").
fn defers_to_next(text: &str, end: usize) -> bool {
    // (The next sentence is looked for within a window, not to the text's end.)
    let end = floor(text, end);
    let rest = text[end..floor(text, (end + 600).min(text.len()))].trim_start();
    // "Let's get you the weather in Tokyo! Here's a breakdown: …": it answered instead.
    let lead = rest
        .get(..16)
        .unwrap_or(rest)
        .to_ascii_lowercase()
        .replace('\u{2019}', "'");
    if ["here's ", "here is ", "here are "]
        .iter()
        .any(|p| lead.starts_with(p))
        && rest.len() > 160
    {
        return true;
    }
    let next = &rest[..floor(rest, rest.find(['?', '\n']).map_or(0, |i| i + 1))];
    if !next.ends_with('?') {
        return false;
    }
    let lower = next.to_lowercase().replace('\u{2019}', "'");
    // ("Let's schedule the meeting. Could you please confirm the attendees?": it
    // waits on the user's answer.)
    [
        "would you like me to",
        "do you want me to",
        "shall i ",
        "should i ",
        "want me to",
    ]
    .iter()
    .any(|p| lower.starts_with(p) || lower.contains(&format!(" {p}")))
        || ["could you", "can you", "please confirm", "please provide"]
            .iter()
            .any(|p| lower.trim_start().starts_with(p))
}

/// `- **Weather in New York**: 11°F`: a bold label in a list of results.
fn bold_label(text: &str, pos: usize) -> bool {
    let start = line_start(text, pos);
    let before = text[start..pos].trim_start();
    let line_end = text[pos..].find('\n').map_or(text.len(), |i| pos + i);
    let after = &text[pos..line_end];
    before.trim_start_matches(['-', '*', ' ']).is_empty()
        && before.ends_with("**")
        && (after.contains("**:") || after.contains(":**"))
}

/// How a sentence about what the assistant is able to do begins.
const CAPABILITY_LEADS: &[&str] = &[
    "i can ",
    "i'm able to ",
    "i am able to ",
    "i could ",
    "i have access to ",
];

/// How a sentence about what the model lacks begins: "I need access to a weather API to
/// get weather information for Baltimore." — no step, unless a later clause commits
/// ("…, so let me read src/main.rs").
const LACKS: &[&str] = &[
    "i need access to",
    "i would need access to",
    "i'd need access to",
    "i would need to have access to",
    "i would need to be able to",
    "i'd need to be able to",
    "i need to be able to",
];

fn commits_later(lower: &str) -> bool {
    [", so ", "let me ", "i'll ", "i will "]
        .iter()
        .any(|c| lower.contains(c))
}

/// Phrases by which a sentence promises a habit, not a step.
pub(crate) const HABITS: &[&str] = &["from now on", "going forward", "in the future", "next time"];

fn sentence_rejected(text: &str, sent: &Range<usize>) -> bool {
    let s = text[sent.clone()].trim();
    if s.ends_with('?') {
        return true;
    }
    // A Markdown table row describes; it does not act. Nor does a heading or a code
    // comment (`# Save this code in a file named hello.py`).
    let line = text[line_start(text, sent.start)..].trim_start();
    if line.starts_with('|') || line.starts_with("# ") || line.starts_with("## ") {
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
        // What a program does, not what the model does: "The script will use the
        // `get_weather` function to check the weather."
        "the script",
        "this script",
        "the code",
        "this code",
        "the program",
        "this program",
    ]
    .iter()
    .any(|p| lower.starts_with(p))
        || LACKS
            .iter()
            .any(|p| lower.starts_with(p) && !commits_later(&lower))
        // "From now on, I'll read the file before editing it.": a habit promised.
        || HABITS.iter().any(|p| has_phrase(&lower, p))
        // "I can get the weather, search the internet and tell the time": a list of what
        // the assistant is able to do.
        || (CAPABILITY_LEADS.iter().any(|p| lower.starts_with(p)) && lower.contains(','))
}

// ---------------------------------------------------------------- arguments

static URL: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r#"https?://[^\s<>"'`\])}]+|\bwww\.[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+(?:/[^\s<>"'`\])}]*)?"#,
    )
});
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
    "uv",
    "uvx",
    "cd",
    "poetry",
    "cmake",
    "gcc",
    "ruff",
    "tsc",
    "sudo",
    "apt-get",
    "brew",
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

/// Words that say nothing of what to look for: a phrase of only these ("now", "the
/// time correctly", "the top result") is a fragment of the sentence, not an argument.
const GENERIC_WORDS: &[&str] = &[
    "the",
    "a",
    "an",
    "to",
    "of",
    "for",
    "it",
    "this",
    "that",
    "them",
    "now",
    "next",
    "then",
    "again",
    "first",
    "here",
    "there",
    "soon",
    "later",
    "instead",
    "too",
    "also",
    "result",
    "results",
    "top",
    "answer",
    "answers",
    "question",
    "info",
    "information",
    "data",
    "details",
    "time",
    "correctly",
    "properly",
    "tool",
    "function",
    "call",
    "more",
    "user",
    "request",
    "query",
    "correct",
    "right",
    "exact",
    "same",
    "one",
    "some",
    "any",
    "all",
    "our",
    "my",
    "your",
    "their",
    "its",
    "his",
    "her",
    "we",
    "us",
    "you",
    "i",
    "me",
    "so",
    "and",
    "or",
    "with",
    "please",
    "just",
    "quickly",
    "immediately",
    "once",
    "twice",
    "web",
    "internet",
    "online",
    "search",
    "it's",
    "accordingly",
    "each",
    "every",
    "both",
    "other",
    "another",
    "remaining",
    "rest",
    "given",
    "specified",
    "requested",
    "relevant",
    "needed",
    "location",
    "city",
    "place",
    "country",
    "file",
    "path",
    "url",
    "command",
    "name",
    "value",
    "input",
    "argument",
    "arguments",
    "parameter",
    "parameters",
    "date",
    "day",
    "them",
    "those",
    "these",
    "appropriate",
    "proper",
    "necessary",
    "following",
    // "some options for you": what any search finds, no subject of its own.
    "some",
    "few",
    "several",
    "options",
    "ideas",
    "suggestions",
    "results",
    "possibilities",
];

fn generic_phrase(lower: &str) -> bool {
    lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .all(|w| GENERIC_WORDS.contains(&w))
}

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
        // `InputEvent.Move`: a member of a type (its name in camel case), not a file's
        // extension (`Makefile.Linux`, `Dockerfile.Prod`).
        let (stem, ext_raw) = s.rsplit_once('.').unwrap_or((s, ""));
        let mut cs = ext_raw.chars();
        let member = ext_raw.len() >= 3
            && cs.next().is_some_and(|c| c.is_ascii_uppercase())
            && cs.next().is_some_and(|c| c.is_ascii_lowercase())
            && stem.chars().filter(char::is_ascii_uppercase).count() >= 2
            && !stem.contains(['.', '/', '-', '_']);
        return !DOMAIN_EXT.contains(&ext) && !member;
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
        .map(|p| {
            let inner = text[p.inner.clone()].trim();
            let value = if matches!(p.kind, Quote::Backtick) {
                inner
            } else {
                crate::schema::without_closing_stop(inner)
            };
            Found {
                value: value.to_string(),
                range: p.range.clone(),
            }
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

/// "named" or "called" right before `at`: what follows is a name.
fn named_just_before(text: &str, at: usize) -> bool {
    phrase_just_before(text, at, &[" named", " called"])
}

/// One of `phrases` (ASCII, any case) ends the text before `at`, spaces aside, as whole
/// words: "using the" before a tool's name, not "causing the".
fn phrase_just_before(text: &str, at: usize, phrases: &[&str]) -> bool {
    let before = text[..floor(text, at)].trim_end();
    phrases.iter().any(|p| {
        let Some(cut) = before.len().checked_sub(p.len()) else {
            return false;
        };
        before.is_char_boundary(cut)
            && before[cut..].eq_ignore_ascii_case(p)
            && (p.starts_with(|c: char| !c.is_alphanumeric())
                || before[..cut]
                    .chars()
                    .next_back()
                    .is_none_or(|c| !c.is_alphanumeric()))
    })
}

fn path_in(text: &str, prot: &[Protected], win: Range<usize>) -> Option<Found> {
    for (r, tok) in ws_tokens(text, win) {
        // A quoted span may hold a path with spaces trimmed away; bare tokens inside a
        // longer quoted text (a command, a content string) are skipped.
        if let Some(p) = prot_at(prot, r.start) {
            if p.range.start == r.start {
                let inner = text[p.inner.clone()].trim();
                // "a file named 'boring'", "the subdirectory `roast`": the name given is
                // the path, extension or not.
                let named = (named_just_before(text, p.range.start)
                    || phrase_just_before(
                        text,
                        p.range.start,
                        &[" directory", " subdirectory", " folder", " file", " dir"],
                    ))
                    && !inner.is_empty()
                    && inner.len() <= 100
                    && !inner.contains(char::is_whitespace);
                if path_like(inner) || named {
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
        // ("查看MEMORY.md中关于SOUL.md的记录": a path glued to Chinese words, no space
        // between.)
        if !tok.is_ascii() {
            let mut at = 0;
            for run in tok.split(|c: char| !c.is_ascii()) {
                let t = trim_token(run);
                // (Not a library's name, "Vue.js中", "Node.js的".)
                let library = t.ends_with(".js") && t.starts_with(|c: char| c.is_ascii_uppercase());
                if !t.is_empty() && path_like(t) && !library {
                    let off = at + run.find(t).unwrap_or(0);
                    return Some(Found {
                        value: t.to_string(),
                        range: r.start + off..r.start + off + t.len(),
                    });
                }
                // (The run, then the one non-ASCII character that ended it.)
                at += run.len();
                at += tok[at..].chars().next().map_or(0, char::len_utf8);
            }
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
    // `run the 'date' command`.
    if let Some(f) = quoted_command(text, prot, near.clone()) {
        return Some(f);
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
        // (The word, not its stop: "again." ends the line too.)
        let l = trim_token(tok).to_lowercase();
        // (A command line ends at its line: a wrapped sentence goes on after it, and so
        // does an adverb or a condition, "tsc again", "sudo later if needed".)
        if text[end..r.start].contains('\n')
            || [
                "to",
                "so",
                "in",
                "and",
                "then",
                "first",
                "now",
                "again",
                "for",
                "which",
                "because",
                "with",
                "using",
                "via",
                "later",
                "once",
                "if",
                "when",
                "too",
                "as",
                "afterwards",
                "instead",
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
    // "run date command": the noun is not part of the command line.
    let mut v = trim_token(&text[r0.start..end]);
    for tail in [" command", " cmd"] {
        if let Some(stem) = v.strip_suffix(tail) {
            if !stem.trim().is_empty() {
                v = stem.trim_end();
                end = r0.start + v.len();
            }
        }
    }
    Some(Found {
        value: v.to_string(),
        range: r0.start..end,
    })
}

/// A quoted command line that is what is run, the noun after it naming it as one: `run
/// the 'date' command`, `execute the "ls -la" cmd` (not "explain why the 'ls' command …").
fn quoted_command(text: &str, prot: &[Protected], win: Range<usize>) -> Option<Found> {
    let from = prot.partition_point(|p| p.range.start < win.start);
    prot[from..]
        .iter()
        .take_while(|p| p.range.start < win.end)
        .find(|p| {
            let noun = text[p.range.end..]
                .trim_start_matches(' ')
                .split(|c: char| !c.is_alphanumeric())
                .next()
                .unwrap_or("");
            let before = text[floor(text, p.range.start.saturating_sub(24))..p.range.start]
                .to_ascii_lowercase();
            let object = before
                .trim_end()
                .trim_end_matches(" the")
                .trim_end_matches(" a")
                .trim_end();
            // ("让我执行`openclaw hooks enable x`": the span right after the verb.)
            let cjk_run = [
                "执行",
                "运行",
                "执行一下",
                "运行一下",
                "执行命令",
                "运行命令",
            ]
            .iter()
            .any(|v| object.ends_with(v));
            (cjk_run
                || matches!(noun, "command" | "cmd")
                    && ["run", "execute", "rerun", "re-run"]
                        .iter()
                        .any(|v| object.ends_with(v) && has_phrase(object, v)))
                && !text[p.inner.clone()].trim().is_empty()
        })
        .map(|p| Found {
            value: text[p.inner.clone()].trim().to_string(),
            range: p.range.clone(),
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
    " in the files",
    " in the file",
    " in the documents",
    " in the knowledge base",
    " in the database",
    " in the codebase",
    " in the code base",
    " in the repository",
    " in the repo",
    " in the project",
    " across the codebase",
    " throughout the codebase",
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
    // "use the file_search function to search for X": past the noun and the purpose verb.
    for lead in ["function ", "tool "] {
        if rest.to_ascii_lowercase().starts_with(lead) {
            rest = rest[lead.len()..].trim_start();
        }
    }
    for purpose in [
        "to search for ",
        "to look up ",
        "to look for ",
        "to find ",
        "to search ",
    ] {
        if rest.to_ascii_lowercase().starts_with(purpose) {
            rest = rest[purpose.len()..].trim_start();
            return finish_query(text, rest, &win);
        }
    }
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
    // "search the document for information on X": the place searched, then the query.
    if let Some(after) = past_searched_place(rest) {
        return finish_query(text, after, &win);
    }
    finish_query(text, rest, &win)
}

/// Places one searches in, as the object of "search".
const SEARCHED_PLACES: &[&str] = &[
    "document",
    "documents",
    "docs",
    "documentation",
    "database",
    "base",
    "index",
    "files",
    "records",
    "catalog",
    "catalogue",
    "inbox",
    "emails",
    "notes",
    "repository",
    "repo",
    "site",
    "website",
    "pdf",
    "manual",
    "wiki",
    "vectorstore",
    "store",
];

/// `rest` past "the document for " / "our knowledge base about ", when it opens so.
fn past_searched_place(rest: &str) -> Option<&str> {
    let mut ws = rest.split_whitespace();
    let det = ws.next()?.to_ascii_lowercase();
    if !["the", "my", "our", "your", "this", "that"].contains(&det.as_str()) {
        return None;
    }
    let mut place = false;
    for w in ws.take(3) {
        let lw = w.to_ascii_lowercase();
        if place && (lw == "for" || lw == "about") {
            let at = w.as_ptr() as usize - rest.as_ptr() as usize + w.len();
            return Some(rest[at..].trim_start());
        }
        place = SEARCHED_PLACES.contains(&lw.as_str());
    }
    None
}

fn finish_query(text: &str, rest: &str, win: &Range<usize>) -> Option<Found> {
    let lower = rest.to_ascii_lowercase();
    let mut end = rest.len();
    for stop in QUERY_STOPS {
        // ("in the repo" does not stop "in the report".)
        let whole = lower.match_indices(stop).find(|(i, _)| {
            stop.ends_with(' ')
                || lower[i + stop.len()..]
                    .chars()
                    .next()
                    .is_none_or(|c| !c.is_alphanumeric())
        });
        if let Some((i, _)) = whole {
            end = end.min(i);
        }
    }
    // "parse_config in src/": where to search, not what.
    if let Some(i) = lower.match_indices(" in ").map(|(i, _)| i).find(|&i| {
        let next = rest[i + 4..].split_whitespace().next().unwrap_or("");
        let next = next.trim_end_matches(['.', ',', ';', ':', '!', '?']);
        next.contains('/') && path_like(next)
    }) {
        end = end.min(i);
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
    // "the latest news about AI and": the words of a sentence cut off (or run on) after
    // the query are not part of it.
    let mut q = rest[..end].trim();
    while let Some((head, last)) = q.rsplit_once(char::is_whitespace) {
        if !QUERY_JOINS.contains(&last.to_ascii_lowercase().as_str()) {
            break;
        }
        q = head.trim_end();
    }
    // ("the latest news about AI": the article is the sentence's, the query is what
    // is searched; a title keeps its own, "The Iliad author".)
    if let Some(r) = q
        .strip_prefix("the ")
        .filter(|r| r.split_whitespace().count() >= 2)
    {
        q = r;
    }
    let ql = q.to_lowercase();
    if q.chars().count() < 2
        // "use web_search to get the latest information": a purpose, not a query; "the
        // research tool is available": a statement about the tool.
        || ["to ", "is ", "are ", "was ", "were ", "instead of "]
            .iter()
            .any(|p| ql.starts_with(p))
        // "search工具来搜索…": the word "tool" after the name, then its purpose.
        || ["工具", "函数", "功能"].iter().any(|p| q.starts_with(p))
        || QUERY_REJECT.contains(&ql.as_str())
        || q.split_whitespace().count() > 12
        || generic_phrase(&ql)
        // "Search or submit bugs": the verb's other half, no query.
        || ["or ", "and ", "than ", "which "].iter().any(|p| ql.starts_with(p))
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

/// Words that end no query.
const QUERY_JOINS: &[&str] = &[
    "the", "a", "an", "of", "and", "or", "to", "for", "with", "by", "from", "than", "that",
    "which", "in", "on", "at", "as",
];

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
    let mut ws = rest.split_whitespace();
    let tok = ws.next()?;
    let t = trim_token(tok);
    if t.len() < 2 {
        return None;
    }
    // "search for TODO in src", "for fn\s+main": a pattern is one token, written like
    // one or standing alone; "search for quarterly reports" is words, not "quarterly".
    let shaped = t.chars().any(|c| !c.is_alphabetic())
        || identifier_shaped(t)
        || t.chars().all(|c| c.is_uppercase());
    let alone = tok.ends_with([',', '.', ';', ':'])
        || ws.next().is_none_or(|w| {
            matches!(
                w.trim_end_matches([',', '.']).to_ascii_lowercase().as_str(),
                "in" | "across" | "within" | "under" | "inside" | "throughout" | "and" | "to"
            )
        });
    if !(shaped || alone) {
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
        // `**` around a word is Markdown bold, not a glob.
        if is_glob(t) && t.len() > 1 && t.chars().any(|c| c != '*') {
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

fn extract_primary(
    kind: Kind,
    text: &str,
    prot: &[Protected],
    win: Range<usize>,
    param: &str,
) -> Option<Found> {
    match kind {
        Kind::Url => {
            // The address must start near the verb; it may run past the window's first
            // 100 bytes (a long address is not cut).
            url_in(text, win.clone()).filter(|f| f.range.start < win.start + 100)
        }
        Kind::Path | Kind::File => {
            // (Sixty characters, not bytes: Cyrillic or Chinese words before the path.)
            let near = win.start
                ..text[win.clone()]
                    .char_indices()
                    .nth(60)
                    .map_or(win.end, |(i, _)| win.start + i);
            path_in(text, prot, near).filter(|f| kind == Kind::Path || !f.value.ends_with('/'))
        }
        Kind::Command => command_in(text, prot, win),
        Kind::Query => query_in(text, prot, win),
        Kind::Pattern => pattern_in(text, prot, win),
        Kind::Glob => glob_in(text, prot, win),
        Kind::Number => {
            let near = win.start..floor(text, (win.start + 60).min(win.end));
            number_in(text, near)
        }
        Kind::Text => {
            let near = win.start..floor(text, (win.start + 60).min(win.end));
            quoted_in(
                prot,
                text,
                near,
                &[Quote::Double, Quote::Single, Quote::Backtick],
            )
            .or_else(|| bare_value_in(text, win, param))
        }
    }
}

/// The first number in `win`, as written ("52.5200" keeps its zeros).
fn number_in(text: &str, win: Range<usize>) -> Option<Found> {
    let s = &text[win.clone()];
    let mut pos = 0;
    for w in s.split(|c: char| c.is_whitespace() || matches!(c, ',' | '(' | ')' | ';')) {
        let at = pos;
        pos += w.len() + 1;
        let v = w.trim_end_matches(['.', ':', '!', '?']);
        if v.starts_with(|c: char| c.is_ascii_digit() || c == '-')
            && v.parse::<f64>().is_ok_and(f64::is_finite)
        {
            let start = win.start + at;
            return Some(Found {
                value: v.to_string(),
                range: start..start + v.len(),
            });
        }
    }
    None
}

/// A value written without quotes right after the tool's name: "… function for Paris",
/// "… for New York". (Values stated with their property's name are `bind`'s.)
fn bare_value_in(text: &str, win: Range<usize>, param: &str) -> Option<Found> {
    let s = &text[win.clone()];
    let lower = s.to_ascii_lowercase();
    let _ = param; // named statements are read by `bind`
    let mut at: Option<usize> = None;
    // ("calling funcB with 2", "with Paris": a value, not "with the results".)
    let mut with = false;
    // Named: "<param> set to X", "<param>=X", "<param>: X", "<param> X".
    // Positional: right after the name (and "function"/"tool"), a preposition.
    if at.is_none() {
        let t = lower.trim_start();
        let mut j = lower.len() - t.len();
        for noun in ["function ", "tool "] {
            if lower[j..].starts_with(noun) {
                j += noun.len();
            }
        }
        for prep in ["for ", "in ", "on ", "about ", "with "] {
            if lower[j..].starts_with(prep) {
                at = Some(j + prep.len());
                with = prep == "with ";
                break;
            }
        }
    }
    let Some(j) = at else {
        return proper_noun_in(text, win);
    };
    let rest = &s[j..];
    let lead = rest.len() - rest.trim_start().len();
    let rest = rest.trim_start();
    let mut end = rest.len();
    for (i, c) in rest.char_indices() {
        let next = rest[i + c.len_utf8()..].chars().next();
        if matches!(c, ';' | '\n' | '(' | '"' | '`' | '!' | '?')
            || (matches!(c, '.' | ',')
                && next.is_none_or(char::is_whitespace)
                && !is_place_comma(rest, i))
        {
            end = i;
            break;
        }
    }
    let mut v = rest[..end].trim();
    for stop in [
        " and ",
        " to ",
        " so ",
        " then ",
        " because ",
        " first",
        " now",
        " next",
        " again",
    ] {
        if let Some(i) = v.to_ascii_lowercase().find(stop) {
            v = v[..i].trim();
        }
    }
    // How or when the call is made is no part of its value ("for Paris directly without
    // any introduction", "for Tokyo right away", "for Oslo using metric units").
    let mut cut = None;
    let mut from = 0;
    // (Only after a name: "mount holly" written in lower case is the place.)
    let named = v.starts_with(char::is_uppercase);
    for (k, w) in v.split_whitespace().enumerate().filter(|_| named) {
        let at = from + v[from..].find(w).unwrap_or(0);
        from = at + w.len();
        let bare = w.trim_matches(|c: char| !c.is_alphanumeric());
        let manner = bare.len() > 4 && bare.ends_with("ly") && bare.starts_with(char::is_lowercase);
        if k > 0
            && (manner
                || matches!(
                    bare,
                    "without" | "using" | "via" | "please" | "instead" | "right" | "too" | "as"
                ))
        {
            cut = Some(at);
            break;
        }
    }
    if let Some(at) = cut {
        v = v[..at].trim_end();
    }
    // The clause may end on its joining word ("for Seoul and | then …").
    for tail in [" and", " or", " but"] {
        // (`get`: the byte `tail.len()` from the end may fall inside a character.)
        if v.len() > tail.len()
            && v.get(v.len() - tail.len()..)
                .is_some_and(|t| t.eq_ignore_ascii_case(tail))
        {
            v = v[..v.len() - tail.len()].trim_end();
        }
    }
    let v = v.trim_start_matches("the ").trim();
    if v.is_empty() || v.split_whitespace().count() > 5 || generic_phrase(&v.to_ascii_lowercase()) {
        return None;
    }
    if with && !v.starts_with(|c: char| c.is_ascii_digit() || c.is_uppercase()) {
        return None;
    }
    // ("with Celsius units for Paris": a modifier of the call, the value comes after; "with
    // New York" is a name of capitalised words.)
    if with
        && !v
            .split_whitespace()
            .all(|w| w.starts_with(|c: char| c.is_ascii_digit() || c.is_uppercase()))
    {
        return proper_noun_in(text, win);
    }
    let off = win.start + j + lead + (rest.find(v).unwrap_or(0));
    Some(Found {
        value: v.to_string(),
        range: off..off + v.len(),
    })
}

static PROPER_AFTER_PREP: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"\b(?:for|in|about|of|on|at)\s+((?:[A-Z](?:[\w'-]|\.\w)*)(?:,?[ \t]+[A-Z](?:[\w'-]|\.\w)*){0,3})",
    )
});

static PLACE_JUST_NAMED: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"\b(?:is|was|visit|visiting|to)\s+((?:[A-Z](?:[\w'-]|\.\w)*)(?:,?[ \t]+[A-Z](?:[\w'-]|\.\w)*){0,3})",
    )
});

/// "… the get_weather tool to check the weather in San Francisco": further on in the
/// clause, a capitalised name after a preposition.
fn proper_noun_in(text: &str, win: Range<usize>) -> Option<Found> {
    // Up to the end of the sentence, not the clause: "in Florence, Italy" has a comma.
    let rest = &text[win.start..floor(text, (win.start + 120).min(text.len()))];
    let stop = rest
        .char_indices()
        .find(|&(i, c)| {
            c == '\n'
                || (matches!(c, '.' | '!' | '?' | ';')
                    && rest[i + 1..].chars().next().is_none_or(char::is_whitespace))
        })
        .map_or(rest.len(), |(i, _)| i);
    let s = &rest[..stop];
    let caps = PROPER_AFTER_PREP.captures(s)?;
    let m = caps.get(1)?;
    let v = m.as_str().trim_end_matches(['.', ',']);
    if generic_phrase(&v.to_ascii_lowercase()) || ["I", "We", "The", "This"].contains(&v) {
        return None;
    }
    let off = win.start + m.start();
    Some(Found {
        value: v.to_string(),
        range: off..off + v.len(),
    })
}

/// "Florence, Italy": a comma between two capitalised words is part of a place name.
fn is_place_comma(s: &str, i: usize) -> bool {
    s[..i].chars().next_back().is_some_and(char::is_alphabetic)
        && s[i + 1..]
            .trim_start()
            .chars()
            .next()
            .is_some_and(char::is_uppercase)
        && s[..i]
            .split_whitespace()
            .last()
            .is_some_and(|w| w.chars().next().is_some_and(char::is_uppercase))
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
    /// Where its first word starts.
    start: usize,
    end: usize,
    profile: usize,
    by_name: bool,
    own: bool,
    /// The tool's own verb, and no other offered tool's verb at all.
    sole: bool,
}

pub(crate) fn parse(text: &str, tools: &[ToolSpec], cfg: &ParserConfig) -> StrategyOutput {
    parse_as(text, tools, cfg, false)
}

/// [`parse`] of the model's reasoning, where an imperative is its own note to itself.
pub(crate) fn parse_reasoning(
    text: &str,
    tools: &[ToolSpec],
    cfg: &ParserConfig,
) -> StrategyOutput {
    parse_as(text, tools, cfg, true)
}

fn parse_as(text: &str, tools: &[ToolSpec], cfg: &ParserConfig, own_note: bool) -> StrategyOutput {
    let text = &text[..floor(text, MAX_TEXT)];
    // A tool named by a common noun of a cased script (`Поиск`, "search"; `Калькулятор`)
    // is that noun in the model's words ("Поиск по сайту сейчас не работает"): such
    // tools are called in markup (ReAct's `Action: Поиск`), not read from prose.
    let cased = |t: &ToolSpec| t.name.chars().any(|c| !c.is_ascii() && c.is_uppercase());
    let owned: Vec<ToolSpec>;
    let tools = if tools.iter().any(cased) {
        owned = tools.iter().filter(|t| !cased(t)).cloned().collect();
        &owned[..]
    } else {
        tools
    };
    let Some(simple) = hant::simplified(text) else {
        return parse_text(text, tools, cfg, own_note);
    };
    let mut out = parse_text(&simple, tools, cfg, own_note);
    hant::restore(text, &simple, &mut out.calls);
    out
}

fn parse_text(
    text: &str,
    tools: &[ToolSpec],
    cfg: &ParserConfig,
    own_note: bool,
) -> StrategyOutput {
    let mut out = StrategyOutput::default();
    // A smolagents planning step (`… <end_plan>`) names the tools of later steps; a
    // plan runs nothing.
    if text.contains("<end_plan>") {
        return out;
    }
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
        if sentence_rejected(text, &sent) || defers_to_next(text, sent.end) {
            continue;
        }
        let mut toks = tokens(text, sent.clone());
        gerunds_as_verbs(&mut toks, &is_verb);
        for clause in clauses(text, sent.clone(), &toks, &prot, &is_verb) {
            let lo = toks.partition_point(|t| t.range.start < clause.start);
            let hi = toks.partition_point(|t| t.range.end <= clause.end).max(lo);
            let idx: Vec<usize> = (lo..hi).collect();
            let mut trigs: Vec<Trigger> = Vec::new();
            for &k in &idx {
                let t = &toks[k];
                // Quoted text is an argument, not a verb; only a tool's name alone in
                // its quotes (`` `Read` ``) still names the tool.
                let quoted = prot_at(&prot, t.range.start);
                let quoted_name = quoted.is_some_and(|q| {
                    let inner = text[q.inner.clone()].trim();
                    let word = &text[t.range.clone()];
                    // `` `get_events(year, location=None)` ``: the name with its signature.
                    (inner == word
                        || (t.range.start == q.inner.start
                            && inner.strip_prefix(word).is_some_and(|r| r.starts_with('('))
                            && inner.ends_with(')')))
                        // In prose, not a value in code or JSON (`f("get_user_id", …)`,
                        // `"name": "get_weather"`).
                        && text[..q.range.start]
                            .chars()
                            .next_back()
                            .is_none_or(|c| c.is_whitespace() || is_cjk(c))
                        && text[..q.range.start]
                            .trim_end()
                            .chars()
                            .next_back()
                            .is_none_or(|c| !matches!(c, ':' | ',' | '(' | '[' | '{' | '='))
                });
                if (quoted.is_some() || code_like(text, &t.range)) && !quoted_name {
                    continue;
                }
                let capital = text[t.range.clone()].starts_with(char::is_uppercase);
                // ("(Source: Google AI Blog, …)", "- Google AI Blog: https://…": a run of
                // capitals after a label or a list's dash is a name.)
                let label_run = capital
                    && toks.get(k + 1).is_some_and(|n| {
                        text[n.range.clone()].starts_with(char::is_uppercase)
                            && text[t.range.end..n.range.start].trim().is_empty()
                    })
                    && text[..t.range.start]
                        .trim_end_matches([' ', '\t'])
                        .ends_with([':', '(', '-', '*']);
                let capital_inside = label_run
                    || capital
                        && text[sent.start..t.range.start]
                            .trim_end()
                            .ends_with(|c: char| c.is_alphanumeric() || matches!(c, ',' | '('));
                for (pi, p) in profs.iter().enumerate() {
                    if p.names.contains(&t.lower) {
                        trigs.push(Trigger {
                            tok: k,
                            start: t.range.start,
                            end: t.range.end,
                            profile: pi,
                            by_name: true,
                            own: true,
                            sole: false,
                        });
                        continue;
                    }
                    if let Some(end) = spaced_name(p, text, &toks, k, clause.end)
                        .or_else(|| reordered_name(p, &toks, k, clause.end))
                    {
                        trigs.push(Trigger {
                            tok: k,
                            start: t.range.start,
                            end,
                            profile: pi,
                            by_name: true,
                            own: true,
                            sole: false,
                        });
                        continue;
                    }
                    // A capital inside a sentence is a name, not the verb: "tooling
                    // (Google Docs, …)", and the tool's own name written as a proper name
                    // ("Wolfram Alpha") without "tool" or "function".
                    let spelled = capital
                        && p.spaced.iter().any(|w| {
                            words_at(&toks, k, w)
                                && toks[k..k + w.len()]
                                    .iter()
                                    .all(|x| text[x.range.clone()].starts_with(char::is_uppercase))
                        });
                    if spelled || capital_inside || quoted_name {
                        continue;
                    }
                    // ("Google이 봇 차단": a name with its Korean particle, no verb.)
                    let glued = text[t.range.end..].chars().next().is_some_and(is_cjk);
                    for v in p.verbs.iter().filter(|_| !glued) {
                        // ("online advertising, search engine technology": a noun.)
                        if v.len() == 1
                            && v[0] == "search"
                            && toks
                                .get(k + 1)
                                .is_some_and(|n| SEARCH_COMPOUNDS.contains(&n.lower.as_str()))
                        {
                            continue;
                        }
                        if let Some(end) = verb_end(&toks, k, v, clause.end) {
                            let own = p.own_verbs.contains(v);
                            let sole = own
                                && !profs
                                    .iter()
                                    .enumerate()
                                    .any(|(j, q)| j != pi && q.verbs.contains(v));
                            trigs.push(Trigger {
                                tok: k,
                                start: t.range.start,
                                end,
                                profile: pi,
                                by_name: false,
                                own,
                                sole,
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
                // "I called get_x for now and get_y for tomorrow": the past reaches over
                // the clause boundary.
                // (Within a window: a sentence with no end would make this quadratic.)
                let at = toks[tok].range.start;
                let before_in_sentence =
                    &text[sent.start.max(floor(text, at.saturating_sub(600))).min(at)..at];
                if words(before_in_sentence)
                    .iter()
                    .any(|w| PRE_PAST.contains(&w.as_str()))
                {
                    continue;
                }
                // "Please provide the time and I'll schedule it": waits on the user.
                // ("Please add your key to `.env` first. After that, I'll run …": the
                // sentence before, when this one follows on from it.)
                let mut lower_before = before_in_sentence.to_lowercase();
                if follows_on(&lower_before) {
                    let back = floor(text, sent.start.saturating_sub(200));
                    lower_before = text[back..at].to_lowercase();
                }
                if waits_on_user(&lower_before) {
                    continue;
                }
                // "**Search Web**: Search the internet for …": a tool's description.
                if describes_tool(text, toks[tok].range.start, tools)
                    || bold_label(text, toks[tok].range.start)
                {
                    continue;
                }
                let verb_word = toks[tok].lower.as_str();
                // Per trigger: its score, its calls and the nouns of its tool it saw.
                let mut candidates: Vec<(i32, Vec<ParsedCall>, Vec<usize>)> = Vec::new();
                for tr in &group {
                    let p = &profs[tr.profile];
                    let Some(calls) = build_calls(p, tr, text, &prot, &clause, &sent, cfg, tools)
                    else {
                        continue;
                    };
                    // Nouns between the verb and the argument ("search the codebase for").
                    // A call without arguments was named by the nouns after its verb:
                    // they count up to the clause's end.
                    let bare = calls
                        .iter()
                        .all(|c| c.arguments.as_object().is_some_and(Map::is_empty));
                    // (Nor were its arguments read after the verb: "Paris. Let me fetch
                    // the weather.")
                    let before_only = calls.iter().all(|c| c.span.end <= t_end);
                    let reach = if bare || before_only {
                        clause.end
                    } else {
                        calls.iter().map(|c| c.span.end).max().unwrap_or(t_end)
                    };
                    let nouns: Vec<usize> = idx
                        .iter()
                        .copied()
                        .filter(|&j| {
                            toks[j].range.start >= toks[tok].range.start
                                && toks[j].range.end <= reach
                                && !in_protected(&prot, toks[j].range.start)
                        })
                        .filter(|&j| noun_of(p, &toks[j].lower))
                        .collect();
                    let noun_hits = nouns.len() as i32;
                    if (p.needs_noun || !tr.own) && noun_hits == 0 && !tr.by_name {
                        continue;
                    }
                    let made = || {
                        idx.iter()
                            .filter(|&&j| {
                                toks[j].range.start >= toks[tok].range.start
                                    && toks[j].range.end <= reach
                            })
                            .any(|&j| {
                                let w = &toks[j].lower;
                                p.made_nouns
                                    .iter()
                                    .any(|n| names_noun(n, w) || kin_of(n, w))
                            })
                    };
                    if !p.made_nouns.is_empty() && !tr.by_name && !made() {
                        continue;
                    }
                    let alias_hit = cfg
                        .aliases
                        .get(verb_word)
                        .is_some_and(|target| *target == p.tool.name);
                    // "get the permissions for this user ID": the verb's object decides.
                    let object_hit = toks[tok + 1..]
                        .iter()
                        .take_while(|x| x.range.end <= clause.end)
                        .find(|x| !BEFORE_BLOCK.contains(&x.lower.as_str()))
                        .is_some_and(|x| noun_of(p, &x.lower));
                    // (Between tools that fit the words, the one whose arguments the text
                    // states: "your customer ID 1213210, I can retrieve your orders".)
                    let score = 2 * noun_hits
                        + i32::from(!bare)
                        + i32::from(object_hit)
                        + i32::from(alias_hit)
                        + i32::from(tr.own)
                        + 3 * i32::from(tr.by_name);
                    candidates.push((score, calls, nouns));
                }
                let best = candidates
                    .iter()
                    .enumerate()
                    .max_by_key(|(i, (s, _, _))| (*s, std::cmp::Reverse(*i)))
                    .map(|(i, _)| i);
                match best {
                    Some(b) => {
                        let joined = joined_objects(&toks, &candidates, b);
                        for (i, (_, calls, _)) in candidates.into_iter().enumerate() {
                            if i == b || joined.contains(&i) {
                                out.calls.extend(calls);
                            }
                        }
                    }
                    // The tool is named in an intending clause but its arguments are not
                    // in the text: not a call, but worth asking about.
                    None => {
                        if let Some(tr) = group.iter().find(|t| t.by_name) {
                            out.unsure.push(crate::Unsure {
                                name: profs[tr.profile].tool.name.clone(),
                                arguments: Value::Object(Map::new()),
                                strategy: crate::Strategy::Fuzzy,
                                source: crate::Source::Content,
                                excerpt: text[sent.clone()].trim().to_string(),
                            });
                        }
                    }
                }
            }
        }
    }
    if out.calls.is_empty() {
        inline_calls(text, tools, cfg, &mut out);
    } else {
        // A call written out after the steps read so far ("… we can call fetch_url to
        // any URL. Let's try:\n\nfetch_url('https://…', max_chars 8000)") is the step the
        // text settles on.
        let mut written = StrategyOutput::default();
        inline_calls(text, tools, cfg, &mut written);
        let last = out.calls.iter().map(|c| c.span.end).max().unwrap_or(0);
        if !written.calls.is_empty() && written.calls.iter().all(|c| c.span.start >= last) {
            out.calls = written.calls;
        }
    }
    if out.calls.is_empty() {
        stated_arguments(text, cfg, tools, &mut out);
    }
    if out.calls.is_empty() {
        trailing_arguments(text, cfg, tools, &mut out);
    }
    // ("I'll read the file using both available tools": the verb found one of the two.)
    let bare = out
        .calls
        .iter()
        .all(|c| c.arguments.as_object().is_some_and(Map::is_empty));
    if bare && !both_functions(text, cfg, tools, &mut out) && out.calls.is_empty() {
        the_function(text, cfg, tools, &mut out);
    }
    if out.calls.is_empty() {
        call_it(text, cfg, tools, &mut out);
    }
    if out.calls.is_empty() {
        run_by_word(text, cfg, tools, &mut out);
    }
    if out.calls.is_empty() {
        do_that(text, cfg, tools, &mut out);
    }
    managed::managed_step(text, cfg, tools, &mut out);
    if text.contains(":\n") {
        announced_command_line(text, cfg, tools, &mut out);
    }
    command_after_step(text, cfg, tools, &mut out);
    if out.calls.is_empty() {
        closing_colon(text, cfg, tools, &mut out);
    }
    if out.calls.is_empty() {
        try_again(text, cfg, tools, &mut out);
    }
    if out.calls.is_empty() {
        shell_status_line(text, cfg, tools, &mut out);
    }
    // (A search of code read as the web's makes way for the workbench's search.)
    drop_code_searched_on_web(text, &mut out.calls);
    if out.calls.is_empty() {
        workbench::next_step(text, cfg, tools, &mut out, own_note);
    }
    if out.calls.is_empty() {
        workbench::ask_step(text, cfg, tools, &mut out);
    }
    if out.calls.is_empty() {
        workbench::plan_step(text, cfg, tools, &mut out);
    }
    if out.calls.is_empty() {
        value_for_property(text, cfg, tools, &mut out);
    }
    if out.calls.is_empty() {
        ready_to_call(text, cfg, tools, &mut out);
    }
    if out.calls.is_empty() && out.unsure.is_empty() {
        described::described_step(text, cfg, tools, &mut out);
    }
    if out.calls.is_empty() && text.chars().any(is_cjk) {
        cjk_named::described_tool(text, cfg, tools, &mut out);
    }
    if out.calls.is_empty() && text.chars().any(is_cjk) {
        cjk_named::chinese_name(text, cfg, tools, &mut out);
    }
    if out.calls.is_empty() && text.chars().any(is_cjk) {
        cjk_intent(text, cfg, tools, &mut out);
    }
    if !out.calls.is_empty() && ends_asking_user(text) {
        out.calls.clear();
    }
    out.calls.retain(|c| {
        !in_link_label(text, c.span.start)
            && !changelog_entry(text, c.span.start)
            && !gerund_subject(text, &c.span)
            && !in_code_fence(text, c.span.start)
            && !capability_listed(text, c.span.start)
            && !names_code(text, c)
            && !taken_back(text, c.span.end)
            && !step_deferred(text, &c.span)
    });
    first_step_named(text, cfg, tools, &mut out.calls);
    drop_shown_reads(text, tools, &mut out.calls);
    drop_code_searched_on_web(text, &mut out.calls);
    drop_later_steps(text, &mut out.calls);
    drop_purposes(text, &mut out.calls);
    drop_explained_by_example(text, &mut out.calls);
    drop_replaced_by_instrument(text, &mut out.calls);
    cjk_named::fill_stated(text, tools, &mut out.calls);
    fill_bindings(text, tools, &mut out.calls);
    convert::fill_conversion(text, tools, &mut out.calls);
    proxy::fill_proxy(text, tools, &mut out.calls);
    antecedent::command_named_before(text, tools, &mut out.calls);
    antecedent::query_named_before(text, tools, &mut out.calls);
    repeat_calls(text, tools, &mut out.calls);
    drop_inside_arguments(text, &mut out.calls);
    drop_misfits(tools, &mut out.calls);
    drop_own_name_words(text, tools, &mut out.calls);
    each_of_named(text, &mut out.calls);
    if text.chars().any(is_cjk) {
        cjk_named::each_in_chinese(text, tools, &mut out.calls);
    }
    merge_subsets(&mut out.calls);
    keep_strongest_per_tool(&mut out.calls);
    bracketed_markup(text, &mut out);
    out
}

/// `[Calling tool: run with arguments: {…}]` on a line of its own is markup a chat front
/// end printed, not words for the user: it leaves the final text with the call.
fn bracketed_markup(text: &str, out: &mut StrategyOutput) {
    for c in &out.calls {
        let start = line_start(text, c.span.start.min(text.len()));
        let end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        let line = text[start..end].trim();
        if line.starts_with('[') && line.ends_with(']') && c.span.end <= end {
            let lead = text[start..end].find('[').unwrap_or(0);
            let r = start + lead..start + lead + line.len();
            if !out.markup.contains(&r) {
                out.markup.push(r);
            }
        }
    }
}

/// "check the current time and weather in Tokyo": one verb whose objects, joined by
/// "and", are nouns of different tools calls each of them, not just the best scored.
fn joined_objects(
    toks: &[Tok],
    candidates: &[(i32, Vec<ParsedCall>, Vec<usize>)],
    best: usize,
) -> Vec<usize> {
    let (_, best_calls, best_nouns) = &candidates[best];
    let Some(&b) = best_nouns.first() else {
        return Vec::new();
    };
    let mut taken: Vec<usize> = best_nouns.clone();
    let mut names: Vec<&str> = best_calls.iter().map(|c| c.name.as_str()).collect();
    let mut out = Vec::new();
    for (i, (_, calls, nouns)) in candidates.iter().enumerate() {
        let Some(&n) = nouns.first() else { continue };
        let fresh_tool = calls.iter().all(|c| !names.contains(&c.name.as_str()));
        if i == best || !fresh_tool || nouns.iter().any(|j| taken.contains(j)) {
            continue;
        }
        let (lo, hi) = (b.min(n), b.max(n));
        let between = &toks[lo + 1..hi];
        let joined = !between.is_empty()
            && between.len() <= 3
            && between.iter().any(|t| t.lower == "and")
            && between
                .iter()
                .all(|t| matches!(t.lower.as_str(), "and" | "the" | "current"));
        if joined {
            taken.extend(nouns);
            names.extend(calls.iter().map(|c| c.name.as_str()));
            out.push(i);
        }
    }
    out
}

/// Where a tool's name written as words ends, when it starts at token `k`: "call the
/// no args tool", "use the web search function". The words alone ("a web search") are a
/// name only when the tool's own name ends in "tool" or the next word says it is one.
fn spaced_name(
    p: &Profile,
    text: &str,
    toks: &[Tok],
    k: usize,
    clause_end: usize,
) -> Option<usize> {
    p.spaced.iter().find_map(|w| {
        if !words_at(toks, k, w) {
            return None;
        }
        let last = &toks[k + w.len() - 1];
        if last.range.end > clause_end {
            return None;
        }
        // `web-browsing` written as it is offered is its name, whatever follows.
        let joined = !text[toks[k].range.start..last.range.end].contains(char::is_whitespace);
        // ("I'll use the structured data assistant": a name of several words as the
        // object of "use".)
        let used = w.len() >= 2
            && phrase_just_before(
                text,
                toks[k].range.start,
                &["use the", "using the", "call the", "invoke the"],
            );
        // ("Let me exit plan mode.": a name of three words or more said as the step.)
        let stepped = w.len() >= 3
            && phrase_just_before(
                text,
                toks[k].range.start,
                &["let me", "let's", "i'll", "i will", "i'm going to"],
            );
        let named = joined
            || used
            || stepped
            || matches!(w.last().map(String::as_str), Some("tool" | "function"))
            || toks.get(k + w.len()).is_some_and(|n| {
                matches!(
                    n.lower.as_str(),
                    "tool" | "function" | "tools" | "functions"
                )
            });
        named.then_some(last.range.end)
    })
}

/// Where a two- or three-word name said in another order ends, when it starts at token
/// `k`: "roll the dice" for `dice_roll`.
fn reordered_name(p: &Profile, toks: &[Tok], k: usize, clause_end: usize) -> Option<usize> {
    p.spaced.iter().find_map(|w| {
        let first = toks.get(k)?;
        // Most tokens are no word of the name: decided before anything is allocated.
        if !(2..=3).contains(&w.len())
            || first.lower == w[0]
            || !w.iter().any(|x| same_word(x, &first.lower))
        {
            return None;
        }
        let mut left: Vec<&String> = w.iter().collect();
        let mut end = None;
        let mut nominal = false;
        let mut next = k;
        for t in toks[k..].iter().take_while(|t| t.range.end <= clause_end) {
            if left.is_empty() {
                break;
            }
            next += 1;
            if let Some(i) = left.iter().position(|x| same_word(x, &t.lower)) {
                nominal |= *left[i] != t.lower;
                left.swap_remove(i);
                end = Some(t.range.end);
            } else if end.is_none() || !["the", "a", "an", "some"].contains(&t.lower.as_str()) {
                return None;
            }
        }
        // ("the currency conversion tool" for `convert_currency`: a verb said as its noun
        // names the tool only when a word says it is one.)
        let called_tool = || {
            toks.get(next).is_some_and(|n| {
                matches!(n.lower.as_str(), "tool" | "function" | "api" | "service")
            })
        };
        if left.is_empty() && (!nominal || called_tool()) {
            end
        } else {
            None
        }
    })
}

/// A word of a tool's name said as it is or as its noun ("conversion" for `convert`).
fn same_word(name_word: &str, said: &str) -> bool {
    name_word == said || verb_of_noun(said) == name_word
}

/// The verb a noun of action names ("conversion" → "convert"), or the word itself.
fn verb_of_noun(word: &str) -> &str {
    match word {
        "conversion" => "convert",
        "translation" => "translate",
        "calculation" => "calculate",
        "creation" => "create",
        "deletion" => "delete",
        "retrieval" => "retrieve",
        "generation" => "generate",
        "addition" => "add",
        "multiplication" => "multiply",
        "subtraction" => "subtract",
        "division" => "divide",
        "execution" => "execute",
        "validation" => "validate",
        "summarization" | "summary" => "summarize",
        "transcription" => "transcribe",
        "registration" => "register",
        "reservation" => "reserve",
        "booking" => "book",
        "cancellation" => "cancel",
        "notification" => "notify",
        "verification" => "verify",
        "extraction" => "extract",
        "analysis" => "analyze",
        "comparison" => "compare",
        "estimation" => "estimate",
        "prediction" => "predict",
        "detection" => "detect",
        "classification" => "classify",
        "recommendation" => "recommend",
        other => other,
    }
}

/// A noun of the tool, singular or plural ("secrets" for `secret_retrieval_tool`).
fn noun_of(p: &Profile, word: &str) -> bool {
    p.nouns.iter().any(|n| n == word)
        || word
            .strip_suffix('s')
            .is_some_and(|w| w.len() > 2 && p.nouns.iter().any(|n| n == w))
}

/// "call dice_roll three times": how many calls of a tool without arguments.
fn times(near: &str) -> usize {
    let lower = near.to_lowercase();
    if has_phrase(&lower, "twice") {
        return 2;
    }
    for (w, n) in [
        ("2", 2),
        ("two", 2),
        ("3", 3),
        ("three", 3),
        ("4", 4),
        ("four", 4),
        ("5", 5),
        ("five", 5),
    ] {
        if has_phrase(&lower, &format!("{w} times")) {
            return n;
        }
    }
    1
}

/// "Then another call with "GOOGL"": the same tool again for another value.
static ANOTHER_CALL: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r#"(?i)\banother\s+(?:call|one)\s+(?:with|for)\s+(?:the\s+\w+\s+)?["'`]([^"'`\n]{1,80})["'`]"#,
    )
});
/// `Seoul and New York`, `Paris, Rome and Oslo` right after a value already read.
static AND_MORE: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"^((?:,\s*[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,2})*)\s*,?\s+and\s+([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,2})",
    )
});
/// `"mellon" and "radiance"` right after a quoted value already read.
static AND_QUOTED: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(r#"^["'`]\s*,?\s+and\s+["'`]([^"'`\n]{1,80})["'`]"#)
});
/// Capitalised names joined by "and" after a preposition or a colon: `in Paris, Rome and
/// Oslo`, `cities: Seattle and San Francisco`.
static NAMES_JOINED: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?:\b(?:in|for|at|of|between)|:)\s+([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,2}(?:,\s*[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,2})*)\s*,?\s+and\s+([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,2})\b",
    )
});
/// Words that say one call per value follows.
const EACH: &[&str] = &[
    "each of these",
    "each of the",
    "twice",
    "for each",
    "once for each",
    "both",
    "each city",
    "two calls",
    "respective",
];

/// One prose call for a value, where the text says the tool runs once per value: "I'll
/// call get_weather twice, for Seoul and New York", "first with "AAPL", then another call
/// with "GOOGL"", "the passwords "mellon" and "radiance""; and a tool without arguments
/// as many times as the text says ("roll the dice three times").
fn repeat_calls(text: &str, tools: &[ToolSpec], calls: &mut Vec<ParsedCall>) {
    let mut more = Vec::new();
    let mut repeats = Vec::new();
    for c in calls.iter() {
        let Some(args) = c.arguments.as_object() else {
            continue;
        };
        let from = floor(text, c.span.start.saturating_sub(WINDOW));
        let to = floor(text, (c.span.end + WINDOW).min(text.len()));
        let near = &text[from..to];
        // A tool without arguments, called a stated number of times.
        if args.is_empty()
            && tools
                .iter()
                .any(|t| t.name == c.name && t.properties().is_empty())
        {
            for _ in 1..times(near) {
                repeats.push(c.clone());
            }
            continue;
        }
        // "To read `a.json`, `b.json` and `c.json`, I'll call read_file for each file":
        // the values were listed before the tool was named.
        if args.is_empty() {
            let tool = tools.iter().find(|t| t.name == c.name);
            let Some(key) = tool.and_then(|t| t.primary_property()) else {
                continue;
            };
            let lower = near.to_lowercase();
            let n = times(near);
            let each = n > 1 || EACH.iter().any(|w| has_phrase(&lower, w));
            let mut values = listed_values(call_sentence(text, &c.span), &c.name);
            // "… in two cities: Seattle and San Francisco. I will use the tool to get the
            // weather in each of these locations.": names listed just before.
            if values.len() < 2 {
                values = NAMES_JOINED
                    .captures_iter(&text[from..c.span.start.max(from)])
                    .last()
                    .map(|m| {
                        let head = m.get(1).map_or("", |x| x.as_str());
                        head.split(',')
                            .chain(m.get(2).map(|x| x.as_str()))
                            .map(|v| v.trim().to_string())
                            .filter(|v| !v.is_empty())
                            .collect()
                    })
                    .unwrap_or_default();
            }
            // "调用postgres-query函数两次": a count said right after the name, with no
            // values, is that many calls.
            let counted = text[c.span.end..]
                .trim_start_matches([' ', '`'])
                .trim_start_matches("函数")
                .trim_start_matches("工具");
            let count = [("两次", 2), ("三次", 3), (" twice", 2)]
                .iter()
                .find(|(w, _)| counted.starts_with(w.trim_start()))
                .map_or(1, |(_, k)| *k);
            // "I'll read both plan files": two things of one kind, not named, are two calls.
            static BOTH: LazyLock<Regex> = LazyLock::new(|| {
                ferroclaw_types::literal_regex(
                    r"(?i)\b(?:both|the two|these two|those two)\s+(?:[a-z]+\s+)?(?:files|scripts|modules|documents|pages|configs|plans|logs|tests)\b",
                )
            });
            let count = if count == 1 && BOTH.is_match(call_sentence(text, &c.span)) {
                2
            } else {
                count
            };
            if values.len() < 2 && count > 1 {
                for _ in 1..count {
                    repeats.push(c.clone());
                }
                continue;
            }
            if each && values.len() >= 2 && (n == 1 || n == values.len()) {
                for v in values {
                    let mut a = Map::new();
                    a.insert(key.to_string(), Value::String(v));
                    more.push(ParsedCall {
                        arguments: Value::Object(a),
                        ..c.clone()
                    });
                }
            }
            continue;
        }
        let [(key, Value::String(v))] = args.iter().collect::<Vec<_>>()[..] else {
            continue;
        };
        let mut add = |value: &str| {
            let mut a = Map::new();
            a.insert(key.clone(), Value::String(value.trim().to_string()));
            more.push(ParsedCall {
                arguments: Value::Object(a),
                ..c.clone()
            });
        };
        if let Some(m) = ANOTHER_CALL.captures(&text[c.span.end.min(to)..to]) {
            if let Some(x) = m.get(1) {
                add(x.as_str());
            }
        }
        // "the passwords "mellon" and "radiance"": the property's plural, or a word
        // saying one call per value.
        let lower = near.to_lowercase();
        let plural = has_phrase(&lower, &format!("{}s", key.to_lowercase()));
        if !plural && !EACH.iter().any(|w| has_phrase(&lower, w)) {
            continue;
        }
        let Some(at) = near.find(v.as_str()) else {
            continue;
        };
        let after = &near[at + v.len()..];
        if let Some(x) = AND_QUOTED.captures(after).and_then(|m| m.get(1)) {
            add(x.as_str());
        } else if let Some(m) = AND_MORE.captures(after) {
            for part in m.get(1).map_or("", |x| x.as_str()).split(',') {
                if !part.trim().is_empty() {
                    add(part);
                }
            }
            if let Some(last) = m.get(2) {
                add(last.as_str());
            }
        }
    }
    calls.extend(
        repeats
            .into_iter()
            .take(crate::MAX_CALLS.saturating_sub(calls.len())),
    );
    for m in more {
        if calls.len() >= crate::MAX_CALLS {
            break;
        }
        if !calls
            .iter()
            .any(|c| c.name == m.name && c.arguments == m.arguments)
        {
            calls.push(m);
        }
    }
}

/// "Look at `dequeue()` in `job_queue.py`:" followed by the code itself: the model
/// shows what it has read already, it does not read it now.
fn drop_shown_reads(text: &str, tools: &[ToolSpec], calls: &mut Vec<ParsedCall>) {
    calls.retain(|c| {
        // (A reader of files: `open_url` shows a page the text has not got.)
        let reads = crate::schema::name_words(&c.name)
            .iter()
            .any(|w| matches!(w.as_str(), "read" | "view" | "cat" | "open"))
            && tools.iter().find(|t| t.name == c.name).is_some_and(|t| {
                t.primary_property()
                    .is_some_and(|p| matches!(kind_of(t, p), Kind::File | Kind::Path))
            });
        if !reads {
            return true;
        }
        let sent = sentence_around(text, &c.span);
        let line_end = text[sent.end..]
            .find('\n')
            .map_or(text.len(), |i| sent.end + i);
        let shown = text[c.span.end.min(line_end)..line_end]
            .trim_end()
            .ends_with(':')
            && text[line_end..].trim_start().starts_with("```");
        !shown
    });
}

/// "So the first action is to call get_emails.", "the first tool call should be
/// `get_weather`": the step the model settled on.
static FIRST_STEP: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?i)\bfirst\s+(?:action|step|tool\s+call|function\s+call|call|thing\s+to\s+do)\s+(?:is|should\s+be|will\s+be)\s+(?:to\s+(?:call|use|invoke|run)\s+)?(?:the\s+)?`?([A-Za-z_][\w.-]{1,80})`?",
    )
});

/// A reasoning that plans several steps and then names its first: only that step's
/// calls are now; the rest of the plan comes after their results.
fn first_step_named(
    text: &str,
    cfg: &ParserConfig,
    tools: &[ToolSpec],
    calls: &mut Vec<ParsedCall>,
) {
    if calls.len() < 2 {
        return;
    }
    // (Not "the first call would be get_weather if they depended on each other".)
    let Some(first) = FIRST_STEP
        .captures_iter(text)
        .filter_map(|c| c.get(1))
        .filter(|m| {
            let after = &text[m.end()..floor(text, (m.end() + 60).min(text.len()))];
            !has_phrase(&after.to_lowercase(), "if")
        })
        .filter_map(|m| crate::schema::resolve(m.as_str(), tools, &cfg.aliases))
        .last()
    else {
        return;
    };
    if calls.iter().any(|c| c.name == first.name) {
        calls.retain(|c| c.name == first.name);
    }
}

/// Places of code a search of the web does not look in.
const CODE_PLACES: &[&str] = &[
    "codebase",
    "repository",
    "repo",
    "workspace",
    "project",
    "directory",
    "folder",
    "package",
    "module",
    "crate",
    "source",
];

/// A tool whose name says it searches the web (`web_search`, `google_search`,
/// `tavily_search`).
fn searches_web(name: &str) -> bool {
    let ws = crate::schema::name_words(name);
    ws.iter().any(|w| w == "search")
        && ws.iter().any(|w| {
            matches!(
                w.as_str(),
                "web"
                    | "internet"
                    | "google"
                    | "bing"
                    | "brave"
                    | "duckduckgo"
                    | "ddg"
                    | "tavily"
                    | "serp"
                    | "serper"
                    | "exa"
                    | "online"
            )
        })
}

/// "Let me search the codebase for `parse_config`": not a search of the web, whatever
/// search tool was offered.
fn drop_code_searched_on_web(text: &str, calls: &mut Vec<ParsedCall>) {
    calls.retain(|c| {
        if !searches_web(&c.name) {
            return true;
        }
        let sent = sentence_around(text, &c.span);
        let lower = text[sent].to_lowercase();
        // ("the CVEs in the dependencies listed in the project": the web is searched
        // for something a project has; "search the project", "in the codebase" are the
        // code's.)
        !CODE_PLACES.iter().any(|p| {
            [
                "search the",
                "searching the",
                "search through the",
                "search within the",
            ]
            .iter()
            .any(|d| has_phrase(&lower, &format!("{d} {p}")))
        }) && !["codebase", "repository", "repo"]
            .iter()
            .any(|p| has_phrase(&lower, &format!("in the {p}")))
            && !CODE_INSIDE.is_match(&lower)
            && !CODE_SEARCHED.is_match(&lower)
    });
}

/// "search the pi-mono package", "searching the auth module's sources": a place of code
/// searched, named with a word or two before it.
static CODE_SEARCHED: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"\bsearch(?:ing)?\s+(?:through\s+|within\s+)?the\s+(?:[\w.@/-]+\s+){1,2}(?:package|module|crate|codebase|repo|repository|project|directory|folder)\b",
    )
});

/// "search deeper into the pi-mono package", "inside the auth module": within code.
static CODE_INSIDE: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"\b(?:into|inside|within)\s+(?:the\s+)?(?:[\w.@/-]+\s+){0,2}(?:package|module|crate|source\s+code|src|codebase)\b",
    )
});

/// "exec command: ls -la /tmp": a tool's name inside another call's argument (here the
/// command line) is part of that value, not a call of its own.
fn drop_inside_arguments(text: &str, calls: &mut Vec<ParsedCall>) {
    if calls.len() < 2 {
        return;
    }
    let values: Vec<Range<usize>> = calls
        .iter()
        .flat_map(|c| c.arguments.as_object().into_iter().flat_map(|a| a.values()))
        .filter_map(Value::as_str)
        .filter(|v| v.len() >= 4)
        .filter_map(|v| text.find(v).map(|i| i..i + v.len()))
        .collect();
    calls.retain(|c| {
        !values
            .iter()
            .any(|v| v.start <= c.span.start && c.span.end <= v.end)
    });
}

/// "I will first list the tables, then I will query the schema of the relevant ones": a
/// step after "then" whose arguments the text does not state waits on the result of the
/// step before it. (A later step with its own arguments — "after that we'll read
/// docs/protocol.md" — does not.)
fn drop_later_steps(text: &str, calls: &mut Vec<ParsedCall>) {
    let Some(first) = calls.first() else {
        return;
    };
    let (first_end, first_name) = (first.span.end, first.name.clone());
    calls.retain(|c| {
        let stated = c.arguments.as_object().is_some_and(|a| !a.is_empty());
        if stated || c.span.start < first_end || c.name == first_name {
            return true;
        }
        let between = text[floor(text, first_end)..floor(text, c.span.start)].to_lowercase();
        !["then", "after that", "afterwards", "once"]
            .iter()
            .any(|w| has_phrase(&between, w))
    });
}

/// "I can use the `retrieve_record` function with `include_phi` set to false. Here's an
/// example:": a call explained by an example right after it is shown, not made.
fn drop_explained_by_example(text: &str, calls: &mut Vec<ParsedCall>) {
    const SHOWN: &[&str] = &[
        "here's an example",
        "here is an example",
        "for example:",
        "for demonstration purposes",
        "as an example",
    ];
    calls.retain(|c| {
        let end = sentence_around(text, &c.span).end;
        let next = &text[end..floor(text, (end + 240).min(text.len()))];
        let next = next.to_lowercase();
        // (What the example shows is a call of it: code, or the tool's name again.)
        let shown_call = next.contains("```") || next.contains(&c.name.to_lowercase());
        !(shown_call && SHOWN.iter().any(|s| next.contains(s)))
    });
}

/// "Let me spawn a subagent to fetch the weather": what another call is for, in the
/// same sentence after "to", is no call of its own.
fn drop_purposes(text: &str, calls: &mut Vec<ParsedCall>) {
    if calls.len() < 2 {
        return;
    }
    let spans: Vec<(Range<usize>, String)> = calls
        .iter()
        .map(|c| (c.span.clone(), c.name.clone()))
        .collect();
    calls.retain(|c| {
        let purpose = text[..floor(text, c.span.start)].ends_with(char::is_whitespace)
            && phrase_just_before(text, c.span.start, &["to"]);
        !purpose
            || !spans.iter().any(|(r, name)| {
                // (The other call's span may run on over this one's words.)
                *name != c.name
                    && r.start < c.span.start
                    && sentence_around(text, r).end >= c.span.start
            })
    });
}

/// "I will now search for papers on alien life using the arxiv tool": the tool named as
/// the instrument is the call; the one the verb alone suggested is not.
fn drop_replaced_by_instrument(text: &str, calls: &mut Vec<ParsedCall>) {
    if calls.len() < 2 {
        return;
    }
    let instruments: Vec<(Range<usize>, String)> = calls
        .iter()
        .filter(|c| {
            phrase_just_before(
                text,
                c.span.start,
                &["using the", "using", "via the", "via", "with the"],
            ) && text
                .get(c.span.clone())
                .is_some_and(|s| s.eq_ignore_ascii_case(&c.name))
        })
        .map(|c| (c.span.clone(), c.name.clone()))
        .collect();
    if instruments.is_empty() {
        return;
    }
    calls.retain(|c| {
        !instruments.iter().any(|(r, name)| {
            *name != c.name
                && c.span.start < r.start
                && sentence_around(text, &c.span).end >= r.start
        })
    });
}

/// The sentence around `span`.
pub(crate) fn call_sentence<'a>(text: &'a str, span: &Range<usize>) -> &'a str {
    &text[sentence_around(text, span)]
}

/// Where the sentence around `span` starts and ends.
fn sentence_around(text: &str, span: &Range<usize>) -> Range<usize> {
    let head = &text[..floor(text, span.start)];
    // A stop ends a sentence only before a space (`.eslintrc.json` goes on).
    let start = head.len() - last_sentence(head).len();
    let tail = &text[floor(text, span.end)..];
    let end = tail
        .char_indices()
        .find(|&(i, ch)| {
            ch == '\n'
                || (matches!(ch, '.' | '!' | '?')
                    && tail[i + 1..].chars().next().is_none_or(char::is_whitespace))
        })
        .map_or(text.len(), |(i, _)| floor(text, span.end) + i);
    start..end
}

/// `Seoul and New York`, `Paris, Rome and Oslo` (after "for" or "both").
static NAMES_LISTED: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"\b(?:for|both|in)\s+(?:both\s+)?([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,2}(?:\s*,\s*[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,2})*\s*,?\s+and\s+[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,2})",
    )
});

/// The values a sentence lists: two or more quoted or backticked items (not the tool's
/// own name), else capitalised names joined by "and".
fn listed_values(sentence: &str, tool: &str) -> Vec<String> {
    let prot = protected_spans(sentence);
    let quoted: Vec<String> = prot
        .iter()
        .map(|q| sentence[q.inner.clone()].trim())
        .filter(|v| !v.is_empty() && !v.eq_ignore_ascii_case(tool))
        .map(str::to_string)
        .collect();
    if quoted.len() >= 2 {
        return quoted;
    }
    let Some(m) = NAMES_LISTED.captures(sentence).and_then(|c| c.get(1)) else {
        return Vec::new();
    };
    m.as_str()
        .split(',')
        .flat_map(|p| p.split(" and "))
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// A value read from prose that the schema's type cannot hold ("Paris, I" for a
/// boolean) is a misreading, not the argument: it goes, and the tool says what is
/// missing.
fn drop_misfits(tools: &[ToolSpec], calls: &mut [ParsedCall]) {
    for c in calls.iter_mut() {
        let Some(tool) = tools.iter().find(|t| t.name == c.name) else {
            continue;
        };
        if let Some(args) = c.arguments.as_object_mut() {
            args.retain(|k, v| fits(tool, k, v));
        }
    }
}

/// A property that takes a SQL statement: `query`/`sql`/`statement` of a tool whose
/// name or description says SQL.
fn holds_sql(tool: &ToolSpec, key: &str) -> bool {
    // (The key first: `fits` asks this of every argument of every call.)
    // (`sql_query` too.)
    let key = key.to_ascii_lowercase();
    if !["query", "sql", "statement"].contains(&key.as_str()) && !key.contains("sql") {
        return false;
    }
    let about = format!("{} {}", tool.name, tool.description).to_ascii_lowercase();
    about.contains("sql") || about.contains("select query")
}

fn sql_shaped(s: &str) -> bool {
    let first = s
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_ascii_uppercase();
    [
        "SELECT", "WITH", "SHOW", "PRAGMA", "INSERT", "UPDATE", "DELETE", "CREATE", "DROP",
        "ALTER", "DESCRIBE", "EXPLAIN", "FROM",
    ]
    .contains(&first.as_str())
}

static EACH_OF: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?i)^(?:each|every|all)\b(?:\s+(?:of\s+)?(?:these|those|the|them|four|three|two|five|\d+))*(?:\s+[a-z]+)?$",
    )
});
static NAMED_LIST: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"([A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,3})((?:, [A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,3})*),? and ([A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,3})",
    )
});

/// "four cities: New York, London, Tokyo, and Beijing. I need to use the check_weather
/// function for each of these locations": "each of these" is the list named before, one
/// call per name; with no such list it is no value.
fn each_of_named(text: &str, calls: &mut Vec<ParsedCall>) {
    let mut i = 0;
    while i < calls.len() {
        let Some(args) = calls[i].arguments.as_object() else {
            i += 1;
            continue;
        };
        let Some((key, _)) = args
            .iter()
            .find(|(_, v)| v.as_str().is_some_and(|s| EACH_OF.is_match(s.trim())))
        else {
            i += 1;
            continue;
        };
        let key = key.clone();
        let before = &text[..floor(text, calls[i].span.start)];
        let names: Vec<String> = NAMED_LIST
            .captures_iter(before)
            .last()
            .map(|c| {
                let mut v = vec![c[1].to_string()];
                v.extend(
                    c[2].split(", ")
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(str::to_string),
                );
                v.push(c[3].to_string());
                // (A name ends at its sentence: "Beijing. I need …".)
                v.into_iter()
                    .map(|n| n.split(". ").next().unwrap_or_default().to_string())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let call = calls.remove(i);
        if names.len() < 2 {
            let mut c = call;
            if let Some(a) = c.arguments.as_object_mut() {
                a.remove(&key);
            }
            calls.insert(i, c);
            i += 1;
            continue;
        }
        for n in names {
            let mut c = call.clone();
            if let Some(a) = c.arguments.as_object_mut() {
                a.insert(key.clone(), Value::String(n));
            }
            calls.insert(i, c);
            i += 1;
        }
    }
}

/// "Let me ask for clarification." with `ask_clarification`: a word of the tool's own
/// name says which tool, not what it is given (unless quoted as the value: "the
/// test_tool with the value "test"").
fn drop_own_name_words(text: &str, tools: &[ToolSpec], calls: &mut [ParsedCall]) {
    for c in calls.iter_mut() {
        let Some(tool) = tools.iter().find(|t| t.name == c.name) else {
            continue;
        };
        let Some(args) = c.arguments.as_object_mut() else {
            continue;
        };
        let name_words = crate::schema::name_words(&tool.name);
        args.retain(|_, v| {
            let Some(s) = v.as_str() else { return true };
            let s = s.trim();
            let quoted = ['"', '\'', '`', '\u{201C}']
                .iter()
                .any(|q| text.contains(&format!("{q}{s}")));
            quoted || !name_words.contains(&s.to_lowercase())
        });
    }
}

/// The schema's type for `key` can hold `v`.
fn fits(tool: &ToolSpec, key: &str, v: &Value) -> bool {
    match tool.prop_type(key) {
        Some("boolean") => v.is_boolean(),
        Some("integer" | "number") => v.is_number(),
        Some("array") => v.is_array(),
        Some("object") => v.is_object(),
        // "if there's any overlap or duplicates" is no statement for a SQL tool.
        _ if holds_sql(tool, key) => v.as_str().is_none_or(sql_shaped),
        // An id is one token: "Implement User Notifications" is the thing's name.
        _ if key.eq_ignore_ascii_case("id") || key.to_ascii_lowercase().ends_with("_id") => v
            .as_str()
            .is_none_or(|s| !s.trim().contains(char::is_whitespace)),
        _ => true,
    }
}

/// A reasoning text restates its plan: "I need to get the weather for Florence, Italy.
/// I'll call the weather function with "Florence" as the location." The explicit,
/// named statement is the call; a weaker reading of the same tool is dropped.
fn keep_strongest_per_tool(calls: &mut Vec<ParsedCall>) {
    let best: Vec<(String, f32)> = calls
        .iter()
        .map(|c| (c.name.clone(), c.confidence))
        .collect();
    calls.retain(|c| {
        !best
            .iter()
            .any(|(n, conf)| *n == c.name && *conf > c.confidence + 0.05)
    });
}

/// Arguments stated elsewhere in the text ("the location parameter, which in this case
/// is Tokyo"): looked for in the call's own sentence, and in the whole text when the
/// call is the only one (with several, a value could belong to another call).
fn fill_bindings(text: &str, tools: &[ToolSpec], calls: &mut [ParsedCall]) {
    // (The same call found twice, by its name and by its verb, is still one call.)
    let single = calls
        .iter()
        .all(|c| c.name == calls[0].name && c.arguments == calls[0].arguments);
    for c in calls.iter_mut() {
        let Some(tool) = tools.iter().find(|t| t.name == c.name) else {
            continue;
        };
        let Some(args) = c.arguments.as_object_mut() else {
            continue;
        };
        let Range {
            start: sent_start,
            end: sent_end,
        } = sentence_around(text, &c.span);
        let region = if single {
            text
        } else {
            &text[sent_start..listed_after(text, sent_end)]
        };
        // A value stated with its property's name beats one read by position, but not
        // one the call wrote out as an object (`get_x {"k": …}`).
        let written = text.get(c.span.clone()).is_some_and(|s| s.contains('{'));
        for (k, v) in crate::bind::bindings(region, tool) {
            if !(written && args.get(&k).is_some_and(|old| fits(tool, &k, old))) {
                args.insert(k, v);
            }
        }
        contact_after_to(&text[sent_start..sent_end], tool, args);
        // "I'm checking the weather for you! Let me find out what it's like in Sydney.":
        // the next sentence, committing to the same step, names the place.
        if let Some(primary) = tool
            .required()
            .first()
            .filter(|p| !args.contains_key(**p) && kind_of(tool, p) == Kind::Text)
        {
            let next = &text[sent_end..floor(text, (sent_end + 160).min(text.len()))];
            let next = next.trim_start_matches(['.', '!', ' ']);
            let next = &next[..next.find(['.', '!', '?', '\n']).unwrap_or(next.len())];
            let lower = next.to_lowercase();
            // (One place only: "for Seattle and then … for San Francisco" is a call each.)
            if ["let me ", "i'll ", "i will "]
                .iter()
                .any(|l| lower.starts_with(l))
                && PROPER_AFTER_PREP.find_iter(next).count() == 1
            {
                if let Some(v) = last_proper_noun(next) {
                    args.insert(primary.to_string(), Value::String(v));
                }
            }
        }
        let back = text[floor(text, sent_start.saturating_sub(WINDOW))..sent_start].trim_end();
        let sentence = &text[sent_start..sent_end];
        operation_stated(sentence, tool, args);
        let resolved = result_referred(sentence, last_sentence(back));
        let filled = resolved
            .as_deref()
            .is_some_and(|r| numbers_in_order(r, tool, args) && !args.is_empty());
        if !filled && !numbers_in_order(sentence, tool, args) {
            // "The user wants me to add and multiply 2 and 3. I should call both
            // functions.": the sentence before the call states them.
            numbers_in_order(last_sentence(back), tool, args);
        }
        c.arguments = crate::schema::coerce_args(std::mem::take(&mut c.arguments), tool);
    }
}

/// "I'll send an SMS to 808-999-2345", "… an email to ana@example.com": a phone number or
/// an address after "to", right after what is sent, is the recipient, for the one property that holds it (`to`,
/// `recipient`, `phoneNumber`, `email`).
fn contact_after_to(sentence: &str, tool: &ToolSpec, args: &mut Map<String, Value>) {
    static CONTACT: LazyLock<Regex> = LazyLock::new(|| {
        ferroclaw_types::literal_regex(
            r"(?i)\b(?:send|sending|text|texting|message|messaging|e-?mail|emailing|sms|mail|forward|reply|replying|notify|ping|write|writing)\b(?:\s+(?:a|an|the|this|that|it|them|my|your|new|short|quick|brief|text|sms|email|e-mail|message|note|reply|mail|reminder|notification|update|summary)){0,3}\s+to\s+(\+?\d[\d\- ().]{5,18}\d|[\w.+-]+@[\w-]+(?:\.[\w-]+)+)\b",
        )
    });
    let Some(m) = CONTACT.captures(sentence).and_then(|c| c.get(1)) else {
        return;
    };
    let value = m.as_str().trim();
    let email = value.contains('@');
    if !email && value.chars().filter(char::is_ascii_digit).count() < 7 {
        return;
    }
    let holds = |p: &str| {
        let p = p.to_ascii_lowercase().replace(['_', '-'], "");
        p == "to"
            || p == "recipient"
            || (email && matches!(p.as_str(), "email" | "emailaddress" | "recipientemail"))
            || (!email
                && matches!(
                    p.as_str(),
                    "phone" | "phonenumber" | "number" | "recipientphone"
                ))
    };
    let props: Vec<&str> = tool
        .properties()
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| holds(p))
        .collect();
    if let [p] = props.as_slice() {
        args.entry(p.to_string())
            .or_insert_with(|| Value::String(value.to_string()));
    }
}

/// Where a list of the call's arguments that follows its sentence ends ("… use the
/// get_coordinates function. I need:\n- address: "Beijing"\n- region: …"): after a
/// short line ending with a colon, the dashed lines up to a blank line.
fn listed_after(text: &str, sent_end: usize) -> usize {
    let rest = &text[sent_end..];
    let Some(nl) = rest.find('\n') else {
        return sent_end;
    };
    let intro = rest[..nl].trim();
    if intro.len() > 40 || !(intro.is_empty() || intro.ends_with(':')) {
        return sent_end;
    }
    let start = sent_end + nl + 1;
    let listed: usize = text[start..]
        .split_inclusive('\n')
        .take_while(|l| {
            let t = l.trim_start();
            t.starts_with("- ") || t.starts_with("* ")
        })
        .map(str::len)
        .sum();
    if listed == 0 {
        sent_end
    } else {
        start + listed
    }
}

/// The last sentence of `text`: what follows its last `. `, `! `, `? ` or newline (a
/// decimal point ends nothing).
pub(crate) fn last_sentence(text: &str) -> &str {
    let cut = text
        .char_indices()
        .rev()
        .find(|&(i, c)| {
            c == '\n'
                || (matches!(c, '.' | '!' | '?') && text[i + 1..].starts_with(char::is_whitespace))
        })
        .map_or(0, |(i, _)| i + 1);
    &text[cut..]
}

/// "I'll add and multiply the numbers 2 and 3", "the coordinates (52.5200, 13.4050)": a
/// tool whose missing required properties are all numbers takes the sentence's numbers
/// in order, when the sentence holds exactly as many as are missing. False when the
/// sentence holds no number.
static DATE: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?i)\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{1,2}(?:st|nd|rd|th)?(?:,?\s+\d{4})?\b|\b\d{4}-\d{2}-\d{2}\b",
    )
});

/// A calculator told its operation (`{"operation": "add" | "subtract" | …, "number1",
/// "number2"}`): "2 + 2", "add 2 and 3", "7 times 6", "divide 10 by 4", "subtract 3 from
/// 10" give the operation its enum's word and the numbers in the order they are worked.
fn operation_stated(sentence: &str, tool: &ToolSpec, args: &mut Map<String, Value>) {
    static SYMBOL: LazyLock<Regex> = LazyLock::new(|| {
        ferroclaw_types::literal_regex(
            r"(-?\d+(?:\.\d+)?)\s*([-+*/×÷])\s*(-?\d+(?:\.\d+)?)([-/]\d)?",
        )
    });
    static WORDS: LazyLock<Regex> = LazyLock::new(|| {
        ferroclaw_types::literal_regex(
            r"(?i)\b(?:(add|adding|sum)\s+(-?\d+(?:\.\d+)?)\s+(?:and|to|with)\s+(-?\d+(?:\.\d+)?)|(multiply|multiplying)\s+(-?\d+(?:\.\d+)?)\s+(?:by|and|with|times)\s+(-?\d+(?:\.\d+)?)|(divide|dividing)\s+(-?\d+(?:\.\d+)?)\s+by\s+(-?\d+(?:\.\d+)?)|(subtract|subtracting)\s+(-?\d+(?:\.\d+)?)\s+from\s+(-?\d+(?:\.\d+)?)|(-?\d+(?:\.\d+)?)\s+(plus|minus|times|divided\s+by)\s+(-?\d+(?:\.\d+)?))",
        )
    });
    let Some((op_key, ops)) = tool.properties().into_iter().find_map(|(k, p)| {
        let ops: Vec<&str> = p
            .get("enum")?
            .as_array()?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let arithmetic = ops.iter().filter(|o| operation_of(o).is_some()).count() >= 2;
        arithmetic.then_some((k, ops))
    }) else {
        return;
    };
    let numbers: Vec<&str> = tool
        .required()
        .into_iter()
        .filter(|k| numeric_prop(tool, k))
        .collect();
    if numbers.len() != 2 || args.contains_key(op_key) {
        return;
    }
    // (operation, first, second)
    let stated = if let Some(c) = WORDS.captures(sentence) {
        let g = |i: usize| c.get(i).map(|m| m.as_str());
        if let (Some(_), Some(a), Some(b)) = (g(1), g(2), g(3)) {
            Some(('+', a, b))
        } else if let (Some(_), Some(a), Some(b)) = (g(4), g(5), g(6)) {
            Some(('*', a, b))
        } else if let (Some(_), Some(a), Some(b)) = (g(7), g(8), g(9)) {
            Some(('/', a, b))
        } else if let (Some(_), Some(a), Some(b)) = (g(10), g(11), g(12)) {
            Some(('-', b, a))
        } else if let (Some(a), Some(w), Some(b)) = (g(13), g(14), g(15)) {
            let op = match w.to_ascii_lowercase().as_str() {
                "plus" => '+',
                "minus" => '-',
                "times" => '*',
                _ => '/',
            };
            Some((op, a, b))
        } else {
            None
        }
    } else {
        // (Not a date, "2024-01-05", "1/2/2024", a time, "10:30-11:45", nor a number
        // with thousands, "1,250 + 300".)
        SYMBOL
            .captures(sentence)
            .filter(|c| {
                let (start, end) = c.get(0).map_or((0, 0), |m| (m.start(), m.end()));
                c.get(4).is_none()
                    && !sentence[..start]
                        .strip_suffix([':', ',', '.'])
                        .is_some_and(|r| r.ends_with(|c: char| c.is_ascii_digit()))
                    && !sentence[end..]
                        .strip_prefix(':')
                        .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
            })
            .and_then(|c| {
                let op = match c.get(2)?.as_str() {
                    "+" => '+',
                    "-" => '-',
                    "/" | "÷" => '/',
                    _ => '*',
                };
                Some((op, c.get(1)?.as_str(), c.get(3)?.as_str()))
            })
    };
    let Some((op, a, b)) = stated else {
        return;
    };
    let Some(word) = ops.iter().find(|o| operation_of(o) == Some(op)) else {
        return;
    };
    let (Ok(a), Ok(b)) = (
        serde_json::from_str::<Value>(a),
        serde_json::from_str::<Value>(b),
    ) else {
        return;
    };
    args.insert(op_key.to_string(), Value::String(word.to_string()));
    args.entry(numbers[0].to_string()).or_insert(a);
    args.entry(numbers[1].to_string()).or_insert(b);
}

/// The arithmetic an enum word of a calculator names.
fn operation_of(word: &str) -> Option<char> {
    match word.to_ascii_lowercase().as_str() {
        "add" | "addition" | "plus" | "sum" | "+" => Some('+'),
        "subtract" | "sub" | "subtraction" | "minus" | "difference" | "-" => Some('-'),
        "multiply" | "mul" | "mult" | "multiplication" | "times" | "product" | "*" | "×" => {
            Some('*')
        }
        "divide" | "div" | "division" | "quotient" | "/" | "÷" => Some('/'),
        _ => None,
    }
}

/// "You have multiplied 5 by 3 to get 15. Now, let's multiply that result by 2": the
/// sentence with "that result" replaced by the number the sentence before arrived at.
fn result_referred(sentence: &str, before: &str) -> Option<String> {
    // ("that result", "our result", "the sum"; not "the sum of 20 and 15", "the total
    // number of eggs".)
    static REFERS: LazyLock<Regex> = LazyLock::new(|| {
        ferroclaw_types::literal_regex(
            r"(?i)\b(?:that|this|our|the)\s+(?:previous\s+|last\s+)?(?:result|sum|product|total|quotient|difference)\b(\s+[a-z]+)?",
        )
    });
    // (What a step arrived at: "to get 15", "gives us 14", "= 1,250", "is 10", "returned
    // -4"; not "which is 2 more than 18".)
    static ARRIVED: LazyLock<Regex> = LazyLock::new(|| {
        ferroclaw_types::literal_regex(
            r"(?i)(?:\b(?:to\s+get|got|gets|(?:gives?|gave|giving)(?:\s+(?:us|me))?|equals?|makes?|returned|returns|yields?|yielded|is|was)\s+|=\s*)(-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?)\b(\s+[a-z]+)?",
        )
    });
    // ("Next, dividing by 5 should give us:": what is divided is that result too.)
    static BY_ONLY: LazyLock<Regex> = LazyLock::new(|| {
        ferroclaw_types::literal_regex(
            r"(?i)\b(?:multiply|multiplying|divide|dividing)\s+()by\s+-?\d",
        )
    });
    let at = match REFERS.captures(sentence) {
        Some(c) => {
            let next = c.get(1).map_or("", |w| w.as_str().trim());
            let named = [
                "of", "number", "amount", "count", "cost", "price", "between",
            ]
            .iter()
            .any(|w| next.eq_ignore_ascii_case(w));
            if named {
                return None;
            }
            c.get(0)?.start()..c.get(1).map_or(c.get(0)?.end(), |w| w.start())
        }
        None => BY_ONLY.captures(sentence)?.get(1)?.range(),
    };
    let value = ARRIVED
        .captures_iter(before)
        .filter(|c| {
            let next = c
                .get(2)
                .map_or("", |w| w.as_str().trim())
                .to_ascii_lowercase();
            !matches!(
                next.as_str(),
                "more" | "less" | "fewer" | "than" | "times" | "percent" | "higher" | "lower"
            )
        })
        .last()?
        .get(1)?
        .as_str()
        .replace(',', "");
    Some(format!(
        "{} {value} {}",
        &sentence[..at.start],
        &sentence[at.end..]
    ))
}

fn numbers_in_order(sentence: &str, tool: &ToolSpec, args: &mut Map<String, Value>) -> bool {
    let missing: Vec<&str> = tool
        .required()
        .into_iter()
        .filter(|k| !args.contains_key(*k))
        .collect();
    if missing.is_empty() || !missing.iter().all(|k| numeric_prop(tool, k)) {
        return true;
    }
    // A date's numbers ("August 7, 2025") are no arguments of their own.
    let undated = DATE.replace_all(sentence, " ");
    let nums: Vec<&str> = undated
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | '+' | '*' | '(' | ')'))
        .map(|w| w.trim_end_matches(['.', '!', '?', ':', ';']))
        .filter(|w| w.starts_with(|c: char| c.is_ascii_digit() || c == '-'))
        .filter(|w| w.parse::<f64>().is_ok_and(f64::is_finite))
        .take(missing.len() + 1)
        .collect();
    let any = !nums.is_empty();
    if nums.len() == missing.len() {
        for (k, raw) in missing.into_iter().zip(nums) {
            // A coordinate typed as a string keeps the digits the text wrote.
            let v = match tool.prop_type(k) {
                Some("integer" | "number") => serde_json::from_str::<Value>(raw)
                    .ok()
                    .filter(Value::is_number)
                    .unwrap_or_else(|| Value::String(raw.to_string())),
                _ => Value::String(raw.to_string()),
            };
            args.insert(k.to_string(), v);
        }
    }
    any
}

static CALL_OPEN: LazyLock<Regex> =
    LazyLock::new(|| ferroclaw_types::literal_regex(r"([A-Za-z_][A-Za-z0-9_.]{1,80})\("));

/// How far back of an inline call its committing sentence (or the line introducing a
/// list of calls) is looked for.
const INLINE_LOOKBACK: usize = 400;
/// The longest call read inline in prose; longer ones come in a marked format.
const INLINE_CALL_MAX: usize = 2 * 1024;

/// "Let's call get_weather(location="Paris")": a call written inline in a committing
/// sentence.
fn inline_calls(text: &str, tools: &[ToolSpec], cfg: &ParserConfig, out: &mut StrategyOutput) {
    for caps in CALL_OPEN.captures_iter(text) {
        let Some(name) = caps.get(1) else { continue };
        // The tool's own name: `open(…)` in an answer about Python is not the read tool.
        if !tools
            .iter()
            .any(|t| t.name.eq_ignore_ascii_case(name.as_str()))
        {
            continue;
        }
        if out.calls.len() >= crate::MAX_CALLS {
            break;
        }
        // The call first (it fails fast on prose), then its sentence. Windows keep a
        // text made of many `name(` linear: an inline call and the sentence committing
        // to it are both short.
        let window = crate::harmony::floor(text, name.start() + INLINE_CALL_MAX);
        let Some((calls, used)) = crate::native_text::pythonic_calls(&text[name.start()..window])
        else {
            continue;
        };
        let look = crate::harmony::floor(text, name.start().saturating_sub(INLINE_LOOKBACK));
        let sentence_start = text[look..name.start()]
            .rfind(['.', '!', '?', '\n'])
            .map_or(look, |i| look + i + 1);
        let mut before = text[sentence_start..name.start()]
            .to_lowercase()
            .replace('\u{2019}', "'");
        // A list item ("- add(2, 3)") takes its commitment from the line that
        // introduces the list ("So I need to call both functions:").
        let item = before.trim_start().trim_start_matches(['-', '*', ' ']);
        if item.is_empty()
            || item
                .chars()
                .all(|c| c.is_ascii_digit() || c == '.' || c == ' ')
        {
            let intro = text[look..sentence_start]
                .lines()
                .rev()
                .map(str::trim)
                .find(|l| {
                    !l.is_empty()
                        && !l.starts_with(['-', '*'])
                        && !l.starts_with(|c: char| c.is_ascii_digit())
                });
            if let Some(intro) = intro.filter(|l| l.ends_with(':')) {
                before = intro.to_lowercase().replace('\u{2019}', "'");
            }
        }
        let ws = words(&before);
        let refused = refusing(ws.iter().map(String::as_str));
        // "I can assist with … using get_weather(), …": what the assistant is able to do.
        let able = CAPABILITY_LEADS
            .iter()
            .any(|p| before.trim_start().starts_with(p));
        let committed = POS.iter().any(|cue| has_phrase(&before, cue));
        if refused
            || able
            || !committed
            || addresses_reader(&before)
            || crate::native_text::shown_as_example(text, line_start(text, name.start()))
            || ["never ", "don't ", "do not ", "avoid "]
                .iter()
                .any(|w| before.contains(w))
        {
            continue;
        }
        let span = name.start()..name.start() + used;
        // A call shown to the reader: the answer goes on to sign off ("Let me know if you
        // need help interpreting the results!").
        let rest = text[span.end..].to_lowercase();
        if ["let me know", "feel free to ask", "hope this helps"]
            .iter()
            .any(|p| rest.contains(p))
        {
            continue;
        }
        for (n, a) in calls.into_iter().take(1) {
            let a = crate::native_text::positional_args(a, &n, tools, cfg);
            if let Some(c) = make_call(&n, a, 0.7, span.clone(), tools, cfg) {
                out.calls.push(c);
            }
        }
    }
}

static READY: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?i)\b(?:i|we)\s+(?:now\s+)?have\s+(?:all\s+)?(?:the\s+)?(?:necessary|required|needed)\s+(?:information|info|parameters?|arguments?)\s+to\s+(?:make\s+the\s+(?:api|function|tool)\s+call|invoke|call|use)\b|\b(?:all\s+)?the\s+required\s+parameters?\s+(?:are|is)\s+(?:available|provided|present)\b",
    )
});

/// Claude 3's thinking: "So I have the necessary information to invoke the calculator
/// tool." / "all the required parameters are available to make the API call": the tool it
/// names there, or the one it named last before, or the only one; the values it stated.
fn ready_to_call(text: &str, cfg: &ParserConfig, tools: &[ToolSpec], out: &mut StrategyOutput) {
    // Most answers hold none of these words: skip the case-insensitive scan.
    if !["equired", "ecessary", "eeded"]
        .iter()
        .any(|w| text.contains(w))
    {
        return;
    }
    let Some(m) = READY.find(text) else { return };
    if !committed_sentence(text, m.start()) {
        return;
    }
    let after_end = floor(text, (m.end() + 60).min(text.len()));
    let after = words(&text[m.end()..after_end]);
    let named_after = tools.iter().find(|t| {
        after
            .iter()
            .take(4)
            .any(|w| w.eq_ignore_ascii_case(&t.name))
    });
    let back = text[floor(text, m.start().saturating_sub(600))..m.start()].to_ascii_lowercase();
    let named_before = tools
        .iter()
        .filter_map(|t| back.rfind(&t.name.to_ascii_lowercase()).map(|i| (i, t)))
        .max_by_key(|(i, _)| *i)
        .map(|(_, t)| t);
    let tool = named_after.or(named_before).or(match tools {
        [only] => Some(only),
        _ => None,
    });
    let Some(tool) = tool else { return };
    let args = crate::bind::bindings(&text[..m.start()], tool);
    if let Some(c) = make_call(&tool.name, Value::Object(args), 0.6, m.range(), tools, cfg) {
        out.calls.push(c);
    }
}

static USE_AS: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r#"\b(?i:i'll|i will|let me|let's|we'll|we will|i need to|we need to)\s+(?i:use|set|pass|put|format)\s+(?:"[^"\n]{1,200}"|'[^'\n]{1,200}'|[A-Z][\w-]*(?:,? [A-Z][\w-]*){0,3})\s+(?i:as|for)\s+(?i:the)\s+([A-Za-z_]\w{0,40})\b"#,
    )
});

/// "I'll use "Meeting with John" as the title.": a value committed to a property that
/// only one offered tool has.
fn value_for_property(
    text: &str,
    cfg: &ParserConfig,
    tools: &[ToolSpec],
    out: &mut StrategyOutput,
) {
    if !(text.contains(" as ") || text.contains(" for ")) {
        return;
    }
    let Some(c) = USE_AS.captures(text) else {
        return;
    };
    let (Some(m), Some(key)) = (c.get(0), c.get(1)) else {
        return;
    };
    let key = key.as_str().to_ascii_lowercase();
    let holders: Vec<&ToolSpec> = tools
        .iter()
        .filter(|t| {
            t.properties()
                .iter()
                .any(|(p, _)| p.to_ascii_lowercase() == key)
        })
        .collect();
    let [tool] = holders.as_slice() else { return };
    let args = crate::bind::bindings(&text[m.range()], tool);
    if args.is_empty() || !committed_sentence(text, m.start()) {
        return;
    }
    if let Some(c) = make_call(&tool.name, Value::Object(args), 0.6, m.range(), tools, cfg) {
        out.calls.push(c);
    }
}

static STATED_ARGS: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?i)\b(?:arguments?|parameters?|params|args|input|json)\b[^.{}\n]{0,40}?\b(?:should|will|would|must)\s+be\s*:?\s*`*\s*\{",
    )
});

/// "So the arguments should be {"task": "Review PR"}": the call's arguments written
/// out as an object; the tool is the one whose properties hold every key (the one
/// named last before, if several do).
fn stated_arguments(text: &str, cfg: &ParserConfig, tools: &[ToolSpec], out: &mut StrategyOutput) {
    let Some(m) = STATED_ARGS.find(text) else {
        return;
    };
    if !committed_sentence(text, m.start()) {
        return;
    }
    let Some((r, v)) = jsonscan::value_at(text, m.end() - 1) else {
        return;
    };
    let Some(obj) = v.as_object().filter(|o| !o.is_empty()) else {
        return;
    };
    let back = text[floor(text, m.start().saturating_sub(INLINE_LOOKBACK))..m.start()]
        .to_ascii_lowercase();
    let tool = tools
        .iter()
        .filter(|t| t.holds_keys(obj))
        .max_by_key(|t| back.rfind(&t.name.to_ascii_lowercase()).map(|i| i + 1));
    let Some(tool) = tool else { return };
    if let Some(c) = make_call(&tool.name, v, 0.65, m.start()..r.end, tools, cfg) {
        out.calls.push(c);
    }
}

/// `… Let's list files.{"cmd": ["ls", "-R"]}`: Harmony's tokens stripped, the call's
/// arguments are left glued to the end of the thinking that committed to it. The object
/// must end the text and its keys must be the properties of one tool, required ones
/// included.
fn trailing_arguments(
    text: &str,
    cfg: &ParserConfig,
    tools: &[ToolSpec],
    out: &mut StrategyOutput,
) {
    let t = text.trim_end();
    if !t.ends_with('}') {
        return;
    }
    let from = floor(t, t.len().saturating_sub(INLINE_CALL_MAX));
    let Some((r, v)) = t[from..]
        .match_indices('{')
        .map(|(i, _)| from + i)
        .find_map(|i| jsonscan::value_at(t, i).filter(|(r, _)| r.end == t.len()))
    else {
        return;
    };
    let Some(obj) = v.as_object().filter(|o| !o.is_empty()) else {
        return;
    };
    let fitting: Vec<&ToolSpec> = tools.iter().filter(|tool| tool.fills(obj)).collect();
    let [tool] = fitting.as_slice() else { return };
    let before = last_sentence(t[..r.start].trim_end());
    let lower = before.to_lowercase().replace('\u{2019}', "'");
    if !COMMIT_CUES.iter().any(|c| has_phrase(&lower, c)) || !committed_sentence(t, r.start) {
        return;
    }
    if let Some(c) = make_call(&tool.name, v, 0.6, r.clone(), tools, cfg) {
        out.calls.push(c);
        // The object is for the tool, not the reader.
        out.markup.push(r);
    }
}

/// The last "in/for/about Capitalised Name" in `back`.
fn last_proper_noun(back: &str) -> Option<String> {
    PROPER_AFTER_PREP
        .captures_iter(back)
        .last()
        .and_then(|c| c.get(1))
        .map(|m| m.as_str().trim_end_matches(['.', ',', '?']))
        .filter(|v| {
            !generic_phrase(&v.to_ascii_lowercase()) && !["I", "We", "The", "This"].contains(v)
        })
        .map(str::to_string)
}

static BOTH_UNNAMED: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?i)\b(?:call|use|using|invoke)\s+(?:both\s+(?:of\s+)?(?:the\s+)?(?:available\s+)?|(?:the\s+)?(?:available\s+|two\s+)(?:separate\s+)?)(?:functions|tools)\b",
    )
});

static BOTH_FUNCTIONS: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?i)\b(?:call|use|invoke)\s+(?:both\s+)?(?:the\s+)?`?([A-Za-z_][\w.-]{0,80})`?\s+and\s+(?:the\s+)?`?([A-Za-z_][\w.-]{0,80})`?\s+(?:functions|tools)\b",
    )
});

/// "I need to use both the add and multiply functions … with a=2 and b=3", and "Let me
/// call both functions with "Paris" as the location" ("use the available tools", "use
/// two separate functions") when two tools are offered.
fn both_functions(
    text: &str,
    cfg: &ParserConfig,
    tools: &[ToolSpec],
    out: &mut StrategyOutput,
) -> bool {
    let pair = if let (Some(m), [ta, tb]) = (BOTH_UNNAMED.find(text), tools) {
        (m, ta, tb)
    } else {
        let Some(c) = BOTH_FUNCTIONS.captures(text) else {
            return false;
        };
        let (Some(m), Some(a), Some(b)) = (c.get(0), c.get(1), c.get(2)) else {
            return false;
        };
        let resolve = |n: &str| crate::schema::resolve(n, tools, &cfg.aliases);
        let (Some(ta), Some(tb)) = (resolve(a.as_str()), resolve(b.as_str())) else {
            return false;
        };
        (m, ta, tb)
    };
    let (m, ta, tb) = pair;
    if ta.name == tb.name || !committed_sentence(text, m.start()) {
        return false;
    }
    for t in [ta, tb] {
        let args = crate::bind::bindings(text, t);
        if let Some(call) = make_call(&t.name, Value::Object(args), 0.6, m.range(), tools, cfg) {
            out.calls.retain(|c| c.name != call.name);
            out.calls.push(call);
        }
    }
    true
}

/// The sentence up to `at` neither declines, supposes nor reports the past, and is not
/// a numbered step of a plan written for the reader.
fn committed_sentence(text: &str, at: usize) -> bool {
    let line = text[line_start(text, at)..at].trim_start_matches(['*', '#', '-', ' ', '\t']);
    if line.to_ascii_lowercase().starts_with("step")
        || line.starts_with(|c: char| c.is_ascii_digit())
    {
        return false;
    }
    let sentence_start = text[..at].rfind(['.', '!', '?', '\n']).map_or(0, |i| i + 1);
    let before = text[sentence_start..at].to_lowercase();
    // Only its lead: what follows may be JSON with a `?` in a value.
    !refusing(words(&before).iter().map(String::as_str))
        && !sentence_rejected(text, &(sentence_start..at))
}

static CALL_IT: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?i)(?:\b(?:we'll|we will|i'll|i will|let's|let me|we should|i should|we need to|i need to|so we|so i)\s+(?:\w+\s+)?|(?:^|[.!?]\s+)(?:so\s+|then\s+|now\s+)?(?:just\s+|simply\s+)?)(?:(?:call|use|invoke)\s+it\b|(?:proceed\s+with|make)\s+the\s+(?:tool|function)\s+call\b)",
    )
});

/// "We have a tool "functions.weather" … We should call it.": the tool named last before
/// the commitment ("Let me proceed with the tool call.": the one tool offered, if no
/// other is named).
fn call_it(text: &str, cfg: &ParserConfig, tools: &[ToolSpec], out: &mut StrategyOutput) {
    let Some(m) = CALL_IT.find(text) else { return };
    let at = m.start() + text[m.range()].find(char::is_alphabetic).unwrap_or(0);
    if !committed_sentence(text, at) {
        return;
    }
    let back = &text[floor(text, m.start().saturating_sub(400))..m.start()];
    let lower = back.to_ascii_lowercase();
    let named = tools
        .iter()
        .filter_map(|t| {
            let n = t.name.to_ascii_lowercase();
            lower
                .match_indices(&n)
                .filter(|(i, _)| {
                    let before = lower[..*i].chars().next_back();
                    let after = lower[i + n.len()..].chars().next();
                    before.is_none_or(|c| !c.is_alphanumeric() && c != '_')
                        && after.is_none_or(|c| !c.is_alphanumeric() && c != '_')
                })
                .map(|(i, _)| i)
                .last()
                .map(|i| (i, t))
        })
        .max_by_key(|(i, _)| *i)
        .map(|(_, t)| t)
        .or(match tools {
            [only] => Some(only),
            _ => None,
        });
    let Some(tool) = named else { return };
    let mut args = crate::bind::bindings(text, tool);
    if args.is_empty() {
        if let (Some(primary), Some(v)) = (tool.primary_property(), last_proper_noun(back)) {
            args.insert(primary.to_string(), Value::String(v));
        }
    }
    if let Some(c) = make_call(&tool.name, Value::Object(args), 0.6, m.range(), tools, cfg) {
        out.calls.push(c);
    }
}

/// "Let me do that right away." / "Let me fetch that information for you." as the
/// text's last words: a commitment whose object is what the text said before.
static DO_THAT: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?i)\b(?:let\s+me|i'll|i\s+will|i'm\s+going\s+to)\s+(?:now\s+|quickly\s+|just\s+|go\s+ahead\s+and\s+)?(?:(do)\s+(?:that|this|so)|(search|look|check|fetch|get|find|retrieve|pull|gather|grab)\s+(?:up\s+|for\s+|into\s+|on\s+)?(?:that|this|some\s+options|some\s+information)(?:\s+(?:information|info|data|details|up))?|(look)\s+(?:that|this|it)\s+up)(?:\s+(?:for\s+you|right\s+away|now|right\s+now|first|quickly))*\s*[.!:\u{2026}]*\s*$",
    )
});

/// The tool a closing "let me do that" is about: the one whose name's nouns the text
/// before names (else the only tool offered), if the verb is one of its verbs.
fn do_that(text: &str, cfg: &ParserConfig, tools: &[ToolSpec], out: &mut StrategyOutput) {
    let Some(c) = DO_THAT.captures(text.trim_end()) else {
        return;
    };
    let (Some(m), Some(verb)) = (c.get(0), c.get(1).or_else(|| c.get(2)).or_else(|| c.get(3)))
    else {
        return;
    };
    let at = m.start();
    if !committed_sentence(text, at) {
        return;
    }
    let verb = verb.as_str().to_ascii_lowercase();
    let back = &text[floor(text, at.saturating_sub(400))..at];
    let said = words(back);
    let profs = profiles(tools, cfg);
    let fits = |p: &Profile| verb == "do" || p.verbs.iter().any(|v| v[0] == verb);
    let named: Vec<&Profile> = profs
        .iter()
        .filter(|p| fits(p) && said.iter().any(|w| noun_of(p, w)))
        .collect();
    let tool = match (named.as_slice(), profs.as_slice()) {
        ([one], _) => one.tool,
        ([], [only]) if fits(only) => only.tool,
        _ => return,
    };
    let args = crate::bind::bindings(back, tool);
    if let Some(c) = make_call(&tool.name, Value::Object(args), 0.6, m.range(), tools, cfg) {
        out.calls.push(c);
    }
}

/// The language a retry names: "use proper PowerShell syntax" → "PowerShell".
static SYNTAX_OF: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?i)\b(?:proper|correct|right|valid)\s+((?:[\w-]+\s+){0,2})syntax\b",
    )
});

/// "Let's try again", "Let me retry", "Let me try to summarize the content again", "Let
/// me use proper PowerShell syntax" (after a call that failed on its syntax).
static TRY_AGAIN: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?i)\b(?:let's|let\s+me|i'll|i\s+will|we'll|we\s+will)\s+(?:retry\b|(?:try|attempt)\b(?:\s+[\w'-]+){0,8}?\s+(?:again|once\s+more|one\s+more\s+time)\b|(?:use|try)\s+(?:the\s+)?(?:proper|correct|right|valid)\s+(?:[\w-]+\s+){0,2}syntax\b)",
    )
});

/// A retry after a failed call, with one tool offered: that tool again.
fn try_again(text: &str, cfg: &ParserConfig, tools: &[ToolSpec], out: &mut StrategyOutput) {
    let [tool] = tools else { return };
    let Some(m) = TRY_AGAIN.find(text) else {
        return;
    };
    // ("Let me use proper PowerShell syntax": the tool's own language; not Markdown for
    // a table, JSON for an example.)
    if let Some(lang) = SYNTAX_OF.captures(m.as_str()).and_then(|c| c.get(1)) {
        let lang = lang.as_str().trim().to_lowercase();
        let own = format!("{} {}", tool.name, tool.description).to_lowercase();
        if lang.is_empty() || !lang.split_whitespace().all(|w| own.contains(w)) {
            return;
        }
    }
    let at = m.start();
    // ("Let me try again using a different approach": not the same call.)
    let rest = &text[m.end()..floor(text, (m.end() + 40).min(text.len()))];
    // Only its own clause can refuse ("Since you asked for 1 to 10, let's try again").
    let clause_start = text[..at]
        .rfind(['.', '!', '?', '\n', ',', ';'])
        .map_or(0, |i| i + 1);
    let sentence_start = text[..at].rfind(['.', '!', '?', '\n']).map_or(0, |i| i + 1);
    let sentence_end = text[m.end()..]
        .find(['.', '!', '?', '\n'])
        .map_or(text.len(), |i| m.end() + i + 1);
    if refusing(
        words(&text[clause_start..at].to_lowercase())
            .iter()
            .map(String::as_str),
    ) || sentence_rejected(
        text,
        &(sentence_start..floor(text, sentence_end.min(text.len()))),
    ) || has_phrase(&rest.to_ascii_lowercase(), "different")
    {
        return;
    }
    // ("Let me try checking the weather in San Francisco again.")
    let mut args = crate::bind::bindings(m.as_str(), tool);
    if let Some(primary) = tool
        .primary_property()
        .filter(|p| kind_of(tool, p) == Kind::Text)
    {
        if let Some(place) = PROPER_AFTER_PREP
            .captures(m.as_str())
            .and_then(|c| c.get(1))
        {
            args.entry(primary.to_string())
                .or_insert_with(|| Value::String(place.as_str().to_string()));
        }
    }
    // "… while trying to add the word "haben" to your vocabulary. Let me try that
    // again.": the one value the failed attempt named, for a tool of one property.
    if let ([(prop, _)], true) = (tool.properties().as_slice(), args.is_empty()) {
        let back = &text[floor(text, at.saturating_sub(300))..at];
        let prot = protected_spans(back);
        if let Some(q) = prot.iter().rev().find(|q| q.kind == Quote::Double) {
            let v = back[q.inner.clone()].trim();
            if !v.is_empty() && v.len() <= 80 {
                args.insert((*prop).to_string(), Value::String(v.to_string()));
            }
        }
    }
    if let Some(c) = make_call(&tool.name, Value::Object(args), 0.6, m.range(), tools, cfg) {
        out.calls.push(c);
    }
}

/// What a status line's gerund works on when the work is the shell's.
const SHELL_OBJECTS: &[&str] = &[
    "git",
    "rebase",
    "commit",
    "branch",
    "stash",
    "merge",
    "dependencies",
    "packages",
    "tests",
    "test",
    "build",
    "server",
    "container",
    "migrations",
    "script",
];
/// Words a status line skips between its gerund and what it works on.
const OBJECT_LEADS: &[&str] = &[
    "the", "a", "an", "existing", "current", "new", "latest", "local", "remote", "all", "my",
    "our", "this", "that", "its",
];
/// Words that report an outcome: the line says what happened, not what is being done.
const OUTCOMES: &[&str] = &[
    "showed",
    "shows",
    "passed",
    "failed",
    "succeeded",
    "completed",
    "found",
    "returned",
    "worked",
    "done",
];

/// A coding agent's status line (Cursor: "Amending the commit to update the author:",
/// "Checking git history to locate the commit."): a gerund whose work is the shell's,
/// with one shell tool offered.
fn shell_status_line(text: &str, cfg: &ParserConfig, tools: &[ToolSpec], out: &mut StrategyOutput) {
    let line = text.trim().trim_matches('*').trim();
    if line.is_empty() || line.len() > 240 || line.contains('\n') {
        return;
    }
    let lower = line.to_lowercase();
    let ws = words(&lower);
    let Some(gerund) = ws.first().and_then(|w| w.strip_suffix("ing")) else {
        return;
    };
    // ("Running `rm -rf /` would be catastrophic, so we won't.")
    if !line.starts_with(char::is_uppercase)
        || ws.iter().any(|w| OUTCOMES.contains(&w.as_str()))
        || refusing(ws.iter().map(String::as_str))
    {
        return;
    }
    let shell_verb = verb_of_stem(gerund, &|v| SHELL_VERBS.contains(&v)).is_some();
    let object = ws[1..].iter().find(|w| !OBJECT_LEADS.contains(&w.as_str()));
    if !shell_verb && !object.is_some_and(|o| SHELL_OBJECTS.contains(&o.as_str())) {
        return;
    }
    let profs = profiles(tools, cfg);
    let Some(shell) = sole_shell(&profs) else {
        return;
    };
    let args = crate::bind::bindings(line, shell.tool);
    let at = text.len() - text.trim_start().len();
    let span = at..at + text.trim().len();
    if let Some(c) = make_call(&shell.tool.name, Value::Object(args), 0.6, span, tools, cfg) {
        out.calls.push(c);
    }
}

/// The one offered shell and the property its command goes in.
fn shell_and_command_key<'a>(
    tools: &'a [ToolSpec],
    cfg: &ParserConfig,
) -> Option<(&'a ToolSpec, &'a str)> {
    let profs = profiles(tools, cfg);
    let shell = sole_shell(&profs)?.tool;
    Some((shell, shell.primary_property()?))
}

/// The one offered tool that runs commands, if there is exactly one.
fn sole_shell<'p, 'a>(profs: &'p [Profile<'a>]) -> Option<&'p Profile<'a>> {
    let mut shells = profs.iter().filter(|p| p.kind == Kind::Command);
    match (shells.next(), shells.next()) {
        (Some(one), None) => Some(one),
        _ => None,
    }
}

/// Verbs that announce the model's own words (an explanation, a plan), not a tool's work.
const TELLING_VERBS: &[&str] = &[
    "break",
    "think",
    "explain",
    "summarize",
    "summarise",
    "recap",
    "outline",
    "walk",
    "consider",
    "clarify",
    "note",
    "reason",
    "describe",
    "answer",
    "respond",
    "reply",
    "provide",
    "give",
    "show",
    "share",
    "tell",
    "write",
    "draft",
    "compose",
    "present",
];
/// Words of git's that are other things elsewhere ("stage the argument", "pull together
/// a summary", "checkout the pricing page"): git's only with a word of git's around them
/// ("Stage them and push:", "pull the latest changes from origin").
fn git_verb(v: &str, ws: &[String]) -> bool {
    matches!(v, "stage" | "staging" | "pull" | "pulling" | "checkout")
        && ws.iter().any(|w| {
            matches!(
                w.as_str(),
                "git"
                    | "push"
                    | "commit"
                    | "branch"
                    | "origin"
                    | "upstream"
                    | "remote"
                    | "rebase"
                    | "main"
                    | "master"
                    | "staged"
                    | "unstaged"
                    | "deletions"
                    | "changes"
            )
        })
}

/// What a shell does, when no other offered tool does it.
const SHELL_VERBS: &[&str] = &[
    "run",
    "connect",
    "rerun",
    "execute",
    "copy",
    "move",
    "rename",
    "install",
    "reinstall",
    "build",
    "rebuild",
    "compile",
    "recompile",
    "typecheck",
    "lint",
    "restart",
    "start",
    "stop",
    "kill",
    "test",
    "clone",
    "commit",
    "push",
    "rebase",
    "delete",
    "remove",
    "launch",
    // (Programs said as verbs: "Let me curl more carefully:".)
    "curl",
    "wget",
    "ping",
    "ssh",
];

/// "I'll check what files exist in the current directory.\n\n  ls -la": a committed step,
/// then the answer's last paragraph a known program's command line alone (printed instead
/// of called), for the one offered shell.
fn command_after_step(
    text: &str,
    cfg: &ParserConfig,
    tools: &[ToolSpec],
    out: &mut StrategyOutput,
) {
    let trimmed = text.trim_end();
    let Some(cut) = trimmed.rfind("\n\n") else {
        return;
    };
    let last = &trimmed[cut + 2..];
    let line = last.trim_start_matches('\n');
    let indent = line.len() - line.trim_start().len();
    let line = line.trim_start();
    let command = line.strip_prefix("$ ").unwrap_or(line);
    let first = command.split_whitespace().next().unwrap_or("");
    // (Indented four or more, it is a document's code block.)
    if indent >= 4 || line.contains('\n') || !KNOWN_BINS.contains(&first) || line.contains('`') {
        return;
    }
    let before = text[..cut].trim_end();
    // The paragraph's last sentence.
    let step_at = before
        .trim_end_matches(['.', ':', '!'])
        .rfind(['.', '!', '?', '\n'])
        .map_or(0, |i| i + 1);
    let step_at = step_at + (before[step_at..].len() - before[step_at..].trim_start().len());
    let step = before[step_at..].to_lowercase().replace('\u{2019}', "'");
    let leads = [
        "i'll ",
        "i will ",
        "let me ",
        "let's ",
        "we'll ",
        "i'm going to ",
    ];
    // The step runs or looks at something, the command being how ("I'll check what files
    // exist…"), not "I'll stop here…", "I'll leave the deployment to CI…", "We'll use
    // Docker Compose…"; and no walk-through for the reader comes before it ("Here's how to
    // set up the project on your machine.", a heading).
    let Some(lead) = leads.iter().find(|l| step.starts_with(**l)) else {
        return;
    };
    let verb = step[lead.len()..]
        .split_whitespace()
        .find(|w| !matches!(*w, "now" | "first" | "quickly" | "just" | "also" | "then"))
        .unwrap_or("");
    let looks = matches!(
        verb,
        "run"
            | "check"
            | "list"
            | "see"
            | "look"
            | "inspect"
            | "verify"
            | "test"
            | "try"
            | "execute"
            | "confirm"
            | "view"
            | "show"
            | "print"
            | "examine"
            | "find"
    );
    let head = text[..step_at].to_lowercase();
    let walk_through = head.contains("here's how")
        || head.contains("here is how")
        || has_phrase(&head, "your")
        || head.lines().any(|l| l.trim_start().starts_with('#'));
    // (Not what the reader is shown: "I'll show you how to install it.")
    if !looks
        || walk_through
        || has_phrase(&step, "you")
        || workbench::not_now(&step)
        || in_code_fence(text, cut + 2)
        || !committed_sentence(text, step_at)
    {
        return;
    }
    let Some((shell, key)) = shell_and_command_key(tools, cfg) else {
        return;
    };
    let mut args = Map::new();
    args.insert(
        key.to_string(),
        Value::String(command.trim_end().to_string()),
    );
    let span = step_at..trimmed.len();
    if let Some(c) = make_call(&shell.name, Value::Object(args), 0.6, span, tools, cfg) {
        // (It is the step's whole command: "I'll run the echo now." read "echo" alone.)
        out.calls.retain(|o| o.span.end <= step_at);
        out.calls.push(c);
    }
}

/// "We'll execute:\n\nuv run python check.py": a commitment to run, its colon and the
/// command line alone on the next line (gpt-oss writes them so in its reasoning), for
/// the one offered shell. What the next paragraph binds (a working directory) goes with it.
fn announced_command_line(
    text: &str,
    cfg: &ParserConfig,
    tools: &[ToolSpec],
    out: &mut StrategyOutput,
) {
    static ANNOUNCED: LazyLock<Regex> = LazyLock::new(|| {
        ferroclaw_types::literal_regex(
            r"(?im)^([^\n]{0,160}?)\b(?:we'll|we will|i'll|i will|let me|let's|we need to|i need to)\s+(?:now\s+)?(?:run|execute)(?:\s+(?:the\s+following(?:\s+command)?|this(?:\s+command)?|the\s+command|it))?\s*:[ \t]*\n(?:[ \t]*\n)?[ \t]*(?:\$\s+)?([^\n`$][^\n`]*)$",
        )
    });
    let Some(c) = ANNOUNCED.captures(text) else {
        return;
    };
    let (Some(m), Some(cmd)) = (c.get(0), c.get(2)) else {
        return;
    };
    let line = cmd.as_str().trim_end();
    let first = line.split_whitespace().next().unwrap_or("");
    // One line of a known program's, the paragraph's only line, not indented as a
    // document's code block is.
    let next = &text[cmd.end()..];
    let alone = next.is_empty() || next.starts_with("\n\n") || next.trim().is_empty();
    let indented = text[line_start(text, cmd.start())..cmd.start()].len() >= 4
        || text[line_start(text, cmd.start())..cmd.start()].contains('\t');
    let lead_at = m.start() + c.get(1).map_or(0, |l| l.len());
    // What follows it: nothing, or words that do not take it back, go on with its
    // sentence or say it is done ("Actually, no need to run anything", "in production.",
    // "We already did that").
    let following = next.trim_start();
    let following_para = following.split("\n\n").next().unwrap_or("").to_lowercase();
    let taken_back = following.starts_with(char::is_lowercase)
        || [
            "but ",
            "actually",
            "instead",
            "no need",
            "shouldn't",
            "should not",
            "already",
            "don't",
            "do not",
            "won't",
            "is what",
            "not ",
        ]
        .iter()
        .any(|w| following_para.contains(w));
    // A time other than now, a job's or a script's steps, someone's words quoted.
    let lead = text[line_start(text, m.start())..cmd.start()].to_lowercase();
    let elsewhere = [
        "next week",
        "tomorrow",
        "later",
        "in the ci",
        "in ci",
        "in production",
        "in the script",
        "in the job",
        "yesterday",
        "\"",
    ]
    .iter()
    .any(|w| lead.contains(w));
    if !KNOWN_BINS.contains(&first)
        || !alone
        || indented
        || taken_back
        || elsewhere
        || in_code_fence(text, m.start())
        || !committed_sentence(text, lead_at)
    {
        return;
    }
    let Some((shell, key)) = shell_and_command_key(tools, cfg) else {
        return;
    };
    let para_end = next
        .trim_start_matches('\n')
        .find("\n\n")
        .map_or(text.len(), |i| {
            text.len() - next.trim_start_matches('\n').len() + i
        });
    let after = &text[cmd.end()..para_end];
    let mut args = crate::bind::bindings(after, shell);
    args.insert(key.to_string(), Value::String(line.to_string()));
    // "Run in workdir /srv/app.": where it runs, for the shell's directory property.
    static IN_DIR: LazyLock<Regex> = LazyLock::new(|| {
        ferroclaw_types::literal_regex(
            r"(?i)\b(?:in|from)\s+(?:the\s+)?(?:workdir|working\s+directory|directory|cwd)\s+`?([~./][^\s`]*[^\s`.,;])",
        )
    });
    let dir_prop = shell.properties().into_iter().map(|(p, _)| p).find(|p| {
        matches!(
            p.to_ascii_lowercase().as_str(),
            "workdir" | "cwd" | "working_dir" | "working_directory" | "directory" | "dir"
        )
    });
    if let (Some(prop), Some(dir)) = (dir_prop, IN_DIR.captures(after).and_then(|c| c.get(1))) {
        args.entry(prop.to_string())
            .or_insert_with(|| Value::String(dir.as_str().to_string()));
    }
    let span = lead_at..cmd.end();
    if let Some(call) = make_call(&shell.name, Value::Object(args), 0.7, span, tools, cfg) {
        out.calls.push(call);
    }
}

/// "Now let me copy the XML file:" as the text's last words: the model stopped to make
/// the call its colon announces — the only tool offered, or the shell for what a shell
/// does.
fn closing_colon(text: &str, cfg: &ParserConfig, tools: &[ToolSpec], out: &mut StrategyOutput) {
    let trimmed = text.trim_end();
    let Some(body) = trimmed.strip_suffix(':') else {
        return;
    };
    let last = last_sentence(body);
    let at = body.len() - last.len();
    let lower = last.trim_start().to_lowercase().replace('\u{2019}', "'");
    let ws: Vec<String> = words(&lower)
        .into_iter()
        .skip_while(|w| DISCOURSE.contains(&w.as_str()) || w == "great" || w == "good")
        .collect();
    let after_cue = match ws.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["let", "me", rest @ ..] | ["let's", rest @ ..] | ["i'll", rest @ ..] => rest.len(),
        ["i", "will", rest @ ..] | ["i", "need", "to", rest @ ..] => rest.len(),
        _ => return,
    };
    let verb = ws[ws.len() - after_cue..].iter().find(|w| {
        ![
            "now", "first", "also", "quickly", "just", "go", "ahead", "and",
        ]
        .contains(&w.as_str())
    });
    let Some(verb) = verb else { return };
    // (Inside the sentence: its first word, which may follow a wide quote mark.)
    let inside = at + last.find(char::is_alphanumeric).unwrap_or(0);
    if TELLING_VERBS.contains(&verb.as_str()) || !committed_sentence(text, inside) {
        return;
    }
    // "let me verify the implementation by running the tests:": how, after "by".
    let by_gerund = ws
        .windows(2)
        .find(|w| w[0] == "by")
        .and_then(|w| verb_of_stem(w[1].strip_suffix("ing")?, &|v| SHELL_VERBS.contains(&v)));
    let verb = by_gerund.as_ref().unwrap_or(verb);
    // "Let me try with python3:": a program tried is a command run.
    let tried_program = matches!(verb.as_str(), "try" | "retry")
        && ws.windows(2).any(|w| {
            matches!(w[0].as_str(), "with" | "using") && KNOWN_BINS.contains(&w[1].as_str())
        });
    let run = "run".to_string();
    let verb = if tried_program { &run } else { verb };
    let profs = profiles(tools, cfg);
    let tool = match profs.as_slice() {
        [only] => only.tool,
        _ if SHELL_VERBS.contains(&verb.as_str()) => {
            let has_verb = |p: &Profile| p.verbs.iter().any(|v| v.len() == 1 && v[0] == *verb);
            let others = profs.iter().any(|p| p.kind != Kind::Command && has_verb(p));
            match sole_shell(&profs) {
                Some(shell) if !others => shell.tool,
                _ => return,
            }
        }
        _ => return,
    };
    let args = crate::bind::bindings(last, tool);
    let span = at..trimmed.len();
    if let Some(c) = make_call(&tool.name, Value::Object(args), 0.6, span, tools, cfg) {
        out.calls.push(c);
    }
}

static THE_FUNCTION: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?im)(?:^|[.!?]\s+|,\s*so\s+|,\s*(?:i|we)\s+(?:need\s+to|should|must|will)\s+)(?:so\s*,?\s+|now\s*,?\s+|then\s*,?\s+)?(?:we\s+need\s+to\s+|we\s+should\s+|let's\s+|let\s+me\s+|i'll\s+|we'll\s+|i\s+need\s+to\s+|i\s+should\s+|we\s+must\s+)?(?:use|call|invoke)\s+(?:(?:the|this|that)\s+)?(?:function|tool)\b",
    )
});

static QUOTED_FUNCTION: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r#"(?i)\b(?:call|use|invoke)\s+(?:the\s+)?(?:['"`]([A-Za-z_][\w.-]{0,80})['"`]\s+(?:function|tool)\b|(?:function|tool)\s+['"`]([A-Za-z_][\w.-]{0,80})['"`])"#,
    )
});

/// "Use the function." / "call the 'calculate' function with x=5": which tool is meant
/// is settled by a quoted name, by there being one tool, or by the arguments the text
/// states fitting exactly one tool.
fn the_function(text: &str, cfg: &ParserConfig, tools: &[ToolSpec], out: &mut StrategyOutput) {
    let (tool, span) = if let Some(c) = QUOTED_FUNCTION.captures(text) {
        let (Some(m), Some(n)) = (c.get(0), c.get(1).or_else(|| c.get(2))) else {
            return;
        };
        let Some(t) = crate::schema::resolve(n.as_str(), tools, &cfg.aliases) else {
            return;
        };
        (t, m.range())
    } else if let Some(m) = THE_FUNCTION.find(text) {
        match tools {
            [only] => (only, m.range()),
            _ => {
                let fitting: Vec<&ToolSpec> = tools
                    .iter()
                    .filter(|t| !crate::bind::bindings(text, t).is_empty())
                    .collect();
                match fitting.as_slice() {
                    [one] => (*one, m.range()),
                    _ => return,
                }
            }
        }
    } else {
        return;
    };
    let at = span.start + text[span.clone()].find(char::is_alphabetic).unwrap_or(0);
    let after = words(&text[span.end..floor(text, (span.end + 80).min(text.len()))]);
    if !committed_sentence(text, at)
        || from_code(&after.iter().map(String::as_str).collect::<Vec<_>>())
    {
        return;
    }
    let mut args = crate::bind::bindings(text, tool);
    if args.is_empty() {
        // "The user requests the weather in Tokyo … So I should call the function."
        if let Some(primary) = tool
            .primary_property()
            .filter(|p| kind_of(tool, p) == Kind::Text)
        {
            let back = &text[floor(text, span.start.saturating_sub(WINDOW))..span.start];
            if let Some(v) = last_proper_noun(back) {
                args.insert(primary.to_string(), Value::String(v));
            }
        }
    }
    let conf = if args.is_empty() { 0.55 } else { 0.65 };
    if let Some(c) = make_call(&tool.name, Value::Object(args), conf, span, tools, cfg) {
        out.calls.push(c);
    }
}

static RUN_WORD: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?i)\b(?:let\s+me|let's|i'll|i\s+will|we'll|i'm\s+going\s+to|i\s+am\s+going\s+to)\s+(?:now\s+)?(?:(?:run|invoke|launch|call)\s+(?:the\s+)?([A-Za-z][\w-]{4,40})\b|use\s+(?:the\s+)?([A-Za-z][\w-]{4,40})\s+(?:tool|function|to)\b)",
    )
});

/// "I'll run CellTypist with the Cells_Adult_Breast model": a word of one offered tool's
/// name that no other tool's name holds (`sc_celltypist`), said as the thing run.
fn run_by_word(text: &str, cfg: &ParserConfig, tools: &[ToolSpec], out: &mut StrategyOutput) {
    for c in RUN_WORD.captures_iter(text) {
        // ("I'll use the weather data above": "use" names a tool only as "the X tool" or
        // "X to …".)
        let (Some(m), Some(w)) = (c.get(0), c.get(1).or_else(|| c.get(2))) else {
            continue;
        };
        let word = w.as_str().to_ascii_lowercase();
        if NAME_VERBS.contains(&word.as_str())
            || NAME_VERBS.contains(&word.as_str())
            || NAME_FILLERS.contains(&word.as_str())
            || [
                "tool",
                "tools",
                "function",
                "functions",
                "command",
                "script",
            ]
            .contains(&word.as_str())
        {
            continue;
        }
        let owners: Vec<&ToolSpec> = tools
            .iter()
            .filter(|t| crate::schema::name_words(&t.name).contains(&word))
            .collect();
        let [tool] = owners.as_slice() else { continue };
        if !committed_sentence(text, m.start()) {
            continue;
        }
        let sent = sentence_around(text, &m.range());
        let args = crate::bind::bindings(&text[sent], tool);
        if let Some(call) = make_call(&tool.name, Value::Object(args), 0.6, m.range(), tools, cfg) {
            out.calls.push(call);
            return;
        }
    }
}

/// `open(` / `.read()` / `os.read` / `--run` are code, not verbs.
fn code_like(text: &str, r: &Range<usize>) -> bool {
    let before = text[..r.start].chars().next_back();
    let after = text[r.end..].chars().next();
    let functions_prefix = text[..r.start].ends_with("functions.");
    // `ls.stdout.on`, `Read/Write/RawFd`, `std::io::Read`: a member, a list of names, a
    // path.
    let mut rest = text[r.end..].chars();
    let joined = matches!(rest.next(), Some('.' | '/'))
        && rest
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    matches!(after, Some('('))
        || joined
        || text[..r.start].ends_with("::")
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
                // Its keys must be the tool's: `with window: {start: …}` is one value.
                let props = p.tool.properties();
                let own = v.as_object().is_some_and(|o| {
                    props.is_empty() || o.keys().any(|k| props.iter().any(|(n, _)| n == k))
                });
                if own {
                    let c = make_call(&p.tool.name, v, 0.8, start..r.end, tools, cfg)?;
                    return Some(vec![c]);
                }
            }
        }
    }
    if p.primary.is_empty() {
        // A tool without arguments, by its name or by its verb and a noun of its name
        // ("let me check your eligibility" for `verify_eligibility_tool`).
        // ("Let me turn those off" for `HassTurnOff`: the name's own phrasal verb.)
        let said = text[tr.start..tr.end].to_lowercase();
        let phrasal = p.verbs.iter().any(|v| {
            matches!(v.as_slice(), [verb, particle] if PARTICLES.contains(&particle.as_str())
                && said.starts_with(verb.as_str())
                && said.ends_with(particle.as_str()))
        });
        if !tr.by_name && !phrasal && !named_by_nouns(text, tr, p, clause, sent) {
            return None;
        }
        // ("`get_goal`, `create_goal`: for managing goals": one of a list of names.)
        if tr.by_name && listed_name(text, tr) {
            return None;
        }
        let span = toks_start(tr, text)..tr.end;
        return Some(vec![make_call(
            &p.tool.name,
            Value::Object(Map::new()),
            0.7,
            span,
            tools,
            cfg,
        )?]);
    }
    // A tool's own name (`load_capability` in backticks) is not an argument.
    // (Nor is a command its own tool's name: "using the `exec_command` tool".)
    let first = extract_primary(p.kind, text, prot, win.clone(), &p.primary).filter(|f| {
        let v = f.value.trim();
        match p.kind {
            Kind::Text => !tools.iter().any(|t| t.name.eq_ignore_ascii_case(v)),
            Kind::Command => !p.tool.name.eq_ignore_ascii_case(v),
            _ => true,
        }
    });
    // "call get_time with the timezone set to UTC" (or the value stated by name earlier
    // in the sentence): the binder reads what the extractors do not.
    let first = first.or_else(|| {
        if !tr.by_name {
            let after = &text[tr.end..sent.end.max(tr.end)];
            let v = crate::bind::bindings(after, p.tool)
                .get(&p.primary)?
                .as_str()?
                .to_string();
            return Some(Found {
                value: v,
                range: tr.end..sent.end.max(tr.end),
            });
        }
        let after = tr.end..sent.end.max(tr.end);
        let lead = toks_start(tr, text);
        let before = sent.start.min(lead)..lead;
        [after, before].into_iter().find_map(|r| {
            let bound = crate::bind::bindings(&text[r.clone()], p.tool);
            let v = bound.get(&p.primary)?.as_str()?.to_string();
            Some(Found { value: v, range: r })
        })
    });
    let Some(first) = first else {
        let named = if tr.by_name {
            named_as_tool(text, tr, sent)
        } else {
            named_by_nouns(text, tr, p, clause, sent) || sole_verb_committed(text, tr, p.kind, sent)
        };
        if !named {
            return None;
        }
        // "The user wants to search for 'x'. Use the search function.": the value was
        // quoted just before; else the call is made without it (the tool says what is
        // missing, or `intent.confirm` asks the model).
        // ("I don't have live data for Paris. Let me fetch the weather for you.": a place
        // named just before.)
        let lead = toks_start(tr, text);
        let back = floor(text, lead.saturating_sub(WINDOW))..lead;
        // ("The experiment ID … is exp_003. Next, I'll retrieve its results.": stated
        // by the property's name.)
        let stated = crate::bind::bindings(&text[back.clone()], p.tool)
            .get(&p.primary)
            .and_then(Value::as_str)
            .map(str::to_string);
        let args = stated
            .or_else(|| quoted_before(text, prot, tr, p))
            .or_else(|| {
                let back = &text[back.clone()];
                (p.kind == Kind::Text)
                    .then(|| {
                        last_proper_noun(back).or_else(|| {
                            // "My favourite city is Kyoto, Japan! Let me check the
                            // weather there.": "there" points at the place just named.
                            let after = &text[tr.end.min(clause.end)..clause.end];
                            words(after)
                                .iter()
                                .any(|w| w == "there")
                                .then(|| PLACE_JUST_NAMED.captures_iter(back).last())
                                .flatten()
                                .and_then(|c| c.get(1))
                                .map(|m| m.as_str().trim_end_matches(['.', ',', '!']).to_string())
                        })
                    })
                    .flatten()
            })
            .map(|v| {
                let mut m = Map::new();
                m.insert(p.primary.clone(), Value::String(v));
                m
            })
            .unwrap_or_default();
        let conf = if args.is_empty() { 0.55 } else { 0.6 };
        let span = toks_start(tr, text)..tr.end;
        return Some(vec![make_call(
            &p.tool.name,
            Value::Object(args),
            conf,
            span,
            tools,
            cfg,
        )?]);
    };
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
        args.insert(
            fitting_property(p, &f.value),
            Value::String(f.value.clone()),
        );
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

/// The name is one of a list of names (`a, b and c`).
fn listed_name(text: &str, tr: &Trigger) -> bool {
    let start = toks_start(tr, text);
    let before = text[..start].trim_end_matches(['`', '"', '\'']).trim_end();
    let after = text[tr.end..]
        .trim_start_matches(['`', '"', '\''])
        .trim_start();
    before.ends_with(',') || after.starts_with(',') || after.starts_with("and ")
}

/// Without an argument, a bare word is no evidence of a call ("then read the docs"):
/// the name must read as a tool's — an identifier (`get_weather`, `getWeather`), a
/// `functions.` prefix, or followed by "function"/"tool" — and not be one of a list.
fn named_as_tool(text: &str, tr: &Trigger, sent: &Range<usize>) -> bool {
    let start = toks_start(tr, text);
    let word = &text[start..tr.end];
    // A name in backticks is written as a name.
    let ticked = text[..start].ends_with('`') && text[tr.end..].starts_with('`');
    let before = text[..start].trim_end_matches(['`', '"', '\'']).trim_end();
    let after = text[tr.end..]
        .trim_start_matches(['`', '"', '\''])
        .trim_start();
    let listed = listed_name(text, tr);
    // "I called get_x for now and get_y for tomorrow": done, not to do.
    let sentence_before = text[sent.start.min(start)..start]
        .to_ascii_lowercase()
        .replace('\u{2019}', "'");
    let refused = refusing(
        words(past_purpose(&sentence_before))
            .iter()
            .map(String::as_str),
    );
    // Without its arguments, a call needs an explicit commitment, not just a position
    // at the start of a clause ("… then get_x but the limit was reached") — or it is
    // the imperative of its own clause ("…; use get_user_id").
    let clause_lead = sentence_before
        .rsplit([';', ':', ',', '.', '\n'])
        .next()
        .unwrap_or("")
        .trim();
    // "use", "call the", "so just call", "now simply invoke".
    let lead: Vec<String> = words(clause_lead)
        .into_iter()
        .skip_while(|w| DISCOURSE.contains(&w.as_str()) || w == "just" || w == "simply")
        .collect();
    let imperative = matches!(
        lead.iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice(),
        ["use" | "call" | "invoke"] | ["use" | "call" | "invoke", "the"]
    );
    let lead_in = &text[sent.start.min(start)..start];
    let cjk = cjk_commits(lead_in, &text[tr.end..]) || ru_commits(&lead_in.to_lowercase());
    let cued = imperative
        || cjk
        || STRONG_CUES
            .iter()
            .any(|cue| has_phrase(&sentence_before, cue))
        || able_then_colon(text, sent, &sentence_before);
    if listed || refused || !cued {
        return false;
    }
    let word = word.trim_matches(|c: char| !c.is_alphanumeric() && c != '_');
    let identifier = ticked || identifier_shaped(word) || word.chars().any(|c| c.is_ascii_digit());
    let marked = before.ends_with("functions.")
        || after
            .split(|c: char| !c.is_alphanumeric())
            .next()
            .is_some_and(|w| matches!(w.to_ascii_lowercase().as_str(), "function" | "tool"));
    // A plain word ("search") only right after a first-person commitment.
    let lower_before = before.to_ascii_lowercase().replace('\u{2019}', "'");
    // A plain word ("read") only as the object of call/use/invoke after a first-person
    // commitment: "let's calculate 25% of 80" is the model doing the sum itself.
    let committed = ["call the", "use the", "invoke the", "call", "use", "invoke"]
        .iter()
        .find_map(|v| lower_before.strip_suffix(v))
        .map(str::trim_end)
        .is_some_and(|stem| COMMIT_CUES.iter().any(|c| stem.ends_with(c)));
    // "Use python.": the whole sentence is the order.
    // ("Use echo with file_name.": the order and what to give it.)
    let alone = imperative
        && (after.is_empty() || after.starts_with(['.', '!', '\n']) || after.starts_with("with "));
    // "First, I'll calculate 25% of 80." as the last words: the model stopped to call.
    // (Followed by the working after its colon, it did the sum itself.)
    // ("Let me start by exploring … and finding all Python files.": the steps it starts
    // with follow the commitment.)
    let stem = [" start by", " begin by"]
        .iter()
        .find_map(|s| lower_before.find(s).map(|i| &lower_before[..i]))
        .unwrap_or(&lower_before)
        .trim_end()
        .trim_end_matches(" first")
        .trim_end_matches(" now");
    let last_words = COMMIT_CUES
        .iter()
        .any(|c| has_phrase(stem, c) && stem.ends_with(c))
        && text[sent.end.min(text.len())..]
            .trim_start_matches(':')
            .trim()
            .is_empty();
    identifier || marked || committed || cjk || alone || last_words
}

/// What a tool that takes a URL fetches.
const WEB_THINGS: &[&str] = &[
    "page",
    "pages",
    "site",
    "website",
    "webpage",
    "article",
    "articles",
    "episode",
    "post",
    "link",
    "url",
    "homepage",
    "blog",
    "docs",
    "documentation",
];

/// "I'll search for quarterly reports for you." with `search_files` the only tool that
/// searches: the verb no other offered tool has, right after a first-person commitment,
/// and what it looks for.
fn sole_verb_committed(text: &str, tr: &Trigger, kind: Kind, sent: &Range<usize>) -> bool {
    // "search for …", "look for …": what is sought follows (not "update all usages");
    // "fetch the podcast pages": a page of the web, for a tool that takes its URL.
    // (Other tools may share a look-up verb; a page is only what a URL tool fetches.)
    let after = words(&text[tr.end.min(sent.end)..sent.end]);
    let sought = tr.sole && after.first().is_some_and(|w| w == "for");
    let page = kind == Kind::Url
        && tr.own
        && after
            .iter()
            .take(6)
            .any(|w| WEB_THINGS.contains(&w.as_str()));
    if !(sought || page) {
        return false;
    }
    let start = toks_start(tr, text);
    let before = text[sent.start.min(start)..start]
        .to_ascii_lowercase()
        .replace('\u{2019}', "'");
    let stem = before.trim_end();
    let stem = stem.strip_suffix(" now").unwrap_or(stem);
    !refusing(words(&before).iter().map(String::as_str))
        && COMMIT_CUES
            .iter()
            .any(|c| stem.ends_with(c) && has_phrase(stem, c))
}

/// "Next, get permissions.": a verb and a noun of a custom tool's name
/// (`get_user_permissions`), in a committing sentence.
fn named_by_nouns(
    text: &str,
    tr: &Trigger,
    p: &Profile,
    clause: &Range<usize>,
    sent: &Range<usize>,
) -> bool {
    // The tool's own verb with a noun of its name: "search for budget files" for
    // `search_files`.
    // (Not the name's verb: `describe` of `describe_table`; but `document` of
    // `DocumentSearchTool` is a noun.)
    let name_words = crate::schema::name_words(&p.tool.name);
    let lead_verb = name_words
        .first()
        .filter(|f| p.own_verbs.iter().any(|v| v.len() == 1 && v[0] == **f));
    let own_noun = |w: &str| {
        tr.own
            && name_words.iter().any(|n| {
                Some(n) != lead_verb
                    && n.len() >= 3
                    && !NAME_VERBS.contains(&n.as_str())
                    && (names_noun(n, w) || kin_of(n, w))
            })
    };
    if !p.lookup_needs_noun && !tr.own {
        return false;
    }
    // "I'll check if there's more weather information needed": a look-up verb on a
    // condition weighs the answer; it looks nothing up.
    // (Only the first words after it are looked at.)
    let after_end = floor(text, clause.end.min(tr.end + 200));
    let after = words(&text[tr.end.min(after_end)..after_end]);
    if !tr.own && after.first().is_some_and(|w| w == "if" || w == "whether") {
        return false;
    }
    let hit = |w: &String| {
        own_noun(w) || (p.lookup_needs_noun && p.nouns.iter().any(|n| names_noun(n, w)))
    };
    // "… the tables in the database. Let me list them.": the pronoun stands for a noun
    // of the sentence before.
    let pronoun = after.len() == 1 && ["them", "it", "these", "those"].contains(&after[0].as_str());
    let noun_hit = after.iter().take(6).any(hit)
        || (pronoun && {
            let from = floor(text, sent.start.saturating_sub(WINDOW));
            words(&text[from..sent.start]).iter().any(hit)
        });
    let start = toks_start(tr, text);
    let before = text[sent.start.min(start)..start].to_ascii_lowercase();
    let refused = refusing(words(past_purpose(&before)).iter().map(String::as_str));
    // "Getting the name of the current day...", "I'm setting a timer": the model says
    // what it is doing.
    let doing = before.trim_end().replace('\u{2019}', "'");
    let opening_gerund = text[start..tr.end].ends_with("ing")
        && (doing.is_empty()
            || ["i'm", "i am", "we're", "we are"]
                .iter()
                .any(|c| doing.ends_with(c) && has_phrase(&doing, c)));
    noun_hit
        && !refused
        && (opening_gerund
            || STRONG_CUES.iter().any(|cue| has_phrase(&before, cue))
            || able_then_colon(text, sent, &before))
}

/// "To figure out how many cats you have, I can …": the purpose clause in front says
/// what for, not whether; only what follows its comma can refuse.
fn past_purpose(lower_before: &str) -> &str {
    let t = lower_before.trim_start();
    match t.strip_prefix("to ").and_then(|r| r.find(',')) {
        Some(i) => &t[3 + i + 1..],
        None => lower_before,
    }
}

/// `word` in the text names the tool's noun `n`: the same word, its plural ("tables" for
/// `describe_table`), its start ("info" for `information`), or with "sub" before it
/// ("subagent" for `Agent`).
fn names_noun(n: &str, word: &str) -> bool {
    let word = word
        .strip_prefix("sub")
        .filter(|w| w.len() > 3)
        .unwrap_or(word);
    n == word || word.strip_suffix('s') == Some(n) || (word.len() > 3 && n.starts_with(word))
}

/// Claude 3's "To figure out how many cats you have, I can use the calculator tool:" as
/// its last words: what it can do, announced with a colon, is what it does next.
fn able_then_colon(text: &str, sent: &Range<usize>, lower_before: &str) -> bool {
    let end = sent.end.min(text.len());
    text[sent.start.min(end)..end].trim_end().ends_with(':')
        && text[end..].trim().is_empty()
        && (has_phrase(lower_before, "i can") || has_phrase(lower_before, "we can"))
}

/// Cues that commit to acting now ("I can get stock prices" describes, it does not).
const STRONG_CUES: &[&str] = &[
    // gpt-oss's planning voice: "We can use the weather function."
    "we can",
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
    "going to",
    "gonna",
    "next",
    "now",
    "time to",
    "proceed",
    // The request restated in reasoning: "The user wants me to call ping with value 1."
    "wants me to",
    "want me to",
    "asks me to",
    "asked me to",
];

/// First-person commitments that make even a bare tool word an intended call.
const COMMIT_CUES: &[&str] = &[
    "we need to",
    "i need to",
    "let's",
    "let me",
    "i'll",
    "we'll",
    "we should",
    "i should",
    "we must",
    "i must",
    "we have to",
    "i have to",
    "i will",
    "we will",
];

/// A quoted value in the sentence before the trigger that fits the tool's argument.
fn quoted_before(text: &str, prot: &[Protected], tr: &Trigger, p: &Profile) -> Option<String> {
    let from = floor(text, tr.end.saturating_sub(WINDOW));
    let quoted = prot
        .iter()
        .rev()
        .filter(|q| q.range.start >= from && q.range.end <= tr.end)
        .find(|q| !matches!(q.kind, Quote::Backtick) || matches!(p.kind, Kind::Command))
        // `the experiment named "chemical_reaction"` names the thing, not its id.
        .filter(|q| {
            !named_just_before(text, q.range.start)
                || p.primary.to_ascii_lowercase().contains("name")
                || matches!(p.kind, Kind::Path | Kind::File)
        })
        .map(|q| text[q.inner.clone()].trim())
        // The tool's own name in backticks is not its argument.
        .filter(|v| !p.names.iter().any(|n| n.eq_ignore_ascii_case(v)))
        .filter(|v| match p.kind {
            Kind::Url => v.starts_with("http"),
            Kind::Path | Kind::File => path_like(v),
            Kind::Query | Kind::Text => v.split_whitespace().count() <= 12 && !v.ends_with('?'),
            _ => false,
        });
    if let Some(v) = quoted.filter(|v| !v.is_empty()) {
        return Some(v.to_string());
    }
    // "The user wants the weather in Florence, Italy. Let me call the weather function."
    if p.kind == Kind::Text {
        let back = &text[from..toks_start(tr, text)];
        let last = PROPER_AFTER_PREP.captures_iter(back).last()?;
        let v = last.get(1)?.as_str().trim_end_matches(['.', ',']);
        if !generic_phrase(&v.to_ascii_lowercase()) && !["I", "We", "The", "This"].contains(&v) {
            return Some(v.to_string());
        }
    }
    None
}

/// The property a value read by position goes to: the primary one, unless the value is
/// plainly a file or a URL and another required property is named for that
/// ("check_file_access for secret_file.txt" → `filename`, not `user_id`).
fn fitting_property(p: &Profile, value: &str) -> String {
    let is_url = value.starts_with("http://") || value.starts_with("https://");
    let is_file = !is_url && path_like(value) && value.contains('.');
    if !(is_url || is_file) || matches!(p.kind, Kind::Url | Kind::Path | Kind::File) {
        return p.primary.clone();
    }
    let wanted: &[&str] = if is_url {
        &["url", "uri", "link"]
    } else {
        &["file", "path", "filename"]
    };
    p.tool
        .required()
        .into_iter()
        .find(|r| {
            let l = r.to_ascii_lowercase();
            wanted.iter().any(|w| l.contains(w))
        })
        .map_or_else(|| p.primary.clone(), str::to_string)
}

/// Where the trigger's first word starts, with any punctuation stuck to its front.
fn toks_start(tr: &Trigger, text: &str) -> usize {
    let s = &text[..tr.start];
    s.rfind(|c: char| c.is_whitespace() || is_cjk(c))
        .map_or(0, |i| i + s[i..].chars().next().map_or(1, char::len_utf8))
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
            // (Also a value the fuller call states more fully: "San Francisco" beside
            // "San Francisco, CA" with its unit.)
            let within =
                |(k, v): (&String, &Value)| match (v.as_str(), b.get(k).and_then(Value::as_str)) {
                    (Some(x), Some(y)) => y.starts_with(x),
                    _ => b.get(k) == Some(v),
                };
            if a.len() < b.len() && a.iter().all(within) {
                keep[i] = false;
            }
            // "Vancouver", then "Vancouver, Canada" as the reasoning settles it (or the
            // other way round): the same value stated again later wins.
            let restated = a.len() == b.len()
                && a != b
                && calls[j].span.start > calls[i].span.start
                && a.iter().all(
                    |(k, v)| match (v.as_str(), b.get(k).and_then(Value::as_str)) {
                        (Some(x), Some(y)) => x.starts_with(y) || y.starts_with(x),
                        _ => b.get(k) == Some(v),
                    },
                );
            if restated {
                keep[i] = false;
            }
        }
    }
    let mut it = keep.into_iter();
    calls.retain(|_| it.next().unwrap_or(true));
}

/// A sentence of the answer that opens with a verb in the imperative ("Run `cargo add
/// regex` to add it.", "To update it, run `git pull`.", "- Search the docs for …"), or
/// a heading: addressed to the reader. Not in the thinking the answer carries (`<think>…`, a
/// Harmony analysis channel), nor after a label ("Thought: Search …").
pub(crate) fn tells_reader(text: &str, start: usize) -> bool {
    let head = &text[..floor(text, start)];
    if thinking_at(head) || stops_for_call(text) {
        return false;
    }
    // "### Running `rustfmt` directly": a section's title.
    if text[line_start(text, start)..].starts_with('#') || plan_shown(text, start) {
        return true;
    }
    let lead = last_sentence(head).trim_start_matches(|c: char| {
        c.is_whitespace()
            || c.is_ascii_digit()
            || matches!(c, '-' | '*' | '•' | '>' | '#' | ')' | '.')
    });
    // "First, create the file `hello.cc`:" is a step of a walk-through too.
    let lower_lead = lead.to_ascii_lowercase();
    let walk = ["first, ", "next, ", "then, ", "now, ", "finally, "]
        .iter()
        .find_map(|w| {
            lower_lead
                .strip_prefix(w)
                .map(|r| &lead[lead.len() - r.len()..])
        });
    // "- **doc**: update BUILDING.md", "* fs: replace var with let": a change listed
    // under its area, as changelogs and commit messages write them.
    let area = || {
        let line = &text[line_start(text, start)..floor(text, start)];
        list_item(line) && {
            let t = lead.trim_end();
            t.ends_with(':')
                && t.len() <= 40
                && !t[..t.len() - 1]
                    .trim_matches('*')
                    .contains(char::is_whitespace)
        }
    };
    let walk = walk.or_else(|| area().then_some(""));
    let lead = walk.unwrap_or(lead);
    let first = text[floor(text, start)..]
        .split_whitespace()
        .next()
        .unwrap_or("");
    // "(run `./configure --help` to get the complete list)": an aside to the reader.
    if let Some(word) = first.strip_prefix('(') {
        return english_verb(&word.to_ascii_lowercase());
    }
    if lead.is_empty() {
        // An English verb of the lexicon, capitalised ("Vou verificar" is Portuguese
        // for "I'll check").
        (walk.is_some() || first.starts_with(|c: char| c.is_ascii_uppercase()))
            && english_verb(&first.to_ascii_lowercase())
    } else {
        let lower = lead.to_ascii_lowercase();
        lower.starts_with("to ") && lower.trim_end().ends_with(',')
    }
}

/// The tool's name written as code that the sentence talks about: "the `create_issue`
/// docstring in `client.py`", "the `read_file` helper in utils.py" — a function of the
/// program being worked on, not the offered tool.
fn names_code(text: &str, c: &ParsedCall) -> bool {
    const CODE_NOUNS: &[&str] = &[
        "docstring",
        "helper",
        "method",
        "implementation",
        "test",
        "tests",
        "class",
        "module",
        "variable",
        "signature",
        "definition",
        "wrapper",
        "handler",
        "endpoint",
        "decorator",
        "stub",
        "mock",
    ];
    let sent = sentence_around(text, &c.span);
    let s = &text[sent];
    let name = c.name.to_ascii_lowercase();
    let mut rest = s;
    while let Some(open) = rest.find('`') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('`') else { break };
        let code = after[..close].to_ascii_lowercase();
        let next = after[close + 1..]
            .split_whitespace()
            .next()
            .unwrap_or("")
            .trim_matches(|c: char| !c.is_alphanumeric())
            .to_ascii_lowercase();
        if code.len() >= 3 && name.ends_with(&code) && CODE_NOUNS.contains(&next.as_str()) {
            return true;
        }
        rest = &after[close + 1..];
    }
    false
}

/// A step put off to another time or on a condition ("I'll run tomorrow during the
/// maintenance window", "If the health check fails, I'll run…", "…after you approve",
/// "Before I run anything, let me check with you").
pub(crate) fn deferred(lower: &str) -> bool {
    let l = lower.trim_start();
    ["if ", "when ", "once ", "before i ", "unless "]
        .iter()
        .any(|w| l.starts_with(w))
        || [
            "run tomorrow",
            "run it tomorrow",
            "run later",
            "run it later",
            "do it later",
            "after you",
            "once you",
            "when you",
            "you approve",
            "your approval",
            "with you",
            "maintenance window",
            "check with you",
            "before i run",
            "would run",
            "something like",
        ]
        .iter()
        .any(|w| l.contains(w))
}

/// The call's sentence, or the one that introduces its block or line, puts it off.
fn step_deferred(text: &str, span: &Range<usize>) -> bool {
    let own = call_sentence(text, span).to_ascii_lowercase();
    let head = text[..floor(text, span.start)].trim_end();
    let intro = if head.ends_with(':')
        || head.ends_with("```")
        || text[floor(text, span.start)..].starts_with("```")
    {
        let h = head
            .trim_end_matches(|c: char| c == '`' || c.is_ascii_alphanumeric())
            .trim_end();
        last_sentence(h).to_ascii_lowercase()
    } else {
        String::new()
    };
    deferred(&own) || deferred(&intro)
}

/// A step taken back in the words after it ("… actually no, the user said not to open any
/// links.").
fn taken_back(text: &str, end: usize) -> bool {
    let rest = &text[floor(text, end)..floor(text, (end + 160).min(text.len()))];
    let lower = rest.to_ascii_lowercase();
    [
        "actually no",
        "actually, no",
        "on second thought",
        "never mind",
        "nevermind",
    ]
    .iter()
    .any(|w| lower.contains(w))
}

/// The answer ends waiting on the user ("I'll wait for further instructions or
/// clarification on how to proceed."): what it said it could do is not done now.
pub(crate) fn waits_for_user(text: &str) -> bool {
    // (The last sentence, and the wait its own: not "I'll read it, then wait for your
    // confirmation before editing".)
    let lower = last_sentence(text.trim_end().trim_end_matches(['.', '!']))
        .to_ascii_lowercase()
        .replace('\u{2019}', "'");
    if ["then", "before", "after", "once", "first", "next"]
        .iter()
        .any(|w| has_phrase(&lower, w))
    {
        return false;
    }
    [
        "wait for further instructions",
        "wait for your instructions",
        "wait for further clarification",
        "wait for your confirmation",
        "await further instructions",
        "await your instructions",
        "await your confirmation",
    ]
    .iter()
    .any(|w| lower.contains(w))
}

/// A line under "I can help you with:" (each line a thing the model could do, "Searching
/// for calendar events"): an offer, no step.
fn capability_listed(text: &str, start: usize) -> bool {
    let mut at = line_start(text, start);
    // (The call's own line is one of the list's: short, no sentence, no step of the
    // model's own.)
    let own = text[at..].lines().next().unwrap_or("").trim();
    let own_lower = own.to_ascii_lowercase();
    if at == 0
        || own.len() > 100
        || own.ends_with(['.', '!', '?', ':'])
        || ["let me", "i'll", "i will", "now "]
            .iter()
            .any(|w| own_lower.starts_with(w))
    {
        return false;
    }
    let mut lines = 0;
    while at > 0 && lines < 12 {
        let prev = line_start(text, at - 1);
        let line = text[prev..at].trim();
        at = prev;
        if line.is_empty() {
            continue;
        }
        lines += 1;
        let lower = line.to_ascii_lowercase().replace('\u{2019}', "'");
        if lower.ends_with(':') {
            return [
                "i can help you with",
                "i can help with",
                "i can assist you with",
                "i can assist with",
                "i can also help",
                "i'm able to help",
                "i am able to help",
                "i can do the following",
                "here's what i can do",
                "here is what i can do",
            ]
            .iter()
            .any(|p| lower.contains(p));
        }
        // (The list's other lines are short and no sentences.)
        if line.len() > 100 || line.ends_with(['.', '!', '?']) {
            return false;
        }
    }
    false
}

/// A list item under "Here is a step-by-step plan using the provided functions:": the
/// plan is shown to the reader, no step of it taken now.
fn plan_shown(text: &str, start: usize) -> bool {
    let mut at = line_start(text, start);
    if !list_item(&text[at..]) {
        return false;
    }
    // (Not a plan the model then starts on: "Let's proceed with step 1: …".)
    let after = text[start..].to_ascii_lowercase();
    if ["let's", "let me", "i'll ", "i will ", "proceed", "step 1"]
        .iter()
        .any(|w| after.contains(w))
    {
        return false;
    }
    // Back over the list (its items, their wrapped lines, blank lines) to what opens it.
    while at > 0 {
        let prev = line_start(text, at - 1);
        let line = &text[prev..at];
        at = prev;
        if line.trim().is_empty() || list_item(line) {
            continue;
        }
        let lower = line.trim().to_ascii_lowercase().replace('\u{2019}', "'");
        if lower.ends_with(':')
            && ["here is ", "here's ", "here are "]
                .iter()
                .any(|h| lower.contains(h))
            && ["plan", "steps"].iter().any(|w| lower.contains(w))
        {
            return true;
        }
        if !line.starts_with([' ', '\t']) {
            return false;
        }
    }
    false
}

/// "Remove my duplicate function:" as the whole answer, one short line ending in a colon:
/// the model stopped there for its call (instructions to the reader go on after their
/// colon).
pub(crate) fn stops_for_call(text: &str) -> bool {
    let whole = text.trim();
    if !(whole.ends_with([':', '：'])
        && !whole.contains('\n')
        && whole.starts_with(char::is_uppercase)
        && whole.split_whitespace().count() <= 12)
    {
        return false;
    }
    // An imperative and its object ("Remove my duplicate function:"), not a label made of
    // a verb's noun ("Search results for …:", "Test plan:", "Build instructions:") nor
    // an instruction to the reader ("Run these commands in your terminal:", "Delete the
    // following files manually:").
    let ws: Vec<String> = whole
        .trim_end_matches([':', '：'])
        .split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'')
                .to_ascii_lowercase()
        })
        .collect();
    let Some(first) = ws.first() else {
        return false;
    };
    (english_verb(first) || SHELL_VERBS.contains(&first.as_str()) || git_verb(first, &ws))
        && !ws.get(1).is_some_and(|n| {
            matches!(
                n.as_str(),
                "results"
                    | "result"
                    | "instructions"
                    | "plan"
                    | "checklist"
                    | "steps"
                    | "notes"
                    | "summary"
                    | "output"
                    | "log"
                    | "logs"
                    | "status"
                    | "options"
                    | "guide"
                    | "commands"
                    | "details"
                    | "report"
            )
        })
        && !ws.iter().any(|w| {
            matches!(
                w.as_str(),
                "you" | "your" | "yourself" | "manually" | "following" | "below"
            )
        })
}

/// Inside a ``` fence: code and its comments ("// Read the config file"), a command
/// shown, no words of the model's own. (Not a fence of thinking; a fence that is itself
/// the call is read by the other strategies.)
fn in_code_fence(text: &str, pos: usize) -> bool {
    let mut open: Option<&str> = None;
    for l in text[..floor(text, pos)].lines() {
        if let Some(info) = l.trim_start().strip_prefix("```") {
            open = match open {
                Some(_) => None,
                None => Some(info.trim()),
            };
        }
    }
    open.is_some_and(|info| {
        let lang = info.to_ascii_lowercase();
        lang != "plan" && !crate::native_text::REASONING_TAGS.contains(&lang.as_str())
    })
}

/// A verb of the lexicon (the first word of a phrasal one).
fn english_verb(lower: &str) -> bool {
    NAME_VERBS.contains(&lower)
        || CONCEPTS
            .iter()
            .flat_map(|c| c.verbs)
            .any(|v| v.split(' ').next() == Some(lower))
}

/// "Running `pyenv install -l` gives the list …", "Running `npm i -g yarn` doesn't
/// work": the gerund is the subject of the verb after it, no step being taken.
fn gerund_subject(text: &str, span: &Range<usize>) -> bool {
    let said = text.get(span.clone()).unwrap_or_default();
    if !said
        .split_whitespace()
        .next()
        .is_some_and(|w| w.starts_with(|c: char| c.is_ascii_uppercase()) && w.ends_with("ing"))
    {
        return false;
    }
    let next = text[floor(text, span.end)..]
        .trim_start_matches(['`', '"', '\'', '*'])
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    matches!(
        next.trim_end_matches([',', '.', ':']),
        "gives"
            | "is"
            | "was"
            | "does"
            | "doesn't"
            | "did"
            | "didn't"
            | "will"
            | "would"
            | "won't"
            | "can"
            | "can't"
            | "cannot"
            | "returns"
            | "shows"
            | "prints"
            | "produces"
            | "ensures"
            | "works"
            | "fails"
            | "makes"
            | "causes"
            | "takes"
            | "requires"
            | "lets"
            | "allows"
            | "helps"
            | "should"
            | "may"
            | "might"
            | "must"
            | "has"
            | "creates"
            | "generates"
            | "outputs"
            | "displays"
    )
}

/// The end of `head` lies inside thinking: an unclosed `<think>`, `<thinking>` or
/// `<reasoning>`, or a Harmony analysis or commentary channel.
fn thinking_at(head: &str) -> bool {
    let open_tag = crate::native_text::REASONING_TAGS.iter().any(|t| {
        head.rfind(&format!("<{t}>"))
            .is_some_and(|i| !head[i..].contains(&format!("</{t}>")))
    });
    open_tag
        || head.rfind("<|channel|>").is_some_and(|i| {
            let ch = &head[i + "<|channel|>".len()..];
            ch.starts_with("analysis") || ch.starts_with("commentary")
        })
        || head.starts_with("analysis")
}
