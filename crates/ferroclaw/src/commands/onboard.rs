//! `ferroclaw onboard`: writes a starting config. Non-interactive when a provider key is
//! already in the environment (or flags decide everything).

use std::io::{IsTerminal, Write as _};
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use ferroclaw_config::{Env, LoadOptions};

use crate::cli::{GlobalArgs, OnboardArgs};

/// A local server that answered with its models.
struct Local {
    name: String,
    base_url: String,
    models: Vec<String>,
}

impl Local {
    /// A gpt-oss model when there is one (it is what the executor and `tool_mode:
    /// auto` are made for), else the first listed.
    fn model(&self) -> Option<&str> {
        self.models
            .iter()
            .find(|m| m.to_ascii_lowercase().contains("gpt-oss"))
            .or(self.models.first())
            .map(String::as_str)
    }
}

/// The first local server (Ollama, vLLM, LM Studio on their usual ports) that lists at
/// least one model (each asked for a second).
async fn find_local() -> Option<Local> {
    let http = reqwest::Client::new();
    ferroclaw_providers::probe::find_local(&http, std::time::Duration::from_secs(1))
        .await
        .into_iter()
        .next()
        .map(|p| Local {
            name: p.name,
            base_url: p.base_url,
            models: p.models,
        })
}

/// Providers detected from the environment, in order of preference, with a default model.
const DETECT: [(&str, &str, &str); 7] = [
    ("OPENAI_API_KEY", "openai", "gpt-4o-mini"),
    ("ANTHROPIC_API_KEY", "anthropic", "claude-sonnet-4-5"),
    ("OPENROUTER_API_KEY", "openrouter", "openai/gpt-4o-mini"),
    ("GROQ_API_KEY", "groq", "llama-3.3-70b-versatile"),
    ("DEEPSEEK_API_KEY", "deepseek", "deepseek-chat"),
    ("MISTRAL_API_KEY", "mistral", "mistral-large-latest"),
    ("XAI_API_KEY", "xai", "grok-3-mini"),
];

pub async fn run(global: &GlobalArgs, args: OnboardArgs) -> anyhow::Result<ExitCode> {
    let env = Env::from_process();
    // Only the paths are needed; an existing broken config must not block rewriting it.
    let home = global
        .home
        .clone()
        .unwrap_or_else(|| ferroclaw_config::default_home(&env));
    let path = global
        .config
        .clone()
        .or_else(|| env.get("FERROCLAW_CONFIG").map(Into::into))
        .unwrap_or_else(|| home.join("config.json5"));
    if path.exists() && !args.force {
        bail!(
            "a config already exists at {}; pass --force to overwrite it",
            path.display()
        );
    }

    let detected = DETECT.iter().find(|(var, _, _)| env.get(var).is_some());
    let interactive = !args.non_interactive && std::io::stdin().is_terminal();
    let local = match (&args.provider, detected) {
        (None, None) => find_local().await,
        _ => None,
    };
    let mut base_url = args.base_url.clone();
    let from_local = local
        .as_ref()
        .and_then(|found| found.model().map(|m| (found, m.to_string())));
    let (provider, model) = if let Some((found, default_model)) = from_local {
        let model = args.model.clone().unwrap_or(default_model);
        eprintln!(
            "found a local server: {} at {} (models: {}); using `{model}`",
            found.name,
            found.base_url,
            found.models.join(", ")
        );
        base_url = base_url.or_else(|| Some(found.base_url.to_string()));
        let model = if interactive {
            ask("Model id", Some(&model))?
        } else {
            model
        };
        (found.name.to_string(), model)
    } else {
        match (&args.provider, &args.model, detected) {
            (Some(p), Some(m), _) => (p.clone(), m.clone()),
            (Some(p), None, _) => {
                let default = DETECT
                    .iter()
                    .find(|(_, name, _)| name == p)
                    .map(|(_, _, m)| m.to_string());
                match default {
                    Some(m) => (p.clone(), m),
                    None if interactive => (p.clone(), ask("Model id", None)?),
                    None => bail!("--model is required for provider `{p}`"),
                }
            }
            (None, m, Some((var, name, default_model))) => {
                eprintln!("found {var}: using provider `{name}`");
                (
                    name.to_string(),
                    m.clone().unwrap_or_else(|| default_model.to_string()),
                )
            }
            (None, _, None) if interactive => {
                let p = ask(
                    "Provider (openai, anthropic, ollama, vllm, lmstudio, …)",
                    Some("ollama"),
                )?;
                let m = ask("Model id", Some("gpt-oss:20b"))?;
                (p, m)
            }
            (None, _, None) => bail!(
                "no provider key found in the environment (OPENAI_API_KEY, ANTHROPIC_API_KEY, …) \
             and no local server answered (Ollama on 11434, vLLM on 8000, LM Studio on 1234); \
             set a key, start a server, or pass --provider and --model"
            ),
        }
    };

    let text = ferroclaw_config::starter_config(&provider, &model, base_url.as_deref());
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    // Prove the file we wrote loads, so onboarding never leaves a broken setup behind.
    let loaded = ferroclaw_config::load(
        &LoadOptions {
            home: Some(home.clone()),
            config_path: Some(path.clone()),
        },
        env,
    )?;
    if let Ok(agent) = loaded.resolve_agent(&loaded.default_agent_id()) {
        std::fs::create_dir_all(&agent.workspace)
            .with_context(|| format!("cannot create workspace {}", agent.workspace.display()))?;
    }
    println!("wrote {}", path.display());
    println!("next: `ferroclaw doctor`, then `ferroclaw agent chat`");
    Ok(ExitCode::SUCCESS)
}

fn ask(question: &str, default: Option<&str>) -> anyhow::Result<String> {
    match default {
        Some(d) => eprint!("{question} [{d}]: "),
        None => eprint!("{question}: "),
    }
    std::io::stderr().flush()?;
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let answer = line.trim();
    match (answer.is_empty(), default) {
        (false, _) => Ok(answer.to_string()),
        (true, Some(d)) => Ok(d.to_string()),
        (true, None) => bail!("{question} is required"),
    }
}
