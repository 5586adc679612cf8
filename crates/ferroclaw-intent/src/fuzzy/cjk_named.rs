//! Chinese thoughts that name the tool they are about to use not by its exact name but
//! by a piece of it or by what it does — agent frameworks (ERNIE Bot's, Qwen-Agent's)
//! print such a thought before each native call: "接下来我需要调用[highacc-ocr/v1.8/OCR]
//! 来提取文字", "我需要调用TTS工具将文本转化为语音" (`texttospeech/v1.6/tts`), "我需要使用
//! 查询学生分数的工具" (described as 查询学生的分数). And the values such a thought states
//! for the call: "来执行ls命令", "传入张三作为参数".

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

use super::{kind_of, Kind};
use crate::harmony::floor;
use crate::{make_call, ParsedCall, ParserConfig, StrategyOutput, ToolSpec};

/// A first-person commitment to use a tool, then the tool: in brackets, or words up to
/// 工具 ("…的工具", "TTS工具").
static NAMED: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(我|接下来|现在|首先|然后)[^。！？\n]{0,6}?(?:需要|可以|将|会|要|来|先)?(?:再次)?(?:调用|使用|用)\s*(?:[\[【「`]([^\]】」`\n]{1,80})[\]】」`]|([^。，！？,\n\[【「`]{1,24}?)\s*(?:这个)?(?:工具|插件|接口|API|api))",
    )
});

/// How far around a cue its sentence is looked for.
const WINDOW: usize = 400;

/// The rest of the sentence from `at`, within [`WINDOW`].
fn sentence_after(text: &str, at: usize) -> &str {
    let end = floor(text, (at + WINDOW).min(text.len()));
    text[at..end]
        .split(['。', '！', '？', '?', '\n'])
        .next()
        .unwrap_or("")
}

/// A tool named by a bracketed name, a segment of its name or its description's words,
/// after a Chinese commitment. Arguments: what [`stated_values`] reads.
pub(super) fn described_tool(
    text: &str,
    cfg: &ParserConfig,
    tools: &[ToolSpec],
    out: &mut StrategyOutput,
) {
    for c in NAMED.captures_iter(text) {
        let (Some(m), Some(lead)) = (c.get(0), c.get(1)) else {
            continue;
        };
        let Some(named) = c.get(2).or_else(|| c.get(3)) else {
            continue;
        };
        // (A sentence looked at within a window, so a text of many cues stays linear.)
        let from = floor(text, m.start().saturating_sub(WINDOW));
        let sent_start = text[from..m.start()]
            .rfind(['。', '！', '？', '\n'])
            .map_or(from, |i| {
                from + i + text[from + i..].chars().next().map_or(1, char::len_utf8)
            });
        let before = &text[sent_start..m.start()];
        // (The clause's own words: "用户想要查询分数，我需要使用…" reports the request, then
        // commits.)
        let clause = before.rsplit(['，', ',']).next().unwrap_or("");
        let own = &text[lead.start()..named.start()];
        let rest = sentence_after(text, m.end());
        let line = &text[crate::fuzzy::line_start(text, m.start())..m.start()];
        // Reported, quoted, conditional, negated, done, asked, taken back, an example, a
        // time around the use ("使用OCR工具之前…"), or "we": no step now.
        if clause.contains("用户")
            || before.matches('“').count() > before.matches('”').count()
            || crate::fuzzy::cjk_conditional(before)
            || ["不", "没", "无法", "已经", "已", "过"]
                .iter()
                .any(|w| own.contains(w))
            || rest.contains(['？', '?'])
            || rest.contains("吗")
            || [
                "但",
                "不过",
                "然而",
                "改为",
                "例子",
                "示例",
                "如果",
                "的话",
                "还没",
                "等用户",
                "等你",
                "等到",
            ]
            .iter()
            .any(|w| rest.contains(w))
            || ["之前", "以前", "时", "的时候", "后"]
                .iter()
                .any(|w| rest.starts_with(w))
            || (lead.as_str() == "我" && text[lead.end()..].starts_with('们'))
        {
            continue;
        }
        // "我可以使用X工具来完成这个任务" (ERNIE's thought): "can use" commits only with
        // what it is used for right after, in a sentence that offers nothing to the reader
        // and waits on no one, and not in a list of what the model can do.
        if own.contains("可以") {
            let next = sentence_after(text, (m.end() + rest.len()).min(text.len()));
            let waits = ["请", "你", "您", "需要先", "授权", "也可以"]
                .iter()
                .any(|w| rest.contains(w) || next.contains(w))
                || next.contains(['？', '?']);
            let listed = line.trim_start().starts_with(['-', '*', '•'])
                || line.trim_start().starts_with(|c: char| c.is_ascii_digit());
            if !rest.trim_start().starts_with('来') || waits || listed {
                continue;
            }
        }
        let written = named
            .as_str()
            .trim()
            .trim_end_matches('的')
            .trim_end_matches("这个")
            .trim();
        let Some(tool) = tool_named(written, tools) else {
            continue;
        };
        let span = lead.start()..m.end();
        let args = stated_values(text, span.end, tool);
        if let Some(call) = make_call(&tool.name, Value::Object(args), 0.55, span, tools, cfg) {
            out.calls.push(call);
            return;
        }
    }
}

