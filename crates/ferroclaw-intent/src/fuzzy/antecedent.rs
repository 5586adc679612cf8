//! A call that refers back to its command instead of stating it: "The user wants me to
//! run `nosuchcommand_xyz123` … Let me run this command.", "用戶要求我用 run_shell 工具執行
//! echo LOOPPROBE_77 命令 … 我需要使用 run_shell 工具來執行這個命令。" The command is the
//! last one the text named before the call. So is a file: "The flag is defined in
//! cmd/root.go. Let me read that file".

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::{command_in, kind_of, protected_spans, Kind, Quote};
use crate::harmony::floor;
use crate::{ParsedCall, ToolSpec};

/// "this command", "the same command", 這個命令, 该指令.
static ANAPHOR: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?i)\b(?:this|that|the\s+same|the\s+above|said|the\s+given|the\s+requested)\s+(?:shell\s+)?(?:command|cmd)\b|(?:这|该|此|上述|上面的|这个|这条|该条)\s*(?:命令|指令)",
    )
});

/// "that file", "this file", "the same file", 这个文件.
static FILE_ANAPHOR: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?i)\b(?:this|that|the\s+same|the\s+above|said)\s+file\b|(?:这个|该|此)\s*文件",
    )
});

/// "the file" (not "the file named …", "the file system"): the one file its paragraph
/// names, when it names only one.
static THE_FILE: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?i)\bthe\s+file\b(\s+(?:named|called|name|path|system|tree|list|names|paths))?",
    )
});

/// "the website", "that page", "the link", "the OpenCode docs": the address named before.
static URL_ANAPHOR: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?i)\b(?:the|this|that|said)\s+(?:([\w.-]+)\s+)?(?:website|web\s*page|web\s*site|page|site|url|link|address|docs|documentation|home\s*page|post|article)\b",
    )
});

/// A command named after a verb of running, up to where the sentence or the noun ends:
/// "執行 echo LOOPPROBE_77 命令", "执行 tail -f /dev/null。".
static CJK_RUN: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?:执行|运行)\s*([A-Za-z./~][^\n。，；！？\p{Han}]*?)\s*(?:命令|指令|[。，；！？\n\p{Han}]|$)",
    )
});

/// A code fence holding one line.
static FENCED_LINE: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"```([A-Za-z]*)[ \t]*\n[ \t]*(?:\$[ \t]+)?([^\n`]+?)[ \t]*\n[ \t]*```",
    )
});

/// "Let's execute this query.", "this updated SQL query", "the query above", 这个查询.
static QUERY_ANAPHOR: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?i)\b(?:this|that|the\s+same|the\s+above|my|the)\s+(?:(?:updated|revised|new|corrected|fixed|final|modified|proposed)\s+)?(?:sql\s+)?(?:query|statement)\b|(?:这个|该|此|上述|上面的)\s*(?:sql|SQL)?\s*(?:查询|语句)",
    )
});

/// A fenced block: its language and its lines.
static FENCED_BLOCK: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(r"```([A-Za-z]*)[ \t]*\n((?s:.*?))\n[ \t]*```")
});

/// Fill the SQL of each call whose words point back at the statement the text showed
/// ("Here is my proposed SQL query: ```sql …``` Let's execute this query."); a value
/// that is no statement (a table's name) gives way to it.
pub(super) fn query_named_before(text: &str, tools: &[ToolSpec], calls: &mut [ParsedCall]) {
    for c in calls.iter_mut() {
        let Some(tool) = tools.iter().find(|t| t.name == c.name) else {
            continue;
        };
        let Some(prop) = tool
            .properties()
            .into_iter()
            .map(|(p, _)| p)
            .find(|p| super::holds_sql(tool, p))
        else {
            continue;
        };
        let Some(args) = c.arguments.as_object_mut() else {
            continue;
        };
        if args
            .get(prop)
            .and_then(Value::as_str)
            .is_some_and(super::sql_shaped)
        {
            continue;
        }
        let near = floor(text, c.span.start)..floor(text, (c.span.end + 40).min(text.len()));
        if !QUERY_ANAPHOR.is_match(&text[near.clone()]) {
            continue;
        }
        let back = &text[..floor(text, c.span.start)];
        let shown = FENCED_BLOCK
            .captures_iter(back)
            .filter_map(|m| {
                let lang = m.get(1)?.as_str().to_ascii_lowercase();
                let body = m.get(2)?.as_str();
                (matches!(
                    lang.as_str(),
                    "" | "sql" | "postgresql" | "mysql" | "sqlite"
                ) && super::sql_shaped(body))
                .then_some(body)
            })
            .last();
        if let Some(sql) = shown {
            args.insert(prop.to_string(), Value::String(sql.to_string()));
        }
    }
}

