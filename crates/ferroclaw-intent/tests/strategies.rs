#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed fixture should stop the test
use ferroclaw_intent::eval::standard_tools;
use ferroclaw_intent::{
    clean_tool_name, guided_json_schema, parse, parse_with, prompts, ParsedCall, ParserConfig,
    Precedence, Source, Strategy, ToolSpec,
};
use serde_json::{json, Value};

fn run(st: Strategy, text: &str) -> Vec<ParsedCall> {
    parse_with(st, text, &standard_tools(), &ParserConfig::default())
}

fn one(st: Strategy, text: &str) -> (String, Value) {
    let calls = run(st, text);
    assert_eq!(calls.len(), 1, "{text}: {calls:?}");
    (calls[0].name.clone(), calls[0].arguments.clone())
}

// ------------------------------------------------------------- names

#[test]
fn clean_tool_name_strips_leaked_tokens() {
    assert_eq!(clean_tool_name("query<|channel|>commentary"), "query");
    assert_eq!(clean_tool_name("functions.read"), "read");
    assert_eq!(clean_tool_name("to=functions.exec"), "exec");
    assert_eq!(clean_tool_name("`web_search`"), "web_search");
    assert_eq!(clean_tool_name("<|constrain|>write"), "write");
    assert_eq!(clean_tool_name("  exec json "), "exec");
    assert_eq!(clean_tool_name(""), "");
}

#[test]
fn strategy_and_source_from_str() {
    assert_eq!(
        "guided_json".parse::<Strategy>().unwrap(),
        Strategy::GuidedJson
    );
    assert_eq!("Harmony".parse::<Strategy>().unwrap(), Strategy::Harmony);
    assert!("nope".parse::<Strategy>().is_err());
    assert_eq!("reasoning".parse::<Source>().unwrap(), Source::Reasoning);
    assert_eq!(
        serde_json::to_string(&Strategy::GuidedJson).unwrap(),
        "\"guided_json\""
    );
}

// ------------------------------------------------------------- harmony

#[test]
fn harmony_full_form() {
    let (n, a) = one(
        Strategy::Harmony,
        r#"<|start|>assistant<|channel|>commentary to=functions.exec <|constrain|>json<|message|>{"command":"ls"}<|call|>"#,
    );
    assert_eq!((n.as_str(), a), ("exec", json!({"command": "ls"})));
}

#[test]
fn harmony_recipient_in_header_and_leaked_name() {
    let (n, _) = one(
        Strategy::Harmony,
        r#"<|start|>assistant to=functions.read<|channel|>commentary json<|message|>{"path":"a"}<|call|>"#,
    );
    assert_eq!(n, "read");
    let (n, a) = one(
        Strategy::Harmony,
        r#"<|channel|>commentary to=functions.web_search<|channel|>commentary <|constrain|>json<|message|>{"query":"x"}<|call|>"#,
    );
    assert_eq!((n.as_str(), a), ("web_search", json!({"query": "x"})));
}

#[test]
fn harmony_degraded_and_final() {
    let (n, a) = one(
        Strategy::Harmony,
        r#"commentary to=functions.web_search json{"query":"x"}"#,
    );
    assert_eq!((n.as_str(), a), ("web_search", json!({"query": "x"})));
    let out = parse(
        None,
        Some(r#"analysis need file.assistantcommentary to=functions.read json{"path":"a.txt"}"#),
        &standard_tools(),
        &ParserConfig::default(),
    );
    assert_eq!(out.calls.len(), 1);
    let out = parse(
        None,
        Some("analysisThinking about it.assistantfinal The answer is 42."),
        &standard_tools(),
        &ParserConfig::default(),
    );
    assert!(out.calls.is_empty());
    assert!(out.done);
    assert_eq!(out.final_text.as_deref(), Some("The answer is 42."));
}

#[test]
fn harmony_nested_braces_and_unicode() {
    let text = r#"<|channel|>commentary to=functions.write <|constrain|>json<|message|>{"path":"ü.md","content":"fn x() { if a { b } } — ✓"}<|call|>"#;
    let (_, a) = one(Strategy::Harmony, text);
    assert_eq!(a["content"], "fn x() { if a { b } } — ✓");
}

// ------------------------------------------------------------- guided json

#[test]
fn guided_json_bare_fenced_and_in_prose() {
    let bare = r#"{"tool_calls":[{"name":"exec","arguments":{"command":"pwd"}}],"done":false}"#;
    assert_eq!(one(Strategy::GuidedJson, bare).0, "exec");
    let fenced = format!("Sure.\n```json\n{bare}\n```\nthanks");
    assert_eq!(one(Strategy::GuidedJson, &fenced).0, "exec");
    let prose = format!("I will now call {bare} and wait");
    assert_eq!(one(Strategy::GuidedJson, &prose).0, "exec");
    let out = parse(
        None,
        Some(&fenced),
        &standard_tools(),
        &ParserConfig::default(),
    );
    assert_eq!(out.final_text.as_deref(), Some("Sure.\n\nthanks"));
}

#[test]
fn guided_json_nested_braces_stringified_args_and_done() {
    let t = r#"{"tool_calls":[{"name":"write","arguments":{"path":"a","content":"{\"x\": \"}\"}"}}],"done":false}"#;
    assert_eq!(one(Strategy::GuidedJson, t).1["content"], r#"{"x": "}"}"#);
    let t = r#"{"tool_calls":[{"name":"exec","arguments":"{\"command\":\"id\"}"}],"done":false}"#;
    assert_eq!(one(Strategy::GuidedJson, t).1, json!({"command": "id"}));
    let out = parse(
        None,
        Some(r#"{"tool_calls":[],"done":true}"#),
        &standard_tools(),
        &ParserConfig::default(),
    );
    assert!(out.done && out.calls.is_empty());
}

#[test]
fn guided_json_schema_lists_tool_names() {
    let s = guided_json_schema(&standard_tools());
    let names = &s["properties"]["tool_calls"]["items"]["properties"]["name"]["enum"];
    assert!(names.as_array().unwrap().contains(&json!("web_fetch")));
}

// ------------------------------------------------------------- react

#[test]
fn react_plain_text_input_and_done() {
    let (n, a) = one(
        Strategy::React,
        "Thought: look\nAction: read_file\nAction Input: config.yaml",
    );
    assert_eq!((n.as_str(), a), ("read", json!({"path": "config.yaml"})));
    let t = "Action: exec\nAction Input: {\"command\": \"a\"}\nAction: done\nAction: exec\nAction Input: {\"command\": \"b\"}";
    let calls = run(Strategy::React, t);
    assert_eq!(calls.len(), 1);
    let out = parse(None, Some(t), &standard_tools(), &ParserConfig::default());
    assert!(out.done);
}

#[test]
fn react_multiline_json_input() {
    let t = "Action: edit\nAction Input: {\n \"path\": \"a\",\n \"oldText\": \"x {\",\n \"newText\": \"y }\"\n}";
    assert_eq!(one(Strategy::React, t).1["newText"], "y }");
}

// ------------------------------------------------------------- markers

#[test]
fn markers_equals_pipes_and_brackets_in_values() {
    let (_, a) = one(
        Strategy::Markers,
        "[TOOL:web_fetch|url=https://x.io/?a=1&b=2]",
    );
    assert_eq!(a["url"], "https://x.io/?a=1&b=2");
    let (_, a) = one(Strategy::Markers, "[TOOL:exec|command=A=1 env | grep A]");
    assert_eq!(a["command"], "A=1 env | grep A");
    let (_, a) = one(
        Strategy::Markers,
        "[TOOL:edit|path=a.rs|oldText=v[0]|newText=v[1]]",
    );
    assert_eq!(
        a,
        json!({"path": "a.rs", "oldText": "v[0]", "newText": "v[1]"})
    );
    let (_, a) = one(Strategy::Markers, "[TOOL:web_search|query=rust|count=5]");
    assert_eq!(a["count"], 5);
    let out = parse(
        None,
        Some("ok [DONE]"),
        &standard_tools(),
        &ParserConfig::default(),
    );
    assert!(out.done);
}

// ------------------------------------------------------------- fuzzy

#[test]
fn fuzzy_examples_from_the_issue() {
    assert_eq!(
        one(
            Strategy::Fuzzy,
            "I'll search the web for rust borrow checker tips."
        )
        .1,
        json!({"query": "rust borrow checker tips"})
    );
    assert_eq!(
        one(Strategy::Fuzzy, "we should fetch https://example.com/a.").1,
        json!({"url": "https://example.com/a"})
    );
    assert_eq!(
        one(Strategy::Fuzzy, "Let's read the file config.yaml.").1,
        json!({"path": "config.yaml"})
    );
    assert_eq!(
        one(Strategy::Fuzzy, "Now run `ls -la`.").1,
        json!({"command": "ls -la"})
    );
    let (n, a) = one(Strategy::Fuzzy, "Then save the summary to out.md.");
    assert_eq!((n.as_str(), a["path"].clone()), ("write", json!("out.md")));
}

#[test]
fn fuzzy_rejects_negated_hypothetical_and_past() {
    for t in [
        "No need to search the web for this.",
        "I already fetched https://example.com.",
        "If the user had asked to run `ls`, we would.",
        "The user asked whether we can read config.yaml.",
        "We would have run `make` but it is not needed.",
        "Instead of running `ls`, answer directly.",
        "The user could run `npm test` themselves.",
        "For example, read the file a.txt.",
        "Should we fetch https://example.com?",
        "The user said: \"read the file config.yaml\".",
        "We have read config.yaml before.",
        "Don't execute `rm -rf /`.",
    ] {
        assert!(
            run(Strategy::Fuzzy, t).is_empty(),
            "{t}: {:?}",
            run(Strategy::Fuzzy, t)
        );
    }
}

#[test]
fn fuzzy_multi_and_unicode() {
    let calls = run(
        Strategy::Fuzzy,
        "Let's run `cargo fmt` and `cargo clippy`, then read Cargo.toml.",
    );
    assert_eq!(calls.len(), 3, "{calls:?}");
    let (_, a) = one(Strategy::Fuzzy, "Let's search for \"café crème recette\".");
    assert_eq!(a["query"], "café crème recette");
}

#[test]
fn fuzzy_uses_custom_tools_from_their_description() {
    let tools = vec![ToolSpec::new(
        "send_email",
        "Send an email message.",
        json!({"type":"object","properties":{"body":{"type":"string"}},"required":["body"]}),
    )];
    let calls = parse_with(
        Strategy::Fuzzy,
        "Let's send \"hi bob\" now.",
        &tools,
        &ParserConfig::default(),
    );
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].arguments, json!({"body": "hi bob"}));
}

// ------------------------------------------------------------- parse()

#[test]
fn structured_content_beats_fuzzy_reasoning_by_default() {
    let tools = standard_tools();
    let reasoning = "We need to list files. Let's run `ls`.";
    let content = r#"<|channel|>commentary to=functions.exec <|constrain|>json<|message|>{"command":"ls -la"}<|call|>"#;
    let out = parse(
        Some(reasoning),
        Some(content),
        &tools,
        &ParserConfig::default(),
    );
    assert_eq!(out.calls[0].arguments["command"], "ls -la");
    assert_eq!(out.calls[0].source, Source::Content);
    let cfg = ParserConfig {
        precedence: Precedence::SourceFirst,
        ..ParserConfig::default()
    };
    let out = parse(Some(reasoning), Some(content), &tools, &cfg);
    assert_eq!(out.calls[0].arguments["command"], "ls");
    assert_eq!(out.calls[0].strategy, Strategy::Fuzzy);
}

#[test]
fn unknown_tools_dropped_and_duplicates_removed() {
    let t = r#"{"tool_calls":[{"name":"nope","arguments":{}},{"name":"exec","arguments":{"command":"a"}},{"name":"run","arguments":{"cmd":"a"}}],"done":false}"#;
    let calls = run(Strategy::GuidedJson, t);
    assert_eq!(calls.len(), 1);
    // Tools not offered are unknown, even when an alias points at them.
    let only_read: Vec<ToolSpec> = standard_tools()
        .into_iter()
        .filter(|t| t.name == "read")
        .collect();
    assert!(parse_with(
        Strategy::GuidedJson,
        t,
        &only_read,
        &ParserConfig::default()
    )
    .is_empty());
}

#[test]
fn spans_point_into_the_source() {
    let text = "Okay. Let's read the file config.yaml now.";
    let c = &run(Strategy::Fuzzy, text)[0];
    assert!(text[c.span.clone()].contains("config.yaml"));
}

// ------------------------------------------------------------- prompts

#[test]
fn prompts_render_and_override() {
    for st in Strategy::ALL {
        let r = prompts::render(prompts::template(st), &standard_tools());
        assert!(r.contains("web_fetch"), "{st}");
        assert!(!r.contains("{{"), "{st}");
    }
    let dir = std::env::temp_dir().join(format!("intent-prompts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    assert_eq!(prompts::load_override(&dir, Strategy::React).unwrap(), None);
    std::fs::write(dir.join("react.md"), "custom {{tool_names}}").unwrap();
    let o = prompts::load_override(&dir, Strategy::React)
        .unwrap()
        .unwrap();
    assert!(prompts::render(&o, &standard_tools()).starts_with("custom exec, read"));
    std::fs::remove_dir_all(&dir).ok();
}

// ------------------------------------------------------------- robustness

#[test]
fn never_panics_on_adversarial_input() {
    let tools = standard_tools();
    let cfg = ParserConfig::default();
    let pieces = [
        "<|start|>",
        "<|channel|>",
        "commentary",
        " to=functions.",
        "exec",
        "{",
        "}",
        "[",
        "]",
        "\"",
        "'",
        "`",
        "```json\n",
        "Action:",
        "Action Input:",
        "\n",
        "[TOOL:",
        "|",
        "=",
        "Let's run ",
        "read the file ",
        "a.txt",
        "https://x.y/",
        "é",
        "😀",
        "\u{0}",
        "\\",
        ".",
        "?",
        ", then ",
        "search for ",
        "json{",
        "<|call|>",
        "assistantfinal",
        "{\"tool_calls\":[",
        "Final Answer:",
        "[DONE]",
        "to=",
        ":",
        " ",
        "\u{2019}",
        "\u{201c}",
        "<tool_call>",
        "</tool_call>",
        "<function=",
        "</function>",
        "<parameter=",
        "</parameter>",
        "<arg_key>",
        "</arg_key>",
        "<arg_value>",
        "<invoke name=\"",
        "<parameter name=\"",
        "<|python_tag|>",
        "[TOOL_CALLS]",
        "[ARGS]",
        "[TOOL_CALL]",
        "=>",
        "--",
        "<\u{ff5c}tool\u{2581}sep\u{ff5c}>",
        "<\u{ff5c}tool\u{2581}call\u{2581}begin\u{ff5c}>",
        "```tool_code\n",
        "(",
        ")",
        "<reasoning>",
        "</reasoning>",
        "&lt;",
        "\\n",
        "\\\"",
        "command",
        " is ",
        " as the ",
        "We need to call ",
        "call it",
        "both functions",
        "<exec>",
        "</exec>",
    ];
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..3000 {
        let mut s = String::new();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let n = (seed % 40) as usize;
        for i in 0..n {
            let r = seed.rotate_left(i as u32 * 7) as usize;
            s.push_str(pieces[r % pieces.len()]);
        }
        for st in Strategy::ALL {
            let _ = parse_with(st, &s, &tools, &cfg);
        }
        let out = parse(Some(&s), Some(&s), &tools, &cfg);
        for c in &out.calls {
            assert!(c.span.end <= s.len());
            assert!(c.arguments.is_object());
        }
    }
    // Large pathological inputs (openers with no closer, calls that never close) end:
    // every recogniser is linear in the text.
    for big in [
        "{".repeat(200_000) + &"[TOOL:".repeat(20_000) + &"`".repeat(10_001),
        "let's read a.txt, ".repeat(20_000),
        "run `x` and ".repeat(20_000),
        "to=functions.exec ".repeat(20_000),
        "Action: exec\n".repeat(20_000),
        "'a ".repeat(50_000),
        "<tool_call>".repeat(5_000),
        "<function=exec>".repeat(5_000),
        "<tool_call><function=exec><parameter=command>".repeat(2_000),
        "<arg_key>a</arg_key>".repeat(2_000),
        "<invoke name=\"exec\"><parameter name=\"command\">".repeat(2_000),
        "<|python_tag|>".repeat(5_000),
        "[TOOL_CALLS]".repeat(5_000),
        "<｜tool▁sep｜>".repeat(5_000),
        "Let's exec(".repeat(5_000),
        "command=".repeat(12_000),
        "We need to call exec. The command is ".repeat(2_000),
        "<exec>".repeat(5_000),
        "```tool_code\n".repeat(5_000),
        "[exec(".repeat(5_000),
    ] {
        let start = std::time::Instant::now();
        let _ = parse(Some(&big), Some(&big), &tools, &cfg);
        println!(
            "pathological input ({} bytes) parsed in {:?}",
            big.len(),
            start.elapsed()
        );
    }
}

#[test]
fn guided_json_done_object_carries_the_answer() {
    let tools = ferroclaw_intent::eval::standard_tools();
    let out = ferroclaw_intent::parse(
        None,
        Some(r#"{"tool_calls": [], "done": true, "answer": "All files are listed above."}"#),
        &tools,
        &ferroclaw_intent::ParserConfig::default(),
    );
    assert!(out.calls.is_empty());
    assert!(out.done);
    assert_eq!(
        out.final_text.as_deref(),
        Some("All files are listed above.")
    );
}

// ------------------------------------------------------------- native formats of other families

fn weather_tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            "get_weather",
            "Get the current weather for a location.",
            obj(
                json!({"location": {"type": "string"}, "unit": {"type": "string"}}),
                &["location"],
            ),
        ),
        ToolSpec::new("get_todays_date", "Today's date.", obj(json!({}), &[])),
        ToolSpec::new(
            "Web Search",
            "Search the web.",
            obj(json!({"query": {"type": "string"}}), &["query"]),
        ),
    ]
}

fn calls_in(
    reasoning: Option<&str>,
    content: Option<&str>,
    tools: &[ToolSpec],
) -> Vec<(String, Value)> {
    parse(reasoning, content, tools, &ParserConfig::default())
        .calls
        .into_iter()
        .map(|c| (c.name, c.arguments))
        .collect()
}

/// A JSON schema object of `props`, with `req` required.
fn obj(props: Value, req: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": req})
}

/// An offered tool without a description.
fn tool(name: &str, props: Value, req: &[&str]) -> ToolSpec {
    ToolSpec::new(name, "", obj(props, req))
}

/// A string property named `k`.
fn text_prop(k: &str) -> Value {
    json!({ k: {"type": "string"} })
}

/// What `calls_in` returns for a single call.
fn one_call(name: &str, args: Value) -> Vec<(String, Value)> {
    vec![(name.to_string(), args)]
}

fn weather(loc: &str) -> (String, Value) {
    ("get_weather".to_string(), json!({"location": loc}))
}

#[test]
fn qwen_xml_in_content_and_in_reasoning() {
    let xml = "<tool_call>\n<function=get_weather>\n<parameter=location>\nDublin\n</parameter>\n</function>\n</tool_call>";
    assert_eq!(
        calls_in(None, Some(xml), &weather_tools()),
        vec![weather("Dublin")]
    );
    let think = format!("<think>\nThe user wants the weather.\n{xml}\n</think>\n\n");
    assert_eq!(
        calls_in(None, Some(&think), &weather_tools()),
        vec![weather("Dublin")]
    );
    assert_eq!(
        calls_in(Some(xml), None, &weather_tools()),
        vec![weather("Dublin")]
    );
    // Closing tags missing, two calls.
    let open =
        "<tool_call><function=get_weather><parameter=location>Paris<function=get_todays_date>";
    let got = calls_in(None, Some(open), &weather_tools());
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0], weather("Paris"));
    assert_eq!(got[1].0, "get_todays_date");
}

