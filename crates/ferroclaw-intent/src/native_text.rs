//! The native tool-call formats of other model families, written as text when the
//! server did not turn them into structured calls:
//!
//! * Qwen3-Coder XML: `<tool_call><function=NAME><parameter=KEY>VALUE</parameter>…`
//!   (closing tags optional), and `<function=NAME>{json}</function>` (Llama 3.1's
//!   custom format).
//! * Hermes: `<tool_call>{"name": …, "arguments": …}</tool_call>`.
//! * Llama 3.x `<|python_tag|>{…}; {…}`, Llama 4 `<|python_start|>…<|python_end|>`.
//! * Mistral `[TOOL_CALLS][{…}]` and `[TOOL_CALLS]name[ARGS]{…}` (also `[FUNCTION]`).
//! * DeepSeek `<|tool_call_begin|>function<|tool_sep|>NAME ```json {…}``` ` (full-width
//!   tokens are made ASCII by [`crate::normalize`]).
//! * Granite `<|tool_call|>[…]`.
//! * Gemma 4 `<|tool_call>call:NAME{key:<|"|>text<|"|>}<tool_call|>` and FunctionGemma
//!   `<start_function_call>call:NAME{key:<escape>text<escape>}<end_function_call>`.
//! * Kimi K2 `<|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{…}`.
//! * MiniMax and DeepSeek DSML `<invoke name="NAME"><parameter name="KEY">…`.
//! * ChatGLM3: the name on its own line, then `tool_call(k=v)` in a Python fence.
//! * Flat calls under another naming key are read by [`crate::guided`].
//! * Pythonic calls making up the whole answer: `get_weather(location="Dublin")`,
//!   `[get_todays_date(), get_weather(location="…")]`, also in a ```` ```tool_code ````
//!   fence.
//! * A tag named after an offered tool: `<terminal_command>ls -la</terminal_command>`.
//!
//! Every name must resolve to an offered tool; broken JSON is repaired first.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

use crate::{guided, jsonscan, make_call, schema, ParserConfig, StrategyOutput, ToolSpec};

/// Explicit call markup: the model meant a call.
const MARKED: f32 = 0.95;
/// A whole answer that is nothing but pythonic calls to offered tools.
const PYTHONIC: f32 = 0.85;
/// A tag that happens to carry an offered tool's name.
const TOOL_TAG: f32 = 0.75;

pub(crate) fn parse(text: &str, tools: &[ToolSpec], cfg: &ParserConfig) -> StrategyOutput {
    let mut out = StrategyOutput::default();
    if tools.is_empty() {
        return out;
    }
    let cx = Cx { text, tools, cfg };
    let mut taken: Vec<Range<usize>> = Vec::new();
    // Every marked format needs one of these bytes; plain prose skips them all.
    let angle = text.contains('<');
    if angle {
        tool_call_tags(&cx, &mut out, &mut taken);
        function_tags(&cx, &mut out, &mut taken);
        python_tag(&cx, &mut out, &mut taken);
        deepseek(&cx, &mut out, &mut taken);
        invokes(&cx, &mut out, &mut taken);
        gemma_calls(&cx, &mut out, &mut taken);
        kimi(&cx, &mut out, &mut taken);
        named_call_tags(&cx, &mut out, &mut taken);
        if out.calls.is_empty() {
            attribute_calls(&cx, &mut out, &mut taken);
        }
        if out.calls.is_empty() {
            name_and_argument_tags(&cx, &mut out, &mut taken);
        }
        if out.calls.is_empty() {
            orphan_parameters(&cx, &mut out);
        }
    } else if text.contains("[TOOL_CALL]") {
        tool_call_tags(&cx, &mut out, &mut taken);
    }
    if text.contains("[TOOL_CALLS") || text.contains("[FUNCTION]") {
        mistral(&cx, &mut out, &mut taken);
    }
    if text.contains("```") {
        tool_code_fences(&cx, &mut out, &mut taken);
        chatglm_calls(&cx, &mut out, &mut taken);
    }
    // (Before the other pythonic readers: a smolagents step binds its strings first.)
    if out.calls.is_empty()
        && (text.contains("Code:\n```")
            || text.contains("<code>\n")
            || text.contains("Answer:\n```py"))
    {
        code_agent_step(text, tools, cfg, &mut out);
    }
    if out.calls.is_empty() && text.contains(QWEN_CODE) {
        qwen_code_blocks(text, tools, cfg, &mut out);
    }
    if out.calls.is_empty() && text.contains("\n{") {
        name_line_objects(text, tools, cfg, &mut out);
    }
    if out.calls.is_empty() {
        json_string_list(text, tools, cfg, &mut out);
    }
    if out.calls.is_empty() && (text.contains("('") || text.contains("(\"")) {
        python_tuples(text, tools, cfg, &mut out);
    }
    if out.calls.is_empty() {
        pythonic_answer(text, tools, cfg, &mut out);
    }
    if out.calls.is_empty() && text.contains('(') {
        pythonic_lines(text, tools, cfg, &mut out);
    }
    if out.calls.is_empty() && text.trim_end().ends_with(']') {
        bracket_action_answer(text, tools, cfg, &mut out);
    }
    if out.calls.is_empty() {
        shell_fence_answer(text, tools, cfg, &mut out);
    }
    if out.calls.is_empty() && text.contains("```") {
        executor_blocks(text, tools, cfg, &mut out);
    }
    if out.calls.is_empty() && !text.contains("```") {
        bare_code_answer(text, tools, cfg, &mut out);
    }
    if out.calls.is_empty() && text.contains('|') {
        pipe_lines(text, tools, cfg, &mut out);
    }
    if out.calls.is_empty() && text.contains("```") {
        command_fence(text, tools, cfg, &mut out);
    }
    if out.calls.is_empty() && text.contains("```") {
        tool_named_fence(text, tools, cfg, &mut out);
    }
    if out.calls.is_empty() {
        key_value_call(text, tools, cfg, &mut out);
    }
    if text.contains(QWEN_AGENT_FUNCTION) {
        qwen_agent_calls(text, tools, cfg, &mut out);
    }
    if out.calls.is_empty() && text.contains('!') {
        bang_command(text, tools, cfg, &mut out);
    }
    if out.calls.is_empty() && angle {
        tool_named_tags(text, tools, cfg, &mut out);
    }
    out.calls.sort_by_key(|c| c.span.start);
    out
}

static ARROW_TOOL: LazyLock<Regex> =
    LazyLock::new(|| ferroclaw_types::literal_regex(r#"(?:tool|name)\s*=>\s*"([^"\n]{1,80})""#));
static ARROW_ARG: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r#"(?:--|\b)([A-Za-z_][\w-]{0,40})\s*(?:=>\s*)?"([^"\n]{0,500})""#,
    )
});

/// What every recogniser reads.
#[derive(Clone, Copy)]
struct Cx<'a> {
    text: &'a str,
    tools: &'a [ToolSpec],
    cfg: &'a ParserConfig,
}

fn overlaps(taken: &[Range<usize>], r: &Range<usize>) -> bool {
    taken.iter().any(|t| t.start < r.end && r.start < t.end)
}

fn push(
    out: &mut StrategyOutput,
    name: &str,
    args: Value,
    conf: f32,
    span: Range<usize>,
    tools: &[ToolSpec],
    cfg: &ParserConfig,
) -> bool {
    if out.calls.len() >= crate::MAX_CALLS {
        return false;
    }
    let args = positional_args(args, name, tools, cfg);
    match make_call(name, args, conf, span.clone(), tools, cfg) {
        Some(c) => {
            out.calls.push(c);
            out.markup.push(span);
            true
        }
        None => false,
    }
}

/// Where the text of `range` starts once its leading whitespace is skipped.
fn first_text(text: &str, range: Range<usize>) -> usize {
    let s = &text[range.clone()];
    range.start + (s.len() - s.trim_start().len())
}

/// Finds `needle` (ASCII case-insensitive) at or after `from`.
fn find_ci(text: &str, from: usize, needle: &str) -> Option<usize> {
    let hay = text.as_bytes();
    let n = needle.as_bytes();
    if n.is_empty() || from >= hay.len() || n.len() > hay.len() - from {
        return None;
    }
    let first = n[0].to_ascii_lowercase();
    (from..=hay.len() - n.len()).find(|&i| {
        hay[i].to_ascii_lowercase() == first && hay[i..i + n.len()].eq_ignore_ascii_case(n)
    })
}

/// A needle's next occurrence, remembered: recognisers walk openers left to right, so
/// a needle found at `q` (or absent) after `p` need not be searched again before `q`.
/// Keeps every loop linear when an opener repeats with no closer in sight.
#[derive(Default)]
struct Next {
    from: usize,
    hit: Option<usize>,
    searched: bool,
}

impl Next {
    fn at(&mut self, text: &str, from: usize, needle: &str) -> Option<usize> {
        let reusable = self.searched && from >= self.from && self.hit.is_none_or(|h| h >= from);
        if !reusable {
            self.from = from;
            self.hit = find_ci(text, from, needle);
            self.searched = true;
        }
        self.hit
    }
}

/// Where blocks of one kind end in one text: at the first of `ends` (consumed) or of
/// `stops` (not consumed), else at the end of the text.
struct Block<'a> {
    text: &'a str,
    ends: Vec<(&'a str, Next)>,
    stops: Vec<(&'a str, Next)>,
}

impl<'a> Block<'a> {
    fn new(text: &'a str, ends: &[&'a str], stops: &[&'a str]) -> Self {
        Self {
            text,
            ends: ends.iter().map(|n| (*n, Next::default())).collect(),
            stops: stops.iter().map(|n| (*n, Next::default())).collect(),
        }
    }

    /// The body of a block opened at `body_start`, and where the block ends.
    fn at(&mut self, body_start: usize) -> (Range<usize>, usize) {
        let text = self.text;
        let mut best: Option<(usize, usize)> = None;
        for (needle, next) in &mut self.ends {
            if let Some(i) = next.at(text, body_start, needle) {
                if best.is_none_or(|(b, _)| i < b) {
                    best = Some((i, i + needle.len()));
                }
            }
        }
        for (needle, next) in &mut self.stops {
            if let Some(i) = next.at(text, body_start, needle) {
                if best.is_none_or(|(b, _)| i < b) {
                    best = Some((i, i));
                }
            }
        }
        let (body_end, end) = best.unwrap_or((text.len(), text.len()));
        (body_start..body_end, end)
    }
}

// ---------------------------------------------------------------- <tool_call>

const TOOL_CALL_OPEN: &[&str] = &[
    "<tool_call>",
    "<tool_calls>",
    "<function_call>",
    "<functioncall>",
    "<toolcall>",
    "<function>",
    "<tool-use>",
    "<tool_use>",
    "<|tool_call|>",
    "[TOOL_CALL]",
    // Gemini: `<tool_code>grep_search(pattern='…')</tool_code>`.
    "<tool_code>",
    // MINT's code agents: `<execute> print(wikipedia_search('…')) </execute>`.
    "<execute>",
];

fn tool_call_tags(cx: &Cx<'_>, out: &mut StrategyOutput, taken: &mut Vec<Range<usize>>) {
    let Cx { text, tools, cfg } = *cx;
    for open in TOOL_CALL_OPEN {
        let close = if open.starts_with("<|") {
            String::new()
        } else if let Some(tag) = open.strip_prefix('[') {
            format!("[/{tag}")
        } else {
            format!("</{}", &open[1..])
        };
        let ends: &[&str] = if close.is_empty() {
            &[]
        } else {
            &[close.as_str()]
        };
        let mut blocks = Block::new(text, ends, TOOL_CALL_OPEN);
        each_block(text, open, &mut blocks, taken, |body, span| {
            call_body(text, body, span, tools, cfg, out)
        });
    }
}

/// Every block `open` starts (ended as `blocks` says) that overlaps no call read
/// before; `read` gets its body and whole span and says whether it read a call there.
fn each_block(
    text: &str,
    open: &str,
    blocks: &mut Block<'_>,
    taken: &mut Vec<Range<usize>>,
    mut read: impl FnMut(Range<usize>, Range<usize>) -> bool,
) {
    let mut pos = 0;
    // (Each try reads to the JSON's end, or the text's: a few per text.)
    let mut json_tries = 0;
    while let Some(start) = find_ci(text, pos, open) {
        let body_start = start + open.len();
        let (mut body, mut end) = blocks.at(body_start);
        // (A JSON body runs to its own end: a tag inside one of its strings,
        // `"content": "<function>…"`, ends nothing.)
        let lead = first_text(text, body_start..text.len());
        let cut_in_string = text[lead..body.end.max(lead)]
            .bytes()
            .filter(|&b| b == b'"')
            .count()
            % 2
            == 1;
        if text[lead..].starts_with('{') && cut_in_string && json_tries < 8 {
            json_tries += 1;
            if let Some((r, _)) = jsonscan::value_at(text, lead).filter(|(r, _)| r.end > body.end) {
                let (tail, after) = blocks.at(r.end);
                body = body.start..tail.end;
                end = after;
            }
        }
        pos = end.max(body_start);
        let span = start..end.max(body.end);
        if !overlaps(taken, &span) && !shown_as_example(text, start) && read(body, span.clone()) {
            taken.push(span);
        }
    }
}

/// Words that present what follows as an example for the reader.
const EXAMPLE_LEADS: &[&str] = &[
    "for example",
    "for instance",
    "e.g.",
    "example:",
    "you would use",
    "you would write",
    "you can use",
    "you can call",
    "you could use",
    "in this format",
    "like this:",
    "looks like:",
    "here's how",
    "here is how",
    // Not now: what it would do, or a call already made.
    "hypothetically",
    "the function call was",
    "the tool call was",
    "the call was",
    "i called",
    "i made the",
    // Not to be done: "Never run this without a backup:".
    "never run",
    "never do",
    "don't run",
    "do not run",
    "avoid running",
];

/// The sentence before a block shows it to the reader ("For example, to get the
/// weather for London, you would use:").
pub(crate) fn shown_as_example(text: &str, start: usize) -> bool {
    // A later line of a fenced block is shown or not as the whole block is: what comes
    // before it is the block's first lines, not the sentence that presents them.
    // (Fences are counted within the 8 KB before it, so each call costs the same
    // however long the text: a block open longer than that is taken as closed.)
    let window = crate::harmony::floor(text, start.saturating_sub(8 * 1024));
    let start = match text[window..start].rfind("```") {
        Some(open) if text[window..start].matches("```").count() % 2 == 1 => window + open,
        _ => start,
    };
    let from = crate::harmony::floor(text, start.saturating_sub(240));
    // Past the opening tags or fence of the block itself (`<tool_call>{"name": …`,
    // ```` ```json ````).
    let mut before = text[from..start].trim_end();
    loop {
        let fence = before.rfind("```").filter(|&i| {
            before[i + 3..]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        if let Some(i) = fence {
            before = before[..i].trim_end();
        } else if let Some(open) = before.strip_suffix('>').and_then(|b| b.rfind('<')) {
            before = before[..open].trim_end();
        } else {
            break;
        }
    }
    let sentence = crate::fuzzy::last_sentence(before);
    let lower = sentence.to_ascii_lowercase();
    EXAMPLE_LEADS.iter().any(|l| lower.contains(l))
        // "The example turn shows:", "Example request:", "The example in the docs:" (not
        // "Let me list the example directory:").
        || (lower.ends_with(':') && introduces_example(&lower))
        // "Next, I would search for banks using `get_services`:" (not "I would like to").
        || (["i would ", "we would "].iter().any(|l| lower.contains(l))
            && !lower.contains("would like"))
        || under_example_heading(text, start)
}

/// A sentence whose word "example" names the example ("Example of the format:", "an
/// example:", "The example turn shows:"), not a thing called so ("the example config:").
fn introduces_example(lower: &str) -> bool {
    let ws: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    ws.iter().enumerate().any(|(i, w)| {
        matches!(*w, "example" | "examples")
            && (i == 0 && ws.len() == 1
                || ws.get(i + 1).is_none_or(|n| {
                    matches!(
                        *n,
                        "of" | "request"
                            | "requests"
                            | "invocation"
                            | "in"
                            | "output"
                            | "response"
                            | "call"
                            | "calls"
                            | "turn"
                            | "shows"
                            | "below"
                            | "format"
                            | "usage"
                    )
                })
                || i.checked_sub(1)
                    .is_some_and(|p| matches!(ws[p], "an" | "for" | "following")))
    })
}

/// Words of a heading that names usage examples ("## Usage examples",
/// "## Verwendungsbeispiele", "### 使用例").
const EXAMPLE_HEADING_WORDS: &[&str] = &[
    "example",
    "examples",
    "usage",
    "sample",
    "samples",
    "beispiel",
    "beispiele",
    "verwendungsbeispiele",
    "anwendungsbeispiele",
    "ejemplo",
    "ejemplos",
    "uso",
    "exemple",
    "exemples",
    "utilisation",
    "esempio",
    "esempi",
    "exemplo",
    "exemplos",
    "пример",
    "примеры",
    "использования",
    "示例",
    "例子",
    "用法",
    "使用例",
    "调用示例",
];

/// Words such a heading may hold beside them ("## Tool call examples", "### Example
/// output"); a heading with any other word ("## Disk usage", "# Example project setup")
/// is about something else.
const EXAMPLE_HEADING_COMPANIONS: &[&str] = &[
    "of",
    "de",
    "d",
    "code",
    "api",
    "tool",
    "tools",
    "call",
    "calls",
    "json",
    "request",
    "requests",
    "output",
    "outputs",
    "format",
    "invocation",
    "response",
    "responses",
];

/// Whether the nearest Markdown heading over `start`, or its parent, names usage
/// examples (within 8 KB; lines in code fences are no headings).
fn under_example_heading(text: &str, start: usize) -> bool {
    let from = crate::harmony::floor(text, start.saturating_sub(8 * 1024));
    let mut in_fence = false;
    // (level, names examples) of the headings seen, the open ones by level.
    let mut open: Vec<(usize, bool)> = Vec::new();
    for line in text[from..start].lines() {
        let t = line.trim_start();
        if t.starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        let hashes = t.bytes().take_while(|&b| b == b'#').count();
        if in_fence || hashes == 0 || hashes > 6 || !t[hashes..].starts_with(' ') {
            continue;
        }
        let heading = t[hashes..].to_lowercase();
        let words: Vec<&str> = heading
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty() && !w.chars().all(|c| c.is_ascii_digit()))
            .collect();
        let examples = words.iter().any(|w| EXAMPLE_HEADING_WORDS.contains(w))
            && words.iter().all(|w| {
                EXAMPLE_HEADING_WORDS.contains(w) || EXAMPLE_HEADING_COMPANIONS.contains(w)
            });
        open.retain(|(l, _)| *l < hashes);
        open.push((hashes, examples));
    }
    open.iter().rev().take(2).any(|(_, e)| *e)
}

/// A tool's name under its key in JSON too broken to read (spaces in keys allowed).
static BROKEN_NAME: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r#"^\{\s*"\s*(?:name|tool|tool_name|function)\s*"\s*:\s*"([^"\n]{1,80})""#,
    )
});

