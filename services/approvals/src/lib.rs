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
use opledger_grpc::server::{self, ServeError};
use opledger_proto::v1::approvals_service_server::ApprovalsServiceServer;
pub use opledger_proto::v1::approvals_service_server::SERVICE_NAME;
use opledger_store::Store;
use std::sync::Arc;
use std::time::Duration;
use tonic::service::Routes;

/// The service's routes: what [`opledger_grpc::server::serve_api`] serves, in `main` through
/// [`run`] and in tests in-process.
pub fn routes(store: Store, auth: Arc<Authenticator>) -> Routes {
    Routes::new(ApprovalsServiceServer::new(ApprovalsApi::new(store, auth)))
}

/// Connects the store, binds the configured address and serves until Ctrl-C or SIGTERM.
pub async fn run(config: Config) -> Result<(), ServeError> {
    let ttl = Duration::from_secs(config.auth_cache_ttl_secs);
    let url = &config.database_url.0;
    server::run(
        url,
        config.store_config(),
        (config.listen, config.metrics_listen),
        config.listener.limits(),
        ttl,
        SERVICE_NAME,
        routes,
    )
    .await
}
