//! Typed configuration: defaults, then an optional TOML file, then `OPLEDGER_OPERATIONS_*`
//! environment variables, then validation.

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// The operations service's configuration.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address of the gRPC port (`OPLEDGER_OPERATIONS_LISTEN`).
    pub listen: SocketAddr,
    /// PostgreSQL URL of a login role in `opledger_app` (`OPLEDGER_OPERATIONS_DATABASE_URL`).
    pub database_url: String,
    /// Pooled database connections.
    pub db_max_connections: u32,
    /// Seconds a call waits for a pooled connection before failing UNAVAILABLE.
    pub db_acquire_timeout_secs: u64,
    /// Seconds a verified API key stays cached (a revoked key works at most this long).
    pub auth_cache_ttl_secs: u64,
    /// Seconds the same-destination-and-amount risk signal looks back.
    pub risk_window_secs: u64,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("listen", &self.listen)
            .field("database_url", &"<redacted>")
            .field("db_max_connections", &self.db_max_connections)
            .field("db_acquire_timeout_secs", &self.db_acquire_timeout_secs)
            .field("auth_cache_ttl_secs", &self.auth_cache_ttl_secs)
            .field("risk_window_secs", &self.risk_window_secs)
            .finish()
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 50051)),
            database_url: String::new(),
            db_max_connections: 32,
            db_acquire_timeout_secs: 5,
            auth_cache_ttl_secs: 30,
            risk_window_secs: 24 * 3600,
        }
    }
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A source could not be read or a value has the wrong type.
    #[error("configuration: {0}")]
    Load(#[from] Box<figment::Error>),
    /// A value is out of range.
    #[error("configuration: {field} {problem}")]
    Invalid {
        /// Which setting.
        field: &'static str,
        /// What is wrong with it.
        problem: &'static str,
    },
}

impl Config {
    /// Loads defaults, then `file` if given, then the environment, and validates.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        if let Some(file) = file {
            figment = figment.merge(Toml::file_exact(file));
        }
        let config: Config = figment
            .merge(Env::prefixed("OPLEDGER_OPERATIONS_"))
            .extract()
            .map_err(Box::new)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks ranges.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |field, problem| Err(ConfigError::Invalid { field, problem });
        if self.database_url.is_empty() {
            return invalid("database_url", "is required");
        }
        if self.db_max_connections == 0 {
            return invalid("db_max_connections", "must be at least 1");
        }
        if self.risk_window_secs == 0 {
            return invalid("risk_window_secs", "must be at least 1");
        }
        Ok(())
    }

    /// The store settings this configuration implies.
    pub fn store_config(&self) -> opledger_store::StoreConfig {
        opledger_store::StoreConfig {
            max_connections: self.db_max_connections,
            acquire_timeout: Duration::from_secs(self.db_acquire_timeout_secs),
            risk_window: Duration::from_secs(self.risk_window_secs),
        }
    }
}