/// Words around a quoted command that say it is one.
const COMMAND_WORDS: &[&str] = &[
    "command", "cmd", "run", "execute", "命令", "指令", "执行", "运行",
];

/// Fill the command of each call that refers back to it.
pub(super) fn command_named_before(text: &str, tools: &[ToolSpec], calls: &mut [ParsedCall]) {
    for c in calls.iter_mut() {
        let Some(tool) = tools.iter().find(|t| t.name == c.name) else {
            continue;
        };
        let Some((prop, kind)) = tool.required().into_iter().find_map(|p| {
            let k = kind_of(tool, p);
            matches!(k, Kind::Command | Kind::Path | Kind::File | Kind::Url).then_some((p, k))
        }) else {
            continue;
        };
        let Some(args) = c.arguments.as_object_mut() else {
            continue;
        };
        if args.contains_key(prop) {
            continue;
        }
        // (A value referred back to is never handed to a tool that destroys or
        // overwrites, nor taken from a text that warns: "the file" after naming
        // `important.db` is no licence to delete it.)
        let destroys = crate::schema::name_words(&c.name).iter().any(|w| {
            matches!(
                w.as_str(),
                "delete"
                    | "remove"
                    | "rm"
                    | "drop"
                    | "write"
                    | "overwrite"
                    | "kill"
                    | "truncate"
                    | "erase"
                    | "destroy"
                    | "purge"
            )
        });
        let warned = {
            let lower = text.to_ascii_lowercase();
            [
                "phishing",
                "scam",
                "suspicious",
                "don't open",
                "do not open",
                "malicious",
                "never open",
            ]
            .iter()
            .any(|w| lower.contains(w))
        };
        if (kind != Kind::Command && destroys) || warned {
            continue;
        }
        let near = floor(text, c.span.start)..floor(text, (c.span.end + 40).min(text.len()));
        let back = &text[..floor(text, c.span.start)];
        // (A name written after the reference, "that file, pkg/x.go" or "this file
        // (root.go)", is the file; the one before is not.)
        let sent_end = text[c.span.end..]
            .find(['!', '?', '\n'])
            .map_or(text.len(), |i| c.span.end + i);
        let renamed = kind != Kind::Command
            && text[c.span.end..sent_end].split_whitespace().any(|w| {
                let w = w.trim_matches(|c: char| !c.is_alphanumeric() && !"./_-~".contains(c));
                super::path_like(w.trim_end_matches('.'))
            });
        if renamed {
            continue;
        }
        let named = if kind == Kind::Command {
            ANAPHOR
                .is_match(&text[near.clone()])
                .then(|| last_command(back))
                .flatten()
        } else if kind == Kind::Url {
            // (The one address the text named before: "visit a website at
            // www.example.com … I will visit the website using `get_webpage`".)
            URL_ANAPHOR.captures(&text[near.clone()]).and_then(|c| {
                let mut urls: Vec<&str> = super::URL.find_iter(back).map(|m| m.as_str()).collect();
                urls.dedup();
                // ("the OpenCode docs" for opencode.ai; not "the next page", "the
                // pricing page": another page than the one named.)
                let word = c.get(1).map(|w| w.as_str().to_lowercase());
                (urls.len() == 1 && word.is_none_or(|w| urls[0].to_lowercase().contains(&w))).then(
                    || {
                        urls[0]
                            .trim_end_matches(['.', ',', ';', ':', '!', '?', '\''])
                            .to_string()
                    },
                )
            })
        } else if !FILE_ANAPHOR.is_match(&text[near.clone()]) {
            // "I'll read the file to confirm …" after "… in calculator.py": the one file
            // the paragraph names.
            THE_FILE
                .captures(&text[near.clone()])
                // ("the file summary", "the file header": a noun after it is another thing.)
                .filter(|m| {
                    m.get(1).is_none()
                        && text[m.get(0).map_or(0, |x| x.end()) + near.start..]
                            .split_whitespace()
                            .next()
                            .is_none_or(|w| {
                                let w = w.to_ascii_lowercase();
                                w.starts_with(|c: char| !c.is_alphanumeric())
                                    || [
                                        "to", "and", "then", "first", "now", "again", "so", "for",
                                        "in", "from", "with", "before", "after", "once",
                                        "contents", "content",
                                    ]
                                    .contains(&w.trim_end_matches(['.', ',', ':', ';']))
                                    || w.ends_with(['.', ',', ':', ';'])
                            })
                })
                .and_then(|_| {
                    let from = back.trim_end().rfind("\n\n").unwrap_or(0);
                    let mut names =
                        super::workbench::paths_in(back, &protected_spans(back), from..back.len());
                    names.dedup();
                    (names.len() == 1).then(|| names.remove(0))
                })
                .filter(|p| !p.ends_with('/'))
        } else {
            FILE_ANAPHOR
                .is_match(&text[near.clone()])
                .then(|| {
                    // (In the paragraph that refers back.)
                    let from = back.trim_end().rfind("\n\n").unwrap_or(0);
                    super::workbench::last_path(back, &protected_spans(back), from..back.len())
                })
                .flatten()
                // (A directory is no file to read.)
                .filter(|p| kind == Kind::Path || !p.ends_with('/'))
        };
        if let Some(v) = named {
            args.insert(prop.to_string(), Value::String(v));
        }
    }
}

