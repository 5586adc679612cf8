//! `{"tool_calls":[{"name","arguments"}],"done":bool}`, bare, fenced or inside prose.

use std::ops::Range;

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::{jsonscan, make_call, ParserConfig, StrategyOutput, ToolSpec};

/// A call object too broken to parse still names its tool:
/// `{"name": "date_ difference", "parameters": {"a": f(), …}}`.
static BROKEN_CALL: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r#"\{\s*"name"\s*:\s*"([^"\n]{1,80})"\s*,\s*"(?:parameters|arguments)"\s*:\s*\{"#,
    )
});

pub(crate) fn parse(text: &str, tools: &[ToolSpec], cfg: &ParserConfig) -> StrategyOutput {
    let mut out = StrategyOutput::default();
    if !text.contains('{') {
        return out;
    }
    // Objects shown as examples (or as calls already made), with whatever they hold.
    let mut shown: Vec<Range<usize>> = Vec::new();
    for (range, obj) in jsonscan::find_objects(text) {
        if out.calls.len() >= crate::MAX_CALLS {
            break;
        }
        if crate::native_text::shown_as_example(text, range.start) {
            shown.push(range);
            continue;
        }
        let list = [
            "tool_calls",
            "calls",
            "tool_call",
            "actions",
            "action",
            "commands",
        ]
        .iter()
        .find_map(|k| obj.get(*k))
        // AutoGPT: `{"thoughts": {…}, "command": {"name": …, "args": {…}}}` (a
        // `command` string is an exec tool's argument).
        .or_else(|| {
            obj.get("command")
                .filter(|c| c.get("name").is_some_and(Value::is_string))
        });
        let done = match obj.get("done") {
            Some(Value::Bool(b)) => Some(*b),
            Some(Value::String(s)) => Some(s.trim().eq_ignore_ascii_case("true")),
            _ => None,
        };
        let items: Vec<&Value> = match list {
            Some(Value::Array(a)) => a.iter().collect(),
            Some(v @ Value::Object(_)) => vec![v],
            // `{"action": "get_weather", "action_input": {…}}` (LangChain's JSON agent).
            // (`{"action": "search_vehicles", "parameters": {…}}` too.)
            Some(Value::String(_)) if args_of(&obj).is_some() => vec![&obj],
            Some(_) => Vec::new(),
            None if done.is_some() => Vec::new(),
            // A bare `{"name": …, "arguments": …}` object, or one wrapped in `function`.
            None if bare_call(&obj) || flat_call(&obj, tools, cfg, ends_answer(text, &range)) => {
                vec![&obj]
            }
            None => {
                // `{"get_current_weather": {"city": "New York"}, "nearby_events": […]}`: one
                // key is an offered tool's exact name and its object the tool's arguments
                // (the rest is what the model imagined of the result).
                if let Some((name, args)) =
                    keyed_by_tool(&obj, tools).filter(|_| ends_answer(text, &range))
                {
                    let span = with_fence(text, range);
                    out.markup.push(span.clone());
                    if let Some(c) = make_call(&name, args, 0.7, span, tools, cfg) {
                        out.calls.push(c);
                    }
                    continue;
                }
                if let Some((name, args)) = planned_step(&obj, text, &range, tools, cfg) {
                    let span = with_fence(text, range);
                    out.markup.push(span.clone());
                    if let Some(c) = make_call(&name, args, 0.8, span, tools, cfg) {
                        out.calls.push(c);
                    }
                }
                continue;
            }
        };
        if done == Some(true) {
            out.done = true;
        }
        // The finishing object carries the answer for the user.
        if out.final_text.is_none() {
            out.final_text = ["answer", "final_answer", "final", "response"]
                .iter()
                .find_map(|k| obj.get(*k).and_then(Value::as_str))
                .filter(|s| !s.trim().is_empty())
                .map(str::to_string);
        }
        let span = with_fence(text, range);
        // A terminal agent's whole answer: its analysis, its commands, whether it is done.
        let terminus = obj.get("commands").is_some()
            && text.trim() == text[span.clone()].trim()
            && [
                "analysis",
                "state_analysis",
                "explanation",
                "plan",
                "is_task_complete",
                "task_complete",
            ]
            .iter()
            .any(|k| obj.get(*k).is_some());
        out.markup.push(span.clone());
        let conf = if list.is_some() { 0.95 } else { 0.8 };
        for item in items {
            if finishes(item, tools, cfg) {
                out.done = true;
                continue;
            }
            let (name, args) = name_and_args(item);
            // Terminus' `"commands": [{"keystrokes": …, "is_blocking": …}]`: a listed step
            // without a name is the one offered tool it fills, required properties and all.
            // (Only in an answer that is such a step, not in data shown or quoted.)
            let name = name.or_else(|| {
                let o = item.as_object()?;
                if !terminus {
                    return None;
                }
                crate::sole(
                    tools
                        .iter()
                        .filter(|t| !t.required().is_empty() && t.fills(o)),
                )
                .map(|t| t.name.clone())
            });
            let Some(name) = name else { continue };
            // `{"tool": "file_system", "action": "read_file", …}`: a family named
            // where the offered tool is its action. (The arguments are copied only when
            // there is an action to fall back on.)
            let call = match item.get("action").and_then(Value::as_str) {
                Some(action) => make_call(&name, args.clone(), conf, span.clone(), tools, cfg)
                    .or_else(|| make_call(action, args, conf, span.clone(), tools, cfg)),
                None => make_call(&name, args, conf, span.clone(), tools, cfg),
            };
            if let Some(c) = call {
                out.calls.push(c);
            }
        }
    }
    if out.calls.is_empty() {
        trailing_arguments(text, tools, cfg, &mut out);
    }
    if out.calls.is_empty() {
        for caps in BROKEN_CALL.captures_iter(text) {
            let (Some(m), Some(name)) = (caps.get(0), caps.get(1)) else {
                continue;
            };
            if out.calls.len() >= crate::MAX_CALLS {
                break;
            }
            if crate::native_text::shown_as_example(text, m.start())
                || shown.iter().any(|r| r.contains(&m.start()))
            {
                continue;
            }
            let args_at = m.end() - 1;
            let args = jsonscan::value_at(text, args_at)
                .map_or_else(|| simple_pairs(&text[args_at..]), |(_, v)| v);
            if let Some(c) = make_call(name.as_str(), args, 0.6, m.start()..m.end(), tools, cfg) {
                out.calls.push(c);
            }
        }
    }
    out
}

