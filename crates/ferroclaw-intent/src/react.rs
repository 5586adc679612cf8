//! `Thought:` / `Action:` / `Action Input:` blocks, and DSPy's ReAct fields
//! (`[[ ## next_tool_name ## ]]` / `[[ ## next_tool_args ## ]]`), which carry the same steps.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::harmony::floor;
use crate::schema::strip_quotes;
use crate::{jsonscan, make_call, ParserConfig, StrategyOutput, ToolSpec};

// (An empty thought before its action on one line, "Thought: Action: terminal", is the
// action's label.)
static LABEL: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?mi)^(?:[ \t>*_-]*(?:thought[ \t]*:[ \t]*)?(thought|action input|action|observation|final answer|tool name|tool input|tool caption|tool output|tool result)[ \t*_]*:[ \t]*|[ \t]*\[\[ ## (next_thought|next_tool_name|next_tool_args|completed) ## \]\][ \t]*\n?)|[.!?。](?-i:(Action)):[ \t]*",
    )
});

/// The Bee agent's fields (`Tool Name:` / `Tool Caption:` / `Tool Input:` /
/// `Tool Output:`) as the ReAct labels they stand for.
fn bee_label(label: &str) -> &str {
    match label {
        "tool name" => "action",
        "tool input" => "action input",
        "tool caption" => "caption",
        "tool output" | "tool result" => "observation",
        other => other,
    }
}

/// A DSPy field as the ReAct label it stands for.
fn field_label(field: &str) -> &'static str {
    match field {
        "next_tool_name" => "action",
        "next_tool_args" => "action input",
        "completed" => "completed",
        _ => "thought",
    }
}
static DONE_NAMES: &[&str] = &[
    "done",
    "finish",
    "finished",
    "final",
    "final_answer",
    "final answer",
    "complete",
    "stop",
    "none",
];

/// A name the agent ends its run with (`finish`, `Final Answer`, `done`). An offered
/// tool of that name — DSPy's `finish`, smolagents' `final_answer` — is called like any
/// other.
pub(crate) fn ends_run(name: &str, tools: &[ToolSpec], cfg: &ParserConfig) -> bool {
    let lname = name.to_ascii_lowercase();
    lname != "none"
        && DONE_NAMES.contains(&lname.as_str())
        && crate::schema::resolve(name, tools, &cfg.aliases).is_none()
}