/// One `<tool_call>` body: Qwen XML, JSON (one object or a list), or `name {json}`.
fn call_body(
    text: &str,
    body: Range<usize>,
    span: Range<usize>,
    tools: &[ToolSpec],
    cfg: &ParserConfig,
    out: &mut StrategyOutput,
) -> bool {
    let inner = text[body.clone()].trim();
    let lead = first_text(text, body.clone());
    if inner.is_empty() {
        return false;
    }
    if find_ci(inner, 0, "<function=").is_some() {
        return xml_functions(text, body, tools, cfg, out) > 0;
    }
    // `<invoke name=…>` inside: read by `invokes`.
    if find_ci(inner, 0, "<invoke name=").is_some() {
        return false;
    }
    // `<read>\n<parameter=filePath>…`: Qwen XML whose `<function=read>` became the
    // tool's name as a tag.
    if let Some(named) = inner.strip_prefix('<').and_then(|r| r.split_once('>')) {
        let (tag, rest) = named;
        if find_ci(rest, 0, "<parameter=").is_some()
            && schema::resolve(tag, tools, &cfg.aliases).is_some()
        {
            let args = Value::Object(xml_parameters(rest));
            return push(out, tag, args, MARKED, span, tools, cfg);
        }
    }
    // `<name>read_file</name><path>a.md</path>`: the name and each argument as tags
    // (also `<function>terminal</function>` then JSON).
    for (open, close) in [("<name>", "</name>"), ("<function>", "</function>")] {
        let Some(n) = find_ci(inner, 0, open) else {
            continue;
        };
        let ns = n + open.len();
        if let Some(ne) = find_ci(inner, ns, close) {
            let name = inner[ns..ne].trim();
            if name.is_empty() || name.contains(|c: char| c.is_whitespace() || "{}<>\"".contains(c))
            {
                continue;
            }
            let rest = &inner[ne + close.len()..];
            let args = match find_ci(rest, 0, "<arguments>") {
                Some(a) => {
                    let body = &rest[a + "<arguments>".len()..];
                    let body =
                        body[..find_ci(body, 0, "</arguments>").unwrap_or(body.len())].trim();
                    // (`<arguments><arg name="degrees" type="int">20</arg>`: tags, not JSON.)
                    match schema::resolve(name, tools, &cfg.aliases) {
                        Some(t) if body.starts_with('<') => tagged_arguments(body, t),
                        _ => jsonscan::value_at(body, 0).map_or(Value::Null, |(_, v)| v),
                    }
                }
                None if rest.trim_start().starts_with('{') => {
                    jsonscan::value_at(rest.trim(), 0).map_or(Value::Null, |(_, v)| v)
                }
                None => schema::resolve(name, tools, &cfg.aliases)
                    .map_or(Value::Null, |t| Value::Object(child_tags(rest, t))),
            };
            return push(out, name, args, MARKED, span, tools, cfg);
        }
    }
    // GLM: `NAME\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>…`.
    if let Some(k) = find_ci(inner, 0, "<arg_key>") {
        let name = inner[..k].trim();
        return push(
            out,
            name,
            Value::Object(glm_args(&inner[k..])),
            MARKED,
            span,
            tools,
            cfg,
        );
    }
    // GLM with its first `<arg_key>` lost: `NAMEkey</arg_key><arg_value>v…`.
    if let Some(ke) = find_ci(inner, 0, "</arg_key>") {
        let head = inner[..ke].trim();
        let glued = tools
            .iter()
            .filter(|t| {
                head.len() > t.name.len()
                    && head
                        .get(..t.name.len())
                        .is_some_and(|h| h.eq_ignore_ascii_case(&t.name))
            })
            .max_by_key(|t| t.name.len());
        if let Some(t) = glued {
            let body = format!("<arg_key>{}", &inner[t.name.len()..]);
            let args = Value::Object(glm_args(&body));
            return push(out, &t.name, args, MARKED, span, tools, cfg);
        }
    }
    let first = inner.as_bytes()[0];
    if first == b'{' || first == b'[' {
        let mut found = false;
        for v in json_values(text, lead, body.end) {
            found |= json_calls(&v, span.clone(), MARKED, tools, cfg, out);
        }
        if found {
            return true;
        }
        // `{" tool ": " get _battery _level ", " args ": {" }}` (Qwen 3.5 on a phone):
        // JSON past repair still names its tool; one that takes nothing is called.
        if let Some(name) = BROKEN_NAME.captures(inner).and_then(|c| c.get(1)) {
            let bare = schema::resolve(name.as_str(), tools, &cfg.aliases)
                .is_some_and(|t| t.required().is_empty());
            if bare {
                return push(out, name.as_str(), Value::Null, MARKED, span, tools, cfg);
            }
        }
    }
    // `{tool => "read_file", args => {--path "a.md"}}` (invented by some agents' models;
    // typographic quotes and dashes as a chat renders them, `–action “list”`).
    let arrow: std::borrow::Cow<str> = if inner.contains(['\u{201C}', '\u{201D}', '\u{2013}']) {
        inner
            .replace(['\u{201C}', '\u{201D}'], "\"")
            .replace('\u{2013}', "--")
            .into()
    } else {
        inner.into()
    };
    if let Some(c) = ARROW_TOOL.captures(&arrow) {
        if let Some(name) = c.get(1) {
            let mut args = Map::new();
            for a in ARROW_ARG.captures_iter(&arrow[name.end()..]) {
                if let (Some(k), Some(v)) = (a.get(1), a.get(2)) {
                    args.insert(
                        k.as_str().to_string(),
                        Value::String(v.as_str().to_string()),
                    );
                }
            }
            return push(
                out,
                name.as_str(),
                Value::Object(args),
                MARKED,
                span,
                tools,
                cfg,
            );
        }
    }
    // `name\n{json}` / `name {json}` / `name(args)`, the JSON maybe fenced.
    if let Some(i) = inner.find(['{', '(']) {
        let head = inner[..i].trim_end();
        let name = head
            .strip_suffix("```json")
            .or_else(|| head.strip_suffix("```"))
            .unwrap_or(head)
            .trim();
        if !name.is_empty() && !name.contains(char::is_whitespace) {
            if inner.as_bytes()[i] == b'{' {
                if let Some((_, v)) = jsonscan::value_at(text, lead + i) {
                    return push(out, name, v, MARKED, span, tools, cfg);
                }
            } else if let Some((calls, _)) = pythonic_calls(inner) {
                let mut found = false;
                for (n, a) in calls {
                    found |= push(out, &n, a, MARKED, span.clone(), tools, cfg);
                }
                return found;
            } else if let Some(args) = colon_args(&inner[i..]) {
                return push(out, name, args, MARKED, span, tools, cfg);
            }
        }
    }
    // `<function>terminal</function>\n{"command": …}`: the name alone in its tag, the
    // arguments right after it.
    let after = first_text(text, span.end.min(text.len())..text.len());
    if text[after..].starts_with('{') && schema::resolve(inner, tools, &cfg.aliases).is_some() {
        if let Some((r, v)) = jsonscan::value_at(text, after) {
            return push(out, inner, v, MARKED, span.start..r.end, tools, cfg);
        }
    }
    // `<tool_calls> src/a.c </tool_calls>`: a bare value, for the one tool that needs one.
    let bare = !inner.contains(['<', '{', '(', '\n']) && !inner.contains(char::is_whitespace);
    let needing: Vec<&ToolSpec> = tools.iter().filter(|t| !t.required().is_empty()).collect();
    if let ([tool], true) = (needing.as_slice(), bare) {
        if schema::resolve(inner, tools, &cfg.aliases).is_none() {
            if let Some(p) = tool.primary_property() {
                let mut args = Map::new();
                args.insert(p.to_string(), Value::String(inner.to_string()));
                return push(
                    out,
                    &tool.name,
                    Value::Object(args),
                    TOOL_TAG,
                    span,
                    tools,
                    cfg,
                );
            }
        }
    }
    false
}

/// `(city: Antwerp, days: 3)`: a signature-shaped call with bare values, as small
/// models write inside call tags. Values stay text; the schema types them.
fn colon_args(s: &str) -> Option<Value> {
    let body = s.trim().strip_prefix('(')?.strip_suffix(')')?;
    let mut args = Map::new();
    for part in body.split(',').filter(|p| !p.trim().is_empty()) {
        let (k, v) = part.split_once([':', '='])?;
        let k = k.trim();
        if k.is_empty() || !k.chars().all(|c| c.is_alphanumeric() || c == '_') {
            return None;
        }
        args.insert(
            k.to_string(),
            Value::String(schema::strip_quotes(v.trim()).to_string()),
        );
    }
    Some(Value::Object(args))
}

/// JSON values laid one after another (separated by whitespace, `,` or `;`).
fn json_values(text: &str, mut pos: usize, end: usize) -> Vec<Value> {
    let mut vals = Vec::new();
    while pos < end && vals.len() < crate::MAX_CALLS {
        let rest = &text[pos..end];
        let Some(off) = rest.find(['{', '[']) else {
            break;
        };
        // Only separators between values.
        if !rest[..off]
            .chars()
            .all(|c| c.is_whitespace() || c == ',' || c == ';')
        {
            break;
        }
        let at = pos + off;
        let slice_end = jsonscan::balanced_end(&text[..end], at, false).unwrap_or(end);
        match jsonscan::value_at(&text[..slice_end], at) {
            Some((r, v)) => {
                pos = r.end;
                vals.push(v);
            }
            None => break,
        }
    }
    vals
}

/// The sole tool a call without a name is for: `{"arguments": {…}}` whose keys are all
/// that tool's properties and hold every one it requires.
fn nameless_owner<'a, 'o>(
    o: &'o Map<String, Value>,
    tools: &'a [ToolSpec],
) -> Option<(&'a ToolSpec, &'o Map<String, Value>)> {
    let args = o
        .get("arguments")
        .or_else(|| o.get("parameters"))?
        .as_object()
        .filter(|a| !a.is_empty())?;
    if o.len() != 1 {
        return None;
    }
    crate::sole(tools.iter().filter(|t| t.fills(args))).map(|t| (t, args))
}

/// Calls in one JSON value: an object with a name, or a list of them.
fn json_calls(
    v: &Value,
    span: Range<usize>,
    conf: f32,
    tools: &[ToolSpec],
    cfg: &ParserConfig,
    out: &mut StrategyOutput,
) -> bool {
    match v {
        // `["python", {"code": …}]`: an offered tool's name and its arguments as a pair.
        Value::Array(items)
            if items.len() == 2
                && items[1].is_object()
                && guided::name_and_args(&items[1]).0.is_none()
                && items[0]
                    .as_str()
                    .is_some_and(|n| crate::schema::resolve(n, tools, &cfg.aliases).is_some()) =>
        {
            let name = items[0].as_str().unwrap_or_default();
            push(out, name, items[1].clone(), conf, span, tools, cfg)
        }
        Value::Array(items) => {
            let mut found = false;
            for item in items {
                found |= json_calls(item, span.clone(), conf, tools, cfg, out);
            }
            found
        }
        Value::Object(o) => {
            if let Some(list) = o.get("tool_calls").or_else(|| o.get("calls")) {
                return json_calls(list, span, conf, tools, cfg, out);
            }
            let (name, args) = guided::name_and_args(v);
            match name {
                // (`{"arguments": {…}}` alone reads as a call named "arguments".)
                Some(n) if !matches!(n.as_str(), "arguments" | "parameters") => {
                    push(out, &n, args, conf, span, tools, cfg)
                }
                // Granite's `<|tool_call|>[{"arguments": {…}}]` with the name left out:
                // the one offered tool whose properties the arguments fill, required
                // ones included.
                _ => match nameless_owner(o, tools) {
                    Some((t, args)) => push(
                        out,
                        &t.name,
                        Value::Object(args.clone()),
                        conf,
                        span,
                        tools,
                        cfg,
                    ),
                    None => false,
                },
            }
        }
        _ => false,
    }
}

// ---------------------------------------------------------------- Gemma call:NAME{…}

/// Gemma's call blocks and the token that delimits their strings.
const GEMMA_BLOCKS: [(&str, &str, &str); 2] = [
    ("<|tool_call>", "<tool_call|>", "<|\"|>"),
    ("<start_function_call>", "<end_function_call>", "<escape>"),
];

fn gemma_calls(cx: &Cx<'_>, out: &mut StrategyOutput, taken: &mut Vec<Range<usize>>) {
    let Cx { text, tools, cfg } = *cx;
    for (open, close, quote) in GEMMA_BLOCKS {
        let mut blocks = Block::new(text, &[close], &[open]);
        each_block(text, open, &mut blocks, taken, |body, span| {
            // (A block quoted inline, `` `<start_function_call>x<end_function_call>` ``,
            // is shown, not made.)
            let quoted = text[..span.start].ends_with('`');
            gemma_call(&text[body.clone()], quote)
                .or_else(|| {
                    (!quoted)
                        .then(|| bare_call_name(&text[body]))
                        .flatten()
                        .map(|n| (n, Value::Object(Map::new())))
                })
                .map(|(name, args)| enveloped(name, args, tools, cfg))
                .is_some_and(|(name, args)| push(out, &name, args, MARKED, span, tools, cfg))
        });
    }
    // The block's tokens dropped by the server: the answer is the bare `call:NAME{…}`
    // (or GLM's bare `NAME<arg_key>k</arg_key><arg_value>v</arg_value>`).
    let start = first_text(text, 0..text.len());
    if out.calls.is_empty() && text[start..].starts_with("call:") {
        let span = start..text.trim_end().len();
        if let Some((name, args)) = gemma_call(&text[span.clone()], GEMMA_BLOCKS[0].2) {
            if push(out, name, args, MARKED, span.clone(), tools, cfg) {
                taken.push(span);
            }
        }
    }
    // (After an answer, or behind another token: "…cheetahs!\n<|begin_of_box|>NAME\n
    // <arg_key>…".)
    if out.calls.is_empty() {
        if let Some(k) = find_ci(text, start, "<arg_key>") {
            let head = text[start..k].trim_end();
            let line = head.rfind('\n').map_or(0, |i| i + 1);
            let token = head[line..].rfind("|>").map_or(line, |i| line + i + 2);
            let name = head[token..].trim();
            // The markup (and the token before the name) leaves the text; the answer stays.
            let span = start + line..text.trim_end().len();
            if !name.is_empty()
                && !name.contains(char::is_whitespace)
                && push(
                    out,
                    name,
                    Value::Object(glm_args(&text[k..])),
                    MARKED,
                    span.clone(),
                    tools,
                    cfg,
                )
            {
                taken.push(span);
            }
        }
    }
}