/// A planner's answer ending with the tool for its next step: `{"tool": "find_file"}`
/// alone, or `{"next_step": {"purpose": …, "tool": "list_dir", "prompt": …}, …}` (the
/// step's words are for whoever fills the arguments, not arguments).
fn planned_step(
    obj: &Value,
    text: &str,
    range: &Range<usize>,
    tools: &[ToolSpec],
    cfg: &ParserConfig,
) -> Option<(String, Value)> {
    let after = text[range.end..].trim_start();
    if !after.trim_start_matches("```").trim().is_empty() {
        return None;
    }
    let nested = ["next_step", "next_action"]
        .iter()
        .find_map(|k| obj.get(*k));
    let step = nested.unwrap_or(obj).as_object()?;
    // A bare `{"tool": …}` is the whole answer; a plan may follow the model's words, but
    // not words that show it, give it as done or refuse ("Here is the config file:",
    // "The final plan was:", "我不会调用工具"), nor one that is finished.
    let before = text[..range.start]
        .trim_end()
        .trim_end_matches("```json")
        .trim_end_matches("```");
    let lower = before.to_lowercase();
    let shown = [
        "config",
        "example",
        " was",
        "were",
        "won't",
        "will not",
        "no tool",
        "yesterday",
        "log",
        "不会",
        "不需要",
        "不用",
        "示例",
        "配置",
    ]
    .iter()
    .any(|w| lower.contains(w));
    let finished = obj
        .get("status")
        .and_then(Value::as_str)
        .is_some_and(|st| matches!(st, "done" | "complete" | "completed" | "finished"));
    if (nested.is_none() && (step.len() != 1 || !before.trim().is_empty())) || shown || finished {
        return None;
    }
    let name = ["tool", "tool_name"]
        .iter()
        .find_map(|k| step.get(*k))
        .and_then(Value::as_str)?;
    let tool = crate::schema::resolve(name, tools, &cfg.aliases)?;
    // Its arguments, or the step's own keys that are the tool's properties.
    let args = args_of(&Value::Object(step.clone())).unwrap_or_else(|| {
        let props = tool.properties();
        Value::Object(
            step.iter()
                .filter(|(k, _)| props.iter().any(|(p, _)| p == k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        )
    });
    Some((name.to_string(), args))
}

/// The agent's own end, `{"action": {"type": "finish", "answer": …}}` or LangChain's
/// `{"action": "Final Answer", …}`: the thought beside it is no plan (unless a tool of
/// that name is offered).
fn finishes(item: &Value, tools: &[ToolSpec], cfg: &ParserConfig) -> bool {
    ["type", "action", "name", "tool"]
        .iter()
        .filter_map(|k| item.get(*k).and_then(Value::as_str))
        .any(|s| crate::react::ends_run(s.trim(), tools, cfg))
}

/// gpt-oss ends its reasoning with the arguments alone: "Let's search again.\n\n
/// {"query":"us_engineering_q2.txt"}". When they fit exactly one offered tool (every key
/// a property, every required property there), that tool is meant.
fn trailing_arguments(
    text: &str,
    tools: &[ToolSpec],
    cfg: &ParserConfig,
    out: &mut StrategyOutput,
) {
    let t = text.trim_end();
    if !t.ends_with('}') {
        return;
    }
    let Some(open) = t
        .rfind("\n{")
        .map(|i| i + 1)
        .or_else(|| t.starts_with('{').then_some(0))
    else {
        return;
    };
    let Some((range, Value::Object(args))) = jsonscan::value_at(t, open) else {
        return;
    };
    if range.end != t.len() || args.is_empty() || args.contains_key("name") {
        return;
    }
    // ("multiply\n{…}": the line before names the function, one not offered.)
    let line_before = t[..open]
        .trim_end()
        .rsplit('\n')
        .next()
        .unwrap_or("")
        .trim();
    let names_other = !line_before.is_empty()
        && line_before
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && crate::schema::resolve(line_before, tools, &cfg.aliases).is_none();
    if names_other {
        return;
    }
    let fits = |tool: &&ToolSpec| {
        let props = tool.properties();
        args.keys().all(|k| props.iter().any(|(p, _)| p == k))
            && tool.required().iter().all(|r| args.contains_key(*r))
    };
    let mut fitting = tools.iter().filter(fits);
    let (Some(tool), None) = (fitting.next(), fitting.next()) else {
        return;
    };
    if let Some(c) = make_call(&tool.name, Value::Object(args), 0.6, range, tools, cfg) {
        out.calls.push(c);
    }
}

static PAIR: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(r#""([A-Za-z_][\w-]{0,40})"\s*:\s*"([^"\\\n]{0,500})"\s*[,}]"#)
});

/// The `"key": "plain value"` pairs of an arguments object too damaged to parse (an
/// unescaped quote further on): what can be read for certain.
fn simple_pairs(s: &str) -> Value {
    let mut m = serde_json::Map::new();
    for c in PAIR.captures_iter(&s[..s.len().min(8192)]) {
        if let (Some(k), Some(v)) = (c.get(1), c.get(2)) {
            m.entry(k.as_str().to_string())
                .or_insert_with(|| Value::String(v.as_str().to_string()));
        }
    }
    Value::Object(m)
}

/// The object (in its fence, if any) is the end of the answer: nothing after it but
/// whitespace or an agent's `TERMINATE`.
fn ends_answer(text: &str, range: &Range<usize>) -> bool {
    let span = with_fence(text, range.clone());
    // (A list's closing bracket may follow: `Action:\n[{…}]`.)
    let after = text[span.end..]
        .trim()
        .trim_start_matches([']', '\n', ' '])
        .trim();
    after.is_empty() || after == "TERMINATE"
}

fn keyed_by_tool(obj: &Value, tools: &[ToolSpec]) -> Option<(String, Value)> {
    let o = obj.as_object()?;
    let mut found = o.iter().filter_map(|(k, v)| {
        let t = tools.iter().find(|t| t.name == *k)?;
        let args = v.as_object()?;
        (!args.is_empty() && t.fills(args)).then(|| (t.name.clone(), v.clone()))
    });
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

fn bare_call(obj: &Value) -> bool {
    let named = obj.get("name").is_some_and(Value::is_string)
        || obj
            .get("function")
            .and_then(|f| f.get("name"))
            .is_some_and(Value::is_string);
    named
        && args_of(obj)
            .or_else(|| obj.get("function").and_then(args_of))
            .is_some()
}

/// `{"service": "cover.close_cover", "target_device": "cover.kitchen"}`: an offered
/// tool's name under a naming key, its arguments beside it.
fn flat_call(obj: &Value, tools: &[ToolSpec], cfg: &ParserConfig, ends: bool) -> bool {
    let (Some(name), args) = name_and_args(obj) else {
        return false;
    };
    // A key that can only name a command names it with no inputs too; a one-string
    // value is the one argument (`{"tool_name": "internet_search", "parameters": "…"}`).
    // Both only as the answer's last word: an object quoted in prose ("the previous step
    // was: {…}. That's what …") is a record, not a call.
    let names_only = obj.get("command_name").is_some() && (args.is_null() || args.is_object());
    let one_value = args.as_str().is_some_and(|a| !a.trim().is_empty());
    let by_command_name = obj.get("command_name").is_some();
    ((ends && (names_only || one_value))
        || (args.as_object().is_some_and(|a| !a.is_empty()) && (ends || !by_command_name)))
        && crate::schema::resolve(&name, tools, &cfg.aliases).is_some()
}

pub(crate) fn name_and_args(item: &Value) -> (Option<String>, Value) {
    // `{"function": {…}, "result": "…"}`: the record of a call already made.
    if item.get("result").is_some() && (item.get("function").is_some() || args_of(item).is_some()) {
        return (None, Value::Null);
    }
    // Wrappers: `{"tool_call": {…}}`, `{"action": {"name": …, …}}`.
    for key in ["tool_call", "action", "function_call"] {
        if let Some(inner @ Value::Object(_)) = item.get(key) {
            let (name, args) = name_and_args(inner);
            if name.is_some() {
                // Arguments may sit beside the wrapper instead of inside it.
                let args = if args.is_null() {
                    args_of(item).unwrap_or(Value::Null)
                } else {
                    args
                };
                return (name, args);
            }
        }
    }
    let func = item.get("function");
    let name = item
        .get("name")
        .or_else(|| item.get("tool"))
        .or_else(|| item.get("tool_name"))
        .or_else(|| item.get("function_name"))
        // ModelScope-Agent's `<|startofthink|>{"api_name": …, "parameters": …}`.
        .or_else(|| item.get("api_name"))
        .or_else(|| item.get("$function"))
        // Home Assistant's `{"service": "light.turn_off", …}`, Langroid's
        // `{"request": "duckduckgo_search", …}`: the other keys are the arguments.
        .or_else(|| item.get("service"))
        .or_else(|| item.get("request"))
        // Foobara's agent: `{"command_name": "Capybaras::FindAllCapybaras", "inputs": {…}}`.
        .or_else(|| item.get("command_name"))
        // (`{"action": "search_vehicles", "parameters": {…}}` too.)
        .or_else(|| {
            item.get("action")
                .filter(|_| item.get("action_input").is_some() || args_of(item).is_some())
        })
        .or_else(|| func.and_then(|f| f.get("name")))
        .or_else(|| func.filter(|f| f.is_string()))
        .and_then(|v| v.as_str())
        .map(str::to_string);
    // `{"get_weather": {"city": "Seattle"}}`: the name as the only key.
    if name.is_none() {
        if let Some((k, v @ Value::Object(_))) = item
            .as_object()
            .filter(|o| o.len() == 1)
            .and_then(|o| o.iter().next())
        {
            if k.chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '-'))
            {
                // (`{"duckduckgo_search": {"parameters": {"query": …}}}`: the arguments
                // under their own key.)
                // (Not `input` or `params`, which may be a property of the tool's own.)
                let inner = v
                    .as_object()
                    .filter(|o| o.len() == 1)
                    .and_then(|o| o.get("parameters").or_else(|| o.get("arguments")))
                    .filter(|a| a.is_object())
                    .cloned();
                return (Some(k.clone()), inner.unwrap_or_else(|| v.clone()));
            }
        }
    }
    let args = args_of(item)
        .or_else(|| func.and_then(args_of))
        .or_else(|| inline_args(item))
        .unwrap_or(Value::Null);
    (name, args)
}

