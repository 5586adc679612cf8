//! The commented starting configuration written by `ferroclaw onboard`.

use crate::providers::{env_name, well_known};
use crate::schema::ProviderType;

/// A JSON5 string literal (JSON escaping is valid JSON5).
fn lit(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// Produces a commented JSON5 config that selects `provider`/`model`.
/// `base_url` is written when given, or commented out with the default for
/// well-known providers. Never contains secrets: the comment says where keys go.
pub fn starter_config(provider: &str, model: &str, base_url: Option<&str>) -> String {
    // Reasoning models that often write tool calls as text (gpt-oss) get them read
    // from the text too.
    let tool_mode_line = if needs_auto_tool_mode(model) {
        "      tool_mode: \"auto\",  // tool calls also read from the answer's text"
    } else {
        "      // tool_mode: \"native\",  // \"auto\" / \"intent\" for models without tool calling"
    };
    let wk = well_known(provider);
    let kind = wk.map(|w| w.kind).unwrap_or(ProviderType::OpenaiCompat);
    let key_hint = match wk.and_then(|w| w.key_var) {
        Some(var) => format!("{var}=… (or FERROCLAW_{}_API_KEY=…)", env_name(provider)),
        None => format!(
            "FERROCLAW_{}_API_KEY=… if the server needs one",
            env_name(provider)
        ),
    };
    let base_url_line = match (base_url, wk) {
        (Some(url), _) => format!("      base_url: {},", lit(url)),
        (None, Some(w)) => format!("      // base_url: {},", lit(w.base_url)),
        // Without a URL the file would not load; leave an obvious placeholder
        // the user must edit rather than a silently wrong default.
        (None, None) => "      base_url: \"http://127.0.0.1:8000/v1\", // TODO: your server".into(),
    };

    format!(
        r#"// ferroclaw configuration (JSON5: comments and trailing commas are fine).
//
// Secrets never go in this file. Put API keys in the environment or in
// .env.local next to this file, e.g.:
//   {key_hint}
// Environment overrides: FERROCLAW_PROVIDER, FERROCLAW_MODEL, FERROCLAW_HOST,
// FERROCLAW_PORT, FERROCLAW_LOG_LEVEL, FERROCLAW_LOG_FORMAT.
{{
  agents: {{
    // Settings every agent inherits; the "main" agent uses them as-is.
    defaults: {{
      provider: {provider_lit},
      model: {model_lit},
      // fallbacks: ["other-provider/model", "same-provider-model"],
      // workspace: "workspace",   // relative to this directory
      max_iterations: 20,          // tool-call rounds per run
      timeout_seconds: 600,
      context_window: 128000,
      // max_tokens: 4096,
      // temperature: 0.7,
      stream: true,
    }},
    // More agents, each overriding the defaults:
    // list: [
    //   {{ id: "research", name: "Researcher", tools: ["web_fetch", "read_file"] }},
    // ],
  }},
  providers: {{
    {provider_key}: {{
      type: {kind},
{base_url_line}
{tool_mode_line}
      // api_key_env: "MY_KEY_VARIABLE",
      timeout_seconds: 120,
      // models: [{{ id: {model_lit}, context_window: 128000 }}],
    }},
  }},
  gateway: {{
    host: "127.0.0.1",
    port: 18789,
  }},
  logging: {{
    level: "info",   // or a filter such as "ferroclaw=debug,info"
    format: "text",  // or "json"
  }},
  session: {{
    history_turns: 50,                 // user turns kept in the context
    tool_result_context_chars: 20000,  // older tool results are trimmed past this
  }},
}}
"#,
        provider_lit = lit(provider),
        tool_mode_line = tool_mode_line,
        model_lit = lit(model),
        provider_key = lit(provider),
        kind = lit(kind.as_str()),
    )
}

/// Local reasoning models known to write tool calls as text at times, as Ollama, vLLM
/// and LM Studio name them: gpt-oss, Qwen3 (`qwen3:8b`, `Qwen/Qwen3-8B`,
/// `qwen/qwen3-coder-30b`) and DeepSeek-R1 with its distills (`deepseek-r1:14b`,
/// `deepseek-ai/DeepSeek-R1-Distill-Qwen-7B`).
pub fn needs_auto_tool_mode(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    ["gpt-oss", "qwen3", "deepseek-r1"]
        .iter()
        .any(|family| m.contains(family))
}

#[cfg(test)]
mod tests {
    use super::needs_auto_tool_mode;

    #[test]
    fn the_local_reasoning_models_get_auto_and_look_alikes_do_not() {
        for m in [
            "openai/gpt-oss-20b",
            "gpt-oss:120b",
            "qwen3:8b",
            "Qwen/Qwen3-8B",
            "qwen/qwen3-coder-30b",
            "deepseek-r1:14b",
            "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
        ] {
            assert!(needs_auto_tool_mode(m), "{m}");
        }
        for m in [
            "gpt-4o-mini",
            "qwen2.5:7b",
            "deepseek-chat",
            "llama3.1:8b",
            "deepseek-v3",
        ] {
            assert!(!needs_auto_tool_mode(m), "{m}");
        }
    }
}