/// `call:tool_call{args:{query:"…"},id:<|"|>memory_search<|"|>}`: a name that is no
/// tool, whose arguments name the tool (`id`, `name`, `tool`) and hold its own (`args`,
/// `arguments`, `parameters`).
fn enveloped(name: &str, args: Value, tools: &[ToolSpec], cfg: &ParserConfig) -> (String, Value) {
    if schema::resolve(name, tools, &cfg.aliases).is_some() {
        return (name.to_string(), args);
    }
    let Value::Object(m) = &args else {
        return (name.to_string(), args);
    };
    let inner = ["id", "name", "tool", "function"]
        .iter()
        .filter_map(|k| m.get(*k).and_then(Value::as_str))
        .find(|n| schema::resolve(n, tools, &cfg.aliases).is_some());
    let own = ["args", "arguments", "parameters"]
        .iter()
        .find_map(|k| m.get(*k).filter(|v| v.is_object()));
    match (inner, own) {
        (Some(n), Some(a)) => (n.to_string(), a.clone()),
        // A flat envelope: the keys beside the name are the arguments.
        (Some(n), None) => {
            let rest: Map<String, Value> = m
                .iter()
                .filter(|(k, v)| {
                    !(matches!(k.as_str(), "id" | "name" | "tool" | "function")
                        && v.as_str() == Some(n))
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            (n.to_string(), Value::Object(rest))
        }
        _ => (name.to_string(), args),
    }
}

/// `<start_function_call>create_calendar_event\n<end_of_turn>`: a small model's call
/// block holding only the name (with or without `call:`), its arguments never written.
fn bare_call_name(body: &str) -> Option<&str> {
    let body = body.trim();
    let body = body.strip_prefix("call:").unwrap_or(body);
    let end = body.find('<').unwrap_or(body.len());
    let name = body[..end].trim();
    let rest = body[end..].trim();
    let only_tokens = rest.is_empty() || (rest.starts_with('<') && rest.ends_with('>'));
    let identifier = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    (identifier && only_tokens && !rest.contains('\n')).then_some(name)
}

/// `call:NAME{…}` or `call:NAME(…)`: the name and the arguments.
fn gemma_call<'a>(body: &'a str, quote: &str) -> Option<(&'a str, Value)> {
    let rest = body.trim().strip_prefix("call:")?;
    let open = rest.find(['{', '('])?;
    let args = if rest[open..].starts_with('{') {
        gemma_args(&rest[open..], quote)
    } else {
        // `call:search(query: "news")`: the signature form.
        colon_args(&rest[open..].replace(quote, "\""))
    }?;
    Some((rest[..open].trim(), args))
}

/// `{key:<escape>text<escape>,n:5}` as JSON: the delimited strings become JSON strings
/// (their quotes and backslashes escaped), bare keys are left to the lenient parser.
fn gemma_args(body: &str, quote: &str) -> Option<Value> {
    let mut json = String::with_capacity(body.len() + 8);
    let pieces: Vec<&str> = body.split(quote).collect();
    // An odd number of delimiters: the last one closes a string some other quote opened
    // (`pattern:'\s+'<|"|>}`); it goes.
    let unmatched = pieces.len().is_multiple_of(2);
    for (i, piece) in pieces.iter().enumerate() {
        if i % 2 == 0 || (unmatched && i == pieces.len() - 1) {
            json.push_str(piece);
        } else {
            json.push('"');
            for c in piece.chars() {
                match c {
                    '"' => json.push_str("\\\""),
                    '\\' => json.push_str("\\\\"),
                    '\n' => json.push_str("\\n"),
                    c => json.push(c),
                }
            }
            json.push('"');
        }
    }
    let (_, v) = jsonscan::value_at(&json, 0)?;
    v.is_object().then_some(v)
}

// ---------------------------------------------------------------- ChatGLM3

/// ChatGLM3 names the tool on a line of its own, then writes the arguments as
/// `tool_call(k=v, …)` in a Python fence.
fn chatglm_calls(cx: &Cx<'_>, out: &mut StrategyOutput, taken: &mut Vec<Range<usize>>) {
    let Cx { text, tools, cfg } = *cx;
    let mut pos = 0;
    while let Some(at) = find_ci(text, pos, "tool_call(") {
        pos = at + 1;
        let before = text[..at].trim_end();
        let Some(fence) = before
            .strip_suffix("```python")
            .or_else(|| before.strip_suffix("```"))
        else {
            continue;
        };
        let name_line = fence.trim_end().rsplit('\n').next().unwrap_or("").trim();
        if schema::resolve(name_line, tools, &cfg.aliases).is_none() {
            continue;
        }
        let window = crate::harmony::floor(text, (at + 2048).min(text.len()));
        let Some((mut calls, used)) = pythonic_calls(&text[at..window]) else {
            continue;
        };
        let start = fence.trim_end().len() - name_line.len();
        let span = start..at + used;
        if overlaps(taken, &span) {
            continue;
        }
        if let Some((_, args)) = calls.pop() {
            if push(out, name_line, args, MARKED, span.clone(), tools, cfg) {
                taken.push(span);
            }
        }
    }
}

// ---------------------------------------------------------------- <tool_call name=…>

/// `<tool_call id="call_1" name="NAME">{json}</tool_call>`: the name as an attribute.
fn named_call_tags(cx: &Cx<'_>, out: &mut StrategyOutput, taken: &mut Vec<Range<usize>>) {
    const OPEN: &str = "<tool_call ";
    let Cx { text, tools, cfg } = *cx;
    let mut blocks = Block::new(text, &["</tool_call>"], &[OPEN]);
    each_block(text, OPEN, &mut blocks, taken, |body, span| {
        let inner = &text[body.clone()];
        let Some(gt) = inner.find('>') else {
            return false;
        };
        let attrs = &inner[..gt];
        let Some(at) = attrs.find("name=") else {
            return false;
        };
        let (name, _) = tag_key(&attrs[at + "name=".len()..]);
        let lead = first_text(text, body.start + gt + 1..body.end);
        let args = jsonscan::value_at(&text[..body.end], lead).map_or(Value::Null, |(_, v)| v);
        push(out, name, args, MARKED, span, tools, cfg)
    });
}

/// `<call_record tool="read"><parameter name="path">a.md</parameter></call_record>`: a
/// tag of any name whose `tool=` (or `name=`) attribute is an offered tool, with
/// parameter children, plain child tags or a JSON body.
fn attribute_calls(cx: &Cx<'_>, out: &mut StrategyOutput, taken: &mut Vec<Range<usize>>) {
    let Cx { text, tools, cfg } = *cx;
    let mut pos = 0;
    while let Some(off) = text[pos..].find('<') {
        let start = pos + off;
        pos = start + 1;
        let rest = &text[start + 1..];
        let tag_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ':')))
            .unwrap_or(rest.len());
        if tag_len == 0 || !rest[tag_len..].starts_with(char::is_whitespace) {
            continue;
        }
        let Some(gt) = rest[tag_len..].find('>').map(|g| tag_len + g) else {
            break;
        };
        let attrs = &rest[tag_len..gt];
        let Some(at) = ["tool=", "tool_name=", "name="]
            .iter()
            .find_map(|a| attrs.find(a).map(|i| i + a.len()))
        else {
            continue;
        };
        let (name, _) = tag_key(&attrs[at..]);
        let Some(tool) = schema::resolve(name, tools, &cfg.aliases) else {
            continue;
        };
        let body_start = start + 1 + gt + 1;
        let close = format!("</{}>", &rest[..tag_len]);
        let Some(close_at) = find_ci(text, body_start, &close) else {
            continue;
        };
        let span = start..close_at + close.len();
        if overlaps(taken, &span) || shown_as_example(text, start) {
            continue;
        }
        let args = tagged_arguments(text[body_start..close_at].trim(), tool);
        if push(out, name, args, MARKED, span.clone(), tools, cfg) {
            taken.push(span.clone());
        }
        pos = span.end;
    }
}

/// `<name>task\n</parameter>\n<parameter=description>…</function>`: Qwen XML whose
/// `<function=` opener was lost; the tool is the last offered name written before the
/// first parameter.
fn orphan_parameters(cx: &Cx<'_>, out: &mut StrategyOutput) {
    let Cx { text, tools, cfg } = *cx;
    let Some(first) = find_ci(text, 0, "<parameter=") else {
        return;
    };
    let from = crate::harmony::floor(text, first.saturating_sub(200));
    let head = &text[from..first];
    let mut plain = String::with_capacity(head.len());
    let mut in_tag = false;
    for c in head.chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                plain.push(' ');
            }
            c if !in_tag => plain.push(c),
            _ => {}
        }
    }
    let closed = find_ci(text, first, "</function>");
    let end = closed.map_or(text.len(), |i| i + "</function>".len());
    if shown_as_example(text, from) {
        return;
    }
    let Some(name) = plain
        .split_whitespace()
        .last()
        .filter(|n| schema::resolve(n, tools, &cfg.aliases).is_some())
    else {
        // The call's head lost, its tail kept (`…</parameter>\n<parameter=description>
        // …</parameter>\n</function>`): the one offered tool that has every parameter
        // left.
        // (A name that is written but not offered, `<name>plan`, is no call; and only a
        // tail cut inside a parameter, `…</parameter>\n<parameter=`, is a call's —
        // not parameters quoted in prose.)
        if find_ci(head, 0, "<name>").is_some()
            || find_ci(head, 0, "<function").is_some()
            || !head.trim_end().ends_with("</parameter>")
        {
            return;
        }
        let args = xml_parameters(&text[first..end]);
        let owner = crate::sole(tools.iter().filter(|t| t.holds_keys(&args)));
        if let (Some(_), false, Some(t)) = (closed, args.is_empty(), owner) {
            push(
                out,
                &t.name,
                Value::Object(args),
                MARKED,
                first..end,
                tools,
                cfg,
            );
        }
        return;
    };
    let args = Value::Object(xml_parameters(&text[first..end]));
    let start = text[from..first].rfind(name).map_or(first, |i| from + i);
    push(out, name, args, MARKED, start..end, tools, cfg);
}

// (`<action>Calculator</action><action_input>…`: ReAct's fields written as tags.)
const NAME_TAGS: &[&str] = &["tool_name", "function_name", "tool", "action"];
const ARGUMENT_TAGS: &[&str] = &[
    "arguments",
    "args",
    "parameters",
    "params",
    "input",
    "tool_input",
    "action_input",
];

/// `<tool_name>add_memory</tool_name><arguments>{…}</arguments>` in whatever wrapper
/// (Cline's `<use_mcp_tool>`, invented ones): a tag holding an offered tool's name, its
/// arguments in the next arguments tag (JSON or child tags) before another name.
fn name_and_argument_tags(cx: &Cx<'_>, out: &mut StrategyOutput, taken: &mut Vec<Range<usize>>) {
    let Cx { text, tools, cfg } = *cx;
    for tag in NAME_TAGS {
        let open = format!("<{tag}>");
        let close = format!("</{tag}>");
        let mut pos = 0;
        while let Some(start) = find_ci(text, pos, &open) {
            let name_start = start + open.len();
            let Some(name_end) = find_ci(text, name_start, &close) else {
                break;
            };
            pos = name_end + close.len();
            let name = text[name_start..name_end].trim();
            let Some(tool) = schema::resolve(name, tools, &cfg.aliases) else {
                continue;
            };
            // Up to the next name: the arguments belong to this one.
            let limit = find_ci(text, pos, &open).unwrap_or(text.len());
            let found = ARGUMENT_TAGS.iter().find_map(|a| {
                let (ao, ac) = (format!("<{a}>"), format!("</{a}>"));
                let at = find_ci(&text[..limit], pos, &ao)?;
                let body_start = at + ao.len();
                // LangChain's XML agent stops at `</tool_input>`: the close may be cut.
                let body_end = find_ci(&text[..limit], body_start, &ac);
                let end = body_end.map_or(limit, |e| e + ac.len());
                Some((body_start..body_end.unwrap_or(limit), end))
            });
            let (args, end) = match found {
                Some((body, end)) => {
                    let inner = text[body].trim();
                    let args = if inner.starts_with('{') {
                        jsonscan::value_at(inner, 0).map_or(Value::Null, |(_, v)| v)
                    } else if inner.starts_with('<') {
                        Value::Object(child_tags(inner, tool))
                    } else {
                        // `<tool_input>llama 2`: the input itself, for the main argument
                        // (`question: What is …?`: or for the property it names).
                        let named = inner.split_once(':').and_then(|(k, v)| {
                            let (prop, _) = tool
                                .properties()
                                .into_iter()
                                .find(|(p, _)| p.eq_ignore_ascii_case(k.trim()))?;
                            let mut m = serde_json::Map::new();
                            m.insert(prop.to_string(), Value::String(v.trim().to_string()));
                            Some(Value::Object(m))
                        });
                        named.unwrap_or_else(|| Value::String(inner.to_string()))
                    };
                    (args, end)
                }
                None => (Value::Object(child_tags(&text[pos..limit], tool)), pos),
            };
            let span = start..end;
            // The wrapper (`<use_mcp_tool>`, its server tag) opens the paragraph: the
            // words before it say whether it is an example.
            let para = text[..start].rfind("\n\n").map_or(0, |i| i + 2);
            if overlaps(taken, &span)
                || shown_as_example(text, start)
                || shown_as_example(text, para)
            {
                continue;
            }
            if push(out, name, args, MARKED, span.clone(), tools, cfg) {
                taken.push(span);
            }
            pos = end.max(pos);
        }
    }
}

// ---------------------------------------------------------------- Kimi K2

/// `<|tool_call_begin|> functions.NAME:0 <|tool_call_argument_begin|> {…} <|tool_call_end|>`.
fn kimi(cx: &Cx<'_>, out: &mut StrategyOutput, taken: &mut Vec<Range<usize>>) {
    const OPEN: &str = "<|tool_call_begin|>";
    const ARGS: &str = "<|tool_call_argument_begin|>";
    let Cx { text, tools, cfg } = *cx;
    let mut blocks = Block::new(
        text,
        &["<|tool_call_end|>"],
        &[OPEN, "<|tool_calls_section_end|>"],
    );
    each_block(text, OPEN, &mut blocks, taken, |body, span| {
        let inner = &text[body.clone()];
        let Some(a) = find_ci(inner, 0, ARGS) else {
            return false;
        };
        let name = kimi_name(&inner[..a]);
        let lead = first_text(text, body.start + a + ARGS.len()..body.end);
        let args = if text[lead..].starts_with('"') {
            // The arguments JSON-encoded once more, as a string.
            let raw = text[lead..body.end].trim_end();
            serde_json::from_str::<String>(raw)
                .ok()
                .and_then(|inner| jsonscan::value_at(&inner, first_text(&inner, 0..inner.len())))
                .map(|(_, v)| v)
        } else {
            jsonscan::value_at(&text[..body.end], lead).map(|(_, v)| v)
        };
        args.is_some_and(|v| push(out, name, v, MARKED, span, tools, cfg))
    });
    // Only the argument token left: `name:0<|tool_call_argument_begin|>{…}` per line.
    if out.calls.is_empty() {
        let mut pos = 0;
        while let Some(a) = find_ci(text, pos, ARGS) {
            pos = a + ARGS.len();
            let line = crate::fuzzy::line_start(text, a);
            let name = kimi_name(&text[line..a]);
            let lead = first_text(text, pos..text.len());
            if let Some((r, v)) = jsonscan::value_at(text, lead) {
                let span = line..r.end;
                if !overlaps(taken, &span) && push(out, name, v, MARKED, span.clone(), tools, cfg) {
                    taken.push(span);
                }
            }
        }
    }
}

