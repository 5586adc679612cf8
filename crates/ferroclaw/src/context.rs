//! Loads configuration once per command and builds what commands need from it.

use std::sync::Arc;

use anyhow::Context as _;
use ferroclaw_agent::Agent;
use ferroclaw_config::settings::Settings;
use ferroclaw_config::{Env, LoadOptions, LoadedConfig};
use ferroclaw_store::SessionStore;

use crate::cli::GlobalArgs;

pub struct AppContext {
    pub loaded: LoadedConfig,
    /// `loaded` resolved once: what the crates below the binary are given.
    pub settings: Settings,
    pub store: Arc<dyn SessionStore>,
}

impl AppContext {
    pub fn load(global: &GlobalArgs) -> anyhow::Result<Self> {
        let opts = LoadOptions {
            home: global.home.clone(),
            config_path: global.config.clone(),
        };
        let loaded = ferroclaw_config::load(&opts, Env::from_process())?;
        for w in &loaded.warnings {
            eprintln!("warning: {w}");
        }
        let settings = loaded.settings();
        let store: Arc<dyn SessionStore> =
            Arc::new(ferroclaw_agent::bootstrap::file_store(&settings));
        Ok(Self {
            loaded,
            settings,
            store,
        })
    }

    pub fn agent(&self, id: Option<&str>) -> anyhow::Result<Agent> {
        let id = id.map_or_else(|| self.settings.default_agent.clone(), str::to_string);
        ferroclaw_agent::bootstrap::build_agent(&self.settings, &id, self.store.clone())
            .with_context(|| format!("cannot set up agent `{id}`"))
    }
}
