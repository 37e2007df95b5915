//! Typed configuration: defaults, then an optional TOML file, then `OPLEDGER_APPROVALS_*`
//! environment variables, then validation.

use opledger_config::{ApiKeyCache, ConfigError, ServiceBase};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The approvals service's configuration.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The keys every service has (listen addresses, database pool, listener limits).
    #[serde(flatten)]
    pub base: ServiceBase,
    /// How long a verified API key stays cached (`auth_cache_ttl_secs`).
    #[serde(flatten)]
    pub api_keys: ApiKeyCache,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            base: ServiceBase::loopback(15052, 9102, 16),
            api_keys: ApiKeyCache::default(),
        }
    }
}

opledger_config::service_config!(Config);

impl Config {
    /// Loads defaults, then `file` if given, then the environment, and validates.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let config: Config = opledger_config::load("OPLEDGER_APPROVALS_", file)?;
        config.base.validate()?;
        Ok(config)
    }
}