fn args_of(v: &Value) -> Option<Value> {
    [
        "arguments",
        "args",
        "parameters",
        "input",
        "params",
        "tool_input",
        "tool_arguments",
        // LangChain4j's prompt-injected tools: `{"name": …, "inputs": {…}}`.
        "inputs",
        "action_input",
        // KaibanJS's agents write it in camel case.
        "actionInput",
        // `{"tool_name": "exec", "properties": {…}}`: the schema's word for them.
        "properties",
    ]
    .iter()
    .find_map(|k| v.get(*k))
    .cloned()
}

/// `{"name": "kubectl", "reason": "…", "command": "get pods"}`: the arguments are the
/// keys that are not about the call itself.
fn inline_args(item: &Value) -> Option<Value> {
    const ABOUT: &[&str] = &[
        "name",
        "type",
        "id",
        "reason",
        "thought",
        "description",
        "function",
        "tool",
        "tool_name",
        "function_name",
        "$function",
        "service",
        "request",
        "command_name",
    ];
    let obj = item.as_object()?;
    let rest: serde_json::Map<String, Value> = obj
        .iter()
        .filter(|(k, _)| !ABOUT.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!rest.is_empty()).then_some(Value::Object(rest))
}

/// Grow a JSON range over a surrounding Markdown code fence.
fn with_fence(text: &str, r: Range<usize>) -> Range<usize> {
    let before = &text[..r.start];
    let trimmed = before.trim_end();
    let mut start = r.start;
    if let Some(i) = trimmed.rfind("```") {
        let tag = &trimmed[i + 3..];
        if tag.chars().all(|c| c.is_ascii_alphanumeric()) {
            start = i;
        }
    }
    let after = &text[r.end..];
    let mut end = r.end;
    let ta = after.trim_start();
    if start != r.start && ta.starts_with("```") {
        end = r.end + (after.len() - ta.len()) + 3;
    }
    // A special token right around it (`<|startofthink|>…<|endofthink|>`) is markup too.
    let head = text[..start].trim_end();
    if head.ends_with("|>") {
        if let Some(i) = head.rfind("<|") {
            start = i;
        }
    }
    let tail = text[end..].trim_start();
    if tail.starts_with("<|") {
        if let Some(i) = tail.find("|>") {
            end = text.len() - tail.len() + i + 2;
        }
    }
    start..end
}
