//! Loads configuration once per command and builds what commands need from it.

use std::sync::Arc;

use ferroclaw_config::settings::Settings;
use ferroclaw_config::{Env, LoadOptions, LoadedConfig};
use ferroclaw_runtime::Runtime;
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
            Arc::new(ferroclaw_runtime::bootstrap::file_store(&settings));
        Ok(Self {
            loaded,
            settings,
            store,
        })
    }

    /// The runtime every run of this command goes through (the same queues, lanes and
    /// session leases as a gateway's).
    pub fn runtime(&self) -> anyhow::Result<Runtime> {
        Ok(Runtime::build(
            &self.settings,
            self.store.clone(),
            ferroclaw_runtime::RuntimeOptions::from_settings(&self.settings),
        )?)
    }
}