#[test]
fn hermes_json_with_damage() {
    let tools = weather_tools();
    for text in [
        r#"<tool_call>
{"name": "get_weather", "arguments": {"location": "Dublin"}}
</tool_call>"#,
        // No closing tag, no closing brace.
        r#"<tool_call>{"name": "get_weather", "arguments": {"location": "Dublin"}"#,
        // Mismatched quotes.
        r#"<tool_call>{"name": "get_weather", "arguments':{'location':'Dublin'}}</tool_call>"#,
        // `>` for `:`.
        r#"<tool_call>{"name": "get_weather", "arguments">{"location": "Dublin"}}</tool_call>"#,
    ] {
        assert_eq!(
            calls_in(None, Some(text), &tools),
            vec![weather("Dublin")],
            "{text}"
        );
    }
    // A name that is not offered is not a call.
    assert!(calls_in(
        None,
        Some(r#"<tool_call>{"name": "get_stock_price", "arguments": {"ticker": "X"}}</tool_call>"#),
        &tools
    )
    .is_empty());
}

#[test]
fn bare_json_with_mismatched_quotes() {
    let got = calls_in(
        None,
        Some(r#"{"name": "get_weather", "parameters':{'location':'New York'}}"#),
        &weather_tools(),
    );
    assert_eq!(got, vec![weather("New York")]);
}

#[test]
fn llama_python_tag_and_pythonic() {
    let tools = weather_tools();
    assert_eq!(
        calls_in(
            None,
            Some(
                r#"<|python_tag|>{"name": "get_weather", "parameters": {"location": "Dublin"}}; {"name": "get_todays_date", "parameters": {}}<|eom_id|>"#
            ),
            &tools
        ),
        vec![weather("Dublin"), ("get_todays_date".into(), json!({}))]
    );
    assert_eq!(
        calls_in(None, Some(r#"get_weather(location="Dublin")"#), &tools),
        vec![weather("Dublin")]
    );
    assert_eq!(
        calls_in(
            None,
            Some(
                r#"[get_todays_date(), get_weather(location="San Francisco, CA", unit='celsius')]"#
            ),
            &tools
        ),
        vec![
            ("get_todays_date".into(), json!({})),
            (
                "get_weather".into(),
                json!({"location": "San Francisco, CA", "unit": "celsius"})
            )
        ]
    );
    assert_eq!(
        calls_in(
            None,
            Some("```tool_code\nget_weather('Dublin')\n```"),
            &tools
        ),
        vec![weather("Dublin")]
    );
    // Code for the reader is not a call: an unoffered function, or prose around it.
    assert!(calls_in(
        None,
        Some("```python\nprint(get_weather('x'))\n```"),
        &tools
    )
    .is_empty());
    assert!(calls_in(
        None,
        Some("You can call it like get_weather(location=\"Dublin\") from your script."),
        &tools
    )
    .is_empty());
}

#[test]
fn mistral_and_deepseek_tokens() {
    let tools = weather_tools();
    assert_eq!(
        calls_in(
            None,
            Some(r#"[TOOL_CALLS][{"name": "get_weather", "arguments": {"location": "Paris"}}]"#),
            &tools
        ),
        vec![weather("Paris")]
    );
    assert_eq!(
        calls_in(
            None,
            Some(r#"[TOOL_CALLS]get_weather[ARGS]{"location": "Paris"}"#),
            &tools
        ),
        vec![weather("Paris")]
    );
    let ds = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"location\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    assert_eq!(calls_in(None, Some(ds), &tools), vec![weather("Paris")]);
}

#[test]
fn tags_named_after_a_tool() {
    let got = calls_in(
        None,
        Some("<terminal_command>ls -la</terminal_command>"),
        &standard_tools(),
    );
    assert_eq!(
        got,
        vec![("exec".to_string(), json!({"command": "ls -la"}))]
    );
    // An HTML-ish tag that names no tool is text.
    assert!(calls_in(None, Some("<summary>ls -la</summary>"), &standard_tools()).is_empty());
}

#[test]
fn harmony_variants_real_models_write() {
    let tools = weather_tools();
    for text in [
        // No <|call|>.
        r#"<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location":"Paris"}"#,
        // No space before <|constrain|>.
        r#"<|channel|>commentary to=functions.get_weather<|constrain|>json<|message|>{"location":"Paris"}<|call|>"#,
        // `json` without <|constrain|>.
        r#"<|channel|>commentary to=functions.get_weather json<|message|>{"location":"Paris"}<|call|>"#,
        // No <|start|>assistant prefix, tokens stripped.
        r#"commentary to=functions.get_weather json{"location":"Paris"}"#,
    ] {
        assert_eq!(
            calls_in(None, Some(text), &tools),
            vec![weather("Paris")],
            "{text}"
        );
    }
    // A recipient without `functions.` and a name with a space.
    let fetch = calls_in(
        None,
        Some(
            r#"<|channel|>commentary to=fetch <|constrain|>json<|message|>{"url":"https://example.com"}<|call|>"#,
        ),
        &standard_tools(),
    );
    assert_eq!(
        fetch,
        vec![(
            "web_fetch".to_string(),
            json!({"url": "https://example.com"})
        )]
    );
    let spaced = calls_in(
        None,
        Some(
            r#"<|channel|>commentary to=functions.Web Search <|constrain|>json<|message|>{"query":"rust 2024"}<|call|>"#,
        ),
        &tools,
    );
    assert_eq!(
        spaced,
        vec![("Web Search".to_string(), json!({"query": "rust 2024"}))]
    );
}

#[test]
fn reasoning_streamed_in_wrapped_pieces() {
    let text = "<reasoning>We need to call get_</reasoning><reasoning>weather for Paris.</reasoning><reasoning> <|channel|>commentary to=functions.get_</reasoning><reasoning>weather json{\"location\":\"Paris\"}</reasoning>";
    assert_eq!(
        calls_in(Some(text), None, &weather_tools()),
        vec![weather("Paris")]
    );
}

fn prose_tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            "get_weather",
            "Get the current weather for a location.",
            obj(json!({"location": {"type": "string"}}), &["location"]),
        ),
        ToolSpec::new(
            "get_time",
            "Current time in a timezone.",
            obj(json!({"timezone": {"type": "string"}}), &["timezone"]),
        ),
        ToolSpec::new(
            "web_search",
            "Search the internet.",
            obj(json!({"query": {"type": "string"}}), &["query"]),
        ),
        ToolSpec::new(
            "get_boiling_point",
            "Boiling point of a liquid.",
            obj(json!({"liquid_name": {"type": "string"}}), &["liquid_name"]),
        ),
    ]
}

#[test]
fn prose_intents_name_the_tool_and_its_argument() {
    let tools = prose_tools();
    let one = |t: &str| calls_in(Some(t), None, &tools);
    assert_eq!(
        one("We need to use the get_weather function for Paris."),
        vec![("get_weather".to_string(), json!({"location": "Paris"}))]
    );
    assert_eq!(
        one("I should call get_time with the timezone set to UTC."),
        vec![("get_time".to_string(), json!({"timezone": "UTC"}))]
    );
    assert_eq!(
        one("Search the internet using the query \"rust async book\"."),
        vec![(
            "web_search".to_string(),
            json!({"query": "rust async book"})
        )]
    );
    // Committed, argument not given: the call is made without it (the tool reports what
    // is missing; `intent.confirm` asks the model instead).
    assert_eq!(
        one("We need to call the get_weather function."),
        vec![("get_weather".to_string(), json!({}))]
    );
}

#[test]
fn prose_that_does_not_commit_is_no_call() {
    let tools = prose_tools();
    for text in [
        "We used function get_boiling_point to find that polyjuice boils at -100 degrees.",
        "We could call get_weather, but the user already told us it is raining; no need.",
        "I'm not able to access real-time data, so I cannot tell you today's weather.",
        "The get_weather function returned 18 degrees, so the answer is 18 degrees.",
        "We need to answer the user politely.",
        "We need to respond with the time correctly.",
    ] {
        assert!(calls_in(Some(text), None, &tools).is_empty(), "{text}");
    }
}

#[test]
fn glm_xml_and_single_tool_references() {
    let tools = weather_tools();
    let glm = "<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>Beijing</arg_value>\n</tool_call>";
    assert_eq!(calls_in(None, Some(glm), &tools), vec![weather("Beijing")]);
    let only = vec![ToolSpec::new(
        "datetime",
        "Current date and time.",
        json!({"type": "object", "properties": {}}),
    )];
    assert_eq!(
        calls_in(
            Some("The user asks for the date. Use the function."),
            None,
            &only
        ),
        vec![("datetime".to_string(), json!({}))]
    );
    // With several tools "the function" does not say which.
    assert!(calls_in(Some("Use the function."), None, &tools).is_empty());
}

#[test]
fn more_prose_and_harmony_shapes() {
    let mut tools = prose_tools();
    tools.push(ToolSpec::new(
        "get_stock_price",
        "Price of a stock.",
        json!({"type":"object","properties":{"symbol":{"type":"string"}},"required":["symbol"]}),
    ));
    let one = |t: &str| calls_in(Some(t), None, &tools);
    let w = |l: &str| vec![("get_weather".to_string(), json!({"location": l}))];
    assert_eq!(one("We need to call get_weather for Tokyo."), w("Tokyo"));
    assert_eq!(
        one("We should use functions.get_weather with location \"Boston, MA\"."),
        w("Boston, MA")
    );
    assert_eq!(
        one("Let's call get_weather(location=\"Paris\")."),
        w("Paris")
    );
    assert_eq!(
        one("We'll call get_stock_price with symbol AAPL."),
        vec![("get_stock_price".to_string(), json!({"symbol": "AAPL"}))]
    );
    for text in [
        "We have get_weather function available, but the user only said hello.",
        "Should I call get_weather?",
        "I cannot call get_weather because the location is unknown.",
        "I used get_weather to find that it is sunny in Paris.",
        "The function get_weather returned sunny for Paris.",
    ] {
        assert!(one(text).is_empty(), "{text}: {:?}", one(text));
    }
    // Harmony: the recipient in the role header, the analysis channel, no `functions.`.
    for text in [
        r#"<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"location":"Oslo"}<|call|>"#,
        r#"<|channel|>analysis to=get_weather <|constrain|>json<|message|>{"location":"Oslo"}<|call|>"#,
        r#"<|channel|>commentary to=get_weather code<|message|>{"location":"Oslo"}<|call|>"#,
    ] {
        assert_eq!(calls_in(None, Some(text), &tools), w("Oslo"), "{text}");
    }
    // A tool definition echoed back is not a call.
    let echoed = r#"<tool_call>{"name": "get_weather", "parameters": {"type": "object", "properties": {"location": {"type": "string"}}}}</tool_call>"#;
    assert!(calls_in(None, Some(echoed), &tools).is_empty());
    // Mistral with a call id.
    assert_eq!(
        calls_in(
            None,
            Some(r#"[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{"location": "Lima"}"#),
            &tools
        ),
        w("Lima")
    );
    // `<function>` with a JSON body naming the tool.
    assert_eq!(
        calls_in(
            None,
            Some(
                r#"<function>{"name": "get_weather", "arguments": {"location": "Rome"}}</function>"#
            ),
            &tools
        ),
        w("Rome")
    );
}

#[test]
fn json_damage_small_models_do() {
    let tools = weather_tools();
    for text in [
        r#"{"name": get_weather, "parameters": {"location": "Paris"}}"#,
        "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\"}\nThat should give us the weather.",
        r#"{"name":"get_weather","parameters={"location":"Paris"}}"#,
        r#"{"name","get_weather","parameters":{"location":"Paris"}}}""#,
        r#"{"name":"get_weather","parameters":[{"location":"Paris"}]}"#,
        r#"{"action": "get_weather", "action_input": {"location": "Paris"}}"#,
        r#"{"type": "function", "function": {"name": "get_weather", "parameters": {"location": "Paris"}}"#,
    ] {
        assert_eq!(calls_in(None, Some(text), &tools), vec![weather("Paris")], "{text}");
    }
}

#[test]
fn a_place_named_later_in_the_clause() {
    let tools = prose_tools();
    assert_eq!(
        calls_in(
            Some("I'll use the get_weather tool to check the weather in San Francisco."),
            None,
            &tools
        ),
        vec![(
            "get_weather".to_string(),
            json!({"location": "San Francisco"})
        )]
    );
}

#[test]
fn placeholder_words_are_not_arguments() {
    let tools = prose_tools();
    for (text, want) in [
        ("Next, I'll call get_weather for each city.", json!({})),
        (
            "We need to call get_weather for the given location.",
            json!({}),
        ),
        (
            "We need to call get_weather for the requested city now.",
            json!({}),
        ),
    ] {
        assert_eq!(
            calls_in(Some(text), None, &tools),
            vec![("get_weather".to_string(), want)],
            "{text}"
        );
    }
}

#[test]
fn more_formats_real_models_write() {
    let tools = weather_tools();
    // MiniMax / Anthropic-style invoke blocks, also with plain child tags.
    let invoke = "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"location\">Oslo</parameter>\n</invoke>\n</minimax:tool_call>";
    assert_eq!(calls_in(None, Some(invoke), &tools), vec![weather("Oslo")]);
    let children =
        "<tool_call><invoke name=\"get_weather\"><location>Oslo</location></invoke></tool_call>";
    assert_eq!(
        calls_in(None, Some(children), &tools),
        vec![weather("Oslo")]
    );
    // Cline / Roo Code XML, nested.
    let cline = "<get_weather>\n<args><location>Oslo</location></args>\n</get_weather>";
    assert_eq!(calls_in(None, Some(cline), &tools), vec![weather("Oslo")]);
    // Invented bracket blocks.
    let bracket =
        "[TOOL_CALL]\n{tool => \"get_weather\", args => {\n--location \"Oslo\"\n}}\n[/TOOL_CALL]";
    assert_eq!(calls_in(None, Some(bracket), &tools), vec![weather("Oslo")]);
    // Doubled template braces.
    let doubled = "<function=get_weather>{{\"location\": \"Oslo\"}}</function>";
    assert_eq!(calls_in(None, Some(doubled), &tools), vec![weather("Oslo")]);
    // Llama's code interpreter: plain Python after <|python_tag|>.
    let code_tools = vec![
        ToolSpec::new(
            "code_interpreter",
            "Run Python.",
            json!({"type":"object","properties":{"code":{"type":"string"}},"required":["code"]}),
        ),
        weather_tools().remove(0),
    ];
    let got = calls_in(None, Some("<|python_tag|>print(2 + 2)\nx = 1"), &code_tools);
    assert_eq!(
        got,
        vec![(
            "code_interpreter".to_string(),
            json!({"code": "print(2 + 2)\nx = 1"})
        )]
    );
    // A call quoted as one already made is a quotation.
    let quoted = "The function call I made was: <function_call>{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Oslo\"}}</function_call>. It returned 5 C.";
    assert!(calls_in(Some(quoted), None, &tools).is_empty());
}

#[test]
fn prose_that_points_back_at_a_tool() {
    let tools = prose_tools();
    // "call it": the tool named last.
    assert_eq!(
        calls_in(
            Some("The user asks: \"What's the weather in Lyon, France?\" We have a tool get_weather. We should call it."),
            None,
            &tools
        ),
        vec![("get_weather".to_string(), json!({"location": "Lyon, France"}))]
    );
    // Arguments stated as properties, spread over the reasoning.
    assert_eq!(
        calls_in(
            Some("I need to use the get_time function here. The function requires the timezone parameter, which in this case is Europe/Paris."),
            None,
            &tools
        ),
        vec![("get_time".to_string(), json!({"timezone": "Europe/Paris"}))]
    );
    // gpt-oss ending its reasoning with the bare arguments of the one tool they fit.
    assert_eq!(
        calls_in(
            Some("Let's search again.\n\n{\"liquid_name\":\"polyjuice\"}"),
            None,
            &tools
        ),
        vec![(
            "get_boiling_point".to_string(),
            json!({"liquid_name": "polyjuice"})
        )]
    );
    // A list of calls introduced by a committing line, positional arguments.
    let math = vec![
        ToolSpec::new(
            "add",
            "Add.",
            json!({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}),
        ),
        ToolSpec::new(
            "multiply",
            "Multiply.",
            json!({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}),
        ),
    ];
    assert_eq!(
        calls_in(Some("So I need to call both functions:\n- add(2, 3)\n- multiply(2, 3)\n\nThese are independent."), None, &math),
        vec![
            ("add".to_string(), json!({"a": 2, "b": 3})),
            ("multiply".to_string(), json!({"a": 2, "b": 3}))
        ]
    );
    // The same words describing capabilities, or a definition list, are no calls.
    for text in [
        "I can get the weather, search the internet and tell the time.",
        "I have two tools available:\n- get_weather: weather for a location\n- get_time: time in a timezone",
    ] {
        assert!(calls_in(Some(text), None, &tools).is_empty(), "{text}");
    }
}

#[test]
fn damage_and_formats_from_the_consumed_held_out_parts() {
    let tools = weather_tools();
    let paris = vec![weather("Paris")];
    for text in [
        // A stray quote between closing brackets, `parameters(`, a closer that skips one.
        r#"{"name":"get_weather","parameters":{"location":"Paris"}"}"#,
        r#"{"name":"get_weather","parameters({"location":"Paris"}""#,
        r#"[TOOL_CALLS][{"name": "get_weather", "arguments": {"location": "Paris"]"#,
        // Llama's function tag with `=` glued to the JSON.
        r#"<function=get_weather={"location": "Paris"}</function>"#,
        // Gemma 4 and FunctionGemma call blocks.
        r#"<|tool_call>call:get_weather{location:<|"|>Paris<|"|>}<tool_call|>"#,
        "<start_function_call>call:get_weather{location:<escape>Paris<escape>}<end_function_call>",
        // A bracketed pythonic list, then a result the model made up.
        "[get_weather(location=\"Paris\")]\n{\"temperature\": 21}",
    ] {
        assert_eq!(calls_in(None, Some(text), &tools), paris, "{text}");
    }
    // Gemma strings keep quotes and backslashes they hold.
    assert_eq!(
        calls_in(
            None,
            Some(
                r#"<|tool_call>call:get_weather{location:<|"|>"Paris" \ France<|"|>}<tool_call|>"#
            ),
            &tools
        ),
        vec![weather(r#""Paris" \ France"#)]
    );
    // Look-alikes: a Gemma block for a tool not offered, a pythonic call that does not
    // open the answer.
    assert!(calls_in(
        None,
        Some(r#"<|tool_call>call:get_stock{ticker:<|"|>X<|"|>}<tool_call|>"#),
        &tools
    )
    .is_empty());
    assert!(calls_in(
        None,
        Some("The call would be [get_weather(location=\"Paris\")] in Llama's format."),
        &tools
    )
    .is_empty());
}

#[test]
fn prose_from_the_consumed_held_out_parts() {
    let tools = prose_tools();
    let r = |t: &str| calls_in(Some(t), None, &tools);
    // A closing tag ends the argument; a quoted name after "function".
    assert_eq!(
        calls_in(
            None,
            Some("<reasoning>We need to use the get_weather function for Paris.</reasoning>"),
            &tools
        ),
        vec![("get_weather".to_string(), json!({"location": "Paris"}))]
    );
    assert_eq!(
        r("We need to call function 'get_weather' with location \"Florence, Italy\"."),
        vec![(
            "get_weather".to_string(),
            json!({"location": "Florence, Italy"})
        )]
    );
    assert_eq!(
        r("No other functions are needed. Just call get_weather with location set to Paris."),
        vec![("get_weather".to_string(), json!({"location": "Paris"}))]
    );
    // The reasoning's value, stated by name, beats the content's paraphrase.
    assert_eq!(
        calls_in(
            Some("The user specified \"Florence,Italy\" so I should use \"Florence,Italy\" as the location."),
            Some("I'll check the weather in Florence, Italy for you."),
            &tools
        ),
        vec![(
            "get_weather".to_string(),
            json!({"location": "Florence,Italy"})
        )]
    );
    // Advice to the reader, an example, a brand: no calls.
    for text in [
        "I'm not able to provide real-time weather. Here are some ways you can find out:\n1. Look up a weather forecast: search for \"Paris weather\" on a search engine.\n2. Check a weather app.",
        "To find it, I could use a tool like Web Search, but the answer is 4.",
        "Keep the notes in your tooling (Google Docs, Notion, etc.).",
    ] {
        assert!(
            calls_in(None, Some(text), &tools).is_empty(),
            "{text}: {:?}",
            calls_in(None, Some(text), &tools)
        );
    }
    // The same list written as the assistant's own plan is a call.
    assert_eq!(
        calls_in(
            Some("Here is my plan:\n1. Search for \"Paris weather\" on the web.\n2. Summarise."),
            None,
            &tools
        ),
        vec![("web_search".to_string(), json!({"query": "Paris weather"}))]
    );
    // Numbers bound in order to a tool whose required properties are all numeric.
    let math = vec![ToolSpec::new(
        "add",
        "Add two numbers.",
        json!({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}),
    )];
    assert_eq!(
        calls_in(
            Some("The user wants me to add 2 and 3. I should call the add function."),
            None,
            &math
        ),
        vec![("add".to_string(), json!({"a": 2, "b": 3}))]
    );
    // Three numbers for two properties: not guessed.
    assert_eq!(
        calls_in(
            Some("The user wants me to add 2, 3 and 4. I should call the add function."),
            None,
            &math
        ),
        vec![("add".to_string(), json!({}))]
    );
}

#[test]
fn formats_and_answers_from_the_third_consumed_part() {
    let tools = weather_tools();
    // Flat objects under a naming key, a signature-shaped call inside a call tag, a
    // function tag whose arguments open a list that never closes.
    for text in [
        "Checking.\n```homeassistant\n{\"service\": \"get_weather\", \"location\": \"Paris\"}\n```",
        "TOOL:\n{\"request\": \"get_weather\", \"location\": \"Paris\"}",
        "<tool_call>get_weather(location: Paris)</tool_call>",
        "<function=get_weather [{\"location\": \"Paris\"} </function>",
    ] {
        assert_eq!(
            calls_in(None, Some(text), &tools),
            vec![weather("Paris")],
            "{text}"
        );
    }
    // A naming key whose value is no offered tool stays data.
    assert!(calls_in(
        None,
        Some("{\"service\": \"spotify\", \"location\": \"Paris\"}"),
        &tools
    )
    .is_empty());
    // A call block shown to the reader as an example is no call.
    assert!(calls_in(
        None,
        Some("You can call the tools in this format.\n\nFor example, to get the weather in London, you would use:\n<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"location\": \"London\"}}</tool_call>"),
        &tools
    )
    .is_empty());
    // ReAct with a tool name that has spaces.
    let crew = vec![ToolSpec::new(
        "Delegate work to coworker",
        "Delegate a task.",
        json!({"type":"object","properties":{"task":{"type":"string"},"coworker":{"type":"string"}},"required":["task"]}),
    )];
    assert_eq!(
        calls_in(
            None,
            Some("Thought: I will delegate.\nAction: Delegate work to coworker\nAction Input: {\"task\": \"Write\", \"coworker\": \"Researcher\"}"),
            &crew
        ),
        vec![(
            "Delegate work to coworker".to_string(),
            json!({"task": "Write", "coworker": "Researcher"})
        )]
    );
    // Coordinates keep the digits the text wrote; a place name is no latitude.
    let geo = vec![ToolSpec::new(
        "weather",
        "Weather at coordinates.",
        json!({"type":"object","properties":{"latitude":{"type":"string"},"longitude":{"type":"string"}},"required":["latitude","longitude"]}),
    )];
    assert_eq!(
        calls_in(
            Some("The user wants the weather in Berlin at (52.5200, 13.4050). I need to use the weather function."),
            None,
            &geo
        ),
        vec![(
            "weather".to_string(),
            json!({"latitude": "52.5200", "longitude": "13.4050"})
        )]
    );
    // A value the schema's type cannot hold is dropped, not passed on.
    let typed = vec![ToolSpec::new(
        "get_weather",
        "Weather.",
        json!({"type":"object","properties":{"location":{"type":"string"},"celsius":{"type":"boolean"}},"required":["location"]}),
    )];
    let got = calls_in(
        None,
        Some("Thought: I will use the get_weather tool. I will pass \"Paris\" as the location and True to get the temperature in Celsius."),
        &typed,
    );
    assert!(
        got.iter()
            .all(|(_, a)| a.get("celsius").is_none_or(Value::is_boolean)),
        "{got:?}"
    );
}

#[test]
fn thinking_that_ends_in_an_answer_calls_nothing() {
    let tools = prose_tools();
    let answer = "The Kansas City Chiefs won Super Bowl LIX on February 9, 2025, beating the Philadelphia Eagles. This comes from up-to-date sources retrieved via search, as the game was played after my knowledge cutoff.";
    // In a <think> block of the content, and in the reasoning field.
    let think = format!("<think>\nI'll use web_search with the query \"Super Bowl LIX winner\".\n</think>\n\n{answer}");
    assert!(calls_in(None, Some(&think), &tools).is_empty());
    assert!(calls_in(
        Some("I'll use web_search with the query \"Super Bowl LIX winner\"."),
        Some(answer),
        &tools
    )
    .is_empty());
    // A short lead-in after the thinking is no answer: the call stands.
    assert_eq!(
        calls_in(
            Some("I'll use web_search with the query \"Super Bowl LIX winner\"."),
            Some("Let me look that up for you."),
            &tools
        ),
        vec![(
            "web_search".to_string(),
            json!({"query": "Super Bowl LIX winner"})
        )]
    );
    // Tools described in a table, or named inline in a list of abilities: no calls.
    for text in [
        "| Tool | Purpose |\n|---|---|\n| **web_search** | Search the internet for `**` anything |",
        "I can assist with several tasks, including getting the weather using get_weather() and searching via web_search().",
    ] {
        assert!(calls_in(None, Some(text), &tools).is_empty(), "{text}");
    }
}

#[test]
fn formats_and_prose_from_the_fourth_consumed_part() {
    let tools = weather_tools();
    let paris = vec![weather("Paris")];
    for text in [
        // Kimi K2's call section, left in the text.
        "Let me check. <|tool_calls_section_begin|> <|tool_call_begin|> functions.get_weather:0 <|tool_call_argument_begin|> {\"location\": \"Paris\"} <|tool_call_end|> <|tool_calls_section_end|>",
        // DeepSeek's DSML markup (full-width bars, as the model writes them).
        "<\u{ff5c}\u{ff5c}DSML\u{ff5c}\u{ff5c}invoke name=\"get_weather\">\n<\u{ff5c}\u{ff5c}DSML\u{ff5c}\u{ff5c}parameter name=\"location\" string=\"true\">Paris</\u{ff5c}\u{ff5c}DSML\u{ff5c}\u{ff5c}parameter>\n</\u{ff5c}\u{ff5c}DSML\u{ff5c}\u{ff5c}invoke>",
        // The invoke shape with `function` / `param`.
        "<function name=\"get_weather\"><param name=\"location\">Paris</param></function>",
        // An invented bracket call, then a result the model made up.
        "[FUNCTION] get_weather\n[ARGS] {\"location\": \"Paris\"}\n[RESULT] {\"temperature\": 21}",
        // ChatGLM3: the name on its own line, the arguments in a Python fence.
        "get_weather\n```python\ntool_call(location='Paris')\n```",
        // Mistral with the other members elided.
        "[TOOL_CALLS]get_weather[ARGS]{\"location\": \"Paris\", ...}",
    ] {
        assert_eq!(calls_in(None, Some(text), &tools), paris, "{text}");
    }
    // DSML's typed values: `string="false"` holds JSON.
    let read = vec![ToolSpec::new(
        "read",
        "Read a file.",
        json!({"type":"object","properties":{"filePath":{"type":"string"},"limit":{"type":"integer"}},"required":["filePath"]}),
    )];
    assert_eq!(
        calls_in(
            None,
            Some("<|DSML|invoke name=\"read\"><|DSML|parameter name=\"filePath\" string=\"true\">a.md</|DSML|parameter><|DSML|parameter name=\"limit\" string=\"false\">30</|DSML|parameter></|DSML|invoke>"),
            &read
        ),
        vec![("read".to_string(), json!({"filePath": "a.md", "limit": 30}))]
    );
    // Shown to the reader: "Here's how you can do it:" then a fence.
    assert!(calls_in(
        None,
        Some("You can use the get_weather tool.\n\nHere's how you can do it:\n\n```json\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n```"),
        &tools
    )
    .is_empty());

    let tools = prose_tools();
    // A promise that waits on the user, a tool's description under its name as a label,
    // Markdown bold around a tool name: no calls.
    let files = vec![ToolSpec::new(
        "search_files",
        "Search for files matching a glob pattern.",
        json!({"type":"object","properties":{"pattern":{"type":"string"}},"required":["pattern"]}),
    )];
    for (text, tools) in [
        (
            "To check it I need a city. Please provide the city and I'll get the weather for you.",
            &tools,
        ),
        (
            "1. **Web Search**: Search the internet for information on a specific topic.",
            &tools,
        ),
        (
            "I have access to **search_files** to locate files and more.",
            &files,
        ),
    ] {
        assert!(calls_in(None, Some(text), tools).is_empty(), "{text}");
    }
    // One call per value when the text says so.
    assert_eq!(
        calls_in(
            None,
            Some("To get the weather in Seoul and New York, I'll call the get_weather function twice, once for each city."),
            &tools
        ),
        vec![
            ("get_weather".to_string(), json!({"location": "Seoul"})),
            ("get_weather".to_string(), json!({"location": "New York"}))
        ]
    );
    // Without a word saying so, "Seoul and New York" stays one argument's worth.
    assert_eq!(
        calls_in(
            None,
            Some("I'll call get_weather for Seoul and then answer about New York from memory."),
            &tools
        ),
        vec![("get_weather".to_string(), json!({"location": "Seoul"}))]
    );
}

#[test]
fn formats_and_prose_from_the_fifth_consumed_part() {
    let tools = weather_tools();
    for text in [
        // The name as an attribute of the call tag; the name and arguments as tags.
        "<tool_call id=\"call_00_x\" name=\"get_weather\">\n{\"location\": \"Paris\"}\n</tool_call>",
        "<function>\n<name>get_weather</name>\n<location>Paris</location>\n</function>",
    ] {
        assert_eq!(calls_in(None, Some(text), &tools), vec![weather("Paris")], "{text}");
    }
    let typed = vec![
        ToolSpec::new(
            "array_params",
            "Combine tags.",
            json!({"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"}}},"required":["tags"]}),
        ),
        ToolSpec::new(
            "object_params",
            "Use a window.",
            json!({"type":"object","properties":{"window":{"type":"object"}},"required":["window"]}),
        ),
    ];
    // Lists and objects written out in prose are the values; a word where a list
    // belongs is dropped.
    assert_eq!(
        calls_in(
            Some("We need to call array_params with tags [\"red\",\"blue\"]."),
            None,
            &typed
        ),
        vec![("array_params".to_string(), json!({"tags": ["red", "blue"]}))]
    );
    assert_eq!(
        calls_in(
            Some("We need to call object_params with window: {start: \"2025-01-01\", end: \"2025-01-02\"}."),
            None,
            &typed
        ),
        vec![(
            "object_params".to_string(),
            json!({"window": {"start": "2025-01-01", "end": "2025-01-02"}})
        )]
    );
    // A tool without arguments, as many times as the text says; a quoted list of values
    // under the property's plural, one call each.
    let dice = vec![ToolSpec::new(
        "dice_roll",
        "Roll a die.",
        json!({"type":"object","properties":{}}),
    )];
    assert_eq!(
        calls_in(Some("We must call dice_roll exactly 3 times."), None, &dice).len(),
        3
    );
    assert_eq!(
        calls_in(Some("We need to call dice_roll."), None, &dice).len(),
        1
    );
    let secrets = vec![ToolSpec::new(
        "secret_retrieval_tool",
        "Retrieve a secret.",
        json!({"type":"object","properties":{"password":{"type":"string"}},"required":["password"]}),
    )];
    assert_eq!(
        calls_in(
            None,
            Some("I'll retrieve the secrets for the passwords \"mellon\" and \"radiance\" using parallel tool calling."),
            &secrets
        ),
        vec![
            ("secret_retrieval_tool".to_string(), json!({"password": "mellon"})),
            ("secret_retrieval_tool".to_string(), json!({"password": "radiance"}))
        ]
    );
    // Chinese commitments, a tool's name in backticks; negated, or quoted as a value in
    // code, it is no call.
    let read = vec![ToolSpec::new(
        "Read",
        "Read a file.",
        json!({"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}),
    )];
    for text in [
        "让我用 `Read` 读取文件。",
        "Let me use `Read` to read the file.",
        "我需要使用Read来读取文件",
    ] {
        assert_eq!(
            calls_in(None, Some(text), &read),
            vec![("Read".to_string(), json!({}))],
            "{text}"
        );
    }
    for text in ["我不需要使用 `Read`。", "x = run(\"Read\", {})"] {
        assert!(calls_in(None, Some(text), &read).is_empty(), "{text}");
    }
    // A labelled final answer after the thinking ends the turn, however short.
    assert!(calls_in(
        None,
        Some("<think>I'll use the `get_weather` tool for Paris.</think>\n\n**Final Answer:** It is sunny."),
        &tools
    )
    .is_empty());
}

#[test]
fn formats_and_prose_from_the_sixth_consumed_part() {
    let shell = vec![ToolSpec::new(
        "send_command_to_shell",
        "Run a command.",
        obj(json!({"command": {"type": "string"}}), &["command"]),
    )];
    let echo = (
        "send_command_to_shell".to_string(),
        json!({"command": "echo test"}),
    );
    // GLM with its first <arg_key> lost (the name glued to the key), and Gemma 4's
    // signature form; a glued name that is not offered is no call.
    assert_eq!(
        calls_in(
            None,
            Some("<tool_call>send_command_to_shellcommand</arg_key><arg_value>echo test</arg_value></tool_call>"),
            &shell
        ),
        vec![echo.clone()]
    );
    assert!(calls_in(
        None,
        Some("<tool_call>delete_everythingcommand</arg_key><arg_value>rm -rf /</arg_value></tool_call>"),
        &shell
    )
    .is_empty());
    assert_eq!(
        calls_in(
            None,
            Some("<|tool_call>call:send_command_to_shell(command: \"echo test\")<tool_call|>"),
            &shell
        ),
        vec![echo.clone()]
    );
    // Typographic quotes from a chat front end; backslashes JSON does not know stay.
    assert_eq!(
        calls_in(
            None,
            Some("[Calling tool: send_command_to_shell with arguments: {\u{201c}command\u{201d}: \u{201c}echo \u{2018}hi\u{2019}\u{201d}}]"),
            &shell
        ),
        vec![("send_command_to_shell".to_string(), json!({"command": "echo 'hi'"}))]
    );
    assert_eq!(
        calls_in(
            None,
            Some(
                r#"{"name": "send_command_to_shell", "arguments": {"command": "find . -regex '.*\(\.h\)$'"}}"#
            ),
            &shell
        ),
        vec![(
            "send_command_to_shell".to_string(),
            json!({"command": r"find . -regex '.*\(\.h\)$'"})
        )]
    );

    // Arguments written out as an object in the reasoning; reported as past, no call.
    let tasks = vec![ToolSpec::new(
        "any_of_params",
        "Track a task.",
        obj(
            json!({"task": {"type": "string"}, "status": {"type": "string"}}),
            &["task"],
        ),
    )];
    assert_eq!(
        calls_in(
            Some("The user wants to track a task; the status can be either pending or done. So the arguments should be {\"task\": \"Review PR\", \"status\": \"pending\"}."),
            None,
            &tasks
        ),
        vec![("any_of_params".to_string(), json!({"task": "Review PR", "status": "pending"}))]
    );
    assert!(calls_in(
        Some("Earlier the arguments were {\"task\": \"Review PR\"} and it returned done."),
        None,
        &tasks
    )
    .is_empty());

    // One call per value listed before the tool is named; without "each"/"twice" the
    // list alone makes no extra calls.
    let files = vec![ToolSpec::new(
        "read_file",
        "Read a file.",
        obj(json!({"path": {"type": "string"}}), &["path"]),
    )];
    let read = |p: &str| ("read_file".to_string(), json!({"path": p}));
    assert_eq!(
        calls_in(
            None,
            Some("To read the contents of `package.json`, `tsconfig.json`, and `.eslintrc.json`, I'll call the `read_file` function for each file."),
            &files
        ),
        vec![read("package.json"), read("tsconfig.json"), read(".eslintrc.json")]
    );
    assert_eq!(
        calls_in(
            None,
            Some("To get the weather for both Seoul and New York, I'll call the `get_weather` function twice with the respective city names."),
            &weather_tools()
        ),
        vec![weather("Seoul"), weather("New York")]
    );

    // A sentence that is only the order; "just call it" after the tool was named; a
    // camel-case name after "the".
    let python = vec![
        ToolSpec::new(
            "python",
            "Run Python code.",
            obj(json!({"code": {"type": "string"}}), &["code"]),
        ),
        ToolSpec::new("file_fetch", "Fetch the file.", obj(json!({}), &[])),
    ];
    assert_eq!(
        calls_in(
            Some("We need to compute the product. Use python."),
            None,
            &python
        ),
        vec![("python".to_string(), json!({}))]
    );
    assert_eq!(
        calls_in(
            Some("The tool signature is file_fetch = () => any, no parameters. So just call it."),
            None,
            &python
        ),
        vec![("file_fetch".to_string(), json!({}))]
    );
    for text in [
        "You can use python for that.",
        "Use python to write scripts like this one, it is a good choice for beginners.",
        "The tool is file_fetch. No need to call it.",
    ] {
        assert!(calls_in(None, Some(text), &python).is_empty(), "{text}");
    }
    let meteo = vec![ToolSpec::new(
        "OpenMeteoTool",
        "Weather.",
        obj(
            json!({"location_name": {"type": "string"}, "temperature_unit": {"type": "string"}}),
            &["location_name"],
        ),
    )];
    assert_eq!(
        calls_in(
            Some("I will use the OpenMeteoTool with temperature_unit set to celsius."),
            None,
            &meteo
        ),
        vec![(
            "OpenMeteoTool".to_string(),
            json!({"temperature_unit": "celsius"})
        )]
    );

    // A tool named like a verb, as the model's last words; followed by the working, the
    // model did it itself.
    let calc = vec![ToolSpec::new(
        "calculate",
        "Evaluate an expression.",
        obj(json!({"expression": {"type": "string"}}), &["expression"]),
    )];
    assert_eq!(
        calls_in(None, Some("First, I'll calculate 25% of 80."), &calc),
        vec![("calculate".to_string(), json!({}))]
    );
    assert!(calls_in(
        None,
        Some("First, let's calculate 25% of 80:\n\n25/100 \u{d7} 80 = 20\n\nSo the answer is 20."),
        &calc
    )
    .is_empty());

    // A name said in another order, as many times as the text says; in the past, none.
    let dice = vec![ToolSpec::new(
        "dice_roll",
        "Roll a die.",
        obj(json!({}), &[]),
    )];
    assert_eq!(
        calls_in(None, Some("I'll roll the dice 3 times for you!"), &dice).len(),
        3
    );
    assert!(calls_in(None, Some("I rolled the dice and got a 4."), &dice).is_empty());

    // The tool's own verb with a noun of its name, and no argument to read: the call
    // is made without it (the tool says what is missing).
    let search = vec![
        ToolSpec::new(
            "get_weather",
            "Get the current weather for a given city.",
            obj(json!({"city": {"type": "string"}}), &["city"]),
        ),
        ToolSpec::new(
            "search_files",
            "Search for files matching a pattern.",
            obj(
                json!({"pattern": {"type": "string", "description": "Glob pattern"}}),
                &["pattern"],
            ),
        ),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("I'll search for budget files and get the weather in Amsterdam for you."),
            &search
        ),
        vec![
            ("search_files".to_string(), json!({})),
            ("get_weather".to_string(), json!({"city": "Amsterdam"}))
        ]
    );
    for text in [
        "I searched for budget files and found two.",
        "If you want, you can search for quarterly reports yourself.",
    ] {
        assert!(calls_in(None, Some(text), &search).is_empty(), "{text}");
    }

    // What the assistant is able to do, listed under its labels, is no call.
    let mut ten = weather_tools();
    ten.push(ToolSpec::new(
        "search_web",
        "Search the internet.",
        obj(json!({"query": {"type": "string"}}), &["query"]),
    ));
    assert!(calls_in(
        None,
        Some("I can help with a variety of tasks! Here are some things I can assist you with:\n\n1. **Weather Information**: Get the current weather for any city.\n2. **Web Search**: Search the internet for information on any topic.\n\nFeel free to ask me anything!"),
        &ten
    )
    .is_empty());
}

#[test]
fn formats_and_prose_from_the_seventh_consumed_part() {
    let tools = vec![
        ToolSpec::new(
            "exec",
            "Run a shell command.",
            obj(
                json!({"command": {"type": "string"}, "timeout_ms": {"type": "integer"}}),
                &["command"],
            ),
        ),
        ToolSpec::new(
            "read",
            "Read a file.",
            obj(
                json!({"path": {"type": "string"}, "limit": {"type": "integer"}}),
                &["path"],
            ),
        ),
        ToolSpec::new(
            "remember",
            "Remember a fact.",
            obj(
                json!({"fact": {"type": "string"}, "category": {"type": "string"}}),
                &["fact"],
            ),
        ),
    ];
    let exec = |c: &str| ("exec".to_string(), json!({"command": c}));
    let read = |p: &str| ("read".to_string(), json!({"path": p}));
    // Arguments under the schema's own word; a Gemma call whose block tokens were
    // dropped and whose last string closes with the wrong quote; Kimi arguments encoded
    // as a JSON string; a name run into the next key.
    for (text, want) in [
        (
            "<tool_call>\n[\n{\"tool_name\": \"exec\", \"properties\": {\"command\": \"pwd\", \"timeout_ms\": 100}}\n]\n</tool_call>",
            ("exec".to_string(), json!({"command": "pwd", "timeout_ms": 100})),
        ),
        (
            "call:read{path:<|\"|>src/a.rs<|\"|>,limit:':\\s*'<|\"|>}",
            read("src/a.rs"),
        ),
        (
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.exec:1<|tool_call_argument_begin|>\"{\\\"command\\\": \\\"pwd\\\"}\"<|tool_call_end|><|tool_calls_section_end|>",
            exec("pwd"),
        ),
        (
            "{\"name\": \"exec\\ \"arguments\": {\"command\": \"pwd\"}}",
            exec("pwd"),
        ),
    ] {
        let got = calls_in(None, Some(text), &tools);
        assert_eq!(got.len(), 1, "{text}: {got:?}");
        assert_eq!(got[0].0, want.0, "{text}");
        for (k, v) in want.1.as_object().unwrap() {
            assert_eq!(&got[0].1[k], v, "{text}");
        }
    }
    // A tag of any name carrying the tool as an attribute, one call per tag; a tool not
    // offered is no call.
    assert_eq!(
        calls_in(
            None,
            Some("First, I'll look at the styles.\n<call_record tool=\"read\">\n<parameter name=\"path\">a.css</parameter>\n</call_record>\n<call_record tool=\"read\">\n<parameter name=\"path\">b.tsx</parameter>\n</call_record>"),
            &tools
        ),
        vec![read("a.css"), read("b.tsx")]
    );
    assert!(calls_in(
        None,
        Some("<call_record tool=\"delete_repo\">\n<parameter name=\"path\">/</parameter>\n</call_record>"),
        &tools
    )
    .is_empty());
    // A call with named arguments opening the answer, before the model's own words;
    // positional arithmetic is no call.
    assert_eq!(
        calls_in(
            None,
            Some("remember(fact=\"TechCrunch emails are low priority\", category=\"preference\") I have updated my preferences."),
            &tools
        ),
        vec![(
            "remember".to_string(),
            json!({"fact": "TechCrunch emails are low priority", "category": "preference"})
        )]
    );
    let add = vec![ToolSpec::new(
        "add",
        "Add two numbers.",
        obj(
            json!({"a": {"type": "number"}, "b": {"type": "number"}}),
            &["a", "b"],
        ),
    )];
    assert!(calls_in(None, Some("add(2, 3) = 5, so the total is five."), &add).is_empty());
    // A shell block that ends the answer, its fence lost or kept, after words that
    // commit the assistant; addressed to the reader, it is advice.
    assert_eq!(
        calls_in(None, Some("bash\necho X"), &tools),
        vec![exec("echo X")]
    );
    assert_eq!(
        calls_in(
            None,
            Some("I'll list the directory first.\n\n```bash\nls -la\n```"),
            &tools
        ),
        vec![exec("ls -la")]
    );
    for text in [
        "You can check it yourself:\n\n```bash\nls -la\n```",
        "Here is how the project is built:\n\nbash\nmake all",
    ] {
        assert!(calls_in(None, Some(text), &tools).is_empty(), "{text}");
    }
    // The record of a call already made, with its result, is no call.
    assert!(calls_in(
        None,
        Some("I've made the move. Your turn!\n\n[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"exec\",\"arguments\":\"{\\\"command\\\":\\\"pwd\\\"}\"},\"result\":\"/home\"}]"),
        &tools
    )
    .is_empty());
    // Arguments glued to the end of the thinking that committed to them (Harmony's
    // tokens stripped); the same object shown after words that commit to nothing is none.
    assert_eq!(
        calls_in(
            None,
            Some(
                "They want the files listed. Let's list files.{\"command\":\"ls -R /tmp/skills\"}"
            ),
            &tools
        ),
        vec![exec("ls -R /tmp/skills")]
    );
    assert!(calls_in(
        None,
        Some("The request body looks like this: {\"command\":\"ls -R /tmp/skills\"}"),
        &tools
    )
    .is_empty());

    // Results listed under bold labels, and an offer that asks the user's leave, are no
    // calls; the same offer without the question is one.
    let search = vec![
        ToolSpec::new(
            "weather_forecast",
            "Weather forecast for a location.",
            obj(json!({"location": {"type": "string"}}), &["location"]),
        ),
        ToolSpec::new(
            "search_google",
            "Search Google.",
            obj(json!({"query": {"type": "string"}}), &["query"]),
        ),
    ];
    for text in [
        "Here's what I found:\n\n- **Weather in New York**: 11°F\n- **Tip**: bring a coat.",
        "The search failed. I can try to search for the current weather in Oxford another way. Would you like me to proceed with that?",
    ] {
        assert!(calls_in(None, Some(text), &search).is_empty(), "{text}");
    }
    assert_eq!(
        calls_in(
            None,
            Some("The search failed. I'll search for \"Oxford weather today\" another way."),
            &search
        ),
        vec![(
            "search_google".to_string(),
            json!({"query": "Oxford weather today"})
        )]
    );
}

#[test]
fn formats_and_prose_from_the_eighth_consumed_part() {
    let tools = vec![
        ToolSpec::new(
            "read_file",
            "Read a file.",
            obj(json!({"path": {"type": "string"}}), &["path"]),
        ),
        ToolSpec::new(
            "get_ticker_symbol",
            "Ticker of a company.",
            obj(
                json!({"company_name": {"type": "string"}}),
                &["company_name"],
            ),
        ),
        ToolSpec::new("get_current_day_name", "Today's name.", obj(json!({}), &[])),
        ToolSpec::new(
            "web_search",
            "Search the web.",
            obj(json!({"query": {"type": "string"}}), &["query"]),
        ),
    ];
    let read = |p: &str| ("read_file".to_string(), json!({"path": p}));
    // DSML with spaces after its markers; DeepSeek's toolcall tag with fenced JSON; GLM
    // and Kimi with their opening tokens lost; a `$function` key; key-value lines; the
    // first step of a code agent (not the one after the observation it made up).
    for (text, want) in [
        (
            "<\u{ff5c}\u{ff5c}DSML\u{ff5c}\u{ff5c} calls> <\u{ff5c}\u{ff5c}DSML\u{ff5c}\u{ff5c} invoke name=\"read_file\"> <\u{ff5c}\u{ff5c}DSML\u{ff5c}\u{ff5c} parameter name=\"path\" string=\"true\">package.json</\u{ff5c}\u{ff5c}DSML\u{ff5c}\u{ff5c} parameter> </\u{ff5c}\u{ff5c}DSML\u{ff5c}\u{ff5c} invoke> </\u{ff5c}\u{ff5c}DSML\u{ff5c}\u{ff5c} calls>",
            vec![read("package.json")],
        ),
        (
            "Let me look first.\n\n<\u{ff5c}DSML\u{ff5c}toolcall>read_file\n\n```json\n{\"path\":\"/tmp/gen.js\"}\n```\n\n```json\n{\"path\": \"/tmp/gen.js\", \"size\": 10}\n```",
            vec![read("/tmp/gen.js")],
        ),
        (
            "read_file<arg_key>path</arg_key><arg_value>/home/a</arg_value>",
            vec![read("/home/a")],
        ),
        (
            "read_file:0<|tool_call_argument_begin|>{\"path\": \"a.md\"}<|tool_calls_section_end|>\nread_file:1<|tool_call_argument_begin|>{\"path\": \"b.md\"}<|tool_calls_section_end|>",
            vec![read("a.md"), read("b.md")],
        ),
        (
            "{\"role\": \"assistant\", \"content\": \"Okay.\", \"tool_calls\": [{\"$function\": \"get_current_day_name\"}]}",
            vec![("get_current_day_name".to_string(), json!({}))],
        ),
        (
            "tool_name: get_ticker_symbol\nparameter: 3M",
            vec![("get_ticker_symbol".to_string(), json!({"company_name": "3M"}))],
        ),
        (
            "Thought: I'll search for it.\n\nCode:\n```py\nresults = web_search(\"Amazon letter\")\nprint(results)\n```<end_code>\n\nObservation: nothing.\n\nCode:\n```py\nweb_search(\"something else\")\n```",
            vec![("web_search".to_string(), json!({"query": "Amazon letter"}))],
        ),
    ] {
        assert_eq!(calls_in(None, Some(text), &tools), want, "{text}");
    }
    // Key-value lines naming a tool not offered, and a code block that calls none, are no
    // calls.
    for text in [
        "tool_name: delete_everything\nparameter: all",
        "Code:\n```py\nprint(len(\"abc\"))\n```",
    ] {
        assert!(calls_in(None, Some(text), &tools).is_empty(), "{text}");
    }
    // The model's last words, ending in a colon: it stopped to make the call; with the
    // working after the colon it did not.
    let read_tool = vec![ToolSpec::new(
        "read",
        "Read a file.",
        obj(json!({"filePath": {"type": "string"}}), &["filePath"]),
    )];
    assert_eq!(
        calls_in(
            Some("Let me read the files first before editing:"),
            None,
            &read_tool
        ),
        vec![("read".to_string(), json!({}))]
    );
    assert!(calls_in(
        None,
        Some("Let me read the files first:\n\nThe first one says hello, the second one says goodbye."),
        &read_tool
    )
    .is_empty());
    // A tool whose arguments are all optional, named by its verb and a noun of its name.
    let verify = vec![ToolSpec::new(
        "verify_eligibility_tool",
        "Verify the caller's eligibility.",
        obj(json!({"first_name": {"type": "string"}}), &[]),
    )];
    assert_eq!(
        calls_in(
            None,
            Some("Let me check your eligibility verification\u{2026}"),
            &verify
        ),
        vec![("verify_eligibility_tool".to_string(), json!({}))]
    );
    assert!(calls_in(None, Some("I checked your eligibility yesterday."), &verify).is_empty());
    // A heading or a code comment gives no order; the same words from the assistant do.
    let write = vec![ToolSpec::new(
        "write_file",
        "Write a file.",
        obj(json!({"file_path": {"type": "string"}}), &["file_path"]),
    )];
    assert!(calls_in(
        None,
        Some("Below is a program.\n\n  # Save this code in a file named hello_world.py\n\n  print(\"hi\")"),
        &write
    )
    .is_empty());
    assert_eq!(
        calls_in(
            None,
            Some("I'll save this code in a file named hello_world.py."),
            &write
        ),
        vec![(
            "write_file".to_string(),
            json!({"file_path": "hello_world.py"})
        )]
    );
    // A bare value in call tags goes to the one tool that needs one; with two such tools
    // it is no call. A stray bracket after a pythonic call is no text.
    let mut two = write.clone();
    two.push(ToolSpec::new(
        "run_terminal_command",
        "Run.",
        obj(json!({"command": {"type": "string"}}), &[]),
    ));
    assert_eq!(
        calls_in(
            None,
            Some("Reading it again.\n<tool_calls> src/api.c </tool_calls>"),
            &two
        ),
        vec![("write_file".to_string(), json!({"file_path": "src/api.c"}))]
    );
    two.push(ToolSpec::new(
        "read_file",
        "Read.",
        obj(json!({"path": {"type": "string"}}), &["path"]),
    ));
    assert!(calls_in(None, Some("<tool_calls> src/api.c </tool_calls>"), &two).is_empty());
    assert_eq!(
        calls_in(None, Some("write_file(\"a.txt\"))"), &write),
        vec![("write_file".to_string(), json!({"file_path": "a.txt"}))]
    );
    // "Use echo with file_name.": the order and what to give it.
    let echo = vec![ToolSpec::new(
        "echo",
        "Echo.",
        obj(json!({"content": {"type": "string"}}), &["content"]),
    )];
    assert_eq!(
        calls_in(
            Some("There's no cat tool. Use echo with file_name."),
            None,
            &echo
        ),
        vec![("echo".to_string(), json!({}))]
    );
    assert!(calls_in(Some("We could use echo with file_name."), None, &echo).is_empty());
}

#[test]
fn formats_and_prose_from_the_ninth_consumed_part() {
    let weather = vec![ToolSpec::new(
        "get_weather",
        "Weather for a city.",
        obj(
            json!({"city": {"type": "string"}, "celsius": {"type": "boolean"}}),
            &["city"],
        ),
    )];
    let paris = (
        "get_weather".to_string(),
        json!({"city": "Paris", "celsius": true}),
    );
    // Arguments under `tool_arguments`; the tool's name as the only key.
    for text in [
        "Action:\n{\n  \"tool_name\": \"get_weather\",\n  \"tool_arguments\": {\"city\": \"Paris\", \"celsius\": true}\n}",
        "<think>\n\n</think>\n\n{\"get_weather\": {\"city\": \"Paris\", \"celsius\": true}}",
    ] {
        assert_eq!(calls_in(None, Some(text), &weather), vec![paris.clone()], "{text}");
    }
    assert!(calls_in(None, Some("{\"result\": {\"city\": \"Paris\"}}"), &weather).is_empty());
    // `<terminal_command>` for a `terminal` tool; the name alone in `<function>` with the
    // JSON after it.
    let terminal = vec![ToolSpec::new(
        "terminal",
        "Run a command.",
        obj(json!({"command": {"type": "string"}}), &["command"]),
    )];
    let ls = ("terminal".to_string(), json!({"command": "ls -la"}));
    for text in [
        "<terminal_command>\nls -la\n</terminal_command>",
        "Let me check.\n<tool_call>\n<function>terminal</function>\n{\"command\": \"ls -la\"}\n</tool_call>",
    ] {
        assert_eq!(calls_in(None, Some(text), &terminal), vec![ls.clone()], "{text}");
    }
    // "…, so I should call the function with "Paris" as the city parameter."
    assert_eq!(
        calls_in(
            Some("The user wants the weather in Paris, so I should call the function with \"Paris\" as the city parameter."),
            None,
            &weather
        ),
        vec![("get_weather".to_string(), json!({"city": "Paris"}))]
    );
    // A promise followed by the answer itself is no call.
    assert!(calls_in(
        None,
        Some("Okay, let's get you the weather in Tokyo! Here's a breakdown as of Monday:\n\n* **Temperature:** 25°C\n* **Feels like:** 28°C\n* **Sky:** clear, light wind from the south, humidity around sixty percent.\n* **Tonight:** cooler, around 18°C, with a chance of showers after midnight."),
        &weather
    )
    .is_empty());
    // A tool named after no concept, whose description matches one, is led by its own
    // name; a preposition opening a name is no verb.
    let two = vec![
        ToolSpec::new(
            "weather",
            "useful when you need to search for current weather conditions",
            obj(json!({"city": {"type": "string"}}), &["city"]),
        ),
        ToolSpec::new(
            "about_the_user",
            "Look up the user's notes.",
            obj(json!({"query_str": {"type": "string"}}), &["query_str"]),
        ),
    ];
    assert_eq!(
        calls_in(None, Some("Now I'll check the weather in Detroit"), &two),
        vec![("weather".to_string(), json!({"city": "Detroit"}))]
    );
    assert!(calls_in(
        Some("Thought: I need to gather some information about the user's morning."),
        None,
        &two
    )
    .is_empty());
}

#[test]
fn formats_and_prose_from_the_tenth_consumed_part() {
    // Cline's MCP call: the name and the arguments in their own tags, in any wrapper.
    let memory = vec![tool("add_memory", text_prop("content"), &["content"])];
    let mcp = "I'll save that.\n\n<use_mcp_tool>\n<server_name>memory</server_name>\n<tool_name>add_memory</tool_name>\n<arguments>\n{\"content\": \"likes tea\"}\n</arguments>\n</use_mcp_tool>";
    assert_eq!(
        calls_in(None, Some(mcp), &memory),
        vec![("add_memory".to_string(), json!({"content": "likes tea"}))]
    );
    for refused in [
        // A tool that is not offered.
        mcp.replace("<tool_name>add_memory", "<tool_name>drop_tables"),
        // Shown to the reader as an example.
        mcp.replace("I'll save that.", "For example, you would use:"),
    ] {
        assert!(
            calls_in(None, Some(&refused), &memory).is_empty(),
            "{refused}"
        );
    }
    // Qwen XML whose `<function=read>` became `<read>`.
    let read = vec![tool("read", text_prop("filePath"), &["filePath"])];
    assert_eq!(
        calls_in(
            None,
            Some("<tool_call>\n<read>\n<parameter=filePath>\n/src/a.java\n</parameter>\n</function>\n</tool_call>"),
            &read
        ),
        vec![("read".to_string(), json!({"filePath": "/src/a.java"}))]
    );
    // `<write_file>` for `write_to_file`: the little words of a name do not decide.
    let write = vec![tool(
        "write_to_file",
        json!({"path": {"type": "string"}, "content": {"type": "string"}}),
        &["path", "content"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some("<write_file>\n<path>notes.md</path>\n<content>hi</content>\n</write_file>"),
            &write
        ),
        vec![(
            "write_to_file".to_string(),
            json!({"path": "notes.md", "content": "hi"})
        )]
    );
    assert!(calls_in(
        None,
        Some("<read_file>\n<path>notes.md</path>\n</read_file>"),
        &write
    )
    .is_empty());
    // NexusRaven: a call as another call's argument is made first; code calling anything
    // not offered is no call.
    let raven = vec![
        tool(
            "get_weather_data",
            text_prop("coordinates"),
            &["coordinates"],
        ),
        tool(
            "get_coordinates_from_city",
            text_prop("city_name"),
            &["city_name"],
        ),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("Call: get_weather_data(coordinates=get_coordinates_from_city(city_name='Seattle'))<bot_end>\nThought: The function call `get_weather_data(…)` answers the question."),
            &raven
        ),
        vec![
            ("get_coordinates_from_city".to_string(), json!({"city_name": "Seattle"})),
            ("get_weather_data".to_string(), json!({})),
        ]
    );
    assert!(calls_in(
        None,
        Some("Call: get_weather_data(coordinates=lookup(city_name='Seattle'))<bot_end>"),
        &raven
    )
    .is_empty());
    // An object never closed, then text the model made up: the object up to that text.
    let send = vec![tool("send_message", text_prop("message"), &["message"])];
    assert_eq!(
        calls_in(
            None,
            Some("{\n\"function\": \"send_message\",\n\"params\": {\n    \"message\": \"Hello!\"\n}\nFUNCTION RETURN {\"status\": \"OK\"}"),
            &send
        ),
        vec![("send_message".to_string(), json!({"message": "Hello!"}))]
    );
}

#[test]
fn prose_from_the_tenth_consumed_part() {
    let loc = || json!({"location": {"type": "string"}});
    let search = vec![
        tool(
            "search_web",
            json!({"query": {"type": "string"}}),
            &["query"],
        ),
        tool("fetch_url", json!({"url": {"type": "string"}}), &["url"]),
    ];
    // The gerund after "by" is the step it commits to.
    assert_eq!(
        calls_in(
            None,
            Some("Let me start by searching for information about Python packaging."),
            &search
        ),
        vec![(
            "search_web".to_string(),
            json!({"query": "information about Python packaging"})
        )]
    );
    assert!(calls_in(
        None,
        Some("I found this by searching the web for Python packaging."),
        &search
    )
    .is_empty());
    // "Let me search the web for this information.": the tool's own words, no query.
    assert_eq!(
        calls_in(
            None,
            Some("Let me search the web for this information."),
            &search
        ),
        vec![("search_web".to_string(), json!({}))]
    );
    // A name given to a file is its path; the reader as an object is no hypothetical.
    let write = vec![tool(
        "Write",
        json!({"file_path": {"type": "string"}, "content": {"type": "string"}}),
        &["file_path", "content"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some("I'll help you create an HTML file named 'boring' for you."),
            &write
        ),
        vec![("Write".to_string(), json!({"file_path": "boring"}))]
    );
    assert!(calls_in(
        None,
        Some("You could create an HTML file named 'boring'."),
        &write
    )
    .is_empty());
    // The local part of an MCP-namespaced name.
    let editor = vec![tool(
        "developer__text_editor",
        json!({"path": {"type": "string"}, "command": {"type": "string"}}),
        &["path", "command"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some("I'll create demo.txt in your current directory using the text editor tool."),
            &editor
        )
        .len(),
        1
    );
    assert!(calls_in(
        None,
        Some("You can edit it using the text editor tool."),
        &editor
    )
    .is_empty());
    // One verb, two tools' nouns joined by "and"; "there" is the place just named.
    let both = vec![
        tool("get_time", loc(), &["location"]),
        tool("get_weather", loc(), &["location"]),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("I will check the current time and weather in Tokyo."),
            &both
        ),
        vec![
            ("get_time".to_string(), json!({"location": "Tokyo"})),
            ("get_weather".to_string(), json!({"location": "Tokyo"})),
        ]
    );
    assert_eq!(
        calls_in(
            None,
            Some("My favorite city is Kyoto, Japan! Let me check the weather there for you."),
            &both
        ),
        vec![(
            "get_weather".to_string(),
            json!({"location": "Kyoto, Japan"})
        )]
    );
    // Waiting on the user, or weighing whether more is needed: no call.
    assert!(calls_in(
        None,
        Some("I'll need some additional information to check the weather for the meeting."),
        &both
    )
    .is_empty());
    assert!(calls_in(
        Some("I used get_weather for Toronto. I'll check if there's additional weather information needed."),
        None,
        &both
    )
    .is_empty());
    // The request restated in reasoning; a hyphenated name written as offered.
    let ping = vec![tool(
        "ping",
        json!({"value": {"type": "integer"}}),
        &["value"],
    )];
    assert_eq!(
        calls_in(
            Some("The user wants me to call the ping function with value 1."),
            None,
            &ping
        ),
        vec![("ping".to_string(), json!({"value": 1}))]
    );
    assert!(calls_in(
        Some("The user wants to know what the ping function does."),
        None,
        &ping
    )
    .is_empty());
    let browse = vec![tool(
        "web-browsing",
        json!({"query": {"type": "string"}}),
        &["query"],
    )];
    assert_eq!(
        calls_in(None, Some("I\u{2019}ll call web-browsing\u{2026}"), &browse),
        vec![("web-browsing".to_string(), json!({}))]
    );
    // An identifier stated later in its key's sentence; a name is not an id.
    let results = vec![tool(
        "get_experiment_results",
        json!({"experiment_id": {"type": "string"}}),
        &["experiment_id"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some("The experiment ID for the experiment named \"chemical_reaction\" is exp_003.\n\nNext, I'll retrieve the results of this experiment."),
            &results
        ),
        vec![("get_experiment_results".to_string(), json!({"experiment_id": "exp_003"}))]
    );
    // A signature in backticks names the tool; its placeholders are no arguments.
    let events = vec![tool(
        "get_historical_events",
        json!({"year": {"type": "integer"}}),
        &["year"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some("Action: I should use the tool `get_historical_events(year, location=None)` to gather information."),
            &events
        ),
        vec![("get_historical_events".to_string(), json!({}))]
    );
    // "Let me proceed with the tool call.": the one tool offered.
    let best = vec![tool("best_language_to_learn", json!({}), &[])];
    assert_eq!(
        calls_in(
            Some("The question is vague. Let me proceed with the tool call as per the example."),
            None,
            &best
        ),
        vec![("best_language_to_learn".to_string(), json!({}))]
    );
    // Chinese: a commitment and a verb of the one tool that holds its concept.
    let web = vec![tool(
        "SearchWeb",
        json!({"query": {"type": "string"}}),
        &["query"],
    )];
    assert_eq!(
        calls_in(None, Some("我来为您查询当前人民币与美元的汇率。"), &web),
        vec![("SearchWeb".to_string(), json!({}))]
    );
    for refused in [
        "我无法查询实时汇率。",
        "我已经查询了汇率。",
        "要我为您查询汇率吗？",
    ] {
        assert!(calls_in(None, Some(refused), &web).is_empty(), "{refused}");
    }
    let two_searches = vec![
        tool(
            "search_chunks",
            json!({"query": {"type": "string"}}),
            &["query"],
        ),
        tool(
            "search_docs",
            json!({"query": {"type": "string"}}),
            &["query"],
        ),
    ];
    assert!(calls_in(None, Some("请稍等，我将进行相关搜索。"), &two_searches).is_empty());
    // Qwen XML that lost its `<function=` opener: the last offered name before the
    // first parameter.
    let task = vec![tool(
        "task",
        json!({"description": {"type": "string"}, "subagent_type": {"type": "string"}}),
        &["description"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some("<name>task\n</parameter>\n<parameter=description>\nAdd a comment\n</parameter>\n<parameter=subagent_type>\ngeneral\n</parameter>\n</function>"),
            &task
        ),
        vec![("task".to_string(), json!({"description": "Add a comment", "subagent_type": "general"}))]
    );
    assert!(calls_in(
        None,
        Some("<name>plan\n</parameter>\n<parameter=description>\nAdd a comment\n</parameter>\n</function>"),
        &task
    )
    .is_empty());
    // Gemini's `<tool_code>`: a Python call, string escapes read as Python reads them;
    // code that calls what is not offered is no call.
    let grep = vec![tool(
        "grep_search",
        json!({"pattern": {"type": "string"}, "dir_path": {"type": "string"}}),
        &["pattern"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some("I will search.\n\n<function_calls>\n<tool_code>grep_search(pattern='key\\s*=', dir_path=\"src\")</tool_code>\n</function_calls>"),
            &grep
        ),
        vec![("grep_search".to_string(), json!({"pattern": "key\\s*=", "dir_path": "src"}))]
    );
    assert!(calls_in(
        None,
        Some("<tool_code>print(len(items))</tool_code>"),
        &grep
    )
    .is_empty());
}

#[test]
fn commitments_and_refusals_from_the_tenth_round() {
    let office = vec![
        tool(
            "get_weather",
            json!({"city": {"type": "string"}}),
            &["city"],
        ),
        tool(
            "search_files",
            json!({"pattern": {"type": "string"}}),
            &["pattern"],
        ),
        tool(
            "schedule_meeting",
            json!({"title": {"type": "string"}, "time": {"type": "string"}}),
            &["title", "time"],
        ),
    ];
    // The one tool that searches, right after a commitment, with what it looks for.
    assert_eq!(
        calls_in(
            None,
            Some("I'll search for quarterly reports for you."),
            &office
        ),
        vec![("search_files".to_string(), json!({}))]
    );
    for refused in [
        "I searched for quarterly reports earlier.",
        "I can't search for quarterly reports.",
        "I'll search everything later, once you say so?",
    ] {
        assert!(
            calls_in(None, Some(refused), &office).is_empty(),
            "{refused}"
        );
    }
    // A value committed to a property only one tool has.
    assert_eq!(
        calls_in(None, Some("I can help you schedule that meeting. I'll use \"Meeting with John\" as the title."), &office),
        vec![("schedule_meeting".to_string(), json!({"title": "Meeting with John"}))]
    );
    assert!(calls_in(
        None,
        Some("I used \"Meeting with John\" as the title."),
        &office
    )
    .is_empty());
    // The call waits on the user's answer; a script's doing is not the model's; a
    // function of the code shown is no offered tool.
    for refused in [
        "Sure, I can help with that. Let's schedule the meeting. Could you please confirm the attendees and the time?",
        "The script will use the `get_weather` function to check the weather for a specified city.",
        "To check the weather, we'll use the `get_weather` function from the provided code snippet.",
    ] {
        assert!(calls_in(None, Some(refused), &office).is_empty(), "{refused}");
    }
    assert_eq!(
        calls_in(
            None,
            Some("To check the weather, we'll use the `get_weather` function for Paris."),
            &office
        ),
        vec![("get_weather".to_string(), json!({"city": "Paris"}))]
    );
    // A sentence that opens with what the model is doing; a gerund as a subject is not.
    let days = vec![
        tool("get_current_date", json!({}), &[]),
        tool("get_current_day_name", json!({}), &[]),
    ];
    assert_eq!(
        calls_in(None, Some("Getting the name of the current day..."), &days),
        vec![("get_current_day_name".to_string(), json!({}))]
    );
    let exec = vec![tool(
        "exec",
        json!({"command": {"type": "string"}}),
        &["command"],
    )];
    assert!(calls_in(
        Some("Running `rm -rf /` would be catastrophic, so we won't."),
        None,
        &exec
    )
    .is_empty());
    // Chinese: a look-up of the thing one tool's name holds.
    let clock = vec![
        tool("get_current_time", json!({}), &[]),
        tool(
            "get_weather",
            json!({"city": {"type": "string"}}),
            &["city"],
        ),
    ];
    assert_eq!(
        calls_in(None, Some("我来为您查询当前时间"), &clock),
        vec![("get_current_time".to_string(), json!({}))]
    );
    assert!(calls_in(None, Some("我无法查询当前时间"), &clock).is_empty());
    // The users' request reported is no hypothetical; "this function" with one tool.
    let dice = vec![tool("dice_roll", json!({}), &[])];
    assert_eq!(
        calls_in(
            Some("Since they asked for three rolls, I need to call this function three times."),
            None,
            &dice
        )
        .len(),
        3
    );
    assert!(calls_in(
        Some("They could call this function three times."),
        None,
        &dice
    )
    .is_empty());
    // "So I need to format Paris as the location."
    let weather = vec![tool(
        "get_weather",
        json!({"location": {"type": "string"}}),
        &["location"],
    )];
    assert_eq!(
        calls_in(
            Some("The user asks about Paris. So I need to format Paris as the location."),
            None,
            &weather
        ),
        vec![("get_weather".to_string(), json!({"location": "Paris"}))]
    );
    // The same value stated again later, shorter or longer, is the one used.
    let two = vec![
        tool(
            "get_current_time",
            json!({"location": {"type": "string"}}),
            &["location"],
        ),
        tool(
            "get_current_temperature",
            json!({"location": {"type": "string"}}),
            &["location"],
        ),
    ];
    assert_eq!(
        calls_in(
            Some("The user asks for the time in Vancouver. First, I need to get the time using the get_current_time function for Vancouver. So I'll set location to \"Vancouver, Canada\" for get_current_time."),
            None,
            &two
        ),
        vec![("get_current_time".to_string(), json!({"location": "Vancouver, Canada"}))]
    );
    // The arguments written out after "the JSON … would be", keys held by one tool.
    let page = vec![tool(
        "webpage_query",
        json!({"query": {"type": "string"}}),
        &["query"],
    )];
    assert_eq!(
        calls_in(
            Some("The proper JSON format for the query would be {'query': 'What is LangSmith?'}. That should get relevant results."),
            None,
            &page
        ),
        vec![("webpage_query".to_string(), json!({"query": "What is LangSmith?"}))]
    );
    assert!(calls_in(
        Some("The JSON format would be {'title': 'x'}."),
        None,
        &page
    )
    .is_empty());
}

#[test]
fn formats_and_prose_from_the_eleventh_consumed_part() {
    // `<think>` wraps reasoning even when a tool is named `think`; the Action after it
    // is the call.
    let tau = vec![
        tool("think", text_prop("thought"), &["thought"]),
        tool("get_user_details", text_prop("user_id"), &["user_id"]),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("<think>\nI need the user's details first.\n</think>\n\nAction:\n{\"name\": \"get_user_details\", \"arguments\": {\"user_id\": \"omar_3817\"}}"),
            &tau
        ),
        vec![("get_user_details".to_string(), json!({"user_id": "omar_3817"}))]
    );
    assert!(calls_in(
        None,
        Some("<think>\nThe user only said hello.\n</think>\n\nHello! How can I help?"),
        &tau
    )
    .is_empty());
    assert_eq!(
        calls_in(
            None,
            Some("<think>Consider the options.</think>\n<think>let me weigh them</think>"),
            &tau
        ),
        vec![]
    );
    // ReAct actions written as Python calls or the paper's brackets, any script.
    let weather = vec![
        tool("get_weather", text_prop("city"), &["city"]),
        tool("Search", text_prop("query"), &["query"]),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("Thought: 先查天气。\nAction: get_weather(city=\"北京\")"),
            &weather
        ),
        vec![("get_weather".to_string(), json!({"city": "北京"}))]
    );
    assert_eq!(
        calls_in(
            None,
            Some("Thought: 需要搜索。\nAction: Search[华为最新手机]"),
            &weather
        ),
        vec![("Search".to_string(), json!({"query": "华为最新手机"}))]
    );
    // A spaced tool name before its brackets, its description glued on.
    let internet = vec![tool("Internet Search Tool", text_prop("query"), &["query"])];
    assert_eq!(
        calls_in(
            None,
            Some("Thought: I should search.\nAction: Internet Search Tool(query) - Scrapes the web for the query.\nAction Input: {\"query\": \"who won\"}"),
            &internet
        ),
        vec![("Internet Search Tool".to_string(), json!({"query": "who won"}))]
    );
    // SWE-agent's command block: the tool's own name, then its arguments in order.
    let swe = vec![
        tool(
            "find_file",
            json!({"file_name": {"type": "string"}, "dir": {"type": "string"}}),
            &["file_name"],
        ),
        tool(
            "open",
            json!({"path": {"type": "string"}, "line_number": {"type": "integer"}}),
            &["path"],
        ),
    ];
    assert_eq!(
        calls_in(None, Some("Let's use the `find_file` command to locate it.\n\n```\nfind_file \"numpy_handler.py\"\n```"), &swe),
        vec![("find_file".to_string(), json!({"file_name": "numpy_handler.py"}))]
    );
    assert_eq!(
        calls_in(None, Some("Let's open this file at the failing line.\n\n```\nopen src/numpy_handler.py 293\n```\n"), &swe),
        vec![("open".to_string(), json!({"path": "src/numpy_handler.py", "line_number": 293}))]
    );
    for refused in [
        "For example, you would use:\n\n```\nopen src/a.py\n```",
        "Let's look.\n\n```\nless src/a.py\n```",
        "Should I run this?\n\n```\nopen src/a.py\n```",
    ] {
        assert!(calls_in(None, Some(refused), &swe).is_empty(), "{refused}");
    }
    // LangChain's XML agent, its closing tag cut by the stop sequence.
    let arxiv = vec![tool("arxiv_search", text_prop("query"), &["query"])];
    assert_eq!(
        calls_in(
            None,
            Some(" <tool>arxiv_search</tool><tool_input>llama 2"),
            &arxiv
        ),
        vec![("arxiv_search".to_string(), json!({"query": "llama 2"}))]
    );
}

#[test]
fn prose_from_the_eleventh_consumed_part() {
    // ToolBench's `<endpoint>_for_<api>` named by its API; a key's kind word after it.
    let toolbench = vec![
        tool(
            "retorna_dados_do_endereco_for_cep_brazil",
            text_prop("cepnumber"),
            &["cepnumber"],
        ),
        tool(
            "api_tracking_for_pack_send",
            text_prop("reference"),
            &["reference"],
        ),
        tool(
            "track_package_for_pridnestrovie_post",
            text_prop("tracking"),
            &["tracking"],
        ),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("I will now retrieve the address details using the cep_brazil tool."),
            &toolbench
        ),
        vec![(
            "retorna_dados_do_endereco_for_cep_brazil".to_string(),
            json!({})
        )]
    );
    assert_eq!(
        calls_in(
            None,
            Some("Action: Call the 'api_tracking_for_pack_send' function with the reference number 'YZA890'."),
            &toolbench
        ),
        vec![("api_tracking_for_pack_send".to_string(), json!({"reference": "YZA890"}))]
    );
    // Claude 3: what it can do, announced with a colon as its last words; not when the
    // answer goes on.
    let calc = vec![tool("calculator", text_prop("expression"), &["expression"])];
    assert_eq!(
        calls_in(
            None,
            Some("That's wonderful! To figure out how many cats you have now, I can use the calculator tool:"),
            &calc
        ),
        vec![("calculator".to_string(), json!({}))]
    );
    for refused in [
        "I can use the calculator tool: it adds and multiplies numbers.",
        "If you like, I can use the calculator tool:",
    ] {
        assert!(calls_in(None, Some(refused), &calc).is_empty(), "{refused}");
    }
    // Claude 3's thinking: ready to call, with the value it stated.
    let wolfram = vec![tool(
        "wolfram_alpha",
        text_prop("search_query"),
        &["search_query"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some("<thinking>\nThe relevant tool is wolfram_alpha. The user's request directly provides the search query needed, which is \"square root of 1764\". So all the required parameters are available to make the API call.\n</thinking>"),
            &wolfram
        ),
        vec![("wolfram_alpha".to_string(), json!({"search_query": "square root of 1764"}))]
    );
    assert!(calls_in(
        None,
        Some("<thinking>\nThe relevant tool is wolfram_alpha, but I don't have the necessary information to make the API call.\n</thinking>\nWhat should I compute?"),
        &wolfram
    )
    .is_empty());
}

#[test]
fn bracketed_pseudo_markup_leaves_the_final_text() {
    let shell = vec![ToolSpec::new(
        "run",
        "Run a shell command.",
        json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
    )];
    let out = parse(
        None,
        Some("Sure.\n[Calling tool: run with arguments: {\"command\": \"ls\"}]\nDone soon."),
        &shell,
        &ParserConfig::default(),
    );
    assert_eq!(out.calls.len(), 1);
    assert_eq!(out.final_text.as_deref(), Some("Sure.\n\nDone soon."));
    // Prose that names the call stays: it is said to the user.
    let out = parse(
        None,
        Some("I'll run the command `ls` for you now."),
        &shell,
        &ParserConfig::default(),
    );
    assert_eq!(out.calls.len(), 1);
    assert_eq!(
        out.final_text.as_deref(),
        Some("I'll run the command `ls` for you now.")
    );
}

/// Found by a shake run: a value ending in a multibyte character three bytes from its
/// end ("m“ode") was trimmed of a joining word by byte offset and panicked.
#[test]
fn a_value_ending_in_a_wide_character_does_not_break_the_parser() {
    let replace = vec![ToolSpec::new(
        "Replace",
        "",
        json!({"type": "object", "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}}}),
    )];
    for text in [
        "we should use the Replace function in read-only m\u{201c}ode (by not changing its content).",
        "we should use the Replace function in read-only m\u{201c}ode and",
        "we should use the Replace function in read-only mode and",
    ] {
        let out = parse(None, Some(text), &replace, &ParserConfig::default());
        assert!(out.calls.len() <= 1, "{text}: {:?}", out.calls);
    }
}

#[test]
fn gerunds_in_any_script_do_not_break_the_parser() {
    // `က` ends in two equal bytes: undoubling must cut characters, not bytes.
    let shell = vec![ToolSpec::new(
        "run",
        "Run a shell command.",
        json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
    )];
    for text in [
        "Let me start by ကing the file.",
        "ကing everything now.",
        "We can do this by ßßing it.",
    ] {
        assert!(calls_in(None, Some(text), &shell).is_empty(), "{text}");
    }
}

#[test]
fn formats_and_prose_from_the_twelfth_consumed_part() {
    let none = || json!({});
    // DSPy's ReAct fields: the tool's name and its JSON arguments; `finish` ends the run.
    let flights = vec![
        tool("get_user_info", text_prop("name"), &["name"]),
        tool(
            "fetch_flight_info",
            json!({"origin": {"type": "string"}, "destination": {"type": "string"}}),
            &["origin"],
        ),
        tool("finish", none(), &[]),
    ];
    let dspy = |thought: &str, name: &str, args: &str| {
        format!("[[ ## next_thought ## ]]\n{thought}\n\n[[ ## next_tool_name ## ]]\n{name}\n\n[[ ## next_tool_args ## ]]\n{args}\n\n[[ ## completed ## ]]")
    };
    let step = dspy(
        "I have picked the flight. Now I need Adam's profile.",
        "get_user_info",
        "{\"name\": \"Adam\"}",
    );
    let out = parse(None, Some(&step), &flights, &ParserConfig::default());
    assert_eq!(
        out.calls
            .iter()
            .map(|c| (c.name.clone(), c.arguments.clone()))
            .collect::<Vec<_>>(),
        vec![("get_user_info".to_string(), json!({"name": "Adam"}))]
    );
    assert_eq!(out.final_text, None, "the fields are markup");
    // DSPy offers `finish` as a tool: naming it is a call. Where no such tool is offered,
    // it ends the run and the fields after it are no text for the user.
    let end = dspy("I have booked the flight for Adam.", "finish", "{}");
    assert_eq!(
        calls_in(None, Some(&end), &flights),
        vec![("finish".to_string(), none())]
    );
    let done = parse(None, Some(&end), &flights[..2], &ParserConfig::default());
    assert!(done.calls.is_empty() && done.done);
    assert_eq!(done.final_text, None);
    // A tool the fields name that is not offered is no call.
    assert!(calls_in(None, Some(&dspy("Book it.", "book_flight", "{}")), &flights).is_empty());

    // After the thinking, a question to the user or a signed-off answer: the model
    // answered instead of calling, however short.
    let temp = vec![tool("get_weather", text_prop("location"), &["location"])];
    let think = "<think>\nThe user wants the weather. I need to call the get_weather function, but the user gave no location.\n</think>\n\n";
    for answered in [
        "Could you please specify the location you'd like the weather for?",
        "The current temperature in Boulder is **14.8°C**. Let me know if you'd like a forecast!",
    ] {
        assert!(
            calls_in(None, Some(&format!("{think}{answered}")), &temp).is_empty(),
            "{answered}"
        );
    }
    // A preamble is not an answer.
    assert_eq!(
        calls_in(
            None,
            Some("<think>\nI should call get_weather for Paris.\n</think>\n\nLet me check that for you."),
            &temp
        ),
        vec![("get_weather".to_string(), json!({"location": "Paris"}))]
    );

    // Values stated by the property: "the location of "…"", "the concept of …"; an
    // adverb ("the location is fully specified") is no value.
    assert_eq!(
        calls_in(
            None,
            Some("<thinking>\nThe get_weather tool is relevant. The user has provided the location of \"San Francisco, CA\", so we have the necessary information to make the API call.\n</thinking>"),
            &temp
        ),
        vec![("get_weather".to_string(), json!({"location": "San Francisco, CA"}))]
    );
    assert_eq!(
        calls_in(
            None,
            Some("<thinking>\nThe get_weather tool has one required parameter:\n- location (string): The user has provided the location as \"Oslo\".\n\nThe location is fully specified. We can proceed with calling the get_weather tool.\n</thinking>"),
            &temp
        ),
        vec![("get_weather".to_string(), json!({"location": "Oslo"}))]
    );
    let concept = vec![tool("fetch_concept", text_prop("concept"), &["concept"])];
    assert_eq!(
        calls_in(
            None,
            Some("Okay, let me use the tool to fetch an expert explanation for the concept of distributed tracing."),
            &concept
        ),
        vec![("fetch_concept".to_string(), json!({"concept": "distributed tracing"}))]
    );

    // Handoffs to agents: the agent's noun picks the tool.
    let agents = vec![
        tool("research", text_prop("query"), &["query"]),
        ToolSpec::new(
            "transfer_to_summarizer",
            "Handoff to the Summarizer agent.",
            obj(none(), &[]),
        ),
        ToolSpec::new(
            "transfer_to_translator",
            "Handoff to the Translator agent.",
            obj(none(), &[]),
        ),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("After conducting thorough research, I'll hand this over to a specialized summarizer to consolidate the events for you."),
            &agents
        ),
        vec![("transfer_to_summarizer".to_string(), none())]
    );
    assert!(calls_in(
        None,
        Some("I can't hand this over to a summarizer, since you asked me to keep it."),
        &agents
    )
    .is_empty());

    // "use the available tools" / "two separate functions" with two tools offered.
    let pair = vec![
        tool("get_weather", text_prop("location"), &["location"]),
        tool("get_time", text_prop("location"), &["location"]),
    ];
    for both in [
        "I'd be happy to help with both the weather in New York and the time there. Let's use the available tools to get this information for you.",
        "To get the weather and current time in San Francisco, I'll need to use two separate functions. Let me fetch that data for you.",
    ] {
        let got: Vec<String> = calls_in(None, Some(both), &pair).into_iter().map(|c| c.0).collect();
        assert_eq!(got, vec!["get_weather", "get_time"], "{both}");
    }
    assert!(calls_in(
        None,
        Some("You could use the available tools to get the weather and the time."),
        &pair
    )
    .is_empty());

    // One call per name listed just before "each of these".
    let forecast = vec![tool(
        "get_current_weather",
        text_prop("location"),
        &["location"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some("<thinking>The User wants to know the current weather in two different cities: Seattle and San Francisco. I will use the available tool to get the current weather in each of these locations.</thinking>"),
            &forecast
        ),
        vec![
            ("get_current_weather".to_string(), json!({"location": "Seattle"})),
            ("get_current_weather".to_string(), json!({"location": "San Francisco"})),
        ]
    );

    // SQL agents: a plural noun, a pronoun for the noun just named, a gerund after
    // "move on to".
    let sql = vec![
        tool("list_tables", none(), &[]),
        tool("describe_table", text_prop("table_name"), &["table_name"]),
        tool("run_query", text_prop("sql"), &["sql"]),
    ];
    for (text, want) in [
        (
            "Now, I will describe these tables to understand their structure better.",
            ("describe_table", none()),
        ),
        (
            "To proceed, I first need to determine the tables in the database. Let me list them.",
            ("list_tables", none()),
        ),
        (
            "Let's move on to describing the `employees` table.",
            ("describe_table", json!({"table_name": "employees"})),
        ),
    ] {
        assert_eq!(
            calls_in(None, Some(text), &sql),
            vec![(want.0.to_string(), want.1)],
            "{text}"
        );
    }
    // "them" with no table named before is no list; describing as a subject is no call.
    assert!(calls_in(None, Some("The user likes cats. Let me list them."), &sql).is_empty());
    assert!(calls_in(
        None,
        Some("Describing the tables would take too long."),
        &sql
    )
    .is_empty());

    // The words of a name beside its concept tell one search from another, and the place
    // searched is not the query.
    let searches = vec![
        tool("DocumentSearchTool", text_prop("query"), &["query"]),
        tool(
            "Search the internet",
            text_prop("search_query"),
            &["search_query"],
        ),
    ];
    assert_eq!(
        calls_in(
            None,
            Some(
                "I will start by searching the document for information regarding the 2025 dates."
            ),
            &searches
        ),
        vec![(
            "DocumentSearchTool".to_string(),
            json!({"query": "information regarding the 2025 dates"})
        )]
    );
    assert_eq!(
        calls_in(
            None,
            Some("I will search the internet for the 2025 dates."),
            &searches
        ),
        vec![(
            "Search the internet".to_string(),
            json!({"search_query": "2025 dates"})
        )]
    );

    // The progressive reports what is being done; a progressive that is not the model's
    // is no call.
    let weather = vec![tool("get_weather", text_prop("city"), &["city"])];
    assert_eq!(
        calls_in(
            None,
            Some("I'm checking the weather in Sydney for you."),
            &weather
        ),
        vec![("get_weather".to_string(), json!({"city": "Sydney"}))]
    );
    assert!(calls_in(
        None,
        Some("You're checking the weather in Sydney, I see."),
        &weather
    )
    .is_empty());
    assert!(calls_in(
        None,
        Some("I'm not checking the weather in Sydney again."),
        &weather
    )
    .is_empty());

    // Between tools the words fit equally, the one whose argument the text states.
    let orders = vec![
        tool("get_order_by_id", text_prop("order_id"), &["order_id"]),
        tool(
            "get_customer_orders",
            text_prop("customer_id"),
            &["customer_id"],
        ),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("Your customer ID is C-1213210. Let me get your orders."),
            &orders
        ),
        vec![(
            "get_customer_orders".to_string(),
            json!({"customer_id": "C-1213210"})
        )]
    );
    assert_eq!(
        calls_in(
            None,
            Some("Your order ID is O-77. Let me get your order."),
            &orders
        ),
        vec![("get_order_by_id".to_string(), json!({"order_id": "O-77"}))]
    );
}

#[test]
fn plans_handoffs_and_nouns_from_the_thirteenth_consumed_part() {
    let none = || json!({});
    let names = |text: &str, tools: &[ToolSpec]| -> Vec<String> {
        calls_in(None, Some(text), tools)
            .into_iter()
            .map(|c| c.0)
            .collect()
    };
    // A plan in steps: a step after "then" whose arguments the text does not state waits
    // on the one before; a step with its own arguments does not.
    let sql = vec![
        tool("sql_db_query", text_prop("query"), &["query"]),
        tool("sql_db_schema", text_prop("table_names"), &["table_names"]),
        tool("sql_db_list_tables", none(), &[]),
    ];
    assert_eq!(
        names("I will first list the tables in the database, then I will query the schema of the most relevant tables.", &sql),
        vec!["sql_db_list_tables"]
    );
    assert_eq!(
        names("Let me list the tables. Then, once I have them, I can query the schema of the relevant ones.", &sql),
        vec!["sql_db_list_tables"]
    );
    // Joined by "and", both steps are meant now.
    assert_eq!(
        names(
            "I will list the tables in the database and query the schema of the Customer table.",
            &sql
        )
        .len(),
        2
    );
    let web = vec![
        tool("web_search", text_prop("query"), &["query"]),
        tool("read", text_prop("path"), &["path"]),
    ];
    assert_eq!(
        calls_in(None, Some("First we should search the web for \"gateway protocol\". After that we'll read docs/protocol.md."), &web),
        vec![
            ("web_search".to_string(), json!({"query": "gateway protocol"})),
            ("read".to_string(), json!({"path": "docs/protocol.md"})),
        ]
    );
    // "query" is a look-up verb: "query the schema" for `sql_db_schema`.
    assert_eq!(
        names("I will now query the schema of these tables.", &sql),
        vec!["sql_db_schema"]
    );

    // The action named as a noun after "proceed with the".
    let airline = vec![
        tool(
            "cancel_reservation",
            text_prop("reservation_id"),
            &["reservation_id"],
        ),
        tool(
            "get_reservation_details",
            text_prop("reservation_id"),
            &["reservation_id"],
        ),
    ];
    assert_eq!(
        calls_in(None, Some("It can be cancelled at any time. I will proceed with the cancellation of reservation ID FDZ0T5."), &airline),
        vec![("cancel_reservation".to_string(), json!({"reservation_id": "FDZ0T5"}))]
    );
    for not_now in [
        "The cancellation of reservation ID FDZ0T5 is not possible.",
        "I won't proceed with the cancellation of reservation ID FDZ0T5 unless you confirm.",
    ] {
        assert!(
            calls_in(None, Some(not_now), &airline).is_empty(),
            "{not_now}"
        );
    }

    // A subagent is the `Agent` tool; what it is spawned to do is no call of its own.
    let claude_code = vec![
        ToolSpec::new(
            "Agent",
            "Launch a new agent to handle a task.",
            obj(text_prop("prompt"), &["prompt"]),
        ),
        tool("mcp__local__fetch_weather", text_prop("city"), &["city"]),
    ];
    assert_eq!(
        names(
            "Sure! Let me first spawn a subagent to fetch New York's weather!",
            &claude_code
        ),
        vec!["Agent"]
    );
    assert_eq!(
        names("Let me fetch the weather in Oslo.", &claude_code),
        vec!["mcp__local__fetch_weather"]
    );
    assert!(calls_in(
        None,
        Some("A subagent was spawned earlier to fetch the weather."),
        &claude_code
    )
    .is_empty());

    // Calendars: an appointment is an event; checking the calendar lists it.
    let calendar = vec![
        tool("list_calendar_events", text_prop("date"), &["date"]),
        tool(
            "create_calendar_event",
            json!({"start": {"type": "string"}, "duration": {"type": "integer"}}),
            &["start"],
        ),
    ];
    assert_eq!(
        names("The user has a free slot from 10:00. I will now create an hour-long appointment for this time slot.", &calendar),
        vec!["create_calendar_event"]
    );
    assert_eq!(
        names("I will first check the user's calendar for 23/05/2024 to see if there are free slots. I will then create an hour-long appointment for the first free slot.", &calendar),
        vec!["list_calendar_events"]
    );
    assert!(calls_in(
        None,
        Some("Your calendar has an appointment at 10:00 already."),
        &calendar
    )
    .is_empty());
}

#[test]
fn formats_and_offers_from_the_fourteenth_consumed_part() {
    let weather = vec![
        tool("get_weather", text_prop("location"), &["location"]),
        tool("tell_joke", json!({}), &[]),
    ];
    let paris = vec![(
        "get_weather".to_string(),
        json!({"location": "Paris, France"}),
    )];
    // Mistral's tokens with their closing brackets stripped by the provider.
    assert_eq!(
        calls_in(
            None,
            Some("[TOOL_CALLSget_weather[ARGS{\"location\": \"Paris, France\"}"),
            &weather
        ),
        paris
    );
    // GLM's markup after an answer, behind another token: the call, and the answer stays.
    let glm = "Why don't cats play poker? Too many cheetahs!\n<|begin_of_box|>get_weather\n<arg_key>location</arg_key>\n<arg_value>Paris, France</arg_value>\n</tool_call>";
    let out = parse(None, Some(glm), &weather, &ParserConfig::default());
    assert_eq!(
        out.calls
            .iter()
            .map(|c| (c.name.clone(), c.arguments.clone()))
            .collect::<Vec<_>>(),
        paris
    );
    assert_eq!(
        out.final_text.as_deref(),
        Some("Why don't cats play poker? Too many cheetahs!")
    );
    // A name before `<arg_key>` that is no offered tool is no call.
    assert!(calls_in(None, Some("Done.\n<|begin_of_box|>get_time\n<arg_key>location</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>"), &weather).is_empty());

    // ModelScope-Agent: `{"api_name", "parameters"}` between think tokens, which leave
    // the text with the call.
    let speech = vec![tool(
        "modelscope_speech-generation",
        json!({"input": {"type": "string"}, "gender": {"type": "string"}}),
        &["input"],
    )];
    let ms = "AI changes life.\n<|startofthink|>```JSON\n{\n   \"api_name\": \"modelscope_speech-generation\",\n   \"parameters\": {\"input\": \"AI changes life.\", \"gender\": \"man\"}\n}\n```<|endofthink|>\n";
    let out = parse(None, Some(ms), &speech, &ParserConfig::default());
    assert_eq!(
        out.calls
            .iter()
            .map(|c| (c.name.clone(), c.arguments.clone()))
            .collect::<Vec<_>>(),
        vec![(
            "modelscope_speech-generation".to_string(),
            json!({"input": "AI changes life.", "gender": "man"})
        )]
    );
    assert_eq!(out.final_text.as_deref(), Some("AI changes life."));
    // An `api_name` that is not offered is no call.
    assert!(calls_in(
        None,
        Some("{\"api_name\": \"speech\", \"parameters\": {\"input\": \"x\"}}"),
        &speech
    )
    .is_empty());

    // Arithmetic written as a JSON value is worked out; text inside strings is left alone.
    let hypot = vec![tool(
        "math.hypot",
        json!({"x": {"type": "number"}, "y": {"type": "number"}, "note": {"type": "string"}}),
        &["x", "y"],
    )];
    assert_eq!(
        calls_in(None, Some("<tool_call>\n{\"name\": \"math.hypot\", \"arguments\": {\"x\": 10 - 5, \"y\": 15 - 7, \"note\": \"ratio: 3 - 1\"}}\n</tool_call>"), &hypot),
        vec![("math.hypot".to_string(), json!({"x": 5, "y": 8, "note": "ratio: 3 - 1"}))]
    );

    // A verb only the description gives ("Search web and save results to files": "save",
    // "create") needs a noun of the tool to call it.
    let research = vec![
        ToolSpec::new(
            "tavily_search",
            "Search web and save detailed results to files.",
            obj(text_prop("query"), &["query"]),
        ),
        ToolSpec::new(
            "write_todos",
            "Create or update the TODO list.",
            obj(json!({"todos": {"type": "array"}}), &["todos"]),
        ),
    ];
    assert!(calls_in(
        None,
        Some("Let me start by creating a research plan."),
        &research
    )
    .is_empty());
    assert_eq!(
        calls_in(
            None,
            Some("Let me start by searching the web for \"MCP\"."),
            &research
        ),
        vec![("tavily_search".to_string(), json!({"query": "MCP"}))]
    );

    // An offer to the reader ("if you'd like") is no call; the same words without it are.
    let one = vec![tool("get_weather", text_prop("location"), &["location"])];
    assert!(calls_in(None, Some("I can't tell jokes right now, but I can help you find the weather in your area if you'd like!"), &one).is_empty());
    assert_eq!(
        calls_in(None, Some("Let me find the weather in Oslo."), &one),
        vec![("get_weather".to_string(), json!({"location": "Oslo"}))]
    );

    // "Invoice #382" is the invoice's id; a date's numbers are no arguments.
    let employee = vec![tool(
        "get_employee_by_invoice_and_customer",
        json!({"invoice_id": {"type": "integer"}, "customer_id": {"type": "integer"}}),
        &["invoice_id", "customer_id"],
    )];
    assert_eq!(
        calls_in(None, Some("Your most recent invoice is Invoice #382 from August 7, 2025. Now let me find out which employee assisted you with this invoice."), &employee),
        vec![("get_employee_by_invoice_and_customer".to_string(), json!({"invoice_id": 382}))]
    );
    assert_eq!(
        calls_in(None, Some("Your invoice is from August 7, 2025. Now let me find out which employee assisted you with this invoice."), &employee),
        vec![("get_employee_by_invoice_and_customer".to_string(), json!({}))]
    );
    // Two plain numbers are still read in order.
    assert_eq!(
        calls_in(
            None,
            Some("Let me find out which employee assisted you with invoice 382 of customer 17."),
            &employee
        ),
        vec![(
            "get_employee_by_invoice_and_customer".to_string(),
            json!({"invoice_id": 382, "customer_id": 17})
        )]
    );

    // "using both available tools" with two tools: both, though the verb fits one.
    let halves = vec![
        tool("read_file_head", text_prop("path"), &["path"]),
        tool("read_file_tail", text_prop("path"), &["path"]),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("I'll read the file using both available tools."),
            &halves
        )
        .into_iter()
        .map(|c| c.0)
        .collect::<Vec<_>>(),
        vec!["read_file_head", "read_file_tail"]
    );
}

#[test]
fn call_lines_and_instruments_from_the_fifteenth_consumed_part() {
    // Lines that are nothing but pythonic calls, after prose or a heading, bold or in
    // backticks (BFCL dumps).
    let bird = vec![
        tool(
            "identify_bird",
            json!({"color": {"type": "string"}, "size": {"type": "string"}}),
            &["color"],
        ),
        tool(
            "concert.find_details",
            json!({"artist": {"type": "string"}, "month": {"type": "string"}}),
            &["artist"],
        ),
    ];
    for (text, want) in [
        (
            "### Feedback from the validator:\n\n* The `size` should be 'medium'.\n\n## Corrected function call:\n\n[identify_bird(color='green', size='medium')]",
            vec![("identify_bird", json!({"color": "green", "size": "medium"}))],
        ),
        (
            "**Function Calling Response**: \nidentify_bird(color=\"red\")\nconcert.find_details(artist=\"The Weeknd\", month=\"December\")",
            vec![
                ("identify_bird", json!({"color": "red"})),
                ("concert.find_details", json!({"artist": "The Weeknd", "month": "December"})),
            ],
        ),
        (
            "**identify_bird(color='blue')**\n`concert.find_details(artist='Adele')`",
            vec![
                ("identify_bird", json!({"color": "blue"})),
                ("concert.find_details", json!({"artist": "Adele"})),
            ],
        ),
    ] {
        let got = calls_in(None, Some(text), &bird);
        let want: Vec<(String, Value)> = want.into_iter().map(|(n, a)| (n.to_string(), a)).collect();
        assert_eq!(got, want, "{text}");
    }
    // Not calls: shown as an example, a name not offered, positional arguments in prose.
    for text in [
        "You can call it like this, for example:\n\n`identify_bird(color='green')`",
        "The fix is simple.\n\nprint(color='green')",
        "The result was computed.\n\nidentify_bird('green')",
    ] {
        assert!(calls_in(None, Some(text), &bird).is_empty(), "{text}");
    }

    // The tool named as the instrument, not the one the verb suggests.
    let research = vec![
        tool("web_search", text_prop("query"), &["query"]),
        tool("arxiv", text_prop("query"), &["query"]),
    ];
    assert_eq!(
        calls_in(None, Some("Thought: I will now search for scientific papers related to alien life using the arxiv tool."), &research)
            .into_iter()
            .map(|c| c.0)
            .collect::<Vec<_>>(),
        vec!["arxiv"]
    );
    assert_eq!(
        calls_in(
            None,
            Some("I will now search for \"alien life\" causing the arxiv tool to wait."),
            &research
        )
        .into_iter()
        .map(|c| c.0)
        .collect::<Vec<_>>()
        .first()
        .map(String::as_str),
        Some("web_search")
    );

    // "the need to" is a noun: what the question implies is no commitment.
    let nearby = vec![tool(
        "restaurant.find_nearby",
        json!({"location": {"type": "string"}, "dietary_preference": {"type": "string"}}),
        &["location"],
    )];
    assert!(calls_in(None, Some("The user question implies the need to find nearby restaurants with a specific dietary preference, which in this case is \"Vegan\"."), &nearby).is_empty());

    // A count before a numeric property's name; not for a text property.
    let hotel = vec![tool(
        "create_reservation",
        json!({"guests": {"type": "integer"}, "rooms": {"type": "string"}}),
        &["guests"],
    )];
    assert_eq!(
        calls_in(None, Some("Now I can create the reservation for you: a Family Room for four guests and two rooms."), &hotel),
        vec![("create_reservation".to_string(), json!({"guests": 4}))]
    );

    // `{"tool_call": {"action": NAME, "parameters": {…}}}` in a `tool_code` fence.
    let cars = vec![tool(
        "search_vehicles",
        json!({"vehicle_type": {"type": "string"}, "max_price": {"type": "number"}}),
        &[],
    )];
    assert_eq!(
        calls_in(None, Some("Let me check our inventory.\n\n```tool_code\n{\n  \"tool_call\": {\n    \"action\": \"search_vehicles\",\n    \"parameters\": {\"vehicle_type\": \"SUV\", \"max_price\": 25000}\n  }\n}\n```"), &cars),
        vec![("search_vehicles".to_string(), json!({"vehicle_type": "SUV", "max_price": 25000}))]
    );
}

#[test]
fn agent_formats_from_the_sixteenth_consumed_part() {
    // MINT: the tool's call inside `<execute>` code, `print` around it ignored.
    let wiki = vec![tool("wikipedia_search", text_prop("query"), &["query"])];
    assert_eq!(
        calls_in(None, Some("Assistant:\n<thought> I'm going to search for John Ericsson's death date. </thought>\n<execute> print(wikipedia_search('John Ericsson')) </execute>"), &wiki),
        vec![("wikipedia_search".to_string(), json!({"query": "John Ericsson"}))]
    );
    assert!(calls_in(
        None,
        Some("<execute> print(len('John Ericsson')) </execute>"),
        &wiki
    )
    .is_empty());

    // AutoGPT: the `command` object; a `command` string stays an exec tool's argument.
    let autogpt = vec![
        tool(
            "browse_website",
            json!({"url": {"type": "string"}, "question": {"type": "string"}}),
            &["url"],
        ),
        tool("exec", text_prop("command"), &["command"]),
    ];
    assert_eq!(
        calls_in(None, Some("{\n  \"thoughts\": {\"text\": \"I will use the browse_website command.\", \"plan\": \"- browse\"},\n  \"command\": {\"name\": \"browse_website\", \"args\": {\"url\": \"http://books.toscrape.com/\", \"question\": \"What is the price?\"}}\n}"), &autogpt),
        vec![("browse_website".to_string(), json!({"url": "http://books.toscrape.com/", "question": "What is the price?"}))]
    );
    assert_eq!(
        calls_in(
            None,
            Some("{\"name\": \"exec\", \"command\": \"ls -la\"}"),
            &autogpt
        ),
        vec![("exec".to_string(), json!({"command": "ls -la"}))]
    );

    // WebShop: the whole answer `NAME[argument]` for an offered tool; not inside prose,
    // not for a name that is not offered.
    let shop = vec![
        tool("search", text_prop("query"), &["query"]),
        tool("click", text_prop("element"), &["element"]),
    ];
    assert_eq!(
        calls_in(None, Some("search[kids toothbrush 6 to 12]"), &shop),
        vec![(
            "search".to_string(),
            json!({"query": "kids toothbrush 6 to 12"})
        )]
    );
    assert_eq!(
        calls_in(None, Some("click[Buy Now]"), &shop),
        vec![("click".to_string(), json!({"element": "Buy Now"}))]
    );
    assert!(calls_in(None, Some("think[I should buy the cheaper one]"), &shop).is_empty());

    // AutoCodeRover: list items that open with a call in backticks, explained after it.
    let acr = vec![
        tool("search_class", text_prop("class_name"), &["class_name"]),
        tool(
            "search_method_in_class",
            json!({"method_name": {"type": "string"}, "class_name": {"type": "string"}}),
            &["method_name", "class_name"],
        ),
    ];
    assert_eq!(
        calls_in(None, Some("Therefore, the following API calls will be made:\n\n1. `search_class(\"Sitemap\")`: This will help us understand the class.\n\n2. `search_method_in_class(\"items\", \"Sitemap\")`: This gives the method."), &acr),
        vec![
            ("search_class".to_string(), json!({"class_name": "Sitemap"})),
            ("search_method_in_class".to_string(), json!({"method_name": "items", "class_name": "Sitemap"})),
        ]
    );
    // Shown as an example, or a call in backticks in the middle of a sentence: no call.
    assert!(calls_in(
        None,
        Some("For example, you could write:\n\n1. `search_class(\"Sitemap\")`: finds the class."),
        &acr
    )
    .is_empty());
    assert!(calls_in(
        None,
        Some("1. The result of `search_class(\"Sitemap\")` shows the class has no items."),
        &acr
    )
    .is_empty());
}

#[test]
fn closings_ids_and_tags_from_the_seventeenth_consumed_part() {
    // A closing "let me do that": the tool the text before names, else the only one.
    let time_and_kb = vec![
        tool("current_time", text_prop("timezone"), &[]),
        tool("weather", json!({}), &[]),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("I can look up the current time for you. Let me do that right away."),
            &time_and_kb
        ),
        vec![("current_time".to_string(), json!({}))]
    );
    assert_eq!(
        calls_in(
            None,
            Some(
                "Happy to check the weather for you today. Let me fetch that information for you."
            ),
            &time_and_kb
        ),
        vec![("weather".to_string(), json!({}))]
    );
    let web = vec![ToolSpec::new(
        "websearch",
        "Search the web to get updated information.",
        obj(text_prop("keywords"), &["keywords"]),
    )];
    assert_eq!(
        calls_in(
            None,
            Some(
                "A dish with leeks and beans sounds good! Let me search for some options for you."
            ),
            &web
        ),
        vec![("websearch".to_string(), json!({}))]
    );
    // Not the last words, checking its own sums, two tools and neither named, or a verb
    // the tool does not have: no call.
    assert!(calls_in(
        None,
        Some("Let me do that for you. Here is the answer: 42."),
        &web
    )
    .is_empty());
    assert!(calls_in(
        None,
        Some("17 * 23 is 391. Wait, let me check that again."),
        &web
    )
    .is_empty());
    assert!(calls_in(
        None,
        Some("Sure thing. Let me do that right away."),
        &time_and_kb
    )
    .is_empty());
    let calc = vec![tool("calculator", text_prop("expression"), &["expression"])];
    assert!(calls_in(
        None,
        Some("Recipes with leeks! Let me search for some options."),
        &calc
    )
    .is_empty());

    // A text that ends by asking the user: what it planned waits on the answer.
    let maps = vec![tool(
        "maps_shortest_path",
        json!({"start_location": {"type": "string"}, "end_location": {"type": "string"}}),
        &["start_location", "end_location"],
    )];
    assert!(calls_in(None, Some("Once I have your address, I will use the `maps_shortest_path` function to find the route to the museum.\n\nPlease provide the address of your home so I can proceed."), &maps).is_empty());
    assert!(calls_in(None, Some("Next, I will use the `maps_shortest_path` function from Union Square to the museum. Would 7:30 PM work for you?"), &maps).is_empty());
    // (A question the model asks itself does not end the turn.)
    assert_eq!(
        calls_in(None, Some("I will use the `maps_shortest_path` function with start_location \"Union Square\" and end_location \"MoMA\". Is that the fastest?"), &maps),
        vec![("maps_shortest_path".to_string(), json!({"start_location": "Union Square", "end_location": "MoMA"}))]
    );

    // A bare "ID" is the id of the one thing the tool takes an id of.
    let hotel = vec![
        tool(
            "retrieve_hotel_booking",
            json!({"booking_id": {"type": "integer"}}),
            &["booking_id"],
        ),
        tool(
            "cancel_hotel_booking",
            json!({"booking_id": {"type": "integer"}}),
            &["booking_id"],
        ),
    ];
    assert_eq!(
        calls_in(None, Some("<thinking> The user wants to cancel a hotel booking with the ID 193. I will use the `cancel_hotel_booking` tool to cancel the booking. </thinking>"), &hotel),
        vec![("cancel_hotel_booking".to_string(), json!({"booking_id": 193}))]
    );
    // (Another thing's id is not the booking's; two id properties leave it unsure.)
    let two_ids = vec![tool(
        "move_booking",
        json!({"booking_id": {"type": "integer"}, "room_id": {"type": "integer"}}),
        &["booking_id", "room_id"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some("The booking with the ID 193 should move. I will use the `move_booking` tool."),
            &two_ids
        ),
        vec![("move_booking".to_string(), json!({}))]
    );
    assert_eq!(
        calls_in(None, Some("The user with ID 7 owns booking 12. I will use the `retrieve_hotel_booking` tool for booking 12."), &hotel[..1]),
        vec![("retrieve_hotel_booking".to_string(), json!({"booking_id": 12}))]
    );

    // A name of several words as the object of "use".
    let assistants = vec![
        tool("structured_data_assistant", text_prop("query"), &["query"]),
        tool(
            "unstructured_data_assistant",
            text_prop("query"),
            &["query"],
        ),
    ];
    assert_eq!(
        calls_in(None, Some("This needs numbers, so I'll use the structured data assistant to retrieve this information."), &assistants),
        vec![("structured_data_assistant".to_string(), json!({}))]
    );
    assert!(calls_in(
        None,
        Some("The structured data assistant answered with the totals."),
        &assistants
    )
    .is_empty());

    // ReAct's fields written as tags; `key: value` input goes to the property it names.
    let react = vec![
        tool("Search", text_prop("question"), &["question"]),
        tool("Calculator", text_prop("question"), &["question"]),
    ];
    assert_eq!(
        calls_in(None, Some("<thought>Now I need pi times the square root of 64.</thought>\n<action>Calculator</action>\n<action_input>pi * sqrt(64)</action_input>"), &react),
        vec![("Calculator".to_string(), json!({"question": "pi * sqrt(64)"}))]
    );
    assert_eq!(
        calls_in(None, Some("<action>Calculator</action>\n<action_input>question: What is the square root of 9.87?</action_input>"), &react),
        vec![("Calculator".to_string(), json!({"question": "What is the square root of 9.87?"}))]
    );
    assert!(calls_in(
        None,
        Some("<action>Browse</action>\n<action_input>example.com</action_input>"),
        &react
    )
    .is_empty());

    // Pythonic calls with an apostrophe the model did not escape.
    let movies = vec![tool(
        "get_movie_rating",
        text_prop("movie_name"),
        &["movie_name"],
    )];
    assert_eq!(
        calls_in(None, Some("get_movie_rating(movie_name='Heat'); get_movie_rating(movie_name='Schindler's List'); get_movie_rating(movie_name='Alien');"), &movies),
        vec![
            ("get_movie_rating".to_string(), json!({"movie_name": "Heat"})),
            ("get_movie_rating".to_string(), json!({"movie_name": "Schindler's List"})),
            ("get_movie_rating".to_string(), json!({"movie_name": "Alien"})),
        ]
    );
    assert_eq!(
        calls_in(None, Some("get_movie_rating(movie_name='It''s')"), &movies),
        Vec::<(String, Value)>::new()
    );
}

#[test]
fn colons_containers_and_past_blocks_from_the_eighteenth_consumed_part() {
    // A closing colon after a commitment: the call it announces follows.
    let py = vec![tool("execute_python", text_prop("code"), &["code"])];
    assert_eq!(
        calls_in(None, Some("I'll find the largest prime below 84. To do this, I'll write code.\n\nLet me implement this:"), &py),
        vec![("execute_python".to_string(), json!({}))]
    );
    // (Its own words announced, or not the last words: no call.)
    assert!(calls_in(None, Some("Okay, let's break this down step-by-step:"), &py).is_empty());
    assert!(calls_in(None, Some("Let me explain the approach:"), &py).is_empty());
    assert!(calls_in(
        None,
        Some("Let me implement this:\n\nprimes = [p for p in range(84)]"),
        &py
    )
    .is_empty());
    // Among several tools: the shell, for what a shell does and no other tool does.
    let coding = vec![
        tool("Bash", text_prop("command"), &["command"]),
        tool("Read", text_prop("file_path"), &["file_path"]),
        tool("WebSearch", text_prop("query"), &["query"]),
    ];
    assert_eq!(
        calls_in(None, Some("Great! Now let me copy the XML file:"), &coding),
        vec![("Bash".to_string(), json!({}))]
    );
    assert!(calls_in(None, Some("Now let me think about the XML file:"), &coding).is_empty());
    // (A wide quote mark opening the line does not break the parser.)
    assert_eq!(
        calls_in(
            None,
            Some("Done.\n\u{201C}Now let me copy the XML file:"),
            &coding
        ),
        vec![("Bash".to_string(), json!({}))]
    );
    let with_delete = vec![
        tool("Bash", text_prop("command"), &["command"]),
        tool("delete_file", text_prop("path"), &["path"]),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("Now let me delete the old build output:"),
            &with_delete
        ),
        Vec::<(String, Value)>::new()
    );

    // "the ruby channel": a container's name before its kind; "pull" looks things up.
    let chat = vec![tool("list_messages", text_prop("channel"), &["channel"])];
    assert_eq!(
        calls_in(
            None,
            Some("I'll pull the messages from the ruby channel for you."),
            &chat
        ),
        vec![("list_messages".to_string(), json!({"channel": "ruby"}))]
    );
    assert_eq!(
        calls_in(
            None,
            Some("I'll pull the messages from the same channel for you."),
            &chat
        ),
        vec![("list_messages".to_string(), json!({}))]
    );

    // A value in brackets after its key; a type in brackets is no value.
    let ids = vec![tool(
        "unique_id",
        json!({"firstName": {"type": "string"}, "lastName": {"type": "string"}}),
        &["firstName", "lastName"],
    )];
    assert_eq!(
        calls_in(None, Some("<thinking>\nThe unique_id tool needs:\n- firstName (string)\n- lastName (string)\nThey gave their first name (Alex) and last name (Yang), so we can call the unique_id tool.\n</thinking>"), &ids),
        vec![("unique_id".to_string(), json!({"firstName": "Alex", "lastName": "Yang"}))]
    );
    // "with the city name": what the value is, not the value.
    let weather = vec![tool("get_weather", text_prop("city"), &["city"])];
    assert_eq!(
        calls_in(Some("So I need to call that function with \"New York\" as the city. I should format the JSON with the city name."), None, &weather),
        vec![("get_weather".to_string(), json!({"city": "New York"}))]
    );

    // A failure reported is no call; a retry of what failed is.
    let shell = vec![tool(
        "execute_shell",
        text_prop("command_line"),
        &["command_line"],
    )];
    assert!(calls_in(None, Some("Running the 'execute_shell' command failed because I am not authorized to run shell commands"), &shell).is_empty());
    assert_eq!(
        calls_in(
            None,
            Some("I'll run `ls -la` again with execute_shell, the command that failed."),
            &shell
        ),
        vec![(
            "execute_shell".to_string(),
            json!({"command_line": "ls -la"})
        )]
    );

    // A JSON call shown as made, or as what it would do, is not made now.
    let stops = vec![
        tool("get_bus_stops", text_prop("route"), &[]),
        tool("get_services", text_prop("categories"), &[]),
    ];
    assert!(calls_in(None, Some("Here are the results.\n\nThe function call was:\n```json\n{\"function_call\": {\"name\": \"get_bus_stops\", \"arguments\": {\"route\": \"55\"}}}\n```\nNo bus stops were found."), &stops).is_empty());
    assert_eq!(
        calls_in(None, Some("Let's start with the stops.\n```json\n{\"function_call\": {\"name\": \"get_bus_stops\", \"arguments\": {\"route\": \"55\"}}}\n```\nNext, I would search for banks using the `get_services` tool.\n```json\n{\"function_call\": {\"name\": \"get_services\", \"arguments\": {\"categories\": \"Bank\"}}}\n```"), &stops),
        vec![("get_bus_stops".to_string(), json!({"route": "55"}))]
    );
    assert_eq!(
        calls_in(None, Some("I would like to look up the stops.\n```json\n{\"function_call\": {\"name\": \"get_bus_stops\", \"arguments\": {\"route\": \"55\"}}}\n```"), &stops),
        vec![("get_bus_stops".to_string(), json!({"route": "55"}))]
    );

    // A lone key the tool does not have: a generic one (`input`) is its main argument;
    // one with a meaning of its own is not renamed to another property.
    let two = vec![tool(
        "get_bus_stops",
        json!({"route": {"type": "string"}, "geometry": {"type": "string"}}),
        &["route"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some(
                "{\"name\": \"get_bus_stops\", \"arguments\": {\"busStopName\": \"Santa Marta\"}}"
            ),
            &two
        ),
        vec![(
            "get_bus_stops".to_string(),
            json!({"busStopName": "Santa Marta"})
        )]
    );
    assert_eq!(
        calls_in(
            None,
            Some("{\"name\": \"get_bus_stops\", \"arguments\": {\"input\": \"55\"}}"),
            &two
        ),
        vec![("get_bus_stops".to_string(), json!({"route": "55"}))]
    );

    // A self-closing function tag: the call without arguments.
    let agencies = vec![tool("get_agencies", json!({}), &[])];
    assert_eq!(
        calls_in(None, Some("<function=get_agencies />"), &agencies),
        vec![("get_agencies".to_string(), json!({}))]
    );
    assert!(calls_in(None, Some("<function=get_routes />"), &agencies).is_empty());
}

#[test]
fn retries_interpreters_and_abbreviations_from_the_nineteenth_consumed_part() {
    // A retry, with one tool offered: that tool again (and a place it names).
    let rng = vec![tool(
        "RandomNumberGenerator_generate",
        json!({"decimals": {"type": "integer"}}),
        &[],
    )];
    assert_eq!(
        calls_in(None, Some("The generated number is 0. Since you asked for 1 to 10, let's try again to ensure it falls within the range."), &rng),
        vec![("RandomNumberGenerator_generate".to_string(), json!({}))]
    );
    let weather = vec![tool("get_weather", text_prop("city"), &["city"])];
    assert_eq!(
        calls_in(None, Some("I apologize for the error. Let me try checking the weather in San Francisco again."), &weather),
        vec![("get_weather".to_string(), json!({"city": "San Francisco"}))]
    );
    // (Another approach is not the same call; the reader asked to retry is not a call.)
    assert!(calls_in(
        None,
        Some("That did not work. Let me try again using a different approach."),
        &rng
    )
    .is_empty());
    assert!(calls_in(
        None,
        Some("The service is down. Could you try again in a moment?"),
        &rng
    )
    .is_empty());

    // The sentence's full stop inside the quotes is not part of the value.
    let words = vec![tool("get_number_for_word", text_prop("word"), &["word"])];
    assert_eq!(
        calls_in(
            None,
            Some("I will check the number assigned to the word \"banana.\""),
            &words
        ),
        vec![("get_number_for_word".to_string(), json!({"word": "banana"}))]
    );
    assert_eq!(
        calls_in(
            None,
            Some("I will check the number assigned to the word `v1.`"),
            &words
        ),
        vec![("get_number_for_word".to_string(), json!({"word": "v1."}))]
    );

    // "the subdirectory `roast`": a bare name after a directory noun is a path; a name
    // abbreviated in the tool (`list_dir`) is spelled out in prose.
    let files = vec![
        tool("grep", text_prop("string"), &["string"]),
        ToolSpec::new(
            "read_file",
            "Read a file. (If the path is a directory, list the contents.)",
            obj(text_prop("path"), &["path"]),
        ),
    ];
    assert_eq!(
        calls_in(None, Some("The grep attempts have failed. I will attempt to read the contents of the subdirectory `roast` to find any Ruby files there."), &files),
        vec![("read_file".to_string(), json!({"path": "roast"}))]
    );
    let dirs = vec![
        ToolSpec::new(
            "list_dir",
            "List the contents of a directory",
            obj(
                text_prop("relative_workspace_path"),
                &["relative_workspace_path"],
            ),
        ),
        tool("run_terminal_cmd", text_prop("command"), &["command"]),
    ];
    assert_eq!(
        calls_in(None, Some("Let's start by checking the project. I'll list the contents of your project directory to see if there's a `.git` folder."), &dirs),
        vec![("list_dir".to_string(), json!({}))]
    );
    // A request to the user anywhere in the last sentence ends the turn.
    assert!(calls_in(None, Some("Next, I'll list the contents of your project directory. If you have the CLI, please provide the name of the new repository."), &dirs).is_empty());
    // A closing colon with the shell's work after "by".
    assert_eq!(
        calls_in(
            None,
            Some("Now let me verify the implementation by running the golden tests:"),
            &dirs
        ),
        vec![("run_terminal_cmd".to_string(), json!({}))]
    );

    // A python block ending the answer, for the one code interpreter offered.
    let py = vec![tool("python", text_prop("code"), &["code"])];
    assert_eq!(
        calls_in(None, Some("Let's compute 10! using Python.\n```python\nimport math\nprint(math.factorial(10))\n```"), &py),
        vec![("python".to_string(), json!({"code": "import math\nprint(math.factorial(10))"}))]
    );
    assert_eq!(
        calls_in(None, Some("好的，我会为您列出100以内的所有质数。\n```python\nprint([p for p in range(2, 101) if all(p % d for d in range(2, p))])\n```"), &py),
        vec![("python".to_string(), json!({"code": "print([p for p in range(2, 101) if all(p % d for d in range(2, p))])"}))]
    );
    // (Shown to the reader, or followed by more text, or no interpreter offered: no call.)
    assert!(calls_in(
        None,
        Some("You can compute it yourself:\n```python\nprint(3 * 7)\n```"),
        &py
    )
    .is_empty());
    assert!(calls_in(
        None,
        Some("Let's compute it.\n```python\nprint(3 * 7)\n```\nThe answer is 21."),
        &py
    )
    .is_empty());
    assert!(calls_in(
        None,
        Some("Let's compute it.\n```python\nprint(3 * 7)\n```"),
        &weather
    )
    .is_empty());

    // Pythonic tuples are lists; Qwen-Agent's ✿FUNCTION✿ / ✿ARGS✿ lines are calls.
    let rand = vec![tool(
        "random_number_generator",
        json!({"seed": {"type": "integer"}, "range": {"type": "array"}}),
        &["seed", "range"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some("random_number_generator\n```python\ntool_call(seed=42, range=(0, 100))\n```"),
            &rand
        ),
        vec![(
            "random_number_generator".to_string(),
            json!({"seed": 42, "range": [0, 100]})
        )]
    );
    let gen = vec![tool("my_image_gen", text_prop("prompt"), &["prompt"])];
    assert_eq!(
        calls_in(None, Some("\u{273F}FUNCTION\u{273F}: my_image_gen\n\u{273F}ARGS\u{273F}: {\"prompt\": \"a puppy on the grass\"}"), &gen),
        vec![("my_image_gen".to_string(), json!({"prompt": "a puppy on the grass"}))]
    );
    assert!(calls_in(
        None,
        Some("\u{273F}FUNCTION\u{273F}: draw_map\n\u{273F}ARGS\u{273F}: {\"prompt\": \"x\"}"),
        &gen
    )
    .is_empty());
}

#[test]
fn made_things_names_and_status_lines_from_the_twentieth_consumed_part() {
    // A tool that makes a thing of its own needs that thing named: "create a file" or
    // "output the word" makes no goal.
    let goals = vec![
        tool("create_goal", text_prop("goal"), &["goal"]),
        tool("get_goal", json!({}), &[]),
        tool("web_search", text_prop("query"), &["query"]),
    ];
    assert!(calls_in(Some("The steps are:\n1. Create a file named `agent_loop.txt` with the content \"agent loop ready\".\n2. Output the word \"done\"."), None, &goals).is_empty());
    assert_eq!(
        calls_in(
            None,
            Some("I'll create a goal named \"ship the release\"."),
            &goals
        ),
        vec![(
            "create_goal".to_string(),
            json!({"goal": "ship the release"})
        )]
    );
    // (A kin word names it too: an appointment is a calendar event.)
    let cal = vec![tool("create_calendar_event", text_prop("time"), &[])];
    assert_eq!(
        calls_in(None, Some("The calendar is free from 10:00. I will now create an hour-long appointment for this slot."), &cal),
        vec![("create_calendar_event".to_string(), json!({}))]
    );
    // One of a list of names with what they are for is no call.
    assert!(calls_in(
        Some(
            "Looking at the tools:\n- `get_goal`, `create_goal`: For managing goals. Not relevant."
        ),
        None,
        &goals
    )
    .is_empty());

    // `named "X"` is the thing's name; an id is one token.
    let projects = vec![
        tool(
            "create_project",
            json!({"name": {"type": "string"}, "description": {"type": "string"}}),
            &["name"],
        ),
        tool("get_project", text_prop("id"), &["id"]),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("First, I'll create a project named \"Dark Mode Feature\"."),
            &projects
        ),
        vec![(
            "create_project".to_string(),
            json!({"name": "Dark Mode Feature"})
        )]
    );
    assert_eq!(
        calls_in(
            None,
            Some("I need to get the project \"Implement User Notifications\" first, using its id."),
            &projects
        ),
        vec![("get_project".to_string(), json!({}))]
    );

    // A shell tool's own name is not its command.
    let codex = vec![
        tool("exec_command", text_prop("cmd"), &["cmd"]),
        tool("update_plan", text_prop("plan"), &["plan"]),
    ];
    assert_eq!(
        calls_in(Some("I will execute the three requested steps sequentially using the `exec_command` tool."), None, &codex),
        vec![("exec_command".to_string(), json!({}))]
    );

    // A coding agent's status line whose work is the shell's.
    let cursor = vec![
        tool("run_terminal_cmd", text_prop("command"), &["command"]),
        tool("read_file", text_prop("target_file"), &["target_file"]),
    ];
    for line in [
        "Checking git history to locate the commit and determine the best way to update its author.",
        "Amending the commit to update the author:",
        "Continuing the rebase:",
        "Installing the dependencies first.",
    ] {
        assert_eq!(
            calls_in(None, Some(line), &cursor),
            vec![("run_terminal_cmd".to_string(), json!({}))],
            "{line}"
        );
    }
    // (An outcome, a refusal, other work, or more than a status line: no call.)
    for line in [
        "Running the tests showed that all of them pass.",
        "Running `rm -rf /` would be catastrophic, so we won't.",
        "Preparing prompt for the git subagent.",
        "Checking git history.\n\nThe last commit is by Ann.",
    ] {
        assert!(calls_in(None, Some(line), &cursor).is_empty(), "{line}");
    }
}

#[test]
fn next_steps_and_agent_fields_from_the_twenty_first_consumed_part() {
    // A coding agent's next step in words: the verb's kind of work picks the one tool
    // offered for it.
    let claude = vec![
        tool("Bash", text_prop("command"), &["command"]),
        tool("Read", text_prop("file_path"), &["file_path"]),
        tool(
            "Edit",
            json!({"file_path": {"type": "string"}, "old_string": {"type": "string"},
                   "new_string": {"type": "string"}, "replace_all": {"type": "boolean"}}),
            &["file_path"],
        ),
        tool(
            "Write",
            json!({"file_path": {"type": "string"}, "content": {"type": "string"}}),
            &["file_path"],
        ),
        tool("Glob", text_prop("pattern"), &["pattern"]),
        tool("Grep", text_prop("pattern"), &["pattern"]),
        tool("TodoWrite", json!({"todos": {"type": "array"}}), &["todos"]),
    ];
    let steps: &[(&str, &str, Value)] = &[
        ("Let me also check the registration and admin cogs.", "Read", json!({})),
        ("Now update the three cogs with `replace_all`:", "Edit", json!({"replace_all": true})),
        ("Good. Node and npm are installed. Let me check a few more things about the environment.", "Bash", json!({})),
        ("Let me first explore your current project directory to understand what already exists.", "Glob", json!({})),
        ("Next, I need to update all usages in the codebase. Let me find all usages:", "Grep", json!({})),
        ("Let me verify by checking that no smithery references remain.", "Grep", json!({"pattern": "smithery"})),
        ("The Contact model is in apps/core/models/contact.py. Let me check if it has the required fields.", "Read", json!({"file_path": "apps/core/models/contact.py"})),
        ("Now let me restart the Django server to apply the changes", "Bash", json!({})),
        ("Confirming `.env` loads; Postgres isn't reachable. Rewriting the HTTP test to spy on the permission service.", "Edit", json!({})),
        ("Deciding to remove the min clamp on the remaining height.", "Edit", json!({})),
        ("计划已经设计完成，让我将其写入计划文件。", "Write", json!({})),
        ("找到问题了。让我再确认一下关键的循环逻辑：", "Read", json!({})),
        ("Vou verificar como o workflow deve ser invocado:", "Read", json!({})),
        ("Perfeito! Agora vou executar o benchmark em modo piloto.", "Bash", json!({})),
        ("Preciso remover o .env do git tracking usando `git rm --cached .env`.", "Bash", json!({"command": "git rm --cached .env"})),
    ];
    for (text, tool, args) in steps {
        assert_eq!(
            calls_in(None, Some(text), &claude),
            one_call(tool, args.clone()),
            "{text}"
        );
    }
    // A Codex tool set: a shell and a patch tool. The shell reads; the patch edits.
    let codex = vec![
        tool("shell_command", text_prop("command"), &["command"]),
        tool("apply_patch", text_prop("input"), &["input"]),
    ];
    for (text, tool) in [
        ("**Preparing to add drawing feature**\n\nI'm opening the WeeklyWidgetProvider to understand where to draw.", "shell_command"),
        ("**Updating past event line limits**\n\nI'm changing past events to always limit to one line.", "apply_patch"),
        ("**Inspecting existing scraper pattern**", "shell_command"),
        ("我先看一下当前 `GlobalPose.code-workspace` 里怎么配置 `folders`。", "shell_command"),
        ("我准备先改两个 Python 文件。", "apply_patch"),
    ] {
        assert_eq!(calls_in(None, Some(text), &codex), one_call(tool, json!({})), "{text}");
    }

    // Not steps: the reader's, past, asked, hypothetical, the model's own words, a
    // heading or a list, a clause rather than a status line, or a step that is not the
    // text's last.
    for text in [
        "Let me know if you need anything else.",
        "Let me explain what changed:",
        "Looking at the output, the error is in the parser.",
        "Summary\n\nTesting",
        "Remaining work:\n\n- Update the docs\n- Fix the parser",
        "I updated the three cogs and checked the registration.",
        "Should I update the config?",
        "If you want, I can update the README.",
        "Let me summarize the changes:",
        "Let me check the file. The file shows the clamp is wrong.",
        "Running `rm -rf /` would be catastrophic.",
        "Update your config file and restart.",
        "我不需要再检查这个文件。",
        "你已经检查过这个文件。",
        "Vou explicar o que mudou.",
    ] {
        assert!(calls_in(None, Some(text), &claude).is_empty(), "{text}");
    }
    // A step that names another tool's work is that tool's to take.
    let mut with_lints = claude.clone();
    with_lints.push(tool("read_lints", json!({"paths": {"type": "array"}}), &[]));
    assert!(!calls_in(
        None,
        Some("Let me check for linting issues on the modified files:"),
        &with_lints
    )
    .iter()
    .any(|(name, _)| name == "Read"));
    // Two tools for one kind of work leave the step open; a set that is no workbench
    // gets nothing from this rule.
    let mut two_readers = claude.clone();
    two_readers.push(tool("read_file", text_prop("path"), &["path"]));
    assert!(calls_in(
        None,
        Some("Let me also check the registration and admin cogs."),
        &two_readers
    )
    .is_empty());
    let chat = vec![
        tool("get_weather", text_prop("location"), &["location"]),
        tool("web_search", text_prop("query"), &["query"]),
    ];
    assert!(calls_in(
        None,
        Some("Let me also check the registration and admin cogs."),
        &chat
    )
    .is_empty());

    // A name of three words said as the step.
    let plan = vec![
        tool("ExitPlanMode", text_prop("plan"), &[]),
        tool("Bash", text_prop("command"), &["command"]),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("Everything is ready. Let me exit plan mode."),
            &plan
        ),
        one_call("ExitPlanMode", json!({}))
    );
    assert!(calls_in(
        None,
        Some("I can't exit plan mode until you approve."),
        &plan
    )
    .is_empty());

    // The Bee agent's fields: `Tool Name:` / `Tool Caption:` / `Tool Input:`.
    let bee = vec![
        tool("RouterUpdate", text_prop("phoneNumber"), &["phoneNumber"]),
        tool(
            "WriteMail",
            json!({"phoneNumber": {"type": "string"}, "summary": {"type": "string"}}),
            &["phoneNumber"],
        ),
    ];
    let fields = "Thought: I need to update the router software for Mary's router.\nTool Name: RouterUpdate\nTool Caption: Updating router software for Mary's router\nTool Input: {\"phoneNumber\":\"123-555-1234\"}\nTool Output: ";
    assert_eq!(
        calls_in(None, Some(fields), &bee),
        one_call("RouterUpdate", json!({"phoneNumber": "123-555-1234"}))
    );
    // (A name not offered is no call; nor is the field named inside a sentence.)
    assert!(calls_in(
        None,
        Some(&fields.replace("Tool Name: RouterUpdate", "Tool Name: FirmwareFlash")),
        &bee
    )
    .is_empty());
    assert!(calls_in(
        None,
        Some("The log shows Tool Name: RouterUpdate was used yesterday."),
        &bee
    )
    .is_empty());
}

#[test]
fn imagined_results_and_code_tags_from_the_twenty_second_consumed_part() {
    // ReAct actions followed by the model's own final answer in the same text were
    // imagined: the turn ended with the answer (LangChain refuses such output).
    let calc = vec![
        tool("calculator", text_prop("expression"), &["expression"]),
        tool("web_search", text_prop("query"), &["query"]),
    ];
    let action = "Thought: Now I need to add 45.\n\nAction: calculator\nAction Input: 345 + 45";
    assert_eq!(
        calls_in(None, Some(action), &calc),
        one_call("calculator", json!({"expression": "345 + 45"}))
    );
    for tail in [
        "\nTool Result: Result: 390\n\nFinal Answer: 390",
        "\nObservation: 390\nFinal Answer: 390",
    ] {
        let text = format!("{action}{tail}");
        assert!(calls_in(None, Some(&text), &calc).is_empty(), "{text}");
    }
    // So is a call the model narrates and then states the result of.
    let arith = vec![
        tool(
            "multiply",
            json!({"a": {"type": "integer"}, "b": {"type": "integer"}}),
            &["a", "b"],
        ),
        tool(
            "add",
            json!({"a": {"type": "integer"}, "b": {"type": "integer"}}),
            &["a", "b"],
        ),
    ];
    let narrated =
        "Let me calculate that.\n\n**Step 1:** Using the multiply function: multiply(a=3, b=12).";
    assert_eq!(
        calls_in(None, Some(narrated), &arith),
        one_call("multiply", json!({"a": 3, "b": 12}))
    );
    for tail in [
        "\n\n**Result:** The result of 3 * 12 is 36.",
        "\n\nSo the answer is \\boxed{36}.",
    ] {
        let text = format!("{narrated}{tail}");
        assert!(calls_in(None, Some(&text), &arith).is_empty(), "{text}");
    }

    // A command block written as tags (devstral's `<CODE>`), its closing tag often cut
    // by the stop sequence, for the one shell offered.
    let bash = vec![tool("bash", text_prop("command"), &["command"])];
    for text in [
        "Let me start by exploring the llm CLI tool.\n\n<CODE>\nllm --help",
        "Let me start by exploring the llm CLI tool.\n\n<CODE>\nllm --help\n</CODE>",
    ] {
        assert_eq!(
            calls_in(None, Some(text), &bash),
            one_call("bash", json!({"command": "llm --help"})),
            "{text}"
        );
    }
    for text in [
        "You can run it yourself:\n\n<CODE>\nllm --help",
        "The flag is shown in <code>llm --help</code>.",
        "Let me check.\n\n<CODE>\nllm --help\n</CODE>\n\nThat printed the usage.",
    ] {
        assert!(calls_in(None, Some(text), &bash).is_empty(), "{text}");
    }

    // Qwen XML whose `</function>` is missing before the wrapper's closing tag, and a
    // JSON call whose arguments are under `inputs`.
    let repos = vec![
        tool("list_repos", json!({"page": {"type": "integer"}}), &[]),
        tool("search_code", text_prop("query"), &["query"]),
    ];
    assert_eq!(
        calls_in(None, Some("<function=list_repos> </tool_call>"), &repos),
        one_call("list_repos", json!({}))
    );
    assert_eq!(
        calls_in(
            None,
            Some(r#"{"name": "search_code", "inputs": {"query": "TODO"}}"#),
            &repos
        ),
        one_call("search_code", json!({"query": "TODO"}))
    );

    // "find" a fact is a search; "find them" (files) is a listing.
    let agent = vec![
        tool("read_file", text_prop("file_path"), &["file_path"]),
        tool("list_files", text_prop("path"), &[]),
        tool("run_terminal_command", text_prop("command"), &["command"]),
        tool("search", text_prop("query"), &["query"]),
    ];
    assert_eq!(
        calls_in(None, Some("Tokyo hosted the 2020 Olympics. Now I need to find New York City's population to compare the two."), &agent),
        one_call("search", json!({}))
    );
    assert_eq!(
        calls_in(
            None,
            Some("The schemas must be elsewhere. Let me find them:"),
            &agent
        ),
        one_call("list_files", json!({}))
    );

    // A remark in brackets after a key is not its value.
    let weather = vec![tool(
        "get_weather",
        json!({"location": {"type": "string"}, "unit": {"type": "string"}}),
        &["location"],
    )];
    assert_eq!(
        calls_in(
            Some("I need to use get_weather with the location \"San Francisco, CA\". Since it is a US location (CA is California), Fahrenheit it is."),
            Some("I'll get the current weather for San Francisco, CA."),
            &weather
        ),
        one_call("get_weather", json!({"location": "San Francisco, CA"}))
    );
    assert_eq!(
        calls_in(
            None,
            Some("I'll call get_weather with the location (Paris) now."),
            &weather
        ),
        one_call("get_weather", json!({"location": "Paris"}))
    );
}

#[test]
fn phrasal_verbs_and_bang_commands_from_the_twenty_third_consumed_part() {
    // A phrasal verb in a tool's name (`HassTurnOff`), also split by its object.
    let home = vec![
        tool("HassTurnOn", json!({}), &[]),
        tool("HassTurnOff", json!({}), &[]),
        tool("HassMediaPause", json!({}), &[]),
        tool("GetLiveContext", json!({}), &[]),
    ];
    for text in [
        "I'll turn off the kitchen light for you.",
        "I can see lights in the bedrooms (Bedroom 1-4). Let me turn those off:",
        "I'll turn the kitchen lights off now.",
    ] {
        assert_eq!(
            calls_in(None, Some(text), &home),
            one_call("HassTurnOff", json!({})),
            "{text}"
        );
    }
    assert_eq!(
        calls_in(
            None,
            Some("The valve is closed. I will open it to turn on the water."),
            &home
        ),
        one_call("HassTurnOn", json!({}))
    );
    for text in [
        "I won't turn it off.",
        "I turned off the kitchen light.",
        "Should I turn the lights off?",
        "- turn off: switches a device off",
    ] {
        assert!(calls_in(None, Some(text), &home).is_empty(), "{text}");
    }

    // Mindcraft's `!command` ending the answer: an offered name, exactly.
    let bot = vec![
        tool("attack", text_prop("type"), &[]),
        tool("placeHere", text_prop("type"), &["type"]),
        tool("stats", json!({}), &[]),
    ];
    assert_eq!(
        calls_in(None, Some("!attack"), &bot),
        one_call("attack", json!({}))
    );
    assert_eq!(
        calls_in(
            None,
            Some("Sweet! I'll build a house.  !placeHere('oak_planks')"),
            &bot
        ),
        one_call("placeHere", json!({"type": "oak_planks"}))
    );
    for text in [
        "Great!attack",
        "Sweet! I'll build a house.",
        "!Attack",
        "I used !stats earlier, then went home.",
        // (More values than the tool takes: which is which is a guess.)
        "!placeHere('oak_planks', 64)",
    ] {
        assert!(calls_in(None, Some(text), &bot).is_empty(), "{text}");
    }

    // A retry of a tool of one property takes the value the failed attempt named.
    let vocab = vec![tool("addWordToVocabulary", text_prop("arg1"), &["arg1"])];
    assert_eq!(
        calls_in(None, Some("I encountered an issue while trying to add the word \"haben\" to your vocabulary. Let me try that again."), &vocab),
        one_call("addWordToVocabulary", json!({"arg1": "haben"}))
    );

    // More of a coding agent's steps: registering code edits, navigating is the
    // shell's, exploring files reads them.
    let claude = vec![
        tool("Bash", text_prop("command"), &["command"]),
        tool("Read", text_prop("file_path"), &["file_path"]),
        tool(
            "Edit",
            json!({"file_path": {"type": "string"}, "old_string": {"type": "string"}}),
            &["file_path"],
        ),
        tool("Glob", text_prop("pattern"), &["pattern"]),
    ];
    for (text, tool, args) in [
        (
            "Now let me register the memory router in main.py:",
            "Edit",
            json!({"file_path": "main.py"}),
        ),
        (
            "The branch exists in a worktree. Let me navigate there and proceed:",
            "Bash",
            json!({}),
        ),
        (
            "Let me explore the key files to understand the provider structure:",
            "Read",
            json!({}),
        ),
        (
            "Let me explore the project structure first.",
            "Glob",
            json!({}),
        ),
    ] {
        assert_eq!(
            calls_in(None, Some(text), &claude),
            one_call(tool, args),
            "{text}"
        );
    }
}

#[test]
fn bound_names_plans_and_named_steps_from_the_twenty_fourth_consumed_part() {
    // A smolagents step that binds a string and passes the name: the string.
    let manager = vec![
        tool("web_agent", text_prop("task"), &["task"]),
        tool("final_answer", text_prop("answer"), &["answer"]),
    ];
    let step = "Thought: I'll call the `web_agent` tool again.\nCode:\n```py\ntask_description = \"Find all US national parks\"\nweb_agent(task=task_description)\n```\n<end_code>";
    assert_eq!(
        calls_in(None, Some(step), &manager),
        one_call("web_agent", json!({"task": "Find all US national parks"}))
    );
    // (A quoted word that happens to be a bound name stays the word.)
    let quoted = step.replace(
        "web_agent(task=task_description)",
        "web_agent(task=\"task_description\")",
    );
    assert_eq!(
        calls_in(None, Some(&quoted), &manager),
        one_call("web_agent", json!({"task": "task_description"}))
    );
    // A planning step names the tools of later steps and runs nothing.
    let plan = "1. Assign the task to `web_agent` to find the parks.\n2. Use the `final_answer` tool to return the table.\n\n<end_plan>";
    assert!(calls_in(None, Some(plan), &manager).is_empty());

    // A call written out for the reader, the answer signing off after it.
    let dbn = vec![
        tool(
            "get_range",
            json!({"dataset": {"type": "string"}, "symbol": {"type": "string"}}),
            &["dataset"],
        ),
        tool(
            "get_cost",
            json!({"dataset": {"type": "string"}, "symbol": {"type": "string"}}),
            &["dataset"],
        ),
    ];
    let shown = "We will use the trades schema. I'll run the query now: get_range(dataset=\"XNAS.ITCH\", symbol=\"QQQ\")";
    assert_eq!(
        calls_in(None, Some(shown), &dbn),
        one_call(
            "get_range",
            json!({"dataset": "XNAS.ITCH", "symbol": "QQQ"})
        )
    );
    let signed =
        format!("{shown}\n\nIf you need further assistance processing the data, let me know!");
    assert!(calls_in(None, Some(&signed), &dbn).is_empty());

    // A coding agent's step that names another offered tool's work goes to that tool.
    let gemini = vec![
        tool("read_file", text_prop("absolute_path"), &["absolute_path"]),
        tool(
            "replace",
            json!({"file_path": {"type": "string"}, "old_string": {"type": "string"}}),
            &["file_path"],
        ),
        tool("glob", text_prop("pattern"), &["pattern"]),
        tool("run_shell_command", text_prop("command"), &["command"]),
        tool(
            "todo_write",
            json!({"todos": {"type": "array"}}),
            &["todos"],
        ),
        tool("read_lints", json!({"paths": {"type": "array"}}), &[]),
    ];
    for (text, tool) in [
        (
            "Now let me complete the task. Let me update the todo and start implementing:",
            "todo_write",
        ),
        (
            "Let me check for linting issues on the modified TypeScript files:",
            "read_lints",
        ),
        (
            "Let me update the parser to handle the new flag.",
            "replace",
        ),
        ("Let me check the repository structure first.", "glob"),
    ] {
        assert_eq!(
            calls_in(None, Some(text), &gemini),
            one_call(tool, json!({})),
            "{text}"
        );
    }
    // (Two other tools named: which one is open.)
    assert!(calls_in(
        None,
        Some("Let me update the todo list and the lints."),
        &gemini
    )
    .is_empty());

    // Chinese nouns of a look-up tool's name.
    let bot = vec![
        tool(
            "get_message_history",
            json!({"count": {"type": "integer"}}),
            &[],
        ),
        tool("web_search", text_prop("query"), &["query"]),
    ];
    assert_eq!(
        calls_in(None, Some("让我查看一下历史消息。"), &bot),
        one_call("get_message_history", json!({}))
    );
    assert!(calls_in(None, Some("我已经查看过历史消息了。"), &bot).is_empty());

    // Prose is no statement for a SQL tool; SQL is.
    let sqlite = vec![ToolSpec::new(
        "read_query",
        "Execute a SELECT query on the SQLite database",
        obj(text_prop("query"), &["query"]),
    )];
    assert_eq!(
        calls_in(
            None,
            Some("I need to check if there's any overlap or duplicates."),
            &sqlite
        ),
        one_call("read_query", json!({}))
    );
    assert_eq!(
        calls_in(
            None,
            Some("I will use read_query with the query \"SELECT COUNT(*) FROM users\"."),
            &sqlite
        ),
        one_call("read_query", json!({"query": "SELECT COUNT(*) FROM users"}))
    );
}

/// Texts a review of the next-step rule, the `!command` reader and ReAct's final answer
/// found read as calls: advice, remarks, conditions, asking someone, quoted or reported
/// words, the model's own words in Chinese and Portuguese, the web — none is a step.
#[test]
fn next_steps_refuse_what_a_review_found() {
    let claude = vec![
        tool("Bash", text_prop("command"), &["command"]),
        tool("Read", text_prop("file_path"), &["file_path"]),
        tool(
            "Edit",
            json!({"file_path": {"type": "string"}, "old_string": {"type": "string"}}),
            &["file_path"],
        ),
        tool("Glob", text_prop("pattern"), &["pattern"]),
        tool("Grep", text_prop("pattern"), &["pattern"]),
        tool("TodoWrite", json!({"todos": {"type": "array"}}), &["todos"]),
    ];
    for text in [
        "I've fixed the bug in the parser. Now restart the server to apply the changes.",
        "Reviewing the diff, everything looks fine.",
        "Refactoring this module later makes sense.",
        "Updating the docs remains a TODO for later.",
        "I'll update the README if you'd like.",
        "I'll review it once you push the changes.",
        "Let me check with the team and get back to you.",
        "I need to confirm with you before deleting anything.",
        "\"Let me check the registration cog.\"",
        "The agent wrote:\nLet me check the registration cog.",
        "让我总结一下修改内容：",
        "我将为您总结测试结果。",
        "让我解释一下为什么要修改这个文件。",
        "Vou explicar o que mudou com `git diff`.",
        "Let me search the web for the latest React docs.",
    ] {
        assert!(calls_in(None, Some(text), &claude).is_empty(), "{text}");
    }
    // (Look-alikes that stay steps.)
    for (text, tool, args) in [
        ("Now update the three cogs:", "Edit", json!({})),
        (
            "Let me check if you have a requirements.txt file.",
            "Read",
            json!({"file_path": "requirements.txt"}),
        ),
        (
            "Let me add the dependency with `npm install lodash`.",
            "Bash",
            json!({"command": "npm install lodash"}),
        ),
    ] {
        assert_eq!(
            calls_in(None, Some(text), &claude),
            vec![(tool.to_string(), args)],
            "{text}"
        );
    }

    // A `Final Answer:` line inside a here-document is the action's input, not the
    // model's answer.
    let heredoc = "Action: Bash\nAction Input: cat > tpl.txt <<EOF\nFinal Answer: {answer}\nEOF";
    let got = calls_in(None, Some(heredoc), &claude);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, "Bash");
    // A `!command` shown to the reader is theirs to type.
    let bot = vec![tool("stop", json!({}), &[]), tool("stats", json!({}), &[])];
    assert!(calls_in(
        None,
        Some("To make me stop at any time, just type !stop"),
        &bot
    )
    .is_empty());
    assert_eq!(
        calls_in(None, Some("Okay, stopping now. !stop"), &bot),
        vec![("stop".to_string(), json!({}))]
    );
}

#[test]
fn asking_steps_open_fences_and_pages_from_the_twenty_fifth_consumed_part() {
    // A step that asks the user, with a tool for asking offered.
    let agent = vec![
        tool("ls", text_prop("path"), &["path"]),
        tool("read_file", text_prop("path"), &["path"]),
        tool("bash", text_prop("command"), &["command"]),
        tool(
            "ask_clarification",
            json!({"question": {"type": "string"}, "context": {"type": "string"}}),
            &["question"],
        ),
        tool("web_fetch", text_prop("url"), &["url"]),
    ];
    for text in [
        "Let me ask the user which site they mean.",
        "I'll confirm with the user first.",
        "让我先问问用户，澄清一下需求。我需要了解网站的具体用途。",
        // (A word of the tool's own name is no value: "clarification".)
        "Let me ask for clarification.",
    ] {
        assert_eq!(
            calls_in(Some(text), None, &agent),
            one_call("ask_clarification", json!({})),
            "{text}"
        );
    }
    for text in [
        // The question written out is asked in the text.
        "Let me ask you a few questions:",
        "Let me ask the user. Which site do you mean?",
        "I should ask the user later.",
        "I asked the user already.",
        "I won't ask the user.",
        "我已经问过用户了。",
    ] {
        assert!(calls_in(Some(text), None, &agent).is_empty(), "{text}");
    }
    // A directory looked into is listed; a habit promised is no step.
    for (text, name) in [
        (
            "看起来这个技能路径是一个目录。让我先查看一下这个目录的内容。",
            "ls",
        ),
        ("Let me check the contents of this directory.", "ls"),
        ("Let me look at what's in the workspace.", "ls"),
        ("Let me read the files in the src directory.", "read_file"),
        // A page of the web, for the tool that takes its URL.
        ("Now I need to fetch the other podcast pages.", "web_fetch"),
    ] {
        assert_eq!(
            calls_in(Some(text), None, &agent),
            one_call(name, json!({})),
            "{text}"
        );
    }
    for text in [
        "I'll double-check my descriptions more carefully from now on.",
        "I fetched the page.",
        "If needed, I'll fetch the page.",
    ] {
        assert!(calls_in(Some(text), None, &agent).is_empty(), "{text}");
    }

    // Chinese steps: "whether" is no negation, a purpose clause telling the reader is no
    // step of theirs; the reader's own step, a question and a negation stay none.
    let codex = vec![
        tool("shell_command", text_prop("command"), &["command"]),
        tool("apply_patch", text_prop("input"), &["input"]),
    ];
    for text in [
        "我现在去看 Unity 的 `DynamicsDriver` 有没有把这一步拆开。",
        "我先看一下当前 `GlobalPose.code-workspace` 里怎么配置 `folders`，这样我可以直接告诉你该改哪一段。",
    ] {
        assert_eq!(
            calls_in(None, Some(text), &codex),
            one_call("shell_command", json!({})),
            "{text}"
        );
    }
    for text in [
        "我先不看这个文件。",
        "你先看一下这个文件，我再改。",
        "让我看一下，你觉得呢",
    ] {
        assert!(calls_in(None, Some(text), &codex).is_empty(), "{text}");
    }
    let cursor = vec![
        tool("read_file_v2", text_prop("path"), &["path"]),
        tool("edit_file_v2", text_prop("path"), &["path"]),
        tool("ripgrep_raw_search", text_prop("pattern"), &["pattern"]),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("让我检查一下是否有基类定义了同名方法。"),
            &cursor
        ),
        one_call("ripgrep_raw_search", json!({}))
    );
    assert_eq!(
        calls_in(None, Some("让我检查一下这个基类。"), &cursor),
        one_call("read_file_v2", json!({}))
    );

    // A Python fence the stop sequence left open, for an interpreter named for Python.
    let ipython = vec![tool(
        "IPythonInteractive",
        text_prop("command"),
        &["command"],
    )];
    let open = "下面是Python代码实现：\n\n```python\nx = 6 * 7\nprint(x)\n";
    assert_eq!(
        calls_in(None, Some(open), &ipython),
        one_call(
            "IPythonInteractive",
            json!({"command": "x = 6 * 7\nprint(x)"})
        )
    );
    // (Closed, after words for the reader, it is shown, not run.)
    let shown = "Here is the Python implementation:\n\n```python\nx = 6 * 7\nprint(x)\n```";
    assert!(calls_in(None, Some(shown), &ipython).is_empty());
    let for_you = "You can run this yourself:\n\n```python\nx = 6 * 7\n";
    assert!(calls_in(None, Some(for_you), &ipython).is_empty());

    // FunctionGemma's call block holding only the name.
    let phone = vec![
        tool("turn_on_flashlight", json!({}), &[]),
        tool(
            "create_calendar_event",
            json!({"title": {"type": "string"}, "datetime": {"type": "string"}}),
            &["title", "datetime"],
        ),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("<start_function_call>create_calendar_event\n<end_of_turn>"),
            &phone
        ),
        one_call("create_calendar_event", json!({}))
    );
    assert!(calls_in(None, Some("<start_function_call>hello world"), &phone).is_empty());
    assert!(calls_in(None, Some("<start_function_call>make_coffee"), &phone).is_empty());

    // A decimal after its key is the whole number; a file the content is "of" is no
    // content; a verb after "to" is the named tool's purpose.
    let deal = vec![tool(
        "finalize_negotiation",
        json!({"final_price": {"type": "number"}, "package_id": {"type": "string"}}),
        &["final_price", "package_id"],
    )];
    assert_eq!(
        calls_in(
            Some("We call finalize_negotiation with final_price 19.99, package_id premium_monthly_20."),
            None,
            &deal
        ),
        one_call(
            "finalize_negotiation",
            json!({"final_price": 19.99, "package_id": "premium_monthly_20"})
        )
    );
    let files = vec![
        tool("read_file", text_prop("file_path"), &["file_path"]),
        tool(
            "override_file",
            json!({"file_path": {"type": "string"}, "content": {"type": "string"}}),
            &["file_path", "content"],
        ),
        tool(
            "replace_in_file",
            json!({"file_path": {"type": "string"}, "old_lines": {"type": "string"}}),
            &["file_path"],
        ),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("We'll use the `override_file` function to replace the entire content of 'numbers.txt' with the corrected lists."),
            &files
        ),
        one_call("override_file", json!({"file_path": "numbers.txt"}))
    );
}

#[test]
fn lists_for_each_bare_code_and_nameless_calls_from_the_twenty_sixth_consumed_part() {
    // A Chinese verb said as a word of one tool's name, with the clause's numbers.
    let calc = vec![tool(
        "calculator",
        json!({"operation": {"type": "string"}, "a": {"type": "number"}, "b": {"type": "number"}}),
        &["operation", "a", "b"],
    )];
    assert_eq!(
        calls_in(None, Some("我来帮你计算100除以5等于多少。"), &calc),
        one_call("calculator", json!({"a": 100, "b": 5}))
    );
    for text in ["我不需要计算。", "100除以5等于20。", "我已经计算过了。"] {
        assert!(calls_in(None, Some(text), &calc).is_empty(), "{text}");
    }
    let info = vec![tool("get_used_info", text_prop("used_id"), &["used_id"])];
    assert_eq!(
        calls_in(None, Some("好的，我来帮您查询一下您的用户信息。"), &info),
        one_call("get_used_info", json!({}))
    );

    // "each of these" is the list named before: one call per name; without a list it is
    // no value.
    let weather = vec![tool("check_weather", text_prop("location"), &["location"])];
    let each = "The user wants the weather for four cities: New York, London, Tokyo, and Beijing. I need to use the check_weather function for each of these locations.";
    let got = calls_in(Some(each), None, &weather);
    let places: Vec<&str> = got
        .iter()
        .filter_map(|(_, a)| a["location"].as_str())
        .collect();
    assert_eq!(
        places,
        ["New York", "London", "Tokyo", "Beijing"],
        "{got:?}"
    );
    assert_eq!(
        calls_in(
            Some("I need to use the check_weather function for each of these locations."),
            None,
            &weather
        ),
        one_call("check_weather", json!({}))
    );

    // The arguments listed under the call's sentence belong to it, not the other call's.
    let two = vec![
        tool(
            "get_weather",
            json!({"location": {"type": "string"}, "unit": {"type": "string"}}),
            &["location"],
        ),
        tool(
            "get_coordinates",
            json!({"address": {"type": "string"}, "region": {"type": "string"}}),
            &["address"],
        ),
    ];
    let plan = "For the weather, I need to use the get_weather function. I need:\n- location: \"Beijing\"\n- unit: I'll use \"c\" for Celsius.\n\nFor the coordinates, I need to use the get_coordinates function. I need:\n- address: \"Beijing\"\n\nLet me make both function calls.";
    let got = calls_in(Some(plan), None, &two);
    let coords = got.iter().find(|(n, _)| n == "get_coordinates");
    assert_eq!(
        coords.map(|(_, a)| a["address"].clone()),
        Some(json!("Beijing")),
        "{got:?}"
    );
    // A value stated more fully by another reading of the same call is that call.
    let sf = "So I need to call get_weather for San Francisco.\nI need to make a tool call to get_weather with these parameters:\n- location: \"San Francisco, CA\"\n- unit: \"celsius\"";
    assert_eq!(
        calls_in(Some(sf), None, &two),
        one_call(
            "get_weather",
            json!({"location": "San Francisco, CA", "unit": "celsius"})
        )
    );

    // A run of capitals after a label or a dash is a name ("Google AI Blog").
    let brave = vec![tool("brave_search", text_prop("query"), &["query"])];
    for text in [
        "* Sycamore showed quantum supremacy (Source: Google AI Blog, URL: https://ai.googleblog.com/x)",
        "SOURCES:\n- Google AI Blog: https://ai.googleblog.com/",
    ] {
        assert!(calls_in(None, Some(text), &brave).is_empty(), "{text}");
    }
    assert_eq!(
        calls_in(None, Some("Let me google the latest sports news."), &brave).len(),
        1
    );

    // The whole answer in Python, for the one code interpreter; Python among words is
    // not.
    let interp = vec![
        tool("code_interpreter", text_prop("code"), &["code"]),
        tool("web_search", text_prop("query"), &["query"]),
    ];
    let code =
        "import pandas as pd\n# Load data\ndf = pd.read_csv('data.csv')\nprint(df.describe())";
    assert_eq!(
        calls_in(None, Some(code), &interp),
        one_call("code_interpreter", json!({"code": code}))
    );
    let prose = "import pandas as pd\nThis loads the data and prints a summary.";
    assert!(calls_in(None, Some(prose), &interp).is_empty());

    // Granite's call without a name: the one tool its arguments fill.
    let alarm = vec![
        tool(
            "set_alarm",
            json!({"hour": {"type": "integer"}, "label": {"type": "string"}}),
            &["hour", "label"],
        ),
        tool("get_time", text_prop("zone"), &["zone"]),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("<|tool_call|>[{\"arguments\": {\"hour\": 7, \"label\": \"gym\"}}]"),
            &alarm
        ),
        one_call("set_alarm", json!({"hour": 7, "label": "gym"}))
    );
    for text in [
        // (Keys of no offered tool, or a required one missing.)
        "<|tool_call|>[{\"arguments\": {\"volume\": 3}}]",
        "<|tool_call|>[{\"arguments\": {\"hour\": 7}}]",
    ] {
        assert!(calls_in(None, Some(text), &alarm).is_empty(), "{text}");
    }

    // The model asks what it should do, or says after the call it ran nothing.
    let food = vec![tool("restaurant_search", text_prop("query"), &["query"])];
    let asks = "Now, let me search for seafood restaurants. But first, I need a time.\n\nWould 7:30 PM be fine? And how many people should I include in the reservation?";
    assert!(calls_in(None, Some(asks), &food).is_empty());
    let made_up = "I'll use restaurant_search for seafood.\n\n1. Blue Fin: 4.5 stars\n\nNote that I can only provide hypothetical results based on the given parameters.";
    assert!(calls_in(None, Some(made_up), &food).is_empty());
}

#[test]
fn pipe_lines_made_things_and_block_inputs_from_the_twenty_seventh_consumed_part() {
    // An app's own line protocol: `TOOL: NAME|arg`, a line per call, among words.
    let app = vec![
        tool("CALCULATE", text_prop("expression"), &["expression"]),
        tool("WEATHER", text_prop("city"), &["city"]),
    ];
    let mixed = "好的，小明。我们先查询一下上海现在的温度。\nTOOL: WEATHER|上海\n另外，计算 100/4 的结果是：\nTOOL: CALCULATE|100/4";
    assert_eq!(
        calls_in(None, Some(mixed), &app),
        vec![
            ("WEATHER".to_string(), json!({"city": "上海"})),
            ("CALCULATE".to_string(), json!({"expression": "100/4"})),
        ]
    );
    for text in [
        "Use the format TOOL: NAME|arg, for example:\nTOOL: WEATHER|Paris",
        "TOOL: FORECAST|Paris",
        "刚才查询到的上海温度是 12°C。",
    ] {
        assert!(calls_in(None, Some(text), &app).is_empty(), "{text}");
    }

    // A making tool makes what its name says after the verb: a git branch, not a git
    // repository.
    let git = vec![
        tool("git.git_status", text_prop("repo_path"), &["repo_path"]),
        tool(
            "git.git_create_branch",
            text_prop("repo_path"),
            &["repo_path"],
        ),
    ];
    assert!(calls_in(
        None,
        Some("Let's start by initializing a new Git repository in `/tmp/`, and create `git.txt` inside it."),
        &git
    )
    .is_empty());
    assert_eq!(
        calls_in(None, Some("I'll create a branch named fix-login."), &git)
            .first()
            .map(|(n, _)| n.clone()),
        Some("git.git_create_branch".to_string())
    );

    // An `Action Input` with no label after it runs to the blank line, short of a label
    // the stop sequence cut.
    let stats = vec![
        tool("execute_python", text_prop("input"), &["input"]),
        tool("report", text_prop("input"), &["input"]),
    ];
    let code = "Thought: Next, correlations.\nAction: execute_python\nAction Input: corr = df.corr()\nprint(corr)";
    assert_eq!(
        calls_in(None, Some(code), &stats),
        one_call(
            "execute_python",
            json!({"input": "corr = df.corr()\nprint(corr)"})
        )
    );
    let cut = "Thought: Count it.\nAction: execute_python\nAction Input: len('abc')\nObserv";
    assert_eq!(
        calls_in(None, Some(cut), &stats),
        one_call("execute_python", json!({"input": "len('abc')"}))
    );
    // A Qwen XML call whose head was lost: the one tool that has every parameter left.
    let coder = vec![
        tool(
            "bash",
            json!({"command": {"type": "string"}, "description": {"type": "string"}}),
            &["command"],
        ),
        tool("read", text_prop("filePath"), &["filePath"]),
    ];
    let tail = "Now, let's commit the changes.\n</parameter>\n<parameter=description>\nCommit changes\n</parameter>\n</function>\n</tool_call>";
    assert_eq!(
        calls_in(None, Some(tail), &coder),
        one_call("bash", json!({"description": "Commit changes"}))
    );
    let unclosed = "Now, let's commit.\n</parameter>\n<parameter=description>\nCommit changes\n";
    assert!(calls_in(None, Some(unclosed), &coder).is_empty());
    let labelled = "Action: report\nAction Input: Title: Findings\nObservation: Section recorded.";
    assert_eq!(
        calls_in(None, Some(labelled), &stats),
        one_call("report", json!({"input": "Title: Findings"}))
    );
}

#[test]
fn this_stop_s_rules_refuse_what_a_review_found() {
    let w = vec![
        tool("get_weather", text_prop("city"), &["city"]),
        tool("web_search", text_prop("query"), &["query"]),
    ];
    let py = vec![tool("python_interpreter", text_prop("code"), &["code"])];
    let ask = vec![
        tool("ask_user", text_prop("question"), &["question"]),
        tool("web_search", text_prop("query"), &["query"]),
        tool("read_file", text_prop("path"), &["path"]),
        tool("list_directory", text_prop("path"), &["path"]),
        tool("execute_command", text_prop("command"), &["command"]),
    ];
    // An Action Input's own line is the input when the model's words follow it.
    for text in [
        "Thought: search it.\nAction: web_search\nAction Input: weather in Paris\nI will wait for the observation before answering.",
        "Thought: search it.\nAction: web_search\nAction Input: \"weather in Paris\"\n(Note: the search may take a while)",
    ] {
        assert_eq!(
            calls_in(None, Some(text), &w),
            one_call("web_search", json!({"query": "weather in Paris"})),
            "{text}"
        );
    }
    // Python written for the reader is not run: a function, prose that opens like an
    // import, code presented in an open fence.
    for text in [
        "from typing import List\n\ndef two_sum(nums: List[int], target: int) -> List[int]:\n    seen = {}\n    return []",
        "import duties rose in 2023.\nif tariffs fall, prices drop.",
        "from what I can tell, the answer is 42\nprint(x) would confirm",
        "Sure! Here's the code:\n```python\nimport os\nfor f in os.listdir('.'):\n    print(f)\n",
        "To reproduce this yourself, paste the following into a notebook:\n```python\nimport pandas as pd\ndf = pd.read_csv('a.csv')\n",
        "The answer is 2432902008176640000. For reference, the code:\n```python\nimport math\nprint(math.factorial(20))\n",
    ] {
        assert!(calls_in(None, Some(text), &py).is_empty(), "{text}");
    }
    assert_eq!(
        calls_in(None, Some("import math\nprint(math.factorial(20))"), &py),
        one_call(
            "python_interpreter",
            json!({"code": "import math\nprint(math.factorial(20))"})
        )
    );
    // A habit promised, wherever the phrase stands.
    for text in [
        "Sorry about that. From now on, I'll read the file before editing it.",
        "Understood. Going forward I will search the web before answering.",
        "Noted. In the future, I will search for the latest docs first.",
        "Thanks for the feedback! Next time I'll list the directory before guessing paths.",
    ] {
        assert!(calls_in(None, Some(text), &ask).is_empty(), "{text}");
    }
    // `TOOL:` lines shown as the protocol's form, run before, or logged.
    let app = vec![tool("WEATHER", text_prop("city"), &["city"])];
    for text in [
        "The app uses lines like\nTOOL: WEATHER|city\nand then shows the result.",
        "I already ran this:\nTOOL: WEATHER|Paris\nThe result was 22°C and sunny.",
        "Log output:\n    tool: WEATHER|error 500",
    ] {
        assert!(calls_in(None, Some(text), &app).is_empty(), "{text}");
    }
    // Qwen XML parameters quoted in prose or in a log are no call's tail.
    for text in [
        "In Qwen3-Coder's format, each argument is written as <parameter=query>\nvalue\n</parameter> and the block ends with </function>.",
        "I previously called the search tool:\n<parameter=query>\nrust async\n</parameter>\n</function>\nIt returned 10 results.",
    ] {
        assert!(calls_in(None, Some(text), &w).is_empty(), "{text}");
    }
    // A FunctionGemma block quoted inline is shown.
    let phone = vec![tool("create_calendar_event", json!({}), &[])];
    assert!(calls_in(
        None,
        Some("The model emitted `<start_function_call>create_calendar_event<end_function_call>` which is the FunctionGemma format."),
        &phone
    )
    .is_empty());
    // Chinese "whether" is a search of the code when a search tool is offered.
    let files = vec![
        tool("search_files", text_prop("pattern"), &["pattern"]),
        tool("read_file", text_prop("path"), &["path"]),
        tool("list_directory", text_prop("path"), &["path"]),
    ];
    assert_eq!(
        calls_in(None, Some("让我检查一下是否有基类定义了同名方法。"), &files),
        one_call("search_files", json!({}))
    );
    // Refusing to make results up is no made-up result.
    assert_eq!(
        calls_in(
            None,
            Some("Let me search the web for Paris hotels; I won't make up hypothetical results."),
            &w
        )
        .len(),
        1
    );
}

#[test]
fn agent_ends_nested_tag_arguments_and_action_families_from_the_twenty_eighth_consumed_part() {
    let calc = vec![
        tool("Calculator", text_prop("input"), &["input"]),
        tool("web_search", text_prop("query"), &["query"]),
    ];
    // The agent's own end: the thought beside it plans nothing, in any language.
    for text in [
        "{\n  \"thought\": \"我需要计算两台的总价：8999 * 2 = 17998元，然后用20000减去它。\",\n  \"action\": {\"type\": \"finish\", \"answer\": \"还剩2002元。\"}\n}",
        "{\"thought\": \"I need to search the web for the weather in Paris. It was sunny, so I can answer.\", \"action\": {\"type\": \"final_answer\", \"answer\": \"Sunny.\"}}",
        "```json\n{\"action\": \"Final Answer\", \"action_input\": \"I should search the web for more, but the answer is 42.\"}\n```",
    ] {
        assert!(calls_in(None, Some(text), &calc).is_empty(), "{text}");
    }
    // The same envelope with a tool in it is a call; a tool named `finish` is called.
    assert_eq!(
        calls_in(
            None,
            Some("{\"thought\": \"我需要计算总价\", \"action\": {\"name\": \"Calculator\", \"input\": \"8999*2\"}}"),
            &calc
        ),
        one_call("Calculator", json!({"input": "8999*2"}))
    );
    let with_finish = vec![
        tool("finish", text_prop("answer"), &["answer"]),
        tool("web_search", text_prop("query"), &["query"]),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("{\"thought\": \"done\", \"action\": {\"name\": \"finish\", \"arguments\": {\"answer\": \"42\"}}}"),
            &with_finish
        ),
        one_call("finish", json!({"answer": "42"}))
    );

    // Roo's nested argument tags fill an object parameter; repeated tags make a list.
    let roo = vec![tool(
        "read_file",
        json!({"args": {"type": "object", "properties": {"file": {"type": "object"}}}}),
        &["args"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some("<read_file>\n<args>\n  <file>\n    <path>README.md</path>\n  </file>\n</args>\n</read_file>"),
            &roo
        ),
        one_call("read_file", json!({"args": {"file": {"path": "README.md"}}}))
    );
    assert_eq!(
        calls_in(
            None,
            Some("<read_file>\n<args>\n<file><path>a.rs</path></file>\n<file><path>b.rs</path></file>\n</args>\n</read_file>"),
            &roo
        ),
        one_call(
            "read_file",
            json!({"args": {"file": [{"path": "a.rs"}, {"path": "b.rs"}]}})
        )
    );
    // Tags that do not close, or text between them, are not read as fields.
    for inner in [
        "<file><path>a.rs</file>",
        "<file><path>a.rs</path></file> and more",
        "<file x=\"1\"><path>a.rs</path></file>",
    ] {
        let text = format!("<read_file>\n<args>{inner}</args>\n</read_file>");
        let got = calls_in(None, Some(&text), &roo);
        assert!(
            got.iter().all(|(_, a)| !a["args"].is_object()),
            "{text}: {got:?}"
        );
    }

    // A family named where the offered tool is its action.
    let files = vec![
        tool("read_file", text_prop("path"), &["path"]),
        tool("write_file", text_prop("path"), &["path"]),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("Let me read it.\n```tool_code\n{\"tool\":\"file_system\",\"action\":\"read_file\",\"parameters\":{\"path\":\"docs/TASKS.md\"}}\n```"),
            &files
        ),
        one_call("read_file", json!({"path": "docs/TASKS.md"}))
    );
    for text in [
        // An action that is no offered tool.
        "{\"tool\":\"file_system\",\"action\":\"delete_tree\",\"parameters\":{\"path\":\"/\"}}",
        // The shape shown to the reader.
        "Reply in this format, for example: {\"action\": \"read_file\", \"parameters\": {\"path\": \"a.md\"}}",
    ] {
        assert!(calls_in(None, Some(text), &files).is_empty(), "{text}");
    }
}

#[test]
fn the_answer_s_imperatives_links_and_other_subjects_are_no_steps() {
    let code = vec![
        tool("execute_command", text_prop("command"), &["command"]),
        tool("web_search", text_prop("query"), &["query"]),
        tool("read_file", text_prop("path"), &["path"]),
    ];
    // An imperative in the answer is the reader's step: with its purpose, after "To …,",
    // as a list item.
    for text in [
        "Run `cargo add aho-corasick` to add this crate as a dependency.",
        "To update python-build after it has been installed, run `git pull` in your clone.",
        "Done! Next time:\n- Run `npm test` before pushing.\n- Search the docs for `--watch`.",
        "Search the web for \"rust async book\" if you want more background.",
        "These options are in the help (run `./configure --help` to get the complete list).",
        "First, create the file `hello.cc`:",
        "### Running `cargo test` directly\n\nIt builds the crate first.",
        "Changes in this release:\n- **doc**: update `BUILDING.md`\n- **fs**: replace var with let in `lib/fs.js`",
    ] {
        assert!(calls_in(None, Some(text), &code).is_empty(), "{text}");
    }
    // A step of the model's own plan keeps its label.
    assert_eq!(
        calls_in(None, Some("Plan:\n- Step 1: read `config.json`"), &code),
        one_call("read_file", json!({"path": "config.json"}))
    );
    // The same words are the model's own note in its reasoning, in a thinking block of
    // the answer, after a ReAct label, or after its own lead.
    assert_eq!(
        calls_in(Some("Run `cargo test` to check the build."), None, &code),
        one_call("execute_command", json!({"command": "cargo test"}))
    );
    for text in [
        "<think>\nThe user wants the build checked. Run `cargo test` to check it.\n</think>\n",
        "Thought: Run `cargo test` to check the build.",
        "Let me run `cargo test` to check the build.",
        "I'll run `cargo test` to check the build.",
    ] {
        assert_eq!(
            calls_in(None, Some(text), &code),
            one_call("execute_command", json!({"command": "cargo test"})),
            "{text}"
        );
    }
    // A modal whose subject is something else tells what that one does.
    for text in [
        "Rustc will now search for custom JSON targets in `/lib/rustlib/target.json`.",
        "After that the installer will run `make install` for you.",
        "The script should read `config.toml` at startup.",
        "The installer can then run `make install` for you.",
    ] {
        assert!(calls_in(None, Some(text), &code).is_empty(), "{text}");
    }
    assert_eq!(
        calls_in(None, Some("We can then run `make install`."), &code),
        one_call("execute_command", json!({"command": "make install"}))
    );
    // A hard-wrapped paragraph goes on over its line breaks: "pattern\nsearch" is a noun.
    let search = vec![tool("web_search", text_prop("query"), &["query"])];
    for text in [
        "A library for finding occurrences of many patterns at once. This library provides multiple pattern\nsearch principally through an implementation of the Aho-Corasick algorithm.",
        "Fix a bug that could result in incorrect match spans when using a Unicode word\nsearching in non-ASCII strings.",
    ] {
        assert!(calls_in(None, Some(text), &search).is_empty(), "{text}");
    }
    // A changelog's entries, a member access, a list of names, a path: no steps.
    let std_tools = standard_tools();
    for text in [
        "* \\[[`e52f0472bb`](https://github.com/nodejs/node/commit/e52f0472bb)] - **tools**: update certdata.txt (Luigi Pinca) [#45490](https://github.com/nodejs/node/pull/45490)",
        "  * update certdata.txt (Luigi Pinca) [#45490](https://github.com/nodejs/node/pull/45490)",
        "The child's output arrives on ls.stdout.on('data') as it is written.",
        "Read/Write/RawFd are implemented for the new types.",
        "std::io::Read is implemented for the slice.",
        "- search works across crates that have been rendered to the same output directory.",
    ] {
        assert!(calls_in(None, Some(text), &std_tools).is_empty(), "{text}");
    }
    assert_eq!(
        calls_in(None, Some("Let me read `certdata.txt` first."), &std_tools).len(),
        1
    );
    assert_eq!(
        calls_in(
            Some("The local search returns nothing. Let me search the web for Rust 1.80 news."),
            None,
            &search
        ),
        one_call("web_search", json!({"query": "Rust 1.80 news"}))
    );
    // A short line, a list, or a capital after the break: the next line stands alone.
    assert_eq!(
        calls_in(
            Some("The user wants the release date.\nLet me search for the Rust 1.80 release date."),
            None,
            &search
        ),
        one_call("web_search", json!({"query": "Rust 1.80 release date"}))
    );
    for (text, call) in [
        (
            "I will now search for custom JSON targets.",
            one_call("web_search", json!({"query": "custom JSON targets"})),
        ),
        (
            "So the tool call should be read_file with path `config.toml`.",
            one_call("read_file", json!({"path": "config.toml"})),
        ),
    ] {
        assert_eq!(calls_in(None, Some(text), &code), call, "{text}");
    }
    // A gerund that is the subject of the verb after it reports; a status line does not.
    for text in [
        "Running `pyenv install -l` gives the list of all available versions.",
        "### Running `npm install -g yarn` doesn't work",
    ] {
        assert!(calls_in(Some(text), Some(text), &code).is_empty(), "{text}");
    }
    assert_eq!(
        calls_in(None, Some("Running `npm test` to check the build."), &code),
        one_call("execute_command", json!({"command": "npm test"}))
    );
    // A query is never cut at a joining word, nor the other half of the verb.
    assert_eq!(
        calls_in(
            None,
            Some("I'll search for the latest news about AI and"),
            &code
        ),
        one_call("web_search", json!({"query": "latest news about AI"}))
    );
    assert!(calls_in(
        Some("Search or submit bugs against the project."),
        None,
        &code
    )
    .is_empty());
    // Comments in code are the code's; a fence of thinking is the model's own.
    for text in [
        "Here is the script:\n```js\n// Read the file config.json and print it\nconst c = fs.readFileSync('config.json');\n```",
        "```python\n# Search the web for the latest release\nresults = search('rust release')\n```",
    ] {
        assert!(calls_in(None, Some(text), &code).is_empty(), "{text}");
    }
    assert_eq!(
        calls_in(
            None,
            Some("```thinking\nThe user wants the config. I should read `config.json` first.\n"),
            &code
        ),
        one_call("read_file", json!({"path": "config.json"}))
    );
    // The words of a Markdown link name a page.
    for text in [
        "Changes:\n- [Search for tuples and unit by type with `()`.](https://github.com/rust-lang/rust/pull/118194/)",
        "For results in one chunk, see [`search`](#search-stream).",
        "- [Read `CONTRIBUTING.md` first][contrib]",
        "[Google Test]: https://github.com/google/googletest",
    ] {
        assert!(calls_in(None, Some(text), &code).is_empty(), "{text}");
    }
    assert_eq!(
        calls_in(
            None,
            Some("Let me search for \"tuple search\" (the change is [here](https://example.com/pr/1))."),
            &code
        ),
        one_call("web_search", json!({"query": "tuple search"}))
    );
}

#[test]
fn a_step_said_as_being_done_and_a_thing_called_by_a_bare_word() {
    let timer = vec![
        tool(
            "set_timer",
            json!({"name": {"type": "string"}, "duration_seconds": {"type": "integer"}}),
            &["name"],
        ),
        tool("look_up", text_prop("query"), &["query"]),
    ];
    assert_eq!(
        calls_in(None, Some("I'm setting a timer called barbecue"), &timer),
        one_call("set_timer", json!({"name": "barbecue"}))
    );
    assert_eq!(
        calls_in(
            None,
            Some("Sure! I am setting a timer named \"pasta\" now."),
            &timer
        ),
        one_call("set_timer", json!({"name": "pasta"}))
    );
    // Not done, not the model's, or no name after "called".
    for text in [
        "I'm not setting a timer, the oven has its own.",
        "You're setting a timer called barbecue, I see.",
        "Timers I was setting earlier are gone.",
    ] {
        assert!(calls_in(None, Some(text), &timer).is_empty(), "{text}");
    }
    let got = calls_in(
        None,
        Some("Setting a timer for the callback called when the page loads."),
        &timer,
    );
    assert!(
        got.iter()
            .all(|(_, a)| a.get("name") != Some(&json!("when"))),
        "{got:?}"
    );
}

#[test]
fn commands_referred_back_to_and_the_answer_s_own_step_from_the_twenty_ninth_consumed_part() {
    let shell = vec![tool("run_shell", text_prop("command"), &["command"])];
    // "This command" is the one the text named before.
    for (text, cmd) in [
        (
            "用戶要求我用 run_shell 工具執行 echo LOOPPROBE_77 命令，並回報輸出結果。我需要使用 run_shell 工具來執行這個命令。",
            "echo LOOPPROBE_77",
        ),
        (
            "用户要求执行一个不存在的命令 `nosuchcommand_xyz123`，然后看看是否能修正。\n\n让我先执行这个命令。",
            "nosuchcommand_xyz123",
        ),
        (
            "用戶要求用 run_shell 執行 tail -f /dev/null。這是一個安全的操作。我需要用 run_shell 工具來執行這個命令。",
            "tail -f /dev/null",
        ),
        (
            "The user asks me to run echo hi with run_shell. I need to use run_shell to run this command.",
            "echo hi",
        ),
    ] {
        assert_eq!(
            calls_in(Some(text), None, &shell),
            one_call("run_shell", json!({"command": cmd})),
            "{text}"
        );
    }
    // No command named before: the call is made without one, never with a guess.
    assert_eq!(
        calls_in(
            Some("I need to use run_shell to run this command."),
            None,
            &shell
        ),
        one_call("run_shell", json!({}))
    );
    // Refused, or the command is only named after the call.
    assert!(calls_in(
        Some("The user asks me to run `rm -rf /`. I will not run this command."),
        None,
        &shell
    )
    .is_empty());

    // The reasoning weighs what to look at; the answer says what the model does now.
    let bench = vec![
        tool("Read", text_prop("path"), &["path"]),
        tool("Bash", text_prop("command"), &["command"]),
        tool("Edit", text_prop("path"), &["path"]),
    ];
    let reasoning = "Let me analyze the bug.\n\nLook at `worker.py` for the handler. The except \
                     block never calls `queue.fail()`, so the job stays in processing.\n\nSo \
                     the fix is to call it.";
    assert_eq!(
        calls_in(
            Some(reasoning),
            Some("Let me run the simulation first to confirm the bug."),
            &bench
        ),
        one_call("Bash", json!({}))
    );
    // A step the reasoning ends on is the one it chose: it stays.
    assert_eq!(
        calls_in(
            Some("The path is outside the workspace. Let me read `notes.md` first."),
            Some("I can only write inside the workspace. Let me run the tests and write it there:"),
            &bench
        ),
        one_call("Read", json!({"path": "notes.md"}))
    );
    // Code the reasoning shows after "Look at …:" was read already.
    let shown =
        "Look at `dequeue()` in `job_queue.py`:\n\n```python\nasync def dequeue(self):\n    \
                 return None\n```\n\nThe sleep makes a race.";
    assert!(calls_in(Some(shown), None, &bench).is_empty());
    assert_eq!(
        calls_in(Some("Let me look at `job_queue.py` next."), None, &bench),
        one_call("Read", json!({"path": "job_queue.py"}))
    );
    // A lint check is a program's work.
    assert_eq!(
        calls_in(
            None,
            Some("HTML output is byte-identical. Let me do a quick lint check."),
            &bench
        ),
        one_call("Bash", json!({}))
    );
    assert!(calls_in(
        None,
        Some("Let me do a quick summary of the changes."),
        &bench
    )
    .is_empty());
}

#[test]
fn lacking_tools_searches_abbreviations_and_damaged_tags_from_the_twenty_ninth_consumed_part() {
    let weather = vec![tool("getWeather", text_prop("location"), &["location"])];
    // What the model lacks is no step.
    for text in [
        "The available tools lack the necessary functionality to answer this question.  I need access to a weather API to get weather information for Baltimore.",
        "I would need access to a live feed to check the weather in Oslo.",
    ] {
        assert!(calls_in(None, Some(text), &weather).is_empty(), "{text}");
    }
    assert_eq!(
        calls_in(
            None,
            Some("I need to get the weather for Baltimore."),
            &weather
        ),
        one_call("getWeather", json!({"location": "Baltimore"}))
    );

    // A search with a web search offered and no search of the code is the web's.
    let ide = vec![
        tool("web_search", text_prop("query"), &["query"]),
        tool("read_file", text_prop("path"), &["path"]),
        tool("write_file", text_prop("path"), &["path"]),
        tool("run_command", text_prop("command"), &["command"]),
    ];
    assert_eq!(
        calls_in(None, Some("Searching for that now."), &ide),
        one_call("web_search", json!({}))
    );
    // The code is not searched on the web; the web is, for a project's pages.
    let got = calls_in(
        None,
        Some("Let me search the codebase for `parse_config` usages."),
        &ide,
    );
    assert!(got.iter().all(|(n, _)| n != "web_search"), "{got:?}");
    assert_eq!(
        calls_in(
            None,
            Some("Let me search the web for the project's release notes."),
            &ide
        )
        .len(),
        1
    );
    let no_web = vec![
        tool("read_file", text_prop("path"), &["path"]),
        tool("run_command", text_prop("command"), &["command"]),
        tool("fetch_page", text_prop("url"), &["url"]),
    ];
    assert_eq!(
        calls_in(None, Some("Searching for that now."), &no_web),
        one_call("run_command", json!({}))
    );

    // An abbreviation opening a tool's name is no verb.
    let cells = vec![
        tool("sc_celltypist", text_prop("input_path"), &[]),
        tool("sc_qc", text_prop("input_path"), &[]),
    ];
    for text in [
        "Merged h5ad is ready for:\n1. Normalisation (sc.pp.normalize_total + log1p)\n2. PCA",
        "Use sc.tl.leiden for clustering.",
    ] {
        assert!(calls_in(None, Some(text), &cells).is_empty(), "{text}");
    }
    assert_eq!(
        calls_in(
            None,
            Some("I'll run sc_celltypist on `data/merged.h5ad` now."),
            &cells
        )
        .len(),
        1
    );
    // A word of one tool's name, said as the thing run.
    for text in [
        "I'll run CellTypist with the Cells_Adult_Breast model and majority voting.",
        "Let me use the celltypist tool now.",
    ] {
        assert_eq!(
            calls_in(None, Some(text), &cells),
            one_call("sc_celltypist", json!({})),
            "{text}"
        );
    }
    let shared = vec![
        tool("celltypist_annotate", text_prop("input_path"), &[]),
        tool("celltypist_train", text_prop("input_path"), &[]),
    ];
    for (text, tools) in [
        ("CellTypist is the tool I ran earlier.", &cells),
        ("I won't run CellTypist on these samples.", &cells),
        ("If the clusters look off, I'll run CellTypist.", &cells),
        // Two tools hold the word: which is meant is not said.
        ("I'll run CellTypist now.", &shared),
    ] {
        assert!(calls_in(None, Some(text), tools).is_empty(), "{text}");
    }

    // `restaurant_booking` is booked; "for 2 people" is its party's size.
    let dining = vec![
        tool(
            "restaurant_booking",
            json!({"restaurant_id": {"type": "string"}, "party_size": {"type": "integer"}}),
            &["restaurant_id", "party_size"],
        ),
        tool(
            "restaurant_search",
            text_prop("preferences"),
            &["preferences"],
        ),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("7:30 PM is free. Now I'll book your reservation at Ocean's Bounty for 2 people."),
            &dining
        ),
        one_call("restaurant_booking", json!({"party_size": 2}))
    );
    for text in [
        "I booked your table at Ocean's Bounty for 2 people yesterday.",
        "Would you like me to book a table for four guests?",
    ] {
        assert!(calls_in(None, Some(text), &dining).is_empty(), "{text}");
    }

    // The next sentence, committing to the same step, names its one place.
    let city = vec![tool("get_weather", text_prop("city"), &["city"])];
    assert_eq!(
        calls_in(
            None,
            Some("I'm checking the weather for you! Let me find out what it's like in Sydney."),
            &city
        ),
        one_call("get_weather", json!({"city": "Sydney"}))
    );
    let got = calls_in(
        None,
        Some("I'm checking the weather for you! The forecast in Sydney was wrong yesterday."),
        &city,
    );
    assert!(got.iter().all(|(_, a)| a.get("city").is_none()), "{got:?}");

    // A tool named for its own work is not also what its description's nouns name:
    // `todowrite`'s "task list" does not list files.
    let claude = vec![
        ToolSpec::new(
            "todowrite",
            "Create and manage a structured task list",
            obj(json!({"todos": {"type": "array"}}), &["todos"]),
        ),
        ToolSpec::new(
            "Glob",
            "Fast file pattern matching tool",
            obj(text_prop("pattern"), &["pattern"]),
        ),
        ToolSpec::new(
            "Read",
            "Reads a file from the local filesystem",
            obj(text_prop("file_path"), &["file_path"]),
        ),
    ];
    let got = calls_in(
        None,
        Some("I'll list all Cargo.toml files and show you the root one."),
        &claude,
    );
    assert!(got.iter().all(|(n, _)| n != "todowrite"), "{got:?}");
    assert_eq!(
        calls_in(
            None,
            Some("Let me update the todo list with the new steps."),
            &claude
        )
        .first()
        .map(|(n, _)| n.as_str()),
        Some("todowrite")
    );

    // Roo's tag opened in brackets, or never closed inside a wrapper the model invented.
    let roo = vec![
        tool("read_file", text_prop("path"), &["path"]),
        tool("list_files", text_prop("path"), &["path"]),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("[read_file]\n<args>\n<file>\n<path>info.json</path>\n</file>\n</read_file>"),
            &roo
        ),
        one_call("read_file", json!({"path": "info.json"}))
    );
    assert_eq!(
        calls_in(
            None,
            Some("<filesystem>\n<read_file>\n<path>/srv/app/info.json</path>\n</filesystem>"),
            &roo
        ),
        one_call("read_file", json!({"path": "/srv/app/info.json"}))
    );
    for text in [
        "[read_file] is the tool I used. It returned the text below.",
        "<read_file>\n<path>info.json</path>\nThis is how the tool is called; the reply follows.",
        "The docs say `[read_file]` takes <path>.",
    ] {
        assert!(calls_in(None, Some(text), &roo).is_empty(), "{text}");
    }

    // Repeated tags of an array property are its items.
    let argv = vec![tool(
        "shell",
        json!({"command": {"type": "array", "items": {"type": "string"}}, "workdir": {"type": "string"}}),
        &["command"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some("<shell><command>git</command><command>log</command><justification>oneline</justification><command>-10</command><workdir>.</workdir></shell>"),
            &argv
        ),
        one_call("shell", json!({"command": ["git", "log", "-10"], "workdir": "."}))
    );

    // Chinese "first, call X" commits; "if needed, X can be called" does not.
    let now = vec![tool("now", json!({}), &[])];
    for text in [
        "好的，用户问现在几点。首先，调用now函数，不需要参数。",
        "讓我調用now函數。",
    ] {
        assert_eq!(
            calls_in(Some(text), None, &now),
            one_call("now", json!({})),
            "{text}"
        );
    }
    for text in ["如果需要，可以调用now函数。", "我已经调用了now函数。"] {
        assert!(calls_in(Some(text), None, &now).is_empty(), "{text}");
    }
}

#[test]
fn a_review_s_attacks_on_the_thirtieth_round_s_rules_are_refused() {
    // A tool name with a multi-byte word ending in "ing" parses (it once panicked).
    let odd = vec![tool("get_ポッing", text_prop("q"), &["q"])];
    assert!(calls_in(None, Some("hello"), &odd).is_empty());

    // Glued names: only a noun glued to a verb (`dispatch` is no "patch").
    let claude = vec![
        tool("dispatch_agent", text_prop("prompt"), &["prompt"]),
        tool("edit_file", text_prop("path"), &["path"]),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("Let me update the version number in Cargo.toml."),
            &claude
        ),
        one_call("edit_file", json!({"path": "Cargo.toml"}))
    );

    // A verb of thought in a tool's name is no verb of the model's.
    let thinking = vec![
        tool("sequential_thinking", text_prop("thought"), &["thought"]),
        tool("web_search", text_prop("query"), &["query"]),
    ];
    for (r, c) in [
        (None, Some("Let me think about this step by step.")),
        (Some("Let me think about this carefully."), None),
    ] {
        assert!(calls_in(r, c, &thinking).is_empty(), "{r:?} {c:?}");
    }

    // "use the X data" is no tool; "use X to …" and "the X tool" are.
    let weather = vec![
        tool("get_weather", text_prop("location"), &["location"]),
        tool("web_search", text_prop("query"), &["query"]),
    ];
    assert!(calls_in(
        None,
        Some("I'll use the weather data above to answer your question."),
        &weather
    )
    .is_empty());

    // A later or conditional step in the answer does not replace the reasoning's.
    let notes = vec![
        tool("web_search", text_prop("query"), &["query"]),
        tool(
            "write_file",
            json!({"path": {"type": "string"}, "content": {"type": "string"}}),
            &["path", "content"],
        ),
    ];
    assert_eq!(
        calls_in(
            Some("The user wants the latest Rust release saved to notes.md. I'll search the web for the latest Rust release. Let me do that."),
            Some("I'll write a short summary of the results to notes.md once the search is done."),
            &notes
        ),
        one_call("web_search", json!({"query": "latest Rust release"}))
    );

    // A command line stops at its line, however the paragraph wraps.
    let got = calls_in(
        None,
        Some("To understand the layout of this project I will start with a listing, so let me run ls\nfollowed by a quick look at the README file."),
        &standard_tools(),
    );
    assert!(
        got.iter()
            .all(|(_, a)| a.get("command").is_none_or(|c| c == "ls")),
        "{got:?}"
    );

    // What the model lacks, then a step it commits to: the step stands.
    assert_eq!(
        calls_in(
            None,
            Some("I need access to the file contents, so let me read src/main.rs."),
            &standard_tools()
        )
        .len(),
        1
    );

    // A web search for something a project or a directory has is still a web search.
    let web = vec![
        tool("web_search", text_prop("query"), &["query"]),
        tool("read_file", text_prop("path"), &["path"]),
    ];
    for text in [
        "Let me search the web for known CVEs in the dependencies listed in the project.",
        "I'll search the web for the phone number in the directory of Stanford faculty.",
    ] {
        let got = calls_in(None, Some(text), &web);
        assert_eq!(
            got.first().map(|(n, _)| n.as_str()),
            Some("web_search"),
            "{text}"
        );
    }

    // A place's capacity is no party's size.
    let dining = vec![tool(
        "restaurant_booking",
        json!({"restaurant": {"type": "string"}, "party_size": {"type": "integer"}}),
        &["restaurant"],
    )];
    let got = calls_in(
        None,
        Some("I'll book a table at Luigi's, which seats 120 people, for tonight."),
        &dining,
    );
    assert!(
        got.iter().all(|(_, a)| a.get("party_size").is_none()),
        "{got:?}"
    );
    let got = calls_in(
        None,
        Some("I'll book a table for one person at Luigi's."),
        &dining,
    );
    assert!(
        got.iter()
            .any(|(_, a)| a.get("party_size") == Some(&json!(1))),
        "{got:?}"
    );

    // A command named in Chinese ends where the Chinese goes on.
    let shell = vec![tool("run_shell", text_prop("command"), &["command"])];
    let got = calls_in(
        Some("用户要求我执行 ls 然后告诉他结果。我来执行这个命令。"),
        None,
        &shell,
    );
    assert!(
        got.iter()
            .all(|(_, a)| a.get("command").is_none_or(|c| c == "ls")),
        "{got:?}"
    );

    // A tag never closed at the end of a sentence is an example, not markup.
    assert!(calls_in(
        None,
        Some("To list files, the syntax would be <run_shell><command>ls -la</command>"),
        &shell
    )
    .is_empty());

    // Code shown after "open the page:" is no page read already.
    let browser = vec![tool("open_url", text_prop("url"), &["url"])];
    assert_eq!(
        calls_in(
            None,
            Some("Let me open the page:\n```\nhttps://example.com/docs\n```"),
            &browser
        )
        .len(),
        1
    );
}