/// `functions.get_weather:0`: the name, without the call's index after it.
fn kimi_name(id: &str) -> &str {
    let id = id.trim();
    id.rsplit_once(':')
        .filter(|(_, i)| i.chars().all(|c| c.is_ascii_digit()))
        .map_or(id, |(n, _)| n)
}

// ---------------------------------------------------------------- <function=…>

fn function_tags(cx: &Cx<'_>, out: &mut StrategyOutput, taken: &mut Vec<Range<usize>>) {
    let Cx { text, tools, cfg } = *cx;
    // (`<function=list_repos> </tool_call>`: the wrapper's closing tag ends it too.)
    let mut blocks = Block::new(text, &["</function>", "</tool_call>"], &["<tool_call>"]);
    let mut pos = 0;
    while let Some(start) = find_ci(text, pos, "<function=") {
        pos = start + 1;
        if overlaps(taken, &(start..start + 1)) {
            continue;
        }
        let (_, end) = blocks.at(start);
        let span = start..end;
        if xml_functions(text, span.clone(), tools, cfg, out) > 0 {
            taken.push(span.clone());
        }
        pos = end.max(start + 1);
    }
}

/// Every `<function=NAME>` in `range`, with `<parameter=KEY>` children or a JSON body.
fn xml_functions(
    text: &str,
    range: Range<usize>,
    tools: &[ToolSpec],
    cfg: &ParserConfig,
    out: &mut StrategyOutput,
) -> usize {
    let mut n = 0;
    let mut pos = range.start;
    let mut blocks = Block::new(
        &text[..range.end],
        &["</function>", "</tool_call>"],
        &["<function="],
    );
    while let Some(start) = find_ci(&text[..range.end], pos, "<function=") {
        let name_start = start + "<function=".len();
        let rest = &text[name_start..range.end];
        let name_len = rest
            .find(|c: char| {
                !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ' ' | '"' | '\''))
            })
            .unwrap_or(rest.len());
        let name = rest[..name_len]
            .trim()
            .trim_matches(|c| c == '"' || c == '\'');
        // `>` normally; `=`, `(` or `{` when the model glued the arguments on.
        let mut body_start = name_start + name_len;
        // `<function=get_agencies />`: no arguments, no closing tag.
        if text[body_start..range.end].starts_with("/>") {
            pos = body_start + 2;
            if name.len() <= 128
                && push(
                    out,
                    name,
                    Value::Object(Map::new()),
                    MARKED,
                    start..pos,
                    tools,
                    cfg,
                )
            {
                n += 1;
            }
            continue;
        }
        if text[body_start..range.end].starts_with(['>', '=']) {
            body_start += 1;
        }
        let (body, end) = blocks.at(body_start);
        pos = end.max(body_start).max(start + 1);
        let body = if text[body.clone()].trim_start().starts_with('(') {
            let b = body.start + text[body.clone()].find('(').unwrap_or(0) + 1;
            b..body.end
        } else {
            body
        };
        let inner = text[body.clone()].trim();
        let args = if find_ci(inner, 0, "<parameter=").is_some() {
            Value::Object(xml_parameters(inner))
        } else if inner.starts_with(['{', '[']) {
            let lead = first_text(text, body.clone());
            let limit = jsonscan::balanced_end(&text[..body.end], lead, false).unwrap_or(body.end);
            match jsonscan::value_at(&text[..limit], lead) {
                Some((_, v)) => v,
                None => continue,
            }
        } else if inner.is_empty() {
            Value::Object(Map::new())
        } else {
            continue;
        };
        if name.len() <= 128 && push(out, name, args, MARKED, start..end, tools, cfg) {
            n += 1;
        }
    }
    n
}

/// `<arg_key>K</arg_key><arg_value>V</arg_value>` pairs (values are JSON when they parse).
fn glm_args(body: &str) -> Map<String, Value> {
    let mut m = Map::new();
    let mut pos = 0;
    let mut values = Block::new(body, &["</arg_value>"], &["<arg_key>"]);
    let mut key_ends = Next::default();
    let mut value_opens = Next::default();
    while let Some(k) = find_ci(body, pos, "<arg_key>") {
        let ks = k + "<arg_key>".len();
        let Some(ke) = key_ends.at(body, ks, "</arg_key>") else {
            break;
        };
        let key = body[ks..ke].trim();
        let after_key = ke + "</arg_key>".len();
        // The `<arg_value>` opener is sometimes missing: the value starts after the key.
        let vs = match value_opens.at(body, after_key, "<arg_value>") {
            Some(v) if body[after_key..v].trim().is_empty() => v + "<arg_value>".len(),
            _ => after_key,
        };
        let (v, end) = values.at(vs);
        pos = end.max(vs);
        let raw = body[v].trim();
        let value = serde_json::from_str::<Value>(raw)
            .ok()
            .filter(|v| !v.is_string())
            .unwrap_or_else(|| Value::String(raw.to_string()));
        if !key.is_empty() && key.len() <= 128 {
            m.insert(key.to_string(), value);
        }
    }
    m
}

/// `<parameter=KEY>VALUE</parameter>` pairs; a closing tag may be missing. One newline
/// either side of a value belongs to the markup.
fn xml_parameters(body: &str) -> Map<String, Value> {
    keyed_values(
        body,
        "<parameter=",
        "</parameter>",
        &["<parameter=", "</function>"],
        |raw| {
            let raw = raw.strip_prefix('\n').unwrap_or(raw);
            raw.strip_suffix('\n').unwrap_or(raw)
        },
    )
}

/// `{open}KEY>VALUE</parameter>` pairs, each value cut at `</parameter>` or at one of
/// `stops`, then shaped by `clean`.
fn keyed_values<'a>(
    body: &'a str,
    open: &str,
    close: &'a str,
    stops: &[&'a str],
    clean: impl Fn(&str) -> &str,
) -> Map<String, Value> {
    let mut m = Map::new();
    let mut pos = 0;
    let mut values = Block::new(body, &[close], stops);
    while let Some(start) = find_ci(body, pos, open) {
        let key_start = start + open.len();
        let Some(gt) = body[key_start..].find('>') else {
            break;
        };
        let (key, typed) = tag_key(&body[key_start..key_start + gt]);
        let v_start = key_start + gt + 1;
        let (v, end) = values.at(v_start);
        pos = end.max(v_start);
        if !key.is_empty() && key.len() <= 128 {
            let raw = clean(&body[v]);
            // DeepSeek marks non-string values: `<parameter name="limit" string="false">30`.
            let value = typed
                .then(|| serde_json::from_str::<Value>(raw.trim()).ok())
                .flatten()
                .unwrap_or_else(|| Value::String(raw.to_string()));
            m.insert(key.to_string(), value);
        }
    }
    m
}

/// The key of `<parameter=KEY>` / `<parameter name="KEY" string="false">`, and whether
/// the tag says its value is not a string.
fn tag_key(attrs: &str) -> (&str, bool) {
    let a = attrs.trim();
    let key = match a.chars().next() {
        Some(q @ ('"' | '\'')) => a[1..].split(q).next().unwrap_or(""),
        _ => a.split(char::is_whitespace).next().unwrap_or(""),
    };
    let typed = a.contains("string=\"false\"");
    (key.trim(), typed)
}

// ---------------------------------------------------------------- Llama

fn python_tag(cx: &Cx<'_>, out: &mut StrategyOutput, taken: &mut Vec<Range<usize>>) {
    let Cx { text, tools, cfg } = *cx;
    for (open, ends) in [
        ("<|python_tag|>", &["<|eom_id|>", "<|eot_id|>"][..]),
        ("<|python_start|>", &["<|python_end|>"][..]),
    ] {
        let mut blocks = Block::new(text, ends, &[open]);
        let mut pos = 0;
        while let Some(start) = find_ci(text, pos, open) {
            let body_start = start + open.len();
            let (body, end) = blocks.at(body_start);
            pos = end.max(body_start);
            let span = start..end;
            if overlaps(taken, &span) {
                continue;
            }
            let inner = text[body.clone()].trim();
            let lead = first_text(text, body.clone());
            let mut found = false;
            if inner.starts_with('{')
                || inner.starts_with('[') && inner[1..].trim_start().starts_with('{')
            {
                for v in json_values(text, lead, body.end) {
                    found |= json_calls(&v, span.clone(), MARKED, tools, cfg, out);
                }
            } else if let Some((calls, _)) = pythonic_calls(inner) {
                for (n, a) in calls {
                    found |= push(out, &n, a, MARKED, span.clone(), tools, cfg);
                }
            } else if let Some(tool) = code_tool(tools) {
                // Llama 3.x with `Environment: ipython`: plain Python after the tag is
                // a call to its code interpreter.
                found = push(
                    out,
                    &tool.name,
                    Value::String(inner.to_string()),
                    MARKED,
                    span.clone(),
                    tools,
                    cfg,
                );
            }
            if found {
                taken.push(span);
            }
        }
    }
}

/// The offered tool that runs code (`code_interpreter`, `python`, …), if exactly one.
fn code_tool(tools: &[ToolSpec]) -> Option<&ToolSpec> {
    let mut it = tools.iter().filter(|t| {
        let n = t.name.to_ascii_lowercase();
        (n.contains("code") || n.contains("python"))
            && t.primary_property()
                .is_some_and(|p| p == "code" || p == "script" || p == "source")
    });
    let first = it.next()?;
    it.next().is_none().then_some(first)
}

// ---------------------------------------------------------------- Mistral

/// Mistral's `[TOOL_CALLS]`, and the `[FUNCTION] name [ARGS] {…}` some models invent
/// after it.
fn mistral(cx: &Cx<'_>, out: &mut StrategyOutput, taken: &mut Vec<Range<usize>>) {
    // (A provider that strips the tokens' closing brackets leaves
    // `[TOOL_CALLSget_weather[ARGS{…}`.)
    let calls = if cx.text.contains("[TOOL_CALLS]") {
        "[TOOL_CALLS]"
    } else {
        "[TOOL_CALLS"
    };
    for open in [calls, "[FUNCTION]"] {
        mistral_blocks(cx, open, out, taken);
    }
}

fn mistral_blocks(
    cx: &Cx<'_>,
    open: &str,
    out: &mut StrategyOutput,
    taken: &mut Vec<Range<usize>>,
) {
    let Cx { text, tools, cfg } = *cx;
    let mut blocks = Block::new(text, &["</s>"], &[open]);
    let mut pos = 0;
    while let Some(start) = find_ci(text, pos, open) {
        let body_start = start + open.len();
        let (body, end) = blocks.at(body_start);
        pos = end.max(body_start);
        let span = start..end;
        if overlaps(taken, &span) {
            continue;
        }
        let inner = text[body.clone()].trim_start();
        let lead = first_text(text, body.clone());
        let mut found = false;
        if inner.starts_with('[') || inner.starts_with('{') {
            for v in json_values(text, lead, body.end) {
                found |= json_calls(&v, span.clone(), MARKED, tools, cfg, out);
            }
        } else {
            // `name[ARGS]{…}` or `name{…}`, possibly several.
            let mut p = lead;
            while p < body.end {
                let rest = &text[p..body.end];
                let Some(brace) = rest.find('{') else { break };
                // `name[ARGS]{…}`, `name[CALL_ID]id[ARGS]{…}`.
                let head = rest[..brace].trim();
                let name = head.split('[').next().unwrap_or(head).trim();
                let Some((r, v)) = jsonscan::value_at(&text[..body.end], p + brace) else {
                    break;
                };
                found |= push(out, name, v, MARKED, span.clone(), tools, cfg);
                p = r.end;
            }
        }
        if found {
            taken.push(span);
        }
    }
}

// ---------------------------------------------------------------- DeepSeek

fn deepseek(cx: &Cx<'_>, out: &mut StrategyOutput, taken: &mut Vec<Range<usize>>) {
    let Cx { text, tools, cfg } = *cx;
    // Anchored on the separator: models drop or misspell the tokens around it
    // (`<|tool_calls|>function<|tool_sep|>…`, no `<|tool_call_begin|>`).
    const SEP: &str = "<|tool_sep|>";
    let mut blocks = Block::new(
        text,
        &["<|tool_call_end|>"],
        &[SEP, "<|tool_calls_end|>", "<|tool_call_begin|>"],
    );
    let mut pos = 0;
    while let Some(sep) = find_ci(text, pos, SEP) {
        pos = sep + SEP.len();
        let head = &text[..sep];
        let token_end = head.rfind("|>").map_or(0, |i| i + 2);
        let start = head[..token_end].rfind("<|").unwrap_or(token_end);
        let before = head[token_end..].trim();
        let after = sep + SEP.len();
        let (body, end) = blocks.at(after);
        let span = start..end;
        if overlaps(taken, &span) {
            continue;
        }
        let inner = &text[body.clone()];
        // `function<|tool_sep|>NAME\n```json\n{…}\n```` (R1, V3) or `NAME<|tool_sep|>{…}` (V3.1).
        let (name, args_from) = if before.is_empty() || before.eq_ignore_ascii_case("function") {
            let name_end = inner.find(['\n', '{', '`']).unwrap_or(inner.len());
            (inner[..name_end].trim(), name_end)
        } else {
            (before, 0)
        };
        let args = match inner[args_from..].find('{') {
            Some(b) => match jsonscan::value_at(&text[..body.end], body.start + args_from + b) {
                Some((_, v)) => v,
                None => continue,
            },
            None => Value::Object(Map::new()),
        };
        if push(out, name, args, MARKED, span.clone(), tools, cfg) {
            taken.push(span);
        }
        pos = end.max(pos);
    }
}

// ---------------------------------------------------------------- <invoke name=…>

/// `<invoke name="NAME"><parameter name="KEY">VALUE</parameter></invoke>` (MiniMax,
/// DeepSeek's DSML, Anthropic's old text format), and the same shape some small models
/// write as `<function name="x"><param name="k">v</param></function>`.
const INVOKE_FORMS: [(&str, &str, &str, &str); 2] = [
    (
        "<invoke name=",
        "</invoke>",
        "<parameter name=",
        "</parameter>",
    ),
    ("<function name=", "</function>", "<param name=", "</param>"),
];

/// Invoke blocks anywhere (inside `<minimax:tool_call>`, `<function_calls>` or none);
/// parameters may also be plain child tags (`<path>…</path>`).
fn invokes(cx: &Cx<'_>, out: &mut StrategyOutput, taken: &mut Vec<Range<usize>>) {
    let Cx { text, tools, cfg } = *cx;
    for (open, close, p_open, p_close) in INVOKE_FORMS {
        let mut blocks = Block::new(text, &[close], &[open]);
        let mut pos = 0;
        while let Some(start) = find_ci(text, pos, open) {
            pos = start + 1;
            let name_start = start + open.len();
            let Some(gt) = text[name_start..].find('>') else {
                break;
            };
            let (name, _) = tag_key(&text[name_start..name_start + gt]);
            let body_start = name_start + gt + 1;
            let (body, end) = blocks.at(body_start);
            let span = start..end;
            pos = end.max(pos);
            if overlaps(taken, &span) {
                continue;
            }
            let inner = &text[body];
            let mut args = keyed_values(inner, p_open, p_close, &[p_open, close], str::trim);
            if args.is_empty() {
                if let Some(tool) = schema::resolve(name, tools, &cfg.aliases) {
                    args = child_tags(inner, tool);
                }
            }
            if push(
                out,
                name,
                Value::Object(args),
                MARKED,
                span.clone(),
                tools,
                cfg,
            ) {
                taken.push(span);
            }
        }
    }
}

// ---------------------------------------------------------------- fences

