//! A coding agent's next step said in words, among tools that each do one kind of work
//! on a workspace: "Let me check the registration cog.", "Now update the three cogs
//! with `replace_all`:", "Rewriting the HTTP test to spy on …", "I'm opening the
//! WeeklyWidgetProvider to understand …", "让我将其写入计划文件。".
//!
//! Such texts name no tool and rarely an argument: the verb says what kind of work comes
//! next (read, edit, write, search, list, run) and the tool is the one offered for that
//! work. Only the text's last paragraph counts — the step the model stopped to take.
//! Asking the user is such a step too, for the one tool offered for asking
//! (`ask_step`).

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::{
    committed_sentence, extract_primary, kind_of, protected_spans, refusing, verb_of_stem,
    waits_on_user, Kind, OUTCOMES, SHELL_OBJECTS, SHELL_VERBS,
};
use crate::harmony::floor;
use crate::{make_call, schema::name_words, ParserConfig, StrategyOutput, ToolSpec};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Work {
    Read,
    Edit,
    Write,
    Search,
    List,
    /// Files found by name, or by their contents when nothing lists them.
    Find,
    Shell,
}

/// Words a workspace tool's name may hold besides its verb (`read_file_v2`,
/// `ripgrep_raw_search`, `glob_file_search`).
const FILE_WORDS: &[&str] = &[
    "file",
    "files",
    "v2",
    "text",
    "content",
    "contents",
    "multiple",
    "many",
    "code",
    "source",
    "to",
    "new",
    "raw",
    "in",
    "str",
    "string",
    "multi",
    "apply",
    "codebase",
    "workspace",
    "dir",
    "directory",
    "directories",
    "folder",
    "by",
    "name",
    "path",
    "paths",
    "tree",
    "semantic",
    "editor",
    "diff",
    "block",
    "insert",
];

/// The kind of work a tool's name says it does, for names made only of a work verb and
/// file words (`Read`, `edit_file`, `grep_search`; not `read_lints`, `web_search`).
fn work_of(tool: &ToolSpec) -> Option<Work> {
    let primary = tool.primary_property().unwrap_or_default();
    if kind_of(tool, primary) == Kind::Command {
        return Some(Work::Shell);
    }
    let ws = name_words(&tool.name);
    let has = |list: &[&str]| ws.iter().any(|w| list.contains(&w.as_str()));
    let shell = ["bash", "shell", "terminal", "zsh", "powershell", "exec"];
    if has(&shell) {
        return Some(Work::Shell);
    }
    let kinds: [(Work, &[&str]); 5] = [
        (Work::Edit, &["edit", "patch", "replace", "modify"]),
        (Work::Write, &["write", "create", "save"]),
        (Work::List, &["glob", "list", "ls", "find"]),
        (Work::Search, &["grep", "ripgrep", "rg", "search"]),
        (Work::Read, &["read", "view", "cat", "open"]),
    ];
    let (work, _) = kinds.iter().find(|(_, verbs)| has(verbs))?;
    let all_known = ws.iter().all(|w| {
        FILE_WORDS.contains(&w.as_str()) || kinds.iter().any(|(_, v)| v.contains(&w.as_str()))
    });
    all_known.then_some(*work)
}

/// A file tool that does several kinds of work by an `operation` it is told, its
/// description listing them: `files`, "文件操作（create/write/read/str_replace 等）".
fn operations_of(tool: &ToolSpec) -> Vec<Work> {
    let ws = name_words(&tool.name);
    let file_named = !ws.is_empty()
        && ws.iter().all(|w| {
            matches!(
                w.as_str(),
                "file" | "files" | "fs" | "filesystem" | "editor"
            )
        });
    let Some(key) = operation_key(tool).filter(|_| file_named) else {
        return Vec::new();
    };
    let names = operation_names(tool, key);
    [Work::Read, Work::Write, Work::Edit]
        .into_iter()
        .filter(|w| operation_in(&names, *w).is_some())
        .collect()
}

/// The property a multi-operation tool is told its operation by.
pub(super) fn operation_key(tool: &ToolSpec) -> Option<&'static str> {
    ["operation", "action", "op"]
        .into_iter()
        .find(|k| tool.properties().iter().any(|(p, _)| p == k))
}

