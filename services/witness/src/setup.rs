//! The witness's parts built from its configuration: its evidence readers, its custodian
//! accounts and its three passes.

use crate::attest::Witness;
use crate::config::Config;
use crate::credits::CreditWitness;
use crate::custodian::CustodianWitness;
use crate::metrics;
use opledger_server::ServeError;
use opledger_store::roles::WitnessStore;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Why the witness could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A network's evidence endpoints or settings are refused.
    #[error("evidence for network {network}: {source}")]
    Evidence {
        /// The network id.
        network: String,
        /// Why.
        source: opledger_chain::evidence::ReaderError,
    },
    /// A custodian account's settings or credentials are refused.
    #[error("custodian account {account}: {source}")]
    Custodian {
        /// The account's name.
        account: String,
        /// Why.
        source: opledger_custodian::SetupError,
    },
    /// The server could not start or failed.
    #[error(transparent)]
    Serve(#[from] ServeError),
}

/// The witness's evidence readers, one per configured network.
pub(crate) fn readers(
    config: &Config,
) -> Result<HashMap<String, opledger_chain::EvidenceReader>, StartError> {
    opledger_chain::links::evidence_readers(
        &config.evidence,
        config.rpc_ca.as_deref(),
        &config.rpc_headers,
        Duration::from_millis(config.rpc_timeout_ms),
    )
    .map_err(|(network, source)| StartError::Evidence { network, source })
}

/// A witness of releases for `config` over `store`, counting into `counters`.
pub fn witness(
    config: &Config,
    store: WitnessStore,
    counters: Arc<metrics::Counters>,
) -> Result<Witness, StartError> {
    Ok(Witness::new(
        store,
        readers(config)?,
        config.witness_id.clone(),
        counters,
    ))
}

/// A witness of credits for `config` over `store`.
pub fn credit_witness(config: &Config, store: WitnessStore) -> Result<CreditWitness, StartError> {
    Ok(CreditWitness::new(
        config,
        store,
        Arc::new(readers(config)?),
    ))
}

/// A custodian pass for `config` over `store`, counting into `counters`: one adapter per
/// `[[custodian_accounts]]` entry, built with the witness's own credentials.
pub fn custodian_witness(
    config: &Config,
    store: WitnessStore,
    counters: Arc<metrics::Counters>,
) -> Result<CustodianWitness, StartError> {
    let mut accounts = HashMap::new();
    for route in &config.custodian_accounts {
        let adapter =
            opledger_custodian::build(&route.provider).map_err(|source| StartError::Custodian {
                account: route.name.clone(),
                source,
            })?;
        // Every key of a validated configuration parses.
        if let Some(key) = route.key() {
            accounts.insert(key, adapter);
        }
    }
    Ok(CustodianWitness::new(
        store,
        accounts,
        config.witness_id.clone(),
        counters,
    ))
}

/// The witness's passes, run one after the other every `poll_interval_ms`: proposed releases
/// (chain evidence), proposed credits, proposed custodian releases.
#[derive(Debug)]
pub(crate) struct Passes {
    releases: Witness,
    credits: CreditWitness,
    custodian: CustodianWitness,
    counters: Arc<metrics::Counters>,
}

impl Passes {
    /// The passes of `config` over `store`; one evidence reader per network, shared by the
    /// release and credit passes (built once: its settings warn once).
    pub(crate) fn new(
        config: &Config,
        store: WitnessStore,
        counters: Arc<metrics::Counters>,
    ) -> Result<Passes, StartError> {
        let networks = readers(config)?;
        let id = config.witness_id.clone();
        Ok(Passes {
            releases: Witness::new(store.clone(), networks.clone(), id, counters.clone()),
            credits: CreditWitness::new(config, store.clone(), Arc::new(networks)),
            custodian: custodian_witness(config, store, counters.clone())?,
            counters,
        })
    }

    /// One pass of each, up to `batch` items each.
    pub(crate) async fn tick(&self, batch: u32) {
        self.releases.tick(batch).await;
        for outcome in self.credits.tick(batch).await {
            self.counters.count_credit(outcome);
        }
        self.custodian.tick(batch).await;
    }
}
