//! Typed configuration: defaults, then the TOML file named by `OPLEDGER_RECONCILER_CONFIG`, then
//! `OPLEDGER_RECONCILER_*` environment variables, then validation.

use opledger_chain::ChainLinks;
use opledger_config::{ApiKeyCache, ConfigError, ServiceBase};
use opledger_grpc::client::SignerLink;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The reconciler's configuration.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The keys every service has (listen addresses, database pool, listener limits).
    #[serde(flatten)]
    pub base: ServiceBase,
    /// Names this worker in transition logs.
    pub worker_id: String,
    /// How the signer is reached (`signer_url`, `signer_token`, `signer_tls`).
    #[serde(flatten)]
    pub signer: SignerLink,
    /// How each network's nodes are reached (`rpc`, `rpc_ca`, `rpc_headers`, `evidence`).
    #[serde(flatten)]
    pub chain: ChainLinks,
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
    /// How long a verified API key of an operator stays cached (`auth_cache_ttl_secs`).
    #[serde(flatten)]
    pub api_keys: ApiKeyCache,
}

opledger_config::service_config!(Config);

fn default_security_owner() -> String {
    "security".to_owned()
}

impl Default for Config {
    fn default() -> Self {
        Config {
            base: ServiceBase::loopback(15055, 9105, 4),
            worker_id: "reconciler".to_owned(),
            signer: SignerLink::default(),
            chain: ChainLinks::default(),
            security_owner: default_security_owner(),
            stale_broadcast_secs: 120,
            cancel_after_secs: 300,
            escalate_after_secs: 3_600,
            owner: "payments-operations".to_owned(),
            poll_interval_ms: 1_000,
            batch_size: 64,
            rpc_timeout_ms: 5_000,
            api_keys: ApiKeyCache::default(),
        }
    }
}

impl Config {
    /// Loads defaults, then `file` if given, then the environment, and validates.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let config: Config = opledger_config::load("OPLEDGER_RECONCILER_", file)?;
        config.base.validate()?;
        config.signer.validate()?;
        config.chain.validate()?;
        opledger_config::check_owner("owner", &config.owner)?;
        opledger_config::check_owner("security_owner", &config.security_owner)?;
        Ok(config)
    }
}