/// The operations a tool may be told: its property's `enum`, or a list its description
/// gives ("create/write/read/str_replace", "view, create, insert") — not prose words
/// ("read-only", "read and write permissions").
pub(super) fn operation_names(tool: &ToolSpec, key: &str) -> Vec<String> {
    if let Some(list) = tool
        .prop(key)
        .and_then(|p| p.get("enum"))
        .and_then(Value::as_array)
    {
        return list
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_ascii_lowercase)
            .collect();
    }
    static LISTED: LazyLock<Regex> = LazyLock::new(|| {
        ferroclaw_types::literal_regex(
            r"[A-Za-z_][A-Za-z_.]*(?:[ \t]*[/,、][ \t]*[A-Za-z_][A-Za-z_.]*)+",
        )
    });
    LISTED
        .find_iter(&tool.description)
        .flat_map(|m| {
            m.as_str()
                .split(['/', ',', '、'])
                .map(|w| w.trim().trim_matches('.').to_ascii_lowercase())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The operation a multi-work file tool is told for `work`, as its description spells
/// it (`read`, `write`, `str_replace`).
fn operation_for(tool: &ToolSpec, work: Work) -> Option<(&'static str, String)> {
    let key = operation_key(tool)?;
    let op = operation_in(&operation_names(tool, key), work)?;
    Some((key, op.to_string()))
}

/// The operation among `names` that does `work`.
fn operation_in(names: &[String], work: Work) -> Option<&'static str> {
    let wanted: &[&'static str] = match work {
        Work::Read => &["read", "view", "cat", "open"],
        Work::Write => &["write", "create"],
        Work::Edit => &["str_replace", "replace", "edit"],
        _ => &[],
    };
    wanted
        .iter()
        .copied()
        .find(|w| names.iter().any(|n| n == w))
}

/// The verbs of each kind of work, as the first verb of a step.
const READ_VERBS: &[&str] = &[
    "read", "reread", "open", "view", "look", "check", "inspect", "examine", "review", "verify",
    "see", "study", "peek", "confirm", "revisit",
];
const SEARCH_VERBS: &[&str] = &["search", "find", "locate", "grep", "hunt"];
const LIST_VERBS: &[&str] = &["explore", "list", "survey"];
const EDIT_VERBS: &[&str] = &[
    "clean",
    // ("comment out the chrony section")
    "comment",
    "register",
    "integrate",
    "import",
    "hook",
    "mount",
    "inject",
    "append",
    "prepend",
    "edit",
    "update",
    "fix",
    "change",
    "modify",
    "patch",
    "replace",
    "rewrite",
    "refactor",
    "add",
    "insert",
    "adjust",
    "tweak",
    "implement",
    "apply",
    "correct",
    "widen",
    "wire",
    "extend",
    "restructure",
    "uncomment",
    "rework",
    "simplify",
    "amend",
];
const WRITE_VERBS: &[&str] = &["write", "create", "save", "generate", "scaffold"];
/// What a written thing must be for "write"/"create" to be a file's work ("write a
/// summary" is the model's own words).
const FILE_THINGS: &[&str] = &[
    "file",
    "files",
    "script",
    "module",
    "component",
    "class",
    "test",
    "tests",
    "config",
    "readme",
    "dockerfile",
    "makefile",
    "stylesheet",
    "template",
    "page",
    "function",
];
/// What is read rather than listed when explored.
const READ_THINGS: &[&str] = &[
    "files",
    "file",
    "modules",
    "module",
    "components",
    "classes",
    "code",
];
/// Places whose contents a listing shows.
const PLACES: &[&str] = &[
    "directory",
    "directories",
    "folder",
    "folders",
    "dir",
    "workspace",
    "repo",
    "repository",
];
/// Verbs of moving about a workspace, which only a shell does.
const NAVIGATE_VERBS: &[&str] = &["navigate", "cd"];
/// Objects of a look that only a command shows.
const SYSTEM_OBJECTS: &[&str] = &[
    "environment",
    "env",
    "processes",
    "process",
    "status",
    "logs",
    "log",
    "version",
    "versions",
    "installed",
    "disk",
    "port",
    "ports",
    "system",
    "service",
    "services",
    "output",
    "containers",
    "docker",
    // ("verify everything compiles": what a build says.)
    "compiles",
    "builds",
];
/// What a search of the code looks for, as against files found by name.
const SEARCHED: &[&str] = &[
    "usages",
    "usage",
    "references",
    "reference",
    "occurrences",
    "instances",
    "callers",
    "mentions",
    "definition",
    "definitions",
    "where",
];
/// `font-editorial usages`, `usages of `foo``: the name a search looks for.
static SEARCHED_NAME: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?i)(?:\b(?:no|any|all|the|remaining|other)\s+`?([A-Za-z_][\w.-]*)`?\s+(?:usages|references|occurrences|mentions|instances|callers)\b|\b(?:usages|references|occurrences|mentions|instances|callers)\s+(?:of|to)\s+`([^`\n]{1,80})`)",
    )
});
/// Things a shell removes, as against lines of code.
const FILE_OBJECTS: &[&str] = &[
    "file",
    "files",
    "directory",
    "directories",
    "folder",
    "folders",
    "dir",
    "branch",
    "cache",
    "package",
    "packages",
    "container",
    "containers",
    "image",
    "volume",
];
/// Words of tool names that say nothing of what the tool is for.
const GENERIC_NAME_WORDS: &[&str] = &[
    "read", "write", "create", "update", "list", "search", "find", "make", "tool", "file", "files",
    "with", "from", "info", "data", "user", "task",
];
/// Words between the lead and the verb.
const FILLERS: &[&str] = &[
    "now",
    "first",
    "also",
    "quickly",
    "just",
    "then",
    "go",
    "ahead",
    "and",
    "briefly",
    "next",
    "still",
    "actually",
    "quick",
    "double",
    "re",
    "carefully",
    "again",
    "further",
    "directly",
    // ("Let me try to start it again.")
    "try",
    "to",
];
/// Words before the lead that leave it the model's own next step.
const OPENERS: &[&str] = &[
    "now",
    "next",
    "then",
    "first",
    "okay",
    "ok",
    "alright",
    "great",
    "good",
    "perfect",
    "so",
    "finally",
    "and",
    "also",
    "excellent",
    "right",
    "got",
    "it",
];
/// Words that report someone's words before a colon.
const REPORTING: &[&str] = &[
    "wrote",
    "said",
    "says",
    "replied",
    "answered",
    "responded",
    "printed",
    "output",
    "asked",
];
/// Phrases by which a step waits on the reader.
const WAITS_ON_READER: &[&str] = &[
    "if you'd",
    "if you would",
    "if you want",
    "if you like",
    "if you prefer",
    "if you need",
    "once you",
    "when you",
    "after you",
    "get back to you",
    "if needed",
];
/// A step that waits on the reader ("if you'd like") or is a habit promised ("from now
/// on"): no step now. `lower` is the sentence lowercased.
pub(super) fn not_now(lower: &str) -> bool {
    WAITS_ON_READER
        .iter()
        .chain(super::HABITS)
        .any(|p| lower.contains(p))
}

/// A gerund that is the subject, not a status line ("Running it would …").
const SUBJECT_OF: &[&str] = &[
    "is", "are", "was", "were", "be", "would", "could", "will", "can", "might", "may", "should",
    "seems", "requires", "needs", "makes", "remains", "looks", "sounds", "helps", "means", "works",
];

fn tokens(s: &str) -> Vec<String> {
    s.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '\u{2019}'))
        .map(|w| w.trim_matches(['\'', '\u{2019}']).replace('\u{2019}', "'"))
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase())
        .collect()
}

/// Where the step's verb is among a sentence's words: after a lead that commits the
/// model ("let me", "I'll", "I'm going to", "Now" before an imperative, "I'm" before a
/// gerund, "Preparing to"), or a capitalised gerund opening the sentence (a status
/// line). `None` when the sentence is no step of the model's.
/// `alone`: the sentence is the whole answer ([`super::stops_for_call`]).
fn step_verb(
    ws: &[String],
    capital: bool,
    colon: bool,
    alone: bool,
    own_note: bool,
) -> Option<usize> {
    let w = |i: usize| ws.get(i).map_or("", String::as_str);
    let i = ws
        .iter()
        .take_while(|x| OPENERS.contains(&x.as_str()))
        .count();
    let lead_end = match (w(i), w(i + 1), w(i + 2), w(i + 3)) {
        ("let", "me" | "us", _, _) => i + 2,
        ("let's" | "i'll" | "we'll", _, _, _) => i + 1,
        ("i" | "we", "will" | "shall", _, _) => i + 2,
        ("i" | "we", "need" | "want", "to", _) => i + 3,
        ("i'm" | "we're", "going" | "about" | "ready", "to", _) => i + 3,
        ("i", "am", "going", "to") => i + 4,
        ("time", "to", _, _) => i + 2,
        ("i'm" | "we're", g, _, _) if g.ends_with("ing") => i + 1,
        ("preparing" | "planning" | "going" | "deciding" | "moving", "to", _, _) => i + 2,
        // A status line: "Rewriting the HTTP test …", not "Running it would …".
        (g, _, _, _) if g.ends_with("ing") && g.len() > 5 => {
            if !capital || ws.iter().any(|x| SUBJECT_OF.contains(&x.as_str())) {
                return None;
            }
            i
        }
        // "Now update the three cogs:": an imperative after "now"/"next" that stops for
        // the call is the model's ("Now restart the server to apply it." tells the user).
        (_, _, _, _)
            if colon && i > 0 && ws[..i].iter().any(|x| matches!(x.as_str(), "now" | "next")) =>
        {
            i
        }
        (_, _, _, _) if alone => i,
        // In the model's reasoning an imperative after "now"/"next"/"then" is its own next
        // step ("Now check agent.py.", "Need to create the label first."), never the
        // reader's (a bare one may be a page it quotes: "Search or submit bugs …").
        ("need", "to", _, _) if own_note => i + 2,
        (_, _, _, _) if own_note && i > 0 => i,
        _ => return None,
    };
    if refusing(ws[..lead_end].iter().map(String::as_str)) {
        return None;
    }
    let v = (lead_end..ws.len()).find(|&k| !FILLERS.contains(&ws[k].as_str()))?;
    // "Let me start by reading …": the step is the gerund's.
    if matches!(ws[v].as_str(), "start" | "begin") && matches!(w(v + 1), "by" | "with") {
        return (v + 2 < ws.len()).then_some(v + 2);
    }
    Some(v)
}

/// Where a sentence's step verb starts in `lower` (the sentence lowercased), by
/// [`step_verb`]'s leads.
pub(super) fn step_verb_at(s: &str, lower: &str) -> Option<usize> {
    let ws = tokens(s);
    let colon = s.ends_with([':', '：']);
    let v = step_verb(&ws, s.starts_with(char::is_uppercase), colon, false, false)?;
    let mut at = 0;
    for (k, w) in ws.iter().enumerate() {
        let i = at + lower.get(at..)?.find(w.as_str())?;
        if k == v {
            return Some(i);
        }
        at = i + w.len();
    }
    None
}

/// The kind of work a step's verb asks for, with the words after it deciding between
/// looking at files and looking at the system.
fn work_asked(ws: &[String], v: usize) -> Option<Work> {
    let known = |x: &str| {
        [
            READ_VERBS,
            SEARCH_VERBS,
            LIST_VERBS,
            EDIT_VERBS,
            WRITE_VERBS,
            SHELL_VERBS,
            NAVIGATE_VERBS,
        ]
        .iter()
        .any(|l| l.contains(&x))
    };
    let raw = ws[v].as_str();
    if super::git_verb(raw, ws) {
        return Some(Work::Shell);
    }
    // ("comment out the section" edits; "comment on the PR" does not.)
    if raw == "comment" && ws.get(v + 1).is_none_or(|n| n != "out") {
        return None;
    }
    // "merge the branch" is git's; "merge chapter 4 into the main file" edits it.
    if matches!(raw, "merge" | "merging") {
        let filed = ws.iter().any(|w| {
            matches!(
                w.as_str(),
                "file"
                    | "files"
                    | "module"
                    | "section"
                    | "chapter"
                    | "json"
                    | "yaml"
                    | "yml"
                    | "toml"
                    | "ts"
                    | "js"
                    | "py"
                    | "rs"
                    | "go"
                    | "md"
                    | "txt"
            )
        });
        let git = ws.iter().enumerate().any(|(i, w)| {
            matches!(
                w.as_str(),
                "git" | "branch" | "branches" | "origin" | "upstream" | "pr" | "develop" | "master"
            ) || (w == "request" && i > 0 && ws[i - 1] == "pull")
                || (matches!(w.as_str(), "main" | "remote") && !filed)
        });
        return Some(if git { Work::Shell } else { Work::Edit });
    }
    // "Let me do a quick lint check", "perform a test run": a check a program makes.
    if matches!(raw, "do" | "perform") {
        let checked = ws[v + 1..ws.len().min(v + 5)]
            .iter()
            .any(|x| CHECKS.contains(&x.as_str()) || SHELL_OBJECTS.contains(&x.as_str()));
        return checked.then_some(Work::Shell);
    }
    let verb = match raw.strip_suffix("ing") {
        Some(stem) => verb_of_stem(stem, &known)?,
        None if known(raw) => raw.to_string(),
        None => return None,
    };
    let after = &ws[v + 1..ws.len().min(v + 9)];
    let next = after.first().map_or("", String::as_str);
    // "look for" searches; "take a look at" is caught as "look" after its fillers.
    if verb == "look" && matches!(next, "for" | "up") {
        return Some(Work::Search);
    }
    if verb == "look" && !matches!(next, "at" | "into" | "through" | "over" | "closer") {
        return None;
    }
    // "check with the team", "confirm with you": asking someone, not reading.
    if READ_VERBS.contains(&verb.as_str()) && next == "with" {
        return None;
    }
    // "… by running the tests", "… by listing hidden files": how, after "by".
    let how = after
        .windows(2)
        .find(|p| p[0] == "by")
        .and_then(|p| p[1].strip_suffix("ing").map(str::to_string))
        .and_then(|stem| verb_of_stem(&stem, &|x| SHELL_VERBS.contains(&x) || x == "list"));
    if how.is_some() {
        return Some(Work::Shell);
    }
    // "check the training framework test:", "look at the test to understand …": one test
    // read as code (not "check the tests", "check the test output").
    let one_test = after
        .iter()
        .take(5)
        .position(|x| x == "test")
        .is_some_and(|k| {
            after
                .first()
                .is_some_and(|d| matches!(d.as_str(), "the" | "this" | "that"))
                && after
                    .get(k + 1)
                    .is_none_or(|n| matches!(n.as_str(), "to" | "file" | "case"))
        });
    if one_test && READ_VERBS.contains(&verb.as_str()) {
        return Some(Work::Read);
    }
    let system = after.iter().take(8).any(|x| {
        SYSTEM_OBJECTS.contains(&x.as_str())
            || SHELL_OBJECTS.contains(&x.as_str())
            || CHECKS.contains(&x.as_str())
    });
    let v = verb.as_str();
    // "check the repository structure": what is in it, as a listing shows.
    let layout = after
        .iter()
        .take(4)
        .any(|x| matches!(x.as_str(), "structure" | "layout" | "tree"));
    // "check the contents of this directory", "look at what's in the workspace": a
    // place looked into before any file of it is named.
    let place = after
        .iter()
        .take(6)
        .position(|x| PLACES.contains(&x.as_str()));
    let file_named = after
        .iter()
        .take(6)
        .position(|x| FILE_THINGS.contains(&x.as_str()) || x.contains('.'));
    let into_place = place.is_some_and(|p| file_named.is_none_or(|f| p < f));
    if (layout || into_place) && READ_VERBS.contains(&v) {
        return Some(Work::List);
    }
    if NAVIGATE_VERBS.contains(&v) {
        return Some(Work::Shell);
    }
    let searched = after.iter().any(|x| SEARCHED.contains(&x.as_str()));
    // "remove the min clamp" edits code; "remove the build directory" is the shell's.
    // "rename the function" edits code; "rename the file" is the shell's.
    if v == "rename" {
        // (The words come split at dots and slashes: `utils.py` is "utils", "py".)
        let on_files = after.iter().take(6).any(|x| {
            FILE_OBJECTS.contains(&x.as_str())
                || matches!(
                    x.as_str(),
                    "py" | "js"
                        | "ts"
                        | "rs"
                        | "go"
                        | "md"
                        | "json"
                        | "yaml"
                        | "yml"
                        | "toml"
                        | "txt"
                        | "sh"
                        | "src"
                        | "java"
                        | "kt"
                        | "rb"
                        | "cs"
                        | "tsx"
                        | "jsx"
                )
        });
        return Some(if on_files { Work::Shell } else { Work::Edit });
    }
    // ("clean up the test files" removes them; "clean up the code" edits it.)
    if matches!(v, "remove" | "delete" | "clean") {
        let on_files = after
            .iter()
            .take(5)
            .any(|x| FILE_OBJECTS.contains(&x.as_str()) || x.contains('/'));
        return Some(if on_files { Work::Shell } else { Work::Edit });
    }
    if SHELL_VERBS.contains(&v) {
        return Some(Work::Shell);
    }
    // "find all usages", "check that no references remain": a search of the code.
    if searched && (READ_VERBS.contains(&v) || SEARCH_VERBS.contains(&v)) {
        return Some(Work::Search);
    }
    // "find them", "find the schemas file": files by name; "find New York City's
    // population": a search.
    if v == "find" {
        let files = after.iter().take(6).any(|x| {
            FILE_THINGS.contains(&x.as_str())
                || FILE_OBJECTS.contains(&x.as_str())
                || matches!(x.as_str(), "them" | "it" | "where")
                || x.contains('.')
        });
        return Some(if files { Work::Find } else { Work::Search });
    }
    if system && (READ_VERBS.contains(&v) || SEARCH_VERBS.contains(&v) || LIST_VERBS.contains(&v)) {
        return Some(Work::Shell);
    }
    if READ_VERBS.contains(&v) {
        return Some(Work::Read);
    }
    if SEARCH_VERBS.contains(&v) {
        return Some(Work::Search);
    }
    // "explore the key files" reads them; "explore the project" lists it.
    if v == "explore"
        && after
            .iter()
            .take(4)
            .any(|x| READ_THINGS.contains(&x.as_str()))
    {
        return Some(Work::Read);
    }
    if LIST_VERBS.contains(&v) {
        return Some(Work::List);
    }
    if EDIT_VERBS.contains(&v) {
        return Some(Work::Edit);
    }
    let made_file = after
        .iter()
        .take(6)
        .any(|x| FILE_THINGS.contains(&x.as_str()) || (x.contains('.') && !x.ends_with('.')));
    (WRITE_VERBS.contains(&v) && made_file).then_some(Work::Write)
}

/// Chinese names of what an agent's own tools manage (OpenClaw's `gateway`, `memory_*`,
/// `browser`, `cron`, `message`, `nodes`): a step on that thing is that tool's.
const CJK_TOOL_NOUNS: &[(&str, &str)] = &[
    ("网关", "gateway"),
    ("记忆", "memory"),
    ("浏览器", "browser"),
    ("定时任务", "cron"),
];

/// A plan or task list made: "create a structured plan", "set up a todo list".
static PLAN_MADE: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?i)\b(?:create|make|draft|set\s+up|write\s+up|lay\s+out|put\s+together)\s+(?:a|an|the|my)?\s*(?:[\w-]+\s+)?(?:plan|todo\s+list|to-do\s+list|task\s+list|checklist)\b",
    )
});

/// "This is a large task. Let me create a structured plan and begin exploring the
/// codebase.": a plan made now, in the text's last sentence, is the one offered todo
/// tool's (`todowrite`, `update_todo_list`, `TodoWrite`).
pub(super) fn plan_step(
    text: &str,
    cfg: &ParserConfig,
    tools: &[ToolSpec],
    out: &mut StrategyOutput,
) {
    let todo = tools
        .iter()
        .filter(|t| name_words(&t.name).iter().any(|w| w.starts_with("todo")));
    let Some(tool) = crate::sole(todo) else {
        return;
    };
    let trimmed = text.trim_end();
    let start = trimmed
        .trim_end_matches(['.', '!', ':'])
        .rfind(['.', '!', '?', '\n'])
        .map_or(0, |i| i + 1);
    let sentence = &trimmed[start..];
    let Some(m) = PLAN_MADE.find(sentence) else {
        return;
    };
    let lead = sentence[..m.start()]
        .trim()
        .to_ascii_lowercase()
        .replace('\u{2019}', "'");
    let committed = [
        "let me",
        "i'll",
        "i will",
        "let's",
        "i'm going to",
        "i am going to",
    ]
    .iter()
    .any(|l| lead.ends_with(l) && lead.len() <= l.len() + 12);
    if committed && committed_sentence(text, start + m.start()) {
        push_step(
            out,
            tool,
            serde_json::Map::new(),
            start + m.start()..trimmed.len(),
            tools,
            cfg,
        );
    }
}

/// Checks that programs make (linters, type checkers, test runners).
const CHECKS: &[&str] = &[
    "lint",
    "linting",
    "typecheck",
    "type-check",
    "clippy",
    "mypy",
    "eslint",
    // ("by doing a quick syntax check": `python -m py_compile`, `node --check`.)
    "syntax",
];

/// Chinese leads that commit the model to its next step, and the work of each verb.
const CJK_LEADS: &[&str] = &[
    "让我",
    "我先",
    "我现在",
    "我来",
    "我会先",
    "我会",
    "我将",
    "下一步会先",
    "下一步",
    "我准备",
    "我直接",
    "接下来",
    "我再",
    "我去",
    "我要",
    "首先",
];
const CJK_WORK: &[(&str, Work)] = &[
    ("读取", Work::Read),
    ("查看", Work::Read),
    ("检查", Work::Read),
    ("确认", Work::Read),
    ("验证", Work::Read),
    ("確認", Work::Read),
    ("阅读", Work::Read),
    ("看", Work::Read),
    ("搜索", Work::Search),
    ("检索", Work::Search),
    ("查找", Work::Search),
    ("列出", Work::List),
    ("修改", Work::Edit),
    ("编辑", Work::Edit),
    ("改", Work::Edit),
    ("新增", Work::Edit),
    ("添加", Work::Edit),
    ("更新", Work::Edit),
    ("修复", Work::Edit),
    ("补上", Work::Edit),
    ("写入", Work::Write),
    ("创建", Work::Write),
    ("运行", Work::Shell),
    ("执行", Work::Shell),
    ("安装", Work::Shell),
    ("提权", Work::Shell),
    ("测试", Work::Shell),
    ("启动", Work::Shell),
    ("构建", Work::Shell),
    ("编译", Work::Shell),
];

/// Chinese places whose contents a listing shows (directory, folder, workspace).
const CJK_PLACES: &[&str] = &[
    "文件结构",
    "目录结构",
    "目录",
    "文件夹",
    "工作空间",
    "工作区",
];

/// The work a Chinese sentence commits to: its lead's first verb. Past or negated
/// steps ("已经", "不") after the lead are none.
fn cjk_work(sentence: &str) -> Option<Work> {
    let lead = CJK_LEADS
        .iter()
        .filter_map(|l| sentence.find(l).map(|i| (i, i + l.len())))
        .min()?;
    let rest = &sentence[lead.1..];
    // ("首先添加依赖：" is a step; "首先，使用OCR工具之前要确认图片清晰" is advice on what to
    // do first.)
    if sentence[lead.0..].starts_with("首先")
        && (rest.starts_with(['，', ',']) || rest.contains("之前") || rest.contains('要'))
    {
        return None;
    }
    // The step's own clause: what follows a comma may be its purpose ("，这样我可以直接
    // 告诉你该改哪一段"); "有没有" / "是否" ask whether, they negate nothing.
    let clause = &rest[..rest.find(['，', ',', '；']).unwrap_or(rest.len())];
    let clause = clause
        .replace("有没有", "")
        .replace("是不是", "")
        .replace("要不要", "");
    // (The reader is told, not asked: "告诉你", "给你".)
    // ("让我帮你验证一下": done for the reader, by the model.)
    let to_reader = rest
        .replace("告诉你", "")
        .replace("给你", "")
        .replace("为你", "")
        .replace("帮你", "");
    // (Nor a condition, "如果需要，我会…", "需要的话我会…", nor one avoided, "我会避免…",
    // nor "I can" taken back, "我会编译 Rust 程序，但这里不需要".)
    if ["不", "没", "无需", "别", "无法", "已经", "避免"]
        .iter()
        .any(|n| clause.contains(n))
        || super::cjk_conditional(&sentence[..lead.0])
        || rest.contains("不需要")
        || to_reader.contains('你')
        || sentence[..lead.0].contains(['你', '您', '请'])
        || rest.trim_end_matches(['。', '！']).ends_with(['呢', '吗'])
    {
        return None;
    }
    let (at, work) = CJK_WORK
        .iter()
        .filter_map(|(w, work)| rest.find(w).map(|i| (i, *work)))
        // ("改用 Docker 构建": "switch to", the verb after it is the work; "构建失败的原因":
        // a build that failed, a noun.)
        .filter(|(i, _)| {
            let at = &rest[*i..];
            !at.starts_with("改用")
                && !["构建", "编译"].iter().any(|v| {
                    at.strip_prefix(v).is_some_and(|r| {
                        ["失败", "错误", "问题", "日志", "结果", "产物"]
                            .iter()
                            .any(|n| r.starts_with(n))
                    })
                })
        })
        .min_by_key(|(i, _)| *i)?;
    // "查看一下这个目录的内容": a place looked into is listed; "检查一下是否有基类定义了
    // 同名方法": whether something is anywhere, a search.
    let work = match work {
        Work::Read if CJK_PLACES.iter().any(|p| rest[at..].contains(p)) => Work::List,
        // "验证一下数据库状态", "检查进程": the system's state, which a shell shows.
        // (Not a file about them: "数据库迁移文件 migrations/001_init.sql", "config.yaml
        // 里的端口设置".)
        Work::Read
            if ["数据库", "进程", "端口", "容器", "服务状态"]
                .iter()
                .any(|p| rest[at..].contains(p))
                && !rest[at..].contains("文件")
                && !rest[at..].contains(['.', '/', '「', '`']) =>
        {
            Work::Shell
        }
        // "检查所有"模拟"的功能": everywhere, a search.
        Work::Read if rest[at..].contains("所有") && !rest[at..].contains("文件") => {
            Work::Search
        }
        // (Whether a file is there is found by name.)
        Work::Read
            if ["是否有", "有没有", "哪些地方", "哪里"]
                .iter()
                .any(|p| rest[at..].contains(p)) =>
        {
            if rest[at..].contains("文件") || rest[at..].contains('.') {
                Work::Find
            } else {
                Work::Search
            }
        }
        w => w,
    };
    // "让我总结一下修改内容": the model's own words about the work, not the work; "看起来"
    // is how a thing looks.
    let told = ["总结", "解释", "说明", "介绍", "汇报", "概括", "回答"]
        .iter()
        .any(|t| rest[..at].contains(t));
    // ("我将立即开始执行。": running, of nothing named, is going ahead.)
    let bare = work == Work::Shell
        && ["执行", "运行"].iter().any(|v| {
            rest[at..].strip_prefix(v).is_some_and(|r| {
                r.trim_start_matches(['*', ' '])
                    .chars()
                    .next()
                    .is_none_or(|c| "。！!.，,".contains(c))
            })
        });
    (!told && !bare && !rest[at..].starts_with("看起来")).then_some(work)
}

