//! Typed configuration: defaults, then the TOML file named by `OPLEDGER_CUSTODIAN_CONFIG`, then
//! `OPLEDGER_CUSTODIAN_*` environment variables, then validation.

use opledger_config::{ConfigError, Secret, ServiceBase};
pub use opledger_custodian::{AccountRoute, account_name};
use opledger_domain::evidence::content::Asset;
use opledger_domain::evidence::parse_address;
use opledger_domain::payload::AssetCode;
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
    /// What each watched network's custodian payouts are (`[payout_assets.<id>]`, required for
    /// every watched network with an account): `native`, the asset code of the network's coin
    /// (no default); `tokens`, ERC-20 contracts (0x...) by asset code; `senders`, the addresses
    /// the providers pay from (at least one). A withdrawal settles only once the chain shows its
    /// transaction, final, paying exactly the approved transfer (the coin: its `to` and value;
    /// a token: exactly one `Transfer` of that contract to the destination of the amount) sent
    /// from one of `senders` (the transaction's sender; a token's `Transfer` `from`). An account
    /// whose asset is neither its network's native coin nor one of its tokens is refused at
    /// load. Only watched networks have an entry.
    #[serde(default)]
    pub payout_assets: BTreeMap<String, PayoutAssets>,
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

/// The assets of one watched network's withdrawals, by asset code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PayoutAssets {
    /// The asset code of the network's native coin (named: no default, a network's coin is not
    /// ETH everywhere).
    pub native: String,
    /// ERC-20 contracts (0x and 40 hex digits) by asset code.
    #[serde(default)]
    pub tokens: BTreeMap<String, String>,
    /// The addresses the network's custodian payouts are sent from (the providers' vault or
    /// wallet addresses, 0x and 40 hex digits; at least one): the sender of a native transfer,
    /// the `from` of a token's `Transfer`. A transfer of the same asset and amount to the same
    /// destination sent by anyone else never settles a withdrawal.
    #[serde(default)]
    pub senders: Vec<String>,
}

impl PayoutAssets {
    /// What `code` is on this network: its native coin, a token by its contract, or `None` (not
    /// an asset of the network, or a contract that is not an address: refused at load).
    pub fn resolve(&self, code: &str) -> Option<Asset> {
        if code == self.native {
            return Some(Asset::Native);
        }
        let contract = self.tokens.get(code)?;
        parse_address(contract).map(Asset::Token)
    }