/// ```` ```tool_code ```` / ```` ```tool_call ```` blocks (Gemma and friends), anywhere in
/// the answer: the fence's language says it is a call.
fn tool_code_fences(cx: &Cx<'_>, out: &mut StrategyOutput, taken: &mut Vec<Range<usize>>) {
    let Cx { text, tools, cfg } = *cx;
    let mut blocks = Block::new(text, &["```"], &[]);
    let mut pos = 0;
    while let Some(start) = find_ci(text, pos, "```tool_") {
        pos = start + 3;
        // (The body may follow the fence's word on its line: "```tool_call [\"python\", …".)
        let line_end = text[start..].find('\n').map_or(text.len(), |nl| start + nl);
        // (The fence's word is short: looking further for its end costs a scan per hit.)
        let word_end = crate::harmony::floor(text, (start + 3 + 16).min(line_end));
        let mut lang_end = text[start + 3..word_end]
            .find(char::is_whitespace)
            .map_or(word_end, |w| start + 3 + w);
        let mut lang = text[start + 3..lang_end].to_ascii_lowercase();
        // ("```tool_codeprint(default_api.Greetings())```": the body glued to the word.)
        if lang.starts_with("tool_code") && text[start..line_end].contains('(') {
            lang_end = start + 3 + "tool_code".len();
            lang.truncate("tool_code".len());
        }
        if !matches!(lang.as_str(), "tool_code" | "tool_call" | "tool_calls")
            || shown_as_example(text, start)
        {
            continue;
        }
        let inline = !text[lang_end..line_end].trim().is_empty();
        // (A fence in the middle of a sentence, "write ```tool_call [...]``` and wait",
        // shows the format.)
        if inline
            && !text[crate::fuzzy::line_start(text, start)..start]
                .trim_matches([' ', '\t'])
                .is_empty()
        {
            continue;
        }
        let body_start = if inline {
            lang_end
        } else {
            (line_end + 1).min(text.len())
        };
        let (body, end) = blocks.at(body_start);
        let span = start..end;
        if overlaps(taken, &span) {
            continue;
        }
        let inner = text[body.clone()].trim();
        let mut found = false;
        if inner.starts_with(['{', '[']) {
            let lead = first_text(text, body.clone());
            for v in json_values(text, lead, body.end) {
                found |= json_calls(&v, span.clone(), MARKED, tools, cfg, out);
            }
        }
        if let Some((calls, used)) = pythonic_calls(inner).filter(|_| !found) {
            if inner[used..].trim().is_empty() {
                for (n, a) in calls {
                    found |= push(out, &n, a, MARKED, span.clone(), tools, cfg);
                }
            }
        }
        if found {
            taken.push(span);
        }
        pos = end.max(pos);
    }
}

/// `tool_name: get_ticker_symbol` on a line, the arguments as `key: value` lines under it
/// (`parameter:` / `input:` for the tool's one required argument).
fn key_value_call(text: &str, tools: &[ToolSpec], cfg: &ParserConfig, out: &mut StrategyOutput) {
    // A line scan, not a multi-line regex: this runs on every answer without a call.
    let mut at = 0;
    let found = text.split_inclusive('\n').find_map(|line| {
        let start = at;
        at += line.len();
        let (key, value) = line.split_once(':')?;
        let key = key.trim();
        let named = ["tool_name", "tool", "function_name", "function"]
            .iter()
            .any(|k| key.eq_ignore_ascii_case(k));
        let name = value.trim().trim_matches('`');
        let ident = !name.is_empty()
            && name.len() <= 80
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        (named && ident).then_some((start, start + line.trim_end().len(), name))
    });
    let Some((whole_start, whole_end, name)) = found else {
        return;
    };
    let Some(tool) = schema::resolve(name, tools, &cfg.aliases) else {
        return;
    };
    let mut args = Map::new();
    let mut end = whole_end;
    for line in text[whole_end..].lines().skip(1) {
        let Some((k, v)) = line.split_once(':') else {
            break;
        };
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() || !k.chars().all(|c| c.is_alphanumeric() || c == '_') || v.is_empty() {
            break;
        }
        end += line.len() + 1;
        let key = match k.to_ascii_lowercase().as_str() {
            "parameter" | "parameters" | "input" | "argument" | "arguments" | "args" => {
                if v.starts_with('{') {
                    if let Some((_, Value::Object(o))) = jsonscan::value_at(v, 0) {
                        args.extend(o);
                    }
                    continue;
                }
                match tool.primary_property() {
                    Some(p) => p.to_string(),
                    None => continue,
                }
            }
            _ => k.to_string(),
        };
        args.insert(key, Value::String(schema::strip_quotes(v).to_string()));
    }
    let span = whole_start..end.min(text.len());
    push(out, name, Value::Object(args), TOOL_TAG, span, tools, cfg);
}

/// GLM-4's own call format, as servers without its parser pass it on: an offered tool's
/// name on a line, its arguments' JSON object on the next, again for each call
/// (`add\n{"a": 2}add\n{"a": 1}`). Only an answer made of nothing else.
fn name_line_objects(text: &str, tools: &[ToolSpec], cfg: &ParserConfig, out: &mut StrategyOutput) {
    let mut calls = Vec::new();
    let mut pos = first_text(text, 0..text.len());
    while pos < text.len() {
        let Some(nl) = text[pos..].find('\n').map(|i| pos + i) else {
            return;
        };
        let name = text[pos..nl].trim();
        // (The exact name, as GLM writes it: "Get_Weather" heading a result is no call.)
        let Some(tool) = tools.iter().find(|t| t.name == name) else {
            return;
        };
        let open = first_text(text, nl..text.len());
        if !text[open..].starts_with('{') {
            return;
        }
        let Some((range, args @ Value::Object(_))) = jsonscan::value_at(text, open) else {
            return;
        };
        // (Its arguments, not its result: every key one of the tool's properties.)
        let props = tool.properties();
        if !args
            .as_object()
            .is_some_and(|a| a.keys().all(|k| props.iter().any(|(p, _)| p == k)))
        {
            return;
        }
        calls.push((name, args, pos..range.end));
        pos = first_text(text, range.end..text.len());
    }
    for (name, args, span) in calls {
        push(out, name, args, MARKED, span, tools, cfg);
    }
}

/// A fine-tune's calls written as Python tuples, `[('color_complimentary', {'color':
/// 'blue'})]`: the exact name of an offered tool and a dict of its properties, in an
/// answer made of nothing else.
fn python_tuples(text: &str, tools: &[ToolSpec], cfg: &ParserConfig, out: &mut StrategyOutput) {
    let t = text.trim();
    let (body, base) = match t.strip_prefix('[').and_then(|b| b.strip_suffix(']')) {
        Some(b) => (b, text.len() - text.trim_start().len() + 1),
        None => (t, text.len() - text.trim_start().len()),
    };
    let mut calls = Vec::new();
    let mut pos = 0;
    loop {
        let rest = &body[pos..];
        let lead = rest.len() - rest.trim_start().len();
        let Some(after) = rest.trim_start().strip_prefix('(') else {
            return;
        };
        let after = after.trim_start();
        let Some(q) = after.chars().next().filter(|c| matches!(c, '\'' | '"')) else {
            return;
        };
        let Some(close) = after[1..].find(q) else {
            return;
        };
        let name = &after[1..1 + close];
        let Some(tool) = tools.iter().find(|t| t.name == name) else {
            return;
        };
        let Some(obj) = after[1 + close + 1..].trim_start().strip_prefix(',') else {
            return;
        };
        let obj_at = body.len() - obj.trim_start().len();
        if !body[obj_at..].starts_with('{') {
            return;
        }
        let Some((range, args @ Value::Object(_))) = jsonscan::value_at(body, obj_at) else {
            return;
        };
        if !args.as_object().is_some_and(|a| tool.holds_keys(a)) {
            return;
        }
        let Some(tail) = body[range.end..].trim_start().strip_prefix(')') else {
            return;
        };
        let end = body.len() - tail.len();
        calls.push((name, args, base + pos + lead..base + end));
        let tail = tail.trim_start();
        if tail.is_empty() {
            break;
        }
        let Some(next) = tail.strip_prefix(',') else {
            return;
        };
        // (A trailing comma before the list's end.)
        if next.trim().is_empty() {
            break;
        }
        pos = body.len() - next.len();
    }
    for (name, args, span) in calls {
        push(out, name, args, MARKED, span, tools, cfg);
    }
}

/// Qwen2.5's special token around the code it hands its interpreter.
const QWEN_CODE: &str = "<|CODE|>";

/// A code agent's step (smolagents: `Code:` then a Python fence): the offered tools it
/// calls in its first block, assignments and all (`r = web_search("x")`). Later blocks
/// follow an observation the model wrote itself.
fn code_agent_step(text: &str, tools: &[ToolSpec], cfg: &ParserConfig, out: &mut StrategyOutput) {
    // (smolagents' newer steps write the code between `<code>` tags on lines of their own.)
    // (transformers' HfAgent writes "Answer:" before its block.)
    let Some((start, body_start, end_mark)) = [
        "Code:\n```py\n",
        "Code:\n```python\n",
        "Answer:\n```py\n",
        "Answer:\n```python\n",
    ]
    .iter()
    .find_map(|lead| text.find(lead).map(|i| (i, i + lead.len(), "```")))
    .or_else(|| {
        // (A step: the answer is the block, or a thought then the block, and nothing
        // follows it.)
        let t = text.trim();
        let ends = t.ends_with("</code>") || t.ends_with("<end_code>");
        let own = t.starts_with("<code>") || t.starts_with("Thought:");
        if !(ends && own) {
            return None;
        }
        text.match_indices("<code>\n")
            .map(|(i, _)| i)
            .find(|&i| i == 0 || text[..i].ends_with('\n'))
            .map(|i| (i, i + "<code>\n".len(), "</code>"))
    }) else {
        return;
    };
    let Some(close) = text[body_start..].find(end_mark) else {
        return;
    };
    let span = start..body_start + close + end_mark.len();
    step_block_calls(&text[body_start..body_start + close], span, tools, cfg, out);
}

/// Qwen2.5's code-interpreter token opens and closes each block it hands its interpreter;
/// an answer may hold several, prose between them, and each is run.
fn qwen_code_blocks(text: &str, tools: &[ToolSpec], cfg: &ParserConfig, out: &mut StrategyOutput) {
    let mut from = 0;
    while let Some(open) = text[from..].find(QWEN_CODE).map(|i| from + i) {
        let body = open + QWEN_CODE.len();
        let Some(close) = text[body..].find(QWEN_CODE).map(|i| body + i) else {
            return;
        };
        // (Code already run, offered on a condition or handed to the reader is shown,
        // not run: "this is the code I ran", "If you'd like that, I would run:", "To
        // call this function from your own script, you can use:".)
        let lead = text[from..open].to_lowercase();
        if SHOWN_CODE.iter().any(|p| lead.contains(p)) {
            return;
        }
        from = close + QWEN_CODE.len();
        step_block_calls(&text[body..close], open..from, tools, cfg, out);
    }
}

/// Words before a block that show its code rather than run it.
const SHOWN_CODE: &[&str] = &[
    "i ran",
    "i used",
    "i executed",
    "i have run",
    "i've run",
    "was run",
    "were run",
    "would run",
    "would use",
    "could run",
    "if you'd like",
    "if you would like",
    "if you want",
    "you can use",
    "you can run",
    "you could",
    "your own",
    "yourself",
    "for reference",
    "example",
    "之前运行",
    "运行了",
    "执行了",
    "如果",
    "您可以",
    "你可以",
    "示例",
    "例如",
];

/// The offered tools a step's code block calls, assignments and all.
fn step_block_calls(
    block: &str,
    span: Range<usize>,
    tools: &[ToolSpec],
    cfg: &ParserConfig,
    out: &mut StrategyOutput,
) {
    // `task = "Find …"` then `web_agent(task=task)`: a string bound before the call.
    let bound: Vec<(String, String)> = STRING_BINDING
        .captures_iter(block)
        .filter_map(|c| {
            let (n, v) = (c.get(1)?, c.get(2)?);
            let lit = v.as_str();
            let inner = &lit[1..lit.len() - 1];
            Some((
                n.as_str().to_string(),
                inner.replace("\\\"", "\"").replace("\\'", "'"),
            ))
        })
        .collect();
    for line in block.lines() {
        let l = line.trim();
        // (A line commented out runs nothing.)
        if l.starts_with('#') {
            continue;
        }
        // `x = tool(…)`: the call is the right-hand side.
        let call = match l.split_once('=') {
            Some((lhs, rhs))
                if !lhs.trim().is_empty()
                    && lhs.trim().chars().all(|c| c.is_alphanumeric() || c == '_')
                    && !rhs.starts_with('=') =>
            {
                rhs.trim()
            }
            _ => l,
        };
        let named = call
            .split_once('(')
            .is_some_and(|(n, _)| schema::resolve(n.trim(), tools, &cfg.aliases).is_some());
        if !named {
            continue;
        }
        // (`web_agent(task=task)`: the bound string stands in for its name.)
        let call = bind_names(call, &bound);
        match pythonic_calls(&call) {
            Some((calls, _)) => {
                for (n, a) in calls {
                    push(out, &n, a, PYTHONIC, span.clone(), tools, cfg);
                }
            }
            // `final_answer(music_playlist)`: a value held in a variable of an earlier
            // step is the tool's, unknown here.
            None => {
                // (The harness runs the block: whatever it passes, the tool is called,
                // with the literal keywords it was given: `document_qa(document,
                // question="…")`.)
                if let Some((n, args)) = call.split_once('(') {
                    let mut known = Map::new();
                    for c in LITERAL_KEYWORD.captures_iter(args) {
                        let (Some(k), Some(v)) = (c.get(1), c.get(2)) else {
                            continue;
                        };
                        let v = v.as_str();
                        let value = if let Some(q) = v.strip_prefix('\'') {
                            Value::String(q.trim_end_matches('\'').to_string())
                        } else {
                            serde_json::from_str(v).unwrap_or(Value::Null)
                        };
                        if !value.is_null() {
                            known.insert(k.as_str().to_string(), value);
                        }
                    }
                    push(
                        out,
                        n.trim(),
                        Value::Object(known),
                        PYTHONIC,
                        span.clone(),
                        tools,
                        cfg,
                    );
                }
            }
        }
    }
}

/// `question="What is it?"` among a call's arguments: a keyword given a literal.
static LITERAL_KEYWORD: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r#"(?:^|[(,]\s*)([A-Za-z_]\w*)\s*=\s*("(?:[^"\\\n]|\\.)*"|'[^'\n]*'|-?\d+(?:\.\d+)?)\s*(?:,|\)|$)"#,
    )
});

/// `f(task=task)` with `task` bound to a string: `f(task="…")`.
fn bind_names(call: &str, bound: &[(String, String)]) -> String {
    let mut out = call.to_string();
    for (name, value) in bound.iter().rev() {
        let lit = serde_json::to_string(value).unwrap_or_default();
        for (before, after) in [
            ('=', ')'),
            ('=', ','),
            ('(', ')'),
            ('(', ','),
            (' ', ')'),
            (' ', ','),
        ] {
            let pat = format!("{before}{name}{after}");
            out = out.replace(&pat, &format!("{before}{lit}{after}"));
        }
    }
    out
}

static STRING_BINDING: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r#"(?m)^[ \t]*([A-Za-z_]\w{0,63})[ \t]*=[ \t]*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')[ \t]*$"#,
    )
});

