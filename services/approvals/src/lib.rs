//! The approvals service: approvals bound to the exact payload hash, per-tenant approval policy,
//! and rejections that release the hold in the same transaction.
//!
//! `main.rs` only loads configuration and calls [`run`]; tests serve the same [`routes`]
//! in-process. Protobuf types stop at the handlers: the store and domain never see them.

pub mod config;
mod service;

pub use config::Config;
pub use service::ApprovalsApi;

use opledger_grpc::Authenticator;
use opledger_proto::v1::approvals_service_server::ApprovalsServiceServer;
pub use opledger_proto::v1::approvals_service_server::SERVICE_NAME;
use opledger_server::Runtime;
use opledger_server::ServeError;
use opledger_store::roles::ApprovalsStore;
use std::sync::Arc;
use tonic::service::Routes;

/// The service's routes: what [`run`] serves, and tests serve in-process
/// ([`opledger_server::serve::serve_api`]).
pub fn routes(store: ApprovalsStore, auth: Arc<Authenticator>) -> Routes {
    Routes::new(ApprovalsServiceServer::new(ApprovalsApi::new(store, auth)))
}

/// Binds the configured addresses, connects the store and serves until Ctrl-C or SIGTERM.
pub async fn run(config: Config) -> Result<(), ServeError> {
    let runtime = Runtime::start(SERVICE_NAME, &config.base).await?;
    let store = runtime.store().approvals();
    let auth = Arc::new(Authenticator::new(store.keys(), config.api_keys.ttl()));
    let routes = routes(store, auth);
    runtime.serve(routes, None).await
}
