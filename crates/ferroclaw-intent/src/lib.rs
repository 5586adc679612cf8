//! Text-intent parser for models without native tool calling (gpt-oss and friends).
//!
//! A model answer (its `reasoning` and `content` fields) is scanned for tool-call
//! intents with a configurable chain of strategies:
//!
//! * [`Strategy::Harmony`] — leaked gpt-oss Harmony markup, intact or with its special
//!   tokens stripped (`commentary to=functions.read json{…}`).
//! * [`Strategy::NativeText`] — other families' own call formats written as text: Qwen XML,
//!   Hermes `<tool_call>` JSON, Llama `<|python_tag|>`, Mistral `[TOOL_CALLS]`, DeepSeek
//!   tokens, pythonic calls, tags named after a tool.
//! * [`Strategy::GuidedJson`] — `{"tool_calls":[{"name","arguments"}],"done":bool}`,
//!   bare, fenced or inside prose.
//! * [`Strategy::React`] — `Thought:` / `Action:` / `Action Input:` blocks.
//! * [`Strategy::Markers`] — `[TOOL:name|key=value|…]` and `[DONE]`.
//! * [`Strategy::Fuzzy`] — natural-language intents ("let's read config.yaml"), with
//!   negated, hypothetical and past-tense mentions rejected.
//!
//! Text is normalised first (`normalize`: wrapped reasoning pieces joined, escaped
//! answers unescaped, full-width tokens made ASCII).
//!
//! Every call is mapped to a canonical tool name (aliases, leaked tokens), its
//! arguments are coerced to the tool's JSON schema, and duplicates are removed.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub mod baseline;
mod bind;
pub mod eval;
mod fuzzy;
mod guided;
mod harmony;
mod jsonscan;
mod markers;
mod native_text;
mod normalize;
pub mod prompts;
mod react;
mod schema;

pub use schema::{clean_tool_name, default_aliases, ToolSpec};

/// One parsing strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    Harmony,
    NativeText,
    GuidedJson,
    React,
    Markers,
    Fuzzy,
}

impl Strategy {
    pub const ALL: [Strategy; 6] = [
        Strategy::Harmony,
        Strategy::NativeText,
        Strategy::GuidedJson,
        Strategy::React,
        Strategy::Markers,
        Strategy::Fuzzy,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Harmony => "harmony",
            Strategy::NativeText => "native_text",
            Strategy::GuidedJson => "guided_json",
            Strategy::React => "react",
            Strategy::Markers => "markers",
            Strategy::Fuzzy => "fuzzy",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Error for an unknown strategy or source name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} `{value}`")]
pub struct ParseNameError {
    kind: &'static str,
    value: String,
}

impl FromStr for Strategy {
    type Err = ParseNameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "harmony" => Ok(Strategy::Harmony),
            "native_text" | "native_formats" => Ok(Strategy::NativeText),
            "guided_json" | "json" | "guided" => Ok(Strategy::GuidedJson),
            "react" => Ok(Strategy::React),
            "markers" | "marker" => Ok(Strategy::Markers),
            "fuzzy" => Ok(Strategy::Fuzzy),
            _ => Err(ParseNameError {
                kind: "strategy",
                value: s.to_string(),
            }),
        }
    }
}

/// Which field of the model answer a call came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Reasoning,
    Content,
}

impl FromStr for Source {
    type Err = ParseNameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "reasoning" | "reasoning_content" => Ok(Source::Reasoning),
            "content" => Ok(Source::Content),
            _ => Err(ParseNameError {
                kind: "source",
                value: s.to_string(),
            }),
        }
    }
}

/// How strategies and sources are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Precedence {
    /// Sources outer, strategies inner: the first source (in `sources` order) in which any
    /// strategy finds calls wins.
    SourceFirst,
    /// Strategies outer, sources inner: a structured call anywhere (e.g. Harmony markup
    /// leaked into `content`) beats a fuzzy guess from `reasoning`. Default, because
    /// gpt-oss often *talks about* the call in its reasoning and *makes* it in content.
    #[default]
    StrategyFirst,
}

/// Parser configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ParserConfig {
    /// Strategies, tried in this order; the next one is the fallback.
    pub order: Vec<Strategy>,
    /// Answer fields, tried in this order.
    pub sources: Vec<Source>,
    /// Extra tool-name aliases (alias → canonical); merged over [`default_aliases`].
    pub aliases: BTreeMap<String, String>,
    /// Calls below this confidence are dropped.
    pub min_confidence: f32,
    pub precedence: Precedence,
}