pub(crate) fn parse(text: &str, tools: &[ToolSpec], cfg: &ParserConfig) -> StrategyOutput {
    let mut out = StrategyOutput::default();
    let lower = text.to_ascii_lowercase();
    if !lower.contains("action")
        && !lower.contains("tool name")
        && !lower.contains("final answer")
        && !text.contains("[[ ## next_tool_name ## ]]")
    {
        return out;
    }
    // (label, label start, value start, value end)
    // (A trace's first thought: an action glued to a sentence counts only after it.)
    let thought_at = text.find("Thought:");
    let labels: Vec<(String, usize, usize)> = LABEL
        .captures_iter(text)
        .filter_map(|c| {
            let m = c.get(0)?;
            // ("… ở Quận 1, TP.HCM.Action: search_course_info(…)": an action glued to the
            // thought's last sentence, a short line's end.)
            if let Some(glued) = c.get(3) {
                let rest = &text[m.end()..floor(text, (m.end() + 300).min(text.len()))];
                let short = rest.contains('\n') || m.end() + 300 >= text.len();
                let traced = thought_at.is_some_and(|t| t < glued.start());
                return (short && traced).then(|| ("action".to_string(), glued.start(), m.end()));
            }
            let label = match c.get(1) {
                Some(l) => bee_label(&l.as_str().to_ascii_lowercase()).to_string(),
                None => field_label(c.get(2)?.as_str()).to_string(),
            };
            Some((label, m.start(), m.end()))
        })
        // (A caption between the tool's name and its input says nothing to parse.)
        .filter(|(label, _, _)| label != "caption")
        .collect();
    // Whether a thought or a result came after the last action read.
    let mut stepped_past = false;
    // Whether a thought or a result followed a call read.
    let mut thought_after_call = false;
    let mut i = 0;
    while i < labels.len() && out.calls.len() < crate::MAX_CALLS {
        let (label, lstart, vstart) = (&labels[i].0, labels[i].1, labels[i].2);
        let vend = labels.get(i + 1).map_or(text.len(), |l| l.1);
        match label.as_str() {
            "final answer" => {
                // Actions before the model's own final answer in one text were imagined
                // when it wrote a result or a thought after them: the turn ended with the
                // answer. (A `Final Answer:` line inside an action's input is its text.)
                if stepped_past {
                    out.calls.clear();
                }
                out.done = true;
                let body = text[vstart..].trim();
                if !body.is_empty() {
                    out.final_text = Some(body.to_string());
                }
                out.markup.push(lstart..text.len());
                break;
            }
            "action" => {
                // A later step after a thought or result of the model's own: the harness
                // runs the first action and stops the text there; the rest was imagined.
                if thought_after_call {
                    i += 1;
                    continue;
                }
                // (Where the step begins: its thought, when one came right before.)
                let block = match i.checked_sub(1).map(|p| &labels[p]) {
                    Some((l, s, _)) if l == "thought" => *s,
                    _ => lstart,
                };
                let line_end = text[vstart..].find('\n').map_or(text.len(), |n| vstart + n);
                let line = text[vstart..line_end].trim();
                // A tool whose name has spaces ("Delegate work to coworker") is the
                // whole line (not `get_weather(city="Paris")`, whose name the resolver
                // would also find).
                // (`average_dog_weight: Border Collie` is a name and its input.)
                let whole = !line.contains(['(', '[', '{'])
                    && crate::schema::resolve(line, tools, &cfg.aliases)
                        .is_some_and(|t| crate::schema::same_name(line, &t.name));
                // `Internet Search Tool(user_query) - Scrapes …`: a spaced name before its
                // brackets, its description glued on.
                let spaced = line.find(['(', '[']).map(|b| line[..b].trim()).filter(|n| {
                    n.contains(' ') && crate::schema::resolve(n, tools, &cfg.aliases).is_some()
                });
                let (name, inline) = if whole {
                    (line, None)
                } else if let Some(n) = spaced {
                    (n, None)
                } else {
                    split_inline(line)
                };
                if ends_run(name, tools, cfg) {
                    out.done = true;
                    // DSPy's fields after its end are markup too.
                    let dspy = text[lstart..].trim_start().starts_with("[[");
                    out.markup
                        .push(lstart..if dspy { text.len() } else { vend });
                    break;
                }
                // `Action: None`: no step this time.
                if name.eq_ignore_ascii_case("none")
                    && crate::schema::resolve(name, tools, &cfg.aliases).is_none()
                {
                    i += 1;
                    continue;
                }
                let mut end = vend.max(line_end);
                // `get_weather(city="Paris")`: Python arguments, read as Python.
                let pythonic = crate::native_text::pythonic_calls(line)
                    .and_then(|(mut calls, _)| (calls.len() == 1).then(|| calls.pop()))
                    .flatten()
                    .filter(|(n, _)| n == name)
                    .map(|(n, a)| crate::native_text::positional_args(a, &n, tools, cfg));
                let mut input: Option<Value> = pythonic
                    .or_else(|| bracket_values(line, inline, name, tools, cfg))
                    .or_else(|| inline.map(|s| input_value(s).0));
                if let Some(next) = labels.get(i + 1) {
                    if next.0 == "action input" {
                        let iend = labels.get(i + 2).map_or(text.len(), |l| l.1);
                        let (mut v, used) = input_value_at(text, next.2, iend);
                        // A JSON object none of whose keys LangChain's one-string tool
                        // has (`{"expression": "sqrt(1215)"}` for its `input`): the agent
                        // passes the text as it is.
                        let raw = text[next.2..used].trim();
                        let lone_string = crate::schema::resolve(name, tools, &cfg.aliases)
                            .map(|t| t.properties())
                            .filter(|p| p.len() == 1)
                            .and_then(|p| {
                                let (key, schema) = p[0];
                                let string =
                                    schema.get("type").and_then(Value::as_str) == Some("string");
                                (string && ["input", "__arg1"].contains(&key)).then_some(key)
                            });
                        if let (Some(key), Value::Object(obj)) = (lone_string, &v) {
                            if !obj.is_empty() && !obj.contains_key(key) && raw.starts_with('{') {
                                v = serde_json::json!({ key: raw });
                            }
                        }
                        // An input read whole ends the action: a final answer after it
                        // is the model's own (not a here-document's `<<EOF` lines).
                        stepped_past = !text[next.2..used].contains("<<");
                        input = Some(v);
                        end = used;
                        i += 1;
                    }
                }
                let args = input.unwrap_or(Value::Null);
                // (A step indented under "The example turn shows:", its thought with it,
                // is the prompt's example.)
                let call = make_call(name, args, 0.9, lstart..end, tools, cfg)
                    .filter(|_| !quoted_example(text, block));
                if let Some(c) = call {
                    out.calls.push(c);
                }
                out.markup.push(lstart..end);
            }
            // LangChain's conversational agent answers itself after "Do I need to use a
            // tool? No" (its `AI:` line): as a final answer, the actions before were
            // imagined.
            "thought" if said_no_tool(&text[vstart..vend]) => {
                out.calls.clear();
                out.done = true;
                out.markup.push(lstart..text.len());
                break;
            }
            "thought" | "observation" | "completed" => {
                stepped_past = !out.calls.is_empty();
                // (A result the model wrote itself, or a thought that has it already:
                // "Now that we have calculated 20+8=28, …". Not "(pending)", nor a plan
                // going on, "then fetch the docs".)
                let said = text[vstart..vend].trim().to_ascii_lowercase();
                let imagined = match label.as_str() {
                    "observation" => {
                        !said.is_empty()
                            && !said.starts_with(['(', '[', '<'])
                            && said != "..."
                            && !["pending", "waiting", "wait for"]
                                .iter()
                                .any(|w| said.contains(w))
                    }
                    _ => RESULT_HAD.iter().any(|c| said.contains(c)),
                };
                thought_after_call |= !out.calls.is_empty() && imagined;
                out.markup.push(lstart..vend);
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// "Do I need to use a tool? No" (not "Not for the greeting…", "Now…").
fn said_no_tool(thought: &str) -> bool {
    let lower = thought.to_ascii_lowercase();
    lower
        .split_once("do i need to use a tool? no")
        .is_some_and(|(_, rest)| !rest.starts_with(|c: char| c.is_alphanumeric()))
}

/// Words of a thought that has its last action's result already.
const RESULT_HAD: &[&str] = &[
    "now that",
    "i have found",
    "i have calculated",
    "we have calculated",
    "i've found",
    "we've found",
    "i've calculated",
    "the result is",
    "the result was",
];

/// A step set in (indented, or in a code fence) under a line that introduces an example.
fn quoted_example(text: &str, block: usize) -> bool {
    let line = crate::fuzzy::line_start(text, block);
    // (A label's match starts at its line, the indentation included.)
    let indented =
        text[line..block].contains([' ', '\t']) || text[block..].starts_with([' ', '\t']);
    let window = crate::harmony::floor(text, line.saturating_sub(8 * 1024));
    let fenced = text[window..line]
        .rfind("```")
        .filter(|_| text[window..line].matches("```").count() % 2 == 1);
    // (A fenced step under "The answer format is:", "Формат ответа такой:", "格式如下："
    // shows the format.)
    let format_shown = fenced.is_some_and(|open| {
        let before = text[window..window + open].trim_end();
        let lead = crate::fuzzy::last_sentence(before).to_lowercase();
        before.ends_with([':', '：'])
            && ["format", "формат", "格式"]
                .iter()
                .any(|w| lead.contains(w))
    });
    format_shown
        || ((indented || fenced.is_some()) && crate::native_text::shown_as_example(text, line))
}

/// `get_attraction[北京, 霾 26°C 微风]`: as many comma-separated values in brackets as
/// the tool has required properties (two or more), in their order.
fn bracket_values(
    line: &str,
    inline: Option<&str>,
    name: &str,
    tools: &[ToolSpec],
    cfg: &ParserConfig,
) -> Option<Value> {
    let inner = inline?;
    if !line.trim_end_matches(['`', '*']).ends_with(']') || inner.starts_with(['{', '[', '"', '\''])
    {
        return None;
    }
    let tool = crate::schema::resolve(name, tools, &cfg.aliases)?;
    let required = tool.required();
    let parts: Vec<&str> = inner.split([',', '，']).map(str::trim).collect();
    if required.len() < 2 || parts.len() != required.len() || parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    // ("get_weather[Paris, France]" with `unit` among the required: "France" is no unit.)
    let fits = |k: &str, v: &str| {
        let enumerated = tool
            .prop(k)
            .and_then(|d| d.get("enum"))
            .and_then(Value::as_array);
        enumerated.is_none_or(|e| e.iter().any(|x| x.as_str() == Some(v)))
            && (!matches!(tool.prop_type(k), Some("integer" | "number"))
                || v.parse::<f64>().is_ok())
    };
    if required.iter().zip(&parts).any(|(k, v)| !fits(k, v)) {
        return None;
    }
    Some(Value::Object(
        required
            .into_iter()
            .zip(parts)
            .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
            .collect(),
    ))
}

/// `web_search("x")` / `read[config.yaml]` → name and inline input.
fn split_inline(line: &str) -> (&str, Option<&str>) {
    let line = line.trim_matches(|c: char| c == '`' || c == '*');
    if let Some(open) = line.find(['(', '[', '{', ' ']) {
        let name = &line[..open];
        let rest = line[open..].trim();
        let inner = rest
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .or_else(|| rest.strip_prefix('[').and_then(|r| r.strip_suffix(']')))
            .unwrap_or(rest);
        let inner = inner.trim();
        return (name, (!inner.is_empty()).then_some(inner));
    }
    (line, None)
}

fn input_value_at(text: &str, start: usize, limit: usize) -> (Value, usize) {
    let body = &text[start..limit];
    let lead = body.len() - body.trim_start().len();
    let s = start + lead;
    if text[s..].starts_with('{') || text[s..].starts_with('[') {
        if let Some((r, v)) = jsonscan::value_at(text, s) {
            return (v, r.end);
        }
    }
    // Plain text: up to the end of the line, or, when no label follows, the block up to
    // a blank line (code of several lines, a report with its title line), as LangChain
    // reads it.
    let rest = body.trim_start();
    let block = if limit == text.len() {
        let para = code_block(rest);
        // (A label the stop sequence cut, `\nObserv`, ends it.)
        // (Nor do the model's own words after it: "I will wait for the observation.",
        // "(Note: …)"; a quoted first line is the whole input.)
        let first = para.lines().next().unwrap_or("").trim();
        let quoted = first.len() >= 2
            && ((first.starts_with('"') && first.ends_with('"'))
                || (first.starts_with('\'') && first.ends_with('\'')));
        let cut = para
            .match_indices('\n')
            .map(|(i, _)| i)
            .find(|&i| {
                let line = para[i + 1..].lines().next().unwrap_or("").trim();
                let lower = line.to_ascii_lowercase();
                let cut_label = line.len() >= 2
                    && ["observation:", "thought:", "final answer:", "action:"]
                        .iter()
                        .any(|l| l.starts_with(&lower));
                let remark = [
                    "i ", "i'll", "i will", "i'm", "we ", "let me", "(", "note", "wait",
                ]
                .iter()
                .any(|p| lower.starts_with(p));
                quoted || cut_label || remark
            })
            .unwrap_or(para.len());
        para[..cut].trim_end()
    } else {
        rest.lines().next().unwrap_or("")
    };
    (input_value(block).0, s + block.len())
}

/// The input's first paragraph, or, for code, its paragraphs while they are code
/// (`def f(n):` … blank line … `print(f(10))`).
fn code_block(rest: &str) -> &str {
    let mut paras = rest.split("\n\n");
    let first = paras.next().unwrap_or("");
    // (A block's head ends with its colon, "for x in y:"; "for the record, …" and "if you
    // need more, ask me." are sentences.)
    let code_line = |l: &str| {
        let t = l.trim_start();
        let head = ["for ", "if ", "while ", "with ", "try:", "elif ", "else:"]
            .iter()
            .any(|k| t.starts_with(k));
        l.starts_with([' ', '\t'])
            || (head && t.trim_end().ends_with(':'))
            || (t.starts_with("from ") && t.contains(" import "))
            || CODE_START.iter().any(|k| t.starts_with(k))
            || CODE_CALL.is_match(t)
    };
    if !first.lines().next().is_some_and(code_line) {
        return first;
    }
    let mut end = first.len();
    for p in paras {
        if p.trim().is_empty() || !p.lines().all(|l| l.trim().is_empty() || code_line(l)) {
            break;
        }
        end += 2 + p.len();
    }
    &rest[..end]
}

/// Words that open a line of Python.
const CODE_START: &[&str] = &[
    "def ", "class ", "import ", "return ", "print(", "async ", "@",
];
/// `name(…` or `name = …` opening a line.
static CODE_CALL: LazyLock<Regex> =
    LazyLock::new(|| ferroclaw_types::literal_regex(r"^[A-Za-z_][\w.]*\s*(?:\(|=[^=]|\[)"));

fn input_value(s: &str) -> (Value, bool) {
    let t = s.trim();
    if t.starts_with('{') {
        if let Some(v) = jsonscan::parse_lenient(t) {
            return (v, true);
        }
    }
    // (`Action Input: «запрос».`: a sentence's full stop after the closing quote.)
    let t = t
        .strip_suffix('.')
        .filter(|q| {
            q.ends_with(['"', '»', '\u{201c}', '\u{201d}'])
                && q.starts_with(['"', '«', '\u{201c}', '„'])
        })
        .unwrap_or(t);
    // (`Action Input: "pwd`: the stop sequence took the closing quote.)
    let v = strip_quotes(t);
    let v = match v.strip_prefix(['"', '\'', '`']) {
        Some(rest) if !v.contains('\n') && !rest.contains(&v[..1]) => rest,
        _ => v,
    };
    (Value::String(v.to_string()), false)
}
