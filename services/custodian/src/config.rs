//! Typed configuration: defaults, then the TOML file named by `OPLEDGER_CUSTODIAN_CONFIG`, then
//! `OPLEDGER_CUSTODIAN_*` environment variables, then validation.

use opledger_config::{ConfigError, Secret, ServiceBase};
pub use opledger_custodian::{AccountRoute, account_name};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The custodian executor's configuration.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The keys every service has (listen addresses, database pool, listener limits).
    #[serde(flatten)]
    pub base: ServiceBase,
    /// Names this executor instance in leases, sends, records and the transition log.
    pub executor_id: String,
    /// The provider accounts, one `[[accounts]]` per tenant, network and asset routed to a
    /// custodian (the operations service's `custodian_routes`): `name` (stored with each request),
    /// `tenant`, `network`, `asset`, and `[accounts.provider]` with the account's `profile` and settings. A routed
    /// withdrawal without an account here waits, APPROVED, until one is configured.
    #[serde(default)]
    pub accounts: Vec<AccountRoute>,
    /// The tenants whose approvals this executor verifies (`[[trust_roots]]`, the same keys as
    /// the signer's): a withdrawal is sent only when every stored decision verifies against the
    /// tenant's trust statement signed by one of its pinned administrator keys and its policy is
    /// met. A tenant without an entry has its withdrawals refused (FAILED_TERMINAL, security).
    #[serde(default)]
    pub trust_roots: Vec<opledger_trust::TrustRootConfig>,
    /// Evidence per network id (`[evidence.<id>]`, the keys of the evidence section below): the
    /// executor's own endpoints, `quorum`, `confirmations` or `finalized = true`. A withdrawal
    /// whose custodian record names a transaction settles only once a quorum of these agrees,
    /// at final depth, that it paid exactly the approved transfer. Every account's network is
    /// here or in `unwatched_networks`.
    #[serde(default)]
    pub evidence: BTreeMap<String, opledger_chain::NetworkEvidence>,
    /// Networks whose withdrawals settle on the custodian's COMPLETED record alone, without chain
    /// evidence (a network this deployment cannot read). An explicit choice, never a default:
    /// the custodian is then trusted for the payout (docs/custodians.md).
    #[serde(default)]
    pub unwatched_networks: Vec<String>,
    /// PEM CA that alone is trusted for `https://` evidence URLs; absent: the system's roots.
    #[serde(default)]
    pub rpc_ca: Option<PathBuf>,
    /// HTTP headers sent with every evidence call, per network id (a provider's API key); values
    /// are secrets, never logged.
    #[serde(default)]
    pub rpc_headers: BTreeMap<String, BTreeMap<String, Secret>>,
    /// Milliseconds an evidence endpoint may take to answer.
    pub rpc_timeout_ms: u64,
    /// Milliseconds between passes.
    pub poll_interval_ms: u64,
    /// Withdrawals handled per pass.
    pub batch_size: u32,
    /// Seconds a withdrawal in flight waits between two lookups of the provider's record.
    pub follow_every_secs: u64,
    /// Seconds an instance holds a withdrawal while it sends or looks it up (another instance
    /// takes it over after that).
    pub lease_secs: u64,
    /// Seconds after its request was stored that a withdrawal whose provider record is final
    /// (COMPLETED or FAILED) with a transaction the chain does not show final is escalated to an
    /// operator (`CUSTODIAN_TRANSACTION_NOT_FINAL`: dropped, or reorganized away); its funds stay
    /// held.
    pub stuck_after_secs: u64,
    /// How long a verified API key of an operator (the `no_lookup` binding API) stays cached
    /// (`auth_cache_ttl_secs`).
    #[serde(flatten)]
    pub api_keys: opledger_config::ApiKeyCache,
}

opledger_config::service_config!(Config);

impl Default for Config {
    fn default() -> Self {
        Config {
            base: ServiceBase::loopback(15058, 9108, 8),
            executor_id: "custodian-executor".to_owned(),
            accounts: Vec::new(),
            trust_roots: Vec::new(),
            evidence: BTreeMap::new(),
            unwatched_networks: Vec::new(),
            rpc_ca: None,
            rpc_headers: BTreeMap::new(),
            rpc_timeout_ms: 5_000,
            poll_interval_ms: 500,
            batch_size: 64,
            follow_every_secs: 5,
            lease_secs: 60,
            stuck_after_secs: 7_200,
            api_keys: opledger_config::ApiKeyCache::default(),
        }
    }
}

impl Config {
    /// Loads defaults, then `file` if given, then the environment, and validates.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let config: Config = opledger_config::load("OPLEDGER_CUSTODIAN_", file)?;
        config.base.validate()?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |field, problem| Err(ConfigError::Invalid { field, problem });
        if self.executor_id.is_empty() || self.executor_id.len() > 128 {
            return invalid("executor_id", "must be 1 to 128 characters");
        }
        if self.poll_interval_ms == 0 || self.batch_size == 0 {
            return invalid(
                "poll_interval_ms",
                "poll_interval_ms and batch_size must be at least 1",
            );
        }
        if self.lease_secs < 5 || self.follow_every_secs == 0 {
            return invalid(
                "lease_secs",
                "lease_secs must be at least 5 and follow_every_secs at least 1",
            );
        }
        if self.stuck_after_secs == 0 {
            return invalid("stuck_after_secs", "must be at least 1");
        }
        if self.rpc_timeout_ms == 0 {
            return invalid("rpc_timeout_ms", "must be at least 1");
        }
        opledger_chain::links::check_reader_settings(&self.evidence, &self.rpc_headers)?;
        if self
            .unwatched_networks
            .iter()
            .any(|n| self.evidence.contains_key(n))
        {
            return invalid(
                "unwatched_networks",
                "names a network that has an [evidence] entry",
            );
        }
        if self.accounts.iter().any(|a| {
            !self.evidence.contains_key(&a.network) && !self.unwatched_networks.contains(&a.network)
        }) {
            return invalid(
                "accounts",
                "an account's network has no [evidence] entry and is not in unwatched_networks",
            );
        }
        opledger_trust::check_trust_roots(&self.trust_roots)?;
        if let Err(problem) = opledger_custodian::check_routes(&self.accounts) {
            return invalid("accounts", problem);
        }
        Ok(())
    }
}
