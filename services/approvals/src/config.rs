//! Typed configuration: defaults, then an optional TOML file, then `OPLEDGER_APPROVALS_*`
//! environment variables, then validation.

use opledger_grpc::config::{ConfigError, DatabaseUrl, ListenerConfig, check_database};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// The approvals service's configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address of the gRPC port (`OPLEDGER_APPROVALS_LISTEN`).
    pub listen: SocketAddr,
    /// Address of the Prometheus metrics endpoint (`GET /metrics`, HTTP/1.1): gRPC request
    /// counts by method and code, latency histograms.
    pub metrics_listen: SocketAddr,
    /// Timeouts and limits of every listener of the service (`[listener]`, the same keys on every
    /// service: see the listener section).
    #[serde(default)]
    pub listener: ListenerConfig,
    /// PostgreSQL URL of a login role in `opledger_approvals` (that service's own role only) (`OPLEDGER_APPROVALS_DATABASE_URL`).
    pub database_url: DatabaseUrl,
    /// Pooled database connections.
    pub db_max_connections: u32,
    /// Seconds a call waits for a pooled connection before failing UNAVAILABLE.
    pub db_acquire_timeout_secs: u64,
    /// Seconds a verified API key stays cached (a revoked key works at most this long).
    pub auth_cache_ttl_secs: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 15052)),
            metrics_listen: SocketAddr::from(([127, 0, 0, 1], 9102)),
            listener: ListenerConfig::default(),
            database_url: DatabaseUrl::default(),
            db_max_connections: 16,
            db_acquire_timeout_secs: 5,
            auth_cache_ttl_secs: 30,
        }
    }
}

impl Config {
    /// Loads defaults, then `file` if given, then the environment, and validates.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let config: Config = opledger_grpc::config::load("OPLEDGER_APPROVALS_", file)?;
        check_database(&config.database_url, config.db_max_connections)?;
        config.listener.validate()?;
        Ok(config)
    }

    /// The store settings this configuration implies.
    pub fn store_config(&self) -> opledger_store::StoreConfig {
        opledger_store::StoreConfig {
            max_connections: self.db_max_connections,
            acquire_timeout: Duration::from_secs(self.db_acquire_timeout_secs),
            ..opledger_store::StoreConfig::default()
        }
    }
}
