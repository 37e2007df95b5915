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

/// The executor `config` describes, over `store`: its accounts, trust roots, and the evidence
/// readers of its watched networks with what their asset codes are (`payout_assets`).
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
            stuck_after: Duration::from_secs(config.stuck_after_secs),
        },
    )
    .with_chains(Chains::new(readers).with_assets(config.payout_assets.clone())))
}

/// The operator API (`CustodianOperatorService`) over `store`, with the accounts of `config`.
pub fn operator_routes(
    config: &Config,
    store: opledger_store::roles::CustodianStore,
) -> Result<tonic::service::Routes, StartError> {
    let auth = Arc::new(opledger_grpc::Authenticator::new(
        store.keys(),
        config.api_keys.ttl(),
    ));
    let api = crate::operator::OperatorApi::new(
        store,
        auth,
        Arc::new(Accounts::from_config(config)?),
        config.executor_id.clone(),
    );
    Ok(tonic::service::Routes::new(
        opledger_proto::v1::custodian_operator_service_server::CustodianOperatorServiceServer::new(
            api,
        ),
    ))
}

/// The name the executor's health service reports.
pub const SERVICE_NAME: &str = "opledger.custodian";

/// Connects the store, runs a pass every `poll_interval_ms` and serves health and metrics until
/// Ctrl-C or SIGTERM.
pub async fn run(config: Config) -> Result<(), StartError> {
    let mut runtime = opledger_server::Runtime::start(SERVICE_NAME, &config.base).await?;
    let store = runtime.store().custodian();
    runtime.metrics(crate::metrics::router(store.clone()));
    let worker = Arc::new(executor(&config, store.clone())?);
    let routes = operator_routes(&config, store)?;
    let batch = config.batch_size;
    runtime.every(Duration::from_millis(config.poll_interval_ms), move || {
        let worker = worker.clone();
        async move {
            worker.pass(batch, 8).await;
        }
    });
    Ok(runtime.serve(routes, None).await?)
}
