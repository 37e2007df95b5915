//! Typed configuration: defaults, then an optional TOML file, then `OPLEDGER_OPERATIONS_*`
//! environment variables, then validation.

use opledger_config::{ApiKeyCache, ConfigError, ServiceBase};
use opledger_domain::ids::TenantId;
use opledger_domain::payload::NetworkId;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
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
    /// The tenants and networks whose withdrawals a custodian executes (`[[custodian_routes]]`,
    /// `tenant` and `network`); every other withdrawal is executed by the local signer. Chosen
    /// at create and stored with the withdrawal (`GetWithdrawal` shows it); a change applies to
    /// withdrawals created after it. A custodian route needs no signer wallet: `require_executor`
    /// checks hot wallets for the local signer's withdrawals only.
    #[serde(default)]
    pub custodian_routes: Vec<CustodianRoute>,
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

/// One tenant's network whose withdrawals a custodian executes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CustodianRoute {
    /// The tenant id (a UUID).
    pub tenant: String,
    /// The network id, as in the payload.
    pub network: String,
}

/// The custodian routes of the configuration as (tenant, network) pairs, refused when a tenant
/// is not a UUID, a network is not a valid id or not in a non-empty registry, or a pair repeats.
pub fn routes(
    routes: &[CustodianRoute],
    networks: &BTreeMap<String, NetworkPolicy>,
) -> Result<HashSet<(TenantId, String)>, ConfigError> {
    let invalid = |problem| ConfigError::Invalid {
        field: "custodian_routes",
        problem,
    };
    let mut pairs = HashSet::new();
    for route in routes {
        let tenant: TenantId = route
            .tenant
            .parse()
            .map_err(|_| invalid("names a tenant that is not a UUID"))?;
        NetworkId::parse(&route.network)
            .map_err(|_| invalid("names an invalid network id ([a-z0-9][a-z0-9-]{0,62})"))?;
        if !networks.is_empty() && !networks.contains_key(&route.network) {
            return Err(invalid("names a network missing from [networks]"));
        }
        if !pairs.insert((tenant, route.network.clone())) {
            return Err(invalid("names the same tenant and network twice"));
        }
    }
    Ok(pairs)
}

impl Default for Config {
    fn default() -> Self {
        Config {
            base: ServiceBase::loopback(15051, 9101, 32),
            risk_window_secs: 24 * 3600,
            networks: BTreeMap::new(),
            require_executor: true,
            executor_cache_ttl_secs: 30,
            custodian_routes: Vec::new(),
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
        routes(&config.custodian_routes, &config.networks)?;
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