impl Default for ParserConfig {
    fn default() -> Self {
        ParserConfig {
            order: Strategy::ALL.to_vec(),
            sources: vec![Source::Reasoning, Source::Content],
            aliases: default_aliases(),
            min_confidence: 0.5,
            precedence: Precedence::default(),
        }
    }
}

/// One tool call recovered from text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParsedCall {
    /// Canonical tool name (one of the offered tools).
    pub name: String,
    /// Arguments, coerced to the tool's schema (always a JSON object).
    pub arguments: Value,
    pub confidence: f32,
    pub strategy: Strategy,
    pub source: Source,
    /// Byte range in the source text the call was read from.
    pub span: Range<usize>,
}

/// A call the text points at without committing to it fully: a tool named in an
/// intending sentence whose arguments could not be read, or a call below the confidence
/// threshold. Never executed as it is; `intent.confirm` may ask the model for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unsure {
    /// Canonical tool name.
    pub name: String,
    /// What was read with some confidence (may be empty).
    pub arguments: Value,
    pub strategy: Strategy,
    pub source: Source,
    /// The piece of text the intent was read from.
    pub excerpt: String,
}

/// Result of [`parse`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ParseOutcome {
    pub calls: Vec<ParsedCall>,
    /// Intents that did not become calls (only when `calls` is empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsure: Vec<Unsure>,
    /// A completion signal was seen (`"done": true`, `Action: done`, `[DONE]`,
    /// `Final Answer:`, a Harmony `final` channel).
    pub done: bool,
    /// Text meant for the user: the Harmony final channel, a ReAct final answer, or the
    /// content with the call markup removed.
    pub final_text: Option<String>,
}

/// No answer legitimately holds more calls than this; the rest are ignored.
pub const MAX_CALLS: usize = 64;

/// Output of one strategy on one text.
#[derive(Debug, Default)]
pub(crate) struct StrategyOutput {
    pub calls: Vec<ParsedCall>,
    pub done: bool,
    /// Text for the user, if the format delimits it.
    pub final_text: Option<String>,
    /// Byte ranges of recognised markup (removed from the content to get the final text).
    pub markup: Vec<Range<usize>>,
    pub unsure: Vec<Unsure>,
}

static PAST_INTRO: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    ferroclaw_types::literal_regex(
        r"(?i)\b(?:calls? (?:i|we) (?:made|did|issued|sent)|(?:i|we) (?:previously |already |just )?(?:called|made|issued|sent|used)(?: the| a)? (?:call|function|tool)s?|(?:previous|earlier|last) (?:function |tool )?calls?)\s*(?:was|were|is)?\s*:?\s*$",
    )
});

/// The call at `start` is quoted as one already made ("The function call I made was:
/// <function_call>{…}"): a quotation, not a call.
fn quoted_past(text: &str, start: usize) -> bool {
    let from = harmony::floor(text, start.saturating_sub(120));
    let mut before = text[from..harmony::floor(text, start)].trim_end();
    // Opening tags between the introduction and the call.
    while before.ends_with('>') {
        match before.rfind('<') {
            Some(i) => before = before[..i].trim_end(),
            None => break,
        }
    }
    PAST_INTRO.is_match(before)
}

pub(crate) fn run_strategy(
    strategy: Strategy,
    text: &str,
    tools: &[ToolSpec],
    cfg: &ParserConfig,
) -> StrategyOutput {
    run_strategy_on(strategy, text, Source::Content, tools, cfg)
}