#[test]
fn positional_brackets_shaped_values_first_steps_and_other_languages_from_the_thirtieth_consumed_part(
) {
    // `tool[a, b]` with as many values as required properties, in their order.
    let travel = vec![
        tool("get_weather", text_prop("城市名"), &["城市名"]),
        tool(
            "get_attraction",
            json!({"城市名": {"type": "string"}, "天气摘要": {"type": "string"}}),
            &["城市名", "天气摘要"],
        ),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("Thought: 北京当前是霾天。接下来我需要检索景点。\nAction: get_attraction[北京, 霾 26°C 微风]"),
            &travel
        ),
        one_call(
            "get_attraction",
            json!({"城市名": "北京", "天气摘要": "霾 26°C 微风"})
        )
    );
    // One required property: the commas are the value's.
    assert_eq!(
        calls_in(
            None,
            Some("Thought: I need the weather.\nAction: get_weather[Paris, France]"),
            &travel
        ),
        one_call("get_weather", json!({"城市名": "Paris, France"}))
    );
    // An action glued to the thought's last sentence.
    let course = vec![tool("search_course_info", text_prop("query"), &["query"])];
    assert_eq!(
        calls_in(
            None,
            Some("Thought: Đầu tiên, tôi sẽ tìm ở Quận 1, TP.HCM.Action: search_course_info(khóa học AI Quận 1)"),
            &course
        ),
        one_call("search_course_info", json!({"query": "khóa học AI Quận 1"}))
    );
    assert!(calls_in(
        None,
        Some("The Action: field names the tool; search_course_info(x) is how it looks."),
        &course
    )
    .is_empty());

    // An ISO time and e-mail addresses fill the properties their shape fits.
    let meeting = vec![tool(
        "schedule_meeting",
        json!({
            "title": {"type": "string"},
            "time": {"type": "string", "description": "Meeting time in ISO 8601 format"},
            "attendees": {"type": "array", "items": {"type": "string"}, "description": "List of attendee email addresses"}
        }),
        &["title", "time"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some("I will schedule a meeting titled 'Sprint Review' for 2025-02-10T14:00:00 with the attendees alice@co.com and bob@co.com."),
            &meeting
        ),
        one_call(
            "schedule_meeting",
            json!({"title": "Sprint Review", "time": "2025-02-10T14:00:00", "attendees": ["alice@co.com", "bob@co.com"]})
        )
    );
    // Two times: which one is meant is not said.
    let got = calls_in(
        None,
        Some("I will schedule a meeting titled 'Sync' for 2025-02-10T14:00:00 or 2025-02-11T09:00:00."),
        &meeting,
    );
    assert!(got.iter().all(|(_, a)| a.get("time").is_none()), "{got:?}");

    // A zone is no time.
    let clock = vec![tool(
        "convert_time",
        json!({"timezone": {"type": "string"}, "label": {"type": "string"}}),
        &["timezone"],
    )];
    let got = calls_in(
        None,
        Some("I'll convert 2025-02-10T14:00:00 with convert_time for the team."),
        &clock,
    );
    assert!(
        got.iter()
            .all(|(_, a)| a.get("timezone") != Some(&json!("2025-02-10T14:00:00"))),
        "{got:?}"
    );

    // A plan of several steps whose first the model names: only that one now.
    let mail = vec![
        tool("get_emails", json!({}), &[]),
        tool("get_projects", json!({}), &[]),
        tool(
            "send_email",
            json!({"to": {"type": "string"}, "body": {"type": "string"}}),
            &["to"],
        ),
    ];
    let plan = "Step 1: get the last email with get_emails. Step 2: get all projects with get_projects. Step 3: send_email to the owner.\n\nSo the first action is to call get_emails. Let's do that.";
    assert_eq!(
        calls_in(Some(plan), None, &mail),
        one_call("get_emails", json!({}))
    );

    // Chinese nouns of a tool's name and a name written in Latin letters.
    let ops = vec![
        tool(
            "check_server_status",
            text_prop("server_name"),
            &["server_name"],
        ),
        tool("view_service_logs", text_prop("service"), &["service"]),
        tool("get_system_metrics", json!({}), &[]),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("我来帮您查看 web-server-01 服务器的状态。"),
            &ops
        ),
        one_call(
            "check_server_status",
            json!({"server_name": "web-server-01"})
        )
    );
    assert_eq!(
        calls_in(
            None,
            Some("现在让我获取更详细的系统监控指标来分析性能状况："),
            &ops
        ),
        one_call("get_system_metrics", json!({}))
    );
    assert!(calls_in(None, Some("服务器 web-server-01 的状态已经正常了。"), &ops).is_empty());

    // Gemma 4's block around an envelope whose `id` names the tool.
    let memory = vec![tool("memory_search", text_prop("query"), &["query"])];
    assert_eq!(
        calls_in(
            None,
            Some("<|tool_call>call:tool_call{args:{query:<|\"|>тренировки на пресс<|\"|>},id:<|\"|>memory_search<|\"|>}<tool_call|>"),
            &memory
        ),
        one_call("memory_search", json!({"query": "тренировки на пресс"}))
    );
    assert!(calls_in(
        None,
        Some("<|tool_call>call:tool_call{args:{query:<|\"|>x<|\"|>},id:<|\"|>web_lookup<|\"|>}<tool_call|>"),
        &memory
    )
    .is_empty());

    // A code agent's step: a tool called with a variable of an earlier step, and code
    // between `<code>` tags.
    let agent = vec![
        tool("web_search", text_prop("query"), &["query"]),
        tool("final_answer", text_prop("answer"), &["answer"]),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("Thought: The playlist is ready.\n\nCode:\n```py\nfinal_answer(music_playlist)\n```"),
            &agent
        ),
        one_call("final_answer", json!({}))
    );
    assert_eq!(
        calls_in(
            None,
            Some("<code>\nfinal_answer(\"It takes about 9.6 seconds.\")\n</code>"),
            &agent
        ),
        one_call(
            "final_answer",
            json!({"answer": "It takes about 9.6 seconds."})
        )
    );
    assert!(calls_in(
        None,
        Some("The answer is:\n<code>\nprint(result)\n</code>"),
        &agent
    )
    .is_empty());

    // A Japanese or Russian coding agent's next step.
    let bench = vec![
        tool("bash", text_prop("command"), &["command"]),
        tool("edit", text_prop("filePath"), &["filePath"]),
        tool("read_file", text_prop("path"), &["path"]),
    ];
    for (text, name) in [
        (
            "テストを実行して、翻訳機能が動作するか確認します。\n\nテストします：",
            "bash",
        ),
        (
            "まず翻訳関数を修正して、純粋な英語訳だけを抽出するようにします：",
            "edit",
        ),
        (
            "Нужно прочитать файл test.txt для определения его содержимого",
            "read_file",
        ),
    ] {
        let got = calls_in(None, Some(text), &bench);
        assert_eq!(got.first().map(|(n, _)| n.as_str()), Some(name), "{text}");
    }
    for (text, name) in [
        (
            "Let me rename the function `toMeV` to `toMeVperNucl`.",
            "edit",
        ),
        ("Let me rename the file config.yml to config.yaml.", "bash"),
    ] {
        let got = calls_in(None, Some(text), &bench);
        assert_eq!(got.first().map(|(n, _)| n.as_str()), Some(name), "{text}");
    }
    for text in [
        "テストは実行しません。",
        "テストを実行しました。",
        "Я уже прочитал файл test.txt.",
        "Не нужно читать файл test.txt.",
    ] {
        assert!(calls_in(None, Some(text), &bench).is_empty(), "{text}");
    }
}

