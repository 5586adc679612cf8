use std::process::ExitCode;

use crate::cli::{ConfigCommand, GlobalArgs};
use crate::context::load_config;

pub fn run(global: &GlobalArgs, cmd: ConfigCommand) -> anyhow::Result<ExitCode> {
    let loaded = load_config(global)?;
    match cmd {
        ConfigCommand::Path => {
            println!("{}", loaded.path.display());
            if !loaded.file_exists {
                eprintln!("(the file does not exist yet; defaults are in use — `ferroclaw onboard` writes one)");
            }
        }
        ConfigCommand::Show => {
            println!("{}", serde_json::to_string_pretty(&loaded.masked_json())?);
        }
        ConfigCommand::Validate => {
            // Loading already validated the file. An agent that cannot run yet (say, no
            // provider key in this environment) is worth a note, not a failed validation.
            for id in loaded.agent_ids() {
                if let Err(e) = loaded.resolve_agent(&id) {
                    eprintln!("note: {e}");
                }
            }
            let source = if loaded.file_exists {
                loaded.path.display().to_string()
            } else {
                "defaults (no config file)".to_string()
            };
            println!(
                "config OK: {source} ({} warning{})",
                loaded.warnings.len(),
                if loaded.warnings.len() == 1 { "" } else { "s" }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
