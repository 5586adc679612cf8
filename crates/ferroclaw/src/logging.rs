use tracing_subscriber::EnvFilter;

/// Logs go to stderr so stdout stays clean for answers and command output.
pub fn init(level: &str, json: bool) {
    let filter = EnvFilter::try_from_env("FERROCLAW_LOG")
        .or_else(|_| EnvFilter::try_new(level))
        .unwrap_or_else(|_| EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(true);
    // A second init (tests calling dispatch twice) is harmless; ignore it.
    let _ = if json {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.compact().try_init()
    };
}