#[test]
fn a_review_s_attacks_on_the_thirty_first_round_s_rules_are_refused() {
    // A value the text binds by its key stays: an address inside a query is the query's.
    let mail = vec![ToolSpec::new(
        "search_emails",
        "",
        obj(
            json!({"query": {"type": "string", "description": "Search query for emails"}}),
            &["query"],
        ),
    )];
    assert_eq!(
        calls_in(
            None,
            Some("I'll search emails with query \"from:bob@co.com invoice\"."),
            &mail
        ),
        one_call("search_emails", json!({"query": "from:bob@co.com invoice"}))
    );
    // A value with a comma in brackets, for a tool whose second property it does not fit.
    let weather = vec![tool(
        "get_weather",
        json!({"location": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}),
        &["location", "unit"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some("Thought: I need the weather.\nAction: get_weather[Paris, France]"),
            &weather
        ),
        one_call("get_weather", json!({"location": "Paris, France"}))
    );
    // Renaming a file is the shell's, however the words split.
    let bench = vec![
        tool("run_shell", text_prop("command"), &["command"]),
        tool("edit_file", text_prop("path"), &["path"]),
        tool("read_file", text_prop("path"), &["path"]),
    ];
    assert_eq!(
        calls_in(None, Some("Let me rename utils.py to helpers.py."), &bench)
            .first()
            .map(|(n, _)| n.clone()),
        Some("run_shell".to_string())
    );
    // "The first call would be X if …" names no first step.
    let two = vec![
        tool("get_weather", text_prop("city"), &["city"]),
        tool("get_news", text_prop("topic"), &["topic"]),
    ];
    let got = calls_in(
        None,
        Some("I'll check the weather in Paris and get the news about Paris. Both at once; the first call would be get_weather if they depended on each other, but they don't."),
        &two,
    );
    assert!(got.iter().any(|(n, _)| n == "get_news"), "{got:?}");
    // Code shown in `<code>` tags to the reader is no step.
    assert!(calls_in(
        None,
        Some("Here is how the helper is used in the docs:\n<code>\nread_file(\"notes.txt\")\n</code>\nYou can paste it into your script."),
        &bench
    )
    .is_empty());
    // Japanese: explaining, asking and musing are no work; Chinese with a katakana aside
    // still is.
    for text in [
        "変更点を説明します。",
        "変更内容のご確認をお願いします。",
        "修正が完了したことを報告します。",
        "このエラーをどう修正しよう",
    ] {
        assert!(calls_in(None, Some(text), &bench).is_empty(), "{text}");
    }
    assert_eq!(
        calls_in(None, Some("コードを読みやすく改善します。"), &bench)
            .first()
            .map(|(n, _)| n.clone()),
        Some("edit_file".to_string())
    );
    assert_eq!(
        calls_in(None, Some("我来运行测试（テスト）。"), &bench)
            .first()
            .map(|(n, _)| n.clone()),
        Some("run_shell".to_string())
    );
    // Russian: a noun, a change taking effect, the reader's step.
    for text in [
        "Теперь проверка пройдена успешно.",
        "Теперь исправление готово.",
        "Сейчас изменения вступят в силу.",
        "Вам нужно выполнить команду npm install.",
        "Теперь запустите тесты.",
    ] {
        assert!(calls_in(None, Some(text), &bench).is_empty(), "{text}");
    }
    // A number, a date or a version is no name.
    let ops = vec![
        tool("get_system_logs", text_prop("service"), &["service"]),
        tool("get_server_status", text_prop("server_id"), &["server_id"]),
    ];
    for text in [
        "我来帮您查看最近24小时的系统日志。",
        "我来帮您查看2024-05-01的服务器状态。",
    ] {
        let got = calls_in(None, Some(text), &ops);
        assert!(
            got.iter()
                .all(|(_, a)| a.as_object().is_some_and(|o| o.is_empty())),
            "{text}: {got:?}"
        );
    }
    // An "Action:" glued in prose without a trace is no action.
    let search = vec![tool("web_search", text_prop("query"), &["query"])];
    assert!(calls_in(
        None,
        Some("Please answer using this format.Action: web_search[your query]\nObservation: the result"),
        &search
    )
    .is_empty());
    // A flat envelope keeps the keys beside the name.
    let city = vec![tool("get_weather", text_prop("city"), &["city"])];
    assert_eq!(
        calls_in(
            None,
            Some("<start_function_call>call:tool_call{name:<escape>get_weather<escape>,city:<escape>Paris<escape>}<end_function_call>"),
            &city
        ),
        one_call("get_weather", json!({"city": "Paris"}))
    );
}

#[test]
fn named_inputs_gorilla_markers_pairs_referred_files_and_other_languages_from_the_thirty_first_consumed_part(
) {
    // `Action: tool: input` (DeepLearning.AI's ReAct with PAUSE): the input after the name.
    let dogs = vec![
        tool("average_dog_weight", text_prop("name"), &["name"]),
        tool("calculate", text_prop("what"), &["what"]),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("Thought: I need the weight of a Border Collie.\nAction: average_dog_weight: Border Collie\nPAUSE"),
            &dogs
        ),
        one_call("average_dog_weight", json!({"name": "Border Collie"}))
    );
    assert_eq!(
        calls_in(
            None,
            Some("Thought: Now the sum.\nAction: calculate: 37 + 20\nPAUSE"),
            &dogs
        ),
        one_call("calculate", json!({"what": "37 + 20"}))
    );
    // A tool whose name has spaces is still the whole line.
    let crew = vec![tool(
        "Delegate work to coworker",
        text_prop("task"),
        &["task"],
    )];
    let got = calls_in(
        None,
        Some("Thought: Hand it over.\nAction: Delegate work to coworker\nAction Input: {\"task\": \"write the intro\"}"),
        &crew,
    );
    assert_eq!(
        got,
        one_call(
            "Delegate work to coworker",
            json!({"task": "write the intro"})
        )
    );

    // Gorilla OpenFunctions' markers open calls; one before a function list opens none.
    let weather = vec![tool(
        "get_current_weather",
        json!({"location": {"type": "string"}, "unit": {"type": "string"}}),
        &["location"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some(" <<function>>get_current_weather(location=\"Boston, MA\")<<function>>get_current_weather(location=\"San Francisco, CA\")"),
            &weather
        ),
        vec![
            ("get_current_weather".to_string(), json!({"location": "Boston, MA"})),
            ("get_current_weather".to_string(), json!({"location": "San Francisco, CA"})),
        ]
    );
    assert!(calls_in(
        None,
        Some("<<function>>[{\"name\": \"get_current_weather\", \"description\": \"Get the weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"location\": {\"type\": \"string\"}}}}]\n<<question>>What is the weather in Boston?"),
        &weather
    )
    .is_empty());

    // A ```tool_call fence holding a name and its arguments as a pair, on the fence's line.
    let python = vec![tool("python", text_prop("code"), &["code"])];
    assert_eq!(
        calls_in(
            None,
            Some("```tool_call [     \"python\",     {         \"code\": \"print(2 ** 10)\"     } ] ```"),
            &python
        ),
        one_call("python", json!({"code": "print(2 ** 10)"}))
    );
    for text in [
        // A name not offered, or no arguments object: no pair.
        "```tool_call\n[\"ruby\", {\"code\": \"puts 1\"}]\n```",
        "```tool_call\n[\"python\", \"print(1)\"]\n```",
        // A list of data that happens to start with the name.
        "The modes are:\n```json\n[\"python\", \"ruby\"]\n```",
    ] {
        assert!(calls_in(None, Some(text), &python).is_empty(), "{text}");
    }

    // Russian: "я воспользуюсь инструментом X" and its arguments in the block below.
    let analyzer = vec![tool(
        "password_analyzer",
        text_prop("password"),
        &["password"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some("Чтобы оценить надежность указанного пароля, я воспользуюсь инструментом **password_analyzer**.\n\n```\n{\n  \"password\": \"password123\"\n}\n```\n\nПосле анализа инструмент предоставит оценку."),
            &analyzer
        ),
        one_call("password_analyzer", json!({"password": "password123"}))
    );
    for text in [
        "Я не буду использовать инструмент **password_analyzer**: пароль и так слабый.",
        "Я уже использую инструмент password_analyzer, результат ниже.",
        "Вы можете использовать инструмент password_analyzer сами.",
    ] {
        assert!(calls_in(None, Some(text), &analyzer).is_empty(), "{text}");
    }

    // "Let me read that file": the file the paragraph named last.
    let code = vec![
        tool("read_file", text_prop("path"), &["path"]),
        tool(
            "search_code",
            json!({"folder_path": {"type": "string"}, "query": {"type": "string"}}),
            &["folder_path", "query"],
        ),
        tool(
            "list_folder_contents",
            text_prop("folder_path"),
            &["folder_path"],
        ),
    ];
    assert_eq!(
        calls_in(
            Some("The flag is defined in cmd/root.go. Let me read that file to see how it's used."),
            None,
            &code
        ),
        one_call("read_file", json!({"path": "cmd/root.go"}))
    );
    // (A file named in an earlier paragraph is not the one referred to.)
    let got = calls_in(
        Some("The flag is defined in cmd/root.go.\n\nThe config comes from elsewhere. Let me read that file."),
        None,
        &code,
    );
    assert!(got.iter().all(|(_, a)| a.get("path").is_none()), "{got:?}");
    // A search tool's query, not its folder, is what is searched for; "in the codebase"
    // says where.
    assert_eq!(
        calls_in(
            Some("Let me search for ATIF in the codebase to understand how it's used."),
            None,
            &code
        ),
        one_call("search_code", json!({"query": "ATIF"}))
    );
    assert_eq!(
        calls_in(
            Some("Let me search for any other references to \"instructions\" in the codebase."),
            None,
            &code
        ),
        one_call("search_code", json!({"query": "instructions"}))
    );

    // A type's member is no file; a file with an extension still is.
    let ide = vec![
        tool("read", text_prop("filePath"), &["filePath"]),
        tool("grep", text_prop("pattern"), &["pattern"]),
        tool("bash", text_prop("command"), &["command"]),
        tool("edit", text_prop("filePath"), &["filePath"]),
    ];
    let got = calls_in(
        Some("I need to check if there are other tests that reference InputEvent.Move so I can update them."),
        None,
        &ide,
    );
    assert!(
        got.iter().all(|(_, a)| a.get("filePath").is_none()),
        "{got:?}"
    );
    assert_eq!(
        calls_in(
            Some("Let me read Config.yaml to see the defaults."),
            None,
            &ide
        ),
        one_call("read", json!({"filePath": "Config.yaml"}))
    );

    // One test checked is read as code; tests checked are run.
    assert_eq!(
        calls_in(
            None,
            Some("Let me check the training framework test:"),
            &ide
        ),
        one_call("read", json!({}))
    );
    assert_eq!(
        calls_in(None, Some("Let me check the tests pass now."), &ide),
        one_call("bash", json!({}))
    );

    // A prompt's example step quoted in the reasoning is no call; the step after it is.
    let shop = vec![tool(
        "get_products_by_category",
        text_prop("category"),
        &["category"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some("*   The example turn shows:\n        Thought: I need to see available laptops.\n        Action: get_products_by_category(\"laptop\")\n\n*   The user said no laptop.\nThought: I need keyboards.\nAction: get_products_by_category(\"keyboard\")"),
            &shop
        ),
        one_call("get_products_by_category", json!({"category": "keyboard"}))
    );
    // Calls shown under a heading of usage examples are the reader's; under another
    // heading they are made.
    let reader = vec![tool("read_file", text_prop("path"), &["path"])];
    assert!(calls_in(
        None,
        Some("Alles ist fertig.\n\n## Verwendungsbeispiele\n\n### read Tool\n```json\n{\n  \"tool\": \"read_file\",\n  \"arguments\": {\"path\": \"/path/to/file.txt\"}\n}\n```"),
        &reader
    )
    .is_empty());
    assert_eq!(
        calls_in(
            None,
            Some("## Next step\n\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"src/main.rs\"}}\n</tool_call>"),
            &reader
        ),
        one_call("read_file", json!({"path": "src/main.rs"}))
    );

    // German steps: "Lass mich … lesen", "Ich muss … auflisten"; not negated, not the
    // reader's.
    let workbench = vec![
        tool("read-file", text_prop("path"), &["path"]),
        tool("list", text_prop("path"), &["path"]),
        tool("bash", text_prop("script"), &["script"]),
    ];
    assert_eq!(
        calls_in(
            Some("Gut, es gibt eine __init__.py Datei. Lass mich die lesen."),
            None,
            &workbench
        ),
        one_call("read-file", json!({}))
    );
    assert_eq!(
        calls_in(
            Some("Ich muss zuerst die Verzeichnisstruktur auflisten."),
            None,
            &workbench
        ),
        one_call("list", json!({}))
    );
    for text in [
        "Ich werde die Datei nicht lesen.",
        "Du musst zuerst die Verzeichnisstruktur auflisten.",
        "Ich habe die Datei bereits gelesen.",
    ] {
        assert!(calls_in(Some(text), None, &workbench).is_empty(), "{text}");
    }

    // Chinese: "我会运行 …", "改用 Docker 构建" (switching to, then the work), "启动".
    let codex = vec![
        tool("exec", text_prop("command"), &["command"]),
        tool("read_file", text_prop("path"), &["path"]),
    ];
    for text in [
        "现在只剩浏览器级验证；我会运行 Playwright。",
        "当前环境没有安装 Maven，因此我会改用 Docker 构建后端镜像来完成 Java 编译验证。",
        "好的，我来启动本地开发服务器。",
    ] {
        assert_eq!(
            calls_in(None, Some(text), &codex),
            one_call("exec", json!({})),
            "{text}"
        );
    }
    for text in ["我不会运行 Playwright。", "我已经运行过 Playwright 了。"] {
        assert!(calls_in(None, Some(text), &codex).is_empty(), "{text}");
    }
}

#[test]
fn a_review_s_attacks_on_the_thirty_second_round_s_rules_are_refused() {
    let weather = vec![tool("get_weather", text_prop("city"), &["city"])];
    // A ReAct step after an ordinary thought is made, whatever the thought says.
    for thought in [
        "To answer, I would need the current weather in Paris",
        "I need a city, for example Paris",
        "Here's how I'll proceed: look it up",
    ] {
        let text = format!(
            "Thought: {thought}\nAction: get_weather\nAction Input: {{\"city\": \"Paris\"}}\n"
        );
        assert_eq!(
            calls_in(None, Some(&text), &weather),
            one_call("get_weather", json!({"city": "Paris"})),
            "{text}"
        );
    }
    // A thought ending "example:" hides no step after it. (An observation the model
    // wrote itself ends what the harness runs at the action before it: round 35.)
    let two = vec![
        tool("search", text_prop("query"), &["query"]),
        tool("get_weather", text_prop("city"), &["city"]),
    ];
    let got = calls_in(
        None,
        Some("Thought: Paris is a city. Here is an example:\nAction: get_weather[Paris]\n"),
        &two,
    );
    assert!(got.iter().any(|(n, _)| n == "get_weather"), "{got:?}");
    let got = calls_in(
        None,
        Some("Thought: check.\nAction: search[paris]\nObservation: Paris is a city.\nThought: Now the weather.\nAction: get_weather[Paris]\n"),
        &two,
    );
    assert_eq!(got, one_call("search", json!({"query": "paris"})));
    // An indented example step with its input is the example's.
    assert!(calls_in(
        None,
        Some("The example turn shows:\n    Thought: I need the weather.\n    Action: get_weather\n    Action Input: {\"city\": \"Oslo\"}\n"),
        &weather
    )
    .is_empty());

    // Headings: only one about usage examples makes the calls below it examples; a fence's
    // comment is no heading.
    let shell = vec![tool("run_shell", text_prop("command"), &["command"])];
    let call = "<tool_call>\n{\"name\": \"run_shell\", \"arguments\": {\"command\": \"python add.py\"}}\n</tool_call>";
    for lead in [
        "I wrote the module:\n\n```python\ndef add(a, b):\n    return a + b\n\n# Example usage\nprint(add(1, 2))\n```\n\nNow let me run it.\n\n",
        "## Disk usage\n\n",
        "## Fix usage of deprecated API\n\n",
        "### Reproduce the counterexample\n\n",
        "## Примерный план\n\n",
        "# Example project setup\n\n## Step 1\n\n",
        "Let me list the example directory:\n",
    ] {
        let text = format!("{lead}{call}");
        assert_eq!(
            calls_in(None, Some(&text), &shell),
            one_call("run_shell", json!({"command": "python add.py"})),
            "{text}"
        );
    }
    assert!(calls_in(None, Some(&format!("## Usage examples\n\n{call}")), &shell).is_empty());

    // A fence's word is read where the fence is, once.
    let long = "```tool_x".repeat(20_000);
    assert!(calls_in(None, Some(&long), &shell).is_empty());
    // An inline ```tool_call fence in a sentence shows the format.
    for text in [
        "When you need a tool, write ```tool_call [\"get_weather\", {\"city\": \"Paris\"}]``` and wait.",
        "To call a tool you would emit ```tool_code get_weather(city=\"Paris\")``` on its own line.",
    ] {
        assert!(calls_in(None, Some(text), &weather).is_empty(), "{text}");
    }
    // A pair whose second item is a call is a list of calls.
    assert_eq!(
        calls_in(
            None,
            Some("<tool_call>[\"search\", {\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}]</tool_call>"),
            &two
        )
        .iter()
        .filter(|(n, _)| n == "get_weather")
        .count(),
        1
    );

    // Build variants of a file keep their capitalised extension.
    let reader = vec![tool("read_file", text_prop("path"), &["path"])];
    for (text, path) in [
        ("Let me read Makefile.Linux.", "Makefile.Linux"),
        ("Let me read `Dockerfile.Prod` first.", "Dockerfile.Prod"),
    ] {
        assert_eq!(
            calls_in(None, Some(text), &reader),
            one_call("read_file", json!({ "path": path })),
            "{text}"
        );
    }
    // A query stop ends at a word: "in the report" is part of the query.
    let web = vec![tool("web_search", text_prop("query"), &["query"])];
    assert_eq!(
        calls_in(
            None,
            Some("Let me search for revenue growth in the reporting pipeline."),
            &web
        ),
        one_call(
            "web_search",
            json!({"query": "revenue growth in the reporting pipeline"})
        )
    );
    // A tool name with a `functions.` prefix and spaces is still whole.
    let crew = vec![tool(
        "Delegate work to coworker",
        text_prop("task"),
        &["task"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some("Thought: hand over.\nAction: functions.Delegate work to coworker\nAction Input: {\"task\": \"intro\"}"),
            &crew
        ),
        one_call("Delegate work to coworker", json!({"task": "intro"}))
    );

    // German conditions, negations and requests to the reader are no steps.
    let de = vec![
        tool("read_file", text_prop("path"), &["path"]),
        tool("list_directory", text_prop("path"), &["path"]),
        tool("bash", text_prop("command"), &["command"]),
    ];
    for text in [
        "Ich muss die Datei src/main.rs nur lesen, falls der Test fehlschlägt.",
        "Sie sollten die Anwendung testen. Ich muss nichts testen.",
        "Ich werde den Server niemals starten.",
        "Lassen Sie die Datei src/main.rs testen.",
    ] {
        assert!(calls_in(Some(text), None, &de).is_empty(), "{text}");
    }
    // Russian conditions, habits, maybes and the reader.
    for text in [
        "Если понадобится, я использую get_weather позже.",
        "Тебе надо вызвать get_weather для Парижа.",
        "Обычно я использую get_weather для таких вопросов.",
        "Сначала отвечу, а потом, возможно, вызову get_weather.",
    ] {
        assert!(calls_in(None, Some(text), &weather).is_empty(), "{text}");
    }
    assert_eq!(
        calls_in(
            None,
            Some("Это не проблема: я воспользуюсь инструментом get_weather."),
            &weather
        )
        .len(),
        1
    );
    // Chinese conditions, avoidance, "I can" taken back, a build as a noun.
    let codex = vec![
        tool("exec", text_prop("command"), &["command"]),
        tool("read_file", text_prop("path"), &["path"]),
    ];
    for text in [
        "如果需要，我会运行 Playwright。",
        "需要的话我会构建镜像。",
        "我会编译 Rust 程序，但这里不需要。",
        "我会避免重新编译整个项目。",
        "我会分析构建失败的原因。",
    ] {
        assert!(calls_in(None, Some(text), &codex).is_empty(), "{text}");
    }
    // (A condition in a later clause leaves the step.)
    assert_eq!(
        calls_in(
            None,
            Some("我会运行 Playwright，若本机缺少浏览器则安装 Chromium 后重试。"),
            &codex
        ),
        one_call("exec", json!({}))
    );

    // "that file": never a directory, and a name written after the reference wins.
    let code = vec![tool("read_file", text_prop("path"), &["path"])];
    for text in [
        "The file lives under src/ somewhere. Let me read that file.",
        "The flag is in cmd/root.go. Let me read that file, pkg/x.go.",
        "cmd/root.go imports internal/flags.go. Let me read this file (root.go) again.",
    ] {
        let got = calls_in(Some(text), None, &code);
        assert!(
            got.iter().all(|(_, a)| a["path"] != "src/"
                && a["path"] != "cmd/root.go"
                && a["path"] != "internal/flags.go"),
            "{text}: {got:?}"
        );
    }
    // A search's place is not its query.
    let search = vec![tool(
        "search_code",
        json!({"folder_path": {"type": "string"}, "query": {"type": "string"}}),
        &["folder_path", "query"],
    )];
    assert_eq!(
        calls_in(
            Some("Let me search for parse_config in src/."),
            None,
            &search
        ),
        one_call("search_code", json!({"query": "parse_config"}))
    );
    // Gorilla's marker inside a written string stays.
    let write = vec![tool(
        "write_file",
        json!({"path": {"type": "string"}, "content": {"type": "string"}}),
        &["path", "content"],
    )];
    let got = calls_in(
        None,
        Some("<tool_call>{\"name\": \"write_file\", \"arguments\": {\"path\": \"p.txt\", \"content\": \"<<function>>get_weather(city=1)\"}}</tool_call>"),
        &write,
    );
    assert_eq!(
        got,
        one_call(
            "write_file",
            json!({"path": "p.txt", "content": "<<function>>get_weather(city=1)"})
        )
    );
}

#[test]
fn listed_steps_chinese_look_ups_cut_quotes_and_status_lines_from_the_thirty_second_consumed_part()
{
    // Terminus: listed steps without a name are the one offered tool they fill.
    let term = vec![tool(
        "Command",
        json!({"keystrokes": {"type": "string"}, "is_blocking": {"type": "boolean"}, "timeout_sec": {"type": "number"}}),
        &["keystrokes", "is_blocking", "timeout_sec"],
    )];
    let text = "{\n  \"state_analysis\": \"x\",\n  \"commands\": [\n    {\"keystrokes\": \"chmod +x run.sh\\n\", \"is_blocking\": true, \"timeout_sec\": 5},\n    {\"keystrokes\": \"./run.sh\\n\", \"is_blocking\": true, \"timeout_sec\": 30}\n  ],\n  \"is_task_complete\": false\n}";
    let got = calls_in(None, Some(text), &term);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[1].1["keystrokes"], "./run.sh\n");
    // (Done, nothing listed; and a list of records that fill no tool.)
    assert!(calls_in(
        None,
        Some("{\"commands\": [], \"is_task_complete\": true}"),
        &term
    )
    .is_empty());
    assert!(calls_in(
        None,
        Some("{\"commands\": [{\"keystrokes\": \"ls\\n\"}]}"),
        &term
    )
    .is_empty());

    // Chinese look-ups: one call per thing looked up together, with whose it is.
    let office = vec![
        tool("get_contact", text_prop("name"), &["name"]),
        tool("get_calendar", text_prop("date"), &["date"]),
        tool("get_weather", text_prop("location"), &["location"]),
        tool("web_search", text_prop("query"), &["query"]),
        tool(
            "send_email",
            json!({"to": {"type": "string"}, "subject": {"type": "string"}, "body": {"type": "string"}}),
            &["to", "subject", "body"],
        ),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("好的，我先同时查王五的联系方式和明天的日历安排。"),
            &office
        ),
        vec![
            ("get_calendar".to_string(), json!({})),
            ("get_contact".to_string(), json!({"name": "王五"})),
        ]
    );
    assert_eq!(
        calls_in(None, Some("让我帮你查一下北京的天气："), &office),
        one_call("get_weather", json!({"location": "北京"}))
    );
    assert_eq!(
        calls_in(
            None,
            Some("只找到公司邮箱。我再搜一下有没有他的私人邮箱。"),
            &office
        ),
        one_call("web_search", json!({}))
    );
    for text in [
        // The user's request reported, the user asked first, a condition.
        "好的，用户让我查深圳今天的天气，用摄氏度。",
        "不过，我需要您提供邮件的主题和正文内容，才能帮您发送。",
        "如果您需要发送邮件，我可以使用 `send_email` 工具来完成。",
    ] {
        assert!(calls_in(None, Some(text), &office).is_empty(), "{text}");
    }

    // "Thought: Action: x" on one line, and an input whose closing quote was cut.
    let exec = vec![tool("execute_command", text_prop("command"), &["command"])];
    assert_eq!(
        calls_in(
            None,
            Some("I can help with that.\n\nThought: Action: execute_command\nAction Input: \"pwd"),
            &exec
        ),
        one_call("execute_command", json!({"command": "pwd"}))
    );
    // (A quote inside a whole input stays.)
    assert_eq!(
        calls_in(
            None,
            Some("Thought: run it.\nAction: execute_command\nAction Input: echo \"hi\""),
            &exec
        ),
        one_call("execute_command", json!({"command": "echo \"hi\""}))
    );

    // A call named as a thing is not made; one the model makes is.
    let mail = vec![tool("email__search_emails", text_prop("query"), &["query"])];
    assert!(calls_in(
        None,
        Some("This is a JSON response for a function call to `email__search_emails` with the query \"nia\"."),
        &mail
    )
    .is_empty());
    assert_eq!(
        calls_in(
            None,
            Some("Let me make a call to `email__search_emails` with the query \"nia\"."),
            &mail
        ),
        one_call("email__search_emails", json!({"query": "nia"}))
    );

    // JSON past repair still names a tool that takes nothing; one that needs arguments
    // is not guessed.
    let phone = vec![
        tool("get_battery_level", json!({}), &[]),
        tool("web_search", text_prop("query"), &["query"]),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("<tool_call> {\" tool \": \" get _battery _level \", \" args \": {\" }} </tool_call>"),
            &phone
        ),
        one_call("get_battery_level", json!({}))
    );
    assert!(calls_in(
        None,
        Some("<tool_call> {\" tool \": \"web_search\", \" args \": {\" }} </tool_call>"),
        &phone
    )
    .is_empty());

    // A query set in bold after its label; an initialism keeps its dot, a sentence's
    // full stop goes.
    let memory = vec![tool("web_search", text_prop("query"), &["query"])];
    assert_eq!(
        calls_in(
            None,
            Some("I'll search for content related to the script updates. My search query:\n  \n  **\"memory-mcp script remove store tools\"**"),
            &memory
        ),
        one_call("web_search", json!({"query": "memory-mcp script remove store tools"}))
    );
    let trip = vec![tool(
        "get_distance",
        json!({"origin": {"type": "string"}, "destination": {"type": "string"}}),
        &["origin", "destination"],
    )];
    assert_eq!(
        calls_in(
            Some(
                "Origin: New York City\nDestination: Washington D.C.\n\nLet me call get_distance."
            ),
            None,
            &trip
        ),
        one_call(
            "get_distance",
            json!({"origin": "New York City", "destination": "Washington D.C."})
        )
    );
    assert_eq!(
        calls_in(
            Some("Origin: New York City\nDestination: Boston.\n\nLet me call get_distance."),
            None,
            &trip
        ),
        one_call(
            "get_distance",
            json!({"origin": "New York City", "destination": "Boston"})
        )
    );

    // Spanish and Chinese status lines, a Japanese branch cut, files cleaned up.
    let ide = vec![
        tool("read", text_prop("filePath"), &["filePath"]),
        tool("edit", text_prop("filePath"), &["filePath"]),
        tool("bash", text_prop("command"), &["command"]),
    ];
    for (text, name) in [
        (
            "Vamos a revisar la directiva `v-image-fallback` para entender el parpadeo.",
            "read",
        ),
        (
            "Vamos a empezar por mejorar la directiva `v-image-fallback`.",
            "edit",
        ),
        ("Tienes razón. Ejecuto build y push:", "bash"),
        ("Ahora hago commit y push:", "bash"),
        ("先查看文件末尾。读取第390-420行。", "read"),
        ("まずはブランチを切りましょう。", "bash"),
        ("Perfect! Now let me clean up the test files:", "bash"),
        ("Now let me clean up the code:", "edit"),
    ] {
        let got = calls_in(Some(text), None, &ide);
        assert_eq!(got.len(), 1, "{text}: {got:?}");
        assert_eq!(got[0].0, name, "{text}");
    }
    for text in [
        "安装任务已经完成。",
        "运行游戏后，请提供控制台输出。",
        "Ahora hago el análisis:",
    ] {
        assert!(calls_in(Some(text), None, &ide).is_empty(), "{text}");
    }
    // An editor whose `command` is one of its modes is no shell.
    let swe = vec![
        tool("bash", text_prop("command"), &["command"]),
        tool(
            "str_replace_editor",
            json!({"command": {"type": "string", "enum": ["view", "create", "str_replace"]}, "path": {"type": "string"}}),
            &["command", "path"],
        ),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("Let me run the reproduction script one more time to confirm the fix works:"),
            &swe
        ),
        one_call("bash", json!({}))
    );
}

