//! Typed configuration: defaults, then an optional TOML file, then `OPLEDGER_OPERATIONS_*`
//! environment variables, then validation.

use opledger_config::{ApiKeyCache, ConfigError, ServiceBase};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The operations service's configuration.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The keys every service has (listen addresses, database pool, listener limits).
    #[serde(flatten)]
    pub base: ServiceBase,
    /// Seconds the same-destination-and-amount risk signal looks back.
    pub risk_window_secs: u64,
    /// The network registry, one `[networks.<id>]` table per network withdrawals may name, with
    /// `memo = true` when its transfers can carry a memo (default `false`; EVM transfers carry
    /// none: native transfers have empty calldata, ERC-20 ones exactly the `transfer` call). A
    /// create naming a network not listed is refused (INVALID_ARGUMENT, field `payload.network`),
    /// a memo on a network with `memo = false` too (field `payload.memo`); nothing is stored and
    /// no hold is placed. Empty: every network is accepted and memos are not checked (a warning
    /// at start): list every network you pay out on.
    #[serde(default)]
    pub networks: BTreeMap<String, NetworkPolicy>,
    /// Refuse a create whose tenant has no ACTIVE hot wallet that a signer registered for the
    /// network (`signer_wallets`): FAILED_PRECONDITION, reason `NO_EXECUTOR_FOR_NETWORK`,
    /// metadata `network`; nothing is stored and no hold is placed.
    pub require_executor: bool,
    /// Seconds a found executor is remembered (a retired wallet may still be accepted this long;
    /// a missing one is looked up again at every create). 0: looked up at every create.
    pub executor_cache_ttl_secs: u64,
    /// How long a verified API key stays cached (`auth_cache_ttl_secs`).
    #[serde(flatten)]
    pub api_keys: ApiKeyCache,
}

opledger_config::service_config!(Config);

/// What the platform knows of one network (`[networks.<id>]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkPolicy {
    /// Whether a transfer on this network can carry the payload's memo (so the memo the approvers
    /// approved is what is executed); `false` when absent.
    #[serde(default)]
    pub memo: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            base: ServiceBase::loopback(15051, 9101, 32),
            risk_window_secs: 24 * 3600,
            networks: BTreeMap::new(),
            require_executor: true,
            executor_cache_ttl_secs: 30,
            api_keys: ApiKeyCache::default(),
        }
    }
}

impl Config {
    /// Loads defaults, then `file` if given, then the environment, and validates.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let config: Config = opledger_config::load("OPLEDGER_OPERATIONS_", file)?;
        config.base.validate()?;
        if config.risk_window_secs == 0 {
            return Err(ConfigError::Invalid {
                field: "risk_window_secs",
                problem: "must be at least 1",
            });
        }
        if config
            .networks
            .keys()
            .any(|id| opledger_domain::payload::NetworkId::parse(id).is_err())
        {
            return Err(ConfigError::Invalid {
                field: "networks",
                problem: "names an invalid network id ([a-z0-9][a-z0-9-]{0,62})",
            });
        }
        Ok(config)
    }

    /// The store settings this configuration implies.
    pub fn store_config(&self) -> opledger_store::StoreConfig {
        opledger_store::StoreConfig {
            max_connections: self.base.db_max_connections,
            acquire_timeout: self.base.acquire_timeout(),
            risk_window: Duration::from_secs(self.risk_window_secs),
        }
    }
}