/// [`run_strategy`] on a text of the given source (the fuzzy strategy reads reasoning as
/// the model's notes to itself).
pub(crate) fn run_strategy_on(
    strategy: Strategy,
    text: &str,
    source: Source,
    tools: &[ToolSpec],
    cfg: &ParserConfig,
) -> StrategyOutput {
    let mut out = match strategy {
        Strategy::Fuzzy if source == Source::Reasoning => fuzzy::parse_reasoning(text, tools, cfg),
        Strategy::Harmony => harmony::parse(text, tools, cfg),
        Strategy::NativeText => native_text::parse(text, tools, cfg),
        Strategy::GuidedJson => guided::parse(text, tools, cfg),
        Strategy::React => react::parse(text, tools, cfg),
        Strategy::Markers => markers::parse(text, tools, cfg),
        Strategy::Fuzzy => fuzzy::parse(text, tools, cfg),
    };
    out.calls.truncate(MAX_CALLS);
    for c in &mut out.calls {
        c.strategy = strategy;
    }
    out.calls.retain(|c| !quoted_past(text, c.span.start));
    let (sure, weak): (Vec<ParsedCall>, Vec<ParsedCall>) = std::mem::take(&mut out.calls)
        .into_iter()
        .partition(|c| c.confidence >= cfg.min_confidence);
    out.calls = sure;
    out.unsure.extend(weak.into_iter().map(|c| Unsure {
        excerpt: text.get(c.span.clone()).unwrap_or_default().to_string(),
        name: c.name,
        arguments: c.arguments,
        strategy,
        source: c.source,
    }));
    for u in &mut out.unsure {
        u.strategy = strategy;
    }
    dedup(&mut out.calls, strategy == Strategy::Fuzzy);
    out
}

/// Run one strategy alone on one text (source is reported as `Content`).
pub fn parse_with(
    strategy: Strategy,
    text: &str,
    tools: &[ToolSpec],
    cfg: &ParserConfig,
) -> Vec<ParsedCall> {
    run_strategy(strategy, &normalize::normalize(text), tools, cfg).calls
}

/// Parse a model answer for tool calls. Never panics.
pub fn parse(
    reasoning: Option<&str>,
    content: Option<&str>,
    tools: &[ToolSpec],
    cfg: &ParserConfig,
) -> ParseOutcome {
    let mut reasoning = reasoning.map(normalize::normalize);
    let mut content = content.map(normalize::normalize);
    // An answer that is one thinking block and nothing else (`<think>Let me check the
    // config.</think>`): the model's thinking, read as reasoning is.
    if reasoning.as_deref().is_none_or(|r| r.trim().is_empty()) {
        if let Some(inner) = content.as_deref().and_then(whole_think_block) {
            reasoning = Some(std::borrow::Cow::Owned(inner.to_string()));
            content = None;
        }
    }
    let text_of = |s: Source| match s {
        Source::Reasoning => reasoning.as_deref().filter(|t| !t.trim().is_empty()),
        Source::Content => content.as_deref().filter(|t| !t.trim().is_empty()),
    };
    let mut sources: Vec<Source> = Vec::new();
    for s in &cfg.sources {
        if !sources.contains(s) {
            sources.push(*s);
        }
    }
    let mut done = false;
    let ended = std::cell::Cell::new(false);
    let mut final_text: Option<String> = None;
    // Content-level final text from the first structured strategy that delimits it.
    let mut content_markup: Vec<Range<usize>> = Vec::new();
    let mut harmony_final_in: Vec<Source> = Vec::new();
    let mut winner: Option<Vec<ParsedCall>> = None;
    let mut unsure: Vec<Unsure> = Vec::new();

    let mut attempt = |strategy: Strategy, source: Source| -> Option<Vec<ParsedCall>> {
        let text = text_of(source)?;
        if strategy == Strategy::Fuzzy && harmony_final_in.contains(&source) {
            // The text is a Harmony final answer for the user, not a plan.
            return None;
        }
        let mut out = run_strategy_on(strategy, text, source, tools, cfg);
        // An imperative in the answer ("Run `cargo test` to check.") tells the reader
        // what to do; in the model's reasoning it is its own note to itself.
        if strategy == Strategy::Fuzzy && source == Source::Content {
            out.calls
                .retain(|c| !crate::fuzzy::tells_reader(text, c.span.start));
            if crate::fuzzy::waits_for_user(text) {
                out.calls.clear();
            }
        }
        done |= out.done;
        // A structured strategy read the model's own "done" (ReAct's `finish`, DSPy's
        // `finish` tool name): the prose around it is no call.
        if out.done && out.calls.is_empty() && strategy != Strategy::Fuzzy {
            ended.set(true);
        }
        if strategy == Strategy::Harmony && out.final_text.is_some() {
            harmony_final_in.push(source);
        }
        if source == Source::Content {
            if final_text.is_none() {
                final_text = out.final_text.take();
            }
            content_markup.extend(out.markup.iter().cloned());
        }
        for c in &mut out.calls {
            c.source = source;
        }
        for mut u in out.unsure {
            u.source = source;
            if unsure.len() < 8 && !unsure.iter().any(|o| o.name == u.name) {
                unsure.push(u);
            }
        }
        (!out.calls.is_empty()).then_some(out.calls)
    };

    match cfg.precedence {
        Precedence::StrategyFirst => {
            'outer: for &st in &cfg.order {
                for &src in &sources {
                    if let Some(calls) = attempt(st, src) {
                        winner = Some(calls);
                        break 'outer;
                    }
                    if ended.get() {
                        break 'outer;
                    }
                }
            }
        }
        Precedence::SourceFirst => {
            'outer: for &src in &sources {
                for &st in &cfg.order {
                    if let Some(calls) = attempt(st, src) {
                        winner = Some(calls);
                        break 'outer;
                    }
                    if ended.get() {
                        break 'outer;
                    }
                }
            }
        }
    }
    let mut calls = winner.unwrap_or_default();
    if let Some(r) = reasoning.as_deref() {
        chose_to_answer(r, &mut calls);
    }
    if let (Some(r), Some(c)) = (reasoning.as_deref(), content.as_deref()) {
        answer_settles_step(r, c, &mut calls, tools, cfg);
    }
    if let Some(r) = reasoning.as_deref() {
        reasoned_values(r, &mut calls, tools);
    }
    drop_awaiting_results(&mut calls);
    if answered_instead(reasoning.as_deref(), content.as_deref(), &calls, tools, cfg)
        || answered_after(reasoning.as_deref(), content.as_deref(), &calls)
    {
        calls.clear();
    }

    if final_text.is_none() {
        if let Some(c) = content.as_deref() {
            let mut ranges = content_markup;
            ranges.extend(
                calls
                    .iter()
                    .filter(|c| c.source == Source::Content && c.strategy != Strategy::Fuzzy)
                    .map(|c| c.span.clone()),
            );
            let rest = remove_ranges(c, &ranges);
            let rest = rest.trim();
            if !rest.is_empty() {
                final_text = Some(rest.to_string());
            }
        }
    }
    if !calls.is_empty() {
        unsure.clear();
    }
    ParseOutcome {
        calls,
        unsure,
        done,
        final_text,
    }
}

