//! The webhook inbox service: the HTTP ingress that verifies and records inbound webhooks before
//! acknowledging them ([`ingress`]), the processor that applies them idempotently
//! ([`processor`]), the operator API over dead letters and quarantines ([`operator`]), the
//! retention job for raw bodies, and `/metrics`.
//!
//! It never settles or releases a withdrawal on a webhook's word: a hint for the watcher at most
//! ([`hint`]), or a wake-up of the custodian executor's own lookup ([`processor::wake`]).

pub mod config;
pub mod hint;
pub mod ingress;
pub mod keys;
pub mod metrics;
pub mod operator;
pub mod processor;
mod recorder;
mod setup;

pub use config::Config;
pub use setup::{StartError, key_ring, processor};
use setup::{spawn_processors, spawn_retention};

use opledger_server::Runtime;
use opledger_server::serve as server;
use opledger_store::roles::InboxStore;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tonic::service::Routes;

pub use opledger_proto::v1::inbox_service_server::SERVICE_NAME;

/// The operator API's routes (API keys cached for `auth_ttl`).
pub fn routes(store: InboxStore, auth_ttl: Duration) -> Routes {
    let auth = Arc::new(opledger_grpc::Authenticator::new(store.keys(), auth_ttl));
    Routes::new(
        opledger_proto::v1::inbox_service_server::InboxServiceServer::new(operator::InboxApi::new(
            store, auth,
        )),
    )
}

/// Connects the store, binds the configured addresses and serves until Ctrl-C or SIGTERM.
pub async fn run(config: Config) -> Result<(), StartError> {
    let store_config = opledger_server::store_config(&config.base);
    let (runtime, [http]) = Runtime::start_with(
        SERVICE_NAME,
        &config.base,
        [config.http_listen],
        store_config,
    )
    .await?;
    serve(&config, runtime, http, server::shutdown_signal()).await
}

/// Serves the ingress on `http`, and the operator API and metrics on `runtime`'s listeners, and
/// runs the processors and the retention job, until `shutdown` resolves. [`run`] calls it; tests
/// call it in-process over a `Runtime::new`.
pub async fn serve(
    config: &Config,
    mut runtime: Runtime,
    http: TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), StartError> {
    let store = runtime.store().inbox();
    let ring = key_ring(config)?;
    let stats = Arc::new(metrics::IngressStats::default());
    let settings = config.ingress();
    let ingress = ingress::router(store.clone(), ring.clone(), stats.clone(), settings);
    let limits = runtime.limits();
    runtime.background(async move {
        opledger_grpc::listener::serve_http(http, ingress, limits, std::future::pending()).await;
    });
    runtime.metrics(metrics::router(store.clone(), stats));
    spawn_processors(config, &mut runtime, &ring);
    spawn_retention(config, &mut runtime);
    let routes = routes(store, config.api_keys.ttl());
    Ok(runtime.serve_until(routes, None, shutdown).await?)
}