/// A Chinese status line that opens with its verb ("读取第390-420行。", "编辑。"): the
/// step the model takes now, as an English "Reading lines 390–420." is.
fn cjk_status(sentence: &str) -> Option<Work> {
    let s = ["首先，", "首先", "先", "然后", "现在", "接下来", "再"]
        .iter()
        .find_map(|p| sentence.strip_prefix(p))
        .unwrap_or(sentence);
    // (Not done already, "安装任务已经完成。", nor asked of the reader, "运行游戏后，请提供…",
    // nor a label or a statement: "搜索结果：", "读取速度很慢。", "添加成功。".)
    if !s.ends_with('。')
        || s.chars().count() > 40
        || [
            "你",
            "您",
            "请",
            "已经",
            "已完成",
            "完成",
            "好了",
            "了",
            "过",
            "失败",
            "成功",
            "是",
            "很",
            "吗",
        ]
        .iter()
        .any(|w| s.contains(w))
    {
        return None;
    }
    let (verb, work) = CJK_WORK
        .iter()
        .find(|(w, _)| s.starts_with(w) && !s.starts_with("看起来"))?;
    // (A noun made of the verb, "修改记录", "运行环境", "编辑距离", "读取速度", is no step.)
    let after = &s[verb.len()..];
    let nominal = [
        "的", "后", "时", "结果", "记录", "环境", "错误", "距离", "速度", "方式", "功能", "过程",
        "日志", "器",
    ]
    .iter()
    .any(|n| after.starts_with(n));
    (!nominal).then_some(*work)
}