/// Steps read in the reasoning's prose give way to a step the answer itself commits to
/// with other tools: the reasoning weighs what to look at ("Look at `dequeue()` in
/// `job_queue.py`"), the answer says what the model does now ("Let me run the simulation
/// first"). A step the reasoning ends on is the one it chose, and stays.
fn answer_settles_step(
    reasoning: &str,
    content: &str,
    calls: &mut Vec<ParsedCall>,
    tools: &[ToolSpec],
    cfg: &ParserConfig,
) {
    if calls.is_empty()
        || !calls
            .iter()
            .all(|c| c.strategy == Strategy::Fuzzy && c.source == Source::Reasoning)
    {
        return;
    }
    // (The reasoning's last paragraph is where it settles: "… I'll search the web for it.
    // Let me do that.")
    // (Unless the answer is that one step in a sentence, "Let me now run the build to
    // see the actual compiler errors.": what the model does, after what it weighed.)
    let trimmed = reasoning.trim_end();
    let last = trimmed.rfind("\n\n").unwrap_or(0);
    let one_step = {
        let c = content.trim();
        c.split_whitespace().count() <= 20
            && !c
                .trim_end_matches(['.', '!', '?', '。'])
                .contains(['.', '!', '?', '\n', '。'])
    };
    if !one_step && calls.iter().any(|c| c.span.end > last) {
        return;
    }
    let mut own = run_strategy(Strategy::Fuzzy, content, tools, cfg).calls;
    own.retain(|c| !fuzzy::tells_reader(content, c.span.start));
    // A step the answer puts after something else ("once the search is done") is no
    // step now.
    let later = |c: &ParsedCall| {
        let lower = fuzzy::call_sentence(content, &c.span).to_lowercase();
        [
            "once ",
            "after ",
            "when ",
            "then ",
            "later",
            "afterwards",
            "if ",
            "before ",
        ]
        .iter()
        .any(|w| lower.contains(w))
    };
    // (A step the reasoning ended on stays when the answer only says part of it again.)
    let ended_on = calls.iter().any(|c| c.span.end > last);
    if own.is_empty()
        || own.iter().any(later)
        || (ended_on && own.iter().all(|c| calls.iter().any(|r| r.name == c.name)))
    {
        return;
    }
    for c in &mut own {
        c.source = Source::Content;
    }
    *calls = own;
}