/// The whole answer is one shell fence and a shell tool is offered: the model printed
/// the command instead of calling the tool with it.
fn shell_fence_answer(
    text: &str,
    tools: &[ToolSpec],
    cfg: &ParserConfig,
    out: &mut StrategyOutput,
) {
    let t = text.trim_end();
    // The block ends the answer: fenced, or its fence lost in rendering (a line that
    // says `bash`, then the command).
    let fenced = t
        .strip_suffix("```")
        .and_then(|b| b.rfind("```").map(|o| (o, &b[o + 3..])));
    // (A fence left open: the harness's stop sequence cut the answer where the code
    // ended, as lagent's `\n```\n` does; a block written for a reader is closed.)
    let cut_open = || {
        let o = t.rfind("```")?;
        let rest = &t[o + 3..];
        let nl = rest.find('\n')?;
        let lang = rest[..nl].trim();
        (!lang.is_empty() && lang.bytes().all(|b| b.is_ascii_alphanumeric())).then_some((o, rest))
    };
    let fence = fenced
        .map(|f| (f, false))
        .or_else(|| cut_open().map(|f| (f, true)));
    let (open, lang, body, stopped) = if let Some(((o, rest), stopped)) = fence {
        let Some(nl) = rest.find('\n') else { return };
        (
            o,
            rest[..nl].trim().to_ascii_lowercase(),
            &rest[nl + 1..],
            stopped,
        )
    } else if let Some((o, body)) = code_tag_block(t) {
        (o, "bash".to_string(), body, false)
    } else {
        let Some(o) = ["bash\n", "sh\n", "shell\n"]
            .iter()
            .find_map(|l| t.rfind(l).filter(|&i| i == 0 || t[..i].ends_with('\n')))
        else {
            return;
        };
        let rest = &t[o..];
        let Some(nl) = rest.find('\n') else { return };
        (
            o,
            rest[..nl].trim().to_ascii_lowercase(),
            &rest[nl + 1..],
            false,
        )
    };
    // (A python block for a code interpreter: NuminaMath, ChatGLM3 and the like print
    // the code the harness runs.)
    let python = matches!(lang.as_str(), "python" | "py");
    if !python && !matches!(lang.as_str(), "bash" | "sh" | "shell" | "console" | "zsh") {
        return;
    }
    // Words before the block commit the assistant to running it ("I'll read the file
    // first."), never address the reader ("You can run:") or ask.
    let before = t[..open].trim();
    if !before.is_empty() {
        let lower = before.to_lowercase().replace('\u{2019}', "'");
        let committed = [
            "i'll",
            "i will",
            "let me",
            "let's",
            "i need to",
            "we need to",
            "我会",
            "我将",
            "让我",
            "我来",
        ]
        .iter()
        .any(|c| lower.contains(c));
        // (Code presented to the reader is shown whatever cut it: "Here's the code:",
        // "To reproduce this yourself, paste …", "For reference, the code:".)
        let presented = stopped
            && [
                "here's",
                "here is",
                "for reference",
                "yourself",
                "paste",
                "snippet",
                "example",
                "you can",
                "你可以",
                "供参考",
                "示例",
            ]
            .iter()
            .any(|p| lower.contains(p));
        if before.len() > if stopped { 2000 } else { 400 }
            || presented
            || before.contains("```")
            || before.contains('?')
            || !(committed || stopped)
            || crate::fuzzy::addresses_reader(&lower)
            || crate::fuzzy::deferred(&lower)
            || crate::fuzzy::deferred(crate::fuzzy::last_sentence(&lower))
        {
            return;
        }
    }
    let cmd = body.trim_end();
    let max_lines = if python { 80 } else { 3 };
    if cmd.trim().is_empty() || cmd.contains("```") || cmd.lines().count() > max_lines {
        return;
    }
    let cmd = if python { cmd } else { cmd.trim() };
    let shell: Vec<&ToolSpec> = tools
        .iter()
        .filter(|t| {
            if python {
                runs_python(t)
            } else {
                t.primary_property()
                    .is_some_and(|p| p == "command" || p == "cmd")
            }
        })
        .collect();
    if let [tool] = shell.as_slice() {
        push(
            out,
            &tool.name,
            Value::String(cmd.to_string()),
            0.6,
            open..t.len(),
            tools,
            cfg,
        );
    }
}

static CODE_FENCE: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(r"(?m)^[ \t]*```([A-Za-z]+)[ \t]*\n((?s:.*?))\n[ \t]*```")
});

/// AutoGen's code executor, offered as a tool taking `language` and `code`: it runs every
/// fenced Python or shell block of the writer's message ("```python\n# filename: a.py …```
/// TERMINATE"), each one a call — unless the text shows them as examples.
fn executor_blocks(text: &str, tools: &[ToolSpec], cfg: &ParserConfig, out: &mut StrategyOutput) {
    let executors: Vec<&ToolSpec> = tools
        .iter()
        .filter(|t| {
            let props = t.properties();
            props.iter().any(|(p, _)| *p == "language")
                && props.iter().any(|(p, _)| *p == "code")
                && t.required().contains(&"code")
        })
        .collect();
    let [tool] = executors[..] else { return };
    let mut calls: Vec<(Range<usize>, Map<String, Value>)> = Vec::new();
    for c in CODE_FENCE.captures_iter(text) {
        let (Some(all), Some(lang), Some(code)) = (c.get(0), c.get(1), c.get(2)) else {
            continue;
        };
        let lang = lang.as_str().to_ascii_lowercase();
        // (A `console` block is a transcript, its prompt and output, not a script.)
        let lang = match lang.as_str() {
            "python" | "py" => "python",
            "sh" | "bash" | "shell" => "sh",
            _ => continue,
        };
        // The writer's message is its code: a block opens the answer or follows another,
        // or the sentence before it commits to running it ("I'll run the script:"). Code
        // shown, explained or handed to the reader has other words before it.
        let prev_end = calls.last().map_or(0, |(r, _)| r.end);
        let between = text[prev_end.min(all.start())..all.start()].trim();
        if !between.is_empty() && !runs_next(between) {
            return;
        }
        let mut args = Map::new();
        args.insert("language".into(), Value::String(lang.to_string()));
        args.insert(
            "code".into(),
            Value::String(code.as_str().trim_end().to_string()),
        );
        calls.push((all.range(), args));
    }
    for (span, args) in calls {
        push(out, &tool.name, Value::Object(args), 0.8, span, tools, cfg);
    }
}

/// The words before a block commit to running it: "I'll run the script:", "Let me execute
/// this to check the version." (not "Here's how you could…", "Don't run this…").
fn runs_next(before: &str) -> bool {
    let (sentence, committed) = lead_sentence(crate::fuzzy::last_sentence(before));
    let words = words_of(&sentence);
    let addressed = words
        .iter()
        .any(|w| matches!(*w, "you" | "your" | "don't" | "never" | "not" | "avoid"));
    let runs = words.iter().any(|w| {
        matches!(
            *w,
            "run" | "execute" | "check" | "test" | "compute" | "calculate" | "verify" | "try"
        )
    });
    committed && runs && !addressed && !crate::fuzzy::deferred(&sentence)
}

static PIPE_LINE: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?m)^(?:TOOL|Tool|CALL|Call):[ \t]*([A-Za-z_][\w.-]{0,63})[ \t]*\|[ \t]*([^\n]*?)[ \t]*$",
    )
});

/// `TOOL: WEATHER|上海`: a line protocol an app's prompt taught the model, a line per
/// call — an offered tool's exact name, then its values split by `|` in the order of
/// its required properties (or its one property).
fn pipe_lines(text: &str, tools: &[ToolSpec], cfg: &ParserConfig, out: &mut StrategyOutput) {
    for c in PIPE_LINE.captures_iter(text) {
        let (Some(all), Some(name), Some(vals)) = (c.get(0), c.get(1), c.get(2)) else {
            continue;
        };
        let Some(tool) = tools
            .iter()
            .find(|t| t.name.eq_ignore_ascii_case(name.as_str()))
        else {
            continue;
        };
        // (A line shown as the protocol's form, or one already run: "uses lines
        // like\nTOOL: …", "I already ran this:\nTOOL: …".)
        let before = text[..all.start()].trim_end().to_lowercase();
        let told = before.ends_with("like")
            || before.ends_with("such as")
            || ["already", "previously", "log", "format", "i ran"]
                .iter()
                .any(|p| before.rsplit('\n').next().unwrap_or("").contains(p));
        if told || shown_as_example(text, all.start()) {
            continue;
        }
        let values: Vec<&str> = vals.as_str().split('|').map(str::trim).collect();
        let props: Vec<&str> = match tool.properties().as_slice() {
            [(one, _)] => vec![*one],
            _ => tool.required(),
        };
        let mut args = Map::new();
        if values.iter().any(|v| !v.is_empty()) {
            if values.len() != props.len() {
                continue;
            }
            for (k, v) in props.into_iter().zip(values) {
                args.insert(k.to_string(), Value::String(v.to_string()));
            }
        }
        push(
            out,
            &tool.name,
            Value::Object(args),
            0.6,
            all.range(),
            tools,
            cfg,
        );
    }
}

/// A code interpreter: its code is its main property, or it is named for Python
/// (`IPythonInteractive(command)`).
fn runs_python(t: &ToolSpec) -> bool {
    t.primary_property().is_some_and(|p| {
        p == "code"
            || (matches!(p, "command" | "script" | "input" | "source")
                && t.name.to_ascii_lowercase().contains("python"))
    })
}

/// Statements a line of Python opens with.
const PY_KEYWORDS: &[&str] = &[
    "import", "from", "for", "if", "elif", "else:", "while", "def", "class", "return", "with",
    "try:", "except", "finally:", "print(", "assert", "raise", "pass", "break", "continue",
];

static PY_IMPORT: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"^(?:import [A-Za-z_][\w.]*(?: as \w+)?(?:, [A-Za-z_][\w.]*(?: as \w+)?)*|from [A-Za-z_.][\w.]* import (?:\*|\(?[A-Za-z_]\w*(?: as \w+)?(?:, [A-Za-z_]\w*(?: as \w+)?)*\)?))\s*$",
    )
});

static PY_STATEMENT: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"^[A-Za-z_][\w.]*(?:\[[^\]]*\])?\s*(?:[-+*/]?=[^=]|\()|^[A-Za-z_][\w]*(?:\s*,\s*[A-Za-z_]\w*)+\s*=[^=]",
    )
});

/// The whole answer is Python and nothing else, for the one code interpreter: Llama
/// 3.1's `<|python_tag|>` call with the tag dropped by the server or the logger
/// (`import pandas as pd\n# Load data\ndf = pd.read_csv(…)`). Code shown to a reader
/// comes fenced and among words.
fn bare_code_answer(text: &str, tools: &[ToolSpec], cfg: &ParserConfig, out: &mut StrategyOutput) {
    let code = text.trim();
    let first = code.lines().next().unwrap_or_default();
    // It opens with a real import and ends by running something at the top level (a
    // function written for the reader ends in its body; an answer in words ends in words).
    let last = code.lines().last().unwrap_or_default();
    if code.lines().count() < 2
        || !PY_IMPORT.is_match(first)
        || last.starts_with([' ', '\t'])
        || !(last.starts_with("print(") || PY_STATEMENT.is_match(last))
    {
        return;
    }
    let python = code.lines().all(|l| {
        let t = l.trim_start();
        t.is_empty()
            || t.starts_with('#')
            || l.starts_with([' ', '\t', ')', ']', '}'])
            || PY_KEYWORDS.iter().any(|k| t.starts_with(k))
            || PY_STATEMENT.is_match(t)
    });
    if !python {
        return;
    }
    let interpreters: Vec<&ToolSpec> = tools.iter().filter(|t| runs_python(t)).collect();
    if let [tool] = interpreters.as_slice() {
        push(
            out,
            &tool.name,
            Value::String(code.to_string()),
            0.6,
            0..text.len(),
            tools,
            cfg,
        );
    }
}

/// Tags models wrap a command in when prompted with them (devstral's `<CODE>`).
const CODE_TAGS: &[&str] = &["code", "bash", "shell", "sh", "cmd", "command"];

/// `<CODE>\nllm --help\n</CODE>` ending the answer, on lines of its own; the closing tag
/// is often cut by the stop sequence. Where the block opens, and its body.
fn code_tag_block(t: &str) -> Option<(usize, &str)> {
    let open = t.rfind('<').filter(|&i| i == 0 || t[..i].ends_with('\n'))?;
    let (open, body_end) = match t[open..].strip_prefix("</") {
        // A closing tag ends the text: its opening tag is further back.
        Some(closing) => {
            let name = closing.strip_suffix('>')?;
            let opening = format!("<{name}>\n");
            let o = t[..open]
                .rfind(&opening)
                .filter(|&i| i == 0 || t[..i].ends_with('\n'))?;
            (o, open)
        }
        None => (open, t.len()),
    };
    let after = &t[open + 1..];
    let name_len = after.find('>')?;
    let name = &after[..name_len];
    if !CODE_TAGS.iter().any(|c| name.eq_ignore_ascii_case(c)) {
        return None;
    }
    let body_start = open + 1 + name_len + 1;
    let body = t.get(body_start..body_end)?;
    body.starts_with('\n')
        .then(|| (open, body.trim_start_matches('\n')))
}

/// `!placeHere('oak_planks', 64)` / `!attack` ending the answer: Mindcraft's command
/// syntax, an offered tool's exact name after `!`, its arguments positional.
static BANG_COMMAND: LazyLock<Regex> = LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?:^|\s)!([A-Za-z_][A-Za-z0-9_]{1,63})(\([^()\n]{0,400}\))?\s*$",
    )
});

fn bang_command(text: &str, tools: &[ToolSpec], cfg: &ParserConfig, out: &mut StrategyOutput) {
    let t = text.trim_end();
    let Some(c) = BANG_COMMAND.captures(t) else {
        return;
    };
    let (Some(m), Some(name)) = (c.get(0), c.get(1)) else {
        return;
    };
    // The exact name: "Great!" before a word is no command.
    if !tools.iter().any(|tool| tool.name == name.as_str()) {
        return;
    }
    let args = match c.get(2) {
        Some(a) => {
            let call = format!("{}{}", name.as_str(), a.as_str());
            let Some((n, v)) = pythonic_calls(&call).and_then(|(mut calls, _)| calls.pop()) else {
                return;
            };
            let given = v.as_object().is_some_and(|o| !o.is_empty());
            let args = positional_args(v, &n, tools, cfg);
            // (More values than the tool takes: which is which is a guess.)
            if given && args.as_object().is_some_and(Map::is_empty) {
                return;
            }
            args
        }
        None => Value::Object(Map::new()),
    };
    let start = m.start() + m.as_str().find('!').unwrap_or(0);
    // "To make me stop, just type !stop": a command shown to the reader.
    let lead = t[..start].to_lowercase();
    let told = crate::fuzzy::addresses_reader(&lead)
        || lead
            .split_whitespace()
            .last()
            .is_some_and(|w| matches!(w, "type" | "send" | "enter" | "say" | "use" | "try"));
    if told {
        return;
    }
    push(
        out,
        name.as_str(),
        args,
        TOOL_TAG,
        start..t.len(),
        tools,
        cfg,
    );
}

const QWEN_AGENT_FUNCTION: &str = "\u{273F}FUNCTION\u{273F}";
const QWEN_AGENT_ARGS: &str = "\u{273F}ARGS\u{273F}";

/// Qwen-Agent's prompt format, written by a model served without its parser:
/// `✿FUNCTION✿: NAME` then `✿ARGS✿: {…}` (a `✿RESULT✿` the model adds is its guess).
fn qwen_agent_calls(text: &str, tools: &[ToolSpec], cfg: &ParserConfig, out: &mut StrategyOutput) {
    let mut pos = 0;
    while let Some(i) = text[pos..].find(QWEN_AGENT_FUNCTION) {
        let start = pos + i;
        let after = start + QWEN_AGENT_FUNCTION.len();
        pos = after;
        let line_end = text[after..].find('\n').map_or(text.len(), |j| after + j);
        let name = text[after..line_end].trim().trim_start_matches(':').trim();
        let Some(a) = text[line_end..].find(QWEN_AGENT_ARGS) else {
            continue;
        };
        let args_at = line_end + a + QWEN_AGENT_ARGS.len();
        let lead = text[args_at..]
            .find(|c: char| !c.is_whitespace() && c != ':')
            .map_or(text.len(), |j| args_at + j);
        let Some((r, v)) = jsonscan::value_at(text, lead) else {
            continue;
        };
        if shown_as_example(text, start) {
            continue;
        }
        push(out, name, v, MARKED, start..r.end, tools, cfg);
        pos = r.end;
    }
}

/// SWE-agent's command block ending the answer: `find_file "numpy_handler.py"` or
/// `open src/a.py 293`, the first word an offered tool's own name and the rest its
/// arguments in order, shell-quoted.
fn command_fence(text: &str, tools: &[ToolSpec], cfg: &ParserConfig, out: &mut StrategyOutput) {
    let t = text.trim_end();
    let Some(body) = t.strip_suffix("```") else {
        return;
    };
    let Some(open) = body.rfind("```") else {
        return;
    };
    let inner = &body[open + 3..];
    let Some((lang, cmd)) = inner.split_once('\n') else {
        return;
    };
    let cmd = cmd.trim();
    if !lang.trim().is_empty() || cmd.is_empty() || cmd.contains('\n') {
        return;
    }
    let before = t[..open].trim_end();
    if before.contains("```") || before.ends_with('?') || shown_as_example(text, open) {
        return;
    }
    let words = shell_words(cmd);
    let Some((name, rest)) = words.split_first() else {
        return;
    };
    // The tool's own name, as SWE-agent's commands are written (no fuzzy matching).
    if !tools.iter().any(|tool| tool.name == *name) {
        return;
    }
    let mut args = Map::new();
    if !rest.is_empty() {
        let list = rest.iter().map(|w| Value::String(w.clone())).collect();
        args.insert(POSITIONAL.to_string(), Value::Array(list));
    }
    push(
        out,
        name,
        Value::Object(args),
        TOOL_TAG,
        open..t.len(),
        tools,
        cfg,
    );
}

