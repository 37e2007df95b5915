//! One provider account and the tenant's network and asset it serves: the custodian executor's
//! `[[accounts]]` and the witness's `[[custodian_accounts]]` (each service with its own
//! credentials), checked the same way.

use crate::config::AccountConfig;
use opledger_domain::ids::TenantId;
use opledger_domain::payload::{AssetCode, NetworkId};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

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

impl AccountRoute {
    /// The (tenant, network, asset) this account serves; `None` when the tenant is not a UUID
    /// (refused by [`check_routes`]).
    pub fn key(&self) -> Option<(TenantId, String, String)> {
        let tenant = self.tenant.parse::<TenantId>().ok()?;
        Some((tenant, self.network.clone(), self.asset.clone()))
    }
}

/// The problem of two tenants' `no_lookup` accounts naming one provider wallet.
const SHARED_PRIME_WALLET: &str =
    "names the same no_lookup wallet (base_url, portfolio_id, wallet_id) for two tenants";

/// Checks a list of routes: valid names, tenant UUIDs, network ids and asset codes, no name and
/// no (tenant, network, asset) twice, and no `no_lookup` wallet for two tenants (an operator
/// lists and binds that wallet's transactions, so another tenant's would be shown and bindable).
/// The error is the problem, for the caller's setting name.
pub fn check_routes(routes: &[AccountRoute]) -> Result<(), &'static str> {
    let (mut names, mut keys) = (HashSet::new(), HashSet::new());
    let mut prime_wallets = HashMap::new();
    for route in routes {
        if !account_name(&route.name) {
            return Err("names an account not matching [a-z0-9][a-z0-9_-]{0,62}");
        }
        let Some(key) = route.key() else {
            return Err("names a tenant that is not a UUID");
        };
        if NetworkId::parse(&route.network).is_err() {
            return Err("names an invalid network id");
        }
        if !names.insert(route.name.as_str()) {
            return Err("names the same account twice");
        }
        if AssetCode::parse(&route.asset).is_err() {
            return Err("names an invalid asset code");
        }
        let tenant = key.0;
        if !keys.insert(key) {
            return Err("routes the same tenant, network and asset twice");
        }
        if let Some(wallet) = prime_wallet(route)
            && *prime_wallets.entry(wallet).or_insert(tenant) != tenant
        {
            return Err(SHARED_PRIME_WALLET);
        }
    }
    Ok(())
}

/// The wallet a `no_lookup` account lists and binds from: its base URL as the adapter uses it
/// (normalised when valid; an invalid one is refused when the account is set up) and its
/// portfolio and wallet ids, compared without case so that spelling can only refuse more.
fn prime_wallet(route: &AccountRoute) -> Option<(String, String, String)> {
    let AccountConfig::NoLookup(prime) = &route.provider else {
        return None;
    };
    let base = crate::config::base_url("base_url", &prime.base_url)
        .unwrap_or_else(|_| prime.base_url.clone());
    Some((
        base,
        prime.portfolio_id.to_ascii_lowercase(),
        prime.wallet_id.to_ascii_lowercase(),
    ))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn route(name: &str, tenant: &str, network: &str, asset: &str) -> AccountRoute {
        let provider = serde_json::json!({
            "profile": "lookup_by_reference", "base_url": "http://127.0.0.1:1",
            "api_key_file": "/k", "api_secret_file": "/s", "vault_account_id": "0",
            "asset_id": "ETH", "decimals": 18, "consistency_window_secs": 5,
        });
        AccountRoute {
            name: name.to_owned(),
            tenant: tenant.to_owned(),
            network: network.to_owned(),
            asset: asset.to_owned(),
            provider: serde_json::from_value(provider).expect("provider"),
        }
    }

    fn prime_route(
        name: &str,
        tenant: &str,
        network: &str,
        base: &str,
        wallet: &str,
    ) -> AccountRoute {
        let provider = serde_json::json!({
            "profile": "no_lookup", "base_url": base, "access_key_file": "/a",
            "passphrase_file": "/p", "signing_key_file": "/s", "portfolio_id": "portfolio-1",
            "wallet_id": wallet, "currency_symbol": "ETH", "decimals": 18,
            "consistency_window_secs": 5,
        });
        AccountRoute {
            provider: serde_json::from_value(provider).expect("provider"),
            ..route(name, tenant, network, "ETH")
        }
    }

    const T1: &str = "6f1c1a50-6a43-4a2b-9c1e-2f6a4b1f7c01";
    const T2: &str = "6f1c1a50-6a43-4a2b-9c1e-2f6a4b1f7c02";

    #[test]
    fn routes_are_checked_by_name_tenant_network_asset_and_uniqueness() {
        let ok = route("fireblocks-1", T1, "eth-sepolia", "ETH");
        assert_eq!(check_routes(std::slice::from_ref(&ok)), Ok(()));
        assert!(ok.key().is_some());
        let bad = [
            route("Fireblocks", T1, "eth-sepolia", "ETH"),
            route("a", "acme", "eth-sepolia", "ETH"),
            route("a", T1, "Not A Network!", "ETH"),
            route("a", T1, "eth-sepolia", "eth"),
        ];
        for one in bad {
            assert!(check_routes(&[one]).is_err());
        }
        let twice = [ok.clone(), route("fireblocks-1", T2, "eth-sepolia", "ETH")];
        assert_eq!(check_routes(&twice), Err("names the same account twice"));
        let same_route = [ok, route("other", T1, "eth-sepolia", "ETH")];
        assert_eq!(
            check_routes(&same_route),
            Err("routes the same tenant, network and asset twice")
        );
        assert!(!account_name(""));
        assert!(!account_name(&"a".repeat(64)));
        assert!(account_name(&"a".repeat(63)));
    }

    #[test]
    fn a_no_lookup_wallet_serves_one_tenant() {
        const PRIME: &str = "https://prime.example";
        let acme = prime_route("prime-acme", T1, "eth-sepolia", PRIME, "wallet-1");
        let other = prime_route("prime-other", T2, "eth-sepolia", PRIME, "wallet-1");
        assert_eq!(
            check_routes(&[acme.clone(), other]),
            Err(SHARED_PRIME_WALLET)
        );
        let spelled = prime_route(
            "prime-other",
            T2,
            "eth-mainnet",
            "HTTPS://Prime.Example:443/",
            "WALLET-1",
        );
        assert_eq!(
            check_routes(&[acme.clone(), spelled]),
            Err(SHARED_PRIME_WALLET)
        );

        let same_tenant = prime_route("prime-acme-2", T1, "eth-mainnet", PRIME, "wallet-1");
        assert_eq!(check_routes(&[acme.clone(), same_tenant]), Ok(()));
        let other_wallet = prime_route("prime-other", T2, "eth-sepolia", PRIME, "wallet-2");
        assert_eq!(check_routes(&[acme.clone(), other_wallet]), Ok(()));
        let other_api = prime_route(
            "prime-other",
            T2,
            "eth-sepolia",
            "https://other.example",
            "wallet-1",
        );
        assert_eq!(check_routes(&[acme, other_api]), Ok(()));

        let fireblocks = [
            route("fireblocks-1", T1, "eth-sepolia", "ETH"),
            route("fireblocks-2", T2, "eth-sepolia", "ETH"),
        ];
        assert_eq!(
            check_routes(&fireblocks),
            Ok(()),
            "other profiles unchanged"
        );
    }
}
