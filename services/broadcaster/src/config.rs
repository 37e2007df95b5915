//! Typed configuration: defaults, then the TOML file named by `OPLEDGER_BROADCASTER_CONFIG`, then
//! `OPLEDGER_BROADCASTER_*` environment variables, then validation.

use opledger_grpc::client::ClientTls;
use opledger_grpc::config::{ConfigError, DatabaseUrl, Secret, check_database};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The broadcaster's configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address of the gRPC port (health and reflection).
    pub listen: SocketAddr,
    /// Address of the Prometheus metrics endpoint (`GET /metrics`, HTTP/1.1): submission classes.
    pub metrics_listen: SocketAddr,
    /// PostgreSQL URL of a login role in `opledger_broadcaster` (that service's own role only).
    pub database_url: DatabaseUrl,
    /// Pooled database connections.
    pub db_max_connections: u32,
    /// Seconds a call waits for a pooled connection.
    pub db_acquire_timeout_secs: u64,
    /// Names this worker in transition logs.
    pub worker_id: String,
    /// The signer's gRPC URL.
    pub signer_url: String,
    /// The caller token the signer expects (`OPLEDGER_BROADCASTER_SIGNER_TOKEN`).
    pub signer_token: Secret,
    /// TLS towards the signer (`[signer_tls]`: `ca`, and `cert` + `key` for mutual TLS, optional
    /// `domain`); `signer_url` must then be `https://`. Absent: plain HTTP/2 on a private segment.
    #[serde(default)]
    pub signer_tls: Option<ClientTls>,
    /// JSON-RPC URL per network id.
    pub rpc: BTreeMap<String, String>,
    /// PEM CA that alone is trusted for `https://` JSON-RPC URLs (a node behind a private CA);
    /// absent: the system's root certificates.
    #[serde(default)]
    pub rpc_ca: Option<PathBuf>,
    /// HTTP headers sent with every JSON-RPC call, per network id (a node provider's API key:
    /// `[rpc_headers.mainnet]` `x-api-key = "..."`); values are secrets, never logged.
    #[serde(default)]
    pub rpc_headers: BTreeMap<String, BTreeMap<String, Secret>>,
    /// Confirmations required per network id (blocks, the including one counted); 1 if absent.
    #[serde(default)]
    pub confirmations: BTreeMap<String, u64>,
    /// Seconds a BROADCAST transfer may stay unmined before it is fee-bumped.
    pub bump_after_secs: u64,
    /// Blocks below the head within which confirmed inclusions are re-checked for reorganizations.
    pub reorg_window_blocks: u64,
    /// Milliseconds between polls when there is no work.
    pub poll_interval_ms: u64,
    /// Operations fetched per poll.
    pub batch_size: u32,
    /// BROADCAST operations the watcher examines per new head.
    pub watch_batch_size: u32,
    /// Operations worked on at once.
    pub concurrency: usize,
    /// Milliseconds a submission may take before it counts as a timeout (UNKNOWN).
    pub submit_timeout_ms: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 50054)),
            metrics_listen: SocketAddr::from(([127, 0, 0, 1], 9104)),
            database_url: DatabaseUrl::default(),
            db_max_connections: 8,
            db_acquire_timeout_secs: 5,
            worker_id: "broadcaster".to_owned(),
            signer_url: "http://127.0.0.1:50053".to_owned(),
            signer_token: Secret::default(),
            signer_tls: None,
            rpc_ca: None,
            rpc_headers: BTreeMap::new(),
            rpc: BTreeMap::new(),
            confirmations: BTreeMap::new(),
            reorg_window_blocks: 64,
            bump_after_secs: 60,
            poll_interval_ms: 200,
            batch_size: 64,
            watch_batch_size: 2_000,
            concurrency: 8,
            submit_timeout_ms: 5_000,
        }
    }
}

impl Config {
    /// Loads defaults, then `file` if given, then the environment, and validates.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let config: Config = opledger_grpc::config::load("OPLEDGER_BROADCASTER_", file)?;
        check_database(&config.database_url, config.db_max_connections)?;
        let invalid = |field, problem| Err(ConfigError::Invalid { field, problem });
        if config.signer_token.0.is_empty() {
            return invalid("signer_token", "is required");
        }
        if config.rpc.is_empty() {
            return invalid("rpc", "must name at least one network");
        }
        if config
            .rpc_headers
            .keys()
            .any(|n| !config.rpc.contains_key(n))
        {
            return invalid("rpc_headers", "names a network without an rpc URL");
        }
        if config.batch_size == 0 || config.concurrency == 0 {
            return invalid("batch_size/concurrency", "must be at least 1");
        }
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