/// Hiragana or katakana: the sentence is Japanese.
fn kana(c: char) -> bool {
    ('\u{3040}'..='\u{30ff}').contains(&c)
}

/// Japanese verbal nouns and the work each asks for.
const JA_WORK: &[(&str, Work)] = &[
    ("修正", Work::Edit),
    ("変更", Work::Edit),
    ("追加", Work::Edit),
    ("更新", Work::Edit),
    ("強化", Work::Edit),
    ("改善", Work::Edit),
    ("実装", Work::Edit),
    ("編集", Work::Edit),
    ("書き換え", Work::Edit),
    ("作成", Work::Write),
    ("書き込", Work::Write),
    ("実行", Work::Shell),
    ("テスト", Work::Shell),
    ("インストール", Work::Shell),
    ("ビルド", Work::Shell),
    ("確認", Work::Read),
    ("読み", Work::Read),
    ("検索", Work::Search),
    ("一覧", Work::List),
];

/// A Japanese step on a condition the reader settles: "進める場合、Phase 0〜5を順番に実行し
/// ます。", "必要ならテストを実行します" (not an obligation, "しなければなりません").
/// Chinese conditions are `cjk_work`'s.
fn japanese_condition(s: &str) -> bool {
    let obliged = ["なければ", "ならない", "なりません"]
        .iter()
        .any(|c| s.contains(c));
    s.chars().any(kana)
        && (["場合、", "場合は", "場合に"].iter().any(|c| s.contains(c))
            || (!obliged && ["たら", "なら", "れば"].iter().any(|c| s.contains(c))))
}

/// "テストします：", "まず翻訳関数を修正して、…抽出するようにします：": a sentence that
/// ends in します / しましょう commits the model; its first verbal noun says the work.
fn japanese_work(sentence: &str) -> Option<Work> {
    if !sentence.chars().any(kana) {
        return None;
    }
    let body = sentence.trim_end_matches(['。', '：', ':', '！', '!', ' ', '…']);
    // "まずはブランチを切りましょう": a branch cut is git's.
    if ["ブランチを切り", "ブランチを作成"]
        .iter()
        .any(|b| body.contains(b))
        && ["ましょう", "ます"].iter().any(|e| body.ends_with(e))
        && !["あなた", "もし", "なら", "後で", "たら"]
            .iter()
            .any(|w| body.contains(w))
    {
        return Some(Work::Shell);
    }
    let commits = ["します", "しましょう", "していきます", "してみます"]
        .iter()
        .any(|e| body.ends_with(e));
    // (Not done, not asked: しません, しました, しますか.)
    if !commits || body.ends_with("ません") {
        return None;
    }
    // The work is a verbal noun the model does ("修正して", "テストします"), not one it
    // names ("変更点を説明します", "ご確認をお願いします").
    JA_WORK
        .iter()
        .filter_map(|(w, work)| {
            body.match_indices(w)
                .find(|(i, _)| {
                    let after = &body[i + w.len()..];
                    // (A verb's stem goes on as the verb: "読み込んで", "読みます".)
                    [
                        "します",
                        "しましょう",
                        "して",
                        "する",
                        "込んで",
                        "込みます",
                        "ます",
                    ]
                    .iter()
                    .any(|e| after.starts_with(e))
                })
                .map(|(i, _)| (i, *work))
        })
        .min_by_key(|(i, _)| *i)
        .map(|(_, w)| w)
}

/// Portuguese and Spanish leads ("Vou verificar …", "Agora vou executar …", "Voy a
/// revisar …") and status lines ("Buscando referencias …", "Executando teste …").
const ROMANCE_OPENERS: &[&str] = &[
    "agora", "ahora", "primeiro", "primero", "depois", "después", "luego", "então", "entonces",
    "perfeito", "perfecto", "ok", "bem", "bien", "bom", "ótimo", "genial",
];
const ROMANCE_LEADS: &[&[&str]] = &[
    &["vou"],
    &["voy", "a"],
    &["vamos", "a"],
    &["vamos"],
    &["preciso"],
    &["necesito"],
    &["irei"],
    &["devo"],
    &["debo"],
];
/// Stems of the verbs of each kind of work, in both languages.
const ROMANCE_STEMS: &[(&str, Work)] = &[
    ("verific", Work::Read),
    ("checa", Work::Read),
    ("revis", Work::Read),
    ("analis", Work::Read),
    ("analiz", Work::Read),
    ("examin", Work::Read),
    ("inspec", Work::Read),
    ("comprob", Work::Read),
    ("ler", Work::Read),
    ("lend", Work::Read),
    ("leer", Work::Read),
    ("leyend", Work::Read),
    ("olha", Work::Read),
    ("busca", Work::Search),
    ("procura", Work::Search),
    ("pesquis", Work::Search),
    ("explora", Work::List),
    ("lista", Work::List),
    ("mejor", Work::Edit),
    ("melhor", Work::Edit),
    ("atualiz", Work::Edit),
    ("actualiz", Work::Edit),
    ("corrig", Work::Edit),
    ("modific", Work::Edit),
    ("edita", Work::Edit),
    ("altera", Work::Edit),
    ("ajusta", Work::Edit),
    ("adiciona", Work::Edit),
    ("agrega", Work::Edit),
    ("añad", Work::Edit),
    ("descomenta", Work::Edit),
    ("remov", Work::Edit),
    ("implementa", Work::Edit),
    ("refatora", Work::Edit),
    ("cria", Work::Write),
    ("crea", Work::Write),
    ("escrev", Work::Write),
    ("escrib", Work::Write),
    ("execut", Work::Shell),
    ("ejecut", Work::Shell),
    ("roda", Work::Shell),
    ("instala", Work::Shell),
    ("compila", Work::Shell),
    ("testa", Work::Shell),
    ("reinicia", Work::Shell),
];