#[test]
fn a_review_s_attacks_on_the_thirty_third_round_s_rules_are_refused() {
    let ide = vec![
        tool("exec", text_prop("command"), &["command"]),
        tool("read", text_prop("path"), &["path"]),
        tool("edit", text_prop("path"), &["path"]),
        tool("web_search", text_prop("query"), &["query"]),
    ];
    // Chinese labels, statements and past work open with a verb too; they are no steps.
    for text in [
        "读取文件失败。",
        "搜索结果：",
        "运行环境：",
        "修改记录：",
        "添加成功。",
        "修改了三个文件。",
        "运行过测试了。",
        "读取速度很慢。",
        "查找替换是编辑器的常用功能。",
    ] {
        assert!(calls_in(Some(text), None, &ide).is_empty(), "{text}");
    }
    // JSON data with a "commands" list is no terminal step.
    for text in [
        "My previous response had {\"commands\": [{\"command\": \"rm -rf build\"}]} which failed.",
        "Here is the config file:\n```json\n{\"commands\":[{\"command\":\"npm test\"}]}\n```",
    ] {
        assert!(calls_in(None, Some(text), &ide).is_empty(), "{text}");
    }
    // A sentence that introduces an example still shows one; a thing called "example"
    // does not.
    let call = "\n<tool_call>{\"name\":\"read\",\"arguments\":{\"path\":\"a.md\"}}</tool_call>";
    for lead in [
        "Example of the format:",
        "Example request:",
        "The example in the docs:",
        "### Example output",
    ] {
        let text = format!("{lead}{call}");
        assert!(calls_in(None, Some(&text), &ide).is_empty(), "{text}");
    }
    assert_eq!(
        calls_in(
            None,
            Some(&format!("Let me read the example config:{call}")),
            &ide
        ),
        one_call("read", json!({"path": "a.md"}))
    );
    // Chinese look-ups explained, past, deferred, conditional, asked or reported.
    let office = vec![
        tool("get_weather", text_prop("location"), &["location"]),
        tool("get_contact", text_prop("name"), &["name"]),
        tool("get_calendar", text_prop("date"), &["date"]),
    ];
    for text in [
        "我要说明一下：查天气需要城市名。",
        "我来教你怎么查北京的天气。",
        "我先前查过北京的天气。",
        "我现在查北京的天气失败了。",
        "要是下雨，我再查北京的天气。",
        "等你确认后，我再查北京的天气。",
        "用户想让我查深圳今天的天气。",
        "老板让我查深圳的天气。",
        "我需要知道你想查哪个城市的天气。",
        "我需要查北京的天气吗",
    ] {
        assert!(calls_in(None, Some(text), &office).is_empty(), "{text}");
    }
    // Whose weather or contact: the name, not the lead's words; two people are no one.
    for (text, place) in [
        ("我来查一下纽约市的天气。", "纽约市"),
        ("我来查下上海的天气。", "上海"),
        ("我要查的是北京的天气。", "北京"),
    ] {
        assert_eq!(
            calls_in(None, Some(text), &office),
            one_call("get_weather", json!({ "location": place })),
            "{text}"
        );
    }
    for text in ["我来查一下后天的天气。", "我来查一下那边的天气。"] {
        assert_eq!(
            calls_in(None, Some(text), &office),
            one_call("get_weather", json!({})),
            "{text}"
        );
    }
    assert_eq!(
        calls_in(None, Some("我来查一下张三和李四的联系方式。"), &office),
        one_call("get_contact", json!({}))
    );
    // A Japanese branch cut that is the reader's, conditional or later; Spanish questions
    // and conditions.
    for text in [
        "あなたがブランチを切ります。",
        "もし必要ならブランチを切ります。",
        "後でブランチを切ります。",
        "¿Hago commit y push?:",
        "Ejecuto los tests si quieres:",
        "Vamos a mejorar esto si tienes tiempo.",
    ] {
        assert!(calls_in(Some(text), None, &ide).is_empty(), "{text}");
    }
    // Formal German "Lassen Sie mich …" and "a call to `x`" the model starts with.
    assert_eq!(
        calls_in(
            None,
            Some("Lassen Sie mich die Datei README.md lesen."),
            &ide
        ),
        one_call("read", json!({"path": "README.md"}))
    );
    let reader = vec![tool("read", text_prop("path"), &["path"])];
    for text in [
        "I'll start with a call to `read` on README.md.",
        "Next step: a call to `read` for README.md.",
    ] {
        assert_eq!(
            calls_in(None, Some(text), &reader),
            one_call("read", json!({"path": "README.md"})),
            "{text}"
        );
    }
    // An unclosed JSON body after each of thousands of tags is read once, not once per tag.
    let long = "<tool_call>{\"name\": \"read\", \"arguments\": {\"path\": \"a\n".repeat(4000);
    let _ = calls_in(None, Some(&long), &reader);
}

