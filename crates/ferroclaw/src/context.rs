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
    /// Loads the configuration and opens the session store; an unreachable database is
    /// an error (see [`AppContext::load_for_server`]).
    pub async fn load(global: &GlobalArgs) -> anyhow::Result<Self> {
        Self::load_with(global, false).await
    }

    /// As [`AppContext::load`], waiting for an unreachable database (a server).
    pub async fn load_for_server(global: &GlobalArgs) -> anyhow::Result<Self> {
        Self::load_with(global, true).await
    }

    async fn load_with(global: &GlobalArgs, wait_for_database: bool) -> anyhow::Result<Self> {
        let loaded = load_config(global)?;
        let settings = loaded.settings();
        let store = if wait_for_database {
            ferroclaw_runtime::bootstrap::session_store_with_retry(&settings).await?
        } else {
            ferroclaw_runtime::bootstrap::session_store(&settings).await?
        };
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

/// The configuration alone (warnings printed), for commands that need no store.
pub fn load_config(global: &GlobalArgs) -> anyhow::Result<LoadedConfig> {
    let opts = LoadOptions {
        home: global.home.clone(),
        config_path: global.config.clone(),
    };
    let loaded = ferroclaw_config::load(&opts, Env::from_process())?;
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    Ok(loaded)
}