/// The one tool `written` names: its name (any spelling), one segment of it
/// (`OCR` of `highacc-ocr/v1.8/OCR`), or most of its description's two-character words.
fn tool_named<'a>(written: &str, tools: &'a [ToolSpec]) -> Option<&'a ToolSpec> {
    if written.is_empty() {
        return None;
    }
    if let Some(t) = crate::schema::resolve(written, tools, &Default::default()) {
        return Some(t);
    }
    if written.is_ascii() {
        let lower = written.to_ascii_lowercase();
        return crate::sole(tools.iter().filter(|t| {
            t.name
                .split(['/', '.', ':'])
                .any(|seg| seg.eq_ignore_ascii_case(&lower))
        }));
    }
    // Two-character words of the description (查询 学生 分数 of 查询学生分数).
    let han: Vec<char> = written.chars().filter(|c| super::is_cjk(*c)).collect();
    if han.len() < 4 {
        return None;
    }
    let pairs: Vec<String> = han.windows(2).map(|w| w.iter().collect()).collect();
    let score = |t: &ToolSpec| {
        pairs
            .iter()
            .filter(|p| t.description.contains(p.as_str()))
            .count()
    };
    let mut ranked: Vec<(usize, &ToolSpec)> = tools.iter().map(|t| (score(t), t)).collect();
    ranked.sort_by_key(|r| std::cmp::Reverse(r.0));
    let (best, tool) = *ranked.first()?;
    let runner_up = ranked.get(1).map_or(0, |r| r.0);
    // Most of the words, and more than any other tool's description holds.
    (best * 2 > pairs.len() && best >= 2 && best > runner_up).then_some(tool)
}

/// A command after a verb of running, quoted or bare up to 命令: "执行'echo hi > a.txt'命令",
/// "执行ls命令".
static RUN_COMMAND: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r#"(?:执行|运行)\s*(?:命令\s*)?(?:'([^'\n]+)'|"([^"\n]+)"|`([^`\n]+)`|“([^”\n]+)”|‘([^’\n]+)’|([A-Za-z./~][^\n。，；！？\p{Han}]*?)\s*(?:命令|指令))"#,
    )
});

/// "传入张三作为参数", "参数为张三": the value given for a tool's one required property.
static GIVEN: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r#"(?:传入|输入)\s*["'“‘]?([^\s"'”’，。,]{1,40}?)["'”’]?\s*作为参数|参数(?:为|是)\s*["'“‘]?([^\s"'”’，。,]{1,40}?)["'”’]?(?:[，。,]|$)"#,
    )
});