#[test]
fn round_34_classes_tools_named_by_what_they_do_notes_to_self_and_answers_after_thinking() {
    // Chinese thoughts naming a tool by a piece of its name, in brackets or by its
    // description (ERNIE Bot's agents), with the command or value they state.
    let word_book = vec![
        ToolSpec::new(
            "highacc-ocr/v1.8/OCR",
            "用于提取并识别图片上的文字及位置信息",
            obj(text_prop("image"), &["image"]),
        ),
        ToolSpec::new(
            "texttospeech/v1.6/tts",
            "将文本转换为语音",
            obj(text_prop("text"), &["text"]),
        ),
        ToolSpec::new(
            "FastAPI/0.1.0/add_word_add_word_post",
            "在单词本中添加一个单词",
            obj(text_prop("word"), &["word"]),
        ),
        ToolSpec::new(
            "get_student_score",
            "查询学生的分数",
            obj(text_prop("name"), &["name"]),
        ),
    ];
    for (text, name) in [
        (
            "接下来我需要调用[highacc-ocr/v1.8/OCR]来提取图片中的文字。",
            "highacc-ocr/v1.8/OCR",
        ),
        (
            "我需要调用TTS工具将文本转化为语音。",
            "texttospeech/v1.6/tts",
        ),
        (
            "用户想要添加一个单词，我需要调用添加单词的工具完成此操作",
            "FastAPI/0.1.0/add_word_add_word_post",
        ),
        (
            "用户想要查询小明的分数，我需要使用查询学生分数的工具。",
            "get_student_score",
        ),
    ] {
        assert_eq!(
            calls_in(None, Some(text), &word_book),
            one_call(name, json!({})),
            "{text}"
        );
    }
    // Reported, conditional, negated, asked, or a description that fits no tool better.
    for text in [
        "用户需要调用添加单词的工具。",
        "如果您需要，我可以使用查询学生分数的工具。",
        "我不需要调用TTS工具。",
        "我需要调用TTS工具吗？",
        "我需要使用查询天气预报的工具。",
        "我已经调用过添加单词的工具了。",
    ] {
        assert!(calls_in(None, Some(text), &word_book).is_empty(), "{text}");
    }
    let local = vec![ToolSpec::new(
        "execute_local_command",
        "执行本地命令",
        obj(text_prop("cmd"), &["cmd"]),
    )];
    for (text, cmd) in [
        ("首先，我需要使用execute_local_command工具来执行ls命令，列出当前文件夹下的所有文件。", "ls"),
        ("因此，我需要使用execute_local_command工具来执行'echo \"Hello World\" > test.txt'命令。", "echo \"Hello World\" > test.txt"),
        ("现在，我需要再次使用execute_local_command工具来执行ls命令。", "ls"),
    ] {
        assert_eq!(
            calls_in(None, Some(text), &local),
            one_call("execute_local_command", json!({ "cmd": cmd })),
            "{text}"
        );
    }
    let people = vec![ToolSpec::new(
        "get_person_info",
        "查找公司内指定人员的信息",
        obj(text_prop("name"), &["name"]),
    )];
    assert_eq!(
        calls_in(
            None,
            Some("我可以使用get_person_info工具来查找张三的生日信息。"),
            &people
        ),
        one_call("get_person_info", json!({}))
    );
    assert!(calls_in(
        None,
        Some("如果您需要，我可以使用 `get_person_info` 工具来完成。"),
        &people
    )
    .is_empty());

    // A quoted command the noun names; a command line announced by a colon, alone on the
    // next line, with the directory the next paragraph names.
    let sys = vec![ToolSpec::new(
        "system",
        "Runs system commands",
        obj(text_prop("command"), &["command"]),
    )];
    for (text, cmd) in [
        ("I'll run the 'date' command for you.", "date"),
        ("I'll run the \"ls -la\" command now.", "ls -la"),
    ] {
        assert_eq!(
            calls_in(None, Some(text), &sys),
            one_call("system", json!({ "command": cmd })),
            "{text}"
        );
    }
    assert!(calls_in(None, Some("I ran the 'date' command."), &sys).is_empty());
    let bash = vec![ToolSpec::new(
        "bash",
        "Execute a shell command",
        obj(
            json!({"command": {"type": "string"}, "workdir": {"type": "string"}}),
            &["command"],
        ),
    )];
    assert_eq!(
        calls_in(
            Some("We need to validate it. We'll execute:\n\nuv run python scripts/check.py out.md\n\nRun in workdir /srv/app."),
            None,
            &bash
        ),
        one_call(
            "bash",
            json!({"command": "uv run python scripts/check.py out.md", "workdir": "/srv/app"})
        )
    );
    for text in [
        "To reproduce it, run:\n\nuv run python scripts/check.py\n",
        "We'll execute:\n\nuv run python scripts/check.py\nand then compare the output.",
        "If it fails we'll run:\n\nnpm test\n",
    ] {
        assert!(calls_in(None, Some(text), &bash).is_empty(), "{text}");
    }

    // In reasoning, an imperative after "now"/"next" is the model's own step; a bare one
    // may be a page it quotes.
    let ide = vec![
        tool("read", text_prop("filePath"), &["filePath"]),
        tool("edit", text_prop("filePath"), &["filePath"]),
        tool("bash", text_prop("command"), &["command"]),
    ];
    assert_eq!(
        calls_in(Some("Now check agent.py."), None, &ide),
        one_call("read", json!({"filePath": "agent.py"}))
    );
    assert_eq!(
        calls_in(Some("Now edit line 7: replace the old value."), None, &ide),
        one_call("edit", json!({}))
    );
    assert!(calls_in(Some("Read the docs or file a bug."), None, &ide).is_empty());

    // A short text after the thinking that states a result is the answer; one that says
    // what comes next or names the fault to fix is a preamble.
    let answered = "<think>\nThe user asked for the date. I need to call the system function with 'date' as the argument.\n</think>\n\nCurrent date and time: Wed Oct 30 15:30:45 UTC 2023";
    assert!(calls_in(None, Some(answered), &sys).is_empty());
    for after in [
        "Let me run that for you.",
        "The issue is the clock on line 3; fixing it now",
    ] {
        let text = format!("<think>\nI need to call the system function with 'date' as the argument.\n</think>\n\n{after}");
        assert_eq!(
            calls_in(None, Some(&text), &sys),
            one_call("system", json!({"command": "date"})),
            "{after}"
        );
    }

    // A committed step whose object is what one tool's name or description says it is
    // for; not when another tool fits as well, the model asks first or answers after.
    let shell = vec![
        ToolSpec::new("shell_ps", "List running processes", obj(json!({}), &[])),
        ToolSpec::new(
            "shell_pwd",
            "Print the current working directory",
            obj(json!({}), &[]),
        ),
        ToolSpec::new(
            "web_search",
            "Search the web using DuckDuckGo.",
            obj(text_prop("query"), &["query"]),
        ),
    ];
    assert_eq!(
        calls_in(None, Some("Let me check running processes:"), &shell),
        one_call("shell_ps", json!({}))
    );
    for text in [
        "Let me know if you want me to check running processes.",
        "I'll check running processes if you'd like.",
        "Let me check running processes:\n\nPID 1 init\nPID 2 bash\n\nThose are all of them.",
        "Let me summarize the running processes.",
    ] {
        assert!(calls_in(None, Some(text), &shell).is_empty(), "{text}");
    }
    // Gorilla's marker before a list of calls.
    let mail = vec![ToolSpec::new(
        "send_email",
        "Send an e-mail",
        obj(
            json!({"to": {"type": "string"}, "subject": {"type": "string"}}),
            &["to"],
        ),
    )];
    assert_eq!(
        calls_in(
            None,
            Some("<<function>>[send_email(to=\"a@b.co\", subject=\"Hi\")]"),
            &mail
        ),
        one_call("send_email", json!({"to": "a@b.co", "subject": "Hi"}))
    );
}