/// The last command `back` names: quoted in backticks next to a word that says it is a
/// command, after a verb of running, or a known program after "run".
fn last_command(back: &str) -> Option<String> {
    let prot = protected_spans(back);
    let mut best: Option<(usize, String)> = None;
    let mut keep = |at: usize, v: &str| {
        let v = v.trim();
        if !v.is_empty() && best.as_ref().is_none_or(|(b, _)| at > *b) {
            best = Some((at, v.to_string()));
        }
    };
    for p in prot.iter().filter(|p| p.kind == Quote::Backtick) {
        let around = around(back, &p.range);
        if COMMAND_WORDS.iter().any(|w| around.contains(w)) {
            keep(p.range.start, &back[p.inner.clone()]);
        }
    }
    // A fenced block of one command line ("```python\npython plot.py\n```").
    // (Not a program's output shown: "The test run printed:", ```text.)
    for m in FENCED_LINE.captures_iter(back) {
        let (Some(all), Some(lang), Some(g)) = (m.get(0), m.get(1), m.get(2)) else {
            continue;
        };
        let first = g.as_str().split_whitespace().next().unwrap_or("");
        let lead = back[..all.start()].trim_end();
        let lead = lead[lead.rfind('\n').map_or(0, |i| i + 1)..].to_ascii_lowercase();
        let output = [
            "printed", "output", "returned", "got", "result", "error", "log", "shows",
        ]
        .iter()
        .any(|w| lead.contains(w));
        let shell_lang = matches!(
            lang.as_str().to_ascii_lowercase().as_str(),
            "" | "bash" | "sh" | "shell" | "zsh" | "powershell" | "cmd" | "python" | "py"
        );
        if super::KNOWN_BINS.contains(&first) && !output && shell_lang {
            keep(g.start(), g.as_str());
        }
    }
    for m in CJK_RUN.captures_iter(back) {
        if let Some(g) = m.get(1) {
            keep(g.start(), g.as_str());
        }
    }
    let lower = back.to_ascii_lowercase();
    for verb in ["run ", "execute "] {
        for (i, _) in lower.match_indices(verb) {
            let from = i + verb.len();
            let end = back[from..].find(['\n']).map_or(back.len(), |e| from + e);
            if let Some(f) = command_in(back, &prot, from..end) {
                keep(f.range.start, &f.value);
            }
        }
    }
    best.map(|(_, v)| v)
}

/// The words just before and after a quoted span, lower-cased.
fn around(text: &str, r: &Range<usize>) -> String {
    let before = &text[floor(text, r.start.saturating_sub(24))..r.start];
    let after = &text[r.end..floor(text, (r.end + 12).min(text.len()))];
    format!("{before} {after}").to_lowercase()
}
