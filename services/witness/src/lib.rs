//! The witness: the second, independent principal of every release that could pay twice.
//!
//! Releasing the hold of a withdrawal that has a signed attempt needs the reconciler's proposal
//! and the witness's attestation of the same chain evidence (migration 28; the rule is
//! `opledger_domain::witness`). The witness runs as its own binary, deployable on another host,
//! with its own database login (`opledger_witness`: read what a release rests on, record
//! attestations and refusals, nothing else) and its own `[evidence]` endpoints. It never moves an
//! operation, a hold or a balance; it has no API beyond health, and no signer token.

pub mod attest;
pub mod config;
pub mod credits;
pub mod metrics;
pub mod outcome;

pub use attest::Witness;
pub use config::Config;
pub use credits::CreditWitness;
pub use outcome::Outcome;

use opledger_grpc::server::{self, ServeError};
use opledger_store::Store;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tonic::service::Routes;

/// The name the witness's health service reports (it serves no API).
pub const SERVICE_NAME: &str = "opledger.witness";

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
fn readers(config: &Config) -> Result<HashMap<String, opledger_chain::EvidenceReader>, StartError> {
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
    store: Store,
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
pub fn credit_witness(config: &Config, store: Store) -> Result<CreditWitness, StartError> {
    Ok(CreditWitness::new(
        config,
        store,
        Arc::new(readers(config)?),
    ))
}

/// Connects the store, runs a pass every `poll_interval_ms` and serves health and metrics until
/// Ctrl-C or SIGTERM.
pub async fn run(config: Config) -> Result<(), StartError> {
    let [listener, metrics_listener] =
        server::bind_all([config.listen, config.metrics_listen]).await?;
    let store = server::connect(&config.database_url.0, config.store_config()).await?;
    let counters = Arc::new(metrics::Counters::default());
    let scrape_counters = counters.clone();
    // One reader per network, shared by both passes (built once: its settings warn once).
    let networks = readers(&config)?;
    let worker = Witness::new(
        store.clone(),
        networks.clone(),
        config.witness_id.clone(),
        counters.clone(),
    );
    let credits = CreditWitness::new(&config, store.clone(), Arc::new(networks));
    let limits = config.listener.limits();
    let metrics = tokio::spawn(opledger_grpc::listener::serve_http(
        metrics_listener,
        metrics::router(store.clone(), scrape_counters),
        limits,
        std::future::pending(),
    ));
    let (batch, poll) = (
        config.batch_size,
        Duration::from_millis(config.poll_interval_ms),
    );
    let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
    let work = tokio::spawn(async move {
        loop {
            worker.tick(batch).await;
            for outcome in credits.tick(batch).await {
                counters.count_credit(outcome);
            }
            tokio::select! {
                _ = &mut stop_rx => return,
                () = tokio::time::sleep(poll) => {}
            }
        }
    });
    let served = server::serve_ready(
        listener,
        SERVICE_NAME,
        Routes::default(),
        None,
        limits,
        &store,
        server::shutdown_signal(),
    )
    .await;
    let _ = stop_tx.send(());
    let _ = work.await;
    metrics.abort();
    Ok(served?)
}
