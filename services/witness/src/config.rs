//! Typed configuration: defaults, then the TOML file named by `OPLEDGER_WITNESS_CONFIG`, then
//! `OPLEDGER_WITNESS_*` environment variables, then validation.

pub use opledger_config::TrustRootConfig;
use opledger_config::{ConfigError, Secret, ServiceBase};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The witness's configuration.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The keys every service has (listen addresses, database pool, listener limits).
    #[serde(flatten)]
    pub base: ServiceBase,
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
    /// Tenants whose operator credits (and deposits without chain evidence) this witness verifies
    /// (`[[trust_roots]]`, the same keys as the signer's): a credit statement counts only under a
    /// trust statement signed by one of the tenant's pinned administrator keys. A tenant without
    /// an entry has such credits left pending.
    #[serde(default)]
    pub trust_roots: Vec<TrustRootConfig>,
    /// The assets of deposits per network id (`[deposit_assets.<id>]`): `native`, the asset code
    /// of the network's coin, and `tokens`, ERC-20 contracts (0x...) by asset code. A deposit of
    /// an asset not listed for its network is left pending.
    #[serde(default)]
    pub deposit_assets: BTreeMap<String, DepositAssets>,
    /// The witness's own accounts at custodians (`[[custodian_accounts]]`, the keys of the
    /// custodian executor's `[[accounts]]`: `name`, `tenant`, `network`, `asset` and
    /// `[custodian_accounts.provider]`), with the witness's own read-only credentials at the
    /// provider, never the executor's. A release the executor proposes is attested only from the
    /// witness's own lookup of the provider's record through the account of the withdrawal's
    /// tenant, network and asset; a proposal without an account here is left unattested.
    #[serde(default)]
    pub custodian_accounts: Vec<opledger_custodian::AccountRoute>,
    /// Milliseconds between passes.
    pub poll_interval_ms: u64,
    /// Proposals examined per pass.
    pub batch_size: u32,
    /// Milliseconds a node may take to answer.
    pub rpc_timeout_ms: u64,
}

opledger_config::service_config!(Config);

/// What deposits on one network may be.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DepositAssets {
    /// The asset code of the network's native coin (`ETH`), if deposits of it are credited.
    #[serde(default)]
    pub native: Option<String>,
    /// ERC-20 contracts (0x and 40 hex digits) by asset code.
    #[serde(default)]
    pub tokens: BTreeMap<String, String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            base: ServiceBase::loopback(15057, 9107, 4),
            witness_id: "witness".to_owned(),
            evidence: BTreeMap::new(),
            rpc_ca: None,
            rpc_headers: BTreeMap::new(),
            trust_roots: Vec::new(),
            deposit_assets: BTreeMap::new(),
            custodian_accounts: Vec::new(),
            poll_interval_ms: 1_000,
            batch_size: 64,
            rpc_timeout_ms: 5_000,
        }
    }
}

impl Config {
    /// Loads defaults, then `file` if given, then the environment, and validates.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let config: Config = opledger_config::load("OPLEDGER_WITNESS_", file)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks a configuration built in code the way [`Config::load`] checks a loaded one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.base.validate()?;
        let invalid = |field, problem| Err(ConfigError::Invalid { field, problem });
        if self.evidence.is_empty() {
            return invalid("evidence", "must name at least one network");
        }
        opledger_chain::links::check_reader_settings(&self.evidence, &self.rpc_headers)?;
        if self.witness_id.is_empty() || self.witness_id.len() > 128 {
            return invalid("witness_id", "must be 1 to 128 characters");
        }
        self.validate_trust_roots()?;
        self.validate_deposit_assets()?;
        if let Err(problem) = opledger_custodian::check_routes(&self.custodian_accounts) {
            return invalid("custodian_accounts", problem);
        }
        if self.poll_interval_ms == 0 || self.batch_size == 0 || self.rpc_timeout_ms == 0 {
            return invalid(
                "poll_interval_ms",
                "poll_interval_ms, batch_size and rpc_timeout_ms must be above zero",
            );
        }
        Ok(())
    }

    fn validate_trust_roots(&self) -> Result<(), ConfigError> {
        let invalid = |field, problem| Err(ConfigError::Invalid { field, problem });
        let mut tenants = std::collections::BTreeSet::new();
        for root in &self.trust_roots {
            let Ok(tenant) = root.tenant_id.parse::<uuid::Uuid>() else {
                return invalid("trust_roots.tenant_id", "must be a tenant UUID");
            };
            if !tenants.insert(tenant) {
                return invalid("trust_roots.tenant_id", "names a tenant twice");
            }
            if root.admin_public_keys.is_empty() {
                return invalid(
                    "trust_roots.admin_public_keys",
                    "must list at least one key",
                );
            }
            for key in &root.admin_public_keys {
                let parsed = hex::decode(key)
                    .ok()
                    .and_then(|bytes| opledger_domain::approval::verifying_key(&bytes).ok());
                if parsed.is_none() {
                    return invalid(
                        "trust_roots.admin_public_keys",
                        "must be Ed25519 public keys of 64 hex digits",
                    );
                }
            }
            if root.min_version == 0 {
                return invalid("trust_roots.min_version", "must be at least 1");
            }
        }
        Ok(())
    }

    fn validate_deposit_assets(&self) -> Result<(), ConfigError> {
        let invalid = |field, problem| Err(ConfigError::Invalid { field, problem });
        for (network, assets) in &self.deposit_assets {
            if !self.evidence.contains_key(network) {
                return invalid(
                    "deposit_assets",
                    "names a network without an [evidence] entry",
                );
            }
            let codes = assets.native.iter().chain(assets.tokens.keys());
            for code in codes {
                if opledger_domain::payload::AssetCode::parse(code).is_err() {
                    return invalid("deposit_assets", "asset codes must match [A-Z0-9]{1,16}");
                }
            }
            if assets
                .native
                .as_ref()
                .is_some_and(|n| assets.tokens.contains_key(n))
            {
                return invalid("deposit_assets", "an asset is both native and a token");
            }
            for contract in assets.tokens.values() {
                if token_address(contract).is_none() {
                    return invalid("deposit_assets.tokens", "must be 0x and 40 hex digits");
                }
            }
        }
        Ok(())
    }
}

/// A token contract address (`0x` and 40 hex digits, either case).
pub fn token_address(text: &str) -> Option<[u8; 20]> {
    let digits = text.strip_prefix("0x")?;
    let mut out = [0_u8; 20];
    hex::decode_to_slice(digits, &mut out).ok()?;
    Some(out)
}
