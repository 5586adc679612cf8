//! Loads configuration once per command and builds what commands need from it.

use std::sync::Arc;

use ferroclaw_config::{Env, LoadOptions, LoadedConfig};
use ferroclaw_runtime::Runtime;
use ferroclaw_store::SessionStore;

use crate::cli::GlobalArgs;

pub struct AppContext {
    pub loaded: LoadedConfig,
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
        let store: Arc<dyn SessionStore> =
            Arc::new(ferroclaw_runtime::bootstrap::file_store(&loaded));
        Ok(Self { loaded, store })
    }

    /// The runtime every run of this command goes through (the same queues, lanes and
    /// session leases as a gateway's).
    pub fn runtime(&self) -> anyhow::Result<Runtime> {
        Ok(Runtime::build(
            &self.loaded,
            self.store.clone(),
            ferroclaw_runtime::RuntimeOptions::from_config(&self.loaded),
        )?)
    }
}
