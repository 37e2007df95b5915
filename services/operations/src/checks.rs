//! What a create must satisfy before anything is stored: the network is one the platform pays
//! out on, its transfers can carry the payload's memo (so that what is approved is what is
//! executed, field by field), and someone executes it: a custodian where the tenant's network is
//! routed to one, otherwise a signer holding an ACTIVE hot wallet of the tenant for it.

use crate::config::{Config, NetworkPolicy, routes};
use opledger_domain::ids::TenantId;
use opledger_domain::operation::Executor;
use opledger_domain::payload::{NetworkId, WithdrawalPayload};
use opledger_store::StoreError;
use opledger_store::roles::OperationsStore;
use std::collections::HashSet;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Why a create is refused before anything is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The network is not in the registry.
    UnknownNetwork,
    /// The payload has a memo and the network's transfers cannot carry one.
    MemoNotCarried,
    /// No signer registered an ACTIVE hot wallet of the tenant for the network.
    NoExecutor,
}

/// The registry's verdict on a payload, without I/O. An empty registry accepts everything.
pub fn registry_verdict(
    networks: &BTreeMap<String, NetworkPolicy>,
    payload: &WithdrawalPayload,
) -> Result<(), Refusal> {
    if networks.is_empty() {
        return Ok(());
    }
    let policy = networks
        .get(payload.network.as_str())
        .ok_or(Refusal::UnknownNetwork)?;
    if payload.memo.is_some() && !policy.memo {
        return Err(Refusal::MemoNotCarried);
    }
    Ok(())
}

/// Who executes a withdrawal of `tenant` on `network`: the custodian when the pair is routed to
/// one, the local signer otherwise.
pub fn executor_for(
    custodian: &HashSet<(TenantId, String)>,
    tenant: TenantId,
    network: &NetworkId,
) -> Executor {
    if custodian.contains(&(tenant, network.as_str().to_owned())) {
        Executor::Custodian
    } else {
        Executor::LocalSigner
    }
}

/// The create checks of one service instance.
#[derive(Debug, Default)]
pub struct CreateChecks {
    networks: BTreeMap<String, NetworkPolicy>,
    custodian: HashSet<(TenantId, String)>,
    require_executor: bool,
    cache_ttl: Duration,
    /// (tenant, network) -> when an ACTIVE executor was last found. Only positive answers are
    /// kept: a wallet registered a moment ago is accepted at once.
    found: Mutex<HashMap<(TenantId, String), Instant>>,
}

impl CreateChecks {
    /// No registry and no executor check: every well-formed create goes to the store.
    pub fn none() -> CreateChecks {
        CreateChecks::default()
    }

    /// The checks `config` asks for.
    pub fn from_config(config: &Config) -> CreateChecks {
        CreateChecks {
            networks: config.networks.clone(),
            // Validated at load; a configuration built in code without load gets no routes.
            custodian: routes(&config.custodian_routes, &config.networks).unwrap_or_default(),
            require_executor: config.require_executor,
            cache_ttl: Duration::from_secs(config.executor_cache_ttl_secs),
            found: Mutex::default(),
        }
    }

    /// True when no network registry is configured.
    pub fn accepts_every_network(&self) -> bool {
        self.networks.is_empty()
    }

    /// Who executes `payload`, or the first check it fails (`Ok(Err(..))`); a store failure is
    /// `Err`.
    pub async fn check(
        &self,
        store: &OperationsStore,
        payload: &WithdrawalPayload,
    ) -> Result<Result<Executor, Refusal>, StoreError> {
        if let Err(refusal) = registry_verdict(&self.networks, payload) {
            return Ok(Err(refusal));
        }
        let executor = executor_for(&self.custodian, payload.tenant_id, &payload.network);
        if executor == Executor::Custodian || !self.require_executor || self.recently_found(payload)
        {
            return Ok(Ok(executor));
        }
        if store
            .has_executor(payload.tenant_id, &payload.network)
            .await?
        {
            self.remember(payload);
            Ok(Ok(executor))
        } else {
            Ok(Err(Refusal::NoExecutor))
        }
    }

    fn key(payload: &WithdrawalPayload) -> (TenantId, String) {
        (payload.tenant_id, payload.network.as_str().to_owned())
    }

    fn recently_found(&self, payload: &WithdrawalPayload) -> bool {
        if self.cache_ttl.is_zero() {
            return false;
        }
        let found = self.found.lock().unwrap_or_else(|p| p.into_inner());
        found
            .get(&Self::key(payload))
            .is_some_and(|at| at.elapsed() < self.cache_ttl)
    }

    fn remember(&self, payload: &WithdrawalPayload) {
        if self.cache_ttl.is_zero() {
            return;
        }
        let mut found = self.found.lock().unwrap_or_else(|p| p.into_inner());
        found.insert(Self::key(payload), Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opledger_domain::amount::Amount;
    use opledger_domain::payload::{AccountName, AssetCode, Destination, Memo, NetworkId};

    fn payload(network: &str, memo: Option<&str>) -> WithdrawalPayload {
        WithdrawalPayload {
            tenant_id: TenantId::new(),
            source_account: AccountName::parse("treasury").expect("account"),
            asset: AssetCode::parse("ETH").expect("asset"),
            network: NetworkId::parse(network).expect("network"),
            destination: Destination::parse("0x70997970c51812dc3a010c7d01b50e0d17dc79c8")
                .expect("destination"),
            memo: memo.map(|m| Memo::parse(m).expect("memo")),
            amount: Amount::parse("1").expect("amount"),
            fee_cap: Amount::parse("0").expect("fee cap"),
            policy_version: 1,
        }
    }

    fn registry() -> BTreeMap<String, NetworkPolicy> {
        BTreeMap::from([
            ("anvil".to_owned(), NetworkPolicy { memo: false }),
            ("stellar".to_owned(), NetworkPolicy { memo: true }),
        ])
    }

    #[test]
    fn a_memo_is_refused_only_where_transfers_cannot_carry_it() {
        let r = registry();
        assert_eq!(registry_verdict(&r, &payload("anvil", None)), Ok(()));
        assert_eq!(
            registry_verdict(&r, &payload("anvil", Some("invoice 7"))),
            Err(Refusal::MemoNotCarried)
        );
        assert_eq!(
            registry_verdict(&r, &payload("stellar", Some("invoice 7"))),
            Ok(())
        );
    }

    #[test]
    fn a_network_outside_a_registry_is_refused_and_an_empty_registry_accepts_all() {
        assert_eq!(
            registry_verdict(&registry(), &payload("mainnet", None)),
            Err(Refusal::UnknownNetwork)
        );
        assert_eq!(
            registry_verdict(&registry(), &payload("mainnet", Some("x"))),
            Err(Refusal::UnknownNetwork),
            "the network is checked before the memo"
        );
        assert_eq!(
            registry_verdict(&BTreeMap::new(), &payload("mainnet", Some("x"))),
            Ok(())
        );
    }
}
