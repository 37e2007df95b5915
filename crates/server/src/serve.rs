//! Standard server furniture: logging and tracing, health, reflection, and serving a service's
//! routes (every served call is traced by `opledger_telemetry::grpc::ServerLayer`).

use opledger_grpc::Authenticator;
use opledger_grpc::listener::{Acceptor, Limits};
use opledger_store::probe::DatabaseProbe;
use opledger_store::roles::KeysStore;
use opledger_store::{Store, StoreConfig};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tonic::service::Routes;
use tonic::transport::ServerTlsConfig;
use tonic_health::ServingStatus;

pub use crate::serve_error::ServeError;

/// Builds a service's routes from its store handle (`S`: its role's) and authenticator.
pub type MakeRoutes<S> = fn(S, Arc<Authenticator>) -> Routes;

/// Serves one opledger API (`make` builds its routes over `store`, its role's handle) with health
/// and reflection on `listener` until `shutdown` resolves. Tests and the benchmarks call this
/// in-process; a service's `run` serves through `opledger_server::Runtime`.
pub async fn serve_api<S: Clone + Into<KeysStore>>(
    listener: TcpListener,
    store: S,
    auth_cache_ttl: Duration,
    service_name: &str,
    make: MakeRoutes<S>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let auth = Arc::new(Authenticator::new(store.clone(), auth_cache_ttl));
    serve(listener, service_name, make(store, auth), shutdown).await
}

/// Binds every address a service listens on, in order, before it opens any outbound connection
/// (so a port cannot be taken by one of its own client sockets first, and a port that is in use
/// fails the start at once, naming the address).
pub async fn bind_all<const N: usize>(
    addrs: [SocketAddr; N],
) -> Result<[TcpListener; N], ServeError> {
    let mut bound = Vec::with_capacity(N);
    for addr in addrs {
        bound.push(bind(addr).await?);
    }
    bound.try_into().map_err(|_| ServeError::Bind {
        addr: addrs[0],
        source: std::io::Error::other("listener count"),
    })
}

/// Binds one listen address; the error names it.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })
}

/// How long a starting service keeps trying to reach its database before it gives up.
pub const DATABASE_START_RETRY: Duration = Duration::from_secs(60);

/// Connects the store (after the listeners are bound: see [`bind_all`]). A database that cannot
/// be reached yet (a connection refused, reset or timed out) is tried again with back-off for up
/// to [`DATABASE_START_RETRY`], so a service whose ports are already bound does not exit on a
/// blip; anything else (a refused login, a bad URL) fails at once.
pub async fn connect(database_url: &str, store_config: StoreConfig) -> Result<Store, ServeError> {
    let started = tokio::time::Instant::now();
    let mut pause = Duration::from_millis(100);
    loop {
        match Store::connect(database_url, store_config.clone()).await {
            Ok(store) => return Ok(store),
            Err(e) if e.may_connect_later() && started.elapsed() < DATABASE_START_RETRY => {
                tracing::warn!(error = %e.log_safe(), retry_in_ms = pause.as_millis() as u64, "database not reachable yet");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
            Err(e) => return Err(ServeError::Database(e.log_safe())),
        }
    }
}

/// Serves this process's gRPC metrics on `listener` within `limits` in the background.
pub fn spawn_metrics(listener: TcpListener, limits: Limits) -> tokio::task::JoinHandle<()> {
    opledger_grpc::metrics::spawn_endpoint(listener, limits)
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
    serve_with(
        listener,
        service_name,
        routes,
        tls,
        Limits::default(),
        shutdown,
    )
    .await
}

/// Serves `routes` plus health and reflection on `listener` (over TLS when `tls` is given)
/// within the listener `limits` (see [`opledger_grpc::listener`]; metadata over the limit and malformed
/// requests get typed answers, see [`opledger_grpc::edge`]), until `shutdown` resolves.
pub async fn serve_with(
    listener: TcpListener,
    service_name: &str,
    routes: Routes,
    tls: Option<ServerTlsConfig>,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    serve_reporting(listener, service_name, routes, tls, limits, None, shutdown).await
}

/// Like [`serve_with`], with `service_name`'s health following the database `probe` checks
/// ([`crate::readiness`]): `NOT_SERVING` while it takes no writes (a failover), `SERVING` again
/// once a primary answers. Every service's `run` serves through this.
pub async fn serve_ready(
    listener: TcpListener,
    service_name: &str,
    routes: Routes,
    tls: Option<ServerTlsConfig>,
    limits: Limits,
    probe: DatabaseProbe,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    serve_reporting(
        listener,
        service_name,
        routes,
        tls,
        limits,
        Some(probe),
        shutdown,
    )
    .await
}

async fn serve_reporting(
    listener: TcpListener,
    service_name: &str,
    routes: Routes,
    tls: Option<ServerTlsConfig>,
    limits: Limits,
    probe: Option<DatabaseProbe>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_service_status(service_name, ServingStatus::Serving)
        .await;
    // Aborted when serving ends (dropping a JoinHandle would leave the task running).
    struct AbortOnDrop(Option<tokio::task::JoinHandle<()>>);
    impl Drop for AbortOnDrop {
        fn drop(&mut self) {
            if let Some(task) = self.0.take() {
                task.abort();
            }
        }
    }
    let _readiness = AbortOnDrop(
        probe.map(|probe| crate::readiness::spawn(health, service_name.to_owned(), probe)),
    );
    let routes = routes
        .add_service(health_service)
        .add_service(reflection_for(service_name)?);
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(listen = %addr, service = service_name, "listening");
    }
    let mut builder = tonic::transport::Server::builder()
        .timeout(limits.request_timeout)
        .http2_keepalive_interval(Some(limits.http2_keepalive_interval))
        .http2_keepalive_timeout(Some(limits.http2_keepalive_timeout))
        .http2_max_header_list_size(opledger_grpc::edge::HARD_HEADER_LIST_BYTES);
    if let Some(tls) = tls {
        builder = builder.tls_config(tls)?;
    }
    let max_header_list_bytes = usize::try_from(limits.max_header_list_bytes).unwrap_or(usize::MAX);
    builder
        .layer(opledger_grpc::metrics::MetricsLayer::new(service_name))
        .layer(opledger_telemetry::grpc::ServerLayer::new(service_name))
        .layer(opledger_grpc::edge::EdgeLayer::new(max_header_list_bytes))
        .add_routes(routes)
        .serve_with_incoming_shutdown(Acceptor::new(listener, &limits).into_incoming(), shutdown)
        .await?;
    Ok(())
}

