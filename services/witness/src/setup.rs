//! The witness's parts built from its configuration: its evidence readers and its two witnesses.

use crate::attest::Witness;
use crate::config::Config;
use crate::credits::CreditWitness;
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
    /// The server could not start or failed.
    #[error(transparent)]
    Serve(#[from] ServeError),
}

/// The witness's evidence readers, one per configured network.
pub(crate) fn readers(
    config: &Config,
) -> Result<HashMap<String, opledger_chain::EvidenceReader>, StartError> {
    let timeout = Duration::from_millis(config.rpc_timeout_ms);
    let mut networks = HashMap::new();
    for (network, settings) in &config.evidence {
        let headers = config.rpc_headers.get(network);
        let reader = opledger_chain::evidence::service_reader(
            network,
            Some(settings),
            timeout,
            config.rpc_ca.as_deref(),
            headers
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.as_str(), v.0.as_str())),
        )
        .map_err(|source| StartError::Evidence {
            network: network.clone(),
            source,
        })?;
        networks.insert(network.clone(), reader);
    }
    Ok(networks)
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