/// Values the sentence from `from` states for `tool`: its command, or the value given
/// for its one required property.
fn stated_values(text: &str, from: usize, tool: &ToolSpec) -> Map<String, Value> {
    let mut args = Map::new();
    let whole = sentence_after(text, from);
    // A question ("…命令吗？") states nothing; a later step ("之后执行 cat a.txt") is not
    // this one's.
    let asked = text[(from + whole.len()).min(text.len())..].starts_with(['？', '?']);
    if asked || whole.contains("吗") {
        return args;
    }
    let sentence = ["然后", "之后", "接着", "随后", "再"]
        .iter()
        .filter_map(|w| whole.find(w))
        .min()
        .map_or(whole, |i| &whole[..i]);
    let required = tool.required();
    let [key] = required[..] else {
        return args;
    };
    let value = if kind_of(tool, key) == Kind::Command {
        RUN_COMMAND
            .captures(sentence)
            .and_then(|c| (1..=6).find_map(|i| c.get(i)))
    } else {
        // (Not a condition on what the user gives: "用户输入张三作为参数时会报错".)
        GIVEN
            .captures(sentence)
            .filter(|c| {
                c.get(0).is_some_and(|m| {
                    !sentence[m.end()..].starts_with(['时'])
                        && !sentence[m.end()..].starts_with("的时候")
                        && !sentence[..m.start()].ends_with("用户")
                })
            })
            .and_then(|c| c.get(1).or_else(|| c.get(2)))
    };
    if let Some(v) = value {
        let v = v.as_str().trim();
        if !v.is_empty() {
            args.insert(key.to_string(), Value::String(v.to_string()));
        }
    }
    args
}

/// Fill what a Chinese thought states for calls found without it ("我需要使用
/// execute_local_command工具来执行ls命令").
pub(super) fn fill_stated(text: &str, tools: &[ToolSpec], calls: &mut [ParsedCall]) {
    for c in calls.iter_mut() {
        let Some(tool) = tools.iter().find(|t| t.name == c.name) else {
            continue;
        };
        let Some(args) = c.arguments.as_object_mut() else {
            continue;
        };
        if !args.is_empty() || c.span.end > text.len() {
            continue;
        }
        let stated = stated_values(text, c.span.end, tool);
        args.extend(stated);
    }
}

/// Tools called by their Chinese name: 代码解释器 for `code_interpreter`, 计算器 for a
/// calculator.
const CHINESE_NAMES: &[(&str, &[&str])] = &[
    ("代码解释器", &["code", "interpreter"]),
    ("代码执行器", &["code"]),
    ("计算器", &["calculator"]),
    ("搜索引擎", &["search"]),
    ("浏览器", &["browser"]),
];

/// An expression written in the clause after the name ("计算123**23"): the code of a code
/// tool, the expression of a calculator.
static EXPRESSION: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(r"(?:计算|求|算)\s*([0-9(][0-9+\-*/%().^ ]*[0-9)])")
});

/// "我需要先调用代码解释器计算123**23": the one offered tool its Chinese name names, after a
/// first-person commitment, with the expression the clause states.
pub(super) fn chinese_name(
    text: &str,
    cfg: &ParserConfig,
    tools: &[ToolSpec],
    out: &mut StrategyOutput,
) {
    for (zh, words) in CHINESE_NAMES {
        let Some(at) = ["调用", "使用", "用"]
            .iter()
            .filter_map(|v| text.find(&format!("{v}{zh}")))
            .min()
        else {
            continue;
        };
        let named: Vec<&ToolSpec> = tools
            .iter()
            .filter(|t| {
                let ws = crate::schema::name_words(&t.name);
                words.iter().all(|w| ws.iter().any(|x| x == w))
            })
            .collect();
        let [tool] = named[..] else { continue };
        let sent_start = text[..at].rfind(['。', '！', '？', '\n']).map_or(0, |i| {
            i + text[i..].chars().next().map_or(1, char::len_utf8)
        });
        let pre = &text[sent_start..at];
        let sentence_end = text[at..]
            .find(['。', '！', '？', '?', '\n'])
            .map_or(text.len(), |i| at + i);
        // A commitment ("我需要先调用…"), not an offer, advice or what the user can do
        // ("我可以用…，您需要吗？", "我建议您用…", "我知道你可以用…").
        let committed = ["我需要", "我要", "我将", "我会", "我来", "我先", "让我"]
            .iter()
            .any(|w| pre.contains(w));
        if !committed
            || ["不", "没", "如果", "已经", "了", "你", "您", "可以", "建议"]
                .iter()
                .any(|n| pre.contains(n))
            || text[sentence_end..].starts_with(['？', '?'])
        {
            continue;
        }
        let name_end = text[at..].find(zh).map_or(at, |i| at + i + zh.len());
        let clause = text[name_end..]
            .split(['，', '。', '！', '？', '\n', ','])
            .next()
            .unwrap_or("");
        let mut args = Map::new();
        if let Some(expr) = EXPRESSION.captures(clause).and_then(|c| c.get(1)) {
            let key = tool
                .required()
                .into_iter()
                .find(|k| matches!(*k, "code" | "expression" | "expr" | "input" | "query"));
            if let Some(k) = key {
                args.insert(
                    k.to_string(),
                    Value::String(expr.as_str().trim().to_string()),
                );
            }
        }
        let span = at..name_end + clause.len();
        if let Some(c) = make_call(&tool.name, Value::Object(args), 0.6, span, tools, cfg) {
            out.calls.push(c);
            return;
        }
    }
}

