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
pub mod metrics;

pub use attest::{Outcome, Witness};
pub use config::Config;

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

/// A witness for `config` over `store`, counting into `counters`.
pub fn witness(
    config: &Config,
    store: Store,
    counters: Arc<metrics::Counters>,
) -> Result<Witness, StartError> {
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
    Ok(Witness::new(
        store,
        networks,
        config.witness_id.clone(),
        counters,
    ))
}

/// Connects the store, runs a pass every `poll_interval_ms` and serves health and metrics until
/// Ctrl-C or SIGTERM.
pub async fn run(config: Config) -> Result<(), StartError> {
    let [listener, metrics_listener] =
        server::bind_all([config.listen, config.metrics_listen]).await?;
    let store = server::connect(&config.database_url.0, config.store_config()).await?;
    let counters = Arc::new(metrics::Counters::default());
    let worker = witness(&config, store.clone(), counters.clone())?;
    let limits = config.listener.limits();
    let metrics = tokio::spawn(opledger_grpc::listener::serve_http(
        metrics_listener,
        metrics::router(store.clone(), counters),
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