/// Starts JSON logs filtered by `RUST_LOG` (default `info`), each line logged inside a traced span
/// carrying `trace_id` and `span_id`, and span export over OTLP/gRPC to `telemetry.otlp_endpoint`,
/// or, when that is unset, to `OTEL_EXPORTER_OTLP_ENDPOINT` (or
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) when set. `service.name` is `telemetry.service_name`,
/// else `OTEL_SERVICE_NAME`, else `service_name`. Call it inside the tokio runtime and shut the
/// returned handle down on exit (it flushes buffered spans).
pub fn init_telemetry(
    service_name: &str,
    telemetry: &opledger_config::TelemetryConfig,
) -> opledger_telemetry::Telemetry {
    opledger_telemetry::init_from(&opledger_telemetry::Options {
        service_name: telemetry
            .service_name
            .clone()
            .unwrap_or_else(|| service_name.to_owned()),
        name_configured: telemetry.service_name.is_some(),
        endpoint: telemetry.otlp_endpoint.clone(),
    })
}

/// Every opledger gRPC API, by its fully-qualified name.
pub const API_NAMES: [&str; 5] = [
    opledger_proto::v1::operations_service_server::SERVICE_NAME,
    opledger_proto::v1::approvals_service_server::SERVICE_NAME,
    opledger_proto::v1::signer_service_server::SERVICE_NAME,
    opledger_proto::v1::operator_service_server::SERVICE_NAME,
    opledger_proto::v1::inbox_service_server::SERVICE_NAME,
];

/// What a port serving `service_name` lists through reflection: that API when it is one of
/// [`API_NAMES`] (a worker's port serves none), health and reflection itself, sorted.
pub fn served_names(service_name: &str) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = API_NAMES
        .iter()
        .copied()
        .filter(|name| *name == service_name)
        .collect();
    names.push("grpc.health.v1.Health");
    names.push("grpc.reflection.v1.ServerReflection");
    names.sort_unstable();
    names
}

/// The gRPC server-reflection service of a port serving `service_name`: it resolves symbols of
/// every opledger proto but lists only what the port serves ([`served_names`]), so a client
/// that trusts the list never meets UNIMPLEMENTED.
pub fn reflection_for(
    service_name: &str,
) -> Result<
    tonic_reflection::server::v1::ServerReflectionServer<
        impl tonic_reflection::server::v1::ServerReflection,
    >,
    tonic_reflection::server::Error,
> {
    let mut builder = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(opledger_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET);
    for name in served_names(service_name) {
        builder = builder.with_service_name(name);
    }
    builder.build_v1()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_lists_only_the_api_it_serves() {
        assert_eq!(
            served_names("opledger.v1.SignerService"),
            [
                "grpc.health.v1.Health",
                "grpc.reflection.v1.ServerReflection",
                "opledger.v1.SignerService"
            ]
        );
        // A worker's port (the broadcaster's health name is no API) lists no opledger API.
        assert_eq!(
            served_names("opledger.v1.Broadcaster"),
            [
                "grpc.health.v1.Health",
                "grpc.reflection.v1.ServerReflection"
            ]
        );
        for api in API_NAMES {
            assert_eq!(served_names(api).len(), 3, "{api}");
        }
    }
}
