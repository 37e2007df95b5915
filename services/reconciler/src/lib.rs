//! The reconciler: turns UNKNOWN (and stale BROADCAST) withdrawals into outcomes backed by chain
//! evidence, never by its absence. See [`reconcile`] for the decision order.

pub mod config;
pub mod metrics;
pub mod operator;
pub mod reconcile;
mod setup;

pub use config::Config;
pub use reconcile::{Finding, Reconciler};
pub use setup::reconciler;

use opledger_server::Runtime;
pub use opledger_server::StartError;
use opledger_store::roles::ReconcilerStore;
use std::time::Duration;
use tonic::service::Routes;

pub use opledger_proto::v1::operator_service_server::SERVICE_NAME;

/// The operator API's routes over this store and reconciler (API keys cached for `auth_ttl`).
pub fn routes(store: ReconcilerStore, reconciler: Reconciler, auth_ttl: Duration) -> Routes {
    let auth = std::sync::Arc::new(opledger_grpc::Authenticator::new(store.keys(), auth_ttl));
    Routes::new(
        opledger_proto::v1::operator_service_server::OperatorServiceServer::new(
            operator::OperatorApi::new(store, auth, reconciler),
        ),
    )
}

/// Connects the store, runs passes every `poll_interval_ms` and serves the operator API until
/// Ctrl-C or SIGTERM.
pub async fn run(config: Config) -> Result<(), StartError> {
    let mut runtime = Runtime::start(SERVICE_NAME, &config.base).await?;
    let store = runtime.store().reconciler();
    let worker = reconciler(&config, store.clone())?;
    let api = routes(store.clone(), worker.clone(), config.api_keys.ttl());
    runtime.metrics(metrics::router(store));
    let (stale, batch) = (config.stale_broadcast_secs, config.batch_size);
    runtime.every(Duration::from_millis(config.poll_interval_ms), move || {
        let worker = worker.clone();
        async move {
            worker.tick(stale, batch).await;
        }
    });
    Ok(runtime.serve(api, None).await?)
}