/// A prose call read from the content ("I'll check the weather in Florence, Italy for
/// you.") takes the values the reasoning settled on by name ("I should use "Florence" as
/// the location"): the reasoning is where the model chose its arguments, the content
/// only tells the user.
fn reasoned_values(reasoning: &str, calls: &mut [ParsedCall], tools: &[ToolSpec]) {
    for c in calls
        .iter_mut()
        .filter(|c| c.strategy == Strategy::Fuzzy && c.source == Source::Content)
    {
        let Some(tool) = tools.iter().find(|t| t.name == c.name) else {
            continue;
        };
        let bound = bind::bindings(reasoning, tool);
        let Some(args) = c.arguments.as_object_mut() else {
            continue;
        };
        if bound.is_empty() {
            continue;
        }
        for (k, v) in bound {
            args.insert(k, v);
        }
        c.arguments = schema::coerce_args(std::mem::take(&mut c.arguments), tool);
    }
}

/// The text inside a `<think>` (or `<thinking>`) block that is the whole text.
fn whole_think_block(text: &str) -> Option<&str> {
    let t = text.trim();
    ["think", "thinking"].iter().find_map(|tag| {
        let inner = t
            .strip_prefix(&format!("<{tag}>"))?
            .strip_suffix(&format!("</{tag}>"))?;
        (!inner.contains(&format!("<{tag}>")) && !inner.contains(&format!("</{tag}>")))
            .then_some(inner)
    })
}

/// An intent read from the thinking ("I'll use web_search with …") that the model did
/// not act on: after it, the answer went to the user (the content, or the text after
/// `</think>`, is a real answer with no call in it). The model answered from what it
/// knew or imagined the tool's result; running the tool now would not be its turn.
/// Phrases that close an answer for the user.
const SIGN_OFFS: &[&str] = &[
    "let me know if",
    "feel free to ask",
    "hope this helps",
    "anything else i can",
];

/// Words of a preamble before a call: the model says what it is about to do, or names
/// the fault it is about to fix ("The issue is `f` on line 386 …").
const PREAMBLE_CUES: &[&str] = &[
    "let me",
    "let's",
    "i'll",
    "i will",
    "i'm going",
    "i am going",
    "we'll",
    "we will",
    "i need to",
    "we need to",
    "i'm ",
    "please wait",
    "hold on",
    "ing ",
    "the issue",
    "the problem",
    "the bug",
    "the error",
    "the cause",
    "second",
    " sec",
    "moment",
    "on it",
    "here we go",
    "right away",
    "right up",
    "shortly",
    "稍候",
    "马上",
    "立即",
    "这就",
    "帮您",
    "为您",
    "一下",
    "让我",
    "我来",
    "我将",
    "我会",
    "我先",
    "稍等",
    "正在",
    "问题",
    // Russian steps to come ("Теперь мне нужно уточнить…", "Давайте проверим").
    "теперь нужно",
    "мне нужно",
    "давайте",
    "сейчас я",
    // Korean and Japanese first-person futures ("결과를 기다리겠습니다", "確認してみます").
    "겠습니다",
    "할게요",
    "볼게요",
    "드릴게요",
    "ましょう",
    "てみます",
    "します",
];

