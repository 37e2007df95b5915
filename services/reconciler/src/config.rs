//! Typed configuration: defaults, then the TOML file named by `OPLEDGER_RECONCILER_CONFIG`, then
//! `OPLEDGER_RECONCILER_*` environment variables, then validation.

use opledger_grpc::client::ClientTls;
use opledger_grpc::config::{ConfigError, DatabaseUrl, ListenerConfig, Secret, check_database};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The reconciler's configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address of the gRPC port (health and reflection).
    pub listen: SocketAddr,
    /// Address of the Prometheus metrics endpoint (`GET /metrics`, HTTP/1.1).
    pub metrics_listen: SocketAddr,
    /// Timeouts and limits of every listener of the service (`[listener]`, the same keys on every
    /// service: see the listener section).
    #[serde(default)]
    pub listener: ListenerConfig,
    /// PostgreSQL URL of a login role in `opledger_reconciler` (that service's own role only).
    pub database_url: DatabaseUrl,
    /// Pooled database connections.
    pub db_max_connections: u32,
    /// Seconds a call waits for a pooled connection.
    pub db_acquire_timeout_secs: u64,
    /// Names this worker in transition logs.
    pub worker_id: String,
    /// The signer's gRPC URL (for cancel replacements).
    pub signer_url: String,
    /// The caller token the signer expects (`OPLEDGER_RECONCILER_SIGNER_TOKEN`).
    pub signer_token: Secret,
    /// TLS towards the signer (`[signer_tls]`: `ca`, and `cert` + `key` for mutual TLS, optional
    /// `domain`); `signer_url` must then be `https://`. Absent: plain HTTP/2 on a private segment.
    #[serde(default)]
    pub signer_tls: Option<ClientTls>,
    /// JSON-RPC URL per network id: where cancel replacements are submitted.
    pub rpc: BTreeMap<String, String>,
    /// PEM CA that alone is trusted for `https://` JSON-RPC URLs (a node behind a private CA);
    /// absent: the system's root certificates.
    #[serde(default)]
    pub rpc_ca: Option<PathBuf>,
    /// HTTP headers sent with every JSON-RPC call, per network id (a node provider's API key:
    /// `[rpc_headers.mainnet]` `x-api-key = "..."`); values are secrets, never logged.
    #[serde(default)]
    pub rpc_headers: BTreeMap<String, BTreeMap<String, Secret>>,
    /// Evidence per network id (`[evidence.<id>]`, one for every network of `rpc`): `urls` (the
    /// independent endpoints whose agreement is evidence), `quorum`, `confirmations` or
    /// `finalized = true`, `min_confirmations` (12), `max_lag_blocks` (8), all keys in the
    /// evidence section below. Verdicts that cannot be undone (a settlement, a
    /// release, an operator's resolution) rest only on what a quorum of these agree on at one
    /// pinned block, at final depth. No default: each network names its finality.
    #[serde(default)]
    pub evidence: BTreeMap<String, opledger_chain::NetworkEvidence>,
    /// The team that owns operations escalated on evidence of a compromised key or tampering (a
    /// nonce consumed without any of our attempts, an attempt whose content contradicts its row).
    #[serde(default = "default_security_owner")]
    pub security_owner: String,
    /// Seconds a BROADCAST operation may go without news before the reconciler examines it.
    pub stale_broadcast_secs: u64,
    /// Seconds an attempt may stay unmined with its nonce unconsumed before a cancel is signed.
    pub cancel_after_secs: u64,
    /// Seconds an operation may stay UNKNOWN without a verdict before it is escalated to
    /// FAILED_TERMINAL (hold kept) for `owner`.
    pub escalate_after_secs: u64,
    /// The team that owns escalated operations (lowercase, digits, '-', '_').
    pub owner: String,
    /// Milliseconds between passes.
    pub poll_interval_ms: u64,
    /// Operations examined per pass.
    pub batch_size: u32,
    /// Milliseconds a node may take to answer.
    pub rpc_timeout_ms: u64,
}

fn default_security_owner() -> String {
    "security".to_owned()
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 15055)),
            metrics_listen: SocketAddr::from(([127, 0, 0, 1], 9105)),
            listener: ListenerConfig::default(),
            database_url: DatabaseUrl::default(),
            db_max_connections: 4,
            db_acquire_timeout_secs: 5,
            worker_id: "reconciler".to_owned(),
            signer_url: "http://127.0.0.1:15053".to_owned(),
            signer_token: Secret::default(),
            signer_tls: None,
            rpc_ca: None,
            rpc_headers: BTreeMap::new(),
            rpc: BTreeMap::new(),
            evidence: BTreeMap::new(),
            security_owner: default_security_owner(),
            stale_broadcast_secs: 120,
            cancel_after_secs: 300,
            escalate_after_secs: 3_600,
            owner: "payments-operations".to_owned(),
            poll_interval_ms: 1_000,
            batch_size: 64,
            rpc_timeout_ms: 5_000,
        }
    }
}

impl Config {
    /// Loads defaults, then `file` if given, then the environment, and validates.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let config: Config = opledger_grpc::config::load("OPLEDGER_RECONCILER_", file)?;
        check_database(&config.database_url, config.db_max_connections)?;
        config.listener.validate()?;
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
        if let Err((field, problem)) =
            opledger_chain::evidence::check_evidence(config.rpc.keys(), &config.evidence)
        {
            return invalid(field, problem);
        }
        let owner_ok = |owner: &str| {
            !owner.is_empty()
                && owner.len() <= 63
                && owner
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        };
        if !owner_ok(&config.owner) {
            return invalid(
                "owner",
                "must be 1 to 63 lowercase letters, digits, '-' or '_'",
            );
        }
        if !owner_ok(&config.security_owner) {
            return invalid(
                "security_owner",
                "must be 1 to 63 lowercase letters, digits, '-' or '_'",
            );
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
