//! The operations service: withdrawals as durable, tenant-scoped operations with their ledger
//! holds, over gRPC.
//!
//! `main.rs` only loads configuration and calls [`run`]; tests serve the same service in-process
//! through [`serve`]. Before anything is stored, a create must pass [`checks`]: the network is in
//! the registry, its transfers can carry the memo, a signer holds the tenant's hot wallet for it.
//! Protobuf types stop at [`convert`]: the store and domain never see them.

pub mod checks;
pub mod config;
mod convert;
mod paging;
mod service;

pub use checks::CreateChecks;
pub use config::Config;
pub use service::OperationsApi;

use opledger_grpc::Authenticator;
use opledger_proto::v1::operations_service_server::OperationsServiceServer;
pub use opledger_proto::v1::operations_service_server::SERVICE_NAME;
use opledger_server::Runtime;
use opledger_server::ServeError;
use opledger_server::serve as server;
use opledger_store::roles::OperationsStore;
use std::future::Future;
use std::sync::Arc;
use tokio::net::TcpListener;
use tonic::service::Routes;

/// The service's routes without create checks (no network registry, no executor check): for
/// embedders that provision no signer, such as benchmarks. A deployment serves [`routes_with`]
/// the checks of its configuration, through [`run`] or [`serve`].
pub fn routes(store: OperationsStore, auth: Arc<Authenticator>) -> Routes {
    routes_with(store, auth, Arc::new(CreateChecks::none()))
}

/// The service's routes, refusing the creates `checks` refuses.
pub fn routes_with(
    store: OperationsStore,
    auth: Arc<Authenticator>,
    checks: Arc<CreateChecks>,
) -> Routes {
    Routes::new(OperationsServiceServer::new(OperationsApi::with_checks(
        store, auth, checks,
    )))
}

/// Serves the service as `config` sets it (create checks, API-key cache) over `store` on
/// `listener`, with health and reflection, until `shutdown` resolves. [`run`] calls it; tests
/// call it in-process.
pub async fn serve(
    listener: TcpListener,
    store: OperationsStore,
    config: &Config,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let routes = routes_for(store.clone(), config);
    server::serve_ready(
        listener,
        SERVICE_NAME,
        routes,
        None,
        config.base.listener.limits(),
        store.probe(opledger_server::readiness::PROBE_TIMEOUT),
        shutdown,
    )
    .await
}

/// The routes `config` sets up: its create checks, its API-key cache.
fn routes_for(store: OperationsStore, config: &Config) -> Routes {
    let checks = CreateChecks::from_config(config);
    if checks.accepts_every_network() {
        tracing::warn!(
            "no network registry configured ([networks.<id>]): every network is accepted and \
             memos are not checked"
        );
    }
    let auth = Arc::new(Authenticator::new(store.keys(), config.api_keys.ttl()));
    routes_with(store, auth, Arc::new(checks))
}

/// Binds the configured addresses, then connects the store, and serves until Ctrl-C or SIGTERM,
/// with its gRPC metrics on `metrics_listen`.
pub async fn run(config: Config) -> Result<(), ServeError> {
    let (runtime, []) =
        Runtime::start_with(SERVICE_NAME, &config.base, [], config.store_config()).await?;
    let routes = routes_for(runtime.store().operations(), &config);
    runtime.serve(routes, None).await
}
