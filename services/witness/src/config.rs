//! Typed configuration: defaults, then the TOML file named by `OPLEDGER_WITNESS_CONFIG`, then
//! `OPLEDGER_WITNESS_*` environment variables, then validation.

use opledger_grpc::config::{ConfigError, DatabaseUrl, ListenerConfig, Secret, check_database};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The witness's configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address of the gRPC port (health and reflection only: the witness has no API).
    pub listen: SocketAddr,
    /// Address of the Prometheus metrics endpoint (`GET /metrics`, HTTP/1.1).
    pub metrics_listen: SocketAddr,
    /// Timeouts and limits of every listener of the service (`[listener]`, the same keys on every
    /// service: see the listener section).
    #[serde(default)]
    pub listener: ListenerConfig,
    /// PostgreSQL URL of a login role in `opledger_witness`: it may read what a release rests on
    /// and record attestations and refusals, nothing else.
    pub database_url: DatabaseUrl,
    /// Pooled database connections.
    pub db_max_connections: u32,
    /// Seconds a call waits for a pooled connection.
    pub db_acquire_timeout_secs: u64,
    /// Names this witness in attestations and refusals.
    pub witness_id: String,
    /// Required. Evidence per network id (`[evidence.<id>]`): the witness's own independent endpoints
    /// (`urls`, best other providers than the reconciler's), `quorum`, `confirmations` or
    /// `finalized = true`, `min_confirmations` (12), `max_lag_blocks` (8), all keys in the
    /// evidence section below. A proposal on a network not listed here is
    /// never attested.
    #[serde(default)]
    pub evidence: BTreeMap<String, opledger_chain::NetworkEvidence>,
    /// PEM CA that alone is trusted for `https://` evidence URLs; absent: the system's roots.
    #[serde(default)]
    pub rpc_ca: Option<PathBuf>,
    /// HTTP headers sent with every evidence call, per network id (a provider's API key); values
    /// are secrets, never logged.
    #[serde(default)]
    pub rpc_headers: BTreeMap<String, BTreeMap<String, Secret>>,
    /// Milliseconds between passes.
    pub poll_interval_ms: u64,
    /// Proposals examined per pass.
    pub batch_size: u32,
    /// Milliseconds a node may take to answer.
    pub rpc_timeout_ms: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 15057)),
            metrics_listen: SocketAddr::from(([127, 0, 0, 1], 9107)),
            listener: ListenerConfig::default(),
            database_url: DatabaseUrl::default(),
            db_max_connections: 4,
            db_acquire_timeout_secs: 5,
            witness_id: "witness".to_owned(),
            evidence: BTreeMap::new(),
            rpc_ca: None,
            rpc_headers: BTreeMap::new(),
            poll_interval_ms: 1_000,
            batch_size: 64,
            rpc_timeout_ms: 5_000,
        }
    }
}

impl Config {
    /// Loads defaults, then `file` if given, then the environment, and validates.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let config: Config = opledger_grpc::config::load("OPLEDGER_WITNESS_", file)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks a configuration built in code the way [`Config::load`] checks a loaded one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_database(&self.database_url, self.db_max_connections)?;
        self.listener.validate()?;
        let invalid = |field, problem| Err(ConfigError::Invalid { field, problem });
        if self.evidence.is_empty() {
            return invalid("evidence", "must name at least one network");
        }
        if self
            .rpc_headers
            .keys()
            .any(|n| !self.evidence.contains_key(n))
        {
            return invalid("rpc_headers", "names a network without an [evidence] entry");
        }
        if let Err((field, problem)) =
            opledger_chain::evidence::check_evidence(self.evidence.keys(), &self.evidence)
        {
            return invalid(field, problem);
        }
        if self.witness_id.is_empty() || self.witness_id.len() > 128 {
            return invalid("witness_id", "must be 1 to 128 characters");
        }
        if self.poll_interval_ms == 0 || self.batch_size == 0 || self.rpc_timeout_ms == 0 {
            return invalid(
                "poll_interval_ms",
                "poll_interval_ms, batch_size and rpc_timeout_ms must be above zero",
            );
        }
        Ok(())
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