fn romance_work(sentence: &str) -> Option<Work> {
    let ws = tokens(sentence);
    let i = ws
        .iter()
        .take_while(|w| ROMANCE_OPENERS.contains(&w.as_str()))
        .count();
    let lead = ROMANCE_LEADS
        .iter()
        .find(|l| ws.len() > i + l.len() && l.iter().enumerate().all(|(j, w)| ws[i + j] == *w));
    // "Ejecuto build y push:", "Ahora hago commit y push:": the first person present,
    // a line that ends on its colon.
    // (Not a question, "¿Hago commit y push?:", nor a condition, "… si quieres:".)
    if sentence.contains(['¿', '?']) || ws.iter().any(|w| w == "si") {
        return None;
    }
    if lead.is_none() && sentence.trim_end().ends_with(':') {
        let v = ws.get(i)?;
        let object = ws.get(i + 1).map_or("", String::as_str);
        if matches!(
            v.as_str(),
            "hago" | "faço" | "ejecuto" | "executo" | "corro" | "rodo"
        ) && (v.starts_with("ejecut")
            || v.starts_with("execut")
            || matches!(object, "commit" | "push" | "build" | "deploy" | "merge"))
        {
            return Some(Work::Shell);
        }
    }
    let verb = match lead {
        // ("Vamos a empezar por mejorar …": the work it starts with.)
        Some(l) => match ws.get(i + l.len())?.as_str() {
            "empezar" | "comenzar" | "começar" | "iniciar"
                if ws
                    .get(i + l.len() + 1)
                    .is_some_and(|p| matches!(p.as_str(), "por" | "pelo" | "pela")) =>
            {
                ws.get(i + l.len() + 2)?
            }
            _ => ws.get(i + l.len())?,
        },
        // A status line opens with its gerund.
        None => {
            let g = ws.get(i)?;
            let gerund = ["ando", "endo", "indo"].iter().any(|e| g.ends_with(e));
            if !gerund || !sentence.starts_with(char::is_uppercase) || ws.len() < 3 {
                return None;
            }
            g
        }
    };
    let work = ROMANCE_STEMS
        .iter()
        .find(|(stem, _)| verb.starts_with(stem))
        .map(|(_, w)| *w)?;
    // "Voy a verificar el estado actual del repositorio": a look at the repository's or
    // the system's state is the shell's (`git status`), not a file's.
    let system = ws.iter().any(|w| {
        matches!(
            w.as_str(),
            "estado"
                | "repositorio"
                | "rama"
                | "procesos"
                | "logs"
                | "puerto"
                | "versión"
                | "status"
                | "branch"
                | "ramo"
                | "processos"
        )
    });
    // (Not a file read by name, "Voy a leer el archivo de estado status.json".)
    let names_file = ws.iter().any(|w| {
        matches!(
            w.as_str(),
            "leer" | "ler" | "archivo" | "arquivo" | "fichero"
        )
    }) || sentence.split_whitespace().any(|w| {
        super::path_like(w.trim_matches(|c: char| !c.is_alphanumeric() && c != '.' && c != '/'))
    });
    Some(if work == Work::Read && system && !names_file {
        Work::Shell
    } else {
        work
    })
}

/// Russian leads ("Нужно прочитать файл test.txt", "Сейчас я проверю …") and the stems
/// of each kind of work.
const RU_LEADS: &[&str] = &[
    "нужно",
    "надо",
    "давайте",
    "сейчас",
    "теперь",
    "сначала",
    "я",
];
const RU_STEMS: &[(&str, Work)] = &[
    ("прочит", Work::Read),
    ("прочт", Work::Read),
    ("перечит", Work::Read),
    ("изуч", Work::Read),
    ("посмотр", Work::Read),
    ("провер", Work::Read),
    ("найд", Work::Search),
    ("поищ", Work::Search),
    ("созда", Work::Write),
    ("запиш", Work::Write),
    ("напиш", Work::Write),
    ("выполн", Work::Shell),
    ("запуст", Work::Shell),
    ("запущ", Work::Shell),
    ("исправ", Work::Edit),
    ("измен", Work::Edit),
    ("обнов", Work::Edit),
    ("добав", Work::Edit),
];

/// "Начну с чтения …", "Давайте начнём с создания …": the work named by the noun the
/// step begins with.
const RU_NOUN_STEMS: &[(&str, Work)] = &[
    ("чтени", Work::Read),
    ("прочтени", Work::Read),
    ("изучени", Work::Read),
    ("создани", Work::Write),
    ("поиск", Work::Search),
    ("запуск", Work::Shell),
    ("исправлени", Work::Edit),
    ("изменени", Work::Edit),
    ("обновлени", Work::Edit),
];

fn russian_work(sentence: &str) -> Option<Work> {
    // (Every lead, stem and ending below is Cyrillic: other sentences cost no tokens.)
    if !sentence
        .chars()
        .any(|c| ('\u{0400}'..='\u{04ff}').contains(&c))
    {
        return None;
    }
    let ws = tokens(sentence);
    // (Not a step: "не нужно", "я уже …"; nor the reader's: "вам нужно"; nor one put
    // off or on a condition; nor advice, "можно запустить".)
    if ru_not_now(sentence, &ws) {
        return None;
    }
    // ("Создам файл …", "Прочитаю api.js:": the first person opens the sentence.)
    let verb = match ws
        .iter()
        .take(3)
        .position(|w| RU_LEADS.contains(&w.as_str()))
    {
        Some(lead) => ws[lead + 1..]
            .iter()
            .position(|w| !RU_LEADS.contains(&w.as_str()) && w.as_str() != "мне")
            .map(|i| lead + 1 + i)?,
        None if first_person_ru(ws.first()?) => 0,
        None => return None,
    };
    let word = ws[verb].as_str();
    if word.starts_with("начн") && ws.get(verb + 1).is_some_and(|w| w == "с") {
        let noun = ws.get(verb + 2)?;
        return RU_NOUN_STEMS
            .iter()
            .find(|(stem, _)| noun.starts_with(stem))
            .map(|(_, w)| *w);
    }
    // An infinitive or the first person ("прочитать", "проверю", "найду"), not a past
    // ("прочитал"), a noun ("проверка", "исправление") or a request ("запустите").
    if !(["ть", "ться", "ти"].iter().any(|e| word.ends_with(e)) || first_person_ru(word)) {
        return None;
    }
    RU_STEMS
        .iter()
        .find(|(stem, _)| word.starts_with(stem))
        .map(|(_, w)| *w)
}

/// A Russian verb in the first person singular or plural future ("проверю", "найду",
/// "создам", "спросим"), not a noun ("проверку", "созданием", "функцию") nor a
/// participle ("исправленную").
fn first_person_ru(w: &str) -> bool {
    let noun_like = ["ию", "ую", "юю", "ку", "ием"]
        .iter()
        .any(|e| w.ends_with(e));
    !noun_like
        && (w.ends_with('ю')
            || w.ends_with('у')
            || w.ends_with("дам")
            || (w.ends_with("им") || w.ends_with("ем") || w.ends_with("ём"))
                && w.chars().count() > 4)
}

/// A Russian sentence that takes no step now: negated or already done ("не", "уже"),
/// the reader's ("вам", "вашего"), on a condition or put off ("если", "когда", "после",
/// "как только", "на следующем этапе", "в конце"), or advice ("можно", "стоит").
fn ru_not_now(sentence: &str, ws: &[String]) -> bool {
    // (The step's own clause: "…, чтобы можно было импортировать" is its purpose.)
    let own = ws
        .iter()
        .position(|w| w == "чтобы")
        .map_or(ws, |i| &ws[..i]);
    own.iter().any(|w| {
        matches!(
            w.as_str(),
            "не" | "уже"
                | "вам"
                | "вы"
                | "вас"
                | "тебе"
                | "ты"
                | "если"
                | "когда"
                | "позже"
                | "потом"
                | "после"
                | "можно"
                | "стоит"
                | "следует"
        ) || w.starts_with("ваш")
            || w.starts_with("следующ")
    }) || {
        let lower = sentence.to_lowercase();
        ["как только", "в конце", "в будущем"]
            .iter()
            .any(|p| lower.contains(p))
    }
}