fn answered_instead(
    reasoning: Option<&str>,
    content: Option<&str>,
    calls: &[ParsedCall],
    tools: &[ToolSpec],
    cfg: &ParserConfig,
) -> bool {
    /// Shorter than this, the text after the thinking is a preamble ("Let me check.").
    const ANSWER_MIN: usize = 160;
    let Some(content) = content else {
        return false;
    };
    if calls.is_empty() || calls.iter().any(|c| c.strategy != Strategy::Fuzzy) {
        return false;
    }
    let think_end = content.rfind("</think>").map(|i| i + "</think>".len());
    let thinking = |c: &ParsedCall| match c.source {
        Source::Reasoning => true,
        Source::Content => think_end.is_some_and(|e| c.span.end <= e),
    };
    if !calls.iter().all(thinking) {
        return false;
    }
    let answer = content[think_end.unwrap_or(0)..].trim();
    // (Lengths in characters: a Russian or Chinese preamble is no longer than an English one.)
    let answer_len = answer.chars().count();
    let labelled = answer
        .trim_start_matches(['*', '#', ' '])
        .to_ascii_lowercase()
        .starts_with("final answer");
    // A question to the user ("Could you tell me the city?") is the model asking instead of
    // calling, however short.
    // So is an answer that signs off ("Let me know if you'd like more details!").
    let lower = answer.to_lowercase();
    let asks = answer.ends_with(['?', '？']) || SIGN_OFFS.iter().any(|s| lower.contains(s));
    // A short text after the thinking is the answer too when it commits to nothing:
    // "Current date and time: Wed Oct 30 15:30:45 UTC 2023" (not "Let me check that.").
    // (A result's shape: a figure, a labelled value, a statement of what is — not "Sure,
    // give me a second!", "好的，马上为您查询。")
    let result_like = answer.contains(|c: char| c.is_ascii_digit())
        || answer.contains(": ")
        || [
            " is ",
            " are ",
            " was ",
            " were ",
            " has been ",
            " es ",
            " está ",
            " son ",
            " é ",
            " est ",
            " ist ",
            " sind ",
            "已",
            "是",
            // (Russian reports of work done: "Файл создан", "Готово".)
            "создан",
            "готов",
            "выполнен",
            "обновлен",
            "обновлён",
            "исправлен",
            "добавлен",
            "завершен",
            "завершён",
            "сохранен",
            "сохранён",
        ]
        .iter()
        .any(|v| lower.contains(v));
    // (Not a cue in an offer on a condition, "알려주시면 찾아드리겠습니다", nor the polite
    // "します" past the first sentence: "東京の現在の気温は18度です。…お勧めします。")
    let cued = lower
        .split(['。', '.', '!', '?', '！', '？', '\n'])
        .enumerate()
        .any(|(i, s)| {
            let conditional = ["면 ", "시면", "たら", "れば", "if "]
                .iter()
                .any(|c| s.contains(c));
            !conditional
                && PREAMBLE_CUES
                    .iter()
                    .any(|c| s.contains(c) && (*c != "します" || i == 0))
        });
    // (A short finding while the reasoning ends on the step that acts on it — "… ours is
    // missing it." after "Let me fix that in Resources.xaml." — is said on the way, not
    // the answer: the answer would say the work is done.)
    let ends_on_step = reasoning.is_some_and(|r| {
        let end = r.trim_end().len();
        calls
            .iter()
            .any(|c| c.source == Source::Reasoning && c.span.end + 2 >= end)
    });
    let on_the_way = ends_on_step
        && answer_len < 2 * ANSWER_MIN
        // A problem found, not a result: "ours is missing it", "the build fails".
        && lower.split(|c: char| !c.is_alphanumeric() && c != '\'').any(|w| {
            matches!(
                w,
                "missing" | "error" | "errors" | "wrong" | "broken" | "fails" | "failing"
                    | "won't" | "doesn't" | "isn't" | "aren't" | "can't" | "not" | "lacks"
                    | "bug" | "stale" | "never" | "mismatch" | "undefined"
            )
        })
        // (Not when it speaks to the user: "How can I help you?", "你可以直接访问".)
        && !answer.contains(['?', '？', '你', '您'])
        && !lower
            .split(|c: char| !c.is_alphanumeric())
            .any(|w| matches!(w, "you" | "your"))
        && !lower
            .split(|c: char| !c.is_alphanumeric())
            .enumerate()
            .any(|(i, w)| {
                (i == 0 && w.ends_with("ed"))
                    || matches!(
                        w,
                        "fixed"
                            | "added"
                            | "updated"
                            | "done"
                            | "created"
                            | "changed"
                            | "removed"
                            | "committed"
                            | "now"
                            | "here"
                            | "answer"
                            | "listo"
                            | "hecho"
                            | "fertig"
                            | "готово"
                    )
            });
    let stated = answer_len >= 20
        && result_like
        && !answer.ends_with([':', '：', '…'])
        && !cued
        && !on_the_way;
    if !labelled
        && !asks
        && !stated
        && (answer_len < ANSWER_MIN || answer.ends_with(':') || on_the_way)
    {
        return false;
    }
    cfg.order
        .iter()
        .all(|&st| run_strategy(st, answer, tools, cfg).calls.is_empty())
}

