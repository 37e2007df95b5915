//! Typed configuration: defaults, then the TOML file named by `OPLEDGER_BROADCASTER_CONFIG`, then
//! `OPLEDGER_BROADCASTER_*` environment variables, then validation.

use opledger_grpc::client::ClientTls;
use opledger_grpc::config::{ConfigError, DatabaseUrl, ListenerConfig, Secret, check_database};
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
    /// Timeouts and limits of every listener of the service (`[listener]`, the same keys on every
    /// service: see the listener section).
    #[serde(default)]
    pub listener: ListenerConfig,
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
    /// Evidence per network id (`[evidence.<id>]`, one for every network of `rpc`): `urls` (the
    /// independent endpoints whose agreement is evidence), `quorum`, `confirmations` or
    /// `finalized = true`, `min_confirmations` (12), `max_lag_blocks` (8), all keys in the
    /// evidence section below. The watcher settles only a transfer attempt at
    /// final depth that a quorum of these agree on at one pinned block. No default: each network
    /// names its finality.
    #[serde(default)]
    pub evidence: BTreeMap<String, opledger_chain::NetworkEvidence>,
    /// The team that owns a withdrawal the watcher escalates because its attempt reverted.
    #[serde(default = "default_owner")]
    pub owner: String,
    /// The team that owns a withdrawal the watcher escalates on evidence of a compromised key or
    /// a tampered attempt.
    #[serde(default = "default_security_owner")]
    pub security_owner: String,
    /// Seconds a BROADCAST transfer may stay unmined before it is fee-bumped.
    pub bump_after_secs: u64,
    /// Blocks below the head within which confirmed inclusions are re-checked for reorganizations.
    pub reorg_window_blocks: u64,
    /// Milliseconds between reads of the fair queue of due operations while a slot is free: once
    /// the last read is used up (at once if it was a full batch), and every
    /// max(`poll_interval_ms`, 200) while it is not, so a new withdrawal is seen within that long.
    /// Also the pause between the chain watcher's passes.
    pub poll_interval_ms: u64,
    /// Due operations read from the fair queue at a time (each tenant's in turn).
    pub batch_size: u32,
    /// BROADCAST operations the watcher examines per new head.
    pub watch_batch_size: u32,
    /// Operations worked on at once (the next one starts as soon as one finishes).
    pub concurrency: usize,
    /// Milliseconds a submission may take before it counts as a timeout (UNKNOWN).
    pub submit_timeout_ms: u64,
    /// Back-off of an operation a pass could not move (the signer refused, was unavailable or
    /// busy, the call was interrupted, no RPC endpoint): the first failure is retried at the next
    /// pass, the n-th consecutive one waits `backoff_base_ms` x 2^(n-2) milliseconds, at most
    /// `backoff_max_ms`; the queue skips it meanwhile.
    pub backoff_base_ms: u64,
    /// Longest back-off in milliseconds (at least `backoff_base_ms`).
    pub backoff_max_ms: u64,
}

fn default_owner() -> String {
    "payments-operations".to_owned()
}

fn default_security_owner() -> String {
    "security".to_owned()
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 15054)),
            metrics_listen: SocketAddr::from(([127, 0, 0, 1], 9104)),
            listener: ListenerConfig::default(),
            database_url: DatabaseUrl::default(),
            db_max_connections: 8,
            db_acquire_timeout_secs: 5,
            worker_id: "broadcaster".to_owned(),
            signer_url: "http://127.0.0.1:15053".to_owned(),
            signer_token: Secret::default(),
            signer_tls: None,
            rpc_ca: None,
            rpc_headers: BTreeMap::new(),
            rpc: BTreeMap::new(),
            evidence: BTreeMap::new(),
            owner: default_owner(),
            security_owner: default_security_owner(),
            reorg_window_blocks: 64,
            bump_after_secs: 60,
            poll_interval_ms: 200,
            batch_size: 64,
            watch_batch_size: 2_000,
            concurrency: 8,
            submit_timeout_ms: 5_000,
            backoff_base_ms: 1_000,
            backoff_max_ms: 60_000,
        }
    }
}

impl Config {
    /// Loads defaults, then `file` if given, then the environment, and validates.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let config: Config = opledger_grpc::config::load("OPLEDGER_BROADCASTER_", file)?;
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
        for owner in [&config.owner, &config.security_owner] {
            let ok = !owner.is_empty()
                && owner.len() <= 63
                && owner.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_'
                });
            if !ok {
                return invalid(
                    "owner/security_owner",
                    "must be 1 to 63 lowercase letters, digits, '-' or '_'",
                );
            }
        }
        if config.batch_size == 0 || config.concurrency == 0 {
            return invalid("batch_size/concurrency", "must be at least 1");
        }
        if config.backoff_base_ms == 0 {
            return invalid("backoff_base_ms", "must be at least 1");
        }
        if config.backoff_max_ms < config.backoff_base_ms {
            return invalid("backoff_max_ms", "must be at least backoff_base_ms");
        }
        Ok(config)
    }

    /// The back-off this configuration sets.
    pub fn backoff(&self) -> opledger_store::queue::Backoff {
        opledger_store::queue::Backoff::new(
            Duration::from_millis(self.backoff_base_ms),
            Duration::from_millis(self.backoff_max_ms),
        )
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
