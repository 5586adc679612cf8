//! `ferroclaw-mcp-fixture [--init-delay-ms N] [--die-after-ms N]`: the MCP test
//! server of `ferroclaw_testkit::mcp` over stdio. stdout is the protocol, so
//! everything else goes to stderr.

use std::process::ExitCode;
use std::time::Duration;

use ferroclaw_testkit::mcp::{serve_stdio, FixtureOptions};

const USAGE: &str = "usage: ferroclaw-mcp-fixture [--init-delay-ms N] [--die-after-ms N]";

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<FixtureOptions, String> {
    let mut opts = FixtureOptions::default();
    while let Some(flag) = args.next() {
        let mut millis = || -> Result<Duration, String> {
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let ms = value
                .parse::<u64>()
                .map_err(|e| format!("{flag} {value}: {e}"))?;
            Ok(Duration::from_millis(ms))
        };
        match flag.as_str() {
            "--init-delay-ms" => opts.init_delay = millis()?,
            "--die-after-ms" => opts.die_after = Some(millis()?),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(opts)
}

fn main() -> ExitCode {
    let opts = match parse_args(std::env::args().skip(1)) {
        Ok(opts) => opts,
        Err(e) => {
            eprintln!("ferroclaw-mcp-fixture: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ferroclaw-mcp-fixture: tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve_stdio(opts)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferroclaw-mcp-fixture: {e}");
            ExitCode::FAILURE
        }
    }
}