/// Words with which the thinking settles on answering instead of acting.
const ANSWER_CHOSEN: &[&str] = &[
    "let me answer",
    "i'll answer",
    "i will answer",
    "i should answer",
    "i should just answer",
    "i can answer",
    "just answer",
    "answer directly",
    "respond directly",
    "reply directly",
    "answer without",
];

/// "I can use `cd` in bash with the `cwd` parameter. Let me answer directly — yes, …":
/// the thinking weighed a tool and then chose to answer; its prose step is not taken.
/// (Not "Let me search, then answer", nor an answer put after the step.)
fn chose_to_answer(reasoning: &str, calls: &mut Vec<ParsedCall>) {
    let Some(last) = calls.iter().map(|c| c.span.end).max() else {
        return;
    };
    if !calls
        .iter()
        .all(|c| c.strategy == Strategy::Fuzzy && c.source == Source::Reasoning)
    {
        return;
    }
    let Some(after) = reasoning.get(last..) else {
        return;
    };
    // (From the next sentence on.)
    let Some(next) = after.find(['.', '!', '?', '\n']) else {
        return;
    };
    let lower = after[next..].to_lowercase();
    let chosen = ANSWER_CHOSEN.iter().any(|p| {
        lower.match_indices(p).any(|(i, _)| {
            let rest = &lower[i + p.len()..];
            let clause = &rest[..rest.find(['.', '!', '?', '\n']).unwrap_or(rest.len())];
            // ("I can't answer without live data", "That way I can answer with
            // confidence": why the step is taken, not a choice against it.)
            let before = &lower[crate::harmony::floor(&lower, i.saturating_sub(24))..i];
            // (A negation right before the phrase: "That's not safe, so I'll answer
            // directly" chose to answer.)
            let close = &lower[crate::harmony::floor(&lower, i.saturating_sub(8))..i];
            let negated = ["n't ", "not ", "cannot ", "unable to "]
                .iter()
                .any(|w| close.contains(w));
            let motivates = negated
                || ["that way", "so that ", "to be able", "then ", "before i "]
                    .iter()
                    .any(|w| before.contains(w));
            !motivates
                && ![
                    "after",
                    "once",
                    "when",
                    "then",
                    "with the result",
                    "from the result",
                    "with confidence",
                    "without seeing",
                    "without checking",
                    "without looking",
                    "accurately",
                ]
                .iter()
                .any(|w| clause.contains(w))
        })
    });
    if chosen {
        calls.clear();
    }
}

/// A later call whose argument stands for an earlier call's result (`"result_funcA"`,
/// `"funcAResult"`, "<output of get_user>"): it waits on that result, it is no call now.
fn drop_awaiting_results(calls: &mut Vec<ParsedCall>) {
    let squash = |s: &str| -> String {
        s.chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_lowercase)
            .collect()
    };
    let mut earlier: Vec<String> = Vec::new();
    // (The whole value is such a name, "of" at most besides: not a pattern, a path or a
    // script that happens to hold the words — `readResponse` searched for, a file
    // `web_search_results.md`.)
    let literal_key = |k: &str| {
        let k = k.to_ascii_lowercase();
        ["pattern", "path", "file", "command", "code", "regex"]
            .iter()
            .any(|w| k.contains(w))
    };
    calls.retain(|c| {
        let awaits = c.arguments.as_object().is_some_and(|args| {
            args.iter()
                .filter(|(k, _)| !literal_key(k))
                .filter_map(|(_, v)| v.as_str())
                .filter(|v| v.len() <= 60)
                .any(|v| {
                    let v = squash(v);
                    ["result", "output", "response"].iter().any(|w| {
                        v.contains(w)
                            && earlier
                                .iter()
                                .any(|n| v.contains(n.as_str()) && v.len() <= n.len() + w.len() + 3)
                    })
                })
        });
        earlier.push(squash(&c.name));
        !awaits
    });
}

/// Labels of a result the model states itself ("**Result:** The result of 3 * 12 is 36.",
/// "\\boxed{36}").
const ANSWER_MARKS: &[&str] = &[
    "\\boxed{",
    "**answer:**",
    "**result:**",
    "**final answer:**",
    // The model says after the call that it ran nothing and made the results up.
    "hypothetical result",
    "don't have the ability to execute",
    "do not have the ability to execute",
    "i can't execute",
    "i cannot execute",
    "i'm unable to execute",
    "i am unable to execute",
];

