//! Standard server furniture: logging and tracing, health, reflection, and serving a service's
//! routes (every served call is traced by `opledger_telemetry::grpc::ServerLayer`).

use crate::Authenticator;
use opledger_store::{Store, StoreConfig, StoreError};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tonic::service::Routes;
use tonic::transport::ServerTlsConfig;
use tonic::transport::server::TcpIncoming;
use tonic_health::ServingStatus;

/// Why a service could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The database could not be reached at start (the URL is never printed).
    #[error("cannot connect to the database: {0}")]
    Database(String),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The configured address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The reflection service could not be built from the descriptors.
    #[error("reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// The gRPC server failed.
    #[error("grpc server: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// Builds a service's routes from its store and authenticator.
pub type MakeRoutes = fn(Store, Arc<Authenticator>) -> Routes;

/// Serves one opledger API (`make` builds its routes) with health and reflection on `listener`
/// until `shutdown` resolves. Tests call this in-process; [`run`] calls it from `main`.
pub async fn serve_api(
    listener: TcpListener,
    store: Store,
    auth_cache_ttl: Duration,
    service_name: &str,
    make: MakeRoutes,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let auth = Arc::new(Authenticator::new(store.clone(), auth_cache_ttl));
    serve(listener, service_name, make(store, auth), shutdown).await
}

/// Connects the store and binds the listen address: what every service does before serving.
pub async fn connect_and_bind(
    database_url: &str,
    store_config: StoreConfig,
    listen: SocketAddr,
) -> Result<(Store, TcpListener), ServeError> {
    let store = Store::connect(database_url, store_config)
        .await
        .map_err(|e: StoreError| ServeError::Database(e.log_safe()))?;
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: listen,
            source,
        })?;
    Ok((store, listener))
}

/// Binds `addr` and serves this process's gRPC metrics there in the background.
pub async fn spawn_metrics(addr: SocketAddr) -> Result<tokio::task::JoinHandle<()>, ServeError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    Ok(crate::metrics::spawn_endpoint(listener))
}

/// Connects the store, binds `listen` and serves one API until Ctrl-C or SIGTERM, with its gRPC
/// metrics on `metrics_listen`.
pub async fn run(
    database_url: &str,
    store_config: StoreConfig,
    listen: SocketAddr,
    metrics_listen: SocketAddr,
    auth_cache_ttl: Duration,
    service_name: &str,
    make: MakeRoutes,
) -> Result<(), ServeError> {
    let (store, listener) = connect_and_bind(database_url, store_config, listen).await?;
    let _metrics = spawn_metrics(metrics_listen).await?;
    serve_api(
        listener,
        store,
        auth_cache_ttl,
        service_name,
        make,
        shutdown_signal(),
    )
    .await
}

/// Serves `routes` plus health (reporting `service_name` as serving) and reflection on
/// `listener`, with TCP_NODELAY, until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    service_name: &str,
    routes: Routes,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    serve_tls(listener, service_name, routes, None, shutdown).await
}

/// Like [`serve`], over TLS when `tls` is given (with a client CA: mutual TLS, so only holders of
/// a certificate that CA issued can connect at all).
pub async fn serve_tls(
    listener: TcpListener,
    service_name: &str,
    routes: Routes,
    tls: Option<ServerTlsConfig>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_service_status(service_name, ServingStatus::Serving)
        .await;
    let routes = routes
        .add_service(health_service)
        .add_service(reflection()?);
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(listen = %addr, service = service_name, "listening");
    }
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        builder = builder.tls_config(tls)?;
    }
    builder
        .layer(crate::metrics::MetricsLayer::new(service_name))
        .layer(opledger_telemetry::grpc::ServerLayer::new(service_name))
        .add_routes(routes)
        .serve_with_incoming_shutdown(
            TcpIncoming::from(listener).with_nodelay(Some(true)),
            shutdown,
        )
        .await?;
    Ok(())
}

/// Starts JSON logs filtered by `RUST_LOG` (default `info`), without span export. Safe to call
/// more than once. Services call [`init_telemetry`] instead.
pub fn init_logging() {
    opledger_telemetry::init_logs();
}

/// Starts JSON logs filtered by `RUST_LOG` (default `info`), each line logged inside a traced span
/// carrying `trace_id` and `span_id`, and, when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, span export over OTLP/gRPC with `service_name`
/// as `service.name` unless `OTEL_SERVICE_NAME` is set. Call it inside the tokio runtime and
/// shut the returned handle down on exit (it flushes buffered spans).
pub fn init_telemetry(service_name: &str) -> opledger_telemetry::Telemetry {
    opledger_telemetry::init(service_name)
}

/// The gRPC server-reflection service over every opledger proto.
pub fn reflection() -> Result<
    tonic_reflection::server::v1::ServerReflectionServer<
        impl tonic_reflection::server::v1::ServerReflection,
    >,
    tonic_reflection::server::Error,
> {
    tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(opledger_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
}

/// Resolves when the process receives Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}
