//! The operations service: withdrawals as durable, tenant-scoped operations with their ledger
//! holds, over gRPC.
//!
//! `main.rs` only loads configuration and calls [`run`]; tests start the same server in-process
//! with [`serve`]. Protobuf types stop at [`convert`]: the store and domain never see them.

pub mod config;
mod convert;
mod error;
mod paging;
mod service;

pub use config::Config;
pub use service::OperationsApi;

use opledger_grpc::{Authenticator, server};
use opledger_proto::v1::operations_service_server::OperationsServiceServer;
use opledger_store::Store;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;

/// Serves the operations API, health and reflection on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    store: Store,
    auth_cache_ttl: Duration,
    shutdown: impl Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    let auth = Arc::new(Authenticator::new(store.clone(), auth_cache_ttl));
    let api = OperationsApi::new(store, auth);
    let (health, health_service) = server::health();
    health
        .set_serving::<OperationsServiceServer<OperationsApi>>()
        .await;
    tonic::transport::Server::builder()
        .add_service(health_service)
        .add_service(server::reflection()?)
        .add_service(OperationsServiceServer::new(api))
        .serve_with_incoming_shutdown(
            TcpIncoming::from(listener).with_nodelay(Some(true)),
            shutdown,
        )
        .await?;
    Ok(())
}

/// Connects the store, binds the configured address and serves until Ctrl-C or SIGTERM.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let store = Store::connect(&config.database_url, config.store_config())
        .await
        .map_err(|e| anyhow::anyhow!("cannot connect to the database: {}", e.log_safe()))?;
    let listener = TcpListener::bind(config.listen).await?;
    tracing::info!(listen = %listener.local_addr()?, "operations service listening");
    serve(
        listener,
        store,
        Duration::from_secs(config.auth_cache_ttl_secs),
        server::shutdown_signal(),
    )
    .await
}