/// A call the model narrated and then answered itself: its result is labelled after
/// the call in the same text ("Using the multiply function: multiply(a=3, b=12). …
/// **Result:** 36"). The turn ended with the answer; nothing is left to call.
fn answered_after(reasoning: Option<&str>, content: Option<&str>, calls: &[ParsedCall]) -> bool {
    let Some(last) = calls.iter().max_by_key(|c| c.span.end) else {
        return false;
    };
    let text = match last.source {
        Source::Reasoning => reasoning,
        Source::Content => content,
    };
    let Some(after) = text.and_then(|t| t.get(last.span.end..)) else {
        return false;
    };
    let lower = after.to_lowercase();
    // (Not where it is refused: "I won't make up hypothetical results.")
    ANSWER_MARKS.iter().any(|m| {
        lower.match_indices(m).any(|(i, _)| {
            let before = &lower[crate::harmony::floor(&lower, i.saturating_sub(30))..i];
            ![
                "won't",
                "will not",
                "not ",
                "rather than",
                "instead of",
                "no ",
            ]
            .iter()
            .any(|n| before.contains(n))
        })
    })
}

fn remove_ranges(text: &str, ranges: &[Range<usize>]) -> String {
    let mut rs: Vec<Range<usize>> = ranges
        .iter()
        .filter(|r| r.start < r.end && r.end <= text.len())
        .filter(|r| text.is_char_boundary(r.start) && text.is_char_boundary(r.end))
        .cloned()
        .collect();
    rs.sort_by_key(|r| r.start);
    let mut out = String::new();
    let mut pos = 0;
    for r in rs {
        if r.start > pos {
            out.push_str(&text[pos..r.start]);
        }
        pos = pos.max(r.end);
    }
    if pos < text.len() {
        out.push_str(&text[pos..]);
    }
    out
}

/// Remove calls with the same name and arguments (keeps the first). In prose, the same
/// call read from one place more than once was meant more than once ("roll the dice
/// three times"), and only a restatement elsewhere is a duplicate.
pub(crate) fn dedup(calls: &mut Vec<ParsedCall>, prose: bool) {
    use std::collections::hash_map::Entry;
    let mut seen: std::collections::HashMap<(String, String), Range<usize>> =
        std::collections::HashMap::new();
    calls.retain(
        |c| match seen.entry((c.name.clone(), c.arguments.to_string())) {
            Entry::Vacant(e) => {
                e.insert(c.span.clone());
                true
            }
            Entry::Occupied(e) => prose && *e.get() == c.span,
        },
    );
}

/// JSON schema for the guided-JSON answer format, with the tool names as an enum.
/// Send it as `guided_json` (vLLM) or inside `response_format: {type: json_schema}`.
pub fn guided_json_schema(tools: &[ToolSpec]) -> Value {
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    serde_json::json!({
        "type": "object",
        "properties": {
            "tool_calls": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "enum": names},
                        "arguments": {"type": "object"}
                    },
                    "required": ["name", "arguments"],
                    "additionalProperties": false
                }
            },
            "done": {"type": "boolean"},
            "answer": {"type": "string"}
        },
        "required": ["tool_calls", "done"],
        "additionalProperties": false
    })
}

/// Build a call: resolve the name, coerce the arguments. `None` for an unknown tool.
/// The iterator's one item: `None` when it has none or more than one.
pub(crate) fn sole<I: Iterator>(mut it: I) -> Option<I::Item> {
    match (it.next(), it.next()) {
        (Some(one), None) => Some(one),
        _ => None,
    }
}

pub(crate) fn make_call(
    raw_name: &str,
    args: Value,
    confidence: f32,
    span: Range<usize>,
    tools: &[ToolSpec],
    cfg: &ParserConfig,
) -> Option<ParsedCall> {
    let tool = schema::resolve(raw_name, tools, &cfg.aliases)?;
    if schema::is_schema_echo(&args, tool) {
        return None;
    }
    let arguments = schema::coerce_args(args, tool);
    Some(ParsedCall {
        name: tool.name.clone(),
        arguments,
        confidence,
        strategy: Strategy::Fuzzy,
        source: Source::Content,
        span,
    })
}