/// A fence whose language is an offered tool's name, its arguments inside as the tool's
/// parameter tags, a JSON object or `key: value` lines ("I will fetch the page.\n\n
/// ```fetch_page\n<url>https://…</url>\n```"). Never a language's name (a `python` tool's
/// fences are code) and never a block shown as an example.
fn tool_named_fence(text: &str, tools: &[ToolSpec], cfg: &ParserConfig, out: &mut StrategyOutput) {
    const LANGUAGES: &[&str] = &[
        "python",
        "py",
        "bash",
        "sh",
        "shell",
        "zsh",
        "console",
        "json",
        "javascript",
        "js",
        "typescript",
        "ts",
        "sql",
        "xml",
        "html",
        "yaml",
        "yml",
        "text",
        "txt",
        "markdown",
        "md",
        "code",
        "powershell",
        "cmd",
        "ruby",
        "go",
        "rust",
        "java",
        "c",
        "cpp",
    ];
    let mut pos = 0;
    let mut named = 0;
    while let Some(i) = text[pos..].find("```") {
        let open = pos + i;
        // (A tool's name is short: the fence's line is looked at no further, so a text of
        // unclosed fences costs one pass.)
        let head_end = crate::harmony::floor(text, (open + 3 + 80).min(text.len()));
        let Some(line_end) = text[open + 3..head_end].find('\n').map(|n| open + 3 + n) else {
            pos = open + 3;
            continue;
        };
        let lang = text[open + 3..line_end].trim();
        let Some(close) = text[line_end..].find("```").map(|c| line_end + c) else {
            return;
        };
        pos = close + 3;
        if lang.is_empty() || LANGUAGES.contains(&lang.to_ascii_lowercase().as_str()) {
            continue;
        }
        let Some(tool) = tools.iter().find(|t| t.name.eq_ignore_ascii_case(lang)) else {
            continue;
        };
        // (Each such fence looks at the text around it: a few are an answer's calls, more
        // would make the pass quadratic.)
        named += 1;
        if named > 8 {
            return;
        }
        // Only as the answer itself or after the model's own commitment ("I will fetch the
        // page."), never after a past, a condition, an offer or a format shown ("Earlier I
        // ran this:", "If you prefer, run:", "Use this format:"), nor when the answer then
        // asks before going on ("Shall I proceed?").
        let before = text[..open].trim_end();
        let asks_after = text[pos..].contains(['?', '？']);
        if shown_as_example(text, open)
            || asks_after
            || !(before.is_empty() || fence_committed(before))
        {
            continue;
        }
        let body = text[line_end..close].trim();
        let mut args = child_tags(body, tool);
        if args.is_empty() && body.starts_with('{') {
            if let Some((_, Value::Object(o))) = jsonscan::value_at(body, 0) {
                args = o;
            }
        }
        if args.is_empty() {
            args = property_lines(body, tool).unwrap_or_default();
        }
        let props = tool.properties();
        if args.is_empty() || !args.keys().all(|k| props.iter().any(|(p, _)| p == k)) {
            continue;
        }
        push(
            out,
            &tool.name,
            Value::Object(args),
            TOOL_TAG,
            open..pos,
            tools,
            cfg,
        );
    }
}

/// `key: value` lines, every key one of the tool's properties with a value; `None` when a
/// line is anything else.
fn property_lines(body: &str, tool: &ToolSpec) -> Option<Map<String, Value>> {
    body.lines()
        .map(|line| {
            let (k, v) = line.split_once(':')?;
            let (k, v) = (k.trim(), v.trim());
            (tool.prop(k).is_some() && !v.is_empty()).then(|| {
                (
                    k.to_string(),
                    Value::String(schema::strip_quotes(v).to_string()),
                )
            })
        })
        .collect()
}

/// A sentence before a block (as `last_sentence` cut it), lower case, and whether the
/// model commits itself in it ("I'll", "let me", "now I").
fn lead_sentence(last: &str) -> (String, bool) {
    let sentence = last.to_lowercase().replace('\u{2019}', "'");
    let committed = [
        "i'll ",
        "i will ",
        "let me ",
        "let's ",
        "i'm going to ",
        "now i ",
    ]
    .iter()
    .any(|c| sentence.contains(c));
    (sentence, committed)
}

fn words_of(sentence: &str) -> Vec<&str> {
    sentence
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .collect()
}

/// The sentence before a block commits the model to running it now, in its own voice.
fn fence_committed(before: &str) -> bool {
    let last = crate::fuzzy::last_sentence(before);
    let (sentence, committed) = lead_sentence(last);
    let words = words_of(&sentence);
    let against = words.iter().any(|w| {
        matches!(
            *w,
            "you"
                | "your"
                | "yourself"
                | "if"
                | "won't"
                | "not"
                | "never"
                | "don't"
                | "instead"
                | "earlier"
                | "ran"
                | "was"
                | "were"
                | "example"
                | "format"
                | "template"
                | "looks"
                | "output"
                | "would"
                | "could"
                | "should"
        )
    });
    // (Or a status line: "Running it:", "Removing the stale file now.")
    let status = words
        .first()
        .is_some_and(|w| w.len() > 5 && w.ends_with("ing"))
        && last.trim_start().starts_with(char::is_uppercase);
    (committed || status) && !against && !crate::fuzzy::deferred(&sentence)
}

/// Words of a one-line command, single and double quotes grouping.
fn shell_words(cmd: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut started = false;
    for c in cmd.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                started = true;
            }
            (None, c) if c.is_whitespace() => {
                if started {
                    out.push(std::mem::take(&mut cur));
                    started = false;
                }
            }
            (None, c) => {
                cur.push(c);
                started = true;
            }
        }
    }
    if started {
        out.push(cur);
    }
    out
}

/// `["{\"name\": …}", "{…}"]`: a list of calls, each JSON-encoded as a string.
fn json_string_list(text: &str, tools: &[ToolSpec], cfg: &ParserConfig, out: &mut StrategyOutput) {
    let t = text.trim();
    if !t.starts_with("[\"") {
        return;
    }
    let Ok(Value::Array(items)) = serde_json::from_str::<Value>(t) else {
        return;
    };
    let start = first_text(text, 0..text.len());
    for item in items {
        let Some(s) = item.as_str() else { return };
        if let Some(v) = jsonscan::parse_lenient(s.trim()) {
            json_calls(&v, start..start + t.len(), MARKED, tools, cfg, out);
        }
    }
}

// ---------------------------------------------------------------- pythonic

/// The whole answer (or a fenced block that is the whole answer) is pythonic calls.
fn pythonic_answer(text: &str, tools: &[ToolSpec], cfg: &ParserConfig, out: &mut StrategyOutput) {
    let trimmed = text.trim();
    let mut conf = PYTHONIC;
    // NexusRaven: `Call: f(…)<bot_end>` and then its thought about the call.
    let raven = trimmed
        .strip_prefix("Call:")
        .and_then(|r| r.split_once("<bot_end>"))
        .map(|(call, _)| call.trim());
    let mut body = raven.unwrap_or(trimmed);
    if let Some(rest) = body.strip_prefix("```") {
        let Some(nl) = rest.find('\n') else { return };
        let lang = rest[..nl].trim().to_ascii_lowercase();
        if !matches!(
            lang.as_str(),
            "" | "python" | "py" | "tool_code" | "tool_call" | "tool_calls"
        ) {
            return;
        }
        let Some(close) = rest[nl..].rfind("```") else {
            return;
        };
        if !rest[nl + close + 3..].trim().is_empty() {
            return;
        }
        body = rest[nl..nl + close].trim();
        if lang.starts_with("tool") {
            conf = MARKED;
        }
    }
    let Some((mut calls, consumed)) = pythonic_calls(body) else {
        return;
    };
    // ChatGLM3's `tool_call(location='郑州', unit='celsius')`: the name travels on a line
    // of its own the client may drop; the one tool its named arguments fill is meant.
    for (n, a) in &mut calls {
        if matches!(n.as_str(), "tool_call" | "function_call" | "call_tool")
            && schema::resolve(n, tools, &cfg.aliases).is_none()
        {
            if let Some(t) = a
                .as_object()
                .filter(|o| !o.is_empty() && !o.contains_key(POSITIONAL))
                .and_then(|o| crate::sole(tools.iter().filter(|t| t.fills(o))))
            {
                *n = t.name.clone();
            }
        }
    }
    // Text after the calls is allowed only after a bracketed list that opens the answer:
    // small models go on to invent the tool's result.
    // A stray closing bracket after the call is no text.
    if !body[consumed..].trim().trim_matches([')', ']']).is_empty() {
        // Or after one call that opens the answer with its arguments named
        // (`remember(fact="…") I have updated …`); `add(2, 3) = 5` is arithmetic.
        let named = matches!(calls.as_slice(), [(_, Value::Object(a))]
            if !a.is_empty() && !a.contains_key(POSITIONAL));
        let listed = body.starts_with('[') && body[..consumed].trim_end().ends_with(']');
        if !(named || listed) {
            return;
        }
        conf = conf.min(PYTHONIC);
    }
    if !all_offered(&calls, tools, cfg) {
        return;
    }
    let start = first_text(text, 0..text.len());
    let span = start..start + trimmed.len();
    for (n, a) in calls {
        push(out, &n, a, conf, span.clone(), tools, cfg);
    }
}

/// The code of a numbered or bulleted item that opens with a call in backticks, when
/// only an explanation (after `:` or a dash) follows it.
fn item_call(raw: &str) -> Option<&str> {
    let t = raw.trim_start();
    let rest = t
        .strip_prefix("- ")
        .or_else(|| t.strip_prefix("* "))
        .or_else(|| {
            let digits = t.find(|c: char| !c.is_ascii_digit())?;
            (digits > 0)
                .then(|| t[digits..].strip_prefix(". "))
                .flatten()
        })?
        .trim_start();
    let body = rest.strip_prefix('`')?;
    let close = body.find('`')?;
    let after = body[close + 1..].trim();
    let code = body[..close].trim();
    (code.ends_with(')')
        && (after.is_empty() || after.starts_with([':', '-', '\u{2014}', '\u{2013}'])))
    .then_some(code)
}

/// The whole answer is `NAME[argument]` (WebShop's `search[kids toothbrush]`,
/// `click[Buy Now]`) for an offered tool: the argument is its main property.
fn bracket_action_answer(
    text: &str,
    tools: &[ToolSpec],
    cfg: &ParserConfig,
    out: &mut StrategyOutput,
) {
    let t = text.trim();
    if t.contains('\n') {
        return;
    }
    let Some(open) = t.find('[') else { return };
    let (name, inner) = (&t[..open], t[open + 1..t.len() - 1].trim());
    if name.is_empty()
        || inner.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
    {
        return;
    }
    let Some(tool) = schema::resolve(name, tools, &cfg.aliases) else {
        return;
    };
    let mut args = Map::new();
    if let Some(key) = tool.primary_property() {
        args.insert(key.to_string(), Value::String(inner.to_string()));
    }
    let start = first_text(text, 0..text.len());
    push(
        out,
        name,
        Value::Object(args),
        PYTHONIC,
        start..start + t.len(),
        tools,
        cfg,
    );
}

/// Lines that are nothing but pythonic calls of offered tools, after prose or a heading
/// ("Here is the corrected function call:\n\n[f(x=1)]", "**f(x=1)**", "`f(x=1)`"): the
/// calls, each with its arguments named (or a bracketed list), unless the text shows them
/// as an example.
fn pythonic_lines(text: &str, tools: &[ToolSpec], cfg: &ParserConfig, out: &mut StrategyOutput) {
    // (Pushed only once no line turns out to be an example.)
    let mut found: Vec<(Range<usize>, String, Value)> = Vec::new();
    let mut at = 0;
    for raw in text.split_inclusive('\n') {
        let start = at;
        at += raw.len();
        // "1. `search_class("Sitemap")`: This will help …": a list item that opens with
        // a call in backticks, explained after it (positional arguments too).
        let item = item_call(raw);
        let code = item.unwrap_or_else(|| {
            let line = in_own_tag(raw.trim().trim_start_matches("- "));
            after_label(line)
                .unwrap_or(line)
                .trim_matches(|c| c == '*' || c == '`')
                .trim()
        });
        if item.is_none() && (code.len() < 3 || !code.ends_with([')', ']']) || !code.contains('('))
        {
            continue;
        }
        let Some((calls, consumed)) = pythonic_calls(code) else {
            continue;
        };
        // Elsewhere each call names its arguments, or the line is a bracketed list.
        let listed = code.starts_with('[');
        let named = calls.iter().all(|(_, a)| {
            a.as_object()
                .is_some_and(|a| !a.is_empty() && !a.contains_key(POSITIONAL))
        });
        if consumed != code.len()
            || !(item.is_some() || listed || named)
            || !all_offered(&calls, tools, cfg)
        {
            continue;
        }
        if shown_as_example(text, start) {
            return;
        }
        let span = start..start + raw.trim_end().len();
        // (`push` gives positional arguments their names.)
        found.extend(calls.into_iter().map(|(n, a)| (span.clone(), n, a)));
    }
    for (span, n, a) in found {
        push(out, &n, a, PYTHONIC, span, tools, cfg);
    }
}

/// `<function-call>[get_balance()]</function-call>` (AgentDojo's prompting): a line
/// wrapped in one tag of its own holds what the tag says.
fn in_own_tag(line: &str) -> &str {
    let Some(rest) = line.strip_prefix('<') else {
        return line;
    };
    let Some((name, inner)) = rest.split_once('>') else {
        return line;
    };
    // (Only a tag that says it holds a call: not `<s>…</s>`, `<bad>…</bad>`.)
    let lower = name.to_ascii_lowercase();
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        || !["call", "tool", "function", "action"]
            .iter()
            .any(|w| lower.contains(w))
    {
        return line;
    }
    inner
        .strip_suffix('>')
        .and_then(|i| i.strip_suffix(name))
        .and_then(|i| i.strip_suffix("</"))
        .map_or(line, str::trim)
}

/// "Grounded Operation: CLICK(box=[[219,186,311,207]])": what follows a short label of
/// the step (CogAgent's), not one that shows a form ("Usage:", "Example:", "Returns:"),
/// nor ReAct's fields (its own strategy reads them, imagined observations and all).
fn after_label(line: &str) -> Option<&str> {
    let (label, rest) = line.split_once(": ")?;
    let label = label
        .trim_matches(|c| c == '*' || c == '`')
        .to_ascii_lowercase();
    let words: Vec<&str> = label.split_whitespace().collect();
    let shows = [
        "example",
        "examples",
        "usage",
        "syntax",
        "signature",
        "format",
        "schema",
        "definition",
        "returns",
        "return",
        "output",
        "result",
        "results",
        "like",
        "action",
        "thought",
        "observation",
    ];
    // The label names the step ("Grounded Operation", "Next step", "Tool call"), not what
    // to avoid or what was done before ("Never do this", "Previous call").
    let names_step = words.last().is_some_and(|w| {
        matches!(
            *w,
            "operation" | "step" | "call" | "calls" | "command" | "invocation" | "tool" | "now"
        )
    }) || words.first().is_some_and(|w| *w == "step");
    let put_off = words.iter().any(|w| {
        matches!(
            *w,
            "never"
                | "don't"
                | "dont"
                | "avoid"
                | "wrong"
                | "bad"
                | "incorrect"
                | "previous"
                | "last"
                | "earlier"
                | "old"
                | "deprecated"
                | "prior"
                | "failed"
                | "original"
                | "suggested"
                | "alternative"
                | "alternate"
                | "proposed"
                | "possible"
                | "optional"
                | "sample"
                | "manual"
        )
    });
    ((1..=3).contains(&words.len())
        && names_step
        && !put_off
        && words.iter().all(|w| {
            w.chars().all(|c| c.is_ascii_alphanumeric() || c == '\'') && !shows.contains(w)
        }))
    .then_some(rest)
}