#[test]
fn round_35_classes_planned_steps_multi_work_file_tools_and_imagined_react_steps() {
    // A planner naming the tool of its next step (the step's words are no arguments);
    // not a plan whose tool is not offered, nor one with text after it.
    let hub = vec![
        tool("find_file", text_prop("file_mask"), &[]),
        tool("list_dir", text_prop("relative_path"), &[]),
    ];
    for text in [
        "{\"tool\": \"find_file\"}",
        "{\"main_objective\": \"map it\", \"next_step\": {\"purpose\": \"entry points\", \"tool\": \"find_file\", \"prompt\": \"Find app files\"}, \"future_steps\": [\"read them\"]}",
        "Here's the updated plan:\n\n```json\n{\"next_step\": {\"tool\": \"find_file\", \"prompt\": \"Find app files\"}}\n```",
    ] {
        assert_eq!(calls_in(None, Some(text), &hub), one_call("find_file", json!({})), "{text}");
    }
    for text in [
        "{\"next_step\": {\"tool\": \"Code inspection and search\", \"prompt\": \"look\"}}",
        "{\"tool\": \"find_file\"} is what the planner wrote last time; it failed.",
    ] {
        assert!(calls_in(None, Some(text), &hub).is_empty(), "{text}");
    }

    // A file tool told its operation, its description listing them: the operation and
    // the path the step names.
    let joinai = vec![
        ToolSpec::new(
            "execute_command",
            "执行shell命令",
            obj(text_prop("command"), &["command"]),
        ),
        ToolSpec::new(
            "files",
            "文件操作（create/write/read/str_replace 等）",
            obj(
                json!({"operation": {"type": "string"}, "path": {"type": "string"}, "content": {"type": "string"}}),
                &["operation"],
            ),
        ),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("文件已创建。\n\n接下来，我将读取 `hello.txt` 文件的内容。"),
            &joinai
        ),
        one_call("files", json!({"operation": "read", "path": "hello.txt"}))
    );
    // "the command above": a one-line fenced command before it.
    assert_eq!(
        calls_in(
            None,
            Some("### 执行命令\n```python\npython plot.py\n```\n\n现在，我将执行上述命令以生成图形。"),
            &joinai
        ),
        one_call("execute_command", json!({"command": "python plot.py"}))
    );

    // ReAct: a later action after a thought that has the first one's result, or after
    // a result the model wrote itself, was imagined; a plan going on is not.
    let math = vec![
        tool(
            "add",
            json!({"a": {"type": "integer"}, "b": {"type": "integer"}}),
            &["a", "b"],
        ),
        tool(
            "multiply",
            json!({"a": {"type": "integer"}, "b": {"type": "integer"}}),
            &["a", "b"],
        ),
    ];
    let imagined = "Thought: I need a tool.\nAction: add\nAction Input: {\"a\": 20, \"b\": 8}\n\nThought: Now that we have calculated 20+8=28, let's go on.\nAction: multiply\nAction Input: {\"a\": 2, \"b\": 4}";
    assert_eq!(
        calls_in(None, Some(imagined), &math),
        one_call("add", json!({"a": 20, "b": 8}))
    );
    let planned = "Thought: two sums.\nAction: add\nAction Input: {\"a\": 1, \"b\": 2}\nThought: and then the product\nAction: multiply\nAction Input: {\"a\": 3, \"b\": 4}";
    assert_eq!(calls_in(None, Some(planned), &math).len(), 2);

    // Invented markup as a chat renders it; Roo's history header before MiniMax's
    // parameters; a key that is the thing whose path the tool takes.
    let docs = vec![tool(
        "document-summarizer",
        json!({"action": {"type": "string"}, "document_filename": {"type": "string"}}),
        &["action"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some("[TOOL_CALL] {tool => \u{201C}document-summarizer\u{201D}, args => { \u{2013}action \u{201C}list\u{201D} }} [/TOOL_CALL]"),
            &docs
        ),
        one_call("document-summarizer", json!({"action": "list"}))
    );
    let roo = vec![tool(
        "ask_followup_question",
        text_prop("question"),
        &["question"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some("[Tool Use: ask_followup_question]\n<parameter name=\"question\">Which folder?</parameter>\n</invoke>"),
            &roo
        ),
        one_call("ask_followup_question", json!({"question": "Which folder?"}))
    );
    assert!(calls_in(
        None,
        Some("[Tool Use: ask_followup_question] was shown in the log."),
        &roo
    )
    .is_empty());
    let copilot = vec![tool("read_file", text_prop("filePath"), &["filePath"])];
    assert_eq!(
        calls_in(None, Some("read_file file=\"src/package.json\""), &copilot),
        one_call("read_file", json!({"filePath": "src/package.json"}))
    );
    // ("the file test.txt" in prose is no key.)
    let writer = vec![tool(
        "write_file",
        json!({"file_path": {"type": "string"}, "content": {"type": "string"}}),
        &["file_path", "content"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some("I'll create the file test_logging.txt with the content \"Hello\" for you."),
            &writer
        ),
        one_call(
            "write_file",
            json!({"file_path": "test_logging.txt", "content": "Hello"})
        )
    );

    // ChatGLM3's call whose name line was dropped: the one tool its arguments fill.
    let weather = vec![
        tool(
            "get_current_weather",
            json!({"location": {"type": "string"}, "unit": {"type": "string"}}),
            &["location"],
        ),
        tool("get_time", text_prop("zone"), &["zone"]),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("```python\ntool_call(location='郑州', unit='celsius')\n```"),
            &weather
        ),
        one_call(
            "get_current_weather",
            json!({"location": "郑州", "unit": "celsius"})
        )
    );

    // An object property's own keys listed before the call.
    let users = vec![tool(
        "update_user",
        json!({"profile": {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "email": {"type": "string"}}}}),
        &["profile"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some("I have all the required parameters:\n- name: 'John Doe'\n- age: 30\n- email: 'john@example.com'\n\nI'll make the update using the update_user function:"),
            &users
        ),
        one_call("update_user", json!({"profile": {"name": "John Doe", "age": 30, "email": "john@example.com"}}))
    );

    // A call explained by an example right after it is shown, not made.
    let records = vec![tool(
        "retrieve_record",
        text_prop("patient_id"),
        &["patient_id"],
    )];
    assert!(calls_in(
        None,
        Some("I can use the `retrieve_record` function with the patient id. Here's an example:\n\n```js\nretrieve_record({ patient_id: '1' })\n```"),
        &records
    )
    .is_empty());

    // Turkish: a first-person future, the first verb joined to it; not negated or
    // conditional, and no stem read inside another word ("arada").
    let codex = vec![
        tool("shell", text_prop("command"), &["command"]),
        tool("apply_patch", text_prop("patch"), &["patch"]),
    ];
    for text in [
        "Şimdi mevcut klasör yapısını görüntüleyip durumu analiz edeceğim...",
        "Testleri çalıştıracağım.",
    ] {
        assert_eq!(
            calls_in(None, Some(text), &codex),
            one_call("shell", json!({})),
            "{text}"
        );
    }
    for text in [
        "Eğer istersen dosyayı okuyacağım.",
        "Dosyayı okumayacağım.",
        "Bu arada dosya yapısına bakacağım.",
    ] {
        assert!(calls_in(None, Some(text), &codex).is_empty(), "{text}");
    }
}

#[test]
fn a_review_s_attacks_on_the_thirty_fourth_round_s_rules_are_refused() {
    // One tool offered: a look-up only when what is looked up is a search's, a name or
    // the tool's own words, and now — never "get back to you", "check with the team".
    let search = vec![ToolSpec::new(
        "brave_search",
        "Search the web using Brave Search and return results.",
        obj(text_prop("query"), &["query"]),
    )];
    for text in [
        "I'll get back to you shortly.",
        "I'll check with the team and follow up.",
        "Sure! I will find out.",
        "Great question. Let me look at this from a different angle.",
        "We'll get started right away.",
        "Let me get this straight",
        "I'll find a way to fix it",
        "I'll fetch the results tomorrow morning.",
    ] {
        assert!(calls_in(None, Some(text), &search).is_empty(), "{text}");
    }
    assert_eq!(
        calls_in(None, Some("Let me check the latest sports news."), &search),
        one_call("brave_search", json!({}))
    );
    let weather = vec![ToolSpec::new(
        "get_weather",
        "Lookup the weather for a given city.",
        obj(text_prop("city"), &["city"]),
    )];
    for text in [
        "Let's get started!",
        "Thanks for the feedback. I'll look at improving my answers.",
        "To check the weather, I would call get_weather. Let me check the docs first.",
        "I checked the weather in Paris yesterday; tomorrow I'll check it again.",
    ] {
        assert!(calls_in(None, Some(text), &weather).is_empty(), "{text}");
    }

    // A command line announced by a colon: not taken back after it, not indented as a
    // document's code block, not for another time or another's job, not quoted.
    let shell = vec![tool("exec", text_prop("command"), &["command"])];
    for text in [
        "We'll run:\n\nrm -rf /\n\nBut that's dangerous; we shouldn't. Instead answer the user.",
        "We'll execute:\n\ncargo test\n\nActually, the user only asked how to run tests.",
        "Previously we ran ls. We'll run:\n\nls -la\n\nWe already did that; the output shows three files.",
        "## Installation\n\nFirst we'll run:\n\n    cargo install ferroclaw\n\nThen configure it.",
        "Yesterday we ran the migration. Next week we will run:\n\nnpm run migrate\n\nin production.",
        "In the CI job we'll run:\n\nnpm test\n\nThe job uses Node 20.",
        "The docs say: \"To reproduce, we'll run:\n\nnpm test\n\n\" We should explain.",
        "We'll run:\n\ndocker compose up\n\nis what they should type.",
    ] {
        let got: Vec<_> = calls_in(Some(text), None, &shell)
            .into_iter()
            .filter(|(_, a)| a.get("command").is_some())
            .collect();
        assert!(got.is_empty(), "{text}: {got:?}");
    }

    // "argument", "parameter", "input" in passing bind nothing; only "call it with 'x' as
    // the argument" binds the one required property, and never over a named value.
    let code = vec![
        tool("read", text_prop("path"), &["path"]),
        tool("grep", text_prop("pattern"), &["pattern"]),
        tool("exec", text_prop("command"), &["command"]),
    ];
    for (text, call) in [
        (
            "Let me read `src/parser.rs` to see how the input is handled.",
            one_call("read", json!({"path": "src/parser.rs"})),
        ),
        (
            "Let me grep for `fn parse_args` to find where each argument is read.",
            one_call("grep", json!({"pattern": "fn parse_args"})),
        ),
        (
            "Let me read `config.toml`. The parameter \"timeout\" controls retries.",
            one_call("read", json!({"path": "config.toml"})),
        ),
        (
            "Let me run the tests with 'verbose' as the argument.",
            one_call("exec", json!({})),
        ),
    ] {
        assert_eq!(calls_in(None, Some(text), &code), call, "{text}");
    }

    // A quoted command only as what is run: not one explained, nor one inside what runs.
    for text in [
        "I'll run the tests, then explain why the \"ls -la\" command shows hidden files.",
        "Let me run a quick check: the 'kill' command should not be needed here.",
        "Let me run the script and see if the 'curl' command inside it fails.",
    ] {
        assert!(
            calls_in(None, Some(text), &code)
                .iter()
                .all(|(_, a)| a.get("command").is_none()),
            "{text}"
        );
    }

    // A short text after the thinking that holds on, in any words, leaves the call.
    let think = "The user wants the weather in Paris. I'll call get_weather with city Paris.";
    for answer in [
        "Sure, give me a second!",
        "On it — one sec while I grab the forecast.",
        "Absolutely, here we go.",
        "好的，马上为您查询巴黎的天气。",
        "好的，请稍候，我马上帮您查一下。",
    ] {
        assert_eq!(
            calls_in(Some(think), Some(answer), &weather),
            one_call("get_weather", json!({"city": "Paris"})),
            "{answer}"
        );
    }

    // Chinese "I can use": a capability or an offer, unless what it is used for follows
    // in a sentence that waits on no one; never in a list of what the model can do.
    let standard = ferroclaw_intent::eval::standard_tools();
    for text in [
        "我可以使用web_search帮你搜索最新的资料。",
        "我可以使用 exec 工具运行命令，也可以使用 read_file 工具读取文件。请告诉我你需要什么。",
        "我可以使用web_search。你想让我搜索什么？",
        "以下是我能做的：\n- 我可以使用web_search搜索网页\n- 我可以使用read_file读取文件",
        "我可以调用exec来执行ls命令，不过你需要先授权。",
    ] {
        assert!(calls_in(None, Some(text), &standard).is_empty(), "{text}");
    }
    assert!(calls_in(
        Some("我可以使用get_weather工具，但用户没有给出城市，所以先问用户。"),
        None,
        &standard
    )
    .is_empty());
    let office = vec![
        tool("create_event", text_prop("title"), &["title"]),
        tool("get_calendar", text_prop("date"), &["date"]),
    ];
    for text in [
        "我帮你安排好了明天的会议。",
        "用户说：“我帮你安排明天的会议”，这是他同事说的话。",
        "北京的天气已经查过了，是晴天。让我查一下用户的日程安排。",
    ] {
        assert!(
            calls_in(Some(text), None, &office)
                .iter()
                .all(|(n, _)| n != "create_event"),
            "{text}"
        );
    }
    // A tool named by a piece of it: not before using it, not taken back, not "we can"
    // in an example; a command asked about or a later step's is none of this one's.
    let agent = vec![
        ToolSpec::new(
            "highacc-ocr/v1.8/OCR",
            "用于提取并识别图片上的文字",
            obj(text_prop("image"), &["image"]),
        ),
        ToolSpec::new(
            "execute_local_command",
            "执行本地命令",
            obj(text_prop("cmd"), &["cmd"]),
        ),
    ];
    for text in [
        "我需要调用[highacc-ocr/v1.8/OCR]来提取文字，如果用户同意的话。",
        "我需要调用[highacc-ocr/v1.8/OCR]来提取文字，不过图片还没上传。",
        "首先，使用OCR工具之前要确认图片清晰。",
        "我会用`OCR`工具识别，但是用户拒绝了，所以改为文字回复。",
        "我们可以用OCR工具来识别图片中的文字，这是一个例子。",
    ] {
        assert!(calls_in(Some(text), None, &agent).is_empty(), "{text}");
    }
    for text in [
        "我需要使用execute_local_command工具来执行rm -rf /命令吗？这太危险了，不执行。",
        "我需要调用[execute_local_command]，运行ls查看文件，之后执行cat a.txt命令。",
    ] {
        assert!(
            calls_in(Some(text), None, &agent)
                .iter()
                .all(|(_, a)| a.get("cmd").is_none()),
            "{text}"
        );
    }
    let lookups = vec![tool("get_weather", text_prop("city"), &["city"])];
    assert!(calls_in(None, Some("我帮你查了北京的天气：晴，25度。"), &lookups).is_empty());
    // A web address in a shell's step is no page to fetch; a command line ends before an
    // adverb or a condition.
    for text in [
        "Now clone https://github.com/foo/bar.git into /tmp/bar.",
        "Now push the branch to https://github.com/foo/bar.",
    ] {
        assert!(
            calls_in(Some(text), None, &standard)
                .iter()
                .all(|(n, _)| n != "web_fetch"),
            "{text}"
        );
    }
    for (text, cmd) in [
        ("Let me run tsc again.", "tsc"),
        ("I'll run sudo later if needed.", "sudo"),
        ("Let me run cargo build once more.", "cargo build"),
    ] {
        let got = calls_in(Some(text), None, &standard);
        assert!(
            got.iter()
                .all(|(_, a)| a.get("command").is_none_or(|c| c == cmd)),
            "{text}: {got:?}"
        );
    }
    // A document's "we will": a guide, a later section, a list item.
    let procs = vec![
        ToolSpec::new("shell_ps", "List running processes", obj(json!({}), &[])),
        ToolSpec::new(
            "shell_pwd",
            "Print the working directory",
            obj(json!({}), &[]),
        ),
    ];
    for text in [
        "In this guide, we will check running processes with ps.",
        "In the next section, we'll list running processes.",
        "- I'll check running processes",
    ] {
        assert!(calls_in(None, Some(text), &procs).is_empty(), "{text}");
    }
    // A ReAct input of code takes no English sentence after it.
    for (text, input) in [
        (
            "Thought: x\nAction: exec\nAction Input: def f(n):\n    return n\n\nfor the record, this is just a helper.",
            "def f(n):\n    return n",
        ),
        ("Thought: x\nAction: exec\nAction Input: x = 5\n\nif you need more, ask me.", "x = 5"),
        (
            "Thought: x\nAction: exec\nAction Input: print(2+2)\n\nfrom the output I will compute the answer.",
            "print(2+2)",
        ),
    ] {
        assert_eq!(
            calls_in(None, Some(text), &shell),
            one_call("exec", json!({ "command": input })),
            "{text}"
        );
    }

    // A sentence that never ends is read in pieces and its look-backs are windowed: many
    // triggers in one run, or many sentences on one line, stay linear.
    for long in [
        "Let me check running processes ".repeat(8000),
        "Let me check the weather in Paris and ".repeat(5000),
        format!("{}?", "The cat sat on the mat. ".repeat(10000)),
    ] {
        let _ = calls_in(None, Some(&long), &search);
    }
}

#[test]
fn a_review_s_attacks_on_the_thirty_fifth_round_s_rules_are_refused() {
    // A planner's step: not a config shown, a log, a refusal or a finished plan; the step's
    // own property keys are its arguments.
    let std_tools = ferroclaw_intent::eval::standard_tools();
    for text in [
        "Here is the config file for the agent:\n```json\n{\"tool\": \"web_search\"}\n```",
        "The last audit log entry was: {\"tool\": \"exec\"}",
        "我不会调用工具。{\"tool\": \"exec\"}",
        "{\"status\": \"done\", \"next_step\": {\"tool\": \"exec\", \"prompt\": \"x\"}}",
        "Done. The final plan was: {\"next_action\": {\"tool\": \"read_file\", \"path\": \"a.txt\"}}",
    ] {
        assert!(calls_in(None, Some(text), &std_tools).is_empty(), "{text}");
    }
    assert_eq!(
        calls_in(
            None,
            Some("{\"next_step\": {\"tool\": \"read_file\", \"path\": \"a.txt\"}}"),
            &std_tools
        ),
        one_call("read", json!({"path": "a.txt"}))
    );
    // A placeholder observation or a plan that mentions a result is no result: the later
    // action stays.
    for text in [
        "Thought: First search, then read.\nAction: web_search\nAction Input: {\"query\": \"a\"}\nObservation: [waiting for tool output]\nThought: Then read the file.\nAction: read_file\nAction Input: {\"path\": \"b.txt\"}",
        "Thought: search first.\nAction: web_search\nAction Input: {\"query\": \"a\"}\nThought: After that I will check what the search returned and then read the docs file.\nAction: read_file\nAction Input: {\"path\": \"b.txt\"}",
    ] {
        let got = calls_in(None, Some(text), &std_tools);
        assert!(got.iter().any(|(n, _)| n == "read"), "{text}: {got:?}");
    }
    // `name:` is no user name or branch name; another record's keys fill no object.
    let people = vec![tool(
        "create_user",
        json!({"username": {"type": "string"}, "profile": {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "email": {"type": "string"}}}}),
        &["username"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some("I will create the user account for alice (username: alice). Her manager is name: Bob, age: 52, email: bob@corp.com."),
            &people
        ),
        one_call("create_user", json!({"username": "alice"}))
    );
    let branches = vec![tool(
        "create_branch",
        json!({"repo_path": {"type": "string"}, "branch_name": {"type": "string"}}),
        &["branch_name"],
    )];
    assert!(calls_in(
        None,
        Some("I will create the branch feature-login now. (Reviewer name: Alice.)"),
        &branches
    )
    .iter()
    .all(|(_, a)| a.get("branch_name").is_none_or(|b| b != "Alice")));
    // "For example:" that shows no call of the tool drops nothing.
    assert_eq!(
        calls_in(
            None,
            Some("Let me read config.yaml first. For example: the port setting may be wrong."),
            &std_tools
        ),
        one_call("read", json!({"path": "config.yaml"}))
    );
    // Spanish: a file read by name stays a read.
    let ide = vec![
        tool("read", text_prop("path"), &["path"]),
        tool("bash", text_prop("command"), &["command"]),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("Voy a leer el archivo de estado status.json."),
            &ide
        ),
        one_call("read", json!({"path": "status.json"}))
    );
    // A multi-operation tool is told one of its own operations, from its enum or its
    // listed operations, never a word of its prose.
    let viewer = vec![ToolSpec::new(
        "files",
        "Manage files. Operations: view, create, delete, str_replace. The read and write permissions of the workspace are checked.",
        obj(
            json!({"op": {"type": "string", "enum": ["view", "create", "delete", "str_replace"]}, "path": {"type": "string"}}),
            &["op", "path"],
        ),
    )];
    for (text, op) in [
        ("Let me view src/main.rs.", "view"),
        ("Now I'll write the new module to src/new.rs.", "create"),
    ] {
        for (_, a) in calls_in(None, Some(text), &viewer) {
            assert!(a.get("op").is_none_or(|o| o == op), "{text}: {a}");
        }
    }
    // A program's output in a fence is not "this command".
    let got = calls_in(
        None,
        Some("The test run printed:\n```\npython 3.11.4 detected, node 18 detected\n```\nI will run this command to install deps: it is listed in the README."),
        &std_tools,
    );
    assert!(
        got.iter().all(|(_, a)| a.get("command").is_none()),
        "{got:?}"
    );
}