/// German leads that commit the model ("Lass mich die Datei lesen", "Ich muss zuerst
/// die Verzeichnisstruktur auflisten"), its verb the clause's last infinitive, and the
/// stems of each kind of work.
const DE_LEADS: &[&[&str]] = &[
    &["lass", "mich"],
    &["lasst", "uns"],
    &["lassen", "sie", "mich"],
    &["lassen", "sie", "uns"],
    &["ich", "werde"],
    &["ich", "muss"],
    &["ich", "sollte"],
    &["ich", "möchte"],
    &["wir", "müssen"],
    &["wir", "werden"],
];
const DE_STEMS: &[(&str, Work)] = &[
    ("lesen", Work::Read),
    ("anschau", Work::Read),
    ("ansehen", Work::Read),
    ("prüf", Work::Read),
    ("überprüf", Work::Read),
    ("untersuch", Work::Read),
    ("analysier", Work::Read),
    ("betracht", Work::Read),
    ("öffnen", Work::Read),
    ("suchen", Work::Search),
    ("durchsuch", Work::Search),
    ("auflist", Work::List),
    ("erstell", Work::Write),
    ("schreib", Work::Write),
    ("anleg", Work::Write),
    ("änder", Work::Edit),
    ("anpass", Work::Edit),
    ("aktualisier", Work::Edit),
    ("bearbeit", Work::Edit),
    ("korrigier", Work::Edit),
    ("beheb", Work::Edit),
    ("hinzufüg", Work::Edit),
    ("entfern", Work::Edit),
    ("ergänz", Work::Edit),
    ("ausführ", Work::Shell),
    ("start", Work::Shell),
    ("test", Work::Shell),
    ("installier", Work::Shell),
    ("kompilier", Work::Shell),
];

/// Turkish verb stems and the work each asks for.
const TR_STEMS: &[(&str, Work)] = &[
    ("görüntüle", Work::List),
    ("listele", Work::List),
    ("incele", Work::Read),
    ("oku", Work::Read),
    ("kontrol ed", Work::Read),
    ("ara", Work::Search),
    ("çalıştır", Work::Shell),
    ("düzenle", Work::Edit),
    ("güncelle", Work::Edit),
    ("düzelt", Work::Edit),
    ("oluştur", Work::Write),
    ("yaz", Work::Write),
];

/// "Şimdi mevcut klasör yapısını görüntüleyip durumu analiz edeceğim…": the first verb of a
/// sentence whose last verb is a first-person future (-eceğim / -acağım), or that verb.
fn turkish_work(sentence: &str) -> Option<Work> {
    let lower = sentence.to_lowercase();
    let ws: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let future = ws
        .iter()
        .rposition(|w| w.ends_with("eceğim") || w.ends_with("acağım"))?;
    // (A condition, a negation or the reader: "-mayacağım", "eğer", "sen".)
    if ws.iter().any(|w| {
        matches!(*w, "eğer" | "sonra" | "belki" | "sen" | "siz")
            || w.ends_with("sa")
            || w.ends_with("se")
    }) || ws[future].contains("mayacağım")
        || ws[future].contains("meyeceğim")
    {
        return None;
    }
    // The verbs: the future itself and the converbs joined to it ("görüntüleyip").
    let verb = |w: &str| {
        w.ends_with("eceğim")
            || w.ends_with("acağım")
            || ["ip", "ıp", "up", "üp", "arak", "erek"]
                .iter()
                .any(|e| w.ends_with(e))
    };
    // (A stem of two words, "kontrol ed", is looked for in the sentence.)
    ws[..=future]
        .iter()
        .filter(|w| verb(w))
        .find_map(|w| {
            TR_STEMS
                .iter()
                .find(|(stem, _)| w.starts_with(stem) && !stem.contains(' '))
                .map(|(_, work)| *work)
        })
        .or_else(|| {
            TR_STEMS
                .iter()
                .find(|(stem, _)| stem.contains(' ') && lower.contains(stem))
                .map(|(_, work)| *work)
        })
}

fn german_work(sentence: &str) -> Option<Work> {
    // (A condition anywhere in the sentence makes it no step now: "…, falls der Test
    // fehlschlägt".)
    if tokens(sentence).iter().any(|w| {
        matches!(
            w.as_str(),
            "falls" | "wenn" | "sobald" | "ob" | "später" | "eventuell" | "vielleicht"
        )
    }) {
        return None;
    }
    let clause = sentence.split([',', ';']).next().unwrap_or(sentence);
    let ws = tokens(clause);
    let (lead, len) = (0..ws.len().min(3)).find_map(|i| {
        DE_LEADS
            .iter()
            .find(|l| {
                ws.len() > i + l.len() - 1 && l.iter().enumerate().all(|(j, w)| ws[i + j] == *w)
            })
            .map(|l| (i, l.len()))
    })?;
    // (Not a step: "nicht", "bereits …"; nor the reader's: "du musst".)
    if ws.iter().any(|w| {
        matches!(
            w.as_str(),
            "nicht"
                | "nichts"
                | "nie"
                | "niemals"
                | "kein"
                | "keine"
                | "keinen"
                | "bereits"
                | "schon"
                | "du"
                | "ihr"
        )
    }) {
        return None;
    }
    let verb = ws[lead + len..]
        .last()
        .filter(|v| v.ends_with("en") || v.ends_with("ern"))?;
    DE_STEMS
        .iter()
        .find(|(stem, _)| verb.starts_with(stem))
        .map(|(_, w)| *w)
}

/// The tool offered for a kind of work, falling back to the one that can do it too
/// (a shell reads, searches and lists; a patch tool writes new files).
fn tool_for<'a>(work: Work, offered: &[(Work, &'a ToolSpec)]) -> Option<&'a ToolSpec> {
    let sole = |w: Work| crate::sole(offered.iter().filter(|(x, _)| *x == w)).map(|(_, t)| *t);
    let present = |w: Work| offered.iter().any(|(x, _)| *x == w);
    let order: &[Work] = match work {
        Work::Read => &[Work::Read, Work::Shell],
        Work::Search => &[Work::Search, Work::Shell],
        Work::List => &[Work::List, Work::Shell],
        Work::Find => &[Work::List, Work::Search, Work::Shell],
        Work::Edit => &[Work::Edit, Work::Write],
        Work::Write => &[Work::Write, Work::Edit],
        Work::Shell => &[Work::Shell],
    };
    // (OpenCode's `read` reads "a file or directory": a directory is looked into with
    // it, not by a glob.)
    if work == Work::List {
        let reads_dirs = offered.iter().filter(|(w, t)| {
            *w == Work::Read && {
                let d = t.description.to_ascii_lowercase();
                d.contains("or directory")
                    || d.contains("or a directory")
                    || d.contains("or folder")
            }
        });
        if let Some((_, t)) = crate::sole(reads_dirs) {
            return Some(*t);
        }
    }
    // The first kind offered decides; two tools of that kind leave it open.
    let kind = order.iter().copied().find(|w| present(*w))?;
    sole(kind)
}

/// The first backticked span in `win` that starts with a known program.
fn program_line(
    text: &str,
    prot: &[super::Protected],
    win: std::ops::Range<usize>,
) -> Option<String> {
    prot.iter()
        .filter(|p| p.kind == super::Quote::Backtick && win.contains(&p.range.start))
        .map(|p| text[p.inner.clone()].trim())
        .find(|inner| {
            inner
                .split_whitespace()
                .next()
                .is_some_and(|w| super::KNOWN_BINS.contains(&w))
        })
        .map(str::to_string)
}

/// The last path named in `win`.
pub(in crate::fuzzy) fn last_path(
    text: &str,
    prot: &[super::Protected],
    win: std::ops::Range<usize>,
) -> Option<String> {
    paths_in(text, prot, win).pop()
}

/// Every path named in `win`, in order.
pub(in crate::fuzzy) fn paths_in(
    text: &str,
    prot: &[super::Protected],
    win: std::ops::Range<usize>,
) -> Vec<String> {
    let mut from = win.start;
    let mut found = Vec::new();
    while let Some(f) = super::path_in(text, prot, from..win.end) {
        if f.range.end <= from {
            break;
        }
        from = f.range.end;
        found.push(f.value);
    }
    found
}