/// Every call names an offered tool: a stray `print(x)` is code, not a call.
fn all_offered(calls: &[(String, Value)], tools: &[ToolSpec], cfg: &ParserConfig) -> bool {
    calls
        .iter()
        .all(|(n, _)| schema::resolve(n, tools, &cfg.aliases).is_some())
}

/// Positional pythonic arguments (`add(2, 3)`, kept as `{"$args": [2, 3]}`) given the
/// names of the tool's required properties, in order, then the other ones.
pub(crate) fn positional_args(
    args: Value,
    name: &str,
    tools: &[ToolSpec],
    cfg: &ParserConfig,
) -> Value {
    let Value::Object(mut m) = args else {
        return args;
    };
    let Some(Value::Array(list)) = m.remove(POSITIONAL) else {
        return Value::Object(m);
    };
    let Some(tool) = schema::resolve(name, tools, &cfg.aliases) else {
        return Value::Object(m);
    };
    let mut order: Vec<&str> = tool.required();
    for (p, _) in tool.properties() {
        if !order.contains(&p) {
            order.push(p);
        }
    }
    if list.len() > order.len() {
        return Value::Object(m);
    }
    for (k, v) in order.into_iter().zip(list) {
        m.entry(k.to_string()).or_insert(v);
    }
    Value::Object(m)
}

/// Key under which [`pythonic_calls`] keeps several positional arguments.
const POSITIONAL: &str = "$args";

/// `name(args)`, several separated by newlines, `;` or `,`, or a `[…]` list of them.
/// Returns the calls and the bytes consumed (the first call's alone may be used by a
/// caller reading a call out of prose; what follows it need not parse).
pub(crate) fn pythonic_calls(s: &str) -> Option<(Vec<(String, Value)>, usize)> {
    let mut p = Py {
        s: s.as_bytes(),
        i: 0,
        inner: Vec::new(),
    };
    p.ws();
    let list = p.eat(b'[');
    let mut calls = Vec::new();
    loop {
        p.ws();
        if list && p.eat(b']') {
            break;
        }
        if p.i >= p.s.len() {
            if list {
                return None;
            }
            break;
        }
        let save = p.i;
        match p.call() {
            Some(call) => {
                calls.append(&mut p.inner);
                calls.push(call);
            }
            // Text after the calls ends them (a list must close, though).
            None if !calls.is_empty() && !list => {
                p.i = save;
                break;
            }
            None => return None,
        }
        if calls.len() > crate::MAX_CALLS {
            return None;
        }
        p.ws();
        if !(p.eat(b',') || p.eat(b';') || list) {
            // Newline-separated calls: another name must follow.
            if p.i < p.s.len() && !(p.s[p.i].is_ascii_alphabetic() || p.s[p.i] == b'_') {
                break;
            }
        }
    }
    (!calls.is_empty()).then_some((calls, p.i))
}

struct Py<'a> {
    s: &'a [u8],
    i: usize,
    /// Calls written as another call's argument (`f(x=g(y=1))`): made first, and the
    /// argument left to the model once their result is in.
    inner: Vec<(String, Value)>,
}

impl Py<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn eat(&mut self, b: u8) -> bool {
        if self.s.get(self.i) == Some(&b) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn ident(&mut self) -> Option<String> {
        let st = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_alphanumeric()
                || matches!(self.s[self.i], b'_' | b'.' | b'-'))
        {
            self.i += 1;
        }
        if self.i == st || self.s[st].is_ascii_digit() {
            return None;
        }
        std::str::from_utf8(&self.s[st..self.i])
            .ok()
            .map(str::to_string)
    }
    fn call(&mut self) -> Option<(String, Value)> {
        let mut name = self.ident()?;
        // `brave_search.call(query=…)` is Llama's built-in tool convention.
        if let Some(stem) = name.strip_suffix(".call") {
            name = stem.to_string();
        }
        self.ws();
        if !self.eat(b'(') {
            return None;
        }
        let mut args = Map::new();
        let mut positional = Vec::new();
        loop {
            self.ws();
            if self.eat(b')') {
                break;
            }
            let save = self.i;
            let key = self.ident();
            let key_end = self.i;
            self.ws();
            let mut keyed = key.is_some() && self.eat(b'=') && !self.eat(b'=');
            // `max_chars 8000`: a key and its value with no `=` between (gpt-oss
            // writing a call out in its thinking).
            if !keyed && key.is_some() && self.i > key_end {
                keyed = self
                    .s
                    .get(self.i)
                    .is_some_and(|b| b.is_ascii_digit() || matches!(b, b'"' | b'\''));
            }
            if !keyed {
                self.i = save;
            }
            self.ws();
            let at = self.i;
            let nested = self.ident().is_some() && self.s.get(self.i) == Some(&b'(');
            self.i = at;
            if nested {
                let call = self.call()?;
                self.inner.push(call);
            } else if keyed && self.s.get(self.i) == Some(&b'?') {
                // `amount=?`: a value the model does not know yet is left out.
                self.i += 1;
            } else {
                let v = self.value()?;
                match (keyed, key) {
                    (true, Some(k)) => {
                        args.insert(k, v);
                    }
                    _ => positional.push(v),
                }
            }
            self.ws();
            if self.eat(b',') {
                continue;
            }
            self.ws();
            if self.eat(b')') {
                break;
            }
            // `[f(a=1, b=['x']]` ending the text: the call's `)` lost before the list's
            // `]`.
            if self.s.get(self.i) == Some(&b']')
                && self.s[self.i + 1..].iter().all(u8::is_ascii_whitespace)
            {
                break;
            }
            return None;
        }
        let args = match (args.is_empty(), positional.len()) {
            (_, 0) => Value::Object(args),
            (true, 1) => positional.pop().unwrap_or(Value::Null),
            _ => {
                let mut args = args;
                args.insert(POSITIONAL.to_string(), Value::Array(positional));
                Value::Object(args)
            }
        };
        Some((name, args))
    }
    fn value(&mut self) -> Option<Value> {
        let c = *self.s.get(self.i)?;
        match c {
            b'"' | b'\'' => self.string().map(Value::String),
            b'[' | b'{' => {
                let text = std::str::from_utf8(self.s).ok()?;
                let end = jsonscan::balanced_end(text, self.i, true)?;
                let v = jsonscan::repair(&text[self.i..end])?;
                self.i = end;
                Some(v)
            }
            // A tuple, `range=(0, 100)`: a list.
            b'(' => {
                let text = std::str::from_utf8(self.s).ok()?;
                let close = self.i + text[self.i..].find(')')?;
                let inner = &text[self.i + 1..close];
                if inner.contains(['(', '\n']) {
                    return None;
                }
                let v = jsonscan::repair(&format!("[{inner}]"))?;
                self.i = close + 1;
                Some(v)
            }
            _ => {
                // A bare value is a number, `True`, `None`…: stop at anything else.
                let st = self.i;
                while self.i < self.s.len()
                    && (self.s[self.i].is_ascii_alphanumeric()
                        || matches!(self.s[self.i], b'.' | b'+' | b'-' | b'_' | b' ' | b'\t'))
                {
                    self.i += 1;
                }
                let word = std::str::from_utf8(&self.s[st..self.i]).ok()?.trim();
                match word {
                    "True" | "true" => Some(Value::Bool(true)),
                    "False" | "false" => Some(Value::Bool(false)),
                    "None" | "null" => Some(Value::Null),
                    w => serde_json::from_str::<Value>(w)
                        .ok()
                        .filter(Value::is_number),
                }
            }
        }
    }
    fn string(&mut self) -> Option<String> {
        let q = self.s[self.i];
        let triple = self.s[self.i..].starts_with(&[q, q, q]);
        self.i += if triple { 3 } else { 1 };
        let mut out = Vec::new();
        while self.i < self.s.len() {
            let b = self.s[self.i];
            if b == b'\\' && self.i + 1 < self.s.len() {
                let n = self.s[self.i + 1];
                match n {
                    b'n' => out.push(b'\n'),
                    b't' => out.push(b'\t'),
                    b'\\' | b'\'' | b'"' => out.push(n),
                    // Python keeps the backslash of an escape it does not know (`\s`).
                    other => out.extend([b'\\', other]),
                }
                self.i += 2;
                continue;
            }
            // (`'Schindler's List'`: a quote between two letters is an apostrophe the
            // model did not escape; a closing quote is never followed by a letter.)
            let apostrophe = q == b'\''
                && !triple
                && self.i > 0
                && self.s[self.i - 1].is_ascii_alphabetic()
                && self.s.get(self.i + 1).is_some_and(u8::is_ascii_alphabetic);
            if b == q && !apostrophe && (!triple || self.s[self.i..].starts_with(&[q, q, q])) {
                self.i += if triple { 3 } else { 1 };
                return String::from_utf8(out).ok();
            }
            out.push(b);
            self.i += 1;
        }
        None
    }
}

// ---------------------------------------------------------------- <tool_name>

/// A call's arguments written inside its tag: `<parameter name="k">v</parameter>` (or
/// `param`, `arg`) children, a JSON object, or a tag per property.
fn tagged_arguments(body: &str, tool: &ToolSpec) -> Value {
    for (open, end) in [
        ("<parameter name=", "</parameter>"),
        ("<param name=", "</param>"),
        ("<arg name=", "</arg>"),
    ] {
        let args = keyed_values(body, open, end, &[open], str::trim);
        if !args.is_empty() {
            return Value::Object(args);
        }
    }
    if body.starts_with('{') {
        jsonscan::value_at(body, 0).map_or(Value::Null, |(_, v)| v)
    } else {
        Value::Object(child_tags(body, tool))
    }
}

/// `<prop>value</prop>` for each of the tool's properties, at any depth.
fn child_tags(body: &str, tool: &ToolSpec) -> Map<String, Value> {
    let mut m = Map::new();
    for (prop, _) in tool.properties() {
        let open = format!("<{prop}>");
        let close = format!("</{prop}>");
        // `<command>git</command><command>log</command>` for an array: each tag an item.
        if tool.prop_type(prop) == Some("array") {
            let mut items = Vec::new();
            let mut from = 0;
            while let Some(i) = find_ci(body, from, &open) {
                let vs = i + open.len();
                let Some(j) = find_ci(body, vs, &close) else {
                    break;
                };
                let v = body[vs..j].trim();
                if !v.is_empty() {
                    items.push(Value::String(v.to_string()));
                }
                from = j + close.len();
            }
            if items.len() > 1 {
                m.insert(prop.to_string(), Value::Array(items));
                continue;
            }
        }
        if let Some(i) = find_ci(body, 0, &open) {
            let vs = i + open.len();
            // (A tag left open, `<args><file>…</file></read_file>`, runs to the end of
            // the call's body, or to the next property's tag.)
            let j = find_ci(body, vs, &close).unwrap_or_else(|| {
                tool.properties()
                    .iter()
                    .filter(|(p, _)| *p != prop)
                    .filter_map(|(p, _)| find_ci(body, vs, &format!("<{p}>")))
                    .min()
                    .unwrap_or(body.len())
            });
            let v = body[vs..j].trim();
            if !v.is_empty() {
                m.insert(prop.to_string(), Value::String(v.to_string()));
            }
        }
    }
    m
}

/// Where a tool's tag that is never closed ends: `<read_file>\n<path>a.json</path>\n
/// </filesystem>` — its parameter tags, then only closing tags (of a wrapper the model
/// invented) to the end of the text.
fn unclosed_end(
    text: &str,
    body_start: usize,
    name: &str,
    tools: &[ToolSpec],
    cfg: &ParserConfig,
) -> Option<usize> {
    let tool = schema::resolve(name, tools, &cfg.aliases)?;
    let body = &text[body_start..];
    if !body.trim_start().starts_with('<') {
        return None;
    }
    let m = child_tags(body, tool);
    let last = m
        .keys()
        .filter_map(|k| {
            let close = format!("</{k}>");
            find_ci(body, 0, &close).map(|i| i + close.len())
        })
        .max()?;
    let mut tail = body[last..].trim();
    while let Some(r) = tail.strip_prefix("</") {
        let (tag, after) = r.split_once('>')?;
        if tag.is_empty()
            || !tag
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return None;
        }
        tail = after.trim_start();
    }
    tail.is_empty().then_some(body_start + last)
}

/// Tags models wrap their reasoning in, never a call whatever the tools are named.
pub(crate) const REASONING_TAGS: &[&str] = &[
    "think",
    "thinking",
    "reasoning",
    "thought",
    "thoughts",
    "analysis",
    "reflection",
    "scratchpad",
];

/// `<NAME>body</NAME>` where NAME is an offered tool (or one of its aliases): models
/// that were shown XML-ish prompts invent such tags.
fn tool_named_tags(text: &str, tools: &[ToolSpec], cfg: &ParserConfig, out: &mut StrategyOutput) {
    let mut closes: HashMap<String, Next> = HashMap::new();
    let mut last_open: HashMap<String, Option<usize>> = HashMap::new();
    let mut pos = 0;
    while let Some(off) = text[pos..].find(['<', '[']) {
        let start = pos + off;
        pos = start + 1;
        // `[read_file]` opening a body of tags that `</read_file>` closes: the opening
        // tag written in brackets.
        let bracket = text[start..].starts_with('[');
        let rest = &text[start + 1..];
        let name_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'))
            .unwrap_or(rest.len());
        let shut = if bracket { ']' } else { '>' };
        if name_len == 0 || name_len > 64 || !rest[name_len..].starts_with(shut) {
            continue;
        }
        if bracket && !rest[name_len + 1..].trim_start().starts_with('<') {
            continue;
        }
        let tag = &rest[..name_len];
        // `<think>…</think>` wraps reasoning even when a tool is named `think`.
        if REASONING_TAGS.iter().any(|r| tag.eq_ignore_ascii_case(r)) {
            continue;
        }
        // `<terminal_command>` for a `terminal` tool.
        let Some(name) = [tag, tag.strip_suffix("_command").unwrap_or(tag)]
            .into_iter()
            .find(|n| schema::resolve(n, tools, &cfg.aliases).is_some())
        else {
            continue;
        };
        let body_start = start + 1 + name_len + 1;
        let close = format!("</{tag}>");
        let closed = closes
            .entry(close.to_ascii_lowercase())
            .or_default()
            .at(text, body_start, &close);
        // A tag never closed counts only as markup on a line of its own, and only the
        // text's last such opener (what follows it must be its parameters to the end):
        // one try per name keeps long texts linear.
        let own_line = text[..start]
            .chars()
            .rev()
            .take_while(|c| *c != '\n')
            .all(char::is_whitespace);
        // (`…</use_mcp_tool` ending the text: the stop sequence took the `>`; a tag on
        // a line of its own, not one quoted in a sentence.)
        let cut_close = (closed.is_none() && own_line)
            .then(|| {
                let t = text.trim_end();
                let c = &close[..close.len() - 1];
                t.len()
                    .checked_sub(c.len())
                    .filter(|&at| at >= body_start)
                    .filter(|&at| t.get(at..).is_some_and(|tail| tail.eq_ignore_ascii_case(c)))
            })
            .flatten();
        let mut last_opener = || {
            *last_open
                .entry(tag.to_string())
                .or_insert_with(|| text.rfind(&format!("<{tag}>")))
                == Some(start)
        };
        let Some(close_at) = closed.or(cut_close).or_else(|| {
            (!bracket && own_line && last_opener())
                .then(|| unclosed_end(text, body_start, name, tools, cfg))
                .flatten()
        }) else {
            continue;
        };
        let body = text[body_start..close_at].trim();
        if body.is_empty() || body.len() > 16 * 1024 {
            continue;
        }
        let args = if body.starts_with('{') {
            match jsonscan::value_at(body, 0) {
                Some((_, v)) => v,
                None => continue,
            }
        } else if body.starts_with('<') {
            // Cline / Roo Code: `<read_file><path>a.md</path></read_file>`, also nested
            // (`<args><file><path>…</path></file></args>`).
            let Some(tool) = schema::resolve(name, tools, &cfg.aliases) else {
                continue;
            };
            let m = child_tags(body, tool);
            if m.is_empty() {
                continue;
            }
            Value::Object(m)
        } else {
            Value::String(body.to_string())
        };
        let end = if closed.is_some() {
            close_at + close.len()
        } else if cut_close.is_some() {
            close_at + close.len() - 1
        } else {
            close_at
        };
        push(out, name, args, TOOL_TAG, start..end, tools, cfg);
        pos = end;
    }
}