#[test]
fn round_36_classes_traditional_chinese_namespaces_bare_colon_steps_and_shown_queries() {
    // Traditional Chinese reads as simplified, and the arguments keep the original
    // spelling; Japanese (kana) is not converted.
    let agentj = vec![
        tool("read_file", text_prop("path"), &["path"]),
        tool(
            "edit_file",
            json!({"path": {"type": "string"}, "old_text": {"type": "string"}, "new_text": {"type": "string"}}),
            &["path", "old_text", "new_text"],
        ),
        tool("list_dir", text_prop("path"), &[]),
        tool("exec", text_prop("command"), &["command"]),
    ];
    assert_eq!(
        calls_in(None, Some("首先，我會先檢查目前的檔案結構。"), &agentj),
        one_call("list_dir", json!({}))
    );
    assert_eq!(
        calls_in(
            None,
            Some("我現在立刻修正 `app.py`，改用更現代且正確的方式來處理圖片上傳。"),
            &agentj
        ),
        one_call("edit_file", json!({"path": "app.py"}))
    );
    for text in [
        "我不會修改 `app.py`。",
        "請直接貼上您的步驟，我將立即開始執行。",
        "我将立即开始执行。",
    ] {
        assert!(calls_in(None, Some(text), &agentj).is_empty(), "{text}");
    }

    // A first word several offered tools share is their server's name, no verb; a
    // hyphenated name is matched as written.
    let redis = vec![
        tool(
            "redis-set",
            json!({"key": {"type": "string"}, "value": {"type": "string"}}),
            &["key", "value"],
        ),
        tool("redis-get", text_prop("key"), &["key"]),
        tool("redis-delete", text_prop("key"), &["key"]),
    ];
    for text in [
        "Redis key `user:006` was updated.",
        "成功！Redis中key `user:006` 已更新为 `yukisyo`。您还有其他需求吗？",
    ] {
        assert!(calls_in(None, Some(text), &redis).is_empty(), "{text}");
    }
    assert_eq!(
        calls_in(
            None,
            Some("用户让我增加一条记录，key是user:006，value是yukisyo。参数需要key和value，所以直接调用redis-set即可。"),
            &redis
        ),
        one_call("redis-set", json!({"key": "user:006", "value": "yukisyo"}))
    );
    let sqlite = vec![
        tool("sqlite-list_tables", json!({}), &[]),
        tool("sqlite-read_query", text_prop("query"), &["query"]),
    ];
    for text in [
        "I'll call sqlite-list_tables now.",
        "因此，正确的做法是使用sqlite-list_tables函数来列出所有表。",
    ] {
        assert_eq!(
            calls_in(None, Some(text), &sqlite),
            one_call("sqlite-list_tables", json!({})),
            "{text}"
        );
    }
    assert!(calls_in(
        None,
        Some("所以，我不调用sqlite-list_tables函数。"),
        &sqlite
    )
    .is_empty());
    // A tool named by its own part after a server prefix others share.
    let devtools = vec![
        tool("chrome-devtools_type_text", text_prop("text"), &["text"]),
        tool("chrome-devtools_click", text_prop("uid"), &["uid"]),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("终端已经聚焦。现在让我使用 type_text 来输入命令。"),
            &devtools
        ),
        one_call("chrome-devtools_type_text", json!({}))
    );
    // "Then" after "first" is a later step.
    let ernie = vec![
        tool("OCR", text_prop("image"), &[]),
        tool("ChatWithEB", text_prop("word"), &[]),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("我需要先使用OCR工具提取图片中的文字，然后使用ChatWithEB工具获取单词的详细信息。"),
            &ernie
        ),
        one_call("OCR", json!({}))
    );
    // "Twice": two calls.
    let pg = vec![tool("postgres-query", text_prop("sql"), &["sql"])];
    assert_eq!(
        calls_in(
            None,
            Some("然后，调用postgres-query函数两次，分别执行这两个查询。"),
            &pg
        )
        .len(),
        2
    );

    // A whole answer that is one short line ending in a colon stopped for its call;
    // instructions that go on after their colon are the reader's.
    let code = vec![
        tool("bash", text_prop("command"), &["command"]),
        tool("read", text_prop("filePath"), &["filePath"]),
        tool(
            "edit",
            json!({"filePath": {"type": "string"}, "oldString": {"type": "string"}, "newString": {"type": "string"}}),
            &["filePath", "oldString", "newString"],
        ),
    ];
    for (text, name) in [
        ("Now typecheck:", "bash"),
        ("Remove my duplicate function:", "edit"),
        ("Update the debug message to show total INT:", "edit"),
        ("All 4 chapters now present. Let me rebuild:", "bash"),
        ("Now let's verify everything compiles:", "bash"),
        (
            "The server might have crashed. Let me try to start it again.",
            "bash",
        ),
        (
            "OK the proxy is running. Now let me try to connect with psql.",
            "bash",
        ),
        (
            "I'll fix the `git status` command in the `nah` section to include the `-u` flag.",
            "edit",
        ),
    ] {
        let got = calls_in(None, Some(text), &code);
        assert_eq!(got.len(), 1, "{text}: {got:?}");
        assert_eq!(got[0].0, name, "{text}");
    }
    for text in [
        "Install the dependencies:\n\n```\nnpm install\n```",
        "To get started:\n1. Clone the repository\n2. Run the tests:",
    ] {
        assert!(calls_in(None, Some(text), &code).is_empty(), "{text}");
    }
    assert_eq!(
        calls_in(
            None,
            Some("Let me add the dependency with `npm install lodash`."),
            &code
        ),
        one_call("bash", json!({"command": "npm install lodash"}))
    );

    // KaibanJS's camel-case action input.
    let tavily = vec![tool("tavily_search", text_prop("query"), &["query"])];
    assert_eq!(
        calls_in(
            None,
            Some("```json\n{\n   \"thought\": \"I need to search.\",\n   \"action\": \"tavily_search\",\n   \"actionInput\": {\"query\":\"Copa America 2024 winner\"}\n}\n```"),
            &tavily
        ),
        one_call("tavily_search", json!({"query": "Copa America 2024 winner"}))
    );

    // "Let's execute this query.": the SQL shown before, not a table's name.
    let db = vec![ToolSpec::new(
        "execute_query",
        "Execute a SQL query",
        obj(text_prop("sql_query"), &["sql_query"]),
    )];
    let sql = "SELECT condition, COUNT(DISTINCT person_id) AS prevalence\nFROM chronic_conditions.long\nGROUP BY condition;";
    assert_eq!(
        calls_in(
            None,
            Some(&format!("Here is my proposed SQL query:\n\n```sql\n{sql}\n```\n\nLet's run this query now for the `chronic_conditions.long` table.")),
            &db
        ),
        one_call("execute_query", json!({"sql_query": sql}))
    );

    // A later call whose argument stands for an earlier call's result waits on it.
    let funcs = vec![
        tool("funcA", text_prop("param1"), &[]),
        tool("funcC", text_prop("param1"), &[]),
    ];
    let plan = "```javascript\nconst funcAResult = await callFunction({\n  name: \"funcA\",\n  arguments: {\n    param1: \"1\"\n  }\n});\n\nconst funcCResult = await callFunction({\n  name: \"funcC\",\n  arguments: {\n    param1: funcAResult\n  }\n});\n```";
    assert_eq!(
        calls_in(None, Some(plan), &funcs),
        one_call("funcA", json!({"param1": "1"}))
    );

    // A Korean "I'll wait for the results" after the thinking is a preamble, not a
    // stated answer.
    let agents = vec![
        tool("subagent", text_prop("action"), &[]),
        tool("read", text_prop("path"), &["path"]),
    ];
    assert_eq!(
        calls_in(
            Some("The 4 sub-agents are running in the background. I'll use `subagent` to await their results."),
            Some("4개 서브에이전트가 병렬로 팩트체크를 수행 중입니다. 결과를 기다리겠습니다."),
            &agents
        ),
        one_call("subagent", json!({}))
    );
}

#[test]
fn round_36_classes_labelled_operations_executors_printed_commands_and_answers_chosen() {
    // CogAgent's labelled operation; not a label that shows a form, nor ReAct's field.
    let gui = vec![tool(
        "CLICK",
        json!({"box": {"type": "array"}, "element_type": {"type": "string"}, "element_info": {"type": "string"}}),
        &["box"],
    )];
    assert_eq!(
        calls_in(
            None,
            Some("Action: 点击“全部标为已读”按钮。\nGrounded Operation: CLICK(box=[[219,186,311,207]], element_type='可点击文本', element_info='全部标为已读')\n<<一般操作>>"),
            &gui
        ),
        one_call(
            "CLICK",
            json!({"box": [[219, 186, 311, 207]], "element_type": "可点击文本", "element_info": "全部标为已读"})
        )
    );
    assert!(calls_in(None, Some("Usage: CLICK(box=[[1,2,3,4]])"), &gui).is_empty());

    // AutoGen's executor runs the writer's fenced blocks; not ones shown as examples.
    let executor = vec![ToolSpec::new(
        "execute_code_block",
        "runs fenced code blocks",
        obj(
            json!({"language": {"type": "string"}, "code": {"type": "string"}}),
            &["language", "code"],
        ),
    )];
    assert_eq!(
        calls_in(
            None,
            Some("```python\n# filename: fib.py\nprint(fib(13))\n```\n\nI will need the user to run this.\n\nTERMINATE"),
            &executor
        ),
        one_call(
            "execute_code_block",
            json!({"language": "python", "code": "# filename: fib.py\nprint(fib(13))"})
        )
    );
    assert!(calls_in(
        None,
        Some("For example:\n```python\nprint(1)\n```"),
        &executor
    )
    .is_empty());

    // A committed step, then the command line printed alone as the last paragraph.
    let claude = vec![
        tool("Bash", text_prop("command"), &["command"]),
        tool("Read", text_prop("file_path"), &["file_path"]),
    ];
    assert_eq!(
        calls_in(
            None,
            Some("I'll check what files exist in the current directory.\n\n  ls -la"),
            &claude
        ),
        one_call("Bash", json!({"command": "ls -la"}))
    );
    for text in [
        "I'll show you how to install it.\n\nnpm install foo",
        "To install it:\n\nnpm install foo",
        "I'll list the files.\n\n    ls -la",
    ] {
        assert!(calls_in(None, Some(text), &claude).is_empty(), "{text}");
    }

    // A name with its Korean particle and "search" in a compound are no verbs; "with"
    // a value gives it.
    let web = vec![
        tool("web_search", text_prop("query"), &["query"]),
        tool("read", text_prop("url"), &["url"]),
    ];
    for text in [
        "Google이 봇 차단.",
        "Google focuses on online advertising, search engine technology and cloud computing.",
    ] {
        assert!(calls_in(None, Some(text), &web).is_empty(), "{text}");
    }
    let funcs = vec![tool("funcB", text_prop("param1"), &[])];
    assert_eq!(
        calls_in(
            None,
            Some("The output of funcA(1) is \"x\". Now calling funcB with 2."),
            &funcs
        ),
        one_call("funcB", json!({"param1": "2"}))
    );
    assert_eq!(
        calls_in(None, Some("Now calling funcB with the results."), &funcs),
        one_call("funcB", json!({}))
    );

    // transformers' HfAgent block after "Answer:": each offered tool it calls, with the
    // literal keywords only.
    let hf = vec![
        tool(
            "document_qa",
            json!({"document": {"type": "string"}, "question": {"type": "string"}}),
            &["document", "question"],
        ),
        tool("image_generator", text_prop("prompt"), &["prompt"]),
    ];
    assert_eq!(
        calls_in(
            None,
            Some(" tools: `document_qa` to find the oldest person, then `image_generator`.\n\nAnswer:\n```py\nanswer = document_qa(document, question=\"What is the oldest person?\")\nimage = image_generator(prompt=caption)\n```"),
            &hf
        ),
        vec![
            (
                "document_qa".to_string(),
                json!({"question": "What is the oldest person?"})
            ),
            ("image_generator".to_string(), json!({})),
        ]
    );

    // The thinking weighed a tool, then chose to answer; not "search, then answer".
    let code = vec![
        tool("bash", text_prop("command"), &["command"]),
        tool("web_search", text_prop("query"), &["query"]),
    ];
    assert!(calls_in(
        Some("I can use `cd` in bash with the `cwd` parameter. Let me answer directly — yes, I can move between directories."),
        None,
        &code
    )
    .is_empty());
    assert_eq!(
        calls_in(
            Some("Let me search the web for \"rust 1.80 release date\". Then I'll answer after that."),
            None,
            &code
        ),
        one_call("web_search", json!({"query": "rust 1.80 release date"}))
    );
}

/// Round 37: a review's attacks on round 36's rules (code shown to the reader run by an
/// executor, one-line labels read as steps, commands after a hand-off, labels that warn,
/// native calls dropped for a word in a value, motives read as choosing to answer,
/// polite Japanese and Korean endings, Chinese explanations, wrong spellings restored,
/// modifiers read as values, code identifiers read as tools), the look-alikes that must
/// still call, and the classes of batch 37 (`command_name` objects, Markdown-escaped keys,
/// `<function-call>` tags with unknown values, plans and capabilities shown, a wait for
/// instructions, "the file"/"the website" named before, conversions, a later written
/// call, a key naming the tool, MCP proxies, tools named in Chinese, one call per name
/// listed). Each case's calls must be exactly the expected ones.
/// Round 38: a review's attacks on this round's rules (explanations, offers, plans put
/// off and other services' namespaces must not become managed-tool actions, fences,
/// recipients or git steps) and their look-alikes, with the classes batch 38 taught: a
/// managing tool told its action by the step's verb (English, Russian, Chinese), a
/// namespaced tag, a fence named by a tool, a recipient after "to", a bound spelled out,
/// a query without its article, a short finding on the way to the reasoning's step.
#[test]
fn round_38_review_attacks_look_alikes_and_batch_38_classes() {
    let wrong = wrong_in_case_file("round38.jsonl", 70);
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn round_39_review_attacks_look_alikes_and_batch_39_classes() {
    // Qwen2.5's `<|CODE|>` blocks, GLM-4's name lines, `<arg name>` children, tags left
    // open, Russian coding-agent steps, command lines after their label, code searched
    // by name, advice labels and Japanese conditions; a review's attacks on them (shown
    // code, results echoed as arguments, Russian nouns and participles, steps put off).
    let wrong = wrong_in_case_file("round39.jsonl", 100);
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn round_40_review_attacks_look_alikes_and_batch_40_classes() {
    // Cyrillic tool names and «» inputs in ReAct, LangChain's one-string input, a closing
    // tag cut before its `>`, "the OpenCode docs" for the one URL named, Python tuples,
    // a pythonic call's lost `)`, "the 'wikipedia' action", an answer that is one think
    // block, a retry in the tool's own syntax, programs said as verbs, arithmetic on
    // "that result", plans for the todo tool; a review's attacks on them (Russian nouns,
    // formats shown in fences, other pages, Markdown syntax, "the sum of", conditions).
    let wrong = wrong_in_case_file("round40.jsonl", 230);
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// The cases of `tests/cases/NAME` (at least `min`) whose parse differs from their label —
/// a case labelled without a call may make none, whatever its arguments.
fn wrong_in_case_file(name: &str, min: usize) -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cases")
        .join(name);
    let cases = ferroclaw_intent::eval::load_file(&path).unwrap();
    assert!(cases.len() >= min, "{} cases", cases.len());
    let all = standard_tools();
    let cfg = ParserConfig::default();
    let mut wrong = Vec::new();
    for c in &cases {
        let got = parse(
            c.reasoning.as_deref(),
            c.content.as_deref(),
            &c.tool_specs(&all),
            &cfg,
        )
        .calls;
        let s = ferroclaw_intent::eval::score(&c.expected, &got);
        if s.fp != 0 || s.fn_ != 0 || (c.expected.is_empty() && !got.is_empty()) {
            let got: Vec<String> = got
                .iter()
                .map(|g| format!("{} {}", g.name, g.arguments))
                .collect();
            wrong.push(format!("{}: {got:?}", c.id));
        }
    }
    wrong
}

#[test]
fn round_37_review_attacks_look_alikes_and_batch_37_classes() {
    let wrong = wrong_in_case_file("round37.jsonl", 90);
    assert!(wrong.is_empty(), "{wrong:#?}");

    // Values that must not be read (an expected call with no arguments matches any).
    let read = |content: &str, tools: &[ToolSpec]| calls_in(None, Some(content), tools);
    let std_tools = standard_tools();
    let got = read(
        "我来读取配置文件 config.yaml，注意 path是workspace下的相对路径。",
        &std_tools,
    );
    assert!(
        got.iter()
            .all(|(_, a)| a.get("path") != Some(&json!("workspace"))),
        "{got:?}"
    );
    let cc = vec![ToolSpec::new(
        "convert_currency",
        "Converts currency.",
        obj(
            json!({"amount": {"type": "number"}, "from_currency": {"type": "string"}, "to_currency": {"type": "string"}}),
            &[],
        ),
    )];
    let got = read(
        "I'll use the convert_currency tool to exchange the 3 invoices to send to finance.",
        &cc,
    );
    assert!(
        got.iter().all(|(_, a)| a.get("from_currency").is_none()),
        "{got:?}"
    );
}
