use std::process::ExitCode;

use crate::context::AppContext;

pub fn run(ctx: &AppContext) -> anyhow::Result<ExitCode> {
    let default = ctx.loaded.default_agent_id();
    for id in ctx.loaded.agent_ids() {
        let marker = if id == default { "*" } else { " " };
        match ctx.loaded.resolve_agent(&id) {
            Ok(a) => println!(
                "{marker} {:<16} {:<20} {}/{}  {}",
                a.id,
                a.name,
                a.provider,
                a.model,
                a.workspace.display()
            ),
            Err(e) => println!("{marker} {id:<16} (not usable: {e})"),
        }
    }
    Ok(ExitCode::SUCCESS)
}
