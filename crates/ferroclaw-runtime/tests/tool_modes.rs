//! Tool calling for models that only write their tool intent as text.

use crate::common::*;
use ferroclaw_testkit::{Protocol, ReasoningField, Reply};
use ferroclaw_types::{EventKind, Message};
use serde_json::Value;

/// A harness whose provider entry carries `extra` (tool mode, intent settings).
async fn with_provider(extra: &'static str) -> Harness {
    Harness::new(
        Protocol::OpenAi,
        Options {
            provider_extra: extra,
            ..Options::default()
        },
    )
    .await
}

fn tool_results(body: &Value) -> Vec<String> {
    request_shape(Protocol::OpenAi, body)
        .into_iter()
        .filter(|m| m.0 == "tool")
        .map(|m| m.1)
        .collect()
}

/// Results of intent-derived calls: in auto mode they go back as user text,
/// because the model never made a native call the server could pair them with.
fn text_tool_results(body: &Value, tool: &str) -> Vec<String> {
    let marker = format!("[TOOL_RESULT: {tool}]");
    request_shape(Protocol::OpenAi, body)
        .into_iter()
        .filter(|m| m.0 == "user" && m.1.contains(&marker))
        .map(|m| m.1)
        .collect()
}

#[tokio::test]
async fn auto_mode_runs_a_tool_intent_found_only_in_the_reasoning() {
    for field in [ReasoningField::Reasoning, ReasoningField::ReasoningContent] {
        let h = with_provider(r#"tool_mode: "auto","#).await;
        std::fs::create_dir_all(h.workspace()).expect("ws");
        std::fs::write(h.workspace().join("notes.md"), "remember the milk").expect("file");
        h.llm.push(Reply::text("").with_reasoning(
            "The user asks what is in notes.md. We need to read the file notes.md first.",
            field,
        ));
        h.llm.push(Reply::text("It says: remember the milk."));
        let (res, events) = run(&h.agent(), "s", "what's in notes.md?").await;
        let out = res.unwrap_or_else(|e| panic!("{field:?}: {e}"));
        assert_eq!(out.text, "It says: remember the milk.");

        let reqs = h.llm.requests();
        assert!(
            reqs[0].body["tools"]
                .as_array()
                .is_some_and(|t| !t.is_empty()),
            "auto mode still sends tools"
        );
        assert!(
            tool_results(&reqs[1].body).is_empty(),
            "{field:?}: no native tool message for a call the model never made natively"
        );
        let results = text_tool_results(&reqs[1].body, "read");
        assert_eq!(results.len(), 1, "{field:?}");
        assert!(results[0].contains("remember the milk"));
        let started: Vec<String> = events
            .all()
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::ToolStart { name, .. } => Some(name.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(started, ["read"], "same events as a native call");
    }
}

#[tokio::test]
async fn intent_mode_never_sends_tools_and_keeps_history_as_text() {
    let h = with_provider(r#"tool_mode: "intent", guided_decoding: "vllm","#).await;
    h.llm.push(Reply::text(
        r#"Sure. ```json
{"tool_calls":[{"name":"write","arguments":{"path":"out.txt","content":"hello"}}],"done":false}
```"#,
    ));
    h.llm.push(Reply::text(
        r#"{"tool_calls": [], "done": true, "answer": "Wrote out.txt."}"#,
    ));
    let (res, _) = run(&h.agent(), "s", "write hello to out.txt").await;
    assert_eq!(
        res.expect("run").text,
        "Wrote out.txt.",
        "the user sees the answer, not the JSON"
    );
    assert_eq!(h.llm.pending(), 0);
    assert_eq!(
        std::fs::read_to_string(h.workspace().join("out.txt")).expect("written"),
        "hello"
    );

    for req in h.llm.requests() {
        let body = &req.body;
        assert!(
            body.get("tools").is_none(),
            "intent mode must never send tools: {body}"
        );
        assert!(
            body.get("guided_json").is_some(),
            "vLLM guided decoding schema is sent"
        );
        let msgs = body["messages"].as_array().expect("messages");
        assert!(msgs[0]["content"]
            .as_str()
            .unwrap_or_default()
            .contains("## Tool calling"));
        assert!(
            msgs.iter()
                .all(|m| m.get("tool_calls").is_none() && m["role"] != "tool"),
            "history is text-only"
        );
    }
    let second = h.llm.requests()[1].body.to_string();
    assert!(second.contains("[TOOL_RESULT: write]"), "{second}");

    // The transcript keeps real toolCall/toolResult entries.
    let log = h.store.open("main", "s").await.expect("open");
    let ctx = log.context();
    assert!(ctx
        .iter()
        .any(|m| matches!(m, Message::ToolResult(r) if r.tool_name == "write")));
}

#[tokio::test]
async fn harmony_markup_in_content_is_parsed_and_never_shown() {
    let h = with_provider(r#"tool_mode: "auto","#).await;
    h.llm.push(Reply::text(
        "<|start|>assistant<|channel|>commentary to=functions.exec <|constrain|>json<|message|>{\"command\":\"echo harmony-ok\"}<|call|>",
    ));
    h.llm.push(Reply::text(
        "<|start|>assistant<|channel|>final<|message|>The command printed harmony-ok.<|end|>",
    ));
    let (res, _) = run(&h.agent(), "s", "run it").await;
    let out = res.expect("run");
    assert_eq!(out.text, "The command printed harmony-ok.");
    let body = &h.llm.requests()[1].body;
    assert!(
        tool_results(body).is_empty(),
        "intent results go back as text"
    );
    let results = text_tool_results(body, "exec");
    assert_eq!(results.len(), 1, "{body}");
    assert!(results[0].contains("harmony-ok"), "{results:?}");
}

#[tokio::test]
async fn auto_mode_falls_back_to_text_when_the_server_refuses_tools() {
    let h = with_provider(r#"tool_mode: "auto","#).await;
    h.llm.push(Reply::status(
        400,
        "\"auto\" tool choice requires --enable-auto-tool-choice; tools are not supported",
    ));
    h.llm.push(Reply::text("Action: ls\nAction Input: {}"));
    h.llm.push(Reply::text("Listed."));
    let (res, _) = run(&h.agent(), "s", "list files").await;
    assert_eq!(res.expect("run").text, "Listed.");
    let reqs = h.llm.requests();
    assert!(reqs[0].body.get("tools").is_some());
    assert!(reqs[1].body.get("tools").is_none(), "retried without tools");
    assert!(reqs[2].body.to_string().contains("[TOOL_RESULT: ls]"));
}

#[tokio::test]
async fn native_mode_ignores_text_that_only_mentions_tools() {
    let h = Harness::new(Protocol::OpenAi, Options::default()).await;
    h.llm.push(Reply::text(
        "You could run `ls -la` yourself to see the files.",
    ));
    let (res, _) = run(&h.agent(), "s", "how do I list files?").await;
    assert_eq!(
        res.expect("run").text,
        "You could run `ls -la` yourself to see the files."
    );
    assert_eq!(h.llm.requests().len(), 1);
}

#[tokio::test]
async fn the_configured_parser_order_and_prompt_are_used() {
    let h = with_provider(r#"tool_mode: "intent", intent: { order: ["react"], sources: ["content"], prompt: "react" },"#).await;
    // Guided JSON is not in the configured order: it stays text.
    h.llm.push(Reply::text(
        r#"{"tool_calls":[{"name":"ls","arguments":{}}],"done":false}"#,
    ));
    let (res, _) = run(&h.agent(), "a", "list").await;
    assert!(
        res.expect("run").text.contains("tool_calls"),
        "not parsed as a call"
    );
    assert_eq!(h.llm.requests().len(), 1);
    let system = h.llm.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        system.contains("Action Input"),
        "the ReAct format is taught: {system}"
    );

    // ReAct is.
    h.llm.push(Reply::text(
        "Thought: look around\nAction: ls\nAction Input: {}",
    ));
    h.llm.push(Reply::text("Final Answer: listed"));
    let (res, _) = run(&h.agent(), "b", "list").await;
    assert_eq!(res.expect("run").text, "listed");
    assert!(h.llm.requests()[2]
        .body
        .to_string()
        .contains("[TOOL_RESULT: ls]"));
}

/// Every call format a model may fall back to, written as text, runs the tool through
/// the same loop as a native call: one test per format, through the real HTTP wire.
#[tokio::test]
async fn every_text_call_format_runs_the_tool() {
    let cases: &[(&str, &str, Option<&str>)] = &[
        (
            "qwen-xml",
            "<tool_call>\n<function=exec>\n<parameter=command>\necho fmt-qwen-xml\n</parameter>\n</function>\n</tool_call>",
            None,
        ),
        (
            "hermes",
            "<tool_call>\n{\"name\": \"exec\", \"arguments\": {\"command\": \"echo fmt-hermes\"}}\n</tool_call>",
            None,
        ),
        (
            "python-tag",
            "<|python_tag|>{\"name\": \"exec\", \"parameters\": {\"command\": \"echo fmt-python-tag\"}}<|eom_id|>",
            None,
        ),
        ("pythonic", "[exec(command=\"echo fmt-pythonic\")]", None),
        (
            "mistral",
            "[TOOL_CALLS][{\"name\": \"exec\", \"arguments\": {\"command\": \"echo fmt-mistral\"}}]",
            None,
        ),
        (
            "deepseek",
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>exec\n```json\n{\"command\": \"echo fmt-deepseek\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
            None,
        ),
        (
            "harmony-no-call-token",
            "<|channel|>commentary to=functions.exec<|constrain|>json<|message|>{\"command\":\"echo fmt-harmony-no-call-token\"}",
            None,
        ),
        (
            "tool-named-tag",
            "<terminal_command>echo fmt-tool-named-tag</terminal_command>",
            None,
        ),
        (
            "broken-json",
            "{\"name\": \"exec\", \"parameters':{'command':'echo fmt-broken-json'}",
            None,
        ),
        (
            "gemma",
            "<|tool_call>call:exec{command:<|\"|>echo fmt-gemma<|\"|>}<tool_call|>",
            None,
        ),
        (
            "function-gemma",
            "<start_function_call>call:exec{command:<escape>echo fmt-function-gemma<escape>}<end_function_call>",
            None,
        ),
        (
            "kimi",
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.exec:0<|tool_call_argument_begin|>{\"command\": \"echo fmt-kimi\"}<|tool_call_end|><|tool_calls_section_end|>",
            None,
        ),
        (
            "deepseek-dsml",
            "<｜｜DSML｜｜invoke name=\"exec\">\n<｜｜DSML｜｜parameter name=\"command\" string=\"true\">echo fmt-deepseek-dsml</｜｜DSML｜｜parameter>\n</｜｜DSML｜｜invoke>",
            None,
        ),
        (
            "llama-function-tag",
            "<function=exec={\"command\": \"echo fmt-llama-function-tag\"}</function>",
            None,
        ),
        (
            "glm-glued-name",
            "<tool_call>execcommand</arg_key><arg_value>echo fmt-glm-glued-name</arg_value></tool_call>",
            None,
        ),
        (
            "gemma-signature",
            "<|tool_call>call:exec(command: \"echo fmt-gemma-signature\")<tool_call|>",
            None,
        ),
        (
            "typographic-quotes",
            "<tool_call>{\u{201c}name\u{201d}: \u{201c}exec\u{201d}, \u{201c}arguments\u{201d}: {\u{201c}command\u{201d}: \u{201c}echo fmt-typographic-quotes\u{201d}}}</tool_call>",
            None,
        ),
        (
            "attribute-tag",
            "<call_record tool=\"exec\">\n<parameter name=\"command\">echo fmt-attribute-tag</parameter>\n</call_record>",
            None,
        ),
        (
            "bare-gemma",
            "call:exec{command:<|\"|>echo fmt-bare-gemma<|\"|>}",
            None,
        ),
        (
            "kimi-string-args",
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.exec:0<|tool_call_argument_begin|>\"{\\\"command\\\": \\\"echo fmt-kimi-string-args\\\"}\"<|tool_call_end|><|tool_calls_section_end|>",
            None,
        ),
        ("unfenced-shell", "bash\necho fmt-unfenced-shell", None),
        (
            "dsml-spaced",
            "<\u{ff5c}\u{ff5c}DSML\u{ff5c}\u{ff5c} invoke name=\"exec\"> <\u{ff5c}\u{ff5c}DSML\u{ff5c}\u{ff5c} parameter name=\"command\" string=\"true\">echo fmt-dsml-spaced</\u{ff5c}\u{ff5c}DSML\u{ff5c}\u{ff5c} parameter> </\u{ff5c}\u{ff5c}DSML\u{ff5c}\u{ff5c} invoke>",
            None,
        ),
        (
            "bare-glm",
            "exec<arg_key>command</arg_key><arg_value>echo fmt-bare-glm</arg_value>",
            None,
        ),
        ("key-value", "tool_name: exec\nparameter: echo fmt-key-value", None),
        (
            "function-name-tag",
            "<tool_call>\n<function>exec</function>\n{\"command\": \"echo fmt-function-name-tag\"}\n</tool_call>",
            None,
        ),
        (
            "name-keyed-json",
            "{\"exec\": {\"command\": \"echo fmt-name-keyed-json\"}}",
            None,
        ),
        (
            "code-agent",
            "Thought: I'll run it.\n\nCode:\n```py\nout = exec(command=\"echo fmt-code-agent\")\n```",
            None,
        ),
        (
            "mcp-tags",
            "I'll run it.\n\n<use_mcp_tool>\n<server_name>local</server_name>\n<tool_name>exec</tool_name>\n<arguments>\n{\"command\": \"echo fmt-mcp-tags\"}\n</arguments>\n</use_mcp_tool>",
            None,
        ),
        (
            "name-as-tag",
            "<tool_call>\n<exec>\n<parameter=command>\necho fmt-name-as-tag\n</parameter>\n</function>\n</tool_call>",
            None,
        ),
        (
            "nexusraven",
            "Call: exec(command='echo fmt-nexusraven')<bot_end>\nThought: The call runs the echo.",
            None,
        ),
        (
            "unclosed-json-then-text",
            "{\n\"function\": \"exec\",\n\"params\": {\n    \"command\": \"echo fmt-unclosed-json-then-text\"\n}\nFUNCTION RETURN {\"status\": \"OK\"}",
            None,
        ),
        (
            "tool-code",
            "<tool_code>exec(command='echo fmt-tool-code')</tool_code>",
            None,
        ),
        (
            "swe-command",
            "Let's run it.\n\n```\nexec \"echo fmt-swe-command\"\n```",
            None,
        ),
        (
            "langchain-xml",
            "<tool>exec</tool><tool_input>echo fmt-langchain-xml",
            None,
        ),
        (
            "react-pythonic",
            "Thought: I should run it.\nAction: exec(command=\"echo fmt-react-pythonic\")",
            None,
        ),
        (
            "calling-tool-brackets",
            "Sure.\n[Calling tool: exec with arguments: {\"command\": \"echo fmt-calling-tool-brackets\"}]",
            None,
        ),
        (
            "dspy-fields",
            "[[ ## next_thought ## ]]\nI should run it.\n\n[[ ## next_tool_name ## ]]\nexec\n\n[[ ## next_tool_args ## ]]\n{\"command\": \"echo fmt-dspy-fields\"}\n\n[[ ## completed ## ]]",
            None,
        ),
        (
            "mistral-unbracketed",
            "[TOOL_CALLSexec[ARGS{\"command\": \"echo fmt-mistral-unbracketed\"}",
            None,
        ),
        (
            "glm-after-answer",
            "Sure.\n<|begin_of_box|>exec\n<arg_key>command</arg_key>\n<arg_value>echo fmt-glm-after-answer</arg_value>\n</tool_call>",
            None,
        ),
        (
            "modelscope-api-name",
            "<|startofthink|>```JSON\n{\"api_name\": \"exec\", \"parameters\": {\"command\": \"echo fmt-modelscope-api-name\"}}\n```<|endofthink|>",
            None,
        ),
        (
            "pythonic-after-heading",
            "## Corrected function call:\n\n[exec(command='echo fmt-pythonic-after-heading')]",
            None,
        ),
        (
            "mint-execute",
            "<thought> Run it. </thought>\n<execute> print(exec(command='echo fmt-mint-execute')) </execute>",
            None,
        ),
        (
            "autogpt-command",
            "{\"thoughts\": {\"text\": \"run it\"}, \"command\": {\"name\": \"exec\", \"args\": {\"command\": \"echo fmt-autogpt-command\"}}}",
            None,
        ),
        ("bracket-action", "exec[echo fmt-bracket-action]", None),
        (
            "qwen-agent",
            "\u{273F}FUNCTION\u{273F}: exec\n\u{273F}ARGS\u{273F}: {\"command\": \"echo fmt-qwen-agent\"}",
            None,
        ),
        (
            "react-tags",
            "<thought>I should run it.</thought>\n<action>exec</action>\n<action_input>command: echo fmt-react-tags</action_input>",
            None,
        ),
        (
            "bee-fields",
            "Thought: I should run it.\nTool Name: exec\nTool Caption: Running the echo\nTool Input: {\"command\": \"echo fmt-bee-fields\"}\nTool Output: ",
            None,
        ),
        (
            "code-tag-block",
            "Let me start by running it.\n\n<CODE>\necho fmt-code-tag-block",
            None,
        ),
        (
            // The stop sequence cut the answer where the command's fence would close.
            "open-shell-fence",
            "下面是命令：\n\n```bash\necho fmt-open-shell-fence\n",
            None,
        ),
        (
            "qwen-xml-wrapper-closed",
            "<function=exec>{\"command\": \"echo fmt-qwen-xml-wrapper-closed\"} </tool_call>",
            None,
        ),
        (
            "list-item-call",
            "The following call will be made:\n\n1. `exec(\"echo fmt-list-item-call\")`: runs it.",
            None,
        ),
        (
            "qwen-xml-in-reasoning",
            "",
            Some("The user wants it run.\n<tool_call>\n<function=exec>\n<parameter=command>\necho fmt-qwen-xml-in-reasoning\n</parameter>\n</function>\n</tool_call>"),
        ),
        (
            "wrapped-reasoning",
            "",
            Some("<reasoning>We need to run `echo fmt-wrapped-reasoning` with ex</reasoning><reasoning>ec. <|channel|>commentary to=functions.ex</reasoning><reasoning>ec json{\"command\":\"echo fmt-wrapped-reasoning\"}</reasoning>"),
        ),
        (
            // Roo's tag opened in brackets.
            "bracket-opened-tag",
            "[exec]\n<command>echo fmt-bracket-opened-tag</command>\n</exec>",
            None,
        ),
        (
            // The command named once, then referred back to.
            "command-referred-back",
            "",
            Some("用戶要求我用 exec 工具執行 echo fmt-command-referred-back 命令。我需要使用 exec 工具來執行這個命令。"),
        ),
        (
            "gorilla-markers",
            " <<function>>exec(command=\"echo fmt-gorilla-markers\")",
            None,
        ),
        (
            "tool-call-pair",
            "```tool_call [\"exec\", {\"command\": \"echo fmt-tool-call-pair\"}] ```",
            None,
        ),
        (
            // DeepLearning.AI's ReAct: the input after the name's colon, then PAUSE.
            "react-colon-input",
            "Thought: I should run it.\nAction: exec: echo fmt-react-colon-input\nPAUSE",
            None,
        ),
        (
            // An empty thought before its action, the input's closing quote cut.
            "thought-action-one-line",
            "Thought: Action: exec\nAction Input: \"echo fmt-thought-action-one-line",
            None,
        ),
        (
            // Terminus: listed steps without a name, each filling the one tool.
            "listed-steps",
            "{\"analysis\": \"run it\", \"commands\": [{\"command\": \"echo fmt-listed-steps\"}], \"is_task_complete\": false}",
            None,
        ),
        (
            // gpt-oss's reasoning: the command line alone after "We'll execute:".
            "announced-command-line",
            "",
            Some("We need to run the echo. We'll execute:\n\necho fmt-announced-command-line\n"),
        ),
        (
            // ERNIE's thought: the tool, then the command it runs.
            "cjk-run-command",
            "",
            Some("我需要使用exec工具来执行'echo fmt-cjk-run-command'命令。"),
        ),
        (
            "gorilla-list",
            "<<function>>[exec(command=\"echo fmt-gorilla-list\")]",
            None,
        ),
        (
            // A planner naming its next step's tool, the arguments in it.
            "planned-step",
            "{\"next_step\": {\"purpose\": \"run it\", \"tool\": \"exec\", \"arguments\": {\"command\": \"echo fmt-planned-step\"}}}",
            None,
        ),
        (
            // Roo's history header before MiniMax's parameters.
            "tool-use-header",
            "[Tool Use: exec]\n<parameter name=\"command\">echo fmt-tool-use-header</parameter>\n</invoke>",
            None,
        ),
        (
            // Invented arrow markup with typographic quotes and dashes.
            "arrow-typographic",
            "[TOOL_CALL] {tool => \u{201C}exec\u{201D}, args => { \u{2013}command \u{201C}echo fmt-arrow-typographic\u{201D} }} [/TOOL_CALL]",
            None,
        ),
        (
            // CogAgent's labelled operation.
            "labelled-operation",
            "Action: run the echo.\nGrounded Operation: exec(command=\"echo fmt-labelled-operation\")",
            None,
        ),
        (
            // A committed step, then the command line printed instead of called.
            "printed-command",
            "",
            Some("I'll run the echo now.\n\n  echo fmt-printed-command"),
        ),
        (
            // Traditional Chinese, read as simplified.
            "traditional-chinese",
            "",
            Some("我需要使用exec工具來執行'echo fmt-traditional-chinese'命令。"),
        ),
        (
            // An agent's own command object: its name under `command_name`.
            "command-name",
            "{\"command_name\":\"exec\",\"inputs\":{\"command\":\"echo fmt-command-name\"}}",
            None,
        ),
        (
            // AgentDojo's prompted call list in a tag of its own.
            "function-call-tag",
            "<function-thoughts>Run it.</function-thoughts>\n<function-call>[exec(command=\"echo fmt-function-call-tag\")]</function-call>",
            None,
        ),
        (
            // A key escaped as Markdown renders it.
            "escaped-underscore",
            "{\"action\": \"exec\", \"action\\_input\": \"echo fmt-escaped-underscore\"}",
            None,
        ),
        (
            // The tool's name as a key, beside what the model imagined of the result.
            "keyed-by-tool",
            "{\"exec\": {\"command\": \"echo fmt-keyed-by-tool\"}, \"expected_output\": \"done\"}",
            None,
        ),
        (
            // A fence whose language is the tool's name, after the model's commitment.
            "tool-named-fence",
            "I will run it now.\n\n```exec\ncommand: echo fmt-tool-named-fence\n```",
            None,
        ),
        (
            // gpt-oss's built-in namespace before the offered name, in a prompted tag.
            "namespaced-tag",
            "<tool_calls>\n<container.exec>\n<command>echo fmt-namespaced-tag</command>\n</container.exec>\n</tool_calls>",
            None,
        ),
        (
            // Qwen2.5's code-interpreter token around Python that calls the tool.
            "qwen-code-token",
            "I'll run it.\n<|CODE|>\nout = exec(command=\"echo fmt-qwen-code-token\")\nprint(out)\n<|CODE|>",
            None,
        ),
        (
            // GLM-4's own format passed on as text: the name on a line, its JSON next.
            "glm-name-line",
            "exec\n{\"command\": \"echo fmt-glm-name-line\"}",
            None,
        ),
        (
            // A Russian coding agent's step in its reasoning: the tool named after
            // "с помощью".
            "russian-step",
            "",
            Some("Теперь нужно выполнить команду с помощью exec: `echo fmt-russian-step`"),
        ),
        (
            // LangChain's stop sequence cut the closing backtick.
            "react-cut-backtick",
            "Thought: I should run it.\nAction: exec\nAction Input: `echo fmt-react-cut-backtick",
            None,
        ),
    ];
    for (name, content, reasoning) in cases {
        let h = with_provider(r#"tool_mode: "auto","#).await;
        let mut reply = Reply::text(*content);
        if let Some(r) = reasoning {
            reply = reply.with_reasoning(*r, ReasoningField::ReasoningContent);
        }
        h.llm.push(reply);
        h.llm.push(Reply::text("Done."));
        let (res, events) = run(&h.agent(), "s", "run the echo").await;
        let out = res.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(out.text, "Done.", "{name}");
        let reqs = h.llm.requests();
        assert_eq!(
            reqs.len(),
            2,
            "{name}: the call ran and the model saw its result"
        );
        let results = text_tool_results(&reqs[1].body, "exec");
        assert_eq!(results.len(), 1, "{name}: {}", reqs[1].body);
        assert!(
            results[0].contains(&format!("fmt-{name}")),
            "{name}: {results:?}"
        );
        assert!(
            events.all().iter().any(|e| matches!(&e.kind, EventKind::ToolIntents { strategy, .. } if strategy != "native")),
            "{name}: reported as a text intent: {:?}", events.all().iter().map(|e| format!("{:?}", e.kind)).collect::<Vec<_>>()
        );
        // The markup is not shown to the user as the turn's text.
        let log = h.store.open("main", "s").await.expect("open");
        let shown: String = log
            .context()
            .iter()
            .filter_map(|m| match m {
                Message::Assistant(a) => Some(a.text()),
                _ => None,
            })
            .collect();
        assert!(
            !shown.contains("fmt-"),
            "{name}: markup kept as text: {shown}"
        );
    }
}

/// Text that names tools, shows their format or tells the reader what to run, without
/// the model committing to a call now: in auto mode the turn's text is the answer and
/// no tool runs.
#[tokio::test]
async fn text_that_does_not_commit_to_a_call_runs_no_tool() {
    let cases: &[(&str, Option<&str>)] = &[
        // Past tense.
        ("I used web_search earlier and found that Rust 1.80 came out in July 2024.", None),
        // A promise inside the model's own final answer.
        (
            "Sorry, I cannot browse right now.",
            Some("Thought: I can answer now.\nFinal answer: I am now searching with web_search for you."),
        ),
        // Code shown to the reader with an executor offered (here: a command to avoid).
        ("Don't run this on production, it drops every table:\n\n```sh\npsql -c 'DROP SCHEMA public CASCADE;'\n```", None),
        // A one-line label, not a step.
        ("Run these commands in your terminal:", None),
        // What the model can do, listed for the reader.
        ("I can help you with:\n\nSearching the web for news\nRunning shell commands", None),
        // "Search" in a compound noun.
        ("Its search engine results say Rust 1.80 came out in July 2024.", None),
        // The thinking weighed a tool, then chose to answer.
        (
            "Rust 1.80 came out in July 2024.",
            Some("I can use web_search for this. Let me answer directly, it is well known."),
        ),
        // Named, then declined.
        ("I could call exec to list the files, but there is no need: the folder holds only README.md.", None),
        // No access claimed; no search follows from it.
        ("I'm not able to access real-time data, so I can't tell you today's weather in Paris.", None),
        // A function said to have produced the answer.
        ("The read function returned the contents: remember the milk.", None),
        // gpt-oss's constant "We need to…" with no tool in mind.
        (
            "Lifetimes name how long a reference stays valid.",
            Some("We need to answer the question about lifetimes. Provide a short explanation."),
        ),
        // Steps for the reader.
        ("Run `cargo test` to check the build, then `cargo fmt` to format it.", None),
        ("To update it, run `git pull` in your clone.", None),
        // The format shown, not used.
        ("For example: {\"name\": \"exec\", \"arguments\": {\"command\": \"ls\"}}", None),
        // A link's words, an offer, another's step.
        ("See [Search the docs](https://docs.rs) for more.", None),
        ("If you want, I can search the web for the latest release notes.", None),
        ("The installer will run `make install` for you.", None),
        // What the model lacks; code it shows as read already.
        ("I need access to a search API to search the web for the release date.", None),
        (
            "The race is in the queue.",
            Some("Look at `read` in `queue.py`:\n\n```python\ndef read(self):\n    return None\n```\n\nThe check and the set are apart."),
        ),
        // A call named as a thing; calls under a heading of usage examples.
        ("This is the response to a function call to `exec` with the command \"ls\".", None),
        (
            "Done.\n\n## Usage examples\n\n```json\n{\"tool\": \"exec\", \"arguments\": {\"command\": \"ls\"}}\n```",
            None,
        ),
        // The user's request reported, then answered.
        ("好的，用户让我执行 ls 命令。结果如下：README.md", None),
        // A tool offered on a condition.
        ("如果您需要，我可以使用 exec 工具来完成。", None),
        // A step that waits on the reader, described by what the tool does.
        ("Please tell me the folder and I'll list the files for you.", None),
        // A ReAct step the model went on past, writing its result and a second step
        // itself, then its own final answer: the harness takes the answer.
        (
            "The weather is sunny.",
            Some("Thought: check.\nAction: exec\nAction Input: echo hi\nObservation: hi\nThought: Now that I have it, done.\nFinal Answer: The weather is sunny."),
        ),
        // The thinking planned a call; the answer after it states the result.
        (
            "Current date and time: Wed Oct 30 15:30:45 UTC 2023",
            Some("The user asked for the date. I need to call exec with 'date' as the argument."),
        ),
    ];
    for (content, reasoning) in cases {
        let h = with_provider(r#"tool_mode: "auto","#).await;
        let mut reply = Reply::text(*content);
        if let Some(r) = reasoning {
            reply = reply.with_reasoning(*r, ReasoningField::ReasoningContent);
        }
        h.llm.push(reply);
        let (res, events) = run(&h.agent(), "s", "hello").await;
        let out = res.unwrap_or_else(|e| panic!("{content}: {e}"));
        assert_eq!(out.text, *content);
        assert_eq!(h.llm.requests().len(), 1, "{content}: no second turn");
        assert!(
            !events.all().iter().any(|e| matches!(
                e.kind,
                EventKind::ToolStart { .. } | EventKind::ToolIntents { .. }
            )),
            "{content}: no tool started"
        );
    }
}

/// A text that commits to a tool but gives no argument: without `intent.confirm` the
/// call is made as read, and the tool's error says what is missing, so the model can
/// correct itself on the next turn.
#[tokio::test]
async fn an_incomplete_call_without_confirmation_lets_the_tool_say_what_is_missing() {
    let h = with_provider(r#"tool_mode: "auto","#).await;
    h.llm.push(Reply::text("").with_reasoning(
        "The user asks about the plan. We need to call read now.",
        ReasoningField::ReasoningContent,
    ));
    h.llm.push(Reply::text("I need the file name."));
    let (res, _) = run(&h.agent(), "s", "what does the plan say?").await;
    assert_eq!(res.expect("run").text, "I need the file name.");
    let reqs = h.llm.requests();
    assert_eq!(reqs.len(), 2, "no confirmation request");
    let results = text_tool_results(&reqs[1].body, "read");
    let errors: Vec<String> = request_shape(Protocol::OpenAi, &reqs[1].body)
        .into_iter()
        .filter(|m| m.1.contains("[ERROR: read]"))
        .map(|m| m.1)
        .collect();
    assert!(
        results.is_empty() && errors.len() == 1 && errors[0].contains("path"),
        "{}",
        reqs[1].body
    );
}

const AUTO_ASK: &str = r#"tool_mode: "auto", intent: { confirm: "ask" },"#;
const AUTO_GUIDED: &str = r#"tool_mode: "auto", intent: { confirm: "guided" },"#;

#[tokio::test]
async fn confirmation_asks_the_model_for_exactly_the_unsure_call() {
    // `ask`: the plain form, strictly read.
    let h = with_provider(AUTO_ASK).await;
    std::fs::create_dir_all(h.workspace()).expect("ws");
    std::fs::write(h.workspace().join("plan.md"), "ship on friday").expect("file");
    h.llm.push(Reply::text("").with_reasoning(
        "The user asks about the plan. We need to call read now.",
        ReasoningField::ReasoningContent,
    ));
    h.llm.push(Reply::text(
        r#"{"name": "read", "arguments": {"path": "plan.md"}}"#,
    ));
    h.llm.push(Reply::text("The plan: ship on friday."));
    let (res, events) = run(&h.agent(), "s", "what does plan.md say?").await;
    assert_eq!(res.expect("run").text, "The plan: ship on friday.");
    let reqs = h.llm.requests();
    assert_eq!(reqs.len(), 3);
    let ask = &reqs[1].body;
    assert!(
        ask.get("tools").is_none()
            && ask.get("guided_json").is_none()
            && ask.get("response_format").is_none(),
        "{ask}"
    );
    assert_ne!(
        ask["stream"],
        Value::Bool(true),
        "not streamed: nothing of it is shown"
    );
    let asked = ask.to_string();
    assert!(
        asked.contains("`read`") && asked.contains("what does plan.md say?"),
        "{asked}"
    );
    assert!(events.all().iter().any(|e| matches!(&e.kind,
        EventKind::ToolIntents { names, .. } if names == &["read"])));
    let results = text_tool_results(&reqs[2].body, "read");
    assert_eq!(results.len(), 1, "{}", reqs[2].body);
    assert!(results[0].contains("ship on friday"));
}

/// A tool named without a commitment ("Next, read.") is no call by the rules; with
/// `intent.confirm` the model is asked, and its answer decides.
#[tokio::test]
async fn an_unsure_mention_becomes_a_call_only_when_the_model_confirms_it() {
    let h = with_provider(AUTO_ASK).await;
    std::fs::create_dir_all(h.workspace()).expect("ws");
    std::fs::write(h.workspace().join("todo.md"), "buy milk").expect("file");
    h.llm
        .push(Reply::text("").with_reasoning("Next, read.", ReasoningField::ReasoningContent));
    h.llm.push(Reply::text(
        r#"{"name": "read", "arguments": {"path": "todo.md"}}"#,
    ));
    h.llm.push(Reply::text("It says buy milk."));
    let (res, events) = run(&h.agent(), "s", "what's in todo.md?").await;
    assert_eq!(res.expect("run").text, "It says buy milk.");
    assert!(events.all().iter().any(|e| matches!(&e.kind,
        EventKind::ToolIntents { strategy, names, .. } if strategy == "confirm" && names == &["read"])));
    let results = text_tool_results(&h.llm.requests()[2].body, "read");
    assert!(
        results.len() == 1 && results[0].contains("buy milk"),
        "{results:?}"
    );
}

#[tokio::test]
async fn guided_confirmation_uses_what_the_server_supports() {
    // Intent mode with vLLM guided decoding: `guided_json` with the tool's schema; the
    // server refuses the field, so the plain form is asked once.
    let extra = r#"tool_mode: "intent", guided_decoding: "vllm", intent: { confirm: "guided" },"#;
    let h = with_provider(extra).await;
    h.llm
        .push(Reply::text("I should call exec to see the kernel version."));
    h.llm.push(Reply::status(400, "unknown field: guided_json"));
    h.llm.push(Reply::text(
        r#"{"name":"exec","arguments":{"command":"echo guided-fallback"}}"#,
    ));
    h.llm.push(Reply::text(
        r#"{"tool_calls": [], "done": true, "answer": "ok"}"#,
    ));
    let (res, _) = run(&h.agent(), "s", "kernel?").await;
    assert_eq!(res.expect("run").text, "ok");
    let reqs = h.llm.requests();
    assert_eq!(reqs.len(), 4);
    let guided = &reqs[1].body["guided_json"];
    assert_eq!(
        guided["properties"]["name"]["enum"],
        serde_json::json!(["exec"]),
        "{}",
        reqs[1].body
    );
    assert!(guided["properties"]["arguments"]["properties"]["command"].is_object());
    assert!(
        reqs[2].body.get("guided_json").is_none(),
        "refused field not sent again"
    );
    assert!(reqs[3].body.to_string().contains("guided-fallback"));

    // Auto mode (the server takes tools): a forced native call through `tool_choice`.
    let h = with_provider(AUTO_GUIDED).await;
    h.llm.push(Reply::text("").with_reasoning(
        "I should call exec to check the kernel.",
        ReasoningField::ReasoningContent,
    ));
    h.llm.push(Reply::tool_call(
        "c1",
        "exec",
        serde_json::json!({"command": "echo forced"}),
    ));
    h.llm.push(Reply::text("Forced call ran."));
    let (res, _) = run(&h.agent(), "s", "kernel?").await;
    assert_eq!(res.expect("run").text, "Forced call ran.");
    let reqs = h.llm.requests();
    let forced = &reqs[1].body;
    assert_eq!(
        forced["tool_choice"]["function"]["name"], "exec",
        "{forced}"
    );
    assert_eq!(forced["tools"].as_array().map(Vec::len), Some(1));
    assert!(reqs[2].body.to_string().contains("forced"));

    // The model declines, or answers with prose around the JSON: no call, the turn's
    // text stands.
    for answer in [
        r#"{"name": null}"#,
        r#"Sure: {"name":"exec","arguments":{"command":"x"}}"#,
    ] {
        let h = with_provider(AUTO_ASK).await;
        h.llm.push(Reply::text("I should call exec next, I think."));
        h.llm.push(Reply::text(answer));
        let (res, _) = run(&h.agent(), "s", "hm").await;
        assert_eq!(
            res.expect("run").text,
            "I should call exec next, I think.",
            "{answer}"
        );
        assert_eq!(h.llm.requests().len(), 2, "{answer}");
    }
}
