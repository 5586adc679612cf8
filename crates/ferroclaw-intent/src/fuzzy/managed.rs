//! A tool that manages one kind of thing by an action it is told — OpenClaw's `cron`,
//! `gateway`, `process`: the step names the thing and what to do with it ("Let me create
//! a separate cron job for that:", "Restarting the gateway:", "Давай создам отдельный cron
//! job:", "Перезапускаю Gateway:", "让我重启 gateway"). The action is the one among the
//! tool's own (its property's `enum`, or the list its description gives) that the step's
//! verb asks for; a verb that asks for none of them makes no call. The thing must be the
//! verb's object — named within three words after it — so a step on something else that
//! mentions the tool ("add a note about the cron job") is no call of it.

use serde_json::{Map, Value};

use super::workbench::{operation_key, operation_names, step_verb_at};
use super::{addresses_reader, deferred, is_cjk, last_sentence, refusing, words};
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
        &[
            "restart",
            "reboot",
            "перезапус",
            "перезапущ",
            "перезагру",
            "重启",
        ],
        &["restart"],
    ),
    (&["list", "列出"], &["list", "ls"]),
    (
        &["trigger", "запущ", "запуска", "触发"],
        &["run", "trigger"],
    ),
    (&["kill", "terminat", "останов", "终止"], &["kill", "stop"]),
];

/// Words that put the step off, set it against another or make it the reader's.
const AGAINST: &[&str] = &[
    "rather",
    "instead",
    "than",
    "later",
    "tomorrow",
    "позже",
    "потом",
    "завтра",
    "вместо",
];
const CJK_AGAINST: &[&str] = &[
    "不",
    "没",
    "如果",
    "的话",
    "已经",
    "了",
    "会",
    "所以",
    "导致",
    "步骤",
    "请",
    "写",
    "下面",
    "之后",
    "以后",
    "稍后",
    "明天",
    "而不是",
];

/// The step's call on a managing tool the text's last sentence names, when nothing else
/// was read; or the action of that tool's call read by its name.
pub(super) fn managed_step(
    text: &str,
    cfg: &ParserConfig,
    tools: &[ToolSpec],
    out: &mut StrategyOutput,
) {
    let body = text.trim_end();
    let sentence = last_sentence(body);
    // (A Chinese sentence ends at its own stop: "配置已保存。让我重启 gateway".)
    let sentence = sentence
        .trim_end_matches(['。', '！'])
        .rsplit(['。', '！', '？'])
        .next()
        .map_or(sentence, |tail| {
            &sentence[sentence.rfind(tail).unwrap_or(0)..]
        });
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
        let action = operation_names(t, key).into_iter().find(|n| {
            stems
                .1
                .iter()
                .any(|a| n == a || n.ends_with(&format!(".{a}")))
        })?;
        object_named(after, &t.name.to_lowercase()).then_some((t, key, action))
    });
    let (Some((tool, key, action)), None) = (found.next(), found.next()) else {
        return;
    };
    // (The tool already read by its name, its action missing: the verb says it.)
    if let Some(c) = out.calls.iter_mut().find(|c| c.name == tool.name) {
        if let Some(args) = c.arguments.as_object_mut() {
            args.entry(key.to_string()).or_insert(Value::String(action));
        }
        return;
    }
    if !out.calls.is_empty() {
        return;
    }
    let mut args = Map::new();
    args.insert(key.to_string(), Value::String(action));
    let span = start..body.len();
    if let Some(c) = make_call(&tool.name, Value::Object(args), 0.55, span, tools, cfg) {
        out.unsure.retain(|u| u.name != c.name);
        out.calls.push(c);
    }
}