/// The step the paragraph's last sentence states, where it starts, and the work it asks
/// for.
fn last_step(paragraph: &str, alone: bool, own_note: bool) -> Option<(usize, Work)> {
    let body = paragraph.trim_end();
    let cut = body
        .trim_end_matches(['.', '!', '。', '！', ':', '：', '\u{2026}', '*'])
        .char_indices()
        .rev()
        .find(|&(i, c)| {
            matches!(c, '。' | '！' | '？' | '\n')
                || (matches!(c, '.' | '!' | '?') && body[i + 1..].starts_with(char::is_whitespace))
        })
        .map_or(0, |(i, c)| i + c.len_utf8());
    let s = &body[cut..];
    let s_trim = s.trim().trim_matches('*').trim();
    if s_trim.is_empty() || s_trim.ends_with(['?', '？']) {
        return None;
    }
    // "Let me create test files for them. I'll start with a few key ones:": the step is
    // the sentence before, the last one says where it begins.
    let lower = s_trim.to_lowercase().replace('\u{2019}', "'");
    let where_begun = ["i'll ", "i will ", "let me ", "let's ", "we'll "]
        .iter()
        .find_map(|p| lower.strip_prefix(p))
        .is_some_and(|r| r.starts_with("start with ") || r.starts_with("begin with "))
        // ("Теперь создам конфигурацию. Начну с base.py settings.")
        || (["начну с ", "начнём с ", "начнем с ", "давайте начнём с ", "давайте начнем с "]
            .iter()
            .any(|p| lower.starts_with(p))
            && russian_work(s_trim).is_none());
    if where_begun && cut > 0 && !body[..cut].ends_with('\n') {
        return last_step(&body[..cut], false, own_note);
    }
    // A quoted or reported sentence ("The agent wrote:\nLet me …") is someone's words.
    let before = body[..cut].trim_end();
    let reported = before.ends_with(':')
        && super::words(before.rsplit('\n').next().unwrap_or(before))
            .iter()
            .any(|w| REPORTING.contains(&w.as_str()));
    if s_trim.starts_with(['"', '\u{201C}', '\'', '\u{2018}', '`']) || reported {
        return None;
    }
    // "I'll update the README if you'd like.": the step waits on the reader.
    // (Nor a habit promised: "I'll double-check more carefully from now on.")
    if not_now(&lower) {
        return None;
    }
    let colon = paragraph.trim_end().ends_with([':', '：']);
    let work = if s_trim.chars().any(super::is_cjk) {
        if japanese_condition(s_trim) {
            return None;
        }
        japanese_work(s_trim)
            .or_else(|| cjk_work(s_trim))
            .or_else(|| cjk_status(s_trim))?
    } else if let Some(work) = romance_work(s_trim)
        .or_else(|| russian_work(s_trim))
        .or_else(|| german_work(s_trim))
        .or_else(|| turkish_work(s_trim))
    {
        work
    } else {
        let ws = tokens(s_trim);
        let capital = s_trim.starts_with(char::is_uppercase);
        // (Or the paragraph's last sentence, when the answer ends on it: "The deletions
        // were never staged. Stage them and push:".)
        // (Not after words to the reader: "You never staged them. Stage them and push:".)
        let to_reader = || {
            tokens(body).iter().any(|w| {
                matches!(
                    w.as_str(),
                    "you" | "your" | "yourself" | "you'll" | "you're"
                )
            })
        };
        let alone = alone
            && (super::stops_for_call(body) || (super::stops_for_call(s_trim) && !to_reader()));
        let v = step_verb(&ws, capital, colon, alone, own_note)?;
        if ws[v].ends_with("ing") {
            // ("Looking at the output, the error is …": a clause, not a status line;
            // "Testing" alone is a heading.)
            let lower = s_trim.to_lowercase();
            let clause_follows = [", i ", ", we ", ", it ", ", the ", ", this ", ", there "]
                .iter()
                .any(|p| lower.contains(p));
            if clause_follows
                || ws.len() < 3
                || s_trim.len() > 300
                || ws[v] == "seeing"
                || ws.iter().any(|x| OUTCOMES.contains(&x.as_str()))
            {
                return None;
            }
        }
        work_asked(&ws, v)?
    };
    let lead = s.len() - s.trim_start().len();
    Some((cut + lead, work))
}

/// A coding agent's next step in words: the last paragraph's committed step, mapped to
/// the one offered tool for its kind of work.
/// `own_note`: the text is the model's reasoning, where an imperative is its own step.
pub(super) fn next_step(
    text: &str,
    cfg: &ParserConfig,
    tools: &[ToolSpec],
    out: &mut StrategyOutput,
    own_note: bool,
) {
    // A tool named without a commitment the rules trust ("Next, read.") was judged
    // unsure: asking the model (`intent.confirm`) settles it, not a guess here — except
    // in reasoning, where an imperative with its object ("Now edit line 7: …") is the
    // model's own commitment.
    let with_object = || {
        let last = text
            .trim_end()
            .rsplit(['.', '!', '\n'])
            .find(|s| !s.trim().is_empty());
        last.is_some_and(|s| tokens(s).len() >= 3)
    };
    if !out.unsure.is_empty() && (!own_note || !with_object()) {
        return;
    }
    let offered: Vec<(Work, &ToolSpec)> = tools
        .iter()
        .flat_map(|t| {
            work_of(t)
                .map_or_else(|| operations_of(t), |w| vec![w])
                .into_iter()
                .map(move |w| (w, t))
        })
        .collect();
    let kinds = |w: Work| offered.iter().any(|(x, _)| *x == w);
    let distinct = [
        Work::Read,
        Work::Edit,
        Work::Write,
        Work::Search,
        Work::List,
        Work::Shell,
    ]
    .iter()
    .filter(|w| kinds(**w))
    .count();
    // A workbench: tools for two kinds of work, or a shell that does them all.
    if distinct < 2 && !kinds(Work::Shell) {
        return;
    }
    let trimmed = text.trim_end();
    let para_start = trimmed.rfind("\n\n").map_or(0, |i| i + 2);
    let paragraph = &trimmed[para_start..];
    let first = paragraph.trim_start();
    if first.starts_with(['-', '|', '`', '>']) || first.starts_with(|c: char| c.is_ascii_digit()) {
        return;
    }
    let Some((at, work)) = last_step(paragraph, para_start == 0, own_note) else {
        return;
    };
    let at = para_start + at;
    // (What waits on the user is said in the step's own sentence: "when you input 100 MeV,
    // it normalizes …" before it is an explanation.)
    let from = floor(text, at.saturating_sub(200));
    let from = text[from..at]
        .char_indices()
        .rev()
        .find(|&(i, c)| {
            c == '\n'
                || (matches!(c, '.' | '!' | '?')
                    && text[from + i + 1..].starts_with(char::is_whitespace))
        })
        .map_or(from, |(i, _)| from + i + 1);
    // ("Please add your key to `.env` first. After that, I'll run …": the sentence
    // before says what the step waits on.)
    // ("Once you …" waits on the user by its own words.)
    let from = if super::follows_on(&text[from..at].to_lowercase()) {
        floor(text, from.saturating_sub(200))
    } else {
        from
    };
    let before = text[from..at].to_lowercase();
    if !committed_sentence(text, at) || waits_on_user(&before) {
        return;
    }
    let step = &text[at..trimmed.len()];
    let step_lower = step.to_lowercase();
    // A search of the web is no search of the code ("Let me look up the docs online").
    if work == Work::Search
        && ["web", "online", "internet"]
            .iter()
            .any(|w| super::has_phrase(&step_lower, w))
    {
        return;
    }
    // "Let me add the dependency with `npm install lodash`", "Preciso remover o .env …
    // usando `git rm --cached .env`": a program's command line says the work is the
    // shell's.
    let prot = protected_spans(text);
    let program = program_line(text, &prot, at..trimmed.len());
    // ("I'll fix the `git status` command in the README": the command line is what is
    // edited, not how.)
    let edited_line = prot
        .iter()
        .filter(|p| {
            p.kind == super::Quote::Backtick && (at..trimmed.len()).contains(&p.range.start)
        })
        .find(|p| Some(text[p.inner.clone()].trim()) == program.as_deref())
        .is_some_and(|p| {
            let next = text[p.range.end..].trim_start().to_lowercase();
            [
                "command",
                "line",
                "script",
                "call",
                "invocation",
                "example",
                "snippet",
            ]
            .iter()
            .any(|w| next.starts_with(w))
        });
    let work = match work {
        Work::Edit | Work::Write if program.is_some() && !edited_line => Work::Shell,
        w => w,
    };
    // "Let me check for linting issues", "Let me update the todo": the step names what
    // another offered tool is for (`read_lints`, `todo_write`); that tool takes it.
    // (The words of a quoted command name no tool: "执行`openclaw hooks enable
    // session-memory`" is the shell's, not `session_status`'s.)
    let unquoted: String = {
        let mut out = String::with_capacity(step.len());
        let mut quoted = false;
        for c in step.chars() {
            if c == '`' {
                quoted = !quoted;
                out.push(' ');
            } else if !quoted {
                out.push(c);
            }
        }
        out
    };
    let named_words = tokens(&unquoted);
    let step_words = tokens(step);
    // ("让我检查一下网关状态": the `gateway` tool, by its Chinese name; not a file about
    // it, "网关的路由配置文件 kong.yml".)
    let mut cjk_nouns: Vec<&str> = CJK_TOOL_NOUNS
        .iter()
        .filter(|(zh, _)| step.contains(zh))
        .map(|(_, en)| *en)
        .collect();
    if !cjk_nouns.is_empty()
        && (step.contains("文件")
            || !paths_in(step, &protected_spans(step), 0..step.len()).is_empty())
    {
        cjk_nouns.clear();
    }
    let workbench = |t: &ToolSpec| offered.iter().any(|(_, o)| std::ptr::eq(*o, t));
    let mut named = tools.iter().filter(|t| !workbench(t)).filter(|t| {
        let ws = name_words(&t.name);
        if ws.iter().any(|w| cjk_nouns.contains(&w.as_str())) {
            return true;
        }
        ws.iter()
            // (Its nouns: `delete_file`'s verb is the shell's too.)
            .filter(|w| {
                w.len() >= 4
                    && !GENERIC_NAME_WORDS.contains(&w.as_str())
                    && !super::NAME_VERBS.contains(&w.as_str())
            })
            .any(|w| {
                let stem = w.strip_suffix('s').unwrap_or(w);
                named_words.iter().any(|x| {
                    x.starts_with(stem)
                        // `todowrite`: the noun glued to the verb of the name.
                        || (x.len() >= 4
                            && !GENERIC_NAME_WORDS.contains(&x.as_str())
                            && w.strip_prefix(x.as_str()).is_some_and(|v| {
                                super::NAME_VERBS.contains(&v) || GENERIC_NAME_WORDS.contains(&v)
                            }))
                })
            })
    });
    // "次にブラウザで `http://localhost:8000` にアクセスして…", "Let me check
    // https://example.com/status": a web address is for the one tool that takes one.
    // (Not a shell's work on a remote: "Now clone https://…", "push the branch to https://…".)
    let remote_shell = step_words.iter().any(|w| {
        matches!(
            w.as_str(),
            "clone" | "push" | "pull" | "deploy" | "curl" | "wget" | "git" | "fork" | "upload"
        )
    });
    let url = super::url_in(text, at..trimmed.len()).filter(|_| !remote_shell);
    let opens_url = url.as_ref().and_then(|_| {
        crate::sole(tools.iter().filter(|t| {
            t.primary_property()
                .is_some_and(|p| kind_of(t, p) == Kind::Url)
        }))
    });
    if let (Some(tool), Some(url)) = (opens_url, url) {
        let mut args = crate::bind::bindings(step, tool);
        if let Some(p) = tool.primary_property() {
            args.insert(p.to_string(), Value::String(url.value));
        }
        push_step(out, tool, args, at..trimmed.len(), tools, cfg);
        return;
    }
    let tool = match (named.next(), named.next()) {
        (Some(one), None) => one,
        // "Searching for that now.", with a web search offered and no search of the code:
        // the web's, unless the step names code to look for.
        (None, _) if work == Work::Search && !kinds(Work::Search) && !names_code(step) => {
            match crate::sole(tools.iter().filter(|t| super::searches_web(&t.name)))
                .or_else(|| tool_for(work, &offered))
            {
                Some(t) => t,
                None => return,
            }
        }
        (None, _) => match tool_for(work, &offered) {
            Some(t) => t,
            None => return,
        },
        _ => return,
    };
    let mut args = crate::bind::bindings(step, tool);
    if let Some(primary) = tool.primary_property() {
        let kind = kind_of(tool, primary);
        // "check that no smithery references remain": what a search looks for.
        if work == Work::Search && matches!(kind, Kind::Pattern | Kind::Query) {
            if let Some(p) = SEARCHED_NAME
                .captures(step)
                .and_then(|c| c.get(1).or_else(|| c.get(2)))
            {
                args.entry(primary.to_string())
                    .or_insert_with(|| Value::String(p.as_str().to_string()));
            }
        }
        if !args.contains_key(primary) && matches!(kind, Kind::File | Kind::Path | Kind::Command) {
            // A command only as a program's command line ("… usando `git rm --cached
            // .env`"): a backticked file name is what the step is about, not the command.
            let found = if kind == Kind::Command {
                program_line(text, &prot, at..trimmed.len()).or_else(|| {
                    super::quoted_command(text, &prot, at..trimmed.len()).map(|f| f.value)
                })
            } else {
                extract_primary(kind, text, &prot, at..trimmed.len(), primary)
                    .map(|f| f.value)
                    // "The model is in apps/core/contact.py. Let me check if it has …":
                    // the path the sentence before named.
                    .or_else(|| {
                        let refers = step_words
                            .iter()
                            .any(|w| matches!(w.as_str(), "it" | "this" | "that"));
                        let back = floor(text, at.saturating_sub(300));
                        refers.then(|| last_path(text, &prot, back..at)).flatten()
                    })
            };
            if let Some(found) = found {
                args.insert(primary.to_string(), Value::String(found));
            }
        }
    }
    // A multi-work file tool: the operation the work is, the path the step names.
    if work_of(tool).is_none() {
        if let Some((key, op)) = operation_for(tool, work) {
            args.entry(key.to_string()).or_insert(Value::String(op));
        }
        if let Some(p) = tool
            .properties()
            .into_iter()
            .map(|(p, _)| p)
            .find(|p| matches!(*p, "path" | "file_path" | "filePath" | "filename"))
        {
            if !args.contains_key(p) {
                if let Some(f) = extract_primary(Kind::Path, text, &prot, at..trimmed.len(), p) {
                    args.insert(p.to_string(), Value::String(f.value));
                }
            }
        }
    }
    push_step(out, tool, args, at..trimmed.len(), tools, cfg);
}