/// "“北京市”、“上海市”、“天津市”和“重庆市”": names in quotes, or bare names, joined by 、 and
/// 和.
static QUOTED_LIST: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"“([^”\n]{1,16})”(?:\s*[、，,]\s*“[^”\n]{1,16}”)*\s*(?:[、，,]|和|以及|及)\s*“([^”\n]{1,16})”",
    )
});
static BARE_LIST: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(r"\p{Han}{2,6}(?:、\p{Han}{2,6})+(?:和|以及|及)\p{Han}{2,6}")
});
/// "第一次调用location是北京市，第二次是上海市": the value of each call in turn.
static ORDINAL: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"第[一二三四五六七八九十]次(?:调用)?[A-Za-z_]*\s*(?:是|为)\s*([^，。、,\s]{1,16})",
    )
});

/// "每个城市都需要调用一次get_current_weather函数…“北京市”、“上海市”、“天津市”和“重庆市”":
/// one call per name listed, for a tool of one required text property.
pub(super) fn each_in_chinese(text: &str, tools: &[ToolSpec], calls: &mut Vec<ParsedCall>) {
    let [call] = &calls[..] else { return };
    if !["每个", "每一个", "分别", "逐个", "依次", "各调用"]
        .iter()
        .any(|w| text.contains(w))
    {
        return;
    }
    let Some(tool) = tools.iter().find(|t| t.name == call.name) else {
        return;
    };
    let [key] = tool.required()[..] else { return };
    if !matches!(tool.prop_type(key), None | Some("string")) {
        return;
    }
    // (Not a list the text keeps out: "其他文件“a”、“b”和“c”我不会动".)
    let usable = |m: &regex::Match| {
        let from = text[..m.start()]
            .rfind(['。', '！', '？', '\n'])
            .map_or(0, |i| {
                i + text[i..].chars().next().map_or(1, char::len_utf8)
            });
        let to = text[m.end()..]
            .find(['。', '！', '？', '\n'])
            .map_or(text.len(), |i| m.end() + i);
        let sent = text.get(from..to).unwrap_or("");
        !["不", "没", "别", "保留", "除了", "其他"]
            .iter()
            .any(|n| sent.contains(n))
    };
    let quoted = QUOTED_LIST.find_iter(text).filter(usable).last().map(|m| {
        m.as_str()
            .split('“')
            .filter_map(|p| p.split_once('”').map(|(n, _)| n.trim().to_string()))
            .collect::<Vec<_>>()
    });
    let ordinal: Vec<String> = ORDINAL
        .captures_iter(text)
        .filter_map(|c| c.get(1).map(|m| m.as_str().to_string()))
        .collect();
    let bare = || {
        BARE_LIST.find_iter(text).filter(usable).last().map(|m| {
            m.as_str()
                .split(['、', '和', '及'])
                .map(|n| n.trim_start_matches('以').to_string())
                .filter(|n| !n.is_empty())
                .collect::<Vec<_>>()
        })
    };
    let names = quoted
        .filter(|q| q.len() >= 2)
        .or_else(|| (ordinal.len() >= 2).then_some(ordinal))
        .or_else(bare)
        .unwrap_or_default();
    if !(2..=crate::MAX_CALLS).contains(&names.len()) {
        return;
    }
    let one = calls.remove(0);
    for n in names {
        let mut c = one.clone();
        if let Some(a) = c.arguments.as_object_mut() {
            a.insert(key.to_string(), Value::String(n));
        }
        calls.push(c);
    }
}