/// Where the step's verb starts in `lower`: after an English lead that commits the model,
/// a Russian first person ("Давай создам", "Перезапускаю"), a Chinese "让我/我来/我将" opening
/// the sentence; never negated, conditional, put off or for the reader.
fn step_verb_of(s: &str, lower: &str) -> Option<usize> {
    let ws = words(lower);
    if ws.iter().any(|w| {
        matches!(
            w.as_str(),
            "not" | "never" | "if" | "не" | "если" | "уже" | "вам" | "вы"
        ) || w.ends_with("n't")
            || AGAINST.contains(&w.as_str())
    }) || addresses_reader(lower)
        || deferred(lower)
    {
        return None;
    }
    if s.chars().any(is_cjk) {
        if CJK_AGAINST.iter().any(|n| s.contains(n)) {
            return None;
        }
        let open = lower.trim_start_matches(|c: char| {
            c.is_whitespace() || matches!(c, '，' | ',' | '。' | '！' | '好' | '的' | '那' | '么')
        });
        let skipped = lower.len() - open.len();
        let lead = ["让我", "我来", "我将", "我先", "我现在", "现在"]
            .iter()
            .find_map(|l| open.strip_prefix(l).map(|_| skipped + l.len()))?;
        let rest = lower[lead..].trim_start();
        return Some(lower.len() - rest.len());
    }
    if lower.chars().any(|c| ('а'..='я').contains(&c)) {
        return russian_verb(lower);
    }
    let at = step_verb_at(s, lower)?;
    (!refusing(words(&lower[..at]).iter().map(String::as_str))).then_some(at)
}

/// A Russian first-person verb opening the sentence after its lead words ("Давай создам
/// …", "Сейчас перезапущу …", "Перезапускаю Gateway"): present or future, not a past, a
/// participle ("Обновлённую"), a noun ("Перезапуску") or an imperative to the reader.
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
        "хорошо",
    ];
    let mut at = 0;
    for w in lower.split_whitespace() {
        let pos = lower[at..].find(w).map(|i| at + i)?;
        at = pos + w.len();
        let bare = w.trim_matches(|c: char| !c.is_alphabetic());
        if LEADS.contains(&bare) {
            continue;
        }
        let n = bare.chars().count();
        let ends = |e: &str| bare.ends_with(e);
        let first_person = (ends("ю") && !ends("ую") && !ends("юю"))
            || ["щу", "жу", "чу", "шу", "ду", "му"].iter().any(|e| ends(e))
            || ends("дам")
            || (n >= 6 && (ends("им") || ends("ем")) && !ends("ым"));
        let lead_len = w.len() - w.trim_start_matches(|c: char| !c.is_alphabetic()).len();
        return first_person.then_some(pos + lead_len);
    }
    None
}

/// Whether `name` (its parts joined by `_` may be spaced) is the object of the verb that
/// opens `after`: within three words of it, nothing but words between.
fn object_named(after: &str, name: &str) -> bool {
    let spaced = name.replace('_', " ");
    [name, spaced.as_str()].iter().any(|n| {
        after.match_indices(n).any(|(i, _)| {
            let before = after[..i].chars().next_back();
            let next = after[i + n.len()..].chars().next();
            let bounded = before.is_none_or(|c| !c.is_alphanumeric() && c != '_')
                && next.is_none_or(|c| !c.is_alphanumeric() && c != '_');
            let between = &after[..i];
            let near = if between.chars().any(is_cjk) {
                between.chars().count() <= 8
            } else {
                // (One noun phrase: "a separate cron job", not "the files the cron job".)
                let ws: Vec<&str> = between.split_whitespace().skip(1).collect();
                let det = |w: &str| {
                    matches!(
                        w,
                        "the"
                            | "a"
                            | "an"
                            | "this"
                            | "that"
                            | "these"
                            | "those"
                            | "its"
                            | "our"
                            | "my"
                            | "your"
                            | "his"
                            | "her"
                            | "their"
                    )
                };
                let lead = ws.iter().take_while(|w| det(w)).count();
                ws.len() <= 3 && !ws[lead..].iter().any(|w| det(w))
            };
            bounded && near && !between.contains([',', ';', ':', '，', '、', '.'])
        })
    })
}