/// The step's call, made: it settles an unsure mention of the same tool.
fn push_step(
    out: &mut StrategyOutput,
    tool: &ToolSpec,
    args: serde_json::Map<String, Value>,
    span: std::ops::Range<usize>,
    tools: &[ToolSpec],
    cfg: &ParserConfig,
) {
    if let Some(c) = make_call(&tool.name, Value::Object(args), 0.55, span, tools, cfg) {
        out.unsure.retain(|u| u.name != c.name);
        out.calls.push(c);
    }
}

/// Whether a step names code or files to look for: a quoted name, a path, a word of
/// the code's.
fn names_code(step: &str) -> bool {
    step.contains('`')
        || step.contains('/')
        || tokens(step).iter().any(|w| {
            SEARCHED.contains(&w.as_str())
                || FILE_THINGS.contains(&w.as_str())
                || FILE_OBJECTS.contains(&w.as_str())
                || PLACES.contains(&w.as_str())
                || matches!(w.as_str(), "codebase" | "code" | "source" | "project")
        })
        || step
            .split_whitespace()
            .any(|w| w.contains('_') || w.contains("()"))
}

/// Words an asking tool's name is made of (`ask_user`, `ask_clarification`,
/// `ask_followup_question`, `AskUserQuestion`, `request_user_input`).
const ASK_NAME_WORDS: &[&str] = &[
    "ask",
    "user",
    "human",
    "question",
    "questions",
    "clarification",
    "clarify",
    "followup",
    "follow",
    "up",
    "for",
    "the",
    "tool",
    "input",
    "request",
    "to",
];
/// What "ask" is said of when the user is asked through a tool ("ask the user which
/// site", "ask for clarification"; not "ask you", which asks in the text itself).
const ASKED: &[&str] = &[
    "the",
    "user",
    "users",
    "them",
    "for",
    "a",
    "some",
    "clarifying",
    "human",
    "which",
    "what",
    "whether",
    "how",
    "about",
];
/// Chinese for "the user".
const CJK_USER: &[&str] = &["用户", "使用者"];

/// The one offered tool for asking the user something.
fn asking_tool(tools: &[ToolSpec]) -> Option<&ToolSpec> {
    crate::sole(tools.iter().filter(|t| {
        let ws = name_words(&t.name);
        let asks = ws
            .iter()
            .any(|w| matches!(w.as_str(), "ask" | "clarification" | "clarify"))
            || (ws.iter().any(|w| w == "request") && ws.iter().any(|w| w == "input"));
        asks && ws.iter().all(|w| ASK_NAME_WORDS.contains(&w.as_str()))
    }))
}

/// The model stops at asking the user, and a tool for asking is offered: "Let me ask the
/// user which site they mean.", "I'll confirm with the user first.", "让我先问问用户，
/// 澄清一下需求。" A question written out in the text is asked there, not through a tool.
pub(super) fn ask_step(
    text: &str,
    cfg: &ParserConfig,
    tools: &[ToolSpec],
    out: &mut StrategyOutput,
) {
    let Some(tool) = asking_tool(tools) else {
        return;
    };
    // The step is a sentence of the last paragraph; what follows it says what to ask
    // about ("我需要了解网站的具体用途。"), never the question itself.
    let body = text.trim_end();
    let para = body.rfind("\n\n").map_or(0, |i| i + 2);
    if body[para..].contains(['?', '？']) {
        return;
    }
    let mut at = para;
    for (i, c) in body[para..].char_indices() {
        let end = para + i + c.len_utf8();
        let ends = matches!(c, '。' | '！' | '\n')
            || (matches!(c, '.' | '!') && body[end..].starts_with(char::is_whitespace))
            || end == body.len();
        if !ends {
            continue;
        }
        let sentence = body[at..end].trim();
        let start = at + (body[at..end].len() - body[at..end].trim_start().len());
        at = end;
        if asks_user(sentence) && committed_sentence(text, start) {
            let args = crate::bind::bindings(&body[start..], tool);
            if let Some(c) = make_call(
                &tool.name,
                Value::Object(args),
                0.55,
                start..body.len(),
                tools,
                cfg,
            ) {
                out.calls.push(c);
            }
            return;
        }
    }
}

/// A sentence whose step is asking the user.
fn asks_user(s: &str) -> bool {
    let s = s
        .trim_end_matches(['.', '!', '。', '！', '\u{2026}'])
        .trim();
    if s.is_empty() || s.ends_with([':', '：']) {
        return false;
    }
    let lower = s.to_lowercase().replace('\u{2019}', "'");
    if not_now(&lower)
        || ["later", "afterwards", "eventually"]
            .iter()
            .any(|w| super::has_phrase(&lower, w))
    {
        return false;
    }
    if s.chars().any(super::is_cjk) {
        let Some(lead) = CJK_LEADS
            .iter()
            .chain(&["我需要", "需要先"])
            .filter_map(|l| s.find(l).map(|i| i + l.len()))
            .min()
        else {
            return false;
        };
        let rest = &s[lead..];
        let negated = ["不", "没", "无需", "别", "无法", "已经"]
            .iter()
            .any(|n| rest.contains(n));
        return !negated
            && CJK_USER.iter().any(|u| rest.contains(u))
            && ["问", "問", "确认", "確認", "澄清"]
                .iter()
                .any(|v| rest.contains(v));
    }
    let ws = tokens(s);
    // ("Давайте спросим пользователя о его предпочтениях.")
    if ws
        .iter()
        .take(3)
        .any(|w| RU_LEADS.contains(&w.as_str()) || w == "спрошу" || w == "уточню")
    {
        return !ru_not_now(s, &ws)
            && ws.iter().any(|w| {
                w.starts_with("спрос") || w.starts_with("спрош") || w.starts_with("уточн")
            })
            && ws.iter().any(|w| w.starts_with("пользовател"));
    }
    let capital = s.starts_with(char::is_uppercase);
    let Some(v) = step_verb(&ws, capital, false, false, false) else {
        return false;
    };
    let next = ws.get(v + 1).map_or("", String::as_str);
    let with_user = ws[v + 1..]
        .windows(2)
        .take(3)
        .any(|p| p[0] == "with" && matches!(p[1].as_str(), "the" | "user"))
        && ws[v + 1..].iter().any(|w| w == "user");
    match ws[v].as_str() {
        "ask" => ASKED.contains(&next),
        "clarify" | "confirm" | "check" | "verify" => with_user,
        _ => false,
    }
}
