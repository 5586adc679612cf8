//! A committed step whose object is what one offered tool's name or description says
//! the tool is for, in other words than its name: "Let me check running processes:"
//! (`shell_ps`, "List running processes"), "Let me search for U2 albums in our music
//! catalog:" (`get_albums_by_artist`), "Let me create the schedule for you."
//! (`schedule_meeting`). The last resort of the prose rules: only when no other rule
//! read a call, and only for one tool clearly ahead of the others.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::{committed_sentence, refusing, waits_on_user, words, TELLING_VERBS};
use crate::{make_call, ParserConfig, StrategyOutput, ToolSpec};

/// A first-person commitment, its verb and the verb's object up to the sentence's end.
static STEP: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?i)\b(?:let\s+me|let's|i'll|i\s+will|i'm\s+going\s+to|i\s+am\s+going\s+to|we'll|we\s+will)\s+(?:(?:now|first|also|quickly|just|then|go\s+ahead\s+and)\s+)*([a-z]+)\s+([^.!?:\n]{2,120})",
    )
});

/// Words that say nothing of what a tool is for.
const STOP: &[&str] = &[
    "the",
    "a",
    "an",
    "for",
    "of",
    "in",
    "on",
    "to",
    "our",
    "your",
    "my",
    "this",
    "that",
    "these",
    "those",
    "some",
    "any",
    "all",
    "with",
    "and",
    "or",
    "by",
    "from",
    "about",
    "latest",
    "current",
    "me",
    "you",
    "it",
    "them",
    "information",
    "info",
    "data",
    "details",
    "more",
    "is",
    "are",
    "be",
    "given",
    "specified",
    "provided",
    "tool",
    "function",
    "returns",
    "return",
    "use",
    "using",
    "used",
    "get",
    "gets",
    "check",
    "look",
    "at",
    "up",
    "into",
    "out",
    "if",
    "as",
    "so",
    "now",
    "again",
    "which",
    "what",
    "how",
    "there",
    "here",
    "we",
    "i",
    "can",
    "will",
    "new",
    "specific",
    "based",
    "name",
    "names",
    "list",
    "lists",
    "query",
    "value",
    "result",
    "results",
];

/// Verbs of steps that are the model's own words or wait on someone.
const NOT_TOOL_WORK: &[&str] = &[
    "know", "see", "think", "help", "try", "start", "continue", "proceed", "begin", "keep", "make",
    "take", "do", "be", "have", "go", "wait", "ask", "confirm", "note", "focus", "need", "require",
    "attempt",
];

/// Verbs that ask for a look-up.
const LOOK_UP: &[&str] = &["check", "search", "fetch", "retrieve", "query", "lookup"];

/// A crude stem, the same for a word's usual forms (base, based, bases → bas).
fn stem(w: &str) -> &str {
    let cut = ["ies", "es", "s", "ing", "ed"]
        .iter()
        .find_map(|suf| w.strip_suffix(suf).filter(|s| s.len() >= 3))
        .unwrap_or(w);
    cut.strip_suffix('e')
        .filter(|s| s.len() >= 3)
        .unwrap_or(cut)
}

fn content_words(s: &str) -> Vec<String> {
    words(s)
        .into_iter()
        .filter(|w| w.len() > 2 && !STOP.contains(&w.as_str()))
        .map(|w| stem(&w).to_string())
        .collect()
}