    /// The problem with this entry, if any: asset codes, the native coin named a token too,
    /// contracts that are no address, one contract for two assets.
    fn problem(&self) -> Option<&'static str> {
        let codes = std::iter::once(&self.native).chain(self.tokens.keys());
        if codes.into_iter().any(|c| AssetCode::parse(c).is_err()) {
            return Some("asset codes must match [A-Z0-9]{1,16}");
        }
        if self.tokens.contains_key(&self.native) {
            return Some("an asset is both the native coin and a token");
        }
        if self.senders.is_empty() {
            return Some("senders must name at least one address the custodian pays from");
        }
        if self
            .senders
            .iter()
            .any(|s| s.strip_prefix("0x").and(parse_address(s)).is_none())
        {
            return Some("senders must be 0x and 40 hex digits");
        }
        let mut contracts = std::collections::BTreeSet::new();
        for contract in self.tokens.values() {
            let Some(address) = contract.strip_prefix("0x").and(parse_address(contract)) else {
                return Some("token contracts must be 0x and 40 hex digits");
            };
            if !contracts.insert(address) {
                return Some("names one token contract for two assets");
            }
        }
        None
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            base: ServiceBase::loopback(15058, 9108, 8),
            executor_id: "custodian-executor".to_owned(),
            accounts: Vec::new(),
            trust_roots: Vec::new(),
            evidence: BTreeMap::new(),
            payout_assets: BTreeMap::new(),
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
        self.validate_payout_assets()?;
        opledger_trust::check_trust_roots(&self.trust_roots)?;
        if let Err(problem) = opledger_custodian::check_routes(&self.accounts) {
            return invalid("accounts", problem);
        }
        Ok(())
    }

    /// Each `[payout_assets]` entry is a watched network's and well formed, and every account on
    /// a watched network routes its native coin or one of its tokens.
    fn validate_payout_assets(&self) -> Result<(), ConfigError> {
        let invalid = |field, problem| Err(ConfigError::Invalid { field, problem });
        for (network, assets) in &self.payout_assets {
            if !self.evidence.contains_key(network) {
                return invalid(
                    "payout_assets",
                    "names a network without an [evidence] entry",
                );
            }
            if let Some(problem) = assets.problem() {
                return invalid("payout_assets", problem);
            }
        }
        for account in &self.accounts {
            if !self.evidence.contains_key(&account.network) {
                continue;
            }
            let Some(assets) = self.payout_assets.get(&account.network) else {
                return invalid(
                    "payout_assets",
                    "every watched network with an account needs [payout_assets.<network>]: \
                     its native coin and the addresses its custodian payouts are sent from",
                );
            };
            if assets.resolve(&account.asset).is_none() {
                return invalid(
                    "accounts",
                    "an account's asset is neither the native coin of its watched network \
                     ([payout_assets.<network>] native) nor one of its tokens",
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opledger_custodian::{AccountConfig, FireblocksConfig};

    const USDC: &str = "0x5fbdb2315678afecb367f032d93f642f64180aa3";
    const SENDER: &str = "0x23618e81e3f5cdf7f54c3d65f7fbc0abf5b21e8f";

    fn account(name: &str, network: &str, asset: &str) -> AccountRoute {
        AccountRoute {
            name: name.to_owned(),
            tenant: "00000000-0000-4000-8000-000000000001".to_owned(),
            network: network.to_owned(),
            asset: asset.to_owned(),
            provider: AccountConfig::LookupByReference(FireblocksConfig {
                base_url: "https://custodian.example".to_owned(),
                api_key_file: "/run/secrets/api_key".into(),
                api_secret_file: "/run/secrets/api_secret".into(),
                vault_account_id: "0".to_owned(),
                asset_id: asset.to_owned(),
                decimals: 6,
                timeout_secs: 10,
                ca_file: None,
                consistency_window_secs: 60,
            }),
        }
    }

    /// `anvil` watched, `dark` unwatched, with `accounts` and `payout_assets`.
    fn config(accounts: Vec<AccountRoute>, assets: &[(&str, PayoutAssets)]) -> Config {
        let evidence = opledger_chain::NetworkEvidence {
            urls: vec!["http://127.0.0.1:8545".to_owned()],
            chain_id: 31337,
            quorum: 1,
            confirmations: Some(12),
            finalized: false,
            min_confirmations: 12,
            max_lag_blocks: 8,
            allow_shallow_finality: false,
            insecure_clear_text: false,
        };
        Config {
            accounts,
            evidence: BTreeMap::from([("anvil".to_owned(), evidence)]),
            unwatched_networks: vec!["dark".to_owned()],
            payout_assets: assets
                .iter()
                .map(|(n, a)| ((*n).to_owned(), a.clone()))
                .collect(),
            ..Config::default()
        }
    }

    fn tokens(native: &str, tokens: &[(&str, &str)]) -> PayoutAssets {
        PayoutAssets {
            native: native.to_owned(),
            tokens: tokens
                .iter()
                .map(|(c, a)| ((*c).to_owned(), (*a).to_owned()))
                .collect(),
            senders: vec![SENDER.to_owned()],
        }
    }

    fn refused(config: &Config) -> Option<&'static str> {
        match config.validate() {
            Ok(()) => None,
            Err(ConfigError::Invalid { field, .. }) => Some(field),
            Err(other) => panic!("{other}"),
        }
    }

    #[test]
    fn an_account_routes_its_networks_native_coin_or_one_of_its_tokens() {
        let usdc = [("anvil", tokens("ETH", &[("USDC", USDC)]))];
        for (accounts, assets, field) in [
            // A watched network with an account needs an entry: no default native coin.
            (
                vec![account("a", "anvil", "ETH")],
                &[][..],
                Some("payout_assets"),
            ),
            (
                vec![account("a", "anvil", "ETH")],
                &[("anvil", tokens("ETH", &[]))][..],
                None,
            ),
            (
                vec![account("a", "anvil", "ETH"), account("b", "anvil", "USDC")],
                &usdc[..],
                None,
            ),
            (
                vec![account("a", "anvil", "USDT")],
                &usdc[..],
                Some("accounts"),
            ),
            // Another native coin: ETH is no longer an asset of the network.
            (
                vec![account("a", "anvil", "ETH")],
                &[("anvil", tokens("POL", &[]))][..],
                Some("accounts"),
            ),
            // An unwatched network keeps today's rule: the custodian's record settles alone.
            (vec![account("a", "dark", "USDC")], &[][..], None),
        ] {
            let config = config(accounts, assets);
            assert_eq!(refused(&config), field, "{:?}", config.payout_assets);
        }
    }

    #[test]
    fn payout_assets_are_well_formed_and_only_for_watched_networks() {
        for (network, assets) in [
            ("dark", tokens("ETH", &[])),
            ("nowhere", tokens("ETH", &[])),
            ("anvil", tokens("eth", &[])),
            ("anvil", tokens("ETH", &[("usdc", USDC)])),
            ("anvil", tokens("ETH", &[("ETH", USDC)])),
            (
                "anvil",
                tokens(
                    "ETH",
                    &[("USDC", "5fbdb2315678afecb367f032d93f642f64180aa3")],
                ),
            ),
            (
                "anvil",
                tokens(
                    "ETH",
                    &[("USDC", "0x5fbdb2315678afecb367f032d93f642f64180a")],
                ),
            ),
            ("anvil", tokens("ETH", &[("USDC", USDC), ("USDX", USDC)])),
            (
                "anvil",
                PayoutAssets {
                    senders: vec![],
                    ..tokens("ETH", &[])
                },
            ),
            (
                "anvil",
                PayoutAssets {
                    senders: vec!["23618e81e3f5cdf7f54c3d65f7fbc0abf5b21e8f".to_owned()],
                    ..tokens("ETH", &[])
                },
            ),
        ] {
            let config = config(vec![], &[(network, assets.clone())]);
            assert_eq!(
                refused(&config),
                Some("payout_assets"),
                "{network} {assets:?}"
            );
        }
        assert_eq!(
            refused(&config(
                vec![],
                &[("anvil", tokens("ETH", &[("USDC", USDC)]))]
            )),
            None
        );
    }

    #[test]
    fn an_asset_resolves_to_the_native_coin_or_its_contract() {
        let assets = tokens("ETH", &[("USDC", USDC)]);
        assert_eq!(assets.resolve("ETH"), Some(Asset::Native));
        assert_eq!(
            assets.resolve("USDC"),
            parse_address(USDC).map(Asset::Token)
        );
        assert_eq!(assets.resolve("USDT"), None);
    }
}
