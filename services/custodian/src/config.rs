//! Typed configuration: defaults, then the TOML file named by `OPLEDGER_CUSTODIAN_CONFIG`, then
//! `OPLEDGER_CUSTODIAN_*` environment variables, then validation.

use opledger_config::{ConfigError, ServiceBase};
use opledger_custodian::AccountConfig;
use opledger_domain::ids::TenantId;
use opledger_domain::payload::NetworkId;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::path::Path;

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
    /// Milliseconds between passes.
    pub poll_interval_ms: u64,
    /// Withdrawals handled per pass.
    pub batch_size: u32,
    /// Seconds a withdrawal in flight waits between two lookups of the provider's record.
    pub follow_every_secs: u64,
    /// Seconds an instance holds a withdrawal while it sends or looks it up (another instance
    /// takes it over after that).
    pub lease_secs: u64,
}

opledger_config::service_config!(Config);

/// One provider account and the tenant's network it executes.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AccountRoute {
    /// The account's name (`[a-z0-9][a-z0-9_-]{0,62}`), stored with each request it sends.
    pub name: String,
    /// The tenant id (a UUID).
    pub tenant: String,
    /// The network id, as in the payload.
    pub network: String,
    /// The asset code, as in the payload (`ETH`): the one asset the account's provider settings
    /// name (`asset_id`, `coin` or `currency_symbol`).
    pub asset: String,
    /// The provider, its profile and settings (`profile = "lookup_by_reference"`,
    /// `"one_send_per_reference"` or `"no_lookup"`; credentials as paths to secret files).
    pub provider: AccountConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            base: ServiceBase::loopback(15058, 9108, 8),
            executor_id: "custodian-executor".to_owned(),
            accounts: Vec::new(),
            trust_roots: Vec::new(),
            poll_interval_ms: 500,
            batch_size: 64,
            follow_every_secs: 5,
            lease_secs: 60,
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
        opledger_trust::check_trust_roots(&self.trust_roots)?;
        let (mut names, mut routes) = (HashSet::new(), HashSet::new());
        for account in &self.accounts {
            if !account_name(&account.name) {
                return invalid(
                    "accounts",
                    "names an account not matching [a-z0-9][a-z0-9_-]{0,62}",
                );
            }
            let Ok(tenant) = account.tenant.parse::<TenantId>() else {
                return invalid("accounts", "names a tenant that is not a UUID");
            };
            if NetworkId::parse(&account.network).is_err() {
                return invalid("accounts", "names an invalid network id");
            }
            if !names.insert(account.name.clone()) {
                return invalid("accounts", "names the same account twice");
            }
            if opledger_domain::payload::AssetCode::parse(&account.asset).is_err() {
                return invalid("accounts", "names an invalid asset code");
            }
            if !routes.insert((tenant, account.network.clone(), account.asset.clone())) {
                return invalid(
                    "accounts",
                    "routes the same tenant, network and asset twice",
                );
            }
        }
        Ok(())
    }
}

/// True when `name` is a valid account name (the database checks the same pattern).
pub fn account_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || *b == b'-')
}
