//! A tool that manages one kind of thing by an action it is told — OpenClaw's `cron`,
//! `gateway`, `process`: the step names the thing and what to do with it ("Let me create
//! a separate cron job for that:", "Restarting the gateway:", "Давай создам отдельный cron
//! job:", "Перезапускаю Gateway:", "让我重启 gateway"). The action is the one among the
//! tool's own (its property's `enum`, or the list its description gives) that the step's
//! verb asks for; a verb that asks for none of them makes no call.

use serde_json::{Map, Value};

use super::workbench::{operation_key, operation_names, step_verb_at};
use super::{addresses_reader, is_cjk, last_sentence, refusing, words};
use crate::{make_call, ParserConfig, StrategyOutput, ToolSpec};

/// Verb stems (English, Russian, Chinese) and the actions each may be named by.
const ACTIONS: &[(&[&str], &[&str])] = &[
    (
        &[
            "creat",
            "add",
            "schedul",
            "созда",
            "добав",
            "创建",
            "添加",
            "新建",
        ],
        &["add", "create", "new"],
    ),
    (
        &["remov", "delet", "удал", "убер", "删除", "移除"],
        &["remove", "delete", "rm"],
    ),
    (
        &[
            "updat",
            "chang",
            "modif",
            "edit",
            "patch",
            "обнов",
            "измен",
            "меня",
            "поменя",
            "修改",
            "更新",
        ],
        &["update", "patch", "edit", "set"],
    ),
    (
        &["restart", "reboot", "перезапус", "перезагру", "重启"],
        &["restart"],
    ),
    (&["list", "列出"], &["list", "ls"]),
    (
        &["trigger", "запущ", "запуска", "触发"],
        &["run", "trigger"],
    ),
    (&["kill", "terminat", "останов", "终止"], &["kill", "stop"]),
];

/// The step's call on a managing tool the text's last sentence names, when nothing else
/// was read.
pub(super) fn managed_step(
    text: &str,
    cfg: &ParserConfig,
    tools: &[ToolSpec],
    out: &mut StrategyOutput,
) {
    let body = text.trim_end();
    let sentence = last_sentence(body);
    let start = body.len() - sentence.len();
    let s = sentence.trim().trim_matches('*').trim();
    if s.is_empty() || s.ends_with(['?', '？']) || s.len() > 300 {
        return;
    }
    let lower = s.to_lowercase().replace('\u{2019}', "'");
    let Some(verb_at) = step_verb_of(s, &lower) else {
        return;
    };
    let after = &lower[verb_at..];
    let Some(stems) = ACTIONS
        .iter()
        .find(|(stems, _)| stems.iter().any(|st| after.starts_with(st)))
    else {
        return;
    };
    let mut found = tools.iter().filter_map(|t| {
        let key = operation_key(t)?;
        let named = names_word(after, &t.name.to_lowercase());
        let action = operation_names(t, key).into_iter().find(|n| {
            stems
                .1
                .iter()
                .any(|a| n == a || n.ends_with(&format!(".{a}")))
        })?;
        named.then_some((t, key, action))
    });
    let (Some((tool, key, action)), None) = (found.next(), found.next()) else {
        return;
    };
    let mut args = Map::new();
    args.insert(key.to_string(), Value::String(action));
    let span = start..body.len();
    if let Some(c) = make_call(&tool.name, Value::Object(args), 0.55, span, tools, cfg) {
        out.unsure.retain(|u| u.name != c.name);
        out.calls.push(c);
    }
}

/// Where the step's verb starts in `lower`: after an English lead that commits the model,
/// a Russian first person ("Давай создам", "Перезапускаю"), a Chinese "让我/我来/我将";
/// never negated, conditional or for the reader.
fn step_verb_of(s: &str, lower: &str) -> Option<usize> {
    let ws = words(lower);
    if ws.iter().any(|w| {
        matches!(
            w.as_str(),
            "not" | "never" | "if" | "не" | "если" | "уже" | "вам" | "вы"
        ) || w.ends_with("n't")
    }) || addresses_reader(lower)
    {
        return None;
    }
    if s.chars().any(is_cjk) {
        if ["不", "没", "如果", "已经", "了"]
            .iter()
            .any(|n| s.contains(n))
        {
            return None;
        }
        let lead = ["让我", "我来", "我将", "我先", "我现在", "现在"]
            .iter()
            .find_map(|l| lower.find(l).map(|i| i + l.len()))?;
        let rest = lower[lead..].trim_start();
        return Some(lower.len() - rest.len());
    }
    if lower.chars().any(|c| ('а'..='я').contains(&c)) {
        return russian_verb(lower);
    }
    let at = step_verb_at(s, lower)?;
    (!refusing(words(&lower[..at]).iter().map(String::as_str))).then_some(at)
}

/// A Russian first-person verb among the first three words ("Давай создам …", "Сейчас
/// перезапущу …", "Перезапускаю Gateway"): present or future, not a past or an
/// imperative to the reader.
fn russian_verb(lower: &str) -> Option<usize> {
    const LEADS: &[&str] = &[
        "давай",
        "давайте",
        "сейчас",
        "теперь",
        "я",
        "сначала",
        "ок",
        "понял",
    ];
    let mut at = 0;
    for (n, w) in lower.split_whitespace().enumerate() {
        let pos = lower[at..].find(w).map(|i| at + i)?;
        at = pos + w.len();
        let bare = w.trim_matches(|c: char| !c.is_alphabetic());
        if LEADS.contains(&bare) {
            continue;
        }
        let first_person = bare.ends_with('ю')
            || bare.ends_with('у')
            || bare.ends_with("ам")
            || bare.ends_with("им")
            || bare.ends_with("ем");
        return (n < 3 && first_person)
            .then_some(pos + (w.len() - w.trim_start_matches(|c: char| !c.is_alphabetic()).len()));
    }
    None
}

/// Whether `name` stands as a word in `hay` (its parts joined by `_` may be spaced).
fn names_word(hay: &str, name: &str) -> bool {
    let spaced = name.replace('_', " ");
    [name, spaced.as_str()].iter().any(|n| {
        hay.match_indices(n).any(|(i, _)| {
            let before = hay[..i].chars().next_back();
            let after = hay[i + n.len()..].chars().next();
            before.is_none_or(|c| !c.is_alphanumeric() && c != '_')
                && after.is_none_or(|c| !c.is_alphanumeric() && c != '_')
        })
    })
}