pub(super) fn described_step(
    text: &str,
    cfg: &ParserConfig,
    tools: &[ToolSpec],
    out: &mut StrategyOutput,
) {
    // The last committed step: earlier ones were done before it.
    let Some(c) = STEP.captures_iter(text).last() else {
        return;
    };
    let (Some(m), Some(verb), Some(object)) = (c.get(0), c.get(1), c.get(2)) else {
        return;
    };
    // The text's last step: nothing but its sentence's end follows (an answer after it
    // means the model did the work itself or made it up).
    let tail =
        text[m.end()..].trim_start_matches(|c: char| !matches!(c, '.' | '!' | '?' | ':' | '\n'));
    if !tail.trim_start_matches(['.', '!', ':']).trim().is_empty() {
        return;
    }
    let verb_l = verb.as_str().to_ascii_lowercase();
    if TELLING_VERBS.contains(&verb_l.as_str())
        || NOT_TOOL_WORK.contains(&verb_l.as_str())
        || !committed_sentence(text, m.start())
        || refusing(words(&text[m.range()]).iter().map(String::as_str))
    {
        return;
    }
    // ("…, if you'd like", "… later", "please specify the time and I'll schedule it":
    // not now.)
    let lower = object.as_str().to_ascii_lowercase();
    let sentence = super::sentence_around(text, &m.range());
    let lower_before = text[sentence.start..m.start()].to_lowercase();
    // (Nor a document's: "In this guide, we will …", "In the next section, we'll …", a
    // list's item.)
    let line = &text[super::line_start(text, m.start())..m.start()];
    let documented = [
        "in this guide",
        "in this tutorial",
        "in this chapter",
        "in this section",
        "in this post",
        "in this article",
        "in this series",
        "in the next",
        "in the following",
        "next time",
        "in the second part",
        "in part ",
    ]
    .iter()
    .any(|w| lower_before.contains(w) || lower.contains(w))
        || line.trim_start().starts_with(['-', '*', '•', '#'])
        || line.trim_start().starts_with(|c: char| c.is_ascii_digit());
    if documented {
        return;
    }
    if [" if ", " later", "when ", " once "]
        .iter()
        .any(|w| lower.contains(w))
        || ["if ", "please", "once ", "when ", "after "]
            .iter()
            .any(|w| lower_before.contains(w))
        || waits_on_user(&lower_before)
    {
        return;
    }
    // The one tool offered, asked to look something up: "Now let me check New York.",
    // "Let me check the latest sports news." (`brave_search`). What is looked up must be
    // a search's, a name, or the tool's own words (not "check with the team", "look at
    // this from a different angle", "check the docs" for a weather tool), and now.
    let first_word = lower.split_whitespace().next().unwrap_or("");
    let mut object_words = content_words(object.as_str());
    let later = ["tomorrow", "again", "next ", "later", "soon"]
        .iter()
        .any(|w| lower.contains(w) || lower_before.contains(w));
    if later {
        return;
    }
    if let [tool] = tools {
        let conversational = [
            "with", "back", "on", "into", "at", "started", "going", "forward", "straight", "this",
            "that", "it", "out", "in", "over", "through", "around",
        ]
        .contains(&first_word);
        if conversational {
            return;
        }
        let (name, desc) = tool_words(tool);
        let searches = name.iter().chain(&desc).any(|w| w == "search");
        let named = object.as_str().split_whitespace().any(|w| {
            w.starts_with(|c: char| c.is_uppercase()) && !matches!(w, "I" | "I'm" | "I'll")
        });
        let own_words = object_words
            .iter()
            .any(|w| name.contains(w) || desc.contains(w));
        let fits = searches || named || own_words;
        if LOOK_UP.contains(&verb_l.as_str()) && !tool.description.is_empty() && fits {
            push_step(text, m.range(), tool, tools, cfg, out);
            return;
        }
    }
    // "Let me search for that information for you.": what the sentence before said.
    if object_words.is_empty()
        && words(&lower)
            .iter()
            .any(|w| matches!(w.as_str(), "that" | "it" | "this" | "those" | "these"))
    {
        let back = &text[crate::harmony::floor(text, m.start().saturating_sub(300))..m.start()];
        let para = back.rsplit("\n\n").next().unwrap_or(back);
        object_words = content_words(para);
    }
    if object_words.is_empty() {
        return;
    }
    let verb_stem = stem(&verb_l).to_string();
    // A word of the name counts twice, one of the description once; the verb only adds.
    let score = |t: &ToolSpec| -> (usize, usize) {
        let (name, desc) = tool_words(t);
        let mut s = 0;
        let mut hits = 0;
        for w in &object_words {
            if name.contains(w) {
                s += 2;
                hits += 1;
            } else if desc.contains(w) {
                s += 1;
                hits += 1;
            }
        }
        if hits > 0 && (name.contains(&verb_stem) || desc.contains(&verb_stem)) {
            s += 1;
        }
        (s, hits)
    };
    let mut ranked: Vec<((usize, usize), &ToolSpec)> =
        tools.iter().map(|t| (score(t), t)).collect();
    ranked.sort_by_key(|r| std::cmp::Reverse(r.0));
    let Some(&((best, hits), tool)) = ranked.first() else {
        return;
    };
    let runner_up = ranked.get(1).map_or(0, |r| (r.0).0);
    if best < 2 || hits == 0 || best <= runner_up {
        return;
    }
    push_step(text, m.range(), tool, tools, cfg, out);
}

/// The stemmed words of a tool's name, and the content words of its description's start.
fn tool_words(tool: &ToolSpec) -> (Vec<String>, Vec<String>) {
    let name = crate::schema::name_words(&tool.name)
        .iter()
        .map(|w| stem(w).to_string())
        .collect();
    let desc = content_words(tool.description.get(..300).unwrap_or(&tool.description));
    (name, desc)
}

/// The step's call, with what its sentence binds.
fn push_step(
    text: &str,
    step: std::ops::Range<usize>,
    tool: &ToolSpec,
    tools: &[ToolSpec],
    cfg: &ParserConfig,
    out: &mut StrategyOutput,
) {
    let args = crate::bind::bindings(&text[step.clone()], tool);
    if let Some(call) = make_call(&tool.name, Value::Object(args), 0.55, step, tools, cfg) {
        out.calls.push(call);
    }
}
