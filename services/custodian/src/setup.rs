//! The executor built from its configuration.

use crate::accounts::{AccountError, Accounts};
use crate::chain::Chains;
use crate::config::Config;
use crate::executor::{Cadence, Executor};
use std::sync::Arc;
use std::time::Duration;

/// Why the executor could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// An account's settings or secrets are refused.
    #[error(transparent)]
    Account(#[from] AccountError),
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
    Serve(#[from] opledger_server::ServeError),
}

/// The executor `config` describes, over `store`: its accounts, trust roots and the evidence
/// readers of its watched networks.
pub fn executor(
    config: &Config,
    store: opledger_store::roles::CustodianStore,
) -> Result<Executor, StartError> {
    let readers = opledger_chain::links::evidence_readers(
        &config.evidence,
        config.rpc_ca.as_deref(),
        &config.rpc_headers,
        Duration::from_millis(config.rpc_timeout_ms),
    )
    .map_err(|(network, source)| StartError::Evidence { network, source })?;
    Ok(Executor::new(
        store,
        Accounts::from_config(config)?,
        opledger_trust::TrustRoots::new(&config.trust_roots),
        config.executor_id.clone(),
        Cadence {
            follow_every: Duration::from_secs(config.follow_every_secs),
            lease: Duration::from_secs(config.lease_secs),
        },
    )
    .with_chains(Chains::new(readers)))
}

/// The name the executor's health service reports (it serves no API).
pub const SERVICE_NAME: &str = "opledger.custodian";

/// Connects the store, runs a pass every `poll_interval_ms` and serves health until Ctrl-C or
/// SIGTERM.
pub async fn run(config: Config) -> Result<(), StartError> {
    let mut runtime = opledger_server::Runtime::start(SERVICE_NAME, &config.base).await?;
    let worker = Arc::new(executor(&config, runtime.store().custodian())?);
    let batch = config.batch_size;
    runtime.every(Duration::from_millis(config.poll_interval_ms), move || {
        let worker = worker.clone();
        async move {
            worker.pass(batch, 8).await;
        }
    });
    let routes = tonic::service::Routes::default();
    Ok(runtime.serve(routes, None).await?)
}
